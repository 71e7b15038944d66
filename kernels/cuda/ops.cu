/* The CUDA operator table, generated from the rows in kernels/cuda/<family>.def (see
 * kernels/cuda/cuda.h), and the error helpers every CUDA kernel uses. */
#include "kernels/cuda/cuda.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void ox_cu_release_none(void *state) {
    (void)state;
}

#define OX_CUDA_OP(domain, type, prepare, run, release) OX_CUDA_OP_PROTOTYPES(prepare, run, release)
#include "kernels/cuda/ops.def"
#undef OX_CUDA_OP

static const struct ox_cuda_op table[] = {
#define OX_CUDA_OP(domain, type, prepare, run, release) {domain, type, prepare, run, release},
#include "kernels/cuda/ops.def"
#undef OX_CUDA_OP
    {NULL, NULL, NULL, NULL, NULL},
};

const struct ox_cuda_op *ox_cuda_op_find(const char *domain, const char *type) {
    for (const struct ox_cuda_op *op = table; op->type; op++)
        if (strcmp(op->type, type) == 0 && strcmp(op->domain, domain) == 0) return op;
    return NULL;
}

ox_status ox_cu_check(cudaError_t err, const char *what) {
    if (err == cudaSuccess) return OX_OK;
    return ox_err(OX_E_DEVICE, "%s: CUDA error %s (%s)", what, cudaGetErrorName(err),
                  cudaGetErrorString(err));
}

bool ox_cu_tracing(void) {
    const char *e = getenv("OX_CUDA_TRACE");
    return e && *e && strcmp(e, "0") != 0;
}

void ox_cu_trace(const char *fmt, ...) {
    if (!ox_cu_tracing()) return;
    va_list ap;
    va_start(ap, fmt);
    fputs("onnxexec cuda: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

ox_status ox_cu_launched(const char *what) {
    return ox_cu_check(cudaGetLastError(), what);
}

ox_status ox_cu_blas_check(cublasStatus_t st, const char *what) {
    if (st == CUBLAS_STATUS_SUCCESS) return OX_OK;
    return ox_err(OX_E_DEVICE, "%s: cuBLAS error %s (%s)", what, cublasGetStatusName(st),
                  cublasGetStatusString(st));
}

ox_status ox_cu_dnn_check(cudnnStatus_t st, const char *what) {
    if (st == CUDNN_STATUS_SUCCESS) return OX_OK;
    return ox_err(OX_E_DEVICE, "%s: cuDNN error %s", what, cudnnGetErrorString(st));
}
