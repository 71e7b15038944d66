/* 8-bit 2-D depthwise convolution (kernels/cpu/qdw8.h): QLinearConv with one input channel
 * per output channel (group = C = M), the 3x3 and 5x5 layers of MobileNets and
 * EfficientNets, which kernels/cpu/quant.c's general form runs as C tiny GEMMs (im2col of
 * each channel, K = 9) and qconv8.c's tiles do not fit (4 input channels per product).
 *
 * Each channel plane goes once into a padded byte copy in the thread's scratch (the zero
 * point around it; int8 input shifted by 128 to uint8, its zero point too, which leaves
 * every x - zero point as it was). A vector of 16 outputs of a row then takes, per tap, 16
 * bytes widened to int32 (stride 2: 32 bytes as 16 words, the low byte of each) and
 * converted to float, and one fused multiply-add with the tap's weight minus its zero point.
 * Every product and partial sum is an integer below 2^24 in magnitude (taps <= 256, each
 * product at most 255 x 255), so float holds them exactly: the sums are the integer sums.
 * The zero point comes off as zp x the channel's sum of weights (padding reads the zero
 * point, so the correction is the same everywhere), the bias is added in int32, and the
 * requantization is QLinearConv's in double (vecmath.h requant16): the bytes are those of
 * quant.c's general form. Eight vectors are summed side by side, hiding the latency of the
 * multiply-adds.
 */
#include "kernels/cpu/qdw8.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/igemm.h"
#include "kernels/cpu/vecmath.h"

#define QDW_MAX_T 256 /* taps: 256 x 255 x 255 < 2^24, the sums exact in float */
#define QDW_V     8   /* vectors of 16 outputs summed side by side */

/* The padded copy: hp rows of l bytes (the last vector's furthest tap reads 16 bytes, or
 * 32 at stride 2, from within its row). */
struct qdw_shape {
    int64_t hp, l;
};

static struct qdw_shape qdw_shape(const struct ox_qconv8_geom *g) {
    struct qdw_shape p;
    p.hp = (g->OH - 1) * g->SH + (g->KH - 1) * g->DH + 1;
    p.l = ((g->OW + 15) / 16 * 16 * g->SW + (g->KW - 1) * g->DW + 64 + 63) / 64 * 64;
    return p;
}

static size_t qdw_slot_bytes(const struct ox_qconv8_geom *g) {
    struct qdw_shape p = qdw_shape(g);
    return ox_align64((size_t)(p.hp * p.l));
}

bool ox_qdw8_supports(int64_t kh, int64_t kw, int64_t stride_w) {
    const char *e = getenv("OX_QCONV8");
    return ox_igemm16_fast() && !(e && !strcmp(e, "0")) && kh > 0 && kw > 0 && kh <= QDW_MAX_T &&
           kw <= QDW_MAX_T / kh && stride_w >= 1 && stride_w <= 2;
}

bool ox_qdw8_fast(const struct ox_qconv8_geom *g) {
    if (!ox_qdw8_supports(g->KH, g->KW, g->SW)) return false;
    const int64_t lim = (int64_t)1 << 24;
    if (g->N <= 0 || g->C <= 0 || g->M != g->C || g->KH <= 0 || g->KW <= 0 || g->OH <= 0 ||
        g->OW <= 0 || g->H <= 0 || g->W <= 0 || g->SH <= 0 || g->SW <= 0 || g->SW > 2 ||
        g->DH <= 0 || g->DW <= 0 || g->PT < 0 || g->PL < 0)
        return false;
    if (g->N > lim || g->C > lim || g->H > lim || g->W > lim || g->OH > lim || g->OW > lim ||
        g->KH > lim || g->KW > lim || g->KH * g->KW > QDW_MAX_T || g->SH > lim || g->DH > lim ||
        g->DW > lim || g->PT > lim || g->PL > lim)
        return false;
    /* one padded plane per thread below 1 GiB */
    struct qdw_shape p = qdw_shape(g);
    return (double)p.hp * (double)p.l < 0x1p30;
}

size_t ox_qdw8_scratch_bytes(const struct ox_qconv8_geom *g, int n_threads) {
    return qdw_slot_bytes(g) * (size_t)(n_threads > 0 ? n_threads : 1);
}

#if defined(__x86_64__) && defined(__GNUC__)

struct qdw_job {
    const struct ox_qconv8_geom *g;
    const struct ox_qdw8_in *in;
    const struct ox_qconv8_out *o;
    uint8_t *y;
    char *scratch;
    struct qdw_shape p;
    size_t slot;
};

/* Lanes [lo, hi) of 64 (lo, hi clipped to [0, 64]). */
static inline __mmask64 lanes64(int64_t lo, int64_t hi) {
    lo = lo < 0 ? 0 : lo > 64 ? 64 : lo;
    hi = hi < 0 ? 0 : hi > 64 ? 64 : hi;
    __mmask64 below_hi = hi >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << hi) - 1);
    __mmask64 below_lo = lo >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << lo) - 1);
    return below_hi & ~below_lo;
}

