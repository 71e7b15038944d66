/* Float GEMM with packed operands and a fused epilogue, for CPUs with AVX-512.
 *
 *     float *ap = ...ox_sgemm_packed_a_floats(M, K) floats, 64-byte aligned...;
 *     ox_sgemm_pack_a(A, lda, false, M, K, ap);              // once, for constant weights
 *     struct ox_gemm_b b = OX_GEMM_B_MATRIX(B, ldb, false);  // or a packer of conv patches
 *     struct ox_epilogue ep = {.bias_row = bias, .lo = 0, .hi = INFINITY};   // + bias, Relu
 *     ox_sgemm_packed(pool, ap, M, N, K, &b, C, ldc, &ep, false);
 *
 * C (M x N, row stride ldc) = A (M x K) B (K x N), then, per element: + bias_row[i] +
 * bias_col[j] + residual[i, j], clamped to [lo, hi]. A is packed once into panels of
 * OX_GEMM_MR rows (k-major: the MR values of column k side by side, rows past M zero),
 * so that constant weights are packed at the first run and then only read; the panels of
 * one slab of OX_GEMM_KC columns lie together (pack_panels). B is packed
 * during the product, one block of OX_GEMM_KC rows by OX_GEMM_NR columns at a time, by a
 * callback: a plain matrix, or the patches of a convolution taken straight from its input
 * (no im2col matrix is ever built); or B is not packed at all: its rows are read in place
 * through a table of row offsets (ox_gemm_b.offs: a stride-1 convolution over a padded
 * copy of its input, where every patch row is a contiguous run of that copy). The micro-kernel
 * keeps an 8 x 32 block of C in 16 AVX-512 registers; the epilogue runs on that block while it is
 * still in registers. The threads of the pool take column blocks (or row panels, when C is narrow
 * or A the larger operand); each element of C is summed over k in one fixed order whatever the
 * thread count or the rows computed with it.
 *
 * ox_sgemm_is_fast() says whether this CPU has AVX-512; callers use OpenBLAS otherwise.
 */
#include "kernels/op.h"

#include <math.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include "kernels/cpu/vecmath.h"
#define HAVE_AVX512_PATH 1
#endif

#define MR OX_GEMM_MR
#define NR OX_GEMM_NR
#define KC OX_GEMM_KC

bool ox_sgemm_is_fast(void) {
#ifdef HAVE_AVX512_PATH
    static int fast = -1;
    if (fast < 0) { /* OX_SGEMM_PACKED=0: OpenBLAS everywhere, as CPUs without AVX-512 run */
        const char *e = getenv("OX_SGEMM_PACKED");
        __builtin_cpu_init();
        fast = __builtin_cpu_supports("avx512f") && !(e && !strcmp(e, "0")) ? 1 : 0;
    }
    return fast == 1;
#else
    return false;
#endif
}

int64_t ox_sgemm_packed_a_floats(int64_t M, int64_t K) {
    return (M + MR - 1) / MR * MR * K;
}

/* Panels [p0, p1) of the packed layout of all M rows: for each slab of KC columns k0.. (kc
 * wide), every panel of MR rows as kc x MR floats (k-major); slab k0 starts at k0 * Mp (Mp:
 * M rounded up to MR), panel p at p * MR * kc within it. The kernels read the slabs of one
 * k range in order, so the weights stream from memory front to back (and are prefetched). */
static void pack_panels(const float *A, int64_t lda, bool ta, int64_t M, int64_t K, int64_t p0,
                        int64_t p1, float *dst) {
    int64_t Mp = (M + MR - 1) / MR * MR;
    for (int64_t k0 = 0; k0 < K; k0 += KC) {
        int64_t kc = K - k0 < KC ? K - k0 : KC;
        for (int64_t p = p0; p < p1; p++) {
            float *d = dst + k0 * Mp + p * MR * kc;
            int64_t r = p * MR, mr = M - r < MR ? M - r : MR;
            for (int64_t k = 0; k < kc; k++) {
                for (int64_t i = 0; i < mr; i++)
                    d[k * MR + i] = ta ? A[(k0 + k) * lda + r + i] : A[(r + i) * lda + k0 + k];
                for (int64_t i = mr; i < MR; i++) d[k * MR + i] = 0;
            }
        }
    }
}

