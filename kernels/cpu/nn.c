/* Neural-network operators beside conv.c, linalg.c and norm.c: ConvTranspose,
 * MatMulInteger, MaxUnpool, MaxRoiPool, MeanVarianceNormalization and GroupNormalization.
 *
 * ConvTranspose runs per image and group as one GEMM, columns = W_g^T * X_g (rows: output
 * channel and kernel offset, columns: input positions), then col2im adds each column into
 * the output positions it reaches. A 1x1, stride-1, unpadded ConvTranspose is the GEMM alone.
 * Spatial dims are padded in front to three with unit extents, so that 1-D, 2-D and 3-D share
 * one walk whose innermost loop runs along the last spatial axis.
 * float16 runs in float through scratch copies.
 *
 * MatMulInteger subtracts the zero points once into int32 scratch (B per batch matrix, A per
 * row) and accumulates rows in 32-bit wrapping arithmetic, as the spec allows.
 *
 * The normalizations accumulate in double; float32 reads and writes its data directly, the
 * other float types go through ox_get_f64/ox_set_f64.
 */
#include "kernels/cpu/igemm.h"
#include "kernels/op.h"

#include <cblas.h>
#include <float.h>
#include <limits.h>
#include <stdlib.h>

/* Prototypes of this file's rows, so the definitions are checked against the table. */
#define OX_OP(domain, type, since, until, infer, cpu, flags)                                       \
    ox_status infer(struct ox_infer_ctx *, const struct ox_node *, const ox_tensor *const *,       \
                    ox_tensor *const *);                                                           \
    ox_status cpu(struct ox_kernel_ctx *, const struct ox_node *, const ox_tensor *const *,        \
                  ox_tensor *const *);
#include "kernels/cpu/nn.def"
#undef OX_OP

#define SP 3 /* spatial dims, padded in front with unit extents */

/* An attribute of `nsp` spatial values (`count` times nsp for pads), or `def` each. */
static ox_status spatial_attr(const struct ox_node *n, const char *name, int nsp, int count,
                              int64_t def, int64_t lo, int64_t *v) {
    const int64_t *a;
    int na = ox_attr_ints(n, name, &a);
    for (int i = 0; i < nsp * count; i++) v[i] = def;
    if (na < 0) return OX_OK;
    if (na != nsp * count)
        return ox_node_err(n, OX_E_INVALID, "%s has %d values, expected %d", name, na, nsp * count);
    for (int i = 0; i < na; i++) {
        if (a[i] < lo)
            return ox_node_err(n, OX_E_INVALID, "%s[%d] = %lld: expected at least %lld", name, i,
                               (long long)a[i], (long long)lo);
        v[i] = a[i];
    }
    return OX_OK;
}

static bool fits_int(int64_t v) {
    return v >= 0 && v <= INT_MAX;
}

/* Checked product of non-negative counts into size_t. */
static bool mul3(int64_t a, int64_t b, int64_t c, size_t *out) {
    size_t t;
    return a >= 0 && b >= 0 && c >= 0 && ox_mul_size((size_t)a, (size_t)b, &t) &&
           ox_mul_size(t, (size_t)c, out);
}

static bool is_float_type(ox_dtype dt) {
    return dt == OX_FLOAT || dt == OX_DOUBLE || dt == OX_FLOAT16 || dt == OX_BFLOAT16;
}

/* ---- ConvTranspose --------------------------------------------------------------------- */

struct ctg {
    int nsp;
    int64_t in[SP], k[SP], s[SP], d[SP], pb[SP], out[SP];
    int64_t in_size, out_size, k_size;
    int64_t N, C, M, group, cg, mg;
};

/* The geometry from X, W and the attributes (see the ONNX ConvTranspose formulas). A
 * negative total padding (output_shape or SAME asking for more than the full result) puts the
 * extra zeros at the end. */
