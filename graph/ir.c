/* The IR: arena, graph construction, lookup, topological sort, errors, dtype helpers. */
#include "graph/ir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* ---- errors ---------------------------------------------------------------------------- */

static _Thread_local char errbuf[1024];

const char *ox_errmsg(void) {
    return errbuf;
}

ox_status ox_err(ox_status code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(errbuf, sizeof errbuf, fmt, ap);
    va_end(ap);
    return code;
}

ox_status ox_err_prefix(ox_status code, const char *fmt, ...) {
    char old[sizeof errbuf];
    memcpy(old, errbuf, sizeof old);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(errbuf, sizeof errbuf, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof errbuf)
        snprintf(errbuf + n, sizeof errbuf - (size_t)n, "%s", old);
    return code;
}

const char *ox_status_name(ox_status st) {
    switch (st) {
    case OX_OK: return "OX_OK";
    case OX_E_INVALID: return "OX_E_INVALID";
    case OX_E_UNSUPPORTED: return "OX_E_UNSUPPORTED";
    case OX_E_SHAPE: return "OX_E_SHAPE";
    case OX_E_NOMEM: return "OX_E_NOMEM";
    case OX_E_IO: return "OX_E_IO";
    case OX_E_DEVICE: return "OX_E_DEVICE";
    case OX_E_INTERNAL: return "OX_E_INTERNAL";
    case OX_E_LIMIT: return "OX_E_LIMIT";
    }
    return "?";
}

/* ---- limits ---------------------------------------------------------------------------- */

static const ox_limits default_limits = {
    .model_bytes = OX_LIMIT_MODEL_BYTES,
    .tensor_bytes = OX_LIMIT_TENSOR_BYTES,
    .rank = OX_LIMIT_RANK,
    .nodes = OX_LIMIT_NODES,
    .subgraph_depth = OX_LIMIT_SUBGRAPH_DEPTH,
    .string_length = OX_LIMIT_STRING_LENGTH,
    .plan_bytes = OX_LIMIT_PLAN_BYTES,
};

const ox_limits *ox_limits_default(void) {
    return &default_limits;
}

ox_status ox_limits_fill(const ox_limits *in, ox_limits *out) {
    const ox_limits *d = &default_limits;
    *out = *d;
    if (!in) return OX_OK;
    if (in->rank < 0 || in->rank > OX_MAX_RANK)
        return ox_err(OX_E_INVALID, "ox_limits.rank %d is out of range (1 to %d, 0: %d)", in->rank,
                      OX_MAX_RANK, d->rank);
    if (in->nodes < 0)
        return ox_err(OX_E_INVALID, "ox_limits.nodes %lld is negative", (long long)in->nodes);
    if (in->subgraph_depth < 0 || in->subgraph_depth > OX_LIMIT_MAX_SUBGRAPH_DEPTH)
        return ox_err(OX_E_INVALID, "ox_limits.subgraph_depth %d is out of range (1 to %d, 0: %d)",
                      in->subgraph_depth, OX_LIMIT_MAX_SUBGRAPH_DEPTH, d->subgraph_depth);
    if (in->model_bytes) out->model_bytes = in->model_bytes;
    if (in->tensor_bytes) out->tensor_bytes = in->tensor_bytes;
    if (in->rank) out->rank = in->rank;
    if (in->nodes) out->nodes = in->nodes;
    if (in->subgraph_depth) out->subgraph_depth = in->subgraph_depth;
    if (in->string_length) out->string_length = in->string_length;
    if (in->plan_bytes) out->plan_bytes = in->plan_bytes;
    return OX_OK;
}

ox_status ox_err_limit(const char *name, uint64_t limit, const char *fmt, ...) {
    char what[sizeof errbuf];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    bool plan = strcmp(name, "plan_bytes") == 0;
    return ox_err(OX_E_LIMIT,
                  "%s: over the limit %s=%llu (raise it: ox_limits.%s%s, or onnxexec --limit %s=N)",
                  what, name, (unsigned long long)limit, name,
                  plan ? " or ox_session_options.plan_bytes" : "", name);
}