void ox_sgemm_pack_a(const float *A, int64_t lda, bool ta, int64_t M, int64_t K, float *dst) {
    pack_panels(A, lda, ta, M, K, 0, (M + MR - 1) / MR, dst);
}

struct pack_a_job {
    const float *A;
    int64_t lda, M, K;
    bool ta;
    float *dst;
};

static void pack_a_piece(void *arg, int64_t b, int64_t e, int tid) {
    (void)tid;
    const struct pack_a_job *j = arg;
    pack_panels(j->A, j->lda, j->ta, j->M, j->K, b, e, j->dst);
}

void ox_sgemm_pack_a_pool(struct ox_pool *pool, const float *A, int64_t lda, bool ta, int64_t M,
                          int64_t K, float *dst) {
    struct pack_a_job j = {A, lda, M, K, ta, dst};
    int64_t panels = (M + MR - 1) / MR;
    if (M * K < 65536)
        pack_a_piece(&j, 0, panels, 0);
    else
        ox_parallel_for(pool, panels, pack_a_piece, &j);
}

int64_t ox_sgemm_packed_b_floats(int64_t K, int64_t N) {
    return (N + NR - 1) / NR * NR * K;
}

void ox_sgemm_pack_b(const struct ox_gemm_b *b, int64_t K, int64_t N, float *dst) {
    for (int64_t j = 0; j < N; j += NR)
        for (int64_t k0 = 0; k0 < K; k0 += KC)
            b->pack(b, k0, K - k0 < KC ? K : k0 + KC, j, N - j < NR ? N : j + NR,
                    dst + (j * K + k0 * NR));
}

void ox_gemm_b_pack_matrix(const struct ox_gemm_b *b, int64_t k0, int64_t k1, int64_t j0,
                           int64_t j1, float *dst) {
    int64_t nr = j1 - j0;
    for (int64_t k = k0; k < k1; k++, dst += NR) {
        if (!b->trans) {
            memcpy(dst, b->data + k * b->ld + j0, sizeof(float) * (size_t)nr);
        } else {
            const float *s = b->data + j0 * b->ld + k;
            for (int64_t j = 0; j < nr; j++) dst[j] = s[j * b->ld];
        }
        for (int64_t j = nr; j < NR; j++) dst[j] = 0;
    }
}

#ifdef HAVE_AVX512_PATH

/* One 8 x 32 block: C[0..mr, 0..nr) (+)= a (kc x MR) b (kc x NR), then the epilogue on
 * rows row0.. and columns col0.. of the whole product when ep is not NULL. Row k of b is
 * b + k * NR (packed), or b + offs[k] (direct: B read in place; mask_b: only its first nr
 * columns read, for a B that ends there). rows (a constant where it is inlined, >= mr)
 * bounds the rows computed: a Gemm of batch 1 to 4 does not spend 8 rows' FMAs on each k.
 * Each element's sum runs over k in the same order for any rows. */
