/* Normalizations and the softmax family: BatchNormalization, InstanceNormalization,
 * LayerNormalization, LRN, Softmax, LogSoftmax, Hardmax, and Dropout. float32 has direct
 * loops; other float types go through double and round on store. */
#include "kernels/op.h"

#include <float.h>

/* Mean and population variance of x[base .. base+count), two passes in double. */
static void mean_var(const ox_tensor *x, int64_t base, int64_t count, double *mean, double *var) {
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < count; i++) sum += ox_ld(x, base + i);
    double m = sum / (double)count;
    for (int64_t i = 0; i < count; i++) {
        double d = ox_ld(x, base + i) - m;
        sq += d * d;
    }
    *mean = m;
    *var = sq / (double)count;
}

static ox_status need_float(const struct ox_node *n, const ox_tensor *x) {
    if (!x) return ox_node_err(n, OX_E_INVALID, "missing input");
    if (x->dtype != OX_FLOAT && x->dtype != OX_DOUBLE && x->dtype != OX_FLOAT16 &&
        x->dtype != OX_BFLOAT16)
        return ox_node_err(n, OX_E_UNSUPPORTED, "element type %s: expected a float type",
                           ox_dtype_name(x->dtype));
    return OX_OK;
}

/* ---- BatchNormalization ---------------------------------------------------------------- */

static bool bn_training(const struct ox_node *n) {
    return n->opset >= 14 && ox_attr_int(n, "training_mode", 0);
}

ox_status ox_nn_infer_batchnorm(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    const ox_tensor *x = ox_in(n, in, 0);
    ox_status s = need_float(n, x);
    if (s) return s;
    if (x->rank < 2)
        return ox_node_err(n, OX_E_SHAPE, "input rank %d: expected [N, C, ...]", x->rank);
    if (n->opset < 9 && ox_attr_int(n, "spatial", 1) == 0) /* spatial exists until opset 9 */
        return ox_node_err(n, OX_E_UNSUPPORTED, "spatial=0 is not supported");
    for (int i = 1; i <= 4; i++) {
        const ox_tensor *p = ox_in(n, in, i);
        if (!p || p->rank != 1 || p->dims[0] != x->dims[1])
            return ox_node_err(n, OX_E_SHAPE, "input %d must be [%lld]", i, (long long)x->dims[1]);
    }
    ox_set_like(out[0], x);
    for (int k = 1; k < n->n_outputs; k++)
        if (out[k]) {
            if (!bn_training(n))
                return ox_node_err(n, OX_E_UNSUPPORTED, "outputs beyond Y need training_mode=1");
            if (k <= 2)
                ox_set_like(out[k], in[k + 2]);
            else
                ox_set_like(out[k], in[3]);
        }
    return OX_OK;
}

ox_status ox_nn_cpu_batchnorm(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                              const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    const ox_tensor *x = in[0], *scale = in[1], *bias = in[2], *mean = in[3], *var = in[4];
    double eps = ox_attr_float(n, "epsilon", 1e-5f);
    double momentum = ox_attr_float(n, "momentum", 0.9f);
    int64_t N = x->dims[0], C = x->dims[1], S = 1;
    for (int i = 2; i < x->rank; i++) S *= x->dims[i];
    bool train = bn_training(n);
    for (int64_t c = 0; c < C; c++) {
        double m = ox_get_f64(mean, c), v = ox_get_f64(var, c);
        if (train) { /* batch statistics (population variance) */
            double sum = 0, sq = 0;
            for (int64_t b = 0; b < N; b++)
                for (int64_t i = 0; i < S; i++) sum += ox_ld(x, (b * C + c) * S + i);
            double bm = sum / (double)(N * S);
            for (int64_t b = 0; b < N; b++)
                for (int64_t i = 0; i < S; i++) {
                    double d = ox_ld(x, (b * C + c) * S + i) - bm;
                    sq += d * d;
                }
            double bv = sq / (double)(N * S);
            if (n->n_outputs > 1 && out[1])
                ox_set_f64(out[1], c, m * momentum + bm * (1 - momentum));
            if (n->n_outputs > 2 && out[2])
                ox_set_f64(out[2], c, v * momentum + bv * (1 - momentum));
            m = bm;
            v = bv;
        }
        double a = ox_get_f64(scale, c) / sqrt(v + eps), b0 = ox_get_f64(bias, c) - m * a;
        for (int64_t b = 0; b < N; b++) {
            int64_t base = (b * C + c) * S;
            if (x->dtype == OX_FLOAT) {
                const float *xs = (const float *)x->data + base;
                float *ys = (float *)out[0]->data + base, fa = (float)a, fb = (float)b0;
                for (int64_t i = 0; i < S; i++) ys[i] = xs[i] * fa + fb;
            } else {
                for (int64_t i = 0; i < S; i++)
                    ox_st(out[0], base + i, ox_get_f64(x, base + i) * a + b0);
            }
        }
    }
    return OX_OK;
}

