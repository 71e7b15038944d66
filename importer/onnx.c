/* ModelProto → IR. See importer/onnx.h for what the importer does with a model.
 *
 * The import runs in two passes per graph: first every name the graph defines (inputs,
 * initializers, node outputs) becomes a value, then nodes are built and their inputs
 * resolved, so that nodes may be listed in any order and subgraphs may read names that an
 * enclosing graph defines further down. Names are resolved through a chain of scopes: a
 * graph, the body of an inlined function (whose names map to fresh values of the graph it is
 * inlined into), and the scopes around a subgraph.
 */
#include "importer/onnx.h"
#include "kernels/op.h"
#include "onnx/onnx.pb-c.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Field numbers of onnx.proto newer than the 1.12 proto protoc-c was given: read from the
 * unknown fields protobuf-c keeps. */
#define NODE_OVERLOAD_FIELD            8  /* NodeProto.overload (string) */
#define FUNCTION_ATTRIBUTE_PROTO_FIELD 11 /* FunctionProto.attribute_proto (AttributeProto) */
#define FUNCTION_OVERLOAD_FIELD        13 /* FunctionProto.overload (string) */

/* Counts read from the file that are used as ints. */
#define MAX_COUNT (1 << 24)

static const char *str(const char *s) {
    return s ? s : "";
}

/* "ai.onnx" is the default domain, spelled "". */
static const char *norm_domain(const char *d) {
    return !d || strcmp(d, "ai.onnx") == 0 ? "" : d;
}

/* ---- protobuf pre-scan: nesting depth and where raw_data lies -------------------------- */

/* Where the raw_data bytes of initializer i of the main graph lie in the buffer. */
struct raw_loc {
    size_t off, len; /* len SIZE_MAX: none seen */
};

struct scan {
    const uint8_t *buf;
    bool record;
    struct raw_loc *locs;
    size_t n_locs, cap_locs;
    bool locs_failed; /* out of memory: no borrowing */
    uint32_t f_graph, f_init, f_raw;
    int max_depth;       /* of message nesting (0: OX_ONNX_MAX_MSG_DEPTH) */
    uint64_t max_string; /* bytes of a string or bytes field but raw_data (0: the default) */
    /* the string over max_string (SCAN_STRING) */
    const char *long_msg, *long_field;
    uint64_t long_len;
};

enum { ROLE_NONE, ROLE_MODEL, ROLE_GRAPH, ROLE_INIT };
enum { SCAN_OK, SCAN_MALFORMED, SCAN_DEEP, SCAN_STRING };

/* Message nesting allowed for a subgraph nesting limit: three levels per subgraph (graph,
 * node, attribute) and room for what a graph holds. */
static int msg_depth_for(int subgraph_depth) {
    int d = 3 * subgraph_depth + 64;
    return d > OX_ONNX_MAX_MSG_DEPTH ? d : OX_ONNX_MAX_MSG_DEPTH;
}

static bool get_varint(const uint8_t *b, size_t end, size_t *pos, uint64_t *v) {
    uint64_t r = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (*pos >= end) return false;
        uint8_t c = b[(*pos)++];
        r |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) {
            *v = r;
            return true;
        }
    }
    return false;
}

static int scan_msg(struct scan *s, const ProtobufCMessageDescriptor *d, size_t pos, size_t end,
                    int depth, int role, size_t init_idx) {
    if (depth > (s->max_depth ? s->max_depth : OX_ONNX_MAX_MSG_DEPTH)) return SCAN_DEEP;
    while (pos < end) {
        uint64_t tag, v;
        if (!get_varint(s->buf, end, &pos, &tag)) return SCAN_MALFORMED;
        uint64_t field = tag >> 3;
        if (field == 0 || field > 0x1fffffff) return SCAN_MALFORMED;
        switch (tag & 7) {
        case 0:
            if (!get_varint(s->buf, end, &pos, &v)) return SCAN_MALFORMED;
            break;
        case 1:
            if (end - pos < 8) return SCAN_MALFORMED;
            pos += 8;
            break;
        case 5:
            if (end - pos < 4) return SCAN_MALFORMED;
            pos += 4;
            break;
        case 2: {
            if (!get_varint(s->buf, end, &pos, &v) || v > end - pos) return SCAN_MALFORMED;
            size_t start = pos;
            pos += (size_t)v;
            if (s->record && role == ROLE_INIT && field == s->f_raw && !s->locs_failed)
                s->locs[init_idx] = (struct raw_loc){start, (size_t)v};
            const ProtobufCFieldDescriptor *f =
                d ? protobuf_c_message_descriptor_get_field(d, (unsigned)field) : NULL;
            if (f && (f->type == PROTOBUF_C_TYPE_STRING || f->type == PROTOBUF_C_TYPE_BYTES)) {
                uint64_t max = s->max_string ? s->max_string : ox_limits_default()->string_length;
                bool is_raw =
                    d == &onnx__tensor_proto__descriptor && strcmp(f->name, "raw_data") == 0;
                if (v > max && !is_raw) {
                    s->long_msg = d->short_name;
                    s->long_field = f->name;
                    s->long_len = v;
                    return SCAN_STRING;
                }
                break;
            }
            if (!f || f->type != PROTOBUF_C_TYPE_MESSAGE) break;
            int sub = ROLE_NONE;
            size_t idx = 0;
            if (s->record && role == ROLE_MODEL && field == s->f_graph) {
                sub = ROLE_GRAPH;
            } else if (s->record && role == ROLE_GRAPH && field == s->f_init && !s->locs_failed) {
                if (s->n_locs == s->cap_locs) {
                    size_t cap = s->cap_locs ? s->cap_locs * 2 : 64;
                    struct raw_loc *l = realloc(s->locs, sizeof *l * cap);
                    if (!l) {
                        s->locs_failed = true;
                        break;
                    }
                    s->locs = l;
                    s->cap_locs = cap;
                }
                idx = s->n_locs++;
                s->locs[idx] = (struct raw_loc){0, SIZE_MAX};
                sub = ROLE_INIT;
            }
            int rc = scan_msg(s, f->descriptor, start, pos, depth + 1, sub, idx);
            if (rc) return rc;
            break;
        }
        default: return SCAN_MALFORMED; /* groups (3, 4) and reserved wire types */
        }
    }
    return SCAN_OK;
}

static ox_status scan_error(const struct scan *s, int rc) {
    if (rc == SCAN_DEEP)
        return ox_err(OX_E_INVALID, "protobuf messages nest deeper than %d levels",
                      s->max_depth ? s->max_depth : OX_ONNX_MAX_MSG_DEPTH);
    if (rc == SCAN_STRING)
        return ox_err_limit("string_length",
                            s->max_string ? s->max_string : ox_limits_default()->string_length,
                            "a string of %llu bytes (%s.%s)", (unsigned long long)s->long_len,
                            s->long_msg, s->long_field);
    return ox_err(OX_E_INVALID, "not a valid protobuf message");
}

/* Check that a protobuf buffer parses as `desc` within the nesting limit (starting at
 * `depth`: protobuf-c itself recurses without a limit), its strings within the string
 * limit. NULL limits: the defaults. */
static ox_status check_nesting(const ProtobufCMessageDescriptor *desc, const void *buf, size_t len,
                               int depth, const ox_limits *lim) {
    struct scan s = {.buf = buf};
    if (lim) {
        s.max_depth = msg_depth_for(lim->subgraph_depth);
        s.max_string = lim->string_length;
    }
    int rc = scan_msg(&s, desc, 0, len, depth, ROLE_NONE, 0);
    return rc ? scan_error(&s, rc) : OX_OK;
}

bool ox_pb_check_nesting(const ProtobufCMessageDescriptor *desc, const void *buf, size_t len) {
    return check_nesting(desc, buf, len, 0, NULL) == OX_OK;
}

/* An unknown field of a message, as protobuf-c keeps it (LEN fields with their prefix):
 * the payload of the last occurrence of `field` with wire type LEN. */
