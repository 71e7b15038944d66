/* Data movement and shape ops of the default domain: Identity, Flatten, Reshape, Transpose,
 * Concat, Split, Slice, Gather, GatherElements, GatherND, Squeeze, Unsqueeze, Shape, Size,
 * Constant, ConstantOfShape, Expand, Tile, Pad, Range, EyeLike, OneHot, DepthToSpace,
 * SpaceToDepth, Scatter, ScatterElements, ScatterND, Trilu, CumSum, NonZero, Compress,
 * ReverseSequence.
 *
 * Most of these only move elements, so they work for every element type by copying
 * ox_dtype_size() bytes at a time; string tensors hold `char *`, and their pointers are
 * copied as they are (the output borrows the strings of the input, which the executor keeps
 * alive for the run). Ops that compute (Range, CumSum, the Scatter reductions, EyeLike's
 * ones) switch on the element type with the X-macros below.
 *
 * Shape inference is exact whenever the data it needs is known: Reshape's shape, Slice's
 * starts/ends/axes/steps, Expand's shape, Tile's repeats, ConstantOfShape's input, Range's
 * scalars, Pad's pads, Split's sizes, Squeeze/Unsqueeze's axes (opset 13+), OneHot's depth,
 * Compress's condition and NonZero's input. When that data is not known yet, infer returns
 * OX_NEED_DATA and the node becomes dynamic. Shape and Size read only the dims of their
 * input, never its data, so they can run whenever the input's shape is known.
 */
#include "kernels/op.h"

#include <limits.h>
#include <stdio.h>

/* ---- element types --------------------------------------------------------------------- */

/* X(dtype, C type) for the types held as plain C numbers. */
#define OX_TN_FLOAT_TYPES(X) X(OX_FLOAT, float) X(OX_DOUBLE, double)
#define OX_TN_INT_TYPES(X)                                                                         \
    X(OX_INT8, int8_t)                                                                             \
    X(OX_UINT8, uint8_t)                                                                           \
    X(OX_INT16, int16_t)                                                                           \
    X(OX_UINT16, uint16_t)                                                                         \
    X(OX_INT32, int32_t)                                                                           \
    X(OX_UINT32, uint32_t)                                                                         \
    X(OX_INT64, int64_t)                                                                           \
    X(OX_UINT64, uint64_t)

/* Types the generic accessors (ox_get_f64/ox_set_f64) handle: arithmetic ops accept these. */
static bool is_arith(ox_dtype dt) {
    switch (dt) {
    case OX_FLOAT:
    case OX_DOUBLE:
    case OX_FLOAT16:
    case OX_BFLOAT16:
    case OX_BOOL: return true;
    default: return ox_dtype_is_int(dt);
    }
}

/* ---- helpers --------------------------------------------------------------------------- */

/* Data of `t` is available (or not needed: no elements). */
static bool known(const ox_tensor *t) {
    return t && (t->data != NULL || ox_tensor_numel(t) == 0);
}

static ox_status need_in(const struct ox_node *n, const ox_tensor *const *in, int i,
                         const char *what) {
    const ox_tensor *t = ox_in(n, in, i);
    if (!t) return ox_node_err(n, OX_E_INVALID, "input %d (%s) is required", i, what);
    if (t->rank < 0 || t->rank > OX_MAX_RANK)
        return ox_node_err(n, OX_E_SHAPE, "input %d (%s) has rank %d, at most %d supported", i,
                           what, t->rank, OX_MAX_RANK);
    if (t->dtype == OX_UNDEFINED || ox_dtype_size(t->dtype) == 0)
        return ox_node_err(n, OX_E_INVALID, "input %d (%s) has no valid element type (%d)", i, what,
                           (int)t->dtype);
    for (int d = 0; d < t->rank; d++)
        if (t->dims[d] < 0)
            return ox_node_err(n, OX_E_SHAPE, "input %d (%s) has a negative dimension", i, what);
    return OX_OK;
}

static ox_status need_out(const struct ox_node *n, ox_tensor *const *out, int i) {
    if (i >= n->n_outputs || !out[i])
        return ox_node_err(n, OX_E_INVALID, "output %d is required", i);
    return OX_OK;
}

/* "[2,3,4]" into buf. */
static const char *fmt_dims(char *buf, size_t len, int rank, const int64_t *dims) {
    size_t k = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < rank && k < len; i++)
        k += (size_t)snprintf(buf + k, len - k, "%s%lld", i ? "," : "", (long long)dims[i]);
    if (k < len) snprintf(buf + k, len - k, "]");
    return buf;
}

/* Product of dims; false on a negative dim or overflow. */
static bool numel_ok(int rank, const int64_t *dims, int64_t *out) {
    int64_t p = 1;
    for (int i = 0; i < rank; i++)
        if (dims[i] < 0 || __builtin_mul_overflow(p, dims[i], &p)) return false;
    *out = p;
    return true;
}

static int64_t prod(const int64_t *dims, int from, int to) {
    int64_t p = 1;
    for (int i = from; i < to; i++) p *= dims[i];
    return p;
}

/* An output whose dims come from data: reject negative or overflowing shapes early, with
 * the shape in the message. */
static ox_status check_out_size(const struct ox_node *n, const ox_tensor *t) {
    size_t b;
    if (!ox_tensor_bytes(t->dtype, t->rank, t->dims, &b)) {
        char s[256];
        return ox_node_err(n, OX_E_SHAPE, "output shape %s is invalid or too large",
                           fmt_dims(s, sizeof s, t->rank, t->dims));
    }
    return OX_OK;
}

/* ox_read_ints with a status; `what` names the list in errors. */
static ox_status read_ints(const struct ox_node *n, const ox_tensor *t, int64_t *out, int64_t max,
                           int64_t *cnt, const char *what) {
    *cnt = 0;
    if (!ox_dtype_is_int(t->dtype))
        return ox_node_err(n, OX_E_INVALID, "%s must be an integer tensor, got %s", what,
                           ox_dtype_name(t->dtype));
    if (ox_tensor_numel(t) > max)
        return ox_node_err(n, OX_E_INVALID, "%s has %lld values, at most %lld allowed", what,
                           (long long)ox_tensor_numel(t), (long long)max);
    int64_t c = ox_read_ints(n, t, out, max);
    if (c < 0) return OX_E_INVALID;
    *cnt = c;
    return OX_OK;
}

/* An integer attribute list copied into out[0..max); *cnt = -1 when absent. */
static ox_status attr_ints(const struct ox_node *n, const char *name, int64_t *out, int max,
                           int64_t *cnt) {
    *cnt = -1;
    const int64_t *v;
    int c = ox_attr_ints(n, name, &v);
    if (c > max)
        return ox_node_err(n, OX_E_INVALID, "attribute '%s' has %d values, at most %d allowed",
                           name, c, max);
    for (int i = 0; i < c; i++) out[i] = v[i];
    *cnt = c;
    return OX_OK;
}

/* One integer from a scalar (or one-element) tensor. */
static ox_status read_scalar_int(const struct ox_node *n, const ox_tensor *t, int64_t *v,
                                 const char *what) {
    *v = 0;
    if (!ox_dtype_is_int(t->dtype))
        return ox_node_err(n, OX_E_INVALID, "%s must be an integer tensor, got %s", what,
                           ox_dtype_name(t->dtype));
    if (ox_tensor_numel(t) != 1)
        return ox_node_err(n, OX_E_INVALID, "%s must hold one value, got %lld", what,
                           (long long)ox_tensor_numel(t));
    *v = ox_get_i64(t, 0);
    return OX_OK;
}

/* Normalise an axis against `rank`, with the axis's role in the message. */
static ox_status norm_axis(const struct ox_node *n, int64_t axis, int rank, int *out,
                           const char *what) {
    *out = 0;
    int64_t a = axis < 0 ? axis + rank : axis;
    if (a < 0 || a >= rank)
        return ox_node_err(n, OX_E_INVALID, "%s %lld out of range for rank %d", what,
                           (long long)axis, rank);
    *out = (int)a;
    return OX_OK;
}

static void strides_of(int rank, const int64_t *dims, int64_t *st) {
    int64_t s = 1;
    for (int i = rank - 1; i >= 0; i--) {
        st[i] = s;
        s *= dims[i];
    }
}

static void copy_data(ox_tensor *out, const ox_tensor *in) {
    size_t bytes = (size_t)ox_tensor_numel(in) * ox_dtype_size(in->dtype);
    if (bytes && out->data != in->data) memmove(out->data, in->data, bytes);
}

/* Fill `cnt` elements of `es` bytes at dst with the element at val. */
static void fill_elems(char *dst, const void *val, size_t es, int64_t cnt) {
    bool zero = true;
    for (size_t b = 0; b < es; b++) zero = zero && ((const unsigned char *)val)[b] == 0;
    if (zero) {
        if (cnt > 0) memset(dst, 0, (size_t)cnt * es);
        return;
    }
    for (int64_t i = 0; i < cnt; i++) memcpy(dst + (size_t)i * es, val, es);
}

#define SC_MAX_RANK (2 * OX_MAX_RANK)

/* n elements of es bytes to contiguous dst from src, bs bytes apart. */
static void gather(char *dst, const char *src, size_t es, int64_t n, int64_t bs) {
    switch (es) {
    case 1:
        for (int64_t k = 0; k < n; k++) dst[k] = src[k * bs];
        break;
    case 2:
        for (int64_t k = 0; k < n; k++) memcpy(dst + k * 2, src + k * bs, 2);
        break;
    case 4:
        for (int64_t k = 0; k < n; k++) memcpy(dst + k * 4, src + k * bs, 4);
        break;
    case 8:
        for (int64_t k = 0; k < n; k++) memcpy(dst + k * 8, src + k * bs, 8);
        break;
    default:
        for (int64_t k = 0; k < n; k++) memcpy(dst + (size_t)k * es, src + k * bs, es);
        break;
    }
}

/* dst[i][k] (rows x cols, contiguous) = src[i + k * cs] (elements of es bytes), in tiles of
 * 32 x 32. */
static void tile_transpose(char *dst, const char *src, size_t es, int64_t rows, int64_t cols,
                           int64_t cs) {
    enum { T = 32 };
    int64_t bs = cs * (int64_t)es;
    for (int64_t i0 = 0; i0 < rows; i0 += T) {
        int64_t i1 = i0 + T < rows ? i0 + T : rows;
        for (int64_t k0 = 0; k0 < cols; k0 += T) {
            int64_t n = (k0 + T < cols ? k0 + T : cols) - k0;
            for (int64_t i = i0; i < i1; i++)
                gather(dst + (size_t)(i * cols + k0) * es, src + (size_t)i * es + k0 * bs, es, n,
                       bs);
        }
    }
}

/* Copy a strided view of src (element strides, any sign, 0 for broadcast) into contiguous
 * dst: dst[i0,..,ik] = src[sum i_d * strides[d]]. Adjacent dims that are contiguous in src
 * are merged so that the innermost copy is a memcpy where possible. */
static void strided_copy(char *dst, const char *src, size_t es, int rank, const int64_t *dims_in,
                         const int64_t *strides_in) {
    int64_t dims[SC_MAX_RANK], st[SC_MAX_RANK];
    int r = 0;
    for (int i = 0; i < rank; i++) {
        if (dims_in[i] == 0) return;
        if (dims_in[i] == 1) continue;
        if (r > 0 && st[r - 1] == strides_in[i] * dims_in[i]) {
            dims[r - 1] *= dims_in[i];
            st[r - 1] = strides_in[i];
            continue;
        }
        dims[r] = dims_in[i];
        st[r] = strides_in[i];
        r++;
    }
    if (r == 0) {
        memcpy(dst, src, es);
        return;
    }
    int64_t inner = dims[r - 1], is = st[r - 1];
    int64_t idx[SC_MAX_RANK] = {0}, off = 0;
    size_t row = (size_t)inner * es;
    /* the last two dims a transpose (NCHW <-> NHWC): copied a plane at a time in tiles, so
     * that the strided reads of a tile's rows share their cache lines (each row of the output
     * otherwise reads one line per element, lines a later row reads again after eviction) */
    bool tiles = r >= 2 && is > 1 && st[r - 2] == 1 && dims[r - 2] >= 8 && inner >= 8;
    int last = tiles ? r - 2 : r - 1; /* the dims one step copies */
    size_t step = tiles ? (size_t)dims[r - 2] * row : row;
    int64_t outer = prod(dims, 0, last);
    for (int64_t o = 0; o < outer; o++) {
        const char *s = src + off * (int64_t)es;
        if (tiles)
            tile_transpose(dst, s, es, dims[r - 2], inner, is);
        else if (is == 1)
            memcpy(dst, s, row);
        else
            gather(dst, s, es, inner, is * (int64_t)es);
        dst += step;
        for (int d = last - 1; d >= 0; d--) {
            idx[d]++;
            off += st[d];
            if (idx[d] < dims[d]) break;
            off -= st[d] * dims[d];
            idx[d] = 0;
        }
    }
}

/* ---- Identity -------------------------------------------------------------------------- */

ox_status ox_tn_infer_identity(struct ox_infer_ctx *ctx, const struct ox_node *n,
                               const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    ox_status st;
    if ((st = need_in(n, in, 0, "input")) || (st = need_out(n, out, 0))) return st;
    ox_set_like(out[0], in[0]);
    return OX_OK;
}

ox_status ox_tn_cpu_identity(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                             const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx, (void)n;
    copy_data(out[0], in[0]);
    return OX_OK;
}

