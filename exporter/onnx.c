/* IR → ONNX ModelProto (exporter/onnx.h says what is written and how). */
#include "exporter/onnx.h"

#include "importer/onnx.h"
#include "onnx/onnx.pb-c.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ALIGN_SMALL 64
#define ALIGN_LARGE 4096
#define LARGE_BYTES (1u << 20)

struct ex {
    struct ox_arena a; /* every protobuf struct built here, freed in one call */
    ProtobufCAllocator alloc;
    /* malloc'd wire buffers (byte-swapped or packed tensors), freed at the end */
    unsigned char **owned;
    size_t n_owned, cap_owned;
    /* external data: tensors of `threshold` bytes or more go to `data` */
    bool external;
    size_t threshold;
    FILE *data;
    const char *data_name;
    uint64_t data_off;
};

static ox_status nomem(void) {
    return ox_err(OX_E_NOMEM, "out of memory");
}

static void *xalloc(struct ex *e, size_t n) {
    return ox_arena_alloc(&e->a, n ? n : 1);
}

#define XNEW(e, type, init)                                                                        \
    ({                                                                                             \
        type *p_ = xalloc(e, sizeof(type));                                                        \
        if (p_) *p_ = (type)init;                                                                  \
        p_;                                                                                        \
    })

static void *pb_alloc(void *data, size_t n) {
    return xalloc(data, n);
}

static void pb_free(void *data, void *p) {
    (void)data;
    (void)p;
}

/* NULL for an empty string: proto2 optional fields are then left out. */
static char *opt_str(const char *s) {
    return s && *s ? (char *)s : NULL;
}

static bool keep_owned(struct ex *e, unsigned char *p) {
    if (e->n_owned == e->cap_owned) {
        size_t cap = e->cap_owned ? 2 * e->cap_owned : 16;
        unsigned char **o = realloc(e->owned, cap * sizeof *o);
        if (!o) return false;
        e->owned = o;
        e->cap_owned = cap;
    }
    e->owned[e->n_owned++] = p;
    return true;
}

/* ---- tensors --------------------------------------------------------------------------- */

static char *fmt_u64(struct ex *e, uint64_t v) {
    char buf[32];
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)v);
    return ox_arena_strdup(&e->a, buf);
}

/* Append `len` bytes at an aligned offset of the side file; *off receives the offset. */
static ox_status write_external(struct ex *e, const unsigned char *bytes, size_t len,
                                uint64_t *off) {
    uint64_t align = len >= LARGE_BYTES ? ALIGN_LARGE : ALIGN_SMALL;
    static const unsigned char zeros[ALIGN_LARGE];
    uint64_t pad = (align - e->data_off % align) % align;
    if (pad && fwrite(zeros, 1, (size_t)pad, e->data) != pad) goto fail;
    e->data_off += pad;
    *off = e->data_off;
    if (len && fwrite(bytes, 1, len, e->data) != len) goto fail;
    e->data_off += len;
    return OX_OK;
fail:
    return ox_err(OX_E_IO, "writing external data file '%s': %s", e->data_name, strerror(errno));
}

static Onnx__StringStringEntryProto *entry(struct ex *e, const char *key, char *value) {
    Onnx__StringStringEntryProto *kv =
        XNEW(e, Onnx__StringStringEntryProto, ONNX__STRING_STRING_ENTRY_PROTO__INIT);
    if (kv) {
        kv->key = (char *)key;
        kv->value = value;
    }
    return kv;
}

