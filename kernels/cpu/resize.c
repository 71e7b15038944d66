/* Resize (opset 10+) and Upsample (opset 7-9).
 *
 * Every output coordinate of every axis is mapped to a position in the input
 * (coordinate_transformation_mode), and the position to a few input indices with weights
 * ("taps"): one for nearest, two for linear, four for cubic, more for an antialiased
 * downscale (the filter is stretched by 1/scale). N-D interpolation is the tensor product of
 * the per-axis taps, computed in double. Indices outside the input are clamped to its edge
 * (exclude_outside drops them instead and renormalises); tf_crop_and_resize positions outside
 * the input give extrapolation_value.
 *
 * Versions: Upsample 7-8 take `scales` as an attribute, 9 as an input; Resize 10 takes X and
 * scales (asymmetric coordinates, nearest rounds down when upsampling and up when
 * downsampling); 11 adds roi, sizes, coordinate_transformation_mode, nearest_mode, cubic;
 * 13 makes roi and scales optional; 18 adds antialias, axes and keep_aspect_ratio_policy;
 * 19 half_pixel_symmetric. Output sizes follow the ONNX reference: floor(in * scale) from
 * scales; from sizes, scale = out / in (keep_aspect_ratio_policy picks one scale for all
 * axes and rounds the sizes half up).
 */
#include "kernels/op.h"

#include <stdint.h>

enum { RM_NEAREST, RM_LINEAR, RM_CUBIC };
enum {
    CT_HALF_PIXEL,
    CT_HALF_PIXEL_SYM,
    CT_PYTORCH_HALF_PIXEL,
    CT_ALIGN_CORNERS,
    CT_ASYMMETRIC,
    CT_TF_HALF_PIXEL_NN,
    CT_TF_CROP,
};
enum { NM_ROUND_FLOOR, NM_ROUND_CEIL, NM_FLOOR, NM_CEIL, NM_SIMPLE };

/* Taps per output coordinate above this are refused (a downscale by more than ~1/250000
 * with antialias). */
#define RSZ_MAX_TAPS (1 << 20)

struct rsz_params {
    int mode, ctm, nearest;
    double cubic_a, extrap;
    bool exclude_outside, antialias;
    int rank;
    int64_t in[OX_MAX_RANK], out[OX_MAX_RANK];
    double scale[OX_MAX_RANK], roi_s[OX_MAX_RANK], roi_e[OX_MAX_RANK];
    int taps[OX_MAX_RANK]; /* most taps one output coordinate of this axis can have */
};

static bool streq(const char *a, const char *b) {
    return strcmp(a, b) == 0;
}

/* A float list from a tensor input (NULL or empty: *n = 0). */
static ox_status read_floats(const struct ox_node *node, const ox_tensor *t, const char *what,
                             double *v, int max, int *n) {
    *n = 0;
    if (!t) return OX_OK;
    int64_t cnt = ox_tensor_numel(t);
    if (cnt == 0) return OX_OK;
    if (!t->data) return OX_NEED_DATA;
    if (!ox_dtype_is_float(t->dtype))
        return ox_node_err(node, OX_E_INVALID, "'%s' must be a float tensor, got %s", what,
                           ox_dtype_name(t->dtype));
    if (cnt > max)
        return ox_node_err(node, OX_E_INVALID, "'%s' has %lld values, expected at most %d", what,
                           (long long)cnt, max);
    for (int64_t i = 0; i < cnt; i++) v[i] = ox_get_f64(t, i);
    *n = (int)cnt;
    return OX_OK;
}

