/* Vectorized float math for the hot rows of Softmax, the sigmoid family and GELU: AVX-512
 * where the CPU has it (chosen at run time), the C library otherwise.
 *
 *     ox_softmax_row(x, y, n);   // y = exp(x - max) / sum, n floats
 *     ox_sigmoid_floats(x, y, n); // y = 1 / (1 + exp(-x))
 *     ox_gelu_floats(x, y, n);    // y = x (1 + erf(x / sqrt 2)) / 2
 *     ox_gelu_tanh_floats(x, y, n); // its tanh form
 *     ox_tanh_floats(x, y, n); ox_erf_floats(x, y, n);
 *
 * exp: x = k ln2 + r with |r| <= ln2/2, e^r by its Taylor polynomial to degree 7 (error
 * below 1e-8 relative, under the rounding of the float steps), scaled by 2^k with
 * vscalefps, which also gives +inf on overflow and 0 (through the subnormals) on
 * underflow. NaN stays NaN. Measured against expf: within 2 ulp (tests/test_sgemm.c).
 *
 * GELU: 1 + erf(u) is 2 - erfc(u) for u >= 0 and erfc(-u) below, so that the negative tail
 * keeps its relative accuracy; erfc(z) = t e^(P(t) - z^2) with t = 1 / (1 + z/2) and P the
 * degree-9 polynomial fitted (least squares on Chebyshev points, in float64) to
 * ln erfc(z) + z^2 - ln t for z in [0, 12]; z^2 is carried as a float and its rounding
 * error, e^-lo ~ 1 - lo. In float: erfc within 2e-6 relative for z <= 4 (x >= -5.6), GELU
 * within 3e-6 of float64 where it is not tiny (tests/test_sgemm.c).
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

/* erfc(|a|) for 16 floats (the method above); 0 past |a| = 10, where float's erfc is 0,
 * and for a NaN (the callers keep the NaN through their other factor or form). */
__attribute__((target("avx512f"))) static inline __m512 erfc16(__m512 a) {
    static const float P[10] = {-1.2655041217803955f, 0.9998871088027954f,   0.3748152554035187f,
                                0.09640470892190933f, -0.19651392102241516f, 0.32286128401756287f,
                                -1.2213846445083618f, 1.5796997547149658f,   -0.8726068139076233f,
                                0.18234175443649292f};
    const __m512 one = _mm512_set1_ps(1.0f);
    __m512 az = _mm512_abs_ps(a), z = _mm512_min_ps(az, _mm512_set1_ps(10.0f));
    __mmask16 near = _mm512_cmp_ps_mask(az, _mm512_set1_ps(10.0f), _CMP_LE_OQ);
    __m512 t = _mm512_div_ps(one, _mm512_fmadd_ps(z, _mm512_set1_ps(0.5f), one));
    __m512 p = _mm512_set1_ps(P[9]);
    for (int k = 8; k >= 0; k--) p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(P[k]));
    __m512 hi = _mm512_mul_ps(z, z), lo = _mm512_fmsub_ps(z, z, hi);
    __m512 e = exp16(_mm512_sub_ps(p, hi));
    return _mm512_maskz_mul_ps(near, t, _mm512_fnmadd_ps(e, lo, e));
}

__attribute__((target("avx512f"))) static void gelu_avx512(const float *x, float *y, int64_t n) {
    const __m512 half = _mm512_set1_ps(0.5f);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = tail_mask16(n - i);
        __m512 v = _mm512_maskz_loadu_ps(m, x + i);
        __m512 u = _mm512_mul_ps(v, _mm512_set1_ps(0.70710678118654752f));
        /* x = -inf: -inf * 0, NaN, as the formula gives; a NaN x stays NaN through v */
        __m512 erfc = erfc16(u);
        __mmask16 pos = _mm512_cmp_ps_mask(u, _mm512_setzero_ps(), _CMP_GE_OQ);
        __m512 s = _mm512_mask_sub_ps(erfc, pos, _mm512_set1_ps(2.0f), erfc);
        _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(_mm512_mul_ps(half, v), s));
    }
}

/* erf: x Q(x^2) below |x| = 0.5 (Q of degree 5, fitted here in float64 to erf(x) / x),
 * 1 - erfc(|x|) with x's sign above. */
