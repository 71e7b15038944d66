/* Quantized operators.
 *
 * Default domain: QuantizeLinear and DequantizeLinear (per tensor, per axis and blocked; the
 * integer types down to 2 bits, float8 and float4e2m1), DynamicQuantizeLinear, QLinearMatMul,
 * QLinearConv and ConvInteger. Domain ai.onnxexec: QuantizeDequantize, the two first ops'
 * round trip with one set of parameters (a QDQ model's Q -> DQ pairs, graph/optimize.c). Domain
 * com.microsoft: QGemm, DynamicQuantizeMatMul, MatMulIntegerToFloat, QLinearAdd, QLinearMul,
 * QLinearSigmoid, QLinearLeakyRelu, QLinearSoftmax, QLinearAveragePool, QLinearGlobalAveragePool
 * and QLinearConcat, as onnxruntime defines them.
 *
 * Integer results are exact. Products of zero-point-shifted 8-bit operands (widened to int16
 * in scratch) are summed in int32; the sum is requantized in double with a multiplier rounded
 * the way the ONNX reference rounds it (in the scales' type), then rounded half to even and
 * saturated to the output type. The com.microsoft ops compute in float as onnxruntime does.
 * Sub-byte types (int4, uint4, int2, uint2, float4e2m1) are stored one element per byte.
 */
#include "kernels/op.h"
#include "kernels/cpu/igemm.h"
#include "kernels/cpu/qconv8.h"
#include "kernels/cpu/qdw8.h"
#include "kernels/cpu/vecmath.h"

#include <float.h>
#include <stdlib.h>
#include <stdint.h>

/* ---- element types --------------------------------------------------------------------- */

/* Saturation range of an integer type that QuantizeLinear can produce. */
static bool qint_range(ox_dtype dt, int64_t *lo, int64_t *hi) {
    switch (dt) {
    case OX_UINT8: *lo = 0, *hi = 255; return true;
    case OX_INT8: *lo = -128, *hi = 127; return true;
    case OX_UINT16: *lo = 0, *hi = 65535; return true;
    case OX_INT16: *lo = -32768, *hi = 32767; return true;
    case OX_UINT4: *lo = 0, *hi = 15; return true;
    case OX_INT4: *lo = -8, *hi = 7; return true;
    case OX_UINT2: *lo = 0, *hi = 3; return true;
    case OX_INT2: *lo = -2, *hi = 1; return true;
    default: return false;
    }
}

/* onnxexec's twins of QLinearConv, QGemm and QLinearAdd (graph/optimize.c) clamp their output's
 * codes to the attribute y_range [lo, hi]: two values, lo <= hi, inside the type's range. */
static ox_status check_y_range(const struct ox_node *n, ox_dtype yt) {
    const int64_t *yr;
    int64_t tlo, thi;
    int nyr = strcmp(n->domain, OX_DOMAIN_ONNXEXEC) ? -1 : ox_attr_ints(n, "y_range", &yr);
    if (nyr < 0 || !qint_range(yt, &tlo, &thi)) return OX_OK;
    if (nyr != 2 || yr[0] > yr[1] || yr[0] < tlo || yr[1] > thi)
        return ox_node_err(n, OX_E_INVALID,
                           "y_range: expected two values [lo, hi], %lld <= lo <= hi <= %lld",
                           (long long)tlo, (long long)thi);
    return OX_OK;
}

static bool is_q8(ox_dtype dt) {
    return dt == OX_UINT8 || dt == OX_INT8;
}

/* High-precision types: inputs of QuantizeLinear, outputs of DequantizeLinear. */
static bool is_hp(ox_dtype dt) {
    return dt == OX_FLOAT || dt == OX_DOUBLE || dt == OX_FLOAT16 || dt == OX_BFLOAT16;
}

/* The float types QuantizeLinear can produce (float8 and float4e2m1), coded with the shared
 * narrow-type codec (kernels/op.h). */
static bool is_qfloat(ox_dtype dt) {
    switch (dt) {
    case OX_FLOAT8E4M3FN:
    case OX_FLOAT8E4M3FNUZ:
    case OX_FLOAT8E5M2:
    case OX_FLOAT8E5M2FNUZ:
    case OX_FLOAT4E2M1: return true;
    default: return false;
    }
}

/* Round v to the precision of a float type (the arithmetic of that type). */
static double round_to(double v, ox_dtype dt) {
    switch (dt) {
    case OX_FLOAT: return (float)v;
    case OX_FLOAT16: return ox_half_to_float(ox_float_to_half((float)v));
    case OX_BFLOAT16: return ox_bf16_to_float(ox_float_to_bf16((float)v));
    default: return v;
    }
}

/* Store v into a float tensor, rounding through float as numpy's float32 results do. */
static void setf(ox_tensor *t, int64_t i, double v) {
    switch (t->dtype) {
    case OX_FLOAT: ((float *)t->data)[i] = (float)v; break;
    case OX_DOUBLE: ((double *)t->data)[i] = v; break;
    case OX_FLOAT16: ((uint16_t *)t->data)[i] = ox_float_to_half((float)v); break;
    case OX_BFLOAT16: ((uint16_t *)t->data)[i] = ox_float_to_bf16((float)v); break;
    default: break;
    }
}

/* The type numpy computes a binary op of two float types in. */
static ox_dtype promote(ox_dtype a, ox_dtype b) {
    if (a == OX_DOUBLE || b == OX_DOUBLE) return OX_DOUBLE;
    if (a == b && is_hp(a)) return a;
    return OX_FLOAT;
}

static int64_t clamp_i64(double v, int64_t lo, int64_t hi) {
    if (!(v >= (double)lo)) return lo; /* NaN too */
    if (v > (double)hi) return hi;
    return (int64_t)v;
}

static bool same_shape(const ox_tensor *a, const ox_tensor *b) {
    if (a->rank != b->rank) return false;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i]) return false;
    return true;
}

/* A per-tensor parameter (scale or zero point): exactly one element. */
static ox_status check_scalar(const struct ox_node *n, const ox_tensor *t, const char *what) {
    char s[256];
    if (t && ox_tensor_numel(t) != 1)
        return ox_node_err(n, OX_E_SHAPE, "%s must hold one value, got %s", what,
                           ox_tensor_desc(t, s, sizeof s));
    return OX_OK;
}

/* Integer zero point (0 when omitted). */
static int32_t zp_of(const ox_tensor *t, int64_t i) {
    return t ? (int32_t)ox_get_i64(t, i) : 0;
}

/* Carve 64-byte aligned pieces out of scratch. */

/* Add a piece of rows*cols elements of esz bytes; false on overflow. */
static bool add_piece(size_t *total, int64_t rows, int64_t cols, size_t esz) {
    size_t b;
    if (rows < 0 || cols < 0 || !ox_mul_size((size_t)rows, (size_t)cols, &b) ||
        !ox_mul_size(b, esz, &b) || b > SIZE_MAX - 64)
        return false;
    return ox_add_size(*total, ox_align64(b), total);
}

/* a*b into *out; false on overflow (sizes are non-negative). */
static bool mul_i64(int64_t a, int64_t b, int64_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}

static void *take(char **p, int64_t count, size_t esz) {
    void *r = *p;
    *p += ox_align64((size_t)count * esz);
    return r;
}

/* ---- QuantizeLinear / DequantizeLinear --------------------------------------------------- */

/* How scale and zero point map onto x, viewed as [outer, ch, inner]: the parameter index of
 * element (o, c, i) is o*so + (c/block)*sc + i*si. */
struct qmap {
    int64_t outer, ch, inner, block;
    int64_t so, sc, si;
};

static ox_status qmap_make(const struct ox_node *n, const ox_tensor *x, const ox_tensor *s,
                           const ox_tensor *z, struct qmap *m) {
    char sx[256], ss[256];
    int64_t sn = ox_tensor_numel(s), numel = ox_tensor_numel(x);
    int64_t block = n->opset >= 21 ? ox_attr_int(n, "block_size", 0) : 0;
    if (block < 0)
        return ox_node_err(n, OX_E_INVALID, "block_size %lld is negative", (long long)block);
    if (z && !(same_shape(s, z) || (sn == 1 && ox_tensor_numel(z) == 1)))
        return ox_node_err(n, OX_E_SHAPE, "zero point %s and scale %s differ in shape",
                           ox_tensor_desc(z, sx, sizeof sx), ox_tensor_desc(s, ss, sizeof ss));
    *m = (struct qmap){1, 1, numel, 1, 0, 0, 0};
    if (sn == 1) return OX_OK;
    int ax;
    ox_status st = ox_norm_axis(n, ox_attr_int(n, "axis", 1), x->rank, &ax);
    if (st) return st;
    if (x->rank == 0) return ox_node_err(n, OX_E_SHAPE, "a scalar input needs a scalar scale");
    m->outer = m->inner = 1;
    for (int i = 0; i < ax; i++) m->outer *= x->dims[i];
    for (int i = ax + 1; i < x->rank; i++) m->inner *= x->dims[i];
    m->ch = x->dims[ax];
    if (block == 0) {
        if (s->rank != 1 || s->dims[0] != x->dims[ax])
            return ox_node_err(
                n, OX_E_SHAPE, "scale %s: expected one value or one per index of axis %d of %s",
                ox_tensor_desc(s, ss, sizeof ss), ax, ox_tensor_desc(x, sx, sizeof sx));
        m->sc = 1;
        return OX_OK;
    }
    bool ok = s->rank == x->rank;
    for (int i = 0; ok && i < x->rank; i++)
        ok = i == ax ? s->dims[i] == (x->dims[i] + block - 1) / block : s->dims[i] == x->dims[i];
    if (!ok)
        return ox_node_err(n, OX_E_SHAPE, "scale %s does not block %s by %lld along axis %d",
                           ox_tensor_desc(s, ss, sizeof ss), ox_tensor_desc(x, sx, sizeof sx),
                           (long long)block, ax);
    m->block = block;
    m->so = s->dims[ax] * m->inner;
    m->sc = m->inner;
    m->si = 1;
    return OX_OK;
}

static ox_status quant_out_type(const struct ox_node *n, const ox_tensor *z, ox_dtype *out) {
    int64_t od = n->opset >= 21 ? ox_attr_int(n, "output_dtype", 0) : 0;
    if (z && od && od != z->dtype)
        return ox_node_err(n, OX_E_INVALID,
                           "output_dtype %lld disagrees with the zero point's type %s",
                           (long long)od, ox_dtype_name(z->dtype));
    ox_dtype dt = z ? z->dtype : od ? (ox_dtype)od : OX_UINT8;
    int64_t lo = 0, hi = 0;
    if (!qint_range(dt, &lo, &hi) && !is_qfloat(dt))
        return ox_node_err(n, OX_E_UNSUPPORTED, "quantized type %s",
                           (unsigned)dt < OX_N_DTYPES ? ox_dtype_name(dt) : "?");
    *out = dt;
    return OX_OK;
}

static bool scale_type_ok(ox_dtype dt) {
    return is_hp(dt) || dt == OX_FLOAT8E8M0;
}

ox_status ox_q_infer_quantize(struct ox_infer_ctx *ctx, const struct ox_node *n,
                              const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    const ox_tensor *x = ox_in(n, in, 0), *s = ox_in(n, in, 1), *z = ox_in(n, in, 2);
    if (!x || !s) return ox_node_err(n, OX_E_INVALID, "expected inputs x and y_scale");
    if (!is_hp(x->dtype) && x->dtype != OX_INT32)
        return ox_node_err(n, OX_E_UNSUPPORTED, "input type %s", ox_dtype_name(x->dtype));
    if (!scale_type_ok(s->dtype))
        return ox_node_err(n, OX_E_UNSUPPORTED, "scale type %s", ox_dtype_name(s->dtype));
    ox_dtype dt = OX_UINT8;
    ox_status st = quant_out_type(n, z, &dt);
    if (st) return st;
    struct qmap m;
    if ((st = qmap_make(n, x, s, z, &m))) return st;
    ox_set_shape(out[0], dt, x->rank, x->dims);
    return OX_OK;
}

/* The common case: float input, float division, integer output, one scale for the run. */
#define QUANT_F32_RUN(T)                                                                           \
    {                                                                                              \
        T *d = (T *)y->data + off;                                                                 \
        for (int64_t i = 0; i < cnt; i++) {                                                        \
            float r = rintf(x[i] / s) + z;                                                         \
            if (!(r >= lo)) r = lo;                                                                \
            if (r > hi) r = hi;                                                                    \
            d[i] = (T)r;                                                                           \
        }                                                                                          \
    }                                                                                              \
    break;

#if defined(__x86_64__) && defined(__GNUC__)
static void quant_f32_8bit_avx512(const float *x, int64_t cnt, float s, float z, float lo, float hi,
                                  void *dst);
#endif

static void quant_f32_run(const float *x, int64_t cnt, float s, float z, float lo, float hi,
                          ox_tensor *y, int64_t off) {
#if defined(__x86_64__) && defined(__GNUC__)
    if ((y->dtype == OX_UINT8 || y->dtype == OX_INT8) && ox_sgemm_is_fast()) {
        quant_f32_8bit_avx512(x, cnt, s, z, lo, hi, (char *)y->data + off);
        return;
    }
#endif
    switch (y->dtype) {
    case OX_UINT8:
    case OX_UINT4:
    case OX_UINT2: QUANT_F32_RUN(uint8_t)
    case OX_INT8:
    case OX_INT4:
    case OX_INT2: QUANT_F32_RUN(int8_t)
    case OX_UINT16: QUANT_F32_RUN(uint16_t)
    case OX_INT16: QUANT_F32_RUN(int16_t)
    default: break;
    }
}

/* QuantizeLinear, DequantizeLinear and QuantizeDequantize of one scale for the whole tensor,
 * in pieces of QRUN_CHUNK elements over the pool (each piece the same run as the whole). */
#define QRUN_CHUNK 16384
struct qrun_job {
    const ox_tensor *x;
    ox_tensor *y;
    int64_t n;
    float s, z, lo, hi; /* z: the zero point (an int32 for DequantizeLinear) */
};

static void quant_piece(void *arg, int64_t b, int64_t e, int tid) {
    (void)tid;
    const struct qrun_job *j = arg;
    int64_t i0 = b * QRUN_CHUNK, i1 = e * QRUN_CHUNK < j->n ? e * QRUN_CHUNK : j->n;
    quant_f32_run((const float *)j->x->data + i0, i1 - i0, j->s, j->z, j->lo, j->hi, j->y, i0);
}

ox_status ox_q_cpu_quantize(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                            const ox_tensor *const *in, ox_tensor *const *out) {
    const ox_tensor *x = in[0], *s = in[1], *z = ox_in(n, in, 2);
    ox_tensor *y = out[0];
    struct qmap m;
    ox_status st = qmap_make(n, x, s, z, &m);
    if (st) return st;
    unsigned flags = ox_attr_int(n, "saturate", 1) ? OX_NARROW_SATURATE : 0;
    int64_t pa = n->opset >= 23 ? ox_attr_int(n, "precision", 0) : 0;
    ox_dtype prec = pa ? (ox_dtype)pa : promote(x->dtype, s->dtype);
    if (!is_hp(prec))
        return ox_node_err(n, OX_E_UNSUPPORTED, "precision %lld: expected a float type",
                           (long long)pa);
    int64_t lo = 0, hi = 0;
    bool is_int = qint_range(y->dtype, &lo, &hi);
    bool fast = is_int && x->dtype == OX_FLOAT && prec == OX_FLOAT;
    uint8_t *yb = y->data;
    if (fast && m.outer * m.ch == 1 && m.si == 0 && m.inner > QRUN_CHUNK) {
        struct qrun_job j = {.x = x,
                             .y = y,
                             .n = m.inner,
                             .s = (float)ox_get_f64(s, 0),
                             .z = (float)zp_of(z, 0),
                             .lo = (float)lo,
                             .hi = (float)hi};
        ox_parallel_for(ctx->pool, (m.inner + QRUN_CHUNK - 1) / QRUN_CHUNK, quant_piece, &j);
        return OX_OK;
    }
    for (int64_t o = 0; o < m.outer; o++)
        for (int64_t c = 0; c < m.ch; c++) {
            int64_t pb = o * m.so + (c / m.block) * m.sc, xo = (o * m.ch + c) * m.inner;
            if (fast && m.si == 0) {
                quant_f32_run((const float *)x->data + xo, m.inner, (float)ox_get_f64(s, pb),
                              (float)zp_of(z, pb), (float)lo, (float)hi, y, xo);
                continue;
            }
            for (int64_t i = 0; i < m.inner; i++) {
                int64_t p = pb + i * m.si, k = xo + i;
                double q = round_to(ox_get_f64(x, k) / ox_get_f64(s, p), prec);
                if (is_int)
                    ox_set_i64(y, k, clamp_i64(rint(q) + zp_of(z, p), lo, hi));
                else if (y->dtype == OX_FLOAT4E2M1)
                    yb[k] = ox_narrow_encode(y->dtype, q + (z ? ox_get_f64(z, p) : 0), flags);
                else /* float8: the zero point is not added, as in the reference */
                    yb[k] = ox_narrow_encode(y->dtype, q, flags);
            }
        }
    return OX_OK;
}