/* Kernel shared by the ops that only change the shape (Flatten, Reshape, Squeeze,
 * Unsqueeze): the elements stay in the same order. */
ox_status ox_tn_cpu_reshape(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                            const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    if (ox_tensor_numel(in[0]) != ox_tensor_numel(out[0]))
        return ox_node_err(n, OX_E_INTERNAL, "element counts differ (%lld vs %lld)",
                           (long long)ox_tensor_numel(in[0]), (long long)ox_tensor_numel(out[0]));
    copy_data(out[0], in[0]);
    return OX_OK;
}

/* ---- Flatten --------------------------------------------------------------------------- */

ox_status ox_tn_infer_flatten(struct ox_infer_ctx *ctx, const struct ox_node *n,
                              const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    ox_status st;
    if ((st = need_in(n, in, 0, "input")) || (st = need_out(n, out, 0))) return st;
    const ox_tensor *x = in[0];
    int64_t axis = ox_attr_int(n, "axis", 1);
    if (axis < 0 && n->opset >= 11) axis += x->rank;
    if (axis < 0 || axis > x->rank)
        return ox_node_err(n, OX_E_INVALID, "axis %lld out of range [%d, %d] for rank %d",
                           (long long)ox_attr_int(n, "axis", 1), n->opset >= 11 ? -x->rank : 0,
                           x->rank, x->rank);
    int64_t d[2] = {prod(x->dims, 0, (int)axis), prod(x->dims, (int)axis, x->rank)};
    ox_set_shape(out[0], x->dtype, 2, d);
    return OX_OK;
}

/* ---- Reshape --------------------------------------------------------------------------- */

/* Reshape's rule (kernels/op.h): also FusedAttention's views (kernels/attn_plan.c) use it. */
ox_status ox_reshape_dims(const struct ox_node *n, const ox_tensor *x, int k, const int64_t *shape,
                          bool allowzero, int64_t *dims) {
    int64_t known_prod = 1, total;
    int infer_at = -1;
    bool has_zero = false;
    char sx[256], ss[256];
    fmt_dims(ss, sizeof ss, k, shape);
    for (int i = 0; i < k; i++) {
        int64_t d = shape[i];
        if (d == -1) {
            if (infer_at >= 0)
                return ox_node_err(n, OX_E_INVALID, "shape %s has more than one -1", ss);
            infer_at = i;
            dims[i] = 1;
            continue;
        }
        if (d < -1)
            return ox_node_err(n, OX_E_INVALID, "shape %s has an invalid dimension %lld", ss,
                               (long long)d);
        if (d == 0 && !allowzero) {
            if (i >= x->rank)
                return ox_node_err(n, OX_E_INVALID,
                                   "shape %s: 0 at position %d copies an "
                                   "input dimension, but the input has rank %d",
                                   ss, i, x->rank);
            d = x->dims[i];
        } else if (d == 0) {
            has_zero = true;
        }
        dims[i] = d;
        if (__builtin_mul_overflow(known_prod, d, &known_prod))
            return ox_node_err(n, OX_E_SHAPE, "shape %s is too large", ss);
    }
    if (allowzero && has_zero && infer_at >= 0)
        return ox_node_err(n, OX_E_INVALID, "shape %s has both 0 and -1 with allowzero=1", ss);
    if (!numel_ok(x->rank, x->dims, &total))
        return ox_node_err(n, OX_E_SHAPE, "input shape is invalid");
    if (infer_at >= 0) {
        if (known_prod == 0 || total % known_prod != 0)
            return ox_node_err(n, OX_E_SHAPE, "cannot reshape %s into %s",
                               ox_tensor_desc(x, sx, sizeof sx), ss);
        dims[infer_at] = total / known_prod;
    } else if (known_prod != total) {
        return ox_node_err(n, OX_E_SHAPE, "cannot reshape %s (%lld elements) into %s",
                           ox_tensor_desc(x, sx, sizeof sx), (long long)total, ss);
    }
    return OX_OK;
}

ox_status ox_tn_infer_reshape(struct ox_infer_ctx *ctx, const struct ox_node *n,
                              const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    ox_status st;
    if ((st = need_in(n, in, 0, "data")) || (st = need_out(n, out, 0))) return st;
    const ox_tensor *x = in[0];
    int64_t shape[OX_MAX_RANK], k;
    if (n->opset < 5) {
        if ((st = attr_ints(n, "shape", shape, OX_MAX_RANK, &k))) return st;
        if (k < 0) return ox_node_err(n, OX_E_INVALID, "attribute 'shape' is required");
    } else {
        if ((st = need_in(n, in, 1, "shape"))) return st;
        if (!known(in[1])) return OX_NEED_DATA;
        if ((st = read_ints(n, in[1], shape, OX_MAX_RANK, &k, "shape"))) return st;
    }
    bool allowzero = n->opset >= 14 && ox_attr_int(n, "allowzero", 0) != 0;
    int64_t dims[OX_MAX_RANK];
    if ((st = ox_reshape_dims(n, x, (int)k, shape, allowzero, dims))) return st;
    ox_set_shape(out[0], x->dtype, (int)k, dims);
    return OX_OK;
}

/* ---- Transpose ------------------------------------------------------------------------- */

static ox_status transpose_perm(const struct ox_node *n, int rank, int *perm) {
    for (int i = 0; i < rank; i++) perm[i] = rank - 1 - i;
    int64_t p[OX_MAX_RANK], k;
    ox_status st = attr_ints(n, "perm", p, OX_MAX_RANK, &k);
    if (st) return st;
    if (k < 0) {
        for (int i = 0; i < rank; i++) perm[i] = rank - 1 - i;
        return OX_OK;
    }
    char sp[256];
    if (k != rank)
        return ox_node_err(n, OX_E_INVALID, "perm %s has %lld entries, the input has rank %d",
                           fmt_dims(sp, sizeof sp, (int)k, p), (long long)k, rank);
    bool seen[OX_MAX_RANK] = {0};
    for (int i = 0; i < rank; i++) {
        if (p[i] < 0 || p[i] >= rank || seen[p[i]])
            return ox_node_err(n, OX_E_INVALID, "perm %s is not a permutation of 0..%d",
                               fmt_dims(sp, sizeof sp, (int)k, p), rank - 1);
        seen[p[i]] = true;
        perm[i] = (int)p[i];
    }
    return OX_OK;
}

ox_status ox_tn_infer_transpose(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    ox_status st;
    if ((st = need_in(n, in, 0, "data")) || (st = need_out(n, out, 0))) return st;
    int perm[OX_MAX_RANK];
    if ((st = transpose_perm(n, in[0]->rank, perm))) return st;
    int64_t dims[OX_MAX_RANK];
    for (int i = 0; i < in[0]->rank; i++) dims[i] = in[0]->dims[perm[i]];
    ox_set_shape(out[0], in[0]->dtype, in[0]->rank, dims);
    return OX_OK;
}

ox_status ox_tn_cpu_transpose(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                              const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    const ox_tensor *x = in[0];
    int perm[OX_MAX_RANK];
    ox_status st = transpose_perm(n, x->rank, perm);
    if (st) return st;
    int64_t xs[OX_MAX_RANK], s[OX_MAX_RANK];
    strides_of(x->rank, x->dims, xs);
    for (int i = 0; i < x->rank; i++) s[i] = xs[perm[i]];
    strided_copy(out[0]->data, x->data, ox_dtype_size(x->dtype), out[0]->rank, out[0]->dims, s);
    return OX_OK;
}

/* ---- Concat ---------------------------------------------------------------------------- */

static ox_status concat_axis(const struct ox_node *n, int rank, int *axis) {
    const struct ox_attr *a = ox_node_attr(n, "axis");
    if (!a && n->opset >= 4) return ox_node_err(n, OX_E_INVALID, "attribute 'axis' is required");
    int64_t ax = ox_attr_int(n, "axis", 1);
    if (ax < 0 && n->opset < 11)
        return ox_node_err(n, OX_E_INVALID, "negative axis %lld needs opset 11", (long long)ax);
    return norm_axis(n, ax, rank, axis, "axis");
}

ox_status ox_tn_infer_concat(struct ox_infer_ctx *ctx, const struct ox_node *n,
                             const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    ox_status st;
    if (n->n_inputs < 1) return ox_node_err(n, OX_E_INVALID, "needs at least one input");
    if ((st = need_out(n, out, 0))) return st;
    for (int i = 0; i < n->n_inputs; i++)
        if ((st = need_in(n, in, i, "inputs"))) return st;
    const ox_tensor *x = in[0];
    if (x->rank < 1) return ox_node_err(n, OX_E_INVALID, "cannot concatenate scalars");
    int axis;
    if ((st = concat_axis(n, x->rank, &axis))) return st;
    int64_t dims[OX_MAX_RANK];
    for (int d = 0; d < x->rank; d++) dims[d] = x->dims[d];
    dims[axis] = 0;
    for (int i = 0; i < n->n_inputs; i++) {
        const ox_tensor *t = in[i];
        char s0[256], si[256];
        bool ok = t->dtype == x->dtype && t->rank == x->rank;
        for (int d = 0; ok && d < x->rank; d++) ok = d == axis || t->dims[d] == x->dims[d];
        if (!ok)
            return ox_node_err(n, OX_E_SHAPE,
                               "input %d %s does not match input 0 %s outside "
                               "axis %d",
                               i, ox_tensor_desc(t, si, sizeof si),
                               ox_tensor_desc(x, s0, sizeof s0), axis);
        if (__builtin_add_overflow(dims[axis], t->dims[axis], &dims[axis]))
            return ox_node_err(n, OX_E_SHAPE, "output too large");
    }
    ox_set_shape(out[0], x->dtype, x->rank, dims);
    return check_out_size(n, out[0]);
}

ox_status ox_tn_cpu_concat(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                           const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    int axis;
    ox_status st = concat_axis(n, in[0]->rank, &axis);
    if (st) return st;
    size_t es = ox_dtype_size(in[0]->dtype);
    int64_t outer = prod(in[0]->dims, 0, axis), inner = prod(in[0]->dims, axis + 1, in[0]->rank);
    char *dst = out[0]->data;
    for (int64_t o = 0; o < outer; o++)
        for (int i = 0; i < n->n_inputs; i++) {
            size_t blk = (size_t)(in[i]->dims[axis] * inner) * es;
            if (!blk) continue;
            memcpy(dst, (const char *)in[i]->data + (size_t)o * blk, blk);
            dst += blk;
        }
    return OX_OK;
}

/* ---- Split ----------------------------------------------------------------------------- */

/* Where the sizes come from. */
enum { SPLIT_EQUAL, SPLIT_ATTR, SPLIT_INPUT, SPLIT_NUM };

struct split_info {
    int axis;
    int how;
    int64_t dim;   /* input dim along axis */
    int64_t chunk; /* SPLIT_EQUAL, SPLIT_NUM: size of each chunk but the last */
    const int64_t *attr;
    const ox_tensor *sizes;
};

static ox_status split_info(const struct ox_node *n, const ox_tensor *const *in,
                            struct split_info *s) {
    const ox_tensor *x = in[0];
    int64_t ax = ox_attr_int(n, "axis", 0);
    ox_status st = norm_axis(n, ax, x->rank, &s->axis, "axis");
    if (st) return st;
    s->dim = x->dims[s->axis];
    int no = n->n_outputs;
    const ox_tensor *sp = (n->opset == 1 || n->opset >= 13) ? ox_in(n, in, 1) : NULL;
    int na = n->opset < 13 ? ox_attr_ints(n, "split", &s->attr) : -1;
    int64_t num = n->opset >= 18 ? ox_attr_int(n, "num_outputs", 0) : 0;
    if (sp) {
        if (!known(sp)) return OX_NEED_DATA;
        if (!ox_dtype_is_int(sp->dtype))
            return ox_node_err(n, OX_E_INVALID, "split must be an integer tensor, got %s",
                               ox_dtype_name(sp->dtype));
        if (ox_tensor_numel(sp) != no)
            return ox_node_err(n, OX_E_INVALID, "split has %lld sizes for %d outputs",
                               (long long)ox_tensor_numel(sp), no);
        s->how = SPLIT_INPUT;
        s->sizes = sp;
    } else if (na >= 0) {
        if (na != no)
            return ox_node_err(n, OX_E_INVALID, "attribute 'split' has %d sizes for %d outputs", na,
                               no);
        s->how = SPLIT_ATTR;
    } else if (num > 0) {
        if (num != no)
            return ox_node_err(n, OX_E_INVALID, "num_outputs is %lld but the node has %d outputs",
                               (long long)num, no);
        s->how = SPLIT_NUM;
        s->chunk = (s->dim + num - 1) / num;
        if (s->chunk * (num - 1) > s->dim)
            return ox_node_err(n, OX_E_SHAPE,
                               "cannot split dimension %lld into %lld chunks of "
                               "%lld",
                               (long long)s->dim, (long long)num, (long long)s->chunk);
    } else {
        if (no < 1 || s->dim % no != 0)
            return ox_node_err(n, OX_E_SHAPE,
                               "dimension %lld of axis %d does not split evenly "
                               "into %d outputs",
                               (long long)s->dim, s->axis, no);
        s->how = SPLIT_EQUAL;
        s->chunk = s->dim / no;
    }
    return OX_OK;
}

