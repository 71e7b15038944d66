/* CUDA kernels of the nn family: Conv, FusedConv and ConvTranspose (cuDNN, cuBLAS and a direct
 * depthwise kernel), MaxPool, AveragePool and LpPool (a direct kernel), and MatMul, Gemm,
 * FusedMatMul and FusedGemm (cuBLAS). float, float16 and bfloat16 (the 16-bit types computed
 * in float); MaxPool also int8 and uint8.
 *
 * - Geometry (pads from auto_pad, ceil_mode, dilations) is computed as kernels/cpu/conv.c
 *   does, and the output dims it gives are checked against the ones the CPU infer chose.
 * - Convolutions keep cuDNN (legacy API) descriptors made once in prepare. cuDNN pads
 *   symmetrically: the begin pads are given, and a node whose output extent differs from what
 *   cuDNN then computes (asymmetric pads that matter) is left to the CPU. 1-D runs as 2-D with
 *   H = 1. Prepare finds cuDNN's fastest algorithm on scratch buffers, then times each way
 *   the node can run (conv_choose): cuDNN with our epilogue, cuDNN's fused bias + ReLU, a
 *   pointwise convolution as batched GEMMs, a depthwise one in our kernel, im2col + GEMMs,
 *   and the convolution as a cuDNN graph (backend API: the heuristics' engines, each
 *   finalized, timed and tried under a stream capture); a way whose output on random data
 *   disagrees with plain cuDNN's is not taken.
 * - The fused ops' epilogue, y = act(base + bias + z), runs in one kernel of ours over y
 *   (or inside the depthwise kernel, or in cuDNN); each addition is rounded to the element
 *   type as the CPU's epilogue rounds it. A Z that broadcasts the output to a larger shape
 *   gets the base output in workspace first. A GEMM's bias without activation is broadcast
 *   into Y first and added by the GEMM itself (beta).
 * - GEMMs are row-major products computed as their column-major transposes (C^T = B^T A^T),
 *   batched with strides where numpy's broadcast allows one stride per operand, otherwise
 *   one strided batch per item of the outer batch dims.
 * float32 stays float32 unless c->tf32 allows TF32 tensor cores; float16 and bfloat16 use
 * tensor cores with float accumulation.
 */
#include "kernels/cuda/cuda.h"
#include "kernels/cuda/elem.cuh"

#include <cuda_bf16.h>

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <atomic>

/* Prototypes of this file's rows, so that the definitions are checked against the table. */
#define OX_CUDA_OP(domain, type, prepare, run, release) OX_CUDA_OP_PROTOTYPES(prepare, run, release)
#include "kernels/cuda/nn.def"
#undef OX_CUDA_OP

/* ---- elements and the epilogue --------------------------------------------------------- */

template <> __device__ __forceinline__ float ox_cu_to_f<int8_t>(int8_t v) {
    return (float)v;
}
template <> __device__ __forceinline__ float ox_cu_to_f<uint8_t>(uint8_t v) {
    return (float)v;
}

/* The 8-bit types only store values read from an input of that type (MaxPool), or 0. */
template <> __device__ __forceinline__ int8_t ox_cu_from_f<int8_t>(float v) {
    return (int8_t)v;
}
template <> __device__ __forceinline__ uint8_t ox_cu_from_f<uint8_t>(float v) {
    return (uint8_t)v;
}

/* v rounded to T, as the CPU rounds each step of a float16 or bfloat16 epilogue (identity for
 * float). */
template <typename T> __device__ __forceinline__ float round_to(float v) {
    return ox_cu_to_f<T>(ox_cu_from_f<T>(v));
}

/* The fused ops' activation (ox_fused_act): silu, else clamp to [lo, hi], the max first,
 * a NaN kept. */
struct act {
    float lo, hi;
    bool silu;
};

__device__ __forceinline__ float apply_act(float v, struct act a) {
    if (a.silu) return v / (1.0f + expf(-v));
    v = v < a.lo ? a.lo : v;
    return v > a.hi ? a.hi : v;
}

static struct act act_none(void) {
    struct act a = {-INFINITY, INFINITY, false};
    return a;
}

/* The node's activation: none for the unfused ops. */
static struct act act_of(const struct ox_node *n) {
    struct act a = act_none();
    if (strcmp(n->domain, OX_DOMAIN_ONNXEXEC) != 0) return a;
    ox_fused_clamp(n, &a.lo, &a.hi);
    a.silu = ox_fused_silu(n);
    return a;
}

static bool act_is_none(struct act a) {
    return !a.silu && a.lo == -INFINITY && a.hi == INFINITY;
}

/* y[i] = act(y[i] + bias_scale * bias[(i / inner) % channels] + z_scale * z[i]), in place;
 * bias and z may be NULL. Each addition is rounded to T, as the CPU's epilogue does. */
struct epi {
    const void *bias;
    int64_t inner, channels;
    float bias_scale;
    const void *z;
    float z_scale;
    struct act a;
};

template <typename T, typename I> __global__ void epi_channel(T *y, I n, struct epi e) {
    const T *bias = (const T *)e.bias, *z = (const T *)e.z;
    I inner = (I)e.inner, channels = (I)e.channels;
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (I)gridDim.x * blockDim.x) {
        float v = ox_cu_to_f<T>(y[i]);
        if (bias) v = round_to<T>(v + e.bias_scale * ox_cu_to_f<T>(bias[(i / inner) % channels]));
        if (z) v = round_to<T>(v + e.z_scale * ox_cu_to_f<T>(z[i]));
        y[i] = ox_cu_from_f<T>(apply_act(v, e.a));
    }
}

template <typename T>
static void epi_channel_launch(cudaStream_t st, void *y, int64_t n, struct epi e) {
    if (n <= 0) return;
    if (n <= INT32_MAX) /* 32-bit index arithmetic: the divisions are much cheaper */
        epi_channel<T, uint32_t><<<ox_cu_blocks(n), 256, 0, st>>>((T *)y, (uint32_t)n, e);
    else
        epi_channel<T, int64_t><<<ox_cu_blocks(n), 256, 0, st>>>((T *)y, n, e);
}

static void epi_channel_run(ox_dtype dt, cudaStream_t st, void *y, int64_t n, struct epi e) {
    if (dt == OX_FLOAT)
        epi_channel_launch<float>(st, y, n, e);
    else if (dt == OX_BFLOAT16)
        epi_channel_launch<__nv_bfloat16>(st, y, n, e);
    else
        epi_channel_launch<__half>(st, y, n, e);
}

/* y = act(src + z), src and z broadcast to y's dims (strides 0 along broadcast axes), z
 * optional; src may be y itself (same shape: each element is read by the thread that
 * writes it). The general case of ox_fused_post. */
struct bcast {
    int rank;
    int64_t dims[OX_MAX_RANK], ss[OX_MAX_RANK], zs[OX_MAX_RANK];
};

template <typename T>
__global__ void epi_bcast(const T *src, const T *z, T *y, int64_t n, struct bcast b, struct act a) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = i, so = 0, zo = 0;
        for (int d = b.rank - 1; d >= 0; d--) {
            int64_t k = r % b.dims[d];
            r /= b.dims[d];
            so += k * b.ss[d];
            zo += k * b.zs[d];
        }
        float v = ox_cu_to_f<T>(src[so]);
        if (z) v = round_to<T>(v + ox_cu_to_f<T>(z[zo]));
        y[i] = ox_cu_from_f<T>(apply_act(v, a));
    }
}

/* The broadcast of a tensor of dims `sdims` (src) and of z into y. */
static struct bcast bcast_of(const ox_tensor *y, int srank, const int64_t *sdims,
                             const ox_tensor *z) {
    struct bcast b;
    memset(&b, 0, sizeof b);
    ox_tensor s;
    memset(&s, 0, sizeof s);
    s.dtype = y->dtype;
    s.rank = srank;
    memcpy(s.dims, sdims, sizeof(int64_t) * (size_t)srank);
    b.rank = y->rank;
    memcpy(b.dims, y->dims, sizeof(int64_t) * (size_t)y->rank);
    ox_broadcast_strides(&s, y->rank, y->dims, b.ss);
    if (z) ox_broadcast_strides(z, y->rank, y->dims, b.zs);
    return b;
}

static void epi_bcast_run(ox_dtype dt, cudaStream_t st, const void *src, const void *z, void *y,
                          int64_t n, const struct bcast *b, struct act a) {
    if (n <= 0) return;
    if (dt == OX_FLOAT)
        epi_bcast<float><<<ox_cu_blocks(n), 256, 0, st>>>((const float *)src, (const float *)z,
                                                          (float *)y, n, *b, a);
    else if (dt == OX_BFLOAT16)
        epi_bcast<__nv_bfloat16><<<ox_cu_blocks(n), 256, 0, st>>>(
            (const __nv_bfloat16 *)src, (const __nv_bfloat16 *)z, (__nv_bfloat16 *)y, n, *b, a);
    else
        epi_bcast<__half><<<ox_cu_blocks(n), 256, 0, st>>>((const __half *)src, (const __half *)z,
                                                           (__half *)y, n, *b, a);
}

static bool same_dims(int ra, const int64_t *a, int rb, const int64_t *b) {
    return ra == rb && !memcmp(a, b, sizeof(int64_t) * (size_t)ra);
}

static size_t round256(size_t b) {
    return (b + 255) / 256 * 256;
}

void ox_cu_nn_release_state(void *state) {
    free(state);
}

/* ---- geometry (as kernels/cpu/conv.c) -------------------------------------------------- */

#define SP 3 /* spatial dims at most */

struct geom {
    int nsp;
    int64_t in[SP], k[SP], s[SP], d[SP], pb[SP], pe[SP], out[SP];
};

/* The geometry from x, the kernel extents and the attributes; false where the CPU infer
 * would have failed (it ran first, so this does not happen) or the rank is not 3 to 5. */
static bool geometry(const struct ox_node *n, const ox_tensor *x, const int64_t *kernel, int nk,
                     bool pooling, struct geom *g) {
    if (x->rank < 3 || x->rank - 2 > SP || nk != x->rank - 2) return false;
    g->nsp = x->rank - 2;
    const int64_t *a;
    int na;
    for (int i = 0; i < g->nsp; i++) {
        g->in[i] = x->dims[i + 2];
        g->k[i] = kernel[i];
        g->s[i] = g->d[i] = 1;
        g->pb[i] = g->pe[i] = 0;
        if (g->k[i] <= 0) return false;
    }
    if ((na = ox_attr_ints(n, "strides", &a)) >= 0) {
        if (na != g->nsp) return false;
        for (int i = 0; i < na; i++) g->s[i] = a[i];
    }
    if ((na = ox_attr_ints(n, "dilations", &a)) >= 0) {
        if (na != g->nsp) return false;
        for (int i = 0; i < na; i++) g->d[i] = a[i];
    }
    for (int i = 0; i < g->nsp; i++)
        if (g->s[i] <= 0 || g->d[i] <= 0) return false;
    const char *ap = ox_attr_str(n, "auto_pad", "NOTSET");
    bool ceil_mode = pooling && ox_attr_int(n, "ceil_mode", 0);
    if (strcmp(ap, "NOTSET") == 0) {
        if ((na = ox_attr_ints(n, "pads", &a)) >= 0) {
            if (na != 2 * g->nsp) return false;
            for (int i = 0; i < g->nsp; i++) {
                g->pb[i] = a[i];
                g->pe[i] = a[i + g->nsp];
                if (g->pb[i] < 0 || g->pe[i] < 0) return false;
            }
        }
        for (int i = 0; i < g->nsp; i++) {
            int64_t ext = (g->k[i] - 1) * g->d[i] + 1, span = g->in[i] + g->pb[i] + g->pe[i] - ext;
            if (span < 0) return false;
            g->out[i] = (ceil_mode ? (span + g->s[i] - 1) / g->s[i] : span / g->s[i]) + 1;
            /* a last window that starts in the end padding is dropped */
            if (ceil_mode && (g->out[i] - 1) * g->s[i] >= g->in[i] + g->pb[i]) g->out[i]--;
        }
    } else if (strcmp(ap, "VALID") == 0) {
        for (int i = 0; i < g->nsp; i++) {
            int64_t ext = (g->k[i] - 1) * g->d[i] + 1, span = g->in[i] - ext;
            if (span < 0) return false;
            g->out[i] = (ceil_mode ? (span + g->s[i] - 1) / g->s[i] : span / g->s[i]) + 1;
        }
    } else if (strcmp(ap, "SAME_UPPER") == 0 || strcmp(ap, "SAME_LOWER") == 0) {
        for (int i = 0; i < g->nsp; i++) {
            int64_t ext = (g->k[i] - 1) * g->d[i] + 1;
            g->out[i] = (g->in[i] + g->s[i] - 1) / g->s[i];
            int64_t total = (g->out[i] - 1) * g->s[i] + ext - g->in[i];
            if (total < 0) total = 0;
            g->pb[i] = ap[5] == 'U' ? total / 2 : total - total / 2;
            g->pe[i] = total - g->pb[i];
        }
    } else {
        return false;
    }
    return true;
}

/* ---- cuDNN descriptors ----------------------------------------------------------------- */

static bool fits_int(int64_t v) {
    return v >= 0 && v <= INT_MAX;
}

/* A [N, C, spatial...] shape as cuDNN sees it: 1-D as 2-D with H = 1. Returns the rank, or
 * 0 when a dim or the element count does not fit cuDNN's ints. */
static int dnn_dims(int rank, const int64_t *dims, int *out) {
    int nb = rank == 3 ? 4 : rank;
    int64_t total = 1;
    for (int i = 0, j = 0; i < nb; i++) {
        int64_t v = rank == 3 && i == 2 ? 1 : dims[j++];
        if (!fits_int(v)) return 0;
        out[i] = (int)v;
        total *= v;
        if (total > INT_MAX) return 0;
    }
    return nb;
}

static cudnnStatus_t set_tensor(cudnnTensorDescriptor_t d, cudnnDataType_t dt, int nb,
                                const int *dims) {
    int strides[5];
    int s = 1;
    for (int i = nb - 1; i >= 0; i--) {
        strides[i] = s;
        s *= dims[i] > 0 ? dims[i] : 1;
    }
    return cudnnSetTensorNdDescriptor(d, dt, nb, dims, strides);
}

static cudnnDataType_t dnn_type(ox_dtype dt) {
    if (dt == OX_BFLOAT16) return CUDNN_DATA_BFLOAT16;
    return dt == OX_FLOAT ? CUDNN_DATA_FLOAT : CUDNN_DATA_HALF;
}

/* The math cuDNN may use: float32 stays on FMA units unless TF32 is allowed (cuDNN's
 * default math allows TF32 on Ampere and later); float16 and bfloat16 on tensor cores. */
static cudnnMathType_t dnn_math(const struct ox_cuda_ctx *c, ox_dtype dt) {
    if (dt == OX_FLOAT16 || dt == OX_BFLOAT16) return CUDNN_TENSOR_OP_MATH;
    return c->tf32 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH;
}

/* A forward or backward-data convolution algorithm rounds like a direct sum: not FFT or
 * Winograd (the precise plans of gradient graphs keep to these, as the CPU keeps out of its
 * Winograd form). */