static ox_status ct_setup(const struct ox_node *n, const ox_tensor *x, const ox_tensor *w,
                          struct ctg *g) {
    char sx[256], sw[256];
    if (x->rank < 3 || x->rank > SP + 2)
        return ox_node_err(n, OX_E_UNSUPPORTED, "input rank %d: expected 3 to %d (N, C, spatial)",
                           x->rank, SP + 2);
    if (w->rank != x->rank)
        return ox_node_err(n, OX_E_SHAPE, "input %s and weights %s differ in rank",
                           ox_tensor_desc(x, sx, sizeof sx), ox_tensor_desc(w, sw, sizeof sw));
    int nsp = g->nsp = x->rank - 2;
    g->group = ox_attr_int(n, "group", 1);
    g->N = x->dims[0];
    g->C = x->dims[1];
    if (g->group <= 0 || w->dims[0] != g->C || g->C % g->group)
        return ox_node_err(n, OX_E_SHAPE,
                           "input %s, weights %s and group %lld do not agree (W must be "
                           "[C, M/group, k...])",
                           ox_tensor_desc(x, sx, sizeof sx), ox_tensor_desc(w, sw, sizeof sw),
                           (long long)g->group);
    g->cg = g->C / g->group;
    g->mg = w->dims[1];
    g->M = g->mg * g->group;
    const int64_t *ks;
    int nks = ox_attr_ints(n, "kernel_shape", &ks);
    if (nks >= 0 && nks != nsp)
        return ox_node_err(n, OX_E_INVALID, "kernel_shape has %d values, expected %d", nks, nsp);
    for (int i = 0; i < nsp; i++) {
        g->k[i] = w->dims[i + 2];
        if (nks >= 0 && ks[i] != g->k[i])
            return ox_node_err(n, OX_E_SHAPE, "kernel_shape disagrees with weights %s",
                               ox_tensor_desc(w, sw, sizeof sw));
    }
    int64_t opad[SP], pads[2 * SP], os[SP];
    ox_status st;
    if ((st = spatial_attr(n, "strides", nsp, 1, 1, 1, g->s)) ||
        (st = spatial_attr(n, "dilations", nsp, 1, 1, 1, g->d)) ||
        (st = spatial_attr(n, "output_padding", nsp, 1, 0, 0, opad)) ||
        (st = spatial_attr(n, "pads", nsp, 2, 0, 0, pads)))
        return st;
    const int64_t *osa;
    int nos = ox_attr_ints(n, "output_shape", &osa);
    if (nos >= 0) {
        if (nos != nsp && nos != nsp + 2)
            return ox_node_err(n, OX_E_INVALID, "output_shape has %d values, expected %d", nos,
                               nsp);
        for (int i = 0; i < nsp; i++) os[i] = osa[i + nos - nsp];
    }
    const char *ap = ox_attr_str(n, "auto_pad", "NOTSET");
    bool same = strcmp(ap, "SAME_UPPER") == 0 || strcmp(ap, "SAME_LOWER") == 0;
    bool upper = strcmp(ap, "SAME_UPPER") == 0;
    if (!same && strcmp(ap, "NOTSET") != 0 && strcmp(ap, "VALID") != 0)
        return ox_node_err(n, OX_E_INVALID,
                           "auto_pad '%s': expected NOTSET, VALID, SAME_UPPER or SAME_LOWER", ap);
    g->in_size = g->out_size = g->k_size = 1;
    for (int i = 0; i < SP; i++) {
        if (i >= nsp) {
            g->in[i] = g->k[i] = g->s[i] = g->d[i] = g->out[i] = 1;
            g->pb[i] = 0;
            continue;
        }
        g->in[i] = x->dims[i + 2];
        if (g->k[i] <= 0 || g->k[i] > INT_MAX || g->s[i] > INT_MAX || g->d[i] > INT_MAX ||
            opad[i] > INT_MAX || pads[i] > INT_MAX || pads[i + nsp] > INT_MAX)
            return ox_node_err(n, OX_E_INVALID, "kernel, strides, dilations or pads out of range");
        /* full extent of the result before any padding is removed */
        int64_t full =
            g->s[i] * (g->in[i] > 0 ? g->in[i] - 1 : 0) + opad[i] + (g->k[i] - 1) * g->d[i] + 1;
        if (g->in[i] == 0) full = 0;
        if (nos >= 0 || same) {
            g->out[i] = nos >= 0 ? os[i] : g->in[i] * g->s[i];
            int64_t total = full - g->out[i];
            g->pb[i] = total <= 0 ? 0 : upper ? total / 2 : total - total / 2;
        } else if (strcmp(ap, "VALID") == 0) {
            g->out[i] = full;
            g->pb[i] = 0;
        } else {
            g->pb[i] = pads[i];
            g->out[i] = full - pads[i] - pads[i + nsp];
        }
        if (g->out[i] < 0)
            return ox_node_err(n, OX_E_SHAPE, "output extent %lld along spatial axis %d",
                               (long long)g->out[i], i);
        if (g->out[i] > INT_MAX)
            return ox_node_err(n, OX_E_UNSUPPORTED, "output extent %lld is too large",
                               (long long)g->out[i]);
    }
    /* the spatial axes move to the end, so that the innermost walk is along the last one */
    struct {
        int64_t *a, unit;
    } arr[6] = {{g->in, 1}, {g->k, 1}, {g->s, 1}, {g->d, 1}, {g->pb, 0}, {g->out, 1}};
    for (int j = 0; j < 6; j++) {
        memmove(arr[j].a + (SP - nsp), arr[j].a, sizeof(int64_t) * (size_t)nsp);
        for (int i = 0; i < SP - nsp; i++) arr[j].a[i] = arr[j].unit;
    }
    size_t t;
    if (!mul3(g->in[0], g->in[1], g->in[2], &t) || t > INT_MAX ||
        !mul3(g->out[0], g->out[1], g->out[2], &t) || t > INT_MAX ||
        !mul3(g->k[0], g->k[1], g->k[2], &t) || t > INT_MAX)
        return ox_node_err(n, OX_E_UNSUPPORTED, "spatial sizes are too large");
    for (int i = 0; i < SP; i++) {
        g->in_size *= g->in[i];
        g->out_size *= g->out[i];
        g->k_size *= g->k[i];
    }
    if (!mul3(g->mg, g->k_size, 1, &t) || t > INT_MAX || !fits_int(g->cg))
        return ox_node_err(n, OX_E_UNSUPPORTED, "channel counts are too large");
    return OX_OK;
}

/* The output is the GEMM result itself: 1x1 kernel, stride 1, no padding, same extent. */
static bool ct_is_pointwise(const struct ctg *g) {
    for (int i = 0; i < SP; i++)
        if (g->k[i] != 1 || g->s[i] != 1 || g->pb[i] != 0 || g->out[i] != g->in[i]) return false;
    return true;
}

ox_status ox_nn_infer_convtranspose(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                    const ox_tensor *const *in, ox_tensor *const *out) {
    const ox_tensor *x = ox_in(n, in, 0), *w = ox_in(n, in, 1), *b = ox_in(n, in, 2);
    if (!x || !w) return ox_node_err(n, OX_E_INVALID, "expected inputs X and W");
    if (x->dtype != w->dtype ||
        (x->dtype != OX_FLOAT && x->dtype != OX_DOUBLE && x->dtype != OX_FLOAT16))
        return ox_node_err(n, OX_E_UNSUPPORTED,
                           "element types %s and %s: supported are float, double and float16, "
                           "the same for X and W",
                           ox_dtype_name(x->dtype), ox_dtype_name(w->dtype));
    struct ctg g;
    ox_status st = ct_setup(n, x, w, &g);
    if (st) return st;
    if (b && (b->rank != 1 || b->dims[0] != g.M || b->dtype != x->dtype))
        return ox_node_err(n, OX_E_SHAPE, "bias must be [%lld] of %s", (long long)g.M,
                           ox_dtype_name(x->dtype));
    int64_t dims[OX_MAX_RANK] = {g.N, g.M};
    for (int i = 0; i < g.nsp; i++) dims[i + 2] = g.out[SP - g.nsp + i];
    ox_set_shape(out[0], x->dtype, x->rank, dims);
    /* scratch: one group's columns, then float copies of float16 X, W, B and Y */
    size_t esz = x->dtype == OX_DOUBLE ? 8 : 4, cols = 0, f16 = 0, t;
    if (!ct_is_pointwise(&g) || x->dtype == OX_FLOAT16) {
        if (!mul3(g.mg * g.k_size, g.in_size, (int64_t)esz, &cols))
            return ox_node_err(n, OX_E_NOMEM, "scratch size overflows");
    }
    if (x->dtype == OX_FLOAT16) {
        size_t parts[4];
        if (!mul3(g.N * g.C, g.in_size, 4, &parts[0]) ||
            !mul3(g.C, g.mg * g.k_size, 4, &parts[1]) || !mul3(g.M, 1, 4, &parts[2]) ||
            !mul3(g.N * g.M, g.out_size, 4, &parts[3]))
            return ox_node_err(n, OX_E_NOMEM, "scratch size overflows");
        for (int i = 0; i < 4; i++)
            if (!ox_add_size(f16, parts[i], &f16))
                return ox_node_err(n, OX_E_NOMEM, "scratch size overflows");
    }
    if (!ox_add_size(cols, f16, &t)) return ox_node_err(n, OX_E_NOMEM, "scratch size overflows");
    ctx->scratch_bytes = t;
    return OX_OK;
}

/* Add the columns of one group (rows: output channel, kernel offset; columns: input
 * positions) into the group's output channels. Only the innermost loop walks elements. */
