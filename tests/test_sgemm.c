/* Unit tests of the thread pool (executor/pool.c) and of the packed GEMM
 * (kernels/cpu/sgemm.c, kernels/cpu/gemm.c): every index of a parallel loop runs exactly
 * once, on a thread id in range, also when loops nest or two threads share a pool; the
 * packed GEMM and its epilogue agree with a float64 loop on random shapes that cover
 * every edge (rows past the 8-row panels, columns past the 32-column blocks, K past the
 * 256-row blocks, K = 0, transposed operands), and give the same bits on 1, 2 and 3
 * threads and with B packed ahead; the vectorized exp is within 2 ulp of float64's and
 * softmax rows agree with float64.
 *
 *     test_sgemm          # exit status 0 when all pass
 *     test_sgemm --bench  # also the sgemm GFLOP/s (packed kernel, OpenBLAS) on 1 and 2 threads
 */
#include "harness.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>

/* ---- the pool ---------------------------------------------------------------------- */

#define MAX_N 300
static atomic_int visits[MAX_N];
static atomic_int bad_tid;

struct visit_arg {
    struct ox_pool *pool;
    bool nest;
};

static void visit_inner(void *arg, int64_t b, int64_t e, int tid) {
    (void)arg, (void)tid;
    for (int64_t i = b; i < e; i++) atomic_fetch_add(&visits[i], 1);
}

static void visit(void *arg, int64_t b, int64_t e, int tid) {
    struct visit_arg *va = arg;
    if (tid < 0 || tid >= ox_pool_size(va->pool)) atomic_fetch_add(&bad_tid, 1);
    for (int64_t i = b; i < e; i++) {
        atomic_fetch_add(&visits[i], 1);
        if (va->nest) ox_parallel_for(va->pool, 3, visit_inner, NULL); /* runs inline */
    }
}

static bool visits_are(int64_t n, int each) {
    for (int64_t i = 0; i < MAX_N; i++)
        if (atomic_load(&visits[i]) != (i < n ? each : 0)) return false;
    return true;
}

static void clear_visits(void) {
    for (int i = 0; i < MAX_N; i++) atomic_store(&visits[i], 0);
}

struct user_arg {
    struct ox_pool *pool;
    int n_jobs;
};

static void *pool_user(void *v) {
    struct user_arg *ua = v;
    struct visit_arg va = {ua->pool, false};
    for (int r = 0; r < ua->n_jobs; r++) ox_parallel_for(ua->pool, 100, visit, &va);
    return NULL;
}

static void test_pool(void) {
    for (int T = 1; T <= 4; T++) {
        struct ox_pool *pool;
        EXPECT(ox_pool_create(T, &pool) == OX_OK);
        EXPECT(ox_pool_size(pool) == T);
        struct visit_arg va = {pool, false};
        for (int64_t n = 0; n <= 37; n++) {
            clear_visits();
            ox_parallel_for(pool, n, visit, &va);
            CHECK(visits_are(n, 1), "threads %d, n %lld: an index ran other than once", T,
                  (long long)n);
        }
        for (int per = 1; per <= 3; per++) { /* fewer pieces, still every index once */
            clear_visits();
            ox_parallel_for_pieces(pool, 29, per, visit, &va);
            CHECK(visits_are(29, 1), "threads %d, %d pieces per thread", T, per);
        }
        /* many jobs in a row: no lost wake-up, no piece run twice */
        clear_visits();
        for (int r = 0; r < 2000; r++) ox_parallel_for(pool, 7, visit, &va);
        CHECK(visits_are(7, 2000), "threads %d: 2000 jobs in a row", T);
        /* a loop inside a piece runs on that piece's thread */
        va.nest = true;
        clear_visits();
        ox_parallel_for(pool, 5, visit, &va);
        bool ok = true;
        for (int i = 0; i < 5; i++) ok = ok && atomic_load(&visits[i]) == 1 + 5 * (i < 3);
        CHECK(ok, "threads %d: nested loops", T);
        /* two threads sharing the pool: one of them runs its loops inline */
        clear_visits();
        pthread_t th[2];
        struct user_arg ua = {pool, 50};
        for (int k = 0; k < 2; k++) pthread_create(&th[k], NULL, pool_user, &ua);
        for (int k = 0; k < 2; k++) pthread_join(th[k], NULL);
        CHECK(visits_are(100, 100), "threads %d: two users of one pool", T);
        ox_pool_free(pool);
    }
    CHECK(atomic_load(&bad_tid) == 0, "a piece got a thread id out of range");
    ox_pool_free(NULL);
    /* no pool at all: inline */
    clear_visits();
    struct visit_arg va = {NULL, false};
    ox_parallel_for(NULL, 10, visit, &va);
    CHECK(visits_are(10, 1), "NULL pool");
}