ox_status ox_check_rank(uint64_t rank, int limit, const char *what) {
    if (rank > OX_MAX_RANK)
        return ox_err(OX_E_UNSUPPORTED, "%s has rank %llu, beyond onnxexec's maximum of %d", what,
                      (unsigned long long)rank, OX_MAX_RANK);
    if (limit > 0 && rank > (uint64_t)limit)
        return ox_err_limit("rank", (uint64_t)limit, "%s has rank %llu", what,
                            (unsigned long long)rank);
    return OX_OK;
}

const char *ox_version(void) {
#define OX_STR2(x) #x
#define OX_STR(x)  OX_STR2(x)
    return OX_STR(OX_VERSION_MAJOR) "." OX_STR(OX_VERSION_MINOR) "." OX_STR(OX_VERSION_PATCH);
}

/* ---- checked sizes --------------------------------------------------------------------- */

bool ox_mul_size(size_t a, size_t b, size_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}

bool ox_add_size(size_t a, size_t b, size_t *out) {
    return !__builtin_add_overflow(a, b, out);
}

bool ox_tensor_bytes(ox_dtype dt, int rank, const int64_t *dims, size_t *out) {
    size_t n = ox_dtype_size(dt);
    if (n == 0 || rank < 0 || rank > OX_MAX_RANK) return false;
    for (int i = 0; i < rank; i++) {
        if (dims[i] < 0 || (uint64_t)dims[i] > SIZE_MAX) return false;
        if (!ox_mul_size(n, (size_t)dims[i], &n)) return false;
    }
    *out = n;
    return true;
}

/* ---- dtypes ---------------------------------------------------------------------------- */

static const struct {
    const char *name;
    size_t size;
} dtypes[OX_N_DTYPES] = {
    [OX_UNDEFINED] = {"undefined", 0},
    [OX_FLOAT] = {"float", 4},
    [OX_UINT8] = {"uint8", 1},
    [OX_INT8] = {"int8", 1},
    [OX_UINT16] = {"uint16", 2},
    [OX_INT16] = {"int16", 2},
    [OX_INT32] = {"int32", 4},
    [OX_INT64] = {"int64", 8},
    [OX_STRING] = {"string", sizeof(char *)},
    [OX_BOOL] = {"bool", 1},
    [OX_FLOAT16] = {"float16", 2},
    [OX_DOUBLE] = {"double", 8},
    [OX_UINT32] = {"uint32", 4},
    [OX_UINT64] = {"uint64", 8},
    [OX_COMPLEX64] = {"complex64", 8},
    [OX_COMPLEX128] = {"complex128", 16},
    [OX_BFLOAT16] = {"bfloat16", 2},
    [OX_FLOAT8E4M3FN] = {"float8e4m3fn", 1},
    [OX_FLOAT8E4M3FNUZ] = {"float8e4m3fnuz", 1},
    [OX_FLOAT8E5M2] = {"float8e5m2", 1},
    [OX_FLOAT8E5M2FNUZ] = {"float8e5m2fnuz", 1},
    [OX_UINT4] = {"uint4", 1},
    [OX_INT4] = {"int4", 1},
    [OX_FLOAT4E2M1] = {"float4e2m1", 1},
    [OX_FLOAT8E8M0] = {"float8e8m0", 1},
    [OX_UINT2] = {"uint2", 1},
    [OX_INT2] = {"int2", 1},
};

const char *ox_dtype_name(ox_dtype dt) {
    return (unsigned)dt < OX_N_DTYPES ? dtypes[dt].name : "?";
}

size_t ox_dtype_size(ox_dtype dt) {
    return (unsigned)dt < OX_N_DTYPES ? dtypes[dt].size : 0;
}

bool ox_dtype_is_float(ox_dtype dt) {
    switch (dt) {
    case OX_FLOAT:
    case OX_DOUBLE:
    case OX_FLOAT16:
    case OX_BFLOAT16:
    case OX_FLOAT8E4M3FN:
    case OX_FLOAT8E4M3FNUZ:
    case OX_FLOAT8E5M2:
    case OX_FLOAT8E5M2FNUZ:
    case OX_FLOAT4E2M1:
    case OX_FLOAT8E8M0: return true;
    default: return false;
    }
}

