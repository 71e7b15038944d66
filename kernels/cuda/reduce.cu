/* CUDA kernels of the reduce family: Reduce{Sum,Mean,Max,Min,Prod,L1,L2,LogSum,LogSumExp,
 * SumSquare}, ArgMax/ArgMin, GlobalAveragePool/GlobalMaxPool, Softmax/LogSoftmax and the
 * normalizations (LayerNormalization, InstanceNormalization, GroupNormalization,
 * BatchNormalization in inference mode). kernels/cpu/reduce.c, norm.c, nn.c and conv.c are
 * the reference for every attribute, default and edge case.
 *
 * Design. A reduction is an "op" functor (init, pre, combine, finish) over an accumulator:
 * float for float32/float16/bfloat16 (stored back rounded), long long for int32/int64 (wrapping
 * arithmetic, as the CPU's int64 loop), a (max, scaled sum) pair for LogSumExp (one pass),
 * an (value, index) pair for ArgMax/ArgMin. prepare() reduces the shape to one of three
 * layouts, and one of three kernels runs the functor:
 * - rows (the reduced axes are the last ones once size-1 axes are ignored: outer x n):
 *   a warp per row for rows up to 512 long, else a block per row, warp-shuffle reductions;
 * - columns (one reduced block in the middle: outer x n x inner): a block of 32 x BY
 *   threads covers 32 neighbouring inner positions (coalesced), its BY rows of threads
 *   splitting n, folded through shared memory;
 * - generic (reduced axes in several blocks): a thread per output walking the reduced
 *   index space with an odometer.
 * The combine functions are commutative and associative (NaN-propagating extrema, ArgMax's
 * total order on (value, index)), so any split of the work gives the sequential answer.
 * Empty reductions give the functor's identity, as the CPU kernel does.
 *
 * Softmax and the normalizations are row kernels of the same shape (a warp or a block per
 * row, statistics by the same group reductions, then a pass that writes the row); Softmax
 * over a non-last axis (opset >= 13) uses the column layout. BatchNormalization folds its
 * four per-channel inputs into y = x * a[c] + b[c]: a and b are computed once in prepare
 * when the inputs are constant, else by a small kernel into the workspace on every run. */
#include "kernels/cuda/cuda.h"
#include "kernels/cuda/elem.cuh"

#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <type_traits>

#include <mma.h>

#define OX_CUDA_OP(domain, type, prepare, run, release)                                            \
    ox_status prepare(struct ox_cuda_ctx *, const struct ox_node *, const ox_tensor *const *,      \
                      ox_tensor *const *, unsigned, void **, size_t *);                            \
    ox_status run(struct ox_cuda_ctx *, const struct ox_node *, const ox_tensor *const *,          \
                  ox_tensor *const *);                                                             \
    void release(void *);
#include "kernels/cuda/reduce.def"
#undef OX_CUDA_OP

/* ---- element types ------------------------------------------------------------------- */

template <typename T> struct is_int_type : std::false_type {};
template <> struct is_int_type<int32_t> : std::true_type {};
template <> struct is_int_type<int64_t> : std::true_type {};

/* The accumulator of an element type: float for the float types, long long for integers. */
template <typename T>
using acc_of = typename std::conditional<is_int_type<T>::value, long long, float>::type;

static __device__ __forceinline__ long long to_acc(int32_t v) {
    return v;
}
static __device__ __forceinline__ long long to_acc(int64_t v) {
    return (long long)v;
}
static __device__ __forceinline__ float to_acc(float v) {
    return v;
}
static __device__ __forceinline__ float to_acc(__half v) {
    return __half2float(v);
}
static __device__ __forceinline__ float to_acc(__nv_bfloat16 v) {
    return __bfloat162float(v);
}

/* v rounded to T's precision, as a value stored in a T tensor and read back (an Add's or a
 * product's output in float16 or bfloat16; float itself unchanged). */
template <typename T> static __device__ __forceinline__ float round_as(float v) {
    return ox_cu_to_f(ox_cu_from_f<T>(v));
}

static __device__ __forceinline__ bool is_nan(float v) {
    return isnan(v);
}
static __device__ __forceinline__ bool is_nan(long long v) {
    (void)v;
    return false;
}

/* Identities of the extrema: -inf/+inf for floats, the type's limits for integers (the
 * CPU's int_limits). */
template <typename T> static __device__ __forceinline__ acc_of<T> lowest() {
    if constexpr (std::is_same<T, int32_t>::value)
        return INT32_MIN;
    else if constexpr (std::is_same<T, int64_t>::value)
        return (long long)INT64_MIN;
    else
        return -INFINITY;
}
template <typename T> static __device__ __forceinline__ acc_of<T> highest() {
    if constexpr (std::is_same<T, int32_t>::value)
        return INT32_MAX;
    else if constexpr (std::is_same<T, int64_t>::value)
        return (long long)INT64_MAX;
    else
        return INFINITY;
}

/* ---- accumulators and their warp shuffles -------------------------------------------- */

struct lse_acc {
    float m, s; /* running max and sum of exp(x - m) */
};

template <typename V> struct arg_acc {
    V v;
    long long i; /* -1: no element yet */
};

static __device__ __forceinline__ float shfl_xor(float v, int m) {
    return __shfl_xor_sync(0xffffffffu, v, m);
}
static __device__ __forceinline__ long long shfl_xor(long long v, int m) {
    return __shfl_xor_sync(0xffffffffu, v, m);
}
static __device__ __forceinline__ lse_acc shfl_xor(lse_acc v, int m) {
    return {shfl_xor(v.m, m), shfl_xor(v.s, m)};
}
template <typename V> static __device__ __forceinline__ arg_acc<V> shfl_xor(arg_acc<V> v, int m) {
    return {shfl_xor(v.v, m), shfl_xor(v.i, m)};
}

/* ---- reduction functors -------------------------------------------------------------- */

/* How elements combine (after the elementwise pre-step) and what happens to the result:
 * the CPU's red_class and red_post. RC_MAXNN is GlobalMaxPool's max, which skips NaN. */
enum { RC_SUM, RC_SUMSQ, RC_ABS, RC_PROD, RC_MAX, RC_MIN, RC_MAXNN, RC_LSE };
enum { RP_NONE, RP_MEAN, RP_SQRT, RP_LOG };

template <typename T, int CLS> struct red_op {
    using In = T;
    using Out = T;
    using A = acc_of<T>;
    static constexpr bool is_int = is_int_type<T>::value;
    int post;  /* RP_*, float types only */
    float div; /* RP_MEAN's divisor */

    __device__ A init() const {
        if constexpr (CLS == RC_PROD)
            return 1;
        else if constexpr (CLS == RC_MAX || CLS == RC_MAXNN)
            return lowest<T>();
        else if constexpr (CLS == RC_MIN)
            return highest<T>();
        else
            return 0;
    }
    __device__ A pre(T v, int64_t) const {
        A a = to_acc(v);
        if constexpr (is_int) {
            unsigned long long u = (unsigned long long)a;
            if constexpr (CLS == RC_SUMSQ) return (long long)(u * u);
            if constexpr (CLS == RC_ABS) return a < 0 ? (long long)(0ull - u) : a;
            return a;
        } else {
            if constexpr (CLS == RC_SUMSQ) return a * a;
            if constexpr (CLS == RC_ABS) return fabsf(a);
            return a;
        }
    }
    __device__ A combine(A a, A b) const {
        if constexpr (CLS == RC_PROD) {
            if constexpr (is_int)
                return (long long)((unsigned long long)a * (unsigned long long)b);
            else
                return a * b;
        } else if constexpr (CLS == RC_MAX) {
            if (is_nan(a)) return a;
            if (is_nan(b)) return b;
            return b > a ? b : a;
        } else if constexpr (CLS == RC_MIN) {
            if (is_nan(a)) return a;
            if (is_nan(b)) return b;
            return b < a ? b : a;
        } else if constexpr (CLS == RC_MAXNN) {
            return b > a ? b : a;
        } else {
            if constexpr (is_int)
                return (long long)((unsigned long long)a + (unsigned long long)b);
            else
                return a + b;
        }
    }
    __device__ Out finish(A r) const {
        if constexpr (is_int) {
            return (T)r;
        } else {
            if (post == RP_MEAN)
                r = r / div;
            else if (post == RP_SQRT)
                r = sqrtf(r);
            else if (post == RP_LOG)
                r = logf(r);
            return ox_cu_from_f<T>(r);
        }
    }
};

/* log(sum(exp(x))) in one pass: the pair (m, s) stands for s * exp(m). An infinite or NaN
 * max is the answer itself (the CPU's lse_finish). */
template <typename T> struct lse_op {
    using In = T;
    using Out = T;
    using A = lse_acc;

    __device__ A init() const {
        return {-INFINITY, 0.0f};
    }
    __device__ A pre(T v, int64_t) const {
        return {ox_cu_to_f(v), 1.0f};
    }
    __device__ A combine(A a, A b) const {
        if (isnan(a.m)) return a;
        if (isnan(b.m)) return b;
        if (a.m == -INFINITY) return b;
        if (b.m == -INFINITY) return a;
        if (a.m == INFINITY || b.m == INFINITY) return {INFINITY, 1.0f};
        float m = fmaxf(a.m, b.m);
        return {m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
    }
    __device__ Out finish(A r) const {
        if (isinf(r.m) || isnan(r.m)) return ox_cu_from_f<T>(r.m);
        return ox_cu_from_f<T>(r.m + logf(r.s));
    }
};

/* ArgMax/ArgMin: the best (value, index) under a total order, so partial results combine
 * in any order: NaN beats every number (numpy), a better value wins, and between equal
 * values (or two NaNs) the lower index wins, the higher with select_last_index. */
template <typename T> struct arg_op {
    using In = T;
    using Out = int64_t;
    using A = arg_acc<acc_of<T>>;
    bool is_max, last;

    __device__ A init() const {
        return {acc_of<T>(0), -1};
    }
    __device__ A pre(T v, int64_t j) const {
        return {to_acc(v), (long long)j};
    }
    __device__ A combine(A a, A b) const {
        if (a.i < 0) return b;
        if (b.i < 0) return a;
        A p = a.i < b.i ? a : b, q = a.i < b.i ? b : a; /* p comes first */
        bool pn = is_nan(p.v), qn = is_nan(q.v);
        if (pn && qn) return last ? q : p;
        if (pn) return p;
        if (qn) return q;
        if (p.v == q.v) return last ? q : p;
        if (is_max) return p.v > q.v ? p : q;
        return p.v < q.v ? p : q;
    }
    __device__ Out finish(A r) const {
        return (int64_t)r.i;
    }
};

struct sum_f {
    __device__ float combine(float a, float b) const {
        return a + b;
    }
};

/* Softmax's max, which skips NaN as the CPU's `x > m ? x : m` does (a NaN then spoils the
 * sum, and the row, as there). */
struct max_f {
    __device__ float combine(float a, float b) const {
        return fmaxf(a, b);
    }
};

/* ---- group reductions ---------------------------------------------------------------- */

template <typename A, typename F>
static __device__ __forceinline__ A warp_allreduce(A v, const F &f) {
    for (int m = 16; m > 0; m >>= 1) v = f.combine(v, shfl_xor(v, m));
    return v;
}

/* Every thread of the block gets the combination of all threads' v. blockDim.x is a
 * multiple of 32. Starts with a barrier, so calls may follow one another. */
template <typename A, typename F> static __device__ A block_allreduce(A v, const F &f) {
    __shared__ A sh[33];
    v = warp_allreduce(v, f);
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    __syncthreads();
    if (lane == 0) sh[w] = v;
    __syncthreads();
    if (threadIdx.x == 0) {
        A r = sh[0];
        for (int k = 1; k < nw; k++) r = f.combine(r, sh[k]);
        sh[32] = r;
    }
    __syncthreads();
    return sh[32];
}

/* Columns of a 32 x blockDim.y block: every thread gets the combination of its column
 * (threads with the same threadIdx.x). Starts with a barrier. */
template <typename A, typename F> static __device__ A col_allreduce(A v, const F &f) {
    __shared__ A sh[32 * 32];
    __syncthreads();
    sh[threadIdx.y * 32 + threadIdx.x] = v;
    __syncthreads();
    A r = sh[threadIdx.x];
    for (unsigned k = 1; k < blockDim.y; k++) r = f.combine(r, sh[k * 32 + threadIdx.x]);
    return r;
}

/* Rows handed to a warp each (WARP) or to a block each. */
template <bool WARP> struct group {
    static __device__ __forceinline__ int64_t first() {
        return WARP ? (int64_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5)
                    : (int64_t)blockIdx.x;
    }
    static __device__ __forceinline__ int64_t step() {
        return WARP ? (int64_t)gridDim.x * (blockDim.x >> 5) : (int64_t)gridDim.x;
    }
    static __device__ __forceinline__ int lane() {
        return WARP ? (int)(threadIdx.x & 31) : (int)threadIdx.x;
    }
    static __device__ __forceinline__ int size() {
        return WARP ? 32 : (int)blockDim.x;
    }
    template <typename A, typename F>
    static __device__ __forceinline__ A allreduce(A v, const F &f) {
        if constexpr (WARP)
            return warp_allreduce(v, f);
        else
            return block_allreduce(v, f);
    }
};

/* ---- reduction kernels --------------------------------------------------------------- */

/* y[r] = op over x[r * n .. r * n + n). */
template <bool WARP, typename Op>
__global__ void __launch_bounds__(1024)
    k_red_rows(const typename Op::In *x, typename Op::Out *y, int64_t rows, int64_t n, Op op) {
    using G = group<WARP>;
    for (int64_t r = G::first(); r < rows; r += G::step()) {
        const typename Op::In *p = x + r * n;
        typename Op::A acc = op.init();
        for (int64_t j = G::lane(); j < n; j += G::size()) acc = op.combine(acc, op.pre(p[j], j));
        acc = G::allreduce(acc, op);
        if (G::lane() == 0) y[r] = op.finish(acc);
    }
}

/* y[o * inner + i] = op over x[(o * n + j) * inner + i], j < n. Block 32 x BY; a tile is 32
 * neighbouring i of one o. */
template <typename Op>
__global__ void __launch_bounds__(1024) k_red_cols(const typename Op::In *x, typename Op::Out *y,
                                                   int64_t outer, int64_t n, int64_t inner, Op op) {
    int64_t tiles_row = (inner + 31) / 32, tiles = outer * tiles_row;
    for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
        int64_t o = t / tiles_row, i = (t % tiles_row) * 32 + threadIdx.x;
        typename Op::A acc = op.init();
        if (i < inner) {
            const typename Op::In *p = x + o * n * inner + i;
            for (int64_t j = threadIdx.y; j < n; j += blockDim.y)
                acc = op.combine(acc, op.pre(p[j * inner], j));
        }
        acc = col_allreduce(acc, op);
        if (i < inner && threadIdx.y == 0) y[o * inner + i] = op.finish(acc);
    }
}

