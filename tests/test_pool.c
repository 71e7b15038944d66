/* The thread pool's CPU affinity (executor/pool.c): workers held to distinct allowed CPUs,
 * a caller that starts a job on a worker's CPU moved off it and given back its own CPU set
 * at release, nothing held where the process has fewer CPUs than threads or where
 * OX_AFFINITY=0; and every piece of every job run once whatever the placement. The CPUs
 * threads ran on are read from the kernel (sched_getcpu), not from the pool.
 *
 *     test_pool SCRATCH
 */
#define _GNU_SOURCE
#include "harness.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#define N_ITEMS 4096

struct seen {
    bool wait_worker;        /* thread 0's pieces wait (up to 2 s) until thread 1 took one */
    atomic_int cpu_of[8];    /* per tid: the CPU a piece of it ran on (-1: none) */
    atomic_int wrong_cpu[8]; /* per tid: pieces that ran off the CPU expected for it */
    int expect[8];           /* per tid: the CPU it must run on, -1: any */
    atomic_int hits[N_ITEMS];
};

static void piece(void *arg, int64_t b, int64_t e, int tid) {
    struct seen *s = arg;
    int cpu = sched_getcpu();
    atomic_store(&s->cpu_of[tid], cpu);
    if (s->expect[tid] >= 0 && cpu != s->expect[tid]) atomic_fetch_add(&s->wrong_cpu[tid], 1);
    for (int64_t i = b; i < e; i++) atomic_fetch_add(&s->hits[i], 1);
    /* on a busy machine the caller could otherwise take every piece before the worker runs */
    for (double t0 = now();
         s->wait_worker && tid == 0 && atomic_load(&s->cpu_of[1]) < 0 && now() - t0 < 2.0;)
        sched_yield();
    /* long enough that every thread takes pieces */
    volatile double x = 0;
    for (int k = 0; k < 100000; k++) x += k;
}

static void reset(struct seen *s) {
    s->wait_worker = false;
    for (int i = 0; i < 8; i++) {
        atomic_store(&s->cpu_of[i], -1);
        atomic_store(&s->wrong_cpu[i], 0);
        s->expect[i] = -1;
    }
    for (int i = 0; i < N_ITEMS; i++) atomic_store(&s->hits[i], 0);
}

static bool all_once(struct seen *s) {
    for (int i = 0; i < N_ITEMS; i++)
        if (atomic_load(&s->hits[i]) != 1) return false;
    return true;
}

static cpu_set_t mask_now(void) {
    cpu_set_t m;
    CPU_ZERO(&m);
    pthread_getaffinity_np(pthread_self(), sizeof m, &m);
    return m;
}

/* Put this thread on `cpu`, then give it `all` back (it stays there until moved). */
static void go_to(int cpu, const cpu_set_t *all) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    pthread_setaffinity_np(pthread_self(), sizeof one, &one);
    pthread_setaffinity_np(pthread_self(), sizeof *all, all);
}

