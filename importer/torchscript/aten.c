/* ATen → ONNX: the operators of printed TorchScript (SPEC-torchscript.md §3.5, §6).
 *
 * One table row per name: the parameters as the schema orders them (with their defaults;
 * '*' starts the keyword-only ones) and a lowering that gets the bound arguments in that
 * order. Scalars, lists and strings are computed here at import time; tensor work becomes
 * ONNX nodes through ts_emit, which folds it when every input is constant. */
#include "importer/torchscript/eval.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXA 24

typedef ox_status (*lower_fn)(struct ev *e, struct tv **a, int n, struct tv **out);

struct aten_op {
    const char *name;
    const char *params; /* "self, other, *, alpha=1"; NULL: any arguments, unbound */
    lower_fn fn;
};

static ox_status op_str(struct ev *e, struct tv **a, int n, struct tv **out);
static ox_status make_filled(struct ev *e, struct tv *size, struct tv *dtype, double v,
                             ox_dtype dflt, struct tv **out);
static void note_view(struct tv *x, int64_t d, int64_t s, int64_t step, bool drop, struct tv *out);
static ox_status list_find(struct ev *e, struct tv **a, bool count, struct tv **out);
static ox_status op_clone(struct ev *e, struct tv **a, int n, struct tv **out);
/* A tensor of its own with x's value (what torch's ops return even where they compute
 * nothing), so that an in-place write to the result does not reach x. */
static ox_status fresh(struct ev *e, struct tv *x, struct tv **out) {
    return op_clone(e, &x, 1, out);
}
static ox_status op_adaptive_max_pool_any(struct ev *e, struct tv *x, int k, const int64_t *o,
                                          struct tv **out);

/* ---- small helpers --------------------------------------------------------------------- */

static ox_status oom(struct ev *e) {
    return ts_err(e, OX_E_NOMEM, "out of memory");
}

static bool is_t(const struct tv *v) {
    return v && v->k == TV_TENSOR;
}

static bool is_none(const struct tv *v) {
    return !v || v->k == TV_NONE;
}

static ox_status need_t(struct ev *e, const struct tv *v, const char *what) {
    if (is_t(v)) return OX_OK;
    return ts_err(e, OX_E_UNSUPPORTED, "%s: expected a tensor, got a %s", what,
                  v ? tv_kind_name(v->k) : "nothing");
}

static ox_dtype torch_dtype(int64_t st) { /* ScalarType numbers (SPEC §2.4) */
    static const ox_dtype map[] = {OX_UINT8,     OX_INT8,      OX_INT16,      OX_INT32,
                                   OX_INT64,     OX_FLOAT16,   OX_FLOAT,      OX_DOUBLE,
                                   OX_UNDEFINED, OX_COMPLEX64, OX_COMPLEX128, OX_BOOL,
                                   OX_UNDEFINED, OX_UNDEFINED, OX_UNDEFINED,  OX_BFLOAT16};
    return st >= 0 && st < (int64_t)(sizeof map / sizeof *map) ? map[st] : OX_UNDEFINED;
}

static int64_t torch_scalar_type(ox_dtype dt) {
    for (int64_t k = 0; k < 16; k++)
        if (torch_dtype(k) == dt) return k;
    return -1;
}

/* The element type a dtype= argument names (ScalarType number), or dflt when it is None. */
static ox_status dtype_arg(struct ev *e, const struct tv *v, ox_dtype dflt, ox_dtype *dt) {
    int64_t t;
    if (is_none(v)) return (*dt = dflt, OX_OK);
    ox_status st = tv_to_int(e, v, &t);
    if (st) return st;
    if ((*dt = torch_dtype(t)) == OX_UNDEFINED)
        return ts_err(e, OX_E_UNSUPPORTED, "dtype %lld", (long long)t);
    return OX_OK;
}

static ox_status cast(struct ev *e, struct tv *x, ox_dtype dt, struct tv **out);

/* x cast to the dtype= argument v; x itself when v is None. */
static ox_status as_dtype(struct ev *e, struct tv *x, const struct tv *v, struct tv **out) {
    ox_dtype dt;
    ox_status st = dtype_arg(e, v, x->dt, &dt);
    return st ? st : cast(e, x, dt, out);
}

/* The pair (a, b), as ops with two results return them. */
static ox_status tuple2(struct ev *e, struct tv *a, struct tv *b, struct tv **out) {
    *out = tv_list(e, TV_TUPLE, 2);
    if (!*out) return oom(e);
    (*out)->items[0] = a;
    (*out)->items[1] = b;
    return OX_OK;
}

/* A number as a tensor of dtype like (or of its own kind when like is undefined). */
static struct tv *num_tensor(struct ev *e, const struct tv *v, ox_dtype like) {
    if (like == OX_UNDEFINED)
        like = v->k == TV_FLOAT ? OX_FLOAT : v->k == TV_BOOL ? OX_BOOL : OX_INT64;
    return tv_scalar_tensor(e, tv_num(v), like);
}

static ox_status cast(struct ev *e, struct tv *x, ox_dtype dt, struct tv **out) {
    if (x->dt == dt) {
        *out = x;
        return OX_OK;
    }
    struct ts_attrs at = {0};
    ta_int(&at, "to", dt);
    return ts_emit1(e, "Cast", 1, &x, &at, out);
}

static int category(ox_dtype dt) { /* 0 bool, 1 int, 2 float */
    return dt == OX_BOOL ? 0 : ox_dtype_is_float(dt) ? 2 : 1;
}

/* PyTorch's type promotion for two operands (numbers become tensors): a 0-dim tensor or a
 * number adapts to the other operand within its category; otherwise the higher category
 * wins. */
static ox_status promote(struct ev *e, struct tv **a, struct tv **b) {
    if (!is_t(*a) && !is_t(*b)) return ts_err(e, OX_E_INTERNAL, "promote: no tensor");
    if (!is_t(*a)) {
        ox_dtype like = category((*b)->dt) >= category(((*a)->k == TV_FLOAT) ? OX_FLOAT : OX_INT64)
                            ? (*b)->dt
                            : OX_FLOAT;
        *a = num_tensor(e, *a, like);
        if (!*a) return oom(e);
    }
    if (!is_t(*b)) {
        ox_dtype like = category((*a)->dt) >= category(((*b)->k == TV_FLOAT) ? OX_FLOAT : OX_INT64)
                            ? (*a)->dt
                            : OX_FLOAT;
        *b = num_tensor(e, *b, like);
        if (!*b) return oom(e);
    }
    if ((*a)->dt == (*b)->dt) return OX_OK;
    int ca = category((*a)->dt), cb = category((*b)->dt);
    bool a0 = (*a)->rank == 0, b0 = (*b)->rank == 0;
    ox_dtype to;
    if (ca == cb)
        to = a0 && !b0                                            ? (*b)->dt
             : b0 && !a0                                          ? (*a)->dt
             : ox_dtype_size((*a)->dt) >= ox_dtype_size((*b)->dt) ? (*a)->dt
                                                                  : (*b)->dt;
    else
        to = ca > cb ? (*a)->dt : (*b)->dt;
    ox_status st = cast(e, *a, to, a);
    if (!st) st = cast(e, *b, to, b);
    return st;
}

static ox_status bin(struct ev *e, const char *op, struct tv *a, struct tv *b, struct tv **out) {
    ox_status st = promote(e, &a, &b);
    if (st) return st;
    struct tv *in[2] = {a, b};
    return ts_emit1(e, op, 2, in, NULL, out);
}

static ox_status un(struct ev *e, const char *op, struct tv *x, struct tv **out) {
    ox_status st = need_t(e, x, op);
    if (st) return st;
    return ts_emit1(e, op, 1, &x, NULL, out);
}

static ox_status reshape(struct ev *e, struct tv *x, int n, const int64_t *dims, struct tv **out) {
    struct tv *in[2] = {x, tv_i64s(e, n, dims)};
    if (!in[1]) return oom(e);
    return ts_emit1(e, "Reshape", 2, in, NULL, out);
}

static ox_status transpose(struct ev *e, struct tv *x, int n, const int64_t *perm,
                           struct tv **out) {
    struct ts_attrs at = {0};
    ta_ints(&at, "perm", n, perm);
    return ts_emit1(e, "Transpose", 1, &x, &at, out);
}

static ox_status axes_op(struct ev *e, const char *op, struct tv *x, int n, const int64_t *axes,
                         struct tv **out) {
    struct tv *in[2] = {x, tv_i64s(e, n, axes)};
    if (!in[1]) return oom(e);
    return ts_emit1(e, op, 2, in, NULL, out);
}

static ox_status slice1(struct ev *e, struct tv *x, int64_t axis, int64_t start, int64_t end,
                        int64_t step, struct tv **out) {
    struct tv *in[5] = {x, tv_i64s(e, 1, &start), tv_i64s(e, 1, &end), tv_i64s(e, 1, &axis),
                        tv_i64s(e, 1, &step)};
    for (int i = 1; i < 5; i++)
        if (!in[i]) return oom(e);
    return ts_emit1(e, "Slice", 5, in, NULL, out);
}

static ox_status concat(struct ev *e, int n, struct tv **xs, int64_t axis, struct tv **out) {
    struct ts_attrs at = {0};
    ta_int(&at, "axis", axis);
    return ts_emit1(e, "Concat", n, xs, &at, out);
}

static ox_status norm_dim(struct ev *e, int64_t d, int rank, int64_t *out) {
    if (rank < 0) return ts_err(e, OX_E_UNSUPPORTED, "a dimension of a tensor of unknown rank");
    int64_t r = rank ? rank : 1;
    if (d < -r || d >= r)
        return ts_err(e, OX_E_INVALID, "dimension %lld is out of range for rank %d", (long long)d,
                      rank);
    *out = d < 0 ? d + r : d;
    return OX_OK;
}

static ox_status ints(struct ev *e, const struct tv *v, int64_t *out, int *n) {
    return tv_to_ints(e, v, out, OX_MAX_RANK * 4, n);
}

/* ---- scalars and prim ops -------------------------------------------------------------- */

static ox_status scalar_arith(struct ev *e, const char *op, struct tv *a, struct tv *b,
                              struct tv **out) {
    bool fl = a->k == TV_FLOAT || b->k == TV_FLOAT;
    double x = tv_num(a), y = tv_num(b);
    int64_t i = a->k == TV_FLOAT ? 0 : (int64_t)tv_num(a),
            j = b->k == TV_FLOAT ? 0 : (int64_t)tv_num(b);
    if (!strcmp(op, "add"))
        *out = fl ? tv_float(e, x + y) : tv_int(e, i + j);
    else if (!strcmp(op, "sub"))
        *out = fl ? tv_float(e, x - y) : tv_int(e, i - j);
    else if (!strcmp(op, "mul"))
        *out = fl ? tv_float(e, x * y) : tv_int(e, i * j);
    else if (!strcmp(op, "div"))
        *out = tv_float(e, x / y);
    else if (!strcmp(op, "floordiv")) {
        if (!fl && j == 0) return ts_err(e, OX_E_INVALID, "integer division by zero");
        *out = fl ? tv_float(e, floor(x / y))
                  : tv_int(e, i / j - ((i % j != 0) && ((i < 0) != (j < 0))));
    } else if (!strcmp(op, "remainder")) {
        if (!fl && j == 0) return ts_err(e, OX_E_INVALID, "integer modulo by zero");
        *out = fl ? tv_float(e, x - floor(x / y) * y) : tv_int(e, ((i % j) + j) % j);
    } else if (!strcmp(op, "pow"))
        *out = fl || j < 0 ? tv_float(e, pow(x, y)) : tv_int(e, (int64_t)pow(x, y));
    else
        return ts_err(e, OX_E_INTERNAL, "scalar %s", op);
    return *out ? OX_OK : oom(e);
}

static ox_status compare_scalars(struct ev *e, const char *op, struct tv *a, struct tv *b,
                                 struct tv **out) {
    bool r;
    if (a->k == TV_STR && b->k == TV_STR) {
        int c = a->s_len == b->s_len ? memcmp(a->s, b->s, a->s_len) : 1;
        if (!strcmp(op, "eq"))
            r = c == 0;
        else if (!strcmp(op, "ne"))
            r = c != 0;
        else
            return ts_err(e, OX_E_UNSUPPORTED, "%s on strings", op);
    } else if (a->k == TV_NONE || b->k == TV_NONE) {
        bool same = a->k == b->k;
        if (!strcmp(op, "eq"))
            r = same;
        else if (!strcmp(op, "ne"))
            r = !same;
        else
            return ts_err(e, OX_E_UNSUPPORTED, "%s with None", op);
    } else if ((a->k == TV_LIST || a->k == TV_TUPLE) && (b->k == TV_LIST || b->k == TV_TUPLE) &&
               (!strcmp(op, "eq") || !strcmp(op, "ne"))) {
        bool same = a->n == b->n;
        for (int i = 0; i < a->n && same; i++) {
            struct tv *r;
            ox_status st = compare_scalars(e, "eq", a->items[i], b->items[i], &r);
            if (st) return st;
            same = r->b;
        }
        r = !strcmp(op, "eq") ? same : !same;
    } else if (tv_is_num(a) && tv_is_num(b)) {
        double x = tv_num(a), y = tv_num(b);
        r = !strcmp(op, "eq")   ? x == y
            : !strcmp(op, "ne") ? x != y
            : !strcmp(op, "lt") ? x < y
            : !strcmp(op, "le") ? x <= y
            : !strcmp(op, "gt") ? x > y
                                : x >= y;
    } else {
        return ts_err(e, OX_E_UNSUPPORTED, "%s of a %s and a %s", op, tv_kind_name(a->k),
                      tv_kind_name(b->k));
    }
    *out = tv_bool(e, r);
    return *out ? OX_OK : oom(e);
}

static ox_status op_int(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    if (a[0]->k == TV_FLOAT) {
        *out = tv_int(e, (int64_t)a[0]->f);
        return *out ? OX_OK : oom(e);
    }
    if (is_t(a[0]) && a[0]->cdata && ox_tensor_numel(a[0]->cdata) == 1) {
        *out = tv_int(e, (int64_t)ox_tensor_get(a[0]->cdata, 0));
        return *out ? OX_OK : oom(e);
    }
    int64_t v;
    ox_status st = tv_to_int(e, a[0], &v);
    if (st) return st;
    *out = tv_int(e, v);
    return *out ? OX_OK : oom(e);
}

static ox_status op_float(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    if (tv_is_num(a[0]))
        *out = tv_float(e, tv_num(a[0]));
    else if (is_t(a[0]) && a[0]->cdata && ox_tensor_numel(a[0]->cdata) == 1)
        *out = tv_float(e, ox_tensor_get(a[0]->cdata, 0));
    else
        return ts_err(e, OX_E_UNSUPPORTED, "float() of a %s not known at import time",
                      tv_kind_name(a[0]->k));
    return *out ? OX_OK : oom(e);
}

static ox_status op_bool(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    bool b;
    if (is_t(a[0]) && !a[0]->cdata) { /* known at run time only: an If decides on it */
        *out = a[0];
        return OX_OK;
    }
    if (!tv_truthy(a[0], &b))
        return ts_err(e, OX_E_UNSUPPORTED, "bool() of a %s computed at run time",
                      tv_kind_name(a[0]->k));
    *out = tv_bool(e, b);
    return *out ? OX_OK : oom(e);
}

static ox_status op_len(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct tv *v = a[0];
    if (v->k == TV_LIST || v->k == TV_TUPLE || v->k == TV_DICT)
        *out = tv_int(e, v->n);
    else if (v->k == TV_STR)
        *out = tv_int(e, (int64_t)v->s_len);
    else if (is_t(v) && v->rank > 0)
        *out = tv_int(e, v->dims[0]);
    else
        return ts_err(e, OX_E_UNSUPPORTED, "len() of a %s", tv_kind_name(v->k));
    return *out ? OX_OK : oom(e);
}

static ox_status op_range(struct ev *e, struct tv **a, int n, struct tv **out) {
    int64_t v[3] = {0, 0, 1};
    for (int k = 0; k < n && k < 3; k++) {
        ox_status st = tv_to_int(e, a[k], &v[k]);
        if (st) return st;
    }
    if (n == 1) {
        v[1] = v[0];
        v[0] = 0;
    }
    if (v[2] == 0) return ts_err(e, OX_E_INVALID, "range() with step 0");
    *out = tv_list(e, TV_TUPLE, 3);
    if (!*out) return oom(e);
    (*out)->s = "range";
    for (int k = 0; k < 3; k++)
        if (!((*out)->items[k] = tv_int(e, v[k]))) return oom(e);
    return OX_OK;
}

static ox_status op_getattr(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    if (a[0]->k != TV_OBJ || a[1]->k != TV_STR)
        return ts_err(e, OX_E_UNSUPPORTED, "getattr on a %s", tv_kind_name(a[0]->k));
    const struct ox_pv *pv =
        a[0]->obj && a[0]->obj->state ? ox_pv_get(a[0]->obj->state, a[1]->s) : NULL;
    if (!pv) return ts_err(e, OX_E_INVALID, "object has no attribute '%s'", a[1]->s);
    if (pv->kind != OX_PV_OBJECT)
        return ts_err(e, OX_E_UNSUPPORTED, "getattr of a non-module attribute '%s'", a[1]->s);
    *out = tv_new(e, TV_OBJ);
    if (!*out) return oom(e);
    (*out)->obj = pv;
    (*out)->cls = pv->cls;
    return OX_OK;
}

static ox_status op_getitem(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct tv *c = a[0], *i = a[1];
    if (c->k == TV_LIST || c->k == TV_TUPLE) {
        int64_t k;
        ox_status st = tv_to_int(e, i, &k);
        if (st) return st;
        if (k < 0) k += c->n;
        if (k < 0 || k >= c->n)
            return ts_err(e, OX_E_INVALID, "index %lld out of range", (long long)k);
        *out = c->items[k];
        return OX_OK;
    }
    if (c->k == TV_DICT) {
        for (int k = 0; k < c->n; k++) {
            struct tv *key = c->items[2 * k];
            bool same =
                key->k == i->k &&
                ((key->k == TV_STR && key->s_len == i->s_len && !memcmp(key->s, i->s, i->s_len)) ||
                 (tv_is_num(key) && tv_num(key) == tv_num(i)));
            if (same) {
                *out = c->items[2 * k + 1];
                return OX_OK;
            }
        }
        return ts_err(e, OX_E_INVALID, "key not in the dict");
    }
    if (is_t(c)) { /* tensor[i]: select along dim 0 */
        int64_t k;
        ox_status st = tv_to_int(e, i, &k);
        if (st) return st;
        struct tv *in[2] = {c, tv_scalar_tensor(e, (double)k, OX_INT64)};
        if (!in[1]) return oom(e);
        struct ts_attrs at = {0};
        ta_int(&at, "axis", 0);
        return ts_emit1(e, "Gather", 2, in, &at, out);
    }
    return ts_err(e, OX_E_UNSUPPORTED, "subscript of a %s", tv_kind_name(c->k));
}

static ox_status op_append(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct tv *l = a[0];
    if (l->k != TV_LIST) return ts_err(e, OX_E_UNSUPPORTED, "append to a %s", tv_kind_name(l->k));
    struct tv **items = ox_arena_alloc(&e->a, sizeof *items * (size_t)(l->n + 1));
    if (!items) return oom(e);
    if (l->n) memcpy(items, l->items, sizeof *items * (size_t)l->n);
    items[l->n] = a[1];
    l->items = items;
    l->n++;
    *out = l;
    return OX_OK;
}

static ox_status op_size(struct ev *e, struct tv **a, int n, struct tv **out) {
    struct tv *x = a[0];
    ox_status st = need_t(e, x, "size");
    if (st) return st;
    if (x->rank < 0) return ts_err(e, OX_E_UNSUPPORTED, "size() of a tensor of unknown shape");
    if (n > 1 && !is_none(a[1])) {
        int64_t d;
        st = tv_to_int(e, a[1], &d);
        if (!st) st = norm_dim(e, d, x->rank, &d);
        if (st) return st;
        *out = tv_int(e, x->dims[d]);
        return *out ? OX_OK : oom(e);
    }
    *out = tv_list(e, TV_LIST, x->rank);
    if (!*out) return oom(e);
    for (int d = 0; d < x->rank; d++)
        if (!((*out)->items[d] = tv_int(e, x->dims[d]))) return oom(e);
    return OX_OK;
}

static ox_status op_dim(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    ox_status st = need_t(e, a[0], "dim");
    if (st) return st;
    *out = tv_int(e, a[0]->rank);
    return *out ? OX_OK : oom(e);
}

static ox_status op_num_to_tensor(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    if (is_t(a[0])) {
        *out = a[0];
        return OX_OK;
    }
    if (!tv_is_num(a[0]))
        return ts_err(e, OX_E_UNSUPPORTED, "NumToTensor of a %s", tv_kind_name(a[0]->k));
    *out = num_tensor(e, a[0], OX_UNDEFINED);
    return *out ? OX_OK : oom(e);
}

static ox_status op_false(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)a;
    (void)n;
    *out = tv_bool(e, false);
    return *out ? OX_OK : oom(e);
}

static ox_status op_nothing(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)a;
    (void)n;
    *out = tv_none(e);
    return *out ? OX_OK : oom(e);
}

static ox_status op_device(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    *out = tv_new(e, TV_DEVICE);
    if (!*out) return oom(e);
    (*out)->s = a[0] && a[0]->k == TV_STR ? a[0]->s : "cpu";
    return OX_OK;
}

static ox_status op_prim_dtype(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    ox_status st = need_t(e, a[0], "dtype");
    if (st) return st;
    *out = tv_int(e, torch_scalar_type(a[0]->dt));
    return *out ? OX_OK : oom(e);
}

static ox_status op_is(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    bool same = (a[0]->k == TV_NONE && a[1]->k == TV_NONE) || a[0] == a[1];
    *out = tv_bool(e, same);
    return *out ? OX_OK : oom(e);
}

static ox_status op_isnot(struct ev *e, struct tv **a, int n, struct tv **out) {
    ox_status st = op_is(e, a, n, out);
    if (!st) (*out)->b = !(*out)->b;
    return st;
}

static ox_status op_not(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    bool b;
    if (!tv_truthy(a[0], &b)) return ts_err(e, OX_E_UNSUPPORTED, "not of a run-time value");
    *out = tv_bool(e, !b);
    return *out ? OX_OK : oom(e);
}

static ox_status op_and_or(struct ev *e, struct tv **a, bool is_and, struct tv **out) {
    bool x, y;
    if (!tv_truthy(a[0], &x) || !tv_truthy(a[1], &y))
        return ts_err(e, OX_E_UNSUPPORTED, "and/or of a run-time value");
    *out = tv_bool(e, is_and ? x && y : x || y);
    return *out ? OX_OK : oom(e);
}

static ox_status op_and(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    if (is_t(a[0]) || is_t(a[1])) return bin(e, "And", a[0], a[1], out);
    return op_and_or(e, a, true, out);
}

static ox_status op_or(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    if (is_t(a[0]) || is_t(a[1])) return bin(e, "Or", a[0], a[1], out);
    return op_and_or(e, a, false, out);
}

static ox_status op_contains(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct tv *c = a[0];
    bool found = false;
    if (c->k == TV_LIST || c->k == TV_TUPLE || c->k == TV_DICT) {
        int step = c->k == TV_DICT ? 2 : 1; /* a dict's keys */
        for (int k = 0; k < c->n; k++) {
            struct tv *r;
            if (compare_scalars(e, "eq", c->items[k * step], a[1], &r) == OX_OK && r->b)
                found = true;
        }
    } else if (c->k == TV_STR && a[1]->k == TV_STR) {
        for (size_t at = 0; !found && at + a[1]->s_len <= c->s_len; at++)
            found = memcmp(c->s + at, a[1]->s, a[1]->s_len) == 0;
    } else {
        return ts_err(e, OX_E_UNSUPPORTED, "'in' on a %s", tv_kind_name(c->k));
    }
    *out = tv_bool(e, found);
    return *out ? OX_OK : oom(e);
}

/* ---- arithmetic and comparisons -------------------------------------------------------- */

static ox_status arith(struct ev *e, const char *sop, const char *op, struct tv **a,
                       struct tv **out) {
    if (!is_t(a[0]) && !is_t(a[1])) return scalar_arith(e, sop, a[0], a[1], out);
    return bin(e, op, a[0], a[1], out);
}

/* alpha * other, when alpha is not 1 */
static ox_status scaled(struct ev *e, struct tv *other, struct tv *alpha, struct tv **out) {
    if (is_none(alpha) || (tv_is_num(alpha) && tv_num(alpha) == 1)) {
        *out = other;
        return OX_OK;
    }
    struct tv *pair[2] = {other, alpha};
    return arith(e, "mul", "Mul", pair, out);
}

static ox_status op_add(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    if (a[0]->k == TV_LIST && a[1]->k == TV_LIST) { /* list concatenation */
        *out = tv_list(e, TV_LIST, a[0]->n + a[1]->n);
        if (!*out) return oom(e);
        for (int k = 0; k < a[0]->n; k++) (*out)->items[k] = a[0]->items[k];
        for (int k = 0; k < a[1]->n; k++) (*out)->items[a[0]->n + k] = a[1]->items[k];
        return OX_OK;
    }
    struct tv *b;
    ox_status st = scaled(e, a[1], a[2], &b);
    if (st) return st;
    struct tv *pair[2] = {a[0], b};
    return arith(e, "add", "Add", pair, out);
}

/* x - alpha * y (sub: x = self; rsub: x = other, the operands swapped) */
static ox_status minus(struct ev *e, struct tv *x, struct tv *y, struct tv *alpha,
                       struct tv **out) {
    struct tv *b;
    ox_status st = scaled(e, y, alpha, &b);
    if (st) return st;
    struct tv *pair[2] = {x, b};
    return arith(e, "sub", "Sub", pair, out);
}

static ox_status op_sub(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    return minus(e, a[0], a[1], a[2], out);
}

static ox_status op_rsub(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    return minus(e, a[1], a[0], a[2], out);
}

static ox_status op_mul(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    return arith(e, "mul", "Mul", a, out);
}

static ox_status op_div(struct ev *e, struct tv **a, int n, struct tv **out) {
    const char *mode = n > 2 && a[2] && a[2]->k == TV_STR ? a[2]->s : NULL;
    if (!is_t(a[0]) && !is_t(a[1])) {
        if (mode && !strcmp(mode, "floor")) return scalar_arith(e, "floordiv", a[0], a[1], out);
        ox_status st = scalar_arith(e, "div", a[0], a[1], out);
        if (!st && mode && !strcmp(mode, "trunc")) (*out)->f = trunc((*out)->f);
        return st;
    }
    struct tv *x = a[0], *y = a[1];
    ox_status st = promote(e, &x, &y);
    if (st) return st;
    bool integral = !ox_dtype_is_float(x->dt);
    if (!mode && integral) { /* true division of integers gives floats */
        st = cast(e, x, OX_FLOAT, &x);
        if (!st) st = cast(e, y, OX_FLOAT, &y);
        if (st) return st;
    }
    struct tv *in[2] = {x, y}, *q;
    if (integral && mode && !strcmp(mode, "trunc")) return ts_emit1(e, "Div", 2, in, NULL, out);
    st = ts_emit1(e, "Div", 2, in, NULL, &q);
    if (st || !mode) {
        *out = q;
        return st;
    }
    if (!strcmp(mode, "floor")) {
        if (integral) { /* ONNX integer Div truncates: fix up negative quotients */
            struct tv *fx = NULL, *fy = NULL, *fq;
            st = cast(e, x, OX_DOUBLE, &fx);
            if (!st) st = cast(e, y, OX_DOUBLE, &fy);
            struct tv *d[2] = {fx, fy};
            if (!st) st = ts_emit1(e, "Div", 2, d, NULL, &fq);
            if (!st) st = un(e, "Floor", fq, &fq);
            if (!st) st = cast(e, fq, x->dt, out);
            return st;
        }
        return un(e, "Floor", q, out);
    }
    if (!strcmp(mode, "trunc")) { /* sign(q) * floor(|q|) */
        struct tv *s = NULL, *ab, *fl = NULL;
        st = un(e, "Sign", q, &s);
        if (!st) st = un(e, "Abs", q, &ab);
        if (!st) st = un(e, "Floor", ab, &fl);
        struct tv *m[2] = {s, fl};
        if (!st) st = ts_emit1(e, "Mul", 2, m, NULL, out);
        return st;
    }
    return ts_err(e, OX_E_UNSUPPORTED, "div with rounding_mode '%s'", mode);
}

static ox_status op_floordiv(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    if (!is_t(a[0]) && !is_t(a[1])) return scalar_arith(e, "floordiv", a[0], a[1], out);
    struct tv *b[3] = {a[0], a[1], tv_new(e, TV_STR)};
    if (!b[2]) return oom(e);
    b[2]->s = "floor";
    b[2]->s_len = 5;
    return op_div(e, b, 3, out);
}

static ox_status op_remainder(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    if (!is_t(a[0]) && !is_t(a[1])) return scalar_arith(e, "remainder", a[0], a[1], out);
    struct tv *x = a[0], *y = a[1];
    ox_status st = promote(e, &x, &y);
    if (st) return st;
    struct tv *in[2] = {x, y};
    struct ts_attrs at = {0};
    ta_int(&at, "fmod", ox_dtype_is_float(x->dt) ? 1 : 0);
    if (ox_dtype_is_float(x->dt)) { /* x - floor(x / y) * y: Python's sign rule */
        struct tv *q, *f = NULL, *m = NULL;
        st = ts_emit1(e, "Div", 2, in, NULL, &q);
        if (!st) st = un(e, "Floor", q, &f);
        struct tv *p[2] = {f, y};
        if (!st) st = ts_emit1(e, "Mul", 2, p, NULL, &m);
        struct tv *s[2] = {x, m};
        if (!st) st = ts_emit1(e, "Sub", 2, s, NULL, out);
        return st;
    }
    return ts_emit1(e, "Mod", 2, in, &at, out);
}

static ox_status op_pow(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    if (!is_t(a[0]) && !is_t(a[1])) return scalar_arith(e, "pow", a[0], a[1], out);
    return bin(e, "Pow", a[0], a[1], out); /* torch's promotion: int ** 0.5 is a float */
}

static ox_status cmp(struct ev *e, const char *sop, const char *op, bool negate, struct tv **a,
                     struct tv **out) {
    if (!is_t(a[0]) && !is_t(a[1])) return compare_scalars(e, sop, a[0], a[1], out);
    struct tv *r;
    ox_status st = bin(e, op, a[0], a[1], &r);
    if (st || !negate) {
        *out = r;
        return st;
    }
    return un(e, "Not", r, out);
}

#define COMPARE(fname, sop, onnx, negate)                                                          \
    static ox_status fname(struct ev *e, struct tv **a, int n, struct tv **out) {                  \
        (void)n;                                                                                   \
        return cmp(e, sop, onnx, negate, a, out);                                                  \
    }
COMPARE(op_eq, "eq", "Equal", false)
COMPARE(op_ne, "ne", "Equal", true)
COMPARE(op_lt, "lt", "Less", false)
COMPARE(op_le, "le", "LessOrEqual", false)
COMPARE(op_gt, "gt", "Greater", false)
COMPARE(op_ge, "ge", "GreaterOrEqual", false)

static ox_status op_neg(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    if (a[0]->k == TV_INT)
        *out = tv_int(e, -a[0]->i);
    else if (a[0]->k == TV_FLOAT)
        *out = tv_float(e, -a[0]->f);
    else
        return un(e, "Neg", a[0], out);
    return *out ? OX_OK : oom(e);
}

/* ---- elementwise and activations ------------------------------------------------------- */

/* math on a number (the scalar overloads, as math.sqrt): floor and ceil give ints */
static bool scalar_math(struct ev *e, const char *onnx, struct tv *x, struct tv **out) {
    if (!tv_is_num(x)) return false;
    double v = tv_num(x);
    if (!strcmp(onnx, "Sqrt"))
        *out = tv_float(e, sqrt(v));
    else if (!strcmp(onnx, "Exp"))
        *out = tv_float(e, exp(v));
    else if (!strcmp(onnx, "Log"))
        *out = tv_float(e, log(v));
    else if (!strcmp(onnx, "Floor"))
        *out = tv_int(e, (int64_t)floor(v));
    else if (!strcmp(onnx, "Ceil"))
        *out = tv_int(e, (int64_t)ceil(v));
    else if (!strcmp(onnx, "Abs"))
        *out = x->k == TV_INT ? tv_int(e, x->i < 0 ? -x->i : x->i) : tv_float(e, fabs(v));
    else if (!strcmp(onnx, "Sin"))
        *out = tv_float(e, sin(v));
    else if (!strcmp(onnx, "Cos"))
        *out = tv_float(e, cos(v));
    else if (!strcmp(onnx, "Tanh"))
        *out = tv_float(e, tanh(v));
    else if (!strcmp(onnx, "Erf"))
        *out = tv_float(e, erf(v));
    else
        return false;
    return true;
}

#define UNARY(fname, onnx)                                                                         \
    static ox_status fname(struct ev *e, struct tv **a, int n, struct tv **out) {                  \
        (void)n;                                                                                   \
        if (scalar_math(e, onnx, a[0], out)) return *out ? OX_OK : oom(e);                         \
        return un(e, onnx, a[0], out);                                                             \
    }
UNARY(op_relu, "Relu")
UNARY(op_sigmoid, "Sigmoid")
UNARY(op_tanh, "Tanh")
UNARY(op_exp, "Exp")
UNARY(op_log, "Log")
UNARY(op_sqrt, "Sqrt")
UNARY(op_abs, "Abs")
UNARY(op_erf, "Erf")
UNARY(op_floor, "Floor")
UNARY(op_ceil, "Ceil")
UNARY(op_sin, "Sin")
UNARY(op_cos, "Cos")
UNARY(op_reciprocal, "Reciprocal")
UNARY(op_silu_like, "HardSwish")
UNARY(op_logical_not, "Not")

static ox_status op_rsqrt(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct tv *s;
    ox_status st = un(e, "Sqrt", a[0], &s);
    return st ? st : un(e, "Reciprocal", s, out);
}

static ox_status op_silu(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct tv *s;
    ox_status st = un(e, "Sigmoid", a[0], &s);
    struct tv *in[2] = {a[0], s};
    return st ? st : ts_emit1(e, "Mul", 2, in, NULL, out);
}

static ox_status op_hardsigmoid(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct ts_attrs at = {0};
    ta_float(&at, "alpha", 1.0f / 6);
    ta_float(&at, "beta", 0.5f);
    ox_status st = need_t(e, a[0], "hardsigmoid");
    return st ? st : ts_emit1(e, "HardSigmoid", 1, &a[0], &at, out);
}

static ox_status op_gelu(struct ev *e, struct tv **a, int n, struct tv **out) {
    const char *approx = n > 1 && a[1] && a[1]->k == TV_STR ? a[1]->s : "none";
    struct tv *x = a[0];
    ox_status st = need_t(e, x, "gelu");
    if (st) return st;
    struct tv *half = num_tensor(e, tv_float(e, 0.5), x->dt),
              *one = num_tensor(e, tv_float(e, 1.0), x->dt);
    if (!half || !one) return oom(e);
    struct tv *inner;
    if (!strcmp(approx, "tanh")) { /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
        struct tv *c = num_tensor(e, tv_float(e, 0.044715), x->dt),
                  *k = num_tensor(e, tv_float(e, sqrt(2.0 / M_PI)), x->dt),
                  *three = num_tensor(e, tv_float(e, 3.0), x->dt);
        if (!c || !k || !three) return oom(e);
        struct tv *x3, *cx3, *sum, *ks;
        struct tv *p[2] = {x, three};
        st = ts_emit1(e, "Pow", 2, p, NULL, &x3);
        if (!st) st = bin(e, "Mul", x3, c, &cx3);
        if (!st) st = bin(e, "Add", x, cx3, &sum);
        if (!st) st = bin(e, "Mul", sum, k, &ks);
        if (!st) st = un(e, "Tanh", ks, &inner);
    } else {
        struct tv *r2 = num_tensor(e, tv_float(e, M_SQRT2), x->dt), *d;
        if (!r2) return oom(e);
        st = bin(e, "Div", x, r2, &d);
        if (!st) st = un(e, "Erf", d, &inner);
    }
    struct tv *p1, *xp;
    if (!st) st = bin(e, "Add", inner, one, &p1);
    if (!st) st = bin(e, "Mul", x, p1, &xp);
    if (!st) st = bin(e, "Mul", xp, half, out);
    return st;
}

