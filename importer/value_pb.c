/* Sequence, map and optional values from .pb files (SequenceProto, MapProto, OptionalProto of
 * onnx/ox-data.proto), as the ONNX backend test data stores non-tensor inputs and outputs.
 * Tensors inside go through the one TensorProto conversion (ox_tensor_from_proto). A map is
 * held as ox_tensor kind OX_IO_MAP with two items, its keys and its values as two 1-D
 * tensors (include/onnxexec.h): maps whose values are scalars, as ZipMap and DictVectorizer
 * have them. */
#include "importer/onnx.h"
#include "onnx/ox-data.pb-c.h"

#include <stdlib.h>
#include <string.h>

#define MAX_VALUE_DEPTH 32

enum { ELEM_TENSOR = 1, ELEM_SPARSE = 2, ELEM_SEQUENCE = 3, ELEM_MAP = 4, ELEM_OPTIONAL = 5 };

static ox_status from_sequence(Onnx__SequenceProto *sp, const struct ox_pb_src *src, ox_tensor *out,
                               int depth);
static ox_status from_optional(Onnx__OptionalProto *op, const struct ox_pb_src *src, ox_tensor *out,
                               int depth);
static ox_status from_map(Onnx__MapProto *mp, const struct ox_pb_src *src, ox_tensor *out);

static ox_status tensor_item(Onnx__TensorProto *tp, const struct ox_pb_src *src, ox_tensor *out) {
    bool borrowed;
    return ox_tensor_from_proto(tp, src, out, &borrowed);
}

static ox_status make_items(ox_tensor *out, ox_io_kind kind, size_t n) {
    memset(out, 0, sizeof *out);
    out->kind = kind;
    if (n > INT32_MAX) return ox_err(OX_E_INVALID, "%zu items: too many", n);
    if (n && !(out->items = calloc(n, sizeof *out->items)))
        return ox_err(OX_E_NOMEM, "out of memory");
    return OX_OK;
}

static ox_status from_sequence(Onnx__SequenceProto *sp, const struct ox_pb_src *src, ox_tensor *out,
                               int depth) {
    if (depth > MAX_VALUE_DEPTH) return ox_err(OX_E_INVALID, "values nest too deeply");
    size_t n = 0;
    switch (sp->elem_type) {
    case ELEM_TENSOR: n = sp->n_tensor_values; break;
    case ELEM_SEQUENCE: n = sp->n_sequence_values; break;
    case ELEM_OPTIONAL: n = sp->n_optional_values; break;
    case ELEM_MAP: n = sp->n_map_values; break;
    case 0: break;
    default: return ox_err(OX_E_UNSUPPORTED, "sequences of element kind %d", (int)sp->elem_type);
    }
    ox_status st = make_items(out, OX_IO_SEQUENCE, n);
    for (size_t i = 0; !st && i < n; i++) {
        ox_tensor *it = &out->items[i];
        if (sp->elem_type == ELEM_TENSOR)
            st = tensor_item(sp->tensor_values[i], src, it);
        else if (sp->elem_type == ELEM_SEQUENCE)
            st = from_sequence(sp->sequence_values[i], src, it, depth + 1);
        else if (sp->elem_type == ELEM_MAP)
            st = from_map(sp->map_values[i], src, it);
        else
            st = from_optional(sp->optional_values[i], src, it, depth + 1);
        out->n_items = (int)i + 1;
        if (!st && i == 0) out->dtype = it->dtype;
    }
    if (st) ox_tensor_free_data(out);
    return st;
}

static ox_status from_optional(Onnx__OptionalProto *op, const struct ox_pb_src *src, ox_tensor *out,
                               int depth) {
    if (depth > MAX_VALUE_DEPTH) return ox_err(OX_E_INVALID, "values nest too deeply");
    bool has = (op->elem_type == ELEM_TENSOR && op->tensor_value) ||
               (op->elem_type == ELEM_SEQUENCE && op->sequence_value) ||
               (op->elem_type == ELEM_OPTIONAL && op->optional_value);
    if (op->elem_type == ELEM_SPARSE || op->elem_type == ELEM_MAP)
        return ox_err(OX_E_UNSUPPORTED, "optionals of element kind %d", (int)op->elem_type);
    ox_status st = make_items(out, OX_IO_OPTIONAL, has ? 1 : 0);
    if (st || !has) return st;
    if (op->elem_type == ELEM_TENSOR)
        st = tensor_item(op->tensor_value, src, &out->items[0]);
    else if (op->elem_type == ELEM_SEQUENCE)
        st = from_sequence(op->sequence_value, src, &out->items[0], depth + 1);
    else
        st = from_optional(op->optional_value, src, &out->items[0], depth + 1);
    out->n_items = 1;
    if (!st) out->dtype = out->items[0].dtype;
    if (st) ox_tensor_free_data(out);
    return st;
}