/* Kept and reduced axes (size-1 axes dropped, neighbours of one kind merged) with their
 * strides in the input, in row-major order. */
struct red_geom {
    int nk, nr;
    int64_t kd[OX_MAX_RANK], ks[OX_MAX_RANK], rd[OX_MAX_RANK], rs[OX_MAX_RANK];
    int64_t n_out, n_red;
};

/* A thread per output: its kept coordinates give the base offset, an odometer walks the
 * reduced ones. */
template <typename Op>
__global__ void k_red_generic(const typename Op::In *x, typename Op::Out *y, red_geom g, Op op) {
    for (int64_t o = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; o < g.n_out;
         o += (int64_t)gridDim.x * blockDim.x) {
        int64_t rem = o, off = 0;
        for (int d = g.nk - 1; d >= 0; d--) {
            off += (rem % g.kd[d]) * g.ks[d];
            rem /= g.kd[d];
        }
        int64_t idx[OX_MAX_RANK];
        for (int d = 0; d < g.nr; d++) idx[d] = 0;
        typename Op::A acc = op.init();
        for (int64_t j = 0; j < g.n_red; j++) {
            acc = op.combine(acc, op.pre(x[off], j));
            for (int d = g.nr - 1; d >= 0; d--) {
                off += g.rs[d];
                if (++idx[d] < g.rd[d]) break;
                off -= g.rs[d] * g.rd[d];
                idx[d] = 0;
            }
        }
        y[o] = op.finish(acc);
    }
}

/* ---- launch shapes ------------------------------------------------------------------- */

static unsigned grid_of(int64_t blocks) {
    if (blocks < 1) blocks = 1;
    if (blocks > 65535 * 64) blocks = 65535 * 64;
    return (unsigned)blocks;
}

static int sms_of(const struct ox_cuda_ctx *c) {
    return c->n_sms > 0 ? c->n_sms : 132;
}

/* f(std::integral_constant<int, NV>()) for the least NV of 1, 2, 4, 8, 16 (up to MAX) that is
 * at least per_lane: the register-row kernels' instantiations. false when none is. */
template <int MAX, typename F> static bool with_per_lane(int64_t per_lane, F f) {
    using std::integral_constant;
    if (per_lane <= 1) return f(integral_constant<int, 1>()), true;
    if constexpr (MAX >= 2)
        if (per_lane <= 2) return f(integral_constant<int, 2>()), true;
    if constexpr (MAX >= 4)
        if (per_lane <= 4) return f(integral_constant<int, 4>()), true;
    if constexpr (MAX >= 8)
        if (per_lane <= 8) return f(integral_constant<int, 8>()), true;
    if constexpr (MAX >= 16)
        if (per_lane <= 16) return f(integral_constant<int, 16>()), true;
    return false;
}

/* Rows of up to this many elements go a warp each. */
#define WARP_ROW_MAX warp_row_max()

/* 512, or OX_CUDA_WARP_ROWS (a measurement knob: rows of 768, LayerNorm's in BERT-base, run
 * a block each by default). */
static int64_t warp_row_max(void) {
    static int64_t v = -1;
    if (v < 0) {
        const char *e = getenv("OX_CUDA_WARP_ROWS");
        long long x = e ? atoll(e) : 0;
        v = x >= 32 && x <= 65536 ? x : 512;
    }
    return v;
}

/* Threads per block for block-per-row kernels: more when the rows are long and too few to
 * fill the device. */
static unsigned row_block(int64_t rows, int64_t len, int n_sms) {
    return len >= 8192 && rows < 2 * (int64_t)n_sms ? 1024 : 256;
}

/* Rows of threads in a column block: 32 when the tiles are too few to fill the device. */
static unsigned col_rows(int64_t tiles, int n_sms) {
    return tiles < 2 * (int64_t)n_sms ? 32 : 8;
}

enum { LAYOUT_ROWS, LAYOUT_COLS, LAYOUT_GENERIC };

struct red_state {
    ox_dtype dtype;    /* of the input */
    int cls, post;     /* RC_*, RP_* */
    float div;         /* RP_MEAN's divisor */
    bool is_max, last; /* ArgMax/ArgMin */
    int layout;
    int64_t outer, n, inner; /* LAYOUT_ROWS (inner 1) and LAYOUT_COLS */
    red_geom g;              /* LAYOUT_GENERIC; g.n_out always */
};

template <typename Op>
static void launch_reduce(const red_state *s, int n_sms, cudaStream_t st, const void *x, void *y,
                          Op op) {
    const typename Op::In *xp = (const typename Op::In *)x;
    typename Op::Out *yp = (typename Op::Out *)y;
    if (s->layout == LAYOUT_ROWS) {
        if (s->n <= WARP_ROW_MAX)
            k_red_rows<true, Op>
                <<<grid_of((s->outer + 7) / 8), 256, 0, st>>>(xp, yp, s->outer, s->n, op);
        else
            k_red_rows<false, Op><<<grid_of(s->outer), row_block(s->outer, s->n, n_sms), 0, st>>>(
                xp, yp, s->outer, s->n, op);
    } else if (s->layout == LAYOUT_COLS) {
        int64_t tiles = s->outer * ((s->inner + 31) / 32);
        dim3 block(32, col_rows(tiles, n_sms));
        k_red_cols<Op><<<grid_of(tiles), block, 0, st>>>(xp, yp, s->outer, s->n, s->inner, op);
    } else {
        k_red_generic<Op><<<ox_cu_blocks(s->g.n_out), 256, 0, st>>>(xp, yp, s->g, op);
    }
}

template <typename T, int CLS>
static void launch_cls(const red_state *s, int n_sms, cudaStream_t st, const void *x, void *y) {
    red_op<T, CLS> op;
    op.post = s->post;
    op.div = s->div;
    launch_reduce(s, n_sms, st, x, y, op);
}

template <typename T>
static void launch_typed(const red_state *s, int n_sms, cudaStream_t st, const void *x, void *y) {
    switch (s->cls) {
    case RC_SUM: launch_cls<T, RC_SUM>(s, n_sms, st, x, y); break;
    case RC_SUMSQ: launch_cls<T, RC_SUMSQ>(s, n_sms, st, x, y); break;
    case RC_ABS: launch_cls<T, RC_ABS>(s, n_sms, st, x, y); break;
    case RC_PROD: launch_cls<T, RC_PROD>(s, n_sms, st, x, y); break;
    case RC_MAX: launch_cls<T, RC_MAX>(s, n_sms, st, x, y); break;
    case RC_MIN: launch_cls<T, RC_MIN>(s, n_sms, st, x, y); break;
    default:
        if constexpr (!is_int_type<T>::value) {
            if (s->cls == RC_MAXNN)
                launch_cls<T, RC_MAXNN>(s, n_sms, st, x, y);
            else
                launch_reduce(s, n_sms, st, x, y, lse_op<T>());
        }
        break;
    }
}

void ox_cu_red_release(void *state) {
    free(state);
}

/* ---- Reduce* ------------------------------------------------------------------------- */

static bool is_int_dtype(ox_dtype dt) {
    return dt == OX_INT32 || dt == OX_INT64;
}

/* Sets the layout of s from the reduced axes of x: rows or columns when the reduced axes
 * (size-1 axes aside) form one block, else the generic walk. */
static void red_layout(const ox_tensor *x, const bool *reduced, red_state *s) {
    int64_t size[OX_MAX_RANK];
    bool red[OX_MAX_RANK];
    int ng = 0;
    for (int d = 0; d < x->rank; d++) {
        if (x->dims[d] == 1) continue;
        if (ng && red[ng - 1] == reduced[d]) {
            size[ng - 1] *= x->dims[d];
        } else {
            size[ng] = x->dims[d];
            red[ng++] = reduced[d];
        }
    }
    red_geom *g = &s->g;
    int64_t stride[OX_MAX_RANK], st = 1;
    for (int q = ng - 1; q >= 0; q--) {
        stride[q] = st;
        st *= size[q];
    }
    g->nk = g->nr = 0;
    g->n_out = g->n_red = 1;
    for (int q = 0; q < ng; q++) {
        if (red[q]) {
            g->rd[g->nr] = size[q];
            g->rs[g->nr++] = stride[q];
            g->n_red *= size[q];
        } else {
            g->kd[g->nk] = size[q];
            g->ks[g->nk++] = stride[q];
            g->n_out *= size[q];
        }
    }
    if (g->nr > 1) {
        s->layout = LAYOUT_GENERIC;
        return;
    }
    s->outer = s->inner = 1;
    s->n = g->n_red;
    bool seen = false;
    for (int q = 0; q < ng; q++) {
        if (red[q])
            seen = true;
        else if (seen)
            s->inner *= size[q];
        else
            s->outer *= size[q];
    }
    s->layout = s->inner == 1 ? LAYOUT_ROWS : LAYOUT_COLS;
}

ox_status ox_cu_red_prepare_reduce(struct ox_cuda_ctx *c, const struct ox_node *n,
                                   const ox_tensor *const *in, ox_tensor *const *out,
                                   unsigned const_inputs, void **state, size_t *workspace) {
    (void)c;
    (void)workspace;
    static const struct {
        const char *type;
        int cls, post;
    } kinds[] = {
        {"ReduceSum", RC_SUM, RP_NONE},       {"ReduceMean", RC_SUM, RP_MEAN},
        {"ReduceMax", RC_MAX, RP_NONE},       {"ReduceMin", RC_MIN, RP_NONE},
        {"ReduceProd", RC_PROD, RP_NONE},     {"ReduceL1", RC_ABS, RP_NONE},
        {"ReduceL2", RC_SUMSQ, RP_SQRT},      {"ReduceLogSum", RC_SUM, RP_LOG},
        {"ReduceLogSumExp", RC_LSE, RP_NONE}, {"ReduceSumSquare", RC_SUMSQ, RP_NONE},
    };
    int k = -1;
    for (int i = 0; i < (int)(sizeof kinds / sizeof kinds[0]); i++)
        if (strcmp(n->op_type, kinds[i].type) == 0) k = i;
    if (k < 0) return OX_E_UNSUPPORTED;
    int cls = kinds[k].cls, post = kinds[k].post;
    const ox_tensor *x = ox_in(n, in, 0);
    if (!x || !out[0] || out[0]->dtype != x->dtype) return OX_E_UNSUPPORTED;
    /* integers: the CPU's exact int64 loop (sums, products, extrema); the rest go there */
    if (!ox_cu_is_float(x->dtype) && !(is_int_dtype(x->dtype) && post == RP_NONE && cls != RC_LSE))
        return OX_E_UNSUPPORTED;

    /* axes: an attribute before opset 13 (ReduceSum) / 18 (the others), then an input */
    int64_t axes[64];
    int64_t n_axes = 0;
    bool noop = false;
    int axes_input_opset = strcmp(n->op_type, "ReduceSum") == 0 ? 13 : 18;
    if (n->opset >= axes_input_opset) {
        const ox_tensor *a = ox_in(n, in, 1);
        int64_t na = a ? ox_tensor_numel(a) : 0;
        if (na > 0) {
            if (!(const_inputs & (1u << 1)) || na > 64 || !a->data) return OX_E_UNSUPPORTED;
            if (a->dtype == OX_INT64) {
                ox_status st = ox_cu_check(
                    cudaMemcpy(axes, a->data, (size_t)na * sizeof(int64_t), cudaMemcpyDeviceToHost),
                    "reading Reduce axes");
                if (st) return st;
            } else if (a->dtype == OX_INT32) {
                int32_t a32[64];
                ox_status st = ox_cu_check(
                    cudaMemcpy(a32, a->data, (size_t)na * sizeof(int32_t), cudaMemcpyDeviceToHost),
                    "reading Reduce axes");
                if (st) return st;
                for (int64_t i = 0; i < na; i++) axes[i] = a32[i];
            } else {
                return OX_E_UNSUPPORTED;
            }
            n_axes = na;
        }
        noop = ox_attr_int(n, "noop_with_empty_axes", 0) != 0;
    } else {
        const int64_t *av;
        int na = ox_attr_ints(n, "axes", &av);
        if (na > 64) return OX_E_UNSUPPORTED;
        for (int i = 0; i < na; i++) axes[i] = av[i];
        n_axes = na > 0 ? na : 0;
    }
    bool reduced[OX_MAX_RANK];
    for (int d = 0; d < x->rank; d++) reduced[d] = n_axes == 0 && !noop;
    for (int64_t i = 0; i < n_axes; i++) {
        int64_t a = axes[i];
        if (x->rank == 0 && (a == 0 || a == -1)) continue;
        if (a < 0) a += x->rank;
        if (a < 0 || a >= x->rank) return OX_E_UNSUPPORTED;
        reduced[a] = true;
    }

    red_state *s = (red_state *)calloc(1, sizeof *s);
    if (!s) return ox_node_err(n, OX_E_NOMEM, "CUDA reduce state");
    s->dtype = x->dtype;
    s->cls = cls;
    s->post = post;
    red_layout(x, reduced, s);
    s->div = (float)s->g.n_red;
    if (ox_tensor_numel(out[0]) != s->g.n_out) {
        free(s);
        return OX_E_UNSUPPORTED;
    }
    *state = s;
    return OX_OK;
}

