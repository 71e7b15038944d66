/* 8-bit 2-D convolution straight from the input (kernels/cpu/qconv8.h): QLinearConv with a
 * uint8 input and int8 weights whose zero points are 0, group 1 (what torch, onnxruntime's
 * quantizer and the model zoo write for ordinary convolutions).
 *
 * kernels/cpu/quant.c's general form writes the columns of the input (im2col: every input
 * byte once per kernel tap) and packs them for ox_igemm16 at every run; for a 3x3 layer of
 * 64 channels that costs more than the products. Here the input is turned once into
 * channels-last rows of C rounded up to 4 bytes per pixel, and the products read it in
 * place: a tile of 8 output pixels of one output row times 32 output channels keeps its
 * 16 x 16 int32 sums in registers; for each kernel tap the 8 pixels' input rows come from a
 * table of pointers (a pointer to a row of zero points where the tap falls in the padding),
 * and each 4 bytes of a pixel's channels, broadcast, meet 32 channels' 4 weights in two
 * vpdpbusd (AVX-512 VNNI: four uint8 x int8 products added into each int32 lane). The
 * weights are packed once (prepared memory) in that order: blocks of 32 output channels,
 * tap by tap, 4 input channels by 32 output channels at a time, zeros past C and M.
 *
 * The sums are of the raw input; the zero point comes off as zp x each channel's sum of
 * weights (padding reads the zero point, so the correction is the same everywhere). Then
 * QLinearConv's requantization in double, exactly as quant.c's row loop, and the 8 x 32
 * bytes go out transposed: each channel's 8 consecutive pixels in one 8-byte store.
 */
#include "kernels/cpu/qconv8.h"

#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "kernels/cpu/igemm.h"
#include "kernels/cpu/vecmath.h"

#define QC_MR    8   /* output pixels of a tile */
#define QC_NR    32  /* output channels of a tile */
#define QC_MAX_T 256 /* kernel taps (the tile's pointer table lives on the stack) */

static int64_t row_bytes(const struct ox_qconv8_geom *g) { /* CS: C rounded up to 4 */
    return (g->C + 3) / 4 * 4;
}

/* A layer of few input channels and a wide kernel (ResNet's stem: 3 channels, 7x7, stride
 * 2) runs as the convolution of KH x 1 over C x KW channels: pixel (h, ow) of the folded
 * input holds, for each kernel column kx, the C channels of input column ow SW - PL + kx DW
 * (the zero point outside). 7 taps of 24 bytes instead of 49 of 4 (three quarters of them
 * channels, the rest the fourth byte's padding), and a pointer table of 56 entries a tile
 * instead of 392: the stem ran at half the speed of the 3x3 layers. */
#define QC_FOLD_BYTES 16384 /* the padded row of 8-byte pixels, on the stack */

/* Pixels of the padded row: every tap of every output column, and the 64 bytes a permute
 * loads from the last one's first tap. */
static int64_t fold_pixels(const struct ox_qconv8_geom *g) {
    return (g->OW - 1) * g->SW + 8;
}

static bool fold_cols(const struct ox_qconv8_geom *g) {
#if defined(__x86_64__) && defined(__GNUC__)
    /* a folded pixel's taps within the 64 bytes from its first (8 bytes a pixel) */
    return ox_igemm8_vbmi() && g->KW > 1 && g->C < 8 && (g->KW - 1) * g->DW <= 7 &&
           g->OW <= QC_FOLD_BYTES && fold_pixels(g) * 8 <= QC_FOLD_BYTES;
#else
    (void)g;
    return false;
#endif
}

/* The geometry the tiles run: g itself, or g folded as above. */
static struct ox_qconv8_geom run_geom(const struct ox_qconv8_geom *g) {
    struct ox_qconv8_geom e = *g;
    if (fold_cols(g)) {
        e.C = g->C * g->KW, e.W = g->OW, e.KW = 1, e.SW = 1, e.DW = 1, e.PL = 0;
    }
    return e;
}

