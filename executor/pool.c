/* The CPU thread pool: one per session, shared by every kernel, with OpenBLAS kept to one
 * thread so that the two never oversubscribe the cores (DESIGN.md, "Execution").
 *
 *     struct ox_pool *pool;
 *     ox_pool_create(4, &pool);            // the caller plus 3 workers
 *     ox_parallel_for(pool, n, fn, arg);   // fn(arg, begin, end, tid) over [0, n) in pieces
 *     ox_pool_free(pool);
 *
 * Workers poll for 5 ms after a job before they sleep.
 * A job is split into contiguous pieces, one per thread unless the kernel asks for more
 * (ox_parallel_for_pieces), that the threads take in turn (the calling thread, thread 0,
 * too): a thread that comes late (asleep, or on a busy core) finds its piece taken by one
 * that is done. One piece each keeps what consecutive kernels split the same way (rows of
 * one image, say) on the same thread, in its core's cache; four each, taken in any order,
 * had each thread read much of what the other had just written (QDQ ResNet-50, 2 threads:
 * 12.4-12.8 -> 10.1-10.8 ms; float models within noise, a little better; stop 36's
 * measurements in docs/PERFORMANCE.md). The caller returns when every piece is done. Workers spin
 * briefly between jobs (the next node's job usually follows within microseconds) and then sleep on
 * a condition variable. A job started from inside a piece, or while another thread holds the pool
 * (a session run from several threads at once), runs serially on the calling thread: the result is
 * the same, only slower.
 *
 * Affinity: left to itself, the scheduler of a small VM (this project's 2-CPU machines) can
 * keep the caller and a spinning worker on one CPU for a whole process, the other CPU idle:
 * a 2-thread job then runs at less than 1-thread speed (a 320 -> 1280 channel 1x1
 * convolution: 0.12 ms in two processes of three, 0.24-0.35 ms in the third, run after run;
 * ONNX Runtime, whose threads are not held, shows the same). So where the process may use at
 * least as many CPUs as the pool has threads, worker i is held to one CPU (CPUs taken in
 * turn from the allowed set, so that two pools do not stack on the same ones), and a caller
 * that a job finds on a worker's CPU is moved to the pool's first CPU and held there until
 * ox_pool_release_caller gives it back its own set (a library does not keep its user's
 * threads). Holding the caller at every run instead cost 10 us a run; once moved, it stays
 * apart. OX_AFFINITY=0 in the environment turns all this off.
 */
#define _GNU_SOURCE /* sched_setaffinity, CPU_SET */
#include "kernels/op.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#else
#define CPU_RELAX() ((void)0)
#endif

#define SPIN_NS                                                                                    \
    5000000L                   /* a worker polls this long (5 ms) for the next job, then sleeps:   \
                                        waking a sleeping thread costs far more, in a VM above all */
#define WAIT_SPINS        2000 /* the caller's polling for the last pieces before it yields */
#define PIECES_PER_THREAD 1    /* ox_parallel_for's pieces: see the top of the file */

struct ox_pool {
    int n_threads; /* including the caller */
    pthread_t *workers;
    pthread_mutex_t mu;
    pthread_cond_t wake;
    pthread_mutex_t use;   /* held by the thread running a job */
    atomic_uint gen;       /* bumped for each job (and to stop) */
    _Atomic uint64_t next; /* the job's generation << 32 | the next piece to take */
    atomic_int done;       /* pieces finished */
    atomic_int sleepers;
    bool stop;
    /* the job */
    ox_range_fn fn;
    void *arg;
    int64_t n;
    int n_pieces;
    int *cpus; /* the CPU each thread is held to (thread 0: the caller), or NULL */
};

static _Thread_local bool in_piece;
/* The pool this thread is held for as a caller, and the CPU set it had before. */
static _Thread_local const struct ox_pool *caller_pool;
static _Thread_local cpu_set_t caller_saved;

