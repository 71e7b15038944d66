/* A plan on a device (executor/device.h): the CPU plan's schedule and arena offsets, in
 * device memory.
 *
 * Each value has a device address: arena values at their planned offset in one device arena
 * of the plan's size, views at their offset in what they show, constants (initializers and
 * folded values) uploaded once per plan, graph inputs in a device buffer each, filled through
 * page-locked memory at every run in chunks (the host stages the next chunk while the
 * device copies this one; outputs come back the same way). A step whose node the device takes runs
 * there; any other (no kernel, a dynamic shape, sequences, strings, subgraphs) runs on the CPU on
 * the plan's host memory: the device memory is where every value's current bytes live, so before a
 * CPU step its inputs are copied out (unless the host copy is known current: constants, inputs,
 * values a CPU step made) and after it its outputs are copied back. A node with subgraphs
 * may read any value by name, so the whole arena comes to the host before it. At the end the
 * graph outputs come back to the plan's host memory, where the session returns them.
 *
 * With precision fp16 (bf16) every float32 value is float16 (bfloat16) on the device (the
 * arena keeps the float32 offsets, half of each slot used): constants are converted once when
 * uploaded, graph inputs and outputs and the values a CPU step reads or writes on the device,
 * through a float32 staging buffer there.
 *
 * When every step runs on the device and every shape is static, the second run's steps are
 * captured (kernels and copies between them) and later runs replay them: one launch. A
 * profiled plan is not captured: each device step is queued between two of the device's
 * marks, whose interval is its time on the device (read after the run; a device without
 * marks has each step waited for and timed on the host).
 */
#include "executor/device.h"

#include <stdlib.h>
#include <string.h>

struct dstep {
    bool on_device;
    void *kernel; /* the device's handle for the step */
    const ox_tensor **in;
    ox_tensor **out;
    int n_pull, *pull; /* before a CPU step: values copied to the host */
    int n_push, *push; /* after it: values copied to the device */
    bool pull_all;     /* before it: the whole arena to the host (subgraphs read by name) */
};

struct dbuf { /* an input or output staged through page-locked memory */
    int v;
    void *pinned;
    size_t bytes; /* the value's bytes on the host */
    bool half;    /* float32 on the host, dp->low on the device: crosses as float32 through
                     dp->temp, converted there (on the host, the conversion cost more than the
                     bytes it saved on the bus) */
};

/* Uploaded buffers: a plan's own (folded values, inputs) or a session's shared weights. */
struct buf {
    void *dev;        /* device memory owned */
    const void *host; /* the host data it copies (constants), or NULL */
    size_t bytes;     /* host bytes */
    bool half;        /* converted to the plan's 16-bit type */
};

struct bufs {
    int n;
    struct buf *b;
};

struct ox_devconsts {
    struct ox_device *dev; /* borrowed */
    struct bufs b;
};

struct ox_devplan {
    struct ox_device *dev;       /* borrowed */
    struct ox_devconsts *shared; /* borrowed: where initializers go, or NULL */
    struct ox_plan *p;           /* borrowed */
    void *arena;
    void *scratch;
    size_t scratch_bytes;
    struct bufs own;  /* device memory owned: folded values, inputs, and initializers when
                         there is no shared set */
    ox_tensor *dvals; /* per value: its descriptor with the device address (NULL: none) and
                         the device's element type */
    ox_dtype low;     /* float32 values are OX_FLOAT16 or OX_BFLOAT16 on the device (precision
                         fp16, bf16), or OX_UNDEFINED: float32 */
    void *temp;       /* float32 staging for conversions (temp_bytes) */
    size_t temp_bytes;
    bool *host_ok; /* per value: its host copy is current whenever it is alive */
    struct dstep *steps;
    int n_ins, n_outs;
    struct dbuf *ins, *outs;
    size_t stage_step; /* host bytes per staged chunk (ox_devplan_set_stage_step) */
    void *graph;       /* the captured run: the steps, without the inputs' and outputs' copies */
    bool capturable;
    int64_t runs;
    int n_device, n_cpu;
    int *cpu_nodes;
};

static size_t value_bytes(const ox_tensor *t) {
    if (t->kind != OX_IO_TENSOR || t->dtype == OX_STRING) return 0;
    int64_t n = ox_tensor_numel(t);
    return n > 0 ? (size_t)n * ox_dtype_size(t->dtype) : 0;
}