/* ---- InstanceNormalization ------------------------------------------------------------- */

ox_status ox_nn_infer_instancenorm(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                   const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    const ox_tensor *x = ox_in(n, in, 0);
    ox_status s = need_float(n, x);
    if (s) return s;
    if (x->rank < 3)
        return ox_node_err(n, OX_E_SHAPE, "input rank %d: expected [N, C, D...]", x->rank);
    for (int i = 1; i <= 2; i++) {
        const ox_tensor *p = ox_in(n, in, i);
        if (!p || p->rank != 1 || p->dims[0] != x->dims[1])
            return ox_node_err(n, OX_E_SHAPE, "input %d must be [%lld]", i, (long long)x->dims[1]);
    }
    ox_set_like(out[0], x);
    return OX_OK;
}

ox_status ox_nn_cpu_instancenorm(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                                 const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    const ox_tensor *x = in[0];
    double eps = ox_attr_float(n, "epsilon", 1e-5f);
    int64_t N = x->dims[0], C = x->dims[1], S = 1;
    for (int i = 2; i < x->rank; i++) S *= x->dims[i];
    for (int64_t b = 0; b < N; b++)
        for (int64_t c = 0; c < C; c++) {
            int64_t base = (b * C + c) * S;
            double m, var;
            mean_var(x, base, S, &m, &var);
            double a = ox_get_f64(in[1], c) / sqrt(var + eps);
            double b0 = ox_get_f64(in[2], c);
            for (int64_t i = 0; i < S; i++)
                ox_st(out[0], base + i, (ox_ld(x, base + i) - m) * a + b0);
        }
    return OX_OK;
}

/* ---- LayerNormalization (opset 17) ----------------------------------------------------- */

ox_status ox_nn_infer_layernorm(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    const ox_tensor *x = ox_in(n, in, 0), *scale = ox_in(n, in, 1), *bias = ox_in(n, in, 2);
    ox_status s = need_float(n, x);
    if (s) return s;
    if (!scale) return ox_node_err(n, OX_E_INVALID, "input Scale is required");
    int axis;
    if ((s = ox_norm_axis(n, ox_attr_int(n, "axis", -1), x->rank, &axis))) return s;
    /* Scale and B broadcast (unidirectionally) to X's dims from `axis` on */
    const ox_tensor *ps[2] = {scale, bias};
    for (int k = 0; k < 2; k++) {
        const ox_tensor *p = ps[k];
        if (!p) continue;
        if (!ox_tail_broadcasts(p, x, axis)) {
            char sp[256], sx[256];
            return ox_node_err(n, OX_E_SHAPE,
                               "%s %s does not broadcast to the normalized dims of %s "
                               "(axis %d)",
                               k ? "B" : "Scale", ox_tensor_desc(p, sp, sizeof sp),
                               ox_tensor_desc(x, sx, sizeof sx), axis);
        }
    }
    ox_set_like(out[0], x);
    int64_t dims[OX_MAX_RANK];
    for (int i = 0; i < x->rank; i++) dims[i] = i < axis ? x->dims[i] : 1;
    ox_dtype stash = (ox_dtype)ox_attr_int(n, "stash_type", OX_FLOAT);
    for (int k = 1; k < n->n_outputs && k < 3; k++)
        if (out[k]) ox_set_shape(out[k], stash, x->rank, dims);
    return OX_OK;
}

/* Mean and variance of a float row in double, in 8 interleaved partial sums (a short
 * dependency chain; the same sums whatever the thread). */
OX_HOT static void mean_var_f32(const float *x, int64_t count, double *mean, double *var) {
    double s[8] = {0}, q[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= count; i += 8)
        for (int k = 0; k < 8; k++) s[k] += x[i + k];
    double sum = 0;
    for (; i < count; i++) sum += x[i];
    for (int k = 0; k < 8; k++) sum += s[k];
    double m = sum / (double)count;
    for (i = 0; i + 8 <= count; i += 8)
        for (int k = 0; k < 8; k++) {
            double d = x[i + k] - m;
            q[k] += d * d;
        }
    double sq = 0;
    for (; i < count; i++) sq += (x[i] - m) * (x[i] - m);
    for (int k = 0; k < 8; k++) sq += q[k];
    *mean = m;
    *var = sq / (double)count;
}