bool ox_dtype_is_int(ox_dtype dt) {
    switch (dt) {
    case OX_UINT8:
    case OX_INT8:
    case OX_UINT16:
    case OX_INT16:
    case OX_INT32:
    case OX_INT64:
    case OX_UINT32:
    case OX_UINT64:
    case OX_UINT4:
    case OX_INT4:
    case OX_UINT2:
    case OX_INT2: return true;
    default: return false;
    }
}

int64_t ox_tensor_numel(const ox_tensor *t) {
    /* a zero dim first: [16, 2^59, 0] is empty, and its first two dims alone overflow */
    for (int i = 0; i < t->rank; i++)
        if (t->dims[i] == 0) return 0;
    uint64_t n = 1; /* unsigned: a product past int64 wraps instead of being undefined */
    for (int i = 0; i < t->rank; i++) n *= (uint64_t)t->dims[i];
    return (int64_t)n;
}

float ox_half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: normalise */
            exp = 127 - 15 + 1;
            while (!(man & 0x400)) {
                man <<= 1;
                exp--;
            }
            bits = sign | (exp << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000 | (man << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t ox_float_to_half(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t absx = x & 0x7fffffff;
    if (absx > 0x7f800000) return (uint16_t)(sign | 0x7e00);  /* NaN */
    if (absx >= 0x477ff000) return (uint16_t)(sign | 0x7c00); /* overflow to inf */
    if (absx < 0x38800000) {                                  /* subnormal or zero in half */
        if (absx < 0x33000000) return (uint16_t)sign;
        uint32_t e = absx >> 23, m = (absx & 0x7fffff) | 0x800000;
        uint32_t shift = 126 - e; /* 14 + (113 - e) */
        uint32_t half = m >> shift, rem = m & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1))) half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = ((absx >> 13) - ((127 - 15) << 10));
    uint32_t rem = absx & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) half++;
    return (uint16_t)(sign | half);
}

float ox_bf16_to_float(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t ox_float_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffff) > 0x7f800000) return (uint16_t)((x >> 16) | 0x40);
    uint32_t lsb = (x >> 16) & 1;
    x += 0x7fff + lsb;
    return (uint16_t)(x >> 16);
}

/* ---- tensors --------------------------------------------------------------------------- */

ox_status ox_tensor_alloc(ox_tensor *t, ox_dtype dt, int rank, const int64_t *dims) {
    size_t bytes;
    if (!ox_tensor_bytes(dt, rank, dims, &bytes))
        return ox_err(OX_E_NOMEM, "tensor of %s with rank %d: size overflows", ox_dtype_name(dt),
                      rank);
    t->dtype = dt;
    t->rank = rank;
    for (int i = 0; i < rank; i++) t->dims[i] = dims[i];
    t->data = calloc(1, bytes ? bytes : 1);
    if (!t->data) return ox_err(OX_E_NOMEM, "out of memory allocating %zu bytes", bytes);
    if (dt == OX_STRING) {
        char **s = t->data;
        int64_t n = ox_tensor_numel(t);
        for (int64_t i = 0; i < n; i++) {
            s[i] = calloc(1, 1);
            if (!s[i]) {
                ox_tensor_free_data(t);
                return ox_err(OX_E_NOMEM, "out of memory");
            }
        }
    }
    return OX_OK;
}

void ox_tensor_free_data(ox_tensor *t) {
    if (!t) return;
    for (int i = 0; t->items && i < t->n_items; i++) ox_tensor_free_data(&t->items[i]);
    free(t->items);
    if (t->kind == OX_IO_TENSOR && t->dtype == OX_STRING && t->data) {
        char **s = t->data;
        int64_t n = ox_tensor_numel(t);
        for (int64_t i = 0; i < n; i++) free(s[i]);
    }
    free(t->data);
    memset(t, 0, sizeof *t);
}

