/* CUDA kernels of the elementwise family: unary math and activations, numpy-broadcast binary
 * arithmetic, comparisons and logic, the variadic Sum/Mean/Max/Min, Where, Clip, Cast and
 * CastLike, Expand and Identity. kernels/cpu/elementwise.c is the reference for every result.
 *
 * Two kernels serve them all, each a template over a functor that does one element:
 * - ew_map_kernel: y[i] = f(x[i]) over a flat range (unary ops, Cast);
 * - ew_bcast_kernel: out[i] = f(in_0[off_0], ..., in_k[off_k]) where each off_k comes from i
 *   and the input's strides over the output's dims (binary ops, Where, Expand). prepare
 *   computes the strides once and merges adjacent dims wherever every input allows
 *   (ew_make_shape), so same-shape and scalar operands become one flat dim with strides 1 or
 *   0 (no division at all) and a bias along the last axis two dims (one division).
 * The variadic ops run as a chain of binary passes, as the CPU kernel does; Identity and
 * same-type Cast are device-to-device copies.
 * The math is written once per op as a functor over the compute type (float for float,
 * float16 and bfloat16, the integer itself for int32/int64); X-macro lists name each op once
 * and generate its lookup, its type class and its case in the dispatch, so that prepare's
 * decision and run's instantiation cannot disagree.
 *
 * Kernels and helpers are static (internal linkage), so that names shared with another
 * family's file cannot merge at link time.
 *
 * Bool tensors are uint8_t (any non-zero byte is true). Integer arithmetic wraps; integer
 * division and modulo by 0 give 0, as on the CPU. Every thread reads its element of every
 * input before it writes the output, so in-place runs (output = an input of the same shape)
 * are safe.
 */
#include "kernels/cuda/cuda.h"

#include <float.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <type_traits>

#define EW_THREADS 256

/* Loops over inputs and dims are unrolled on the device (constant indices into the shape
 * argument); the host compiler, which also builds ew_offsets, knows no such pragma. */
#ifdef __CUDA_ARCH__
#define EW_UNROLL _Pragma("unroll")
#else
#define EW_UNROLL
#endif

/* ---- element conversions ---------------------------------------------------------------- */

/* The type an element is computed in: float for float16 and bfloat16, the type itself
 * otherwise. */
template <class T> struct ew_ct { using type = T; };
template <> struct ew_ct<__half> { using type = float; };
template <> struct ew_ct<__nv_bfloat16> { using type = float; };
template <class T> using ew_ct_t = typename ew_ct<T>::type;

/* Value conversion with float16 or bfloat16 on either side (rounded to nearest even). */
template <class D, class S> static __device__ __forceinline__ D cvt(S v) {
    if constexpr (std::is_same_v<D, S>)
        return v;
    else if constexpr (std::is_same_v<S, __half>)
        return cvt<D>(__half2float(v));
    else if constexpr (std::is_same_v<S, __nv_bfloat16>)
        return cvt<D>(__bfloat162float(v));
    else if constexpr (std::is_same_v<D, __half>) {
        if constexpr (std::is_same_v<S, double>)
            return __double2half(v);
        else
            return __float2half_rn((float)v);
    } else if constexpr (std::is_same_v<D, __nv_bfloat16>) {
        if constexpr (std::is_same_v<S, double>)
            return __double2bfloat16(v);
        else
            return __float2bfloat16_rn((float)v);
    } else
        return (D)v;
}

/* Float to integer as the CPU's f2i/f2u: NaN gives 0, out of range saturates, negative values
 * to an unsigned type wrap through int64. */
static __host__ __device__ int64_t ew_f2i(double v, int64_t lo, int64_t hi) {
    if (v != v) return 0;
    if (v <= (double)lo) return lo;
    if (v >= (double)hi) return hi;
    return (int64_t)v;
}

static __host__ __device__ uint64_t ew_f2u(double v, uint64_t hi) {
    if (v != v) return 0;
    if (v < 0) return (uint64_t)ew_f2i(v, INT64_MIN, INT64_MAX);
    if (v >= (double)hi) return hi;
    return (uint64_t)v;
}

/* Integer power, wrapping; negative exponents truncate 1/a^-e toward zero (the CPU's ipow). */
static __device__ int64_t ew_ipow(int64_t a, int64_t e) {
    if (e < 0) return a == 1 ? 1 : a == -1 ? ((e & 1) ? -1 : 1) : 0;
    uint64_t r = 1, b = (uint64_t)a;
    for (uint64_t k = (uint64_t)e; k; k >>= 1) {
        if (k & 1) r *= b;
        b *= b;
    }
    return (int64_t)r;
}

/* ---- the kernels ------------------------------------------------------------------------ */

template <class TX, class TY, class F>
static __global__ void ew_map_kernel(const TX *x, TY *y, int64_t n, F f) {
    int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step)
        y[i] = f(x[i]);
}

/* The output's dims after merging (rank >= 1, no dim of 0 when there are elements) and each
 * of N inputs' element strides over them (0 along broadcast dims). */
template <int N> struct ew_shape {
    int rank;
    int64_t dims[OX_MAX_RANK];
    int64_t st[N][OX_MAX_RANK];
};

/* The offsets into each input of output element i (i below the element count), for shapes of
 * rank at most R: innermost dim first, and what is left of i after dim 1 is the index along
 * dim 0. */
template <int R, int N, class I>
static __host__ __device__ __forceinline__ void ew_offsets(const ew_shape<N> &s, I i, I *off) {
    EW_UNROLL
    for (int k = 0; k < N; k++) off[k] = 0;
    EW_UNROLL
    for (int d = R - 1; d > 0; d--) {
        if (d < s.rank) {
            I dim = (I)s.dims[d], q = i / dim, r = i - q * dim;
            EW_UNROLL
            for (int k = 0; k < N; k++) off[k] += r * (I)s.st[k][d];
            i = q;
        }
    }
    EW_UNROLL
    for (int k = 0; k < N; k++) off[k] += i * (I)s.st[k][0];
}

template <int R, int N, class I, class F>
static __device__ __forceinline__ void ew_bcast_loop(const ew_shape<N> &s, I n, const F &f) {
    I step = (I)gridDim.x * blockDim.x;
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        I off[N];
        ew_offsets<R>(s, i, off);
        f(i, off);
    }
}

/* Rank 1 (same shapes, scalars) needs no division, rank 2 (a bias row or column) one. I is
 * uint32_t when the output has fewer than 2^31 elements (cheaper division), else int64_t;
 * every offset is below its input's element count, so it fits I too. */
template <int N, class I, class F> static __global__ void ew_bcast_kernel(ew_shape<N> s, I n, F f) {
    if (s.rank == 1)
        ew_bcast_loop<1>(s, n, f);
    else if (s.rank == 2)
        ew_bcast_loop<2>(s, n, f);
    else
        ew_bcast_loop<OX_MAX_RANK>(s, n, f);
}

/* V elements of T moved as one load or store (16 bytes at most). */
template <class T, int V> struct alignas(sizeof(T) * V) ew_vec { T e[V]; };

/* Elements per vector for types of these sizes: 16 bytes of the widest, at most 8. */
template <class... T> constexpr int ew_width() {
    constexpr size_t w = std::max({sizeof(T)...});
    return w >= 16 ? 1 : (int)(16 / w > 8 ? 8 : 16 / w);
}

/* ew_map_kernel with V elements a thread per load (x and y aligned to their vectors); the
 * last n % V elements one a thread. */
