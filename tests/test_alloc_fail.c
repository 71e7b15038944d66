/* Allocation failures: the library's allocator fails at the N-th call, for every N over a
 * model load, an optimization, a session, two runs, an export to memory and the frees; each
 * must end in a clean error (a status and a message, no crash) or in success, and leave no
 * block of the library's allocated (as SQLite's malloc tests do).
 *
 * Linked with -Wl,--wrap for malloc, calloc, realloc, posix_memalign, aligned_alloc and free:
 * every call the library's objects make goes through the wrappers below (calls made inside
 * other shared libraries, protobuf-c and OpenBLAS, do not). Live blocks are kept in a hash
 * set, so a leak is named by the call that made it.
 *
 *     test_alloc_fail SCRATCH MODELS_DIR [--verbose]
 */
#include "harness.h"

void *__real_malloc(size_t n);
void *__real_calloc(size_t a, size_t b);
void *__real_realloc(void *p, size_t n);
int __real_posix_memalign(void **p, size_t a, size_t n);
void *__real_aligned_alloc(size_t a, size_t n);
void __real_free(void *p);

static long calls, fail_at = -1; /* fail the call numbered fail_at (from 1); -1: never */
static bool failed;

/* live blocks: open addressing, pointers only (the wrappers run on one thread here) */
#define SET_SIZE (1 << 20)
static void *live[SET_SIZE];
static long n_live, call_of[SET_SIZE];

static size_t slot_of(void *p) {
    uintptr_t h = (uintptr_t)p >> 4;
    h ^= h >> 17;
    h *= 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 44) & (SET_SIZE - 1);
}

static void track(void *p) {
    if (!p) return;
    size_t i = slot_of(p);
    while (live[i] && live[i] != (void *)1) i = (i + 1) & (SET_SIZE - 1);
    live[i] = p;
    call_of[i] = calls;
    n_live++;
}

static void untrack(void *p) {
    if (!p) return;
    for (size_t i = slot_of(p); live[i]; i = (i + 1) & (SET_SIZE - 1))
        if (live[i] == p) {
            live[i] = (void *)1; /* a tombstone */
            n_live--;
            return;
        }
    /* not ours: a block another library allocated (strdup inside libc, say) */
}

static bool fail_now(void) {
    calls++;
    if (calls == fail_at) {
        failed = true;
        return true;
    }
    return false;
}

void *__wrap_malloc(size_t n) {
    if (fail_now()) return NULL;
    void *p = __real_malloc(n);
    track(p);
    return p;
}
void *__wrap_calloc(size_t a, size_t b) {
    if (fail_now()) return NULL;
    void *p = __real_calloc(a, b);
    track(p);
    return p;
}
void *__wrap_realloc(void *p, size_t n) {
    if (fail_now()) return NULL;
    void *q = __real_realloc(p, n);
    if (q || !n) untrack(p);
    track(q);
    return q;
}
int __wrap_posix_memalign(void **p, size_t a, size_t n) {
    if (fail_now()) return 12; /* ENOMEM */
    int rc = __real_posix_memalign(p, a, n);
    if (!rc) track(*p);
    return rc;
}
void *__wrap_aligned_alloc(size_t a, size_t n) {
    if (fail_now()) return NULL;
    void *p = __real_aligned_alloc(a, n);
    track(p);
    return p;
}
void __wrap_free(void *p) {
    untrack(p);
    __real_free(p);
}

static void forget_all(void) {
    memset(live, 0, sizeof live);
    n_live = 0;
}

/* Training: a model loaded unoptimized, a trainer (the loss, the gradient graph, a session,
 * Adam's state), one step on a batch of two. */