/* ---- the packed GEMM ----------------------------------------------------------------- */

static float frand(void) {
    return (float)rand() / (float)RAND_MAX * 2.0f - 1.0f;
}

static float *alloc_floats(int64_t n) {
    void *p = NULL;
    if (posix_memalign(&p, 64, (size_t)(n ? n : 1) * sizeof(float))) exit(2);
    return p;
}

/* One random product through ox_sgemm_packed on 1, 2 and 3 threads, against float64. */
static void check_product(int64_t M, int64_t N, int64_t K, bool ta, bool tb, int epi,
                          struct ox_pool **pools) {
    float *A = alloc_floats(M * K), *B = alloc_floats(K * N), *C0 = alloc_floats(M * N);
    float *ap = alloc_floats(ox_sgemm_packed_a_floats(M, K)), *R = alloc_floats(M * N);
    float *br = alloc_floats(M), *bc = alloc_floats(N);
    float *C[3];
    for (int64_t i = 0; i < M * K; i++) A[i] = frand();
    for (int64_t i = 0; i < K * N; i++) B[i] = frand();
    for (int64_t i = 0; i < M * N; i++) C0[i] = frand(), R[i] = frand();
    for (int64_t i = 0; i < M; i++) br[i] = frand();
    for (int64_t i = 0; i < N; i++) bc[i] = frand();
    /* epi: bit 0 row bias, 1 column bias, 2 residual, 3 Relu, 4 Clip(-0.5, 0.5), 5 load C */
    struct ox_epilogue ep = {.bias_row = epi & 1 ? br : NULL,
                             .bias_col = epi & 2 ? bc : NULL,
                             .residual = epi & 4 ? R : NULL,
                             .ld_residual = N,
                             .lo = epi & 8    ? 0.0f
                                   : epi & 16 ? -0.5f
                                              : -INFINITY,
                             .hi = epi & 16 ? 0.5f : INFINITY};
    bool load_c = epi & 32;
    ox_sgemm_pack_a(A, ta ? M : K, ta, M, K, ap);
    struct ox_gemm_b b = {.pack = ox_gemm_b_pack_matrix, .data = B, .ld = tb ? K : N, .trans = tb};
    /* B packed ahead (constant weights) for the 3-thread run */
    float *bp = alloc_floats(ox_sgemm_packed_b_floats(K, N));
    ox_sgemm_pack_b(&b, K, N, bp);
    struct ox_gemm_b b_ahead = b;
    b_ahead.packed = bp;
    for (int t = 0; t < 3; t++) {
        C[t] = alloc_floats(M * N);
        memcpy(C[t], C0, sizeof(float) * (size_t)(M * N));
        ox_sgemm_packed(pools[t], ap, M, N, K, t == 2 ? &b_ahead : &b, C[t], N, &ep, load_c);
    }
    free(bp);
    double worst = 0;
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double acc = load_c ? C0[i * N + j] : 0, mag = fabs(acc);
            for (int64_t k = 0; k < K; k++) {
                double a = ta ? A[k * M + i] : A[i * K + k], bv = tb ? B[j * K + k] : B[k * N + j];
                acc += a * bv;
                mag += fabs(a * bv);
            }
            if (ep.bias_row) acc += br[i], mag += fabs(br[i]);
            if (ep.bias_col) acc += bc[j], mag += fabs(bc[j]);
            if (ep.residual) acc += R[i * N + j], mag += fabs(R[i * N + j]);
            acc = acc < ep.lo ? ep.lo : acc > ep.hi ? ep.hi : acc;
            /* float32 summation: error within a few ulps of the sum of magnitudes per term */
            double err = fabs(C[0][i * N + j] - acc) / ((mag + 1e-30) * 1.2e-7 * (double)(K + 4));
            if (err > worst) worst = err;
        }
    CHECK(worst <= 1.0, "M %lld N %lld K %lld ta %d tb %d epi %d: error %.3g of the bound",
          (long long)M, (long long)N, (long long)K, ta, tb, epi, worst);
    for (int t = 1; t < 3; t++)
        CHECK(memcmp(C[0], C[t], sizeof(float) * (size_t)(M * N)) == 0,
              "M %lld N %lld K %lld: %d threads (3: B packed ahead) differ from 1", (long long)M,
              (long long)N, (long long)K, t + 1);
    for (int t = 0; t < 3; t++) free(C[t]);
    free(A), free(B), free(C0), free(ap), free(R), free(br), free(bc);
}