ox_status ox_cu_red_reduce(struct ox_cuda_ctx *c, const struct ox_node *n,
                           const ox_tensor *const *in, ox_tensor *const *out) {
    const red_state *s = (const red_state *)c->state;
    if (s->g.n_out == 0) return OX_OK;
    int sms = sms_of(c);
    const void *x = in[0]->data;
    void *y = out[0]->data;
    switch (s->dtype) {
    case OX_FLOAT: launch_typed<float>(s, sms, c->stream, x, y); break;
    case OX_FLOAT16: launch_typed<__half>(s, sms, c->stream, x, y); break;
    case OX_BFLOAT16: launch_typed<__nv_bfloat16>(s, sms, c->stream, x, y); break;
    case OX_INT32: launch_typed<int32_t>(s, sms, c->stream, x, y); break;
    case OX_INT64: launch_typed<int64_t>(s, sms, c->stream, x, y); break;
    default: return ox_node_err(n, OX_E_INTERNAL, "CUDA reduce: element type %d", (int)s->dtype);
    }
    return ox_cu_launched(n->op_type);
}

/* ---- GlobalAveragePool, GlobalMaxPool ------------------------------------------------ */

/* N x C x spatial... -> a row of the spatial size per (n, c): the mean (of an empty row: 0,
 * as the CPU divides by max(S, 1)) or the max skipping NaN (empty: -inf). Run by
 * ox_cu_red_reduce. */
ox_status ox_cu_red_prepare_global_pool(struct ox_cuda_ctx *c, const struct ox_node *n,
                                        const ox_tensor *const *in, ox_tensor *const *out,
                                        unsigned const_inputs, void **state, size_t *workspace) {
    (void)c;
    (void)const_inputs;
    (void)workspace;
    const ox_tensor *x = ox_in(n, in, 0);
    if (!x || x->rank < 3 || !ox_cu_is_float(x->dtype) || !out[0] || out[0]->dtype != x->dtype)
        return OX_E_UNSUPPORTED;
    bool is_avg = strcmp(n->op_type, "GlobalAveragePool") == 0;
    if (!is_avg && strcmp(n->op_type, "GlobalMaxPool") != 0) return OX_E_UNSUPPORTED;
    int64_t S = 1;
    for (int d = 2; d < x->rank; d++) S *= x->dims[d];
    red_state *s = (red_state *)calloc(1, sizeof *s);
    if (!s) return ox_node_err(n, OX_E_NOMEM, "CUDA global pool state");
    s->dtype = x->dtype;
    s->cls = is_avg ? RC_SUM : RC_MAXNN;
    s->post = is_avg ? RP_MEAN : RP_NONE;
    s->div = (float)(S ? S : 1);
    s->layout = LAYOUT_ROWS;
    s->outer = x->dims[0] * x->dims[1];
    s->n = S;
    s->inner = 1;
    s->g.n_out = s->outer;
    if (ox_tensor_numel(out[0]) != s->g.n_out) {
        free(s);
        return OX_E_UNSUPPORTED;
    }
    *state = s;
    return OX_OK;
}

/* ---- ArgMax, ArgMin ------------------------------------------------------------------ */

ox_status ox_cu_red_prepare_arg(struct ox_cuda_ctx *c, const struct ox_node *n,
                                const ox_tensor *const *in, ox_tensor *const *out,
                                unsigned const_inputs, void **state, size_t *workspace) {
    (void)c;
    (void)const_inputs;
    (void)workspace;
    const ox_tensor *x = ox_in(n, in, 0);
    if (!x || x->rank == 0 || !(ox_cu_is_float(x->dtype) || is_int_dtype(x->dtype)) || !out[0] ||
        out[0]->dtype != OX_INT64)
        return OX_E_UNSUPPORTED;
    int64_t axis = ox_attr_int(n, "axis", 0);
    if (axis < 0) axis += x->rank;
    if (axis < 0 || axis >= x->rank || x->dims[axis] == 0) return OX_E_UNSUPPORTED;
    red_state *s = (red_state *)calloc(1, sizeof *s);
    if (!s) return ox_node_err(n, OX_E_NOMEM, "CUDA arg state");
    s->dtype = x->dtype;
    s->is_max = strcmp(n->op_type, "ArgMax") == 0;
    s->last = n->opset >= 12 && ox_attr_int(n, "select_last_index", 0) != 0;
    s->outer = s->inner = 1;
    for (int d = 0; d < axis; d++) s->outer *= x->dims[d];
    for (int d = (int)axis + 1; d < x->rank; d++) s->inner *= x->dims[d];
    s->n = x->dims[axis];
    s->layout = s->inner == 1 ? LAYOUT_ROWS : LAYOUT_COLS;
    s->g.n_out = s->outer * s->inner;
    if (ox_tensor_numel(out[0]) != s->g.n_out) {
        free(s);
        return OX_E_UNSUPPORTED;
    }
    *state = s;
    return OX_OK;
}

template <typename T>
static void launch_arg(const red_state *s, int n_sms, cudaStream_t st, const void *x, void *y) {
    arg_op<T> op;
    op.is_max = s->is_max;
    op.last = s->last;
    launch_reduce(s, n_sms, st, x, y, op);
}

ox_status ox_cu_red_arg(struct ox_cuda_ctx *c, const struct ox_node *n, const ox_tensor *const *in,
                        ox_tensor *const *out) {
    const red_state *s = (const red_state *)c->state;
    if (s->g.n_out == 0) return OX_OK;
    int sms = sms_of(c);
    const void *x = in[0]->data;
    void *y = out[0]->data;
    switch (s->dtype) {
    case OX_FLOAT: launch_arg<float>(s, sms, c->stream, x, y); break;
    case OX_FLOAT16: launch_arg<__half>(s, sms, c->stream, x, y); break;
    case OX_BFLOAT16: launch_arg<__nv_bfloat16>(s, sms, c->stream, x, y); break;
    case OX_INT32: launch_arg<int32_t>(s, sms, c->stream, x, y); break;
    case OX_INT64: launch_arg<int64_t>(s, sms, c->stream, x, y); break;
    default: return ox_node_err(n, OX_E_INTERNAL, "CUDA arg: element type %d", (int)s->dtype);
    }
    return ox_cu_launched(n->op_type);
}

/* ---- Softmax, LogSoftmax ------------------------------------------------------------- */

/* Rows of n contiguous elements: max, sum of exp(x - max), then the row written. */
template <bool WARP, typename T, bool LOG>
__global__ void __launch_bounds__(1024) k_softmax_rows(const T *x, T *y, int64_t rows, int64_t n) {
    using G = group<WARP>;
    for (int64_t r = G::first(); r < rows; r += G::step()) {
        const T *p = x + r * n;
        T *q = y + r * n;
        float m = -INFINITY;
        for (int64_t j = G::lane(); j < n; j += G::size()) m = fmaxf(m, ox_cu_to_f(p[j]));
        m = G::allreduce(m, max_f());
        float s = 0.0f;
        for (int64_t j = G::lane(); j < n; j += G::size()) s += expf(ox_cu_to_f(p[j]) - m);
        s = G::allreduce(s, sum_f());
        if (LOG) {
            float ls = logf(s);
            for (int64_t j = G::lane(); j < n; j += G::size())
                q[j] = ox_cu_from_f<T>(ox_cu_to_f(p[j]) - m - ls);
        } else {
            float inv = 1.0f / s;
            for (int64_t j = G::lane(); j < n; j += G::size())
                q[j] = ox_cu_from_f<T>(expf(ox_cu_to_f(p[j]) - m) * inv);
        }
    }
}

/* The same along a strided axis: x[(o * n + j) * inner + i], tiles of 32 i as k_red_cols. */
template <typename T, bool LOG>
__global__ void __launch_bounds__(1024)
    k_softmax_cols(const T *x, T *y, int64_t outer, int64_t n, int64_t inner) {
    int64_t tiles_row = (inner + 31) / 32, tiles = outer * tiles_row;
    for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
        int64_t o = t / tiles_row, i = (t % tiles_row) * 32 + threadIdx.x;
        bool valid = i < inner;
        int64_t base = o * n * inner + i;
        float m = -INFINITY;
        if (valid)
            for (int64_t j = threadIdx.y; j < n; j += blockDim.y)
                m = fmaxf(m, ox_cu_to_f(x[base + j * inner]));
        m = col_allreduce(m, max_f());
        float s = 0.0f;
        if (valid)
            for (int64_t j = threadIdx.y; j < n; j += blockDim.y)
                s += expf(ox_cu_to_f(x[base + j * inner]) - m);
        s = col_allreduce(s, sum_f());
        if (valid) {
            float ls = logf(s), inv = 1.0f / s;
            for (int64_t j = threadIdx.y; j < n; j += blockDim.y) {
                float v = ox_cu_to_f(x[base + j * inner]) - m;
                y[base + j * inner] = ox_cu_from_f<T>(LOG ? v - ls : expf(v) * inv);
            }
        }
    }
}

struct softmax_state {
    ox_dtype dtype;
    bool log;
    int64_t outer, n, inner;
};

/* Before opset 13 the input is coerced to 2-D at `axis` (default 1), so the row is all of
 * the trailing dims; from 13 the op runs along `axis` (default -1) alone. */
ox_status ox_cu_red_prepare_softmax(struct ox_cuda_ctx *c, const struct ox_node *n,
                                    const ox_tensor *const *in, ox_tensor *const *out,
                                    unsigned const_inputs, void **state, size_t *workspace) {
    (void)c;
    (void)const_inputs;
    (void)workspace;
    const ox_tensor *x = ox_in(n, in, 0);
    if (!x || !ox_cu_is_float(x->dtype) || !out[0] || out[0]->dtype != x->dtype)
        return OX_E_UNSUPPORTED;
    bool is_log = strcmp(n->op_type, "LogSoftmax") == 0;
    if (!is_log && strcmp(n->op_type, "Softmax") != 0) return OX_E_UNSUPPORTED;
    bool legacy = n->opset < 13;
    int64_t outer = 1, len = 1, inner = 1;
    if (x->rank > 0) {
        int64_t axis = ox_attr_int(n, "axis", legacy ? 1 : -1);
        if (axis < 0) axis += x->rank;
        if (axis < 0 || axis >= x->rank) return OX_E_UNSUPPORTED;
        for (int d = 0; d < x->rank; d++) {
            if (d < axis)
                outer *= x->dims[d];
            else if (legacy || d == axis)
                len *= x->dims[d];
            else
                inner *= x->dims[d];
        }
    }
    softmax_state *s = (softmax_state *)calloc(1, sizeof *s);
    if (!s) return ox_node_err(n, OX_E_NOMEM, "CUDA softmax state");
    s->dtype = x->dtype;
    s->log = is_log;
    s->outer = outer;
    s->n = len;
    s->inner = inner;
    *state = s;
    return OX_OK;
}

