/* Control flow: If, Loop and Scan run their subgraphs through ox_subgraph_run (a cached plan
 * per body and input signature). Their output shapes are known only once the body has run,
 * so the rows carry OX_OP_ALLOCATES: the kernel sets each output's shape and allocates it.
 * Loop-carried values are copied out of the body's plan after every iteration (the body's
 * next run reuses its memory); scan outputs are stacked into the outputs as they come.
 */
#include "kernels/op.h"

#include <stdlib.h>

static size_t nbytes(const ox_tensor *t) {
    return (size_t)ox_tensor_numel(t) * ox_dtype_size(t->dtype);
}

/* out = a copy of src (any kind), allocated for the node's output. */
static ox_status emit(struct ox_kernel_ctx *ctx, const struct ox_node *n, ox_tensor *out,
                      const ox_tensor *src) {
    if (!out) return OX_OK;
    ox_status st = ox_kernel_copy(ctx, out, src);
    return st ? ox_node_err(n, st, "%s", ox_errmsg()) : OX_OK;
}

/* Values kept across iterations: malloc'd copies (string elements are shared, never freed:
 * they live in the plans' string arenas). */
static void drop(ox_tensor *t) {
    for (int i = 0; t->items && i < t->n_items; i++) drop(&t->items[i]);
    free(t->items);
    free(t->data);
    memset(t, 0, sizeof *t);
}

static ox_status keep(const struct ox_node *n, ox_tensor *dst, const ox_tensor *src) {
    ox_tensor t = {0};
    ox_set_like(&t, src);
    t.kind = src->kind;
    if (src->kind != OX_IO_TENSOR) {
        if (src->n_items && !(t.items = calloc((size_t)src->n_items, sizeof *t.items)))
            return ox_node_err(n, OX_E_NOMEM, "out of memory for a loop-carried value");
        for (int i = 0; i < src->n_items; i++) {
            ox_status st = keep(n, &t.items[i], &src->items[i]);
            t.n_items = i + 1;
            if (st) {
                drop(&t);
                return st;
            }
        }
    } else {
        size_t b = nbytes(src);
        if (!(t.data = malloc(b ? b : 1)))
            return ox_node_err(n, OX_E_NOMEM, "out of memory for a loop-carried value");
        if (b) memcpy(t.data, src->data, b);
    }
    drop(dst);
    *dst = t;
    return OX_OK;
}

/* Replace the loop-carried values with the body's new ones. The body's outputs may show its
 * inputs' memory (Identity and Reshape are views), so every new value is copied before any
 * old one is dropped; callers take the scan outputs first for the same reason. */
static ox_status advance(const struct ox_node *n, ox_tensor *cur, int N,
                         const ox_tensor *const *res) {
    ox_tensor *next = calloc((size_t)N + 1, sizeof *next);
    if (!next) return ox_node_err(n, OX_E_NOMEM, "out of memory");
    ox_status st = OX_OK;
    for (int j = 0; j < N && !st; j++) st = keep(n, &next[j], res[j]);
    for (int j = 0; j < N; j++) {
        if (st) {
            drop(&next[j]);
        } else {
            drop(&cur[j]);
            cur[j] = next[j];
        }
    }
    free(next);
    return st;
}

static const struct ox_graph *graph_attr(const struct ox_node *n, const char *name) {
    const struct ox_attr *a = ox_node_attr(n, name);
    return a && a->type == OX_ATTR_GRAPH ? a->g : NULL;
}

ox_status ox_cf_infer(struct ox_infer_ctx *ctx, const struct ox_node *n, const ox_tensor *const *in,
                      ox_tensor *const *out) {
    (void)ctx, (void)in, (void)out;
    (void)n;
    return OX_NEED_DATA; /* not called: the rows allocate their outputs */
}

/* ---- If -------------------------------------------------------------------------------- */