static int64_t split_size(const struct split_info *s, int j, int n_outputs) {
    switch (s->how) {
    case SPLIT_INPUT: return ox_get_i64(s->sizes, j);
    case SPLIT_ATTR: return s->attr[j];
    case SPLIT_NUM: return j < n_outputs - 1 ? s->chunk : s->dim - s->chunk * (n_outputs - 1);
    default: return s->chunk;
    }
}

ox_status ox_tn_infer_split(struct ox_infer_ctx *ctx, const struct ox_node *n,
                            const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    ox_status st;
    if ((st = need_in(n, in, 0, "input"))) return st;
    if (n->n_outputs < 1) return ox_node_err(n, OX_E_INVALID, "needs at least one output");
    struct split_info s;
    if ((st = split_info(n, in, &s))) return st;
    int64_t sum = 0;
    for (int j = 0; j < n->n_outputs; j++) {
        int64_t sz = split_size(&s, j, n->n_outputs);
        if (sz < 0)
            return ox_node_err(n, OX_E_INVALID, "split size %lld for output %d is negative",
                               (long long)sz, j);
        if (__builtin_add_overflow(sum, sz, &sum))
            return ox_node_err(n, OX_E_INVALID, "split sizes overflow");
        if (out[j]) {
            ox_set_like(out[j], in[0]);
            out[j]->dims[s.axis] = sz;
        }
    }
    if (sum != s.dim)
        return ox_node_err(n, OX_E_SHAPE, "split sizes add up to %lld, axis %d has %lld",
                           (long long)sum, s.axis, (long long)s.dim);
    return OX_OK;
}

ox_status ox_tn_cpu_split(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                          const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    struct split_info s;
    ox_status st = split_info(n, in, &s);
    if (st) return st == OX_NEED_DATA ? ox_node_err(n, OX_E_INTERNAL, "split sizes unknown") : st;
    const ox_tensor *x = in[0];
    size_t es = ox_dtype_size(x->dtype);
    int64_t outer = prod(x->dims, 0, s.axis), inner = prod(x->dims, s.axis + 1, x->rank);
    size_t in_row = (size_t)(s.dim * inner) * es;
    int64_t at = 0;
    for (int j = 0; j < n->n_outputs; j++) {
        int64_t sz = split_size(&s, j, n->n_outputs);
        if (sz < 0 || at + sz > s.dim)
            return ox_node_err(n, OX_E_INVALID, "split sizes do not fit axis %d", s.axis);
        if (out[j] && sz > 0) {
            size_t blk = (size_t)(sz * inner) * es;
            const char *src = (const char *)x->data + (size_t)(at * inner) * es;
            char *dst = out[j]->data;
            for (int64_t o = 0; o < outer; o++)
                memcpy(dst + (size_t)o * blk, src + o * in_row, blk);
        }
        at += sz;
    }
    return OX_OK;
}

/* ---- Slice ----------------------------------------------------------------------------- */

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) {
    return v < lo ? lo : v > hi ? hi : v;
}

/* Per axis of the input: first index, step and output length. OX_NEED_DATA when an input
 * list is not known. */
static ox_status slice_params(const struct ox_node *n, const ox_tensor *const *in, int64_t *start,
                              int64_t *step, int64_t *len) {
    const ox_tensor *x = in[0];
    int r = x->rank;
    int64_t sts[OX_MAX_RANK], ens[OX_MAX_RANK], axs[OX_MAX_RANK], sps[OX_MAX_RANK];
    int64_t ns, ne, na = -1, nsp = -1;
    ox_status st;
    if (n->opset < 10) {
        if ((st = attr_ints(n, "starts", sts, OX_MAX_RANK, &ns)) ||
            (st = attr_ints(n, "ends", ens, OX_MAX_RANK, &ne)) ||
            (st = attr_ints(n, "axes", axs, OX_MAX_RANK, &na)))
            return st;
        if (ns < 0 || ne < 0)
            return ox_node_err(n, OX_E_INVALID, "attributes 'starts' and 'ends' are required");
    } else {
        if ((st = need_in(n, in, 1, "starts")) || (st = need_in(n, in, 2, "ends"))) return st;
        for (int i = 1; i <= 4; i++)
            if (ox_in(n, in, i) && !known(in[i])) return OX_NEED_DATA;
        if ((st = read_ints(n, in[1], sts, OX_MAX_RANK, &ns, "starts")) ||
            (st = read_ints(n, in[2], ens, OX_MAX_RANK, &ne, "ends")))
            return st;
        if (ox_in(n, in, 3) && (st = read_ints(n, in[3], axs, OX_MAX_RANK, &na, "axes"))) return st;
        if (ox_in(n, in, 4) && (st = read_ints(n, in[4], sps, OX_MAX_RANK, &nsp, "steps")))
            return st;
    }
    if (ne != ns || (na >= 0 && na != ns) || (nsp >= 0 && nsp != ns))
        return ox_node_err(n, OX_E_INVALID,
                           "starts, ends, axes and steps differ in length "
                           "(%lld, %lld, %lld, %lld)",
                           (long long)ns, (long long)ne, (long long)na, (long long)nsp);
    for (int d = 0; d < r; d++) start[d] = 0, step[d] = 1, len[d] = x->dims[d];
    bool seen[OX_MAX_RANK] = {0};
    for (int i = 0; i < ns; i++) {
        int a;
        if ((st = norm_axis(n, na >= 0 ? axs[i] : i, r, &a, "axis"))) return st;
        if (seen[a]) return ox_node_err(n, OX_E_INVALID, "axis %d is sliced twice", a);
        seen[a] = true;
        int64_t s = sts[i], e = ens[i], k = nsp >= 0 ? sps[i] : 1, d = x->dims[a], l;
        if (k == 0) return ox_node_err(n, OX_E_INVALID, "step for axis %d is 0", a);
        if (k < -INT64_MAX) k = -INT64_MAX;
        if (s < 0) s += d;
        if (e < 0) e += d;
        if (d == 0) {
            s = 0, l = 0;
        } else if (k > 0) {
            s = clamp64(s, 0, d);
            e = clamp64(e, 0, d);
            l = e > s ? (e - s - 1) / k + 1 : 0;
        } else {
            s = clamp64(s, 0, d - 1);
            e = clamp64(e, -1, d - 1);
            l = s > e ? (s - e - 1) / -k + 1 : 0;
        }
        start[a] = s, step[a] = k, len[a] = l;
    }
    return OX_OK;
}

ox_status ox_tn_infer_slice(struct ox_infer_ctx *ctx, const struct ox_node *n,
                            const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    ox_status st;
    if ((st = need_in(n, in, 0, "data")) || (st = need_out(n, out, 0))) return st;
    int64_t start[OX_MAX_RANK], step[OX_MAX_RANK], len[OX_MAX_RANK];
    if ((st = slice_params(n, in, start, step, len))) return st;
    ox_set_shape(out[0], in[0]->dtype, in[0]->rank, len);
    return OX_OK;
}

ox_status ox_tn_cpu_slice(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                          const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    const ox_tensor *x = in[0];
    int64_t start[OX_MAX_RANK], step[OX_MAX_RANK], len[OX_MAX_RANK], xs[OX_MAX_RANK],
        s[OX_MAX_RANK], base = 0;
    ox_status st = slice_params(n, in, start, step, len);
    if (st) return st == OX_NEED_DATA ? ox_node_err(n, OX_E_INTERNAL, "slice unknown") : st;
    if (ox_tensor_numel(out[0]) == 0) return OX_OK;
    strides_of(x->rank, x->dims, xs);
    for (int d = 0; d < x->rank; d++) {
        base += start[d] * xs[d];
        s[d] = step[d] * xs[d];
    }
    size_t es = ox_dtype_size(x->dtype);
    strided_copy(out[0]->data, (const char *)x->data + base * (int64_t)es, es, x->rank, len, s);
    return OX_OK;
}

/* ---- Gather ---------------------------------------------------------------------------- */

static ox_status check_indices_type(const struct ox_node *n, const ox_tensor *t) {
    if (!ox_dtype_is_int(t->dtype))
        return ox_node_err(n, OX_E_INVALID, "indices must be an integer tensor, got %s",
                           ox_dtype_name(t->dtype));
    return OX_OK;
}

/* An index into a dim of size d, negative counting from the end; error when out of range. */
static ox_status wrap_index(const struct ox_node *n, int64_t k, int64_t d, int axis, int64_t pos,
                            int64_t *out) {
    *out = 0;
    int64_t w = k < 0 ? k + d : k;
    if (w < 0 || w >= d)
        return ox_node_err(n, OX_E_INVALID,
                           "index %lld (at position %lld of the indices) is out "
                           "of range [%lld, %lld] for axis %d of size %lld",
                           (long long)k, (long long)pos, (long long)-d, (long long)d - 1, axis,
                           (long long)d);
    *out = w;
    return OX_OK;
}

ox_status ox_tn_infer_gather(struct ox_infer_ctx *ctx, const struct ox_node *n,
                             const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    ox_status st;
    if ((st = need_in(n, in, 0, "data")) || (st = need_in(n, in, 1, "indices")) ||
        (st = need_out(n, out, 0)) || (st = check_indices_type(n, in[1])))
        return st;
    const ox_tensor *x = in[0], *idx = in[1];
    int axis;
    if ((st = norm_axis(n, ox_attr_int(n, "axis", 0), x->rank, &axis, "axis"))) return st;
    int r = x->rank - 1 + idx->rank;
    if (r > OX_MAX_RANK)
        return ox_node_err(n, OX_E_SHAPE, "output rank %d exceeds %d", r, OX_MAX_RANK);
    int64_t dims[OX_MAX_RANK];
    int k = 0;
    for (int d = 0; d < axis; d++) dims[k++] = x->dims[d];
    for (int d = 0; d < idx->rank; d++) dims[k++] = idx->dims[d];
    for (int d = axis + 1; d < x->rank; d++) dims[k++] = x->dims[d];
    ox_set_shape(out[0], x->dtype, r, dims);
    return check_out_size(n, out[0]);
}

ox_status ox_tn_cpu_gather(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                           const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    const ox_tensor *x = in[0], *idx = in[1];
    int axis;
    ox_status st = norm_axis(n, ox_attr_int(n, "axis", 0), x->rank, &axis, "axis");
    if (st) return st;
    int64_t D = x->dims[axis], outer = prod(x->dims, 0, axis),
            inner = prod(x->dims, axis + 1, x->rank), ni = ox_tensor_numel(idx), k;
    for (int64_t j = 0; j < ni; j++)
        if ((st = wrap_index(n, ox_get_i64(idx, j), D, axis, j, &k))) return st;
    size_t blk = (size_t)inner * ox_dtype_size(x->dtype);
    if (!blk) return OX_OK;
    char *dst = out[0]->data;
    const char *src = x->data;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < ni; j++) {
            k = ox_get_i64(idx, j);
            if (k < 0) k += D;
            memcpy(dst, src + (size_t)(o * D + k) * blk, blk);
            dst += blk;
        }
    return OX_OK;
}

/* ---- GatherElements -------------------------------------------------------------------- */

/* Shared by GatherElements and Scatter(Elements): data [d...], indices [i...] of the same
 * rank with i_d <= d_d off the axis. */
static ox_status check_elements_shapes(const struct ox_node *n, const ox_tensor *x,
                                       const ox_tensor *idx, int axis) {
    char sx[256], si[256];
    bool ok = x->rank == idx->rank;
    for (int d = 0; ok && d < x->rank; d++) ok = d == axis || idx->dims[d] <= x->dims[d];
    if (!ok)
        return ox_node_err(n, OX_E_SHAPE,
                           "indices %s do not fit data %s (same rank, and no "
                           "larger off axis %d)",
                           ox_tensor_desc(idx, si, sizeof si), ox_tensor_desc(x, sx, sizeof sx),
                           axis);
    return OX_OK;
}

ox_status ox_tn_infer_gather_elements(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                      const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    ox_status st;
    if ((st = need_in(n, in, 0, "data")) || (st = need_in(n, in, 1, "indices")) ||
        (st = need_out(n, out, 0)) || (st = check_indices_type(n, in[1])))
        return st;
    int axis;
    if ((st = norm_axis(n, ox_attr_int(n, "axis", 0), in[0]->rank, &axis, "axis")) ||
        (st = check_elements_shapes(n, in[0], in[1], axis)))
        return st;
    ox_set_shape(out[0], in[0]->dtype, in[1]->rank, in[1]->dims);
    return OX_OK;
}

/* Gather/ScatterElements: the next position of the indices (an odometer over their dims up
 * to `last`), with `base` the matching element of the data on every dim but `axis`. */
static inline void elements_step(int last, int axis, const int64_t *xs, const int64_t *idims,
                                 int64_t *cnt, int64_t *base) {
    for (int d = last; d >= 0; d--) {
        cnt[d]++;
        if (d != axis) *base += xs[d];
        if (cnt[d] < idims[d]) break;
        if (d != axis) *base -= xs[d] * idims[d];
        cnt[d] = 0;
    }
}

ox_status ox_tn_cpu_gather_elements(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                                    const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    const ox_tensor *x = in[0], *idx = in[1];
    int axis, r = x->rank;
    ox_status st = norm_axis(n, ox_attr_int(n, "axis", 0), r, &axis, "axis");
    if (st) return st;
    int64_t xs[OX_MAX_RANK], cnt[OX_MAX_RANK] = {0}, base = 0, N = ox_tensor_numel(idx), k;
    strides_of(r, x->dims, xs);
    size_t es = ox_dtype_size(x->dtype);
    char *dst = out[0]->data;
    const char *src = x->data;
    for (int64_t e = 0; e < N; e++) {
        if ((st = wrap_index(n, ox_get_i64(idx, e), x->dims[axis], axis, e, &k))) return st;
        memcpy(dst + (size_t)e * es, src + (size_t)(base + k * xs[axis]) * es, es);
        elements_step(r - 1, axis, xs, idx->dims, cnt, &base);
    }
    return OX_OK;
}

