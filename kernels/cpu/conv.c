/* Convolution and pooling over 1-3 spatial dims (NC + spatial layout).
 *
 * Conv: for each image and group, the input patches are laid out as columns (im2col, in
 * scratch) and multiplied by the group's filters with OpenBLAS sgemm; 1x1 stride-1 unpadded
 * convolutions use the input directly, and depthwise convolutions (one input and one output
 * channel per group) run a direct loop. On CPUs with AVX-512 the float path is the packed
 * GEMM of sgemm.c instead, and 3x3 stride-1 convolutions run in the Winograd form
 * (kernels/cpu/winograd.c) where conv_wino says so. Pooling (Max/Average/Lp, global or windowed)
 * walks windows directly. Geometry (pads, auto_pad, dilations, ceil_mode) is shared.
 */
#include "kernels/op.h"
#include "kernels/cpu/winograd.h"

#include <cblas.h>
#include <float.h>

#define MAX_SP 3 /* spatial dims supported */

struct geom {
    int nsp;             /* spatial dims */
    int64_t in[MAX_SP];  /* input extent */
    int64_t k[MAX_SP];   /* kernel extent */
    int64_t s[MAX_SP];   /* stride */
    int64_t d[MAX_SP];   /* dilation */
    int64_t pb[MAX_SP];  /* pad at the beginning */
    int64_t pe[MAX_SP];  /* pad at the end */
    int64_t out[MAX_SP]; /* output extent */
    int64_t in_size, out_size, k_size;
};

/* Fill the geometry from the node's attributes. `k` comes from the weights (Conv) or the
 * kernel_shape attribute (pooling); `ceil_mode` applies to pooling only. */
static ox_status geometry(const struct ox_node *n, const ox_tensor *x, const int64_t *kernel,
                          int nk, bool pooling, struct geom *g) {
    if (x->rank < 3 || x->rank - 2 > MAX_SP)
        return ox_node_err(n, OX_E_UNSUPPORTED, "input rank %d: expected 3 to %d (N, C, spatial)",
                           x->rank, MAX_SP + 2);
    g->nsp = x->rank - 2;
    if (nk != g->nsp)
        return ox_node_err(n, OX_E_SHAPE, "kernel has %d spatial dims, the input %d", nk, g->nsp);
    const int64_t *a;
    int na;
    g->in_size = g->out_size = g->k_size = 1;
    for (int i = 0; i < g->nsp; i++) {
        g->in[i] = x->dims[i + 2];
        g->k[i] = kernel[i];
        g->s[i] = g->d[i] = 1;
        g->pb[i] = g->pe[i] = 0;
        if (g->k[i] <= 0)
            return ox_node_err(n, OX_E_INVALID, "kernel extent %lld", (long long)g->k[i]);
    }
    if ((na = ox_attr_ints(n, "strides", &a)) >= 0) {
        if (na != g->nsp)
            return ox_node_err(n, OX_E_INVALID, "strides has %d values, expected %d", na, g->nsp);
        for (int i = 0; i < na; i++) g->s[i] = a[i];
    }
    if ((na = ox_attr_ints(n, "dilations", &a)) >= 0) {
        if (na != g->nsp)
            return ox_node_err(n, OX_E_INVALID, "dilations has %d values, expected %d", na, g->nsp);
        for (int i = 0; i < na; i++) g->d[i] = a[i];
    }
    for (int i = 0; i < g->nsp; i++)
        if (g->s[i] <= 0 || g->d[i] <= 0)
            return ox_node_err(n, OX_E_INVALID, "strides and dilations must be positive");
    const char *ap = ox_attr_str(n, "auto_pad", "NOTSET");
    bool ceil_mode = pooling && ox_attr_int(n, "ceil_mode", 0);
    if (strcmp(ap, "NOTSET") == 0) {
        if ((na = ox_attr_ints(n, "pads", &a)) >= 0) {
            if (na != 2 * g->nsp)
                return ox_node_err(n, OX_E_INVALID, "pads has %d values, expected %d", na,
                                   2 * g->nsp);
            for (int i = 0; i < g->nsp; i++) {
                g->pb[i] = a[i];
                g->pe[i] = a[i + g->nsp];
                if (g->pb[i] < 0 || g->pe[i] < 0)
                    return ox_node_err(n, OX_E_INVALID, "negative pads");
            }
        }
        for (int i = 0; i < g->nsp; i++) {
            int64_t ext = (g->k[i] - 1) * g->d[i] + 1, span = g->in[i] + g->pb[i] + g->pe[i] - ext;
            if (span < 0)
                return ox_node_err(n, OX_E_SHAPE,
                                   "kernel extent %lld is larger than the padded input %lld",
                                   (long long)ext, (long long)(g->in[i] + g->pb[i] + g->pe[i]));
            g->out[i] = (ceil_mode ? (span + g->s[i] - 1) / g->s[i] : span / g->s[i]) + 1;
            /* a last window that starts in the end padding is dropped */
            if (ceil_mode && (g->out[i] - 1) * g->s[i] >= g->in[i] + g->pb[i]) g->out[i]--;
        }
    } else if (strcmp(ap, "VALID") == 0) {
        for (int i = 0; i < g->nsp; i++) {
            int64_t ext = (g->k[i] - 1) * g->d[i] + 1, span = g->in[i] - ext;
            if (span < 0) return ox_node_err(n, OX_E_SHAPE, "kernel larger than the input");
            g->out[i] = (ceil_mode ? (span + g->s[i] - 1) / g->s[i] : span / g->s[i]) + 1;
        }
    } else if (strcmp(ap, "SAME_UPPER") == 0 || strcmp(ap, "SAME_LOWER") == 0) {
        for (int i = 0; i < g->nsp; i++) {
            int64_t ext = (g->k[i] - 1) * g->d[i] + 1;
            g->out[i] = (g->in[i] + g->s[i] - 1) / g->s[i];
            int64_t total = (g->out[i] - 1) * g->s[i] + ext - g->in[i];
            if (total < 0) total = 0;
            g->pb[i] = ap[5] == 'U' ? total / 2 : total - total / 2;
            g->pe[i] = total - g->pb[i];
        }
    } else {
        return ox_node_err(n, OX_E_INVALID,
                           "auto_pad '%s': expected NOTSET, VALID, SAME_UPPER or SAME_LOWER", ap);
    }
    for (int i = 0; i < g->nsp; i++) {
        g->in_size *= g->in[i];
        g->out_size *= g->out[i];
        g->k_size *= g->k[i];
    }
    return OX_OK;
}

/* ---- Conv ------------------------------------------------------------------------------ */

static ox_status conv_setup(const struct ox_node *n, const ox_tensor *x, const ox_tensor *w,
                            struct geom *g, int64_t *group) {
    char sx[256], sw[256];
    if (w->rank != x->rank)
        return ox_node_err(n, OX_E_SHAPE, "input %s and weights %s differ in rank",
                           ox_tensor_desc(x, sx, sizeof sx), ox_tensor_desc(w, sw, sizeof sw));
    int64_t kernel[MAX_SP];
    const int64_t *ks;
    int nks = ox_attr_ints(n, "kernel_shape", &ks);
    for (int i = 0; i < w->rank - 2 && i < MAX_SP; i++) kernel[i] = w->dims[i + 2];
    if (nks >= 0) {
        if (nks != w->rank - 2)
            return ox_node_err(n, OX_E_INVALID, "kernel_shape has %d values", nks);
        for (int i = 0; i < nks; i++)
            if (ks[i] != kernel[i])
                return ox_node_err(n, OX_E_SHAPE, "kernel_shape disagrees with weights %s",
                                   ox_tensor_desc(w, sw, sizeof sw));
    }
    ox_status st = geometry(n, x, kernel, w->rank - 2, false, g);
    if (st) return st;
    *group = ox_attr_int(n, "group", 1);
    int64_t C = x->dims[1], M = w->dims[0];
    if (*group <= 0 || C % *group || M % *group || w->dims[1] * *group != C)
        return ox_node_err(n, OX_E_SHAPE, "input %s, weights %s and group %lld do not agree",
                           ox_tensor_desc(x, sx, sizeof sx), ox_tensor_desc(w, sw, sizeof sw),
                           (long long)*group);
    return OX_OK;
}

static bool conv_is_pointwise(const struct geom *g) {
    for (int i = 0; i < g->nsp; i++)
        if (g->k[i] != 1 || g->s[i] != 1 || g->pb[i] || g->pe[i]) return false;
    return true;
}

/* Whether tap k of spatial dim i reads only padding, for every output position. */
static bool tap_dead(const struct geom *g, int i, int64_t k) {
    int64_t first = k * g->d[i] - g->pb[i], last = first + (g->out[i] - 1) * g->s[i];
    return last < 0 || first >= g->in[i];
}

/* A convolution whose taps at the ends of a kernel dim read only padding for every output
 * (DeepLab's atrous convolutions at dilation 24 or 36 on a 14x14 or 28x28 map, a 3x3 on a
 * 1x1 map) computes the same as one with those taps dropped: kernel k' = the live taps,
 * pads reduced by the dropped taps' reach, the same output. Fills t and the first live tap
 * of each dim; false when nothing is dropped (or all would be, or a pad would go negative). */
static bool conv_trim(const struct geom *g, struct geom *t, int64_t *klo) {
    *t = *g;
    bool any = false;
    t->k_size = 1;
    for (int i = 0; i < g->nsp; i++) {
        int64_t lo = 0, hi = g->k[i];
        if (hi >= 1024) return false; /* conv_weights_key spells the taps in 10 bits */
        while (lo < hi && tap_dead(g, i, lo)) lo++;
        while (hi > lo && tap_dead(g, i, hi - 1)) hi--;
        if (lo == hi) return false; /* every window in the padding: the output is the bias */
        any |= lo > 0 || hi < g->k[i];
        klo[i] = lo;
        t->k[i] = hi - lo;
        t->pb[i] = g->pb[i] - lo * g->d[i];
        t->pe[i] = g->pe[i] - (g->k[i] - hi) * g->d[i];
        if (t->pb[i] < 0 || t->pe[i] < 0) return false;
        t->k_size *= t->k[i];
    }
    return any;
}

/* Whether a float convolution goes through the packed GEMM (not depthwise ones). */
static bool conv_is_fast(int64_t cg, int64_t mg) {
    return ox_sgemm_is_fast() && !(cg == 1 && mg == 1);
}

/* Whether a float convolution runs in the Winograd form (kernels/cpu/winograd.c): 2-D,
 * 3x3, stride 1, no dilation, one group, and where ox_wino_applies says it pays; never in a
 * precise plan (its transforms round more than the direct sums). */
static bool conv_wino(bool precise, const struct geom *g, int64_t N, int64_t C, int64_t M,
                      int64_t group, struct ox_wino *w) {
    if (precise) return false;
    if (g->nsp != 2 || group != 1 || !conv_is_fast(C, M)) return false;
    for (int i = 0; i < 2; i++)
        if (g->k[i] != 3 || g->s[i] != 1 || g->d[i] != 1) return false;
    *w = (struct ox_wino){.N = N,
                          .C = C,
                          .H = g->in[0],
                          .W = g->in[1],
                          .M = M,
                          .OH = g->out[0],
                          .OW = g->out[1],
                          .pt = g->pb[0],
                          .pl = g->pb[1]};
    return ox_wino_applies(w);
}

/* Scratch floats per thread for a float convolution (OpenBLAS path). */
static int64_t conv_slot(const struct geom *g, int64_t cg, int64_t mg) {
    if (conv_is_pointwise(g) || (cg == 1 && mg == 1)) return 0;
    /* whole rows of 64 bytes per thread, so that threads never share a cache line */
    return (cg * g->k_size * g->out_size + 15) / 16 * 16;
}

static int64_t dw_padded_floats(const struct geom *g);
static int64_t dw_tiled_floats(const struct geom *g);
static bool dw_s2_rows_fits(const struct geom *g);
#if defined(__x86_64__) && defined(__GNUC__)
static bool conv_stem_fits(const struct geom *g, int64_t C, int64_t M, int64_t group);
static int64_t stem_weight_floats(const struct geom *g, int64_t C, int64_t M);
#endif
/* Whether a float convolution runs as a stem (conv_stem_fits, few input channels). */
static bool conv_stem(const struct geom *g, int64_t C, int64_t M, int64_t group) {
#if defined(__x86_64__) && defined(__GNUC__)
    return conv_stem_fits(g, C, M, group);
#else
    (void)g, (void)C, (void)M, (void)group;
    return false;
#endif
}
static int64_t maxpool_tiled_floats(const struct geom *g);
static bool maxpool8_fits(const struct geom *g);
static int64_t maxpool8_row_bytes(const struct geom *g);
static int64_t taps_inside(int64_t start, int64_t k, int64_t d, int64_t n, int64_t *lo);

/* A 2-D float convolution is computed in place over a zero-padded copy of one (image,
 * group) input, split by stride into phases: phase (ph, pw) of channel c is the Hq x Wq
 * image P[r][q] = padded[r * SH + ph][q * SW + pw] (Hq, Wq: the padded extents over the
 * strides, rounded up). Output position (oh, ow) is the "wide" column oh * Wq + ow, and the
 * patch row of (channel c, tap kh, kw) is the run of phase (kh DH % SH, kw DW % SW) that
 * starts at row kh DH / SH, column kw DW / SW: contiguous, so the GEMM reads B where it lies
 * (ox_gemm_b.offs) instead of packing patches. Each wide output row has Wq - OW columns of
 * no use, dropped when the block is stored into y. */
struct direct_geom {
    int64_t hp, wp, hq, wq, phase; /* padded extents, phase extents, floats per phase */
};

static struct direct_geom direct_geom(const struct geom *g) {
    struct direct_geom d;
    d.hp = g->in[0] + g->pb[0] + g->pe[0];
    d.wp = g->in[1] + g->pb[1] + g->pe[1];
    d.hq = (d.hp + g->s[0] - 1) / g->s[0];
    d.wq = (d.wp + g->s[1] - 1) / g->s[1];
    d.phase = d.hq * d.wq;
    return d;
}

static int64_t round_nr(int64_t n) {
    return (n + OX_GEMM_NR - 1) / OX_GEMM_NR * OX_GEMM_NR;
}

/* Whether the direct form pays: what it adds (copying the input into phases, storing the
 * wide output into y, the wide columns' extra multiply-adds) against what packing the
 * patches costs, in rough units of one packed element (an FMA lane: 1/8; a gathered element
 * when strided: 2). 1x1 kernels and small K lose; 3x3 and larger layers with many input
 * channels win, most of all late narrow ones (resnet18: 0.70-0.86x per 3x3 layer). */
static bool conv_direct(const struct geom *g, int64_t cg, int64_t mg) {
    if (g->nsp != 2 || g->k[0] * g->k[1] == 1) return false;
    struct direct_geom d = direct_geom(g);
    int64_t SH = g->s[0], SW = g->s[1], N = g->out_size, K = cg * g->k_size;
    bool strided = SH > 1 || SW > 1;
    /* row offsets and wide columns are 32-bit */
    if (cg * SH * SW * d.phase >= INT32_MAX / 4 || g->out[0] * d.wq >= INT32_MAX / 4) return false;
    double packed = (double)K * (double)N * (strided ? 2.0 : 1.0);
    double direct = (double)(cg * SH * SW * d.phase) * (strided ? 2.0 : 0.5) +
                    (double)(mg * g->out[0] * d.wq) * 0.5 +
                    (double)mg * (double)K * (double)(round_nr(g->out[0] * d.wq) - round_nr(N)) / 8;
    return direct < packed;
}

/* Scratch floats of one direct unit: the phases (with a block's width of readable zeros
 * after them), the wide output, the row offsets; each 64-byte aligned. */
static int64_t direct_phases_floats(const struct geom *g, int64_t cg) {
    struct direct_geom d = direct_geom(g);
    return (cg * g->s[0] * g->s[1] * d.phase + OX_GEMM_NR + (g->k[1] - 1) * g->d[1] + 15) / 16 * 16;
}

static int64_t direct_wide_floats(const struct geom *g, int64_t mg) {
    return (mg * g->out[0] * direct_geom(g).wq + 15) / 16 * 16;
}

static int64_t direct_slot(const struct geom *g, int64_t cg, int64_t mg) {
    if (!conv_direct(g, cg, mg)) return 0;
    return direct_phases_floats(g, cg) + direct_wide_floats(g, mg) +
           (cg * g->k_size + 15) / 16 * 16;
}

/* Scratch floats per thread of a float depthwise convolution: one channel in the padded
 * layout of depthwise2d_padded where that path applies, else 0. */
static int64_t dw_slot(const struct geom *g) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (dw_s2_rows_fits(g)) return 0;
    int64_t tiled = dw_tiled_floats(g);
    return tiled ? tiled : dw_padded_floats(g);
#else
    (void)g;
    return 0;
#endif
}

ox_status ox_nn_infer_conv(struct ox_infer_ctx *ctx, const struct ox_node *n,
                           const ox_tensor *const *in, ox_tensor *const *out) {
    const ox_tensor *x = ox_in(n, in, 0), *w = ox_in(n, in, 1), *b = ox_in(n, in, 2);
    if (!x || !w) return ox_node_err(n, OX_E_INVALID, "expected inputs X and W");
    if (x->dtype != w->dtype ||
        (x->dtype != OX_FLOAT && x->dtype != OX_DOUBLE && x->dtype != OX_FLOAT16))
        return ox_node_err(n, OX_E_UNSUPPORTED,
                           "element types %s and %s: supported are float, "
                           "double and float16, the same for X and W",
                           ox_dtype_name(x->dtype), ox_dtype_name(w->dtype));
    struct geom g;
    int64_t group;
    ox_status st = conv_setup(n, x, w, &g, &group);
    if (st) return st;
    if (b && (b->rank != 1 || b->dims[0] != w->dims[0] || b->dtype != x->dtype))
        return ox_node_err(n, OX_E_SHAPE, "bias must be [%lld] of %s", (long long)w->dims[0],
                           ox_dtype_name(x->dtype));
    int64_t dims[OX_MAX_RANK] = {x->dims[0], w->dims[0]};
    for (int i = 0; i < g.nsp; i++) dims[i + 2] = g.out[i];
    ox_set_shape(out[0], x->dtype, x->rank, dims);
    /* scratch: one group's columns (float or double), plus float copies of float16 data */
    int64_t cg = x->dims[1] / group, mg = w->dims[0] / group;
    size_t cols = 0, conv16 = 0;
    struct ox_wino wg;
    struct geom gt;
    int64_t klo[MAX_SP];
    if (x->dtype == OX_FLOAT && conv_is_fast(cg, mg) && (ctx->const_inputs & 2) &&
        conv_trim(&g, &gt, klo)) { /* conv_exec's trimmed path: the slice, then as below */
        ctx->prepared_bytes = (size_t)(group * ox_sgemm_packed_a_floats(mg, cg * gt.k_size)) * 4;
        cols = (size_t)((w->dims[0] * cg * gt.k_size + 15) / 16 * 16) * 4 +
               (size_t)direct_slot(&gt, cg, mg) * 4 *
                   (size_t)(ctx->n_threads > 1 ? ctx->n_threads : 1);
    } else if (x->dtype == OX_DOUBLE) {
        if (!conv_is_pointwise(&g) && !(cg == 1 && mg == 1))
            cols = (size_t)(cg * g.k_size * g.out_size) * 8;
#if defined(__x86_64__) && defined(__GNUC__)
    } else if (x->dtype == OX_FLOAT && conv_stem(&g, x->dims[1], w->dims[0], group)) {
        cols = (size_t)stem_weight_floats(&g, x->dims[1], w->dims[0]) * 4;
#endif
    } else if (x->dtype == OX_FLOAT &&
               conv_wino(ctx->precise, &g, x->dims[0], x->dims[1], w->dims[0], group, &wg)) {
        size_t packed = (size_t)ox_wino_weight_floats(wg.C, wg.M) * 4;
        if (ctx->const_inputs & 2)
            ctx->prepared_bytes = packed;
        else
            cols = packed;
        cols += (size_t)ox_wino_scratch_floats(&wg, ctx->n_threads) * 4;
    } else if (x->dtype == OX_FLOAT && conv_is_fast(cg, mg)) {
        size_t packed = (size_t)(group * ox_sgemm_packed_a_floats(mg, cg * g.k_size)) * 4;
        if (ctx->const_inputs & 2)
            ctx->prepared_bytes = packed;
        else
            cols = packed;
        cols +=
            (size_t)direct_slot(&g, cg, mg) * 4 * (size_t)(ctx->n_threads > 1 ? ctx->n_threads : 1);
    } else if (x->dtype == OX_FLOAT && cg == 1 && mg == 1) {
        cols = (size_t)dw_slot(&g) * 4 * (size_t)(ctx->n_threads > 1 ? ctx->n_threads : 1);
    } else {
        cols =
            (size_t)conv_slot(&g, cg, mg) * 4 * (size_t)(ctx->n_threads > 1 ? ctx->n_threads : 1);
    }
    if (x->dtype == OX_FLOAT16)
        conv16 = (size_t)(ox_tensor_numel(x) + ox_tensor_numel(w) + ox_tensor_numel(out[0]) +
                          w->dims[0]) *
                 4;
    ctx->scratch_bytes = cols + conv16;
    return OX_OK;
}