/* Whether value v is converted between float32 (host) and float16 or bfloat16 (device). */
static bool is_converted(const struct ox_devplan *dp, int v) {
    return dp->low && dp->p->vals[v].dtype == OX_FLOAT && dp->dvals[v].dtype == dp->low;
}

/* Queue a copy of value v's bytes from the host to the device. */
static ox_status to_device(struct ox_devplan *dp, void *dst, int v, const void *host) {
    struct ox_device *d = dp->dev;
    size_t bytes = value_bytes(&dp->p->vals[v]);
    if (!is_converted(dp, v)) return d->ops->copy_in(d, dst, host, bytes);
    ox_status st = d->ops->copy_in(d, dp->temp, host, bytes);
    if (!st)
        st = d->ops->convert(d, dst, dp->low, dp->temp, OX_FLOAT, ox_tensor_numel(&dp->p->vals[v]));
    return st;
}

/* Queue a copy of value v's bytes from the device to the host. */
static ox_status to_host(struct ox_devplan *dp, void *host, int v, const void *src) {
    struct ox_device *d = dp->dev;
    size_t bytes = value_bytes(&dp->p->vals[v]);
    if (!is_converted(dp, v)) return d->ops->copy_out(d, host, src, bytes);
    ox_status st =
        d->ops->convert(d, dp->temp, OX_FLOAT, src, dp->low, ox_tensor_numel(&dp->p->vals[v]));
    if (!st) st = d->ops->copy_out(d, host, dp->temp, bytes);
    return st;
}

/* The value a view finally shows (itself when it is none). */
static int root_of(const struct ox_plan *p, int v) {
    while (p->slot[v] == OX_SLOT_VIEW && p->alias[v] >= 0) v = p->alias[v];
    return v;
}

static ox_status add_buf(struct ox_device *d, struct bufs *bs, const void *host, size_t bytes,
                         bool half, void **out) {
    struct buf *b = realloc(bs->b, sizeof *b * (size_t)(bs->n + 1));
    if (!b) return ox_err(OX_E_NOMEM, "out of memory");
    bs->b = b;
    void *p = NULL;
    ox_status st = d->ops->alloc(d, bytes, &p);
    if (st) return st;
    b[bs->n++] = (struct buf){.dev = p, .host = host, .bytes = bytes, .half = half};
    *out = p;
    return OX_OK;
}

static void bufs_free(struct ox_device *d, struct bufs *bs) {
    for (int i = 0; i < bs->n; i++) d->ops->free(d, bs->b[i].dev);
    free(bs->b);
    memset(bs, 0, sizeof *bs);
}

ox_status ox_devconsts_create(struct ox_device *d, struct ox_devconsts **out) {
    *out = calloc(1, sizeof **out);
    if (!*out) return ox_err(OX_E_NOMEM, "out of memory");
    (*out)->dev = d;
    return OX_OK;
}

void ox_devconsts_free(struct ox_devconsts *c) {
    if (!c) return;
    bufs_free(c->dev, &c->b);
    free(c);
}

/* The device copy of constant value v, uploaded once: values with the same data share it,
 * and so do all plans of a session for its initializers. */
static ox_status upload(struct ox_devplan *dp, int v, void **out) {
    const void *host = dp->p->vals[v].data;
    size_t bytes = value_bytes(&dp->p->vals[v]);
    bool half = is_converted(dp, v);
    struct bufs *bs = dp->shared && dp->p->slot[v] == OX_SLOT_CONST ? &dp->shared->b : &dp->own;
    for (int i = 0; i < bs->n; i++)
        if (bs->b[i].host == host && bs->b[i].bytes >= bytes && bs->b[i].half == half) {
            *out = bs->b[i].dev;
            return OX_OK;
        }
    ox_status st = add_buf(dp->dev, bs, host, bytes, half, out);
    if (!st) st = to_device(dp, *out, v, host);
    return st;
}