static ox_status clip(struct ev *e, struct tv *x, struct tv *lo, struct tv *hi, struct tv **out) {
    ox_status st = need_t(e, x, "clamp");
    if (st) return st;
    struct tv *in[3] = {x, NULL, NULL};
    if (!is_none(lo)) in[1] = is_t(lo) ? lo : num_tensor(e, lo, x->dt);
    if (!is_none(hi)) in[2] = is_t(hi) ? hi : num_tensor(e, hi, x->dt);
    if ((!is_none(lo) && !in[1]) || (!is_none(hi) && !in[2])) return oom(e);
    for (int i = 1; i < 3; i++)
        if (in[i] && in[i]->dt != x->dt && (st = cast(e, in[i], x->dt, &in[i]))) return st;
    return ts_emit1(e, "Clip", 3, in, NULL, out);
}

static ox_status op_hardtanh(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    return clip(e, a[0], a[1], a[2], out);
}

static ox_status op_clamp(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    return clip(e, a[0], a[1], a[2], out);
}

static ox_status op_relu6(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct tv *lo = tv_float(e, 0), *hi = tv_float(e, 6);
    if (!lo || !hi) return oom(e);
    return clip(e, a[0], lo, hi, out);
}

static ox_status op_leaky_relu(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct ts_attrs at = {0};
    ta_float(&at, "alpha", (float)tv_num(a[1]));
    ox_status st = need_t(e, a[0], "leaky_relu");
    return st ? st : ts_emit1(e, "LeakyRelu", 1, &a[0], &at, out);
}

static ox_status op_identity(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)e;
    (void)n;
    *out = a[0];
    return OX_OK;
}

/* clone: a tensor of its own (in-place writes to it must not reach the original) */
static ox_status op_clone(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct tv *x = a[0];
    if (!is_t(x)) return (*out = x, OX_OK);
    if (x->cdata && x->vid < 0) { /* a constant: its own copy of the data */
        ox_tensor t = {0};
        if (ox_tensor_copy(&t, x->cdata)) return oom(e);
        return (*out = tv_const(e, &t)) ? OX_OK : oom(e);
    }
    if (!(*out = tv_new(e, TV_TENSOR))) return oom(e);
    **out = *x;
    (*out)->vbase = NULL;
    return OX_OK;
}

static ox_status op_softmax_like(struct ev *e, struct tv **a, const char *op, struct tv **out) {
    int64_t d;
    struct tv *x = a[0];
    ox_status st = need_t(e, x, op);
    if (!st) st = tv_to_int(e, a[1], &d);
    if (!st) st = norm_dim(e, d, x->rank, &d);
    if (!st) st = as_dtype(e, x, a[2], &x);
    if (st) return st;
    struct ts_attrs at = {0};
    ta_int(&at, "axis", d);
    return ts_emit1(e, op, 1, &x, &at, out);
}

static ox_status op_softmax(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    return op_softmax_like(e, a, "Softmax", out);
}

static ox_status op_log_softmax(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    return op_softmax_like(e, a, "LogSoftmax", out);
}

static ox_status op_masked_fill(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct tv *x = a[0], *m = a[1], *v = a[2];
    ox_status st = need_t(e, x, "masked_fill");
    if (st) return st;
    if (!is_t(v)) v = num_tensor(e, v, x->dt);
    if (!v) return oom(e);
    if (v->dt != x->dt && (st = cast(e, v, x->dt, &v))) return st;
    if (m->dt != OX_BOOL && (st = cast(e, m, OX_BOOL, &m))) return st;
    struct tv *in[3] = {m, v, x};
    return ts_emit1(e, "Where", 3, in, NULL, out);
}

static ox_status op_where(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct tv *c = a[0], *x = a[1], *y = a[2];
    if (!is_t(x) && !is_t(y)) { /* two numbers: the default float type, or int64 */
        bool fl = x->k == TV_FLOAT || y->k == TV_FLOAT;
        if (!(x = num_tensor(e, x,
                             fl                                   ? OX_FLOAT
                             : x->k == TV_BOOL && y->k == TV_BOOL ? OX_BOOL
                                                                  : OX_INT64)))
            return oom(e);
    }
    ox_status st = promote(e, &x, &y);
    if (!st && c->dt != OX_BOOL) st = cast(e, c, OX_BOOL, &c);
    struct tv *in[3] = {c, x, y};
    return st ? st : ts_emit1(e, "Where", 3, in, NULL, out);
}

/* ---- shapes ---------------------------------------------------------------------------- */

static bool view_of_any(struct tv *x, bool constants_only, struct tv **base, int64_t *off,
                        int64_t *strides);

/* The number of elements of a tensor of known rank. */
static int64_t tv_numel(const struct tv *x) {
    int64_t n = 1;
    for (int i = 0; i < x->rank; i++) n *= x->dims[i];
    return n;
}

/* Row-major strides of dims. */
static void natural_strides(int rank, const int64_t *dims, int64_t *strides) {
    int64_t st = 1;
    for (int d = rank - 1; d >= 0; d--) {
        strides[d] = st;
        st *= dims[d];
    }
}

/* The position in its base of a view's element at idx (offset off, strides str), then idx
 * moved to the next element in row-major order: a view's elements one by one. */
static int64_t view_step(int rank, const int64_t *dims, int64_t off, const int64_t *str,
                         int64_t *idx) {
    int64_t at = off;
    for (int d = 0; d < rank; d++) at += idx[d] * str[d];
    for (int d = rank - 1; d >= 0; d--) {
        if (++idx[d] < dims[d]) break;
        idx[d] = 0;
    }
    return at;
}

/* out holds x's elements in x's order (view, reshape, unsqueeze): when x is a contiguous view
 * (or a base), out is a view of the same base with out's natural strides. */
static void note_reshaped(struct tv *x, struct tv *out) {
    struct tv *base;
    int64_t off, str[OX_MAX_RANK], want = 1;
    if (out == x || out->rank < 0 || !view_of_any(x, false, &base, &off, str)) return;
    for (int d = x->rank - 1; d >= 0; d--) {
        if (x->dims[d] != 1 && str[d] != want) return; /* not contiguous: a copy in torch too */
        want *= x->dims[d];
    }
    out->vbase = base;
    out->voff = off;
    natural_strides(out->rank, out->dims, out->vstride);
}

static ox_status op_view(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    int64_t d[OX_MAX_RANK * 4];
    int k;
    ox_status st = need_t(e, a[0], "view");
    if (!st) st = ints(e, a[1], d, &k);
    if (!st) st = reshape(e, a[0], k, d, out);
    if (!st) note_reshaped(a[0], *out);
    return st;
}

static ox_status op_flatten(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct tv *x = a[0];
    int64_t s, t;
    ox_status st = need_t(e, x, "flatten");
    if (!st) st = tv_to_int(e, a[1], &s);
    if (!st) st = tv_to_int(e, a[2], &t);
    if (st) return st;
    if (x->rank == 0) return reshape(e, x, 1, (int64_t[]){1}, out);
    if ((st = norm_dim(e, s, x->rank, &s)) || (st = norm_dim(e, t, x->rank, &t))) return st;
    if (t == x->rank - 1 && s >= 0) {
        if (s == 1 || (s == 0 && x->rank == 1)) {
            struct ts_attrs at = {0};
            ta_int(&at, "axis", s == 0 ? 0 : 1);
            if (s == 1) return ts_emit1(e, "Flatten", 1, &x, &at, out);
        }
    }
    int64_t dims[OX_MAX_RANK];
    int r = 0;
    for (int i = 0; i < s; i++) dims[r++] = x->dims[i];
    int64_t p = 1;
    for (int64_t i = s; i <= t; i++) p *= x->dims[i];
    dims[r++] = p;
    for (int64_t i = t + 1; i < x->rank; i++) dims[r++] = x->dims[i];
    return reshape(e, x, r, dims, out);
}

static ox_status op_unflatten(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct tv *x = a[0];
    int64_t d, sizes[OX_MAX_RANK];
    int k;
    ox_status st = need_t(e, x, "unflatten");
    if (!st) st = tv_to_int(e, a[1], &d);
    if (!st) st = norm_dim(e, d, x->rank, &d);
    if (!st) st = tv_to_ints(e, a[2], sizes, OX_MAX_RANK, &k);
    if (st) return st;
    int64_t dims[OX_MAX_RANK];
    int r = 0;
    for (int i = 0; i < x->rank && r < OX_MAX_RANK; i++) {
        if (i == d)
            for (int j = 0; j < k && r < OX_MAX_RANK; j++) dims[r++] = sizes[j];
        else
            dims[r++] = x->dims[i];
    }
    return reshape(e, x, r, dims, out);
}

static ox_status op_transpose(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct tv *x = a[0];
    int64_t d0, d1;
    ox_status st = need_t(e, x, "transpose");
    if (!st) st = tv_to_int(e, a[1], &d0);
    if (!st) st = tv_to_int(e, a[2], &d1);
    if (!st) st = norm_dim(e, d0, x->rank, &d0);
    if (!st) st = norm_dim(e, d1, x->rank, &d1);
    if (st) return st;
    if (x->rank < 2) {
        *out = x;
        return OX_OK;
    }
    int64_t perm[OX_MAX_RANK];
    for (int i = 0; i < x->rank; i++) perm[i] = i;
    perm[d0] = d1;
    perm[d1] = d0;
    return transpose(e, x, x->rank, perm, out);
}

static ox_status op_t(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct tv *x = a[0];
    ox_status st = need_t(e, x, "t");
    if (st) return st;
    if (x->rank < 2) {
        *out = x;
        return OX_OK;
    }
    return transpose(e, x, 2, (int64_t[]){1, 0}, out);
}

static ox_status op_permute(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    int64_t p[OX_MAX_RANK * 4];
    int k;
    ox_status st = need_t(e, a[0], "permute");
    if (!st) st = ints(e, a[1], p, &k);
    if (st) return st;
    if (k != a[0]->rank)
        return ts_err(e, OX_E_INVALID, "permute of rank %d with %d dims", a[0]->rank, k);
    for (int i = 0; i < k; i++)
        if ((st = norm_dim(e, p[i], k, &p[i]))) return st;
    return transpose(e, a[0], k, p, out);
}

static ox_status op_unsqueeze(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    int64_t d;
    ox_status st = need_t(e, a[0], "unsqueeze");
    if (!st) st = tv_to_int(e, a[1], &d);
    if (st) return st;
    if (d < 0) d += a[0]->rank + 1;
    if (!(st = axes_op(e, "Unsqueeze", a[0], 1, &d, out))) note_reshaped(a[0], *out);
    return st;
}

static ox_status op_squeeze(struct ev *e, struct tv **a, int n, struct tv **out) {
    struct tv *x = a[0];
    ox_status st = need_t(e, x, "squeeze");
    if (st) return st;
    int64_t axes[OX_MAX_RANK];
    int k = 0;
    if (n > 1 && !is_none(a[1])) {
        int m;
        int64_t ds[OX_MAX_RANK];
        st = tv_to_ints(e, a[1], ds, OX_MAX_RANK, &m);
        if (st) return st;
        for (int i = 0; i < m; i++) {
            int64_t d = 0;
            if ((st = norm_dim(e, ds[i], x->rank, &d))) return st;
            if (x->rank > 0 && x->dims[d] == 1) axes[k++] = d; /* torch: no-op when not 1 */
        }
    } else {
        for (int i = 0; i < x->rank; i++)
            if (x->dims[i] == 1) axes[k++] = i;
    }
    if (!k) {
        *out = x;
        return OX_OK;
    }
    return axes_op(e, "Squeeze", x, k, axes, out);
}

static ox_status op_expand(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct tv *x = a[0];
    int64_t d[OX_MAX_RANK * 4];
    int k;
    ox_status st = need_t(e, x, "expand");
    if (!st) st = ints(e, a[1], d, &k);
    if (st) return st;
    for (int i = 0; i < k; i++) /* -1 keeps the input's size */
        if (d[i] == -1) {
            int src = i - (k - x->rank);
            d[i] = src >= 0 ? x->dims[src] : 1;
        }
    struct tv *in[2] = {x, tv_i64s(e, k, d)};
    return in[1] ? ts_emit1(e, "Expand", 2, in, NULL, out) : oom(e);
}

static ox_status op_repeat(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct tv *x = a[0];
    int64_t d[OX_MAX_RANK];
    int k;
    ox_status st = need_t(e, x, "repeat");
    if (!st) st = tv_to_ints(e, a[1], d, OX_MAX_RANK, &k);
    if (st) return st;
    while (x->rank < k) { /* leading dims added */
        int64_t z = 0;
        if ((st = axes_op(e, "Unsqueeze", x, 1, &z, &x))) return st;
    }
    struct tv *in[2] = {x, tv_i64s(e, k, d)};
    return in[1] ? ts_emit1(e, "Tile", 2, in, NULL, out) : oom(e);
}

static ox_status op_slice(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct tv *x = a[0];
    if (x->k == TV_LIST || x->k == TV_TUPLE || x->k == TV_STR) { /* list[start:end:step] */
        int64_t len = x->k == TV_STR ? (int64_t)x->s_len : x->n, s = 0, t = len, st1 = 1;
        ox_status st = OX_OK;
        if (!is_none(a[1])) st = tv_to_int(e, a[1], &s);
        if (!st && !is_none(a[2])) st = tv_to_int(e, a[2], &t);
        if (!st && !is_none(a[3])) st = tv_to_int(e, a[3], &st1);
        if (st) return st;
        if (st1 != 1) return ts_err(e, OX_E_UNSUPPORTED, "list slice with a step");
        if (s < 0) s += len;
        if (t < 0) t += len;
        s = s < 0 ? 0 : s > len ? len : s;
        t = t < s ? s : t > len ? len : t;
        if (x->k == TV_STR) {
            *out = tv_new(e, TV_STR);
            if (!*out) return oom(e);
            (*out)->s = ox_arena_strndup(&e->a, x->s + s, (size_t)(t - s));
            (*out)->s_len = (size_t)(t - s);
            return (*out)->s ? OX_OK : oom(e);
        }
        *out = tv_list(e, x->k, (int)(t - s));
        if (!*out) return oom(e);
        for (int64_t i = s; i < t; i++) (*out)->items[i - s] = x->items[i];
        return OX_OK;
    }
    return ts_err(e, OX_E_INTERNAL, "slice");
}

static ox_status op_tslice(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct tv *x = a[0];
    if (!is_t(x)) { /* a list slice, bound to the tensor schema: (l, start, end, step) */
        struct tv *b[4] = {x, a[1], a[2], a[3]};
        return op_slice(e, b, 4, out);
    }
    int64_t d, s = 0, t = INT64_MAX, step = 1;
    ox_status st = tv_to_int(e, a[1], &d);
    if (!st && !is_none(a[2])) st = tv_to_int(e, a[2], &s);
    if (!st && !is_none(a[3])) st = tv_to_int(e, a[3], &t);
    if (!st) st = tv_to_int(e, a[4], &step);
    if (!st) st = norm_dim(e, d, x->rank, &d);
    if (st) return st;
    if (s == 0 && t >= x->dims[d] && step == 1) { /* the whole axis */
        *out = x;
        return OX_OK;
    }
    st = slice1(e, x, d, s, t, step, out);
    if (!st) note_view(x, d, s, step, false, *out);
    return st;
}

/* The view mapping of x: its base (itself when not a view), the offset of its first element
 * and its strides there. False when x has no known shape, or (constants_only) when x is not
 * a changeable constant. Views are what slices and selects make (note_view). */
static bool view_of_any(struct tv *x, bool constants_only, struct tv **base, int64_t *off,
                        int64_t *strides) {
    if (x->vbase) {
        if (constants_only && (!x->cdata || x->vid >= 0 || !x->vbase->cdata || x->vbase->vid >= 0))
            return false;
        *base = x->vbase;
        *off = x->voff;
        memcpy(strides, x->vstride, sizeof(int64_t) * (size_t)x->rank);
        return true;
    }
    if (x->rank < 0 || (constants_only && (!x->cdata || x->vid >= 0))) return false;
    *base = x;
    *off = 0;
    natural_strides(x->rank, x->dims, strides);
    return true;
}

static bool view_of(struct tv *x, struct tv **base, int64_t *off, int64_t *strides) {
    return view_of_any(x, true, base, off, strides);
}

/* Record that `out` is x[d: s..t step] (or x[d = s] when drop) as a view of x's base. */
static void note_view(struct tv *x, int64_t d, int64_t s, int64_t step, bool drop, struct tv *out) {
    struct tv *base;
    int64_t off, str[OX_MAX_RANK];
    if (out == x || !view_of_any(x, false, &base, &off, str) || step <= 0) return;
    int64_t len = x->dims[d];
    if (s < 0) s += len;
    s = s < 0 ? 0 : s > len ? len : s;
    out->vbase = base;
    out->voff = off + s * str[d];
    int r = 0;
    for (int i = 0; i < x->rank; i++) {
        if (i == d && drop) continue;
        out->vstride[r++] = i == d ? str[i] * step : str[i];
    }
}

/* An in-place write: x takes val's values (cast and broadcast to x); when x is a view (slices
 * and selects of a base), the base takes them at x's positions (ScatterElements over the
 * flattened base). x and its base keep their identity, so that every name bound to them
 * sees the change; x stays a view of the base. */
static ox_status write_back(struct ev *e, struct tv *x, struct tv *val) {
    ox_status st = need_t(e, x, "in-place write");
    if (!st) st = need_t(e, val, "in-place write");
    if (st) return st;
    if (x->rank < 0)
        return ts_err(e, OX_E_UNSUPPORTED, "in-place write to a tensor of unknown rank");
    struct tv *target = x->vbase ? x->vbase : x;
    if (e->g != e->main_g && !(target->vid >= 0 && target->g == e->g))
        return ts_err(e, OX_E_UNSUPPORTED,
                      "an in-place write, inside an if on a value known only at run time, to a "
                      "tensor from outside it");
    if (val->dt != x->dt && (st = cast(e, val, x->dt, &val))) return st;
    bool same = val->rank == x->rank;
    for (int i = 0; same && i < x->rank; i++) same = val->dims[i] == x->dims[i];
    if (!same) {
        struct tv *in[2] = {val, tv_i64s(e, x->rank, x->dims)};
        if (!in[1]) return oom(e);
        if ((st = ts_emit1(e, "Expand", 2, in, NULL, &val))) return st;
    }
    struct tv *base = x->vbase;
    if (base) {
        int64_t numel = tv_numel(x), idx[OX_MAX_RANK] = {0}, all = -1;
        void *data;
        struct tv *pos = tv_const_new(e, OX_INT64, 1, &numel, &data), *fb, *fv, *nb;
        if (!pos) return oom(e);
        for (int64_t k = 0; k < numel; k++)
            ((int64_t *)data)[k] = view_step(x->rank, x->dims, x->voff, x->vstride, idx);
        if ((st = reshape(e, base, 1, &all, &fb)) || (st = reshape(e, val, 1, &all, &fv)))
            return st;
        struct ts_attrs at = {0};
        ta_int(&at, "axis", 0);
        struct tv *in[3] = {fb, pos, fv};
        if ((st = ts_emit1(e, "ScatterElements", 3, in, &at, &nb)) ||
            (st = reshape(e, nb, base->rank, base->dims, &nb)))
            return st;
        *base = *nb;
        base->vbase = NULL;
    }
    if (val->cdata && val->vid < 0 && (st = fresh(e, val, &val))) return st; /* own data */
    struct tv *vb = x->vbase;
    int64_t voff = x->voff, vstride[OX_MAX_RANK];
    memcpy(vstride, x->vstride, sizeof vstride);
    *x = *val;
    x->vbase = vb, x->voff = voff;
    memcpy(x->vstride, vstride, sizeof vstride);
    return OX_OK;
}

/* fill_(self, value): the constant self (and what it views) takes the value everywhere. */
static ox_status op_fill(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct tv *x = a[0], *base;
    int64_t off, str[OX_MAX_RANK];
    double v;
    if (tv_is_num(a[1]))
        v = tv_num(a[1]);
    else if (is_t(a[1]) && a[1]->cdata && ox_tensor_numel(a[1]->cdata) == 1)
        v = ox_tensor_get(a[1]->cdata, 0);
    else if (is_t(a[1]) && is_t(x)) { /* a run-time value */
        ox_status st = write_back(e, x, a[1]);
        return st ? st : (*out = x, OX_OK);
    } else
        return ts_err(e, OX_E_UNSUPPORTED, "fill_ with a %s", tv_kind_name(a[1]->k));
    if (!is_t(x) || !view_of(x, &base, &off, str)) { /* a run-time tensor */
        struct tv *c = is_t(x) ? tv_scalar_tensor(e, v, x->dt) : NULL;
        if (!is_t(x)) return need_t(e, x, "fill_");
        if (!c) return oom(e);
        ox_status st = write_back(e, x, c);
        return st ? st : (*out = x, OX_OK);
    }
    int64_t numel = ox_tensor_numel(x->cdata), idx[OX_MAX_RANK] = {0};
    for (int64_t k = 0; k < numel; k++) {
        ox_tensor_set((ox_tensor *)base->cdata, view_step(x->rank, x->dims, off, str, idx), v);
        ox_tensor_set((ox_tensor *)x->cdata, k, v);
    }
    *out = x;
    return OX_OK;
}

/* copy_(self, src): a constant self (and what it views) takes src's values. */
static ox_status op_copy_(struct ev *e, struct tv **a, int n, struct tv **out) {
    struct tv *src = a[1];
    if (tv_is_num(src) || (is_t(src) && src->cdata && ox_tensor_numel(src->cdata) == 1))
        return op_fill(e, a, n, out);
    struct tv *x = a[0], *base;
    int64_t off, str[OX_MAX_RANK];
    if (!is_t(x) || !is_t(src)) return need_t(e, is_t(x) ? src : x, "copy_");
    if (!view_of(x, &base, &off, str) || !src->cdata) { /* a run-time tensor or source */
        ox_status st = write_back(e, x, src);
        return st ? st : (*out = x, OX_OK);
    }
    int64_t numel = ox_tensor_numel(x->cdata), idx[OX_MAX_RANK] = {0};
    if (ox_tensor_numel(src->cdata) != numel || src->rank != x->rank) { /* broadcast */
        ox_status st = write_back(e, x, src);
        return st ? st : (*out = x, OX_OK);
    }
    for (int64_t k = 0; k < numel; k++) {
        double v = ox_tensor_get(src->cdata, k);
        ox_tensor_set((ox_tensor *)base->cdata, view_step(x->rank, x->dims, off, str, idx), v);
        ox_tensor_set((ox_tensor *)x->cdata, k, v);
    }
    *out = x;
    return OX_OK;
}

static ox_status op_new_filled(struct ev *e, struct tv **a, double v, struct tv **out) {
    ox_status st = need_t(e, a[0], "new_zeros");
    if (st) return st;
    struct tv *dt = a[2];
    if (is_none(dt)) {
        dt = tv_int(e, torch_scalar_type(a[0]->dt));
        if (!dt) return oom(e);
    }
    return make_filled(e, a[1], dt, v, a[0]->dt, out);
}

static ox_status op_new_zeros(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    return op_new_filled(e, a, 0, out);
}

static ox_status op_new_ones(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    return op_new_filled(e, a, 1, out);
}

static ox_status op_list_slice(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    return op_slice(e, a, 4, out);
}

static ox_status op_select(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct tv *x = a[0];
    int64_t d, i;
    ox_status st = need_t(e, x, "select");
    if (!st) st = tv_to_int(e, a[1], &d);
    if (!st) st = tv_to_int(e, a[2], &i);
    if (!st) st = norm_dim(e, d, x->rank, &d);
    if (st) return st;
    struct tv *in[2] = {x, tv_scalar_tensor(e, (double)i, OX_INT64)};
    if (!in[1]) return oom(e);
    struct ts_attrs at = {0};
    ta_int(&at, "axis", d);
    st = ts_emit1(e, "Gather", 2, in, &at, out);
    if (!st) note_view(x, d, i, 1, true, *out);
    return st;
}

/* x[indices]: advanced indexing with one index tensor (the others None): Gather. */
static ox_status op_index(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct tv *x = a[0], *l = a[1];
    if (x->k == TV_LIST || x->k == TV_TUPLE) return list_find(e, a, false, out); /* l.index(v) */
    ox_status st = need_t(e, x, "index");
    if (st) return st;
    if (l->k != TV_LIST && l->k != TV_TUPLE)
        return ts_err(e, OX_E_UNSUPPORTED, "index with a %s", tv_kind_name(l->k));
    int axis = -1;
    for (int i = 0; i < l->n; i++) {
        if (is_none(l->items[i])) continue;
        if (axis >= 0 || !is_t(l->items[i]))
            return ts_err(e, OX_E_UNSUPPORTED, "indexing with more than one index tensor");
        axis = i;
    }
    if (axis < 0) {
        *out = x;
        return OX_OK;
    }
    struct tv *idx = l->items[axis];
    if (idx->dt == OX_BOOL && idx->cdata && idx->rank == 1) { /* a constant mask: positions */
        int64_t cnt = 0, len = idx->dims[0];
        for (int64_t i = 0; i < len; i++) cnt += ox_tensor_get(idx->cdata, i) != 0;
        void *data;
        struct tv *pos = tv_const_new(e, OX_INT64, 1, &cnt, &data);
        if (!pos) return oom(e);
        for (int64_t i = 0, k = 0; i < len; i++)
            if (ox_tensor_get(idx->cdata, i) != 0) ((int64_t *)data)[k++] = i;
        idx = pos;
    }
    if (idx->dt == OX_BOOL)
        return ts_err(e, OX_E_UNSUPPORTED,
                      "indexing with a boolean mask computed at run time (the result's size "
                      "depends on the data)");
    struct tv *in[2] = {x, idx};
    struct ts_attrs at = {0};
    ta_int(&at, "axis", axis);
    return ts_emit1(e, "Gather", 2, in, &at, out);
}

/* "{} and {}".format(a, b): for messages (asserts); {} placeholders only. */
static ox_status op_format(struct ev *e, struct tv **a, int n, struct tv **out) {
    if (n < 1 || a[0]->k != TV_STR) return ts_err(e, OX_E_UNSUPPORTED, "format of a non-string");
    char buf[2048];
    size_t w = 0;
    int next = 1;
    for (size_t i = 0; i < a[0]->s_len && w + 1 < sizeof buf; i++) {
        if (a[0]->s[i] == '{' && i + 1 < a[0]->s_len && a[0]->s[i + 1] == '}' && next < n) {
            struct tv *sv;
            ox_status st = op_str(e, &a[next++], 1, &sv);
            if (st) return st;
            size_t k = sv->s_len < sizeof buf - 1 - w ? sv->s_len : sizeof buf - 1 - w;
            memcpy(buf + w, sv->s, k);
            w += k;
            i++;
            continue;
        }
        buf[w++] = a[0]->s[i];
    }
    *out = tv_new(e, TV_STR);
    if (!*out) return oom(e);
    (*out)->s = ox_arena_strndup(&e->a, buf, w);
    (*out)->s_len = w;
    return (*out)->s ? OX_OK : oom(e);
}

/* The (self, dim, index, ...) operators' first three: two tensors and self's dim *d. */
static ox_status self_dim_index(struct ev *e, struct tv **a, const char *what, int64_t *d) {
    ox_status st = need_t(e, a[0], what);
    if (!st && !is_t(a[2]))
        st = ts_err(e, OX_E_UNSUPPORTED, "%s: the index is a %s, not a tensor", what,
                    tv_kind_name(a[2]->k));
    if (!st) st = tv_to_int(e, a[1], d);
    return st ? st : norm_dim(e, *d, a[0]->rank, d);
}

static ox_status op_index_select(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    int64_t d;
    ox_status st = self_dim_index(e, a, "index_select", &d);
    if (st) return st;
    struct tv *in[2] = {a[0], a[2]};
    struct ts_attrs at = {0};
    ta_int(&at, "axis", d);
    return ts_emit1(e, "Gather", 2, in, &at, out);
}

static ox_status list_of_tensors(struct ev *e, const struct tv *l, const char *what) {
    if (l->k != TV_LIST && l->k != TV_TUPLE)
        return ts_err(e, OX_E_UNSUPPORTED, "%s of a %s", what, tv_kind_name(l->k));
    if (l->n < 1 || l->n > TS_MAX_IN)
        return ts_err(e, OX_E_UNSUPPORTED, "%s of %d tensors", what, l->n);
    for (int i = 0; i < l->n; i++)
        if (!is_t(l->items[i]))
            return ts_err(e, OX_E_UNSUPPORTED, "%s: item %d is no tensor", what, i);
    return OX_OK;
}

static ox_status op_cat(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    int64_t d;
    ox_status st = list_of_tensors(e, a[0], "cat");
    if (!st) st = tv_to_int(e, a[1], &d);
    if (!st) st = norm_dim(e, d, a[0]->items[0]->rank, &d);
    if (st) return st;
    if (a[0]->n == 1) return fresh(e, a[0]->items[0], out);
    return concat(e, a[0]->n, a[0]->items, d, out);
}

static ox_status op_stack(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    int64_t d;
    ox_status st = list_of_tensors(e, a[0], "stack");
    if (!st) st = tv_to_int(e, a[1], &d);
    if (st) return st;
    int r = a[0]->items[0]->rank;
    if (d < 0) d += r + 1;
    struct tv *u[TS_MAX_IN];
    for (int i = 0; i < a[0]->n; i++)
        if ((st = axes_op(e, "Unsqueeze", a[0]->items[i], 1, &d, &u[i]))) return st;
    if (a[0]->n == 1) {
        *out = u[0];
        return OX_OK;
    }
    return concat(e, a[0]->n, u, d, out);
}

/* chunk / split into pieces of the given sizes along d */
static ox_status split_sizes(struct ev *e, struct tv *x, int64_t d, int k, const int64_t *sizes,
                             struct tv **out) {
    *out = tv_list(e, TV_LIST, k);
    if (!*out) return oom(e);
    int64_t at = 0;
    for (int i = 0; i < k; i++) {
        ox_status st = slice1(e, x, d, at, at + sizes[i], 1, &(*out)->items[i]);
        if (st) return st;
        note_view(x, d, at, 1, false, (*out)->items[i]); /* chunks and splits are views */
        at += sizes[i];
    }
    return OX_OK;
}

static ox_status op_chunk(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct tv *x = a[0];
    int64_t chunks, d;
    ox_status st = need_t(e, x, "chunk");
    if (!st) st = tv_to_int(e, a[1], &chunks);
    if (!st) st = tv_to_int(e, a[2], &d);
    if (!st) st = norm_dim(e, d, x->rank, &d);
    if (st) return st;
    if (chunks < 1 || chunks > 1024)
        return ts_err(e, OX_E_INVALID, "chunk into %lld", (long long)chunks);
    int64_t len = x->dims[d], each = (len + chunks - 1) / chunks, sizes[1024];
    int k = 0;
    for (int64_t at = 0; at < len; at += each) sizes[k++] = at + each <= len ? each : len - at;
    return split_sizes(e, x, d, k, sizes, out);
}

static ox_status op_split(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct tv *x = a[0];
    int64_t d, sizes[1024];
    int k = 0;
    ox_status st = need_t(e, x, "split");
    if (!st) st = tv_to_int(e, a[2], &d);
    if (!st) st = norm_dim(e, d, x->rank, &d);
    if (st) return st;
    if (a[1]->k == TV_INT) {
        int64_t each = a[1]->i, len = x->dims[d];
        if (each < 1) return ts_err(e, OX_E_INVALID, "split size %lld", (long long)each);
        for (int64_t at = 0; at < len && k < 1024; at += each)
            sizes[k++] = at + each <= len ? each : len - at;
    } else if ((st = tv_to_ints(e, a[1], sizes, 1024, &k))) {
        return st;
    }
    return split_sizes(e, x, d, k, sizes, out);
}

static ox_status op_to(struct ev *e, struct tv **a, int n, struct tv **out) {
    struct tv *x = a[0];
    ox_status st = need_t(e, x, "to");
    if (st) return st;
    /* to(dtype, ...), to(device, dtype, ...), to(other tensor, ...) */
    for (int i = 1; i < n; i++) {
        if (a[i] && a[i]->k == TV_INT) {
            ox_dtype dt = torch_dtype(a[i]->i);
            if (dt == OX_UNDEFINED)
                return ts_err(e, OX_E_UNSUPPORTED, "dtype %lld", (long long)a[i]->i);
            return cast(e, x, dt, out);
        }
        if (is_t(a[i])) return cast(e, x, a[i]->dt, out);
        if (a[i] && a[i]->k == TV_BOOL) break; /* non_blocking: no dtype given */
    }
    *out = x;
    return OX_OK;
}

static ox_status op_type_as(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    return cast(e, a[0], a[1]->dt, out);
}

static ox_status make_filled(struct ev *e, struct tv *size, struct tv *dtype, double v,
                             ox_dtype dflt, struct tv **out) {
    int64_t d[OX_MAX_RANK];
    int k;
    ox_status st = tv_to_ints(e, size, d, OX_MAX_RANK, &k);
    if (st) return st;
    ox_dtype dt;
    if ((st = dtype_arg(e, dtype, dflt, &dt))) return st;
    *out = tv_const_new(e, dt, k, d, NULL);
    if (!*out) return oom(e);
    int64_t numel = ox_tensor_numel((*out)->cdata);
    if (v != 0)
        for (int64_t i = 0; i < numel; i++) ox_tensor_set((ox_tensor *)(*out)->cdata, i, v);
    return OX_OK;
}

static ox_status op_zeros(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    return make_filled(e, a[0], a[1], 0, OX_FLOAT, out);
}

static ox_status op_ones(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    return make_filled(e, a[0], a[1], 1, OX_FLOAT, out);
}

static ox_status op_full(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    return make_filled(e, a[0], a[2], tv_num(a[1]),
                       a[1]->k == TV_FLOAT  ? OX_FLOAT
                       : a[1]->k == TV_BOOL ? OX_BOOL
                                            : OX_INT64,
                       out);
}

/* A constant of x's shape, element type dt, every element v. */
static ox_status filled_like(struct ev *e, const struct tv *x, ox_dtype dt, double v,
                             struct tv **out) {
    *out = tv_const_new(e, dt, x->rank, x->dims, NULL);
    if (!*out) return oom(e);
    int64_t numel = ox_tensor_numel((*out)->cdata);
    if (v != 0)
        for (int64_t i = 0; i < numel; i++) ox_tensor_set((ox_tensor *)(*out)->cdata, i, v);
    return OX_OK;
}

static ox_status like(struct ev *e, struct tv **a, double v, struct tv **out) {
    struct tv *x = a[0];
    ox_dtype dt;
    ox_status st = need_t(e, x, "*_like");
    if (!st) st = dtype_arg(e, a[1], x->dt, &dt);
    return st ? st : filled_like(e, x, dt, v, out);
}

static ox_status op_zeros_like(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    return like(e, a, 0, out);
}

static ox_status op_ones_like(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    return like(e, a, 1, out);
}

static ox_status op_tensor(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct tv *v = a[0];
    ox_dtype dt;
    ox_status st = dtype_arg(e, a[1],
                             v->k == TV_FLOAT  ? OX_FLOAT
                             : v->k == TV_BOOL ? OX_BOOL
                                               : OX_INT64,
                             &dt);
    if (st) return st;
    if (tv_is_num(v)) {
        *out = tv_scalar_tensor(e, tv_num(v), dt);
        return *out ? OX_OK : oom(e);
    }
    if (v->k == TV_LIST) {
        int64_t d = v->n;
        bool fl = false;
        for (int i = 0; i < v->n; i++) {
            if (!tv_is_num(v->items[i]))
                return ts_err(e, OX_E_UNSUPPORTED, "tensor() of nested lists");
            fl |= v->items[i]->k == TV_FLOAT;
        }
        if (is_none(a[1]) && fl) dt = OX_FLOAT;
        *out = tv_const_new(e, dt, 1, &d, NULL);
        if (!*out) return oom(e);
        for (int i = 0; i < v->n; i++)
            ox_tensor_set((ox_tensor *)(*out)->cdata, i, tv_num(v->items[i]));
        return OX_OK;
    }
    return ts_err(e, OX_E_UNSUPPORTED, "tensor() of a %s", tv_kind_name(v->k));
}

