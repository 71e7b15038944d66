/* Helpers shared by infer functions and kernels (declared in kernels/op.h). */
#include "kernels/op.h"

#include <sys/mman.h>
#include <unistd.h>

#include <stdio.h>

ox_status ox_node_err(const struct ox_node *n, ox_status code, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!n->name || !*n->name) return ox_err(code, "unnamed %s node: %s", n->op_type, msg);
    return ox_err(code, "node '%s' (%s): %s", n->name, n->op_type, msg);
}

/* The first attribute read with the wrong kind since the last ox_attr_check: kept by value,
 * since the graph it was read from may be freed before the next check. */
static _Thread_local bool has_bad_attr;
static _Thread_local char bad_attr_name[128];
static _Thread_local ox_attr_type bad_attr_type, bad_attr_want;

static const char *attr_kind_name(ox_attr_type t) {
    static const char *names[] = {"undefined",      "float",   "int",    "string",
                                  "tensor",         "graph",   "floats", "ints",
                                  "strings",        "tensors", "graphs", "sparse tensor",
                                  "sparse tensors", "type",    "types"};
    return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "?";
}

/* The attribute `name` if present with kind `want`; NULL when absent, and NULL with the
 * mismatch recorded when present with another kind. */
static const struct ox_attr *attr_of(const struct ox_node *n, const char *name, ox_attr_type want) {
    const struct ox_attr *a = ox_node_attr(n, name);
    if (!a || a->type == want) return a;
    if (!has_bad_attr) {
        has_bad_attr = true;
        snprintf(bad_attr_name, sizeof bad_attr_name, "%s", a->name ? a->name : "");
        bad_attr_type = a->type;
        bad_attr_want = want;
    }
    return NULL;
}

ox_status ox_attr_check(const struct ox_node *n) {
    if (!has_bad_attr) return OX_OK;
    has_bad_attr = false;
    return ox_node_err(n, OX_E_INVALID, "attribute '%s' must be of type %s, got %s", bad_attr_name,
                       attr_kind_name(bad_attr_want), attr_kind_name(bad_attr_type));
}

int64_t ox_attr_int(const struct ox_node *n, const char *name, int64_t def) {
    const struct ox_attr *a = attr_of(n, name, OX_ATTR_INT);
    return a ? a->i : def;
}

float ox_attr_float(const struct ox_node *n, const char *name, float def) {
    const struct ox_attr *a = attr_of(n, name, OX_ATTR_FLOAT);
    return a ? a->f : def;
}

const char *ox_attr_str(const struct ox_node *n, const char *name, const char *def) {
    const struct ox_attr *a = attr_of(n, name, OX_ATTR_STRING);
    return a ? a->s : def;
}

int ox_attr_ints(const struct ox_node *n, const char *name, const int64_t **out) {
    const struct ox_attr *a = attr_of(n, name, OX_ATTR_INTS);
    if (!a) return -1;
    *out = a->ints;
    return a->n;
}

int ox_attr_floats(const struct ox_node *n, const char *name, const float **out) {
    const struct ox_attr *a = attr_of(n, name, OX_ATTR_FLOATS);
    if (!a) return -1;
    *out = a->floats;
    return a->n;
}

void ox_set_shape(ox_tensor *t, ox_dtype dt, int rank, const int64_t *dims) {
    t->dtype = dt;
    t->rank = rank;
    for (int i = 0; i < rank; i++) t->dims[i] = dims[i];
}

void ox_set_like(ox_tensor *t, const ox_tensor *src) {
    ox_set_shape(t, src->dtype, src->rank, src->dims);
}

int64_t ox_read_ints(const struct ox_node *n, const ox_tensor *t, int64_t *out, int64_t max) {
    if (!ox_dtype_is_int(t->dtype))
        return ox_node_err(n, OX_E_INVALID, "expected an integer tensor, got %s",
                           ox_dtype_name(t->dtype)),
               -1;
    int64_t cnt = ox_tensor_numel(t);
    if (cnt > max)
        return ox_node_err(n, OX_E_INVALID, "integer list of %lld values, at most %lld allowed",
                           (long long)cnt, (long long)max),
               -1;
    for (int64_t i = 0; i < cnt; i++) out[i] = ox_get_i64(t, i);
    return cnt;
}

