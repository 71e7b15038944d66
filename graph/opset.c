/* Opset conversion of the default domain (graph/opset.h).
 *
 * graph/opset_table.def (written by tools/gen_opset_table.py) holds every version of every
 * default-domain operator up to opset OX_OPSET_TABLE_MAX: its attributes, input and output
 * counts, and how a node crosses from the version before ("rules", and an adapter function
 * below). A node walks its operator's history one version at a time from the version its
 * opset selects to the one the target selects, up or down; each step applies the rules and
 * the adapter, then checks the node against the new version (attributes it knows, required
 * attributes, input and output counts). Adapters may rename the operator (Upsample-9 becomes
 * Resize-10, Scatter-9 ScatterElements-11, and back), turn attributes into constant inputs
 * and back, and make new constants.
 *
 * The conversion runs in two phases. The plan works on a copy of every node (inputs,
 * outputs, attributes) in scratch memory, with new constants kept aside, and touches nothing
 * in the graph: the first node that cannot be converted stops it with a message, the graph
 * unchanged. The commit then writes the copies back: new constants become initializers
 * (their data owned by the values), node arrays are copied into the graph's arena, every
 * default-domain node gets the target opset and its operator-table row, the model imports
 * the target and its IR version is raised to what the target needs. Constants that a
 * converted node no longer reads (an `axes` input that became an attribute), and that
 * nothing else reads, are removed: initializers lose their data, Constant nodes go.
 *
 * What the adapters convert is listed with each below; what they cannot express fails with
 * OX_E_UNSUPPORTED and a message "node 'NAME' (OP): OP-A to OP-B: why". Checks that need
 * values (constant inputs) or shapes use what the graph knows: initializers, Constant nodes
 * (also in enclosing graphs), and the value_info shapes of values. A constant input that
 * must become an attribute but is computed fails; a value whose validity at the target
 * depends on data (negative Gather indices below opset 11, negative Slice axes below 11) is
 * checked when it is a constant and taken as valid otherwise.
 */
#include "graph/opset.h"

#include "kernels/op.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct work;
typedef ox_status (*adapter_fn)(struct work *w, bool up);

/* One version of one operator (a row of graph/opset_table.def). */
struct row {
    const char *op;
    int since;
    int min_in, max_in, min_out, max_out; /* -1: unbounded / not checked */
    const char *attrs;                    /* "a,b!,c" ('!': required); "*": not checked */
    const char *types;                    /* element type masks "in,..|out,..", or "*" */
    const char *rules;                    /* how a node crosses from the version before */
    adapter_fn fn;
};

/* A constant made by an adapter, an initializer once committed. */
struct pending {
    struct ox_graph *g;
    const char *base; /* name base; the committed name is made unique in the model */
    ox_tensor *t;     /* struct in scratch, data malloc'd */
    int value;        /* value id once committed, else -1 */
    bool used;        /* read by the converted node (a later step may have replaced it) */
};

/* A value an adapter stopped reading (a constant that became an attribute). */
struct detached {
    struct ox_graph *g;
    int v;
};

/* Per graph of the model: its readers of values, for outputs an older version lacks. */
struct graph_info {
    struct ox_graph *g;
    int *uses;
};

struct conv {
    struct ox_graph *root;
    int target;
    struct ox_arena scratch;
    struct work *works;
    int n_works, cap_works;
    struct pending *pend;
    int n_pend, cap_pend;
    struct detached *det;
    int n_det, cap_det;
    struct graph_info *graphs;
    int n_graphs, cap_graphs;
    ox_tensor **drop_tensors; /* attribute tensors of removed attributes: freed at commit */
    int n_drop, cap_drop;
    int n_added_inputs; /* constants added to the main graph's inputs (before IR 4) */
    bool ir4;           /* a constant in a subgraph of a model before IR 4 */
};

/* A node being converted: a copy of its inputs, outputs and attributes. Input ids <= -2
 * are pending constants (-2 - index into conv.pend). */
struct work {
    struct conv *c;
    struct ox_graph *g;
    int index;              /* the node's index in g */
    const char *op;         /* current operator type */
    const struct row *row;  /* current version */
    const struct row *from; /* the step being taken, for messages */
    const struct row *to;
    int n_in;
    int *in;
    int n_out;
    int *out;
    int n_attrs, cap_attrs;
    struct ox_attr *attrs;
    unsigned char *fresh; /* per attribute: made here (payload in scratch) */
    bool changed;
};

static struct ox_node *wnode(const struct work *w) {
    return &w->g->nodes[w->index];
}

/* ---- messages ---------------------------------------------------------------------------- */

/* "node 'n1' (Split)": the node as the model names it. */
static const char *node_desc(const struct work *w, char *buf, size_t len) {
    const struct ox_node *n = wnode(w);
    if (n->name && n->name[0])
        snprintf(buf, len, "node '%s' (%s)", n->name, n->op_type);
    else
        snprintf(buf, len, "node #%d%s%s%s (%s)", w->index, w->g->parent ? " of graph '" : "",
                 w->g->parent ? (w->g->name ? w->g->name : "") : "", w->g->parent ? "'" : "",
                 n->op_type);
    return buf;
}