template <typename T, bool LOG>
static void launch_softmax(const softmax_state *s, int n_sms, cudaStream_t st, const void *x,
                           void *y) {
    const T *xp = (const T *)x;
    T *yp = (T *)y;
    if (s->inner == 1) {
        if (s->n <= WARP_ROW_MAX)
            k_softmax_rows<true, T, LOG>
                <<<grid_of((s->outer + 7) / 8), 256, 0, st>>>(xp, yp, s->outer, s->n);
        else
            k_softmax_rows<false, T, LOG>
                <<<grid_of(s->outer), row_block(s->outer, s->n, n_sms), 0, st>>>(xp, yp, s->outer,
                                                                                 s->n);
    } else {
        int64_t tiles = s->outer * ((s->inner + 31) / 32);
        dim3 block(32, col_rows(tiles, n_sms));
        k_softmax_cols<T, LOG><<<grid_of(tiles), block, 0, st>>>(xp, yp, s->outer, s->n, s->inner);
    }
}

ox_status ox_cu_red_softmax(struct ox_cuda_ctx *c, const struct ox_node *n,
                            const ox_tensor *const *in, ox_tensor *const *out) {
    const softmax_state *s = (const softmax_state *)c->state;
    if (s->outer * s->n * s->inner == 0) return OX_OK;
    int sms = sms_of(c);
    const void *x = in[0]->data;
    void *y = out[0]->data;
    if (s->dtype == OX_FLOAT) {
        if (s->log)
            launch_softmax<float, true>(s, sms, c->stream, x, y);
        else
            launch_softmax<float, false>(s, sms, c->stream, x, y);
    } else if (s->dtype == OX_FLOAT16) {
        if (s->log)
            launch_softmax<__half, true>(s, sms, c->stream, x, y);
        else
            launch_softmax<__half, false>(s, sms, c->stream, x, y);
    } else {
        if (s->log)
            launch_softmax<__nv_bfloat16, true>(s, sms, c->stream, x, y);
        else
            launch_softmax<__nv_bfloat16, false>(s, sms, c->stream, x, y);
    }
    return ox_cu_launched(n->op_type);
}

/* ---- FusedAttention (ai.onnxexec; kernels/op.h) ---------------------------------------- */

/* Three steps per run, every batch item at once:
 * 1. scores = alpha Q . KT: one cublasGemmBatchedEx over pointer arrays, reading Q and KT in
 *    place through the views kernels/attn_plan.c describes (the CPU kernel runs the same
 *    descriptions through cblas), the scores [batch, S, T] in the workspace, in the element
 *    type (float16 and bfloat16 scores are rounded there, as the unfused graph's MatMul
 *    rounds them);
 * 2. per row: + mask, softmax along T (float arithmetic), written in place;
 * 3. Y = P . V: a second batched call writing Y in place through its view.
 * The pointer arrays are filled on the device at each run (a small kernel from the element
 * offsets prepare computed), since the workspace's address is known only then. Views BLAS
 * cannot address, double, empty products and factors that are not constant go to the CPU.
 * OX_CUDA_ATTENTION=0 sends every FusedAttention there (for A/B checks).
 *
 * Small products (FA_SMALL_MACS multiply-adds at most, keys up to FA_TMAX, Dk up to
 * FA_DKMAX: BERT-base at batch 1, where the four launches and cuBLAS's batched set-up cost
 * more than the work) run instead as one kernel, k_fattn_small: a block per FA_ROWS query
 * rows of an item, the rows of Q and their scores in shared memory, the same roundings to the
 * element type as the three steps. OX_CUDA_ATTENTION=gemm|small|tc forces one way (A/B). */
#define FA_ROWS       8
#define FA_TMAX       512
#define FA_DKMAX      256
#define FA_SMALL_MACS ((int64_t)1 << 26)

/* The matrices' strides (elements; K is KT, [Dk, T]) and sizes for k_fattn_small. */
struct fa_geom {
    int S, T, Dk, Dv;
    int64_t qrs, qcs, krs, kcs, vrs, vcs, yrs, ycs, mrs, mcs;
    int64_t batch;
    float alpha;
};

/* float16 products too large for k_fattn_small (keys up to TC_TMAX, Dk and Dv up to TC_DMAX:
 * BERT-base at batch 8 and more) run as k_fattn_tc: a block per TC_QROWS query rows of an
 * item, its Q rows, K and V in shared memory (zero-padded to multiples of 16), both products
 * on tensor cores (WMMA 16x16x16, float accumulation), the scores and then P (float16, over
 * the same rows) in shared memory: one kernel instead of a pointer kernel, two pointer-array
 * GEMMs and a softmax pass, with the same roundings. */
#define TC_QROWS 64 /* 4 warps of 16 rows */
#define TC_TMAX  256
#define TC_DMAX  128
#define TC_SMEM  (200 << 10)

/* Shared memory of k_fattn_tc (byte offsets; every WMMA tile starts 32-byte aligned): Q
 * [TC_QROWS][ldq], K [Tp][ldk] (KT's columns as rows), V [Tp][ldv] in float16, the scores
 * [TC_QROWS][lds] in float (P in float16 over each row's first bytes), a 16x16 float staging
 * tile per warp. */
struct tc_layout {
    int Tp, Dkp, Dvp, ldq, ldk, ldv, lds;
    size_t q, k, v, s, o, bytes;
};

static tc_layout tc_layout_of(int64_t T, int64_t Dk, int64_t Dv) {
    tc_layout l;
    l.Tp = (int)((T + 15) / 16 * 16), l.Dkp = (int)((Dk + 15) / 16 * 16);
    l.Dvp = (int)((Dv + 15) / 16 * 16);
    l.ldq = l.ldk = l.Dkp + 8, l.ldv = l.Dvp + 8, l.lds = l.Tp + 4;
    size_t off = 0;
    l.q = off, off += (size_t)TC_QROWS * l.ldq * 2;
    l.k = off, off += (size_t)l.Tp * l.ldk * 2;
    l.v = off, off += (size_t)l.Tp * l.ldv * 2;
    off = (off + 127) / 128 * 128;
    l.s = off, off += (size_t)TC_QROWS * l.lds * 4;
    l.o = off, off += (size_t)(TC_QROWS / 16) * 256 * 4;
    l.bytes = off;
    return l;
}

struct fattn_state {
    ox_dtype dtype;
    int64_t S, T, batch;
    float alpha;
    struct ox_gemm_desc g1, g2;
    bool has_mask;
    int64_t mrs, mcs;
    int64_t *offs;       /* device: OX_FATTN_N arrays of `batch` element offsets */
    size_t scores_bytes; /* workspace: the scores, then 6 arrays of `batch` pointers */
    bool small;          /* k_fattn_small (no workspace used) */
    bool tc;             /* k_fattn_tc (no workspace used) */
    fa_geom fg;          /* small, tc */
    tc_layout tl;        /* tc */
};

/* Query tile blk of the one-kernel ways (rows query rows of an item, tiles of them an
 * item): its operands (rows of Q, Y and the mask from the tile's first), and its row count. */
template <typename T> struct fa_tile {
    const T *q, *k, *v, *m;
    T *y;
    int nr;
};

template <typename T>
static __device__ __forceinline__ fa_tile<T>
fa_tile_of(const fa_geom &g, const int64_t *offs, int64_t blk, int tiles, int rows, const T *q,
           const T *k, const T *v, const T *mask, T *y) {
    const int64_t item = blk / tiles;
    const int r0 = (int)(blk - item * tiles) * rows;
    fa_tile<T> t;
    t.nr = g.S - r0 < rows ? g.S - r0 : rows;
    t.q = q + offs[OX_FATTN_Q * g.batch + item] + (int64_t)r0 * g.qrs;
    t.k = k + offs[OX_FATTN_K * g.batch + item];
    t.v = v + offs[OX_FATTN_V * g.batch + item];
    t.y = y + offs[OX_FATTN_Y * g.batch + item] + (int64_t)r0 * g.yrs;
    t.m = mask ? mask + offs[OX_FATTN_MASK * g.batch + item] + (int64_t)r0 * g.mrs : NULL;
    return t;
}

/* FusedAttention for one tile of FA_ROWS query rows of an item per block iteration: scores
 * s = round(alpha q . k) (+ mask, rounded) for every key, softmax per row (float, rounded),
 * then y = sum_j p_j v_j rounded, as steps 1-3 compute it. blockDim.x = 256. */
template <typename T>
__global__ void __launch_bounds__(256)
    k_fattn_small(const T *q, const T *k, const T *v, const T *mask, T *y, const int64_t *offs,
                  fa_geom g) {
    __shared__ float qs[FA_ROWS][FA_DKMAX];
    __shared__ float ps[FA_ROWS][FA_TMAX];
    const int tiles = (g.S + FA_ROWS - 1) / FA_ROWS;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    for (int64_t blk = blockIdx.x; blk < g.batch * tiles; blk += gridDim.x) {
        const fa_tile<T> tile = fa_tile_of(g, offs, blk, tiles, FA_ROWS, q, k, v, mask, y);
        const T *qp = tile.q, *kp = tile.k, *vp = tile.v, *mp = tile.m;
        T *yp = tile.y;
        const int nr = tile.nr;
        __syncthreads(); /* the previous tile's reads of qs and ps are done */
        for (int i = threadIdx.x; i < FA_ROWS * g.Dk; i += blockDim.x) {
            int r = i / g.Dk, d = i - r * g.Dk;
            qs[r][d] = r < nr ? ox_cu_to_f(qp[r * g.qrs + d * g.qcs]) : 0.0f;
        }
        __syncthreads();
        for (int j = threadIdx.x; j < g.T; j += blockDim.x) {
            float acc[FA_ROWS];
#pragma unroll
            for (int r = 0; r < FA_ROWS; r++) acc[r] = 0.0f;
            for (int d = 0; d < g.Dk; d++) {
                float kv = ox_cu_to_f(kp[d * g.krs + j * g.kcs]);
#pragma unroll
                for (int r = 0; r < FA_ROWS; r++) acc[r] += qs[r][d] * kv;
            }
#pragma unroll
            for (int r = 0; r < FA_ROWS; r++) {
                float sv = round_as<T>(g.alpha * acc[r]);
                if (mp && r < nr) sv = round_as<T>(sv + ox_cu_to_f(mp[r * g.mrs + j * g.mcs]));
                ps[r][j] = sv;
            }
        }
        __syncthreads();
        for (int r = warp; r < nr; r += warps) {
            float m = -INFINITY;
            for (int j = lane; j < g.T; j += 32) m = fmaxf(m, ps[r][j]);
            m = warp_allreduce(m, max_f());
            float sum = 0.0f;
            for (int j = lane; j < g.T; j += 32) {
                float e = expf(ps[r][j] - m);
                ps[r][j] = e;
                sum += e;
            }
            sum = warp_allreduce(sum, sum_f());
            float inv = 1.0f / sum;
            for (int j = lane; j < g.T; j += 32) ps[r][j] = round_as<T>(ps[r][j] * inv);
        }
        __syncthreads();
        for (int i = threadIdx.x; i < g.Dv * (FA_ROWS / 4); i += blockDim.x) {
            int c = i % g.Dv, rg = (i / g.Dv) * 4;
            float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            for (int j = 0; j < g.T; j++) {
                float vv = ox_cu_to_f(vp[j * g.vrs + c * g.vcs]);
#pragma unroll
                for (int r = 0; r < 4; r++) acc[r] += ps[rg + r][j] * vv;
            }
#pragma unroll
            for (int r = 0; r < 4; r++)
                if (rg + r < nr) yp[(rg + r) * g.yrs + c * g.ycs] = ox_cu_from_f<T>(acc[r]);
        }
    }
}

typedef nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> tc_frag;

/* acc = A . B over k steps of 16: A's 16 rows row-major at a (lda; step k at a + 16k), B's
 * 16x16 tiles of layout BL at b + k * bstep (ldb); float16 in, float sums (tensor cores). */
template <typename BL>
static __device__ __forceinline__ void tc_dot(tc_frag &acc, const __half *a, int lda,
                                              const __half *b, int ldb, int bstep, int steps) {
    using namespace nvcuda;
    wmma::fill_fragment(acc, 0.0f);
    for (int kk = 0; kk < steps; kk++) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, BL> fb;
        wmma::load_matrix_sync(fa, a + kk * 16, lda);
        wmma::load_matrix_sync(fb, b + kk * bstep, ldb);
        wmma::mma_sync(acc, fa, fb, acc);
    }
}