static void test_packed_gemm(void) {
    if (!ox_sgemm_is_fast()) {
        printf("test_sgemm: no AVX-512 on this CPU, the packed GEMM is not used: skipped\n");
        return;
    }
    struct ox_pool *pools[3];
    for (int t = 0; t < 3; t++) EXPECT(ox_pool_create(t + 1, &pools[t]) == OX_OK);
    /* the edges */
    static const int64_t shapes[][3] = {{1, 1, 1},
                                        {8, 32, 256},
                                        {9, 33, 257},
                                        {7, 31, 255},
                                        {64, 49, 576},
                                        {3, 200, 5},
                                        {130, 5, 40},
                                        {16, 64, 0},
                                        {40, 100, 700},
                                        /* a classifier's Gemm at batch 1, 3, 8: B streamed
                                           with prefetches when packed ahead */
                                        {1, 1000, 600},
                                        {3, 700, 800},
                                        {8, 600, 900},
                                        /* column blocks 8 at a time: two groups and part of a
                                           third; A larger than B: split by rows */
                                        {20, 600, 70},
                                        {512, 200, 64},
                                        {100, 150, 300}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int epi = 0; epi < 64; epi += 9)
            check_product(shapes[s][0], shapes[s][1], shapes[s][2], s & 1, s & 2, epi, pools);
    /* one column (the GEMV path): long K over several slabs and odd, threaded, empty K, K
     * past the spread copy's 8192 (the 8 x 32 kernel again) */
    static const int64_t columns[][2] = {{1152, 48}, {48, 1152}, {300, 777}, {1000, 2048},
                                         {5, 0},     {9, 9000},  {7, 1},     {13, 257}};
    for (size_t s = 0; s < sizeof columns / sizeof *columns; s++)
        for (int epi = 0; epi < 64; epi += 5)
            check_product(columns[s][0], 1, columns[s][1], s & 1, s & 2, epi, pools);
    /* a row's result is the same bits whatever rows come with it (batch split runs items
     * alone: README), with B packed on the fly and packed ahead */
    for (int r = 0; r < 4; r++) {
        int64_t N = r < 2 ? 1000 : irand(1, 300), K = r < 2 ? 700 : irand(1, 600);
        float *A = alloc_floats(8 * K), *B = alloc_floats(K * N), *full = alloc_floats(8 * N);
        float *part = alloc_floats(8 * N), *ap = alloc_floats(ox_sgemm_packed_a_floats(8, K));
        float *bp = alloc_floats(ox_sgemm_packed_b_floats(K, N));
        for (int64_t i = 0; i < 8 * K; i++) A[i] = frand();
        for (int64_t i = 0; i < K * N; i++) B[i] = frand();
        struct ox_gemm_b b = {.pack = ox_gemm_b_pack_matrix, .data = B, .ld = N};
        ox_sgemm_pack_b(&b, K, N, bp);
        if (r & 1) b.packed = bp;
        struct ox_epilogue ep = {.lo = -INFINITY, .hi = INFINITY};
        ox_sgemm_pack_a(A, K, false, 8, K, ap);
        ox_sgemm_packed(NULL, ap, 8, N, K, &b, full, N, &ep, false);
        for (int64_t rows = 1; rows <= 5; rows += 2) /* 1, 3 or 5 rows from row 2 */
            for (int t = 0; t < 3; t++) {
                ox_sgemm_pack_a(A + 2 * K, K, false, rows, K, ap);
                ox_sgemm_packed(pools[t], ap, rows, N, K, &b, part, N, &ep, false);
                CHECK(!memcmp(part, full + 2 * N, sizeof(float) * (size_t)(rows * N)),
                      "N %lld K %lld: rows 2..%lld alone (%d threads, B %s) differ from the same "
                      "rows among 8",
                      (long long)N, (long long)K, (long long)(rows + 1), t + 1,
                      r & 1 ? "packed ahead" : "packed on the fly");
            }
        free(A), free(B), free(full), free(part), free(ap), free(bp);
    }
    /* random shapes */
    for (int r = 0; r < 40; r++)
        check_product(irand(1, 70), irand(1, 150), irand(1, 600), irand(0, 1), irand(0, 1),
                      (int)irand(0, 63), pools);
    /* packing A over the pool gives the same panels as packing it on one thread */
    for (int r = 0; r < 6; r++) {
        int64_t M = irand(1, 700), K = irand(1, 300);
        bool ta = r & 1;
        float *A = alloc_floats(M * K), *p1 = alloc_floats(ox_sgemm_packed_a_floats(M, K));
        float *p2 = alloc_floats(ox_sgemm_packed_a_floats(M, K));
        for (int64_t i = 0; i < M * K; i++) A[i] = frand();
        ox_sgemm_pack_a(A, ta ? M : K, ta, M, K, p1);
        ox_sgemm_pack_a_pool(pools[1], A, ta ? M : K, ta, M, K, p2);
        CHECK(!memcmp(p1, p2, sizeof(float) * (size_t)ox_sgemm_packed_a_floats(M, K)),
              "pack_a over 2 threads differs (M %lld K %lld ta %d)", (long long)M, (long long)K,
              ta);
        free(A), free(p1), free(p2);
    }
    /* NaN passes Relu and Clip, as ONNX's max/min do */
    {
        float A[8] = {NAN}, ap[8 * 1], C[32];
        for (int i = 1; i < 8; i++) A[i] = 1;
        float Bm[32];
        for (int j = 0; j < 32; j++) Bm[j] = 1;
        ox_sgemm_pack_a(A, 1, false, 8, 1, ap);
        struct ox_gemm_b b = {.pack = ox_gemm_b_pack_matrix, .data = Bm, .ld = 32};
        struct ox_epilogue ep = {.lo = 0, .hi = INFINITY};
        ox_sgemm_packed(NULL, ap, 1, 32, 1, &b, C, 32, &ep, false);
        CHECK(isnan(C[0]) && isnan(C[31]), "Relu epilogue turned NaN into %g", C[0]);
    }
    for (int t = 0; t < 3; t++) ox_pool_free(pools[t]);
}