/* p->cpus: the allowed CPUs in turn from a process-wide counter, when there are enough. */
static void choose_cpus(struct ox_pool *p) {
    static atomic_int next_cpu;
    const char *env = getenv("OX_AFFINITY");
    cpu_set_t set;
    if (p->n_threads < 2 || (env && strcmp(env, "0") == 0) ||
        sched_getaffinity(0, sizeof set, &set) || CPU_COUNT(&set) < p->n_threads)
        return;
    int n = CPU_COUNT(&set), *allowed = malloc(sizeof(int) * (size_t)n);
    if (!allowed || !(p->cpus = malloc(sizeof(int) * (size_t)p->n_threads))) {
        free(allowed);
        return;
    }
    for (int c = 0, k = 0; c < CPU_SETSIZE && k < n; c++)
        if (CPU_ISSET(c, &set)) allowed[k++] = c;
    int base = atomic_fetch_add(&next_cpu, p->n_threads);
    for (int i = 0; i < p->n_threads; i++) p->cpus[i] = allowed[(base + i) % n];
    free(allowed);
}

static void hold_to(int cpu) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    pthread_setaffinity_np(pthread_self(), sizeof one, &one);
}

/* A caller found on a worker's CPU is held to p->cpus[0] (its own set saved); elsewhere it
 * is left alone: holding costs two calls (4 us here) every run, a move 16 us. */
static void hold_caller(const struct ox_pool *p) {
    if (caller_pool == p) return;
    int cpu = sched_getcpu();
    bool on_worker = false;
    for (int i = 1; i < p->n_threads && !on_worker; i++) on_worker = cpu == p->cpus[i];
    if (!on_worker) return;
    ox_pool_release_caller((struct ox_pool *)caller_pool);
    cpu_set_t mine;
    if (pthread_getaffinity_np(pthread_self(), sizeof mine, &mine) || !CPU_ISSET(p->cpus[0], &mine))
        return;
    caller_saved = mine;
    caller_pool = p;
    hold_to(p->cpus[0]);
}

void ox_pool_release_caller(struct ox_pool *p) {
    if (!p || caller_pool != p) return;
    pthread_setaffinity_np(pthread_self(), sizeof caller_saved, &caller_saved);
    caller_pool = NULL;
}

int ox_pool_cpu(const struct ox_pool *p, int tid) {
    return p && p->cpus && tid >= 0 && tid < p->n_threads ? p->cpus[tid] : -1;
}

static void piece_bounds(const struct ox_pool *p, int k, int64_t *b, int64_t *e) {
    *b = p->n * k / p->n_pieces;
    *e = p->n * (k + 1) / p->n_pieces;
}

/* Take and run pieces of job `gen` until none is left (or a newer job has replaced it:
 * a thread late for one job may find the next one's counter). */
static void drain(struct ox_pool *p, unsigned gen, int tid) {
    uint64_t v = atomic_load_explicit(&p->next, memory_order_acquire);
    for (;;) {
        /* take piece k only while the counter still belongs to job `gen` (a blind increment
         * could take, and lose, a piece of a newer job) */
        int64_t k = (int64_t)(v & 0xffffffffu);
        if ((unsigned)(v >> 32) != gen || k >= p->n_pieces) return;
        if (!atomic_compare_exchange_weak_explicit(&p->next, &v, v + 1, memory_order_acq_rel,
                                                   memory_order_acquire))
            continue;
        int64_t b, e;
        piece_bounds(p, (int)k, &b, &e);
        in_piece = true;
        p->fn(p->arg, b, e, tid);
        in_piece = false;
        atomic_fetch_add_explicit(&p->done, 1, memory_order_release);
        v = atomic_load_explicit(&p->next, memory_order_acquire);
    }
}

struct worker_arg {
    struct ox_pool *pool;
    int tid;
};

static void *worker_main(void *v) {
    struct worker_arg wa = *(struct worker_arg *)v;
    free(v);
    struct ox_pool *p = wa.pool;
    if (p->cpus) hold_to(p->cpus[wa.tid]);
    unsigned seen = 0; /* the generation at creation: a job posted before this thread got
                          here is still seen as new */
    for (;;) {
        unsigned g;
        struct timespec t0, t;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (int spins = 1; (g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen;
             spins++) {
            if (spins < 2000)
                CPU_RELAX();
            else
                sched_yield(); /* another thread of ours may be waiting for this core */
            if (spins % 64 == 0) {
                clock_gettime(CLOCK_MONOTONIC, &t);
                if ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) > SPIN_NS)
                    break;
            }
        }
        if (g == seen) {
            pthread_mutex_lock(&p->mu);
            atomic_fetch_add(&p->sleepers, 1);
            while ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen && !p->stop)
                pthread_cond_wait(&p->wake, &p->mu);
            atomic_fetch_sub(&p->sleepers, 1);
            pthread_mutex_unlock(&p->mu);
        }
        seen = g;
        pthread_mutex_lock(&p->mu);
        bool stop = p->stop;
        pthread_mutex_unlock(&p->mu);
        if (stop) return NULL;
        drain(p, g, wa.tid);
    }
}

