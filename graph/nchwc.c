/* ONNX Runtime's channel-blocked operators as default-domain ones.
 *
 * At its "all" level on x86, ONNX Runtime rewrites a float model's convolutions into the
 * com.microsoft.nchwc domain (its NchwcTransformer) and saves them so: ReorderInput turns an
 * NCHW tensor into NCHWc (channels padded with zeros to a multiple of the block size bs,
 * stored [N][C/bs][H][W][bs]), Conv, MaxPool, AveragePool, GlobalMaxPool,
 * GlobalAveragePool and Upsample work on NCHWc tensors, elementwise default-domain ops of one
 * shape run between them, and ReorderOutput (attribute channels: the true count) turns one
 * back. The filters are stored reordered for the blocked kernels, as observed in the files
 * ONNX Runtime writes:
 *
 *   OIHWBiBo (an NCHWc input, group 1): element (o, i, kh, kw) of the [Op, Ip, KH, KW] filter
 *       at ((((o / bs) Ip/bs + i / bs) KH + kh) KW + kw) bs^2 + (i % bs) bs + o % bs
 *   OIHWBo (an NCHW input, or depthwise: group = Op, I 1): (o, i, kh, kw) at
 *       (((o / bs) I + i) KH + kh) KW + kw) bs + o % bs
 *
 * with Op (and an NCHWc input's Ip) padded to bs and the bias padded with zeros. The block
 * size is the saving machine's SIMD width (16 with AVX-512, 8 with AVX2) and the file does not
 * record it: ONNX Runtime reads such a file with its own machine's. So does this, when the
 * file's padded channel counts are multiples of it, else with the other of 8 and 16 they fit
 * (OX_NCHWC_BLOCK=N sets it). A file whose counts are all multiples of 16 reads the same
 * either way only if saved with this machine's block size: neither runtime can tell.
 *
 * The rewrite keeps tensors channels-first with the channels padded (a plain NCHW tensor of
 * Cp channels where ONNX Runtime had an NCHWc one), so that every op in between computes what
 * the model meant:
 *
 *   ReorderInput(X)           Pad(X) on the channel axis to a multiple of bs (the amount
 *                             constant where the file gives the count, else from Shape
 *                             arithmetic, folded when the plan is built; an Identity where
 *                             there is none); channels_last: a Transpose to NCHW first
 *   Conv(X, W, B, Sum)        Conv(X, W unreordered, B) [-> Add(Sum)] [-> the activation:
 *                             Relu, Tanh, Sigmoid, LeakyRelu, Clip, HardSigmoid]
 *   MaxPool, AveragePool, GlobalMaxPool, GlobalAveragePool   the default domain's
 *   Upsample(nearest, integer scales)   Resize(nearest, asymmetric, floor)
 *   ReorderOutput(X)          Slice of the first `channels` channels (an Identity when that
 *                             is all of them); channels_last: then a Transpose to NHWC
 *
 * The padded channels hold what the padded filters make of zeros; the next convolution's
 * filter is zero there and ReorderOutput drops them. The graph optimizations then fuse the
 * convolutions' bias, residual and activation again (graph/optimize.c). */
#include "graph/nchwc.h"

#include "kernels/op.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NCHWC "com.microsoft.nchwc"

struct lower {
    struct ox_graph *g;
    int opset;       /* the default domain's, for the new nodes */
    int bs;          /* the block size */
    bool *blocked;   /* per value: an NCHWc tensor in ONNX Runtime's graph */
    int64_t *chan;   /* per value: its channel count where the file says it, else -1 */
    bool *reordered; /* per value: a blocked filter replaced (dropped when nothing reads it) */
};

static bool is_nchwc(const struct ox_node *n) {
    return !strcmp(n->domain, NCHWC);
}

static int machine_block(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") ? 16 : 8;
#else
    return 8;
#endif
}