template <int V, class TX, class TY, class F>
static __global__ void ew_map_vec_kernel(const TX *x, TY *y, int64_t n, F f) {
    int64_t step = (int64_t)gridDim.x * blockDim.x,
            t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    int64_t nv = n / V;
    for (int64_t i = t; i < nv; i += step) {
        ew_vec<TX, V> a = ((const ew_vec<TX, V> *)x)[i];
        ew_vec<TY, V> b;
        EW_UNROLL
        for (int k = 0; k < V; k++) b.e[k] = f(a.e[k]);
        ((ew_vec<TY, V> *)y)[i] = b;
    }
    for (int64_t i = nv * V + t; i < n; i += step) y[i] = f(x[i]);
}

template <class TX, class TY, class F>
static void ew_map(cudaStream_t st, const void *x, void *y, int64_t n, F f) {
    if (n <= 0) return;
    constexpr int V = ew_width<TX, TY>();
    if (V > 1 && n >= V && ox_cu_vec_on() && ox_cu_aligned(x, V * sizeof(TX)) &&
        ox_cu_aligned(y, V * sizeof(TY))) {
        ew_map_vec_kernel<V, TX, TY, F>
            <<<ox_cu_blocks(n / V), EW_THREADS, 0, st>>>((const TX *)x, (TY *)y, n, f);
        return;
    }
    ew_map_kernel<TX, TY, F><<<ox_cu_blocks(n), EW_THREADS, 0, st>>>((const TX *)x, (TY *)y, n, f);
}

template <int N, class F>
static void ew_bcast(cudaStream_t st, const ew_shape<N> &s, int64_t n, F f) {
    if (n <= 0) return;
    if (n <= INT32_MAX)
        ew_bcast_kernel<N, uint32_t, F><<<ox_cu_blocks(n), EW_THREADS, 0, st>>>(s, (uint32_t)n, f);
    else
        ew_bcast_kernel<N, int64_t, F><<<ox_cu_blocks(n), EW_THREADS, 0, st>>>(s, n, f);
}

/* ---- broadcast shapes (host) ------------------------------------------------------------ */

static bool ew_is_tensor(const ox_tensor *t) {
    return t && t->kind == OX_IO_TENSOR;
}

/* The strides of N inputs broadcast to out's dims, adjacent dims merged where every input's
 * strides allow (as the CPU's ew_run does) and dims of 1 dropped. false when an input does not
 * broadcast to out (numpy rules, aligned at the last dim). */
template <int N>
static bool ew_make_shape(const ox_tensor *const *t, const ox_tensor *out, ew_shape<N> *s) {
    int r = out->rank;
    int64_t st[N][OX_MAX_RANK];
    if (r < 0 || r > OX_MAX_RANK) return false;
    for (int k = 0; k < N; k++) {
        if (t[k]->rank < 0 || t[k]->rank > r) return false;
        int64_t stride = 1;
        for (int d = r - 1; d >= 0; d--) {
            int dt = d - (r - t[k]->rank);
            int64_t td = dt >= 0 ? t[k]->dims[dt] : 1;
            if (td != out->dims[d] && td != 1) return false;
            st[k][d] = td == out->dims[d] ? stride : 0;
            stride *= td;
        }
    }
    memset(s, 0, sizeof *s);
    int cr = 0;
    for (int d = 0; d < r; d++) {
        if (out->dims[d] == 1) continue;
        bool merge = cr > 0;
        for (int k = 0; k < N && merge; k++)
            if (s->st[k][cr - 1] != st[k][d] * out->dims[d]) merge = false;
        if (merge)
            s->dims[cr - 1] *= out->dims[d];
        else
            s->dims[cr++] = out->dims[d];
        for (int k = 0; k < N; k++) s->st[k][cr - 1] = st[k][d];
    }
    if (cr == 0) { /* one element: every stride 0 */
        s->dims[0] = 1;
        cr = 1;
    }
    s->rank = cr;
    return true;
}

/* Opsets 1-6 broadcast B onto A only with broadcast=1, B's dims aligned at `axis` (default:
 * trailing): B viewed with A's rank (the CPU's legacy_view). false when axis does not fit. */
static bool ew_legacy_view(const struct ox_node *n, const ox_tensor *a, const ox_tensor *b,
                           ox_tensor *bv) {
    *bv = *b;
    if (n->opset >= 7 || !ox_attr_int(n, "broadcast", 0)) return true;
    int64_t axis = ox_attr_int(n, "axis", a->rank - b->rank);
    if (axis < 0) axis += a->rank;
    if (axis < 0 || axis + b->rank > a->rank) return false;
    bv->rank = a->rank;
    for (int d = 0; d < a->rank; d++) bv->dims[d] = 1;
    for (int d = 0; d < b->rank; d++) bv->dims[axis + d] = b->dims[d];
    return true;
}

static bool ew_broadcasts_to(const ox_tensor *t, const ox_tensor *out) {
    if (t->rank > out->rank) return false;
    for (int i = 0; i < t->rank; i++) {
        int64_t td = t->dims[i], od = out->dims[out->rank - t->rank + i];
        if (td != od && td != 1) return false;
    }
    return true;
}

/* PRelu's slope broadcasts to X; below opset 7 a 1-D slope that does not is per channel. */
static bool ew_prelu_view(const struct ox_node *n, const ox_tensor *x, const ox_tensor *s,
                          ox_tensor *sv) {
    *sv = *s;
    if (ew_broadcasts_to(s, x)) return true;
    if (n->opset < 7 && s->rank == 1 && x->rank >= 2 && s->dims[0] == x->dims[1]) {
        sv->rank = x->rank;
        for (int d = 0; d < x->rank; d++) sv->dims[d] = d == 1 ? x->dims[1] : 1;
        return true;
    }
    return false;
}

static bool ew_is_num(ox_dtype dt) {
    return ox_cu_is_float(dt) || dt == OX_INT32 || dt == OX_INT64;
}

void ox_cu_ew_release(void *state) {
    free(state);
}

/* ---- unary ops -------------------------------------------------------------------------- */

struct ew_par {
    float alpha, beta, gamma; /* activation attributes (Shrink: lambd, bias) */
    float lo, hi;             /* Clip bounds for float types */
    int64_t ilo, ihi;         /* ... for integers */
    float k;                  /* Mean: the number of inputs */
    int flags;                /* IsInf: 1 detect positive, 2 detect negative */
};

/* Type classes: UC_NUM float, float16, bfloat16, int32, int64; UC_FLT float, float16,
 * bfloat16; UC_ISX one of those three in, bool out; UC_BOOL bool. */
enum { UC_NUM, UC_FLT, UC_ISX, UC_BOOL };

/* (op_type, id, class); a NULL op_type is a variant that prepare picks by attribute. */
#define EW_UNARY(X)                                                                                \
    X("Relu", relu, UC_NUM)                                                                        \
    X("Neg", neg, UC_NUM)                                                                          \
    X("Abs", abs, UC_NUM)                                                                          \
    X("Sign", sign, UC_NUM)                                                                        \
    X("Clip", clip, UC_NUM)                                                                        \
    X("Floor", floor, UC_FLT)                                                                      \
    X("Ceil", ceil, UC_FLT)                                                                        \
    X("Round", round, UC_FLT)                                                                      \
    X("Reciprocal", reciprocal, UC_FLT)                                                            \
    X("Sqrt", sqrt, UC_FLT)                                                                        \
    X("Exp", exp, UC_FLT)                                                                          \
    X("Log", log, UC_FLT)                                                                          \
    X("Sin", sin, UC_FLT)                                                                          \
    X("Cos", cos, UC_FLT)                                                                          \
    X("Tan", tan, UC_FLT)                                                                          \
    X("Asin", asin, UC_FLT)                                                                        \
    X("Acos", acos, UC_FLT)                                                                        \
    X("Atan", atan, UC_FLT)                                                                        \
    X("Sinh", sinh, UC_FLT)                                                                        \
    X("Cosh", cosh, UC_FLT)                                                                        \
    X("Asinh", asinh, UC_FLT)                                                                      \
    X("Acosh", acosh, UC_FLT)                                                                      \
    X("Atanh", atanh, UC_FLT)                                                                      \
    X("Erf", erf, UC_FLT)                                                                          \
    X("Tanh", tanh, UC_FLT)                                                                        \
    X("Sigmoid", sigmoid, UC_FLT)                                                                  \
    X("Softplus", softplus, UC_FLT)                                                                \
    X("Softsign", softsign, UC_FLT)                                                                \
    X("Mish", mish, UC_FLT)                                                                        \
    X("HardSwish", hardswish, UC_FLT)                                                              \
    X("HardSigmoid", hardsigmoid, UC_FLT)                                                          \
    X("LeakyRelu", leakyrelu, UC_FLT)                                                              \
    X("Elu", elu, UC_FLT)                                                                          \
    X("Selu", selu, UC_FLT)                                                                        \
    X("Celu", celu, UC_FLT)                                                                        \
    X("ThresholdedRelu", thresholdedrelu, UC_FLT)                                                  \
    X("Shrink", shrink, UC_FLT)                                                                    \
    X("Gelu", gelu, UC_FLT)                                                                        \
    X(NULL, gelu_tanh, UC_FLT)                                                                     \
    X(NULL, divk, UC_FLT)                                                                          \
    X("IsNaN", is_nan, UC_ISX)                                                                     \
    X("IsInf", is_inf, UC_ISX)                                                                     \
    X("Not", lnot, UC_BOOL)