static ox_status tensor_proto(struct ex *e, const ox_tensor *t, const char *name,
                              Onnx__TensorProto **out) {
    Onnx__TensorProto *tp = XNEW(e, Onnx__TensorProto, ONNX__TENSOR_PROTO__INIT);
    if (!tp) return nomem();
    *out = tp;
    if (t->rank < 0 || t->rank > OX_MAX_RANK || t->dtype <= OX_UNDEFINED || t->dtype >= OX_N_DTYPES)
        return ox_err(OX_E_INVALID, "tensor '%s' has no valid type or rank", name ? name : "");
    tp->name = opt_str(name);
    tp->has_data_type = 1;
    tp->data_type = (int32_t)t->dtype;
    tp->n_dims = (size_t)t->rank;
    tp->dims = xalloc(e, sizeof(int64_t) * (size_t)(t->rank ? t->rank : 1));
    if (!tp->dims) return nomem();
    for (int i = 0; i < t->rank; i++) tp->dims[i] = t->dims[i];
    int64_t numel = ox_tensor_numel(t);
    if (numel > 0 && !t->data)
        return ox_err(OX_E_INVALID, "tensor '%s' has no data", name ? name : "");
    if (t->dtype == OX_STRING) {
        tp->n_string_data = (size_t)numel;
        tp->string_data = xalloc(e, sizeof(ProtobufCBinaryData) * (size_t)numel);
        if (!tp->string_data) return nomem();
        char *const *s = t->data;
        for (int64_t k = 0; k < numel; k++) {
            tp->string_data[k].data = (uint8_t *)(s[k] ? s[k] : "");
            tp->string_data[k].len = s[k] ? strlen(s[k]) : 0;
        }
        return OX_OK;
    }
    const unsigned char *bytes;
    unsigned char *owned;
    size_t len;
    ox_status st = ox_tensor_wire(t, &bytes, &len, &owned);
    if (st) return ox_err_prefix(st, "tensor '%s': ", name ? name : "");
    if (owned && !keep_owned(e, owned)) {
        free(owned);
        return nomem();
    }
    if (e->external && len >= e->threshold && len > 0) {
        uint64_t off = 0;
        st = write_external(e, bytes, len, &off);
        if (st) return st;
        tp->has_data_location = 1;
        tp->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
        tp->n_external_data = 3;
        tp->external_data = xalloc(e, sizeof(Onnx__StringStringEntryProto *) * 3);
        if (!tp->external_data) return nomem();
        tp->external_data[0] = entry(e, "location", (char *)e->data_name);
        tp->external_data[1] = entry(e, "offset", fmt_u64(e, off));
        tp->external_data[2] = entry(e, "length", fmt_u64(e, len));
        for (int i = 0; i < 3; i++)
            if (!tp->external_data[i] || !tp->external_data[i]->value) return nomem();
        return OX_OK;
    }
    tp->has_raw_data = 1;
    tp->raw_data.data = (uint8_t *)bytes;
    tp->raw_data.len = len;
    return OX_OK;
}

static bool elem_is_zero(const ox_tensor *t, int64_t k) {
    if (t->dtype == OX_STRING) {
        const char *s = ((char *const *)t->data)[k];
        return !s || !*s;
    }
    size_t sz = ox_dtype_size(t->dtype);
    const unsigned char *p = (const unsigned char *)t->data + (size_t)k * sz;
    for (size_t b = 0; b < sz; b++)
        if (p[b]) return false;
    return true;
}

/* A dense tensor as a SparseTensorProto: its nonzero elements, with [NNZ, rank] indices. */
static ox_status sparse_proto(struct ex *e, const ox_tensor *t, const char *name,
                              Onnx__SparseTensorProto **out) {
    Onnx__SparseTensorProto *sp = XNEW(e, Onnx__SparseTensorProto, ONNX__SPARSE_TENSOR_PROTO__INIT);
    if (!sp) return nomem();
    *out = sp;
    if (t->rank < 1) return ox_err(OX_E_INVALID, "sparse tensor '%s' has rank 0", name);
    int64_t numel = ox_tensor_numel(t), nnz = 0;
    for (int64_t k = 0; k < numel; k++) nnz += !elem_is_zero(t, k);
    size_t esz = ox_dtype_size(t->dtype);
    ox_tensor vals = {.dtype = t->dtype, .rank = 1, .dims = {nnz}};
    ox_tensor idx = {.dtype = OX_INT64, .rank = 2, .dims = {nnz, t->rank}};
    vals.data = xalloc(e, esz * (size_t)nnz);
    idx.data = xalloc(e, sizeof(int64_t) * (size_t)(nnz * t->rank));
    if (!vals.data || !idx.data) return nomem();
    int64_t w = 0;
    for (int64_t k = 0; k < numel; k++) {
        if (elem_is_zero(t, k)) continue;
        memcpy((char *)vals.data + (size_t)w * esz, (const char *)t->data + (size_t)k * esz, esz);
        int64_t rest = k;
        for (int j = t->rank - 1; j >= 0; j--) {
            ((int64_t *)idx.data)[w * t->rank + j] = rest % t->dims[j];
            rest /= t->dims[j];
        }
        w++;
    }
    sp->n_dims = (size_t)t->rank;
    sp->dims = xalloc(e, sizeof(int64_t) * (size_t)t->rank);
    if (!sp->dims) return nomem();
    for (int i = 0; i < t->rank; i++) sp->dims[i] = t->dims[i];
    ox_status st = tensor_proto(e, &vals, name, &sp->values);
    if (!st) st = tensor_proto(e, &idx, NULL, &sp->indices);
    return st;
}