/* Whether block size bs fits every nchwc Conv's filter and bias. */
static bool block_fits(const struct lower *l, int bs) {
    const struct ox_graph *g = l->g;
    for (int i = 0; i < g->n_nodes; i++) {
        const struct ox_node *n = &g->nodes[i];
        if (!is_nchwc(n) || strcmp(n->op_type, "Conv") || n->n_inputs < 2 || n->inputs[1] < 0)
            continue;
        const ox_tensor *w = g->values[n->inputs[1]].init;
        if (!w || w->rank != 4 || w->dims[0] % bs) return false;
        if (l->blocked[n->inputs[0]] && ox_attr_int(n, "group", 1) == 1 && w->dims[1] % bs)
            return false;
    }
    return true;
}

static ox_status choose_block(struct lower *l) {
    const char *e = getenv("OX_NCHWC_BLOCK");
    if (e && *e) {
        char *end;
        long v = strtol(e, &end, 10);
        if (*end || v < 1 || v > 64)
            return ox_err(OX_E_INVALID, "OX_NCHWC_BLOCK=%s: expected a block size of 1 to 64", e);
        l->bs = (int)v;
        if (!block_fits(l, l->bs))
            return ox_err(OX_E_UNSUPPORTED,
                          "ONNX Runtime's channel-blocked model: OX_NCHWC_BLOCK=%d does not fit "
                          "its filters' channel counts",
                          l->bs);
        return OX_OK;
    }
    int mine = machine_block(), other = mine == 16 ? 8 : 16;
    if (block_fits(l, mine)) {
        l->bs = mine;
    } else if (block_fits(l, other)) {
        l->bs = other;
    } else {
        return ox_err(OX_E_UNSUPPORTED,
                      "ONNX Runtime's channel-blocked model (com.microsoft.nchwc): its filters' "
                      "channel counts fit no block size of 8 or 16 (set OX_NCHWC_BLOCK to the "
                      "saving machine's, or save the model at the 'extended' level)");
    }
    return OX_OK;
}

/* ---- building nodes --------------------------------------------------------------------- */

/* A new int64 or float initializer of n values (vector, or scalar when rank 0). */
static int new_init(struct lower *l, const char *base, ox_dtype dt, int rank, int64_t n,
                    const void *data) {
    struct ox_graph *g = l->g;
    char name[256];
    int v = -1;
    for (int k = 0; k < 1000 && v < 0; k++) {
        snprintf(name, sizeof name, k ? "%s_%d" : "%s", base, k);
        if (ox_graph_find_value(g, name) < 0) v = ox_graph_add_value(g, name);
    }
    ox_tensor *t = v >= 0 ? ox_graph_alloc(g, sizeof *t) : NULL;
    if (!t || ox_tensor_alloc(t, dt, rank, &n)) return -1;
    memcpy(t->data, data, (size_t)n * ox_dtype_size(dt));
    t->name = g->values[v].name;
    g->values[v].init = t;
    g->values[v].dtype = dt;
    return v;
}

/* A default-domain node, appended (the graph is sorted at the end), with room for na
 * attributes; NULL on OOM or when the opset has no such op. */
static struct ox_node *add_node(struct lower *l, const char *name, const char *type, int n_in,
                                const int *in, int out, int na) {
    struct ox_graph *g = l->g;
    const struct ox_op *row = ox_op_find("", type, l->opset);
    struct ox_node *n = row ? ox_graph_add_node(g, name, "", type, n_in, in, 1, &out) : NULL;
    if (!n) return NULL;
    n->opset = l->opset;
    n->op = row;
    if (na) {
        n->attrs = ox_graph_alloc(g, sizeof *n->attrs * (size_t)na);
        if (!n->attrs) return NULL;
    }
    return n;
}

static void set_ints(struct ox_graph *g, struct ox_attr *a, const char *name, const int64_t *v,
                     int n) {
    int64_t *p = ox_graph_alloc(g, sizeof(int64_t) * (size_t)(n ? n : 1));
    if (p) memcpy(p, v, sizeof(int64_t) * (size_t)n);
    *a = (struct ox_attr){.name = name, .type = OX_ATTR_INTS, .n = n, .ints = p};
}

