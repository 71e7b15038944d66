/* The TorchScript importer: archive → pickles → code → IR (torchscript.h says what it does;
 * aten.c holds the operator lowerings). */
#include "importer/torchscript/eval.h"

#include "kernels/op.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define OX_TS_MAX_OUTPUTS 256

/* ---- errors and values ----------------------------------------------------------------- */

ox_status ts_err(struct ev *e, ox_status code, const char *fmt, ...) {
    char msg[800];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (e->file) return ox_err(code, "%s: %s:%d: %s", e->archive, e->file, e->line, msg);
    return ox_err(code, "%s: %s", e->archive, msg);
}

static ox_status nomem(struct ev *e) {
    return ts_err(e, OX_E_NOMEM, "out of memory");
}

struct tv *tv_new(struct ev *e, tv_kind k) {
    struct tv *v = ox_arena_alloc(&e->a, sizeof *v);
    if (v) {
        v->k = k;
        v->vid = -1;
        v->rank = -1;
    }
    return v;
}

struct tv *tv_int(struct ev *e, int64_t i) {
    struct tv *v = tv_new(e, TV_INT);
    if (v) v->i = i;
    return v;
}

struct tv *tv_float(struct ev *e, double f) {
    struct tv *v = tv_new(e, TV_FLOAT);
    if (v) v->f = f;
    return v;
}

struct tv *tv_bool(struct ev *e, bool b) {
    struct tv *v = tv_new(e, TV_BOOL);
    if (v) v->b = b;
    return v;
}

struct tv *tv_none(struct ev *e) {
    return tv_new(e, TV_NONE);
}

struct tv *tv_list(struct ev *e, tv_kind k, int n) {
    struct tv *v = tv_new(e, k);
    if (!v) return NULL;
    v->n = n;
    v->items = ox_arena_alloc(&e->a, sizeof(struct tv *) * (size_t)(n > 0 ? n : 1));
    return v->items ? v : NULL;
}

const char *tv_kind_name(tv_kind k) {
    static const char *names[] = {"None",   "bool",     "int",          "float", "str",
                                  "Device", "list",     "tuple",        "dict",  "object",
                                  "Tensor", "function", "uninitialized"};
    return (unsigned)k < sizeof names / sizeof *names ? names[k] : "?";
}

static bool keep_owned(struct ev *e, ox_tensor *t) {
    if (e->n_owned == e->cap_owned) {
        int cap = e->cap_owned ? 2 * e->cap_owned : 64;
        ox_tensor **o = realloc(e->owned, sizeof *o * (size_t)cap);
        if (!o) return false;
        e->owned = o;
        e->cap_owned = cap;
    }
    e->owned[e->n_owned++] = t;
    return true;
}

static void set_type(struct tv *v, const ox_tensor *t) {
    v->dt = t->dtype;
    v->rank = t->rank;
    memcpy(v->dims, t->dims, sizeof(int64_t) * (size_t)t->rank);
}

struct tv *tv_const(struct ev *e, ox_tensor *t) {
    ox_tensor *own = malloc(sizeof *own);
    struct tv *v = tv_new(e, TV_TENSOR);
    if (!own || !v || !keep_owned(e, own)) {
        free(own);
        ox_tensor_free_data(t);
        return NULL;
    }
    *own = *t;
    own->name = NULL;
    memset(t, 0, sizeof *t);
    v->cdata = own;
    set_type(v, own);
    return v;
}

struct tv *tv_const_new(struct ev *e, ox_dtype dt, int rank, const int64_t *dims, void **data) {
    ox_tensor t = {0};
    if (ox_tensor_alloc(&t, dt, rank, dims)) return NULL;
    struct tv *v = tv_const(e, &t);
    if (v && data) *data = v->cdata->data;
    return v;
}

struct tv *tv_scalar_tensor(struct ev *e, double x, ox_dtype dt) {
    struct tv *v = tv_const_new(e, dt, 0, NULL, NULL);
    if (v) ox_tensor_set((ox_tensor *)v->cdata, 0, x);
    return v;
}

struct tv *tv_i64s(struct ev *e, int n, const int64_t *vals) {
    int64_t d = n;
    void *data;
    struct tv *v = tv_const_new(e, OX_INT64, 1, &d, &data);
    if (v && n) memcpy(data, vals, sizeof(int64_t) * (size_t)n);
    return v;
}

/* Value id of g gets a tensor type: dtype, rank (-1: unknown) and numeric dims. */
static bool set_value_type(struct ox_graph *g, int id, ox_dtype dt, int rank, const int64_t *dims) {
    struct ox_value *val = &g->values[id];
    val->dtype = dt;
    val->rank = rank;
    if (rank < 0) return true;
    val->dims = ox_graph_alloc(g, sizeof *val->dims * (size_t)(rank ? rank : 1));
    if (!val->dims) return false;
    for (int d = 0; d < rank; d++) val->dims[d].value = dims[d];
    return true;
}

int tv_vid(struct ev *e, struct tv *v) {
    if (v->vid >= 0) return v->vid;
    if (!v->cdata) return -1;
    struct ox_graph *g = e->main_g; /* constants live in the main graph, read from anywhere */
    char name[64];
    snprintf(name, sizeof name, "const_%d", g->n_values);
    int id = ox_graph_add_value(g, name);
    if (id < 0) return -1;
    ox_tensor *t = ox_graph_alloc(g, sizeof *t);
    if (!t || ox_tensor_copy(t, v->cdata)) return -1;
    t->name = g->values[id].name;
    g->values[id].init = t;
    if (!set_value_type(g, id, t->dtype, t->rank, t->dims)) return -1;
    v->vid = id;
    v->g = g;
    return id;
}

/* The id in the current graph of a tensor value that may belong to an enclosing one: each
 * graph on the way down gets an is_outer value of that name (the importer's convention). */
static int local_id(struct ev *e, struct tv *v) {
    int id = tv_vid(e, v);
    if (id < 0 || v->g == e->g || !v->g) return id;
    const struct ox_value *src = &v->g->values[id];
    struct ox_graph *chain[64];
    int n = 0;
    for (struct ox_graph *g = e->g; g && g != v->g && n < 64; g = g->parent) chain[n++] = g;
    int local = -1;
    for (int k = n - 1; k >= 0; k--) {
        struct ox_graph *g = chain[k];
        local = ox_graph_find_value(g, src->name);
        if (local >= 0) continue;
        local = ox_graph_add_value(g, src->name);
        if (local < 0) return -1;
        g->values[local].is_outer = true;
        int64_t dims[OX_MAX_RANK];
        for (int d = 0; d < src->rank; d++) dims[d] = src->dims[d].value;
        if (!set_value_type(g, local, src->dtype, src->rank, dims)) return -1;
    }
    return local;
}

/* ---- attributes of emitted nodes ------------------------------------------------------- */

static struct ox_attr *ta_add(struct ts_attrs *t, const char *name, ox_attr_type type) {
    if (t->n == (int)(sizeof t->a / sizeof t->a[0])) return &t->a[t->n - 1]; /* never here */
    struct ox_attr *a = &t->a[t->n++];
    *a = (struct ox_attr){.name = name, .type = type};
    return a;
}

void ta_int(struct ts_attrs *t, const char *name, int64_t v) {
    ta_add(t, name, OX_ATTR_INT)->i = v;
}

void ta_float(struct ts_attrs *t, const char *name, float v) {
    ta_add(t, name, OX_ATTR_FLOAT)->f = v;
}

void ta_str(struct ts_attrs *t, const char *name, const char *v) {
    struct ox_attr *a = ta_add(t, name, OX_ATTR_STRING);
    a->s = v;
    a->s_len = strlen(v);
}

void ta_ints(struct ts_attrs *t, const char *name, int n, const int64_t *v) {
    struct ox_attr *a = ta_add(t, name, OX_ATTR_INTS);
    a->n = n;
    a->ints = (int64_t *)v;
}

void ta_strs(struct ts_attrs *t, const char *name, int n, const char *const *v, size_t *lens) {
    struct ox_attr *a = ta_add(t, name, OX_ATTR_STRINGS);
    a->n = n;
    a->strings = (const char **)v;
    a->string_lens = lens;
    for (int i = 0; i < n; i++) lens[i] = strlen(v[i]);
}

void ta_tensor(struct ts_attrs *t, const char *name, ox_tensor *v) {
    ta_add(t, name, OX_ATTR_TENSOR)->t = v;
}

/* Copy attributes into the graph's arena (tensors copied, owned by the graph). */
static ox_status copy_attrs(struct ev *e, const struct ts_attrs *at, struct ox_node *n) {
    int k = at ? at->n : 0;
    n->attrs = ox_graph_alloc(e->g, sizeof *n->attrs * (size_t)(k ? k : 1));
    if (!n->attrs) return nomem(e);
    for (int i = 0; i < k; i++) {
        struct ox_attr a = at->a[i];
        a.name = ox_graph_strdup(e->g, a.name);
        if (a.type == OX_ATTR_STRING) a.s = ox_arena_strndup(&e->g->arena, a.s, a.s_len);
        if (a.type == OX_ATTR_INTS) {
            int64_t *c = ox_graph_alloc(e->g, sizeof(int64_t) * (size_t)(a.n ? a.n : 1));
            if (!c) return nomem(e);
            if (a.n) memcpy(c, a.ints, sizeof(int64_t) * (size_t)a.n);
            a.ints = c;
        }
        if (a.type == OX_ATTR_STRINGS) {
            const char **c = ox_graph_alloc(e->g, sizeof(char *) * (size_t)(a.n ? a.n : 1));
            size_t *len = ox_graph_alloc(e->g, sizeof(size_t) * (size_t)(a.n ? a.n : 1));
            if (!c || !len) return nomem(e);
            for (int j = 0; j < a.n; j++) {
                len[j] = a.string_lens[j];
                if (!(c[j] = ox_arena_strndup(&e->g->arena, a.strings[j], len[j]))) return nomem(e);
            }
            a.strings = c;
            a.string_lens = len;
        }
        if (a.type == OX_ATTR_TENSOR) {
            ox_tensor *c = ox_graph_alloc(e->g, sizeof *c);
            if (!c || ox_tensor_copy(c, a.t)) return nomem(e);
            a.t = c;
        }
        if (!a.name || (a.type == OX_ATTR_STRING && !a.s)) return nomem(e);
        n->attrs[n->n_attrs++] = a;
    }
    return OX_OK;
}