static bool fwd_precise(cudnnConvolutionFwdAlgo_t a) {
    return a != CUDNN_CONVOLUTION_FWD_ALGO_FFT && a != CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING &&
           a != CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD &&
           a != CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED;
}
static bool bwd_data_precise(cudnnConvolutionBwdDataAlgo_t a) {
    return a != CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT &&
           a != CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING &&
           a != CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD &&
           a != CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED;
}

/* An algorithm's math is acceptable: no tensor cores for float32 without TF32. */
static bool math_ok(const struct ox_cuda_ctx *c, ox_dtype dt, cudnnMathType_t m) {
    if (dt == OX_FLOAT && !c->tf32)
        return m != CUDNN_TENSOR_OP_MATH && m != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
    return true;
}

/* Scratch buffers for finding algorithms in prepare: freed on every path. */
struct scratch {
    void *p[8];
    int n;
};

static void *scratch_get(struct scratch *s, size_t bytes) {
    void *p = NULL;
    if (s->n >= 8) return NULL;
    if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) {
        (void)cudaGetLastError(); /* clear the failed allocation */
        return NULL;
    }
    /* synchronized: the work that uses it runs on another stream */
    if (cudaMemset(p, 0, bytes ? bytes : 1) != cudaSuccess ||
        cudaDeviceSynchronize() != cudaSuccess) {
        (void)cudaGetLastError();
        cudaFree(p);
        return NULL;
    }
    s->p[s->n++] = p;
    return p;
}

/* Workspace for the search: up to 512 MiB, at most an eighth of free memory. */
static void *scratch_ws(struct scratch *s, size_t *bytes) {
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
        (void)cudaGetLastError();
        free_b = 0;
    }
    size_t cap = (size_t)512 << 20;
    if (free_b / 8 < cap) cap = free_b / 8;
    for (; cap >= ((size_t)1 << 20); cap /= 2) {
        void *p = scratch_get(s, cap);
        if (p) {
            *bytes = cap;
            return p;
        }
    }
    *bytes = 0;
    return NULL;
}

static void scratch_free(struct scratch *s) {
    for (int i = 0; i < s->n; i++) cudaFree(s->p[i]);
    s->n = 0;
}

/* ---- GEMMs ----------------------------------------------------------------------------- */

/* One row-major product Y = alpha op(A) op(B) as cuBLAS's column-major Y^T = op(B)^T op(A)^T:
 * B goes first. count > 1: a strided batch. */
struct gemm_call {
    cublasOperation_t ta, tb; /* of A and B as stored row-major */
    int m, n, k;              /* cuBLAS's: N, rows of Y, K */
    int lda, ldb;             /* row strides of A and B */
    long long sa, sb, sy;     /* batch strides in elements */
    int count;
};

static bool gemm_fits(int64_t rows, int64_t N, int64_t K, int64_t lda, int64_t ldb) {
    return fits_int(rows) && fits_int(N) && fits_int(K) && fits_int(lda) && fits_int(ldb);
}

/* cuBLAS's type of the elements. */
static cudaDataType_t blas_type(ox_dtype dt) {
    if (dt == OX_BFLOAT16) return CUDA_R_16BF;
    return dt == OX_FLOAT ? CUDA_R_32F : CUDA_R_16F;
}

/* Y = alpha op(A) op(B) + beta Y. */
static ox_status gemm_run(struct ox_cuda_ctx *c, ox_dtype dt, const struct gemm_call *g,
                          float alpha, const void *A, const void *B, float beta, void *Y) {
    cudaDataType_t t = blas_type(dt);
    cublasComputeType_t ct =
        dt == OX_FLOAT && c->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    ox_status st = ox_cu_blas_check(
        cublasSetMathMode(c->blas, c->tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
        "cublasSetMathMode");
    if (st) return st;
    /* column-major: A' = B (op tb), B' = A (op ta) */
    if (g->count == 1)
        return ox_cu_blas_check(cublasGemmEx(c->blas, g->tb, g->ta, g->m, g->n, g->k, &alpha, B, t,
                                             g->ldb, A, t, g->lda, &beta, Y, t, g->m, ct,
                                             CUBLAS_GEMM_DEFAULT),
                                "cublasGemmEx");
    return ox_cu_blas_check(cublasGemmStridedBatchedEx(c->blas, g->tb, g->ta, g->m, g->n, g->k,
                                                       &alpha, B, t, g->ldb, g->sb, A, t, g->lda,
                                                       g->sa, &beta, Y, t, g->m, g->sy, g->count,
                                                       ct, CUBLAS_GEMM_DEFAULT),
                            "cublasGemmStridedBatchedEx");
}

/* The same product with a bias over Y's last axis added in the GEMM's epilogue (cuBLASLt's
 * CUBLASLT_EPILOGUE_BIAS), not in passes over Y of their own (broadcast into Y, then read
 * back by the GEMM as beta Y): a BERT layer's four linear layers write and read 113 MB less
 * at batch 32 in float32. One product (count 1); the bias is set at each run. */
/* Microseconds of one call of run() (the best of three, after one to warm up), or -1 when it
 * fails. */
template <typename F> static float time_us(struct ox_cuda_ctx *c, F run) {
    cudaEvent_t e0, e1;
    if (cudaEventCreate(&e0) != cudaSuccess) return -1;
    if (cudaEventCreate(&e1) != cudaSuccess) {
        cudaEventDestroy(e0);
        return -1;
    }
    float best = -1;
    bool ok = run() && cudaStreamSynchronize(c->stream) == cudaSuccess;
    for (int r = 0; r < 3 && ok; r++) {
        float ms = 0;
        ok = cudaEventRecord(e0, c->stream) == cudaSuccess && run() &&
             cudaEventRecord(e1, c->stream) == cudaSuccess &&
             cudaEventSynchronize(e1) == cudaSuccess &&
             cudaEventElapsedTime(&ms, e0, e1) == cudaSuccess;
        if (ok && (best < 0 || ms * 1000 < best)) best = ms * 1000;
    }
    if (!ok) {
        (void)cudaGetLastError(); /* a failed candidate is not an error of the node */
        best = -1;
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    return best;
}

struct lt_gemm {
    bool on;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, ly; /* cuBLAS's column-major A' = B, B' = A, and Y */
    cublasLtMatmulAlgo_t algo;
    int algo_best; /* its rank in the heuristics' list */
};
#define LT_ALGOS 8 /* algorithms of the heuristics timed */

static void lt_release(struct lt_gemm *l) {
    if (l->desc) cublasLtMatmulDescDestroy(l->desc);
    if (l->la) cublasLtMatrixLayoutDestroy(l->la);
    if (l->lb) cublasLtMatrixLayoutDestroy(l->lb);
    if (l->ly) cublasLtMatrixLayoutDestroy(l->ly);
    memset(l, 0, sizeof *l);
}

/* The largest power of two up to 256 that divides the address. */
static uint32_t align_of(const void *p) {
    uintptr_t a = (uintptr_t)p;
    uint32_t r = 256;
    while (r > 1 && a % r) r /= 2;
    return r;
}

static ox_status lt_run(struct ox_cuda_ctx *c, const struct lt_gemm *l, float alpha, const void *A,
                        const void *B, const void *bias, void *Y) {
    float beta = 0.0f;
    ox_status st =
        ox_cu_blas_check(cublasLtMatmulDescSetAttribute(l->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                        &bias, sizeof bias),
                         "cublasLtMatmulDescSetAttribute");
    if (st) return st;
    return ox_cu_blas_check(cublasLtMatmul(c->lt, l->desc, &alpha, B, l->la, A, l->lb, &beta, Y,
                                           l->ly, Y, l->ly, &l->algo, c->blas_ws, c->blas_ws_bytes,
                                           c->stream),
                            "cublasLtMatmul");
}

/* Set l up for g (count 1) with the pointers of prepare (their alignment guides cuBLASLt's
 * choice; the heuristics' first LT_ALGOS algorithms are timed on them), and try it once:
 * l->on only where cuBLASLt takes it. OX_CUDA_LT=0 turns it off, OX_CUDA_LT=first takes the
 * heuristics' first algorithm untimed (measurements). Y is the step's own output, so the trial
 * writes nothing another step reads. */
static void lt_setup(struct ox_cuda_ctx *c, struct lt_gemm *l, ox_dtype dt,
                     const struct gemm_call *g, float alpha, const void *A, const void *B,
                     const void *bias, void *Y, const char *name) {
    memset(l, 0, sizeof *l);
    const char *env = getenv("OX_CUDA_LT");
    if ((env && strcmp(env, "0") == 0) || g->count != 1 || align_of(bias) < 16) return;
    cudaDataType_t t = blas_type(dt);
    cublasComputeType_t ct =
        dt == OX_FLOAT && c->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    cublasOperation_t ta = g->tb, tb = g->ta; /* column-major: A' = B, B' = A */
    bool ok = cublasLtMatmulDescCreate(&l->desc, ct, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS &&
              cublasLtMatmulDescSetAttribute(l->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta,
                                             sizeof ta) == CUBLAS_STATUS_SUCCESS &&
              cublasLtMatmulDescSetAttribute(l->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb,
                                             sizeof tb) == CUBLAS_STATUS_SUCCESS &&
              cublasLtMatmulDescSetAttribute(l->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi,
                                             sizeof epi) == CUBLAS_STATUS_SUCCESS &&
              cublasLtMatmulDescSetAttribute(l->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &t,
                                             sizeof t) == CUBLAS_STATUS_SUCCESS;
    /* stored extents: A' is m x k (k x m transposed), B' k x n (n x k), Y m x n */
    ok = ok &&
         cublasLtMatrixLayoutCreate(&l->la, t, ta == CUBLAS_OP_N ? g->m : g->k,
                                    ta == CUBLAS_OP_N ? g->k : g->m,
                                    g->ldb) == CUBLAS_STATUS_SUCCESS &&
         cublasLtMatrixLayoutCreate(&l->lb, t, tb == CUBLAS_OP_N ? g->k : g->n,
                                    tb == CUBLAS_OP_N ? g->n : g->k,
                                    g->lda) == CUBLAS_STATUS_SUCCESS &&
         cublasLtMatrixLayoutCreate(&l->ly, t, g->m, g->n, g->m) == CUBLAS_STATUS_SUCCESS;
    cublasLtMatmulPreference_t pref = NULL;
    uint64_t ws = c->blas_ws_bytes;
    uint32_t al[3] = {align_of(B), align_of(A), align_of(Y)};
    ok = ok && cublasLtMatmulPreferenceCreate(&pref) == CUBLAS_STATUS_SUCCESS &&
         cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                              sizeof ws) == CUBLAS_STATUS_SUCCESS &&
         cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                              &al[0], sizeof al[0]) == CUBLAS_STATUS_SUCCESS &&
         cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                              &al[1], sizeof al[1]) == CUBLAS_STATUS_SUCCESS &&
         cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                              &al[2], sizeof al[2]) == CUBLAS_STATUS_SUCCESS &&
         cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                              &al[2], sizeof al[2]) == CUBLAS_STATUS_SUCCESS;
    /* split sums added in float only (in place or in float16 or bfloat16 would round each
     * part) */
    uint32_t red = dt == OX_FLOAT ? (uint32_t)CUBLASLT_REDUCTION_SCHEME_MASK
                                  : (uint32_t)CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
    ok =
        ok && cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                                   &red, sizeof red) == CUBLAS_STATUS_SUCCESS;
    /* the heuristics' first LT_ALGOS algorithms, each timed on these buffers: the first is
     * not always the fastest (small M: a split of K) */
    cublasLtMatmulHeuristicResult_t res[LT_ALGOS];
    int found = 0;
    ok = ok &&
         cublasLtMatmulAlgoGetHeuristic(c->lt, l->desc, l->la, l->lb, l->ly, l->ly, pref,
                                        env && strcmp(env, "first") == 0 ? 1 : LT_ALGOS, res,
                                        &found) == CUBLAS_STATUS_SUCCESS &&
         found > 0;
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    float best = -1;
    for (int i = 0; ok && i < found; i++) {
        if (res[i].state != CUBLAS_STATUS_SUCCESS) continue;
        l->algo = res[i].algo;
        float t = found == 1
                      ? 0.0f
                      : time_us(c, [&] { return lt_run(c, l, alpha, A, B, bias, Y) == OX_OK; });
        if (t >= 0 && (best < 0 || t < best)) best = t, l->algo_best = i;
    }
    ok = ok && best >= 0;
    if (ok) l->algo = res[l->algo_best].algo;
    ok = ok && lt_run(c, l, alpha, A, B, bias, Y) == OX_OK &&
         cudaStreamSynchronize(c->stream) == cudaSuccess;
    (void)cudaGetLastError(); /* a refused trial is not an error of the node */
    if (!ok) {
        lt_release(l);
        ox_cu_trace("gemm '%s': cuBLAS (cuBLASLt refused it)", name);
        return;
    }
    l->on = true;
    ox_cu_trace("gemm '%s' %dx%dx%d: cuBLASLt algorithm %d of %d (%.1f us)", name, g->m, g->n, g->k,
                l->algo_best + 1, found, best);
}

/* ---- Conv, FusedConv ------------------------------------------------------------------- */

/* How a convolution runs, chosen in prepare by timing the candidates on scratch buffers:
 * - CONV_DNN: cudnnConvolutionForward, then our epilogue;
 * - CONV_FUSED: cudnnConvolutionBiasActivationForward (ReLU, Z absent or of Y's shape);
 * - CONV_GEMM: a pointwise convolution (1x1, stride 1, no pads, one group) as a strided batch
 *   of GEMMs Y_n[M, HW] = W[M, C] X_n[C, HW], then our epilogue;
 * - CONV_DW: a 2-D depthwise convolution (one input and one output channel per group) in a
 *   direct kernel of ours with the epilogue in it;
 * - CONV_COL: a 2-D convolution of one group unrolled into workspace (im2col: each image's
 *   [C*KH*KW, OH*OW] matrix of windows, as many images at a time as 64 MiB holds) and run as
 *   a strided batch of GEMMs Y_n[M, OH*OW] = W[M, C*KH*KW] col_n, then our epilogue. cuBLAS splits
 * K where the output is small (a late ResNet layer at batch 1 has 49 pixels for 4608 products
 * each), which cuDNN's tiles over pixels and channels do not;
 * - CONV_GRAPH: the convolution of one group as a cuDNN graph (the backend API, through which
 *   PyTorch reaches cuDNN: engines the legacy calls above do not all reach, float16 ones
 *   above all), the fastest of the heuristics' first engine configurations, then our
 *   epilogue. Engines that convert inputs down, reduce in less than float, use tensor cores
 *   on float32 without TF32, or (precise plans) FFT or Winograd are left out;
 * - CONV_PWK: a pointwise convolution with few input channels (K <= PWK_KMAX: MobileNet's
 *   expansions, where a GEMM of K 24 runs at a fraction of the memory's speed) in a kernel of
 *   ours: the weights in shared memory, a thread per pixel holding its K inputs in registers
 *   and writing all M outputs with the epilogue in it. */