static ox_status nomem(void) {
    return ox_err(OX_E_NOMEM, "out of memory rewriting ONNX Runtime's channel-blocked nodes");
}

/* y = Transpose(x, perm) as a new node writing y. */
static ox_status add_transpose(struct lower *l, const char *name, int x, int y,
                               const int64_t *perm) {
    struct ox_node *t = add_node(l, name, "Transpose", 1, &x, y, 1);
    if (!t) return nomem();
    set_ints(l->g, &t->attrs[0], "perm", perm, 4);
    t->n_attrs = 1;
    return t->attrs[0].ints ? OX_OK : nomem();
}

/* ---- the nodes ------------------------------------------------------------------------- */

/* The channel count (axis 1) of every value where the file says it, in the order of the
 * nodes: a ReorderOutput's `channels`, a value of known shape, and either through ops that
 * keep the channels (the elementwise ones ONNX Runtime leaves between its blocked nodes; an
 * operand of one channel would be a broadcast, so the count is taken from the other); -1. */
static void channel_counts(const struct ox_graph *g, int64_t *chan) {
    static const char *const keep[] = {"Relu",        "Sigmoid",   "Tanh",      "Mul",
                                       "Add",         "Sub",       "Div",       "Clip",
                                       "HardSigmoid", "HardSwish", "LeakyRelu", "Identity"};
    for (int v = 0; v < g->n_values; v++) {
        const struct ox_value *val = &g->values[v];
        chan[v] = val->rank > 1 && val->dims && val->dims[1].value > 0 && !val->dims[1].symbol
                      ? val->dims[1].value
                      : -1;
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const struct ox_node *n = &g->nodes[i];
        if (n->n_outputs < 1 || n->outputs[0] < 0 || chan[n->outputs[0]] > 0) continue;
        int64_t c = -1;
        if (is_nchwc(n) && !strcmp(n->op_type, "ReorderOutput") &&
            !ox_attr_int(n, "channels_last", 0))
            c = ox_attr_int(n, "channels", -1);
        bool same = !strcmp(n->domain, "com.microsoft") && !strcmp(n->op_type, "QuickGelu");
        for (size_t k = 0; k < sizeof keep / sizeof *keep && !same; k++)
            same = !n->domain[0] && !strcmp(n->op_type, keep[k]);
        for (int k = 0; same && k < n->n_inputs && k < 2; k++)
            if (n->inputs[k] >= 0 && chan[n->inputs[k]] > 1) c = chan[n->inputs[k]];
        chan[n->outputs[0]] = c;
    }
}

/* ReorderInput(X) -> [Transpose(NHWC -> NCHW)] -> Pad(channels to a multiple of bs), the pad
 * (bs - C mod bs) mod bs: constant where the file gives C (an Identity when it is 0), else
 * from X's shape. */