static bool dequant_in_ok(ox_dtype dt) {
    int64_t lo = 0, hi = 0;
    return qint_range(dt, &lo, &hi) || dt == OX_INT32 || is_qfloat(dt);
}

ox_status ox_q_infer_dequantize(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    const ox_tensor *x = ox_in(n, in, 0), *s = ox_in(n, in, 1), *z = ox_in(n, in, 2);
    if (!x || !s) return ox_node_err(n, OX_E_INVALID, "expected inputs x and x_scale");
    if (!dequant_in_ok(x->dtype))
        return ox_node_err(n, OX_E_UNSUPPORTED, "input type %s", ox_dtype_name(x->dtype));
    if (z && z->dtype != x->dtype)
        return ox_node_err(n, OX_E_INVALID, "zero point type %s differs from the input's %s",
                           ox_dtype_name(z->dtype), ox_dtype_name(x->dtype));
    if (!scale_type_ok(s->dtype))
        return ox_node_err(n, OX_E_UNSUPPORTED, "scale type %s", ox_dtype_name(s->dtype));
    int64_t od = n->opset >= 23 ? ox_attr_int(n, "output_dtype", 0) : 0;
    ox_dtype dt = od ? (ox_dtype)od : s->dtype;
    if (!is_hp(dt))
        return ox_node_err(n, OX_E_UNSUPPORTED, "output type %s: expected a float type",
                           (unsigned)dt < OX_N_DTYPES ? ox_dtype_name(dt) : "?");
    struct qmap m;
    ox_status st = qmap_make(n, x, s, z, &m);
    if (st) return st;
    ox_set_shape(out[0], dt, x->rank, x->dims);
    return OX_OK;
}

/* The common case: integer input, float scale and output, one scale for the run. */
#define DEQUANT_F32_RUN(T)                                                                         \
    {                                                                                              \
        const T *src = (const T *)x->data + off;                                                   \
        for (int64_t i = 0; i < cnt; i++) y[i] = (float)((int32_t)src[i] - z) * s;                 \
    }                                                                                              \
    return true;

static bool dequant_f32_run(const ox_tensor *x, int64_t off, int64_t cnt, float s, int32_t z,
                            float *y) {
    switch (x->dtype) {
    case OX_UINT8:
    case OX_UINT4:
    case OX_UINT2: DEQUANT_F32_RUN(uint8_t)
    case OX_INT8:
    case OX_INT4:
    case OX_INT2: DEQUANT_F32_RUN(int8_t)
    case OX_UINT16: DEQUANT_F32_RUN(uint16_t)
    case OX_INT16: DEQUANT_F32_RUN(int16_t)
    default: return false;
    }
}

static void dequant_piece(void *arg, int64_t b, int64_t e, int tid) {
    (void)tid;
    const struct qrun_job *j = arg;
    int64_t i0 = b * QRUN_CHUNK, i1 = e * QRUN_CHUNK < j->n ? e * QRUN_CHUNK : j->n;
    dequant_f32_run(j->x, i0, i1 - i0, j->s, (int32_t)j->z, (float *)j->y->data + i0);
}

ox_status ox_q_cpu_dequantize(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                              const ox_tensor *const *in, ox_tensor *const *out) {
    const ox_tensor *x = in[0], *s = in[1], *z = ox_in(n, in, 2);
    ox_tensor *y = out[0];
    struct qmap m;
    ox_status st = qmap_make(n, x, s, z, &m);
    if (st) return st;
    /* numpy: float32(x - zero point) times the scale, in float32 unless the scale is double */
    ox_dtype prec = promote(OX_FLOAT, s->dtype);
    bool is_float_in = is_qfloat(x->dtype);
    if (m.outer * m.ch == 1 && m.si == 0 && y->dtype == OX_FLOAT && s->dtype == OX_FLOAT &&
        m.inner > QRUN_CHUNK) { /* one scale for all: pieces over the pool */
        struct qrun_job j = {
            .x = x, .y = y, .n = m.inner, .s = ((const float *)s->data)[0], .z = zp_of(z, 0)};
        if (dequant_f32_run(x, 0, 0, j.s, j.z, y->data)) {
            ox_parallel_for(ctx->pool, (m.inner + QRUN_CHUNK - 1) / QRUN_CHUNK, dequant_piece, &j);
            return OX_OK;
        }
    }
    for (int64_t o = 0; o < m.outer; o++)
        for (int64_t c = 0; c < m.ch; c++) {
            int64_t pb = o * m.so + (c / m.block) * m.sc, xo = (o * m.ch + c) * m.inner;
            if (m.si == 0 && y->dtype == OX_FLOAT && s->dtype == OX_FLOAT &&
                dequant_f32_run(x, xo, m.inner, ((const float *)s->data)[pb], zp_of(z, pb),
                                (float *)y->data + xo))
                continue;
            for (int64_t i = 0; i < m.inner; i++) {
                int64_t p = pb + i * m.si, k = xo + i;
                double dx = is_float_in ? ox_get_f64(x, k)
                                        : round_to((double)(ox_get_i64(x, k) - zp_of(z, p)), prec);
                setf(y, k, round_to(dx * ox_get_f64(s, p), prec));
            }
        }
    return OX_OK;
}

/* ---- QuantizeDequantize (ai.onnxexec) ----------------------------------------------------- */

/* DequantizeLinear(QuantizeLinear(x, s, z), s, z): a QDQ model's round trip between its
 * float operators as one node (graph/optimize.c makes it where both use the same
 * parameters). Inputs and attributes are the QuantizeLinear's; the output has x's shape and
 * the dequantized type. Float x and scale with a one-element 8- or 16-bit zero point run
 * one pass (qdq_piece); every other case quantizes into scratch and dequantizes from it with
 * the two ops' own kernels, so that the result is always theirs. */
static bool qdq_fast(const ox_tensor *x, const ox_tensor *s, const ox_tensor *z, ox_dtype qt) {
    int64_t lo, hi;
    return x->dtype == OX_FLOAT && s->dtype == OX_FLOAT && ox_tensor_numel(s) == 1 &&
           (!z || ox_tensor_numel(z) == 1) && qint_range(qt, &lo, &hi);
}

ox_status ox_q_infer_qdq(struct ox_infer_ctx *ctx, const struct ox_node *n,
                         const ox_tensor *const *in, ox_tensor *const *out) {
    ox_tensor q = {0};
    ox_tensor *qo = &q;
    ox_status st = ox_q_infer_quantize(ctx, n, in, &qo);
    if (st) return st;
    const ox_tensor *dq_in[3] = {&q, in[1], ox_in(n, in, 2)};
    if ((st = ox_q_infer_dequantize(ctx, n, dq_in, out))) return st;
    if (!qdq_fast(in[0], in[1], ox_in(n, in, 2), q.dtype))
        ctx->scratch_bytes = (size_t)ox_tensor_numel(in[0]) * ox_dtype_size(q.dtype);
    return OX_OK;
}

struct qdq_job {
    const float *x;
    float *y;
    int64_t numel;
    float s, z, lo, hi;
};

#if defined(__x86_64__) && defined(__GNUC__)
/* QuantizeLinear's float arithmetic on 16 values: rint(x / s) + z (half to even), clamped to
 * [lo, hi]; max and min give lo for a NaN (their second operand), as the scalar loops'
 * comparisons do. */
__attribute__((target("avx512f"))) static inline __m512 quantize16(__m512 x, __m512 s, __m512 z,
                                                                   __m512 lo, __m512 hi) {
    __m512 r = _mm512_div_ps(x, s);
    r = _mm512_add_ps(_mm512_roundscale_ps(r, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), z);
    return _mm512_min_ps(_mm512_max_ps(r, lo), hi);
}

/* QuantizeLinear to 8 bits, 16 at a time (the values in [lo, hi] are whole: their int32
 * conversion is exact, and its low byte the code, signed or not). */
__attribute__((target("avx512f"))) static void quant_f32_8bit_avx512(const float *x, int64_t cnt,
                                                                     float s, float z, float lo,
                                                                     float hi, void *dst) {
    __m512 vs = _mm512_set1_ps(s), vz = _mm512_set1_ps(z);
    __m512 vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
    for (int64_t i = 0; i < cnt; i += 16) {
        __mmask16 m = tail_mask16(cnt - i);
        __m512 r = quantize16(_mm512_maskz_loadu_ps(m, x + i), vs, vz, vlo, vhi);
        store_bytes16((char *)dst + i, cnt - i, _mm512_cvtps_epi32(r));
    }
}

/* 16 at a time: the same division, rounding half to even and clamp (max and min give the
 * bound for a NaN, as the scalar loop's comparisons do). */
__attribute__((target("avx512f"))) static void qdq_avx512(const struct qdq_job *j, int64_t i0,
                                                          int64_t i1) {
    __m512 s = _mm512_set1_ps(j->s), z = _mm512_set1_ps(j->z);
    __m512 lo = _mm512_set1_ps(j->lo), hi = _mm512_set1_ps(j->hi);
    for (int64_t i = i0; i < i1; i += 16) {
        __mmask16 m = tail_mask16(i1 - i);
        __m512 r = quantize16(_mm512_maskz_loadu_ps(m, j->x + i), s, z, lo, hi);
        _mm512_mask_storeu_ps(j->y + i, m, _mm512_mul_ps(_mm512_sub_ps(r, z), s));
    }
}
#endif

/* QuantizeLinear's float arithmetic (rintf(x / s) + z, saturated), then DequantizeLinear's
 * ((q - z) * s, exact in float for these integers). */
static void qdq_piece(void *arg, int64_t b, int64_t e, int tid) {
    (void)tid;
    const struct qdq_job *j = arg;
    int64_t i0 = b * QRUN_CHUNK, i1 = e * QRUN_CHUNK < j->numel ? e * QRUN_CHUNK : j->numel;
#if defined(__x86_64__) && defined(__GNUC__)
    if (ox_sgemm_is_fast()) {
        qdq_avx512(j, i0, i1);
        return;
    }
#endif
    for (int64_t i = i0; i < i1; i++) {
        float r = rintf(j->x[i] / j->s) + j->z;
        if (!(r >= j->lo)) r = j->lo;
        if (r > j->hi) r = j->hi;
        j->y[i] = (r - j->z) * j->s;
    }
}

ox_status ox_q_cpu_qdq(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                       const ox_tensor *const *in, ox_tensor *const *out) {
    const ox_tensor *x = in[0], *s = in[1], *z = ox_in(n, in, 2);
    ox_dtype qt = OX_UINT8;
    ox_status st = quant_out_type(n, z, &qt);
    if (st) return st;
    if (!qdq_fast(x, s, z, qt)) {
        ox_tensor q = {.dtype = qt, .rank = x->rank, .data = ctx->scratch};
        memcpy(q.dims, x->dims, sizeof(int64_t) * (size_t)x->rank);
        ox_tensor *qo = &q;
        if ((st = ox_q_cpu_quantize(ctx, n, in, &qo))) return st;
        const ox_tensor *dq_in[3] = {&q, s, z};
        return ox_q_cpu_dequantize(ctx, n, dq_in, out);
    }
    int64_t lo = 0, hi = 0;
    qint_range(qt, &lo, &hi);
    struct qdq_job j = {.x = x->data,
                        .y = out[0]->data,
                        .numel = ox_tensor_numel(x),
                        .s = *(const float *)s->data,
                        .z = (float)zp_of(z, 0),
                        .lo = (float)lo,
                        .hi = (float)hi};
    ox_parallel_for(ctx->pool, (j.numel + QRUN_CHUNK - 1) / QRUN_CHUNK, qdq_piece, &j);
    return OX_OK;
}

/* ---- DynamicQuantizeLinear --------------------------------------------------------------- */

ox_status ox_q_infer_dynamic_quantize(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                      const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    const ox_tensor *x = ox_in(n, in, 0);
    if (!x) return ox_node_err(n, OX_E_INVALID, "expected input x");
    if (x->dtype != OX_FLOAT)
        return ox_node_err(n, OX_E_UNSUPPORTED, "input type %s: expected float",
                           ox_dtype_name(x->dtype));
    ox_set_shape(out[0], OX_UINT8, x->rank, x->dims);
    if (n->n_outputs > 1 && out[1]) ox_set_shape(out[1], OX_FLOAT, 0, NULL);
    if (n->n_outputs > 2 && out[2]) ox_set_shape(out[2], OX_UINT8, 0, NULL);
    return OX_OK;
}

#if defined(__x86_64__) && defined(__GNUC__)
/* The two loops below 16 floats at a time: a NaN is passed over by min and max (the second
 * operand is kept) and becomes 0 at the clamp, as there. */
__attribute__((target("avx512f"))) static void dq_range16(const float *x, int64_t cnt, float *mn,
                                                          float *mx) {
    __m512 lo = _mm512_setzero_ps(), hi = _mm512_setzero_ps();
    for (int64_t i = 0; i < cnt; i += 16) {
        __m512 v = _mm512_maskz_loadu_ps(tail_mask16(cnt - i), x + i); /* tail lanes: 0 */
        lo = _mm512_min_ps(v, lo);
        hi = _mm512_max_ps(v, hi);
    }
    *mn = _mm512_reduce_min_ps(lo), *mx = _mm512_reduce_max_ps(hi);
}

__attribute__((target("avx512f"))) static void dq_quant16(const float *x, int64_t cnt, float scale,
                                                          float zp, uint8_t *y) {
    __m512 s = _mm512_set1_ps(scale), z = _mm512_set1_ps(zp);
    __m512 lo = _mm512_setzero_ps(), hi = _mm512_set1_ps(255.0f);
    for (int64_t i = 0; i < cnt; i += 16) {
        __mmask16 m = tail_mask16(cnt - i);
        __m512 r = quantize16(_mm512_maskz_loadu_ps(m, x + i), s, z, lo, hi);
        store_bytes16(y + i, cnt - i, _mm512_cvtps_epi32(r));
    }
}
#endif

ox_status ox_q_cpu_dynamic_quantize(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                                    const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    const float *x = in[0]->data;
    int64_t cnt = ox_tensor_numel(in[0]);
    float mn = 0, mx = 0; /* the range always includes 0 */
#if defined(__x86_64__) && defined(__GNUC__)
    bool vec = ox_sgemm_is_fast();
    if (vec) dq_range16(x, cnt, &mn, &mx);
#else
    bool vec = false;
#endif
    for (int64_t i = 0; i < cnt && !vec; i++) {
        if (x[i] < mn) mn = x[i];
        if (x[i] > mx) mx = x[i];
    }
    float scale = (mx == mn ? 1.0f : mx - mn) / 255.0f;
    float zpf = 0.0f - mn / scale;
    if (!(zpf >= 0)) zpf = 0;
    if (zpf > 255) zpf = 255;
    float zp = rintf(zpf);
    uint8_t *y = out[0]->data;
#if defined(__x86_64__) && defined(__GNUC__)
    if (vec) dq_quant16(x, cnt, scale, zp, y);
#endif
    for (int64_t i = 0; i < cnt && !vec; i++) {
        float r = rintf(x[i] / scale) + zp;
        if (!(r >= 0)) r = 0;
        if (r > 255) r = 255;
        y[i] = (uint8_t)r;
    }
    if (n->n_outputs > 1 && out[1]) *(float *)out[1]->data = scale;
    if (n->n_outputs > 2 && out[2]) *(uint8_t *)out[2]->data = (uint8_t)zp;
    return OX_OK;
}

/* ---- integer matrix product ---------------------------------------------------------------- */

/* c[M,N] = a[M,K] * b[K,N], int16 operands summed in int32. Columns go in tiles so that a tile
 * of b stays in cache while every row of a passes over it. */
static void igemm(int64_t M, int64_t N, int64_t K, const int16_t *a, const int16_t *b, int32_t *c) {
    enum { TILE = 256 };
    for (int64_t j0 = 0; j0 < N; j0 += TILE) {
        int64_t nj = N - j0 < TILE ? N - j0 : TILE;
        for (int64_t i = 0; i < M; i++) {
            int32_t *ci = c + i * N + j0;
            const int16_t *ai = a + i * K;
            for (int64_t j = 0; j < nj; j++) ci[j] = 0;
            for (int64_t k = 0; k < K; k++) {
                int32_t av = ai[k];
                if (!av) continue;
                const int16_t *bk = b + k * N + j0;
                for (int64_t j = 0; j < nj; j++) ci[j] += av * (int32_t)bk[j];
            }
        }
    }
}