/* Rows [r0, r1) and columns [p0, p1) of one group's patch matrix (rows: input channel and
 * kernel offset; columns: output positions), stored with row stride ld. The output positions
 * go by rows along the last spatial dim (the leading dims numbered together): per row, the
 * input row its tap reads (or none, in the padding of a leading dim) and the columns whose
 * tap lies inside it, copied as one run at stride 1. */
#define DEF_IM2COL(T)                                                                              \
    OX_HOT static void im2col_##T(const T *x, const struct geom *g, int64_t r0, int64_t r1,        \
                                  int64_t p0, int64_t p1, int64_t ld, T *col) {                    \
        int L = g->nsp - 1; /* the last spatial dim */                                             \
        int64_t OW = g->out[L], sw = g->s[L], W = g->in[L];                                        \
        for (int64_t row = r0; row < r1; row++) {                                                  \
            const T *xc = x + row / g->k_size * g->in_size;                                        \
            int64_t ko[MAX_SP] = {0}, r = row % g->k_size;                                         \
            for (int i = L; i >= 0; i--) ko[i] = r % g->k[i], r /= g->k[i];                        \
            T *dst = col + (row - r0) * ld - p0; /* dst[p]: column p */                            \
            int64_t off = ko[L] * g->d[L] - g->pb[L];                                              \
            /* the outputs whose tap lies inside the row: [lo, hi) */                              \
            int64_t lo = off >= 0 ? 0 : (-off + sw - 1) / sw;                                      \
            int64_t hi = W - off <= 0 ? 0 : (W - off - 1) / sw + 1;                                \
            if (hi > OW) hi = OW;                                                                  \
            for (int64_t orow = p0 / OW; orow * OW < p1; orow++) {                                 \
                int64_t a = orow * OW < p0 ? p0 - orow * OW : 0;                                   \
                int64_t b = (orow + 1) * OW > p1 ? p1 - orow * OW : OW;                            \
                int64_t in_row = 0, q = orow, scale = 1;                                           \
                bool inside = true;                                                                \
                for (int i = L - 1; i >= 0; i--) {                                                 \
                    int64_t v = q % g->out[i] * g->s[i] - g->pb[i] + ko[i] * g->d[i];              \
                    q /= g->out[i];                                                                \
                    inside &= v >= 0 && v < g->in[i];                                              \
                    in_row += v * scale;                                                           \
                    scale *= g->in[i];                                                             \
                }                                                                                  \
                T *d = dst + orow * OW;                                                            \
                if (!inside) {                                                                     \
                    for (int64_t ow = a; ow < b; ow++) d[ow] = 0;                                  \
                    continue;                                                                      \
                }                                                                                  \
                const T *xr = xc + in_row * W;                                                     \
                int64_t l = lo < a ? a : lo > b ? b : lo, h = hi > b ? b : hi < l ? l : hi;        \
                for (int64_t ow = a; ow < l; ow++) d[ow] = 0;                                      \
                if (sw == 1) {                                                                     \
                    if (h > l) memcpy(d + l, xr + l + off, sizeof(T) * (size_t)(h - l));           \
                } else {                                                                           \
                    for (int64_t ow = l; ow < h; ow++) d[ow] = xr[ow * sw + off];                  \
                }                                                                                  \
                for (int64_t ow = h; ow < b; ow++) d[ow] = 0;                                      \
            }                                                                                      \
        }                                                                                          \
    }
DEF_IM2COL(float)
DEF_IM2COL(double)

/* Depthwise: output channel m reads input channel m (one of each per group). */
#define DEF_DEPTHWISE(T, NAME)                                                                     \
    static void NAME(const T *x, const T *w, T *y, const struct geom *g) {                         \
        int64_t o[MAX_SP] = {0};                                                                   \
        for (int64_t p = 0; p < g->out_size; p++) {                                                \
            T acc = 0;                                                                             \
            int64_t ko[MAX_SP] = {0};                                                              \
            for (int64_t kk = 0; kk < g->k_size; kk++) {                                           \
                int64_t idx = 0;                                                                   \
                bool inside = true;                                                                \
                for (int i = 0; i < g->nsp; i++) {                                                 \
                    int64_t v = o[i] * g->s[i] - g->pb[i] + ko[i] * g->d[i];                       \
                    if (v < 0 || v >= g->in[i]) inside = false;                                    \
                    idx = idx * g->in[i] + v;                                                      \
                }                                                                                  \
                if (inside) acc += x[idx] * w[kk];                                                 \
                for (int i = g->nsp - 1; i >= 0; i--) {                                            \
                    if (++ko[i] < g->k[i]) break;                                                  \
                    ko[i] = 0;                                                                     \
                }                                                                                  \
            }                                                                                      \
            y[p] = acc;                                                                            \
            for (int i = g->nsp - 1; i >= 0; i--) {                                                \
                if (++o[i] < g->out[i]) break;                                                     \
                o[i] = 0;                                                                          \
            }                                                                                      \
        }                                                                                          \
    }
DEF_DEPTHWISE(double, depthwise_double)
DEF_DEPTHWISE(float, depthwise_nd_float)

/* float depthwise 2-D: rows of the output, with the inner loop free of bounds checks where
 * the window lies inside the input. */
/* 3x3 depthwise (most of MobileNet's): each output element sums its nine taps in a register;
 * the outputs whose taps are all inside the row run without bounds tests, the edges with. */
OX_HOT static void depthwise3x3_float(const float *x, const float *w, float *y,
                                      const struct geom *g) {
    int64_t H = g->in[0], W = g->in[1], OH = g->out[0], OW = g->out[1];
    int64_t SH = g->s[0], SW = g->s[1], DH = g->d[0], DW = g->d[1], PT = g->pb[0], PL = g->pb[1];
    /* interior: ow*SW - PL >= 0 and ow*SW - PL + 2*DW < W */
    int64_t lo = PL <= 0 ? 0 : (PL + SW - 1) / SW;
    int64_t hi = W - 2 * DW + PL <= 0 ? 0 : (W - 2 * DW + PL - 1) / SW + 1;
    if (hi > OW) hi = OW;
    if (lo > hi) lo = hi;
    for (int64_t oh = 0; oh < OH; oh++) {
        float *yr = y + oh * OW;
        const float *rows[3];
        float wk[3][3];
        int nr = 0;
        for (int kh = 0; kh < 3; kh++) {
            int64_t ih = oh * SH - PT + kh * DH;
            if (ih < 0 || ih >= H) continue;
            rows[nr] = x + ih * W;
            for (int kw = 0; kw < 3; kw++) wk[nr][kw] = w[kh * 3 + kw];
            nr++;
        }
        for (int64_t ow = 0; ow < OW; ow++) {
            if (ow == lo && hi > lo) { /* the interior, bounds-free */
                for (int r = 0; r < nr; r++) {
                    const float *xr = rows[r] - PL;
                    float w0 = wk[r][0], w1 = wk[r][1], w2 = wk[r][2];
                    if (r == 0)
                        for (int64_t o = lo; o < hi; o++)
                            yr[o] =
                                w0 * xr[o * SW] + w1 * xr[o * SW + DW] + w2 * xr[o * SW + 2 * DW];
                    else
                        for (int64_t o = lo; o < hi; o++)
                            yr[o] +=
                                w0 * xr[o * SW] + w1 * xr[o * SW + DW] + w2 * xr[o * SW + 2 * DW];
                }
                if (nr == 0)
                    for (int64_t o = lo; o < hi; o++) yr[o] = 0;
                ow = hi - 1;
                continue;
            }
            float acc = 0;
            for (int r = 0; r < nr; r++)
                for (int kw = 0; kw < 3; kw++) {
                    int64_t iw = ow * SW - PL + kw * DW;
                    if (iw >= 0 && iw < W) acc += wk[r][kw] * rows[r][iw];
                }
            yr[ow] = acc;
        }
    }
}

OX_HOT static void depthwise2d_float(const float *x, const float *w, float *y,
                                     const struct geom *g) {
    int64_t H = g->in[0], W = g->in[1], OH = g->out[0], OW = g->out[1];
    int64_t KH = g->k[0], KW = g->k[1], SH = g->s[0], SW = g->s[1], DH = g->d[0], DW = g->d[1];
    int64_t PT = g->pb[0], PL = g->pb[1];
    if (KH == 3 && KW == 3) {
        depthwise3x3_float(x, w, y, g);
        return;
    }
    for (int64_t oh = 0; oh < OH; oh++) {
        float *yr = y + oh * OW;
        for (int64_t ow = 0; ow < OW; ow++) yr[ow] = 0;
        for (int64_t kh = 0; kh < KH; kh++) {
            int64_t ih = oh * SH - PT + kh * DH;
            if (ih < 0 || ih >= H) continue;
            const float *xr = x + ih * W;
            for (int64_t kw = 0; kw < KW; kw++) {
                float wv = w[kh * KW + kw];
                int64_t off = kw * DW - PL;
                /* ow range where 0 <= ow*SW + off < W */
                int64_t lo = off >= 0 ? 0 : (-off + SW - 1) / SW;
                int64_t hi = W - off <= 0 ? 0 : (W - off - 1) / SW + 1;
                if (hi > OW) hi = OW;
                if (SW == 1) {
                    const float *xs = xr + off;
                    for (int64_t ow = lo; ow < hi; ow++) yr[ow] += wv * xs[ow];
                } else {
                    for (int64_t ow = lo; ow < hi; ow++) yr[ow] += wv * xr[ow * SW + off];
                }
            }
        }
    }
}

static void depthwise_float(const float *x, const float *w, float *y, const struct geom *g) {
    if (g->nsp == 2)
        depthwise2d_float(x, w, y, g);
    else
        depthwise_nd_float(x, w, y, g);
}

static void gemm_double(int64_t M, int64_t N, int64_t K, const double *a, const double *b,
                        double *c) {
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)M, (int)N, (int)K, 1.0, a, (int)K,
                b, (int)N, 0.0, c, (int)N);
}

static void conv_double(const double *x, const double *w, const double *b, double *y,
                        const struct geom *g, int64_t N, int64_t C, int64_t M, int64_t group,
                        double *col) {
    int64_t cg = C / group, mg = M / group, kdim = cg * g->k_size;
    bool pointwise = conv_is_pointwise(g), depthwise = cg == 1 && mg == 1;
    for (int64_t nn = 0; nn < N; nn++)
        for (int64_t gr = 0; gr < group; gr++) {
            const double *xg = x + (nn * C + gr * cg) * g->in_size;
            const double *wg = w + gr * mg * kdim;
            double *yg = y + (nn * M + gr * mg) * g->out_size;
            if (depthwise) {
                depthwise_double(xg, wg, yg, g);
            } else if (pointwise) {
                gemm_double(mg, g->out_size, kdim, wg, xg, yg);
            } else {
                im2col_double(xg, g, 0, cg * g->k_size, 0, g->out_size, g->out_size, col);
                gemm_double(mg, g->out_size, kdim, wg, col, yg);
            }
        }
    if (b)
        for (int64_t nn = 0; nn < N; nn++)
            for (int64_t m = 0; m < M; m++) {
                double *ym = y + (nn * M + m) * g->out_size, bv = b[m];
                for (int64_t p = 0; p < g->out_size; p++) ym[p] += bv;
            }
}

/* float convolution over the thread pool. The work is cut into (image, group) units; a
 * unit is one GEMM of its filters [mg, kdim] by its patch columns [kdim, out_size]. Units
 * go to threads whole when there are enough of them (batches, groups); a single unit is
 * cut into column blocks, each thread building only its own columns' patches, or, when the
 * output is too small for that, into row blocks of one shared patch matrix. The bias is
 * added to each block while it is still in cache. */
#define CONV_COL_BLOCK 16 /* columns: a multiple of sgemm's tile width */

struct conv_job {
    const float *x, *w, *b;
    float *y;
    const struct geom *g;
    int64_t C, M, group, cg, mg, kdim;
    bool pointwise;
    float *scratch;
    int64_t slot;          /* floats of scratch per thread */
    int64_t unit;          /* the unit being cut into column blocks */
    const float *packed_w; /* packed GEMM: group panels, ox_sgemm_packed_a_floats(mg, kdim) */
    const float *z;        /* fused ops: a residual of y's shape, or NULL */
    float lo, hi;          /* fused ops: the activation's clamp */
    bool silu;             /* fused ops: x * sigmoid(x) instead */
    bool epilogue_done;    /* z and the clamp were applied by the path taken */
    bool dw_padded;        /* depthwise: the scratch holds dw_slot floats per thread */
    /* depthwise: floats between channel planes of x and of y and z, when not the map's
     * in_size and out_size (0): a band of rows of each plane (ox_nn_cpu_pw_dw) */
    int64_t x_plane, y_plane;
    /* trimmed (conv_trim): g is the trimmed geometry and w the full weights, of g_full's
     * taps; the weights of taps klo.. are copied into `slice` (scratch) before packing */
    const struct geom *g_full;
    int64_t klo[MAX_SP];
    float *slice;
};

static struct conv_job conv_job_make(const float *x, const float *w, const float *b, float *y,
                                     const struct geom *g, int64_t C, int64_t M, int64_t group) {
    struct conv_job j = {.x = x, .w = w, .b = b, .y = y, .g = g, .C = C, .M = M, .group = group};
    j.cg = C / group;
    j.mg = M / group;
    j.kdim = j.cg * g->k_size;
    j.pointwise = conv_is_pointwise(g);
    j.lo = -INFINITY;
    j.hi = INFINITY;
    return j;
}

/* Rows [0, mg) of a unit's output block y (row stride ld), columns [p0, p1): += bias. */
static void conv_bias(float *y, int64_t ld, int64_t rows, int64_t p0, int64_t p1,
                      const float *bias) {
    if (!bias) return;
    for (int64_t m = 0; m < rows; m++) {
        float *r = y + m * ld, bv = bias[m];
        for (int64_t p = p0; p < p1; p++) r[p] += bv;
    }
}

static void conv_unit(const struct conv_job *j, int64_t u, int64_t p0, int64_t p1, float *col) {
    const struct geom *g = j->g;
    int64_t nn = u / j->group, gr = u % j->group, os = g->out_size;
    const float *xg = j->x + (nn * j->C + gr * j->cg) * g->in_size;
    const float *wg = j->w + gr * j->mg * j->kdim, *bg = j->b ? j->b + gr * j->mg : NULL;
    float *yg = j->y + (nn * j->M + gr * j->mg) * os;
    const float *B = xg + p0;
    int64_t ldb = os;
    if (!j->pointwise) {
        im2col_float(xg, g, 0, j->kdim, p0, p1, p1 - p0, col);
        B = col;
        ldb = p1 - p0;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)j->mg, (int)(p1 - p0), (int)j->kdim,
                1.0f, wg, (int)j->kdim, B, (int)ldb, 0.0f, yg + p0, (int)os);
    conv_bias(yg, os, j->mg, p0, p1, bg);
}

static void conv_units_piece(void *arg, int64_t b, int64_t e, int tid) {
    const struct conv_job *j = arg;
    for (int64_t u = b; u < e; u++)
        conv_unit(j, u, 0, j->g->out_size,
                  ox_scratch_at(j->scratch, sizeof(float) * (size_t)(tid * j->slot)));
}

static void conv_cols_piece(void *arg, int64_t b, int64_t e, int tid) {
    const struct conv_job *j = arg;
    int64_t p0 = b * CONV_COL_BLOCK, p1 = e * CONV_COL_BLOCK;
    if (p1 > j->g->out_size) p1 = j->g->out_size;
    if (p1 > p0)
        conv_unit(j, j->unit, p0, p1,
                  ox_scratch_at(j->scratch, sizeof(float) * (size_t)(tid * j->slot)));
}

#if defined(__x86_64__) && defined(__GNUC__)
#include "kernels/cpu/igemm.h"
#include "kernels/cpu/vecmath.h"
#define HAVE_DEPTHWISE_AVX512 1

/* The end of a 16-output vector of a depthwise row (mo: the outputs in the row): + the
 * residual z when given, SiLU or the clamp to [lo, hi] (NaN kept; lo > hi: hi), stored. */
__attribute__((target("avx512f"), always_inline)) static inline void
dw_store16(__m512 acc, __mmask16 mo, const float *z, float *y, __m512 vlo, __m512 vhi, bool silu) {
    if (z) acc = _mm512_add_ps(acc, _mm512_maskz_loadu_ps(mo, z));
    acc = silu ? silu16(acc) : _mm512_min_ps(vhi, _mm512_max_ps(vlo, acc));
    _mm512_mask_storeu_ps(y, mo, acc);
}

/* One channel of a 2-D depthwise convolution, 16 outputs of a row at a time: each tap is a
 * masked load (stride 1), two loads and a permute (stride 2) or a gather, the lanes whose
 * tap falls in the padding masked to zero; then bias, residual and clamp, and one masked
 * store. */
