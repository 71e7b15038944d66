/* The device plan (executor/devplan.c) without a GPU: a fake device whose memory is host
 * memory (filled with NaN bytes when allocated, so that a value the plan forgot to copy
 * shows) and whose kernels are the CPU's, for the nodes it chooses to take. Each model runs
 * through a plain CPU plan and through device plans that take every node they can, every
 * other node (so that values cross between device and CPU all the time: the copies around
 * fallback steps, views, Concats written in place, subgraphs reading values by name), or
 * none, in fp32, fp16 and bf16 (float32 values converted at every crossing; in fp16 and bf16
 * the fake takes only the elementwise nodes whose CPU kernels compute float16 and bfloat16,
 * so that graph inputs and outputs converted on the device are checked on those). The
 * outputs must be the CPU plan's: within 1e-5 relative L2 in fp32, 1e-2 in fp16, 5e-2 in
 * bf16. Each model runs again with
 * every node output made a graph output, as `onnxexec compare` runs a side (every value then
 * comes back from the device: views, values a CPU step made, Concat inputs written in place),
 * and once profiled (each device step timed by the device's marks around it).
 *
 *     test_devplan TMPDIR MODEL.onnx|CASE_DIR...
 */
#include "executor/device.h"
#include "executor/session.h"
#include "harness.h"

#include <dirent.h>
#include <pthread.h>
#include <sys/stat.h>

enum take { TAKE_ALL, TAKE_ALTERNATE, TAKE_NONE };

struct fake {
    struct ox_device base;
    pthread_mutex_t mu;
    enum take take;
    int seen;         /* nodes offered, for TAKE_ALTERNATE */
    size_t allocated; /* bytes of device memory allocated so far */
    double *marks;    /* when each mark was queued */
    int *mark_done;   /* copies out done once the device is past each mark */
    int cap_marks, n_marked, n_read, n_waited; /* marks queued, elapsed times read, waits */
    /* Copies to the host are done late, as a GPU's are: when the host waits for a mark after
     * them or syncs (and before any other work, to keep the queue's order), so that a host
     * that reads staged outputs before waiting for them reads stale bytes. */
    struct {
        void *dst;
        const void *src;
        size_t n;
    } pending[64];
    int n_pending, n_done;
    int n_prepared, n_precise; /* nodes taken; of them, prepared with `precise` set */
};

/* Do the queued copies out up to the `upto`-th. */
static void f_flush(struct fake *f, int upto) {
    for (; f->n_done < upto && f->n_done < f->n_pending; f->n_done++) {
        int k = f->n_done % 64;
        memcpy(f->pending[k].dst, f->pending[k].src, f->pending[k].n);
    }
}

static void f_close(struct ox_device *d) {
    (void)d;
}

static ox_status f_alloc(struct ox_device *d, size_t n, void **out) {
    ((struct fake *)d)->allocated += n;
    *out = malloc(n ? n : 1);
    if (!*out) return ox_err(OX_E_NOMEM, "fake device: out of memory");
    memset(*out, 0xff, n); /* NaN in every float type */
    return OX_OK;
}

static void f_free(struct ox_device *d, void *p) {
    (void)d;
    free(p);
}

static ox_status f_copy(struct ox_device *d, void *dst, const void *src, size_t n) {
    struct fake *f = (struct fake *)d;
    f_flush(f, f->n_pending);
    if (n) memcpy(dst, src, n);
    return OX_OK;
}

static ox_status f_copy_out(struct ox_device *d, void *dst, const void *src, size_t n) {
    struct fake *f = (struct fake *)d;
    if (f->n_pending - f->n_done == 64) f_flush(f, f->n_done + 1); /* the oldest: room */
    int k = f->n_pending++ % 64;
    f->pending[k].dst = dst;
    f->pending[k].src = src;
    f->pending[k].n = n;
    return OX_OK;
}

static ox_status f_sync(struct ox_device *d) {
    struct fake *f = (struct fake *)d;
    f_flush(f, f->n_pending);
    return OX_OK;
}