enum {
#define X(name, id, cls) U_##id,
    EW_UNARY(X)
#undef X
        U_COUNT
};

static const struct {
    const char *name;
    int cls;
} un_ops[U_COUNT] = {
#define X(name, id, cls) {name, cls},
    EW_UNARY(X)
#undef X
};

/* Functors over the compute type; float-only ones take float. */
#define EW_FLT_OP(id, expr)                                                                        \
    struct op_##id {                                                                               \
        ew_par p;                                                                                  \
        __device__ float operator()(float x) const {                                               \
            return expr;                                                                           \
        }                                                                                          \
    };

static __device__ float ew_hsig(float v) {
    return v < 0.0f ? 0.0f : v > 1.0f ? 1.0f : v;
}

/* log(1 + e^x) without overflow for large |x| */
static __device__ float ew_softplus(float x) {
    return x > 0.0f ? x + log1pf(expf(-x)) : log1pf(expf(x));
}

EW_FLT_OP(floor, floorf(x))
EW_FLT_OP(ceil, ceilf(x))
EW_FLT_OP(round, rintf(x)) /* the default rounding mode: half to even */
EW_FLT_OP(reciprocal, 1.0f / x)
EW_FLT_OP(sqrt, sqrtf(x))
EW_FLT_OP(exp, expf(x))
EW_FLT_OP(log, logf(x))
EW_FLT_OP(sin, sinf(x))
EW_FLT_OP(cos, cosf(x))
EW_FLT_OP(tan, tanf(x))
EW_FLT_OP(asin, asinf(x))
EW_FLT_OP(acos, acosf(x))
EW_FLT_OP(atan, atanf(x))
EW_FLT_OP(sinh, sinhf(x))
EW_FLT_OP(cosh, coshf(x))
EW_FLT_OP(asinh, asinhf(x))
EW_FLT_OP(acosh, acoshf(x))
EW_FLT_OP(atanh, atanhf(x))
EW_FLT_OP(erf, erff(x))
EW_FLT_OP(tanh, tanhf(x))
/* e^-|x| never overflows; -inf gives 0, +inf 1, NaN stays */
EW_FLT_OP(sigmoid, x >= 0.0f ? 1.0f / (1.0f + expf(-x)) : expf(x) / (1.0f + expf(x)))
EW_FLT_OP(softplus, ew_softplus(x))
EW_FLT_OP(softsign, x / (1.0f + fabsf(x)))
EW_FLT_OP(mish, tanhf(ew_softplus(x)) * x)
EW_FLT_OP(hardswish, ew_hsig(x / 6.0f + 0.5f) * x)
/* not contracted into an fma: rounds as the CPU (built with -ffp-contract=off) does */
EW_FLT_OP(hardsigmoid, ew_hsig(__fadd_rn(__fmul_rn(p.alpha, x), p.beta)))
EW_FLT_OP(leakyrelu, x < 0.0f ? p.alpha * x : x)
EW_FLT_OP(elu, x < 0.0f ? p.alpha * expm1f(x) : x)
EW_FLT_OP(selu, x <= 0.0f ? p.gamma * p.alpha * expm1f(x) : p.gamma * x)
EW_FLT_OP(celu, x <= 0.0f ? p.alpha * expm1f(x / p.alpha) : x)
EW_FLT_OP(thresholdedrelu, x > p.alpha ? x : 0.0f)
EW_FLT_OP(shrink, (x < -p.alpha) ? x + p.beta : (x > p.alpha) ? x - p.beta : 0.0f)
EW_FLT_OP(gelu, 0.5f * x * (1.0f + erff(x * 0.70710678118654752440f)))
EW_FLT_OP(gelu_tanh,
          0.5f * x * (1.0f + tanhf(0.79788456080286535588f * (x + 0.044715f * x * x * x))))
EW_FLT_OP(divk, x / p.k)

struct op_is_nan {
    ew_par p;
    __device__ bool operator()(float x) const {
        return x != x;
    }
};

struct op_is_inf {
    ew_par p;
    __device__ bool operator()(float x) const {
        return fabsf(x) > FLT_MAX && (x > 0.0f ? (p.flags & 1) : (p.flags & 2));
    }
};

struct op_lnot {
    ew_par p;
    __device__ uint8_t operator()(uint8_t x) const {
        return x == 0;
    }
};

/* Ops over float and the integers; integer negation wraps (through the unsigned type). */
struct op_relu {
    ew_par p;
    template <class C> __device__ C operator()(C x) const {
        return x < (C)0 ? (C)0 : x;
    }
};

struct op_neg {
    ew_par p;
    template <class C> __device__ C operator()(C x) const {
        if constexpr (std::is_floating_point_v<C>)
            return -x;
        else
            return (C)(0 - (std::make_unsigned_t<C>)x);
    }
};

struct op_abs {
    ew_par p;
    template <class C> __device__ C operator()(C x) const {
        if constexpr (std::is_floating_point_v<C>)
            return fabsf(x);
        else
            return x < 0 ? (C)(0 - (std::make_unsigned_t<C>)x) : x;
    }
};

struct op_sign {
    ew_par p;
    template <class C> __device__ C operator()(C x) const {
        if constexpr (std::is_floating_point_v<C>)
            return x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : x;
        else
            return (C)((x > 0) - (x < 0));
    }
};

/* max(x, lo) then min(., hi): lo > hi gives hi, as the spec asks; NaN stays. */
struct op_clip {
    ew_par p;
    template <class C> __device__ C operator()(C x) const {
        if constexpr (std::is_floating_point_v<C>)
            return x < p.lo ? (p.lo > p.hi ? p.hi : p.lo) : x > p.hi ? p.hi : x;
        else
            return x < p.ilo ? (C)(p.ilo > p.ihi ? p.ihi : p.ilo) : x > p.ihi ? (C)p.ihi : x;
    }
};

template <class TX, class TY, class Op> struct un_fn {
    Op op;
    __device__ TY operator()(TX x) const {
        return cvt<TY>(op(cvt<ew_ct_t<TX>>(x)));
    }
};

template <class T, class TY, class Op>
static void un_go(cudaStream_t st, const ew_par &p, const void *x, void *y, int64_t n) {
    ew_map<T, TY>(st, x, y, n, un_fn<T, TY, Op>{Op{p}});
}

/* The instantiations of one op for its class; a type outside it launches nothing (prepare
 * refused it). */