/* Widen n 8-bit elements of t from `off`, minus a zero point, into int16. */
static void widen(const ox_tensor *t, int64_t off, int64_t cnt, int32_t zp, int16_t *dst) {
    if (t->dtype == OX_UINT8) {
        const uint8_t *s = (const uint8_t *)t->data + off;
        for (int64_t i = 0; i < cnt; i++) dst[i] = (int16_t)(s[i] - zp);
    } else {
        const int8_t *s = (const int8_t *)t->data + off;
        for (int64_t i = 0; i < cnt; i++) dst[i] = (int16_t)(s[i] - zp);
    }
}

/* The int16 products a16 (M x K) x b16 (K x N; or bp, packed for ox_igemm16), each block of
 * sums given to emit: over the pool where ox_igemm16 runs (scratch: its bytes), else the
 * scalar loop into acc (M x N int32). */
static void igemm_emit(struct ox_kernel_ctx *ctx, int64_t M, int64_t N, int64_t K,
                       const int16_t *a16, const int16_t *b16, const void *bp, ox_igemm16_emit emit,
                       void *arg, int32_t *acc, void *scratch) {
    if (ox_igemm16_fast() && K > 0) {
        struct ox_igemm16_op op = {.M = M,
                                   .N = N,
                                   .K = K,
                                   .a = a16,
                                   .lda = K,
                                   .b = b16,
                                   .ldb = N,
                                   .b_packed = bp,
                                   .emit = emit,
                                   .arg = arg};
        ox_igemm16(ctx->pool, &op, scratch);
        return;
    }
    igemm(M, N, K, a16, b16, acc);
    for (int64_t i = 0; i < M; i++) emit(arg, i, 0, N, acc + i * N);
}

/* Requantize: saturate(round(acc * mult) + zp) into element i of y (8-bit). */
static inline void requant_store(ox_tensor *y, int64_t i, double v, int64_t lo, int64_t hi) {
    int64_t r = clamp_i64(rint(v), lo, hi);
    if (y->dtype == OX_UINT8)
        ((uint8_t *)y->data)[i] = (uint8_t)r;
    else
        ((int8_t *)y->data)[i] = (int8_t)r;
}

/* Whether infer may ask for prepared memory made from input wi and its zero point, input zi:
 * both constant (or the zero point absent). */
static bool may_pack(const struct ox_infer_ctx *ctx, const struct ox_node *n,
                     const ox_tensor *const *in, int wi, int zi) {
    return ox_igemm16_fast() && (ctx->const_inputs >> wi & 1) &&
           (!ox_in(n, in, zi) || (ctx->const_inputs >> zi & 1));
}

/* ---- QLinearMatMul ------------------------------------------------------------------------- */

/* Per-tensor, or one value per column of b (N values, 1-D). */
static ox_status check_per_col(const struct ox_node *n, const ox_tensor *t, int64_t N,
                               const char *what) {
    char s[256];
    if (t && ox_tensor_numel(t) != 1 && !(t->rank == 1 && t->dims[0] == N))
        return ox_node_err(n, OX_E_SHAPE, "%s %s: expected one value or %lld (one per column)",
                           what, ox_tensor_desc(t, s, sizeof s), (long long)N);
    return OX_OK;
}

/* A product's 8-bit types (QLinearMatMul, QGemm, QLinearConv): a, b and y's zero point int8 or
 * uint8, each zero point of its input's type. */
static ox_status check_mm_types(const struct ox_node *n, const ox_tensor *a, const ox_tensor *az,
                                const ox_tensor *b, const ox_tensor *bz, const ox_tensor *yz) {
    if (!is_q8(a->dtype) || !is_q8(b->dtype) || (yz && !is_q8(yz->dtype)))
        return ox_node_err(n, OX_E_UNSUPPORTED, "types %s, %s, %s: supported are int8 and uint8",
                           ox_dtype_name(a->dtype), ox_dtype_name(b->dtype),
                           yz ? ox_dtype_name(yz->dtype) : "-");
    if ((az && az->dtype != a->dtype) || (bz && bz->dtype != b->dtype))
        return ox_node_err(n, OX_E_INVALID, "zero point types must match their inputs");
    return OX_OK;
}

/* A product's quantization parameters: a's and y's one value each (y's may be absent), b's
 * one or one per column of N. */
static ox_status check_mm_params(const struct ox_node *n, const ox_tensor *as, const ox_tensor *az,
                                 const ox_tensor *bs, const ox_tensor *bz, const ox_tensor *ys,
                                 const ox_tensor *yz, int64_t N) {
    ox_status st;
    if ((st = check_scalar(n, as, "a_scale")) || (st = check_scalar(n, az, "a_zero_point")) ||
        (st = check_per_col(n, bs, N, "b_scale")) ||
        (st = check_per_col(n, bz, N, "b_zero_point")) || (st = check_scalar(n, ys, "y_scale")) ||
        (st = check_scalar(n, yz, "y_zero_point")))
        return st;
    return OX_OK;
}

ox_status ox_q_infer_qlinear_matmul(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                    const ox_tensor *const *in, ox_tensor *const *out) {
    const ox_tensor *a = ox_in(n, in, 0), *as = ox_in(n, in, 1), *az = ox_in(n, in, 2);
    const ox_tensor *b = ox_in(n, in, 3), *bs = ox_in(n, in, 4), *bz = ox_in(n, in, 5);
    const ox_tensor *ys = ox_in(n, in, 6), *yz = ox_in(n, in, 7);
    if (!a || !as || !b || !bs || !ys)
        return ox_node_err(n, OX_E_INVALID, "expected inputs a, a_scale, b, b_scale and y_scale");
    ox_status st;
    if ((st = check_mm_types(n, a, az, b, bz, yz))) return st;
    if (!is_hp(as->dtype) || as->dtype != bs->dtype || as->dtype != ys->dtype)
        return ox_node_err(n, OX_E_UNSUPPORTED, "scales must share one float type");
    struct ox_matmul_shape m;
    if ((st = ox_matmul_shape(n, a, b, &m))) return st;
    if ((st = check_mm_params(n, as, az, bs, bz, ys, yz, m.N))) return st;
    ox_set_shape(out[0], yz ? yz->dtype : a->dtype, m.rank, m.dims);
    size_t total = 0;
    /* one B for every batch: the batches' rows are one A for ox_igemm16 */
    int64_t rows = b->rank == 2 && ox_igemm16_fast() ? m.batch * m.M : m.M;
    if (!add_piece(&total, rows, m.K, 2) || !add_piece(&total, m.K, m.N, 2) ||
        !add_piece(&total, m.M, m.N, 4) || !add_piece(&total, m.N, 1, 8) ||
        !ox_igemm16_scratch(rows, m.K, ctx->n_threads, &total))
        return ox_node_err(n, OX_E_NOMEM, "scratch size overflows");
    ctx->scratch_bytes = total;
    if (b->rank == 2 && may_pack(ctx, n, in, 3, 5))
        ctx->prepared_bytes = ox_igemm16_b_bytes(m.K, m.N);
    return OX_OK;
}

struct qmm_out {
    ox_tensor *y;
    int64_t yo, N; /* y's first element of this product; its columns */
    const double *mult;
    double yzp;
    int64_t lo, hi;
};

static void qmm_emit(void *arg, int64_t i, int64_t n0, int64_t nn, const int32_t *acc) {
    const struct qmm_out *o = arg;
    for (int64_t j = 0; j < nn; j++)
        requant_store(o->y, o->yo + i * o->N + n0 + j, (double)acc[j] * o->mult[n0 + j] + o->yzp,
                      o->lo, o->hi);
}

/* B of a QLinearMatMul minus its zero point (one, or one per column), widened. */
struct qmm_b {
    const ox_tensor *b, *bz;
    int64_t K, N;
};

static void qmm_widen_b(const struct qmm_b *q, int64_t bo, int16_t *b16) {
    if (q->bz && ox_tensor_numel(q->bz) != 1) {
        for (int64_t k = 0; k < q->K; k++)
            for (int64_t j = 0; j < q->N; j++)
                b16[k * q->N + j] =
                    (int16_t)(ox_get_i64(q->b, bo + k * q->N + j) - zp_of(q->bz, j));
    } else {
        widen(q->b, bo, q->K * q->N, zp_of(q->bz, 0), b16);
    }
}

/* Prepared memory of a constant 2-D B: packed for ox_igemm16. */
static void qmm_pack_b(void *dst, void *arg) {
    const struct qmm_b *q = arg;
    int16_t *b16 = malloc(sizeof(int16_t) * (size_t)(q->K * q->N > 0 ? q->K * q->N : 1));
    if (!b16) {
        memset(dst, 0, ox_igemm16_b_bytes(q->K, q->N));
        return;
    }
    qmm_widen_b(q, 0, b16);
    ox_igemm16_pack_b(b16, q->N, q->K, q->N, dst);
    free(b16);
}

ox_status ox_q_cpu_qlinear_matmul(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                                  const ox_tensor *const *in, ox_tensor *const *out) {
    const ox_tensor *a = in[0], *as = in[1], *az = ox_in(n, in, 2);
    const ox_tensor *b = in[3], *bs = in[4], *bz = ox_in(n, in, 5);
    const ox_tensor *ys = in[6], *yz = ox_in(n, in, 7);
    ox_tensor *y = out[0];
    struct ox_matmul_shape m;
    ox_status st = ox_matmul_shape(n, a, b, &m);
    if (st) return st;
    char *p = ctx->scratch;
    /* one B for every batch (A's batches then lie one after another, as y's): all the rows
     * in one product */
    int64_t rows = b->rank == 2 && ox_igemm16_fast() ? m.batch * m.M : m.M;
    int16_t *a16 = take(&p, rows * m.K, 2), *b16 = take(&p, m.K * m.N, 2);
    int32_t *acc = take(&p, m.M * m.N, 4);
    double *mult = take(&p, m.N, 8);
    /* the reference rounds a_scale * b_scale / y_scale in the scales' type */
    ox_dtype sdt = as->dtype;
    bool bcol = ox_tensor_numel(bs) != 1;
    for (int64_t j = 0; j < m.N; j++)
        mult[j] = round_to(round_to(ox_get_f64(as, 0) * ox_get_f64(bs, bcol ? j : 0), sdt) /
                               ox_get_f64(ys, 0),
                           sdt);
    int64_t lo = 0, hi = 0;
    qint_range(y->dtype, &lo, &hi);
    int32_t azp = zp_of(az, 0);
    double yzp = zp_of(yz, 0);
    int64_t last_a = -1, last_b = -1;
    struct qmm_b qb = {b, bz, m.K, m.N};
    const void *bp = NULL; /* one constant B: packed once */
    if (b->rank == 2 && ox_igemm16_fast()) {
        struct ox_prep_key key = {b->data, {m.K, m.N, bz ? (int64_t)(intptr_t)bz->data : 0, 0}};
        bp = ox_kernel_prepared(ctx, qmm_pack_b, &qb, &key);
    }
    for (int64_t bi = 0; bi < m.batch; bi++) {
        int64_t ao, bo;
        ox_matmul_offsets(&m, bi, &ao, &bo);
        if (ao != last_a) widen(a, ao, rows * m.K, azp, a16);
        if (bo != last_b && !bp) qmm_widen_b(&qb, bo, b16);
        last_a = ao, last_b = bo;
        struct qmm_out o = {y, bi * m.M * m.N, m.N, mult, yzp, lo, hi};
        /* all the batches' rows at once where ox_igemm16 runs (igemm_emit: K > 0) */
        bool all = ox_igemm16_fast() && m.K > 0 && rows > m.M;
        igemm_emit(ctx, all ? rows : m.M, m.N, m.K, a16, b16, bp, qmm_emit, &o, acc, p);
        if (all) break;
    }
    return OX_OK;
}

/* ---- QGemm (com.microsoft) --------------------------------------------------------------- */

/* ONNX Runtime's quantized Gemm: A (M x K, or K x M with transA) and B (K x N, or N x K with
 * transB) of 8 bits with their scales and zero points (a's one value, b's one or one per
 * column), C an optional int32 bias added to the integer sums (one value, [N], [1, N],
 * [M, 1] or [M, N]), then each sum times alpha a_scale b_scale[j] in float: the output in
 * float when y_zero_point is absent (divided by y_scale where that is given), else
 * saturate(round(sum x alpha a_scale b_scale[j] / y_scale) + y_zero_point), as ONNX
 * Runtime's kernel computes it (the scale in float, rounded half to even). Inputs: A,
 * a_scale, a_zero_point, B, b_scale, b_zero_point, C, y_scale, y_zero_point. onnxexec's twin
 * (graph/optimize.c, from a QDQ Gemm) also clamps the codes to y_range. */
struct qgemm_shape {
    int64_t M, K, N;
    bool ta, tb;
};

static ox_status qgemm_shape(const struct ox_node *n, const ox_tensor *a, const ox_tensor *b,
                             struct qgemm_shape *g) {
    char sa[256], sb[256];
    g->ta = ox_attr_int(n, "transA", 0) != 0, g->tb = ox_attr_int(n, "transB", 0) != 0;
    /* onnxexec's twin also takes A [..., K] (a QDQ MatMul's), its leading dims the rows */
    bool rows = !strcmp(n->domain, OX_DOMAIN_ONNXEXEC) && !g->ta && a->rank >= 1;
    if ((a->rank != 2 && !rows) || b->rank != 2)
        return ox_node_err(n, OX_E_SHAPE, "A %s and B %s: expected matrices",
                           ox_tensor_desc(a, sa, sizeof sa), ox_tensor_desc(b, sb, sizeof sb));
    g->K = a->dims[g->ta ? 0 : a->rank - 1];
    g->M = g->ta ? a->dims[1] : 1;
    for (int i = 0; !g->ta && i < a->rank - 1; i++) g->M *= a->dims[i];
    g->N = b->dims[g->tb ? 0 : 1];
    if (b->dims[g->tb ? 1 : 0] != g->K)
        return ox_node_err(n, OX_E_SHAPE, "A %s and B %s (transA %d, transB %d) do not multiply",
                           ox_tensor_desc(a, sa, sizeof sa), ox_tensor_desc(b, sb, sizeof sb),
                           g->ta, g->tb);
    return OX_OK;
}

/* C's element for (i, j), by its broadcast: one, [N], [1, N], [M, 1] or [M, N]. */
static int32_t qgemm_bias(const ox_tensor *c, int64_t M, int64_t N, int64_t i, int64_t j) {
    if (!c) return 0;
    const int32_t *d = c->data;
    int64_t n = ox_tensor_numel(c);
    if (n == 1) return d[0];
    if (c->rank == 2 && c->dims[0] == M && c->dims[1] == N) return d[i * N + j];
    if (c->rank == 2 && c->dims[1] == 1) return d[i];
    return d[j];
}

ox_status ox_q_infer_qgemm(struct ox_infer_ctx *ctx, const struct ox_node *n,
                           const ox_tensor *const *in, ox_tensor *const *out) {
    const ox_tensor *a = ox_in(n, in, 0), *as = ox_in(n, in, 1), *az = ox_in(n, in, 2);
    const ox_tensor *b = ox_in(n, in, 3), *bs = ox_in(n, in, 4), *bz = ox_in(n, in, 5);
    const ox_tensor *c = ox_in(n, in, 6), *ys = ox_in(n, in, 7), *yz = ox_in(n, in, 8);
    char s[256];
    if (!a || !as || !b || !bs)
        return ox_node_err(n, OX_E_INVALID, "expected inputs A, a_scale, B and b_scale");
    ox_status st;
    if ((st = check_mm_types(n, a, az, b, bz, yz))) return st;
    if (as->dtype != OX_FLOAT || bs->dtype != OX_FLOAT || (ys && ys->dtype != OX_FLOAT))
        return ox_node_err(n, OX_E_UNSUPPORTED, "scales must be float");
    if (c && c->dtype != OX_INT32)
        return ox_node_err(n, OX_E_INVALID, "C of type %s: expected int32",
                           ox_dtype_name(c->dtype));
    struct qgemm_shape g;
    if ((st = qgemm_shape(n, a, b, &g))) return st;
    if ((st = check_mm_params(n, as, az, bs, bz, ys, yz, g.N))) return st;
    if (c && !(ox_tensor_numel(c) == 1 || (c->rank == 1 && c->dims[0] == g.N) ||
               (c->rank == 2 && (c->dims[0] == 1 || c->dims[0] == g.M) && c->dims[1] == g.N) ||
               (c->rank == 2 && c->dims[0] == g.M && c->dims[1] == 1)))
        return ox_node_err(n, OX_E_SHAPE, "C %s does not broadcast to [%lld, %lld]",
                           ox_tensor_desc(c, s, sizeof s), (long long)g.M, (long long)g.N);
    if ((st = check_y_range(n, yz ? yz->dtype : OX_FLOAT))) return st;
    int64_t dims[OX_MAX_RANK] = {g.M, g.N};
    int rank = 2;
    if (a->rank != 2 && !g.ta) { /* A [..., K]: y [..., N] */
        rank = a->rank;
        memcpy(dims, a->dims, sizeof(int64_t) * (size_t)rank);
        dims[rank - 1] = g.N;
    }
    ox_set_shape(out[0], yz ? yz->dtype : OX_FLOAT, rank, dims);
    size_t total = 0;
    if (!add_piece(&total, g.M, g.K, 2) || !add_piece(&total, g.K, g.N, 2) ||
        !add_piece(&total, g.M, g.N, 4) || !add_piece(&total, g.N, 1, 4) ||
        !ox_igemm16_scratch(g.M, g.K, ctx->n_threads, &total))
        return ox_node_err(n, OX_E_NOMEM, "scratch size overflows");
    ctx->scratch_bytes = total;
    if (may_pack(ctx, n, in, 3, 5)) { /* either packing (qgemm_pack_b) */
        size_t b16 = ox_igemm16_b_bytes(g.K, g.N);
        size_t b8 = ox_align64(ox_igemm8_b_bytes(g.K, g.N)) + ox_align64((size_t)g.N * 4);
        ctx->prepared_bytes = b16 > b8 ? b16 : b8;
    }
    return OX_OK;
}