/* ---- emitting nodes -------------------------------------------------------------------- */

ox_status ts_emit(struct ev *e, const char *op, int n_in, struct tv *const *in,
                  const struct ts_attrs *at, int n_out, struct tv **out) {
    const struct ox_op *row = ox_op_find("", op, OX_TS_OPSET);
    if (!row) return ts_err(e, OX_E_INTERNAL, "no operator-table row for %s", op);
    if (n_in > TS_MAX_IN || n_out > 8) return ts_err(e, OX_E_INTERNAL, "%s: too many operands", op);
    bool all_const = !(row->flags & (OX_OP_NONDETERMINISTIC | OX_OP_ALLOCATES));
    for (int i = 0; i < n_in; i++) {
        if (in[i] && in[i]->k != TV_TENSOR)
            return ts_err(e, OX_E_INTERNAL, "%s: operand %d is a %s, not a tensor", op, i,
                          tv_kind_name(in[i]->k));
        if (in[i] && !in[i]->cdata) all_const = false;
    }
    /* a node outside the graph first: infer (and run, when every input is constant) */
    int ids[TS_MAX_IN], oids[8];
    struct ox_node tmp = {.name = "",
                          .domain = "",
                          .op_type = op,
                          .opset = OX_TS_OPSET,
                          .n_inputs = n_in,
                          .inputs = ids,
                          .n_outputs = n_out,
                          .outputs = oids,
                          .op = row};
    for (int i = 0; i < n_in; i++) ids[i] = in[i] ? 0 : -1;
    for (int j = 0; j < n_out; j++) oids[j] = 0;
    struct ts_attrs none = {0};
    if (!at) at = &none;
    tmp.n_attrs = at->n;
    tmp.attrs = (struct ox_attr *)at->a;
    ox_tensor desc_in[TS_MAX_IN], desc_out[8];
    const ox_tensor *pin[TS_MAX_IN];
    ox_tensor *pout[8];
    for (int i = 0; i < n_in; i++) {
        pin[i] = NULL;
        if (!in[i]) continue;
        desc_in[i] = (ox_tensor){.dtype = in[i]->dt, .rank = in[i]->rank};
        if (in[i]->rank < 0)
            return ts_err(e, OX_E_UNSUPPORTED, "%s: operand %d has an unknown shape", op, i);
        memcpy(desc_in[i].dims, in[i]->dims, sizeof(int64_t) * (size_t)in[i]->rank);
        desc_in[i].data = in[i]->cdata ? in[i]->cdata->data : NULL;
        pin[i] = &desc_in[i];
    }
    memset(desc_out, 0, sizeof desc_out);
    for (int j = 0; j < n_out; j++) pout[j] = &desc_out[j];
    struct ox_infer_ctx ictx = {.graph = e->g, .n_threads = 1};
    (void)ox_attr_check(&tmp);
    ox_status st = row->infer(&ictx, &tmp, pin, pout);
    ox_status ast = ox_attr_check(&tmp);
    if (st == OX_NEED_DATA && !all_const)
        return ts_err(e, OX_E_UNSUPPORTED,
                      "%s: the output shape depends on data known only at run time", op);
    if (st < 0 || ast) return ts_err(e, st < 0 ? st : ast, "%s", ox_errmsg());
    if (all_const) { /* fold: run the kernel now */
        for (int j = 0; j < n_out; j++) {
            ox_tensor t = {0};
            if (ox_tensor_alloc(&t, desc_out[j].dtype, desc_out[j].rank, desc_out[j].dims))
                return nomem(e);
            out[j] = tv_const(e, &t);
            if (!out[j]) return nomem(e);
            pout[j] = (ox_tensor *)out[j]->cdata;
        }
        void *scratch = NULL;
        if (ictx.scratch_bytes && posix_memalign(&scratch, 64, ictx.scratch_bytes)) return nomem(e);
        struct ox_kernel_ctx kctx = {
            .scratch = scratch, .scratch_bytes = ictx.scratch_bytes, .strings = &e->g->arena};
        st = row->cpu(&kctx, &tmp, pin, pout);
        free(scratch);
        if (st) return ts_err(e, st, "%s", ox_errmsg());
        return OX_OK;
    }
    for (int i = 0; i < n_in; i++) {
        ids[i] = in[i] ? local_id(e, in[i]) : -1;
        if (in[i] && ids[i] < 0) return nomem(e);
    }
    if (e->n_nodes >= e->lim.nodes) {
        ox_err_limit("nodes", (uint64_t)e->lim.nodes,
                     "the model has at least %lld nodes (loops unrolled, methods inlined)",
                     (long long)e->lim.nodes + 1);
        return ts_err(e, OX_E_LIMIT, "%s", ox_errmsg());
    }
    char name[1200];
    snprintf(name, sizeof name, "%s%s%s_%d", e->prefix, e->prefix[0] ? "/" : "", op, e->n_nodes++);
    for (int j = 0; j < n_out; j++) {
        char vn[1300];
        snprintf(vn, sizeof vn, n_out == 1 ? "%s" : "%s:%d", name, j);
        oids[j] = ox_graph_add_value(e->g, vn);
        out[j] = tv_new(e, TV_TENSOR);
        if (oids[j] < 0 || !out[j]) return nomem(e);
        out[j]->vid = oids[j];
        out[j]->g = e->g;
        set_type(out[j], &desc_out[j]);
        if (st == OX_NEED_DATA) out[j]->rank = -1;
        if (!set_value_type(e->g, oids[j], out[j]->dt, out[j]->rank, out[j]->dims)) return nomem(e);
    }
    struct ox_node *n = ox_graph_add_node(e->g, name, "", op, n_in, ids, n_out, oids);
    if (!n) return nomem(e);
    n->opset = OX_TS_OPSET;
    n->op = row;
    for (int j = 0; j < n_out; j++) e->g->values[oids[j]].producer = e->g->n_nodes - 1;
    return copy_attrs(e, at, n);
}

ox_status ts_emit1(struct ev *e, const char *op, int n_in, struct tv *const *in,
                   const struct ts_attrs *at, struct tv **out) {
    return ts_emit(e, op, n_in, in, at, 1, out);
}

/* ---- scalars --------------------------------------------------------------------------- */

bool tv_is_num(const struct tv *v) {
    return v && (v->k == TV_INT || v->k == TV_FLOAT || v->k == TV_BOOL);
}

double tv_num(const struct tv *v) {
    return v->k == TV_INT ? (double)v->i : v->k == TV_FLOAT ? v->f : (double)v->b;
}

ox_status tv_to_int(struct ev *e, const struct tv *v, int64_t *out) {
    if (v->k == TV_INT || v->k == TV_BOOL) {
        *out = v->k == TV_INT ? v->i : v->b;
        return OX_OK;
    }
    if (v->k == TV_TENSOR && v->cdata && ox_tensor_numel(v->cdata) == 1 &&
        ox_dtype_is_int(v->cdata->dtype)) {
        *out = (int64_t)ox_tensor_get(v->cdata, 0);
        return OX_OK;
    }
    return ts_err(e, OX_E_UNSUPPORTED, "expected an int known at import time, got a %s%s",
                  tv_kind_name(v->k), v->k == TV_TENSOR ? " computed at run time" : "");
}

ox_status tv_to_ints(struct ev *e, const struct tv *v, int64_t *out, int max, int *n) {
    if (v->k == TV_INT) {
        *n = 1;
        out[0] = v->i;
        return OX_OK;
    }
    if (v->k != TV_LIST && v->k != TV_TUPLE)
        return ts_err(e, OX_E_UNSUPPORTED, "expected a list of ints, got a %s", tv_kind_name(v->k));
    if (v->n > max) return ts_err(e, OX_E_UNSUPPORTED, "a list of %d ints is too long", v->n);
    for (int i = 0; i < v->n; i++) {
        ox_status st = tv_to_int(e, v->items[i], &out[i]);
        if (st) return st;
    }
    *n = v->n;
    return OX_OK;
}

bool tv_truthy(const struct tv *v, bool *out) {
    switch (v->k) {
    case TV_BOOL: *out = v->b; return true;
    case TV_INT: *out = v->i != 0; return true;
    case TV_FLOAT: *out = v->f != 0; return true;
    case TV_NONE: *out = false; return true;
    case TV_STR: *out = v->s_len > 0; return true;
    case TV_LIST:
    case TV_TUPLE: *out = v->n > 0; return true;
    case TV_TENSOR:
        if (v->cdata && ox_tensor_numel(v->cdata) == 1) {
            *out = ox_tensor_get(v->cdata, 0) != 0;
            return true;
        }
        return false;
    default: return false;
    }
}

/* ---- the archive ----------------------------------------------------------------------- */

bool ox_ts_is_archive(const void *buf, size_t len) {
    return len >= 4 && memcmp(buf, "PK\003\004", 4) == 0;
}

/* The bytes of a record (relative to the prefix); *owned to free. */
static ox_status record(struct ev *e, const char *rel, const uint8_t **data, size_t *len,
                        uint8_t **owned) {
    const struct ox_zip_entry *z = ox_zip_find(e->zip, rel);
    if (!z) return ts_err(e, OX_E_INVALID, "the archive has no record '%s'", rel);
    return ox_zip_read(e->zip, z, data, len, owned);
}

/* A pickled tensor → a contiguous owned tensor. Storages live in records ns/<key>. */
/* Contiguous (row-major, dims of 1 ignored) views can use the archive's bytes in place. */
static bool is_contiguous(const struct ox_pv_tensor *pt) {
    int64_t want = 1;
    for (int d = pt->rank - 1; d >= 0; d--) {
        if (pt->size[d] != 1 && pt->stride[d] != want) return false;
        want *= pt->size[d];
    }
    return true;
}

