/* TensorProto ↔ ox_tensor: the one conversion shared by initializers, tensor attributes,
 * sparse tensors and .pb tensor files (ONNX backend test data), plus external data files.
 *
 * TensorProto, field by field (onnx.proto):
 *   dims (int64, repeated)   shape; each >= 0, at most OX_MAX_RANK of them
 *   data_type (int32)        TensorProto.DataType, numbered as ox_dtype (1..26)
 *   segment                  chunked tensors: not supported
 *   raw_data (bytes)         elements little-endian, back to back; 4-bit types two per byte
 *                            and 2-bit types four per byte, first element in the low bits
 *   float_data               float, complex64 (real, imaginary pairs)
 *   int32_data               int32, int16, int8, uint16, uint8, bool, float16/bfloat16/float8
 *                            bit patterns (one element each), 4-bit types (one packed byte of
 *                            two elements each), 2-bit types (one byte of four each)
 *   int64_data               int64
 *   uint64_data              uint32, uint64
 *   double_data              double, complex128
 *   string_data (bytes)      string
 *   data_location, external_data: EXTERNAL with keys `location` (relative path), `offset`
 *                            and `length` (decimal byte counts); the bytes are as raw_data.
 * Exactly one of raw_data, external data and the typed field for the dtype holds the data
 * (none when the tensor is empty).
 */
#include "importer/onnx.h"
#include "onnx/onnx.pb-c.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define OX_HOST_LE 0
#else
#define OX_HOST_LE 1
#endif

/* ---- external data files --------------------------------------------------------------- */

struct ox_ext_cache {
    int n, cap;
    struct ox_ext_file {
        char *path;
        const unsigned char *addr;
        size_t len;
    } * files;
};

struct ox_ext_cache *ox_ext_cache_create(void) {
    return calloc(1, sizeof(struct ox_ext_cache));
}

void ox_ext_cache_free(struct ox_ext_cache *c) {
    if (!c) return;
    for (int i = 0; i < c->n; i++) free(c->files[i].path);
    free(c->files);
    free(c);
}

/* The location must stay inside the model's folder: relative, no ".." component. */
ox_status ox_check_data_location(const char *loc) {
    if (!*loc) return ox_err(OX_E_INVALID, "external data location is empty");
    if (loc[0] == '/' || loc[0] == '\\' || (loc[0] && loc[1] == ':'))
        return ox_err(OX_E_INVALID,
                      "external data location '%s' is an absolute path (it must be relative "
                      "to the model's folder)",
                      loc);
    const char *p = loc;
    while (*p) {
        size_t n = strcspn(p, "/\\");
        if (n == 2 && p[0] == '.' && p[1] == '.')
            return ox_err(OX_E_INVALID,
                          "external data location '%s' has a '..' component (it must stay "
                          "inside the model's folder)",
                          loc);
        p += n;
        if (*p) p++;
    }
    return OX_OK;
}

/* A decimal byte count of an external_data entry. */
static bool parse_size(const char *s, size_t *out) {
    if (!s || !*s) return false;
    size_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return false;
        if (!ox_mul_size(v, 10, &v) || !ox_add_size(v, (size_t)(*s - '0'), &v)) return false;
    }
    *out = v;
    return true;
}

/* The real path of an external data file `loc` in folder `dir`, which must lie inside the
 * folder once every symlink is followed (malloc'd into *real). */
static ox_status ext_resolve(const char *dir, const char *loc, const char *path, char **real) {
    *real = NULL;
    char *rdir = realpath(dir, NULL);
    if (!rdir) return ox_err(OX_E_IO, "external data folder '%s': %s", dir, strerror(errno));
    char *rpath = realpath(path, NULL);
    if (!rpath) {
        int e = errno;
        free(rdir);
        return ox_err(OX_E_IO, "external data file '%s': %s", path, strerror(e));
    }
    size_t n = strlen(rdir);
    bool inside = strcmp(rdir, "/") == 0 || (strncmp(rpath, rdir, n) == 0 && rpath[n] == '/');
    if (!inside) {
        ox_status st = ox_err(OX_E_INVALID,
                              "external data location '%s' leads (through a symlink) to '%s', "
                              "outside the model's folder '%s'",
                              loc, rpath, rdir);
        free(rdir);
        free(rpath);
        return st;
    }
    free(rdir);
    *real = rpath;
    return OX_OK;
}

/* Open and map an external data file (`path` resolved: no symlinks). With a cache (and
 * `keep`) the map is registered in `keep` and reused; otherwise *temp is set and the caller
 * unmaps (addr, len). */
