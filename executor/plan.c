/* Plans: shape inference, constant folding, lifetimes, arena offsets, and the run loop. */
#include "executor/plan.h"
#include "executor/device.h"
#include "graph/opset.h"
#include <pthread.h>
#include <stdatomic.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define OX_ALIGN 64
/* Outputs of nodes whose inputs are all constant are computed at plan time up to this many
 * bytes per node; bigger ones run every time (they would only cost memory). */
#define OX_FOLD_MAX_BYTES ((size_t)64 << 20)

static size_t align_up(size_t n) {
    return (n + OX_ALIGN - 1) & ~(size_t)(OX_ALIGN - 1);
}

static void *aligned_alloc_bytes(size_t n) {
    void *p = NULL;
    if (posix_memalign(&p, OX_ALIGN, n ? align_up(n) : OX_ALIGN)) return NULL;
    return p;
}

/* Large buffers written once and kept (prepared weights): their whole 2 MiB stretches in
 * 2 MiB pages where the system offers them on request, so that filling them takes one page
 * fault per 2 MiB instead of one per 4 KiB (in a virtual machine each fault is costly: the
 * Winograd weights of retinanet's 3x3 layers, 9.4 MB each, spent half their filling time in
 * faults). The tail stays in small pages: no memory is added. */
#define HUGE_PAGE ((size_t)2 << 20)
static void *big_alloc_bytes(size_t n) {
#ifdef MADV_HUGEPAGE
    if (n >= 2 * HUGE_PAGE) {
        void *p = NULL;
        if (posix_memalign(&p, HUGE_PAGE, align_up(n))) return NULL;
        (void)madvise(p, n / HUGE_PAGE * HUGE_PAGE, MADV_HUGEPAGE); /* a hint only */
        return p;
    }
#endif
    return aligned_alloc_bytes(n);
}

/* Free what the executor allocated for a value: its data, and the items of a sequence or
 * optional, recursively (string elements are never freed: see ox_kernel_ctx). */
static void free_value(ox_tensor *t) {
    for (int i = 0; t->items && i < t->n_items; i++) free_value(&t->items[i]);
    free(t->items);
    free(t->data);
    t->items = NULL;
    t->n_items = 0;
    t->data = NULL;
    t->kind = OX_IO_TENSOR;
}

/* The plan's filled buffers by fill and key (under the fill lock). */
struct ox_prep_share {
    void (*fill)(void *, void *);
    struct ox_prep_key key;
    void *data;
    void *owned; /* data, when the entry owns it (filled by a dynamic step: see run_owned) */
    struct ox_prep_share *next;
};

/* Dynamic values (shapes known only at run time) get new memory at every run. Their buffers
 * are kept from one run to the next instead of freed, and a value reuses its last buffer
 * when it is big enough: after NonZero, a detector's Transpose, Split and Squeeze of a
 * million indices spent most of their time in page faults of fresh memory (each fault
 * costly in a virtual machine). Zeroed as alloc_owned's. */
struct ox_dyn_buf {
    void *keep;        /* the buffer of the last run, free for reuse */
    size_t keep_bytes; /* its size */
    size_t cur_bytes;  /* the size of the buffer the value holds now (0: not from here) */
};

double ox_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

void ox_plan_free(struct ox_plan *p) {
    if (!p) return;
    ox_devplan_free(p->devplan);
    if (p->vals && p->slot) { /* either may be missing when the plan's building failed */
        for (int v = 0; v < p->graph->n_values; v++)
            if (p->slot[v] == OX_SLOT_FOLDED || p->slot[v] == OX_SLOT_DYNAMIC)
                free_value(&p->vals[v]);
    }
    for (int i = 0; i < p->n_steps; i++) {
        free(p->steps[i].in);
        free(p->steps[i].out);
        if (!p->prepared_borrowed) ox_prepared_free(p->steps[i].prepared);
    }
    if (p->dyn)
        for (int v = 0; v < p->graph->n_values; v++) free(p->dyn[v].keep);
    free(p->dyn);
    free(p->dyn_scratch);
    while (p->prep_shared) {
        struct ox_prep_share *e = p->prep_shared;
        p->prep_shared = e->next;
        free(e->owned);
        free(e);
    }
    free(p->steps);
    free(p->vals);
    free(p->slot);
    free(p->offset);
    free(p->sig);
    free(p->arena);
    free(p->scratch);
    free(p->outer);
    free(p->alias);
    free(p->view_off);
    free(p->view_order);
    free(p->step_seconds);
    free(p->first_step);
    free(p->last_step);
    ox_arena_free(&p->strings);
    while (p->subplans) {
        struct ox_plan *sp = p->subplans;
        p->subplans = sp->next;
        ox_plan_free(sp);
    }
    free(p);
}

/* The signature of a plan: dtype, rank and dims of each tensor it was built for (the graph
 * inputs, then for a subgraph the values it reads from enclosing scopes). */
static int64_t *make_sig(const ox_tensor *const *ts, int n_ts, int *n) {
    int len = 0;
    for (int i = 0; i < n_ts; i++) len += 2 + (ts[i] ? ts[i]->rank : 0);
    int64_t *sig = malloc(sizeof *sig * (size_t)(len ? len : 1));
    if (!sig) return NULL;
    int k = 0;
    for (int i = 0; i < n_ts; i++) {
        const ox_tensor *t = ts[i];
        sig[k++] = t ? (int64_t)t->dtype + 1000 * (int64_t)t->kind : -1;
        sig[k++] = t ? t->rank : -1;
        for (int d = 0; t && d < t->rank; d++) sig[k++] = t->dims[d];
    }
    *n = len;
    return sig;
}

static bool sig_matches(const struct ox_plan *p, int *k, const ox_tensor *t) {
    if (*k + 2 > p->n_sig) return false;
    if (p->sig[(*k)++] != (t ? (int64_t)t->dtype + 1000 * (int64_t)t->kind : -1)) return false;
    if (p->sig[(*k)++] != (t ? t->rank : -1)) return false;
    for (int d = 0; t && d < t->rank; d++)
        if (*k >= p->n_sig || p->sig[(*k)++] != t->dims[d]) return false;
    return true;
}

bool ox_plan_matches_scoped(const struct ox_plan *p, const ox_tensor *const *inputs,
                            const struct ox_scope *scope) {
    int k = 0;
    for (int i = 0; i < p->graph->n_inputs; i++)
        if (!sig_matches(p, &k, inputs[i])) return false;
    for (int i = 0; i < p->n_outer; i++) {
        bool is_const;
        const ox_tensor *t = ox_scope_find(scope, p->graph->values[p->outer[i]].name, &is_const);
        if (!t || !sig_matches(p, &k, t)) return false;
    }
    return k == p->n_sig;
}

bool ox_plan_matches(const struct ox_plan *p, const ox_tensor *const *inputs) {
    return ox_plan_matches_scoped(p, inputs, NULL);
}

