/* Reverse-mode autograd: the walker, the rule kit and the Gradient operator (autograd.h). */
#include "graph/autograd.h"

#include "executor/plan.h"
#include "graph/opset.h"
#include "kernels/op.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the rule table -------------------------------------------------------------------- */

#define OX_GRAD(domain, type, fn, flags)                                                           \
    ox_status fn(struct ox_ad *, const struct ox_node *, const int *, int *);
#include "graph/grad_rules.def"
#undef OX_GRAD

static const struct ox_grad_rule {
    const char *domain, *type;
    ox_grad_rule_fn fn;
    unsigned flags;
} rules[] = {
#define OX_GRAD(domain, type, fn, flags) {domain, type, fn, flags},
#include "graph/grad_rules.def"
#undef OX_GRAD
};

/* Ops whose output is piecewise constant in its inputs: no gradient flows (Floor, Sign, ...). */
ox_status ox_grad_none(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    (void)ad, (void)n, (void)gy, (void)gx;
    return OX_OK;
}

static const struct ox_grad_rule *find_rule(const struct ox_node *n) {
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++)
        if (strcmp(rules[i].domain, n->domain) == 0 && strcmp(rules[i].type, n->op_type) == 0)
            return &rules[i];
    return NULL;
}

/* ---- state ----------------------------------------------------------------------------- */

/* What is known of a value: dims under two plans of the forward graph, with symbolic input
 * dims set to 2 (da) and to 3 (db). A dim equal in both is fixed. */
struct info {
    ox_dtype dtype;
    int rank; /* -1: unknown */
    int64_t da[OX_MAX_RANK], db[OX_MAX_RANK];
};

struct contrib {
    int n, cap;
    int *v;
};

struct ox_ad {
    struct ox_graph *g;
    int opset;
    ox_status err;
    int cap;              /* of the per-value arrays */
    struct info *info;    /* per value */
    bool *wants;          /* per value: depends on a wrt value */
    bool *reach;          /* per value: an `of` value depends on it */
    struct contrib *acc;  /* per value: gradient contributions */
    int *final;           /* per value: the summed gradient (-2: not yet summed) */
    const char *cur_name; /* forward node being differentiated (for node names) */
    int counter;
};

static bool grow(struct ox_ad *ad) {
    int need = ad->g->n_values;
    if (need <= ad->cap) return true;
    int cap = ad->cap ? ad->cap : 256;
    while (cap < need) cap *= 2;
    struct info *info = realloc(ad->info, sizeof *info * (size_t)cap);
    if (info) ad->info = info;
    bool *wants = realloc(ad->wants, sizeof *wants * (size_t)cap);
    if (wants) ad->wants = wants;
    bool *reach = realloc(ad->reach, sizeof *reach * (size_t)cap);
    if (reach) ad->reach = reach;
    struct contrib *acc = realloc(ad->acc, sizeof *acc * (size_t)cap);
    if (acc) ad->acc = acc;
    int *final = realloc(ad->final, sizeof *final * (size_t)cap);
    if (final) ad->final = final;
    if (!info || !wants || !reach || !acc || !final) {
        ad->err = ox_err(OX_E_NOMEM, "out of memory building the gradient graph");
        return false;
    }
    for (int v = ad->cap; v < cap; v++) {
        ad->info[v].dtype = OX_UNDEFINED;
        ad->info[v].rank = -1;
        ad->wants[v] = ad->reach[v] = false;
        ad->acc[v] = (struct contrib){0};
        ad->final[v] = -2;
    }
    ad->cap = cap;
    return true;
}

static void ad_free(struct ox_ad *ad) {
    for (int v = 0; v < ad->cap; v++) free(ad->acc[v].v);
    free(ad->info);
    free(ad->wants);
    free(ad->reach);
    free(ad->acc);
    free(ad->final);
}

static bool is_float(ox_dtype dt) {
    return dt == OX_FLOAT || dt == OX_DOUBLE || dt == OX_FLOAT16 || dt == OX_BFLOAT16;
}

/* ---- facts ----------------------------------------------------------------------------- */

struct ox_graph *ox_ad_graph(struct ox_ad *ad) {
    return ad->g;
}
int ox_ad_opset(const struct ox_ad *ad) {
    return ad->opset;
}

bool ox_ad_wants(const struct ox_ad *ad, const struct ox_node *n, int i) {
    if (i < 0 || i >= n->n_inputs || n->inputs[i] < 0) return false;
    int v = n->inputs[i];
    return v < ad->cap && ad->wants[v];
}

ox_dtype ox_ad_dtype(const struct ox_ad *ad, int v) {
    return v >= 0 && v < ad->cap ? ad->info[v].dtype : OX_UNDEFINED;
}
int ox_ad_rank(const struct ox_ad *ad, int v) {
    return v >= 0 && v < ad->cap ? ad->info[v].rank : -1;
}
int64_t ox_ad_dim(const struct ox_ad *ad, int v, int k) {
    if (v < 0 || v >= ad->cap || k < 0 || k >= ad->info[v].rank) return -1;
    const struct info *f = &ad->info[v];
    return f->da[k] == f->db[k] ? f->da[k] : -1;
}
bool ox_ad_static(const struct ox_ad *ad, int v) {
    int r = ox_ad_rank(ad, v);
    if (r < 0) return false;
    for (int k = 0; k < r; k++)
        if (ox_ad_dim(ad, v, k) < 0) return false;
    return true;
}

void ox_ad_set_info(struct ox_ad *ad, int v, ox_dtype dt, int rank, const int64_t *dims) {
    if (v < 0 || !grow(ad) || v >= ad->cap) return;
    struct info *f = &ad->info[v];
    f->dtype = dt;
    f->rank = rank > OX_MAX_RANK ? -1 : rank;
    for (int k = 0; k < f->rank; k++) {
        /* an unknown dim gets two different made-up sizes: it never reads as fixed */
        f->da[k] = dims && dims[k] >= 0 ? dims[k] : -100 - 2 * (int64_t)v;
        f->db[k] = dims && dims[k] >= 0 ? dims[k] : -101 - 2 * (int64_t)v;
    }
}

static void copy_info(struct ox_ad *ad, int dst, int src) {
    if (dst < 0 || src < 0 || !grow(ad)) return;
    ad->info[dst] = ad->info[src];
}

ox_status ox_ad_fail(struct ox_ad *ad, const struct ox_node *n, ox_status code, const char *fmt,
                     ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!ad->err)
        ad->err = n ? ox_node_err(n, code, "gradient: %s", msg) : ox_err(code, "gradient: %s", msg);
    return ad->err;
}

/* ---- emitting -------------------------------------------------------------------------- */