#define DEF_COL2IM(T)                                                                              \
    static void col2im_##T(const T *col, T *y, const struct ctg *g) {                              \
        int64_t row = 0;                                                                           \
        for (int64_t m = 0; m < g->mg; m++) {                                                      \
            T *ym = y + m * g->out_size;                                                           \
            for (int64_t k0 = 0; k0 < g->k[0]; k0++)                                               \
                for (int64_t k1 = 0; k1 < g->k[1]; k1++)                                           \
                    for (int64_t k2 = 0; k2 < g->k[2]; k2++, row++) {                              \
                        const T *cr = col + row * g->in_size;                                      \
                        int64_t off = k2 * g->d[2] - g->pb[2], s2 = g->s[2];                       \
                        /* input positions i2 with 0 <= i2*s2 + off < out[2] */                    \
                        int64_t lo = off >= 0 ? 0 : (-off + s2 - 1) / s2;                          \
                        int64_t hi = g->out[2] - off <= 0 ? 0 : (g->out[2] - off - 1) / s2 + 1;    \
                        if (hi > g->in[2]) hi = g->in[2];                                          \
                        if (lo >= hi) continue;                                                    \
                        for (int64_t i0 = 0; i0 < g->in[0]; i0++) {                                \
                            int64_t o0 = i0 * g->s[0] + k0 * g->d[0] - g->pb[0];                   \
                            if (o0 < 0 || o0 >= g->out[0]) continue;                               \
                            for (int64_t i1 = 0; i1 < g->in[1]; i1++) {                            \
                                int64_t o1 = i1 * g->s[1] + k1 * g->d[1] - g->pb[1];               \
                                if (o1 < 0 || o1 >= g->out[1]) continue;                           \
                                T *yr = ym + (o0 * g->out[1] + o1) * g->out[2];                    \
                                const T *xr = cr + (i0 * g->in[1] + i1) * g->in[2];                \
                                if (s2 == 1) {                                                     \
                                    for (int64_t i2 = lo; i2 < hi; i2++) yr[i2 + off] += xr[i2];   \
                                } else {                                                           \
                                    for (int64_t i2 = lo; i2 < hi; i2++)                           \
                                        yr[i2 * s2 + off] += xr[i2];                               \
                                }                                                                  \
                            }                                                                      \
                        }                                                                          \
                    }                                                                              \
        }                                                                                          \
    }
DEF_COL2IM(float)
DEF_COL2IM(double)

/* C[m x n] = A^T * B with A stored [k x m] and B [k x n], row-major. */
static void gemm_tn_float(int64_t m, int64_t n, int64_t k, const float *a, const float *b,
                          float *c) {
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)m, (int)n, (int)k, 1.0f, a, (int)m, b,
                (int)n, 0.0f, c, (int)n);
}

static void gemm_tn_double(int64_t m, int64_t n, int64_t k, const double *a, const double *b,
                           double *c) {
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)m, (int)n, (int)k, 1.0, a, (int)m, b,
                (int)n, 0.0, c, (int)n);
}

#define DEF_CONVT(T)                                                                               \
    static void convt_##T(const T *x, const T *w, const T *b, T *y, const struct ctg *g, T *col) { \
        int64_t kdim = g->mg * g->k_size, ysz = g->N * g->M * g->out_size;                         \
        bool pointwise = ct_is_pointwise(g);                                                       \
        if (ysz == 0) return;                                                                      \
        if (g->cg == 0 || g->in_size == 0) {                                                       \
            for (int64_t i = 0; i < ysz; i++) y[i] = 0;                                            \
        } else {                                                                                   \
            for (int64_t nn = 0; nn < g->N; nn++)                                                  \
                for (int64_t gr = 0; gr < g->group; gr++) {                                        \
                    const T *xg = x + (nn * g->C + gr * g->cg) * g->in_size;                       \
                    const T *wg = w + gr * g->cg * kdim;                                           \
                    T *yg = y + (nn * g->M + gr * g->mg) * g->out_size;                            \
                    if (pointwise) {                                                               \
                        gemm_tn_##T(kdim, g->in_size, g->cg, wg, xg, yg);                          \
                        continue;                                                                  \
                    }                                                                              \
                    gemm_tn_##T(kdim, g->in_size, g->cg, wg, xg, col);                             \
                    for (int64_t i = 0; i < g->mg * g->out_size; i++) yg[i] = 0;                   \
                    col2im_##T(col, yg, g);                                                        \
                }                                                                                  \
        }                                                                                          \
        if (b)                                                                                     \
            for (int64_t nn = 0; nn < g->N; nn++)                                                  \
                for (int64_t m = 0; m < g->M; m++) {                                               \
                    T *ym = y + (nn * g->M + m) * g->out_size, bv = b[m];                          \
                    for (int64_t p = 0; p < g->out_size; p++) ym[p] += bv;                         \
                }                                                                                  \
    }
DEF_CONVT(float)
DEF_CONVT(double)

static void half_to_float_n(const void *src, float *dst, int64_t n) {
    const uint16_t *s = src;
    for (int64_t i = 0; i < n; i++) dst[i] = ox_half_to_float(s[i]);
}

ox_status ox_nn_cpu_convtranspose(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                                  const ox_tensor *const *in, ox_tensor *const *out) {
    const ox_tensor *x = in[0], *w = in[1], *b = ox_in(n, in, 2);
    struct ctg g;
    ox_status st = ct_setup(n, x, w, &g);
    if (st) return st;
    if (x->dtype == OX_FLOAT) {
        convt_float(x->data, w->data, b ? b->data : NULL, out[0]->data, &g, ctx->scratch);
    } else if (x->dtype == OX_DOUBLE) {
        convt_double(x->data, w->data, b ? b->data : NULL, out[0]->data, &g, ctx->scratch);
    } else { /* float16: compute in float, round on store */
        int64_t nx = ox_tensor_numel(x), nw = ox_tensor_numel(w), ny = ox_tensor_numel(out[0]);
        float *col = ctx->scratch;
        float *fx = col + g.mg * g.k_size * g.in_size, *fw = fx + nx, *fb = fw + nw, *fy = fb + g.M;
        half_to_float_n(x->data, fx, nx);
        half_to_float_n(w->data, fw, nw);
        if (b) half_to_float_n(b->data, fb, g.M);
        convt_float(fx, fw, b ? fb : NULL, fy, &g, col);
        uint16_t *y = out[0]->data;
        for (int64_t i = 0; i < ny; i++) y[i] = ox_float_to_half(fy[i]);
    }
    return OX_OK;
}

/* ---- MatMulInteger --------------------------------------------------------------------- */

struct mmi {
    struct ox_matmul_shape s;
    /* zero points: 0 absent, 1 scalar, 2 per row of A / column of B, 3 per batch row/column */
    int za_kind, zb_kind;
};

