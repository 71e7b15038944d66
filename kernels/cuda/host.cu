/* The core functions that CUDA kernels call, defined in the module by calling through the
 * table the core gave it (kernels/cuda/host.h). */
#include "kernels/cuda/cuda.h"
#include "kernels/cuda/host.h"

#include <stdarg.h>
#include <stdio.h>

const struct ox_cuda_host *ox_cuda_host_api; /* set by ox_cuda_module_open */

#define H ox_cuda_host_api

extern "C" {

ox_status ox_err(ox_status code, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return H->err(code, msg);
}

ox_status ox_err_prefix(ox_status code, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return H->err_prefix(code, msg);
}

ox_status ox_node_err(const struct ox_node *n, ox_status code, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return H->node_err(n, code, msg);
}

const char *ox_dtype_name(ox_dtype dt) {
    return H->dtype_name(dt);
}
size_t ox_dtype_size(ox_dtype dt) {
    return H->dtype_size(dt);
}
bool ox_dtype_is_float(ox_dtype dt) {
    return H->dtype_is_float(dt);
}
bool ox_dtype_is_int(ox_dtype dt) {
    return H->dtype_is_int(dt);
}
int64_t ox_tensor_numel(const ox_tensor *t) {
    return H->tensor_numel(t);
}
const struct ox_attr *ox_node_attr(const struct ox_node *n, const char *name) {
    return H->node_attr(n, name);
}
int64_t ox_attr_int(const struct ox_node *n, const char *name, int64_t def) {
    return H->attr_int(n, name, def);
}
float ox_attr_float(const struct ox_node *n, const char *name, float def) {
    return H->attr_float(n, name, def);
}
const char *ox_attr_str(const struct ox_node *n, const char *name, const char *def) {
    return H->attr_str(n, name, def);
}
int ox_attr_ints(const struct ox_node *n, const char *name, const int64_t **out) {
    return H->attr_ints(n, name, out);
}
int ox_attr_floats(const struct ox_node *n, const char *name, const float **out) {
    return H->attr_floats(n, name, out);
}
void ox_broadcast_strides(const ox_tensor *t, int rank, const int64_t *dims, int64_t *strides) {
    H->broadcast_strides(t, rank, dims, strides);
}
ox_status ox_matmul_shape(const struct ox_node *n, const ox_tensor *a, const ox_tensor *b,
                          struct ox_matmul_shape *m) {
    return H->matmul_shape(n, a, b, m);
}
void ox_matmul_offsets(const struct ox_matmul_shape *m, int64_t i, int64_t *ao, int64_t *bo) {
    H->matmul_offsets(m, i, ao, bo);
}
void ox_fused_clamp(const struct ox_node *n, float *lo, float *hi) {
    H->fused_clamp(n, lo, hi);
}
bool ox_fused_silu(const struct ox_node *n) {
    return H->fused_silu(n);
}
double ox_get_f64(const ox_tensor *t, int64_t i) {
    return H->get_f64(t, i);
}
void ox_set_f64(ox_tensor *t, int64_t i, double v) {
    H->set_f64(t, i, v);
}
int64_t ox_get_i64(const ox_tensor *t, int64_t i) {
    return H->get_i64(t, i);
}
void ox_set_i64(ox_tensor *t, int64_t i, int64_t v) {
    H->set_i64(t, i, v);
}
float ox_half_to_float(uint16_t h) {
    return H->half_to_float(h);
}
uint16_t ox_float_to_half(float f) {
    return H->float_to_half(f);
}
int64_t ox_read_ints(const struct ox_node *n, const ox_tensor *t, int64_t *out, int64_t max) {
    return H->read_ints(n, t, out, max);
}
ox_status ox_norm_axis(const struct ox_node *n, int64_t axis, int rank, int *out) {
    return H->norm_axis(n, axis, rank, out);
}
ox_status ox_fattn_parse(const struct ox_node *n, const ox_tensor *const *in, struct ox_fattn *a) {
    return H->fattn_parse(n, in, a);
}
void ox_fattn_offsets(const struct ox_fattn *a, int64_t i, int64_t off[OX_FATTN_N]) {
    H->fattn_offsets(a, i, off);
}
bool ox_gemm_describe(struct ox_mat a, struct ox_mat b, struct ox_mat c, struct ox_gemm_desc *d) {
    return H->gemm_describe(a, b, c, d);
}
}