__attribute__((target("avx512f"))) static void depthwise2d_avx512(const float *x, const float *w,
                                                                  float *y, const struct geom *g,
                                                                  float bias, const float *z,
                                                                  float lo, float hi, bool silu) {
    int64_t H = g->in[0], W = g->in[1], OH = g->out[0], OW = g->out[1], KH = g->k[0];
    int64_t KW = g->k[1], SH = g->s[0], SW = g->s[1], DH = g->d[0], DW = g->d[1];
    int64_t PT = g->pb[0], PL = g->pb[1];
    __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    __m512i step = _mm512_mullo_epi32(lane, _mm512_set1_epi32((int)SW));
    __m512i wv = _mm512_set1_epi32((int)W), sixteen = _mm512_set1_epi32(16);
    __m512i even = _mm512_add_epi32(lane, lane);
    __m512 vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi), vb = _mm512_set1_ps(bias);
    for (int64_t oh = 0; oh < OH; oh++) {
        for (int64_t ow0 = 0; ow0 < OW; ow0 += 16) {
            __mmask16 mo = tail_mask16(OW - ow0);
            __m512 acc = _mm512_setzero_ps();
            int64_t iw0 = ow0 * SW - PL;
            /* every tap of all 16 lanes inside the row (for stride 2, both loads): plain
             * loads, no masks */
            bool inside =
                mo == 0xFFFF && iw0 >= 0 && iw0 + 16 * SW - 1 + (KW - 1) * DW < W && SW <= 2;
            for (int64_t kh = 0; kh < KH; kh++) {
                int64_t ih = oh * SH - PT + kh * DH;
                if (ih < 0 || ih >= H) continue;
                const float *xr = x + ih * W;
                const float *wk = w + kh * KW;
                if (inside && SW == 1) {
                    for (int64_t kw = 0; kw < KW; kw++)
                        acc = _mm512_fmadd_ps(_mm512_set1_ps(wk[kw]),
                                              _mm512_loadu_ps(xr + iw0 + kw * DW), acc);
                    continue;
                }
                if (inside) { /* stride 2: the even lanes of two loads */
                    for (int64_t kw = 0; kw < KW; kw++) {
                        const float *p = xr + iw0 + kw * DW;
                        __m512 v = _mm512_permutex2var_ps(_mm512_loadu_ps(p), even,
                                                          _mm512_loadu_ps(p + 16));
                        acc = _mm512_fmadd_ps(_mm512_set1_ps(wk[kw]), v, acc);
                    }
                    continue;
                }
                for (int64_t kw = 0; kw < KW; kw++) {
                    int64_t iw = ow0 * SW - PL + kw * DW;
                    __m512i iwv = _mm512_add_epi32(step, _mm512_set1_epi32((int)iw));
                    __mmask16 m = _mm512_cmplt_epu32_mask(iwv, wv) & mo;
                    if (!m) continue;
                    __m512 v;
                    if (SW == 1) {
                        v = _mm512_maskz_loadu_ps(m, xr + iw);
                    } else if (SW == 2) {
                        __m512i pos = _mm512_add_epi32(lane, _mm512_set1_epi32((int)iw));
                        __mmask16 ma = _mm512_cmplt_epu32_mask(pos, wv);
                        __mmask16 mb = _mm512_cmplt_epu32_mask(_mm512_add_epi32(pos, sixteen), wv);
                        v = _mm512_maskz_permutex2var_ps(m, _mm512_maskz_loadu_ps(ma, xr + iw),
                                                         even,
                                                         _mm512_maskz_loadu_ps(mb, xr + iw + 16));
                    } else {
                        v = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, iwv, xr, 4);
                    }
                    acc = _mm512_fmadd_ps(_mm512_set1_ps(w[kh * KW + kw]), v, acc);
                }
            }
            dw_store16(_mm512_add_ps(acc, vb), mo, z ? z + oh * OW + ow0 : NULL, y + oh * OW + ow0,
                       vlo, vhi, silu);
        }
    }
}

/* The padded layout of one channel for depthwise2d_padded: rows from -PT, columns from -PL,
 * zeros outside the input, wide enough that every tap of every 16-lane output vector (the
 * last one rounded up) is a plain load. Floats per channel, 0 when the path does not apply. */
static int64_t dw_padded_floats(const struct geom *g) {
    if (g->nsp != 2 || g->s[1] > 2 || !ox_sgemm_is_fast()) return 0;
    int64_t OWr = (g->out[1] + 15) / 16 * 16;
    int64_t hp = (g->out[0] - 1) * g->s[0] + (g->k[0] - 1) * g->d[0] + 1;
    int64_t wp = OWr * g->s[1] + (g->k[1] - 1) * g->d[1] + 16;
    if (hp * wp > INT32_MAX / 4) return 0;
    return (hp * wp + 15) / 16 * 16;
}

__attribute__((target("avx512f"))) static void dw_pad_copy(const float *x, const struct geom *g,
                                                           float *xp) {
    int64_t H = g->in[0], W = g->in[1], PT = g->pb[0], PL = g->pb[1];
    int64_t OWr = (g->out[1] + 15) / 16 * 16;
    int64_t hp = (g->out[0] - 1) * g->s[0] + (g->k[0] - 1) * g->d[0] + 1;
    int64_t wp = OWr * g->s[1] + (g->k[1] - 1) * g->d[1] + 16;
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i wv = _mm512_set1_epi32((int)W);
    /* rows are short (7 to 112 columns): masked vector copies, no library calls */
    for (int64_t r = 0; r < hp; r++) {
        float *d = xp + r * wp;
        int64_t ih = r - PT;
        bool inside = ih >= 0 && ih < H;
        const float *s = x + (inside ? ih : 0) * W;
        for (int64_t c0 = 0; c0 < wp; c0 += 16) {
            __m512i pos = _mm512_add_epi32(lane, _mm512_set1_epi32((int)(c0 - PL)));
            __mmask16 m = inside ? _mm512_cmplt_epu32_mask(pos, wv) : 0;
            __mmask16 ms = tail_mask16(wp - c0);
            /* lanes outside the row are masked: never read */
            __m512 v = _mm512_maskz_loadu_ps(m, (const char *)s + (c0 - PL) * 4);
            _mm512_mask_storeu_ps(d + c0, ms, v);
        }
    }
}

/* Rows of output vectors from the padded channel: KH x KW plain loads (stride 1) or load
 * pairs and a permute (stride 2) per 16 outputs. Inlined with constant KH, KW, SW for the
 * common kernels, so that the taps unroll and the weights stay in registers. */
__attribute__((target("avx512f"), always_inline)) static inline void
dw_padded_rows(const float *xp, int64_t wp, const float *w, float *y, const struct geom *g,
               float bias, const float *z, float lo, float hi, bool silu, int64_t KH, int64_t KW,
               int64_t SW, const char *next) {
    int64_t OH = g->out[0], OW = g->out[1], SH = g->s[0], DH = g->d[0], DW = g->d[1];
    /* the next channel's input is fetched into L2 a share per output row, while this one
     * computes: its copy then finds it there (early layers' maps are megabytes, in L3 or
     * memory, and the copy would otherwise wait on every line) */
    int64_t lines = next ? (g->in_size * 4 + 63) / 64 : 0, per_row = (lines + OH - 1) / OH;
    const __m512i even = even_lanes16();
    __m512 vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi), vb = _mm512_set1_ps(bias);
    for (int64_t oh = 0; oh < OH; oh++) {
        const float *x0 = xp + oh * SH * wp;
        float *yr = y + oh * OW;
        const float *zr = z ? z + oh * OW : NULL;
        for (int64_t l = oh * per_row; l < (oh + 1) * per_row && l < lines; l++)
            _mm_prefetch(next + l * 64, _MM_HINT_T1);
        for (int64_t ow0 = 0; ow0 < OW; ow0 += 16) {
            __m512 acc = vb;
            const float *xc = x0 + ow0 * SW;
            for (int64_t kh = 0; kh < KH; kh++) {
                const float *xr = xc + kh * DH * wp;
                for (int64_t kw = 0; kw < KW; kw++) {
                    const float *q = xr + kw * DW;
                    __m512 v = SW == 1 ? _mm512_loadu_ps(q)
                                       : _mm512_permutex2var_ps(_mm512_loadu_ps(q), even,
                                                                _mm512_loadu_ps(q + 16));
                    acc = _mm512_fmadd_ps(_mm512_set1_ps(w[kh * KW + kw]), v, acc);
                }
            }
            __mmask16 mo = tail_mask16(OW - ow0);
            dw_store16(acc, mo, zr ? zr + ow0 : NULL, yr + ow0, vlo, vhi, silu);
        }
    }
}

/* One channel through the padded layout (scratch: dw_padded_floats(g) floats). */
__attribute__((target("avx512f"))) static void
depthwise2d_padded(const float *x, const float *w, float *y, const struct geom *g, float bias,
                   const float *z, float lo, float hi, bool silu, float *xp, const float *next) {
    const char *nx = (const char *)next;
    int64_t OWr = (g->out[1] + 15) / 16 * 16;
    int64_t KH = g->k[0], KW = g->k[1], SW = g->s[1];
    int64_t wp = OWr * SW + (KW - 1) * g->d[1] + 16;
    dw_pad_copy(x, g, xp);
    if (KH == 3 && KW == 3 && SW == 1)
        dw_padded_rows(xp, wp, w, y, g, bias, z, lo, hi, silu, 3, 3, 1, nx);
    else if (KH == 3 && KW == 3 && SW == 2)
        dw_padded_rows(xp, wp, w, y, g, bias, z, lo, hi, silu, 3, 3, 2, nx);
    else if (KH == 5 && KW == 5 && SW == 1)
        dw_padded_rows(xp, wp, w, y, g, bias, z, lo, hi, silu, 5, 5, 1, nx);
    else if (KH == 5 && KW == 5 && SW == 2)
        dw_padded_rows(xp, wp, w, y, g, bias, z, lo, hi, silu, 5, 5, 2, nx);
    else if (SW == 1)
        dw_padded_rows(xp, wp, w, y, g, bias, z, lo, hi, silu, KH, KW, 1, nx);
    else
        dw_padded_rows(xp, wp, w, y, g, bias, z, lo, hi, silu, KH, KW, 2, nx);
}

/* Depthwise over small maps, 16 channels at a time: the channels' padded maps are interleaved
 * into one tile (pixel-major, 16 floats per pixel, zeros in the padding), so that every tap
 * of every output pixel is one full-width FMA of the 16 channels, whatever the map's width
 * or the stride; the row-vector kernels above waste lanes on rows narrower than 16 (7, 14
 * and 28 wide maps: 44 to 87% used) and copy a padded map per channel. The tile is filled
 * and the output read back by gathers; the bias goes into the sums, the residual and the
 * activation are applied on the way out, 16 pixels of a channel at a time. */
struct dw_tile {
    int64_t hp, wp;        /* the tile's padded extent */
    int64_t tile, wt, out; /* floats of each part of the scratch, multiples of 16 */
};

static struct dw_tile dw_tile_geom(const struct geom *g) {
    struct dw_tile t;
    t.hp = (g->out[0] - 1) * g->s[0] + (g->k[0] - 1) * g->d[0] + 1;
    t.wp = (g->out[1] - 1) * g->s[1] + (g->k[1] - 1) * g->d[1] + 1;
    t.tile = t.hp * t.wp * 16;
    t.wt = g->k_size * 16;
    t.out = g->out_size * 16;
    return t;
}

/* Floats of scratch per thread for the tiled path, 0 where it does not apply: 2-D, AVX-512,
 * output rows under 64 wide (rows under 32 waste lanes in row vectors; 56-wide ones gain
 * too, now that the read-back is transposed: 144x56x56 0.349 -> 0.301 ms), a tile that
 * stays in L2, offsets that fit gathers' 32-bit indices. */
static int64_t dw_tiled_floats(const struct geom *g) {
    if (g->nsp != 2 || !ox_sgemm_is_fast() || g->out[1] >= 64) return 0;
    struct dw_tile t = dw_tile_geom(g);
    int64_t n = t.tile + t.wt + t.out;
    if (n > (1 << 18) || g->in_size > INT32_MAX / 16 || g->out_size > INT32_MAX / 16) return 0;
    return n;
}

/* 16 x 16 floats transposed in registers: r[i] lane j becomes r[j] lane i. */
__attribute__((target("avx512f"), always_inline)) static inline void transpose16(__m512 r[16]) {
    __m512 t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        __m512d a = _mm512_castps_pd(t[i]), b = _mm512_castps_pd(t[i + 2]);
        __m512d c = _mm512_castps_pd(t[i + 1]), d = _mm512_castps_pd(t[i + 3]);
        r[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
        r[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
        r[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(c, d));
        r[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(c, d));
    }
    for (int h = 0; h < 16; h += 8)
        for (int i = 0; i < 4; i++) {
            t[h + i] = _mm512_shuffle_f32x4(r[h + i], r[h + i + 4], 0x88);
            t[h + i + 4] = _mm512_shuffle_f32x4(r[h + i], r[h + i + 4], 0xdd);
        }
    for (int i = 0; i < 8; i++) {
        r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
        r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd);
    }
}

/* The tile of cn <= 16 channels of x (planes xs apart): pixel-major, 16 floats per
 * pixel, `pad` where the padded map lies outside the input (lanes past cn: 0). Inside the
 * input, 16 pixels of each of the 16 channel rows are loaded and transposed in registers
 * into 16 pixel vectors (on this AMD EPYC, 16-lane gathers per pixel cost 2-3x as much:
 * 144 channels 56x56 stride 2 0.19 -> 0.07 ms). */
__attribute__((target("avx512f"))) static void tile_fill(const float *x, int64_t xs, int64_t cn,
                                                         const struct geom *g,
                                                         const struct dw_tile *t, float pad,
                                                         float *tile) {
    int64_t H = g->in[0], W = g->in[1], PT = g->pb[0], PL = g->pb[1];
    /* tile columns [c_lo, c_hi) lie over input columns c - PL; the others are padding */
    int64_t c_lo = PL < t->wp ? PL : t->wp, c_hi = W + PL < t->wp ? W + PL : t->wp;
    __m512 vpad = _mm512_set1_ps(pad);
    for (int64_t r = 0; r < t->hp; r++) {
        int64_t ih = r - PT;
        float *row = tile + r * t->wp * 16;
        if (ih < 0 || ih >= H) {
            for (int64_t c = 0; c < t->wp; c++) _mm512_storeu_ps(row + c * 16, vpad);
            continue;
        }
        for (int64_t c = 0; c < c_lo; c++) _mm512_storeu_ps(row + c * 16, vpad);
        for (int64_t c = c_hi > c_lo ? c_hi : c_lo; c < t->wp; c++)
            _mm512_storeu_ps(row + c * 16, vpad);
        const float *src = x + ih * W - PL;
        for (int64_t c = c_lo; c < c_hi; c += 16) {
            int64_t n = c_hi - c < 16 ? c_hi - c : 16;
            __mmask16 m = (__mmask16)((1u << n) - 1);
            __m512 v[16];
            for (int k = 0; k < 16; k++)
                v[k] = k < cn ? _mm512_maskz_loadu_ps(m, src + k * xs + c) : _mm512_setzero_ps();
            transpose16(v);
            for (int k = 0; k < n; k++) _mm512_storeu_ps(row + (c + k) * 16, v[k]);
        }
    }
}

/* Channel planes y (ys apart, cn of them) from the pixel-major tile ot of os pixels, 16
 * pixels at a time: their 16 channel vectors (1 KiB in a row) transposed in registers into
 * 16 pixels of each channel, + the residual z (y's layout) when given, then SiLU or the
 * clamp to [lo, hi] (NaN kept). (Gathering each channel's pixels instead, 64 bytes apart,
 * took two thirds of a 28x28 depthwise convolution.) */
__attribute__((target("avx512f"))) static void tile_unpack(const float *ot, int64_t os, int64_t cn,
                                                           float *y, int64_t ys, const float *z,
                                                           float lo, float hi, bool silu) {
    __m512 vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
    for (int64_t p = 0; p < os; p += 16) {
        int64_t n = os - p < 16 ? os - p : 16;
        __mmask16 m = (__mmask16)((1u << n) - 1);
        __m512 v[16];
        for (int i = 0; i < 16; i++)
            v[i] = i < n ? _mm512_loadu_ps(ot + (p + i) * 16) : _mm512_setzero_ps();
        transpose16(v);
        for (int64_t c = 0; c < cn; c++) {
            __m512 u = v[c];
            if (z) u = _mm512_add_ps(u, _mm512_maskz_loadu_ps(m, z + c * ys + p));
            u = silu ? silu16(u) : _mm512_min_ps(vhi, _mm512_max_ps(vlo, u));
            _mm512_mask_storeu_ps(y + c * ys + p, m, u);
        }
    }
}

__attribute__((target("avx512f"))) static void
depthwise2d_tiled(const float *x, int64_t xs, const float *w, const float *bias, float *y,
                  int64_t ys, const float *z, int64_t cn, const struct geom *g, float lo, float hi,
                  bool silu, float *scratch) {
    struct dw_tile t = dw_tile_geom(g);
    int64_t OH = g->out[0], OW = g->out[1], SH = g->s[0], SW = g->s[1], DH = g->d[0];
    int64_t DW = g->d[1], KH = g->k[0], KW = g->k[1], ks = g->k_size, os = g->out_size;
    float *tile = scratch, *wt = scratch + t.tile, *ot = wt + t.wt;
    __mmask16 mc = (__mmask16)((1u << cn) - 1);
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    __m512i w_idx = _mm512_mullo_epi32(lane, _mm512_set1_epi32((int)ks));
    /* weights: tap-major, 16 channels per tap */
    for (int64_t k = 0; k < ks; k++)
        _mm512_storeu_ps(wt + k * 16,
                         _mm512_mask_i32gather_ps(_mm512_setzero_ps(), mc, w_idx, w + k, 4));
    tile_fill(x, xs, cn, g, &t, 0.0f, tile);
    __m512 vb = bias ? _mm512_mask_loadu_ps(_mm512_setzero_ps(), mc, bias) : _mm512_setzero_ps();
    /* the sums, four output pixels of a row at a time (each tap's weights loaded once) */
    for (int64_t oh = 0; oh < OH; oh++) {
        const float *tr = tile + oh * SH * t.wp * 16;
        float *orow = ot + oh * OW * 16;
        int64_t ow = 0;
        for (; ow + 4 <= OW; ow += 4) {
            __m512 a0 = vb, a1 = vb, a2 = vb, a3 = vb;
            for (int64_t kh = 0; kh < KH; kh++) {
                const float *p = tr + (kh * DH * t.wp + ow * SW) * 16;
                const float *wk = wt + kh * KW * 16;
                for (int64_t kw = 0; kw < KW; kw++) {
                    __m512 wv = _mm512_loadu_ps(wk + kw * 16);
                    const float *q = p + kw * DW * 16;
                    a0 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(q), a0);
                    a1 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(q + SW * 16), a1);
                    a2 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(q + SW * 32), a2);
                    a3 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(q + SW * 48), a3);
                }
            }
            _mm512_storeu_ps(orow + ow * 16, a0);
            _mm512_storeu_ps(orow + ow * 16 + 16, a1);
            _mm512_storeu_ps(orow + ow * 16 + 32, a2);
            _mm512_storeu_ps(orow + ow * 16 + 48, a3);
        }
        for (; ow < OW; ow++) {
            __m512 a = vb;
            for (int64_t kh = 0; kh < KH; kh++)
                for (int64_t kw = 0; kw < KW; kw++)
                    a = _mm512_fmadd_ps(
                        _mm512_loadu_ps(wt + (kh * KW + kw) * 16),
                        _mm512_loadu_ps(tr + (kh * DH * t.wp + ow * SW + kw * DW) * 16), a);
            _mm512_storeu_ps(orow + ow * 16, a);
        }
    }
    tile_unpack(ot, os, cn, y, ys, z, lo, hi, silu);
}

/* Max pooling over small maps, 16 channels at a time through the same tile (-inf in the
 * padding): each output pixel is the max of its taps, full-width vectors whatever the width
 * or stride, four pixels at a time; a NaN wins; a window wholly in the padding gives 0. The
 * row-at-a-time kernel (maxpool2d_rows) spends its time on per-row overhead on 13- to
 * 55-wide maps. Scratch: the tile and the output tile. */
__attribute__((target("avx512f"))) static inline __m512 nanmax16(__m512 acc, __m512 v) {
    acc = _mm512_max_ps(v, acc); /* a NaN acc stays */
    return _mm512_mask_mov_ps(acc, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), v);
}

