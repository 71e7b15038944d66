/* The public model and session API (include/onnxexec.h) over the importer and plans. */
#include "executor/session.h"
#include "executor/device.h"
#include "exporter/onnx.h"
#include "graph/opset.h"
#include "graph/autograd.h"
#include "graph/nchwc.h"
#include "graph/batch.h"
#include "graph/optimize.h"
#include "importer/onnx.h"
#include "importer/torchscript/torchscript.h"

#include <cblas.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Split runs: the most bytes of one-row products' weights (a classifier's head, read again for
 * every item) under which a batch is split by default, and the most inputs a split model has. */
#define SPLIT_MAX_ROW_WEIGHTS        ((int64_t)16 << 20)
#define OX_SPLIT_MAX_INPUTS          64
#define SPLIT_WEIGHTS_PER_ACTIVATION 3.0

struct ox_model {
    struct ox_graph *graph;
    bool optimized;   /* the graph optimizations ran (ox_model_gradient refuses it then) */
    bool for_gpu;     /* ox_model_options.device named a GPU: optimized for one */
    ox_limits limits; /* as loaded (filled): sessions plan within limits.plan_bytes */
};

/* What one thread that runs a session owns: its plans (each with its arena, scratch and
 * outputs) and its bound inputs. Threads never share one, so that a session may be run
 * from many threads at once; the model's graph and weights are only read. */
struct ox_run_ctx {
    struct ox_run_ctx *next;
    pthread_t thread;
    struct ox_plan *plans; /* cache, most recently used first */
    const ox_tensor **bound;
    ox_node_time *times; /* ox_session_profile's answer */
    /* A batch run one item at a time (split_run): one plan per lane (thread), for one item,
     * lane 0's prepared memory shared by the others; the batch's outputs gathered here. */
    struct ox_plan **lanes; /* n_threads, built as needed */
    int n_lanes;            /* lanes of the last split run */
    ox_tensor *outs;        /* per graph output (data owned) */
    bool split_last;        /* the last run was split: memory and profile come from the lanes */
    int64_t split_runs;
};

struct ox_session {
    ox_model *model;
    int n_threads;
    struct ox_pool *pool; /* shared: a job that finds it busy runs on its caller's thread */
    bool profile;
    uint64_t plan_bytes; /* the most one plan may take (ox_limits.plan_bytes) */
    int batch_split;     /* OX_BATCH_SPLIT_* */
    double weight_bytes; /* of the graph's initializers */
    struct ox_batch_info batch;
    struct ox_device *device;    /* NULL: the CPU */
    struct ox_devconsts *consts; /* the weights on the device, shared by the plans */
    pthread_mutex_t mu;          /* guards ctxs */
    struct ox_run_ctx *ctxs;     /* one per thread that has run the session */
};

/* The calling thread's context; a new one when it has none and create is set. */
static ox_status run_ctx(ox_session *s, bool create, struct ox_run_ctx **out) {
    pthread_t self = pthread_self();
    pthread_mutex_lock(&s->mu);
    struct ox_run_ctx *c = s->ctxs;
    while (c && !pthread_equal(c->thread, self)) c = c->next;
    if (!c && create) {
        int n_in = s->model->graph->n_inputs;
        c = calloc(1, sizeof *c);
        if (c && !(c->bound = calloc((size_t)(n_in ? n_in : 1), sizeof *c->bound))) {
            free(c);
            c = NULL;
        }
        if (c) {
            c->thread = self;
            c->next = s->ctxs;
            s->ctxs = c;
        }
        pthread_mutex_unlock(&s->mu);
        if (!c) return ox_err(OX_E_NOMEM, "out of memory");
    } else {
        pthread_mutex_unlock(&s->mu);
        if (!c) return ox_err(OX_E_INVALID, "the session has not run yet on this thread");
    }
    *out = c;
    return OX_OK;
}

static unsigned optimize_flags(const ox_model *m, bool standard_ops_only) {
    return (standard_ops_only ? OX_OPT_STANDARD_ONLY : 0) | (m->for_gpu ? OX_OPT_GPU : 0);
}

/* The model's limits and target device from its options (NULL: the defaults). */
static ox_status model_start(ox_model *m, const ox_model_options *opt) {
    ox_status st = ox_limits_fill(opt ? &opt->limits : NULL, &m->limits);
    int index = -1;
    if (!st) st = ox_device_parse(opt ? opt->device : NULL, &index);
    m->for_gpu = index >= 0;
    return st;
}

