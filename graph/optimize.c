/* Graph optimizations, run on a model's main graph when it is loaded (unless turned off):
 *
 *     struct ox_opt_stats st;
 *     ox_graph_optimize(g, 0, &st);   // g keeps computing the same outputs
 *
 * - BatchNormalization (inference) after a Conv (or a Gemm with beta 1) whose weights are
 *   constant is folded into its weights and bias (computed in double, rounded once).
 * - A Conv, a Gemm or a MatMul whose output feeds only one node is fused with what
 *   follows, in this order: a bias (MatMul: Add of a constant vector over the last axis),
 *   a residual Add (Conv: any tensor added to its output), and an activation (Relu, Clip
 *   with constant bounds, or SiLU exported as Sigmoid and Mul). The fused node is an op of
 * onnxexec's own domain, "ai.onnxexec" FusedConv / FusedGemm / FusedMatMul, with the original op's
 * inputs and attributes plus an input Z (the residual or the bias) and the attributes "activation"
 *   ("Relu", "Clip", "Silu" or "") and "activation_params" ([lo, hi] for Clip). The kernels apply
 *   all of it in the GEMM's epilogue, while the output block is still in registers.
 * - LayerNormalization over the last axis, exported below opset 17 as ReduceMean, Sub, Pow,
 *   ReduceMean, Add(epsilon), Sqrt, Div, Mul(gamma), Add(beta), becomes one
 *   LayerNormalization node (opset 17's op; constant gamma and beta).
 * - GELU exported as Div(x, sqrt 2), Erf, Add(1), Mul(x), Mul(0.5) (either order of the
 *   multiplications) becomes one Gelu node (opset 20's op); its tanh form, 0.5 x (1 +
 *   Tanh(sqrt(2/pi) (x + 0.044715 x^3))) with x^3 as Pow or Muls, Gelu(approximate "tanh").
 *   Where the model's opset is older than the op, the node is onnxexec's twin of it (domain
 *   ai.onnxexec), so that the graph can still be written at the model's own opset.
 * - Attention: MatMul(Q', KT') [-> scale factors] [-> Add(mask)] -> Softmax(axis -1) ->
 *   MatMul(., V'), where Q', KT' and V' may each come through view ops (Transpose, Reshape,
 *   Squeeze, Unsqueeze, Gather of one index, Slice; their shapes and parameters constant or
 *   known when a plan is built) and Q', KT' through factors of one element, and the product
 *   may feed one Transpose, becomes one ai.onnxexec FusedAttention node (kernels/op.h) that
 *   reads the view ops' sources through "view programs" (strides where they are strided).
 *   Constant factors fold into its "scale"; others (torch's scale computed from Shape) stay
 *   inputs, when they provably hold one element. View ops go when nothing else reads them
 *   (or, read only by a Shape, when the plan folds that Shape). OX_FUSE_ATTENTION=0: not
 *   done.
 * - A residual Add read only by a LayerNormalization (whose Mean and InvStdDev nothing reads)
 *   becomes, with it, one ai.onnxexec SkipLayerNormalization node (kernels/cpu/norm.c), after
 *   the epilogue fusions; an addend that a Transpose keeping the last axis made (read by the
 *   Add alone) is read through the node's "skip_perm" instead. OX_FUSE_SKIP_LAYERNORM=0: not
 *   done.
 * - A batch-first Transpose (keeping the last axis) before a MatMul by a constant matrix
 *   whose result only FusedAttention operands (and Shapes) read moves into the operands'
 *   view programs: the MatMul reads the untransposed input (hoist_transpose).
 *   OX_MOVE_TRANSPOSE=0: not done.
 * - QuantizeLinear(Conv(DequantizeLinear(xq), DequantizeLinear(Wq), B) [-> Relu or Clip]),
 *   a QDQ model's convolution, becomes a QLinearConv on xq and Wq (ai.onnxexec's twin with a
 *   y_range where there is an activation; depthwise ones too) where the CPU runs uint8 x
 *   int8 products fast (fold_qconv says exactly where): integer sums requantized once, as
 *   ONNX Runtime and PyTorch compute a quantized model, within one step of the output's
 *   scale of the float graph. OX_FUSE_QCONV=0: not done.
 * - QuantizeLinear(Add(DequantizeLinear(a), DequantizeLinear(b)) [-> Relu or Clip]), a QDQ
 *   model's residual sum, becomes ai.onnxexec QLinearAdd on a and b (com.microsoft's op with
 *   a y_range for the activation): one pass over bytes, bit for bit the float graph's
 *   result. QuantizeLinear(MaxPool(DequantizeLinear(x))) with the same parameters becomes
 *   MaxPool(x) on the bytes, exact too. OX_FUSE_QADD=0: neither is done.
 * - DequantizeLinear(QuantizeLinear(x, s, z), s, z) with the same constant parameters (a
 *   QDQ model's round trip between float operators, through a Cast of the quantized type to
 *   itself as torch exports it) becomes one ai.onnxexec QuantizeDequantize node.
 * - First of all, ONNX Runtime's FusedConv and FusedGemm (com.microsoft, in the models its
 *   optimizer saves) become onnxexec's own ops, an activation other than a clamp as its own
 *   node after them (adopt_ms_fused); its FusedMatMul takes the place of either MatMul of an
 *   attention (the first with any transposes and alpha, which go into the views and the
 *   scale; the second with the softmax's output as it is), so such an attention fuses too.
 *   QuickGelu of alpha 1 (its SiLU) after a Conv, Gemm or MatMul joins the epilogue.
 * - Then its channels-last operators (quantized models saved at its "all" level) become the
 *   channels-first ones between two Transposes, Transposes move past elementwise ops where
 *   that brings them to their inverse, and inverse pairs cancel (layouts; OX_MOVE_LAYOUTS=0:
 *   not done). Only data moves: the results are the same bytes.
 * - Nodes whose outputs nothing reads (and that have no side effects: every op here) are
 *   removed; so are initializers that nothing reads any more.
 *
 * With OX_OPT_STANDARD_ONLY (what `onnxexec convert --optimize` writes, for other runtimes
 * too) the result uses only the default domain at the model's own opset: no fused
 * ai.onnxexec ops, and LayerNormalization and Gelu only where that opset has them (17 and
 * 20). With OX_OPT_GPU (a model loaded for a GPU) the QDQ rewrites into QLinearConv,
 * QLinearAdd and MaxPool on bytes are left out: they have CPU kernels only, and a device
 * plan would run them as CPU steps with copies where the float graph's Conv, Add and
 * MaxPool run on the device.
 *
 * The pass never looks inside subgraphs, and leaves alone any value that a subgraph reads
 * by name or that is a graph output (except the last value of a fused chain, which the
 * fused node then produces). Nodes stay in topological order: a fused node takes the place
 * of its last member, and every input of the chain is computed before that.
 */
#include "graph/optimize.h"

#include "kernels/op.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct opt {
    struct ox_graph *g;
    int *uses; /* per value: readers (ox_graph_count_uses) */
    int cap_uses;
    bool *dead; /* per node */
    struct ox_opt_stats *st;
    bool move_transposes; /* unless OX_MOVE_TRANSPOSE=0 (hoist_transpose, skip_perm) */
};

/* Constant data the pass may read: an initializer that no caller can override, or the
 * tensor of a Constant node, directly or through Identity nodes (torch writes an Identity of
 * the first for each initializer equal to another: an untrained LayerNorm's ones and zeros). */
static const ox_tensor *const_of(const struct opt *o, int v) {
    for (int hops = 0; v >= 0 && hops < 8; hops++) {
        const struct ox_value *val = &o->g->values[v];
        if (ox_graph_is_input(o->g, v) || (!val->init && val->producer < 0)) return NULL;
        const struct ox_node *n =
            val->init || o->dead[val->producer] ? NULL : &o->g->nodes[val->producer];
        if (!n || n->domain[0] || strcmp(n->op_type, "Identity") != 0 || n->n_inputs != 1) break;
        v = n->inputs[0];
    }
    if (v < 0 || ox_graph_is_input(o->g, v)) return NULL;
    const struct ox_value *val = &o->g->values[v];
    if (val->init) return val->init;
    if (val->producer < 0 || o->dead[val->producer]) return NULL;
    const struct ox_node *n = &o->g->nodes[val->producer];
    if (n->domain[0] || strcmp(n->op_type, "Constant") != 0 || n->n_attrs != 1) return NULL;
    const struct ox_attr *a = ox_node_attr(n, "value");
    return a && a->type == OX_ATTR_TENSOR ? a->t : NULL;
}

static const ox_tensor *const_float(const struct opt *o, int v) {
    const ox_tensor *t = const_of(o, v);
    return t && t->dtype == OX_FLOAT && t->kind == OX_IO_TENSOR ? t : NULL;
}

static ox_status count_uses(struct opt *o) {
    struct ox_graph *g = o->g;
    if (g->n_values > o->cap_uses) { /* folding adds values */
        int *u = realloc(o->uses, sizeof(int) * (size_t)g->n_values);
        if (!u) return ox_err(OX_E_NOMEM, "out of memory optimizing the graph");
        o->uses = u;
        o->cap_uses = g->n_values;
    }
    ox_graph_count_uses(g, o->dead, o->uses);
    return OX_OK;
}

/* The one live node reading value v (v read exactly once, by a node), else NULL. */
static struct ox_node *only_reader(struct opt *o, int v) {
    if (v < 0 || o->uses[v] != 1) return NULL;
    struct ox_graph *g = o->g;
    int p = g->values[v].producer;
    for (int i = p < 0 ? 0 : p + 1; i < g->n_nodes; i++) {
        if (o->dead[i]) continue;
        const struct ox_node *n = &g->nodes[i];
        for (int k = 0; k < n->n_inputs; k++)
            if (n->inputs[k] == v) return &g->nodes[i];
    }
    return NULL;
}

static bool is_op(const struct ox_node *n, const char *type) {
    return n && n->domain[0] == '\0' && strcmp(n->op_type, type) == 0;
}

/* Whether n is onnxexec's own op `type` (domain ai.onnxexec). */
static bool is_fused(const struct ox_node *n, const char *type) {
    return strcmp(n->domain, OX_DOMAIN_ONNXEXEC) == 0 && strcmp(n->op_type, type) == 0;
}

/* The live node writing v, or NULL (v may have other readers). */
static struct ox_node *producer_of(struct opt *o, int v) {
    int p = v >= 0 ? o->g->values[v].producer : -1;
    return p >= 0 && !o->dead[p] ? &o->g->nodes[p] : NULL;
}

/* The one node writing v, when v is read once (so that the node may be fused away). */
static struct ox_node *producer_once(struct opt *o, int v) {
    return v >= 0 && o->uses[v] == 1 ? producer_of(o, v) : NULL;
}

/* A new initializer of type dt named after `base` (made unique). */
static int new_init(struct ox_graph *g, const char *base, ox_dtype dt, int rank,
                    const int64_t *dims, ox_tensor **out) {
    char name[256];
    int v = -1;
    for (int k = 0; k < 1000 && v < 0; k++) {
        snprintf(name, sizeof name, "%s%s%d", base, k ? "_" : "", k);
        if (ox_graph_find_value(g, name) < 0) v = ox_graph_add_value(g, name);
    }
    if (v < 0) return -1;
    ox_tensor *t = ox_graph_alloc(g, sizeof *t);
    if (!t || ox_tensor_alloc(t, dt, rank, dims)) return -1;
    t->name = g->values[v].name;
    g->values[v].init = t;
    g->values[v].dtype = dt;
    *out = t;
    return v;
}

/* A new float initializer. */
static int new_const(struct ox_graph *g, const char *base, int rank, const int64_t *dims,
                     ox_tensor **out) {
    return new_init(g, base, OX_FLOAT, rank, dims, out);
}

/* ---- BatchNormalization into Conv ------------------------------------------------------ */

static ox_status fold_bn(struct opt *o, struct ox_node *conv) {
    struct ox_graph *g = o->g;
    bool gemm = is_op(conv, "Gemm");
    if (!(gemm || is_op(conv, "Conv")) || conv->n_outputs != 1) return OX_OK;
    struct ox_node *bn = only_reader(o, conv->outputs[0]);
    if (!is_op(bn, "BatchNormalization") || bn->n_inputs != 5 || bn->inputs[0] != conv->outputs[0])
        return OX_OK;
    for (int k = 1; k < bn->n_outputs; k++) /* training outputs */
        if (bn->outputs[k] >= 0) return OX_OK;
    if (ox_attr_int(bn, "training_mode", 0)) return OX_OK;
    const ox_tensor *w = const_float(o, conv->inputs[1]);
    const ox_tensor *b =
        conv->n_inputs > 2 && conv->inputs[2] >= 0 ? const_float(o, conv->inputs[2]) : NULL;
    if (!w || (conv->n_inputs > 2 && conv->inputs[2] >= 0 && !b)) return OX_OK;
    /* Conv: output channel m is W's row m. Gemm (beta 1): output column n is B's row n
     * (transB) or column n; the bias C a vector over the columns. */
    bool tb = gemm && ox_attr_int(conv, "transB", 0);
    if (gemm ? w->rank != 2 || ox_attr_float(conv, "beta", 1.0f) != 1.0f : w->rank < 3)
        return OX_OK;
    int64_t M = gemm && !tb ? w->dims[1] : w->dims[0], per = ox_tensor_numel(w) / (M ? M : 1);
    const ox_tensor *p[4];
    for (int k = 0; k < 4; k++) {
        p[k] = const_float(o, bn->inputs[k + 1]);
        if (!p[k] || p[k]->rank != 1 || p[k]->dims[0] != M) return OX_OK;
    }
    if (b && (ox_tensor_numel(b) != M || (b->rank == 2 && b->dims[0] != 1) || b->rank > 2))
        return OX_OK;
    double eps = ox_attr_float(bn, "epsilon", 1e-5f);
    const float *scale = p[0]->data, *beta = p[1]->data, *mean = p[2]->data, *var = p[3]->data;
    ox_tensor *nw, *nb;
    char base[200];
    snprintf(base, sizeof base, "%s_bn_folded_W", conv->name ? conv->name : "conv");
    int vw = new_const(g, base, w->rank, w->dims, &nw);
    snprintf(base, sizeof base, "%s_bn_folded_B", conv->name ? conv->name : "conv");
    int vb = new_const(g, base, 1, &M, &nb);
    if (vw < 0 || vb < 0) return ox_err(OX_E_NOMEM, "out of memory folding BatchNormalization");
    const float *wd = w->data, *bd = b ? b->data : NULL;
    float *nwd = nw->data, *nbd = nb->data;
    for (int64_t m = 0; m < M; m++) {
        /* the same float32 steps as BatchNormalization's kernel would take for its factor */
        double s = (double)scale[m] / sqrt((double)var[m] + eps);
        for (int64_t i = 0; i < per; i++) { /* W's row m, or (Gemm, B not transposed) column */
            int64_t at = gemm && !tb ? i * M + m : m * per + i;
            nwd[at] = (float)((double)wd[at] * s);
        }
        nbd[m] = (float)(((bd ? (double)bd[m] : 0.0) - mean[m]) * s + beta[m]);
    }
    /* Conv now reads the folded constants and writes BN's output */
    int *ins = ox_graph_alloc(g, sizeof(int) * 3);
    if (!ins) return ox_err(OX_E_NOMEM, "out of memory folding BatchNormalization");
    ins[0] = conv->inputs[0], ins[1] = vw, ins[2] = vb;
    conv->inputs = ins;
    conv->n_inputs = 3;
    g->values[conv->outputs[0]].producer = -1;
    conv->outputs[0] = bn->outputs[0];
    g->values[bn->outputs[0]].producer = (int)(conv - g->nodes);
    o->dead[bn - g->nodes] = true;
    o->st->folded_bn++;
    return count_uses(o);
}

static int prog_ops(const int64_t *pg, int len);
static void remove_dead(struct opt *o);

/* ---- fusions into the GEMM epilogue ---------------------------------------------------- */