/* How a zero point applies: `vec` is M for A (shape [.., M, 1]) and N for B ([.., 1, N]). */
static ox_status zp_kind(const struct ox_node *n, const ox_tensor *z, const ox_tensor *t, bool is_a,
                         int64_t vec, int *kind) {
    char sz[256], st[256];
    *kind = 0;
    if (!z) return OX_OK;
    if (z->dtype != t->dtype)
        return ox_node_err(n, OX_E_SHAPE, "zero point of %s is %s, expected %s", is_a ? "A" : "B",
                           ox_dtype_name(z->dtype), ox_dtype_name(t->dtype));
    int64_t cnt = ox_tensor_numel(z);
    if (cnt == 1) {
        *kind = 1;
        return OX_OK;
    }
    if (z->rank == 1 && z->dims[0] == vec) {
        *kind = 2;
        return OX_OK;
    }
    if (t->rank >= 2 && z->rank == t->rank) {
        bool ok = true;
        for (int i = 0; i < t->rank - 2; i++) ok = ok && z->dims[i] == t->dims[i];
        int64_t r = z->dims[t->rank - 2], c = z->dims[t->rank - 1];
        ok = ok && (is_a ? r == vec && c == 1 : r == 1 && c == vec);
        if (ok) {
            *kind = 3;
            return OX_OK;
        }
    }
    return ox_node_err(n, OX_E_SHAPE, "zero point %s does not fit %s %s (scalar, per %s, or %s)",
                       ox_tensor_desc(z, sz, sizeof sz), is_a ? "A" : "B",
                       ox_tensor_desc(t, st, sizeof st), is_a ? "row" : "column",
                       is_a ? "[..., M, 1]" : "[..., 1, N]");
}

static ox_status mmi_shape(const struct ox_node *n, const ox_tensor *const *in, struct mmi *m) {
    const ox_tensor *a = ox_in(n, in, 0), *b = ox_in(n, in, 1);
    if (!a || !b) return ox_node_err(n, OX_E_INVALID, "expected inputs A and B");
    if ((a->dtype != OX_UINT8 && a->dtype != OX_INT8) ||
        (b->dtype != OX_UINT8 && b->dtype != OX_INT8))
        return ox_node_err(n, OX_E_UNSUPPORTED, "element types %s and %s: expected int8 or uint8",
                           ox_dtype_name(a->dtype), ox_dtype_name(b->dtype));
    ox_status st = ox_matmul_shape(n, a, b, &m->s);
    if (st) return st;
    st = zp_kind(n, ox_in(n, in, 2), a, true, m->s.M, &m->za_kind);
    if (!st) st = zp_kind(n, ox_in(n, in, 3), b, false, m->s.N, &m->zb_kind);
    return st;
}

/* Prepared memory of a constant 2-D B: packed for ox_igemm16, or for ox_igemm8 and then its
 * column sums (mmi_pack_b). */
static size_t mmi_packed_bytes(int64_t K, int64_t N) {
    return ox_igemm16_b_bytes(K, N) + ox_align64((size_t)N * 4);
}

ox_status ox_nn_infer_matmulinteger(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                    const ox_tensor *const *in, ox_tensor *const *out) {
    struct mmi m;
    ox_status st = mmi_shape(n, in, &m);
    if (st) return st;
    ox_set_shape(out[0], OX_INT32, m.s.rank, m.s.dims);
    /* scratch: B minus its zero points [K, N] and one row of A minus its zero point [K] in
     * int32; for ox_igemm16, A and B minus their zero points in int16 and its own */
    size_t t, ta, tb;
    if (!mul3(m.s.K, m.s.N + 1, 4, &t)) return ox_node_err(n, OX_E_NOMEM, "scratch size overflows");
    if (ox_igemm16_fast()) {
        /* one B for every batch: the batches' rows are one A (mmi_rows) */
        const ox_tensor *b = ox_in(n, in, 1);
        int64_t rows = b->rank == 2 ? m.s.batch * m.s.M : m.s.M;
        if (!mul3(rows, m.s.K, 2, &ta) || !mul3(m.s.K, m.s.N, 2, &tb) ||
            !ox_add_size(ta + 64, tb + 64, &t) ||
            !ox_igemm16_scratch(rows, m.s.K, ctx->n_threads, &t))
            return ox_node_err(n, OX_E_NOMEM, "scratch size overflows");
        if (b->rank == 2 && (ctx->const_inputs & 2) &&
            (!ox_in(n, in, 3) || (ctx->const_inputs & 8)))
            ctx->prepared_bytes = mmi_packed_bytes(m.s.K, m.s.N);
    }
    ctx->scratch_bytes = t;
    return OX_OK;
}

/* Element i of an int8 or uint8 tensor. */
static inline int32_t q8(const void *p, bool is_signed, int64_t i) {
    return is_signed ? ((const int8_t *)p)[i] : ((const uint8_t *)p)[i];
}

/* Prepared memory of a constant 2-D B: minus its zero points, packed for ox_igemm16. */
struct mmi_b {
    const ox_tensor *a, *b, *zb;
    const struct mmi *m;
};

/* The 8-bit form (ox_igemm8): uint8 A, int8 B whose zero points are all 0; the prepared B
 * then ends with its column sums (the correction for A's zero points). */
static bool mmi_is8(const ox_tensor *a, const ox_tensor *b, const ox_tensor *zb) {
    if (!ox_igemm8_fast() || a->dtype != OX_UINT8 || b->dtype != OX_INT8 || b->rank != 2)
        return false;
    for (int64_t i = 0; zb && i < ox_tensor_numel(zb); i++)
        if (((const int8_t *)zb->data)[i]) return false;
    return true;
}

static size_t mmi_packed8_bytes(int64_t K, int64_t N) {
    return ox_align64(ox_igemm8_b_bytes(K, N));
}

static void mmi_pack_b(void *dst, void *arg) {
    const struct mmi_b *q = arg;
    int64_t K = q->m->s.K, N = q->m->s.N;
    bool sg = q->b->dtype == OX_INT8;
    if (mmi_is8(q->a, q->b, q->zb)) {
        ox_igemm8_pack_b(q->b->data, N, K, N, dst);
        int32_t *cs = (int32_t *)((char *)dst + mmi_packed8_bytes(K, N));
        const int8_t *w = q->b->data;
        for (int64_t j = 0; j < N; j++) cs[j] = 0;
        for (int64_t k = 0; k < K; k++)
            for (int64_t j = 0; j < N; j++) cs[j] += w[k * N + j];
        return;
    }
    int16_t *b16 = malloc(sizeof(int16_t) * (size_t)(K * N > 0 ? K * N : 1));
    if (!b16) {
        memset(dst, 0, ox_igemm16_b_bytes(K, N));
        return;
    }
    for (int64_t k = 0; k < K; k++)
        for (int64_t j = 0; j < N; j++) {
            int32_t z = q->m->zb_kind == 1   ? q8(q->zb->data, sg, 0)
                        : q->m->zb_kind >= 2 ? q8(q->zb->data, sg, j)
                                             : 0;
            b16[k * N + j] = (int16_t)(q8(q->b->data, sg, k * N + j) - z);
        }
    ox_igemm16_pack_b(b16, N, K, N, dst);
    free(b16);
}