/* Where every value lives on the device. */
static ox_status place_values(struct ox_devplan *dp) {
    struct ox_plan *p = dp->p;
    const struct ox_graph *g = p->graph;
    struct ox_device *d = dp->dev;
    ox_status st;
    if (p->arena_bytes && (st = d->ops->alloc(d, p->arena_bytes, &dp->arena))) return st;
    for (int v = 0; v < g->n_values && dp->low; v++) {
        ox_tensor *t = &dp->dvals[v];
        bool on_device = p->slot[v] != OX_SLOT_DYNAMIC && p->slot[v] != OX_SLOT_NONE &&
                         p->slot[v] != OX_SLOT_OUTER;
        if (on_device && t->kind == OX_IO_TENSOR && t->dtype == OX_FLOAT) {
            t->dtype = dp->low;
            if (value_bytes(&p->vals[v]) > dp->temp_bytes)
                dp->temp_bytes = value_bytes(&p->vals[v]);
        }
    }
    if (dp->temp_bytes && (st = d->ops->alloc(d, dp->temp_bytes, &dp->temp))) return st;
    for (int v = 0; v < g->n_values; v++) {
        ox_tensor *t = &dp->dvals[v];
        t->data = NULL;
        size_t bytes = value_bytes(&p->vals[v]);
        switch (p->slot[v]) {
        case OX_SLOT_CONST:
        case OX_SLOT_FOLDED:
            dp->host_ok[v] = true;
            if (bytes && p->vals[v].data && (st = upload(dp, v, &t->data))) return st;
            break;
        case OX_SLOT_INPUT:
            dp->host_ok[v] = true;
            if (p->vals[v].kind == OX_IO_TENSOR && p->vals[v].dtype != OX_STRING &&
                (st = add_buf(d, &dp->own, NULL, bytes ? bytes : 1, false, &t->data)))
                return st;
            break;
        case OX_SLOT_ARENA:
            if (p->vals[v].kind == OX_IO_TENSOR && p->vals[v].dtype != OX_STRING)
                t->data = (char *)dp->arena + p->offset[v];
            break;
        default: break;
        }
    }
    for (int i = 0; i < p->n_views; i++) {
        int v = p->view_order[i];
        char *src = dp->dvals[p->alias[v]].data;
        /* a float32 view's byte offset halves where the value is float16 on the device */
        size_t off = is_converted(dp, v) ? p->view_off[v] / 2 : p->view_off[v];
        dp->dvals[v].data = src ? src + off : NULL;
        int r = root_of(p, v);
        dp->host_ok[v] = p->slot[r] == OX_SLOT_CONST || p->slot[r] == OX_SLOT_FOLDED ||
                         p->slot[r] == OX_SLOT_INPUT;
    }
    return OX_OK;
}

static bool has_subgraph(const struct ox_node *n) {
    for (int i = 0; i < n->n_attrs; i++)
        if (n->attrs[i].type == OX_ATTR_GRAPH || n->attrs[i].type == OX_ATTR_GRAPHS) return true;
    return false;
}

/* Whether a step's tensors can all be on the device at all. */
static bool device_capable(const struct ox_devplan *dp, const struct ox_step *st,
                           const struct ox_node *n) {
    if (st->is_dynamic || has_subgraph(n) || (n->op->flags & OX_OP_ALLOCATES)) return false;
    for (int k = 0; k < n->n_inputs; k++) {
        if (!st->in[k]) continue;
        const ox_tensor *t = &dp->dvals[n->inputs[k]];
        if (t->kind != OX_IO_TENSOR || t->dtype == OX_STRING) return false;
        if (!t->data && value_bytes(t)) return false;
    }
    for (int k = 0; k < n->n_outputs; k++) {
        if (!st->out[k]) continue;
        const ox_tensor *t = &dp->dvals[n->outputs[k]];
        if (t->kind != OX_IO_TENSOR || t->dtype == OX_STRING) return false;
        if (!t->data && value_bytes(t)) return false;
    }
    return true;
}

