/* Unit tests of kernels/cpu/quant.c and kernels/cpu/rnn.c through the operator table: what the
 * ONNX backend node tests leave out. Rounding and saturation edges of QuantizeLinear (integer,
 * float8, float4); QLinearConv and ConvInteger with groups, strides, dilations, padding and
 * per-channel weights; QLinearMatMul with batch broadcasting and per-column scales; the
 * com.microsoft ops that have no test data; GRU with linear_before_reset, bidirectional runs
 * with sequence_lens, LSTM with input_forget and parameterised activations, layout 1, double.
 * References are the operators' defining formulas written out naively (float math in double).
 *
 *     test_quant [scratch path, unused]     # exit status 0 when all pass
 */
#include "harness.h"

static void fill_q(ox_tensor *t) {
    int64_t n = ox_tensor_numel(t);
    for (int64_t i = 0; i < n; i++)
        ox_set_i64(t, i, t->dtype == OX_UINT8 ? rand() % 256 : rand() % 256 - 128);
}

static void fill_f(ox_tensor *t, double lo, double hi) {
    int64_t n = ox_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) ox_set_f64(t, i, lo + (hi - lo) * rand() / RAND_MAX);
}

static int64_t sat(double v, int64_t lo, int64_t hi) {
    v = nearbyint(v);
    return v < lo ? lo : v > hi ? hi : (int64_t)v;
}

/* ---- QuantizeLinear / DequantizeLinear edges ------------------------------------------- */

static void test_quantize_edges(void) {
    /* halves round to even; saturation on both ends */
    float xs[] = {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 300.0f, -300.0f, 127.5f};
    int64_t n = 8;
    ox_tensor x = mk1(OX_FLOAT, n), s = scalar(OX_FLOAT, 1.0), z8 = scalar(OX_INT8, 0), y;
    memcpy(x.data, xs, sizeof xs);
    const ox_tensor *in[] = {&x, &s, &z8};
    CHECK(run("QuantizeLinear", 13, NULL, 3, in, &y) == OX_OK, "%s", ox_errmsg());
    int8_t want[] = {0, 2, 2, 0, -2, 127, -128, 127};
    for (int i = 0; i < n; i++)
        CHECK(((int8_t *)y.data)[i] == want[i], "int8 q(%g) = %d, want %d", xs[i],
              ((int8_t *)y.data)[i], want[i]);
    ox_tensor_free_data(&y);

    /* int4 via output_dtype without a zero point (opset 21) */
    struct attrs at = {0};
    attr_i(&at, "output_dtype", OX_INT4);
    const ox_tensor *in2[] = {&x, &s};
    CHECK(run("QuantizeLinear", 21, &at, 2, in2, &y) == OX_OK, "%s", ox_errmsg());
    CHECK(y.dtype == OX_INT4, "output_dtype int4 gives %s", ox_dtype_name(y.dtype));
    int8_t want4[] = {0, 2, 2, 0, -2, 7, -8, 7};
    for (int i = 0; i < n; i++)
        CHECK(((int8_t *)y.data)[i] == want4[i], "int4 q(%g) = %d, want %d", xs[i],
              ((int8_t *)y.data)[i], want4[i]);
    ox_tensor_free_data(&y);

    /* float8 e4m3fn: 448 is the largest; 464 ties down to it; past it saturates or is NaN */
    float f8x[] = {448, 464, 480, 1e6f, -1e6f, 0.015625f, 3.0f / 1024, INFINITY};
    ox_tensor x8 = mk1(OX_FLOAT, 8), z = scalar(OX_FLOAT8E4M3FN, 0);
    memcpy(x8.data, f8x, sizeof f8x);
    const ox_tensor *in3[] = {&x8, &s, &z};
    CHECK(run("QuantizeLinear", 19, NULL, 3, in3, &y) == OX_OK, "%s", ox_errmsg());
    uint8_t w8[] = {0x7e, 0x7e, 0x7e, 0x7e, 0xfe, 0x08, 0x02, 0x7e};
    for (int i = 0; i < 8; i++)
        CHECK(((uint8_t *)y.data)[i] == w8[i], "e4m3fn q(%g) = 0x%02x, want 0x%02x", f8x[i],
              ((uint8_t *)y.data)[i], w8[i]);
    ox_tensor_free_data(&y);
    struct attrs ns = {0};
    attr_i(&ns, "saturate", 0);
    CHECK(run("QuantizeLinear", 19, &ns, 3, in3, &y) == OX_OK, "%s", ox_errmsg());
    uint8_t w8n[] = {0x7e, 0x7e, 0x7f, 0x7f, 0xff, 0x08, 0x02, 0x7f};
    for (int i = 0; i < 8; i++)
        CHECK(((uint8_t *)y.data)[i] == w8n[i], "e4m3fn unsaturated q(%g) = 0x%02x, want 0x%02x",
              f8x[i], ((uint8_t *)y.data)[i], w8n[i]);
    ox_tensor_free_data(&y);

    /* e5m2 unsaturated overflow is infinity */
    ox_tensor z5 = scalar(OX_FLOAT8E5M2, 0);
    const ox_tensor *in5[] = {&x8, &s, &z5};
    CHECK(run("QuantizeLinear", 19, &ns, 3, in5, &y) == OX_OK, "%s", ox_errmsg());
    CHECK(((uint8_t *)y.data)[3] == 0x7c && ((uint8_t *)y.data)[4] == 0xfc,
          "e5m2 overflow 0x%02x 0x%02x", ((uint8_t *)y.data)[3], ((uint8_t *)y.data)[4]);
    ox_tensor_free_data(&y);

    /* float4e2m1: ties go to the even code */
    float f4x[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, -7.0f};
    ox_tensor x4 = mk1(OX_FLOAT, 8), z4 = scalar(OX_FLOAT4E2M1, 0);
    memcpy(x4.data, f4x, sizeof f4x);
    const ox_tensor *in4[] = {&x4, &s, &z4};
    CHECK(run("QuantizeLinear", 23, NULL, 3, in4, &y) == OX_OK, "%s", ox_errmsg());
    uint8_t w4[] = {0, 2, 2, 4, 4, 6, 6, 0xf};
    for (int i = 0; i < 8; i++)
        CHECK(((uint8_t *)y.data)[i] == w4[i], "float4 q(%g) = 0x%x, want 0x%x", f4x[i],
              ((uint8_t *)y.data)[i], w4[i]);
    ox_tensor_free_data(&y);

    /* DequantizeLinear of int32 (no zero point), per axis */
    int64_t d2[] = {2, 3};
    ox_tensor xi = mk(OX_INT32, 2, d2), sa = mk1(OX_FLOAT, 3), yd;
    int32_t xv[] = {1, -2, 3, 100000, 5, -6};
    float sv[] = {0.5f, 2.0f, 0.25f};
    memcpy(xi.data, xv, sizeof xv);
    memcpy(sa.data, sv, sizeof sv);
    const ox_tensor *ind[] = {&xi, &sa};
    CHECK(run("DequantizeLinear", 13, NULL, 2, ind, &yd) == OX_OK, "%s", ox_errmsg());
    for (int i = 0; i < 6; i++)
        CHECK(((float *)yd.data)[i] == xv[i] * sv[i % 3], "dequant int32 [%d] = %g", i,
              ((float *)yd.data)[i]);
    ox_tensor_free_data(&yd);

    /* a scale of the wrong length is a shape error, found at infer */
    ox_tensor bad = mk1(OX_FLOAT, 2);
    const ox_tensor *inb[] = {&xi, &bad};
    CHECK(run("DequantizeLinear", 13, NULL, 2, inb, &yd) == OX_E_SHAPE, "bad scale accepted");

    ox_tensor *fr[] = {&x, &s, &z8, &x8, &z, &z5, &x4, &z4, &xi, &sa, &bad};
    for (size_t i = 0; i < sizeof fr / sizeof fr[0]; i++) ox_tensor_free_data(fr[i]);
}