struct qgemm_b {
    const ox_tensor *b, *bz;
    struct qgemm_shape g;
    bool use8; /* the 8-bit packing: int8 B (zero points 0) against uint8 A */
};

/* Whether the 8-bit products run (vpdpbusd): uint8 A as stored (no transA), int8 B whose
 * zero points are all 0, where the CPU has AVX-512 VNNI. */
static bool qgemm_use8(const ox_tensor *a, const ox_tensor *b, const ox_tensor *bz, bool ta) {
    if (!ox_igemm8_fast() || ta || a->dtype != OX_UINT8 || b->dtype != OX_INT8) return false;
    for (int64_t j = 0; bz && j < ox_tensor_numel(bz); j++)
        if (((const int8_t *)bz->data)[j]) return false;
    return true;
}

/* B as K x N int16 minus its zero point (one, or one per column), transposed from N x K. */
static void qgemm_widen_b(const struct qgemm_b *q, int16_t *b16) {
    const struct qgemm_shape *g = &q->g;
    bool col = q->bz && ox_tensor_numel(q->bz) != 1;
    for (int64_t k = 0; k < g->K; k++)
        for (int64_t j = 0; j < g->N; j++)
            b16[k * g->N + j] = (int16_t)(ox_get_i64(q->b, g->tb ? j * g->K + k : k * g->N + j) -
                                          zp_of(q->bz, col ? j : 0));
}

/* Prepared memory of a constant B: int16 for ox_igemm16, or (use8) its bytes as K x N packed
 * for ox_igemm8 followed by the N column sums (the zero point of A comes off as za x those). */
static void qgemm_pack_b(void *dst, void *arg) {
    const struct qgemm_b *q = arg;
    size_t cnt = (size_t)(q->g.K * q->g.N > 0 ? q->g.K * q->g.N : 1);
    if (q->use8) {
        const int64_t K = q->g.K, N = q->g.N;
        int8_t *b8 = malloc(cnt);
        int32_t *sums = (int32_t *)((char *)dst + ox_align64(ox_igemm8_b_bytes(K, N)));
        if (!b8) {
            memset(dst, 0, ox_align64(ox_igemm8_b_bytes(K, N)) + ox_align64((size_t)N * 4));
            return;
        }
        const int8_t *src = q->b->data;
        for (int64_t j = 0; j < N; j++) sums[j] = 0;
        for (int64_t k = 0; k < K; k++)
            for (int64_t j = 0; j < N; j++) {
                int8_t v = src[q->g.tb ? j * K + k : k * N + j];
                b8[k * N + j] = v;
                sums[j] += v;
            }
        ox_igemm8_pack_b(b8, N, K, N, dst);
        free(b8);
        return;
    }
    int16_t *b16 = malloc(sizeof(int16_t) * cnt);
    if (!b16) {
        memset(dst, 0, ox_igemm16_b_bytes(q->g.K, q->g.N));
        return;
    }
    qgemm_widen_b(q, b16);
    ox_igemm16_pack_b(b16, q->g.N, q->g.K, q->g.N, dst);
    free(b16);
}

struct qgemm_out {
    ox_tensor *y;
    const ox_tensor *c;
    int64_t M, N;
    const int32_t *colsum; /* the 8-bit products: raw sums, less za x B's column sums */
    int32_t za;
    const float *scale; /* per column */
    float yzp;
    bool quantized;
    float lo, hi;
};

#if defined(__x86_64__) && defined(__GNUC__)
/* qgemm_emit's arithmetic on 16 columns at a time (the same operations lane by lane). */
__attribute__((target("avx512f"))) static void
qgemm_emit16(const struct qgemm_out *o, int64_t i, int64_t n0, int64_t nn, const int32_t *acc) {
    const int32_t *c = o->c ? o->c->data : NULL;
    /* C's broadcast (qgemm_bias): 0 one value, 1 [M, N], 2 [M, 1], 3 a row of N */
    int kind = 0;
    if (c && ox_tensor_numel(o->c) != 1)
        kind = o->c->rank == 2 && o->c->dims[0] == o->M && o->c->dims[1] == o->N ? 1
               : o->c->rank == 2 && o->c->dims[1] == 1                           ? 2
                                                                                 : 3;
    __m512i bias1 = _mm512_set1_epi32(!c ? 0 : kind == 2 ? c[i] : c[0]);
    __m512i za = _mm512_set1_epi32(o->za);
    __m512 yzp = _mm512_set1_ps(o->yzp), lo = _mm512_set1_ps(o->lo), hi = _mm512_set1_ps(o->hi);
    for (int64_t j = n0; j < n0 + nn; j += 16) {
        __mmask16 m = tail_mask16(n0 + nn - j);
        __m512i s = _mm512_maskz_loadu_epi32(m, acc + (j - n0));
        if (o->colsum)
            s = _mm512_sub_epi32(
                s, _mm512_mullo_epi32(za, _mm512_maskz_loadu_epi32(m, o->colsum + j)));
        s = _mm512_add_epi32(s, kind == 1   ? _mm512_maskz_loadu_epi32(m, c + i * o->N + j)
                                : kind == 3 ? _mm512_maskz_loadu_epi32(m, c + j)
                                            : bias1);
        __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(s), _mm512_maskz_loadu_ps(m, o->scale + j));
        int64_t k = i * o->N + j;
        if (!o->quantized) {
            _mm512_mask_storeu_ps((float *)o->y->data + k, m, v);
            continue;
        }
        __m512 r = _mm512_add_ps(
            _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), yzp);
        r = _mm512_min_ps(_mm512_max_ps(r, lo), hi);
        store_bytes16((char *)o->y->data + k, n0 + nn - j, _mm512_cvtps_epi32(r));
    }
}
#endif

static void qgemm_emit(void *arg, int64_t i, int64_t n0, int64_t nn, const int32_t *acc) {
    const struct qgemm_out *o = arg;
#if defined(__x86_64__) && defined(__GNUC__)
    if (ox_sgemm_is_fast()) {
        qgemm_emit16(o, i, n0, nn, acc);
        return;
    }
#endif
    for (int64_t j = n0; j < n0 + nn; j++) {
        /* the bias wraps into the int32 sum, as ONNX Runtime adds it to the accumulator */
        uint32_t raw = (uint32_t)acc[j - n0];
        if (o->colsum) raw -= (uint32_t)o->za * (uint32_t)o->colsum[j];
        int32_t sum = (int32_t)(raw + (uint32_t)qgemm_bias(o->c, o->M, o->N, i, j));
        float v = (float)sum * o->scale[j];
        int64_t k = i * o->N + j;
        if (!o->quantized) {
            ((float *)o->y->data)[k] = v;
            continue;
        }
        float r = nearbyintf(v) + o->yzp; /* rounding half to even, as MLAS */
        r = !(r >= o->lo) ? o->lo : r > o->hi ? o->hi : r;
        if (o->y->dtype == OX_UINT8)
            ((uint8_t *)o->y->data)[k] = (uint8_t)r;
        else
            ((int8_t *)o->y->data)[k] = (int8_t)r;
    }
}

ox_status ox_q_cpu_qgemm(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                         const ox_tensor *const *in, ox_tensor *const *out) {
    const ox_tensor *a = in[0], *as = in[1], *az = ox_in(n, in, 2);
    const ox_tensor *b = in[3], *bs = in[4], *bz = ox_in(n, in, 5);
    const ox_tensor *c = ox_in(n, in, 6), *ys = ox_in(n, in, 7), *yz = ox_in(n, in, 8);
    ox_tensor *y = out[0];
    struct qgemm_shape g;
    ox_status st = qgemm_shape(n, a, b, &g);
    if (st) return st;
    char *p = ctx->scratch;
    int16_t *a16 = take(&p, g.M * g.K, 2), *b16 = take(&p, g.K * g.N, 2);
    int32_t *acc = take(&p, g.M * g.N, 4);
    float *scale = take(&p, g.N, 4);
    /* alpha * a_scale * b_scale[j] (/ y_scale), in float and in that order, as ONNX Runtime */
    float alpha = ox_attr_float(n, "alpha", 1.0f), sa = *(const float *)as->data;
    bool bcol = ox_tensor_numel(bs) != 1;
    for (int64_t j = 0; j < g.N; j++) {
        scale[j] = alpha * sa * ((const float *)bs->data)[bcol ? j : 0];
        if (ys) scale[j] /= *(const float *)ys->data;
    }
    int64_t lo = 0, hi = 0;
    const int64_t *yr;
    if (yz) qint_range(yz->dtype, &lo, &hi);
    if (yz && !strcmp(n->domain, OX_DOMAIN_ONNXEXEC) && ox_attr_ints(n, "y_range", &yr) == 2) {
        lo = yr[0] > lo ? yr[0] : lo;
        hi = yr[1] < hi ? yr[1] : hi;
    }
    int32_t azp = zp_of(az, 0);
    struct qgemm_out o = {.y = y,
                          .c = c,
                          .M = g.M,
                          .N = g.N,
                          .za = azp,
                          .scale = scale,
                          .yzp = (float)zp_of(yz, 0),
                          .quantized = yz != NULL,
                          .lo = (float)lo,
                          .hi = (float)hi};
    if (g.M * g.N == 0) return OX_OK;
    struct qgemm_b qb = {b, bz, g, qgemm_use8(a, b, bz, g.ta)};
    const void *bp = NULL;
    if (ox_igemm16_fast() && g.K > 0) {
        struct ox_prep_key key = {
            b->data, {g.K, g.N, bz ? (int64_t)(intptr_t)bz->data : 0, g.tb + 2 * qb.use8}};
        bp = ox_kernel_prepared(ctx, qgemm_pack_b, &qb, &key);
    }
    if (bp && qb.use8) { /* the 8-bit products on A's bytes as they are */
        o.colsum = (const int32_t *)((const char *)bp + ox_align64(ox_igemm8_b_bytes(g.K, g.N)));
        struct ox_igemm16_op op = {.M = g.M,
                                   .N = g.N,
                                   .K = g.K,
                                   .mode8 = OX_IG8_A_U8_B_S8,
                                   .a8 = a->data,
                                   .lda = g.K,
                                   .b_packed = bp,
                                   .emit = qgemm_emit,
                                   .arg = &o};
        ox_igemm16(ctx->pool, &op, p);
        return OX_OK;
    }
    if (g.ta) { /* A^T: K x M stored, read across */
        for (int64_t i = 0; i < g.M; i++)
            for (int64_t k = 0; k < g.K; k++)
                a16[i * g.K + k] = (int16_t)(ox_get_i64(a, k * g.M + i) - azp);
    } else {
        widen(a, 0, g.M * g.K, azp, a16);
    }
    if (!bp) qgemm_widen_b(&qb, b16);
    igemm_emit(ctx, g.M, g.N, g.K, a16, b16, bp, qgemm_emit, &o, acc, p);
    return OX_OK;
}

/* ---- DynamicQuantizeMatMul, MatMulIntegerToFloat (com.microsoft) ------------------------- */

/* ONNX Runtime's fused forms of a dynamically quantized MatMul (its graph optimizer makes
 * them; an optimized model saved from it holds them): A [..., K] (float, quantized here to
 * uint8 as DynamicQuantizeLinear does; or 8-bit with its a_scale and a_zero_point) times a
 * 2-D B [K, N] of 8 bits with b_scale and b_zero_point (one, or one per column), the int32
 * sums times a_scale b_scale[j] in float, plus bias [N]: com.microsoft QGemm's float output
 * over the rows of A, then the bias. Inputs: DynamicQuantizeMatMul A, B, b_scale,
 * b_zero_point, bias; MatMulIntegerToFloat A, B, a_scale, b_scale, a_zero_point,
 * b_zero_point, bias. */
struct mm_float {
    const ox_tensor *a, *b, *as, *bs, *az, *bz, *bias;
    bool dynamic;
    int64_t rows, K, N;
};

static ox_status mm_float_read(const struct ox_node *n, const ox_tensor *const *in,
                               struct mm_float *m) {
    char sa[256], sb[256];
    m->dynamic = strcmp(n->op_type, "DynamicQuantizeMatMul") == 0;
    m->a = ox_in(n, in, 0), m->b = ox_in(n, in, 1);
    if (m->dynamic) {
        m->as = m->az = NULL, m->bs = ox_in(n, in, 2), m->bz = ox_in(n, in, 3);
        m->bias = ox_in(n, in, 4);
    } else {
        m->as = ox_in(n, in, 2), m->bs = ox_in(n, in, 3), m->az = ox_in(n, in, 4);
        m->bz = ox_in(n, in, 5), m->bias = ox_in(n, in, 6);
    }
    if (!m->a || !m->b || !m->bs || (!m->dynamic && !m->as))
        return ox_node_err(n, OX_E_INVALID, "expected inputs A, B and their scales");
    if (m->dynamic ? m->a->dtype != OX_FLOAT : !is_q8(m->a->dtype))
        return ox_node_err(n, OX_E_UNSUPPORTED, "A of type %s: expected %s",
                           ox_dtype_name(m->a->dtype), m->dynamic ? "float" : "int8 or uint8");
    if (m->a->rank < 1 || m->b->rank != 2 || m->b->dims[0] != m->a->dims[m->a->rank - 1])
        return ox_node_err(n, OX_E_SHAPE, "A %s and B %s: expected [..., K] and [K, N]",
                           ox_tensor_desc(m->a, sa, sizeof sa),
                           ox_tensor_desc(m->b, sb, sizeof sb));
    m->K = m->b->dims[0], m->N = m->b->dims[1];
    m->rows = m->K ? ox_tensor_numel(m->a) / m->K : 0;
    if (m->bias && (m->bias->dtype != OX_FLOAT || ox_tensor_numel(m->bias) != m->N))
        return ox_node_err(n, OX_E_SHAPE, "bias %s: expected float [%lld]",
                           ox_tensor_desc(m->bias, sa, sizeof sa), (long long)m->N);
    return OX_OK;
}

/* The QGemm node and its inputs for the rows of A (a2: A's 8-bit rows; as/az: its
 * parameters, made by DynamicQuantizeLinear for the dynamic form). */
static const struct ox_op *mm_float_qgemm(const struct mm_float *m, struct ox_node *q, int *ids,
                                          const ox_tensor **ins, const ox_tensor *a2,
                                          const ox_tensor *as, const ox_tensor *az) {
    for (int k = 0; k < 6; k++) ids[k] = k;
    *q = (struct ox_node){.domain = "com.microsoft",
                          .op_type = "QGemm",
                          .opset = 1,
                          .n_inputs = 6,
                          .inputs = ids,
                          .n_outputs = 1,
                          .outputs = ids};
    ins[0] = a2, ins[1] = as, ins[2] = az, ins[3] = m->b, ins[4] = m->bs, ins[5] = m->bz;
    return ox_op_find("com.microsoft", "QGemm", 1);
}