/* ---- reductions ------------------------------------------------------------------------ */

static ox_status reduce(struct ev *e, const char *op, struct tv *x, struct tv *dims,
                        struct tv *keep, struct tv *dtype, struct tv **out) {
    ox_status st = need_t(e, x, op);
    if (st) return st;
    if (!is_none(dtype)) {
        if ((st = as_dtype(e, x, dtype, &x))) return st;
    } else if (!strcmp(op, "ReduceSum") && !ox_dtype_is_float(x->dt) && x->dt != OX_INT64) {
        if ((st = cast(e, x, OX_INT64, &x))) return st; /* torch sums integers as int64 */
    }
    int64_t axes[OX_MAX_RANK];
    int k = 0;
    if (!is_none(dims)) {
        if ((st = tv_to_ints(e, dims, axes, OX_MAX_RANK, &k))) return st;
        for (int i = 0; i < k; i++)
            if ((st = norm_dim(e, axes[i], x->rank, &axes[i]))) return st;
    }
    if (k == 0)
        for (int i = 0; i < x->rank; i++) axes[k++] = i;
    bool kd = false;
    if (!is_none(keep) && !tv_truthy(keep, &kd)) return ts_err(e, OX_E_UNSUPPORTED, "keepdim");
    struct ts_attrs at = {0};
    ta_int(&at, "keepdims", kd);
    if (!strcmp(op, "ReduceSum")) {
        struct tv *in[2] = {x, tv_i64s(e, k, axes)};
        return in[1] ? ts_emit1(e, op, 2, in, &at, out) : oom(e);
    }
    ta_ints(&at, "axes", k, axes);
    return ts_emit1(e, op, 1, &x, &at, out);
}

static ox_status op_sum(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    if (a[0]->k == TV_LIST) { /* sum of a list of numbers */
        double s = 0;
        bool fl = false;
        for (int i = 0; i < a[0]->n; i++) {
            if (!tv_is_num(a[0]->items[i])) return ts_err(e, OX_E_UNSUPPORTED, "sum of a list");
            s += tv_num(a[0]->items[i]);
            fl |= a[0]->items[i]->k == TV_FLOAT;
        }
        *out = fl ? tv_float(e, s) : tv_int(e, (int64_t)s);
        return *out ? OX_OK : oom(e);
    }
    return reduce(e, "ReduceSum", a[0], a[1], a[2], a[3], out);
}

static ox_status op_mean(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    return reduce(e, "ReduceMean", a[0], a[1], a[2], a[3], out);
}

static ox_status op_amax(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    return reduce(e, "ReduceMax", a[0], a[1], a[2], NULL, out);
}

static ox_status op_max(struct ev *e, struct tv **a, int n, struct tv **out) {
    if (n >= 2 && a[1] && is_t(a[1])) return bin(e, "Max", a[0], a[1], out);
    if (!is_t(a[0])) { /* max of numbers or a list */
        if (a[0]->k == TV_LIST) {
            if (!a[0]->n) return ts_err(e, OX_E_INVALID, "max() of an empty list");
            *out = a[0]->items[0];
            for (int i = 1; i < a[0]->n; i++)
                if (tv_num(a[0]->items[i]) > tv_num(*out)) *out = a[0]->items[i];
            return OX_OK;
        }
        *out = tv_num(a[0]) >= tv_num(a[1]) ? a[0] : a[1];
        return OX_OK;
    }
    if (n >= 2 && a[1] && !is_none(a[1])) { /* max(x, dim, keepdim) -> (values, indices) */
        struct tv *v, *i;
        ox_status st = reduce(e, "ReduceMax", a[0], a[1], n > 2 ? a[2] : NULL, NULL, &v);
        if (st) return st;
        int64_t d;
        if ((st = tv_to_int(e, a[1], &d)) || (st = norm_dim(e, d, a[0]->rank, &d))) return st;
        bool kd = false;
        if (n > 2 && a[2]) tv_truthy(a[2], &kd);
        struct ts_attrs at = {0};
        ta_int(&at, "axis", d);
        ta_int(&at, "keepdims", kd);
        if ((st = ts_emit1(e, "ArgMax", 1, &a[0], &at, &i))) return st;
        return tuple2(e, v, i, out);
    }
    return reduce(e, "ReduceMax", a[0], NULL, NULL, NULL, out);
}

static ox_status op_prim_max(struct ev *e, struct tv **a, int n, struct tv **out) {
    return op_max(e, a, n, out);
}

static ox_status op_min(struct ev *e, struct tv **a, int n, struct tv **out) {
    if (n >= 2 && a[1] && is_t(a[1])) return bin(e, "Min", a[0], a[1], out);
    if (!is_t(a[0])) {
        if (a[0]->k == TV_LIST) {
            if (!a[0]->n) return ts_err(e, OX_E_INVALID, "min() of an empty list");
            *out = a[0]->items[0];
            for (int i = 1; i < a[0]->n; i++)
                if (tv_num(a[0]->items[i]) < tv_num(*out)) *out = a[0]->items[i];
            return OX_OK;
        }
        *out = tv_num(a[0]) <= tv_num(a[1]) ? a[0] : a[1];
        return OX_OK;
    }
    return reduce(e, "ReduceMin", a[0], n > 1 ? a[1] : NULL, n > 2 ? a[2] : NULL, NULL, out);
}

/* ---- linear algebra -------------------------------------------------------------------- */

static ox_status linear(struct ev *e, struct tv *x, struct tv *w, struct tv *b, struct tv **out) {
    ox_status st = need_t(e, x, "linear");
    if (!st) st = need_t(e, w, "linear weight");
    if (st) return st;
    if (x->rank == 2 && w->rank == 2) {
        struct ts_attrs at = {0};
        ta_int(&at, "transB", 1);
        struct tv *in[3] = {x, w, is_none(b) ? NULL : b};
        return ts_emit1(e, "Gemm", is_none(b) ? 2 : 3, in, &at, out);
    }
    struct tv *wt, *y;
    st = transpose(e, w, 2, (int64_t[]){1, 0}, &wt);
    struct tv *in[2] = {x, wt};
    if (!st) st = ts_emit1(e, "MatMul", 2, in, NULL, &y);
    if (st) return st;
    if (is_none(b)) {
        *out = y;
        return OX_OK;
    }
    struct tv *s[2] = {y, b};
    return ts_emit1(e, "Add", 2, s, NULL, out);
}

static ox_status op_linear(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    return linear(e, a[0], a[1], a[2], out);
}

static ox_status op_matmul(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct tv *x = a[0], *y = a[1];
    ox_status st = promote(e, &x, &y);
    struct tv *in[2] = {x, y};
    return st ? st : ts_emit1(e, "MatMul", 2, in, NULL, out);
}

static ox_status op_addmm(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* beta * self + alpha * (m1 @ m2) */
    struct ts_attrs at = {0};
    ta_float(&at, "beta", (float)tv_num(a[3]));
    ta_float(&at, "alpha", (float)tv_num(a[4]));
    struct tv *in[3] = {a[1], a[2], a[0]};
    return ts_emit1(e, "Gemm", 3, in, &at, out);
}

static ox_status op_baddbmm(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct tv *p, *in[2] = {a[1], a[2]};
    ox_status st = ts_emit1(e, "MatMul", 2, in, NULL, &p);
    if (!st && tv_num(a[4]) != 1) st = bin(e, "Mul", p, a[4], &p);
    struct tv *c = a[0];
    if (!st && tv_num(a[3]) != 1) st = bin(e, "Mul", c, a[3], &c);
    if (!st) st = bin(e, "Add", c, p, out);
    return st;
}

static ox_status op_embedding(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct tv *in[2] = {a[0], a[1]}; /* embedding(weight, indices, ...) */
    struct ts_attrs at = {0};
    ta_int(&at, "axis", 0);
    return ts_emit1(e, "Gather", 2, in, &at, out);
}

/* ---- convolution, pooling, normalization ----------------------------------------------- */

static ox_status expand_list(struct ev *e, struct tv *v, int k, int64_t *out) {
    int m;
    int64_t tmp[OX_MAX_RANK];
    ox_status st = tv_to_ints(e, v, tmp, OX_MAX_RANK, &m);
    if (st) return st;
    if (m < 1) return ts_err(e, OX_E_INVALID, "an empty list for %d spatial dims", k);
    for (int i = 0; i < k; i++) out[i] = m == 1 ? tmp[0] : i < m ? tmp[i] : tmp[m - 1];
    if (m != 1 && m != k) return ts_err(e, OX_E_INVALID, "%d values for %d spatial dims", m, k);
    return OX_OK;
}

static ox_status conv(struct ev *e, struct tv *x, struct tv *w, struct tv *b, struct tv *stride,
                      struct tv *padding, struct tv *dilation, bool transposed, struct tv *out_pad,
                      struct tv *groups, struct tv **out) {
    ox_status st = need_t(e, x, "convolution");
    if (!st) st = need_t(e, w, "convolution weight");
    if (st) return st;
    int k = w->rank - 2;
    if (k < 1 || k > 3) return ts_err(e, OX_E_UNSUPPORTED, "a %d-D convolution", k);
    int64_t s[3], p[6], d[3], op[3], ks[3], g;
    if ((st = expand_list(e, stride, k, s)) || (st = expand_list(e, dilation, k, d)) ||
        (st = tv_to_int(e, groups, &g)))
        return st;
    struct ts_attrs at = {0};
    if (padding->k == TV_STR) {
        if (!strcmp(padding->s, "valid")) {
            for (int i = 0; i < 2 * k; i++) p[i] = 0;
        } else if (!strcmp(padding->s, "same")) { /* torch puts the odd pixel at the end */
            for (int i = 0; i < k; i++) {
                int64_t total = d[i] * (w->dims[2 + i] - 1);
                p[i] = total / 2;
                p[k + i] = total - total / 2;
            }
        } else {
            return ts_err(e, OX_E_UNSUPPORTED, "padding '%s'", padding->s);
        }
    } else {
        if ((st = expand_list(e, padding, k, p))) return st;
        for (int i = 0; i < k; i++) p[k + i] = p[i];
    }
    for (int i = 0; i < k; i++) ks[i] = w->dims[2 + i];
    ta_ints(&at, "strides", k, s);
    ta_ints(&at, "pads", 2 * k, p);
    ta_ints(&at, "dilations", k, d);
    ta_int(&at, "group", g);
    ta_ints(&at, "kernel_shape", k, ks);
    struct tv *in[3] = {x, w, is_none(b) ? NULL : b};
    if (transposed) {
        if ((st = expand_list(e, out_pad, k, op))) return st;
        ta_ints(&at, "output_padding", k, op);
        return ts_emit1(e, "ConvTranspose", is_none(b) ? 2 : 3, in, &at, out);
    }
    return ts_emit1(e, "Conv", is_none(b) ? 2 : 3, in, &at, out);
}

static ox_status op_convolution(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    bool tr = false;
    tv_truthy(a[6], &tr);
    return conv(e, a[0], a[1], a[2], a[3], a[4], a[5], tr, a[7], a[8], out);
}

static ox_status op_convnd(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    return conv(e, a[0], a[1], a[2], a[3], a[4], a[5], false, NULL, a[6], out);
}

static ox_status op_conv_transpose(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* conv_transpose2d(input, weight, bias, stride, padding, output_padding, groups,
               dilation) */
    return conv(e, a[0], a[1], a[2], a[3], a[4], a[7], true, a[5], a[6], out);
}

static ox_status op_batch_norm(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct tv *x = a[0], *w = a[1], *b = a[2], *mean = a[3], *var = a[4];
    ox_status st = need_t(e, x, "batch_norm");
    if (st) return st;
    if (is_none(mean) || is_none(var))
        return ts_err(e, OX_E_UNSUPPORTED, "batch_norm without running statistics");
    int64_t c = x->rank > 1 ? x->dims[1] : 1;
    if (is_none(w)) { /* no affine weight: ones */
        if (!(w = tv_const_new(e, x->dt, 1, &c, NULL))) return oom(e);
        for (int64_t i = 0; i < c; i++) ox_tensor_set((ox_tensor *)w->cdata, i, 1.0);
    }
    if (is_none(b) && !(b = tv_const_new(e, x->dt, 1, &c, NULL))) return oom(e);
    struct ts_attrs at = {0};
    ta_float(&at, "epsilon", (float)tv_num(a[7]));
    ta_float(&at, "momentum", (float)(1 - tv_num(a[6])));
    struct tv *in[5] = {x, w, b, mean, var};
    return ts_emit1(e, "BatchNormalization", 5, in, &at, out);
}

static ox_status op_layer_norm(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct tv *x = a[0];
    int64_t shape[OX_MAX_RANK];
    int k;
    ox_status st = need_t(e, x, "layer_norm");
    if (!st) st = tv_to_ints(e, a[1], shape, OX_MAX_RANK, &k);
    if (st) return st;
    struct tv *w = a[2], *b = a[3];
    if (is_none(w)) {
        void *d;
        if (!(w = tv_const_new(e, x->dt, k, shape, &d))) return oom(e);
        for (int64_t i = 0; i < ox_tensor_numel(w->cdata); i++)
            ox_tensor_set((ox_tensor *)w->cdata, i, 1.0);
    }
    struct ts_attrs at = {0};
    ta_int(&at, "axis", -k);
    ta_float(&at, "epsilon", (float)tv_num(a[4]));
    struct tv *in[3] = {x, w, is_none(b) ? NULL : b};
    return ts_emit1(e, "LayerNormalization", is_none(b) ? 2 : 3, in, &at, out);
}

static ox_status op_group_norm(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* group_norm(input, groups, weight, bias, eps): reshape, normalize, affine */
    struct tv *x = a[0];
    int64_t g;
    ox_status st = need_t(e, x, "group_norm");
    if (!st) st = tv_to_int(e, a[1], &g);
    if (st) return st;
    int64_t d3[3] = {x->dims[0], g, -1};
    struct tv *r, *m, *c, *v, *sq, *nrm, *y;
    st = reshape(e, x, 3, d3, &r);
    int64_t ax = 2;
    struct ts_attrs at = {0};
    ta_ints(&at, "axes", 1, &ax);
    ta_int(&at, "keepdims", 1);
    if (!st) st = ts_emit1(e, "ReduceMean", 1, &r, &at, &m);
    if (!st) st = bin(e, "Sub", r, m, &c);
    if (!st) st = bin(e, "Mul", c, c, &sq);
    if (!st) st = ts_emit1(e, "ReduceMean", 1, &sq, &at, &v);
    struct tv *eps = tv_float(e, tv_num(a[4]));
    if (!st) st = bin(e, "Add", v, eps, &v);
    if (!st) st = un(e, "Sqrt", v, &v);
    if (!st) st = bin(e, "Div", c, v, &nrm);
    if (!st) st = reshape(e, nrm, x->rank, x->dims, &y);
    if (st) return st;
    int64_t cshape[OX_MAX_RANK];
    cshape[0] = x->dims[1];
    for (int i = 2; i < x->rank; i++) cshape[i - 1] = 1;
    if (!is_none(a[2])) {
        struct tv *w;
        if ((st = reshape(e, a[2], x->rank - 1, cshape, &w)) || (st = bin(e, "Mul", y, w, &y)))
            return st;
    }
    if (!is_none(a[3])) {
        struct tv *b;
        if ((st = reshape(e, a[3], x->rank - 1, cshape, &b)) || (st = bin(e, "Add", y, b, &y)))
            return st;
    }
    *out = y;
    return OX_OK;
}

static ox_status pool(struct ev *e, const char *op, struct tv *x, struct tv *kernel,
                      struct tv *stride, struct tv *padding, struct tv *dilation, struct tv *ceil,
                      struct tv *count_include_pad, int n_out, struct tv **out) {
    ox_status st = need_t(e, x, op);
    if (st) return st;
    int k = x->rank - 2;
    if (k < 1 || k > 3) return ts_err(e, OX_E_UNSUPPORTED, "%s on a rank-%d tensor", op, x->rank);
    int64_t ks[3], s[3], p[6], d[3] = {1, 1, 1};
    if ((st = expand_list(e, kernel, k, ks))) return st;
    bool empty_stride =
        is_none(stride) || ((stride->k == TV_LIST || stride->k == TV_TUPLE) && stride->n == 0);
    if (empty_stride) {
        memcpy(s, ks, sizeof(int64_t) * (size_t)k);
    } else if ((st = expand_list(e, stride, k, s))) {
        return st;
    }
    if ((st = expand_list(e, padding, k, p))) return st;
    for (int i = 0; i < k; i++) p[k + i] = p[i];
    if (dilation && !is_none(dilation) && (st = expand_list(e, dilation, k, d))) return st;
    bool cm = false;
    if (ceil && !is_none(ceil)) tv_truthy(ceil, &cm);
    struct ts_attrs at = {0};
    ta_ints(&at, "kernel_shape", k, ks);
    ta_ints(&at, "strides", k, s);
    ta_ints(&at, "pads", 2 * k, p);
    ta_int(&at, "ceil_mode", cm);
    if (!strcmp(op, "MaxPool")) {
        ta_ints(&at, "dilations", k, d);
    } else {
        bool cip = true;
        if (count_include_pad && !is_none(count_include_pad)) tv_truthy(count_include_pad, &cip);
        ta_int(&at, "count_include_pad", cip);
    }
    return ts_emit(e, op, 1, &x, &at, n_out, out);
}

static ox_status op_max_pool(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    return pool(e, "MaxPool", a[0], a[1], a[2], a[3], a[4], a[5], NULL, 1, out);
}

static ox_status op_avg_pool(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* avg_pool2d(self, kernel, stride=[], padding=0, ceil_mode, count_include_pad,
               divisor_override) */
    if (!is_none(a[6])) return ts_err(e, OX_E_UNSUPPORTED, "avg_pool with divisor_override");
    return pool(e, "AveragePool", a[0], a[1], a[2], a[3], NULL, a[4], a[5], 1, out);
}

/* Adaptive average pooling to any size: along each spatial axis, output i averages input
 * [floor(i in / out), ceil((i + 1) in / out)), as a MatMul with that averaging matrix (the
 * axis moved last and back). */
static ox_status adaptive_by_matmul(struct ev *e, struct tv *x, int k, const int64_t *o,
                                    struct tv **out) {
    ox_status st = OX_OK;
    int r = x->rank;
    for (int s = 0; s < k && !st; s++) {
        int axis = 2 + s;
        int64_t in = x->dims[axis], on = o[s];
        if (in == on) continue;
        int64_t pd[2] = {in, on};
        void *data;
        struct tv *pm = tv_const_new(e, x->dt, 2, pd, &data);
        if (!pm) return oom(e);
        for (int64_t i = 0; i < on; i++) {
            int64_t b = (i * in) / on, t = ((i + 1) * in + on - 1) / on;
            for (int64_t j = b; j < t; j++)
                ox_tensor_set((ox_tensor *)pm->cdata, j * on + i, 1.0 / (double)(t - b));
        }
        int64_t perm[OX_MAX_RANK];
        for (int d = 0; d < r; d++) perm[d] = d;
        perm[axis] = r - 1;
        perm[r - 1] = axis;
        struct tv *t1 = x, *m;
        if (axis != r - 1) st = transpose(e, x, r, perm, &t1);
        struct tv *in2[2] = {t1, pm};
        if (!st) st = ts_emit1(e, "MatMul", 2, in2, NULL, &m);
        if (!st && axis != r - 1) st = transpose(e, m, r, perm, &m);
        if (!st) x = m;
    }
    *out = x;
    return st;
}

static ox_status op_adaptive_avg_pool(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct tv *x = a[0];
    ox_status st = need_t(e, x, "adaptive_avg_pool");
    if (st) return st;
    int k = x->rank - 2;
    int64_t o[3];
    if (k < 1 || k > 3 || (st = expand_list(e, a[1], k, o)))
        return st ? st : ts_err(e, OX_E_UNSUPPORTED, "adaptive pool rank");
    bool global = true, divisible = true;
    for (int i = 0; i < k; i++) {
        if (o[i] == -1) o[i] = x->dims[2 + i]; /* None in the list keeps the size */
        global &= o[i] == 1;
        divisible &= o[i] > 0 && x->dims[2 + i] % o[i] == 0;
    }
    if (global) return ts_emit1(e, "GlobalAveragePool", 1, &x, NULL, out);
    if (!divisible) return adaptive_by_matmul(e, x, k, o, out);
    int64_t ks[3], p[6] = {0};
    for (int i = 0; i < k; i++) ks[i] = x->dims[2 + i] / o[i];
    struct ts_attrs at = {0};
    ta_ints(&at, "kernel_shape", k, ks);
    ta_ints(&at, "strides", k, ks);
    ta_ints(&at, "pads", 2 * k, p);
    return ts_emit1(e, "AveragePool", 1, &x, &at, out);
}

static ox_status op_adaptive_max_pool(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct tv *x = a[0], *y;
    int64_t o[3];
    int k = x->rank - 2;
    ox_status st = need_t(e, x, "adaptive_max_pool");
    if (!st && (k < 1 || k > 3)) st = ts_err(e, OX_E_UNSUPPORTED, "adaptive pool rank");
    if (!st) st = expand_list(e, a[1], k, o);
    if (st) return st;
    bool global = true;
    for (int i = 0; i < k; i++) {
        if (o[i] == -1) o[i] = x->dims[2 + i];
        global &= o[i] == 1;
    }
    st = global ? ts_emit1(e, "GlobalMaxPool", 1, &x, NULL, &y)
                : op_adaptive_max_pool_any(e, x, k, o, &y);
    if (st) return st;
    struct tv *none = tv_new(e, TV_UNINIT); /* indices are not computed: reading them fails */
    return none ? tuple2(e, y, none, out) : oom(e);
}

static ox_status op_dropout(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    bool train = false;
    if (tv_is_num(a[1]) && tv_num(a[1]) == 0) { /* p = 0: the identity, training or not */
        *out = a[0];
        return OX_OK;
    }
    if (!tv_truthy(a[2], &train) || train)
        return ts_err(e, OX_E_UNSUPPORTED, "dropout in training mode");
    *out = a[0];
    return OX_OK;
}

static ox_status op_pad(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* pad(input, pad, mode="constant", value=None): pad lists the last dim first */
    struct tv *x = a[0];
    int64_t pd[2 * OX_MAX_RANK];
    int k;
    ox_status st = need_t(e, x, "pad");
    if (!st) st = tv_to_ints(e, a[1], pd, 2 * OX_MAX_RANK, &k);
    if (st) return st;
    if (k % 2 || k / 2 > x->rank) return ts_err(e, OX_E_INVALID, "pad with %d values", k);
    int64_t pads[2 * OX_MAX_RANK] = {0};
    for (int i = 0; i < k / 2; i++) {
        int axis = x->rank - 1 - i;
        pads[axis] = pd[2 * i];
        pads[x->rank + axis] = pd[2 * i + 1];
    }
    const char *mode = a[2] && a[2]->k == TV_STR ? a[2]->s : "constant";
    if (!strcmp(mode, "circular")) { /* each axis: its last pads[b] rows, x, its first pads[a] */
        for (int ax = 0; ax < x->rank; ax++) {
            int64_t b = pads[ax], f = pads[x->rank + ax], len = x->dims[ax];
            if (!b && !f) continue;
            if (b < 0 || f < 0 || b > len || f > len)
                return ts_err(e, OX_E_UNSUPPORTED, "circular pad of %lld/%lld on a dim of %lld",
                              (long long)b, (long long)f, (long long)len);
            struct tv *parts[3];
            int k = 0;
            if (b && (st = slice1(e, x, ax, len - b, len, 1, &parts[k++]))) return st;
            parts[k++] = x;
            if (f && (st = slice1(e, x, ax, 0, f, 1, &parts[k++]))) return st;
            if ((st = concat(e, k, parts, ax, &x))) return st;
        }
        *out = x;
        return OX_OK;
    }
    struct ts_attrs at = {0};
    ta_str(&at, "mode", !strcmp(mode, "replicate") ? "edge" : mode);
    struct tv *in[3] = {x, tv_i64s(e, 2 * x->rank, pads), NULL};
    if (!in[1]) return oom(e);
    if (!is_none(a[3]) && !(in[2] = num_tensor(e, a[3], x->dt))) return oom(e);
    return ts_emit1(e, "Pad", in[2] ? 3 : 2, in, &at, out);
}

static ox_status op_constant_pad_nd(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct tv *b[4] = {a[0], a[1], NULL, a[2]};
    return op_pad(e, b, 4, out);
}

/* torch's nearest source index along one axis (upsample_nearest / _nearest_exact): with a
 * scale factor, float(1 / scale_factor) times the output index (plus 0.5 for exact), else
 * in / out; floored in float and clamped. */
static int64_t nearest_src(int64_t i, int64_t in, int64_t on, double sf, bool exact) {
    if (on == in) return i;
    float scale = sf > 0 ? (float)(1.0 / sf) : (float)in / (float)on;
    float v = exact ? (float)(((double)i + 0.5) * (double)scale) : (float)i * scale;
    int64_t r = (int64_t)floorf(v);
    return r < in - 1 ? r : in - 1;
}

static ox_status resize(struct ev *e, struct tv *x, struct tv *size, struct tv *scales,
                        const char *mode, const char *ctm, const char *nearest, struct tv **out) {
    ox_status st = need_t(e, x, "upsample");
    if (st) return st;
    int k = x->rank - 2;
    if (k < 1 || k > 3) return ts_err(e, OX_E_UNSUPPORTED, "upsampling a rank-%d tensor", x->rank);
    struct ts_attrs at = {0};
    ta_str(&at, "mode", mode);
    ta_str(&at, "coordinate_transformation_mode", ctm);
    if (!strcmp(mode, "nearest")) ta_str(&at, "nearest_mode", nearest);
    struct tv *in[4] = {x, NULL, NULL, NULL};
    int64_t os[3];
    double sc[3] = {0, 0, 0};
    if (!is_none(size)) {
        if ((st = expand_list(e, size, k, os))) return st;
    } else if (scales->k == TV_LIST || scales->k == TV_TUPLE) {
        if (scales->n != 1 && scales->n != k)
            return ts_err(e, OX_E_INVALID, "%d scales for %d spatial dims", scales->n, k);
        for (int i = 0; i < k; i++)
            if (!tv_is_num(scales->items[scales->n == 1 ? 0 : i]))
                return ts_err(e, OX_E_UNSUPPORTED, "a scale not known at import time");
        for (int i = 0; i < k; i++) sc[i] = tv_num(scales->items[scales->n == 1 ? 0 : i]);
    } else if (tv_is_num(scales)) {
        for (int i = 0; i < k; i++) sc[i] = tv_num(scales);
    } else {
        return ts_err(e, OX_E_UNSUPPORTED, "upsample without a size or scales");
    }
    if (is_none(size))
        for (int i = 0; i < k; i++) {
            if (!(sc[i] > 0) || sc[i] * (double)x->dims[2 + i] > (double)((int64_t)1 << 31))
                return ts_err(e, OX_E_INVALID, "upsampling by a scale of %g", sc[i]);
            os[i] = (int64_t)floor((double)x->dims[2 + i] * sc[i]);
        }
    if (!strcmp(mode, "nearest")) { /* Resize where it is exact (whole multiples), else the
                                       source indices computed here, one Gather per axis */
        bool whole = true;
        for (int i = 0; i < k; i++) {
            int64_t d = x->dims[2 + i];
            whole &= d > 0 && os[i] % d == 0 && (sc[i] == 0 || sc[i] == (double)(os[i] / d));
        }
        if (!whole) {
            bool exact = strcmp(nearest, "floor") != 0;
            struct tv *y = x;
            for (int i = 0; i < k; i++) {
                int64_t d = x->dims[2 + i];
                if (os[i] == d) continue;
                void *data;
                struct tv *idx = tv_const_new(e, OX_INT64, 1, &os[i], &data), *g[2];
                if (!idx) return oom(e);
                for (int64_t j = 0; j < os[i]; j++)
                    ((int64_t *)data)[j] = nearest_src(j, d, os[i], sc[i], exact);
                struct ts_attrs ga = {0};
                ta_int(&ga, "axis", 2 + i);
                g[0] = y, g[1] = idx;
                if ((st = ts_emit1(e, "Gather", 2, g, &ga, &y))) return st;
            }
            return y == x ? fresh(e, x, out) : (*out = y, OX_OK);
        }
    }
    if (!is_none(size)) {
        int64_t full[OX_MAX_RANK];
        full[0] = x->dims[0];
        full[1] = x->dims[1];
        memcpy(full + 2, os, sizeof(int64_t) * (size_t)k);
        if (!(in[3] = tv_i64s(e, x->rank, full))) return oom(e);
        return ts_emit1(e, "Resize", 4, in, &at, out);
    }
    int64_t d = x->rank;
    void *data;
    if (!(in[2] = tv_const_new(e, OX_FLOAT, 1, &d, &data))) return oom(e);
    float *f = data;
    f[0] = f[1] = 1;
    for (int i = 0; i < k; i++) f[2 + i] = (float)sc[i];
    return ts_emit1(e, "Resize", 3, in, &at, out);
}

static ox_status op_upsample_nearest(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* upsample_nearest2d(input, output_size, scales) */
    return resize(e, a[0], a[1], a[2], "nearest", "asymmetric", "floor", out);
}

static ox_status op_upsample_linear(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* upsample_bilinear2d(input, output_size, align_corners, scale_factors) */
    bool ac = false;
    tv_truthy(a[2], &ac);
    return resize(e, a[0], a[1], a[3], "linear", ac ? "align_corners" : "half_pixel", NULL, out);
}

/* ---- attention ------------------------------------------------------------------------- */

static ox_status sdpa(struct ev *e, struct tv *q, struct tv *k, struct tv *v, struct tv *mask,
                      bool causal, struct tv *scale, struct tv **out) {
    ox_status st = need_t(e, q, "scaled_dot_product_attention");
    if (st) return st;
    int r = k->rank;
    int64_t perm[OX_MAX_RANK];
    for (int i = 0; i < r; i++) perm[i] = i;
    perm[r - 2] = r - 1;
    perm[r - 1] = r - 2;
    double s = is_none(scale) ? 1.0 / sqrt((double)q->dims[q->rank - 1]) : tv_num(scale);
    struct tv *kt, *qk, *w = NULL, *sc = tv_scalar_tensor(e, s, q->dt);
    if (!sc) return oom(e);
    st = transpose(e, k, r, perm, &kt);
    struct tv *in[2] = {q, kt};
    if (!st) st = ts_emit1(e, "MatMul", 2, in, NULL, &qk);
    if (!st) st = bin(e, "Mul", qk, sc, &qk);
    if (!st && causal) {
        int64_t L = q->dims[q->rank - 2], S = k->dims[k->rank - 2], d[2] = {L, S};
        void *data;
        struct tv *m = tv_const_new(e, q->dt, 2, d, &data);
        if (!m) return oom(e);
        for (int64_t i = 0; i < L; i++)
            for (int64_t j = 0; j < S; j++)
                ox_tensor_set((ox_tensor *)m->cdata, i * S + j, j > i ? -INFINITY : 0);
        st = bin(e, "Add", qk, m, &qk);
    }
    if (!st && !is_none(mask)) {
        if (mask->dt == OX_BOOL) { /* True: take part */
            struct tv *ninf = tv_scalar_tensor(e, -INFINITY, q->dt),
                      *zero = tv_scalar_tensor(e, 0, q->dt), *add;
            if (!ninf || !zero) return oom(e);
            struct tv *wi[3] = {mask, zero, ninf};
            st = ts_emit1(e, "Where", 3, wi, NULL, &add);
            if (!st) st = bin(e, "Add", qk, add, &qk);
        } else {
            st = bin(e, "Add", qk, mask, &qk);
        }
    }
    struct ts_attrs at = {0};
    ta_int(&at, "axis", -1);
    if (!st) st = ts_emit1(e, "Softmax", 1, &qk, &at, &w);
    struct tv *o[2] = {w, v};
    if (!st) st = ts_emit1(e, "MatMul", 2, o, NULL, out);
    return st;
}

static ox_status op_sdpa(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* (q, k, v, attn_mask=None, dropout_p=0., is_causal=False, *, scale=None) */
    bool causal = false;
    tv_truthy(a[5], &causal);
    return sdpa(e, a[0], a[1], a[2], a[3], causal, a[6], out);
}

/* nn.TransformerEncoderLayer's fused fast path, expanded (src is batch-first [B, L, E]). */
static ox_status op_transformer_encoder_layer(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct tv *src = a[0];
    int64_t E, H;
    ox_status st = need_t(e, src, "_transformer_encoder_layer_fwd");
    if (!st) st = tv_to_int(e, a[1], &E);
    if (!st) st = tv_to_int(e, a[2], &H);
    if (st) return st;
    if (src->rank != 3 || E % H) return ts_err(e, OX_E_UNSUPPORTED, "transformer layer shapes");
    bool gelu = false, norm_first = false;
    tv_truthy(a[7], &gelu);
    tv_truthy(a[8], &norm_first);
    if (!is_none(a[18])) return ts_err(e, OX_E_UNSUPPORTED, "transformer layer with a mask");
    struct tv *eps = a[9];
    int64_t B = src->dims[0], L = src->dims[1], D = E / H;
    struct tv *x = src, *h, *qkv;
#define LN(in, w, b, res)                                                                          \
    do {                                                                                           \
        struct tv *la[5] = {in, tv_list(e, TV_LIST, 1), w, b, eps};                                \
        if (!la[1]) return oom(e);                                                                 \
        la[1]->items[0] = tv_int(e, E);                                                            \
        if ((st = op_layer_norm(e, la, 5, res))) return st;                                        \
    } while (0)
    h = x;
    if (norm_first) LN(x, a[10], a[11], &h);
    if ((st = linear(e, h, a[3], a[4], &qkv))) return st;
    struct tv *parts;
    int64_t three[3] = {E, E, E};
    if ((st = split_sizes(e, qkv, 2, 3, three, &parts))) return st;
    struct tv *qh[3];
    for (int i = 0; i < 3; i++) {
        struct tv *r;
        if ((st = reshape(e, parts->items[i], 4, (int64_t[]){B, L, H, D}, &r)) ||
            (st = transpose(e, r, 4, (int64_t[]){0, 2, 1, 3}, &qh[i])))
            return st;
    }
    struct tv *att, *att2, *proj, *res;
    if ((st = sdpa(e, qh[0], qh[1], qh[2], NULL, false, NULL, &att)) ||
        (st = transpose(e, att, 4, (int64_t[]){0, 2, 1, 3}, &att2)) ||
        (st = reshape(e, att2, 3, (int64_t[]){B, L, E}, &att2)) ||
        (st = linear(e, att2, a[5], a[6], &proj)) || (st = bin(e, "Add", x, proj, &res)))
        return st;
    if (!norm_first) LN(res, a[10], a[11], &res);
    struct tv *f = res, *f1, *f2, *y;
    if (norm_first) LN(res, a[12], a[13], &f);
    if ((st = linear(e, f, a[14], a[15], &f1))) return st;
    if (gelu) {
        struct tv *ga[2] = {f1, NULL};
        st = op_gelu(e, ga, 1, &f1);
    } else {
        st = un(e, "Relu", f1, &f1);
    }
    if (!st) st = linear(e, f1, a[16], a[17], &f2);
    if (!st) st = bin(e, "Add", res, f2, &y);
    if (st) return st;
    if (!norm_first) LN(y, a[12], a[13], &y);
#undef LN
    *out = y;
    return OX_OK;
}

/* ---- recurrent layers ------------------------------------------------------------------ */