/* ---- GatherND -------------------------------------------------------------------------- */

ox_status ox_tn_infer_gather_nd(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    ox_status st;
    if ((st = need_in(n, in, 0, "data")) || (st = need_in(n, in, 1, "indices")) ||
        (st = need_out(n, out, 0)) || (st = check_indices_type(n, in[1])))
        return st;
    const ox_tensor *x = in[0], *idx = in[1];
    int64_t b = n->opset >= 12 ? ox_attr_int(n, "batch_dims", 0) : 0;
    char sx[256], si[256];
    ox_tensor_desc(x, sx, sizeof sx);
    ox_tensor_desc(idx, si, sizeof si);
    if (x->rank < 1 || idx->rank < 1 || b < 0 || b >= x->rank || b >= idx->rank)
        return ox_node_err(n, OX_E_SHAPE,
                           "data %s, indices %s and batch_dims %lld: need ranks "
                           ">= 1 and batch_dims below both",
                           sx, si, (long long)b);
    int64_t m = idx->dims[idx->rank - 1];
    if (m > x->rank - b)
        return ox_node_err(n, OX_E_SHAPE,
                           "indices %s: last dim %lld exceeds data rank %d minus "
                           "batch_dims %lld",
                           si, (long long)m, x->rank, (long long)b);
    for (int d = 0; d < b; d++)
        if (x->dims[d] != idx->dims[d])
            return ox_node_err(n, OX_E_SHAPE, "data %s and indices %s differ in batch dim %d", sx,
                               si, d);
    int r = idx->rank - 1 + x->rank - (int)b - (int)m, k = 0;
    if (r > OX_MAX_RANK)
        return ox_node_err(n, OX_E_SHAPE, "output rank %d exceeds %d", r, OX_MAX_RANK);
    int64_t dims[OX_MAX_RANK];
    for (int d = 0; d < idx->rank - 1; d++) dims[k++] = idx->dims[d];
    for (int d = (int)(b + m); d < x->rank; d++) dims[k++] = x->dims[d];
    ox_set_shape(out[0], x->dtype, r, dims);
    return check_out_size(n, out[0]);
}

ox_status ox_tn_cpu_gather_nd(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                              const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    const ox_tensor *x = in[0], *idx = in[1];
    int b = n->opset >= 12 ? (int)ox_attr_int(n, "batch_dims", 0) : 0;
    int m = (int)idx->dims[idx->rank - 1];
    int64_t xs[OX_MAX_RANK], B = prod(x->dims, 0, b), N = prod(idx->dims, b, idx->rank - 1),
                             S = prod(x->dims, b + m, x->rank), XB = prod(x->dims, b, x->rank);
    strides_of(x->rank, x->dims, xs);
    size_t es = ox_dtype_size(x->dtype), blk = (size_t)S * es;
    char *dst = out[0]->data;
    const char *src = x->data;
    for (int64_t bi = 0; bi < B; bi++)
        for (int64_t ni = 0; ni < N; ni++) {
            int64_t off = bi * XB, pos = (bi * N + ni) * m;
            for (int j = 0; j < m; j++) {
                int64_t k;
                ox_status st =
                    wrap_index(n, ox_get_i64(idx, pos + j), x->dims[b + j], b + j, pos + j, &k);
                if (st) return st;
                off += k * xs[b + j];
            }
            if (blk) memcpy(dst, src + (size_t)off * es, blk);
            dst += blk;
        }
    return OX_OK;
}

/* ---- Squeeze / Unsqueeze --------------------------------------------------------------- */

/* Axes from the attribute (opset < 13) or input 1; *cnt = -1 when absent. */
static ox_status axes_list(const struct ox_node *n, const ox_tensor *const *in, int64_t *axes,
                           int64_t *cnt) {
    if (n->opset < 13) return attr_ints(n, "axes", axes, OX_MAX_RANK, cnt);
    const ox_tensor *a = ox_in(n, in, 1);
    *cnt = -1;
    if (!a) return OX_OK;
    if (!known(a)) return OX_NEED_DATA;
    return read_ints(n, a, axes, OX_MAX_RANK, cnt, "axes");
}

ox_status ox_tn_infer_squeeze(struct ox_infer_ctx *ctx, const struct ox_node *n,
                              const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    ox_status st;
    if ((st = need_in(n, in, 0, "data")) || (st = need_out(n, out, 0))) return st;
    const ox_tensor *x = in[0];
    int64_t axes[OX_MAX_RANK], na;
    if ((st = axes_list(n, in, axes, &na))) return st;
    bool drop[OX_MAX_RANK] = {0};
    if (na < 0) {
        for (int d = 0; d < x->rank; d++) drop[d] = x->dims[d] == 1;
    } else {
        for (int i = 0; i < na; i++) {
            int a;
            if ((st = norm_axis(n, axes[i], x->rank, &a, "axis"))) return st;
            if (drop[a]) return ox_node_err(n, OX_E_INVALID, "axis %d is given twice", a);
            if (x->dims[a] != 1)
                return ox_node_err(n, OX_E_SHAPE, "cannot squeeze axis %d of size %lld", a,
                                   (long long)x->dims[a]);
            drop[a] = true;
        }
    }
    int64_t dims[OX_MAX_RANK];
    int r = 0;
    for (int d = 0; d < x->rank; d++)
        if (!drop[d]) dims[r++] = x->dims[d];
    ox_set_shape(out[0], x->dtype, r, dims);
    return OX_OK;
}

ox_status ox_tn_infer_unsqueeze(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    ox_status st;
    if ((st = need_in(n, in, 0, "data")) || (st = need_out(n, out, 0))) return st;
    const ox_tensor *x = in[0];
    int64_t axes[OX_MAX_RANK], na;
    if (n->opset >= 13 && (st = need_in(n, in, 1, "axes"))) return st;
    if ((st = axes_list(n, in, axes, &na))) return st;
    if (na < 0) return ox_node_err(n, OX_E_INVALID, "attribute 'axes' is required");
    int r = x->rank + (int)na;
    if (r > OX_MAX_RANK)
        return ox_node_err(n, OX_E_SHAPE, "output rank %d exceeds %d", r, OX_MAX_RANK);
    bool ins[OX_MAX_RANK] = {0};
    for (int i = 0; i < na; i++) {
        int a;
        if ((st = norm_axis(n, axes[i], r, &a, "axis"))) return st;
        if (ins[a]) return ox_node_err(n, OX_E_INVALID, "axis %d is given twice", a);
        ins[a] = true;
    }
    int64_t dims[OX_MAX_RANK];
    for (int d = 0, j = 0; d < r; d++) dims[d] = ins[d] ? 1 : x->dims[j++];
    ox_set_shape(out[0], x->dtype, r, dims);
    return OX_OK;
}

/* ---- Shape / Size ---------------------------------------------------------------------- */

static void shape_range(const struct ox_node *n, const ox_tensor *x, int64_t *s, int64_t *e) {
    int64_t r = x->rank;
    *s = n->opset >= 15 ? ox_attr_int(n, "start", 0) : 0;
    *e = n->opset >= 15 ? ox_attr_int(n, "end", r) : r;
    if (*s < 0) *s += r;
    if (*e < 0) *e += r;
    *s = clamp64(*s, 0, r);
    *e = clamp64(*e, 0, r);
    if (*e < *s) *e = *s;
}

ox_status ox_tn_infer_shape(struct ox_infer_ctx *ctx, const struct ox_node *n,
                            const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    ox_status st;
    if ((st = need_in(n, in, 0, "data")) || (st = need_out(n, out, 0))) return st;
    int64_t s, e;
    shape_range(n, in[0], &s, &e);
    int64_t d = e - s;
    ox_set_shape(out[0], OX_INT64, 1, &d);
    return OX_OK;
}

/* Reads only the dims of its input. */
ox_status ox_tn_cpu_shape(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                          const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    int64_t s, e, *y = out[0]->data;
    shape_range(n, in[0], &s, &e);
    for (int64_t i = s; i < e; i++) y[i - s] = in[0]->dims[i];
    return OX_OK;
}

ox_status ox_tn_infer_size(struct ox_infer_ctx *ctx, const struct ox_node *n,
                           const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    ox_status st;
    int64_t cnt;
    if ((st = need_in(n, in, 0, "data")) || (st = need_out(n, out, 0))) return st;
    if (!numel_ok(in[0]->rank, in[0]->dims, &cnt))
        return ox_node_err(n, OX_E_SHAPE, "input element count overflows");
    ox_set_shape(out[0], OX_INT64, 0, NULL);
    return OX_OK;
}

/* Reads only the dims of its input. */
ox_status ox_tn_cpu_size(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                         const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx, (void)n;
    *(int64_t *)out[0]->data = ox_tensor_numel(in[0]);
    return OX_OK;
}

/* ---- Constant -------------------------------------------------------------------------- */

/* The tensor a Constant node holds: shape into *desc, elements at *data (borrowed from the
 * node's attribute). */
static ox_status constant_value(const struct ox_node *n, ox_tensor *desc, const void **data) {
    const struct ox_attr *found = NULL;
    int count = 0;
    for (int i = 0; i < n->n_attrs; i++) {
        const struct ox_attr *a = &n->attrs[i];
        if (strcmp(a->name, "sparse_value") == 0)
            return ox_node_err(n, OX_E_UNSUPPORTED, "sparse_value constants are not supported");
        if (strncmp(a->name, "value", 5) == 0) found = a, count++;
    }
    if (count != 1)
        return ox_node_err(n, OX_E_INVALID,
                           "expected exactly one value attribute (value, "
                           "value_float(s), value_int(s), value_string(s)), found %d",
                           count);
    const struct ox_attr *a = found;
    memset(desc, 0, sizeof *desc);
    struct {
        const char *name;
        ox_attr_type type;
    } kinds[] = {{"value", OX_ATTR_TENSOR},         {"value_float", OX_ATTR_FLOAT},
                 {"value_floats", OX_ATTR_FLOATS},  {"value_int", OX_ATTR_INT},
                 {"value_ints", OX_ATTR_INTS},      {"value_string", OX_ATTR_STRING},
                 {"value_strings", OX_ATTR_STRINGS}};
    bool ok = false;
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        if (strcmp(a->name, kinds[k].name) == 0) {
            if (a->type != kinds[k].type)
                return ox_node_err(n, OX_E_INVALID, "attribute '%s' has the wrong kind (%d)",
                                   a->name, (int)a->type);
            ok = true;
        }
    if (!ok) return ox_node_err(n, OX_E_INVALID, "unknown attribute '%s'", a->name);
    switch (a->type) {
    case OX_ATTR_TENSOR:
        if (!a->t) return ox_node_err(n, OX_E_INVALID, "attribute 'value' holds no tensor");
        *desc = *a->t;
        desc->data = NULL;
        desc->name = NULL;
        *data = a->t->data;
        if (desc->rank < 0 || desc->rank > OX_MAX_RANK || ox_dtype_size(desc->dtype) == 0)
            return ox_node_err(n, OX_E_INVALID, "attribute 'value' is not a valid tensor");
        if (!known(a->t)) return ox_node_err(n, OX_E_INVALID, "attribute 'value' has no data");
        return OX_OK;
    case OX_ATTR_FLOAT: desc->dtype = OX_FLOAT, *data = &a->f; return OX_OK;
    case OX_ATTR_INT: desc->dtype = OX_INT64, *data = &a->i; return OX_OK;
    case OX_ATTR_STRING: desc->dtype = OX_STRING, *data = &a->s; return OX_OK;
    case OX_ATTR_FLOATS: desc->dtype = OX_FLOAT, *data = a->floats; break;
    case OX_ATTR_INTS: desc->dtype = OX_INT64, *data = a->ints; break;
    default: desc->dtype = OX_STRING, *data = a->strings; break;
    }
    desc->rank = 1;
    desc->dims[0] = a->n;
    return OX_OK;
}

ox_status ox_tn_infer_constant(struct ox_infer_ctx *ctx, const struct ox_node *n,
                               const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx, (void)in;
    ox_status st;
    ox_tensor desc;
    const void *data;
    if ((st = need_out(n, out, 0)) || (st = constant_value(n, &desc, &data))) return st;
    ox_set_like(out[0], &desc);
    return check_out_size(n, out[0]);
}

ox_status ox_tn_cpu_constant(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                             const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx, (void)in;
    ox_tensor desc;
    const void *data;
    ox_status st = constant_value(n, &desc, &data);
    if (st) return st;
    size_t bytes = (size_t)ox_tensor_numel(&desc) * ox_dtype_size(desc.dtype);
    if (bytes) memcpy(out[0]->data, data, bytes);
    return OX_OK;
}

/* ---- ConstantOfShape ------------------------------------------------------------------- */

static const float cos_default = 0.0f;

static ox_status cos_value(const struct ox_node *n, ox_dtype *dt, const void **val) {
    *dt = OX_FLOAT;
    *val = &cos_default;
    const struct ox_attr *a = ox_node_attr(n, "value");
    if (!a) return OX_OK;
    if (a->type != OX_ATTR_TENSOR || !a->t || ox_tensor_numel(a->t) != 1 || !a->t->data ||
        ox_dtype_size(a->t->dtype) == 0)
        return ox_node_err(n, OX_E_INVALID, "attribute 'value' must be a one-element tensor");
    *dt = a->t->dtype;
    *val = a->t->data;
    return OX_OK;
}