/* A pickled tensor → a contiguous tensor: the archive's bytes in place when the record is
 * STORED, the view contiguous and the address aligned (*borrowed set; the map must then
 * outlive the graph), else a gathered copy that t owns. */
static ox_status read_tensor(struct ev *e, const struct ox_pv *pv, const char *ns, ox_tensor *t,
                             bool *borrowed) {
    const struct ox_pv_tensor *pt = &pv->tensor;
    char rel[256];
    *borrowed = false;
    snprintf(rel, sizeof rel, "%s/%s", ns, pt->storage.key);
    memset(t, 0, sizeof *t);
    size_t bytes_needed;
    char what[300];
    snprintf(what, sizeof what, "tensor %s", rel);
    ox_status rst = ox_check_rank((uint64_t)pt->rank, e->lim.rank, what);
    if (rst) return ts_err(e, rst, "%s", ox_errmsg());
    if (!ox_tensor_bytes(pt->storage.dtype, pt->rank, pt->size, &bytes_needed))
        return ts_err(e, OX_E_INVALID, "tensor %s: dims overflow", rel);
    if (bytes_needed > e->lim.tensor_bytes) {
        ox_err_limit("tensor_bytes", e->lim.tensor_bytes, "tensor %s takes %zu bytes", rel,
                     bytes_needed);
        return ts_err(e, OX_E_LIMIT, "%s", ox_errmsg());
    }
    int64_t numel = 1;
    for (int d = 0; d < pt->rank; d++) numel *= pt->size[d];
    if (numel == 0)
        return ox_tensor_alloc(t, pt->storage.dtype, pt->rank, pt->size)
                   ? ts_err(e, OX_E_NOMEM, "tensor %s: cannot allocate", rel)
                   : OX_OK;
    const uint8_t *bytes;
    size_t len;
    uint8_t *owned = NULL;
    ox_status st = record(e, rel, &bytes, &len, &owned);
    if (st) return st;
    size_t esz = ox_dtype_size(pt->storage.dtype);
    if ((uint64_t)pt->storage.numel > len / esz) {
        free(owned);
        return ts_err(e, OX_E_INVALID, "storage %s holds %zu bytes, fewer than its %lld elements",
                      rel, len, (long long)pt->storage.numel);
    }
    const uint16_t probe = 1;
    bool little = *(const uint8_t *)&probe == 1;
    const uint8_t *at = bytes + (size_t)pt->offset * esz;
    if (!owned && little && is_contiguous(pt) && ((uintptr_t)at % esz) == 0 &&
        pt->storage.dtype != OX_BOOL) {
        t->dtype = pt->storage.dtype;
        t->rank = pt->rank;
        memcpy(t->dims, pt->size, sizeof(int64_t) * (size_t)pt->rank);
        t->data = (void *)at;
        *borrowed = true;
        return OX_OK;
    }
    if (ox_tensor_alloc(t, pt->storage.dtype, pt->rank, pt->size)) {
        free(owned);
        return ts_err(e, OX_E_NOMEM, "tensor %s: cannot allocate", rel);
    }
    /* strided gather (the pickle layer checked that the view lies inside the storage) */
    int64_t idx[OX_MAX_RANK] = {0};
    uint8_t *dst = t->data;
    for (int64_t k = 0; k < numel; k++) {
        int64_t off = pt->offset;
        for (int d = 0; d < pt->rank; d++) off += idx[d] * pt->stride[d];
        memcpy(dst + (size_t)k * esz, bytes + (size_t)off * esz, esz);
        for (int d = pt->rank - 1; d >= 0; d--) {
            if (++idx[d] < pt->size[d]) break;
            idx[d] = 0;
        }
    }
    free(owned);
    return OX_OK;
}

/* The graph value of a pickled parameter, buffer or constant (once per pickled tensor). */
static ox_status pv_tensor(struct ev *e, const struct ox_pv *pv, const char *ns, const char *name,
                           struct tv **out) {
    for (struct ts_tensor_cache *c = e->tensors; c; c = c->next)
        if (c->pv == pv) {
            *out = c->v;
            return OX_OK;
        }
    char nm[1100];
    snprintf(nm, sizeof nm, "%s", name);
    while (ox_graph_find_value(e->main_g, nm) >= 0)
        snprintf(nm, sizeof nm, "%s_%d", name, e->main_g->n_values);
    int id = ox_graph_add_value(e->main_g, nm);
    ox_tensor *t = ox_graph_alloc(e->main_g, sizeof *t);
    struct tv *v = tv_new(e, TV_TENSOR);
    struct ts_tensor_cache *c = ox_arena_alloc(&e->a, sizeof *c);
    if (id < 0 || !t || !v || !c) return nomem(e);
    bool borrowed;
    ox_status st = read_tensor(e, pv, ns, t, &borrowed);
    if (st) return st;
    struct ox_value *val = &e->main_g->values[id];
    t->name = val->name;
    val->init = t;
    val->init_borrowed = borrowed;
    e->borrowed |= borrowed;
    if (!set_value_type(e->main_g, id, t->dtype, t->rank, t->dims)) return nomem(e);
    v->vid = id;
    v->g = e->main_g;
    v->cdata = t; /* the graph's copy: read by lowerings that rearrange weights */
    set_type(v, t);
    *c = (struct ts_tensor_cache){pv, v, e->tensors};
    e->tensors = c;
    *out = v;
    return OX_OK;
}

/* A pickled value as an evaluator value (modules stay objects). */
static ox_status from_pv(struct ev *e, const struct ox_pv *pv, const char *ns, const char *name,
                         struct tv **out) {
    switch (pv->kind) {
    case OX_PV_NONE: *out = tv_none(e); break;
    case OX_PV_BOOL: *out = tv_bool(e, pv->b); break;
    case OX_PV_INT: *out = tv_int(e, pv->i); break;
    case OX_PV_FLOAT: *out = tv_float(e, pv->f); break;
    case OX_PV_STR:
        *out = tv_new(e, TV_STR);
        if (*out) {
            (*out)->s = pv->s;
            (*out)->s_len = pv->s_len;
        }
        break;
    case OX_PV_DEVICE:
        *out = tv_new(e, TV_DEVICE);
        if (*out) (*out)->s = pv->s;
        break;
    case OX_PV_TENSOR: return pv_tensor(e, pv, ns, name, out);
    case OX_PV_OBJECT:
        *out = tv_new(e, TV_OBJ);
        if (*out) {
            (*out)->obj = pv;
            (*out)->cls = pv->cls;
        }
        break;
    case OX_PV_LIST:
    case OX_PV_TUPLE:
    case OX_PV_DICT: {
        int n = pv->kind == OX_PV_DICT ? 2 * pv->n : pv->n;
        *out = tv_list(e,
                       pv->kind == OX_PV_LIST    ? TV_LIST
                       : pv->kind == OX_PV_TUPLE ? TV_TUPLE
                                                 : TV_DICT,
                       n);
        if (!*out) return nomem(e);
        if (pv->kind == OX_PV_DICT) (*out)->n = pv->n;
        for (int i = 0; i < n; i++) {
            char sub[1100];
            snprintf(sub, sizeof sub, "%s.%d", name, i);
            ox_status st = from_pv(e, pv->items[i], ns, sub, &(*out)->items[i]);
            if (st) return st;
        }
        break;
    }
    default:
        return ts_err(e, OX_E_UNSUPPORTED, "attribute '%s': a pickled value of kind %d", name,
                      (int)pv->kind);
    }
    return *out ? OX_OK : nomem(e);
}

/* ---- code files ------------------------------------------------------------------------ */

/* The parsed code file for a module path "__torch__.a.b" (code/__torch__/a/b.py). */
static ox_status code_file(struct ev *e, const char *mod, size_t mod_len, struct ox_ts_file **out) {
    char path[1024];
    size_t p = (size_t)snprintf(path, sizeof path, "code/");
    for (size_t i = 0; i < mod_len && p + 4 < sizeof path; i++)
        path[p++] = mod[i] == '.' ? '/' : mod[i];
    if (p + 4 >= sizeof path) return ts_err(e, OX_E_INVALID, "module name too long");
    memcpy(path + p, ".py", 4);
    for (struct ts_file_cache *c = e->files; c; c = c->next)
        if (strcmp(c->path, path) == 0) {
            *out = c->file;
            return OX_OK;
        }
    const uint8_t *src;
    size_t len;
    uint8_t *owned = NULL;
    *out = NULL;
    if (!ox_zip_find(e->zip, path)) return OX_OK; /* no such file: the caller says what */
    ox_status st = record(e, path, &src, &len, &owned);
    if (st) return st;
    struct ts_file_cache *c = ox_arena_alloc(&e->a, sizeof *c);
    char *kept = ox_arena_strdup(&e->a, path);
    if (!c || !kept) {
        free(owned);
        return nomem(e);
    }
    st = ox_ts_parse((const char *)src, len, kept, &e->a, out);
    free(owned);
    if (st) return ox_err_prefix(st, "%s: ", e->archive);
    *c = (struct ts_file_cache){kept, *out, e->files};
    e->files = c;
    return OX_OK;
}

/* Split a qualified name "__torch__.a.b.Name" into module and last part. */
static ox_status find_class(struct ev *e, const char *qual, const struct ox_ts_class **out) {
    const char *dot = strrchr(qual, '.');
    *out = NULL;
    if (!dot) return ts_err(e, OX_E_INVALID, "class '%s' has no module", qual);
    struct ox_ts_file *f;
    ox_status st = code_file(e, qual, (size_t)(dot - qual), &f);
    if (st) return st;
    if (f) *out = ox_ts_find_class(f, dot + 1);
    if (!*out) return ts_err(e, OX_E_INVALID, "no code for class '%s'", qual);
    return OX_OK;
}

static ox_status find_func(struct ev *e, const char *qual, const struct ox_ts_func **fn,
                           const char **file) {
    const char *dot = strrchr(qual, '.');
    *fn = NULL;
    if (!dot) return ts_err(e, OX_E_INVALID, "function '%s' has no module", qual);
    struct ox_ts_file *f;
    ox_status st = code_file(e, qual, (size_t)(dot - qual), &f);
    if (st) return st;
    if (f) *fn = ox_ts_find_func(f, dot + 1);
    if (!*fn) return ts_err(e, OX_E_UNSUPPORTED, "no code for function '%s'", qual);
    *file = f->path;
    return OX_OK;
}