template <class Op, int CLS>
static void un_run(cudaStream_t st, const ew_par &p, ox_dtype dt, const void *x, void *y,
                   int64_t n) {
    if constexpr (CLS == UC_BOOL) {
        if (dt == OX_BOOL) un_go<uint8_t, uint8_t, Op>(st, p, x, y, n);
    } else if constexpr (CLS == UC_ISX) {
        if (dt == OX_FLOAT) un_go<float, uint8_t, Op>(st, p, x, y, n);
        if (dt == OX_FLOAT16) un_go<__half, uint8_t, Op>(st, p, x, y, n);
        if (dt == OX_BFLOAT16) un_go<__nv_bfloat16, uint8_t, Op>(st, p, x, y, n);
    } else {
        if (dt == OX_FLOAT) un_go<float, float, Op>(st, p, x, y, n);
        if (dt == OX_FLOAT16) un_go<__half, __half, Op>(st, p, x, y, n);
        if (dt == OX_BFLOAT16) un_go<__nv_bfloat16, __nv_bfloat16, Op>(st, p, x, y, n);
        if constexpr (CLS == UC_NUM) {
            if (dt == OX_INT32) un_go<int32_t, int32_t, Op>(st, p, x, y, n);
            if (dt == OX_INT64) un_go<int64_t, int64_t, Op>(st, p, x, y, n);
        }
    }
}

static void un_launch(cudaStream_t st, int id, const ew_par &p, ox_dtype dt, const void *x, void *y,
                      int64_t n) {
    switch (id) {
#define X(name, id, cls)                                                                           \
    case U_##id: un_run<op_##id, cls>(st, p, dt, x, y, n); break;
        EW_UNARY(X)
#undef X
    default: break;
    }
}

static bool un_type_ok(int cls, ox_dtype dt) {
    switch (cls) {
    case UC_NUM: return ew_is_num(dt);
    case UC_FLT:
    case UC_ISX: return ox_cu_is_float(dt);
    case UC_BOOL: return dt == OX_BOOL;
    default: return false;
    }
}

struct un_state {
    int id;
    ew_par p;
};

/* One scalar bound of Clip (opset 11+), read from the device; false when it is not a
 * constant scalar of x's type. */
static ox_status clip_bound(const struct ox_node *n, const ox_tensor *const *in,
                            unsigned const_inputs, int k, ew_par *p, bool *ok) {
    const ox_tensor *b = ox_in(n, in, k);
    *ok = true;
    if (!b) return OX_OK; /* absent: no bound */
    if (!ew_is_tensor(b) || !(const_inputs & (1u << k)) || b->dtype != in[0]->dtype ||
        ox_tensor_numel(b) != 1 || !b->data) {
        *ok = false;
        return OX_OK;
    }
    union {
        float f;
        __half h;
        __nv_bfloat16 bf;
        int32_t i32;
        int64_t i64;
    } v;
    memset(&v, 0, sizeof v);
    ox_status st = ox_cu_check(
        cudaMemcpy(&v, b->data, ox_dtype_size(b->dtype), cudaMemcpyDeviceToHost), "Clip bound");
    if (st) return st;
    float f = 0;
    int64_t i = 0;
    switch (b->dtype) {
    case OX_FLOAT: f = v.f; break;
    case OX_FLOAT16: f = __half2float(v.h); break;
    case OX_BFLOAT16: f = __bfloat162float(v.bf); break;
    case OX_INT32: i = v.i32; break;
    case OX_INT64: i = v.i64; break;
    default: *ok = false; return OX_OK;
    }
    if (k == 1)
        p->lo = f, p->ilo = i;
    else
        p->hi = f, p->ihi = i;
    return OX_OK;
}

/* Clip's bounds: attributes below opset 11, constant optional inputs from 11 on. */
static ox_status clip_par(const struct ox_node *n, const ox_tensor *const *in,
                          unsigned const_inputs, ew_par *p, bool *ok) {
    p->lo = -INFINITY;
    p->hi = INFINITY;
    p->ilo = INT64_MIN;
    p->ihi = INT64_MAX;
    *ok = true;
    if (n->opset < 11) {
        const struct ox_attr *amin = ox_node_attr(n, "min"), *amax = ox_node_attr(n, "max");
        if (amin) p->lo = amin->f, p->ilo = ew_f2i(amin->f, INT64_MIN, INT64_MAX);
        if (amax) p->hi = amax->f, p->ihi = ew_f2i(amax->f, INT64_MIN, INT64_MAX);
        return OX_OK;
    }
    ox_status st = clip_bound(n, in, const_inputs, 1, p, ok);
    if (st || !*ok) return st;
    return clip_bound(n, in, const_inputs, 2, p, ok);
}

ox_status ox_cu_ew_prepare_unary(struct ox_cuda_ctx *c, const struct ox_node *n,
                                 const ox_tensor *const *in, ox_tensor *const *out,
                                 unsigned const_inputs, void **state, size_t *workspace) {
    (void)c, (void)workspace;
    int id = -1;
    for (int k = 0; k < U_COUNT && id < 0; k++)
        if (un_ops[k].name && strcmp(un_ops[k].name, n->op_type) == 0) id = k;
    const ox_tensor *x = ox_in(n, in, 0);
    if (id < 0 || !ew_is_tensor(x) || n->n_outputs < 1 || !ew_is_tensor(out[0]))
        return OX_E_UNSUPPORTED;
    int cls = un_ops[id].cls;
    ox_dtype ty = cls == UC_ISX ? OX_BOOL : x->dtype;
    if (!un_type_ok(cls, x->dtype) || out[0]->dtype != ty ||
        ox_tensor_numel(out[0]) != ox_tensor_numel(x))
        return OX_E_UNSUPPORTED;
    ew_par p;
    memset(&p, 0, sizeof p);
    switch (id) {
    case U_leakyrelu: p.alpha = ox_attr_float(n, "alpha", 0.01f); break;
    case U_elu:
    case U_thresholdedrelu: p.alpha = ox_attr_float(n, "alpha", 1.0f); break;
    case U_celu:
        p.alpha = ox_attr_float(n, "alpha", 1.0f);
        if (p.alpha == 0) return OX_E_UNSUPPORTED;
        break;
    case U_selu:
        p.alpha = ox_attr_float(n, "alpha", 1.67326319217681884765625f);
        p.gamma = ox_attr_float(n, "gamma", 1.05070102214813232421875f);
        break;
    case U_hardsigmoid:
        p.alpha = ox_attr_float(n, "alpha", 0.2f);
        p.beta = ox_attr_float(n, "beta", 0.5f);
        break;
    case U_shrink:
        p.alpha = ox_attr_float(n, "lambd", 0.5f);
        p.beta = ox_attr_float(n, "bias", 0.0f);
        break;
    case U_is_inf:
        p.flags = (ox_attr_int(n, "detect_positive", 1) ? 1 : 0) |
                  (ox_attr_int(n, "detect_negative", 1) ? 2 : 0);
        break;
    case U_gelu: {
        const char *a = ox_attr_str(n, "approximate", "none");
        if (strcmp(a, "tanh") == 0)
            id = U_gelu_tanh;
        else if (strcmp(a, "none") != 0)
            return OX_E_UNSUPPORTED;
        break;
    }
    case U_clip: {
        bool ok;
        ox_status st = clip_par(n, in, const_inputs, &p, &ok);
        if (st) return st;
        if (!ok) return OX_E_UNSUPPORTED;
        break;
    }
    default: break;
    }
    un_state *s = (un_state *)malloc(sizeof *s);
    if (!s) return ox_node_err(n, OX_E_NOMEM, "out of memory");
    s->id = id;
    s->p = p;
    *state = s;
    return OX_OK;
}