static ox_status parse_mode(const struct ox_node *node, struct rsz_params *p, bool legacy) {
    const char *m = ox_attr_str(node, "mode", "nearest");
    if (streq(m, "nearest"))
        p->mode = RM_NEAREST;
    else if (streq(m, "linear") || (legacy && streq(m, "bilinear")))
        p->mode = RM_LINEAR;
    else if (!legacy && streq(m, "cubic"))
        p->mode = RM_CUBIC;
    else
        return ox_node_err(node, OX_E_INVALID, "mode '%s' is not supported", m);
    if (legacy) {
        p->ctm = CT_ASYMMETRIC;
        p->nearest = NM_SIMPLE;
        return OX_OK;
    }
    const char *c = ox_attr_str(node, "coordinate_transformation_mode", "half_pixel");
    if (streq(c, "half_pixel"))
        p->ctm = CT_HALF_PIXEL;
    else if (streq(c, "half_pixel_symmetric") && node->opset >= 19)
        p->ctm = CT_HALF_PIXEL_SYM;
    else if (streq(c, "pytorch_half_pixel"))
        p->ctm = CT_PYTORCH_HALF_PIXEL;
    else if (streq(c, "align_corners"))
        p->ctm = CT_ALIGN_CORNERS;
    else if (streq(c, "asymmetric"))
        p->ctm = CT_ASYMMETRIC;
    else if (streq(c, "tf_half_pixel_for_nn") && node->opset < 13)
        p->ctm = CT_TF_HALF_PIXEL_NN;
    else if (streq(c, "tf_crop_and_resize"))
        p->ctm = CT_TF_CROP;
    else
        return ox_node_err(node, OX_E_INVALID,
                           "coordinate_transformation_mode '%s' is not valid at opset %d", c,
                           node->opset);
    const char *nm = ox_attr_str(node, "nearest_mode", "round_prefer_floor");
    if (streq(nm, "round_prefer_floor"))
        p->nearest = NM_ROUND_FLOOR;
    else if (streq(nm, "round_prefer_ceil"))
        p->nearest = NM_ROUND_CEIL;
    else if (streq(nm, "floor"))
        p->nearest = NM_FLOOR;
    else if (streq(nm, "ceil"))
        p->nearest = NM_CEIL;
    else
        return ox_node_err(node, OX_E_INVALID, "nearest_mode '%s' is not valid", nm);
    p->cubic_a = ox_attr_float(node, "cubic_coeff_a", -0.75f);
    p->exclude_outside = ox_attr_int(node, "exclude_outside", 0) != 0;
    p->extrap = ox_attr_float(node, "extrapolation_value", 0.0f);
    p->antialias = node->opset >= 18 && ox_attr_int(node, "antialias", 0) != 0;
    if (p->antialias && p->mode == RM_NEAREST)
        return ox_node_err(node, OX_E_INVALID, "antialias is not defined for mode 'nearest'");
    return OX_OK;
}

/* Filter scale of an axis: stretched by 1/scale when antialiasing a downscale. */
static double filter_scale(const struct rsz_params *p, int d) {
    return p->antialias && p->scale[d] < 1 ? p->scale[d] : 1.0;
}

/* First tap offset (relative to floor(x)) and tap count of an axis. */
static void tap_span(const struct rsz_params *p, int d, int64_t *start, int64_t *count) {
    if (p->mode == RM_NEAREST) {
        *start = 0, *count = 1;
        return;
    }
    double s = filter_scale(p, d), support = p->mode == RM_LINEAR ? 1.0 : 2.0;
    double st = floor(-support / s) + 1;
    if (!(st > -RSZ_MAX_TAPS)) st = -RSZ_MAX_TAPS;
    *start = (int64_t)st;
    *count = 2 - 2 * *start;
}

