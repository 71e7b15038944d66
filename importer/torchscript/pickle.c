/* The pickle machine for TorchScript archives (SPEC-torchscript.md §2).
 *
 * A pickle is a program for a stack machine: each opcode is one byte, followed by its
 * argument (little-endian integers; BINFLOAT is a big-endian double; BINUNICODE is a u32
 * length then UTF-8 bytes; GLOBAL is two '\n'-terminated lines, module and name). MARK
 * pushes a fence that TUPLE, LIST, DICT, APPENDS and SETITEMS pop back to; the memo is a
 * table of references that BINPUT fills and BINGET reads. Nothing here calls anything:
 * GLOBAL only names one of a fixed list of globals (the rest fail with their name), and
 * REDUCE, NEWOBJ and BUILD build the value that the named global stands for.
 */
#include "importer/torchscript/pickle.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_GLOBAL_LINE 4096 /* bytes in a GLOBAL's module or name */

/* What an allowed GLOBAL stands for. */
enum global_kind {
    G_CLASS,          /* __torch__.* */
    G_REBUILD_TENSOR, /* torch._utils._rebuild_tensor_v2 */
    G_STORAGE_TYPE,   /* torch.<X>Storage */
    G_ORDERED_DICT,   /* collections.OrderedDict */
    G_INTLIST,        /* torch.jit._pickle.build_intlist */
    G_DOUBLELIST,
    G_BOOLLIST,
    G_TENSORLIST,
    G_RESTORE_TYPE_TAG, /* torch.jit._pickle.restore_type_tag */
    G_DEVICE,           /* torch.device */
};

/* An ox_pv and what only the machine needs (the ox_pv comes first: the pointers are the
 * same). */
struct pv {
    struct ox_pv v;
    enum global_kind global; /* OX_PV_GLOBAL */
    ox_dtype storage_dtype;  /* G_STORAGE_TYPE */
    int used, cap;           /* LIST, DICT: slots of v.items in use (2n for a dict), room */
    int color;               /* the final walk: 0 not seen, 1 on the path, 2 done */
    int height;              /* the final walk: levels of values at and below this one */
};

struct ox_pickle {
    struct ox_arena arena;
    size_t bytes; /* allocated from the arena */
};

struct machine {
    struct ox_pickle *p;
    const uint8_t *buf;
    size_t len, pos, op_pos; /* op_pos: the current opcode's offset */
    uint8_t op;
    const char *what;
    struct ox_pv *stack[OX_PICKLE_MAX_DEPTH];
    int sp;
    int marks[OX_PICKLE_MAX_DEPTH]; /* stack heights at each MARK */
    int n_marks;
    struct ox_pv **memo; /* malloc'd; NULL where unset */
    size_t memo_cap;
    uint64_t max_string; /* bytes of one string (ox_limits.string_length) */
};

static const char *op_name(uint8_t op) {
    switch (op) {
    case 0x80: return "PROTO";
    case '.': return "STOP";
    case '(': return "MARK";
    case 'N': return "NONE";
    case 0x88: return "NEWTRUE";
    case 0x89: return "NEWFALSE";
    case 'K': return "BININT1";
    case 'M': return "BININT2";
    case 'J': return "BININT";
    case 0x8a: return "LONG1";
    case 'G': return "BINFLOAT";
    case 'X': return "BINUNICODE";
    case ')': return "EMPTY_TUPLE";
    case 't': return "TUPLE";
    case 0x85: return "TUPLE1";
    case 0x86: return "TUPLE2";
    case 0x87: return "TUPLE3";
    case ']': return "EMPTY_LIST";
    case 'l': return "LIST";
    case 'a': return "APPEND";
    case 'e': return "APPENDS";
    case '}': return "EMPTY_DICT";
    case 'd': return "DICT";
    case 's': return "SETITEM";
    case 'u': return "SETITEMS";
    case 'c': return "GLOBAL";
    case 'R': return "REDUCE";
    case 0x81: return "NEWOBJ";
    case 'b': return "BUILD";
    case 'Q': return "BINPERSID";
    case 'q': return "BINPUT";
    case 'r': return "LONG_BINPUT";
    case 'h': return "BINGET";
    case 'j': return "LONG_BINGET";
    default: return "?";
    }
}

/* "an int", "a tensor", ... for messages. */
static const char *kind_name(ox_pv_kind k) {
    static const char *names[] = {"None",      "a bool",   "an int",  "a float",   "a str",
                                  "a tuple",   "a list",   "a dict",  "an object", "a tensor",
                                  "a storage", "a device", "a global"};
    return (unsigned)k < sizeof names / sizeof *names ? names[k] : "?";
}

/* An error at the current opcode: "what: offset N (OPNAME): message". */
__attribute__((format(printf, 3, 4))) static ox_status fail(struct machine *m, ox_status code,
                                                            const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return ox_err(code, "%s: offset %zu (%s): %s", m->what, m->op_pos, op_name(m->op), msg);
}