/* Fail the step being taken: "node 'x' (Op): Op-13 to Op-11: <why>". */
static ox_status __attribute__((format(printf, 2, 3))) wfail(struct work *w, const char *fmt, ...) {
    char what[512], who[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    node_desc(w, who, sizeof who);
    if (w->from && w->to)
        return ox_err(OX_E_UNSUPPORTED, "%s: %s-%d to %s-%d: %s", who, w->from->op, w->from->since,
                      w->to->op, w->to->since, what);
    return ox_err(OX_E_UNSUPPORTED, "%s: %s", who, what);
}

static ox_status nomem(void) {
    return ox_err(OX_E_NOMEM, "out of memory converting the opset");
}

/* ---- the table --------------------------------------------------------------------------- */

static ox_status ad_broadcast(struct work *w, bool up);
static ox_status ad_is_test(struct work *w, bool up);
static ox_status ad_bn_consumed(struct work *w, bool up);
static ox_status ad_bn_training(struct work *w, bool up);
static ox_status ad_cast_to(struct work *w, bool up);
static ox_status ad_clip_inputs(struct work *w, bool up);
static ox_status ad_constant_sparse(struct work *w, bool up);
static ox_status ad_constant_values(struct work *w, bool up);
static ox_status ad_quant_axis(struct work *w, bool up);
static ox_status ad_dropout_mask(struct work *w, bool up);
static ox_status ad_dropout_ratio(struct work *w, bool up);
static ox_status ad_gru_yh(struct work *w, bool up);
static ox_status ad_output_sequence(struct work *w, bool up);
static ox_status ad_gather_indices(struct work *w, bool up);
static ox_status ad_gemm_broadcast(struct work *w, bool up);
static ox_status ad_gemm_c(struct work *w, bool up);
static ox_status ad_lp_p(struct work *w, bool up);
static ox_status ad_softmax_axis(struct work *w, bool up);
static ox_status ad_pad_paddings(struct work *w, bool up);
static ox_status ad_pad_inputs(struct work *w, bool up);
static ox_status ad_pad_axes(struct work *w, bool up);
static ox_status ad_axes_input(struct work *w, bool up);
static ox_status ad_reshape_shape(struct work *w, bool up);
static ox_status ad_resize_11(struct work *w, bool up);
static ox_status ad_resize_13(struct work *w, bool up);
static ox_status ad_resize_to_upsample(struct work *w, bool up);
static ox_status ad_roialign_mode(struct work *w, bool up);
static ox_status ad_scatter_rename(struct work *w, bool up);
static ox_status ad_selu_defaults(struct work *w, bool up);
static ox_status ad_slice_inputs(struct work *w, bool up);
static ox_status ad_slice_negaxes(struct work *w, bool up);
static ox_status ad_split_legacy(struct work *w, bool up);
static ox_status ad_split_input(struct work *w, bool up);
static ox_status ad_split_num_outputs(struct work *w, bool up);
static ox_status ad_topk_k(struct work *w, bool up);
static ox_status ad_upsample_scales_attr(struct work *w, bool up);
static ox_status ad_upsample_scales_input(struct work *w, bool up);
static ox_status ad_upsample_to_resize(struct work *w, bool up);
static ox_status ad_optional_input(struct work *w, bool up);
static ox_status ad_dft_axis(struct work *w, bool up);
static ox_status ad_gridsample_modes(struct work *w, bool up);
static ox_status ad_groupnorm_channels(struct work *w, bool up);
static ox_status ad_attention_mask(struct work *w, bool up);

static const struct row table[] = {
#define OX_OPSET_ROW(op, since, min_in, max_in, min_out, max_out, attrs, types, rules, fn)         \
    {op, since, min_in, max_in, min_out, max_out, attrs, types, rules, fn},
#include "graph/opset_table.def"
#undef OX_OPSET_ROW
};
#define N_ROWS ((int)(sizeof table / sizeof table[0]))

/* IR version each opset needs (ONNX docs/Versioning.md; opset 25 came with IR 13, the
 * version that added the int2/uint2 types it takes). */
static const int64_t ir_for_opset[OX_OPSET_TABLE_MAX + 1] = {
    3, 3, 3, 3, 3, 3, 3, 3, 3, 4, 5, 6, 7, 7, 7, 8, 8, 8, 8, 9, 9, 10, 10, 11, 12, 13};

/* The rows of op (sorted by name, then version): the first, and their count via *n. */
static const struct row *history(const char *op, int *n) {
    int lo = 0, hi = N_ROWS;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (strcmp(table[mid].op, op) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    int k = lo;
    while (k < N_ROWS && strcmp(table[k].op, op) == 0) k++;
    *n = k - lo;
    return k > lo ? &table[lo] : NULL;
}

/* The version of op that opset v selects, or NULL when op did not exist yet. */
static const struct row *version_at(const char *op, int v) {
    int n;
    const struct row *h = history(op, &n), *r = NULL;
    for (int i = 0; i < n; i++)
        if (h[i].since <= v) r = &h[i];
    return r;
}

bool ox_opset_first_output_required(const char *domain, const char *op_type, int version) {
    const struct row *r = *domain ? NULL : version_at(op_type, version);
    return !r || r->min_out != 0;
}

static bool is_first(const struct row *r) {
    return r == table || strcmp(r[-1].op, r->op) != 0;
}

static bool is_last(const struct row *r) {
    return r + 1 == table + N_ROWS || strcmp(r[1].op, r->op) != 0;
}

static bool has_rule(const struct row *r, const char *word) {
    size_t n = strlen(word);
    for (const char *p = r->rules; (p = strstr(p, word)); p += n)
        if ((p == r->rules || p[-1] == ' ') && (p[n] == '\0' || p[n] == ';' || p[n] == ' '))
            return true;
    return false;
}

/* ---- scratch memory and lists ------------------------------------------------------------ */

static void *salloc(struct conv *c, size_t n) {
    return ox_arena_alloc(&c->scratch, n ? n : 1);
}

static bool grow(void **p, int *cap, int need, size_t size) {
    if (need <= *cap) return true;
    int nc = *cap ? *cap * 2 : 16;
    while (nc < need) nc *= 2;
    void *q = realloc(*p, size * (size_t)nc);
    if (!q) return false;
    *p = q;
    *cap = nc;
    return true;
}

/* ---- values: constants, shapes, types ---------------------------------------------------- */

static struct pending *pend_of(const struct work *w, int v) {
    return v <= -2 && -2 - v < w->c->n_pend ? &w->c->pend[-2 - v] : NULL;
}

static bool is_graph_input(const struct ox_graph *g, int v) {
    for (int i = 0; i < g->n_inputs; i++)
        if (g->inputs[i] == v) return true;
    return false;
}

/* Follow a name read from an enclosing scope to the graph that defines it. */
static bool resolve(struct ox_graph **g, int *v) {
    for (int depth = 0; *v >= 0 && (*g)->values[*v].is_outer; depth++) {
        if (!(*g)->parent || depth > 64) return false;
        int pv = ox_graph_find_value((*g)->parent, (*g)->values[*v].name);
        if (pv < 0) return false;
        *g = (*g)->parent;
        *v = pv;
    }
    return *v >= 0;
}

/* The tensor of a Constant node's value attribute; scalar and list forms are made into a
 * tensor in scratch memory. NULL if none (or out of memory). */
static const ox_tensor *constant_node_value(struct conv *c, const struct ox_node *n) {
    for (int k = 0; k < n->n_attrs; k++) {
        const struct ox_attr *a = &n->attrs[k];
        if ((a->type == OX_ATTR_TENSOR || a->type == OX_ATTR_SPARSE_TENSOR) && a->t &&
            (!strcmp(a->name, "value") || !strcmp(a->name, "sparse_value")))
            return a->t;
        bool f1 = !strcmp(a->name, "value_float"), fn = !strcmp(a->name, "value_floats");
        bool i1 = !strcmp(a->name, "value_int"), in = !strcmp(a->name, "value_ints");
        if (!(f1 || fn || i1 || in)) continue;
        ox_tensor *t = salloc(c, sizeof *t);
        int64_t cnt = f1 || i1 ? 1 : a->n;
        size_t es = fn || f1 ? sizeof(float) : sizeof(int64_t);
        void *d = salloc(c, es * (size_t)(cnt ? cnt : 1));
        if (!t || !d) return NULL;
        t->dtype = f1 || fn ? OX_FLOAT : OX_INT64;
        t->rank = f1 || i1 ? 0 : 1;
        t->dims[0] = cnt;
        t->data = d;
        if (f1) *(float *)d = a->f;
        if (i1) *(int64_t *)d = a->i;
        if (fn && cnt) memcpy(d, a->floats, es * (size_t)cnt);
        if (in && cnt) memcpy(d, a->ints, es * (size_t)cnt);
        return t;
    }
    return NULL;
}

/* Constant data of value v as the node sees it: a pending constant, an initializer no
 * caller can override, or a Constant node's value (also in enclosing graphs). */
static const ox_tensor *const_of(struct work *w, int v) {
    struct pending *p = pend_of(w, v);
    if (p) return p->t;
    struct ox_graph *g = w->g;
    if (v < 0 || !resolve(&g, &v)) return NULL;
    const struct ox_value *val = &g->values[v];
    /* before IR 4 every initializer is also a graph input: a constant all the same */
    if (val->init) return is_graph_input(g, v) && w->c->root->ir_version >= 4 ? NULL : val->init;
    if (val->producer < 0) return NULL;
    const struct ox_node *n = &g->nodes[val->producer];
    if (n->domain[0] || strcmp(n->op_type, "Constant") != 0) return NULL;
    const ox_tensor *t = constant_node_value(w->c, n);
    return t && t->kind == OX_IO_TENSOR && (t->data || ox_tensor_numel(t) == 0) ? t : NULL;
}

/* Rank of value v (-1 unknown) and its dims (-1 where unknown) into dims (may be NULL). */
static int shape_of(struct work *w, int v, int64_t *dims) {
    const ox_tensor *t = const_of(w, v);
    if (t) {
        if (dims)
            for (int d = 0; d < t->rank; d++) dims[d] = t->dims[d];
        return t->rank;
    }
    struct ox_graph *g = w->g;
    if (v < 0 || !resolve(&g, &v)) return -1;
    const struct ox_value *val = &g->values[v];
    if (val->kind != OX_KIND_TENSOR || val->rank < 0 || val->rank > OX_MAX_RANK) return -1;
    if (dims)
        for (int d = 0; d < val->rank; d++) dims[d] = val->dims ? val->dims[d].value : -1;
    return val->rank;
}

static int rank_of(struct work *w, int v) {
    return shape_of(w, v, NULL);
}

/* All dims of v known: its rank, else -1. */
static int full_shape(struct work *w, int v, int64_t *dims) {
    int r = shape_of(w, v, dims);
    for (int d = 0; d < r; d++)
        if (dims[d] < 0) return -1;
    return r;
}

static bool same_type_op(const char *op) {
    static const char *const ops[] = {"Abs",
                                      "Acos",
                                      "Acosh",
                                      "Add",
                                      "Asin",
                                      "Asinh",
                                      "Atan",
                                      "Atanh",
                                      "AveragePool",
                                      "BatchNormalization",
                                      "Ceil",
                                      "Celu",
                                      "Clip",
                                      "Concat",
                                      "Conv",
                                      "ConvTranspose",
                                      "Cos",
                                      "Cosh",
                                      "CumSum",
                                      "DepthToSpace",
                                      "Div",
                                      "Dropout",
                                      "Einsum",
                                      "Elu",
                                      "Erf",
                                      "Exp",
                                      "Expand",
                                      "Flatten",
                                      "Floor",
                                      "Gather",
                                      "GatherElements",
                                      "GatherND",
                                      "Gelu",
                                      "Gemm",
                                      "GlobalAveragePool",
                                      "GlobalLpPool",
                                      "GlobalMaxPool",
                                      "HardSigmoid",
                                      "HardSwish",
                                      "Hardmax",
                                      "Identity",
                                      "InstanceNormalization",
                                      "LRN",
                                      "LayerNormalization",
                                      "LeakyRelu",
                                      "Log",
                                      "LogSoftmax",
                                      "LpNormalization",
                                      "LpPool",
                                      "MatMul",
                                      "Max",
                                      "MaxPool",
                                      "Mean",
                                      "Min",
                                      "Mish",
                                      "Mod",
                                      "Mul",
                                      "Neg",
                                      "PRelu",
                                      "Pad",
                                      "Pow",
                                      "Reciprocal",
                                      "ReduceL1",
                                      "ReduceL2",
                                      "ReduceLogSum",
                                      "ReduceLogSumExp",
                                      "ReduceMax",
                                      "ReduceMean",
                                      "ReduceMin",
                                      "ReduceProd",
                                      "ReduceSum",
                                      "ReduceSumSquare",
                                      "Relu",
                                      "Reshape",
                                      "Resize",
                                      "Round",
                                      "Selu",
                                      "Shrink",
                                      "Sigmoid",
                                      "Sign",
                                      "Sin",
                                      "Sinh",
                                      "Slice",
                                      "Softmax",
                                      "Softplus",
                                      "Softsign",
                                      "SpaceToDepth",
                                      "Split",
                                      "Sqrt",
                                      "Squeeze",
                                      "Sub",
                                      "Sum",
                                      "Tan",
                                      "Tanh",
                                      "ThresholdedRelu",
                                      "Tile",
                                      "TopK",
                                      "Transpose",
                                      "Unsqueeze",
                                      "Upsample"};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (!strcmp(ops[i], op)) return true;
    return false;
}

/* Element type of value v: declared, of its constant, or followed through the producers that
 * keep their first input's type (and Cast); OX_UNDEFINED when not known. */
static ox_dtype dtype_in(struct conv *c, struct ox_graph *g, int v, int depth) {
    if (v < 0 || depth > 64 || !resolve(&g, &v)) return OX_UNDEFINED;
    const struct ox_value *val = &g->values[v];
    if (val->dtype != OX_UNDEFINED) return val->dtype;
    if (val->init) return val->init->dtype;
    if (val->producer < 0) return OX_UNDEFINED;
    const struct ox_node *n = &g->nodes[val->producer];
    if (n->domain[0]) return OX_UNDEFINED;
    if (!strcmp(n->op_type, "Constant")) {
        const ox_tensor *t = constant_node_value(c, n);
        return t ? t->dtype : OX_UNDEFINED;
    }
    if (!strcmp(n->op_type, "Cast")) {
        const struct ox_attr *a = ox_node_attr(n, "to");
        return a && a->type == OX_ATTR_INT ? (ox_dtype)a->i : OX_UNDEFINED;
    }
    if (n->outputs[0] == v && n->n_inputs > 0 && same_type_op(n->op_type))
        return dtype_in(c, g, n->inputs[0], depth + 1);
    return OX_UNDEFINED;
}

static ox_dtype dtype_of(struct work *w, int v) {
    struct pending *p = pend_of(w, v);
    return p ? p->t->dtype : dtype_in(w->c, w->g, v, 0);
}

/* Readers of each value of g (ox_graph_count_uses), computed once. */
static const int *uses_in(struct conv *c, struct ox_graph *g) {
    for (int i = 0; i < c->n_graphs; i++)
        if (c->graphs[i].g == g) {
            if (!c->graphs[i].uses) {
                int *u = malloc(sizeof(int) * (size_t)(g->n_values ? g->n_values : 1));
                if (!u) return NULL;
                ox_graph_count_uses(g, NULL, u);
                c->graphs[i].uses = u;
            }
            return c->graphs[i].uses;
        }
    return NULL;
}

/* ---- the node's copy: inputs, attributes ------------------------------------------------- */

static ox_status set_input(struct work *w, int k, int v) {
    if (k >= w->n_in) {
        int *in = salloc(w->c, sizeof(int) * (size_t)(k + 1));
        if (!in) return nomem();
        for (int i = 0; i <= k; i++) in[i] = i < w->n_in ? w->in[i] : -1;
        w->in = in;
        w->n_in = k + 1;
    }
    w->in[k] = v;
    while (w->n_in > 0 && w->in[w->n_in - 1] == -1) w->n_in--;
    w->changed = true;
    return OX_OK;
}

static int input(const struct work *w, int k) {
    return k < w->n_in ? w->in[k] : -1;
}

/* Stop reading input k; a constant that nothing reads any more is removed at commit. */
static ox_status detach(struct work *w, int k) {
    int v = input(w, k);
    if (v == -1) return OX_OK;
    if (v >= 0) {
        struct conv *c = w->c;
        if (!grow((void **)&c->det, &c->cap_det, c->n_det + 1, sizeof *c->det)) return nomem();
        c->det[c->n_det++] = (struct detached){w->g, v};
    }
    return set_input(w, k, -1);
}

static struct ox_attr *get_attr(const struct work *w, const char *name) {
    for (int k = 0; k < w->n_attrs; k++)
        if (!strcmp(w->attrs[k].name, name)) return &w->attrs[k];
    return NULL;
}

static void del_attr(struct work *w, const char *name) {
    for (int k = 0; k < w->n_attrs; k++)
        if (!strcmp(w->attrs[k].name, name)) {
            struct ox_attr *a = &w->attrs[k];
            if (w->fresh[k] && a->t) { /* made here and never committed */
                ox_tensor_free_data(a->t);
            } else if (a->t) {
                struct conv *c = w->c; /* the node owned it: freed once the commit is sure */
                if (grow((void **)&c->drop_tensors, &c->cap_drop, c->n_drop + 1, sizeof(void *)))
                    c->drop_tensors[c->n_drop++] = a->t;
            }
            memmove(a, a + 1, sizeof *a * (size_t)(w->n_attrs - k - 1));
            memmove(&w->fresh[k], &w->fresh[k + 1], (size_t)(w->n_attrs - k - 1));
            w->n_attrs--;
            w->changed = true;
            return;
        }
}

/* A new attribute (replacing one of that name), its payload to be filled from scratch. */
static struct ox_attr *put_attr(struct work *w, const char *name, ox_attr_type type) {
    size_t len = strlen(name);
    char *copy = salloc(w->c, len + 1);
    if (!copy) return NULL;
    memcpy(copy, name, len + 1);
    name = copy;
    del_attr(w, name);
    if (w->n_attrs == w->cap_attrs) {
        int cap = w->cap_attrs * 2 + 4;
        struct ox_attr *a = salloc(w->c, sizeof *a * (size_t)cap);
        unsigned char *f = salloc(w->c, (size_t)cap);
        if (!a || !f) return NULL;
        memcpy(a, w->attrs, sizeof *a * (size_t)w->n_attrs);
        memcpy(f, w->fresh, (size_t)w->n_attrs);
        w->attrs = a, w->fresh = f, w->cap_attrs = cap;
    }
    struct ox_attr *a = &w->attrs[w->n_attrs];
    memset(a, 0, sizeof *a);
    a->name = name;
    a->type = type;
    w->fresh[w->n_attrs++] = 1;
    w->changed = true;
    return a;
}

static ox_status put_int(struct work *w, const char *name, int64_t v) {
    struct ox_attr *a = put_attr(w, name, OX_ATTR_INT);
    if (!a) return nomem();
    a->i = v;
    return OX_OK;
}

static ox_status put_float(struct work *w, const char *name, float v) {
    struct ox_attr *a = put_attr(w, name, OX_ATTR_FLOAT);
    if (!a) return nomem();
    a->f = v;
    return OX_OK;
}

static ox_status put_string(struct work *w, const char *name, const char *s) {
    struct ox_attr *a = put_attr(w, name, OX_ATTR_STRING);
    if (!a) return nomem();
    a->s = s;
    a->s_len = strlen(s);
    return OX_OK;
}

static ox_status put_ints(struct work *w, const char *name, const int64_t *v, int n) {
    int64_t *copy = salloc(w->c, sizeof *copy * (size_t)n);
    struct ox_attr *a = copy ? put_attr(w, name, OX_ATTR_INTS) : NULL;
    if (!a) return nomem();
    if (n) memcpy(copy, v, sizeof *copy * (size_t)n);
    a->ints = copy;
    a->n = n;
    return OX_OK;
}

static ox_status put_floats(struct work *w, const char *name, const float *v, int n) {
    float *copy = salloc(w->c, sizeof *copy * (size_t)n);
    struct ox_attr *a = copy ? put_attr(w, name, OX_ATTR_FLOATS) : NULL;
    if (!a) return nomem();
    if (n) memcpy(copy, v, sizeof *copy * (size_t)n);
    a->floats = copy;
    a->n = n;
    return OX_OK;
}

/* Attribute getters with the default when absent; a kind other than expected fails. */
static ox_status get_int(struct work *w, const char *name, int64_t def, int64_t *v) {
    const struct ox_attr *a = get_attr(w, name);
    *v = def;
    if (!a) return OX_OK;
    if (a->type != OX_ATTR_INT) return wfail(w, "attribute '%s' is not an int", name);
    *v = a->i;
    return OX_OK;
}

static ox_status get_float(struct work *w, const char *name, float def, float *v) {
    const struct ox_attr *a = get_attr(w, name);
    *v = def;
    if (!a) return OX_OK;
    if (a->type != OX_ATTR_FLOAT) return wfail(w, "attribute '%s' is not a float", name);
    *v = a->f;
    return OX_OK;
}

static ox_status get_string(struct work *w, const char *name, const char *def, const char **v) {
    const struct ox_attr *a = get_attr(w, name);
    *v = def;
    if (!a) return OX_OK;
    if (a->type != OX_ATTR_STRING) return wfail(w, "attribute '%s' is not a string", name);
    char *s = salloc(w->c, a->s_len + 1);
    if (!s) return nomem();
    memcpy(s, a->s, a->s_len);
    *v = s;
    return OX_OK;
}

/* ints attribute (NULL, 0 when absent). */
static ox_status get_ints(struct work *w, const char *name, const int64_t **v, int *n) {
    const struct ox_attr *a = get_attr(w, name);
    *v = NULL, *n = -1;
    if (!a) return OX_OK;
    if (a->type != OX_ATTR_INTS) return wfail(w, "attribute '%s' is not a list of ints", name);
    *v = a->ints, *n = a->n;
    return OX_OK;
}

/* ---- constants --------------------------------------------------------------------------- */

static const char *value_name(const struct work *w, int v) {
    if (v >= 0) return w->g->values[v].name;
    struct pending *p = pend_of(w, v);
    return p ? p->base : "";
}

/* A new constant for input k of the node (replacing what was there). */
static ox_tensor *new_const(struct work *w, int k, const char *what, ox_dtype dt, int rank,
                            const int64_t *dims) {
    struct conv *c = w->c;
    if (!grow((void **)&c->pend, &c->cap_pend, c->n_pend + 1, sizeof *c->pend)) return NULL;
    ox_tensor *t = salloc(c, sizeof *t);
    const struct ox_node *n = wnode(w);
    const char *who = n->name && n->name[0] ? n->name : w->op;
    size_t len = strlen(who) + strlen(what) + 2;
    char *base = salloc(c, len);
    if (!t || !base || ox_tensor_alloc(t, dt, rank, dims) != OX_OK) return NULL;
    snprintf(base, len, "%s_%s", who, what);
    c->pend[c->n_pend] = (struct pending){w->g, base, t, -1, false};
    int id = -2 - c->n_pend++;
    if (detach(w, k) != OX_OK || set_input(w, k, id) != OX_OK) return NULL;
    return t;
}

static ox_status const_ints_input(struct work *w, int k, const char *what, const int64_t *v, int n,
                                  bool scalar) {
    int64_t dim = n;
    ox_tensor *t = new_const(w, k, what, OX_INT64, scalar ? 0 : 1, &dim);
    if (!t) return nomem();
    if (n) memcpy(t->data, v, sizeof *v * (size_t)n);
    return OX_OK;
}

static ox_status const_floats_input(struct work *w, int k, const char *what, ox_dtype dt,
                                    const double *v, int n, bool scalar) {
    int64_t dim = n;
    ox_tensor *t = new_const(w, k, what, dt, scalar ? 0 : 1, &dim);
    if (!t) return nomem();
    for (int i = 0; i < n; i++) ox_tensor_set(t, i, v[i]);
    return OX_OK;
}

/* Input k, a constant of integers, into out[0..max): its count via *n. Fails (naming the
 * input as `what`) when it is not a constant. */
static ox_status input_ints(struct work *w, int k, const char *what, int64_t *out, int max,
                            int *n) {
    int v = input(w, k);
    const ox_tensor *t = const_of(w, v);
    if (!t)
        return wfail(w, "input %d '%s' (%s) is not a constant (an initializer or a Constant node)",
                     k, value_name(w, v), what);
    if (t->dtype != OX_INT64 && t->dtype != OX_INT32)
        return wfail(w, "input %d '%s' (%s) is %s, expected int64", k, value_name(w, v), what,
                     ox_dtype_name(t->dtype));
    int64_t cnt = ox_tensor_numel(t);
    if (cnt > max)
        return wfail(w, "input %d '%s' (%s) has %lld values, more than %d", k, value_name(w, v),
                     what, (long long)cnt, max);
    for (int64_t i = 0; i < cnt; i++)
        out[i] =
            t->dtype == OX_INT64 ? ((const int64_t *)t->data)[i] : ((const int32_t *)t->data)[i];
    *n = (int)cnt;
    return OX_OK;
}

static ox_status input_floats(struct work *w, int k, const char *what, double *out, int max,
                              int *n) {
    int v = input(w, k);
    const ox_tensor *t = const_of(w, v);
    if (!t)
        return wfail(w, "input %d '%s' (%s) is not a constant (an initializer or a Constant node)",
                     k, value_name(w, v), what);
    if (!ox_dtype_is_float(t->dtype) && !ox_dtype_is_int(t->dtype) && t->dtype != OX_BOOL)
        return wfail(w, "input %d '%s' (%s) is %s, expected a number", k, value_name(w, v), what,
                     ox_dtype_name(t->dtype));
    int64_t cnt = ox_tensor_numel(t);
    if (cnt > max)
        return wfail(w, "input %d '%s' (%s) has %lld values, more than %d", k, value_name(w, v),
                     what, (long long)cnt, max);
    for (int64_t i = 0; i < cnt; i++) out[i] = ox_tensor_get(t, i);
    *n = (int)cnt;
    return OX_OK;
}

/* The one value of a constant input (numel 1), as a double. */
static ox_status input_scalar(struct work *w, int k, const char *what, double *out) {
    double v[2];
    int n;
    *out = 0;
    ox_status st = input_floats(w, k, what, v, 2, &n);
    if (st) return st;
    if (n != 1)
        return wfail(w, "input %d '%s' (%s) has %d values, expected one", k,
                     value_name(w, input(w, k)), what, n);
    *out = v[0];
    return OX_OK;
}

/* Input k becomes the ints attribute `attr` (the input must be a constant). */
static ox_status input_to_ints_attr(struct work *w, int k, const char *attr) {
    int64_t v[4 * OX_MAX_RANK];
    int n;
    ox_status st = input_ints(w, k, attr, v, 4 * OX_MAX_RANK, &n);
    if (!st) st = put_ints(w, attr, v, n);
    return st ? st : detach(w, k);
}

/* The ints attribute `attr` (if present) becomes input k, an int64 list. */
static ox_status ints_attr_to_input(struct work *w, const char *attr, int k) {
    const int64_t *v;
    int n;
    ox_status st = get_ints(w, attr, &v, &n);
    if (st || n < 0) return st;
    st = const_ints_input(w, k, attr, v, n, false);
    if (!st) del_attr(w, attr);
    return st;
}

/* ---- rules ------------------------------------------------------------------------------- */

static bool attr_equals(const struct ox_attr *a, const char *v) {
    char *end;
    switch (a->type) {
    case OX_ATTR_INT: {
        long long x = strtoll(v, &end, 10);
        return *end == '\0' && a->i == x;
    }
    case OX_ATTR_FLOAT: {
        double x = strtod(v, &end);
        return *end == '\0' && a->f == (float)x;
    }
    case OX_ATTR_STRING: return a->s_len == strlen(v) && !memcmp(a->s, v, a->s_len);
    case OX_ATTR_INTS:
        if (strcmp(v, "ones") != 0) return false;
        for (int i = 0; i < a->n; i++)
            if (a->ints[i] != 1) return false;
        return true;
    default: return false;
    }
}

/* Negative values of the int(s) attribute `name` made positive with rank r. */
static ox_status fix_negative_axes(struct work *w, const char *name, bool of_output) {
    struct ox_attr *a = get_attr(w, name);
    if (!a || (a->type != OX_ATTR_INT && a->type != OX_ATTR_INTS)) return OX_OK;
    int n = a->type == OX_ATTR_INT ? 1 : a->n;
    const int64_t *vals = a->type == OX_ATTR_INT ? &a->i : a->ints;
    bool neg = false;
    for (int i = 0; i < n; i++) neg |= vals[i] < 0;
    if (!neg) return OX_OK;
    int r = of_output ? rank_of(w, w->out[0]) : rank_of(w, input(w, 0));
    if (of_output && r < 0 && rank_of(w, input(w, 0)) >= 0) r = rank_of(w, input(w, 0)) + n;
    if (r < 0)
        return wfail(w,
                     "attribute '%s' has a negative value, which %s-%d does not take, and the "
                     "rank of %s '%s' that would make it positive is not known",
                     name, w->to->op, w->to->since, of_output ? "output" : "input",
                     value_name(w, of_output ? w->out[0] : input(w, 0)));
    int64_t fixed[4 * OX_MAX_RANK];
    if (n > 4 * OX_MAX_RANK) return wfail(w, "attribute '%s' has %d values", name, n);
    for (int i = 0; i < n; i++) {
        fixed[i] = vals[i] < 0 ? vals[i] + r : vals[i];
        if (fixed[i] < 0 || fixed[i] >= r)
            return wfail(w, "attribute '%s' value %lld is out of range for rank %d", name,
                         (long long)vals[i], r);
    }
    return a->type == OX_ATTR_INT ? put_int(w, name, fixed[0]) : put_ints(w, name, fixed, n);
}

/* Outputs from index k are absent (or nothing reads them: dropped). */
static ox_status drop_outputs_from(struct work *w, int k) {
    const int *uses = NULL;
    for (int i = k; i < w->n_out; i++) {
        if (w->out[i] < 0) continue;
        if (!uses && !(uses = uses_in(w->c, w->g))) return nomem();
        if (uses[w->out[i]] > 0)
            return wfail(w, "output %d '%s' has no counterpart in %s-%d", i,
                         value_name(w, w->out[i]), w->to->op, w->to->since);
        w->out[i] = -1;
        w->changed = true;
    }
    while (w->n_out > 0 && w->out[w->n_out - 1] < 0) w->n_out--;
    return OX_OK;
}

static ox_status one_rule(struct work *w, const char *rule, bool up) {
    char word[32], arg[128], name[128];
    const char *val = NULL;
    arg[0] = '\0';
    if (sscanf(rule, "%31s %127s", word, arg) < 1) return OX_OK;
    snprintf(name, sizeof name, "%s", arg);
    char *eq = strchr(name, '=');
    if (eq) *eq = '\0', val = eq + 1;
    char *at = strchr(name, '@');
    bool of_output = at && !strcmp(at, "@out");
    if (at) *at = '\0';
    const struct ox_attr *a = get_attr(w, name);
    if (!strcmp(word, "types") || !strcmp(word, "same") || !strcmp(word, "new") ||
        !strcmp(word, "removed"))
        return OX_OK;
    if (!strcmp(word, "unsupported"))
        return wfail(w, "%s: not converted", rule + strspn(rule + 11, " ") + 11);
    if (!strcmp(word, "attr")) {
        if (up || !a) return OX_OK;
        if (!val || !attr_equals(a, val))
            return wfail(w, "attribute '%s'%s%s%s is not part of %s-%d", name,
                         val ? " (set, and not to its default " : "", val ? val : "",
                         val ? ")" : "", w->to->op, w->to->since);
        del_attr(w, name);
        return OX_OK;
    }
    if (!strcmp(word, "legacy")) {
        if (up) del_attr(w, name);
        return OX_OK;
    }
    if (!strcmp(word, "drop")) {
        if (!up || !a) return OX_OK;
        if (!val || !attr_equals(a, val))
            return wfail(w, "attribute '%s' is not %s, and %s-%d has no such attribute", name,
                         val ? val : "absent", w->to->op, w->to->since);
        del_attr(w, name);
        return OX_OK;
    }
    if (!strcmp(word, "setup")) {
        if (!up || a) return OX_OK;
        return put_int(w, name, strtoll(val ? val : "0", NULL, 10));
    }
    if (!strcmp(word, "in")) {
        int k = atoi(arg);
        if (up) return OX_OK;
        for (int i = k; i < w->n_in; i++)
            if (w->in[i] != -1)
                return wfail(w, "input %d '%s' has no counterpart in %s-%d", i,
                             value_name(w, w->in[i]), w->to->op, w->to->since);
        return OX_OK;
    }
    if (!strcmp(word, "out")) return up ? OX_OK : drop_outputs_from(w, atoi(arg));
    if (!strcmp(word, "negaxis")) return up ? OX_OK : fix_negative_axes(w, name, of_output);
    if (!strcmp(word, "nonneg")) {
        if (up || !a || a->type != OX_ATTR_INTS) return OX_OK;
        for (int i = 0; i < a->n; i++)
            if (a->ints[i] < 0)
                return wfail(w, "attribute '%s' has a negative value, which %s-%d does not take",
                             name, w->to->op, w->to->since);
        return OX_OK;
    }
    if (!strcmp(word, "nobcast")) {
        if (up) return OX_OK;
        int64_t d0[OX_MAX_RANK], d[OX_MAX_RANK];
        int r0 = full_shape(w, input(w, 0), d0);
        for (int i = 0; i < w->n_in; i++) {
            int r = full_shape(w, w->in[i], d);
            if (r0 < 0 || r < 0)
                return wfail(w,
                             "%s-%d needs inputs of one shape, and the shape of input %d '%s' "
                             "is not known",
                             w->to->op, w->to->since, r0 < 0 ? 0 : i,
                             value_name(w, w->in[r0 < 0 ? 0 : i]));
            if (r != r0 || memcmp(d, d0, sizeof *d * (size_t)r))
                return wfail(w,
                             "%s-%d needs inputs of one shape; input %d '%s' differs from "
                             "input 0",
                             w->to->op, w->to->since, i, value_name(w, w->in[i]));
        }
        return OX_OK;
    }
    if (!strcmp(word, "novalue")) {
        if (!up && a && val && attr_equals(a, val))
            return wfail(w, "attribute '%s' is '%s', which %s-%d does not have", name, val,
                         w->to->op, w->to->since);
        return OX_OK;
    }
    return ox_err(OX_E_INTERNAL, "graph/opset_table.def: unknown rule '%s'", rule);
}

static ox_status apply_rules(struct work *w, const char *rules, bool up) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", rules);
    for (char *p = buf, *q; p && *p; p = q) {
        q = strchr(p, ';');
        if (q) *q++ = '\0';
        while (*p == ' ') p++;
        ox_status st = one_rule(w, p, up);
        if (st) return st;
    }
    return OX_OK;
}

/* The node against the version it has reached: attributes it knows, required ones present,
 * input and output counts. */
static ox_status check_version(struct work *w, const struct row *r) {
    if (strcmp(r->attrs, "*") != 0) {
        for (int k = 0; k < w->n_attrs; k++) {
            const char *name = w->attrs[k].name, *p = r->attrs;
            size_t len = strlen(name);
            bool found = false;
            while (*p && !found) {
                size_t l = strcspn(p, ",!");
                found = l == len && !memcmp(p, name, len);
                p += l;
                while (*p == ',' || *p == '!') p++;
            }
            if (!found)
                return wfail(w, "attribute '%s' is not part of %s-%d", name, r->op, r->since);
        }
        for (const char *p = r->attrs; *p;) {
            size_t l = strcspn(p, ",!");
            if (p[l] == '!') {
                char name[64];
                snprintf(name, sizeof name, "%.*s", (int)l, p);
                if (!get_attr(w, name))
                    return wfail(w, "%s-%d needs the attribute '%s'", r->op, r->since, name);
            }
            p += l;
            while (*p == ',' || *p == '!') p++;
        }
    }
    int n_out = w->n_out;
    while (n_out > 0 && w->out[n_out - 1] < 0) n_out--;
    if ((r->min_in >= 0 && w->n_in < r->min_in) || (r->max_in >= 0 && w->n_in > r->max_in))
        return wfail(w, "%d inputs, and %s-%d takes %d to %d", w->n_in, r->op, r->since, r->min_in,
                     r->max_in);
    if (r->max_out >= 0 && n_out > r->max_out)
        return wfail(w, "%d outputs, and %s-%d has at most %d", n_out, r->op, r->since, r->max_out);
    return OX_OK;
}

/* Mask k of a list "m0,m1,..." (ending at '|' or the end): the last one for k beyond it;
 * 0 for an empty list. */
static unsigned long mask_at(const char *list, int k) {
    unsigned long m = 0;
    for (int i = 0; *list && *list != '|'; i++) {
        char *end;
        m = strtoul(list, &end, 16);
        if (i == k || end == list) break;
        list = *end == ',' ? end + 1 : end;
    }
    return m;
}

/* Bit of the kind of value v in a type mask (tools/gen_opset_table.py), when its type was
 * declared; -1 when not known. */
static int kind_bit(struct work *w, int v) {
    struct ox_graph *g = w->g;
    if (v <= -2) return 27;
    if (v < 0 || !resolve(&g, &v)) return -1;
    const struct ox_value *val = &g->values[v];
    if (val->init) return 27;
    if (!val->dtype) return -1;
    switch (val->kind) {
    case OX_KIND_TENSOR: return 27;
    case OX_KIND_SEQUENCE: return 28;
    case OX_KIND_OPTIONAL: return 29;
    case OX_KIND_SPARSE: return 30;
    default: return -1;
    }
}

/* The element types (and kinds) of the node's inputs and outputs, where known, against what
 * version r takes: a type added later (bfloat16 Add below 13, int8 Clip below 12, a sequence
 * through Identity below 14) fails. */
static ox_status check_types(struct work *w, const struct row *r) {
    static const char *const kinds[] = {"a tensor", "a sequence", "an optional", "sparse"};
    if (!strcmp(r->types, "*")) return OX_OK;
    const char *outs = strchr(r->types, '|');
    for (int side = 0; side < 2; side++) {
        int n = side ? w->n_out : w->n_in;
        for (int k = 0; k < n; k++) {
            int v = side ? w->out[k] : w->in[k];
            ox_dtype dt = v == -1 ? OX_UNDEFINED : dtype_of(w, v);
            unsigned long m = mask_at(side ? (outs ? outs + 1 : "") : r->types, k);
            int kb = dt ? kind_bit(w, v) : -1;
            if (!dt || !m) continue;
            if (kb >= 0 && !(m >> kb & 1))
                return wfail(w, "%s %d '%s' is %s, which %s-%d does not take",
                             side ? "output" : "input", k, value_name(w, v), kinds[kb - 27], r->op,
                             r->since);
            if (dt < 27 && !(m >> dt & 1))
                return wfail(w, "%s %d '%s' is %s, which %s-%d does not take",
                             side ? "output" : "input", k, value_name(w, v), ox_dtype_name(dt),
                             r->op, r->since);
        }
    }
    return OX_OK;
}

/* Cross from the version before r to r (up) or from r to the one before (down). */
static ox_status take_step(struct work *w, const struct row *r, bool up) {
    const struct row *prev = is_first(r) ? NULL : r - 1;
    w->from = up ? prev : r;
    w->to = up ? r : prev;
    const char *op = w->op;
    ox_status st;
    if (up) {
        st = r->fn ? r->fn(w, true) : OX_OK;
        if (!st) st = apply_rules(w, r->rules, true);
    } else {
        st = apply_rules(w, r->rules, false);
        if (!st && r->fn) st = r->fn(w, false);
    }
    if (st) return st;
    if (w->op == op) w->row = w->to; /* a renaming adapter sets the row itself */
    return check_version(w, w->row);
}

static ox_status convert_node(struct work *w, int src) {
    int target = w->c->target, n;
    char who[300];
    if (!history(w->op, &n))
        return ox_err(OX_E_UNSUPPORTED,
                      "%s: %s is not an operator of the default domain up to opset %d",
                      node_desc(w, who, sizeof who), w->op, OX_OPSET_TABLE_MAX);
    w->row = version_at(w->op, src);
    if (!w->row)
        return ox_err(OX_E_UNSUPPORTED, "%s: no %s at opset %d (the model's): it came at %d",
                      node_desc(w, who, sizeof who), w->op, src, history(w->op, &n)->since);
    if (has_rule(w->row, "removed"))
        return ox_err(OX_E_UNSUPPORTED, "%s: %s was removed at opset %d (the model imports %d)",
                      node_desc(w, who, sizeof who), w->op, w->row->since, src);
    const struct row *start = w->row;
    if (target > src) {
        while (!is_last(w->row) && w->row[1].since <= target) {
            ox_status st = take_step(w, w->row + 1, true);
            if (st) return st;
        }
    } else {
        while (w->row->since > target) {
            if (is_first(w->row) && !w->row->fn)
                return ox_err(OX_E_UNSUPPORTED, "%s: no %s before opset %d",
                              node_desc(w, who, sizeof who), w->op, w->row->since);
            ox_status st = take_step(w, w->row, false);
            if (st) return st;
        }
    }
    if (has_rule(w->row, "removed"))
        return ox_err(OX_E_UNSUPPORTED, "%s: %s was removed at opset %d",
                      node_desc(w, who, sizeof who), w->op, w->row->since);
    if (w->row == start) return OX_OK; /* not converted: what it was */
    w->from = start, w->to = w->row;
    return check_types(w, w->row);
}

/* A renaming adapter: the node is now `op`, at its version that opset v selects. */
static ox_status rename_op(struct work *w, const char *op, int v) {
    const struct row *r = version_at(op, v);
    if (!r) return wfail(w, "no %s at opset %d", op, v);
    w->op = r->op;
    w->row = r;
    w->to = r;
    w->changed = true;
    return OX_OK;
}

/* ---- adapters ---------------------------------------------------------------------------- */

/* Add, Sub, Mul, Div, Pow, And, Or, Xor, Equal, Greater, Less at 7: the `broadcast` and
 * `axis` attributes (B aligned with A's dims from `axis`, or its trailing dims) became
 * numpy-style broadcasting. Up: B aligned from `axis` gets trailing 1 dims (a constant B is
 * reshaped; otherwise the ranks must say it is A's trailing dims already). Down: both
 * shapes must be known, and equal, or B's the trailing dims of A's (or one element). */
static ox_status ad_broadcast(struct work *w, bool up) {
    ox_status st;
    if (up) {
        int64_t b, axis;
        bool has_axis = get_attr(w, "axis") != NULL;
        if ((st = get_int(w, "broadcast", 0, &b)) || (st = get_int(w, "axis", 0, &axis))) return st;
        del_attr(w, "broadcast");
        del_attr(w, "axis");
        if (!b || !has_axis) return OX_OK;
        int ra = rank_of(w, input(w, 0)), rb = rank_of(w, input(w, 1));
        if (ra < 0 || rb < 0)
            return wfail(w,
                         "broadcast from axis %lld needs the ranks of both inputs, which are "
                         "not known",
                         (long long)axis);
        if (axis < 0) axis += ra;
        if (axis + rb == ra) return OX_OK;
        const ox_tensor *t = const_of(w, input(w, 1));
        if (!t || axis < 0 || axis + rb > ra)
            return wfail(w,
                         "input 1 '%s' is aligned with axis %lld of input 0 and is not a "
                         "constant that could be reshaped for numpy-style broadcasting",
                         value_name(w, input(w, 1)), (long long)axis);
        int64_t dims[OX_MAX_RANK];
        for (int d = 0; d < ra - axis; d++) dims[d] = d < rb ? t->dims[d] : 1;
        ox_tensor *nt = new_const(w, 1, "broadcast", t->dtype, (int)(ra - axis), dims);
        if (!nt) return nomem();
        size_t bytes;
        if (!ox_tensor_bytes(t->dtype, t->rank, t->dims, &bytes) || t->dtype == OX_STRING)
            return wfail(w, "input 1 cannot be reshaped");
        memcpy(nt->data, t->data, bytes);
        return OX_OK;
    }
    int64_t da[OX_MAX_RANK], db[OX_MAX_RANK];
    int ra = full_shape(w, input(w, 0), da), rb = full_shape(w, input(w, 1), db);
    if (ra < 0 || rb < 0)
        return wfail(w,
                     "%s-%d broadcasts only B over A, and the shape of input %d '%s' is not "
                     "known",
                     w->to->op, w->to->since, ra < 0 ? 0 : 1,
                     value_name(w, input(w, ra < 0 ? 0 : 1)));
    if (ra == rb && !memcmp(da, db, sizeof *da * (size_t)ra)) return OX_OK;
    int64_t nb = 1;
    for (int d = 0; d < rb; d++) nb *= db[d];
    bool suffix = rb <= ra;
    for (int d = 0; suffix && d < rb; d++) suffix = db[d] == da[ra - rb + d];
    if (!suffix && !(nb == 1 && rb <= ra))
        return wfail(w,
                     "numpy-style broadcasting of inputs of these shapes has no form in %s-%d "
                     "(B must be A's trailing dims)",
                     w->to->op, w->to->since);
    return put_int(w, "broadcast", 1);
}

/* BatchNormalization and Dropout at 7: is_test went away (both infer). Up: Dropout with
 * is_test=0 asks for training and fails; BatchNormalization is inference when only Y is
 * used. Down: is_test=1. */
static ox_status ad_is_test(struct work *w, bool up) {
    bool bn = !strcmp(w->op, "BatchNormalization");
    if (!up) return put_int(w, "is_test", 1);
    int64_t t;
    ox_status st = get_int(w, "is_test", 0, &t);
    if (st) return st;
    if (bn) {
        for (int k = 1; k < w->n_out; k++)
            if (w->out[k] >= 0)
                return wfail(w, "output %d '%s' is a training output", k, value_name(w, w->out[k]));
    } else if (!t) {
        return wfail(w, "is_test=0 asks for training-mode dropout, which %s-%d does not do",
                     w->to->op, w->to->since);
    }
    del_attr(w, "is_test");
    return OX_OK;
}

/* BatchNormalization at 6: consumed_inputs (required before, a legacy optimization hint with
 * no effect on results) went away. Down: zeros (no input consumed). */
static ox_status ad_bn_consumed(struct work *w, bool up) {
    if (up) {
        del_attr(w, "consumed_inputs");
        return OX_OK;
    }
    int64_t zeros[8] = {0};
    return put_ints(w, "consumed_inputs", zeros, w->n_in < 8 ? w->n_in : 8);
}

/* BatchNormalization at 14: training_mode and the running mean/var outputs replaced the
 * training outputs; mean and var may have their own type. Inference only, both ways. */
static ox_status ad_bn_training(struct work *w, bool up) {
    for (int k = 1; k < w->n_out; k++)
        if (w->out[k] >= 0)
            return wfail(w,
                         "output %d '%s' is a training output, which %s-%d computes "
                         "differently",
                         k, value_name(w, w->out[k]), w->to->op, w->to->since);
    if (up) return OX_OK;
    int64_t tm;
    ox_status st = get_int(w, "training_mode", 0, &tm);
    if (st) return st;
    if (tm) return wfail(w, "training_mode=1 has no counterpart");
    del_attr(w, "training_mode");
    ox_dtype x = dtype_of(w, input(w, 0));
    for (int k = 3; k < 5; k++) {
        ox_dtype t = dtype_of(w, input(w, k));
        if (x && t && t != x)
            return wfail(w, "input %d '%s' is %s and X is %s; %s-%d needs one type", k,
                         value_name(w, input(w, k)), ox_dtype_name(t), ox_dtype_name(x), w->to->op,
                         w->to->since);
    }
    return OX_OK;
}

static const char *const type_names[] = {
    [OX_FLOAT] = "FLOAT",     [OX_UINT8] = "UINT8",         [OX_INT8] = "INT8",
    [OX_UINT16] = "UINT16",   [OX_INT16] = "INT16",         [OX_INT32] = "INT32",
    [OX_INT64] = "INT64",     [OX_STRING] = "STRING",       [OX_BOOL] = "BOOL",
    [OX_FLOAT16] = "FLOAT16", [OX_DOUBLE] = "DOUBLE",       [OX_UINT32] = "UINT32",
    [OX_UINT64] = "UINT64",   [OX_COMPLEX64] = "COMPLEX64", [OX_COMPLEX128] = "COMPLEX128"};

/* Cast at 6: `to` was a type name ("FLOAT"), then the TensorProto type number. */
static ox_status ad_cast_to(struct work *w, bool up) {
    const struct ox_attr *a = get_attr(w, "to");
    if (!a) return OX_OK; /* the version check reports it */
    int n = (int)(sizeof type_names / sizeof type_names[0]);
    if (up) {
        if (a->type != OX_ATTR_STRING) return wfail(w, "attribute 'to' is not a string");
        for (int t = 1; t < n; t++)
            if (type_names[t] && a->s_len == strlen(type_names[t]) &&
                !strncasecmp(a->s, type_names[t], a->s_len))
                return put_int(w, "to", t);
        return wfail(w, "attribute 'to' names no type: '%.*s'", (int)a->s_len, a->s);
    }
    if (a->type != OX_ATTR_INT) return wfail(w, "attribute 'to' is not an int");
    if (a->i <= 0 || a->i >= n || !type_names[a->i])
        return wfail(w, "%s-%d cannot cast to type %lld", w->to->op, w->to->since, (long long)a->i);
    return put_string(w, "to", type_names[a->i]);
}

/* Clip at 11: the min and max attributes (defaults: the float range) became optional inputs
 * of the input's type (absent: no bound). Up: the attributes, or the float range for float
 * and double tensors, become constants of the input's type (which must be known). Down: the
 * inputs must be constants; an absent bound becomes -inf/+inf. */
static ox_status ad_clip_inputs(struct work *w, bool up) {
    ox_status st;
    if (up) {
        ox_dtype dt = dtype_of(w, input(w, 0));
        float lo, hi;
        bool has[2] = {get_attr(w, "min") != NULL, get_attr(w, "max") != NULL};
        if ((st = get_float(w, "min", -FLT_MAX, &lo)) || (st = get_float(w, "max", FLT_MAX, &hi)))
            return st;
        del_attr(w, "min");
        del_attr(w, "max");
        if (!dt)
            return wfail(w,
                         "the element type of input 0 '%s' is not known, and %s-%d takes "
                         "min and max as tensors of that type",
                         value_name(w, input(w, 0)), w->to->op, w->to->since);
        for (int k = 0; k < 2; k++) {
            /* float16 holds no value beyond the float range's bound: no bound needed */
            if (!has[k] && dt != OX_FLOAT && dt != OX_DOUBLE) continue;
            double v = k ? hi : lo;
            if ((st = const_floats_input(w, k + 1, k ? "max" : "min", dt, &v, 1, true))) return st;
        }
        return OX_OK;
    }
    for (int k = 1; k <= 2; k++) {
        double v = k == 1 ? -INFINITY : INFINITY;
        if (input(w, k) != -1 && (st = input_scalar(w, k, k == 1 ? "min" : "max", &v))) return st;
        if ((double)(float)v != v && !isnan(v))
            return wfail(w, "bound %.17g is not exact as the float attribute of %s-%d", v,
                         w->to->op, w->to->since);
        if ((st = put_float(w, k == 1 ? "min" : "max", (float)v)) || (st = detach(w, k))) return st;
    }
    return OX_OK;
}

/* Constant at 11: sparse_value appeared. Down: it becomes the dense `value` it stands for
 * (the importer keeps sparse attributes densified). */
static ox_status ad_constant_sparse(struct work *w, bool up) {
    struct ox_attr *a = get_attr(w, "sparse_value");
    if (up || !a) return OX_OK;
    a->name = "value"; /* the tensor stays the node's */
    a->type = OX_ATTR_TENSOR;
    w->changed = true;
    return OX_OK;
}

/* Constant at 12: value_float(s), value_int(s), value_string(s) appeared. Down: the tensor
 * they stand for becomes `value` (float, int64 or string; scalar or 1-D). */
static ox_status ad_constant_values(struct work *w, bool up) {
    if (up) return OX_OK;
    static const char *const names[] = {"value_float", "value_floats", "value_int",
                                        "value_ints",  "value_string", "value_strings"};
    for (int k = 0; k < 6; k++) {
        const struct ox_attr *a = get_attr(w, names[k]);
        if (!a) continue;
        bool list = k % 2 == 1;
        int64_t cnt = list ? a->n : 1;
        ox_dtype dt = k < 2 ? OX_FLOAT : k < 4 ? OX_INT64 : OX_STRING;
        ox_tensor *t = salloc(w->c, sizeof *t);
        if (!t || ox_tensor_alloc(t, dt, list ? 1 : 0, &cnt) != OX_OK) return nomem();
        for (int64_t i = 0; i < cnt; i++) {
            if (k < 2) ((float *)t->data)[i] = list ? a->floats[i] : a->f;
            if (k == 2 || k == 3) ((int64_t *)t->data)[i] = list ? a->ints[i] : a->i;
            if (k >= 4) {
                const char *s = list ? a->strings[i] : a->s;
                size_t len = list ? a->string_lens[i] : a->s_len;
                char *copy = memchr(s, '\0', len) ? NULL : malloc(len + 1);
                if (!copy) {
                    ox_tensor_free_data(t);
                    return wfail(w, "attribute '%s' holds a string a tensor cannot", names[k]);
                }
                memcpy(copy, s, len);
                copy[len] = '\0';
                char **slot = &((char **)t->data)[i];
                free(*slot);
                *slot = copy;
            }
        }
        del_attr(w, names[k]);
        struct ox_attr *v = put_attr(w, "value", OX_ATTR_TENSOR);
        if (!v) {
            ox_tensor_free_data(t);
            return nomem();
        }
        v->t = t;
        return OX_OK;
    }
    return OX_OK;
}

/* QuantizeLinear and DequantizeLinear at 13: per-axis scales and `axis` appeared. Down: the
 * scale must be one value (axis is then ignored, and removed). */
static ox_status ad_quant_axis(struct work *w, bool up) {
    if (up) return OX_OK;
    int64_t d[OX_MAX_RANK];
    int r = full_shape(w, input(w, 1), d);
    int64_t n = 1;
    for (int i = 0; i < r; i++) n *= d[i];
    if (r < 0 || n != 1 || r > 1)
        return wfail(w, "%s-%d takes one scale, and input 1 '%s' %s", w->to->op, w->to->since,
                     value_name(w, input(w, 1)),
                     r < 0 ? "has a shape that is not known" : "holds more than one");
    del_attr(w, "axis");
    return OX_OK;
}

/* Dropout at 10: the mask output went from the input's type to bool. A mask that something
 * reads fails both ways; one nothing reads is dropped. */
static ox_status ad_dropout_mask(struct work *w, bool up) {
    (void)up;
    if (w->n_out < 2 || w->out[1] < 0) return OX_OK;
    const int *uses = uses_in(w->c, w->g);
    if (!uses) return nomem();
    if (uses[w->out[1]] > 0)
        return wfail(w,
                     "the mask '%s' is of the input's type up to Dropout-9 and bool from "
                     "Dropout-10, and something reads it",
                     value_name(w, w->out[1]));
    return drop_outputs_from(w, 1);
}

/* Dropout at 12: the ratio attribute became an input, training_mode and seed appeared. Up:
 * ratio becomes a float constant. Down: training_mode must be absent or a constant false;
 * then the output is the input whatever the ratio, which becomes the attribute when it is a
 * constant and is dropped otherwise; seed (training only) is dropped. */
static ox_status ad_dropout_ratio(struct work *w, bool up) {
    ox_status st;
    if (up) {
        float r;
        if (!get_attr(w, "ratio")) return OX_OK;
        if ((st = get_float(w, "ratio", 0.5f, &r))) return st;
        double v = r;
        del_attr(w, "ratio");
        return const_floats_input(w, 1, "ratio", OX_FLOAT, &v, 1, true);
    }
    if (input(w, 2) != -1) {
        double t;
        if ((st = input_scalar(w, 2, "training_mode", &t))) return st;
        if (t != 0)
            return wfail(w, "training_mode is true: %s-%d has no training mode", w->to->op,
                         w->to->since);
        if ((st = detach(w, 2))) return st;
    }
    if (input(w, 1) != -1) {
        double r;
        if (const_of(w, input(w, 1))) {
            if ((st = input_scalar(w, 1, "ratio", &r)) || (st = put_float(w, "ratio", (float)r)))
                return st;
        }
        if ((st = detach(w, 1))) return st;
    }
    del_attr(w, "seed");
    return OX_OK;
}

/* GRU at 3: Y_h became optional (with linear_before_reset, a rule). Down: Y_h present. */
static ox_status ad_gru_yh(struct work *w, bool up) {
    if (!up && (w->n_out < 2 || w->out[1] < 0))
        return wfail(w, "%s-%d always has the output Y_h", w->to->op, w->to->since);
    return OX_OK;
}

/* RNN, GRU, LSTM at 7: output_sequence (the Y output is optional if 0) went away. Up: with
 * output_sequence=0 a Y that something reads is ambiguous and fails. Down: output_sequence=1
 * when Y is there. */
static ox_status ad_output_sequence(struct work *w, bool up) {
    bool has_y = w->n_out > 0 && w->out[0] >= 0;
    if (!up) return has_y ? put_int(w, "output_sequence", 1) : OX_OK;
    int64_t os;
    ox_status st = get_int(w, "output_sequence", 0, &os);
    if (st) return st;
    if (has_y && !os) {
        const int *uses = uses_in(w->c, w->g);
        if (!uses) return nomem();
        if (uses[w->out[0]] > 0)
            return wfail(w, "output_sequence=0 makes the output Y '%s' optional, yet it is read",
                         value_name(w, w->out[0]));
    }
    del_attr(w, "output_sequence");
    return OX_OK;
}

/* Gather at 11: negative indices appeared (negative axis: a rule). Down: constant indices
 * with negative values are made positive with the data's dim (which must be known). */
static ox_status ad_gather_indices(struct work *w, bool up) {
    const ox_tensor *t = const_of(w, input(w, 1));
    if (up || !t || (t->dtype != OX_INT64 && t->dtype != OX_INT32)) return OX_OK;
    int64_t n = ox_tensor_numel(t), axis, dims[OX_MAX_RANK];
    bool neg = false;
    for (int64_t i = 0; i < n; i++) neg |= ox_tensor_get(t, i) < 0;
    if (!neg) return OX_OK;
    ox_status st = get_int(w, "axis", 0, &axis);
    if (st) return st;
    int r = shape_of(w, input(w, 0), dims);
    if (axis < 0 && r >= 0) axis += r;
    if (r < 0 || axis < 0 || axis >= r || dims[axis] < 0)
        return wfail(w,
                     "the indices have negative values, which %s-%d does not take, and the "
                     "size of the data's axis %lld is not known",
                     w->to->op, w->to->since, (long long)axis);
    ox_tensor *nt = new_const(w, 1, "indices", t->dtype, t->rank, t->dims);
    if (!nt) return nomem();
    for (int64_t i = 0; i < n; i++) {
        double v = ox_tensor_get(t, i);
        ox_tensor_set(nt, i, v < 0 ? v + (double)dims[axis] : v);
    }
    return OX_OK;
}

/* Gemm at 7: C broadcasts unidirectionally, `broadcast` went away. Down: broadcast=1
 * (broadcasting a full-size C is a copy). */
static ox_status ad_gemm_broadcast(struct work *w, bool up) {
    if (!up) return put_int(w, "broadcast", 1);
    del_attr(w, "broadcast");
    return OX_OK;
}

/* Gemm at 11: C became optional. Down: a zero scalar of A's type (which must be known). */
static ox_status ad_gemm_c(struct work *w, bool up) {
    if (up || input(w, 2) != -1) return OX_OK;
    ox_dtype dt = dtype_of(w, input(w, 0));
    if (!dt)
        return wfail(w, "%s-%d needs C, and the element type of A for a zero C is not known",
                     w->to->op, w->to->since);
    double zero = 0;
    return const_floats_input(w, 2, "C", dt, &zero, 1, true);
}

/* LpPool and GlobalLpPool at 2: p, a float, became an int. */
static ox_status ad_lp_p(struct work *w, bool up) {
    const struct ox_attr *a = get_attr(w, "p");
    if (!a) return OX_OK;
    if (!up) {
        if (a->type != OX_ATTR_INT) return wfail(w, "attribute 'p' is not an int");
        return put_float(w, "p", (float)a->i);
    }
    if (a->type != OX_ATTR_FLOAT) return wfail(w, "attribute 'p' is not a float");
    if (a->f != floorf(a->f) || fabsf(a->f) > 1e9f)
        return wfail(w, "p = %g is not an integer, which %s-%d needs", a->f, w->to->op,
                     w->to->since);
    return put_int(w, "p", (int64_t)a->f);
}

/* Softmax, LogSoftmax, Hardmax at 13: the input was seen as 2-D [prod(dims before axis),
 * prod(dims from axis)] (default axis 1); from 13 the op works along one axis (default -1).
 * The two agree when every dim after the axis is 1 (the last axis, say). Up: that must be
 * known from the shape. Down: axis -1 (11 takes it) or such an axis. */
static ox_status ad_softmax_axis(struct work *w, bool up) {
    int64_t axis, dims[OX_MAX_RANK];
    ox_status st = get_int(w, "axis", up ? 1 : -1, &axis);
    if (st) return st;
    if (!up && axis == -1) return put_int(w, "axis", -1);
    int r = shape_of(w, input(w, 0), dims);
    if (r < 0) r = shape_of(w, w->out[0], dims);
    if (r < 0)
        return wfail(w,
                     "%s-%d and %s-%d agree only when the dims after the axis are 1, and the "
                     "rank of input 0 '%s' is not known",
                     w->from->op, w->from->since, w->to->op, w->to->since,
                     value_name(w, input(w, 0)));
    int64_t a = axis < 0 ? axis + r : axis;
    if (a < 0 || a >= r)
        return wfail(w, "axis %lld is out of range for rank %d", (long long)axis, r);
    for (int d = (int)a + 1; d < r; d++)
        if (dims[d] != 1)
            return wfail(w,
                         "%s-%d works over the flattened dims %lld.. of a rank-%d input and "
                         "%s-%d along one axis: they agree only when the dims after the axis "
                         "are 1, and dim %d is %s",
                         up ? w->from->op : w->to->op, up ? w->from->since : w->to->since,
                         (long long)a, r, up ? w->to->op : w->from->op,
                         up ? w->to->since : w->from->since, d,
                         dims[d] < 0 ? "not known" : "not 1");
    return put_int(w, "axis", a == r - 1 && !up ? -1 : a);
}

/* Pad at 2: the attribute `paddings` was renamed `pads` (same layout). */
static ox_status ad_pad_paddings(struct work *w, bool up) {
    struct ox_attr *a = get_attr(w, up ? "paddings" : "pads");
    if (!a) return OX_OK;
    a->name = up ? "pads" : "paddings";
    w->changed = true;
    return OX_OK;
}

/* Pad at 11: the pads and value attributes became inputs (value of the input's type). Up:
 * constants (value only when not 0, which needs the input's type). Down: the inputs must be
 * constants. */
static ox_status ad_pad_inputs(struct work *w, bool up) {
    ox_status st;
    if (up) {
        float v;
        if ((st = get_float(w, "value", 0, &v))) return st;
        if ((st = ints_attr_to_input(w, "pads", 1))) return st;
        del_attr(w, "value");
        if (v == 0) return OX_OK;
        ox_dtype dt = dtype_of(w, input(w, 0));
        if (!dt)
            return wfail(w,
                         "the element type of input 0 '%s' is not known, and %s-%d takes the "
                         "pad value as a tensor of that type",
                         value_name(w, input(w, 0)), w->to->op, w->to->since);
        double dv = v;
        return const_floats_input(w, 2, "constant_value", dt, &dv, 1, true);
    }
    if ((st = input_to_ints_attr(w, 1, "pads"))) return st;
    if (input(w, 2) == -1) return OX_OK;
    double v;
    if ((st = input_scalar(w, 2, "constant_value", &v))) return st;
    if ((double)(float)v != v)
        return wfail(w, "pad value %.17g is not exact as the float attribute of %s-%d", v,
                     w->to->op, w->to->since);
    if ((st = put_float(w, "value", (float)v))) return st;
    return detach(w, 2);
}

/* Pad at 18: the axes input appeared. Down: constant axes and pads become pads over every
 * axis (the rank must be known). */
static ox_status ad_pad_axes(struct work *w, bool up) {
    if (up || input(w, 3) == -1) return OX_OK;
    int64_t axes[OX_MAX_RANK], pads[2 * OX_MAX_RANK], full[2 * OX_MAX_RANK] = {0};
    int na, np;
    ox_status st;
    if ((st = input_ints(w, 3, "axes", axes, OX_MAX_RANK, &na)) ||
        (st = input_ints(w, 1, "pads", pads, 2 * OX_MAX_RANK, &np)))
        return st;
    int r = rank_of(w, input(w, 0));
    if (r < 0)
        return wfail(w, "the rank of input 0 '%s', needed to pad every axis, is not known",
                     value_name(w, input(w, 0)));
    if (np != 2 * na) return wfail(w, "%d pads for %d axes", np, na);
    for (int i = 0; i < na; i++) {
        int64_t a = axes[i] < 0 ? axes[i] + r : axes[i];
        if (a < 0 || a >= r) return wfail(w, "axis %lld is out of range", (long long)axes[i]);
        full[a] = pads[i], full[a + r] = pads[na + i];
    }
    if ((st = detach(w, 3))) return st;
    return const_ints_input(w, 1, "pads", full, 2 * r, false);
}

/* ReduceSum, Squeeze, Unsqueeze at 13 and the other Reduce ops at 18: the axes attribute
 * became an input (Reduce ops: with noop_with_empty_axes, default 0: no axes reduce all).
 * Down: axes must be a constant; noop_with_empty_axes=1 with no axes is the identity,
 * which the older version cannot express. */
static ox_status ad_axes_input(struct work *w, bool up) {
    if (up) return ints_attr_to_input(w, "axes", 1);
    bool reduce = !strncmp(w->op, "Reduce", 6);
    int64_t noop = 0, axes[OX_MAX_RANK];
    int n = 0;
    ox_status st;
    if (reduce && (st = get_int(w, "noop_with_empty_axes", 0, &noop))) return st;
    if (input(w, 1) != -1 && (st = input_ints(w, 1, "axes", axes, OX_MAX_RANK, &n))) return st;
    if (reduce && noop && n == 0)
        return wfail(w,
                     "noop_with_empty_axes=1 without axes is the identity, which %s-%d "
                     "cannot express",
                     w->to->op, w->to->since);
    del_attr(w, "noop_with_empty_axes");
    if (input(w, 1) != -1 && (n > 0 || !reduce) && (st = put_ints(w, "axes", axes, n))) return st;
    return detach(w, 1);
}

/* Reshape at 5: the shape attribute became an input. */
static ox_status ad_reshape_shape(struct work *w, bool up) {
    return up ? ints_attr_to_input(w, "shape", 1) : input_to_ints_attr(w, 1, "shape");
}

/* Scales of a Resize/Upsample: constant ones into s[], else *n = -1. */
static int const_scales(struct work *w, int k, double *s) {
    const ox_tensor *t = const_of(w, input(w, k));
    if (!t || !ox_dtype_is_float(t->dtype) || ox_tensor_numel(t) > OX_MAX_RANK) return -1;
    int n = (int)ox_tensor_numel(t);
    for (int i = 0; i < n; i++) s[i] = ox_tensor_get(t, i);
    return n;
}

/* Resize at 11: roi, sizes and the coordinate_transformation_mode, nearest_mode (and cubic)
 * attributes appeared. Resize-10 maps output x to input x / scale ("asymmetric") and, for
 * nearest, rounds down when upsampling and up when downsampling. Up: asymmetric, an empty roi,
 * and for nearest "floor" (scales all >= 1) or "ceil" (all <= 1): the scales must then be
 * constants. Down: asymmetric, nearest or linear, exclude_outside 0, those nearest modes;
 * sizes become scales when the input's shape is known and floor(in * scale) gives them back. */
static ox_status ad_resize_11(struct work *w, bool up) {
    const char *mode, *ctm, *nm;
    double s[OX_MAX_RANK];
    ox_status st;
    if ((st = get_string(w, "mode", "nearest", &mode))) return st;
    if (up) {
        bool nearest = !strcmp(mode, "nearest");
        int n = const_scales(w, 1, s);
        bool ge = true, le = true;
        for (int i = 0; i < n; i++) ge &= s[i] >= 1, le &= s[i] <= 1;
        if (nearest && (n < 0 || !(ge || le)))
            return wfail(w, "nearest rounds down when upsampling and up when downsampling; %s",
                         n < 0 ? "the scales are not a constant"
                               : "the scales do both, which one nearest_mode cannot express");
        int scales = input(w, 1);
        int64_t zero = 0;
        if (!new_const(w, 1, "roi", OX_FLOAT, 1, &zero) || (st = set_input(w, 2, scales)))
            return nomem();
        if ((st = put_string(w, "coordinate_transformation_mode", "asymmetric"))) return st;
        return nearest ? put_string(w, "nearest_mode", ge ? "floor" : "ceil") : OX_OK;
    }
    int64_t exclude;
    if ((st = get_string(w, "coordinate_transformation_mode", "half_pixel", &ctm)) ||
        (st = get_string(w, "nearest_mode", "round_prefer_floor", &nm)) ||
        (st = get_int(w, "exclude_outside", 0, &exclude)))
        return st;
    if (strcmp(ctm, "asymmetric") != 0)
        return wfail(w, "coordinate_transformation_mode '%s': %s-%d has only 'asymmetric'", ctm,
                     w->to->op, w->to->since);
    if (strcmp(mode, "nearest") != 0 && strcmp(mode, "linear") != 0)
        return wfail(w, "mode '%s': %s-%d has only 'nearest' and 'linear'", mode, w->to->op,
                     w->to->since);
    if (exclude) return wfail(w, "exclude_outside=1 has no counterpart");
    int n = -1;
    if (input(w, 3) != -1 && const_of(w, input(w, 3)) &&
        ox_tensor_numel(const_of(w, input(w, 3))) == 0)
        ;
    else if (input(w, 3) != -1) { /* sizes: as scales */
        int64_t sizes[OX_MAX_RANK], dims[OX_MAX_RANK];
        int ns;
        if ((st = input_ints(w, 3, "sizes", sizes, OX_MAX_RANK, &ns))) return st;
        int r = full_shape(w, input(w, 0), dims);
        if (r != ns)
            return wfail(w,
                         "%s-%d takes scales, and the shape of input 0 '%s' that would turn "
                         "the sizes into scales is not known",
                         w->to->op, w->to->since, value_name(w, input(w, 0)));
        for (int i = 0; i < r; i++) { /* the same positions need the exact ratio in float */
            s[i] = dims[i] ? (float)((double)sizes[i] / (double)dims[i]) : 1.0;
            if (!dims[i] || s[i] * (double)dims[i] != (double)sizes[i])
                return wfail(w,
                             "%s-%d takes scales, and size %lld of axis %d over the input's "
                             "%lld is no float exactly",
                             w->to->op, w->to->since, (long long)sizes[i], i, (long long)dims[i]);
        }
        n = r;
        if ((st = detach(w, 3)) || (st = const_floats_input(w, 2, "scales", OX_FLOAT, s, n, false)))
            return st;
    }
    if (n < 0) n = const_scales(w, 2, s);
    if (!strcmp(mode, "nearest")) {
        bool ge = true, le = true;
        for (int i = 0; i < n; i++) ge &= s[i] >= 1, le &= s[i] <= 1;
        bool floor_ok = !strcmp(nm, "floor") && ge, ceil_ok = !strcmp(nm, "ceil") && le;
        if (n < 0 || !(floor_ok || ceil_ok))
            return wfail(w,
                         "%s-%d's nearest rounds down when upsampling and up when "
                         "downsampling; nearest_mode '%s' %s",
                         w->to->op, w->to->since, nm,
                         n < 0 ? "needs constant scales to tell" : "differs with these scales");
    }
    if ((st = detach(w, 3)) || (st = detach(w, 1))) return st;
    if ((st = set_input(w, 1, input(w, 2))) || (st = set_input(w, 2, -1))) return st;
    static const char *const gone[] = {"coordinate_transformation_mode", "nearest_mode",
                                       "cubic_coeff_a", "exclude_outside", "extrapolation_value"};
    for (int i = 0; i < 5; i++) del_attr(w, gone[i]);
    return OX_OK;
}

/* Resize at 13: roi and scales became optional; tf_half_pixel_for_nn went away. Up: that
 * mode fails; empty constant roi and scales are left out. Down: absent roi and scales
 * become empty constants. */
static ox_status ad_resize_13(struct work *w, bool up) {
    ox_status st;
    if (up) {
        const char *ctm;
        if ((st = get_string(w, "coordinate_transformation_mode", "half_pixel", &ctm))) return st;
        if (!strcmp(ctm, "tf_half_pixel_for_nn"))
            return wfail(w, "coordinate_transformation_mode 'tf_half_pixel_for_nn' has no "
                            "counterpart");
        for (int k = 1; k <= 2; k++) {
            const ox_tensor *t = const_of(w, input(w, k));
            if (t && ox_tensor_numel(t) == 0 && (k == 1 || input(w, 3) != -1) &&
                (st = detach(w, k)))
                return st;
        }
        return OX_OK;
    }
    int64_t zero = 0;
    for (int k = 1; k <= 2; k++)
        if (input(w, k) == -1 && !new_const(w, k, k == 1 ? "roi" : "scales", OX_FLOAT, 1, &zero))
            return nomem();
    return OX_OK;
}

/* Resize-10 came from Upsample-9 (deprecated at 10) with the same inputs, attributes and
 * meaning: renamed both ways. */
static ox_status ad_resize_to_upsample(struct work *w, bool up) {
    if (up) return OX_OK;
    return rename_op(w, "Upsample", 9);
}

static ox_status ad_upsample_to_resize(struct work *w, bool up) {
    if (!up) return OX_OK;
    return rename_op(w, "Resize", 10);
}

/* Upsample at 9: the scales attribute became an input. */
static ox_status ad_upsample_scales_input(struct work *w, bool up) {
    ox_status st;
    if (up) {
        const struct ox_attr *a = get_attr(w, "scales");
        if (!a) return OX_OK;
        if (a->type != OX_ATTR_FLOATS) return wfail(w, "attribute 'scales' is not floats");
        double s[OX_MAX_RANK];
        if (a->n > OX_MAX_RANK) return wfail(w, "%d scales", a->n);
        for (int i = 0; i < a->n; i++) s[i] = a->floats[i];
        if ((st = const_floats_input(w, 1, "scales", OX_FLOAT, s, a->n, false))) return st;
        del_attr(w, "scales");
        return OX_OK;
    }
    double s[OX_MAX_RANK];
    float f[OX_MAX_RANK];
    int n;
    if ((st = input_floats(w, 1, "scales", s, OX_MAX_RANK, &n))) return st;
    for (int i = 0; i < n; i++) f[i] = (float)s[i];
    if ((st = put_floats(w, "scales", f, n))) return st;
    return detach(w, 1);
}

/* Upsample at 7: height_scale and width_scale (4-D NCHW, modes nearest and bilinear) became
 * scales for every axis (modes nearest and linear). */
static ox_status ad_upsample_scales_attr(struct work *w, bool up) {
    const char *mode;
    ox_status st;
    if ((st = get_string(w, "mode", "nearest", &mode))) return st;
    if (up) {
        float h, wd;
        if ((st = get_float(w, "height_scale", 1, &h)) ||
            (st = get_float(w, "width_scale", 1, &wd)))
            return st;
        float s[4] = {1, 1, h, wd};
        del_attr(w, "height_scale");
        del_attr(w, "width_scale");
        if (!strcmp(mode, "bilinear") && (st = put_string(w, "mode", "linear"))) return st;
        return put_floats(w, "scales", s, 4);
    }
    const struct ox_attr *a = get_attr(w, "scales");
    if (!a || a->type != OX_ATTR_FLOATS || a->n != 4 || a->floats[0] != 1 || a->floats[1] != 1)
        return wfail(w,
                     "%s-%d scales the last two axes of 4-D inputs only; the scales are not "
                     "[1, 1, h, w]",
                     w->to->op, w->to->since);
    float h = a->floats[2], wd = a->floats[3];
    del_attr(w, "scales");
    if ((st = put_float(w, "height_scale", h)) || (st = put_float(w, "width_scale", wd))) return st;
    if (!strcmp(mode, "linear")) return put_string(w, "mode", "bilinear");
    return OX_OK;
}

/* RoiAlign at 16: coordinate_transformation_mode appeared, default half_pixel; before, the
 * coordinates were output_half_pixel. */
static ox_status ad_roialign_mode(struct work *w, bool up) {
    const char *m;
    ox_status st = get_string(w, "coordinate_transformation_mode", "half_pixel", &m);
    if (st) return st;
    if (up) return put_string(w, "coordinate_transformation_mode", "output_half_pixel");
    if (strcmp(m, "output_half_pixel") != 0)
        return wfail(w, "coordinate_transformation_mode '%s': %s-%d has only output_half_pixel", m,
                     w->to->op, w->to->since);
    del_attr(w, "coordinate_transformation_mode");
    return OX_OK;
}

/* Scatter was deprecated at 11 for ScatterElements, the same operator: renamed both ways. */
static ox_status ad_scatter_rename(struct work *w, bool up) {
    if (up && !strcmp(w->op, "Scatter")) return rename_op(w, "ScatterElements", 11);
    if (!up && !strcmp(w->op, "ScatterElements")) return rename_op(w, "Scatter", 9);
    return OX_OK;
}

/* Selu at 6: the defaults of alpha and gamma became more precise; absent ones are written
 * out with the old version's values. */
static ox_status ad_selu_defaults(struct work *w, bool up) {
    ox_status st = OX_OK;
    float a_old = 1.6732f, g_old = 1.0507f;
    float a_new = 1.67326319217681884765625f, g_new = 1.05070102214813232421875f;
    if (!get_attr(w, "alpha")) st = put_float(w, "alpha", up ? a_old : a_new);
    if (!st && !get_attr(w, "gamma")) st = put_float(w, "gamma", up ? g_old : g_new);
    return st;
}

/* Slice at 10: starts, ends, axes became inputs, steps appeared. Down: constants, steps 1. */
static ox_status ad_slice_inputs(struct work *w, bool up) {
    ox_status st;
    static const char *const names[] = {"starts", "ends", "axes"};
    if (up) {
        for (int k = 0; k < 3; k++)
            if ((st = ints_attr_to_input(w, names[k], k + 1))) return st;
        return OX_OK;
    }
    if (input(w, 4) != -1) {
        int64_t steps[OX_MAX_RANK];
        int n;
        if ((st = input_ints(w, 4, "steps", steps, OX_MAX_RANK, &n))) return st;
        for (int i = 0; i < n; i++)
            if (steps[i] != 1)
                return wfail(w, "step %lld: %s-%d has no steps", (long long)steps[i], w->to->op,
                             w->to->since);
        if ((st = detach(w, 4))) return st;
    }
    for (int k = 2; k >= 0; k--)
        if (input(w, k + 1) != -1 && (st = input_to_ints_attr(w, k + 1, names[k]))) return st;
    return OX_OK;
}

/* Slice at 11: negative axes appeared. Down: constant negative axes are made positive with
 * the data's rank (which must be known). */
static ox_status ad_slice_negaxes(struct work *w, bool up) {
    const ox_tensor *t = const_of(w, input(w, 3));
    if (up || !t) return OX_OK;
    int64_t axes[OX_MAX_RANK];
    int n;
    bool neg = false;
    ox_status st = input_ints(w, 3, "axes", axes, OX_MAX_RANK, &n);
    if (st) return st;
    for (int i = 0; i < n; i++) neg |= axes[i] < 0;
    if (!neg) return OX_OK;
    int r = rank_of(w, input(w, 0));
    if (r < 0)
        return wfail(w, "negative axes need the rank of input 0 '%s', which is not known",
                     value_name(w, input(w, 0)));
    for (int i = 0; i < n; i++) axes[i] += axes[i] < 0 ? r : 0;
    return const_ints_input(w, 3, "axes", axes, n, false);
}

/* Split at 2: the optional split input went away (the split attribute stays). */
static ox_status ad_split_legacy(struct work *w, bool up) {
    if (!up) return get_attr(w, "axis") ? OX_OK : put_int(w, "axis", 0);
    if (input(w, 1) == -1) return OX_OK;
    if (get_attr(w, "split")) return wfail(w, "split is given both as input and attribute");
    return input_to_ints_attr(w, 1, "split");
}

/* Split at 13: the split attribute became an input. */
static ox_status ad_split_input(struct work *w, bool up) {
    if (up) return ints_attr_to_input(w, "split", 1);
    return input(w, 1) == -1 ? OX_OK : input_to_ints_attr(w, 1, "split");
}

/* Split at 18: num_outputs appeared (equal parts, the last one smaller when the dim does not
 * divide); before, no split meant equal parts, one per output. Up: num_outputs = the output
 * count. Down: the parts need the split axis's size (from the input's or the outputs' shapes). */
static ox_status ad_split_num_outputs(struct work *w, bool up) {
    ox_status st;
    if (up) return input(w, 1) == -1 ? put_int(w, "num_outputs", w->n_out) : OX_OK;
    int64_t n, axis, dims[OX_MAX_RANK];
    if (!get_attr(w, "num_outputs")) return OX_OK;
    if ((st = get_int(w, "num_outputs", 0, &n)) || (st = get_int(w, "axis", 0, &axis))) return st;
    if (n != w->n_out || n <= 0)
        return wfail(w, "num_outputs=%lld for %d outputs", (long long)n, w->n_out);
    int r = shape_of(w, input(w, 0), dims);
    int64_t a = axis < 0 && r >= 0 ? axis + r : axis,
            size = r >= 0 && a >= 0 && a < r ? dims[a] : -1;
    if (size < 0 && a >= 0) { /* the outputs' sizes along the axis */
        size = 0;
        for (int i = 0; i < w->n_out && size >= 0; i++) {
            int ro = shape_of(w, w->out[i], dims);
            size = ro > a && dims[a] >= 0 ? size + dims[a] : -1;
        }
    }
    if (size < 0)
        return wfail(w,
                     "num_outputs=%lld needs the size of axis %lld of input 0 '%s' to give "
                     "the split sizes, and it is not known",
                     (long long)n, (long long)axis, value_name(w, input(w, 0)));
    del_attr(w, "num_outputs");
    if (size % n == 0) return OX_OK;
    int64_t part = (size + n - 1) / n, split[64];
    if (n > 64) return wfail(w, "%lld outputs", (long long)n);
    for (int64_t i = 0; i < n; i++) {
        int64_t left = size - part * i;
        split[i] = left < 0 ? 0 : left < part ? left : part;
    }
    return const_ints_input(w, 1, "split", split, (int)n, false);
}

/* TopK at 10: k became an input (1-D, one value). */
static ox_status ad_topk_k(struct work *w, bool up) {
    ox_status st;
    if (up) {
        int64_t k;
        if (!get_attr(w, "k")) return OX_OK;
        if ((st = get_int(w, "k", 0, &k))) return st;
        del_attr(w, "k");
        return const_ints_input(w, 1, "k", &k, 1, false);
    }
    int64_t k[2];
    int n;
    if ((st = input_ints(w, 1, "K", k, 2, &n))) return st;
    if (n != 1) return wfail(w, "input 1 has %d values, expected one", n);
    if ((st = put_int(w, "k", k[0]))) return st;
    return detach(w, 1);
}

/* OptionalGetElement and OptionalHasElement at 18: they also take tensors and sequences (and
 * HasElement no input). Down: the input is an optional. */
static ox_status ad_optional_input(struct work *w, bool up) {
    int v = input(w, 0);
    struct ox_graph *g = w->g;
    if (up) return OX_OK;
    if (v < 0 || !resolve(&g, &v) || g->values[v].kind != OX_KIND_OPTIONAL)
        return wfail(w, "%s-%d takes an optional, and input 0 is not known to be one", w->to->op,
                     w->to->since);
    return OX_OK;
}

/* DFT at 20: the axis attribute (default 1) became input 2 (default -2). */
static ox_status ad_dft_axis(struct work *w, bool up) {
    ox_status st;
    if (up) {
        int64_t axis;
        if ((st = get_int(w, "axis", 1, &axis))) return st;
        del_attr(w, "axis");
        return const_ints_input(w, 2, "axis", &axis, 1, true);
    }
    int64_t axis[2] = {-2};
    int n = 1;
    if (input(w, 2) != -1 && (st = input_ints(w, 2, "axis", axis, 2, &n))) return st;
    if (n != 1) return wfail(w, "axis has %d values", n);
    if ((st = put_int(w, "axis", axis[0]))) return st;
    return detach(w, 2);
}

/* GridSample at 20: modes bilinear and bicubic were renamed linear and cubic, and inputs may
 * have any rank (before: 4-D). */
static ox_status ad_gridsample_modes(struct work *w, bool up) {
    const char *m;
    ox_status st = get_string(w, "mode", up ? "bilinear" : "linear", &m);
    if (st) return st;
    const char *from = up ? "bilinear" : "linear", *to = up ? "linear" : "bilinear";
    const char *from3 = up ? "bicubic" : "cubic", *to3 = up ? "cubic" : "bicubic";
    if (!up && rank_of(w, input(w, 0)) != 4)
        return wfail(w, "%s-%d takes 4-D inputs only, and input 0 '%s' %s", w->to->op, w->to->since,
                     value_name(w, input(w, 0)),
                     rank_of(w, input(w, 0)) < 0 ? "has a rank that is not known" : "is not 4-D");
    if (!get_attr(w, "mode")) return OX_OK;
    if (!strcmp(m, from)) return put_string(w, "mode", to);
    if (!strcmp(m, from3)) return put_string(w, "mode", to3);
    return OX_OK;
}

/* GroupNormalization at 21: scale and bias went from one value per group to one per channel
 * (the 18 version was deprecated for it). Up: each group's value repeated over its channels;
 * down: one value per group, the channels of a group having the same. Both need constants and
 * the channel count. */
static ox_status ad_groupnorm_channels(struct work *w, bool up) {
    int64_t groups, dims[OX_MAX_RANK];
    ox_status st = get_int(w, "num_groups", 0, &groups);
    if (st) return st;
    int r = shape_of(w, input(w, 0), dims);
    int64_t ch = r >= 2 ? dims[1] : -1;
    if (groups <= 0 || ch <= 0 || ch % groups)
        return wfail(w,
                     "scale and bias go from per-group to per-channel values, and the channel "
                     "count of input 0 '%s' is not known (or not a multiple of num_groups)",
                     value_name(w, input(w, 0)));
    if (ch > 1 << 20) return wfail(w, "%lld channels", (long long)ch);
    for (int k = 1; k <= 2; k++) {
        const ox_tensor *t = const_of(w, input(w, k));
        int64_t want = up ? groups : ch, n = up ? ch : groups, per = ch / groups;
        if (!t || ox_tensor_numel(t) != want)
            return wfail(w, "input %d '%s' is not a constant of %lld values", k,
                         value_name(w, input(w, k)), (long long)want);
        if (!up)
            for (int64_t c = 0; c < ch; c++)
                if (ox_tensor_get(t, c) != ox_tensor_get(t, c / per * per))
                    return wfail(w,
                                 "input %d '%s' differs within a group: %s-%d has one value "
                                 "per group",
                                 k, value_name(w, input(w, k)), w->to->op, w->to->since);
        const ox_tensor *src = t;
        ox_tensor *nt = new_const(w, k, k == 1 ? "scale" : "bias", src->dtype, 1, &n);
        if (!nt) return nomem();
        for (int64_t i = 0; i < n; i++)
            ox_tensor_set(nt, i, ox_tensor_get(src, up ? i / per : i * per));
    }
    if (up) return OX_OK;
    return OX_OK;
}

/* Attention at 24: nonpad_kv_seqlen appeared (a rule), and attn_mask's last dim may be
 * shorter than the keys (padded), where before 1 broadcast. A mask's meaning can change
 * either way, so both need no mask. */
static ox_status ad_attention_mask(struct work *w, bool up) {
    (void)up;
    if (input(w, 3) != -1)
        return wfail(w, "attn_mask '%s': its last dim is read differently by %s-%d",
                     value_name(w, input(w, 3)), up ? w->to->op : w->from->op,
                     up ? w->to->since : w->from->since);
    return OX_OK;
}

/* ---- plan ------------------------------------------------------------------------------- */

static bool is_default_domain(const char *d) {
    return d[0] == '\0' || !strcmp(d, "ai.onnx");
}

static ox_status collect_graphs(struct conv *c, struct ox_graph *g, int depth) {
    if (depth > 64) return ox_err(OX_E_UNSUPPORTED, "subgraphs nested more than 64 deep");
    if (!grow((void **)&c->graphs, &c->cap_graphs, c->n_graphs + 1, sizeof *c->graphs))
        return nomem();
    c->graphs[c->n_graphs++] = (struct graph_info){g, NULL};
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_attrs; k++) {
            const struct ox_attr *a = &g->nodes[i].attrs[k];
            ox_status st = OX_OK;
            if (a->type == OX_ATTR_GRAPH && a->g) st = collect_graphs(c, a->g, depth + 1);
            for (int j = 0; a->type == OX_ATTR_GRAPHS && j < a->n && !st; j++)
                if (a->graphs[j]) st = collect_graphs(c, a->graphs[j], depth + 1);
            if (st) return st;
        }
    return OX_OK;
}

