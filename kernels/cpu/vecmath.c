/* Vectorized float math for the hot rows of Softmax and the sigmoid family: AVX-512 where
 * the CPU has it (chosen at run time), the C library's expf otherwise.
 *
 *     ox_softmax_row(x, y, n);   // y = exp(x - max) / sum, n floats
 *     ox_sigmoid_floats(x, y, n); // y = 1 / (1 + exp(-x))
 *
 * exp: x = k ln2 + r with |r| <= ln2/2, e^r by its Taylor polynomial to degree 7 (error
 * below 1e-8 relative, under the rounding of the float steps), scaled by 2^k with
 * vscalefps, which also gives +inf on overflow and 0 (through the subnormals) on
 * underflow. NaN stays NaN. Measured against expf: within 2 ulp (tests/test_sgemm.c).
 */
#include "kernels/cpu/vecmath.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

__attribute__((target("avx512f"))) static void softmax_row_avx512(const float *x, float *y,
                                                                  int64_t n) {
    __m512 vmax = _mm512_set1_ps(-INFINITY);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = tail_mask16(n - i);
        vmax = _mm512_mask_max_ps(vmax, m, _mm512_maskz_loadu_ps(m, x + i), vmax);
    }
    float mx = _mm512_reduce_max_ps(vmax);
    __m512 vm = _mm512_set1_ps(mx), vsum = _mm512_setzero_ps();
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = tail_mask16(n - i);
        __m512 e = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), vm));
        vsum = _mm512_mask_add_ps(vsum, m, vsum, e);
        _mm512_mask_storeu_ps(y + i, m, e);
    }
    __m512 r = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(vsum));
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = tail_mask16(n - i);
        _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, y + i), r));
    }
}

__attribute__((target("avx512f"))) static void sigmoid_avx512(const float *x, float *y, int64_t n) {
    __m512 one = _mm512_set1_ps(1.0f);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = tail_mask16(n - i);
        __m512 e = exp16(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_maskz_loadu_ps(m, x + i)));
        _mm512_mask_storeu_ps(y + i, m, _mm512_div_ps(one, _mm512_add_ps(one, e)));
    }
}

__attribute__((target("avx512f"))) static void exp_avx512(const float *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = tail_mask16(n - i);
        _mm512_mask_storeu_ps(y + i, m, exp16(_mm512_maskz_loadu_ps(m, x + i)));
    }
}
#endif

void ox_softmax_row(const float *x, float *y, int64_t n) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (ox_sgemm_is_fast()) {
        softmax_row_avx512(x, y, n);
        return;
    }
#endif
    float mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < n; j++) mx = x[j] > mx ? x[j] : mx;
    for (int64_t j = 0; j < n; j++) sum += y[j] = expf(x[j] - mx);
    float r = 1.0f / sum;
    for (int64_t j = 0; j < n; j++) y[j] *= r;
}

void ox_exp_floats(const float *x, float *y, int64_t n) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (ox_sgemm_is_fast()) {
        exp_avx512(x, y, n);
        return;
    }
#endif
    for (int64_t j = 0; j < n; j++) y[j] = expf(x[j]);
}

void ox_sigmoid_floats(const float *x, float *y, int64_t n) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (ox_sgemm_is_fast()) {
        sigmoid_avx512(x, y, n);
        return;
    }
#endif
    for (int64_t j = 0; j < n; j++) {
        float v = x[j];
        y[j] = v >= 0 ? 1.0f / (1.0f + expf(-v)) : expf(v) / (1.0f + expf(v));
    }
}