/* ---- types ----------------------------------------------------------------------------- */

static ox_status unpack_type(struct ex *e, const uint8_t *pb, size_t len, Onnx__TypeProto **out) {
    *out = onnx__type_proto__unpack(&e->alloc, len, pb);
    return *out ? OX_OK : ox_err(OX_E_INTERNAL, "a kept TypeProto does not parse");
}

static Onnx__TypeProto__Tensor *tensor_type(struct ex *e, const struct ox_value *v) {
    Onnx__TypeProto__Tensor *tt = XNEW(e, Onnx__TypeProto__Tensor, ONNX__TYPE_PROTO__TENSOR__INIT);
    if (!tt) return NULL;
    if (v->dtype != OX_UNDEFINED) {
        tt->has_elem_type = 1;
        tt->elem_type = (int32_t)v->dtype;
    }
    if (v->rank < 0) return tt;
    Onnx__TensorShapeProto *sh = XNEW(e, Onnx__TensorShapeProto, ONNX__TENSOR_SHAPE_PROTO__INIT);
    if (!sh) return NULL;
    tt->shape = sh;
    sh->n_dim = (size_t)v->rank;
    sh->dim = xalloc(e, sizeof(Onnx__TensorShapeProto__Dimension *) * (size_t)v->rank);
    if (!sh->dim) return NULL;
    for (int i = 0; i < v->rank; i++) {
        Onnx__TensorShapeProto__Dimension *d =
            XNEW(e, Onnx__TensorShapeProto__Dimension, ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT);
        if (!d) return NULL;
        sh->dim[i] = d;
        if (v->dims[i].value >= 0) {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            d->dim_value = v->dims[i].value;
        } else if (v->dims[i].symbol && *v->dims[i].symbol) {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            d->dim_param = (char *)v->dims[i].symbol;
        }
    }
    return tt;
}

static bool has_type(const struct ox_value *v) {
    return v->type_pb || v->dtype != OX_UNDEFINED || v->rank >= 0 || v->kind != OX_KIND_TENSOR;
}

/* The value's TypeProto, or NULL in *out when nothing is known about it. */
static ox_status type_proto(struct ex *e, const struct ox_value *v, Onnx__TypeProto **out) {
    *out = NULL;
    if (v->type_pb) return unpack_type(e, v->type_pb, v->type_pb_len, out);
    if (!has_type(v)) return OX_OK;
    Onnx__TypeProto *tp = XNEW(e, Onnx__TypeProto, ONNX__TYPE_PROTO__INIT);
    Onnx__TypeProto__Tensor *tt = tensor_type(e, v);
    if (!tp || !tt) return nomem();
    switch (v->kind) {
    case OX_KIND_TENSOR:
        tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
        tp->tensor_type = tt;
        break;
    case OX_KIND_SEQUENCE:
    case OX_KIND_OPTIONAL: {
        Onnx__TypeProto *inner = XNEW(e, Onnx__TypeProto, ONNX__TYPE_PROTO__INIT);
        if (!inner) return nomem();
        inner->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
        inner->tensor_type = tt;
        if (v->kind == OX_KIND_SEQUENCE) {
            Onnx__TypeProto__Sequence *sq =
                XNEW(e, Onnx__TypeProto__Sequence, ONNX__TYPE_PROTO__SEQUENCE__INIT);
            if (!sq) return nomem();
            sq->elem_type = inner;
            tp->value_case = ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE;
            tp->sequence_type = sq;
        } else {
            Onnx__TypeProto__Optional *op =
                XNEW(e, Onnx__TypeProto__Optional, ONNX__TYPE_PROTO__OPTIONAL__INIT);
            if (!op) return nomem();
            op->elem_type = inner;
            tp->value_case = ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE;
            tp->optional_type = op;
        }
        break;
    }
    case OX_KIND_SPARSE: {
        Onnx__TypeProto__SparseTensor *st =
            XNEW(e, Onnx__TypeProto__SparseTensor, ONNX__TYPE_PROTO__SPARSE_TENSOR__INIT);
        if (!st) return nomem();
        st->has_elem_type = tt->has_elem_type;
        st->elem_type = tt->elem_type;
        st->shape = tt->shape;
        tp->value_case = ONNX__TYPE_PROTO__VALUE_SPARSE_TENSOR_TYPE;
        tp->sparse_tensor_type = st;
        break;
    }
    default: return ox_err(OX_E_INVALID, "value '%s': its type (a map) was not kept", v->name);
    }
    *out = tp;
    return OX_OK;
}

