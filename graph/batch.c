/* The batch-separability analysis of graph/batch.h. Each value is followed with its rank
 * and whether axis 0 is the batch ("batched"); values computed from constants only are
 * unbatched and are the same for every item. */
#include "graph/batch.h"

#include <stdlib.h>
#include <string.h>

struct bstate {
    const struct ox_graph *g;
    signed char *batched; /* per value: 1 batched, 0 not */
    int *rank;            /* per value: known rank, or -1 */
};

/* Constant tensor data of v: an initializer that is not a graph input, or a Constant node's. */
static const ox_tensor *const_tensor(const struct ox_graph *g, int v) {
    if (v < 0 || ox_graph_is_input(g, v)) return NULL;
    const struct ox_value *val = &g->values[v];
    if (val->init) return val->init;
    if (val->producer < 0) return NULL;
    const struct ox_node *n = &g->nodes[val->producer];
    if (n->domain[0] || strcmp(n->op_type, "Constant") != 0) return NULL;
    const struct ox_attr *a = ox_node_attr(n, "value");
    return a && a->type == OX_ATTR_TENSOR ? a->t : NULL;
}

/* The int64 entries of a constant 1-D (or scalar) tensor, at most cap; -1 when not constant. */
static int const_ints(const struct ox_graph *g, int v, int64_t *out, int cap) {
    const ox_tensor *t = const_tensor(g, v);
    if (!t || t->kind != OX_IO_TENSOR || t->rank > 1 || !t->data) return -1;
    int64_t n = t->rank == 0 ? 1 : t->dims[0];
    if (n > cap) return -1;
    for (int64_t i = 0; i < n; i++) {
        if (t->dtype == OX_INT64)
            out[i] = ((const int64_t *)t->data)[i];
        else if (t->dtype == OX_INT32)
            out[i] = ((const int32_t *)t->data)[i];
        else
            return -1;
    }
    return (int)n;
}

static bool name_in(const char *s, const char *const *names) {
    for (; *names; names++)
        if (strcmp(s, *names) == 0) return true;
    return false;
}

static const char *const UNARY[] = {"Relu",       "LeakyRelu", "Sigmoid",  "HardSigmoid",
                                    "HardSwish",  "Tanh",      "Elu",      "Selu",
                                    "Celu",       "Softplus",  "Softsign", "Gelu",
                                    "Erf",        "Exp",       "Log",      "Sqrt",
                                    "Reciprocal", "Neg",       "Abs",      "Floor",
                                    "Ceil",       "Round",     "Sign",     "Sin",
                                    "Cos",        "Cast",      "Identity", "Not",
                                    "IsNaN",      "IsInf",     "Mish",     "ThresholdedRelu",
                                    "Shrink",     "Tan",       "Atan",     "Asin",
                                    "Acos",       "Sinh",      "Cosh",     "Asinh",
                                    "Acosh",      "Atanh",     NULL};
/* Elementwise with numpy broadcasting over all their inputs. */
static const char *const BROADCAST[] = {"Add",   "Sub",  "Mul",     "Div",         "Pow",
                                        "Max",   "Min",  "Sum",     "Mean",        "Where",
                                        "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual",
                                        "And",   "Or",   "Xor",     "PRelu",       "Mod",
                                        "Clip",  NULL};
/* Input 0 batched (N, C, spatial...), every other input constant for every item. */
static const char *const SPATIAL[] = {"Conv",
                                      "ConvTranspose",
                                      "MaxPool",
                                      "AveragePool",
                                      "LpPool",
                                      "GlobalAveragePool",
                                      "GlobalMaxPool",
                                      "GlobalLpPool",
                                      "BatchNormalization",
                                      "InstanceNormalization",
                                      "LRN",
                                      "DepthToSpace",
                                      "SpaceToDepth",
                                      NULL};

static int norm_axis(int64_t axis, int rank) {
    return (int)(axis < 0 ? axis + rank : axis);
}