__global__ void __launch_bounds__(128)
    k_fattn_tc(const __half *q, const __half *k, const __half *v, const __half *mask, __half *y,
               const int64_t *offs, fa_geom g, tc_layout l) {
    using namespace nvcuda;
    extern __shared__ __align__(128) unsigned char smem[];
    __half *Qs = (__half *)(smem + l.q), *Ks = (__half *)(smem + l.k), *Vs = (__half *)(smem + l.v);
    float *Sf = (float *)(smem + l.s), *Os = (float *)(smem + l.o) + (threadIdx.x >> 5) * 256;
    __half *Ph = (__half *)Sf;
    const int ldp = 2 * l.lds; /* P's row stride in halves: row r within scores row r */
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int tiles = (g.S + TC_QROWS - 1) / TC_QROWS;
    const __half zero = __float2half(0.0f);
    for (int64_t blk = blockIdx.x; blk < g.batch * tiles; blk += gridDim.x) {
        const fa_tile<__half> tile = fa_tile_of(g, offs, blk, tiles, TC_QROWS, q, k, v, mask, y);
        const __half *qp = tile.q, *kp = tile.k, *vp = tile.v, *mp = tile.m;
        __half *yp = tile.y;
        const int nr = tile.nr;
        __syncthreads(); /* the previous tile is done with the shared memory */
        for (int i = tid; i < TC_QROWS * l.Dkp; i += blockDim.x) {
            int r = i / l.Dkp, d = i - r * l.Dkp;
            Qs[r * l.ldq + d] = r < nr && d < g.Dk ? qp[r * g.qrs + d * g.qcs] : zero;
        }
        for (int i = tid; i < l.Tp * l.Dkp; i += blockDim.x) {
            int j = i / l.Dkp, d = i - j * l.Dkp;
            Ks[j * l.ldk + d] = j < g.T && d < g.Dk ? kp[d * g.krs + j * g.kcs] : zero;
        }
        for (int i = tid; i < l.Tp * l.Dvp; i += blockDim.x) {
            int j = i / l.Dvp, c = i - j * l.Dvp;
            Vs[j * l.ldv + c] = j < g.T && c < g.Dv ? vp[j * g.vrs + c * g.vcs] : zero;
        }
        __syncthreads();
        /* this warp's 16 rows of Q . KT */
        for (int jt = 0; jt < l.Tp / 16; jt++) {
            tc_frag acc;
            tc_dot<wmma::col_major>(acc, Qs + warp * 16 * l.ldq, l.ldq, Ks + jt * 16 * l.ldk, l.ldk,
                                    16, l.Dkp / 16);
            wmma::store_matrix_sync(Sf + warp * 16 * l.lds + jt * 16, acc, l.lds,
                                    wmma::mem_row_major);
        }
        __syncwarp();
        /* per row: round(alpha s) (+ mask, rounded), softmax, P rounded, over the row */
        for (int rr = 0; rr < 16; rr++) {
            const int row = warp * 16 + rr;
            float vals[TC_TMAX / 32];
            float m = -INFINITY;
#pragma unroll
            for (int t = 0; t < TC_TMAX / 32; t++) {
                int j = lane + 32 * t;
                vals[t] = -INFINITY;
                if (j < g.T) {
                    float sv = round_as<__half>(g.alpha * Sf[row * l.lds + j]);
                    if (mp && row < nr)
                        sv = round_as<__half>(sv + ox_cu_to_f(mp[row * g.mrs + j * g.mcs]));
                    vals[t] = sv;
                    m = fmaxf(m, sv);
                }
            }
            m = warp_allreduce(m, max_f());
            float sum = 0.0f;
#pragma unroll
            for (int t = 0; t < TC_TMAX / 32; t++)
                if (lane + 32 * t < g.T) {
                    vals[t] = expf(vals[t] - m);
                    sum += vals[t];
                }
            sum = warp_allreduce(sum, sum_f());
            float inv = 1.0f / sum;
            __syncwarp(); /* the row's scores are all read before P overwrites them */
#pragma unroll
            for (int t = 0; t < TC_TMAX / 32; t++) {
                int j = lane + 32 * t;
                if (j < l.Tp)
                    Ph[row * ldp + j] = j < g.T ? ox_cu_from_f<__half>(vals[t] * inv) : zero;
            }
            __syncwarp();
        }
        /* this warp's 16 rows of P . V, a 16-column tile at a time through the staging tile */
        for (int ct = 0; ct < l.Dvp / 16; ct++) {
            tc_frag acc;
            tc_dot<wmma::row_major>(acc, Ph + warp * 16 * ldp, ldp, Vs + ct * 16, l.ldv, 16 * l.ldv,
                                    l.Tp / 16);
            wmma::store_matrix_sync(Os, acc, 16, wmma::mem_row_major);
            __syncwarp();
            for (int e = lane; e < 256; e += 32) {
                int row = warp * 16 + e / 16, col = ct * 16 + (e & 15);
                if (row < nr && col < g.Dv)
                    yp[row * g.yrs + col * g.ycs] = ox_cu_from_f<__half>(Os[e]);
            }
            __syncwarp();
        }
    }
}

/* ptr[0..5][i]: g1's first and second operands, the scores, g2's first and second, Y. */
__global__ void k_fattn_ptrs(const int64_t *offs, int64_t batch, const char *q, const char *k,
                             const char *v, char *y, char *scores, int64_t st, int es, bool swap1,
                             bool swap2, void **ptr) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < batch;
         i += (int64_t)gridDim.x * blockDim.x) {
        const char *qp = q + offs[OX_FATTN_Q * batch + i] * es;
        const char *kp = k + offs[OX_FATTN_K * batch + i] * es;
        const char *vp = v + offs[OX_FATTN_V * batch + i] * es;
        char *sp = scores + i * st * es;
        ptr[0 * batch + i] = (void *)(swap1 ? kp : qp);
        ptr[1 * batch + i] = (void *)(swap1 ? qp : kp);
        ptr[2 * batch + i] = sp;
        ptr[3 * batch + i] = (void *)(swap2 ? vp : sp);
        ptr[4 * batch + i] = (void *)(swap2 ? sp : vp);
        ptr[5 * batch + i] = y + offs[OX_FATTN_Y * batch + i] * es;
    }
}

/* Row r = (item i, query s) of x [batch * S, T]: x + mask, softmax, in place. */
template <bool WARP, typename T>
__global__ void __launch_bounds__(1024)
    k_fattn_softmax(T *x, int64_t rows, int64_t S, int64_t T_len, const T *mask,
                    const int64_t *moff, int64_t mrs, int64_t mcs) {
    using G = group<WARP>;
    for (int64_t r = G::first(); r < rows; r += G::step()) {
        T *p = x + r * T_len;
        const T *mr = mask ? mask + moff[r / S] + (r % S) * mrs : NULL;
        float m = -INFINITY;
        for (int64_t j = G::lane(); j < T_len; j += G::size()) {
            float v = ox_cu_to_f(p[j]);
            if (mr) {
                v += ox_cu_to_f(mr[j * mcs]);
                v = round_as<T>(v); /* as Add rounds */
                p[j] = ox_cu_from_f<T>(v);
            }
            m = fmaxf(m, v);
        }
        m = G::allreduce(m, max_f());
        float sum = 0.0f;
        for (int64_t j = G::lane(); j < T_len; j += G::size()) sum += expf(ox_cu_to_f(p[j]) - m);
        sum = G::allreduce(sum, sum_f());
        float inv = 1.0f / sum;
        for (int64_t j = G::lane(); j < T_len; j += G::size())
            p[j] = ox_cu_from_f<T>(expf(ox_cu_to_f(p[j]) - m) * inv);
    }
}

/* k_fattn_softmax for rows of at most 32 * NV elements, a warp a row with the row in
 * registers: each score is read once and written once. */
template <typename T, int NV>
__global__ void __launch_bounds__(256)
    k_fattn_softmax_regs(T *x, int64_t rows, int64_t S, int T_len, const T *mask,
                         const int64_t *moff, int64_t mrs, int64_t mcs) {
    const int lane = threadIdx.x & 31;
    for (int64_t r = (int64_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); r < rows;
         r += (int64_t)gridDim.x * (blockDim.x >> 5)) {
        T *p = x + r * T_len;
        const T *mr = mask ? mask + moff[r / S] + (r % S) * mrs : NULL;
        float v[NV];
        float m = -INFINITY;
#pragma unroll
        for (int k = 0; k < NV; k++) {
            int j = lane + 32 * k;
            v[k] = -INFINITY;
            if (j < T_len) {
                float e = ox_cu_to_f(p[j]);
                if (mr) {
                    e += ox_cu_to_f(mr[j * mcs]);
                    e = round_as<T>(e); /* as Add rounds */
                }
                v[k] = e;
                m = fmaxf(m, e);
            }
        }
        m = warp_allreduce(m, max_f());
        float sum = 0.0f;
#pragma unroll
        for (int k = 0; k < NV; k++)
            if (lane + 32 * k < T_len) {
                v[k] = expf(v[k] - m);
                sum += v[k];
            }
        sum = warp_allreduce(sum, sum_f());
        float inv = 1.0f / sum;
#pragma unroll
        for (int k = 0; k < NV; k++)
            if (lane + 32 * k < T_len) p[lane + 32 * k] = ox_cu_from_f<T>(v[k] * inv);
    }
}

static size_t align256(size_t n) {
    return (n + 255) & ~(size_t)255;
}