/* Copy gate blocks of a [G*H, ...] weight into ONNX order: dst block i = src block order[i]. */
static struct tv *regate(struct ev *e, const struct tv *w, int gates, const int *order) {
    const ox_tensor *t = w->cdata;
    if (!t) return NULL;
    void *data;
    struct tv *r = tv_const_new(e, t->dtype, t->rank, t->dims, &data);
    if (!r) return NULL;
    size_t block = (size_t)(ox_tensor_numel(t) / gates) * ox_dtype_size(t->dtype);
    for (int i = 0; i < gates; i++)
        memcpy((char *)data + (size_t)i * block, (const char *)t->data + (size_t)order[i] * block,
               block);
    return r;
}

/* lstm(input, hx[2], params, has_biases, num_layers, dropout, train, bidirectional,
 * batch_first) and gru(input, hx, params, ...): one ONNX node per layer. */
/* The recurrent layers: kind 'l' LSTM, 'g' GRU, 't' RNN with tanh, 'r' RNN with relu. */
static ox_status recurrent(struct ev *e, struct tv **a, char kind, struct tv **out) {
    static const char *const names[] = {"lstm", "gru", "rnn"};
    bool lstm = kind == 'l', rnn = kind == 't' || kind == 'r';
    const char *name = names[lstm ? 0 : rnn ? 2 : 1];
    struct tv *x = a[0], *hx = a[1], *params = a[2];
    int64_t layers;
    bool has_b = true, bidir = false, batch_first = false;
    ox_status st = need_t(e, x, name);
    if (!st) st = tv_to_int(e, a[4], &layers);
    if (st) return st;
    tv_truthy(a[3], &has_b);
    tv_truthy(a[7], &bidir);
    tv_truthy(a[8], &batch_first);
    int dirs = bidir ? 2 : 1, per = has_b ? 4 : 2, gates = lstm ? 4 : rnn ? 1 : 3;
    if (params->k != TV_LIST || params->n != layers * dirs * per)
        return ts_err(e, OX_E_UNSUPPORTED, "%s: %d weights for %lld layers", name,
                      params->k == TV_LIST ? params->n : -1, (long long)layers);
    struct tv *h0 = lstm ? (hx->k == TV_LIST && hx->n == 2 ? hx->items[0] : NULL) : hx;
    struct tv *c0 = lstm && hx->k == TV_LIST && hx->n == 2 ? hx->items[1] : NULL;
    if (!is_t(h0) || (lstm && !is_t(c0))) return ts_err(e, OX_E_UNSUPPORTED, "recurrent state");
    static const int lstm_order[4] = {0, 3, 1, 2}; /* torch i,f,g,o -> ONNX i,o,f,c */
    static const int gru_order[3] = {1, 0, 2};     /* torch r,z,n -> ONNX z,r,h */
    static const int rnn_order[1] = {0};
    const int *order = lstm ? lstm_order : rnn ? rnn_order : gru_order;
    if (batch_first && (st = transpose(e, x, 3, (int64_t[]){1, 0, 2}, &x))) return st;
    int64_t H = h0->dims[2];
    struct tv *hs[64], *cs[64];
    if (layers < 1 || layers > 32)
        return ts_err(e, OX_E_UNSUPPORTED, "%lld layers (1 to 32)", (long long)layers);
    for (int64_t l = 0; l < layers; l++) {
        struct tv *W[2], *R[2], *Bv[2];
        for (int d = 0; d < dirs; d++) {
            struct tv **p = params->items + (l * dirs + d) * per;
            for (int q = 0; q < per; q++)
                if (!is_t(p[q]) || !p[q]->cdata)
                    return ts_err(e, OX_E_UNSUPPORTED, "recurrent weights computed at run time");
            W[d] = regate(e, p[0], gates, order);
            R[d] = regate(e, p[1], gates, order);
            if (!W[d] || !R[d]) return oom(e);
            if (has_b) {
                struct tv *bi = regate(e, p[2], gates, order), *bh = regate(e, p[3], gates, order);
                if (!bi || !bh) return oom(e);
                struct tv *cat2[2] = {bi, bh};
                if ((st = concat(e, 2, cat2, 0, &Bv[d]))) return st;
            }
        }
        struct tv *Ws, *Rs, *Bs = NULL, *ws[2], *rs[2], *bs[2];
        for (int d = 0; d < dirs; d++) {
            int64_t z = 0;
            if ((st = axes_op(e, "Unsqueeze", W[d], 1, &z, &ws[d])) ||
                (st = axes_op(e, "Unsqueeze", R[d], 1, &z, &rs[d])) ||
                (has_b && (st = axes_op(e, "Unsqueeze", Bv[d], 1, &z, &bs[d]))))
                return st;
        }
        if ((st = dirs == 2 ? concat(e, 2, ws, 0, &Ws) : (Ws = ws[0], OX_OK)) ||
            (st = dirs == 2 ? concat(e, 2, rs, 0, &Rs) : (Rs = rs[0], OX_OK)) ||
            (has_b && (st = dirs == 2 ? concat(e, 2, bs, 0, &Bs) : (Bs = bs[0], OX_OK))))
            return st;
        struct tv *hl, *cl = NULL;
        if ((st = slice1(e, h0, 0, l * dirs, (l + 1) * dirs, 1, &hl)) ||
            (lstm && (st = slice1(e, c0, 0, l * dirs, (l + 1) * dirs, 1, &cl))))
            return st;
        struct ts_attrs at = {0};
        ta_int(&at, "hidden_size", H);
        ta_str(&at, "direction", bidir ? "bidirectional" : "forward");
        if (kind == 'g') ta_int(&at, "linear_before_reset", 1);
        const char *acts[2] = {kind == 'r' ? "Relu" : "Tanh", kind == 'r' ? "Relu" : "Tanh"};
        size_t act_lens[2];
        if (rnn) ta_strs(&at, "activations", dirs, acts, act_lens);
        struct tv *in[7] = {x, Ws, Rs, Bs, NULL, hl, cl}, *res[3];
        if ((st = ts_emit(e,
                          lstm  ? "LSTM"
                          : rnn ? "RNN"
                                : "GRU",
                          lstm ? 7 : 6, in, &at, lstm ? 3 : 2, res)))
            return st;
        /* Y [seq, dirs, batch, H] -> [seq, batch, dirs*H] */
        struct tv *y;
        if ((st = transpose(e, res[0], 4, (int64_t[]){0, 2, 1, 3}, &y)) ||
            (st = reshape(e, y, 3, (int64_t[]){x->dims[0], x->dims[1], dirs * H}, &x)))
            return st;
        hs[l] = res[1];
        cs[l] = lstm ? res[2] : NULL;
    }
    struct tv *y = x, *hn, *cn = NULL;
    if (batch_first && (st = transpose(e, y, 3, (int64_t[]){1, 0, 2}, &y))) return st;
    if ((st = layers > 1 ? concat(e, (int)layers, hs, 0, &hn) : (hn = hs[0], OX_OK))) return st;
    if (lstm && (st = layers > 1 ? concat(e, (int)layers, cs, 0, &cn) : (cn = cs[0], OX_OK)))
        return st;
    *out = tv_list(e, TV_TUPLE, lstm ? 3 : 2);
    if (!*out) return oom(e);
    (*out)->items[0] = y;
    (*out)->items[1] = hn;
    if (lstm) (*out)->items[2] = cn;
    return OX_OK;
}

static ox_status op_lstm(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    return recurrent(e, a, 'l', out);
}

static ox_status op_gru(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    return recurrent(e, a, 'g', out);
}

static ox_status op_rnn_tanh(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    return recurrent(e, a, 't', out);
}

static ox_status op_rnn_relu(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    return recurrent(e, a, 'r', out);
}

/* ---- tensor properties ----------------------------------------------------------------- */

static ox_status prop_shape(struct ev *e, struct tv **a, int n, struct tv **out) {
    struct tv *b[2] = {a[0], NULL};
    (void)n;
    return op_size(e, b, 1, out);
}

static ox_status prop_dtype(struct ev *e, struct tv **a, int n, struct tv **out) {
    return op_prim_dtype(e, a, n, out);
}

static ox_status prop_false(struct ev *e, struct tv **a, int n, struct tv **out) {
    return op_false(e, a, n, out);
}

static ox_status op_is_floating_point(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    *out = tv_bool(e, is_t(a[0]) && ox_dtype_is_float(a[0]->dt));
    return *out ? OX_OK : oom(e);
}

static ox_status op_warn(struct ev *e, struct tv **a, int n, struct tv **out) {
    return op_nothing(e, a, n, out);
}

static ox_status op_raise(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    (void)out;
    return ts_err(e, OX_E_INVALID, "the model raises an exception for these inputs: %.*s",
                  a[0] && a[0]->k == TV_STR ? (int)a[0]->s_len : 0,
                  a[0] && a[0]->k == TV_STR ? a[0]->s : "");
}

static ox_status op_str(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    char buf[64];
    struct tv *v = a[0];
    if (v->k == TV_STR) {
        *out = v;
        return OX_OK;
    }
    if (v->k == TV_INT)
        snprintf(buf, sizeof buf, "%lld", (long long)v->i);
    else if (v->k == TV_FLOAT)
        snprintf(buf, sizeof buf, "%g", v->f);
    else if (v->k == TV_BOOL)
        snprintf(buf, sizeof buf, "%s", v->b ? "True" : "False");
    else
        snprintf(buf, sizeof buf, "%s", tv_kind_name(v->k));
    *out = tv_new(e, TV_STR);
    if (!*out) return oom(e);
    (*out)->s = ox_arena_strdup(&e->a, buf);
    (*out)->s_len = strlen(buf);
    return (*out)->s ? OX_OK : oom(e);
}

static ox_status op_list(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct tv *v = a[0];
    if (v->k != TV_LIST && v->k != TV_TUPLE)
        return ts_err(e, OX_E_UNSUPPORTED, "list() of a %s", tv_kind_name(v->k));
    *out = tv_list(e, TV_LIST, v->n);
    if (!*out) return oom(e);
    for (int i = 0; i < v->n; i++) (*out)->items[i] = v->items[i];
    return OX_OK;
}

static ox_status op_copy(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct tv *v = a[0];
    if (v->k != TV_LIST && v->k != TV_DICT) {
        *out = v; /* immutable values and tensors (a copy computes the same) */
        return OX_OK;
    }
    int items = v->k == TV_DICT ? 2 * v->n : v->n;
    *out = tv_list(e, v->k, items);
    if (!*out) return oom(e);
    (*out)->n = v->n;
    for (int i = 0; i < items; i++) (*out)->items[i] = v->items[i];
    return OX_OK;
}

static ox_status op_set_item(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct tv *l = a[0];
    if (l->k == TV_LIST) {
        int64_t k;
        ox_status st = tv_to_int(e, a[1], &k);
        if (st) return st;
        if (k < 0) k += l->n;
        if (k < 0 || k >= l->n)
            return ts_err(e, OX_E_INVALID, "list index %lld out of range", (long long)k);
        l->items[k] = a[2];
        *out = l;
        return OX_OK;
    }
    if (l->k == TV_DICT) {
        for (int i = 0; i < l->n; i++) {
            struct tv *r;
            if (compare_scalars(e, "eq", l->items[2 * i], a[1], &r) == OX_OK && r->b) {
                l->items[2 * i + 1] = a[2];
                *out = l;
                return OX_OK;
            }
        }
        struct tv **items = ox_arena_alloc(&e->a, sizeof *items * (size_t)(2 * l->n + 2));
        if (!items) return oom(e);
        if (l->n) memcpy(items, l->items, sizeof *items * (size_t)(2 * l->n));
        items[2 * l->n] = a[1];
        items[2 * l->n + 1] = a[2];
        l->items = items;
        l->n++;
        *out = l;
        return OX_OK;
    }
    return ts_err(e, OX_E_UNSUPPORTED, "item assignment on a %s", tv_kind_name(l->k));
}

static ox_status op_find(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    if (a[0]->k != TV_STR || a[1]->k != TV_STR)
        return ts_err(e, OX_E_UNSUPPORTED, "find on a non-string");
    int64_t start = 0, end = (int64_t)a[0]->s_len, len = end;
    if (!is_none(a[2]) && tv_to_int(e, a[2], &start)) return OX_E_UNSUPPORTED;
    if (!is_none(a[3]) && tv_to_int(e, a[3], &end)) return OX_E_UNSUPPORTED;
    if (start < 0) start += len;
    if (end < 0) end += len;
    start = start < 0 ? 0 : start;
    end = end > len ? len : end;
    int64_t found = -1;
    for (int64_t i = start; found < 0 && i + (int64_t)a[1]->s_len <= end; i++)
        if (!memcmp(a[0]->s + i, a[1]->s, a[1]->s_len)) found = i;
    *out = tv_int(e, found);
    return *out ? OX_OK : oom(e);
}

static ox_status op_roll(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct tv *x = a[0];
    int64_t sh[OX_MAX_RANK], dm[OX_MAX_RANK];
    int ns, nd = 0;
    ox_status st = need_t(e, x, "roll");
    if (!st) st = tv_to_ints(e, a[1], sh, OX_MAX_RANK, &ns);
    if (!st && !is_none(a[2]) && !(a[2]->k == TV_LIST && a[2]->n == 0))
        st = tv_to_ints(e, a[2], dm, OX_MAX_RANK, &nd);
    if (st) return st;
    if (nd == 0) { /* flattened roll */
        int64_t total = tv_numel(x);
        struct tv *f;
        if ((st = reshape(e, x, 1, &total, &f))) return st;
        struct tv *b[3] = {f, tv_list(e, TV_LIST, 1), tv_list(e, TV_LIST, 1)};
        if (!b[1] || !b[2]) return oom(e);
        b[1]->items[0] = tv_int(e, sh[0]);
        b[2]->items[0] = tv_int(e, 0);
        struct tv *r;
        if ((st = op_roll(e, b, 3, &r))) return st;
        return reshape(e, r, x->rank, x->dims, out);
    }
    if (ns != nd) return ts_err(e, OX_E_INVALID, "roll with %d shifts for %d dims", ns, nd);
    for (int i = 0; i < nd; i++) {
        int64_t d = 0;
        if ((st = norm_dim(e, dm[i], x->rank, &d))) return st;
        int64_t len = x->dims[d], s1 = len ? ((sh[i] % len) + len) % len : 0;
        if (s1 == 0) continue;
        struct tv *p[2];
        if ((st = slice1(e, x, d, len - s1, len, 1, &p[0])) ||
            (st = slice1(e, x, d, 0, len - s1, 1, &p[1])) || (st = concat(e, 2, p, d, &x)))
            return st;
    }
    *out = x;
    return OX_OK;
}

static ox_status all_any(struct ev *e, struct tv **a, int n, bool all, struct tv **out) {
    struct tv *x = a[0];
    if (x->k == TV_LIST) { /* all()/any() of a list of bools */
        bool r = all;
        for (int i = 0; i < x->n; i++) {
            bool b;
            if (!tv_truthy(x->items[i], &b))
                return ts_err(e, OX_E_UNSUPPORTED, "all/any of run-time values");
            r = all ? r && b : r || b;
        }
        *out = tv_bool(e, r);
        return *out ? OX_OK : oom(e);
    }
    ox_status st = need_t(e, x, all ? "all" : "any");
    if (st) return st;
    struct tv *b = x, *i, *r;
    if (b->dt != OX_BOOL && (st = cast(e, b, OX_BOOL, &b))) return st;
    if ((st = cast(e, b, OX_INT32, &i))) return st;
    struct tv *dims = n > 1 ? a[1] : NULL, *keep = n > 2 ? a[2] : NULL;
    if ((st = reduce(e, all ? "ReduceMin" : "ReduceMax", i, dims, keep, NULL, &r))) return st;
    return cast(e, r, OX_BOOL, out);
}

static ox_status op_all(struct ev *e, struct tv **a, int n, struct tv **out) {
    return all_any(e, a, n, true, out);
}

static ox_status op_any(struct ev *e, struct tv **a, int n, struct tv **out) {
    return all_any(e, a, n, false, out);
}

/* ---- more operators: math, activations, reductions -------------------------------------- */

/* A number known at import time: an int, float or bool, or a one-element constant tensor
 * (what prim::NumToTensor of a static size gives); *fl says whether it is a float. */
static ox_status num_arg(struct ev *e, const struct tv *v, double *out, bool *fl) {
    if (tv_is_num(v)) {
        *out = tv_num(v);
        if (fl) *fl = v->k == TV_FLOAT;
        return OX_OK;
    }
    if (is_t(v) && v->cdata && ox_tensor_numel(v->cdata) == 1) {
        *out = ox_tensor_get(v->cdata, 0);
        if (fl) *fl = ox_dtype_is_float(v->cdata->dtype);
        return OX_OK;
    }
    return ts_err(e, OX_E_UNSUPPORTED, "expected a number known at import time, got a %s%s",
                  v ? tv_kind_name(v->k) : "nothing",
                  v && v->k == TV_TENSOR ? " computed at run time" : "");
}

/* A scalar constant of x's float type (float32 when x is not floating). */
static struct tv *fscalar(struct ev *e, double v, const struct tv *x) {
    return tv_scalar_tensor(e, v, ox_dtype_is_float(x->dt) ? x->dt : OX_FLOAT);
}

/* x as floating point (integers and bools become float32, as torch's math ops do). */
static ox_status as_float(struct ev *e, struct tv *x, struct tv **out) {
    ox_status st = need_t(e, x, "math");
    if (st) return st;
    return ox_dtype_is_float(x->dt) ? (*out = x, OX_OK) : cast(e, x, OX_FLOAT, out);
}

static ox_status fun(struct ev *e, const char *op, struct tv *x, struct tv **out) {
    ox_status st = as_float(e, x, &x);
    return st ? st : ts_emit1(e, op, 1, &x, NULL, out);
}

#define FUNARY(fname, onnx)                                                                        \
    static ox_status fname(struct ev *e, struct tv **a, int n, struct tv **out) {                  \
        (void)n;                                                                                   \
        return fun(e, onnx, a[0], out);                                                            \
    }
FUNARY(op_tan, "Tan")
FUNARY(op_atan, "Atan")
FUNARY(op_asin, "Asin")
FUNARY(op_acos, "Acos")
FUNARY(op_sinh, "Sinh")
FUNARY(op_cosh, "Cosh")
FUNARY(op_asinh, "Asinh")
FUNARY(op_acosh, "Acosh")
FUNARY(op_atanh, "Atanh")
UNARY(op_sign, "Sign")

static ox_status op_round(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* round(self, *, decimals=0): halves to even, as ONNX Round */
    struct tv *x = a[0];
    int64_t dec = 0;
    ox_status st = need_t(e, x, "round");
    if (!st && !is_none(a[1])) st = tv_to_int(e, a[1], &dec);
    if (st || !ox_dtype_is_float(x->dt)) return st ? st : fresh(e, x, out);
    if (dec == 0) return ts_emit1(e, "Round", 1, &x, NULL, out);
    struct tv *k = fscalar(e, pow(10.0, (double)dec), x), *m, *r;
    if (!k) return oom(e);
    if ((st = bin(e, "Mul", x, k, &m)) || (st = ts_emit1(e, "Round", 1, &m, NULL, &r))) return st;
    return bin(e, "Div", r, k, out);
}

/* trunc(x) = sign(x) floor(|x|); frac(x) = x - trunc(x) */
static ox_status trunc_of(struct ev *e, struct tv *x, struct tv **out) {
    struct tv *s, *ab, *f;
    ox_status st = need_t(e, x, "trunc");
    if (st || !ox_dtype_is_float(x->dt)) return st ? st : fresh(e, x, out);
    if ((st = un(e, "Sign", x, &s)) || (st = un(e, "Abs", x, &ab)) || (st = un(e, "Floor", ab, &f)))
        return st;
    return bin(e, "Mul", s, f, out);
}

static ox_status op_trunc(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    return trunc_of(e, a[0], out);
}

static ox_status op_frac(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct tv *t;
    ox_status st = trunc_of(e, a[0], &t);
    return st ? st : bin(e, "Sub", a[0], t, out);
}

static ox_status op_log1p(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct tv *x, *p;
    ox_status st = as_float(e, a[0], &x);
    struct tv *one = st ? NULL : fscalar(e, 1, x);
    if (st || !one) return st ? st : oom(e);
    return (st = bin(e, "Add", x, one, &p)) ? st : un(e, "Log", p, out);
}

static ox_status op_expm1(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct tv *x, *p;
    ox_status st = as_float(e, a[0], &x);
    struct tv *one = st ? NULL : fscalar(e, 1, x);
    if (st || !one) return st ? st : oom(e);
    return (st = un(e, "Exp", x, &p)) ? st : bin(e, "Sub", p, one, out);
}

static ox_status log_base(struct ev *e, struct tv *x, double base, struct tv **out) {
    struct tv *l;
    ox_status st = as_float(e, x, &x);
    struct tv *k = st ? NULL : fscalar(e, log(base), x);
    if (st || !k) return st ? st : oom(e);
    return (st = un(e, "Log", x, &l)) ? st : bin(e, "Div", l, k, out);
}

static ox_status op_log2(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    return log_base(e, a[0], 2, out);
}

static ox_status op_log10(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    return log_base(e, a[0], 10, out);
}

static ox_status op_exp2(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct tv *x;
    ox_status st = as_float(e, a[0], &x);
    struct tv *two = st ? NULL : fscalar(e, 2, x);
    if (st || !two) return st ? st : oom(e);
    struct tv *in[2] = {two, x};
    return ts_emit1(e, "Pow", 2, in, NULL, out);
}

static ox_status op_square(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    if (tv_is_num(a[0])) return scalar_arith(e, "mul", a[0], a[0], out);
    return bin(e, "Mul", a[0], a[0], out);
}

static ox_status op_isnan(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    ox_status st = need_t(e, a[0], "isnan");
    if (st) return st;
    if (!ox_dtype_is_float(a[0]->dt)) return filled_like(e, a[0], OX_BOOL, 0, out);
    return ts_emit1(e, "IsNaN", 1, &a[0], NULL, out);
}

static ox_status op_isinf(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    ox_status st = need_t(e, a[0], "isinf");
    if (st) return st;
    if (!ox_dtype_is_float(a[0]->dt)) return filled_like(e, a[0], OX_BOOL, 0, out);
    return ts_emit1(e, "IsInf", 1, &a[0], NULL, out);
}

static ox_status op_isfinite(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct tv *i, *nn, *o;
    ox_status st = need_t(e, a[0], "isfinite");
    if (st) return st;
    if (!ox_dtype_is_float(a[0]->dt)) return filled_like(e, a[0], OX_BOOL, 1, out);
    if ((st = ts_emit1(e, "IsInf", 1, &a[0], NULL, &i)) ||
        (st = ts_emit1(e, "IsNaN", 1, &a[0], NULL, &nn)) || (st = bin(e, "Or", i, nn, &o)))
        return st;
    return un(e, "Not", o, out);
}

/* nan_to_num(self, nan=0, posinf=None, neginf=None): None is the type's largest value */
static ox_status op_nan_to_num(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct tv *x = a[0];
    ox_status st = need_t(e, x, "nan_to_num");
    if (st || !ox_dtype_is_float(x->dt)) return st ? st : fresh(e, x, out);
    double big = x->dt == OX_DOUBLE     ? 1.7976931348623157e308
                 : x->dt == OX_FLOAT16  ? 65504.0
                 : x->dt == OX_BFLOAT16 ? 3.3895313892515355e38
                                        : 3.4028234663852886e38;
    double v[3] = {is_none(a[1]) ? 0 : tv_num(a[1]), is_none(a[2]) ? big : tv_num(a[2]),
                   is_none(a[3]) ? -big : tv_num(a[3])};
    struct tv *y = x;
    for (int k = 0; k < 3; k++) {
        struct tv *m, *c = tv_scalar_tensor(e, v[k], x->dt);
        struct ts_attrs at = {0};
        if (!c) return oom(e);
        if (k == 0) {
            st = ts_emit1(e, "IsNaN", 1, &x, NULL, &m);
        } else {
            ta_int(&at, "detect_positive", k == 1);
            ta_int(&at, "detect_negative", k == 2);
            st = ts_emit1(e, "IsInf", 1, &x, &at, &m);
        }
        struct tv *in[3] = {m, c, y};
        if (st || (st = ts_emit1(e, "Where", 3, in, NULL, &y))) return st;
    }
    *out = y;
    return OX_OK;
}

/* ---- activations ------------------------------------------------------------------------ */

static ox_status act1(struct ev *e, const char *op, struct tv *x, const char *attr, double v,
                      struct tv **out) {
    struct ts_attrs at = {0};
    if (attr) ta_float(&at, attr, (float)v);
    ox_status st = need_t(e, x, op);
    return st ? st : ts_emit1(e, op, 1, &x, &at, out);
}

static ox_status op_elu(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* elu(self, alpha=1, scale=1, input_scale=1) */
    double alpha = tv_num(a[1]), scale = tv_num(a[2]), in_scale = tv_num(a[3]);
    if (scale == 1 && in_scale == 1) return act1(e, "Elu", a[0], "alpha", alpha, out);
    /* scale (x > 0 ? x : alpha (exp(x in_scale) - 1)) */
    struct tv *x = a[0], *pos, *xs, *neg, *z = fscalar(e, 0, x), *k = fscalar(e, in_scale, x),
              *sc = fscalar(e, scale, x), *c;
    ox_status st = need_t(e, x, "elu");
    if (st || !z || !k || !sc) return st ? st : oom(e);
    if ((st = bin(e, "Mul", x, k, &xs)) || (st = act1(e, "Elu", xs, "alpha", alpha, &neg)) ||
        (st = bin(e, "Greater", x, z, &pos)))
        return st;
    struct tv *in[3] = {pos, x, neg};
    if ((st = ts_emit1(e, "Where", 3, in, NULL, &c))) return st;
    return bin(e, "Mul", c, sc, out);
}

static ox_status op_selu(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    return act1(e, "Selu", a[0], NULL, 0, out);
}

static ox_status op_celu(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    return act1(e, "Celu", a[0], "alpha", tv_num(a[1]), out);
}

static ox_status op_prelu(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* the weight (one value, or one per channel: dim 1) */
    struct tv *x = a[0], *w = a[1];
    ox_status st = need_t(e, x, "prelu");
    if (!st) st = need_t(e, w, "prelu weight");
    if (st) return st;
    int64_t numel = tv_numel(w);
    if (numel > 1 && x->rank >= 2) {
        int64_t shape[OX_MAX_RANK];
        shape[0] = numel;
        for (int i = 1; i < x->rank - 1; i++) shape[i] = 1;
        if ((st = reshape(e, w, x->rank - 1, shape, &w))) return st;
    }
    if (w->dt != x->dt && (st = cast(e, w, x->dt, &w))) return st;
    struct tv *in[2] = {x, w};
    return ts_emit1(e, "PRelu", 2, in, NULL, out);
}

/* softplus(self, beta=1, threshold=20): log(1 + exp(beta x)) / beta, x where beta x > threshold */
static ox_status softplus(struct ev *e, struct tv *x, double beta, double thr, struct tv **out) {
    struct tv *bx = x, *sp, *y, *gt;
    ox_status st = as_float(e, x, &x);
    if (st) return st;
    struct tv *b = fscalar(e, beta, x), *t = fscalar(e, thr, x);
    if (!b || !t) return oom(e);
    bx = x;
    if (beta != 1 && (st = bin(e, "Mul", x, b, &bx))) return st;
    if ((st = un(e, "Softplus", bx, &sp))) return st;
    y = sp;
    if (beta != 1 && (st = bin(e, "Div", sp, b, &y))) return st;
    if ((st = bin(e, "Greater", bx, t, &gt))) return st;
    struct tv *in[3] = {gt, x, y};
    return ts_emit1(e, "Where", 3, in, NULL, out);
}

static ox_status op_softplus(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    return softplus(e, a[0], tv_num(a[1]), tv_num(a[2]), out);
}

static ox_status op_mish(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* x tanh(softplus(x)) */
    struct tv *sp, *t;
    ox_status st = softplus(e, a[0], 1, 20, &sp);
    if (!st) st = un(e, "Tanh", sp, &t);
    return st ? st : bin(e, "Mul", a[0], t, out);
}

static ox_status op_log_sigmoid(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* -softplus(-x) */
    struct tv *x, *nx, *sp;
    ox_status st = as_float(e, a[0], &x);
    if (!st) st = un(e, "Neg", x, &nx);
    if (!st) st = un(e, "Softplus", nx, &sp);
    return st ? st : un(e, "Neg", sp, out);
}

static ox_status shrink(struct ev *e, struct tv *x, double lambd, double bias, struct tv **out) {
    struct ts_attrs at = {0};
    ta_float(&at, "lambd", (float)lambd);
    ta_float(&at, "bias", (float)bias);
    ox_status st = need_t(e, x, "shrink");
    return st ? st : ts_emit1(e, "Shrink", 1, &x, &at, out);
}

static ox_status op_hardshrink(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    return shrink(e, a[0], tv_num(a[1]), 0, out);
}

static ox_status op_softshrink(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    return shrink(e, a[0], tv_num(a[1]), tv_num(a[1]), out);
}

static ox_status op_threshold(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* threshold(self, threshold, value): x > threshold ? x : value */
    struct tv *x = a[0], *gt;
    ox_status st = need_t(e, x, "threshold");
    if (st) return st;
    struct tv *t = num_tensor(e, a[1], x->dt), *v = num_tensor(e, a[2], x->dt);
    if (!t || !v) return oom(e);
    if ((st = bin(e, "Greater", x, t, &gt))) return st;
    struct tv *in[3] = {gt, x, v};
    return ts_emit1(e, "Where", 3, in, NULL, out);
}

static ox_status op_glu(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* first half times the sigmoid of the second, along dim */
    struct tv *x = a[0], *p, *q, *s;
    int64_t d;
    ox_status st = need_t(e, x, "glu");
    if (!st) st = tv_to_int(e, a[1], &d);
    if (!st) st = norm_dim(e, d, x->rank, &d);
    if (st) return st;
    int64_t h = x->dims[d] / 2;
    if (x->dims[d] % 2) return ts_err(e, OX_E_INVALID, "glu of an odd dimension");
    if ((st = slice1(e, x, d, 0, h, 1, &p)) || (st = slice1(e, x, d, h, 2 * h, 1, &q)) ||
        (st = un(e, "Sigmoid", q, &s)))
        return st;
    return bin(e, "Mul", p, s, out);
}

static ox_status op_rrelu(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* rrelu(self, lower, upper, training=False): the mean slope in evaluation */
    bool train = false;
    tv_truthy(a[3], &train);
    if (train) return ts_err(e, OX_E_UNSUPPORTED, "rrelu in training mode");
    return act1(e, "LeakyRelu", a[0], "alpha", (tv_num(a[1]) + tv_num(a[2])) / 2, out);
}

/* ---- more reductions -------------------------------------------------------------------- */

static ox_status arg_reduce(struct ev *e, const char *op, struct tv **a, struct tv **out) {
    struct tv *x = a[0];
    ox_status st = need_t(e, x, op);
    if (st) return st;
    int64_t d = 0;
    bool kd = false;
    tv_truthy(a[2], &kd);
    if (is_none(a[1])) { /* over the flattened tensor; keepdim: every dim of size 1 */
        int64_t all = -1, ones[OX_MAX_RANK];
        struct tv *r;
        int rank = x->rank;
        if ((st = reshape(e, x, 1, &all, &x))) return st;
        struct ts_attrs at = {0};
        ta_int(&at, "axis", 0);
        ta_int(&at, "keepdims", 0);
        if ((st = ts_emit1(e, op, 1, &x, &at, &r)) || !kd) return st ? st : (*out = r, OX_OK);
        for (int i = 0; i < rank; i++) ones[i] = 1;
        return reshape(e, r, rank, ones, out);
    } else if ((st = tv_to_int(e, a[1], &d)) || (st = norm_dim(e, d, x->rank, &d))) {
        return st;
    }
    struct ts_attrs at = {0};
    ta_int(&at, "axis", d);
    ta_int(&at, "keepdims", kd);
    return ts_emit1(e, op, 1, &x, &at, out);
}

static ox_status op_argmax(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    return arg_reduce(e, "ArgMax", a, out);
}

static ox_status op_argmin(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    return arg_reduce(e, "ArgMin", a, out);
}

static ox_status op_amin(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    return reduce(e, "ReduceMin", a[0], a[1], a[2], NULL, out);
}

static ox_status op_prod(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct tv *x = a[0];
    ox_status st = need_t(e, x, "prod");
    if (st) return st;
    if (is_none(a[3]) && !ox_dtype_is_float(x->dt) && x->dt != OX_INT64 &&
        (st = cast(e, x, OX_INT64, &x)))
        return st; /* torch multiplies integers as int64 */
    return reduce(e, "ReduceProd", x, a[1], a[2], a[3], out);
}

static ox_status op_logsumexp(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct tv *x;
    ox_status st = as_float(e, a[0], &x);
    return st ? st : reduce(e, "ReduceLogSumExp", x, a[1], a[2], NULL, out);
}

static ox_status op_count_nonzero(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct tv *x = a[0], *z, *eq, *ne, *i;
    ox_status st = need_t(e, x, "count_nonzero");
    if (st) return st;
    if (!(z = tv_scalar_tensor(e, 0, x->dt))) return oom(e);
    if ((st = bin(e, "Equal", x, z, &eq)) || (st = un(e, "Not", eq, &ne)) ||
        (st = cast(e, ne, OX_INT64, &i)))
        return st;
    return reduce(e, "ReduceSum", i, a[1], NULL, NULL, out);
}

/* The p-norm of x over axes (all when dims is None or empty). */
static ox_status pnorm(struct ev *e, struct tv *x, double p, struct tv *dims, struct tv *keep,
                       struct tv **out) {
    ox_status st = as_float(e, x, &x);
    if (st) return st;
    struct tv *ab, *r;
    if (dims && (dims->k == TV_LIST || dims->k == TV_TUPLE) && dims->n == 0) dims = NULL;
    if (p == 2) return reduce(e, "ReduceL2", x, dims, keep, NULL, out);
    if (p == 1) return reduce(e, "ReduceL1", x, dims, keep, NULL, out);
    if ((st = un(e, "Abs", x, &ab))) return st;
    if (isinf(p)) return reduce(e, p > 0 ? "ReduceMax" : "ReduceMin", ab, dims, keep, NULL, out);
    if (p == 0) { /* the number of nonzero values */
        struct tv *z = fscalar(e, 0, x), *gt, *f;
        if (!z) return oom(e);
        if ((st = bin(e, "Greater", ab, z, &gt)) || (st = cast(e, gt, x->dt, &f))) return st;
        return reduce(e, "ReduceSum", f, dims, keep, NULL, out);
    }
    struct tv *pp = fscalar(e, p, x), *ip = fscalar(e, 1 / p, x), *pw;
    if (!pp || !ip) return oom(e);
    struct tv *in[2] = {ab, pp};
    if ((st = ts_emit1(e, "Pow", 2, in, NULL, &pw)) ||
        (st = reduce(e, "ReduceSum", pw, dims, keep, NULL, &r)))
        return st;
    struct tv *in2[2] = {r, ip};
    return ts_emit1(e, "Pow", 2, in2, NULL, out);
}

static ox_status p_of(struct ev *e, const struct tv *v, double dflt, double *p) {
    if (is_none(v)) return (*p = dflt, OX_OK);
    if (v->k == TV_STR) {
        if (!strcmp(v->s, "fro")) return (*p = 2, OX_OK);
        return ts_err(e, OX_E_UNSUPPORTED, "the '%s' norm", v->s);
    }
    return num_arg(e, v, p, NULL);
}

static ox_status op_norm(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* norm(self, p=2, dim=None, keepdim=False, *, dtype=None) */
    double p;
    struct tv *x = a[0];
    ox_status st = p_of(e, a[1], 2, &p);
    if (!st) st = as_dtype(e, x, a[4], &x);
    return st ? st : pnorm(e, x, p, a[2], a[3], out);
}

static ox_status op_frobenius_norm(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    return pnorm(e, a[0], 2, a[1], a[2], out);
}

static ox_status op_vector_norm(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* linalg_vector_norm(self, ord=2, dim=None, keepdim=False, *, dtype=None) */
    return op_norm(e, a, n, out);
}