static ox_status value_info(struct ex *e, const struct ox_value *v, Onnx__ValueInfoProto **out) {
    Onnx__ValueInfoProto *vi = XNEW(e, Onnx__ValueInfoProto, ONNX__VALUE_INFO_PROTO__INIT);
    if (!vi) return nomem();
    vi->name = (char *)v->name;
    *out = vi;
    return type_proto(e, v, &vi->type);
}

/* ---- attributes, nodes, graphs --------------------------------------------------------- */

static ox_status graph_proto(struct ex *e, const struct ox_graph *g, Onnx__GraphProto **out);

static ox_status attr_proto(struct ex *e, const struct ox_attr *a, Onnx__AttributeProto **out) {
    Onnx__AttributeProto *ap = XNEW(e, Onnx__AttributeProto, ONNX__ATTRIBUTE_PROTO__INIT);
    if (!ap) return nomem();
    *out = ap;
    ap->name = (char *)a->name;
    ap->ref_attr_name = opt_str(a->ref_attr_name);
    ap->has_type = 1;
    ap->type = (Onnx__AttributeProto__AttributeType)a->type;
    size_t n = a->n > 0 ? (size_t)a->n : 0;
    ox_status st = OX_OK;
    switch (a->type) {
    case OX_ATTR_FLOAT:
        ap->has_f = 1;
        ap->f = a->f;
        break;
    case OX_ATTR_INT:
        ap->has_i = 1;
        ap->i = a->i;
        break;
    case OX_ATTR_STRING:
        ap->has_s = 1;
        ap->s.data = (uint8_t *)(a->s ? a->s : "");
        ap->s.len = a->s ? a->s_len : 0;
        break;
    case OX_ATTR_TENSOR: return tensor_proto(e, a->t, a->t->name, &ap->t);
    case OX_ATTR_SPARSE_TENSOR: return sparse_proto(e, a->t, a->t->name, &ap->sparse_tensor);
    case OX_ATTR_GRAPH: return graph_proto(e, a->g, &ap->g);
    case OX_ATTR_TYPE_PROTO:
        if (!a->type_pb) break;
        return unpack_type(e, a->type_pb, a->type_pb_len, &ap->tp);
    case OX_ATTR_FLOATS:
        ap->n_floats = n;
        ap->floats = a->floats;
        break;
    case OX_ATTR_INTS:
        ap->n_ints = n;
        ap->ints = a->ints;
        break;
    case OX_ATTR_STRINGS:
        ap->n_strings = n;
        ap->strings = xalloc(e, sizeof(ProtobufCBinaryData) * n);
        if (!ap->strings) return nomem();
        for (size_t k = 0; k < n; k++) {
            ap->strings[k].data = (uint8_t *)a->strings[k];
            ap->strings[k].len = a->string_lens[k];
        }
        break;
    case OX_ATTR_TENSORS:
        ap->n_tensors = n;
        ap->tensors = xalloc(e, sizeof(Onnx__TensorProto *) * n);
        if (!ap->tensors) return nomem();
        for (size_t k = 0; k < n && !st; k++)
            st = tensor_proto(e, a->tensors[k], a->tensors[k]->name, &ap->tensors[k]);
        break;
    case OX_ATTR_SPARSE_TENSORS:
        ap->n_sparse_tensors = n;
        ap->sparse_tensors = xalloc(e, sizeof(Onnx__SparseTensorProto *) * n);
        if (!ap->sparse_tensors) return nomem();
        for (size_t k = 0; k < n && !st; k++)
            st = sparse_proto(e, a->tensors[k], a->tensors[k]->name, &ap->sparse_tensors[k]);
        break;
    case OX_ATTR_GRAPHS:
        ap->n_graphs = n;
        ap->graphs = xalloc(e, sizeof(Onnx__GraphProto *) * n);
        if (!ap->graphs) return nomem();
        for (size_t k = 0; k < n && !st; k++) st = graph_proto(e, a->graphs[k], &ap->graphs[k]);
        break;
    case OX_ATTR_TYPE_PROTOS:
        if (!a->type_pbs) break;
        ap->n_type_protos = n;
        ap->type_protos = xalloc(e, sizeof(Onnx__TypeProto *) * n);
        if (!ap->type_protos) return nomem();
        for (size_t k = 0; k < n && !st; k++)
            st = unpack_type(e, a->type_pbs[k], a->type_pb_lens[k], &ap->type_protos[k]);
        break;
    default: break;
    }
    if (!st && ((a->type == OX_ATTR_TYPE_PROTO && !a->type_pb) ||
                (a->type == OX_ATTR_TYPE_PROTOS && !a->type_pbs)))
        return ox_err(OX_E_INVALID, "attribute '%s': a type made inside onnxexec cannot be written",
                      a->name);
    if (st) return st;
    if (a->type <= OX_ATTR_UNDEFINED || a->type > OX_ATTR_TYPE_PROTOS)
        return ox_err(OX_E_INVALID, "attribute '%s' has no ONNX type (%d)", a->name, (int)a->type);
    return OX_OK;
}