static int64_t attr_int(const struct ox_node *n, const char *name, int64_t dflt) {
    const struct ox_attr *a = ox_node_attr(n, name);
    return a && a->type == OX_ATTR_INT ? a->i : dflt;
}

/* Axes from attribute `name` or, where newer opsets moved it, from input `in`: into axes,
 * returns the count (0: none given), or -1 when they are not known. */
static int node_axes(const struct ox_graph *g, const struct ox_node *n, int in, int64_t *axes,
                     int cap) {
    const struct ox_attr *a = ox_node_attr(n, "axes");
    if (a) {
        if (a->type != OX_ATTR_INTS || a->n > cap) return -1;
        for (int i = 0; i < a->n; i++) axes[i] = a->ints[i];
        return a->n;
    }
    if (n->n_inputs > in && n->inputs[in] >= 0) return const_ints(g, n->inputs[in], axes, cap);
    return 0;
}

static bool axes_skip_zero(const int64_t *axes, int n, int rank) {
    for (int i = 0; i < n; i++)
        if (norm_axis(axes[i], rank) == 0) return false;
    return true;
}

/* An unbatched operand of a broadcast: its rank and first dim, when known. */
static bool unbatched_fits(const struct bstate *s, int v, int out_rank) {
    const ox_tensor *t = const_tensor(s->g, v);
    int r = t ? t->rank : s->rank[v];
    if (r < 0) return false;
    if (r < out_rank) return true;
    return t && r == out_rank && t->dims[0] == 1;
}

/* The rank of the numpy broadcast of n's first `count` inputs (absent ones skipped), or -1
 * when it mixes items: a rank not known, a batched input of another rank than the result, an
 * unbatched one that reaches axis 0, or no batched input at all. */
static int broadcast_rank(const struct bstate *s, const struct ox_node *n, int count) {
    int out_rank = -1;
    for (int i = 0; i < count; i++) {
        int v = n->inputs[i];
        if (v < 0) continue;
        int r = s->batched[v] ? s->rank[v] : -2;
        if (r == -1) return -1;
        if (r > out_rank) out_rank = r;
    }
    for (int i = 0; i < count; i++) {
        int v = n->inputs[i];
        if (v < 0) continue;
        if (s->batched[v] ? s->rank[v] != out_rank : !unbatched_fits(s, v, out_rank)) return -1;
    }
    return out_rank < 0 ? -1 : out_rank;
}