enum { CONV_DNN, CONV_FUSED, CONV_GEMM, CONV_DW, CONV_COL, CONV_GRAPH, CONV_PWK, CONV_MODES };

/* The descriptors of a CONV_GRAPH convolution, kept for the plan's life. */
enum { GD_X, GD_W, GD_Y, GD_CONV, GD_OP, GD_GRAPH, GD_PLAN, GD_COUNT };

/* The geometry of a 2-D convolution for the direct depthwise kernel and im2col (every
 * extent fits an int). */
struct dw_geom {
    int C, H, W, OH, OW, KH, KW, SH, SW, DH, DW, PT, PL;
};

struct conv_state {
    bool empty; /* nothing to compute (no output elements) */
    ox_dtype dt;
    int mode;
    cudnnTensorDescriptor_t xd, yd, bd;
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cd;
    cudnnActivationDescriptor_t ad;
    cudnnConvolutionFwdAlgo_t algo;
    size_t ws;       /* cuDNN's workspace bytes, after tmp */
    size_t tmp;      /* bytes of workspace ahead of cuDNN's: the base output when split */
    void *zero_bias; /* device zeros for CONV_FUSED without B */
    bool split;      /* Z broadcasts the output to a larger shape */
    int base_rank;   /* the convolution's own output */
    int64_t base_dims[OX_MAX_RANK];
    int64_t M, inner; /* output channels, spatial size */
    struct act a;
    struct gemm_call pw; /* CONV_GEMM, CONV_COL */
    struct dw_geom dw;   /* CONV_DW, CONV_COL */
    size_t col;          /* CONV_COL: bytes of the unrolled windows (workspace) */
    int64_t col_images;  /* CONV_COL: images unrolled at a time (pw.count of a full block) */
    /* CONV_GRAPH: the graph's descriptors (GD_*), the chosen plan's workspace bytes */
    cudnnBackendDescriptor_t gd[GD_COUNT];
    size_t gws;
    float us[CONV_MODES]; /* each candidate's timed run (-1: not tried or refused), for the trace */
};

/* OX_CUDA_CONV's words for the modes, and the trace's. */
static const char *const conv_names[CONV_MODES] = {"dnn", "fused", "gemm", "dw",
                                                   "col", "graph", "pwk"};

/* Unique ids of the graph's tensors in the variant pack. */
enum { GUID_X = 1, GUID_W = 2, GUID_Y = 3 };
/* Engine configurations of the heuristics tried (the first ones, their best guesses). */
#define GRAPH_CFGS 8

static void bk_destroy(cudnnBackendDescriptor_t *d) {
    if (*d) cudnnBackendDestroyDescriptor(*d);
    *d = NULL;
}

void ox_cu_nn_release_conv(void *state) {
    struct conv_state *s = (struct conv_state *)state;
    if (!s) return;
    if (s->xd) cudnnDestroyTensorDescriptor(s->xd);
    if (s->yd) cudnnDestroyTensorDescriptor(s->yd);
    if (s->bd) cudnnDestroyTensorDescriptor(s->bd);
    if (s->wd) cudnnDestroyFilterDescriptor(s->wd);
    if (s->cd) cudnnDestroyConvolutionDescriptor(s->cd);
    if (s->ad) cudnnDestroyActivationDescriptor(s->ad);
    if (s->zero_bias) cudaFree(s->zero_bias);
    for (int i = GD_COUNT - 1; i >= 0; i--) bk_destroy(&s->gd[i]);
    free(s);
}

/* ---- CONV_GRAPH: the convolution as a cuDNN graph ------------------------------------- */

#define BK(call)                                                                                   \
    do {                                                                                           \
        if ((call) != CUDNN_STATUS_SUCCESS) return false;                                          \
    } while (0)

/* A packed row-major tensor of nb dims (aligned to 16 bytes: the launch checks the pointers). */
static bool bk_tensor(cudnnBackendDescriptor_t *t, cudnnDataType_t dt, int nb, const int *dims,
                      int64_t uid) {
    int64_t d[5], st[5], align = 16, stride = 1;
    for (int i = nb - 1; i >= 0; i--) {
        d[i] = dims[i];
        st[i] = stride;
        stride *= dims[i];
    }
    BK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_TENSOR_DESCRIPTOR, t));
    BK(cudnnBackendSetAttribute(*t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt));
    BK(cudnnBackendSetAttribute(*t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, nb, d));
    BK(cudnnBackendSetAttribute(*t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, nb, st));
    BK(cudnnBackendSetAttribute(*t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid));
    BK(cudnnBackendSetAttribute(*t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align));
    BK(cudnnBackendFinalize(*t));
    return true;
}

/* The graph Y = conv(X, W) (float accumulation; both ends padded by the begin pads, as the
 * legacy descriptor, whose output extent conv_setup checked). false: cuDNN refused it. */
static bool graph_build(struct ox_cuda_ctx *c, struct conv_state *s, cudnnDataType_t ddt, int nb,
                        const int *xdims, const int *wdims, const int *ydims, const int *pads,
                        const int *strides, const int *dils) {
    cudnnBackendDescriptor_t *gd = s->gd;
    int64_t nsp = nb - 2, p[3], st[3], dl[3];
    for (int i = 0; i < nsp; i++) p[i] = pads[i], st[i] = strides[i], dl[i] = dils[i];
    cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
    float alpha = 1.0f, beta = 0.0f;
    if (!bk_tensor(&gd[GD_X], ddt, nb, xdims, GUID_X) ||
        !bk_tensor(&gd[GD_W], ddt, nb, wdims, GUID_W) ||
        !bk_tensor(&gd[GD_Y], ddt, nb, ydims, GUID_Y))
        return false;
    BK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, &gd[GD_CONV]));
    cudnnBackendDescriptor_t cd = gd[GD_CONV];
    BK(cudnnBackendSetAttribute(cd, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1,
                                &nsp));
    BK(cudnnBackendSetAttribute(cd, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1,
                                &comp));
    BK(cudnnBackendSetAttribute(cd, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE,
                                1, &mode));
    BK(cudnnBackendSetAttribute(cd, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, nsp, p));
    BK(cudnnBackendSetAttribute(cd, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, nsp,
                                p));
    BK(cudnnBackendSetAttribute(cd, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, nsp, dl));
    BK(cudnnBackendSetAttribute(cd, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, nsp,
                                st));
    BK(cudnnBackendFinalize(cd));
    BK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
                                    &gd[GD_OP]));
    cudnnBackendDescriptor_t op = gd[GD_OP];
    BK(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
                                CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &gd[GD_X]));
    BK(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
                                CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &gd[GD_W]));
    BK(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y,
                                CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &gd[GD_Y]));
    BK(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
                                CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cd));
    BK(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
                                CUDNN_TYPE_FLOAT, 1, &alpha));
    BK(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT,
                                1, &beta));
    BK(cudnnBackendFinalize(op));
    BK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &gd[GD_GRAPH]));
    BK(cudnnBackendSetAttribute(gd[GD_GRAPH], CUDNN_ATTR_OPERATIONGRAPH_OPS,
                                CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &op));
    BK(cudnnBackendSetAttribute(gd[GD_GRAPH], CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE,
                                1, &c->dnn));
    BK(cudnnBackendFinalize(gd[GD_GRAPH]));
    return true;
}

/* Whether an engine configuration's numerical notes suit the plan (see CONV_GRAPH); *compiles:
 * whether finalizing it compiles kernels (cuDNN's runtime-compiled engines). */
static bool graph_cfg_ok(const struct ox_cuda_ctx *c, ox_dtype dt, cudnnBackendDescriptor_t cfg,
                         bool *compiles) {
    cudnnBackendDescriptor_t eng = NULL;
    cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
    cudnnBackendBehaviorNote_t behavior[CUDNN_BEHAVIOR_NOTE_TYPE_COUNT];
    int64_t n = 0, k = 0, kb = 0;
    bool ok =
        cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &eng) ==
            CUDNN_STATUS_SUCCESS &&
        cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                 &n, &eng) == CUDNN_STATUS_SUCCESS &&
        cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                 CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &k,
                                 notes) == CUDNN_STATUS_SUCCESS;
    *compiles = true; /* unknown: as if it did */
    if (ok && cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE,
                                       CUDNN_TYPE_BEHAVIOR_NOTE, CUDNN_BEHAVIOR_NOTE_TYPE_COUNT,
                                       &kb, behavior) == CUDNN_STATUS_SUCCESS) {
        *compiles = false;
        for (int64_t i = 0; i < kb && i < CUDNN_BEHAVIOR_NOTE_TYPE_COUNT; i++)
            if (behavior[i] == CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION) *compiles = true;
    }
    for (int64_t i = 0; ok && i < k && i < CUDNN_NUMERICAL_NOTE_TYPE_COUNT; i++) {
        switch (notes[i]) {
        case CUDNN_NUMERICAL_NOTE_TENSOR_CORE:
            ok = dt == OX_FLOAT16 || dt == OX_BFLOAT16 || c->tf32;
            break;
        case CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS:
        case CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION: ok = false; break;
        case CUDNN_NUMERICAL_NOTE_FFT:
        case CUDNN_NUMERICAL_NOTE_WINOGRAD:
        case CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_4x4:
        case CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_6x6:
        case CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_13x13: ok = !c->precise; break;
        default: break;
        }
    }
    bk_destroy(&eng);
    return ok;
}

/* Runs plan on x, w into y with workspace ws (a variant pack made for the call). */
static bool graph_exec(struct ox_cuda_ctx *c, cudnnBackendDescriptor_t plan, const void *x,
                       const void *w, void *y, void *ws) {
    cudnnBackendDescriptor_t vp = NULL;
    int64_t uids[3] = {GUID_X, GUID_W, GUID_Y};
    void *ptrs[3] = {(void *)x, (void *)w, y};
    bool ok = cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp) ==
                  CUDNN_STATUS_SUCCESS &&
              cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3,
                                       uids) == CUDNN_STATUS_SUCCESS &&
              cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS,
                                       CUDNN_TYPE_VOID_PTR, 3, ptrs) == CUDNN_STATUS_SUCCESS &&
              cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR,
                                       1, &ws) == CUDNN_STATUS_SUCCESS &&
              cudnnBackendFinalize(vp) == CUDNN_STATUS_SUCCESS &&
              cudnnBackendExecute(c->dnn, plan, vp) == CUDNN_STATUS_SUCCESS;
    bk_destroy(&vp);
    return ok;
}

/* Whether the graph's pointers are as aligned as its tensors say (arena offsets are; a view's
 * may not be: such a run takes the legacy call). */
static bool graph_aligned(const void *x, const void *w, const void *y, const void *ws) {
    return ox_cu_aligned(x, 16) && ox_cu_aligned(w, 16) && ox_cu_aligned(y, 16) &&
           ox_cu_aligned(ws, 16);
}
#undef BK

/* y = act(round(conv(x, w) + bias) + z) over `total` outputs (planes of OH x OW), I the index
 * type (int where every offset fits). */
template <typename T, typename I>
__global__ void depthwise(const T *x, const T *w, const T *bias, const T *z, T *y, I total,
                          struct dw_geom g, struct act a) {
    I S = (I)g.OH * g.OW;
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (I)gridDim.x * blockDim.x) {
        I p = i / S, q = i - p * S;
        int oh = (int)(q / g.OW), ow = (int)(q - (I)oh * g.OW), c = (int)(p % g.C);
        const T *xp = x + p * ((I)g.H * g.W), *wc = w + c * g.KH * g.KW;
        int h0 = oh * g.SH - g.PT, w0 = ow * g.SW - g.PL;
        float acc = 0.0f;
        for (int kh = 0; kh < g.KH; kh++) {
            int ih = h0 + kh * g.DH;
            if (ih < 0 || ih >= g.H) continue;
            const T *xr = xp + (I)ih * g.W;
            for (int kw = 0; kw < g.KW; kw++) {
                int iw = w0 + kw * g.DW;
                if (iw >= 0 && iw < g.W)
                    acc += ox_cu_to_f<T>(xr[iw]) * ox_cu_to_f<T>(wc[kh * g.KW + kw]);
            }
        }
        if (bias) acc += ox_cu_to_f<T>(bias[c]);
        float v = round_to<T>(acc); /* the convolution's output, as stored */
        if (z) v = round_to<T>(v + ox_cu_to_f<T>(z[i]));
        y[i] = ox_cu_from_f<T>(apply_act(v, a));
    }
}

template <typename T>
static void depthwise_launch(cudaStream_t st, const struct dw_geom *g, int64_t total, const void *x,
                             const void *w, const void *b, const void *z, void *y, struct act a) {
    const T *xt = (const T *)x, *wt = (const T *)w, *bt = (const T *)b, *zt = (const T *)z;
    int64_t nx = total / ((int64_t)g->OH * g->OW) * g->H * g->W; /* the input's elements */
    /* total at most half an int's range: index plus grid stride stays in an int (pool_launch) */
    if (total <= INT32_MAX / 2 && nx <= INT32_MAX)
        depthwise<T, int>
            <<<ox_cu_blocks(total), 256, 0, st>>>(xt, wt, bt, zt, (T *)y, (int)total, *g, a);
    else
        depthwise<T, int64_t>
            <<<ox_cu_blocks(total), 256, 0, st>>>(xt, wt, bt, zt, (T *)y, total, *g, a);
}

#define PWK_KMAX  64
#define PWK_WSMEM 12288 /* weights (M x K rounded up to 4) held in shared memory, floats */

/* y[n][m][p] = act(round(sum_k w[m][k] x[n][k][p] + bias[m]) + z[n][m][p]) for a pointwise
 * convolution of K <= KMAX input channels: w (K padded to Kp, a multiple of 4, with zeros) in
 * shared memory read four at a time, a thread per pixel with its K inputs in registers. */
template <typename T, int KMAX>
__global__ void __launch_bounds__(256)
    pw_small_k(const T *x, const T *w, const T *bias, const T *z, T *y, int64_t N, int M, int K,
               int64_t P, struct act a) {
    extern __shared__ float4 wsm4[];
    float *wsm = (float *)wsm4;
    const int Kp = (K + 3) & ~3;
    for (int i = threadIdx.x; i < M * Kp; i += blockDim.x) {
        int m = i / Kp, k = i - m * Kp;
        wsm[i] = k < K ? ox_cu_to_f<T>(w[m * K + k]) : 0.0f;
    }
    __syncthreads();
    for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < N * P;
         idx += (int64_t)gridDim.x * blockDim.x) {
        int64_t n = idx / P, p = idx - n * P;
        const T *xp = x + n * K * P + p;
        float xv[KMAX];
#pragma unroll
        for (int k = 0; k < KMAX; k++) xv[k] = k < K ? ox_cu_to_f<T>(xp[k * P]) : 0.0f;
        T *yp = y + n * M * P + p;
        const T *zp = z ? z + n * M * P + p : NULL;
        for (int m = 0; m < M; m++) {
            const float4 *wr = wsm4 + m * (Kp / 4);
            float acc = 0.0f;
#pragma unroll
            for (int k4 = 0; k4 < KMAX / 4; k4++) {
                if (4 * k4 >= Kp) break;
                float4 wv = wr[k4];
                acc += wv.x * xv[4 * k4] + wv.y * xv[4 * k4 + 1] + wv.z * xv[4 * k4 + 2] +
                       wv.w * xv[4 * k4 + 3];
            }
            if (bias) acc += ox_cu_to_f<T>(bias[m]);
            float v = round_to<T>(acc); /* the convolution's output, as stored */
            if (zp) v = round_to<T>(v + ox_cu_to_f<T>(zp[m * P]));
            yp[m * P] = ox_cu_from_f<T>(apply_act(v, a));
        }
    }
}

