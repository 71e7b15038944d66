/* AVX-512 helpers shared by kernels (kernels/cpu/vecmath.c says how exp is computed). Only
 * for code compiled for or dispatched to AVX-512 (target("avx512f") functions). */
#ifndef OX_KERNELS_CPU_VECMATH_H
#define OX_KERNELS_CPU_VECMATH_H

#include "kernels/op.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* e^x for 16 floats, within 2 ulp; +inf past 88.7, 0 below -104, NaN kept. */
__attribute__((target("avx512f"))) static inline __m512 exp16(__m512 x) {
    /* beyond these, exp is 0 or +inf in float; max(c, x) keeps a NaN x */
    x = _mm512_min_ps(_mm512_set1_ps(89.0f), _mm512_max_ps(_mm512_set1_ps(-104.0f), x));
    __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693145751953125f), x); /* ln2, high bits */
    r = _mm512_fnmadd_ps(k, _mm512_set1_ps(1.428606765330187e-06f), r);    /* ln2, the rest */
    __m512 p = _mm512_set1_ps(1.0f / 5040);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, k);
}

/* Lanes [0, left) of a 16-lane vector, all 16 from left 16 on (left >= 1): a row's tail. */
static inline __mmask16 tail_mask16(int64_t left) {
    return left >= 16 ? 0xFFFF : (__mmask16)((1u << left) - 1);
}

/* The low bytes of 16 int32 lanes to dst, n of them (n >= 16: all 16). Packed in a register
 * and stored plainly: AMD's cores run the packing store (vpmovdb to memory, masked or not)
 * as microcode, several times slower (a QuantizeLinear of 1.2M values: 0.21 -> 0.10 ms). */
__attribute__((target("avx512f"))) static inline void store_bytes16(void *dst, int64_t n,
                                                                    __m512i v) {
    __m128i b = _mm512_cvtepi32_epi8(v);
    if (n >= 16) {
        _mm_storeu_si128((__m128i *)dst, b);
    } else {
        unsigned char t[16];
        _mm_storeu_si128((__m128i *)t, b);
        for (int64_t i = 0; i < n; i++) ((unsigned char *)dst)[i] = t[i];
    }
}

/* Indices of the even and the odd lanes of two vectors (_mm512_permutex2var_ps): a stride-2
 * row's taps from 32 consecutive floats. */
__attribute__((target("avx512f"))) static inline __m512i even_lanes16(void) {
    return _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
}
__attribute__((target("avx512f"))) static inline __m512i odd_lanes16(void) {
    return _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
}

/* QLinearConv's requantization of 16 int32 sums (offsets added): rint(s * mult + zp) in
 * double (m_lo, m_hi: lanes 0-7's and 8-15's multipliers), clamped to [lo, hi] (the bound
 * for a NaN), as 16 int32 codes. kernels/cpu/quant.c and qconv8.c compute it so, bit for bit
 * their scalar loops. */
__attribute__((target("avx512f"))) static inline __m512i
requant16(__m512i s, __m512d m_lo, __m512d m_hi, __m512d zp, __m512d lo, __m512d hi) {
    __m512d v0 = _mm512_cvtepi32_pd(_mm512_castsi512_si256(s));
    __m512d v1 = _mm512_cvtepi32_pd(_mm512_extracti64x4_epi64(s, 1));
    v0 = _mm512_add_pd(_mm512_mul_pd(v0, m_lo), zp);
    v1 = _mm512_add_pd(_mm512_mul_pd(v1, m_hi), zp);
    v0 = _mm512_roundscale_pd(v0, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    v1 = _mm512_roundscale_pd(v1, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256i r0 = _mm512_cvtpd_epi32(_mm512_min_pd(_mm512_max_pd(v0, lo), hi));
    __m256i r1 = _mm512_cvtpd_epi32(_mm512_min_pd(_mm512_max_pd(v1, lo), hi));
    return _mm512_inserti64x4(_mm512_castsi256_si512(r0), r1, 1);
}

/* x * sigmoid(x) = x / (1 + e^-x), for 16 floats (SiLU, Swish). */
__attribute__((target("avx512f"))) static inline __m512 silu16(__m512 x) {
    __m512 one = _mm512_set1_ps(1.0f);
    return _mm512_div_ps(x, _mm512_add_ps(one, exp16(_mm512_sub_ps(_mm512_setzero_ps(), x))));
}
#endif

#endif