ox_status ox_cu_ew_unary(struct ox_cuda_ctx *c, const struct ox_node *n, const ox_tensor *const *in,
                         ox_tensor *const *out) {
    const un_state *s = (const un_state *)c->state;
    int64_t cnt = ox_tensor_numel(out[0]);
    if (cnt <= 0) return OX_OK;
    un_launch(c->stream, s->id, s->p, in[0]->dtype, in[0]->data, out[0]->data, cnt);
    return ox_cu_launched(n->op_type);
}

/* ---- binary ops ------------------------------------------------------------------------- */

/* Type classes: BC_NUM float, float16, bfloat16, int32, int64, output of the same type; BC_CMP
 * those in, bool out; BC_EQ that and bool; BC_LOGIC bool; BC_POW the base as BC_NUM, the
 * exponent of the same type or (float base) of any BC_NUM type. */
enum { BC_NUM, BC_CMP, BC_EQ, BC_LOGIC, BC_POW };

/* (op_type, id, class); NULL op_type: picked by attribute (Mod's fmod) or by the variadic ops. */
#define EW_BINARY(X)                                                                               \
    X("Add", add, BC_NUM)                                                                          \
    X("Sub", sub, BC_NUM)                                                                          \
    X("Mul", mul, BC_NUM)                                                                          \
    X("Div", div, BC_NUM)                                                                          \
    X("Pow", pow, BC_POW)                                                                          \
    X("Mod", pymod, BC_NUM)                                                                        \
    X(NULL, fmod, BC_NUM)                                                                          \
    X("PRelu", prelu, BC_NUM)                                                                      \
    X(NULL, max, BC_NUM)                                                                           \
    X(NULL, min, BC_NUM)                                                                           \
    X("Equal", eq, BC_EQ)                                                                          \
    X("Less", lt, BC_CMP)                                                                          \
    X("Greater", gt, BC_CMP)                                                                       \
    X("LessOrEqual", le, BC_CMP)                                                                   \
    X("GreaterOrEqual", ge, BC_CMP)                                                                \
    X("And", land, BC_LOGIC)                                                                       \
    X("Or", lor, BC_LOGIC)                                                                         \
    X("Xor", lxor, BC_LOGIC)

enum {
#define X(name, id, cls) B_##id,
    EW_BINARY(X)
#undef X
        B_COUNT
};

static const struct {
    const char *name;
    int cls;
} bin_ops[B_COUNT] = {
#define X(name, id, cls) {name, cls},
    EW_BINARY(X)
#undef X
};

/* r = a % b (or fmod) moved to b's sign */
template <class C> static __device__ C ew_pymod(C r, C b) {
    return r != 0 && ((r < 0) != (b < 0)) ? r + b : r;
}

/* Integer +, -, * wrap: computed in the unsigned type. */
#define EW_BIN_OP(id, RT, fexpr, iexpr)                                                            \
    struct op_##id {                                                                               \
        template <class C> __device__ RT operator()(C a, C b) const {                              \
            if constexpr (std::is_floating_point_v<C>) {                                           \
                return fexpr;                                                                      \
            } else {                                                                               \
                using U = std::make_unsigned_t<C>;                                                 \
                (void)sizeof(U);                                                                   \
                return iexpr;                                                                      \
            }                                                                                      \
        }                                                                                          \
    };

EW_BIN_OP(add, C, a + b, (C)((U)a + (U)b))
EW_BIN_OP(sub, C, a - b, (C)((U)a - (U)b))
EW_BIN_OP(mul, C, (a) * (b), (C)(((U)a) * ((U)b)))
/* integer division truncates toward zero (C); by 0 gives 0, by -1 wraps */
EW_BIN_OP(div, C, a / b, b == 0 ? (C)0 : b == -1 ? (C)(0 - (U)a) : (C)(a / b))
EW_BIN_OP(pow, C, powf(a, b), (C)ew_ipow(a, b))
/* fmod=1: C's fmod and %; fmod=0: the sign of the divisor (Python's %) */
EW_BIN_OP(fmod, C, fmodf(a, b), b == 0 || b == -1 ? (C)0 : (C)(a % b))
EW_BIN_OP(pymod, C, ew_pymod(fmodf(a, b), b), b == 0 || b == -1 ? (C)0 : ew_pymod((C)(a % b), b))
/* NaN propagates (numpy.maximum) */
EW_BIN_OP(max, C, a != a ? a : a > b ? a : b, a > b ? a : b)
EW_BIN_OP(min, C, a != a ? a : a < b ? a : b, a < b ? a : b)
EW_BIN_OP(prelu, C, a < 0 ? a * b : a, a < 0 ? (C)((U)a * (U)b) : a)
EW_BIN_OP(lt, bool, a < b, a < b)
EW_BIN_OP(gt, bool, a > b, a > b)
EW_BIN_OP(le, bool, a <= b, a <= b)
EW_BIN_OP(ge, bool, a >= b, a >= b)

/* Bool (uint8_t) operands compare as truth values. */
struct op_eq {
    template <class C> __device__ bool operator()(C a, C b) const {
        if constexpr (std::is_same_v<C, uint8_t>)
            return (a != 0) == (b != 0);
        else
            return a == b;
    }
};

struct op_land {
    __device__ bool operator()(uint8_t a, uint8_t b) const {
        return a != 0 && b != 0;
    }
};

struct op_lor {
    __device__ bool operator()(uint8_t a, uint8_t b) const {
        return a != 0 || b != 0;
    }
};

struct op_lxor {
    __device__ bool operator()(uint8_t a, uint8_t b) const {
        return (a != 0) != (b != 0);
    }
};

/* Pow with an exponent of another type: through double, as the CPU's pow_mixed. */
struct op_pow_mixed {
    template <class A, class B> __device__ double operator()(A a, B b) const {
        return pow((double)a, (double)b);
    }
};

template <class TA, class TB, class TY, class Op> struct bin_fn {
    const TA *a;
    const TB *b;
    TY *y;
    Op op;
    template <class I> __device__ void operator()(I i, const I *off) const {
        y[i] = cvt<TY>(op(cvt<ew_ct_t<TA>>(a[off[0]]), cvt<ew_ct_t<TB>>(b[off[1]])));
    }
};

/* Same-shape operands or a scalar one (each input's stride 1, or 0: one_a/one_b), V output
 * elements a thread per load and store (the vector inputs and y aligned to their vectors);
 * the last n % V elements one a thread. */
template <int V, class TA, class TB, class TY, class Op>
static __global__ void bin_vec_kernel(const TA *a, const TB *b, TY *y, int64_t n, bool one_a,
                                      bool one_b, Op op) {
    using CA = ew_ct_t<TA>;
    using CB = ew_ct_t<TB>;
    int64_t step = (int64_t)gridDim.x * blockDim.x,
            t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    int64_t nv = n / V;
    const CA a0 = cvt<CA>(a[0]);
    const CB b0 = cvt<CB>(b[0]);
    for (int64_t i = t; i < nv; i += step) {
        ew_vec<TA, V> va;
        ew_vec<TB, V> vb;
        ew_vec<TY, V> vy;
        if (!one_a) va = ((const ew_vec<TA, V> *)a)[i];
        if (!one_b) vb = ((const ew_vec<TB, V> *)b)[i];
        EW_UNROLL
        for (int k = 0; k < V; k++)
            vy.e[k] = cvt<TY>(op(one_a ? a0 : cvt<CA>(va.e[k]), one_b ? b0 : cvt<CB>(vb.e[k])));
        ((ew_vec<TY, V> *)y)[i] = vy;
    }
    for (int64_t i = nv * V + t; i < n; i += step)
        y[i] = cvt<TY>(op(one_a ? a0 : cvt<CA>(a[i]), one_b ? b0 : cvt<CB>(b[i])));
}