static ox_status f_convert(struct ox_device *d, void *dst, ox_dtype dst_type, const void *src,
                           ox_dtype src_type, int64_t n) {
    f_flush((struct fake *)d, ((struct fake *)d)->n_pending); /* the queue's order */
    for (int64_t i = 0; i < n; i++) {
        if (dst_type == OX_FLOAT16 && src_type == OX_FLOAT)
            ((uint16_t *)dst)[i] = ox_float_to_half(((const float *)src)[i]);
        else if (dst_type == OX_FLOAT && src_type == OX_FLOAT16)
            ((float *)dst)[i] = ox_half_to_float(((const uint16_t *)src)[i]);
        else if (dst_type == OX_BFLOAT16 && src_type == OX_FLOAT)
            ((uint16_t *)dst)[i] = ox_float_to_bf16(((const float *)src)[i]);
        else if (dst_type == OX_FLOAT && src_type == OX_BFLOAT16)
            ((float *)dst)[i] = ox_bf16_to_float(((const uint16_t *)src)[i]);
        else
            return ox_err(OX_E_INTERNAL, "fake device: convert %d to %d", src_type, dst_type);
    }
    return OX_OK;
}

/* Whether the CPU kernel of n computes float16 and bfloat16 as the GPU would (float
 * arithmetic, one rounding): the elementwise ops below; other CPU kernels' support varies. */
static bool takes_half(const struct ox_node *n) {
    static const char *const ops[] = {"Add", "Sub", "Mul", "Relu", "Neg", "Abs", "Identity"};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
        if (strcmp(n->op_type, ops[i]) == 0 && !n->domain[0]) return true;
    return false;
}

/* Take a node whose CPU kernel needs no scratch or prepared memory and sees no float16 or
 * bfloat16 unless takes_half (in fp16 and bf16 most float nodes stay on the CPU). */
static ox_status f_prepare(struct ox_device *d, const struct ox_node *n, const ox_tensor *const *in,
                           ox_tensor *const *out, unsigned const_inputs, bool precise,
                           void **kernel, size_t *scratch) {
    struct fake *f = (struct fake *)d;
    *kernel = NULL;
    *scratch = 0;
    if (f->take == TAKE_NONE || (f->take == TAKE_ALTERNATE && f->seen++ % 2))
        return OX_E_UNSUPPORTED;
    bool half_ok = takes_half(n);
    for (int k = 0; k < n->n_inputs; k++)
        if (in[k] && (in[k]->dtype == OX_FLOAT16 || in[k]->dtype == OX_BFLOAT16) && !half_ok)
            return OX_E_UNSUPPORTED;
    ox_tensor outs[HARNESS_MAX_OUT];
    ox_tensor *po[HARNESS_MAX_OUT];
    if (n->n_outputs > HARNESS_MAX_OUT) return OX_E_UNSUPPORTED;
    for (int k = 0; k < n->n_outputs; k++) {
        if (out[k] && (out[k]->dtype == OX_FLOAT16 || out[k]->dtype == OX_BFLOAT16) && !half_ok)
            return OX_E_UNSUPPORTED;
        if (out[k]) outs[k] = *out[k];
        po[k] = out[k] ? &outs[k] : NULL;
    }
    struct ox_infer_ctx ic = {.n_threads = 1, .const_inputs = const_inputs};
    ox_status st = n->op->infer(&ic, n, in, po);
    if (st || ic.scratch_bytes || ic.prepared_bytes) return OX_E_UNSUPPORTED;
    *kernel = (void *)n;
    f->n_prepared++;
    f->n_precise += precise;
    return OX_OK;
}

static ox_status f_run(struct ox_device *d, void *kernel, const struct ox_node *n,
                       const ox_tensor *const *in, ox_tensor *const *out, void *scratch,
                       size_t scratch_bytes) {
    (void)kernel, (void)scratch, (void)scratch_bytes;
    f_flush((struct fake *)d, ((struct fake *)d)->n_pending); /* the queue's order */
    struct ox_kernel_ctx kc = {0};
    return n->op->cpu(&kc, n, in, out);
}