ox_status ox_tensor_copy(ox_tensor *dst, const ox_tensor *src) {
    ox_tensor t = {0};
    if (src->kind != OX_IO_TENSOR) {
        t.kind = src->kind;
        t.dtype = src->dtype;
        t.name = src->name;
        if (src->n_items > 0) {
            t.items = calloc((size_t)src->n_items, sizeof *t.items);
            if (!t.items) return ox_err(OX_E_NOMEM, "out of memory");
        }
        for (int i = 0; i < src->n_items; i++) {
            ox_status st = ox_tensor_copy(&t.items[i], &src->items[i]);
            if (st) {
                ox_tensor_free_data(&t);
                return st;
            }
            t.n_items = i + 1;
        }
        *dst = t;
        return OX_OK;
    }
    ox_status st = ox_tensor_alloc(&t, src->dtype, src->rank, src->dims);
    if (st) return st;
    int64_t n = ox_tensor_numel(src);
    if (src->dtype == OX_STRING) {
        char **d = t.data, *const *s = src->data;
        for (int64_t i = 0; i < n; i++) {
            free(d[i]);
            d[i] = strdup(s[i] ? s[i] : "");
            if (!d[i]) {
                ox_tensor_free_data(&t);
                return ox_err(OX_E_NOMEM, "out of memory");
            }
        }
    } else if (n > 0) {
        memcpy(t.data, src->data, (size_t)n * ox_dtype_size(src->dtype));
    }
    t.name = src->name;
    *dst = t;
    return OX_OK;
}

const char *ox_tensor_desc(const ox_tensor *t, char *buf, size_t len) {
    size_t k = (size_t)snprintf(buf, len, "%s[", ox_dtype_name(t->dtype));
    for (int i = 0; i < t->rank && k < len; i++)
        k += (size_t)snprintf(buf + k, len - k, "%s%lld", i ? "," : "", (long long)t->dims[i]);
    if (k < len) snprintf(buf + k, len - k, "]");
    return buf;
}

/* ---- arena ----------------------------------------------------------------------------- */

struct ox_arena_chunk {
    struct ox_arena_chunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
};

void *ox_arena_alloc(struct ox_arena *a, size_t n) {
    size_t need = (n + 15) & ~(size_t)15;
    if (need < n) return NULL;
    struct ox_arena_chunk *c = a->head;
    if (!c || c->cap - c->used < need) {
        size_t cap = need > 65536 ? need : 65536;
        c = malloc(sizeof *c + cap);
        if (!c) return NULL;
        c->used = 0;
        c->cap = cap;
        c->next = a->head;
        a->head = c;
    }
    void *p = c->data + c->used;
    c->used += need;
    memset(p, 0, n);
    return p;
}

