/* Exact int16 GEMM for the integer operators (QLinearConv, ConvInteger, QLinearMatMul,
 * MatMulInteger), over the thread pool; kernels/cpu/igemm.c says how. */
#ifndef OX_KERNELS_CPU_IGEMM_H
#define OX_KERNELS_CPU_IGEMM_H

#include "kernels/op.h"

/* Columns of C a block holds: emit is given at most this many at a time. */
#define IG_BLOCK_COLS 32

/* Receives sums: row m of C, columns [n0, n0 + nn), from any thread of the pool. */
typedef void (*ox_igemm16_emit)(void *arg, int64_t m, int64_t n0, int64_t nn, const int32_t *c);

/* Whether ox_igemm16 runs here (AVX-512BW, and OX_SGEMM_PACKED is not 0). */
bool ox_igemm16_fast(void);

/* Adds the scratch bytes of ox_igemm16 for M x K times K x N on n_threads to *total (64-byte
 * pieces; nothing where it does not run); false when the size overflows. */
bool ox_igemm16_scratch(int64_t M, int64_t K, int n_threads, size_t *total);

/* C = A B, A M x K (rows lda apart) or ox_igemm16_pack_a's packing of it, B K x N (rows ldb
 * apart) or ox_igemm16_pack_b's, in int16 whose products and pairs of products fit int32
 * (8-bit values minus zero points), sums exact in int32 (wrapping past it as the scalar loops
 * do), each block of C given to emit. */
enum {
    OX_IG8_NONE,      /* a and b: int16 */
    OX_IG8_A_S8_B_U8, /* a8 int8, b8 uint8 (a convolution's weights and input) */
    OX_IG8_A_U8_B_S8, /* a8 uint8, b8 int8 (a MatMul's input and weights) */
};

struct ox_igemm16_op {
    int64_t M, N, K;
    int mode8;           /* OX_IG8_*: 8-bit operands a8, b8 instead (ox_igemm8_fast) */
    const void *a8, *b8; /* lda, ldb then count bytes */
    const int16_t *a;
    int64_t lda;
    const void *a_packed; /* instead of a, or NULL */
    const int16_t *b;
    int64_t ldb;
    const void *b_packed; /* instead of b, or NULL */
    ox_igemm16_emit emit;
    void *arg;
};

/* scratch: 64-byte aligned, ox_igemm16_scratch bytes for the pool's size. Only where
 * ox_igemm16_fast(). */
void ox_igemm16(struct ox_pool *pool, const struct ox_igemm16_op *op, void *scratch);

/* A or B packed once (constant weights: prepared memory), in bytes and done. */
size_t ox_igemm16_a_bytes(int64_t M, int64_t K);
void ox_igemm16_pack_a(const int16_t *a, int64_t lda, int64_t M, int64_t K, void *dst);
size_t ox_igemm16_b_bytes(int64_t K, int64_t N);
void ox_igemm16_pack_b(const int16_t *b, int64_t ldb, int64_t K, int64_t N, void *dst);

/* The 8-bit modes: raw products of one unsigned and one signed 8-bit operand (vpdpbusd, four k
 * at a time: twice the int16 rate), zero points left to the caller (sum over k of (a - za)
 * (b - zb) = sum a b - zb sum_k a - za sum_k b + K za zb). Where the CPU has AVX-512 VNNI and
 * OX_IGEMM8 is not 0. Packing as above, for these operands. */
bool ox_igemm8_fast(void);
/* ox_igemm8_fast and AVX-512 VBMI's byte permute (vpermb) too: qconv8.c's folded kernel
 * columns and qdw8.c's depthwise dot products gather their bytes with it. */
bool ox_igemm8_vbmi(void);
size_t ox_igemm8_a_bytes(int64_t M, int64_t K);
void ox_igemm8_pack_a(const void *a, int64_t lda, int64_t M, int64_t K, void *dst);
size_t ox_igemm8_b_bytes(int64_t K, int64_t N);
void ox_igemm8_pack_b(const void *b, int64_t ldb, int64_t K, int64_t N, void *dst);

#endif