static int fresh_value(struct ox_ad *ad, const char *what) {
    char name[320];
    struct ox_graph *g = ad->g;
    for (;;) {
        snprintf(name, sizeof name, "%s/grad/%s_%d", ad->cur_name ? ad->cur_name : "", what,
                 ad->counter++);
        if (ox_graph_find_value(g, name) < 0) break;
    }
    int v = ox_graph_add_value(g, name);
    if (v < 0 || !grow(ad)) {
        if (!ad->err) ad->err = ox_err(OX_E_NOMEM, "out of memory building the gradient graph");
        return -1;
    }
    return v;
}

struct ox_node *ox_ad_node(struct ox_ad *ad, const char *op, int n_in, const int *in, int n_out,
                           int *out) {
    if (ad->err) return NULL;
    for (int i = 0; i < n_in; i++)
        if (in[i] < -1 || in[i] >= ad->g->n_values) {
            ox_ad_fail(ad, NULL, OX_E_INTERNAL, "%s: input %d is not a value", op, i);
            return NULL;
        }
    for (int k = 0; k < n_out; k++)
        if ((out[k] = fresh_value(ad, op)) < 0) return NULL;
    const struct ox_op *row = ox_op_find("", op, ad->opset);
    if (!row) {
        ox_ad_fail(ad, NULL, OX_E_INTERNAL, "a rule emitted %s, which opset %d does not serve", op,
                   ad->opset);
        return NULL;
    }
    const char *name = ad->g->values[out[0]].name;
    struct ox_node *nd = ox_graph_add_node(ad->g, name, "", op, n_in, in, n_out, out);
    if (!nd) {
        ad->err = ox_err(OX_E_NOMEM, "out of memory building the gradient graph");
        return NULL;
    }
    nd->opset = ad->opset;
    nd->op = row;
    return nd;
}

int ox_ad_op(struct ox_ad *ad, const char *op, int n_in, const int *in) {
    int out = -1;
    return ox_ad_node(ad, op, n_in, in, 1, &out) ? out : -1;
}

static struct ox_attr *new_attr(struct ox_ad *ad, struct ox_node *nd, const char *name) {
    struct ox_attr *a = ox_graph_alloc(ad->g, sizeof *a * (size_t)(nd->n_attrs + 1));
    if (!a) return NULL;
    if (nd->n_attrs) memcpy(a, nd->attrs, sizeof *a * (size_t)nd->n_attrs);
    nd->attrs = a;
    a = &a[nd->n_attrs++];
    memset(a, 0, sizeof *a);
    a->name = ox_graph_strdup(ad->g, name);
    return a->name ? a : NULL;
}

static ox_status set_attrs(struct ox_ad *ad, struct ox_node *nd, const char *spec, va_list ap) {
    if (!nd || ad->err) return ad->err ? ad->err : OX_E_INTERNAL;
    const char *p = spec;
    while (*p) {
        while (*p == ' ') p++;
        if (!*p) break;
        char kind = p[0];
        if (p[1] != ':')
            return ox_ad_fail(ad, NULL, OX_E_INTERNAL, "bad attribute spec '%s'", spec);
        p += 2;
        char name[64];
        size_t len = strcspn(p, " ");
        if (len == 0 || len >= sizeof name)
            return ox_ad_fail(ad, NULL, OX_E_INTERNAL, "bad attribute spec '%s'", spec);
        memcpy(name, p, len);
        name[len] = '\0';
        p += len;
        struct ox_attr *a = new_attr(ad, nd, name);
        if (!a) return ad->err = ox_err(OX_E_NOMEM, "out of memory building the gradient graph");
        switch (kind) {
        case 'i':
            a->type = OX_ATTR_INT;
            a->i = va_arg(ap, int64_t);
            break;
        case 'f':
            a->type = OX_ATTR_FLOAT;
            a->f = (float)va_arg(ap, double);
            break;
        case 's': {
            const char *s = va_arg(ap, const char *);
            a->type = OX_ATTR_STRING;
            a->s = ox_graph_strdup(ad->g, s);
            a->s_len = strlen(s);
            if (!a->s) return ad->err = ox_err(OX_E_NOMEM, "out of memory");
            break;
        }
        case 'I': {
            int n = va_arg(ap, int);
            const int64_t *vals = va_arg(ap, const int64_t *);
            a->type = OX_ATTR_INTS;
            a->n = n;
            a->ints = ox_graph_alloc(ad->g, sizeof(int64_t) * (size_t)(n ? n : 1));
            if (!a->ints) return ad->err = ox_err(OX_E_NOMEM, "out of memory");
            if (n) memcpy(a->ints, vals, sizeof(int64_t) * (size_t)n);
            break;
        }
        case 'F': {
            int n = va_arg(ap, int);
            const float *vals = va_arg(ap, const float *);
            a->type = OX_ATTR_FLOATS;
            a->n = n;
            a->floats = ox_graph_alloc(ad->g, sizeof(float) * (size_t)(n ? n : 1));
            if (!a->floats) return ad->err = ox_err(OX_E_NOMEM, "out of memory");
            if (n) memcpy(a->floats, vals, sizeof(float) * (size_t)n);
            break;
        }
        case 'T': {
            const ox_tensor *src = va_arg(ap, const ox_tensor *);
            a->type = OX_ATTR_TENSOR;
            /* the struct in the graph's arena, as every attribute tensor's; it owns its data */
            a->t = ox_graph_alloc(ad->g, sizeof *a->t);
            if (!a->t || ox_tensor_copy(a->t, src)) {
                a->t = NULL;
                nd->n_attrs--;
                return ad->err = ox_err(OX_E_NOMEM, "out of memory");
            }
            break;
        }
        default: return ox_ad_fail(ad, NULL, OX_E_INTERNAL, "bad attribute kind '%c'", kind);
        }
    }
    return OX_OK;
}

ox_status ox_ad_set_attr(struct ox_ad *ad, struct ox_node *nd, const char *spec, ...) {
    va_list ap;
    va_start(ap, spec);
    ox_status st = set_attrs(ad, nd, spec, ap);
    va_end(ap);
    return st;
}

int ox_ad_opa(struct ox_ad *ad, const char *op, int n_in, const int *in, const char *spec, ...) {
    int out = -1;
    struct ox_node *nd = ox_ad_node(ad, op, n_in, in, 1, &out);
    if (!nd) return -1;
    va_list ap;
    va_start(ap, spec);
    ox_status st = set_attrs(ad, nd, spec, ap);
    va_end(ap);
    return st ? -1 : out;
}

/* ---- constants ------------------------------------------------------------------------- */