struct ln_job {
    const struct ox_node *n;
    const ox_tensor *x, *scale, *bias;
    ox_tensor *const *out;
    int axis;
    int64_t inner;
    double eps;
    bool fast; /* float, scale and bias exactly [inner] */
};

OX_HOT static void ln_rows(void *arg, int64_t b, int64_t e, int tid) {
    (void)tid;
    const struct ln_job *j = arg;
    const ox_tensor *x = j->x, *scale = j->scale, *bias = j->bias;
    int64_t inner = j->inner;
    for (int64_t o = b; o < e; o++) {
        int64_t base = o * inner;
        double m, var;
        if (j->fast)
            mean_var_f32((const float *)x->data + base, inner, &m, &var);
        else
            mean_var(x, base, inner, &m, &var);
        double inv = 1.0 / sqrt(var + j->eps);
        if (j->fast) {
            const float *xs = (const float *)x->data + base, *sc = scale->data;
            const float *bs = bias ? bias->data : NULL;
            float *ys = (float *)j->out[0]->data + base, fm = (float)m, fi = (float)inv;
            for (int64_t k = 0; k < inner; k++)
                ys[k] = (xs[k] - fm) * fi * sc[k] + (bs ? bs[k] : 0.0f);
        } else {
            for (int64_t k = 0; k < inner; k++) {
                double v = (ox_ld(x, base + k) - m) * inv *
                           ox_get_f64(scale, ox_tail_index(scale, x, j->axis, k));
                if (bias) v += ox_get_f64(bias, ox_tail_index(bias, x, j->axis, k));
                ox_st(j->out[0], base + k, v);
            }
        }
        if (j->n->n_outputs > 1 && j->out[1]) ox_set_f64(j->out[1], o, m);
        if (j->n->n_outputs > 2 && j->out[2]) ox_set_f64(j->out[2], o, inv);
    }
}

ox_status ox_nn_cpu_layernorm(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                              const ox_tensor *const *in, ox_tensor *const *out) {
    const ox_tensor *x = in[0], *scale = in[1], *bias = ox_in(n, in, 2);
    int axis;
    ox_status s = ox_norm_axis(n, ox_attr_int(n, "axis", -1), x->rank, &axis);
    if (s) return s;
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < x->rank; i++) *(i < axis ? &outer : &inner) *= x->dims[i];
    bool plain = scale->rank == x->rank - axis || ox_tensor_numel(scale) == inner;
    plain = plain && ox_tensor_numel(scale) == inner && (!bias || ox_tensor_numel(bias) == inner);
    bool f32 =
        x->dtype == OX_FLOAT && scale->dtype == OX_FLOAT && (!bias || bias->dtype == OX_FLOAT);
    struct ln_job j = {
        n, x, scale, bias, out, axis, inner, ox_attr_float(n, "epsilon", 1e-5f), f32 && plain};
    if (outer * inner < 16384)
        ln_rows(&j, 0, outer, 0);
    else
        ox_parallel_for(ctx->pool, outer, ln_rows, &j);
    return OX_OK;
}

/* ---- SkipLayerNormalization (ai.onnxexec) ---------------------------------------------- */

/* Inputs X, Skip, Scale, B (optional); attributes axis, epsilon as LayerNormalization's, and
 * skip_perm (optional: a permutation keeping the last axis).
 * Y = LayerNormalization(Add(X, Transpose(Skip, skip_perm)), Scale, B): the sum broadcast and
 * rounded to the element type as Add does, then normalized (graph/optimize.c makes it from a
 * residual Add that only the LayerNormalization reads, and a Transpose only the Add read).
 * Through the ops' own rows: Skip transposed into scratch, the sum in Y's memory. */

