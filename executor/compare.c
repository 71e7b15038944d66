/* Parity: two executions of a model compared value by value (include/onnxexec.h, "Parity").
 *
 * A side that is a model runs once on a copy of it whose graph outputs include every node
 * output (ox_model_run_all), so that every intermediate survives the run; a side of given
 * values is used as it is. Values are matched by name and compared in the reference side's
 * order, with the metrics computed in double. For the first divergent value the report
 * gives a path of the reference graph along which its error reaches a graph output, and
 * ox_compare_reduce cuts its node out of the reference model as a backend-test case.
 *
 * Ownership: the sides' models and values are borrowed; a side's run is owned here and
 * freed before ox_compare returns; the report owns its strings and arrays.
 */
#include "executor/session.h"
#include "exporter/onnx.h"
#include "graph/ir.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- running a model, keeping its values ------------------------------------------------ */

/* What a run keeps. */
enum keep { KEEP_OUTPUTS, KEEP_COMPUTED, KEEP_ALL };

/* A model's run: its values, copies that own their data and names, or (borrowed) views of
 * the session's tensors under the names of the copy's graph, valid until run_free. */
struct run {
    ox_model *copy; /* the model with every node output a graph output */
    ox_session *s;  /* kept while the values are borrowed */
    ox_tensor *vals;
    int n;
    bool borrowed;
};

static void run_free(struct run *r) {
    if (r->borrowed)
        free(r->vals);
    else
        ox_values_free(r->vals, r->n);
    ox_session_free(r->s);
    ox_model_free(r->copy);
    memset(r, 0, sizeof *r);
}

/* Append tensor t, named `name`, to r->vals (room for it is there): a copy, or a view when
 * r->borrowed. Non-tensor values and values not computed are left out. */
static ox_status keep_value(struct run *r, const ox_tensor *t, const char *name) {
    if (t->kind != OX_IO_TENSOR || (!t->data && ox_tensor_numel(t) > 0)) return OX_OK;
    ox_tensor *d = &r->vals[r->n];
    if (r->borrowed) {
        *d = *t;
        d->name = name;
        r->n++;
        return OX_OK;
    }
    ox_status st = ox_tensor_copy(d, t);
    if (st) return st;
    d->name = strdup(name);
    if (!d->name) {
        ox_tensor_free_data(d);
        return ox_err(OX_E_NOMEM, "out of memory");
    }
    r->n++;
    return OX_OK;
}

/* The values of the run, in topological order: graph inputs and the initializers that nodes
 * read (in value order) unless computed_only, then node outputs in node order. The graph's
 * outputs include every node output, so the plan keeps each of them alive to the end. */
static ox_status collect(const struct ox_graph *g, bool computed_only, struct run *r) {
    struct ox_plan *p;
    ox_status st = ox_session_plan(r->s, &p);
    if (st) return st;
    bool *read = calloc((size_t)g->n_values + 1, sizeof *read);
    if (!read) return ox_err(OX_E_NOMEM, "out of memory");
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_inputs; k++)
            if (g->nodes[i].inputs[k] >= 0) read[g->nodes[i].inputs[k]] = true;
    for (int i = 0; i < g->n_inputs && !st && !computed_only; i++)
        if (p->slot[g->inputs[i]] != OX_SLOT_NONE)
            st = keep_value(r, &p->vals[g->inputs[i]], g->values[g->inputs[i]].name);
    for (int v = 0; v < g->n_values && !st && !computed_only; v++)
        if (g->values[v].init && read[v] && !ox_graph_is_input(g, v))
            st = keep_value(r, &p->vals[v], g->values[v].name);
    for (int i = 0; i < g->n_nodes && !st; i++)
        for (int k = 0; k < g->nodes[i].n_outputs && !st; k++) {
            int v = g->nodes[i].outputs[k];
            if (v >= 0 && p->slot[v] != OX_SLOT_NONE)
                st = keep_value(r, &p->vals[v], g->values[v].name);
        }
    free(read);
    return st;
}

/* A copy of m (as loaded: the saved graph of an optimized model is optimized, so the copy
 * is not optimized again) whose graph outputs include every node output. */
static ox_status copy_keeping_all(ox_model *m, ox_model **out) {
    void *buf = NULL;
    size_t len = 0;
    ox_model_options lo = {.no_optimize = true, .limits = *ox_model_limits(m)};
    ox_status st = ox_model_save_buffer(m, &buf, &len);
    if (!st) st = ox_model_load_buffer_with(buf, len, NULL, &lo, out);
    free(buf);
    if (st) return ox_err_prefix(st, "copying the model to keep its values: ");
    struct ox_graph *g = ox_model_graph(*out);
    bool *is_out = calloc((size_t)g->n_values + 1, sizeof *is_out);
    if (!is_out) return ox_err(OX_E_NOMEM, "out of memory");
    for (int k = 0; k < g->n_outputs; k++) is_out[g->outputs[k]] = true;
    for (int i = 0; !st && i < g->n_nodes; i++)
        for (int k = 0; !st && k < g->nodes[i].n_outputs; k++) {
            int v = g->nodes[i].outputs[k];
            if (v < 0 || is_out[v]) continue;
            is_out[v] = true;
            st = ox_graph_add_output(g, v);
        }
    free(is_out);
    return st;
}

