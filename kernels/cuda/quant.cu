/* CUDA QuantizeLinear, DequantizeLinear and ai.onnxexec QuantizeDequantize (the rows in
 * kernels/cuda/quant.def): the float graph of a QDQ model on the device, so that its round
 * trips between float operators do not leave the GPU.
 *
 * The arithmetic is the CPU kernels' (kernels/cpu/quant.c), element for element:
 * - quantize: q = rint(x / s) + z, half to even, then the output type's range (NaN to the
 *   low bound, as the CPU's comparisons give); the quotient is float32's correctly rounded
 *   one, rounded again to float16 (bfloat16) where x and the scale are both of that type
 *   (the CPU computes in the type the two promote to);
 * - dequantize: y = float(x - z) * s, rounded to float32, then to the output type;
 * - QuantizeDequantize: both, without the codes in memory.
 * Scales and zero points must be constants of the plan (read once, in prepare): one for the
 * tensor, or one per index of `axis`. Block quantization (block_size), 4-bit and float8
 * codes, double scales and opset 23's precision attribute are left to the CPU kernel, as is
 * everything with OX_CUDA_QUANT=0.
 */
#include "kernels/cuda/cuda.h"
#include "kernels/cuda/elem.cuh"

#include <math.h>
#include <string.h>

#define OX_CUDA_OP(domain, type, prepare, run, release) OX_CUDA_OP_PROTOTYPES(prepare, run, release)
#include "kernels/cuda/quant.def"
#undef OX_CUDA_OP

enum q_kind { Q_QUANTIZE, Q_DEQUANTIZE, Q_BOTH };

struct q_state {
    enum q_kind kind;
    ox_dtype code;     /* the integer type of the codes */
    ox_dtype prec;     /* the quotient's precision: x's and the scale's type where they agree,
                          else float */
    int64_t ch, inner; /* per axis: element i takes parameter (i / inner) % ch; ch 1: one */
    float s, z;        /* one for the tensor */
    float *dev;        /* per axis: ch scales, then ch zero points (device memory) */
    float lo, hi;      /* the codes' range */
};

/* ---- element types --------------------------------------------------------------------- */

/* x / s in precision S (float, __half or __nv_bfloat16): float32's correctly rounded
 * division, then rounded to S, as the CPU rounds its quotient through float. */
template <typename S> __device__ __forceinline__ float q_div(float x, float s) {
    return ox_cu_to_f(ox_cu_from_f<S>(__fdiv_rn(x, s)));
}

/* the code for x: rint(x / s) + z within [lo, hi] (fmaxf gives lo for a NaN) */
template <typename S>
__device__ __forceinline__ float q_code(float x, float s, float z, float lo, float hi) {
    return fminf(fmaxf(rintf(q_div<S>(x, s)) + z, lo), hi);
}

struct q_args {
    int64_t n, ch, inner;
    float s, z, lo, hi;
    const float *dev; /* per axis, else NULL */
};

__device__ __forceinline__ void q_params(const q_args &a, int64_t i, float *s, float *z) {
    if (!a.dev) {
        *s = a.s;
        *z = a.z;
        return;
    }
    int64_t c = (i / a.inner) % a.ch;
    *s = a.dev[c];
    *z = a.dev[a.ch + c];
}

template <typename X, typename C, typename S>
__global__ void q_quantize(const X *x, C *y, q_args a) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < a.n;
         i += (int64_t)gridDim.x * blockDim.x) {
        float s, z;
        q_params(a, i, &s, &z);
        y[i] = (C)(int32_t)q_code<S>(ox_cu_to_f(x[i]), s, z, a.lo, a.hi);
    }
}

template <typename C, typename Y> __global__ void q_dequantize(const C *x, Y *y, q_args a) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < a.n;
         i += (int64_t)gridDim.x * blockDim.x) {
        float s, z;
        q_params(a, i, &s, &z);
        /* x - z exactly (int32 codes: in 64 bits), rounded to float32 once */
        y[i] = ox_cu_from_f<Y>((float)((int64_t)x[i] - (int64_t)z) * s);
    }
}

template <typename X, typename S> __global__ void q_both(const X *x, X *y, q_args a) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < a.n;
         i += (int64_t)gridDim.x * blockDim.x) {
        float s, z;
        q_params(a, i, &s, &z);
        /* the code minus z is a whole number below 2^17: exact in float */
        y[i] = ox_cu_from_f<X>((q_code<S>(ox_cu_to_f(x[i]), s, z, a.lo, a.hi) - z) * s);
    }
}

/* ---- prepare --------------------------------------------------------------------------- */

static bool q_code_range(ox_dtype dt, float *lo, float *hi) {
    switch (dt) {
    case OX_UINT8: *lo = 0, *hi = 255; return true;
    case OX_INT8: *lo = -128, *hi = 127; return true;
    case OX_UINT16: *lo = 0, *hi = 65535; return true;
    case OX_INT16: *lo = -32768, *hi = 32767; return true;
    default: return false;
    }
}