static ox_status ext_open(const char *path, const struct ox_pb_src *src, const unsigned char **addr,
                          size_t *len, bool *temp) {
    *temp = false;
    struct ox_ext_cache *c = src->keep ? src->ext : NULL;
    if (c)
        for (int i = 0; i < c->n; i++)
            if (strcmp(c->files[i].path, path) == 0) {
                *addr = c->files[i].addr;
                *len = c->files[i].len;
                return OX_OK;
            }
    /* O_NOFOLLOW: a symlink put in the resolved path's place since is not followed */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return ox_err(OX_E_IO, "external data file '%s': %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return ox_err(OX_E_IO, "external data file '%s' is not a regular file", path);
    }
    if ((uint64_t)sb.st_size > SIZE_MAX) {
        close(fd);
        return ox_err(OX_E_NOMEM, "external data file '%s' is too large", path);
    }
    size_t n = (size_t)sb.st_size;
    void *m = NULL;
    if (n) {
        m = mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            int e = errno;
            close(fd);
            return ox_err(OX_E_IO, "external data file '%s': cannot map: %s", path, strerror(e));
        }
    }
    close(fd);
    if (c && src->keep) {
        ox_status st = OX_OK;
        if (m) st = ox_graph_keep_map(src->keep, m, n); /* unmaps on failure */
        if (st) return st;
        if (c->n == c->cap) {
            int cap = c->cap ? c->cap * 2 : 4;
            struct ox_ext_file *f = realloc(c->files, sizeof *f * (size_t)cap);
            if (!f) return ox_err(OX_E_NOMEM, "out of memory");
            c->files = f;
            c->cap = cap;
        }
        char *p = strdup(path);
        if (!p) return ox_err(OX_E_NOMEM, "out of memory");
        c->files[c->n++] = (struct ox_ext_file){p, m, n};
    } else {
        *temp = m != NULL;
    }
    *addr = m;
    *len = n;
    return OX_OK;
}

/* Find the bytes of an EXTERNAL tensor. *temp: the caller unmaps (*map, *map_len). */
static ox_status ext_bytes(const Onnx__TensorProto *tp, const struct ox_pb_src *src,
                           const unsigned char **bytes, size_t *n_bytes, bool *temp,
                           const unsigned char **map, size_t *map_len) {
    const char *loc = NULL, *off_s = NULL, *len_s = NULL;
    for (size_t i = 0; i < tp->n_external_data; i++) {
        const Onnx__StringStringEntryProto *e = tp->external_data[i];
        if (!e->key) continue;
        if (strcmp(e->key, "location") == 0)
            loc = e->value ? e->value : "";
        else if (strcmp(e->key, "offset") == 0)
            off_s = e->value ? e->value : "";
        else if (strcmp(e->key, "length") == 0)
            len_s = e->value ? e->value : "";
    }
    if (!loc) return ox_err(OX_E_INVALID, "external data has no 'location' entry");
    ox_status st = ox_check_data_location(loc);
    if (st) return st;
    size_t off = 0, len = 0;
    if (off_s && !parse_size(off_s, &off))
        return ox_err(OX_E_INVALID, "external data offset '%s' is not a byte count", off_s);
    if (len_s && !parse_size(len_s, &len))
        return ox_err(OX_E_INVALID, "external data length '%s' is not a byte count", len_s);
    if (!src->dir)
        return ox_err(OX_E_INVALID,
                      "the tensor's data is in external file '%s', but no folder was given to "
                      "find it in",
                      loc);
    size_t dl = strlen(src->dir), ll = strlen(loc);
    char *joined = malloc(dl + ll + 2), *path;
    if (!joined) return ox_err(OX_E_NOMEM, "out of memory");
    snprintf(joined, dl + ll + 2, "%s/%s", src->dir, loc);
    st = ext_resolve(src->dir, loc, joined, &path);
    free(joined);
    if (st) return st;
    const unsigned char *addr = NULL;
    size_t flen = 0;
    st = ext_open(path, src, &addr, &flen, temp);
    if (st) {
        free(path);
        return st;
    }
    if (!len_s) len = off <= flen ? flen - off : 0;
    size_t end;
    const ox_limits *lim = src->lim ? src->lim : ox_limits_default();
    if (off > flen || !ox_add_size(off, len, &end) || end > flen) {
        st = ox_err(OX_E_INVALID,
                    "external data at offset %zu length %zu lies past the end of '%s' (%zu "
                    "bytes)",
                    off, len, loc, flen);
    } else if (src->model_bytes && (*src->model_bytes += len) > lim->model_bytes) {
        st = ox_err_limit("model_bytes", lim->model_bytes,
                          "the model and the external data it reads take %llu bytes",
                          (unsigned long long)*src->model_bytes);
    }
    if (st) {
        if (*temp) ox_unmap((void *)addr, flen);
        *temp = false;
        free(path);
        return st;
    }
    free(path);
    *bytes = addr ? addr + off : NULL;
    *n_bytes = len;
    *map = addr;
    *map_len = flen;
    return OX_OK;
}