static int new_init(struct ox_ad *ad, ox_dtype dt, int rank, const int64_t *dims, ox_tensor **t) {
    if (ad->err) return -1;
    int v = fresh_value(ad, "const");
    if (v < 0) return -1;
    ox_tensor *tt = ox_graph_alloc(ad->g, sizeof *tt);
    if (!tt || ox_tensor_alloc(tt, dt, rank, dims)) {
        ad->err = ox_err(OX_E_NOMEM, "out of memory building the gradient graph");
        return -1;
    }
    struct ox_value *val = &ad->g->values[v];
    tt->name = val->name;
    val->init = tt;
    val->dtype = dt;
    val->rank = rank;
    val->dims = ox_graph_alloc(ad->g, sizeof *val->dims * (size_t)(rank ? rank : 1));
    if (!val->dims) {
        ad->err = ox_err(OX_E_NOMEM, "out of memory building the gradient graph");
        return -1;
    }
    for (int k = 0; k < rank; k++) val->dims[k].value = dims[k];
    ox_ad_set_info(ad, v, dt, rank, dims);
    *t = tt;
    return v;
}

int ox_ad_ints(struct ox_ad *ad, int n, const int64_t *vals) {
    ox_tensor *t;
    int64_t d = n;
    int v = new_init(ad, OX_INT64, 1, &d, &t);
    if (v >= 0 && n) memcpy(t->data, vals, sizeof(int64_t) * (size_t)n);
    return v;
}

int ox_ad_int(struct ox_ad *ad, int64_t x) {
    ox_tensor *t;
    int v = new_init(ad, OX_INT64, 0, NULL, &t);
    if (v >= 0) *(int64_t *)t->data = x;
    return v;
}

int ox_ad_scalar_like(struct ox_ad *ad, double x, int like) {
    ox_dtype dt = ox_ad_dtype(ad, like);
    bool known = is_float(dt);
    ox_tensor *t;
    int v = new_init(ad, known ? dt : OX_FLOAT, 0, NULL, &t);
    if (v < 0) return -1;
    ox_tensor_set(t, 0, x);
    if (known || ad->opset < 15) return v;
    int r = OX_AD(ad, "CastLike", v, like);
    ox_ad_set_info(ad, r, OX_UNDEFINED, 0, NULL);
    return r;
}

/* ---- common pieces --------------------------------------------------------------------- */

const ox_tensor *ox_ad_const_value(const struct ox_ad *ad, int v) {
    const struct ox_graph *g = ad->g;
    if (v < 0 || v >= g->n_values) return NULL;
    for (int i = 0; i < g->n_inputs; i++)
        if (g->inputs[i] == v) return NULL; /* a caller may override it */
    const struct ox_value *val = &g->values[v];
    if (val->init) return val->init->kind == OX_IO_TENSOR ? val->init : NULL;
    if (val->producer < 0 || val->producer >= g->n_nodes) return NULL;
    const struct ox_node *p = &g->nodes[val->producer];
    if (p->domain[0] || strcmp(p->op_type, "Constant") != 0) return NULL;
    const struct ox_attr *a = ox_node_attr(p, "value");
    return a && a->type == OX_ATTR_TENSOR && a->t->kind == OX_IO_TENSOR ? a->t : NULL;
}

bool ox_ad_const_ints(const struct ox_ad *ad, int v, int max, int64_t *out, int *n) {
    const ox_tensor *t = ox_ad_const_value(ad, v);
    if (!t && v >= 0 && v < ad->g->n_values && ad->g->values[v].producer >= 0 &&
        !ad->g->values[v].init) {
        const struct ox_node *p = &ad->g->nodes[ad->g->values[v].producer];
        const struct ox_attr *a;
        if (p->domain[0] || strcmp(p->op_type, "Constant") != 0) return false;
        if ((a = ox_node_attr(p, "value_int")) && a->type == OX_ATTR_INT && max >= 1) {
            out[0] = a->i;
            *n = 1;
            return true;
        }
        if ((a = ox_node_attr(p, "value_ints")) && a->type == OX_ATTR_INTS && a->n <= max) {
            if (a->n) memcpy(out, a->ints, sizeof(int64_t) * (size_t)a->n);
            *n = a->n;
            return true;
        }
        return false;
    }
    if (!t || !ox_dtype_is_int(t->dtype)) return false;
    int64_t count = ox_tensor_numel(t);
    if (count > max || (count && !t->data)) return false;
    for (int64_t i = 0; i < count; i++) out[i] = (int64_t)ox_tensor_get(t, i);
    *n = (int)count;
    return true;
}

int ox_ad_const(struct ox_ad *ad, const ox_tensor *t) {
    int v = ox_ad_opa(ad, "Constant", 0, (int[]){-1}, "T:value", t);
    ox_ad_set_info(ad, v, t->dtype, t->rank, t->dims);
    return v;
}

void ox_ad_info_as(struct ox_ad *ad, int dst, int src, ox_dtype dt) {
    if (dst < 0 || src < 0 || !grow(ad)) return;
    ad->info[dst] = ad->info[src];
    if (dt != OX_UNDEFINED) ad->info[dst].dtype = dt;
}

int ox_ad_cast_like(struct ox_ad *ad, int v, int like) {
    if (v < 0 || like < 0 || ad->err) return -1;
    ox_dtype dt = ox_ad_dtype(ad, like);
    if (dt != OX_UNDEFINED && dt == ox_ad_dtype(ad, v)) return v;
    int r;
    if (dt != OX_UNDEFINED) {
        r = ox_ad_opa(ad, "Cast", 1, &v, "i:to", (int64_t)dt);
    } else if (ad->opset >= 15) {
        r = OX_AD(ad, "CastLike", v, like);
    } else {
        ox_ad_fail(ad, NULL, OX_E_UNSUPPORTED, "the element type of '%s' is unknown",
                   ad->g->values[like].name);
        return -1;
    }
    ox_ad_info_as(ad, r, v, dt);
    return r;
}

/* Info of an elementwise result of a and b (numpy broadcasting), where both are known. */
static void broadcast_info(struct ox_ad *ad, int r, int a, int b) {
    if (r < 0 || !grow(ad)) return;
    const struct info *fa = &ad->info[a], *fb = &ad->info[b];
    struct info f = {.dtype = is_float(fa->dtype) ? fa->dtype : fb->dtype, .rank = -1};
    if (fa->rank >= 0 && fb->rank >= 0) {
        f.rank = fa->rank > fb->rank ? fa->rank : fb->rank;
        for (int k = 0; k < f.rank; k++) {
            int ka = k - (f.rank - fa->rank), kb = k - (f.rank - fb->rank);
            int64_t aa = ka >= 0 ? fa->da[ka] : 1, ab = ka >= 0 ? fa->db[ka] : 1;
            int64_t ba = kb >= 0 ? fb->da[kb] : 1, bb = kb >= 0 ? fb->db[kb] : 1;
            f.da[k] = aa == 1 ? ba : aa;
            f.db[k] = ab == 1 ? bb : ab;
        }
    }
    ad->info[r] = f;
}