ox_status ox_norm_axis(const struct ox_node *n, int64_t axis, int rank, int *out) {
    int64_t a = axis < 0 ? axis + rank : axis;
    if (a < 0 || a >= (rank ? rank : 1))
        return ox_node_err(n, OX_E_INVALID, "axis %lld out of range for rank %d", (long long)axis,
                           rank);
    *out = (int)a;
    return OX_OK;
}

ox_status ox_broadcast(const struct ox_node *n, const ox_tensor *a, const ox_tensor *b, int *rank,
                       int64_t *dims) {
    int r = a->rank > b->rank ? a->rank : b->rank;
    for (int i = 0; i < r; i++) {
        int ia = i - (r - a->rank), ib = i - (r - b->rank);
        int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        if (da == db || db == 1) {
            dims[i] = da;
        } else if (da == 1) {
            dims[i] = db;
        } else {
            char sa[256], sb[256];
            return ox_node_err(n, OX_E_SHAPE,
                               "shapes %s and %s do not broadcast (axis %d: %lld vs %lld)",
                               ox_tensor_desc(a, sa, sizeof sa), ox_tensor_desc(b, sb, sizeof sb),
                               i, (long long)da, (long long)db);
        }
    }
    *rank = r;
    return OX_OK;
}

bool ox_tail_broadcasts(const ox_tensor *p, const ox_tensor *x, int axis) {
    if (p->rank > x->rank - axis) return false;
    for (int i = 0; i < p->rank; i++) {
        int64_t d = x->dims[x->rank - p->rank + i];
        if (p->dims[i] != d && p->dims[i] != 1) return false;
    }
    return true;
}

int64_t ox_tail_index(const ox_tensor *p, const ox_tensor *x, int axis, int64_t j) {
    int64_t idx = 0, stride = 1;
    for (int i = x->rank - 1; i >= axis; i--) {
        int64_t d = x->dims[i], k = j % d;
        j /= d;
        int ip = i - (x->rank - p->rank);
        if (ip >= 0) {
            if (p->dims[ip] != 1) idx += k * stride;
            stride *= p->dims[ip];
        }
    }
    return idx;
}

void ox_broadcast_strides(const ox_tensor *t, int rank, const int64_t *dims, int64_t *strides) {
    int64_t s = 1;
    for (int i = rank - 1; i >= 0; i--) {
        int it = i - (rank - t->rank);
        if (it < 0 || (t->dims[it] == 1 && dims[i] != 1)) {
            strides[i] = 0;
        } else {
            strides[i] = s;
        }
        if (it >= 0) s *= t->dims[it];
    }
}