/* Every default-domain node of g (subgraphs come as graphs of their own). */
static ox_status plan_graph(struct conv *c, struct ox_graph *g) {
    int model_opset = (int)ox_graph_opset(c->root, "");
    for (int i = 0; i < g->n_nodes; i++) {
        const struct ox_node *n = &g->nodes[i];
        if (!is_default_domain(n->domain)) continue;
        if (!grow((void **)&c->works, &c->cap_works, c->n_works + 1, sizeof *c->works))
            return nomem();
        struct work *w = &c->works[c->n_works++];
        memset(w, 0, sizeof *w);
        w->c = c, w->g = g, w->index = i, w->op = n->op_type;
        w->n_in = n->n_inputs, w->n_out = n->n_outputs;
        w->n_attrs = w->cap_attrs = n->n_attrs;
        w->in = salloc(c, sizeof(int) * (size_t)n->n_inputs);
        w->out = salloc(c, sizeof(int) * (size_t)n->n_outputs);
        w->attrs = salloc(c, sizeof *w->attrs * (size_t)n->n_attrs);
        w->fresh = salloc(c, (size_t)n->n_attrs);
        if (!w->in || !w->out || !w->attrs || !w->fresh) return nomem();
        if (n->n_inputs) memcpy(w->in, n->inputs, sizeof(int) * (size_t)n->n_inputs);
        if (n->n_outputs) memcpy(w->out, n->outputs, sizeof(int) * (size_t)n->n_outputs);
        if (n->n_attrs) memcpy(w->attrs, n->attrs, sizeof *w->attrs * (size_t)n->n_attrs);
        while (w->n_in > 0 && w->in[w->n_in - 1] == -1) w->n_in--;
        int src = n->opset > 0 ? n->opset : model_opset;
        if (src < 1 || src > OX_OPSET_TABLE_MAX) {
            char who[300];
            return ox_err(OX_E_UNSUPPORTED,
                          "%s: opset %d of the default domain is beyond what the conversion "
                          "knows (1 to %d)",
                          node_desc(w, who, sizeof who), src, OX_OPSET_TABLE_MAX);
        }
        ox_status st = convert_node(w, src);
        if (st) return st;
    }
    return OX_OK;
}