struct mmi_out {
    int32_t *y; /* this product's M x N */
    int64_t N;
    /* the 8-bit form: B's column sums and what gives row i's zero point of A */
    const int32_t *colsum;
    const struct mmi *m;
    const ox_tensor *za;
    int64_t zabase;
};

/* Row i's zero point of A (rows of every batch in one product: i % M is its row in M). */
static int32_t mmi_za(const struct mmi *m, const ox_tensor *za, bool sg, int64_t zabase,
                      int64_t i) {
    return m->za_kind == 1   ? q8(za->data, sg, 0)
           : m->za_kind == 2 ? q8(za->data, sg, i % m->s.M)
           : m->za_kind == 3 ? q8(za->data, sg, zabase + i)
                             : 0;
}

static void mmi_emit(void *arg, int64_t i, int64_t n0, int64_t nn, const int32_t *c) {
    const struct mmi_out *o = arg;
    int32_t *y = o->y + i * o->N + n0;
    if (!o->colsum) {
        memcpy(y, c, sizeof(int32_t) * (size_t)nn);
        return;
    }
    int32_t z = mmi_za(o->m, o->za, false, o->zabase, i);
    for (int64_t q = 0; q < nn; q++) y[q] = c[q] - z * o->colsum[n0 + q];
}

ox_status ox_nn_cpu_matmulinteger(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                                  const ox_tensor *const *in, ox_tensor *const *out) {
    struct mmi m;
    ox_status st = mmi_shape(n, in, &m);
    if (st) return st;
    const ox_tensor *a = in[0], *b = in[1], *za = ox_in(n, in, 2), *zb = ox_in(n, in, 3);
    bool as = a->dtype == OX_INT8, bsg = b->dtype == OX_INT8;
    int64_t M = m.s.M, K = m.s.K, N = m.s.N;
    int32_t *bq = ctx->scratch, *aq = bq + K * N;
    uint32_t *y = out[0]->data;
    int64_t last_bo = -1;
    bool fast = ox_igemm16_fast();
    const void *bp = NULL; /* one constant B: packed once */
    struct mmi_b mb = {a, b, zb, &m};
    if (fast && b->rank == 2) {
        struct ox_prep_key key = {b->data, {K, N, zb ? (int64_t)(intptr_t)zb->data : 0, 0}};
        bp = ox_kernel_prepared(ctx, mmi_pack_b, &mb, &key);
    }
    bool is8 = bp && mmi_is8(a, b, zb); /* only with B packed once */
    int16_t *a16 = ctx->scratch,
            *b16 = (int16_t *)((char *)ctx->scratch + ox_align64((size_t)(M * K * 2)));
    char *ig = (char *)b16 + ox_align64((size_t)(K * N * 2));
    for (int64_t it = 0; it < m.s.batch; it++) {
        int64_t ao, bo;
        ox_matmul_offsets(&m.s, it, &ao, &bo);
        uint32_t *yb = y + it * M * N;
        if (bo != last_bo && !bp) { /* B minus its zero points, once per distinct B matrix */
            int64_t zbase = m.zb_kind == 3 ? bo / (K > 0 ? K : 1) : 0;
            for (int64_t k = 0; k < K; k++)
                for (int64_t j = 0; j < N; j++) {
                    int32_t z = 0;
                    if (m.zb_kind == 1) z = q8(zb->data, bsg, 0);
                    if (m.zb_kind >= 2) z = q8(zb->data, bsg, zbase + j);
                    int32_t v = q8(b->data, bsg, bo + k * N + j) - z;
                    if (fast)
                        b16[k * N + j] = (int16_t)v;
                    else
                        bq[k * N + j] = v;
                }
            last_bo = bo;
        }
        int64_t zabase = m.za_kind == 3 ? ao / (K > 0 ? K : 1) : 0;
        if (fast) { /* A minus its zero points, then the pool's GEMM */
            /* one B for every batch (A's batches then lie one after another, as y's): all
             * the rows in one product (mmi_rows), the zero point of row i that of row i % M
             * of its batch */
            int64_t rows = b->rank == 2 ? m.s.batch * M : M;
            struct mmi_out o = {(int32_t *)yb, N, NULL, &m, za, zabase};
            struct ox_igemm16_op op = {
                .M = rows, .N = N, .K = K, .lda = K, .b_packed = bp, .emit = mmi_emit, .arg = &o};
            if (is8) { /* A as it is, the zero points after */
                o.colsum = (const int32_t *)((const char *)bp + mmi_packed8_bytes(K, N));
                op.mode8 = OX_IG8_A_U8_B_S8;
                op.a8 = (const uint8_t *)a->data + ao;
            } else {
                for (int64_t i = 0; i < rows; i++) {
                    int32_t z = mmi_za(&m, za, as, zabase, i);
                    int16_t *d = a16 + i * K;
                    if (as)
                        for (int64_t k = 0; k < K; k++)
                            d[k] = (int16_t)(((const int8_t *)a->data)[ao + i * K + k] - z);
                    else
                        for (int64_t k = 0; k < K; k++)
                            d[k] = (int16_t)(((const uint8_t *)a->data)[ao + i * K + k] - z);
                }
                op.a = a16, op.b = b16, op.ldb = N;
            }
            ox_igemm16(ctx->pool, &op, ig);
            if (rows > M) break;
            continue;
        }
        for (int64_t i = 0; i < M; i++) {
            int32_t z = mmi_za(&m, za, as, zabase, i);
            for (int64_t k = 0; k < K; k++) aq[k] = q8(a->data, as, ao + i * K + k) - z;
            uint32_t *yr = yb + i * N;
            for (int64_t j = 0; j < N; j++) yr[j] = 0;
            for (int64_t k = 0; k < K; k++) {
                uint32_t av = (uint32_t)aq[k];
                if (!av) continue;
                const int32_t *br = bq + k * N;
                for (int64_t j = 0; j < N; j++) yr[j] += av * (uint32_t)br[j];
            }
        }
    }
    return OX_OK;
}

/* ---- MaxUnpool ------------------------------------------------------------------------- */