/* ox_sgemm (OpenBLAS in pieces) against float64, on a pool of 2 */
static void test_split_sgemm(void) {
    struct ox_pool *pool;
    EXPECT(ox_pool_create(2, &pool) == OX_OK);
    for (int r = 0; r < 20; r++) {
        int64_t M = irand(1, 300), N = irand(1, 300), K = irand(1, 300);
        bool ta = irand(0, 1), tb = irand(0, 1);
        float *A = alloc_floats(M * K), *B = alloc_floats(K * N), *C = alloc_floats(M * N);
        for (int64_t i = 0; i < M * K; i++) A[i] = frand();
        for (int64_t i = 0; i < K * N; i++) B[i] = frand();
        ox_sgemm(pool, ta, tb, M, N, K, 1.0f, A, ta ? M : K, B, tb ? K : N, 0.0f, C, N);
        double worst = 0;
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double acc = 0, mag = 0;
                for (int64_t k = 0; k < K; k++) {
                    double p = (double)(ta ? A[k * M + i] : A[i * K + k]) *
                               (tb ? B[j * K + k] : B[k * N + j]);
                    acc += p, mag += fabs(p);
                }
                double e = fabs(C[i * N + j] - acc) / ((mag + 1e-30) * 1.2e-7 * (double)(K + 4));
                if (e > worst) worst = e;
            }
        CHECK(worst <= 1.0, "ox_sgemm M %lld N %lld K %lld: error %.3g of the bound", (long long)M,
              (long long)N, (long long)K, worst);
        free(A), free(B), free(C);
    }
    ox_pool_free(pool);
}