char *ox_arena_strndup(struct ox_arena *a, const char *s, size_t n) {
    char *d = ox_arena_alloc(a, n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

char *ox_arena_strdup(struct ox_arena *a, const char *s) {
    return ox_arena_strndup(a, s ? s : "", s ? strlen(s) : 0);
}

void ox_arena_free(struct ox_arena *a) {
    struct ox_arena_chunk *c = a->head;
    while (c) {
        struct ox_arena_chunk *next = c->next;
        free(c);
        c = next;
    }
    a->head = NULL;
}

/* ---- graph ----------------------------------------------------------------------------- */

struct ox_graph *ox_graph_create(struct ox_graph *parent) {
    struct ox_graph *g = calloc(1, sizeof *g);
    if (g) g->parent = parent;
    return g;
}

static void free_tensor_ptr(ox_tensor *t, bool borrowed) {
    if (!t) return;
    if (!borrowed) ox_tensor_free_data(t);
}

/* Names that `sub` (or a subgraph inside it) reads from g. */
static void count_outer_reads(const struct ox_graph *g, const struct ox_graph *sub, int *uses) {
    for (int v = 0; v < sub->n_values; v++) {
        if (!sub->values[v].is_outer) continue;
        int pv = ox_graph_find_value(g, sub->values[v].name);
        if (pv >= 0) uses[pv] += OX_USES_OUTSIDE;
    }
    for (int i = 0; i < sub->n_nodes; i++)
        for (int a = 0; a < sub->nodes[i].n_attrs; a++) {
            const struct ox_attr *at = &sub->nodes[i].attrs[a];
            if (at->type == OX_ATTR_GRAPH && at->g) count_outer_reads(g, at->g, uses);
            for (int k = 0; at->type == OX_ATTR_GRAPHS && k < at->n; k++)
                count_outer_reads(g, at->graphs[k], uses);
        }
}

void ox_graph_count_uses(const struct ox_graph *g, const bool *skip, int *uses) {
    if (g->n_values) memset(uses, 0, sizeof *uses * (size_t)g->n_values); /* uses may be NULL */
    for (int i = 0; i < g->n_nodes; i++) {
        if (skip && skip[i]) continue;
        const struct ox_node *n = &g->nodes[i];
        for (int k = 0; k < n->n_inputs; k++)
            if (n->inputs[k] >= 0) uses[n->inputs[k]]++;
        for (int a = 0; a < n->n_attrs; a++) {
            const struct ox_attr *at = &n->attrs[a];
            if (at->type == OX_ATTR_GRAPH && at->g) count_outer_reads(g, at->g, uses);
            for (int k = 0; at->type == OX_ATTR_GRAPHS && k < at->n; k++)
                count_outer_reads(g, at->graphs[k], uses);
        }
    }
    for (int k = 0; k < g->n_outputs; k++) uses[g->outputs[k]] += OX_USES_OUTSIDE;
}

void ox_node_free_attrs(struct ox_node *n) {
    for (int k = 0; k < n->n_attrs; k++) {
        struct ox_attr *a = &n->attrs[k];
        free_tensor_ptr(a->t, false);
        ox_graph_free(a->g);
        for (int j = 0; a->tensors && j < a->n; j++) free_tensor_ptr(a->tensors[j], false);
        for (int j = 0; a->graphs && j < a->n; j++) ox_graph_free(a->graphs[j]);
    }
    n->n_attrs = 0;
}

void ox_graph_free(struct ox_graph *g) {
    if (!g) return;
    for (int i = 0; i < g->n_values; i++)
        free_tensor_ptr(g->values[i].init, g->values[i].init_borrowed);
    for (int i = 0; i < g->n_nodes; i++) ox_node_free_attrs(&g->nodes[i]);
    for (int i = 0; i < g->n_maps; i++) ox_unmap(g->maps[i].addr, g->maps[i].len);
    free(g->maps);
    free(g->values);
    free(g->nodes);
    free(g->hash);
    ox_arena_free(&g->arena);
    free(g);
}

void ox_unmap(void *addr, size_t len) {
    if (addr && len) munmap(addr, len);
}

ox_status ox_graph_keep_map(struct ox_graph *g, void *addr, size_t len) {
    struct ox_map *m = realloc(g->maps, sizeof *m * (size_t)(g->n_maps + 1));
    if (!m) {
        ox_unmap(addr, len);
        return ox_err(OX_E_NOMEM, "out of memory");
    }
    g->maps = m;
    m[g->n_maps].addr = addr;
    m[g->n_maps].len = len;
    g->n_maps++;
    return OX_OK;
}

void *ox_graph_alloc(struct ox_graph *g, size_t n) {
    return ox_arena_alloc(&g->arena, n);
}

char *ox_graph_strdup(struct ox_graph *g, const char *s) {
    return ox_arena_strdup(&g->arena, s);
}

const char *ox_graph_meta(const struct ox_graph *g, const char *key) {
    while (g->parent) g = g->parent;
    for (int i = 0; i < g->n_meta; i++)
        if (strcmp(g->meta[i].key, key) == 0) return g->meta[i].value;
    return NULL;
}

ox_status ox_graph_set_meta(struct ox_graph *g, const char *key, const char *value) {
    while (g->parent) g = g->parent;
    char *v = ox_graph_strdup(g, value);
    if (!v) return ox_err(OX_E_NOMEM, "out of memory");
    for (int i = 0; i < g->n_meta; i++)
        if (strcmp(g->meta[i].key, key) == 0) {
            g->meta[i].value = v;
            return OX_OK;
        }
    struct ox_meta *m = ox_graph_alloc(g, sizeof *m * (size_t)(g->n_meta + 1));
    char *k = ox_graph_strdup(g, key);
    if (!m || !k) return ox_err(OX_E_NOMEM, "out of memory");
    if (g->n_meta) memcpy(m, g->meta, sizeof *m * (size_t)g->n_meta);
    m[g->n_meta] = (struct ox_meta){.key = k, .value = v};
    g->meta = m;
    g->n_meta++;
    return OX_OK;
}

static uint64_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static bool hash_grow(struct ox_graph *g) {
    int cap = g->hash_cap ? g->hash_cap * 2 : 256;
    int *h = malloc(sizeof *h * (size_t)cap);
    if (!h) return false;
    for (int i = 0; i < cap; i++) h[i] = -1;
    for (int v = 0; v < g->n_values; v++) {
        uint64_t k = hash_str(g->values[v].name) & (uint64_t)(cap - 1);
        while (h[k] >= 0) k = (k + 1) & (uint64_t)(cap - 1);
        h[k] = v;
    }
    free(g->hash);
    g->hash = h;
    g->hash_cap = cap;
    return true;
}

int ox_graph_find_value(const struct ox_graph *g, const char *name) {
    if (!g->hash_cap || !name) return -1;
    uint64_t k = hash_str(name) & (uint64_t)(g->hash_cap - 1);
    while (g->hash[k] >= 0) {
        if (strcmp(g->values[g->hash[k]].name, name) == 0) return g->hash[k];
        k = (k + 1) & (uint64_t)(g->hash_cap - 1);
    }
    return -1;
}

int ox_graph_add_value(struct ox_graph *g, const char *name) {
    char fresh[48];
    if (!name || !*name) {
        for (int k = g->n_values;; k++) {
            snprintf(fresh, sizeof fresh, "_ox_v%d", k);
            if (ox_graph_find_value(g, fresh) < 0) break;
        }
        name = fresh;
    } else {
        int v = ox_graph_find_value(g, name);
        if (v >= 0) return v;
    }
    if (g->n_values == g->cap_values) {
        int cap = g->cap_values ? g->cap_values * 2 : 64;
        struct ox_value *nv = realloc(g->values, sizeof *nv * (size_t)cap);
        if (!nv) return -1;
        g->values = nv;
        g->cap_values = cap;
    }
    if ((g->n_values + 1) * 2 > g->hash_cap && !hash_grow(g)) return -1;
    struct ox_value *v = &g->values[g->n_values];
    memset(v, 0, sizeof *v);
    v->name = ox_graph_strdup(g, name);
    if (!v->name) return -1;
    v->rank = -1;
    v->producer = -1;
    int id = g->n_values++;
    uint64_t k = hash_str(v->name) & (uint64_t)(g->hash_cap - 1);
    while (g->hash[k] >= 0) k = (k + 1) & (uint64_t)(g->hash_cap - 1);
    g->hash[k] = id;
    return id;
}

int ox_graph_add_value_like(struct ox_graph *g, int like, const char *suffix) {
    char name[256];
    int v = -1;
    for (int k = 0; k < 1000 && v < 0; k++) {
        snprintf(name, sizeof name, k ? "%s%s_%d" : "%s%s", g->values[like].name, suffix, k);
        if (ox_graph_find_value(g, name) < 0) v = ox_graph_add_value(g, name);
    }
    if (v >= 0) {
        g->values[v].kind = g->values[like].kind;
        g->values[v].dtype = g->values[like].dtype;
        g->values[v].rank = -1;
    }
    return v;
}

static ox_status add_io(struct ox_graph *g, int **list, int *n, int v) {
    int *a = ox_graph_alloc(g, sizeof(int) * (size_t)(*n + 1));
    if (!a) return ox_err(OX_E_NOMEM, "out of memory");
    if (*n) memcpy(a, *list, sizeof(int) * (size_t)*n);
    a[(*n)++] = v;
    *list = a;
    return OX_OK;
}

ox_status ox_graph_add_input(struct ox_graph *g, int v) {
    return add_io(g, &g->inputs, &g->n_inputs, v);
}

ox_status ox_graph_add_output(struct ox_graph *g, int v) {
    return add_io(g, &g->outputs, &g->n_outputs, v);
}

bool ox_graph_is_input(const struct ox_graph *g, int v) {
    for (int i = 0; i < g->n_inputs; i++)
        if (g->inputs[i] == v) return true;
    return false;
}

struct ox_node *ox_graph_add_node(struct ox_graph *g, const char *name, const char *domain,
                                  const char *op_type, int n_inputs, const int *inputs,
                                  int n_outputs, const int *outputs) {
    if (g->n_nodes == g->cap_nodes) {
        int cap = g->cap_nodes ? g->cap_nodes * 2 : 64;
        struct ox_node *nn = realloc(g->nodes, sizeof *nn * (size_t)cap);
        if (!nn) return NULL;
        g->nodes = nn;
        g->cap_nodes = cap;
    }
    struct ox_node *n = &g->nodes[g->n_nodes];
    memset(n, 0, sizeof *n);
    n->name = ox_graph_strdup(g, name ? name : "");
    n->domain = ox_graph_strdup(g, domain ? domain : "");
    n->op_type = ox_graph_strdup(g, op_type);
    n->inputs = ox_graph_alloc(g, sizeof(int) * (size_t)(n_inputs ? n_inputs : 1));
    n->outputs = ox_graph_alloc(g, sizeof(int) * (size_t)(n_outputs ? n_outputs : 1));
    if (!n->name || !n->domain || !n->op_type || !n->inputs || !n->outputs) return NULL;
    n->n_inputs = n_inputs;
    n->n_outputs = n_outputs;
    if (n_inputs) memcpy(n->inputs, inputs, sizeof(int) * (size_t)n_inputs);
    if (n_outputs) memcpy(n->outputs, outputs, sizeof(int) * (size_t)n_outputs);
    g->n_nodes++;
    for (int i = 0; i < n_outputs; i++)
        if (outputs[i] >= 0) g->values[outputs[i]].producer = g->n_nodes - 1;
    return n;
}

const struct ox_attr *ox_node_attr(const struct ox_node *n, const char *name) {
    for (int i = 0; i < n->n_attrs; i++)
        if (strcmp(n->attrs[i].name, name) == 0) return &n->attrs[i];
    return NULL;
}

int64_t ox_graph_opset(const struct ox_graph *g, const char *domain) {
    while (g->parent) g = g->parent;
    for (int i = 0; i < g->n_opsets; i++)
        if (strcmp(g->opsets[i].domain, domain) == 0) return g->opsets[i].version;
    return 0;
}

/* Names a subgraph reads from enclosing scopes count as dependencies of the node that owns
 * the subgraph, so that the node runs after their producers. */
static ox_status collect_outer(const struct ox_graph *sub, const struct ox_graph *g, int *deps,
                               int *n_deps, int max) {
    for (int v = 0; v < sub->n_values; v++) {
        if (!sub->values[v].is_outer) continue;
        int id = ox_graph_find_value(g, sub->values[v].name);
        if (id >= 0 && *n_deps < max) deps[(*n_deps)++] = id;
    }
    for (int i = 0; i < sub->n_nodes; i++)
        for (int k = 0; k < sub->nodes[i].n_attrs; k++) {
            const struct ox_attr *a = &sub->nodes[i].attrs[k];
            if (a->g) collect_outer(a->g, g, deps, n_deps, max);
            for (int j = 0; a->graphs && j < a->n; j++)
                collect_outer(a->graphs[j], g, deps, n_deps, max);
        }
    return OX_OK;
}

ox_status ox_graph_sort(struct ox_graph *g) {
    int nn = g->n_nodes;
    if (nn == 0) return OX_OK;
    /* producer of every value, from the node list as it stands */
    int *prod = malloc(sizeof(int) * (size_t)g->n_values);
    int *state = calloc((size_t)nn, sizeof(int)); /* 0 new, 1 on stack, 2 done */
    int *order = malloc(sizeof(int) * (size_t)nn);
    int *stack = malloc(sizeof(int) * (size_t)nn * 2);
    int depmax = 4096;
    int *deps = malloc(sizeof(int) * (size_t)depmax);
    ox_status st = OX_OK;
    if (!prod || !state || !order || !stack || !deps) {
        st = ox_err(OX_E_NOMEM, "out of memory sorting the graph");
        goto out;
    }
    for (int v = 0; v < g->n_values; v++) prod[v] = -1;
    for (int i = 0; i < nn; i++)
        for (int k = 0; k < g->nodes[i].n_outputs; k++) {
            int v = g->nodes[i].outputs[k];
            if (v < 0) continue;
            if (prod[v] >= 0) {
                st = ox_err(OX_E_INVALID,
                            "value '%s' is produced by two nodes: '%s' (%s) and '%s' (%s)",
                            g->values[v].name, g->nodes[prod[v]].name, g->nodes[prod[v]].op_type,
                            g->nodes[i].name, g->nodes[i].op_type);
                goto out;
            }
            if (g->values[v].init) {
                st = ox_err(OX_E_INVALID, "node '%s' (%s) writes '%s', which is an initializer",
                            g->nodes[i].name, g->nodes[i].op_type, g->values[v].name);
                goto out;
            }
            prod[v] = i;
        }
    /* iterative DFS in file order; post-order gives a topological order */
    int n_order = 0;
    for (int root = 0; root < nn; root++) {
        if (state[root]) continue;
        int sp = 0;
        stack[sp++] = root;
        stack[sp++] = 0; /* next input index to visit; inputs then outer deps */
        state[root] = 1;
        while (sp) {
            int node = stack[sp - 2], k = stack[sp - 1];
            const struct ox_node *n = &g->nodes[node];
            int n_deps = 0;
            for (int a = 0; a < n->n_attrs; a++) {
                const struct ox_attr *at = &n->attrs[a];
                if (at->g) collect_outer(at->g, g, deps, &n_deps, depmax);
                for (int j = 0; at->graphs && j < at->n; j++)
                    collect_outer(at->graphs[j], g, deps, &n_deps, depmax);
            }
            int total = n->n_inputs + n_deps;
            if (k >= total) {
                state[node] = 2;
                order[n_order++] = node;
                sp -= 2;
                continue;
            }
            stack[sp - 1] = k + 1;
            int v = k < n->n_inputs ? n->inputs[k] : deps[k - n->n_inputs];
            if (v < 0 || prod[v] < 0) continue;
            int p = prod[v];
            if (state[p] == 1) {
                st = ox_err(OX_E_INVALID,
                            "the graph has a cycle through node '%s' (%s) and value '%s'",
                            g->nodes[p].name, g->nodes[p].op_type, g->values[v].name);
                goto out;
            }
            if (state[p] == 0) {
                state[p] = 1;
                stack[sp++] = p;
                stack[sp++] = 0;
            }
        }
    }
    /* Permute only if needed. */
    bool sorted = true;
    for (int i = 0; i < nn; i++) sorted &= order[i] == i;
    if (!sorted) {
        struct ox_node *nodes = malloc(sizeof *nodes * (size_t)g->cap_nodes);
        if (!nodes) {
            st = ox_err(OX_E_NOMEM, "out of memory sorting the graph");
            goto out;
        }
        for (int i = 0; i < nn; i++) nodes[i] = g->nodes[order[i]];
        free(g->nodes);
        g->nodes = nodes;
    }
    for (int i = 0; i < nn; i++)
        for (int k = 0; k < g->nodes[i].n_outputs; k++)
            if (g->nodes[i].outputs[k] >= 0) g->values[g->nodes[i].outputs[k]].producer = i;
out:
    free(prod);
    free(state);
    free(order);
    free(stack);
    free(deps);
    return st;
}