static ox_status model_finish(ox_model *m, const ox_model_options *opt, ox_model **out) {
    /* ONNX Runtime's channel-blocked nodes become default-domain ones (graph/nchwc.c), and
     * Gradient nodes (ai.onnx.preview.training) the nodes that compute them */
    ox_status st = ox_graph_lower_nchwc(m->graph);
    if (!st) st = ox_autograd_expand_gradient_ops(m->graph);
    if (!st && (!opt || !opt->no_optimize)) {
        st = ox_graph_optimize(m->graph, optimize_flags(m, opt && opt->standard_ops_only), NULL);
        m->optimized = true;
    }
    if (st) {
        ox_model_free(m);
        return st;
    }
    *out = m;
    return OX_OK;
}

ox_status ox_model_load(const char *path, ox_model **out) {
    return ox_model_load_with(path, NULL, out);
}

/* A TorchScript archive (a zip) rather than an ONNX protobuf. */
static bool is_archive(const char *path) {
    unsigned char head[4];
    FILE *f = fopen(path, "rb");
    bool zip = f && fread(head, 1, 4, f) == 4 && ox_ts_is_archive(head, 4);
    if (f) fclose(f);
    return zip;
}

ox_status ox_model_load_with(const char *path, const ox_model_options *opt, ox_model **out) {
    *out = NULL;
    ox_model *m = calloc(1, sizeof *m);
    if (!m) return ox_err(OX_E_NOMEM, "out of memory");
    ox_status st = model_start(m, opt);
    if (st) {
        free(m);
        return ox_err_prefix(st, "%s: ", path);
    }
    if (is_archive(path)) {
        struct ox_ts_input in[64];
        int n = opt && opt->n_input_shapes > 0 ? opt->n_input_shapes : 0;
        if (n > 64) n = 64;
        for (int i = 0; i < n; i++) {
            const ox_tensor *t = &opt->input_shapes[i];
            in[i] = (struct ox_ts_input){.name = t->name, .dtype = t->dtype, .rank = t->rank};
            memcpy(in[i].dims, t->dims, sizeof in[i].dims);
        }
        st = ox_ts_import_file_with(path, in, n, &m->limits, &m->graph);
    } else {
        st = ox_onnx_import_file_with(path, &m->limits, &m->graph);
    }
    if (st) {
        free(m);
        return st;
    }
    return model_finish(m, opt, out);
}

ox_status ox_model_load_buffer(const void *buf, size_t len, const char *dir, ox_model **out) {
    return ox_model_load_buffer_with(buf, len, dir, NULL, out);
}

ox_status ox_model_load_buffer_with(const void *buf, size_t len, const char *dir,
                                    const ox_model_options *opt, ox_model **out) {
    *out = NULL;
    ox_model *m = calloc(1, sizeof *m);
    if (!m) return ox_err(OX_E_NOMEM, "out of memory");
    ox_status st = model_start(m, opt);
    if (!st) st = ox_onnx_import_buffer_with(buf, len, dir, &m->limits, &m->graph);
    if (st) {
        free(m);
        return st;
    }
    return model_finish(m, opt, out);
}

void ox_model_free(ox_model *m) {
    if (!m) return;
    ox_graph_free(m->graph);
    free(m);
}

struct ox_graph *ox_model_graph(const ox_model *m) {
    return m->graph;
}

const ox_limits *ox_model_limits(const ox_model *m) {
    return &m->limits;
}

int ox_model_n_inputs(const ox_model *m) {
    return m->graph->n_inputs;
}

int ox_model_n_outputs(const ox_model *m) {
    return m->graph->n_outputs;
}

static void describe(const struct ox_value *v, ox_tensor *desc, const char **dim_names) {
    memset(desc, 0, sizeof *desc);
    desc->name = v->name;
    desc->dtype = v->dtype;
    desc->rank = v->rank < 0 ? -1 : v->rank;
    for (int d = 0; d < v->rank && d < OX_MAX_RANK; d++) {
        desc->dims[d] = v->dims[d].value;
        if (dim_names) dim_names[d] = v->dims[d].symbol;
    }
}

ox_status ox_model_input(const ox_model *m, int i, ox_tensor *desc, const char **dim_names) {
    if (i < 0 || i >= m->graph->n_inputs)
        return ox_err(OX_E_INVALID, "input index %d out of range (model has %d)", i,
                      m->graph->n_inputs);
    describe(&m->graph->values[m->graph->inputs[i]], desc, dim_names);
    return OX_OK;
}