/* ---- commit ------------------------------------------------------------------------------ */

static bool name_taken(const struct conv *c, const char *name) {
    for (int i = 0; i < c->n_graphs; i++)
        if (ox_graph_find_value(c->graphs[i].g, name) >= 0) return true;
    return false;
}

/* Pending constants into initializers of their graphs, named uniquely in the model. Before
 * IR 4 an initializer must also be a graph input: one of the main graph's is added to its
 * inputs (as such models have them); one in a subgraph, whose inputs mean something else,
 * makes the model IR 4. */
static ox_status commit_constants(struct conv *c) {
    for (int i = 0; i < c->n_works; i++) /* constants a later step replaced are not made */
        for (int k = 0; k < c->works[i].n_in; k++)
            if (c->works[i].in[k] <= -2) c->pend[-2 - c->works[i].in[k]].used = true;
    for (int k = 0; k < c->n_pend; k++) {
        struct pending *p = &c->pend[k];
        if (!p->used) continue;
        char name[256];
        snprintf(name, sizeof name, "%s", p->base);
        for (int i = 1; name_taken(c, name) && i < 1000000; i++)
            snprintf(name, sizeof name, "%s_%d", p->base, i);
        int v = ox_graph_add_value(p->g, name);
        ox_tensor *t = v >= 0 ? ox_graph_alloc(p->g, sizeof *t) : NULL;
        struct ox_dim *dims =
            t ? ox_graph_alloc(p->g, sizeof *dims * (size_t)(p->t->rank ? p->t->rank : 1)) : NULL;
        if (!dims) return nomem();
        *t = *p->t;
        p->t->data = NULL; /* the value owns it now */
        struct ox_value *val = &p->g->values[v];
        t->name = val->name;
        for (int d = 0; d < t->rank; d++) dims[d] = (struct ox_dim){t->dims[d], NULL};
        val->kind = OX_KIND_TENSOR;
        val->dtype = t->dtype;
        val->rank = t->rank;
        val->dims = dims;
        val->init = t;
        p->value = v;
        struct ox_graph *root = c->root;
        if (root->ir_version < 4 && p->g == root) {
            int *ins = ox_graph_alloc(root, sizeof(int) * (size_t)(root->n_inputs + 1));
            if (!ins) return nomem();
            if (root->n_inputs) memcpy(ins, root->inputs, sizeof(int) * (size_t)root->n_inputs);
            ins[root->n_inputs] = v;
            c->n_added_inputs++;
            root->inputs = ins;
            root->n_inputs++;
        } else if (root->ir_version < 4) {
            c->ir4 = true;
        }
    }
    return OX_OK;
}

