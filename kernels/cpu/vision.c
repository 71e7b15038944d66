/* Vision ops of the default domain: ConvTranspose, Col2Im, DeformConv, GridSample,
 * AffineGrid, RoiAlign, NonMaxSuppression and MaxUnpool, over any number of spatial dims
 * (NC + spatial layout) unless a spec says otherwise.
 *
 * ConvTranspose: per image and group, one OpenBLAS gemm (W_g^T x X_g) gives the columns in
 * scratch, and col2im adds them into the output; Col2Im is that second step alone. DeformConv
 * samples its columns bilinearly at the offset positions (times the mask) and multiplies them
 * by the filters with one gemm. float16 and bfloat16 go through float copies in scratch.
 * GridSample, AffineGrid and RoiAlign compute in double. NonMaxSuppression's output length
 * depends on the boxes and scores: infer returns OX_NEED_DATA until they are known, then runs
 * the selection once to count (with a temporary buffer, the only allocation here, outside the
 * kernel), and the kernel runs it again in scratch to write the indices. The selection files
 * the kept boxes in buckets along x, so each candidate meets only the kept boxes that could
 * overlap it (nms_grid below): exported detectors send thousands of boxes of many classes
 * to one NonMaxSuppression. Col2Im, AffineGrid and MaxUnpool (with output_shape) read shapes
 * from input data the same way.
 */
#include "kernels/op.h"

#include <cblas.h>
#include <float.h>
#include <limits.h>
#include <stdlib.h>

#define MAX_SP (OX_MAX_RANK - 2) /* spatial dims */

/* ---- helpers --------------------------------------------------------------------------- */

static bool is_float_type(ox_dtype dt) {
    return dt == OX_FLOAT || dt == OX_DOUBLE || dt == OX_FLOAT16 || dt == OX_BFLOAT16;
}

static bool is_half(ox_dtype dt) {
    return dt == OX_FLOAT16 || dt == OX_BFLOAT16;
}

/* float copies of float16/bfloat16 data, and back */
static void to_f32(const ox_tensor *t, float *dst) {
    int64_t n = ox_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) dst[i] = (float)ox_get_f64(t, i);
}

static void from_f32(const float *src, ox_tensor *t) {
    int64_t n = ox_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) ox_set_f64(t, i, src[i]);
}

static bool known(const ox_tensor *t) {
    return t && t->data;
}

static int64_t prod(const int64_t *d, int n) {
    int64_t p = 1;
    for (int i = 0; i < n; i++) p *= d[i];
    return p;
}

/* An INTS attribute of `want` values into dst (def everywhere when absent). */
static ox_status ints_attr(const struct ox_node *n, const char *name, int want, int64_t *dst,
                           int64_t def) {
    const int64_t *a;
    int na = ox_attr_ints(n, name, &a);
    for (int i = 0; i < want; i++) dst[i] = def;
    if (na < 0) return OX_OK;
    if (na != want)
        return ox_node_err(n, OX_E_INVALID, "attribute %s has %d values, expected %d", name, na,
                           want);
    for (int i = 0; i < na; i++) dst[i] = a[i];
    return OX_OK;
}

/* Element count of a shape, checked against overflow (and the size of a buffer of them). */
static ox_status checked_count(const struct ox_node *n, int rank, const int64_t *dims, size_t esz,
                               size_t *bytes) {
    if (!ox_tensor_bytes(OX_UINT8, rank, dims, bytes) || !ox_mul_size(*bytes, esz, bytes))
        return ox_node_err(n, OX_E_NOMEM, "tensor size overflows");
    return OX_OK;
}

/* Add a = a + b with overflow check (sizes in bytes). */
static ox_status add_bytes(const struct ox_node *n, size_t *a, size_t b) {
    if (!ox_add_size(*a, b, a)) return ox_node_err(n, OX_E_NOMEM, "scratch size overflows");
    return OX_OK;
}

/* Read a 1-D integer input into dst (at most max values); returns the count or -1. */
static int64_t read_shape_input(const struct ox_node *n, const ox_tensor *t, int64_t *dst,
                                int64_t max) {
    if (t->rank > 1) {
        ox_node_err(n, OX_E_SHAPE, "expected a 1-D shape tensor, found rank %d", t->rank);
        return -1;
    }
    return ox_read_ints(n, t, dst, max);
}

/* ---- col2im ---------------------------------------------------------------------------- */

/* Adds col[channels * prod(k), prod(grid)] into img[channels, prod(image)]: column position
 * g (a point of `grid`) and kernel offset o land at image position g * s - pb + o * d,
 * dropped when outside the image. The walk goes row by row along the last dim. */
#define DEF_COL2IM(T)                                                                              \
    static void col2im_##T(const T *col, int64_t channels, int nsp, const int64_t *grid,           \
                           const int64_t *image, const int64_t *k, const int64_t *s,               \
                           const int64_t *d, const int64_t *pb, T *img) {                          \
        int64_t gsize = prod(grid, nsp), isize = prod(image, nsp), ksize = prod(k, nsp);           \
        int last = nsp - 1;                                                                        \
        int64_t glast = grid[last], ilast = image[last], sl = s[last];                             \
        if (gsize == 0 || isize == 0) return;                                                      \
        int64_t rows = gsize / glast;                                                              \
        for (int64_t c = 0; c < channels; c++)                                                     \
            for (int64_t kk = 0; kk < ksize; kk++) {                                               \
                int64_t ko[MAX_SP], r = kk;                                                        \
                for (int i = last; i >= 0; i--) ko[i] = r % k[i], r /= k[i];                       \
                const T *src = col + (c * ksize + kk) * gsize;                                     \
                T *dst = img + c * isize;                                                          \
                int64_t off = ko[last] * d[last] - pb[last];                                       \
                int64_t lo = off >= 0 ? 0 : (-off + sl - 1) / sl;                                  \
                int64_t hi = ilast - off <= 0 ? 0 : (ilast - off + sl - 1) / sl;                   \
                if (hi > glast) hi = glast;                                                        \
                int64_t gp[MAX_SP] = {0};                                                          \
                for (int64_t q = 0; q < rows; q++) {                                               \
                    int64_t base = 0;                                                              \
                    bool inside = true;                                                            \
                    for (int i = 0; i < last; i++) {                                               \
                        int64_t v = gp[i] * s[i] - pb[i] + ko[i] * d[i];                           \
                        if (v < 0 || v >= image[i]) inside = false;                                \
                        base = base * image[i] + v;                                                \
                    }                                                                              \
                    if (inside) {                                                                  \
                        T *dr = dst + base * ilast + off;                                          \
                        const T *sr = src + q * glast;                                             \
                        if (sl == 1)                                                               \
                            for (int64_t j = lo; j < hi; j++) dr[j] += sr[j];                      \
                        else                                                                       \
                            for (int64_t j = lo; j < hi; j++) dr[j * sl] += sr[j];                 \
                    }                                                                              \
                    for (int i = last - 1; i >= 0; i--) {                                          \
                        if (++gp[i] < grid[i]) break;                                              \
                        gp[i] = 0;                                                                 \
                    }                                                                              \
                }                                                                                  \
            }                                                                                      \
    }
DEF_COL2IM(float)
DEF_COL2IM(double)

/* Row-major C[M,N] = A[M,K] B[K,N] through BLAS. */
static void gemm_nn_float(int64_t M, int64_t N, int64_t K, const float *a, const float *b,
                          float *c) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)M, (int)N, (int)K, 1.0f, a, (int)K,
                b, (int)N, 0.0f, c, (int)N);
}

static void gemm_nn_double(int64_t M, int64_t N, int64_t K, const double *a, const double *b,
                           double *c) {
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)M, (int)N, (int)K, 1.0, a, (int)K,
                b, (int)N, 0.0, c, (int)N);
}

/* ---- Col2Im ---------------------------------------------------------------------------- */