ox_status ox_q_infer_matmul_float(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                  const ox_tensor *const *in, ox_tensor *const *out) {
    struct mm_float m;
    ox_status st = mm_float_read(n, in, &m);
    if (st) return st;
    ox_tensor a2 = {.dtype = m.dynamic ? OX_UINT8 : m.a->dtype, .rank = 2, .dims = {m.rows, m.K}};
    ox_tensor as1 = {.dtype = OX_FLOAT}, az1 = {.dtype = OX_UINT8}, y2 = {0};
    ox_tensor *y2p = &y2;
    const ox_tensor *ins[6];
    struct ox_node q;
    int ids[6];
    const struct ox_op *row =
        mm_float_qgemm(&m, &q, ids, ins, &a2, m.dynamic ? &as1 : m.as, m.dynamic ? &az1 : m.az);
    struct ox_infer_ctx sub = *ctx;
    sub.scratch_bytes = sub.prepared_bytes = 0;
    /* B (1) and its zero point (3 or 5) constant: QGemm's 3 and 5 */
    int bzi = m.dynamic ? 3 : 5;
    sub.const_inputs = (ctx->const_inputs >> 1 & 1) << 3 | (ctx->const_inputs >> bzi & 1) << 5;
    if ((st = row->infer(&sub, &q, ins, &y2p))) return st;
    ctx->prepared_bytes = sub.prepared_bytes;
    /* the dynamic form's quantized A ahead of QGemm's own scratch */
    size_t own = m.dynamic ? ox_align64((size_t)m.rows * (size_t)m.K) : 0;
    if (!ox_add_size(own, sub.scratch_bytes, &ctx->scratch_bytes))
        return ox_node_err(n, OX_E_NOMEM, "scratch size overflows");
    int64_t dims[OX_MAX_RANK];
    memcpy(dims, m.a->dims, sizeof(int64_t) * (size_t)m.a->rank);
    dims[m.a->rank - 1] = m.N;
    ox_set_shape(out[0], OX_FLOAT, m.a->rank, dims);
    return OX_OK;
}

ox_status ox_q_cpu_matmul_float(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                                const ox_tensor *const *in, ox_tensor *const *out) {
    struct mm_float m;
    ox_status st = mm_float_read(n, in, &m);
    if (st) return st;
    ox_tensor a2 = {.dtype = m.dynamic ? OX_UINT8 : m.a->dtype,
                    .rank = 2,
                    .dims = {m.rows, m.K},
                    .data = m.a->data};
    float as_v = 0;
    uint8_t az_v = 0;
    ox_tensor as1 = {.dtype = OX_FLOAT, .data = &as_v}, az1 = {.dtype = OX_UINT8, .data = &az_v};
    struct ox_kernel_ctx sub = *ctx;
    if (m.dynamic) { /* A to uint8 as DynamicQuantizeLinear makes it */
        size_t own = ox_align64((size_t)m.rows * (size_t)m.K);
        a2.data = ctx->scratch;
        sub.scratch = ox_scratch_at(ctx->scratch, own);
        sub.scratch_bytes = ctx->scratch_bytes - own;
        ox_tensor af = *m.a, *dq_out[3] = {&a2, &as1, &az1};
        const ox_tensor *dq_in[1] = {&af};
        int ids[3] = {0, 1, 2};
        struct ox_node dq = {.domain = "",
                             .op_type = "DynamicQuantizeLinear",
                             .opset = 11,
                             .n_inputs = 1,
                             .inputs = ids,
                             .n_outputs = 3,
                             .outputs = ids};
        if ((st = ox_q_cpu_dynamic_quantize(ctx, &dq, dq_in, dq_out))) return st;
    }
    ox_tensor y2 = {.dtype = OX_FLOAT, .rank = 2, .dims = {m.rows, m.N}, .data = out[0]->data};
    ox_tensor *y2p = &y2;
    const ox_tensor *ins[6];
    struct ox_node q;
    int ids[6];
    const struct ox_op *row =
        mm_float_qgemm(&m, &q, ids, ins, &a2, m.dynamic ? &as1 : m.as, m.dynamic ? &az1 : m.az);
    if ((st = row->cpu(&sub, &q, ins, &y2p))) return st;
    float *y = out[0]->data;
    for (int64_t r = 0; m.bias && r < m.rows; r++)
        for (int64_t j = 0; j < m.N; j++) y[r * m.N + j] += ((const float *)m.bias->data)[j];
    return OX_OK;
}

/* ---- convolution geometry (QLinearConv, ConvInteger) ---------------------------------------- */

struct cgeom {
    int nsp;
    int64_t in[OX_MAX_RANK], k[OX_MAX_RANK], s[OX_MAX_RANK], d[OX_MAX_RANK];
    int64_t pb[OX_MAX_RANK], pe[OX_MAX_RANK], out[OX_MAX_RANK];
    int64_t in_size, out_size, k_size;
    int64_t N, C, M, group, cg, mg, kdim;
};

static ox_status conv_geom(const struct ox_node *n, const ox_tensor *x, const ox_tensor *w,
                           struct cgeom *g) {
    char sx[256], sw[256];
    if (x->rank < 3 || w->rank != x->rank)
        return ox_node_err(n, OX_E_SHAPE,
                           "input %s and weights %s: expected the same rank, 3 or more",
                           ox_tensor_desc(x, sx, sizeof sx), ox_tensor_desc(w, sw, sizeof sw));
    g->nsp = x->rank - 2;
    g->N = x->dims[0], g->C = x->dims[1], g->M = w->dims[0];
    g->group = ox_attr_int(n, "group", 1);
    if (g->group <= 0 || g->C % g->group || g->M % g->group || w->dims[1] * g->group != g->C)
        return ox_node_err(n, OX_E_SHAPE, "input %s, weights %s and group %lld do not agree",
                           ox_tensor_desc(x, sx, sizeof sx), ox_tensor_desc(w, sw, sizeof sw),
                           (long long)g->group);
    g->cg = g->C / g->group, g->mg = g->M / g->group;
    const int64_t *a;
    int na = ox_attr_ints(n, "kernel_shape", &a);
    for (int i = 0; i < g->nsp; i++) {
        g->in[i] = x->dims[i + 2], g->k[i] = w->dims[i + 2];
        g->s[i] = g->d[i] = 1, g->pb[i] = g->pe[i] = 0;
        if (na >= 0 && (na != g->nsp || a[i] != g->k[i]))
            return ox_node_err(n, OX_E_SHAPE, "kernel_shape disagrees with weights %s",
                               ox_tensor_desc(w, sw, sizeof sw));
    }
    if ((na = ox_attr_ints(n, "strides", &a)) >= 0) {
        if (na != g->nsp)
            return ox_node_err(n, OX_E_INVALID, "strides has %d values, expected %d", na, g->nsp);
        for (int i = 0; i < na; i++) g->s[i] = a[i];
    }
    if ((na = ox_attr_ints(n, "dilations", &a)) >= 0) {
        if (na != g->nsp)
            return ox_node_err(n, OX_E_INVALID, "dilations has %d values, expected %d", na, g->nsp);
        for (int i = 0; i < na; i++) g->d[i] = a[i];
    }
    /* bounds that keep the geometry arithmetic below overflow */
    for (int i = 0; i < g->nsp; i++) {
        if (g->s[i] <= 0 || g->d[i] <= 0 || g->s[i] > INT32_MAX || g->d[i] > INT32_MAX)
            return ox_node_err(n, OX_E_INVALID, "strides and dilations must be in [1, 2^31)");
        if (g->in[i] > INT32_MAX || g->k[i] > INT32_MAX)
            return ox_node_err(n, OX_E_UNSUPPORTED, "spatial extents of 2^31 or more");
    }
    const char *ap = ox_attr_str(n, "auto_pad", "NOTSET");
    bool same = strcmp(ap, "SAME_UPPER") == 0 || strcmp(ap, "SAME_LOWER") == 0;
    if (strcmp(ap, "NOTSET") == 0) {
        if ((na = ox_attr_ints(n, "pads", &a)) >= 0) {
            if (na != 2 * g->nsp)
                return ox_node_err(n, OX_E_INVALID, "pads has %d values, expected %d", na,
                                   2 * g->nsp);
            for (int i = 0; i < g->nsp; i++) {
                g->pb[i] = a[i], g->pe[i] = a[i + g->nsp];
                if (g->pb[i] < 0 || g->pe[i] < 0 || g->pb[i] > INT32_MAX || g->pe[i] > INT32_MAX)
                    return ox_node_err(n, OX_E_INVALID, "pads must be in [0, 2^31)");
            }
        }
    } else if (!same && strcmp(ap, "VALID") != 0) {
        return ox_node_err(n, OX_E_INVALID,
                           "auto_pad '%s': expected NOTSET, VALID, SAME_UPPER or SAME_LOWER", ap);
    }
    g->in_size = g->out_size = g->k_size = 1;
    for (int i = 0; i < g->nsp; i++) {
        int64_t ext = (g->k[i] - 1) * g->d[i] + 1;
        if (same) {
            g->out[i] = (g->in[i] + g->s[i] - 1) / g->s[i];
            int64_t total = (g->out[i] - 1) * g->s[i] + ext - g->in[i];
            if (total < 0) total = 0;
            g->pb[i] = ap[5] == 'U' ? total / 2 : total - total / 2;
            g->pe[i] = total - g->pb[i];
        } else {
            int64_t span = g->in[i] + g->pb[i] + g->pe[i] - ext;
            if (span < 0 || g->k[i] <= 0)
                return ox_node_err(n, OX_E_SHAPE, "kernel %s is larger than the padded input %s",
                                   ox_tensor_desc(w, sw, sizeof sw),
                                   ox_tensor_desc(x, sx, sizeof sx));
            g->out[i] = span / g->s[i] + 1;
        }
        if (!mul_i64(g->in_size, g->in[i], &g->in_size) ||
            !mul_i64(g->out_size, g->out[i], &g->out_size) ||
            !mul_i64(g->k_size, g->k[i], &g->k_size))
            return ox_node_err(n, OX_E_NOMEM, "convolution sizes overflow");
    }
    if (!mul_i64(g->cg, g->k_size, &g->kdim))
        return ox_node_err(n, OX_E_NOMEM, "convolution sizes overflow");
    return OX_OK;
}

static bool conv_pointwise(const struct cgeom *g) {
    for (int i = 0; i < g->nsp; i++)
        if (g->k[i] != 1 || g->s[i] != 1 || g->pb[i] || g->pe[i]) return false;
    return true;
}

/* Scratch: x of one image widened (C*in), the columns of one group, the widened weights (M*kdim),
 * then igemm_pool's (ig_scratch) or one group's int32 sums for igemm. */
static ox_status conv_scratch(const struct ox_node *n, const struct cgeom *g, int n_threads,
                              size_t *total) {
    *total = 0;
    if (!add_piece(total, g->C, g->in_size, 2) ||
        !add_piece(total, conv_pointwise(g) ? 0 : g->kdim, g->out_size, 2) ||
        !add_piece(total, g->M, g->kdim, 2) || !add_piece(total, g->M, 1, 4) ||
        !(ox_igemm16_fast() ? ox_igemm16_scratch(g->mg, g->kdim, n_threads, total)
                            : add_piece(total, g->mg, g->out_size, 4)))
        return ox_node_err(n, OX_E_NOMEM, "scratch size overflows");
    return OX_OK;
}

/* Columns of channels [c0, c1) of one group of one image: row (c, kernel offset), column
 * output position; the padding reads pad (0 where the zero point was already subtracted, the
 * zero point itself in the 8-bit form). One function per element type. */
/* The outputs [lo, hi) of a row whose input column ow * s + off lies in [0, in). */
static void inside_cols(int64_t off, int64_t s, int64_t in, int64_t out, int64_t *lo, int64_t *hi) {
    int64_t a = off < 0 ? (-off + s - 1) / s : 0, b = in - off > 0 ? (in - off + s - 1) / s : 0;
    *lo = a < out ? a : out;
    *hi = b < *lo ? *lo : b < out ? b : out;
}