/* ---- values ---------------------------------------------------------------------------- */

static void *alloc(struct machine *m, size_t n) {
    if (n > OX_PICKLE_MAX_BYTES - m->p->bytes) {
        fail(m, OX_E_NOMEM, "the values need more than %zu bytes", (size_t)OX_PICKLE_MAX_BYTES);
        return NULL;
    }
    void *q = ox_arena_alloc(&m->p->arena, n);
    if (!q) {
        fail(m, OX_E_NOMEM, "out of memory");
        return NULL;
    }
    m->p->bytes += n;
    return q;
}

static struct pv *new_pv(struct machine *m, ox_pv_kind kind) {
    struct pv *v = alloc(m, sizeof *v);
    if (v) v->v.kind = kind;
    return v;
}

static struct pv *as_pv(struct ox_pv *v) {
    return (struct pv *)v;
}

/* Add an item to a LIST, or a key or value to a DICT, growing its room by doubling. */
static ox_status add_item(struct machine *m, struct ox_pv *c, struct ox_pv *item) {
    struct pv *x = as_pv(c);
    if (x->used == x->cap) {
        if (x->cap > (1 << 28)) return fail(m, OX_E_NOMEM, "a container of more than 2^28 items");
        int cap = x->cap ? 2 * x->cap : 8;
        struct ox_pv **items = alloc(m, (size_t)cap * sizeof *items);
        if (!items) return OX_E_NOMEM;
        if (x->used) memcpy(items, c->items, (size_t)x->used * sizeof *items);
        c->items = items;
        x->cap = cap;
    }
    c->items[x->used++] = item;
    c->n = c->kind == OX_PV_DICT ? x->used / 2 : x->used;
    return OX_OK;
}

/* ---- the stack ------------------------------------------------------------------------- */

static int fence(const struct machine *m) {
    return m->n_marks ? m->marks[m->n_marks - 1] : 0;
}

static ox_status push(struct machine *m, struct ox_pv *v) {
    if (m->sp == OX_PICKLE_MAX_DEPTH)
        return fail(m, OX_E_INVALID, "stack deeper than %d", OX_PICKLE_MAX_DEPTH);
    m->stack[m->sp++] = v;
    return OX_OK;
}

static ox_status pop(struct machine *m, struct ox_pv **v) {
    if (m->sp <= fence(m)) return fail(m, OX_E_INVALID, "stack underflow");
    *v = m->stack[--m->sp];
    return OX_OK;
}

/* The top of the stack, left there. */
static ox_status top(struct machine *m, struct ox_pv **v) {
    if (m->sp <= fence(m)) return fail(m, OX_E_INVALID, "stack underflow");
    *v = m->stack[m->sp - 1];
    return OX_OK;
}

/* Push a new empty value of this kind. */
static ox_status push_new(struct machine *m, ox_pv_kind kind) {
    struct pv *v = new_pv(m, kind);
    return v ? push(m, &v->v) : OX_E_NOMEM;
}

/* Pop the last MARK: the items above it are stack[*start .. sp). */
static ox_status pop_mark(struct machine *m, int *start) {
    if (m->n_marks == 0) return fail(m, OX_E_INVALID, "no MARK on the stack");
    *start = m->marks[--m->n_marks];
    return OX_OK;
}

/* A new TUPLE, LIST or DICT of stack[start .. sp), which it pops. */
static ox_status collect(struct machine *m, ox_pv_kind kind, int start) {
    int n = m->sp - start;
    if (kind == OX_PV_DICT && n % 2)
        return fail(m, OX_E_INVALID, "odd number of items (%d) for a dict", n);
    struct pv *v = new_pv(m, kind);
    if (!v) return OX_E_NOMEM;
    if (n) {
        v->v.items = alloc(m, (size_t)n * sizeof *v->v.items);
        if (!v->v.items) return OX_E_NOMEM;
        memcpy(v->v.items, m->stack + start, (size_t)n * sizeof *v->v.items);
    }
    v->v.n = kind == OX_PV_DICT ? n / 2 : n;
    v->used = v->cap = n;
    m->sp = start;
    return push(m, &v->v);
}

/* Items stack[start .. sp) into the LIST or DICT at stack[start - 1]; pops them. */
static ox_status extend(struct machine *m, ox_pv_kind kind, int start) {
    if (start - 1 < fence(m)) return fail(m, OX_E_INVALID, "stack underflow");
    struct ox_pv *c = m->stack[start - 1];
    if (c->kind != kind)
        return fail(m, OX_E_INVALID, "expects %s below the MARK, not %s", kind_name(kind),
                    kind_name(c->kind));
    int n = m->sp - start;
    if (kind == OX_PV_DICT && n % 2)
        return fail(m, OX_E_INVALID, "odd number of items (%d) for a dict", n);
    for (int i = 0; i < n; i++) {
        ox_status st = add_item(m, c, m->stack[start + i]);
        if (st) return st;
    }
    m->sp = start;
    return OX_OK;
}