/* Run m once, keeping its graph outputs, or every value its main graph computes, or those
 * and its inputs and initializers too; borrowed: views (see struct run). */
static ox_status run_values(ox_model *m, const ox_tensor *inputs, int n_inputs,
                            const ox_session_options *so, enum keep keep, bool borrowed,
                            struct run *r) {
    memset(r, 0, sizeof *r);
    r->borrowed = borrowed;
    ox_status st = keep == KEEP_OUTPUTS ? OX_OK : copy_keeping_all(m, &r->copy);
    ox_model *run = r->copy ? r->copy : m;
    const struct ox_graph *g = ox_model_graph(run);
    const ox_tensor **outs = NULL;
    if (!st) st = ox_session_create(run, so, &r->s);
    if (!st) {
        outs = calloc((size_t)g->n_outputs + 1, sizeof *outs);
        r->vals = calloc((size_t)(keep == KEEP_OUTPUTS ? g->n_outputs : g->n_values) + 1,
                         sizeof *r->vals);
        if (!outs || !r->vals) st = ox_err(OX_E_NOMEM, "out of memory");
    }
    if (!st) st = ox_session_run(r->s, inputs, n_inputs, outs);
    if (!st && keep != KEEP_OUTPUTS) st = collect(g, keep == KEEP_COMPUTED, r);
    for (int k = 0; !st && keep == KEEP_OUTPUTS && k < g->n_outputs; k++)
        st = keep_value(r, outs[k], g->values[g->outputs[k]].name);
    free(outs);
    if (!st && !borrowed) { /* the copies stand alone */
        ox_session_free(r->s);
        ox_model_free(r->copy);
        r->s = NULL, r->copy = NULL;
    }
    if (st) run_free(r);
    return st;
}

ox_status ox_model_run_all(ox_model *m, const ox_tensor *inputs, int n_inputs, int n_threads,
                           ox_tensor **values, int *n_values) {
    if (!m || !values || !n_values) return ox_err(OX_E_INVALID, "ox_model_run_all: NULL argument");
    struct run r;
    ox_status st = run_values(m, inputs, n_inputs, &(ox_session_options){.n_threads = n_threads},
                              KEEP_ALL, false, &r);
    *values = st ? NULL : r.vals;
    *n_values = st ? 0 : r.n;
    return st;
}

void ox_values_free(ox_tensor *values, int n_values) {
    if (!values) return;
    for (int i = 0; i < n_values; i++) {
        free((char *)values[i].name);
        ox_tensor_free_data(&values[i]);
    }
    free(values);
}

/* ---- one side's values ------------------------------------------------------------------ */

/* The tensors of a side in its order, with an index by name. `own` holds a model's run. */
struct side {
    const char *label;
    struct run run;
    const ox_tensor **t; /* the side's tensors, in order */
    int n;
    const ox_tensor **by_name; /* t sorted by name */
};

static int cmp_name(const void *pa, const void *pb) {
    const ox_tensor *a = *(const ox_tensor *const *)pa, *b = *(const ox_tensor *const *)pb;
    return strcmp(a->name, b->name);
}

static const ox_tensor *side_find(const struct side *sd, const char *name) {
    ox_tensor key = {.name = name};
    const ox_tensor *kp = &key,
                    **hit = bsearch(&kp, sd->by_name, (size_t)sd->n, sizeof *sd->by_name, cmp_name);
    return hit ? *hit : NULL;
}

static bool is_output_of(const struct ox_graph *g, const char *name) {
    int v = ox_graph_find_value(g, name);
    for (int k = 0; v >= 0 && k < g->n_outputs; k++)
        if (g->outputs[k] == v) return true;
    return false;
}

static void side_free(struct side *sd) {
    run_free(&sd->run);
    free(sd->t);
    free(sd->by_name);
    memset(sd, 0, sizeof *sd);
}

/* Run the side's model (or take its values); keep named tensors, only the graph outputs
 * of `outputs_of` when it is set. */
static ox_status side_load(const ox_compare_side *cs, const ox_compare_options *o,
                           const struct ox_graph *outputs_of, struct side *sd) {
    memset(sd, 0, sizeof *sd);
    sd->label = cs->label ? cs->label : "?";
    const ox_tensor *src = cs->values;
    int n_src = cs->n_values;
    if (cs->model) {
        enum keep keep = o->outputs_only ? KEEP_OUTPUTS : KEEP_COMPUTED;
        ox_session_options so = {
            .n_threads = cs->n_threads, .device = cs->device, .precision = cs->precision};
        ox_status st = run_values(cs->model, o->inputs, o->n_inputs, &so, keep, true, &sd->run);
        if (st) return ox_err_prefix(st, "side %s: ", sd->label);
        src = sd->run.vals;
        n_src = sd->run.n;
    }
    sd->t = calloc((size_t)n_src + 1, sizeof *sd->t);
    sd->by_name = calloc((size_t)n_src + 1, sizeof *sd->by_name);
    if (!sd->t || !sd->by_name) {
        side_free(sd);
        return ox_err(OX_E_NOMEM, "out of memory");
    }
    for (int i = 0; i < n_src; i++) {
        const ox_tensor *t = &src[i];
        if (!t->name || t->kind != OX_IO_TENSOR) continue;
        if (outputs_of && !is_output_of(outputs_of, t->name)) continue;
        sd->t[sd->n] = sd->by_name[sd->n] = t;
        sd->n++;
    }
    qsort(sd->by_name, (size_t)sd->n, sizeof *sd->by_name, cmp_name);
    return OX_OK;
}

