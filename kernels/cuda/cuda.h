/* The CUDA device's kernels (built only with OX_CUDA; the device itself is kernels/cuda/device.cu).
 *
 * A CUDA kernel is a row of kernels/cuda/ops.def,
 *
 *     OX_CUDA_OP("", "Relu", ox_cu_prepare_unary, ox_cu_unary, NULL)
 *
 * naming the operator (domain, type, any opset the CPU table serves) and three functions:
 *
 * - prepare(c, node, in, out, const_inputs, &state, &workspace): called once per plan step,
 *   when the plan is built, with every shape known (out[j]->dims as the CPU plan's infer set
 *   them) and every data pointer a device pointer (inputs whose bit is set in const_inputs are
 *   constant for the plan's life and already uploaded: prepare may read them on the device,
 *   for example to pack weights). It returns OX_OK when the kernel takes this node with these
 *   types, shapes and attributes, OX_E_UNSUPPORTED when it does not (the node then runs on
 *   the CPU, with copies around it: no message is needed), another code on a real failure.
 *   It may leave per-step memory in *state (given to release) and ask for *workspace bytes of
 *   device scratch. It may allocate and synchronize.
 * - run(c, node, in, out): enqueues the work on c->stream. It must not allocate, synchronize,
 *   read device memory from the host or depend on anything but the tensors and c->state,
 *   because the executor captures a whole plan's runs into one CUDA graph and replays it.
 *   c->workspace holds the bytes prepare asked for (shared by all steps).
 * - release(state): frees what prepare left (NULL: nothing to free).
 *
 * Tensors are row-major and contiguous, as on the CPU; `data` is device memory. An omitted
 * optional input or output is NULL. Errors go through ox_node_err (names node and op) or
 * ox_cu_check (a CUDA runtime error).
 */
#ifndef OX_KERNELS_CUDA_H
#define OX_KERNELS_CUDA_H

#ifdef __cplusplus
extern "C" {
#endif
#include "graph/ir.h"
#include "kernels/op.h"
#ifdef __cplusplus
}
#endif

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <stdint.h>
#include <stdlib.h>

struct ox_cuda_ctx {
    cudaStream_t stream;
    cublasHandle_t blas;
    cudnnHandle_t dnn;
    cublasLtHandle_t lt; /* cuBLASLt, for GEMMs with their bias in the epilogue */
    void *blas_ws;       /* cuBLAS's workspace, which cuBLASLt calls share (one stream) */
    size_t blas_ws_bytes;
    bool tf32;       /* TF32 tensor-core math allowed for float32 (off unless asked) */
    bool precise;    /* in prepare: the plan computes gradients, so no algorithm that rounds
                        more than a direct sum (cuDNN's FFT and Winograd convolutions) */
    int n_sms;       /* streaming multiprocessors of the device */
    void *workspace; /* device scratch, at least the bytes this step's prepare asked for */
    size_t workspace_bytes;
    void *state; /* this step's *state from prepare */
};

typedef ox_status (*ox_cuda_prepare_fn)(struct ox_cuda_ctx *c, const struct ox_node *n,
                                        const ox_tensor *const *in, ox_tensor *const *out,
                                        unsigned const_inputs, void **state, size_t *workspace);
typedef ox_status (*ox_cuda_run_fn)(struct ox_cuda_ctx *c, const struct ox_node *n,
                                    const ox_tensor *const *in, ox_tensor *const *out);
typedef void (*ox_cuda_release_fn)(void *state);

struct ox_cuda_op {
    const char *domain;
    const char *type;
    ox_cuda_prepare_fn prepare;
    ox_cuda_run_fn run;
    ox_cuda_release_fn release;
};

/* A row's three functions, declared: the table (ops.cu) and a family's file use it, so that
 * each definition is checked against its row. */
#define OX_CUDA_OP_PROTOTYPES(prepare, run, release)                                               \
    ox_status prepare(struct ox_cuda_ctx *, const struct ox_node *, const ox_tensor *const *,      \
                      ox_tensor *const *, unsigned, void **, size_t *);                            \
    ox_status run(struct ox_cuda_ctx *, const struct ox_node *, const ox_tensor *const *,          \
                  ox_tensor *const *);                                                             \
    void release(void *);

/* The row for (domain, type), or NULL. */
const struct ox_cuda_op *ox_cuda_op_find(const char *domain, const char *type);

/* OX_OK, or OX_E_DEVICE with a message naming `what` and CUDA's words for err. */
ox_status ox_cu_check(cudaError_t err, const char *what);
/* The same for the last launch on this thread (cudaGetLastError). */
ox_status ox_cu_launched(const char *what);
ox_status ox_cu_blas_check(cublasStatus_t st, const char *what);
ox_status ox_cu_dnn_check(cudnnStatus_t st, const char *what);
/* OX_CUDA_TRACE=1: prepare says on stderr which way it chose for a node (a convolution's
 * candidates and their times, cuBLASLt's algorithm, attention's kernel), one line each, so
 * that a check forcing a way can see that the way ran. */
bool ox_cu_tracing(void);
void ox_cu_trace(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The element types the GPU computes in float (float itself, and float16 and bfloat16 with
 * float sums), and their names for messages and traces. */
static inline bool ox_cu_is_float(ox_dtype dt) {
    return dt == OX_FLOAT || dt == OX_FLOAT16 || dt == OX_BFLOAT16;
}
static inline const char *ox_cu_float_name(ox_dtype dt) {
    return dt == OX_FLOAT ? "float" : dt == OX_FLOAT16 ? "float16" : "bfloat16";
}

/* Blocks of 256 threads covering n items, at most 65535 * 64 blocks (kernels loop with a
 * grid stride past that). */
static inline unsigned ox_cu_blocks(int64_t n) {
    int64_t b = (n + 255) / 256;
    if (b < 1) b = 1;
    if (b > 65535 * 64) b = 65535 * 64;
    return (unsigned)b;
}

/* Whether the vectorized elementwise kernels, the register-row normalization and softmax
 * kernels and the 2-D pooling kernel may be used (default yes). OX_CUDA_VEC=0, a measurement
 * knob, keeps the kernels they replace. Read once per process. */
static inline bool ox_cu_vec_on(void) {
    static int on = -1;
    if (on < 0) {
        const char *e = getenv("OX_CUDA_VEC");
        on = !(e && e[0] == '0' && e[1] == 0);
    }
    return on != 0;
}

/* Whether device pointer p is aligned to w bytes (a power of two). */
static inline bool ox_cu_aligned(const void *p, size_t w) {
    return ((uintptr_t)p & (w - 1)) == 0;
}

#endif