/* The Add and the LayerNormalization that n stands for (ln_ins: {0, 1, 2} or {0, 1, -1}). */
static void skip_ln_nodes(const struct ox_node *n, struct ox_node *add, struct ox_node *ln,
                          int *ln_ins) {
    memset(add, 0, sizeof *add);
    add->name = n->name;
    add->domain = "";
    add->op_type = "Add";
    add->opset = 14;
    add->n_inputs = 2;
    add->inputs = ln_ins; /* only counted */
    add->n_outputs = 1;
    *ln = *n;
    ln->op_type = "LayerNormalization";
    ln->n_inputs = n->n_inputs > 3 ? 3 : 2;
    ln->inputs = ln_ins;
    ln->n_outputs = 1;
    ln_ins[0] = 0, ln_ins[1] = 1, ln_ins[2] = ln->n_inputs > 2 && n->inputs[3] >= 0 ? 2 : -1;
}

static ox_status skip_ln(struct ox_infer_ctx *ictx, struct ox_kernel_ctx *kctx,
                         const struct ox_node *n, const ox_tensor *const *in,
                         ox_tensor *const *out) {
    const ox_tensor *x = ox_in(n, in, 0), *skip = ox_in(n, in, 1);
    if (!x || !skip || n->n_inputs < 3 || !in[2])
        return ox_node_err(n, OX_E_INVALID, "inputs X, Skip and Scale are required");
    if (n->n_outputs != 1 || !out[0])
        return ox_node_err(n, OX_E_INVALID, "one output, Y, expected");
    struct ox_node add, ln;
    int ins[3];
    skip_ln_nodes(n, &add, &ln, ins);
    const struct ox_op *a = ox_op_find("", "Add", 14);
    ox_tensor moved; /* Skip transposed by skip_perm, in scratch */
    size_t scratch = 0;
    const struct ox_attr *perm = ox_node_attr(n, "skip_perm");
    if (perm) {
        if (perm->type != OX_ATTR_INTS || perm->n != skip->rank || perm->n < 1 ||
            perm->ints[perm->n - 1] != perm->n - 1)
            return ox_node_err(n, OX_E_INVALID,
                               "skip_perm: a permutation of Skip's %d axes keeping the last "
                               "expected",
                               skip->rank);
        struct ox_attr pa = *perm;
        pa.name = "perm";
        struct ox_node tn = {.name = n->name,
                             .domain = "",
                             .op_type = "Transpose",
                             .opset = 13,
                             .n_inputs = 1,
                             .inputs = ins,
                             .n_outputs = 1,
                             .outputs = ins,
                             .attrs = &pa,
                             .n_attrs = 1};
        const struct ox_op *t = ox_op_find("", "Transpose", 13);
        moved = *skip;
        moved.data = kctx ? kctx->scratch : NULL;
        ox_tensor *mo = &moved;
        ox_status st = t->infer(&(struct ox_infer_ctx){.n_threads = 1}, &tn, &skip, &mo);
        if (st) return st;
        size_t bytes;
        if (!ox_tensor_bytes(moved.dtype, moved.rank, moved.dims, &bytes))
            return ox_node_err(n, OX_E_NOMEM, "Skip's size overflows");
        if (ictx) scratch = bytes;
        if (kctx && (st = t->cpu(kctx, &tn, &skip, &mo))) return st;
        skip = &moved;
    }
    const ox_tensor *ain[2] = {x, skip}, *lin[3] = {out[0], in[2], ox_in(n, in, 3)};
    ox_status st = ictx ? a->infer(ictx, &add, ain, out) : a->cpu(kctx, &add, ain, out);
    if (st) return st;
    if (!ictx) return ox_nn_cpu_layernorm(kctx, &ln, lin, out);
    st = ox_nn_infer_layernorm(ictx, &ln, lin, out);
    if (ictx->scratch_bytes < scratch) ictx->scratch_bytes = scratch;
    return st;
}

ox_status ox_nn_infer_skip_layernorm(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                     const ox_tensor *const *in, ox_tensor *const *out) {
    return skip_ln(ctx, NULL, n, in, out);
}

ox_status ox_nn_cpu_skip_layernorm(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                                   const ox_tensor *const *in, ox_tensor *const *out) {
    return skip_ln(NULL, ctx, n, in, out);
}

/* ---- LRN ------------------------------------------------------------------------------- */

ox_status ox_nn_infer_lrn(struct ox_infer_ctx *ctx, const struct ox_node *n,
                          const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    const ox_tensor *x = ox_in(n, in, 0);
    ox_status s = need_float(n, x);
    if (s) return s;
    if (x->rank < 3)
        return ox_node_err(n, OX_E_SHAPE, "input rank %d: expected [N, C, D...]", x->rank);
    if (ox_attr_int(n, "size", 0) <= 0)
        return ox_node_err(n, OX_E_INVALID, "attribute size must be positive");
    ox_set_like(out[0], x);
    return OX_OK;
}

