/* The float element types of the CUDA kernels (float, float16, bfloat16) as float and back:
 *
 *     float v = ox_cu_to_f(x[i]);          // exact
 *     y[i] = ox_cu_from_f<__half>(v * s);  // rounded to nearest, ties to even
 *
 * A file may add specializations for the other types it reads or writes (nn.cu: 8-bit). */
#ifndef OX_KERNELS_CUDA_ELEM_CUH
#define OX_KERNELS_CUDA_ELEM_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>

template <typename T> __device__ __forceinline__ float ox_cu_to_f(T v);
template <> __device__ __forceinline__ float ox_cu_to_f<float>(float v) {
    return v;
}
template <> __device__ __forceinline__ float ox_cu_to_f<__half>(__half v) {
    return __half2float(v);
}
template <> __device__ __forceinline__ float ox_cu_to_f<__nv_bfloat16>(__nv_bfloat16 v) {
    return __bfloat162float(v);
}

template <typename T> __device__ __forceinline__ T ox_cu_from_f(float v);
template <> __device__ __forceinline__ float ox_cu_from_f<float>(float v) {
    return v;
}
template <> __device__ __forceinline__ __half ox_cu_from_f<__half>(float v) {
    return __float2half_rn(v);
}
template <> __device__ __forceinline__ __nv_bfloat16 ox_cu_from_f<__nv_bfloat16>(float v) {
    return __float2bfloat16_rn(v);
}

#endif