/* The values of constant parameter t (numel of them) as floats, read from the device. */
static ox_status q_read(const ox_tensor *t, int64_t numel, float *dst) {
    size_t es = ox_dtype_size(t->dtype), bytes = (size_t)numel * es;
    void *h = malloc(bytes ? bytes : 1);
    if (!h) return ox_err(OX_E_NOMEM, "out of memory");
    ox_status st = ox_cu_check(cudaMemcpy(h, t->data, bytes, cudaMemcpyDeviceToHost),
                               "quantization parameters");
    for (int64_t i = 0; !st && i < numel; i++) switch (t->dtype) {
        case OX_FLOAT: dst[i] = ((const float *)h)[i]; break;
        case OX_FLOAT16: dst[i] = __half2float(((const __half *)h)[i]); break;
        case OX_BFLOAT16: dst[i] = __bfloat162float(((const __nv_bfloat16 *)h)[i]); break;
        case OX_UINT8: dst[i] = ((const uint8_t *)h)[i]; break;
        case OX_INT8: dst[i] = ((const int8_t *)h)[i]; break;
        case OX_UINT16: dst[i] = ((const uint16_t *)h)[i]; break;
        case OX_INT16: dst[i] = ((const int16_t *)h)[i]; break;
        case OX_INT32: dst[i] = (float)((const int32_t *)h)[i]; break;
        default: st = OX_E_UNSUPPORTED;
        }
    free(h);
    return st;
}

ox_status ox_cu_q_prepare(struct ox_cuda_ctx *c, const struct ox_node *n,
                          const ox_tensor *const *in, ox_tensor *const *out, unsigned const_inputs,
                          void **state, size_t *workspace) {
    (void)c, (void)workspace;
    const char *off = getenv("OX_CUDA_QUANT"); /* 0: the CPU kernels, with copies */
    if (off && strcmp(off, "0") == 0) return OX_E_UNSUPPORTED;
    enum q_kind kind = strcmp(n->op_type, "QuantizeLinear") == 0     ? Q_QUANTIZE
                       : strcmp(n->op_type, "DequantizeLinear") == 0 ? Q_DEQUANTIZE
                                                                     : Q_BOTH;
    const ox_tensor *x = ox_in(n, in, 0), *s = ox_in(n, in, 1), *z = ox_in(n, in, 2);
    ox_tensor *y = n->n_outputs > 0 ? out[0] : NULL;
    if (!x || !s || !y || x->kind != OX_IO_TENSOR || s->kind != OX_IO_TENSOR ||
        y->kind != OX_IO_TENSOR || (z && z->kind != OX_IO_TENSOR) || !(const_inputs & 2u) ||
        (z && !(const_inputs & 4u)) || !ox_cu_is_float(s->dtype) ||
        ox_tensor_numel(y) != ox_tensor_numel(x))
        return OX_E_UNSUPPORTED;
    if ((n->opset >= 21 && ox_attr_int(n, "block_size", 0) != 0) ||
        (n->opset >= 23 && ox_attr_int(n, "precision", 0) != 0))
        return OX_E_UNSUPPORTED;
    /* the codes' type: the quantized output, the dequantized input */
    ox_dtype code = kind == Q_QUANTIZE ? y->dtype : kind == Q_DEQUANTIZE ? x->dtype : OX_UINT8;
    if (kind == Q_BOTH) {
        int64_t od = n->opset >= 21 ? ox_attr_int(n, "output_dtype", 0) : 0;
        code = z ? z->dtype : od ? (ox_dtype)od : OX_UINT8;
    }
    float lo = 0, hi = 0;
    bool int32_in = kind == Q_DEQUANTIZE && code == OX_INT32;
    if ((!q_code_range(code, &lo, &hi) && !int32_in) || (z && z->dtype != code))
        return OX_E_UNSUPPORTED;
    ox_dtype fx = kind == Q_DEQUANTIZE ? y->dtype : x->dtype;
    if (!ox_cu_is_float(fx) || (kind == Q_BOTH && y->dtype != x->dtype)) return OX_E_UNSUPPORTED;
    /* one parameter, or one per index of axis (as the CPU's qmap_make) */
    int64_t sn = ox_tensor_numel(s), ch = 1, inner = 1;
    if (sn < 1 || (z && ox_tensor_numel(z) != sn)) return OX_E_UNSUPPORTED;
    if (sn != 1) {
        int64_t ax = ox_attr_int(n, "axis", 1);
        if (ax < 0) ax += x->rank;
        if (ax < 0 || ax >= x->rank || s->rank != 1 || s->dims[0] != x->dims[ax])
            return OX_E_UNSUPPORTED;
        ch = x->dims[ax];
        for (int i = (int)ax + 1; i < x->rank; i++) inner *= x->dims[i];
    }
    struct q_state *q = (struct q_state *)calloc(1, sizeof *q);
    float *host = (float *)calloc((size_t)(2 * sn), sizeof(float));
    ox_status st = q && host ? OX_OK : ox_err(OX_E_NOMEM, "out of memory");
    if (!st) st = q_read(s, sn, host);
    if (!st && z) st = q_read(z, sn, host + sn);
    for (int64_t i = 0; !st && int32_in && i < sn; i++) /* whole in float: below 2^24 */
        if (fabsf(host[sn + i]) > 16777216.0f) st = OX_E_UNSUPPORTED;
    if (!st && sn != 1) {
        st = ox_cu_check(cudaMalloc((void **)&q->dev, (size_t)(2 * sn) * sizeof(float)),
                         "quantization parameters");
        if (!st)
            st = ox_cu_check(
                cudaMemcpy(q->dev, host, (size_t)(2 * sn) * sizeof(float), cudaMemcpyHostToDevice),
                "quantization parameters");
    }
    if (st) {
        free(host);
        ox_cu_q_release(q);
        return st;
    }
    q->kind = kind;
    q->code = code;
    q->prec = fx == s->dtype ? s->dtype : OX_FLOAT;
    q->ch = ch;
    q->inner = inner;
    q->s = host[0];
    q->z = host[sn];
    q->lo = lo;
    q->hi = hi;
    free(host);
    *state = q;
    return OX_OK;
}