/* var/std(self, dim=None, unbiased=None, keepdim=False, *, correction=None); var(self,
 * unbiased) puts a bool where dim is. Returns the variance and the mean (keepdim applied). */
static ox_status moments(struct ev *e, struct tv **a, struct tv **var, struct tv **mean) {
    struct tv *x, *dims = a[1], *unb = a[2], *m, *d, *sq, *s;
    ox_status st = as_float(e, a[0], &x);
    if (st) return st;
    if (dims && dims->k == TV_BOOL) unb = dims, dims = NULL;
    if (dims && (dims->k == TV_LIST || dims->k == TV_TUPLE) && dims->n == 0) dims = NULL;
    double corr = 1;
    bool u = true;
    if (!is_none(a[4])) {
        if ((st = num_arg(e, a[4], &corr, NULL))) return st;
    } else if (!is_none(unb) && tv_truthy(unb, &u)) {
        corr = u ? 1 : 0;
    }
    int64_t axes[OX_MAX_RANK], count = 1;
    int k = 0;
    if (!is_none(dims) && (st = tv_to_ints(e, dims, axes, OX_MAX_RANK, &k))) return st;
    for (int i = 0; i < k; i++)
        if ((st = norm_dim(e, axes[i], x->rank, &axes[i]))) return st;
    if (k == 0)
        for (int i = 0; i < x->rank; i++) axes[k++] = i;
    for (int i = 0; i < k; i++) count *= x->dims[axes[i]];
    struct tv *ax = tv_list(e, TV_LIST, k), *yes = tv_bool(e, true),
              *den = fscalar(e, (double)count - corr, x);
    if (!ax || !yes || !den) return oom(e);
    for (int i = 0; i < k; i++)
        if (!(ax->items[i] = tv_int(e, axes[i]))) return oom(e);
    if ((st = reduce(e, "ReduceMean", x, ax, yes, NULL, &m)) || (st = bin(e, "Sub", x, m, &d)) ||
        (st = bin(e, "Mul", d, d, &sq)) || (st = reduce(e, "ReduceSum", sq, ax, a[3], NULL, &s)) ||
        (st = bin(e, "Div", s, den, var)))
        return st;
    bool kd = false;
    tv_truthy(a[3], &kd);
    if (kd) return (*mean = m, OX_OK);
    return axes_op(e, "Squeeze", m, k, axes, mean);
}

static ox_status op_var(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct tv *m;
    return moments(e, a, out, &m);
}

static ox_status op_std(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct tv *v, *m;
    ox_status st = moments(e, a, &v, &m);
    return st ? st : un(e, "Sqrt", v, out);
}

static ox_status op_var_mean(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct tv *v, *m;
    ox_status st = moments(e, a, &v, &m);
    return st ? st : tuple2(e, v, m, out);
}

static ox_status op_std_mean(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct tv *v, *m, *s;
    ox_status st = moments(e, a, &v, &m);
    if (!st) st = un(e, "Sqrt", v, &s);
    return st ? st : tuple2(e, s, m, out);
}

static ox_status op_cumsum(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* cumsum(self, dim, *, dtype=None): integers and bools sum as int64 */
    struct tv *x = a[0];
    int64_t d;
    ox_status st = need_t(e, x, "cumsum");
    if (!st) st = tv_to_int(e, a[1], &d);
    if (!st) st = norm_dim(e, d, x->rank, &d);
    ox_dtype want = OX_UNDEFINED; /* dtype=: summed in that type (int8/int16/uint8/bool: in
                                     int64, cast back; CumSum has no such types) */
    if (!st) st = dtype_arg(e, a[2], OX_UNDEFINED, &want);
    if (!st && want != OX_UNDEFINED) st = cast(e, x, want, &x);
    if (!st && !ox_dtype_is_float(x->dt) && x->dt != OX_INT64 &&
        (x->dt != OX_INT32 || want == OX_UNDEFINED))
        st = cast(e, x, OX_INT64, &x); /* torch sums integers and bools as int64 */
    if (st) return st;
    struct tv *r;
    if (x->rank == 0) {
        st = fresh(e, x, &r);
    } else {
        struct tv *in[2] = {x, tv_scalar_tensor(e, (double)d, OX_INT64)};
        st = in[1] ? ts_emit1(e, "CumSum", 2, in, NULL, &r) : oom(e);
    }
    if (st) return st;
    return want != OX_UNDEFINED && r->dt != want ? cast(e, r, want, out) : (*out = r, OX_OK);
}

static ox_status op_cumprod(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* no ONNX op: the running product, one slice at a time */
    struct tv *x = a[0];
    int64_t d;
    ox_status st = need_t(e, x, "cumprod");
    if (!st) st = tv_to_int(e, a[1], &d);
    if (!st) st = norm_dim(e, d, x->rank, &d);
    if (!st) st = as_dtype(e, x, a[2], &x);
    if (!st && !ox_dtype_is_float(x->dt) && x->dt != OX_INT64) st = cast(e, x, OX_INT64, &x);
    if (st) return st;
    if (x->rank == 0) return fresh(e, x, out);
    int64_t len = x->dims[d];
    if (len > 4096)
        return ts_err(e, OX_E_UNSUPPORTED, "cumprod along a dimension of %lld (at most 4096)",
                      (long long)len);
    if (len <= 1) return fresh(e, x, out);
    struct tv **parts = ox_arena_alloc(&e->a, sizeof *parts * (size_t)len);
    if (!parts) return oom(e);
    for (int64_t i = 0; i < len; i++) {
        struct tv *s;
        if ((st = slice1(e, x, d, i, i + 1, 1, &s))) return st;
        if (i && (st = bin(e, "Mul", parts[i - 1], s, &s))) return st;
        parts[i] = s;
    }
    return concat(e, (int)len, parts, d, out);
}

/* Concat of any number of parts (nodes take at most TS_MAX_IN operands: groups first). */
static ox_status concat_many(struct ev *e, int n, struct tv **xs, int64_t axis, struct tv **out) {
    while (n > TS_MAX_IN) {
        int m = 0;
        for (int i = 0; i < n; i += TS_MAX_IN, m++) {
            int k = n - i < TS_MAX_IN ? n - i : TS_MAX_IN;
            ox_status st = k == 1 ? (xs[m] = xs[i], OX_OK) : concat(e, k, xs + i, axis, &xs[m]);
            if (st) return st;
        }
        n = m;
    }
    return n == 1 ? (*out = xs[0], OX_OK) : concat(e, n, xs, axis, out);
}

/* ---- more elementwise binary ops -------------------------------------------------------- */

static ox_status op_maximum(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    return bin(e, "Max", a[0], a[1], out);
}

static ox_status op_minimum(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    return bin(e, "Min", a[0], a[1], out);
}

/* clamp_min / clamp_max: Clip for a number, Max / Min for a tensor bound */
static ox_status clamp_side(struct ev *e, struct tv *x, struct tv *b, bool lo, struct tv **out) {
    if (is_t(b) && b->rank > 0) return bin(e, lo ? "Max" : "Min", x, b, out);
    struct tv *none = tv_none(e);
    if (!none) return oom(e);
    return clip(e, x, lo ? b : none, lo ? none : b, out);
}

static ox_status op_clamp_min(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    return clamp_side(e, a[0], a[1], true, out);
}

static ox_status op_clamp_max(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    return clamp_side(e, a[0], a[1], false, out);
}

static ox_status op_fmod(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* the remainder with the dividend's sign (C fmod) */
    struct tv *x = a[0], *y = a[1];
    ox_status st = promote(e, &x, &y);
    if (st) return st;
    struct ts_attrs at = {0};
    ta_int(&at, "fmod", 1);
    struct tv *in[2] = {x, y};
    return ts_emit1(e, "Mod", 2, in, &at, out);
}

/* v's sign bit (-0 included): 1 / v < 0 */
static ox_status signbit_of(struct ev *e, struct tv *v, struct tv *zero, struct tv **out) {
    struct tv *r;
    ox_status st = un(e, "Reciprocal", v, &r);
    return st ? st : bin(e, "Less", r, zero, out);
}

static ox_status op_atan2(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* atan(y / x), moved by pi into x < 0's half-plane; x = +-0: +-pi/2 by y's sign,
               and for y = +-0 as C's atan2: y itself (x = +0) or +-pi (x = -0) */
    struct tv *y, *x, *q, *at, *xneg, *yneg, *xlt, *x0, *y0, *sy, *r1, *r2, *pim, *moved;
    ox_status st = as_float(e, a[0], &y);
    if (!st) st = as_float(e, a[1], &x);
    if (!st) st = promote(e, &y, &x);
    if (st) return st;
    struct tv *z = fscalar(e, 0, x), *pi = fscalar(e, M_PI, x), *mpi = fscalar(e, -M_PI, x),
              *h = fscalar(e, M_PI / 2, x);
    if (!z || !pi || !mpi || !h) return oom(e);
    if ((st = bin(e, "Div", y, x, &q)) || (st = un(e, "Atan", q, &at)) ||
        (st = signbit_of(e, x, z, &xneg)) || (st = signbit_of(e, y, z, &yneg)) ||
        (st = bin(e, "Less", x, z, &xlt)) || (st = bin(e, "Equal", x, z, &x0)) ||
        (st = bin(e, "Equal", y, z, &y0)) || (st = un(e, "Sign", y, &sy)))
        return st;
    struct tv *w1[3] = {yneg, mpi, pi};
    if ((st = ts_emit1(e, "Where", 3, w1, NULL, &pim)) || (st = bin(e, "Add", at, pim, &moved)))
        return st;
    struct tv *w2[3] = {xlt, moved, at};
    if ((st = ts_emit1(e, "Where", 3, w2, NULL, &r1)) || (st = bin(e, "Mul", sy, h, &r2)))
        return st;
    struct tv *w3[3] = {xneg, pim, y}, *zz, *zres;
    if ((st = ts_emit1(e, "Where", 3, w3, NULL, &zz))) return st;
    struct tv *w4[3] = {y0, zz, r2};
    if ((st = ts_emit1(e, "Where", 3, w4, NULL, &zres))) return st;
    struct tv *w5[3] = {x0, zres, r1};
    return ts_emit1(e, "Where", 3, w5, NULL, out);
}

static ox_status op_lerp(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* self + weight (end - self) */
    struct tv *d, *w;
    ox_status st = bin(e, "Sub", a[1], a[0], &d);
    if (!st) st = bin(e, "Mul", d, a[2], &w);
    return st ? st : bin(e, "Add", a[0], w, out);
}

static ox_status addc(struct ev *e, struct tv **a, const char *op, struct tv **out) {
    struct tv *p;
    ox_status st = bin(e, op, a[1], a[2], &p);
    if (st) return st;
    if (!(tv_is_num(a[3]) && tv_num(a[3]) == 1) && (st = bin(e, "Mul", p, a[3], &p))) return st;
    return bin(e, "Add", a[0], p, out);
}

static ox_status op_addcmul(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* self + value tensor1 tensor2 */
    return addc(e, a, "Mul", out);
}

static ox_status op_addcdiv(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* self + value tensor1 / tensor2 */
    return addc(e, a, "Div", out);
}

static ox_status logical(struct ev *e, const char *op, struct tv *x, struct tv *y,
                         struct tv **out) {
    ox_status st = need_t(e, x, op);
    if (!st && !is_t(y) && !(y = num_tensor(e, y, OX_BOOL))) return oom(e);
    if (!st && x->dt != OX_BOOL) st = cast(e, x, OX_BOOL, &x);
    if (!st && y->dt != OX_BOOL) st = cast(e, y, OX_BOOL, &y);
    struct tv *in[2] = {x, y};
    return st ? st : ts_emit1(e, op, 2, in, NULL, out);
}

static ox_status op_logical_and(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    return logical(e, "And", a[0], a[1], out);
}

static ox_status op_logical_or(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    return logical(e, "Or", a[0], a[1], out);
}

static ox_status op_logical_xor(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    return logical(e, "Xor", a[0], a[1], out);
}

static ox_status op_xor(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* a ^ b: booleans (tensors or numbers) */
    if (!is_t(a[0]) && !is_t(a[1])) {
        if (a[0]->k == TV_BOOL && a[1]->k == TV_BOOL)
            return (*out = tv_bool(e, a[0]->b != a[1]->b)) ? OX_OK : oom(e);
        if (a[0]->k == TV_INT && a[1]->k == TV_INT)
            return (*out = tv_int(e, a[0]->i ^ a[1]->i)) ? OX_OK : oom(e);
    }
    struct tv *x = is_t(a[0]) ? a[0] : a[1];
    if (x->dt != OX_BOOL || (is_t(a[1]) && a[1]->dt != OX_BOOL))
        return ts_err(e, OX_E_UNSUPPORTED, "^ of integer tensors");
    return logical(e, "Xor", a[0], a[1], out);
}