/* ---- vectorized exp and softmax (kernels/cpu/vecmath.c) against float64 ------------------ */

static double ulps(float got, double want) {
    if (isnan(want)) return isnan(got) ? 0 : 1e9;
    if (isinf(want)) return got == (float)want ? 0 : 1e9;
    float w = (float)want;
    double ulp = fabs((double)nextafterf(w, INFINITY) - (double)w);
    if (ulp == 0 || w == 0) ulp = 1.4e-45;
    return fabs((double)got - want) / ulp;
}

static void test_vecmath(void) {
    enum { N = 4099 };
    static float x[N], y[N];
    for (int i = 0; i < N; i++) x[i] = -110.0f + 200.0f * (float)i / N; /* past both ends */
    x[0] = -INFINITY, x[1] = INFINITY, x[2] = NAN, x[3] = 0, x[4] = -0.0f, x[5] = 88.7f;
    x[6] = -87.5f, x[7] = -100.0f; /* subnormal results */
    ox_exp_floats(x, y, N);
    double worst = 0;
    int at = 0;
    for (int i = 0; i < N; i++) {
        double want = exp((double)x[i]), u = ulps(y[i], want);
        if (want < 1.2e-38 && !isnan(want)) u = fabs(y[i] - want) / 1.4e-45 > 2 ? 1e9 : 0;
        if (u > worst) worst = u, at = i;
    }
    CHECK(worst <= 2, "exp(%g) = %g, exp in float64 %g: %.3g ulp", x[at], y[at], exp(x[at]), worst);
    /* tanh against float64: within 3 ulp; signed zeros, tiny, subnormal and large inputs */
    {
        enum { G = 6007 };
        static float tx[G], ty[G];
        for (int i = 0; i < G; i++) tx[i] = -12.0f + 24.0f * (float)i / G;
        tx[0] = -INFINITY, tx[1] = INFINITY, tx[2] = NAN, tx[3] = 0, tx[4] = -0.0f;
        tx[5] = 1e-30f, tx[6] = -1e-30f, tx[7] = 3e-39f, tx[8] = 0.625f, tx[9] = -0.625f;
        tx[10] = nextafterf(0.625f, 0), tx[11] = 1e20f, tx[12] = -1e-3f, tx[13] = 0.3f;
        ox_tanh_floats(tx, ty, G);
        double tworst = 0;
        int tat = 0;
        for (int i = 0; i < G; i++) {
            double want = tanh((double)tx[i]), u;
            if (want == 0) /* the zeros keep their sign; the subnormal stays itself */
                u = ty[i] == 0 && !signbit(ty[i]) == !signbit(want) ? 0 : 1e9;
            else if (fabs(want) < 1.2e-38)
                u = fabs(ty[i] - want) <= 1.4e-45 ? 0 : 1e9;
            else
                u = ulps(ty[i], want);
            if (u > tworst) tworst = u, tat = i;
        }
        CHECK(tworst <= 3, "tanh(%g) = %.9g, in float64 %.9g: %.3g ulp", tx[tat], ty[tat],
              tanh((double)tx[tat]), tworst);
    }
    /* erf against float64: within 3 ulp on both sides of the 0.5 seam (2 measured) */
    {
        enum { G = 6007 };
        static float ex[G], ey[G];
        for (int i = 0; i < G; i++) ex[i] = -6.0f + 12.0f * (float)i / G;
        ex[0] = -INFINITY, ex[1] = INFINITY, ex[2] = NAN, ex[3] = 0, ex[4] = -0.0f;
        ex[5] = 1e-30f, ex[6] = -1e-30f, ex[7] = 3e-39f, ex[8] = 0.5f, ex[9] = -0.5f;
        ex[10] = nextafterf(0.5f, 0), ex[11] = 1e20f, ex[12] = 12.0f, ex[13] = -1e-3f;
        ox_erf_floats(ex, ey, G);
        double eworst = 0;
        int eat = 0;
        for (int i = 0; i < G; i++) {
            double want = erf((double)ex[i]), u;
            if (want == 0)
                u = ey[i] == 0 && !signbit(ey[i]) == !signbit(want) ? 0 : 1e9;
            else if (fabs(want) < 1.2e-38)
                u = fabs(ey[i] - want) <= 1.4e-45 ? 0 : 1e9;
            else
                u = ulps(ey[i], want) / 3;
            if (u > eworst) eworst = u, eat = i;
        }
        CHECK(eworst <= 1, "erf(%g) = %.9g, in float64 %.9g: %.3g of the tolerance", ex[eat],
              ey[eat], erf((double)ex[eat]), eworst);
    }
    /* GELU (erf form) against float64: within 3e-6 relative where x >= -5.6, within 2e-5
     * relative further out where the result is still a normal float */
    {
        enum { G = 6007 };
        static float gx[G], gy[G];
        for (int i = 0; i < G; i++) gx[i] = -14.0f + 28.0f * (float)i / G;
        gx[0] = -INFINITY, gx[1] = INFINITY, gx[2] = NAN, gx[3] = 0, gx[4] = -0.0f;
        gx[5] = 1e-30f, gx[6] = -1e-30f, gx[7] = 3e-39f; /* tiny and subnormal inputs */
        ox_gelu_floats(gx, gy, G);
        double gworst = 0;
        int gat = 0;
        for (int i = 0; i < G; i++) {
            /* erfc(-u) = 1 + erf(u), without the cancellation in the negative tail */
            double xi = gx[i], want = 0.5 * xi * erfc(-xi * 0.70710678118654752440);
            double e;
            if (isnan(xi) || (isinf(xi) && xi < 0)) /* NaN in, and -inf * 0 */
                e = isnan(gy[i]) || gy[i] == 0 ? 0 : 1e9;
            else if (isinf(want))
                e = gy[i] == (float)want ? 0 : 1e9;
            else if (fabs(want) < 1e-37)
                e = fabs(gy[i] - want) < 1e-37 ? 0 : 1e9;
            else
                e = fabs(gy[i] - want) / fabs(want) / (xi >= -5.6 ? 3e-6 : 2e-5);
            if (e > gworst) gworst = e, gat = i;
        }
        CHECK(gworst <= 1, "gelu(%g) = %.9g, in float64 %.9g (%.3g of the tolerance)", gx[gat],
              gy[gat], 0.5 * gx[gat] * erfc(-gx[gat] * 0.70710678118654752440), gworst);
    }
    /* GELU's tanh form against float64, written as x / (1 + e^-2u) (1 + tanh(u) without
     * the cancellation): within 4 + 6|u| ulp down to 1e-36 */
    {
        enum { G = 6007 };
        static float gx[G], gy[G];
        for (int i = 0; i < G; i++) gx[i] = -14.0f + 28.0f * (float)i / G;
        gx[0] = -INFINITY, gx[1] = INFINITY, gx[2] = NAN, gx[3] = 0, gx[4] = -0.0f;
        gx[5] = 1e-30f, gx[6] = -1e-30f, gx[7] = 1e20f, gx[8] = -1e20f;
        ox_gelu_tanh_floats(gx, gy, G);
        double gworst = 0, want_at = 0;
        int gat = 0;
        for (int i = 0; i < G; i++) {
            double xi = gx[i], u = 0.79788456080286535588 * (xi + 0.044715 * xi * xi * xi);
            double want = xi / (1 + exp(-2 * u)), e;
            if (isnan(xi) || (isinf(xi) && xi < 0)) /* NaN in, and -inf * 0 */
                e = isnan(gy[i]) || gy[i] == 0 ? 0 : 1e9;
            else if (isinf(want))
                e = gy[i] == (float)want ? 0 : 1e9;
            else if (fabs(want) < 1e-36) /* e^-2u near float's end: absolute */
                e = fabs(gy[i] - want) < 1e-36 ? 0 : 1e9;
            else /* the float rounding of 2u moves e^-2u by a few times 2|u| ulp */
                e = ulps(gy[i], want) / (4 + 6 * fabs(u));
            if (e > gworst) gworst = e, gat = i, want_at = want;
        }
        CHECK(gworst <= 1, "gelu_tanh(%g) = %.9g, in float64 %.9g (%.3g of the tolerance)", gx[gat],
              gy[gat], want_at, gworst);
    }
    /* SiLU (the GEMM epilogue's, silu16 where the CPU has AVX-512): C = silu(1 * x) */
    float one[1] = {1}, *ap = alloc_floats(ox_sgemm_packed_a_floats(1, 1)), *c = alloc_floats(N);
    ox_sgemm_pack_a(one, 1, false, 1, 1, ap);
    struct ox_gemm_b b = {.pack = ox_gemm_b_pack_matrix, .data = x, .ld = N};
    struct ox_epilogue ep = {.lo = -INFINITY, .hi = INFINITY, .silu = true};
    ox_sgemm_packed(NULL, ap, 1, N, 1, &b, c, N, &ep, false);
    worst = 0;
    for (int i = 0; i < N; i++) {
        double xi = x[i], want = isinf(xi) && xi < 0 ? NAN : xi / (1 + exp(-xi));
        double u = isnan(want) ? (isnan(c[i]) ? 0 : 1e9) : ulps(c[i], want);
        /* where e^-|x| is subnormal, its few bits limit the product: absolute error there */
        if (!isnan(want) && fabs(want) < 0x1p-100) u = fabs(c[i] - want) > 0x1p-120 ? 1e9 : 0;
        if (u > worst) worst = u, at = i;
    }
    CHECK(worst <= 3, "silu(%g) = %g, in float64 %g: %.3g ulp", x[at], c[at],
          x[at] / (1 + exp(-(double)x[at])), worst);
    free(ap), free(c);
    /* softmax rows of several lengths (tails of the 16-lane loop), with large values */
    for (int n = 1; n <= 70; n += 3) {
        float r[70], o[70];
        double mx = -INFINITY, sum = 0;
        for (int i = 0; i < n; i++) r[i] = frand() * 30 + 50, mx = r[i] > mx ? r[i] : mx;
        for (int i = 0; i < n; i++) sum += exp((double)r[i] - mx);
        ox_softmax_row(r, o, n);
        double e = 0;
        for (int i = 0; i < n; i++) {
            /* float's x - max rounds: a relative error up to |x - max| 2^-24 is inherent */
            double d = fabs(o[i] - exp((double)r[i] - mx) / sum) / (exp((double)r[i] - mx) / sum);
            d /= 1 + fabs((double)r[i] - mx) * 0x1p-24 / 1e-6;
            e = d > e ? d : e;
        }
        CHECK(e < 1e-6, "softmax of %d values: relative error %g", n, e);
    }
}

