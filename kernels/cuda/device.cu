/* The CUDA device (executor/device.h) and the operator table of kernels/cuda/ops.def.
 *
 * Each GPU has one core per process, made when the first session opens it and freed with
 * the last: a stream, cuBLAS and cuDNN handles bound to it, cuBLAS's workspace, and the lock
 * that keeps one run at a time on that stream. (Handles cost tens of milliseconds to make:
 * a test run of a thousand small models would spend minutes making them.) Each session's
 * device is a small record over the core with its own precision. Runs are captured into CUDA
 * graphs by the device plan (executor/devplan.c), so nothing here synchronizes but sync(). */
#include "kernels/cuda/cuda.h"
#include "kernels/cuda/host.h"

extern "C" {
#include "executor/device.h"
}

#include <stdio.h>
#include <stdlib.h>

#define BLAS_WORKSPACE ((size_t)32 << 20) /* cuBLAS's own scratch, fixed so runs capture */

struct cuda_core {
    struct cuda_core *next;
    int index;
    int n_users;
    cudaStream_t stream;
    cublasHandle_t blas;
    cublasLtHandle_t lt;
    cudnnHandle_t dnn;
    void *blas_workspace;
    int n_sms;
    char name[200];
    pthread_mutex_t mu;
};

static pthread_mutex_t cores_mu = PTHREAD_MUTEX_INITIALIZER;
static struct cuda_core *cores;

struct cuda_device {
    struct ox_device base; /* first: the executor sees this */
    int index;
    struct cuda_core *core;
    cudaStream_t stream;
    cublasHandle_t blas;
    cudnnHandle_t dnn;
    int n_sms;
    cudaEvent_t *marks; /* profiling: mark i is marks[i], made when first asked for */
    int n_marks;
};

struct cuda_kernel {
    const struct ox_cuda_op *op;
    void *state;
};

static struct cuda_device *dev_of(struct ox_device *d) {
    return (struct cuda_device *)d;
}

static ox_status use(struct cuda_device *cd) {
    return ox_cu_check(cudaSetDevice(cd->index), "cudaSetDevice");
}

static struct ox_cuda_ctx ctx_of(struct cuda_device *cd) {
    struct ox_cuda_ctx c;
    memset(&c, 0, sizeof c);
    c.stream = cd->stream;
    c.blas = cd->blas;
    c.dnn = cd->dnn;
    c.lt = cd->core->lt;
    c.blas_ws = cd->core->blas_workspace;
    c.blas_ws_bytes = BLAS_WORKSPACE;
    c.tf32 = cd->base.precision == OX_PRECISION_TF32;
    /* the handle is shared by sessions of different precisions */
    cublasSetMathMode(cd->blas, c.tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH);
    c.n_sms = cd->n_sms;
    return c;
}

static void core_free(struct cuda_core *c) {
    cudaSetDevice(c->index);
    if (c->stream) cudaStreamSynchronize(c->stream);
    if (c->dnn) cudnnDestroy(c->dnn);
    if (c->blas) cublasDestroy(c->blas);
    if (c->lt) cublasLtDestroy(c->lt);
    if (c->blas_workspace) cudaFree(c->blas_workspace);
    if (c->stream) cudaStreamDestroy(c->stream);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

static ox_status core_new(int index, struct cuda_core **out) {
    struct cuda_core *c = (struct cuda_core *)calloc(1, sizeof *c);
    if (!c) return ox_err(OX_E_NOMEM, "out of memory");
    c->index = index;
    if (pthread_mutex_init(&c->mu, NULL)) {
        free(c);
        return ox_err(OX_E_NOMEM, "out of memory (a mutex)");
    }
    cudaDeviceProp prop;
    ox_status st = ox_cu_check(cudaSetDevice(index), "cudaSetDevice");
    if (!st) st = ox_cu_check(cudaGetDeviceProperties(&prop, index), "cudaGetDeviceProperties");
    if (!st) {
        snprintf(c->name, sizeof c->name, "%.199s", prop.name);
        c->n_sms = prop.multiProcessorCount;
        st = ox_cu_check(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking),
                         "cudaStreamCreate");
    }
    if (!st) st = ox_cu_blas_check(cublasCreate(&c->blas), "cublasCreate");
    if (!st) st = ox_cu_blas_check(cublasSetStream(c->blas, c->stream), "cublasSetStream");
    if (!st) st = ox_cu_check(cudaMalloc(&c->blas_workspace, BLAS_WORKSPACE), "cudaMalloc");
    if (!st)
        st = ox_cu_blas_check(cublasSetWorkspace(c->blas, c->blas_workspace, BLAS_WORKSPACE),
                              "cublasSetWorkspace");
    if (!st) st = ox_cu_blas_check(cublasLtCreate(&c->lt), "cublasLtCreate");
    if (!st) st = ox_cu_dnn_check(cudnnCreate(&c->dnn), "cudnnCreate");
    if (!st) st = ox_cu_dnn_check(cudnnSetStream(c->dnn, c->stream), "cudnnSetStream");
    if (st) {
        core_free(c);
        return st;
    }
    *out = c;
    return OX_OK;
}