ox_status ox_matmul_shape(const struct ox_node *n, const ox_tensor *a, const ox_tensor *b,
                          struct ox_matmul_shape *m) {
    char sa[256], sb[256];
    if (a->rank < 1 || b->rank < 1)
        return ox_node_err(n, OX_E_SHAPE, "%s of a scalar (%s, %s)", n->op_type,
                           ox_tensor_desc(a, sa, sizeof sa), ox_tensor_desc(b, sb, sizeof sb));
    /* 1-D operands are promoted: a to [1,K], b to [K,1], and the added dim removed */
    int64_t ad[OX_MAX_RANK + 1], bd[OX_MAX_RANK + 1];
    int ar = a->rank, br = b->rank;
    if (ar == 1)
        ad[0] = 1, ad[1] = a->dims[0], ar = 2;
    else
        memcpy(ad, a->dims, sizeof(int64_t) * (size_t)ar);
    if (br == 1)
        bd[0] = b->dims[0], bd[1] = 1, br = 2;
    else
        memcpy(bd, b->dims, sizeof(int64_t) * (size_t)br);
    m->M = ad[ar - 2];
    m->K = ad[ar - 1];
    m->N = bd[br - 1];
    if (bd[br - 2] != m->K)
        return ox_node_err(n, OX_E_SHAPE, "inner dimensions differ: %s times %s",
                           ox_tensor_desc(a, sa, sizeof sa), ox_tensor_desc(b, sb, sizeof sb));
    int abr = ar - 2, bbr = br - 2;
    m->brank = abr > bbr ? abr : bbr;
    m->batch = 1;
    int64_t as = m->M * m->K, bs = m->K * m->N;
    for (int i = m->brank - 1; i >= 0; i--) {
        int ia = i - (m->brank - abr), ib = i - (m->brank - bbr);
        int64_t da = ia >= 0 ? ad[ia] : 1, db = ib >= 0 ? bd[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return ox_node_err(n, OX_E_SHAPE, "batch dimensions do not broadcast: %s times %s",
                               ox_tensor_desc(a, sa, sizeof sa), ox_tensor_desc(b, sb, sizeof sb));
        m->bdims[i] = da == 0 || db == 0 ? 0 : da > db ? da : db;
        m->astr[i] = da == 1 ? 0 : as;
        m->bstr[i] = db == 1 ? 0 : bs;
        as *= da;
        bs *= db;
        m->batch *= m->bdims[i];
    }
    m->rank = 0;
    for (int i = 0; i < m->brank; i++) m->dims[m->rank++] = m->bdims[i];
    if (a->rank > 1) m->dims[m->rank++] = m->M;
    if (b->rank > 1) m->dims[m->rank++] = m->N;
    if (m->rank > OX_MAX_RANK) return ox_node_err(n, OX_E_SHAPE, "result rank too large");
    return OX_OK;
}

void ox_matmul_offsets(const struct ox_matmul_shape *m, int64_t i, int64_t *ao, int64_t *bo) {
    *ao = *bo = 0;
    for (int d = m->brank - 1; d >= 0; d--) {
        int64_t k = i % m->bdims[d];
        i /= m->bdims[d];
        *ao += k * m->astr[d];
        *bo += k * m->bstr[d];
    }
}

/* ---- narrow element types ---------------------------------------------------------------
 *
 * One implementation of the codes that Cast, QuantizeLinear, DequantizeLinear and the generic
 * element access share. Where the ONNX texts disagree, the rule chosen follows the ONNX 1.23
 * reference implementation, which made the conformance data:
 * - float8, saturating: +-Inf gives +-the largest finite value in all four formats, as the
 *   Cast tables of Cast-24 and later say (the tables of Cast-19 to 23 said NaN for the FNUZ
 *   formats; the reference clips at every opset).
 * - float8, NaN: E4M3FN and E5M2 keep the sign (the Cast-24 table: -NaN -> -NaN, and unsaturated
 *   -Inf -> -NaN for E4M3FN); FNUZ has the one NaN 0x80.
 * - float4e2m1, NaN: 0x8 (-0), as the reference (ml_dtypes) and the conformance case
 *   test_cast_FLOAT_to_FLOAT4E2M1 have it; the "Float stored in 4 bits" page says 6. */

/* The float8 formats: mantissa bits and bias; the FNUZ ("uz") formats have one NaN (0x80) and
 * no negative zero or infinity, E4M3FN has NaN at S.1111.111 and no infinity, E5M2 is
 * IEEE-like (infinity S.11111.00, NaN S.11111.xx). */
struct f8fmt {
    int mbits, bias;
    bool uz, has_inf;
    unsigned maxcode; /* largest finite magnitude */
};

static const struct f8fmt *f8_of(ox_dtype dt) {
    static const struct f8fmt e4m3fn = {3, 7, false, false, 0x7e},
                              e4m3fnuz = {3, 8, true, false, 0x7f},
                              e5m2 = {2, 15, false, true, 0x7b},
                              e5m2fnuz = {2, 16, true, false, 0x7f};
    switch (dt) {
    case OX_FLOAT8E4M3FN: return &e4m3fn;
    case OX_FLOAT8E4M3FNUZ: return &e4m3fnuz;
    case OX_FLOAT8E5M2: return &e5m2;
    case OX_FLOAT8E5M2FNUZ: return &e5m2fnuz;
    default: return NULL;
    }
}

static double f8_decode(const struct f8fmt *f, uint8_t v) {
    int emask = (1 << (7 - f->mbits)) - 1;
    int e = (v >> f->mbits) & emask, m = v & ((1 << f->mbits) - 1);
    bool neg = v & 0x80;
    if (f->uz) {
        if (v == 0x80) return NAN;
    } else if (f->has_inf ? e == emask : (v & 0x7f) == 0x7f) {
        if (m == 0) return neg ? -INFINITY : INFINITY;
        return copysign(NAN, neg ? -1.0 : 1.0);
    }
    double a =
        e ? ldexp(m | (1 << f->mbits), e - f->bias - f->mbits) : ldexp(m, 1 - f->bias - f->mbits);
    return neg ? -a : a;
}

/* Round to nearest even. Out of range, Inf included: the largest finite value when saturating,
 * else Inf (E5M2) or NaN. */
static uint8_t f8_encode(const struct f8fmt *f, double v, bool saturate) {
    uint8_t sign = signbit(v) ? 0x80 : 0;
    uint8_t nan = f->uz ? 0x80 : (uint8_t)(sign | 0x7f);
    if (v != v) return nan;
    double a = fabs(v);
    int emin = 1 - f->bias;
    unsigned code;
    if (isinf(a)) {
        code = 0x100;
    } else if (a < ldexp(1, emin)) { /* subnormal; may round up to the smallest normal */
        code = (unsigned)rint(ldexp(a, f->mbits - emin));
    } else {
        int k;
        frexp(a, &k); /* a in [2^(k-1), 2^k) */
        int e = k - 1;
        if (e + f->bias > 0xff)
            code = 0x100;
        else
            code = ((unsigned)(e + f->bias) << f->mbits) + (unsigned)rint(ldexp(a, f->mbits - e)) -
                   (1u << f->mbits);
    }
    if (code > f->maxcode) {
        if (!saturate) return f->has_inf ? (uint8_t)(sign | 0x7c) : nan;
        code = f->maxcode;
    }
    if (f->uz && code == 0) return 0;
    return (uint8_t)(sign | code);
}

/* float4e2m1, S.EE.M with bias 1: magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6; no Inf or NaN. */
static double f4_decode(uint8_t v) {
    static const double mag[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
    double a = mag[v & 7];
    return v & 8 ? -a : a;
}

/* Round to nearest even (ties go to the even code), clamped to +-6. */
static uint8_t f4_encode(double v) {
    if (v != v) return 0x8;
    uint8_t sign = signbit(v) ? 8 : 0;
    double a = fabs(v);
    uint8_t c = a <= 0.25   ? 0
                : a < 0.75  ? 1
                : a <= 1.25 ? 2
                : a < 1.75  ? 3
                : a <= 2.5  ? 4
                : a < 3.5   ? 5
                : a <= 5    ? 6
                            : 7;
    return (uint8_t)(sign | c);
}

/* float8e8m0: 2^(code - 127), NaN at 0xff. Rounded up (away from zero) unless the flags say
 * down or nearest (ties up); out of range the largest (0xfe) when saturating, else NaN. Zero,
 * negatives and values under 2^-127 give 0 (the smallest code). */
static uint8_t e8m0_encode(double v, unsigned flags) {
    bool saturate = flags & OX_NARROW_SATURATE;
    if (v != v) return 0xff;
    if (v <= 0) return 0;
    if (isinf(v)) return saturate ? 0xfe : 0xff;
    int k;
    double fr = frexp(v, &k); /* v = fr * 2^k, fr in [0.5, 1) */
    int e = k - 1;            /* v = (2 fr) * 2^e */
    if (fr != 0.5) {
        if (flags & OX_NARROW_E8M0_NEAREST) {
            if (2 * fr >= 1.5) e++;
        } else if (!(flags & OX_NARROW_E8M0_DOWN)) {
            e++;
        }
    }
    int code = e + 127;
    if (code < 0) return 0;
    if (code > 254) return saturate ? 0xfe : 0xff;
    return (uint8_t)code;
}

/* Bits of a sub-byte integer type, 0 for any other type. */
static int int_bits(ox_dtype dt) {
    switch (dt) {
    case OX_INT4:
    case OX_UINT4: return 4;
    case OX_INT2:
    case OX_UINT2: return 2;
    default: return 0;
    }
}

bool ox_is_narrow(ox_dtype dt) {
    return f8_of(dt) || int_bits(dt) || dt == OX_FLOAT4E2M1 || dt == OX_FLOAT8E8M0;
}

double ox_narrow_decode(ox_dtype dt, uint8_t code) {
    const struct f8fmt *f = f8_of(dt);
    if (f) return f8_decode(f, code);
    switch (dt) {
    case OX_FLOAT4E2M1: return f4_decode(code);
    case OX_FLOAT8E8M0: return code == 0xff ? NAN : ldexp(1.0, (int)code - 127);
    case OX_INT4: return (int8_t)(uint8_t)(code << 4) >> 4;
    case OX_INT2: return (int8_t)(uint8_t)(code << 6) >> 6;
    case OX_UINT4: return code & 0xf;
    case OX_UINT2: return code & 0x3;
    default: return 0;
    }
}

uint8_t ox_narrow_encode(ox_dtype dt, double v, unsigned flags) {
    const struct f8fmt *f = f8_of(dt);
    if (f) return f8_encode(f, v, flags & OX_NARROW_SATURATE);
    if (dt == OX_FLOAT4E2M1) return f4_encode(v);
    if (dt == OX_FLOAT8E8M0) return e8m0_encode(v, flags);
    int bits = int_bits(dt);
    if (!bits) return 0;
    /* truncated toward zero, then wrapped to the type's bits (numpy's astype) */
    int64_t k = v != v || fabs(v) > 9e18 ? 0 : (int64_t)v;
    unsigned u = (unsigned)(k & ((1 << bits) - 1));
    if ((dt == OX_INT4 || dt == OX_INT2) && (u >> (bits - 1)))
        return (uint8_t)(int8_t)((int)u - (1 << bits));
    return (uint8_t)u;
}

double ox_get_f64(const ox_tensor *t, int64_t i) {
    const void *p = t->data;
    switch (t->dtype) {
    case OX_FLOAT: return ((const float *)p)[i];
    case OX_DOUBLE: return ((const double *)p)[i];
    case OX_FLOAT16: return ox_half_to_float(((const uint16_t *)p)[i]);
    case OX_BFLOAT16: return ox_bf16_to_float(((const uint16_t *)p)[i]);
    case OX_INT8:
    case OX_INT4:
    case OX_INT2: return ((const int8_t *)p)[i];
    case OX_UINT8:
    case OX_UINT4:
    case OX_UINT2: return ((const uint8_t *)p)[i];
    case OX_BOOL: return ((const uint8_t *)p)[i] != 0;
    case OX_INT16: return ((const int16_t *)p)[i];
    case OX_UINT16: return ((const uint16_t *)p)[i];
    case OX_INT32: return ((const int32_t *)p)[i];
    case OX_UINT32: return ((const uint32_t *)p)[i];
    case OX_INT64: return (double)((const int64_t *)p)[i];
    case OX_UINT64: return (double)((const uint64_t *)p)[i];
    case OX_FLOAT8E4M3FN:
    case OX_FLOAT8E4M3FNUZ:
    case OX_FLOAT8E5M2:
    case OX_FLOAT8E5M2FNUZ:
    case OX_FLOAT8E8M0:
    case OX_FLOAT4E2M1: return ox_narrow_decode(t->dtype, ((const uint8_t *)p)[i]);
    default: return 0;
    }
}

/* Float to integer as Cast converts (kernels/cpu/elementwise.c), never the undefined C
 * conversion: NaN gives 0, out of range saturates; negative values to unsigned types wrap
 * through int64 (as numpy does). */
static int64_t f64_to_int(double v, int64_t lo, int64_t hi) {
    if (v != v) return 0;
    if (v <= (double)lo) return lo;
    if (v >= (double)hi) return hi;
    return (int64_t)v;
}

static uint64_t f64_to_uint(double v, uint64_t hi) {
    if (v != v) return 0;
    if (v < 0) return (uint64_t)f64_to_int(v, INT64_MIN, INT64_MAX);
    if (v >= (double)hi) return hi;
    return (uint64_t)v;
}

void ox_set_f64(ox_tensor *t, int64_t i, double v) {
    void *p = t->data;
    switch (t->dtype) {
    case OX_FLOAT: ((float *)p)[i] = (float)v; break;
    case OX_DOUBLE: ((double *)p)[i] = v; break;
    case OX_FLOAT16: ((uint16_t *)p)[i] = ox_float_to_half((float)v); break;
    case OX_BFLOAT16: ((uint16_t *)p)[i] = ox_float_to_bf16((float)v); break;
    case OX_INT8:
    case OX_INT4:
    case OX_INT2: ((int8_t *)p)[i] = (int8_t)f64_to_int(v, INT8_MIN, INT8_MAX); break;
    case OX_UINT8:
    case OX_UINT4:
    case OX_UINT2: ((uint8_t *)p)[i] = (uint8_t)f64_to_uint(v, UINT8_MAX); break;
    case OX_BOOL: ((uint8_t *)p)[i] = v != 0; break;
    case OX_INT16: ((int16_t *)p)[i] = (int16_t)f64_to_int(v, INT16_MIN, INT16_MAX); break;
    case OX_UINT16: ((uint16_t *)p)[i] = (uint16_t)f64_to_uint(v, UINT16_MAX); break;
    case OX_INT32: ((int32_t *)p)[i] = (int32_t)f64_to_int(v, INT32_MIN, INT32_MAX); break;
    case OX_UINT32: ((uint32_t *)p)[i] = (uint32_t)f64_to_uint(v, UINT32_MAX); break;
    case OX_INT64: ((int64_t *)p)[i] = f64_to_int(v, INT64_MIN, INT64_MAX); break;
    case OX_UINT64: ((uint64_t *)p)[i] = f64_to_uint(v, UINT64_MAX); break;
    case OX_FLOAT8E4M3FN:
    case OX_FLOAT8E4M3FNUZ:
    case OX_FLOAT8E5M2:
    case OX_FLOAT8E5M2FNUZ:
    case OX_FLOAT8E8M0:
    case OX_FLOAT4E2M1:
        ((uint8_t *)p)[i] = ox_narrow_encode(t->dtype, v, OX_NARROW_SATURATE);
        break;
    default: break;
    }
}

int64_t ox_get_i64(const ox_tensor *t, int64_t i) {
    const void *p = t->data;
    switch (t->dtype) {
    case OX_INT64: return ((const int64_t *)p)[i];
    case OX_UINT64: return (int64_t)((const uint64_t *)p)[i];
    case OX_INT32: return ((const int32_t *)p)[i];
    case OX_UINT32: return ((const uint32_t *)p)[i];
    case OX_INT16: return ((const int16_t *)p)[i];
    case OX_UINT16: return ((const uint16_t *)p)[i];
    case OX_INT8:
    case OX_INT4:
    case OX_INT2: return ((const int8_t *)p)[i];
    case OX_UINT8:
    case OX_UINT4:
    case OX_UINT2: return ((const uint8_t *)p)[i];
    case OX_BOOL: return ((const uint8_t *)p)[i] != 0;
    default: return (int64_t)ox_get_f64(t, i);
    }
}

void ox_set_i64(ox_tensor *t, int64_t i, int64_t v) {
    void *p = t->data;
    switch (t->dtype) {
    case OX_INT64: ((int64_t *)p)[i] = v; break;
    case OX_UINT64: ((uint64_t *)p)[i] = (uint64_t)v; break;
    case OX_INT32: ((int32_t *)p)[i] = (int32_t)v; break;
    case OX_UINT32: ((uint32_t *)p)[i] = (uint32_t)v; break;
    case OX_INT16: ((int16_t *)p)[i] = (int16_t)v; break;
    case OX_UINT16: ((uint16_t *)p)[i] = (uint16_t)v; break;
    case OX_INT8:
    case OX_INT4:
    case OX_INT2: ((int8_t *)p)[i] = (int8_t)v; break;
    case OX_UINT8:
    case OX_UINT4:
    case OX_UINT2: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case OX_BOOL: ((uint8_t *)p)[i] = v != 0; break;
    default: ox_set_f64(t, i, (double)v); break;
    }
}

void ox_mt_seed(struct ox_mt19937 *m, uint32_t seed) {
    for (int i = 0; i < 624; i++) {
        m->key[i] = seed;
        seed = 1812433253u * (seed ^ (seed >> 30)) + (uint32_t)i + 1;
    }
    m->pos = 624;
    m->has_gauss = false;
    m->gauss = 0;
}

uint32_t ox_mt_next(struct ox_mt19937 *m) {
    if (m->pos >= 624) {
        for (int i = 0; i < 624; i++) {
            uint32_t y = (m->key[i] & 0x80000000u) | (m->key[(i + 1) % 624] & 0x7fffffffu);
            m->key[i] = m->key[(i + 397) % 624] ^ (y >> 1) ^ (y & 1 ? 0x9908b0dfu : 0);
        }
        m->pos = 0;
    }
    uint32_t y = m->key[m->pos++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    return y ^ (y >> 18);
}

double ox_mt_double(struct ox_mt19937 *m) {
    uint32_t a = ox_mt_next(m) >> 5, b = ox_mt_next(m) >> 6;
    return (a * 67108864.0 + b) / 9007199254740992.0;
}

double ox_mt_gauss(struct ox_mt19937 *m) {
    if (m->has_gauss) {
        m->has_gauss = false;
        return m->gauss;
    }
    double x1, x2, r2;
    do {
        x1 = 2.0 * ox_mt_double(m) - 1.0;
        x2 = 2.0 * ox_mt_double(m) - 1.0;
        r2 = x1 * x1 + x2 * x2;
    } while (r2 >= 1.0 || r2 == 0.0);
    double f = sqrt(-2.0 * log(r2) / r2);
    m->gauss = f * x1;
    m->has_gauss = true;
    return f * x2;
}

double ox_tensor_get(const ox_tensor *t, int64_t i) {
    if (t->dtype == OX_STRING || t->dtype == OX_COMPLEX64 || t->dtype == OX_COMPLEX128) return NAN;
    return ox_get_f64(t, i);
}

void ox_tensor_set(ox_tensor *t, int64_t i, double v) {
    if (t->dtype == OX_STRING || t->dtype == OX_COMPLEX64 || t->dtype == OX_COMPLEX128) return;
    ox_set_f64(t, i, v);
}

/* ---- channels-last and channels-first ------------------------------------------------- */

void ox_nhwc_perms(int r, int64_t *to_first, int64_t *to_last) {
    to_first[0] = to_last[0] = 0;
    for (int d = 1; d < r; d++) {
        to_first[d] = d == 1 ? r - 1 : d - 1;
        to_last[d] = d == r - 1 ? 1 : d + 1;
    }
}

/* ---- a transpose for kernels that permute an operand ----------------------------------- */

ox_status ox_transpose_run(struct ox_kernel_ctx *ctx, const struct ox_node *n, const ox_tensor *src,
                           ox_tensor *dst, const int64_t *perm) {
    int v[1] = {0};
    struct ox_attr pa = {
        .name = "perm", .type = OX_ATTR_INTS, .n = src->rank, .ints = (int64_t *)perm};
    struct ox_node tn = {.name = n->name,
                         .domain = "",
                         .op_type = "Transpose",
                         .opset = 13,
                         .n_inputs = 1,
                         .inputs = v,
                         .n_outputs = 1,
                         .outputs = v,
                         .attrs = &pa,
                         .n_attrs = 1};
    return ox_op_find("", "Transpose", 13)->cpu(ctx, &tn, &src, &dst);
}

/* ---- fused ops (graph/optimize.c) ------------------------------------------------------ */

void ox_fused_clamp(const struct ox_node *n, float *lo, float *hi) {
    *lo = -INFINITY, *hi = INFINITY;
    const char *act = ox_attr_str(n, "activation", "");
    const float *p;
    int np = ox_attr_floats(n, "activation_params", &p);
    if (strcmp(act, "Relu") == 0) {
        *lo = 0;
    } else if (strcmp(act, "Clip") == 0 && np == 2) {
        *lo = p[0], *hi = p[1];
    }
}

bool ox_fused_silu(const struct ox_node *n) {
    return strcmp(ox_attr_str(n, "activation", ""), "Silu") == 0;
}

ox_status ox_fused_infer(struct ox_infer_ctx *ctx, const struct ox_node *n, const ox_tensor *z,
                         ox_tensor *out) {
    const char *act = ox_attr_str(n, "activation", "");
    if (*act && strcmp(act, "Relu") != 0 && strcmp(act, "Clip") != 0 && strcmp(act, "Silu") != 0)
        return ox_node_err(n, OX_E_INVALID, "activation '%s': expected Relu, Clip, Silu or none",
                           act);
    if (!z) return OX_OK;
    if (z->dtype != out->dtype)
        return ox_node_err(n, OX_E_INVALID, "Z is %s, the output %s", ox_dtype_name(z->dtype),
                           ox_dtype_name(out->dtype));
    int rank;
    int64_t dims[OX_MAX_RANK];
    ox_status st = ox_broadcast(n, out, z, &rank, dims);
    if (st) return st;
    bool same = rank == out->rank && !memcmp(dims, out->dims, sizeof(int64_t) * (size_t)rank);
    if (!same) { /* the base op's output goes to scratch, ahead of its own scratch */
        size_t b;
        if (!ox_tensor_bytes(out->dtype, out->rank, out->dims, &b))
            return ox_node_err(n, OX_E_NOMEM, "output size overflows");
        ctx->scratch_bytes += ox_align64(b);
        ox_set_shape(out, out->dtype, rank, dims);
    }
    return OX_OK;
}

bool ox_fused_split(struct ox_kernel_ctx *ctx, const struct ox_node *n, const ox_tensor *const *in,
                    const ox_tensor *z, ox_infer_fn base_infer, ox_tensor *tmp,
                    struct ox_kernel_ctx *base_ctx) {
    *base_ctx = *ctx;
    if (!z) return false;
    struct ox_infer_ctx ic = {.n_threads = ox_pool_size(ctx->pool), .precise = ctx->precise};
    ox_tensor *outs[1] = {tmp};
    memset(tmp, 0, sizeof *tmp);
    if (base_infer(&ic, n, in, outs) != OX_OK) return false;
    int rank;
    int64_t dims[OX_MAX_RANK];
    if (ox_broadcast(n, tmp, z, &rank, dims) != OX_OK) return false;
    if (rank == tmp->rank && !memcmp(dims, tmp->dims, sizeof(int64_t) * (size_t)rank)) return false;
    size_t b = 0;
    (void)ox_tensor_bytes(tmp->dtype, tmp->rank, tmp->dims, &b);
    tmp->data = ctx->scratch;
    base_ctx->scratch = (char *)ctx->scratch + ox_align64(b);
    base_ctx->scratch_bytes -= ox_align64(b);
    return true;
}

ox_status ox_fused_post(const struct ox_node *n, const ox_tensor *src, const ox_tensor *z,
                        ox_tensor *y, float lo, float hi, bool silu) {
    int64_t total = ox_tensor_numel(y);
    int64_t ss[OX_MAX_RANK], zs[OX_MAX_RANK], idx[OX_MAX_RANK] = {0};
    ox_broadcast_strides(src, y->rank, y->dims, ss);
    if (z) ox_broadcast_strides(z, y->rank, y->dims, zs);
    bool f32 = y->dtype == OX_FLOAT;
    if (!ox_dtype_is_float(y->dtype))
        return ox_node_err(n, OX_E_UNSUPPORTED, "fused epilogue on %s", ox_dtype_name(y->dtype));
    int64_t so = 0, zo = 0;
    for (int64_t i = 0; i < total; i++) {
        double v = f32 ? ((const float *)src->data)[so] : ox_get_f64(src, so);
        if (z) v += f32 ? ((const float *)z->data)[zo] : ox_get_f64(z, zo);
        if (f32) {
            /* float + float rounds once, as Add does */
            ((float *)y->data)[i] = ox_fused_act((float)v, lo, hi, silu);
        } else {
            /* round to the element type first, as the unfused Add would */
            ox_set_f64(y, i, v);
            v = ox_get_f64(y, i);
            if (silu) {
                v = v / (1.0 + exp(-v));
            } else {
                v = v < lo ? lo : v;
                v = v > hi ? hi : v;
            }
            ox_set_f64(y, i, v);
        }
        for (int d = y->rank - 1; d >= 0; d--) {
            so += ss[d];
            if (z) zo += zs[d];
            if (++idx[d] < y->dims[d]) break;
            so -= ss[d] * y->dims[d];
            if (z) zo -= zs[d] * y->dims[d];
            idx[d] = 0;
        }
    }
    return OX_OK;
}

void ox_release_pages(const void *p, size_t n) {
#ifdef MADV_PAGEOUT
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = ((uintptr_t)p + page - 1) / page * page, b = ((uintptr_t)p + n) / page * page;
    if (b > a) (void)madvise((void *)a, b - a, MADV_PAGEOUT); /* a hint: errors change nothing */
#else
    (void)p, (void)n;
#endif
}