/* A bfloat16's value on the host (exact: its bits are a float's upper half). */
static float bf16_value(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

ox_status ox_cu_red_prepare_fattn(struct ox_cuda_ctx *c, const struct ox_node *n,
                                  const ox_tensor *const *in, ox_tensor *const *out,
                                  unsigned const_inputs, void **state, size_t *workspace) {
    (void)c;
    const char *env = getenv("OX_CUDA_ATTENTION");
    if (env && !strcmp(env, "0")) return OX_E_UNSUPPORTED;
    int force = !env                    ? 0
                : !strcmp(env, "gemm")  ? 1
                : !strcmp(env, "small") ? 2
                : !strcmp(env, "tc")    ? 3
                                        : 0;
    /* the views' int tensors (Reshape shapes, Slice parameters: constant for the plan's
     * life) read on the host, where the parse reads them */
    if (n->n_inputs > 32) return OX_E_UNSUPPORTED;
    const ox_tensor *hin[32];
    ox_tensor copies[32];
    void *bufs[32] = {NULL};
    ox_status hs = OX_OK;
    for (int k = 0; k < n->n_inputs; k++) {
        hin[k] = in[k];
        if (k < OX_FATTN_SHAPES || !in[k]) continue;
        size_t bytes = (size_t)ox_tensor_numel(in[k]) * ox_dtype_size(in[k]->dtype);
        if (!(const_inputs & (1u << k)) || !(bufs[k] = malloc(bytes ? bytes : 1))) {
            hs = OX_E_UNSUPPORTED;
            break;
        }
        if (bytes &&
            (hs = ox_cu_check(cudaMemcpy(bufs[k], in[k]->data, bytes, cudaMemcpyDeviceToHost),
                              "FusedAttention view input")))
            break;
        copies[k] = *in[k];
        copies[k].data = bufs[k];
        hin[k] = &copies[k];
    }
    struct ox_fattn a;
    if (!hs && ox_fattn_parse(n, hin, &a) != OX_OK) hs = OX_E_UNSUPPORTED; /* the CPU says why */
    for (int k = 0; k < n->n_inputs; k++) free(bufs[k]);
    if (hs) return hs;
    if (!ox_cu_is_float(a.dtype) || !out[0] || out[0]->dtype != a.dtype) return OX_E_UNSUPPORTED;
    if (a.generic) return OX_E_UNSUPPORTED; /* odd ranks, a mask that grows the scores */
    for (int k = 0; k < 3; k++) /* a view that is not one strided matrix per item: the CPU */
        if (a.how[k] != OX_FATTN_STRIDED) return OX_E_UNSUPPORTED;
    if (a.S == 0 || a.T == 0 || a.Dk == 0 || a.Dv == 0 || a.batch == 0 || a.batch > INT_MAX ||
        a.T > INT_MAX)
        return OX_E_UNSUPPORTED;
    struct ox_mat sc = {a.S, a.T, a.T, 1};
    struct ox_gemm_desc g1, g2;
    if (!ox_gemm_describe(a.m[OX_FATTN_Q], a.m[OX_FATTN_K], sc, &g1) ||
        !ox_gemm_describe(sc, a.m[OX_FATTN_V], a.m[OX_FATTN_Y], &g2))
        return OX_E_UNSUPPORTED;
    /* the factors' values (constant for the plan's life) */
    double alpha = a.scale;
    for (int k = 4; k < 7; k++) {
        const ox_tensor *f = ox_in(n, in, k);
        if (!f) continue;
        if (!(const_inputs & (1u << k)) || !ox_cu_is_float(f->dtype)) return OX_E_UNSUPPORTED;
        uint16_t h = 0;
        float v = 0;
        ox_status st =
            ox_cu_check(cudaMemcpy(f->dtype == OX_FLOAT ? (void *)&v : (void *)&h, f->data,
                                   ox_dtype_size(f->dtype), cudaMemcpyDeviceToHost),
                        "FusedAttention factor");
        if (st) return st;
        alpha *= f->dtype == OX_FLOAT     ? v
                 : f->dtype == OX_FLOAT16 ? ox_half_to_float(h)
                                          : bf16_value(h);
    }
    size_t es = ox_dtype_size(a.dtype);
    if ((double)a.batch * (double)a.S * (double)a.T * (double)es > 1e18) return OX_E_UNSUPPORTED;
    size_t scores = (size_t)a.batch * (size_t)(a.S * a.T) * es;
    size_t ptrs = (size_t)a.batch * 6 * sizeof(void *);
    size_t offs_bytes = (size_t)a.batch * OX_FATTN_N * sizeof(int64_t);
    int64_t *host = (int64_t *)malloc(offs_bytes);
    fattn_state *s = (fattn_state *)calloc(1, sizeof *s);
    if (!host || !s) {
        free(host);
        free(s);
        return ox_node_err(n, OX_E_NOMEM, "CUDA FusedAttention state");
    }
    for (int64_t i = 0; i < a.batch; i++) {
        int64_t off[OX_FATTN_N];
        ox_fattn_offsets(&a, i, off);
        for (int k = 0; k < OX_FATTN_N; k++) host[k * a.batch + i] = off[k];
    }
    ox_status st = ox_cu_check(cudaMalloc((void **)&s->offs, offs_bytes), "cudaMalloc");
    if (!st)
        st = ox_cu_check(cudaMemcpy(s->offs, host, offs_bytes, cudaMemcpyHostToDevice),
                         "cudaMemcpy");
    free(host);
    if (st) {
        cudaFree(s->offs);
        free(s);
        return st;
    }
    s->dtype = a.dtype;
    s->S = a.S, s->T = a.T, s->batch = a.batch;
    s->alpha = (float)alpha;
    s->g1 = g1, s->g2 = g2;
    s->has_mask = a.has_mask;
    s->mrs = a.m[OX_FATTN_MASK].rs, s->mcs = a.m[OX_FATTN_MASK].cs;
    s->scores_bytes = align256(scores);
    /* the one-kernel way for small products */
    const struct ox_mat *m = a.m;
    double macs = (double)a.batch * (double)a.S * (double)a.T * (double)(a.Dk + a.Dv);
    bool small_fits = a.T <= FA_TMAX && a.Dk <= FA_DKMAX && a.S <= INT_MAX && a.Dv <= INT_MAX;
    s->small =
        small_fits && force != 1 && force != 3 && (force == 2 || macs <= (double)FA_SMALL_MACS);
    /* float16 products beyond that: on tensor cores where the shared memory holds them
     * (bfloat16 ones take cuBLAS) */
    tc_layout tl = tc_layout_of(a.T, a.Dk, a.Dv);
    s->tc = !s->small && force != 1 && force != 2 && a.dtype == OX_FLOAT16 && a.T <= TC_TMAX &&
            a.Dk <= TC_DMAX && a.Dv <= TC_DMAX && a.S <= INT_MAX && tl.bytes <= TC_SMEM;
    /* the limit is the kernel's, shared by every FusedAttention node of every plan: only
     * raised, never lowered below what an earlier node launches with */
    cudaFuncAttributes fa;
    if (s->tc && cudaFuncGetAttributes(&fa, k_fattn_tc) != cudaSuccess) {
        (void)cudaGetLastError();
        fa.maxDynamicSharedSizeBytes = 0;
    }
    if (s->tc && (size_t)fa.maxDynamicSharedSizeBytes < tl.bytes &&
        cudaFuncSetAttribute(k_fattn_tc, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             (int)tl.bytes) != cudaSuccess) {
        (void)cudaGetLastError();
        s->tc = false;
    }
    s->tl = tl;
    if (s->small || s->tc) {
        fa_geom fg = {(int)a.S,         (int)a.T,         (int)a.Dk,        (int)a.Dv,
                      m[OX_FATTN_Q].rs, m[OX_FATTN_Q].cs, m[OX_FATTN_K].rs, m[OX_FATTN_K].cs,
                      m[OX_FATTN_V].rs, m[OX_FATTN_V].cs, m[OX_FATTN_Y].rs, m[OX_FATTN_Y].cs,
                      s->mrs,           s->mcs,           a.batch,          s->alpha};
        s->fg = fg;
    }
    *workspace = s->small || s->tc ? 0 : s->scores_bytes + ptrs;
    *state = s;
    ox_cu_trace("attention '%s' %s: %s (%lld items of S %lld, T %lld, Dk %lld, Dv %lld)", n->name,
                ox_cu_float_name(a.dtype),
                s->small ? "one kernel"
                : s->tc  ? "tensor cores"
                         : "cuBLAS",
                (long long)a.batch, (long long)a.S, (long long)a.T, (long long)a.Dk,
                (long long)a.Dv);
    return OX_OK;
}

void ox_cu_red_release_fattn(void *state) {
    fattn_state *s = (fattn_state *)state;
    if (!s) return;
    cudaFree(s->offs);
    free(s);
}

template <typename T>
static void launch_fattn_softmax(const fattn_state *s, int n_sms, cudaStream_t st, void *scores,
                                 const void *mask, const int64_t *moff, int64_t rows) {
    T *x = (T *)scores;
    const T *m = (const T *)mask;
    unsigned grid = grid_of((rows + 7) / 8);
    if (ox_cu_vec_on() && with_per_lane<16>((s->T + 31) / 32, [&](auto nv) {
            k_fattn_softmax_regs<T, decltype(nv)::value>
                <<<grid, 256, 0, st>>>(x, rows, s->S, (int)s->T, m, moff, s->mrs, s->mcs);
        }))
        return;
    if (s->T <= WARP_ROW_MAX)
        k_fattn_softmax<true, T>
            <<<grid, 256, 0, st>>>(x, rows, s->S, s->T, m, moff, s->mrs, s->mcs);
    else
        k_fattn_softmax<false, T><<<grid_of(rows), row_block(rows, s->T, n_sms), 0, st>>>(
            x, rows, s->S, s->T, m, moff, s->mrs, s->mcs);
}

static cublasOperation_t op_of(bool t) {
    return t ? CUBLAS_OP_T : CUBLAS_OP_N;
}

ox_status ox_cu_red_fattn(struct ox_cuda_ctx *c, const struct ox_node *n,
                          const ox_tensor *const *in, ox_tensor *const *out) {
    (void)n;
    const fattn_state *s = (const fattn_state *)c->state;
    const int64_t B = s->batch;
    const bool f32 = s->dtype == OX_FLOAT;
    const int es = f32 ? 4 : 2;
    if (s->small) {
        const void *mask = s->has_mask ? in[3]->data : NULL;
        unsigned grid = grid_of(B * ((s->S + FA_ROWS - 1) / FA_ROWS));
        if (f32)
            k_fattn_small<float><<<grid, 256, 0, c->stream>>>(
                (const float *)in[0]->data, (const float *)in[1]->data, (const float *)in[2]->data,
                (const float *)mask, (float *)out[0]->data, s->offs, s->fg);
        else if (s->dtype == OX_FLOAT16)
            k_fattn_small<__half><<<grid, 256, 0, c->stream>>>(
                (const __half *)in[0]->data, (const __half *)in[1]->data,
                (const __half *)in[2]->data, (const __half *)mask, (__half *)out[0]->data, s->offs,
                s->fg);
        else
            k_fattn_small<__nv_bfloat16><<<grid, 256, 0, c->stream>>>(
                (const __nv_bfloat16 *)in[0]->data, (const __nv_bfloat16 *)in[1]->data,
                (const __nv_bfloat16 *)in[2]->data, (const __nv_bfloat16 *)mask,
                (__nv_bfloat16 *)out[0]->data, s->offs, s->fg);
        return ox_cu_launched("FusedAttention");
    }
    if (s->tc) {
        const __half *mask = s->has_mask ? (const __half *)in[3]->data : NULL;
        unsigned grid = grid_of(B * ((s->S + TC_QROWS - 1) / TC_QROWS));
        k_fattn_tc<<<grid, 128, s->tl.bytes, c->stream>>>(
            (const __half *)in[0]->data, (const __half *)in[1]->data, (const __half *)in[2]->data,
            mask, (__half *)out[0]->data, s->offs, s->fg, s->tl);
        return ox_cu_launched("FusedAttention (tensor cores)");
    }
    char *scores = (char *)c->workspace;
    void **ptr = (void **)(scores + s->scores_bytes);
    k_fattn_ptrs<<<ox_cu_blocks(B), 256, 0, c->stream>>>(
        s->offs, B, (const char *)in[0]->data, (const char *)in[1]->data, (const char *)in[2]->data,
        (char *)out[0]->data, scores, s->S * s->T, es, s->g1.swap, s->g2.swap, ptr);
    ox_status st = ox_cu_launched("FusedAttention pointers");
    if (st) return st;
    cudaDataType_t t = f32 ? CUDA_R_32F : s->dtype == OX_FLOAT16 ? CUDA_R_16F : CUDA_R_16BF;
    cublasComputeType_t ct = f32 && c->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    if ((st = ox_cu_blas_check(
             cublasSetMathMode(c->blas, c->tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
             "cublasSetMathMode")))
        return st;
    const struct ox_gemm_desc *g = &s->g1;
    float alpha = s->alpha, one = 1.0f, zero = 0.0f;
    st = ox_cu_blas_check(
        cublasGemmBatchedEx(c->blas, op_of(g->ta), op_of(g->tb), g->m, g->n, g->k, &alpha,
                            (const void *const *)ptr, t, g->lda, (const void *const *)(ptr + B), t,
                            g->ldb, &zero, ptr + 2 * B, t, g->ldc, (int)B, ct, CUBLAS_GEMM_DEFAULT),
        "cublasGemmBatchedEx (FusedAttention scores)");
    if (st) return st;
    int64_t rows = B * s->S;
    const void *mask = s->has_mask ? in[3]->data : NULL;
    const int64_t *moff = s->offs + OX_FATTN_MASK * B;
    if (f32)
        launch_fattn_softmax<float>(s, sms_of(c), c->stream, scores, mask, moff, rows);
    else if (s->dtype == OX_FLOAT16)
        launch_fattn_softmax<__half>(s, sms_of(c), c->stream, scores, mask, moff, rows);
    else
        launch_fattn_softmax<__nv_bfloat16>(s, sms_of(c), c->stream, scores, mask, moff, rows);
    if ((st = ox_cu_launched("FusedAttention softmax"))) return st;
    g = &s->g2;
    return ox_cu_blas_check(cublasGemmBatchedEx(c->blas, op_of(g->ta), op_of(g->tb), g->m, g->n,
                                                g->k, &one, (const void *const *)(ptr + 3 * B), t,
                                                g->lda, (const void *const *)(ptr + 4 * B), t,
                                                g->ldb, &zero, ptr + 5 * B, t, g->ldc, (int)B, ct,
                                                CUBLAS_GEMM_DEFAULT),
                            "cublasGemmBatchedEx (FusedAttention output)");
}

/* ---- LayerNormalization, InstanceNormalization, GroupNormalization ------------------- */

/* Which scale (and bias) element goes with element j of row r:
 * (r % rmod) * rmul + (j / jdiv) * jmul. LayerNormalization: j (or 0 for one value);
 * InstanceNormalization: the channel r % C; GroupNormalization: the group r % G (opset 18)
 * or its channel (r % G) * C/G + j / S (opset 21). */
struct norm_index {
    int64_t rmod, rmul, jdiv, jmul_scale, jmul_bias;
};

static __device__ __forceinline__ int64_t norm_param(int64_t rbase, int64_t j, int64_t jdiv,
                                                     int64_t jmul) {
    if (jmul == 0) return rbase;
    return rbase + (jdiv == 1 ? j : j / jdiv) * jmul;
}

static __device__ __forceinline__ void store_stat(void *p, ox_dtype dt, int64_t i, float v) {
    if (dt == OX_FLOAT16)
        ((__half *)p)[i] = __float2half(v);
    else if (dt == OX_BFLOAT16)
        ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(v);
    else
        ((float *)p)[i] = v;
}

/* Each row of len elements: mean, then the mean of squared deviations (two passes, float),
 * then y = (x - mean) / sqrt(var + eps) * scale + bias. mean_out/inv_out: LayerNorm's
 * optional Mean and InvStdDev (NULL when not asked for). */
template <bool WARP, typename T>
__global__ void __launch_bounds__(1024)
    k_norm_rows(const T *x, T *y, const T *scale, const T *bias, int64_t rows, int64_t len,
                norm_index ix, float eps, void *mean_out, void *inv_out, ox_dtype stat_dtype) {
    using G = group<WARP>;
    for (int64_t r = G::first(); r < rows; r += G::step()) {
        const T *p = x + r * len;
        T *q = y + r * len;
        float s = 0.0f;
        for (int64_t j = G::lane(); j < len; j += G::size()) s += ox_cu_to_f(p[j]);
        s = G::allreduce(s, sum_f());
        float mean = s / (float)len;
        float d2 = 0.0f;
        for (int64_t j = G::lane(); j < len; j += G::size()) {
            float d = ox_cu_to_f(p[j]) - mean;
            d2 += d * d;
        }
        d2 = G::allreduce(d2, sum_f());
        float inv = 1.0f / sqrtf(d2 / (float)len + eps);
        int64_t rbase = (r % ix.rmod) * ix.rmul;
        for (int64_t j = G::lane(); j < len; j += G::size()) {
            float sc = ox_cu_to_f(scale[norm_param(rbase, j, ix.jdiv, ix.jmul_scale)]);
            float b = bias ? ox_cu_to_f(bias[norm_param(rbase, j, ix.jdiv, ix.jmul_bias)]) : 0.0f;
            q[j] = ox_cu_from_f<T>((ox_cu_to_f(p[j]) - mean) * inv * sc + b);
        }
        if (G::lane() == 0) {
            if (mean_out) store_stat(mean_out, stat_dtype, r, mean);
            if (inv_out) store_stat(inv_out, stat_dtype, r, inv);
        }
    }
}

/* V elements of T moved as one load or store. */
template <typename T, int V> struct alignas(sizeof(T) * V) red_vec { T e[V]; };

/* Where SkipLayerNormalization's row r of Skip starts (elements): r * len, or, for a Skip read
 * through skip_perm, r's coordinates over the rows' dims (row-major) times Skip's strides of
 * those dims (n of them). */
#define SKIP_MAP_MAX 4
struct skip_map {
    int n;
    int64_t dims[SKIP_MAP_MAX], st[SKIP_MAP_MAX];
};
static __device__ __forceinline__ int64_t skip_row(const skip_map &m, int64_t r, int64_t len) {
    if (m.n == 0) return r * len;
    int64_t off = 0;
    for (int i = m.n - 1; i >= 0; i--) {
        off += (r % m.dims[i]) * m.st[i];
        r /= m.dims[i];
    }
    return off;
}

/* LayerNormalization's rows (scale and bias along the row or one value each) of at most
 * 32 * VW * NV elements, a warp a row with the row in registers: x is read once, VW elements a
 * load (VW > 1: the row length a multiple of VW, every row start and scale and bias aligned to
 * the vector), and the mean and the squared deviations are summed over the registers. The same
 * arithmetic as k_norm_rows, summed in another order. */
template <typename T, int VW, int NV>
__global__ void __launch_bounds__(256)
    k_layernorm_regs(const T *x, const T *skip, T *y, const T *scale, const T *bias, int64_t rows,
                     int len, bool scale_row, bool bias_row, float eps, void *mean_out,
                     void *inv_out, ox_dtype stat_dtype, skip_map sm) {
    using V = red_vec<T, VW>;
    const int lane = threadIdx.x & 31, nvec = len / VW;
    for (int64_t r = (int64_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); r < rows;
         r += (int64_t)gridDim.x * (blockDim.x >> 5)) {
        const V *p = (const V *)(x + r * len);
        const V *ps = skip ? (const V *)(skip + skip_row(sm, r, len)) : NULL;
        float v[NV][VW];
        float s = 0.0f;
#pragma unroll
        for (int k = 0; k < NV; k++) {
            int vi = lane + 32 * k;
            V a, b;
            if (vi < nvec) a = p[vi];
            if (ps && vi < nvec) b = ps[vi];
#pragma unroll
            for (int e = 0; e < VW; e++) {
                float t = vi < nvec ? ox_cu_to_f(a.e[e]) : 0.0f;
                /* SkipLayerNormalization: the sum rounded as Add stores it */
                if (ps && vi < nvec) t = round_as<T>(t + ox_cu_to_f(b.e[e]));
                v[k][e] = t;
                s += v[k][e];
            }
        }
        s = warp_allreduce(s, sum_f());
        float mean = s / (float)len;
        float d2 = 0.0f;
#pragma unroll
        for (int k = 0; k < NV; k++)
            if (lane + 32 * k < nvec) {
#pragma unroll
                for (int e = 0; e < VW; e++) {
                    float d = v[k][e] - mean;
                    d2 += d * d;
                }
            }
        d2 = warp_allreduce(d2, sum_f());
        float inv = 1.0f / sqrtf(d2 / (float)len + eps);
        V *q = (V *)(y + r * len);
        const float sc0 = ox_cu_to_f(scale[0]), b0 = bias ? ox_cu_to_f(bias[0]) : 0.0f;
#pragma unroll
        for (int k = 0; k < NV; k++) {
            int vi = lane + 32 * k;
            if (vi >= nvec) continue;
            V sv, bv, o;
            if (scale_row) sv = ((const V *)scale)[vi];
            if (bias && bias_row) bv = ((const V *)bias)[vi];
#pragma unroll
            for (int e = 0; e < VW; e++) {
                float sc = scale_row ? ox_cu_to_f(sv.e[e]) : sc0;
                float b = bias && bias_row ? ox_cu_to_f(bv.e[e]) : b0;
                o.e[e] = ox_cu_from_f<T>((v[k][e] - mean) * inv * sc + b);
            }
            q[vi] = o;
        }
        if (lane == 0) {
            if (mean_out) store_stat(mean_out, stat_dtype, r, mean);
            if (inv_out) store_stat(inv_out, stat_dtype, r, inv);
        }
    }
}

struct norm_state {
    ox_dtype dtype, stat_dtype;
    int64_t rows, len;
    norm_index ix;
    float eps;
    bool layernorm; /* scale and bias along the row or one value: k_layernorm_regs may run */
    bool skip;      /* SkipLayerNormalization: input 1 (of X's shape) added to X first */
    skip_map sm;    /* ... read through its skip_perm (sm.n 0: none) */
};

/* y = x + skip over n elements, rounded to T (SkipLayerNormalization's sum where the
 * register kernel cannot take the rows: normalized in place after). */
template <typename T>
__global__ void k_add_rounded(const T *x, const T *skip, T *y, int64_t n, int64_t len,
                              skip_map sm) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t k = sm.n ? skip_row(sm, i / len, len) + i % len : i;
        y[i] = ox_cu_from_f<T>(ox_cu_to_f(x[i]) + ox_cu_to_f(skip[k]));
    }
}