/* A map of scalar values: keys (int64 or string) and values as two 1-D tensors. */
static ox_status from_map(Onnx__MapProto *mp, const struct ox_pb_src *src, ox_tensor *out) {
    bool strings = mp->has_key_type && mp->key_type == OX_STRING;
    size_t n = strings ? mp->n_string_keys : mp->n_keys;
    Onnx__SequenceProto *vs = mp->values;
    size_t nv = vs ? vs->n_tensor_values : 0;
    if ((vs && vs->elem_type != ELEM_TENSOR && nv) || nv != n || n > INT32_MAX)
        return ox_err(OX_E_UNSUPPORTED,
                      "map '%s': %zu keys, %zu values: only maps of scalar "
                      "tensor values are read",
                      mp->name ? mp->name : "", n, nv);
    ox_status st = make_items(out, OX_IO_MAP, 2);
    if (st) return st;
    out->n_items = 2;
    int64_t len = (int64_t)n;
    ox_tensor *keys = &out->items[0], *vals = &out->items[1];
    if ((st = ox_tensor_alloc(keys, strings ? OX_STRING : OX_INT64, 1, &len))) goto fail;
    for (size_t i = 0; i < n; i++) {
        if (!strings) {
            ((int64_t *)keys->data)[i] = mp->keys[i];
            continue;
        }
        char *k = malloc(mp->string_keys[i].len + 1);
        if (!k) {
            st = ox_err(OX_E_NOMEM, "out of memory");
            goto fail;
        }
        memcpy(k, mp->string_keys[i].data, mp->string_keys[i].len);
        k[mp->string_keys[i].len] = 0;
        free(((char **)keys->data)[i]);
        ((char **)keys->data)[i] = k;
    }
    for (size_t i = 0; i < n; i++) {
        ox_tensor v = {0};
        if ((st = tensor_item(vs->tensor_values[i], src, &v))) goto fail;
        if (ox_tensor_numel(&v) != 1 || (i && v.dtype != vals->dtype)) {
            ox_tensor_free_data(&v);
            st = ox_err(OX_E_UNSUPPORTED,
                        "map '%s': value %zu is not a scalar of the first value's type",
                        mp->name ? mp->name : "", i);
            goto fail;
        }
        if (i == 0 && (st = ox_tensor_alloc(vals, v.dtype, 1, &len))) {
            ox_tensor_free_data(&v);
            goto fail;
        }
        if (v.dtype == OX_STRING) { /* the string moves into the map */
            free(((char **)vals->data)[i]);
            ((char **)vals->data)[i] = ((char **)v.data)[0];
            ((char **)v.data)[0] = NULL;
        } else {
            memcpy((char *)vals->data + i * ox_dtype_size(v.dtype), v.data, ox_dtype_size(v.dtype));
        }
        ox_tensor_free_data(&v);
    }
    if (n == 0 && (st = ox_tensor_alloc(vals, OX_FLOAT, 1, &len))) goto fail;
    out->dtype = vals->dtype;
    return OX_OK;
fail:
    ox_tensor_free_data(out);
    return st;
}

ox_status ox_value_read_pb(const char *path, ox_io_kind kind, ox_tensor *out, char **name) {
    if (kind == OX_IO_TENSOR) return ox_tensor_read_pb(path, out, name);
    memset(out, 0, sizeof *out);
    if (name) *name = NULL;
    if (kind != OX_IO_SEQUENCE && kind != OX_IO_OPTIONAL && kind != OX_IO_MAP)
        return ox_err(OX_E_UNSUPPORTED,
                      "%s: only tensor, sequence, map and optional values are "
                      "read",
                      path);
    unsigned char *buf = NULL;
    size_t len = 0;
    ox_status st = ox_pb_read_file(path, &buf, &len);
    if (st) return st;
    const ProtobufCMessageDescriptor *desc =
        kind == OX_IO_SEQUENCE ? &onnx__sequence_proto__descriptor
        : kind == OX_IO_MAP    ? &onnx__map_proto__descriptor
                               : &onnx__optional_proto__descriptor;
    if (!ox_pb_check_nesting(desc, buf, len)) {
        free(buf);
        return ox_err_prefix(OX_E_INVALID, "%s: ", path);
    }
    ProtobufCMessage *msg = protobuf_c_message_unpack(desc, NULL, len, buf);
    free(buf);
    if (!msg)
        return ox_err(OX_E_INVALID, "%s: not a %s (protobuf parse failed)", path,
                      kind == OX_IO_SEQUENCE ? "SequenceProto"
                      : kind == OX_IO_MAP    ? "MapProto"
                                             : "OptionalProto");
    char *dir = ox_pb_dir_of(path);
    struct ox_pb_src src = {.dir = dir};
    const char *pname = NULL;
    if (!dir) {
        st = ox_err(OX_E_NOMEM, "out of memory");
    } else if (kind == OX_IO_SEQUENCE) {
        Onnx__SequenceProto *sp = (Onnx__SequenceProto *)msg;
        pname = sp->name;
        st = from_sequence(sp, &src, out, 0);
    } else if (kind == OX_IO_MAP) {
        Onnx__MapProto *mp = (Onnx__MapProto *)msg;
        pname = mp->name;
        st = from_map(mp, &src, out);
    } else {
        Onnx__OptionalProto *op = (Onnx__OptionalProto *)msg;
        pname = op->name;
        st = from_optional(op, &src, out, 0);
    }
    if (!st && name && !(*name = strdup(pname ? pname : ""))) {
        ox_tensor_free_data(out);
        st = ox_err(OX_E_NOMEM, "out of memory");
    }
    if (st && dir) ox_err_prefix(st, "%s: ", path);
    free(dir);
    protobuf_c_message_free_unpacked(msg, NULL);
    return st;
}