/* The clamp of an activation node reading v: Relu, or Clip with constant bounds. */
static bool activation_of(struct opt *o, const struct ox_node *n, int v, float *lo, float *hi) {
    if (is_op(n, "Relu") && n->n_inputs == 1 && n->inputs[0] == v) {
        *lo = 0, *hi = INFINITY;
        return true;
    }
    if (!is_op(n, "Clip") || n->n_inputs < 1 || n->inputs[0] != v) return false;
    *lo = -INFINITY, *hi = INFINITY;
    if (n->opset < 11) {
        *lo = ox_attr_float(n, "min", -INFINITY);
        *hi = ox_attr_float(n, "max", INFINITY);
        return true;
    }
    for (int k = 1; k < 3 && k < n->n_inputs; k++) {
        if (n->inputs[k] < 0) continue;
        const ox_tensor *t = const_float(o, n->inputs[k]);
        if (!t || ox_tensor_numel(t) != 1) return false;
        *(k == 1 ? lo : hi) = *(const float *)t->data;
    }
    return true;
}

/* SiLU as exported: Sigmoid(v) and Mul(v, that) (either order), the only readers of v,
 * the Mul the only reader of the Sigmoid. */
static bool silu_of(struct opt *o, int v, struct ox_node **sig, struct ox_node **mul) {
    if (v < 0 || o->uses[v] != 2) return false;
    struct ox_graph *g = o->g;
    *sig = *mul = NULL;
    for (int i = g->values[v].producer + 1; i < g->n_nodes; i++) {
        struct ox_node *n = &g->nodes[i];
        if (o->dead[i] || n->n_inputs < 1) continue;
        if (is_op(n, "Sigmoid") && n->n_inputs == 1 && n->inputs[0] == v) *sig = n;
    }
    if (!*sig || (*sig)->n_outputs != 1) return false;
    struct ox_node *m = only_reader(o, (*sig)->outputs[0]);
    if (!is_op(m, "Mul") || m->n_inputs != 2) return false;
    int s = (*sig)->outputs[0];
    if (!((m->inputs[0] == v && m->inputs[1] == s) || (m->inputs[0] == s && m->inputs[1] == v)))
        return false;
    *mul = m;
    return true;
}

/* SiLU as ONNX Runtime's optimizer saves it: com.microsoft QuickGelu of alpha 1 reading v. */
static bool quick_silu(const struct ox_node *n, int v) {
    return !strcmp(n->domain, "com.microsoft") && !strcmp(n->op_type, "QuickGelu") &&
           n->n_inputs == 1 && n->inputs[0] == v && n->n_outputs == 1 &&
           ox_attr_float(n, "alpha", 1.702f) == 1.0f;
}

/* The Add reading v whose other operand is z (not v itself), or NULL. */
static struct ox_node *add_of(struct opt *o, int v, int *z) {
    struct ox_node *n = only_reader(o, v);
    if (!is_op(n, "Add") || n->n_inputs != 2 || n->inputs[0] == n->inputs[1]) return NULL;
    *z = n->inputs[0] == v ? n->inputs[1] : n->inputs[0];
    return n;
}

/* A constant added per output channel of a Conv ([M, 1, 1], [1, M, 1, 1], ...): the
 * Conv's bias plus it, as a new constant; -1 when z is not such a constant, -2 on OOM. */
static int channel_bias(struct opt *o, const struct ox_node *conv, int z) {
    const ox_tensor *w = const_float(o, conv->inputs[1]), *t = const_float(o, z), *b = NULL;
    if (!w || !t || w->rank < 3 || t->rank > w->rank) return -1;
    int64_t M = w->dims[0];
    if (conv->n_inputs > 2 && conv->inputs[2] >= 0) {
        b = const_float(o, conv->inputs[2]);
        if (!b || b->rank != 1 || b->dims[0] != M) return -1;
    }
    /* t's dims, right-aligned with the output's [N, M, spatial...]: 1 but at M's place */
    for (int i = 0; i < t->rank; i++) {
        int at = w->rank - t->rank + i; /* the output axis */
        if (t->dims[i] != (at == 1 ? M : 1)) return -1;
    }
    if (ox_tensor_numel(t) != M) return -1;
    ox_tensor *nb;
    char base[200];
    snprintf(base, sizeof base, "%s_bias", conv->name ? conv->name : "conv");
    int v = new_const(o->g, base, 1, &M, &nb);
    if (v < 0) return -2;
    for (int64_t m = 0; m < M; m++)
        ((float *)nb->data)[m] =
            (b ? ((const float *)b->data)[m] : 0.0f) + ((const float *)t->data)[m];
    return v;
}

static ox_status fuse(struct opt *o, struct ox_node *n) {
    struct ox_graph *g = o->g;
    bool conv = is_op(n, "Conv"), gemm = is_op(n, "Gemm"), mm = is_op(n, "MatMul");
    if (!(conv || gemm || mm) || n->n_outputs != 1) return OX_OK;
    int out = n->outputs[0], z = -1, n_dead = 0;
    struct ox_node *dead[3];
    /* MatMul + Add of a constant vector: the bias; Conv + Add: the residual */
    int zz;
    struct ox_node *add = add_of(o, out, &zz);
    if (add && mm) {
        const ox_tensor *bias = const_of(o, zz);
        if (!bias || bias->rank != 1) add = NULL;
    }
    if (add && gemm) add = NULL; /* Gemm has its own C */
    int folded_bias = add && conv ? channel_bias(o, n, zz) : -1;
    if (folded_bias == -2) return ox_err(OX_E_NOMEM, "out of memory fusing nodes");
    if (add) {
        z = folded_bias >= 0 ? -1 : zz;
        out = add->outputs[0];
        dead[n_dead++] = add;
    }
    float lo = -INFINITY, hi = INFINITY;
    struct ox_node *act = only_reader(o, out), *sig, *mul;
    const char *act_name = "";
    if (act && activation_of(o, act, out, &lo, &hi)) {
        act_name = is_op(act, "Relu") ? "Relu" : "Clip";
        out = act->outputs[0];
        dead[n_dead++] = act;
    } else if (silu_of(o, out, &sig, &mul)) {
        act_name = "Silu";
        out = mul->outputs[0];
        dead[n_dead++] = sig;
        dead[n_dead++] = mul; /* the last of the chain */
    } else if (act && quick_silu(act, out)) {
        act_name = "Silu";
        out = act->outputs[0];
        dead[n_dead++] = act;
    }
    if (!n_dead) return OX_OK;
    /* inputs: the op's own (Conv X, W, B; Gemm A, B, C; MatMul A, B), then Z */
    int base = conv || gemm ? 3 : 2;
    int *ins = ox_graph_alloc(g, sizeof(int) * (size_t)(base + 1));
    struct ox_attr *attrs = ox_graph_alloc(g, sizeof *attrs * (size_t)(n->n_attrs + 2));
    float *params = ox_graph_alloc(g, sizeof(float) * 2);
    if (!ins || !attrs || !params) return ox_err(OX_E_NOMEM, "out of memory fusing nodes");
    for (int k = 0; k < base; k++) ins[k] = k < n->n_inputs ? n->inputs[k] : -1;
    if (folded_bias >= 0) ins[2] = folded_bias;
    ins[base] = z;
    memcpy(attrs, n->attrs, sizeof *attrs * (size_t)n->n_attrs);
    attrs[n->n_attrs] = (struct ox_attr){
        .name = "activation", .type = OX_ATTR_STRING, .s = act_name, .s_len = strlen(act_name)};
    params[0] = lo, params[1] = hi;
    attrs[n->n_attrs + 1] = (struct ox_attr){
        .name = "activation_params", .type = OX_ATTR_FLOATS, .n = 2, .floats = params};
    const char *type = conv ? "FusedConv" : gemm ? "FusedGemm" : "FusedMatMul";
    const struct ox_op *op = ox_op_find(OX_DOMAIN_ONNXEXEC, type, 1);
    if (!op) return ox_err(OX_E_INTERNAL, "no operator-table row for %s", type);
    /* the fused node takes the place of the chain's last node (all inputs come before) */
    struct ox_node *last = dead[n_dead - 1];
    struct ox_node fused = *n;
    fused.domain = OX_DOMAIN_ONNXEXEC;
    fused.op_type = type;
    fused.opset = 1;
    fused.op = op;
    fused.inputs = ins;
    fused.n_inputs = base + 1;
    fused.attrs = attrs;
    fused.n_attrs = n->n_attrs + 2;
    int *outs = ox_graph_alloc(g, sizeof(int));
    if (!outs) return ox_err(OX_E_NOMEM, "out of memory fusing nodes");
    outs[0] = out;
    fused.outputs = outs;
    g->values[n->outputs[0]].producer = -1;
    for (int k = 0; k < n_dead; k++)
        if (dead[k] != last) g->values[dead[k]->outputs[0]].producer = -1;
    o->dead[n - g->nodes] = true;
    n->n_attrs = 0; /* the fused node owns them now */
    *last = fused;
    g->values[out].producer = (int)(last - g->nodes);
    o->st->fused_nodes += n_dead;
    return count_uses(o);
}

/* Take the chain's nodes out and make `last` (which comes after all of them and after
 * every input) the one node that replaces them: op `type`, which the default domain has
 * from opset `since`. A model of an older opset gets onnxexec's twin of the op instead
 * (domain ai.onnxexec, version 1), so that the graph stays expressible at its own opset;
 * since 0: an op of onnxexec's own, which the default domain does not have. */
static ox_status replace_chain(struct opt *o, struct ox_node *const *chain, int n_chain,
                               struct ox_node *last, const char *type, int since, int *ins,
                               int n_ins, struct ox_attr *attrs, int n_attrs) {
    struct ox_graph *g = o->g;
    int64_t model = ox_graph_opset(g, "");
    bool standard = since > 0 && model >= since;
    const char *domain = standard ? "" : OX_DOMAIN_ONNXEXEC;
    int opset = standard ? (int)model : 1;
    const struct ox_op *op = ox_op_find(domain, type, opset);
    if (!op) return ox_err(OX_E_INTERNAL, "no operator-table row for %s", type);
    for (int k = 0; k < n_chain; k++) {
        g->values[chain[k]->outputs[0]].producer = -1;
        o->dead[chain[k] - g->nodes] = true;
    }
    ox_node_free_attrs(last);
    last->domain = domain;
    last->op_type = type;
    last->opset = opset;
    last->op = op;
    last->inputs = ins;
    last->n_inputs = n_ins;
    last->attrs = attrs;
    last->n_attrs = n_attrs;
    o->st->fused_nodes += n_chain;
    return count_uses(o);
}

/* ---- QDQ: a QuantizeLinear's round trip through DequantizeLinear ------------------------ */

/* Whether node n sets no attribute but those named (a space-separated list). */
static bool only_attrs(const struct ox_node *n, const char *names) {
    for (int k = 0; k < n->n_attrs; k++) {
        const char *a = n->attrs[k].name, *p = strstr(names, a);
        size_t len = strlen(a);
        if (!p || (p != names && p[-1] != ' ') || (p[len] != ' ' && p[len] != '\0')) return false;
    }
    return true;
}

/* Whether values a and b hold the same constant (type, shape and bytes); both absent (-1)
 * counts as the same. */
static bool same_const(struct opt *o, int a, int b) {
    if (a < 0 || b < 0) return a < 0 && b < 0;
    const ox_tensor *ta = const_of(o, a), *tb = const_of(o, b);
    size_t bytes;
    if (!ta || !tb || ta->kind != OX_IO_TENSOR || tb->kind != OX_IO_TENSOR ||
        ta->dtype != tb->dtype || ta->rank != tb->rank ||
        memcmp(ta->dims, tb->dims, sizeof(int64_t) * (size_t)ta->rank) != 0 ||
        !ox_tensor_bytes(ta->dtype, ta->rank, ta->dims, &bytes))
        return false;
    return ta->dtype != OX_STRING && (bytes == 0 || memcmp(ta->data, tb->data, bytes) == 0);
}

/* The integer type a QuantizeLinear produces, from its constant zero point (uint8 without
 * one); 0 when not known before run time or not an integer type. */
static ox_dtype q_int_type(struct opt *o, const struct ox_node *q) {
    if (q->n_inputs < 3 || q->inputs[2] < 0) return OX_UINT8;
    const ox_tensor *z = const_of(o, q->inputs[2]);
    if (!z) return 0;
    switch (z->dtype) {
    case OX_UINT8:
    case OX_INT8:
    case OX_UINT16:
    case OX_INT16:
    case OX_UINT4:
    case OX_INT4: return z->dtype;
    default: return 0;
    }
}

/* DequantizeLinear(QuantizeLinear(x, s, z), s, z), the pair a QDQ model puts between its
 * float operators (torch's exporter with a Cast of the quantized type to itself between
 * them), becomes one ai.onnxexec QuantizeDequantize(x, s, z) node in the DequantizeLinear's
 * place (kernels/cpu/quant.c): one pass over x instead of two or three. Only where the two
 * have the same constant parameters and set nothing but the axis (the same one where the
 * scale has more than one element). The QuantizeLinear stays for any other reader. */
static ox_status fold_qdq(struct opt *o, struct ox_node *dq) {
    struct ox_graph *g = o->g;
    if (!is_op(dq, "DequantizeLinear") || dq->n_inputs < 2 || dq->n_outputs != 1 ||
        !only_attrs(dq, "axis"))
        return OX_OK;
    struct ox_node *q = producer_of(o, dq->inputs[0]);
    int64_t cast_to = -1;
    if (is_op(q, "Cast") && q->n_inputs == 1 && only_attrs(q, "to")) {
        const struct ox_attr *a = ox_node_attr(q, "to");
        if (!a || a->type != OX_ATTR_INT) return OX_OK;
        cast_to = a->i;
        q = producer_of(o, q->inputs[0]);
    }
    if (!is_op(q, "QuantizeLinear") || q->n_inputs < 2 || !only_attrs(q, "axis saturate"))
        return OX_OK;
    ox_dtype qt = q_int_type(o, q);
    int qz = q->n_inputs > 2 ? q->inputs[2] : -1, dz = dq->n_inputs > 2 ? dq->inputs[2] : -1;
    const ox_tensor *s = const_of(o, q->inputs[1]);
    if (!qt || (cast_to >= 0 && cast_to != (int64_t)qt) || !s ||
        !same_const(o, q->inputs[1], dq->inputs[1]) || !same_const(o, qz, dz) ||
        (ox_tensor_numel(s) != 1 && ox_attr_int(q, "axis", 1) != ox_attr_int(dq, "axis", 1)))
        return OX_OK;
    const struct ox_op *op = ox_op_find(OX_DOMAIN_ONNXEXEC, "QuantizeDequantize", 1);
    int *ins = ox_graph_alloc(g, sizeof(int) * 3);
    if (!op || !ins) return ox_err(OX_E_NOMEM, "out of memory fusing QuantizeDequantize");
    int n_ins = qz >= 0 ? 3 : 2;
    for (int k = 0; k < n_ins; k++) ins[k] = q->inputs[k];
    dq->domain = OX_DOMAIN_ONNXEXEC;
    dq->op_type = "QuantizeDequantize";
    dq->opset = 1;
    dq->op = op;
    dq->inputs = ins;
    dq->n_inputs = n_ins;
    o->st->fused_nodes++;
    return count_uses(o);
}

/* ---- QDQ convolutions as integer ones ---------------------------------------------------- */

/* A DequantizeLinear setting at most `axis`, with constant scale s (float) and zero point
 * z (8-bit: uint8 or int8 as `want` says, 0 for either); NULL otherwise. */
static const struct ox_node *dq_of(struct opt *o, int v, ox_dtype want, const ox_tensor **s,
                                   const ox_tensor **z) {
    const struct ox_node *dq = producer_of(o, v);
    if (!is_op(dq, "DequantizeLinear") || dq->n_inputs != 3 || !only_attrs(dq, "axis")) return NULL;
    *s = const_float(o, dq->inputs[1]);
    *z = const_of(o, dq->inputs[2]);
    if (!*s || !*z || (*z)->kind != OX_IO_TENSOR ||
        ((*z)->dtype != want &&
         !(want == 0 && ((*z)->dtype == OX_UINT8 || (*z)->dtype == OX_INT8))))
        return NULL;
    return dq;
}

/* Whether v is all zeros by construction: a ConstantOfShape of 0 (its default), or a Cast of
 * one (torch writes a bias's zero point so). */
