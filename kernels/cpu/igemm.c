/* Exact int16 GEMM for the integer operators (kernels/cpu/igemm.h).
 *
 * The operands are 8-bit values minus their zero points, so within [-255, 255]. Where the
 * CPU has AVX-512BW, A is packed in panels of IG_MR rows whose elements are pairs of
 * consecutive k (one int32 each); the columns go over the pool in blocks of IG_NR, each block
 * of B packed into pairs too (vpermt2w), and vpmaddwd multiplies a pair of A by 16 pairs of B
 * and adds the two products, so that a panel times a block is 16 registers of int32 sums
 * over all of K. Where the columns are fewer than two blocks per thread, the panels are split
 * between threads as well. CPUs without AVX-512BW keep the callers' scalar loops.
 */
#include "kernels/cpu/igemm.h"

#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#define IG_MR 8
#define IG_NR IG_BLOCK_COLS

struct ig_job {
    const struct ox_igemm16_op *op;
    int64_t kp;              /* pairs of k, (K + 1) / 2 */
    const int32_t *ap;       /* packed A: ceil(M / IG_MR) panels of kp x IG_MR pairs */
    int64_t blocks, mgroups; /* units: blocks x groups of panels */
    char *scratch;           /* per thread: B block (kp x IG_NR pairs), C block */
    size_t per_thread;
};

bool ox_igemm16_fast(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    static int fast = -1;
    if (fast < 0) fast = ox_sgemm_is_fast() && __builtin_cpu_supports("avx512bw") ? 1 : 0;
    return fast == 1;
#else
    return false;
#endif
}

/* Packed A, then per thread a block of B and a block of C. */
bool ox_igemm16_scratch(int64_t M, int64_t K, int n_threads, size_t *total) {
    if (!ox_igemm16_fast()) return true;
    if (M < 0 || K < 0 || M > INT32_MAX || K > INT32_MAX) return false;
    size_t per = ox_align64((size_t)((K + 1) / 2) * IG_NR * 4) + ox_align64(IG_MR * IG_NR * 4), all;
    return ox_mul_size(per, (size_t)(n_threads > 0 ? n_threads : 1), &all) &&
           ox_add_size(*total, all, total) &&
           ox_add_size(*total, ox_align64(ox_igemm16_a_bytes(M, K)), total);
}

size_t ox_igemm16_a_bytes(int64_t M, int64_t K) {
    return (size_t)((M + IG_MR - 1) / IG_MR * IG_MR) * (size_t)((K + 1) / 2) * 4;
}

/* Rows of A (lda_bytes apart, row_bytes long) as panels of IG_MR rows whose elements are
 * 4 bytes of a row (a pair of int16 or four 8-bit values, k ascending from the low byte);
 * rows past M and bytes past a row's end are zero. */
static void pack_a_words(const uint8_t *a, int64_t lda_bytes, int64_t M, int64_t row_bytes,
                         int32_t *ap) {
    int64_t words = (row_bytes + 3) / 4, whole = row_bytes / 4;
    for (int64_t p = 0; p * IG_MR < M; p++)
        for (int r = 0; r < IG_MR; r++) {
            int64_t m = p * IG_MR + r;
            int32_t *d = ap + p * words * IG_MR + r;
            if (m >= M) {
                for (int64_t w = 0; w < words; w++) d[w * IG_MR] = 0;
                continue;
            }
            const uint8_t *row = a + m * lda_bytes;
            for (int64_t w = 0; w < whole; w++) memcpy(d + w * IG_MR, row + 4 * w, 4);
            if (whole < words) {
                uint8_t last[4] = {0};
                memcpy(last, row + 4 * whole, (size_t)(row_bytes - 4 * whole));
                memcpy(d + whole * IG_MR, last, 4);
            }
        }
}

void ox_igemm16_pack_a(const int16_t *a, int64_t lda, int64_t M, int64_t K, void *dst) {
    pack_a_words((const uint8_t *)a, 2 * lda, M, 2 * K, dst);
}

size_t ox_igemm8_a_bytes(int64_t M, int64_t K) {
    return (size_t)((M + IG_MR - 1) / IG_MR * IG_MR) * (size_t)((K + 3) / 4) * 4;
}

void ox_igemm8_pack_a(const void *a, int64_t lda, int64_t M, int64_t K, void *dst) {
    pack_a_words(a, lda, M, K, dst);
}

#if defined(__x86_64__) && defined(__GNUC__)
/* Columns [n0, n0 + nn) of 8-bit B (ldb bytes apart) as groups of four rows: group k4 holds
 * IG_NR columns of 4 bytes (rows 4 k4 .. 4 k4 + 3; zeros past K and past nn). */