static ox_status rsz_params(const struct ox_node *node, const ox_tensor *const *in,
                            struct rsz_params *p) {
    const ox_tensor *x = in[0];
    int r = x->rank;
    bool upsample = streq(node->op_type, "Upsample");
    bool legacy = upsample || node->opset < 11;
    memset(p, 0, sizeof *p);
    p->rank = r;
    ox_status st = parse_mode(node, p, legacy);
    if (st) return st;
    double scales[OX_MAX_RANK], roi[2 * OX_MAX_RANK], sizes_f[OX_MAX_RANK];
    int64_t sizes[OX_MAX_RANK];
    int n_scales = 0, n_roi = 0, n_sizes = 0;
    for (int d = 0; d < r; d++) p->in[d] = x->dims[d], p->roi_s[d] = 0, p->roi_e[d] = 1;
    /* the axes that scales/sizes/roi describe */
    int axes[OX_MAX_RANK], n_axes = r;
    for (int d = 0; d < r; d++) axes[d] = d;
    if (!legacy && node->opset >= 18) {
        const int64_t *av;
        int na = ox_attr_ints(node, "axes", &av);
        if (na > r) return ox_node_err(node, OX_E_INVALID, "%d axes for rank %d", na, r);
        if (na >= 0) {
            bool seen[OX_MAX_RANK] = {false};
            for (int i = 0; i < na; i++) {
                if ((st = ox_norm_axis(node, av[i], r, &axes[i]))) return st;
                if (seen[axes[i]])
                    return ox_node_err(node, OX_E_INVALID, "axis %lld repeats", (long long)av[i]);
                seen[axes[i]] = true;
            }
            n_axes = na;
        }
    }
    if (upsample && node->opset < 9) {
        const float *sv;
        int ns = ox_attr_floats(node, "scales", &sv);
        if (ns < 0) return ox_node_err(node, OX_E_INVALID, "attribute 'scales' is missing");
        if (ns > OX_MAX_RANK) ns = OX_MAX_RANK + 1;
        for (int i = 0; i < ns && i < OX_MAX_RANK; i++) scales[i] = sv[i];
        n_scales = ns;
    } else if (legacy) {
        const ox_tensor *s = ox_in(node, in, 1);
        if (!s) return ox_node_err(node, OX_E_INVALID, "input 'scales' is missing");
        if ((st = read_floats(node, s, "scales", scales, OX_MAX_RANK, &n_scales))) return st;
    } else {
        const ox_tensor *st_roi = ox_in(node, in, 1), *st_sc = ox_in(node, in, 2),
                        *st_sz = ox_in(node, in, 3);
        if (st_sz && ox_tensor_numel(st_sz) > 0) {
            if (!st_sz->data) return OX_NEED_DATA;
            int64_t k = ox_read_ints(node, st_sz, sizes, OX_MAX_RANK);
            if (k < 0) return OX_E_INVALID;
            n_sizes = (int)k;
        }
        if ((st = read_floats(node, st_sc, "scales", scales, OX_MAX_RANK, &n_scales))) return st;
        if (p->ctm == CT_TF_CROP &&
            (st = read_floats(node, st_roi, "roi", roi, 2 * OX_MAX_RANK, &n_roi)))
            return st;
        if (n_sizes && n_scales)
            return ox_node_err(node, OX_E_INVALID, "both 'scales' and 'sizes' are given");
        if (!n_sizes && !n_scales)
            return ox_node_err(node, OX_E_INVALID, "one of 'scales' and 'sizes' is needed");
        if (n_roi && n_roi != 2 * n_axes)
            return ox_node_err(node, OX_E_INVALID, "'roi' has %d values, expected %d", n_roi,
                               2 * n_axes);
        for (int i = 0; i < n_roi / 2; i++)
            p->roi_s[axes[i]] = roi[i], p->roi_e[axes[i]] = roi[n_axes + i];
    }
    for (int d = 0; d < r; d++) p->scale[d] = 1, p->out[d] = p->in[d];
    if (n_sizes) {
        if (n_sizes != n_axes)
            return ox_node_err(node, OX_E_INVALID, "'sizes' has %d values, expected %d", n_sizes,
                               n_axes);
        for (int i = 0; i < n_axes; i++) {
            int d = axes[i];
            if (sizes[i] < 0)
                return ox_node_err(node, OX_E_INVALID, "sizes[%d] = %lld", i, (long long)sizes[i]);
            if (p->in[d] == 0 && sizes[i] > 0)
                return ox_node_err(node, OX_E_SHAPE, "axis %d is empty, cannot resize to %lld", d,
                                   (long long)sizes[i]);
            sizes_f[i] = p->in[d] ? (double)sizes[i] / (double)p->in[d] : 1.0;
            p->out[d] = sizes[i];
            p->scale[d] = sizes_f[i];
        }
        const char *pol = node->opset >= 18
                              ? ox_attr_str(node, "keep_aspect_ratio_policy", "stretch")
                              : "stretch";
        if (!streq(pol, "stretch")) {
            bool not_larger = streq(pol, "not_larger");
            if (!not_larger && !streq(pol, "not_smaller"))
                return ox_node_err(node, OX_E_INVALID, "keep_aspect_ratio_policy '%s'", pol);
            double s = sizes_f[0];
            for (int i = 1; i < n_axes; i++)
                s = not_larger ? fmin(s, sizes_f[i]) : fmax(s, sizes_f[i]);
            for (int i = 0; i < n_axes; i++) {
                int d = axes[i];
                p->scale[d] = s;
                p->out[d] = (int64_t)(s * (double)p->in[d] + 0.5);
            }
        }
    } else {
        if (n_scales != n_axes)
            return ox_node_err(node, OX_E_INVALID, "'scales' has %d values, expected %d", n_scales,
                               n_axes);
        for (int i = 0; i < n_axes; i++) {
            int d = axes[i];
            double v = scales[i] * (double)p->in[d];
            if (!(scales[i] > 0) || !(v < 9.2e18))
                return ox_node_err(node, OX_E_INVALID, "scales[%d] = %g is not valid", i,
                                   scales[i]);
            p->scale[d] = scales[i];
            p->out[d] = (int64_t)floor(v);
        }
    }
    for (int d = 0; d < r; d++) {
        int64_t s0, cnt;
        tap_span(p, d, &s0, &cnt);
        if (cnt > RSZ_MAX_TAPS)
            return ox_node_err(node, OX_E_UNSUPPORTED, "axis %d: scale %g needs too many taps", d,
                               p->scale[d]);
        p->taps[d] = (int)cnt;
    }
    return OX_OK;
}