static int binary(struct ox_ad *ad, const char *op, int a, int b) {
    int r = OX_AD(ad, op, a, b);
    if (r >= 0) broadcast_info(ad, r, a, b);
    return r;
}

int ox_ad_add(struct ox_ad *ad, int a, int b) {
    return binary(ad, "Add", a, b);
}
int ox_ad_sub(struct ox_ad *ad, int a, int b) {
    return binary(ad, "Sub", a, b);
}
int ox_ad_mul(struct ox_ad *ad, int a, int b) {
    return binary(ad, "Mul", a, b);
}
int ox_ad_div(struct ox_ad *ad, int a, int b) {
    return binary(ad, "Div", a, b);
}

int ox_ad_matmul(struct ox_ad *ad, int a, int b) {
    int r = OX_AD(ad, "MatMul", a, b);
    if (r < 0) return -1;
    const struct info *fa = &ad->info[a], *fb = &ad->info[b];
    struct info f = {.dtype = fa->dtype, .rank = -1};
    if (fa->rank >= 2 && fb->rank >= 2) {
        /* batch dims broadcast, then [a's rows, b's columns] */
        struct info ba = *fa, bb = *fb;
        ba.rank -= 2;
        bb.rank -= 2;
        ad->info[r] = ba;
        int tmp_a = a, tmp_b = b;
        struct info sa = ad->info[tmp_a], sb = ad->info[tmp_b];
        ad->info[tmp_a] = ba;
        ad->info[tmp_b] = bb;
        broadcast_info(ad, r, tmp_a, tmp_b);
        ad->info[tmp_a] = sa;
        ad->info[tmp_b] = sb;
        f = ad->info[r];
        f.dtype = fa->dtype;
        f.da[f.rank] = fa->da[fa->rank - 2];
        f.db[f.rank] = fa->db[fa->rank - 2];
        f.da[f.rank + 1] = fb->da[fb->rank - 1];
        f.db[f.rank + 1] = fb->db[fb->rank - 1];
        f.rank += 2;
    }
    ad->info[r] = f;
    return r;
}

int ox_ad_neg(struct ox_ad *ad, int a) {
    int r = OX_AD(ad, "Neg", a);
    copy_info(ad, r, a);
    return r;
}

int ox_ad_shape(struct ox_ad *ad, int x) {
    int r = OX_AD(ad, "Shape", x);
    int rank = ox_ad_rank(ad, x);
    int64_t d = rank;
    ox_ad_set_info(ad, r, OX_INT64, 1, rank >= 0 ? &d : NULL);
    return r;
}

/* The shape of x as a value: a constant when it is fixed, else Shape(x). */
static int shape_of(struct ox_ad *ad, int x) {
    int rank = ox_ad_rank(ad, x);
    if (ox_ad_static(ad, x) && rank <= OX_MAX_RANK) {
        int64_t d[OX_MAX_RANK];
        for (int k = 0; k < rank; k++) d[k] = ox_ad_dim(ad, x, k);
        return ox_ad_ints(ad, rank, d);
    }
    return ox_ad_shape(ad, x);
}

static int filled_like(struct ox_ad *ad, int x, double val) {
    ox_dtype dt = ox_ad_dtype(ad, x);
    bool known = is_float(dt) || ox_dtype_is_int(dt);
    ox_tensor t = {0};
    int64_t one = 1;
    if (ox_tensor_alloc(&t, known ? dt : OX_FLOAT, 1, &one)) {
        ad->err = ox_err(OX_E_NOMEM, "out of memory");
        return -1;
    }
    ox_tensor_set(&t, 0, val);
    int s = shape_of(ad, x);
    int r = ox_ad_opa(ad, "ConstantOfShape", 1, &s, "T:value", &t);
    ox_tensor_free_data(&t);
    if (r < 0) return -1;
    copy_info(ad, r, x);
    if (known || ad->opset < 15) return r;
    r = OX_AD(ad, "CastLike", r, x);
    copy_info(ad, r, x);
    return r;
}

int ox_ad_zeros_like(struct ox_ad *ad, int x) {
    return filled_like(ad, x, 0.0);
}
int ox_ad_ones_like(struct ox_ad *ad, int x) {
    return filled_like(ad, x, 1.0);
}

int ox_ad_reshape_like(struct ox_ad *ad, int g, int x) {
    int s = shape_of(ad, x);
    int r = OX_AD(ad, "Reshape", g, s);
    copy_info(ad, r, x);
    if (r >= 0 && ad->info[r].dtype == OX_UNDEFINED) ad->info[r].dtype = ox_ad_dtype(ad, g);
    return r;
}

int ox_ad_expand_like(struct ox_ad *ad, int g, int x) {
    int s = shape_of(ad, x);
    int r = OX_AD(ad, "Expand", g, s);
    copy_info(ad, r, x);
    if (r >= 0) ad->info[r].dtype = ox_ad_dtype(ad, g);
    return r;
}

int ox_ad_reduce(struct ox_ad *ad, const char *op, int x, int n_axes, const int64_t *axes,
                 bool keepdims) {
    bool as_input = strcmp(op, "ReduceSum") == 0 ? ad->opset >= 13 : ad->opset >= 18;
    int r;
    if (as_input && n_axes) {
        int a = ox_ad_ints(ad, n_axes, axes);
        r = ox_ad_opa(ad, op, 2, (int[]){x, a}, "i:keepdims", (int64_t)keepdims);
    } else if (n_axes) {
        r = ox_ad_opa(ad, op, 1, &x, "I:axes i:keepdims", n_axes, axes, (int64_t)keepdims);
    } else {
        r = ox_ad_opa(ad, op, 1, &x, "i:keepdims", (int64_t)keepdims);
    }
    if (r < 0) return -1;
    /* info: the rank and the dims left */
    const struct info *fx = &ad->info[x];
    struct info f = {.dtype = fx->dtype, .rank = -1};
    if (fx->rank >= 0) {
        bool gone[OX_MAX_RANK] = {false};
        bool ok = true;
        for (int i = 0; i < n_axes; i++) {
            int64_t a = axes[i] < 0 ? axes[i] + fx->rank : axes[i];
            if (a < 0 || a >= fx->rank)
                ok = false;
            else
                gone[a] = true;
        }
        if (!n_axes)
            for (int k = 0; k < fx->rank; k++) gone[k] = true;
        if (ok) {
            f.rank = 0;
            for (int k = 0; k < fx->rank; k++) {
                if (gone[k] && !keepdims) continue;
                f.da[f.rank] = gone[k] ? 1 : fx->da[k];
                f.db[f.rank] = gone[k] ? 1 : fx->db[k];
                f.rank++;
            }
        }
    }
    ad->info[r] = f;
    return r;
}