static void ig_pack_b8(const void *b, int64_t ldb, int64_t K, int64_t n0, int64_t nn, int16_t *bp) {
    static const uint8_t zeros[IG_NR];
    uint8_t *out = (uint8_t *)bp;
    for (int64_t k4 = 0; k4 < (K + 3) / 4; k4++) {
        const uint8_t *r[4];
        uint8_t tail[4][IG_NR];
        for (int i = 0; i < 4; i++) {
            int64_t k = 4 * k4 + i;
            r[i] = k < K ? (const uint8_t *)b + k * ldb + n0 : zeros;
            if (k < K && nn < IG_NR) { /* a short block: the columns past nn read zeros */
                memset(tail[i], 0, IG_NR);
                memcpy(tail[i], r[i], (size_t)nn);
                r[i] = tail[i];
            }
        }
        for (int h = 0; h < IG_NR; h += 16) {
            __m128i a0 = _mm_loadu_si128((const __m128i *)(r[0] + h));
            __m128i a1 = _mm_loadu_si128((const __m128i *)(r[1] + h));
            __m128i a2 = _mm_loadu_si128((const __m128i *)(r[2] + h));
            __m128i a3 = _mm_loadu_si128((const __m128i *)(r[3] + h));
            __m128i t0 = _mm_unpacklo_epi8(a0, a1), t1 = _mm_unpackhi_epi8(a0, a1);
            __m128i u0 = _mm_unpacklo_epi8(a2, a3), u1 = _mm_unpackhi_epi8(a2, a3);
            uint8_t *o = out + k4 * IG_NR * 4 + h * 4;
            _mm_storeu_si128((__m128i *)o, _mm_unpacklo_epi16(t0, u0));
            _mm_storeu_si128((__m128i *)(o + 16), _mm_unpackhi_epi16(t0, u0));
            _mm_storeu_si128((__m128i *)(o + 32), _mm_unpacklo_epi16(t1, u1));
            _mm_storeu_si128((__m128i *)(o + 48), _mm_unpackhi_epi16(t1, u1));
        }
    }
}
#endif

#if defined(__x86_64__) && defined(__GNUC__)
/* Columns [n0, n0 + nn) of B as pairs of rows: pair k2 holds IG_NR (k, k + 1) pairs. */
__attribute__((target("avx512f,avx512bw"))) static void
ig_pack_b(const int16_t *b0, int64_t ldb, int64_t K, int64_t n0, int64_t nn, int16_t *bp) {
    __mmask32 m = nn >= 32 ? 0xFFFFFFFFu : (__mmask32)((1u << nn) - 1);
    __m512i lo_idx = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8,
                                      39, 7, 38, 6, 37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
    __m512i hi_idx =
        _mm512_set_epi16(63, 31, 62, 30, 61, 29, 60, 28, 59, 27, 58, 26, 57, 25, 56, 24, 55, 23, 54,
                         22, 53, 21, 52, 20, 51, 19, 50, 18, 49, 17, 48, 16);
    for (int64_t k2 = 0; k2 < (K + 1) / 2; k2++) {
        const int16_t *r0 = b0 + 2 * k2 * ldb + n0;
        __m512i a = _mm512_maskz_loadu_epi16(m, r0);
        __m512i b = 2 * k2 + 1 < K ? _mm512_maskz_loadu_epi16(m, r0 + ldb) : _mm512_setzero_si512();
        _mm512_storeu_si512(bp + k2 * 2 * IG_NR, _mm512_permutex2var_epi16(a, lo_idx, b));
        _mm512_storeu_si512(bp + k2 * 2 * IG_NR + IG_NR, _mm512_permutex2var_epi16(a, hi_idx, b));
    }
}

/* One panel of A times one packed block of B: IG_MR x IG_NR sums into c. DOT(s, a, b) adds
 * the products of a's and b's pairs of int16 to s's int32 lanes. The sums are named
 * variables, not an array, so that the compiler keeps each in its register. */
#define IG_ROW_DECL(r) __m512i s##r##0 = _mm512_setzero_si512(), s##r##1 = _mm512_setzero_si512();
#define IG_ROW_STEP(r, DOT)                                                                        \
    {                                                                                              \
        __m512i av = _mm512_set1_epi32(a[r]);                                                      \
        s##r##0 = DOT(s##r##0, av, b0);                                                            \
        s##r##1 = DOT(s##r##1, av, b1);                                                            \
    }