/* The constants made so far, taken out again (their data freed). */
static void undo_constants(struct conv *c) {
    c->root->n_inputs -= c->n_added_inputs;
    c->n_added_inputs = 0;
    c->ir4 = false;
    for (int k = 0; k < c->n_pend; k++) {
        struct pending *p = &c->pend[k];
        if (p->value >= 0) {
            struct ox_value *val = &p->g->values[p->value];
            ox_tensor_free_data(val->init);
            val->init = NULL;
            p->value = -1;
        }
    }
}

/* The work's arrays in the graph's arena: new attribute payloads copied, tensors moved. */
struct ready {
    int *in, *out;
    struct ox_attr *attrs;
};

static ox_status prepare_node(struct conv *c, struct work *w, struct ready *r) {
    struct ox_graph *g = w->g;
    r->in = ox_graph_alloc(g, sizeof(int) * (size_t)(w->n_in ? w->n_in : 1));
    r->out = ox_graph_alloc(g, sizeof(int) * (size_t)(w->n_out ? w->n_out : 1));
    r->attrs = ox_graph_alloc(g, sizeof *r->attrs * (size_t)(w->n_attrs ? w->n_attrs : 1));
    if (!r->in || !r->out || !r->attrs) return nomem();
    for (int k = 0; k < w->n_in; k++)
        r->in[k] = w->in[k] <= -2 ? c->pend[-2 - w->in[k]].value : w->in[k];
    if (w->n_out) memcpy(r->out, w->out, sizeof(int) * (size_t)w->n_out);
    for (int k = 0; k < w->n_attrs; k++) {
        struct ox_attr *a = &r->attrs[k];
        *a = w->attrs[k];
        if (!w->fresh[k]) continue;
        a->name = ox_graph_strdup(g, a->name);
        if (!a->name) return nomem();
        if (a->type == OX_ATTR_STRING) {
            char *s = ox_arena_strndup(&g->arena, a->s, a->s_len);
            if (!s) return nomem();
            a->s = s;
        } else if (a->type == OX_ATTR_INTS || a->type == OX_ATTR_FLOATS) {
            size_t es = a->type == OX_ATTR_INTS ? sizeof(int64_t) : sizeof(float);
            void *d = ox_graph_alloc(g, es * (size_t)(a->n ? a->n : 1));
            if (!d) return nomem();
            if (a->n)
                memcpy(d, a->type == OX_ATTR_INTS ? (void *)a->ints : (void *)a->floats,
                       es * (size_t)a->n);
            if (a->type == OX_ATTR_INTS)
                a->ints = d;
            else
                a->floats = d;
        } else if (a->type == OX_ATTR_TENSOR && a->t) {
            ox_tensor *t = ox_graph_alloc(g, sizeof *t);
            if (!t) return nomem();
            *t = *a->t;
            a->t = t;
        }
    }
    return OX_OK;
}