static ox_status op_bitwise_not(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* Not for bools; -x - 1 for integers (two's complement) */
    struct tv *x = a[0], *ng;
    ox_status st = need_t(e, x, "bitwise_not");
    if (st) return st;
    if (x->dt == OX_BOOL) return un(e, "Not", x, out);
    if (ox_dtype_is_float(x->dt)) return ts_err(e, OX_E_INVALID, "bitwise_not of a float tensor");
    if (x->dt == OX_UINT8 || x->dt == OX_UINT16 || x->dt == OX_UINT32 || x->dt == OX_UINT64) {
        double mx = x->dt == OX_UINT8 ? 255.0 : x->dt == OX_UINT16 ? 65535.0 : 4294967295.0;
        if (x->dt == OX_UINT64) return ts_err(e, OX_E_UNSUPPORTED, "bitwise_not of uint64");
        struct tv *m = tv_scalar_tensor(e, mx, x->dt); /* ~x = max - x */
        return m ? bin(e, "Sub", m, x, out) : oom(e);
    }
    struct tv *one = tv_scalar_tensor(e, 1, x->dt);
    if (!one) return oom(e);
    return (st = un(e, "Neg", x, &ng)) ? st : bin(e, "Sub", ng, one, out);
}

/* ---- more shapes ------------------------------------------------------------------------ */

static ox_status op_narrow(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* narrow(self, dim, start, length) */
    struct tv *x = a[0];
    int64_t d, s, len;
    ox_status st = need_t(e, x, "narrow");
    if (!st) st = tv_to_int(e, a[1], &d);
    if (!st) st = tv_to_int(e, a[2], &s);
    if (!st) st = tv_to_int(e, a[3], &len);
    if (!st) st = norm_dim(e, d, x->rank, &d);
    if (st) return st;
    if (s < 0) s += x->dims[d];
    if (s < 0 || len < 0 || s + len > x->dims[d])
        return ts_err(e, OX_E_INVALID, "narrow(%lld, %lld) of a dimension of %lld", (long long)s,
                      (long long)len, (long long)x->dims[d]);
    st = slice1(e, x, d, s, s + len, 1, out);
    if (!st) note_view(x, d, s, 1, false, *out);
    return st;
}

static ox_status op_unbind(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct tv *x = a[0];
    int64_t d;
    ox_status st = need_t(e, x, "unbind");
    if (!st) st = tv_to_int(e, a[1], &d);
    if (!st) st = norm_dim(e, d, x->rank, &d);
    if (st) return st;
    if (x->dims[d] > 4096)
        return ts_err(e, OX_E_UNSUPPORTED, "unbind into %lld", (long long)x->dims[d]);
    *out = tv_list(e, TV_LIST, (int)x->dims[d]);
    if (!*out) return oom(e);
    for (int64_t i = 0; i < x->dims[d]; i++) {
        struct tv *b[3] = {x, tv_int(e, d), tv_int(e, i)};
        if (!b[1] || !b[2]) return oom(e);
        if ((st = op_select(e, b, 3, &(*out)->items[i]))) return st;
    }
    return OX_OK;
}

static ox_status op_movedim(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* movedim(self, source, destination): ints or lists */
    struct tv *x = a[0];
    int64_t src[OX_MAX_RANK], dst[OX_MAX_RANK], perm[OX_MAX_RANK];
    int ns, nd;
    ox_status st = need_t(e, x, "movedim");
    if (!st) st = tv_to_ints(e, a[1], src, OX_MAX_RANK, &ns);
    if (!st) st = tv_to_ints(e, a[2], dst, OX_MAX_RANK, &nd);
    if (st) return st;
    if (ns != nd) return ts_err(e, OX_E_INVALID, "movedim: %d sources, %d destinations", ns, nd);
    bool used[OX_MAX_RANK] = {false}, placed[OX_MAX_RANK] = {false};
    for (int i = 0; i < ns; i++) {
        if ((st = norm_dim(e, src[i], x->rank, &src[i])) ||
            (st = norm_dim(e, dst[i], x->rank, &dst[i])))
            return st;
        if (used[src[i]] || placed[dst[i]])
            return ts_err(e, OX_E_INVALID, "movedim: repeated dims");
        perm[dst[i]] = src[i];
        used[src[i]] = placed[dst[i]] = true;
    }
    for (int i = 0, s = 0; i < x->rank; i++) {
        if (placed[i]) continue;
        while (used[s]) s++;
        perm[i] = s++;
    }
    return transpose(e, x, x->rank, perm, out);
}

static ox_status op_expand_as(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    ox_status st = need_t(e, a[0], "expand_as");
    if (!st) st = need_t(e, a[1], "expand_as");
    if (st) return st;
    struct tv *in[2] = {a[0], tv_i64s(e, a[1]->rank, a[1]->dims)};
    return in[1] ? ts_emit1(e, "Expand", 2, in, NULL, out) : oom(e);
}

static ox_status op_view_as(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    ox_status st = need_t(e, a[0], "view_as");
    if (!st) st = need_t(e, a[1], "view_as");
    return st ? st : reshape(e, a[0], a[1]->rank, a[1]->dims, out);
}

static ox_status op_repeat_interleave(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* repeat_interleave(self, repeats, dim=None, *, output_size=None) */
    struct tv *x = a[0];
    int64_t d = 0;
    ox_status st = need_t(e, x, "repeat_interleave");
    if (st) return st;
    if (is_none(a[2])) {
        int64_t all = -1;
        if ((st = reshape(e, x, 1, &all, &x))) return st;
    } else if ((st = tv_to_int(e, a[2], &d)) || (st = norm_dim(e, d, x->rank, &d))) {
        return st;
    }
    int64_t len = x->dims[d], total = 0;
    const struct tv *r = a[1];
    bool each = !is_t(r) || (r->cdata && ox_tensor_numel(r->cdata) == 1);
    if (is_t(r) && !r->cdata)
        return ts_err(e, OX_E_UNSUPPORTED, "repeat_interleave with repeats computed at run time");
    if (!each && ox_tensor_numel(r->cdata) != len)
        return ts_err(e, OX_E_INVALID, "repeat_interleave: %lld repeats for a dimension of %lld",
                      (long long)ox_tensor_numel(r->cdata), (long long)len);
    for (int64_t i = 0; i < len; i++) {
        double v =
            each ? (is_t(r) ? ox_tensor_get(r->cdata, 0) : tv_num(r)) : ox_tensor_get(r->cdata, i);
        if (v < 0) return ts_err(e, OX_E_INVALID, "repeat_interleave: a negative repeat");
        if (v > (double)((int64_t)1 << 31) - (double)total)
            return ts_err(e, OX_E_LIMIT, "repeat_interleave of more than 2^31 values");
        total += (int64_t)v;
    }
    void *data;
    struct tv *idx = tv_const_new(e, OX_INT64, 1, &total, &data);
    if (!idx) return oom(e);
    int64_t *ix = data, k = 0;
    for (int64_t i = 0; i < len; i++) {
        int64_t c = (int64_t)(each ? (is_t(r) ? ox_tensor_get(r->cdata, 0) : tv_num(r))
                                   : ox_tensor_get(r->cdata, i));
        for (int64_t j = 0; j < c; j++) ix[k++] = i;
    }
    struct tv *in[2] = {x, idx};
    struct ts_attrs at = {0};
    ta_int(&at, "axis", d);
    return ts_emit1(e, "Gather", 2, in, &at, out);
}

static ox_status op_tile(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* tile(self, dims): repeat, with leading ones where dims is shorter */
    struct tv *x = a[0];
    int64_t d[OX_MAX_RANK], full[OX_MAX_RANK];
    int k;
    ox_status st = need_t(e, x, "tile");
    if (!st) st = tv_to_ints(e, a[1], d, OX_MAX_RANK, &k);
    if (st) return st;
    int r = k > x->rank ? k : x->rank;
    for (int i = 0; i < r; i++) full[i] = i < r - k ? 1 : d[i - (r - k)];
    struct tv *l = tv_list(e, TV_LIST, r);
    if (!l) return oom(e);
    for (int i = 0; i < r; i++)
        if (!(l->items[i] = tv_int(e, full[i]))) return oom(e);
    struct tv *b[2] = {x, l};
    return op_repeat(e, b, 2, out);
}

static ox_status trilu(struct ev *e, struct tv **a, bool upper, struct tv **out) {
    struct tv *x = a[0];
    int64_t k = 0;
    ox_status st = need_t(e, x, upper ? "triu" : "tril");
    if (!st && !is_none(a[1])) st = tv_to_int(e, a[1], &k);
    if (st) return st;
    struct ts_attrs at = {0};
    ta_int(&at, "upper", upper);
    struct tv *in[2] = {x, tv_scalar_tensor(e, (double)k, OX_INT64)};
    return in[1] ? ts_emit1(e, "Trilu", 2, in, &at, out) : oom(e);
}

static ox_status op_tril(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    return trilu(e, a, false, out);
}

static ox_status op_triu(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    return trilu(e, a, true, out);
}

static ox_status op_diagonal(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* diagonal(self, offset=0, dim1=0, dim2=1): the diagonal becomes the last dim */
    struct tv *x = a[0], *t, *f;
    int64_t off, d1, d2;
    ox_status st = need_t(e, x, "diagonal");
    if (!st) st = tv_to_int(e, a[1], &off);
    if (!st) st = tv_to_int(e, a[2], &d1);
    if (!st) st = tv_to_int(e, a[3], &d2);
    if (!st) st = norm_dim(e, d1, x->rank, &d1);
    if (!st) st = norm_dim(e, d2, x->rank, &d2);
    if (st) return st;
    if (d1 == d2) return ts_err(e, OX_E_INVALID, "diagonal of one dimension with itself");
    int64_t perm[OX_MAX_RANK], shape[OX_MAX_RANK];
    int r = 0;
    for (int i = 0; i < x->rank; i++)
        if (i != d1 && i != d2) perm[r] = i, shape[r] = x->dims[i], r++;
    perm[r] = d1, perm[r + 1] = d2;
    int64_t rows = x->dims[d1], cols = x->dims[d2];
    int64_t len = off >= 0 ? (rows < cols - off ? rows : cols - off)
                           : (rows + off < cols ? rows + off : cols);
    if (len < 0) len = 0;
    shape[r] = rows * cols;
    void *data;
    struct tv *idx = tv_const_new(e, OX_INT64, 1, &len, &data);
    if (!idx) return oom(e);
    for (int64_t i = 0; i < len; i++)
        ((int64_t *)data)[i] = off >= 0 ? i * cols + i + off : (i - off) * cols + i;
    if ((st = transpose(e, x, x->rank, perm, &t)) || (st = reshape(e, t, r + 1, shape, &f)))
        return st;
    struct tv *in[2] = {f, idx};
    struct ts_attrs at = {0};
    ta_int(&at, "axis", r);
    if ((st = ts_emit1(e, "Gather", 2, in, &at, out))) return st;
    struct tv *base; /* a strided view of x: the diagonal steps both dims at once */
    int64_t boff, bstr[OX_MAX_RANK];
    if (len > 0 && *out != x && view_of_any(x, false, &base, &boff, bstr)) {
        (*out)->vbase = base;
        (*out)->voff = boff + (off >= 0 ? off * bstr[d2] : -off * bstr[d1]);
        for (int i = 0; i < r; i++) (*out)->vstride[i] = bstr[perm[i]];
        (*out)->vstride[r] = bstr[d1] + bstr[d2];
    }
    return OX_OK;
}

static ox_status op_outer(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct tv *p, *q;
    int64_t one = 1, zero = 0;
    ox_status st = need_t(e, a[0], "outer");
    if (!st) st = need_t(e, a[1], "outer");
    if (!st) st = axes_op(e, "Unsqueeze", a[0], 1, &one, &p);
    if (!st) st = axes_op(e, "Unsqueeze", a[1], 1, &zero, &q);
    return st ? st : bin(e, "Mul", p, q, out);
}

static ox_status op_cross(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* cross(self, other, dim=None): None is the first dimension of size 3 */
    struct tv *x = a[0], *y = a[1];
    int64_t d = -1;
    ox_status st = promote(e, &x, &y);
    if (st) return st;
    if (is_none(a[2])) {
        for (int i = 0; i < x->rank && d < 0; i++)
            if (x->dims[i] == 3) d = i;
        if (d < 0) return ts_err(e, OX_E_INVALID, "cross: no dimension of size 3");
    } else if ((st = tv_to_int(e, a[2], &d)) || (st = norm_dim(e, d, x->rank, &d))) {
        return st;
    }
    if (x->dims[d] != 3 || y->dims[d] != 3)
        return ts_err(e, OX_E_INVALID, "cross: dimension %lld is not of size 3", (long long)d);
    struct tv *xs[3], *ys[3], *c[3];
    for (int i = 0; i < 3; i++)
        if ((st = slice1(e, x, d, i, i + 1, 1, &xs[i])) ||
            (st = slice1(e, y, d, i, i + 1, 1, &ys[i])))
            return st;
    for (int i = 0; i < 3; i++) {
        int j = (i + 1) % 3, k = (i + 2) % 3;
        struct tv *p, *q;
        if ((st = bin(e, "Mul", xs[j], ys[k], &p)) || (st = bin(e, "Mul", xs[k], ys[j], &q)) ||
            (st = bin(e, "Sub", p, q, &c[i])))
            return st;
    }
    return concat(e, 3, c, d, out);
}

static ox_status op_einsum(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* einsum(equation, tensors, *, path=None) */
    if (a[0]->k != TV_STR) return ts_err(e, OX_E_INVALID, "einsum: the equation is not a string");
    ox_status st = list_of_tensors(e, a[1], "einsum");
    if (st) return st;
    int k = a[1]->n;
    if (k < 1 || k > TS_MAX_IN) return ts_err(e, OX_E_UNSUPPORTED, "einsum of %d operands", k);
    struct tv **in = ox_arena_alloc(&e->a, sizeof *in * (size_t)k);
    if (!in) return oom(e);
    in[0] = a[1]->items[0];
    for (int i = 1; i < k; i++) {
        struct tv *p = in[0], *q = a[1]->items[i];
        if ((st = promote(e, &p, &q))) return st;
        in[i] = q;
        if (p != in[0])
            for (int j = 0; j < i; j++)
                if ((st = cast(e, in[j], p->dt, &in[j]))) return st;
    }
    char eq[256];
    size_t w = 0;
    for (size_t i = 0; i < a[0]->s_len && w + 1 < sizeof eq; i++)
        if (a[0]->s[i] != ' ') eq[w++] = a[0]->s[i];
    eq[w] = 0;
    struct ts_attrs at = {0};
    ta_str(&at, "equation", ox_arena_strndup(&e->a, eq, w));
    return ts_emit1(e, "Einsum", k, in, &at, out);
}

static ox_status op_dot(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* dot, mv, vdot of real tensors: MatMul */
    struct tv *x = a[0], *y = a[1];
    ox_status st = promote(e, &x, &y);
    struct tv *in[2] = {x, y};
    return st ? st : ts_emit1(e, "MatMul", 2, in, NULL, out);
}

/* x1 [.., P, M], x2 [.., R, M] -> the p-distances [.., P, R] (the direct difference) */
static ox_status op_cdist(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* cdist(x1, x2, p=2., compute_mode=None) */
    struct tv *x, *y, *xu, *yu, *d;
    double p;
    ox_status st = as_float(e, a[0], &x);
    if (!st) st = as_float(e, a[1], &y);
    if (!st) st = num_arg(e, a[2], &p, NULL);
    if (!st && (x->rank < 2 || y->rank < 2))
        st = ts_err(e, OX_E_INVALID, "cdist of tensors of rank below 2");
    if (st) return st;
    int64_t ax = x->rank - 1, ay = y->rank - 2;
    struct tv *dims = tv_int(e, -1);
    if (!dims) return oom(e);
    if ((st = axes_op(e, "Unsqueeze", x, 1, &ax, &xu)) ||
        (st = axes_op(e, "Unsqueeze", y, 1, &ay, &yu)) || (st = bin(e, "Sub", xu, yu, &d)))
        return st;
    return pnorm(e, d, p, dims, NULL, out);
}

static ox_status op_pairwise_distance(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* pairwise_distance(x1, x2, p=2., eps=1e-06, keepdim=False): ||x1 - x2 + eps|| */
    struct tv *d, *de;
    double p = 2;
    ox_status st = num_arg(e, a[2], &p, NULL);
    if (!st) st = bin(e, "Sub", a[0], a[1], &d);
    if (!st) st = bin(e, "Add", d, a[3], &de);
    struct tv *dims = tv_int(e, -1);
    if (!st && !dims) return oom(e);
    return st ? st : pnorm(e, de, p, dims, a[4], out);
}

static ox_status op_cosine_similarity(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* sum(x1 x2) / sqrt(max(sum(x1^2), eps^2) max(sum(x2^2), eps^2)) (torch 1.13) */
    struct tv *x = a[0], *y = a[1], *xy, *xx, *yy, *w12, *w1, *w2, *nn, *s;
    double eps;
    ox_status st = promote(e, &x, &y);
    if (!st) st = num_arg(e, a[3], &eps, NULL);
    if (st) return st;
    struct tv *e2 = fscalar(e, eps * eps, x);
    if (!e2) return oom(e);
    if ((st = bin(e, "Mul", x, y, &xy)) || (st = bin(e, "Mul", x, x, &xx)) ||
        (st = bin(e, "Mul", y, y, &yy)) ||
        (st = reduce(e, "ReduceSum", xy, a[2], NULL, NULL, &w12)) ||
        (st = reduce(e, "ReduceSum", xx, a[2], NULL, NULL, &w1)) ||
        (st = reduce(e, "ReduceSum", yy, a[2], NULL, NULL, &w2)) ||
        (st = bin(e, "Max", w1, e2, &w1)) || (st = bin(e, "Max", w2, e2, &w2)) ||
        (st = bin(e, "Mul", w1, w2, &nn)) || (st = un(e, "Sqrt", nn, &s)))
        return st;
    return bin(e, "Div", w12, s, out);
}

static ox_status op_one_hot(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* one_hot(self, num_classes=-1): int64 */
    struct tv *x = a[0];
    int64_t k;
    ox_status st = need_t(e, x, "one_hot");
    if (!st) st = tv_to_int(e, a[1], &k);
    if (st) return st;
    if (k < 0) {
        if (!x->cdata)
            return ts_err(e, OX_E_UNSUPPORTED, "one_hot without num_classes of run-time indices");
        k = 0;
        for (int64_t i = 0; i < ox_tensor_numel(x->cdata); i++)
            if ((int64_t)ox_tensor_get(x->cdata, i) + 1 > k)
                k = (int64_t)ox_tensor_get(x->cdata, i) + 1;
    }
    int64_t two = 2;
    void *data;
    struct tv *vals = tv_const_new(e, OX_INT64, 1, &two, &data);
    if (!vals) return oom(e);
    ((int64_t *)data)[1] = 1;
    struct tv *in[3] = {x, tv_scalar_tensor(e, (double)k, OX_INT64), vals};
    if (!in[1]) return oom(e);
    struct ts_attrs at = {0};
    ta_int(&at, "axis", -1);
    return ts_emit1(e, "OneHot", 3, in, &at, out);
}

/* ---- creation --------------------------------------------------------------------------- */

static ox_status op_arange(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* arange(end) / arange(start, end) / arange(start, end, step), dtype= */
    double v[3] = {0, 0, 1};
    bool fl = false, f;
    struct tv *s[3] = {a[0], a[1], a[2]};
    if (is_none(a[1])) s[0] = NULL, s[1] = a[0], s[2] = NULL;
    for (int i = 0; i < 3; i++) {
        if (!s[i] || is_none(s[i])) continue;
        ox_status st = num_arg(e, s[i], &v[i], &f);
        if (st) return st;
        fl |= f;
    }
    if (v[2] == 0) return ts_err(e, OX_E_INVALID, "arange with step 0");
    ox_dtype dt;
    ox_status st = dtype_arg(e, a[3], fl ? OX_FLOAT : OX_INT64, &dt);
    if (st) return st;
    double cnt = ceil((v[1] - v[0]) / v[2]);
    int64_t len = cnt > 0 ? (int64_t)cnt : 0;
    if (len > ((int64_t)1 << 31))
        return ts_err(e, OX_E_LIMIT, "arange of %lld values", (long long)len);
    *out = tv_const_new(e, dt, 1, &len, NULL);
    if (!*out) return oom(e);
    for (int64_t i = 0; i < len; i++)
        ox_tensor_set((ox_tensor *)(*out)->cdata, i, v[0] + (double)i * v[2]);
    return OX_OK;
}

static ox_status op_linspace(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* linspace(start, end, steps, *, dtype=None) */
    double s, t;
    int64_t k;
    ox_dtype dt;
    ox_status st = num_arg(e, a[0], &s, NULL);
    if (!st) st = num_arg(e, a[1], &t, NULL);
    if (!st) st = tv_to_int(e, a[2], &k);
    if (!st) st = dtype_arg(e, a[3], OX_FLOAT, &dt);
    if (st) return st;
    if (k < 0 || k > ((int64_t)1 << 31))
        return ts_err(e, OX_E_INVALID, "linspace of %lld steps", (long long)k);
    *out = tv_const_new(e, dt, 1, &k, NULL);
    if (!*out) return oom(e);
    double step = k > 1 ? (t - s) / (double)(k - 1) : 0;
    for (int64_t i = 0; i < k; i++) /* both halves from their own end, as torch */
        ox_tensor_set((ox_tensor *)(*out)->cdata, i,
                      i < k / 2 ? s + step * (double)i : t - step * (double)(k - 1 - i));
    return OX_OK;
}

static ox_status op_full_like(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* full_like(self, fill_value, *, dtype=None, ...) */
    struct tv *b[2] = {a[0], a[2]};
    double v = 0;
    ox_status st = num_arg(e, a[1], &v, NULL);
    return st ? st : like(e, b, v, out);
}

static ox_status op_empty_like(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* empty_like: zeros (the values are unspecified) */
    return like(e, a, 0, out);
}

static ox_status op_new_full(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* new_full(self, size, fill_value, *, dtype=None, ...): self's dtype by default */
    double v;
    ox_status st = need_t(e, a[0], "new_full");
    if (!st) st = num_arg(e, a[2], &v, NULL);
    return st ? st : make_filled(e, a[1], a[3], v, a[0]->dt, out);
}

static ox_status op_new_empty(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    ox_status st = need_t(e, a[0], "new_empty");
    return st ? st : make_filled(e, a[1], a[2], 0, a[0]->dt, out);
}

static ox_status op_empty(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    return make_filled(e, a[0], a[1], 0, OX_FLOAT, out);
}

static ox_status op_eye(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* eye(n, m=None, *, dtype=None, ...) */
    int64_t d[2], m;
    ox_dtype dt;
    ox_status st = tv_to_int(e, a[0], &d[0]);
    if (!st) st = is_none(a[1]) ? (d[1] = d[0], OX_OK) : tv_to_int(e, a[1], &d[1]);
    if (!st) st = dtype_arg(e, a[2], OX_FLOAT, &dt);
    if (st) return st;
    if (d[0] < 0 || d[1] < 0 || d[0] * d[1] > ((int64_t)1 << 31))
        return ts_err(e, OX_E_INVALID, "eye(%lld, %lld)", (long long)d[0], (long long)d[1]);
    if (!(*out = tv_const_new(e, dt, 2, d, NULL))) return oom(e);
    m = d[0] < d[1] ? d[0] : d[1];
    for (int64_t i = 0; i < m; i++) ox_tensor_set((ox_tensor *)(*out)->cdata, i * d[1] + i, 1);
    return OX_OK;
}

static ox_status op_meshgrid(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* meshgrid(tensors, *, indexing="ij"): each 1-D input expanded over the grid */
    ox_status st = list_of_tensors(e, a[0], "meshgrid");
    if (st) return st;
    int k = a[0]->n;
    bool xy = a[1] && a[1]->k == TV_STR && !strcmp(a[1]->s, "xy");
    if (k > OX_MAX_RANK) return ts_err(e, OX_E_UNSUPPORTED, "meshgrid of %d tensors", k);
    int64_t full[OX_MAX_RANK];
    for (int i = 0; i < k; i++) {
        struct tv *t = a[0]->items[i];
        full[i] = t->rank == 0 ? 1 : t->dims[0];
    }
    if (xy && k >= 2) { /* the first two axes swap */
        int64_t t = full[0];
        full[0] = full[1], full[1] = t;
    }
    *out = tv_list(e, TV_LIST, k);
    if (!*out) return oom(e);
    for (int i = 0; i < k; i++) {
        int pos = xy && k >= 2 && i < 2 ? 1 - i : i;
        int64_t shape[OX_MAX_RANK];
        for (int j = 0; j < k; j++) shape[j] = j == pos ? full[j] : 1;
        struct tv *r, *in[2];
        if ((st = reshape(e, a[0]->items[i], k, shape, &r))) return st;
        in[0] = r;
        if (!(in[1] = tv_i64s(e, k, full))) return oom(e);
        if ((st = ts_emit1(e, "Expand", 2, in, NULL, &(*out)->items[i]))) return st;
    }
    return OX_OK;
}

static ox_status op_numel(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    ox_status st = need_t(e, a[0], "numel");
    if (st) return st;
    if (a[0]->rank < 0) return ts_err(e, OX_E_UNSUPPORTED, "numel of a tensor of unknown rank");
    return (*out = tv_int(e, tv_numel(a[0]))) ? OX_OK : oom(e);
}

static ox_status op_range_length(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* __range_length(lo, hi, step): len(range(lo, hi, step)) */
    int64_t lo, hi, step, len;
    ox_status st = tv_to_int(e, a[0], &lo);
    if (!st) st = tv_to_int(e, a[1], &hi);
    if (!st) st = tv_to_int(e, a[2], &step);
    if (st) return st;
    if (step == 0) return ts_err(e, OX_E_INVALID, "range() with step 0");
    len = step > 0 ? (hi > lo ? (hi - lo + step - 1) / step : 0)
                   : (lo > hi ? (lo - hi - step - 1) / -step : 0);
    return (*out = tv_int(e, len)) ? OX_OK : oom(e);
}

static ox_status op_derive_index(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* __derive_index(index, start, step): start + index step */
    int64_t i, s, k;
    ox_status st = tv_to_int(e, a[0], &i);
    if (!st) st = tv_to_int(e, a[1], &s);
    if (!st) st = tv_to_int(e, a[2], &k);
    return st ? st : (*out = tv_int(e, s + i * k)) ? OX_OK : oom(e);
}

/* ---- ordering and indexing -------------------------------------------------------------- */

static ox_status op_flip(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct tv *x = a[0];
    int64_t d[OX_MAX_RANK], s[OX_MAX_RANK], t[OX_MAX_RANK], st1[OX_MAX_RANK];
    int k;
    ox_status st = need_t(e, x, "flip");
    if (!st) st = tv_to_ints(e, a[1], d, OX_MAX_RANK, &k);
    if (st) return st;
    if (k == 0) return fresh(e, x, out);
    for (int i = 0; i < k; i++) {
        if ((st = norm_dim(e, d[i], x->rank, &d[i]))) return st;
        s[i] = -1, t[i] = INT64_MIN, st1[i] = -1;
    }
    struct tv *in[5] = {x, tv_i64s(e, k, s), tv_i64s(e, k, t), tv_i64s(e, k, d),
                        tv_i64s(e, k, st1)};
    for (int i = 1; i < 5; i++)
        if (!in[i]) return oom(e);
    return ts_emit1(e, "Slice", 5, in, NULL, out);
}

/* TopK along d: values and int64 indices, sorted (ties: the lower index first). */
static ox_status topk(struct ev *e, struct tv *x, int64_t k, int64_t d, bool largest,
                      struct tv **out) {
    struct ts_attrs at = {0};
    ta_int(&at, "axis", d);
    ta_int(&at, "largest", largest);
    ta_int(&at, "sorted", 1);
    struct tv *in[2] = {x, tv_i64s(e, 1, &k)}, *r[2];
    if (!in[1]) return oom(e);
    ox_status st = ts_emit(e, "TopK", 2, in, &at, 2, r);
    return st ? st : tuple2(e, r[0], r[1], out);
}

static ox_status op_topk(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* topk(self, k, dim=-1, largest=True, sorted=True) */
    struct tv *x = a[0];
    int64_t k, d;
    bool lg = true;
    ox_status st = need_t(e, x, "topk");
    if (!st) st = tv_to_int(e, a[1], &k);
    if (!st) st = tv_to_int(e, a[2], &d);
    if (!st) st = norm_dim(e, d, x->rank, &d);
    if (st) return st;
    tv_truthy(a[3], &lg);
    if (x->rank == 0) { /* one value, at index 0 */
        struct tv *c, *z = tv_scalar_tensor(e, 0, OX_INT64);
        if (!z) return oom(e);
        return (st = fresh(e, x, &c)) ? st : tuple2(e, c, z, out);
    }
    return topk(e, x, k, d, lg, out);
}

static ox_status op_sort(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* sort(self, dim=-1, descending=False, *, stable=None) */
    struct tv *x = a[0];
    int64_t d;
    bool desc = false;
    ox_status st = need_t(e, x, "sort");
    if (!st) st = tv_to_int(e, a[1], &d);
    if (!st) st = norm_dim(e, d, x->rank, &d);
    if (st) return st;
    tv_truthy(a[2], &desc);
    if (x->rank == 0) {
        struct tv *c, *z = tv_scalar_tensor(e, 0, OX_INT64);
        if (!z) return oom(e);
        return (st = fresh(e, x, &c)) ? st : tuple2(e, c, z, out);
    }
    return topk(e, x, x->dims[d], d, desc, out);
}

static ox_status op_argsort(struct ev *e, struct tv **a, int n, struct tv **out) {
    struct tv *r;
    ox_status st = op_sort(e, a, n, &r);
    return st ? st : (*out = r->items[1], OX_OK);
}

static ox_status op_gather(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* gather(self, dim, index, *, sparse_grad=False) */
    struct tv *x = a[0];
    int64_t d;
    ox_status st = self_dim_index(e, a, "gather", &d);
    if (st) return st;
    struct ts_attrs at = {0};
    ta_int(&at, "axis", d);
    struct tv *in[2] = {x, a[2]};
    return ts_emit1(e, "GatherElements", 2, in, &at, out);
}

/* scatter(self, dim, index, src or value, *, reduce=None) and scatter_add: a number
 * becomes a tensor of index's shape. */
static ox_status scatter(struct ev *e, struct tv **a, const char *red, struct tv **out) {
    struct tv *x = a[0], *idx = a[2], *src = a[3];
    int64_t d;
    ox_status st = self_dim_index(e, a, "scatter", &d);
    if (st) return st;
    if (!is_t(src)) {
        struct tv *v = num_tensor(e, src, x->dt), *in[2] = {v, tv_i64s(e, idx->rank, idx->dims)};
        if (!v || !in[1]) return oom(e);
        if ((st = ts_emit1(e, "Expand", 2, in, NULL, &src))) return st;
    } else if (src->dt != x->dt && (st = cast(e, src, x->dt, &src))) {
        return st;
    }
    bool same = src->rank == idx->rank;
    for (int i = 0; same && i < idx->rank; i++) same = src->dims[i] == idx->dims[i];
    if (!same) { /* torch reads src over index's extent only */
        int64_t s0[OX_MAX_RANK], s1[OX_MAX_RANK], ax[OX_MAX_RANK];
        for (int i = 0; i < idx->rank; i++) s0[i] = 0, s1[i] = idx->dims[i], ax[i] = i;
        struct tv *in[4] = {src, tv_i64s(e, idx->rank, s0), tv_i64s(e, idx->rank, s1),
                            tv_i64s(e, idx->rank, ax)};
        if (!in[1] || !in[2] || !in[3]) return oom(e);
        if ((st = ts_emit1(e, "Slice", 4, in, NULL, &src))) return st;
    }
    struct ts_attrs at = {0};
    ta_int(&at, "axis", d);
    if (red) ta_str(&at, "reduction", red);
    struct tv *in[3] = {x, idx, src};
    return ts_emit1(e, "ScatterElements", 3, in, &at, out);
}

static ox_status op_scatter(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    const char *red = NULL;
    if (!is_none(a[4])) {
        if (a[4]->k != TV_STR) return ts_err(e, OX_E_INVALID, "scatter: reduce is not a string");
        red = !strcmp(a[4]->s, "add") ? "add" : !strcmp(a[4]->s, "multiply") ? "mul" : NULL;
        if (!red) return ts_err(e, OX_E_UNSUPPORTED, "scatter with reduce '%s'", a[4]->s);
    }
    return scatter(e, a, red, out);
}

static ox_status op_scatter_add(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    return scatter(e, a, "add", out);
}

static ox_status op_scatter_reduce(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* scatter_reduce(self, dim, index, src, reduce, *, include_self=True) */
    bool inc = true;
    tv_truthy(a[5], &inc);
    if (a[4]->k != TV_STR) return ts_err(e, OX_E_INVALID, "scatter_reduce: reduce is not a string");
    /* amax/amin: ScatterElements' max and min come with opset 18; the import writes 17 */
    const char *r = a[4]->s, *red = !strcmp(r, "sum") ? "add" : !strcmp(r, "prod") ? "mul" : NULL;
    if (!red || !inc)
        return ts_err(e, OX_E_UNSUPPORTED, "scatter_reduce '%s'%s", r, inc ? "" : " without self");
    return scatter(e, a, red, out);
}

/* index_put(self, indices, values, accumulate=False) with one index tensor (the other
 * entries None: whole dims). A boolean mask: Where. Integer positions along an axis:
 * ScatterND with that axis moved first, for values that broadcast over the indexed shape. */
static ox_status op_index_put(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct tv *x = a[0], *l = a[1], *v = a[2], *idx = NULL;
    bool acc = false;
    ox_status st = need_t(e, x, "index_put");
    if (st) return st;
    tv_truthy(a[3], &acc);
    if (l->k != TV_LIST && l->k != TV_TUPLE)
        return ts_err(e, OX_E_UNSUPPORTED, "index_put with a %s", tv_kind_name(l->k));
    int axis = -1;
    for (int i = 0; i < l->n; i++) {
        if (is_none(l->items[i])) continue;
        if (axis >= 0)
            return ts_err(e, OX_E_UNSUPPORTED, "index_put with more than one index tensor");
        axis = i, idx = l->items[i];
    }
    if (!idx) return ts_err(e, OX_E_INVALID, "index_put without an index");
    if (axis >= x->rank)
        return ts_err(e, OX_E_INVALID, "index_put: an index for dim %d of a rank-%d tensor", axis,
                      x->rank);
    struct tv *vals = is_t(v) ? v : num_tensor(e, v, x->dt);
    if (!vals) return oom(e);
    if (vals->dt != x->dt && (st = cast(e, vals, x->dt, &vals))) return st;
    if (idx->dt == OX_BOOL) { /* x[mask] = value: the mask covers x's leading dims */
        if (axis != 0 || acc || vals->rank > 0 || idx->rank > x->rank)
            return ts_err(e, OX_E_UNSUPPORTED, "index_put with a mask and a tensor of values");
        int64_t shape[OX_MAX_RANK];
        for (int i = 0; i < x->rank; i++) shape[i] = i < idx->rank ? idx->dims[i] : 1;
        struct tv *m = idx;
        if (idx->rank < x->rank && (st = reshape(e, idx, x->rank, shape, &m))) return st;
        struct tv *in[3] = {m, vals, x};
        return ts_emit1(e, "Where", 3, in, NULL, out);
    }
    int64_t perm[OX_MAX_RANK], inv[OX_MAX_RANK], vshape[OX_MAX_RANK], last = idx->rank;
    perm[0] = axis;
    for (int i = 0, j = 1; i < x->rank; i++)
        if (i != axis) perm[j++] = i;
    for (int i = 0; i < x->rank; i++) inv[perm[i]] = i;
    int vr = 0, trail = x->rank - 1 - axis;
    if (idx->rank + x->rank - 1 > OX_MAX_RANK)
        return ts_err(e, OX_E_UNSUPPORTED, "index_put of too high a rank");
    for (int i = 0; i < idx->rank; i++) vshape[vr++] = idx->dims[i];
    for (int i = 1; i < x->rank; i++) vshape[vr++] = x->dims[perm[i]];
    int full = axis + idx->rank + trail; /* the rank of x[.., idx, ..] */
    if (vals->rank > full)
        return ts_err(e, OX_E_INVALID, "index_put: values of rank %d for a rank-%d selection",
                      vals->rank, full);
    if (axis > 0 && vals->rank > trail) { /* values laid out around the index: move it first */
        int64_t vd[OX_MAX_RANK], vp[OX_MAX_RANK];
        for (int i = 0; i < full; i++) {
            int src = i - (full - vals->rank);
            vd[i] = src >= 0 ? vals->dims[src] : 1;
        }
        if (vals->rank < full && (st = reshape(e, vals, full, vd, &vals))) return st;
        int r = 0;
        for (int i = 0; i < idx->rank; i++) vp[r++] = axis + i;
        for (int i = 0; i < axis; i++) vp[r++] = i;
        for (int i = axis + idx->rank; i < full; i++) vp[r++] = i;
        if ((st = transpose(e, vals, full, vp, &vals))) return st;
    }
    struct tv *xt = x, *pos, *y;
    if (axis && (st = transpose(e, x, x->rank, perm, &xt))) return st;
    if ((st = axes_op(e, "Unsqueeze", idx, 1, &last, &pos))) return st;
    if (pos->dt != OX_INT64 && (st = cast(e, pos, OX_INT64, &pos))) return st;
    struct tv *ein[2] = {vals, tv_i64s(e, vr, vshape)};
    if (!ein[1]) return oom(e);
    if ((st = ts_emit1(e, "Expand", 2, ein, NULL, &vals))) return st;
    struct ts_attrs at = {0};
    if (acc) ta_str(&at, "reduction", "add");
    struct tv *in[3] = {xt, pos, vals};
    if ((st = ts_emit1(e, "ScatterND", 3, in, &at, &y))) return st;
    return axis ? transpose(e, y, x->rank, inv, out) : (*out = y, OX_OK);
}

/* A bool [len] mask, true at the positions idx names (any shape; negative positions count
 * from the end): Equal of each position with arange(len), any over them. */
static ox_status index_mask(struct ev *e, struct tv *idx, int64_t len, struct tv **mask) {
    void *data;
    if (tv_numel(idx) == 0) /* no position (ReduceMax over none would say every one) */
        return (*mask = tv_const_new(e, OX_BOOL, 1, &len, NULL)) ? OX_OK : oom(e);
    struct tv *ar = tv_const_new(e, OX_INT64, 1, &len, &data), *ix, *iu, *neg, *wrapped, *eq, *hit;
    if (!ar) return oom(e);
    for (int64_t i = 0; i < len; i++) ((int64_t *)data)[i] = i;
    int64_t flat = -1, one = 1, zero = 0;
    struct tv *lz = tv_scalar_tensor(e, 0, OX_INT64),
              *ln = tv_scalar_tensor(e, (double)len, OX_INT64);
    if (!lz || !ln) return oom(e);
    ox_status st = reshape(e, idx, 1, &flat, &ix);
    if (!st && ix->dt != OX_INT64) st = cast(e, ix, OX_INT64, &ix);
    if (!st) st = axes_op(e, "Unsqueeze", ix, 1, &one, &iu);
    if (!st) st = bin(e, "Less", iu, lz, &neg);
    if (!st) st = bin(e, "Add", iu, ln, &wrapped);
    if (st) return st;
    struct tv *w[3] = {neg, wrapped, iu};
    if ((st = ts_emit1(e, "Where", 3, w, NULL, &iu)) || (st = bin(e, "Equal", iu, ar, &eq)) ||
        (st = cast(e, eq, OX_INT32, &hit)))
        return st;
    struct ts_attrs at = {0};
    ta_int(&at, "keepdims", 0);
    ta_ints(&at, "axes", 1, &zero);
    if ((st = ts_emit1(e, "ReduceMax", 1, &hit, &at, &hit))) return st;
    return cast(e, hit, OX_BOOL, mask);
}

static ox_status op_index_fill(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* index_fill(self, dim, index, value): the value at those positions of dim */
    struct tv *x = a[0], *idx = a[2];
    int64_t d;
    ox_status st = self_dim_index(e, a, "index_fill", &d);
    if (st) return st;
    int64_t len = x->dims[d];
    struct tv *mask;
    if (tv_numel(idx) == 0) return fresh(e, x, out); /* no position: x unchanged */
    if ((st = index_mask(e, idx, len, &mask))) return st;
    int64_t shape[OX_MAX_RANK];
    for (int i = 0; i < x->rank; i++) shape[i] = i == d ? len : 1;
    if (x->rank > 1 && (st = reshape(e, mask, x->rank, shape, &mask))) return st;
    struct tv *v = is_t(a[3]) ? a[3] : num_tensor(e, a[3], x->dt);
    if (!v) return oom(e);
    if (v->dt != x->dt && (st = cast(e, v, x->dt, &v))) return st;
    struct tv *in[3] = {mask, v, x};
    return ts_emit1(e, "Where", 3, in, NULL, out);
}

static ox_status op_bucketize(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* bucketize(self, boundaries, *, out_int32=False, right=False): how many
               boundaries lie below x (right: at or below) */
    struct tv *x = a[0], *b = a[1], *xu, *c, *ci, *r;
    bool right = false, i32 = false;
    ox_status st = need_t(e, x, "bucketize");
    if (!st) st = need_t(e, b, "bucketize boundaries");
    if (st) return st;
    tv_truthy(a[3], &right);
    tv_truthy(a[2], &i32);
    int64_t last = x->rank;
    if ((st = axes_op(e, "Unsqueeze", x, 1, &last, &xu))) return st;
    st = right ? bin(e, "LessOrEqual", b, xu, &c) : bin(e, "Less", b, xu, &c);
    if (!st) st = cast(e, c, OX_INT64, &ci);
    struct tv *ax = tv_int(e, -1);
    if (!st && !ax) return oom(e);
    if (!st) st = reduce(e, "ReduceSum", ci, ax, NULL, NULL, &r);
    return st ? st : cast(e, r, i32 ? OX_INT32 : OX_INT64, out);
}

/* ---- more vision and normalization ------------------------------------------------------ */

static ox_status op_instance_norm(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* instance_norm(input, weight, bias, running_mean, running_var, use_input_stats,
               momentum, eps, cudnn_enabled): group_norm with a group per channel */
    struct tv *x = a[0];
    bool stats = true;
    ox_status st = need_t(e, x, "instance_norm");
    if (st) return st;
    tv_truthy(a[5], &stats);
    if (!stats) { /* the running statistics: batch_norm in evaluation */
        struct tv *no = tv_bool(e, false), *b[9] = {x, a[1], a[2], a[3], a[4], no, a[6], a[7], no};
        if (!no) return oom(e);
        return op_batch_norm(e, b, 9, out);
    }
    if (x->rank < 2) return ts_err(e, OX_E_INVALID, "instance_norm of rank %d", x->rank);
    struct tv *g = tv_int(e, x->dims[1]), *b[5] = {x, g, a[1], a[2], a[7]};
    if (!g) return oom(e);
    return op_group_norm(e, b, 5, out);
}

/* [*, C r^2, H, W] <-> [*, C, H r, W r] by reshape and transpose */
static ox_status shuffle(struct ev *e, struct tv *x, int64_t r, bool up, struct tv **out) {
    ox_status st = need_t(e, x, "pixel_shuffle");
    if (st) return st;
    int lead = x->rank - 3;
    if (lead < 0 || lead + 6 > OX_MAX_RANK)
        return ts_err(e, OX_E_INVALID, "pixel_shuffle of rank %d", x->rank);
    if (r < 1) return ts_err(e, OX_E_INVALID, "pixel_shuffle factor %lld", (long long)r);
    int64_t c = x->dims[lead], h = x->dims[lead + 1], w = x->dims[lead + 2];
    int64_t s6[OX_MAX_RANK], perm[OX_MAX_RANK], fin[OX_MAX_RANK];
    for (int i = 0; i < lead; i++) s6[i] = fin[i] = x->dims[i], perm[i] = i;
    int L = lead;
    if (up) { /* [C, r, r, H, W] -> [C, H, r, W, r] */
        if (c % (r * r))
            return ts_err(e, OX_E_INVALID, "pixel_shuffle: %lld channels", (long long)c);
        int64_t oc = c / (r * r), sh[5] = {oc, r, r, h, w}, p[5] = {0, 3, 1, 4, 2},
                f[3] = {oc, h * r, w * r};
        for (int i = 0; i < 5; i++) s6[L + i] = sh[i], perm[L + i] = L + p[i];
        for (int i = 0; i < 3; i++) fin[L + i] = f[i];
    } else { /* [C, H/r, r, W/r, r] -> [C, r, r, H/r, W/r] */
        if (h % r || w % r)
            return ts_err(e, OX_E_INVALID, "pixel_unshuffle of %lldx%lld by %lld", (long long)h,
                          (long long)w, (long long)r);
        int64_t sh[5] = {c, h / r, r, w / r, r}, p[5] = {0, 2, 4, 1, 3},
                f[3] = {c * r * r, h / r, w / r};
        for (int i = 0; i < 5; i++) s6[L + i] = sh[i], perm[L + i] = L + p[i];
        for (int i = 0; i < 3; i++) fin[L + i] = f[i];
    }
    struct tv *a1, *t;
    if ((st = reshape(e, x, L + 5, s6, &a1)) || (st = transpose(e, a1, L + 5, perm, &t))) return st;
    return reshape(e, t, L + 3, fin, out);
}

static ox_status op_pixel_shuffle(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    int64_t r;
    ox_status st = tv_to_int(e, a[1], &r);
    return st ? st : shuffle(e, a[0], r, true, out);
}

static ox_status op_pixel_unshuffle(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    int64_t r;
    ox_status st = tv_to_int(e, a[1], &r);
    return st ? st : shuffle(e, a[0], r, false, out);
}

static ox_status op_channel_shuffle(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* channel_shuffle(self, groups): [N, g, C/g, ...] -> [N, C/g, g, ...] */
    struct tv *x = a[0], *r, *t;
    int64_t g;
    ox_status st = need_t(e, x, "channel_shuffle");
    if (!st) st = tv_to_int(e, a[1], &g);
    if (st) return st;
    if (x->rank < 2 || x->rank + 1 > OX_MAX_RANK || g < 1 || x->dims[1] % g)
        return ts_err(e, OX_E_INVALID, "channel_shuffle into %lld groups", (long long)g);
    int64_t sh[OX_MAX_RANK], perm[OX_MAX_RANK];
    sh[0] = x->dims[0], sh[1] = g, sh[2] = x->dims[1] / g;
    for (int i = 2; i < x->rank; i++) sh[i + 1] = x->dims[i];
    for (int i = 0; i <= x->rank; i++) perm[i] = i;
    perm[1] = 2, perm[2] = 1;
    if ((st = reshape(e, x, x->rank + 1, sh, &r)) || (st = transpose(e, r, x->rank + 1, perm, &t)))
        return st;
    return reshape(e, t, x->rank, x->dims, out);
}

static ox_status op_upsample_nearest_exact(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* _upsample_nearest_exact2d(input, output_size, scales): floor((i + 0.5) / s),
               the half_pixel coordinate rounded half up */
    return resize(e, a[0], a[1], a[2], "nearest", "half_pixel", "round_prefer_ceil", out);
}

static ox_status op_upsample_bicubic(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* upsample_bicubic2d(input, output_size, align_corners, scale_factors) */
    bool ac = false;
    tv_truthy(a[2], &ac);
    return resize(e, a[0], a[1], a[3], "cubic", ac ? "align_corners" : "half_pixel", NULL, out);
}

/* adaptive_max_pool to any size: along each spatial axis, output i is the max of input
 * [floor(i in / out), ceil((i + 1) in / out)) (one axis at a time: max is separable). */
static ox_status op_adaptive_max_pool_any(struct ev *e, struct tv *x, int k, const int64_t *o,
                                          struct tv **out) {
    ox_status st = OX_OK;
    for (int s = 0; s < k; s++) {
        int64_t axis = 2 + s, in = x->dims[axis], on = o[s];
        if (in == on) continue;
        if (on < 1 || on > 4096)
            return ts_err(e, OX_E_UNSUPPORTED, "adaptive_max_pool to %lld", (long long)on);
        struct tv **parts = ox_arena_alloc(&e->a, sizeof *parts * (size_t)on);
        if (!parts) return oom(e);
        for (int64_t i = 0; i < on; i++) {
            int64_t b = (i * in) / on, t = ((i + 1) * in + on - 1) / on;
            struct tv *sl, *ax = tv_int(e, axis), *yes = tv_bool(e, true);
            if (!ax || !yes) return oom(e);
            if ((st = slice1(e, x, axis, b, t, 1, &sl)) ||
                (st = reduce(e, "ReduceMax", sl, ax, yes, NULL, &parts[i])))
                return st;
        }
        if ((st = concat_many(e, (int)on, parts, axis, &x))) return st;
    }
    *out = x;
    return OX_OK;
}

/* MaxPool's indices count over the whole input x; torch's over each (N, C) plane of it */
static ox_status plane_indices(struct ev *e, const struct tv *x, struct tv *idx, struct tv **out) {
    int64_t plane = 1, nc[2] = {idx->dims[0], idx->dims[1]};
    for (int i = 2; i < x->rank; i++) plane *= x->dims[i];
    int64_t shape[OX_MAX_RANK];
    shape[0] = nc[0], shape[1] = nc[1];
    for (int i = 2; i < idx->rank; i++) shape[i] = 1;
    void *data;
    struct tv *off = tv_const_new(e, OX_INT64, idx->rank, shape, &data);
    if (!off) return oom(e);
    for (int64_t i = 0; i < nc[0] * nc[1]; i++) ((int64_t *)data)[i] = i * plane;
    return bin(e, "Sub", idx, off, out);
}

static ox_status op_max_pool_with_indices(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* max_pool2d_with_indices(self, kernel_size, stride=[], padding=0, dilation=1,
               ceil_mode=False) -> (values, indices in each plane) */
    struct tv *r[2], *idx;
    if (is_t(a[0]) && a[0]->rank < 3)
        return ts_err(e, OX_E_UNSUPPORTED, "max_pool with indices of rank %d", a[0]->rank);
    ox_status st = pool(e, "MaxPool", a[0], a[1], a[2], a[3], a[4], a[5], NULL, 2, r);
    if (!st) st = plane_indices(e, a[0], r[1], &idx);
    return st ? st : tuple2(e, r[0], idx, out);
}

static ox_status op_max_unpool(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* max_unpool2d(self, indices, output_size): scatter into zeros by the indices */
    struct tv *x = a[0], *idx, *flat, *fi, *z;
    int64_t os[OX_MAX_RANK];
    int k;
    ox_status st = need_t(e, x, "max_unpool");
    if (!st) st = need_t(e, a[1], "max_unpool indices");
    if (!st) st = tv_to_ints(e, a[2], os, OX_MAX_RANK, &k);
    if (st) return st;
    if (k != x->rank - 2) return ts_err(e, OX_E_INVALID, "max_unpool to %d dims", k);
    int64_t shape[3] = {x->dims[0], x->dims[1], 1};
    for (int i = 0; i < k; i++) shape[2] *= os[i];
    /* per plane: [N, C, plane] zeros, ScatterElements along the last axis */
    int64_t fs[3] = {x->dims[0], x->dims[1], -1};
    idx = a[1];
    if (idx->dt != OX_INT64 && (st = cast(e, idx, OX_INT64, &idx))) return st;
    if ((st = reshape(e, x, 3, fs, &flat)) || (st = reshape(e, idx, 3, fs, &fi))) return st;
    if (!(z = tv_const_new(e, x->dt, 3, shape, NULL))) return oom(e);
    struct ts_attrs at = {0};
    ta_int(&at, "axis", 2);
    struct tv *in[3] = {z, fi, flat}, *y;
    if ((st = ts_emit1(e, "ScatterElements", 3, in, &at, &y))) return st;
    int64_t full[OX_MAX_RANK];
    full[0] = x->dims[0], full[1] = x->dims[1];
    for (int i = 0; i < k; i++) full[2 + i] = os[i];
    return reshape(e, y, x->rank, full, out);
}

static ox_status op_convolution_mode(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* _convolution_mode(input, weight, bias, stride, padding: "same"/"valid",
               dilation, groups) */
    return conv(e, a[0], a[1], a[2], a[3], a[4], a[5], false, NULL, a[6], out);
}

/* One-hot weights [C k, 1, kh, kw] (k = kh kw): a depthwise convolution with them copies
 * each channel's patch out (im2col), its transpose adds patches back (col2im). */
static ox_status patch_weights(struct ev *e, ox_dtype dt, int64_t c, const int64_t *ks,
                               struct tv **out) {
    int64_t kk = ks[0] * ks[1], shape[4] = {c * kk, 1, ks[0], ks[1]};
    if (c * kk > (1 << 24))
        return ts_err(e, OX_E_LIMIT, "unfold of %lld patches", (long long)(c * kk));
    if (!(*out = tv_const_new(e, dt, 4, shape, NULL))) return oom(e);
    for (int64_t i = 0; i < c * kk; i++)
        ox_tensor_set((ox_tensor *)(*out)->cdata, i * kk + i % kk, 1);
    return OX_OK;
}

static ox_status fold_attrs(struct ev *e, struct tv **a, int64_t *ks, int64_t *d, int64_t *p,
                            int64_t *s, struct ts_attrs *at) {
    ox_status st = expand_list(e, a[0], 2, ks);
    if (!st) st = expand_list(e, a[1], 2, d);
    if (!st) st = expand_list(e, a[2], 2, p);
    if (!st) st = expand_list(e, a[3], 2, s);
    if (st) return st;
    p[2] = p[0], p[3] = p[1];
    ta_ints(at, "kernel_shape", 2, ks);
    ta_ints(at, "dilations", 2, d);
    ta_ints(at, "pads", 4, p);
    ta_ints(at, "strides", 2, s);
    return OX_OK;
}

static ox_status op_im2col(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* im2col(self, kernel_size, dilation, padding, stride): [N, C kh kw, L] */
    struct tv *x = a[0], *w, *y;
    int64_t ks[2], d[2], p[4], s[2];
    struct ts_attrs at = {0};
    ox_status st = need_t(e, x, "unfold");
    if (!st && x->rank != 4) st = ts_err(e, OX_E_UNSUPPORTED, "unfold of rank %d", x->rank);
    if (!st) st = fold_attrs(e, a + 1, ks, d, p, s, &at);
    if (!st) st = patch_weights(e, x->dt, x->dims[1], ks, &w);
    if (st) return st;
    ta_int(&at, "group", x->dims[1]);
    struct tv *in[2] = {x, w};
    if ((st = ts_emit1(e, "Conv", 2, in, &at, &y))) return st;
    int64_t shape[3] = {x->dims[0], x->dims[1] * ks[0] * ks[1], -1};
    return reshape(e, y, 3, shape, out);
}

static ox_status op_col2im(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* col2im(self, output_size, kernel_size, dilation, padding, stride) */
    struct tv *x = a[0], *w, *r;
    int64_t ks[2], os[2], d[2], p[4], s[2];
    struct ts_attrs at = {0};
    ox_status st = need_t(e, x, "fold");
    if (!st && x->rank != 3) st = ts_err(e, OX_E_UNSUPPORTED, "fold of rank %d", x->rank);
    if (!st) st = expand_list(e, a[1], 2, os);
    if (!st) st = fold_attrs(e, a + 2, ks, d, p, s, &at);
    if (st) return st;
    int64_t kk = ks[0] * ks[1], c = x->dims[1] / kk, bl[2], op[2];
    if (x->dims[1] % kk)
        return ts_err(e, OX_E_INVALID, "fold: %lld rows for a %lldx%lld kernel",
                      (long long)x->dims[1], (long long)ks[0], (long long)ks[1]);
    for (int i = 0; i < 2; i++) { /* the blocks' grid, from the output size */
        bl[i] = (os[i] + 2 * p[i] - d[i] * (ks[i] - 1) - 1) / s[i] + 1;
        op[i] = os[i] + 2 * p[i] - ((bl[i] - 1) * s[i] + d[i] * (ks[i] - 1) + 1);
    }
    if (bl[0] * bl[1] != x->dims[2])
        return ts_err(e, OX_E_INVALID, "fold: %lld blocks where the sizes give %lld",
                      (long long)x->dims[2], (long long)(bl[0] * bl[1]));
    int64_t shape[4] = {x->dims[0], c * kk, bl[0], bl[1]};
    if ((st = reshape(e, x, 4, shape, &r)) || (st = patch_weights(e, x->dt, c, ks, &w))) return st;
    ta_int(&at, "group", c);
    ta_ints(&at, "output_padding", 2, op);
    struct tv *in[2] = {r, w};
    return ts_emit1(e, "ConvTranspose", 2, in, &at, out);
}

static ox_status op_affine_grid(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* affine_grid_generator(theta [N, 2, 3], size [N, C, H, W], align_corners):
               base [H W, 3] (x, y, 1) times theta^T -> [N, H, W, 2] */
    struct tv *th = a[0], *base, *t, *m;
    int64_t sz[OX_MAX_RANK];
    int k;
    bool ac = false;
    ox_status st = need_t(e, th, "affine_grid");
    if (!st) st = tv_to_ints(e, a[1], sz, OX_MAX_RANK, &k);
    if (st) return st;
    tv_truthy(a[2], &ac);
    if (k != 4) return ts_err(e, OX_E_UNSUPPORTED, "affine_grid of a %d-D size", k);
    if (sz[2] < 1 || sz[3] < 1 || sz[2] > (1 << 16) || sz[3] > (1 << 16) ||
        sz[2] * sz[3] > (1 << 26))
        return ts_err(e, OX_E_LIMIT, "affine_grid of %lldx%lld", (long long)sz[2],
                      (long long)sz[3]);
    int64_t h = sz[2], w = sz[3], bs[2] = {h * w, 3};
    void *data;
    if (!(base = tv_const_new(e, th->dt, 2, bs, &data))) return oom(e);
    for (int64_t i = 0; i < h; i++)
        for (int64_t j = 0; j < w; j++) {
            double x = w > 1 ? -1 + 2.0 * (double)j / (double)(w - 1) : 0,
                   y = h > 1 ? -1 + 2.0 * (double)i / (double)(h - 1) : 0;
            if (!ac) x = x * (double)(w - 1) / (double)w, y = y * (double)(h - 1) / (double)h;
            int64_t r = (i * w + j) * 3;
            ox_tensor_set((ox_tensor *)base->cdata, r, x);
            ox_tensor_set((ox_tensor *)base->cdata, r + 1, y);
            ox_tensor_set((ox_tensor *)base->cdata, r + 2, 1);
        }
    int64_t perm[3] = {0, 2, 1}, fin[4] = {sz[0], h, w, 2};
    if ((st = transpose(e, th, 3, perm, &t))) return st;
    struct tv *in[2] = {base, t};
    if ((st = ts_emit1(e, "MatMul", 2, in, NULL, &m))) return st;
    return reshape(e, m, 4, fin, out);
}

static ox_status op_grid_sampler(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners) */
    static const char *const modes[] = {"bilinear", "nearest", "bicubic"},
                             *pads[] = {"zeros", "border", "reflection"};
    int64_t im, pm;
    bool ac = false;
    ox_status st = need_t(e, a[0], "grid_sample");
    if (!st) st = tv_to_int(e, a[2], &im);
    if (!st) st = tv_to_int(e, a[3], &pm);
    if (st) return st;
    if (im < 0 || im > 2 || pm < 0 || pm > 2 || a[0]->rank != 4)
        return ts_err(e, OX_E_UNSUPPORTED, "grid_sample mode %lld, padding %lld, rank %d",
                      (long long)im, (long long)pm, a[0]->rank);
    tv_truthy(a[4], &ac);
    struct ts_attrs at = {0};
    ta_str(&at, "mode", modes[im]);
    ta_str(&at, "padding_mode", pads[pm]);
    ta_int(&at, "align_corners", ac);
    struct tv *in[2] = {a[0], a[1]};
    return ts_emit1(e, "GridSample", 2, in, &at, out);
}