/* k_layernorm_regs for rows of len, NV vectors of VW a lane: false when the row is too long. */
template <typename T, int VW>
static bool launch_layernorm_regs(const norm_state *s, cudaStream_t st, const T *x, const T *skip,
                                  T *y, const T *scale, const T *bias, void *mean_out,
                                  void *inv_out) {
    unsigned grid = grid_of((s->rows + 7) / 8);
    bool srow = s->ix.jmul_scale != 0, brow = s->ix.jmul_bias != 0;
    return with_per_lane<8>((s->len / VW + 31) / 32, [&](auto nv) {
        k_layernorm_regs<T, VW, decltype(nv)::value>
            <<<grid, 256, 0, st>>>(x, skip, y, scale, bias, s->rows, (int)s->len, srow, brow,
                                   s->eps, mean_out, inv_out, s->stat_dtype, s->sm);
    });
}

template <typename T>
static void launch_norm(const norm_state *s, int n_sms, cudaStream_t st, const void *x, void *y,
                        const void *scale, const void *bias, void *mean_out, void *inv_out,
                        const void *skip = NULL) {
    const T *xp = (const T *)x, *sp = (const T *)scale, *bp = (const T *)bias;
    const T *kp = (const T *)skip;
    T *yp = (T *)y;
    if (s->layernorm && s->len > 0 && ox_cu_vec_on()) {
        constexpr int VW = 16 / sizeof(T);
        const size_t vb = sizeof(T) * VW;
        bool vec = s->len % VW == 0 && ox_cu_aligned(xp, vb) && ox_cu_aligned(yp, vb) &&
                   (!kp || ox_cu_aligned(kp, vb)) &&
                   (s->ix.jmul_scale == 0 || ox_cu_aligned(sp, vb)) &&
                   (!bp || s->ix.jmul_bias == 0 || ox_cu_aligned(bp, vb));
        if (vec ? launch_layernorm_regs<T, VW>(s, st, xp, kp, yp, sp, bp, mean_out, inv_out)
                : launch_layernorm_regs<T, 1>(s, st, xp, kp, yp, sp, bp, mean_out, inv_out))
            return;
    }
    if (kp) { /* the sum into y, normalized there */
        int64_t n = s->rows * s->len;
        k_add_rounded<T><<<grid_of((n + 255) / 256), 256, 0, st>>>(xp, kp, yp, n, s->len, s->sm);
        xp = yp;
    }
    if (s->len <= WARP_ROW_MAX)
        k_norm_rows<true, T><<<grid_of((s->rows + 7) / 8), 256, 0, st>>>(
            xp, yp, sp, bp, s->rows, s->len, s->ix, s->eps, mean_out, inv_out, s->stat_dtype);
    else
        k_norm_rows<false, T><<<grid_of(s->rows), row_block(s->rows, s->len, n_sms), 0, st>>>(
            xp, yp, sp, bp, s->rows, s->len, s->ix, s->eps, mean_out, inv_out, s->stat_dtype);
}

static ox_status norm_state_new(const struct ox_node *n, const ox_tensor *x, void **state,
                                norm_state **out) {
    norm_state *s = (norm_state *)calloc(1, sizeof *s);
    if (!s) return ox_node_err(n, OX_E_NOMEM, "CUDA normalization state");
    s->dtype = x->dtype;
    s->stat_dtype = OX_FLOAT;
    s->eps = ox_attr_float(n, "epsilon", 1e-5f);
    *state = s;
    *out = s;
    return OX_OK;
}

/* Scale and B broadcast to the normalized dims; taken when each is all of them or one
 * value. Mean and InvStdDev (stash_type's dtype) when float, float16 or bfloat16. */
ox_status ox_cu_red_prepare_layernorm(struct ox_cuda_ctx *c, const struct ox_node *n,
                                      const ox_tensor *const *in, ox_tensor *const *out,
                                      unsigned const_inputs, void **state, size_t *workspace) {
    (void)c;
    (void)const_inputs;
    (void)workspace;
    const ox_tensor *x = ox_in(n, in, 0), *scale = ox_in(n, in, 1), *bias = ox_in(n, in, 2);
    if (!x || !scale || !ox_cu_is_float(x->dtype) || scale->dtype != x->dtype ||
        (bias && bias->dtype != x->dtype) || !out[0] || out[0]->dtype != x->dtype)
        return OX_E_UNSUPPORTED;
    int64_t axis = ox_attr_int(n, "axis", -1);
    if (axis < 0) axis += x->rank;
    if (axis < 0 || axis >= x->rank) return OX_E_UNSUPPORTED;
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < x->rank; d++) *(d < axis ? &outer : &inner) *= x->dims[d];
    int64_t ns = ox_tensor_numel(scale), nb = bias ? ox_tensor_numel(bias) : 1;
    if ((ns != inner && ns != 1) || (nb != inner && nb != 1)) return OX_E_UNSUPPORTED;
    ox_dtype stat = OX_FLOAT;
    for (int k = 1; k < 3 && k < n->n_outputs; k++) {
        if (!out[k]) continue;
        if (!ox_cu_is_float(out[k]->dtype) || ox_tensor_numel(out[k]) != outer)
            return OX_E_UNSUPPORTED;
        stat = out[k]->dtype;
    }
    if (n->n_outputs > 2 && out[1] && out[2] && out[1]->dtype != out[2]->dtype)
        return OX_E_UNSUPPORTED;
    norm_state *s = NULL;
    ox_status st = norm_state_new(n, x, state, &s);
    if (st) return st;
    s->stat_dtype = stat;
    s->rows = outer;
    s->len = inner;
    s->ix.rmod = 1;
    s->ix.rmul = 0;
    s->ix.jdiv = 1;
    s->ix.jmul_scale = ns == inner ? 1 : 0;
    s->ix.jmul_bias = nb == inner ? 1 : 0;
    s->layernorm = inner <= INT_MAX;
    return OX_OK;
}

/* SkipLayerNormalization (ai.onnxexec; kernels/cpu/norm.c): LayerNormalization of X + Skip,
 * taken where Skip (through skip_perm, which must leave the normalized axes in place and move
 * at most SKIP_MAP_MAX row axes) has X's shape (the one-kernel sum); a broadcast Skip goes to
 * the CPU. */
ox_status ox_cu_red_prepare_skip_layernorm(struct ox_cuda_ctx *c, const struct ox_node *n,
                                           const ox_tensor *const *in, ox_tensor *const *out,
                                           unsigned const_inputs, void **state, size_t *workspace) {
    const ox_tensor *x = ox_in(n, in, 0), *skip = ox_in(n, in, 1);
    if (!x || !skip || skip->dtype != x->dtype || skip->rank != x->rank || n->n_outputs != 1 ||
        n->n_inputs < 3)
        return OX_E_UNSUPPORTED;
    const struct ox_attr *perm = ox_node_attr(n, "skip_perm");
    skip_map sm = {0, {0}, {0}};
    if (!perm && !ox_same_shape(x, skip)) return OX_E_UNSUPPORTED;
    if (perm) { /* Skip's dims through the perm must be X's */
        int r = x->rank;
        int64_t axis = ox_attr_int(n, "axis", -1), st[OX_MAX_RANK], acc = 1;
        bool seen[OX_MAX_RANK] = {false};
        if (axis < 0) axis += r;
        if (perm->type != OX_ATTR_INTS || perm->n != r || axis < 0 || axis >= r ||
            axis > SKIP_MAP_MAX)
            return OX_E_UNSUPPORTED;
        for (int i = r - 1; i >= 0; i--) st[i] = acc, acc *= skip->dims[i];
        for (int i = 0; i < r; i++) {
            int64_t p = perm->ints[i];
            if (p < 0 || p >= r || seen[p] || skip->dims[p] != x->dims[i] || (i >= axis && p != i))
                return OX_E_UNSUPPORTED;
            seen[p] = true;
        }
        sm.n = (int)axis;
        for (int i = 0; i < axis; i++) sm.dims[i] = x->dims[i], sm.st[i] = st[perm->ints[i]];
    }
    /* LayerNormalization's checks and state, on (X, Scale, B) */
    struct ox_node ln = *n;
    int ins[3] = {n->inputs[0], n->inputs[2], n->n_inputs > 3 ? n->inputs[3] : -1};
    ln.n_inputs = n->n_inputs > 3 ? 3 : 2;
    ln.inputs = ins;
    const ox_tensor *lin[3] = {x, in[2], ox_in(n, in, 3)};
    ox_status st = ox_cu_red_prepare_layernorm(c, &ln, lin, out, const_inputs, state, workspace);
    if (st) return st;
    ((norm_state *)*state)->skip = true;
    ((norm_state *)*state)->sm = sm;
    return OX_OK;
}