static bool unknown_len_field(const ProtobufCMessage *m, uint32_t field, size_t nth,
                              const uint8_t **data, size_t *len) {
    size_t seen = 0;
    for (unsigned i = 0; i < m->n_unknown_fields; i++) {
        const ProtobufCMessageUnknownField *u = &m->unknown_fields[i];
        if (u->tag != field || u->wire_type != PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED) continue;
        if (seen++ != nth) continue;
        size_t pos = 0;
        uint64_t n;
        if (!get_varint(u->data, u->len, &pos, &n) || n != u->len - pos) return false;
        *data = u->data + pos;
        *len = (size_t)n;
        return true;
    }
    return false;
}

/* ---- name map (function bodies) ------------------------------------------------------- */

struct nmap {
    size_t cap, n;
    const char **keys;
    int *vals;
};

static uint64_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static bool nmap_get(const struct nmap *m, const char *key, int *val) {
    if (!m->cap) return false;
    for (size_t k = hash_str(key) & (m->cap - 1);; k = (k + 1) & (m->cap - 1)) {
        if (!m->keys[k]) return false;
        if (strcmp(m->keys[k], key) == 0) {
            *val = m->vals[k];
            return true;
        }
    }
}

static bool nmap_put(struct nmap *m, const char *key, int val) {
    if ((m->n + 1) * 2 > m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 64;
        const char **keys = calloc(cap, sizeof *keys);
        int *vals = calloc(cap, sizeof *vals);
        if (!keys || !vals) {
            free(keys);
            free(vals);
            return false;
        }
        for (size_t i = 0; i < m->cap; i++) {
            if (!m->keys[i]) continue;
            size_t k = hash_str(m->keys[i]) & (cap - 1);
            while (keys[k]) k = (k + 1) & (cap - 1);
            keys[k] = m->keys[i];
            vals[k] = m->vals[i];
        }
        free(m->keys);
        free(m->vals);
        m->keys = keys;
        m->vals = vals;
        m->cap = cap;
    }
    size_t k = hash_str(key) & (m->cap - 1);
    while (m->keys[k]) k = (k + 1) & (m->cap - 1);
    m->keys[k] = key;
    m->vals[k] = val;
    m->n++;
    return true;
}

static void nmap_free(struct nmap *m) {
    free(m->keys);
    free(m->vals);
}

/* ---- import state ---------------------------------------------------------------------- */

struct func {
    const char *domain, *name;
    const uint8_t *overload;
    size_t overload_len;
    Onnx__FunctionProto *fp;
    int n_defaults;
    Onnx__AttributeProto **defaults; /* attribute_proto: defaults of the attributes */
};

struct imp {
    const char *file; /* for messages */
    struct ox_graph *root;
    struct ox_pb_src src; /* dir, keep = root, ext */
    const uint8_t *map;   /* the model file's map (file import), else NULL */
    struct raw_loc *locs; /* raw_data of the main graph's initializers in `map` */
    size_t n_locs;
    bool borrowed_from_map;
    int n_funcs;
    struct func *funcs;
    long n_nodes;
    int n_inits; /* initializers so far, in file order (init_order) */
    unsigned long fresh;
    ox_limits lim;        /* filled: no zero fields */
    uint64_t model_bytes; /* the file's, plus external data read (src.model_bytes) */
};

/* A call of a local function being inlined. */
struct attr_ref {
    const char *name;               /* the attribute's name at the call */
    const Onnx__AttributeProto *ap; /* its value (no ref_attr_name left) */
};

struct frame {
    const struct func *fn;
    const struct frame *parent; /* the call this one is inlined inside, or NULL */
    int n_attrs;
    struct attr_ref *attrs; /* the calling node's attributes, resolved */
    struct nmap map;        /* body name → value id in the graph the body is inlined into */
    const char *base;       /* prefix of fresh names */
};

struct scope {
    struct ox_graph *g;
    struct frame *body;       /* set in the body of an inlined function */
    const struct frame *call; /* the nearest enclosing call (ref_attr_name, opsets) */
    const struct scope *up;   /* the scope of the node owning this subgraph */
    int graph_depth, call_depth;
};

#define NOT_FOUND (-2)

static ox_status nomem(void) {
    return ox_err(OX_E_NOMEM, "out of memory");
}

/* Put context before the current message ("node 'a' (Add): ..."). When the whole would not
 * fit the message buffer (deeply nested subgraphs or calls), the middle is left out as
 * " [...] ", so that the outermost context and the innermost message both survive. */