#define IM2COL(NAME, T)                                                                            \
    static void NAME(const T *x, const struct cgeom *g, int64_t c0, int64_t c1, T pad, T *col) {   \
        int64_t row = c0 * g->k_size;                                                              \
        for (int64_t c = c0; c < c1; c++) {                                                        \
            const T *xc = x + c * g->in_size;                                                      \
            for (int64_t kk = 0; kk < g->k_size; kk++, row++) {                                    \
                int64_t ko[OX_MAX_RANK] = {0}, r = kk;                                             \
                for (int i = g->nsp - 1; i >= 0; i--) ko[i] = r % g->k[i], r /= g->k[i];           \
                T *dst = col + row * g->out_size;                                                  \
                if (g->nsp == 2) {                                                                 \
                    int64_t off = ko[1] * g->d[1] - g->pb[1];                                      \
                    for (int64_t oh = 0; oh < g->out[0]; oh++) {                                   \
                        int64_t ih = oh * g->s[0] - g->pb[0] + ko[0] * g->d[0];                    \
                        T *dr = dst + oh * g->out[1];                                              \
                        if (ih < 0 || ih >= g->in[0]) {                                            \
                            for (int64_t ow = 0; ow < g->out[1]; ow++) dr[ow] = pad;               \
                            continue;                                                              \
                        }                                                                          \
                        const T *xr = xc + ih * g->in[1];                                          \
                        int64_t lo = 0, hi = 0;                                                    \
                        inside_cols(off, g->s[1], g->in[1], g->out[1], &lo, &hi);                  \
                        for (int64_t ow = 0; ow < lo; ow++) dr[ow] = pad;                          \
                        if (g->s[1] == 1)                                                          \
                            memcpy(dr + lo, xr + lo + off, sizeof(T) * (size_t)(hi - lo));         \
                        else                                                                       \
                            for (int64_t ow = lo; ow < hi; ow++) dr[ow] = xr[ow * g->s[1] + off];  \
                        for (int64_t ow = hi; ow < g->out[1]; ow++) dr[ow] = pad;                  \
                    }                                                                              \
                    continue;                                                                      \
                }                                                                                  \
                int64_t o[OX_MAX_RANK] = {0};                                                      \
                for (int64_t q = 0; q < g->out_size; q++) {                                        \
                    int64_t idx = 0;                                                               \
                    bool inside = true;                                                            \
                    for (int i = 0; i < g->nsp; i++) {                                             \
                        int64_t v = o[i] * g->s[i] - g->pb[i] + ko[i] * g->d[i];                   \
                        if (v < 0 || v >= g->in[i]) inside = false;                                \
                        idx = idx * g->in[i] + v;                                                  \
                    }                                                                              \
                    dst[q] = inside ? xc[idx] : pad;                                               \
                    for (int i = g->nsp - 1; i >= 0; i--) {                                        \
                        if (++o[i] < g->out[i]) break;                                             \
                        o[i] = 0;                                                                  \
                    }                                                                              \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }
IM2COL(im2col16, int16_t)
IM2COL(im2col8, uint8_t)

/* Per-output-channel or per-tensor weight zero point. */
static ox_status check_per_m(const struct ox_node *n, const ox_tensor *t, int64_t M,
                             const char *what) {
    char s[256];
    if (t && ox_tensor_numel(t) != 1 && !(t->rank == 1 && t->dims[0] == M))
        return ox_node_err(n, OX_E_SHAPE,
                           "%s %s: expected one value or %lld (one per output channel)", what,
                           ox_tensor_desc(t, s, sizeof s), (long long)M);
    return OX_OK;
}

/* The integer convolution shared by ConvInteger and QLinearConv: `emit(arg, img, m, q0, nq,
 * acc)` receives the int32 sums of output channel m of image img at output positions
 * [q0, q0 + nq), from the threads of the pool where igemm_pool runs. */
typedef void (*conv_emit)(void *arg, int64_t img, int64_t m, int64_t q0, int64_t nq,
                          const int32_t *acc);

struct conv_job {
    const ox_tensor *x, *w, *xz, *wz;
    struct cgeom g;
    /* while running */
    const int16_t *x16;
    int16_t *col;
    const uint8_t *x8; /* the 8-bit form: this image's input, raw */
    const int32_t *rowsum;
    int32_t xzp;
    int64_t img, gr;
    conv_emit emit;
    void *arg;
};

static void im2col_piece(void *arg, int64_t c0, int64_t c1, int tid) {
    (void)tid;
    const struct conv_job *j = arg;
    if (j->x8)
        im2col8(j->x8 + j->gr * j->g.cg * j->g.in_size, &j->g, c0, c1, (uint8_t)j->xzp,
                (uint8_t *)j->col);
    else
        im2col16(j->x16 + j->gr * j->g.cg * j->g.in_size, &j->g, c0, c1, 0, j->col);
}

/* The 8-bit form's sums are of the raw input: less the zero point times the weights' sum. */
static void conv_block_emit(void *arg, int64_t m, int64_t n0, int64_t nn, const int32_t *c) {
    const struct conv_job *j = arg;
    int64_t mm = j->gr * j->g.mg + m;
    if (!j->x8) {
        j->emit(j->arg, j->img, mm, n0, nn, c);
        return;
    }
    int32_t t[IG_BLOCK_COLS], corr = j->xzp * j->rowsum[mm];
    for (int64_t q = 0; q < nn; q++) t[q] = c[q] - corr;
    j->emit(j->arg, j->img, mm, n0, nn, t);
}

/* Whether int8 zero points wz (absent: 0) are known and all 0. */
static bool wz_zero(const ox_tensor *wz) {
    if (!wz) return true;
    if (!wz->data || wz->dtype != OX_INT8) return false;
    for (int64_t i = 0; i < ox_tensor_numel(wz); i++)
        if (((const int8_t *)wz->data)[i]) return false;
    return true;
}

/* The 8-bit form (ox_igemm8): uint8 input, int8 weights whose zero points are all 0. */
static bool conv_is8(const struct conv_job *j) {
    return ox_igemm8_fast() && j->x->dtype == OX_UINT8 && j->w->dtype == OX_INT8 && wz_zero(j->wz);
}

/* Each output channel's sum of weights (the 8-bit form's correction). */
static void conv_rowsums(const struct conv_job *j, int32_t *rs) {
    const int8_t *w = j->w->data;
    for (int64_t m = 0; m < j->g.M; m++) {
        int32_t t = 0;
        for (int64_t k = 0; k < j->g.kdim; k++) t += w[m * j->g.kdim + k];
        rs[m] = t;
    }
}

/* The weights minus their zero points (one or one per output channel), widened. */
static void conv_widen_w(const struct conv_job *j, int16_t *w16) {
    const struct cgeom *g = &j->g;
    bool wcol = j->wz && ox_tensor_numel(j->wz) != 1;
    for (int64_t m = 0; m < g->M; m++)
        widen(j->w, m * g->kdim, g->kdim, zp_of(j->wz, wcol ? m : 0), w16 + m * g->kdim);
}

/* Prepared memory of constant weights: each group's rows packed for ox_igemm16, or for
 * ox_igemm8 followed by the row sums (the int16 packing's size covers the first once rounded
 * up to 64 bytes; then M sums). */
static size_t conv_packed_bytes(const struct cgeom *g) {
    return (size_t)g->group * ox_igemm16_a_bytes(g->mg, g->kdim) + 64 +
           ox_align64((size_t)g->M * 4);
}

static size_t conv_packed8_bytes(const struct cgeom *g) {
    return ox_align64((size_t)g->group * ox_igemm8_a_bytes(g->mg, g->kdim));
}

static void conv_pack_w(void *dst, void *arg) {
    const struct conv_job *j = arg;
    const struct cgeom *g = &j->g;
    if (conv_is8(j)) {
        for (int64_t gr = 0; gr < g->group; gr++)
            ox_igemm8_pack_a((const int8_t *)j->w->data + gr * g->mg * g->kdim, g->kdim, g->mg,
                             g->kdim, (char *)dst + gr * ox_igemm8_a_bytes(g->mg, g->kdim));
        conv_rowsums(j, (int32_t *)((char *)dst + conv_packed8_bytes(g)));
        return;
    }
    int16_t *w16 = malloc(sizeof(int16_t) * (size_t)(g->M * g->kdim > 0 ? g->M * g->kdim : 1));
    if (!w16) { /* zeros: the caller packs its own copy when it sees none (never here) */
        memset(dst, 0, conv_packed_bytes(g));
        return;
    }
    conv_widen_w(j, w16);
    for (int64_t gr = 0; gr < g->group; gr++)
        ox_igemm16_pack_a(w16 + gr * g->mg * g->kdim, g->kdim, g->mg, g->kdim,
                          (char *)dst + gr * ox_igemm16_a_bytes(g->mg, g->kdim));
    free(w16);
}

static void conv_int(struct ox_kernel_ctx *ctx, struct conv_job *j, conv_emit emit, void *arg) {
    const struct cgeom *g = &j->g;
    char *p = ctx->scratch;
    bool pw = conv_pointwise(g);
    int16_t *x16 = take(&p, g->C * g->in_size, 2),
            *col = take(&p, pw ? 0 : g->kdim * g->out_size, 2);
    int16_t *w16 = take(&p, g->M * g->kdim, 2);
    int32_t *rowsum = take(&p, g->M, 4);
    bool is8 = conv_is8(j);
    const char *wp = NULL;
    if (ox_igemm16_fast()) {
        struct ox_prep_key key = {
            j->w->data, {g->M, g->kdim, g->group, j->wz ? (int64_t)(intptr_t)j->wz->data : 0}};
        wp = ox_kernel_prepared(ctx, conv_pack_w, j, &key);
    }
    if (is8)
        j->rowsum =
            wp ? (const int32_t *)(wp + conv_packed8_bytes(g)) : (conv_rowsums(j, rowsum), rowsum);
    else if (!wp)
        conv_widen_w(j, w16);
    j->xzp = zp_of(j->xz, 0);
    j->x16 = x16, j->col = col, j->emit = emit, j->arg = arg;
    for (int64_t img = 0; img < g->N; img++) {
        if (is8)
            j->x8 = (const uint8_t *)j->x->data + img * g->C * g->in_size;
        else
            widen(j->x, img * g->C * g->in_size, g->C * g->in_size, j->xzp, x16);
        for (int64_t gr = 0; gr < g->group; gr++) {
            const int16_t *xg = x16 + gr * g->cg * g->in_size, *b = pw ? xg : col;
            const int16_t *wg = w16 + gr * g->mg * g->kdim;
            j->img = img, j->gr = gr;
            if (!pw) ox_parallel_for(ctx->pool, g->cg, im2col_piece, j);
            if (ox_igemm16_fast()) { /* is8 implies it */
                struct ox_igemm16_op op = {.M = g->mg,
                                           .N = g->out_size,
                                           .K = g->kdim,
                                           .lda = g->kdim,
                                           .ldb = g->out_size,
                                           .emit = conv_block_emit,
                                           .arg = j};
                if (is8) {
                    op.mode8 = OX_IG8_A_S8_B_U8;
                    op.a8 = (const int8_t *)j->w->data + gr * g->mg * g->kdim;
                    op.a_packed = wp ? wp + gr * ox_igemm8_a_bytes(g->mg, g->kdim) : NULL;
                    op.b8 =
                        pw ? (const void *)(j->x8 + gr * g->cg * g->in_size) : (const void *)col;
                } else {
                    op.a = wg, op.b = b;
                    op.a_packed = wp ? wp + gr * ox_igemm16_a_bytes(g->mg, g->kdim) : NULL;
                }
                ox_igemm16(ctx->pool, &op, p);
                continue;
            }
            int32_t *acc = (int32_t *)p;
            igemm(g->mg, g->out_size, g->kdim, wg, b, acc);
            for (int64_t m = 0; m < g->mg; m++)
                emit(arg, img, gr * g->mg + m, 0, g->out_size, acc + m * g->out_size);
        }
    }
}

/* ---- ConvInteger ------------------------------------------------------------------------- */

ox_status ox_q_infer_conv_integer(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                  const ox_tensor *const *in, ox_tensor *const *out) {
    const ox_tensor *x = ox_in(n, in, 0), *w = ox_in(n, in, 1);
    const ox_tensor *xz = ox_in(n, in, 2), *wz = ox_in(n, in, 3);
    if (!x || !w) return ox_node_err(n, OX_E_INVALID, "expected inputs x and w");
    if (!is_q8(x->dtype) || !is_q8(w->dtype))
        return ox_node_err(n, OX_E_UNSUPPORTED, "types %s and %s: supported are int8 and uint8",
                           ox_dtype_name(x->dtype), ox_dtype_name(w->dtype));
    if ((xz && xz->dtype != x->dtype) || (wz && wz->dtype != w->dtype))
        return ox_node_err(n, OX_E_INVALID, "zero point types must match their inputs");
    struct cgeom g;
    ox_status st = conv_geom(n, x, w, &g);
    if (st || (st = check_scalar(n, xz, "x_zero_point")) ||
        (st = check_per_m(n, wz, g.M, "w_zero_point")))
        return st;
    int64_t dims[OX_MAX_RANK] = {g.N, g.M};
    for (int i = 0; i < g.nsp; i++) dims[i + 2] = g.out[i];
    ox_set_shape(out[0], OX_INT32, x->rank, dims);
    if (may_pack(ctx, n, in, 1, 3)) ctx->prepared_bytes = conv_packed_bytes(&g);
    return conv_scratch(n, &g, ctx->n_threads, &ctx->scratch_bytes);
}

struct ci_out {
    const struct cgeom *g;
    int32_t *y;
};

static void ci_emit(void *arg, int64_t img, int64_t m, int64_t q0, int64_t nq, const int32_t *acc) {
    struct ci_out *o = arg;
    memcpy(o->y + (img * o->g->M + m) * o->g->out_size + q0, acc, sizeof(int32_t) * (size_t)nq);
}

ox_status ox_q_cpu_conv_integer(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                                const ox_tensor *const *in, ox_tensor *const *out) {
    struct conv_job j = {.x = in[0], .w = in[1], .xz = ox_in(n, in, 2), .wz = ox_in(n, in, 3)};
    ox_status st = conv_geom(n, j.x, j.w, &j.g);
    if (st) return st;
    struct ci_out o = {&j.g, out[0]->data};
    conv_int(ctx, &j, ci_emit, &o);
    return OX_OK;
}

/* ---- QLinearConv ------------------------------------------------------------------------- */

/* The geometry of kernels/cpu/qconv8.c's form (2-D, group 1, uint8 input, int8 weights),
 * when it runs here; it also needs the weights' zero points all 0 (wz_zero). */
static void qconv8_geom(const struct cgeom *g, struct ox_qconv8_geom *q) {
    *q = (struct ox_qconv8_geom){g->N,    g->C,     g->in[0], g->in[1],  g->M,
                                 g->k[0], g->k[1],  g->s[0],  g->s[1],   g->d[0],
                                 g->d[1], g->pb[0], g->pb[1], g->out[0], g->out[1]};
}

static bool qconv8_shape(const struct cgeom *g, const ox_tensor *x, const ox_tensor *w,
                         struct ox_qconv8_geom *q) {
    if (g->nsp != 2 || g->group != 1 || x->dtype != OX_UINT8 || w->dtype != OX_INT8) return false;
    qconv8_geom(g, q);
    return ox_qconv8_fast(q);
}

/* Whether kernels/cpu/qdw8.c runs the convolution: 2-D depthwise (one input channel per
 * output channel, as many outputs as inputs), any 8-bit types and zero points. */
static bool qdw8_shape(const struct cgeom *g, struct ox_qconv8_geom *q) {
    if (g->nsp != 2 || g->group != g->C || g->M != g->C) return false;
    qconv8_geom(g, q);
    return ox_qdw8_fast(q);
}

/* QLinearConv's scratch: the general form's or qconv8.c's (q, when its shape fits), then
 * M multipliers in double. */
static ox_status qconv_scratch(const struct ox_node *n, const struct cgeom *g,
                               const struct ox_qconv8_geom *q, const struct ox_qconv8_geom *dw,
                               int n_threads, size_t *total) {
    ox_status st = conv_scratch(n, g, n_threads, total);
    if (st) return st;
    if (q && ox_qconv8_scratch_bytes(q) > *total) *total = ox_qconv8_scratch_bytes(q);
    if (dw && ox_qdw8_scratch_bytes(dw, n_threads) > *total)
        *total = ox_qdw8_scratch_bytes(dw, n_threads);
    if (!add_piece(total, g->M, 1, 8)) return ox_node_err(n, OX_E_NOMEM, "scratch size overflows");
    return OX_OK;
}

struct qc8_pack {
    const struct ox_qconv8_geom *q;
    const int8_t *w;
};

static void qc8_fill(void *dst, void *arg) {
    const struct qc8_pack *pk = arg;
    ox_qconv8_pack(pk->q, pk->w, dst);
}

ox_status ox_q_infer_qlinear_conv(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                  const ox_tensor *const *in, ox_tensor *const *out) {
    const ox_tensor *x = ox_in(n, in, 0), *xs = ox_in(n, in, 1), *xz = ox_in(n, in, 2);
    const ox_tensor *w = ox_in(n, in, 3), *ws = ox_in(n, in, 4), *wz = ox_in(n, in, 5);
    const ox_tensor *ys = ox_in(n, in, 6), *yz = ox_in(n, in, 7), *b = ox_in(n, in, 8);
    if (!x || !xs || !w || !ws || !ys)
        return ox_node_err(n, OX_E_INVALID, "expected inputs x, x_scale, w, w_scale and y_scale");
    ox_status st = check_mm_types(n, x, xz, w, wz, yz);
    if (st) return st;
    if (xs->dtype != OX_FLOAT || ws->dtype != OX_FLOAT || ys->dtype != OX_FLOAT)
        return ox_node_err(n, OX_E_UNSUPPORTED, "scales must be float");
    struct cgeom g;
    if ((st = conv_geom(n, x, w, &g)) || (st = check_scalar(n, xs, "x_scale")) ||
        (st = check_scalar(n, xz, "x_zero_point")) || (st = check_per_m(n, ws, g.M, "w_scale")) ||
        (st = check_per_m(n, wz, g.M, "w_zero_point")) || (st = check_scalar(n, ys, "y_scale")) ||
        (st = check_scalar(n, yz, "y_zero_point")))
        return st;
    if (b && (b->dtype != OX_INT32 || b->rank != 1 || b->dims[0] != g.M))
        return ox_node_err(n, OX_E_SHAPE, "bias B must be int32[%lld]", (long long)g.M);
    if ((st = check_y_range(n, yz ? yz->dtype : x->dtype))) return st;
    int64_t dims[OX_MAX_RANK] = {g.N, g.M};
    for (int i = 0; i < g.nsp; i++) dims[i + 2] = g.out[i];
    ox_set_shape(out[0], yz ? yz->dtype : x->dtype, x->rank, dims);
    size_t total;
    struct ox_qconv8_geom q, dw;
    bool direct = qconv8_shape(&g, x, w, &q), depthwise = qdw8_shape(&g, &dw);
    if ((st = qconv_scratch(n, &g, direct ? &q : NULL, depthwise ? &dw : NULL, ctx->n_threads,
                            &total)))
        return st;
    ctx->scratch_bytes = total;
    if (may_pack(ctx, n, in, 3, 5) && !depthwise)
        ctx->prepared_bytes =
            direct && wz_zero(wz) ? ox_qconv8_packed_bytes(&q) : conv_packed_bytes(&g);
    return OX_OK;
}

struct qc_out {
    const struct cgeom *g;
    ox_tensor *y;
    const int32_t *bias;
    const double *mult;
    double yzp;
    int64_t lo, hi;
};

/* saturate(rint((acc + bias) * mult + zp)) into n 8-bit outputs, in double as the scalar
 * loop below (and requant_store) compute it. */
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx512f"))) static void requant_row_avx512(const int32_t *acc, int64_t n,
                                                                  int32_t bias, double mult,
                                                                  double zp, double lo, double hi,
                                                                  void *dst) {
    __m512d vm = _mm512_set1_pd(mult), vz = _mm512_set1_pd(zp);
    __m512d vlo = _mm512_set1_pd(lo), vhi = _mm512_set1_pd(hi);
    __m512i vb = _mm512_set1_epi32(bias);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = tail_mask16(n - i);
        __m512i a = _mm512_add_epi32(_mm512_maskz_loadu_epi32(m, acc + i), vb);
        __m512i r = requant16(a, vm, vm, vz, vlo, vhi);
        store_bytes16((char *)dst + i, n - i, r);
    }
}
#endif

static void qc_emit(void *arg, int64_t img, int64_t m, int64_t q0, int64_t nq, const int32_t *acc) {
    struct qc_out *o = arg;
    int64_t yo = (img * o->g->M + m) * o->g->out_size + q0;
    int32_t bv = o->bias ? o->bias[m] : 0;
    double mult = o->mult[m], lo = (double)o->lo, hi = (double)o->hi;
    bool is_u8 = o->y->dtype == OX_UINT8;
#if defined(__x86_64__) && defined(__GNUC__)
    if (ox_igemm16_fast()) {
        requant_row_avx512(acc, nq, bv, mult, o->yzp, lo, hi, (char *)o->y->data + yo);
        return;
    }
#endif
    for (int64_t q = 0; q < nq; q++) { /* requant_store's arithmetic, the type known */
        double r = rint((double)(acc[q] + bv) * mult + o->yzp);
        r = !(r >= lo) ? lo : r > hi ? hi : r;
        if (is_u8)
            ((uint8_t *)o->y->data)[yo + q] = (uint8_t)r;
        else
            ((int8_t *)o->y->data)[yo + q] = (int8_t)r;
    }
}

ox_status ox_q_cpu_qlinear_conv(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                                const ox_tensor *const *in, ox_tensor *const *out) {
    const ox_tensor *xs = in[1], *ws = in[4], *ys = in[6], *yz = ox_in(n, in, 7);
    const ox_tensor *b = ox_in(n, in, 8);
    struct conv_job j = {.x = in[0], .w = in[3], .xz = ox_in(n, in, 2), .wz = ox_in(n, in, 5)};
    ox_status st = conv_geom(n, j.x, j.w, &j.g);
    if (st) return st;
    size_t base;
    struct ox_qconv8_geom q, dw;
    bool direct = qconv8_shape(&j.g, j.x, j.w, &q), depthwise = qdw8_shape(&j.g, &dw);
    if ((st = qconv_scratch(n, &j.g, direct ? &q : NULL, depthwise ? &dw : NULL,
                            ox_pool_size(ctx->pool), &base)))
        return st;
    base -= ox_align64((size_t)j.g.M * 8);
    double *mult = ox_scratch_at(ctx->scratch, base);
    bool wcol = ox_tensor_numel(ws) != 1;
    float xsv = ((const float *)xs->data)[0], ysv = ((const float *)ys->data)[0];
    for (int64_t m = 0; m < j.g.M; m++)
        mult[m] = (float)(xsv * ((const float *)ws->data)[wcol ? m : 0]) / ysv;
    struct qc_out o = {&j.g, out[0], b ? b->data : NULL, mult, zp_of(yz, 0), 0, 0};
    qint_range(out[0]->dtype, &o.lo, &o.hi);
    const int64_t *yr;
    if (!strcmp(n->domain, OX_DOMAIN_ONNXEXEC) && ox_attr_ints(n, "y_range", &yr) == 2) {
        o.lo = yr[0] > o.lo ? yr[0] : o.lo;
        o.hi = yr[1] < o.hi ? yr[1] : o.hi;
    }
    if (depthwise) {
        struct ox_qdw8_in di = {j.x->data,
                                j.w->data,
                                j.wz ? j.wz->data : NULL,
                                j.x->dtype == OX_INT8,
                                j.w->dtype == OX_INT8,
                                j.wz && ox_tensor_numel(j.wz) != 1,
                                zp_of(j.xz, 0)};
        struct ox_qconv8_out qo = {o.bias, mult, o.yzp, (double)o.lo, (double)o.hi};
        ox_qdw8_run(ctx->pool, &dw, &di, &qo, out[0]->data, ctx->scratch);
        return OX_OK;
    }
    if (direct && wz_zero(j.wz)) {
        struct qc8_pack pk = {&q, j.w->data};
        struct ox_prep_key key = {j.w->data, {q.M, q.C, q.KH, q.KW}};
        const void *wp = ox_kernel_prepared(ctx, qc8_fill, &pk, &key);
        if (wp) {
            struct ox_qconv8_out qo = {o.bias, mult, o.yzp, (double)o.lo, (double)o.hi};
            ox_qconv8_run(ctx->pool, &q, j.x->data, (uint8_t)zp_of(j.xz, 0), wp, &qo, out[0]->data,
                          ctx->scratch);
            return OX_OK;
        }
    }
    conv_int(ctx, &j, qc_emit, &o);
    return OX_OK;
}

/* ---- com.microsoft QLinear element-wise ops ------------------------------------------------ */

/* Scale (float, one value) and zero point (8-bit like the data, one value, optional). */
static ox_status check_qparams(const struct ox_node *n, const ox_tensor *s, const ox_tensor *z,
                               ox_dtype dt, const char *what) {
    char d[256];
    if (!s) return ox_node_err(n, OX_E_INVALID, "missing %s scale", what);
    if (s->dtype != OX_FLOAT || ox_tensor_numel(s) != 1)
        return ox_node_err(n, OX_E_UNSUPPORTED, "%s scale %s: expected one float", what,
                           ox_tensor_desc(s, d, sizeof d));
    if (z && (z->dtype != dt || ox_tensor_numel(z) != 1))
        return ox_node_err(n, OX_E_UNSUPPORTED, "%s zero point %s: expected one %s", what,
                           ox_tensor_desc(z, d, sizeof d), ox_dtype_name(dt));
    return OX_OK;
}

/* onnxruntime's quantization of a float: round half to even, then the zero point, saturated. */
static inline int32_t q_float(float v, float scale, int32_t zp, int32_t lo, int32_t hi) {
    float r = rintf(v / scale) + (float)zp;
    if (!(r >= (float)lo)) return lo;
    if (r > (float)hi) return hi;
    return (int32_t)r;
}

static int32_t q_lo(ox_dtype dt) {
    return dt == OX_UINT8 ? 0 : -128;
}

static int32_t q_hi(ox_dtype dt) {
    return dt == OX_UINT8 ? 255 : 127;
}

static int32_t q_load(const ox_tensor *t, int64_t i) {
    return t->dtype == OX_UINT8 ? ((const uint8_t *)t->data)[i] : ((const int8_t *)t->data)[i];
}

static void q_put(ox_tensor *t, int64_t i, int32_t v) {
    if (t->dtype == OX_UINT8)
        ((uint8_t *)t->data)[i] = (uint8_t)v;
    else
        ((int8_t *)t->data)[i] = (int8_t)v;
}

static float f_scalar(const ox_tensor *t) {
    return ((const float *)t->data)[0];
}

ox_status ox_q_infer_qlinear_binary(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                    const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    const ox_tensor *a = ox_in(n, in, 0), *b = ox_in(n, in, 3);
    if (!a || !b) return ox_node_err(n, OX_E_INVALID, "expected inputs A and B");
    if (!is_q8(a->dtype) || b->dtype != a->dtype)
        return ox_node_err(n, OX_E_UNSUPPORTED, "types %s and %s: expected both int8 or both uint8",
                           ox_dtype_name(a->dtype), ox_dtype_name(b->dtype));
    ox_status st;
    if ((st = check_qparams(n, ox_in(n, in, 1), ox_in(n, in, 2), a->dtype, "A")) ||
        (st = check_qparams(n, ox_in(n, in, 4), ox_in(n, in, 5), a->dtype, "B")) ||
        (st = check_qparams(n, ox_in(n, in, 6), ox_in(n, in, 7), a->dtype, "C")))
        return st;
    int rank;
    int64_t dims[OX_MAX_RANK];
    if ((st = ox_broadcast(n, a, b, &rank, dims)) || (st = check_y_range(n, a->dtype))) return st;
    ox_set_shape(out[0], a->dtype, rank, dims);
    return OX_OK;
}

/* QLinearAdd of two inputs of the output's shape, one scale and zero point each: pieces of
 * QRUN_CHUNK elements over the pool, 16 at a time where AVX-512 is, in the float arithmetic
 * of the scalar loop below (each input dequantized, the sum quantized: exactly what
 * DequantizeLinear, Add and QuantizeLinear give one after the other). */
struct qadd_job {
    const void *a, *b;
    void *y;
    int64_t n;
    bool s8; /* int8 (else uint8) */
    float as, bs, cs;
    int32_t az, bz, cz, lo, hi;
};

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx512f"))) static inline __m512 qadd_load16(const void *p, bool s8,
                                                                    __m512i z, __m512 s) {
    __m128i v = _mm_loadu_si128((const __m128i *)p);
    __m512i w = s8 ? _mm512_cvtepi8_epi32(v) : _mm512_cvtepu8_epi32(v);
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(w, z)), s);
}