static const char *value_name(const struct ox_graph *g, int v) {
    return v >= 0 ? g->values[v].name : "";
}

static ox_status node_proto(struct ex *e, const struct ox_graph *g, const struct ox_node *n,
                            Onnx__NodeProto **out) {
    Onnx__NodeProto *np = XNEW(e, Onnx__NodeProto, ONNX__NODE_PROTO__INIT);
    if (!np) return nomem();
    *out = np;
    np->name = opt_str(n->name);
    np->op_type = (char *)n->op_type;
    np->domain = opt_str(n->domain);
    np->doc_string = opt_str(n->doc);
    np->n_input = (size_t)n->n_inputs;
    np->input = xalloc(e, sizeof(char *) * (size_t)n->n_inputs);
    np->n_output = (size_t)n->n_outputs;
    np->output = xalloc(e, sizeof(char *) * (size_t)n->n_outputs);
    np->n_attribute = (size_t)n->n_attrs;
    np->attribute = xalloc(e, sizeof(Onnx__AttributeProto *) * (size_t)n->n_attrs);
    if (!np->input || !np->output || !np->attribute) return nomem();
    for (int i = 0; i < n->n_inputs; i++) np->input[i] = (char *)value_name(g, n->inputs[i]);
    for (int i = 0; i < n->n_outputs; i++) np->output[i] = (char *)value_name(g, n->outputs[i]);
    for (int k = 0; k < n->n_attrs; k++) {
        ox_status st = attr_proto(e, &n->attrs[k], &np->attribute[k]);
        if (st) return ox_err_prefix(st, "attribute '%s': ", n->attrs[k].name);
    }
    return OX_OK;
}

static bool is_listed(const int *ids, int n, int v) {
    for (int i = 0; i < n; i++)
        if (ids[i] == v) return true;
    return false;
}

static _Thread_local const struct ox_graph *sort_ctx;

static int cmp_init(const void *pa, const void *pb) {
    int a = *(const int *)pa, b = *(const int *)pb;
    int oa = sort_ctx->values[a].init_order, ob = sort_ctx->values[b].init_order;
    if (oa != ob) return oa == 0 ? 1 : ob == 0 ? -1 : oa < ob ? -1 : 1;
    return a < b ? -1 : a > b;
}