/* ---- scopes ---------------------------------------------------------------------------- */

struct binding {
    const char *name;
    struct tv *v;
};

struct scope {
    int n, cap;
    struct binding *b;
};

static struct tv *lookup(const struct scope *s, const char *name) {
    for (int i = s->n - 1; i >= 0; i--)
        if (strcmp(s->b[i].name, name) == 0) return s->b[i].v;
    return NULL;
}

static ox_status bind(struct ev *e, struct scope *s, const char *name, struct tv *v) {
    for (int i = s->n - 1; i >= 0; i--)
        if (strcmp(s->b[i].name, name) == 0) {
            s->b[i].v = v;
            return OX_OK;
        }
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 32;
        struct binding *b = ox_arena_alloc(&e->a, sizeof *b * (size_t)cap);
        if (!b) return nomem(e);
        if (s->n) memcpy(b, s->b, sizeof *b * (size_t)s->n);
        s->b = b;
        s->cap = cap;
    }
    s->b[s->n++] = (struct binding){name, v};
    return OX_OK;
}

/* ---- objects --------------------------------------------------------------------------- */

/* Attribute `name` of an object: set by code, else its pickled state, else a Final class
 * constant. *out NULL when none. */
static ox_status eval_expr(struct ev *e, struct scope *s, const struct ox_ts_expr *x,
                           struct tv **out);

static ox_status obj_attr(struct ev *e, struct tv *obj, const char *name, struct tv **out) {
    *out = NULL;
    for (struct tv_attr *a = obj->attrs; a; a = a->next)
        if (strcmp(a->name, name) == 0) {
            *out = a->v;
            return OX_OK;
        }
    if (strcmp(name, "training") == 0) { /* inference: always False */
        *out = tv_bool(e, false);
        return *out ? OX_OK : nomem(e);
    }
    const struct ox_pv *st = obj->obj ? obj->obj->state : NULL;
    const struct ox_pv *pv = st ? ox_pv_get(st, name) : NULL;
    if (pv) {
        char path[1100];
        snprintf(path, sizeof path, "%s%s%s", e->prefix, e->prefix[0] ? "." : "", name);
        return from_pv(e, pv, "data", path, out);
    }
    const struct ox_ts_class *c;
    ox_status rc = find_class(e, obj->cls, &c);
    if (rc) return rc;
    for (int i = 0; i < c->n_slots; i++)
        if (strcmp(c->slots[i].name, name) == 0 && c->slots[i].value) {
            struct scope none = {0};
            return eval_expr(e, &none, c->slots[i].value, out);
        }
    return OX_OK;
}

/* ---- calls ----------------------------------------------------------------------------- */

static ox_status exec_block(struct ev *e, struct scope *s, const struct ox_ts_block *b,
                            struct tv **ret, bool *returned);

/* Run fn with args bound to its parameters (self first for methods), inlined. */
static ox_status call_func(struct ev *e, const struct ox_ts_func *fn, const char *file,
                           struct tv *self, int n, struct tv **args, const char **kw,
                           struct tv **out) {
    if (++e->depth > OX_TS_MAX_CALL_DEPTH) {
        e->depth--;
        return ts_err(e, OX_E_UNSUPPORTED, "calls nest deeper than %d", OX_TS_MAX_CALL_DEPTH);
    }
    struct scope s = {0};
    int p0 = 0;
    ox_status st = OX_OK;
    if (self) {
        if (fn->n_params < 1) {
            st = ts_err(e, OX_E_INVALID, "method '%s' has no self parameter", fn->name);
            goto out;
        }
        st = bind(e, &s, fn->params[0].name, self);
        p0 = 1;
    }
    struct tv *bound[64] = {0};
    int np = fn->n_params - p0;
    if (np > 64) {
        st = ts_err(e, OX_E_UNSUPPORTED, "'%s' has too many parameters", fn->name);
        goto out;
    }
    int pos = 0;
    for (int k = 0; k < n && !st; k++) {
        int slot = -1;
        if (kw && kw[k]) {
            for (int p = 0; p < np; p++)
                if (strcmp(fn->params[p0 + p].name, kw[k]) == 0) slot = p;
        } else {
            slot = pos++;
        }
        if (slot < 0 || slot >= np) {
            st = ts_err(e, OX_E_INVALID, "'%s' called with an argument it does not take (%s)",
                        fn->name, kw && kw[k] ? kw[k] : "too many");
            goto out;
        }
        bound[slot] = args[k];
    }
    const char *saved_file = e->file;
    int saved_line = e->line;
    for (int p = 0; p < np && !st; p++) {
        struct tv *v = bound[p];
        if (!v && fn->params[p0 + p].dflt) {
            e->file = file;
            struct scope none = {0};
            st = eval_expr(e, &none, fn->params[p0 + p].dflt, &v);
        }
        if (!st && !v)
            st = ts_err(e, OX_E_INVALID, "'%s': no value for parameter '%s'", fn->name,
                        fn->params[p0 + p].name);
        if (!st) st = bind(e, &s, fn->params[p0 + p].name, v);
    }
    if (!st) {
        e->file = file;
        bool returned = false;
        *out = NULL;
        st = exec_block(e, &s, &fn->body, out, &returned);
        if (!st && !*out) *out = tv_none(e);
    }
    if (!st) {
        e->file = saved_file;
        e->line = saved_line;
    }
out:
    e->depth--;
    return st;
}

/* obj.method(args): inline the method with the module path extended. */
static ox_status call_method(struct ev *e, struct tv *obj, const char *method, const char *path,
                             int n, struct tv **args, const char **kw, struct tv **out) {
    const struct ox_ts_class *c;
    ox_status st = find_class(e, obj->cls, &c);
    if (st) return st;
    const struct ox_ts_func *fn = ox_ts_find_method(c, method);
    if (!fn) return ts_err(e, OX_E_INVALID, "class '%s' has no method '%s'", obj->cls, method);
    const char *dot = strrchr(obj->cls, '.');
    struct ox_ts_file *f;
    st = code_file(e, obj->cls, (size_t)(dot - obj->cls), &f);
    if (st) return st;
    char saved[sizeof e->prefix];
    memcpy(saved, e->prefix, sizeof saved);
    if (path && *path) {
        size_t l = strlen(e->prefix);
        snprintf(e->prefix + l, sizeof e->prefix - l, "%s%s", l ? "." : "", path);
    }
    st = call_func(e, fn, f->path, obj, n, args, kw, out);
    memcpy(e->prefix, saved, sizeof saved);
    return st;
}

/* The dotted name of an expression made of names and attributes ("torch.nn.functional.x"),
 * or NULL. */
static const char *dotted(struct ev *e, const struct ox_ts_expr *x) {
    if (x->kind == OX_TE_NAME) return x->name;
    if (x->kind != OX_TE_ATTR) return NULL;
    const char *b = dotted(e, x->base);
    if (!b) return NULL;
    size_t n = strlen(b) + strlen(x->name) + 2;
    char *r = ox_arena_alloc(&e->a, n);
    if (r) snprintf(r, n, "%s.%s", b, x->name);
    return r;
}

/* The attribute path a module value came from, for node names: `self.layer1` gives
 * "layer1"; `getattr(self, "0")` gives "0"; others "". */
static const char *module_path(const struct ox_ts_expr *x) {
    if (x->kind == OX_TE_ATTR) return x->name;
    if (x->kind == OX_TE_CALL && x->base->kind == OX_TE_NAME &&
        strcmp(x->base->name, "getattr") == 0 && x->n_args == 2 && x->args[1]->kind == OX_TE_STR)
        return x->args[1]->s;
    return "";
}

/* Where each local name holding a module came from (for node names). */
struct modsrc {
    const char *name, *path;
};

/* isinstance(v, T) for the types printed code names: int, float, bool, str, Tensor,
 * List[..]/list, Tuple[..]/tuple, Dict[..]/dict, Optional[T] (None or T) and NoneType. */
static bool is_instance(const struct tv *v, const struct ox_ts_expr *ty) {
    const char *name = ty->kind == OX_TE_NAME ? ty->name
                       : ty->kind == OX_TE_SUBSCRIPT && ty->base->kind == OX_TE_NAME
                           ? ty->base->name
                       : ty->kind == OX_TE_ATTR ? ty->name
                                                : "";
    if (!strcmp(name, "Optional"))
        return v->k == TV_NONE || (ty->kind == OX_TE_SUBSCRIPT && is_instance(v, ty->index));
    static const struct {
        const char *name;
        tv_kind k;
    } map[] = {{"int", TV_INT},   {"float", TV_FLOAT},   {"bool", TV_BOOL},
               {"str", TV_STR},   {"Tensor", TV_TENSOR}, {"List", TV_LIST},
               {"list", TV_LIST}, {"Tuple", TV_TUPLE},   {"tuple", TV_TUPLE},
               {"Dict", TV_DICT}, {"dict", TV_DICT},     {"NoneType", TV_NONE}};
    for (size_t i = 0; i < sizeof map / sizeof *map; i++)
        if (!strcmp(name, map[i].name)) return v->k == map[i].k;
    return false;
}