/* ---- input ----------------------------------------------------------------------------- */

static ox_status need(struct machine *m, size_t n) {
    if (n > m->len - m->pos)
        return fail(m, OX_E_INVALID, "needs %zu bytes, %zu left in the pickle", n, m->len - m->pos);
    return OX_OK;
}

static uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* One '\n'-terminated line of a GLOBAL: printable ASCII, not empty. */
static ox_status read_line(struct machine *m, const char **s, size_t *n) {
    size_t avail = m->len - m->pos;
    const uint8_t *p = m->buf + m->pos;
    const uint8_t *nl = memchr(p, '\n', avail < MAX_GLOBAL_LINE ? avail : MAX_GLOBAL_LINE);
    if (!nl) return fail(m, OX_E_INVALID, "unterminated or overlong module/name line");
    *n = (size_t)(nl - p);
    for (size_t i = 0; i < *n; i++)
        if (p[i] < 0x21 || p[i] > 0x7e)
            return fail(m, OX_E_INVALID, "byte 0x%02x in a module/name line", p[i]);
    if (*n == 0) return fail(m, OX_E_INVALID, "empty module/name line");
    *s = (const char *)p;
    m->pos += *n + 1;
    return OX_OK;
}

/* ---- globals --------------------------------------------------------------------------- */

static const struct {
    const char *name;
    ox_dtype dtype;
} storage_types[] = {
    {"ByteStorage", OX_UINT8},
    {"CharStorage", OX_INT8},
    {"ShortStorage", OX_INT16},
    {"IntStorage", OX_INT32},
    {"LongStorage", OX_INT64},
    {"HalfStorage", OX_FLOAT16},
    {"FloatStorage", OX_FLOAT},
    {"DoubleStorage", OX_DOUBLE},
    {"ComplexFloatStorage", OX_COMPLEX64},
    {"ComplexDoubleStorage", OX_COMPLEX128},
    {"BoolStorage", OX_BOOL},
    {"BFloat16Storage", OX_BFLOAT16},
};

static bool is(const char *s, size_t n, const char *lit) {
    return strlen(lit) == n && memcmp(s, lit, n) == 0;
}

static bool starts(const char *s, size_t n, const char *lit) {
    size_t k = strlen(lit);
    return n >= k && memcmp(s, lit, k) == 0;
}

/* GLOBAL: look the name up in the allowed list; anything else fails here, naming it. */
static ox_status op_global(struct machine *m) {
    const char *mod, *name;
    size_t nm, nn;
    ox_status st = read_line(m, &mod, &nm);
    if (st == OX_OK) st = read_line(m, &name, &nn);
    if (st) return st;
    struct pv *g = new_pv(m, OX_PV_GLOBAL);
    if (!g) return OX_E_NOMEM;
    char *full = alloc(m, nm + nn + 2);
    if (!full) return OX_E_NOMEM;
    memcpy(full, mod, nm);
    full[nm] = '.';
    memcpy(full + nm + 1, name, nn);
    g->v.s = full;
    g->v.s_len = nm + nn + 1;

    if (is(mod, nm, "__torch__") || starts(mod, nm, "__torch__.")) {
        if (is(mod, nm, "__torch__.torch.classes") || starts(mod, nm, "__torch__.torch.classes."))
            return fail(m, OX_E_UNSUPPORTED,
                        "global '%s' is a custom C++ class (torch.classes), which is not supported",
                        full);
        g->global = G_CLASS;
    } else if (is(mod, nm, "torch._utils") && is(name, nn, "_rebuild_tensor_v2")) {
        g->global = G_REBUILD_TENSOR;
    } else if (is(mod, nm, "torch._utils") && is(name, nn, "_rebuild_qtensor")) {
        return fail(m, OX_E_UNSUPPORTED, "global '%s': quantized tensors are not supported", full);
    } else if (is(mod, nm, "torch") && is(name, nn, "device")) {
        g->global = G_DEVICE;
    } else if (is(mod, nm, "collections") && is(name, nn, "OrderedDict")) {
        g->global = G_ORDERED_DICT;
    } else if (is(mod, nm, "torch.jit._pickle") && is(name, nn, "build_intlist")) {
        g->global = G_INTLIST;
    } else if (is(mod, nm, "torch.jit._pickle") && is(name, nn, "build_doublelist")) {
        g->global = G_DOUBLELIST;
    } else if (is(mod, nm, "torch.jit._pickle") && is(name, nn, "build_boollist")) {
        g->global = G_BOOLLIST;
    } else if (is(mod, nm, "torch.jit._pickle") && is(name, nn, "build_tensorlist")) {
        g->global = G_TENSORLIST;
    } else if (is(mod, nm, "torch.jit._pickle") && is(name, nn, "restore_type_tag")) {
        g->global = G_RESTORE_TYPE_TAG;
    } else {
        bool found = false;
        if (is(mod, nm, "torch"))
            for (size_t i = 0; i < sizeof storage_types / sizeof *storage_types; i++)
                if (is(name, nn, storage_types[i].name)) {
                    g->global = G_STORAGE_TYPE;
                    g->storage_dtype = storage_types[i].dtype;
                    found = true;
                }
        if (!found && is(mod, nm, "torch") && starts(name, nn, "Q") && nn > 7 &&
            memcmp(name + nn - 7, "Storage", 7) == 0)
            return fail(m, OX_E_UNSUPPORTED, "global '%s': quantized tensors are not supported",
                        full);
        if (!found)
            return fail(m, OX_E_UNSUPPORTED,
                        "global '%s' is not allowed (a TorchScript pickle only names __torch__ "
                        "classes, tensors, storages and typed containers; nothing is run)",
                        full);
    }
    return push(m, &g->v);
}