__attribute__((target("avx512f"), always_inline)) static inline void
kernel_8x32_body(int64_t kc, const float *a, const float *b, const int32_t *offs, float *c,
                 int64_t ldc, int mr, int nr, bool load_c, const struct ox_epilogue *ep,
                 int64_t row0, int64_t col0, bool pf_b, int rows, bool mask_b) {
    __mmask16 m0 = tail_mask16(nr);
    __mmask16 m1 = nr >= 32 ? 0xFFFF : nr <= 16 ? 0 : (__mmask16)((1u << (nr - 16)) - 1);
    __m512 c0[MR], c1[MR];
#pragma GCC unroll 8
    for (int i = 0; i < rows; i++) {
        if (load_c && i < mr) {
            c0[i] = _mm512_maskz_loadu_ps(m0, c + i * ldc);
            c1[i] = _mm512_maskz_loadu_ps(m1, c + i * ldc + 16);
        } else {
            c0[i] = _mm512_setzero_ps();
            c1[i] = _mm512_setzero_ps();
        }
    }
#pragma GCC unroll 2
    for (int64_t k = 0; k < kc; k++) {
        /* the weights that come next, two pages ahead (the hardware prefetcher stops at
         * page ends): from memory, not cache, in the late layers of a model */
        if (!(k & 1)) _mm_prefetch((const char *)(a + 2048), _MM_HINT_T0);
        const float *bk = offs ? b + offs[k] : b + k * NR;
        if (pf_b) { /* B streamed once (one row panel: a batch-1 Gemm), two pages ahead */
            _mm_prefetch((const char *)(bk + 2048), _MM_HINT_T0);
            _mm_prefetch((const char *)(bk + 2048 + 16), _MM_HINT_T0);
        }
        __m512 b0, b1;
        if (mask_b) { /* B read in place: its columns past nr may lie past its end */
            b0 = _mm512_maskz_loadu_ps(m0, bk);
            b1 = _mm512_maskz_loadu_ps(m1, bk + 16);
        } else {
            b0 = _mm512_loadu_ps(bk);
            b1 = _mm512_loadu_ps(bk + 16);
        }
#pragma GCC unroll 8
        for (int i = 0; i < rows; i++) {
            __m512 av = _mm512_set1_ps(a[i]);
            c0[i] = _mm512_fmadd_ps(av, b0, c0[i]);
            c1[i] = _mm512_fmadd_ps(av, b1, c1[i]);
        }
        a += MR;
    }
    if (ep) {
        __m512 bc0 = _mm512_setzero_ps(), bc1 = _mm512_setzero_ps();
        if (ep->bias_col) {
            bc0 = _mm512_maskz_loadu_ps(m0, ep->bias_col + col0);
            bc1 = _mm512_maskz_loadu_ps(m1, ep->bias_col + col0 + 16);
        }
        __m512 lo = _mm512_set1_ps(ep->lo), hi = _mm512_set1_ps(ep->hi);
        bool clamp = ep->lo > -INFINITY || ep->hi < INFINITY;
#pragma GCC unroll 8
        for (int i = 0; i < rows; i++) {
            if (i >= mr) break;
            if (ep->bias_row) {
                __m512 br = _mm512_set1_ps(ep->bias_row[row0 + i]);
                c0[i] = _mm512_add_ps(c0[i], br);
                c1[i] = _mm512_add_ps(c1[i], br);
            }
            if (ep->bias_col) {
                c0[i] = _mm512_add_ps(c0[i], bc0);
                c1[i] = _mm512_add_ps(c1[i], bc1);
            }
            if (ep->residual) {
                const float *r = ep->residual + (row0 + i) * ep->ld_residual + col0;
                c0[i] = _mm512_add_ps(c0[i], _mm512_maskz_loadu_ps(m0, r));
                c1[i] = _mm512_add_ps(c1[i], _mm512_maskz_loadu_ps(m1, r + 16));
            }
            if (clamp) { /* max(lo, x) and min(hi, x) keep a NaN x, as Relu and Clip do */
                c0[i] = _mm512_min_ps(hi, _mm512_max_ps(lo, c0[i]));
                c1[i] = _mm512_min_ps(hi, _mm512_max_ps(lo, c1[i]));
            }
            if (ep->silu) {
                c0[i] = silu16(c0[i]);
                c1[i] = silu16(c1[i]);
            }
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < rows; i++) {
        if (i >= mr) break;
        _mm512_mask_storeu_ps(c + i * ldc, m0, c0[i]);
        _mm512_mask_storeu_ps(c + i * ldc + 16, m1, c1[i]);
    }
}

/* The packed and the direct kernel: one body, compiled for each case. */
__attribute__((target("avx512f"))) static void
kernel_8x32(int64_t kc, const float *a, const float *b, const int32_t *offs, float *c, int64_t ldc,
            int mr, int nr, bool load_c, const struct ox_epilogue *ep, int64_t row0, int64_t col0,
            bool pf_b) {
    if (offs && nr < NR)
        kernel_8x32_body(kc, a, b, offs, c, ldc, mr, nr, load_c, ep, row0, col0, false, MR, true);
    else if (offs)
        kernel_8x32_body(kc, a, b, offs, c, ldc, mr, nr, load_c, ep, row0, col0, false, MR, false);
    else if (pf_b && mr == 1) /* a batch-1 Gemm streaming its weights */
        kernel_8x32_body(kc, a, b, NULL, c, ldc, mr, nr, load_c, ep, row0, col0, true, 1, false);
    else if (pf_b && mr <= 4)
        kernel_8x32_body(kc, a, b, NULL, c, ldc, mr, nr, load_c, ep, row0, col0, true, 4, false);
    else if (pf_b)
        kernel_8x32_body(kc, a, b, NULL, c, ldc, mr, nr, load_c, ep, row0, col0, true, MR, false);
    else if (mr == 1)
        kernel_8x32_body(kc, a, b, NULL, c, ldc, mr, nr, load_c, ep, row0, col0, false, 1, false);
    else if (mr <= 4)
        kernel_8x32_body(kc, a, b, NULL, c, ldc, mr, nr, load_c, ep, row0, col0, false, 4, false);
    else
        kernel_8x32_body(kc, a, b, NULL, c, ldc, mr, nr, load_c, ep, row0, col0, false, MR, false);
}

#else

/* The portable twin of the AVX-512 kernel (same contract), for builds without it. */
static void kernel_8x32(int64_t kc, const float *a, const float *b, const int32_t *offs, float *c,
                        int64_t ldc, int mr, int nr, bool load_c, const struct ox_epilogue *ep,
                        int64_t row0, int64_t col0, bool pf_b) {
    (void)pf_b;
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++) {
            float acc = load_c ? c[i * ldc + j] : 0;
            for (int64_t k = 0; k < kc; k++)
                acc += a[k * MR + i] * (offs ? b[offs[k] + j] : b[k * NR + j]);
            if (ep) {
                if (ep->bias_row) acc += ep->bias_row[row0 + i];
                if (ep->bias_col) acc += ep->bias_col[col0 + j];
                if (ep->residual) acc += ep->residual[(row0 + i) * ep->ld_residual + col0 + j];
                acc = ox_fused_act(acc, ep->lo, ep->hi, ep->silu);
            }
            c[i * ldc + j] = acc;
        }
}