static ox_status eval_call(struct ev *e, struct scope *s, const struct ox_ts_expr *x,
                           struct tv **out) {
    const struct ox_ts_expr *callee = x->base;
    int n = x->n_args;
    struct tv **args = ox_arena_alloc(&e->a, sizeof *args * (size_t)(n ? n : 1));
    if (!args) return nomem(e);
    /* type-only forms: the type argument is not evaluated */
    const char *cname = dotted(e, callee);
    bool local = cname && callee->kind == OX_TE_NAME && lookup(s, callee->name);
    if (cname && !local) {
        if ((strcmp(cname, "annotate") == 0 || strcmp(cname, "unchecked_cast") == 0) && n == 2)
            return eval_expr(e, s, x->args[1], out);
        if (strcmp(cname, "uninitialized") == 0) {
            *out = tv_new(e, TV_UNINIT);
            return *out ? OX_OK : nomem(e);
        }
        if (strcmp(cname, "isinstance") == 0 && n == 2) { /* a type, or a tuple of types */
            struct tv *v;
            ox_status st = eval_expr(e, s, x->args[0], &v);
            if (st) return st;
            const struct ox_ts_expr *ty = x->args[1];
            int nt = ty->kind == OX_TE_TUPLE ? ty->n_args : 1;
            bool yes = false;
            for (int k = 0; k < nt && !yes; k++)
                yes = is_instance(v, ty->kind == OX_TE_TUPLE ? ty->args[k] : ty);
            *out = tv_bool(e, yes);
            return *out ? OX_OK : nomem(e);
        }
    }
    for (int k = 0; k < n; k++) {
        ox_status st = eval_expr(e, s, x->args[k], &args[k]);
        if (st) return st;
    }
    /* method call on a value: (module).forward(...), or list/str methods */
    if (callee->kind == OX_TE_ATTR) {
        bool is_ns = false;
        const char *root = cname;
        if (root) {
            size_t l = strcspn(root, ".");
            is_ns = (l == 5 && strncmp(root, "torch", 5) == 0) ||
                    (l == 3 && strncmp(root, "ops", 3) == 0) ||
                    (l == 9 && strncmp(root, "__torch__", 9) == 0) ||
                    (l == 4 && strncmp(root, "math", 4) == 0);
            if (is_ns && callee->base->kind == OX_TE_NAME && lookup(s, callee->base->name))
                is_ns = false;
        }
        if (!is_ns) {
            struct tv *obj;
            ox_status st = eval_expr(e, s, callee->base, &obj);
            if (st) return st;
            if (obj->k == TV_OBJ) {
                const char *path = "";
                const struct ox_ts_expr *b = callee->base;
                if (b->kind == OX_TE_NAME && s) {
                    /* local module names were bound from self.<attr>: the name itself */
                    path = strcmp(b->name, "self") == 0 ? "" : b->name;
                } else {
                    path = module_path(b);
                }
                return call_method(e, obj, callee->name, path, n, args, x->kw, out);
            }
            /* a method on a value: list.append etc. are printed as torch.X calls */
            struct tv **a2 = ox_arena_alloc(&e->a, sizeof *a2 * (size_t)(n + 1));
            const char **kw2 = ox_arena_alloc(&e->a, sizeof *kw2 * (size_t)(n + 1));
            if (!a2 || !kw2) return nomem(e);
            a2[0] = obj;
            for (int k = 0; k < n; k++) {
                a2[k + 1] = args[k];
                kw2[k + 1] = x->kw ? x->kw[k] : NULL;
            }
            char op[256];
            snprintf(op, sizeof op, "torch.%s", callee->name);
            bool handled;
            st = ts_call_op(e, op, n + 1, a2, kw2, out, &handled);
            if (!st && !handled)
                st = ts_err(e, OX_E_UNSUPPORTED, "method '%s' of a %s is not supported",
                            callee->name, tv_kind_name(obj->k));
            return st;
        }
    }
    if (!cname) {
        struct tv *f;
        ox_status st = eval_expr(e, s, callee, &f);
        if (st) return st;
        if (f->k != TV_FUNC) return ts_err(e, OX_E_UNSUPPORTED, "calling a %s", tv_kind_name(f->k));
        cname = f->s;
    } else if (callee->kind == OX_TE_NAME) {
        struct tv *f = lookup(s, callee->name);
        if (f && f->k == TV_FUNC) cname = f->s;
    }
    if (strncmp(cname, "__torch__.", 10) == 0) { /* a free function, or a NamedTuple */
        const struct ox_ts_class *c = NULL;
        const char *dot = strrchr(cname, '.');
        struct ox_ts_file *f;
        ox_status st = code_file(e, cname, (size_t)(dot - cname), &f);
        if (st) return st;
        if (f) c = ox_ts_find_class(f, dot + 1);
        if (c) { /* NamedTuple construction: a tuple of its fields */
            *out = tv_list(e, TV_TUPLE, n);
            if (!*out) return nomem(e);
            for (int k = 0; k < n; k++) (*out)->items[k] = args[k];
            return OX_OK;
        }
        const struct ox_ts_func *fn;
        const char *file = NULL;
        st = find_func(e, cname, &fn, &file);
        if (st) return st;
        return call_func(e, fn, file, NULL, n, args, x->kw, out);
    }
    bool handled;
    ox_status st = ts_call_op(e, cname, n, args, x->kw, out, &handled);
    if (!st && !handled) st = ts_err(e, OX_E_UNSUPPORTED, "%s: unknown operator", cname);
    return st;
}

/* ---- expressions ----------------------------------------------------------------------- */

static ox_status eval_expr(struct ev *e, struct scope *s, const struct ox_ts_expr *x,
                           struct tv **out) {
    if (++e->depth > OX_TS_MAX_CALL_DEPTH + OX_TS_MAX_DEPTH) {
        e->depth--;
        return ts_err(e, OX_E_UNSUPPORTED, "expressions nest too deeply");
    }
    e->line = x->line;
    ox_status st = OX_OK;
    *out = NULL;
    switch (x->kind) {
    case OX_TE_INT: *out = tv_int(e, x->i); break;
    case OX_TE_FLOAT: *out = tv_float(e, x->f); break;
    case OX_TE_BOOL: *out = tv_bool(e, x->i != 0); break;
    case OX_TE_NONE: *out = tv_none(e); break;
    case OX_TE_STR:
        *out = tv_new(e, TV_STR);
        if (*out) {
            (*out)->s = x->s;
            (*out)->s_len = x->s_len;
        }
        break;
    case OX_TE_NAME: {
        struct tv *v = lookup(s, x->name);
        if (v) {
            *out = v;
            break;
        }
        if (strcmp(x->name, "inf") == 0 || strcmp(x->name, "nan") == 0) {
            *out = tv_float(e, strcmp(x->name, "inf") == 0 ? INFINITY : NAN);
            break;
        }
        st = ts_err(e, OX_E_INVALID, "name '%s' is not defined", x->name);
        break;
    }
    case OX_TE_NEG: {
        struct tv *v;
        st = eval_expr(e, s, x->base, &v);
        if (st) break;
        if (v->k == TV_INT)
            *out = tv_int(e, -v->i);
        else if (v->k == TV_FLOAT)
            *out = tv_float(e, -v->f);
        else
            st = ts_err(e, OX_E_UNSUPPORTED, "unary minus on a %s", tv_kind_name(v->k));
        break;
    }
    case OX_TE_ATTR: {
        const char *d = dotted(e, x);
        if (d && x->base->kind == OX_TE_NAME && strcmp(x->base->name, "CONSTANTS") == 0 &&
            !lookup(s, "CONSTANTS")) {
            char *end;
            long idx = x->name[0] == 'c' ? strtol(x->name + 1, &end, 10) : -1;
            if (idx < 0 || *end || !e->constants || idx >= e->constants->n) {
                st = ts_err(e, OX_E_INVALID, "%s: no such constant", d);
                break;
            }
            char nm[64];
            snprintf(nm, sizeof nm, "CONSTANTS.c%ld", idx);
            st = from_pv(e, e->constants->items[idx], "constants", nm, out);
            break;
        }
        if (d && strncmp(d, "__torch__.", 10) == 0 &&
            !(x->base->kind == OX_TE_NAME && lookup(s, x->base->name))) {
            *out = tv_new(e, TV_FUNC);
            if (*out) (*out)->s = d;
            break;
        }
        struct tv *b;
        st = eval_expr(e, s, x->base, &b);
        if (st) break;
        if (b->k == TV_OBJ) {
            st = obj_attr(e, b, x->name, out);
            if (!st && !*out)
                st = ts_err(e, OX_E_INVALID, "object of class '%s' has no attribute '%s'", b->cls,
                            x->name);
            break;
        }
        if (b->k == TV_TENSOR) { /* tensor properties */
            bool handled;
            char op[128];
            snprintf(op, sizeof op, "prop.%s", x->name);
            st = ts_call_op(e, op, 1, &b, NULL, out, &handled);
            if (!st && !handled) st = ts_err(e, OX_E_UNSUPPORTED, "tensor attribute '%s'", x->name);
            break;
        }
        st = ts_err(e, OX_E_UNSUPPORTED, "attribute '%s' of a %s", x->name, tv_kind_name(b->k));
        break;
    }
    case OX_TE_CALL: st = eval_call(e, s, x, out); break;
    case OX_TE_SUBSCRIPT: {
        struct tv *b, *i;
        st = eval_expr(e, s, x->base, &b);
        if (!st) st = eval_expr(e, s, x->index, &i);
        if (st) break;
        struct tv *args[2] = {b, i};
        bool handled;
        st = ts_call_op(e, "__getitem__", 2, args, NULL, out, &handled);
        break;
    }
    case OX_TE_TUPLE:
    case OX_TE_LIST:
    case OX_TE_DICT: {
        *out = tv_list(e,
                       x->kind == OX_TE_TUPLE  ? TV_TUPLE
                       : x->kind == OX_TE_LIST ? TV_LIST
                                               : TV_DICT,
                       x->n_args);
        if (!*out) break;
        for (int k = 0; k < x->n_args && !st; k++)
            st = eval_expr(e, s, x->args[k], &(*out)->items[k]);
        if (x->kind == OX_TE_DICT) (*out)->n = x->n_args / 2;
        break;
    }
    }
    e->depth--;
    if (!st && !*out) st = nomem(e);
    return st;
}

/* ---- statements ------------------------------------------------------------------------ */

