/* ox_gradcheck: gradients against central finite differences (onnxexec.h says the contract). */
#include "executor/session.h"
#include "graph/ir.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double rng_unit(uint64_t *s) {
    return ((double)(rng_next(s) >> 11) + 0.5) / 9007199254740992.0;
}

static double rng_normal(uint64_t *s) {
    double u = rng_unit(s), v = rng_unit(s);
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

static bool is_float(ox_dtype dt) {
    return dt == OX_FLOAT || dt == OX_DOUBLE || dt == OX_FLOAT16 || dt == OX_BFLOAT16;
}

struct gc {
    ox_model *gm; /* the gradient model */
    ox_session *s;
    int n_bind;
    ox_tensor *bind; /* every input of gm that is bound: inputs, seeds, parameters */
    int n_out;       /* forward outputs with seeds */
    int *out_idx;    /* their index among gm's outputs */
    int *seed_bind;  /* their seed's index in bind */
};

static void gc_free(struct gc *c) {
    for (int i = 0; i < c->n_bind; i++) ox_tensor_free_data(&c->bind[i]);
    free(c->bind);
    free(c->out_idx);
    free(c->seed_bind);
    ox_session_free(c->s);
    ox_model_free(c->gm);
}

/* L = sum over differentiated outputs of seed * output, in double. */
static ox_status loss(struct gc *c, double *out) {
    const ox_tensor **outs = calloc((size_t)ox_model_n_outputs(c->gm) + 1, sizeof *outs);
    if (!outs) return ox_err(OX_E_NOMEM, "out of memory");
    ox_status st = ox_session_run(c->s, c->bind, c->n_bind, outs);
    double l = 0;
    for (int k = 0; !st && k < c->n_out; k++) {
        const ox_tensor *y = outs[c->out_idx[k]], *sd = &c->bind[c->seed_bind[k]];
        int64_t n = ox_tensor_numel(y);
        if (n != ox_tensor_numel(sd)) {
            st = ox_err(OX_E_SHAPE, "gradcheck: output '%s' changed shape", y->name ? y->name : "");
            break;
        }
        for (int64_t i = 0; i < n; i++) l += ox_tensor_get(sd, i) * ox_tensor_get(y, i);
    }
    free(outs);
    *out = l;
    return st;
}

static int find_bind(const struct gc *c, const char *name) {
    for (int i = 0; i < c->n_bind; i++)
        if (c->bind[i].name && strcmp(c->bind[i].name, name) == 0) return i;
    return -1;
}

ox_status ox_gradcheck(const ox_model *m, const ox_gradcheck_options *opt,
                       ox_gradcheck_report *rep) {
    memset(rep, 0, sizeof *rep);
    const struct ox_graph *fg = ox_model_graph(m);
    uint64_t rng = opt && opt->seed ? opt->seed : 1;
    int64_t sym = opt && opt->symbolic_dim > 0 ? opt->symbolic_dim : 2;
    int max_checks = opt && opt->max_checks > 0 ? opt->max_checks : 32;
    struct gc c = {0};
    ox_status st;
    /* the values to check: named, or every float input and initializer */
    int n_wrt = 0;
    const char **wrt =
        calloc((size_t)fg->n_values + (opt ? (size_t)opt->n_wrt : 0) + 1, sizeof *wrt);
    if (!wrt) return ox_err(OX_E_NOMEM, "out of memory");
    if (opt && opt->n_wrt > 0) {
        for (int i = 0; i < opt->n_wrt; i++) wrt[n_wrt++] = opt->wrt[i];
    } else {
        for (int i = 0; i < fg->n_inputs; i++) {
            const struct ox_value *v = &fg->values[fg->inputs[i]];
            if (!v->init && v->kind == OX_KIND_TENSOR && is_float(v->dtype)) wrt[n_wrt++] = v->name;
        }
        for (int v = 0; v < fg->n_values; v++) {
            const struct ox_value *val = &fg->values[v];
            if (val->init && val->init->kind == OX_IO_TENSOR && is_float(val->init->dtype))
                wrt[n_wrt++] = val->name;
        }
    }
    if (!n_wrt) {
        free(wrt);
        return ox_err(OX_E_INVALID, "gradcheck: the model has no float input or initializer");
    }
    /* the gradient model: a copy of m, differentiated */
    void *buf = NULL;
    size_t len = 0;
    ox_model_options lo = {.no_optimize = true, .limits = *ox_model_limits(m)};
    st = ox_model_save_buffer(m, &buf, &len);
    if (!st) st = ox_model_load_buffer_with(buf, len, NULL, &lo, &c.gm);
    free(buf);
    int n_fwd_out = ox_model_n_outputs(m);
    if (!st) {
        ox_grad_options go = {.wrt = wrt, .n_wrt = n_wrt};
        st = ox_model_gradient(c.gm, &go);
    }
    if (!st) st = ox_session_create(c.gm, NULL, &c.s);
    /* bind: every input without a default; parameters (wrt initializers) as copies */
    int n_in = st ? 0 : ox_model_n_inputs(c.gm);
    const struct ox_graph *gg = st ? NULL : ox_model_graph(c.gm);
    c.bind = calloc((size_t)n_in + 1, sizeof *c.bind);
    c.out_idx = calloc((size_t)n_fwd_out + 1, sizeof(int));
    c.seed_bind = calloc((size_t)n_fwd_out + 1, sizeof(int));
    if (!st && (!c.bind || !c.out_idx || !c.seed_bind)) st = ox_err(OX_E_NOMEM, "out of memory");
    for (int i = 0; !st && i < n_in; i++) {
        const struct ox_value *v = &gg->values[gg->inputs[i]];
        ox_tensor *t = &c.bind[c.n_bind];
        const ox_tensor *given = NULL;
        for (int k = 0; opt && k < opt->n_inputs; k++)
            if (opt->inputs[k].name && strcmp(opt->inputs[k].name, v->name) == 0)
                given = &opt->inputs[k];
        if (given) {
            st = ox_tensor_copy(t, given);
        } else if (v->init) {
            bool is_wrt = false;
            for (int k = 0; k < n_wrt; k++) is_wrt |= strcmp(wrt[k], v->name) == 0;
            if (!is_wrt) continue;
            st = ox_tensor_copy(t, v->init);
        } else {
            if (v->kind != OX_KIND_TENSOR || v->rank < 0) {
                st = ox_err(OX_E_UNSUPPORTED,
                            "gradcheck: input '%s' is not a tensor of known "
                            "rank: give it",
                            v->name);
                break;
            }
            int64_t dims[OX_MAX_RANK];
            for (int k = 0; k < v->rank; k++)
                dims[k] = v->dims[k].value >= 0 ? v->dims[k].value : sym;
            st = ox_tensor_alloc(t, v->dtype, v->rank, dims);
            if (!st && is_float(v->dtype))
                for (int64_t e = 0, n = ox_tensor_numel(t); e < n; e++)
                    ox_tensor_set(t, e, rng_normal(&rng));
        }
        if (st) break;
        t->name = v->name;
        c.n_bind++;
    }
    /* the seeds must match the outputs' shapes: run once, then size the seeds */
    for (int k = 0; !st && k < n_fwd_out; k++) {
        ox_tensor desc;
        ox_model_output(m, k, &desc, NULL);
        char name[300];
        snprintf(name, sizeof name, "%s_grad", desc.name);
        int b = find_bind(&c, name);
        if (b < 0) continue; /* not differentiated (not float) */
        c.out_idx[c.n_out] = k;
        c.seed_bind[c.n_out++] = b;
    }
    /* the seeds take the shapes of the outputs: run the forward model once */
    if (!st) {
        ox_session *fs = NULL;
        const ox_tensor **fo = calloc((size_t)n_fwd_out + 1, sizeof *fo);
        ox_tensor *fb = calloc((size_t)c.n_bind + 1, sizeof *fb);
        int n_fb = 0;
        if (!fo || !fb) st = ox_err(OX_E_NOMEM, "out of memory");
        for (int i = 0; !st && i < c.n_bind; i++)
            for (int k = 0; k < fg->n_inputs; k++)
                if (strcmp(fg->values[fg->inputs[k]].name, c.bind[i].name) == 0)
                    fb[n_fb++] = c.bind[i];
        if (!st) st = ox_session_create((ox_model *)m, NULL, &fs);
        if (!st) st = ox_session_run(fs, fb, n_fb, fo);
        for (int k = 0; !st && k < c.n_out; k++) {
            ox_tensor *sd = &c.bind[c.seed_bind[k]];
            const ox_tensor *y = fo[c.out_idx[k]];
            const char *nm = sd->name;
            ox_tensor_free_data(sd);
            st = ox_tensor_alloc(sd, y->dtype, y->rank, y->dims);
            sd->name = nm;
            for (int64_t e = 0, n = st ? 0 : ox_tensor_numel(sd); e < n; e++)
                ox_tensor_set(sd, e, rng_normal(&rng));
        }
        ox_session_free(fs);
        free(fo);
        free(fb);
    }
    /* analytic gradients */
    const ox_tensor **outs = NULL;
    ox_tensor *grads = NULL;
    if (!st) {
        outs = calloc((size_t)ox_model_n_outputs(c.gm) + 1, sizeof *outs);
        grads = calloc((size_t)n_wrt + 1, sizeof *grads);
        rep->values = calloc((size_t)n_wrt + 1, sizeof *rep->values);
        if (!outs || !grads || !rep->values) st = ox_err(OX_E_NOMEM, "out of memory");
    }
    if (!st) st = ox_session_run(c.s, c.bind, c.n_bind, outs);
    for (int w = 0; !st && w < n_wrt; w++) {
        char name[300];
        snprintf(name, sizeof name, "%s_grad", wrt[w]);
        int found = -1;
        for (int k = 0; k < ox_model_n_outputs(c.gm); k++) {
            ox_tensor d;
            ox_model_output(c.gm, k, &d, NULL);
            if (strcmp(d.name, name) == 0) found = k;
        }
        if (found < 0)
            st = ox_err(OX_E_INTERNAL, "gradcheck: no output '%s'", name);
        else
            st = ox_tensor_copy(&grads[w], outs[found]);
    }
    free(outs);
    /* numeric gradients */
    ox_dtype prec = OX_FLOAT;
    for (int w = 0; !st && w < n_wrt; w++) {
        int b = find_bind(&c, wrt[w]);
        if (b >= 0 && c.bind[b].dtype == OX_DOUBLE) prec = OX_DOUBLE;
    }
    bool dbl = prec == OX_DOUBLE;
    double eps = opt && opt->eps > 0 ? opt->eps
                 : dbl               ? 1e-6
                                     : 1e-3; /* float32: small enough to rarely cross a ReLU kink */
    double atol = opt && opt->atol > 0 ? opt->atol : dbl ? 1e-5 : 1e-2;
    double rtol = opt && opt->rtol > 0 ? opt->rtol : dbl ? 1e-3 : 2e-2;
    rep->eps = eps;
    rep->atol = atol;
    rep->rtol = rtol;
    rep->passed = true;
    for (int w = 0; !st && w < n_wrt; w++) {
        ox_gradcheck_value *r = &rep->values[rep->n_values++];
        r->name = strdup(wrt[w]);
        r->passed = true;
        if (!r->name) {
            st = ox_err(OX_E_NOMEM, "out of memory");
            break;
        }
        int b = find_bind(&c, wrt[w]);
        if (b < 0) {
            st = ox_err(OX_E_INVALID, "gradcheck: '%s' is not an input or initializer", wrt[w]);
            break;
        }
        ox_tensor *x = &c.bind[b];
        int64_t n = ox_tensor_numel(x);
        if (ox_tensor_numel(&grads[w]) != n) {
            st = ox_err(OX_E_INTERNAL,
                        "gradcheck: the gradient of '%s' has %lld elements, the "
                        "value %lld",
                        wrt[w], (long long)ox_tensor_numel(&grads[w]), (long long)n);
            break;
        }
        int checks = n < max_checks ? (int)n : max_checks;
        double worst = -1;
        for (int k = 0; k < checks && !st; k++) {
            int64_t e = n <= max_checks ? k : (int64_t)(rng_next(&rng) % (uint64_t)n);
            double x0 = ox_tensor_get(x, e), lp, lm;
            ox_tensor_set(x, e, x0 + eps);
            double xp = ox_tensor_get(x, e);
            st = loss(&c, &lp);
            ox_tensor_set(x, e, x0 - eps);
            double xm = ox_tensor_get(x, e);
            if (!st) st = loss(&c, &lm);
            ox_tensor_set(x, e, x0);
            if (st) break;
            double num = (lp - lm) / (xp - xm), ana = ox_tensor_get(&grads[w], e);
            double err = fabs(ana - num), scale = fmax(fabs(ana), fabs(num));
            double rel = err / fmax(scale, 1e-12);
            bool ok = err <= atol + rtol * scale && !isnan(ana) && !isnan(num);
            r->n_checked++;
            if (fabs(num) > r->max_abs_numeric) r->max_abs_numeric = fabs(num);
            if (err > r->max_abs_err || isnan(err)) r->max_abs_err = err;
            if (rel > r->max_rel_err || isnan(rel)) r->max_rel_err = rel;
            double badness = isnan(err) ? INFINITY : err / (atol + rtol * scale);
            if (badness > worst) {
                worst = badness;
                r->worst_index = e;
                r->analytic = ana;
                r->numeric = num;
            }
            if (!ok) r->passed = rep->passed = false;
        }
    }
    for (int w = 0; grads && w < n_wrt; w++) ox_tensor_free_data(&grads[w]);
    free(grads);
    free(wrt);
    gc_free(&c);
    if (st) ox_gradcheck_report_free(rep);
    return st;
}

void ox_gradcheck_report_free(ox_gradcheck_report *rep) {
    if (!rep) return;
    for (int i = 0; i < rep->n_values; i++) free(rep->values[i].name);
    free(rep->values);
    memset(rep, 0, sizeof *rep);
}