/* Values of g that converted nodes stopped reading, now read by nothing: initializers lose
 * their data, Constant nodes are removed. */
static void drop_detached(struct conv *c, struct ox_graph *g) {
    int *uses = malloc(sizeof(int) * (size_t)(g->n_values ? g->n_values : 1));
    bool *dead = calloc((size_t)(g->n_nodes ? g->n_nodes : 1), sizeof(bool));
    if (!uses || !dead) goto out; /* nothing removed: the graph stays valid */
    ox_graph_count_uses(g, NULL, uses);
    bool any = false;
    bool ir3 = c->root->ir_version < 4 && g == c->root;
    for (int k = 0; k < c->n_det; k++) {
        int v = c->det[k].v;
        if (c->det[k].g != g || uses[v] > 0 || g->values[v].is_outer) continue;
        if (is_graph_input(g, v)) { /* before IR 4: the input that carried a constant */
            if (!ir3 || !g->values[v].init) continue;
            int wi = 0;
            for (int i = 0; i < g->n_inputs; i++)
                if (g->inputs[i] != v) g->inputs[wi++] = g->inputs[i];
            g->n_inputs = wi;
        }
        struct ox_value *val = &g->values[v];
        if (val->init) {
            if (!val->init_borrowed) ox_tensor_free_data(val->init);
            val->init = NULL;
        } else if (val->producer >= 0 && !strcmp(g->nodes[val->producer].op_type, "Constant") &&
                   is_default_domain(g->nodes[val->producer].domain)) {
            dead[val->producer] = any = true;
            uses[v] = 1; /* once only */
        }
    }
    if (!any) goto out;
    int wi = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        if (dead[i]) {
            for (int k = 0; k < g->nodes[i].n_outputs; k++)
                if (g->nodes[i].outputs[k] >= 0) g->values[g->nodes[i].outputs[k]].producer = -1;
            ox_node_free_attrs(&g->nodes[i]);
            continue;
        }
        if (wi != i) g->nodes[wi] = g->nodes[i];
        for (int k = 0; k < g->nodes[wi].n_outputs; k++)
            if (g->nodes[wi].outputs[k] >= 0) g->values[g->nodes[wi].outputs[k]].producer = wi;
        wi++;
    }
    g->n_nodes = wi;