static void f_release(struct ox_device *d, void *kernel) {
    (void)d, (void)kernel;
}

static ox_status f_alloc_host(struct ox_device *d, size_t n, void **out) {
    (void)d;
    *out = malloc(n ? n : 1);
    if (!*out) return ox_err(OX_E_NOMEM, "fake device: out of memory");
    memset(*out, 0xff, n); /* NaN: staged bytes read before they arrive show */
    return OX_OK;
}

static ox_status f_mark(struct ox_device *d, int i) {
    struct fake *f = (struct fake *)d;
    if (i < 0) return ox_err(OX_E_INTERNAL, "fake device: mark %d", i);
    if (i >= f->cap_marks) {
        int n = i + 1 > 2 * f->cap_marks ? i + 1 : 2 * f->cap_marks;
        double *m = realloc(f->marks, sizeof *m * (size_t)n);
        if (m) f->marks = m;
        int *done = m ? realloc(f->mark_done, sizeof *done * (size_t)n) : NULL;
        if (!done) return ox_err(OX_E_NOMEM, "fake device: out of memory");
        f->mark_done = done;
        for (int k = f->cap_marks; k < n; k++) m[k] = NAN; /* never marked */
        f->cap_marks = n;
    }
    f->marks[i] = ox_seconds();
    f->mark_done[i] = f->n_pending;
    f->n_marked++;
    return OX_OK;
}

static ox_status f_elapsed(struct ox_device *d, int i, int j, double *seconds) {
    struct fake *f = (struct fake *)d;
    if (i < 0 || j < 0 || i >= f->cap_marks || j >= f->cap_marks || isnan(f->marks[i]) ||
        isnan(f->marks[j]))
        return ox_err(OX_E_INTERNAL, "fake device: marks %d, %d never made", i, j);
    *seconds = f->marks[j] - f->marks[i];
    f->n_read++;
    return OX_OK;
}

static ox_status f_wait(struct ox_device *d, int i) {
    struct fake *f = (struct fake *)d;
    if (i < 0 || i >= f->cap_marks || isnan(f->marks[i]))
        return ox_err(OX_E_INTERNAL, "fake device: waiting for mark %d, never made", i);
    f_flush(f, f->mark_done[i]);
    f->n_waited++;
    return OX_OK;
}

static const struct ox_device_ops fake_ops = {
    .close = f_close,
    .alloc = f_alloc,
    .free = f_free,
    .alloc_host = f_alloc_host,
    .free_host = f_free,
    .copy_in = f_copy,
    .copy_out = f_copy_out,
    .sync = f_sync,
    .convert = f_convert,
    .prepare = f_prepare,
    .run = f_run,
    .release = f_release,
    .mark = f_mark,
    .elapsed = f_elapsed,
    .wait = f_wait,
};

static double rel_l2(const ox_tensor *a, const ox_tensor *b) {
    int64_t n = ox_tensor_numel(a);
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double x = ox_get_f64(a, i), y = ox_get_f64(b, i);
        if (isnan(x) && isnan(y)) continue;
        num += (x - y) * (x - y);
        den += x * x;
    }
    return isnan(num) ? INFINITY : sqrt(num) / (den > 0 ? sqrt(den) : 1);
}

/* A fake device taking nodes as `take` says, in precision prec; fake_done frees it. */
static void fake_init(struct fake *f, enum take take, int prec) {
    *f = (struct fake){.base = {.ops = &fake_ops, .precision = prec}, .take = take};
    pthread_mutex_init(&f->mu, NULL);
    f->base.mu = &f->mu;
}

static void fake_done(struct fake *f) {
    pthread_mutex_destroy(&f->mu);
    free(f->marks), free(f->mark_done);
}

