/* 8-bit 2-D convolution straight from the input (QLinearConv's uint8 x int8 form):
 * kernels/cpu/qconv8.c says how. Internal to kernels/cpu/. */
#ifndef OX_KERNELS_CPU_QCONV8_H
#define OX_KERNELS_CPU_QCONV8_H

#include "kernels/op.h"

/* A 2-D convolution of group 1: input [N, C, H, W], weights [M, C, KH, KW], output
 * [N, M, OH, OW]; strides, dilations, and the padding before each axis (PT top, PL left). */
struct ox_qconv8_geom {
    int64_t N, C, H, W, M, KH, KW, SH, SW, DH, DW, PT, PL, OH, OW;
};

/* Whether it runs here (AVX-512 VNNI; OX_QCONV8=0 or OX_IGEMM8=0 turns it off) for a
 * geometry whose sizes it handles. */
bool ox_qconv8_fast(const struct ox_qconv8_geom *g);

/* The weights (int8, their zero points all 0) packed once: bytes, and the packing. */
size_t ox_qconv8_packed_bytes(const struct ox_qconv8_geom *g);
void ox_qconv8_pack(const struct ox_qconv8_geom *g, const int8_t *w, void *dst);

/* Scratch for ox_qconv8_run on n_threads, 64-byte aligned. */
size_t ox_qconv8_scratch_bytes(const struct ox_qconv8_geom *g);

/* The requantization of QLinearConv: y = saturate(rint((sum + bias[m]) * mult[m] + zp)),
 * clamped to [lo, hi], in double (as kernels/cpu/quant.c's row loop computes it). */
struct ox_qconv8_out {
    const int32_t *bias; /* M values, or NULL */
    const double *mult;  /* M values */
    double zp, lo, hi;
};

/* y (uint8 or int8, as lo and hi allow) = the convolution of x (uint8, zero point xzp) by
 * the packed weights, requantized. */
void ox_qconv8_run(struct ox_pool *pool, const struct ox_qconv8_geom *g, const uint8_t *x,
                   uint8_t xzp, const void *packed, const struct ox_qconv8_out *o, void *y,
                   void *scratch);

#endif