out:
    free(uses);
    free(dead);
}

static ox_status set_opset_import(struct ox_graph *g, int64_t target) {
    for (int i = 0; i < g->n_opsets; i++)
        if (is_default_domain(g->opsets[i].domain)) {
            g->opsets[i].version = target;
            return OX_OK;
        }
    struct ox_opset *o = ox_graph_alloc(g, sizeof *o * (size_t)(g->n_opsets + 1));
    if (!o) return nomem();
    if (g->n_opsets) memcpy(o, g->opsets, sizeof *o * (size_t)g->n_opsets);
    o[g->n_opsets] = (struct ox_opset){"", target};
    g->opsets = o;
    g->n_opsets++;
    return OX_OK;
}

static ox_status commit(struct conv *c) {
    struct ready *ready = calloc((size_t)(c->n_works ? c->n_works : 1), sizeof *ready);
    if (!ready) return nomem();
    ox_status st = commit_constants(c);
    for (int i = 0; i < c->n_works && !st; i++)
        if (c->works[i].changed) st = prepare_node(c, &c->works[i], &ready[i]);
    /* the import first: the last allocation that may fail */
    if (!st && !ox_graph_opset(c->root, "")) st = set_opset_import(c->root, c->target);
    if (st) {
        undo_constants(c);
        free(ready);
        return st;
    }
    /* nothing below fails */
    for (int i = 0; i < c->n_works; i++) {
        struct work *w = &c->works[i];
        struct ox_node *n = wnode(w);
        if (w->changed) {
            for (int k = 0; k < n->n_outputs; k++) {
                int v = n->outputs[k];
                bool kept = false;
                for (int j = 0; j < w->n_out; j++) kept |= w->out[j] == v;
                if (v >= 0 && !kept) w->g->values[v].producer = -1;
            }
            n->op_type = w->op;
            n->inputs = ready[i].in, n->n_inputs = w->n_in;
            n->outputs = ready[i].out, n->n_outputs = w->n_out;
            n->attrs = ready[i].attrs, n->n_attrs = w->n_attrs;
            for (int k = 0; k < w->n_attrs; k++) w->fresh[k] = 0; /* the node owns them */
        }
        n->opset = c->target;
        n->op = ox_op_find("", n->op_type, c->target);
    }
    for (int k = 0; k < c->n_drop; k++) ox_tensor_free_data(c->drop_tensors[k]);
    set_opset_import(c->root, c->target);
    if (c->root->ir_version < ir_for_opset[c->target])
        c->root->ir_version = ir_for_opset[c->target];
    if (c->ir4 && c->root->ir_version < 4) c->root->ir_version = 4;
    for (int i = 0; i < c->n_graphs; i++) drop_detached(c, c->graphs[i].g);
    free(ready);
    return OX_OK;
}

