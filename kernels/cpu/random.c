/* Random generators: RandomNormal, RandomUniform, RandomNormalLike, RandomUniformLike (1 on),
 * Bernoulli (15 on) and Multinomial (7 on).
 *
 * Each run draws from MT19937 as numpy's legacy RandomState runs it (ox_mt19937), seeded with
 * int(seed) as the ONNX reference does, so a seeded node gives the reference's values on
 * every run and machine. Without a seed the stream starts from a fixed default mixed with
 * the node's name and op, so runs are reproducible and two unseeded nodes differ. The rows
 * are flagged OX_OP_NONDETERMINISTIC so that they are never folded at plan time.
 */
#include "kernels/op.h"

/* Seed from the node: int(seed) as the ONNX reference seeds numpy, else a fixed default mixed
 * with the node's name and op, so unseeded runs repeat and two unseeded nodes differ. */
static void rng_seed(struct ox_mt19937 *r, const struct ox_node *n) {
    const struct ox_attr *a = ox_node_attr(n, "seed");
    uint32_t x;
    if (a && a->type == OX_ATTR_FLOAT) {
        /* a seed beyond int64 or NaN (numpy would refuse it) must not reach the cast */
        double f = a->f;
        x = f > -9.2e18 && f < 9.2e18 ? (uint32_t)(int64_t)f : 0;
    } else {
        x = 0x6f6e6e78u; /* "onnx" */
        for (const char *p = n->name ? n->name : ""; *p; p++)
            x = (x ^ (unsigned char)*p) * 16777619u;
        for (const char *p = n->op_type; *p; p++) x = (x ^ (unsigned char)*p) * 16777619u;
    }
    ox_mt_seed(r, x);
}

static bool is_rand_float(ox_dtype dt) {
    return dt == OX_FLOAT || dt == OX_DOUBLE || dt == OX_FLOAT16 || dt == OX_BFLOAT16;
}

/* ---- RandomNormal, RandomUniform and their *Like forms ----------------------------------- */

ox_status ox_sig_infer_random(struct ox_infer_ctx *ctx, const struct ox_node *n,
                              const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    bool like = strstr(n->op_type, "Like") != NULL;
    ox_dtype dt;
    if (like) {
        const ox_tensor *x = ox_in(n, in, 0);
        if (!x) return ox_node_err(n, OX_E_INVALID, "input is required");
        dt = (ox_dtype)ox_attr_int(n, "dtype", x->dtype);
        ox_set_shape(out[0], dt, x->rank, x->dims);
    } else {
        const int64_t *shape;
        int r = ox_attr_ints(n, "shape", &shape);
        if (r < 0) return ox_node_err(n, OX_E_INVALID, "attribute 'shape' is required");
        if (r > OX_MAX_RANK)
            return ox_node_err(n, OX_E_UNSUPPORTED, "rank %d: at most %d", r, OX_MAX_RANK);
        for (int i = 0; i < r; i++)
            if (shape[i] < 0)
                return ox_node_err(n, OX_E_INVALID, "shape has a negative dim %lld",
                                   (long long)shape[i]);
        dt = (ox_dtype)ox_attr_int(n, "dtype", OX_FLOAT);
        ox_set_shape(out[0], dt, r, shape);
    }
    if (!is_rand_float(dt))
        return ox_node_err(n, OX_E_UNSUPPORTED, "dtype %s: expected a float type",
                           ox_dtype_name(dt));
    return OX_OK;
}

ox_status ox_sig_cpu_random(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                            const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    (void)in;
    ox_tensor *y = out[0];
    struct ox_mt19937 r;
    rng_seed(&r, n);
    int64_t total = ox_tensor_numel(y);
    if (strncmp(n->op_type, "RandomUniform", 13) == 0) {
        double lo = ox_attr_float(n, "low", 0.0f), hi = ox_attr_float(n, "high", 1.0f);
        for (int64_t i = 0; i < total; i++) ox_set_f64(y, i, lo + (hi - lo) * ox_mt_double(&r));
        return OX_OK;
    }
    double mean = ox_attr_float(n, "mean", 0.0f), scale = ox_attr_float(n, "scale", 1.0f);
    for (int64_t i = 0; i < total; i++) ox_set_f64(y, i, mean + scale * ox_mt_gauss(&r));
    return OX_OK;
}

/* ---- Bernoulli ------------------------------------------------------------------------- */

static bool is_bernoulli_out(ox_dtype dt) {
    return is_rand_float(dt) || dt == OX_BOOL ||
           (ox_dtype_is_int(dt) && dt != OX_INT4 && dt != OX_UINT4 && dt != OX_INT2 &&
            dt != OX_UINT2);
}