static ox_status op_embedding_bag(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* embedding_bag(weight, indices, offsets, scale_grad_by_freq, mode, sparse,
               per_sample_weights, include_last_offset, padding_idx): 1-D indices in bags
               that start at the (import-time) offsets; mode 0 sum, 1 mean, 2 max */
    struct tv *w = a[0], *idx = a[1], *off = a[2], *g;
    int64_t mode;
    bool last = false;
    ox_status st = need_t(e, w, "embedding_bag");
    if (!st) st = need_t(e, idx, "embedding_bag indices");
    if (!st) st = tv_to_int(e, a[4], &mode);
    if (st) return st;
    tv_truthy(a[7], &last);
    if (!is_none(a[6]) || (!is_none(a[8]) && tv_num(a[8]) >= 0))
        return ts_err(e, OX_E_UNSUPPORTED, "embedding_bag with per_sample_weights or padding_idx");
    if (idx->rank != 1 || !is_t(off) || !off->cdata || off->rank != 1)
        return ts_err(e, OX_E_UNSUPPORTED, "embedding_bag without import-time offsets");
    int64_t nb = ox_tensor_numel(off->cdata) - (last ? 1 : 0), total = idx->dims[0];
    if (nb < 1 || nb > 4096)
        return ts_err(e, OX_E_UNSUPPORTED, "embedding_bag of %lld bags", (long long)nb);
    struct ts_attrs at = {0};
    ta_int(&at, "axis", 0);
    struct tv *in[2] = {w, idx};
    if ((st = ts_emit1(e, "Gather", 2, in, &at, &g))) return st;
    static const char *const red[] = {"ReduceSum", "ReduceMean", "ReduceMax"};
    if (mode < 0 || mode > 2)
        return ts_err(e, OX_E_INVALID, "embedding_bag mode %lld", (long long)mode);
    struct tv **bags = ox_arena_alloc(&e->a, sizeof *bags * (size_t)nb);
    if (!bags) return oom(e);
    for (int64_t b = 0; b < nb; b++) {
        int64_t s = (int64_t)ox_tensor_get(off->cdata, b),
                t = b + 1 < ox_tensor_numel(off->cdata) ? (int64_t)ox_tensor_get(off->cdata, b + 1)
                                                        : total;
        struct tv *sl, *ax = tv_int(e, 0), *yes = tv_bool(e, true);
        if (!ax || !yes) return oom(e);
        if (s < 0 || t > total || s > t)
            return ts_err(e, OX_E_INVALID, "embedding_bag offsets out of order");
        if (s == t) { /* an empty bag: zeros */
            int64_t zs[2] = {1, w->dims[1]};
            if (!(bags[b] = tv_const_new(e, w->dt, 2, zs, NULL))) return oom(e);
            continue;
        }
        if ((st = slice1(e, g, 0, s, t, 1, &sl)) ||
            (st = reduce(e, red[mode], sl, ax, yes, NULL, &bags[b])))
            return st;
    }
    struct tv *y, *z = tv_scalar_tensor(e, 0, OX_INT64);
    if (!z) return oom(e);
    if ((st = concat_many(e, (int)nb, bags, 0, &y))) return st;
    struct tv *items = tv_list(e, TV_TUPLE, 4);
    if (!items) return oom(e);
    items->items[0] = y;
    items->items[1] = items->items[2] = items->items[3] = z; /* offset2bag etc.: not computed */
    *out = items;
    return OX_OK;
}

static ox_status op_det(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct tv *x;
    ox_status st = as_float(e, a[0], &x);
    return st ? st : ts_emit1(e, "Det", 1, &x, NULL, out);
}

/* The cells (one step; scripted nn.LSTMCell, GRUCell, RNNCell): input [B, I] or [I]. */
static ox_status cell_gates(struct ev *e, struct tv **a, struct tv *h, struct tv **gi,
                            struct tv **gh) {
    ox_status st = linear(e, a[0], a[2], is_none(a[4]) ? NULL : a[4], gi);
    return st ? st : linear(e, h, a[3], is_none(a[5]) ? NULL : a[5], gh);
}

static ox_status op_lstm_cell(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* lstm_cell(input, hx [h, c], w_ih, w_hh, b_ih=None, b_hh=None) -> (h, c) */
    struct tv *hx = a[1], *gi = NULL, *gh = NULL, *g = NULL, *parts, *i, *f, *c, *o, *fc, *ic, *cy,
              *tc, *hy;
    if (hx->k != TV_LIST || hx->n != 2 || !is_t(hx->items[0]) || !is_t(hx->items[1]))
        return ts_err(e, OX_E_UNSUPPORTED, "lstm_cell state");
    ox_status st = cell_gates(e, a, hx->items[0], &gi, &gh);
    if (!st) st = bin(e, "Add", gi, gh, &g);
    struct tv *ch[3] = {g, tv_int(e, 4), tv_int(e, -1)};
    if (!st && (!ch[1] || !ch[2])) return oom(e);
    if (!st) st = op_chunk(e, ch, 3, &parts);
    if (!st) st = un(e, "Sigmoid", parts->items[0], &i);
    if (!st) st = un(e, "Sigmoid", parts->items[1], &f);
    if (!st) st = un(e, "Tanh", parts->items[2], &c);
    if (!st) st = un(e, "Sigmoid", parts->items[3], &o);
    if (!st) st = bin(e, "Mul", f, hx->items[1], &fc);
    if (!st) st = bin(e, "Mul", i, c, &ic);
    if (!st) st = bin(e, "Add", fc, ic, &cy);
    if (!st) st = un(e, "Tanh", cy, &tc);
    if (!st) st = bin(e, "Mul", o, tc, &hy);
    return st ? st : tuple2(e, hy, cy, out);
}

static ox_status op_gru_cell(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* r, z = sigmoid; n = tanh(in + r hn); h' = n + z (h - n) */
    struct tv *h = a[1], *gi = NULL, *gh = NULL, *pi, *ph, *r, *z, *s, *rh, *nn, *d, *zd;
    ox_status st = need_t(e, h, "gru_cell state");
    if (!st) st = cell_gates(e, a, h, &gi, &gh);
    struct tv *c1[3] = {gi, tv_int(e, 3), tv_int(e, -1)}, *c2[3] = {gh, c1[1], c1[2]};
    if (!st && (!c1[1] || !c1[2])) return oom(e);
    if (!st) st = op_chunk(e, c1, 3, &pi);
    if (!st) st = op_chunk(e, c2, 3, &ph);
    if (!st) st = bin(e, "Add", pi->items[0], ph->items[0], &s);
    if (!st) st = un(e, "Sigmoid", s, &r);
    if (!st) st = bin(e, "Add", pi->items[1], ph->items[1], &s);
    if (!st) st = un(e, "Sigmoid", s, &z);
    if (!st) st = bin(e, "Mul", r, ph->items[2], &rh);
    if (!st) st = bin(e, "Add", pi->items[2], rh, &s);
    if (!st) st = un(e, "Tanh", s, &nn);
    if (!st) st = bin(e, "Sub", h, nn, &d);
    if (!st) st = bin(e, "Mul", z, d, &zd);
    return st ? st : bin(e, "Add", nn, zd, out);
}

static ox_status rnn_cell(struct ev *e, struct tv **a, const char *act, struct tv **out) {
    struct tv *gi, *gh, *s;
    ox_status st = need_t(e, a[1], "rnn cell state");
    if (!st) st = cell_gates(e, a, a[1], &gi, &gh);
    if (!st) st = bin(e, "Add", gi, gh, &s);
    return st ? st : un(e, act, s, out);
}

static ox_status op_rnn_tanh_cell(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    return rnn_cell(e, a, "Tanh", out);
}

static ox_status op_rnn_relu_cell(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    return rnn_cell(e, a, "Relu", out);
}

static ox_status op_dict(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)a; /* dict(): an empty dict (filled by _set_item) */
    if (n) return ts_err(e, OX_E_UNSUPPORTED, "dict() of arguments");
    return (*out = tv_list(e, TV_DICT, 0)) ? OX_OK : oom(e);
}

static ox_status op_tensor_unfold(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* unfold(self, dimension, size, step): windows along dim, the window last */
    struct tv *x = a[0], *g;
    int64_t d, size, step;
    ox_status st = need_t(e, x, "unfold");
    if (!st) st = tv_to_int(e, a[1], &d);
    if (!st) st = tv_to_int(e, a[2], &size);
    if (!st) st = tv_to_int(e, a[3], &step);
    if (!st) st = norm_dim(e, d, x->rank, &d);
    if (st) return st;
    int64_t len = x->rank ? x->dims[d] : 1;
    if (size < 0 || size > len || step < 1 || x->rank + 1 > OX_MAX_RANK)
        return ts_err(e, OX_E_INVALID, "unfold of size %lld step %lld on a dim of %lld",
                      (long long)size, (long long)step, (long long)len);
    int64_t wins[2] = {(len - size) / step + 1, size};
    void *data;
    struct tv *idx = tv_const_new(e, OX_INT64, 2, wins, &data);
    if (!idx) return oom(e);
    for (int64_t w = 0; w < wins[0]; w++)
        for (int64_t j = 0; j < size; j++) ((int64_t *)data)[w * size + j] = w * step + j;
    struct ts_attrs at = {0};
    ta_int(&at, "axis", d);
    struct tv *in[2] = {x, idx};
    if ((st = ts_emit1(e, "Gather", 2, in, &at, &g))) return st;
    int64_t perm[OX_MAX_RANK]; /* [.., W, size, ..] -> [.., W, .., size] */
    int r = 0;
    for (int i = 0; i <= x->rank; i++)
        if (i != d + 1) perm[r++] = i;
    perm[r++] = d + 1;
    return d + 1 == x->rank ? (*out = g, OX_OK) : transpose(e, g, r, perm, out);
}

/* ||v|| over every dim but `dim` (all of them for -1), keeping dims: weight_norm's norm */
static ox_status norm_except(struct ev *e, struct tv *v, int64_t pw, int64_t dim, struct tv **out) {
    ox_status st = need_t(e, v, "norm_except_dim");
    if (st) return st;
    if (dim != -1 && (st = norm_dim(e, dim, v->rank, &dim))) return st;
    struct tv *axes = tv_list(e, TV_LIST, v->rank), *yes = tv_bool(e, true);
    if (!axes || !yes) return oom(e);
    int k = 0;
    for (int i = 0; i < v->rank; i++)
        if (i != dim && !(axes->items[k++] = tv_int(e, i))) return oom(e);
    axes->n = k;
    if (k == 0) return op_abs(e, &v, 1, out);                          /* a 1-D v along dim: |v| */
    return pnorm(e, v, (double)pw, axes, dim == -1 ? NULL : yes, out); /* -1: 0-dim */
}

static ox_status op_norm_except_dim(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* norm_except_dim(v, pow=2, dim=0) */
    int64_t pw, dim;
    ox_status st = tv_to_int(e, a[1], &pw);
    if (!st) st = tv_to_int(e, a[2], &dim);
    return st ? st : norm_except(e, a[0], pw, dim, out);
}

static ox_status op_weight_norm(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* _weight_norm(v, g, dim=0): v g / ||v|| */
    struct tv *nv, *q;
    int64_t dim;
    ox_status st = tv_to_int(e, a[2], &dim);
    if (!st) st = norm_except(e, a[0], 2, dim, &nv);
    if (!st) st = bin(e, "Div", a[1], nv, &q);
    return st ? st : bin(e, "Mul", a[0], q, out);
}

/* ---- list methods ----------------------------------------------------------------------- */

static ox_status need_list(struct ev *e, const struct tv *l, const char *what) {
    if (l->k == TV_LIST) return OX_OK;
    return ts_err(e, OX_E_UNSUPPORTED, "%s on a %s", what, tv_kind_name(l->k));
}

/* l's items replaced by n new ones (items[] as given) */
static ox_status list_set(struct ev *e, struct tv *l, int n, struct tv **items) {
    struct tv **it = ox_arena_alloc(&e->a, sizeof *it * (size_t)(n ? n : 1));
    if (!it) return oom(e);
    if (n) memcpy(it, items, sizeof *it * (size_t)n);
    l->items = it;
    l->n = n;
    return OX_OK;
}

static ox_status op_list_reverse(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct tv *l = a[0];
    ox_status st = need_list(e, l, "reverse");
    if (st) return st;
    for (int i = 0, j = l->n - 1; i < j; i++, j--) {
        struct tv *t = l->items[i];
        l->items[i] = l->items[j], l->items[j] = t;
    }
    return (*out = tv_none(e)) ? OX_OK : oom(e);
}

static ox_status op_list_insert(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* insert(self, index, el): Python's clamping of the index */
    struct tv *l = a[0];
    int64_t k;
    ox_status st = need_list(e, l, "insert");
    if (!st) st = tv_to_int(e, a[1], &k);
    if (st) return st;
    if (k < 0) k += l->n;
    k = k < 0 ? 0 : k > l->n ? l->n : k;
    struct tv **it = ox_arena_alloc(&e->a, sizeof *it * (size_t)(l->n + 1));
    if (!it) return oom(e);
    for (int i = 0, j = 0; i <= l->n; i++) it[i] = i == k ? a[2] : l->items[j++];
    l->items = it;
    l->n++;
    return (*out = tv_none(e)) ? OX_OK : oom(e);
}

static ox_status op_list_pop(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* pop(self, idx=-1) */
    struct tv *l = a[0];
    int64_t k;
    ox_status st = need_list(e, l, "pop");
    if (!st) st = tv_to_int(e, a[1], &k);
    if (st) return st;
    if (k < 0) k += l->n;
    if (k < 0 || k >= l->n) return ts_err(e, OX_E_INVALID, "pop index out of range");
    *out = l->items[k];
    for (int i = (int)k; i + 1 < l->n; i++) l->items[i] = l->items[i + 1];
    l->n--;
    return OX_OK;
}

static ox_status op_list_extend(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct tv *l = a[0], *m = a[1];
    ox_status st = need_list(e, l, "extend");
    if (st) return st;
    if (m->k != TV_LIST && m->k != TV_TUPLE) return need_list(e, m, "extend with");
    struct tv **it = ox_arena_alloc(&e->a, sizeof *it * (size_t)(l->n + m->n + 1));
    if (!it) return oom(e);
    for (int i = 0; i < l->n; i++) it[i] = l->items[i];
    for (int i = 0; i < m->n; i++) it[l->n + i] = m->items[i];
    l->items = it;
    l->n += m->n;
    return (*out = tv_none(e)) ? OX_OK : oom(e);
}

static ox_status op_list_clear(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    ox_status st = need_list(e, a[0], "clear");
    if (!st) st = list_set(e, a[0], 0, NULL);
    return st ? st : (*out = tv_none(e)) ? OX_OK : oom(e);
}

/* the first position of x in l (index) or the number of times it is there (count) */
static ox_status list_find(struct ev *e, struct tv **a, bool count, struct tv **out) {
    struct tv *l = a[0];
    ox_status st = l->k == TV_LIST || l->k == TV_TUPLE ? OX_OK : need_list(e, l, "index");
    if (st) return st;
    int64_t found = -1, cnt = 0;
    for (int i = 0; i < l->n; i++) {
        struct tv *r;
        if (compare_scalars(e, "eq", l->items[i], a[1], &r)) return OX_E_UNSUPPORTED;
        if (r->b) cnt++, found = found < 0 ? i : found;
    }
    if (!count && found < 0) return ts_err(e, OX_E_INVALID, "index: the value is not in the list");
    return (*out = tv_int(e, count ? cnt : found)) ? OX_OK : oom(e);
}

static ox_status op_list_count(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    return list_find(e, a, true, out);
}

static ox_status op_list_remove(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct tv *k;
    ox_status st = need_list(e, a[0], "remove");
    if (!st) st = list_find(e, a, false, &k);
    if (st) return st;
    struct tv *b[2] = {a[0], k};
    return op_list_pop(e, b, 2, &k) ? OX_E_INVALID : (*out = tv_none(e)) ? OX_OK : oom(e);
}

/* ---- more layers ------------------------------------------------------------------------ */

static ox_status op_bilinear(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* bilinear(input1, input2, weight [O, I1, I2], bias=None): x1 W x2 + b */
    struct tv *y, *in[3] = {a[0], a[2], a[1]};
    ox_status st = need_t(e, a[0], "bilinear");
    if (!st) st = need_t(e, a[1], "bilinear");
    if (!st) st = need_t(e, a[2], "bilinear weight");
    if (st) return st;
    struct ts_attrs at = {0};
    ta_str(&at, "equation", "...i,oij,...j->...o");
    if ((st = ts_emit1(e, "Einsum", 3, in, &at, &y))) return st;
    return is_none(a[3]) ? (*out = y, OX_OK) : bin(e, "Add", y, a[3], out);
}

static ox_status op_embedding_renorm(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* embedding_renorm_(self, indices, max_norm, norm_type): the indexed rows over
               max_norm are scaled to it */
    struct tv *w = a[0], *nr, *gt, *q, *sc;
    double mx, p;
    ox_status st = need_t(e, w, "embedding_renorm_");
    if (!st) st = num_arg(e, a[2], &mx, NULL);
    if (!st) st = num_arg(e, a[3], &p, NULL);
    if (st) return st;
    struct tv *ax = tv_int(e, -1), *yes = tv_bool(e, true), *m = fscalar(e, mx, w),
              *eps = fscalar(e, 1e-7, w), *one = fscalar(e, 1, w), *ne;
    if (!ax || !yes || !m || !eps || !one) return oom(e);
    if ((st = pnorm(e, w, p, ax, yes, &nr)) || (st = bin(e, "Greater", nr, m, &gt)) ||
        (st = bin(e, "Add", nr, eps, &ne)) || (st = bin(e, "Div", m, ne, &q)))
        return st;
    /* only the rows the indices name (the weight may be read again: tied embeddings) */
    struct tv *rows, *sel;
    int64_t nrow = w->rank ? w->dims[0] : 1, rshape[2] = {nrow, 1};
    if ((st = need_t(e, a[1], "embedding_renorm_ indices")) ||
        (st = index_mask(e, a[1], nrow, &rows)) || (st = reshape(e, rows, 2, rshape, &rows)) ||
        (st = bin(e, "And", rows, gt, &sel)))
        return st;
    struct tv *in[3] = {sel, q, one};
    if ((st = ts_emit1(e, "Where", 3, in, NULL, &sc))) return st;
    return bin(e, "Mul", w, sc, out);
}

/* ---- losses (reduction: 0 none, 1 mean, 2 sum) ----------------------------------------- */

static ox_status reduction_of(struct ev *e, const struct tv *r, int64_t *red) {
    ox_status st = tv_to_int(e, r, red);
    if (!st && (*red < 0 || *red > 2))
        st = ts_err(e, OX_E_INVALID, "reduction %lld", (long long)*red);
    return st;
}

static ox_status reduced(struct ev *e, struct tv *l, int64_t red, struct tv **out) {
    if (red == 0) return (*out = l, OX_OK);
    return reduce(e, red == 1 ? "ReduceMean" : "ReduceSum", l, NULL, NULL, NULL, out);
}

static const char *const red_names[] = {"none", "mean", "sum"};

/* pointwise losses of (self, target): 'm' mse, 'a' l1, 's' smooth_l1 (beta), 'h' huber (delta) */
static ox_status pointwise_loss(struct ev *e, struct tv **a, char kind, struct tv **out) {
    struct tv *x = a[0], *t = a[1], *d, *ad, *l;
    int64_t red;
    ox_status st = reduction_of(e, a[2], &red);
    if (!st) st = promote(e, &x, &t);
    if (!st) st = bin(e, "Sub", x, t, &d);
    if (st) return st;
    if (kind == 'm') {
        if ((st = bin(e, "Mul", d, d, &l))) return st;
    } else if ((st = un(e, "Abs", d, &ad))) {
        return st;
    } else if (kind == 'a') {
        l = ad;
    } else { /* |d| < k: 0.5 d^2 (/ beta for smooth_l1), else |d| - 0.5 k (times delta: huber) */
        double k = tv_num(a[3]);
        if (k == 0 && kind == 's') {
            l = ad;
        } else {
            struct tv *kk = fscalar(e, k, x), *h = fscalar(e, 0.5, x), *lt, *sq, *qd, *lin, *hk;
            if (!kk || !h) return oom(e);
            if ((st = bin(e, "Less", ad, kk, &lt)) || (st = bin(e, "Mul", d, d, &sq)) ||
                (st = bin(e, "Mul", sq, h, &qd)) || (st = bin(e, "Mul", h, kk, &hk)) ||
                (st = bin(e, "Sub", ad, hk, &lin)))
                return st;
            if (kind == 's' && (st = bin(e, "Div", qd, kk, &qd))) return st;
            if (kind == 'h' && (st = bin(e, "Mul", lin, kk, &lin))) return st;
            struct tv *in[3] = {lt, qd, lin};
            if ((st = ts_emit1(e, "Where", 3, in, NULL, &l))) return st;
        }
    }
    return reduced(e, l, red, out);
}

static ox_status op_mse_loss(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    return pointwise_loss(e, a, 'm', out);
}

static ox_status op_l1_loss(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    return pointwise_loss(e, a, 'a', out);
}

static ox_status op_smooth_l1_loss(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    return pointwise_loss(e, a, 's', out);
}

static ox_status op_huber_loss(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    return pointwise_loss(e, a, 'h', out);
}

/* ONNX's class-index losses (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss) of scores x
 * [N, C, ...] and target [N, ...]; one sample ([C] and []) as a batch of one. */
static ox_status class_loss(struct ev *e, const char *op, struct tv *x, struct tv *t,
                            struct tv *weight, int64_t red, int64_t ig, struct tv **out) {
    struct tv *r;
    int64_t z = 0;
    bool one = x->rank == 1;
    ox_status st = t->dt != OX_INT64 ? cast(e, t, OX_INT64, &t) : OX_OK;
    if (!st && one && /* [C] -> [1, C], target [] -> [1] */
        ((st = axes_op(e, "Unsqueeze", x, 1, &z, &x)) ||
         (st = axes_op(e, "Unsqueeze", t, 1, &z, &t))))
        return st;
    if (st) return st;
    struct ts_attrs at = {0};
    ta_str(&at, "reduction", red_names[red]);
    ta_int(&at, "ignore_index", ig);
    struct tv *in[3] = {x, t, is_none(weight) ? NULL : weight};
    if ((st = ts_emit1(e, op, in[2] ? 3 : 2, in, &at, &r))) return st;
    return one && red == 0 ? axes_op(e, "Squeeze", r, 1, &z, out) : (*out = r, OX_OK);
}

/* nll_loss(self [N, C, ...], target [N, ...], weight=None, reduction=1, ignore_index=-100) */
static ox_status op_nll_loss(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    int64_t red, ig;
    ox_status st = need_t(e, a[0], "nll_loss");
    if (!st) st = need_t(e, a[1], "nll_loss target");
    if (!st) st = reduction_of(e, a[3], &red);
    if (!st) st = tv_to_int(e, a[4], &ig);
    if (st) return st;
    return class_loss(e, "NegativeLogLikelihoodLoss", a[0], a[1], a[2], red, ig, out);
}

/* cross_entropy_loss(self, target, weight=None, reduction=1, ignore_index=-100,
 * label_smoothing=0.): class indices (SoftmaxCrossEntropyLoss), or class probabilities */
static ox_status op_cross_entropy(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct tv *x = a[0], *t = a[1], *lp, *l;
    int64_t red, ig;
    double ls = 0;
    ox_status st = need_t(e, x, "cross_entropy");
    if (!st) st = need_t(e, t, "cross_entropy target");
    if (!st) st = reduction_of(e, a[3], &red);
    if (!st) st = tv_to_int(e, a[4], &ig);
    if (!st && !is_none(a[5])) st = num_arg(e, a[5], &ls, NULL);
    if (st) return st;
    if (x->rank < 1) return ts_err(e, OX_E_INVALID, "cross_entropy of a scalar");
    int64_t cax = x->rank == 1 ? 0 : 1;
    if (ox_dtype_is_float(t->dt)) { /* probabilities: -sum(t log_softmax(x)) over classes */
        if (ls != 0 || !is_none(a[2]))
            return ts_err(e, OX_E_UNSUPPORTED,
                          "cross_entropy of probabilities with weights or smoothing");
        struct ts_attrs at = {0};
        ta_int(&at, "axis", cax);
        struct tv *p, *s, *ax = tv_int(e, cax);
        if (!ax) return oom(e);
        if ((st = ts_emit1(e, "LogSoftmax", 1, &x, &at, &lp)) || (st = bin(e, "Mul", t, lp, &p)) ||
            (st = reduce(e, "ReduceSum", p, ax, NULL, NULL, &s)) || (st = un(e, "Neg", s, &l)))
            return st;
        return reduced(e, l, red, out);
    }
    if (ls != 0) return ts_err(e, OX_E_UNSUPPORTED, "cross_entropy with label_smoothing");
    return class_loss(e, "SoftmaxCrossEntropyLoss", x, t, a[2], red, ig, out);
}

/* binary_cross_entropy(self, target, weight=None, reduction=1): logs clamped at -100 */
static ox_status op_bce(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct tv *x = a[0], *t = a[1], *lx, *l1x, *omx, *omt, *p, *q, *s, *l;
    int64_t red;
    ox_status st = reduction_of(e, a[3], &red);
    if (!st) st = promote(e, &x, &t);
    if (st) return st;
    struct tv *one = fscalar(e, 1, x), *lo = tv_float(e, -100), *none = tv_none(e);
    if (!one || !lo || !none) return oom(e);
    if ((st = un(e, "Log", x, &lx)) || (st = clip(e, lx, lo, none, &lx)) ||
        (st = bin(e, "Sub", one, x, &omx)) || (st = un(e, "Log", omx, &l1x)) ||
        (st = clip(e, l1x, lo, none, &l1x)) || (st = bin(e, "Sub", one, t, &omt)) ||
        (st = bin(e, "Mul", t, lx, &p)) || (st = bin(e, "Mul", omt, l1x, &q)) ||
        (st = bin(e, "Add", p, q, &s)) || (st = un(e, "Neg", s, &l)))
        return st;
    if (!is_none(a[2]) && (st = bin(e, "Mul", l, a[2], &l))) return st;
    return reduced(e, l, red, out);
}

/* binary_cross_entropy_with_logits(self, target, weight=None, pos_weight=None, reduction=1):
 * (1 - t) x + (1 + (pw - 1) t) softplus(-x) */
static ox_status op_bce_logits(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct tv *x = a[0], *t = a[1], *nx, *sp, *omt, *p, *c, *l;
    int64_t red;
    ox_status st = reduction_of(e, a[4], &red);
    if (!st) st = promote(e, &x, &t);
    if (st) return st;
    struct tv *one = fscalar(e, 1, x);
    if (!one) return oom(e);
    if ((st = un(e, "Neg", x, &nx)) || (st = un(e, "Softplus", nx, &sp)) ||
        (st = bin(e, "Sub", one, t, &omt)) || (st = bin(e, "Mul", omt, x, &p)))
        return st;
    c = sp;
    if (!is_none(a[3])) { /* the positive class weighted */
        struct tv *pm, *pt, *f;
        if ((st = bin(e, "Sub", a[3], one, &pm)) || (st = bin(e, "Mul", pm, t, &pt)) ||
            (st = bin(e, "Add", one, pt, &f)) || (st = bin(e, "Mul", f, sp, &c)))
            return st;
    }
    if ((st = bin(e, "Add", p, c, &l))) return st;
    if (!is_none(a[2]) && (st = bin(e, "Mul", l, a[2], &l))) return st;
    return reduced(e, l, red, out);
}

/* kl_div(self (log-probabilities), target, reduction=1, log_target=False) */
static ox_status op_kl_div(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct tv *x = a[0], *t = a[1], *d, *l, *lt;
    int64_t red;
    bool logt = false;
    ox_status st = reduction_of(e, a[2], &red);
    if (!st) st = promote(e, &x, &t);
    if (st) return st;
    tv_truthy(a[3], &logt);
    if (logt) { /* exp(t) (t - x) */
        struct tv *et;
        if ((st = un(e, "Exp", t, &et)) || (st = bin(e, "Sub", t, x, &d)) ||
            (st = bin(e, "Mul", et, d, &l)))
            return st;
    } else { /* t (log t - x), 0 where t is 0 (xlogy) */
        struct tv *z = fscalar(e, 0, x), *gt, *p;
        if (!z) return oom(e);
        if ((st = un(e, "Log", t, &lt)) || (st = bin(e, "Sub", lt, x, &d)) ||
            (st = bin(e, "Mul", t, d, &p)) || (st = bin(e, "Greater", t, z, &gt)))
            return st;
        struct tv *in[3] = {gt, p, z};
        if ((st = ts_emit1(e, "Where", 3, in, NULL, &l))) return st;
    }
    return reduced(e, l, red, out);
}

/* ---- random numbers (ONNX's generators: not torch's stream) ---------------------------- */

static ox_status random_like(struct ev *e, struct tv *x, bool normal, double p0, double p1,
                             ox_dtype dt, struct tv **out) {
    struct ts_attrs at = {0};
    ta_float(&at, normal ? "mean" : "low", (float)p0);
    ta_float(&at, normal ? "scale" : "high", (float)p1);
    ta_int(&at, "dtype", dt);
    return ts_emit1(e, normal ? "RandomNormalLike" : "RandomUniformLike", 1, &x, &at, out);
}

static ox_status op_normal_(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* normal_(self, mean=0, std=1, *, generator=None) */
    ox_status st = need_t(e, a[0], "normal_");
    return st ? st : random_like(e, a[0], true, tv_num(a[1]), tv_num(a[2]), a[0]->dt, out);
}

static ox_status op_uniform_(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* uniform_(self, from=0, to=1, *, generator=None) */
    ox_status st = need_t(e, a[0], "uniform_");
    return st ? st : random_like(e, a[0], false, tv_num(a[1]), tv_num(a[2]), a[0]->dt, out);
}

static ox_status rand_like(struct ev *e, struct tv **a, bool normal, struct tv **out) {
    ox_dtype dt;
    ox_status st = need_t(e, a[0], "rand_like");
    if (!st) st = dtype_arg(e, a[1], a[0]->dt, &dt);
    return st ? st : random_like(e, a[0], normal, 0, 1, dt, out);
}

static ox_status op_rand_like(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    return rand_like(e, a, false, out);
}

static ox_status op_randn_like(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    return rand_like(e, a, true, out);
}

static ox_status rand_sized(struct ev *e, struct tv **a, bool normal, struct tv **out) {
    struct tv *z; /* rand(size, *, dtype=None, ...): a generator shaped like zeros(size) */
    ox_status st = make_filled(e, a[0], a[1], 0, OX_FLOAT, &z);
    return st ? st : random_like(e, z, normal, 0, 1, z->dt, out);
}

static ox_status op_rand(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    return rand_sized(e, a, false, out);
}

static ox_status op_randn(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    return rand_sized(e, a, true, out);
}

static ox_status op_broadcast_tensors(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* broadcast_tensors(tensors): each expanded to the common shape */
    struct tv *l = a[0];
    ox_status st = list_of_tensors(e, l, "broadcast_tensors");
    if (st) return st;
    int r = 0;
    int64_t d[OX_MAX_RANK];
    for (int i = 0; i < l->n; i++) r = l->items[i]->rank > r ? l->items[i]->rank : r;
    for (int k = 0; k < r; k++) d[k] = 1;
    for (int i = 0; i < l->n; i++) {
        const struct tv *t = l->items[i];
        for (int k = 0; k < t->rank; k++) {
            int64_t v = t->dims[k], *w = &d[r - t->rank + k];
            if (v != 1 && *w != 1 && v != *w)
                return ts_err(e, OX_E_SHAPE, "broadcast_tensors: %lld against %lld", (long long)v,
                              (long long)*w);
            if (v != 1) *w = v;
        }
    }
    *out = tv_list(e, TV_LIST, l->n);
    if (!*out) return oom(e);
    for (int i = 0; i < l->n; i++) {
        struct tv *in[2] = {l->items[i], tv_i64s(e, r, d)};
        if (!in[1]) return oom(e);
        if ((st = ts_emit1(e, "Expand", 2, in, NULL, &(*out)->items[i]))) return st;
    }
    return OX_OK;
}

/* dict.keys(), values(), items() as lists (in insertion order) */
static ox_status dict_view(struct ev *e, struct tv *d, int which, struct tv **out) {
    if (d->k != TV_DICT)
        return ts_err(e, OX_E_UNSUPPORTED, "keys/values/items of a %s", tv_kind_name(d->k));
    *out = tv_list(e, TV_LIST, d->n);
    if (!*out) return oom(e);
    for (int i = 0; i < d->n; i++) {
        if (which < 2) {
            (*out)->items[i] = d->items[2 * i + which];
            continue;
        }
        struct tv *t = tv_list(e, TV_TUPLE, 2);
        if (!t) return oom(e);
        t->items[0] = d->items[2 * i], t->items[1] = d->items[2 * i + 1];
        (*out)->items[i] = t;
    }
    return OX_OK;
}

static ox_status op_keys(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    return dict_view(e, a[0], 0, out);
}

static ox_status op_values(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    return dict_view(e, a[0], 1, out);
}

static ox_status op_items(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    return dict_view(e, a[0], 2, out);
}

static ox_status op_numpy_t(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* x.T: every dim reversed */
    struct tv *x = a[0];
    ox_status st = need_t(e, x, "T");
    if (st || x->rank < 2) return st ? st : (*out = x, OX_OK); /* a view of x */
    int64_t perm[OX_MAX_RANK];
    for (int i = 0; i < x->rank; i++) perm[i] = x->rank - 1 - i;
    return transpose(e, x, x->rank, perm, out);
}

static ox_status op_mt(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n; /* x.mT, x.mH, adjoint (real tensors): the last two dims swapped */
    struct tv *x = a[0];
    ox_status st = need_t(e, x, "mT");
    if (st) return st;
    if (x->rank < 2) return ts_err(e, OX_E_INVALID, "mT of a tensor of rank %d", x->rank);
    int64_t perm[OX_MAX_RANK];
    for (int i = 0; i < x->rank; i++) perm[i] = i;
    perm[x->rank - 2] = x->rank - 1, perm[x->rank - 1] = x->rank - 2;
    return transpose(e, x, x->rank, perm, out);
}

static ox_status op_zero_(struct ev *e, struct tv **a, int n, struct tv **out) {
    (void)n;
    struct tv *b[2] = {a[0], tv_int(e, 0)};
    return b[1] ? op_fill(e, b, 2, out) : oom(e);
}

static ox_status op_add_(struct ev *e, struct tv **a, int n, struct tv **out) {
    if (a[0]->k == TV_LIST) { /* l += m: l itself grows, as every alias of it sees */
        struct tv *r;
        ox_status st = op_list_extend(e, a, 2, &r);
        return st ? st : (*out = a[0], OX_OK);
    }
    return op_add(e, a, n, out); /* tensors: the in-place rule writes the sum back */
}

/* ---- the table ------------------------------------------------------------------------- */