static ox_status assign(struct ev *e, struct scope *s, const struct ox_ts_stmt *st, struct tv *v) {
    if (st->target_attr) {
        const struct ox_ts_expr *t = st->target_attr;
        if (t->kind == OX_TE_ATTR) {
            struct tv *obj;
            ox_status rc = eval_expr(e, s, t->base, &obj);
            if (rc) return rc;
            if (obj->k != TV_OBJ)
                return ts_err(e, OX_E_UNSUPPORTED, "setting attribute '%s' of a %s", t->name,
                              tv_kind_name(obj->k));
            struct tv_attr *a = ox_arena_alloc(&e->a, sizeof *a);
            if (!a) return nomem(e);
            *a = (struct tv_attr){t->name, v, obj->attrs};
            obj->attrs = a;
            return OX_OK;
        }
        return ts_err(e, OX_E_UNSUPPORTED, "assignment to a subscript");
    }
    if (st->n_targets == 1 && !st->is_tuple) return bind(e, s, st->targets[0], v);
    if (v->k != TV_TUPLE && v->k != TV_LIST)
        return ts_err(e, OX_E_UNSUPPORTED, "unpacking a %s into %d names", tv_kind_name(v->k),
                      st->n_targets);
    if (v->n != st->n_targets)
        return ts_err(e, OX_E_INVALID, "unpacking %d values into %d names", v->n, st->n_targets);
    for (int k = 0; k < st->n_targets; k++) {
        ox_status rc = bind(e, s, st->targets[k], v->items[k]);
        if (rc) return rc;
    }
    return OX_OK;
}

/* A condition known at import time. */
static ox_status condition(struct ev *e, struct scope *s, const struct ox_ts_expr *x, bool *c) {
    struct tv *v;
    ox_status st = eval_expr(e, s, x, &v);
    if (st) return st;
    if (!tv_truthy(v, c))
        return ts_err(e, OX_E_UNSUPPORTED,
                      "a condition computed at run time (a %s): only conditions known at import "
                      "time are supported",
                      tv_kind_name(v->k));
    return OX_OK;
}

enum { FLOW_NONE, FLOW_BREAK, FLOW_CONTINUE };

static ox_status exec_stmts(struct ev *e, struct scope *s, const struct ox_ts_block *b,
                            struct tv **ret, bool *returned, int *flow);

/* ---- if on a run-time condition: ONNX If ----------------------------------------------- */

/* Run one branch into a new subgraph of the current graph, on a copy of the scope. */
static ox_status run_branch(struct ev *e, const struct scope *s, const struct ox_ts_block *b,
                            const char *kind, struct ox_graph **sub, struct scope *after) {
    int depth = 1;
    for (const struct ox_graph *g = e->g; g->parent; g = g->parent) depth++;
    if (depth > e->lim.subgraph_depth) {
        ox_err_limit("subgraph_depth", (uint64_t)e->lim.subgraph_depth,
                     "an if computed at run time at nesting level %d", depth);
        return ts_err(e, OX_E_LIMIT, "%s", ox_errmsg());
    }
    *sub = ox_graph_create(e->g);
    if (!*sub) return nomem(e);
    char name[64];
    snprintf(name, sizeof name, "%s_%d", kind, e->n_nodes++);
    (*sub)->name = ox_graph_strdup(*sub, name);
    after->n = s->n;
    after->cap = s->n + 16;
    after->b = ox_arena_alloc(&e->a, sizeof *after->b * (size_t)after->cap);
    if (!after->b || !(*sub)->name) return nomem(e);
    if (s->n) memcpy(after->b, s->b, sizeof *after->b * (size_t)s->n);
    struct ox_graph *saved = e->g;
    e->g = *sub;
    struct tv *ret = NULL;
    bool returned = false;
    int flow = FLOW_NONE;
    ox_status rc = exec_stmts(e, after, b, &ret, &returned, &flow);
    e->g = saved;
    if (!rc && (returned || flow != FLOW_NONE))
        rc = ts_err(e, OX_E_UNSUPPORTED,
                    "return, break or continue inside an if whose condition is computed at run "
                    "time");
    return rc;
}

/* A branch's output: an Identity in the branch graph (its value may be an outer one). */
static ox_status branch_output(struct ev *e, struct ox_graph *sub, struct tv *v) {
    struct ox_graph *saved = e->g;
    e->g = sub;
    int in = local_id(e, v);
    e->g = saved;
    if (in < 0) return nomem(e);
    char name[64];
    snprintf(name, sizeof name, "%s_out%d", sub->name, sub->n_outputs);
    int out = ox_graph_add_value(sub, name);
    if (out < 0) return nomem(e);
    struct ox_node *n = ox_graph_add_node(sub, name, "", "Identity", 1, &in, 1, &out);
    if (!n) return nomem(e);
    n->opset = OX_TS_OPSET;
    n->op = ox_op_find("", "Identity", OX_TS_OPSET);
    sub->values[out].producer = sub->n_nodes - 1;
    if (!set_value_type(sub, out, v->dt, v->rank, v->dims)) return nomem(e);
    sub->outputs[sub->n_outputs++] = out;
    return OX_OK;
}

static struct tv *scope_get(const struct scope *s, const char *name) {
    for (int i = s->n - 1; i >= 0; i--)
        if (strcmp(s->b[i].name, name) == 0) return s->b[i].v;
    return NULL;
}

static ox_status runtime_if(struct ev *e, struct scope *s, struct tv *cond,
                            const struct ox_ts_stmt *st) {
    ox_status rc = OX_OK;
    int64_t numel = 1;
    for (int d = 0; d < cond->rank; d++) numel *= cond->dims[d];
    if (cond->rank < 0 || numel != 1)
        return ts_err(e, OX_E_UNSUPPORTED, "an if on a tensor of more than one element");
    if (cond->dt != OX_BOOL) {
        struct ts_attrs at = {0};
        ta_int(&at, "to", OX_BOOL);
        if ((rc = ts_emit1(e, "Cast", 1, &cond, &at, &cond))) return rc;
    }
    struct ox_graph *gt = NULL, *gf = NULL;
    struct scope st_then = {0}, st_else = {0};
    rc = run_branch(e, s, &st->body, "then", &gt, &st_then);
    if (!rc) rc = run_branch(e, s, &st->orelse, "else", &gf, &st_else);
    /* the names either branch changed, that both branches define */
    const char *names[256];
    struct tv *tvals[256], *fvals[256];
    int n_out = 0;
    for (int i = 0; !rc && i < st_then.n + st_else.n; i++) {
        const char *nm = i < st_then.n ? st_then.b[i].name : st_else.b[i - st_then.n].name;
        bool seen = false;
        for (int k = 0; k < n_out; k++) seen |= strcmp(names[k], nm) == 0;
        if (seen) continue;
        struct tv *t = scope_get(&st_then, nm), *f = scope_get(&st_else, nm),
                  *old = scope_get(s, nm);
        if (!t || !f || (t == old && f == old)) continue;
        if (t == f) {
            rc = bind(e, s, nm, t);
            continue;
        }
        if (t->k != TV_TENSOR || f->k != TV_TENSOR) {
            bool same = tv_is_num(t) && tv_is_num(f) && t->k == f->k && tv_num(t) == tv_num(f);
            if (same) {
                rc = bind(e, s, nm, t);
                continue;
            }
            rc = ts_err(e, OX_E_UNSUPPORTED,
                        "'%s' is a %s in one branch and a %s in the other of an if computed at run "
                        "time: only tensors can differ",
                        nm, tv_kind_name(t->k), tv_kind_name(f->k));
            break;
        }
        if (t->dt != f->dt || t->rank != f->rank ||
            memcmp(t->dims, f->dims, sizeof(int64_t) * (size_t)(t->rank > 0 ? t->rank : 0))) {
            rc = ts_err(e, OX_E_UNSUPPORTED,
                        "'%s' has different types or shapes in the two branches of an if computed "
                        "at run time",
                        nm);
            break;
        }
        if (n_out == 256) {
            rc = ts_err(e, OX_E_UNSUPPORTED, "an if with more than 256 results");
            break;
        }
        names[n_out] = nm;
        tvals[n_out] = t;
        fvals[n_out++] = f;
    }
    if (!rc) {
        gt->outputs = ox_graph_alloc(gt, sizeof(int) * (size_t)(n_out ? n_out : 1));
        gf->outputs = ox_graph_alloc(gf, sizeof(int) * (size_t)(n_out ? n_out : 1));
        if (!gt->outputs || !gf->outputs) rc = nomem(e);
    }
    for (int k = 0; k < n_out && !rc; k++) {
        rc = branch_output(e, gt, tvals[k]);
        if (!rc) rc = branch_output(e, gf, fvals[k]);
    }
    if (!rc) rc = ox_graph_sort(gt);
    if (!rc) rc = ox_graph_sort(gf);
    if (rc) {
        ox_graph_free(gt);
        ox_graph_free(gf);
        return rc;
    }
    /* the If node */
    int cid = local_id(e, cond), oids[256];
    char name[1200];
    snprintf(name, sizeof name, "%s%sIf_%d", e->prefix, e->prefix[0] ? "/" : "", e->n_nodes++);
    for (int k = 0; k < n_out; k++) {
        char vn[1300];
        snprintf(vn, sizeof vn, "%s:%d", name, k);
        oids[k] = ox_graph_add_value(e->g, vn);
        if (oids[k] < 0) return nomem(e);
    }
    struct ox_node *n =
        cid < 0 ? NULL : ox_graph_add_node(e->g, name, "", "If", 1, &cid, n_out, oids);
    struct ox_attr *at = n ? ox_graph_alloc(e->g, sizeof *at * 2) : NULL;
    if (!at) {
        ox_graph_free(gt);
        ox_graph_free(gf);
        return nomem(e);
    }
    at[0] = (struct ox_attr){.name = "then_branch", .type = OX_ATTR_GRAPH, .g = gt};
    at[1] = (struct ox_attr){.name = "else_branch", .type = OX_ATTR_GRAPH, .g = gf};
    n->attrs = at;
    n->n_attrs = 2;
    n->opset = OX_TS_OPSET;
    n->op = ox_op_find("", "If", OX_TS_OPSET);
    for (int k = 0; k < n_out; k++) {
        e->g->values[oids[k]].producer = e->g->n_nodes - 1;
        if (!set_value_type(e->g, oids[k], tvals[k]->dt, tvals[k]->rank, tvals[k]->dims))
            return nomem(e);
        struct tv *v = tv_new(e, TV_TENSOR);
        if (!v) return nomem(e);
        v->vid = oids[k];
        v->g = e->g;
        v->dt = tvals[k]->dt;
        v->rank = tvals[k]->rank;
        memcpy(v->dims, tvals[k]->dims, sizeof v->dims);
        if ((rc = bind(e, s, names[k], v))) return rc;
    }
    return OX_OK;
}