/* Whether node k keeps items apart; sets its outputs' state. */
static bool node_ok(struct bstate *s, int k) {
    const struct ox_graph *g = s->g;
    const struct ox_node *n = &g->nodes[k];
    const char *op = n->op_type;
    bool any = false;
    int r0 = -1; /* rank of input 0 */
    for (int i = 0; i < n->n_inputs; i++)
        if (n->inputs[i] >= 0 && s->batched[n->inputs[i]]) any = true;
    if (n->n_inputs > 0 && n->inputs[0] >= 0) r0 = s->rank[n->inputs[0]];
    int out_rank = -1;
    bool fused = strcmp(n->domain, "ai.onnxexec") == 0;
    if (!n->domain[0] || fused) {
        if (!strcmp(op, "If") || !strcmp(op, "Loop") || !strcmp(op, "Scan") ||
            !strncmp(op, "Random", 6) || !strcmp(op, "Multinomial") || !strcmp(op, "Bernoulli"))
            return false;
    } else {
        return false; /* another domain: unknown */
    }
    if (!any) { /* the same for every item */
        for (int o = 0; o < n->n_outputs; o++)
            if (n->outputs[o] >= 0) s->batched[n->outputs[o]] = 0;
        return true;
    }
    bool x_batched = n->n_inputs > 0 && n->inputs[0] >= 0 && s->batched[n->inputs[0]];
    if (name_in(op, UNARY) || !strcmp(op, "Dropout")) {
        if (!strcmp(op, "Dropout") && (n->n_inputs > 2 || n->n_outputs > 1)) return false;
        out_rank = r0;
    } else if (name_in(op, BROADCAST)) {
        if ((out_rank = broadcast_rank(s, n, n->n_inputs)) < 0) return false;
    } else if (name_in(op, SPATIAL) || (fused && !strcmp(op, "FusedConv"))) {
        if (!x_batched || n->n_outputs > 1) return false; /* MaxPool indices count over N */
        if (!strcmp(op, "BatchNormalization") && attr_int(n, "training_mode", 0)) return false;
        out_rank = r0;
        for (int i = 1; i < n->n_inputs; i++) {
            int v = n->inputs[i];
            if (v < 0 || !s->batched[v]) continue;
            /* FusedConv's residual Z (input 3) is added to the output: batched like it */
            if (!(fused && i == 3 && s->rank[v] == out_rank)) return false;
        }
        if (fused && n->n_inputs > 3 && n->inputs[3] >= 0 && !s->batched[n->inputs[3]] &&
            !unbatched_fits(s, n->inputs[3], out_rank))
            return false;
    } else if (!strcmp(op, "Gemm") || (fused && !strcmp(op, "FusedGemm"))) {
        if (!x_batched || attr_int(n, "transA", 0) || r0 != 2) return false;
        out_rank = 2;
        for (int i = 1; i < n->n_inputs; i++) {
            int v = n->inputs[i];
            if (v < 0) continue;
            if (i == 1 && s->batched[v]) return false;
            if (i >= 2 && (s->batched[v] ? s->rank[v] != 2 : !unbatched_fits(s, v, 2)))
                return false;
        }
    } else if (!strcmp(op, "MatMul") || (fused && !strcmp(op, "FusedMatMul"))) {
        if (n->n_inputs < 2 || n->inputs[1] < 0) return false;
        int a = n->inputs[0], b = n->inputs[1];
        const ox_tensor *ta = const_tensor(g, a), *tb = const_tensor(g, b);
        int ra = s->batched[a] ? s->rank[a] : ta ? ta->rank : s->rank[a];
        int rb = s->batched[b] ? s->rank[b] : tb ? tb->rank : s->rank[b];
        if (ra < 1 || rb < 1) return false;
        out_rank = ra > rb ? ra : rb;
        if (ra == 1 || rb == 1) out_rank = (ra > rb ? ra : rb) - 1;
        if (s->batched[a] && s->batched[b]) {
            if (ra != rb || ra < 3) return false;
        } else if (s->batched[a]) {
            /* A [N, K] (rows are items) times any B of rank <= 2; A [N, ..., K] broadcast
             * over B's leading dims, which must not reach axis 0 of the product */
            if (ra == 1 || rb > ra) return false;
            if (rb == ra && ra > 2 && !(tb && tb->dims[0] == 1)) return false;
        } else { /* B batched: its batch axis must be a broadcast axis of the product */
            if (rb < 3 || ra > rb || (ra == rb && !(ta && ta->dims[0] == 1))) return false;
        }
        for (int i = 2; i < n->n_inputs; i++) { /* FusedMatMul's bias or residual */
            int v = n->inputs[i];
            if (v >= 0 &&
                (s->batched[v] ? s->rank[v] != out_rank : !unbatched_fits(s, v, out_rank)))
                return false;
        }
    } else if (!strcmp(op, "Flatten")) {
        if (r0 < 1 || norm_axis(attr_int(n, "axis", 1), r0) < 1) return false;
        out_rank = 2;
    } else if (!strcmp(op, "Softmax") || !strcmp(op, "LogSoftmax") || !strcmp(op, "Hardmax")) {
        if (r0 < 1 || norm_axis(attr_int(n, "axis", n->opset < 13 ? 1 : -1), r0) < 1) return false;
        out_rank = r0;
    } else if (fused && !strcmp(op, "SkipLayerNormalization")) {
        /* LayerNormalization of Add(input 0, input 1): the sum broadcast as the elementwise
         * ops' inputs are, Scale and B not batched */
        if (n->n_inputs < 2 || n->inputs[0] < 0 || n->inputs[1] < 0 ||
            (out_rank = broadcast_rank(s, n, 2)) < 2)
            return false;
        /* Skip through skip_perm: its batch axis must stay first */
        const struct ox_attr *p = ox_node_attr(n, "skip_perm");
        if (p && (p->type != OX_ATTR_INTS || p->n < 1 || p->ints[0] != 0)) return false;
        for (int i = 2; i < n->n_inputs; i++)
            if (n->inputs[i] >= 0 && s->batched[n->inputs[i]]) return false;
        if (norm_axis(attr_int(n, "axis", -1), out_rank) < 1) return false;
    } else if (!strcmp(op, "LayerNormalization") || !strcmp(op, "RMSNormalization")) {
        if (r0 < 2 || norm_axis(attr_int(n, "axis", -1), r0) < 1) return false;
        for (int i = 1; i < n->n_inputs; i++)
            if (n->inputs[i] >= 0 && s->batched[n->inputs[i]]) return false;
        out_rank = r0;
    } else if (!strcmp(op, "Concat")) {
        if (r0 < 1 || norm_axis(attr_int(n, "axis", 0), r0) < 1) return false;
        for (int i = 0; i < n->n_inputs; i++)
            if (n->inputs[i] < 0 || !s->batched[n->inputs[i]] || s->rank[n->inputs[i]] != r0)
                return false;
        out_rank = r0;
    } else if (!strcmp(op, "Transpose")) {
        const struct ox_attr *p = ox_node_attr(n, "perm");
        if (!p || p->type != OX_ATTR_INTS || p->n != r0 || p->n < 1 || p->ints[0] != 0)
            return false;
        out_rank = r0;
    } else if (!strcmp(op, "Reshape")) {
        int64_t shape[OX_MAX_RANK];
        int ns = n->n_inputs > 1 ? const_ints(g, n->inputs[1], shape, OX_MAX_RANK) : -1;
        if (!x_batched || ns < 1 || shape[0] != 0 || attr_int(n, "allowzero", 0)) return false;
        out_rank = ns;
    } else if (!strcmp(op, "Squeeze") || !strcmp(op, "Unsqueeze")) {
        int64_t axes[OX_MAX_RANK];
        int na = node_axes(g, n, 1, axes, OX_MAX_RANK);
        if (r0 < 1 || na < 1) return false;
        out_rank = op[0] == 'S' ? r0 - na : r0 + na;
        if (!axes_skip_zero(axes, na, op[0] == 'S' ? r0 : out_rank)) return false;
    } else if (!strncmp(op, "Reduce", 6) || !strcmp(op, "ArgMax") || !strcmp(op, "ArgMin")) {
        int64_t axes[OX_MAX_RANK];
        int na;
        if (op[0] == 'A') {
            axes[0] = attr_int(n, "axis", 0);
            na = 1;
        } else {
            na = node_axes(g, n, 1, axes, OX_MAX_RANK);
        }
        if (r0 < 1 || na < 1 || !axes_skip_zero(axes, na, r0)) return false;
        out_rank = attr_int(n, "keepdims", 1) ? r0 : r0 - na;
    } else if (!strcmp(op, "Split")) {
        if (r0 < 1 || norm_axis(attr_int(n, "axis", 0), r0) < 1) return false;
        for (int i = 1; i < n->n_inputs; i++)
            if (n->inputs[i] >= 0 && s->batched[n->inputs[i]]) return false;
        out_rank = r0;
    } else if (!strcmp(op, "Slice")) {
        int64_t axes[OX_MAX_RANK];
        int na = n->n_inputs > 3 && n->inputs[3] >= 0
                     ? const_ints(g, n->inputs[3], axes, OX_MAX_RANK)
                     : -1; /* no axes: the first ones, axis 0 among them */
        if (!x_batched || r0 < 1 || na < 1 || !axes_skip_zero(axes, na, r0)) return false;
        for (int i = 1; i < n->n_inputs; i++)
            if (n->inputs[i] >= 0 && s->batched[n->inputs[i]]) return false;
        out_rank = r0;
    } else if (!strcmp(op, "Gather")) {
        if (n->n_inputs < 2) return false;
        int d = n->inputs[0], ix = n->inputs[1];
        const ox_tensor *td = const_tensor(g, d), *ti = const_tensor(g, ix);
        int rd = s->batched[d] ? s->rank[d] : td ? td->rank : -1;
        int ri = s->batched[ix] ? s->rank[ix] : ti ? ti->rank : -1;
        if (rd < 1 || ri < 0) return false;
        int axis = norm_axis(attr_int(n, "axis", 0), rd);
        if (s->batched[d] && s->batched[ix]) return false;
        if (s->batched[d] && axis < 1) return false;
        if (s->batched[ix] && (axis != 0 || ri < 1)) return false;
        out_rank = rd + ri - 1;
    } else {
        return false; /* not known to keep items apart (Shape, Size, Pad, Resize, ...) */
    }
    if (out_rank < 1) return false;
    for (int o = 0; o < n->n_outputs; o++) {
        int v = n->outputs[o];
        if (v < 0) continue;
        s->batched[v] = 1;
        s->rank[v] = out_rank;
    }
    /* Split and LayerNormalization's extra outputs keep the input's rank; the others have one */
    return true;
}