template <class TA, class TB, class TY, class Op>
static void bin_go(cudaStream_t st, const ew_shape<2> &s, int64_t n, const void *a, const void *b,
                   void *y) {
    constexpr int V = ew_width<TA, TB, TY>();
    /* rank 1: each stride 1 (of the output's shape) or 0 (one value); ew_make_shape gives no
     * negative strides */
    if (V > 1 && s.rank == 1 && n >= V && s.st[0][0] <= 1 && s.st[1][0] <= 1 && ox_cu_vec_on() &&
        ox_cu_aligned(y, V * sizeof(TY)) && (s.st[0][0] == 0 || ox_cu_aligned(a, V * sizeof(TA))) &&
        (s.st[1][0] == 0 || ox_cu_aligned(b, V * sizeof(TB)))) {
        bin_vec_kernel<V, TA, TB, TY, Op><<<ox_cu_blocks(n / V), EW_THREADS, 0, st>>>(
            (const TA *)a, (const TB *)b, (TY *)y, n, s.st[0][0] == 0, s.st[1][0] == 0, Op{});
        return;
    }
    ew_bcast(st, s, n, bin_fn<TA, TB, TY, Op>{(const TA *)a, (const TB *)b, (TY *)y, Op{}});
}

/* float, float16 or bfloat16 base, exponent of type tb */
template <class TA>
static void pow_mixed(cudaStream_t st, const ew_shape<2> &s, int64_t n, ox_dtype tb, const void *a,
                      const void *b, void *y) {
    switch (tb) {
    case OX_FLOAT: bin_go<TA, float, TA, op_pow_mixed>(st, s, n, a, b, y); break;
    case OX_FLOAT16: bin_go<TA, __half, TA, op_pow_mixed>(st, s, n, a, b, y); break;
    case OX_BFLOAT16: bin_go<TA, __nv_bfloat16, TA, op_pow_mixed>(st, s, n, a, b, y); break;
    case OX_INT32: bin_go<TA, int32_t, TA, op_pow_mixed>(st, s, n, a, b, y); break;
    case OX_INT64: bin_go<TA, int64_t, TA, op_pow_mixed>(st, s, n, a, b, y); break;
    default: break;
    }
}

template <class T, class Op, int CLS>
static void bin_same(cudaStream_t st, const ew_shape<2> &s, int64_t n, const void *a, const void *b,
                     void *y) {
    using TY = std::conditional_t<CLS == BC_NUM || CLS == BC_POW, T, uint8_t>;
    bin_go<T, T, TY, Op>(st, s, n, a, b, y);
}

/* The instantiations of one op for its class; a type outside it launches nothing. */
template <class Op, int CLS>
static void bin_run(cudaStream_t st, ox_dtype ta, ox_dtype tb, const ew_shape<2> &s, int64_t n,
                    const void *a, const void *b, void *y) {
    if constexpr (CLS == BC_POW) {
        if (ta != tb) {
            if (ta == OX_FLOAT) pow_mixed<float>(st, s, n, tb, a, b, y);
            if (ta == OX_FLOAT16) pow_mixed<__half>(st, s, n, tb, a, b, y);
            if (ta == OX_BFLOAT16) pow_mixed<__nv_bfloat16>(st, s, n, tb, a, b, y);
            return;
        }
    }
    if constexpr (CLS != BC_LOGIC) {
        switch (ta) {
        case OX_FLOAT: bin_same<float, Op, CLS>(st, s, n, a, b, y); return;
        case OX_FLOAT16: bin_same<__half, Op, CLS>(st, s, n, a, b, y); return;
        case OX_BFLOAT16: bin_same<__nv_bfloat16, Op, CLS>(st, s, n, a, b, y); return;
        case OX_INT32: bin_same<int32_t, Op, CLS>(st, s, n, a, b, y); return;
        case OX_INT64: bin_same<int64_t, Op, CLS>(st, s, n, a, b, y); return;
        default: break;
        }
    }
    if constexpr (CLS == BC_EQ || CLS == BC_LOGIC) {
        if (ta == OX_BOOL) bin_same<uint8_t, Op, CLS>(st, s, n, a, b, y);
    }
}

static void bin_launch(cudaStream_t st, int id, ox_dtype ta, ox_dtype tb, const ew_shape<2> &s,
                       int64_t n, const void *a, const void *b, void *y) {
    switch (id) {
#define X(name, id, cls)                                                                           \
    case B_##id: bin_run<op_##id, cls>(st, ta, tb, s, n, a, b, y); break;
        EW_BINARY(X)
#undef X
    default: break;
    }
}

static bool bin_types_ok(int cls, ox_dtype ta, ox_dtype tb, ox_dtype ty) {
    switch (cls) {
    case BC_NUM: return ew_is_num(ta) && tb == ta && ty == ta;
    case BC_CMP: return ew_is_num(ta) && tb == ta && ty == OX_BOOL;
    case BC_EQ: return (ew_is_num(ta) || ta == OX_BOOL) && tb == ta && ty == OX_BOOL;
    case BC_LOGIC: return ta == OX_BOOL && tb == OX_BOOL && ty == OX_BOOL;
    case BC_POW:
        return ty == ta && (tb == ta ? ew_is_num(ta) : ox_cu_is_float(ta) && ew_is_num(tb));
    default: return false;
    }
}

struct bin_state {
    int id;
    ew_shape<2> s;
};

ox_status ox_cu_ew_prepare_binary(struct ox_cuda_ctx *c, const struct ox_node *n,
                                  const ox_tensor *const *in, ox_tensor *const *out,
                                  unsigned const_inputs, void **state, size_t *workspace) {
    (void)c, (void)const_inputs, (void)workspace;
    int id = -1;
    for (int k = 0; k < B_COUNT && id < 0; k++)
        if (bin_ops[k].name && strcmp(bin_ops[k].name, n->op_type) == 0) id = k;
    const ox_tensor *a = ox_in(n, in, 0), *b = ox_in(n, in, 1);
    if (id < 0 || !ew_is_tensor(a) || !ew_is_tensor(b) || n->n_outputs < 1 || !ew_is_tensor(out[0]))
        return OX_E_UNSUPPORTED;
    if (id == B_pymod && ox_attr_int(n, "fmod", 0)) id = B_fmod;
    if (!bin_types_ok(bin_ops[id].cls, a->dtype, b->dtype, out[0]->dtype)) return OX_E_UNSUPPORTED;
    ox_tensor bv;
    bool ok = id == B_prelu ? ew_prelu_view(n, a, b, &bv) : ew_legacy_view(n, a, b, &bv);
    const ox_tensor *t[2] = {a, &bv};
    bin_state s;
    if (!ok || !ew_make_shape<2>(t, out[0], &s.s)) return OX_E_UNSUPPORTED;
    s.id = id;
    bin_state *p = (bin_state *)malloc(sizeof *p);
    if (!p) return ox_node_err(n, OX_E_NOMEM, "out of memory");
    *p = s;
    *state = p;
    return OX_OK;
}

ox_status ox_cu_ew_binary(struct ox_cuda_ctx *c, const struct ox_node *n,
                          const ox_tensor *const *in, ox_tensor *const *out) {
    const bin_state *s = (const bin_state *)c->state;
    int64_t cnt = ox_tensor_numel(out[0]);
    if (cnt <= 0) return OX_OK;
    bin_launch(c->stream, s->id, in[0]->dtype, in[1]->dtype, s->s, cnt, in[0]->data, in[1]->data,
               out[0]->data);
    return ox_cu_launched(n->op_type);
}

/* ---- variadic ops: Sum, Mean, Max, Min -------------------------------------------------- */

/* out = in_first op in_a, then out = out op in_k for each further input (first: the input
 * whose memory the output takes, if any, so that no input is overwritten before it is read;
 * the CPU's order); Mean then divides by the count. Each pass rounds to the element type, as
 * the CPU's passes do. */

struct var_state {
    int id; /* the binary op */
    bool mean;
};