static ox_status ctx(ox_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static ox_status ctx(ox_status st, const char *fmt, ...) {
    static const char mark[] = "[...] ";
    char pre[512], rest[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    const char *old = ox_errmsg();
    size_t lp = strlen(pre), room = 900;
    if (lp + strlen(old) <= room) return ox_err_prefix(st, "%s", pre);
    /* drop what an earlier cut kept before its mark: this prefix is further out */
    const char *m = strstr(old, mark);
    snprintf(rest, sizeof rest, "%s", m ? m + sizeof mark - 1 : old);
    size_t lr = strlen(rest), keep = room > lp + sizeof mark ? room - lp - sizeof mark : 0;
    const char *r = rest;
    if (lr > keep) { /* cut at a ": " boundary */
        r = rest + (lr - keep);
        const char *b = strstr(r, ": ");
        if (b) r = b + 2;
    }
    char out[sizeof pre + sizeof mark + sizeof rest];
    snprintf(out, sizeof out, "%s%s%s", pre, mark, r);
    return ox_err(st, "%s", out);
}

static char *gstrdup(struct ox_graph *g, const char *s) {
    return ox_graph_strdup(g, str(s));
}

/* ---- types ----------------------------------------------------------------------------- */

static ox_dtype elem_dtype(int32_t t) {
    return t > 0 && t < OX_N_DTYPES ? (ox_dtype)t : OX_UNDEFINED;
}

/* Kind, innermost dtype and shape of a TypeProto. */
static void type_info(const Onnx__TypeProto *tp, ox_value_kind *kind, ox_dtype *dt,
                      const Onnx__TensorShapeProto **shape) {
    *kind = OX_KIND_UNKNOWN;
    *dt = OX_UNDEFINED;
    *shape = NULL;
    if (!tp) return;
    const Onnx__TypeProto *inner = NULL;
    switch (tp->value_case) {
    case ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE:
        *kind = OX_KIND_TENSOR;
        if (tp->tensor_type) {
            *dt = elem_dtype(tp->tensor_type->elem_type);
            *shape = tp->tensor_type->shape;
        }
        return;
    case ONNX__TYPE_PROTO__VALUE_SPARSE_TENSOR_TYPE:
        *kind = OX_KIND_SPARSE;
        if (tp->sparse_tensor_type) {
            *dt = elem_dtype(tp->sparse_tensor_type->elem_type);
            *shape = tp->sparse_tensor_type->shape;
        }
        return;
    case ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE:
        *kind = OX_KIND_SEQUENCE;
        inner = tp->sequence_type ? tp->sequence_type->elem_type : NULL;
        break;
    case ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE:
        *kind = OX_KIND_OPTIONAL;
        inner = tp->optional_type ? tp->optional_type->elem_type : NULL;
        break;
    case ONNX__TYPE_PROTO__VALUE_MAP_TYPE:
        *kind = OX_KIND_MAP;
        inner = tp->map_type ? tp->map_type->value_type : NULL;
        break;
    default: return;
    }
    /* nesting is bounded by the pre-scan */
    ox_value_kind k;
    const Onnx__TensorShapeProto *sh;
    type_info(inner, &k, dt, &sh);
    if (*kind == OX_KIND_OPTIONAL && k == OX_KIND_TENSOR) *shape = sh;
}

/* Append to a bounded string (cut short when full). */
static void append(char *buf, size_t cap, size_t *pos, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void append(char *buf, size_t cap, size_t *pos, const char *fmt, ...) {
    if (*pos + 1 >= cap) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *pos, cap - *pos, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    *pos = (size_t)n >= cap - *pos ? cap - 1 : *pos + (size_t)n;
}

/* ONNX type string: "tensor(float)", "seq(tensor(int64))", "map(int64,tensor(float))". */
static void type_str(const Onnx__TypeProto *tp, char *buf, size_t cap, size_t *pos) {
    const Onnx__TypeProto *inner = NULL;
    switch (tp ? tp->value_case : ONNX__TYPE_PROTO__VALUE__NOT_SET) {
    case ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE:
        append(buf, cap, pos, "tensor(%s)",
               ox_dtype_name(tp->tensor_type ? elem_dtype(tp->tensor_type->elem_type) : 0));
        return;
    case ONNX__TYPE_PROTO__VALUE_SPARSE_TENSOR_TYPE:
        append(buf, cap, pos, "sparse_tensor(%s)",
               ox_dtype_name(tp->sparse_tensor_type ? elem_dtype(tp->sparse_tensor_type->elem_type)
                                                    : 0));
        return;
    case ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE:
        append(buf, cap, pos, "seq(");
        inner = tp->sequence_type ? tp->sequence_type->elem_type : NULL;
        break;
    case ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE:
        append(buf, cap, pos, "optional(");
        inner = tp->optional_type ? tp->optional_type->elem_type : NULL;
        break;
    case ONNX__TYPE_PROTO__VALUE_MAP_TYPE:
        append(buf, cap, pos, "map(%s,",
               ox_dtype_name(tp->map_type ? elem_dtype(tp->map_type->key_type) : 0));
        inner = tp->map_type ? tp->map_type->value_type : NULL;
        break;
    default: append(buf, cap, pos, "?"); return;
    }
    type_str(inner, buf, cap, pos); /* nesting is bounded by the pre-scan */
    append(buf, cap, pos, ")");
}

static ox_dtype type_dtype(const Onnx__TypeProto *tp) {
    ox_value_kind k;
    ox_dtype dt;
    const Onnx__TensorShapeProto *sh;
    type_info(tp, &k, &dt, &sh);
    return dt;
}

/* The TypeProto serialized into g's arena (kept for the exporter). */
static ox_status pack_type(struct ox_graph *g, const Onnx__TypeProto *tp, const uint8_t **out,
                           size_t *len) {
    *len = onnx__type_proto__get_packed_size(tp);
    uint8_t *b = ox_graph_alloc(g, *len ? *len : 1);
    if (!b) return nomem();
    onnx__type_proto__pack(tp, b);
    *out = b;
    return OX_OK;
}

/* Set a value's kind, dtype and shape from a TypeProto (only when it has none yet if
 * `if_unknown`); at most max_rank dims. */
static ox_status set_type(struct ox_graph *g, int v, const Onnx__TypeProto *tp, bool if_unknown,
                          int max_rank) {
    if (!tp || tp->value_case == ONNX__TYPE_PROTO__VALUE__NOT_SET) return OX_OK;
    struct ox_value *val = &g->values[v];
    if (if_unknown && (val->dtype != OX_UNDEFINED || val->rank >= 0)) return OX_OK;
    ox_value_kind kind;
    ox_dtype dt;
    const Onnx__TensorShapeProto *shape;
    type_info(tp, &kind, &dt, &shape);
    int rank = -1;
    struct ox_dim *dims = NULL;
    if (shape) {
        if (shape->n_dim > (size_t)max_rank) {
            char what[64];
            snprintf(what, sizeof what, "value '%.40s'", val->name);
            return ox_check_rank(shape->n_dim, max_rank, what);
        }
        rank = (int)shape->n_dim;
        dims = ox_graph_alloc(g, sizeof *dims * (size_t)(rank ? rank : 1));
        if (!dims) return nomem();
        for (int i = 0; i < rank; i++) {
            const Onnx__TensorShapeProto__Dimension *d = shape->dim[i];
            dims[i].value = -1;
            if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE &&
                d->dim_value >= 0)
                dims[i].value = d->dim_value;
            else if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
                     d->dim_param && *d->dim_param) {
                dims[i].symbol = ox_graph_strdup(g, d->dim_param);
                if (!dims[i].symbol) return nomem();
            }
        }
    }
    const uint8_t *pb = NULL;
    size_t pb_len = 0;
    if (kind != OX_KIND_TENSOR) {
        ox_status st = pack_type(g, tp, &pb, &pb_len);
        if (st) return st;
    }
    val = &g->values[v];
    val->kind = kind;
    val->dtype = dt;
    val->rank = rank;
    val->dims = dims;
    val->type_pb = pb;
    val->type_pb_len = pb_len;
    return OX_OK;
}

/* The value's type and shape from its constant tensor. */
static ox_status type_from_tensor(struct ox_graph *g, int v, const ox_tensor *t) {
    struct ox_dim *dims = ox_graph_alloc(g, sizeof *dims * (size_t)(t->rank ? t->rank : 1));
    if (!dims) return nomem();
    for (int i = 0; i < t->rank; i++) dims[i].value = t->dims[i];
    struct ox_value *val = &g->values[v];
    val->kind = OX_KIND_TENSOR;
    val->dtype = t->dtype;
    val->rank = t->rank;
    val->dims = dims;
    return OX_OK;
}

/* ---- name resolution ------------------------------------------------------------------- */

/* Value id in s->g for a name read there: a local value, an argument of an inlined function
 * (-1 when the call omitted it), or a value of an enclosing scope (an is_outer value is
 * added). NOT_FOUND when nothing defines it. */
static ox_status resolve(const struct scope *s, const char *name, int *id) {
    if (s->body) {
        if (!nmap_get(&s->body->map, name, id)) *id = NOT_FOUND;
        return OX_OK;
    }
    int v = ox_graph_find_value(s->g, name);
    if (v >= 0) {
        *id = v;
        return OX_OK;
    }
    if (!s->up) {
        *id = NOT_FOUND;
        return OX_OK;
    }
    int pid;
    ox_status st = resolve(s->up, name, &pid);
    if (st || pid < 0) {
        *id = pid;
        return st;
    }
    const struct ox_graph *pg = s->up->g;
    const char *outer = pg->values[pid].name;
    v = ox_graph_find_value(s->g, outer);
    if (v >= 0) {
        if (!s->g->values[v].is_outer)
            return ox_err(OX_E_UNSUPPORTED,
                          "'%s' (the inlined name of '%s') clashes with a name of the subgraph",
                          outer, name);
        *id = v;
        return OX_OK;
    }
    v = ox_graph_add_value(s->g, outer);
    if (v < 0) return nomem();
    struct ox_value *val = &s->g->values[v];
    const struct ox_value *pv = &pg->values[pid];
    val->is_outer = true;
    val->kind = pv->kind;
    val->dtype = pv->dtype;
    val->rank = pv->rank;
    if (pv->rank > 0 && pv->dims) {
        struct ox_dim *dims = ox_graph_alloc(s->g, sizeof *dims * (size_t)pv->rank);
        if (!dims) return nomem();
        for (int i = 0; i < pv->rank; i++) {
            dims[i].value = pv->dims[i].value;
            if (pv->dims[i].symbol) {
                dims[i].symbol = ox_graph_strdup(s->g, pv->dims[i].symbol);
                if (!dims[i].symbol) return nomem();
            }
        }
        s->g->values[v].dims = dims;
    }
    *id = v;
    return OX_OK;
}

/* A fresh value "<base>/<name>" (made unique) in g. */
static int fresh_value(struct imp *im, struct ox_graph *g, const char *base, const char *name) {
    size_t n = strlen(base) + strlen(name) + 32;
    char *buf = malloc(n);
    if (!buf) return -1;
    snprintf(buf, n, "%s/%s", base, name);
    while (ox_graph_find_value(g, buf) >= 0) snprintf(buf, n, "%s/%s_%lu", base, name, im->fresh++);
    int v = ox_graph_add_value(g, buf);
    free(buf);
    return v;
}

/* Id of a name a node writes (made in the first pass). */
static int output_id(const struct scope *s, const char *name) {
    int v;
    if (s->body) return nmap_get(&s->body->map, name, &v) ? v : NOT_FOUND;
    return ox_graph_find_value(s->g, name);
}

/* ---- tensors --------------------------------------------------------------------------- */

/* An attribute tensor's own name (for the exporter); none when the file gave none. */
static ox_status keep_tensor_name(struct ox_graph *g, ox_tensor *t, const char *name) {
    if (!name || !*name) return OX_OK;
    t->name = ox_graph_strdup(g, name);
    return t->name ? OX_OK : nomem();
}

/* A tensor attribute or constant: arena struct, owned malloc'd data. */
static ox_status attr_tensor(struct imp *im, const struct scope *s, Onnx__TensorProto *tp,
                             ox_tensor **out) {
    ox_tensor *t = ox_graph_alloc(s->g, sizeof *t);
    if (!t) return nomem();
    struct ox_pb_src src = im->src;
    src.keep = NULL;
    src.raw_at = NULL;
    src.keep_raw = s->call != NULL; /* a function body is converted once per call */
    bool borrowed;
    ox_status st = ox_tensor_from_proto(tp, &src, t, &borrowed);
    if (st) return st;
    *out = t;
    return keep_tensor_name(s->g, t, tp->name);
}

static ox_status attr_sparse(struct imp *im, const struct scope *s, Onnx__SparseTensorProto *sp,
                             ox_tensor **out) {
    ox_tensor *t = ox_graph_alloc(s->g, sizeof *t);
    if (!t) return nomem();
    struct ox_pb_src src = im->src;
    src.keep_raw = s->call != NULL;
    ox_status st = ox_tensor_from_sparse_proto(sp, &src, t);
    if (st) return st;
    *out = t;
    return keep_tensor_name(s->g, t, sp->values ? sp->values->name : NULL);
}

/* ---- graphs, nodes, attributes, functions ---------------------------------------------- */

static ox_status import_graph(struct imp *im, const struct scope *s, Onnx__GraphProto *gp);
static ox_status import_node(struct imp *im, const struct scope *s, Onnx__NodeProto *np);

static ox_status import_subgraph(struct imp *im, const struct scope *s, Onnx__GraphProto *gp,
                                 struct ox_graph **out) {
    if (s->graph_depth + 1 > im->lim.subgraph_depth)
        return ox_err_limit("subgraph_depth", (uint64_t)im->lim.subgraph_depth,
                            "a subgraph at nesting level %d (subgraphs nest deeper than %d levels)",
                            s->graph_depth + 1, im->lim.subgraph_depth);
    struct ox_graph *sub = ox_graph_create(s->g);
    if (!sub) return nomem();
    *out = sub; /* freed with the node that owns it, even on failure */
    struct scope ss = {.g = sub,
                       .call = s->call,
                       .up = s,
                       .graph_depth = s->graph_depth + 1,
                       .call_depth = s->call_depth};
    return import_graph(im, &ss, gp);
}

static ox_attr_type attr_type(const Onnx__AttributeProto *ap) {
    if (ap->has_type && ap->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED)
        return (ox_attr_type)ap->type;
    /* Old models leave `type` out: go by the field that is set. */
    if (ap->has_f) return OX_ATTR_FLOAT;
    if (ap->has_i) return OX_ATTR_INT;
    if (ap->has_s) return OX_ATTR_STRING;
    if (ap->t) return OX_ATTR_TENSOR;
    if (ap->g) return OX_ATTR_GRAPH;
    if (ap->sparse_tensor) return OX_ATTR_SPARSE_TENSOR;
    if (ap->tp) return OX_ATTR_TYPE_PROTO;
    if (ap->n_floats) return OX_ATTR_FLOATS;
    if (ap->n_ints) return OX_ATTR_INTS;
    if (ap->n_strings) return OX_ATTR_STRINGS;
    if (ap->n_tensors) return OX_ATTR_TENSORS;
    if (ap->n_graphs) return OX_ATTR_GRAPHS;
    if (ap->n_sparse_tensors) return OX_ATTR_SPARSE_TENSORS;
    if (ap->n_type_protos) return OX_ATTR_TYPE_PROTOS;
    return OX_ATTR_UNDEFINED;
}

/* Convert one attribute value into *a (zeroed, already counted by the node so that a
 * failure half way is freed with the graph). */
static ox_status convert_attr(struct imp *im, const struct scope *s, const char *name,
                              Onnx__AttributeProto *ap, struct ox_attr *a) {
    struct ox_graph *g = s->g;
    a->name = gstrdup(g, name);
    if (!a->name) return nomem();
    a->type = attr_type(ap);
    ox_status st = OX_OK;
    size_t n = 0;
    switch (a->type) {
    case OX_ATTR_FLOATS: n = ap->n_floats; break;
    case OX_ATTR_INTS: n = ap->n_ints; break;
    case OX_ATTR_STRINGS: n = ap->n_strings; break;
    case OX_ATTR_TENSORS: n = ap->n_tensors; break;
    case OX_ATTR_GRAPHS: n = ap->n_graphs; break;
    case OX_ATTR_SPARSE_TENSORS: n = ap->n_sparse_tensors; break;
    case OX_ATTR_TYPE_PROTOS: n = ap->n_type_protos; break;
    default: break;
    }
    if (n > MAX_COUNT) return ox_err(OX_E_INVALID, "%zu values is too many", n);
    size_t nn = n ? n : 1;
    switch (a->type) {
    case OX_ATTR_FLOAT: a->f = ap->f; break;
    case OX_ATTR_INT: a->i = ap->i; break;
    case OX_ATTR_STRING:
        a->s = ox_arena_strndup(&g->arena, ap->s.data ? (const char *)ap->s.data : "", ap->s.len);
        if (!a->s) return nomem();
        a->s_len = ap->s.len;
        break;
    case OX_ATTR_TENSOR:
        if (!ap->t) return ox_err(OX_E_INVALID, "a TENSOR attribute without a tensor");
        return attr_tensor(im, s, ap->t, &a->t);
    case OX_ATTR_SPARSE_TENSOR:
        if (!ap->sparse_tensor)
            return ox_err(OX_E_INVALID, "a SPARSE_TENSOR attribute without a sparse tensor");
        return attr_sparse(im, s, ap->sparse_tensor, &a->t);
    case OX_ATTR_GRAPH:
        if (!ap->g) return ox_err(OX_E_INVALID, "a GRAPH attribute without a graph");
        return import_subgraph(im, s, ap->g, &a->g);
    case OX_ATTR_TYPE_PROTO: {
        if (!ap->tp) return ox_err(OX_E_INVALID, "a TYPE_PROTO attribute without a type");
        char buf[1024];
        size_t pos = 0;
        buf[0] = 0;
        type_str(ap->tp, buf, sizeof buf, &pos);
        a->s = gstrdup(g, buf);
        if (!a->s) return nomem();
        a->s_len = strlen(buf);
        a->i = type_dtype(ap->tp);
        return pack_type(g, ap->tp, &a->type_pb, &a->type_pb_len);
    }
    case OX_ATTR_FLOATS:
        a->n = (int)n;
        a->floats = ox_graph_alloc(g, sizeof(float) * nn);
        if (!a->floats) return nomem();
        if (n) memcpy(a->floats, ap->floats, sizeof(float) * n);
        break;
    case OX_ATTR_INTS:
        a->n = (int)n;
        a->ints = ox_graph_alloc(g, sizeof(int64_t) * nn);
        if (!a->ints) return nomem();
        if (n) memcpy(a->ints, ap->ints, sizeof(int64_t) * n);
        break;
    case OX_ATTR_STRINGS:
        a->n = (int)n;
        a->strings = ox_graph_alloc(g, sizeof(char *) * nn);
        a->string_lens = ox_graph_alloc(g, sizeof(size_t) * nn);
        if (!a->strings || !a->string_lens) return nomem();
        for (size_t k = 0; k < n; k++) {
            const ProtobufCBinaryData *b = &ap->strings[k];
            a->strings[k] =
                ox_arena_strndup(&g->arena, b->data ? (const char *)b->data : "", b->len);
            if (!a->strings[k]) return nomem();
            a->string_lens[k] = ap->strings[k].len;
        }
        break;
    case OX_ATTR_TENSORS:
    case OX_ATTR_SPARSE_TENSORS:
        a->tensors = ox_graph_alloc(g, sizeof(ox_tensor *) * nn);
        if (!a->tensors) return nomem();
        a->n = (int)n;
        for (size_t k = 0; k < n && !st; k++) {
            st = a->type == OX_ATTR_TENSORS
                     ? attr_tensor(im, s, ap->tensors[k], &a->tensors[k])
                     : attr_sparse(im, s, ap->sparse_tensors[k], &a->tensors[k]);
            if (st) ctx(st, "tensor %zu: ", k);
        }
        return st;
    case OX_ATTR_GRAPHS:
        a->graphs = ox_graph_alloc(g, sizeof(struct ox_graph *) * nn);
        if (!a->graphs) return nomem();
        a->n = (int)n;
        for (size_t k = 0; k < n && !st; k++) {
            st = import_subgraph(im, s, ap->graphs[k], &a->graphs[k]);
            if (st) ctx(st, "graph %zu: ", k);
        }
        return st;
    case OX_ATTR_TYPE_PROTOS:
        a->n = (int)n;
        a->strings = ox_graph_alloc(g, sizeof(char *) * nn);
        a->string_lens = ox_graph_alloc(g, sizeof(size_t) * nn);
        a->ints = ox_graph_alloc(g, sizeof(int64_t) * nn);
        a->type_pbs = ox_graph_alloc(g, sizeof(uint8_t *) * nn);
        a->type_pb_lens = ox_graph_alloc(g, sizeof(size_t) * nn);
        if (!a->strings || !a->string_lens || !a->ints || !a->type_pbs || !a->type_pb_lens)
            return nomem();
        for (size_t k = 0; k < n; k++) {
            st = pack_type(g, ap->type_protos[k], &a->type_pbs[k], &a->type_pb_lens[k]);
            if (st) return st;
            char buf[1024];
            size_t pos = 0;
            buf[0] = 0;
            type_str(ap->type_protos[k], buf, sizeof buf, &pos);
            a->strings[k] = gstrdup(g, buf);
            if (!a->strings[k]) return nomem();
            a->string_lens[k] = strlen(buf);
            a->ints[k] = type_dtype(ap->type_protos[k]);
        }
        break;
    case OX_ATTR_UNDEFINED: return ox_err(OX_E_INVALID, "the attribute has no type and no value");
    default: return ox_err(OX_E_UNSUPPORTED, "attribute type %d is unknown", (int)a->type);
    }
    return OX_OK;
}

/* Resolve an attribute reference (ref_attr_name) against the enclosing call: the caller's
 * attribute, else the function's default; NULL when neither gives one (the attribute is
 * then left out, as the ONNX spec says). */
static ox_status resolve_ref(const struct scope *s, const Onnx__AttributeProto *ap,
                             const Onnx__AttributeProto **out) {
    *out = NULL;
    if (!s->call)
        return ox_err(OX_E_INVALID, "attribute '%s' refers to '%s' outside of a function body",
                      str(ap->name), ap->ref_attr_name);
    const struct frame *f = s->call;
    for (int i = 0; i < f->n_attrs; i++)
        if (strcmp(f->attrs[i].name, ap->ref_attr_name) == 0) {
            *out = f->attrs[i].ap;
            return OX_OK;
        }
    for (int i = 0; i < f->fn->n_defaults; i++)
        if (strcmp(str(f->fn->defaults[i]->name), ap->ref_attr_name) == 0) {
            *out = f->fn->defaults[i];
            return OX_OK;
        }
    return OX_OK;
}

static const struct func *find_func(const struct imp *im, const char *domain, const char *name,
                                    const uint8_t *ov, size_t ov_len) {
    for (int i = 0; i < im->n_funcs; i++) {
        const struct func *f = &im->funcs[i];
        if (strcmp(f->name, name) == 0 && strcmp(f->domain, domain) == 0 &&
            f->overload_len == ov_len && (!ov_len || memcmp(f->overload, ov, ov_len) == 0))
            return f;
    }
    return NULL;
}

static int64_t opset_for(const struct imp *im, const struct scope *s, const char *domain) {
    if (s->call) {
        const Onnx__FunctionProto *fp = s->call->fn->fp;
        for (size_t i = 0; i < fp->n_opset_import; i++)
            if (strcmp(norm_domain(fp->opset_import[i]->domain), domain) == 0)
                return fp->opset_import[i]->version;
    }
    return ox_graph_opset(im->root, domain);
}

/* The name an imported node gets: its own, or "<call>/<name>" inside an inlined body. */
static char *node_name(const struct scope *s, const Onnx__NodeProto *np) {
    const char *own = np->name && *np->name ? np->name : str(np->op_type);
    if (!s->body) {
        char *r = strdup(str(np->name));
        return r;
    }
    size_t n = strlen(s->body->base) + strlen(own) + 2;
    char *r = malloc(n);
    if (r) snprintf(r, n, "%s/%s", s->body->base, own);
    return r;
}

static ox_status add_identity(struct imp *im, const struct scope *s, const char *name, int from,
                              int to) {
    if (++im->n_nodes > im->lim.nodes)
        return ox_err_limit("nodes", (uint64_t)im->lim.nodes,
                            "the model has at least %lld nodes (after inlining)",
                            (long long)im->lim.nodes + 1);
    struct ox_node *n = ox_graph_add_node(s->g, name, "", "Identity", 1, &from, 1, &to);
    if (!n) return nomem();
    n->opset = (int)ox_graph_opset(im->root, "");
    n->op = ox_op_find("", "Identity", n->opset);
    return OX_OK;
}

static ox_status inline_call(struct imp *im, const struct scope *s, Onnx__NodeProto *np,
                             const struct func *fn, const char *label) {
    const Onnx__FunctionProto *fp = fn->fp;
    if (s->call_depth + 1 > OX_ONNX_MAX_CALL_DEPTH)
        return ox_err(OX_E_INVALID, "local function calls nest deeper than %d levels",
                      OX_ONNX_MAX_CALL_DEPTH);
    if (np->n_input > fp->n_input)
        return ox_err(OX_E_INVALID, "%zu inputs given, but function '%s' takes %zu", np->n_input,
                      fn->name, fp->n_input);
    if (np->n_output > fp->n_output)
        return ox_err(OX_E_INVALID, "%zu outputs asked for, but function '%s' has %zu",
                      np->n_output, fn->name, fp->n_output);
    for (const struct frame *f = s->call; f; f = f->parent)
        if (f->fn == fn)
            return ox_err(OX_E_INVALID,
                          "function '%s' calls itself (directly or through "
                          "other functions)",
                          fn->name);
    struct frame fr = {.fn = fn, .parent = s->call};
    ox_status st = OX_OK;
    char *base = NULL;
    fr.attrs = calloc(np->n_attribute ? np->n_attribute : 1, sizeof *fr.attrs);
    if (!fr.attrs) return nomem();
    for (size_t k = 0; k < np->n_attribute; k++) {
        const Onnx__AttributeProto *ap = np->attribute[k];
        if (ap->ref_attr_name && *ap->ref_attr_name) {
            st = resolve_ref(s, ap, &ap);
            if (st) goto out;
            if (!ap) continue;
        }
        fr.attrs[fr.n_attrs++] = (struct attr_ref){str(np->attribute[k]->name), ap};
    }
    base = strdup(*label ? label : fn->name);
    if (!base) {
        st = nomem();
        goto out;
    }
    fr.base = base;
    /* formal inputs ← actual inputs (-1: omitted) */
    for (size_t i = 0; i < fp->n_input; i++) {
        int id = -1, dummy;
        if (i < np->n_input && np->input[i] && *np->input[i]) {
            st = resolve(s, np->input[i], &id);
            if (st) goto out;
            if (id == NOT_FOUND) {
                st = ox_err(OX_E_INVALID,
                            "input '%s': no graph input, initializer or node output has this "
                            "name",
                            np->input[i]);
                goto out;
            }
        }
        if (nmap_get(&fr.map, str(fp->input[i]), &dummy)) {
            st = ox_err(OX_E_INVALID, "function '%s' names two inputs '%s'", fn->name,
                        str(fp->input[i]));
            goto out;
        }
        if (!nmap_put(&fr.map, str(fp->input[i]), id)) {
            st = nomem();
            goto out;
        }
    }
    /* body outputs: the caller's outputs for formal outputs, else fresh values */
    for (size_t k = 0; k < fp->n_node; k++) {
        const Onnx__NodeProto *bn = fp->node[k];
        for (size_t j = 0; j < bn->n_output; j++) {
            const char *o = bn->output[j];
            int id;
            if (!o || !*o) continue;
            if (nmap_get(&fr.map, o, &id)) {
                st = ox_err(OX_E_INVALID, "function '%s' assigns '%s' twice", fn->name, o);
                goto out;
            }
            id = NOT_FOUND;
            for (size_t q = 0; q < fp->n_output; q++)
                if (strcmp(str(fp->output[q]), o) == 0) {
                    if (q < np->n_output && np->output[q] && *np->output[q])
                        id = output_id(s, np->output[q]);
                    break;
                }
            if (id < 0) id = fresh_value(im, s->g, base, o);
            if (id < 0 || !nmap_put(&fr.map, o, id)) {
                st = nomem();
                goto out;
            }
        }
    }
    struct scope bs = {.g = s->g,
                       .body = &fr,
                       .call = &fr,
                       .up = s,
                       .graph_depth = s->graph_depth,
                       .call_depth = s->call_depth + 1};
    for (size_t k = 0; k < fp->n_node; k++) {
        st = import_node(im, &bs, fp->node[k]);
        if (st) goto out;
    }
    /* formal outputs that no body node wrote to the caller's value: copy */
    for (size_t q = 0; q < np->n_output; q++) {
        if (!np->output[q] || !*np->output[q]) continue;
        int to = output_id(s, np->output[q]), from;
        if (!nmap_get(&fr.map, str(fp->output[q]), &from) || from < 0) {
            st = ox_err(OX_E_INVALID,
                        "function '%s' output '%s' is neither an input nor written by a node",
                        fn->name, str(fp->output[q]));
            goto out;
        }
        if (from != to) {
            char nm[256];
            snprintf(nm, sizeof nm, "%s/out%zu", base, q);
            st = add_identity(im, s, nm, from, to);
            if (st) goto out;
        }
    }
out:
    if (st) ctx(st, "in function '%s': ", fn->name);
    free(base);
    free(fr.attrs);
    nmap_free(&fr.map);
    return st;
}

static ox_status import_node(struct imp *im, const struct scope *s, Onnx__NodeProto *np) {
    struct ox_graph *g = s->g;
    const char *op_type = str(np->op_type), *domain = norm_domain(np->domain);
    char *label = node_name(s, np);
    if (!label) return nomem();
    ox_status st = OX_OK;
    int *ins = NULL, *outs = NULL;
    if (!*op_type) {
        st = ox_err(OX_E_INVALID, "node '%s' has no op_type", label);
        goto out;
    }
    if (np->n_input > MAX_COUNT || np->n_output > MAX_COUNT || np->n_attribute > MAX_COUNT) {
        st = ox_err(OX_E_INVALID, "node '%s' (%s) has too many inputs, outputs or attributes",
                    label, op_type);
        goto out;
    }
    const uint8_t *ov = NULL;
    size_t ov_len = 0;
    unknown_len_field(&np->base, NODE_OVERLOAD_FIELD, 0, &ov, &ov_len);
    const struct func *fn = find_func(im, domain, op_type, ov, ov_len);
    if (fn) {
        st = inline_call(im, s, np, fn, label);
        if (st) ctx(st, "node '%s' (%s): ", label, op_type);
        goto out;
    }
    ins = malloc(sizeof(int) * (np->n_input + 1));
    outs = malloc(sizeof(int) * (np->n_output + 1));
    if (!ins || !outs) {
        st = nomem();
        goto out;
    }
    for (size_t i = 0; i < np->n_input; i++) {
        const char *nm = str(np->input[i]);
        ins[i] = -1;
        if (!*nm) continue;
        st = resolve(s, nm, &ins[i]);
        if (st) {
            ctx(st, "node '%s' (%s) input '%s': ", label, op_type, nm);
            goto out;
        }
        if (ins[i] == NOT_FOUND) {
            st = ox_err(OX_E_INVALID,
                        "node '%s' (%s) input '%s': no graph input, initializer or node output "
                        "has this name",
                        label, op_type, nm);
            goto out;
        }
    }
    for (size_t j = 0; j < np->n_output; j++) {
        const char *nm = str(np->output[j]);
        outs[j] = *nm ? output_id(s, nm) : -1;
        if (outs[j] == NOT_FOUND) { /* cannot happen: the first pass made them */
            st = ox_err(OX_E_INTERNAL, "node '%s' (%s) output '%s' was not defined", label, op_type,
                        nm);
            goto out;
        }
    }
    if (++im->n_nodes > im->lim.nodes) {
        st = ox_err_limit("nodes", (uint64_t)im->lim.nodes,
                          "the model has at least %lld nodes (after inlining)",
                          (long long)im->lim.nodes + 1);
        goto out;
    }
    struct ox_node *n = ox_graph_add_node(g, label, domain, op_type, (int)np->n_input, ins,
                                          (int)np->n_output, outs);
    if (!n) {
        st = nomem();
        goto out;
    }
    int idx = g->n_nodes - 1;
    n->opset = (int)opset_for(im, s, domain);
    n->op = ox_op_find(n->domain, n->op_type, n->opset);
    if (np->doc_string && *np->doc_string) {
        n->doc = gstrdup(g, np->doc_string);
        if (!n->doc) {
            st = nomem();
            goto out;
        }
    }
    struct ox_attr *attrs =
        ox_graph_alloc(g, sizeof *attrs * (np->n_attribute ? np->n_attribute : 1));
    if (!attrs) {
        st = nomem();
        goto out;
    }
    g->nodes[idx].attrs = attrs;
    int w = 0;
    for (size_t k = 0; k < np->n_attribute; k++) {
        Onnx__AttributeProto *ap = np->attribute[k];
        const char *an = str(ap->name);
        if (!*an) {
            st = ox_err(OX_E_INVALID, "node '%s' (%s): attribute %zu has no name", label, op_type,
                        k);
            goto out;
        }
        for (int q = 0; q < w; q++)
            if (strcmp(attrs[q].name, an) == 0) {
                st = ox_err(OX_E_INVALID, "node '%s' (%s): attribute '%s' is given twice", label,
                            op_type, an);
                goto out;
            }
        if (ap->ref_attr_name && *ap->ref_attr_name) {
            const Onnx__AttributeProto *src;
            st = resolve_ref(s, ap, &src);
            if (st) {
                ctx(st, "node '%s' (%s): ", label, op_type);
                goto out;
            }
            if (!src) continue;
            ap = (Onnx__AttributeProto *)src;
        }
        g->nodes[idx].n_attrs = w + 1; /* counted before it is filled: freed on failure */
        st = convert_attr(im, s, an, ap, &attrs[w]);
        if (st) {
            ctx(st, "node '%s' (%s) attribute '%s': ", label, op_type, an);
            goto out;
        }
        w++;
    }
    g->nodes[idx].n_attrs = w;
out:
    free(label);
    free(ins);
    free(outs);
    return st;
}

/* Make an initializer value (dense or sparse). `as_input`: a graph input of that name. */
static ox_status add_initializer(struct imp *im, const struct scope *s, Onnx__TensorProto *tp,
                                 Onnx__SparseTensorProto *sp, const uint8_t *raw_at) {
    struct ox_graph *g = s->g;
    const char *name = str(sp ? (sp->values ? sp->values->name : NULL) : tp->name);
    if (!*name) return ox_err(OX_E_INVALID, "an initializer has no name");
    int v = ox_graph_find_value(g, name);
    if (v >= 0 && g->values[v].init)
        return ox_err(OX_E_INVALID, "initializer '%s' is given twice", name);
    if (v < 0) v = ox_graph_add_value(g, name);
    if (v < 0) return nomem();
    ox_tensor *t = ox_graph_alloc(g, sizeof *t);
    if (!t) return nomem();
    bool borrowed = false;
    ox_status st;
    if (sp) {
        st = ox_tensor_from_sparse_proto(sp, &im->src, t);
    } else {
        struct ox_pb_src src = im->src;
        src.raw_at = raw_at;
        st = ox_tensor_from_proto(tp, &src, t, &borrowed);
    }
    if (st) return ctx(st, "initializer '%s': ", name);
    t->name = g->values[v].name;
    g->values[v].init = t;
    g->values[v].init_borrowed = borrowed;
    g->values[v].init_sparse = sp != NULL;
    g->values[v].init_order = ++im->n_inits;
    if (borrowed && raw_at) im->borrowed_from_map = true;
    return type_from_tensor(g, v, t);
}

static ox_status import_graph(struct imp *im, const struct scope *s, Onnx__GraphProto *gp) {
    struct ox_graph *g = s->g;
    ox_status st = OX_OK;
    if (gp->n_input > MAX_COUNT || gp->n_output > MAX_COUNT || gp->n_node > MAX_COUNT)
        return ox_err(OX_E_INVALID, "graph '%s' has too many inputs, outputs or nodes",
                      str(gp->name));
    g->name = gstrdup(g, gp->name);
    g->graph_doc = gstrdup(g, gp->doc_string);
    if (!g->name || !g->graph_doc) return nomem();
    /* 1. every name the graph defines */
    g->inputs = ox_graph_alloc(g, sizeof(int) * (gp->n_input + 1));
    g->outputs = ox_graph_alloc(g, sizeof(int) * (gp->n_output + 1));
    if (!g->inputs || !g->outputs) return nomem();
    for (size_t i = 0; i < gp->n_input; i++) {
        const char *nm = str(gp->input[i]->name);
        if (!*nm) return ox_err(OX_E_INVALID, "graph input %zu has no name", i);
        if (ox_graph_find_value(g, nm) >= 0)
            return ox_err(OX_E_INVALID, "graph input '%s' is listed twice", nm);
        int v = ox_graph_add_value(g, nm);
        if (v < 0) return nomem();
        st = set_type(g, v, gp->input[i]->type, false, im->lim.rank);
        if (st) return ctx(st, "graph input '%s': ", nm);
        g->inputs[g->n_inputs++] = v;
    }
    bool use_locs = s->g == im->root && im->locs && im->n_locs == gp->n_initializer;
    for (size_t i = 0; i < gp->n_initializer; i++) {
        const uint8_t *at = NULL;
        if (use_locs && im->locs[i].len != SIZE_MAX &&
            im->locs[i].len == gp->initializer[i]->raw_data.len)
            at = im->map + im->locs[i].off;
        st = add_initializer(im, s, gp->initializer[i], NULL, at);
        if (st) return st;
    }
    for (size_t i = 0; i < gp->n_sparse_initializer; i++) {
        st = add_initializer(im, s, NULL, gp->sparse_initializer[i], NULL);
        if (st) return st;
    }
    for (size_t k = 0; k < gp->n_node; k++) {
        const Onnx__NodeProto *np = gp->node[k];
        for (size_t j = 0; j < np->n_output; j++) {
            const char *nm = str(np->output[j]);
            if (!*nm) continue;
            int v = ox_graph_find_value(g, nm);
            if (v >= 0) {
                bool is_input = false;
                for (int q = 0; q < g->n_inputs; q++) is_input |= g->inputs[q] == v;
                if (is_input || g->values[v].init)
                    return ox_err(
                        OX_E_INVALID, "node '%s' (%s) output '%s': the name is already a graph %s",
                        str(np->name), str(np->op_type), nm, is_input ? "input" : "initializer");
                continue; /* written twice: ox_graph_sort names both nodes */
            }
            if (ox_graph_add_value(g, nm) < 0) return nomem();
        }
    }
    for (size_t i = 0; i < gp->n_value_info; i++) {
        int v = ox_graph_find_value(g, str(gp->value_info[i]->name));
        if (v < 0 || g->values[v].is_outer) continue;
        st = set_type(g, v, gp->value_info[i]->type, true, im->lim.rank);
        if (st) return st;
    }
    /* 2. nodes */
    for (size_t k = 0; k < gp->n_node; k++) {
        st = import_node(im, s, gp->node[k]);
        if (st) return st;
    }
    /* 3. outputs */
    for (size_t i = 0; i < gp->n_output; i++) {
        const char *nm = str(gp->output[i]->name);
        int v;
        st = resolve(s, nm, &v);
        if (st) return st;
        if (v < 0)
            return ox_err(OX_E_INVALID,
                          "graph output '%s': no graph input, initializer or node output has "
                          "this name",
                          nm);
        st = set_type(g, v, gp->output[i]->type, true, im->lim.rank);
        if (st) return ctx(st, "graph output '%s': ", nm);
        g->outputs[g->n_outputs++] = v;
    }
    return ox_graph_sort(g);
}

/* ---- the model ------------------------------------------------------------------------- */

static void free_funcs(struct imp *im) {
    for (int i = 0; i < im->n_funcs; i++) {
        for (int k = 0; k < im->funcs[i].n_defaults; k++)
            onnx__attribute_proto__free_unpacked(im->funcs[i].defaults[k], NULL);
        free(im->funcs[i].defaults);
    }
    free(im->funcs);
    im->funcs = NULL;
    im->n_funcs = 0;
}

static ox_status load_funcs(struct imp *im, Onnx__ModelProto *m) {
    if (!m->n_functions) return OX_OK;
    if (m->n_functions > MAX_COUNT) return ox_err(OX_E_INVALID, "too many functions");
    im->funcs = calloc(m->n_functions, sizeof *im->funcs);
    if (!im->funcs) return nomem();
    for (size_t i = 0; i < m->n_functions; i++) {
        Onnx__FunctionProto *fp = m->functions[i];
        struct func *f = &im->funcs[im->n_funcs++];
        f->fp = fp;
        f->name = str(fp->name);
        f->domain = norm_domain(fp->domain);
        if (!*f->name) return ox_err(OX_E_INVALID, "local function %zu has no name", i);
        unknown_len_field(&fp->base, FUNCTION_OVERLOAD_FIELD, 0, &f->overload, &f->overload_len);
        const uint8_t *d;
        size_t len;
        size_t n_def = 0;
        while (unknown_len_field(&fp->base, FUNCTION_ATTRIBUTE_PROTO_FIELD, n_def, &d, &len))
            n_def++;
        if (!n_def) continue;
        f->defaults = calloc(n_def, sizeof *f->defaults);
        if (!f->defaults) return nomem();
        for (size_t k = 0; k < n_def; k++) {
            unknown_len_field(&fp->base, FUNCTION_ATTRIBUTE_PROTO_FIELD, k, &d, &len);
            ox_status cst = check_nesting(&onnx__attribute_proto__descriptor, d, len, 3, &im->lim);
            if (cst) return ctx(cst, "function '%s' attribute default %zu: ", f->name, k);
            Onnx__AttributeProto *ap = onnx__attribute_proto__unpack(NULL, len, d);
            if (!ap)
                return ox_err(OX_E_INVALID, "function '%s': attribute default %zu does not parse",
                              f->name, k);
            f->defaults[f->n_defaults++] = ap;
        }
    }
    return OX_OK;
}

static ox_status import_model(struct imp *im, const uint8_t *buf, size_t len) {
    if (len == 0) return ox_err(OX_E_INVALID, "empty file, not an ONNX model");
    struct scan sc = {.buf = buf,
                      .record = im->map != NULL,
                      .max_depth = msg_depth_for(im->lim.subgraph_depth),
                      .max_string = im->lim.string_length};
    sc.f_graph =
        protobuf_c_message_descriptor_get_field_by_name(&onnx__model_proto__descriptor, "graph")
            ->id;
    sc.f_init = protobuf_c_message_descriptor_get_field_by_name(&onnx__graph_proto__descriptor,
                                                                "initializer")
                    ->id;
    sc.f_raw =
        protobuf_c_message_descriptor_get_field_by_name(&onnx__tensor_proto__descriptor, "raw_data")
            ->id;
    int rc = scan_msg(&sc, &onnx__model_proto__descriptor, 0, len, 1, ROLE_MODEL, 0);
    if (rc) {
        free(sc.locs);
        if (rc == SCAN_DEEP) {
            scan_error(&sc, rc);
            return ctx(OX_E_INVALID, "not an ONNX model: ");
        }
        if (rc == SCAN_STRING) return scan_error(&sc, rc);
        return ox_err(OX_E_INVALID, "not an ONNX model (protobuf parse failed)");
    }
    if (!sc.locs_failed) {
        im->locs = sc.locs;
        im->n_locs = sc.n_locs;
    } else {
        free(sc.locs);
    }
    Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, len, buf);
    if (!m) return ox_err(OX_E_INVALID, "not an ONNX model (protobuf parse failed)");
    ox_status st = OX_OK;
    struct ox_graph *g = im->root;
    if (!m->graph) {
        st = ox_err(OX_E_INVALID, "not an ONNX model (it has no graph)");
        goto out;
    }
    g->ir_version = m->has_ir_version ? m->ir_version : 0;
    if (g->ir_version < 0 || g->ir_version > OX_ONNX_MAX_IR_VERSION) {
        st = ox_err(g->ir_version < 0 ? OX_E_INVALID : OX_E_UNSUPPORTED,
                    "IR version %lld is not one onnxexec reads (1 to %d)", (long long)g->ir_version,
                    OX_ONNX_MAX_IR_VERSION);
        goto out;
    }
    g->producer_name = gstrdup(g, m->producer_name);
    g->producer_version = gstrdup(g, m->producer_version);
    g->doc = gstrdup(g, m->doc_string);
    g->model_domain = gstrdup(g, m->domain);
    g->model_version = m->has_model_version ? m->model_version : 0;
    if (!g->producer_name || !g->producer_version || !g->doc || !g->model_domain) {
        st = nomem();
        goto out;
    }
    if (m->n_metadata_props > MAX_COUNT) {
        st = ox_err(OX_E_INVALID, "too many metadata_props");
        goto out;
    }
    g->meta = ox_graph_alloc(g, sizeof *g->meta * (m->n_metadata_props + 1));
    if (!g->meta) {
        st = nomem();
        goto out;
    }
    for (size_t i = 0; i < m->n_metadata_props; i++) {
        g->meta[i].key = gstrdup(g, m->metadata_props[i]->key);
        g->meta[i].value = gstrdup(g, m->metadata_props[i]->value);
        if (!g->meta[i].key || !g->meta[i].value) {
            st = nomem();
            goto out;
        }
        g->n_meta++;
    }
    if (m->n_opset_import > MAX_COUNT) {
        st = ox_err(OX_E_INVALID, "too many opset imports");
        goto out;
    }
    g->opsets = ox_graph_alloc(g, sizeof *g->opsets * (m->n_opset_import + 1));
    if (!g->opsets) {
        st = nomem();
        goto out;
    }
    for (size_t i = 0; i < m->n_opset_import; i++) {
        const char *d = norm_domain(m->opset_import[i]->domain);
        if (ox_graph_opset(g, d)) continue; /* the first import of a domain counts */
        g->opsets[g->n_opsets].domain = gstrdup(g, d);
        g->opsets[g->n_opsets].version = m->opset_import[i]->version;
        if (!g->opsets[g->n_opsets].domain) {
            st = nomem();
            goto out;
        }
        g->n_opsets++;
    }
    if (m->n_opset_import == 0 && g->ir_version < 3) { /* before opset imports: opset 1 */
        g->opsets[0].domain = "";
        g->opsets[0].version = 1;
        g->n_opsets = 1;
    }
    st = load_funcs(im, m);
    if (st) goto out;
    struct scope s = {.g = g};
    st = import_graph(im, &s, m->graph);
out:
    free_funcs(im);
    onnx__model_proto__free_unpacked(m, NULL);
    return st;
}