/* ---- metrics ----------------------------------------------------------------------------- */

static bool is_complex(ox_dtype dt) {
    return dt == OX_COMPLEX64 || dt == OX_COMPLEX128;
}

static bool is_floating(ox_dtype dt) {
    return ox_dtype_is_float(dt) || is_complex(dt);
}

/* The tolerances for a value of type dt: the options', else the type's defaults (other
 * narrow floats, float8 and float4: 1e-1 / 1e-1; complex as its parts). Exact otherwise. */
static void tolerances(ox_dtype dt, const ox_compare_options *o, double *rtol, double *atol) {
    double r = 0, a = 0;
    switch (dt) {
    case OX_FLOAT:
    case OX_COMPLEX64: r = 1e-4, a = 1e-6; break;
    case OX_FLOAT16: r = 1e-2, a = 1e-3; break;
    case OX_BFLOAT16: r = 2e-2, a = 1e-2; break;
    case OX_DOUBLE:
    case OX_COMPLEX128: r = 1e-10, a = 1e-12; break;
    default:
        if (!is_floating(dt)) { /* compared exactly */
            *rtol = *atol = 0;
            return;
        }
        r = a = 1e-1;
    }
    *rtol = o->rtol > 0 ? o->rtol : r;
    *atol = o->atol > 0 ? o->atol : a;
}

/* Component i of a tensor (complex numbers count as two components). */
static double component(const ox_tensor *t, int64_t i) {
    if (t->dtype == OX_COMPLEX64) return ((const float *)t->data)[i];
    if (t->dtype == OX_COMPLEX128) return ((const double *)t->data)[i];
    return ox_tensor_get(t, i);
}

/* The bit pattern of component i mapped to an integer that orders like the value (so that
 * adjacent floats differ by 1, and -0 and +0 meet at 0); false for types without ULPs here. */
static bool ordered_bits(const ox_tensor *t, int64_t i, int64_t *out) {
    uint64_t u;
    int bits;
    switch (t->dtype) {
    case OX_FLOAT: {
        uint32_t w;
        memcpy(&w, (const char *)t->data + i * 4, 4);
        u = w, bits = 32;
        break;
    }
    case OX_FLOAT16:
    case OX_BFLOAT16: {
        uint16_t w;
        memcpy(&w, (const char *)t->data + i * 2, 2);
        u = w, bits = 16;
        break;
    }
    case OX_DOUBLE: memcpy(&u, (const char *)t->data + i * 8, 8), bits = 64; break;
    default: return false;
    }
    uint64_t sign = (uint64_t)1 << (bits - 1);
    *out = (u & sign) ? -(int64_t)(u & (sign - 1)) : (int64_t)u;
    return true;
}

/* The k-th smallest of v[0..n) (0-based), moving it to v[k]: smaller ones before it,
 * larger ones after (Hoare's selection). */
static double select_kth(double *v, int64_t n, int64_t k) {
    int64_t lo = 0, hi = n - 1;
    while (lo < hi) {
        double pivot = v[lo + (hi - lo) / 2];
        int64_t i = lo, j = hi;
        while (i <= j) {
            while (v[i] < pivot) i++;
            while (v[j] > pivot) j--;
            if (i <= j) {
                double t = v[i];
                v[i++] = v[j];
                v[j--] = t;
            }
        }
        if (k <= j)
            hi = j;
        else if (k >= i)
            lo = i;
        else
            return v[k];
    }
    return v[k];
}

/* Quantile q of v[0..n), interpolated linearly between order statistics (numpy's default). */
static double quantile(double *v, int64_t n, double q) {
    if (n == 0) return 0;
    double pos = q * (double)(n - 1);
    int64_t lo = (int64_t)floor(pos);
    double a = select_kth(v, n, lo);
    if (pos == (double)lo) return a;
    double b = INFINITY; /* the next order statistic: the smallest after v[lo] */
    for (int64_t i = lo + 1; i < n; i++)
        if (v[i] < b) b = v[i];
    return a + (b - a) * (pos - (double)lo);
}

static bool same_shape(const ox_tensor *a, const ox_tensor *b) {
    return a->dtype == b->dtype && a->rank == b->rank &&
           memcmp(a->dims, b->dims, sizeof(int64_t) * (size_t)a->rank) == 0;
}

/* Fill cv's metrics for the tensors a and b (same type and shape). Elements that are not
 * finite on both sides are counted (NaN, Inf) and left out of the other metrics; one that
 * is non-finite on one side only, or a different infinity, makes *bad. */