const ox_tensor *ox_scope_find(const struct ox_scope *s, const char *name, bool *is_const) {
    for (; s; s = s->parent) {
        const struct ox_plan *p = s->plan;
        int v = ox_graph_find_value(p->graph, name);
        if (v < 0 || p->slot[v] == OX_SLOT_NONE) continue;
        *is_const = p->slot[v] == OX_SLOT_CONST || p->slot[v] == OX_SLOT_FOLDED;
        return &p->vals[v];
    }
    return NULL;
}

/* The declared type of a graph input against the tensor given for it. */
/* A bound input against the graph's declaration: kind, element type, rank, and the static
 * dims unless `dims_are_hints` (a subgraph's inputs: exporters write the shapes they traced,
 * and a Loop's carried value may grow from one iteration to the next: torchvision's Mask
 * R-CNN declares its pasted masks [0, H, W] and concatenates one more each iteration; ONNX
 * Runtime does not check a subgraph's feeds either). */
static ox_status check_input(const struct ox_value *v, const ox_tensor *t, bool dims_are_hints) {
    char got[256];
    static const char *kinds[] = {"a tensor",    "a sequence",      "a map",
                                  "an optional", "a sparse tensor", "a value"};
    /* an optional input also takes the value itself (as Optional* ops read it) */
    if (v->kind != OX_KIND_UNKNOWN && (int)v->kind != (int)t->kind && v->kind != OX_KIND_OPTIONAL)
        return ox_err(OX_E_SHAPE, "input '%s': expected %s, got %s", v->name,
                      kinds[v->kind <= OX_KIND_UNKNOWN ? v->kind : OX_KIND_UNKNOWN],
                      kinds[(unsigned)t->kind <= OX_IO_UNKNOWN ? t->kind : OX_IO_UNKNOWN]);
    if (t->kind != OX_IO_TENSOR) return OX_OK;
    if (v->dtype != OX_UNDEFINED && t->dtype != v->dtype)
        return ox_err(OX_E_SHAPE, "input '%s': expected element type %s, got %s", v->name,
                      ox_dtype_name(v->dtype), ox_tensor_desc(t, got, sizeof got));
    if (t->rank < 0 || t->rank > OX_MAX_RANK)
        return ox_err(OX_E_SHAPE, "input '%s': rank %d out of range", v->name, t->rank);
    for (int d = 0; d < t->rank; d++)
        if (t->dims[d] < 0)
            return ox_err(OX_E_SHAPE, "input '%s': negative dimension %lld", v->name,
                          (long long)t->dims[d]);
    bool ok = v->rank < 0 || v->rank == t->rank;
    for (int d = 0; ok && !dims_are_hints && v->rank >= 0 && d < v->rank; d++)
        if (v->dims[d].value >= 0 && v->dims[d].value != t->dims[d]) ok = false;
    if (!ok) {
        char want[256];
        size_t k = (size_t)snprintf(want, sizeof want, "%s[", ox_dtype_name(v->dtype));
        for (int d = 0; d < v->rank && k < sizeof want; d++) {
            if (v->dims[d].value >= 0)
                k += (size_t)snprintf(want + k, sizeof want - k, "%s%lld", d ? "," : "",
                                      (long long)v->dims[d].value);
            else
                k += (size_t)snprintf(want + k, sizeof want - k, "%s%s", d ? "," : "",
                                      v->dims[d].symbol ? v->dims[d].symbol : "?");
        }
        if (k < sizeof want) snprintf(want + k, sizeof want - k, "]");
        return ox_err(OX_E_SHAPE, "input '%s': expected shape %s, got %s", v->name, want,
                      ox_tensor_desc(t, got, sizeof got));
    }
    return OX_OK;
}

static ox_status alloc_owned(ox_tensor *t) {
    size_t bytes;
    if (!ox_tensor_bytes(t->dtype, t->rank, t->dims, &bytes))
        return ox_err(OX_E_NOMEM, "tensor size overflows");
    t->data = aligned_alloc_bytes(bytes);
    if (!t->data) return ox_err(OX_E_NOMEM, "out of memory allocating %zu bytes", bytes);
    memset(t->data, 0, bytes);
    return OX_OK;
}

static ox_status alloc_dynamic(struct ox_plan *p, int v, ox_tensor *t) {
    size_t bytes;
    if (!ox_tensor_bytes(t->dtype, t->rank, t->dims, &bytes))
        return ox_err(OX_E_NOMEM, "tensor size overflows");
    if (!p->dyn && !(p->dyn = calloc((size_t)p->graph->n_values, sizeof *p->dyn)))
        return alloc_owned(t); /* without memory for the table, no reuse */
    struct ox_dyn_buf *d = &p->dyn[v];
    if (d->keep && d->keep_bytes >= bytes) {
        t->data = d->keep;
        d->cur_bytes = d->keep_bytes;
        d->keep = NULL;
        memset(t->data, 0, bytes);
        return OX_OK;
    }
    free(d->keep);
    d->keep = NULL;
    ox_status st = alloc_owned(t);
    d->cur_bytes = st ? 0 : bytes;
    return st;
}

ox_status ox_kernel_alloc(struct ox_kernel_ctx *ctx, ox_tensor *t) {
    (void)ctx;
    return alloc_owned(t);
}

ox_status ox_kernel_alloc_items(struct ox_kernel_ctx *ctx, ox_tensor *t, ox_io_kind kind,
                                ox_dtype dt, int n) {
    (void)ctx;
    const char *name = t->name;
    memset(t, 0, sizeof *t);
    t->name = name;
    t->kind = kind;
    t->dtype = dt;
    if (n > 0 && !(t->items = calloc((size_t)n, sizeof *t->items)))
        return ox_err(OX_E_NOMEM, "out of memory for a sequence of %d items", n);
    t->n_items = n;
    return OX_OK;
}

ox_status ox_kernel_copy(struct ox_kernel_ctx *ctx, ox_tensor *dst, const ox_tensor *src) {
    if (src->kind != OX_IO_TENSOR) {
        ox_status st = ox_kernel_alloc_items(ctx, dst, src->kind, src->dtype, src->n_items);
        for (int i = 0; !st && i < src->n_items; i++)
            st = ox_kernel_copy(ctx, &dst->items[i], &src->items[i]);
        return st;
    }
    const char *name = dst->name;
    memset(dst, 0, sizeof *dst);
    dst->name = name;
    ox_set_like(dst, src);
    ox_status st = alloc_owned(dst);
    if (st) return st;
    size_t b = (size_t)ox_tensor_numel(src) * ox_dtype_size(src->dtype);
    if (b) memcpy(dst->data, src->data, b);
    return OX_OK;
}

/* A step's prepared memory: whether it is filled, where its bytes are (its own buffer, or
 * the buffer of another step with the same fill and key), and its own buffer (allocated
 * when the plan is built, so that running never fails for want of it; untouched until it
 * is filled, and given back when another step's is shared instead). */