__attribute__((target("avx512f"))) static void
maxpool2d_tiled(const float *x, float *y, int64_t cn, const struct geom *g, float *scratch) {
    struct dw_tile t = dw_tile_geom(g);
    int64_t H = g->in[0], W = g->in[1], OH = g->out[0], OW = g->out[1], SH = g->s[0];
    int64_t SW = g->s[1], DH = g->d[0], DW = g->d[1], KH = g->k[0], KW = g->k[1];
    int64_t PT = g->pb[0], PL = g->pb[1];
    float *tile = scratch, *ot = scratch + t.tile;
    tile_fill(x, g->in_size, cn, g, &t, -INFINITY, tile);
    for (int64_t oh = 0; oh < OH; oh++) {
        const float *tr = tile + oh * SH * t.wp * 16;
        float *orow = ot + oh * OW * 16;
        bool row_in = false; /* some tap row inside the input */
        for (int64_t kh = 0; kh < KH; kh++) {
            int64_t ih = oh * SH - PT + kh * DH;
            row_in |= ih >= 0 && ih < H;
        }
        int64_t ow = 0;
        for (; ow + 4 <= OW; ow += 4) {
            __m512 a0 = _mm512_set1_ps(-INFINITY), a1 = a0, a2 = a0, a3 = a0;
            for (int64_t kh = 0; kh < KH; kh++) {
                const float *p = tr + (kh * DH * t.wp + ow * SW) * 16;
                for (int64_t kw = 0; kw < KW; kw++) {
                    const float *q = p + kw * DW * 16;
                    a0 = nanmax16(a0, _mm512_loadu_ps(q));
                    a1 = nanmax16(a1, _mm512_loadu_ps(q + SW * 16));
                    a2 = nanmax16(a2, _mm512_loadu_ps(q + SW * 32));
                    a3 = nanmax16(a3, _mm512_loadu_ps(q + SW * 48));
                }
            }
            _mm512_storeu_ps(orow + ow * 16, a0);
            _mm512_storeu_ps(orow + ow * 16 + 16, a1);
            _mm512_storeu_ps(orow + ow * 16 + 32, a2);
            _mm512_storeu_ps(orow + ow * 16 + 48, a3);
        }
        for (; ow < OW; ow++) {
            __m512 a = _mm512_set1_ps(-INFINITY);
            for (int64_t kh = 0; kh < KH; kh++)
                for (int64_t kw = 0; kw < KW; kw++)
                    a = nanmax16(a,
                                 _mm512_loadu_ps(tr + (kh * DH * t.wp + ow * SW + kw * DW) * 16));
            _mm512_storeu_ps(orow + ow * 16, a);
        }
        /* windows wholly in the padding (rows, or columns at either end): 0 */
        for (ow = 0; ow < OW; ow++) {
            bool col_in = false;
            for (int64_t kw = 0; kw < KW && row_in && !col_in; kw++) {
                int64_t iw = ow * SW - PL + kw * DW;
                col_in = iw >= 0 && iw < W;
            }
            if (!col_in) _mm512_storeu_ps(orow + ow * 16, _mm512_setzero_ps());
        }
    }
    tile_unpack(ot, g->out_size, cn, y, g->out_size, NULL, -INFINITY, INFINITY, false);
}

/* Floats of scratch per thread for maxpool2d_tiled, 0 where it does not apply: 2-D, AVX-512,
 * output rows under 64 wide (55-wide ones were slower with a gathered fill, 0.24 -> 0.29 ms,
 * and faster with the transposed one: 64 channels 111x111 3x3/2 0.226 -> 0.192 ms), the tile
 * within 1 MiB, 32-bit offsets. */
static int64_t maxpool_tiled_floats(const struct geom *g) {
    if (g->nsp != 2 || !ox_sgemm_is_fast() || g->out[1] >= 64) return 0;
    struct dw_tile t = dw_tile_geom(g);
    int64_t n = t.tile + t.out;
    if (n > (1 << 18) || g->in_size > INT32_MAX / 16 || g->out_size > INT32_MAX / 16) return 0;
    return n;
}

/* Max pooling 3 columns wide with stride 2 (ResNet's and SqueezeNet's first MaxPool), one
 * channel plane: for each output row, 16 outputs at a time take the max over the window's
 * rows of the 48 input columns under them (two vectors at the window's first column, two at
 * its third; columns outside the row read as -inf through masked loads), then the even
 * lanes of the first pair (tap 0), its odd lanes (tap 1) and the even lanes of the second
 * (tap 2). One pass over the input, no tile and no row buffer: 64 channels 112x112 ->
 * 56x56 alone 0.19 -> 0.144 ms (min of 300) against the tile; in a model, where the input
 * comes from memory, about the same (resnet18: 0.25 -> 0.23 ms). A NaN wins; a window whose
 * rows are all padding gives 0 (its columns never are: pads <= 2, maxpool_k3s2_fits). */
static bool maxpool_k3s2_fits(const struct geom *g) {
    return g->nsp == 2 && ox_sgemm_is_fast() && g->k[1] == 3 && g->s[1] == 2 && g->d[1] == 1 &&
           g->pb[1] <= 2 && g->out[1] >= 16 && (g->out[1] - 1) * 2 - g->pb[1] <= g->in[1] - 1 &&
           g->in[1] < INT32_MAX / 2;
}

/* lanes i of a 16-column vector starting at column c that lie in [0, W) */
static inline __mmask16 cols_in(int64_t c, int64_t W) {
    int64_t lo = c < 0 ? -c : 0, hi = W - c < 16 ? W - c : 16;
    if (hi <= lo) return 0;
    return (__mmask16)(((1u << hi) - 1) & ~((1u << lo) - 1));
}

__attribute__((target("avx512f"))) static void maxpool2d_k3s2(const float *x, float *y,
                                                              const struct geom *g) {
    int64_t H = g->in[0], W = g->in[1], OH = g->out[0], OW = g->out[1], KH = g->k[0];
    int64_t SH = g->s[0], DH = g->d[0], PT = g->pb[0], PL = g->pb[1];
    const __m512i even = even_lanes16();
    const __m512i odd = odd_lanes16();
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    for (int64_t oh = 0; oh < OH; oh++) {
        float *yr = y + oh * OW;
        int64_t kh0, nkh = taps_inside(oh * SH - PT, KH, DH, H, &kh0);
        if (!nkh) { /* the window's rows are all padding */
            memset(yr, 0, sizeof(float) * (size_t)OW);
            continue;
        }
        for (int64_t o = 0; o < OW; o += 16) {
            int64_t c = 2 * o - PL; /* the first column of output o's window */
            __mmask16 m0 = cols_in(c, W), m1 = cols_in(c + 16, W);
            __mmask16 m2 = cols_in(c + 2, W), m3 = cols_in(c + 18, W);
            __m512 a = ninf, b = ninf, e = ninf, f = ninf;
            for (int64_t kh = kh0; kh < kh0 + nkh; kh++) {
                const float *xr = x + (oh * SH - PT + kh * DH) * W + c;
                a = nanmax16(a, _mm512_mask_loadu_ps(ninf, m0, xr));
                b = nanmax16(b, _mm512_mask_loadu_ps(ninf, m1, xr + 16));
                e = nanmax16(e, _mm512_mask_loadu_ps(ninf, m2, xr + 2));
                f = nanmax16(f, _mm512_mask_loadu_ps(ninf, m3, xr + 18));
            }
            __m512 t0 = _mm512_permutex2var_ps(a, even, b), t1 = _mm512_permutex2var_ps(a, odd, b);
            __m512 t2 = _mm512_permutex2var_ps(e, even, f);
            __m512 v = nanmax16(nanmax16(t0, t1), t2);
            __mmask16 ms = tail_mask16(OW - o);
            _mm512_mask_storeu_ps(yr + o, ms, v);
        }
    }
}

/* Depthwise 3 columns wide with stride 2 (dilation 1; MobileNet's downsampling layers), one
 * channel plane read in place: for each output row, 64 outputs at a time (four vectors, four
 * independent sums) add up the window's rows inside the input, each row four loads per
 * vector (columns c .. c + 31 and c + 2 .. c + 33) and three permutes (their even lanes, the
 * odd lanes of the first pair, the even lanes of the second); then bias, residual and
 * activation, and a masked store. Groups of outputs whose columns lie inside the row load
 * without masks; at the row's ends, columns outside it read as 0 through masks computed once
 * per plane. No copy and no transposes: 96 channels 112x112 -> 56x56, 1 thread, alone 0.30 ->
 * 0.19 ms against the tile (whose fill took 63% of its time), in mobilenet_v2 on 2 threads
 * 0.31 -> 0.25 ms (minima of five interleaved runs). Below 48 outputs a row the 64-wide
 * groups waste lanes and the tile is faster (144 channels 56x56 -> 28x28: 0.096 against
 * 0.120 ms); stride 1 gained nothing over the padded copy or the tile (112- and 56-wide). */
static bool dw_s2_rows_fits(const struct geom *g) {
    return g->nsp == 2 && ox_sgemm_is_fast() && g->k[1] == 3 && g->d[1] == 1 && g->s[1] == 2 &&
           g->pb[1] <= 2 && g->out[1] >= 48 && g->in[1] < INT32_MAX / 2;
}

/* The loads' masks of the group of outputs from o0 (columns from c0): the four loads of each
 * vector, columns outside the row and vectors past OW masked out. */
static void dw_s2_masks(int64_t o0, int64_t OW, int64_t c0, int64_t W, __mmask16 m[16]) {
    for (int v = 0; v < 4; v++) {
        int64_t c = c0 + 32 * v;
        bool in = o0 + 16 * v < OW;
        m[4 * v] = in ? cols_in(c, W) : 0;
        m[4 * v + 1] = in ? cols_in(c + 16, W) : 0;
        m[4 * v + 2] = in ? cols_in(c + 2, W) : 0;
        m[4 * v + 3] = in ? cols_in(c + 18, W) : 0;
    }
}

/* 64 outputs of a row from the nkh window rows inside the input (xr: the first of them at
 * the group's first column, rstep floats apart; w: their taps); m: the loads' masks (all
 * ones for groups inside the row, a constant, so that the loads are plain). */
__attribute__((target("avx512f"), always_inline)) static inline void
dw_s2_group(const float *xr, int64_t nkh, int64_t rstep, const float *w, const __mmask16 m[16],
            __m512 acc[4]) {
    const __m512i even = even_lanes16();
    const __m512i odd = odd_lanes16();
    for (int64_t r = 0; r < nkh; r++, xr += rstep, w += 3) {
        __m512 w0 = _mm512_set1_ps(w[0]), w1 = _mm512_set1_ps(w[1]), w2 = _mm512_set1_ps(w[2]);
        for (int v = 0; v < 4; v++) { /* unrolled: the sums stay in registers */
            const float *q = xr + 32 * v;
            const __mmask16 *mv = m + 4 * v;
            __m512 a = _mm512_maskz_loadu_ps(mv[0], q), b = _mm512_maskz_loadu_ps(mv[1], q + 16);
            __m512 e = _mm512_maskz_loadu_ps(mv[2], q + 2);
            __m512 f = _mm512_maskz_loadu_ps(mv[3], q + 18);
            acc[v] = _mm512_fmadd_ps(w0, _mm512_permutex2var_ps(a, even, b), acc[v]);
            acc[v] = _mm512_fmadd_ps(w1, _mm512_permutex2var_ps(a, odd, b), acc[v]);
            acc[v] = _mm512_fmadd_ps(w2, _mm512_permutex2var_ps(e, even, f), acc[v]);
        }
    }
}

__attribute__((target("avx512f"))) static void depthwise2d_s2_rows(const float *x, const float *w,
                                                                   float *y, const struct geom *g,
                                                                   float bias, const float *z,
                                                                   float lo, float hi, bool silu) {
    static const __mmask16 full[16] = {0xFFFF, 0xFFFF, 0xFFFF, 0xFFFF, 0xFFFF, 0xFFFF,
                                       0xFFFF, 0xFFFF, 0xFFFF, 0xFFFF, 0xFFFF, 0xFFFF,
                                       0xFFFF, 0xFFFF, 0xFFFF, 0xFFFF};
    int64_t H = g->in[0], W = g->in[1], OH = g->out[0], OW = g->out[1], KH = g->k[0];
    int64_t SH = g->s[0], DH = g->d[0], PT = g->pb[0], PL = g->pb[1];
    __m512 vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi), vb = _mm512_set1_ps(bias);
    /* masks of rows up to 8 groups wide computed once (the same for every row); wider rows
     * compute them per group at their ends */
    int64_t groups = (OW + 63) / 64;
    __mmask16 masks[8][16];
    for (int64_t gi = 0; gi < groups && groups <= 8; gi++)
        dw_s2_masks(gi * 64, OW, gi * 128 - PL, W, masks[gi]);
    for (int64_t oh = 0; oh < OH; oh++) {
        int64_t kh0, nkh = taps_inside(oh * SH - PT, KH, DH, H, &kh0);
        const float *xr = x + (oh * SH - PT + kh0 * DH) * W, *wr = w + kh0 * 3;
        const float *zr = z ? z + oh * OW : NULL;
        float *yr = y + oh * OW;
        for (int64_t o0 = 0; o0 < OW; o0 += 64) {
            int64_t c0 = 2 * o0 - PL; /* the group's first column; its last: c0 + 129 */
            __m512 acc[4] = {vb, vb, vb, vb};
            if (o0 + 64 <= OW && c0 >= 0 && c0 + 129 < W) {
                dw_s2_group(xr + c0, nkh, DH * W, wr, full, acc);
            } else if (groups <= 8) {
                dw_s2_group(xr + c0, nkh, DH * W, wr, masks[o0 / 64], acc);
            } else {
                __mmask16 m[16];
                dw_s2_masks(o0, OW, c0, W, m);
                dw_s2_group(xr + c0, nkh, DH * W, wr, m, acc);
            }
            for (int v = 0; v < 4 && o0 + 16 * v < OW; v++) {
                int64_t o = o0 + 16 * v;
                __mmask16 mo = tail_mask16(OW - o);
                dw_store16(acc[v], mo, zr ? zr + o : NULL, yr + o, vlo, vhi, silu);
            }
        }
    }
}

/* Unit u of a tiled kernel (image u / blocks, block u % blocks of 16 channels of C): its
 * first channel c0, its cn channels, and the plane index ch of channel c0 in the batch. */
static void channel_block(int64_t u, int64_t C, int64_t *c0, int64_t *cn, int64_t *ch) {
    int64_t ng = (C + 15) / 16;
    *c0 = u % ng * 16;
    *cn = C - *c0 < 16 ? C - *c0 : 16;
    *ch = u / ng * C + *c0;
}

/* Stems: convolutions of few input channels with stride 2 across (3 -> 32 3x3/2 in
 * MobileNet and EfficientNet, 3 -> 64 7x7/2 in ResNet, 3x3/2 unpadded in SqueezeNet). As a
 * GEMM their depth is only C KH KW (27, 147), and the patches of a 3-channel image are as
 * large as the output; directly, 16 output pixels of a row (a vector) meet 16 output
 * channels (16 sums in registers): each tap's 16 inputs are the even or odd lanes of two
 * loads (columns c + 2j .. c + 2j + 31, masked outside the row), and each is multiplied by
 * the 16 channels' weights (broadcast from a [channel group][c][kh][kw][16] copy made per
 * run, zeros past M). Then bias, residual and activation as they are stored, pixels past
 * the row masked. The kernel takes any window up to 7 wide, but it is used where it was
 * measured faster: 3 wide, up to 32 output channels (MobileNet's and EfficientNet's 3 -> 32
 * 3x3/2 stem alone: 0.22 -> 0.17 ms on 1 thread, 0.22 -> 0.115 on 2, where the GEMM of depth
 * 27 gained nothing from the second thread); with 64 channels the GEMM was faster
 * (SqueezeNet's 3 -> 64 3x3/2: 0.21 against 0.24 ms on 2 threads; ResNet's 7x7/2, 236 MFLOP
 * at the sgemm's rate either way: 1.42 against 1.46 ms on 1). */
#define STEM_MAX_C 4
#define STEM_MAX_M 32
static bool conv_stem_fits(const struct geom *g, int64_t C, int64_t M, int64_t group) {
    return g->nsp == 2 && ox_sgemm_is_fast() && group == 1 && C <= STEM_MAX_C && M <= STEM_MAX_M &&
           g->k[1] == 3 && g->s[1] == 2 && g->d[1] == 1 && g->pb[1] <= 3 && g->out[1] >= 16 &&
           g->in[1] < INT32_MAX / 2;
}

/* Floats of the weights' copy: whole groups of 16 channels. */
static int64_t stem_weight_floats(const struct geom *g, int64_t C, int64_t M) {
    return (M + 15) / 16 * C * g->k_size * 16;
}

struct stem_job {
    const struct geom *g;
    const float *x, *wp, *bias, *z;
    float *y;
    int64_t C, M;
    float lo, hi;
    bool silu;
};

__attribute__((target("avx512f"), always_inline)) static inline void
stem_row(const struct stem_job *j, int64_t n, int64_t oh, int64_t KW) {
    const struct geom *g = j->g;
    int64_t H = g->in[0], W = g->in[1], OW = g->out[1], KH = g->k[0], SH = g->s[0];
    int64_t DH = g->d[0], PT = g->pb[0], PL = g->pb[1], C = j->C, M = j->M, os = g->out_size;
    const __m512i even = even_lanes16();
    const __m512i odd = odd_lanes16();
    __m512 vlo = _mm512_set1_ps(j->lo), vhi = _mm512_set1_ps(j->hi);
    int64_t kh0, nkh = taps_inside(oh * SH - PT, KH, DH, H, &kh0);
    const float *xn = j->x + n * C * H * W;
    for (int64_t ow0 = 0; ow0 < OW; ow0 += 16) {
        int64_t c0 = 2 * ow0 - PL; /* the first column of pixel ow0's window */
        __mmask16 ml[4], mh[4];    /* the loads at columns c0 + 2i and c0 + 2i + 16 */
        for (int i = 0; 2 * i < KW; i++)
            ml[i] = cols_in(c0 + 2 * i, W), mh[i] = cols_in(c0 + 2 * i + 16, W);
        __mmask16 mo = tail_mask16(OW - ow0);
        for (int64_t m0 = 0; m0 < M; m0 += 16) {
            /* 16 named sums: as an array, GCC kept them in memory across the rows' loop */
#define STEM_16(X)                                                                                 \
    X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15)
#define STEM_INIT(m) __m512 acc##m = _mm512_setzero_ps();
#define STEM_FMA(m)  acc##m = _mm512_fmadd_ps(_mm512_set1_ps(wt[m]), t, acc##m);
#define STEM_STORE(m)                                                                              \
    if (m0 + (m) < M) {                                                                            \
        int64_t o = (n * M + m0 + (m)) * os + oh * OW + ow0;                                       \
        __m512 v = j->bias ? _mm512_add_ps(acc##m, _mm512_set1_ps(j->bias[m0 + (m)])) : acc##m;    \
        dw_store16(v, mo, j->z ? j->z + o : NULL, j->y + o, vlo, vhi, j->silu);                    \
    }
            STEM_16(STEM_INIT)
            for (int64_t c = 0; c < C; c++)
                for (int64_t kh = kh0; kh < kh0 + nkh; kh++) {
                    const float *xr = xn + (c * H + oh * SH - PT + kh * DH) * W + c0;
                    const float *wk = j->wp + ((m0 / 16 * C + c) * KH + kh) * KW * 16;
#pragma GCC unroll 4
                    for (int i = 0; 2 * i < KW; i++) {
                        __m512 a = _mm512_maskz_loadu_ps(ml[i], xr + 2 * i);
                        __m512 b = _mm512_maskz_loadu_ps(mh[i], xr + 2 * i + 16);
                        __m512 t = _mm512_permutex2var_ps(a, even, b);
                        const float *wt = wk + 2 * i * 16;
                        STEM_16(STEM_FMA)
                        if (2 * i + 1 < KW) {
                            t = _mm512_permutex2var_ps(a, odd, b);
                            wt += 16;
                            STEM_16(STEM_FMA)
                        }
                    }
                }
            STEM_16(STEM_STORE)
#undef STEM_16
#undef STEM_INIT
#undef STEM_FMA
#undef STEM_STORE
        }
    }
}