ox_status ox_cf_cpu_if(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                       const ox_tensor *const *in, ox_tensor *const *out) {
    const ox_tensor *c = ox_in(n, in, 0);
    if (!c || ox_tensor_numel(c) != 1)
        return ox_node_err(n, OX_E_SHAPE, "cond must hold one element");
    bool taken = ox_get_f64(c, 0) != 0;
    const struct ox_graph *g = graph_attr(n, taken ? "then_branch" : "else_branch");
    if (!g)
        return ox_node_err(n, OX_E_INVALID, "missing graph attribute %s",
                           taken ? "then_branch" : "else_branch");
    if (g->n_outputs != n->n_outputs)
        return ox_node_err(n, OX_E_INVALID, "the %s branch has %d outputs, the node %d",
                           taken ? "then" : "else", g->n_outputs, n->n_outputs);
    const ox_tensor **res = calloc((size_t)(g->n_outputs + 1), sizeof *res);
    if (!res) return ox_node_err(n, OX_E_NOMEM, "out of memory");
    ox_status st = ox_subgraph_run(ctx, g, NULL, res);
    for (int k = 0; !st && k < n->n_outputs; k++) st = emit(ctx, n, out[k], res[k]);
    free(res);
    return st;
}

/* ---- Loop ------------------------------------------------------------------------------ */

/* Scan outputs of a Loop: each iteration's tensor appended (all of one shape). */
struct stack {
    ox_tensor elem; /* dtype and shape of one item */
    char *data;
    size_t used, cap;
    int64_t count;
};

static ox_status stack_push(const struct ox_node *n, struct stack *s, const ox_tensor *t) {
    if (s->count == 0) {
        ox_set_like(&s->elem, t);
    } else {
        bool same = t->dtype == s->elem.dtype && t->rank == s->elem.rank;
        for (int d = 0; same && d < t->rank; d++) same = t->dims[d] == s->elem.dims[d];
        if (!same)
            return ox_node_err(n, OX_E_SHAPE, "a scan output changes shape between iterations");
    }
    size_t b = nbytes(t);
    if (s->used + b > s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 4096;
        while (cap < s->used + b) cap *= 2;
        char *d = realloc(s->data, cap);
        if (!d) return ox_node_err(n, OX_E_NOMEM, "out of memory stacking scan outputs");
        s->data = d;
        s->cap = cap;
    }
    if (b) memcpy(s->data + s->used, t->data, b);
    s->used += b;
    s->count++;
    return OX_OK;
}