static ox_status reorder_input(struct lower *l, struct ox_node *n) {
    struct ox_graph *g = l->g;
    int x = n->inputs[0], y = n->outputs[0];
    char nm[300];
    const char *base = n->name ? n->name : "ReorderInput";
    if (ox_attr_int(n, "channels_last", 0)) {
        int xt = ox_graph_add_value_like(l->g, x, "_nchw");
        int64_t to_first[4], to_last[4];
        ox_nhwc_perms(4, to_first, to_last);
        snprintf(nm, sizeof nm, "%s/to_nchw", base);
        if (xt < 0 || add_transpose(l, nm, x, xt, to_first)) return nomem();
        x = xt;
    }
    int64_t known = ox_attr_int(n, "channels_last", 0) ? -1 : l->chan[n->inputs[0]];
    if (known > 0) { /* Pad by constant pads, or nothing */
        int64_t pads[8] = {0, 0, 0, 0, 0, (l->bs - known % l->bs) % l->bs, 0, 0};
        int pv = pads[5] ? new_init(l, "nchwc_pads", OX_INT64, 1, 8, pads) : -1;
        const struct ox_op *row = ox_op_find("", pads[5] ? "Pad" : "Identity", l->opset);
        int *ins = ox_graph_alloc(g, sizeof(int) * 2);
        if ((pads[5] && pv < 0) || !row || !ins) return nomem();
        ins[0] = x, ins[1] = pv;
        n->domain = "";
        n->op_type = pads[5] ? "Pad" : "Identity";
        n->opset = l->opset;
        n->op = row;
        n->n_attrs = 0;
        n->inputs = ins;
        n->n_inputs = pads[5] ? 2 : 1;
        return OX_OK;
    }
    int64_t one = 1, bsv = l->bs, zeros[5] = {0};
    int vs = ox_graph_add_value_like(l->g, y, "_shape"),
        vc = ox_graph_add_value_like(l->g, y, "_channels");
    int vm = ox_graph_add_value_like(l->g, y, "_mod"),
        vd = ox_graph_add_value_like(l->g, y, "_short"),
        vp = ox_graph_add_value_like(l->g, y, "_pad");
    int vp1 = ox_graph_add_value_like(l->g, y, "_pad1"),
        vpads = ox_graph_add_value_like(l->g, y, "_pads");
    int c1 = new_init(l, "nchwc_one", OX_INT64, 0, 1, &one);
    int cb = new_init(l, "nchwc_block", OX_INT64, 0, 1, &bsv);
    int c5 = new_init(l, "nchwc_zeros5", OX_INT64, 1, 5, zeros);
    int c2 = new_init(l, "nchwc_zeros2", OX_INT64, 1, 2, zeros);
    int shape1 = new_init(l, "nchwc_shape1", OX_INT64, 1, 1, &one);
    if (vs < 0 || vc < 0 || vm < 0 || vd < 0 || vp < 0 || vp1 < 0 || vpads < 0 || c1 < 0 ||
        cb < 0 || c5 < 0 || c2 < 0 || shape1 < 0)
        return nomem();
    for (int k = 0, ints[] = {vs, vc, vm, vd, vp, vp1, vpads}; k < 7; k++)
        g->values[ints[k]].dtype = OX_INT64; /* shape arithmetic, not y's type */
    struct ox_node *s;
    snprintf(nm, sizeof nm, "%s/shape", base);
    if (!add_node(l, nm, "Shape", 1, &x, vs, 0)) return nomem();
    snprintf(nm, sizeof nm, "%s/channels", base);
    if (!(s = add_node(l, nm, "Gather", 2, (int[]){vs, c1}, vc, 1))) return nomem();
    s->attrs[0] = (struct ox_attr){.name = "axis", .type = OX_ATTR_INT, .i = 0};
    s->n_attrs = 1;
    snprintf(nm, sizeof nm, "%s/mod", base);
    if (!add_node(l, nm, "Mod", 2, (int[]){vc, cb}, vm, 0)) return nomem();
    snprintf(nm, sizeof nm, "%s/short", base);
    if (!add_node(l, nm, "Sub", 2, (int[]){cb, vm}, vd, 0)) return nomem();
    snprintf(nm, sizeof nm, "%s/pad", base);
    if (!add_node(l, nm, "Mod", 2, (int[]){vd, cb}, vp, 0)) return nomem();
    snprintf(nm, sizeof nm, "%s/pad1", base);
    if (!add_node(l, nm, "Reshape", 2, (int[]){vp, shape1}, vp1, 0)) return nomem();
    snprintf(nm, sizeof nm, "%s/pads", base);
    if (!(s = add_node(l, nm, "Concat", 3, (int[]){c5, vp1, c2}, vpads, 1))) return nomem();
    s->attrs[0] = (struct ox_attr){.name = "axis", .type = OX_ATTR_INT, .i = 0};
    s->n_attrs = 1;
    n = &g->nodes[g->values[y].producer]; /* the node array may have moved */
    snprintf(nm, sizeof nm, "%s/pad_channels", base);
    const struct ox_op *row = ox_op_find("", "Pad", l->opset);
    if (!row) return nomem();
    n->domain = "";
    n->op_type = "Pad";
    n->opset = l->opset;
    n->op = row;
    n->n_attrs = 0;
    int *ins = ox_graph_alloc(g, sizeof(int) * 2);
    if (!ins) return nomem();
    ins[0] = x, ins[1] = vpads;
    n->inputs = ins;
    n->n_inputs = 2;
    return OX_OK;
}