/* ---- element conversion ---------------------------------------------------------------- */

static int sub_byte_bits(ox_dtype dt) {
    switch (dt) {
    case OX_INT4:
    case OX_UINT4:
    case OX_FLOAT4E2M1: return 4;
    case OX_INT2:
    case OX_UINT2: return 2;
    default: return 0;
    }
}

/* Bytes the elements take in raw_data / external data. */
static bool wire_bytes(ox_dtype dt, size_t numel, size_t *out) {
    int bits = sub_byte_bits(dt);
    if (bits) {
        size_t per = 8 / (size_t)bits;
        *out = numel / per + (numel % per != 0);
        return true;
    }
    return ox_mul_size(numel, ox_dtype_size(dt), out);
}

/* Element k of a packed sub-byte stream whose bytes come from byte(i). */
static uint8_t unpack_sub(ox_dtype dt, uint8_t byte, size_t k) {
    int bits = sub_byte_bits(dt);
    int per = 8 / bits;
    unsigned v = (byte >> (bits * (int)(k % (size_t)per))) & ((1u << bits) - 1);
    if (dt == OX_INT4) return (uint8_t)(int8_t)((int8_t)(v << 4) >> 4);
    if (dt == OX_INT2) return (uint8_t)(int8_t)((int8_t)(v << 6) >> 6);
    return (uint8_t)v;
}

/* Byte-swap n elements of `size` bytes made of `comp`-byte components. */
static void swap_copy(unsigned char *dst, const unsigned char *src, size_t n, size_t size,
                      size_t comp) {
    size_t total = n * size;
    for (size_t i = 0; i < total; i += comp)
        for (size_t b = 0; b < comp; b++) dst[i + b] = src[i + comp - 1 - b];
}

static size_t component_size(ox_dtype dt) {
    if (dt == OX_COMPLEX64) return 4;
    if (dt == OX_COMPLEX128) return 8;
    return ox_dtype_size(dt);
}

/* Elements laid out little-endian in `bytes` (n_bytes == wire bytes) into out->data.
 * `borrow_ok`: bytes lie in a map kept by the graph (may be borrowed as they are).
 * `steal`: a malloc'd buffer holding exactly these bytes that may be taken over. */
static ox_status from_bytes(ox_tensor *out, size_t numel, const unsigned char *bytes,
                            bool borrow_ok, unsigned char **steal, bool *borrowed) {
    ox_dtype dt = out->dtype;
    size_t esz = ox_dtype_size(dt);
    if (numel == 0) {
        out->data = malloc(1);
        return out->data ? OX_OK : ox_err(OX_E_NOMEM, "out of memory");
    }
    bool plain = !sub_byte_bits(dt) && dt != OX_BOOL && dt != OX_STRING;
    if (plain && (OX_HOST_LE || component_size(dt) == 1)) {
        size_t align = component_size(dt);
        if (borrow_ok && bytes && (uintptr_t)bytes % align == 0) {
            out->data = (void *)bytes;
            *borrowed = true;
            return OX_OK;
        }
        if (steal && *steal && (uintptr_t)*steal % align == 0) {
            out->data = *steal;
            *steal = NULL;
            return OX_OK;
        }
    }
    size_t total = numel * esz; /* checked by the caller */
    unsigned char *d = malloc(total);
    if (!d) return ox_err(OX_E_NOMEM, "out of memory allocating %zu bytes", total);
    if (sub_byte_bits(dt)) {
        int per = 8 / sub_byte_bits(dt);
        for (size_t k = 0; k < numel; k++) d[k] = unpack_sub(dt, bytes[k / (size_t)per], k);
    } else if (dt == OX_BOOL) {
        for (size_t k = 0; k < numel; k++) d[k] = bytes[k] != 0;
    } else if (OX_HOST_LE || component_size(dt) == 1) {
        memcpy(d, bytes, total);
    } else {
        swap_copy(d, bytes, numel, esz, component_size(dt));
    }
    out->data = d;
    return OX_OK;
}