/* ---- QLinearConv / ConvInteger against a naive convolution ------------------------------ */

/* 2-D integer convolution sum for output (n, m, oh, ow). */
static int64_t conv_sum(const ox_tensor *x, const ox_tensor *w, int64_t xz, const int64_t *wz,
                        int64_t group, const int64_t *s, const int64_t *d, const int64_t *pb,
                        int64_t nn, int64_t m, int64_t oh, int64_t ow) {
    int64_t C = x->dims[1], H = x->dims[2], W = x->dims[3], M = w->dims[0];
    int64_t cg = C / group, KH = w->dims[2], KW = w->dims[3], gr = m / (M / group);
    int64_t acc = 0;
    for (int64_t c = 0; c < cg; c++)
        for (int64_t kh = 0; kh < KH; kh++)
            for (int64_t kw = 0; kw < KW; kw++) {
                int64_t ih = oh * s[0] - pb[0] + kh * d[0], iw = ow * s[1] - pb[1] + kw * d[1];
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                int64_t xv = ox_get_i64(x, ((nn * C + gr * cg + c) * H + ih) * W + iw) - xz;
                int64_t wv = ox_get_i64(w, ((m * cg + c) * KH + kh) * KW + kw) - wz[m];
                acc += xv * wv;
            }
    return acc;
}