static ox_status graph_proto(struct ex *e, const struct ox_graph *g, Onnx__GraphProto **out) {
    Onnx__GraphProto *gp = XNEW(e, Onnx__GraphProto, ONNX__GRAPH_PROTO__INIT);
    if (!gp) return nomem();
    *out = gp;
    gp->name = (char *)(g->name ? g->name : "");
    gp->doc_string = opt_str(g->graph_doc);
    ox_status st;
    gp->input = xalloc(e, sizeof(Onnx__ValueInfoProto *) * (size_t)g->n_inputs);
    gp->output = xalloc(e, sizeof(Onnx__ValueInfoProto *) * (size_t)g->n_outputs);
    gp->node = xalloc(e, sizeof(Onnx__NodeProto *) * (size_t)g->n_nodes);
    gp->initializer = xalloc(e, sizeof(Onnx__TensorProto *) * (size_t)g->n_values);
    gp->sparse_initializer = xalloc(e, sizeof(Onnx__SparseTensorProto *) * (size_t)g->n_values);
    gp->value_info = xalloc(e, sizeof(Onnx__ValueInfoProto *) * (size_t)g->n_values);
    if (!gp->input || !gp->output || !gp->node || !gp->initializer || !gp->sparse_initializer ||
        !gp->value_info)
        return nomem();
    for (int i = 0; i < g->n_inputs; i++) {
        st = value_info(e, &g->values[g->inputs[i]], &gp->input[gp->n_input++]);
        if (st) return ox_err_prefix(st, "graph input '%s': ", g->values[g->inputs[i]].name);
    }
    /* initializers in the file's order, then those made since in value order: a re-import
     * numbers them in this order again */
    int *order = xalloc(e, sizeof(int) * (size_t)g->n_values), n_order = 0;
    if (!order) return nomem();
    for (int v = 0; v < g->n_values; v++)
        if (g->values[v].init && !g->values[v].is_outer) order[n_order++] = v;
    sort_ctx = g;
    qsort(order, (size_t)n_order, sizeof *order, cmp_init);
    for (int i = 0; i < n_order; i++) {
        const struct ox_value *val = &g->values[order[i]];
        st = val->init_sparse
                 ? sparse_proto(e, val->init, val->name,
                                &gp->sparse_initializer[gp->n_sparse_initializer++])
                 : tensor_proto(e, val->init, val->name, &gp->initializer[gp->n_initializer++]);
        if (st) return ox_err_prefix(st, "initializer '%s': ", val->name);
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const struct ox_node *n = &g->nodes[i];
        st = node_proto(e, g, n, &gp->node[gp->n_node++]);
        if (st) return ox_err_prefix(st, "node '%s' (%s): ", n->name, n->op_type);
        for (int k = 0; k < n->n_outputs; k++) {
            int v = n->outputs[k];
            if (v < 0 || !has_type(&g->values[v]) || is_listed(g->outputs, g->n_outputs, v))
                continue;
            st = value_info(e, &g->values[v], &gp->value_info[gp->n_value_info++]);
            if (st) return ox_err_prefix(st, "node '%s' (%s): ", n->name, n->op_type);
        }
    }
    for (int i = 0; i < g->n_outputs; i++) {
        st = value_info(e, &g->values[g->outputs[i]], &gp->output[gp->n_output++]);
        if (st) return ox_err_prefix(st, "graph output '%s': ", g->values[g->outputs[i]].name);
    }
    return OX_OK;
}

/* ---- the model ------------------------------------------------------------------------- */

struct domains {
    int n;
    struct ox_opset d[64];
};

/* Domains the nodes of g (and its subgraphs) use, with the highest opset seen. Fails on a
 * default-domain node newer than the model's import of it. */
static ox_status used_domains(const struct ox_graph *root, const struct ox_graph *g,
                              struct domains *ds) {
    for (int i = 0; i < g->n_nodes; i++) {
        const struct ox_node *n = &g->nodes[i];
        int64_t have = ox_graph_opset(root, n->domain);
        if (have && n->opset > have)
            return ox_err(OX_E_INVALID,
                          "node '%s' (%s) is an operator of opset %d of domain '%s', but the "
                          "model imports opset %lld: convert the model to opset %d or later "
                          "(onnxexec convert --opset), or leave out the optimization that made "
                          "it",
                          n->name, n->op_type, n->opset, n->domain[0] ? n->domain : "ai.onnx",
                          (long long)have, n->opset);
        if (!have) {
            int k = 0;
            while (k < ds->n && strcmp(ds->d[k].domain, n->domain) != 0) k++;
            if (k == ds->n) {
                if (ds->n == (int)(sizeof ds->d / sizeof ds->d[0]))
                    return ox_err(OX_E_UNSUPPORTED, "the nodes use more than %d domains", ds->n);
                ds->d[ds->n++] = (struct ox_opset){n->domain, n->opset > 0 ? n->opset : 1};
            } else if (n->opset > ds->d[k].version) {
                ds->d[k].version = n->opset;
            }
        }
        for (int a = 0; a < n->n_attrs; a++) {
            const struct ox_attr *at = &n->attrs[a];
            ox_status st = OX_OK;
            if (at->type == OX_ATTR_GRAPH && at->g) st = used_domains(root, at->g, ds);
            for (int k = 0; at->type == OX_ATTR_GRAPHS && k < at->n && !st; k++)
                st = used_domains(root, at->graphs[k], ds);
            if (st) return st;
        }
    }
    return OX_OK;
}