/* Elements [i0, i0 + 16 k) of the job. */
__attribute__((target("avx512f"))) static void qadd_avx512(const struct qadd_job *j, int64_t i0,
                                                           int64_t k) {
    __m512i az = _mm512_set1_epi32(j->az), bz = _mm512_set1_epi32(j->bz);
    __m512 as = _mm512_set1_ps(j->as), bs = _mm512_set1_ps(j->bs), cs = _mm512_set1_ps(j->cs);
    __m512 cz = _mm512_set1_ps((float)j->cz), lo = _mm512_set1_ps((float)j->lo);
    __m512 hi = _mm512_set1_ps((float)j->hi);
    for (int64_t i = i0; i < i0 + 16 * k; i += 16) {
        __m512 v = _mm512_add_ps(qadd_load16((const char *)j->a + i, j->s8, az, as),
                                 qadd_load16((const char *)j->b + i, j->s8, bz, bs));
        store_bytes16((char *)j->y + i, 16, _mm512_cvtps_epi32(quantize16(v, cs, cz, lo, hi)));
    }
}
#endif

static void qadd_piece(void *arg, int64_t b, int64_t e, int tid) {
    (void)tid;
    const struct qadd_job *j = arg;
    int64_t i = b * QRUN_CHUNK, i1 = e * QRUN_CHUNK < j->n ? e * QRUN_CHUNK : j->n;
#if defined(__x86_64__) && defined(__GNUC__)
    if (ox_sgemm_is_fast()) {
        qadd_avx512(j, i, (i1 - i) / 16);
        i += (i1 - i) / 16 * 16;
    }
#endif
    for (; i < i1; i++) {
        int32_t qa = j->s8 ? ((const int8_t *)j->a)[i] : ((const uint8_t *)j->a)[i];
        int32_t qb = j->s8 ? ((const int8_t *)j->b)[i] : ((const uint8_t *)j->b)[i];
        int32_t q = q_float(j->as * (float)(qa - j->az) + j->bs * (float)(qb - j->bz), j->cs, j->cz,
                            j->lo, j->hi);
        if (j->s8)
            ((int8_t *)j->y)[i] = (int8_t)q;
        else
            ((uint8_t *)j->y)[i] = (uint8_t)q;
    }
}

/* QLinearAdd and QLinearMul (com.microsoft), and onnxexec's QLinearAdd (graph/optimize.c:
 * DequantizeLinear, DequantizeLinear, Add [-> Relu or Clip], QuantizeLinear), whose
 * y_range clamps the output's codes too. */
static ox_status qlinear_binary(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                                const ox_tensor *const *in, ox_tensor *y, bool mul) {
    const ox_tensor *a = in[0], *b = in[3];
    float as = f_scalar(in[1]), bs = f_scalar(in[4]), cs = f_scalar(in[6]);
    int32_t az = zp_of(ox_in(n, in, 2), 0), bz = zp_of(ox_in(n, in, 5), 0);
    int32_t cz = zp_of(ox_in(n, in, 7), 0), lo = q_lo(y->dtype), hi = q_hi(y->dtype);
    const int64_t *yr;
    if (!strcmp(n->domain, OX_DOMAIN_ONNXEXEC) && ox_attr_ints(n, "y_range", &yr) == 2) {
        lo = yr[0] > lo ? (int32_t)yr[0] : lo;
        hi = yr[1] < hi ? (int32_t)yr[1] : hi;
    }
    int64_t total = ox_tensor_numel(y);
    if (!mul && ox_tensor_numel(a) == total && ox_tensor_numel(b) == total) {
        struct qadd_job j = {a->data, b->data, y->data, total, y->dtype == OX_INT8, as, bs, cs, az,
                             bz,      cz,      lo,      hi};
        ox_parallel_for(ctx->pool, (total + QRUN_CHUNK - 1) / QRUN_CHUNK, qadd_piece, &j);
        return OX_OK;
    }
    int rank = y->rank;
    int64_t sa[OX_MAX_RANK], sb[OX_MAX_RANK], idx[OX_MAX_RANK] = {0};
    ox_broadcast_strides(a, rank, y->dims, sa);
    ox_broadcast_strides(b, rank, y->dims, sb);
    int64_t inner = rank ? y->dims[rank - 1] : 1;
    int64_t ia = 0, ib = 0, la = rank ? sa[rank - 1] : 0, lb = rank ? sb[rank - 1] : 0;
    for (int64_t o = 0; o < total && inner > 0; o += inner) {
        for (int64_t i = 0; i < inner; i++) {
            float va = as * (float)(q_load(a, ia + i * la) - az);
            float vb = bs * (float)(q_load(b, ib + i * lb) - bz);
            q_put(y, o + i, q_float(mul ? va * vb : va + vb, cs, cz, lo, hi));
        }
        /* next row: odometer over the outer dims */
        for (int d = rank - 2; d >= 0; d--) {
            ia += sa[d], ib += sb[d];
            if (++idx[d] < y->dims[d]) break;
            ia -= sa[d] * y->dims[d], ib -= sb[d] * y->dims[d];
            idx[d] = 0;
        }
    }
    return OX_OK;
}

ox_status ox_q_cpu_qlinear_add(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                               const ox_tensor *const *in, ox_tensor *const *out) {
    return qlinear_binary(ctx, n, in, out[0], false);
}

ox_status ox_q_cpu_qlinear_mul(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                               const ox_tensor *const *in, ox_tensor *const *out) {
    return qlinear_binary(ctx, n, in, out[0], true);
}

/* QLinearSigmoid, QLinearLeakyRelu: X, X_scale, X_zero_point, Y_scale, Y_zero_point. */
ox_status ox_q_infer_qlinear_unary(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                   const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    const ox_tensor *x = ox_in(n, in, 0);
    if (!x) return ox_node_err(n, OX_E_INVALID, "expected input X");
    if (!is_q8(x->dtype))
        return ox_node_err(n, OX_E_UNSUPPORTED, "type %s: expected int8 or uint8",
                           ox_dtype_name(x->dtype));
    ox_status st;
    if ((st = check_qparams(n, ox_in(n, in, 1), ox_in(n, in, 2), x->dtype, "X")) ||
        (st = check_qparams(n, ox_in(n, in, 3), ox_in(n, in, 4), x->dtype, "Y")))
        return st;
    ox_set_like(out[0], x);
    return OX_OK;
}

/* Map every 8-bit value through dequantize, f, quantize, then look each element up. */
static ox_status qlinear_lookup(const struct ox_node *n, const ox_tensor *const *in, ox_tensor *y,
                                float (*f)(float, float), float alpha) {
    const ox_tensor *x = in[0];
    float xs = f_scalar(in[1]), ys = f_scalar(in[3]);
    int32_t xz = zp_of(ox_in(n, in, 2), 0), yz = zp_of(ox_in(n, in, 4), 0);
    int32_t lo = q_lo(x->dtype), hi = q_hi(x->dtype);
    uint8_t table[256];
    for (int32_t v = lo; v <= hi; v++)
        table[v & 0xff] = (uint8_t)q_float(f(xs * (float)(v - xz), alpha), ys, yz, lo, hi);
    const uint8_t *src = x->data;
    uint8_t *dst = y->data;
    int64_t cnt = ox_tensor_numel(x);
    for (int64_t i = 0; i < cnt; i++) dst[i] = table[src[i]];
    return OX_OK;
}

static float f_sigmoid(float v, float alpha) {
    (void)alpha;
    return 1.0f / (1.0f + expf(-v));
}

static float f_leaky(float v, float alpha) {
    return v >= 0 ? v : v * alpha;
}

ox_status ox_q_cpu_qlinear_sigmoid(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                                   const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    return qlinear_lookup(n, in, out[0], f_sigmoid, 0);
}

ox_status ox_q_cpu_qlinear_leaky_relu(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                                      const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    return qlinear_lookup(n, in, out[0], f_leaky, ox_attr_float(n, "alpha", 0.01f));
}

/* ---- QLinearSoftmax (com.microsoft) ---------------------------------------------------- */

/* Softmax of 8-bit values as ONNX Runtime computes it (qlinear_softmax.cc), which is not the
 * float Softmax requantized: a table of 256 float exponentials exp((i - 255 + shift) x_scale),
 * shift = max(0, ln(FLT_MAX / D) - 5) / x_scale so that a row's sum stays finite, rows shifted
 * so that their largest code meets the table's top (int8: codes offset by 127 - max, wrapping
 * as bytes); the row's table values summed in float in order; each output
 * round(t floor(1 / y_scale) / sum) + y_zero_point, in float, only its upper end saturated at
 * 255 (int8 outputs wrap as ORT's do). x_zero_point is not read. The attribute opset (the
 * Softmax version the node stands for, 13 if absent) says what a row is: below 13 the dims
 * from axis (default 1) flattened, else axis (default -1) alone. */
ox_status ox_q_infer_qlinear_softmax(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                     const ox_tensor *const *in, ox_tensor *const *out) {
    ox_status st = ox_q_infer_qlinear_unary(ctx, n, in, out);
    if (st) return st;
    const ox_tensor *x = in[0];
    int64_t opset = ox_attr_int(n, "opset", 13);
    int ax;
    if (x->rank == 0) return ox_node_err(n, OX_E_SHAPE, "a scalar input has no axis to reduce");
    return ox_norm_axis(n, ox_attr_int(n, "axis", opset < 13 ? 1 : -1), x->rank, &ax);
}

struct qsm_job {
    const uint8_t *x;
    uint8_t *y;
    const float *table;
    int64_t D, inner;
    float ysf;
    int32_t yz;
    bool sgn;
};

/* Rows [r0, r1) of QLinearSoftmax, row r = (outer index, inner index), its D elements
 * `inner` apart. */
