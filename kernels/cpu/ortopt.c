/* The operators ONNX Runtime's graph optimizer writes into the models it saves
 * (SessionOptions.optimized_model_filepath) beyond its contributed transformer and quantized
 * operators (kernels/cpu/contrib.c, quant.c), domain com.microsoft, version 1:
 *
 *   FusedConv(X, W, B?, Z?; Conv's attributes, activation, activation_params)
 *       activation(Conv(X, W, B) + Z): ORT's Conv+activation fusion ("extended" level) and,
 *       with Z, its Conv+Add+activation one. activation: Relu, Tanh, Sigmoid, LeakyRelu
 *       (activation_params [alpha]), Clip ([min, max]), HardSigmoid ([alpha, beta]), or none
 *       (the set ORT's MLAS kernels take)
 *   FusedGemm(A, B, C?; Gemm's attributes, activation, activation_alpha, activation_beta,
 *       activation_gamma)   activation(Gemm(A, B, C)): Relu, Tanh, Sigmoid, LeakyRelu
 *       (alpha), HardSigmoid (alpha, beta), Elu (alpha), Selu (alpha, gamma), Softplus,
 *       Softsign, ThresholdedRelu (alpha); an attribute left out takes the ONNX op's default
 *   QLinearConv(the default domain's inputs; channels_last)   ORT's NHWC form ("all" level on
 *       x86): X and Y [N, spatial..., C], W as in the default domain's op
 *   NhwcMaxPool(X; MaxPool's attributes)   MaxPool of uint8 or int8 X [N, spatial..., C]
 *
 * Each runs the kernel of the op it extends: FusedConv and FusedGemm onnxexec's own fused ops
 * (kernels/cpu/conv.c, linalg.c: the clamps of Relu and Clip in the GEMM's epilogue), then
 * any other activation in place through its default-domain row; the NHWC ops transpose X to
 * channels-first scratch, run the default domain's QLinearConv or MaxPool into scratch and
 * transpose the result into Y. The graph pass turns FusedConv and FusedGemm with a clamp or no
 * activation into onnxexec's ops themselves (graph/optimize.c), which the GPU has too.
 *
 * ONNX Runtime's "all" level on x86 also writes the com.microsoft.nchwc operators (ReorderInput,
 * Conv, MaxPool, ...) on channel-blocked tensors: graph/nchwc.c rewrites those into
 * default-domain ones when the model is loaded. */
#include "kernels/op.h"

#include <stdio.h>
#include <string.h>

/* ---- FusedConv and FusedGemm ----------------------------------------------------------- */

enum { MAX_ATTRS = 32 };

/* FusedConv's activations and their activation_params (ORT's MLAS set); FusedGemm's, whose
 * attributes come as activation_alpha, _beta, _gamma. */
static const struct {
    const char *name;
    int n_params;        /* FusedConv: activation_params it takes */
    const char *attr[2]; /* the default-domain op's float attributes they are */
    bool conv, gemm;     /* which of the two takes it */
} acts[] = {
    {"Relu", 0, {0}, true, true},
    {"Tanh", 0, {0}, true, true},
    {"Sigmoid", 0, {0}, true, true},
    {"LeakyRelu", 1, {"alpha"}, true, true},
    {"Clip", 2, {0}, true, false},
    {"HardSigmoid", 2, {"alpha", "beta"}, true, true},
    {"Elu", 1, {"alpha"}, false, true},
    {"Selu", 2, {"alpha", "gamma"}, false, true},
    {"Softplus", 0, {0}, false, true},
    {"Softsign", 0, {0}, false, true},
    {"ThresholdedRelu", 1, {"alpha"}, false, true},
};