static ox_status model_proto(struct ex *e, const struct ox_graph *g, Onnx__ModelProto **out) {
    Onnx__ModelProto *m = XNEW(e, Onnx__ModelProto, ONNX__MODEL_PROTO__INIT);
    if (!m) return nomem();
    *out = m;
    if (g->parent) return ox_err(OX_E_INVALID, "only a main graph can be exported as a model");
    struct domains ds = {0};
    ox_status st = used_domains(g, g, &ds);
    if (st) return st;
    m->has_ir_version = 1;
    m->ir_version = g->ir_version;
    m->producer_name = opt_str(g->producer_name);
    m->producer_version = opt_str(g->producer_version);
    m->domain = opt_str(g->model_domain);
    m->has_model_version = g->model_version != 0;
    m->model_version = g->model_version;
    m->doc_string = opt_str(g->doc);
    size_t n_ops = (size_t)(g->n_opsets + ds.n);
    m->opset_import = xalloc(e, sizeof(Onnx__OperatorSetIdProto *) * n_ops);
    m->metadata_props = xalloc(e, sizeof(Onnx__StringStringEntryProto *) * (size_t)g->n_meta);
    if (!m->opset_import || !m->metadata_props) return nomem();
    for (size_t i = 0; i < n_ops; i++) {
        const struct ox_opset *o =
            i < (size_t)g->n_opsets ? &g->opsets[i] : &ds.d[i - (size_t)g->n_opsets];
        Onnx__OperatorSetIdProto *op =
            XNEW(e, Onnx__OperatorSetIdProto, ONNX__OPERATOR_SET_ID_PROTO__INIT);
        if (!op) return nomem();
        op->domain = (char *)o->domain; /* "" is written: older readers expect the field */
        op->has_version = 1;
        op->version = o->version;
        m->opset_import[m->n_opset_import++] = op;
    }
    for (int i = 0; i < g->n_meta; i++) {
        m->metadata_props[i] = entry(e, g->meta[i].key, (char *)g->meta[i].value);
        if (!m->metadata_props[i]) return nomem();
        m->n_metadata_props++;
    }
    return graph_proto(e, g, &m->graph);
}

static void ex_free(struct ex *e) {
    for (size_t i = 0; i < e->n_owned; i++) free(e->owned[i]);
    free(e->owned);
    ox_arena_free(&e->a);
}

static void ex_init(struct ex *e) {
    memset(e, 0, sizeof *e);
    e->alloc = (ProtobufCAllocator){pb_alloc, pb_free, e};
}

/* ---- output ---------------------------------------------------------------------------- */

struct file_buf {
    ProtobufCBuffer base;
    FILE *f;
    bool failed;
};

static void file_append(ProtobufCBuffer *b, size_t len, const uint8_t *data) {
    struct file_buf *fb = (struct file_buf *)b;
    if (!fb->failed && len && fwrite(data, 1, len, fb->f) != len) fb->failed = true;
}

/* A temporary file beside `path` ("<path>.tmpXXXXXX"); *tmp is malloc'd. */
static ox_status open_temp(const char *path, char **tmp, FILE **f) {
    size_t n = strlen(path) + 16;
    *tmp = malloc(n);
    if (!*tmp) return nomem();
    snprintf(*tmp, n, "%s.tmpXXXXXX", path);
    int fd = mkstemp(*tmp);
    if (fd < 0) {
        ox_status st = ox_err(OX_E_IO, "%s: cannot create a file there: %s", path, strerror(errno));
        free(*tmp);
        *tmp = NULL;
        return st;
    }
    (void)fchmod(fd, 0644); /* mkstemp makes 0600; a model is for sharing */
    *f = fdopen(fd, "wb");
    if (!*f) {
        close(fd);
        unlink(*tmp);
        free(*tmp);
        *tmp = NULL;
        return nomem();
    }
    return OX_OK;
}

/* Flush, sync and close; false on any write error. */
static bool finish_file(FILE *f) {
    bool ok = fflush(f) == 0 && !ferror(f);
    ok &= fsync(fileno(f)) == 0;
    ok &= fclose(f) == 0;
    return ok;
}