ox_status ox_model_output(const ox_model *m, int i, ox_tensor *desc, const char **dim_names) {
    if (i < 0 || i >= m->graph->n_outputs)
        return ox_err(OX_E_INVALID, "output index %d out of range (model has %d)", i,
                      m->graph->n_outputs);
    describe(&m->graph->values[m->graph->outputs[i]], desc, dim_names);
    return OX_OK;
}

bool ox_model_input_has_default(const ox_model *m, int i) {
    return i >= 0 && i < m->graph->n_inputs && m->graph->values[m->graph->inputs[i]].init;
}

const char *ox_model_producer(const ox_model *m) {
    return m->graph->producer_name ? m->graph->producer_name : "";
}

const char *ox_model_producer_version(const ox_model *m) {
    return m->graph->producer_version ? m->graph->producer_version : "";
}

ox_status ox_model_save(const ox_model *m, const char *path, const ox_save_options *opt) {
    struct ox_export_options o = {0};
    if (opt) {
        o.external_data = opt->external_data;
        o.external_threshold = opt->external_threshold;
        o.external_name = opt->external_file;
    }
    return ox_onnx_export_file(m->graph, path, &o);
}

ox_status ox_model_optimize(ox_model *m, bool standard_ops_only) {
    m->optimized = true;
    return ox_graph_optimize(m->graph, optimize_flags(m, standard_ops_only), NULL);
}

/* Value ids of the names (each must exist), or of a default set. */
static ox_status grad_names(const struct ox_graph *g, const char *const *names, int n,
                            const char *what, int *ids) {
    for (int i = 0; i < n; i++) {
        ids[i] = names[i] ? ox_graph_find_value(g, names[i]) : -1;
        if (ids[i] < 0)
            return ox_err(OX_E_INVALID, "gradient: no value named '%s' (%s)",
                          names[i] ? names[i] : "(null)", what);
    }
    return OX_OK;
}

ox_status ox_model_gradient(ox_model *m, const ox_grad_options *opt) {
    struct ox_graph *g = m->graph;
    if (m->optimized)
        return ox_err(OX_E_INVALID, "gradient: the model was optimized when loaded (fused "
                                    "operators have no gradient rules): load it with "
                                    "no_optimize set");
    int n_of = opt && opt->n_of > 0 ? opt->n_of : 0, n_wrt = opt && opt->n_wrt > 0 ? opt->n_wrt : 0;
    int *of = calloc((size_t)(n_of ? n_of : g->n_outputs) + (size_t)n_wrt + 1, sizeof(int));
    if (!of) return ox_err(OX_E_NOMEM, "out of memory");
    int *wrt = of + (n_of ? n_of : g->n_outputs);
    ox_status st = OX_OK;
    if (n_of) {
        st = grad_names(g, opt->of, n_of, "to differentiate", of);
    } else {
        for (int i = 0; i < g->n_outputs; i++) {
            const struct ox_value *v = &g->values[g->outputs[i]];
            if (v->kind == OX_KIND_TENSOR && ox_dtype_is_float(v->dtype))
                of[n_of++] = g->outputs[i];
        }
        if (!n_of) st = ox_err(OX_E_INVALID, "gradient: the model has no float output");
    }
    if (!st && n_wrt) st = grad_names(g, opt->wrt, n_wrt, "to differentiate by", wrt);
    if (!st) {
        struct ox_ad_request r = {.n_of = n_of, .of = of, .n_wrt = n_wrt, .wrt = wrt};
        st = ox_autograd(g, &r);
    }
    free(of);
    return st;
}

ox_status ox_model_convert_opset(ox_model *m, int opset) {
    return ox_graph_convert_opset(m->graph, opset);
}

ox_status ox_model_save_buffer(const ox_model *m, void **buf, size_t *len) {
    return ox_onnx_export_buffer(m->graph, buf, len);
}

int64_t ox_model_ir_version(const ox_model *m) {
    return m->graph->ir_version;
}

int ox_model_n_opsets(const ox_model *m) {
    return m->graph->n_opsets;
}

ox_status ox_model_opset(const ox_model *m, int i, const char **domain, int64_t *version) {
    if (i < 0 || i >= m->graph->n_opsets) return ox_err(OX_E_INVALID, "opset index out of range");
    *domain = m->graph->opsets[i].domain;
    *version = m->graph->opsets[i].version;
    return OX_OK;
}

int ox_model_n_nodes(const ox_model *m) {
    return m->graph->n_nodes;
}

ox_status ox_model_node(const ox_model *m, int i, const char **name, const char **op_type,
                        const char **domain) {
    if (i < 0 || i >= m->graph->n_nodes) return ox_err(OX_E_INVALID, "node index out of range");
    const struct ox_node *n = &m->graph->nodes[i];
    if (name) *name = n->name;
    if (op_type) *op_type = n->op_type;
    if (domain) *domain = n->domain;
    return OX_OK;
}