/* Plane xc into the padded copy: rows from -PT, columns from -PL, the zero point zp
 * (shifted to uint8) outside the image; 64 bytes at a time, the image's bytes by masked
 * loads (no call per row: MobileNet's late planes are 7 to 14 bytes wide). */
__attribute__((target("avx512f,avx512bw"))) static void
qdw_pad_copy(const struct qdw_job *j, const uint8_t *xc, uint8_t *pad, uint8_t zp) {
    const struct ox_qconv8_geom *g = j->g;
    const int64_t L = j->p.l;
    const __m512i z = _mm512_set1_epi8((char)zp), flip = _mm512_set1_epi8((char)0x80);
    for (int64_t r = 0; r < j->p.hp; r++) {
        uint8_t *d = pad + r * L;
        int64_t ih = r - g->PT;
        bool in = ih >= 0 && ih < g->H;
        const uint8_t *src = in ? xc + ih * g->W : NULL;
        for (int64_t k = 0; k < L; k += 64) {
            __mmask64 m = in ? lanes64(g->PL - k, g->PL + g->W - k) : 0;
            __m512i v = z;
            if (m) { /* columns k - PL .. of the row, the masked-off bytes not read */
                __m512i x = _mm512_maskz_loadu_epi8(m, src + (k - g->PL));
                if (j->in->x_signed) x = _mm512_xor_si512(x, flip);
                v = _mm512_mask_blend_epi8(m, z, x);
            }
            _mm512_store_si512((__m512i *)(d + k), v);
        }
    }
}

/* 16 taps of consecutive outputs from p (stride 1: bytes p[0..15]; stride 2: p[0], p[2],
 * .. p[30]) as floats. */
__attribute__((target("avx512f"))) static inline __m512 qdw_taps(const uint8_t *p, bool s2,
                                                                 __m512i low) {
    __m512i v =
        s2 ? _mm512_and_si512(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p)), low)
           : _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm512_cvtepi32_ps(v);
}

/* The integer sums of QDW_V vectors of 16 outputs (src[i]: the padded copy at the vector's
 * first tap of kernel row 0) for kernel widths up to 8 and dilation 1 across: for each kernel
 * row, one byte permute (VBMI) puts each output's 4 consecutive taps in its lane (lane l:
 * bytes l S + 4 q .. l S + 4 q + 3 of the 64 loaded) and one vpdpbusd adds their products
 * with 4 weights (minus their zero point, fitting int8; 0 past the kernel); q = 0, and 1
 * for kernels wider than 4. Three kernel rows of 3 taps: 3 loads, 3 permutes, 3 products
 * per 16 outputs, where the float form takes 9 widenings, conversions and multiply-adds. */
__attribute__((target("avx512f,avx512bw,avx512vnni,avx512vbmi"))) static void
qdw_sums_vnni(const uint8_t *const *src, int64_t rows, int64_t row_step, int groups,
              const int32_t *wd, const __m512i *idx, __m512i *acc) {
    /* the sums in registers (a local array, the loops over it unrolled), stored once */
    __m512i a[QDW_V];
#pragma GCC unroll 8
    for (int i = 0; i < QDW_V; i++) a[i] = _mm512_setzero_si512();
    for (int64_t r = 0; r < rows; r++)
        for (int q = 0; q < groups; q++) {
            __m512i w = _mm512_set1_epi32(wd[r * 2 + q]), ix = idx[q];
#pragma GCC unroll 8
            for (int i = 0; i < QDW_V; i++) {
                __m512i v = _mm512_loadu_si512(src[i] + r * row_step);
                a[i] = _mm512_dpbusd_epi32(a[i], _mm512_permutexvar_epi8(ix, v), w);
            }
        }
#pragma GCC unroll 8
    for (int i = 0; i < QDW_V; i++) acc[i] = a[i];
}