struct ox_prepared {
    atomic_int ready;
    void *data;
    void *own;
};

void *ox_prepared_new(size_t bytes) {
    struct ox_prepared *h = calloc(1, sizeof *h);
    if (h && !(h->own = big_alloc_bytes(bytes))) {
        free(h);
        return NULL;
    }
    return h;
}

void ox_prepared_free(void *prepared) {
    struct ox_prepared *h = prepared;
    if (!h) return;
    free(h->own);
    free(h);
}

static void *shared_prepared(struct ox_plan *p, void (*fill)(void *, void *),
                             const struct ox_prep_key *key) {
    for (struct ox_prep_share *e = p ? p->prep_shared : NULL; e; e = e->next)
        if (e->fill == fill && e->key.src == key->src &&
            !memcmp(e->key.dims, key->dims, sizeof key->dims))
            return e->data;
    return NULL;
}

void *ox_kernel_prepared(struct ox_kernel_ctx *ctx, void (*fill)(void *dst, void *arg), void *arg,
                         const struct ox_prep_key *key) {
    static pthread_mutex_t fill_lock = PTHREAD_MUTEX_INITIALIZER;
    if (!ctx->prepared) return NULL;
    struct ox_prepared *h = ctx->prepared;
    if (atomic_load_explicit(&h->ready, memory_order_acquire)) return h->data;
    pthread_mutex_lock(&fill_lock);
    if (!atomic_load_explicit(&h->ready, memory_order_relaxed)) {
        void *data = key ? shared_prepared(ctx->plan, fill, key) : NULL;
        if (data) {
            free(h->own);
            h->own = NULL;
        } else {
            data = h->own;
            fill(data, arg);
            /* a buffer for one call (plan-time folding) is not kept, not shared; a dynamic
             * step's is handed to the plan, for its later runs */
            bool keep = !ctx->prepared_once || ctx->prepared_keep;
            struct ox_prep_share *e = key && ctx->plan && keep ? malloc(sizeof *e) : NULL;
            if (e) { /* without memory, only the sharing is lost */
                void *owned = ctx->prepared_once ? data : NULL;
                *e = (struct ox_prep_share){fill, *key, data, owned, ctx->plan->prep_shared};
                ctx->plan->prep_shared = e;
                if (owned) h->own = NULL;
            }
        }
        h->data = data;
        atomic_store_explicit(&h->ready, 1, memory_order_release);
    }
    pthread_mutex_unlock(&fill_lock);
    return h->data;
}

/* Bit k: input k of n is constant for the plan's life (an initializer or folded). */
static unsigned const_inputs(const struct ox_plan *p, const struct ox_node *n) {
    unsigned bits = 0;
    for (int k = 0; k < n->n_inputs && k < 32; k++)
        if (n->inputs[k] >= 0 &&
            (p->slot[n->inputs[k]] == OX_SLOT_CONST || p->slot[n->inputs[k]] == OX_SLOT_FOLDED))
            bits |= 1u << k;
    return bits;
}

/* Run one node's kernel outside the arena (plan-time folding, dynamic nodes at run time),
 * with the scratch and prepared memory its infer asked for (kept for this call only). On
 * failure the outputs own nothing (a folded node's slot is not yet FOLDED, so ox_plan_free
 * would not free them). */
static ox_status run_owned(struct ox_plan *p, const struct ox_node *n, const ox_tensor **in,
                           ox_tensor **out, size_t scratch_bytes, size_t prepared_bytes,
                           struct ox_pool *pool, const struct ox_scope *scope, bool dynamic) {
    ox_status st = OX_OK;
    struct ox_kernel_ctx kc = {.scratch_bytes = scratch_bytes,
                               .pool = pool,
                               .strings = &p->strings,
                               .plan = p,
                               .scope = scope,
                               .precise = p->precise};
    if (!(n->op->flags & OX_OP_ALLOCATES))
        for (int k = 0; k < n->n_outputs && !st; k++)
            if (out[k] &&
                (st = dynamic && n->outputs[k] >= 0 ? alloc_dynamic(p, n->outputs[k], out[k])
                                                    : alloc_owned(out[k])))
                st = ox_node_err(n, st, "%s", ox_errmsg());
    if (dynamic && !st && scratch_bytes > p->dyn_scratch_bytes) { /* kept for later steps */
        free(p->dyn_scratch);
        p->dyn_scratch_bytes = 0;
        if (!(p->dyn_scratch = aligned_alloc_bytes(scratch_bytes)))
            st =
                ox_node_err(n, OX_E_NOMEM, "out of memory for %zu bytes of scratch", scratch_bytes);
        else
            p->dyn_scratch_bytes = scratch_bytes;
    }
    if (dynamic)
        kc.scratch = scratch_bytes ? p->dyn_scratch : NULL;
    else if (!st && scratch_bytes && !(kc.scratch = aligned_alloc_bytes(scratch_bytes)))
        st = ox_node_err(n, OX_E_NOMEM, "out of memory for %zu bytes of scratch", scratch_bytes);
    /* a kernel may count on the prepared memory it asked for (conv packs W only there) */
    if (!st && prepared_bytes && !(kc.prepared = ox_prepared_new(prepared_bytes)))
        st = ox_node_err(n, OX_E_NOMEM, "out of memory for %zu prepared bytes", prepared_bytes);
    kc.prepared_once = true;
    kc.prepared_keep = dynamic;
    if (!st) st = n->op->cpu(&kc, n, (const ox_tensor *const *)in, out);
    if (!dynamic) free(kc.scratch);
    ox_prepared_free(kc.prepared);
    if (st)
        for (int k = 0; k < n->n_outputs; k++)
            if (out[k]) free_value(out[k]);
    return st;
}

static bool check_op(const struct ox_graph *g, const struct ox_node *n, ox_status *st) {
    if (n->op) {
        /* kernels write their first output without looking: it must have a value */
        if (ox_opset_first_output_required(n->domain, n->op_type, n->opset) &&
            (n->n_outputs == 0 || n->outputs[0] < 0)) {
            *st = ox_node_err(n, OX_E_INVALID, "%s needs its first output, and the node names none",
                              n->op_type);
            return false;
        }
        return true;
    }
    if (!strcmp(n->domain, "com.microsoft.nchwc"))
        *st = ox_node_err(n, OX_E_UNSUPPORTED,
                          "op %s in domain com.microsoft.nchwc (ONNX Runtime's channel-blocked "
                          "layout) inside a subgraph: only a main graph's are rewritten "
                          "(graph/nchwc.c); save the model from ONNX Runtime at the 'extended' "
                          "optimization level (ORT_ENABLE_EXTENDED)",
                          n->op_type);
    else if (ox_op_known(n->domain, n->op_type))
        *st = ox_node_err(n, OX_E_UNSUPPORTED, "op %s%s%s is not supported at opset %d", n->domain,
                          *n->domain ? "." : "", n->op_type, n->opset);
    else
        *st = ox_node_err(n, OX_E_UNSUPPORTED, "unknown op '%s' in domain '%s' (opset %lld)",
                          n->op_type, *n->domain ? n->domain : "ai.onnx",
                          (long long)ox_graph_opset(g, n->domain));
    return false;
}