static const char *typed_field_name(ox_dtype dt) {
    switch (dt) {
    case OX_FLOAT:
    case OX_COMPLEX64: return "float_data";
    case OX_DOUBLE:
    case OX_COMPLEX128: return "double_data";
    case OX_INT64: return "int64_data";
    case OX_UINT32:
    case OX_UINT64: return "uint64_data";
    case OX_STRING: return "string_data";
    default: return "int32_data";
    }
}

/* How many entries of its typed field a tensor of numel elements needs. */
static bool typed_count(ox_dtype dt, size_t numel, size_t *out) {
    if (dt == OX_COMPLEX64 || dt == OX_COMPLEX128) return ox_mul_size(numel, 2, out);
    int bits = sub_byte_bits(dt);
    if (bits) return wire_bytes(dt, numel, out); /* one packed byte per int32 */
    *out = numel;
    return true;
}

static ox_status from_typed(Onnx__TensorProto *tp, ox_tensor *out, size_t numel) {
    ox_dtype dt = out->dtype;
    size_t need, have;
    if (!typed_count(dt, numel, &need)) return ox_err(OX_E_NOMEM, "tensor too large");
    switch (dt) {
    case OX_FLOAT:
    case OX_COMPLEX64: have = tp->n_float_data; break;
    case OX_DOUBLE:
    case OX_COMPLEX128: have = tp->n_double_data; break;
    case OX_INT64: have = tp->n_int64_data; break;
    case OX_UINT32:
    case OX_UINT64: have = tp->n_uint64_data; break;
    case OX_STRING: have = tp->n_string_data; break;
    default: have = tp->n_int32_data; break;
    }
    if (have != need)
        return ox_err(OX_E_INVALID, "%s has %zu values, but the dims call for %zu",
                      typed_field_name(dt), have, need);
    size_t esz = ox_dtype_size(dt);
    if (dt == OX_STRING) {
        char **s = calloc(numel ? numel : 1, sizeof *s);
        if (!s) return ox_err(OX_E_NOMEM, "out of memory");
        for (size_t k = 0; k < numel; k++) {
            const ProtobufCBinaryData *b = &tp->string_data[k];
            if (b->len && memchr(b->data, 0, b->len)) {
                for (size_t j = 0; j < k; j++) free(s[j]);
                free(s);
                return ox_err(OX_E_UNSUPPORTED,
                              "string %zu holds a NUL byte, which onnxexec's strings cannot "
                              "hold",
                              k);
            }
            s[k] = malloc(b->len + 1);
            if (!s[k]) {
                for (size_t j = 0; j < k; j++) free(s[j]);
                free(s);
                return ox_err(OX_E_NOMEM, "out of memory");
            }
            if (b->len) memcpy(s[k], b->data, b->len);
            s[k][b->len] = 0;
        }
        out->data = s;
        return OX_OK;
    }
    unsigned char *d = malloc(numel ? numel * esz : 1);
    if (!d) return ox_err(OX_E_NOMEM, "out of memory allocating %zu bytes", numel * esz);
    out->data = d;
    if (numel == 0) return OX_OK;
    switch (dt) {
    case OX_FLOAT:
    case OX_COMPLEX64: memcpy(d, tp->float_data, need * sizeof(float)); break;
    case OX_DOUBLE:
    case OX_COMPLEX128: memcpy(d, tp->double_data, need * sizeof(double)); break;
    case OX_INT64: memcpy(d, tp->int64_data, need * sizeof(int64_t)); break;
    case OX_UINT64: memcpy(d, tp->uint64_data, need * sizeof(uint64_t)); break;
    case OX_UINT32:
        for (size_t k = 0; k < numel; k++) ((uint32_t *)d)[k] = (uint32_t)tp->uint64_data[k];
        break;
    case OX_INT32: memcpy(d, tp->int32_data, need * sizeof(int32_t)); break;
    case OX_INT16:
    case OX_UINT16:
    case OX_FLOAT16:
    case OX_BFLOAT16:
        for (size_t k = 0; k < numel; k++) ((uint16_t *)d)[k] = (uint16_t)tp->int32_data[k];
        break;
    case OX_BOOL:
        for (size_t k = 0; k < numel; k++) d[k] = tp->int32_data[k] != 0;
        break;
    default:
        if (sub_byte_bits(dt)) {
            int per = 8 / sub_byte_bits(dt);
            for (size_t k = 0; k < numel; k++)
                d[k] = unpack_sub(dt, (uint8_t)tp->int32_data[k / (size_t)per], k);
        } else { /* int8, uint8, float8 kinds: one byte each */
            for (size_t k = 0; k < numel; k++) d[k] = (uint8_t)tp->int32_data[k];
        }
        break;
    }
    return OX_OK;
}