static bool zeros_of(struct opt *o, int v) {
    const struct ox_node *n = producer_of(o, v);
    if (is_op(n, "Cast") && n->n_inputs == 1) n = producer_of(o, n->inputs[0]);
    if (!is_op(n, "ConstantOfShape")) return false;
    const struct ox_attr *a = ox_node_attr(n, "value");
    if (!a) return true;
    size_t bytes;
    if (a->type != OX_ATTR_TENSOR || a->t->kind != OX_IO_TENSOR || a->t->dtype == OX_STRING ||
        !ox_tensor_bytes(a->t->dtype, a->t->rank, a->t->dims, &bytes))
        return false;
    for (size_t i = 0; i < bytes; i++)
        if (((const unsigned char *)a->t->data)[i]) return false;
    return true;
}

/* The float bias [M] a QDQ convolution adds, constant: a float tensor (f), or a
 * DequantizeLinear of int32 (q) whose scale s and zero point z (absent, or a ConstantOfShape
 * of 0: NULL) hold one value or M. */
struct qbias {
    const float *f;
    const ox_tensor *q, *s, *z;
};

static bool qbias_of(struct opt *o, int v, int64_t M, struct qbias *b) {
    const ox_tensor *t = const_float(o, v);
    if (t) {
        b->f = t->data;
        return t->rank == 1 && t->dims[0] == M;
    }
    const struct ox_node *dq = producer_of(o, v);
    if (!is_op(dq, "DequantizeLinear") || dq->n_inputs < 2 || !only_attrs(dq, "axis")) return false;
    b->q = const_of(o, dq->inputs[0]);
    b->s = const_float(o, dq->inputs[1]);
    if (!b->q || b->q->kind != OX_IO_TENSOR || b->q->dtype != OX_INT32 || b->q->rank != 1 ||
        b->q->dims[0] != M || !b->s ||
        (ox_tensor_numel(b->s) != 1 && !(b->s->rank == 1 && b->s->dims[0] == M)))
        return false;
    int vz = dq->n_inputs > 2 ? dq->inputs[2] : -1;
    if (vz < 0 || zeros_of(o, vz)) return true;
    b->z = const_of(o, vz);
    return b->z && b->z->dtype == OX_INT32 && ox_tensor_numel(b->z) == ox_tensor_numel(b->s);
}

/* Channel m's bias in float (DequantizeLinear's float arithmetic for the int32 form). */
static float qbias_at(const struct qbias *b, int64_t m) {
    if (b->f) return b->f[m];
    int64_t k = ox_tensor_numel(b->s) == 1 ? 0 : m;
    int32_t z = b->z ? ((const int32_t *)b->z->data)[k] : 0;
    return (float)((int64_t)((const int32_t *)b->q->data)[m] - z) * ((const float *)b->s->data)[k];
}

/* The bias as a new int32 initializer [M] at the scale x_scale * w_scale (w_scale: one value
 * or M; the bias / that, rounded half to even, saturated): its value id, -1 out of memory. */
static int qbias_int32(struct ox_graph *g, const char *name, const struct qbias *bias, int64_t M,
                       const ox_tensor *sx, const ox_tensor *sw) {
    ox_tensor *t;
    char base[200];
    snprintf(base, sizeof base, "%s_bias_int32", name);
    int v = new_init(g, base, OX_INT32, 1, &M, &t);
    if (v < 0) return -1;
    float fx = *(const float *)sx->data;
    bool per_m = ox_tensor_numel(sw) != 1;
    for (int64_t m = 0; m < M; m++) {
        double r = rint((double)qbias_at(bias, m) /
                        (double)(fx * ((const float *)sw->data)[per_m ? m : 0]));
        ((int32_t *)t->data)[m] = r >= 2147483647.0    ? INT32_MAX
                                  : r <= -2147483648.0 ? INT32_MIN
                                  : !(r == r)          ? 0
                                                       : (int32_t)r;
    }
    return v;
}

/* The y_range attribute of a fused op whose output QuantizeLinear(scale sy, zero point zy, 8
 * bits) follows an activation clamping to [lo, hi]: the codes of lo and hi, between which
 * QuantizeLinear is monotonic (for a positive scale), in range[2]. */
static struct ox_attr y_range(const ox_tensor *sy, const ox_tensor *zy, float lo, float hi,
                              int64_t *range) {
    bool u8 = zy->dtype == OX_UINT8;
    double z = u8 ? *(const uint8_t *)zy->data : *(const int8_t *)zy->data;
    float s = *(const float *)sy->data;
    double tlo = u8 ? 0 : -128, thi = u8 ? 255 : 127;
    double a = lo == -INFINITY ? tlo : rint((double)(lo / s)) + z;
    double b = hi == INFINITY ? thi : rint((double)(hi / s)) + z;
    if (a > b) a = b; /* Clip with min > max gives max */
    range[0] = (int64_t)(a < tlo ? tlo : a > thi ? thi : a);
    range[1] = (int64_t)(b < tlo ? tlo : b > thi ? thi : b);
    return (struct ox_attr){.name = "y_range", .type = OX_ATTR_INTS, .n = 2, .ints = range};
}

/* A QuantizeLinear q setting at most `axis` and `saturate`, of one scale (float) and one
 * zero point (uint8 or int8): its scale and zero point, else false. */
static bool q8_scalar(struct opt *o, const struct ox_node *q, const ox_tensor **sy,
                      const ox_tensor **zy) {
    if (!is_op(q, "QuantizeLinear") || q->n_inputs != 3 || q->n_outputs != 1 ||
        !only_attrs(q, "axis saturate"))
        return false;
    *sy = const_float(o, q->inputs[1]), *zy = const_of(o, q->inputs[2]);
    return *sy && ox_tensor_numel(*sy) == 1 && *zy && (*zy)->kind == OX_IO_TENSOR &&
           ox_tensor_numel(*zy) == 1 && ((*zy)->dtype == OX_UINT8 || (*zy)->dtype == OX_INT8);
}

/* The node writing the value a QuantizeLinear quantizes, past an activation (Relu or Clip of
 * constant bounds: *act, and its [lo, hi]) where there is one; each read only there. */
static struct ox_node *q_source(struct opt *o, const struct ox_node *q, struct ox_node **act,
                                float *lo, float *hi) {
    struct ox_node *n = producer_once(o, q->inputs[0]);
    *act = NULL, *lo = -INFINITY, *hi = INFINITY;
    if (n && n->n_inputs >= 1 && activation_of(o, n, n->inputs[0], lo, hi)) {
        *act = n;
        n = producer_once(o, n->inputs[0]);
    }
    return n;
}

/* QuantizeLinear(Conv(DequantizeLinear(xq), DequantizeLinear(Wq), B) [-> Relu or Clip]), the
 * convolutions of a QDQ model (torch's export, onnxruntime's quantizer), becomes one
 * QLinearConv on xq and Wq in the QuantizeLinear's place, as ONNX Runtime runs them: integer
 * sums requantized once instead of the float convolution of the dequantized values (the
 * outputs may differ from the float graph's by one step of the output's scale). The bias
 * becomes int32 at the scale x_scale * w_scale (B / that, rounded); an activation becomes
 * the range the output is clamped to (Relu: [y_zero_point, max]), in onnxexec's twin of the
 * op (attribute y_range). Only where kernels/cpu/qconv8.c runs the result (uint8 input, int8
 * weights whose zero points are 0, 2-D, group 1, scalar x and y parameters, per-tensor or
 * per-channel weight scales on axis 0, a CPU with AVX-512 VNNI) and where it is faster than
 * the float convolution with its QDQ passes (4 products per output or more, 8 output
 * channels or more), or, for a depthwise convolution (group = channels, one input channel
 * per output), where kernels/cpu/qdw8.c runs it (ox_qdw8_supports: stride 1 or 2 across).
 * OX_FUSE_QCONV=0: not done. */
static ox_status fold_qconv(struct opt *o, struct ox_node *q) {
    struct ox_graph *g = o->g;
    const ox_tensor *sy, *zy;
    if (!q8_scalar(o, q, &sy, &zy)) return OX_OK;
    struct ox_node *act;
    float lo, hi;
    struct ox_node *conv = q_source(o, q, &act, &lo, &hi);
    if (!is_op(conv, "Conv") || conv->n_outputs != 1 || conv->n_inputs < 2 ||
        !only_attrs(conv, "auto_pad dilations group kernel_shape pads strides"))
        return OX_OK;
    int64_t group = ox_attr_int(conv, "group", 1);
    const ox_tensor *sx, *zx, *sw, *zw;
    const struct ox_node *dx = dq_of(o, conv->inputs[0], OX_UINT8, &sx, &zx);
    const struct ox_node *dw = dq_of(o, conv->inputs[1], OX_INT8, &sw, &zw);
    if (!dx || !dw || ox_tensor_numel(sx) != 1 || ox_tensor_numel(zx) != 1) return OX_OK;
    const ox_tensor *wq = const_of(o, dw->inputs[0]);
    if (!wq || wq->kind != OX_IO_TENSOR || wq->dtype != OX_INT8 || wq->rank != 4) return OX_OK;
    /* fewer than 4 products per output or 8 output channels: most of a tile (32 channels
     * of 4-byte groups) wasted. Above that the integer form wins in a model even where the
     * float convolution alone is as fast, the float one needing its DequantizeLinear and
     * QuantizeLinear passes too (docs/PERFORMANCE.md, stop 36: QDQ MobileNetV2 5.36 -> 4.96 ms
     * on 1 thread against stop 35's rule of 64 and 32, taken from single layers) */
    int64_t M = wq->dims[0];
    /* a depthwise convolution (one input channel per output channel) where qdw8.c runs it */
    const struct ox_attr *st = ox_node_attr(conv, "strides");
    int64_t stride_w = st && st->type == OX_ATTR_INTS && st->n == 2 ? st->ints[1] : 1;
    bool dwise = group > 1 && group == M && wq->dims[1] == 1 &&
                 ox_qdw8_supports(wq->dims[2], wq->dims[3], stride_w);
    if (!dwise && (group != 1 || wq->dims[1] * wq->dims[2] * wq->dims[3] < 4 || M < 8))
        return OX_OK;
    bool per_m = ox_tensor_numel(sw) != 1;
    if ((per_m && (sw->rank != 1 || sw->dims[0] != M || ox_attr_int(dw, "axis", 1) != 0)) ||
        (ox_tensor_numel(zw) != 1 && ox_tensor_numel(zw) != M))
        return OX_OK;
    for (int64_t i = 0; i < ox_tensor_numel(zw); i++)
        if (((const int8_t *)zw->data)[i]) return OX_OK;
    struct qbias bias = {0};
    int vb = conv->n_inputs > 2 ? conv->inputs[2] : -1;
    if (vb >= 0 && !qbias_of(o, vb, M, &bias)) return OX_OK;
    int *ins = ox_graph_alloc(g, sizeof(int) * 9);
    struct ox_attr *attrs = ox_graph_alloc(g, sizeof *attrs * (size_t)(conv->n_attrs + 1));
    int64_t *range = ox_graph_alloc(g, sizeof(int64_t) * 2);
    if (!ins || !attrs || !range) return ox_err(OX_E_NOMEM, "out of memory fusing QLinearConv");
    int vbq = vb >= 0 ? qbias_int32(g, conv->name ? conv->name : "conv", &bias, M, sx, sw) : -1;
    if (vb >= 0 && vbq < 0) return ox_err(OX_E_NOMEM, "out of memory fusing QLinearConv");
    int n_attrs = conv->n_attrs;
    memcpy(attrs, conv->attrs, sizeof *attrs * (size_t)n_attrs);
    if (act) attrs[n_attrs++] = y_range(sy, zy, lo, hi, range);
    int src[9] = {dx->inputs[0], dx->inputs[1], dx->inputs[2],
                  dw->inputs[0], dw->inputs[1], dw->inputs[2],
                  q->inputs[1],  q->inputs[2],  vbq};
    memcpy(ins, src, sizeof src);
    struct ox_node *chain[2] = {conv, act};
    conv->n_attrs = 0; /* the fused node owns them now */
    return replace_chain(o, chain, act ? 2 : 1, q, "QLinearConv", act ? 0 : 10, ins,
                         vbq >= 0 ? 9 : 8, attrs, n_attrs);
}

/* QuantizeLinear(Gemm(DequantizeLinear(a), DequantizeLinear(W), B) [-> Relu or Clip]), a QDQ
 * model's fully connected layer (torch's export of Linear: W int8 per output channel, B int32
 * through a DequantizeLinear), and QuantizeLinear(MatMul(DequantizeLinear(a),
 * DequantizeLinear(W)) [-> ...]) with a constant 2-D W (onnxruntime's QDQ transformers: a of
 * any rank), become onnxexec's twin of com.microsoft QGemm on a and W in
 * the QuantizeLinear's place: integer sums scaled once, as ONNX Runtime runs it, the weights
 * read as bytes instead of floats (MobileNetV2's 1280 x 1000 classifier: 1.3 MB instead of
 * 5). Like fold_qconv, the outputs may differ from the float graph's by one step of the
 * output's scale; the bias becomes int32 at the scale a_scale * W_scale, an activation the
 * range y_range. Only with alpha and beta 1, a and its parameters of one value (8 bits),
 * W constant (8 bits, rank 2) with one scale or one per output column (axis 0 with transB,
 * else 1) and zero points likewise. OX_FUSE_QGEMM=0 (or OX_FUSE_QCONV=0): not done. */
static ox_status fold_qgemm(struct opt *o, struct ox_node *q) {
    struct ox_graph *g = o->g;
    const ox_tensor *sy, *zy;
    if (!q8_scalar(o, q, &sy, &zy)) return OX_OK;
    struct ox_node *act;
    float lo, hi;
    struct ox_node *gemm = q_source(o, q, &act, &lo, &hi);
    bool mm = is_op(gemm, "MatMul"); /* A [..., K] by a constant [K, N], no bias */
    if (!(mm ? gemm->n_inputs == 2 && gemm->n_attrs == 0
             : is_op(gemm, "Gemm") && gemm->n_inputs >= 2 &&
                   only_attrs(gemm, "alpha beta transA transB") &&
                   ox_attr_float(gemm, "alpha", 1.0f) == 1.0f &&
                   ox_attr_float(gemm, "beta", 1.0f) == 1.0f) ||
        gemm->n_outputs != 1)
        return OX_OK;
    bool tb = ox_attr_int(gemm, "transB", 0) != 0;
    const ox_tensor *sa, *za, *sw, *zw;
    const struct ox_node *da = dq_of(o, gemm->inputs[0], 0, &sa, &za);
    const struct ox_node *dw = dq_of(o, gemm->inputs[1], 0, &sw, &zw);
    if (!da || !dw || ox_tensor_numel(sa) != 1 || ox_tensor_numel(za) != 1) return OX_OK;
    const ox_tensor *wq = const_of(o, dw->inputs[0]);
    if (!wq || wq->kind != OX_IO_TENSOR || wq->dtype != zw->dtype || wq->rank != 2) return OX_OK;
    int64_t N = wq->dims[tb ? 0 : 1];
    bool per_n = ox_tensor_numel(sw) != 1;
    if ((per_n &&
         (sw->rank != 1 || sw->dims[0] != N || ox_attr_int(dw, "axis", 1) != (tb ? 0 : 1))) ||
        (ox_tensor_numel(zw) != 1 && (zw->rank != 1 || zw->dims[0] != N || !per_n)))
        return OX_OK;
    struct qbias bias = {0};
    int vb = gemm->n_inputs > 2 ? gemm->inputs[2] : -1;
    if (vb >= 0 && !qbias_of(o, vb, N, &bias)) return OX_OK;
    int *ins = ox_graph_alloc(g, sizeof(int) * 9);
    struct ox_attr *attrs = ox_graph_alloc(g, sizeof *attrs * 3);
    int64_t *range = ox_graph_alloc(g, sizeof(int64_t) * 2);
    if (!ins || !attrs || !range) return ox_err(OX_E_NOMEM, "out of memory fusing QGemm");
    int vbq = vb >= 0 ? qbias_int32(g, gemm->name ? gemm->name : "gemm", &bias, N, sa, sw) : -1;
    if (vb >= 0 && vbq < 0) return ox_err(OX_E_NOMEM, "out of memory fusing QGemm");
    int n_attrs = 0;
    const struct ox_attr *ta = ox_node_attr(gemm, "transA"), *tbb = ox_node_attr(gemm, "transB");
    if (ta) attrs[n_attrs++] = *ta;
    if (tbb) attrs[n_attrs++] = *tbb;
    if (act) attrs[n_attrs++] = y_range(sy, zy, lo, hi, range);
    int src[9] = {da->inputs[0], da->inputs[1], da->inputs[2], dw->inputs[0], dw->inputs[1],
                  dw->inputs[2], vbq,           q->inputs[1],  q->inputs[2]};
    memcpy(ins, src, sizeof src);
    struct ox_node *chain[2] = {gemm, act};
    return replace_chain(o, chain, act ? 2 : 1, q, "QGemm", 0, ins, 9, attrs, n_attrs);
}