ox_status ox_tn_infer_constant_of_shape(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                        const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    ox_status st;
    ox_dtype dt;
    const void *val;
    if ((st = need_in(n, in, 0, "input")) || (st = need_out(n, out, 0)) ||
        (st = cos_value(n, &dt, &val)))
        return st;
    if (!known(in[0])) return OX_NEED_DATA;
    int64_t dims[OX_MAX_RANK], k;
    if ((st = read_ints(n, in[0], dims, OX_MAX_RANK, &k, "shape"))) return st;
    ox_set_shape(out[0], dt, (int)k, dims);
    return check_out_size(n, out[0]);
}

ox_status ox_tn_cpu_constant_of_shape(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                                      const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx, (void)in;
    ox_dtype dt;
    const void *val;
    ox_status st = cos_value(n, &dt, &val);
    if (st) return st;
    fill_elems(out[0]->data, val, ox_dtype_size(dt), ox_tensor_numel(out[0]));
    return OX_OK;
}

/* ---- Expand ---------------------------------------------------------------------------- */

ox_status ox_tn_infer_expand(struct ox_infer_ctx *ctx, const struct ox_node *n,
                             const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    ox_status st;
    if ((st = need_in(n, in, 0, "input")) || (st = need_in(n, in, 1, "shape")) ||
        (st = need_out(n, out, 0)))
        return st;
    if (!known(in[1])) return OX_NEED_DATA;
    ox_tensor sh = {.dtype = in[0]->dtype};
    int64_t k;
    if ((st = read_ints(n, in[1], sh.dims, OX_MAX_RANK, &k, "shape"))) return st;
    sh.rank = (int)k;
    for (int d = 0; d < sh.rank; d++)
        if (sh.dims[d] < 0)
            return ox_node_err(n, OX_E_INVALID, "shape has a negative dimension %lld",
                               (long long)sh.dims[d]);
    int r;
    int64_t dims[OX_MAX_RANK];
    if ((st = ox_broadcast(n, in[0], &sh, &r, dims))) return st;
    ox_set_shape(out[0], in[0]->dtype, r, dims);
    return check_out_size(n, out[0]);
}

ox_status ox_tn_cpu_expand(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                           const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx, (void)n;
    int64_t s[OX_MAX_RANK];
    ox_broadcast_strides(in[0], out[0]->rank, out[0]->dims, s);
    strided_copy(out[0]->data, in[0]->data, ox_dtype_size(in[0]->dtype), out[0]->rank, out[0]->dims,
                 s);
    return OX_OK;
}

/* ---- Tile ------------------------------------------------------------------------------ */

ox_status ox_tn_infer_tile(struct ox_infer_ctx *ctx, const struct ox_node *n,
                           const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    ox_status st;
    if ((st = need_in(n, in, 0, "input")) || (st = need_in(n, in, 1, "repeats")) ||
        (st = need_out(n, out, 0)))
        return st;
    const ox_tensor *x = in[0];
    int64_t rep[OX_MAX_RANK], k;
    if (n->opset < 6) {
        /* Tile-1: inputs (input, tiles, axis), both scalars */
        int64_t tiles, ax;
        int a;
        if ((st = need_in(n, in, 2, "axis"))) return st;
        if (!known(in[1]) || !known(in[2])) return OX_NEED_DATA;
        if ((st = read_scalar_int(n, in[1], &tiles, "tiles")) ||
            (st = read_scalar_int(n, in[2], &ax, "axis")) ||
            (st = norm_axis(n, ax, x->rank, &a, "axis")))
            return st;
        for (int d = 0; d < x->rank; d++) rep[d] = d == a ? tiles : 1;
        k = x->rank;
    } else {
        if (!known(in[1])) return OX_NEED_DATA;
        if ((st = read_ints(n, in[1], rep, OX_MAX_RANK, &k, "repeats"))) return st;
    }
    if (k != x->rank)
        return ox_node_err(n, OX_E_INVALID, "repeats has %lld values for rank %d", (long long)k,
                           x->rank);
    int64_t dims[OX_MAX_RANK];
    for (int d = 0; d < x->rank; d++) {
        if (rep[d] < 0)
            return ox_node_err(n, OX_E_INVALID, "repeat %lld for axis %d is negative",
                               (long long)rep[d], d);
        if (__builtin_mul_overflow(x->dims[d], rep[d], &dims[d]))
            return ox_node_err(n, OX_E_SHAPE, "output too large");
    }
    ox_set_shape(out[0], x->dtype, x->rank, dims);
    return check_out_size(n, out[0]);
}

ox_status ox_tn_cpu_tile(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                         const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx, (void)n;
    const ox_tensor *x = in[0];
    if (ox_tensor_numel(out[0]) == 0) return OX_OK;
    /* the output seen as [rep0, d0, rep1, d1, ...], repeats with stride 0 */
    int64_t xs[OX_MAX_RANK], dims[SC_MAX_RANK], s[SC_MAX_RANK];
    strides_of(x->rank, x->dims, xs);
    for (int d = 0; d < x->rank; d++) {
        dims[2 * d] = out[0]->dims[d] / x->dims[d];
        dims[2 * d + 1] = x->dims[d];
        s[2 * d] = 0;
        s[2 * d + 1] = xs[d];
    }
    strided_copy(out[0]->data, x->data, ox_dtype_size(x->dtype), 2 * x->rank, dims, s);
    return OX_OK;
}

/* ---- Pad ------------------------------------------------------------------------------- */

enum { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE, PAD_WRAP };

/* pads[0..r) are the begins, pads[r..2r) the ends, for every axis of the input. */
static ox_status pad_params(const struct ox_node *n, const ox_tensor *const *in, int64_t *pads,
                            int *mode) {
    const ox_tensor *x = in[0];
    int r = x->rank;
    const char *m = ox_attr_str(n, "mode", "constant");
    if (strcmp(m, "constant") == 0)
        *mode = PAD_CONSTANT;
    else if (strcmp(m, "reflect") == 0)
        *mode = PAD_REFLECT;
    else if (strcmp(m, "edge") == 0)
        *mode = PAD_EDGE;
    else if (strcmp(m, "wrap") == 0 && n->opset >= 19)
        *mode = PAD_WRAP;
    else
        return ox_node_err(n, OX_E_INVALID, "unknown mode '%s'", m);
    int64_t p[2 * OX_MAX_RANK], np, axes[OX_MAX_RANK], na = -1;
    ox_status st;
    if (n->opset < 11) {
        const char *name = n->opset < 2 ? "paddings" : "pads";
        if ((st = attr_ints(n, name, p, 2 * OX_MAX_RANK, &np))) return st;
        if (np < 0) return ox_node_err(n, OX_E_INVALID, "attribute '%s' is required", name);
    } else {
        if ((st = need_in(n, in, 1, "pads"))) return st;
        const ox_tensor *ax = n->opset >= 18 ? ox_in(n, in, 3) : NULL;
        if (!known(in[1]) || (ax && !known(ax))) return OX_NEED_DATA;
        if ((st = read_ints(n, in[1], p, 2 * OX_MAX_RANK, &np, "pads"))) return st;
        if (ax && (st = read_ints(n, ax, axes, OX_MAX_RANK, &na, "axes"))) return st;
    }
    if (na < 0) {
        if (np != 2 * r)
            return ox_node_err(n, OX_E_INVALID, "pads has %lld values, expected %d for rank %d",
                               (long long)np, 2 * r, r);
        for (int i = 0; i < 2 * r; i++) pads[i] = p[i];
        return OX_OK;
    }
    if (np != 2 * na)
        return ox_node_err(n, OX_E_INVALID, "pads has %lld values, expected %lld for %lld axes",
                           (long long)np, (long long)(2 * na), (long long)na);
    bool seen[OX_MAX_RANK] = {0};
    for (int i = 0; i < 2 * r; i++) pads[i] = 0;
    for (int i = 0; i < na; i++) {
        int a;
        if ((st = norm_axis(n, axes[i], r, &a, "axis"))) return st;
        if (seen[a]) return ox_node_err(n, OX_E_INVALID, "axis %d is given twice", a);
        seen[a] = true;
        pads[a] = p[i];
        pads[r + a] = p[na + i];
    }
    return OX_OK;
}

ox_status ox_tn_infer_pad(struct ox_infer_ctx *ctx, const struct ox_node *n,
                          const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    ox_status st;
    if ((st = need_in(n, in, 0, "data")) || (st = need_out(n, out, 0))) return st;
    const ox_tensor *x = in[0], *cv = n->opset >= 11 ? ox_in(n, in, 2) : NULL;
    int64_t pads[2 * OX_MAX_RANK], dims[OX_MAX_RANK];
    int mode, r = x->rank;
    if ((st = pad_params(n, in, pads, &mode))) return st;
    if (cv && (cv->dtype != x->dtype || ox_tensor_numel(cv) > 1))
        return ox_node_err(n, OX_E_INVALID,
                           "constant_value must be one %s, got %s with %lld "
                           "values",
                           ox_dtype_name(x->dtype), ox_dtype_name(cv->dtype),
                           (long long)ox_tensor_numel(cv));
    for (int d = 0; d < r; d++) {
        int64_t b = pads[d], e = pads[r + d], kept;
        if (b < -x->dims[d] || e < -x->dims[d] || __builtin_add_overflow(x->dims[d], b, &dims[d]) ||
            __builtin_add_overflow(dims[d], e, &dims[d]) || dims[d] < 0)
            return ox_node_err(n, OX_E_SHAPE, "pads %lld and %lld do not fit axis %d of size %lld",
                               (long long)b, (long long)e, d, (long long)x->dims[d]);
        kept = x->dims[d] - (b < 0 ? -b : 0) - (e < 0 ? -e : 0);
        if (mode != PAD_CONSTANT && kept <= 0 && (b > 0 || e > 0))
            return ox_node_err(n, OX_E_SHAPE, "cannot pad an empty axis %d in mode '%s'", d,
                               ox_attr_str(n, "mode", "constant"));
    }
    ox_set_shape(out[0], x->dtype, r, dims);
    return check_out_size(n, out[0]);
}

/* Source index in the input for output index o along one axis, or -1 for the constant. */
static int64_t pad_src(int64_t o, int64_t begin, int64_t lo, int64_t len, int mode) {
    int64_t i = o - begin;
    if (i >= 0 && i < len) return lo + i;
    switch (mode) {
    case PAD_EDGE: return lo + (i < 0 ? 0 : len - 1);
    case PAD_WRAP: return lo + ((i % len) + len) % len;
    case PAD_REFLECT: {
        if (len == 1) return lo;
        int64_t p = 2 * (len - 1), m = ((i % p) + p) % p;
        return lo + (m >= len ? p - m : m);
    }
    default: return -1;
    }
}

ox_status ox_tn_cpu_pad(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                        const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    const ox_tensor *x = in[0];
    ox_tensor *y = out[0];
    int64_t pads[2 * OX_MAX_RANK];
    int mode, r = x->rank;
    ox_status st = pad_params(n, in, pads, &mode);
    if (st) return st == OX_NEED_DATA ? ox_node_err(n, OX_E_INTERNAL, "pads unknown") : st;
    size_t es = ox_dtype_size(x->dtype);
    /* the fill value */
    unsigned char cval[16] = {0};
    const ox_tensor *cv = n->opset >= 11 ? ox_in(n, in, 2) : NULL;
    if (cv && ox_tensor_numel(cv) == 1 && cv->data && es <= sizeof cval) {
        memcpy(cval, cv->data, es);
    } else if (n->opset < 11 && is_arith(x->dtype)) {
        ox_tensor c = {.dtype = x->dtype, .data = cval};
        ox_set_f64(&c, 0, ox_attr_float(n, "value", 0.0f));
    }
    int64_t N = ox_tensor_numel(y);
    if (N == 0) return OX_OK;
    if (r == 0) {
        memcpy(y->data, x->data, es);
        return OX_OK;
    }
    int64_t lo[OX_MAX_RANK], len[OX_MAX_RANK], beg[OX_MAX_RANK], xs[OX_MAX_RANK];
    for (int d = 0; d < r; d++) {
        lo[d] = pads[d] < 0 ? -pads[d] : 0;
        len[d] = x->dims[d] - lo[d] - (pads[r + d] < 0 ? -pads[r + d] : 0);
        beg[d] = pads[d] > 0 ? pads[d] : 0;
    }
    strides_of(r, x->dims, xs);
    int64_t W = y->dims[r - 1], rows = N / W, cnt[OX_MAX_RANK] = {0};
    int L = r - 1;
    char *dst = y->data;
    const char *src = x->data;
    for (int64_t row = 0; row < rows; row++, dst += (size_t)W * es) {
        /* the source row, or none when some outer index falls in the constant padding */
        int64_t off = 0;
        bool fill = false;
        for (int d = 0; d < L && !fill; d++) {
            int64_t s = len[d] > 0 ? pad_src(cnt[d], beg[d], lo[d], len[d], mode) : -1;
            if (s < 0)
                fill = true;
            else
                off += s * xs[d];
        }
        if (fill) {
            fill_elems(dst, cval, es, W);
        } else {
            for (int64_t o = 0; o < W;) {
                if (o == beg[L] && len[L] > 0) {
                    memcpy(dst + (size_t)o * es, src + (size_t)(off + lo[L]) * es,
                           (size_t)len[L] * es);
                    o += len[L];
                    continue;
                }
                int64_t s = len[L] > 0 ? pad_src(o, beg[L], lo[L], len[L], mode) : -1;
                memcpy(dst + (size_t)o * es,
                       s < 0 ? (const void *)cval : src + (size_t)(off + s) * es, es);
                o++;
            }
        }
        for (int d = L - 1; d >= 0; d--) {
            if (++cnt[d] < y->dims[d]) break;
            cnt[d] = 0;
        }
    }
    return OX_OK;
}