static bool is_str(const struct ox_pv *v, const char *lit) {
    return v->kind == OX_PV_STR && is(v->s, v->s_len, lit);
}

/* A string usable as a storage key or location: not empty, at most 256 bytes, printable
 * ASCII without '/' (keys name records). */
static bool is_name(const struct ox_pv *v) {
    if (v->kind != OX_PV_STR || v->s_len == 0 || v->s_len > 256) return false;
    for (size_t i = 0; i < v->s_len; i++)
        if (v->s[i] < 0x21 || v->s[i] > 0x7e || v->s[i] == '/') return false;
    return true;
}

/* BINPERSID: ("storage", torch.<X>Storage, key, location, numel) → a STORAGE. */
static ox_status op_persid(struct machine *m) {
    struct ox_pv *pid = NULL;
    ox_status st = pop(m, &pid);
    if (st) return st;
    if (pid->kind != OX_PV_TUPLE || pid->n != 5 || !is_str(pid->items[0], "storage"))
        return fail(m, OX_E_INVALID,
                    "persistent id is not a (\"storage\", type, key, location, "
                    "numel) tuple");
    struct ox_pv **it = pid->items;
    if (it[1]->kind != OX_PV_GLOBAL || as_pv(it[1])->global != G_STORAGE_TYPE)
        return fail(m, OX_E_INVALID,
                    "persistent id: the storage type is %s, not a torch "
                    "<X>Storage class",
                    kind_name(it[1]->kind));
    if (!is_name(it[2]) || !is_name(it[3]))
        return fail(m, OX_E_INVALID,
                    "persistent id: the key and location must be short "
                    "printable strings without '/'");
    ox_dtype dt = as_pv(it[1])->storage_dtype;
    size_t bytes;
    if (it[4]->kind != OX_PV_INT || it[4]->i < 0 || (uint64_t)it[4]->i > SIZE_MAX ||
        !ox_mul_size((size_t)it[4]->i, ox_dtype_size(dt), &bytes) || bytes > INT64_MAX)
        return fail(m, OX_E_INVALID, "persistent id: bad element count for storage '%s'", it[2]->s);
    struct pv *s = new_pv(m, OX_PV_STORAGE);
    if (!s) return OX_E_NOMEM;
    s->v.tensor.storage = (struct ox_pv_storage){
        .key = it[2]->s, .dtype = dt, .numel = it[4]->i, .location = it[3]->s};
    return push(m, &s->v);
}

/* A tuple or list of ints into out[rank]. */
static bool int_seq(const struct ox_pv *v, int64_t *out, int *rank) {
    if ((v->kind != OX_PV_TUPLE && v->kind != OX_PV_LIST) || v->n > OX_MAX_RANK) return false;
    for (int i = 0; i < v->n; i++) {
        if (v->items[i]->kind != OX_PV_INT) return false;
        out[i] = v->items[i]->i;
    }
    *rank = v->n;
    return true;
}

