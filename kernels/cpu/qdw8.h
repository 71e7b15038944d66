/* 8-bit 2-D depthwise convolution (QLinearConv with group = C = M): kernels/cpu/qdw8.c says
 * how. Internal to kernels/cpu/. */
#ifndef OX_KERNELS_CPU_QDW8_H
#define OX_KERNELS_CPU_QDW8_H

#include "kernels/cpu/qconv8.h"

/* Whether it runs here (AVX-512F; OX_QCONV8=0 turns it off, as it does qconv8.c) for a
 * geometry (M = C, one input channel per output channel) whose sizes it handles. */
bool ox_qdw8_fast(const struct ox_qconv8_geom *g);

/* Scratch for ox_qdw8_run on n_threads, 64-byte aligned. */
size_t ox_qdw8_scratch_bytes(const struct ox_qconv8_geom *g, int n_threads);

/* The input x (uint8 or int8 as x_signed says; zero point xz) and weights w ([C, 1, KH, KW],
 * int8 or uint8 as w_signed says; wz: C zero points, or one when wz_per_c is false, or
 * NULL for 0). y as ox_qconv8_run writes it (o: the requantization). */
struct ox_qdw8_in {
    const void *x, *w, *wz;
    bool x_signed, w_signed, wz_per_c;
    int32_t xz;
};
void ox_qdw8_run(struct ox_pool *pool, const struct ox_qconv8_geom *g, const struct ox_qdw8_in *in,
                 const struct ox_qconv8_out *o, void *y, void *scratch);

#endif