/* pw_small_k for s's pointwise geometry (N images of P pixels, K inputs, M outputs). */
template <typename T>
static void pwk_launch(cudaStream_t st, int64_t N, int M, int K, int64_t P, const void *x,
                       const void *w, const void *b, const void *z, void *y, struct act a) {
    size_t smem = (size_t)M * (size_t)((K + 3) & ~3) * sizeof(float);
    unsigned blocks = ox_cu_blocks(N * P);
    const T *xt = (const T *)x, *wt = (const T *)w, *bt = (const T *)b, *zt = (const T *)z;
    if (K <= 16)
        pw_small_k<T, 16><<<blocks, 256, smem, st>>>(xt, wt, bt, zt, (T *)y, N, M, K, P, a);
    else if (K <= 32)
        pw_small_k<T, 32><<<blocks, 256, smem, st>>>(xt, wt, bt, zt, (T *)y, N, M, K, P, a);
    else
        pw_small_k<T, PWK_KMAX><<<blocks, 256, smem, st>>>(xt, wt, bt, zt, (T *)y, N, M, K, P, a);
}

/* col[n][k][p] = x[n][c][ih][iw] for k = (c, kh, kw) and p = (oh, ow), ih = oh * SH - PT +
 * kh * DH (likewise iw), 0 where that falls in the padding; consecutive threads write
 * consecutive pixels. I the index type. */
template <typename T, typename I>
__global__ void im2col(const T *x, T *col, I total, struct dw_geom g) {
    I P = (I)g.OH * g.OW, KK = (I)g.KH * g.KW, K = (I)g.C * KK;
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (I)gridDim.x * blockDim.x) {
        I r = i % (K * P), n = i / (K * P);
        I k = r / P, p = r - k * P;
        int c = (int)(k / KK), kk = (int)(k - (I)c * KK);
        int kh = kk / g.KW, kw = kk - kh * g.KW;
        int oh = (int)(p / g.OW), ow = (int)(p - (I)oh * g.OW);
        int ih = oh * g.SH - g.PT + kh * g.DH, iw = ow * g.SW - g.PL + kw * g.DW;
        T v = ox_cu_from_f<T>(0.0f);
        if (ih >= 0 && ih < g.H && iw >= 0 && iw < g.W)
            v = x[((n * g.C + c) * g.H + ih) * g.W + iw];
        col[i] = v;
    }
}

template <typename T>
static void im2col_launch(cudaStream_t st, const struct dw_geom *g, int64_t images, const void *x,
                          void *col) {
    int64_t total = images * g->C * g->KH * g->KW * g->OH * g->OW;
    int64_t nx = images * g->C * g->H * g->W;
    if (total <= INT32_MAX && nx <= INT32_MAX)
        im2col<T, int><<<ox_cu_blocks(total), 256, 0, st>>>((const T *)x, (T *)col, (int)total, *g);
    else
        im2col<T, int64_t><<<ox_cu_blocks(total), 256, 0, st>>>((const T *)x, (T *)col, total, *g);
}

/* The node's work in mode `mode` when Z is absent or of Y's shape (not split): the one path
 * that both run and the timing in prepare take. ws: cuDNN's workspace. */
static ox_status conv_launch(struct ox_cuda_ctx *c, const struct conv_state *s, int mode,
                             const void *x, const void *w, const void *b, const void *z, void *y,
                             void *ws) {
    float one = 1.0f, zero = 0.0f;
    int64_t total = s->base_dims[0] * s->M * s->inner;
    if (mode == CONV_FUSED) {
        float alpha2 = z ? 1.0f : 0.0f; /* no Z: y stands in, unread (alpha2 = 0) */
        return ox_cu_dnn_check(
            cudnnConvolutionBiasActivationForward(c->dnn, &one, s->xd, x, s->wd, w, s->cd, s->algo,
                                                  ws, s->ws, &alpha2, s->yd, z ? z : y, s->bd,
                                                  b ? b : s->zero_bias, s->ad, s->yd, y),
            "cudnnConvolutionBiasActivationForward");
    }
    if (mode == CONV_PWK) {
        int K = s->pw.k, M = (int)s->M;
        if (s->dt == OX_FLOAT)
            pwk_launch<float>(c->stream, s->base_dims[0], M, K, s->inner, x, w, b, z, y, s->a);
        else if (s->dt == OX_BFLOAT16)
            pwk_launch<__nv_bfloat16>(c->stream, s->base_dims[0], M, K, s->inner, x, w, b, z, y,
                                      s->a);
        else
            pwk_launch<__half>(c->stream, s->base_dims[0], M, K, s->inner, x, w, b, z, y, s->a);
        return ox_cu_launched("pointwise convolution");
    }
    if (mode == CONV_DW) {
        if (s->dt == OX_FLOAT)
            depthwise_launch<float>(c->stream, &s->dw, total, x, w, b, z, y, s->a);
        else if (s->dt == OX_BFLOAT16)
            depthwise_launch<__nv_bfloat16>(c->stream, &s->dw, total, x, w, b, z, y, s->a);
        else
            depthwise_launch<__half>(c->stream, &s->dw, total, x, w, b, z, y, s->a);
        return ox_cu_launched("depthwise convolution");
    }
    ox_status st;
    if (mode == CONV_GRAPH && !graph_aligned(x, w, y, ws)) mode = CONV_DNN; /* s->ws covers it */
    if (mode == CONV_GRAPH) {
        st = graph_exec(c, s->gd[GD_PLAN], x, w, y, ws)
                 ? OX_OK
                 : ox_cu_dnn_check(CUDNN_STATUS_EXECUTION_FAILED, "cudnnBackendExecute");
    } else if (mode == CONV_COL) {
        /* per block of images: their windows into ws (s->col bytes at most), then the GEMMs
         * read them as the pointwise B */
        size_t esz = s->dt == OX_FLOAT ? 4 : 2;
        size_t xstep = (size_t)s->dw.C * s->dw.H * s->dw.W * esz,
               ystep = (size_t)(s->M * s->inner) * esz;
        st = OX_OK;
        for (int64_t n0 = 0; n0 < s->base_dims[0] && !st; n0 += s->col_images) {
            struct gemm_call g = s->pw;
            int64_t nb =
                s->base_dims[0] - n0 < s->col_images ? s->base_dims[0] - n0 : s->col_images;
            const char *xb = (const char *)x + (size_t)n0 * xstep;
            if (s->dt == OX_FLOAT)
                im2col_launch<float>(c->stream, &s->dw, nb, xb, ws);
            else if (s->dt == OX_BFLOAT16)
                im2col_launch<__nv_bfloat16>(c->stream, &s->dw, nb, xb, ws);
            else
                im2col_launch<__half>(c->stream, &s->dw, nb, xb, ws);
            g.count = (int)nb;
            if (!(st = ox_cu_launched("im2col")))
                st = gemm_run(c, s->dt, &g, 1.0f, w, ws, 0.0f, (char *)y + (size_t)n0 * ystep);
        }
    } else if (mode == CONV_GEMM)
        st = gemm_run(c, s->dt, &s->pw, 1.0f, w, x, 0.0f, y);
    else
        st = ox_cu_dnn_check(cudnnConvolutionForward(c->dnn, &one, s->xd, x, s->wd, w, s->cd,
                                                     s->algo, ws, s->ws, &zero, s->yd, y),
                             "cudnnConvolutionForward");
    if (st || (!b && !z && act_is_none(s->a))) return st;
    /* one pass for bias, residual and activation */
    struct epi e = {b, s->inner, s->M, 1.0f, z, 1.0f, s->a};
    epi_channel_run(s->dt, c->stream, y, total, e);
    return ox_cu_launched("FusedConv epilogue");
}

/* Microseconds of one run of mode, or -1 when it fails. */
static float conv_time(struct ox_cuda_ctx *c, const struct conv_state *s, int mode, const void *x,
                       const void *w, const void *b, const void *z, void *y, void *ws) {
    return time_us(c, [&] { return conv_launch(c, s, mode, x, w, b, z, y, ws) == OX_OK; });
}

/* Whether plan's run can be captured into a CUDA graph (as the executor captures a plan's
 * runs): tried on a throwaway capture. */
static bool graph_capturable(struct ox_cuda_ctx *c, cudnnBackendDescriptor_t plan, const void *x,
                             const void *w, void *y, void *ws) {
    cudaGraph_t g = NULL;
    if (cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
        (void)cudaGetLastError();
        return false;
    }
    bool ok = graph_exec(c, plan, x, w, y, ws);
    ok = cudaStreamEndCapture(c->stream, &g) == cudaSuccess && ok && g;
    if (g) cudaGraphDestroy(g);
    (void)cudaGetLastError();
    return ok;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Milliseconds this process has spent in graph_pick, on all its GPUs. */
static std::atomic<long long> graph_search_ms{0};

/* A plan of cfg, finalized, timed and tried under a capture: kept in s (its workspace in
 * s->gws) when it runs faster than *best microseconds (or *best < 0). */
static void graph_try(struct ox_cuda_ctx *c, struct conv_state *s, cudnnBackendDescriptor_t cfg,
                      const void *x, const void *w, void *y, void *ws, size_t cap, float *best) {
    cudnnBackendDescriptor_t plan = NULL;
    int64_t wsz = -1, n = 0;
    bool made =
        cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan) ==
            CUDNN_STATUS_SUCCESS &&
        cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1,
                                 &c->dnn) == CUDNN_STATUS_SUCCESS &&
        cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                                 CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg) == CUDNN_STATUS_SUCCESS &&
        cudnnBackendFinalize(plan) == CUDNN_STATUS_SUCCESS &&
        cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64,
                                 1, &n, &wsz) == CUDNN_STATUS_SUCCESS &&
        wsz >= 0 && (size_t)wsz <= cap;
    float t = made ? time_us(c, [&] { return graph_exec(c, plan, x, w, y, ws); }) : -1;
    if (t >= 0 && (*best < 0 || t < *best) && graph_capturable(c, plan, x, w, y, ws)) {
        bk_destroy(&s->gd[GD_PLAN]);
        s->gd[GD_PLAN] = plan;
        s->gws = (size_t)wsz;
        *best = t;
    } else {
        bk_destroy(&plan);
    }
}

/* CONV_GRAPH's plan: of the heuristics' first GRAPH_CFGS engine configurations whose notes
 * suit the plan, whose workspace fits cap and whose run can be captured, the fastest on the
 * trial buffers (kept in s->gd[GD_PLAN], its workspace in s->gws). false: none. */
static bool graph_pick(struct ox_cuda_ctx *c, struct conv_state *s, const void *x, const void *w,
                       void *y, void *ws, size_t cap) {
    cudnnBackendDescriptor_t heur = NULL, cfg[GRAPH_CFGS] = {NULL};
    cudnnBackendHeurMode_t hm = CUDNN_HEUR_MODE_A;
    int64_t got = 0;
    bool ok = cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur) ==
                  CUDNN_STATUS_SUCCESS &&
              cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH,
                                       CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                       &s->gd[GD_GRAPH]) == CUDNN_STATUS_SUCCESS &&
              cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1,
                                       &hm) == CUDNN_STATUS_SUCCESS &&
              cudnnBackendFinalize(heur) == CUDNN_STATUS_SUCCESS;
    for (int i = 0; ok && i < GRAPH_CFGS; i++)
        ok = cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfg[i]) ==
             CUDNN_STATUS_SUCCESS;
    if (ok)
        ok = cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                      CUDNN_TYPE_BACKEND_DESCRIPTOR, GRAPH_CFGS, &got,
                                      cfg) == CUDNN_STATUS_SUCCESS;
    float best = -1;
    double t0 = now_s();
    /* engines whose kernels are built in first; those that compile theirs when finalized
     * (tenths of a second each) while the search has time left: half a second a
     * convolution, fifteen seconds a process */
    bool compiles[GRAPH_CFGS] = {false}, usable[GRAPH_CFGS] = {false};
    for (int64_t i = 0; ok && i < got && i < GRAPH_CFGS; i++)
        usable[i] = graph_cfg_ok(c, s->dt, cfg[i], &compiles[i]);
    for (int pass = 0; ok && pass < 2; pass++)
        for (int64_t i = 0; i < got && i < GRAPH_CFGS; i++) {
            if (!usable[i] || compiles[i] != (pass == 1)) continue;
            if (pass == 1 && (now_s() - t0 > 0.5 || graph_search_ms.load() > 15000)) break;
            graph_try(c, s, cfg[i], x, w, y, ws, cap, &best);
        }
    for (int i = 0; i < GRAPH_CFGS; i++) bk_destroy(&cfg[i]);
    bk_destroy(&heur);
    graph_search_ms += (long long)(1000 * (now_s() - t0));
    (void)cudaGetLastError();
    return s->gd[GD_PLAN] != NULL;
}

/* p[i] = pseudo-random values in [-1, 1), for the candidates' trial runs. */
template <typename T> __global__ void fill_random(T *p, int64_t n, uint32_t seed) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        uint32_t h = (uint32_t)i * 2654435761u ^ seed;
        h ^= h >> 15;
        h *= 2246822519u;
        h ^= h >> 13;
        p[i] = ox_cu_from_f<T>((float)(h & 0xffff) / 32768.0f - 1.0f);
    }
}

/* out[0] = max |a - r| and out[1] = max |r| as float bits (non-negative floats order as their
 * bits do; a NaN difference orders above every number). */
template <typename T> __global__ void max_diff(const T *a, const T *r, int64_t n, unsigned *out) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        float va = ox_cu_to_f<T>(a[i]), vr = ox_cu_to_f<T>(r[i]);
        atomicMax(&out[0], __float_as_uint(fabsf(va - vr)));
        atomicMax(&out[1], __float_as_uint(fabsf(vr)));
    }
}

static void fill_random_run(cudaStream_t st, ox_dtype dt, void *p, int64_t n, uint32_t seed) {
    if (n <= 0) return;
    if (dt == OX_FLOAT)
        fill_random<float><<<ox_cu_blocks(n), 256, 0, st>>>((float *)p, n, seed);
    else if (dt == OX_BFLOAT16)
        fill_random<__nv_bfloat16><<<ox_cu_blocks(n), 256, 0, st>>>((__nv_bfloat16 *)p, n, seed);
    else
        fill_random<__half><<<ox_cu_blocks(n), 256, 0, st>>>((__half *)p, n, seed);
}

/* Whether y agrees with the reference yr (n elements) to 2% of the reference's largest
 * magnitude: a check against gross errors of a candidate, not of its rounding. */