struct c2i_geom {
    int nsp;
    int64_t image[MAX_SP], k[MAX_SP], s[MAX_SP], d[MAX_SP], pads[2 * MAX_SP], blocks[MAX_SP];
    int64_t N, C;
};

static ox_status c2i_setup(const struct ox_node *n, const ox_tensor *const *in,
                           struct c2i_geom *g) {
    const ox_tensor *x = in[0];
    int64_t ni = read_shape_input(n, in[1], g->image, MAX_SP);
    if (ni < 0) return OX_E_INVALID;
    int64_t nb = read_shape_input(n, in[2], g->k, MAX_SP);
    if (nb < 0) return OX_E_INVALID;
    if (ni != nb || ni < 1)
        return ox_node_err(n, OX_E_SHAPE, "image_shape has %lld values, block_shape %lld",
                           (long long)ni, (long long)nb);
    int nsp = g->nsp = (int)ni;
    ox_status s;
    if ((s = ints_attr(n, "strides", nsp, g->s, 1)) ||
        (s = ints_attr(n, "dilations", nsp, g->d, 1)) ||
        (s = ints_attr(n, "pads", 2 * nsp, g->pads, 0)))
        return s;
    if (x->rank != 3)
        return ox_node_err(n, OX_E_SHAPE, "input rank %d: expected [N, C * prod(block), L]",
                           x->rank);
    int64_t ks = 1, L = 1;
    for (int i = 0; i < nsp; i++) {
        if (g->k[i] <= 0 || g->image[i] <= 0 || g->s[i] <= 0 || g->d[i] <= 0 || g->pads[i] < 0 ||
            g->pads[i + nsp] < 0)
            return ox_node_err(n, OX_E_INVALID,
                               "image and block shapes, strides and dilations must be positive, "
                               "pads not negative");
        int64_t ext = (g->k[i] - 1) * g->d[i] + 1;
        int64_t span = g->image[i] + g->pads[i] + g->pads[i + nsp] - ext;
        if (span < 0)
            return ox_node_err(n, OX_E_SHAPE, "block extent %lld exceeds the padded image %lld",
                               (long long)ext,
                               (long long)(g->image[i] + g->pads[i] + g->pads[i + nsp]));
        g->blocks[i] = span / g->s[i] + 1;
        if (ks > INT64_MAX / g->k[i] || L > INT64_MAX / g->blocks[i])
            return ox_node_err(n, OX_E_NOMEM, "block counts overflow");
        ks *= g->k[i];
        L *= g->blocks[i];
    }
    if (x->dims[1] % ks || x->dims[2] != L)
        return ox_node_err(n, OX_E_SHAPE,
                           "input [%lld, %lld, %lld]: dim 1 must be a multiple of %lld and dim 2 "
                           "must be %lld (the number of blocks)",
                           (long long)x->dims[0], (long long)x->dims[1], (long long)x->dims[2],
                           (long long)ks, (long long)L);
    g->N = x->dims[0];
    g->C = x->dims[1] / ks;
    return OX_OK;
}

ox_status ox_vis_infer_col2im(struct ox_infer_ctx *ctx, const struct ox_node *n,
                              const ox_tensor *const *in, ox_tensor *const *out) {
    const ox_tensor *x = ox_in(n, in, 0), *is = ox_in(n, in, 1), *bs = ox_in(n, in, 2);
    if (!x || !is || !bs)
        return ox_node_err(n, OX_E_INVALID, "expected inputs input, image_shape, block_shape");
    if (!is_float_type(x->dtype))
        return ox_node_err(n, OX_E_UNSUPPORTED, "element type %s: expected a float type",
                           ox_dtype_name(x->dtype));
    if (!known(is) || !known(bs)) return OX_NEED_DATA;
    struct c2i_geom g;
    ox_status s = c2i_setup(n, in, &g);
    if (s) return s;
    int64_t dims[OX_MAX_RANK] = {g.N, g.C};
    for (int i = 0; i < g.nsp; i++) dims[i + 2] = g.image[i];
    size_t bytes;
    if ((s = checked_count(n, g.nsp + 2, dims, 1, &bytes))) return s;
    ox_set_shape(out[0], x->dtype, g.nsp + 2, dims);
    if (is_half(x->dtype)) {
        int64_t cnt[1] = {ox_tensor_numel(x) + ox_tensor_numel(out[0])};
        if ((s = checked_count(n, 1, cnt, 4, &bytes))) return s;
        ctx->scratch_bytes = bytes;
    }
    return OX_OK;
}

ox_status ox_vis_cpu_col2im(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                            const ox_tensor *const *in, ox_tensor *const *out) {
    struct c2i_geom g;
    ox_status s = c2i_setup(n, in, &g);
    if (s) return s;
    const ox_tensor *x = in[0];
    int64_t per_in = x->dims[1] * x->dims[2], per_out = g.C * prod(g.image, g.nsp);
    if (x->dtype == OX_DOUBLE) {
        const double *xs = x->data;
        double *y = out[0]->data;
        memset(y, 0, (size_t)(g.N * per_out) * sizeof *y);
        for (int64_t b = 0; b < g.N; b++)
            col2im_double(xs + b * per_in, g.C, g.nsp, g.blocks, g.image, g.k, g.s, g.d, g.pads,
                          y + b * per_out);
        return OX_OK;
    }
    const float *xs = x->data;
    float *y = out[0]->data;
    if (is_half(x->dtype)) {
        float *fx = ctx->scratch;
        to_f32(x, fx);
        xs = fx;
        y = fx + ox_tensor_numel(x);
    }
    memset(y, 0, (size_t)(g.N * per_out) * sizeof *y);
    for (int64_t b = 0; b < g.N; b++)
        col2im_float(xs + b * per_in, g.C, g.nsp, g.blocks, g.image, g.k, g.s, g.d, g.pads,
                     y + b * per_out);
    if (is_half(x->dtype)) from_f32(y, out[0]);
    return OX_OK;
}

/* ---- DeformConv ------------------------------------------------------------------------ */

struct dc_geom {
    int nsp;
    int64_t in[MAX_SP], k[MAX_SP], s[MAX_SP], d[MAX_SP], pb[MAX_SP], out[MAX_SP];
    int64_t in_size, out_size, k_size;
    int64_t N, C, M, group, og;
};