static ox_status metrics(const ox_tensor *a, const ox_tensor *b, ox_compare_value *cv,
                         int64_t *bad) {
    int64_t n = ox_tensor_numel(a) * (is_complex(a->dtype) ? 2 : 1);
    cv->n = n;
    *bad = 0;
    if (a->dtype == OX_STRING) {
        const char *const *sa = a->data, *const *sb = b->data;
        for (int64_t i = 0; i < n; i++)
            cv->n_mismatch += strcmp(sa[i] ? sa[i] : "", sb[i] ? sb[i] : "") != 0;
        return OX_OK;
    }
    size_t w = ox_dtype_size(a->dtype) / (is_complex(a->dtype) ? 2 : 1);
    const char *pa = a->data, *pb = b->data;
    /* |a - b| per finite element, kept for the quantiles when the data differ */
    double *diffs = NULL;
    if (n > 0 && memcmp(pa, pb, (size_t)n * w) != 0) {
        diffs = malloc(sizeof *diffs * (size_t)n);
        if (!diffs) return ox_err(OX_E_NOMEM, "out of memory for %lld differences", (long long)n);
    }
    double sd = 0, sa = 0, sb = 0, dot = 0;
    int64_t n_diffs = 0;
    for (int64_t i = 0; i < n; i++) {
        double x = component(a, i), y = component(b, i);
        bool nx = isnan(x), ny = isnan(y);
        cv->nan_a += nx, cv->nan_b += ny;
        cv->inf_a += isinf(x), cv->inf_b += isinf(y);
        if (memcmp(pa + (size_t)i * w, pb + (size_t)i * w, w) != 0 && !(nx && ny)) cv->n_mismatch++;
        if (!isfinite(x) || !isfinite(y)) {
            if (!(nx && ny) && x != y) (*bad)++;
            continue;
        }
        double d = fabs(x - y), m = fmax(fabs(x), fabs(y));
        if (d > cv->max_abs) cv->max_abs = d;
        if (m > 0 && d / m > cv->max_rel) cv->max_rel = d / m;
        sd += d * d, sa += x * x, sb += y * y, dot += x * y;
        int64_t ox, oy;
        if (d > 0 && ordered_bits(a, i, &ox) && ordered_bits(b, i, &oy)) {
            double u = fabs((double)ox - (double)oy);
            if (u > cv->max_ulp) cv->max_ulp = u;
        }
        if (diffs) diffs[n_diffs++] = d;
    }
    cv->rel_l2 = sa > 0 ? sqrt(sd) / sqrt(sa) : sqrt(sd);
    if (sa == 0 && sb == 0)
        cv->cosine = 1;
    else if (sa > 0 && sb > 0)
        cv->cosine = fmax(-1, fmin(1, dot / (sqrt(sa) * sqrt(sb))));
    if (diffs) {
        cv->q50 = quantile(diffs, n_diffs, 0.50);
        cv->q90 = quantile(diffs, n_diffs, 0.90);
        cv->q99 = quantile(diffs, n_diffs, 0.99);
        free(diffs);
    }
    return OX_OK;
}

/* Compare a value the sides share: shape, metrics, verdict. */
static ox_status compare_value(const ox_tensor *a, const ox_tensor *b, const ox_compare_options *o,
                               ox_dtype reduced, ox_compare_value *cv) {
    cv->dtype = a->dtype;
    cv->rank = a->rank;
    memcpy(cv->dims, a->dims, sizeof(int64_t) * (size_t)a->rank);
    /* a side that computed in float16 (or TF32) is held to float16's tolerances, one in
     * bfloat16 to bfloat16's */
    tolerances(reduced && a->dtype == OX_FLOAT ? reduced : a->dtype, o, &cv->rtol, &cv->atol);
    cv->cosine = cv->dtype == OX_STRING ? 1 : 0;
    if (!same_shape(a, b)) {
        cv->shape_mismatch = cv->diverges = true;
        cv->max_abs = cv->max_rel = cv->rel_l2 = cv->cosine = cv->max_ulp = NAN;
        cv->q50 = cv->q90 = cv->q99 = NAN;
        return OX_OK;
    }
    int64_t bad;
    ox_status st = metrics(a, b, cv, &bad);
    if (st) return st;
    if (is_floating(a->dtype))
        cv->diverges = bad > 0 || (cv->rel_l2 > cv->rtol && cv->max_abs > cv->atol);
    else
        cv->diverges = cv->n_mismatch > 0;
    return OX_OK;
}

/* ---- describing nodes -------------------------------------------------------------------- */

/* A growing string; `failed` after an allocation failed. */
struct sbuf {
    char *s;
    size_t len, cap;
    bool failed;
};

__attribute__((format(printf, 2, 3))) static void sb_printf(struct sbuf *b, const char *fmt, ...) {
    if (b->failed) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->failed = true;
            return;
        }
        if (b->s && b->len + (size_t)k < b->cap) {
            b->len += (size_t)k;
            return;
        }
        size_t cap = (b->cap ? b->cap * 2 : 128) + (size_t)k;
        char *s = realloc(b->s, cap);
        if (!s) {
            b->failed = true;
            return;
        }
        b->s = s;
        b->cap = cap;
    }
}

#define MAX_LIST 8 /* list attributes show this many elements, then "..." */

static void sb_tensor_type(struct sbuf *b, const ox_tensor *t) {
    char buf[256];
    sb_printf(b, "%s", ox_tensor_desc(t, buf, sizeof buf));
}