static void cu_close(struct ox_device *d) {
    struct cuda_device *cd = dev_of(d);
    if (cd->n_marks) cudaSetDevice(cd->index);
    for (int i = 0; i < cd->n_marks; i++) cudaEventDestroy(cd->marks[i]);
    free(cd->marks);
    pthread_mutex_lock(&cores_mu);
    if (--cd->core->n_users == 0) {
        struct cuda_core **pp = &cores;
        while (*pp != cd->core) pp = &(*pp)->next;
        *pp = cd->core->next;
        core_free(cd->core);
    }
    pthread_mutex_unlock(&cores_mu);
    free(cd);
}

static ox_status cu_alloc(struct ox_device *d, size_t n, void **out) {
    struct cuda_device *cd = dev_of(d);
    *out = NULL;
    ox_status st = use(cd);
    if (st) return st;
    cudaError_t err = cudaMalloc(out, n ? n : 1);
    if (err == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        size_t free_b = 0, total = 0;
        cudaMemGetInfo(&free_b, &total);
        return ox_err(OX_E_NOMEM, "%s: cannot allocate %zu bytes of GPU memory (%zu of %zu free)",
                      d->name, n, free_b, total);
    }
    return ox_cu_check(err, "cudaMalloc");
}

static void cu_free(struct ox_device *d, void *p) {
    if (!p) return;
    cudaSetDevice(dev_of(d)->index);
    cudaFree(p);
}

static ox_status cu_alloc_host(struct ox_device *d, size_t n, void **out) {
    (void)d;
    *out = NULL;
    cudaError_t err = cudaMallocHost(out, n ? n : 1);
    if (err == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        return ox_err(OX_E_NOMEM, "cannot allocate %zu bytes of page-locked host memory", n);
    }
    return ox_cu_check(err, "cudaMallocHost");
}

static void cu_free_host(struct ox_device *d, void *p) {
    (void)d;
    if (p) cudaFreeHost(p);
}

static ox_status cu_copy_in(struct ox_device *d, void *dst, const void *src, size_t n) {
    if (!n) return OX_OK;
    return ox_cu_check(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, dev_of(d)->stream),
                       "copy to the GPU");
}

static ox_status cu_copy_out(struct ox_device *d, void *dst, const void *src, size_t n) {
    if (!n) return OX_OK;
    return ox_cu_check(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, dev_of(d)->stream),
                       "copy from the GPU");
}

static ox_status cu_sync(struct ox_device *d) {
    return ox_cu_check(cudaStreamSynchronize(dev_of(d)->stream), "the GPU's stream");
}

/* float32 to and from the 16-bit types of precisions fp16 and bf16 (round to nearest even) */
static __device__ __forceinline__ void cvt(__half *d, float v) {
    *d = __float2half_rn(v);
}
static __device__ __forceinline__ void cvt(__nv_bfloat16 *d, float v) {
    *d = __float2bfloat16_rn(v);
}
static __device__ __forceinline__ void cvt(float *d, __half v) {
    *d = __half2float(v);
}
static __device__ __forceinline__ void cvt(float *d, __nv_bfloat16 v) {
    *d = __bfloat162float(v);
}

template <typename D, typename S> __global__ void convert_kernel(D *dst, const S *src, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        cvt(&dst[i], src[i]);
}