ox_status ox_nn_cpu_lrn(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                        const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    const ox_tensor *x = in[0];
    double alpha = ox_attr_float(n, "alpha", 1e-4f), beta = ox_attr_float(n, "beta", 0.75f);
    double bias = ox_attr_float(n, "bias", 1.0f);
    int64_t size = ox_attr_int(n, "size", 1);
    int64_t N = x->dims[0], C = x->dims[1], S = 1;
    for (int i = 2; i < x->rank; i++) S *= x->dims[i];
    int64_t lo = (size - 1) / 2, hi = size - 1 - lo; /* floor below, ceil above */
    for (int64_t b = 0; b < N; b++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t i = 0; i < S; i++) {
                double sq = 0;
                for (int64_t k = c - lo; k <= c + hi; k++)
                    if (k >= 0 && k < C) {
                        double v = ox_ld(x, (b * C + k) * S + i);
                        sq += v * v;
                    }
                int64_t idx = (b * C + c) * S + i;
                ox_st(out[0], idx, ox_ld(x, idx) / pow(bias + alpha / (double)size * sq, beta));
            }
    return OX_OK;
}

/* ---- Softmax, LogSoftmax, Hardmax ------------------------------------------------------ */

enum { SM_SOFT, SM_LOG, SM_HARD };

/* Before opset 13 the input is coerced to 2-D at `axis` (default 1); from 13 the op runs
 * along `axis` (default -1). Either way: outer x axis-length x inner. */
static ox_status sm_split(const struct ox_node *n, const ox_tensor *x, int64_t *outer, int64_t *len,
                          int64_t *inner) {
    int axis;
    bool legacy = n->opset < 13;
    if (x->rank == 0) {
        *outer = *len = *inner = 1;
        return OX_OK;
    }
    ox_status s = ox_norm_axis(n, ox_attr_int(n, "axis", legacy ? 1 : -1), x->rank, &axis);
    if (s) return s;
    *outer = *len = *inner = 1;
    for (int i = 0; i < x->rank; i++) {
        if (i < axis)
            *outer *= x->dims[i];
        else if (legacy || i == axis)
            *len *= x->dims[i];
        else
            *inner *= x->dims[i];
    }
    return OX_OK;
}

ox_status ox_nn_infer_softmax(struct ox_infer_ctx *ctx, const struct ox_node *n,
                              const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    const ox_tensor *x = ox_in(n, in, 0);
    ox_status s = need_float(n, x);
    if (s) return s;
    int64_t o, l, i;
    if ((s = sm_split(n, x, &o, &l, &i))) return s;
    ox_set_like(out[0], x);
    return OX_OK;
}

struct softmax_rows {
    const float *x;
    float *y;
    int64_t len;
};

static void softmax_rows_piece(void *arg, int64_t b, int64_t e, int tid) {
    (void)tid;
    const struct softmax_rows *j = arg;
    for (int64_t o = b; o < e; o++) ox_softmax_row(j->x + o * j->len, j->y + o * j->len, j->len);
}

static ox_status softmax_run(struct ox_pool *pool, const struct ox_node *n, const ox_tensor *x,
                             ox_tensor *y, int kind) {
    int64_t outer, len, inner;
    ox_status s = sm_split(n, x, &outer, &len, &inner);
    if (s) return s;
    bool f32 = x->dtype == OX_FLOAT;
    if (f32 && inner == 1 && kind == SM_SOFT) { /* rows of the last axis, over the pool */
        struct softmax_rows j = {x->data, y->data, len};
        ox_parallel_for(pool, outer, softmax_rows_piece, &j);
        return OX_OK;
    }
    for (int64_t o = 0; o < outer; o++)
        for (int64_t in = 0; in < inner; in++) {
            int64_t base = o * len * inner + in;
            if (f32 && inner == 1 && kind != SM_HARD) {
                const float *xs = (const float *)x->data + base;
                float *ys = (float *)y->data + base, mx = -INFINITY, sum = 0;
                for (int64_t j = 0; j < len; j++) mx = xs[j] > mx ? xs[j] : mx;
                if (kind == SM_SOFT) {
                    for (int64_t j = 0; j < len; j++) sum += ys[j] = expf(xs[j] - mx);
                    float r = 1.0f / sum;
                    for (int64_t j = 0; j < len; j++) ys[j] *= r;
                } else {
                    for (int64_t j = 0; j < len; j++) sum += expf(xs[j] - mx);
                    float ls = logf(sum);
                    for (int64_t j = 0; j < len; j++) ys[j] = xs[j] - mx - ls;
                }
                continue;
            }
            double mx = -INFINITY, sum = 0;
            int64_t arg = 0;
            for (int64_t j = 0; j < len; j++) {
                double v = ox_ld(x, base + j * inner);
                if (v > mx) mx = v, arg = j;
            }
            if (kind == SM_HARD) {
                for (int64_t j = 0; j < len; j++) ox_st(y, base + j * inner, j == arg);
                continue;
            }
            for (int64_t j = 0; j < len; j++) sum += exp(ox_ld(x, base + j * inner) - mx);
            for (int64_t j = 0; j < len; j++) {
                double v = ox_ld(x, base + j * inner) - mx;
                ox_st(y, base + j * inner, kind == SM_SOFT ? exp(v) / sum : v - log(sum));
            }
        }
    return OX_OK;
}