static void test_qlinear_conv(void) {
    int64_t xd[] = {2, 4, 7, 6}, wd[] = {6, 2, 3, 2};
    ox_tensor x = mk(OX_UINT8, 4, xd), w = mk(OX_INT8, 4, wd);
    fill_q(&x), fill_q(&w);
    ox_tensor xs = scalar(OX_FLOAT, 0.02), xz = scalar(OX_UINT8, 131);
    ox_tensor ws = mk1(OX_FLOAT, 6), wz = mk1(OX_INT8, 6), bias = mk1(OX_INT32, 6);
    fill_f(&ws, 0.001, 0.01);
    for (int m = 0; m < 6; m++) ox_set_i64(&wz, m, m - 3), ox_set_i64(&bias, m, (m - 2) * 300);
    ox_tensor ys = scalar(OX_FLOAT, 0.05), yz = scalar(OX_UINT8, 120);
    int64_t strides[] = {2, 1}, dil[] = {1, 2}, pads[] = {1, 2, 0, 1};
    struct attrs at = {0};
    attr_i(&at, "group", 2);
    attr_ints(&at, "strides", 2, strides);
    attr_ints(&at, "dilations", 2, dil);
    attr_ints(&at, "pads", 4, pads);
    const ox_tensor *in[] = {&x, &xs, &xz, &w, &ws, &wz, &ys, &yz, &bias};
    ox_tensor y;
    CHECK(run("QLinearConv", 10, &at, 9, in, &y) == OX_OK, "%s", ox_errmsg());
    /* out: (7+1+0-3)/2+1 = 3, (6+2+1-3)/1+1 = 7 */
    CHECK(y.rank == 4 && y.dims[0] == 2 && y.dims[1] == 6 && y.dims[2] == 3 && y.dims[3] == 7,
          "QLinearConv shape %lld %lld %lld %lld", (long long)y.dims[0], (long long)y.dims[1],
          (long long)y.dims[2], (long long)y.dims[3]);
    int64_t wzv[6];
    for (int m = 0; m < 6; m++) wzv[m] = ox_get_i64(&wz, m);
    int bad = 0;
    for (int64_t nn = 0; nn < 2; nn++)
        for (int64_t m = 0; m < 6; m++)
            for (int64_t oh = 0; oh < 3; oh++)
                for (int64_t ow = 0; ow < 7; ow++) {
                    int64_t acc = conv_sum(&x, &w, 131, wzv, 2, strides, dil, pads, nn, m, oh, ow) +
                                  ox_get_i64(&bias, m);
                    float mult = (float)(0.02f * ((float *)ws.data)[m]) / 0.05f;
                    int64_t want = sat((double)acc * mult + 120, 0, 255);
                    int64_t got = ox_get_i64(&y, ((nn * 6 + m) * 3 + oh) * 7 + ow);
                    if (got != want && bad++ < 5)
                        CHECK(0, "QLinearConv [%lld,%lld,%lld,%lld] = %lld, want %lld",
                              (long long)nn, (long long)m, (long long)oh, (long long)ow,
                              (long long)got, (long long)want);
                }
    CHECK(bad == 0, "QLinearConv: %d mismatches", bad);
    ox_tensor_free_data(&y);

    /* ConvInteger with SAME_LOWER: the extra pad goes first */
    struct attrs ac = {0};
    attr_s(&ac, "auto_pad", "SAME_LOWER");
    attr_ints(&ac, "strides", 2, strides);
    int64_t wd2[] = {3, 4, 2, 2};
    ox_tensor w2 = mk(OX_UINT8, 4, wd2), wz2 = scalar(OX_UINT8, 7);
    fill_q(&w2);
    const ox_tensor *ic[] = {&x, &w2, &xz, &wz2};
    CHECK(run("ConvInteger", 10, &ac, 4, ic, &y) == OX_OK, "%s", ox_errmsg());
    CHECK(y.dtype == OX_INT32 && y.dims[2] == 4 && y.dims[3] == 6,
          "ConvInteger SAME shape %lld %lld", (long long)y.dims[2], (long long)y.dims[3]);
    /* rows: out 4, total pad (4-1)*2+2-7 = 1, begin 1; cols: out 6, total 1, begin 1 */
    int64_t one[] = {1, 1}, pb[] = {1, 1}, wz7[] = {7, 7, 7};
    bad = 0;
    for (int64_t nn = 0; nn < 2; nn++)
        for (int64_t m = 0; m < 3; m++)
            for (int64_t oh = 0; oh < 4; oh++)
                for (int64_t ow = 0; ow < 6; ow++) {
                    int64_t want = conv_sum(&x, &w2, 131, wz7, 1, strides, one, pb, nn, m, oh, ow);
                    if (ox_get_i64(&y, ((nn * 3 + m) * 4 + oh) * 6 + ow) != want) bad++;
                }
    CHECK(bad == 0, "ConvInteger: %d mismatches", bad);
    ox_tensor_free_data(&y);

    /* weights that do not match the input's channels */
    int64_t wd3[] = {2, 3, 1, 1};
    ox_tensor w3 = mk(OX_UINT8, 4, wd3);
    const ox_tensor *ib[] = {&x, &w3};
    CHECK(run("ConvInteger", 10, NULL, 2, ib, &y) == OX_E_SHAPE,
          "bad ConvInteger weights accepted");
    ox_tensor *fr[] = {&x, &w, &xs, &xz, &ws, &wz, &bias, &ys, &yz, &w2, &wz2, &w3};
    for (size_t i = 0; i < sizeof fr / sizeof fr[0]; i++) ox_tensor_free_data(fr[i]);
}

/* ---- QLinearMatMul with broadcasting and per-column b ---------------------------------- */