__attribute__((target("avx512f"))) static void stem_piece(void *arg, int64_t b, int64_t e,
                                                          int tid) {
    (void)tid;
    const struct stem_job *j = arg;
    int64_t OH = j->g->out[0];
    for (int64_t u = b; u < e; u++) /* u = image * OH + output row; 3 wide (conv_stem_fits) */
        stem_row(j, u / OH, u % OH, 3);
}

/* The weights' copy for stem_row: [M / 16][C][KH][KW][16], zeros past M. */
static void stem_pack(const float *w, const struct geom *g, int64_t C, int64_t M, float *wp) {
    int64_t ks = g->k_size;
    for (int64_t m0 = 0; m0 < M; m0 += 16)
        for (int64_t c = 0; c < C; c++)
            for (int64_t k = 0; k < ks; k++)
                for (int64_t m = 0; m < 16; m++)
                    wp[((m0 / 16 * C + c) * ks + k) * 16 + m] =
                        m0 + m < M ? w[((m0 + m) * C + c) * ks + k] : 0.0f;
}

static void depthwise_tiled_piece(void *arg, int64_t b, int64_t e, int tid) {
    const struct conv_job *j = arg;
    const struct geom *g = j->g;
    for (int64_t u = b; u < e; u++) {
        int64_t c0, cn, ch;
        channel_block(u, j->C, &c0, &cn, &ch);
        int64_t xs = j->x_plane ? j->x_plane : g->in_size;
        int64_t ys = j->y_plane ? j->y_plane : g->out_size;
        depthwise2d_tiled(j->x + ch * xs, xs, j->w + c0 * g->k_size, j->b ? j->b + c0 : NULL,
                          j->y + ch * ys, ys, j->z ? j->z + ch * ys : NULL, cn, g, j->lo, j->hi,
                          j->silu, j->scratch + tid * j->slot);
    }
}
#endif

static void depthwise_piece(void *arg, int64_t b, int64_t e, int tid) {
    const struct conv_job *j = arg;
    const struct geom *g = j->g;
    int64_t xs = j->x_plane ? j->x_plane : g->in_size;
    int64_t ys = j->y_plane ? j->y_plane : g->out_size;
    for (int64_t ch = b; ch < e; ch++) { /* ch = image * C + channel */
        int64_t c = ch % j->C;
        float *y = j->y + ch * ys;
        const float *x = j->x + ch * xs, *z = j->z ? j->z + ch * ys : NULL;
#ifdef HAVE_DEPTHWISE_AVX512
        if (dw_s2_rows_fits(g)) { /* in place, no scratch (dw_slot) */
            depthwise2d_s2_rows(x, j->w + c * g->k_size, y, g, j->b ? j->b[c] : 0.0f, z, j->lo,
                                j->hi, j->silu);
            continue;
        }
        if (j->slot > 0) { /* the padded layout (the scratch was sized for it) */
            depthwise2d_padded(x, j->w + c * g->k_size, y, g, j->b ? j->b[c] : 0.0f, z, j->lo,
                               j->hi, j->silu, j->scratch + tid * j->slot,
                               ch + 1 < e ? x + xs : NULL);
            continue;
        }
        if (g->nsp == 2 && g->in_size < INT32_MAX / 2 && ox_sgemm_is_fast()) {
            depthwise2d_avx512(x, j->w + c * g->k_size, y, g, j->b ? j->b[c] : 0.0f, z, j->lo,
                               j->hi, j->silu);
            continue;
        }
#endif
        depthwise_float(x, j->w + c * g->k_size, y, g);
        float bv = j->b ? j->b[c] : 0.0f, lo = j->lo, hi = j->hi;
        for (int64_t p = 0; p < g->out_size; p++) { /* bias, residual, clamp (NaN kept) */
            float v = y[p] + bv;
            if (z) v += z[p];
            y[p] = ox_fused_act(v, lo, hi, j->silu);
        }
    }
}

/* Whether a depthwise convolution with slot floats of scratch per thread (dw_slot, or 0)
 * goes through the 16-channel tiles. */
static bool dw_tiled_path(const struct geom *g, int64_t slot) {
#ifdef HAVE_DEPTHWISE_AVX512
    return slot && dw_tiled_floats(g);
#else
    (void)g, (void)slot;
    return false;
#endif
}

/* The depthwise convolution of j (N images) over the pool: 16-channel tiles or one channel
 * at a time (depthwise_piece picks the kernel). */
static void depthwise_run(struct ox_pool *pool, struct conv_job *j, int64_t N, bool tiled) {
#ifdef HAVE_DEPTHWISE_AVX512
    if (tiled) {
        ox_parallel_for(pool, N * ((j->C + 15) / 16), depthwise_tiled_piece, j);
        return;
    }
#endif
    (void)tiled;
    ox_parallel_for(pool, N * j->C, depthwise_piece, j);
}

static void conv_float(struct ox_pool *pool, struct conv_job *job, int64_t N, float *scratch) {
    struct conv_job j = *job;
    const struct geom *g = j.g;
    const float *x = j.x, *w = j.w, *b = j.b;
    float *y = j.y;
    int64_t C = j.C, M = j.M, group = j.group;
    j.scratch = scratch;
    j.slot = conv_slot(g, j.cg, j.mg);
    int T = ox_pool_size(pool);
    int64_t units = N * group, os = g->out_size;
    if (j.cg == 1 && j.mg == 1) {
        j.slot = j.dw_padded ? dw_slot(g) : 0;
        depthwise_run(pool, &j, N, dw_tiled_path(g, j.slot));
        job->epilogue_done = true;
        return;
    }
    if (T == 1 || units % T == 0 || units >= 4 * T) {
        ox_parallel_for(pool, units, conv_units_piece, &j);
        return;
    }
    for (j.unit = 0; j.unit < units; j.unit++) {
        if (os >= 64 * T) {
            ox_parallel_for(pool, (os + CONV_COL_BLOCK - 1) / CONV_COL_BLOCK, conv_cols_piece, &j);
            continue;
        }
        /* a narrow output: one patch matrix, its GEMM cut into row blocks */
        int64_t nn = j.unit / group, gr = j.unit % group;
        const float *xg = x + (nn * C + gr * j.cg) * g->in_size, *B = xg;
        float *yg = y + (nn * M + gr * j.mg) * os;
        if (!j.pointwise) {
            im2col_float(xg, g, 0, j.kdim, 0, os, os, scratch);
            B = scratch;
        }
        ox_sgemm(pool, false, false, j.mg, os, j.kdim, 1.0f, w + gr * j.mg * j.kdim, j.kdim, B, os,
                 0.0f, yg, os);
        conv_bias(yg, os, j.mg, 0, os, b ? b + gr * j.mg : NULL);
    }
}

/* ---- float convolution through the packed GEMM (AVX-512) ----------------------------- */

/* B of a convolution: its patches, read straight from the input (one group of one image). */
struct patch_src {
    const float *x;
    const struct geom *g;
};

#if defined(__x86_64__) && defined(__GNUC__)

/* Patches for columns [j0, j1) (one block, at most 32 output positions) of a 1-, 2- or 3-D
 * convolution. The output positions are rows along the last spatial dim (the others, the
 * leading dims, numbered together); the block is cut into runs along those rows; for each
 * patch row (channel, tap) a run is one masked load (stride 1) or gather (other strides) of
 * up to 16 inputs, the lanes whose tap falls in the padding masked to zero, and a run whose
 * tap falls outside a leading dim is zero. */
__attribute__((target("avx512f"))) static void pack_patches_rows(const float *x,
                                                                 const struct geom *g, int64_t k0,
                                                                 int64_t k1, int64_t j0, int64_t j1,
                                                                 float *dst) {
    int L = g->nsp - 1; /* the last spatial dim; dims [0, L) are the leading ones */
    int64_t W = g->in[L], OW = g->out[L], SW = g->s[L], DW = g->d[L], PL = g->pb[L];
    struct run {
        int off, len;
        int64_t lead[MAX_SP]; /* input position in each leading dim of the tap at 0 */
        int64_t iw0;          /* input column of the first lane's tap at 0 */
    } runs[2 * OX_GEMM_NR];
    int n_runs = 0;
    for (int64_t p = j0; p < j1;) {
        int64_t row = p / OW, ow = p % OW, len = OW - ow < j1 - p ? OW - ow : j1 - p;
        int64_t lead[MAX_SP] = {0};
        for (int i = L - 1; i >= 0; i--) {
            lead[i] = row % g->out[i] * g->s[i] - g->pb[i];
            row /= g->out[i];
        }
        for (int64_t t = 0; t < len; t += 16) { /* runs of at most 16 lanes */
            struct run *ru = &runs[n_runs++];
            ru->off = (int)(p - j0 + t);
            ru->len = (int)(len - t < 16 ? len - t : 16);
            memcpy(ru->lead, lead, sizeof lead);
            ru->iw0 = (ow + t) * SW - PL;
        }
        p += len;
    }
    __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    __m512i step = _mm512_mullo_epi32(lane, _mm512_set1_epi32((int)SW));
    __m512i wv = _mm512_set1_epi32((int)W); /* unsigned compare: negative columns fail too */
    __m512i sixteen = _mm512_set1_epi32(16), even = _mm512_add_epi32(lane, lane);
    int64_t tap[MAX_SP], c = k0 / g->k_size, rem = k0 % g->k_size;
    for (int i = L; i >= 0; i--) tap[i] = rem % g->k[i], rem /= g->k[i];
    for (int64_t r = k0; r < k1; r++, dst += OX_GEMM_NR) {
        const float *xc = x + c * g->in_size;
        _mm512_store_ps(dst, _mm512_setzero_ps());
        _mm512_store_ps(dst + 16, _mm512_setzero_ps());
        for (int i = 0; i < n_runs; i++) {
            const struct run *ru = &runs[i];
            int64_t in_row = 0;
            bool inside = true;
            for (int d = 0; d < L && inside; d++) {
                int64_t v = ru->lead[d] + tap[d] * g->d[d];
                inside = v >= 0 && v < g->in[d];
                in_row = in_row * g->in[d] + v;
            }
            if (!inside) continue;
            const float *xr = xc + in_row * W;
            int64_t iw = ru->iw0 + tap[L] * DW;
            /* lanes t < len with 0 <= iw + t * SW < W (no division in this loop) */
            __m512i iwv = _mm512_add_epi32(step, _mm512_set1_epi32((int)iw));
            __mmask16 m = _mm512_cmplt_epu32_mask(iwv, wv) & (__mmask16)((1u << ru->len) - 1);
            if (!m) continue;
            __m512 v;
            _mm_prefetch((const char *)(xr + iw + 2 * g->in_size), _MM_HINT_T0);
            if (SW == 1) {
                v = _mm512_maskz_loadu_ps(m, xr + iw); /* masked lanes never fault */
            } else if (SW == 2) {                      /* two loads, even lanes kept */
                __m512i pos = _mm512_add_epi32(lane, _mm512_set1_epi32((int)iw));
                __mmask16 ma = _mm512_cmplt_epu32_mask(pos, wv);
                __mmask16 mb = _mm512_cmplt_epu32_mask(_mm512_add_epi32(pos, sixteen), wv);
                v = _mm512_maskz_permutex2var_ps(m, _mm512_maskz_loadu_ps(ma, xr + iw), even,
                                                 _mm512_maskz_loadu_ps(mb, xr + iw + 16));
            } else {
                v = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, iwv, xr, 4);
            }
            _mm512_mask_storeu_ps(dst + ru->off, (__mmask16)((1u << ru->len) - 1), v);
        }
        for (int i = L; i >= 0; i--) { /* the next tap; after the last, the next channel */
            if (++tap[i] < g->k[i]) break;
            tap[i] = 0;
            if (i == 0) c++;
        }
    }
}
#endif

static void pack_patches(const struct ox_gemm_b *b, int64_t k0, int64_t k1, int64_t j0, int64_t j1,
                         float *dst) {
    const struct patch_src *ps = b->ctx;
#if defined(__x86_64__) && defined(__GNUC__)
    /* gathers index with 32-bit lanes: images below 2^31 elements per channel row */
    if (ps->g->in_size < INT32_MAX / 2) {
        pack_patches_rows(ps->x, ps->g, k0, k1, j0, j1, dst);
        return;
    }
#endif
    im2col_float(ps->x, ps->g, k0, k1, j0, j1, OX_GEMM_NR, dst);
    if (j1 - j0 < OX_GEMM_NR)
        for (int64_t k = 0; k < k1 - k0; k++)
            memset(dst + k * OX_GEMM_NR + (j1 - j0), 0,
                   sizeof(float) * (size_t)(OX_GEMM_NR - (j1 - j0)));
}

/* What pack_conv_weights makes its panels from. */
static struct ox_prep_key conv_weights_key(const struct conv_job *f) {
    int64_t trim = 0; /* which taps a trimmed convolution keeps: its first ones, and count */
    for (int i = 0; f->g_full && i < f->g->nsp; i++)
        trim = (trim << 10 | f->klo[i]) << 10 | f->g->k[i];
    return (struct ox_prep_key){f->w, {f->group, f->mg, f->kdim, trim}};
}

/* The weights of a trimmed convolution's live taps, [M, cg, k'...], into f->slice. */
static void slice_conv_weights(const struct conv_job *f) {
    const struct geom *g = f->g, *full = f->g_full;
    int L = g->nsp - 1;
    float *dst = f->slice;
    for (int64_t mc = 0; mc < f->M * f->cg; mc++) {
        const float *src = f->w + mc * full->k_size;
        int64_t tap[MAX_SP] = {0};
        for (int64_t k = 0; k < g->k_size; k++) {
            int64_t off = 0;
            for (int i = 0; i <= L; i++) off = off * full->k[i] + f->klo[i] + tap[i];
            *dst++ = src[off];
            for (int i = L; i >= 0; i--) {
                if (++tap[i] < g->k[i]) break;
                tap[i] = 0;
            }
        }
    }
}

static void pack_conv_weights(void *dst, void *arg) {
    const struct conv_job *f = arg;
    const float *w = f->w;
    if (f->g_full) {
        slice_conv_weights(f);
        w = f->slice;
    }
    int64_t per = ox_sgemm_packed_a_floats(f->mg, f->kdim);
    for (int64_t gr = 0; gr < f->group; gr++)
        ox_sgemm_pack_a(w + gr * f->mg * f->kdim, f->kdim, false, f->mg, f->kdim,
                        (float *)dst + gr * per);
    ox_release_pages(f->w, sizeof(float) *
                               (size_t)(f->M * f->cg * (f->g_full ? f->g_full : f->g)->k_size));
}

#if defined(__x86_64__) && defined(__GNUC__)
/* Output channels [m0, m1) of one direct unit from the wide layout (rows of Wq, OW used)
 * into y (rows of OW), adding the residual z and applying the clamp or SiLU when post is set. */
__attribute__((target("avx512f"))) static void direct_store(const float *wide, int64_t wq, float *y,
                                                            const struct geom *g, int64_t m0,
                                                            int64_t m1, const float *z, float lo,
                                                            float hi, bool silu, bool post) {
    int64_t OH = g->out[0], OW = g->out[1];
    __m512 vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
    for (int64_t m = m0; m < m1; m++)
        for (int64_t oh = 0; oh < OH; oh++) {
            const float *s = wide + (m * OH + oh) * wq;
            float *d = y + (m * OH + oh) * OW;
            const float *zr = z ? z + (m * OH + oh) * OW : NULL;
            for (int64_t ow = 0; ow < OW; ow += 16) {
                __mmask16 k = tail_mask16(OW - ow);
                __m512 v = _mm512_maskz_loadu_ps(k, s + ow);
                if (post) {
                    if (zr) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(k, zr + ow));
                    v = silu ? silu16(v) : _mm512_min_ps(vhi, _mm512_max_ps(vlo, v));
                }
                _mm512_mask_storeu_ps(d + ow, k, v);
            }
        }
}

/* Channels [c0, c1) of one unit's input as zero-padded phases (see direct_geom). Phases no
 * tap reads are left alone. */
static void direct_phases(const float *x, const struct geom *g, int64_t c0, int64_t c1, float *xp) {
    struct direct_geom d = direct_geom(g);
    int64_t H = g->in[0], W = g->in[1], PT = g->pb[0], PL = g->pb[1], SH = g->s[0], SW = g->s[1];
    for (int64_t c = c0; c < c1; c++)
        for (int64_t ph = 0; ph < SH; ph++)
            for (int64_t pw = 0; pw < SW; pw++) {
                bool used_h = false, used_w = false;
                for (int64_t kh = 0; kh < g->k[0]; kh++) used_h |= kh * g->d[0] % SH == ph;
                for (int64_t kw = 0; kw < g->k[1]; kw++) used_w |= kw * g->d[1] % SW == pw;
                if (!used_h || !used_w) continue;
                float *P = xp + ((c * SH + ph) * SW + pw) * d.phase;
                const float *xc = x + c * H * W;
                /* columns q whose input column q SW + pw - PL lies in [0, W) */
                int64_t q_lo = PL - pw <= 0 ? 0 : (PL - pw + SW - 1) / SW;
                int64_t q_hi = W + PL - pw <= 0 ? 0 : (W + PL - pw + SW - 1) / SW;
                if (q_hi > d.wq) q_hi = d.wq;
                if (q_lo > q_hi) q_lo = q_hi;
                for (int64_t r = 0; r < d.hq; r++) {
                    float *row = P + r * d.wq;
                    int64_t ih = r * SH + ph - PT;
                    if (ih < 0 || ih >= H) {
                        memset(row, 0, sizeof(float) * (size_t)d.wq);
                        continue;
                    }
                    const float *src = xc + ih * W + (q_lo * SW + pw - PL);
                    memset(row, 0, sizeof(float) * (size_t)q_lo);
                    if (SW == 1)
                        memcpy(row + q_lo, src, sizeof(float) * (size_t)(q_hi - q_lo));
                    else
                        for (int64_t q = q_lo; q < q_hi; q++) row[q] = src[(q - q_lo) * SW];
                    memset(row + q_hi, 0, sizeof(float) * (size_t)(d.wq - q_hi));
                }
            }
}

/* The row offsets of the patch matrix into the phases, and the zeros after them. */
static void direct_offsets(const struct geom *g, int64_t cg, float *xp, int32_t *offs) {
    struct direct_geom d = direct_geom(g);
    int64_t SH = g->s[0], SW = g->s[1], i = 0;
    int64_t end = cg * SH * SW * d.phase;
    memset(xp + end, 0, sizeof(float) * (size_t)(direct_phases_floats(g, cg) - end));
    for (int64_t c = 0; c < cg; c++)
        for (int64_t kh = 0; kh < g->k[0]; kh++)
            for (int64_t kw = 0; kw < g->k[1]; kw++) {
                int64_t th = kh * g->d[0], tw = kw * g->d[1];
                offs[i++] = (int32_t)(((c * SH + th % SH) * SW + tw % SW) * d.phase +
                                      th / SH * d.wq + tw / SW);
            }
}

struct direct_job {
    const struct conv_job *f;
    const float *x, *z;
    float *xp, *wide, *y;
    bool post;
};

static void direct_phases_piece(void *arg, int64_t b, int64_t e, int tid) {
    (void)tid;
    const struct direct_job *j = arg;
    direct_phases(j->x, j->f->g, b, e, j->xp);
}

static void direct_store_piece(void *arg, int64_t b, int64_t e, int tid) {
    (void)tid;
    const struct direct_job *j = arg;
    const struct conv_job *f = j->f;
    direct_store(j->wide, direct_geom(f->g).wq, j->y, f->g, b, e, j->z, f->lo, f->hi, f->silu,
                 j->post);
}
#endif