static int axes_op(struct ox_ad *ad, const char *op, int x, int n_axes, const int64_t *axes) {
    if (ad->opset >= 13) {
        int a = ox_ad_ints(ad, n_axes, axes);
        return OX_AD(ad, op, x, a);
    }
    return ox_ad_opa(ad, op, 1, &x, "I:axes", n_axes, axes);
}

int ox_ad_unsqueeze(struct ox_ad *ad, int x, int n_axes, const int64_t *axes) {
    int r = axes_op(ad, "Unsqueeze", x, n_axes, axes);
    if (r < 0) return -1;
    const struct info *fx = &ad->info[x];
    struct info f = {.dtype = fx->dtype, .rank = -1};
    if (fx->rank >= 0 && fx->rank + n_axes <= OX_MAX_RANK) {
        f.rank = fx->rank + n_axes;
        bool added[OX_MAX_RANK] = {false};
        bool ok = true;
        for (int i = 0; i < n_axes; i++) {
            int64_t a = axes[i] < 0 ? axes[i] + f.rank : axes[i];
            if (a < 0 || a >= f.rank)
                ok = false;
            else
                added[a] = true;
        }
        for (int k = 0, j = 0; ok && k < f.rank; k++) {
            f.da[k] = added[k] ? 1 : fx->da[j];
            f.db[k] = added[k] ? 1 : fx->db[j];
            if (!added[k]) j++;
        }
        if (!ok) f.rank = -1;
    }
    ad->info[r] = f;
    return r;
}

int ox_ad_squeeze(struct ox_ad *ad, int x, int n_axes, const int64_t *axes) {
    int r = axes_op(ad, "Squeeze", x, n_axes, axes);
    if (r < 0) return -1;
    const struct info *fx = &ad->info[x];
    struct info f = {.dtype = fx->dtype, .rank = -1};
    if (fx->rank >= 0) {
        bool gone[OX_MAX_RANK] = {false};
        bool ok = true;
        for (int i = 0; i < n_axes; i++) {
            int64_t a = axes[i] < 0 ? axes[i] + fx->rank : axes[i];
            if (a < 0 || a >= fx->rank)
                ok = false;
            else
                gone[a] = true;
        }
        f.rank = 0;
        for (int k = 0; ok && k < fx->rank; k++) {
            if (gone[k]) continue;
            f.da[f.rank] = fx->da[k];
            f.db[f.rank] = fx->db[k];
            f.rank++;
        }
        if (!ok) f.rank = -1;
    }
    ad->info[r] = f;
    return r;
}

int ox_ad_transpose(struct ox_ad *ad, int x, int rank, const int64_t *perm) {
    int r = ox_ad_opa(ad, "Transpose", 1, &x, "I:perm", rank, perm);
    if (r < 0) return -1;
    const struct info *fx = &ad->info[x];
    struct info f = {.dtype = fx->dtype, .rank = fx->rank == rank ? rank : -1};
    for (int k = 0; k < f.rank; k++) {
        f.da[k] = fx->da[perm[k]];
        f.db[k] = fx->db[perm[k]];
    }
    ad->info[r] = f;
    return r;
}

/* Sum g down to x's shape when the broadcast axes are not known: compare the shapes at run
 * time (folded by the planner once shapes are known). */
static int unbroadcast_dynamic(struct ox_ad *ad, int g, int x) {
    int sx = ox_ad_shape(ad, x), sg = ox_ad_shape(ad, g);
    int rx = OX_AD(ad, "Shape", sx), rg = OX_AD(ad, "Shape", sg);
    int diff = OX_AD(ad, "Sub", rg, rx);
    ox_tensor one = {0};
    int64_t d1 = 1;
    if (ox_tensor_alloc(&one, OX_INT64, 1, &d1)) {
        ad->err = ox_err(OX_E_NOMEM, "out of memory");
        return -1;
    }
    *(int64_t *)one.data = 1;
    int ones = ox_ad_opa(ad, "ConstantOfShape", 1, &diff, "T:value", &one);
    ox_tensor_free_data(&one);
    int sxp = ox_ad_opa(ad, "Concat", 2, (int[]){ones, sx}, "i:axis", (int64_t)0);
    int eq = OX_AD(ad, "Equal", sxp, sg);
    int ne = OX_AD(ad, "Not", eq);
    int nz = OX_AD(ad, "NonZero", ne);
    int axes = OX_AD(ad, "Reshape", nz, ox_ad_ints(ad, 1, (int64_t[]){-1}));
    int red = ox_ad_opa(ad, "ReduceSum", 2, (int[]){g, axes}, "i:keepdims i:noop_with_empty_axes",
                        (int64_t)1, (int64_t)1);
    copy_info(ad, red, g);
    return ox_ad_reshape_like(ad, red, x);
}

int ox_ad_unbroadcast(struct ox_ad *ad, int g, int x) {
    if (g < 0 || x < 0 || ad->err) return -1;
    if (ad->opset < 13) return unbroadcast_dynamic(ad, g, x); /* never: the pass raises it */
    const struct info *fg = &ad->info[g], *fx = &ad->info[x];
    if (fg->rank < 0 || fx->rank < 0 || fx->rank > fg->rank) return unbroadcast_dynamic(ad, g, x);
    int lead = fg->rank - fx->rank;
    int64_t axes[OX_MAX_RANK];
    int n_axes = 0;
    bool inner = false; /* an axis of x itself is reduced (kept as 1) */
    for (int k = 0; k < fg->rank; k++) {
        if (k < lead) {
            axes[n_axes++] = k;
            continue;
        }
        int kx = k - lead;
        bool same = fx->da[kx] == fg->da[k] && fx->db[kx] == fg->db[k];
        bool x_one = fx->da[kx] == 1 && fx->db[kx] == 1;
        if (same) continue;
        if (!x_one) return unbroadcast_dynamic(ad, g, x);
        axes[n_axes++] = k;
        inner = true;
    }
    if (!n_axes) return g;
    int r;
    if (!inner) {
        r = ox_ad_reduce(ad, "ReduceSum", g, n_axes, axes, false);
    } else {
        r = ox_ad_reduce(ad, "ReduceSum", g, n_axes, axes, true);
        if (lead) r = ox_ad_reshape_like(ad, r, x);
    }
    return r;
}

/* ---- analysis: dtypes and shapes of the forward graph ---------------------------------- */