void ox_graph_batch_info(const struct ox_graph *g, struct ox_batch_info *out) {
    memset(out, 0, sizeof *out);
    struct bstate s = {g, calloc((size_t)g->n_values + 1, 1),
                       malloc(sizeof(int) * ((size_t)g->n_values + 1))};
    if (!s.batched || !s.rank) {
        out->why = "out of memory";
        goto done;
    }
    for (int v = 0; v < g->n_values; v++) s.rank[v] = g->values[v].rank;
    const char *sym = NULL;
    if (g->n_inputs < 1) {
        out->why = "no inputs";
        goto done;
    }
    for (int i = 0; i < g->n_inputs; i++) {
        const struct ox_value *v = &g->values[g->inputs[i]];
        if (v->kind != OX_KIND_TENSOR || v->rank < 1 || v->dims[0].value >= 0 ||
            !v->dims[0].symbol || (sym && strcmp(sym, v->dims[0].symbol) != 0)) {
            out->why = v->name;
            goto done;
        }
        sym = v->dims[0].symbol;
        s.batched[g->inputs[i]] = 1;
    }
    for (int k = 0; k < g->n_nodes; k++) {
        if (!node_ok(&s, k)) {
            out->why = g->nodes[k].name ? g->nodes[k].name : g->nodes[k].op_type;
            goto done;
        }
        const struct ox_node *n = &g->nodes[k];
        if (!strcmp(n->op_type, "Conv") || !strcmp(n->op_type, "FusedConv") ||
            !strcmp(n->op_type, "ConvTranspose"))
            out->n_convs++;
        bool row_product = (!strcmp(n->op_type, "Gemm") || !strcmp(n->op_type, "FusedGemm") ||
                            !strcmp(n->op_type, "MatMul") || !strcmp(n->op_type, "FusedMatMul")) &&
                           n->n_inputs > 1 && n->inputs[0] >= 0 && s.batched[n->inputs[0]] &&
                           s.rank[n->inputs[0]] == 2;
        if (row_product) {
            const ox_tensor *w = const_tensor(g, n->inputs[1]);
            if (w) {
                int64_t e = 1;
                for (int d = 0; d < w->rank; d++) e *= w->dims[d];
                out->row_product_weight_bytes += e * (int64_t)sizeof(float);
            }
        }
    }
    for (int i = 0; i < g->n_outputs; i++) {
        int v = g->outputs[i];
        if (!s.batched[v] || g->values[v].kind != OX_KIND_TENSOR) {
            out->why = g->values[v].name;
            goto done;
        }
    }
    out->is_separable = true;
    out->why = NULL;
done:
    free(s.batched);
    free(s.rank);
}