static size_t n_typed_values(const Onnx__TensorProto *tp, const char **which) {
    size_t n = 0;
    *which = NULL;
#define OX_TYPED(f)                                                                                \
    if (tp->n_##f) {                                                                               \
        n++;                                                                                       \
        if (!*which) *which = #f;                                                                  \
    }
    OX_TYPED(float_data)
    OX_TYPED(int32_data)
    OX_TYPED(string_data)
    OX_TYPED(int64_data)
    OX_TYPED(double_data)
    OX_TYPED(uint64_data)
#undef OX_TYPED
    return n;
}

ox_status ox_tensor_from_proto(Onnx__TensorProto *tp, const struct ox_pb_src *src, ox_tensor *out,
                               bool *borrowed) {
    ox_tensor t = {0};
    *borrowed = false;
    memset(out, 0, sizeof *out);
    if (!tp->has_data_type || tp->data_type <= 0 || tp->data_type >= OX_N_DTYPES)
        return ox_err(tp->has_data_type && tp->data_type > 0 ? OX_E_UNSUPPORTED : OX_E_INVALID,
                      "data_type %d is not an element type onnxexec knows",
                      tp->has_data_type ? (int)tp->data_type : 0);
    t.dtype = (ox_dtype)tp->data_type;
    const ox_limits *lim = src->lim ? src->lim : ox_limits_default();
    ox_status st = ox_check_rank(tp->n_dims, lim->rank, "the tensor");
    if (st) return st;
    t.rank = (int)tp->n_dims;
    size_t numel = 1, nonzero = 1; /* nonzero: the product of the dims that are not 0 */
    for (int i = 0; i < t.rank; i++) {
        if (tp->dims[i] < 0)
            return ox_err(OX_E_INVALID, "dimension %d is negative (%lld)", i,
                          (long long)tp->dims[i]);
        t.dims[i] = tp->dims[i];
        if ((uint64_t)tp->dims[i] > SIZE_MAX || !ox_mul_size(numel, (size_t)tp->dims[i], &numel))
            return ox_err(OX_E_INVALID, "the dims overflow the size of a tensor");
        /* an empty tensor too: its other dims would overflow any size computed from them */
        if (tp->dims[i] && (!ox_mul_size(nonzero, (size_t)tp->dims[i], &nonzero) ||
                            nonzero > (size_t)INT64_MAX))
            return ox_err(OX_E_INVALID, "the dims overflow the size of a tensor");
    }
    size_t mem_bytes, wire;
    if (!ox_mul_size(numel, ox_dtype_size(t.dtype), &mem_bytes) || numel > (size_t)INT64_MAX ||
        !wire_bytes(t.dtype, numel, &wire))
        return ox_err(OX_E_INVALID, "the dims overflow the size of a tensor");
    if (mem_bytes > lim->tensor_bytes) {
        char desc[256];
        return ox_err_limit("tensor_bytes", lim->tensor_bytes, "%s takes %zu bytes",
                            ox_tensor_desc(&t, desc, sizeof desc), mem_bytes);
    }
    if (tp->segment)
        return ox_err(OX_E_UNSUPPORTED,
                      "segmented tensors are not supported (or this is not a TensorProto: "
                      "a SequenceProto or OptionalProto reads as one with a segment)");

    const char *typed;
    size_t n_typed = n_typed_values(tp, &typed);
    bool external =
        tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    bool has_raw = tp->has_raw_data || tp->raw_data.len;
    if (external) {
        if (has_raw || n_typed)
            return ox_err(OX_E_INVALID, "data is both external and in %s",
                          has_raw ? "raw_data" : typed);
        if (t.dtype == OX_STRING)
            return ox_err(OX_E_INVALID, "string tensors cannot hold external data");
        const unsigned char *bytes = NULL, *map = NULL;
        size_t n_bytes = 0, map_len = 0;
        bool temp = false;
        st = ext_bytes(tp, src, &bytes, &n_bytes, &temp, &map, &map_len);
        if (st) return st;
        if (n_bytes != wire) {
            st = ox_err(OX_E_INVALID, "external data has %zu bytes, but the dims call for %zu",
                        n_bytes, wire);
        } else {
            st = from_bytes(&t, numel, bytes, src->keep && !temp, NULL, borrowed);
        }
        if (temp) ox_unmap((void *)map, map_len);
        if (st) return st;
    } else if (has_raw) {
        if (t.dtype == OX_STRING)
            return ox_err(OX_E_INVALID, "string tensors cannot use raw_data (use string_data)");
        if (n_typed) return ox_err(OX_E_INVALID, "data is both in raw_data and in %s", typed);
        if (tp->raw_data.len != wire) {
            char desc[256];
            return ox_err(OX_E_INVALID, "raw_data has %zu bytes, but %s needs %zu",
                          tp->raw_data.len, ox_tensor_desc(&t, desc, sizeof desc), wire);
        }
        const unsigned char *at = NULL;
        if (src->keep && src->raw_at && tp->raw_data.len &&
            memcmp(src->raw_at, tp->raw_data.data, tp->raw_data.len) == 0)
            at = src->raw_at;
        unsigned char *steal = src->keep_raw ? NULL : tp->raw_data.data;
        st = from_bytes(&t, numel, at ? at : tp->raw_data.data, at != NULL, &steal, borrowed);
        if (st) return st;
        if (!src->keep_raw && !steal && tp->raw_data.data) { /* taken over */
            tp->raw_data.data = NULL;
            tp->raw_data.len = 0;
            tp->has_raw_data = 0;
        }
    } else {
        if (n_typed > 1)
            return ox_err(OX_E_INVALID, "data is in more than one field (%s and others)", typed);
        if (n_typed == 0 && numel > 0)
            return ox_err(OX_E_INVALID, "the tensor has %zu elements but no data", numel);
        if (n_typed && strcmp(typed, typed_field_name(t.dtype)) != 0)
            return ox_err(OX_E_INVALID, "a %s tensor keeps its values in %s, not in %s",
                          ox_dtype_name(t.dtype), typed_field_name(t.dtype), typed);
        st = from_typed(tp, &t, numel);
        if (st) return st;
    }
    *out = t;
    return OX_OK;
}