/* ---- --bench: the sgemm roofline (GFLOP/s of the packed kernel and of OpenBLAS) ------------ */

#include <cblas.h>

static double gflops_packed(struct ox_pool *pool, int64_t M, int64_t N, int64_t K) {
    float *A = alloc_floats(M * K), *B = alloc_floats(K * N), *C = alloc_floats(M * N);
    float *ap = alloc_floats(ox_sgemm_packed_a_floats(M, K));
    for (int64_t i = 0; i < M * K; i++) A[i] = frand();
    for (int64_t i = 0; i < K * N; i++) B[i] = frand();
    ox_sgemm_pack_a(A, K, false, M, K, ap);
    struct ox_gemm_b b = {.pack = ox_gemm_b_pack_matrix, .data = B, .ld = N};
    struct ox_epilogue ep = {.lo = -INFINITY, .hi = INFINITY};
    int reps = 0;
    double t0 = now(), t;
    do {
        ox_sgemm_packed(pool, ap, M, N, K, &b, C, N, &ep, false);
        reps++;
    } while ((t = now() - t0) < 0.5);
    free(A), free(B), free(C), free(ap);
    return 2.0 * (double)M * (double)N * (double)K * reps / t * 1e-9;
}

static double gflops_blas(struct ox_pool *pool, int64_t M, int64_t N, int64_t K) {
    float *A = alloc_floats(M * K), *B = alloc_floats(K * N), *C = alloc_floats(M * N);
    for (int64_t i = 0; i < M * K; i++) A[i] = frand();
    for (int64_t i = 0; i < K * N; i++) B[i] = frand();
    int reps = 0;
    double t0 = now(), t;
    do {
        ox_sgemm(pool, false, false, M, N, K, 1.0f, A, K, B, N, 0.0f, C, N);
        reps++;
    } while ((t = now() - t0) < 0.5);
    free(A), free(B), free(C);
    return 2.0 * (double)M * (double)N * (double)K * reps / t * 1e-9;
}