/* _rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks[, metadata]). */
static ox_status rebuild_tensor(struct machine *m, const struct ox_pv *args) {
    if (args->n != 6 && args->n != 7)
        return fail(m, OX_E_INVALID, "_rebuild_tensor_v2 takes 6 arguments, not %d", args->n);
    struct ox_pv **a = args->items;
    struct pv *t = new_pv(m, OX_PV_TENSOR);
    if (!t) return OX_E_NOMEM;
    struct ox_pv_tensor *x = &t->v.tensor;
    int rank_stride;
    if (a[0]->kind != OX_PV_STORAGE)
        return fail(m, OX_E_INVALID, "_rebuild_tensor_v2: the storage is %s",
                    kind_name(a[0]->kind));
    x->storage = a[0]->tensor.storage;
    if (a[1]->kind != OX_PV_INT || a[1]->i < 0)
        return fail(m, OX_E_INVALID, "_rebuild_tensor_v2: bad storage offset");
    x->offset = a[1]->i;
    if (!int_seq(a[2], x->size, &x->rank) || !int_seq(a[3], x->stride, &rank_stride) ||
        rank_stride != x->rank)
        return fail(m, OX_E_INVALID,
                    "_rebuild_tensor_v2: size and stride must be int tuples of one length, at "
                    "most %d",
                    OX_MAX_RANK);
    if (a[4]->kind != OX_PV_BOOL)
        return fail(m, OX_E_INVALID, "_rebuild_tensor_v2: requires_grad is %s",
                    kind_name(a[4]->kind));
    x->requires_grad = a[4]->b;
    /* the view must lie inside the storage: offset + sum((size-1)*stride) < numel */
    int64_t last = x->offset;
    bool empty = false, ok = true;
    for (int i = 0; i < x->rank; i++) {
        if (x->size[i] < 0 || x->stride[i] < 0) ok = false;
        if (x->size[i] == 0) empty = true;
    }
    for (int i = 0; ok && !empty && i < x->rank; i++) {
        int64_t step;
        if (__builtin_mul_overflow(x->size[i] - 1, x->stride[i], &step) ||
            __builtin_add_overflow(last, step, &last))
            ok = false;
    }
    if (!ok || (empty ? x->offset > x->storage.numel : last >= x->storage.numel))
        return fail(m, OX_E_INVALID,
                    "tensor view (offset %lld, rank %d) lies outside storage '%s' of %lld "
                    "elements",
                    (long long)x->offset, x->rank, x->storage.key, (long long)x->storage.numel);
    return push(m, &t->v);
}

/* A typed list: the inner list, whose items must all be of `kind`. */
static ox_status build_list(struct machine *m, const struct ox_pv *args, ox_pv_kind kind,
                            const char *fn) {
    if (args->n != 1 || args->items[0]->kind != OX_PV_LIST)
        return fail(m, OX_E_INVALID, "%s takes one list", fn);
    struct ox_pv *l = args->items[0];
    for (int i = 0; i < l->n; i++)
        if (l->items[i]->kind != kind)
            return fail(m, OX_E_INVALID, "%s: item %d is %s, not %s", fn, i,
                        kind_name(l->items[i]->kind), kind_name(kind));
    return push(m, l);
}

/* REDUCE: pop the argument tuple and the callable (an allowed GLOBAL); push the result. */
static ox_status op_reduce(struct machine *m) {
    struct ox_pv *args = NULL, *fn = NULL;
    ox_status st = pop(m, &args);
    if (st == OX_OK) st = pop(m, &fn);
    if (st) return st;
    if (fn->kind != OX_PV_GLOBAL) return fail(m, OX_E_INVALID, "calls %s", kind_name(fn->kind));
    if (args->kind != OX_PV_TUPLE)
        return fail(m, OX_E_INVALID, "%s: the arguments are %s, not a tuple", fn->s,
                    kind_name(args->kind));
    struct pv *r;
    switch (as_pv(fn)->global) {
    case G_REBUILD_TENSOR: return rebuild_tensor(m, args);
    case G_INTLIST: return build_list(m, args, OX_PV_INT, "build_intlist");
    case G_DOUBLELIST: return build_list(m, args, OX_PV_FLOAT, "build_doublelist");
    case G_BOOLLIST: return build_list(m, args, OX_PV_BOOL, "build_boollist");
    case G_TENSORLIST: return build_list(m, args, OX_PV_TENSOR, "build_tensorlist");
    case G_ORDERED_DICT:
        if (args->n != 0) return fail(m, OX_E_INVALID, "OrderedDict takes no arguments here");
        return push_new(m, OX_PV_DICT);
    case G_RESTORE_TYPE_TAG:
        if (args->n != 2 || args->items[1]->kind != OX_PV_STR)
            return fail(m, OX_E_INVALID, "restore_type_tag takes a value and a type string");
        if (args->items[0]->kind != OX_PV_LIST && args->items[0]->kind != OX_PV_DICT)
            return fail(m, OX_E_INVALID, "restore_type_tag on %s, not a list or dict",
                        kind_name(args->items[0]->kind));
        args->items[0]->type_tag = args->items[1]->s;
        return push(m, args->items[0]);
    case G_DEVICE:
        if (args->n < 1 || args->n > 2 || !is_name(args->items[0]) ||
            (args->n == 2 && args->items[1]->kind != OX_PV_INT))
            return fail(m, OX_E_INVALID, "torch.device takes a device string");
        r = new_pv(m, OX_PV_DEVICE);
        if (!r) return OX_E_NOMEM;
        r->v.s = args->items[0]->s;
        if (args->n == 2) { /* ("cuda", 0) → "cuda:0" */
            char *s = alloc(m, args->items[0]->s_len + 24);
            if (!s) return OX_E_NOMEM;
            snprintf(s, args->items[0]->s_len + 24, "%s:%lld", args->items[0]->s,
                     (long long)args->items[1]->i);
            r->v.s = s;
        }
        r->v.s_len = strlen(r->v.s);
        return push(m, &r->v);
    case G_CLASS:
    case G_STORAGE_TYPE: break;
    }
    return fail(m, OX_E_INVALID, "'%s' cannot be called", fn->s);
}