static void test_qlinear_matmul(void) {
    int64_t ad[] = {2, 1, 3, 5}, bd[] = {3, 5, 4};
    ox_tensor a = mk(OX_INT8, 4, ad), b = mk(OX_UINT8, 3, bd);
    fill_q(&a), fill_q(&b);
    ox_tensor as = scalar(OX_FLOAT, 0.03), az = scalar(OX_INT8, -3);
    ox_tensor bs = mk1(OX_FLOAT, 4), bz = mk1(OX_UINT8, 4);
    fill_f(&bs, 0.005, 0.02);
    for (int j = 0; j < 4; j++) ox_set_i64(&bz, j, 120 + 3 * j);
    ox_tensor ys = scalar(OX_FLOAT, 0.4), yz = scalar(OX_INT8, 5), y;
    const ox_tensor *in[] = {&a, &as, &az, &b, &bs, &bz, &ys, &yz};
    CHECK(run("QLinearMatMul", 10, NULL, 8, in, &y) == OX_OK, "%s", ox_errmsg());
    CHECK(y.rank == 4 && y.dims[0] == 2 && y.dims[1] == 3 && y.dims[2] == 3 && y.dims[3] == 4,
          "QLinearMatMul shape");
    int bad = 0;
    for (int64_t p = 0; p < 2; p++)
        for (int64_t q = 0; q < 3; q++)
            for (int64_t i = 0; i < 3; i++)
                for (int64_t j = 0; j < 4; j++) {
                    int64_t acc = 0;
                    for (int64_t k = 0; k < 5; k++)
                        acc += (ox_get_i64(&a, (p * 3 + i) * 5 + k) + 3) *
                               (ox_get_i64(&b, (q * 5 + k) * 4 + j) - ox_get_i64(&bz, j));
                    float mult = (float)(0.03f * ((float *)bs.data)[j]) / 0.4f;
                    int64_t want = sat((double)acc * mult + 5, -128, 127);
                    if (ox_get_i64(&y, ((p * 3 + q) * 3 + i) * 4 + j) != want) bad++;
                }
    CHECK(bad == 0, "QLinearMatMul: %d mismatches", bad);
    ox_tensor_free_data(&y);
    ox_tensor *fr[] = {&a, &b, &as, &az, &bs, &bz, &ys, &yz};
    for (size_t i = 0; i < sizeof fr / sizeof fr[0]; i++) ox_tensor_free_data(fr[i]);
}

/* ---- com.microsoft ops -------------------------------------------------------------------- */

static void test_microsoft(void) {
    int64_t xd[] = {2, 3, 2, 2};
    ox_tensor x = mk(OX_UINT8, 4, xd), y;
    fill_q(&x);
    ox_tensor xs = scalar(OX_FLOAT, 0.05), xz = scalar(OX_UINT8, 128);
    ox_tensor ys = scalar(OX_FLOAT, 1.0 / 256), yz = scalar(OX_UINT8, 0);
    const ox_tensor *in[] = {&x, &xs, &xz, &ys, &yz};
    CHECK(run_dom("com.microsoft", "QLinearSigmoid", 1, NULL, 5, in, &y) == OX_OK, "%s",
          ox_errmsg());
    int bad = 0;
    for (int64_t i = 0; i < 24; i++) {
        double v = 0.05 * (ox_get_i64(&x, i) - 128), sg = 1 / (1 + exp(-v));
        if (llabs(ox_get_i64(&y, i) - sat(sg * 256, 0, 255)) > 1) bad++; /* float vs double */
    }
    CHECK(bad == 0, "QLinearSigmoid: %d mismatches", bad);
    ox_tensor_free_data(&y);

    struct attrs al = {0};
    attr_f(&al, "alpha", 0.25f);
    ox_tensor ys2 = scalar(OX_FLOAT, 0.1), yz2 = scalar(OX_UINT8, 100);
    const ox_tensor *il[] = {&x, &xs, &xz, &ys2, &yz2};
    CHECK(run_dom("com.microsoft", "QLinearLeakyRelu", 1, &al, 5, il, &y) == OX_OK, "%s",
          ox_errmsg());
    bad = 0;
    for (int64_t i = 0; i < 24; i++) {
        float v = 0.05f * (float)(ox_get_i64(&x, i) - 128);
        v = v >= 0 ? v : 0.25f * v;
        if (ox_get_i64(&y, i) != sat(nearbyintf(v / 0.1f) + 100, 0, 255)) bad++;
    }
    CHECK(bad == 0, "QLinearLeakyRelu: %d mismatches", bad);
    ox_tensor_free_data(&y);

    CHECK(run_dom("com.microsoft", "QLinearGlobalAveragePool", 1, NULL, 5, il, &y) == OX_OK, "%s",
          ox_errmsg());
    CHECK(y.rank == 4 && y.dims[0] == 2 && y.dims[1] == 3 && y.dims[2] == 1 && y.dims[3] == 1,
          "GAP shape");
    bad = 0;
    for (int64_t c = 0; c < 6; c++) {
        int64_t sum = 0;
        for (int k = 0; k < 4; k++) sum += ox_get_i64(&x, c * 4 + k) - 128;
        if (llabs(ox_get_i64(&y, c) - sat(sum * 0.05 / 4 / 0.1 + 100, 0, 255)) > 0) bad++;
    }
    CHECK(bad == 0, "QLinearGlobalAveragePool: %d mismatches", bad);
    ox_tensor_free_data(&y);

    /* QLinearConcat on axis 1: the first input keeps its bytes, the second is requantized */
    int64_t x2d[] = {2, 1, 2, 2};
    ox_tensor x2 = mk(OX_UINT8, 4, x2d);
    fill_q(&x2);
    struct attrs ax = {0};
    attr_i(&ax, "axis", 1);
    const ox_tensor *icat[] = {&xs, &xz, &x, &xs, &xz, &x2, &ys2, &yz2};
    CHECK(run_dom("com.microsoft", "QLinearConcat", 1, &ax, 8, icat, &y) == OX_OK, "%s",
          ox_errmsg());
    CHECK(y.dims[1] == 4, "QLinearConcat shape");
    bad = 0;
    for (int64_t nn = 0; nn < 2; nn++)
        for (int64_t c = 0; c < 4; c++)
            for (int64_t k = 0; k < 4; k++) {
                int64_t got = ox_get_i64(&y, (nn * 4 + c) * 4 + k), want;
                if (c < 3) {
                    want = ox_get_i64(&x, (nn * 3 + c) * 4 + k);
                } else {
                    float v = 0.1f * (float)(ox_get_i64(&x2, nn * 4 + k) - 100);
                    want = sat(nearbyintf(v / 0.05f) + 128, 0, 255);
                }
                if (got != want) bad++;
            }
    CHECK(bad == 0, "QLinearConcat: %d mismatches", bad);
    ox_tensor_free_data(&y);

    /* QLinearAdd with broadcasting, int8 */
    int64_t ad[] = {3, 1}, bd[] = {1, 4};
    ox_tensor a = mk(OX_INT8, 2, ad), b = mk(OX_INT8, 2, bd);
    fill_q(&a), fill_q(&b);
    ox_tensor as = scalar(OX_FLOAT, 0.1), az = scalar(OX_INT8, 3), bs = scalar(OX_FLOAT, 0.2);
    ox_tensor cs = scalar(OX_FLOAT, 0.25);
    const ox_tensor *iadd[] = {&a, &as, &az, &b, &bs, NULL, &cs, NULL};
    CHECK(run_dom("com.microsoft", "QLinearAdd", 1, NULL, 8, iadd, &y) == OX_OK, "%s", ox_errmsg());
    CHECK(y.rank == 2 && y.dims[0] == 3 && y.dims[1] == 4, "QLinearAdd broadcast shape");
    bad = 0;
    for (int64_t i = 0; i < 3; i++)
        for (int64_t j = 0; j < 4; j++) {
            float v = 0.1f * (float)(ox_get_i64(&a, i) - 3) + 0.2f * (float)ox_get_i64(&b, j);
            if (ox_get_i64(&y, i * 4 + j) != sat(nearbyintf(v / 0.25f), -128, 127)) bad++;
        }
    CHECK(bad == 0, "QLinearAdd: %d mismatches", bad);
    ox_tensor_free_data(&y);
    ox_tensor *fr[] = {&x, &xs, &xz, &ys, &yz, &ys2, &yz2, &x2, &a, &b, &as, &az, &bs, &cs};
    for (size_t i = 0; i < sizeof fr / sizeof fr[0]; i++) ox_tensor_free_data(fr[i]);
}