static ox_status import(const char *file, const uint8_t *buf, size_t len, const uint8_t *map,
                        size_t map_len, const char *dir, const ox_limits *lim,
                        struct ox_graph **out) {
    *out = NULL;
    struct imp im = {.file = file, .map = map, .model_bytes = len};
    ox_status lst = ox_limits_fill(lim, &im.lim);
    if (!lst && len > im.lim.model_bytes)
        lst = ox_err_limit("model_bytes", im.lim.model_bytes, "the model takes %zu bytes", len);
    if (lst) {
        if (map) ox_unmap((void *)map, map_len);
        return ox_err_prefix(lst, "%s: ", file);
    }
    im.root = ox_graph_create(NULL);
    im.src.ext = ox_ext_cache_create();
    if (!im.root || !im.src.ext) {
        ox_graph_free(im.root);
        ox_ext_cache_free(im.src.ext);
        if (map) ox_unmap((void *)map, map_len);
        return ox_err(OX_E_NOMEM, "%s: out of memory", file);
    }
    im.src.dir = dir;
    im.src.keep = im.root;
    im.src.lim = &im.lim;
    im.src.model_bytes = &im.model_bytes;
    ox_status st = OX_OK;
    if (map) st = ox_graph_keep_map(im.root, (void *)map, map_len);
    if (!st) st = import_model(&im, buf, len);
    free(im.locs);
    ox_ext_cache_free(im.src.ext);
    if (st) {
        ox_graph_free(im.root);
        return ox_err_prefix(st, "%s: ", file);
    }
    if (map && !im.borrowed_from_map) { /* nothing points into the model file: let it go */
        struct ox_graph *g = im.root;
        for (int i = 0; i < g->n_maps; i++)
            if (g->maps[i].addr == map) {
                ox_unmap(g->maps[i].addr, g->maps[i].len);
                g->maps[i] = g->maps[--g->n_maps];
                break;
            }
    }
#ifdef MADV_PAGEOUT
    /* parsing touched every page of the file: let the weights go back to the page cache
     * until a kernel reads them (most are read once, to be packed) */
    if (map && im.borrowed_from_map) (void)madvise((void *)map, map_len, MADV_PAGEOUT);
#endif
    *out = im.root;
    return OX_OK;
}