/* Every float output of p within 1e-5 relative L2 of the CPU plan's (`what` names the run). */
static void outputs_match(const char *path, const char *what, const struct ox_graph *g,
                          const struct ox_plan *ref, const struct ox_plan *p) {
    for (int k = 0; k < g->n_outputs; k++) {
        const ox_tensor *a = &ref->vals[g->outputs[k]], *b = &p->vals[g->outputs[k]];
        if (a->kind != OX_IO_TENSOR || !ox_dtype_is_float(a->dtype)) continue;
        CHECK(rel_l2(a, b) <= 1e-5, "%s output %d %s: relative L2 %g", path, k, what, rel_l2(a, b));
    }
}

/* Two plans of one session share its weights on the device (ox_devconsts): the second
 * allocates no copy of the initializers, and still computes the CPU plan's outputs. */
static void check_shared(const char *path, const struct ox_graph *g, const ox_tensor **bound,
                         const struct ox_plan *ref) {
    struct fake f;
    fake_init(&f, TAKE_ALL, OX_PRECISION_FP32);
    struct ox_devconsts *shared = NULL;
    struct ox_plan *p[3] = {NULL, NULL, NULL};
    size_t bytes[3];
    ox_status st = ox_devconsts_create(&f.base, &shared);
    for (int i = 0; !st && i < 3; i++) { /* p[0], p[1] sharing; p[2] on its own */
        size_t before = f.allocated;
        st = ox_plan_build(g, bound, NULL, &p[i]);
        if (!st) st = ox_devplan_build(&f.base, i < 2 ? shared : NULL, p[i], &p[i]->devplan);
        if (!st) st = ox_devplan_run(p[i]->devplan, bound);
        bytes[i] = f.allocated - before;
    }
    CHECK(st == OX_OK, "%s shared weights: %s", path, ox_errmsg());
    if (!st) {
        size_t weights = 0; /* the initializers the plan reads, each buffer once */
        for (int v = 0; v < g->n_values; v++) {
            if (p[2]->slot[v] != OX_SLOT_CONST || !p[2]->vals[v].data) continue;
            bool seen = false;
            for (int u = 0; u < v && !seen; u++)
                seen = p[2]->slot[u] == OX_SLOT_CONST && p[2]->vals[u].data == p[2]->vals[v].data;
            if (!seen && p[2]->vals[v].kind == OX_IO_TENSOR && p[2]->vals[v].dtype != OX_STRING)
                weights +=
                    (size_t)ox_tensor_numel(&p[2]->vals[v]) * ox_dtype_size(p[2]->vals[v].dtype);
        }
        CHECK(bytes[2] - bytes[1] == weights && bytes[0] == bytes[2],
              "%s: device bytes of plans sharing weights %zu, %zu, alone %zu (weights %zu)", path,
              bytes[0], bytes[1], bytes[2], weights);
        outputs_match(path, "with shared weights", g, ref, p[1]);
    }
    for (int i = 0; i < 3; i++) ox_plan_free(p[i]);
    ox_devconsts_free(shared);
    fake_done(&f);
}

/* A profiled run (every other node on the device) times each device step from the device's
 * marks around it, read after the run, and still computes the CPU plan's outputs. */