static ox_status dc_setup(const struct ox_node *n, const ox_tensor *const *in, struct dc_geom *g) {
    const ox_tensor *x = in[0], *w = in[1], *off = in[2], *b = ox_in(n, in, 3),
                    *mask = ox_in(n, in, 4);
    char sx[256], sw[256], so[256];
    if (x->rank < 3 || w->rank != x->rank || off->rank != x->rank)
        return ox_node_err(n, OX_E_SHAPE, "X %s, W %s and offset %s: expected the same rank >= 3",
                           ox_tensor_desc(x, sx, sizeof sx), ox_tensor_desc(w, sw, sizeof sw),
                           ox_tensor_desc(off, so, sizeof so));
    int nsp = g->nsp = x->rank - 2;
    g->N = x->dims[0];
    g->C = x->dims[1];
    g->M = w->dims[0];
    g->group = ox_attr_int(n, "group", 1);
    g->og = ox_attr_int(n, "offset_group", 1);
    if (g->group <= 0 || g->og <= 0 || g->C % g->group || g->M % g->group || g->C % g->og ||
        w->dims[1] * g->group != g->C)
        return ox_node_err(n, OX_E_SHAPE,
                           "X %s, W %s, group %lld and offset_group %lld do not agree",
                           ox_tensor_desc(x, sx, sizeof sx), ox_tensor_desc(w, sw, sizeof sw),
                           (long long)g->group, (long long)g->og);
    ox_status s;
    int64_t ks[MAX_SP], pads[2 * MAX_SP];
    if ((s = ints_attr(n, "kernel_shape", nsp, ks, -1)) ||
        (s = ints_attr(n, "strides", nsp, g->s, 1)) ||
        (s = ints_attr(n, "dilations", nsp, g->d, 1)) ||
        (s = ints_attr(n, "pads", 2 * nsp, pads, 0)))
        return s;
    for (int i = 0; i < nsp; i++) {
        g->in[i] = x->dims[i + 2];
        g->k[i] = w->dims[i + 2];
        g->pb[i] = pads[i];
        if (ks[i] >= 0 && ks[i] != g->k[i])
            return ox_node_err(n, OX_E_SHAPE, "kernel_shape disagrees with weights %s",
                               ox_tensor_desc(w, sw, sizeof sw));
        if (g->k[i] <= 0 || g->s[i] <= 0 || g->d[i] <= 0 || pads[i] < 0 || pads[i + nsp] < 0)
            return ox_node_err(n, OX_E_INVALID,
                               "kernel, strides and dilations must be positive, pads not "
                               "negative");
        int64_t span = g->in[i] + pads[i] + pads[i + nsp] - ((g->k[i] - 1) * g->d[i] + 1);
        if (span < 0) return ox_node_err(n, OX_E_SHAPE, "kernel larger than the padded input");
        g->out[i] = span / g->s[i] + 1;
    }
    g->in_size = prod(g->in, nsp);
    g->out_size = prod(g->out, nsp);
    g->k_size = prod(g->k, nsp);
    /* offset [N, og * prod(k) * nsp, out...], mask [N, og * prod(k), out...] */
    bool ok = off->dims[0] == g->N && off->dims[1] == g->og * g->k_size * nsp;
    for (int i = 0; i < nsp; i++) ok = ok && off->dims[i + 2] == g->out[i];
    if (!ok)
        return ox_node_err(n, OX_E_SHAPE, "offset %s: expected [%lld, %lld, output dims]",
                           ox_tensor_desc(off, so, sizeof so), (long long)g->N,
                           (long long)(g->og * g->k_size * nsp));
    if (mask) {
        ok = mask->rank == x->rank && mask->dims[0] == g->N && mask->dims[1] == g->og * g->k_size;
        for (int i = 0; ok && i < nsp; i++) ok = mask->dims[i + 2] == g->out[i];
        if (!ok || mask->dtype != x->dtype)
            return ox_node_err(n, OX_E_SHAPE, "mask %s: expected [%lld, %lld, output dims]",
                               ox_tensor_desc(mask, so, sizeof so), (long long)g->N,
                               (long long)(g->og * g->k_size));
    }
    if (b && (b->rank != 1 || b->dims[0] != g->M || b->dtype != x->dtype))
        return ox_node_err(n, OX_E_SHAPE, "B must be [%lld] of %s", (long long)g->M,
                           ox_dtype_name(x->dtype));
    if (w->dtype != x->dtype || off->dtype != x->dtype)
        return ox_node_err(n, OX_E_SHAPE, "X, W and offset must have one element type");
    return OX_OK;
}

ox_status ox_vis_infer_deformconv(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                  const ox_tensor *const *in, ox_tensor *const *out) {
    if (!ox_in(n, in, 0) || !ox_in(n, in, 1) || !ox_in(n, in, 2))
        return ox_node_err(n, OX_E_INVALID, "expected inputs X, W and offset");
    if (!is_float_type(in[0]->dtype))
        return ox_node_err(n, OX_E_UNSUPPORTED, "element type %s: expected a float type",
                           ox_dtype_name(in[0]->dtype));
    struct dc_geom g;
    ox_status s = dc_setup(n, in, &g);
    if (s) return s;
    int64_t dims[OX_MAX_RANK] = {g.N, g.M};
    for (int i = 0; i < g.nsp; i++) dims[i + 2] = g.out[i];
    size_t bytes, extra;
    if ((s = checked_count(n, g.nsp + 2, dims, 1, &bytes))) return s;
    int64_t rows = g.C / g.group * g.k_size;
    if (rows > INT_MAX || g.out_size > INT_MAX || g.M > INT_MAX)
        return ox_node_err(n, OX_E_UNSUPPORTED, "gemm dims exceed the BLAS int range");
    ox_set_shape(out[0], in[0]->dtype, g.nsp + 2, dims);
    int64_t cd[2] = {rows, g.out_size};
    if ((s = checked_count(n, 2, cd, in[0]->dtype == OX_DOUBLE ? 8 : 4, &bytes))) return s;
    if (is_half(in[0]->dtype)) {
        int64_t cnt[1] = {ox_tensor_numel(out[0])};
        for (int i = 0; i < 5; i++)
            if (ox_in(n, in, i)) cnt[0] += ox_tensor_numel(in[i]);
        if ((s = checked_count(n, 1, cnt, 4, &extra)) || (s = add_bytes(n, &bytes, extra)))
            return s;
    }
    ctx->scratch_bytes = bytes;
    return OX_OK;
}

/* Multilinear sample of x[in...] at real position pos (zero outside). */
#define DEF_SAMPLE(T)                                                                              \
    static T sample_##T(const T *x, int nsp, const int64_t *in, const double *pos) {               \
        int64_t lo[MAX_SP];                                                                        \
        double fr[MAX_SP];                                                                         \
        for (int i = 0; i < nsp; i++) {                                                            \
            double p = pos[i];                                                                     \
            if (!(p > -1.0 && p < (double)in[i])) return 0; /* also NaN */                         \
            double f = floor(p);                                                                   \
            lo[i] = (int64_t)f;                                                                    \
            fr[i] = p - f;                                                                         \
        }                                                                                          \
        double acc = 0;                                                                            \
        for (int corner = 0; corner < (1 << nsp); corner++) {                                      \
            double wt = 1;                                                                         \
            int64_t idx = 0;                                                                       \
            bool inside = true;                                                                    \
            for (int i = 0; i < nsp; i++) {                                                        \
                int bit = (corner >> (nsp - 1 - i)) & 1;                                           \
                int64_t v = lo[i] + bit;                                                           \
                wt *= bit ? fr[i] : 1 - fr[i];                                                     \
                if (v < 0 || v >= in[i]) inside = false;                                           \
                idx = idx * in[i] + v;                                                             \
            }                                                                                      \
            if (inside && wt != 0) acc += wt * (double)x[idx];                                     \
        }                                                                                          \
        return (T)acc;                                                                             \
    }
DEF_SAMPLE(float)
DEF_SAMPLE(double)