/* The default output extent of each spatial axis: (in - 1) * stride + kernel - pads. */
static ox_status unpool_default(const struct ox_node *n, const ox_tensor *x, int64_t *dims) {
    int nsp = x->rank - 2;
    if (x->rank < 3)
        return ox_node_err(n, OX_E_SHAPE, "input rank %d: expected [N, C, spatial...]", x->rank);
    const int64_t *ks;
    int nks = ox_attr_ints(n, "kernel_shape", &ks);
    if (nks < 0) return ox_node_err(n, OX_E_INVALID, "attribute kernel_shape is required");
    if (nks != nsp)
        return ox_node_err(n, OX_E_INVALID, "kernel_shape has %d values, expected %d", nks, nsp);
    int64_t s[OX_MAX_RANK], p[2 * OX_MAX_RANK];
    ox_status st;
    if ((st = spatial_attr(n, "strides", nsp, 1, 1, 1, s)) ||
        (st = spatial_attr(n, "pads", nsp, 2, 0, 0, p)))
        return st;
    dims[0] = x->dims[0];
    dims[1] = x->dims[1];
    for (int i = 0; i < nsp; i++) {
        if (ks[i] <= 0 || ks[i] > INT_MAX || s[i] > INT_MAX || p[i] > INT_MAX ||
            p[i + nsp] > INT_MAX)
            return ox_node_err(n, OX_E_INVALID, "kernel_shape, strides or pads out of range");
        int64_t in = x->dims[i + 2];
        dims[i + 2] = in == 0 ? 0 : (in - 1) * s[i] + ks[i] - p[i] - p[i + nsp];
        if (dims[i + 2] < 0)
            return ox_node_err(n, OX_E_SHAPE, "output extent %lld along spatial axis %d",
                               (long long)dims[i + 2], i);
    }
    return OX_OK;
}

ox_status ox_nn_infer_maxunpool(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    const ox_tensor *x = ox_in(n, in, 0), *ind = ox_in(n, in, 1), *os = ox_in(n, in, 2);
    char sx[256], si[256];
    if (!x || !ind) return ox_node_err(n, OX_E_INVALID, "expected inputs X and I");
    if (ind->dtype != OX_INT64 || ind->rank != x->rank ||
        memcmp(ind->dims, x->dims, sizeof(int64_t) * (size_t)x->rank))
        return ox_node_err(n, OX_E_SHAPE, "indices %s must be int64 with the shape of X %s",
                           ox_tensor_desc(ind, si, sizeof si), ox_tensor_desc(x, sx, sizeof sx));
    int64_t dims[OX_MAX_RANK];
    ox_status st = unpool_default(n, x, dims);
    if (st) return st;
    if (os) {
        if (!os->data) return OX_NEED_DATA;
        if (os->rank != 1 || os->dims[0] != x->rank)
            return ox_node_err(n, OX_E_SHAPE, "output_shape %s: expected %d values",
                               ox_tensor_desc(os, si, sizeof si), x->rank);
        if (ox_read_ints(n, os, dims, OX_MAX_RANK) < 0) return OX_E_INVALID;
        for (int i = 0; i < x->rank; i++)
            if (dims[i] < 0)
                return ox_node_err(n, OX_E_SHAPE, "output_shape[%d] = %lld", i, (long long)dims[i]);
    }
    ox_set_shape(out[0], x->dtype, x->rank, dims);
    return OX_OK;
}

/* Indices address the default output (the one the pooling came from, flattened with N and
 * C); an output_shape that differs keeps each value's coordinates, adding zeros at the end
 * of each axis or cutting there, as the ONNX reference does. */
ox_status ox_nn_cpu_maxunpool(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                              const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    const ox_tensor *x = in[0], *ind = in[1];
    ox_tensor *y = out[0];
    int64_t def[OX_MAX_RANK];
    ox_status st = unpool_default(n, x, def);
    if (st) return st;
    int rank = x->rank;
    int64_t nx = ox_tensor_numel(x), ny = ox_tensor_numel(y), ndef = 1;
    for (int i = 0; i < rank; i++) ndef *= def[i];
    size_t esz = ox_dtype_size(x->dtype);
    bool same = memcmp(def, y->dims, sizeof(int64_t) * (size_t)rank) == 0;
    if (ny) memset(y->data, 0, (size_t)ny * esz);
    const int64_t *idx = ind->data;
    const char *xs = x->data;
    char *ys = y->data;
    for (int64_t i = 0; i < nx; i++) {
        int64_t v = idx[i];
        if (v < 0 || v >= ndef)
            return ox_node_err(n, OX_E_INVALID, "index %lld at %lld is outside [0, %lld)",
                               (long long)v, (long long)i, (long long)ndef);
        int64_t dst = v;
        if (!same) { /* the coordinates of v in the default shape, placed in y's shape */
            int64_t r = v, stride = 1;
            dst = 0;
            bool inside = true;
            for (int d = rank - 1; d >= 0; d--) {
                int64_t c = r % def[d];
                r /= def[d];
                if (c >= y->dims[d]) inside = false;
                dst += c * stride;
                stride *= y->dims[d];
            }
            if (!inside) continue;
        }
        memcpy(ys + (size_t)dst * esz, xs + (size_t)i * esz, esz);
    }
    return OX_OK;
}

/* ---- MaxRoiPool ------------------------------------------------------------------------ */

static ox_status roi_setup(const struct ox_node *n, const ox_tensor *x, const ox_tensor *rois,
                           int64_t *ph, int64_t *pw) {
    char sx[256], sr[256];
    if (!x || !rois) return ox_node_err(n, OX_E_INVALID, "expected inputs X and rois");
    if (!is_float_type(x->dtype) || rois->dtype != x->dtype)
        return ox_node_err(n, OX_E_UNSUPPORTED, "element types %s and %s: expected one float type",
                           ox_dtype_name(x->dtype), ox_dtype_name(rois->dtype));
    if (x->rank != 4 || rois->rank != 2 || rois->dims[1] != 5)
        return ox_node_err(n, OX_E_SHAPE, "expected X [N, C, H, W] and rois [R, 5], got %s and %s",
                           ox_tensor_desc(x, sx, sizeof sx), ox_tensor_desc(rois, sr, sizeof sr));
    const int64_t *ps;
    if (ox_attr_ints(n, "pooled_shape", &ps) != 2)
        return ox_node_err(n, OX_E_INVALID, "attribute pooled_shape (2 values) is required");
    if (ps[0] <= 0 || ps[1] <= 0 || ps[0] > INT_MAX || ps[1] > INT_MAX)
        return ox_node_err(n, OX_E_INVALID, "pooled_shape [%lld, %lld]", (long long)ps[0],
                           (long long)ps[1]);
    *ph = ps[0];
    *pw = ps[1];
    return OX_OK;
}

