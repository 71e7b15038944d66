/* Opening devices by name: the one place that knows the kinds of device.
 *
 * The CUDA device is the module libonnxexec_cuda.so (kernels/cuda/host.h), loaded once per
 * process when a session first asks for a GPU. It is looked for, in order: at the path in
 * the environment variable OX_CUDA_MODULE; beside the file that holds this code (the
 * library, or a program linked with it statically); in ../lib from there; in the library
 * folder of the installation (OX_CUDA_MODULE_DIR); and by its name alone (LD_LIBRARY_PATH and
 * the system's folders). */
#define _GNU_SOURCE
#include "executor/device.h"
#include "kernels/cuda/host.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static ox_status host_err(ox_status code, const char *msg) {
    return ox_err(code, "%s", msg);
}

static ox_status host_err_prefix(ox_status code, const char *msg) {
    return ox_err_prefix(code, "%s", msg);
}

static ox_status host_node_err(const struct ox_node *n, ox_status code, const char *msg) {
    return ox_node_err(n, code, "%s", msg);
}

static const struct ox_cuda_host host = {
    .version = OX_CUDA_HOST_VERSION,
    .err = host_err,
    .err_prefix = host_err_prefix,
    .node_err = host_node_err,
    .dtype_name = ox_dtype_name,
    .dtype_size = ox_dtype_size,
    .dtype_is_float = ox_dtype_is_float,
    .dtype_is_int = ox_dtype_is_int,
    .tensor_numel = ox_tensor_numel,
    .node_attr = ox_node_attr,
    .attr_int = ox_attr_int,
    .attr_float = ox_attr_float,
    .attr_str = ox_attr_str,
    .attr_ints = ox_attr_ints,
    .attr_floats = ox_attr_floats,
    .broadcast_strides = ox_broadcast_strides,
    .matmul_shape = ox_matmul_shape,
    .matmul_offsets = ox_matmul_offsets,
    .fused_clamp = ox_fused_clamp,
    .fused_silu = ox_fused_silu,
    .get_f64 = ox_get_f64,
    .set_f64 = ox_set_f64,
    .get_i64 = ox_get_i64,
    .set_i64 = ox_set_i64,
    .half_to_float = ox_half_to_float,
    .float_to_half = ox_float_to_half,
    .read_ints = ox_read_ints,
    .norm_axis = ox_norm_axis,
    .fattn_parse = ox_fattn_parse,
    .fattn_offsets = ox_fattn_offsets,
    .gemm_describe = ox_gemm_describe,
};

static pthread_mutex_t module_mu = PTHREAD_MUTEX_INITIALIZER;
static ox_cuda_module_open_fn module_open; /* once loaded, for the life of the process */

/* Load the CUDA module (once); NULL with the reason in why when it cannot be. */
static ox_cuda_module_open_fn cuda_module(char *why, size_t len) {
    pthread_mutex_lock(&module_mu);
    if (module_open) {
        pthread_mutex_unlock(&module_mu);
        return module_open;
    }
    char paths[5][4096];
    int n = 0;
    const char *env = getenv("OX_CUDA_MODULE");
    if (env && *env) snprintf(paths[n++], sizeof paths[0], "%s", env);
    Dl_info info;
    if (dladdr((void *)&ox_device_open, &info) && info.dli_fname) {
        const char *slash = strrchr(info.dli_fname, '/');
        int dir = slash ? (int)(slash - info.dli_fname) : 1;
        const char *base = slash ? info.dli_fname : ".";
        snprintf(paths[n++], sizeof paths[0], "%.*s/%s", dir, base, OX_CUDA_MODULE_FILE);
        snprintf(paths[n++], sizeof paths[0], "%.*s/../lib/%s", dir, base, OX_CUDA_MODULE_FILE);
    }
#ifdef OX_CUDA_MODULE_DIR
    snprintf(paths[n++], sizeof paths[0], "%s/%s", OX_CUDA_MODULE_DIR, OX_CUDA_MODULE_FILE);
#endif
    snprintf(paths[n++], sizeof paths[0], "%s", OX_CUDA_MODULE_FILE);
    why[0] = '\0';
    for (int i = 0; i < n && !module_open; i++) {
        void *h = dlopen(paths[i], RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            const char *e = dlerror();
            /* a module that is there but cannot load says more than one that is absent */
            if (e && (!why[0] || !strstr(e, "No such file"))) snprintf(why, len, "%s", e);
            continue;
        }
        module_open = (ox_cuda_module_open_fn)dlsym(h, OX_CUDA_MODULE_OPEN);
        if (!module_open) {
            snprintf(why, len, "%.900s: no %s in it", paths[i], OX_CUDA_MODULE_OPEN);
            dlclose(h);
        }
    }
    pthread_mutex_unlock(&module_mu);
    return module_open;
}

ox_status ox_device_parse(const char *spec, int *index) {
    *index = -1;
    if (!spec || !*spec || strcmp(spec, "cpu") == 0) return OX_OK;
    if (strncmp(spec, "cuda", 4) == 0 && (spec[4] == '\0' || spec[4] == ':')) {
        long i = 0;
        if (spec[4] == ':') {
            char *end;
            i = strtol(spec + 5, &end, 10);
            if (end == spec + 5 || *end || i < 0 || i > 1024)
                return ox_err(OX_E_INVALID, "device '%s': expected cuda:N, N the GPU's number",
                              spec);
        }
        *index = (int)i;
        return OX_OK;
    }
    return ox_err(OX_E_INVALID, "unknown device '%s' (expected cpu, cuda or cuda:N)", spec);
}

ox_status ox_device_open(const char *spec, int precision, struct ox_device **out) {
    *out = NULL;
    if (precision < OX_PRECISION_FP32 || precision > OX_PRECISION_BF16)
        return ox_err(OX_E_INVALID,
                      "precision %d: expected OX_PRECISION_FP32, _TF32, _FP16 or _BF16", precision);
    if (!spec || !*spec || strcmp(spec, "cpu") == 0) {
        if (precision != OX_PRECISION_FP32)
            return ox_err(OX_E_UNSUPPORTED,
                          "precision other than fp32 is for GPUs (--device cuda); the CPU "
                          "computes in float32");
        return OX_OK;
    }
    int index;
    ox_status st = ox_device_parse(spec, &index);
    if (st) return st;
    char why[1024];
    ox_cuda_module_open_fn open = cuda_module(why, sizeof why);
    if (!open)
        return ox_err(OX_E_DEVICE,
                      "device '%s': this onnxexec was built without CUDA, or its CUDA "
                      "module %s cannot be loaded (%s); build with -DOX_CUDA=ON where nvcc, "
                      "cuBLAS and cuDNN are installed, or set OX_CUDA_MODULE to its path",
                      spec, OX_CUDA_MODULE_FILE, why[0] ? why : "not found");
    return open(&host, index, precision, out);
}

void ox_device_close(struct ox_device *d) {
    if (d) d->ops->close(d);
}