ox_status ox_ms_activation(const struct ox_node *n, struct ox_ms_activation *a) {
    memset(a, 0, sizeof *a);
    a->lo = -INFINITY, a->hi = INFINITY;
    bool conv = !strcmp(n->op_type, "FusedConv");
    const char *act = ox_attr_str(n, "activation", "");
    if (!*act) return OX_OK;
    for (size_t k = 0; k < sizeof acts / sizeof *acts; k++) {
        if (strcmp(act, acts[k].name) != 0 || !(conv ? acts[k].conv : acts[k].gemm)) continue;
        if (!strcmp(act, "Relu")) {
            a->lo = 0;
            return OX_OK;
        }
        const float *p = NULL;
        int np = conv ? ox_attr_floats(n, "activation_params", &p) : 0;
        if (np < 0) np = 0; /* none given */
        if (conv && np != acts[k].n_params)
            return ox_node_err(n, OX_E_INVALID, "activation %s takes %d activation_params, not %d",
                               act, acts[k].n_params, np);
        if (!strcmp(act, "Clip")) {
            a->lo = p[0], a->hi = p[1];
            return OX_OK;
        }
        a->post = acts[k].name;
        for (int i = 0; i < acts[k].n_params; i++) {
            float v;
            if (conv) {
                v = p[i];
            } else {
                char key[32];
                snprintf(key, sizeof key, "activation_%s", acts[k].attr[i]);
                const struct ox_attr *at = ox_node_attr(n, key);
                if (!at || at->type != OX_ATTR_FLOAT) continue; /* the op's default */
                v = at->f;
            }
            a->attrs[a->n_attrs++] =
                (struct ox_attr){.name = acts[k].attr[i], .type = OX_ATTR_FLOAT, .f = v};
        }
        return OX_OK;
    }
    return ox_node_err(n, OX_E_UNSUPPORTED, "activation '%s': expected %s or none", act,
                       conv ? "Relu, Tanh, Sigmoid, LeakyRelu, Clip, HardSigmoid"
                            : "Relu, Tanh, Sigmoid, LeakyRelu, HardSigmoid, Elu, Selu, Softplus, "
                              "Softsign, ThresholdedRelu");
}

static bool is_act_attr(const char *name) {
    return strncmp(name, "activation", 10) == 0;
}

int ox_ms_fused_attrs(const struct ox_node *n, const struct ox_ms_activation *a, float *clamp,
                      struct ox_attr *attrs) {
    int na = 0;
    for (int k = 0; k < n->n_attrs; k++)
        if (!is_act_attr(n->attrs[k].name)) attrs[na++] = n->attrs[k];
    bool clamps = a->lo > -INFINITY || a->hi < INFINITY;
    const char *name = !clamps ? "" : a->lo == 0 && a->hi == INFINITY ? "Relu" : "Clip";
    clamp[0] = a->lo, clamp[1] = a->hi;
    attrs[na++] = (struct ox_attr){
        .name = "activation", .type = OX_ATTR_STRING, .s = name, .s_len = strlen(name)};
    attrs[na++] = (struct ox_attr){
        .name = "activation_params", .type = OX_ATTR_FLOATS, .n = 2, .floats = clamp};
    return na;
}

/* The node onnxexec's fused op runs for n: n's attributes without the activation ones, then
 * "activation" (Relu, Clip or none) and "activation_params" [lo, hi]; post_node the
 * default-domain op to run after it in place (act.post NULL: none). */
struct ms_fused {
    struct ox_node base;
    struct ox_attr attrs[MAX_ATTRS + 2];
    float clamp[2];
    struct ox_ms_activation act;
    struct ox_node post_node;
};

static ox_status ms_fused_make(const struct ox_node *n, bool conv, struct ms_fused *f) {
    memset(f, 0, sizeof *f);
    ox_status st = ox_ms_activation(n, &f->act);
    if (st) return st;
    f->base = *n;
    f->base.domain = OX_DOMAIN_ONNXEXEC;
    f->base.op_type = conv ? "FusedConv" : "FusedGemm";
    f->base.opset = 1;
    int keep = 0;
    for (int k = 0; k < n->n_attrs; k++) keep += !is_act_attr(n->attrs[k].name);
    if (keep > MAX_ATTRS) return ox_node_err(n, OX_E_INVALID, "too many attributes");
    f->base.attrs = f->attrs;
    f->base.n_attrs = ox_ms_fused_attrs(n, &f->act, f->clamp, f->attrs);
    if (f->act.post)
        f->post_node = (struct ox_node){.name = n->name,
                                        .domain = "",
                                        .op_type = f->act.post,
                                        .opset = 13,
                                        .n_inputs = 1,
                                        .inputs = n->outputs,
                                        .n_outputs = 1,
                                        .outputs = n->outputs,
                                        .attrs = f->act.attrs,
                                        .n_attrs = f->act.n_attrs};
    return OX_OK;
}