/* A pointwise convolution with few output channels reads its input in place (rows of B
 * os floats apart) instead of packing it: with at most 4 panels of weights, each packed
 * block of B would be used at most 4 times, and packing took as long as the products
 * (mobilenet_v2's 32 -> 16 channel layer at 112x112: 0.103 -> 0.086 ms). */
#define PW_INPLACE_MAX_K 512
static bool pw_in_place(const struct conv_job *f) {
    return f->pointwise && f->mg <= 4 * OX_GEMM_MR && f->kdim <= PW_INPLACE_MAX_K &&
           f->kdim * f->g->out_size < INT32_MAX;
}

static void fast_conv_unit(const struct conv_job *f, int64_t u, struct ox_pool *pool, int tid) {
    const struct geom *g = f->g;
    int64_t nn = u / f->group, gr = u % f->group, os = g->out_size;
    const float *xg = f->x + (nn * f->C + gr * f->cg) * g->in_size;
    struct patch_src ps = {xg, g};
    struct ox_gemm_b b = {.pack = pack_patches, .ctx = &ps};
    if (f->pointwise) b = (struct ox_gemm_b){.pack = ox_gemm_b_pack_matrix, .data = xg, .ld = os};
    int64_t yo = (nn * f->M + gr * f->mg) * os;
    struct ox_epilogue ep = {.bias_row = f->b ? f->b + gr * f->mg : NULL,
                             .residual = f->z ? f->z + yo : NULL,
                             .ld_residual = os,
                             .lo = f->lo,
                             .hi = f->hi,
                             .silu = f->silu};
    const float *wpk = f->packed_w + gr * ox_sgemm_packed_a_floats(f->mg, f->kdim);
#if defined(__x86_64__) && defined(__GNUC__)
    if (f->slot) { /* B read in place from the padded phases (direct_geom) */
        int64_t nq = g->out[0] * direct_geom(g).wq;
        float *xp = f->scratch + tid * f->slot, *wide = xp + direct_phases_floats(g, f->cg);
        int32_t *offs = (int32_t *)(wide + direct_wide_floats(g, f->mg));
        /* the residual's layout is y's: added (then the clamp) when the block is stored */
        struct direct_job dj = {f, xg, f->z ? f->z + yo : NULL, xp, wide, f->y + yo, f->z != NULL};
        if (pool && f->cg > 1)
            ox_parallel_for(pool, f->cg, direct_phases_piece, &dj);
        else
            direct_phases(xg, g, 0, f->cg, xp);
        direct_offsets(g, f->cg, xp, offs);
        b = (struct ox_gemm_b){.data = xp, .offs = offs};
        if (dj.post)
            ep = (struct ox_epilogue){.bias_row = ep.bias_row, .lo = -INFINITY, .hi = INFINITY};
        ox_sgemm_packed(pool, wpk, f->mg, nq, f->kdim, &b, wide, nq, &ep, false);
        if (pool && f->mg > 1)
            ox_parallel_for(pool, f->mg, direct_store_piece, &dj);
        else
            direct_store_piece(&dj, 0, f->mg, 0);
        return;
    }
#endif
    (void)tid;
    int32_t offs[PW_INPLACE_MAX_K];
    if (pw_in_place(f)) { /* B read in place: row k of the input is channel k */
        for (int64_t k = 0; k < f->kdim; k++) offs[k] = (int32_t)(k * os);
        b = (struct ox_gemm_b){.data = xg, .offs = offs};
    }
    ox_sgemm_packed(pool, wpk, f->mg, os, f->kdim, &b, f->y + yo, os, &ep, false);
}

static void fast_conv_units(void *arg, int64_t b, int64_t e, int tid) {
    for (int64_t u = b; u < e; u++) fast_conv_unit(arg, u, NULL, tid);
}

/* Packed weights: prepared once when W is constant, else packed into scratch. */
static void conv_float_fast(struct ox_kernel_ctx *ctx, struct conv_job *job, int64_t N) {
    struct conv_job f = *job;
    int64_t group = f.group;
    f.scratch = ctx->scratch;
    if (f.g_full) { /* trimmed: the live taps' weights first (infer sized it) */
        f.slice = f.scratch;
        f.scratch += (f.M * f.kdim + 15) / 16 * 16;
    }
    struct ox_prep_key key = conv_weights_key(&f);
    if (!(f.packed_w = ox_kernel_prepared(ctx, pack_conv_weights, &f, &key))) {
        pack_conv_weights(ctx->scratch, &f);
        f.packed_w = ctx->scratch;
        f.scratch += group * ox_sgemm_packed_a_floats(f.mg, f.kdim);
    }
    f.slot = direct_slot(f.g, f.cg, f.mg); /* infer sized the scratch for one per thread */
    job->epilogue_done = true;
    int T = ox_pool_size(ctx->pool);
    int64_t units = N * group;
    if (T > 1 && (units % T == 0 || units >= 4 * T)) {
        ox_parallel_for(ctx->pool, units, fast_conv_units, &f);
        return;
    }
    for (int64_t u = 0; u < units; u++) fast_conv_unit(&f, u, ctx->pool, 0);
}

/* A stem (stem_row): the weights' copy in scratch, rows of the output over the pool. */
static void conv_float_stem(struct ox_kernel_ctx *ctx, struct conv_job *f, int64_t N) {
#ifdef HAVE_DEPTHWISE_AVX512
    float *wp = ctx->scratch;
    stem_pack(f->w, f->g, f->C, f->M, wp);
    struct stem_job j = {.g = f->g,
                         .x = f->x,
                         .wp = wp,
                         .bias = f->b,
                         .z = f->z,
                         .y = f->y,
                         .C = f->C,
                         .M = f->M,
                         .lo = f->lo,
                         .hi = f->hi,
                         .silu = f->silu};
    ox_parallel_for(ctx->pool, N * f->g->out[0], stem_piece, &j);
    f->epilogue_done = true;
#else
    (void)ctx, (void)f, (void)N;
#endif
}

/* The Winograd form: the transformed weights prepared once when W is constant, else made
 * in scratch ahead of the convolution's own. */
static void pack_wino_weights(void *dst, void *arg) {
    const struct conv_job *f = arg;
    ox_wino_pack_weights(f->w, f->C, f->M, dst);
    ox_release_pages(f->w, sizeof(float) * (size_t)(f->M * f->kdim));
}

static void conv_float_wino(struct ox_kernel_ctx *ctx, struct conv_job *job,
                            const struct ox_wino *wg) {
    float *scratch = ctx->scratch;
    struct ox_prep_key key = {job->w, {job->C, job->M, 0, 0}};
    const float *pw = ox_kernel_prepared(ctx, pack_wino_weights, job, &key);
    if (!pw) {
        pack_wino_weights(scratch, job);
        pw = scratch;
        scratch += ox_wino_weight_floats(wg->C, wg->M);
    }
    ox_wino_conv(ctx->pool, wg, job->x, pw, job->b, job->z, job->lo, job->hi, job->silu, job->y,
                 scratch);
    job->epilogue_done = true;
}

static void to_float(const ox_tensor *t, float *dst) {
    const uint16_t *s = t->data;
    int64_t n = ox_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) dst[i] = ox_half_to_float(s[i]);
}

/* y = clamp(conv(x, w) + b + z, lo, hi), with z NULL or of y's shape: in the kernels'
 * epilogues where the path has one, in a pass over y after it otherwise. */
static ox_status conv_exec(struct ox_kernel_ctx *ctx, const struct ox_node *n, const ox_tensor *x,
                           const ox_tensor *w, const ox_tensor *b, ox_tensor *y, const ox_tensor *z,
                           float lo, float hi, bool silu) {
    struct geom g;
    int64_t group;
    ox_status st = conv_setup(n, x, w, &g, &group);
    if (st) return st;
    if (ox_tensor_numel(y) == 0) return OX_OK; /* no output channels, or no batch */
    int64_t N = x->dims[0], C = x->dims[1], M = w->dims[0];
    bool done = false;
    if (x->dtype == OX_FLOAT) {
        struct conv_job j =
            conv_job_make(x->data, w->data, b ? b->data : NULL, y->data, &g, C, M, group);
        j.z = z ? z->data : NULL;
        j.lo = lo;
        j.hi = hi;
        j.silu = silu;
        j.dw_padded = true; /* infer sized the scratch for it */
        struct ox_wino wg;
        struct geom gt;
        /* constant weights (prepared: infer saw them constant) with dead taps: trimmed */
        if (conv_is_fast(C / group, M / group) && ctx->prepared && conv_trim(&g, &gt, j.klo)) {
            j.g_full = &g;
            j.g = &gt;
            j.kdim = j.cg * gt.k_size;
            j.pointwise = conv_is_pointwise(&gt);
            conv_float_fast(ctx, &j, N);
        } else if (conv_stem(&g, C, M, group))
            conv_float_stem(ctx, &j, N);
        else if (conv_wino(ctx->precise, &g, N, C, M, group, &wg))
            conv_float_wino(ctx, &j, &wg);
        else if (conv_is_fast(C / group, M / group))
            conv_float_fast(ctx, &j, N);
        else
            conv_float(ctx->pool, &j, N, ctx->scratch);
        done = j.epilogue_done;
    } else if (x->dtype == OX_DOUBLE) {
        conv_double(x->data, w->data, b ? b->data : NULL, y->data, &g, N, C, M, group,
                    ctx->scratch);
    } else { /* float16: compute in float, round on store */
        int64_t nx = ox_tensor_numel(x), nw = ox_tensor_numel(w), ny = ox_tensor_numel(y);
        float *col = ctx->scratch;
        float *fx = col + conv_slot(&g, C / group, M / group) * ox_pool_size(ctx->pool);
        float *fw = fx + nx, *fy = fw + nw, *fb = fy + ny;
        to_float(x, fx);
        to_float(w, fw);
        if (b) to_float(b, fb);
        struct conv_job j = conv_job_make(fx, fw, b ? fb : NULL, fy, &g, C, M, group);
        conv_float(ctx->pool, &j, N, col);
        uint16_t *yh = y->data;
        for (int64_t i = 0; i < ny; i++) yh[i] = ox_float_to_half(fy[i]);
    }
    if (!done && (z || silu || lo > -INFINITY || hi < INFINITY))
        return ox_fused_post(n, y, z, y, lo, hi, silu);
    return OX_OK;
}

ox_status ox_nn_cpu_conv(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                         const ox_tensor *const *in, ox_tensor *const *out) {
    return conv_exec(ctx, n, in[0], in[1], ox_in(n, in, 2), out[0], NULL, -INFINITY, INFINITY,
                     false);
}

/* FusedConv (ai.onnxexec, made by graph/optimize.c): Conv's inputs and attributes, then Z
 * (a residual added to the output, broadcast as Add does), then the activation. */
ox_status ox_nn_infer_fused_conv(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                 const ox_tensor *const *in, ox_tensor *const *out) {
    ox_status st = ox_nn_infer_conv(ctx, n, in, out);
    if (st) return st;
    return ox_fused_infer(ctx, n, ox_in(n, in, 3), out[0]);
}

ox_status ox_nn_cpu_fused_conv(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                               const ox_tensor *const *in, ox_tensor *const *out) {
    float lo, hi;
    ox_fused_clamp(n, &lo, &hi);
    bool silu = ox_fused_silu(n);
    const ox_tensor *z = ox_in(n, in, 3);
    ox_tensor tmp;
    struct ox_kernel_ctx bc;
    if (!ox_fused_split(ctx, n, in, z, ox_nn_infer_conv, &tmp, &bc)) {
        if (!z || ox_same_shape(z, out[0]))
            return conv_exec(ctx, n, in[0], in[1], ox_in(n, in, 2), out[0], z, lo, hi, silu);
        /* Z broadcasts into the output: added after, in one pass with the clamp */
        ox_status st = conv_exec(ctx, n, in[0], in[1], ox_in(n, in, 2), out[0], NULL, -INFINITY,
                                 INFINITY, false);
        return st ? st : ox_fused_post(n, out[0], z, out[0], lo, hi, silu);
    }
    /* Z broadcasts the output to a larger shape: the conv goes to scratch first */
    ox_status st =
        conv_exec(&bc, n, in[0], in[1], ox_in(n, in, 2), &tmp, NULL, -INFINITY, INFINITY, false);
    return st ? st : ox_fused_post(n, &tmp, z, out[0], lo, hi, silu);
}

/* ---- a pointwise convolution and the depthwise one that reads it, as one kernel -------- */

/* MobileNet's and EfficientNet's blocks widen the channels with a 1x1 convolution (16 -> 96
 * at 112x112: 4.8 MB) that only the next, depthwise, convolution reads. Run apart, that
 * tensor is written to memory and read back; here the CPU plan (executor/plan.c) runs the
 * pair as one step: each thread takes bands of the depthwise output's rows and computes the
 * widened rows those need into its own scratch (the packed GEMM, one thread, its bias and
 * activation in the epilogue), then the depthwise rows from there, while they are in cache.
 * Consecutive bands share the rows their windows overlap (kept, moved to the front, not
 * computed again). The widened tensor keeps its place in the arena, unwritten. */
struct pw_dw {
    struct geom gp, gd; /* the pointwise and the depthwise convolution */
    int64_t N, C1, C2;  /* images, input channels, widened channels */
    int64_t band;       /* depthwise output rows per band */
    int64_t rows;       /* widened rows a band can hold (its windows' extent) */
    int64_t t_floats;   /* per thread: the widened band, C2 planes of rows x W */
    int64_t dw_floats;  /* per thread: the depthwise path's scratch */
    bool tiled;         /* the depthwise path: 16-channel tiles, else one channel at a time */
};

/* Widened bands of up to 768 KiB (with the depthwise scratch, within L2's 1 MiB): in
 * mobilenet_v2 b1 on 2 threads the first three pairs took 0.55 / 0.42 / 0.25 ms with 192 KiB
 * bands, 0.46 / 0.35 / 0.18 with 768 KiB and 0.68 / 0.63 / 0.32 with 1.5 MiB (minima of
 * three interleaved runs; 0.70 / 0.44 / 0.29 apart). Pairs whose widened tensor is under
 * 1 MiB stay apart: with 256 KiB the 28x28 and 14x14 pairs joined too and mobilenet_v2 b1 on
 * 2 threads went from 4.84 to 5.64 ms (apart: 5.01). On one thread the pairs do not pay
 * (mobilenet_v2 b1 5.92 -> 6.00 ms, b8 47.6 -> 48.9; medians of five interleaved runs) and
 * stay apart: the gain on two is that each thread reads the widened rows it wrote, not
 * those the other one wrote (mobilenet_v2 b1 on 2 threads 4.60 -> 4.40 ms, medians of
 * seven). */
#define PW_DW_BAND_BYTES (768 << 10)
#define PW_DW_MIN_BYTES  (1 << 20)

static bool pw_dw_setup(const struct ox_node *pw, const ox_tensor *const *pin,
                        const ox_tensor *pout, const struct ox_node *dw,
                        const ox_tensor *const *din, const ox_tensor *dout, int n_threads,
                        struct pw_dw *f) {
#ifdef HAVE_DEPTHWISE_AVX512
    const ox_tensor *x = pin[0], *w1 = pin[1], *w2 = din[1];
    int64_t group;
    if (n_threads < 2 || !ox_sgemm_is_fast() || !x || !w1 || !w2 || x->dtype != OX_FLOAT ||
        x->rank != 4 || w1->dtype != OX_FLOAT || w2->dtype != OX_FLOAT || pout->dtype != OX_FLOAT ||
        dout->dtype != OX_FLOAT || ox_in(pw, pin, 3) || ox_in(dw, din, 3) || din[0] != pout)
        return false;
    if (conv_setup(pw, x, w1, &f->gp, &group) || group != 1 || !conv_is_pointwise(&f->gp))
        return false;
    if (conv_setup(dw, pout, w2, &f->gd, &group) || group != pout->dims[1] ||
        w2->dims[0] != group || f->gd.nsp != 2)
        return false;
    f->N = x->dims[0], f->C1 = x->dims[1], f->C2 = w1->dims[0];
    const struct geom *g = &f->gd;
    int64_t W = g->in[1], KH = g->k[0], SH = g->s[0], DH = g->d[0];
    if ((double)f->C2 * (double)g->in_size * 4 < PW_DW_MIN_BYTES || g->out[0] < 2) return false;
    int64_t per_row = f->C2 * W * 4;
    f->band = 1;
    while (f->band < g->out[0] && (f->band * SH + (KH - 1) * DH + 1) * per_row <= PW_DW_BAND_BYTES)
        f->band++;
    /* at least a band per thread: with fewer images than threads, bands are the only
     * pieces (a 28x28 map in one band would run on one thread) */
    int64_t per_image = (n_threads + f->N - 1) / f->N;
    if ((g->out[0] + f->band - 1) / f->band < per_image)
        f->band = (g->out[0] + per_image - 1) / per_image;
    f->rows = (f->band - 1) * SH + (KH - 1) * DH + 1;
    if (f->rows > g->in[0]) f->rows = g->in[0];
    f->t_floats = (f->C2 * f->rows * W + 15) / 16 * 16;
    struct geom gb = *g; /* a full band */
    gb.in[0] = f->rows;
    gb.out[0] = f->band;
    gb.in_size = f->rows * W;
    gb.out_size = f->band * g->out[1];
    /* the path conv_float takes for a full band, kept for every band (a shorter last band
     * could choose the tile where the scratch was sized for the padded copy) */
    f->dw_floats = dw_slot(&gb);
    f->tiled = dw_tiled_path(&gb, f->dw_floats);
    return f->rows * W < INT32_MAX / 16;
#else
    (void)pw, (void)pin, (void)pout, (void)dw, (void)din, (void)dout, (void)n_threads, (void)f;
    return false;
#endif
}

size_t ox_nn_pw_dw_scratch(const struct ox_node *pw, const ox_tensor *const *pin,
                           const ox_tensor *pout, const struct ox_node *dw,
                           const ox_tensor *const *din, const ox_tensor *dout, int n_threads) {
    struct pw_dw f;
    if (!pw_dw_setup(pw, pin, pout, dw, din, dout, n_threads, &f)) return 0;
    return (size_t)(f.t_floats + f.dw_floats) * 4 * (size_t)n_threads; /* 2+: pw_dw_setup */
}

#ifdef HAVE_DEPTHWISE_AVX512
struct pw_dw_job {
    const struct pw_dw *f;
    const float *x, *wpk, *b1, *w2, *b2;
    float *y, *scratch;
    float lo1, hi1, lo2, hi2;
    bool silu1, silu2;
};

/* Units [b, e): image u / bands, band u % bands, in order, so that a band finds the rows it
 * shares with the one before still in the thread's scratch. */