static bool symbolic_inputs(const struct ox_graph *g, bool *any) {
    *any = false;
    for (int i = 0; i < g->n_inputs; i++) {
        const struct ox_value *v = &g->values[g->inputs[i]];
        if (v->init) continue;
        if (v->kind != OX_KIND_TENSOR || v->rank < 0 || v->dtype == OX_UNDEFINED) return false;
        for (int k = 0; k < v->rank; k++) *any |= v->dims[k].value < 0;
    }
    return true;
}

static struct ox_plan *plan_with(struct ox_graph *g, int64_t size) {
    const ox_tensor **in = calloc((size_t)g->n_inputs + 1, sizeof *in);
    ox_tensor *desc = calloc((size_t)g->n_inputs + 1, sizeof *desc);
    struct ox_plan *p = NULL;
    if (in && desc) {
        for (int i = 0; i < g->n_inputs; i++) {
            const struct ox_value *v = &g->values[g->inputs[i]];
            if (v->init) continue;
            desc[i].dtype = v->dtype;
            desc[i].rank = v->rank;
            for (int k = 0; k < v->rank; k++)
                desc[i].dims[k] = v->dims[k].value >= 0 ? v->dims[k].value : size;
            in[i] = &desc[i];
        }
        if (ox_plan_build(g, in, NULL, &p) != OX_OK) p = NULL;
    }
    free(in);
    free(desc);
    return p;
}

/* Fill info for every forward value: from two plans where they can be built (with the graph
 * outputs narrowed to `of`), else from the declared types. */
static void analyze(struct ox_ad *ad, int n_of, const int *of) {
    struct ox_graph *g = ad->g;
    for (int v = 0; v < g->n_values; v++) {
        const struct ox_value *val = &g->values[v];
        int64_t d[OX_MAX_RANK];
        int rank = val->kind == OX_KIND_TENSOR && val->rank <= OX_MAX_RANK ? val->rank : -1;
        for (int k = 0; k < rank; k++) d[k] = val->dims[k].value;
        if (val->init) {
            rank = val->init->rank;
            memcpy(d, val->init->dims, sizeof(int64_t) * (size_t)rank);
        }
        ox_ad_set_info(ad, v, val->init ? val->init->dtype : val->dtype, rank, d);
    }
    bool any_symbolic;
    if (!symbolic_inputs(g, &any_symbolic)) return;
    int n_out = g->n_outputs, *outs = g->outputs;
    g->n_outputs = n_of;
    g->outputs = (int *)of;
    struct ox_plan *pa = plan_with(g, 2), *pb = any_symbolic ? plan_with(g, 3) : NULL;
    g->n_outputs = n_out;
    g->outputs = outs;
    ox_err(OX_OK, "%s", ""); /* a failed plan is not an error here */
    if (!pa || (any_symbolic && !pb)) {
        ox_plan_free(pa);
        ox_plan_free(pb);
        return;
    }
    for (int v = 0; v < g->n_values && v < ad->cap; v++) {
        if (pa->slot[v] == OX_SLOT_NONE || pa->slot[v] == OX_SLOT_DYNAMIC) continue;
        const ox_tensor *ta = &pa->vals[v], *tb = pb ? &pb->vals[v] : ta;
        if (ta->kind != OX_IO_TENSOR || ta->rank != tb->rank) continue;
        struct info *f = &ad->info[v];
        f->dtype = ta->dtype;
        f->rank = ta->rank;
        memcpy(f->da, ta->dims, sizeof(int64_t) * (size_t)ta->rank);
        memcpy(f->db, tb->dims, sizeof(int64_t) * (size_t)ta->rank);
    }
    ox_plan_free(pa);
    ox_plan_free(pb);
}

/* ---- the walk -------------------------------------------------------------------------- */

static bool push(struct ox_ad *ad, int v, int grad) {
    struct contrib *c = &ad->acc[v];
    if (c->n == c->cap) {
        int cap = c->cap ? c->cap * 2 : 2;
        int *nv = realloc(c->v, sizeof(int) * (size_t)cap);
        if (!nv) {
            ad->err = ox_err(OX_E_NOMEM, "out of memory building the gradient graph");
            return false;
        }
        c->v = nv;
        c->cap = cap;
    }
    c->v[c->n++] = grad;
    return true;
}

/* The gradient of v, summed over its readers (-1: none). */
static int final_grad(struct ox_ad *ad, int v) {
    if (ad->final[v] != -2) return ad->final[v];
    struct contrib *c = &ad->acc[v];
    int r = -1;
    if (c->n == 1) {
        r = c->v[0];
    } else if (c->n > 1) {
        const char *saved = ad->cur_name;
        ad->cur_name = ad->g->values[v].name;
        r = ox_ad_op(ad, "Sum", c->n, c->v);
        ad->cur_name = saved;
    }
    if (r >= 0 && ad->info[r].rank < 0) copy_info(ad, r, v);
    ad->final[v] = r;
    return r;
}

/* Values read by subgraphs of n, at any depth, from g. */
static bool reads_outer(const struct ox_graph *sub, const struct ox_graph *g, const bool *set) {
    for (int v = 0; v < sub->n_values; v++) {
        if (!sub->values[v].is_outer) continue;
        int id = ox_graph_find_value(g, sub->values[v].name);
        if (id >= 0 && set[id]) return true;
    }
    for (int i = 0; i < sub->n_nodes; i++)
        for (int k = 0; k < sub->nodes[i].n_attrs; k++) {
            const struct ox_attr *a = &sub->nodes[i].attrs[k];
            if (a->g && reads_outer(a->g, g, set)) return true;
            for (int j = 0; a->graphs && j < a->n; j++)
                if (reads_outer(a->graphs[j], g, set)) return true;
        }
    return false;
}

static bool node_reads(const struct ox_graph *g, const struct ox_node *n, const bool *set) {
    for (int i = 0; i < n->n_inputs; i++)
        if (n->inputs[i] >= 0 && set[n->inputs[i]]) return true;
    for (int k = 0; k < n->n_attrs; k++) {
        const struct ox_attr *a = &n->attrs[k];
        if (a->g && reads_outer(a->g, g, set)) return true;
        for (int j = 0; a->graphs && j < a->n; j++)
            if (reads_outer(a->graphs[j], g, set)) return true;
    }
    return false;
}

