/* One session run from many threads at once: 8 threads x 100 runs of the shipped
 * Fashion-MNIST CNN on one session (a pool of 2 threads that they share), each run with
 * its own input and batch size (1, 2 or 4: several plans per thread), every output
 * compared with the same input's output from a serial run of a separate session. Also:
 * ox_session_memory and ox_session_profile answer for the calling thread only.
 *
 *     test_concurrency SCRATCH MODELS_DIR
 */
#define _GNU_SOURCE
#include "harness.h"

#include <pthread.h>

#define N_THREADS 8
#define N_RUNS    100
#define N_INPUTS  12 /* distinct inputs, cycled through by the threads */
#define MAX_BATCH 4
#define PIXELS    (28 * 28)
#define CLASSES   10

static float inputs[N_INPUTS][MAX_BATCH * PIXELS];
static float want[N_INPUTS][MAX_BATCH * CLASSES];
static int64_t batch_of(int k) {
    return (int64_t[]){1, 2, 4}[k % 3];
}

struct worker {
    ox_session *s;
    int id;
    int runs_ok, mismatches, errors;
    char first_error[256];
};

static void *work(void *arg) {
    struct worker *w = arg;
    for (int r = 0; r < N_RUNS; r++) {
        int k = (w->id * 7 + r) % N_INPUTS;
        int64_t b = batch_of(k);
        ox_tensor in = {.dtype = OX_FLOAT, .rank = 4, .dims = {b, 1, 28, 28}, .data = inputs[k]};
        const ox_tensor *out[1];
        if (ox_session_run(w->s, &in, 1, out) != OX_OK) {
            if (!w->errors++) snprintf(w->first_error, sizeof w->first_error, "%s", ox_errmsg());
            continue;
        }
        if (out[0]->rank != 2 || out[0]->dims[0] != b ||
            memcmp(out[0]->data, want[k], sizeof(float) * (size_t)(b * CLASSES)) != 0)
            w->mismatches++;
        else
            w->runs_ok++;
    }
    return NULL;
}

static void *memory_elsewhere(void *arg) {
    size_t a, n, p;
    const ox_node_time *t;
    int nt;
    ox_session *s = arg;
    bool ok = ox_session_memory(s, &a, &n, &p) == OX_E_INVALID &&
              ox_session_profile(s, false, &t, &nt) == OX_E_INVALID;
    return ok ? s : NULL;
}

int main(int argc, char **argv) {
    const char *models = argc > 2 ? argv[2] : "models";
    char path[4096];
    snprintf(path, sizeof path, "%s/fashion_mnist_cnn.onnx", models);
    ox_model *m;
    if (ox_model_load(path, &m) != OX_OK) {
        printf("FAIL load %s: %s\n", path, ox_errmsg());
        return 1;
    }
    unsigned seed = 12345;
    for (int k = 0; k < N_INPUTS; k++)
        for (int i = 0; i < MAX_BATCH * PIXELS; i++)
            inputs[k][i] = (float)(rand_r(&seed) % 256) / 255.0f;

    /* the oracle: each input run alone, in order, on a session of its own */
    ox_session *ref;
    EXPECT(ox_session_create(m, &(ox_session_options){.n_threads = 1}, &ref) == OX_OK);
    for (int k = 0; k < N_INPUTS; k++) {
        int64_t b = batch_of(k);
        ox_tensor in = {.dtype = OX_FLOAT, .rank = 4, .dims = {b, 1, 28, 28}, .data = inputs[k]};
        const ox_tensor *out[1];
        EXPECT(ox_session_run(ref, &in, 1, out) == OX_OK);
        memcpy(want[k], out[0]->data, sizeof(float) * (size_t)(b * CLASSES));
    }
    ox_session_free(ref);

    ox_session *s;
    EXPECT(ox_session_create(m, &(ox_session_options){.n_threads = 2, .profile = true}, &s) ==
           OX_OK);
    struct worker w[N_THREADS] = {0};
    pthread_t th[N_THREADS];
    for (int i = 0; i < N_THREADS; i++) {
        w[i] = (struct worker){.s = s, .id = i};
        EXPECT(pthread_create(&th[i], NULL, work, &w[i]) == 0);
    }
    int ok = 0, bad = 0, errors = 0;
    for (int i = 0; i < N_THREADS; i++) {
        pthread_join(th[i], NULL);
        ok += w[i].runs_ok;
        bad += w[i].mismatches;
        errors += w[i].errors;
        CHECK(!w[i].errors, "thread %d: %d runs failed, the first with: %s", i, w[i].errors,
              w[i].first_error);
    }
    printf("%d threads x %d runs: %d equal to the serial runs, %d different, %d errors\n",
           N_THREADS, N_RUNS, ok, bad, errors);
    CHECK(ok == N_THREADS * N_RUNS, "%d of %d runs gave the serial run's output", ok,
          N_THREADS * N_RUNS);

    /* a run started on any of the allowed CPUs (one is a worker's: the pool moves the caller
     * off it) leaves the caller's CPU set as it was (executor/pool.c, "Affinity") */
    cpu_set_t all;
    pthread_getaffinity_np(pthread_self(), sizeof all, &all);
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, &all)) continue;
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(c, &one);
        pthread_setaffinity_np(pthread_self(), sizeof one, &one);
        pthread_setaffinity_np(pthread_self(), sizeof all, &all);
        ox_tensor in = {.dtype = OX_FLOAT, .rank = 4, .dims = {1, 1, 28, 28}, .data = inputs[0]};
        const ox_tensor *out[1];
        EXPECT(ox_session_run(s, &in, 1, out) == OX_OK);
        cpu_set_t after;
        pthread_getaffinity_np(pthread_self(), sizeof after, &after);
        CHECK(CPU_EQUAL(&after, &all), "a run started on CPU %d left the caller held", c);
    }
    ox_session_free(s);

    /* a session run by this thread only: another thread's memory and profile questions have
     * no answer (a fresh session: thread ids of joined threads are reused) */
    EXPECT(ox_session_create(m, &(ox_session_options){.n_threads = 1, .profile = true}, &s) ==
           OX_OK);
    ox_tensor in = {.dtype = OX_FLOAT, .rank = 4, .dims = {1, 1, 28, 28}, .data = inputs[0]};
    const ox_tensor *out[1];
    EXPECT(ox_session_run(s, &in, 1, out) == OX_OK);
    pthread_t other;
    void *res = NULL;
    EXPECT(pthread_create(&other, NULL, memory_elsewhere, s) == 0);
    pthread_join(other, &res);
    CHECK(res == s, "a thread that never ran the session got a memory plan or a profile");
    size_t a, n, p;
    EXPECT(ox_session_memory(s, &a, &n, &p) == OX_OK);
    ox_session_free(s);
    ox_model_free(m);
    return harness_finish();
}