static bool agrees(cudaStream_t st, ox_dtype dt, const void *y, const void *yr, int64_t n,
                   unsigned *dev) {
    unsigned h[2] = {0, 0};
    if (cudaMemsetAsync(dev, 0, sizeof h, st) != cudaSuccess) return false;
    if (dt == OX_FLOAT)
        max_diff<float>
            <<<ox_cu_blocks(n), 256, 0, st>>>((const float *)y, (const float *)yr, n, dev);
    else if (dt == OX_BFLOAT16)
        max_diff<__nv_bfloat16><<<ox_cu_blocks(n), 256, 0, st>>>((const __nv_bfloat16 *)y,
                                                                 (const __nv_bfloat16 *)yr, n, dev);
    else
        max_diff<__half>
            <<<ox_cu_blocks(n), 256, 0, st>>>((const __half *)y, (const __half *)yr, n, dev);
    if (cudaMemcpyAsync(h, dev, sizeof h, cudaMemcpyDeviceToHost, st) != cudaSuccess ||
        cudaStreamSynchronize(st) != cudaSuccess)
        return false;
    float diff, ref;
    memcpy(&diff, &h[0], sizeof diff);
    memcpy(&ref, &h[1], sizeof ref);
    return diff == diff && ref == ref && diff <= 0.02f * (ref > 1.0f ? ref : 1.0f);
}

/* The cuDNN algorithm (the fastest that cuDNN measures on scratch buffers, or its heuristics'
 * first choice when the scratch cannot be had), then the mode: the fastest candidate in a
 * timed run on random data whose output agrees with cudnnConvolutionForward's (CONV_DNN, the
 * default where no such run can be made). */
static ox_status conv_choose(struct ox_cuda_ctx *c, struct conv_state *s, size_t xb, size_t wb,
                             size_t yb, bool has_b, bool has_z, bool want_fused, bool can_gemm,
                             bool can_dw, bool can_col, bool can_graph, bool can_pwk) {
    struct scratch sc = {{NULL}, 0};
    size_t esz = s->dt == OX_FLOAT ? 4 : 2, cap = 0;
    void *x = scratch_get(&sc, xb), *w = scratch_get(&sc, wb), *y = scratch_get(&sc, yb);
    void *bias = scratch_get(&sc, (size_t)s->M * esz), *z = has_z ? scratch_get(&sc, yb) : NULL;
    void *ws = x && w && y && bias && (z || !has_z) ? scratch_ws(&sc, &cap) : NULL;
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int cnt = 0;
    bool found = false;
    if (ws && cudnnFindConvolutionForwardAlgorithmEx(c->dnn, s->xd, x, s->wd, w, s->cd, s->yd, y,
                                                     CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &cnt, perf,
                                                     ws, cap) != CUDNN_STATUS_SUCCESS)
        cnt = 0;
    for (int i = 0; i < cnt && !found; i++)
        if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= cap &&
            math_ok(c, s->dt, perf[i].mathType) && (!c->precise || fwd_precise(perf[i].algo)))
            s->algo = perf[i].algo, found = true;
    if (!found) {
        cnt = 0;
        if (cudnnGetConvolutionForwardAlgorithm_v7(c->dnn, s->xd, s->wd, s->cd, s->yd,
                                                   CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &cnt,
                                                   perf) != CUDNN_STATUS_SUCCESS)
            cnt = 0;
        for (int i = 0; i < cnt && !found; i++)
            if (perf[i].status == CUDNN_STATUS_SUCCESS && math_ok(c, s->dt, perf[i].mathType) &&
                perf[i].memory <= ((size_t)512 << 20) && (!c->precise || fwd_precise(perf[i].algo)))
                s->algo = perf[i].algo, found = true;
    }
    if (!found && s->dt == OX_BFLOAT16) { /* no algorithm cuDNN says runs it: the CPU */
        scratch_free(&sc);
        return OX_E_UNSUPPORTED;
    }
    if (!found) s->algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM; /* needs no workspace */
    ox_status st = ox_cu_dnn_check(cudnnGetConvolutionForwardWorkspaceSize(
                                       c->dnn, s->xd, s->wd, s->cd, s->yd, s->algo, &s->ws),
                                   "cudnnGetConvolutionForwardWorkspaceSize");
    s->mode = CONV_DNN; /* without a timed run */
    /* OX_CUDA_CONV=dnn|fused|gemm|dw|col|graph|pwk (tests, diagnosis): that mode where it applies;
     * -MODE: any but that one (measurements) */
    const char *force = getenv("OX_CUDA_CONV");
    int forced = -1, banned = -1;
    for (int i = 0; i < CONV_MODES; i++) {
        s->us[i] = -1;
        if (force && strcmp(force, conv_names[i]) == 0) forced = i;
        if (force && force[0] == '-' && strcmp(force + 1, conv_names[i]) == 0) banned = i;
    }
    int64_t ny = (int64_t)(yb / esz);
    void *yr = NULL, *cmp = NULL;
    if (!st && ws && s->ws <= cap && (yr = scratch_get(&sc, yb)) &&
        (cmp = scratch_get(&sc, 2 * sizeof(unsigned)))) {
        fill_random_run(c->stream, s->dt, x, (int64_t)(xb / esz), 1);
        fill_random_run(c->stream, s->dt, w, (int64_t)(wb / esz), 2);
        fill_random_run(c->stream, s->dt, bias, s->M, 3);
        if (z) fill_random_run(c->stream, s->dt, z, ny, 4);
        const void *b = has_b ? bias : NULL;
        ox_status ref = conv_launch(c, s, CONV_DNN, x, w, b, z, yr, ws);
        bool have_ref = ref == OX_OK && cudaDeviceSynchronize() == cudaSuccess;
        float best = -1;
        for (int mode = CONV_DNN; mode < CONV_MODES && have_ref; mode++) {
            if ((mode == CONV_FUSED && !want_fused) || (mode == CONV_GEMM && !can_gemm) ||
                (mode == CONV_DW && !can_dw) || (mode == CONV_COL && (!can_col || s->col > cap)) ||
                (mode == CONV_GRAPH && !can_graph) || (mode == CONV_PWK && !can_pwk) ||
                (forced >= 0 && mode != forced) || (mode != CONV_DNN && mode == banned))
                continue;
            if (mode == CONV_GRAPH && !graph_pick(c, s, x, w, y, ws, cap)) continue;
            if (mode == CONV_FUSED) s->zero_bias = bias; /* borrowed for the trial */
            float t = conv_time(c, s, mode, x, w, b, z, y, ws);
            if (t >= 0 && mode != CONV_DNN && !agrees(c->stream, s->dt, y, yr, ny, (unsigned *)cmp))
                t = -1;
            s->us[mode] = t;
            if (t >= 0 && (best < 0 || t < best)) best = t, s->mode = mode;
        }
        s->zero_bias = NULL;
        (void)cudaGetLastError(); /* a failed candidate is not an error of the node */
        /* bfloat16: a cuDNN that refuses the plain call leaves the node to the CPU */
        if (ref && s->dt == OX_BFLOAT16) st = OX_E_UNSUPPORTED;
    }
    if (!st) st = ox_cu_check(cudaDeviceSynchronize(), "choosing a convolution algorithm");
    scratch_free(&sc);
    return st;
}

/* Y_n[M, P] = W[M, K] B_n[K, P] for `count` items n: A = W (shared), B_n K * P apart (each
 * extent fits an int: gemm_fits). */
static struct gemm_call weights_times(int64_t M, int64_t K, int64_t P, int64_t count) {
    struct gemm_call g;
    g.ta = g.tb = CUBLAS_OP_N;
    g.m = (int)P, g.n = (int)M, g.k = (int)K;
    g.lda = (int)K, g.ldb = (int)P;
    g.sa = 0, g.sb = K * P, g.sy = M * P;
    g.count = (int)count;
    return g;
}

/* s's descriptors, mode and workspace for the node; OX_E_UNSUPPORTED where cuDNN does not
 * take it. */
static ox_status conv_setup(struct ox_cuda_ctx *c, struct conv_state *s, const ox_tensor *x,
                            const ox_tensor *w, const ox_tensor *b, const ox_tensor *z,
                            const ox_tensor *y, const struct geom *g, int64_t group,
                            size_t *workspace) {
    int xdims[5], wdims[5], ydims[5], odims[5];
    int nb = dnn_dims(x->rank, x->dims, xdims);
    if (!nb || dnn_dims(w->rank, w->dims, wdims) != nb ||
        dnn_dims(s->base_rank, s->base_dims, ydims) != nb)
        return OX_E_UNSUPPORTED;
    int nsp = nb - 2, pads[3], strides[3], dils[3];
    for (int i = 0; i < nsp; i++) {
        int j = i - (nsp - g->nsp); /* the unit H of a 1-D convolution: j < 0 */
        int64_t p = j < 0 ? 0 : g->pb[j], sv = j < 0 ? 1 : g->s[j], dv = j < 0 ? 1 : g->d[j];
        if (!fits_int(p) || !fits_int(sv) || !fits_int(dv)) return OX_E_UNSUPPORTED;
        pads[i] = (int)p, strides[i] = (int)sv, dils[i] = (int)dv;
    }
    cudnnDataType_t ddt = dnn_type(s->dt);
    ox_status st;
    if ((st =
             ox_cu_dnn_check(cudnnCreateTensorDescriptor(&s->xd), "cudnnCreateTensorDescriptor")) ||
        (st =
             ox_cu_dnn_check(cudnnCreateTensorDescriptor(&s->yd), "cudnnCreateTensorDescriptor")) ||
        (st =
             ox_cu_dnn_check(cudnnCreateFilterDescriptor(&s->wd), "cudnnCreateFilterDescriptor")) ||
        (st = ox_cu_dnn_check(cudnnCreateConvolutionDescriptor(&s->cd),
                              "cudnnCreateConvolutionDescriptor")))
        return st;
    if (set_tensor(s->xd, ddt, nb, xdims) != CUDNN_STATUS_SUCCESS ||
        set_tensor(s->yd, ddt, nb, ydims) != CUDNN_STATUS_SUCCESS ||
        cudnnSetFilterNdDescriptor(s->wd, ddt, CUDNN_TENSOR_NCHW, nb, wdims) !=
            CUDNN_STATUS_SUCCESS ||
        cudnnSetConvolutionNdDescriptor(s->cd, nsp, pads, strides, dils, CUDNN_CROSS_CORRELATION,
                                        CUDNN_DATA_FLOAT) != CUDNN_STATUS_SUCCESS ||
        cudnnSetConvolutionGroupCount(s->cd, (int)group) != CUDNN_STATUS_SUCCESS ||
        cudnnSetConvolutionMathType(s->cd, dnn_math(c, s->dt)) != CUDNN_STATUS_SUCCESS)
        return OX_E_UNSUPPORTED;
    /* cuDNN pads both ends by the begin pads: the end pads only decide the output extent, so
     * the node is served when cuDNN's extent is the node's */
    if (cudnnGetConvolutionNdForwardOutputDim(s->cd, s->xd, s->wd, nb, odims) !=
            CUDNN_STATUS_SUCCESS ||
        memcmp(odims, ydims, sizeof(int) * (size_t)nb) != 0)
        return OX_E_UNSUPPORTED;

    bool z_ok = !s->split && (!z || ox_same_shape(z, y)); /* the modes other than CONV_DNN */
    /* the graph-API candidate, for one group (grouped and depthwise layers have their own) */
    bool can_graph =
        z_ok && group == 1 && graph_build(c, s, ddt, nb, xdims, wdims, ydims, pads, strides, dils);
    (void)cudaGetLastError();
    /* ReLU: cuDNN's fused call, if it takes it */
    bool want_fused = z_ok && !s->a.silu && s->a.lo == 0.0f && s->a.hi == INFINITY;
    if (want_fused) {
        int bdims[5] = {1, (int)s->M, 1, 1, 1};
        if ((st = ox_cu_dnn_check(cudnnCreateTensorDescriptor(&s->bd),
                                  "cudnnCreateTensorDescriptor")) ||
            (st = ox_cu_dnn_check(cudnnCreateActivationDescriptor(&s->ad),
                                  "cudnnCreateActivationDescriptor")))
            return st;
        if (set_tensor(s->bd, ddt, nb, bdims) != CUDNN_STATUS_SUCCESS ||
            cudnnSetActivationDescriptor(s->ad, CUDNN_ACTIVATION_RELU, CUDNN_PROPAGATE_NAN, 0.0) !=
                CUDNN_STATUS_SUCCESS)
            want_fused = false;
    }
    /* pointwise: 1x1, stride 1, no pads, one group */
    int64_t N = x->dims[0], C = x->dims[1], HW = s->inner;
    bool can_gemm = z_ok && group == 1 && fits_int(N) && gemm_fits(s->M, HW, C, C, HW);
    for (int i = 0; i < g->nsp; i++)
        can_gemm = can_gemm && g->k[i] == 1 && g->s[i] == 1 && g->pb[i] == 0 && g->pe[i] == 0;
    if (can_gemm) s->pw = weights_times(s->M, C, HW, N); /* B = X_n */
    bool can_pwk = can_gemm && C <= PWK_KMAX && s->M * ((C + 3) & ~3) <= PWK_WSMEM;
    /* 2-D geometry in ints: depthwise (one input and one output channel per group), and
     * im2col for one group where the convolution is not pointwise */
    size_t esz = s->dt == OX_FLOAT ? 4 : 2,
           ybytes = (size_t)(s->base_dims[0] * s->M * s->inner) * esz;
    bool geom2 = z_ok && g->nsp == 2;
    if (geom2) {
        const int64_t v[13] = {C,       g->in[0], g->in[1], g->out[0], g->out[1], g->k[0], g->k[1],
                               g->s[0], g->s[1],  g->d[0],  g->d[1],   g->pb[0],  g->pb[1]};
        for (int i = 0; i < 13; i++) geom2 = geom2 && fits_int(v[i]);
        /* every position computed in int: the window's ends and an output plane */
        geom2 = geom2 && fits_int(g->out[0] * g->s[0] + g->k[0] * g->d[0]) &&
                fits_int(g->out[1] * g->s[1] + g->k[1] * g->d[1]) &&
                fits_int(g->out[0] * g->out[1]) && fits_int(g->in[0] * g->in[1]);
        if (geom2) {
            struct dw_geom d = {(int)C,         (int)g->in[0], (int)g->in[1], (int)g->out[0],
                                (int)g->out[1], (int)g->k[0],  (int)g->k[1],  (int)g->s[0],
                                (int)g->s[1],   (int)g->d[0],  (int)g->d[1],  (int)g->pb[0],
                                (int)g->pb[1]};
            s->dw = d;
        }
    }
    bool can_dw = geom2 && group == C && s->M == C;
    /* im2col: the windows of as many images at a time as 64 MiB holds (one at least) */
    int64_t K = C * g->k[0] * (g->nsp == 2 ? g->k[1] : 1),
            col_cap = ((int64_t)64 << 20) / (int64_t)esz;
    bool can_col = geom2 && !can_gemm && group == 1 && fits_int(N) && fits_int(K) &&
                   gemm_fits(s->M, HW, K, K, HW) && K * HW <= col_cap;
    if (can_col) {
        s->col_images = col_cap / (K * HW) < N ? col_cap / (K * HW) : N;
        s->col = (size_t)(s->col_images * K * HW) * esz;
        s->pw = weights_times(s->M, K, HW, s->col_images); /* B = col_n, a block's images */
    }
    st = conv_choose(c, s, (size_t)ox_tensor_numel(x) * esz, (size_t)ox_tensor_numel(w) * esz,
                     ybytes, b != NULL, z != NULL && z_ok, want_fused, can_gemm, can_dw, can_col,
                     can_graph, can_pwk);
    if (st) return st;
    if (s->mode == CONV_FUSED && !b) {
        if ((st = ox_cu_check(cudaMalloc(&s->zero_bias, (size_t)s->M * esz), "cudaMalloc")) ||
            (st = ox_cu_check(cudaMemset(s->zero_bias, 0, (size_t)s->M * esz), "cudaMemset")))
            return st;
    }
    if (s->mode == CONV_GRAPH) /* the legacy call's workspace too, for unaligned pointers */
        s->ws = s->gws > s->ws ? s->gws : s->ws;
    else if (s->mode != CONV_DNN && s->mode != CONV_FUSED)
        s->ws = s->mode == CONV_COL ? s->col : 0;
    if (s->mode != CONV_GRAPH)
        for (int i = GD_COUNT - 1; i >= 0; i--) bk_destroy(&s->gd[i]);
    if (s->split) s->tmp = round256(ybytes);
    *workspace = s->tmp + s->ws;
    return OX_OK;
}