/* Place values in the order given, each at the best-fitting gap among the values already
 * placed whose lifetimes overlap its own; returns the arena size, offsets in off[]. */
static size_t place_in_order(const int *order, int n, const size_t *size, const int *first,
                             const int *last, size_t *off, int *placed, int *conf) {
    size_t arena = 0;
    for (int i = 0; i < n; i++) {
        int v = order[i], nc = 0;
        for (int j = 0; j < i; j++) {
            int u = placed[j];
            if (first[u] <= last[v] && first[v] <= last[u]) conf[nc++] = u;
        }
        for (int a = 1; a < nc; a++) { /* conflicts sorted by offset */
            int u = conf[a], b = a - 1;
            while (b >= 0 && off[conf[b]] > off[u]) {
                conf[b + 1] = conf[b];
                b--;
            }
            conf[b + 1] = u;
        }
        size_t best = SIZE_MAX, best_gap = SIZE_MAX, cur = 0;
        for (int a = 0; a < nc; a++) {
            int u = conf[a];
            if (off[u] > cur) {
                size_t gap = off[u] - cur;
                if (gap >= size[v] && gap < best_gap) best = cur, best_gap = gap;
            }
            if (off[u] + size[u] > cur) cur = off[u] + size[u];
        }
        if (best == SIZE_MAX) best = cur;
        off[v] = best;
        if (best + size[v] > arena) arena = best + size[v];
        placed[i] = v;
    }
    return arena;
}

/* Sort ids by key, descending, ties by id (insertion sort: graph sizes). */
static void sort_desc(int *ids, int n, const double *key) {
    for (int i = 1; i < n; i++) {
        int v = ids[i], j = i - 1;
        while (j >= 0 && (key[ids[j]] < key[v] || (key[ids[j]] == key[v] && ids[j] > v))) {
            ids[j + 1] = ids[j];
            j--;
        }
        ids[j + 1] = v;
    }
}

/* Offsets for arena values: best fit in three orders (largest first; largest lifetime x
 * size first; earliest first, larger first among equals), the smallest arena kept. The
 * lower bound is the most bytes alive at one step. */
static ox_status assign_offsets(struct ox_plan *p, const int *first, const int *last) {
    const struct ox_graph *g = p->graph;
    size_t nv = (size_t)(g->n_values ? g->n_values : 1);
    int n = 0;
    int *ids = malloc(sizeof(int) * nv), *placed = malloc(sizeof(int) * nv);
    int *conf = malloc(sizeof(int) * nv);
    size_t *size = calloc(nv, sizeof(size_t)), *off = calloc(nv, sizeof(size_t));
    double *key = calloc(nv, sizeof(double));
    ox_status st = OX_OK;
    if (!ids || !size || !placed || !conf || !off || !key) {
        st = ox_err(OX_E_NOMEM, "out of memory planning");
        goto done;
    }
    for (int v = 0; v < g->n_values; v++) {
        if (p->slot[v] != OX_SLOT_ARENA) continue;
        size_t b;
        if (!ox_tensor_bytes(p->vals[v].dtype, p->vals[v].rank, p->vals[v].dims, &b)) {
            st = ox_err(OX_E_NOMEM, "value '%s': size overflows", g->values[v].name);
            goto done;
        }
        size[v] = align_up(b ? b : 1);
        ids[n++] = v;
        p->sum_bytes += size[v];
    }
    p->arena_bytes = SIZE_MAX;
    for (int order = 0; order < 3; order++) {
        for (int i = 0; i < n; i++) {
            int v = ids[i];
            double sz = (double)size[v], len = (double)(last[v] - first[v] + 1);
            key[v] = order == 0 ? sz : order == 1 ? sz * len : -(double)first[v] + sz * 1e-18;
        }
        sort_desc(ids, n, key);
        size_t arena = place_in_order(ids, n, size, first, last, off, placed, conf);
        if (arena < p->arena_bytes) {
            p->arena_bytes = arena;
            for (int i = 0; i < n; i++) p->offset[ids[i]] = off[ids[i]];
        }
    }
    if (n == 0) p->arena_bytes = 0;
    for (int s = 0; s <= p->n_steps; s++) {
        size_t live = 0;
        for (int i = 0; i < n; i++)
            if (first[ids[i]] <= s && s <= last[ids[i]]) live += size[ids[i]];
        if (live > p->peak_bytes) p->peak_bytes = live;
    }
done:
    free(conf);
    free(ids);
    free(size);
    free(placed);
    free(off);
    free(key);
    return st;
}

static ox_status plan_build(const struct ox_graph *g, const ox_tensor *const *inputs,
                            const struct ox_scope *scope, struct ox_pool *pool, uint64_t max_bytes,
                            bool cpu_only, struct ox_plan **out);

ox_status ox_plan_build(const struct ox_graph *g, const ox_tensor *const *inputs,
                        struct ox_pool *pool, struct ox_plan **out) {
    return plan_build(g, inputs, NULL, pool, 0, false, out);
}

ox_status ox_plan_build_limited(const struct ox_graph *g, const ox_tensor *const *inputs,
                                struct ox_pool *pool, uint64_t max_bytes, bool cpu_only,
                                struct ox_plan **out) {
    return plan_build(g, inputs, NULL, pool, max_bytes, cpu_only, out);
}

ox_status ox_plan_build_scoped(const struct ox_graph *g, const ox_tensor *const *inputs,
                               const struct ox_scope *scope, struct ox_plan **out) {
    const struct ox_plan *up = scope ? scope->plan : NULL;
    return plan_build(g, inputs, scope, up ? up->pool : NULL, up ? up->max_bytes : 0, false, out);
}

/* The plan_bytes limit: what the plan holds so far against it. */
static ox_status check_plan_bytes(const struct ox_plan *p, uint64_t held) {
    uint64_t total = held + p->arena_bytes + p->scratch_bytes;
    if (!p->max_bytes || total <= p->max_bytes) return OX_OK;
    return ox_err_limit("plan_bytes", p->max_bytes,
                        "the plan of graph '%s' for these input shapes takes %llu bytes (arena "
                        "%zu, scratch %zu, prepared and folded data %llu)",
                        p->graph->name ? p->graph->name : "", (unsigned long long)total,
                        p->arena_bytes, p->scratch_bytes, (unsigned long long)held);
}

/* The value whose memory a view shows (itself when it is no view). */
static int root_of(const struct ox_plan *p, int v) {
    while (p->slot[v] == OX_SLOT_VIEW) v = p->alias[v];
    return v;
}