static ox_status plan_step(struct ox_devplan *dp, int s, size_t *scratch) {
    struct ox_plan *p = dp->p;
    const struct ox_graph *g = p->graph;
    struct ox_step *st = &p->steps[s];
    const struct ox_node *n = &g->nodes[st->node];
    struct dstep *ds = &dp->steps[s];
    ds->in = calloc((size_t)n->n_inputs + 1, sizeof *ds->in);
    ds->out = calloc((size_t)n->n_outputs + 1, sizeof *ds->out);
    if (!ds->in || !ds->out) return ox_err(OX_E_NOMEM, "out of memory");
    if (st->is_skipped) {
        ds->on_device = true;
        return OX_OK;
    }
    unsigned const_inputs = 0;
    for (int k = 0; k < n->n_inputs; k++) {
        if (!st->in[k]) continue;
        ds->in[k] = &dp->dvals[n->inputs[k]];
        int r = root_of(p, n->inputs[k]);
        if (k < 32 && (p->slot[r] == OX_SLOT_CONST || p->slot[r] == OX_SLOT_FOLDED))
            const_inputs |= 1u << k;
    }
    for (int k = 0; k < n->n_outputs; k++)
        if (st->out[k]) ds->out[k] = &dp->dvals[n->outputs[k]];
    if (device_capable(dp, st, n)) {
        size_t need = 0;
        ox_status rc = dp->dev->ops->prepare(dp->dev, n, ds->in, ds->out, const_inputs, p->precise,
                                             &ds->kernel, &need);
        if (rc == OX_OK) {
            ds->on_device = true;
            dp->n_device++;
            if (need > *scratch) *scratch = need;
            return OX_OK;
        }
        if (rc != OX_E_UNSUPPORTED) return rc;
    }
    /* on the CPU */
    dp->cpu_nodes[dp->n_cpu++] = st->node;
    ds->pull_all = has_subgraph(n);
    ds->pull = malloc(sizeof(int) * (size_t)(n->n_inputs + 1));
    ds->push = malloc(sizeof(int) * (size_t)(n->n_outputs + 1));
    if (!ds->pull || !ds->push) return ox_err(OX_E_NOMEM, "out of memory");
    for (int k = 0; k < n->n_inputs; k++) {
        int v = n->inputs[k];
        if (!st->in[k] || dp->host_ok[v] || !dp->dvals[v].data) continue;
        bool dup = false;
        for (int i = 0; i < ds->n_pull; i++) dup |= ds->pull[i] == v;
        if (!dup) ds->pull[ds->n_pull++] = v;
    }
    for (int k = 0; k < n->n_outputs; k++) {
        int v = n->outputs[k];
        if (!st->out[k] || !dp->dvals[v].data) continue;
        ds->push[ds->n_push++] = v;
        /* the host copy stays current while the value lives, unless other values write into
         * its memory (views into it: a Concat's inputs written in place) */
        if (p->slot[v] == OX_SLOT_ARENA) {
            bool shown = false;
            for (int i = 0; i < p->n_views && !shown; i++)
                shown = root_of(p, p->view_order[i]) == v;
            dp->host_ok[v] = !shown;
        }
    }
    return OX_OK;
}

static ox_status plan_outputs(struct ox_devplan *dp) {
    struct ox_plan *p = dp->p;
    const struct ox_graph *g = p->graph;
    dp->ins = calloc((size_t)g->n_inputs + 1, sizeof *dp->ins);
    dp->outs = calloc((size_t)g->n_outputs + 1, sizeof *dp->outs);
    if (!dp->ins || !dp->outs) return ox_err(OX_E_NOMEM, "out of memory");
    ox_status st;
    for (int i = 0; i < g->n_inputs; i++) {
        int v = g->inputs[i];
        size_t bytes = value_bytes(&p->vals[v]);
        if (!dp->dvals[v].data || !bytes) continue;
        struct dbuf *b = &dp->ins[dp->n_ins++];
        b->v = v;
        b->bytes = bytes;
        b->half = is_converted(dp, v);
        if ((st = dp->dev->ops->alloc_host(dp->dev, bytes, &b->pinned))) return st;
    }
    for (int i = 0; i < g->n_outputs; i++) {
        int v = g->outputs[i];
        size_t bytes = value_bytes(&p->vals[v]);
        if (!dp->dvals[v].data || !bytes || dp->host_ok[v]) continue;
        bool dup = false;
        for (int k = 0; k < dp->n_outs; k++) dup |= dp->outs[k].v == v;
        if (dup) continue;
        struct dbuf *b = &dp->outs[dp->n_outs++];
        b->v = v;
        b->bytes = bytes;
        b->half = is_converted(dp, v);
        if ((st = dp->dev->ops->alloc_host(dp->dev, bytes, &b->pinned))) return st;
    }
    return OX_OK;
}