bool ox_qconv8_available(void) {
    const char *e = getenv("OX_QCONV8");
    return ox_igemm8_fast() && !(e && !strcmp(e, "0"));
}

bool ox_qconv8_fast(const struct ox_qconv8_geom *g) {
    if (!ox_qconv8_available()) return false;
    const int64_t lim = (int64_t)1 << 30;
    if (g->N <= 0 || g->C <= 0 || g->M <= 0 || g->KH <= 0 || g->KW <= 0 || g->OH <= 0 ||
        g->OW <= 0 || g->H <= 0 || g->W <= 0 || g->N > lim || g->C > lim || g->M > lim ||
        g->H > lim || g->W > lim || g->OH > lim || g->OW > lim)
        return false;
    if (g->KH * g->KW > QC_MAX_T || row_bytes(g) * g->KH * g->KW > lim) return false;
    /* the channels-last copy of the input and the packed weights stay below 2^46 bytes */
    double cs = (double)row_bytes(g);
    return (double)g->N * (double)g->H * (double)g->W * cs < 0x1p46 &&
           (double)(g->M + QC_NR) * (double)(g->KH * g->KW) * cs < 0x1p46;
}

size_t ox_qconv8_packed_bytes(const struct ox_qconv8_geom *g) {
    struct ox_qconv8_geom e = run_geom(g);
    int64_t nb = (e.M + QC_NR - 1) / QC_NR;
    return (size_t)nb * (size_t)(e.KH * e.KW * row_bytes(&e)) * QC_NR + ox_align64((size_t)e.M * 4);
}

void ox_qconv8_pack(const struct ox_qconv8_geom *g, const int8_t *w, void *dst) {
    struct ox_qconv8_geom e = run_geom(g);
    bool fold = fold_cols(g);
    int64_t cs = row_bytes(&e), taps = e.KH * e.KW, nb = (e.M + QC_NR - 1) / QC_NR;
    int8_t *d = dst;
    for (int64_t b = 0; b < nb; b++)
        for (int64_t t = 0; t < taps; t++)
            for (int64_t c4 = 0; c4 < cs; c4 += 4)
                for (int64_t j = 0; j < QC_NR; j++)
                    for (int64_t i = 0; i < 4; i++) {
                        int64_t m = b * QC_NR + j, c = c4 + i;
                        /* folded: channel kx C + ch of tap ky is w[m][ch][ky][kx] */
                        int64_t k = fold ? ((m * g->C + c % g->C) * g->KH + t) * g->KW + c / g->C
                                         : (m * g->C + c) * taps + t;
                        *d++ = m < e.M && c < e.C ? w[k] : 0;
                    }
    int32_t *sum = (int32_t *)((char *)dst + (size_t)nb * (size_t)(taps * cs) * QC_NR);
    for (int64_t m = 0; m < g->M; m++) {
        int32_t s = 0;
        for (int64_t k = 0; k < g->C * g->KH * g->KW; k++) s += w[m * g->C * g->KH * g->KW + k];
        sum[m] = s;
    }
}

size_t ox_qconv8_scratch_bytes(const struct ox_qconv8_geom *g) {
    struct ox_qconv8_geom e = run_geom(g);
    return ox_align64((size_t)(e.N * e.H * e.W * row_bytes(&e))) +
           ox_align64((size_t)row_bytes(&e));
}

#if defined(__x86_64__) && defined(__GNUC__)

struct qc8_job {
    const struct ox_qconv8_geom *g;
    const uint8_t *x;   /* NCHW input */
    uint8_t *xn;        /* channels-last copy: [N][H*W][cs] */
    const uint8_t *zp;  /* cs bytes of the zero point */
    const int8_t *wp;   /* packed weights */
    const int32_t *sum; /* each channel's sum of weights */
    const struct ox_qconv8_out *o;
    int32_t xzp;
    uint8_t *y;
    const struct ox_qconv8_geom *g0;   /* the layer's own geometry (g: the one the tiles run) */
    int64_t cs, taps, nb, groups, per; /* channel blocks in `groups` groups of `per` */
};