/* Concat without copies: when each input is a contiguous block of the output (nothing
 * before the axis but ones) and is an arena value that only this Concat reads, the inputs
 * become views at their offsets in the output, their producers write there, and the Concat
 * step has nothing left to do. */
/* Steps whose outputs no step reads at run time go: values read only by nodes folded when
 * the plan was built (the Shape of a Slice whose source a FusedAttention reads directly, the
 * Slice itself then computing nothing anyone uses). Graph outputs, their views' sources,
 * dynamic and nondeterministic steps stay; so does everything in a graph with subgraphs
 * (whose reads by name are not followed here). */
static ox_status plan_drop_unread(struct ox_plan *p) {
    const struct ox_graph *g = p->graph;
    for (int i = 0; i < g->n_nodes; i++)
        for (int a = 0; a < g->nodes[i].n_attrs; a++)
            if (g->nodes[i].attrs[a].type == OX_ATTR_GRAPH ||
                g->nodes[i].attrs[a].type == OX_ATTR_GRAPHS)
                return OX_OK;
    bool *needed = calloc((size_t)(g->n_values ? g->n_values : 1), sizeof(bool));
    bool *dead = calloc((size_t)(p->n_steps ? p->n_steps : 1), sizeof(bool));
    if (!needed || !dead) {
        free(needed);
        free(dead);
        return ox_err(OX_E_NOMEM, "out of memory planning");
    }
    /* a value is needed through the memory it shows (steps write roots, not views) */
    for (int k = 0; k < g->n_outputs; k++) needed[root_of(p, g->outputs[k])] = true;
    for (int s = p->n_steps - 1; s >= 0; s--) {
        const struct ox_step *st = &p->steps[s];
        const struct ox_node *n = &g->nodes[st->node];
        bool live = st->is_dynamic || n->n_outputs == 0 || (n->op->flags & OX_OP_NONDETERMINISTIC);
        for (int k = 0; k < n->n_outputs && !live; k++)
            live = n->outputs[k] >= 0 && needed[n->outputs[k]];
        dead[s] = !live;
        for (int k = 0; k < n->n_inputs && live; k++)
            if (n->inputs[k] >= 0) needed[root_of(p, n->inputs[k])] = true;
    }
    int w = 0;
    for (int s = 0; s < p->n_steps; s++) {
        struct ox_step *st = &p->steps[s];
        if (!dead[s]) {
            p->steps[w++] = *st;
            continue;
        }
        const struct ox_node *n = &g->nodes[st->node];
        for (int k = 0; k < n->n_outputs; k++)
            if (n->outputs[k] >= 0) p->slot[n->outputs[k]] = OX_SLOT_NONE;
        free(st->in);
        free(st->out);
        ox_prepared_free(st->prepared);
    }
    p->n_steps = w;
    free(needed);
    free(dead);
    return OX_OK;
}

static ox_status plan_concat_in_place(struct ox_plan *p) {
    const struct ox_graph *g = p->graph;
    int *uses = calloc((size_t)(g->n_values ? g->n_values : 1), sizeof(int));
    if (!uses) return ox_err(OX_E_NOMEM, "out of memory planning");
    ox_graph_count_uses(g, NULL, uses);
    for (int s = 0; s < p->n_steps; s++) {
        struct ox_step *st = &p->steps[s];
        const struct ox_node *n = &g->nodes[st->node];
        if (st->is_dynamic || n->domain[0] || strcmp(n->op_type, "Concat") != 0 ||
            n->n_outputs != 1 || n->outputs[0] < 0 || p->slot[n->outputs[0]] != OX_SLOT_ARENA)
            continue;
        const ox_tensor *y = &p->vals[n->outputs[0]];
        int64_t axis = ox_attr_int(n, "axis", 0), outer = 1;
        if (axis < 0) axis += y->rank;
        if (axis < 0 || axis >= y->rank) continue;
        for (int d = 0; d < axis; d++) outer *= y->dims[d];
        bool ok = outer == 1 && n->n_inputs > 1;
        for (int k = 0; k < n->n_inputs && ok; k++) {
            int v = n->inputs[k];
            ok = v >= 0 && p->slot[v] == OX_SLOT_ARENA && uses[v] == 1 &&
                 p->vals[v].dtype == y->dtype && g->values[v].producer >= 0;
        }
        if (!ok) continue;
        size_t off = 0;
        for (int k = 0; k < n->n_inputs; k++) {
            int v = n->inputs[k];
            size_t b = (size_t)ox_tensor_numel(&p->vals[v]) * ox_dtype_size(y->dtype);
            p->slot[v] = OX_SLOT_VIEW;
            p->alias[v] = n->outputs[0];
            p->view_off[v] = off;
            p->view_order[p->n_views++] = v;
            off += b;
        }
        st->is_skipped = true;
    }
    free(uses);
    return OX_OK;
}

/* A pointwise Conv whose output only the next step's depthwise Conv reads (either may be a
 * FusedConv with its activation: the widening and depthwise layers of MobileNet and
 * EfficientNet blocks) runs with it as one step, where the kernel says it pays
 * (kernels/cpu/conv.c, ox_nn_cpu_pw_dw): the widened tensor is made a band of rows at a time
 * in scratch and never goes through memory. Its arena place stays (unwritten); the first
 * node's inputs live through the second's step. A profile shows the step as the first node.
 * Only for plans that no device plan runs (a device runs each node with its own kernels). */
static bool is_conv(const struct ox_node *n) {
    return (!strcmp(n->domain, OX_DOMAIN_ONNXEXEC) && !strcmp(n->op_type, "FusedConv")) ||
           (!n->domain[0] && !strcmp(n->op_type, "Conv"));
}

static ox_status plan_fuse_pw_dw(struct ox_plan *p) {
    const struct ox_graph *g = p->graph;
    int *uses = calloc((size_t)(g->n_values ? g->n_values : 1), sizeof(int));
    if (!uses) return ox_err(OX_E_NOMEM, "out of memory planning");
    ox_graph_count_uses(g, NULL, uses);
    for (int s = 0; s + 1 < p->n_steps; s++) {
        struct ox_step *a = &p->steps[s], *b = &p->steps[s + 1];
        const struct ox_node *na = &g->nodes[a->node], *nb = &g->nodes[b->node];
        if (a->is_dynamic || b->is_dynamic || a->is_skipped || b->is_skipped || !a->prepared ||
            !is_conv(na) || !is_conv(nb) || na->n_outputs != 1 || nb->n_inputs < 2)
            continue;
        int v = na->outputs[0];
        if (v < 0 || nb->inputs[0] != v || uses[v] != 1 || p->slot[v] != OX_SLOT_ARENA ||
            !a->out[0] || !b->out[0])
            continue;
        size_t bytes =
            ox_nn_pw_dw_scratch(na, a->in, a->out[0], nb, b->in, b->out[0], ox_pool_size(p->pool));
        if (!bytes) continue;
        a->fuse_next = true;
        b->is_skipped = true;
        if (bytes > p->scratch_bytes) p->scratch_bytes = bytes;
        s++;
    }
    free(uses);
    return OX_OK;
}