/* ---- Range ----------------------------------------------------------------------------- */

static ox_status range_count(const struct ox_node *n, const ox_tensor *const *in, int64_t *cnt) {
    const ox_tensor *s = in[0], *l = in[1], *d = in[2];
    if (s->dtype != l->dtype || s->dtype != d->dtype)
        return ox_node_err(n, OX_E_INVALID, "start, limit and delta differ in type (%s, %s, %s)",
                           ox_dtype_name(s->dtype), ox_dtype_name(l->dtype),
                           ox_dtype_name(d->dtype));
    if (!is_arith(s->dtype) || s->dtype == OX_BOOL)
        return ox_node_err(n, OX_E_INVALID, "type %s is not supported", ox_dtype_name(s->dtype));
    if (ox_tensor_numel(s) != 1 || ox_tensor_numel(l) != 1 || ox_tensor_numel(d) != 1)
        return ox_node_err(n, OX_E_INVALID, "start, limit and delta must be scalars");
    if (ox_dtype_is_int(s->dtype)) {
        int64_t a = ox_get_i64(s, 0), b = ox_get_i64(l, 0), k = ox_get_i64(d, 0);
        if (k == 0) return ox_node_err(n, OX_E_INVALID, "delta is 0");
        uint64_t diff, step;
        if (k > 0) {
            diff = b > a ? (uint64_t)b - (uint64_t)a : 0;
            step = (uint64_t)k;
        } else {
            diff = a > b ? (uint64_t)a - (uint64_t)b : 0;
            step = (uint64_t)0 - (uint64_t)k;
        }
        *cnt = diff ? (int64_t)((diff - 1) / step + 1) : 0;
        return OX_OK;
    }
    double a = ox_get_f64(s, 0), b = ox_get_f64(l, 0), k = ox_get_f64(d, 0), v;
    if (k == 0) return ox_node_err(n, OX_E_INVALID, "delta is 0");
    if (s->dtype == OX_FLOAT)
        v = ceilf(((float)b - (float)a) / (float)k);
    else
        v = ceil((b - a) / k);
    if (!(v > 0)) v = 0;
    if (v > (double)((int64_t)1 << 40))
        return ox_node_err(n, OX_E_SHAPE, "range of %g elements is too large", v);
    *cnt = (int64_t)v;
    return OX_OK;
}

ox_status ox_tn_infer_range(struct ox_infer_ctx *ctx, const struct ox_node *n,
                            const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    ox_status st;
    if ((st = need_in(n, in, 0, "start")) || (st = need_in(n, in, 1, "limit")) ||
        (st = need_in(n, in, 2, "delta")) || (st = need_out(n, out, 0)))
        return st;
    if (!known(in[0]) || !known(in[1]) || !known(in[2])) return OX_NEED_DATA;
    int64_t cnt;
    if ((st = range_count(n, in, &cnt))) return st;
    ox_set_shape(out[0], in[0]->dtype, 1, &cnt);
    return check_out_size(n, out[0]);
}

ox_status ox_tn_cpu_range(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                          const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx, (void)n;
    int64_t N = out[0]->dims[0];
    switch (out[0]->dtype) {
#define RANGE_F(DT, T)                                                                             \
    case DT: {                                                                                     \
        T a = *(const T *)in[0]->data, k = *(const T *)in[2]->data, *y = out[0]->data;             \
        for (int64_t i = 0; i < N; i++) y[i] = a + (T)i * k;                                       \
        break;                                                                                     \
    }
        OX_TN_FLOAT_TYPES(RANGE_F)
#undef RANGE_F
    default:
        if (ox_dtype_is_int(out[0]->dtype)) {
            uint64_t a = (uint64_t)ox_get_i64(in[0], 0), k = (uint64_t)ox_get_i64(in[2], 0);
            for (int64_t i = 0; i < N; i++) ox_set_i64(out[0], i, (int64_t)(a + (uint64_t)i * k));
        } else {
            float a = (float)ox_get_f64(in[0], 0), k = (float)ox_get_f64(in[2], 0);
            for (int64_t i = 0; i < N; i++) ox_set_f64(out[0], i, a + (float)i * k);
        }
        break;
    }
    return OX_OK;
}

/* ---- EyeLike --------------------------------------------------------------------------- */

ox_status ox_tn_infer_eye_like(struct ox_infer_ctx *ctx, const struct ox_node *n,
                               const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    ox_status st;
    if ((st = need_in(n, in, 0, "input")) || (st = need_out(n, out, 0))) return st;
    if (in[0]->rank != 2)
        return ox_node_err(n, OX_E_SHAPE, "input must have rank 2, got %d", in[0]->rank);
    int64_t dt = ox_attr_int(n, "dtype", in[0]->dtype);
    if (dt <= 0 || dt >= OX_N_DTYPES || !is_arith((ox_dtype)dt))
        return ox_node_err(n, OX_E_UNSUPPORTED, "output type %lld (%s) is not supported",
                           (long long)dt, ox_dtype_name((ox_dtype)dt));
    ox_set_shape(out[0], (ox_dtype)dt, 2, in[0]->dims);
    return OX_OK;
}

ox_status ox_tn_cpu_eye_like(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                             const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx, (void)in;
    ox_tensor *y = out[0];
    int64_t R = y->dims[0], C = y->dims[1], k = ox_attr_int(n, "k", 0);
    size_t bytes = (size_t)(R * C) * ox_dtype_size(y->dtype);
    if (bytes) memset(y->data, 0, bytes);
    for (int64_t i = 0; i < R; i++) {
        if (k > C || k < -R) break;
        int64_t j = i + k;
        if (j >= 0 && j < C) ox_set_f64(y, i * C + j, 1.0);
    }
    return OX_OK;
}

/* ---- OneHot ---------------------------------------------------------------------------- */

static ox_status onehot_depth(const struct ox_node *n, const ox_tensor *d, int64_t *depth) {
    *depth = 1;
    if (!is_arith(d->dtype) || ox_tensor_numel(d) != 1)
        return ox_node_err(n, OX_E_INVALID, "depth must be one number");
    double v = ox_get_f64(d, 0);
    if (!(v >= 1) || v > (double)INT32_MAX)
        return ox_node_err(n, OX_E_INVALID, "depth %g is out of range", v);
    *depth = (int64_t)v;
    return OX_OK;
}

ox_status ox_tn_infer_onehot(struct ox_infer_ctx *ctx, const struct ox_node *n,
                             const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    ox_status st;
    if ((st = need_in(n, in, 0, "indices")) || (st = need_in(n, in, 1, "depth")) ||
        (st = need_in(n, in, 2, "values")) || (st = need_out(n, out, 0)))
        return st;
    const ox_tensor *idx = in[0], *v = in[2];
    if (!is_arith(idx->dtype))
        return ox_node_err(n, OX_E_INVALID, "indices must be numbers, got %s",
                           ox_dtype_name(idx->dtype));
    if (ox_tensor_numel(v) != 2)
        return ox_node_err(n, OX_E_INVALID, "values must hold [off, on], got %lld values",
                           (long long)ox_tensor_numel(v));
    int r = idx->rank + 1, axis;
    if (r > OX_MAX_RANK)
        return ox_node_err(n, OX_E_SHAPE, "output rank %d exceeds %d", r, OX_MAX_RANK);
    if ((st = norm_axis(n, ox_attr_int(n, "axis", -1), r, &axis, "axis"))) return st;
    if (!known(in[1])) return OX_NEED_DATA;
    int64_t depth, dims[OX_MAX_RANK];
    if ((st = onehot_depth(n, in[1], &depth))) return st;
    for (int d = 0, j = 0; d < r; d++) dims[d] = d == axis ? depth : idx->dims[j++];
    ox_set_shape(out[0], v->dtype, r, dims);
    return check_out_size(n, out[0]);
}

ox_status ox_tn_cpu_onehot(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                           const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    const ox_tensor *idx = in[0], *v = in[2];
    ox_tensor *y = out[0];
    int axis;
    int64_t depth;
    ox_status st;
    if ((st = norm_axis(n, ox_attr_int(n, "axis", -1), y->rank, &axis, "axis")) ||
        (st = onehot_depth(n, in[1], &depth)))
        return st;
    size_t es = ox_dtype_size(v->dtype);
    const char *off = v->data, *on = off + es;
    fill_elems(y->data, off, es, ox_tensor_numel(y));
    int64_t post = prod(idx->dims, axis, idx->rank), N = ox_tensor_numel(idx);
    char *dst = y->data;
    for (int64_t e = 0; e < N; e++) {
        double f = ox_get_f64(idx, e);
        if (!(f > -(double)depth - 1 && f < (double)depth)) continue;
        int64_t k = (int64_t)f;
        if (k < 0 && n->opset >= 11) k += depth;
        if (k < 0 || k >= depth) continue;
        int64_t pre_i = e / post, post_i = e % post;
        memcpy(dst + (size_t)((pre_i * depth + k) * post + post_i) * es, on, es);
    }
    return OX_OK;
}

/* ---- DepthToSpace / SpaceToDepth ------------------------------------------------------- */

static ox_status block_size(const struct ox_node *n, const ox_tensor *x, int64_t *b) {
    *b = ox_attr_int(n, "blocksize", 0);
    if (*b <= 0 || *b > INT32_MAX)
        return ox_node_err(n, OX_E_INVALID, "attribute 'blocksize' must be positive, got %lld",
                           (long long)*b);
    if (x->rank != 4)
        return ox_node_err(n, OX_E_SHAPE, "input must have rank 4 [N,C,H,W], got %d", x->rank);
    return OX_OK;
}

static ox_status d2s_mode(const struct ox_node *n, bool *crd) {
    *crd = false;
    const char *m = n->opset >= 11 ? ox_attr_str(n, "mode", "DCR") : "DCR";
    if (strcmp(m, "DCR") == 0)
        *crd = false;
    else if (strcmp(m, "CRD") == 0)
        *crd = true;
    else
        return ox_node_err(n, OX_E_INVALID, "mode '%s': expected DCR or CRD", m);
    return OX_OK;
}

ox_status ox_tn_infer_depth_to_space(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                     const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    ox_status st;
    int64_t b;
    bool crd;
    if ((st = need_in(n, in, 0, "input")) || (st = need_out(n, out, 0)) ||
        (st = block_size(n, in[0], &b)) || (st = d2s_mode(n, &crd)))
        return st;
    const int64_t *d = in[0]->dims;
    if (d[1] % (b * b) != 0)
        return ox_node_err(n, OX_E_SHAPE, "channels %lld are not a multiple of blocksize^2 = %lld",
                           (long long)d[1], (long long)(b * b));
    int64_t dims[4] = {d[0], d[1] / (b * b), 0, 0};
    if (__builtin_mul_overflow(d[2], b, &dims[2]) || __builtin_mul_overflow(d[3], b, &dims[3]))
        return ox_node_err(n, OX_E_SHAPE, "output too large");
    ox_set_shape(out[0], in[0]->dtype, 4, dims);
    return OX_OK;
}

ox_status ox_tn_cpu_depth_to_space(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                                   const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    int64_t b;
    bool crd;
    ox_status st;
    if ((st = block_size(n, in[0], &b)) || (st = d2s_mode(n, &crd))) return st;
    const int64_t *d = in[0]->dims;
    int64_t N = d[0], C = d[1] / (b * b), H = d[2], W = d[3];
    /* the output seen as [N, C, H, b1, W, b2]; strides into the input viewed as
     * DCR: [N, b1, b2, C, H, W]   CRD: [N, C, b1, b2, H, W] */
    int64_t dims[6] = {N, C, H, b, W, b}, s[6];
    s[0] = d[1] * H * W;
    s[2] = W;
    s[4] = 1;
    if (crd) {
        s[1] = b * b * H * W;
        s[3] = b * H * W;
        s[5] = H * W;
    } else {
        s[1] = H * W;
        s[3] = b * C * H * W;
        s[5] = C * H * W;
    }
    strided_copy(out[0]->data, in[0]->data, ox_dtype_size(in[0]->dtype), 6, dims, s);
    return OX_OK;
}

ox_status ox_tn_infer_space_to_depth(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                     const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    ox_status st;
    int64_t b;
    if ((st = need_in(n, in, 0, "input")) || (st = need_out(n, out, 0)) ||
        (st = block_size(n, in[0], &b)))
        return st;
    const int64_t *d = in[0]->dims;
    if (d[2] % b != 0 || d[3] % b != 0)
        return ox_node_err(n, OX_E_SHAPE,
                           "height %lld and width %lld must be multiples of "
                           "blocksize %lld",
                           (long long)d[2], (long long)d[3], (long long)b);
    int64_t dims[4] = {d[0], 0, d[2] / b, d[3] / b};
    if (__builtin_mul_overflow(d[1], b * b, &dims[1]))
        return ox_node_err(n, OX_E_SHAPE, "output too large");
    ox_set_shape(out[0], in[0]->dtype, 4, dims);
    return OX_OK;
}