ox_status ox_devplan_build(struct ox_device *d, struct ox_devconsts *shared, struct ox_plan *p,
                           struct ox_devplan **out) {
    *out = NULL;
    if (p->n_outer) return ox_err(OX_E_INTERNAL, "a subgraph's plan given to a device");
    const struct ox_graph *g = p->graph;
    struct ox_devplan *dp = calloc(1, sizeof *dp);
    if (!dp) return ox_err(OX_E_NOMEM, "out of memory");
    dp->dev = d;
    dp->shared = shared;
    dp->stage_step = (size_t)4 << 20;
    dp->p = p;
    dp->low = d->precision == OX_PRECISION_FP16   ? OX_FLOAT16
              : d->precision == OX_PRECISION_BF16 ? OX_BFLOAT16
                                                  : OX_UNDEFINED;
    ox_status st = OX_E_NOMEM;
    dp->dvals = malloc(sizeof *dp->dvals * (size_t)(g->n_values + 1));
    dp->host_ok = calloc((size_t)g->n_values + 1, sizeof *dp->host_ok);
    dp->steps = calloc((size_t)p->n_steps + 1, sizeof *dp->steps);
    dp->cpu_nodes = malloc(sizeof(int) * (size_t)(p->n_steps + 1));
    if (!dp->dvals || !dp->host_ok || !dp->steps || !dp->cpu_nodes) {
        st = ox_err(OX_E_NOMEM, "out of memory");
        goto fail;
    }
    if (g->n_values) memcpy(dp->dvals, p->vals, sizeof *dp->dvals * (size_t)g->n_values);
    pthread_mutex_lock(d->mu);
    st = place_values(dp);
    size_t scratch = 0;
    for (int s = 0; !st && s < p->n_steps; s++) st = plan_step(dp, s, &scratch);
    if (!st) st = plan_outputs(dp);
    if (!st && scratch) {
        dp->scratch_bytes = scratch;
        st = d->ops->alloc(d, scratch, &dp->scratch);
    }
    if (!st) st = d->ops->sync(d); /* the uploads are done before the host data may go */
    pthread_mutex_unlock(d->mu);
    if (st) goto fail;
    dp->capturable = dp->n_cpu == 0 && !p->has_dynamic && d->ops->capture_begin && !p->step_seconds;
    *out = dp;
    return OX_OK;
fail:
    ox_devplan_free(dp);
    return st;
}

void ox_devplan_free(struct ox_devplan *dp) {
    if (!dp) return;
    struct ox_device *d = dp->dev;
    if (dp->graph) d->ops->graph_free(d, dp->graph);
    if (dp->steps)
        for (int s = 0; s < dp->p->n_steps; s++) {
            struct dstep *ds = &dp->steps[s];
            if (ds->kernel) d->ops->release(d, ds->kernel);
            free(ds->in);
            free(ds->out);
            free(ds->pull);
            free(ds->push);
        }
    bufs_free(d, &dp->own);
    for (int i = 0; i < dp->n_ins; i++) d->ops->free_host(d, dp->ins[i].pinned);
    for (int i = 0; i < dp->n_outs; i++) d->ops->free_host(d, dp->outs[i].pinned);
    d->ops->free(d, dp->arena);
    d->ops->free(d, dp->scratch);
    d->ops->free(d, dp->temp);
    free(dp->dvals);
    free(dp->host_ok);
    free(dp->steps);
    free(dp->ins);
    free(dp->outs);
    free(dp->cpu_nodes);
    free(dp);
}