static void check_profiled(const char *path, const struct ox_graph *g, const ox_tensor **bound,
                           const struct ox_plan *ref) {
    struct fake f;
    fake_init(&f, TAKE_ALTERNATE, OX_PRECISION_FP32);
    struct ox_plan *p = NULL;
    ox_status st = ox_plan_build(g, bound, NULL, &p);
    if (!st && !(p->step_seconds = calloc((size_t)p->n_steps, sizeof *p->step_seconds)))
        st = OX_E_NOMEM;
    if (!st) st = ox_devplan_build(&f.base, NULL, p, &p->devplan);
    for (int run = 0; !st && run < 2; run++) st = ox_devplan_run(p->devplan, bound);
    CHECK(st == OX_OK, "%s profiled: %s", path, ox_errmsg());
    if (!st) {
        int n_dev = 0, n_cpu = 0;
        bool captured;
        ox_devplan_stats(p->devplan, &n_dev, &n_cpu, &captured);
        double dev_sec = 0;
        const int *cpu_nodes = ox_devplan_cpu_nodes(p->devplan, &n_cpu);
        for (int s = 0; s < p->n_steps; s++) {
            bool on_cpu = false;
            for (int i = 0; i < n_cpu; i++) on_cpu = on_cpu || cpu_nodes[i] == p->steps[s].node;
            CHECK(p->step_seconds[s] >= 0, "%s profiled step %d: %g s", path, s,
                  p->step_seconds[s]);
            if (!on_cpu) dev_sec += p->step_seconds[s];
        }
        CHECK(!captured && f.n_marked == 2 * 2 * n_dev + f.n_waited && f.n_read == 2 * n_dev &&
                  (n_dev == 0 || dev_sec > 0),
              "%s profiled: %d device steps, %d marks, %d read, %g s on the device%s", path, n_dev,
              f.n_marked, f.n_read, dev_sec, captured ? ", captured" : "");
        outputs_match(path, "profiled", g, ref, p);
    }
    ox_plan_free(p);
    fake_done(&f);
}

/* A plan of a graph that computes gradients (metadata onnxexec.gradients) prepares every
 * device step precise (no FFT or Winograd convolutions on a GPU); other plans none. */
static void check_precise(const char *path, struct ox_graph *g, const ox_tensor **bound) {
    for (int marked = 0; marked < 2; marked++) {
        if (ox_graph_set_meta(g, OX_META_GRADIENTS, marked ? "1" : "0") != OX_OK) return;
        struct fake f;
        fake_init(&f, TAKE_ALL, OX_PRECISION_FP32);
        struct ox_plan *p = NULL;
        ox_status st = ox_plan_build(g, bound, NULL, &p);
        if (!st) st = ox_devplan_build(&f.base, NULL, p, &p->devplan);
        CHECK(!st, "%s: precise plan: %s", path, ox_errmsg());
        CHECK(st || f.n_precise == (marked ? f.n_prepared : 0),
              "%s: %d of %d device steps prepared precise in a plan %s gradients", path,
              f.n_precise, f.n_prepared, marked ? "of" : "without");
        ox_plan_free(p);
        fake_done(&f);
    }
}