ox_status ox_onnx_export_file(const struct ox_graph *g, const char *path,
                              const struct ox_export_options *o) {
    struct ox_export_options dflt = {0};
    if (!o) o = &dflt;
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    if (!*base) return ox_err(OX_E_INVALID, "'%s' names a folder, not a file", path);
    size_t dir_len = (size_t)(base - path);
    char *data_name = NULL, *data_path = NULL, *data_tmp = NULL, *tmp = NULL;
    FILE *df = NULL, *mf = NULL;
    struct ex e;
    ex_init(&e);
    ox_status st = OX_OK;
    bool external = o->external_data;
    for (int pass = 0; pass < 2; pass++) {
        if (external) {
            const char *given = o->external_name;
            if (given && (st = ox_check_data_location(given))) {
                ox_err_prefix(st,
                              "external data file '%s' must be a relative path inside the "
                              "model's folder: ",
                              given);
                goto out;
            }
            size_t n = given ? strlen(given) + 1 : strlen(base) + 6;
            data_name = malloc(n);
            data_path = malloc(dir_len + n);
            if (!data_name || !data_path) {
                st = nomem();
                goto out;
            }
            if (given)
                snprintf(data_name, n, "%s", given);
            else
                snprintf(data_name, n, "%s.data", base);
            snprintf(data_path, dir_len + n, "%.*s%s", (int)dir_len, path, data_name);
            if (strcmp(data_path, path) == 0) {
                st = ox_err(OX_E_INVALID, "the external data file cannot be the model file");
                goto out;
            }
            st = open_temp(data_path, &data_tmp, &df);
            if (st) goto out;
            e.external = true;
            e.threshold =
                o->external_threshold ? o->external_threshold : OX_EXPORT_EXTERNAL_THRESHOLD;
            e.data = df;
            e.data_name = data_name;
        }
        Onnx__ModelProto *m;
        st = model_proto(&e, g, &m);
        if (st) goto out;
        size_t size = onnx__model_proto__get_packed_size(m);
        if (size > OX_EXPORT_MAX_PROTO) {
            if (external) {
                st = ox_err(OX_E_UNSUPPORTED,
                            "%s: the model is %zu bytes even with its tensors of %zu bytes or "
                            "more in external data: lower the threshold",
                            path, size, e.threshold);
                goto out;
            }
            /* protobuf cannot hold it: again, with the weights beside it */
            ex_free(&e);
            ex_init(&e);
            external = true;
            continue;
        }
        st = open_temp(path, &tmp, &mf);
        if (st) goto out;
        struct file_buf fb = {.base = {file_append}, .f = mf};
        onnx__model_proto__pack_to_buffer(m, &fb.base);
        bool ok = !fb.failed;
        ok &= finish_file(mf);
        mf = NULL;
        if (!ok) {
            st = ox_err(OX_E_IO, "%s: write failed: %s", path, strerror(errno));
            goto out;
        }
        if (df) {
            ok = finish_file(df);
            df = NULL;
            if (!ok) {
                st = ox_err(OX_E_IO, "%s: write failed: %s", data_path, strerror(errno));
                goto out;
            }
            if (rename(data_tmp, data_path) != 0) {
                st =
                    ox_err(OX_E_IO, "%s: cannot rename into place: %s", data_path, strerror(errno));
                goto out;
            }
            free(data_tmp);
            data_tmp = NULL;
        }
        if (rename(tmp, path) != 0) {
            st = ox_err(OX_E_IO, "%s: cannot rename into place: %s", path, strerror(errno));
            goto out;
        }
        free(tmp);
        tmp = NULL;
        break;
    }
out:
    if (mf) fclose(mf);
    if (df) fclose(df);
    if (tmp) unlink(tmp);
    if (data_tmp) unlink(data_tmp);
    free(tmp);
    free(data_tmp);
    free(data_name);
    free(data_path);
    ex_free(&e);
    if (st && !strstr(ox_errmsg(), path)) ox_err_prefix(st, "%s: ", path);
    return st;
}

ox_status ox_onnx_export_buffer(const struct ox_graph *g, void **buf, size_t *len) {
    *buf = NULL;
    *len = 0;
    struct ex e;
    ex_init(&e);
    Onnx__ModelProto *m;
    ox_status st = model_proto(&e, g, &m);
    if (!st) {
        size_t size = onnx__model_proto__get_packed_size(m);
        if (size > OX_EXPORT_MAX_PROTO) {
            st = ox_err(OX_E_NOMEM,
                        "the model is %zu bytes, over protobuf's 2 GiB limit: write it to a "
                        "file with external data",
                        size);
        } else if (!(*buf = malloc(size ? size : 1))) {
            st = nomem();
        } else {
            onnx__model_proto__pack(m, *buf);
            *len = size;
        }
    }
    ex_free(&e);
    return st;
}