/* ---- recurrent layers -------------------------------------------------------------------- */

static double sigm(double v) {
    return 1 / (1 + exp(-v));
}

/* X[t][b][i] with layout 0. */
static double xv(const ox_tensor *x, int64_t t, int64_t b, int64_t i) {
    return ox_get_f64(x, (t * x->dims[1] + b) * x->dims[2] + i);
}

/* Reference GRU, one direction d, straight from the ONNX equations. */
static void gru_ref(const ox_tensor *X, const ox_tensor *W, const ox_tensor *R, const ox_tensor *B,
                    const int32_t *lens, int d, bool rev, bool lbr, double *Y /* [T][B][H] */,
                    double *Yh /* [B][H] */) {
    int64_t NB = X->dims[1], I = X->dims[2], H = R->dims[2];
    const float *w = (const float *)W->data + d * 3 * H * I,
                *r = (const float *)R->data + d * 3 * H * H;
    const float *bb = (const float *)B->data + d * 6 * H;
    for (int64_t b = 0; b < NB; b++) {
        double h[16] = {0};
        for (int64_t s = 0; s < lens[b]; s++) {
            int64_t t = rev ? lens[b] - 1 - s : s;
            double z[16], rr[16], hn[16];
            for (int64_t k = 0; k < H; k++) {
                double az = bb[k] + bb[3 * H + k], ar = bb[H + k] + bb[4 * H + k];
                for (int64_t i = 0; i < I; i++)
                    az += xv(X, t, b, i) * w[k * I + i], ar += xv(X, t, b, i) * w[(H + k) * I + i];
                for (int64_t j = 0; j < H; j++)
                    az += h[j] * r[k * H + j], ar += h[j] * r[(H + k) * H + j];
                z[k] = sigm(az), rr[k] = sigm(ar);
            }
            for (int64_t k = 0; k < H; k++) {
                double xh = bb[2 * H + k], hh = 0;
                for (int64_t i = 0; i < I; i++) xh += xv(X, t, b, i) * w[(2 * H + k) * I + i];
                if (lbr) {
                    double rh = bb[5 * H + k];
                    for (int64_t j = 0; j < H; j++) rh += h[j] * r[(2 * H + k) * H + j];
                    hh = tanh(xh + rr[k] * rh);
                } else {
                    double rh = bb[5 * H + k];
                    for (int64_t j = 0; j < H; j++) rh += rr[j] * h[j] * r[(2 * H + k) * H + j];
                    hh = tanh(xh + rh);
                }
                hn[k] = (1 - z[k]) * hh + z[k] * h[k];
            }
            memcpy(h, hn, sizeof(double) * (size_t)H);
            for (int64_t k = 0; k < H; k++) Y[(t * NB + b) * H + k] = h[k];
        }
        for (int64_t k = 0; k < H; k++) Yh[b * H + k] = h[k];
    }
}