/* QuantizeLinear(Add(DequantizeLinear(a), DequantizeLinear(b)) [-> Relu or Clip]), a QDQ
 * model's residual sum, becomes onnxexec's QLinearAdd on a and b (com.microsoft's inputs,
 * and a y_range for the activation) in the QuantizeLinear's place: one pass over bytes
 * instead of four or five over floats. The same result bit for bit: the kernel does the
 * float arithmetic of the three ops (kernels/cpu/quant.c), and clamping the sum to [lo, hi]
 * before QuantizeLinear gives the codes of lo and hi as bounds, QuantizeLinear being
 * monotonic for a positive scale. Only with one scale and zero point each, all three of one
 * 8-bit type. OX_FUSE_QADD=0: not done. */
static ox_status fold_qadd(struct opt *o, struct ox_node *q) {
    const ox_tensor *sy, *zy, *sa, *za, *sb, *zb;
    if (!q8_scalar(o, q, &sy, &zy) || !(*(const float *)sy->data > 0) ||
        *(const float *)sy->data == INFINITY)
        return OX_OK;
    struct ox_node *act;
    float lo, hi;
    struct ox_node *add = q_source(o, q, &act, &lo, &hi);
    if (!is_op(add, "Add") || add->n_inputs != 2 || add->n_outputs != 1 || add->n_attrs)
        return OX_OK;
    const struct ox_node *da = dq_of(o, add->inputs[0], zy->dtype, &sa, &za);
    const struct ox_node *db = dq_of(o, add->inputs[1], zy->dtype, &sb, &zb);
    if (!da || !db || ox_tensor_numel(sa) != 1 || ox_tensor_numel(za) != 1 ||
        ox_tensor_numel(sb) != 1 || ox_tensor_numel(zb) != 1)
        return OX_OK;
    int *ins = ox_graph_alloc(o->g, sizeof(int) * 8);
    struct ox_attr *attrs = ox_graph_alloc(o->g, sizeof *attrs);
    int64_t *range = ox_graph_alloc(o->g, sizeof(int64_t) * 2);
    if (!ins || !attrs || !range) return ox_err(OX_E_NOMEM, "out of memory fusing QLinearAdd");
    int src[8] = {da->inputs[0], da->inputs[1], da->inputs[2], db->inputs[0],
                  db->inputs[1], db->inputs[2], q->inputs[1],  q->inputs[2]};
    memcpy(ins, src, sizeof src);
    if (act) attrs[0] = y_range(sy, zy, lo, hi, range);
    struct ox_node *chain[2] = {add, act};
    return replace_chain(o, chain, act ? 2 : 1, q, "QLinearAdd", 0, ins, 8, attrs, act ? 1 : 0);
}

/* QuantizeLinear(MaxPool(DequantizeLinear(x, s, z)), s, z) with the same one scale (positive)
 * and zero point on both sides, a QDQ model's MaxPool, becomes MaxPool(x) on the bytes (a
 * standard op for 8-bit types since opset 12; kernels/cpu/conv.c's byte form): the same
 * result bit for bit, DequantizeLinear being non-decreasing (the max of the dequantized
 * values is the dequantized max) and QuantizeLinear recovering each code from its
 * dequantized value exactly (the division's error is far below half a step). Only a MaxPool
 * without the Indices output. OX_FUSE_QADD=0 turns it off with fold_qadd. */
static ox_status fold_qmaxpool(struct opt *o, struct ox_node *q) {
    const ox_tensor *sy, *zy, *sx, *zx;
    if (ox_graph_opset(o->g, "") < 12 || !q8_scalar(o, q, &sy, &zy) ||
        !(*(const float *)sy->data > 0) || *(const float *)sy->data == INFINITY)
        return OX_OK;
    struct ox_node *mp = producer_once(o, q->inputs[0]);
    if (!is_op(mp, "MaxPool") || mp->n_inputs != 1 || mp->n_outputs != 1 ||
        !only_attrs(mp, "auto_pad ceil_mode dilations kernel_shape pads storage_order strides"))
        return OX_OK;
    const struct ox_node *dx = dq_of(o, mp->inputs[0], zy->dtype, &sx, &zx);
    if (!dx || !same_const(o, dx->inputs[1], q->inputs[1]) ||
        !same_const(o, dx->inputs[2], q->inputs[2]))
        return OX_OK;
    int *ins = ox_graph_alloc(o->g, sizeof(int));
    struct ox_attr *attrs = ox_graph_alloc(o->g, sizeof *attrs * (size_t)(mp->n_attrs + 1));
    if (!ins || !attrs) return ox_err(OX_E_NOMEM, "out of memory fusing MaxPool");
    ins[0] = dx->inputs[0];
    int n_attrs = mp->n_attrs;
    memcpy(attrs, mp->attrs, sizeof *attrs * (size_t)n_attrs);
    mp->n_attrs = 0; /* the new node owns them now */
    struct ox_node *chain[1] = {mp};
    return replace_chain(o, chain, 1, q, "MaxPool", 12, ins, 1, attrs, n_attrs);
}

/* ---- LayerNormalization from its exported pieces --------------------------------------- */

/* The readers of v (at most max) among live nodes; returns how many there are. */
static int readers_of(struct opt *o, int v, struct ox_node **r, int max) {
    struct ox_graph *g = o->g;
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        if (o->dead[i]) continue;
        for (int k = 0; k < g->nodes[i].n_inputs; k++)
            if (g->nodes[i].inputs[k] == v) {
                if (n < max) r[n] = &g->nodes[i];
                n++;
                break;
            }
    }
    return n;
}

/* A ReduceMean over the last axis only, keeping it (axes [-1] as attribute or constant). */
static bool mean_last_axis(struct opt *o, const struct ox_node *n) {
    if (!is_op(n, "ReduceMean") || n->n_outputs != 1 || !ox_attr_int(n, "keepdims", 1))
        return false;
    const struct ox_attr *a = ox_node_attr(n, "axes");
    if (a) return a->type == OX_ATTR_INTS && a->n == 1 && a->ints[0] == -1 && n->n_inputs == 1;
    if (n->n_inputs != 2) return false;
    const ox_tensor *t = const_of(o, n->inputs[1]);
    return t && t->dtype == OX_INT64 && ox_tensor_numel(t) == 1 && *(const int64_t *)t->data == -1;
}

/* A one-element float constant v (its value in *out) that cannot raise the rank of what it
 * meets in a pattern over x: rank 0, or no more than x's known rank (a [1, 1, 1] factor
 * broadcasts a matrix up to rank 3, which the fused node would not). */
static bool const_scalar(struct opt *o, int v, int x, float *out) {
    const ox_tensor *t = const_float(o, v);
    int rx = x >= 0 ? o->g->values[x].rank : -1;
    if (!t || ox_tensor_numel(t) != 1 || t->rank > (rx > 0 ? rx : 0)) return false;
    *out = *(const float *)t->data;
    return true;
}

/* The other input of a two-input node reading v, or -1. */
static int other_input(const struct ox_node *n, int v) {
    if (n->n_inputs != 2) return -1;
    return n->inputs[0] == v ? n->inputs[1] : n->inputs[1] == v ? n->inputs[0] : -1;
}

/* x -> ReduceMean -> Sub(x, mean) = d; d -> Pow(d, 2) -> ReduceMean -> Add(eps) -> Sqrt;
 * Div(d, sqrt) -> Mul(gamma) -> Add(beta): LayerNormalization(x, gamma, beta) over the last
 * axis, as torch exports it below opset 17. */
static ox_status fold_layernorm(struct opt *o, struct ox_node *rm1) {
    struct ox_graph *g = o->g;
    if (!mean_last_axis(o, rm1)) return OX_OK;
    int x = rm1->inputs[0];
    struct ox_node *sub = only_reader(o, rm1->outputs[0]), *r[3];
    if (!is_op(sub, "Sub") || sub->n_inputs != 2 || sub->inputs[0] != x ||
        sub->inputs[1] != rm1->outputs[0])
        return OX_OK;
    int d = sub->outputs[0];
    /* two readers (three uses when the square is Mul(d, d)), nothing else */
    if (readers_of(o, d, r, 3) != 2 || o->uses[d] > 3) return OX_OK;
    struct ox_node *sq = is_op(r[0], "Div") ? r[1] : r[0], *div = is_op(r[0], "Div") ? r[0] : r[1];
    float two, eps;
    bool square =
        (is_op(sq, "Pow") && sq->n_inputs == 2 && sq->inputs[0] == d &&
         const_scalar(o, sq->inputs[1], x, &two) && two == 2.0f) ||
        (is_op(sq, "Mul") && sq->n_inputs == 2 && sq->inputs[0] == d && sq->inputs[1] == d);
    if (!square || !is_op(div, "Div") || div->inputs[0] != d) return OX_OK;
    struct ox_node *rm2 = only_reader(o, sq->outputs[0]);
    if (!rm2 || !mean_last_axis(o, rm2) || rm2->inputs[0] != sq->outputs[0]) return OX_OK;
    struct ox_node *add_eps = only_reader(o, rm2->outputs[0]);
    if (!is_op(add_eps, "Add") || !const_scalar(o, other_input(add_eps, rm2->outputs[0]), x, &eps))
        return OX_OK;
    struct ox_node *sqrt_n = only_reader(o, add_eps->outputs[0]);
    if (!is_op(sqrt_n, "Sqrt") || only_reader(o, sqrt_n->outputs[0]) != div ||
        div->inputs[1] != sqrt_n->outputs[0])
        return OX_OK;
    struct ox_node *mul = only_reader(o, div->outputs[0]);
    int vg = mul && is_op(mul, "Mul") ? other_input(mul, div->outputs[0]) : -1;
    const ox_tensor *gamma = const_float(o, vg);
    if (!gamma || gamma->rank != 1) return OX_OK;
    struct ox_node *add_b = only_reader(o, mul->outputs[0]);
    int vb = add_b && is_op(add_b, "Add") ? other_input(add_b, mul->outputs[0]) : -1;
    const ox_tensor *beta = const_float(o, vb);
    if (!beta || beta->rank != 1 || beta->dims[0] != gamma->dims[0]) return OX_OK;
    int *ins = ox_graph_alloc(g, sizeof(int) * 3);
    struct ox_attr *attrs = ox_graph_alloc(g, sizeof *attrs * 2);
    if (!ins || !attrs) return ox_err(OX_E_NOMEM, "out of memory fusing LayerNormalization");
    ins[0] = x, ins[1] = vg, ins[2] = vb;
    attrs[0] = (struct ox_attr){.name = "axis", .type = OX_ATTR_INT, .i = -1};
    attrs[1] = (struct ox_attr){.name = "epsilon", .type = OX_ATTR_FLOAT, .f = eps};
    struct ox_node *chain[] = {rm1, sub, sq, rm2, add_eps, sqrt_n, div, mul};
    return replace_chain(o, chain, 8, add_b, "LayerNormalization", 17, ins, 3, attrs, 2);
}

/* ---- GELU from its exported pieces ----------------------------------------------------- */

/* The tail 0.5 x (1 + f) both GELU forms share, from the Add(f, 1) node `add` on: x (1 + f)
 * then times 0.5, or (x 0.5) (1 + f). The node that gives the result in *last, the other Mul
 * in *mul; false when the tail is not there. */
static bool gelu_tail(struct opt *o, struct ox_node *add, int f, int x, struct ox_node **last,
                      struct ox_node **mul) {
    float one, half;
    if (!is_op(add, "Add") || !const_scalar(o, other_input(add, f), x, &one) || one != 1.0f)
        return false;
    struct ox_node *m = only_reader(o, add->outputs[0]);
    if (!is_op(m, "Mul")) return false;
    int other = other_input(m, add->outputs[0]);
    if (other == x) { /* x (1 + f), then times 0.5 */
        *last = only_reader(o, m->outputs[0]);
        *mul = m;
        return is_op(*last, "Mul") &&
               const_scalar(o, other_input(*last, m->outputs[0]), x, &half) && half == 0.5f;
    }
    /* (x 0.5) (1 + f) */
    struct ox_node *extra = producer_once(o, other);
    *last = m;
    *mul = extra;
    return is_op(extra, "Mul") && other_input(extra, x) >= 0 &&
           const_scalar(o, other_input(extra, x), x, &half) && half == 0.5f;
}

/* Div(x, sqrt 2) -> Erf -> Add(1) -> Mul(x, .) -> Mul(0.5) (or Mul(Mul(x, 0.5), .)): Gelu(x),
 * opset 20's op (exact, erf form), as torch exports nn.GELU. */
static ox_status fold_gelu(struct opt *o, struct ox_node *div) {
    struct ox_graph *g = o->g;
    float c;
    if (!is_op(div, "Div") || div->n_inputs != 2 ||
        !const_scalar(o, div->inputs[1], div->inputs[0], &c) || fabsf(c - 1.41421356f) > 1e-6f)
        return OX_OK;
    int x = div->inputs[0];
    struct ox_node *erf_n = only_reader(o, div->outputs[0]), *last, *mul;
    if (!is_op(erf_n, "Erf") ||
        !gelu_tail(o, only_reader(o, erf_n->outputs[0]), erf_n->outputs[0], x, &last, &mul))
        return OX_OK;
    int *ins = ox_graph_alloc(g, sizeof(int));
    if (!ins) return ox_err(OX_E_NOMEM, "out of memory fusing Gelu");
    ins[0] = x;
    struct ox_node *chain[] = {div, erf_n, only_reader(o, erf_n->outputs[0]), mul};
    return replace_chain(o, chain, 4, last, "Gelu", 20, ins, 1, NULL, 0);
}

/* The product tree of v over x (Mul nodes read once, Pow(x, 3), constant scalars): x's
 * power into *pw and the constants' product into *c, its nodes appended to chain[*n] (at
 * most max); false when v is not such a product. */
static bool x_power(struct opt *o, int v, int x, int *pw, double *c, struct ox_node **chain, int *n,
                    int max) {
    float k;
    if (v == x) {
        ++*pw;
        return true;
    }
    if (const_scalar(o, v, x, &k)) {
        *c *= k;
        return true;
    }
    struct ox_node *m = producer_once(o, v);
    if (!m || m->n_inputs != 2 || m->n_outputs != 1) return false;
    if (is_op(m, "Pow")) {
        if (m->inputs[0] != x || !const_scalar(o, m->inputs[1], x, &k) || k != 3.0f) return false;
        *pw += 3;
    } else if (!is_op(m, "Mul") || !x_power(o, m->inputs[0], x, pw, c, chain, n, max) ||
               !x_power(o, m->inputs[1], x, pw, c, chain, n, max)) {
        return false;
    }
    if (*n == max) return false; /* (checked here: the operands append first) */
    chain[(*n)++] = m;
    return true;
}

/* GELU's tanh form as torch exports F.gelu(approximate="tanh") and Hugging Face's gelu_new
 * write it: 0.5 x (1 + Tanh(sqrt(2/pi) (x + 0.044715 x^3))), x^3 as Pow(x, 3) or Muls in
 * any grouping, the factors on either side -> Gelu(approximate="tanh"). */