void ox_cu_q_release(void *state) {
    struct q_state *q = (struct q_state *)state;
    if (!q) return;
    if (q->dev) cudaFree(q->dev);
    free(q);
}

/* ---- run ------------------------------------------------------------------------------- */

template <typename X, typename S>
static void launch_quantize(cudaStream_t st, const struct q_state *q, const void *x, void *y,
                            const q_args &a) {
    unsigned b = ox_cu_blocks(a.n);
    switch (q->code) {
    case OX_UINT8:
        q_quantize<X, uint8_t, S><<<b, 256, 0, st>>>((const X *)x, (uint8_t *)y, a);
        break;
    case OX_INT8: q_quantize<X, int8_t, S><<<b, 256, 0, st>>>((const X *)x, (int8_t *)y, a); break;
    case OX_UINT16:
        q_quantize<X, uint16_t, S><<<b, 256, 0, st>>>((const X *)x, (uint16_t *)y, a);
        break;
    default: q_quantize<X, int16_t, S><<<b, 256, 0, st>>>((const X *)x, (int16_t *)y, a); break;
    }
}

template <typename Y>
static void launch_dequantize(cudaStream_t st, const struct q_state *q, const void *x, void *y,
                              const q_args &a) {
    unsigned b = ox_cu_blocks(a.n);
    switch (q->code) {
    case OX_UINT8:
        q_dequantize<uint8_t, Y><<<b, 256, 0, st>>>((const uint8_t *)x, (Y *)y, a);
        break;
    case OX_INT8: q_dequantize<int8_t, Y><<<b, 256, 0, st>>>((const int8_t *)x, (Y *)y, a); break;
    case OX_UINT16:
        q_dequantize<uint16_t, Y><<<b, 256, 0, st>>>((const uint16_t *)x, (Y *)y, a);
        break;
    case OX_INT16:
        q_dequantize<int16_t, Y><<<b, 256, 0, st>>>((const int16_t *)x, (Y *)y, a);
        break;
    default: q_dequantize<int32_t, Y><<<b, 256, 0, st>>>((const int32_t *)x, (Y *)y, a); break;
    }
}

/* the kind's launch for float type X of the values and scale type S */
template <typename X, typename S>
static void launch_float(cudaStream_t st, const struct q_state *q, const void *x, void *y,
                         const q_args &a) {
    if (q->kind == Q_QUANTIZE)
        launch_quantize<X, S>(st, q, x, y, a);
    else if (q->kind == Q_DEQUANTIZE)
        launch_dequantize<X>(st, q, x, y, a);
    else
        q_both<X, S><<<ox_cu_blocks(a.n), 256, 0, st>>>((const X *)x, (X *)y, a);
}

template <typename X>
static void launch_scale(cudaStream_t st, const struct q_state *q, const void *x, void *y,
                         const q_args &a) {
    if (q->prec == OX_FLOAT16)
        launch_float<X, __half>(st, q, x, y, a);
    else if (q->prec == OX_BFLOAT16)
        launch_float<X, __nv_bfloat16>(st, q, x, y, a);
    else
        launch_float<X, float>(st, q, x, y, a);
}

ox_status ox_cu_q_run(struct ox_cuda_ctx *c, const struct ox_node *n, const ox_tensor *const *in,
                      ox_tensor *const *out) {
    const struct q_state *q = (const struct q_state *)c->state;
    const ox_tensor *x = in[0];
    ox_tensor *y = out[0];
    q_args a = {ox_tensor_numel(x), q->ch, q->inner, q->s, q->z, q->lo, q->hi, q->dev};
    if (a.n <= 0) return OX_OK;
    ox_dtype fx = q->kind == Q_DEQUANTIZE ? y->dtype : x->dtype;
    if (fx == OX_FLOAT16)
        launch_scale<__half>(c->stream, q, x->data, y->data, a);
    else if (fx == OX_BFLOAT16)
        launch_scale<__nv_bfloat16>(c->stream, q, x->data, y->data, a);
    else
        launch_scale<float>(c->stream, q, x->data, y->data, a);
    return ox_cu_launched(n->op_type);
}