ox_status ox_onnx_import_file(const char *path, struct ox_graph **out) {
    return ox_onnx_import_file_with(path, NULL, out);
}

ox_status ox_onnx_import_file_with(const char *path, const ox_limits *lim, struct ox_graph **out) {
    *out = NULL;
    ox_limits l;
    ox_status lst = ox_limits_fill(lim, &l);
    if (lst) return ox_err_prefix(lst, "%s: ", path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ox_err(OX_E_IO, "%s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return ox_err(OX_E_IO, "%s: not a regular file", path);
    }
    if ((uint64_t)sb.st_size > SIZE_MAX) {
        close(fd);
        return ox_err(OX_E_NOMEM, "%s: file too large", path);
    }
    size_t len = (size_t)sb.st_size;
    if (len == 0) {
        close(fd);
        return ox_err(OX_E_INVALID, "%s: empty file, not an ONNX model", path);
    }
    if (len > l.model_bytes) { /* before it is mapped */
        close(fd);
        return ox_err_prefix(
            ox_err_limit("model_bytes", l.model_bytes, "the file has %zu bytes", len),
            "%s: ", path);
    }
    void *map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (map == MAP_FAILED) return ox_err(OX_E_IO, "%s: cannot map: %s", path, strerror(e));
    const char *slash = strrchr(path, '/');
    char *dir =
        slash ? (slash == path ? strdup("/") : strndup(path, (size_t)(slash - path))) : strdup(".");
    if (!dir) {
        ox_unmap(map, len);
        return ox_err(OX_E_NOMEM, "%s: out of memory", path);
    }
    ox_status st = import(path, map, len, map, len, dir, &l, out);
    free(dir);
    return st;
}

ox_status ox_onnx_import_buffer(const void *buf, size_t len, const char *dir,
                                struct ox_graph **out) {
    return ox_onnx_import_buffer_with(buf, len, dir, NULL, out);
}

ox_status ox_onnx_import_buffer_with(const void *buf, size_t len, const char *dir,
                                     const ox_limits *lim, struct ox_graph **out) {
    if (!buf && len) {
        *out = NULL;
        return ox_err(OX_E_INVALID, "model buffer: NULL with %zu bytes", len);
    }
    return import("model buffer", buf, len, NULL, 0, dir, lim, out);
}