static void test_gru(void) {
    int64_t T = 4, NB = 3, I = 3, H = 5;
    for (int lbr = 0; lbr < 2; lbr++) {
        int64_t xd[] = {T, NB, I}, wd[] = {2, 3 * H, I}, rd[] = {2, 3 * H, H}, bd[] = {2, 6 * H};
        ox_tensor X = mk(OX_FLOAT, 3, xd), W = mk(OX_FLOAT, 3, wd), R = mk(OX_FLOAT, 3, rd);
        ox_tensor B = mk(OX_FLOAT, 2, bd), L = mk1(OX_INT32, NB), Y, Yh;
        fill_f(&X, -1, 1), fill_f(&W, -0.5, 0.5), fill_f(&R, -0.5, 0.5), fill_f(&B, -0.3, 0.3);
        int32_t lens[] = {4, 2, 3};
        memcpy(L.data, lens, sizeof lens);
        struct attrs at = {0};
        attr_s(&at, "direction", "bidirectional");
        attr_i(&at, "hidden_size", H);
        attr_i(&at, "linear_before_reset", lbr);
        const ox_tensor *in[] = {&X, &W, &R, &B, &L};
        ox_tensor *outs[] = {&Y, &Yh};
        CHECK(run_node("", "GRU", 14, &at, 5, in, 2, outs, NULL) == OX_OK, "%s", ox_errmsg());
        double ry[2][64] = {{0}}, rh[2][16];
        for (int d = 0; d < 2; d++) gru_ref(&X, &W, &R, &B, lens, d, d == 1, lbr, ry[d], rh[d]);
        double err = 0;
        for (int64_t t = 0; t < T; t++)
            for (int d = 0; d < 2; d++)
                for (int64_t b = 0; b < NB; b++)
                    for (int64_t k = 0; k < H; k++) {
                        double got = ox_get_f64(&Y, ((t * 2 + d) * NB + b) * H + k);
                        double want = t < lens[b] ? ry[d][(t * NB + b) * H + k] : 0;
                        err = fmax(err, fabs(got - want));
                    }
        for (int d = 0; d < 2; d++)
            for (int64_t i = 0; i < NB * H; i++)
                err = fmax(err, fabs(ox_get_f64(&Yh, d * NB * H + i) - rh[d][i]));
        CHECK(err < 1e-5,
              "GRU linear_before_reset=%d bidirectional with sequence_lens: max error %g", lbr,
              err);
        ox_tensor *fr[] = {&X, &W, &R, &B, &L, &Y, &Yh};
        for (size_t i = 0; i < sizeof fr / sizeof fr[0]; i++) ox_tensor_free_data(fr[i]);
    }
}

/* LSTM with input_forget, clip and activations with parameters; the same in double and with
 * layout 1 (batch first) must agree with float layout 0. */