ox_status ox_sig_infer_bernoulli(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                 const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    const ox_tensor *x = ox_in(n, in, 0);
    if (!x) return ox_node_err(n, OX_E_INVALID, "input is required");
    if (!is_rand_float(x->dtype))
        return ox_node_err(n, OX_E_UNSUPPORTED, "input type %s: expected a float type",
                           ox_dtype_name(x->dtype));
    ox_dtype dt = (ox_dtype)ox_attr_int(n, "dtype", x->dtype);
    if (!is_bernoulli_out(dt))
        return ox_node_err(n, OX_E_UNSUPPORTED, "dtype %s is not supported", ox_dtype_name(dt));
    ox_set_shape(out[0], dt, x->rank, x->dims);
    return OX_OK;
}

ox_status ox_sig_cpu_bernoulli(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                               const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    const ox_tensor *x = in[0];
    ox_tensor *y = out[0];
    struct ox_mt19937 r;
    rng_seed(&r, n);
    int64_t total = ox_tensor_numel(x);
    for (int64_t i = 0; i < total; i++) {
        double p = ox_get_f64(x, i);
        if (!(p >= 0.0 && p <= 1.0))
            return ox_node_err(n, OX_E_INVALID, "probability %g at %lld is outside [0, 1]", p,
                               (long long)i);
        /* numpy's binomial(1, p) by inversion: one draw u; 1 when u > 1-p (p <= 1/2), else
         * 1 unless u > p */
        double u = ox_mt_double(&r);
        ox_set_f64(y, i, p <= 0.5 ? (u > 1.0 - p ? 1.0 : 0.0) : (u > p ? 0.0 : 1.0));
    }
    return OX_OK;
}

/* ---- Multinomial ------------------------------------------------------------------------ */

ox_status ox_sig_infer_multinomial(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                   const ox_tensor *const *in, ox_tensor *const *out) {
    const ox_tensor *x = ox_in(n, in, 0);
    if (!x) return ox_node_err(n, OX_E_INVALID, "input is required");
    if (!is_rand_float(x->dtype))
        return ox_node_err(n, OX_E_UNSUPPORTED, "input type %s: expected a float type",
                           ox_dtype_name(x->dtype));
    if (x->rank != 2)
        return ox_node_err(n, OX_E_SHAPE, "input must be [batch_size, class_size], got rank %d",
                           x->rank);
    int64_t samples = ox_attr_int(n, "sample_size", 1);
    if (samples < 0)
        return ox_node_err(n, OX_E_INVALID, "sample_size %lld: expected >= 0", (long long)samples);
    ox_dtype dt = (ox_dtype)ox_attr_int(n, "dtype", OX_INT32);
    if (dt != OX_INT32 && dt != OX_INT64)
        return ox_node_err(n, OX_E_UNSUPPORTED, "dtype %s: expected int32 or int64",
                           ox_dtype_name(dt));
    int64_t dims[2] = {x->dims[0], samples};
    ox_set_shape(out[0], dt, 2, dims);
    size_t bytes;
    if (!ox_mul_size((size_t)x->dims[1], sizeof(double), &bytes))
        return ox_node_err(n, OX_E_NOMEM, "class_size too large");
    ctx->scratch_bytes = bytes;
    return OX_OK;
}

ox_status ox_sig_cpu_multinomial(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                                 const ox_tensor *const *in, ox_tensor *const *out) {
    const ox_tensor *x = in[0];
    ox_tensor *y = out[0];
    int64_t B = x->dims[0], C = x->dims[1], S = y->dims[1];
    if (B * S == 0) return OX_OK;
    if (C == 0) return ox_node_err(n, OX_E_SHAPE, "class_size is 0: nothing to sample");
    if (ctx->scratch_bytes < (size_t)C * sizeof(double))
        return ox_node_err(n, OX_E_INTERNAL, "scratch smaller than inferred");
    double *cdf = ctx->scratch;
    struct ox_mt19937 r;
    rng_seed(&r, n);
    for (int64_t b = 0; b < B; b++) {
        /* the inputs are unnormalised log-probabilities */
        double mx = -INFINITY, sum = 0;
        for (int64_t c = 0; c < C; c++) {
            double v = ox_get_f64(x, b * C + c);
            if (v > mx) mx = v;
        }
        for (int64_t c = 0; c < C; c++) {
            double v = ox_get_f64(x, b * C + c);
            sum += mx == INFINITY ? (v == INFINITY ? 1.0 : 0.0) : exp(v - mx);
            cdf[c] = sum;
        }
        if (!(sum > 0) || !isfinite(sum))
            return ox_node_err(n, OX_E_INVALID, "row %lld has no finite probability mass",
                               (long long)b);
        for (int64_t s = 0; s < S; s++) {
            double u = ox_mt_double(&r) * sum;
            int64_t lo = 0, hi = C - 1; /* first c with cdf[c] > u */
            while (lo < hi) {
                int64_t mid = lo + (hi - lo) / 2;
                if (cdf[mid] > u)
                    hi = mid;
                else
                    lo = mid + 1;
            }
            ox_set_i64(y, b * S + s, lo);
        }
    }
    return OX_OK;
}