ox_status ox_session_create(ox_model *m, const ox_session_options *opt, ox_session **out) {
    *out = NULL;
    if (!m) return ox_err(OX_E_INVALID, "ox_session_create: model is NULL");
    ox_session *s = calloc(1, sizeof *s);
    if (!s) return ox_err(OX_E_NOMEM, "out of memory");
    s->model = m;
    s->n_threads = opt && opt->n_threads > 0 ? opt->n_threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (s->n_threads < 1) s->n_threads = 1;
    s->profile = opt && opt->profile;
    s->plan_bytes = opt && opt->plan_bytes ? opt->plan_bytes : m->limits.plan_bytes;
    s->batch_split = opt ? opt->batch_split : OX_BATCH_SPLIT_AUTO;
    for (int v = 0; v < m->graph->n_values; v++) {
        const ox_tensor *t = m->graph->values[v].init;
        if (t && t->kind == OX_IO_TENSOR)
            s->weight_bytes += (double)ox_tensor_numel(t) * (double)ox_dtype_size(t->dtype);
    }
    if (pthread_mutex_init(&s->mu, NULL)) {
        free(s);
        return ox_err(OX_E_NOMEM, "out of memory (a mutex)");
    }
    /* our pool splits the work; OpenBLAS runs one thread inside each piece */
    openblas_set_num_threads(1);
    ox_status st = ox_device_open(opt ? opt->device : NULL, opt ? opt->precision : 0, &s->device);
    if (!st && s->device) st = ox_devconsts_create(s->device, &s->consts);
    if (!st) st = ox_pool_create(s->n_threads, &s->pool);
    if (st) {
        ox_devconsts_free(s->consts);
        ox_device_close(s->device);
        pthread_mutex_destroy(&s->mu);
        free(s);
        return st;
    }
    if (s->device) s->batch_split = OX_BATCH_SPLIT_OFF; /* a GPU takes the batch whole */
    if (s->batch_split != OX_BATCH_SPLIT_OFF) ox_graph_batch_info(m->graph, &s->batch);
    *out = s;
    return OX_OK;
}

/* ---- a batch run one item at a time (ox_session_options.batch_split) ---------------------- */

static void free_split(ox_session *s, struct ox_run_ctx *c) {
    if (c->lanes) { /* the borrowers first: lane 0 owns the prepared memory */
        for (int i = s->n_threads - 1; i >= 0; i--) ox_plan_free(c->lanes[i]);
        free(c->lanes);
        c->lanes = NULL;
    }
    if (c->outs) {
        for (int k = 0; k < s->model->graph->n_outputs; k++) free(c->outs[k].data);
        free(c->outs);
        c->outs = NULL;
    }
    c->split_last = false;
}

/* The batch size to split, or 0 to run the batch whole. */
static int64_t split_batch(const ox_session *s, const ox_tensor *const *bound) {
    const struct ox_graph *g = s->model->graph;
    if (s->batch_split == OX_BATCH_SPLIT_OFF || !s->batch.is_separable ||
        g->n_inputs > OX_SPLIT_MAX_INPUTS)
        return 0;
    int64_t B = -1;
    for (int i = 0; i < g->n_inputs; i++) {
        const ox_tensor *t = bound[i];
        if (!t || t->kind != OX_IO_TENSOR || t->rank != g->values[g->inputs[i]].rank ||
            t->dtype == OX_STRING || t->dims[0] < 2 || (B >= 0 && t->dims[0] != B))
            return 0;
        B = t->dims[0];
    }
    for (int k = 0; k < g->n_outputs; k++)
        if (g->values[g->outputs[k]].dtype == OX_STRING) return 0;
    if (s->batch_split == OX_BATCH_SPLIT_ON) return B;
    /* auto: where the items' activations are what moves through memory (convolutions), and
     * running items apart does not turn wide products into many reads of big weights */
    if (s->batch.n_convs == 0 || B < s->n_threads) return 0;
    if (s->batch.row_product_weight_bytes > SPLIT_MAX_ROW_WEIGHTS) return 0;
    return B; /* and split_run weighs the weights against an item's activations */
}

struct split_job {
    ox_session *s;
    struct ox_run_ctx *c;
    const ox_tensor *const *bound;
    atomic_int failed; /* the first failure's status (0: none) */
    char msg[512];     /* and its message */
    pthread_mutex_t mu;
};