static ox_status cu_convert(struct ox_device *d, void *dst, ox_dtype dst_type, const void *src,
                            ox_dtype src_type, int64_t n) {
    cudaStream_t stream = dev_of(d)->stream;
    unsigned grid = ox_cu_blocks(n);
    if (n <= 0) return OX_OK;
    if (dst_type == OX_FLOAT16 && src_type == OX_FLOAT)
        convert_kernel<<<grid, 256, 0, stream>>>((__half *)dst, (const float *)src, n);
    else if (dst_type == OX_FLOAT && src_type == OX_FLOAT16)
        convert_kernel<<<grid, 256, 0, stream>>>((float *)dst, (const __half *)src, n);
    else if (dst_type == OX_BFLOAT16 && src_type == OX_FLOAT)
        convert_kernel<<<grid, 256, 0, stream>>>((__nv_bfloat16 *)dst, (const float *)src, n);
    else if (dst_type == OX_FLOAT && src_type == OX_BFLOAT16)
        convert_kernel<<<grid, 256, 0, stream>>>((float *)dst, (const __nv_bfloat16 *)src, n);
    else
        return ox_err(OX_E_INTERNAL, "convert: %d to %d", (int)src_type, (int)dst_type);
    return ox_cu_launched("float16/bfloat16 conversion");
}

static ox_status cu_prepare(struct ox_device *d, const struct ox_node *n,
                            const ox_tensor *const *in, ox_tensor *const *out,
                            unsigned const_inputs, bool precise, void **kernel, size_t *scratch) {
    struct cuda_device *cd = dev_of(d);
    *kernel = NULL;
    *scratch = 0;
    const struct ox_cuda_op *op = ox_cuda_op_find(n->domain, n->op_type);
    if (!op) return OX_E_UNSUPPORTED;
    ox_status st = use(cd);
    if (st) return st;
    struct ox_cuda_ctx c = ctx_of(cd);
    c.precise = precise;
    void *state = NULL;
    size_t ws = 0;
    st = op->prepare(&c, n, in, out, const_inputs, &state, &ws);
    if (st) {
        if (state && op->release) op->release(state);
        return st;
    }
    struct cuda_kernel *k = (struct cuda_kernel *)calloc(1, sizeof *k);
    if (!k) {
        if (state && op->release) op->release(state);
        return ox_err(OX_E_NOMEM, "out of memory");
    }
    k->op = op;
    k->state = state;
    *kernel = k;
    *scratch = ws;
    return OX_OK;
}

static ox_status cu_run(struct ox_device *d, void *kernel, const struct ox_node *n,
                        const ox_tensor *const *in, ox_tensor *const *out, void *scratch,
                        size_t scratch_bytes) {
    struct cuda_device *cd = dev_of(d);
    struct cuda_kernel *k = (struct cuda_kernel *)kernel;
    struct ox_cuda_ctx c = ctx_of(cd);
    c.workspace = scratch;
    c.workspace_bytes = scratch_bytes;
    c.state = k->state;
    return k->op->run(&c, n, in, out);
}

static void cu_release(struct ox_device *d, void *kernel) {
    struct cuda_kernel *k = (struct cuda_kernel *)kernel;
    if (!k) return;
    cudaSetDevice(dev_of(d)->index);
    if (k->state && k->op->release) k->op->release(k->state);
    free(k);
}

static ox_status cu_capture_begin(struct ox_device *d) {
    struct cuda_device *cd = dev_of(d);
    ox_status st = use(cd);
    if (st) return st;
    return ox_cu_check(cudaStreamBeginCapture(cd->stream, cudaStreamCaptureModeThreadLocal),
                       "cudaStreamBeginCapture");
}

static ox_status cu_capture_end(struct ox_device *d, void **graph) {
    struct cuda_device *cd = dev_of(d);
    cudaGraph_t g = NULL;
    *graph = NULL;
    ox_status st = ox_cu_check(cudaStreamEndCapture(cd->stream, &g), "cudaStreamEndCapture");
    if (st) {
        if (g) cudaGraphDestroy(g);
        cudaGetLastError();
        return st;
    }
    cudaGraphExec_t exec = NULL;
    st = ox_cu_check(cudaGraphInstantiate(&exec, g, 0), "cudaGraphInstantiate");
    cudaGraphDestroy(g);
    if (st) {
        cudaGetLastError();
        return st;
    }
    *graph = exec;
    return OX_OK;
}

static ox_status cu_replay(struct ox_device *d, void *graph) {
    struct cuda_device *cd = dev_of(d);
    ox_status st = use(cd);
    if (st) return st;
    return ox_cu_check(cudaGraphLaunch((cudaGraphExec_t)graph, cd->stream), "cudaGraphLaunch");
}