ox_status ox_cf_cpu_loop(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                         const ox_tensor *const *in, ox_tensor *const *out) {
    const struct ox_graph *body = graph_attr(n, "body");
    if (!body) return ox_node_err(n, OX_E_INVALID, "missing graph attribute body");
    const ox_tensor *M = ox_in(n, in, 0), *C = ox_in(n, in, 1);
    int N = n->n_inputs - 2, K = n->n_outputs - N;
    if (N < 0 || K < 0 || body->n_inputs != N + 2 || body->n_outputs != N + K + 1)
        return ox_node_err(n, OX_E_INVALID,
                           "body has %d inputs and %d outputs; the node %d "
                           "inputs and %d outputs",
                           body->n_inputs, body->n_outputs, n->n_inputs, n->n_outputs);
    int64_t max = M && ox_tensor_numel(M) ? ox_get_i64(M, 0) : INT64_MAX;
    bool cond = C && ox_tensor_numel(C) ? ox_get_f64(C, 0) != 0 : true;
    ox_status st = OX_OK;
    ox_tensor *cur = calloc((size_t)N + 1, sizeof *cur);
    struct stack *acc = calloc((size_t)K + 1, sizeof *acc);
    const ox_tensor **args = calloc((size_t)N + 2, sizeof *args);
    const ox_tensor **res = calloc((size_t)(N + K + 2), sizeof *res);
    if (!cur || !acc || !args || !res) {
        st = ox_node_err(n, OX_E_NOMEM, "out of memory");
        goto done;
    }
    for (int j = 0; j < N && !st; j++) {
        if (!in[2 + j]) {
            st = ox_node_err(n, OX_E_UNSUPPORTED, "omitted loop-carried input %d", j);
            break;
        }
        st = keep(n, &cur[j], in[2 + j]);
    }
    int64_t iter = 0;
    uint8_t cond_byte = cond;
    ox_tensor it_t = {.dtype = OX_INT64, .rank = 0, .data = &iter};
    ox_tensor cond_t = {.dtype = OX_BOOL, .rank = 0, .data = &cond_byte};
    args[0] = &it_t;
    args[1] = &cond_t;
    for (int j = 0; j < N; j++) args[2 + j] = &cur[j];
    for (; !st && iter < max && cond; iter++) {
        cond_byte = 1;
        if ((st = ox_subgraph_run(ctx, body, args, res))) break;
        if (ox_tensor_numel(res[0]) != 1) {
            st = ox_node_err(n, OX_E_SHAPE, "the body's condition output must hold one element");
            break;
        }
        /* without a cond input the loop runs to M and ignores the body's condition */
        cond = C ? ox_get_f64(res[0], 0) != 0 : true;
        for (int k = 0; k < K && !st; k++) st = stack_push(n, &acc[k], res[1 + N + k]);
        if (!st) st = advance(n, cur, N, res + 1);
    }
    for (int j = 0; j < N && !st; j++) st = emit(ctx, n, out[j], &cur[j]);
    for (int k = 0; k < K && !st; k++) {
        ox_tensor *o = out[N + k];
        if (!o) continue;
        struct stack *s = &acc[k];
        if (s->count == 0) { /* no iteration: an empty stack of the declared item type */
            const struct ox_value *v = &body->values[body->outputs[1 + N + k]];
            int64_t dims[OX_MAX_RANK] = {0};
            int r = v->rank > 0 && v->rank < OX_MAX_RANK ? v->rank : 0;
            for (int d = 0; d < r; d++) dims[1 + d] = v->dims[d].value > 0 ? v->dims[d].value : 0;
            ox_set_shape(o, v->dtype ? v->dtype : OX_FLOAT, r + 1, dims);
            st = ox_kernel_alloc(ctx, o);
            continue;
        }
        if (s->elem.rank + 1 > OX_MAX_RANK) {
            st = ox_node_err(n, OX_E_SHAPE, "scan output rank too large");
            break;
        }
        int64_t dims[OX_MAX_RANK];
        dims[0] = s->count;
        for (int d = 0; d < s->elem.rank; d++) dims[d + 1] = s->elem.dims[d];
        ox_set_shape(o, s->elem.dtype, s->elem.rank + 1, dims);
        if (!(st = ox_kernel_alloc(ctx, o)) && s->used) memcpy(o->data, s->data, s->used);
    }
done:
    for (int j = 0; cur && j < N; j++) drop(&cur[j]);
    for (int k = 0; acc && k < K; k++) free(acc[k].data);
    free(cur);
    free(acc);
    free(args);
    free(res);
    return st;
}

/* ---- Scan ------------------------------------------------------------------------------ */

/* Copy slice `i` along `axis` of t into dst (whose data holds one slice). */
static void take_slice(const ox_tensor *t, int axis, int64_t i, ox_tensor *dst) {
    int64_t outer = 1, inner = ox_dtype_size(t->dtype), len = t->dims[axis];
    for (int d = 0; d < axis; d++) outer *= t->dims[d];
    for (int d = axis + 1; d < t->rank; d++) inner *= t->dims[d];
    for (int64_t o = 0; o < outer; o++)
        memcpy((char *)dst->data + o * inner, (const char *)t->data + (o * len + i) * inner,
               (size_t)inner);
}

/* Write item `t` as position `pos` along `axis` of the stacked output y. */
static void put_slice(ox_tensor *y, int axis, int64_t pos, const ox_tensor *t) {
    int64_t outer = 1, inner = ox_dtype_size(t->dtype), len = y->dims[axis];
    for (int d = 0; d < axis; d++) outer *= t->dims[d];
    for (int d = axis; d < t->rank; d++) inner *= t->dims[d];
    for (int64_t o = 0; o < outer; o++)
        memcpy((char *)y->data + (o * len + pos) * inner, (const char *)t->data + o * inner,
               (size_t)inner);
}

static int64_t list_at(const struct ox_node *n, const char *name, int i, int64_t def) {
    const int64_t *v;
    int cnt = ox_attr_ints(n, name, &v);
    return i < cnt ? v[i] : def;
}