static ox_status ms_fused_infer(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                const ox_tensor *const *in, ox_tensor *const *out, bool conv) {
    struct ms_fused f;
    ox_status st = ms_fused_make(n, conv, &f);
    if (st) return st;
    const struct ox_op *row = ox_op_find(OX_DOMAIN_ONNXEXEC, f.base.op_type, 1);
    if (!row) return ox_node_err(n, OX_E_INTERNAL, "no row for %s", f.base.op_type);
    if ((st = row->infer(ctx, &f.base, in, out)) || !f.act.post) return st;
    if (!ox_dtype_is_float(out[0]->dtype))
        return ox_node_err(n, OX_E_UNSUPPORTED, "activation %s on %s", f.act.post,
                           ox_dtype_name(out[0]->dtype));
    return OX_OK;
}

static ox_status ms_fused_cpu(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                              const ox_tensor *const *in, ox_tensor *const *out, bool conv) {
    struct ms_fused f;
    ox_status st = ms_fused_make(n, conv, &f);
    if (st) return st;
    const struct ox_op *row = ox_op_find(OX_DOMAIN_ONNXEXEC, f.base.op_type, 1);
    const struct ox_op *post = f.act.post ? ox_op_find("", f.act.post, 13) : NULL;
    if (!row || (f.act.post && !post)) return ox_node_err(n, OX_E_INTERNAL, "no row for an op");
    if ((st = row->cpu(ctx, &f.base, in, out)) || !post) return st;
    const ox_tensor *y = out[0];
    return post->cpu(ctx, &f.post_node, &y, out); /* elementwise, in place */
}

ox_status ox_ms_infer_fused_conv(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                 const ox_tensor *const *in, ox_tensor *const *out) {
    return ms_fused_infer(ctx, n, in, out, true);
}

ox_status ox_ms_cpu_fused_conv(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                               const ox_tensor *const *in, ox_tensor *const *out) {
    return ms_fused_cpu(ctx, n, in, out, true);
}

ox_status ox_ms_infer_fused_gemm(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                 const ox_tensor *const *in, ox_tensor *const *out) {
    return ms_fused_infer(ctx, n, in, out, false);
}

ox_status ox_ms_cpu_fused_gemm(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                               const ox_tensor *const *in, ox_tensor *const *out) {
    return ms_fused_cpu(ctx, n, in, out, false);
}

/* ---- the NHWC operators ------------------------------------------------------------------ */

static void permuted(const ox_tensor *t, const int64_t *perm, ox_tensor *p) {
    *p = *t;
    p->data = NULL;
    for (int d = 0; d < t->rank; d++) p->dims[d] = t->dims[perm[d]];
}

/* The channels-first twin of n: the default domain's op, n's attributes but channels_last. */
static void nhwc_base(const struct ox_node *n, const char *type, struct ox_node *b,
                      struct ox_attr *attrs) {
    *b = *n;
    b->domain = "";
    b->op_type = type;
    b->opset = 19;
    int na = 0;
    for (int k = 0; k < n->n_attrs && na < MAX_ATTRS; k++)
        if (strcmp(n->attrs[k].name, "channels_last") != 0) attrs[na++] = n->attrs[k];
    b->attrs = attrs;
    b->n_attrs = na;
}

enum { NHWC_MAX_IN = 9 };

/* A channels-last op: X (input 0) and Y (output 0) are [N, spatial..., C]; the default
 * domain's op `type` computes it channels-first. Scratch: X channels-first, Y channels-first,
 * then the op's own. */