static void pw_dw_piece(void *arg, int64_t b, int64_t e, int tid) {
    const struct pw_dw_job *j = arg;
    const struct pw_dw *f = j->f;
    const struct geom *g = &f->gd;
    int64_t H = g->in[0], W = g->in[1], OH = g->out[0], OW = g->out[1], SH = g->s[0];
    int64_t KH = g->k[0], DH = g->d[0], PT = g->pb[0], bands = (OH + f->band - 1) / f->band;
    int64_t plane = f->rows * W; /* floats between the widened band's channel planes */
    float *t = j->scratch + tid * (f->t_floats + f->dw_floats), *dws = t + f->t_floats;
    int64_t t_lo = 0, t_hi = 0, t_img = -1; /* the input rows [t_lo, t_hi) of image t_img in t */
    struct ox_epilogue ep = {.bias_row = j->b1, .lo = j->lo1, .hi = j->hi1, .silu = j->silu1};
    for (int64_t u = b; u < e; u++) {
        int64_t n = u / bands, oh0 = u % bands * f->band;
        int64_t oh1 = oh0 + f->band < OH ? oh0 + f->band : OH;
        int64_t r0 = oh0 * SH - PT, r1 = (oh1 - 1) * SH - PT + (KH - 1) * DH + 1;
        int64_t lo = r0 > 0 ? r0 : 0, hi = r1 < H ? r1 : H;
        if (hi < lo) hi = lo;
        int64_t keep = 0; /* rows at the front of t already computed */
        if (t_img == n && t_hi > lo && lo >= t_lo) {
            keep = t_hi - lo;
            if (keep > hi - lo) keep = hi - lo;
            if (lo > t_lo)
                for (int64_t c = 0; c < f->C2; c++)
                    memmove(t + c * plane, t + c * plane + (lo - t_lo) * W,
                            sizeof(float) * (size_t)(keep * W));
        }
        if (hi - lo > keep) { /* the widened rows [lo + keep, hi) */
            struct ox_gemm_b bm = {.pack = ox_gemm_b_pack_matrix,
                                   .data = j->x + n * f->C1 * H * W + (lo + keep) * W,
                                   .ld = H * W};
            ox_sgemm_packed(NULL, j->wpk, f->C2, (hi - lo - keep) * W, f->C1, &bm, t + keep * W,
                            plane, &ep, false);
        }
        t_img = n, t_lo = lo, t_hi = hi;
        /* the depthwise rows [oh0, oh1) from rows [lo, hi): rows above lo are padding */
        struct geom gb = *g;
        gb.in[0] = hi - lo;
        gb.out[0] = oh1 - oh0;
        gb.pb[0] = lo - r0;
        gb.in_size = (hi - lo) * W;
        gb.out_size = (oh1 - oh0) * OW;
        struct conv_job dj = conv_job_make(t, j->w2, j->b2, j->y + n * f->C2 * OH * OW + oh0 * OW,
                                           &gb, f->C2, f->C2, f->C2);
        dj.lo = j->lo2, dj.hi = j->hi2, dj.silu = j->silu2;
        dj.x_plane = plane;
        dj.y_plane = OH * OW;
        dj.scratch = dws;
        dj.slot = f->dw_floats;
        depthwise_run(NULL, &dj, 1, f->tiled); /* this thread, its scratch */
    }
}
#endif

ox_status ox_nn_cpu_pw_dw(struct ox_kernel_ctx *ctx, const struct ox_node *pw,
                          const ox_tensor *const *pin, const ox_tensor *pout,
                          const struct ox_node *dw, const ox_tensor *const *din,
                          ox_tensor *const *dout) {
    struct pw_dw f;
    if (!pw_dw_setup(pw, pin, pout, dw, din, dout[0], ox_pool_size(ctx->pool), &f))
        return ox_node_err(pw, OX_E_INTERNAL, "the convolutions %s and %s cannot run as one",
                           pw->name, dw->name);
#ifdef HAVE_DEPTHWISE_AVX512
    struct conv_job pj =
        conv_job_make(pin[0]->data, pin[1]->data, NULL, NULL, &f.gp, f.C1, f.C2, 1);
    struct ox_prep_key key = conv_weights_key(&pj);
    const float *wpk = ox_kernel_prepared(ctx, pack_conv_weights, &pj, &key);
    if (!wpk) return ox_node_err(pw, OX_E_INTERNAL, "no packed weights for the fused pair");
    const ox_tensor *b1 = ox_in(pw, pin, 2), *b2 = ox_in(dw, din, 2);
    struct pw_dw_job j = {.f = &f,
                          .x = pin[0]->data,
                          .wpk = wpk,
                          .b1 = b1 ? b1->data : NULL,
                          .w2 = din[1]->data,
                          .b2 = b2 ? b2->data : NULL,
                          .y = dout[0]->data,
                          .scratch = ctx->scratch,
                          .silu1 = ox_fused_silu(pw),
                          .silu2 = ox_fused_silu(dw)};
    ox_fused_clamp(pw, &j.lo1, &j.hi1);
    ox_fused_clamp(dw, &j.lo2, &j.hi2);
    int64_t units = f.N * ((f.gd.out[0] + f.band - 1) / f.band);
    if (ox_tensor_numel(dout[0]) == 0) return OX_OK;
    ox_parallel_for_pieces(ctx->pool, units, 1, pw_dw_piece, &j);
    return OX_OK;
#else
    (void)ctx;
    return OX_E_INTERNAL;
#endif
}

/* ---- pooling --------------------------------------------------------------------------- */

enum { POOL_MAX, POOL_AVG, POOL_LP };

/* Taps t in [0, k) of a window that starts at `start` (dilation d) and land in [0, n): the
 * first in *lo, their count returned (0: none). The pooling kernels loop over these only: a
 * kernel_shape is an attribute, and one of 2 x 2097151 with SAME padding (its window mostly
 * padding) made a 3 x 32 x 32 AveragePool take 40 s (fuzz_e2e). */
static int64_t taps_inside(int64_t start, int64_t k, int64_t d, int64_t n, int64_t *lo) {
    int64_t a = start >= 0 ? 0 : (-start + d - 1) / d;
    int64_t b = start >= n ? 0 : (n - 1 - start) / d + 1;
    if (b > k) b = k;
    *lo = a;
    return b > a ? b - a : 0;
}

static ox_status pool_setup(const struct ox_node *n, const ox_tensor *x, struct geom *g) {
    const int64_t *ks;
    int nks = ox_attr_ints(n, "kernel_shape", &ks);
    if (nks < 0) return ox_node_err(n, OX_E_INVALID, "attribute kernel_shape is required");
    return geometry(n, x, ks, nks, true, g);
}

static bool pool_type_ok(ox_dtype dt, int kind) {
    if (dt == OX_FLOAT || dt == OX_DOUBLE || dt == OX_FLOAT16) return true;
    return kind == POOL_MAX && (dt == OX_INT8 || dt == OX_UINT8);
}

static ox_status infer_pool(struct ox_infer_ctx *ctx, const struct ox_node *n,
                            const ox_tensor *const *in, ox_tensor *const *out, int kind) {
    const ox_tensor *x = ox_in(n, in, 0);
    if (!x) return ox_node_err(n, OX_E_INVALID, "expected input X");
    if (!pool_type_ok(x->dtype, kind))
        return ox_node_err(n, OX_E_UNSUPPORTED, "element type %s", ox_dtype_name(x->dtype));
    struct geom g;
    ox_status st = pool_setup(n, x, &g);
    if (st) return st;
    int64_t dims[OX_MAX_RANK] = {x->dims[0], x->dims[1]};
    for (int i = 0; i < g.nsp; i++) dims[i + 2] = g.out[i];
    ox_set_shape(out[0], x->dtype, x->rank, dims);
    if (n->n_outputs > 1 && out[1]) ox_set_shape(out[1], OX_INT64, x->rank, dims);
    if (kind == POOL_MAX && (x->dtype == OX_UINT8 || x->dtype == OX_INT8) && maxpool8_fits(&g))
        ctx->scratch_bytes =
            (size_t)maxpool8_row_bytes(&g) * (size_t)(ctx->n_threads > 1 ? ctx->n_threads : 1);
    if (kind == POOL_MAX && x->dtype == OX_FLOAT) { /* none, a tile, or 2 rows */
        int64_t slot = 0;
#if defined(__x86_64__) && defined(__GNUC__)
        if (g.nsp == 2 && maxpool_k3s2_fits(&g)) return OX_OK; /* one pass, no scratch */
        if (g.nsp == 2) slot = maxpool_tiled_floats(&g);
#endif
        if (!slot) slot = (g.in[g.nsp - 1] + 15) / 16 * 16 * 2;
        ctx->scratch_bytes =
            (size_t)slot * sizeof(float) * (size_t)(ctx->n_threads > 1 ? ctx->n_threads : 1);
    }
    return OX_OK;
}

ox_status ox_nn_infer_maxpool(struct ox_infer_ctx *ctx, const struct ox_node *n,
                              const ox_tensor *const *in, ox_tensor *const *out) {
    return infer_pool(ctx, n, in, out, POOL_MAX);
}

ox_status ox_nn_infer_avgpool(struct ox_infer_ctx *ctx, const struct ox_node *n,
                              const ox_tensor *const *in, ox_tensor *const *out) {
    return infer_pool(ctx, n, in, out, POOL_AVG);
}

ox_status ox_nn_infer_lppool(struct ox_infer_ctx *ctx, const struct ox_node *n,
                             const ox_tensor *const *in, ox_tensor *const *out) {
    return infer_pool(ctx, n, in, out, POOL_LP);
}

/* One generic pooling walk in double (exact for float and the 8-bit ints of MaxPool). */
static ox_status pool_run(const struct ox_node *n, const ox_tensor *x, ox_tensor *y,
                          ox_tensor *idx_out, const struct geom *g, int kind) {
    int64_t NC = x->dims[0] * x->dims[1];
    bool include_pad = kind == POOL_AVG && ox_attr_int(n, "count_include_pad", 0);
    double p = kind == POOL_LP ? (double)ox_attr_int(n, "p", 2) : 2;
    int64_t storage = ox_attr_int(n, "storage_order", 0);
    bool f32 = x->dtype == OX_FLOAT;
    const float *xf = x->data;
    float *yf = y->data;
    int64_t *ind = idx_out ? idx_out->data : NULL;
    for (int64_t c = 0; c < NC; c++) {
        int64_t base = c * g->in_size;
        int64_t o[MAX_SP] = {0};
        for (int64_t q = 0; q < g->out_size; q++) {
            double acc = kind == POOL_MAX ? -DBL_MAX : 0;
            int64_t best = -1, count = 0, padded = 1;
            int64_t lo[MAX_SP], hi[MAX_SP];
            for (int i = 0; i < g->nsp; i++) {
                int64_t start = o[i] * g->s[i] - g->pb[i];
                int64_t end = start + (g->k[i] - 1) * g->d[i] + 1;
                /* with count_include_pad, the window counts up to the end padding only */
                int64_t lim = g->in[i] + g->pe[i];
                int64_t pend = end < lim ? end : lim;
                padded *= (pend - start + g->d[i] - 1) / g->d[i];
                lo[i] = start;
                hi[i] = end;
            }
            /* only the taps inside the input: per dim [klo, klo + kn) */
            int64_t klo[MAX_SP], kn[MAX_SP], n_taps = 1;
            for (int i = 0; i < g->nsp; i++) {
                kn[i] = taps_inside(lo[i], g->k[i], g->d[i], g->in[i], &klo[i]);
                n_taps *= kn[i];
            }
            int64_t ko[MAX_SP] = {0};
            for (int64_t kk = 0; kk < n_taps; kk++) {
                int64_t off = 0;
                bool inside = true;
                int64_t pos[MAX_SP];
                for (int i = 0; i < g->nsp; i++) {
                    int64_t v = lo[i] + (klo[i] + ko[i]) * g->d[i];
                    pos[i] = v;
                    if (v < 0 || v >= g->in[i] || v >= hi[i]) inside = false;
                    off = off * g->in[i] + v;
                }
                if (inside) {
                    double v = f32 ? xf[base + off] : ox_get_f64(x, base + off);
                    if (kind == POOL_MAX) {
                        if (v > acc || best < 0 || v != v) { /* a NaN wins */
                            acc = v;
                            if (storage == 0 || g->nsp != 2) {
                                best = base + off;
                            } else {
                                best = base + pos[1] * g->in[0] + pos[0];
                            }
                        }
                    } else if (kind == POOL_AVG) {
                        acc += v;
                    } else {
                        acc += pow(fabs(v), p);
                    }
                    count++;
                }
                for (int i = g->nsp - 1; i >= 0; i--) {
                    if (++ko[i] < kn[i]) break;
                    ko[i] = 0;
                }
            }
            if (kind == POOL_AVG) acc = acc / (double)(include_pad ? padded : (count ? count : 1));
            if (kind == POOL_LP) acc = pow(acc, 1.0 / p);
            if (kind == POOL_MAX && count == 0) acc = 0;
            int64_t yi = c * g->out_size + q;
            if (f32)
                yf[yi] = (float)acc;
            else
                ox_set_f64(y, yi, acc);
            if (ind) ind[yi] = best;
            for (int i = g->nsp - 1; i >= 0; i--) {
                if (++o[i] < g->out[i]) break;
                o[i] = 0;
            }
        }
    }
    return OX_OK;
}

/* float 1-, 2- and 3-D average pooling, a row at a time, channels over the pool's threads. The
 * output rows run along the last spatial dim (the leading dims numbered together); for each tap of
 * the leading dims inside the input, and each tap of the last, the output row is updated from one
 * input row over the range of outputs whose tap lies inside it (no bounds test per element, a loop
 * the compiler vectorizes). Same results as pool_run. */
/* The window of output row `orow` (the leading dims' output position, numbered together) in
 * the leading dims: per dim its start, its taps inside the input [k0, k0 + nk) and the tap
 * being visited. lead_window fills it and returns how many input rows the window has inside
 * the input; *n_padded (when not NULL) gets the taps counted with count_include_pad (up to
 * the end padding). lead_next_row returns the input row of the tap visited, and moves on. */
struct lead_window {
    int64_t start[MAX_SP], k0[MAX_SP], nk[MAX_SP], tap[MAX_SP];
};

static int64_t lead_window(const struct geom *g, int64_t orow, struct lead_window *w,
                           int64_t *n_padded) {
    int64_t n_inside = 1, padded = 1, q = orow;
    for (int i = g->nsp - 2; i >= 0; i--) {
        w->start[i] = q % g->out[i] * g->s[i] - g->pb[i];
        q /= g->out[i];
        w->nk[i] = taps_inside(w->start[i], g->k[i], g->d[i], g->in[i], &w->k0[i]);
        n_inside *= w->nk[i];
        int64_t end = w->start[i] + (g->k[i] - 1) * g->d[i] + 1, lim = g->in[i] + g->pe[i];
        padded *= ((end < lim ? end : lim) - w->start[i] + g->d[i] - 1) / g->d[i];
        w->tap[i] = w->k0[i];
    }
    if (n_padded) *n_padded = padded;
    return n_inside;
}

/* The outputs [*lo, *hi) of a row (the last spatial dim) whose window lies wholly inside
 * the input row. */
static void whole_windows(const struct geom *g, int64_t *lo, int64_t *hi) {
    int L = g->nsp - 1;
    int64_t SW = g->s[L], PL = g->pb[L], last = g->in[L] - 1 - (g->k[L] - 1) * g->d[L] + PL;
    *lo = (PL + SW - 1) / SW;
    *hi = last < 0 ? 0 : last / SW + 1;
    if (*hi > g->out[L]) *hi = g->out[L];
    if (*lo > *hi) *lo = *hi;
}

static int64_t lead_next_row(const struct geom *g, struct lead_window *w) {
    int L = g->nsp - 1;
    int64_t in_row = 0;
    for (int i = 0; i < L; i++) in_row = in_row * g->in[i] + w->start[i] + w->tap[i] * g->d[i];
    for (int i = L - 1; i >= 0; i--) { /* the next leading tap inside */
        if (++w->tap[i] < w->k0[i] + w->nk[i]) break;
        w->tap[i] = w->k0[i];
    }
    return in_row;
}

struct pool_rows_job {
    const float *x;
    float *y;
    const struct geom *g;
    bool include_pad;
};

OX_HOT static void pool_rows_piece(void *arg, int64_t c0, int64_t c1, int tid) {
    (void)tid;
    const struct pool_rows_job *j = arg;
    const struct geom *g = j->g;
    int L = g->nsp - 1; /* the last spatial dim; [0, L) the leading ones */
    int64_t W = g->in[L], OW = g->out[L], KW = g->k[L], SW = g->s[L], DW = g->d[L];
    int64_t PL = g->pb[L];
    if (OW == 0) return;
    /* the taps that some output of a row reaches inside the input: [kw0, kw0 + nkw0) */
    int64_t kw0 = 0, nkw0 = 0;
    if (W > 0) nkw0 = taps_inside((OW - 1) * SW - PL, KW, DW, W + (OW - 1) * SW, &kw0);
    int64_t rows = g->out_size / OW;
    int64_t in_lo, in_hi; /* outputs whose whole window is inside the row */
    whole_windows(g, &in_lo, &in_hi);
    for (int64_t c = c0; c < c1; c++) {
        const float *xc = j->x + c * g->in_size;
        float *yc = j->y + c * g->out_size;
        for (int64_t orow = 0; orow < rows; orow++) {
            float *yr = yc + orow * OW;
            struct lead_window lw;
            int64_t n_padded, n_inside = lead_window(g, orow, &lw, &n_padded);
            for (int64_t ow = 0; ow < OW; ow++) yr[ow] = 0.0f;
            for (int64_t tt = 0; tt < n_inside; tt++) {
                const float *xr = xc + lead_next_row(g, &lw) * W;
                for (int64_t kw = kw0; kw < kw0 + nkw0; kw++) {
                    int64_t off = kw * DW - PL;
                    int64_t lo = off >= 0 ? 0 : (-off + SW - 1) / SW;
                    int64_t hi = W - off <= 0 ? 0 : (W - off - 1) / SW + 1;
                    if (hi > OW) hi = OW;
                    if (SW == 1) { /* contiguous: vectorized */
                        const float *xo = xr + off;
                        for (int64_t ow = lo; ow < hi; ow++) yr[ow] += xo[ow];
                    } else {
                        for (int64_t ow = lo; ow < hi; ow++) yr[ow] += xr[ow * SW + off];
                    }
                }
            }
            /* windows wholly inside the row: every tap counts, one divisor */
            float whole = (float)((j->include_pad ? n_padded : n_inside) * KW);
            if (n_inside || j->include_pad)
                for (int64_t ow = in_lo; ow < in_hi; ow++) yr[ow] /= whole;
            for (int64_t ow = 0; ow < OW; ow++) { /* and the others */
                if (ow == in_lo && (n_inside || j->include_pad)) ow = in_hi;
                if (ow >= OW) break;
                int64_t w0 = ow * SW - PL, kw1, nkw = taps_inside(w0, KW, DW, W, &kw1);
                int64_t count = n_inside * nkw;
                int64_t w1 = w0 + (KW - 1) * DW + 1, wl = W + g->pe[L];
                int64_t pw = ((w1 < wl ? w1 : wl) - w0 + DW - 1) / DW;
                yr[ow] /= (float)(j->include_pad ? n_padded * pw : (count ? count : 1));
            }
        }
    }
}

/* float 1-, 2- and 3-D max pooling without indices, over the pool's threads (channels
 * split); output rows run along the last spatial dim, the leading dims numbered together
 * (as in pool_rows_piece). For each output row, the rows of its window are first reduced
 * into one row (a contiguous,
 * vectorized max), then each output takes the max of its taps in that row. A NaN wins, as
 * in numpy; a window wholly in the padding gives 0, as in pool_run. */
struct maxpool_job {
    const float *x;
    float *y;
    const struct geom *g;
    float *scratch; /* per thread: maxpool_tiled_floats, or two rows of W floats each
                       rounded to 16 */
    int64_t C;      /* channels */
};

#ifdef HAVE_DEPTHWISE_AVX512
static void maxpool_k3s2_piece(void *arg, int64_t b, int64_t e, int tid) {
    (void)tid;
    const struct maxpool_job *j = arg;
    for (int64_t ch = b; ch < e; ch++)
        maxpool2d_k3s2(j->x + ch * j->g->in_size, j->y + ch * j->g->out_size, j->g);
}

static void maxpool_tiled_piece(void *arg, int64_t b, int64_t e, int tid) {
    const struct maxpool_job *j = arg;
    const struct geom *g = j->g;
    for (int64_t u = b; u < e; u++) {
        int64_t c0, cn, ch;
        channel_block(u, j->C, &c0, &cn, &ch);
        maxpool2d_tiled(j->x + ch * g->in_size, j->y + ch * g->out_size, cn, g,
                        j->scratch + tid * maxpool_tiled_floats(g));
    }
}
#endif