/* ---- sparse tensors -------------------------------------------------------------------- */

ox_status ox_tensor_from_sparse_proto(Onnx__SparseTensorProto *sp, const struct ox_pb_src *src,
                                      ox_tensor *out) {
    memset(out, 0, sizeof *out);
    struct ox_pb_src copy_src = *src;
    copy_src.keep = NULL; /* values and indices are scratch: always copied */
    copy_src.raw_at = NULL;
    if (!sp->values) return ox_err(OX_E_INVALID, "sparse tensor has no values");
    const ox_limits *lim = src->lim ? src->lim : ox_limits_default();
    ox_status st = ox_check_rank(sp->n_dims, lim->rank, "the sparse tensor");
    if (st) return st;
    int rank = (int)sp->n_dims;
    for (int i = 0; i < rank; i++)
        if (sp->dims[i] < 0)
            return ox_err(OX_E_INVALID, "sparse tensor dimension %d is negative", i);
    ox_tensor vals = {0}, idx = {0}, dense = {0};
    bool b;
    st = ox_tensor_from_proto(sp->values, &copy_src, &vals, &b);
    if (st) return ox_err_prefix(st, "sparse tensor values: ");
    if (vals.rank != 1) {
        st = ox_err(OX_E_INVALID, "sparse tensor values must have rank 1, not %d", vals.rank);
        goto fail;
    }
    int64_t nnz = vals.dims[0];
    size_t dense_bytes;
    if (ox_tensor_bytes(vals.dtype, rank, sp->dims, &dense_bytes) &&
        dense_bytes > lim->tensor_bytes) {
        st = ox_err_limit("tensor_bytes", lim->tensor_bytes,
                          "the sparse tensor densified takes %zu bytes", dense_bytes);
        goto fail;
    }
    st = ox_tensor_alloc(&dense, vals.dtype, rank, sp->dims);
    if (st) goto fail;
    int64_t numel = ox_tensor_numel(&dense);
    if (nnz > 0) {
        if (!sp->indices) {
            st = ox_err(OX_E_INVALID, "sparse tensor has values but no indices");
            goto fail;
        }
        st = ox_tensor_from_proto(sp->indices, &copy_src, &idx, &b);
        if (st) {
            ox_err_prefix(st, "sparse tensor indices: ");
            goto fail;
        }
        if (idx.dtype != OX_INT64 && idx.dtype != OX_INT32) {
            st = ox_err(OX_E_INVALID, "sparse tensor indices must be int64, not %s",
                        ox_dtype_name(idx.dtype));
            goto fail;
        }
        bool linear = idx.rank == 1 && idx.dims[0] == nnz;
        bool coords = idx.rank == 2 && idx.dims[0] == nnz && idx.dims[1] == rank;
        if (!linear && !coords) {
            st = ox_err(
                OX_E_INVALID, "sparse tensor indices must have shape [%lld] or [%lld,%d], not %s",
                (long long)nnz, (long long)nnz, rank, ox_tensor_desc(&idx, (char[256]){0}, 256));
            goto fail;
        }
        size_t esz = ox_dtype_size(vals.dtype);
        for (int64_t k = 0; k < nnz; k++) {
            int64_t pos = 0;
            for (int j = 0; j < (linear ? 1 : rank); j++) {
                int64_t at = linear ? k : k * rank + j;
                int64_t v =
                    idx.dtype == OX_INT64 ? ((int64_t *)idx.data)[at] : ((int32_t *)idx.data)[at];
                int64_t lim = linear ? numel : dense.dims[j];
                if (v < 0 || v >= lim) {
                    st = ox_err(OX_E_INVALID, "sparse tensor index %lld is out of range [0,%lld)",
                                (long long)v, (long long)lim);
                    goto fail;
                }
                pos = linear ? v : pos * dense.dims[j] + v;
            }
            if (vals.dtype == OX_STRING) {
                char **d = dense.data, **s = vals.data;
                free(d[pos]);
                d[pos] = s[k];
                s[k] = NULL;
            } else {
                memcpy((char *)dense.data + (size_t)pos * esz, (char *)vals.data + (size_t)k * esz,
                       esz);
            }
        }
    }
    ox_tensor_free_data(&vals);
    ox_tensor_free_data(&idx);
    *out = dense;
    return OX_OK;
fail:
    ox_tensor_free_data(&vals);
    ox_tensor_free_data(&idx);
    ox_tensor_free_data(&dense);
    return st;
}