/* Give value v (a new graph input or output) the dtype and dims of `like`. */
static ox_status declare_like(struct ox_ad *ad, int v, int like) {
    struct ox_graph *g = ad->g;
    struct ox_value *val = &g->values[v];
    const struct ox_value *lv = &g->values[like];
    const struct info *f = &ad->info[like];
    val->kind = OX_KIND_TENSOR;
    val->dtype = f->dtype != OX_UNDEFINED ? f->dtype : OX_FLOAT;
    val->rank = f->rank;
    if (f->rank < 0) return OX_OK;
    val->dims = ox_graph_alloc(g, sizeof *val->dims * (size_t)(f->rank ? f->rank : 1));
    if (!val->dims) return ox_err(OX_E_NOMEM, "out of memory");
    for (int k = 0; k < f->rank; k++) {
        int64_t d = ox_ad_dim(ad, like, k);
        val->dims[k].value = d;
        if (d < 0 && lv->rank == f->rank && lv->dims) val->dims[k].symbol = lv->dims[k].symbol;
    }
    return OX_OK;
}

static ox_status walk(struct ox_ad *ad, const struct ox_ad_request *r) {
    struct ox_graph *g = ad->g;
    int n_fwd = g->n_nodes, n_values = g->n_values;
    /* what depends on a wrt value */
    bool *wrt_set = calloc((size_t)g->n_values + 1, sizeof *wrt_set);
    if (!wrt_set) return ox_err(OX_E_NOMEM, "out of memory");
    if (r->n_wrt) {
        for (int i = 0; i < r->n_wrt; i++) wrt_set[r->wrt[i]] = true;
    } else {
        for (int v = 0; v < g->n_values; v++)
            wrt_set[v] = g->values[v].init && is_float(g->values[v].init->dtype) &&
                         g->values[v].init->kind == OX_IO_TENSOR;
    }
    for (int v = 0; v < g->n_values; v++) ad->wants[v] = wrt_set[v];
    for (int i = 0; i < n_fwd; i++) {
        const struct ox_node *n = &g->nodes[i];
        if (!node_reads(g, n, ad->wants)) continue;
        for (int k = 0; k < n->n_outputs; k++) {
            int v = n->outputs[k];
            if (v < 0) continue;
            ox_dtype dt = ad->info[v].dtype;
            ad->wants[v] = dt == OX_UNDEFINED || is_float(dt);
        }
    }
    /* what the `of` values depend on */
    for (int i = 0; i < r->n_of; i++) ad->reach[r->of[i]] = true;
    for (int i = n_fwd - 1; i >= 0; i--) {
        const struct ox_node *n = &g->nodes[i];
        bool any = false;
        for (int k = 0; k < n->n_outputs; k++)
            any |= n->outputs[k] >= 0 && ad->reach[n->outputs[k]];
        if (!any) continue;
        for (int k = 0; k < n->n_inputs; k++)
            if (n->inputs[k] >= 0) ad->reach[n->inputs[k]] = true;
    }
    /* seeds */
    for (int i = 0; i < r->n_of; i++) {
        int of = r->of[i], seed;
        ad->cur_name = g->values[of].name;
        if (r->seeds) {
            seed = r->seeds[i];
        } else {
            char name[300];
            snprintf(name, sizeof name, "%s_grad", g->values[of].name);
            if (ox_graph_find_value(g, name) >= 0) {
                free(wrt_set);
                return ox_err(OX_E_INVALID, "gradient: the seed's name '%s' is taken", name);
            }
            seed = ox_graph_add_value(g, name);
            if (seed < 0 || !grow(ad)) {
                free(wrt_set);
                return ox_err(OX_E_NOMEM, "out of memory");
            }
            copy_info(ad, seed, of);
            ox_status st = declare_like(ad, seed, of);
            if (!st) st = ox_graph_add_input(g, seed);
            if (st) {
                free(wrt_set);
                return st;
            }
        }
        if (seed >= 0 && !push(ad, of, seed)) break;
    }
    /* backwards */
    for (int i = n_fwd - 1; i >= 0 && !ad->err; i--) {
        struct ox_node n = g->nodes[i]; /* a copy: rules append nodes */
        bool wanted = false;
        for (int k = 0; k < n.n_inputs; k++) wanted |= ox_ad_wants(ad, &n, k);
        bool reached = false;
        for (int k = 0; k < n.n_outputs; k++)
            reached |= n.outputs[k] >= 0 && ad->reach[n.outputs[k]];
        if (!wanted || !reached) continue;
        ad->cur_name = n.name && n.name[0] ? n.name : n.op_type;
        int gy[64], gx[256];
        if (n.n_outputs > 64 || n.n_inputs > 256) {
            free(wrt_set);
            return ox_node_err(&n, OX_E_UNSUPPORTED, "gradient: too many inputs or outputs");
        }
        bool any = false;
        for (int k = 0; k < n.n_outputs; k++) {
            gy[k] = n.outputs[k] >= 0 ? final_grad(ad, n.outputs[k]) : -1;
            any |= gy[k] >= 0;
        }
        if (!any) continue;
        const struct ox_grad_rule *rule = find_rule(&n);
        if (!rule) {
            int k = 0;
            while (!ox_ad_wants(ad, &n, k)) k++;
            free(wrt_set);
            return ox_node_err(&n, OX_E_UNSUPPORTED,
                               "no gradient rule for %s%s%s (the gradient of its input '%s' is "
                               "needed)",
                               n.domain[0] ? n.domain : "", n.domain[0] ? "." : "", n.op_type,
                               g->values[n.inputs[k]].name);
        }
        for (int k = 0; k < n.n_inputs; k++) gx[k] = -1;
        ox_status st = rule->fn(ad, &n, gy, gx);
        /* broadcasting ops give their inputs' gradients in the output's shape: summed back
         * here, once */
        for (int k = 0; !st && (rule->flags & OX_GRAD_UNBROADCAST) && k < n.n_inputs; k++)
            if (gx[k] >= 0 && ox_ad_wants(ad, &n, k))
                gx[k] = ox_ad_unbroadcast(ad, gx[k], n.inputs[k]);
        if (!st) st = ad->err;
        if (st) {
            free(wrt_set);
            return st;
        }
        for (int k = 0; k < n.n_inputs; k++) {
            if (gx[k] < 0 || !ox_ad_wants(ad, &n, k)) continue;
            if (ad->info[gx[k]].rank < 0 || ad->info[gx[k]].dtype == OX_UNDEFINED)
                copy_info(ad, gx[k], n.inputs[k]);
            if (!push(ad, n.inputs[k], gx[k])) break;
        }
    }
    /* the gradients */
    int n_wrt = r->n_wrt ? r->n_wrt : n_values; /* the forward graph's values */
    for (int i = 0; i < n_wrt && !ad->err; i++) {
        int v = r->n_wrt ? r->wrt[i] : i;
        if (!wrt_set[v]) continue;
        ad->cur_name = g->values[v].name;
        int gv = final_grad(ad, v);
        if (gv < 0 && !r->n_wrt) continue; /* default wrt: only those a gradient reaches */
        if (gv < 0) gv = ox_ad_zeros_like(ad, v);
        if (r->grads) {
            r->grads[i] = gv;
            continue;
        }
        char name[300];
        snprintf(name, sizeof name, "%s_grad", g->values[v].name);
        if (ox_graph_find_value(g, name) >= 0) {
            free(wrt_set);
            return ox_err(OX_E_INVALID, "gradient: the output name '%s' is taken", name);
        }
        int out = ox_graph_add_value(g, name);
        if (out < 0 || !grow(ad)) break;
        struct ox_node *id = ox_graph_add_node(g, name, "", "Identity", 1, &gv, 1, &out);
        if (!id) {
            ad->err = ox_err(OX_E_NOMEM, "out of memory");
            break;
        }
        id->opset = ad->opset;
        id->op = ox_op_find("", "Identity", ad->opset);
        ox_status st = declare_like(ad, out, v);
        if (!st) st = ox_graph_add_output(g, out);
        /* a parameter becomes an input too, with its initializer as the default */
        if (!st && g->values[v].init && !ox_graph_is_input(g, v)) st = ox_graph_add_input(g, v);
        if (st) {
            free(wrt_set);
            return st;
        }
    }
    free(wrt_set);
    return ad->err;
}