static ox_status exec_stmt(struct ev *e, struct scope *s, const struct ox_ts_stmt *st,
                           struct tv **ret, bool *returned, int *flow) {
    e->line = st->line;
    struct tv *v = NULL;
    ox_status rc = OX_OK;
    switch (st->kind) {
    case OX_TS_ASSIGN:
        rc = eval_expr(e, s, st->value, &v);
        if (!rc) rc = assign(e, s, st, v);
        return rc;
    case OX_TS_EXPR: return eval_expr(e, s, st->value, &v);
    case OX_TS_RETURN:
        if (st->value) {
            rc = eval_expr(e, s, st->value, ret);
        } else {
            *ret = tv_none(e);
        }
        *returned = true;
        return rc;
    case OX_TS_PASS: return OX_OK;
    case OX_TS_BREAK: *flow = FLOW_BREAK; return OX_OK;
    case OX_TS_CONTINUE: *flow = FLOW_CONTINUE; return OX_OK;
    case OX_TS_IF: {
        struct tv *cv;
        rc = eval_expr(e, s, st->value, &cv);
        if (rc) return rc;
        bool c;
        if (tv_truthy(cv, &c))
            return exec_stmts(e, s, c ? &st->body : &st->orelse, ret, returned, flow);
        if (cv->k != TV_TENSOR)
            return ts_err(e, OX_E_UNSUPPORTED, "an if on a %s", tv_kind_name(cv->k));
        return runtime_if(e, s, cv, st);
    }
    case OX_TS_ASSERT: {
        bool c = false;
        rc = condition(e, s, st->value, &c);
        if (rc) return rc;
        if (!c) return ts_err(e, OX_E_INVALID, "the model's assertion fails for these inputs");
        return OX_OK;
    }
    case OX_TS_RAISE:
        return ts_err(e, OX_E_INVALID, "the model raises an exception for these inputs");
    case OX_TS_FOR: {
        rc = eval_expr(e, s, st->value, &v);
        if (rc) return rc;
        int64_t count = 0, start = 0, step = 1;
        bool is_range = v->k == TV_TUPLE && v->s && strcmp(v->s, "range") == 0 && v->n == 3;
        if (is_range) {
            start = v->items[0]->i;
            step = v->items[2]->i;
            int64_t span = v->items[1]->i - start;
            if (step > 0 && span > 0) count = (span + step - 1) / step;
            if (step < 0 && span < 0) count = (-span + -step - 1) / -step;
        } else if (v->k == TV_LIST || v->k == TV_TUPLE) {
            count = v->n;
        } else {
            return ts_err(e, OX_E_UNSUPPORTED, "a for loop over a %s", tv_kind_name(v->k));
        }
        for (int64_t k = 0; k < count; k++) {
            if (++e->unrolled > OX_TS_MAX_UNROLL)
                return ts_err(e, OX_E_UNSUPPORTED, "loops run more than %d iterations in all",
                              OX_TS_MAX_UNROLL);
            struct tv *item = is_range ? tv_int(e, start + k * step) : v->items[k];
            if (!item) return nomem(e);
            rc = bind(e, s, st->targets[0], item);
            if (rc) return rc;
            int f = FLOW_NONE;
            rc = exec_stmts(e, s, &st->body, ret, returned, &f);
            if (rc || *returned || f == FLOW_BREAK) return rc;
        }
        return OX_OK;
    }
    case OX_TS_WHILE:
        for (;;) {
            bool c;
            rc = condition(e, s, st->value, &c);
            if (rc || !c) return rc;
            if (++e->unrolled > OX_TS_MAX_UNROLL)
                return ts_err(e, OX_E_UNSUPPORTED, "loops run more than %d iterations in all",
                              OX_TS_MAX_UNROLL);
            int f = FLOW_NONE;
            rc = exec_stmts(e, s, &st->body, ret, returned, &f);
            if (rc || *returned || f == FLOW_BREAK) return rc;
        }
    }
    return ts_err(e, OX_E_INTERNAL, "statement kind %d", (int)st->kind);
}

static ox_status exec_stmts(struct ev *e, struct scope *s, const struct ox_ts_block *b,
                            struct tv **ret, bool *returned, int *flow) {
    for (int i = 0; i < b->n; i++) {
        ox_status rc = exec_stmt(e, s, b->stmts[i], ret, returned, flow);
        if (rc || *returned || *flow != FLOW_NONE) return rc;
    }
    return OX_OK;
}

static ox_status exec_block(struct ev *e, struct scope *s, const struct ox_ts_block *b,
                            struct tv **ret, bool *returned) {
    int flow = FLOW_NONE;
    return exec_stmts(e, s, b, ret, returned, &flow);
}

/* ---- the import ------------------------------------------------------------------------ */

static ox_status check_kind(struct ev *e) {
    if (ox_zip_find(e->zip, "model.json"))
        return ts_err(e, OX_E_UNSUPPORTED,
                      "a TorchScript archive of the legacy layout (model.json, PyTorch 1.3 or "
                      "older): save it again with a newer torch.jit.save");
    bool has_code = false;
    for (int i = 0; i < ox_zip_count(e->zip) && !has_code; i++) {
        const char *n = ox_zip_entry_at(e->zip, i)->name + strlen(ox_zip_prefix(e->zip));
        has_code = strncmp(n, "code/", 5) == 0;
    }
    if (ox_zip_find(e->zip, "bytecode.pkl") && !has_code)
        return ts_err(e, OX_E_UNSUPPORTED,
                      "a lite-interpreter (.ptl) archive: onnxexec reads torch.jit.save files, "
                      "not _save_for_lite_interpreter ones");
    if (!ox_zip_find(e->zip, "data.pkl"))
        return ts_err(e, OX_E_INVALID, "not a TorchScript archive (no data.pkl)");
    if (!ox_zip_find(e->zip, "constants.pkl") || !has_code)
        return ts_err(e, OX_E_UNSUPPORTED,
                      "a torch.save file (a state dict or pickled tensors), not a TorchScript "
                      "module: load it in PyTorch, then torch.jit.trace or torch.jit.script it "
                      "and torch.jit.save the result");
    return OX_OK;
}

static ox_status load_pickle(struct ev *e, const char *rel, struct ox_pickle **pk,
                             struct ox_pv **root) {
    const uint8_t *b;
    size_t n;
    uint8_t *owned = NULL;
    ox_status st = record(e, rel, &b, &n, &owned);
    if (st) return st;
    char what[1200];
    snprintf(what, sizeof what, "%s: %s", e->archive, rel);
    st = ox_pickle_load_with(b, n, what, &e->lim, pk, root);
    free(owned);
    return st;
}

/* Input shapes from traced_inputs.pkl (torch 2.x traced files): {"forward": [tensors]}. */
static const struct ox_pv *traced_input(struct ev *e, struct ox_pickle **pk, int k) {
    if (!*pk) {
        struct ox_pv *root;
        if (!ox_zip_find(e->zip, "traced_inputs.pkl") ||
            load_pickle(e, "traced_inputs.pkl", pk, &root))
            return NULL;
        e->traced = root;
    }
    const struct ox_pv *root = e->traced;
    const struct ox_pv *fw = root ? ox_pv_get(root, "forward") : NULL;
    if (!fw || (fw->kind != OX_PV_LIST && fw->kind != OX_PV_TUPLE) || k >= fw->n) return NULL;
    const struct ox_pv *t = fw->items[k];
    return t->kind == OX_PV_TENSOR ? t : NULL;
}

/* The model's outputs: tensors, numbers, and tuples, lists and dicts of them, flattened in
 * order. Outputs are named output_<k>, or by their string key in a dict (torchvision's
 * segmentation models return {"out": ..., "aux": ...}). */
static ox_status output_of(struct ev *e, struct tv *v, const struct tv *key, int *k) {
    if (v->k == TV_TUPLE || v->k == TV_LIST) {
        for (int i = 0; i < v->n; i++) {
            ox_status st = output_of(e, v->items[i], NULL, k);
            if (st) return st;
        }
        return OX_OK;
    }
    if (v->k == TV_DICT) {
        for (int i = 0; i < v->n; i++) {
            const struct tv *kv = v->items[2 * i];
            ox_status st = output_of(e, v->items[2 * i + 1], kv->k == TV_STR ? kv : NULL, k);
            if (st) return st;
        }
        return OX_OK;
    }
    if (*k >= OX_TS_MAX_OUTPUTS)
        return ts_err(e, OX_E_UNSUPPORTED, "forward returns more than %d tensors",
                      OX_TS_MAX_OUTPUTS);
    if (v->k == TV_NONE) return OX_OK; /* an absent optional result (aux outputs in eval) */
    if (v->k == TV_INT || v->k == TV_FLOAT || v->k == TV_BOOL) {
        v = tv_scalar_tensor(e, tv_num(v),
                             v->k == TV_INT    ? OX_INT64
                             : v->k == TV_BOOL ? OX_BOOL
                                               : OX_FLOAT);
        if (!v) return nomem(e);
    }
    if (v->k != TV_TENSOR)
        return ts_err(e, OX_E_UNSUPPORTED, "forward returns a %s, which ONNX cannot hold",
                      tv_kind_name(v->k));
    int id = tv_vid(e, v);
    if (id < 0) return nomem(e);
    /* every output gets a name of its own, written by an Identity */
    char name[80];
    size_t w = 0;
    for (size_t i = 0; key && i < key->s_len && w + 2 < sizeof name; i++) { /* the key, made safe */
        char c = key->s[i];
        name[w++] = isalnum((unsigned char)c) || c == '_' || c == '.' || c == '-' ? c : '_';
    }
    name[w] = 0;
    if (!w) snprintf(name, sizeof name, "output_%d", *k);
    while (ox_graph_find_value(e->g, name) >= 0 && strlen(name) + 2 < sizeof name)
        strcat(name, "_");
    int oid = ox_graph_add_value(e->g, name);
    if (oid < 0) return nomem(e);
    struct ox_node *n = ox_graph_add_node(e->g, name, "", "Identity", 1, &id, 1, &oid);
    if (!n) return nomem(e);
    n->opset = OX_TS_OPSET;
    n->op = ox_op_find("", "Identity", OX_TS_OPSET);
    struct ox_value *src = &e->g->values[id], *ov = &e->g->values[oid];
    ov->producer = e->g->n_nodes - 1;
    ov->dtype = src->dtype;
    ov->rank = src->rank;
    ov->dims = src->dims;
    e->g->outputs[e->g->n_outputs++] = oid;
    (*k)++;
    return OX_OK;
}