#endif

/* Rows [p0, p1) (in panels) and columns [j0, j1) of the product, on one thread. */
#define FEW_BLOCKS 8 /* column blocks packed together */

static void sgemm_block(const float *ap, int64_t M, int64_t K, int64_t p0, int64_t p1, int64_t j0,
                        int64_t j1, const struct ox_gemm_b *b, float *C, int64_t ldc,
                        const struct ox_epilogue *ep, bool load_c) {
    static _Thread_local float bbuf[FEW_BLOCKS * KC * NR] __attribute__((aligned(64)));
    int64_t n_blocks = (j1 - j0 + NR - 1) / NR, Mp = (M + MR - 1) / MR * MR;
    const int32_t *offs = b->offs; /* direct: B read in place, never packed */
    if (!b->packed && n_blocks > 1 && p1 - p0 > 1) {
        /* Column blocks FEW_BLOCKS at a time (all of them in a narrow product: a late
         * convolution layer's 49 or 196 positions): pack each block of the group for a k slab
         * first, then each panel of A meets all of them while it is in L1, so that A (the
         * weights, megabytes) is read once per group and slab, not once per block, and each
         * row of C is written FEW_BLOCKS x NR columns at a time. */
        for (int64_t g0 = j0; g0 < j1; g0 += FEW_BLOCKS * NR) {
            int64_t g1 = j1 - g0 < FEW_BLOCKS * NR ? j1 : g0 + FEW_BLOCKS * NR;
            int64_t gb = (g1 - g0 + NR - 1) / NR;
            for (int64_t k0 = 0; k0 < K || k0 == 0; k0 += KC) {
                int64_t kc = K - k0 < KC ? K - k0 : KC;
                bool last = k0 + kc >= K;
                for (int64_t jb = 0; jb < gb && kc > 0 && !offs; jb++) {
                    int64_t j = g0 + jb * NR;
                    b->pack(b, k0, k0 + kc, j, g1 - j < NR ? g1 : j + NR, bbuf + jb * KC * NR);
                }
                for (int64_t p = p0; p < p1; p++) {
                    int64_t i = p * MR;
                    int mr = (int)(M - i < MR ? M - i : MR);
                    for (int64_t jb = 0; jb < gb; jb++) {
                        int64_t j = g0 + jb * NR;
                        int nr = (int)(g1 - j < NR ? g1 - j : NR);
                        const float *bp = offs ? b->data + j : bbuf + jb * KC * NR;
                        kernel_8x32(kc, ap + k0 * Mp + i * kc, bp, offs ? offs + k0 : NULL,
                                    C + i * ldc + j, ldc, mr, nr, load_c || k0 > 0,
                                    last ? ep : NULL, i, j, false);
                    }
                }
                if (kc == 0) break;
            }
        }
        return;
    }
    /* B packed ahead, larger than the caches keep between runs, and met by one row panel (a
     * classifier's Gemm at batch 1 to 8: 5-8 MB of weights read once, from memory in a model):
     * the kernel prefetches it (mobilenet_v2's 1280x1000 Gemm 0.47 -> 0.31 ms). Smaller B (an
     * MLP's layers) stays in cache, where the prefetches only cost. */
    bool pf_b = b->packed && !offs && p1 - p0 == 1 && (double)K * (double)(j1 - j0) >= 1 << 19;
    for (int64_t k0 = 0; k0 < K || k0 == 0; k0 += KC) {
        int64_t kc = K - k0 < KC ? K - k0 : KC;
        bool last = k0 + kc >= K;
        for (int64_t j = j0; j < j1; j += NR) {
            int nr = (int)(j1 - j < NR ? j1 - j : NR);
            const float *bp = bbuf;
            if (offs)
                bp = b->data + j;
            else if (b->packed)
                bp = b->packed + j * K + k0 * NR; /* column block j / NR, rows from k0 */
            else if (kc > 0)
                b->pack(b, k0, k0 + kc, j, j + nr, bbuf);
            for (int64_t p = p0; p < p1; p++) {
                int64_t i = p * MR;
                int mr = (int)(M - i < MR ? M - i : MR);
                kernel_8x32(kc, ap + k0 * Mp + i * kc, bp, offs ? offs + k0 : NULL, C + i * ldc + j,
                            ldc, mr, nr, load_c || k0 > 0, last ? ep : NULL, i, j, pf_b);
            }
        }
        if (kc == 0) break;
    }
}