ox_status ox_pool_create(int n_threads, struct ox_pool **out) {
    *out = NULL;
    if (n_threads < 1) n_threads = 1;
    struct ox_pool *p = calloc(1, sizeof *p);
    if (!p) return ox_err(OX_E_NOMEM, "out of memory for the thread pool");
    p->n_threads = n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_mutex_init(&p->use, NULL);
    pthread_cond_init(&p->wake, NULL);
    choose_cpus(p);
    if (n_threads > 1 && !(p->workers = calloc((size_t)n_threads - 1, sizeof *p->workers)))
        goto fail_free_pool;
    for (int i = 1; i < n_threads; i++) {
        struct worker_arg *wa = malloc(sizeof *wa);
        if (!wa) goto fail_stop;
        wa->pool = p;
        wa->tid = i;
        if (pthread_create(&p->workers[i - 1], NULL, worker_main, wa)) {
            free(wa);
            goto fail_stop;
        }
        p->n_threads = i + 1; /* the threads started so far, for ox_pool_free */
    }
    p->n_threads = n_threads;
    *out = p;
    return OX_OK;
fail_stop:
    ox_pool_free(p);
    return ox_err(OX_E_NOMEM, "cannot start %d threads", n_threads);
fail_free_pool:
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->use);
    pthread_mutex_destroy(&p->mu);
    free(p->cpus);
    free(p);
    return ox_err(OX_E_NOMEM, "out of memory for the thread pool");
}

void ox_pool_free(struct ox_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n_threads; i++) pthread_join(p->workers[i - 1], NULL);
    ox_pool_release_caller(p);
    free(p->workers);
    free(p->cpus);
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->use);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

int ox_pool_size(const struct ox_pool *p) {
    return p ? p->n_threads : 1;
}

void ox_parallel_for(struct ox_pool *p, int64_t n, ox_range_fn fn, void *arg) {
    ox_parallel_for_pieces(p, n, PIECES_PER_THREAD, fn, arg);
}

void ox_parallel_for_pieces(struct ox_pool *p, int64_t n, int per_thread, ox_range_fn fn,
                            void *arg) {
    if (n <= 0) return;
    if (per_thread < 1) per_thread = 1;
    if (!p || p->n_threads == 1 || n == 1 || in_piece || pthread_mutex_trylock(&p->use)) {
        fn(arg, 0, n, 0);
        return;
    }
    if (p->cpus) hold_caller(p);
    unsigned gen = atomic_load_explicit(&p->gen, memory_order_relaxed) + 1;
    /* First take the counter away from the previous job: a worker late for it may still
     * hold its counter value and would read this job's fields below; with the counter
     * marked as the new job's and full, its exchange fails and it leaves. */
    atomic_store(&p->next, (uint64_t)gen << 32 | 0xffffffffu);
    atomic_store_explicit(&p->done, 0, memory_order_relaxed);
    p->fn = fn;
    p->arg = arg;
    p->n = n;
    int64_t np = (int64_t)p->n_threads * per_thread;
    p->n_pieces = (int)(n < np ? n : np);
    /* release: whoever takes a piece of this job sees the fields above */
    atomic_store_explicit(&p->next, (uint64_t)gen << 32, memory_order_release);
    atomic_store(&p->gen, gen); /* seq_cst: ordered before the read of sleepers */
    if (atomic_load(&p->sleepers)) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->mu);
    }
    drain(p, gen, 0); /* the caller is thread 0 */
    for (int spins = 0; atomic_load_explicit(&p->done, memory_order_acquire) < p->n_pieces;)
        if (++spins < WAIT_SPINS)
            CPU_RELAX();
        else
            sched_yield(); /* a worker may be waiting for this core */
    pthread_mutex_unlock(&p->use);
}