/* Position in the input of output coordinate j on axis d; false when outside the crop. */
static bool rsz_coord(const struct rsz_params *p, int d, int64_t j, double *pos) {
    double x = (double)j, s = p->scale[d], in = (double)p->in[d];
    double out_w = s * in; /* the resized length before rounding, as the reference uses */
    switch (p->ctm) {
    case CT_HALF_PIXEL: *pos = (x + 0.5) / s - 0.5; break;
    case CT_HALF_PIXEL_SYM: {
        double adj = (double)p->out[d] / out_w, center = in / 2;
        *pos = center * (1 - adj) + (x + 0.5) / s - 0.5;
        break;
    }
    case CT_PYTORCH_HALF_PIXEL: *pos = p->out[d] > 1 ? (x + 0.5) / s - 0.5 : 0; break;
    case CT_ALIGN_CORNERS: *pos = out_w == 1 ? 0 : x * (in - 1) / (out_w - 1); break;
    case CT_ASYMMETRIC: *pos = x / s; break;
    case CT_TF_HALF_PIXEL_NN: *pos = (x + 0.5) / s; break;
    default: { /* CT_TF_CROP */
        double a = p->roi_s[d], b = p->roi_e[d];
        *pos = out_w == 1 ? (b - a) * (in - 1) / 2 : x * (b - a) * (in - 1) / (out_w - 1);
        *pos += a * (in - 1);
        return !(*pos < 0 || *pos > in - 1);
    }
    }
    return true;
}