static void conv_free(struct conv *c) {
    for (int k = 0; k < c->n_pend; k++) ox_tensor_free_data(c->pend[k].t);
    for (int i = 0; i < c->n_works; i++) /* attribute tensors made here and not committed */
        for (int k = 0; k < c->works[i].n_attrs; k++)
            if (c->works[i].fresh[k] && c->works[i].attrs[k].t)
                ox_tensor_free_data(c->works[i].attrs[k].t);
    for (int i = 0; i < c->n_graphs; i++) free(c->graphs[i].uses);
    free(c->graphs);
    free(c->works);
    free(c->pend);
    free(c->det);
    free(c->drop_tensors);
    ox_arena_free(&c->scratch);
}

/* Every default-domain node of g and its subgraphs already at opset v. */
static bool all_at(const struct ox_graph *g, int64_t v, int depth) {
    for (int i = 0; i < g->n_nodes && depth < 64; i++) {
        const struct ox_node *n = &g->nodes[i];
        if (is_default_domain(n->domain) && n->opset != v) return false;
        for (int k = 0; k < n->n_attrs; k++) {
            const struct ox_attr *a = &n->attrs[k];
            if (a->type == OX_ATTR_GRAPH && a->g && !all_at(a->g, v, depth + 1)) return false;
            for (int j = 0; a->type == OX_ATTR_GRAPHS && j < a->n; j++)
                if (a->graphs[j] && !all_at(a->graphs[j], v, depth + 1)) return false;
        }
    }
    return true;
}

ox_status ox_graph_convert_opset(struct ox_graph *g, int64_t target) {
    if (g->parent) return ox_err(OX_E_INVALID, "opset conversion takes a model's main graph");
    if (target > OX_OPSET_TABLE_MAX && ox_graph_opset(g, "") == target && all_at(g, target, 0))
        return OX_OK; /* nothing to convert */
    if (target < 1 || target > OX_OPSET_TABLE_MAX)
        return ox_err(OX_E_INVALID,
                      "opset %lld of the default domain: the conversion knows opsets 1 to %d",
                      (long long)target, OX_OPSET_TABLE_MAX);
    struct conv c = {.root = g, .target = (int)target};
    ox_status st = collect_graphs(&c, g, 0);
    for (int i = 0; i < c.n_graphs && !st; i++) st = plan_graph(&c, c.graphs[i].g);
    if (!st) st = commit(&c);
    conv_free(&c);
    return st;
}