ox_status ox_nn_infer_maxroipool(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                 const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    const ox_tensor *x = ox_in(n, in, 0), *rois = ox_in(n, in, 1);
    int64_t ph, pw;
    ox_status st = roi_setup(n, x, rois, &ph, &pw);
    if (st) return st;
    int64_t dims[4] = {rois->dims[0], x->dims[1], ph, pw};
    ox_set_shape(out[0], x->dtype, 4, dims);
    return OX_OK;
}

/* Caffe's ROI pooling: the box is scaled and rounded to whole pixels, split into
 * pooled_shape bins (floor at the start, ceil at the end), and each bin takes its maximum;
 * an empty bin gives 0. */
ox_status ox_nn_cpu_maxroipool(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                               const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    const ox_tensor *x = in[0], *rois = in[1];
    ox_tensor *y = out[0];
    int64_t ph, pw;
    ox_status st = roi_setup(n, x, rois, &ph, &pw);
    if (st) return st;
    double scale = ox_attr_float(n, "spatial_scale", 1.0f);
    int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3], R = rois->dims[0];
    bool f32 = x->dtype == OX_FLOAT;
    const float *xf = x->data;
    float *yf = y->data;
    for (int64_t r = 0; r < R; r++) {
        double bd = ox_get_f64(rois, r * 5);
        if (!(bd >= 0 && bd < (double)N))
            return ox_node_err(n, OX_E_INVALID, "roi %lld: batch index %g outside [0, %lld)",
                               (long long)r, bd, (long long)N);
        int64_t bi = (int64_t)bd;
        double c[4];
        for (int k = 0; k < 4; k++) {
            c[k] = round(ox_get_f64(rois, r * 5 + 1 + k) * scale);
            if (!(fabs(c[k]) < 1e15))
                return ox_node_err(n, OX_E_INVALID, "roi %lld: coordinate out of range",
                                   (long long)r);
        }
        int64_t x1 = (int64_t)c[0], y1 = (int64_t)c[1], x2 = (int64_t)c[2], y2 = (int64_t)c[3];
        int64_t rh = y2 - y1 + 1 > 1 ? y2 - y1 + 1 : 1, rw = x2 - x1 + 1 > 1 ? x2 - x1 + 1 : 1;
        double bh = (double)rh / (double)ph, bw = (double)rw / (double)pw;
        for (int64_t ch = 0; ch < C; ch++) {
            int64_t xbase = (bi * C + ch) * H * W, ybase = ((r * C) + ch) * ph * pw;
            for (int64_t i = 0; i < ph; i++) {
                int64_t hs = (int64_t)floor((double)i * bh) + y1;
                int64_t he = (int64_t)ceil((double)(i + 1) * bh) + y1;
                hs = hs < 0 ? 0 : hs > H ? H : hs;
                he = he < 0 ? 0 : he > H ? H : he;
                for (int64_t j = 0; j < pw; j++) {
                    int64_t ws = (int64_t)floor((double)j * bw) + x1;
                    int64_t we = (int64_t)ceil((double)(j + 1) * bw) + x1;
                    ws = ws < 0 ? 0 : ws > W ? W : ws;
                    we = we < 0 ? 0 : we > W ? W : we;
                    double mx = he <= hs || we <= ws ? 0 : -INFINITY;
                    for (int64_t h = hs; h < he; h++)
                        for (int64_t w = ws; w < we; w++) {
                            int64_t xi = xbase + h * W + w;
                            double v = f32 ? xf[xi] : ox_get_f64(x, xi);
                            if (v > mx) mx = v;
                        }
                    int64_t yi = ybase + i * pw + j;
                    if (f32)
                        yf[yi] = (float)mx;
                    else
                        ox_set_f64(y, yi, mx);
                }
            }
        }
    }
    return OX_OK;
}

/* ---- MeanVarianceNormalization --------------------------------------------------------- */

/* The reduced axes as a mask (default [0, 2, 3]); the number of groups (elements kept) is
 * the product of the other dims. */
static ox_status mvn_axes(const struct ox_node *n, const ox_tensor *x, bool *red, int64_t *groups) {
    static const int64_t def[3] = {0, 2, 3};
    const int64_t *ax;
    int na = ox_attr_ints(n, "axes", &ax);
    if (na < 0) ax = def, na = 3;
    for (int i = 0; i < x->rank; i++) red[i] = false;
    for (int i = 0; i < na; i++) {
        int a;
        ox_status st = ox_norm_axis(n, ax[i], x->rank, &a);
        if (st) return st;
        red[a] = true;
    }
    *groups = 1;
    for (int i = 0; i < x->rank; i++)
        if (!red[i]) *groups *= x->dims[i];
    return OX_OK;
}

ox_status ox_nn_infer_mvn(struct ox_infer_ctx *ctx, const struct ox_node *n,
                          const ox_tensor *const *in, ox_tensor *const *out) {
    const ox_tensor *x = ox_in(n, in, 0);
    if (!x) return ox_node_err(n, OX_E_INVALID, "expected input X");
    if (!is_float_type(x->dtype))
        return ox_node_err(n, OX_E_UNSUPPORTED, "element type %s: expected a float type",
                           ox_dtype_name(x->dtype));
    bool red[OX_MAX_RANK];
    int64_t groups;
    ox_status st = mvn_axes(n, x, red, &groups);
    if (st) return st;
    ox_set_like(out[0], x);
    size_t t; /* scratch: mean and variance per group */
    if (!mul3(groups, 2, sizeof(double), &t))
        return ox_node_err(n, OX_E_NOMEM, "scratch size overflows");
    ctx->scratch_bytes = t;
    return OX_OK;
}

/* Walk x in row order: for each run along the last axis, `base` is the group of its first
 * element and `step` (0 or 1) how the group moves along it. */
#define MVN_WALK(BODY)                                                                             \
    do {                                                                                           \
        int64_t c_[OX_MAX_RANK] = {0}, last_ = x->rank ? x->dims[x->rank - 1] : 1;                 \
        int64_t step = x->rank && !red[x->rank - 1] ? 1 : 0;                                       \
        for (int64_t off = 0; off < total; off += last_) {                                         \
            int64_t base = 0;                                                                      \
            for (int d_ = 0; d_ < x->rank - 1; d_++) base += c_[d_] * gs[d_];                      \
            BODY;                                                                                  \
            for (int d_ = x->rank - 2; d_ >= 0; d_--) {                                            \
                if (++c_[d_] < x->dims[d_]) break;                                                 \
                c_[d_] = 0;                                                                        \
            }                                                                                      \
        }                                                                                          \
    } while (0)

/* Y = (X - mean) / (sqrt(variance) + 1e-9), statistics over `axes`, as ONNX's function
 * body computes it (the epsilon is added to the standard deviation). */