/* n <= 64 pixels of 16 channels (rows s[0..15]) as groups of `bytes` <= 16 bytes, cs bytes
 * apart from d: four 16 x 16 byte transposes side by side (one per 128-bit lane: pixels
 * 16 L .. 16 L + 15 of lane L), in four rounds of unpacks, then each pixel's 16 channels
 * in one store. (A scatter of 4-byte groups, the first form, took 13% of a QDQ ResNet-50:
 * scatters are slow on AMD's cores.) */
__attribute__((target("avx512f,avx512bw,avx512vl"))) static void
qc8_nhwc64(const uint8_t *const *s, int64_t n, uint8_t *d, int64_t cs, int bytes) {
    __mmask64 m = n >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << n) - 1);
    __m512i r[16], a[16];
    for (int i = 0; i < 16; i++) r[i] = _mm512_maskz_loadu_epi8(m, s[i]);
    for (int i = 0; i < 8;
         i++) { /* 16-bit unit u of a[8 h + i]: pixel 8 h + u, channels 2i, 2i+1 */
        a[i] = _mm512_unpacklo_epi8(r[2 * i], r[2 * i + 1]);
        a[8 + i] = _mm512_unpackhi_epi8(r[2 * i], r[2 * i + 1]);
    }
    for (int h = 0; h < 2; h++) /* 32-bit unit u of r[4 g + j]: pixel 4 g + u, channels 4j.. */
        for (int j = 0; j < 4; j++) {
            r[8 * h + j] = _mm512_unpacklo_epi16(a[8 * h + 2 * j], a[8 * h + 2 * j + 1]);
            r[8 * h + 4 + j] = _mm512_unpackhi_epi16(a[8 * h + 2 * j], a[8 * h + 2 * j + 1]);
        }
    for (int g = 0; g < 4; g++) /* 64-bit unit v of a[4 g + 2 k + h]: pixel 4 g + 2 h + v,
                                   channels 8 k .. 8 k + 7 */
        for (int k = 0; k < 2; k++) {
            a[4 * g + 2 * k] = _mm512_unpacklo_epi32(r[4 * g + 2 * k], r[4 * g + 2 * k + 1]);
            a[4 * g + 2 * k + 1] = _mm512_unpackhi_epi32(r[4 * g + 2 * k], r[4 * g + 2 * k + 1]);
        }
    __mmask16 keep = (__mmask16)((1u << bytes) - 1);
    for (int g = 0; g < 4; g++)
        for (int h = 0; h < 2; h++)
            for (int v = 0; v < 2; v++) { /* pixel 16 L + 4 g + 2 h + v, channels 0 .. 15 */
                __m512i e = v ? _mm512_unpackhi_epi64(a[4 * g + h], a[4 * g + 2 + h])
                              : _mm512_unpacklo_epi64(a[4 * g + h], a[4 * g + 2 + h]);
                __m128i l[4] = {_mm512_castsi512_si128(e), _mm512_extracti32x4_epi32(e, 1),
                                _mm512_extracti32x4_epi32(e, 2), _mm512_extracti32x4_epi32(e, 3)};
                for (int L = 0; L < 4; L++) {
                    int64_t p = 16 * L + 4 * g + 2 * h + v;
                    if (p < n) _mm_mask_storeu_epi8(d + p * cs, keep, l[L]);
                }
            }
}

/* Channels c0 .. c0 + k - 1 of an image's planes from xi (hw bytes apart); channels past C
 * repeat the last one (their weights are 0). */
static void qc8_rows(const struct qc8_job *j, const uint8_t *xi, int64_t hw, int64_t c0, int k,
                     const uint8_t **s) {
    for (int i = 0; i < k; i++) s[i] = xi + (c0 + i < j->g->C ? c0 + i : j->g->C - 1) * hw;
}

/* Pixels i * step (i < n) of the four rows s as 4-byte groups cs bytes apart from d. */
static void qc8_put4(const uint8_t *const *s, int64_t n, int64_t step, uint8_t *d, int64_t cs) {
    for (int64_t i = 0; i < n; i++) {
        int64_t p = i * step;
        uint32_t v = (uint32_t)s[0][p] | (uint32_t)s[1][p] << 8 | (uint32_t)s[2][p] << 16 |
                     (uint32_t)s[3][p] << 24;
        memcpy(d + i * cs, &v, 4);
    }
}