static ox_status nhwc_exec(struct ox_infer_ctx *ictx, struct ox_kernel_ctx *kctx,
                           const struct ox_node *n, const char *type, const ox_tensor *const *in,
                           ox_tensor *const *out) {
    const ox_tensor *x = ox_in(n, in, 0);
    if (!x) return ox_node_err(n, OX_E_INVALID, "input X is required");
    if (x->rank < 3)
        return ox_node_err(n, OX_E_SHAPE, "X has rank %d: expected [N, spatial..., C]", x->rank);
    if (n->n_inputs > NHWC_MAX_IN) return ox_node_err(n, OX_E_INVALID, "too many inputs");
    if (n->n_outputs != 1) return ox_node_err(n, OX_E_INVALID, "expected one output");
    struct ox_attr attrs[MAX_ATTRS];
    struct ox_node b;
    nhwc_base(n, type, &b, attrs);
    const struct ox_op *row = ox_op_find("", type, b.opset);
    if (!row) return ox_node_err(n, OX_E_INTERNAL, "no row for %s", type);
    int64_t to_first[OX_MAX_RANK], to_last[OX_MAX_RANK];
    ox_nhwc_perms(x->rank, to_first, to_last);
    ox_tensor xf, yf;
    permuted(x, to_first, &xf);
    const ox_tensor *bin[NHWC_MAX_IN];
    for (int k = 0; k < n->n_inputs; k++) bin[k] = in[k];
    bin[0] = &xf;
    ox_tensor *bout[1] = {&yf};
    size_t xb, yb;
    if (!ox_tensor_bytes(x->dtype, x->rank, x->dims, &xb))
        return ox_node_err(n, OX_E_NOMEM, "X too large");
    if (ictx) {
        memset(&yf, 0, sizeof yf);
        struct ox_infer_ctx sub = *ictx;
        sub.scratch_bytes = 0;
        ox_status st = row->infer(&sub, &b, bin, bout);
        if (st) return st; /* OX_NEED_DATA too: the executor comes back with the data */
        if (yf.rank != x->rank)
            return ox_node_err(n, OX_E_SHAPE, "output of rank %d for X of rank %d", yf.rank,
                               x->rank);
        if (!ox_tensor_bytes(yf.dtype, yf.rank, yf.dims, &yb))
            return ox_node_err(n, OX_E_NOMEM, "output too large");
        ox_tensor yl;
        permuted(&yf, to_last, &yl);
        ox_set_shape(out[0], yf.dtype, yl.rank, yl.dims);
        ictx->scratch_bytes = ox_align64(xb) + ox_align64(yb) + sub.scratch_bytes;
        ictx->prepared_bytes = sub.prepared_bytes;
        return OX_OK;
    }
    /* Y's channels-first shape: Y's dims taken back through to_last */
    permuted(out[0], to_first, &yf);
    if (!ox_tensor_bytes(yf.dtype, yf.rank, yf.dims, &yb))
        return ox_node_err(n, OX_E_NOMEM, "output too large");
    xf.data = kctx->scratch;
    yf.data = ox_scratch_at(kctx->scratch, ox_align64(xb));
    ox_status st = ox_transpose_run(kctx, n, x, &xf, to_first);
    if (st) return st;
    struct ox_kernel_ctx sub = *kctx;
    size_t off = ox_align64(xb) + ox_align64(yb);
    sub.scratch = ox_scratch_at(kctx->scratch, off);
    sub.scratch_bytes = kctx->scratch_bytes - off;
    if ((st = row->cpu(&sub, &b, bin, bout))) return st;
    return ox_transpose_run(kctx, n, &yf, out[0], to_last);
}

/* com.microsoft QLinearConv: channels_last 0 is the default domain's op as it is. */
ox_status ox_ms_infer_qlinear_conv(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                   const ox_tensor *const *in, ox_tensor *const *out) {
    if (!ox_attr_int(n, "channels_last", 0)) {
        struct ox_attr attrs[MAX_ATTRS];
        struct ox_node b;
        nhwc_base(n, "QLinearConv", &b, attrs);
        return ox_op_find("", "QLinearConv", b.opset)->infer(ctx, &b, in, out);
    }
    return nhwc_exec(ctx, NULL, n, "QLinearConv", in, out);
}

ox_status ox_ms_cpu_qlinear_conv(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                                 const ox_tensor *const *in, ox_tensor *const *out) {
    if (!ox_attr_int(n, "channels_last", 0)) {
        struct ox_attr attrs[MAX_ATTRS];
        struct ox_node b;
        nhwc_base(n, "QLinearConv", &b, attrs);
        return ox_op_find("", "QLinearConv", b.opset)->cpu(ctx, &b, in, out);
    }
    return nhwc_exec(NULL, ctx, n, "QLinearConv", in, out);
}

ox_status ox_ms_infer_nhwc_maxpool(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                   const ox_tensor *const *in, ox_tensor *const *out) {
    const ox_tensor *x = ox_in(n, in, 0);
    if (x && x->dtype != OX_UINT8 && x->dtype != OX_INT8)
        return ox_node_err(n, OX_E_UNSUPPORTED, "X is %s: expected uint8 or int8",
                           ox_dtype_name(x->dtype));
    if (n->n_outputs > 1 && n->outputs[1] >= 0)
        return ox_node_err(n, OX_E_INVALID, "NhwcMaxPool has one output");
    return nhwc_exec(ctx, NULL, n, "MaxPool", in, out);
}

ox_status ox_ms_cpu_nhwc_maxpool(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                                 const ox_tensor *const *in, ox_tensor *const *out) {
    return nhwc_exec(NULL, ctx, n, "MaxPool", in, out);
}