ox_status ox_nn_cpu_softmax(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                            const ox_tensor *const *in, ox_tensor *const *out) {
    return softmax_run(ctx->pool, n, in[0], out[0], SM_SOFT);
}

ox_status ox_nn_cpu_logsoftmax(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                               const ox_tensor *const *in, ox_tensor *const *out) {
    return softmax_run(ctx->pool, n, in[0], out[0], SM_LOG);
}

ox_status ox_nn_cpu_hardmax(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                            const ox_tensor *const *in, ox_tensor *const *out) {
    return softmax_run(ctx->pool, n, in[0], out[0], SM_HARD);
}

/* ---- Dropout --------------------------------------------------------------------------- */

/* Inference (the default) is the identity with an all-true mask. Training mode (opset 12+:
 * a true `training_mode` input; before 7: is_test=0) drops with probability `ratio`,
 * scaling the kept values by 1/(1-ratio). The mask is numpy's (see ox_mt19937):
 * seed(seed); uniform(0, 1, shape) >= ratio, as the ONNX reference draws it; the seed is 0
 * when absent, so runs repeat. */
static bool dropout_training(const struct ox_node *n, const ox_tensor *const *in, double *ratio) {
    *ratio = ox_attr_float(n, "ratio", 0.5f);
    if (n->opset >= 12) {
        const ox_tensor *r = ox_in(n, in, 1), *t = ox_in(n, in, 2);
        if (r && r->data) *ratio = ox_get_f64(r, 0);
        return t && t->data && ox_get_i64(t, 0);
    }
    return false; /* before opset 12 the runtime decides: inference */
}

ox_status ox_nn_infer_dropout(struct ox_infer_ctx *ctx, const struct ox_node *n,
                              const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    const ox_tensor *x = ox_in(n, in, 0);
    if (!x) return ox_node_err(n, OX_E_INVALID, "missing input");
    ox_set_like(out[0], x);
    if (n->n_outputs > 1 && out[1])
        ox_set_shape(out[1], n->opset >= 10 ? OX_BOOL : x->dtype, x->rank, x->dims);
    return OX_OK;
}

ox_status ox_nn_cpu_dropout(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                            const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    const ox_tensor *x = in[0];
    int64_t cnt = ox_tensor_numel(x);
    double ratio;
    bool train = dropout_training(n, in, &ratio) && ratio > 0;
    ox_tensor *mask = n->n_outputs > 1 ? out[1] : NULL;
    if (!train) {
        if (cnt) memcpy(out[0]->data, x->data, (size_t)cnt * ox_dtype_size(x->dtype));
        if (mask)
            for (int64_t i = 0; i < cnt; i++) ox_set_f64(mask, i, 1);
        return OX_OK;
    }
    if (ratio >= 1) return ox_node_err(n, OX_E_INVALID, "ratio %g: must be below 1", ratio);
    struct ox_mt19937 mt;
    ox_mt_seed(&mt, (uint32_t)ox_attr_int(n, "seed", 0));
    double scale = 1.0 / (1.0 - ratio);
    for (int64_t i = 0; i < cnt; i++) {
        bool keep = ox_mt_double(&mt) >= ratio;
        ox_set_f64(out[0], i, keep ? ox_get_f64(x, i) * scale : 0);
        if (mask) ox_set_f64(mask, i, keep);
    }
    return OX_OK;
}