static void cu_graph_free(struct ox_device *d, void *graph) {
    (void)d;
    if (graph) cudaGraphExecDestroy((cudaGraphExec_t)graph);
}

static ox_status cu_mark(struct ox_device *d, int i) {
    struct cuda_device *cd = dev_of(d);
    if (i < 0) return ox_err(OX_E_INTERNAL, "mark %d", i);
    if (i >= cd->n_marks) {
        int n = i + 1 > 2 * cd->n_marks ? i + 1 : 2 * cd->n_marks;
        cudaEvent_t *m = (cudaEvent_t *)realloc(cd->marks, sizeof *m * (size_t)n);
        if (!m) return ox_err(OX_E_NOMEM, "out of memory");
        cd->marks = m;
        for (; cd->n_marks < n; cd->n_marks++) {
            ox_status st = ox_cu_check(cudaEventCreate(&m[cd->n_marks]), "cudaEventCreate");
            if (st) return st;
        }
    }
    return ox_cu_check(cudaEventRecord(cd->marks[i], cd->stream), "cudaEventRecord");
}

static ox_status cu_elapsed(struct ox_device *d, int i, int j, double *seconds) {
    struct cuda_device *cd = dev_of(d);
    float ms = 0;
    *seconds = 0;
    if (i < 0 || j < 0 || i >= cd->n_marks || j >= cd->n_marks)
        return ox_err(OX_E_INTERNAL, "marks %d, %d of %d", i, j, cd->n_marks);
    ox_status st =
        ox_cu_check(cudaEventElapsedTime(&ms, cd->marks[i], cd->marks[j]), "cudaEventElapsedTime");
    if (!st) *seconds = ms / 1000.0;
    return st;
}

static ox_status cu_wait(struct ox_device *d, int i) {
    struct cuda_device *cd = dev_of(d);
    if (i < 0 || i >= cd->n_marks) return ox_err(OX_E_INTERNAL, "mark %d of %d", i, cd->n_marks);
    return ox_cu_check(cudaEventSynchronize(cd->marks[i]), "cudaEventSynchronize");
}

static const struct ox_device_ops cuda_ops = {
    cu_close,      cu_alloc,    cu_free,          cu_alloc_host,  cu_free_host,
    cu_copy_in,    cu_copy_out, cu_sync,          cu_convert,     cu_prepare,
    cu_run,        cu_release,  cu_capture_begin, cu_capture_end, cu_replay,
    cu_graph_free, cu_mark,     cu_elapsed,       cu_wait,
};

extern const struct ox_cuda_host *ox_cuda_host_api;

extern "C" __attribute__((visibility("default"))) ox_status
ox_cuda_module_open(const struct ox_cuda_host *host, int index, int precision,
                    struct ox_device **out) {
    *out = NULL;
    if (!host || host->version != OX_CUDA_HOST_VERSION) return OX_E_DEVICE; /* not ours */
    ox_cuda_host_api = host;
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count == 0) {
        cudaGetLastError();
        return ox_err(OX_E_DEVICE, "no CUDA GPU here (cudaGetDeviceCount: %s)",
                      err != cudaSuccess ? cudaGetErrorString(err) : "0 devices");
    }
    if (index >= count)
        return ox_err(OX_E_DEVICE, "cuda:%d: this machine has %d GPU%s (cuda:0 to cuda:%d)", index,
                      count, count == 1 ? "" : "s", count - 1);
    struct cuda_device *cd = (struct cuda_device *)calloc(1, sizeof *cd);
    if (!cd) return ox_err(OX_E_NOMEM, "out of memory");
    pthread_mutex_lock(&cores_mu);
    struct cuda_core *core = cores;
    while (core && core->index != index) core = core->next;
    ox_status st = OX_OK;
    if (!core && !(st = core_new(index, &core))) {
        core->next = cores;
        cores = core;
    }
    if (!st) core->n_users++;
    pthread_mutex_unlock(&cores_mu);
    if (st) {
        free(cd);
        return st;
    }
    cd->base.ops = &cuda_ops;
    cd->base.precision = precision;
    cd->base.mu = &core->mu;
    snprintf(cd->base.name, sizeof cd->base.name, "cuda:%d (%.199s)", index, core->name);
    cd->index = index;
    cd->core = core;
    cd->stream = core->stream;
    cd->blas = core->blas;
    cd->dnn = core->dnn;
    cd->n_sms = core->n_sms;
    *out = &cd->base;
    return OX_OK;
}