/* ReorderOutput(X; channels) -> Slice(X, [0], [channels], [1]) (Identity, a view, when no
 * channel was padded) [-> Transpose to NHWC]. */
static ox_status reorder_output(struct lower *l, struct ox_node *n) {
    struct ox_graph *g = l->g;
    int64_t channels = ox_attr_int(n, "channels", -1), zero = 0, one = 1;
    bool last = ox_attr_int(n, "channels_last", 0) != 0, all = channels % l->bs == 0;
    if (channels < 1)
        return ox_node_err(n, OX_E_INVALID, "ReorderOutput without a positive 'channels'");
    int x = n->inputs[0], y = n->outputs[0];
    int ys = last ? ox_graph_add_value_like(g, y, "_nchw") : y;
    int *ins = ox_graph_alloc(g, sizeof(int) * 4);
    const struct ox_op *row = ox_op_find("", all ? "Identity" : "Slice", l->opset);
    if (ys < 0 || !ins || !row) return nomem();
    ins[0] = x;
    if (!all) {
        ins[1] = new_init(l, "nchwc_start", OX_INT64, 1, 1, &zero);
        ins[2] = new_init(l, "nchwc_channels", OX_INT64, 1, 1, &channels);
        ins[3] = new_init(l, "nchwc_axis1", OX_INT64, 1, 1, &one);
        if (ins[1] < 0 || ins[2] < 0 || ins[3] < 0) return nomem();
    }
    const char *base = n->name ? n->name : "ReorderOutput";
    n->domain = "";
    n->op_type = all ? "Identity" : "Slice";
    n->opset = l->opset;
    n->op = row;
    n->n_attrs = 0;
    n->inputs = ins;
    n->n_inputs = all ? 1 : 4;
    n->outputs[0] = ys;
    g->values[ys].producer = (int)(n - g->nodes);
    if (!last) return OX_OK;
    char nm[300];
    snprintf(nm, sizeof nm, "%s/to_nhwc", base);
    int64_t to_first[4], to_last[4];
    ox_nhwc_perms(4, to_first, to_last);
    return add_transpose(l, nm, ys, y, to_last);
}

/* The filter of nchwc Conv n in the default domain's layout, as a new initializer. */
static int unreordered_filter(struct lower *l, const struct ox_node *n, const ox_tensor *w,
                              bool blocked_in) {
    int64_t O = w->dims[0], I = w->dims[1], KH = w->dims[2], KW = w->dims[3], bs = l->bs;
    bool bibo = blocked_in && ox_attr_int(n, "group", 1) == 1;
    struct ox_graph *g = l->g;
    char name[256];
    snprintf(name, sizeof name, "%s_oihw", w->name ? w->name : "nchwc_filter");
    int v = -1;
    for (int k = 0; k < 1000 && v < 0; k++) {
        char nm[300];
        snprintf(nm, sizeof nm, k ? "%s_%d" : "%s", name, k);
        if (ox_graph_find_value(g, nm) < 0) v = ox_graph_add_value(g, nm);
    }
    ox_tensor *t = v >= 0 ? ox_graph_alloc(g, sizeof *t) : NULL;
    if (!t || ox_tensor_alloc(t, OX_FLOAT, 4, w->dims)) return -1;
    const float *s = w->data;
    float *d = t->data;
    for (int64_t o = 0; o < O; o++)
        for (int64_t i = 0; i < I; i++)
            for (int64_t h = 0; h < KH; h++)
                for (int64_t x = 0; x < KW; x++) {
                    int64_t at =
                        bibo
                            ? (((((o / bs) * (I / bs) + i / bs) * KH + h) * KW + x) * bs + i % bs) *
                                      bs +
                                  o % bs
                            : ((((o / bs) * I + i) * KH + h) * KW + x) * bs + o % bs;
                    d[((o * I + i) * KH + h) * KW + x] = s[at];
                }
    t->name = g->values[v].name;
    g->values[v].init = t;
    g->values[v].dtype = OX_FLOAT;
    return v;
}