static ox_status raise_opset(struct ox_graph *g) {
    int64_t v = ox_graph_opset(g, "");
    if (v >= 13) return OX_OK;
    return ox_graph_convert_opset(g, 13);
}

ox_status ox_autograd(struct ox_graph *g, const struct ox_ad_request *r) {
    if (g->parent) return ox_err(OX_E_INVALID, "gradient: not a main graph");
    for (int i = 0; i < r->n_of; i++)
        if (r->of[i] < 0 || r->of[i] >= g->n_values)
            return ox_err(OX_E_INVALID, "gradient: value %d to differentiate does not exist",
                          r->of[i]);
    for (int i = 0; i < r->n_wrt; i++)
        if (r->wrt[i] < 0 || r->wrt[i] >= g->n_values)
            return ox_err(OX_E_INVALID, "gradient: value %d to differentiate by does not exist",
                          r->wrt[i]);
    ox_status st = raise_opset(g);
    if (st) return ox_err_prefix(st, "gradient: the model's opset must be raised to 13: ");
    struct ox_ad ad = {.g = g, .opset = (int)ox_graph_opset(g, "")};
    if (!grow(&ad)) {
        ad_free(&ad); /* the arrays that were allocated before one failed */
        return ad.err;
    }
    analyze(&ad, r->n_of, r->of);
    st = walk(&ad, r);
    ad_free(&ad);
    /* plans of it take the kernels' most accurate paths: the weight gradients' long sums
     * magnify rounding (ResNet-18's first layer moved by 1.3e-3, relative L2, when the
     * CPU's 3x3 convolutions ran in the Winograd form) */
    if (!st) st = ox_graph_set_meta(g, OX_META_GRADIENTS, "1");
    return st;
}

/* ---- the Gradient operator ------------------------------------------------------------- */

static const char *attr_str(const struct ox_node *n, const char *name) {
    const struct ox_attr *a = ox_node_attr(n, name);
    return a && a->type == OX_ATTR_STRING ? a->s : NULL;
}

ox_status ox_autograd_expand_gradient_ops(struct ox_graph *g) {
    for (;;) {
        int at = -1;
        for (int i = 0; i < g->n_nodes && at < 0; i++)
            if (strcmp(g->nodes[i].domain, "ai.onnx.preview.training") == 0 &&
                strcmp(g->nodes[i].op_type, "Gradient") == 0)
                at = i;
        if (at < 0) return OX_OK;
        struct ox_node n = g->nodes[at];
        const struct ox_attr *xs = ox_node_attr(&n, "xs");
        const char *y = attr_str(&n, "y");
        if (!xs || xs->type != OX_ATTR_STRINGS || !y)
            return ox_node_err(&n, OX_E_INVALID, "Gradient needs attributes xs (strings) and y");
        if (n.n_outputs != xs->n)
            return ox_node_err(&n, OX_E_INVALID, "Gradient has %d outputs for %d xs", n.n_outputs,
                               xs->n);
        int yv = ox_graph_find_value(g, y);
        if (yv < 0) return ox_node_err(&n, OX_E_INVALID, "Gradient: y '%s' is not a value", y);
        int *wrt = calloc((size_t)xs->n + 1, sizeof(int) * 2);
        if (!wrt) return ox_err(OX_E_NOMEM, "out of memory");
        int *grads = wrt + xs->n + 1;
        for (int k = 0; k < xs->n; k++) {
            wrt[k] = ox_graph_find_value(g, xs->strings[k]);
            if (wrt[k] < 0) {
                free(wrt);
                return ox_node_err(&n, OX_E_INVALID, "Gradient: xs '%s' is not a value",
                                   xs->strings[k]);
            }
        }
        /* take the node out; its outputs become Identity copies of the gradients */
        memmove(&g->nodes[at], &g->nodes[at + 1], sizeof n * (size_t)(g->n_nodes - at - 1));
        g->n_nodes--;
        for (int i = 0; i < g->n_nodes; i++)
            for (int k = 0; k < g->nodes[i].n_outputs; k++)
                if (g->nodes[i].outputs[k] >= 0) g->values[g->nodes[i].outputs[k]].producer = i;
        for (int k = 0; k < n.n_outputs; k++)
            if (n.outputs[k] >= 0) g->values[n.outputs[k]].producer = -1;
        /* the seed: ones shaped like y */
        ox_status st = raise_opset(g);
        int seed = -1;
        if (!st) {
            struct ox_ad ad = {.g = g, .opset = (int)ox_graph_opset(g, ""), .cur_name = n.name};
            if (grow(&ad)) {
                analyze(&ad, 1, &yv);
                seed = ox_ad_ones_like(&ad, yv);
            }
            st = ad.err;
            ad_free(&ad);
        }
        if (!st) {
            struct ox_ad_request r = {
                .n_of = 1, .of = &yv, .seeds = &seed, .n_wrt = xs->n, .wrt = wrt, .grads = grads};
            st = ox_autograd(g, &r);
        }
        for (int k = 0; !st && k < n.n_outputs; k++) {
            if (n.outputs[k] < 0) continue;
            struct ox_node *id =
                ox_graph_add_node(g, n.name, "", "Identity", 1, &grads[k], 1, &n.outputs[k]);
            if (!id)
                st = ox_err(OX_E_NOMEM, "out of memory");
            else {
                id->opset = (int)ox_graph_opset(g, "");
                id->op = ox_op_find("", "Identity", id->opset);
            }
        }
        free(wrt);
        ox_node_free_attrs(&n);
        if (!st) st = ox_graph_sort(g);
        if (st) return st;
    }
}