static void test_lstm(void) {
    int64_t T = 3, NB = 2, I = 4, H = 3;
    int64_t xd[] = {T, NB, I}, wd[] = {1, 4 * H, I}, rd[] = {1, 4 * H, H}, bd[] = {1, 8 * H};
    int64_t pd[] = {1, 3 * H}, hd[] = {1, NB, H};
    ox_tensor X = mk(OX_FLOAT, 3, xd), W = mk(OX_FLOAT, 3, wd), R = mk(OX_FLOAT, 3, rd);
    ox_tensor B = mk(OX_FLOAT, 2, bd), P = mk(OX_FLOAT, 2, pd), h0 = mk(OX_FLOAT, 3, hd);
    ox_tensor c0 = mk(OX_FLOAT, 3, hd);
    fill_f(&X, -1, 1), fill_f(&W, -0.6, 0.6), fill_f(&R, -0.6, 0.6), fill_f(&B, -0.3, 0.3);
    fill_f(&P, -0.3, 0.3), fill_f(&h0, -0.5, 0.5), fill_f(&c0, -0.5, 0.5);
    const char *acts[] = {"HardSigmoid", "ScaledTanh", "Affine"};
    size_t lens[3];
    float alpha[] = {0.3f, 0.9f, 0.5f}, beta[] = {0.4f, 1.1f, 0.1f};
    struct attrs at = {0};
    attr_strs(&at, "activations", 3, acts, lens);
    attr_floats(&at, "activation_alpha", 3, alpha);
    attr_floats(&at, "activation_beta", 3, beta);
    attr_i(&at, "input_forget", 1);
    attr_f(&at, "clip", 0.8f);
    ox_tensor Y, Yh, Yc;
    const ox_tensor *in[] = {&X, &W, &R, &B, NULL, &h0, &c0, &P};
    ox_tensor *outs[] = {&Y, &Yh, &Yc};
    CHECK(run_node("", "LSTM", 7, &at, 8, in, 3, outs, NULL) == OX_OK, "%s", ox_errmsg());
    /* reference */
    const float *w = W.data, *r = R.data, *bb = B.data, *p = P.data;
    double err = 0;
    for (int64_t b = 0; b < NB; b++) {
        double h[8], c[8];
        for (int64_t k = 0; k < H; k++)
            h[k] = ((float *)h0.data)[b * H + k], c[k] = ((float *)c0.data)[b * H + k];
        for (int64_t t = 0; t < T; t++) {
            double g[4][8];
            for (int q = 0; q < 4; q++)
                for (int64_t k = 0; k < H; k++) {
                    double v = bb[q * H + k] + bb[4 * H + q * H + k];
                    for (int64_t i = 0; i < I; i++) v += xv(&X, t, b, i) * w[(q * H + k) * I + i];
                    for (int64_t j = 0; j < H; j++) v += h[j] * r[(q * H + k) * H + j];
                    g[q][k] = v;
                }
            for (int64_t k = 0; k < H; k++) {
#define CLIP(v) fmax(-0.8, fmin(0.8, (v)))
#define HSIG(v) fmax(0, fmin(1, 0.3 * (v) + 0.4))
                double ig = HSIG(CLIP(g[0][k] + p[k] * c[k]));
                double fg = 1 - ig;
                double cc = 0.9 * tanh(1.1 * CLIP(g[3][k]));
                c[k] = fg * c[k] + ig * cc;
                double og = HSIG(CLIP(g[1][k] + p[H + k] * c[k]));
                h[k] = og * (0.5 * c[k] + 0.1);
                err = fmax(err, fabs(ox_get_f64(&Y, (t * NB + b) * H + k) - h[k]));
            }
        }
        for (int64_t k = 0; k < H; k++) {
            err = fmax(err, fabs(ox_get_f64(&Yh, b * H + k) - h[k]));
            err = fmax(err, fabs(ox_get_f64(&Yc, b * H + k) - c[k]));
        }
    }
    CHECK(err < 1e-5, "LSTM input_forget/clip/activations: max error %g", err);

    /* double, batch-first: transpose X, h0, c0; compare with the float results */
    int64_t xd1[] = {NB, T, I}, hd1[] = {NB, 1, H};
    ox_tensor Xd = mk(OX_DOUBLE, 3, xd1), Wd = mk(OX_DOUBLE, 3, wd), Rd = mk(OX_DOUBLE, 3, rd);
    ox_tensor Bd = mk(OX_DOUBLE, 2, bd), Pd = mk(OX_DOUBLE, 2, pd), h0d = mk(OX_DOUBLE, 3, hd1);
    ox_tensor c0d = mk(OX_DOUBLE, 3, hd1);
    for (int64_t t = 0; t < T; t++)
        for (int64_t b = 0; b < NB; b++)
            for (int64_t i = 0; i < I; i++) ox_set_f64(&Xd, (b * T + t) * I + i, xv(&X, t, b, i));
    const ox_tensor *pairs[][2] = {{&W, &Wd}, {&R, &Rd},   {&B, &Bd},
                                   {&P, &Pd}, {&h0, &h0d}, {&c0, &c0d}};
    for (int k = 0; k < 6; k++)
        for (int64_t i = 0; i < ox_tensor_numel(pairs[k][0]); i++)
            ox_set_f64((ox_tensor *)pairs[k][1], i, ox_get_f64(pairs[k][0], i));
    attr_i(&at, "layout", 1);
    ox_tensor Y1, Yh1;
    const ox_tensor *in1[] = {&Xd, &Wd, &Rd, &Bd, NULL, &h0d, &c0d, &Pd};
    ox_tensor *outs1[] = {&Y1, &Yh1, NULL};
    CHECK(run_node("", "LSTM", 14, &at, 8, in1, 3, outs1, NULL) == OX_OK, "%s", ox_errmsg());
    CHECK(Y1.dtype == OX_DOUBLE && Y1.dims[0] == NB && Y1.dims[1] == T && Y1.dims[2] == 1,
          "LSTM layout 1 shape");
    err = 0;
    for (int64_t t = 0; t < T; t++)
        for (int64_t b = 0; b < NB; b++)
            for (int64_t k = 0; k < H; k++)
                err = fmax(err, fabs(ox_get_f64(&Y1, (b * T + t) * H + k) -
                                     ox_get_f64(&Y, (t * NB + b) * H + k)));
    CHECK(err < 1e-5, "LSTM double layout 1 vs float layout 0: max error %g", err);

    /* an unknown activation is refused with a message */
    const char *badacts[] = {"Swish", "Tanh", "Tanh"};
    struct attrs ab = {0};
    attr_strs(&ab, "activations", 3, badacts, lens);
    ox_tensor Yb;
    ox_tensor *outb[] = {&Yb};
    CHECK(run_node("", "LSTM", 7, &ab, 3, in, 1, outb, NULL) == OX_E_UNSUPPORTED,
          "unknown activation accepted");
    ox_tensor *fr[] = {&X,  &W,  &R,  &B,  &P,  &h0,  &c0,  &Y,  &Yh, &Yc,
                       &Xd, &Wd, &Rd, &Bd, &Pd, &h0d, &c0d, &Y1, &Yh1};
    for (size_t i = 0; i < sizeof fr / sizeof fr[0]; i++) ox_tensor_free_data(fr[i]);
}