static ox_status fold_gelu_tanh(struct opt *o, struct ox_node *t) {
    struct ox_graph *g = o->g;
    if (!is_op(t, "Tanh") || t->n_inputs != 1 || t->n_outputs != 1) return OX_OK;
    struct ox_node *chain[16], *scale = producer_once(o, t->inputs[0]), *last, *mul;
    float c;
    int n = 0, s = -1;
    for (int k = 0; k < 2 && is_op(scale, "Mul") && scale->n_inputs == 2 && s < 0; k++)
        if (const_scalar(o, scale->inputs[k], -1, &c) && fabs(c - 0.7978845608) < 1e-6)
            s = scale->inputs[1 - k];
    struct ox_node *sum = s >= 0 ? producer_once(o, s) : NULL;
    if (!is_op(sum, "Add") || sum->n_inputs != 2) return OX_OK;
    int x = -1;
    for (int k = 0; k < 2 && x < 0; k++) { /* x + 0.044715 x^3, either order */
        int pw = 0, n0 = n;
        double cube = 1.0;
        if (x_power(o, sum->inputs[1 - k], sum->inputs[k], &pw, &cube, chain, &n, 11) && pw == 3 &&
            fabs(cube - 0.044715) < 1e-6)
            x = sum->inputs[k];
        else
            n = n0;
    }
    if (x < 0 || const_of(o, x) ||
        !gelu_tail(o, only_reader(o, t->outputs[0]), t->outputs[0], x, &last, &mul))
        return OX_OK;
    int *ins = ox_graph_alloc(g, sizeof(int));
    struct ox_attr *at = ox_graph_alloc(g, sizeof *at);
    if (!ins || !at) return ox_err(OX_E_NOMEM, "out of memory fusing Gelu");
    ins[0] = x;
    *at = (struct ox_attr){.name = "approximate", .type = OX_ATTR_STRING, .s = "tanh", .s_len = 4};
    chain[n++] = sum, chain[n++] = scale, chain[n++] = t;
    chain[n++] = only_reader(o, t->outputs[0]);
    chain[n++] = mul;
    return replace_chain(o, chain, n, last, "Gelu", 20, ins, 1, at, 1);
}

/* ---- attention from its exported pieces ------------------------------------------------ */

/* Whether v holds one element whatever the model's inputs: a one-element constant or
 * declared value, or one computed from such values by elementwise ops and reshapes, or one
 * dim picked from a Shape (Slice [-1:], or Gather of one index). The exported scale of
 * scaled_dot_product_attention is Sqrt(Div(1, Sqrt(Cast(Slice(Shape(q), [-1], [max]))))). */
static bool one_element(struct opt *o, int v, int depth) {
    const struct ox_graph *g = o->g;
    if (v < 0 || depth > 24) return false;
    const ox_tensor *t = const_of(o, v);
    if (t) return t->kind == OX_IO_TENSOR && ox_tensor_numel(t) == 1;
    const struct ox_value *val = &g->values[v];
    if (val->kind == OX_KIND_TENSOR && val->rank >= 0 && val->dims) {
        bool ones = true;
        for (int i = 0; i < val->rank; i++) ones &= val->dims[i].value == 1;
        if (ones) return true;
    }
    if (val->producer < 0 || o->dead[val->producer]) return false;
    const struct ox_node *n = &g->nodes[val->producer];
    if (n->domain[0] || n->n_outputs != 1 || n->n_inputs < 1) return false;
    static const char *const same_count[] = {
        "Sqrt", "Cast",     "CastLike", "Reciprocal", "Neg",     "Abs",   "Exp",
        "Log",  "Identity", "Squeeze",  "Unsqueeze",  "Reshape", "Floor", "Ceil"};
    for (size_t k = 0; k < sizeof same_count / sizeof same_count[0]; k++)
        if (is_op(n, same_count[k])) return one_element(o, n->inputs[0], depth + 1);
    static const char *const binary[] = {"Add", "Sub", "Mul", "Div", "Pow"};
    for (size_t k = 0; k < sizeof binary / sizeof binary[0]; k++)
        if (is_op(n, binary[k]))
            return n->n_inputs == 2 && one_element(o, n->inputs[0], depth + 1) &&
                   one_element(o, n->inputs[1], depth + 1);
    const struct ox_value *src = &g->values[n->inputs[0]];
    bool of_shape = src->producer >= 0 && is_op(&g->nodes[src->producer], "Shape") &&
                    g->nodes[src->producer].n_attrs == 0;
    if (is_op(n, "Slice") && of_shape && n->n_inputs >= 3 && n->opset >= 10) {
        const ox_tensor *st = const_of(o, n->inputs[1]), *en = const_of(o, n->inputs[2]);
        for (int k = 3; k < n->n_inputs; k++) { /* axes [0], steps [1] */
            const ox_tensor *x = n->inputs[k] >= 0 ? const_of(o, n->inputs[k]) : NULL;
            if (n->inputs[k] >= 0 && (!x || x->dtype != OX_INT64 || ox_tensor_numel(x) != 1 ||
                                      *(const int64_t *)x->data != (k == 3 ? 0 : 1)))
                return false;
        }
        return st && en && st->dtype == OX_INT64 && en->dtype == OX_INT64 &&
               ox_tensor_numel(st) == 1 && ox_tensor_numel(en) == 1 &&
               *(const int64_t *)st->data == -1 && *(const int64_t *)en->data >= INT32_MAX;
    }
    if (is_op(n, "Gather") && of_shape && n->n_inputs == 2 && ox_attr_int(n, "axis", 0) == 0) {
        const ox_tensor *ix = const_of(o, n->inputs[1]);
        return ix && ox_tensor_numel(ix) == 1;
    }
    return false;
}

/* What FusedAttention takes in place of the pieces: the operands' sources, factors and
 * perms, and the nodes that go. */
#define ATTN_PROG_MAX   96 /* ints of one view program */
#define ATTN_SHAPES_MAX 16

struct attn_match {
    struct ox_node *chain[16];
    int n_chain;
    double scale;
    int dyn[3];                     /* dynamic factors on Q, KT, the scores (-1: none) */
    const struct ox_attr *perm_y;   /* a Transpose of the product, absorbed */
    int64_t prog[3][ATTN_PROG_MAX]; /* view programs of Q, KT, V (kernels/op.h) */
    int prog_len[3];
    int shapes[ATTN_SHAPES_MAX]; /* int tensors the programs read (Reshape shapes, Slice
                                  * parameters): inputs from slot OX_FATTN_SHAPES */
    int n_shapes;
};

/* n is Mul(v, f), Mul(f, v) or Div(v, f) with f one element (a constant: its value goes
 * into the scale; else, for Mul, f becomes dynamic factor `slot`). m is left as it was when
 * it is not. */
static bool take_factor(struct opt *o, struct attn_match *m, const struct ox_node *n, int v,
                        int slot) {
    bool mul = is_op(n, "Mul"), div = is_op(n, "Div");
    if (!(mul || div) || n->n_inputs != 2 || n->inputs[0] == n->inputs[1]) return false;
    if (div && n->inputs[0] != v) return false;
    int f = n->inputs[0] == v ? n->inputs[1] : n->inputs[0];
    const ox_tensor *t = const_of(o, f);
    if (t) {
        ox_dtype dt = t->dtype;
        if (t->kind != OX_IO_TENSOR || ox_tensor_numel(t) != 1 || t->rank > 2 ||
            !(dt == OX_FLOAT || dt == OX_DOUBLE || dt == OX_FLOAT16 || dt == OX_BFLOAT16))
            return false;
        double c = ox_get_f64(t, 0);
        if (!(c != 0 && isfinite(c))) return false;
        m->scale *= div ? 1.0 / c : c;
        return true;
    }
    if (div || m->dyn[slot] >= 0 || !one_element(o, f, 0)) return false;
    m->dyn[slot] = f;
    return true;
}

/* Whether v's value is known when a plan is built (shapes then known): constants, Shape-like
 * ops, and deterministic ops of such values (the Concat(Unsqueeze(Gather(Shape))) that
 * exporters compute Reshape targets with). *budget bounds the walk. */
static bool foldable(struct opt *o, int v, int *budget) {
    const struct ox_graph *g = o->g;
    if (v < 0 || --*budget < 0) return false;
    if (const_of(o, v)) return true;
    int p = g->values[v].producer;
    if (ox_graph_is_input(g, v) || p < 0 || o->dead[p]) return false;
    const struct ox_node *n = &g->nodes[p];
    if (!n->op || (n->op->flags & OX_OP_NONDETERMINISTIC)) return false;
    for (int a = 0; a < n->n_attrs; a++)
        if (n->attrs[a].type == OX_ATTR_GRAPH || n->attrs[a].type == OX_ATTR_GRAPHS) return false;
    if (n->op->flags & OX_OP_SHAPE_ONLY) return true;
    for (int k = 0; k < n->n_inputs; k++)
        if (n->inputs[k] >= 0 && !foldable(o, n->inputs[k], budget)) return false;
    return true;
}

/* Constant int64/int32 values of v (at most max), or -1. */
static int const_ints(struct opt *o, int v, int64_t *out, int max) {
    const ox_tensor *t = v >= 0 ? const_of(o, v) : NULL;
    if (!t || t->kind != OX_IO_TENSOR || (t->dtype != OX_INT64 && t->dtype != OX_INT32) ||
        t->rank > 1)
        return -1;
    int64_t c = ox_tensor_numel(t);
    if (c > max) return -1;
    for (int64_t i = 0; i < c; i++)
        out[i] =
            t->dtype == OX_INT64 ? ((const int64_t *)t->data)[i] : ((const int32_t *)t->data)[i];
    return (int)c;
}

/* Node n (reading the value on its way to an operand) as one view op: its ints in op[] (the
 * count returned; 0: not a view op, -1: Identity, nothing to add). */
static int view_op(struct opt *o, struct attn_match *m, const struct ox_node *n, int64_t *op) {
    int64_t v[OX_MAX_RANK * 3];
    int c;
    if (n->domain[0] || n->n_outputs != 1 || n->n_inputs < 1) return 0;
    if (is_op(n, "Identity")) return -1;
    if (is_op(n, "Transpose")) {
        const struct ox_attr *p = ox_node_attr(n, "perm");
        if (!p || p->type != OX_ATTR_INTS || p->n < 1 || p->n > OX_MAX_RANK) return 0;
        op[0] = OX_VIEW_TRANSPOSE, op[1] = p->n;
        memcpy(op + 2, p->ints, sizeof(int64_t) * (size_t)p->n);
        return 2 + p->n;
    }
    if (is_op(n, "Reshape")) {
        int budget = 256;
        if (n->opset < 5 || n->n_inputs != 2 || m->n_shapes == ATTN_SHAPES_MAX ||
            !foldable(o, n->inputs[1], &budget))
            return 0;
        int slot = -1;
        for (int i = 0; i < m->n_shapes && slot < 0; i++)
            if (m->shapes[i] == n->inputs[1]) slot = i;
        if (slot < 0) m->shapes[slot = m->n_shapes++] = n->inputs[1];
        op[0] = OX_VIEW_RESHAPE, op[1] = OX_FATTN_SHAPES + slot;
        op[2] = n->opset >= 14 && ox_attr_int(n, "allowzero", 0) != 0; /* as Reshape reads it */
        return 3;
    }
    if (is_op(n, "Squeeze") || is_op(n, "Unsqueeze")) {
        bool sq = is_op(n, "Squeeze");
        if (n->opset < 13) {
            const struct ox_attr *a = ox_node_attr(n, "axes");
            if (a && (a->type != OX_ATTR_INTS || a->n > OX_MAX_RANK)) return 0;
            c = a ? a->n : 0;
            if (c) memcpy(v, a->ints, sizeof(int64_t) * (size_t)c);
        } else {
            c = n->n_inputs > 1 && n->inputs[1] >= 0 ? const_ints(o, n->inputs[1], v, OX_MAX_RANK)
                                                     : 0;
        }
        if (c < 0 || (!sq && c == 0)) return 0;
        op[0] = sq ? OX_VIEW_SQUEEZE : OX_VIEW_UNSQUEEZE, op[1] = c;
        memcpy(op + 2, v, sizeof(int64_t) * (size_t)c);
        return 2 + c;
    }
    if (is_op(n, "Gather")) {
        const ox_tensor *ix = n->n_inputs == 2 ? const_of(o, n->inputs[1]) : NULL;
        if (!ix || ix->rank > 1 || const_ints(o, n->inputs[1], v, 1) != 1) return 0;
        op[0] = OX_VIEW_GATHER, op[1] = ox_attr_int(n, "axis", 0), op[2] = v[0];
        op[3] = ix->rank == 1;
        return 4;
    }
    if (is_op(n, "Slice")) { /* starts, ends, axes, steps: inputs known at plan time */
        int budget = 256, slots[4] = {-1, -1, -1, -1}, taken = m->n_shapes;
        if (n->opset < 10 || n->n_inputs < 3 || n->n_inputs > 5) return 0;
        for (int k = 1; k < n->n_inputs; k++) {
            int v = n->inputs[k];
            if (v < 0) continue;
            if (!foldable(o, v, &budget)) break;
            int slot = -1;
            for (int i = 0; i < m->n_shapes && slot < 0; i++)
                if (m->shapes[i] == v) slot = i;
            if (slot < 0 && m->n_shapes < ATTN_SHAPES_MAX) m->shapes[slot = m->n_shapes++] = v;
            if (slot < 0) break;
            slots[k - 1] = OX_FATTN_SHAPES + slot;
        }
        if (slots[0] < 0 || slots[1] < 0 ||
            (n->n_inputs > 3 && n->inputs[3] >= 0 && slots[2] < 0) ||
            (n->n_inputs > 4 && n->inputs[4] >= 0 && slots[3] < 0)) {
            m->n_shapes = taken;
            return 0;
        }
        op[0] = OX_VIEW_SLICE;
        memcpy(op + 1, (int64_t[]){slots[0], slots[1], slots[2], slots[3]}, sizeof(int64_t) * 4);
        return 5;
    }
    return 0;
}

/* Back from v through view ops (which move no arithmetic: the fused node reads their source
 * through the program; they go when nothing else reads them). The source. */
static int peel_view(struct opt *o, struct attn_match *m, int v, int which) {
    int64_t ops[OX_VIEW_MAX_OPS][2 + 3 * OX_MAX_RANK];
    int lens[OX_VIEW_MAX_OPS], n_ops = 0, total = 0;
    for (int guard = 0; guard < 2 * OX_VIEW_MAX_OPS && n_ops < OX_VIEW_MAX_OPS; guard++) {
        const struct ox_node *n = producer_of(o, v);
        if (!n) break;
        int taken = m->n_shapes, len = view_op(o, m, n, ops[n_ops]);
        if (len == 0 || total + len > ATTN_PROG_MAX) {
            m->n_shapes = taken;
            break;
        }
        v = n->inputs[0];
        if (len < 0) continue; /* Identity */
        lens[n_ops++] = len;
        total += len;
    }
    if (!n_ops) return v; /* (an op that did not fit gave back its shape slot) */
    int at = 0;
    for (int i = n_ops - 1; i >= 0; i--) { /* from the source toward the operand */
        memcpy(m->prog[which] + at, ops[i], sizeof(int64_t) * (size_t)lens[i]);
        at += lens[i];
    }
    m->prog_len[which] = at;
    return v;
}

/* Back from v through factors (into `slot`), then view ops (into prog[which]); the value the
 * fused node reads. */
static int peel_operand(struct opt *o, struct attn_match *m, int v, int slot, int which) {
    for (int k = 0; k < 2 && slot >= 0 && m->n_chain < 14; k++) {
        struct ox_node *p = producer_once(o, v);
        if (!p || p->n_outputs != 1) break;
        int in = -1;
        for (int side = 0; side < 2 && p->n_inputs == 2 && in < 0; side++)
            if (take_factor(o, m, p, p->inputs[side], slot)) in = p->inputs[side];
        if (in < 0) break;
        m->chain[m->n_chain++] = p;
        v = in;
    }
    return peel_view(o, m, v, which);
}

static ox_status add_ints(struct ox_graph *g, struct ox_attr *at, const char *name,
                          const int64_t *v, int n) {
    int64_t *p = ox_graph_alloc(g, sizeof(int64_t) * (size_t)(n ? n : 1));
    if (!p) return ox_err(OX_E_NOMEM, "out of memory fusing attention");
    memcpy(p, v, sizeof(int64_t) * (size_t)n);
    *at = (struct ox_attr){.name = name, .type = OX_ATTR_INTS, .n = n, .ints = p};
    return OX_OK;
}

/* ONNX Runtime's FusedMatMul (com.microsoft; its optimizer's MatMul with Transposes and a
 * scale folded in), as attention's first product (any attributes) or second (second: the
 * softmax's output taken as it is, alpha 1). */