/* nchwc Conv(X, W, B, Sum) -> Conv [-> Add(Sum)] [-> activation]. */
static ox_status conv(struct lower *l, struct ox_node *n) {
    struct ox_graph *g = l->g;
    const ox_tensor *w = n->n_inputs > 1 && n->inputs[1] >= 0 ? g->values[n->inputs[1]].init : NULL;
    if (!w || w->dtype != OX_FLOAT || w->rank != 4)
        return ox_node_err(n, OX_E_UNSUPPORTED,
                           "a channel-blocked Conv needs a constant float "
                           "4-D filter");
    const char *act = ox_attr_str(n, "activation", "");
    const float *p;
    int np = ox_attr_floats(n, "activation_params", &p);
    static const struct {
        const char *name;
        int n_params;
    } acts[] = {{"", 0},          {"Relu", 0}, {"Tanh", 0},       {"Sigmoid", 0},
                {"LeakyRelu", 1}, {"Clip", 2}, {"HardSigmoid", 2}};
    int ai = -1;
    for (int k = 0; k < (int)(sizeof acts / sizeof *acts) && ai < 0; k++)
        if (!strcmp(act, acts[k].name)) ai = k;
    if (ai < 0 || (acts[ai].n_params && np != acts[ai].n_params))
        return ox_node_err(n, OX_E_UNSUPPORTED, "activation '%s' with %d activation_params", act,
                           np < 0 ? 0 : np);
    l->reordered[n->inputs[1]] = true;
    int wv = unreordered_filter(l, n, w, l->blocked[n->inputs[0]]);
    if (wv < 0) return nomem();
    n = &g->nodes[g->values[n->outputs[0]].producer];
    int y = n->outputs[0], sum = n->n_inputs > 3 ? n->inputs[3] : -1, out = y;
    bool has_act = ai > 0;
    int yc = sum >= 0 || has_act ? ox_graph_add_value_like(l->g, y, "_conv") : y;
    int ya = sum >= 0 && has_act ? ox_graph_add_value_like(l->g, y, "_sum") : y;
    if (yc < 0 || ya < 0) return nomem();
    /* the node itself becomes the Conv: its attributes but the activation's */
    struct ox_attr *attrs =
        ox_graph_alloc(g, sizeof *attrs * (size_t)(n->n_attrs ? n->n_attrs : 1));
    const struct ox_op *row = ox_op_find("", "Conv", l->opset);
    if (!attrs || !row) return nomem();
    int na = 0;
    for (int k = 0; k < n->n_attrs; k++)
        if (strncmp(n->attrs[k].name, "activation", 10) != 0) attrs[na++] = n->attrs[k];
    const char *base = n->name ? n->name : "Conv";
    n->domain = "";
    n->opset = l->opset;
    n->op = row;
    n->attrs = attrs;
    n->n_attrs = na;
    n->inputs[1] = wv;
    n->n_inputs = n->n_inputs > 3 ? 3 : n->n_inputs;
    n->outputs[0] = yc;
    g->values[yc].producer = (int)(n - g->nodes);
    char nm[300];
    if (sum >= 0) {
        snprintf(nm, sizeof nm, "%s/sum", base);
        if (!add_node(l, nm, "Add", 2, (int[]){yc, sum}, ya, 0)) return nomem();
        yc = ya;
    }
    if (!has_act) return OX_OK;
    snprintf(nm, sizeof nm, "%s/%s", base, act);
    if (!strcmp(act, "Clip")) {
        int lo = new_init(l, "nchwc_clip_min", OX_FLOAT, 0, 1, &p[0]);
        int hi = new_init(l, "nchwc_clip_max", OX_FLOAT, 0, 1, &p[1]);
        if (lo < 0 || hi < 0 || !add_node(l, nm, "Clip", 3, (int[]){yc, lo, hi}, out, 0))
            return nomem();
        return OX_OK;
    }
    struct ox_node *an = add_node(l, nm, act, 1, &yc, out, 2);
    if (!an) return nomem();
    if (!strcmp(act, "LeakyRelu") || !strcmp(act, "HardSigmoid"))
        an->attrs[an->n_attrs++] =
            (struct ox_attr){.name = "alpha", .type = OX_ATTR_FLOAT, .f = p[0]};
    if (!strcmp(act, "HardSigmoid"))
        an->attrs[an->n_attrs++] =
            (struct ox_attr){.name = "beta", .type = OX_ATTR_FLOAT, .f = p[1]};
    return OX_OK;
}

