/* What the CUDA module takes from the core library.
 *
 * The CUDA device is a module of its own, libonnxexec_cuda.so, that executor/device.c
 * loads (dlopen) when a session asks for a GPU: the CUDA runtime, cuBLAS and cuDNN it links
 * cost a process some 150 MiB of memory when loaded, which a program that runs on the CPU
 * must not pay. The module links none of the core's code: the few core functions its
 * kernels call (errors, attributes, shapes) reach it as this table of pointers, given to
 * its one exported function, and kernels/cuda/host.cu defines those functions under their
 * usual names by calling through the table, so kernels call them as anywhere else.
 */
#ifndef OX_KERNELS_CUDA_HOST_H
#define OX_KERNELS_CUDA_HOST_H

#ifdef __cplusplus
extern "C" {
#endif
#include "graph/ir.h"
#include "kernels/op.h"

struct ox_device;

#define OX_CUDA_HOST_VERSION 2

struct ox_cuda_host {
    int version; /* OX_CUDA_HOST_VERSION: the module refuses a core of another */
    /* errors: the message set as is (ox_err's and ox_node_err's, formatted by the caller) */
    ox_status (*err)(ox_status code, const char *msg);
    ox_status (*err_prefix)(ox_status code, const char *msg);
    ox_status (*node_err)(const struct ox_node *n, ox_status code, const char *msg);
    const char *(*dtype_name)(ox_dtype dt);
    size_t (*dtype_size)(ox_dtype dt);
    bool (*dtype_is_float)(ox_dtype dt);
    bool (*dtype_is_int)(ox_dtype dt);
    int64_t (*tensor_numel)(const ox_tensor *t);
    const struct ox_attr *(*node_attr)(const struct ox_node *n, const char *name);
    int64_t (*attr_int)(const struct ox_node *n, const char *name, int64_t def);
    float (*attr_float)(const struct ox_node *n, const char *name, float def);
    const char *(*attr_str)(const struct ox_node *n, const char *name, const char *def);
    int (*attr_ints)(const struct ox_node *n, const char *name, const int64_t **out);
    int (*attr_floats)(const struct ox_node *n, const char *name, const float **out);
    void (*broadcast_strides)(const ox_tensor *t, int rank, const int64_t *dims, int64_t *strides);
    ox_status (*matmul_shape)(const struct ox_node *n, const ox_tensor *a, const ox_tensor *b,
                              struct ox_matmul_shape *m);
    void (*matmul_offsets)(const struct ox_matmul_shape *m, int64_t i, int64_t *ao, int64_t *bo);
    void (*fused_clamp)(const struct ox_node *n, float *lo, float *hi);
    bool (*fused_silu)(const struct ox_node *n);
    double (*get_f64)(const ox_tensor *t, int64_t i);
    void (*set_f64)(ox_tensor *t, int64_t i, double v);
    int64_t (*get_i64)(const ox_tensor *t, int64_t i);
    void (*set_i64)(ox_tensor *t, int64_t i, int64_t v);
    float (*half_to_float)(uint16_t h);
    uint16_t (*float_to_half)(float f);
    int64_t (*read_ints)(const struct ox_node *n, const ox_tensor *t, int64_t *out, int64_t max);
    ox_status (*norm_axis)(const struct ox_node *n, int64_t axis, int rank, int *out);
    /* version 2: FusedAttention's views (kernels/attn_plan.c) */
    ox_status (*fattn_parse)(const struct ox_node *n, const ox_tensor *const *in,
                             struct ox_fattn *a);
    void (*fattn_offsets)(const struct ox_fattn *a, int64_t i, int64_t *off);
    bool (*gemm_describe)(struct ox_mat a, struct ox_mat b, struct ox_mat c,
                          struct ox_gemm_desc *d);
};

/* The module's one export (found with dlsym): open GPU `index` for a session. */
typedef ox_status (*ox_cuda_module_open_fn)(const struct ox_cuda_host *host, int index,
                                            int precision, struct ox_device **out);
#define OX_CUDA_MODULE_OPEN "ox_cuda_module_open"
#define OX_CUDA_MODULE_FILE "libonnxexec_cuda.so"

#ifdef __cplusplus
}
#endif

#endif