static ox_status train_scenario(const char *path) {
    ox_model *m = NULL;
    ox_trainer *t = NULL;
    ox_status st = ox_model_load_with(path, &(ox_model_options){.no_optimize = true}, &m);
    ox_trainer_options o = {
        .loss = OX_LOSS_SOFTMAX_CROSS_ENTROPY, .optimizer = OX_OPTIM_ADAM, .n_threads = 1};
    if (!st) st = ox_trainer_create(m, &o, &t);
    static float img[2 * 28 * 28];
    for (int i = 0; i < 2 * 28 * 28; i++) img[i] = (float)(i % 13) / 13.0f;
    static int64_t labels[2] = {3, 7};
    ox_tensor in[2] = {{.dtype = OX_FLOAT, .rank = 4, .dims = {2, 1, 28, 28}, .data = img},
                       {.dtype = OX_INT64, .rank = 1, .dims = {2}, .data = labels}};
    float loss;
    if (!st) st = ox_trainer_step(t, in, 2, &loss);
    ox_trainer_free(t);
    ox_model_free(m);
    return st;
}

/* Inference: load (optimized), a session, two runs, an export to memory. Returns the first
 * failing status (OX_OK when all went well). */
static ox_status scenario(const char *path, const char *what) {
    ox_model *m = NULL;
    ox_session *s = NULL;
    void *buf = NULL;
    size_t len = 0;
    ox_status st = ox_model_load(path, &m);
    if (!st) st = ox_session_create(m, &(ox_session_options){.n_threads = 1}, &s);
    static float img[28 * 28];
    for (int i = 0; i < 28 * 28; i++) img[i] = (float)(i % 17) / 17.0f;
    ox_tensor in = {.dtype = OX_FLOAT, .rank = 4, .dims = {1, 1, 28, 28}, .data = img};
    const ox_tensor *out[4];
    if (!st) st = ox_session_run(s, &in, 1, out);
    if (!st) st = ox_session_run(s, &in, 1, out);
    if (!st) st = ox_model_save_buffer(m, &buf, &len);
    (void)what;
    free(buf);
    ox_session_free(s);
    ox_model_free(m);
    return st;
}

/* Every failure point of one scenario: a clean error or success, and no leak. */
static void every_failure_point(const char *name, ox_status (*run)(const char *), const char *path,
                                bool verbose) {
    /* the count of calls when nothing fails, and no leak then either */
    calls = 0, fail_at = -1, failed = false;
    forget_all();
    ox_status st = run(path);
    long total = calls;
    CHECK(st == OX_OK, "%s fails without injected failures: %s", name, ox_errmsg());
    CHECK(n_live == 0, "%s: %ld blocks leaked without injected failures", name, n_live);
    int errors = 0, leaks = 0, silent = 0;
    for (long n = 1; n <= total; n++) {
        if (verbose) fprintf(stderr, "%s: failing call %ld\n", name, n);
        calls = 0, fail_at = n, failed = false;
        forget_all();
        st = run(path);
        if (st != OX_OK) {
            errors++;
            if (!ox_errmsg()[0]) {
                silent++;
                CHECK(false, "%s, call %ld failed: status %d and no message", name, n, (int)st);
            }
        }
        if (n_live) {
            long first = -1;
            for (size_t i = 0; i < SET_SIZE; i++)
                if (live[i] && live[i] != (void *)1 && (first < 0 || call_of[i] < first))
                    first = call_of[i];
            if (++leaks <= 20)
                CHECK(false,
                      "%s, call %ld failed (%s): %ld blocks leaked, the first made by call %ld",
                      name, n, st ? ox_errmsg() : "the scenario succeeded", n_live, first);
        }
    }
    fail_at = -1;
    printf("%s: %ld allocator calls, each failed once: %d clean errors, %ld recovered, %d with "
           "leaks, %d without a message\n",
           name, total, errors, total - errors, leaks, silent);
    CHECK(leaks == 0, "%s: %d failure points leaked", name, leaks);
}

static ox_status inference(const char *path) {
    return scenario(path, "inference");
}

int main(int argc, char **argv) {
    const char *models = argc > 2 ? argv[2] : "models";
    bool verbose = argc > 3 && !strcmp(argv[3], "--verbose");
    setvbuf(stdout, NULL, _IOLBF, 0); /* a crash at a failure point shows where it was */
    char path[4096];
    snprintf(path, sizeof path, "%s/fashion_mnist_cnn.onnx", models);
    every_failure_point("load, plan, run, export", inference, path, verbose);
    snprintf(path, sizeof path, "%s/fmnist_cnn.onnx", models);
    every_failure_point("train one step", train_scenario, path, verbose);
    return harness_finish();
}