/* nchwc Upsample(X; scales, mode nearest) -> Resize(X, , [1, 1, sh, sw]) nearest, asymmetric,
 * floor: each pixel repeated, as for integer scales every coordinate mode gives. */
static ox_status upsample(struct lower *l, struct ox_node *n) {
    struct ox_graph *g = l->g;
    const int64_t *sc;
    int ns = ox_attr_ints(n, "scales", &sc);
    const char *mode = ox_attr_str(n, "mode", "nearest");
    if (ns != 2 || strcmp(mode, "nearest") || sc[0] < 1 || sc[1] < 1)
        return ox_node_err(n, OX_E_UNSUPPORTED,
                           "channel-blocked Upsample: only mode nearest with two integer scales "
                           "(mode '%s')",
                           mode);
    float scales[4] = {1, 1, (float)sc[0], (float)sc[1]};
    int sv = new_init(l, "nchwc_scales", OX_FLOAT, 1, 4, scales);
    const struct ox_op *row = ox_op_find("", "Resize", l->opset);
    int *ins = ox_graph_alloc(g, sizeof(int) * 3);
    struct ox_attr *a = ox_graph_alloc(g, sizeof *a * 3);
    if (sv < 0 || !row || !ins || !a)
        return row ? nomem() : ox_node_err(n, OX_E_UNSUPPORTED, "no Resize at opset %d", l->opset);
    ins[0] = n->inputs[0], ins[1] = -1, ins[2] = sv;
    a[0] = (struct ox_attr){.name = "mode", .type = OX_ATTR_STRING, .s = "nearest", .s_len = 7};
    a[1] = (struct ox_attr){.name = "coordinate_transformation_mode",
                            .type = OX_ATTR_STRING,
                            .s = "asymmetric",
                            .s_len = 10};
    a[2] =
        (struct ox_attr){.name = "nearest_mode", .type = OX_ATTR_STRING, .s = "floor", .s_len = 5};
    n->domain = "";
    n->op_type = "Resize";
    n->opset = l->opset;
    n->op = row;
    n->inputs = ins;
    n->n_inputs = 3;
    n->attrs = a;
    n->n_attrs = 3;
    return OX_OK;
}