/* NEWOBJ: a __torch__ class and () → an OBJECT without state. */
static ox_status op_newobj(struct machine *m) {
    struct ox_pv *args = NULL, *cls = NULL;
    ox_status st = pop(m, &args);
    if (st == OX_OK) st = pop(m, &cls);
    if (st) return st;
    if (cls->kind != OX_PV_GLOBAL || as_pv(cls)->global != G_CLASS)
        return fail(m, OX_E_INVALID, "the class is %s, not a __torch__ class",
                    cls->kind == OX_PV_GLOBAL ? cls->s : kind_name(cls->kind));
    if (args->kind != OX_PV_TUPLE || args->n != 0)
        return fail(m, OX_E_INVALID, "%s: expects no arguments", cls->s);
    struct pv *o = new_pv(m, OX_PV_OBJECT);
    if (!o) return OX_E_NOMEM;
    o->v.cls = cls->s;
    return push(m, &o->v);
}

/* BUILD: pop the state, set it on the OBJECT (or OrderedDict) below. */
static ox_status op_build(struct machine *m) {
    struct ox_pv *state = NULL, *obj = NULL;
    ox_status st = pop(m, &state);
    if (st == OX_OK) st = top(m, &obj);
    if (st) return st;
    if (obj->kind != OX_PV_OBJECT && obj->kind != OX_PV_DICT)
        return fail(m, OX_E_INVALID, "sets the state of %s", kind_name(obj->kind));
    if (obj->state)
        return fail(m, OX_E_INVALID, "sets the state of %s twice",
                    obj->kind == OX_PV_OBJECT ? obj->cls : "a dict");
    obj->state = state;
    return OX_OK;
}

/* ---- memo ------------------------------------------------------------------------------ */

static ox_status memo_put(struct machine *m, uint32_t idx) {
    struct ox_pv *v = NULL;
    ox_status st = top(m, &v);
    if (st) return st;
    /* writers number memo entries from 0, one per PUT, so an index never reaches the
     * pickle's length: this bounds the table by the input */
    if (idx >= OX_PICKLE_MAX_MEMO || idx >= m->len)
        return fail(m, OX_E_INVALID, "memo index %u past the limit (%d, and the pickle's size)",
                    idx, OX_PICKLE_MAX_MEMO);
    if (idx >= m->memo_cap) {
        size_t cap = m->memo_cap ? m->memo_cap : 64;
        while (cap <= idx) cap *= 2;
        struct ox_pv **memo = realloc(m->memo, cap * sizeof *memo);
        if (!memo) return fail(m, OX_E_NOMEM, "out of memory");
        memset(memo + m->memo_cap, 0, (cap - m->memo_cap) * sizeof *memo);
        m->memo = memo;
        m->memo_cap = cap;
    }
    m->memo[idx] = v;
    return OX_OK;
}

static ox_status memo_get(struct machine *m, uint32_t idx) {
    if (idx >= m->memo_cap || !m->memo[idx])
        return fail(m, OX_E_INVALID, "memo index %u was never set", idx);
    return push(m, m->memo[idx]);
}

/* ---- the loop -------------------------------------------------------------------------- */

static ox_status scalar(struct machine *m, ox_pv_kind kind, int64_t i, double f) {
    struct pv *v = new_pv(m, kind);
    if (!v) return OX_E_NOMEM;
    v->v.i = i;
    v->v.b = i != 0;
    v->v.f = f;
    return push(m, &v->v);
}

static ox_status op_tuple(struct machine *m, int n) {
    if (m->sp - fence(m) < n) return fail(m, OX_E_INVALID, "stack underflow");
    return collect(m, OX_PV_TUPLE, m->sp - n);
}

