/* Winograd F(4x4, 3x3) for float 2-D convolutions (kernels/cpu/winograd.c): 3x3 kernels,
 * stride 1, dilation 1, one group, on CPUs with AVX-512. conv.c asks ox_wino_applies when
 * it plans a Conv and, where it does, packs the transformed weights once and runs the
 * convolution here. */
#ifndef OX_KERNELS_CPU_WINOGRAD_H
#define OX_KERNELS_CPU_WINOGRAD_H

#include "kernels/op.h"

struct ox_wino {
    int64_t N, C, H, W; /* input: N images of C channels, H x W */
    int64_t M, OH, OW;  /* output channels and extent */
    int64_t pt, pl;     /* pads at the top and the left */
};

/* Whether the Winograd form runs this convolution (it can, and it pays against the direct
 * GEMM: enough output tiles to share each transformed weight, channels enough to fill the
 * GEMM). The caller has checked the kernel, strides, dilations and groups. */
bool ox_wino_applies(const struct ox_wino *g);
/* Floats of the transformed, packed weights (prepared once). */
int64_t ox_wino_weight_floats(int64_t C, int64_t M);
/* w: M x C x 3 x 3 float weights into dst (ox_wino_weight_floats(C, M) floats). */
void ox_wino_pack_weights(const float *w, int64_t C, int64_t M, float *dst);
/* Floats of scratch one convolution needs on a pool of n_threads. */
int64_t ox_wino_scratch_floats(const struct ox_wino *g, int n_threads);
/* y = act(conv(x, w) + bias + z): bias (M) and z (y's shape) may be NULL; act clamps to
 * [lo, hi] or, with silu, is x * sigmoid(x). */
void ox_wino_conv(struct ox_pool *pool, const struct ox_wino *g, const float *x,
                  const float *packed_w, const float *bias, const float *z, float lo, float hi,
                  bool silu, float *y, float *scratch);

#endif