#define DEF_DEFORM(T)                                                                              \
    static void deform_##T(const T *x, const T *w, const T *off, const T *b, const T *mask, T *y,  \
                           const struct dc_geom *g, T *col) {                                      \
        int nsp = g->nsp;                                                                          \
        int64_t cg = g->C / g->group, mg = g->M / g->group, kdim = cg * g->k_size;                 \
        int64_t cpo = g->C / g->og, P = g->out_size;                                               \
        for (int64_t nn = 0; nn < g->N; nn++) {                                                    \
            for (int64_t gr = 0; gr < g->group; gr++) {                                            \
                for (int64_t c = 0; c < cg; c++) {                                                 \
                    int64_t ch = gr * cg + c, ogi = ch / cpo;                                      \
                    const T *xc = x + (nn * g->C + ch) * g->in_size;                               \
                    const T *oc = off + (nn * g->og + ogi) * g->k_size * nsp * P;                  \
                    const T *mc = mask ? mask + (nn * g->og + ogi) * g->k_size * P : NULL;         \
                    for (int64_t kk = 0; kk < g->k_size; kk++) {                                   \
                        int64_t ko[MAX_SP], r = kk, o[MAX_SP] = {0};                               \
                        for (int i = nsp - 1; i >= 0; i--) ko[i] = r % g->k[i], r /= g->k[i];      \
                        T *dst = col + (c * g->k_size + kk) * P;                                   \
                        for (int64_t p = 0; p < P; p++) {                                          \
                            double pos[MAX_SP];                                                    \
                            for (int i = 0; i < nsp; i++)                                          \
                                pos[i] = (double)(o[i] * g->s[i] - g->pb[i] + ko[i] * g->d[i]) +   \
                                         (double)oc[(kk * nsp + i) * P + p];                       \
                            T v = sample_##T(xc, nsp, g->in, pos);                                 \
                            dst[p] = mc ? v * mc[kk * P + p] : v;                                  \
                            for (int i = nsp - 1; i >= 0; i--) {                                   \
                                if (++o[i] < g->out[i]) break;                                     \
                                o[i] = 0;                                                          \
                            }                                                                      \
                        }                                                                          \
                    }                                                                              \
                }                                                                                  \
                T *yg = y + (nn * g->M + gr * mg) * P;                                             \
                if (kdim > 0 && P > 0 && mg > 0)                                                   \
                    gemm_nn_##T(mg, P, kdim, w + gr * mg * kdim, col, yg);                         \
                else                                                                               \
                    for (int64_t i = 0; i < mg * P; i++) yg[i] = 0;                                \
                for (int64_t m = 0; m < mg; m++) {                                                 \
                    T bv = b ? b[gr * mg + m] : 0;                                                 \
                    if (bv != 0)                                                                   \
                        for (int64_t p = 0; p < P; p++) yg[m * P + p] += bv;                       \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }
DEF_DEFORM(float)
DEF_DEFORM(double)

ox_status ox_vis_cpu_deformconv(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                                const ox_tensor *const *in, ox_tensor *const *out) {
    struct dc_geom g;
    ox_status s = dc_setup(n, in, &g);
    if (s) return s;
    const ox_tensor *b = ox_in(n, in, 3), *mask = ox_in(n, in, 4);
    if (in[0]->dtype == OX_FLOAT) {
        deform_float(in[0]->data, in[1]->data, in[2]->data, b ? b->data : NULL,
                     mask ? mask->data : NULL, out[0]->data, &g, ctx->scratch);
    } else if (in[0]->dtype == OX_DOUBLE) {
        deform_double(in[0]->data, in[1]->data, in[2]->data, b ? b->data : NULL,
                      mask ? mask->data : NULL, out[0]->data, &g, ctx->scratch);
    } else {
        float *col = ctx->scratch, *f[5] = {0};
        float *p = col + g.C / g.group * g.k_size * g.out_size;
        for (int i = 0; i < 5; i++)
            if (ox_in(n, in, i)) {
                f[i] = p;
                to_f32(in[i], p);
                p += ox_tensor_numel(in[i]);
            }
        deform_float(f[0], f[1], f[2], f[3], f[4], p, &g, col);
        from_f32(p, out[0]);
    }
    return OX_OK;
}

/* ---- GridSample ------------------------------------------------------------------------ */

enum { GS_LINEAR, GS_NEAREST, GS_CUBIC };
enum { GS_ZEROS, GS_BORDER, GS_REFLECTION };

struct gs_opts {
    int mode, pad;
    bool align;
};

static ox_status gs_opts(const struct ox_node *n, struct gs_opts *o) {
    const char *mode = ox_attr_str(n, "mode", n->opset >= 20 ? "linear" : "bilinear");
    const char *pad = ox_attr_str(n, "padding_mode", "zeros");
    bool v20 = n->opset >= 20;
    if (strcmp(mode, "nearest") == 0)
        o->mode = GS_NEAREST;
    else if (strcmp(mode, v20 ? "linear" : "bilinear") == 0)
        o->mode = GS_LINEAR;
    else if (strcmp(mode, v20 ? "cubic" : "bicubic") == 0)
        o->mode = GS_CUBIC;
    else
        return ox_node_err(n, OX_E_INVALID, "mode '%s': expected %s", mode,
                           v20 ? "linear, nearest or cubic" : "bilinear, nearest or bicubic");
    if (strcmp(pad, "zeros") == 0)
        o->pad = GS_ZEROS;
    else if (strcmp(pad, "border") == 0)
        o->pad = GS_BORDER;
    else if (strcmp(pad, "reflection") == 0)
        o->pad = GS_REFLECTION;
    else
        return ox_node_err(n, OX_E_INVALID,
                           "padding_mode '%s': expected zeros, border or reflection", pad);
    o->align = ox_attr_int(n, "align_corners", 0) != 0;
    return OX_OK;
}

ox_status ox_vis_infer_gridsample(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                  const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    const ox_tensor *x = ox_in(n, in, 0), *grid = ox_in(n, in, 1);
    if (!x || !grid) return ox_node_err(n, OX_E_INVALID, "expected inputs X and grid");
    struct gs_opts o;
    ox_status s = gs_opts(n, &o);
    if (s) return s;
    if (x->dtype == OX_STRING || x->dtype == OX_COMPLEX64 || x->dtype == OX_COMPLEX128 ||
        !is_float_type(grid->dtype))
        return ox_node_err(n, OX_E_UNSUPPORTED, "element types %s (X) and %s (grid)",
                           ox_dtype_name(x->dtype), ox_dtype_name(grid->dtype));
    char sx[256], sg[256];
    if (x->rank < 3 || (n->opset < 20 && x->rank != 4) || grid->rank != x->rank ||
        grid->dims[0] != x->dims[0] || grid->dims[x->rank - 1] != x->rank - 2)
        return ox_node_err(n, OX_E_SHAPE,
                           "X %s and grid %s: expected [N, C, D1..Dr] and [N, O1..Or, r]%s",
                           ox_tensor_desc(x, sx, sizeof sx), ox_tensor_desc(grid, sg, sizeof sg),
                           n->opset < 20 ? " with r = 2" : "");
    int64_t dims[OX_MAX_RANK] = {x->dims[0], x->dims[1]};
    for (int i = 2; i < x->rank; i++) dims[i] = grid->dims[i - 1];
    ox_set_shape(out[0], x->dtype, x->rank, dims);
    return OX_OK;
}

/* Reflect x into [lo, hi] (by the nearer border, repeatedly). */
static double gs_reflect(double x, double lo, double hi) {
    double rng = hi - lo;
    if (rng <= 0 || x != x) return lo;
    if (x < lo) {
        double dx = lo - x, k = floor(dx / rng), r = dx - k * rng;
        return fmod(k, 2) == 0 ? lo + r : hi - r;
    }
    if (x > hi) {
        double dx = x - hi, k = floor(dx / rng), r = dx - k * rng;
        return fmod(k, 2) == 0 ? hi - r : lo + r;
    }
    return x;
}

/* Keys cubic convolution weights (alpha -0.75) for the taps at -1, 0, 1, 2 from t in [0, 1). */
static void cubic_coeffs(double t, double *c) {
    const double A = -0.75;
    double x0 = t + 1, x1 = t, x2 = 1 - t, x3 = 2 - t;
    c[0] = ((A * x0 - 5 * A) * x0 + 8 * A) * x0 - 4 * A;
    c[1] = ((A + 2) * x1 - (A + 3)) * x1 * x1 + 1;
    c[2] = ((A + 2) * x2 - (A + 3)) * x2 * x2 + 1;
    c[3] = ((A * x3 - 5 * A) * x3 + 8 * A) * x3 - 4 * A;
}

/* The index of integer tap v in a dim of `size` under the padding mode, or -1 for zero. */
static int64_t gs_tap(int64_t v, int64_t size, const struct gs_opts *o, double lo, double hi) {
    if (v >= 0 && v < size) return v;
    if (o->pad == GS_ZEROS) return -1;
    if (o->pad == GS_BORDER) return v < 0 ? 0 : size - 1;
    int64_t r = (int64_t)gs_reflect((double)v, lo, hi);
    return r < 0 ? 0 : r >= size ? size - 1 : r;
}

ox_status ox_vis_cpu_gridsample(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                                const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    const ox_tensor *x = in[0], *grid = in[1];
    ox_tensor *y = out[0];
    struct gs_opts o;
    ox_status s = gs_opts(n, &o);
    if (s) return s;
    int nsp = x->rank - 2;
    int64_t N = x->dims[0], C = x->dims[1], in_size = 1, P = 1;
    const int64_t *dims = x->dims + 2;
    for (int i = 0; i < nsp; i++) in_size *= dims[i], P *= grid->dims[i + 1];
    int taps = o.mode == GS_NEAREST ? 1 : o.mode == GS_LINEAR ? 2 : 4;
    int64_t n_combos = 1;
    for (int i = 0; i < nsp; i++) n_combos *= taps;
    for (int64_t nn = 0; nn < N; nn++)
        for (int64_t p = 0; p < P; p++) {
            /* per spatial dim: the taps' indices (-1: zero) and weights */
            int64_t idx[MAX_SP][4];
            double wt[MAX_SP][4];
            for (int i = 0; i < nsp; i++) {
                double g = ox_ld(grid, (nn * P + p) * nsp + (nsp - 1 - i)), D = (double)dims[i];
                double v = o.align ? (g + 1) / 2 * (D - 1) : ((g + 1) * D - 1) / 2;
                double lo = o.align ? 0 : -0.5, hi = o.align ? D - 1 : D - 0.5;
                if (o.mode == GS_NEAREST) v = nearbyint(v); /* half to even */
                if (v != v) v = o.pad == GS_ZEROS ? -1e30 : lo;
                if (v < lo || v > hi) {
                    if (o.pad == GS_BORDER)
                        v = v < 0 ? 0 : v > D - 1 ? D - 1 : v;
                    else if (o.pad == GS_REFLECTION)
                        v = gs_reflect(v, lo, hi);
                }
                if (v < -1e15) v = -1e15; /* far outside: keeps the integer casts defined */
                if (v > 1e15) v = 1e15;
                if (o.mode == GS_NEAREST) {
                    idx[i][0] = gs_tap((int64_t)v, dims[i], &o, lo, hi);
                    wt[i][0] = 1;
                    continue;
                }
                double f = floor(v), t = v - f;
                int64_t base = (int64_t)f;
                if (o.mode == GS_LINEAR) {
                    wt[i][0] = 1 - t;
                    wt[i][1] = t;
                    for (int k = 0; k < 2; k++) idx[i][k] = gs_tap(base + k, dims[i], &o, lo, hi);
                } else {
                    cubic_coeffs(t, wt[i]);
                    for (int k = 0; k < 4; k++)
                        idx[i][k] = gs_tap(base - 1 + k, dims[i], &o, lo, hi);
                }
            }
            for (int64_t c = 0; c < C; c++) {
                int64_t xbase = (nn * C + c) * in_size;
                double acc = 0;
                for (int64_t q = 0; q < n_combos; q++) {
                    int64_t r = q, off = 0, stride = 1;
                    double w = 1;
                    bool zero = false;
                    for (int i = nsp - 1; i >= 0 && !zero; i--) {
                        int k = (int)(r % taps);
                        r /= taps;
                        if (idx[i][k] < 0) zero = true;
                        w *= wt[i][k];
                        off += idx[i][k] * stride;
                        stride *= dims[i];
                    }
                    if (zero || w == 0) continue;
                    acc += w * ox_ld(x, xbase + off);
                }
                ox_st(y, (nn * C + c) * P + p, acc);
            }
        }
    return OX_OK;
}

/* ---- AffineGrid ------------------------------------------------------------------------ */

ox_status ox_vis_infer_affinegrid(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                  const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    const ox_tensor *theta = ox_in(n, in, 0), *size = ox_in(n, in, 1);
    if (!theta || !size) return ox_node_err(n, OX_E_INVALID, "expected inputs theta and size");
    if (!is_float_type(theta->dtype))
        return ox_node_err(n, OX_E_UNSUPPORTED, "element type %s: expected a float type",
                           ox_dtype_name(theta->dtype));
    if (!known(size)) return OX_NEED_DATA;
    int64_t sz[6];
    int64_t ns = read_shape_input(n, size, sz, 6);
    if (ns < 0) return OX_E_INVALID;
    char st_[256];
    if (ns != 4 && ns != 5)
        return ox_node_err(n, OX_E_SHAPE, "size has %lld values: expected 4 or 5", (long long)ns);
    int r = (int)ns - 2;
    if (theta->rank != 3 || theta->dims[0] != sz[0] || theta->dims[1] != r ||
        theta->dims[2] != r + 1)
        return ox_node_err(n, OX_E_SHAPE, "theta %s: expected [%lld, %d, %d]",
                           ox_tensor_desc(theta, st_, sizeof st_), (long long)sz[0], r, r + 1);
    int64_t dims[OX_MAX_RANK];
    dims[0] = sz[0];
    for (int i = 0; i < r; i++) {
        if (sz[i + 2] <= 0)
            return ox_node_err(n, OX_E_SHAPE, "size has a non-positive spatial extent");
        dims[i + 1] = sz[i + 2];
    }
    dims[r + 1] = r;
    size_t bytes;
    ox_status s = checked_count(n, r + 2, dims, 1, &bytes);
    if (s) return s;
    ox_set_shape(out[0], theta->dtype, r + 2, dims);
    return OX_OK;
}

ox_status ox_vis_cpu_affinegrid(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                                const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    const ox_tensor *theta = in[0];
    ox_tensor *y = out[0];
    int r = y->rank - 2;
    int64_t N = y->dims[0], P = 1;
    const int64_t *sp = y->dims + 1; /* spatial extents, outermost first (D, H, W) */
    for (int i = 0; i < r; i++) P *= sp[i];
    bool align = ox_attr_int(n, "align_corners", 0) != 0;
    for (int64_t nn = 0; nn < N; nn++) {
        int64_t o[MAX_SP] = {0};
        for (int64_t p = 0; p < P; p++) {
            /* homogeneous base point: (x, y[, z], 1) with x along the last spatial dim */
            double base[4];
            for (int i = 0; i < r; i++) {
                int j = r - 1 - i; /* spatial dim of coordinate i */
                double L = (double)sp[j], v = (double)o[j];
                base[i] = align ? (L > 1 ? -1 + 2 * v / (L - 1) : -1) : (2 * v + 1) / L - 1;
            }
            base[r] = 1;
            for (int i = 0; i < r; i++) {
                double acc = 0;
                for (int k = 0; k <= r; k++)
                    acc += ox_ld(theta, (nn * r + i) * (r + 1) + k) * base[k];
                ox_st(y, (nn * P + p) * r + i, acc);
            }
            for (int i = r - 1; i >= 0; i--) {
                if (++o[i] < sp[i]) break;
                o[i] = 0;
            }
        }
    }
    return OX_OK;
}

/* ---- RoiAlign -------------------------------------------------------------------------- */

struct ra_opts {
    bool max, half_pixel;
    int64_t oh, ow, ratio;
    double scale;
};

#define RA_MAX_RATIO 256

static ox_status ra_opts(const struct ox_node *n, struct ra_opts *o) {
    const char *mode = ox_attr_str(n, "mode", "avg");
    const char *ctm = ox_attr_str(n, "coordinate_transformation_mode",
                                  n->opset >= 16 ? "half_pixel" : "output_half_pixel");
    if (strcmp(mode, "avg") && strcmp(mode, "max"))
        return ox_node_err(n, OX_E_INVALID, "mode '%s': expected avg or max", mode);
    if (strcmp(ctm, "half_pixel") && strcmp(ctm, "output_half_pixel"))
        return ox_node_err(n, OX_E_INVALID,
                           "coordinate_transformation_mode '%s': expected half_pixel or "
                           "output_half_pixel",
                           ctm);
    o->max = mode[0] == 'm';
    o->half_pixel = ctm[0] == 'h';
    o->oh = ox_attr_int(n, "output_height", 1);
    o->ow = ox_attr_int(n, "output_width", 1);
    o->ratio = ox_attr_int(n, "sampling_ratio", 0);
    o->scale = ox_attr_float(n, "spatial_scale", 1.0f);
    if (o->oh <= 0 || o->ow <= 0 || o->ratio < 0)
        return ox_node_err(n, OX_E_INVALID,
                           "output_height and output_width must be positive, sampling_ratio "
                           "not negative");
    /* every output element averages ratio^2 samples, wherever they fall on the map: a ratio
     * in the millions is hours of work for a few outputs (a file can ask for it) */
    if (o->ratio > RA_MAX_RATIO)
        return ox_node_err(n, OX_E_UNSUPPORTED,
                           "sampling_ratio %lld: at most %d samples per bin side are taken "
                           "(0, adaptive, or 2 are usual)",
                           (long long)o->ratio, RA_MAX_RATIO);
    return OX_OK;
}

ox_status ox_vis_infer_roialign(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    const ox_tensor *x = ox_in(n, in, 0), *rois = ox_in(n, in, 1), *bi = ox_in(n, in, 2);
    if (!x || !rois || !bi)
        return ox_node_err(n, OX_E_INVALID, "expected inputs X, rois and batch_indices");
    struct ra_opts o;
    ox_status s = ra_opts(n, &o);
    if (s) return s;
    if (!is_float_type(x->dtype) || !is_float_type(rois->dtype) || !ox_dtype_is_int(bi->dtype))
        return ox_node_err(n, OX_E_UNSUPPORTED, "element types %s, %s, %s", ox_dtype_name(x->dtype),
                           ox_dtype_name(rois->dtype), ox_dtype_name(bi->dtype));
    char sx[256], sr[256], sb[256];
    if (x->rank != 4 || rois->rank != 2 || rois->dims[1] != 4 || bi->rank != 1 ||
        bi->dims[0] != rois->dims[0])
        return ox_node_err(n, OX_E_SHAPE,
                           "X %s, rois %s, batch_indices %s: expected [N, C, H, W], [R, 4], [R]",
                           ox_tensor_desc(x, sx, sizeof sx), ox_tensor_desc(rois, sr, sizeof sr),
                           ox_tensor_desc(bi, sb, sizeof sb));
    int64_t dims[4] = {rois->dims[0], x->dims[1], o.oh, o.ow};
    size_t bytes;
    if ((s = checked_count(n, 4, dims, 1, &bytes))) return s;
    ox_set_shape(out[0], x->dtype, 4, dims);
    return OX_OK;
}

/* The samples k in [0, g) at a + (k + 0.5) * b / g that may lie in [-1, hi] (the bin's
 * samples on the map, with a margin of one: the caller checks each): [*k0, *k1). */
static void ra_on_map(double a, double b, double g, double hi, int64_t *k0, int64_t *k1) {
    *k0 = *k1 = 0;
    if (!(g >= 1)) return;
    double step = b / g, lo_k = 0, hi_k = g;
    if (step != 0) {
        double t0 = (-1.0 - a) / step - 0.5, t1 = (hi - a) / step - 0.5;
        lo_k = floor(fmin(t0, t1)) - 1;
        hi_k = ceil(fmax(t0, t1)) + 2;
    } else if (a < -1.0 || a > hi) {
        return;
    }
    lo_k = fmax(lo_k, 0);
    hi_k = fmin(hi_k, g);
    if (!(lo_k < hi_k)) return;
    *k0 = (int64_t)lo_k;
    *k1 = (int64_t)hi_k;
}

/* One RoiAlign call's operands, for the rois' threads. */
struct ra_job {
    const ox_tensor *x, *rois, *bi;
    ox_tensor *y;
    struct ra_opts o;
    const float *xf; /* x's and y's floats when both are float (no per-element dtype switch) */
    float *yf;
};

#define RA_LD(i)    (j->xf ? (double)j->xf[i] : ox_ld(x, i))
#define RA_YLD(i)   (j->yf ? (double)j->yf[i] : ox_ld(y, i))
#define RA_ST(i, v) (j->yf ? (void)(j->yf[i] = (float)(v)) : ox_st(y, i, v))

/* Roi r's corners on the map: scaled, and shifted by half a pixel in half_pixel mode. */
static void ra_corners(const ox_tensor *rois, int64_t r, const struct ra_opts *o, double *x0,
                       double *y0, double *x1, double *y1) {
    double off = o->half_pixel ? 0.5 : 0;
    *x0 = ox_ld(rois, r * 4) * o->scale - off, *y0 = ox_ld(rois, r * 4 + 1) * o->scale - off;
    *x1 = ox_ld(rois, r * 4 + 2) * o->scale - off, *y1 = ox_ld(rois, r * 4 + 3) * o->scale - off;
}

/* Rois [r0, r1): each writes its own C x oh x ow outputs. */
static void ra_rois(void *arg, int64_t r0, int64_t r1, int tid) {
    (void)tid;
    const struct ra_job *j = arg;
    const ox_tensor *x = j->x, *rois = j->rois;
    ox_tensor *y = j->y;
    const struct ra_opts o = j->o;
    int64_t C = x->dims[1], H = x->dims[2], W = x->dims[3];
    int64_t plane = o.oh * o.ow;
    for (int64_t r = r0; r < r1; r++) {
        int64_t b = ox_get_i64(j->bi, r);
        double x0, y0, x1, y1;
        ra_corners(rois, r, &o, &x0, &y0, &x1, &y1);
        double rw = x1 - x0, rh = y1 - y0;
        if (!o.half_pixel) { /* malformed rois are forced to 1x1 */
            rw = rw > 1 ? rw : 1;
            rh = rh > 1 ? rh : 1;
        }
        double bh = rh / (double)o.oh, bw = rw / (double)o.ow;
        /* the adaptive grid may be far larger than the map (a huge roi): counted in double,
         * and only its samples on the map are visited, the others weighing nothing */
        double gh = o.ratio > 0 ? (double)o.ratio : ceil(rh / (double)o.oh);
        double gw = o.ratio > 0 ? (double)o.ratio : ceil(rw / (double)o.ow);
        if (gh < 0) gh = 0;
        if (gw < 0) gw = 0;
        double count = gh * gw > 1 ? gh * gw : 1;
        int64_t ybase = r * C * plane;
        for (int64_t ph = 0; ph < o.oh; ph++)
            for (int64_t pw = 0; pw < o.ow; pw++) {
                int64_t yo = ybase + ph * o.ow + pw;
                for (int64_t c = 0; c < C; c++) RA_ST(yo + c * plane, 0);
                int64_t iy0, iy1, ix0, ix1;
                ra_on_map(y0 + (double)ph * bh, bh, gh, (double)H, &iy0, &iy1);
                ra_on_map(x0 + (double)pw * bw, bw, gw, (double)W, &ix0, &ix1);
                bool first = true;
                for (int64_t iy = iy0; iy < iy1; iy++) {
                    double yy = y0 + (double)ph * bh + ((double)iy + 0.5) * bh / gh;
                    for (int64_t ix = ix0; ix < ix1; ix++) {
                        double xx = x0 + (double)pw * bw + ((double)ix + 0.5) * bw / gw;
                        /* bilinear taps and weights; samples beyond the map weigh nothing */
                        int64_t pos[4] = {0, 0, 0, 0};
                        double w[4] = {0, 0, 0, 0};
                        /* an empty map (H or W 0) has no taps to read: every sample is off */
                        bool on = H > 0 && W > 0 &&
                                  !(yy < -1.0 || yy > (double)H || xx < -1.0 || xx > (double)W);
                        if (on) {
                            double sy = yy > 0 ? yy : 0, sx = xx > 0 ? xx : 0;
                            int64_t ylo = (int64_t)sy, xlo = (int64_t)sx, yhi, xhi;
                            if (ylo >= H - 1) {
                                yhi = ylo = H - 1;
                                sy = (double)ylo;
                            } else {
                                yhi = ylo + 1;
                            }
                            if (xlo >= W - 1) {
                                xhi = xlo = W - 1;
                                sx = (double)xlo;
                            } else {
                                xhi = xlo + 1;
                            }
                            double ly = sy - (double)ylo, lx = sx - (double)xlo;
                            double hy = 1 - ly, hx = 1 - lx;
                            pos[0] = ylo * W + xlo;
                            pos[1] = ylo * W + xhi;
                            pos[2] = yhi * W + xlo;
                            pos[3] = yhi * W + xhi;
                            w[0] = hy * hx;
                            w[1] = hy * lx;
                            w[2] = ly * hx;
                            w[3] = ly * lx;
                        }
                        for (int64_t c = 0; c < C; c++) {
                            int64_t xb = (b * C + c) * H * W;
                            double v0 = 0, v1 = 0, v2 = 0, v3 = 0;
                            if (on) {
                                v0 = w[0] * RA_LD(xb + pos[0]);
                                v1 = w[1] * RA_LD(xb + pos[1]);
                                v2 = w[2] * RA_LD(xb + pos[2]);
                                v3 = w[3] * RA_LD(xb + pos[3]);
                            }
                            int64_t yi = yo + c * plane;
                            if (o.max) {
                                /* max over samples of the largest weighted tap */
                                double m = fmax(fmax(v0, v1), fmax(v2, v3));
                                RA_ST(yi, first ? m : fmax(RA_YLD(yi), m));
                            } else {
                                RA_ST(yi, RA_YLD(yi) + v0 + v1 + v2 + v3);
                            }
                        }
                        first = false;
                    }
                }
                /* a sample left out (off the map) counts as 0 in the max */
                if (o.max && (double)(iy1 - iy0) * (double)(ix1 - ix0) < gh * gw)
                    for (int64_t c = 0; c < C; c++)
                        RA_ST(yo + c * plane, first ? 0 : fmax(RA_YLD(yo + c * plane), 0));
                if (!o.max)
                    for (int64_t c = 0; c < C; c++)
                        RA_ST(yo + c * plane, RA_YLD(yo + c * plane) / count);
            }
    }
}

#undef RA_LD
#undef RA_YLD
#undef RA_ST

ox_status ox_vis_cpu_roialign(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                              const ox_tensor *const *in, ox_tensor *const *out) {
    const ox_tensor *x = in[0], *rois = in[1], *bi = in[2];
    struct ra_job j = {.x = x, .rois = rois, .bi = bi, .y = out[0]};
    ox_status s = ra_opts(n, &j.o);
    if (s) return s;
    int64_t N = x->dims[0], R = rois->dims[0];
    for (int64_t r = 0; r < R; r++) { /* the errors first, then the rois in parallel */
        int64_t b = ox_get_i64(bi, r);
        if (b < 0 || b >= N)
            return ox_node_err(n, OX_E_INVALID, "batch index %lld of roi %lld: expected [0, %lld)",
                               (long long)b, (long long)r, (long long)N);
        double x0, y0, x1, y1;
        ra_corners(rois, r, &j.o, &x0, &y0, &x1, &y1);
        if (!isfinite(x0) || !isfinite(y0) || !isfinite(x1 - x0) || !isfinite(y1 - y0))
            return ox_node_err(n, OX_E_INVALID, "roi %lld has a coordinate that is not finite",
                               (long long)r);
    }
    if (x->dtype == OX_FLOAT && out[0]->dtype == OX_FLOAT) {
        j.xf = x->data;
        j.yf = out[0]->data;
    }
    ox_parallel_for(ctx->pool, R, ra_rois, &j);
    return OX_OK;
}

/* ---- NonMaxSuppression ----------------------------------------------------------------- */

struct nms_in {
    const ox_tensor *boxes, *scores;
    int64_t B, S, K, max_out;
    double iou, score_thr;
    bool has_score_thr, center;
};

static ox_status nms_read(const struct ox_node *n, const ox_tensor *const *in, struct nms_in *a) {
    a->boxes = in[0];
    a->scores = in[1];
    const ox_tensor *mo = ox_in(n, in, 2), *iou = ox_in(n, in, 3), *sthr = ox_in(n, in, 4);
    a->B = a->boxes->dims[0];
    a->S = a->boxes->dims[1];
    a->K = a->scores->dims[1];
    a->max_out = 0;
    a->iou = 0;
    a->score_thr = 0;
    a->has_score_thr = false;
    a->center = ox_attr_int(n, "center_point_box", 0) != 0;
    if (mo && ox_tensor_numel(mo) > 0) {
        if (!ox_dtype_is_int(mo->dtype))
            return ox_node_err(n, OX_E_INVALID, "max_output_boxes_per_class must be an integer");
        a->max_out = ox_get_i64(mo, 0);
        if (a->max_out < 0) a->max_out = 0;
    }
    if (iou && ox_tensor_numel(iou) > 0) a->iou = ox_ld(iou, 0);
    if (sthr && ox_tensor_numel(sthr) > 0) {
        a->score_thr = ox_ld(sthr, 0);
        a->has_score_thr = true;
    }
    return OX_OK;
}

static ox_status nms_check(const struct ox_node *n, const ox_tensor *const *in) {
    const ox_tensor *boxes = ox_in(n, in, 0), *scores = ox_in(n, in, 1);
    if (!boxes || !scores) return ox_node_err(n, OX_E_INVALID, "expected boxes and scores");
    char sb[256], ss[256];
    if (boxes->rank != 3 || boxes->dims[2] != 4 || scores->rank != 3 ||
        scores->dims[0] != boxes->dims[0] || scores->dims[2] != boxes->dims[1])
        return ox_node_err(
            n, OX_E_SHAPE, "boxes %s and scores %s: expected [B, S, 4] and [B, classes, S]",
            ox_tensor_desc(boxes, sb, sizeof sb), ox_tensor_desc(scores, ss, sizeof ss));
    if (!is_float_type(boxes->dtype) || !is_float_type(scores->dtype))
        return ox_node_err(n, OX_E_UNSUPPORTED, "element types %s and %s: expected float",
                           ox_dtype_name(boxes->dtype), ox_dtype_name(scores->dtype));
    for (int i = 2; i < 5; i++) {
        const ox_tensor *t = ox_in(n, in, i);
        if (t && ox_tensor_numel(t) > 1)
            return ox_node_err(n, OX_E_SHAPE, "input %d must hold one value", i);
    }
    return OX_OK;
}

/* The extents of every box of one batch item, computed once: lo/hi corners and the area, in
 * double (the spec's comparisons at any float precision). Boxes are [y1, x1, y2, x2] with any
 * diagonal pair of corners, or [x_center, y_center, width, height] with center_point_box. */
struct nms_box {
    double ylo, yhi, xlo, xhi, area;
};

static void nms_extents(const struct nms_in *a, int64_t bb, struct nms_box *bx) {
    for (int64_t i = 0; i < a->S; i++) {
        double b[4];
        for (int k = 0; k < 4; k++) b[k] = ox_ld(a->boxes, (bb * a->S + i) * 4 + k);
        struct nms_box *o = &bx[i];
        if (a->center) {
            o->xlo = b[0] - b[2] / 2, o->xhi = b[0] + b[2] / 2;
            o->ylo = b[1] - b[3] / 2, o->yhi = b[1] + b[3] / 2;
        } else {
            o->ylo = fmin(b[0], b[2]), o->yhi = fmax(b[0], b[2]);
            o->xlo = fmin(b[1], b[3]), o->xhi = fmax(b[1], b[3]);
        }
        o->area = (o->xhi - o->xlo) * (o->yhi - o->ylo);
    }
}

/* Does a selected box s suppress candidate c (IOU above the threshold)? Boxes without
 * overlap or without area never do. */
static inline bool nms_suppress(const struct nms_box *c, const struct nms_box *s, double iou) {
    double ix = fmin(c->xhi, s->xhi) - fmax(c->xlo, s->xlo);
    double iy = fmin(c->yhi, s->yhi) - fmax(c->ylo, s->ylo);
    if (!(ix > 0) || !(iy > 0)) return false;
    double inter = ix * iy, uni = c->area + s->area - inter;
    if (!(c->area > 0) || !(s->area > 0) || !(uni > 0)) return false;
    return inter / uni > iou;
}

/* Stable merge sort of idx[0..n) by descending key (ties keep index order). */
static void sort_by_score(int64_t *idx, int64_t *tmp, int64_t n, const double *key) {
    for (int64_t width = 1; width < n; width *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * width) {
            int64_t mid = lo + width < n ? lo + width : n,
                    hi = lo + 2 * width < n ? lo + 2 * width : n;
            int64_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) tmp[k++] = key[idx[j]] > key[idx[i]] ? idx[j++] : idx[i++];
            while (i < mid) tmp[k++] = idx[i++];
            while (j < hi) tmp[k++] = idx[j++];
        }
        memcpy(idx, tmp, (size_t)n * sizeof *idx);
    }
}

/* Scratch of nms_run for S boxes: the candidates and a merge buffer, the scores of one class,
 * every box's extents, the selected boxes' extents in selection order, and the grid's bucket
 * heads and links. */
#define NMS_PER_BOX (5 * sizeof(int64_t) + sizeof(double) + 2 * sizeof(struct nms_box))
static size_t nms_scratch(int64_t S) {
    return (size_t)(S + 1) * NMS_PER_BOX;
}

/* Selected boxes are filed in buckets of equal width along x by their low x, so that a
 * candidate is tested only against the selected boxes whose low x lies within the widest
 * box's width to its left and its own high x to its right (the others cannot overlap it).
 * Batched NMS by the coordinate trick (torchvision's batched_nms: each class's boxes offset
 * far apart) then costs about one class's boxes per candidate instead of all selected. The
 * scan reaches one bucket further on each side than the interval needs, which absorbs
 * rounding in the bucket arithmetic; widths below 1e-9 of the coordinates (or any infinite
 * coordinate) use one bucket, the plain scan. */
struct nms_grid {
    double x0, inv_bw, wmax;
    int64_t nb, *head, *next;
};

static void nms_grid_init(struct nms_grid *g, const struct nms_box *bx, const int64_t *cand,
                          int64_t nc) {
    double lo = INFINITY, hi = -INFINITY, w = 0;
    for (int64_t c = 0; c < nc; c++) {
        const struct nms_box *b = &bx[cand[c]];
        if (!(b->area > 0)) continue; /* never suppresses: not filed */
        lo = fmin(lo, b->xlo), hi = fmax(hi, b->xlo), w = fmax(w, b->xhi - b->xlo);
    }
    double range = hi - lo, span = fabs(lo) + fabs(hi);
    g->x0 = lo, g->wmax = w, g->nb = 1, g->inv_bw = 0;
    if (isfinite(range) && isfinite(w) && w > 0 && range > 0) {
        double nb = fmin(fmin(1 + 4 * range / w, (double)nc), 1 << 22);
        if (range / nb > 1e-9 * span) g->nb = (int64_t)nb, g->inv_bw = nb / range;
    }
    for (int64_t b = 0; b < g->nb; b++) g->head[b] = -1;
}

static int64_t nms_bucket(const struct nms_grid *g, double x) {
    if (g->nb == 1) return 0;
    double b = floor((x - g->x0) * g->inv_bw);
    return b < 0 ? 0 : b >= (double)g->nb ? g->nb - 1 : (int64_t)b;
}

/* Is candidate c suppressed by a selected box? */
static bool nms_suppressed(const struct nms_grid *g, const struct nms_box *sel,
                           const struct nms_box *c, double iou) {
    if (!(c->area > 0)) return false;
    int64_t b0 = nms_bucket(g, c->xlo - g->wmax), b1 = nms_bucket(g, c->xhi);
    b0 = b0 > 0 ? b0 - 1 : 0, b1 = b1 + 1 < g->nb ? b1 + 1 : g->nb - 1;
    for (int64_t b = b0; b <= b1; b++)
        for (int64_t j = g->head[b]; j >= 0; j = g->next[j])
            if (nms_suppress(c, &sel[j], iou)) return true;
    return false;
}

/* Runs the selection; writes up to `cap` [batch, class, box] triples to `out` (when not NULL)
 * and returns how many there are. `work` holds nms_scratch(S) bytes. */
static int64_t nms_run(const struct nms_in *a, void *work, int64_t *out, int64_t cap) {
    int64_t S = a->S, total = 0;
    int64_t *cand = work, *tmp = cand + S;
    struct nms_grid g = {.head = tmp + S, .next = tmp + 2 * S + 1};
    double *key = (double *)(g.next + S);
    struct nms_box *bx = (struct nms_box *)(key + S), *sel = bx + S;
    for (int64_t bb = 0; bb < a->B; bb++) {
        nms_extents(a, bb, bx);
        for (int64_t k = 0; k < a->K; k++) {
            int64_t base = (bb * a->K + k) * S, nc = 0, ns = 0;
            for (int64_t i = 0; i < S; i++) {
                key[i] = ox_ld(a->scores, base + i);
                if (!a->has_score_thr || key[i] > a->score_thr) cand[nc++] = i;
            }
            sort_by_score(cand, tmp, nc, key);
            nms_grid_init(&g, bx, cand, nc);
            for (int64_t c = 0; c < nc && ns < a->max_out; c++) {
                const struct nms_box *cb = &bx[cand[c]];
                if (nms_suppressed(&g, sel, cb, a->iou)) continue;
                sel[ns] = *cb;
                if (cb->area > 0) {
                    int64_t b = nms_bucket(&g, cb->xlo);
                    g.next[ns] = g.head[b];
                    g.head[b] = ns;
                }
                ns++;
                if (out && total < cap) {
                    out[total * 3] = bb;
                    out[total * 3 + 1] = k;
                    out[total * 3 + 2] = cand[c];
                }
                total++;
            }
        }
    }
    return total;
}

ox_status ox_vis_infer_nms(struct ox_infer_ctx *ctx, const struct ox_node *n,
                           const ox_tensor *const *in, ox_tensor *const *out) {
    ox_status s = nms_check(n, in);
    if (s) return s;
    for (int i = 0; i < 5; i++)
        if (ox_in(n, in, i) && !known(in[i])) return OX_NEED_DATA;
    struct nms_in a;
    if ((s = nms_read(n, in, &a))) return s;
    size_t bytes;
    int64_t cnt[2] = {a.S + 1, (int64_t)NMS_PER_BOX};
    if ((s = checked_count(n, 2, cnt, 1, &bytes))) return s;
    /* the count needs the whole selection: a buffer for this call only */
    void *work = malloc(bytes);
    if (!work) return ox_node_err(n, OX_E_NOMEM, "out of memory (%zu bytes)", bytes);
    int64_t total = nms_run(&a, work, NULL, 0);
    free(work);
    int64_t dims[2] = {total, 3};
    ox_set_shape(out[0], OX_INT64, 2, dims);
    ctx->scratch_bytes = bytes;
    return OX_OK;
}

ox_status ox_vis_cpu_nms(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                         const ox_tensor *const *in, ox_tensor *const *out) {
    struct nms_in a;
    ox_status s = nms_read(n, in, &a);
    if (s) return s;
    if (ctx->scratch_bytes < nms_scratch(a.S))
        return ox_node_err(n, OX_E_INTERNAL, "scratch smaller than inferred");
    /* writes stop at the inferred count, so that a count that disagrees is an error, not an
     * overrun */
    int64_t total = nms_run(&a, ctx->scratch, out[0]->data, out[0]->dims[0]);
    if (total != out[0]->dims[0])
        return ox_node_err(n, OX_E_INTERNAL, "%lld boxes selected, %lld inferred", (long long)total,
                           (long long)out[0]->dims[0]);
    return OX_OK;
}