/* A product of one column (N 1: a pointwise convolution over a 1x1 map, EfficientNet's
 * squeeze-and-excitation layers; a Gemm of batch 1 with B not transposed): the 8 x 32
 * kernel would use one lane in 32. Here x (B's column) is spread once into MR copies of each
 * value, k-major like a panel of A, so that every panel is a dot product of two contiguous
 * runs, 16 lanes (two k) per FMA; lanes i and i + 8 then hold row i. */
#define GEMV_MAX_K 8192

struct gemv_job {
    const float *ap, *xx;
    int64_t M, K, ldc;
    float *C;
    const struct ox_epilogue *ep;
    bool load_c;
};

#ifdef HAVE_AVX512_PATH
__attribute__((target("avx512f"))) static void gemv_piece(void *arg, int64_t b, int64_t e,
                                                          int tid) {
    (void)tid;
    const struct gemv_job *j = arg;
    int64_t Mp = (j->M + MR - 1) / MR * MR;
    for (int64_t p = b; p < e; p++) {
        __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                         _mm512_setzero_ps()};
        for (int64_t k0 = 0; k0 < j->K; k0 += KC) {
            int64_t kc = j->K - k0 < KC ? j->K - k0 : KC, n = kc * MR, t = 0;
            const float *a = j->ap + k0 * Mp + p * MR * kc, *x = j->xx + k0 * MR;
            for (; t + 64 <= n; t += 64)
                for (int u = 0; u < 4; u++)
                    acc[u] = _mm512_fmadd_ps(_mm512_loadu_ps(a + t + 16 * u),
                                             _mm512_loadu_ps(x + t + 16 * u), acc[u]);
            for (; t < n; t += 16) {
                __mmask16 m = n - t >= 16 ? 0xFFFF : 0x00FF;
                acc[0] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + t),
                                         _mm512_maskz_loadu_ps(m, x + t), acc[0]);
            }
        }
        __m512 s = _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3]));
        float r[16];
        _mm512_storeu_ps(r, s);
        for (int64_t i = 0; i < MR && p * MR + i < j->M; i++) {
            int64_t row = p * MR + i;
            float v = r[i] + r[i + MR] + (j->load_c ? j->C[row * j->ldc] : 0.0f);
            const struct ox_epilogue *ep = j->ep;
            if (ep) {
                if (ep->bias_row) v += ep->bias_row[row];
                if (ep->bias_col) v += ep->bias_col[0];
                if (ep->residual) v += ep->residual[row * ep->ld_residual];
                v = ox_fused_act(v, ep->lo, ep->hi, ep->silu);
            }
            j->C[row * j->ldc] = v;
        }
    }
}