static double cubic_w(double a, double x) {
    x = fabs(x);
    if (x <= 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
    if (x < 2) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
    return 0;
}

/* Taps of output coordinate j on axis d into idx/w (zero weights dropped, indices clamped).
 * Returns the count; 0 means "outside: use extrapolation_value". */
static int rsz_taps(const struct rsz_params *p, int d, int64_t j, int64_t *idx, double *w) {
    double pos;
    if (!rsz_coord(p, d, j, &pos)) return 0;
    int64_t n = p->in[d];
    double fl = floor(pos), r = pos - fl;
    int64_t base = (int64_t)fl;
    if (p->mode == RM_NEAREST) {
        int64_t k;
        switch (p->nearest) {
        case NM_ROUND_FLOOR: k = r <= 0.5 ? base : base + 1; break;
        case NM_ROUND_CEIL: k = r < 0.5 ? base : base + 1; break;
        case NM_FLOOR: k = base; break;
        case NM_CEIL: k = r > 0 ? base + 1 : base; break;
        default: /* NM_SIMPLE: Resize-10 / Upsample */
            k = p->scale[d] < 1 ? (int64_t)ceil(pos) : (int64_t)pos;
            break;
        }
        idx[0] = k < 0 ? 0 : k >= n ? n - 1 : k;
        w[0] = 1;
        return 1;
    }
    int64_t start, count;
    tap_span(p, d, &start, &count);
    double s = filter_scale(p, d), sum = 0;
    int m = 0;
    for (int64_t i = start; i < start + count; i++) {
        double t = (double)i - r, wt;
        if (p->mode == RM_LINEAR) {
            if (s == 1)
                wt = i == 0 ? 1 - r : i == 1 ? r : 0;
            else
                wt = fmax(0, 1 - fabs(t * s));
        } else {
            wt = cubic_w(p->cubic_a, t * s);
        }
        int64_t k = base + i;
        if (p->exclude_outside && (k < 0 || k >= n)) wt = 0;
        sum += wt;
        if (wt == 0) continue;
        idx[m] = k < 0 ? 0 : k >= n ? n - 1 : k;
        w[m++] = wt;
    }
    bool normalise = s != 1 || p->exclude_outside;
    if (normalise && sum != 0)
        for (int i = 0; i < m; i++) w[i] /= sum;
    if (m == 0) { /* every weight vanished: fall back to the nearest index */
        idx[0] = base < 0 ? 0 : base >= n ? n - 1 : base;
        w[0] = 1;
        m = 1;
    }
    return m;
}

/* Scratch: per axis counts (int32) then indices (int64) then weights (double) for each
 * output coordinate, then a double accumulator for one output row: the last resized axis
 * times the contiguous tail of axes that do not change. Which axis is the last resized one is
 * known only once the taps are built, so the row is bounded by every axis d whose trailing
 * axes all keep their size. */
struct rsz_layout {
    size_t cnt[OX_MAX_RANK], idx[OX_MAX_RANK], w[OX_MAX_RANK], acc, total;
    int64_t row_max;
    /* rsz_planes (float, the last two axes): their weights as floats, then per thread the
     * input rows interpolated along the last axis (H x OW floats) and which of them are */
    size_t wf_h, wf_w, rows, rows_per_thread;
};

/* Whether rsz_planes applies: float, interpolated (not nearest), rank >= 2. The other
 * conditions (only the last two axes resized) are known from the taps, at run time. */
static bool rsz_planes_fit(const struct rsz_params *p, ox_dtype dt) {
    return dt == OX_FLOAT && p->mode != RM_NEAREST && p->rank >= 2;
}

static bool rsz_layout(const struct rsz_params *p, ox_dtype dt, int n_threads,
                       struct rsz_layout *l) {
    size_t off = 0, t;
    for (int d = 0; d < p->rank; d++) {
        size_t n = (size_t)p->out[d], nt;
        if (!ox_mul_size(n, (size_t)p->taps[d], &nt)) return false;
        l->cnt[d] = off;
        if (!ox_mul_size(n, 4, &t) || !ox_add_size(off, (t + 7) & ~(size_t)7, &off)) return false;
        l->idx[d] = off;
        if (!ox_mul_size(nt, 8, &t) || !ox_add_size(off, t, &off)) return false;
        l->w[d] = off;
        if (!ox_mul_size(nt, 8, &t) || !ox_add_size(off, t, &off)) return false;
    }
    size_t tail = 1, row = 1;
    for (int d = p->rank - 1; d >= 0; d--) {
        if (!ox_mul_size((size_t)p->out[d], tail, &t)) return false;
        if (t > row) row = t;
        if (p->in[d] != p->out[d]) break;
        tail = t;
    }
    l->row_max = (int64_t)row;
    l->acc = off;
    if (!ox_mul_size(row, 8, &t) || !ox_add_size(off, t, &off)) return false;
    l->rows_per_thread = 0;
    if (rsz_planes_fit(p, dt)) {
        int h = p->rank - 2, w = p->rank - 1;
        size_t nh, nw, per;
        if (!ox_mul_size((size_t)p->out[h], (size_t)p->taps[h], &nh) ||
            !ox_mul_size((size_t)p->out[w], (size_t)p->taps[w], &nw) ||
            !ox_mul_size((size_t)p->in[h], (size_t)p->out[w] + 1, &per) ||
            !ox_mul_size(per, 4, &per))
            return false;
        l->wf_h = off;
        if (!ox_add_size(off, ox_align64(nh * 4), &off)) return false;
        l->wf_w = off;
        if (!ox_add_size(off, ox_align64(nw * 4), &off)) return false;
        l->rows = off;
        l->rows_per_thread = ox_align64(per);
        if (!ox_mul_size(l->rows_per_thread, (size_t)(n_threads > 1 ? n_threads : 1), &t) ||
            !ox_add_size(off, t, &off))
            return false;
    }
    l->total = off;
    return true;
}

static ox_status rsz_infer(struct ox_infer_ctx *ctx, const struct ox_node *node,
                           const ox_tensor *const *in, ox_tensor *const *out) {
    const ox_tensor *x = in[0];
    char buf[256];
    if (!x) return ox_node_err(node, OX_E_INVALID, "missing input 'X'");
    if (x->dtype == OX_STRING || x->dtype == OX_UNDEFINED || x->dtype == OX_COMPLEX64 ||
        x->dtype == OX_COMPLEX128)
        return ox_node_err(node, OX_E_UNSUPPORTED, "element type of %s not supported",
                           ox_tensor_desc(x, buf, sizeof buf));
    struct rsz_params p;
    ox_status st = rsz_params(node, in, &p);
    if (st) return st;
    if (p.mode != RM_NEAREST && !ox_dtype_is_float(x->dtype) &&
        !(ox_dtype_is_int(x->dtype) && x->dtype != OX_BOOL))
        return ox_node_err(node, OX_E_UNSUPPORTED, "interpolating %s is not supported",
                           ox_tensor_desc(x, buf, sizeof buf));
    struct rsz_layout l;
    if (!rsz_layout(&p, x->dtype, ctx->n_threads, &l))
        return ox_node_err(node, OX_E_NOMEM, "resize tables too large");
    ox_set_shape(out[0], x->dtype, x->rank, p.out);
    ctx->scratch_bytes = l.total ? l.total : 8;
    return OX_OK;
}

ox_status ox_rsz_infer_resize(struct ox_infer_ctx *ctx, const struct ox_node *node,
                              const ox_tensor *const *in, ox_tensor *const *out) {
    return rsz_infer(ctx, node, in, out);
}

ox_status ox_rsz_infer_upsample(struct ox_infer_ctx *ctx, const struct ox_node *node,
                                const ox_tensor *const *in, ox_tensor *const *out) {
    return rsz_infer(ctx, node, in, out);
}

/* Store v into element i of an integer or float tensor (integers clamp, then truncate). */
static void store_f64(ox_tensor *t, int64_t i, double v) {
    if (ox_dtype_is_int(t->dtype)) {
        int64_t lo = INT64_MIN, hi = INT64_MAX;
        switch (t->dtype) {
        case OX_INT8: lo = INT8_MIN, hi = INT8_MAX; break;
        case OX_UINT8: lo = 0, hi = UINT8_MAX; break;
        case OX_INT16: lo = INT16_MIN, hi = INT16_MAX; break;
        case OX_UINT16: lo = 0, hi = UINT16_MAX; break;
        case OX_INT32: lo = INT32_MIN, hi = INT32_MAX; break;
        case OX_UINT32: lo = 0, hi = UINT32_MAX; break;
        case OX_UINT64: lo = 0; break;
        default: break;
        }
        if (isnan(v)) v = 0;
        int64_t k = v <= (double)lo ? lo : v >= (double)hi ? hi : (int64_t)v;
        ox_set_i64(t, i, k);
        return;
    }
    ox_set_f64(t, i, v);
}

/* float Resize of the last two axes (the others unchanged): per plane (one image and
 * channel, over the pool's threads), each input row the output needs is interpolated along
 * the last axis once, into the thread's rows (upsampling by 16 reuses each about 32 times),
 * then each output row is the weighted sum of its taps' rows: contiguous float loops the
 * compiler vectorizes. Weights are the same tables as rsz_run's, rounded to float, so results
 * agree with it to float rounding. Outputs whose position lies outside the input on either
 * axis (tf_crop_and_resize) take extrapolation_value. */
struct rsz_planes {
    const float *x;
    float *y;
    const struct rsz_params *p;
    const struct rsz_layout *l;
    char *sc;
    int32_t *const *cnt;
    int64_t *const *idx;
    double *const *w;
};

OX_HOT static void rsz_planes_piece(void *arg, int64_t b0, int64_t b1, int tid) {
    const struct rsz_planes *j = arg;
    const struct rsz_params *p = j->p;
    int h = p->rank - 2, wa = p->rank - 1;
    int64_t H = p->in[h], W = p->in[wa], OH = p->out[h], OW = p->out[wa];
    int th = p->taps[h], tw = p->taps[wa];
    const int32_t *cnt_h = j->cnt[h], *cnt_w = j->cnt[wa];
    const int64_t *idx_h = j->idx[h], *idx_w = j->idx[wa];
    const float *wh = (const float *)(j->sc + j->l->wf_h),
                *ww = (const float *)(j->sc + j->l->wf_w);
    float *rows = (float *)(j->sc + j->l->rows + (size_t)tid * j->l->rows_per_thread);
    int32_t *have = (int32_t *)(rows + H * OW); /* 1 + the plane whose row ih is in rows */
    float extrap = (float)p->extrap;
    bool w_outside = false;
    for (int64_t ow = 0; ow < OW; ow++) w_outside |= cnt_w[ow] == 0;
    for (int64_t ih = 0; ih < H; ih++) have[ih] = 0;
    for (int64_t b = b0; b < b1; b++) {
        const float *xp = j->x + b * H * W;
        float *yp = j->y + b * OH * OW;
        for (int64_t oh = 0; oh < OH; oh++) {
            float *yr = yp + oh * OW;
            int n = cnt_h[oh];
            if (n == 0) {
                for (int64_t ow = 0; ow < OW; ow++) yr[ow] = extrap;
                continue;
            }
            for (int t = 0; t < n; t++) {
                int64_t ih = idx_h[oh * th + t];
                float *row = rows + ih * OW;
                if (have[ih] != (int32_t)(b - b0 + 1)) { /* interpolate it along the last axis */
                    const float *xr = xp + ih * W;
                    for (int64_t ow = 0; ow < OW; ow++) {
                        const int64_t *ti = idx_w + ow * tw;
                        const float *wt = ww + ow * tw;
                        float sum = 0;
                        for (int k = 0; k < cnt_w[ow]; k++) sum += wt[k] * xr[ti[k]];
                        row[ow] = sum;
                    }
                    have[ih] = (int32_t)(b - b0 + 1);
                }
                float wv = wh[oh * th + t];
                if (t == 0)
                    for (int64_t ow = 0; ow < OW; ow++) yr[ow] = wv * row[ow];
                else
                    for (int64_t ow = 0; ow < OW; ow++) yr[ow] += wv * row[ow];
            }
            if (w_outside)
                for (int64_t ow = 0; ow < OW; ow++)
                    if (!cnt_w[ow]) yr[ow] = extrap;
        }
    }
}

static void rsz_planes(struct ox_pool *pool, struct rsz_planes *j) {
    const struct rsz_params *p = j->p;
    int h = p->rank - 2, wa = p->rank - 1;
    float *wh = (float *)(j->sc + j->l->wf_h), *ww = (float *)(j->sc + j->l->wf_w);
    for (int64_t k = 0; k < p->out[h] * p->taps[h]; k++) wh[k] = (float)j->w[h][k];
    for (int64_t k = 0; k < p->out[wa] * p->taps[wa]; k++) ww[k] = (float)j->w[wa][k];
    int64_t planes = 1;
    for (int d = 0; d < h; d++) planes *= p->out[d];
    ox_parallel_for(pool, planes, rsz_planes_piece, j);
}

static ox_status rsz_run(struct ox_kernel_ctx *ctx, const struct ox_node *node,
                         const ox_tensor *const *in, ox_tensor *const *out) {
    const ox_tensor *x = in[0];
    ox_tensor *y = out[0];
    struct rsz_params p;
    ox_status st = rsz_params(node, in, &p);
    if (st == OX_NEED_DATA)
        return ox_node_err(node, OX_E_INTERNAL, "scales/sizes have no data at run time");
    if (st) return st;
    int r = p.rank;
    struct rsz_layout l;
    if (!rsz_layout(&p, x->dtype, ox_pool_size(ctx->pool), &l) || l.total > ctx->scratch_bytes)
        return ox_node_err(node, OX_E_INTERNAL, "scratch too small");
    if (ox_tensor_numel(y) == 0) return OX_OK;
    char *sc = ctx->scratch;
    int32_t *cnt[OX_MAX_RANK];
    int64_t *tidx[OX_MAX_RANK];
    double *tw[OX_MAX_RANK];
    bool ident[OX_MAX_RANK];
    for (int d = 0; d < r; d++) {
        cnt[d] = (int32_t *)(sc + l.cnt[d]);
        tidx[d] = (int64_t *)(sc + l.idx[d]);
        tw[d] = (double *)(sc + l.w[d]);
        ident[d] = p.in[d] == p.out[d];
        int T = p.taps[d];
        for (int64_t j = 0; j < p.out[d]; j++) {
            cnt[d][j] = rsz_taps(&p, d, j, tidx[d] + j * T, tw[d] + j * T);
            if (cnt[d][j] != 1 || tidx[d][j * T] != j || tw[d][j * T] != 1) ident[d] = false;
        }
    }
    /* [lead: identity axes][f .. last: resized axes][tail: identity axes, `chunk` elements]
     * One output row is the last resized axis times the tail; the resized axes before it are
     * walked with an odometer, and each of their tap combinations adds a weighted row. */
    int f = 0, last = r - 1;
    while (f < r && ident[f]) f++;
    while (last >= f && ident[last]) last--;
    size_t es = ox_dtype_size(x->dtype);
    if (f == r) { /* nothing changes */
        memcpy(y->data, x->data, (size_t)ox_tensor_numel(x) * es);
        return OX_OK;
    }
    if (last == r - 1 && f >= r - 2 && l.rows_per_thread) {
        struct rsz_planes j = {x->data, y->data, &p, &l, sc, cnt, tidx, tw};
        rsz_planes(ctx->pool, &j);
        return OX_OK;
    }
    int64_t lead = 1, chunk = 1, in_block = 1, out_block = 1;
    for (int d = 0; d < f; d++) lead *= p.out[d];
    for (int d = last + 1; d < r; d++) chunk *= p.out[d];
    for (int d = f; d < r; d++) in_block *= p.in[d], out_block *= p.out[d];
    int64_t n_last = p.out[last], row_len = n_last * chunk, t_last = p.taps[last];
    if (row_len > l.row_max) return ox_node_err(node, OX_E_INTERNAL, "scratch too small");
    int64_t in_stride[OX_MAX_RANK], s = 1;
    for (int d = r - 1; d >= 0; d--) in_stride[d] = s, s *= p.in[d];
    int no = last - f; /* resized axes before the last one */
    bool is_f32 = x->dtype == OX_FLOAT;
    double *acc = (double *)(sc + l.acc);
    const int32_t *cnt_l = cnt[last];
    const int64_t *idx_l = tidx[last];
    const double *w_l = tw[last];
    int64_t jidx[OX_MAX_RANK] = {0}, tix[OX_MAX_RANK];
    for (int64_t b = 0; b < lead; b++) {
        int64_t x_base = b * in_block;
        for (int q = 0; q < no; q++) jidx[q] = 0;
        for (int64_t orow = 0; orow < out_block / row_len; orow++) {
            int64_t y_row = b * out_block + orow * row_len;
            bool outside = false;
            for (int q = 0; q < no; q++) outside |= cnt[f + q][jidx[q]] == 0;
            if (outside) {
                for (int64_t c = 0; c < row_len; c++) store_f64(y, y_row + c, p.extrap);
            } else if (p.mode == RM_NEAREST) {
                int64_t off = x_base;
                for (int q = 0; q < no; q++)
                    off += tidx[f + q][jidx[q] * p.taps[f + q]] * in_stride[f + q];
                char *yp = (char *)y->data + (size_t)y_row * es;
                const char *xp = (const char *)x->data + (size_t)off * es;
                if (chunk == 1 && es == 4) {
                    for (int64_t j = 0; j < n_last; j++)
                        if (cnt_l[j]) ((uint32_t *)yp)[j] = ((const uint32_t *)xp)[idx_l[j]];
                } else {
                    for (int64_t j = 0; j < n_last; j++)
                        if (cnt_l[j])
                            memcpy(yp + (size_t)(j * chunk) * es,
                                   xp + (size_t)(idx_l[j] * chunk) * es, (size_t)chunk * es);
                }
                for (int64_t j = 0; j < n_last; j++)
                    if (!cnt_l[j])
                        for (int64_t c = 0; c < chunk; c++)
                            store_f64(y, y_row + j * chunk + c, p.extrap);
            } else {
                for (int64_t c = 0; c < row_len; c++) acc[c] = 0;
                for (int q = 0; q < no; q++) tix[q] = 0;
                for (;;) {
                    double wc = 1;
                    int64_t off = x_base;
                    for (int q = 0; q < no; q++) {
                        int64_t k = jidx[q] * p.taps[f + q] + tix[q];
                        wc *= tw[f + q][k];
                        off += tidx[f + q][k] * in_stride[f + q];
                    }
                    for (int64_t j = 0; j < n_last; j++) {
                        int n = cnt_l[j];
                        const int64_t *ti = idx_l + j * t_last;
                        const double *wt = w_l + j * t_last;
                        double *a = acc + j * chunk;
                        if (is_f32 && chunk == 1) {
                            const float *xp = (const float *)x->data + off;
                            double sum = 0;
                            for (int t = 0; t < n; t++) sum += wt[t] * xp[ti[t]];
                            a[0] += wc * sum;
                        } else if (is_f32) {
                            for (int t = 0; t < n; t++) {
                                const float *xp = (const float *)x->data + off + ti[t] * chunk;
                                double wv = wc * wt[t];
                                for (int64_t c = 0; c < chunk; c++) a[c] += wv * xp[c];
                            }
                        } else {
                            for (int t = 0; t < n; t++) {
                                double wv = wc * wt[t];
                                for (int64_t c = 0; c < chunk; c++)
                                    a[c] += wv * ox_get_f64(x, off + ti[t] * chunk + c);
                            }
                        }
                    }
                    int q = no - 1;
                    for (; q >= 0; q--) {
                        if (++tix[q] < cnt[f + q][jidx[q]]) break;
                        tix[q] = 0;
                    }
                    if (q < 0) break;
                }
                for (int64_t j = 0; j < n_last; j++) {
                    double *a = acc + j * chunk;
                    if (!cnt_l[j])
                        for (int64_t c = 0; c < chunk; c++) a[c] = p.extrap;
                }
                if (is_f32) {
                    float *yp = (float *)y->data + y_row;
                    for (int64_t c = 0; c < row_len; c++) yp[c] = (float)acc[c];
                } else {
                    for (int64_t c = 0; c < row_len; c++) store_f64(y, y_row + c, acc[c]);
                }
            }
            for (int q = no - 1; q >= 0; q--) {
                if (++jidx[q] < p.out[f + q]) break;
                jidx[q] = 0;
            }
        }
    }
    return OX_OK;
}

ox_status ox_rsz_cpu_resize(struct ox_kernel_ctx *ctx, const struct ox_node *node,
                            const ox_tensor *const *in, ox_tensor *const *out) {
    return rsz_run(ctx, node, in, out);
}

ox_status ox_rsz_cpu_upsample(struct ox_kernel_ctx *ctx, const struct ox_node *node,
                              const ox_tensor *const *in, ox_tensor *const *out) {
    return rsz_run(ctx, node, in, out);
}