/* One opcode at m->pos. *done is set by STOP. */
static ox_status step(struct machine *m, bool *done) {
    m->op_pos = m->pos;
    m->op = m->buf[m->pos++];
    ox_status st;
    struct ox_pv *a = NULL, *b = NULL, *c = NULL;
    int start = 0;
    const uint8_t *p = m->buf + m->pos;
    switch (m->op) {
    case 0x80: /* PROTO */
        if ((st = need(m, 1))) return st;
        m->pos++;
        if (p[0] != 2)
            return fail(m, OX_E_UNSUPPORTED, "pickle protocol %u; TorchScript writes protocol 2",
                        p[0]);
        return OX_OK;
    case '.': /* STOP */
        if (m->n_marks || m->sp != 1)
            return fail(m, OX_E_INVALID, "ends with %d values and %d marks on the stack", m->sp,
                        m->n_marks);
        *done = true;
        return OX_OK;
    case '(':
        if (m->n_marks == OX_PICKLE_MAX_DEPTH)
            return fail(m, OX_E_INVALID, "more than %d marks", OX_PICKLE_MAX_DEPTH);
        m->marks[m->n_marks++] = m->sp;
        return OX_OK;
    case 'N': return scalar(m, OX_PV_NONE, 0, 0);
    case 0x88: return scalar(m, OX_PV_BOOL, 1, 0);
    case 0x89: return scalar(m, OX_PV_BOOL, 0, 0);
    case 'K':
        if ((st = need(m, 1))) return st;
        m->pos += 1;
        return scalar(m, OX_PV_INT, p[0], 0);
    case 'M':
        if ((st = need(m, 2))) return st;
        m->pos += 2;
        return scalar(m, OX_PV_INT, p[0] | p[1] << 8, 0);
    case 'J':
        if ((st = need(m, 4))) return st;
        m->pos += 4;
        return scalar(m, OX_PV_INT, (int32_t)rd32(p), 0);
    case 0x8a: { /* LONG1: n, then n bytes of two's complement, little-endian */
        if ((st = need(m, 1))) return st;
        unsigned n = p[0];
        if (n > 8)
            return fail(m, OX_E_UNSUPPORTED, "an integer of %u bytes does not fit in 64 bits", n);
        if ((st = need(m, 1 + n))) return st;
        m->pos += 1 + n;
        uint64_t u = 0;
        for (unsigned i = 0; i < n; i++) u |= (uint64_t)p[1 + i] << (8 * i);
        if (n && n < 8 && (p[n] & 0x80)) u |= ~(uint64_t)0 << (8 * n); /* sign */
        int64_t i;
        memcpy(&i, &u, sizeof i);
        return scalar(m, OX_PV_INT, i, 0);
    }
    case 'G': { /* BINFLOAT: big-endian IEEE double */
        if ((st = need(m, 8))) return st;
        m->pos += 8;
        uint64_t u = 0;
        for (int i = 0; i < 8; i++) u = u << 8 | p[i];
        double f;
        memcpy(&f, &u, sizeof f);
        return scalar(m, OX_PV_FLOAT, 0, f);
    }
    case 'X': { /* BINUNICODE: u32 length, UTF-8 */
        if ((st = need(m, 4))) return st;
        uint32_t n = rd32(p);
        m->pos += 4;
        if (n > m->max_string) {
            ox_err_limit("string_length", m->max_string, "a string of %u bytes", n);
            return fail(m, OX_E_LIMIT, "%s", ox_errmsg());
        }
        if ((st = need(m, n))) return st;
        struct pv *v = new_pv(m, OX_PV_STR);
        char *s = v ? alloc(m, (size_t)n + 1) : NULL;
        if (!s) return OX_E_NOMEM;
        memcpy(s, p + 4, n);
        s[n] = 0;
        v->v.s = s;
        v->v.s_len = n;
        m->pos += n;
        return push(m, &v->v);
    }
    case ')': return op_tuple(m, 0);
    case 0x85: return op_tuple(m, 1);
    case 0x86: return op_tuple(m, 2);
    case 0x87: return op_tuple(m, 3);
    case 't':
        if ((st = pop_mark(m, &start))) return st;
        return collect(m, OX_PV_TUPLE, start);
    case ']': return push_new(m, OX_PV_LIST);
    case '}': return push_new(m, OX_PV_DICT);
    case 'l':
        if ((st = pop_mark(m, &start))) return st;
        return collect(m, OX_PV_LIST, start);
    case 'd':
        if ((st = pop_mark(m, &start))) return st;
        return collect(m, OX_PV_DICT, start);
    case 'e':
        if ((st = pop_mark(m, &start))) return st;
        return extend(m, OX_PV_LIST, start);
    case 'u':
        if ((st = pop_mark(m, &start))) return st;
        return extend(m, OX_PV_DICT, start);
    case 'a':
        if ((st = pop(m, &a)) || (st = top(m, &b))) return st;
        if (b->kind != OX_PV_LIST)
            return fail(m, OX_E_INVALID, "appends to %s", kind_name(b->kind));
        return add_item(m, b, a);
    case 's':
        if ((st = pop(m, &a)) || (st = pop(m, &b)) || (st = top(m, &c))) return st;
        if (c->kind != OX_PV_DICT)
            return fail(m, OX_E_INVALID, "sets an item of %s", kind_name(c->kind));
        if ((st = add_item(m, c, b))) return st;
        return add_item(m, c, a);
    case 'c': return op_global(m);
    case 'R': return op_reduce(m);
    case 0x81: return op_newobj(m);
    case 'b': return op_build(m);
    case 'Q': return op_persid(m);
    case 'q':
        if ((st = need(m, 1))) return st;
        m->pos += 1;
        return memo_put(m, p[0]);
    case 'r':
        if ((st = need(m, 4))) return st;
        m->pos += 4;
        return memo_put(m, rd32(p));
    case 'h':
        if ((st = need(m, 1))) return st;
        m->pos += 1;
        return memo_get(m, p[0]);
    case 'j':
        if ((st = need(m, 4))) return st;
        m->pos += 4;
        return memo_get(m, rd32(p));
    default:
        return ox_err(OX_E_INVALID, "%s: offset %zu: unknown or unsupported opcode 0x%02x", m->what,
                      m->op_pos, m->op);
    }
}