static size_t item_bytes(const ox_tensor *t) {
    int64_t n = 1;
    for (int d = 1; d < t->rank; d++) n *= t->dims[d];
    return (size_t)n * ox_dtype_size(t->dtype);
}

/* Items [b, e) on lane `tid`: each item's inputs are views of the batch's, its outputs are
 * copied into the batch's outputs. */
static void split_items(void *arg, int64_t b, int64_t e, int tid) {
    struct split_job *j = arg;
    const struct ox_graph *g = j->s->model->graph;
    struct ox_plan *p = j->c->lanes[tid];
    ox_tensor in[OX_SPLIT_MAX_INPUTS];
    const ox_tensor *inp[OX_SPLIT_MAX_INPUTS];
    for (int64_t item = b; item < e && !atomic_load(&j->failed); item++) {
        for (int i = 0; i < g->n_inputs; i++) {
            in[i] = *j->bound[i];
            in[i].dims[0] = 1;
            in[i].data = (char *)j->bound[i]->data + (size_t)item * item_bytes(j->bound[i]);
            inp[i] = &in[i];
        }
        ox_status st = ox_plan_run(p, inp);
        for (int k = 0; !st && k < g->n_outputs; k++) {
            const ox_tensor *y = &p->vals[g->outputs[k]];
            ox_tensor *o = &j->c->outs[k];
            size_t n = item_bytes(o);
            if (y->kind != OX_IO_TENSOR || y->rank != o->rank || y->dims[0] != 1 ||
                item_bytes(y) != n)
                st = ox_err(OX_E_INTERNAL, "output '%s' of one item is not an item of the batch's",
                            g->values[g->outputs[k]].name);
            else if (n)
                memcpy((char *)o->data + (size_t)item * n, y->data, n);
        }
        if (st) {
            pthread_mutex_lock(&j->mu);
            if (!atomic_load(&j->failed)) {
                snprintf(j->msg, sizeof j->msg, "%s", ox_errmsg());
                atomic_store(&j->failed, st);
            }
            pthread_mutex_unlock(&j->mu);
        }
    }
}

/* Lane plans [0, n_lanes) for one item (kept while the item's shapes stay the same). */
static ox_status split_lanes(ox_session *s, struct ox_run_ctx *c, int n_lanes,
                             const ox_tensor *const *item_inputs) {
    const struct ox_graph *g = s->model->graph;
    ox_status st;
    if (!c->lanes && !(c->lanes = calloc((size_t)s->n_threads, sizeof *c->lanes)))
        return ox_err(OX_E_NOMEM, "out of memory");
    for (int l = 0; l < n_lanes; l++) {
        struct ox_plan *p = c->lanes[l];
        if (p && ox_plan_matches(p, item_inputs)) continue;
        if (l == 0 && p) { /* other shapes: every lane borrows from lane 0, so all go */
            for (int k = s->n_threads - 1; k >= 0; k--) {
                ox_plan_free(c->lanes[k]);
                c->lanes[k] = NULL;
            }
        } else if (p) {
            ox_plan_free(p);
            c->lanes[l] = NULL;
        }
        /* a lane runs its kernels serially: the threads take items, not pieces of nodes */
        if ((st = ox_plan_build_limited(g, item_inputs, NULL, s->plan_bytes, !s->device, &p)))
            return st;
        if (s->profile && p->n_steps > 0 &&
            !(p->step_seconds = calloc((size_t)p->n_steps, sizeof *p->step_seconds))) {
            ox_plan_free(p);
            return ox_err(OX_E_NOMEM, "out of memory");
        }
        if (l > 0) { /* the same graph and shapes: the same steps, the same packed weights */
            struct ox_plan *p0 = c->lanes[0];
            if (p->n_steps != p0->n_steps) {
                ox_plan_free(p);
                return ox_err(OX_E_INTERNAL, "batch lanes planned differently");
            }
            for (int i = 0; i < p->n_steps; i++) {
                ox_prepared_free(p->steps[i].prepared);
                p->steps[i].prepared = p0->steps[i].prepared;
            }
            p->prepared_borrowed = true;
        }
        c->lanes[l] = p;
    }
    return OX_OK;
}