static void check_model(const char *path, bool all_values) {
    ox_model *m;
    if (ox_model_load(path, &m) != OX_OK) {
        printf("skip %s: %s\n", path, ox_errmsg());
        return;
    }
    struct ox_graph *g = ox_model_graph(m);
    for (int i = 0; all_values && i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_outputs; k++) {
            int v = g->nodes[i].outputs[k], dup = v < 0;
            for (int j = 0; j < g->n_outputs && !dup; j++) dup = g->outputs[j] == v;
            if (!dup && ox_graph_add_output(g, v) != OX_OK) {
                printf("skip %s: %s\n", path, ox_errmsg());
                ox_model_free(m);
                return;
            }
        }
    int n_in = g->n_inputs;
    ox_tensor *ins = calloc((size_t)n_in + 1, sizeof *ins);
    const ox_tensor **bound = calloc((size_t)n_in + 1, sizeof *bound);
    uint32_t seed = 12345;
    bool ok = ins && bound;
    for (int i = 0; ok && i < n_in; i++) {
        ox_tensor d;
        if (ox_model_input(m, i, &d, NULL) || d.kind != OX_IO_TENSOR || d.dtype != OX_FLOAT) {
            printf("skip %s: input %d is not a float tensor\n", path, i);
            ok = false;
            break;
        }
        for (int k = 0; k < d.rank; k++)
            if (d.dims[k] < 0) d.dims[k] = 2;
        ins[i] = mk(OX_FLOAT, d.rank, d.dims);
        for (int64_t e = 0; e < ox_tensor_numel(&ins[i]); e++) {
            seed = seed * 1664525u + 1013904223u;
            ((float *)ins[i].data)[e] = (float)(seed >> 8) / (float)(1 << 24) * 2 - 1;
        }
        bound[i] = &ins[i];
    }
    struct ox_plan *ref = NULL;
    if (ok && ox_plan_build(g, bound, NULL, &ref) != OX_OK) {
        printf("skip %s: %s\n", path, ox_errmsg());
        ok = false;
    }
    if (ok && ox_plan_run(ref, bound) != OX_OK) {
        printf("skip %s: the CPU plan fails: %s\n", path, ox_errmsg());
        ok = false;
    }
    for (int take = TAKE_ALL; ok && take <= TAKE_NONE; take++)
        for (int pi = 0; pi < 3; pi++) {
            static const int precs[] = {OX_PRECISION_FP32, OX_PRECISION_FP16, OX_PRECISION_BF16};
            int prec = precs[pi];
            struct fake f;
            fake_init(&f, take, prec);
            struct ox_plan *p = NULL;
            ox_status st = ox_plan_build(g, bound, NULL, &p);
            if (!st) st = ox_devplan_build(&f.base, NULL, p, &p->devplan);
            /* every other node: inputs and outputs staged in chunks of 4100 bytes (a float16
             * chunk on the device is 2050), so that they cross many chunk boundaries */
            if (!st && take == TAKE_ALTERNATE) ox_devplan_set_stage_step(p->devplan, 4100);
            int n_dev = 0, n_cpu = 0;
            bool captured;
            for (int run = 0; !st && run < 2; run++) { /* the first fresh, the second again */
                st = ox_devplan_run(p->devplan, bound);
                CHECK(st == OX_OK, "%s take %d precision %d: %s", path, take, prec, ox_errmsg());
                if (!st) ox_devplan_stats(p->devplan, &n_dev, &n_cpu, &captured);
                for (int k = 0; !st && k < g->n_outputs; k++) {
                    const ox_tensor *a = &ref->vals[g->outputs[k]], *b = &p->vals[g->outputs[k]];
                    if (a->kind != OX_IO_TENSOR || !ox_dtype_is_float(a->dtype)) continue;
                    double e = rel_l2(a, b), tol = prec == OX_PRECISION_FP16   ? 1e-2
                                                   : prec == OX_PRECISION_BF16 ? 5e-2
                                                                               : 1e-5;
                    CHECK(ox_same_shape(a, b) && e <= tol,
                          "%s%s output %d, take %d, precision %d, run %d (%d steps on the "
                          "device, %d on the CPU): relative L2 %g > %g",
                          path, all_values ? " (every value an output)" : "", k, take, prec, run,
                          n_dev, n_cpu, e, tol);
                }
            }
            CHECK(st || take != TAKE_NONE || n_dev == 0, "%s: TAKE_NONE took %d", path, n_dev);
            ox_plan_free(p);
            fake_done(&f);
        }
    if (ok && !all_values) check_precise(path, g, bound);
    if (ok && !all_values) check_shared(path, g, bound, ref);
    if (ok && !all_values) check_profiled(path, g, bound, ref);
    ox_plan_free(ref);
    for (int i = 0; ins && i < n_in; i++) ox_tensor_free_data(&ins[i]);
    free(ins);
    free(bound);
    ox_model_free(m);
}

int main(int argc, char **argv) {
    for (int a = 2; a < argc; a++) {
        struct stat sb;
        char path[4096];
        if (stat(argv[a], &sb) == 0 && S_ISDIR(sb.st_mode)) {
            snprintf(path, sizeof path, "%s/model.onnx", argv[a]);
            if (stat(path, &sb) == 0) {
                check_model(path, false);
                check_model(path, true);
                continue;
            }
            DIR *dir = opendir(argv[a]); /* a folder of cases */
            struct dirent *e;
            while (dir && (e = readdir(dir))) {
                if (e->d_name[0] == '.') continue;
                snprintf(path, sizeof path, "%s/%s/model.onnx", argv[a], e->d_name);
                if (stat(path, &sb) == 0) check_model(path, false), check_model(path, true);
            }
            if (dir) closedir(dir);
        } else {
            check_model(argv[a], false);
            check_model(argv[a], true);
        }
    }
    return harness_finish();
}