/* One scan over inputs `in` (states then scan inputs, without a batch axis); outputs go to
 * `out` (states then scan outputs), which are allocated here on the first call only when
 * `batch` is 0 (opset 8 runs one scan per batch item into shared outputs). */
struct scan_io {
    const ox_tensor *const *in;
    ox_tensor *const *out;
    int N, M, K;
};

static ox_status scan_run(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                          const struct ox_graph *body, struct scan_io *io, int in_axis_base,
                          int64_t batch, int64_t n_batch) {
    int N = io->N, M = io->M, K = io->K;
    ox_status st = OX_OK;
    int64_t len = -1;
    int *axes = calloc((size_t)M + 1, sizeof(int));
    ox_tensor *slices = calloc((size_t)M + 1, sizeof *slices);
    ox_tensor *cur = calloc((size_t)N + 1, sizeof *cur);
    const ox_tensor **args = calloc((size_t)(N + M + 1), sizeof *args);
    const ox_tensor **res = calloc((size_t)(N + K + 1), sizeof *res);
    if (!axes || !slices || !cur || !args || !res) {
        st = ox_node_err(n, OX_E_NOMEM, "out of memory");
        goto done;
    }
    for (int m = 0; m < M && !st; m++) {
        const ox_tensor *t = io->in[N + m];
        int64_t a = list_at(n, "scan_input_axes", m, 0);
        int ax;
        if ((st = ox_norm_axis(n, a, t->rank - in_axis_base, &ax))) break;
        axes[m] = ax + in_axis_base;
        if (len >= 0 && t->dims[axes[m]] != len) {
            st = ox_node_err(n, OX_E_SHAPE, "scan inputs differ in sequence length");
            break;
        }
        len = t->dims[axes[m]];
        ox_tensor *s = &slices[m];
        s->dtype = t->dtype;
        s->rank = 0;
        for (int d = 0; d < t->rank; d++)
            if (d != axes[m]) s->dims[s->rank++] = t->dims[d];
        size_t b = nbytes(s);
        if (!(s->data = malloc(b ? b : 1))) st = ox_node_err(n, OX_E_NOMEM, "out of memory");
        args[N + m] = s;
    }
    if (len < 0) len = 0;
    for (int j = 0; j < N && !st; j++) st = keep(n, &cur[j], io->in[j]);
    for (int j = 0; j < N; j++) args[j] = &cur[j];
    for (int64_t i = 0; i < len && !st; i++) {
        for (int m = 0; m < M; m++) {
            bool rev = list_at(n, n->opset >= 9 ? "scan_input_directions" : "directions", m, 0);
            take_slice(io->in[N + m], axes[m], rev ? len - 1 - i : i, &slices[m]);
        }
        if ((st = ox_subgraph_run(ctx, body, args, res))) break;
        for (int k = 0; k < K && !st; k++) {
            ox_tensor *y = io->out[N + k];
            const ox_tensor *e = res[N + k];
            if (!y) continue;
            int ax;
            int64_t a = list_at(n, "scan_output_axes", k, 0);
            if ((st = ox_norm_axis(n, a, e->rank + 1, &ax))) break;
            int yax = ax + (n_batch ? 1 : 0);
            if (i == 0 && batch == 0) { /* allocate on the first item */
                int64_t dims[OX_MAX_RANK];
                int r = 0;
                if (n_batch) dims[r++] = n_batch;
                for (int d = 0; d <= e->rank; d++)
                    dims[r++] = d == ax ? len : e->dims[d < ax ? d : d - 1];
                ox_set_shape(y, e->dtype, r, dims);
                if ((st = ox_kernel_alloc(ctx, y))) break;
            }
            bool rev = list_at(n, "scan_output_directions", k, 0);
            ox_tensor view = *y;
            if (n_batch) { /* the batch item's part of y */
                view.rank = y->rank - 1;
                for (int d = 0; d < view.rank; d++) view.dims[d] = y->dims[d + 1];
                view.data = (char *)y->data + batch * nbytes(&view);
                yax -= 1;
            }
            put_slice(&view, yax, rev ? len - 1 - i : i, e);
        }
        if (!st) st = advance(n, cur, N, res);
    }
    for (int j = 0; j < N && !st; j++) {
        ox_tensor *y = io->out[j];
        if (!y) continue;
        if (!n_batch) {
            st = emit(ctx, n, y, &cur[j]);
            continue;
        }
        if (batch == 0) {
            int64_t dims[OX_MAX_RANK] = {n_batch};
            for (int d = 0; d < cur[j].rank; d++) dims[d + 1] = cur[j].dims[d];
            ox_set_shape(y, cur[j].dtype, cur[j].rank + 1, dims);
            if ((st = ox_kernel_alloc(ctx, y))) break;
        }
        memcpy((char *)y->data + batch * nbytes(&cur[j]), cur[j].data, nbytes(&cur[j]));
    }
    if (!st && len == 0)
        for (int k = 0; k < K; k++)
            if (io->out[N + k] && batch == 0)
                st = ox_node_err(n, OX_E_UNSUPPORTED, "scan over an empty sequence");
done:
    for (int m = 0; slices && m < M; m++) free(slices[m].data);
    for (int j = 0; cur && j < N; j++) drop(&cur[j]);
    free(axes);
    free(slices);
    free(cur);
    free(args);
    free(res);
    return st;
}