char *openblas_get_corename(void);

static void bench(void) {
    openblas_set_num_threads(1); /* as sessions do: the pool splits, OpenBLAS runs each piece */
    static const int64_t shapes[][3] = {
        {1024, 1024, 1024}, {64, 3136, 576}, {128, 784, 1152}, {256, 196, 2304}, {512, 49, 4608}};
    printf("sgemm GFLOP/s (packed: onnxexec's AVX-512 kernel%s, A packed ahead; blas: OpenBLAS, "
           "core %s, in pieces over the pool)\n",
           ox_sgemm_is_fast() ? "" : " (no AVX-512 here: not used)", openblas_get_corename());
    for (int T = 1; T <= 2; T++) {
        struct ox_pool *pool;
        if (ox_pool_create(T, &pool)) return;
        for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
            int64_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
            printf("  threads %d  M %4lld N %4lld K %4lld   packed %6.1f   blas %6.1f\n", T,
                   (long long)M, (long long)N, (long long)K,
                   ox_sgemm_is_fast() ? gflops_packed(pool, M, N, K) : 0.0,
                   gflops_blas(pool, M, N, K));
        }
        ox_pool_free(pool);
    }
}

int main(int argc, char **argv) {
    srand(7);
    test_pool();
    test_packed_gemm();
    test_split_sgemm();
    test_vecmath();
    return harness_finish_bench(argc, argv, bench);
}