/* In-place elementwise ops: a step whose op allows it (OX_OP_INPLACE) writes its output
 * into the memory of an input of the same type and shape that dies at that step (an arena
 * value read by no later step, no graph output). The output becomes a view of that input,
 * whose lifetime grows to cover the output's; the step still runs, reading and writing the
 * same elements. */
static void plan_in_place(struct ox_plan *p, int *first, int *last) {
    const struct ox_graph *g = p->graph;
    bool added = false;
    for (int s = 0; s < p->n_steps; s++) {
        const struct ox_step *st = &p->steps[s];
        const struct ox_node *n = &g->nodes[st->node];
        if (st->is_dynamic || !(n->op->flags & OX_OP_INPLACE) || n->n_outputs != 1) continue;
        int o = n->outputs[0];
        if (o < 0 || p->slot[o] != OX_SLOT_ARENA) continue;
        for (int k = 0; k < n->n_inputs && k < 2; k++) {
            int iv = n->inputs[k];
            if (iv < 0) continue;
            int r = root_of(p, iv);
            const ox_tensor *a = &p->vals[iv], *y = &p->vals[o];
            if (p->slot[r] != OX_SLOT_ARENA || last[r] != s || a->dtype != y->dtype ||
                a->rank != y->rank || memcmp(a->dims, y->dims, sizeof(int64_t) * (size_t)a->rank))
                continue;
            p->slot[o] = OX_SLOT_VIEW;
            p->alias[o] = iv;
            last[r] = last[o];
            first[o] = last[o] = -1;
            added = true;
            break;
        }
    }
    if (!added) return;
    /* views in the order of the nodes that make them: a source comes before its views */
    p->n_views = 0;
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_outputs; k++) {
            int v = g->nodes[i].outputs[k];
            if (v >= 0 && p->slot[v] == OX_SLOT_VIEW) p->view_order[p->n_views++] = v;
        }
}

/* Point each view at its source's data, in the order the views were made (a view of a view
 * comes after its source); again at every run, as inputs move. */
static void bind_views(struct ox_plan *p) {
    for (int i = 0; i < p->n_views; i++) {
        int v = p->view_order[i];
        char *src = p->vals[p->alias[v]].data; /* NULL before the first run binds inputs */
        p->vals[v].data = src ? src + p->view_off[v] : NULL;
    }
}

/* Bind a subgraph's outer names to the enclosing plans: constants there are constants here
 * (so they fold), anything else is bound at each run. */
static ox_status bind_outer(struct ox_plan *p, const struct ox_scope *scope,
                            const ox_tensor *const *inputs) {
    const struct ox_graph *g = p->graph;
    int n = 0;
    for (int v = 0; v < g->n_values; v++) n += g->values[v].is_outer && !g->values[v].init;
    const ox_tensor **all = malloc(sizeof *all * (size_t)(g->n_inputs + n + 1));
    p->outer = malloc(sizeof(int) * (size_t)(n + 1));
    if (!all || !p->outer) {
        free(all);
        return ox_err(OX_E_NOMEM, "out of memory");
    }
    for (int i = 0; i < g->n_inputs; i++) all[i] = inputs[i];
    for (int v = 0; v < g->n_values; v++) {
        if (!g->values[v].is_outer || g->values[v].init) continue;
        bool is_const = false;
        const ox_tensor *t = ox_scope_find(scope, g->values[v].name, &is_const);
        if (!t) {
            free(all);
            return ox_err(OX_E_INVALID,
                          "subgraph '%s' reads '%s', which no enclosing graph "
                          "computes",
                          g->name ? g->name : "", g->values[v].name);
        }
        p->outer[p->n_outer++] = v;
        all[g->n_inputs + p->n_outer - 1] = t;
        ox_set_like(&p->vals[v], t);
        p->vals[v].kind = t->kind;
        p->vals[v].data = is_const ? t->data : NULL;
        p->slot[v] = is_const ? OX_SLOT_CONST : OX_SLOT_OUTER;
    }
    p->sig = make_sig(all, g->n_inputs + p->n_outer, &p->n_sig);
    free(all);
    return p->sig ? OX_OK : ox_err(OX_E_NOMEM, "out of memory");
}