__attribute__((target("avx512f"))) static void erf_avx512(const float *x, float *y, int64_t n) {
    static const float Q[6] = {1.128379225730896f,   -0.37612637877464294f,
                               0.1128377765417099f,  -0.02686355449259281f,
                               0.00520247220993042f, -0.0007730231736786664f};
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = tail_mask16(n - i);
        __m512 v = _mm512_maskz_loadu_ps(m, x + i), x2 = _mm512_mul_ps(v, v);
        __m512 q = _mm512_set1_ps(Q[5]);
        for (int k = 4; k >= 0; k--) q = _mm512_fmadd_ps(q, x2, _mm512_set1_ps(Q[k]));
        __m512 small = _mm512_mul_ps(v, q);
        __m512 big = _mm512_sub_ps(_mm512_set1_ps(1.0f), erfc16(v));
        __mmask16 neg = _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_LT_OQ);
        big = _mm512_mask_sub_ps(big, neg, _mm512_setzero_ps(), big);
        /* a NaN takes the small form, which keeps it */
        __mmask16 large = _mm512_cmp_ps_mask(_mm512_abs_ps(v), _mm512_set1_ps(0.5f), _CMP_GE_OQ);
        _mm512_mask_storeu_ps(y + i, m, _mm512_mask_blend_ps(large, small, big));
    }
}

/* The tanh form, x (1 + tanh(u)) / 2 with u = sqrt(2/pi) (x + 0.044715 x^3), as
 * x / (1 + e^(-2u)): 1 + tanh(u) = 2 / (1 + e^(-2u)) has no cancellation in the tail. */
__attribute__((target("avx512f"))) static void gelu_tanh_avx512(const float *x, float *y,
                                                                int64_t n) {
    const __m512 one = _mm512_set1_ps(1.0f);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = tail_mask16(n - i);
        __m512 v = _mm512_maskz_loadu_ps(m, x + i);
        __m512 v3 = _mm512_mul_ps(_mm512_mul_ps(v, v), v);
        __m512 u = _mm512_mul_ps(_mm512_fmadd_ps(v3, _mm512_set1_ps(0.044715f), v),
                                 _mm512_set1_ps(-1.5957691216057308f)); /* -2 sqrt(2/pi) */
        _mm512_mask_storeu_ps(y + i, m, _mm512_div_ps(v, _mm512_add_ps(one, exp16(u))));
    }
}

/* tanh: x itself below 2^-12, x + x^3 P(x^2) below |x| = 0.625 (P of degree 4, fitted here
 * in float64 to (tanh x - x) / x^3), 1 - 2 / (e^(2|x|) + 1) with x's sign above. */
__attribute__((target("avx512f"))) static void tanh_avx512(const float *x, float *y, int64_t n) {
    static const float P[5] = {-0.3333333134651184f, 0.13332901895046234f, -0.05387026071548462f,
                               0.0210858341306448f, -0.006221710704267025f};
    const __m512 one = _mm512_set1_ps(1.0f), two = _mm512_set1_ps(2.0f);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = tail_mask16(n - i);
        __m512 v = _mm512_maskz_loadu_ps(m, x + i), a = _mm512_abs_ps(v);
        __m512 x2 = _mm512_mul_ps(v, v), p = _mm512_set1_ps(P[4]);
        for (int k = 3; k >= 0; k--) p = _mm512_fmadd_ps(p, x2, _mm512_set1_ps(P[k]));
        __m512 small = _mm512_fmadd_ps(_mm512_mul_ps(v, x2), p, v);
        __m512 big =
            _mm512_sub_ps(one, _mm512_div_ps(two, _mm512_add_ps(exp16(_mm512_add_ps(a, a)), one)));
        /* x's sign onto the large form; a NaN takes the small form, which keeps it */
        __mmask16 neg = _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_LT_OQ);
        big = _mm512_mask_sub_ps(big, neg, _mm512_setzero_ps(), big);
        __mmask16 large = _mm512_cmp_ps_mask(a, _mm512_set1_ps(0.625f), _CMP_GE_OQ);
        /* below 2^-12, x^3 / 3 is under half an ulp of x: x itself (and -0 stays -0) */
        __mmask16 tiny = _mm512_cmp_ps_mask(a, _mm512_set1_ps(0x1p-12f), _CMP_LT_OQ);
        __m512 r = _mm512_mask_blend_ps(large, small, big);
        _mm512_mask_storeu_ps(y + i, m, _mm512_mask_blend_ps(tiny, r, v));
    }
}