static ox_status ew_copy(struct ox_cuda_ctx *c, const ox_tensor *x, ox_tensor *y) {
    size_t bytes = (size_t)ox_tensor_numel(x) * ox_dtype_size(x->dtype);
    if (!bytes || x->data == y->data) return OX_OK;
    return ox_cu_check(
        cudaMemcpyAsync(y->data, x->data, bytes, cudaMemcpyDeviceToDevice, c->stream), "copy");
}

ox_status ox_cu_ew_prepare_variadic(struct ox_cuda_ctx *c, const struct ox_node *n,
                                    const ox_tensor *const *in, ox_tensor *const *out,
                                    unsigned const_inputs, void **state, size_t *workspace) {
    (void)c, (void)const_inputs, (void)workspace;
    var_state v = {-1, false};
    if (strcmp(n->op_type, "Sum") == 0) v.id = B_add;
    if (strcmp(n->op_type, "Mean") == 0) v.id = B_add, v.mean = true;
    if (strcmp(n->op_type, "Max") == 0) v.id = B_max;
    if (strcmp(n->op_type, "Min") == 0) v.id = B_min;
    if (v.id < 0 || n->n_inputs < 1 || n->n_outputs < 1 || !ew_is_tensor(out[0]))
        return OX_E_UNSUPPORTED;
    ox_dtype dt = out[0]->dtype;
    if (!(v.mean ? ox_cu_is_float(dt) : ew_is_num(dt))) return OX_E_UNSUPPORTED;
    for (int k = 0; k < n->n_inputs; k++) {
        const ox_tensor *x = in[k];
        if (!ew_is_tensor(x) || x->dtype != dt || !ew_broadcasts_to(x, out[0]))
            return OX_E_UNSUPPORTED;
    }
    if (n->n_inputs == 1 && ox_tensor_numel(in[0]) != ox_tensor_numel(out[0]))
        return OX_E_UNSUPPORTED;
    var_state *p = (var_state *)malloc(sizeof *p);
    if (!p) return ox_node_err(n, OX_E_NOMEM, "out of memory");
    *p = v;
    *state = p;
    return OX_OK;
}

ox_status ox_cu_ew_variadic(struct ox_cuda_ctx *c, const struct ox_node *n,
                            const ox_tensor *const *in, ox_tensor *const *out) {
    const var_state *v = (const var_state *)c->state;
    ox_tensor *y = out[0];
    int64_t cnt = ox_tensor_numel(y);
    if (cnt <= 0) return OX_OK;
    if (n->n_inputs == 1) return ew_copy(c, in[0], y);
    int first = 0;
    for (int k = 0; k < n->n_inputs; k++)
        if (in[k]->data == y->data) first = k;
    for (int step = 1; step < n->n_inputs; step++) {
        int k = step <= first ? step - 1 : step;
        const ox_tensor *t[2] = {step == 1 ? in[first] : y, in[k]};
        ew_shape<2> s;
        if (!ew_make_shape<2>(t, y, &s))
            return ox_node_err(n, OX_E_INTERNAL, "input %d does not broadcast to the output", k);
        bin_launch(c->stream, v->id, y->dtype, y->dtype, s, cnt, t[0]->data, t[1]->data, y->data);
    }
    if (v->mean) {
        ew_par p;
        memset(&p, 0, sizeof p);
        p.k = (float)n->n_inputs;
        un_launch(c->stream, U_divk, p, y->dtype, y->data, y->data, cnt);
    }
    return ox_cu_launched(n->op_type);
}

/* ---- Where, Expand: broadcast copies of bits -------------------------------------------- */

template <class T> struct where_fn {
    const uint8_t *c;
    const T *x, *y;
    T *out;
    template <class I> __device__ void operator()(I i, const I *off) const {
        out[i] = c[off[0]] ? x[off[1]] : y[off[2]];
    }
};

template <class T> struct expand_fn {
    const T *x;
    T *y;
    template <class I> __device__ void operator()(I i, const I *off) const {
        y[i] = x[off[0]];
    }
};

/* Element size of a type copied as bits (strings hold host pointers: not here). */
static size_t ew_bits_size(ox_dtype dt) {
    if (dt == OX_UNDEFINED || dt == OX_STRING || dt >= OX_N_DTYPES) return 0;
    size_t sz = ox_dtype_size(dt);
    return sz == 1 || sz == 2 || sz == 4 || sz == 8 ? sz : 0;
}

template <int N> struct bits_state {
    size_t esz;
    ew_shape<N> s;
};

template <int N>
static ox_status bits_prepare(const struct ox_node *n, const ox_tensor *const *t,
                              const ox_tensor *out, void **state) {
    bits_state<N> b;
    b.esz = ew_bits_size(out->dtype);
    if (!b.esz || !ew_make_shape<N>(t, out, &b.s)) return OX_E_UNSUPPORTED;
    bits_state<N> *p = (bits_state<N> *)malloc(sizeof *p);
    if (!p) return ox_node_err(n, OX_E_NOMEM, "out of memory");
    *p = b;
    *state = p;
    return OX_OK;
}

ox_status ox_cu_ew_prepare_where(struct ox_cuda_ctx *c, const struct ox_node *n,
                                 const ox_tensor *const *in, ox_tensor *const *out,
                                 unsigned const_inputs, void **state, size_t *workspace) {
    (void)c, (void)const_inputs, (void)workspace;
    const ox_tensor *t[3] = {ox_in(n, in, 0), ox_in(n, in, 1), ox_in(n, in, 2)};
    if (!ew_is_tensor(t[0]) || !ew_is_tensor(t[1]) || !ew_is_tensor(t[2]) || n->n_outputs < 1 ||
        !ew_is_tensor(out[0]))
        return OX_E_UNSUPPORTED;
    if (t[0]->dtype != OX_BOOL || t[1]->dtype != t[2]->dtype || out[0]->dtype != t[1]->dtype)
        return OX_E_UNSUPPORTED;
    return bits_prepare<3>(n, t, out[0], state);
}

template <class T>
static void where_go(cudaStream_t st, const ew_shape<3> &s, int64_t n, const ox_tensor *const *in,
                     ox_tensor *y) {
    ew_bcast(st, s, n,
             where_fn<T>{(const uint8_t *)in[0]->data, (const T *)in[1]->data,
                         (const T *)in[2]->data, (T *)y->data});
}

ox_status ox_cu_ew_where(struct ox_cuda_ctx *c, const struct ox_node *n, const ox_tensor *const *in,
                         ox_tensor *const *out) {
    const bits_state<3> *b = (const bits_state<3> *)c->state;
    int64_t cnt = ox_tensor_numel(out[0]);
    if (cnt <= 0) return OX_OK;
    switch (b->esz) {
    case 1: where_go<uint8_t>(c->stream, b->s, cnt, in, out[0]); break;
    case 2: where_go<uint16_t>(c->stream, b->s, cnt, in, out[0]); break;
    case 4: where_go<uint32_t>(c->stream, b->s, cnt, in, out[0]); break;
    case 8: where_go<uint64_t>(c->stream, b->s, cnt, in, out[0]); break;
    default: return ox_node_err(n, OX_E_INTERNAL, "element size %zu", b->esz);
    }
    return ox_cu_launched(n->op_type);
}

/* Expand: out[0]'s dims are the broadcast of input 0 and the shape (set by infer); the shape
 * input itself is not read. */
ox_status ox_cu_ew_prepare_expand(struct ox_cuda_ctx *c, const struct ox_node *n,
                                  const ox_tensor *const *in, ox_tensor *const *out,
                                  unsigned const_inputs, void **state, size_t *workspace) {
    (void)c, (void)const_inputs, (void)workspace;
    const ox_tensor *t[1] = {ox_in(n, in, 0)};
    if (!ew_is_tensor(t[0]) || n->n_outputs < 1 || !ew_is_tensor(out[0]) ||
        out[0]->dtype != t[0]->dtype)
        return OX_E_UNSUPPORTED;
    return bits_prepare<1>(n, t, out[0], state);
}