static ox_status plan_build(const struct ox_graph *g, const ox_tensor *const *inputs,
                            const struct ox_scope *scope, struct ox_pool *pool, uint64_t max_bytes,
                            bool cpu_only, struct ox_plan **out) {
    ox_status st = OX_OK;
    struct ox_plan *p = calloc(1, sizeof *p);
    int nv = g->n_values ? g->n_values : 1;
    int *first = NULL, *last = NULL;
    uint64_t held = 0; /* prepared and folded bytes, for the plan_bytes limit */
    if (!p) return ox_err(OX_E_NOMEM, "out of memory");
    p->graph = g;
    const char *grad_meta = ox_graph_meta(g, OX_META_GRADIENTS);
    p->precise = grad_meta && strcmp(grad_meta, "1") == 0;
    p->pool = pool;
    p->max_bytes = max_bytes;
    p->vals = calloc((size_t)nv, sizeof *p->vals);
    p->slot = calloc((size_t)nv, 1);
    p->offset = calloc((size_t)nv, sizeof *p->offset);
    p->steps = calloc((size_t)(g->n_nodes ? g->n_nodes : 1), sizeof *p->steps);
    p->alias = malloc(sizeof(int) * (size_t)nv);
    p->view_off = calloc((size_t)nv, sizeof(size_t));
    p->view_order = malloc(sizeof(int) * (size_t)nv);
    first = malloc(sizeof(int) * (size_t)nv);
    last = malloc(sizeof(int) * (size_t)nv);
    if (!p->vals || !p->slot || !p->offset || !p->steps || !p->alias || !p->view_off ||
        !p->view_order || !first || !last) {
        st = ox_err(OX_E_NOMEM, "out of memory");
        goto fail;
    }
    for (int v = 0; v < nv; v++) p->alias[v] = -1;
    for (int v = 0; v < g->n_values; v++) {
        p->vals[v].name = g->values[v].name;
        if (g->values[v].init) {
            p->vals[v] = *g->values[v].init;
            p->vals[v].name = g->values[v].name;
            p->slot[v] = OX_SLOT_CONST;
        }
    }
    if ((st = bind_outer(p, scope, inputs))) goto fail;
    for (int i = 0; i < g->n_inputs; i++) {
        int v = g->inputs[i];
        const ox_tensor *t = inputs[i];
        if (!t) {
            if (!g->values[v].init) {
                st = ox_err(OX_E_INVALID, "input '%s' is missing", g->values[v].name);
                goto fail;
            }
            continue; /* the initializer is its default */
        }
        if ((st = check_input(&g->values[v], t, scope != NULL))) goto fail;
        ox_set_like(&p->vals[v], t);
        p->vals[v].kind = t->kind;
        p->vals[v].data = NULL;
        p->slot[v] = OX_SLOT_INPUT;
    }

    /* shape inference, folding, and the schedule */
    for (int i = 0; i < g->n_nodes; i++) {
        const struct ox_node *n = &g->nodes[i];
        if (!check_op(g, n, &st)) goto fail;
        struct ox_step *s = &p->steps[p->n_steps];
        s->node = i;
        s->in = calloc((size_t)(n->n_inputs ? n->n_inputs : 1), sizeof *s->in);
        s->out = calloc((size_t)(n->n_outputs ? n->n_outputs : 1), sizeof *s->out);
        if (!s->in || !s->out) {
            free(s->in), free(s->out);
            st = ox_err(OX_E_NOMEM, "out of memory");
            goto fail;
        }
        p->n_steps++;
        bool all_const = true, dyn = false;
        for (int k = 0; k < n->n_inputs; k++) {
            int v = n->inputs[k];
            if (v < 0) continue;
            if (p->slot[v] == OX_SLOT_NONE) {
                st = ox_node_err(n, OX_E_INVALID,
                                 "input '%s' has no value (no producer, not a "
                                 "graph input or initializer)",
                                 g->values[v].name);
                goto fail;
            }
            s->in[k] = &p->vals[v];
            if (p->slot[v] == OX_SLOT_DYNAMIC || p->vals[v].kind != OX_IO_TENSOR) dyn = true;
            if (p->slot[v] != OX_SLOT_CONST && p->slot[v] != OX_SLOT_FOLDED) all_const = false;
        }
        for (int k = 0; k < n->n_outputs; k++)
            if (n->outputs[k] >= 0) s->out[k] = &p->vals[n->outputs[k]];
        struct ox_infer_ctx ic = {.graph = g,
                                  .n_threads = ox_pool_size(pool),
                                  .precise = p->precise,
                                  .const_inputs = const_inputs(p, n)};
        if (n->op->flags & OX_OP_ALLOCATES) dyn = true;
        if (!dyn) {
            (void)ox_attr_check(n); /* forget mismatches read outside an infer function */
            st = n->op->infer(&ic, n, s->in, s->out);
            ox_status ast = ox_attr_check(n);
            if (st < 0) goto fail;
            if (ast) {
                st = ast;
                goto fail;
            }
            dyn = st == OX_NEED_DATA;
            st = OX_OK;
        }
        if (dyn) {
            s->is_dynamic = true;
            p->has_dynamic = true;
            for (int k = 0; k < n->n_outputs; k++)
                if (n->outputs[k] >= 0) p->slot[n->outputs[k]] = OX_SLOT_DYNAMIC;
            continue;
        }
        size_t out_bytes = 0;
        for (int k = 0; k < n->n_outputs; k++) {
            size_t b;
            if (!s->out[k]) continue;
            if (!ox_tensor_bytes(s->out[k]->dtype, s->out[k]->rank, s->out[k]->dims, &b) ||
                !ox_add_size(out_bytes, b, &out_bytes)) {
                st = ox_node_err(n, OX_E_NOMEM, "output size overflows");
                goto fail;
            }
        }
        bool foldable = all_const || (n->op->flags & OX_OP_SHAPE_ONLY);
        if (foldable && !(n->op->flags & OX_OP_NONDETERMINISTIC) &&
            out_bytes <= OX_FOLD_MAX_BYTES) {
            held += out_bytes;
            if ((st = check_plan_bytes(p, held))) goto fail;
            if ((st = run_owned(p, n, s->in, s->out, ic.scratch_bytes, ic.prepared_bytes, pool,
                                false, scope)))
                goto fail;
            for (int k = 0; k < n->n_outputs; k++)
                if (n->outputs[k] >= 0) p->slot[n->outputs[k]] = OX_SLOT_FOLDED;
            free(s->in), free(s->out);
            p->n_steps--;
            continue;
        }
        /* Reshape-like ops: the output is the input's memory under another shape */
        if ((n->op->flags & OX_OP_VIEW) && n->n_outputs >= 1 && s->out[0] && s->in[0] &&
            s->in[0]->dtype == s->out[0]->dtype &&
            ox_tensor_numel(s->in[0]) == ox_tensor_numel(s->out[0])) {
            int v = n->outputs[0];
            p->slot[v] = OX_SLOT_VIEW;
            p->alias[v] = n->inputs[0];
            p->view_order[p->n_views++] = v;
            free(s->in), free(s->out);
            p->n_steps--;
            continue;
        }
        for (int k = 0; k < n->n_outputs; k++)
            if (n->outputs[k] >= 0) p->slot[n->outputs[k]] = OX_SLOT_ARENA;
        if (ic.scratch_bytes > p->scratch_bytes) p->scratch_bytes = ic.scratch_bytes;
        if (ic.prepared_bytes) {
            held += ic.prepared_bytes;
            if ((st = check_plan_bytes(p, held))) goto fail;
            if (!(s->prepared = ox_prepared_new(ic.prepared_bytes))) {
                st = ox_node_err(n, OX_E_NOMEM, "out of memory for %zu prepared bytes",
                                 ic.prepared_bytes);
                goto fail;
            }
        }
    }
    for (int k = 0; k < g->n_outputs; k++)
        if (p->slot[g->outputs[k]] == OX_SLOT_NONE) {
            st = ox_err(OX_E_INVALID, "graph output '%s' is never computed",
                        g->values[g->outputs[k]].name);
            goto fail;
        }

    if ((st = plan_drop_unread(p))) goto fail;
    if ((st = plan_concat_in_place(p))) goto fail;
    if (cpu_only && (st = plan_fuse_pw_dw(p))) goto fail;
    /* lifetimes over the schedule: first write to last read (of the memory: a view's writes
     * and reads count for the value it shows); graph outputs live to the end */
    for (int v = 0; v < g->n_values; v++) first[v] = last[v] = -1;
    for (int s = 0; s < p->n_steps; s++) {
        const struct ox_node *n = &g->nodes[p->steps[s].node];
        for (int k = 0; k < n->n_outputs; k++) {
            int r = n->outputs[k] >= 0 ? root_of(p, n->outputs[k]) : -1;
            if (r >= 0 && first[r] < 0) first[r] = last[r] = s;
        }
        for (int k = 0; k < n->n_inputs; k++)
            if (n->inputs[k] >= 0) last[root_of(p, n->inputs[k])] = s;
        /* values read by the node's subgraphs through their outer names */
        for (int a = 0; a < n->n_attrs; a++) {
            const struct ox_attr *at = &n->attrs[a];
            for (int j = 0; j < (at->g ? 1 : at->graphs ? at->n : 0); j++) {
                const struct ox_graph *sub = at->g ? at->g : at->graphs[j];
                for (int v = 0; v < sub->n_values; v++) {
                    if (!sub->values[v].is_outer) continue;
                    int id = ox_graph_find_value(g, sub->values[v].name);
                    if (id >= 0) id = root_of(p, id);
                    if (id >= 0 && last[id] < s) last[id] = s;
                }
            }
        }
    }
    /* a fused pair reads the first node's inputs at the second's step too */
    for (int s = 0; s < p->n_steps; s++) {
        const struct ox_node *n = &g->nodes[p->steps[s].node];
        for (int k = 0; p->steps[s].fuse_next && k < n->n_inputs; k++) {
            int r = n->inputs[k] >= 0 ? root_of(p, n->inputs[k]) : -1;
            if (r >= 0 && last[r] == s) last[r] = s + 1;
        }
    }
    for (int k = 0; k < g->n_outputs; k++) last[root_of(p, g->outputs[k])] = p->n_steps;
    plan_in_place(p, first, last);
    if ((st = assign_offsets(p, first, last))) goto fail;
    if ((st = check_plan_bytes(p, held))) goto fail;
    if (p->arena_bytes && !(p->arena = aligned_alloc_bytes(p->arena_bytes))) {
        st = ox_err(OX_E_NOMEM, "out of memory for an arena of %zu bytes", p->arena_bytes);
        goto fail;
    }
    if (p->scratch_bytes && !(p->scratch = aligned_alloc_bytes(p->scratch_bytes))) {
        st = ox_err(OX_E_NOMEM, "out of memory for %zu bytes of scratch", p->scratch_bytes);
        goto fail;
    }
    for (int v = 0; v < g->n_values; v++)
        if (p->slot[v] == OX_SLOT_ARENA) p->vals[v].data = (char *)p->arena + p->offset[v];
    bind_views(p);
    p->first_step = first;
    p->last_step = last;
    *out = p;
    return OX_OK;
fail:
    free(first);
    free(last);
    ox_plan_free(p);
    return st;
}