/* ---- the result ------------------------------------------------------------------------ */

/* Nesting of v (1 for a leaf), or -1 when it holds itself (memo references make cycles
 * possible) or nests deeper than OX_PICKLE_MAX_DEPTH. Shared values are walked once. */
static int height(struct ox_pv *v, int depth) {
    struct pv *x = as_pv(v);
    if (x->color == 2) return x->height;
    if (x->color == 1 || depth > OX_PICKLE_MAX_DEPTH) return -1;
    x->color = 1;
    int h = 0, n = v->kind == OX_PV_DICT ? 2 * v->n : v->n;
    if (v->kind == OX_PV_TUPLE || v->kind == OX_PV_LIST || v->kind == OX_PV_DICT)
        for (int i = 0; i < n && h >= 0; i++) {
            int hi = height(v->items[i], depth + 1);
            h = hi < 0 ? -1 : hi > h ? hi : h;
        }
    if (v->state && h >= 0) {
        int hs = height(v->state, depth + 1);
        h = hs < 0 ? -1 : hs > h ? hs : h;
    }
    if (h < 0 || h + 1 > OX_PICKLE_MAX_DEPTH) return -1;
    x->color = 2;
    x->height = h + 1;
    return x->height;
}

ox_status ox_pickle_load(const uint8_t *buf, size_t len, const char *what, struct ox_pickle **out,
                         struct ox_pv **root) {
    return ox_pickle_load_with(buf, len, what, NULL, out, root);
}

ox_status ox_pickle_load_with(const uint8_t *buf, size_t len, const char *what,
                              const ox_limits *lim, struct ox_pickle **out, struct ox_pv **root) {
    *out = NULL;
    *root = NULL;
    if (!what) what = "pickle";
    if (!buf) len = 0;
    struct machine *m = calloc(1, sizeof *m);
    struct ox_pickle *p = calloc(1, sizeof *p);
    ox_status st = OX_OK;
    if (!m || !p) {
        st = ox_err(OX_E_NOMEM, "%s: out of memory", what);
        goto fail_free;
    }
    *m = (struct machine){.p = p,
                          .buf = buf,
                          .len = len,
                          .what = what,
                          .max_string = lim && lim->string_length
                                            ? lim->string_length
                                            : ox_limits_default()->string_length};
    if (len < 2 || buf[0] != 0x80) {
        st =
            ox_err(OX_E_INVALID, "%s: does not start with PROTO 2 (not a protocol 2 pickle)", what);
        goto fail_free;
    }
    bool done = false;
    while (!done) {
        if (m->pos == m->len) {
            st = ox_err(OX_E_INVALID, "%s: ends at offset %zu without STOP", what, m->len);
            goto fail_free;
        }
        st = step(m, &done);
        if (st) goto fail_free;
    }
    if (height(m->stack[0], 1) < 0) {
        st = ox_err(OX_E_INVALID, "%s: the result holds itself or nests deeper than %d levels",
                    what, OX_PICKLE_MAX_DEPTH);
        goto fail_free;
    }
    *root = m->stack[0];
    *out = p;
    free(m->memo);
    free(m);
    return OX_OK;

fail_free:
    if (m) free(m->memo);
    free(m);
    ox_pickle_free(p);
    return st;
}

void ox_pickle_free(struct ox_pickle *p) {
    if (!p) return;
    ox_arena_free(&p->arena);
    free(p);
}

struct ox_pv *ox_pv_get(const struct ox_pv *d, const char *key) {
    if (!d || d->kind != OX_PV_DICT || !key) return NULL;
    size_t n = strlen(key);
    for (int i = d->n - 1; i >= 0; i--) { /* the last one set wins, as in Python */
        const struct ox_pv *k = d->items[2 * i];
        if (k->kind == OX_PV_STR && k->s_len == n && memcmp(k->s, key, n) == 0)
            return d->items[2 * i + 1];
    }
    return NULL;
}