ox_status ox_tn_cpu_space_to_depth(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                                   const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    int64_t b;
    ox_status st = block_size(n, in[0], &b);
    if (st) return st;
    const int64_t *d = in[0]->dims;
    int64_t N = d[0], C = d[1], H = d[2], W = d[3], H2 = H / b, W2 = W / b;
    /* the output seen as [N, b1, b2, C, H2, W2]; the input as [N, C, H2, b1, W2, b2] */
    int64_t dims[6] = {N, b, b, C, H2, W2};
    int64_t s[6] = {C * H * W, W, 1, H * W, b * W, b};
    strided_copy(out[0]->data, in[0]->data, ox_dtype_size(in[0]->dtype), 6, dims, s);
    return OX_OK;
}

/* ---- Scatter reductions ---------------------------------------------------------------- */

enum { RED_NONE, RED_ADD, RED_MUL, RED_MAX, RED_MIN };

static ox_status scatter_reduction(const struct ox_node *n, ox_dtype dt, int *red) {
    *red = RED_NONE;
    const char *r = n->opset >= 16 ? ox_attr_str(n, "reduction", "none") : "none";
    if (strcmp(r, "none") == 0)
        *red = RED_NONE;
    else if (strcmp(r, "add") == 0)
        *red = RED_ADD;
    else if (strcmp(r, "mul") == 0)
        *red = RED_MUL;
    else if (strcmp(r, "max") == 0 && n->opset >= 18)
        *red = RED_MAX;
    else if (strcmp(r, "min") == 0 && n->opset >= 18)
        *red = RED_MIN;
    else
        return ox_node_err(n, OX_E_INVALID, "reduction '%s' is not valid at opset %d", r, n->opset);
    if (*red != RED_NONE && !is_arith(dt))
        return ox_node_err(n, OX_E_UNSUPPORTED, "reduction '%s' on %s is not supported", r,
                           ox_dtype_name(dt));
    return OX_OK;
}

/* y[yi..yi+cnt) = red(y, u[ui..ui+cnt)) */
static void reduce_into(ox_tensor *y, int64_t yi, const ox_tensor *u, int64_t ui, int64_t cnt,
                        int red) {
    size_t es = ox_dtype_size(y->dtype);
    if (red == RED_NONE) {
        memcpy((char *)y->data + (size_t)yi * es, (const char *)u->data + (size_t)ui * es,
               (size_t)cnt * es);
        return;
    }
    switch (y->dtype) {
#define RED_F(DT, T)                                                                               \
    case DT: {                                                                                     \
        T *a = (T *)y->data + yi;                                                                  \
        const T *b = (const T *)u->data + ui;                                                      \
        for (int64_t i = 0; i < cnt; i++) switch (red) {                                           \
            case RED_ADD: a[i] += b[i]; break;                                                     \
            case RED_MUL: a[i] *= b[i]; break;                                                     \
            case RED_MAX: a[i] = a[i] > b[i] ? a[i] : b[i]; break;                                 \
            default: a[i] = a[i] < b[i] ? a[i] : b[i]; break;                                      \
            }                                                                                      \
        break;                                                                                     \
    }
#define RED_I(DT, T)                                                                               \
    case DT: {                                                                                     \
        T *a = (T *)y->data + yi;                                                                  \
        const T *b = (const T *)u->data + ui;                                                      \
        for (int64_t i = 0; i < cnt; i++) switch (red) {                                           \
            case RED_ADD: a[i] = (T)((uint64_t)a[i] + (uint64_t)b[i]); break;                      \
            case RED_MUL: a[i] = (T)((uint64_t)a[i] * (uint64_t)b[i]); break;                      \
            case RED_MAX: a[i] = a[i] > b[i] ? a[i] : b[i]; break;                                 \
            default: a[i] = a[i] < b[i] ? a[i] : b[i]; break;                                      \
            }                                                                                      \
        break;                                                                                     \
    }
        OX_TN_FLOAT_TYPES(RED_F)
        OX_TN_INT_TYPES(RED_I)
#undef RED_F
#undef RED_I
    default:
        /* float16, bfloat16, bool: through double */
        for (int64_t i = 0; i < cnt; i++) {
            double a = ox_get_f64(y, yi + i), b = ox_get_f64(u, ui + i);
            switch (red) {
            case RED_ADD: a += b; break;
            case RED_MUL: a *= b; break;
            case RED_MAX: a = a > b ? a : b; break;
            default: a = a < b ? a : b; break;
            }
            ox_set_f64(y, yi + i, a);
        }
        break;
    }
}

/* ---- Scatter / ScatterElements --------------------------------------------------------- */

ox_status ox_tn_infer_scatter_elements(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                       const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    ox_status st;
    if ((st = need_in(n, in, 0, "data")) || (st = need_in(n, in, 1, "indices")) ||
        (st = need_in(n, in, 2, "updates")) || (st = need_out(n, out, 0)) ||
        (st = check_indices_type(n, in[1])))
        return st;
    const ox_tensor *x = in[0], *idx = in[1], *u = in[2];
    int axis, red;
    if ((st = norm_axis(n, ox_attr_int(n, "axis", 0), x->rank, &axis, "axis")) ||
        (st = check_elements_shapes(n, x, idx, axis)) ||
        (st = scatter_reduction(n, x->dtype, &red)))
        return st;
    bool ok = u->dtype == x->dtype && u->rank == idx->rank;
    for (int d = 0; ok && d < u->rank; d++) ok = u->dims[d] == idx->dims[d];
    if (!ok) {
        char si[256], su[256];
        return ox_node_err(n, OX_E_SHAPE,
                           "updates %s must match indices %s in shape and data "
                           "in type (%s)",
                           ox_tensor_desc(u, su, sizeof su), ox_tensor_desc(idx, si, sizeof si),
                           ox_dtype_name(x->dtype));
    }
    ox_set_like(out[0], x);
    return OX_OK;
}

/* ScatterElements without a reduction, the indices int64 or int32 and the elements of 4 or
 * 8 bytes (what exporters send: torchvision's MultiScaleRoIAlign scatters millions of
 * floats): one row of the indices' last dimension at a time, typed copies instead of one
 * reduce_into call per element. The indices were checked. False when it does not apply. */
static bool scatter_rows(ox_tensor *y, const ox_tensor *idx, const ox_tensor *u, int axis,
                         const int64_t *xs) {
    size_t es = ox_dtype_size(y->dtype);
    if ((es != 4 && es != 8) || (idx->dtype != OX_INT64 && idx->dtype != OX_INT32) ||
        y->dtype == OX_STRING || idx->rank < 1)
        return false;
    int r = idx->rank;
    int64_t L = idx->dims[r - 1], rows = L ? ox_tensor_numel(idx) / L : 0;
    int64_t cnt[OX_MAX_RANK] = {0}, base = 0, sa = xs[axis], dim = y->dims[axis];
    bool last = axis == r - 1;
    for (int64_t row = 0; row < rows; row++) {
        int64_t e0 = row * L;
        for (int64_t i = 0; i < L; i++) {
            int64_t k = idx->dtype == OX_INT64 ? ((const int64_t *)idx->data)[e0 + i]
                                               : ((const int32_t *)idx->data)[e0 + i];
            if (k < 0) k += dim;
            int64_t at = base + k * sa + (last ? 0 : i);
            if (es == 4)
                ((uint32_t *)y->data)[at] = ((const uint32_t *)u->data)[e0 + i];
            else
                ((uint64_t *)y->data)[at] = ((const uint64_t *)u->data)[e0 + i];
        }
        elements_step(r - 2, axis, xs, idx->dims, cnt, &base); /* the next row */
    }
    return true;
}

ox_status ox_tn_cpu_scatter_elements(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                                     const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    const ox_tensor *x = in[0], *idx = in[1], *u = in[2];
    int axis, red, r = x->rank;
    ox_status st;
    if ((st = norm_axis(n, ox_attr_int(n, "axis", 0), r, &axis, "axis")) ||
        (st = scatter_reduction(n, x->dtype, &red)))
        return st;
    int64_t xs[OX_MAX_RANK], cnt[OX_MAX_RANK] = {0}, base = 0, N = ox_tensor_numel(idx), k;
    for (int64_t e = 0; e < N; e++)
        if ((st = wrap_index(n, ox_get_i64(idx, e), x->dims[axis], axis, e, &k))) return st;
    copy_data(out[0], x);
    strides_of(r, x->dims, xs);
    if (red == RED_NONE && scatter_rows(out[0], idx, u, axis, xs)) return OX_OK;
    for (int64_t e = 0; e < N; e++) {
        k = ox_get_i64(idx, e);
        if (k < 0) k += x->dims[axis];
        reduce_into(out[0], base + k * xs[axis], u, e, 1, red);
        elements_step(r - 1, axis, xs, idx->dims, cnt, &base);
    }
    return OX_OK;
}

/* ---- ScatterND ------------------------------------------------------------------------- */

ox_status ox_tn_infer_scatter_nd(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                 const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    ox_status st;
    if ((st = need_in(n, in, 0, "data")) || (st = need_in(n, in, 1, "indices")) ||
        (st = need_in(n, in, 2, "updates")) || (st = need_out(n, out, 0)) ||
        (st = check_indices_type(n, in[1])))
        return st;
    const ox_tensor *x = in[0], *idx = in[1], *u = in[2];
    int red;
    if ((st = scatter_reduction(n, x->dtype, &red))) return st;
    char sx[256], si[256], su[256];
    ox_tensor_desc(x, sx, sizeof sx);
    ox_tensor_desc(idx, si, sizeof si);
    ox_tensor_desc(u, su, sizeof su);
    if (x->rank < 1 || idx->rank < 1 || idx->dims[idx->rank - 1] > x->rank)
        return ox_node_err(n, OX_E_SHAPE,
                           "data %s and indices %s: the last dim of indices must "
                           "be at most the rank of data",
                           sx, si);
    int q = idx->rank, k = (int)idx->dims[q - 1];
    bool ok = u->dtype == x->dtype && u->rank == q - 1 + x->rank - k;
    for (int d = 0; ok && d < q - 1; d++) ok = u->dims[d] == idx->dims[d];
    for (int d = k; ok && d < x->rank; d++) ok = u->dims[q - 1 + d - k] == x->dims[d];
    if (!ok)
        return ox_node_err(n, OX_E_SHAPE, "updates %s do not match data %s and indices %s", su, sx,
                           si);
    ox_set_like(out[0], x);
    return OX_OK;
}

ox_status ox_tn_cpu_scatter_nd(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                               const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    const ox_tensor *x = in[0], *idx = in[1], *u = in[2];
    int red, q = idx->rank, k = (int)idx->dims[q - 1];
    ox_status st = scatter_reduction(n, x->dtype, &red);
    if (st) return st;
    int64_t xs[OX_MAX_RANK], N = prod(idx->dims, 0, q - 1), S = prod(x->dims, k, x->rank), w;
    strides_of(x->rank, x->dims, xs);
    for (int64_t i = 0; i < N * k; i++)
        if ((st = wrap_index(n, ox_get_i64(idx, i), x->dims[i % k], (int)(i % k), i, &w)))
            return st;
    copy_data(out[0], x);
    for (int64_t i = 0; i < N; i++) {
        int64_t off = 0;
        for (int j = 0; j < k; j++) {
            int64_t v = ox_get_i64(idx, i * k + j);
            off += (v < 0 ? v + x->dims[j] : v) * xs[j];
        }
        if (S) reduce_into(out[0], off, u, i * S, S, red);
    }
    return OX_OK;
}

/* ---- Trilu ----------------------------------------------------------------------------- */

static ox_status trilu_k(const struct ox_node *n, const ox_tensor *const *in, bool need,
                         int64_t *k) {
    const ox_tensor *t = ox_in(n, in, 1);
    *k = 0;
    if (!t || (!need && !known(t))) return OX_OK;
    return read_scalar_int(n, t, k, "k");
}

ox_status ox_tn_infer_trilu(struct ox_infer_ctx *ctx, const struct ox_node *n,
                            const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    ox_status st;
    int64_t k;
    if ((st = need_in(n, in, 0, "input")) || (st = need_out(n, out, 0))) return st;
    if (in[0]->rank < 2)
        return ox_node_err(n, OX_E_SHAPE, "input must have rank >= 2, got %d", in[0]->rank);
    if (ox_in(n, in, 1) && (!ox_dtype_is_int(in[1]->dtype) || ox_tensor_numel(in[1]) != 1))
        return ox_node_err(n, OX_E_INVALID, "k must be one integer");
    if ((st = trilu_k(n, in, false, &k))) return st;
    ox_set_like(out[0], in[0]);
    return OX_OK;
}

ox_status ox_tn_cpu_trilu(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                          const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    const ox_tensor *x = in[0];
    int64_t k;
    ox_status st = trilu_k(n, in, true, &k);
    if (st) return st;
    bool upper = ox_attr_int(n, "upper", 1) != 0;
    int r = x->rank;
    int64_t R = x->dims[r - 2], C = x->dims[r - 1], B = prod(x->dims, 0, r - 2);
    if (k > R + C) k = R + C;
    if (k < -(R + C)) k = -(R + C);
    size_t es = ox_dtype_size(x->dtype), row = (size_t)C * es;
    copy_data(out[0], x);
    char *y = out[0]->data;
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < R; i++) {
            char *p = y + (size_t)(b * R + i) * row;
            /* upper keeps j >= i + k, lower keeps j <= i + k */
            int64_t z0 = upper ? 0 : clamp64(i + k + 1, 0, C);
            int64_t z1 = upper ? clamp64(i + k, 0, C) : C;
            if (z1 > z0) memset(p + (size_t)z0 * es, 0, (size_t)(z1 - z0) * es);
        }
    return OX_OK;
}