/* x sigmoid(alpha x) as x / (1 + e^(-alpha x)): SiLU at alpha 1 (silu16's form). */
__attribute__((target("avx512f"))) static void quick_gelu_avx512(const float *x, float *y,
                                                                 int64_t n, float alpha) {
    const __m512 one = _mm512_set1_ps(1.0f), na = _mm512_set1_ps(-alpha);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = tail_mask16(n - i);
        __m512 v = _mm512_maskz_loadu_ps(m, x + i);
        _mm512_mask_storeu_ps(y + i, m,
                              _mm512_div_ps(v, _mm512_add_ps(one, exp16(_mm512_mul_ps(na, v)))));
    }
}

__attribute__((target("avx512f"))) static void exp_avx512(const float *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = tail_mask16(n - i);
        _mm512_mask_storeu_ps(y + i, m, exp16(_mm512_maskz_loadu_ps(m, x + i)));
    }
}
#endif

/* The AVX-512 row fn##_avx512 where the CPU has it (then return), else fall through to the
 * C library's. */
#if defined(__x86_64__) && defined(__GNUC__)
#define VEC_FAST(fn)                                                                               \
    if (ox_sgemm_is_fast()) {                                                                      \
        fn##_avx512(x, y, n);                                                                      \
        return;                                                                                    \
    }
#else
#define VEC_FAST(fn)
#endif

void ox_softmax_row(const float *x, float *y, int64_t n) {
    VEC_FAST(softmax_row)
    float mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < n; j++) mx = x[j] > mx ? x[j] : mx;
    for (int64_t j = 0; j < n; j++) sum += y[j] = expf(x[j] - mx);
    float r = 1.0f / sum;
    for (int64_t j = 0; j < n; j++) y[j] *= r;
}

void ox_exp_floats(const float *x, float *y, int64_t n) {
    VEC_FAST(exp)
    for (int64_t j = 0; j < n; j++) y[j] = expf(x[j]);
}

void ox_gelu_floats(const float *x, float *y, int64_t n) {
    VEC_FAST(gelu)
    /* erfc(-u) = 1 + erf(u), without the cancellation in the negative tail */
    for (int64_t j = 0; j < n; j++) y[j] = 0.5f * x[j] * erfcf(-x[j] * 0.70710678118654752f);
}

void ox_gelu_tanh_floats(const float *x, float *y, int64_t n) {
    VEC_FAST(gelu_tanh)
    for (int64_t j = 0; j < n; j++) {
        float v = x[j], u = 0.7978845608028654f * (v + 0.044715f * v * v * v);
        y[j] = v / (1.0f + expf(-2.0f * u)); /* as the vector form: no cancellation */
    }
}

void ox_erf_floats(const float *x, float *y, int64_t n) {
    VEC_FAST(erf)
    for (int64_t j = 0; j < n; j++) y[j] = erff(x[j]);
}

void ox_tanh_floats(const float *x, float *y, int64_t n) {
    VEC_FAST(tanh)
    for (int64_t j = 0; j < n; j++) y[j] = tanhf(x[j]);
}

void ox_sigmoid_floats(const float *x, float *y, int64_t n) {
    VEC_FAST(sigmoid)
    for (int64_t j = 0; j < n; j++) {
        float v = x[j];
        y[j] = v >= 0 ? 1.0f / (1.0f + expf(-v)) : expf(v) / (1.0f + expf(v));
    }
}

void ox_quick_gelu_floats(const float *x, float *y, int64_t n, float alpha) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (ox_sgemm_is_fast()) {
        quick_gelu_avx512(x, y, n, alpha);
        return;
    }
#endif
    for (int64_t j = 0; j < n; j++) y[j] = x[j] / (1.0f + expf(-alpha * x[j]));
}