static void sb_attr(struct sbuf *b, const struct ox_attr *a) {
    sb_printf(b, "%s=", a->name);
    switch (a->type) {
    case OX_ATTR_FLOAT: sb_printf(b, "%g", a->f); return;
    case OX_ATTR_INT: sb_printf(b, "%lld", (long long)a->i); return;
    case OX_ATTR_STRING:
        sb_printf(b, "'%.*s%s'", (int)(a->s_len > 40 ? 40 : a->s_len), a->s ? a->s : "",
                  a->s_len > 40 ? "..." : "");
        return;
    case OX_ATTR_TENSOR:
        if (a->t) sb_tensor_type(b, a->t);
        return;
    case OX_ATTR_GRAPH: sb_printf(b, "<graph>"); return;
    case OX_ATTR_SPARSE_TENSOR: sb_printf(b, "<sparse>"); return;
    case OX_ATTR_TYPE_PROTO: sb_printf(b, "<type>"); return;
    default: break;
    }
    sb_printf(b, "[");
    for (int k = 0; k < a->n && k < MAX_LIST; k++) {
        if (k) sb_printf(b, ",");
        switch (a->type) {
        case OX_ATTR_FLOATS: sb_printf(b, "%g", a->floats[k]); break;
        case OX_ATTR_INTS: sb_printf(b, "%lld", (long long)a->ints[k]); break;
        case OX_ATTR_STRINGS: sb_printf(b, "'%s'", a->strings[k] ? a->strings[k] : ""); break;
        case OX_ATTR_TENSORS:
            if (a->tensors && a->tensors[k]) sb_tensor_type(b, a->tensors[k]);
            break;
        case OX_ATTR_GRAPHS: sb_printf(b, "<graph>"); break;
        case OX_ATTR_SPARSE_TENSORS: sb_printf(b, "<sparse>"); break;
        default: sb_printf(b, "<type>"); break;
        }
    }
    sb_printf(b, "%s]", a->n > MAX_LIST ? ",..." : "");
}

/* The type and shape of graph value v: as the reference run has it, else as the graph
 * declares it ("?" for what is unknown). */
static void sb_value_type(struct sbuf *b, const struct ox_graph *g, int v, const struct side *ref) {
    const ox_tensor *t = ref ? side_find(ref, g->values[v].name) : NULL;
    if (t) {
        sb_tensor_type(b, t);
        return;
    }
    const struct ox_value *val = &g->values[v];
    sb_printf(b, "%s", ox_dtype_name(val->dtype));
    if (val->rank < 0) {
        sb_printf(b, "[?]");
        return;
    }
    sb_printf(b, "[");
    for (int d = 0; d < val->rank; d++) {
        if (val->dims[d].value >= 0)
            sb_printf(b, "%s%lld", d ? "," : "", (long long)val->dims[d].value);
        else
            sb_printf(b, "%s%s", d ? "," : "", val->dims[d].symbol ? val->dims[d].symbol : "?");
    }
    sb_printf(b, "]");
}

/* "name (Op): attr=value, ...; inputs: float[1,3,224,224] x, ..." for node i (malloc'd). */
static char *node_desc(const struct ox_graph *g, int i, const struct side *ref) {
    const struct ox_node *n = &g->nodes[i];
    struct sbuf b = {0};
    if (n->name && *n->name)
        sb_printf(&b, "%s (", n->name);
    else
        sb_printf(&b, "op #%d (", i);
    sb_printf(&b, "%s%s%s)", n->domain[0] ? n->domain : "", n->domain[0] ? ":" : "", n->op_type);
    for (int k = 0; k < n->n_attrs; k++) {
        sb_printf(&b, k ? ", " : ": ");
        sb_attr(&b, &n->attrs[k]);
    }
    sb_printf(&b, "; inputs: ");
    for (int k = 0; k < n->n_inputs; k++) {
        if (k) sb_printf(&b, ", ");
        int v = n->inputs[k];
        if (v < 0) {
            sb_printf(&b, "-");
            continue;
        }
        sb_value_type(&b, g, v, ref);
        sb_printf(&b, " %s", g->values[v].name);
    }
    if (b.failed) free(b.s);
    return b.failed ? NULL : b.s;
}

/* Name, producer and description of value cv->name in the reference graph. */
static ox_status describe(const struct ox_graph *g, const struct side *ref, ox_compare_value *cv) {
    int v = ox_graph_find_value(g, cv->name);
    if (v < 0) return OX_OK;
    cv->is_output = is_output_of(g, cv->name);
    int p = g->values[v].producer;
    if (p < 0) return OX_OK;
    const struct ox_node *n = &g->nodes[p];
    char unnamed[32];
    snprintf(unnamed, sizeof unnamed, "op #%d", p);
    cv->node = strdup(n->name && *n->name ? n->name : unnamed);
    cv->op = strdup(n->op_type);
    cv->node_desc = node_desc(g, p, ref);
    if (!cv->node || !cv->op || !cv->node_desc) return ox_err(OX_E_NOMEM, "out of memory");
    return OX_OK;
}

/* ---- the path of the error ------------------------------------------------------------- */

/* How bad value i of the report is, for picking the worst: diverging first, then by
 * relative L2 error (values without metrics count as the worst). */
static double badness(const ox_compare_report *r, int i) {
    if (i < 0) return -1;
    const ox_compare_value *cv = &r->values[i];
    double e = isnan(cv->rel_l2) ? INFINITY : cv->rel_l2;
    return cv->diverges ? 1 + e : e / (1 + e);
}