static bool ms_matmul(const struct ox_node *n, bool second) {
    if (!n || strcmp(n->domain, "com.microsoft") || strcmp(n->op_type, "FusedMatMul")) return false;
    return !second || (!ox_attr_int(n, "transA", 0) && !ox_attr_int(n, "transBatchA", 0) &&
                       ox_attr_float(n, "alpha", 1.0f) == 1.0f);
}

/* FusedMatMul n's permutation of an operand (its attributes trans and batch) at the end of
 * program `which`; false when the program has no room. */
static bool prog_matperm(struct attn_match *m, int which, const struct ox_node *n,
                         const char *trans, const char *batch) {
    int64_t t = ox_attr_int(n, trans, 0) != 0, b = ox_attr_int(n, batch, 0) != 0;
    if (!t && !b) return true;
    int len = m->prog_len[which], ops = prog_ops(m->prog[which], len);
    if (ops < 0 || ops + 1 > OX_VIEW_MAX_OPS || len + 3 > ATTN_PROG_MAX) return false;
    int64_t *p = m->prog[which] + len;
    p[0] = OX_VIEW_MATPERM, p[1] = t, p[2] = b;
    m->prog_len[which] = len + 3;
    return true;
}

/* MatMul(Q', KT') [-> factors] [-> Add(mask)] -> Softmax(axis -1) -> MatMul(., V'), where
 * Q' and KT' are Q and KT through factors then view ops, V' is V through view ops, and the
 * product may feed one Transpose: one FusedAttention node. Every piece but the view ops and
 * the sources must be read only by the next (view ops go when nothing else reads them). */
static ox_status fold_attention(struct opt *o, struct ox_node *sm) {
    struct ox_graph *g = o->g;
    if (!is_op(sm, "Softmax") || sm->n_inputs != 1 || sm->n_outputs != 1) return OX_OK;
    const struct ox_attr *ax = ox_node_attr(sm, "axis");
    if (ax ? ax->type != OX_ATTR_INT || ax->i != -1 : sm->opset < 13) return OX_OK;
    struct attn_match m = {.scale = 1.0, .dyn = {-1, -1, -1}};
    m.chain[m.n_chain++] = sm;
    int v = sm->inputs[0], mask = -1;
    struct ox_node *mm1 = NULL;
    /* the scores, possibly through Add(mask) and factors */
    for (int side = -1; side < 2 && !mm1; side++) {
        struct attn_match keep = m;
        int s = v;
        struct ox_node *add = producer_once(o, v);
        if (side >= 0) {
            if (!is_op(add, "Add") || add->n_inputs != 2 || add->n_outputs != 1) break;
            s = add->inputs[side];
            mask = add->inputs[1 - side];
            m.chain[m.n_chain++] = add;
        }
        for (int k = 0; k < 2; k++) { /* factors on the scores */
            struct ox_node *f = producer_once(o, s);
            int in = -1;
            for (int fs = 0; f && f->n_outputs == 1 && fs < 2 && in < 0; fs++)
                if (f->n_inputs == 2 && take_factor(o, &m, f, f->inputs[fs], 2)) in = f->inputs[fs];
            if (in < 0) break;
            m.chain[m.n_chain++] = f;
            s = in;
        }
        struct ox_node *p = producer_once(o, s);
        if ((is_op(p, "MatMul") || ms_matmul(p, false)) && p->n_inputs == 2 && p->n_outputs == 1)
            mm1 = p;
        else
            m = keep, mask = -1;
    }
    if (!mm1) return OX_OK;
    m.chain[m.n_chain++] = mm1;
    struct ox_node *mm2 = only_reader(o, sm->outputs[0]);
    if (!(is_op(mm2, "MatMul") || ms_matmul(mm2, true)) || mm2->n_inputs != 2 ||
        mm2->inputs[0] != sm->outputs[0] || mm2->inputs[1] == sm->outputs[0] || mm2->n_outputs != 1)
        return OX_OK;
    int q = peel_operand(o, &m, mm1->inputs[0], 0, 0);
    int k = peel_operand(o, &m, mm1->inputs[1], 1, 1);
    int vv = peel_operand(o, &m, mm2->inputs[1], -1, 2);
    /* ONNX Runtime's FusedMatMul: its alpha scales the scores, its operands' permutations end
     * their programs */
    if (!is_op(mm1, "MatMul")) {
        m.scale *= ox_attr_float(mm1, "alpha", 1.0f);
        if (!prog_matperm(&m, 0, mm1, "transA", "transBatchA") ||
            !prog_matperm(&m, 1, mm1, "transB", "transBatchB"))
            return OX_OK;
    }
    if (!is_op(mm2, "MatMul") && !prog_matperm(&m, 2, mm2, "transB", "transBatchB")) return OX_OK;
    struct ox_node *last = mm2, *ty = only_reader(o, mm2->outputs[0]);
    const struct ox_attr *py = ty && is_op(ty, "Transpose") ? ox_node_attr(ty, "perm") : NULL;
    if (py && py->type == OX_ATTR_INTS && py->n >= 2 && py->n <= OX_MAX_RANK) {
        m.perm_y = py;
        m.chain[m.n_chain++] = mm2;
        last = ty;
    }
    /* inputs: Q, KT, V, mask, the dynamic factors, the views' Reshape shapes; trailing
     * absent ones dropped */
    int ins_all[OX_FATTN_SHAPES + ATTN_SHAPES_MAX] = {q, k, vv, mask, m.dyn[0], m.dyn[1], m.dyn[2]};
    int n_ins = OX_FATTN_SHAPES + m.n_shapes;
    for (int i = 0; i < m.n_shapes; i++) ins_all[OX_FATTN_SHAPES + i] = m.shapes[i];
    while (n_ins > 3 && ins_all[n_ins - 1] < 0) n_ins--;
    int *ins = ox_graph_alloc(g, sizeof(int) * (size_t)n_ins);
    struct ox_attr *attrs = ox_graph_alloc(g, sizeof *attrs * 5);
    if (!ins || !attrs) return ox_err(OX_E_NOMEM, "out of memory fusing attention");
    memcpy(ins, ins_all, sizeof(int) * (size_t)n_ins);
    int n_attrs = 0;
    static const char *const prog_names[] = {"view_q", "view_k", "view_v"};
    for (int i = 0; i < 3; i++) {
        if (!m.prog_len[i]) continue;
        ox_status st = add_ints(g, &attrs[n_attrs++], prog_names[i], m.prog[i], m.prog_len[i]);
        if (st) return st;
    }
    if (m.perm_y) {
        ox_status st = add_ints(g, &attrs[n_attrs++], "perm_y", m.perm_y->ints, m.perm_y->n);
        if (st) return st;
    }
    attrs[n_attrs++] =
        (struct ox_attr){.name = "scale", .type = OX_ATTR_FLOAT, .f = (float)m.scale};
    /* every chain node but `last` goes; `last` becomes the fused node */
    struct ox_node *gone[16];
    int n_gone = 0;
    for (int i = 0; i < m.n_chain; i++)
        if (m.chain[i] != last) gone[n_gone++] = m.chain[i];
    o->st->fused_attention++;
    return replace_chain(o, gone, n_gone, last, "FusedAttention", 0, ins, n_ins, attrs, n_attrs);
}

/* The perm of t when t is a Transpose (one input and output) whose perm keeps the last axis
 * (rows stay rows: batch-first attention's swaps), else NULL. */
static const struct ox_attr *rows_transpose(const struct ox_node *t) {
    const struct ox_attr *perm = is_op(t, "Transpose") ? ox_node_attr(t, "perm") : NULL;
    if (!perm || perm->type != OX_ATTR_INTS || t->n_inputs != 1 || t->inputs[0] < 0 ||
        t->n_outputs != 1 || perm->n < 2 || perm->n > OX_MAX_RANK ||
        perm->ints[perm->n - 1] != perm->n - 1)
        return NULL;
    bool seen[OX_MAX_RANK] = {false};
    for (int i = 0; i < perm->n; i++) {
        if (perm->ints[i] < 0 || perm->ints[i] >= perm->n || seen[perm->ints[i]]) return NULL;
        seen[perm->ints[i]] = true;
    }
    return perm;
}

/* ---- residual Add into LayerNormalization ---------------------------------------------- */

/* Add(a, b) -> LayerNormalization, the Add's output read by nothing else and the
 * normalization's Mean and InvStdDev by nothing: one ai.onnxexec SkipLayerNormalization(a, b,
 * Scale, B) (kernels/cpu/norm.c), the post-norm transformer's residual and norm in one pass
 * (on the GPU: the sum is never written). OX_FUSE_SKIP_LAYERNORM=0: not done. */
static ox_status fold_skip_layernorm(struct opt *o, struct ox_node *ln) {
    struct ox_graph *g = o->g;
    bool is_ln = is_op(ln, "LayerNormalization") || is_fused(ln, "LayerNormalization");
    if (!is_ln || ln->n_inputs < 2 || ln->n_inputs > 3 || ln->inputs[0] < 0 || ln->inputs[1] < 0 ||
        ln->n_outputs < 1 || ln->outputs[0] < 0)
        return OX_OK;
    for (int k = 1; k < ln->n_outputs; k++)
        if (ln->outputs[k] >= 0 && o->uses[ln->outputs[k]] > 0) return OX_OK;
    if (ox_attr_int(ln, "stash_type", OX_FLOAT) != OX_FLOAT) return OX_OK;
    int v = ln->inputs[0], p = g->values[v].producer;
    struct ox_node *add = p >= 0 && !o->dead[p] ? &g->nodes[p] : NULL;
    if (!is_op(add, "Add") || add->n_inputs != 2 || add->inputs[0] < 0 || add->inputs[1] < 0 ||
        add->n_outputs != 1 || only_reader(o, v) != ln)
        return OX_OK;
    int n_ins = ln->n_inputs > 2 && ln->inputs[2] >= 0 ? 4 : 3;
    int *ins = ox_graph_alloc(g, sizeof(int) * 4);
    struct ox_attr *attrs = ox_graph_alloc(g, sizeof *attrs * 3);
    if (!ins || !attrs) return ox_err(OX_E_NOMEM, "out of memory fusing SkipLayerNormalization");
    ins[0] = add->inputs[0], ins[1] = add->inputs[1], ins[2] = ln->inputs[1];
    ins[3] = n_ins > 3 ? ln->inputs[2] : -1;
    attrs[0] =
        (struct ox_attr){.name = "axis", .type = OX_ATTR_INT, .i = ox_attr_int(ln, "axis", -1)};
    attrs[1] = (struct ox_attr){
        .name = "epsilon", .type = OX_ATTR_FLOAT, .f = ox_attr_float(ln, "epsilon", 1e-5f)};
    /* an addend that a Transpose keeping the last axis made, read by the Add alone (batch-first
     * attention's output, swapped back): its source becomes Skip, read through "skip_perm"
     * (Add commutes exactly) */
    struct ox_node *chain[] = {add, NULL};
    int n_chain = 1, n_attrs = 2;
    for (int side = 1; side >= 0 && n_chain == 1 && o->move_transposes; side--) {
        struct ox_node *t = producer_once(o, ins[side]);
        const struct ox_attr *perm = t ? rows_transpose(t) : NULL;
        if (!perm) continue;
        ox_status st = add_ints(g, &attrs[n_attrs++], "skip_perm", perm->ints, perm->n);
        if (st) return st;
        if (side == 0) ins[0] = ins[1];
        ins[1] = t->inputs[0];
        chain[n_chain++] = t;
    }
    for (int k = 1; k < ln->n_outputs; k++) /* unread Mean and InvStdDev go */
        if (ln->outputs[k] >= 0) g->values[ln->outputs[k]].producer = -1;
    ln->n_outputs = 1;
    o->st->fused_skip_layernorm++;
    o->st->moved_transposes += n_chain - 1;
    return replace_chain(o, chain, n_chain, ln, "SkipLayerNormalization", 0, ins, n_ins, attrs,
                         n_attrs);
}

/* ---- batch-first Transposes past the projection ---------------------------------------- */

/* The ops of view program pg[len] (kernels/op.h), or -1 where it does not parse. */
static int prog_ops(const int64_t *pg, int len) {
    int ops = 0;
    for (int at = 0; at < len; ops++) {
        int64_t op = pg[at], k = at + 1 < len ? pg[at + 1] : -1;
        if (op == OX_VIEW_TRANSPOSE || op == OX_VIEW_SQUEEZE || op == OX_VIEW_UNSQUEEZE)
            at += k < 0 || k > OX_MAX_RANK ? len + 1 : 2 + (int)k;
        else
            at += op == OX_VIEW_RESHAPE || op == OX_VIEW_MATPERM ? 3
                  : op == OX_VIEW_GATHER                         ? 4
                  : op == OX_VIEW_SLICE                          ? 5
                                                                 : len + 1;
        if (at > len) return -1;
    }
    return ops;
}

/* Operand `slot` (0-2) of FusedAttention f with Transpose(perm p[r]) put before its program
 * (merged into a Transpose the program starts with); false (f untouched) when the program
 * has no room or does not parse. dry: only whether it can be done. */
static bool prog_prepend(struct opt *o, struct ox_node *f, int slot, const int64_t *p, int r,
                         bool dry) {
    static const char *const names[] = {"view_q", "view_k", "view_v"};
    const int64_t *pg = NULL;
    int len = ox_attr_ints(f, names[slot], &pg);
    if (len < 0) len = 0;
    int ops = prog_ops(pg, len);
    int64_t out[ATTN_PROG_MAX];
    int n = 0;
    if (ops < 0 || ops > OX_VIEW_MAX_OPS || len > ATTN_PROG_MAX) return false; /* (a model's own) */
    if (len >= 2 + r && pg[0] == OX_VIEW_TRANSPOSE && pg[1] == r) {            /* T(T(x, p), q) */
        bool identity = true;
        out[n++] = OX_VIEW_TRANSPOSE, out[n++] = r;
        for (int i = 0; i < r; i++) {
            if (pg[2 + i] < 0 || pg[2 + i] >= r) return false;
            out[n++] = p[pg[2 + i]];
            identity &= out[n - 1] == i;
        }
        if (identity) n = 0; /* the two cancel */
        pg += 2 + r, len -= 2 + r;
    } else {
        if (ops + 1 > OX_VIEW_MAX_OPS || len + 2 + r > ATTN_PROG_MAX) return false;
        out[n++] = OX_VIEW_TRANSPOSE, out[n++] = r;
        for (int i = 0; i < r; i++) out[n++] = p[i];
    }
    if (dry) return true;
    if (len) memcpy(out + n, pg, sizeof(int64_t) * (size_t)len);
    n += len;
    struct ox_attr *at = (struct ox_attr *)ox_node_attr(f, names[slot]);
    if (!at) { /* a new attribute: the node's array grows by one */
        struct ox_attr *a = ox_graph_alloc(o->g, sizeof *a * (size_t)(f->n_attrs + 1));
        if (!a) return false;
        if (f->n_attrs) memcpy(a, f->attrs, sizeof *a * (size_t)f->n_attrs);
        f->attrs = a;
        at = &a[f->n_attrs++];
    }
    return add_ints(o->g, at, names[slot], out, n) == OX_OK;
}

/* The Shape nodes that read v, directly or through nodes that only Shapes read in turn (the
 * Slices a FusedAttention's programs took over, kept for their Shapes), or -1 where anything
 * else reads it: once the plan folds the Shapes, nothing computes v. *budget bounds the
 * walk. */
static int shape_readers(struct opt *o, int v, int *budget) {
    struct ox_graph *g = o->g;
    if (o->uses[v] >= OX_USES_OUTSIDE) return -1;
    int shapes = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const struct ox_node *n = &g->nodes[i];
        bool reads = false;
        for (int k = 0; k < n->n_inputs && !o->dead[i]; k++) reads |= n->inputs[k] == v;
        if (!reads) continue;
        if (is_op(n, "Shape")) {
            shapes++;
            continue;
        }
        if (--*budget < 0 || !n->op || (n->op->flags & OX_OP_NONDETERMINISTIC)) return -1;
        for (int k = 0; k < n->n_outputs; k++) {
            int c = n->outputs[k] >= 0 ? shape_readers(o, n->outputs[k], budget) : 0;
            if (c < 0) return -1;
            shapes += c;
        }
    }
    return shapes;
}