/* RNN, reverse direction, Relu, with sequence_lens: steps past each end are zero. */
static void test_rnn(void) {
    int64_t T = 3, NB = 2, I = 2, H = 2;
    int64_t xd[] = {T, NB, I}, wd[] = {1, H, I}, rd[] = {1, H, H};
    ox_tensor X = mk(OX_FLOAT, 3, xd), W = mk(OX_FLOAT, 3, wd), R = mk(OX_FLOAT, 3, rd);
    ox_tensor L = mk1(OX_INT32, NB), Y, Yh;
    fill_f(&X, -1, 1), fill_f(&W, -1, 1), fill_f(&R, -1, 1);
    int32_t lens[] = {2, 3};
    memcpy(L.data, lens, sizeof lens);
    const char *acts[] = {"Relu"};
    size_t sl[1];
    struct attrs at = {0};
    attr_s(&at, "direction", "reverse");
    attr_strs(&at, "activations", 1, acts, sl);
    const ox_tensor *in[] = {&X, &W, &R, NULL, &L};
    ox_tensor *outs[] = {&Y, &Yh};
    CHECK(run_node("", "RNN", 7, &at, 5, in, 2, outs, NULL) == OX_OK, "%s", ox_errmsg());
    const float *w = W.data, *r = R.data;
    double err = 0;
    for (int64_t b = 0; b < NB; b++) {
        double h[2] = {0, 0};
        for (int64_t s = 0; s < lens[b]; s++) {
            int64_t t = lens[b] - 1 - s;
            double hn[2];
            for (int64_t k = 0; k < H; k++) {
                double v = 0;
                for (int64_t i = 0; i < I; i++) v += xv(&X, t, b, i) * w[k * I + i];
                for (int64_t j = 0; j < H; j++) v += h[j] * r[k * H + j];
                hn[k] = v > 0 ? v : 0;
            }
            h[0] = hn[0], h[1] = hn[1];
            for (int64_t k = 0; k < H; k++)
                err = fmax(err, fabs(ox_get_f64(&Y, (t * NB + b) * H + k) - h[k]));
        }
        for (int64_t t = lens[b]; t < T; t++)
            for (int64_t k = 0; k < H; k++)
                err = fmax(err, fabs(ox_get_f64(&Y, (t * NB + b) * H + k)));
        for (int64_t k = 0; k < H; k++) err = fmax(err, fabs(ox_get_f64(&Yh, b * H + k) - h[k]));
    }
    CHECK(err < 1e-5, "RNN reverse with sequence_lens: max error %g", err);
    ox_tensor *fr[] = {&X, &W, &R, &L, &Y, &Yh};
    for (size_t i = 0; i < sizeof fr / sizeof fr[0]; i++) ox_tensor_free_data(fr[i]);
}

/* Empty batches and a hidden size of 0: every output is empty, and nothing is computed (the
 * kernel once did pointer arithmetic on its NULL scratch: UBSan in fuzz_e2e). */
static void test_rnn_empty(void) {
    static const char *const ops[] = {"RNN", "GRU", "LSTM"};
    for (int o = 0; o < 3; o++)
        for (int empty_h = 0; empty_h < 2; empty_h++) {
            int64_t G = o == 0 ? 1 : o == 1 ? 3 : 4, H = empty_h ? 0 : 4, NB = empty_h ? 2 : 0;
            int64_t xd[] = {3, NB, 5}, wd[] = {1, G * H, 5}, rd[] = {1, G * H, H};
            ox_tensor X = mk(OX_FLOAT, 3, xd), W = mk(OX_FLOAT, 3, wd), R = mk(OX_FLOAT, 3, rd);
            ox_tensor Y, Yh;
            struct attrs at = {0};
            attr_i(&at, "hidden_size", H);
            const ox_tensor *in[] = {&X, &W, &R};
            ox_tensor *outs[] = {&Y, &Yh};
            ox_status st = run_node("", ops[o], 14, &at, 3, in, 2, outs, NULL);
            CHECK(!st, "%s with %s: %s", ops[o], empty_h ? "hidden_size 0" : "batch 0",
                  ox_errmsg());
            if (!st) {
                CHECK(ox_tensor_numel(&Y) == 0 && ox_tensor_numel(&Yh) == 0 && Y.rank == 4 &&
                          Y.dims[0] == 3 && Y.dims[2] == NB && Y.dims[3] == H,
                      "%s: empty outputs of the right shapes", ops[o]);
                ox_tensor_free_data(&Y);
                ox_tensor_free_data(&Yh);
            }
            ox_tensor_free_data(&X);
            ox_tensor_free_data(&W);
            ox_tensor_free_data(&R);
        }
}

int main(int argc, char **argv) {
    (void)argc, (void)argv;
    srand(7);
    test_quantize_edges();
    test_qlinear_conv();
    test_qlinear_matmul();
    test_microsoft();
    test_gru();
    test_lstm();
    test_rnn();
    test_rnn_empty();
    return harness_finish();
}