ox_status ox_cu_nn_prepare_conv(struct ox_cuda_ctx *c, const struct ox_node *n,
                                const ox_tensor *const *in, ox_tensor *const *out,
                                unsigned const_inputs, void **state, size_t *workspace) {
    (void)const_inputs;
    bool fused_op = strcmp(n->domain, OX_DOMAIN_ONNXEXEC) == 0;
    const ox_tensor *x = ox_in(n, in, 0), *w = ox_in(n, in, 1), *b = ox_in(n, in, 2);
    const ox_tensor *z = fused_op ? ox_in(n, in, 3) : NULL;
    ox_tensor *y = out[0];
    if (!x || !w || !y) return OX_E_UNSUPPORTED;
    ox_dtype dt = x->dtype;
    if (!ox_cu_is_float(dt) || w->dtype != dt || y->dtype != dt || (b && b->dtype != dt) ||
        (z && z->dtype != dt))
        return OX_E_UNSUPPORTED;
    if (w->rank != x->rank || x->rank < 3 || x->rank > 5) return OX_E_UNSUPPORTED;
    int64_t kernel[SP];
    for (int i = 0; i < x->rank - 2; i++) kernel[i] = w->dims[i + 2];
    struct geom g;
    if (!geometry(n, x, kernel, x->rank - 2, false, &g)) return OX_E_UNSUPPORTED;
    int64_t group = ox_attr_int(n, "group", 1), C = x->dims[1], M = w->dims[0];
    if (group <= 0 || C % group || M % group || w->dims[1] * group != C || !fits_int(group))
        return OX_E_UNSUPPORTED;
    if (b && (b->rank != 1 || b->dims[0] != M)) return OX_E_UNSUPPORTED;

    struct conv_state *s = (struct conv_state *)calloc(1, sizeof *s);
    if (!s) return ox_node_err(n, OX_E_NOMEM, "out of memory");
    s->dt = dt;
    s->a = act_of(n);
    s->M = M;
    s->base_rank = x->rank;
    s->base_dims[0] = x->dims[0];
    s->base_dims[1] = M;
    s->inner = 1;
    for (int i = 0; i < g.nsp; i++) s->base_dims[i + 2] = g.out[i], s->inner *= g.out[i];
    s->split = !same_dims(s->base_rank, s->base_dims, y->rank, y->dims);
    int64_t nbase = s->base_dims[0] * M * s->inner;
    ox_status st = OX_OK;
    if (s->split && !z)
        st = OX_E_UNSUPPORTED; /* the CPU's infer gave another shape */
    else if (ox_tensor_numel(y) == 0 || nbase == 0)
        s->empty = true; /* nothing to compute, when Y is empty too */
    if (s->empty && ox_tensor_numel(y) != 0) st = OX_E_UNSUPPORTED;
    if (!st && !s->empty) st = conv_setup(c, s, x, w, b, z, y, &g, group, workspace);
    if (st) {
        ox_cu_nn_release_conv(s);
        return st;
    }
    if (ox_cu_tracing() && !s->empty) {
        char times[256];
        int at = 0;
        for (int i = 0; i < CONV_MODES && at < (int)sizeof times - 32; i++)
            if (s->us[i] >= 0)
                at += snprintf(times + at, sizeof times - (size_t)at, " %s %.1f", conv_names[i],
                               s->us[i]);
        ox_cu_trace("conv '%s' %s: %s (timed, us:%s)", n->name, ox_cu_float_name(dt),
                    conv_names[s->mode], at ? times : " none");
    }
    *state = s;
    return OX_OK;
}

ox_status ox_cu_nn_conv(struct ox_cuda_ctx *c, const struct ox_node *n, const ox_tensor *const *in,
                        ox_tensor *const *out) {
    const struct conv_state *s = (const struct conv_state *)c->state;
    if (s->empty) return OX_OK;
    bool fused_op = strcmp(n->domain, OX_DOMAIN_ONNXEXEC) == 0;
    const ox_tensor *x = in[0], *w = in[1], *b = ox_in(n, in, 2);
    const ox_tensor *z = fused_op ? ox_in(n, in, 3) : NULL;
    ox_tensor *y = out[0];
    void *ws = (char *)c->workspace + s->tmp;
    if (!s->split && (!z || ox_same_shape(z, y)))
        return conv_launch(c, s, s->mode, x->data, w->data, b ? b->data : NULL, z ? z->data : NULL,
                           y->data, ws);
    /* Z broadcasts (CONV_DNN): the convolution and its bias into the base output (Y, or
     * workspace when split), then Z and the activation */
    void *base = s->split ? c->workspace : y->data;
    float one = 1.0f, zero = 0.0f;
    ox_status st =
        ox_cu_dnn_check(cudnnConvolutionForward(c->dnn, &one, s->xd, x->data, s->wd, w->data, s->cd,
                                                s->algo, ws, s->ws, &zero, s->yd, base),
                        "cudnnConvolutionForward");
    if (st) return st;
    if (b) {
        struct epi e = {b->data, s->inner, s->M, 1.0f, NULL, 0.0f, act_none()};
        epi_channel_run(s->dt, c->stream, base, s->base_dims[0] * s->M * s->inner, e);
    }
    struct bcast bc = bcast_of(y, s->base_rank, s->base_dims, z);
    epi_bcast_run(s->dt, c->stream, base, z ? z->data : NULL, y->data, ox_tensor_numel(y), &bc,
                  s->a);
    return ox_cu_launched("FusedConv epilogue");
}

/* ---- ConvTranspose ---------------------------------------------------------------------- */

/* cuDNN's backward data pass of the convolution that maps Y to X: its filter [C, M/group,
 * k...] is ConvTranspose's W as it stands, and its pads are the begin pads of ConvTranspose
 * (Y[i] = full[i + pb]). Served when cuDNN's forward extent of Y is X's (the end pads and
 * output_padding then agree with it). */
struct convt_state {
    bool empty;
    ox_dtype dt;
    cudnnTensorDescriptor_t xd, yd;
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cd;
    cudnnConvolutionBwdDataAlgo_t algo;
    size_t ws;
    int64_t M, inner;
};

void ox_cu_nn_release_convtranspose(void *state) {
    struct convt_state *s = (struct convt_state *)state;
    if (!s) return;
    if (s->xd) cudnnDestroyTensorDescriptor(s->xd);
    if (s->yd) cudnnDestroyTensorDescriptor(s->yd);
    if (s->wd) cudnnDestroyFilterDescriptor(s->wd);
    if (s->cd) cudnnDestroyConvolutionDescriptor(s->cd);
    free(s);
}

/* An attribute of nsp spatial values (count times nsp for pads), or def each; false when
 * its length is wrong. */
static bool spatial_attr(const struct ox_node *n, const char *name, int nsp, int count, int64_t def,
                         int64_t *v) {
    const int64_t *a;
    int na = ox_attr_ints(n, name, &a);
    for (int i = 0; i < nsp * count; i++) v[i] = def;
    if (na < 0) return true;
    if (na != nsp * count) return false;
    for (int i = 0; i < na; i++) v[i] = a[i];
    return true;
}

/* s's descriptors, algorithm and workspace; OX_E_UNSUPPORTED where cuDNN does not take the
 * node. */
static ox_status convt_setup(struct ox_cuda_ctx *c, struct convt_state *s, const ox_tensor *x,
                             const ox_tensor *w, const ox_tensor *y, const int64_t *pb,
                             const int64_t *sv, const int64_t *dv, int64_t group,
                             size_t *workspace) {
    int nsp = x->rank - 2, xdims[5], wdims[5], ydims[5], odims[5];
    int nb = dnn_dims(x->rank, x->dims, xdims);
    if (!nb || dnn_dims(w->rank, w->dims, wdims) != nb || dnn_dims(y->rank, y->dims, ydims) != nb)
        return OX_E_UNSUPPORTED;
    int dnsp = nb - 2, pads[3], strides[3], dils[3];
    for (int i = 0; i < dnsp; i++) {
        int j = i - (dnsp - nsp); /* the unit H of a 1-D convolution: j < 0 */
        int64_t p = j < 0 ? 0 : pb[j], st = j < 0 ? 1 : sv[j], dl = j < 0 ? 1 : dv[j];
        if (!fits_int(p) || !fits_int(st) || !fits_int(dl)) return OX_E_UNSUPPORTED;
        pads[i] = (int)p, strides[i] = (int)st, dils[i] = (int)dl;
    }
    cudnnDataType_t ddt = dnn_type(s->dt);
    ox_status st;
    if ((st =
             ox_cu_dnn_check(cudnnCreateTensorDescriptor(&s->xd), "cudnnCreateTensorDescriptor")) ||
        (st =
             ox_cu_dnn_check(cudnnCreateTensorDescriptor(&s->yd), "cudnnCreateTensorDescriptor")) ||
        (st =
             ox_cu_dnn_check(cudnnCreateFilterDescriptor(&s->wd), "cudnnCreateFilterDescriptor")) ||
        (st = ox_cu_dnn_check(cudnnCreateConvolutionDescriptor(&s->cd),
                              "cudnnCreateConvolutionDescriptor")))
        return st;
    if (set_tensor(s->xd, ddt, nb, xdims) != CUDNN_STATUS_SUCCESS ||
        set_tensor(s->yd, ddt, nb, ydims) != CUDNN_STATUS_SUCCESS ||
        cudnnSetFilterNdDescriptor(s->wd, ddt, CUDNN_TENSOR_NCHW, nb, wdims) !=
            CUDNN_STATUS_SUCCESS ||
        cudnnSetConvolutionNdDescriptor(s->cd, dnsp, pads, strides, dils, CUDNN_CROSS_CORRELATION,
                                        CUDNN_DATA_FLOAT) != CUDNN_STATUS_SUCCESS ||
        cudnnSetConvolutionGroupCount(s->cd, (int)group) != CUDNN_STATUS_SUCCESS ||
        cudnnSetConvolutionMathType(s->cd, dnn_math(c, s->dt)) != CUDNN_STATUS_SUCCESS)
        return OX_E_UNSUPPORTED;
    /* the forward convolution of Y must give X's extent */
    if (cudnnGetConvolutionNdForwardOutputDim(s->cd, s->yd, s->wd, nb, odims) !=
            CUDNN_STATUS_SUCCESS ||
        memcmp(odims, xdims, sizeof(int) * (size_t)nb) != 0)
        return OX_E_UNSUPPORTED;
    cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    int cnt = 0;
    bool found = false;
    if (cudnnGetConvolutionBackwardDataAlgorithm_v7(c->dnn, s->wd, s->xd, s->cd, s->yd,
                                                    CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &cnt,
                                                    perf) != CUDNN_STATUS_SUCCESS)
        cnt = 0;
    for (int i = 0; i < cnt && !found; i++)
        if (perf[i].status == CUDNN_STATUS_SUCCESS && math_ok(c, s->dt, perf[i].mathType) &&
            perf[i].memory <= ((size_t)512 << 20) &&
            (!c->precise || bwd_data_precise(perf[i].algo)))
            s->algo = perf[i].algo, found = true;
    if (!found && s->dt == OX_BFLOAT16) return OX_E_UNSUPPORTED; /* none cuDNN says runs it */
    if (!found) s->algo = CUDNN_CONVOLUTION_BWD_DATA_ALGO_0;
    if (cudnnGetConvolutionBackwardDataWorkspaceSize(c->dnn, s->wd, s->xd, s->cd, s->yd, s->algo,
                                                     &s->ws) != CUDNN_STATUS_SUCCESS)
        return OX_E_UNSUPPORTED;
    *workspace = s->ws;
    return OX_OK;
}

ox_status ox_cu_nn_prepare_convtranspose(struct ox_cuda_ctx *c, const struct ox_node *n,
                                         const ox_tensor *const *in, ox_tensor *const *out,
                                         unsigned const_inputs, void **state, size_t *workspace) {
    (void)const_inputs;
    const ox_tensor *x = ox_in(n, in, 0), *w = ox_in(n, in, 1), *b = ox_in(n, in, 2);
    ox_tensor *y = out[0];
    if (!x || !w || !y) return OX_E_UNSUPPORTED;
    ox_dtype dt = x->dtype;
    if (!ox_cu_is_float(dt) || w->dtype != dt || y->dtype != dt || (b && b->dtype != dt))
        return OX_E_UNSUPPORTED;
    if (x->rank < 3 || x->rank > 5 || w->rank != x->rank || y->rank != x->rank)
        return OX_E_UNSUPPORTED;
    int nsp = x->rank - 2;
    int64_t group = ox_attr_int(n, "group", 1), C = x->dims[1];
    if (group <= 0 || !fits_int(group) || w->dims[0] != C || C % group) return OX_E_UNSUPPORTED;
    int64_t M = w->dims[1] * group;
    if (y->dims[0] != x->dims[0] || y->dims[1] != M || (b && (b->rank != 1 || b->dims[0] != M)))
        return OX_E_UNSUPPORTED;
    int64_t sv[SP], dv[SP], opad[SP], pads[2 * SP], pb[SP];
    if (!spatial_attr(n, "strides", nsp, 1, 1, sv) ||
        !spatial_attr(n, "dilations", nsp, 1, 1, dv) ||
        !spatial_attr(n, "output_padding", nsp, 1, 0, opad) ||
        !spatial_attr(n, "pads", nsp, 2, 0, pads))
        return OX_E_UNSUPPORTED;
    const int64_t *osa;
    bool has_os = ox_attr_ints(n, "output_shape", &osa) >= 0;
    const char *ap = ox_attr_str(n, "auto_pad", "NOTSET");
    bool same = strcmp(ap, "SAME_UPPER") == 0 || strcmp(ap, "SAME_LOWER") == 0;
    bool upper = strcmp(ap, "SAME_UPPER") == 0;
    for (int i = 0; i < nsp; i++) {
        int64_t in_i = x->dims[i + 2], k = w->dims[i + 2], out_i = y->dims[i + 2];
        if (sv[i] <= 0 || dv[i] <= 0 || k <= 0 || in_i <= 0) return OX_E_UNSUPPORTED;
        /* the pads at the beginning, as kernels/cpu/nn.c's ct_setup chooses them */
        int64_t full = sv[i] * (in_i - 1) + opad[i] + (k - 1) * dv[i] + 1;
        if (has_os || same) {
            int64_t total = full - out_i;
            pb[i] = total <= 0 ? 0 : upper ? total / 2 : total - total / 2;
        } else if (strcmp(ap, "VALID") == 0) {
            pb[i] = 0;
        } else {
            pb[i] = pads[i];
        }
    }
    struct convt_state *s = (struct convt_state *)calloc(1, sizeof *s);
    if (!s) return ox_node_err(n, OX_E_NOMEM, "out of memory");
    s->dt = dt;
    s->M = M;
    s->inner = 1;
    for (int i = 0; i < nsp; i++) s->inner *= y->dims[i + 2];
    ox_status st = OX_OK;
    if (ox_tensor_numel(y) == 0)
        s->empty = true;
    else if (ox_tensor_numel(x) == 0 || ox_tensor_numel(w) == 0)
        st = OX_E_UNSUPPORTED;
    else
        st = convt_setup(c, s, x, w, y, pb, sv, dv, group, workspace);
    if (st) {
        ox_cu_nn_release_convtranspose(s);
        return st;
    }
    *state = s;
    return OX_OK;
}