static void free_dynamic(struct ox_plan *p) {
    for (int v = 0; v < p->graph->n_values; v++) {
        if (p->slot[v] != OX_SLOT_DYNAMIC) continue;
        ox_tensor *t = &p->vals[v];
        struct ox_dyn_buf *d = p->dyn ? &p->dyn[v] : NULL;
        if (d && d->cur_bytes && t->data && t->kind == OX_IO_TENSOR) { /* kept for reuse */
            free(d->keep);
            d->keep = t->data;
            d->keep_bytes = d->cur_bytes;
            t->data = NULL;
        }
        if (d) d->cur_bytes = 0;
        free_value(t);
    }
}

/* Bind a caller's value (a tensor's data, or a sequence's or optional's items) to a slot. */
static void bind_value(ox_tensor *slot, const ox_tensor *t) {
    slot->data = t->data;
    slot->kind = t->kind;
    slot->n_items = t->n_items;
    slot->items = t->items;
}

ox_status ox_plan_run(struct ox_plan *p, const ox_tensor *const *inputs) {
    return ox_plan_run_scoped(p, inputs, NULL);
}

ox_status ox_plan_bind(struct ox_plan *p, const ox_tensor *const *inputs,
                       const struct ox_scope *scope) {
    const struct ox_graph *g = p->graph;
    if (p->has_dynamic) free_dynamic(p);
    for (int i = 0; i < g->n_inputs; i++)
        if (inputs[i]) bind_value(&p->vals[g->inputs[i]], inputs[i]);
    for (int i = 0; i < p->n_outer; i++) {
        int v = p->outer[i];
        bool is_const;
        const ox_tensor *t = ox_scope_find(scope, g->values[v].name, &is_const);
        if (!t) return ox_err(OX_E_INTERNAL, "outer value '%s' vanished", g->values[v].name);
        if (p->slot[v] == OX_SLOT_OUTER) bind_value(&p->vals[v], t);
    }
    if (p->n_views) bind_views(p);
    if (p->step_seconds) p->profiled_runs++;
    return OX_OK;
}

ox_status ox_plan_run_step(struct ox_plan *p, int s, const struct ox_scope *scope) {
    const struct ox_graph *g = p->graph;
    struct ox_step *st = &p->steps[s];
    const struct ox_node *n = &g->nodes[st->node];
    struct ox_kernel_ctx kc = {.scratch = p->scratch,
                               .scratch_bytes = p->scratch_bytes,
                               .pool = p->pool,
                               .strings = &p->strings,
                               .plan = p,
                               .scope = scope,
                               .prepared = st->prepared,
                               .precise = p->precise};
    ox_status rc;
    if (st->is_skipped) return OX_OK;
    double t0 = p->step_seconds ? ox_seconds() : 0;
    if (st->is_dynamic) {
        /* the same constant inputs as at plan time: weights packed once into prepared memory
         * that the plan keeps (ox_kernel_prepared), not in scratch at every run */
        struct ox_infer_ctx ic = {.graph = g,
                                  .n_threads = ox_pool_size(p->pool),
                                  .precise = p->precise,
                                  .const_inputs = const_inputs(p, n)};
        bool seq_in = false;
        for (int k = 0; k < n->n_inputs; k++)
            if (st->in[k] && st->in[k]->kind != OX_IO_TENSOR) seq_in = true;
        if (seq_in && !(n->op->flags & (OX_OP_ALLOCATES | OX_OP_VALUE_INPUTS))) {
            /* Identity passes any value through; other ops take tensors only */
            if (strcmp(n->op_type, "Identity") != 0 || !st->out[0])
                return ox_node_err(n, OX_E_UNSUPPORTED,
                                   "a sequence or optional input, "
                                   "but %s takes tensors",
                                   n->op_type);
            return ox_kernel_copy(&kc, st->out[0], st->in[0]);
        }
        if (!(n->op->flags & OX_OP_ALLOCATES)) {
            rc = n->op->infer(&ic, n, st->in, st->out);
            if (rc == OX_NEED_DATA)
                rc = ox_node_err(n, OX_E_INTERNAL, "shape still unknown with all inputs present");
            if (rc) return rc;
        }
        rc = run_owned(p, n, st->in, st->out, ic.scratch_bytes, ic.prepared_bytes, p->pool, scope,
                       true);
    } else if (st->fuse_next) { /* this node and the next as one kernel */
        const struct ox_step *nx = &p->steps[s + 1];
        rc = ox_nn_cpu_pw_dw(&kc, n, st->in, st->out[0], &g->nodes[nx->node], nx->in, nx->out);
    } else {
        rc = n->op->cpu(&kc, n, st->in, st->out);
    }
    if (rc) return rc;
    if (p->step_seconds) p->step_seconds[s] += ox_seconds() - t0;
    return OX_OK;
}

ox_status ox_plan_run_scoped(struct ox_plan *p, const ox_tensor *const *inputs,
                             const struct ox_scope *scope) {
    ox_status rc = ox_plan_bind(p, inputs, scope);
    for (int s = 0; !rc && s < p->n_steps; s++) rc = ox_plan_run_step(p, s, scope);
    return rc;
}