/* From the first divergent value forward through the reference graph to the graph output
 * it reaches with the largest error. One sweep in node order marks what the value reaches;
 * each reached value remembers the worst reached input of its node, so the path follows
 * the branch that carries the most error. */
static ox_status error_path(const struct ox_graph *g, ox_compare_report *r) {
    int start = ox_graph_find_value(g, r->values[r->first_divergent].name);
    int *idx = malloc(sizeof(int) * ((size_t)g->n_values + 1) * 2);
    if (!idx) return ox_err(OX_E_NOMEM, "out of memory");
    int *from = idx + g->n_values + 1; /* -2: not reached; -1: the start */
    for (int v = 0; v < g->n_values; v++) idx[v] = -1, from[v] = -2;
    for (int i = 0; i < r->n_values; i++) {
        int v = ox_graph_find_value(g, r->values[i].name);
        if (v >= 0) idx[v] = i;
    }
    int target = start;
    if (start >= 0) {
        from[start] = -1;
        for (int i = 0; i < g->n_nodes; i++) {
            const struct ox_node *n = &g->nodes[i];
            int via = -1;
            for (int k = 0; k < n->n_inputs; k++) {
                int u = n->inputs[k];
                if (u >= 0 && from[u] != -2 &&
                    (via < 0 || badness(r, idx[u]) > badness(r, idx[via])))
                    via = u;
            }
            for (int k = 0; via >= 0 && k < n->n_outputs; k++)
                if (n->outputs[k] >= 0 && from[n->outputs[k]] == -2) from[n->outputs[k]] = via;
        }
        for (int k = 0; k < g->n_outputs; k++) {
            int o = g->outputs[k];
            if (from[o] != -2 && idx[o] >= 0 &&
                (target == start || badness(r, idx[o]) > badness(r, idx[target])))
                target = o;
        }
    }
    int n_path = 0;
    r->path = malloc(sizeof(int) * ((size_t)g->n_values + 1));
    if (!r->path) {
        free(idx);
        return ox_err(OX_E_NOMEM, "out of memory");
    }
    if (start < 0) {
        r->path[n_path++] = r->first_divergent;
    } else {
        for (int v = target; v >= 0; v = from[v])
            if (idx[v] >= 0) r->path[n_path++] = idx[v];
        for (int i = 0; i < n_path / 2; i++) { /* start first */
            int t = r->path[i];
            r->path[i] = r->path[n_path - 1 - i];
            r->path[n_path - 1 - i] = t;
        }
    }
    r->n_path = n_path;
    free(idx);
    return OX_OK;
}

/* ---- comparing ----------------------------------------------------------------------------- */

ox_status ox_compare(const ox_compare_side *a, const ox_compare_side *b,
                     const ox_compare_options *opt, ox_compare_report *report) {
    static const ox_compare_options defaults;
    memset(report, 0, sizeof *report);
    report->first_divergent = -1;
    if (!opt) opt = &defaults;
    const ox_compare_side *sides[2] = {a, b};
    for (int k = 0; k < 2; k++) {
        const ox_compare_side *c = sides[k];
        const char *label = c && c->label ? c->label : (k ? "b" : "a");
        if (!c || (!c->model && !(c->values && c->n_values > 0)))
            return ox_err(OX_E_INVALID, "compare: side %s has neither a model nor values", label);
    }
    ox_dtype reduced = OX_UNDEFINED; /* a side ran below float32's precision: the type */
    for (int k = 0; k < 2; k++)
        if (sides[k]->model && sides[k]->device && sides[k]->precision != 0 &&
            reduced != OX_BFLOAT16)
            reduced = sides[k]->precision == OX_PRECISION_BF16 ? OX_BFLOAT16 : OX_FLOAT16;
    /* the reference: the first side that is a model */
    int ref = a->model ? 0 : b->model ? 1 : 0;
    const struct ox_graph *g = sides[ref]->model ? ox_model_graph(sides[ref]->model) : NULL;
    const struct ox_graph *outputs_of = opt->outputs_only ? g : NULL;
    struct side sd[2];
    ox_status st = side_load(a, opt, outputs_of, &sd[0]);
    if (st) return st;
    if ((st = side_load(b, opt, outputs_of, &sd[1]))) {
        side_free(&sd[0]);
        return st;
    }
    const struct side *rs = &sd[ref], *os = &sd[1 - ref];
    report->values = calloc((size_t)rs->n + 1, sizeof *report->values);
    if (!report->values) st = ox_err(OX_E_NOMEM, "out of memory");
    for (int i = 0; !st && i < rs->n; i++) {
        const ox_tensor *o = side_find(os, rs->t[i]->name);
        if (!o) continue;
        const ox_tensor *ta = ref == 0 ? rs->t[i] : o, *tb = ref == 0 ? o : rs->t[i];
        ox_compare_value *cv = &report->values[report->n_values++];
        cv->name = strdup(rs->t[i]->name);
        if (!cv->name) st = ox_err(OX_E_NOMEM, "out of memory");
        if (!st) st = compare_value(ta, tb, opt, reduced, cv);
        if (!st && g) st = describe(g, rs, cv);
        if (!st && !g) cv->is_output = true; /* no graph to tell: every value counts */
        if (st) break;
        if (cv->diverges && report->first_divergent < 0)
            report->first_divergent = report->n_values - 1;
        if (cv->diverges && cv->is_output) report->outputs_diverge = true;
    }
    for (int i = 0; !st && i < sd[0].n; i++)
        report->n_only_a += !side_find(&sd[1], sd[0].t[i]->name);
    for (int i = 0; !st && i < sd[1].n; i++)
        report->n_only_b += !side_find(&sd[0], sd[1].t[i]->name);
    if (!st && report->n_values == 0)
        st = ox_err(OX_E_INVALID, "compare: %s and %s have no value in common (%d and %d values)",
                    sd[0].label, sd[1].label, sd[0].n, sd[1].n);
    if (!st && report->first_divergent >= 0) {
        if (g) {
            st = error_path(g, report);
        } else if ((report->path = malloc(sizeof(int)))) {
            report->path[report->n_path++] = report->first_divergent;
        } else {
            st = ox_err(OX_E_NOMEM, "out of memory");
        }
    }
    side_free(&sd[0]);
    side_free(&sd[1]);
    if (st) ox_compare_report_free(report);
    return st;
}