ox_status ox_cu_red_skip_norm(struct ox_cuda_ctx *c, const struct ox_node *n,
                              const ox_tensor *const *in, ox_tensor *const *out) {
    const norm_state *s = (const norm_state *)c->state;
    if (s->rows == 0) return OX_OK;
    const ox_tensor *bias = ox_in(n, in, 3);
    const void *b = bias ? bias->data : NULL;
    int sms = sms_of(c);
    if (s->dtype == OX_FLOAT)
        launch_norm<float>(s, sms, c->stream, in[0]->data, out[0]->data, in[2]->data, b, NULL, NULL,
                           in[1]->data);
    else if (s->dtype == OX_FLOAT16)
        launch_norm<__half>(s, sms, c->stream, in[0]->data, out[0]->data, in[2]->data, b, NULL,
                            NULL, in[1]->data);
    else
        launch_norm<__nv_bfloat16>(s, sms, c->stream, in[0]->data, out[0]->data, in[2]->data, b,
                                   NULL, NULL, in[1]->data);
    return ox_cu_launched(n->op_type);
}

ox_status ox_cu_red_prepare_instancenorm(struct ox_cuda_ctx *c, const struct ox_node *n,
                                         const ox_tensor *const *in, ox_tensor *const *out,
                                         unsigned const_inputs, void **state, size_t *workspace) {
    (void)c;
    (void)const_inputs;
    (void)workspace;
    const ox_tensor *x = ox_in(n, in, 0), *scale = ox_in(n, in, 1), *bias = ox_in(n, in, 2);
    if (!x || !scale || !bias || x->rank < 3 || !ox_cu_is_float(x->dtype) ||
        scale->dtype != x->dtype || bias->dtype != x->dtype || !out[0] || out[0]->dtype != x->dtype)
        return OX_E_UNSUPPORTED;
    int64_t C = x->dims[1], S = 1;
    for (int d = 2; d < x->rank; d++) S *= x->dims[d];
    if (ox_tensor_numel(scale) != C || ox_tensor_numel(bias) != C || C == 0)
        return OX_E_UNSUPPORTED;
    norm_state *s = NULL;
    ox_status st = norm_state_new(n, x, state, &s);
    if (st) return st;
    s->rows = x->dims[0] * C;
    s->len = S;
    s->ix.rmod = C;
    s->ix.rmul = 1;
    s->ix.jdiv = 1;
    s->ix.jmul_scale = s->ix.jmul_bias = 0;
    return OX_OK;
}

/* Opset 18: scale and bias per group; 21: per channel. */
ox_status ox_cu_red_prepare_groupnorm(struct ox_cuda_ctx *c, const struct ox_node *n,
                                      const ox_tensor *const *in, ox_tensor *const *out,
                                      unsigned const_inputs, void **state, size_t *workspace) {
    (void)c;
    (void)const_inputs;
    (void)workspace;
    const ox_tensor *x = ox_in(n, in, 0), *scale = ox_in(n, in, 1), *bias = ox_in(n, in, 2);
    if (!x || !scale || !bias || x->rank < 2 || !ox_cu_is_float(x->dtype) ||
        scale->dtype != x->dtype || bias->dtype != x->dtype || !out[0] || out[0]->dtype != x->dtype)
        return OX_E_UNSUPPORTED;
    int64_t G = ox_attr_int(n, "num_groups", 0), C = x->dims[1], S = 1;
    if (G <= 0 || C % G) return OX_E_UNSUPPORTED;
    for (int d = 2; d < x->rank; d++) S *= x->dims[d];
    bool per_channel = n->opset >= 21;
    int64_t want = per_channel ? C : G;
    if (ox_tensor_numel(scale) != want || ox_tensor_numel(bias) != want) return OX_E_UNSUPPORTED;
    norm_state *s = NULL;
    ox_status st = norm_state_new(n, x, state, &s);
    if (st) return st;
    int64_t cpg = C / G;
    s->rows = x->dims[0] * G;
    s->len = cpg * S;
    s->ix.rmod = G;
    s->ix.rmul = per_channel ? cpg : 1;
    s->ix.jdiv = S > 0 ? S : 1;
    s->ix.jmul_scale = s->ix.jmul_bias = per_channel ? 1 : 0;
    return OX_OK;
}

ox_status ox_cu_red_norm(struct ox_cuda_ctx *c, const struct ox_node *n, const ox_tensor *const *in,
                         ox_tensor *const *out) {
    const norm_state *s = (const norm_state *)c->state;
    if (s->rows == 0) return OX_OK;
    const ox_tensor *bias = ox_in(n, in, 2);
    void *mean_out = n->n_outputs > 1 && out[1] ? out[1]->data : NULL;
    void *inv_out = n->n_outputs > 2 && out[2] ? out[2]->data : NULL;
    int sms = sms_of(c);
    const void *b = bias ? bias->data : NULL;
    if (s->dtype == OX_FLOAT)
        launch_norm<float>(s, sms, c->stream, in[0]->data, out[0]->data, in[1]->data, b, mean_out,
                           inv_out);
    else if (s->dtype == OX_FLOAT16)
        launch_norm<__half>(s, sms, c->stream, in[0]->data, out[0]->data, in[1]->data, b, mean_out,
                            inv_out);
    else
        launch_norm<__nv_bfloat16>(s, sms, c->stream, in[0]->data, out[0]->data, in[1]->data, b,
                                   mean_out, inv_out);
    return ox_cu_launched(n->op_type);
}

/* ---- BatchNormalization (inference) -------------------------------------------------- */

static __device__ __forceinline__ double ld_param(const void *p, ox_dtype dt, int64_t i) {
    if (dt == OX_FLOAT16) return (double)__half2float(((const __half *)p)[i]);
    if (dt == OX_BFLOAT16) return (double)__bfloat162float(((const __nv_bfloat16 *)p)[i]);
    if (dt == OX_DOUBLE) return ((const double *)p)[i];
    return (double)((const float *)p)[i];
}

/* ab[c] = scale / sqrt(var + eps), ab[C + c] = bias - mean * ab[c], in double as the CPU. */
static __global__ void k_bn_params(const void *scale, const void *bias, const void *mean,
                                   const void *var, ox_dtype ts, ox_dtype tb, ox_dtype tm,
                                   ox_dtype tv, int64_t C, double eps, float *ab) {
    for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < C;
         c += (int64_t)gridDim.x * blockDim.x) {
        double a = ld_param(scale, ts, c) / sqrt(ld_param(var, tv, c) + eps);
        ab[c] = (float)a;
        ab[C + c] = (float)(ld_param(bias, tb, c) - ld_param(mean, tm, c) * a);
    }
}

/* y = x * a[c] + b[c]: rows (n, c) of S elements, over blockIdx.y; S over blockIdx.x. */
template <typename T>
__global__ void k_bn_apply(const T *x, T *y, int64_t rows, int64_t C, int64_t S, const float *ab) {
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        int64_t c = r % C;
        float a = ab[c], b = ab[C + c];
        const T *p = x + r * S;
        T *q = y + r * S;
        for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < S;
             j += (int64_t)gridDim.x * blockDim.x)
            q[j] = ox_cu_from_f<T>(ox_cu_to_f(p[j]) * a + b);
    }
}

struct bn_state {
    ox_dtype dtype, tp[4]; /* X; scale, B, mean, var */
    int64_t rows, C, S;
    double eps;
    float *ab; /* a and b when the four inputs are constant, else NULL (workspace) */
};

void ox_cu_red_release_batchnorm(void *state) {
    bn_state *s = (bn_state *)state;
    if (!s) return;
    if (s->ab) cudaFree(s->ab);
    free(s);
}

static bool is_param_dtype(ox_dtype dt) {
    return dt == OX_FLOAT || dt == OX_FLOAT16 || dt == OX_BFLOAT16 || dt == OX_DOUBLE;
}

static void launch_bn_params(const bn_state *s, cudaStream_t st, const ox_tensor *const *in,
                             float *ab) {
    k_bn_params<<<ox_cu_blocks(s->C), 256, 0, st>>>(in[1]->data, in[2]->data, in[3]->data,
                                                    in[4]->data, s->tp[0], s->tp[1], s->tp[2],
                                                    s->tp[3], s->C, s->eps, ab);
}

/* Inference only: opset 7 on (is_test and friends before), spatial=1, no training_mode and
 * no outputs beyond Y. */
ox_status ox_cu_red_prepare_batchnorm(struct ox_cuda_ctx *c, const struct ox_node *n,
                                      const ox_tensor *const *in, ox_tensor *const *out,
                                      unsigned const_inputs, void **state, size_t *workspace) {
    if (n->opset < 7 || n->n_inputs < 5) return OX_E_UNSUPPORTED;
    if (n->opset < 9 && ox_attr_int(n, "spatial", 1) == 0) return OX_E_UNSUPPORTED;
    if (n->opset >= 14 && ox_attr_int(n, "training_mode", 0) != 0) return OX_E_UNSUPPORTED;
    for (int k = 1; k < n->n_outputs; k++)
        if (out[k]) return OX_E_UNSUPPORTED;
    const ox_tensor *x = in[0];
    if (!x || x->rank < 2 || !ox_cu_is_float(x->dtype) || !out[0] || out[0]->dtype != x->dtype)
        return OX_E_UNSUPPORTED;
    int64_t C = x->dims[1], S = 1;
    for (int d = 2; d < x->rank; d++) S *= x->dims[d];
    for (int k = 1; k <= 4; k++)
        if (!in[k] || !is_param_dtype(in[k]->dtype) || ox_tensor_numel(in[k]) != C)
            return OX_E_UNSUPPORTED;
    bn_state *s = (bn_state *)calloc(1, sizeof *s);
    if (!s) return ox_node_err(n, OX_E_NOMEM, "CUDA batchnorm state");
    s->dtype = x->dtype;
    for (int k = 0; k < 4; k++) s->tp[k] = in[k + 1]->dtype;
    s->rows = x->dims[0] * C;
    s->C = C;
    s->S = S;
    s->eps = ox_attr_float(n, "epsilon", 1e-5f);
    if (s->rows * S == 0) {
        *state = s;
        return OX_OK;
    }
    unsigned params = 0xfu << 1;
    if ((const_inputs & params) != params) {
        *workspace = 2 * (size_t)C * sizeof(float);
        *state = s;
        return OX_OK;
    }
    ox_status st =
        ox_cu_check(cudaMalloc((void **)&s->ab, 2 * (size_t)C * sizeof(float)), "BatchNorm a, b");
    if (st) goto fail_free_state;
    launch_bn_params(s, c->stream, in, s->ab);
    if ((st = ox_cu_launched("BatchNorm parameters"))) goto fail_free_state;
    if ((st = ox_cu_check(cudaStreamSynchronize(c->stream), "BatchNorm parameters")))
        goto fail_free_state;
    *state = s;
    return OX_OK;
fail_free_state:
    ox_cu_red_release_batchnorm(s);
    return st;
}

template <typename T>
static void launch_bn(const bn_state *s, cudaStream_t st, const void *x, void *y, const float *ab) {
    int64_t bx = (s->S + 255) / 256;
    dim3 grid((unsigned)(bx < 65535 ? bx : 65535), (unsigned)(s->rows < 65535 ? s->rows : 65535));
    k_bn_apply<T><<<grid, 256, 0, st>>>((const T *)x, (T *)y, s->rows, s->C, s->S, ab);
}

ox_status ox_cu_red_batchnorm(struct ox_cuda_ctx *c, const struct ox_node *n,
                              const ox_tensor *const *in, ox_tensor *const *out) {
    const bn_state *s = (const bn_state *)c->state;
    if (s->rows * s->S == 0) return OX_OK;
    const float *ab = s->ab;
    if (!ab) {
        if (c->workspace_bytes < 2 * (size_t)s->C * sizeof(float))
            return ox_node_err(n, OX_E_INTERNAL, "CUDA BatchNorm: workspace too small");
        launch_bn_params(s, c->stream, in, (float *)c->workspace);
        ab = (const float *)c->workspace;
    }
    if (s->dtype == OX_FLOAT)
        launch_bn<float>(s, c->stream, in[0]->data, out[0]->data, ab);
    else if (s->dtype == OX_FLOAT16)
        launch_bn<__half>(s, c->stream, in[0]->data, out[0]->data, ab);
    else
        launch_bn<__nv_bfloat16>(s, c->stream, in[0]->data, out[0]->data, ab);
    return ox_cu_launched(n->op_type);
}