int main(void) {
    static struct seen s;
    cpu_set_t all = mask_now();
    int n_cpus = CPU_COUNT(&all);
    unsetenv("OX_AFFINITY");

    /* more threads than CPUs: nothing held, the job still done */
    struct ox_pool *p;
    EXPECT(ox_pool_create(n_cpus + 1, &p) == OX_OK);
    for (int t = 0; t <= n_cpus; t++)
        CHECK(ox_pool_cpu(p, t) == -1, "%d threads on %d CPUs: thread %d held to CPU %d",
              n_cpus + 1, n_cpus, t, ox_pool_cpu(p, t));
    reset(&s);
    ox_parallel_for(p, N_ITEMS, piece, &s);
    CHECK(all_once(&s), "%d threads: some item not run exactly once", n_cpus + 1);
    ox_pool_free(p);

    if (n_cpus < 2) {
        printf("one CPU: the held cases need two (skipped)\n");
        return harness_finish();
    }

    /* two threads: the worker on its own allowed CPU, the caller moved off it */
    EXPECT(ox_pool_create(2, &p) == OX_OK);
    int c0 = ox_pool_cpu(p, 0), c1 = ox_pool_cpu(p, 1);
    CHECK(c0 >= 0 && c1 >= 0 && c0 != c1 && CPU_ISSET(c0, &all) && CPU_ISSET(c1, &all),
          "the pool's CPUs %d and %d: not two distinct allowed CPUs", c0, c1);
    if (c0 >= 0 && c1 >= 0 && c0 != c1) {
        /* rounds in which the worker took a piece; in which the caller started on its CPU
         * (on a busy machine the scheduler may have moved it already: then it must be left
         * alone, and is checked so) */
        int worker_rounds = 0, moved_rounds = 0;
        for (int round = 0; round < 5; round++) {
            go_to(c1, &all); /* the caller starts on the worker's CPU */
            reset(&s);
            s.expect[1] = c1;
            s.wait_worker = true;
            bool on_worker = sched_getcpu() == c1;
            if (on_worker) s.expect[0] = c0;
            ox_parallel_for(p, N_ITEMS, piece, &s);
            CHECK(all_once(&s), "round %d: some item not run exactly once", round);
            CHECK(atomic_load(&s.wrong_cpu[1]) == 0, "round %d: the worker ran off CPU %d", round,
                  c1);
            worker_rounds += atomic_load(&s.cpu_of[1]) == c1;
            moved_rounds += on_worker;
            cpu_set_t held = mask_now();
            if (on_worker) {
                CHECK(atomic_load(&s.wrong_cpu[0]) == 0,
                      "round %d: the caller was not moved from the worker's CPU %d to %d (ran "
                      "on %d)",
                      round, c1, c0, atomic_load(&s.cpu_of[0]));
                CHECK(CPU_COUNT(&held) == 1 && CPU_ISSET(c0, &held),
                      "round %d: during the run the caller is not held to CPU %d alone", round, c0);
            } else {
                CHECK(CPU_EQUAL(&held, &all), "round %d: a caller off the worker's CPU was held",
                      round);
            }
            ox_pool_release_caller(p);
            cpu_set_t back = mask_now();
            CHECK(CPU_EQUAL(&back, &all),
                  "round %d: release did not give back the caller's CPUs "
                  "(%d of %d)",
                  round, CPU_COUNT(&back), n_cpus);
        }
        CHECK(worker_rounds > 0, "the worker took no piece in 5 jobs");
        CHECK(moved_rounds > 0, "the caller never started a job on the worker's CPU");
        /* a caller already elsewhere is left alone (its set untouched) */
        go_to(c0, &all);
        reset(&s);
        bool elsewhere = sched_getcpu() != c1;
        ox_parallel_for(p, N_ITEMS, piece, &s);
        cpu_set_t mine = mask_now();
        CHECK(all_once(&s) && (!elsewhere || CPU_EQUAL(&mine, &all)),
              "a caller on a CPU of its own was held or the job lost items");
        ox_pool_release_caller(p);
        /* a caller whose own set excludes the pool's first CPU is not moved onto it */
        cpu_set_t only1;
        CPU_ZERO(&only1);
        CPU_SET(c1, &only1);
        pthread_setaffinity_np(pthread_self(), sizeof only1, &only1);
        reset(&s);
        ox_parallel_for(p, N_ITEMS, piece, &s);
        cpu_set_t after = mask_now();
        CHECK(all_once(&s) && CPU_EQUAL(&after, &only1),
              "a caller held to the worker's CPU by its user was moved");
        ox_pool_release_caller(p);
        pthread_setaffinity_np(pthread_self(), sizeof all, &all);
        /* freeing a pool that holds the caller gives it back its set */
        go_to(c1, &all);
        ox_parallel_for(p, N_ITEMS, piece, &s);
    }
    ox_pool_free(p);
    cpu_set_t freed = mask_now();
    CHECK(CPU_EQUAL(&freed, &all), "freeing the pool left the caller held");

    /* two pools at once: their workers on different CPUs where there are enough */
    if (n_cpus >= 4) {
        struct ox_pool *a, *b;
        EXPECT(ox_pool_create(2, &a) == OX_OK && ox_pool_create(2, &b) == OX_OK);
        CHECK(ox_pool_cpu(a, 1) != ox_pool_cpu(b, 1), "two pools' workers share CPU %d",
              ox_pool_cpu(a, 1));
        ox_pool_free(a);
        ox_pool_free(b);
    }

    /* OX_AFFINITY=0: nothing held */
    setenv("OX_AFFINITY", "0", 1);
    EXPECT(ox_pool_create(2, &p) == OX_OK);
    CHECK(ox_pool_cpu(p, 0) == -1 && ox_pool_cpu(p, 1) == -1, "OX_AFFINITY=0: threads held");
    go_to(ox_pool_cpu(p, 1) >= 0 ? ox_pool_cpu(p, 1) : 0, &all);
    reset(&s);
    ox_parallel_for(p, N_ITEMS, piece, &s);
    cpu_set_t free_mask = mask_now();
    CHECK(all_once(&s) && CPU_EQUAL(&free_mask, &all), "OX_AFFINITY=0: the caller was held");
    ox_pool_free(p);
    unsetenv("OX_AFFINITY");
    return harness_finish();
}