void ox_compare_report_free(ox_compare_report *report) {
    if (!report) return;
    for (int i = 0; i < report->n_values; i++) {
        free(report->values[i].name);
        free(report->values[i].node);
        free(report->values[i].op);
        free(report->values[i].node_desc);
    }
    free(report->values);
    free(report->path);
    memset(report, 0, sizeof *report);
    report->first_divergent = -1;
}

/* ---- reducing to one node ------------------------------------------------------------------ */

static const ox_tensor *find_given(const ox_tensor *values, int n_values, const char *name) {
    for (int i = 0; i < n_values; i++)
        if (values[i].name && strcmp(values[i].name, name) == 0) return &values[i];
    return NULL;
}

/* Give value v of graph r the type and shape of t. */
static ox_status set_type(struct ox_graph *r, int v, const ox_tensor *t) {
    struct ox_value *val = &r->values[v];
    val->kind = OX_KIND_TENSOR;
    val->dtype = t->dtype;
    val->rank = t->rank;
    val->dims = ox_graph_alloc(r, sizeof *val->dims * (size_t)(t->rank + 1));
    if (!val->dims) return ox_err(OX_E_NOMEM, "out of memory");
    for (int d = 0; d < t->rank; d++) val->dims[d].value = t->dims[d];
    return OX_OK;
}

/* mkdir -p */
static ox_status make_dirs(const char *dir) {
    char path[4096];
    if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path)
        return ox_err(OX_E_IO, "folder name too long: %s", dir);
    for (char *s = path + 1;; s++) {
        if (*s != '/' && *s) continue;
        char c = *s;
        *s = 0;
        if (mkdir(path, 0777) != 0 && errno != EEXIST)
            return ox_err(OX_E_IO, "cannot create folder '%s': %s", path, strerror(errno));
        if (!c) return OX_OK;
        *s = c;
    }
}

/* The node copied into r: names and lists stay borrowed from the source graph (it outlives
 * r); tensor attributes are copied, since r frees them. */
static ox_status copy_node(struct ox_graph *r, const struct ox_node *n, const int *in,
                           const int *out) {
    struct ox_node *c =
        ox_graph_add_node(r, n->name, n->domain, n->op_type, n->n_inputs, in, n->n_outputs, out);
    if (!c) return ox_err(OX_E_NOMEM, "out of memory");
    c->opset = n->opset;
    c->attrs = ox_graph_alloc(r, sizeof *c->attrs * (size_t)(n->n_attrs + 1));
    if (!c->attrs) return ox_err(OX_E_NOMEM, "out of memory");
    for (int k = 0; k < n->n_attrs; k++) {
        struct ox_attr *a = &c->attrs[c->n_attrs++];
        *a = n->attrs[k];
        a->tensors = NULL;
        if (a->t) {
            ox_tensor *t = ox_graph_alloc(r, sizeof *t);
            a->t = NULL;
            if (!t || ox_tensor_copy(t, n->attrs[k].t)) return ox_err(OX_E_NOMEM, "out of memory");
            a->t = t;
        }
        if (n->attrs[k].tensors) {
            a->tensors = ox_graph_alloc(r, sizeof *a->tensors * (size_t)(a->n + 1));
            if (!a->tensors) return ox_err(OX_E_NOMEM, "out of memory");
            for (int j = 0; j < a->n; j++) {
                ox_tensor *t = ox_graph_alloc(r, sizeof *t);
                if (!t || ox_tensor_copy(t, n->attrs[k].tensors[j]))
                    return ox_err(OX_E_NOMEM, "out of memory");
                a->tensors[j] = t;
            }
        }
    }
    return OX_OK;
}