static ox_status run_forward(struct ev *e, const struct ox_ts_input *inputs, int n_inputs) {
    struct tv *self = tv_new(e, TV_OBJ);
    if (!self) return nomem(e);
    self->obj = e->root;
    self->cls = e->root->cls;
    const struct ox_ts_class *c;
    ox_status st = find_class(e, self->cls, &c);
    if (st) return st;
    const struct ox_ts_func *fn = ox_ts_find_method(c, "forward");
    if (!fn) /* an overloaded forward (scripted nn.RNN, LSTM, GRU): the first takes tensors */
        fn = ox_ts_find_method(c, "forward__0");
    if (!fn) return ts_err(e, OX_E_INVALID, "class '%s' has no forward method", self->cls);
    const char *dot = strrchr(self->cls, '.');
    struct ox_ts_file *f;
    st = code_file(e, self->cls, (size_t)(dot - self->cls), &f);
    if (st) return st;
    int np = fn->n_params - 1;
    struct tv **args = ox_arena_alloc(&e->a, sizeof *args * (size_t)(np > 0 ? np : 1));
    e->g->inputs = ox_graph_alloc(e->g, sizeof(int) * (size_t)(np > 0 ? np : 1));
    if (!args || !e->g->inputs) return nomem(e);
    struct ox_pickle *traced = NULL;
    int n_args = 0, unnamed = 0; /* inputs without a name bind in order to the tensor
                                    parameters no input names */
    for (int p = 0; p < np; p++) {
        const struct ox_ts_param *pr = &fn->params[p + 1];
        bool is_tensor = !pr->type || pr->type->kind == OX_TT_TENSOR;
        if (!is_tensor) {
            if (!pr->dflt) {
                ox_pickle_free(traced);
                return ts_err(e, OX_E_UNSUPPORTED,
                              "forward argument '%s' is not a tensor and has no default", pr->name);
            }
            break; /* it and the rest take their defaults */
        }
        const struct ox_ts_input *given = NULL;
        for (int i = 0; i < n_inputs; i++)
            if (inputs[i].name && strcmp(inputs[i].name, pr->name) == 0) given = &inputs[i];
        while (!given && unnamed < n_inputs) {
            const struct ox_ts_input *u = &inputs[unnamed++];
            if (!u->name) given = u;
        }
        struct ox_ts_input from_trace = {0};
        if (!given) {
            const struct ox_pv *t = traced_input(e, &traced, p);
            if (t) {
                from_trace.dtype = t->tensor.storage.dtype;
                from_trace.rank = t->tensor.rank;
                memcpy(from_trace.dims, t->tensor.size, sizeof(int64_t) * (size_t)t->tensor.rank);
                given = &from_trace;
            }
        }
        if (!given) {
            ox_pickle_free(traced);
            e->file = NULL;
            return ts_err(e, OX_E_INVALID,
                          "the shape of input '%s' is not known: give it (onnxexec: --shape "
                          "%s=d0,d1,... or an input file)",
                          pr->name, pr->name);
        }
        int id = ox_graph_add_value(e->g, pr->name);
        struct tv *v = tv_new(e, TV_TENSOR);
        if (id < 0 || !v) return nomem(e);
        ox_dtype dt = given->dtype ? given->dtype : OX_FLOAT;
        if (!set_value_type(e->g, id, dt, given->rank, given->dims)) return nomem(e);
        v->vid = id;
        v->g = e->g;
        v->dt = dt;
        v->rank = given->rank;
        memcpy(v->dims, given->dims, sizeof(int64_t) * (size_t)given->rank);
        e->g->inputs[e->g->n_inputs++] = id;
        args[n_args++] = v;
    }
    ox_pickle_free(traced);
    e->traced = NULL;
    struct tv *ret = NULL;
    st = call_func(e, fn, f->path, self, n_args, args, NULL, &ret);
    if (st) return st;
    e->file = NULL;
    int n_out = 0;
    e->g->outputs = ox_graph_alloc(e->g, sizeof(int) * OX_TS_MAX_OUTPUTS);
    if (!e->g->outputs) return nomem(e);
    return output_of(e, ret, NULL, &n_out);
}

/* Parameters that only fed folded work (a weight whose transpose was computed at import
 * time) are not part of the model: their initializers go. */
static ox_status drop_unused(struct ev *e) {
    struct ox_graph *g = e->main_g;
    int *uses = calloc((size_t)(g->n_values ? g->n_values : 1), sizeof *uses);
    if (!uses) return nomem(e);
    ox_graph_count_uses(g, NULL, uses);
    for (int v = 0; v < g->n_values; v++) {
        struct ox_value *val = &g->values[v];
        if (!val->init || uses[v] > 0) continue;
        bool is_input = false;
        for (int i = 0; i < g->n_inputs; i++) is_input |= g->inputs[i] == v;
        if (is_input) continue;
        if (!val->init_borrowed) ox_tensor_free_data(val->init);
        val->init = NULL;
    }
    free(uses);
    return OX_OK;
}

/* The archive's records once inflated, against the model_bytes limit: a zip bomb fails
 * here, before anything is inflated. */
static ox_status check_inflated(struct ev *e) {
    uint64_t total = 0;
    for (int i = 0; i < ox_zip_count(e->zip); i++) {
        uint64_t u = ox_zip_entry_at(e->zip, i)->usize;
        total = u > UINT64_MAX - total ? UINT64_MAX : total + u;
    }
    if (total <= e->lim.model_bytes) return OX_OK;
    ox_err_limit("model_bytes", e->lim.model_bytes,
                 "the archive's %d records take %llu bytes once inflated", ox_zip_count(e->zip),
                 (unsigned long long)total);
    return ts_err(e, OX_E_LIMIT, "%s", ox_errmsg());
}

ox_status ox_ts_import_file(const char *path, const struct ox_ts_input *inputs, int n_inputs,
                            struct ox_graph **out) {
    return ox_ts_import_file_with(path, inputs, n_inputs, NULL, out);
}

ox_status ox_ts_import_file_with(const char *path, const struct ox_ts_input *inputs, int n_inputs,
                                 const ox_limits *lim, struct ox_graph **out) {
    *out = NULL;
    struct ev e = {.archive = path};
    ox_status st = ox_limits_fill(lim, &e.lim);
    if (st) return ox_err_prefix(st, "%s: ", path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ox_err(OX_E_IO, "%s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size == 0) {
        close(fd);
        return ox_err(OX_E_IO, "%s: not a regular, non-empty file", path);
    }
    if ((uint64_t)sb.st_size > e.lim.model_bytes || (uint64_t)sb.st_size > SIZE_MAX) {
        close(fd);
        ox_err_limit("model_bytes", e.lim.model_bytes, "the file has %llu bytes",
                     (unsigned long long)sb.st_size);
        return ts_err(&e, OX_E_LIMIT, "%s", ox_errmsg());
    }
    size_t len = (size_t)sb.st_size;
    void *map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return ox_err(OX_E_IO, "%s: cannot map: %s", path, strerror(errno));
    st = ox_zip_open(map, len, path, &e.zip);
    if (!st) st = check_inflated(&e);
    if (!st) st = check_kind(&e);
    if (!st) st = load_pickle(&e, "constants.pkl", &e.const_pk, &e.constants);
    if (!st && e.constants->kind != OX_PV_TUPLE)
        st = ts_err(&e, OX_E_INVALID, "constants.pkl does not hold a tuple");
    if (!st) st = load_pickle(&e, "data.pkl", &e.data_pk, &e.root);
    if (!st && e.root->kind != OX_PV_OBJECT)
        st = ts_err(&e, OX_E_INVALID, "data.pkl does not hold a module object");
    if (!st) {
        e.g = e.main_g = ox_graph_create(NULL);
        if (!e.g) st = nomem(&e);
    }
    if (!st) {
        struct ox_graph *g = e.g;
        g->ir_version = 8;
        g->producer_name = "onnxexec (TorchScript import)";
        g->producer_version = ox_version();
        g->opsets = ox_graph_alloc(g, sizeof *g->opsets);
        const char *base = strrchr(path, '/');
        g->name = ox_graph_strdup(g, base ? base + 1 : path);
        if (!g->opsets || !g->name) {
            st = nomem(&e);
        } else {
            g->opsets[0] = (struct ox_opset){"", OX_TS_OPSET};
            g->n_opsets = 1;
            st = run_forward(&e, inputs, n_inputs);
        }
    }
    if (!st) st = ox_graph_sort(e.g);
    if (!st) st = drop_unused(&e);
    for (int i = 0; i < e.n_owned; i++) {
        ox_tensor_free_data(e.owned[i]);
        free(e.owned[i]);
    }
    free(e.owned);
    ox_arena_free(&e.a);
    ox_pickle_free(e.data_pk);
    ox_pickle_free(e.const_pk);
    ox_zip_free(e.zip);
    /* weights used in place keep the archive mapped as long as the graph */
    if (!st && e.borrowed)
        st = ox_graph_keep_map(e.g, map, len);
    else
        munmap(map, len);
    if (st) {
        ox_graph_free(e.g);
        return st;
    }
    *out = e.g;
    return OX_OK;
}