/* Pixels [64u, 64u + 64) of an image, channels last, 16 channels at a time. */
static void qc8_nhwc(void *arg, int64_t u0, int64_t u1, int tid) {
    (void)tid;
    const struct qc8_job *j = arg;
    const struct ox_qconv8_geom *g = j->g;
    int64_t hw = g->H * g->W, blocks = (hw + 63) / 64;
    for (int64_t u = u0; u < u1; u++) {
        int64_t img = u / blocks, p0 = u % blocks * 64, p1 = p0 + 64 < hw ? p0 + 64 : hw;
        uint8_t *d = j->xn + (img * hw + p0) * j->cs;
        for (int64_t c0 = 0; c0 < j->cs; c0 += 16) {
            const uint8_t *s[16];
            qc8_rows(j, j->x + img * g->C * hw + p0, hw, c0, 16, s);
            qc8_nhwc64(s, p1 - p0, d + c0, j->cs, j->cs - c0 < 16 ? (int)(j->cs - c0) : 16);
        }
    }
}

/* The same for a pointwise convolution of stride > 1 without padding: only the pixels it
 * reads, output row u of an image at a time (xn then holds an OH x OW image). */
static void qc8_nhwc_strided(void *arg, int64_t u0, int64_t u1, int tid) {
    (void)tid;
    const struct qc8_job *j = arg;
    const struct ox_qconv8_geom *g = j->g;
    int64_t hw = g->H * g->W;
    for (int64_t u = u0; u < u1; u++) {
        int64_t img = u / g->OH, oh = u % g->OH;
        uint8_t *d = j->xn + (img * g->OH + oh) * g->OW * j->cs;
        for (int64_t c4 = 0; c4 < j->cs; c4 += 4) {
            const uint8_t *s[4];
            qc8_rows(j, j->x + img * g->C * hw + oh * g->SH * g->W, hw, c4, 4, s);
            qc8_put4(s, g->OW, g->SW, d + c4, j->cs);
        }
    }
}

/* The folded input of a layer for which fold_cols holds: input row u of an image (u = image
 * x H + row). The row goes first into 8-byte pixels (channels last, the zero point for the
 * padding on either side), then each output column's KW groups of C bytes are one byte
 * permute (VBMI) of the 64 bytes from its first tap's pixel on. */
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) static void
qc8_fold_rows(void *arg, int64_t u0, int64_t u1, int tid) {
    (void)tid;
    const struct qc8_job *j = arg;
    const struct ox_qconv8_geom *g = j->g0;
    const int64_t hw = g->H * g->W, C = g->C, np = fold_pixels(g);
    uint8_t px[QC_FOLD_BYTES + 64];
    uint8_t idx[64];
    for (int k = 0; k < 64; k++) /* byte kx C + c of a folded pixel: pixel kx DW's byte c */
        idx[k] = k < g->KW * C ? (uint8_t)((k / C) * g->DW * 8 + k % C) : 0;
    __m512i perm = _mm512_loadu_si512(idx);
    __mmask64 keep = ((__mmask64)1 << (g->KW * C)) - 1;
    __mmask64 row = j->cs >= 64 ? ~(__mmask64)0 : ((__mmask64)1 << j->cs) - 1;
    for (int64_t u = u0; u < u1; u++) {
        int64_t img = u / g->H, ih = u % g->H;
        const uint8_t *xr = j->x + img * C * hw + ih * g->W;
        memset(px, j->xzp, (size_t)(np * 8 + 64));
        for (int64_t w = 0; w < g->W && w + g->PL < np; w++)
            for (int64_t c = 0; c < C; c++) px[(w + g->PL) * 8 + c] = xr[c * hw + w];
        uint8_t *d = j->xn + u * g->OW * j->cs;
        for (int64_t ow = 0; ow < g->OW; ow++) {
            __m512i v = _mm512_loadu_si512(px + ow * g->SW * 8);
            _mm512_mask_storeu_epi8(d + ow * j->cs, row,
                                    _mm512_maskz_permutexvar_epi8(keep, perm, v));
        }
    }
}