/* ---- .pb files ------------------------------------------------------------------------- */

/* Whole file into a malloc'd buffer. */
ox_status ox_pb_read_file(const char *path, unsigned char **buf, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return ox_err(OX_E_IO, "%s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(f);
        return ox_err(OX_E_IO, "%s: not a regular file", path);
    }
    if ((uint64_t)sb.st_size >= SIZE_MAX) {
        fclose(f);
        return ox_err(OX_E_NOMEM, "%s: file too large", path);
    }
    size_t n = (size_t)sb.st_size;
    unsigned char *b = malloc(n ? n : 1);
    if (!b) {
        fclose(f);
        return ox_err(OX_E_NOMEM, "%s: out of memory reading %zu bytes", path, n);
    }
    if (n && fread(b, 1, n, f) != n) {
        free(b);
        fclose(f);
        return ox_err(OX_E_IO, "%s: read failed", path);
    }
    fclose(f);
    *buf = b;
    *len = n;
    return OX_OK;
}

/* Folder part of a path ("." when there is none), malloc'd. */
char *ox_pb_dir_of(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return strdup(".");
    if (slash == path) return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

ox_status ox_tensor_read_pb(const char *path, ox_tensor *out, char **name) {
    memset(out, 0, sizeof *out);
    if (name) *name = NULL;
    unsigned char *buf = NULL;
    size_t len = 0;
    ox_status st = ox_pb_read_file(path, &buf, &len);
    if (st) return st;
    Onnx__TensorProto *tp = onnx__tensor_proto__unpack(NULL, len, buf);
    free(buf);
    if (!tp) return ox_err(OX_E_INVALID, "%s: not a TensorProto (protobuf parse failed)", path);
    char *dir = ox_pb_dir_of(path);
    if (!dir) {
        onnx__tensor_proto__free_unpacked(tp, NULL);
        return ox_err(OX_E_NOMEM, "out of memory");
    }
    struct ox_pb_src src = {.dir = dir};
    bool borrowed;
    st = ox_tensor_from_proto(tp, &src, out, &borrowed);
    free(dir);
    if (st) {
        ox_err_prefix(st, "%s: tensor '%s': ", path, tp->name ? tp->name : "");
        onnx__tensor_proto__free_unpacked(tp, NULL);
        return st;
    }
    if (name) {
        *name = strdup(tp->name ? tp->name : "");
        if (!*name) {
            onnx__tensor_proto__free_unpacked(tp, NULL);
            ox_tensor_free_data(out);
            return ox_err(OX_E_NOMEM, "out of memory");
        }
    }
    onnx__tensor_proto__free_unpacked(tp, NULL);
    return OX_OK;
}

ox_status ox_tensor_wire(const ox_tensor *t, const unsigned char **bytes, size_t *len,
                         unsigned char **owned) {
    *owned = NULL;
    *bytes = NULL;
    size_t numel, wire;
    if (!ox_tensor_bytes(t->dtype, t->rank, t->dims, &numel) || t->dtype == OX_STRING ||
        t->dtype == OX_UNDEFINED || (unsigned)t->dtype >= OX_N_DTYPES)
        return ox_err(OX_E_INVALID, "tensor has no fixed-size element type or valid dims");
    numel /= ox_dtype_size(t->dtype);
    wire_bytes(t->dtype, numel, &wire);
    *len = wire;
    const unsigned char *d = t->data;
    int bits = sub_byte_bits(t->dtype);
    bool direct = !bits && (OX_HOST_LE || component_size(t->dtype) == 1);
    if (direct && t->dtype == OX_BOOL)
        for (size_t k = 0; k < numel && direct; k++) direct = d[k] <= 1;
    if (direct || wire == 0) {
        *bytes = wire ? d : (const unsigned char *)"";
        return OX_OK;
    }
    unsigned char *raw = calloc(1, wire);
    if (!raw) return ox_err(OX_E_NOMEM, "out of memory");
    if (bits) {
        int per = 8 / bits;
        for (size_t k = 0; k < numel; k++)
            raw[k / (size_t)per] |=
                (unsigned char)((d[k] & ((1u << bits) - 1)) << (bits * (int)(k % (size_t)per)));
    } else if (t->dtype == OX_BOOL) {
        for (size_t k = 0; k < numel; k++) raw[k] = d[k] != 0;
    } else {
        swap_copy(raw, d, numel, ox_dtype_size(t->dtype), component_size(t->dtype));
    }
    *owned = raw;
    *bytes = raw;
    return OX_OK;
}

static ox_status write_file(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f) return ox_err(OX_E_IO, "%s: %s", path, strerror(errno));
    bool ok = fwrite(data, 1, len, f) == len;
    ok &= fclose(f) == 0;
    return ok ? OX_OK : ox_err(OX_E_IO, "%s: write failed", path);
}