static void qsm_rows(void *arg, int64_t r0, int64_t r1, int tid) {
    (void)tid;
    const struct qsm_job *j = arg;
    const int64_t D = j->D, inner = j->inner;
    for (int64_t r = r0; r < r1; r++) {
        const int64_t base = r / inner * D * inner + r % inner;
        int32_t mx = j->sgn ? -128 : 0;
        for (int64_t k = 0; k < D; k++) {
            int32_t v = j->sgn ? (int8_t)j->x[base + k * inner] : j->x[base + k * inner];
            mx = v > mx ? v : mx;
        }
        /* the table index of element k: its code moved so that the row's max meets 255 */
        const int32_t adj = j->sgn ? 127 - mx : 255 - mx;
        float sum = 0;
        for (int64_t k = 0; k < D; k++) {
            int32_t v = j->sgn ? (int8_t)j->x[base + k * inner] : j->x[base + k * inner];
            sum += j->table[(uint8_t)(v + adj)];
        }
        for (int64_t k = 0; k < D; k++) {
            int32_t v = j->sgn ? (int8_t)j->x[base + k * inner] : j->x[base + k * inner];
            int32_t q =
                sum == 0 ? 0 : (int32_t)nearbyintf(j->table[(uint8_t)(v + adj)] * j->ysf / sum);
            q += j->yz;
            j->y[base + k * inner] = q > 255 ? 255 : (uint8_t)q; /* 255 is -1 as int8 */
        }
    }
}

ox_status ox_q_cpu_qlinear_softmax(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                                   const ox_tensor *const *in, ox_tensor *const *out) {
    const ox_tensor *x = in[0];
    ox_tensor *y = out[0];
    int64_t opset = ox_attr_int(n, "opset", 13);
    int ax;
    ox_status st = ox_norm_axis(n, ox_attr_int(n, "axis", opset < 13 ? 1 : -1), x->rank, &ax);
    if (st) return st;
    /* rows of D elements `inner` apart: [outer, D, inner] */
    int64_t outer = 1, D = 1, inner = 1;
    for (int i = 0; i < x->rank; i++) {
        if (i < ax)
            outer *= x->dims[i];
        else if (i == ax || opset < 13)
            D *= x->dims[i];
        else
            inner *= x->dims[i];
    }
    if (outer * D * inner == 0) return OX_OK;
    bool sgn = x->dtype == OX_INT8;
    float xs = f_scalar(in[1]);
    float ysf = floorf(1.0f / f_scalar(in[3]));
    int32_t yz = zp_of(ox_in(n, in, 4), 0);
    double shift = log((double)FLT_MAX / (double)D) - 5;
    shift = (shift > 0 ? shift : 0) / (double)xs;
    float table[256];
    for (int i = 0; i < 256; i++)
        table[(uint8_t)(sgn ? i - 128 : i)] = (float)exp(((double)i - 255 + shift) * (double)xs);
    struct qsm_job j = {x->data, y->data, table, D, inner, ysf, yz, sgn};
    ox_parallel_for(ctx->pool, outer * inner, qsm_rows, &j);
    return OX_OK;
}

/* ---- QLinearAveragePool (com.microsoft) ------------------------------------------------- */

/* AveragePool of dequantized 8-bit values, requantized, as ONNX Runtime computes it
 * (contrib_ops/cpu/quantization/qlinear_pool.cc): each value x_scale (x - x_zero_point) in
 * float, the window's values summed in float in row-major order, divided by the count (the
 * kernel's size with count_include_pad, else the taps inside the input), then
 * saturate(round(v / y_scale + y_zero_point)), rounding half to even. Inputs X, x_scale,
 * x_zero_point, y_scale, y_zero_point; AveragePool's attributes (1 to 3 spatial dims, no
 * dilations) and channels_last (X [N, spatial..., C]). The output's shape is the float op's,
 * from its own infer. */
static void qpool_float_view(const ox_tensor *x, bool last, ox_tensor *v) {
    *v = (ox_tensor){.dtype = OX_FLOAT, .rank = x->rank};
    v->dims[0] = x->dims[0];
    v->dims[1] = last ? x->dims[x->rank - 1] : x->dims[1];
    for (int i = 2; i < x->rank; i++) v->dims[i] = x->dims[last ? i - 1 : i];
}

ox_status ox_q_infer_qlinear_avgpool(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                     const ox_tensor *const *in, ox_tensor *const *out) {
    const ox_tensor *x = ox_in(n, in, 0);
    char d[256];
    if (!x) return ox_node_err(n, OX_E_INVALID, "expected input X");
    if (!is_q8(x->dtype) || x->rank < 3 || x->rank > 5)
        return ox_node_err(n, OX_E_UNSUPPORTED, "input %s: expected int8 or uint8 of rank 3 to 5",
                           ox_tensor_desc(x, d, sizeof d));
    ox_status st;
    if ((st = check_qparams(n, ox_in(n, in, 1), ox_in(n, in, 2), x->dtype, "x")) ||
        (st = check_qparams(n, ox_in(n, in, 3), ox_in(n, in, 4), x->dtype, "y")))
        return st;
    const int64_t *dl;
    int nd = ox_attr_ints(n, "dilations", &dl);
    for (int i = 0; i < nd; i++)
        if (dl[i] != 1) return ox_node_err(n, OX_E_UNSUPPORTED, "dilations other than 1");
    bool last = ox_attr_int(n, "channels_last", 0) != 0;
    ox_tensor xv, yv = {0};
    qpool_float_view(x, last, &xv);
    ox_tensor *yo = &yv;
    const ox_tensor *xi = &xv;
    const struct ox_op *pool = ox_op_find("", "AveragePool", 19);
    struct ox_node an = *n;
    an.domain = "", an.op_type = "AveragePool", an.opset = 19, an.n_inputs = 1;
    if ((st = pool->infer(ctx, &an, &xi, &yo))) return st;
    ctx->scratch_bytes = 0; /* this kernel walks the windows itself */
    int64_t dims[OX_MAX_RANK];
    dims[0] = yv.dims[0];
    for (int i = 2; i < x->rank; i++) dims[last ? i - 1 : i] = yv.dims[i];
    dims[last ? x->rank - 1 : 1] = yv.dims[1];
    ox_set_shape(out[0], x->dtype, x->rank, dims);
    return OX_OK;
}

struct qpool_job {
    const ox_tensor *x;
    ox_tensor *y;
    bool last, include_pad;
    int64_t C, in_sp[3], out_sp[3], k[3], s[3], pb[3];
    float xs, ys;
    int32_t xzp, yzp, lo, hi;
};

/* Planes [u0, u1) of (image, channel): every output of each. */
static void qpool_planes(void *arg, int64_t u0, int64_t u1, int tid) {
    (void)tid;
    const struct qpool_job *j = arg;
    const int64_t *in_sp = j->in_sp, *out_sp = j->out_sp, C = j->C;
    int64_t isz = in_sp[0] * in_sp[1] * in_sp[2], osz = out_sp[0] * out_sp[1] * out_sp[2];
    for (int64_t u = u0; u < u1; u++) {
        int64_t b = u / C, c = u % C;
        for (int64_t o = 0; o < osz; o++) {
            int64_t op[3] = {o / (out_sp[1] * out_sp[2]), o / out_sp[2] % out_sp[1], o % out_sp[2]};
            int64_t lo_[3], hi_[3];
            for (int i = 0; i < 3; i++) {
                int64_t st = op[i] * j->s[i] - j->pb[i], en = st + j->k[i];
                lo_[i] = st < 0 ? 0 : st;
                hi_[i] = en < in_sp[i] ? en : in_sp[i];
            }
            float sum = 0;
            for (int64_t h = lo_[0]; h < hi_[0]; h++)
                for (int64_t w = lo_[1]; w < hi_[1]; w++)
                    for (int64_t dd = lo_[2]; dd < hi_[2]; dd++) {
                        int64_t sp = (h * in_sp[1] + w) * in_sp[2] + dd;
                        int64_t xi = j->last ? (b * isz + sp) * C + c : u * isz + sp;
                        sum += j->xs * (float)(q_load(j->x, xi) - j->xzp);
                    }
            int64_t cnt = j->include_pad
                              ? j->k[0] * j->k[1] * j->k[2]
                              : (hi_[0] - lo_[0]) * (hi_[1] - lo_[1]) * (hi_[2] - lo_[2]);
            float v = cnt > 0 ? sum / (float)cnt : 0.0f;
            float r = nearbyintf(v / j->ys + (float)j->yzp);
            int32_t q = !(r >= (float)j->lo) ? j->lo : r > (float)j->hi ? j->hi : (int32_t)r;
            q_put(j->y, j->last ? (b * osz + o) * C + c : u * osz + o, q);
        }
    }
}

ox_status ox_q_cpu_qlinear_avgpool(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                                   const ox_tensor *const *in, ox_tensor *const *out) {
    const ox_tensor *x = in[0], *xz = ox_in(n, in, 2), *yz = ox_in(n, in, 4);
    ox_tensor *y = out[0];
    struct qpool_job j = {.x = x,
                          .y = y,
                          .last = ox_attr_int(n, "channels_last", 0) != 0,
                          .include_pad = ox_attr_int(n, "count_include_pad", 0) != 0,
                          .in_sp = {1, 1, 1},
                          .out_sp = {1, 1, 1},
                          .k = {1, 1, 1},
                          .s = {1, 1, 1},
                          .xs = *(const float *)in[1]->data,
                          .ys = *(const float *)in[3]->data,
                          .xzp = xz ? q_load(xz, 0) : 0,
                          .yzp = yz ? q_load(yz, 0) : 0,
                          .lo = q_lo(y->dtype),
                          .hi = q_hi(y->dtype)};
    int nsp = x->rank - 2;
    j.C = x->dims[j.last ? x->rank - 1 : 1];
    for (int i = 0; i < nsp; i++) {
        j.in_sp[i] = x->dims[j.last ? i + 1 : i + 2];
        j.out_sp[i] = y->dims[j.last ? i + 1 : i + 2];
    }
    const int64_t *a;
    int na = ox_attr_ints(n, "kernel_shape", &a);
    for (int i = 0; i < nsp && i < na; i++) j.k[i] = a[i];
    na = ox_attr_ints(n, "strides", &a);
    for (int i = 0; i < nsp && i < na; i++) j.s[i] = a[i];
    const char *ap = ox_attr_str(n, "auto_pad", "NOTSET");
    if (!strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER")) {
        for (int i = 0; i < nsp; i++) {
            int64_t total = (j.out_sp[i] - 1) * j.s[i] + j.k[i] - j.in_sp[i];
            if (total < 0) total = 0;
            j.pb[i] = ap[5] == 'U' ? total / 2 : total - total / 2;
        }
    } else if (!strcmp(ap, "NOTSET") && (na = ox_attr_ints(n, "pads", &a)) >= 2 * nsp) {
        for (int i = 0; i < nsp; i++) j.pb[i] = a[i];
    }
    ox_parallel_for(ctx->pool, x->dims[0] * j.C, qpool_planes, &j);
    return OX_OK;
}

/* QLinearGlobalAveragePool: X, x_scale, x_zero_point, y_scale, y_zero_point; channels_last. */
ox_status ox_q_infer_qlinear_gap(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                 const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    const ox_tensor *x = ox_in(n, in, 0);
    char d[256];
    if (!x) return ox_node_err(n, OX_E_INVALID, "expected input X");
    if (!is_q8(x->dtype) || x->rank < 3)
        return ox_node_err(n, OX_E_UNSUPPORTED,
                           "input %s: expected int8 or uint8 of rank 3 or more",
                           ox_tensor_desc(x, d, sizeof d));
    ox_status st;
    if ((st = check_qparams(n, ox_in(n, in, 1), ox_in(n, in, 2), x->dtype, "x")) ||
        (st = check_qparams(n, ox_in(n, in, 3), ox_in(n, in, 4), x->dtype, "y")))
        return st;
    bool last = ox_attr_int(n, "channels_last", 0) != 0;
    int64_t dims[OX_MAX_RANK];
    for (int i = 0; i < x->rank; i++) dims[i] = 1;
    dims[0] = x->dims[0];
    if (last)
        dims[x->rank - 1] = x->dims[x->rank - 1];
    else
        dims[1] = x->dims[1];
    ox_set_shape(out[0], x->dtype, x->rank, dims);
    return OX_OK;
}

ox_status ox_q_cpu_qlinear_gap(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                               const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    const ox_tensor *x = in[0];
    ox_tensor *y = out[0];
    bool last = ox_attr_int(n, "channels_last", 0) != 0;
    int64_t N = x->dims[0], C = last ? x->dims[x->rank - 1] : x->dims[1], size = 1;
    for (int i = 1; i < x->rank; i++)
        if (i != (last ? x->rank - 1 : 1)) size *= x->dims[i];
    int32_t xz = zp_of(ox_in(n, in, 2), 0), yz = zp_of(ox_in(n, in, 4), 0);
    int32_t lo = q_lo(x->dtype), hi = q_hi(x->dtype);
    float scale = f_scalar(in[1]) / (f_scalar(in[3]) * (float)size);
    for (int64_t b = 0; b < N; b++)
        for (int64_t c = 0; c < C; c++) {
            int64_t sum = 0;
            for (int64_t i = 0; i < size; i++)
                sum += q_load(x, last ? (b * size + i) * C + c : (b * C + c) * size + i);
            sum -= (int64_t)xz * size;
            float r = rintf((float)sum * scale) + (float)yz;
            int32_t v = !(r >= (float)lo) ? lo : r > (float)hi ? hi : (int32_t)r;
            q_put(y, b * C + c, v);
        }
    return OX_OK;
}

/* QLinearConcat: Y_scale, Y_zero_point, then (X, X_scale, X_zero_point) per input; axis. */
ox_status ox_q_infer_qlinear_concat(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                    const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    char d0[256], d1[256];
    if (n->n_inputs < 5 || (n->n_inputs - 2) % 3)
        return ox_node_err(n, OX_E_INVALID,
                           "%d inputs: expected Y_scale, Y_zero_point and triples "
                           "(X, X_scale, X_zero_point)",
                           n->n_inputs);
    const ox_tensor *x0 = in[2];
    if (!x0) return ox_node_err(n, OX_E_INVALID, "missing first input");
    if (!is_q8(x0->dtype))
        return ox_node_err(n, OX_E_UNSUPPORTED, "type %s: expected int8 or uint8",
                           ox_dtype_name(x0->dtype));
    ox_status st = check_qparams(n, in[0], in[1], x0->dtype, "Y");
    if (st) return st;
    int ax;
    if ((st = ox_norm_axis(n, ox_attr_int(n, "axis", 0), x0->rank, &ax))) return st;
    int64_t dims[OX_MAX_RANK];
    memcpy(dims, x0->dims, sizeof dims);
    dims[ax] = 0;
    for (int k = 2; k < n->n_inputs; k += 3) {
        const ox_tensor *x = in[k];
        if (!x) return ox_node_err(n, OX_E_INVALID, "missing input %d", k);
        if ((st = check_qparams(n, in[k + 1], in[k + 2], x0->dtype, "X"))) return st;
        bool ok = x->dtype == x0->dtype && x->rank == x0->rank;
        for (int i = 0; ok && i < x->rank; i++) ok = i == ax || x->dims[i] == x0->dims[i];
        if (!ok)
            return ox_node_err(n, OX_E_SHAPE, "input %s does not concatenate with %s on axis %d",
                               ox_tensor_desc(x, d0, sizeof d0), ox_tensor_desc(x0, d1, sizeof d1),
                               ax);
        dims[ax] += x->dims[ax];
    }
    ox_set_shape(out[0], x0->dtype, x0->rank, dims);
    return OX_OK;
}

ox_status ox_q_cpu_qlinear_concat(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                                  const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    ox_tensor *y = out[0];
    int ax;
    ox_status st = ox_norm_axis(n, ox_attr_int(n, "axis", 0), y->rank, &ax);
    if (st) return st;
    float ys = f_scalar(in[0]);
    int32_t yz = zp_of(in[1], 0), lo = q_lo(y->dtype), hi = q_hi(y->dtype);
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < ax; i++) outer *= y->dims[i];
    for (int i = ax + 1; i < y->rank; i++) inner *= y->dims[i];
    int64_t row = y->dims[ax] * inner, at = 0;
    uint8_t *dst = y->data;
    for (int k = 2; k < n->n_inputs; k += 3) {
        const ox_tensor *x = in[k];
        float xs = f_scalar(in[k + 1]);
        int32_t xz = zp_of(in[k + 2], 0);
        uint8_t table[256];
        bool same = xs == ys && xz == yz;
        for (int32_t v = lo; v <= hi; v++)
            table[v & 0xff] = (uint8_t)q_float(xs * (float)(v - xz), ys, yz, lo, hi);
        int64_t len = x->dims[ax] * inner;
        const uint8_t *src = x->data;
        for (int64_t o = 0; o < outer; o++) {
            uint8_t *d = dst + o * row + at;
            const uint8_t *s = src + o * len;
            if (same)
                memcpy(d, s, (size_t)len);
            else
                for (int64_t i = 0; i < len; i++) d[i] = table[s[i]];
        }
        at += len;
    }
    return OX_OK;
}