/* Whether the product was done here (N 1, K not too long for the spread copy of x). */
static bool sgemv_packed(struct ox_pool *pool, const float *ap, int64_t M, int64_t K,
                         const struct ox_gemm_b *b, float *C, int64_t ldc,
                         const struct ox_epilogue *ep, bool load_c) {
    static _Thread_local float xx[GEMV_MAX_K * MR] __attribute__((aligned(64)));
    static _Thread_local float col[KC * NR] __attribute__((aligned(64)));
    if (K > GEMV_MAX_K || K <= 0) return false;
    for (int64_t k0 = 0; k0 < K; k0 += KC) {
        int64_t kc = K - k0 < KC ? K - k0 : KC;
        if (!b->offs && !b->packed) b->pack(b, k0, k0 + kc, 0, 1, col);
        for (int64_t k = k0; k < k0 + kc; k++) {
            float v = b->offs     ? b->data[b->offs[k]]
                      : b->packed ? b->packed[k * NR]
                                  : col[(k - k0) * NR];
            for (int i = 0; i < MR; i++) xx[k * MR + i] = v;
        }
    }
    struct gemv_job j = {ap, xx, M, K, ldc, C, ep, load_c};
    int64_t panels = (M + MR - 1) / MR;
    if (ox_pool_size(pool) == 1 || 2.0 * (double)M * (double)K < 200000.)
        gemv_piece(&j, 0, panels, 0);
    else
        ox_parallel_for(pool, panels, gemv_piece, &j);
    return true;
}
#endif

struct sgemm_job {
    const float *ap;
    int64_t M, N, K, ldc;
    const struct ox_gemm_b *b;
    float *C;
    const struct ox_epilogue *ep;
    bool load_c, by_cols;
};

static void sgemm_piece(void *arg, int64_t begin, int64_t end, int tid) {
    (void)tid;
    const struct sgemm_job *j = arg;
    int64_t n_panels = (j->M + MR - 1) / MR;
    if (j->by_cols) {
        int64_t c0 = begin * NR, c1 = end * NR < j->N ? end * NR : j->N;
        sgemm_block(j->ap, j->M, j->K, 0, n_panels, c0, c1, j->b, j->C, j->ldc, j->ep, j->load_c);
    } else {
        sgemm_block(j->ap, j->M, j->K, begin, end, 0, j->N, j->b, j->C, j->ldc, j->ep, j->load_c);
    }
}

void ox_sgemm_packed(struct ox_pool *pool, const float *ap, int64_t M, int64_t N, int64_t K,
                     const struct ox_gemm_b *b, float *C, int64_t ldc, const struct ox_epilogue *ep,
                     bool load_c) {
    if (M <= 0 || N <= 0) return;
#ifdef HAVE_AVX512_PATH
    if (N == 1 && sgemv_packed(pool, ap, M, K, b, C, ldc, ep, load_c)) return;
#endif
    struct sgemm_job j = {ap, M, N, K, ldc, b, C, ep, load_c, true};
    int T = ox_pool_size(pool);
    int64_t col_blocks = (N + NR - 1) / NR, row_panels = (M + MR - 1) / MR;
    if (T == 1 || 2.0 * (double)M * (double)N * (double)K < 200000.) {
        sgemm_piece(&j, 0, col_blocks, 0);
        return;
    }
    /* Column blocks when each thread gets a few, else row panels if there are more. But row
     * panels where A is the larger operand: a piece of a few column blocks reads all of A
     * (resnet50's 256 -> 1024 channel 1x1 convolutions at 14x14: 1 MB of weights read by
     * each of 7 one-block pieces; 0.44 -> 0.38 ms on 2 threads), at the price of each thread
     * packing all of B: A twice B's size, or half of it where B is cheap to pack (a plain
     * matrix, or read in place; not the patches of a strided convolution). */
    bool cheap_b = b->packed || b->offs || b->pack == ox_gemm_b_pack_matrix;
    bool a_large = M >= 2 * N || (cheap_b && 2 * M >= N);
    j.by_cols =
        (col_blocks >= 3 * T || col_blocks >= row_panels) && !(a_large && row_panels >= 2 * T);
    if (j.by_cols)
        ox_parallel_for(pool, col_blocks, sgemm_piece, &j);
    else /* every row piece packs all of B: one piece per thread */
        ox_parallel_for_pieces(pool, row_panels, 1, sgemm_piece, &j);
}