/* Check a tensor handed in by a caller: rank, dims, data. */
static ox_status check_user_tensor(const ox_tensor *t, size_t *numel) {
    if ((unsigned)t->dtype >= OX_N_DTYPES || t->dtype == OX_UNDEFINED)
        return ox_err(OX_E_INVALID, "tensor has no valid element type (%d)", (int)t->dtype);
    if (t->rank < 0 || t->rank > OX_MAX_RANK)
        return ox_err(OX_E_INVALID, "tensor rank %d is out of range", t->rank);
    size_t bytes;
    if (!ox_tensor_bytes(t->dtype, t->rank, t->dims, &bytes))
        return ox_err(OX_E_INVALID, "tensor dims are negative or overflow");
    *numel = bytes / ox_dtype_size(t->dtype);
    if (*numel && !t->data) return ox_err(OX_E_INVALID, "tensor has no data");
    return OX_OK;
}

ox_status ox_tensor_write_pb(const char *path, const ox_tensor *t, const char *name) {
    size_t numel = 0;
    ox_status st = check_user_tensor(t, &numel);
    if (st) return ox_err_prefix(st, "%s: ", path);
    Onnx__TensorProto tp = ONNX__TENSOR_PROTO__INIT;
    int64_t dims[OX_MAX_RANK];
    for (int i = 0; i < t->rank; i++) dims[i] = t->dims[i];
    tp.n_dims = (size_t)t->rank;
    tp.dims = dims;
    tp.has_data_type = 1;
    tp.data_type = (int32_t)t->dtype;
    tp.name = (char *)(name ? name : (t->name ? t->name : ""));
    unsigned char *raw = NULL;
    ProtobufCBinaryData *strs = NULL;
    if (t->dtype == OX_STRING) {
        strs = calloc(numel ? numel : 1, sizeof *strs);
        if (!strs) return ox_err(OX_E_NOMEM, "out of memory");
        char *const *s = t->data;
        for (size_t k = 0; k < numel; k++) {
            strs[k].data = (uint8_t *)(s[k] ? s[k] : "");
            strs[k].len = s[k] ? strlen(s[k]) : 0;
        }
        tp.n_string_data = numel;
        tp.string_data = strs;
    } else {
        const unsigned char *bytes;
        size_t wire;
        st = ox_tensor_wire(t, &bytes, &wire, &raw);
        if (st) return ox_err_prefix(st, "%s: ", path);
        tp.has_raw_data = 1;
        tp.raw_data.data = (uint8_t *)bytes;
        tp.raw_data.len = wire;
    }
    size_t len = onnx__tensor_proto__get_packed_size(&tp);
    unsigned char *buf = malloc(len ? len : 1);
    if (!buf) {
        st = ox_err(OX_E_NOMEM, "out of memory");
    } else {
        onnx__tensor_proto__pack(&tp, buf);
        st = write_file(path, buf, len);
    }
    free(buf);
    free(raw);
    free(strs);
    return st;
}