ox_status ox_cf_cpu_scan(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                         const ox_tensor *const *in, ox_tensor *const *out) {
    const struct ox_graph *body = graph_attr(n, "body");
    if (!body) return ox_node_err(n, OX_E_INVALID, "missing graph attribute body");
    int M = (int)ox_attr_int(n, "num_scan_inputs", -1);
    int first = n->opset < 9 ? 1 : 0; /* opset 8: sequence_lens comes first */
    int N = n->n_inputs - first - M, K = n->n_outputs - N;
    if (M <= 0 || N < 0 || K < 0 || body->n_inputs != N + M || body->n_outputs != N + K)
        return ox_node_err(n, OX_E_INVALID,
                           "num_scan_inputs %d does not fit %d inputs, %d "
                           "outputs and a body of %d inputs and %d outputs",
                           M, n->n_inputs, n->n_outputs, body->n_inputs, body->n_outputs);
    for (int i = first; i < n->n_inputs; i++)
        if (!in[i]) return ox_node_err(n, OX_E_INVALID, "input %d is missing", i);
    if (first == 0) {
        struct scan_io io = {in, out, N, M, K};
        return scan_run(ctx, n, body, &io, 0, 0, 0);
    }
    /* opset 8: every input has a batch axis first; one scan per batch item */
    const ox_tensor *lens = in[0];
    int64_t B = in[1]->dims[0];
    const ox_tensor **items = calloc((size_t)(N + M + 1), sizeof *items);
    ox_tensor *views = calloc((size_t)(N + M + 1), sizeof *views);
    ox_status st = items && views ? OX_OK : ox_node_err(n, OX_E_NOMEM, "out of memory");
    for (int i = 0; i < N + M && !st; i++) /* each item is read at b * its size */
        if (in[1 + i]->rank < 1 || in[1 + i]->dims[0] != B)
            st = ox_node_err(n, OX_E_SHAPE,
                             "input %d has %s batch axis where input 1's is %lld (opset 8: every "
                             "state and scan input has the batch axis first)",
                             1 + i, in[1 + i]->rank < 1 ? "no" : "another", (long long)B);
    for (int64_t b = 0; b < B && !st; b++) {
        for (int i = 0; i < N + M; i++) {
            const ox_tensor *t = in[1 + i];
            ox_tensor *v = &views[i];
            v->dtype = t->dtype;
            v->rank = t->rank - 1;
            for (int d = 0; d < v->rank; d++) v->dims[d] = t->dims[d + 1];
            v->data = (char *)t->data + b * nbytes(v);
            items[i] = v;
        }
        if (lens && ox_tensor_numel(lens) > b && N + M > N &&
            ox_get_i64(lens, b) != views[N].dims[0]) {
            st = ox_node_err(n, OX_E_UNSUPPORTED, "sequence_lens shorter than the sequence");
            break;
        }
        struct scan_io io = {items, out, N, M, K};
        st = scan_run(ctx, n, body, &io, 0, b, B);
    }
    free(items);
    free(views);
    return st;
}