/* The batch's output tensors: an item's shape (from lane 0's plan) with B items. */
static ox_status split_outputs(ox_session *s, struct ox_run_ctx *c, int64_t B) {
    const struct ox_graph *g = s->model->graph;
    if (!c->outs && !(c->outs = calloc((size_t)(g->n_outputs ? g->n_outputs : 1), sizeof *c->outs)))
        return ox_err(OX_E_NOMEM, "out of memory");
    for (int k = 0; k < g->n_outputs; k++) {
        const ox_tensor *y = &c->lanes[0]->vals[g->outputs[k]];
        ox_tensor *o = &c->outs[k];
        if (y->kind != OX_IO_TENSOR || y->rank < 1 || y->dims[0] != 1)
            return ox_err(OX_E_INTERNAL, "output '%s' has no batch axis",
                          g->values[g->outputs[k]].name);
        bool same = o->data && o->dtype == y->dtype && o->rank == y->rank && o->dims[0] == B;
        for (int d = 1; same && d < y->rank; d++) same = o->dims[d] == y->dims[d];
        if (same) continue;
        free(o->data);
        *o = *y;
        o->dims[0] = B;
        o->name = g->values[g->outputs[k]].name;
        size_t n = item_bytes(o) * (size_t)B;
        o->data = malloc(n ? n : 1);
        if (!o->data) return ox_err(OX_E_NOMEM, "out of memory for %zu bytes of outputs", n);
    }
    return OX_OK;
}

/* *done: the batch ran split (else it is to be run whole). */
static ox_status split_run(ox_session *s, struct ox_run_ctx *c, int64_t B, bool *done) {
    const struct ox_graph *g = s->model->graph;
    ox_tensor item[OX_SPLIT_MAX_INPUTS];
    const ox_tensor *item_in[OX_SPLIT_MAX_INPUTS];
    for (int i = 0; i < g->n_inputs; i++) {
        item[i] = *c->bound[i];
        item[i].dims[0] = 1;
        item_in[i] = &item[i];
    }
    /* a lane per thread of the pool, even for fewer items: any thread may take an item */
    int n_lanes = s->n_threads;
    ox_status st = split_lanes(s, c, 1, item_in);
    if (st) return st;
    /* auto: each item reads all the weights again, from memory once they pass the caches;
     * that pays where an item's activations (what a whole batch would move through memory)
     * are not much smaller than the weights (docs/PERFORMANCE.md, "Batches one item at a time") */
    if (s->batch_split == OX_BATCH_SPLIT_AUTO &&
        (double)s->weight_bytes > SPLIT_WEIGHTS_PER_ACTIVATION * (double)c->lanes[0]->sum_bytes) {
        *done = false;
        return OX_OK;
    }
    if ((n_lanes > 1 && (st = split_lanes(s, c, n_lanes, item_in))) ||
        (st = split_outputs(s, c, B)))
        return st;
    *done = true;
    struct split_job j = {.s = s, .c = c, .bound = c->bound};
    atomic_init(&j.failed, 0);
    pthread_mutex_init(&j.mu, NULL);
    /* one item per piece: a lane on a slower core takes fewer */
    if (n_lanes > 1)
        ox_parallel_for_pieces(s->pool, B, (int)B, split_items, &j);
    else
        split_items(&j, 0, B, 0);
    pthread_mutex_destroy(&j.mu);
    c->n_lanes = n_lanes;
    c->split_last = true;
    c->split_runs++;
    if (atomic_load(&j.failed)) return ox_err(atomic_load(&j.failed), "%s", j.msg);
    return OX_OK;
}