/* ---- CumSum ---------------------------------------------------------------------------- */

static ox_status cumsum_axis(const struct ox_node *n, const ox_tensor *const *in, int *axis) {
    *axis = 0;
    int64_t a;
    ox_status st = read_scalar_int(n, in[1], &a, "axis");
    if (st) return st;
    return norm_axis(n, a, in[0]->rank, axis, "axis");
}

ox_status ox_tn_infer_cumsum(struct ox_infer_ctx *ctx, const struct ox_node *n,
                             const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    ox_status st;
    int axis;
    if ((st = need_in(n, in, 0, "x")) || (st = need_in(n, in, 1, "axis")) ||
        (st = need_out(n, out, 0)))
        return st;
    if (!is_arith(in[0]->dtype) || in[0]->dtype == OX_BOOL)
        return ox_node_err(n, OX_E_UNSUPPORTED, "type %s is not supported",
                           ox_dtype_name(in[0]->dtype));
    if (!ox_dtype_is_int(in[1]->dtype) || ox_tensor_numel(in[1]) != 1)
        return ox_node_err(n, OX_E_INVALID, "axis must be one integer");
    if (known(in[1]) && (st = cumsum_axis(n, in, &axis))) return st;
    ox_set_like(out[0], in[0]);
    return OX_OK;
}

ox_status ox_tn_cpu_cumsum(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                           const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    const ox_tensor *x = in[0];
    ox_tensor *y = out[0];
    int axis;
    ox_status st = cumsum_axis(n, in, &axis);
    if (st) return st;
    bool excl = ox_attr_int(n, "exclusive", 0) != 0, rev = ox_attr_int(n, "reverse", 0) != 0;
    int64_t D = x->dims[axis], outer = prod(x->dims, 0, axis),
            inner = prod(x->dims, axis + 1, x->rank);
    /* floats accumulate in their own type, integers in uint64 (wrapping), the narrow floats
     * in float */
#define CUMSUM_LOOP(LOAD, STORE, ACC_T)                                                            \
    for (int64_t o = 0; o < outer; o++)                                                            \
        for (int64_t j = 0; j < inner; j++) {                                                      \
            ACC_T acc = 0;                                                                         \
            for (int64_t i = 0; i < D; i++) {                                                      \
                int64_t e = (o * D + (rev ? D - 1 - i : i)) * inner + j;                           \
                ACC_T v = LOAD(e);                                                                 \
                if (excl) STORE(e, acc);                                                           \
                acc += v;                                                                          \
                if (!excl) STORE(e, acc);                                                          \
            }                                                                                      \
        }
#define LOAD_T(e)     xv[e]
#define STORE_T(e, v) (yv[e] = (T)(v))
#define LOAD_G(e)     (float)ox_get_f64(x, e)
#define STORE_G(e, v) ox_set_f64(y, e, v)
    switch (x->dtype) {
#define CS_F(DT, T_)                                                                               \
    case DT: {                                                                                     \
        typedef T_ T;                                                                              \
        const T *xv = x->data;                                                                     \
        T *yv = y->data;                                                                           \
        CUMSUM_LOOP(LOAD_T, STORE_T, T)                                                            \
        break;                                                                                     \
    }
#define CS_I(DT, T_)                                                                               \
    case DT: {                                                                                     \
        typedef T_ T;                                                                              \
        const T *xv = x->data;                                                                     \
        T *yv = y->data;                                                                           \
        CUMSUM_LOOP((uint64_t)LOAD_T, STORE_T, uint64_t)                                           \
        break;                                                                                     \
    }
        OX_TN_FLOAT_TYPES(CS_F)
        OX_TN_INT_TYPES(CS_I)
#undef CS_F
#undef CS_I
    default: CUMSUM_LOOP(LOAD_G, STORE_G, float) break;
    }
#undef LOAD_T
#undef STORE_T
#undef LOAD_G
#undef STORE_G
#undef CUMSUM_LOOP
    return OX_OK;
}

/* ---- NonZero --------------------------------------------------------------------------- */

static bool is_nonzero(const ox_tensor *t, int64_t i) {
    size_t es = ox_dtype_size(t->dtype);
    switch (t->dtype) {
    case OX_FLOAT: return ((const float *)t->data)[i] != 0;
    case OX_DOUBLE: return ((const double *)t->data)[i] != 0;
    case OX_FLOAT16:
    case OX_BFLOAT16: return ox_get_f64(t, i) != 0;
    case OX_STRING: {
        const char *s = ((char *const *)t->data)[i];
        return s && s[0];
    }
    default: {
        const unsigned char *p = (const unsigned char *)t->data + (size_t)i * es;
        for (size_t b = 0; b < es; b++)
            if (p[b]) return true;
        return false;
    }
    }
}

/* bool, uint8 and int8 (a comparison's output): one byte, zero only as 0 */
static bool nonzero_bytes(const ox_tensor *t) {
    return t->dtype == OX_BOOL || t->dtype == OX_UINT8 || t->dtype == OX_INT8;
}

ox_status ox_tn_infer_nonzero(struct ox_infer_ctx *ctx, const struct ox_node *n,
                              const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    ox_status st;
    if ((st = need_in(n, in, 0, "X")) || (st = need_out(n, out, 0))) return st;
    if (!known(in[0])) return OX_NEED_DATA;
    int64_t N = ox_tensor_numel(in[0]), cnt = 0;
    if (nonzero_bytes(in[0])) {
        const unsigned char *b = in[0]->data;
        for (int64_t i = 0; i < N; i++) cnt += b[i] != 0;
    } else {
        for (int64_t i = 0; i < N; i++) cnt += is_nonzero(in[0], i);
    }
    /* a scalar counts as a one-element vector (numpy's nonzero on 0-d input) */
    int64_t dims[2] = {in[0]->rank ? in[0]->rank : 1, cnt};
    ox_set_shape(out[0], OX_INT64, 2, dims);
    return OX_OK;
}

ox_status ox_tn_cpu_nonzero(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                            const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    const ox_tensor *x = in[0];
    int r = x->rank;
    int64_t N = ox_tensor_numel(x), nnz = out[0]->dims[1], k = 0, cnt[OX_MAX_RANK] = {0};
    int64_t *y = out[0]->data;
    const unsigned char *bytes = nonzero_bytes(x) ? x->data : NULL;
    for (int64_t i = 0; i < N; i++) {
        if (bytes ? bytes[i] != 0 : is_nonzero(x, i)) {
            if (k >= nnz)
                return ox_node_err(n, OX_E_INTERNAL, "more non-zeros than inferred (%lld)",
                                   (long long)nnz);
            if (r == 0) y[k] = 0;
            for (int d = 0; d < r; d++) y[d * nnz + k] = cnt[d];
            k++;
        }
        for (int d = r - 1; d >= 0; d--) {
            if (++cnt[d] < x->dims[d]) break;
            cnt[d] = 0;
        }
    }
    if (k != nnz)
        return ox_node_err(n, OX_E_INTERNAL, "%lld non-zeros, %lld inferred", (long long)k,
                           (long long)nnz);
    return OX_OK;
}

/* ---- Compress -------------------------------------------------------------------------- */

/* The axis (-1: none, the input is flattened) and the count of selected slices. */
static ox_status compress_params(const struct ox_node *n, const ox_tensor *const *in, int *axis,
                                 int64_t *cnt) {
    *cnt = 0;
    const ox_tensor *x = in[0], *c = in[1];
    ox_status st;
    *axis = -1;
    if (ox_node_attr(n, "axis")) {
        int64_t a = ox_attr_int(n, "axis", 0);
        if (a < 0 && n->opset < 11)
            return ox_node_err(n, OX_E_INVALID, "negative axis %lld needs opset 11", (long long)a);
        if ((st = norm_axis(n, a, x->rank, axis, "axis"))) return st;
    }
    if (c->rank != 1 || !is_arith(c->dtype))
        return ox_node_err(n, OX_E_INVALID, "condition must be a 1-D bool tensor");
    int64_t D = *axis >= 0 ? x->dims[*axis] : ox_tensor_numel(x), L = c->dims[0];
    *cnt = 0;
    for (int64_t i = 0; i < L; i++)
        if (ox_get_i64(c, i)) {
            if (i >= D)
                return ox_node_err(n, OX_E_INVALID,
                                   "condition selects index %lld, but the axis "
                                   "has %lld entries",
                                   (long long)i, (long long)D);
            (*cnt)++;
        }
    return OX_OK;
}

ox_status ox_tn_infer_compress(struct ox_infer_ctx *ctx, const struct ox_node *n,
                               const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    ox_status st;
    if ((st = need_in(n, in, 0, "input")) || (st = need_in(n, in, 1, "condition")) ||
        (st = need_out(n, out, 0)))
        return st;
    if (!known(in[1])) return OX_NEED_DATA;
    int axis;
    int64_t cnt;
    if ((st = compress_params(n, in, &axis, &cnt))) return st;
    if (axis < 0) {
        ox_set_shape(out[0], in[0]->dtype, 1, &cnt);
    } else {
        ox_set_like(out[0], in[0]);
        out[0]->dims[axis] = cnt;
    }
    return OX_OK;
}

ox_status ox_tn_cpu_compress(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                             const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    const ox_tensor *x = in[0], *c = in[1];
    int axis;
    int64_t cnt;
    ox_status st = compress_params(n, in, &axis, &cnt);
    if (st) return st;
    if (cnt != (axis < 0 ? out[0]->dims[0] : out[0]->dims[axis]))
        return ox_node_err(n, OX_E_INTERNAL, "selection differs from the inferred shape");
    int64_t outer = axis < 0 ? 1 : prod(x->dims, 0, axis),
            D = axis < 0 ? ox_tensor_numel(x) : x->dims[axis],
            inner = axis < 0 ? 1 : prod(x->dims, axis + 1, x->rank), L = c->dims[0];
    if (L > D) L = D;
    size_t es = ox_dtype_size(x->dtype), blk = (size_t)inner * es;
    char *dst = out[0]->data;
    const char *src = x->data;
    if (!blk) return OX_OK;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < L; i++)
            if (ox_get_i64(c, i)) {
                memcpy(dst, src + (size_t)(o * D + i) * blk, blk);
                dst += blk;
            }
    return OX_OK;
}

/* ---- ReverseSequence ------------------------------------------------------------------- */

static ox_status revseq_axes(const struct ox_node *n, const ox_tensor *const *in, int *baxis,
                             int *taxis) {
    *baxis = 1;
    *taxis = 0;
    int64_t b = ox_attr_int(n, "batch_axis", 1), t = ox_attr_int(n, "time_axis", 0);
    if (in[0]->rank < 2)
        return ox_node_err(n, OX_E_SHAPE, "input must have rank >= 2, got %d", in[0]->rank);
    if ((b != 0 && b != 1) || (t != 0 && t != 1) || b == t)
        return ox_node_err(n, OX_E_INVALID, "batch_axis %lld and time_axis %lld must be 0 and 1",
                           (long long)b, (long long)t);
    *baxis = (int)b;
    *taxis = (int)t;
    return OX_OK;
}

ox_status ox_tn_infer_reverse_sequence(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                       const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    ox_status st;
    int b, t;
    if ((st = need_in(n, in, 0, "input")) || (st = need_in(n, in, 1, "sequence_lens")) ||
        (st = need_out(n, out, 0)) || (st = revseq_axes(n, in, &b, &t)))
        return st;
    const ox_tensor *l = in[1];
    if (!ox_dtype_is_int(l->dtype) || l->rank != 1 || l->dims[0] != in[0]->dims[b])
        return ox_node_err(n, OX_E_SHAPE, "sequence_lens must be integers of shape [%lld]",
                           (long long)in[0]->dims[b]);
    ox_set_like(out[0], in[0]);
    return OX_OK;
}

ox_status ox_tn_cpu_reverse_sequence(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                                     const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    const ox_tensor *x = in[0], *l = in[1];
    int b, t;
    ox_status st = revseq_axes(n, in, &b, &t);
    if (st) return st;
    int64_t B = x->dims[b], T = x->dims[t], inner = prod(x->dims, 2, x->rank);
    for (int64_t i = 0; i < B; i++) {
        int64_t len = ox_get_i64(l, i);
        if (len < 0 || len > T)
            return ox_node_err(n, OX_E_INVALID,
                               "sequence length %lld for batch %lld is out of "
                               "range [0, %lld]",
                               (long long)len, (long long)i, (long long)T);
    }
    size_t es = ox_dtype_size(x->dtype), blk = (size_t)inner * es;
    if (!blk) return OX_OK;
    char *dst = out[0]->data;
    const char *src = x->data;
    for (int64_t i = 0; i < B; i++) {
        int64_t len = ox_get_i64(l, i);
        for (int64_t j = 0; j < T; j++) {
            int64_t s = j < len ? len - 1 - j : j;
            int64_t od = t == 0 ? j * B + i : i * T + j, os = t == 0 ? s * B + i : i * T + s;
            memcpy(dst + (size_t)od * blk, src + (size_t)os * blk, blk);
        }
    }
    return OX_OK;
}