/* FusedAttention reading a projection of a batch-first input: Y = MatMul(Transpose(X, p), W)
 * (or FusedMatMul, with a bias over the last axis), W a constant matrix and p keeping the
 * last axis, so that each row of Y is a row of X times W and Y = Transpose(MatMul(X, W), p).
 * torch's MultiheadAttention (batch_first) swaps the batch and sequence axes so before its
 * in-projection. The MatMul then reads X, and the FusedAttention nodes reading Y read its
 * result Y' through their programs with the Transpose put first: the copy of X is gone.
 * Where Shape nodes read Y too (or nodes that only Shapes read), Y = Transpose(Y', p) stays
 * for them (the plan folds the Shapes and then drops it); any other reader of Y leaves the
 * graph as it is. */
static ox_status hoist_transpose(struct opt *o, int fi, bool *added) {
    struct ox_graph *g = o->g;
    struct ox_node *f = &g->nodes[fi];
    if (!is_fused(f, "FusedAttention")) return OX_OK;
    for (int slot = 0; slot < 3 && slot < f->n_inputs; slot++) {
        int y = f->inputs[slot], pm = y >= 0 ? g->values[y].producer : -1;
        if (pm < 0 || o->dead[pm] || o->uses[y] >= OX_USES_OUTSIDE) continue;
        struct ox_node *m = &g->nodes[pm];
        bool fused = is_fused(m, "FusedMatMul");
        if (!(is_op(m, "MatMul") || fused) || m->n_inputs < 2 || m->n_outputs != 1 ||
            m->inputs[0] < 0 || m->inputs[0] == m->inputs[1])
            continue;
        const ox_tensor *w = const_of(o, m->inputs[1]);
        if (!w || w->kind != OX_IO_TENSOR || w->rank != 2) continue;
        if (m->n_inputs > 2 && m->inputs[2] >= 0) { /* FusedMatMul's bias: a vector */
            const ox_tensor *z = const_of(o, m->inputs[2]);
            if (!fused || !z || z->kind != OX_IO_TENSOR || z->rank > 1 || m->n_inputs > 3) continue;
        }
        int pt = g->values[m->inputs[0]].producer;
        const struct ox_node *t = pt >= 0 && !o->dead[pt] ? &g->nodes[pt] : NULL;
        const struct ox_attr *perm = t ? rows_transpose(t) : NULL;
        if (!perm) continue;
        int r = perm->n;
        int64_t p[OX_MAX_RANK];
        bool ok = true;
        memcpy(p, perm->ints, sizeof(int64_t) * (size_t)r);
        /* every reader of Y: an operand whose program has room, or one for Shapes only */
        int counted = 0, budget = 64;
        bool shapes = false;
        for (int i = 0; i < g->n_nodes && ok; i++) {
            struct ox_node *n = &g->nodes[i];
            if (o->dead[i]) continue;
            bool fa = is_fused(n, "FusedAttention");
            for (int k = 0; k < n->n_inputs && ok; k++) {
                if (n->inputs[k] != y) continue;
                counted++;
                if (fa && k < 3 && prog_prepend(o, n, k, p, r, true)) continue;
                ok = !fa && n->op && !(n->op->flags & OX_OP_NONDETERMINISTIC);
                if (is_op(n, "Shape")) shapes = true;
                for (int j = 0; j < n->n_outputs && ok && !is_op(n, "Shape"); j++) {
                    int c = n->outputs[j] >= 0 ? shape_readers(o, n->outputs[j], &budget) : 0;
                    ok = c >= 0;
                    shapes |= c > 0; /* (a reader that nothing reads goes with the dead) */
                }
            }
        }
        int64_t opset = ox_graph_opset(g, "");
        const struct ox_op *row = ox_op_find("", "Transpose", (int)opset);
        if (!ok || counted != o->uses[y] || (shapes && !row)) continue;
        /* Y' = MatMul(X, W); the operands read it through the Transpose */
        char name[256];
        int y2 = -1;
        for (int k = 0; k < 1000 && y2 < 0; k++) {
            if (k)
                snprintf(name, sizeof name, "%s_unpermuted_%d", g->values[y].name, k);
            else
                snprintf(name, sizeof name, "%s_unpermuted", g->values[y].name);
            if (ox_graph_find_value(g, name) < 0) y2 = ox_graph_add_value(g, name);
        }
        bool *dead = realloc(o->dead, sizeof(bool) * (size_t)(g->n_nodes + 1));
        if (y2 < 0 || !dead) return ox_err(OX_E_NOMEM, "out of memory moving a Transpose");
        o->dead = dead;
        dead[g->n_nodes] = false;
        g->values[y2].kind = g->values[y].kind;
        g->values[y2].dtype = g->values[y].dtype;
        g->values[y2].rank = -1; /* Y's dims permuted: left to the plan */
        m = &g->nodes[pm];
        m->inputs[0] = g->nodes[pt].inputs[0];
        m->outputs[0] = y2;
        g->values[y2].producer = pm;
        g->values[y].producer = -1;
        for (int i = 0; i < g->n_nodes; i++) {
            struct ox_node *n = &g->nodes[i];
            bool fa = is_fused(n, "FusedAttention");
            for (int k = 0; k < 3 && k < n->n_inputs && fa && !o->dead[i]; k++)
                if (n->inputs[k] == y) {
                    if (!prog_prepend(o, n, k, p, r, false))
                        return ox_err(OX_E_NOMEM, "out of memory moving a Transpose");
                    n->inputs[k] = y2;
                }
        }
        if (shapes) { /* Y = Transpose(Y', p), for the Shapes (appended: sorted at the end) */
            snprintf(name, sizeof name, "%s/transpose", g->values[y].name);
            struct ox_attr *a = ox_graph_alloc(g, sizeof *a);
            struct ox_node *nt =
                a ? ox_graph_add_node(g, name, "", "Transpose", 1, &y2, 1, &y) : NULL;
            if (!nt || add_ints(g, a, "perm", p, r))
                return ox_err(OX_E_NOMEM, "out of memory moving a Transpose");
            nt->opset = (int)opset;
            nt->op = row;
            nt->attrs = a;
            nt->n_attrs = 1;
            *added = true;
        }
        o->st->moved_transposes++;
        ox_status st = count_uses(o);
        if (st) return st;
        f = &g->nodes[fi]; /* the node array may have moved */
    }
    return OX_OK;
}

/* ---- ONNX Runtime's fused operators ------------------------------------------------------ */

/* A com.microsoft FusedConv or FusedGemm (ONNX Runtime's optimizer saves them; their kernels,
 * kernels/cpu/ortopt.c) becomes onnxexec's own op, which the GPU has too: the activation
 * stays in it when it is a clamp (Relu, Clip) or none; any other becomes its default-domain
 * node after it, reading a new value (appended: *added asks for the sort). An activation the
 * kernel would refuse is left for it to report. */
static ox_status adopt_ms_fused(struct opt *o, int i, bool *added) {
    struct ox_graph *g = o->g;
    struct ox_node *n = &g->nodes[i];
    bool conv = !strcmp(n->op_type, "FusedConv");
    if (strcmp(n->domain, "com.microsoft") || !(conv || !strcmp(n->op_type, "FusedGemm")) ||
        n->n_outputs != 1 || n->outputs[0] < 0)
        return OX_OK;
    struct ox_ms_activation act;
    if (ox_ms_activation(n, &act)) return OX_OK; /* the kernel says so when planned */
    const struct ox_op *row = ox_op_find(OX_DOMAIN_ONNXEXEC, conv ? "FusedConv" : "FusedGemm", 1);
    int64_t opset = ox_graph_opset(g, "");
    const struct ox_op *post = act.post ? ox_op_find("", act.post, (int)opset) : NULL;
    if (!row || (act.post && !post)) return OX_OK;
    struct ox_attr *attrs = ox_graph_alloc(g, sizeof *attrs * (size_t)(n->n_attrs + 2));
    float *clamp = ox_graph_alloc(g, sizeof(float) * 2);
    if (!attrs || !clamp) return ox_err(OX_E_NOMEM, "out of memory adopting a fused node");
    int na = ox_ms_fused_attrs(n, &act, clamp, attrs);
    if (act.post) { /* y = post(y'), y' the fused op's output */
        int y = n->outputs[0], y2 = ox_graph_add_value_like(g, y, "_preactivation");
        char vname[256];
        bool *dead = realloc(o->dead, sizeof(bool) * (size_t)(g->n_nodes + 1));
        struct ox_attr *pa = ox_graph_alloc(g, sizeof *pa * 2);
        if (y2 < 0 || !dead || !pa) return ox_err(OX_E_NOMEM, "out of memory adopting a node");
        o->dead = dead;
        dead[g->n_nodes] = false;
        memcpy(pa, act.attrs, sizeof *pa * (size_t)act.n_attrs);
        snprintf(vname, sizeof vname, "%s/%s", n->name ? n->name : "", act.post);
        struct ox_node *pn = ox_graph_add_node(g, vname, "", act.post, 1, &y2, 1, &y);
        if (!pn) return ox_err(OX_E_NOMEM, "out of memory adopting a fused node");
        pn->opset = (int)opset;
        pn->op = post;
        pn->attrs = pa;
        pn->n_attrs = act.n_attrs;
        n = &g->nodes[i]; /* the node array may have moved */
        n->outputs[0] = y2;
        g->values[y2].producer = i;
        *added = true;
    }
    n->domain = OX_DOMAIN_ONNXEXEC;
    n->op_type = conv ? "FusedConv" : "FusedGemm";
    n->opset = 1;
    n->op = row;
    n->attrs = attrs;
    n->n_attrs = na;
    o->st->adopted_nodes++;
    return count_uses(o);
}

/* ---- layouts: ONNX Runtime's NHWC operators, and Transposes that cancel ------------------ */

/* The perm of a live default-domain Transpose with an explicit, valid perm (its rank in *r). */
static bool transpose_perm(const struct ox_node *t, int64_t *p, int *r) {
    const struct ox_attr *a = is_op(t, "Transpose") ? ox_node_attr(t, "perm") : NULL;
    if (!a || a->type != OX_ATTR_INTS || a->n < 1 || a->n > OX_MAX_RANK || t->n_inputs != 1 ||
        t->inputs[0] < 0 || t->n_outputs != 1 || t->outputs[0] < 0)
        return false;
    bool seen[OX_MAX_RANK] = {false};
    for (int i = 0; i < a->n; i++) {
        if (a->ints[i] < 0 || a->ints[i] >= a->n || seen[a->ints[i]]) return false;
        seen[a->ints[i]] = true;
        p[i] = a->ints[i];
    }
    *r = a->n;
    return true;
}

/* dst = Transpose(src, p[r]), appended (the graph is sorted after the sweep). */
static ox_status append_transpose(struct opt *o, int src, int dst, const int64_t *p, int r) {
    struct ox_graph *g = o->g;
    int64_t opset = ox_graph_opset(g, "");
    const struct ox_op *row = ox_op_find("", "Transpose", (int)(opset < 1 ? 1 : opset));
    bool *dead = realloc(o->dead, sizeof(bool) * (size_t)(g->n_nodes + 1));
    if (!dead) return ox_err(OX_E_NOMEM, "out of memory moving a Transpose");
    o->dead = dead;
    dead[g->n_nodes] = false;
    char name[256];
    snprintf(name, sizeof name, "%s/transpose", g->values[dst].name);
    struct ox_attr *a = ox_graph_alloc(g, sizeof *a);
    struct ox_node *t = a ? ox_graph_add_node(g, name, "", "Transpose", 1, &src, 1, &dst) : NULL;
    if (!t || add_ints(g, a, "perm", p, r))
        return ox_err(OX_E_NOMEM, "out of memory moving a Transpose");
    t->opset = (int)opset;
    t->op = row;
    t->attrs = a;
    t->n_attrs = 1;
    return OX_OK;
}

/* Node i reads x through Transpose(x, in_perm) and writes y through Transpose(., out_perm):
 * its input 0 and output 0 become new values between it and two appended Transposes. */
static ox_status wrap_transposes(struct opt *o, int i, const int64_t *in_perm,
                                 const int64_t *out_perm, int r) {
    struct ox_graph *g = o->g;
    int x = g->nodes[i].inputs[0], y = g->nodes[i].outputs[0];
    int xt = ox_graph_add_value_like(o->g, x, "_channels_first"),
        yt = ox_graph_add_value_like(o->g, y, "_channels_first");
    if (xt < 0 || yt < 0) return ox_err(OX_E_NOMEM, "out of memory moving a Transpose");
    ox_status st = append_transpose(o, x, xt, in_perm, r);
    if (!st) st = append_transpose(o, yt, y, out_perm, r);
    if (st) return st;
    struct ox_node *n = &g->nodes[i]; /* the node array may have moved */
    n->inputs[0] = xt;
    n->outputs[0] = yt;
    g->values[yt].producer = i;
    return OX_OK;
}

/* n's attributes without `drop` (a new array from the graph's arena), or NULL on OOM. */
static struct ox_attr *attrs_without(struct ox_graph *g, const struct ox_node *n, const char *drop,
                                     int *count) {
    struct ox_attr *a = ox_graph_alloc(g, sizeof *a * (size_t)(n->n_attrs ? n->n_attrs : 1));
    if (!a) return NULL;
    *count = 0;
    for (int k = 0; k < n->n_attrs; k++)
        if (strcmp(n->attrs[k].name, drop) != 0) a[(*count)++] = n->attrs[k];
    return a;
}

/* One of ONNX Runtime's channels-last operators (below). */
static bool channels_last_op(const struct ox_node *n) {
    if (strcmp(n->domain, "com.microsoft")) return false;
    if (!strcmp(n->op_type, "NhwcMaxPool")) return true;
    return (!strcmp(n->op_type, "QLinearConv") || !strcmp(n->op_type, "QLinearAveragePool") ||
            !strcmp(n->op_type, "QLinearGlobalAveragePool")) &&
           ox_attr_int(n, "channels_last", 0);
}

/* ONNX Runtime's channels-last operators (its NHWC transformer, "all" level on x86) become
 * the default domain's channels-first ones between two Transposes, which then cancel with
 * their neighbours (below): com.microsoft QLinearConv with channels_last (rank from its
 * kernel_shape or W), NhwcMaxPool (the default domain's MaxPool of bytes from opset 12), and
 * QLinearAveragePool / QLinearGlobalAveragePool with channels_last (staying com.microsoft;
 * the global one where its input comes through a Transpose that gives the rank). */
static ox_status lower_nhwc(struct opt *o, int i, bool *changed) {
    struct ox_graph *g = o->g;
    struct ox_node *n = &g->nodes[i];
    if (!channels_last_op(n)) return OX_OK;
    bool conv = !strcmp(n->op_type, "QLinearConv"), pool = !strcmp(n->op_type, "NhwcMaxPool");
    bool gap = !strcmp(n->op_type, "QLinearGlobalAveragePool");
    if (n->n_inputs < 1 || n->inputs[0] < 0 || n->n_outputs != 1 || n->outputs[0] < 0) return OX_OK;
    int64_t opset = ox_graph_opset(g, "");
    const int64_t *ks;
    int r = -1, nk = ox_attr_ints(n, "kernel_shape", &ks);
    if (nk >= 1) r = nk + 2;
    const ox_tensor *w = conv && n->n_inputs > 3 ? const_of(o, n->inputs[3]) : NULL;
    if (r < 0 && w) r = w->rank;
    int64_t pp[OX_MAX_RANK];
    int pr;
    if (r < 0 && gap && transpose_perm(producer_of(o, n->inputs[0]), pp, &pr)) r = pr;
    if (r < 3 || r > OX_MAX_RANK || (conv && opset < 10) || (pool && opset < 12)) return OX_OK;
    const struct ox_op *row = conv   ? ox_op_find("", "QLinearConv", (int)opset)
                              : pool ? ox_op_find("", "MaxPool", (int)opset)
                                     : n->op;
    int na;
    struct ox_attr *attrs = attrs_without(g, n, "channels_last", &na);
    if (!row || !attrs) return attrs ? OX_OK : ox_err(OX_E_NOMEM, "out of memory");
    if (conv || pool) {
        n->domain = "";
        n->op_type = conv ? "QLinearConv" : "MaxPool";
        n->opset = (int)opset;
        n->op = row;
    }
    n->attrs = attrs;
    n->n_attrs = na;
    int64_t to_first[OX_MAX_RANK], to_last[OX_MAX_RANK];
    ox_nhwc_perms(r, to_first, to_last);
    *changed = true;
    ox_status st = wrap_transposes(o, i, to_first, to_last, r);
    return st ? st : count_uses(o);
}