/* Build the one-node graph of node p into r; its computed inputs go to ins[] (borrowed). */
static ox_status reduced_graph(const struct ox_graph *g, const struct ox_node *n,
                               const ox_tensor *values, int n_values, const char *value_name,
                               struct ox_graph *r, const ox_tensor **ins) {
    int *in = calloc((size_t)(n->n_inputs + n->n_outputs) + 1, sizeof(int)),
        *out = in + n->n_inputs;
    if (!in) return ox_err(OX_E_NOMEM, "out of memory");
    ox_status st = OX_OK;
    for (int k = 0; !st && k < n->n_inputs; k++) {
        in[k] = -1;
        if (n->inputs[k] < 0) continue;
        const struct ox_value *sv = &g->values[n->inputs[k]];
        bool seen = ox_graph_find_value(r, sv->name) >= 0;
        if ((in[k] = ox_graph_add_value(r, sv->name)) < 0) st = ox_err(OX_E_NOMEM, "out of memory");
        if (st || seen) continue;
        /* constants: initializers (those that are inputs too, as IR 3 lists them, with the
         * data of the run) and Constant outputs */
        const ox_tensor *cap = find_given(values, n_values, sv->name), *c = NULL;
        if (sv->init)
            c = cap ? cap : sv->init;
        else if (sv->producer >= 0 && !strcmp(g->nodes[sv->producer].op_type, "Constant") &&
                 !g->nodes[sv->producer].domain[0])
            c = cap;
        const ox_tensor *t = c ? c : cap;
        if (!t) {
            st = ox_err(OX_E_INVALID,
                        "reduce: input '%s' of node '%s' (%s) is not among the "
                        "captured values",
                        sv->name, n->name, n->op_type);
            break;
        }
        if ((st = set_type(r, in[k], t))) break;
        if (c) { /* a constant: an initializer showing the source's data */
            ox_tensor *it = ox_graph_alloc(r, sizeof *it);
            if (!it)
                st = ox_err(OX_E_NOMEM, "out of memory");
            else
                *it = *c, it->name = NULL;
            r->values[in[k]].init = it;
            r->values[in[k]].init_borrowed = true;
        } else {
            ins[r->n_inputs] = t;
            st = ox_graph_add_input(r, in[k]);
        }
    }
    for (int k = 0; !st && k < n->n_outputs; k++) {
        out[k] = n->outputs[k] < 0 ? -1 : ox_graph_add_value(r, g->values[n->outputs[k]].name);
        if (n->outputs[k] >= 0 && out[k] < 0) st = ox_err(OX_E_NOMEM, "out of memory");
    }
    if (!st) {
        int y = ox_graph_find_value(r, value_name);
        const ox_tensor *t = find_given(values, n_values, value_name);
        if (!t)
            st = ox_err(OX_E_INVALID, "reduce: value '%s' is not among the captured values",
                        value_name);
        if (!st) st = set_type(r, y, t);
        if (!st) st = ox_graph_add_output(r, y);
    }
    if (!st) st = copy_node(r, n, in, out);
    free(in);
    return st;
}

ox_status ox_compare_reduce(const ox_model *model, const ox_tensor *values, int n_values,
                            const char *value_name, const char *dir) {
    const struct ox_graph *g = ox_model_graph(model);
    int v = value_name ? ox_graph_find_value(g, value_name) : -1;
    if (v < 0 || g->values[v].producer < 0)
        return ox_err(OX_E_INVALID, "reduce: no node of the model produces value '%s'",
                      value_name ? value_name : "(null)");
    const struct ox_node *n = &g->nodes[g->values[v].producer];
    for (int k = 0; k < n->n_attrs; k++)
        if (n->attrs[k].type == OX_ATTR_GRAPH || n->attrs[k].type == OX_ATTR_GRAPHS)
            return ox_err(OX_E_UNSUPPORTED,
                          "reduce: node '%s' (%s) holds a subgraph (attribute "
                          "'%s'); a one-node case cannot stand without its outer values",
                          n->name, n->op_type, n->attrs[k].name);
    struct ox_graph *r = ox_graph_create(NULL);
    const ox_tensor **ins = calloc((size_t)n->n_inputs + 1, sizeof *ins);
    if (!r || !ins) {
        ox_graph_free(r);
        free(ins);
        return ox_err(OX_E_NOMEM, "out of memory");
    }
    r->name = "reduced";
    /* IR 3 wants every initializer listed as an input too: IR 4 is the first without */
    r->ir_version = g->ir_version < 4 ? 4 : g->ir_version;
    r->opsets = g->opsets; /* borrowed from the source, which outlives r */
    r->n_opsets = g->n_opsets;
    r->producer_name = "onnxexec compare";
    ox_status st = reduced_graph(g, n, values, n_values, value_name, r, ins);
    char path[4096];
    if (!st && snprintf(path, sizeof path, "%s/test_data_set_0", dir) >= (int)sizeof path)
        st = ox_err(OX_E_IO, "folder name too long: %s", dir);
    if (!st) st = make_dirs(path);
    if (!st) {
        snprintf(path, sizeof path, "%s/model.onnx", dir);
        st = ox_onnx_export_file(r, path, NULL);
    }
    for (int k = 0; !st && k <= r->n_inputs; k++) {
        int y = r->outputs[0];
        const ox_tensor *t = k < r->n_inputs ? ins[k] : find_given(values, n_values, value_name);
        if (k < r->n_inputs)
            snprintf(path, sizeof path, "%s/test_data_set_0/input_%d.pb", dir, k);
        else
            snprintf(path, sizeof path, "%s/test_data_set_0/output_0.pb", dir);
        st = ox_tensor_write_pb(path, t,
                                k < r->n_inputs ? r->values[r->inputs[k]].name : r->values[y].name);
    }
    ox_graph_free(r);
    free(ins);
    return st;
}