/* 16 sums plus their channels' offsets, requantized (vecmath.h) to 16 bytes. */
__attribute__((target("avx512f"))) static inline __m128i qc8_quant16(__m512i s, __m512i off,
                                                                     __m512d m_lo, __m512d m_hi,
                                                                     __m512d zp, __m512d lo,
                                                                     __m512d hi) {
    return _mm512_cvtepi32_epi8(requant16(_mm512_add_epi32(s, off), m_lo, m_hi, zp, lo, hi));
}

/* tile[r][k]: pixel r, channel k. Channel k's nr pixels go to y + k * plane. */
__attribute__((target("avx2"))) static void qc8_store(const uint8_t *tile, int nr, int nc,
                                                      uint8_t *y, int64_t plane) {
    if (nr < QC_MR) {
        for (int k = 0; k < nc; k++)
            for (int r = 0; r < nr; r++) y[k * plane + r] = tile[r * QC_NR + k];
        return;
    }
    __m256i r[8], t[8], u[8], x;
    for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_si256((const __m256i *)(tile + i * QC_NR));
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_epi8(r[i], r[i + 1]);     /* channels 0-7 | 16-23 */
        t[i + 1] = _mm256_unpackhi_epi8(r[i], r[i + 1]); /* channels 8-15 | 24-31 */
    }
    for (int h = 0; h < 2; h++) /* rows 4h .. 4h + 3 */
        for (int i = 0; i < 2; i++) {
            u[4 * h + 2 * i] = _mm256_unpacklo_epi16(t[4 * h + i], t[4 * h + i + 2]);
            u[4 * h + 2 * i + 1] = _mm256_unpackhi_epi16(t[4 * h + i], t[4 * h + i + 2]);
        }
    /* u[q] (rows 0-3) and u[4 + q] (rows 4-7) hold channels 4q .. 4q + 3 | 16 + the same */
    for (int q = 0; q < 4; q++)
        for (int hi = 0; hi < 2; hi++) {
            x = hi ? _mm256_unpackhi_epi32(u[q], u[4 + q]) : _mm256_unpacklo_epi32(u[q], u[4 + q]);
            int k0 = 4 * q + 2 * hi; /* x: channels k0, k0 + 1, 16 + k0, 17 + k0 */
            int64_t v[4];
            _mm256_storeu_si256((__m256i *)v, x);
            int ks[4] = {k0, k0 + 1, 16 + k0, 17 + k0};
            for (int i = 0; i < 4; i++)
                if (ks[i] < nc) memcpy(y + ks[i] * plane, &v[i], 8);
        }
}