/* Channel planes u = image x C + channel. */
__attribute__((target("avx512f,avx512bw,avx512vl"))) static void qdw_planes(void *arg, int64_t u0,
                                                                            int64_t u1, int tid) {
    const struct qdw_job *j = arg;
    const struct ox_qconv8_geom *g = j->g;
    const struct ox_qconv8_out *o = j->o;
    uint8_t *pad = (uint8_t *)(j->scratch + j->slot * (size_t)tid);
    const int64_t taps = g->KH * g->KW, L = j->p.l, S = g->SW;
    const bool s2 = S == 2;
    const int32_t xz = j->in->x_signed ? j->in->xz + 128 : j->in->xz; /* as uint8 */
    const __m512i low = _mm512_set1_epi32(0xFF);
    float wf[QDW_MAX_T];
    int64_t off[QDW_MAX_T]; /* each tap's byte offset in the padded copy, for output (0, 0) */
    for (int64_t ky = 0; ky < g->KH; ky++)
        for (int64_t kx = 0; kx < g->KW; kx++) off[ky * g->KW + kx] = ky * g->DH * L + kx * g->DW;
    /* the dot-product form: kernels up to 8 wide, dilation 1 across */
    const bool dot = ox_igemm8_vbmi() && g->KW <= 8 && g->DW == 1;
    const int groups = (int)((g->KW + 3) / 4);
    __m512i idx[2];
    int32_t wd[2 * QDW_MAX_T];
    for (int q = 0; q < 2; q++) {
        uint8_t b[64];
        for (int k = 0; k < 64; k++) b[k] = (uint8_t)((k / 4) * S + 4 * q + k % 4);
        idx[q] = _mm512_loadu_si512(b);
    }
    for (int64_t u = u0; u < u1; u++) {
        int64_t c = u % g->C;
        qdw_pad_copy(j, (const uint8_t *)j->in->x + u * g->H * g->W, pad, (uint8_t)xz);
        int32_t wz = 0, wsum = 0;
        if (j->in->wz) {
            int64_t k = j->in->wz_per_c ? c : 0;
            wz = j->in->w_signed ? ((const int8_t *)j->in->wz)[k] : ((const uint8_t *)j->in->wz)[k];
        }
        bool fits = true; /* every weight minus its zero point an int8 */
        for (int64_t t = 0; t < taps; t++) {
            int64_t k = c * taps + t;
            int32_t w =
                j->in->w_signed ? ((const int8_t *)j->in->w)[k] : ((const uint8_t *)j->in->w)[k];
            wf[t] = (float)(w - wz);
            wsum += w - wz;
            fits = fits && w - wz >= -128 && w - wz <= 127;
        }
        if (dot && fits)
            for (int64_t ky = 0; ky < g->KH; ky++)
                for (int q = 0; q < 2; q++) {
                    uint32_t d = 0;
                    for (int b = 0; b < 4; b++) {
                        int64_t kx = 4 * q + b;
                        int32_t w = kx < g->KW ? (int32_t)wf[ky * g->KW + kx] : 0;
                        d |= (uint32_t)(uint8_t)(int8_t)w << (8 * b);
                    }
                    wd[ky * 2 + q] = (int32_t)d;
                }
        __m512i offset = _mm512_set1_epi32((o->bias ? o->bias[c] : 0) - xz * wsum);
        __m512d m = _mm512_set1_pd(o->mult[c]), zp = _mm512_set1_pd(o->zp);
        __m512d lo = _mm512_set1_pd(o->lo), hi = _mm512_set1_pd(o->hi);
        uint8_t *yc = j->y + u * g->OH * g->OW;
        int64_t vpr = (g->OW + 15) / 16, nv = g->OH * vpr;
        for (int64_t v0 = 0; v0 < nv; v0 += QDW_V) {
            const uint8_t *src[QDW_V];
            int64_t dst[QDW_V], left[QDW_V];
            int n = nv - v0 < QDW_V ? (int)(nv - v0) : QDW_V;
            for (int i = 0; i < QDW_V; i++) { /* past n: the first again, not stored */
                int64_t v = v0 + (i < n ? i : 0), oh = v / vpr, ow = v % vpr * 16;
                src[i] = pad + oh * g->SH * L + ow * S;
                dst[i] = oh * g->OW + ow;
                left[i] = g->OW - ow;
            }
            __m512i sums[QDW_V];
            if (dot && fits) {
                qdw_sums_vnni(src, g->KH, g->DH * L, groups, wd, idx, sums);
            } else {
                __m512 acc[QDW_V];
                for (int i = 0; i < QDW_V; i++) acc[i] = _mm512_setzero_ps();
                for (int64_t t = 0; t < taps; t++) {
                    __m512 w = _mm512_set1_ps(wf[t]);
                    for (int i = 0; i < QDW_V; i++)
                        acc[i] = _mm512_fmadd_ps(w, qdw_taps(src[i] + off[t], s2, low), acc[i]);
                }
                for (int i = 0; i < QDW_V; i++) sums[i] = _mm512_cvtps_epi32(acc[i]);
            }
            for (int i = 0; i < n; i++)
                store_bytes16(yc + dst[i], left[i],
                              requant16(_mm512_add_epi32(sums[i], offset), m, m, zp, lo, hi));
        }
    }
}
#endif

void ox_qdw8_run(struct ox_pool *pool, const struct ox_qconv8_geom *g, const struct ox_qdw8_in *in,
                 const struct ox_qconv8_out *o, void *y, void *scratch) {
#if defined(__x86_64__) && defined(__GNUC__)
    struct qdw_job j = {.g = g, .in = in, .o = o, .y = y, .scratch = scratch};
    j.p = qdw_shape(g);
    j.slot = qdw_slot_bytes(g);
    ox_parallel_for(pool, g->N * g->C, qdw_planes, &j);
#else
    (void)pool, (void)g, (void)in, (void)o, (void)y, (void)scratch;
#endif
}