static const struct aten_op ops[] = {
    /* builtins and prim */
    {"int", "x", op_int},
    {"float", "x", op_float},
    {"bool", "x", op_bool},
    {"str", "x", op_str},
    {"len", "x", op_len},
    {"range", NULL, op_range},
    {"getattr", "obj, name", op_getattr},
    {"__getitem__", "c, i", op_getitem},
    {"torch.__getitem__", "c, i", op_getitem},
    {"torch.append", "self, el", op_append},
    {"torch.list", "l", op_list},
    {"torch.copy", "self", op_copy},
    {"torch.fill_", "self, value", op_fill},
    {"torch.copy_", "self, src, non_blocking=False", op_copy_},
    {"torch.new_zeros", "self, size, *, dtype=None, layout=None, device=None, pin_memory=None",
     op_new_zeros},
    {"torch.new_ones", "self, size, *, dtype=None, layout=None, device=None, pin_memory=None",
     op_new_ones},
    {"torch._set_item", "l, idx, el", op_set_item},
    {"torch.find", "self, substr, start=0, end=-1", op_find},
    {"torch.roll", "self, shifts, dims=[]", op_roll},
    {"torch.all", NULL, op_all},
    {"torch.any", NULL, op_any},
    {"torch.len", "x", op_len},
    {"torch.size", "self, dim=None", op_size},
    {"torch.dim", "self", op_dim},
    {"ops.prim.NumToTensor", "x", op_num_to_tensor},
    {"ops.prim.dtype", "x", op_prim_dtype},
    {"ops.prim.device", "x", op_device},
    {"ops.prim.is_cuda", "x", op_false},
    {"ops.prim.is_nested", "x", op_false},
    {"ops.prim.requires_grad", "x", op_false},
    {"ops.prim.max", NULL, op_prim_max},
    {"ops.prim.min", NULL, op_min},
    {"ops.prim.RaiseException", NULL, op_raise},
    {"torch.device", "name", op_device},
    {"torch.is_grad_enabled", "", op_false},
    {"torch.is_autocast_enabled", "", op_false},
    {"torch.is_autocast_cpu_enabled", "", op_false},
    {"torch.is_floating_point", "self", op_is_floating_point},
    {"torch.warn", NULL, op_warn},
    {"torch.__is__", "a, b", op_is},
    {"torch.__isnot__", "a, b", op_isnot},
    {"torch.__not__", "a", op_not},
    {"torch.__and__", "a, b", op_and},
    {"torch.__or__", "a, b", op_or},
    {"torch.__contains__", "c, x", op_contains},
    {"prop.shape", "self", prop_shape},
    {"prop.dtype", "self", prop_dtype},
    {"prop.is_cuda", "self", prop_false},
    {"prop.is_nested", "self", prop_false},
    {"prop.requires_grad", "self", prop_false},
    /* arithmetic */
    {"torch.add", "self, other, alpha=None", op_add},
    {"torch.add_", "self, other, alpha=None", op_add_},
    {"torch.sub", "self, other, alpha=None", op_sub},
    {"torch.sub_", "self, other, alpha=None", op_sub},
    {"torch.rsub", "self, other, alpha=None", op_rsub},
    {"torch.mul", "self, other", op_mul},
    {"torch.mul_", "self, other", op_mul},
    {"torch.div", "self, other, *, rounding_mode=None", op_div},
    {"torch.div_", "self, other, *, rounding_mode=None", op_div},
    {"torch.true_divide", "self, other", op_div},
    {"torch.floordiv", "self, other", op_floordiv},
    {"torch.floor_divide", "self, other", op_floordiv},
    {"torch.remainder", "self, other", op_remainder},
    {"torch.pow", "self, exponent", op_pow},
    {"torch.neg", "self", op_neg},
    {"torch.eq", "self, other", op_eq},
    {"torch.ne", "self, other", op_ne},
    {"torch.lt", "self, other", op_lt},
    {"torch.le", "self, other", op_le},
    {"torch.gt", "self, other", op_gt},
    {"torch.ge", "self, other", op_ge},
    {"torch.logical_not", "self", op_logical_not},
    /* elementwise */
    {"torch.relu", "self", op_relu},
    {"torch.relu_", "self", op_relu},
    {"torch.relu6", "self", op_relu6},
    {"torch.sigmoid", "self", op_sigmoid},
    {"torch.sigmoid_", "self", op_sigmoid},
    {"torch.tanh", "self", op_tanh},
    {"torch.tanh_", "self", op_tanh},
    {"torch.exp", "self", op_exp},
    {"torch.log", "self", op_log},
    {"torch.sqrt", "self", op_sqrt},
    {"torch.rsqrt", "self", op_rsqrt},
    {"torch.abs", "self", op_abs},
    {"torch.erf", "self", op_erf},
    {"torch.floor", "self", op_floor},
    {"torch.ceil", "self", op_ceil},
    {"torch.sin", "self", op_sin},
    {"torch.cos", "self", op_cos},
    {"torch.reciprocal", "self", op_reciprocal},
    {"torch.silu", "self", op_silu},
    {"torch.silu_", "self", op_silu},
    {"torch.hardswish", "self", op_silu_like},
    {"torch.hardswish_", "self", op_silu_like},
    {"torch.hardsigmoid", "self", op_hardsigmoid},
    {"torch.hardsigmoid_", "self", op_hardsigmoid},
    {"torch.gelu", "self, *, approximate=\"none\"", op_gelu},
    {"torch.hardtanh", "self, min_val=-1., max_val=1.", op_hardtanh},
    {"torch.hardtanh_", "self, min_val=-1., max_val=1.", op_hardtanh},
    {"torch.clamp", "self, min=None, max=None", op_clamp},
    {"torch.clamp_", "self, min=None, max=None", op_clamp},
    {"torch.clip", "self, min=None, max=None", op_clamp},
    {"torch.leaky_relu", "self, negative_slope=0.01", op_leaky_relu},
    {"torch.leaky_relu_", "self, negative_slope=0.01", op_leaky_relu},
    {"torch.softmax", "self, dim, dtype=None", op_softmax},
    {"torch.log_softmax", "self, dim, dtype=None", op_log_softmax},
    {"torch.masked_fill", "self, mask, value", op_masked_fill},
    {"torch.masked_fill_", "self, mask, value", op_masked_fill},
    {"torch.where", "condition, self, other", op_where},
    {"torch.contiguous", "self, memory_format=0", op_identity},
    {"torch.detach", "self", op_identity},
    {"torch.clone", "self, *, memory_format=None", op_clone},
    {"torch.dropout", "input, p, train", op_dropout},
    {"torch.dropout_", "input, p, train", op_dropout},
    {"torch.feature_dropout", "input, p, train", op_dropout},
    {"torch.alpha_dropout", "input, p, train", op_dropout},
    /* shapes */
    {"torch.view", "self, size", op_view},
    {"torch.reshape", "self, shape", op_view},
    {"torch.flatten", "self, start_dim=0, end_dim=-1", op_flatten},
    {"torch.unflatten", "self, dim, sizes", op_unflatten},
    {"torch.transpose", "self, dim0, dim1", op_transpose},
    {"torch.t", "self", op_t},
    {"torch.permute", "self, dims", op_permute},
    {"torch.unsqueeze", "self, dim", op_unsqueeze},
    {"torch.squeeze", "self, dim=None", op_squeeze},
    {"torch.expand", "self, size, *, implicit=False", op_expand},
    {"torch.repeat", "self, repeats", op_repeat},
    {"torch.slice", "self, dim=0, start=None, end=None, step=1", op_tslice},
    {"ops.aten.slice", "l, start=None, end=None, step=1", op_list_slice},
    {"torch.select", "self, dim, index", op_select},
    {"torch.index_select", "self, dim, index", op_index_select},
    {"torch.index", "self, indices", op_index},
    {"torch.format", NULL, op_format},
    {"torch.cat", "tensors, dim=0", op_cat},
    {"torch.stack", "tensors, dim=0", op_stack},
    {"torch.chunk", "self, chunks, dim=0", op_chunk},
    {"torch.split", "self, split_size, dim=0", op_split},
    {"torch.split_with_sizes", "self, split_sizes, dim=0", op_split},
    {"torch.tensor_split", "self, sections, dim=0", op_chunk},
    {"torch.to", NULL, op_to},
    {"torch.type_as", "self, other", op_type_as},
    {"torch.zeros", "size, *, dtype=None, layout=None, device=None, pin_memory=None", op_zeros},
    {"torch.ones", "size, *, dtype=None, layout=None, device=None, pin_memory=None", op_ones},
    {"torch.full", "size, fill_value, *, dtype=None, layout=None, device=None, pin_memory=None",
     op_full},
    {"torch.zeros_like",
     "self, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None",
     op_zeros_like},
    {"torch.ones_like",
     "self, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None",
     op_ones_like},
    {"torch.tensor", "data, *, dtype=None, device=None, requires_grad=False", op_tensor},
    /* reductions */
    {"torch.sum", "self, dim=None, keepdim=False, *, dtype=None", op_sum},
    {"torch.mean", "self, dim=None, keepdim=False, *, dtype=None", op_mean},
    {"torch.amax", "self, dim=None, keepdim=False", op_amax},
    {"torch.max", NULL, op_max},
    {"torch.min", NULL, op_min},
    /* linear algebra */
    {"torch.linear", "input, weight, bias=None", op_linear},
    {"torch.matmul", "self, other", op_matmul},
    {"torch.mm", "self, other", op_matmul},
    {"torch.bmm", "self, other", op_matmul},
    {"torch.addmm", "self, mat1, mat2, *, beta=1, alpha=1", op_addmm},
    {"torch.baddbmm", "self, batch1, batch2, *, beta=1, alpha=1", op_baddbmm},
    {"torch.embedding", "weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False",
     op_embedding},
    /* convolution, pooling, normalization */
    {"torch._convolution",
     "input, weight, bias, stride, padding, dilation, transposed, output_padding, groups, "
     "benchmark=False, deterministic=False, cudnn_enabled=True, allow_tf32=True",
     op_convolution},
    {"torch.conv1d", "input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1",
     op_convnd},
    {"torch.conv2d", "input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1",
     op_convnd},
    {"torch.conv3d", "input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1",
     op_convnd},
    {"torch.conv_transpose1d",
     "input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1",
     op_conv_transpose},
    {"torch.conv_transpose2d",
     "input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1",
     op_conv_transpose},
    {"torch.batch_norm",
     "input, weight, bias, running_mean, running_var, training, momentum, eps, cudnn_enabled",
     op_batch_norm},
    {"torch.layer_norm",
     "input, normalized_shape, weight=None, bias=None, eps=1e-05, cudnn_enable=True",
     op_layer_norm},
    {"torch.group_norm", "input, num_groups, weight=None, bias=None, eps=1e-05, cudnn_enabled=True",
     op_group_norm},
    {"torch.max_pool1d", "self, kernel_size, stride=[], padding=0, dilation=1, ceil_mode=False",
     op_max_pool},
    {"torch.max_pool2d", "self, kernel_size, stride=[], padding=0, dilation=1, ceil_mode=False",
     op_max_pool},
    {"torch.max_pool3d", "self, kernel_size, stride=[], padding=0, dilation=1, ceil_mode=False",
     op_max_pool},
    {"torch.avg_pool1d",
     "self, kernel_size, stride=[], padding=0, ceil_mode=False, count_include_pad=True, "
     "divisor_override=None",
     op_avg_pool},
    {"torch.avg_pool2d",
     "self, kernel_size, stride=[], padding=0, ceil_mode=False, count_include_pad=True, "
     "divisor_override=None",
     op_avg_pool},
    {"torch.avg_pool3d",
     "self, kernel_size, stride=[], padding=0, ceil_mode=False, count_include_pad=True, "
     "divisor_override=None",
     op_avg_pool},
    {"torch.adaptive_avg_pool1d", "self, output_size", op_adaptive_avg_pool},
    {"torch.adaptive_avg_pool2d", "self, output_size", op_adaptive_avg_pool},
    {"torch.adaptive_avg_pool3d", "self, output_size", op_adaptive_avg_pool},
    {"torch.adaptive_max_pool2d", "self, output_size", op_adaptive_max_pool},
    {"torch.pad", "self, pad, mode=\"constant\", value=None", op_pad},
    {"torch.constant_pad_nd", "self, pad, value=0", op_constant_pad_nd},
    {"torch.upsample_nearest2d", "input, output_size, scale_factors", op_upsample_nearest},
    {"torch.upsample_bilinear2d", "input, output_size, align_corners, scale_factors",
     op_upsample_linear},
    /* attention and recurrent layers */
    {"torch.scaled_dot_product_attention",
     "query, key, value, attn_mask=None, dropout_p=0., is_causal=False, *, scale=None, "
     "enable_gqa=False",
     op_sdpa},
    {"torch._transformer_encoder_layer_fwd",
     "src, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias, use_gelu, "
     "norm_first, eps, norm_weight_1, norm_bias_1, norm_weight_2, norm_bias_2, ffn_weight_1, "
     "ffn_bias_1, ffn_weight_2, ffn_bias_2, mask=None, mask_type=None",
     op_transformer_encoder_layer},
    {"torch.lstm",
     "input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first",
     op_lstm},
    {"torch.gru",
     "input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first",
     op_gru},
    {"torch.lstm_cell", "input, hx, w_ih, w_hh, b_ih=None, b_hh=None", op_lstm_cell},
    {"torch.gru_cell", "input, hx, w_ih, w_hh, b_ih=None, b_hh=None", op_gru_cell},
    {"torch.rnn_tanh_cell", "input, hx, w_ih, w_hh, b_ih=None, b_hh=None", op_rnn_tanh_cell},
    {"torch.rnn_relu_cell", "input, hx, w_ih, w_hh, b_ih=None, b_hh=None", op_rnn_relu_cell},
    {"torch.rnn_tanh",
     "input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first",
     op_rnn_tanh},
    {"torch.rnn_relu",
     "input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first",
     op_rnn_relu},
    /* math */
    {"torch.tan", "self", op_tan},
    {"torch.atan", "self", op_atan},
    {"torch.arctan", "self", op_atan},
    {"torch.asin", "self", op_asin},
    {"torch.arcsin", "self", op_asin},
    {"torch.acos", "self", op_acos},
    {"torch.arccos", "self", op_acos},
    {"torch.sinh", "self", op_sinh},
    {"torch.cosh", "self", op_cosh},
    {"torch.asinh", "self", op_asinh},
    {"torch.acosh", "self", op_acosh},
    {"torch.atanh", "self", op_atanh},
    {"torch.sign", "self", op_sign},
    {"torch.round", "self, *, decimals=0", op_round},
    {"torch.trunc", "self", op_trunc},
    {"torch.fix", "self", op_trunc},
    {"torch.frac", "self", op_frac},
    {"torch.log1p", "self", op_log1p},
    {"torch.expm1", "self", op_expm1},
    {"torch.log2", "self", op_log2},
    {"torch.log10", "self", op_log10},
    {"torch.exp2", "self", op_exp2},
    {"torch.square", "self", op_square},
    {"torch.isnan", "self", op_isnan},
    {"torch.isinf", "self", op_isinf},
    {"torch.isfinite", "self", op_isfinite},
    {"torch.nan_to_num", "self, nan=None, posinf=None, neginf=None", op_nan_to_num},
    {"torch.maximum", "self, other", op_maximum},
    {"torch.minimum", "self, other", op_minimum},
    {"torch.fmax", "self, other", op_maximum},
    {"torch.fmin", "self, other", op_minimum},
    {"torch.clamp_min", "self, min", op_clamp_min},
    {"torch.clamp_min_", "self, min", op_clamp_min},
    {"torch.clamp_max", "self, max", op_clamp_max},
    {"torch.clamp_max_", "self, max", op_clamp_max},
    {"torch.fmod", "self, other", op_fmod},
    {"torch.atan2", "self, other", op_atan2},
    {"torch.arctan2", "self, other", op_atan2},
    {"torch.lerp", "self, end, weight", op_lerp},
    {"torch.addcmul", "self, tensor1, tensor2, *, value=1", op_addcmul},
    {"torch.addcdiv", "self, tensor1, tensor2, *, value=1", op_addcdiv},
    {"torch.logical_and", "self, other", op_logical_and},
    {"torch.logical_or", "self, other", op_logical_or},
    {"torch.logical_xor", "self, other", op_logical_xor},
    {"torch.__xor__", "a, b", op_xor},
    {"torch.bitwise_not", "self", op_bitwise_not},
    /* activations */
    {"torch.elu", "self, alpha=1, scale=1, input_scale=1", op_elu},
    {"torch.elu_", "self, alpha=1, scale=1, input_scale=1", op_elu},
    {"torch.selu", "self", op_selu},
    {"torch.selu_", "self", op_selu},
    {"torch.celu", "self, alpha=1.", op_celu},
    {"torch.celu_", "self, alpha=1.", op_celu},
    {"torch.prelu", "self, weight", op_prelu},
    {"torch.softplus", "self, beta=1, threshold=20", op_softplus},
    {"torch.mish", "self", op_mish},
    {"torch.mish_", "self", op_mish},
    {"torch.log_sigmoid", "self", op_log_sigmoid},
    {"torch.hardshrink", "self, lambd=0.5", op_hardshrink},
    {"torch.softshrink", "self, lambd=0.5", op_softshrink},
    {"torch.threshold", "self, threshold, value", op_threshold},
    {"torch.threshold_", "self, threshold, value", op_threshold},
    {"torch.glu", "self, dim=-1", op_glu},
    {"torch.rrelu", "self, lower=0.125, upper=0.33333333333333331, training=False, generator=None",
     op_rrelu},
    /* more reductions */
    {"torch.argmax", "self, dim=None, keepdim=False", op_argmax},
    {"torch.argmin", "self, dim=None, keepdim=False", op_argmin},
    {"torch.amin", "self, dim=[], keepdim=False", op_amin},
    {"torch.prod", "self, dim=None, keepdim=False, *, dtype=None", op_prod},
    {"torch.logsumexp", "self, dim, keepdim=False", op_logsumexp},
    {"torch.count_nonzero", "self, dim=None", op_count_nonzero},
    {"torch.norm", "self, p=None, dim=None, keepdim=False, *, dtype=None", op_norm},
    {"torch.frobenius_norm", "self, dim=[], keepdim=False", op_frobenius_norm},
    {"torch.linalg_vector_norm", "self, ord=2, dim=None, keepdim=False, *, dtype=None",
     op_vector_norm},
    {"torch.var", "self, dim=None, unbiased=None, keepdim=False, *, correction=None", op_var},
    {"torch.std", "self, dim=None, unbiased=None, keepdim=False, *, correction=None", op_std},
    {"torch.var_mean", "self, dim=None, unbiased=None, keepdim=False, *, correction=None",
     op_var_mean},
    {"torch.std_mean", "self, dim=None, unbiased=None, keepdim=False, *, correction=None",
     op_std_mean},
    {"torch.cumsum", "self, dim, *, dtype=None", op_cumsum},
    {"torch.cumprod", "self, dim, *, dtype=None", op_cumprod},
    /* more shapes */
    {"torch.narrow", "self, dim, start, length", op_narrow},
    {"torch.unbind", "self, dim=0", op_unbind},
    {"torch.movedim", "self, source, destination", op_movedim},
    {"torch.moveaxis", "self, source, destination", op_movedim},
    {"torch.swapaxes", "self, dim0, dim1", op_transpose},
    {"torch.swapdims", "self, dim0, dim1", op_transpose},
    {"torch.expand_as", "self, other", op_expand_as},
    {"torch.view_as", "self, other", op_view_as},
    {"torch.reshape_as", "self, other", op_view_as},
    {"torch.repeat_interleave", "self, repeats, dim=None, *, output_size=None",
     op_repeat_interleave},
    {"torch.tile", "self, dims", op_tile},
    {"torch.tril", "self, diagonal=0", op_tril},
    {"torch.triu", "self, diagonal=0", op_triu},
    {"torch.diagonal", "self, offset=0, dim1=0, dim2=1", op_diagonal},
    {"torch.flip", "self, dims", op_flip},
    {"torch.unsafe_chunk", "self, chunks, dim=0", op_chunk},
    {"torch.unsafe_split", "self, split_size, dim=0", op_split},
    {"torch.numel", "self", op_numel},
    {"torch.numpy_T", "self", op_numpy_t},
    {"torch.mT", "self", op_mt},
    {"torch.mH", "self", op_mt},
    {"torch.matrix_H", "self", op_mt},
    {"torch.adjoint", "self", op_mt},
    {"torch.lift_fresh", "self", op_identity},
    {"torch.lift", "self", op_identity},
    {"torch.alias", "self", op_identity},
    {"torch.resolve_conj", "self", op_identity},
    {"torch.resolve_neg", "self", op_identity},
    {"torch.detach_", "self", op_identity},
    {"torch._unsafe_view", "self, size", op_view},
    {"torch.zero_", "self", op_zero_},
    /* in-place forms: the table's in-place rule writes the result back into self */
    {"torch.abs_", "self", op_abs},
    {"torch.neg_", "self", op_neg},
    {"torch.exp_", "self", op_exp},
    {"torch.log_", "self", op_log},
    {"torch.sqrt_", "self", op_sqrt},
    {"torch.rsqrt_", "self", op_rsqrt},
    {"torch.floor_", "self", op_floor},
    {"torch.ceil_", "self", op_ceil},
    {"torch.round_", "self, *, decimals=0", op_round},
    {"torch.sign_", "self", op_sign},
    {"torch.reciprocal_", "self", op_reciprocal},
    {"torch.pow_", "self, exponent", op_pow},
    {"torch.square_", "self", op_square},
    {"torch.erf_", "self", op_erf},
    {"torch.sin_", "self", op_sin},
    {"torch.cos_", "self", op_cos},
    {"torch.gelu_", "self, *, approximate=\"none\"", op_gelu},
    {"torch.softplus_", "self, beta=1, threshold=20", op_softplus},
    {"torch.remainder_", "self, other", op_remainder},
    {"torch.fmod_", "self, other", op_fmod},
    {"torch.floor_divide_", "self, other", op_floordiv},
    {"torch.true_divide_", "self, other", op_div},
    {"torch.lerp_", "self, end, weight", op_lerp},
    {"torch.addcmul_", "self, tensor1, tensor2, *, value=1", op_addcmul},
    {"torch.addcdiv_", "self, tensor1, tensor2, *, value=1", op_addcdiv},
    {"torch.clip_", "self, min=None, max=None", op_clamp},
    {"torch.tril_", "self, diagonal=0", op_tril},
    {"torch.triu_", "self, diagonal=0", op_triu},
    {"torch.cumsum_", "self, dim, *, dtype=None", op_cumsum},
    {"torch.reverse", "self", op_list_reverse},
    {"torch.insert", "self, index, el", op_list_insert},
    {"torch.pop", "self, idx=-1", op_list_pop},
    {"torch.extend", "self, other", op_list_extend},
    {"torch.clear", "self", op_list_clear},
    {"torch.count", "self, el", op_list_count},
    {"torch.keys", "self", op_keys},
    {"torch.values", "self", op_values},
    {"torch.items", "self", op_items},
    {"torch.broadcast_tensors", "tensors", op_broadcast_tensors},
    {"torch.remove", "self, el", op_list_remove},
    {"torch.dict", NULL, op_dict},
    {"torch.unfold", "self, dimension, size, step", op_tensor_unfold},
    {"torch.__range_length", "lo, hi, step", op_range_length},
    {"torch.__derive_index", "index, start, step", op_derive_index},
    /* creation */
    {"torch.arange",
     "start, end=None, step=None, *, dtype=None, layout=None, device=None, pin_memory=None",
     op_arange},
    {"torch.linspace",
     "start, end, steps, *, dtype=None, layout=None, device=None, pin_memory=None", op_linspace},
    {"torch.full_like",
     "self, fill_value, *, dtype=None, layout=None, device=None, pin_memory=None, "
     "memory_format=None",
     op_full_like},
    {"torch.empty_like",
     "self, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None",
     op_empty_like},
    {"torch.new_full",
     "self, size, fill_value, *, dtype=None, layout=None, device=None, pin_memory=None",
     op_new_full},
    {"torch.new_empty", "self, size, *, dtype=None, layout=None, device=None, pin_memory=None",
     op_new_empty},
    {"torch.empty",
     "size, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None",
     op_empty},
    {"torch.eye", "n, m=None, *, dtype=None, layout=None, device=None, pin_memory=None", op_eye},
    {"torch.meshgrid", "tensors, *, indexing=\"ij\"", op_meshgrid},
    {"torch.one_hot", "self, num_classes=-1", op_one_hot},
    /* ordering and indexing */
    {"torch.topk", "self, k, dim=-1, largest=True, sorted=True", op_topk},
    {"torch.sort", "self, dim=-1, descending=False, *, stable=None", op_sort},
    {"torch.argsort", "self, dim=-1, descending=False, *, stable=None", op_argsort},
    {"torch.gather", "self, dim, index, *, sparse_grad=False", op_gather},
    {"torch.scatter", "self, dim, index, src, *, reduce=None", op_scatter},
    {"torch.scatter_", "self, dim, index, src, *, reduce=None", op_scatter},
    {"torch.scatter_add", "self, dim, index, src", op_scatter_add},
    {"torch.scatter_add_", "self, dim, index, src", op_scatter_add},
    {"torch.scatter_reduce", "self, dim, index, src, reduce, *, include_self=True",
     op_scatter_reduce},
    {"torch.index_put", "self, indices, values, accumulate=False", op_index_put},
    {"torch.index_put_", "self, indices, values, accumulate=False", op_index_put},
    {"torch.index_fill", "self, dim, index, value", op_index_fill},
    {"torch.index_fill_", "self, dim, index, value", op_index_fill},
    {"torch.bucketize", "self, boundaries, *, out_int32=False, right=False", op_bucketize},
    /* linear algebra */
    {"torch.einsum", "equation, tensors, *, path=None", op_einsum},
    {"torch.dot", "self, tensor", op_dot},
    {"torch.vdot", "self, other", op_dot},
    {"torch.mv", "self, vec", op_dot},
    {"torch.outer", "self, vec2", op_outer},
    {"torch.ger", "self, vec2", op_outer},
    {"torch.cross", "self, other, dim=None", op_cross},
    {"torch.linalg_cross", "self, other, dim=-1", op_cross},
    {"torch.cdist", "x1, x2, p=2., compute_mode=None", op_cdist},
    {"torch.pairwise_distance", "x1, x2, p=2., eps=9.9999999999999995e-07, keepdim=False",
     op_pairwise_distance},
    {"torch.cosine_similarity", "x1, x2, dim=1, eps=1e-08", op_cosine_similarity},
    {"torch.linalg_det", "A", op_det},
    {"torch._weight_norm", "v, g, dim=0", op_weight_norm},
    {"torch.bilinear", "input1, input2, weight, bias=None", op_bilinear},
    {"torch.embedding_renorm_", "self, indices, max_norm, norm_type", op_embedding_renorm},
    /* losses */
    {"torch.mse_loss", "self, target, reduction=1", op_mse_loss},
    {"torch.l1_loss", "self, target, reduction=1", op_l1_loss},
    {"torch.smooth_l1_loss", "self, target, reduction=1, beta=1.", op_smooth_l1_loss},
    {"torch.huber_loss", "self, target, reduction=1, delta=1.", op_huber_loss},
    {"torch.nll_loss", "self, target, weight=None, reduction=1, ignore_index=-100", op_nll_loss},
    {"torch.nll_loss_nd", "self, target, weight=None, reduction=1, ignore_index=-100", op_nll_loss},
    {"torch.nll_loss2d", "self, target, weight=None, reduction=1, ignore_index=-100", op_nll_loss},
    {"torch.cross_entropy_loss",
     "self, target, weight=None, reduction=1, ignore_index=-100, label_smoothing=0.",
     op_cross_entropy},
    {"torch.binary_cross_entropy", "self, target, weight=None, reduction=1", op_bce},
    {"torch.binary_cross_entropy_with_logits",
     "self, target, weight=None, pos_weight=None, reduction=1", op_bce_logits},
    {"torch.kl_div", "self, target, reduction=1, *, log_target=False", op_kl_div},
    /* random numbers */
    {"torch.normal_", "self, mean=0., std=1., *, generator=None", op_normal_},
    {"torch.uniform_", "self, from=0., to=1., *, generator=None", op_uniform_},
    {"torch.rand_like",
     "self, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None",
     op_rand_like},
    {"torch.randn_like",
     "self, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None",
     op_randn_like},
    {"torch.rand", "size, *, generator=None, dtype=None, layout=None, device=None, pin_memory=None",
     op_rand},
    {"torch.randn",
     "size, *, generator=None, dtype=None, layout=None, device=None, pin_memory=None", op_randn},
    {"torch.norm_except_dim", "v, pow=2, dim=0", op_norm_except_dim},
    {"torch.det", "self", op_det},
    /* vision and normalization */
    {"torch.instance_norm",
     "input, weight, bias, running_mean, running_var, use_input_stats, momentum, eps, "
     "cudnn_enabled",
     op_instance_norm},
    {"torch.pixel_shuffle", "self, upscale_factor", op_pixel_shuffle},
    {"torch.pixel_unshuffle", "self, downscale_factor", op_pixel_unshuffle},
    {"torch.channel_shuffle", "self, groups", op_channel_shuffle},
    {"torch.native_channel_shuffle", "self, groups", op_channel_shuffle},
    {"torch.upsample_nearest1d", "input, output_size, scale_factors", op_upsample_nearest},
    {"torch.upsample_nearest3d", "input, output_size, scale_factors", op_upsample_nearest},
    {"torch._upsample_nearest_exact1d", "input, output_size, scale_factors",
     op_upsample_nearest_exact},
    {"torch._upsample_nearest_exact2d", "input, output_size, scale_factors",
     op_upsample_nearest_exact},
    {"torch._upsample_nearest_exact3d", "input, output_size, scale_factors",
     op_upsample_nearest_exact},
    {"torch.upsample_linear1d", "input, output_size, align_corners, scale_factors",
     op_upsample_linear},
    {"torch.upsample_trilinear3d", "input, output_size, align_corners, scale_factors",
     op_upsample_linear},
    {"torch.upsample_bicubic2d", "input, output_size, align_corners, scale_factors",
     op_upsample_bicubic},
    {"torch.adaptive_max_pool1d", "self, output_size", op_adaptive_max_pool},
    {"torch.adaptive_max_pool3d", "self, output_size", op_adaptive_max_pool},
    {"torch.max_pool1d_with_indices",
     "self, kernel_size, stride=[], padding=0, dilation=1, ceil_mode=False",
     op_max_pool_with_indices},
    {"torch.max_pool2d_with_indices",
     "self, kernel_size, stride=[], padding=0, dilation=1, ceil_mode=False",
     op_max_pool_with_indices},
    {"torch.max_pool3d_with_indices",
     "self, kernel_size, stride=[], padding=0, dilation=1, ceil_mode=False",
     op_max_pool_with_indices},
    {"torch.max_unpool2d", "self, indices, output_size", op_max_unpool},
    {"torch.conv_transpose3d",
     "input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1",
     op_conv_transpose},
    {"torch._convolution_mode", "input, weight, bias, stride, padding, dilation, groups",
     op_convolution_mode},
    {"torch.im2col", "self, kernel_size, dilation, padding, stride", op_im2col},
    {"torch.col2im", "self, output_size, kernel_size, dilation, padding, stride", op_col2im},
    {"torch.affine_grid_generator", "theta, size, align_corners", op_affine_grid},
    {"torch.grid_sampler", "input, grid, interpolation_mode, padding_mode, align_corners",
     op_grid_sampler},
    {"torch.embedding_bag",
     "weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False, "
     "per_sample_weights=None, include_last_offset=False, padding_idx=None",
     op_embedding_bag},
};

/* ---- binding --------------------------------------------------------------------------- */

/* A schema default: None, True/False, ints, floats, "strings", [] or [ints]. */
static ox_status parse_default(struct ev *e, const char *s, size_t n, struct tv **out) {
    char buf[128];
    if (n >= sizeof buf) return ts_err(e, OX_E_INTERNAL, "schema default too long");
    memcpy(buf, s, n);
    buf[n] = 0;
    if (!strcmp(buf, "None"))
        *out = tv_none(e);
    else if (!strcmp(buf, "True") || !strcmp(buf, "False"))
        *out = tv_bool(e, buf[0] == 'T');
    else if (buf[0] == '"') {
        *out = tv_new(e, TV_STR);
        if (*out) {
            (*out)->s = ox_arena_strndup(&e->a, buf + 1, n - 2);
            (*out)->s_len = n - 2;
        }
    } else if (buf[0] == '[') {
        int64_t v[8];
        int k = 0;
        for (char *p = buf + 1; *p && *p != ']' && k < 8;) {
            v[k++] = strtoll(p, &p, 10);
            while (*p == ',' || *p == ' ') p++;
        }
        *out = tv_list(e, TV_LIST, k);
        for (int i = 0; i < k && *out; i++) (*out)->items[i] = tv_int(e, v[i]);
    } else if (strpbrk(buf, ".e"))
        *out = tv_float(e, strtod(buf, NULL));
    else
        *out = tv_int(e, strtoll(buf, NULL, 10));
    return *out ? OX_OK : oom(e);
}

static ox_status bind_args(struct ev *e, const struct aten_op *op, int n, struct tv **args,
                           const char **kw, struct tv **bound, int *n_bound) {
    const char *names[MAXA];
    size_t name_len[MAXA];
    const char *dflt[MAXA];
    size_t dflt_len[MAXA];
    int np = 0, kw_only = MAXA;
    for (const char *p = op->params; *p && np < MAXA;) {
        while (*p == ' ' || *p == ',') p++;
        if (!*p) break;
        if (*p == '*') {
            kw_only = np;
            p++;
            continue;
        }
        const char *start = p;
        while (*p && *p != '=' && *p != ',') p++;
        names[np] = start;
        name_len[np] = (size_t)(p - start);
        dflt[np] = NULL;
        dflt_len[np] = 0;
        if (*p == '=') {
            p++;
            const char *d = p;
            int depth = 0;
            while (*p && (depth || *p != ',')) {
                if (*p == '[') depth++;
                if (*p == ']') depth--;
                p++;
            }
            dflt[np] = d;
            dflt_len[np] = (size_t)(p - d);
        }
        np++;
    }
    for (int i = 0; i < np; i++) bound[i] = NULL;
    int pos = 0;
    for (int k = 0; k < n; k++) {
        int slot = -1;
        if (kw && kw[k]) {
            for (int i = 0; i < np; i++)
                if (strlen(kw[k]) == name_len[i] && !strncmp(kw[k], names[i], name_len[i]))
                    slot = i;
            if (slot < 0)
                return ts_err(e, OX_E_UNSUPPORTED, "%s: no argument named '%s'", op->name, kw[k]);
        } else {
            slot = pos++;
            if (slot >= np || slot >= kw_only)
                return ts_err(e, OX_E_UNSUPPORTED, "%s: %d positional arguments, at most %d",
                              op->name, pos, np < kw_only ? np : kw_only);
        }
        bound[slot] = args[k];
    }
    for (int i = 0; i < np; i++) {
        if (bound[i]) continue;
        if (!dflt[i])
            return ts_err(e, OX_E_INVALID, "%s: argument '%.*s' is missing", op->name,
                          (int)name_len[i], names[i]);
        ox_status st = parse_default(e, dflt[i], dflt_len[i], &bound[i]);
        if (st) return st;
    }
    *n_bound = np;
    return OX_OK;
}

ox_status ts_call_op(struct ev *e, const char *name, int n, struct tv **args, const char **kw,
                     struct tv **out, bool *handled) {
    *handled = false;
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
        if (strcmp(ops[i].name, name) != 0) continue;
        *handled = true;
        if (!ops[i].params) {
            for (int k = 0; k < n; k++)
                if (kw && kw[k])
                    return ts_err(e, OX_E_UNSUPPORTED, "%s: keyword argument '%s'", name, kw[k]);
            return ops[i].fn(e, args, n, out);
        }
        struct tv *bound[MAXA];
        int nb = 0;
        ox_status st = bind_args(e, &ops[i], n, args, kw, bound, &nb);
        if (!st) st = ops[i].fn(e, bound, nb, out);
        if (st) return st;
        /* an in-place op (add_, index_put_, ...): self takes the result, so that every name
           bound to it (and the tensor it is a slice of) sees the change */
        size_t len = strlen(name);
        if (nb && len > 1 && name[len - 1] == '_' && name[len - 2] != '_' && is_t(bound[0]) &&
            *out && is_t(*out) && *out != bound[0]) {
            if ((st = write_back(e, bound[0], *out))) return st;
            *out = bound[0];
        }
        return OX_OK;
    }
    return OX_OK;
}