template <class T>
static void expand_go(cudaStream_t st, const ew_shape<1> &s, int64_t n, const ox_tensor *x,
                      ox_tensor *y) {
    ew_bcast(st, s, n, expand_fn<T>{(const T *)x->data, (T *)y->data});
}

ox_status ox_cu_ew_expand(struct ox_cuda_ctx *c, const struct ox_node *n,
                          const ox_tensor *const *in, ox_tensor *const *out) {
    const bits_state<1> *b = (const bits_state<1> *)c->state;
    int64_t cnt = ox_tensor_numel(out[0]);
    if (cnt <= 0) return OX_OK;
    switch (b->esz) {
    case 1: expand_go<uint8_t>(c->stream, b->s, cnt, in[0], out[0]); break;
    case 2: expand_go<uint16_t>(c->stream, b->s, cnt, in[0], out[0]); break;
    case 4: expand_go<uint32_t>(c->stream, b->s, cnt, in[0], out[0]); break;
    case 8: expand_go<uint64_t>(c->stream, b->s, cnt, in[0], out[0]); break;
    default: return ox_node_err(n, OX_E_INTERNAL, "element size %zu", b->esz);
    }
    return ox_cu_launched(n->op_type);
}

/* ---- Identity --------------------------------------------------------------------------- */

ox_status ox_cu_ew_prepare_identity(struct ox_cuda_ctx *c, const struct ox_node *n,
                                    const ox_tensor *const *in, ox_tensor *const *out,
                                    unsigned const_inputs, void **state, size_t *workspace) {
    (void)c, (void)const_inputs, (void)state, (void)workspace;
    const ox_tensor *x = ox_in(n, in, 0);
    if (!ew_is_tensor(x) || n->n_outputs < 1 || !ew_is_tensor(out[0]) ||
        out[0]->dtype != x->dtype || x->dtype == OX_STRING || x->dtype == OX_UNDEFINED ||
        ox_tensor_numel(out[0]) != ox_tensor_numel(x))
        return OX_E_UNSUPPORTED;
    return OX_OK;
}

ox_status ox_cu_ew_identity(struct ox_cuda_ctx *c, const struct ox_node *n,
                            const ox_tensor *const *in, ox_tensor *const *out) {
    (void)n;
    return ew_copy(c, in[0], out[0]);
}

/* ---- Cast, CastLike --------------------------------------------------------------------- */

/* The served types: (dtype, C type, kind: f float, i signed, u unsigned, b bool, range). */
#define EW_CAST_TYPES(X)                                                                           \
    X(OX_FLOAT, float, 'f', 0, 0)                                                                  \
    X(OX_FLOAT16, __half, 'f', 0, 0)                                                               \
    X(OX_BFLOAT16, __nv_bfloat16, 'f', 0, 0)                                                       \
    X(OX_DOUBLE, double, 'f', 0, 0)                                                                \
    X(OX_INT64, int64_t, 'i', INT64_MIN, INT64_MAX)                                                \
    X(OX_INT32, int32_t, 'i', INT32_MIN, INT32_MAX)                                                \
    X(OX_INT8, int8_t, 'i', INT8_MIN, INT8_MAX)                                                    \
    X(OX_UINT8, uint8_t, 'u', 0, UINT8_MAX)                                                        \
    X(OX_BOOL, uint8_t, 'b', 0, 1)

template <int DT> struct ew_dt;
#define X(dt, type, k, l, h)                                                                       \
    template <> struct ew_dt<dt> {                                                                 \
        using T = type;                                                                            \
        static constexpr char kind = k;                                                            \
        static constexpr int64_t lo = l;                                                           \
        static constexpr uint64_t hi = h;                                                          \
    };
EW_CAST_TYPES(X)
#undef X

/* As the CPU's cast_numeric: a float source becomes a double (float, float16 and bfloat16
 * among themselves through float, the same values), an integer source an int64 (uint64 for
 * unsigned and bool); float to integer saturates (NaN: 0), integer to integer wraps, anything
 * to bool is != 0. */
template <int S, int D> struct cast_fn {
    using TS = typename ew_dt<S>::T;
    using TD = typename ew_dt<D>::T;
    __device__ TD operator()(TS x) const {
        constexpr char ks = ew_dt<S>::kind, kd = ew_dt<D>::kind;
        if constexpr (ks == 'f') {
            if constexpr (kd == 'b')
                return (TD)(cvt<double>(x) != 0.0);
            else if constexpr (kd == 'f') {
                if constexpr (!std::is_same_v<TS, double> && !std::is_same_v<TD, double>)
                    return cvt<TD>(cvt<float>(x));
                else
                    return cvt<TD>(cvt<double>(x));
            } else if constexpr (kd == 'i')
                return (TD)ew_f2i(cvt<double>(x), ew_dt<D>::lo, (int64_t)ew_dt<D>::hi);
            else
                return (TD)ew_f2u(cvt<double>(x), ew_dt<D>::hi);
        } else {
            using W = std::conditional_t<ks == 'i', int64_t, uint64_t>;
            W w = ks == 'b' ? (W)(x != 0) : (W)x;
            if constexpr (kd == 'b')
                return (TD)(w != 0);
            else if constexpr (std::is_same_v<TD, __half>)
                return __double2half((double)w);
            else if constexpr (std::is_same_v<TD, __nv_bfloat16>)
                return __double2bfloat16((double)w);
            else
                return (TD)w;
        }
    }
};

static bool cast_type_ok(ox_dtype dt) {
    switch (dt) {
#define X(dt, type, k, l, h) case dt:
        EW_CAST_TYPES(X)
#undef X
        return true;
    default: return false;
    }
}

template <int S>
static void cast_from(cudaStream_t st, ox_dtype d, const void *x, void *y, int64_t n) {
    switch (d) {
#define X(dt, type, k, l, h)                                                                       \
    case dt: ew_map<typename ew_dt<S>::T, type>(st, x, y, n, cast_fn<S, dt>{}); break;
        EW_CAST_TYPES(X)
#undef X
    default: break;
    }
}

/* Cast and CastLike: the target type is out[0]'s (infer set it from `to` or input 1). */
ox_status ox_cu_ew_prepare_cast(struct ox_cuda_ctx *c, const struct ox_node *n,
                                const ox_tensor *const *in, ox_tensor *const *out,
                                unsigned const_inputs, void **state, size_t *workspace) {
    (void)c, (void)const_inputs, (void)state, (void)workspace;
    const ox_tensor *x = ox_in(n, in, 0);
    if (!ew_is_tensor(x) || n->n_outputs < 1 || !ew_is_tensor(out[0]) || !cast_type_ok(x->dtype) ||
        !cast_type_ok(out[0]->dtype) || ox_tensor_numel(out[0]) != ox_tensor_numel(x))
        return OX_E_UNSUPPORTED;
    return OX_OK;
}

ox_status ox_cu_ew_cast(struct ox_cuda_ctx *c, const struct ox_node *n, const ox_tensor *const *in,
                        ox_tensor *const *out) {
    const ox_tensor *x = in[0];
    ox_tensor *y = out[0];
    int64_t cnt = ox_tensor_numel(y);
    if (cnt <= 0) return OX_OK;
    if (x->dtype == y->dtype) return ew_copy(c, x, y);
    switch (x->dtype) {
#define X(dt, type, k, l, h)                                                                       \
    case dt: cast_from<dt>(c->stream, y->dtype, x->data, y->data, cnt); break;
        EW_CAST_TYPES(X)
#undef X
    default: return ox_node_err(n, OX_E_INTERNAL, "cast from %s", ox_dtype_name(x->dtype));
    }
    return ox_cu_launched(n->op_type);
}