/* Queue every step (CPU steps in between wait for the device and run here). */
static ox_status enqueue(struct ox_devplan *dp) {
    struct ox_device *d = dp->dev;
    struct ox_plan *p = dp->p;
    const struct ox_graph *g = p->graph;
    ox_status st;
    for (int s = 0; s < p->n_steps; s++) {
        struct dstep *ds = &dp->steps[s];
        const struct ox_node *n = &g->nodes[p->steps[s].node];
        if (p->steps[s].is_skipped) continue;
        if (ds->on_device) {
            /* profiled: the device's marks around the step (read after the run's sync), else
             * each step waited for, so that its time is its own */
            bool marks = p->step_seconds && d->ops->mark;
            double t0 = p->step_seconds && !marks ? ox_seconds() : 0;
            if (marks && (st = d->ops->mark(d, 2 * s))) return st;
            if ((st = d->ops->run(d, ds->kernel, n, ds->in, ds->out, dp->scratch,
                                  dp->scratch_bytes)))
                return st;
            if (marks) {
                if ((st = d->ops->mark(d, 2 * s + 1))) return st;
            } else if (p->step_seconds) {
                if ((st = d->ops->sync(d))) return st;
                p->step_seconds[s] += ox_seconds() - t0;
            }
            continue;
        }
        for (int v = 0; ds->pull_all && v < g->n_values; v++) /* every arena value alive */
            if (p->slot[v] == OX_SLOT_ARENA && dp->dvals[v].data && p->first_step[v] < s &&
                p->last_step[v] >= s && !dp->host_ok[v] &&
                (st = to_host(dp, p->vals[v].data, v, dp->dvals[v].data)))
                return st;
        for (int i = 0; i < ds->n_pull; i++) {
            int v = ds->pull[i];
            if ((st = to_host(dp, p->vals[v].data, v, dp->dvals[v].data))) return st;
        }
        if ((st = d->ops->sync(d)) || (st = ox_plan_run_step(p, s, NULL))) return st;
        for (int i = 0; i < ds->n_push; i++) {
            int v = ds->push[i];
            if (value_bytes(&p->vals[v]) &&
                (st = to_device(dp, dp->dvals[v].data, v, p->vals[v].data)))
                return st;
        }
    }
    return OX_OK;
}

/* Copies to and from the page-locked staging buffers, split over the session's threads
 * above 512 KiB: one thread's memcpy reaches a fraction of the memory's bandwidth, and at
 * batch 32 an image model's input (19 MB) took longer to stage than to compute. */
#define COPY_CHUNK ((size_t)256 << 10)

struct copy_job {
    char *dst;
    const char *src;
    size_t n;
};

static void copy_chunks(void *arg, int64_t begin, int64_t end, int tid) {
    const struct copy_job *j = arg;
    (void)tid;
    size_t lo = (size_t)begin * COPY_CHUNK, hi = (size_t)end * COPY_CHUNK;
    if (hi > j->n) hi = j->n;
    memcpy(j->dst + lo, j->src + lo, hi - lo);
}

static void copy_staged(struct ox_pool *pool, void *dst, const void *src, size_t n) {
    if (!pool || n < 2 * COPY_CHUNK) {
        memcpy(dst, src, n);
        return;
    }
    struct copy_job j = {dst, src, n};
    ox_parallel_for(pool, (int64_t)((n + COPY_CHUNK - 1) / COPY_CHUNK), copy_chunks, &j);
}

/* The inputs and outputs cross in chunks of dp->stage_step bytes: the device copies chunk k
 * of an input while the host stages chunk k + 1, and an output's chunks come back each
 * followed by a mark, which the host waits for before it stages that chunk out while the
 * next crosses. A value that is float16 on the device crosses as float32 through dp->temp,
 * converted there. */
static ox_status inputs_in(struct ox_devplan *dp) {
    struct ox_device *d = dp->dev;
    struct ox_plan *p = dp->p;
    ox_status st;
    for (int i = 0; i < dp->n_ins; i++) {
        const struct dbuf *b = &dp->ins[i];
        char *pin = b->pinned, *dev = b->half ? dp->temp : dp->dvals[b->v].data;
        const char *host = p->vals[b->v].data;
        for (size_t off = 0; off < b->bytes; off += dp->stage_step) {
            size_t n = b->bytes - off < dp->stage_step ? b->bytes - off : dp->stage_step;
            copy_staged(p->pool, pin + off, host + off, n);
            if ((st = d->ops->copy_in(d, dev + off, pin + off, n))) return st;
        }
        if (b->half && (st = d->ops->convert(d, dp->dvals[b->v].data, dp->low, dp->temp, OX_FLOAT,
                                             ox_tensor_numel(&p->vals[b->v]))))
            return st;
    }
    return OX_OK;
}