void ox_session_free(ox_session *s) {
    if (!s) return;
    while (s->ctxs) {
        struct ox_run_ctx *c = s->ctxs;
        s->ctxs = c->next;
        while (c->plans) {
            struct ox_plan *p = c->plans;
            c->plans = p->next;
            ox_plan_free(p);
        }
        free_split(s, c);
        free(c->bound);
        free(c->times);
        free(c);
    }
    ox_pool_free(s->pool);
    ox_devconsts_free(s->consts); /* after the plans, which borrow them */
    ox_device_close(s->device);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

/* Inputs by name when named, else by position. */
static ox_status bind_inputs(ox_session *s, struct ox_run_ctx *c, const ox_tensor *inputs,
                             int n_inputs) {
    const struct ox_graph *g = s->model->graph;
    const ox_tensor **bound = c->bound;
    for (int i = 0; i < g->n_inputs; i++) bound[i] = NULL;
    int pos = 0;
    for (int k = 0; k < n_inputs; k++) {
        const ox_tensor *t = &inputs[k];
        int slot = -1;
        if (t->name && *t->name) {
            for (int i = 0; i < g->n_inputs; i++)
                if (strcmp(g->values[g->inputs[i]].name, t->name) == 0) slot = i;
            if (slot < 0) {
                char names[512];
                size_t k = 0;
                names[0] = 0;
                for (int i = 0; i < g->n_inputs && k < sizeof names; i++)
                    k += (size_t)snprintf(names + k, sizeof names - k, "%s'%s'", i ? ", " : "",
                                          g->values[g->inputs[i]].name);
                return ox_err(OX_E_INVALID, "no input named '%s'; the model's inputs are %s",
                              t->name, names);
            }
        } else {
            slot = pos;
        }
        if (slot >= g->n_inputs)
            return ox_err(OX_E_INVALID, "%d inputs given, the model takes %d", n_inputs,
                          g->n_inputs);
        if (bound[slot])
            return ox_err(OX_E_INVALID, "input '%s' given twice", g->values[g->inputs[slot]].name);
        if (t->kind == OX_IO_TENSOR && !t->data && ox_tensor_numel(t) > 0)
            return ox_err(OX_E_INVALID, "input '%s' has no data", g->values[g->inputs[slot]].name);
        bound[slot] = t;
        pos = slot + 1;
    }
    for (int i = 0; i < g->n_inputs; i++)
        if (!bound[i] && !g->values[g->inputs[i]].init)
            return ox_err(OX_E_INVALID, "input '%s' is missing", g->values[g->inputs[i]].name);
    return OX_OK;
}

/* The calling thread's plan for the inputs bound in c: cached, else built. */
static ox_status ctx_plan(ox_session *s, struct ox_run_ctx *c, struct ox_plan **out) {
    struct ox_plan *p = c->plans, *prev = NULL;
    while (p && !ox_plan_matches(p, c->bound)) prev = p, p = p->next;
    if (!p) {
        ox_status st = ox_plan_build_limited(s->model->graph, c->bound, s->pool, s->plan_bytes,
                                             !s->device, &p);
        if (st) return st;
        if (s->profile && p->n_steps > 0 &&
            !(p->step_seconds = calloc((size_t)p->n_steps, sizeof *p->step_seconds))) {
            ox_plan_free(p);
            return ox_err(OX_E_NOMEM, "out of memory");
        }
        if (s->device && (st = ox_devplan_build(s->device, s->consts, p, &p->devplan))) {
            ox_plan_free(p);
            return st;
        }
    } else if (prev) {
        prev->next = p->next;
    }
    if (p != c->plans) {
        p->next = c->plans;
        c->plans = p;
    }
    *out = p;
    return OX_OK;
}

ox_status ox_session_plan(ox_session *s, struct ox_plan **out) {
    struct ox_run_ctx *c;
    ox_status st = run_ctx(s, true, &c);
    if (!st) st = ctx_plan(s, c, out);
    ox_pool_release_caller(s->pool);
    return st;
}

static ox_status session_run(ox_session *s, const ox_tensor *inputs, int n_inputs,
                             const ox_tensor **outputs) {
    struct ox_run_ctx *c;
    ox_status st = run_ctx(s, true, &c);
    if (st || (st = bind_inputs(s, c, inputs, n_inputs))) return st;
    const struct ox_graph *g = s->model->graph;
    int64_t B = split_batch(s, c->bound);
    bool split = false;
    if (B > 0 && (st = split_run(s, c, B, &split))) return st;
    if (split) {
        for (int k = 0; k < g->n_outputs; k++) outputs[k] = &c->outs[k];
        return OX_OK;
    }
    c->split_last = false;
    struct ox_plan *p;
    if ((st = ctx_plan(s, c, &p))) return st;
    if ((st = p->devplan ? ox_devplan_run(p->devplan, c->bound) : ox_plan_run(p, c->bound)))
        return st;
    for (int k = 0; k < g->n_outputs; k++) outputs[k] = &p->vals[g->outputs[k]];
    return OX_OK;
}

ox_status ox_session_run(ox_session *s, const ox_tensor *inputs, int n_inputs,
                         const ox_tensor **outputs) {
    if (!s) return ox_err(OX_E_INVALID, "ox_session_run: session is NULL");
    ox_status st = session_run(s, inputs, n_inputs, outputs);
    ox_pool_release_caller(s->pool); /* the caller's own CPUs back (executor/pool.c) */
    return st;
}

ox_status ox_session_memory(ox_session *s, size_t *arena, size_t *no_reuse, size_t *peak) {
    struct ox_run_ctx *c;
    if (run_ctx(s, false, &c) || (!c->plans && !c->split_last))
        return ox_err(OX_E_INVALID, "the session has not run yet (on this thread)");
    if (c->split_last) { /* the lanes side by side, and the batch's outputs */
        size_t outs = 0;
        for (int k = 0; k < s->model->graph->n_outputs; k++)
            outs += item_bytes(&c->outs[k]) * (size_t)c->outs[k].dims[0];
        *arena = *no_reuse = *peak = outs;
        for (int l = 0; l < c->n_lanes; l++) {
            *arena += c->lanes[l]->arena_bytes;
            *no_reuse += c->lanes[l]->sum_bytes;
            *peak += c->lanes[l]->peak_bytes;
        }
        return OX_OK;
    }
    *arena = c->plans->arena_bytes;
    *no_reuse = c->plans->sum_bytes;
    *peak = c->plans->peak_bytes;
    return OX_OK;
}

ox_status ox_session_device(ox_session *s, const char **name, int *n_device_steps, int *n_cpu_steps,
                            const int **cpu_nodes, bool *is_captured) {
    struct ox_run_ctx *c = NULL;
    if (name) *name = s && s->device ? s->device->name : "cpu";
    int nd = 0, nc = 0, nn = 0;
    const int *nodes = NULL;
    bool cap = false;
    if (s && !run_ctx(s, false, &c) && c->plans && c->plans->devplan) {
        ox_devplan_stats(c->plans->devplan, &nd, &nc, &cap);
        nodes = ox_devplan_cpu_nodes(c->plans->devplan, &nn);
    } else if (s && c && c->plans) {
        nc = c->plans->n_steps;
    }
    if (n_device_steps) *n_device_steps = nd;
    if (n_cpu_steps) *n_cpu_steps = nc;
    if (cpu_nodes) *cpu_nodes = nodes;
    if (is_captured) *is_captured = cap;
    return OX_OK;
}

ox_status ox_session_split(ox_session *s, int64_t *items, int *lanes) {
    struct ox_run_ctx *c;
    *items = 0;
    *lanes = 0;
    if (!s || run_ctx(s, false, &c) || (!c->plans && !c->split_last))
        return ox_err(OX_E_INVALID, "the session has not run yet (on this thread)");
    if (c->split_last) {
        *items = c->outs[0].dims[0];
        *lanes = c->n_lanes;
    }
    return OX_OK;
}

ox_status ox_session_profile(ox_session *s, bool reset, const ox_node_time **times, int *n) {
    *times = NULL;
    *n = 0;
    if (!s->profile) return ox_err(OX_E_INVALID, "the session was not created with profile");
    struct ox_run_ctx *c;
    if (run_ctx(s, false, &c) || (!c->plans && !c->split_last))
        return ox_err(OX_E_INVALID, "the session has not run yet (on this thread)");
    struct ox_plan *p = c->split_last ? c->lanes[0] : c->plans;
    free(c->times);
    c->times = malloc(sizeof *c->times * (size_t)(p->n_steps ? p->n_steps : 1));
    if (!c->times) return ox_err(OX_E_NOMEM, "out of memory");
    int k = 0;
    for (int i = 0; i < p->n_steps; i++) {
        if (p->steps[i].is_skipped) continue;
        const struct ox_node *nd = &p->graph->nodes[p->steps[i].node];
        double sec = p->step_seconds ? p->step_seconds[i] : 0;
        int64_t runs = p->profiled_runs;
        if (c->split_last) { /* every lane's time, over the batch runs times the lanes */
            sec = 0;
            for (int l = 0; l < c->n_lanes; l++)
                sec += c->lanes[l]->step_seconds ? c->lanes[l]->step_seconds[i] : 0;
            runs = c->split_runs * c->n_lanes;
        }
        c->times[k++] = (ox_node_time){nd->name ? nd->name : "", nd->op_type, sec, runs};
    }
    for (int l = 0; reset && l < (c->split_last ? c->n_lanes : 1); l++) {
        struct ox_plan *q = c->split_last ? c->lanes[l] : p;
        if (q->step_seconds)
            memset(q->step_seconds, 0, sizeof *q->step_seconds * (size_t)q->n_steps);
        q->profiled_runs = 0;
    }
    if (reset) c->split_runs = 0;
    *times = c->times;
    *n = k;
    return OX_OK;
}

ox_io_kind ox_model_input_kind(const ox_model *m, int i) {
    if (i < 0 || i >= m->graph->n_inputs) return OX_IO_UNKNOWN;
    return (ox_io_kind)m->graph->values[m->graph->inputs[i]].kind;
}

ox_io_kind ox_model_output_kind(const ox_model *m, int i) {
    if (i < 0 || i >= m->graph->n_outputs) return OX_IO_UNKNOWN;
    return (ox_io_kind)m->graph->values[m->graph->outputs[i]].kind;
}