ox_status ox_nn_cpu_mvn(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                        const ox_tensor *const *in, ox_tensor *const *out) {
    const ox_tensor *x = in[0];
    ox_tensor *y = out[0];
    bool red[OX_MAX_RANK];
    int64_t groups;
    ox_status st = mvn_axes(n, x, red, &groups);
    if (st) return st;
    int64_t total = ox_tensor_numel(x);
    if (total == 0) return OX_OK;
    double count = (double)(total / groups);
    double *mean = ctx->scratch, *var = mean + groups;
    int64_t gs[OX_MAX_RANK], g = 1; /* group strides of each axis (0 along reduced axes) */
    for (int d = x->rank - 1; d >= 0; d--) {
        gs[d] = red[d] ? 0 : g;
        if (!red[d]) g *= x->dims[d];
    }
    for (int64_t i = 0; i < groups; i++) mean[i] = var[i] = 0;
    bool f32 = x->dtype == OX_FLOAT;
    const float *xf = x->data;
    float *yf = y->data;
#define LD(i) (f32 ? (double)xf[i] : ox_get_f64(x, i))
    MVN_WALK(for (int64_t j = 0; j < last_; j++) mean[base + j * step] += LD(off + j));
    for (int64_t i = 0; i < groups; i++) mean[i] /= count;
    MVN_WALK(for (int64_t j = 0; j < last_; j++) {
        double dv = LD(off + j) - mean[base + j * step];
        var[base + j * step] += dv * dv;
    });
    for (int64_t i = 0; i < groups; i++) var[i] = 1.0 / (sqrt(var[i] / count) + 1e-9);
    MVN_WALK(for (int64_t j = 0; j < last_; j++) {
        int64_t gi = base + j * step;
        double v = (LD(off + j) - mean[gi]) * var[gi];
        if (f32)
            yf[off + j] = (float)v;
        else
            ox_set_f64(y, off + j, v);
    });
#undef LD
    return OX_OK;
}

/* ---- GroupNormalization ---------------------------------------------------------------- */

/* Opset 18: scale and bias per group ([num_groups]); opset 21: per channel ([C]). */
ox_status ox_nn_infer_groupnorm(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    const ox_tensor *x = ox_in(n, in, 0), *scale = ox_in(n, in, 1), *bias = ox_in(n, in, 2);
    char sx[256], sp[256];
    if (!x || !scale || !bias)
        return ox_node_err(n, OX_E_INVALID, "expected inputs X, scale and bias");
    if (!is_float_type(x->dtype) || scale->dtype != x->dtype || bias->dtype != x->dtype)
        return ox_node_err(n, OX_E_UNSUPPORTED, "element types %s, %s, %s: expected one float type",
                           ox_dtype_name(x->dtype), ox_dtype_name(scale->dtype),
                           ox_dtype_name(bias->dtype));
    if (x->rank < 2)
        return ox_node_err(n, OX_E_SHAPE, "input %s: expected [N, C, ...]",
                           ox_tensor_desc(x, sx, sizeof sx));
    int64_t G = ox_attr_int(n, "num_groups", 0), C = x->dims[1];
    if (!ox_node_attr(n, "num_groups"))
        return ox_node_err(n, OX_E_INVALID, "attribute num_groups is required");
    if (G <= 0 || C % G)
        return ox_node_err(n, OX_E_SHAPE, "num_groups %lld does not divide the %lld channels",
                           (long long)G, (long long)C);
    int64_t want = n->opset >= 21 ? C : G;
    const ox_tensor *ps[2] = {scale, bias};
    for (int k = 0; k < 2; k++)
        if (ps[k]->rank != 1 || ps[k]->dims[0] != want)
            return ox_node_err(n, OX_E_SHAPE, "%s %s: expected [%lld] (per %s at opset %d)",
                               k ? "bias" : "scale", ox_tensor_desc(ps[k], sp, sizeof sp),
                               (long long)want, n->opset >= 21 ? "channel" : "group", n->opset);
    int64_t stash = ox_attr_int(n, "stash_type", 1);
    if (n->opset >= 21 && stash != 1 && stash != OX_DOUBLE && stash != OX_FLOAT16 &&
        stash != OX_BFLOAT16)
        return ox_node_err(n, OX_E_INVALID, "stash_type %lld: expected a float type",
                           (long long)stash);
    ox_set_like(out[0], x);
    return OX_OK;
}

/* Statistics of each (image, group) block accumulate in double, whatever stash_type asks
 * (at least as precise as float). */
ox_status ox_nn_cpu_groupnorm(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                              const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    const ox_tensor *x = in[0], *scale = in[1], *bias = in[2];
    ox_tensor *y = out[0];
    int64_t G = ox_attr_int(n, "num_groups", 1), N = x->dims[0], C = x->dims[1], S = 1;
    for (int i = 2; i < x->rank; i++) S *= x->dims[i];
    double eps = ox_attr_float(n, "epsilon", 1e-5f);
    bool per_channel = n->opset >= 21, f32 = x->dtype == OX_FLOAT;
    int64_t cpg = C / G, block = cpg * S;
    for (int64_t b = 0; b < N; b++)
        for (int64_t gr = 0; gr < G; gr++) {
            int64_t base = (b * C + gr * cpg) * S;
            double sum = 0, sq = 0;
            if (f32) {
                const float *xs = (const float *)x->data + base;
                for (int64_t i = 0; i < block; i++) sum += xs[i];
            } else {
                for (int64_t i = 0; i < block; i++) sum += ox_get_f64(x, base + i);
            }
            double m = block ? sum / (double)block : 0;
            if (f32) {
                const float *xs = (const float *)x->data + base;
                for (int64_t i = 0; i < block; i++) {
                    double dv = xs[i] - m;
                    sq += dv * dv;
                }
            } else {
                for (int64_t i = 0; i < block; i++) {
                    double dv = ox_get_f64(x, base + i) - m;
                    sq += dv * dv;
                }
            }
            double inv = 1.0 / sqrt((block ? sq / (double)block : 0) + eps);
            for (int64_t c = 0; c < cpg; c++) {
                int64_t pi = per_channel ? gr * cpg + c : gr, cb = base + c * S;
                double a = ox_get_f64(scale, pi) * inv, b0 = ox_get_f64(bias, pi) - m * a;
                if (f32) {
                    const float *xs = (const float *)x->data + cb;
                    float *ys = (float *)y->data + cb, fa = (float)a, fb = (float)b0;
                    for (int64_t i = 0; i < S; i++) ys[i] = xs[i] * fa + fb;
                } else {
                    for (int64_t i = 0; i < S; i++)
                        ox_set_f64(y, cb + i, ox_get_f64(x, cb + i) * a + b0);
                }
            }
        }
    return OX_OK;
}