ox_status ox_cu_nn_convtranspose(struct ox_cuda_ctx *c, const struct ox_node *n,
                                 const ox_tensor *const *in, ox_tensor *const *out) {
    const struct convt_state *s = (const struct convt_state *)c->state;
    if (s->empty) return OX_OK;
    const ox_tensor *b = ox_in(n, in, 2);
    float one = 1.0f, zero = 0.0f;
    ox_status st = ox_cu_dnn_check(
        cudnnConvolutionBackwardData(c->dnn, &one, s->wd, in[1]->data, s->xd, in[0]->data, s->cd,
                                     s->algo, c->workspace, s->ws, &zero, s->yd, out[0]->data),
        "cudnnConvolutionBackwardData");
    if (st || !b) return st;
    struct epi e = {b->data, s->inner, s->M, 1.0f, NULL, 0.0f, act_none()};
    epi_channel_run(s->dt, c->stream, out[0]->data, ox_tensor_numel(out[0]), e);
    return ox_cu_launched("ConvTranspose bias");
}

/* ---- MaxPool, AveragePool, LpPool ------------------------------------------------------ */

enum { POOL_MAX, POOL_AVG, POOL_LP };

/* Spatial dims padded in front to three with unit extents; one thread per output element,
 * visiting only the taps inside the input, as kernels/cpu/conv.c's pool_run. */
struct pool_args {
    int64_t in[SP], k[SP], s[SP], d[SP], pb[SP], pe[SP], out[SP];
    int64_t in_size, out_size;
    int kind;
    bool include_pad;
    float p;
};

/* Taps t in [0, k) of a window that starts at `start` (dilation d) and land in [0, n): the
 * first in *lo, their count returned (0: none). */
template <typename I> __device__ __forceinline__ I taps_inside(I start, I k, I d, I n, I *lo) {
    I a = start >= 0 ? 0 : (-start + d - 1) / d;
    I b = start >= n ? 0 : (n - 1 - start) / d + 1;
    if (b > k) b = k;
    *lo = a;
    return b > a ? b - a : 0;
}

/* I: the index type (int where every offset fits, whose divisions are much cheaper). */
template <typename T, typename I>
__global__ void pool_kernel(const T *x, T *y, I total, struct pool_args pa) {
    I in[SP], k[SP], st[SP], d[SP], pb[SP], pe[SP], out[SP];
    for (int a = 0; a < SP; a++) {
        in[a] = (I)pa.in[a], k[a] = (I)pa.k[a], st[a] = (I)pa.s[a], d[a] = (I)pa.d[a];
        pb[a] = (I)pa.pb[a], pe[a] = (I)pa.pe[a], out[a] = (I)pa.out[a];
    }
    I out_size = (I)pa.out_size, in_size = (I)pa.in_size;
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (I)gridDim.x * blockDim.x) {
        I nc = i / out_size, q = i - nc * out_size;
        I q1 = q / out[2];
        I o[SP] = {q1 / out[1], q1 - q1 / out[1] * out[1], q - q1 * out[2]};
        I start[SP], lo[SP], kn[SP], padded = 1, count = 1;
        for (int a = 0; a < SP; a++) {
            start[a] = o[a] * st[a] - pb[a];
            /* with count_include_pad, the window counts up to the end padding only */
            I end = start[a] + (k[a] - 1) * d[a] + 1, lim = in[a] + pe[a];
            I pend = end < lim ? end : lim;
            padded *= (pend - start[a] + d[a] - 1) / d[a];
            kn[a] = taps_inside<I>(start[a], k[a], d[a], in[a], &lo[a]);
            count *= kn[a];
        }
        const T *xc = x + nc * in_size;
        float acc = 0.0f;
        bool first = true;
        for (I t0 = lo[0]; t0 < lo[0] + kn[0]; t0++) {
            const T *x0 = xc + (start[0] + t0 * d[0]) * in[1] * in[2];
            for (I t1 = lo[1]; t1 < lo[1] + kn[1]; t1++) {
                const T *x1 = x0 + (start[1] + t1 * d[1]) * in[2];
                for (I t2 = lo[2]; t2 < lo[2] + kn[2]; t2++) {
                    float v = ox_cu_to_f<T>(x1[start[2] + t2 * d[2]]);
                    if (pa.kind == POOL_MAX) {
                        if (first || v > acc || v != v) acc = v; /* a NaN wins */
                        first = false;
                    } else if (pa.kind == POOL_AVG) {
                        acc += v;
                    } else {
                        acc += powf(fabsf(v), pa.p);
                    }
                }
            }
        }
        if (pa.kind == POOL_AVG)
            acc /= (float)(pa.include_pad ? padded : (count ? count : 1));
        else if (pa.kind == POOL_LP)
            acc = powf(acc, 1.0f / pa.p);
        y[i] = ox_cu_from_f<T>(acc); /* max over no taps: 0 */
    }
}

/* pool_kernel for MaxPool and AveragePool over at most two spatial dims without dilation
 * (pool_args' first dim a unit one), in int: the window's taps are a rectangle, so an output
 * costs two divisions instead of nine. The same arithmetic and order of taps. */
template <typename T, int KIND>
__global__ void pool2d_kernel(const T *x, T *y, int total, struct pool_args pa) {
    const int H = (int)pa.in[1], W = (int)pa.in[2], OH = (int)pa.out[1], OW = (int)pa.out[2];
    const int KH = (int)pa.k[1], KW = (int)pa.k[2], SH = (int)pa.s[1], SW = (int)pa.s[2];
    const int PT = (int)pa.pb[1], PL = (int)pa.pb[2];
    const int LH = H + (int)pa.pe[1], LW = W + (int)pa.pe[2]; /* count_include_pad's ends */
    const int OHW = OH * OW;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
        int nc = i / OHW, q = i - nc * OHW;
        int oh = q / OW, ow = q - oh * OW;
        int h0 = oh * SH - PT, w0 = ow * SW - PL;
        int hs = h0 > 0 ? h0 : 0, he = h0 + KH < H ? h0 + KH : H;
        int ws = w0 > 0 ? w0 : 0, we = w0 + KW < W ? w0 + KW : W;
        const T *xc = x + nc * (H * W);
        float acc = 0.0f;
        bool first = true;
        for (int h = hs; h < he; h++)
            for (int w = ws; w < we; w++) {
                float v = ox_cu_to_f<T>(xc[h * W + w]);
                if (KIND == POOL_MAX) {
                    if (first || v > acc || v != v) acc = v; /* a NaN wins */
                    first = false;
                } else {
                    acc += v;
                }
            }
        if (KIND == POOL_AVG) {
            int div; /* as pool_kernel divides, to the letter */
            if (pa.include_pad) {
                int ph = (h0 + KH < LH ? h0 + KH : LH) - h0,
                    pw = (w0 + KW < LW ? w0 + KW : LW) - w0;
                div = ph * pw;
            } else {
                int count = (he > hs ? he - hs : 0) * (we > ws ? we - ws : 0);
                div = count ? count : 1;
            }
            acc /= (float)div;
        }
        y[i] = ox_cu_from_f<T>(acc); /* max over no taps: 0 */
    }
}

template <typename T>
static void pool_launch(cudaStream_t st, const void *x, void *y, int64_t total, int64_t nx,
                        const struct pool_args *p) {
    /* int indices when every offset into x and y fits, and the window ends too; total at most
     * half an int's range, so that an index below it plus the grid stride (up to 65535 * 64 *
     * 256 threads) does not overflow the int in the kernels' grid-stride loops */
    bool small = total <= INT32_MAX / 2 && nx <= INT32_MAX;
    int64_t taps = 1;
    for (int a = 0; a < SP; a++) {
        small = small && p->out[a] * p->s[a] + p->k[a] * p->d[a] + p->in[a] + p->pb[a] + p->pe[a] <=
                             INT32_MAX;
        taps *= p->k[a]; /* bounds the count of padded taps */
        small = small && taps <= INT32_MAX;
    }
    bool flat2 = p->in[0] == 1 && p->out[0] == 1 && p->k[0] == 1 && p->pb[0] == 0 &&
                 p->pe[0] == 0 && p->d[1] == 1 && p->d[2] == 1 &&
                 p->in[1] * p->in[2] <= INT32_MAX && p->out[1] * p->out[2] <= INT32_MAX &&
                 ox_cu_vec_on();
    if (small && flat2 && p->kind == POOL_MAX)
        pool2d_kernel<T, POOL_MAX>
            <<<ox_cu_blocks(total), 256, 0, st>>>((const T *)x, (T *)y, (int)total, *p);
    else if (small && flat2 && p->kind == POOL_AVG)
        pool2d_kernel<T, POOL_AVG>
            <<<ox_cu_blocks(total), 256, 0, st>>>((const T *)x, (T *)y, (int)total, *p);
    else if (small)
        pool_kernel<T, int>
            <<<ox_cu_blocks(total), 256, 0, st>>>((const T *)x, (T *)y, (int)total, *p);
    else
        pool_kernel<T, int64_t>
            <<<ox_cu_blocks(total), 256, 0, st>>>((const T *)x, (T *)y, total, *p);
}

ox_status ox_cu_nn_prepare_pool(struct ox_cuda_ctx *c, const struct ox_node *n,
                                const ox_tensor *const *in, ox_tensor *const *out,
                                unsigned const_inputs, void **state, size_t *workspace) {
    (void)c, (void)const_inputs, (void)workspace;
    const ox_tensor *x = ox_in(n, in, 0);
    ox_tensor *y = out[0];
    int kind = strcmp(n->op_type, "MaxPool") == 0       ? POOL_MAX
               : strcmp(n->op_type, "AveragePool") == 0 ? POOL_AVG
                                                        : POOL_LP;
    if (!x || !y || y->dtype != x->dtype) return OX_E_UNSUPPORTED;
    if (n->n_outputs > 1 && out[1]) return OX_E_UNSUPPORTED; /* MaxPool's Indices */
    bool int8 = x->dtype == OX_INT8 || x->dtype == OX_UINT8;
    if (!ox_cu_is_float(x->dtype) && !(kind == POOL_MAX && int8)) return OX_E_UNSUPPORTED;
    const int64_t *ks;
    int nks = ox_attr_ints(n, "kernel_shape", &ks);
    struct geom g;
    if (nks < 0 || !geometry(n, x, ks, nks, true, &g)) return OX_E_UNSUPPORTED;
    if (y->rank != x->rank || y->dims[0] != x->dims[0] || y->dims[1] != x->dims[1])
        return OX_E_UNSUPPORTED;
    struct pool_args *p = (struct pool_args *)calloc(1, sizeof *p);
    if (!p) return ox_node_err(n, OX_E_NOMEM, "out of memory");
    int off = SP - g.nsp;
    p->in_size = p->out_size = 1;
    for (int a = 0; a < SP; a++) {
        int j = a - off;
        p->in[a] = j < 0 ? 1 : g.in[j];
        p->k[a] = j < 0 ? 1 : g.k[j];
        p->s[a] = j < 0 ? 1 : g.s[j];
        p->d[a] = j < 0 ? 1 : g.d[j];
        p->pb[a] = j < 0 ? 0 : g.pb[j];
        p->pe[a] = j < 0 ? 0 : g.pe[j];
        p->out[a] = j < 0 ? 1 : g.out[j];
        if (j >= 0 && p->out[a] != y->dims[j + 2]) {
            free(p);
            return OX_E_UNSUPPORTED;
        }
        p->in_size *= p->in[a];
        p->out_size *= p->out[a];
    }
    p->kind = kind;
    p->include_pad = kind == POOL_AVG && ox_attr_int(n, "count_include_pad", 0);
    p->p = kind == POOL_LP ? (float)ox_attr_int(n, "p", 2) : 2.0f;
    *state = p;
    return OX_OK;
}

ox_status ox_cu_nn_pool(struct ox_cuda_ctx *c, const struct ox_node *n, const ox_tensor *const *in,
                        ox_tensor *const *out) {
    const struct pool_args *p = (const struct pool_args *)c->state;
    int64_t total = ox_tensor_numel(out[0]), nx = ox_tensor_numel(in[0]);
    if (total == 0) return OX_OK;
    const void *x = in[0]->data;
    void *y = out[0]->data;
    switch (in[0]->dtype) {
    case OX_FLOAT: pool_launch<float>(c->stream, x, y, total, nx, p); break;
    case OX_FLOAT16: pool_launch<__half>(c->stream, x, y, total, nx, p); break;
    case OX_BFLOAT16: pool_launch<__nv_bfloat16>(c->stream, x, y, total, nx, p); break;
    case OX_INT8: pool_launch<int8_t>(c->stream, x, y, total, nx, p); break;
    default: pool_launch<uint8_t>(c->stream, x, y, total, nx, p); break;
    }
    return ox_cu_launched(n->op_type);
}

/* ---- MatMul, FusedMatMul ---------------------------------------------------------------- */

/* y[i] = v[(i / inner) % channels]: a bias broadcast into the output of a GEMM that then adds
 * its product to it (beta), instead of a pass over the product after it. */
template <typename T, typename I>
__global__ void bcast_fill(T *y, I n, const T *v, I inner, I channels) {
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (I)gridDim.x * blockDim.x)
        y[i] = v[(i / inner) % channels];
}