/* Transpose(Transpose(x, p), q) with q after p the identity: its readers read x (a graph
 * output, or a value a subgraph reads by name, becomes Identity(x), a view). */
static ox_status cancel_transpose(struct opt *o, int i, bool *changed) {
    struct ox_graph *g = o->g;
    struct ox_node *t2 = &g->nodes[i];
    int64_t p[OX_MAX_RANK], q[OX_MAX_RANK];
    int rp, rq;
    struct ox_node *t1 = transpose_perm(t2, q, &rq) ? producer_of(o, t2->inputs[0]) : NULL;
    if (!t1 || !transpose_perm(t1, p, &rp) || rp != rq) return OX_OK;
    for (int d = 0; d < rq; d++)
        if (p[q[d]] != d) return OX_OK;
    int y = t2->outputs[0], x = t1->inputs[0];
    if (o->uses[y] >= OX_USES_OUTSIDE) { /* a graph output, or read by name: y stays, a view */
        const struct ox_op *id = ox_op_find("", "Identity", t2->opset);
        if (!id) return OX_OK;
        t2->op_type = "Identity";
        t2->op = id;
        t2->n_attrs = 0; /* (the perm was in the arena) */
        t2->inputs[0] = x;
        *changed = true;
        o->st->moved_transposes++;
        return count_uses(o);
    }
    for (int k = 0; k < g->n_nodes; k++) {
        if (o->dead[k]) continue;
        struct ox_node *n = &g->nodes[k];
        for (int j = 0; j < n->n_inputs; j++)
            if (n->inputs[j] == y) n->inputs[j] = x;
    }
    o->dead[i] = true;
    g->values[y].producer = -1;
    *changed = true;
    o->st->moved_transposes++;
    return count_uses(o);
}

/* Elementwise ops a Transpose may move past: their data inputs (-1: none), every other input
 * absent or a constant of one element. */
static const struct {
    const char *domain, *type;
    int data[2];
} eltwise[] = {
    {"", "Relu", {0, -1}},
    {"", "Sigmoid", {0, -1}},
    {"", "Tanh", {0, -1}},
    {"", "HardSigmoid", {0, -1}},
    {"", "HardSwish", {0, -1}},
    {"", "LeakyRelu", {0, -1}},
    {"", "Clip", {0, -1}},
    {"", "Cast", {0, -1}},
    {"", "QuantizeLinear", {0, -1}},
    {"", "DequantizeLinear", {0, -1}},
    {"", "Add", {0, 1}},
    {"", "Sub", {0, 1}},
    {"", "Mul", {0, 1}},
    {"", "Div", {0, 1}},
    {"com.microsoft", "QLinearAdd", {0, 3}},
    {"com.microsoft", "QLinearMul", {0, 3}},
    {"com.microsoft", "QLinearSigmoid", {0, -1}},
    {"com.microsoft", "QLinearLeakyRelu", {0, -1}},
    {"com.microsoft", "QuickGelu", {0, -1}},
};

static int eltwise_row(const struct ox_node *e) {
    for (size_t k = 0; k < sizeof eltwise / sizeof *eltwise; k++)
        if (!strcmp(e->domain, eltwise[k].domain) && !strcmp(e->op_type, eltwise[k].type))
            return (int)k;
    return -1;
}

/* Whether every reader of v is a node (no graph output, no subgraph) of the elementwise ops
 * above: a Transpose writing v can move past all of them and go. */
static bool read_by_eltwise(struct opt *o, int v) {
    if (o->uses[v] >= OX_USES_OUTSIDE) return false;
    struct ox_graph *g = o->g;
    for (int k = 0; k < g->n_nodes; k++) {
        if (o->dead[k]) continue;
        const struct ox_node *n = &g->nodes[k];
        for (int j = 0; j < n->n_inputs; j++)
            if (n->inputs[j] == v && eltwise_row(n) < 0) return false;
    }
    return true;
}

/* Whether a Transpose(p) writing v would meet its inverse: every reader of v is a Transpose
 * undoing p, or an elementwise op above whose output leads to one in turn (depth bounds the
 * walk). Only then does moving a Transpose past an op pay. */
static bool meets_inverse(struct opt *o, int v, const int64_t *p, int r, int depth) {
    struct ox_graph *g = o->g;
    if (o->uses[v] == 0 || o->uses[v] >= OX_USES_OUTSIDE || depth > 16) return false;
    for (int k = 0; k < g->n_nodes; k++) {
        if (o->dead[k]) continue;
        const struct ox_node *n = &g->nodes[k];
        bool reads = false;
        for (int j = 0; j < n->n_inputs; j++) reads |= n->inputs[j] == v;
        if (!reads) continue;
        int64_t q[OX_MAX_RANK], to_first[OX_MAX_RANK], to_last[OX_MAX_RANK];
        int rq;
        ox_nhwc_perms(r, to_first, to_last);
        if (transpose_perm(n, q, &rq)) {
            bool inverse = rq == r;
            for (int d = 0; d < r && inverse; d++) inverse = p[q[d]] == d;
            if (!inverse) return false;
        } else if (channels_last_op(n) && n->inputs[0] == v) {
            /* lowered (lower_nhwc) it reads v through Transpose(to_first) */
            if (memcmp(p, to_last, sizeof(int64_t) * (size_t)r) != 0) return false;
        } else if (eltwise_row(n) < 0 || n->n_outputs != 1 || n->outputs[0] < 0 ||
                   !meets_inverse(o, n->outputs[0], p, r, depth + 1)) {
            return false;
        }
    }
    return true;
}

static bool scalar_const(struct opt *o, int v) {
    const ox_tensor *t = v >= 0 ? const_of(o, v) : NULL;
    return t && t->kind == OX_IO_TENSOR && ox_tensor_numel(t) == 1;
}

/* E(Transpose(a, p) [, Transpose(b, p)]) -> Transpose(E(a [, b]), p), for the elementwise ops
 * above, where only such ops read the Transposes (each of them takes its own Transpose after
 * it, the one before goes; a data input may instead be a constant of one element) and the
 * moved Transpose meets its inverse further on (meets_inverse): it moves toward the one that
 * cancels it, and nowhere else. */
static ox_status sink_transpose(struct opt *o, int i, bool *changed) {
    struct ox_graph *g = o->g;
    struct ox_node *e = &g->nodes[i];
    int row = eltwise_row(e);
    if (row < 0 || e->n_outputs != 1 || e->outputs[0] < 0) return OX_OK;
    int64_t p[OX_MAX_RANK] = {0}, q[OX_MAX_RANK];
    int r = 0, moved = 0, src[2] = {-1, -1};
    for (int k = 0; k < e->n_inputs; k++) {
        int v = e->inputs[k], which = eltwise[row].data[0] == k   ? 0
                                      : eltwise[row].data[1] == k ? 1
                                                                  : -1;
        if (which < 0) {
            if (v >= 0 && !scalar_const(o, v)) return OX_OK;
            continue;
        }
        if (v < 0) return OX_OK;
        struct ox_node *t = producer_of(o, v);
        int rq;
        if (!transpose_perm(t, q, &rq)) {
            if (!scalar_const(o, v)) return OX_OK;
            continue;
        }
        if (!read_by_eltwise(o, v) || (r && (rq != r || memcmp(p, q, sizeof(int64_t) * (size_t)r))))
            return OX_OK;
        r = rq;
        memcpy(p, q, sizeof(int64_t) * (size_t)r);
        src[which] = t->inputs[0];
        moved++;
    }
    if (!moved || !meets_inverse(o, e->outputs[0], p, r, 0)) return OX_OK;
    int y = e->outputs[0], y2 = ox_graph_add_value_like(o->g, y, "_unpermuted");
    if (y2 < 0) return ox_err(OX_E_NOMEM, "out of memory moving a Transpose");
    for (int w = 0; w < 2; w++)
        if (src[w] >= 0) e->inputs[eltwise[row].data[w]] = src[w];
    e->outputs[0] = y2;
    g->values[y2].producer = i;
    ox_status st = append_transpose(o, y2, y, p, r);
    if (st) return st;
    *changed = true;
    return count_uses(o);
}

/* The sweeps: channels-last operators lowered, then Transposes moved down and cancelled
 * until nothing changes (each sweep ends sorted, without the dead). */
static ox_status layouts(struct opt *o) {
    struct ox_graph *g = o->g;
    ox_status rc = OX_OK;
    for (int sweep = 0; sweep < 64 && !rc; sweep++) {
        bool changed = false;
        for (int i = 0, n0 = g->n_nodes; i < n0 && !rc; i++) {
            if (o->dead[i]) continue;
            if (!(rc = lower_nhwc(o, i, &changed)) && !o->dead[i])
                rc = cancel_transpose(o, i, &changed);
            if (!rc && !o->dead[i]) rc = sink_transpose(o, i, &changed);
        }
        if (rc || !changed) break;
        remove_dead(o);
        if ((rc = ox_graph_sort(g))) break;
        memset(o->dead, 0, sizeof(bool) * (size_t)g->n_nodes);
        rc = count_uses(o);
    }
    return rc;
}

/* ---- dead code ------------------------------------------------------------------------- */

static void remove_dead(struct opt *o) {
    struct ox_graph *g = o->g;
    /* backwards: a node whose outputs nobody reads goes, which may free its inputs */
    for (int i = g->n_nodes - 1; i >= 0; i--) {
        if (o->dead[i]) continue;
        const struct ox_node *n = &g->nodes[i];
        bool used = false;
        for (int k = 0; k < n->n_outputs; k++)
            if (n->outputs[k] >= 0 && o->uses[n->outputs[k]] > 0) used = true;
        if (used || (n->op && (n->op->flags & OX_OP_NONDETERMINISTIC))) continue;
        o->dead[i] = true;
        o->st->removed_nodes++;
        for (int k = 0; k < n->n_inputs; k++)
            if (n->inputs[k] >= 0) o->uses[n->inputs[k]]--;
        for (int k = 0; k < n->n_outputs; k++)
            if (n->outputs[k] >= 0) g->values[n->outputs[k]].producer = -1;
    }
    /* compact the node array, keeping the order; removed nodes free their attributes */
    int w = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        if (o->dead[i]) {
            ox_node_free_attrs(&g->nodes[i]);
            continue;
        }
        if (w != i) g->nodes[w] = g->nodes[i];
        for (int k = 0; k < g->nodes[w].n_outputs; k++)
            if (g->nodes[w].outputs[k] >= 0) g->values[g->nodes[w].outputs[k]].producer = w;
        w++;
    }
    g->n_nodes = w;
    /* initializers nothing reads: drop their data (the value stays, unnamed by any node) */
    for (int v = 0; v < g->n_values; v++) {
        struct ox_value *val = &g->values[v];
        if (!val->init || o->uses[v] > 0 || ox_graph_is_input(g, v)) continue;
        if (!val->init_borrowed) free(val->init->data);
        val->init->data = NULL;
        val->init = NULL;
        o->st->removed_constants++;
    }
}

ox_status ox_graph_optimize(struct ox_graph *g, unsigned flags, struct ox_opt_stats *st) {
    bool standard_only = flags & OX_OPT_STANDARD_ONLY, cpu = !(flags & OX_OPT_GPU);
    struct ox_opt_stats dummy;
    if (!st) st = &dummy;
    memset(st, 0, sizeof *st);
    const char *fm = getenv("OX_MOVE_TRANSPOSE");
    struct opt o = {.g = g,
                    .dead = calloc((size_t)(g->n_nodes ? g->n_nodes : 1), sizeof(bool)),
                    .st = st,
                    .move_transposes = !(fm && !strcmp(fm, "0"))};
    ox_status rc = o.dead ? count_uses(&o) : ox_err(OX_E_NOMEM, "out of memory");
    /* first, so that what follows sees onnxexec's ops, in order again */
    bool adopted = false;
    for (int i = 0, n0 = g->n_nodes; i < n0 && !rc && !standard_only; i++)
        rc = adopt_ms_fused(&o, i, &adopted);
    if (!rc && adopted && !(rc = ox_graph_sort(g))) {
        memset(o.dead, 0, sizeof(bool) * (size_t)g->n_nodes);
        rc = count_uses(&o);
    }
    const char *fl = getenv("OX_MOVE_LAYOUTS");
    if (!rc && !standard_only && !(fl && !strcmp(fl, "0"))) rc = layouts(&o);
    /* before fold_qdq, which would take the QuantizeLinear -> DequantizeLinear pairs apart */
    const char *fq = getenv("OX_FUSE_QCONV");
    bool qconv = !standard_only && cpu && ox_qconv8_available() && !(fq && !strcmp(fq, "0"));
    const char *fg = getenv("OX_FUSE_QGEMM");
    bool qgemm = qconv && !(fg && !strcmp(fg, "0"));
    for (int i = 0; i < g->n_nodes && !rc && qconv; i++)
        if (!o.dead[i] && !(rc = fold_qconv(&o, &g->nodes[i])) && !o.dead[i] && qgemm)
            rc = fold_qgemm(&o, &g->nodes[i]);
    const char *fqa = getenv("OX_FUSE_QADD");
    bool qadd = !standard_only && cpu && !(fqa && !strcmp(fqa, "0"));
    for (int i = 0; i < g->n_nodes && !rc && qadd; i++)
        if (!o.dead[i] && !(rc = fold_qadd(&o, &g->nodes[i])) && !o.dead[i])
            rc = fold_qmaxpool(&o, &g->nodes[i]);
    for (int i = 0; i < g->n_nodes && !rc && !standard_only; i++)
        if (!o.dead[i]) rc = fold_qdq(&o, &g->nodes[i]);
    for (int i = 0; i < g->n_nodes && !rc; i++)
        if (!o.dead[i]) rc = fold_bn(&o, &g->nodes[i]);
    int64_t opset = ox_graph_opset(g, "");
    for (int i = 0; i < g->n_nodes && !rc && (!standard_only || opset >= 17); i++)
        if (!o.dead[i]) rc = fold_layernorm(&o, &g->nodes[i]);
    for (int i = 0; i < g->n_nodes && !rc && (!standard_only || opset >= 20); i++)
        if (!o.dead[i]) rc = fold_gelu(&o, &g->nodes[i]);
    for (int i = 0; i < g->n_nodes && !rc && (!standard_only || opset >= 20); i++)
        if (!o.dead[i]) rc = fold_gelu_tanh(&o, &g->nodes[i]);
    const char *fa = getenv("OX_FUSE_ATTENTION");
    for (int i = 0; i < g->n_nodes && !rc && !standard_only && !(fa && !strcmp(fa, "0")); i++)
        if (!o.dead[i]) rc = fold_attention(&o, &g->nodes[i]);
    for (int i = 0; i < g->n_nodes && !rc && !standard_only; i++)
        if (!o.dead[i]) rc = fuse(&o, &g->nodes[i]);
    /* after the epilogue fusions, which take a bias Add before a normalization first */
    const char *fs = getenv("OX_FUSE_SKIP_LAYERNORM");
    for (int i = 0; i < g->n_nodes && !rc && !standard_only && !(fs && !strcmp(fs, "0")); i++)
        if (!o.dead[i]) rc = fold_skip_layernorm(&o, &g->nodes[i]);
    /* after the epilogue fusions (the projection is a FusedMatMul by then) */
    bool added = false;
    for (int i = 0; i < g->n_nodes && !rc && !standard_only && o.move_transposes; i++)
        if (!o.dead[i]) rc = hoist_transpose(&o, i, &added);
    if (!rc) remove_dead(&o);
    if (!rc && added && !(rc = ox_graph_sort(g))) {
        /* in order again: what only the appended Transposes' unread Shapes read goes too */
        memset(o.dead, 0, sizeof(bool) * (size_t)g->n_nodes);
        if (!(rc = count_uses(&o))) remove_dead(&o);
    }
    free(o.uses);
    free(o.dead);
    return rc;
}