static ox_status lower_node(struct lower *l, int i) {
    struct ox_node *n = &l->g->nodes[i];
    if (n->n_inputs < 1 || n->inputs[0] < 0 || n->n_outputs < 1 || n->outputs[0] < 0)
        return ox_node_err(n, OX_E_INVALID, "a channel-blocked node needs an input and an output");
    if (!strcmp(n->op_type, "ReorderInput")) return reorder_input(l, n);
    if (!strcmp(n->op_type, "ReorderOutput")) return reorder_output(l, n);
    if (!strcmp(n->op_type, "Conv")) return conv(l, n);
    if (!strcmp(n->op_type, "Upsample")) return upsample(l, n);
    if (!strcmp(n->op_type, "MaxPool") || !strcmp(n->op_type, "AveragePool") ||
        !strcmp(n->op_type, "GlobalMaxPool") || !strcmp(n->op_type, "GlobalAveragePool")) {
        const struct ox_op *row = ox_op_find("", n->op_type, l->opset);
        if (!row) return nomem();
        n->domain = "";
        n->opset = l->opset;
        n->op = row;
        return OX_OK;
    }
    return ox_node_err(n, OX_E_UNSUPPORTED,
                       "op %s in domain " NCHWC " (ONNX Runtime's "
                       "channel-blocked layout) is not supported",
                       n->op_type);
}

ox_status ox_graph_lower_nchwc(struct ox_graph *g) {
    int count = 0;
    for (int i = 0; i < g->n_nodes; i++) count += is_nchwc(&g->nodes[i]);
    if (!count) return OX_OK;
    ox_status st = ox_graph_sort(g);
    if (st) return st;
    int64_t opset = ox_graph_opset(g, "");
    if (opset < 11)
        return ox_err(OX_E_UNSUPPORTED,
                      "ONNX Runtime's channel-blocked model at opset %lld: "
                      "rewriting it needs opset 11 or later",
                      (long long)opset);
    struct lower l = {.g = g, .opset = (int)opset};
    l.blocked = calloc((size_t)(g->n_values ? g->n_values : 1), sizeof(bool));
    if (!l.blocked) return nomem();
    /* NCHWc values: what the nchwc ops write (but ReorderOutput), and what an op reading one
     * writes in turn */
    for (int i = 0; i < g->n_nodes; i++) {
        const struct ox_node *n = &g->nodes[i];
        bool b = is_nchwc(n) && strcmp(n->op_type, "ReorderOutput") != 0;
        for (int k = 0; k < n->n_inputs && !is_nchwc(n); k++)
            b |= n->inputs[k] >= 0 && l.blocked[n->inputs[k]];
        for (int k = 0; k < n->n_outputs; k++)
            if (n->outputs[k] >= 0) l.blocked[n->outputs[k]] = b;
    }
    l.chan = malloc(sizeof(int64_t) * (size_t)(g->n_values ? g->n_values : 1));
    l.reordered = calloc((size_t)(g->n_values ? g->n_values : 1), sizeof(bool));
    if (!l.chan || !l.reordered) {
        free(l.blocked);
        free(l.chan);
        free(l.reordered);
        return nomem();
    }
    channel_counts(g, l.chan);
    st = choose_block(&l);
    for (int i = 0, n0 = g->n_nodes; i < n0 && !st; i++)
        if (is_nchwc(&g->nodes[i])) st = lower_node(&l, i);
    free(l.blocked);
    free(l.chan);
    if (!st) st = ox_graph_sort(g);
    /* the reordered filters nothing reads now go (the file keeps them, the graph need not) */
    int *uses = st ? NULL : malloc(sizeof(int) * (size_t)(g->n_values ? g->n_values : 1));
    if (!st && !uses) return nomem();
    if (uses) ox_graph_count_uses(g, NULL, uses);
    for (int v = 0; uses && v < g->n_values; v++) {
        struct ox_value *val = &g->values[v];
        if (!val->init || uses[v] || ox_graph_is_input(g, v) || !l.reordered[v]) continue;
        if (!val->init_borrowed) ox_tensor_free_data(val->init);
        val->init = NULL;
    }
    free(uses);
    free(l.reordered);
    return st;
}