/* Queue the outputs' copies (out = false), or stage them out as they arrive (out = true). */
static ox_status outputs_chunks(struct ox_devplan *dp, bool out) {
    struct ox_device *d = dp->dev;
    struct ox_plan *p = dp->p;
    int mark = 2 * p->n_steps; /* after the profile's marks */
    bool marks = d->ops->mark && d->ops->wait;
    ox_status st;
    if (out && !marks && (st = d->ops->sync(d))) return st;
    for (int i = 0; i < dp->n_outs; i++) {
        const struct dbuf *b = &dp->outs[i];
        char *pin = b->pinned, *host = p->vals[b->v].data;
        const char *dev = b->half ? dp->temp : dp->dvals[b->v].data;
        if (!out && b->half &&
            (st = d->ops->convert(d, dp->temp, OX_FLOAT, dp->dvals[b->v].data, dp->low,
                                  ox_tensor_numel(&p->vals[b->v]))))
            return st;
        for (size_t off = 0; off < b->bytes; off += dp->stage_step, mark++) {
            size_t n = b->bytes - off < dp->stage_step ? b->bytes - off : dp->stage_step;
            if (!out) {
                if ((st = d->ops->copy_out(d, pin + off, dev + off, n)) ||
                    (marks && (st = d->ops->mark(d, mark))))
                    return st;
                continue;
            }
            if (marks && (st = d->ops->wait(d, mark))) return st;
            copy_staged(p->pool, host + off, pin + off, n);
        }
    }
    return OX_OK;
}

static ox_status run_locked(struct ox_devplan *dp, const ox_tensor *const *inputs) {
    struct ox_device *d = dp->dev;
    struct ox_plan *p = dp->p;
    ox_status st = ox_plan_bind(p, inputs, NULL);
    if (!st) st = inputs_in(dp);
    if (st) {
        (void)d->ops->sync(d);
        return st;
    }
    if (!dp->graph && dp->capturable && dp->runs >= 1) {
        /* the first run went eagerly (libraries set themselves up then); capture this one,
         * with the inputs' copies done first */
        ox_status rc = d->ops->sync(d);
        if (!rc) rc = d->ops->capture_begin(d);
        if (!rc) {
            rc = enqueue(dp);
            ox_status ec = d->ops->capture_end(d, &dp->graph);
            if (!rc) rc = ec;
        }
        if (rc) { /* something the capture does not allow: run eagerly from now on */
            if (dp->graph) d->ops->graph_free(d, dp->graph);
            dp->graph = NULL;
            dp->capturable = false;
            st = enqueue(dp);
        } else {
            st = d->ops->replay(d, dp->graph);
        }
    } else if (dp->graph) {
        st = d->ops->replay(d, dp->graph);
    } else {
        st = enqueue(dp);
    }
    if (!st) st = outputs_chunks(dp, false);
    if (!st) st = outputs_chunks(dp, true);
    ox_status sst = d->ops->sync(d);
    if (st || (st = sst)) return st;
    for (int s = 0; p->step_seconds && d->ops->mark && s < p->n_steps; s++) {
        double sec = 0;
        if (!dp->steps[s].on_device || p->steps[s].is_skipped) continue;
        if ((st = d->ops->elapsed(d, 2 * s, 2 * s + 1, &sec))) return st;
        p->step_seconds[s] += sec;
    }
    dp->runs++;
    return OX_OK;
}

ox_status ox_devplan_run(struct ox_devplan *dp, const ox_tensor *const *inputs) {
    pthread_mutex_lock(dp->dev->mu);
    ox_status st = run_locked(dp, inputs);
    pthread_mutex_unlock(dp->dev->mu);
    return st;
}

void ox_devplan_set_stage_step(struct ox_devplan *dp, size_t bytes) {
    dp->stage_step = bytes >= 4 ? bytes / 4 * 4 : 4;
}

void ox_devplan_stats(const struct ox_devplan *dp, int *n_device, int *n_cpu, bool *is_captured) {
    *n_device = dp->n_device;
    *n_cpu = dp->n_cpu;
    *is_captured = dp->graph != NULL;
}

const int *ox_devplan_cpu_nodes(const struct ox_devplan *dp, int *n) {
    *n = dp->n_cpu;
    return dp->cpu_nodes;
}