/* dst[i] = max(a[i], b[i]) for i < n, a NaN winning (a may be dst); and y[o] = u[o * 2] for
 * o < n (stride-2 outputs). AVX-512 with masked tails where the CPU has it: rows of pooled
 * feature maps are short (55, 111 columns), and a scalar tail would cost as much as the
 * vectors. */
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx512f"))) static void max_row_avx512(float *dst, const float *a,
                                                              const float *b, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = tail_mask16(n - i);
        __m512 va = _mm512_maskz_loadu_ps(m, a + i), vb = _mm512_maskz_loadu_ps(m, b + i);
        __mmask16 take =
            _mm512_cmp_ps_mask(vb, va, _CMP_GT_OQ) | _mm512_cmp_ps_mask(vb, vb, _CMP_UNORD_Q);
        _mm512_mask_storeu_ps(dst + i, m, _mm512_mask_blend_ps(take, va, vb));
    }
}

__attribute__((target("avx512f"))) static void even_avx512(float *y, const float *u, int64_t n) {
    const __m512i idx = even_lanes16();
    for (int64_t o = 0; o < n; o += 16) {
        int64_t left = 2 * (n - o) - 1; /* the last input read: u[2 * (n - 1)] */
        __mmask16 m0 = tail_mask16(left);
        __mmask16 m1 = left >= 32 ? 0xFFFF : left <= 16 ? 0 : (__mmask16)((1u << (left - 16)) - 1);
        __m512 lo = _mm512_maskz_loadu_ps(m0, u + 2 * o),
               hi = _mm512_maskz_loadu_ps(m1, u + 2 * o + 16);
        __mmask16 ms = tail_mask16(n - o);
        _mm512_mask_storeu_ps(y + o, ms, _mm512_permutex2var_ps(lo, idx, hi));
    }
}
#define HAVE_POOL_AVX512 1
#endif

static void max_row(float *dst, const float *a, const float *b, int64_t n) {
#ifdef HAVE_POOL_AVX512
    if (ox_sgemm_is_fast()) {
        max_row_avx512(dst, a, b, n);
        return;
    }
#endif
    for (int64_t i = 0; i < n; i++) {
        float v = b[i], cur = a[i];
        dst[i] = ((v > cur) | (v != v)) ? v : cur;
    }
}

static void strided_row(float *y, const float *u, int64_t n, int64_t stride) {
#ifdef HAVE_POOL_AVX512
    if (stride == 2 && ox_sgemm_is_fast()) {
        even_avx512(y, u, n);
        return;
    }
#endif
    if (stride == 1)
        memcpy(y, u, sizeof(float) * (size_t)n);
    else
        for (int64_t o = 0; o < n; o++) y[o] = u[o * stride];
}

static void maxpool_rows(void *arg, int64_t c0, int64_t c1, int tid) {
    const struct maxpool_job *j = arg;
    const struct geom *g = j->g;
    int L = g->nsp - 1; /* the last spatial dim; [0, L) the leading ones */
    int64_t W = g->in[L], OW = g->out[L], KW = g->k[L], SW = g->s[L], DW = g->d[L];
    int64_t PL = g->pb[L];
    if (g->in_size == 0) { /* every window lies in the padding: 0, and no scratch */
        if (g->out_size)
            memset(j->y + c0 * g->out_size, 0, sizeof(float) * (size_t)((c1 - c0) * g->out_size));
        return;
    }
    int64_t Wr = (W + 15) / 16 * 16, rows = OW ? g->out_size / OW : 0;
    float *t = j->scratch + tid * 2 * Wr, *u = t + Wr;
    /* u[i]: the max of t over the window whose first tap is column i, for i < nu */
    int64_t span = (KW - 1) * DW, nu = W - span;
    /* outputs [ilo, ihi) have every tap inside the row: y = u[ow * SW - PL] */
    int64_t ilo, ihi;
    whole_windows(g, &ilo, &ihi);
    for (int64_t c = c0; c < c1; c++) {
        const float *xc = j->x + c * g->in_size;
        float *yc = j->y + c * g->out_size;
        for (int64_t orow = 0; orow < rows; orow++) {
            float *yr = yc + orow * OW;
            /* the window's rows inside the input (taps of the leading dims), max'ed into t */
            struct lead_window lw;
            int64_t n_rows = lead_window(g, orow, &lw, NULL);
            for (int64_t r = 0; r < n_rows; r++) {
                const float *xr = xc + lead_next_row(g, &lw) * W;
                if (r == 0)
                    memcpy(t, xr, sizeof(float) * (size_t)W);
                else
                    max_row(t, t, xr, W);
            }
            if (!n_rows) { /* the window's rows are all padding */
                for (int64_t ow = 0; ow < OW; ow++) yr[ow] = 0.0f;
                continue;
            }
            if (ilo < ihi) { /* the horizontal max once per column, then one read per output */
                if (KW == 1)
                    memcpy(u, t, sizeof(float) * (size_t)nu);
                else
                    max_row(u, t, t + DW, nu);
                for (int64_t kw = 2; kw < KW; kw++) max_row(u, u, t + kw * DW, nu);
                strided_row(yr + ilo, u + ilo * SW - PL, ihi - ilo, SW);
            }
            for (int64_t ow = 0; ow < OW; ow++) { /* windows that reach past the row */
                if (ow == ilo && ilo < ihi) ow = ihi;
                if (ow >= OW) break;
                int64_t w0 = ow * SW - PL, kw0, nkw = taps_inside(w0, KW, DW, W, &kw0);
                float m = -INFINITY;
                for (int64_t kw = kw0; kw < kw0 + nkw; kw++) {
                    float v = t[w0 + kw * DW];
                    m = ((v > m) | (v != v)) ? v : m;
                }
                yr[ow] = nkw ? m : 0.0f; /* wholly in the padding: 0 */
            }
        }
    }
}

/* float 2-D max pooling with the Indices output (storage_order 0), over the pool's threads
 * (channels split): per output, the taps inside the input only, compared in float. The same
 * choice as pool_run: the first maximum wins, a NaN wins; a window wholly in the padding
 * gives 0 and index -1. What the MaxPool gradient recomputes. */
struct maxpool_idx_job {
    const float *x;
    float *y;
    int64_t *ind;
    const struct geom *g;
};

OX_HOT static void maxpool2d_idx_rows(void *arg, int64_t c0, int64_t c1, int tid) {
    const struct maxpool_idx_job *j = arg;
    const struct geom *g = j->g;
    int64_t H = g->in[0], W = g->in[1], OH = g->out[0], OW = g->out[1], KH = g->k[0];
    int64_t KW = g->k[1], SH = g->s[0], SW = g->s[1], DH = g->d[0], DW = g->d[1];
    int64_t PT = g->pb[0], PL = g->pb[1];
    (void)tid;
    for (int64_t c = c0; c < c1; c++) {
        int64_t base = c * g->in_size;
        const float *xc = j->x + base;
        float *yc = j->y + c * g->out_size;
        int64_t *ic = j->ind + c * g->out_size;
        for (int64_t oh = 0; oh < OH; oh++) {
            int64_t h0 = oh * SH - PT;
            for (int64_t ow = 0; ow < OW; ow++) {
                int64_t w0 = ow * SW - PL, best = -1;
                float acc = 0;
                int64_t kh0, nkh = taps_inside(h0, KH, DH, H, &kh0);
                int64_t kw0, nkw = taps_inside(w0, KW, DW, W, &kw0);
                for (int64_t kh = kh0; kh < kh0 + nkh; kh++) {
                    int64_t ih = h0 + kh * DH;
                    const float *xr = xc + ih * W;
                    for (int64_t kw = kw0; kw < kw0 + nkw; kw++) {
                        int64_t iw = w0 + kw * DW;
                        float v = xr[iw];
                        if (best < 0 || v > acc || v != v) {
                            acc = v;
                            best = base + ih * W + iw;
                        }
                    }
                }
                yc[oh * OW + ow] = acc;
                ic[oh * OW + ow] = best;
            }
        }
    }
}

/* ---- 8-bit max pooling ------------------------------------------------------------------ */

/* 2-D MaxPool of uint8 or int8 (the form graph/optimize.c gives a QDQ model's MaxPool): an
 * output row is the max over the window's input rows (into a row buffer with the padding
 * at the type's lowest value), then over each window's columns: 64 outputs at a time, a
 * vector max per tap (stride 2: the even bytes of 128, by narrowing words to bytes). int8
 * is compared as uint8 with the sign bit flipped. Only where every window holds an input
 * element and dilation is 1; the generic walk takes the rest. */
static bool maxpool8_fits(const struct geom *g) {
    if (g->nsp != 2 || g->in_size == 0 || g->out_size == 0) return false;
    for (int i = 0; i < 2; i++)
        if (g->d[i] != 1 || g->pb[i] >= g->k[i] ||
            (g->out[i] - 1) * g->s[i] - g->pb[i] >= g->in[i] || g->s[i] > 64 || g->k[i] > 1024 ||
            g->in[i] > ((int64_t)1 << 30))
            return false;
    return true;
}

/* The row buffer: the padded columns every output of a row reads, 64 outputs at a time. */
static int64_t maxpool8_row_bytes(const struct geom *g) {
    return ((g->out[1] + 63) / 64 * 64 * g->s[1] + g->k[1] + 128 + 63) / 64 * 64;
}

struct maxpool8_job {
    const uint8_t *x;
    uint8_t *y;
    const struct geom *g;
    uint8_t *scratch;
    bool sgn;
};

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx512f,avx512bw"))) static void maxpool8_planes(void *arg, int64_t c0,
                                                                        int64_t c1, int tid) {
    const struct maxpool8_job *j = arg;
    const struct geom *g = j->g;
    const int64_t H = g->in[0], W = g->in[1], OH = g->out[0], OW = g->out[1], KH = g->k[0];
    const int64_t KW = g->k[1], SH = g->s[0], SW = g->s[1], PT = g->pb[0], PL = g->pb[1];
    const int64_t nb = maxpool8_row_bytes(g);
    uint8_t *buf = j->scratch + (size_t)tid * (size_t)nb;
    const __m512i flip = _mm512_set1_epi8(j->sgn ? (char)0x80 : 0);
    for (int64_t c = c0; c < c1; c++) {
        const uint8_t *xc = j->x + c * H * W;
        uint8_t *yc = j->y + c * OH * OW;
        for (int64_t oh = 0; oh < OH; oh++) {
            int64_t r0 = oh * SH - PT, r1 = r0 + KH < H ? r0 + KH : H;
            if (r0 < 0) r0 = 0;
            memset(buf, 0, (size_t)nb); /* the padding: the lowest value */
            for (int64_t w0 = 0; w0 < W; w0 += 64) {
                __mmask64 m = W - w0 >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << (W - w0)) - 1);
                __m512i v = _mm512_setzero_si512();
                for (int64_t r = r0; r < r1; r++)
                    v = _mm512_max_epu8(
                        v, _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, xc + r * W + w0), flip));
                _mm512_mask_storeu_epi8(buf + PL + w0, m, v);
            }
            for (int64_t o0 = 0; o0 < OW; o0 += 64) {
                __m512i v = _mm512_setzero_si512();
                for (int64_t k = 0; k < KW; k++) {
                    const uint8_t *p = buf + o0 * SW + k;
                    if (SW == 1) {
                        v = _mm512_max_epu8(v, _mm512_loadu_si512(p));
                    } else if (SW == 2) { /* bytes 0, 2, .. 126: the low bytes of 64 words */
                        __m256i lo = _mm512_cvtepi16_epi8(_mm512_loadu_si512(p));
                        __m256i hi = _mm512_cvtepi16_epi8(_mm512_loadu_si512(p + 64));
                        v = _mm512_max_epu8(v,
                                            _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1));
                    } else {
                        uint8_t t[64];
                        for (int i = 0; i < 64; i++) t[i] = o0 + i < OW ? p[i * SW] : 0;
                        v = _mm512_max_epu8(v, _mm512_loadu_si512(t));
                    }
                }
                __mmask64 m = OW - o0 >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << (OW - o0)) - 1);
                _mm512_mask_storeu_epi8(yc + oh * OW + o0, m, _mm512_xor_si512(v, flip));
            }
        }
    }
}
#endif

static ox_status cpu_pool(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                          const ox_tensor *const *in, ox_tensor *const *out, int kind) {
    struct geom g;
    ox_status st = pool_setup(n, in[0], &g);
    if (st) return st;
    ox_tensor *idx = n->n_outputs > 1 ? out[1] : NULL;
#if defined(__x86_64__) && defined(__GNUC__)
    if ((in[0]->dtype == OX_UINT8 || in[0]->dtype == OX_INT8) && !idx && kind == POOL_MAX &&
        maxpool8_fits(&g) && ox_igemm16_fast()) {
        struct maxpool8_job j = {in[0]->data, out[0]->data, &g, ctx->scratch,
                                 in[0]->dtype == OX_INT8};
        ox_parallel_for(ctx->pool, in[0]->dims[0] * in[0]->dims[1], maxpool8_planes, &j);
        return OX_OK;
    }
#endif
    if (in[0]->dtype == OX_FLOAT && !idx && kind == POOL_MAX) {
        struct maxpool_job j = {in[0]->data, out[0]->data, &g, ctx->scratch, in[0]->dims[1]};
#ifdef HAVE_DEPTHWISE_AVX512
        if (g.nsp == 2 && maxpool_k3s2_fits(&g) && g.in[0] && g.in[1]) {
            ox_parallel_for(ctx->pool, in[0]->dims[0] * in[0]->dims[1], maxpool_k3s2_piece, &j);
            return OX_OK;
        }
        if (g.nsp == 2 && maxpool_tiled_floats(&g) && g.in[0] && g.in[1]) {
            ox_parallel_for(ctx->pool, in[0]->dims[0] * ((in[0]->dims[1] + 15) / 16),
                            maxpool_tiled_piece, &j);
            return OX_OK;
        }
#endif
        ox_parallel_for(ctx->pool, in[0]->dims[0] * in[0]->dims[1], maxpool_rows, &j);
        return OX_OK;
    }
    if (in[0]->dtype == OX_FLOAT && g.nsp == 2 && idx && kind == POOL_MAX &&
        ox_attr_int(n, "storage_order", 0) == 0) {
        struct maxpool_idx_job j = {in[0]->data, out[0]->data, idx->data, &g};
        ox_parallel_for(ctx->pool, in[0]->dims[0] * in[0]->dims[1], maxpool2d_idx_rows, &j);
        return OX_OK;
    }
    if (in[0]->dtype == OX_FLOAT && !idx && kind == POOL_AVG) {
        struct pool_rows_job j = {in[0]->data, out[0]->data, &g,
                                  ox_attr_int(n, "count_include_pad", 0) != 0};
        ox_parallel_for(ctx->pool, in[0]->dims[0] * in[0]->dims[1], pool_rows_piece, &j);
        return OX_OK;
    }
    return pool_run(n, in[0], out[0], idx, &g, kind);
}

ox_status ox_nn_cpu_maxpool(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                            const ox_tensor *const *in, ox_tensor *const *out) {
    return cpu_pool(ctx, n, in, out, POOL_MAX);
}

ox_status ox_nn_cpu_avgpool(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                            const ox_tensor *const *in, ox_tensor *const *out) {
    return cpu_pool(ctx, n, in, out, POOL_AVG);
}

ox_status ox_nn_cpu_lppool(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                           const ox_tensor *const *in, ox_tensor *const *out) {
    return cpu_pool(ctx, n, in, out, POOL_LP);
}

/* ---- global pooling -------------------------------------------------------------------- */

static ox_status infer_global(const struct ox_node *n, const ox_tensor *const *in,
                              ox_tensor *const *out) {
    const ox_tensor *x = ox_in(n, in, 0);
    if (!x || x->rank < 3)
        return ox_node_err(n, OX_E_SHAPE, "expected an input [N, C, spatial...]");
    if (!ox_dtype_is_float(x->dtype))
        return ox_node_err(n, OX_E_UNSUPPORTED, "element type %s", ox_dtype_name(x->dtype));
    int64_t dims[OX_MAX_RANK];
    for (int i = 0; i < x->rank; i++) dims[i] = i < 2 ? x->dims[i] : 1;
    ox_set_shape(out[0], x->dtype, x->rank, dims);
    return OX_OK;
}

ox_status ox_nn_infer_global_pool(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                  const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    return infer_global(n, in, out);
}

/* A float sum in 16 interleaved partial sums (vectorized; more accurate than one running
 * float sum), added up in double. */
OX_HOT static double sum_floats(const float *x, int64_t n) {
    float p[16] = {0};
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int k = 0; k < 16; k++) p[k] += x[i + k];
    double s = 0;
    for (int k = 0; k < 16; k++) s += p[k];
    for (; i < n; i++) s += x[i];
    return s;
}

struct global_avg_job {
    const float *x;
    float *y;
    int64_t S;
};

static void global_avg_rows(void *arg, int64_t b, int64_t e, int tid) {
    (void)tid;
    const struct global_avg_job *j = arg;
    for (int64_t c = b; c < e; c++)
        j->y[c] = (float)(sum_floats(j->x + c * j->S, j->S) / (double)(j->S ? j->S : 1));
}

static ox_status cpu_global(const struct ox_node *n, const ox_tensor *x, ox_tensor *y, int kind) {
    int64_t NC = x->dims[0] * x->dims[1], S = 1;
    for (int i = 2; i < x->rank; i++) S *= x->dims[i];
    double p = kind == POOL_LP ? (double)ox_attr_int(n, "p", 2) : 2;
    for (int64_t c = 0; c < NC; c++) {
        double acc = kind == POOL_MAX ? -INFINITY : 0;
        if (x->dtype == OX_FLOAT) {
            const float *xs = (const float *)x->data + c * S;
            if (kind == POOL_MAX) {
                float m = -INFINITY;
                for (int64_t i = 0; i < S; i++) m = xs[i] > m ? xs[i] : m;
                acc = m;
            } else if (kind == POOL_AVG) {
                acc = sum_floats(xs, S);
            } else {
                for (int64_t i = 0; i < S; i++) acc += pow(fabs(xs[i]), p);
            }
        } else {
            for (int64_t i = 0; i < S; i++) {
                double v = ox_get_f64(x, c * S + i);
                if (kind == POOL_MAX)
                    acc = v > acc ? v : acc;
                else if (kind == POOL_AVG)
                    acc += v;
                else
                    acc += pow(fabs(v), p);
            }
        }
        if (kind == POOL_AVG) acc /= (double)(S ? S : 1);
        if (kind == POOL_LP) acc = pow(acc, 1.0 / p);
        ox_set_f64(y, c, acc);
    }
    return OX_OK;
}

ox_status ox_nn_cpu_global_avgpool(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                                   const ox_tensor *const *in, ox_tensor *const *out) {
    const ox_tensor *x = in[0];
    if (x->dtype == OX_FLOAT && ox_tensor_numel(x) >= 32768) { /* channels over the pool */
        int64_t S = 1;
        for (int i = 2; i < x->rank; i++) S *= x->dims[i];
        struct global_avg_job j = {x->data, out[0]->data, S};
        ox_parallel_for(ctx->pool, x->dims[0] * x->dims[1], global_avg_rows, &j);
        return OX_OK;
    }
    return cpu_global(n, in[0], out[0], POOL_AVG);
}

ox_status ox_nn_cpu_global_maxpool(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                                   const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    return cpu_global(n, in[0], out[0], POOL_MAX);
}

ox_status ox_nn_cpu_global_lppool(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                                  const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    return cpu_global(n, in[0], out[0], POOL_LP);
}