#define IG_ROW_STORE(r)                                                                            \
    _mm512_storeu_si512(c + r * IG_NR, s##r##0);                                                   \
    _mm512_storeu_si512(c + r * IG_NR + 16, s##r##1);
#define IG_KERNEL(NAME, TARGET, DOT)                                                               \
    __attribute__((target(TARGET))) static void NAME(const int32_t *ap, const int16_t *bp,         \
                                                     int64_t kp, int32_t *c) {                     \
        IG_ROW_DECL(0) IG_ROW_DECL(1) IG_ROW_DECL(2) IG_ROW_DECL(3);                               \
        IG_ROW_DECL(4) IG_ROW_DECL(5) IG_ROW_DECL(6) IG_ROW_DECL(7);                               \
        for (int64_t k2 = 0; k2 < kp; k2++) {                                                      \
            __m512i b0 = _mm512_loadu_si512(bp + k2 * 2 * IG_NR);                                  \
            __m512i b1 = _mm512_loadu_si512(bp + k2 * 2 * IG_NR + IG_NR);                          \
            const int32_t *a = ap + k2 * IG_MR;                                                    \
            IG_ROW_STEP(0, DOT) IG_ROW_STEP(1, DOT) IG_ROW_STEP(2, DOT) IG_ROW_STEP(3, DOT);       \
            IG_ROW_STEP(4, DOT) IG_ROW_STEP(5, DOT) IG_ROW_STEP(6, DOT) IG_ROW_STEP(7, DOT);       \
        }                                                                                          \
        IG_ROW_STORE(0) IG_ROW_STORE(1) IG_ROW_STORE(2) IG_ROW_STORE(3);                           \
        IG_ROW_STORE(4) IG_ROW_STORE(5) IG_ROW_STORE(6) IG_ROW_STORE(7);                           \
    }

/* AVX-512BW: vpmaddwd, then vpaddd; AVX-512 VNNI: vpdpwssd, the two in one instruction */
#define MADD_ADD(s, a, b) _mm512_add_epi32(s, _mm512_madd_epi16(a, b))
IG_KERNEL(ig_kernel_bw, "avx512f,avx512bw", MADD_ADD)
IG_KERNEL(ig_kernel_vnni, "avx512f,avx512bw,avx512vnni", _mm512_dpwssd_epi32)
/* 8-bit operands, four k per int32 lane (vpdpbusd: its first factor unsigned): B unsigned
 * against A signed, or A unsigned against B signed */
#define DOT_BU8(s, a, b) _mm512_dpbusd_epi32(s, b, a)
#define DOT_AU8(s, a, b) _mm512_dpbusd_epi32(s, a, b)
IG_KERNEL(ig_kernel_bu8, "avx512f,avx512bw,avx512vnni", DOT_BU8)
IG_KERNEL(ig_kernel_au8, "avx512f,avx512bw,avx512vnni", DOT_AU8)

typedef void (*ig_kernel_fn)(const int32_t *ap, const int16_t *bp, int64_t kp, int32_t *c);

static ig_kernel_fn ig_kernel(void) {
    static ig_kernel_fn k;
    if (!k) {
        const char *e = getenv("OX_IGEMM_VNNI"); /* 0: vpmaddwd + vpaddd where VNNI is there */
        k = __builtin_cpu_supports("avx512vnni") && !(e && !strcmp(e, "0")) ? ig_kernel_vnni
                                                                            : ig_kernel_bw;
    }
    return k;
}

static void ig_units(void *arg, int64_t u0, int64_t u1, int tid) {
    const struct ig_job *j = arg;
    const struct ox_igemm16_op *op = j->op;
    int16_t *buf = (int16_t *)(j->scratch + (size_t)tid * j->per_thread);
    int32_t *c = (int32_t *)((char *)buf + ox_align64((size_t)j->kp * IG_NR * 4));
    int64_t panels = (op->M + IG_MR - 1) / IG_MR, per = (panels + j->mgroups - 1) / j->mgroups;
    int64_t packed = -1;
    ig_kernel_fn kernel = op->mode8 == OX_IG8_A_S8_B_U8   ? ig_kernel_bu8
                          : op->mode8 == OX_IG8_A_U8_B_S8 ? ig_kernel_au8
                                                          : ig_kernel();
    for (int64_t u = u0; u < u1; u++) {
        int64_t blk = u / j->mgroups, grp = u % j->mgroups;
        int64_t n0 = blk * IG_NR, nn = op->N - n0 < IG_NR ? op->N - n0 : IG_NR;
        const int16_t *bp = buf;
        if (op->b_packed)
            bp = (const int16_t *)op->b_packed + blk * j->kp * 2 * IG_NR;
        else if (packed != blk && op->mode8)
            ig_pack_b8(op->b8, op->ldb, op->K, n0, nn, buf), packed = blk;
        else if (packed != blk)
            ig_pack_b(op->b, op->ldb, op->K, n0, nn, buf), packed = blk;
        for (int64_t p = grp * per; p < panels && p < (grp + 1) * per; p++) {
            kernel(j->ap + p * j->kp * IG_MR, bp, j->kp, c);
            for (int r = 0; r < IG_MR && p * IG_MR + r < op->M; r++)
                op->emit(op->arg, p * IG_MR + r, n0, nn, c + r * IG_NR);
        }
    }
}
#endif

size_t ox_igemm16_b_bytes(int64_t K, int64_t N) {
    return (size_t)((N + IG_NR - 1) / IG_NR) * (size_t)((K + 1) / 2) * IG_NR * 4;
}

void ox_igemm16_pack_b(const int16_t *b, int64_t ldb, int64_t K, int64_t N, void *dst) {
#if defined(__x86_64__) && defined(__GNUC__)
    for (int64_t n0 = 0; n0 < N; n0 += IG_NR)
        ig_pack_b(b, ldb, K, n0, N - n0 < IG_NR ? N - n0 : IG_NR,
                  (int16_t *)dst + n0 / IG_NR * ((K + 1) / 2) * 2 * IG_NR);
#else
    (void)b, (void)ldb, (void)K, (void)N, (void)dst;
#endif
}

size_t ox_igemm8_b_bytes(int64_t K, int64_t N) {
    return (size_t)((N + IG_NR - 1) / IG_NR) * (size_t)((K + 3) / 4) * IG_NR * 4;
}

void ox_igemm8_pack_b(const void *b, int64_t ldb, int64_t K, int64_t N, void *dst) {
#if defined(__x86_64__) && defined(__GNUC__)
    for (int64_t n0 = 0; n0 < N; n0 += IG_NR)
        ig_pack_b8(b, ldb, K, n0, N - n0 < IG_NR ? N - n0 : IG_NR,
                   (int16_t *)((char *)dst + n0 / IG_NR * ((K + 3) / 4) * IG_NR * 4));
#else
    (void)b, (void)ldb, (void)K, (void)N, (void)dst;
#endif
}

bool ox_igemm8_fast(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    static int fast = -1;
    if (fast < 0) {
        const char *e = getenv("OX_IGEMM8"); /* 0: the int16 path for 8-bit operands too */
        fast = ox_igemm16_fast() && __builtin_cpu_supports("avx512vnni") && !(e && !strcmp(e, "0"))
                   ? 1
                   : 0;
    }
    return fast == 1;
#else
    return false;
#endif
}

bool ox_igemm8_vbmi(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    static int ok = -1;
    if (ok < 0) ok = ox_igemm8_fast() && __builtin_cpu_supports("avx512vbmi") ? 1 : 0;
    return ok == 1;
#else
    return false;
#endif
}

void ox_igemm16(struct ox_pool *pool, const struct ox_igemm16_op *op, void *scratch) {
#if defined(__x86_64__) && defined(__GNUC__)
    int T = ox_pool_size(pool);
    struct ig_job j = {.op = op, .kp = op->mode8 ? (op->K + 3) / 4 : (op->K + 1) / 2};
    j.per_thread = ox_align64((size_t)j.kp * IG_NR * 4) + ox_align64(IG_MR * IG_NR * 4);
    j.scratch = scratch;
    j.ap = op->a_packed;
    if (!j.ap) {
        int32_t *ap = (int32_t *)((char *)scratch + (size_t)(T > 0 ? T : 1) * j.per_thread);
        if (op->mode8)
            ox_igemm8_pack_a(op->a8, op->lda, op->M, op->K, ap);
        else
            ox_igemm16_pack_a(op->a, op->lda, op->M, op->K, ap);
        j.ap = ap;
    }
    j.blocks = (op->N + IG_NR - 1) / IG_NR;
    int64_t panels = (op->M + IG_MR - 1) / IG_MR;
    /* enough units for the threads: split the rows too when the columns are few */
    j.mgroups = j.blocks >= 2 * T ? 1 : (2 * T + j.blocks - 1) / j.blocks;
    if (j.mgroups > panels) j.mgroups = panels;
    ox_parallel_for(pool, j.blocks * j.mgroups, ig_units, &j);
#else
    (void)pool, (void)op, (void)scratch;
#endif
}