template <typename T>
static void bcast_fill_launch(cudaStream_t st, void *y, int64_t n, const void *v, int64_t inner,
                              int64_t channels) {
    if (n <= INT32_MAX)
        bcast_fill<T, uint32_t><<<ox_cu_blocks(n), 256, 0, st>>>(
            (T *)y, (uint32_t)n, (const T *)v, (uint32_t)inner, (uint32_t)channels);
    else
        bcast_fill<T, int64_t>
            <<<ox_cu_blocks(n), 256, 0, st>>>((T *)y, n, (const T *)v, inner, channels);
}

static ox_status bcast_fill_run(ox_dtype dt, cudaStream_t st, void *y, int64_t n, const void *v,
                                int64_t inner, int64_t channels) {
    if (n <= 0) return OX_OK;
    if (dt == OX_FLOAT)
        bcast_fill_launch<float>(st, y, n, v, inner, channels);
    else if (dt == OX_BFLOAT16)
        bcast_fill_launch<__nv_bfloat16>(st, y, n, v, inner, channels);
    else
        bcast_fill_launch<__half>(st, y, n, v, inner, channels);
    return ox_cu_launched("bias broadcast");
}

struct mm_state {
    struct ox_matmul_shape m;
    ox_dtype dt;
    bool empty, zero_k;
    struct gemm_call g;
    int64_t outer; /* strided batches, each of g.count items of the batch */
    /* epilogue */
    int z_mode;   /* 0 none, 1 Z of Y's shape, 2 a vector over Y's last axis, 3 broadcast */
    bool prefill; /* z_mode 2 without activation: Z broadcast into Y, added by the GEMM */
    bool split;   /* Z broadcasts Y to a larger shape: the product goes to workspace first */
    struct act a;
    int64_t n_base;    /* elements of the product */
    struct lt_gemm lt; /* prefill as one GEMM: the bias in cuBLASLt's epilogue */
};

void ox_cu_nn_release_matmul(void *state) {
    struct mm_state *s = (struct mm_state *)state;
    if (!s) return;
    lt_release(&s->lt);
    free(s);
}

ox_status ox_cu_nn_prepare_matmul(struct ox_cuda_ctx *c, const struct ox_node *n,
                                  const ox_tensor *const *in, ox_tensor *const *out,
                                  unsigned const_inputs, void **state, size_t *workspace) {
    (void)const_inputs;
    bool fused = strcmp(n->domain, OX_DOMAIN_ONNXEXEC) == 0;
    const ox_tensor *a = ox_in(n, in, 0), *b = ox_in(n, in, 1);
    const ox_tensor *z = fused ? ox_in(n, in, 2) : NULL;
    ox_tensor *y = out[0];
    if (!a || !b || !y) return OX_E_UNSUPPORTED;
    ox_dtype dt = a->dtype;
    if (!ox_cu_is_float(dt) || b->dtype != dt || y->dtype != dt || (z && z->dtype != dt))
        return OX_E_UNSUPPORTED;
    struct mm_state *s = (struct mm_state *)calloc(1, sizeof *s);
    if (!s) return ox_node_err(n, OX_E_NOMEM, "out of memory");
    ox_status st = ox_matmul_shape(n, a, b, &s->m);
    if (st) {
        free(s);
        return st;
    }
    const struct ox_matmul_shape *m = &s->m;
    s->dt = dt;
    s->a = act_of(n);
    s->n_base = m->batch * m->M * m->N;
    s->split = !same_dims(m->rank, m->dims, y->rank, y->dims);
    if (s->split && !z) goto unsupported_free;
    if (ox_tensor_numel(y) == 0 || s->n_base == 0) {
        if (ox_tensor_numel(y) != 0) goto unsupported_free;
        s->empty = true;
        *state = s;
        return OX_OK;
    }
    s->zero_k = m->K == 0;
    {
        /* B shared by every item and A contiguous: one GEMM of batch * M rows */
        bool b_shared = true, a_contig = true;
        for (int d = 0; d < m->brank; d++) {
            if (m->bstr[d] != 0 && m->bdims[d] != 1) b_shared = false;
            if (m->astr[d] == 0 && m->bdims[d] != 1) a_contig = false;
        }
        int64_t rows = m->M, count = 1;
        s->outer = m->batch;
        if (b_shared && a_contig) {
            rows = m->M * m->batch, s->outer = 1;
        } else {
            /* the whole batch as one strided batch when each operand's items lie one stride
             * apart, else the last batch dim (always so) per item of the others */
            int64_t a1 = 0, b1 = 0, ao, bo;
            if (m->batch > 1) ox_matmul_offsets(m, 1, &a1, &b1);
            bool linear = true;
            for (int64_t i = 0; i < m->batch && linear; i++) {
                ox_matmul_offsets(m, i, &ao, &bo);
                linear = ao == i * a1 && bo == i * b1;
            }
            count = linear ? m->batch : m->brank ? m->bdims[m->brank - 1] : 1;
            s->outer = m->batch / count;
            if (count > 1) ox_matmul_offsets(m, 1, &a1, &b1);
            s->g.sa = a1, s->g.sb = b1;
        }
        if (!gemm_fits(rows, m->N, m->K, m->K, m->N) || !fits_int(count)) goto unsupported_free;
        s->g.ta = s->g.tb = CUBLAS_OP_N;
        s->g.m = (int)m->N, s->g.n = (int)rows, s->g.k = (int)m->K;
        s->g.lda = (int)(m->K ? m->K : 1), s->g.ldb = (int)m->N;
        s->g.sy = rows * m->N;
        s->g.count = (int)count;
    }
    /* the epilogue: Z as Y's shape, as a vector over the last axis, or broadcast */
    if (!z) {
        s->z_mode = 0;
    } else if (s->split) {
        s->z_mode = 3;
    } else if (ox_same_shape(z, y)) {
        s->z_mode = 1;
    } else {
        int64_t L = y->rank ? y->dims[y->rank - 1] : 1;
        bool vec = z->rank >= 1 && z->rank <= y->rank && z->dims[z->rank - 1] == L;
        for (int i = 0; i + 1 < z->rank; i++) vec = vec && z->dims[i] == 1;
        s->z_mode = vec ? 2 : 3;
    }
    s->prefill = s->z_mode == 2 && act_is_none(s->a) && !s->zero_k;
    if (s->prefill && s->outer == 1 && m->N > 1)
        lt_setup(c, &s->lt, dt, &s->g, 1.0f, a->data, b->data, z->data, y->data, n->name);
    if (s->split) {
        size_t esz = dt == OX_FLOAT ? 4 : 2;
        *workspace = round256((size_t)s->n_base * esz);
    }
    *state = s;
    return OX_OK;
unsupported_free:
    free(s);
    return OX_E_UNSUPPORTED;
}

ox_status ox_cu_nn_matmul(struct ox_cuda_ctx *c, const struct ox_node *n,
                          const ox_tensor *const *in, ox_tensor *const *out) {
    const struct mm_state *s = (const struct mm_state *)c->state;
    if (s->empty) return OX_OK;
    bool fused = strcmp(n->domain, OX_DOMAIN_ONNXEXEC) == 0;
    const ox_tensor *z = fused ? ox_in(n, in, 2) : NULL;
    ox_tensor *y = out[0];
    size_t esz = s->dt == OX_FLOAT ? 4 : 2;
    char *base = (char *)(s->split ? c->workspace : y->data);
    int64_t L = y->rank ? y->dims[y->rank - 1] : 1;
    ox_status st = OX_OK;
    float beta = 0.0f;
    if (s->lt.on) return lt_run(c, &s->lt, 1.0f, in[0]->data, in[1]->data, z->data, y->data);
    if (s->prefill) {
        st = bcast_fill_run(s->dt, c->stream, y->data, s->n_base, z->data, 1, L);
        beta = 1.0f;
    }
    if (!st && s->zero_k) {
        st = ox_cu_check(cudaMemsetAsync(base, 0, (size_t)s->n_base * esz, c->stream),
                         "cudaMemsetAsync");
    } else if (!st) {
        for (int64_t o = 0; o < s->outer && !st; o++) {
            int64_t ao = 0, bo = 0;
            if (s->outer > 1) ox_matmul_offsets(&s->m, o * s->g.count, &ao, &bo);
            st = gemm_run(c, s->dt, &s->g, 1.0f, (const char *)in[0]->data + ao * esz,
                          (const char *)in[1]->data + bo * esz, beta,
                          base + (size_t)(o * s->g.count) * (size_t)s->g.sy * esz);
        }
    }
    if (st) return st;
    if (s->z_mode == 3) {
        struct bcast bc = bcast_of(y, s->m.rank, s->m.dims, z);
        epi_bcast_run(s->dt, c->stream, base, z->data, y->data, ox_tensor_numel(y), &bc, s->a);
        return ox_cu_launched("FusedMatMul epilogue");
    }
    if (s->prefill || (s->z_mode == 0 && act_is_none(s->a))) return OX_OK;
    struct epi e = {NULL, 1, L > 0 ? L : 1, 1.0f, NULL, 1.0f, s->a};
    if (s->z_mode == 1) e.z = z->data;
    if (s->z_mode == 2) e.bias = z->data;
    epi_channel_run(s->dt, c->stream, y->data, s->n_base, e);
    return ox_cu_launched("FusedMatMul epilogue");
}

/* ---- Gemm, FusedGemm -------------------------------------------------------------------- */

struct gemm_state {
    ox_dtype dt;
    bool empty, zero_k;
    struct gemm_call g;
    float alpha;
    int64_t MN;
    struct epi e; /* beta C as bias (scalar, row or column vector) or z ([M, N]); act */
    bool has_epi;
    bool prefill;      /* C without activation: broadcast into Y, added by the GEMM (beta) */
    struct lt_gemm lt; /* C a bias over the columns, beta 1, no activation: one cuBLASLt call */
};

void ox_cu_nn_release_gemm(void *state) {
    struct gemm_state *s = (struct gemm_state *)state;
    if (!s) return;
    lt_release(&s->lt);
    free(s);
}

ox_status ox_cu_nn_prepare_gemm(struct ox_cuda_ctx *c, const struct ox_node *n,
                                const ox_tensor *const *in, ox_tensor *const *out,
                                unsigned const_inputs, void **state, size_t *workspace) {
    (void)const_inputs, (void)workspace;
    const ox_tensor *a = ox_in(n, in, 0), *b = ox_in(n, in, 1), *cc = ox_in(n, in, 2);
    ox_tensor *y = out[0];
    if (!a || !b || !y) return OX_E_UNSUPPORTED;
    ox_dtype dt = a->dtype;
    if (!ox_cu_is_float(dt) || b->dtype != dt || y->dtype != dt || (cc && cc->dtype != dt))
        return OX_E_UNSUPPORTED;
    if (a->rank != 2 || b->rank != 2 || y->rank != 2 || (cc && cc->rank > 2))
        return OX_E_UNSUPPORTED;
    bool ta = ox_attr_int(n, "transA", 0), tb = ox_attr_int(n, "transB", 0);
    int64_t M = ta ? a->dims[1] : a->dims[0], K = ta ? a->dims[0] : a->dims[1];
    int64_t N = tb ? b->dims[0] : b->dims[1], kb = tb ? b->dims[1] : b->dims[0];
    if (kb != K || y->dims[0] != M || y->dims[1] != N) return OX_E_UNSUPPORTED;
    float beta = ox_attr_float(n, "beta", 1.0f);
    struct gemm_state *s = (struct gemm_state *)calloc(1, sizeof *s);
    if (!s) return ox_node_err(n, OX_E_NOMEM, "out of memory");
    s->dt = dt;
    s->alpha = ox_attr_float(n, "alpha", 1.0f);
    s->MN = M * N;
    s->zero_k = K == 0;
    *state = s;
    if (M * N == 0) {
        s->empty = true;
        return OX_OK;
    }
    if (!gemm_fits(M, N, K, a->dims[1], b->dims[1])) {
        free(s);
        *state = NULL;
        return OX_E_UNSUPPORTED;
    }
    s->g.ta = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    s->g.tb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    s->g.m = (int)N, s->g.n = (int)M, s->g.k = (int)K;
    s->g.lda = (int)a->dims[1], s->g.ldb = (int)b->dims[1];
    s->g.count = 1;
    /* beta C broadcast to [M, N]: element (i, j) at i * rs + j * cs, as gemm_fill_c */
    struct epi e = {NULL, 1, 1, beta, NULL, beta, act_of(n)};
    if (cc && beta != 0) {
        int64_t rs = 0, cs = 0;
        if (cc->rank == 2) rs = cc->dims[0] == 1 ? 0 : cc->dims[1], cs = cc->dims[1] == 1 ? 0 : 1;
        if (cc->rank == 1) cs = cc->dims[0] == 1 ? 0 : 1;
        if (rs && cs) {
            e.z = cc->data; /* [M, N] */
        } else {
            e.bias = cc->data;
            e.inner = rs ? N : 1; /* [M, 1]: by row; [N]: by column; else one value */
            e.channels = rs ? M : cs ? N : 1;
        }
    }
    s->e = e;
    s->has_epi = e.bias || e.z || !act_is_none(e.a);
    s->prefill = (e.bias || e.z) && act_is_none(e.a) && !s->zero_k;
    if (s->prefill && e.bias && e.inner == 1 && e.channels == N && N > 1 && beta == 1.0f)
        lt_setup(c, &s->lt, dt, &s->g, s->alpha, a->data, b->data, cc->data, y->data, n->name);
    return OX_OK;
}

ox_status ox_cu_nn_gemm(struct ox_cuda_ctx *c, const struct ox_node *n, const ox_tensor *const *in,
                        ox_tensor *const *out) {
    const struct gemm_state *s = (const struct gemm_state *)c->state;
    if (s->empty) return OX_OK;
    ox_tensor *y = out[0];
    const ox_tensor *cc = ox_in(n, in, 2);
    size_t bytes = (size_t)s->MN * (s->dt == OX_FLOAT ? 4 : 2);
    ox_status st;
    if (s->lt.on) return lt_run(c, &s->lt, s->alpha, in[0]->data, in[1]->data, cc->data, y->data);
    if (s->prefill) {
        /* C broadcast into Y, then Y = alpha A B + beta Y */
        if (s->e.z)
            st = ox_cu_check(
                cudaMemcpyAsync(y->data, cc->data, bytes, cudaMemcpyDeviceToDevice, c->stream),
                "cudaMemcpyAsync");
        else
            st = bcast_fill_run(s->dt, c->stream, y->data, s->MN, cc->data, s->e.inner,
                                s->e.channels);
        return st ? st
                  : gemm_run(c, s->dt, &s->g, s->alpha, in[0]->data, in[1]->data, s->e.bias_scale,
                             y->data);
    }
    if (s->zero_k)
        st = ox_cu_check(cudaMemsetAsync(y->data, 0, bytes, c->stream), "cudaMemsetAsync");
    else
        st = gemm_run(c, s->dt, &s->g, s->alpha, in[0]->data, in[1]->data, 0.0f, y->data);
    if (st || !s->has_epi) return st;
    struct epi e = s->e;
    /* the pointers of this run, not prepare's */
    if (e.z) e.z = cc->data;
    if (e.bias) e.bias = cc->data;
    epi_channel_run(s->dt, c->stream, y->data, s->MN, e);
    return ox_cu_launched("Gemm epilogue");
}