#define QC_DECL(r) __m512i s##r##0 = _mm512_setzero_si512(), s##r##1 = _mm512_setzero_si512();
#define QC_STEP(r)                                                                                 \
    {                                                                                              \
        int32_t w4;                                                                                \
        memcpy(&w4, p##r + c, 4);                                                                  \
        __m512i v = _mm512_set1_epi32(w4);                                                         \
        s##r##0 = _mm512_dpbusd_epi32(s##r##0, v, b0);                                             \
        s##r##1 = _mm512_dpbusd_epi32(s##r##1, v, b1);                                             \
    }
#define QC_QUANT(r)                                                                                \
    _mm_storeu_si128((__m128i *)(tile + r * QC_NR),                                                \
                     qc8_quant16(s##r##0, off0, mv0, mv1, zp, lo, hi));                            \
    _mm_storeu_si128((__m128i *)(tile + r * QC_NR + 16),                                           \
                     qc8_quant16(s##r##1, off1, mv2, mv3, zp, lo, hi));

/* One tile: pixels ind[t * 8 + r] (tap t, pixel r), channels [m0, m0 + nc) of block bp;
 * the bytes to y (channel m0's first pixel; channels `plane` apart). */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2"))) static void
qc8_tile(const struct qc8_job *j, const uint8_t *const *ind, const int8_t *bp, int64_t m0, int nr,
         int nc, uint8_t *y, int64_t plane) {
    QC_DECL(0) QC_DECL(1) QC_DECL(2) QC_DECL(3);
    QC_DECL(4) QC_DECL(5) QC_DECL(6) QC_DECL(7);
    const int64_t cs = j->cs;
    for (int64_t t = 0; t < j->taps; t++, ind += QC_MR, bp += cs * QC_NR) {
        const uint8_t *p0 = ind[0], *p1 = ind[1], *p2 = ind[2], *p3 = ind[3];
        const uint8_t *p4 = ind[4], *p5 = ind[5], *p6 = ind[6], *p7 = ind[7];
        for (int64_t c = 0; c < cs; c += 4) {
            __m512i b0 = _mm512_loadu_si512(bp + c * QC_NR);
            __m512i b1 = _mm512_loadu_si512(bp + c * QC_NR + 64);
            QC_STEP(0) QC_STEP(1) QC_STEP(2) QC_STEP(3);
            QC_STEP(4) QC_STEP(5) QC_STEP(6) QC_STEP(7);
        }
    }
    /* per channel: bias - zero point x sum of weights, and the multiplier */
    const struct ox_qconv8_out *o = j->o;
    __mmask16 k0 = nc >= 16 ? 0xFFFF : (__mmask16)((1u << nc) - 1);
    __mmask16 k1 = nc <= 16 ? 0 : nc >= 32 ? 0xFFFF : (__mmask16)((1u << (nc - 16)) - 1);
    __m512i zx = _mm512_set1_epi32(j->xzp);
    __m512i off0 = _mm512_mullo_epi32(zx, _mm512_maskz_loadu_epi32(k0, j->sum + m0));
    __m512i off1 = _mm512_mullo_epi32(zx, _mm512_maskz_loadu_epi32(k1, j->sum + m0 + 16));
    off0 = _mm512_sub_epi32(
        o->bias ? _mm512_maskz_loadu_epi32(k0, o->bias + m0) : _mm512_setzero_si512(), off0);
    off1 = _mm512_sub_epi32(
        o->bias ? _mm512_maskz_loadu_epi32(k1, o->bias + m0 + 16) : _mm512_setzero_si512(), off1);
    __m512d mv0 = _mm512_maskz_loadu_pd((__mmask8)k0, o->mult + m0);
    __m512d mv1 = _mm512_maskz_loadu_pd((__mmask8)(k0 >> 8), o->mult + m0 + 8);
    __m512d mv2 = _mm512_maskz_loadu_pd((__mmask8)k1, o->mult + m0 + 16);
    __m512d mv3 = _mm512_maskz_loadu_pd((__mmask8)(k1 >> 8), o->mult + m0 + 24);
    __m512d zp = _mm512_set1_pd(o->zp), lo = _mm512_set1_pd(o->lo), hi = _mm512_set1_pd(o->hi);
    uint8_t tile[QC_MR * QC_NR];
    QC_QUANT(0) QC_QUANT(1) QC_QUANT(2) QC_QUANT(3);
    QC_QUANT(4) QC_QUANT(5) QC_QUANT(6) QC_QUANT(7);
    qc8_store(tile, nr, nc, y, plane);
}

/* Units: (group of channel blocks, image, output row), the group slowest so that a thread's
 * run of units reuses one group's weights. */
static void qc8_units(void *arg, int64_t u0, int64_t u1, int tid) {
    (void)tid;
    const struct qc8_job *j = arg;
    const struct ox_qconv8_geom *g = j->g;
    const uint8_t *ind[QC_MAX_T * QC_MR];
    int64_t plane = g->OH * g->OW;
    for (int64_t u = u0; u < u1; u++) {
        int64_t grp = u / (g->N * g->OH), img = u / g->OH % g->N, oh = u % g->OH;
        int64_t b0 = grp * j->per, b1 = b0 + j->per < j->nb ? b0 + j->per : j->nb;
        const uint8_t *xi = j->xn + img * g->H * g->W * j->cs;
        for (int64_t ow0 = 0; ow0 < g->OW; ow0 += QC_MR) {
            int nr = g->OW - ow0 < QC_MR ? (int)(g->OW - ow0) : QC_MR;
            const uint8_t **p = ind;
            for (int64_t ky = 0; ky < g->KH; ky++) {
                int64_t ih = oh * g->SH - g->PT + ky * g->DH;
                bool in_rows = ih >= 0 && ih < g->H;
                const uint8_t *row = in_rows ? xi + ih * g->W * j->cs : NULL;
                for (int64_t kx = 0; kx < g->KW; kx++, p += QC_MR)
                    for (int r = 0; r < QC_MR; r++) {
                        int64_t iw = (ow0 + r) * g->SW - g->PL + kx * g->DW;
                        p[r] = in_rows && r < nr && iw >= 0 && iw < g->W ? row + iw * j->cs : j->zp;
                    }
            }
            for (int64_t b = b0; b < b1; b++) {
                int64_t m0 = b * QC_NR;
                int nc = g->M - m0 < QC_NR ? (int)(g->M - m0) : QC_NR;
                uint8_t *y = j->y + ((img * g->M + m0) * g->OH + oh) * g->OW + ow0;
                qc8_tile(j, ind, j->wp + b * j->taps * j->cs * QC_NR, m0, nr, nc, y, plane);
            }
        }
    }
}
#endif

void ox_qconv8_run(struct ox_pool *pool, const struct ox_qconv8_geom *g, const uint8_t *x,
                   uint8_t xzp, const void *packed, const struct ox_qconv8_out *o, void *y,
                   void *scratch) {
#if defined(__x86_64__) && defined(__GNUC__)
    struct ox_qconv8_geom sub = run_geom(g);
    struct qc8_job j = {
        .g = &sub, .g0 = g, .x = x, .xn = scratch, .wp = packed, .o = o, .xzp = xzp, .y = y};
    j.cs = row_bytes(&sub), j.taps = sub.KH * sub.KW, j.nb = (sub.M + QC_NR - 1) / QC_NR;
    j.sum =
        (const int32_t *)((const char *)packed + (size_t)j.nb * (size_t)(j.taps * j.cs) * QC_NR);
    uint8_t *zp = (uint8_t *)scratch + ox_align64((size_t)(sub.N * sub.H * sub.W * j.cs));
    memset(zp, xzp, (size_t)j.cs);
    j.zp = zp;
    if (fold_cols(g)) {
        ox_parallel_for(pool, g->N * g->H, qc8_fold_rows, &j);
        g = &sub;
    } else if (g->KH == 1 && g->KW == 1 && g->PT == 0 && g->PL == 0 && (g->SH > 1 || g->SW > 1)) {
        /* a pointwise convolution of stride > 1 reads every SH-th row and SW-th column: those
         * pixels, channels last, are an OH x OW image for the same convolution at stride 1 */
        ox_parallel_for(pool, g->N * g->OH, qc8_nhwc_strided, &j);
        sub.H = g->OH, sub.W = g->OW, sub.SH = sub.SW = 1;
        g = &sub;
    } else {
        ox_parallel_for(pool, g->N * ((g->H * g->W + 63) / 64), qc8_nhwc, &j);
    }
    /* enough units for the threads: the channel blocks split into groups when rows are few */
    int64_t want = 8 * (int64_t)(ox_pool_size(pool) > 0 ? ox_pool_size(pool) : 1);
    int64_t rows = g->N * g->OH, groups = rows >= want ? 1 : (want + rows - 1) / rows;
    if (groups > j.nb) groups = j.nb;
    j.per = (j.nb + groups - 1) / groups;
    j.groups = (j.nb + j.per - 1) / j.per;
    ox_parallel_for(pool, j.groups * rows, qc8_units, &j);
#else
    (void)pool, (void)g, (void)x, (void)xzp, (void)packed, (void)o, (void)y, (void)scratch;
#endif
}
