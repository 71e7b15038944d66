/* Unit tests of kernels/cpu/nn.c through the operator table: ConvTranspose (GEMM + col2im)
 * against a direct scatter loop on random 1-D/2-D/3-D geometries with groups, strides,
 * dilations, pads and output_padding, and its auto_pad/output_shape padding rules;
 * MatMulInteger against a plain integer loop with every kind of zero point; the opset
 * 18/21 difference of GroupNormalization; MaxRoiPool and MeanVarianceNormalization on
 * hand-checked values; float 2-D dense, grouped and depthwise Conv (FusedConv with residual and
 * activations) and MaxPool against their definitions on random geometries; MaxUnpool's use of the
 * default shape; and the errors bad input gives. The ONNX backend node tests and the PyTorch cases
 * cover the ordinary behaviour.
 *
 *     test_nn            # exit status 0 when all pass
 *     test_nn --bench    # also time a float32 ConvTranspose
 */
#include "harness.h"
#include "kernels/cpu/winograd.h"

static void fill(ox_tensor *t) {
    int64_t n = ox_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) ox_set_f64(t, i, (double)rand() / RAND_MAX * 2.0 - 1.0);
}

/* ---- ConvTranspose ----------------------------------------------------------------- */

/* The definition: every input element times every kernel element lands at
 * o = i * stride + k * dilation - pad_begin, when that is inside the output. */
static void convt_ref(const ox_tensor *x, const ox_tensor *w, const ox_tensor *b, int group,
                      const int64_t *s, const int64_t *d, const int64_t *pb, ox_tensor *y) {
    int nsp = x->rank - 2;
    int64_t N = x->dims[0], C = x->dims[1], mg = w->dims[1], M = y->dims[1], cg = C / group;
    int64_t in_size = 1, out_size = 1, k_size = 1;
    for (int i = 0; i < nsp; i++) {
        in_size *= x->dims[i + 2];
        out_size *= y->dims[i + 2];
        k_size *= w->dims[i + 2];
    }
    for (int64_t i = 0; i < ox_tensor_numel(y); i++)
        ox_set_f64(y, i, b ? ox_get_f64(b, (i / out_size) % M) : 0);
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t p = 0; p < in_size; p++)
                for (int64_t m = 0; m < mg; m++)
                    for (int64_t kk = 0; kk < k_size; kk++) {
                        int64_t ip[3], kp[3], r = p, q = kk, off = 0;
                        bool inside = true;
                        for (int i = nsp - 1; i >= 0; i--) {
                            ip[i] = r % x->dims[i + 2], r /= x->dims[i + 2];
                            kp[i] = q % w->dims[i + 2], q /= w->dims[i + 2];
                        }
                        for (int i = 0; i < nsp; i++) {
                            int64_t o = ip[i] * s[i] + kp[i] * d[i] - pb[i];
                            if (o < 0 || o >= y->dims[i + 2]) inside = false;
                            off = off * y->dims[i + 2] + o;
                        }
                        if (!inside) continue;
                        int64_t oc = (c / cg) * mg + m, yi = (n * M + oc) * out_size + off;
                        double v = ox_get_f64(x, (n * C + c) * in_size + p) *
                                   ox_get_f64(w, (c * mg + m) * k_size + kk);
                        ox_set_f64(y, yi, ox_get_f64(y, yi) + v);
                    }
}

static void test_convt_random(void) {
    for (int iter = 0; iter < 60; iter++) {
        int nsp = (int)irand(1, 3);
        ox_dtype dt = iter % 3 == 2 ? OX_DOUBLE : OX_FLOAT;
        int group = (int)irand(1, 3);
        int64_t N = irand(1, 2), cg = irand(1, 3), mg = irand(1, 3);
        int64_t xd[5] = {N, cg * group}, wd[5] = {cg * group, mg}, yd[5] = {N, mg * group};
        int64_t s[3], d[3], op[3], pads[6], pb[3];
        bool ok = true;
        for (int i = 0; i < nsp; i++) {
            xd[i + 2] = irand(1, nsp == 3 ? 3 : 5);
            wd[i + 2] = irand(1, 3);
            s[i] = irand(1, 3);
            d[i] = irand(1, 2);
            op[i] = irand(0, (s[i] > d[i] ? s[i] : d[i]) - 1);
            pads[i] = pb[i] = irand(0, 2);
            pads[i + nsp] = irand(0, 2);
            yd[i + 2] = s[i] * (xd[i + 2] - 1) + op[i] + (wd[i + 2] - 1) * d[i] + 1 - pads[i] -
                        pads[i + nsp];
            if (yd[i + 2] < 1) ok = false;
        }
        if (!ok) continue;
        ox_tensor x = mk(dt, nsp + 2, xd), w = mk(dt, nsp + 2, wd), b = mk(dt, 1, &yd[1]);
        ox_tensor want = mk(dt, nsp + 2, yd), y;
        fill(&x);
        fill(&w);
        fill(&b);
        bool bias = iter % 2;
        convt_ref(&x, &w, bias ? &b : NULL, group, s, d, pb, &want);
        struct attrs at = {0};
        attr_ints(&at, "strides", nsp, s);
        attr_ints(&at, "dilations", nsp, d);
        attr_ints(&at, "output_padding", nsp, op);
        attr_ints(&at, "pads", 2 * nsp, pads);
        attr_i(&at, "group", group);
        const ox_tensor *in[3] = {&x, &w, &b};
        ox_status st = run("ConvTranspose", 11, &at, bias ? 3 : 2, in, &y);
        CHECK(!st, "iter %d: %s", iter, ox_errmsg());
        if (!st) {
            bool shape = y.rank == want.rank && !memcmp(y.dims, want.dims, sizeof(int64_t) * 5);
            CHECK(shape, "iter %d: shape", iter);
            double worst = 0;
            for (int64_t i = 0; shape && i < ox_tensor_numel(&y); i++) {
                double e = fabs(ox_get_f64(&y, i) - ox_get_f64(&want, i));
                worst = e > worst ? e : worst;
            }
            CHECK(worst < (dt == OX_FLOAT ? 1e-4 : 1e-12), "iter %d (%dd, group %d): error %g",
                  iter, nsp, group, worst);
            ox_tensor_free_data(&y);
        }
        ox_tensor_free_data(&x);
        ox_tensor_free_data(&w);
        ox_tensor_free_data(&b);
        ox_tensor_free_data(&want);
    }
}

/* SAME_UPPER/SAME_LOWER and output_shape choose pads from the full result: compare with
 * the full result cut at the offsets the ONNX formulas give. */
static void test_convt_padding_rules(void) {
    int64_t xd[4] = {1, 1, 3, 4}, wd[4] = {1, 1, 3, 3}, s[2] = {2, 2};
    ox_tensor x = mk(OX_FLOAT, 4, xd), w = mk(OX_FLOAT, 4, wd), full, y;
    fill(&x);
    fill(&w);
    const ox_tensor *in[2] = {&x, &w};
    struct attrs at0 = {0};
    attr_ints(&at0, "strides", 2, s);
    CHECK(!run("ConvTranspose", 11, &at0, 2, in, &full), "%s", ox_errmsg());
    CHECK(full.dims[2] == 7 && full.dims[3] == 9, "full %lldx%lld", (long long)full.dims[2],
          (long long)full.dims[3]);
    /* SAME: out = in * stride = 6x8, total padding 1 on each axis */
    static const struct {
        const char *mode;
        int64_t begin;
    } same[] = {{"SAME_UPPER", 0}, {"SAME_LOWER", 1}};
    for (int k = 0; k < 2; k++) {
        struct attrs at = at0;
        attr_s(&at, "auto_pad", same[k].mode);
        ox_status st = run("ConvTranspose", 11, &at, 2, in, &y);
        CHECK(!st && y.dims[2] == 6 && y.dims[3] == 8, "%s: %s", same[k].mode, ox_errmsg());
        if (st) continue;
        bool eq = true;
        for (int64_t i = 0; i < 6; i++)
            for (int64_t j = 0; j < 8; j++)
                eq = eq && ((float *)y.data)[i * 8 + j] ==
                               ((float *)full.data)[(i + same[k].begin) * 9 + j + same[k].begin];
        CHECK(eq, "%s: values are not the full result from offset %lld", same[k].mode,
              (long long)same[k].begin);
        ox_tensor_free_data(&y);
    }
    /* output_shape 5x10: rows lose 2 (1 each side), columns gain one zero column at the end */
    int64_t os[2] = {5, 10};
    struct attrs at = at0;
    attr_ints(&at, "output_shape", 2, os);
    ox_status st = run("ConvTranspose", 11, &at, 2, in, &y);
    CHECK(!st && y.dims[2] == 5 && y.dims[3] == 10, "output_shape: %s", ox_errmsg());
    if (!st) {
        bool eq = true;
        for (int64_t i = 0; i < 5; i++)
            for (int64_t j = 0; j < 10; j++) {
                float v = ((float *)y.data)[i * 10 + j];
                eq = eq && v == (j < 9 ? ((float *)full.data)[(i + 1) * 9 + j] : 0.0f);
            }
        CHECK(eq, "output_shape: values");
        ox_tensor_free_data(&y);
    }
    ox_tensor_free_data(&full);
    ox_tensor_free_data(&x);
    ox_tensor_free_data(&w);
}

static void test_convt_errors(void) {
    int64_t xd[4] = {1, 4, 3, 3}, wd[4] = {4, 2, 3, 3}, bd = 5;
    ox_tensor x = mk(OX_FLOAT, 4, xd), w = mk(OX_FLOAT, 4, wd), b = mk(OX_FLOAT, 1, &bd), y;
    const ox_tensor *in[3] = {&x, &w, &b};
    struct attrs at = {0};
    attr_i(&at, "group", 3);
    CHECK(run("ConvTranspose", 11, &at, 2, in, &y) == OX_E_SHAPE, "group 3 of 4 channels");
    at.n = 0;
    attr_s(&at, "auto_pad", "SAME");
    CHECK(run("ConvTranspose", 11, &at, 2, in, &y) == OX_E_INVALID, "auto_pad SAME");
    at.n = 0;
    CHECK(run("ConvTranspose", 11, &at, 3, in, &y) == OX_E_SHAPE, "bias of 5 for 2 maps");
    int64_t pads[4] = {3, 3, 3, 3};
    attr_ints(&at, "pads", 4, pads);
    CHECK(run("ConvTranspose", 11, &at, 2, in, &y) == OX_E_SHAPE, "pads larger than output");
    ox_tensor_free_data(&x);
    ox_tensor_free_data(&w);
    ox_tensor_free_data(&b);
}

/* ---- MatMulInteger ----------------------------------------------------------------- */

static void test_matmulinteger(void) {
    /* A int8 [2, 3, 4] with zero points [2, 3, 1]; B uint8 [4, 5] with per-column zero
     * points [5]: against the plain loop */
    int64_t ad[3] = {2, 3, 4}, bdm[2] = {4, 5}, zad[3] = {2, 3, 1}, zbd = 5;
    ox_tensor a = mk(OX_INT8, 3, ad), b = mk(OX_UINT8, 2, bdm), za = mk(OX_INT8, 3, zad),
              zb = mk(OX_UINT8, 1, &zbd), y;
    for (int i = 0; i < 24; i++) ((int8_t *)a.data)[i] = (int8_t)(irand(-128, 127));
    for (int i = 0; i < 20; i++) ((uint8_t *)b.data)[i] = (uint8_t)irand(0, 255);
    for (int i = 0; i < 6; i++) ((int8_t *)za.data)[i] = (int8_t)irand(-128, 127);
    for (int i = 0; i < 5; i++) ((uint8_t *)zb.data)[i] = (uint8_t)irand(0, 255);
    const ox_tensor *in[4] = {&a, &b, &za, &zb};
    ox_status st = run("MatMulInteger", 10, NULL, 4, in, &y);
    CHECK(!st && y.dtype == OX_INT32 && y.rank == 3 && y.dims[2] == 5, "%s", ox_errmsg());
    if (!st) {
        bool eq = true;
        for (int bt = 0; bt < 2; bt++)
            for (int i = 0; i < 3; i++)
                for (int j = 0; j < 5; j++) {
                    int32_t acc = 0;
                    for (int k = 0; k < 4; k++)
                        acc += (((int8_t *)a.data)[(bt * 3 + i) * 4 + k] -
                                ((int8_t *)za.data)[bt * 3 + i]) *
                               (((uint8_t *)b.data)[k * 5 + j] - ((uint8_t *)zb.data)[j]);
                    eq = eq && ((int32_t *)y.data)[(bt * 3 + i) * 5 + j] == acc;
                }
        CHECK(eq, "values differ from the plain loop");
        ox_tensor_free_data(&y);
    }
    /* a zero point that fits neither A's rows nor a scalar */
    int64_t bad = 2;
    ox_tensor zbad = mk(OX_INT8, 1, &bad);
    const ox_tensor *in2[3] = {&a, &b, &zbad};
    CHECK(run("MatMulInteger", 10, NULL, 3, in2, &y) == OX_E_SHAPE, "zero point [2] for M=3");
    const ox_tensor *in3[3] = {&a, &b, &zb};
    CHECK(run("MatMulInteger", 10, NULL, 3, in3, &y) == OX_E_SHAPE, "uint8 zero point of int8");
    ox_tensor_free_data(&a);
    ox_tensor_free_data(&b);
    ox_tensor_free_data(&za);
    ox_tensor_free_data(&zb);
    ox_tensor_free_data(&zbad);
}

/* ---- normalizations ---------------------------------------------------------------- */

/* Opset 18 takes scale and bias per group, 21 per channel; with channel values equal within
 * each group both give the same result, and each rejects the other's shape. */
static void test_groupnorm(void) {
    int64_t xd[3] = {2, 4, 3}, g2 = 2, c4 = 4;
    ox_tensor x = mk(OX_FLOAT, 3, xd), sg = mk(OX_FLOAT, 1, &g2), bg = mk(OX_FLOAT, 1, &g2);
    ox_tensor sc = mk(OX_FLOAT, 1, &c4), bc = mk(OX_FLOAT, 1, &c4), y18, y21;
    fill(&x);
    float gs[2] = {1.5f, -0.5f}, gb[2] = {0.25f, 2.0f};
    for (int i = 0; i < 2; i++) ((float *)sg.data)[i] = gs[i], ((float *)bg.data)[i] = gb[i];
    for (int i = 0; i < 4; i++)
        ((float *)sc.data)[i] = gs[i / 2], ((float *)bc.data)[i] = gb[i / 2];
    struct attrs at = {0};
    attr_i(&at, "num_groups", 2);
    attr_f(&at, "epsilon", 1e-3f);
    const ox_tensor *in18[3] = {&x, &sg, &bg}, *in21[3] = {&x, &sc, &bc};
    ox_status s1 = run("GroupNormalization", 18, &at, 3, in18, &y18);
    ox_status s2 = run("GroupNormalization", 21, &at, 3, in21, &y21);
    CHECK(!s1 && !s2, "%s", ox_errmsg());
    if (!s1 && !s2) {
        /* by hand for image 1, group 1 (channels 2 and 3) */
        const float *xs = (const float *)x.data + 12 + 6;
        double m = 0, v = 0;
        for (int i = 0; i < 6; i++) m += xs[i] / 6.0;
        for (int i = 0; i < 6; i++) v += (xs[i] - m) * (xs[i] - m) / 6.0;
        double want = (xs[4] - m) / sqrt(v + 1e-3) * gs[1] + gb[1];
        CHECK(close_to(((float *)y18.data)[22], want, 1e-5), "opset 18: %g, want %g",
              ((float *)y18.data)[22], want);
        bool eq = true;
        for (int i = 0; i < 24; i++)
            eq = eq && close_to(((float *)y18.data)[i], ((float *)y21.data)[i], 1e-6);
        CHECK(eq, "opset 18 and 21 differ on group-constant parameters");
        ox_tensor_free_data(&y18);
        ox_tensor_free_data(&y21);
    }
    CHECK(run("GroupNormalization", 18, &at, 3, in21, &y18) == OX_E_SHAPE, "opset 18, [C]");
    CHECK(run("GroupNormalization", 21, &at, 3, in18, &y21) == OX_E_SHAPE, "opset 21, [G]");
    at.n = 0;
    attr_i(&at, "num_groups", 3);
    CHECK(run("GroupNormalization", 21, &at, 3, in21, &y21) == OX_E_SHAPE, "3 groups of 4");
    ox_tensor_free_data(&x);
    ox_tensor_free_data(&sg);
    ox_tensor_free_data(&bg);
    ox_tensor_free_data(&sc);
    ox_tensor_free_data(&bc);
}

/* Default axes [0, 2, 3]: each channel is normalized over N, H and W; epsilon 1e-9 is
 * added to the standard deviation. */
static void test_mvn(void) {
    int64_t xd[4] = {2, 2, 1, 2};
    ox_tensor x = mk(OX_DOUBLE, 4, xd), y;
    double v[8] = {1, 2, 10, 20, 3, 4, 30, 40}; /* channel 0: 1,2,3,4; channel 1: 10..40 */
    memcpy(x.data, v, sizeof v);
    const ox_tensor *in[1] = {&x};
    ox_status st = run("MeanVarianceNormalization", 13, NULL, 1, in, &y);
    CHECK(!st, "%s", ox_errmsg());
    if (!st) {
        double mean[2] = {2.5, 25}, sd[2] = {sqrt(1.25), sqrt(125)}, want[8];
        for (int i = 0; i < 8; i++) want[i] = (v[i] - mean[i / 2 % 2]) / (sd[i / 2 % 2] + 1e-9);
        bool eq = true;
        for (int i = 0; i < 8; i++) eq = eq && close_to(((double *)y.data)[i], want[i], 1e-12);
        CHECK(eq, "values");
        ox_tensor_free_data(&y);
    }
    int64_t bad[1] = {4};
    struct attrs at = {0};
    attr_ints(&at, "axes", 1, bad);
    CHECK(run("MeanVarianceNormalization", 13, &at, 1, in, &y) == OX_E_INVALID, "axis 4");
    ox_tensor_free_data(&x);
}

/* A random 2-D convolution geometry: kernel 1-5, strides s_lo..s_hi, dilations 1-2, pads
 * 0..max_pad at each side, rows of 1..narrow inputs or (every third iter) wide_lo..wide_hi;
 * the spatial dims of x, w and y (indices 2, 3). False when the kernel does not fit. */
static bool random_conv_geom(int iter, int64_t s_lo, int64_t s_hi, int64_t max_pad, int64_t narrow,
                             int64_t wide_lo, int64_t wide_hi, int64_t k[2], int64_t s[2],
                             int64_t d[2], int64_t pads[4], int64_t xd[4], int64_t wd[4],
                             int64_t yd[4]) {
    bool ok = true;
    for (int i = 0; i < 2; i++) {
        k[i] = irand(1, 5);
        s[i] = irand(s_lo, s_hi);
        d[i] = irand(1, 2);
        pads[i] = irand(0, max_pad);
        pads[i + 2] = irand(0, max_pad);
        xd[i + 2] = i == 1 && iter % 3 == 0 ? irand(wide_lo, wide_hi) : irand(1, narrow);
        wd[i + 2] = k[i];
        int64_t num = xd[i + 2] + pads[i] + pads[i + 2] - ((k[i] - 1) * d[i] + 1);
        if (num < 0) ok = false;
        yd[i + 2] = num / s[i] + 1;
    }
    return ok;
}

/* ---- dense and grouped Conv (float 2-D), fused residual and activation ---------------- */

/* One FusedConv (x: xd, w: wd, y: yd; random data, bias, a residual Z when with_z, the
 * activation act) against the definition in double: the worst error over the outputs, each
 * relative to 1 + the sum of the magnitudes of its terms; -1 when it failed to run. With
 * keep, y is left there (the caller frees it). */
static double conv_case(const int64_t xd[4], const int64_t wd[4], const int64_t yd[4], int64_t k[2],
                        int64_t s[2], int64_t d[2], int64_t pads[4], int64_t G, const char *act,
                        bool with_z, ox_tensor *keep) {
    int64_t N = xd[0], C = xd[1], M = wd[0], cg = C / G, mg = M / G;
    ox_tensor x = mk(OX_FLOAT, 4, xd), w = mk(OX_FLOAT, 4, wd), b = mk(OX_FLOAT, 1, &M),
              z = mk(OX_FLOAT, 4, yd), y;
    fill(&x);
    fill(&w);
    fill(&b);
    fill(&z);
    float clip[2] = {-0.5f, 0.7f};
    struct attrs at = {0};
    attr_ints(&at, "kernel_shape", 2, k);
    attr_ints(&at, "strides", 2, s);
    attr_ints(&at, "dilations", 2, d);
    attr_ints(&at, "pads", 4, pads);
    attr_i(&at, "group", G);
    attr_s(&at, "activation", act);
    if (!strcmp(act, "Clip")) attr_floats(&at, "activation_params", 2, clip);
    const ox_tensor *in[4] = {&x, &w, &b, with_z ? &z : NULL};
    ox_status st =
        run_node("ai.onnxexec", "FusedConv", 1, &at, 4, in, 1, (ox_tensor *[]){&y}, NULL);
    CHECK(!st, "%s", ox_errmsg());
    bool shape = !st && y.rank == 4 && !memcmp(y.dims, yd, 4 * sizeof *yd);
    CHECK(st || shape, "shape");
    double worst = shape ? 0 : -1;
    int64_t H = xd[2], W = xd[3];
    for (int64_t n = 0; shape && n < N; n++)
        for (int64_t m = 0; m < M; m++)
            for (int64_t oh = 0; oh < yd[2]; oh++)
                for (int64_t ow = 0; ow < yd[3]; ow++) {
                    int64_t gr = m / mg, o = ((n * M + m) * yd[2] + oh) * yd[3] + ow;
                    double acc = ox_get_f64(&b, m), mag = fabs(acc);
                    for (int64_t c = 0; c < cg; c++)
                        for (int64_t kh = 0; kh < k[0]; kh++)
                            for (int64_t kw = 0; kw < k[1]; kw++) {
                                int64_t ih = oh * s[0] - pads[0] + kh * d[0];
                                int64_t iw = ow * s[1] - pads[1] + kw * d[1];
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                                double t =
                                    ox_get_f64(&x, ((n * C + gr * cg + c) * H + ih) * W + iw) *
                                    ox_get_f64(&w, ((m * cg + c) * k[0] + kh) * k[1] + kw);
                                acc += t;
                                mag += fabs(t);
                            }
                    if (with_z) acc += ox_get_f64(&z, o), mag += 1;
                    if (!strcmp(act, "Relu")) acc = acc > 0 ? acc : 0;
                    if (!strcmp(act, "Clip"))
                        acc = acc < clip[0] ? clip[0] : acc > clip[1] ? clip[1] : acc;
                    if (!strcmp(act, "Silu")) acc = acc / (1 + exp(-acc));
                    double e = fabs(ox_get_f64(&y, o) - acc) / (1 + mag);
                    worst = e > worst ? e : worst;
                }
    if (!st && keep)
        *keep = y;
    else if (!st)
        ox_tensor_free_data(&y);
    ox_tensor_free_data(&x);
    ox_tensor_free_data(&w);
    ox_tensor_free_data(&b);
    ox_tensor_free_data(&z);
    return worst;
}

static const char *const acts[] = {"", "Relu", "Clip", "Silu"};

/* Random convolutions through FusedConv (kernel 1-5, strides 1-3, unequal in the two
 * dimensions, dilations, unequal pads, groups, depthwise ones of 1 to 40 channels, rows
 * narrower and wider than a 32-column block, a residual Z and each activation) against the
 * definition in double. */
/* narrow: maps of at most 20 x 20 outputs with 16-150 output channels per group, K up to 2700
 * (several 256-deep slabs) and every fourth case a stride-1 1x1 convolution: the shapes of
 * late layers (7x7, 13x13, 14x14 maps), where the GEMM's last column block is partly empty. */
static void test_conv_random(bool narrow) {
    for (int iter = 0; iter < (narrow ? 80 : 240); iter++) {
        int64_t k[2], s[2], d[2], pads[4], G = irand(1, 2), cg = irand(1, 20), mg = irand(1, 20);
        if (iter % 5 == 4) G = irand(1, 40), cg = mg = 1; /* depthwise, blocks of 16 channels */
        if (narrow) G = irand(1, 2), cg = irand(2, iter % 8 == 0 ? 300 : 40), mg = irand(16, 150);
        int64_t N = irand(1, 2), C = G * cg, M = G * mg;
        int64_t xd[4] = {N, C}, wd[4] = {M, cg}, yd[4] = {N, M};
        if (!(narrow ? random_conv_geom(iter, 1, iter % 3 == 2 ? 2 : 1, 2, 16, 10, 20, k, s, d,
                                        pads, xd, wd, yd)
                     : random_conv_geom(iter, 1, iter % 4 == 3 ? 3 : 1, 3, 20, 30, 70, k, s, d,
                                        pads, xd, wd, yd)))
            continue;
        if (narrow && iter % 4 == 1) { /* a stride-1 1x1 convolution */
            for (int i = 0; i < 2; i++) {
                k[i] = s[i] = d[i] = 1;
                pads[i] = pads[i + 2] = 0;
                wd[i + 2] = 1;
                yd[i + 2] = xd[i + 2];
            }
        }
        const char *act = acts[iter % 4];
        bool with_z = iter % 2 == 0;
        double worst = conv_case(xd, wd, yd, k, s, d, pads, G, act, with_z, NULL);
        CHECK(worst >= 0 && worst < 1e-5,
              "iter %d: error %g (x %lldx%lld, k %lldx%lld, s %lldx%lld, d %lldx%lld, group %lld, "
              "%s%s)",
              iter, worst, (long long)xd[2], (long long)xd[3], (long long)k[0], (long long)k[1],
              (long long)s[0], (long long)s[1], (long long)d[0], (long long)d[1], (long long)G, act,
              with_z ? ", residual" : "");
    }
}

/* A random geometry 3 wide with stride 2 and dilation 1 across (pads 0..max_pad on each
 * side); heights 1-5, strides 1-3, dilations 1-2 down; yd's spatial extents from H, W (the
 * bottom pad grown where the window would not fit). */
static void stride2x3_geom(int64_t H, int64_t W, int64_t max_pad, int64_t k[2], int64_t s[2],
                           int64_t d[2], int64_t pads[4], int64_t yd[4]) {
    k[0] = irand(1, 5), k[1] = 3, s[0] = irand(1, 3), s[1] = 2, d[0] = irand(1, 2), d[1] = 1;
    for (int i = 0; i < 4; i++) pads[i] = irand(0, max_pad);
    int64_t num = H + pads[0] + pads[2] - ((k[0] - 1) * d[0] + 1);
    if (num < 0) pads[2] += -num, num = 0;
    yd[2] = num / s[0] + 1;
    yd[3] = (W + pads[1] + pads[3] - 3) / 2 + 1;
}

/* Random depthwise convolutions 3 columns wide with stride 2 across (dilation 1 there, pads
 * 0-2 on each side) and 48 to 150 outputs a row: the shapes that read the input in place 64
 * outputs at a time on AVX-512 (kernels/cpu/conv.c, depthwise2d_s2_rows; groups at the row's
 * ends masked, rows whose last group is partly past the row). Heights, strides, dilations
 * and pads down the columns vary (windows partly or wholly in the padding); every eighth case
 * is one row 1100 wide (over 8 groups: masks computed per group). A residual and each
 * activation; against the definition in double. */
static void test_depthwise_s2_rows(void) {
    for (int iter = 0; iter < 40; iter++) {
        int64_t C = irand(1, 20), N = irand(1, 2), k[2], s[2], d[2], pads[4];
        int64_t H = irand(1, 12), W = irand(95, 300), yd[4] = {N, C};
        if (iter % 8 == 7) H = 1, W = 1100;
        stride2x3_geom(H, W, 2, k, s, d, pads, yd);
        int64_t xd[4] = {N, C, H, W}, wd[4] = {C, 1, k[0], 3};
        const char *act = acts[iter % 4];
        bool with_z = iter % 3 == 0;
        double worst = conv_case(xd, wd, yd, k, s, d, pads, C, act, with_z, NULL);
        CHECK(worst >= 0 && worst < 1e-5,
              "iter %d: error %g (x %lldx%lld, k %lldx3, s %lldx2, d %lldx1, pads %lld %lld %lld "
              "%lld, %s%s)",
              iter, worst, (long long)H, (long long)W, (long long)k[0], (long long)s[0],
              (long long)d[0], (long long)pads[0], (long long)pads[1], (long long)pads[2],
              (long long)pads[3], act, with_z ? ", residual" : "");
    }
}

/* Random convolutions of 1-4 input channels and 1-32 output channels, 3 wide with stride 2
 * across (pads 0-3 on each side), 16 to 60 outputs a row: the stems that run directly on
 * AVX-512 (kernels/cpu/conv.c, stem_row; 16 output channels at a time, the last group
 * partly past M; the last 16 pixels of a row partly past it). Heights, strides, dilations
 * and pads down the columns vary; 1-2 images; a residual and each activation; against the
 * definition in double. */
static void test_conv_stem(void) {
    for (int iter = 0; iter < 40; iter++) {
        int64_t C = irand(1, 4), M = irand(1, 32), N = irand(1, 2), k[2], s[2], d[2], pads[4];
        int64_t H = irand(1, 12), W = irand(33, 120), yd[4] = {N, M};
        stride2x3_geom(H, W, 3, k, s, d, pads, yd);
        int64_t xd[4] = {N, C, H, W}, wd[4] = {M, C, k[0], 3};
        const char *act = acts[iter % 4];
        bool with_z = iter % 3 == 0;
        double worst = conv_case(xd, wd, yd, k, s, d, pads, 1, act, with_z, NULL);
        CHECK(worst >= 0 && worst < 1e-5,
              "iter %d: error %g (%lld -> %lld channels, x %lldx%lld, k %lldx3, s %lldx2, d "
              "%lldx1, pads %lld %lld %lld %lld, %s%s)",
              iter, worst, (long long)C, (long long)M, (long long)H, (long long)W, (long long)k[0],
              (long long)s[0], (long long)d[0], (long long)pads[0], (long long)pads[1],
              (long long)pads[2], (long long)pads[3], act, with_z ? ", residual" : "");
    }
}

/* Random 1x1 stride-1 convolutions with 1-40 output channels (those up to 32 read their
 * input in place instead of packing it: kernels/cpu/conv.c, pw_in_place), 1-600 input
 * channels (past the in-place limit of 512 too), maps from 1x1 to 9x90 (the last column
 * block of every row of the input partly past the map: an over-read past the input's end
 * would show under ASan), 1-2 images, a residual and each activation; against the
 * definition in double. */
static void test_conv_pointwise(void) {
    for (int iter = 0; iter < 40; iter++) {
        int64_t N = irand(1, 2), C = irand(1, iter % 8 == 0 ? 600 : 64), M = irand(1, 40);
        int64_t k[2] = {1, 1}, s[2] = {1, 1}, d[2] = {1, 1}, pads[4] = {0, 0, 0, 0};
        int64_t xd[4] = {N, C, irand(1, 9), irand(1, 90)}, wd[4] = {M, C, 1, 1};
        int64_t yd[4] = {N, M, xd[2], xd[3]};
        const char *act = acts[iter % 4];
        bool with_z = iter % 3 == 0;
        double worst = conv_case(xd, wd, yd, k, s, d, pads, 1, act, with_z, NULL);
        CHECK(worst >= 0 && worst < 1e-5,
              "iter %d: error %g (x %lldx%lldx%lldx%lld, %lld outputs, %s%s)", iter, worst,
              (long long)N, (long long)C, (long long)xd[2], (long long)xd[3], (long long)M, act,
              with_z ? ", residual" : "");
    }
}

/* Random 3x3 stride-1 convolutions of the shapes the Winograd form takes
 * (kernels/cpu/winograd.c; each case checked to go through it where the CPU has AVX-512):
 * 1-3 images, 8-300 input channels (past one 256-deep slab), 16-150 output channels (not
 * only multiples of 16), maps of 1 to 40 (tiles cut by the map's edge, rows of tiles
 * narrower and wider than 16, blocks of tiles spanning images), pads 0-2 on each side
 * independently, a residual and each activation; against the definition in double, and
 * again on 2 or 3 threads (which must give the same bits; with over 4 MiB of transformed
 * filters for one block of tiles the threads share the GEMMs instead of the tiles). The
 * transforms add rounding: the worst case here is 2.4e-6 (5.5e-6 with the points 0, +-1,
 * +-2 of Lavin's matrices; the direct form's stay below 1e-6), so the bound is 1e-5. */
static void test_conv_winograd(void) {
    int ran = 0;
    for (int iter = 0; iter < 60; iter++) {
        int64_t N = irand(1, 3), C = irand(8, iter % 10 == 0 ? 300 : 64), M = irand(16, 150);
        int64_t k[2] = {3, 3}, s[2] = {1, 1}, d[2] = {1, 1}, pads[4];
        int64_t xd[4] = {N, C, irand(1, 40), irand(1, 40)}, wd[4] = {M, C, 3, 3}, yd[4] = {N, M};
        if (C > 64) xd[2] = irand(1, 14), xd[3] = irand(1, 14);
        if (iter % 5 == 2) { /* one image of 16-25 tiles, large filters */
            xd[0] = yd[0] = N = 1, xd[1] = wd[1] = C = irand(64, 300);
            wd[0] = yd[1] = M = irand(64, 150);
            xd[2] = irand(13, 18), xd[3] = irand(13, 18);
            /* over 4 MiB of transformed filters: threads share the 36 GEMMs, not the tiles */
            if (iter % 10 == 7)
                xd[1] = wd[1] = C = irand(200, 300), wd[0] = yd[1] = M = irand(150, 200);
        }
        bool fits = true;
        for (int i = 0; i < 4; i++) pads[i] = irand(0, 2);
        for (int i = 0; i < 2; i++) {
            yd[i + 2] = xd[i + 2] + pads[i] + pads[i + 2] - 2;
            fits = fits && yd[i + 2] >= 1;
        }
        struct ox_wino wg = {.N = N,
                             .C = C,
                             .H = xd[2],
                             .W = xd[3],
                             .M = M,
                             .OH = yd[2],
                             .OW = yd[3],
                             .pt = pads[0],
                             .pl = pads[1]};
        if (!fits || !ox_wino_applies(&wg)) {
            CHECK(!fits || !ox_sgemm_is_fast() || N * ((yd[2] + 3) / 4) * ((yd[3] + 3) / 4) < 16,
                  "iter %d: Winograd refused a case it should take", iter);
            continue;
        }
        ran++;
        const char *act = acts[iter % 4];
        bool with_z = iter % 3 != 1;
        /* the same case on 1 thread and on 2 or 3 (the threads split the tiles): the same
         * outputs, bit for bit */
        ox_tensor y1 = {0}, yt = {0};
        unsigned seed = (unsigned)rand();
        srand(seed);
        double worst = conv_case(xd, wd, yd, k, s, d, pads, 1, act, with_z, &y1);
        harness_threads = 2 + iter % 2;
        srand(seed);
        double worst_t = conv_case(xd, wd, yd, k, s, d, pads, 1, act, with_z, &yt);
        harness_threads = 1;
        CHECK(worst >= 0 && worst < 1e-5 && worst_t >= 0 && worst_t < 1e-5,
              "iter %d: error %g, %g on %d threads (N %lld, C %lld, M %lld, x %lldx%lld, pads "
              "%lld %lld %lld %lld, %s%s)",
              iter, worst, worst_t, 2 + iter % 2, (long long)N, (long long)C, (long long)M,
              (long long)xd[2], (long long)xd[3], (long long)pads[0], (long long)pads[1],
              (long long)pads[2], (long long)pads[3], act, with_z ? ", residual" : "");
        CHECK(y1.data && yt.data &&
                  !memcmp(y1.data, yt.data, sizeof(float) * (size_t)ox_tensor_numel(&y1)),
              "iter %d: %d threads gave other outputs than 1", iter, 2 + iter % 2);
        ox_tensor_free_data(&y1);
        ox_tensor_free_data(&yt);
    }
    CHECK(!ox_sgemm_is_fast() || ran >= 30, "only %d cases went through the Winograd form", ran);
}

/* ---- depthwise Conv (float 2-D) ------------------------------------------------------ */

/* Random depthwise geometries (kernel 1-5, strides 1-3, dilations, pads, rows narrower and
 * wider than one 16-lane vector) against the definition in double. */
static void test_depthwise_random(void) {
    for (int iter = 0; iter < 200; iter++) {
        int64_t k[2], s[2], d[2], pads[4], C = irand(1, 4), N = irand(1, 2);
        int64_t xd[4] = {N, C}, wd[4] = {C, 1}, yd[4] = {N, C};
        if (!random_conv_geom(iter, 1, 3, 2, 16, 17, 60, k, s, d, pads, xd, wd, yd)) continue;
        ox_tensor x = mk(OX_FLOAT, 4, xd), w = mk(OX_FLOAT, 4, wd), b = mk(OX_FLOAT, 1, &C), y;
        fill(&x);
        fill(&w);
        fill(&b);
        struct attrs at = {0};
        attr_ints(&at, "kernel_shape", 2, k);
        attr_ints(&at, "strides", 2, s);
        attr_ints(&at, "dilations", 2, d);
        attr_ints(&at, "pads", 4, pads);
        attr_i(&at, "group", C);
        const ox_tensor *in[3] = {&x, &w, &b};
        ox_status st = run("Conv", 11, &at, 3, in, &y);
        CHECK(!st, "iter %d: %s", iter, ox_errmsg());
        bool shape = !st && y.rank == 4 && !memcmp(y.dims, yd, sizeof yd);
        CHECK(st || shape, "iter %d: shape", iter);
        double worst = 0;
        int64_t H = xd[2], W = xd[3];
        for (int64_t nc = 0; shape && nc < N * C; nc++)
            for (int64_t oh = 0; oh < yd[2]; oh++)
                for (int64_t ow = 0; ow < yd[3]; ow++) {
                    int64_t c = nc % C;
                    double acc = ox_get_f64(&b, c);
                    for (int64_t kh = 0; kh < k[0]; kh++)
                        for (int64_t kw = 0; kw < k[1]; kw++) {
                            int64_t ih = oh * s[0] - pads[0] + kh * d[0];
                            int64_t iw = ow * s[1] - pads[1] + kw * d[1];
                            if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                            acc += ox_get_f64(&x, (nc * H + ih) * W + iw) *
                                   ox_get_f64(&w, (c * k[0] + kh) * k[1] + kw);
                        }
                    double e = fabs(ox_get_f64(&y, (nc * yd[2] + oh) * yd[3] + ow) - acc);
                    worst = e > worst ? e : worst;
                }
        CHECK(worst < 1e-5,
              "iter %d: error %g (x %lldx%lld, k %lldx%lld, s %lldx%lld, d "
              "%lldx%lld)",
              iter, worst, (long long)H, (long long)W, (long long)k[0], (long long)k[1],
              (long long)s[0], (long long)s[1], (long long)d[0], (long long)d[1]);
        if (!st) ox_tensor_free_data(&y);
        ox_tensor_free_data(&x);
        ox_tensor_free_data(&w);
        ox_tensor_free_data(&b);
    }
}

/* ---- MaxPool (float 2-D fast path) -------------------------------------------------- */

/* Random 2-D geometries (kernel, strides, dilations, pads, ceil_mode; rows narrower and
 * wider than one and two 16-lane vectors, for the masked tails) against the definition:
 * the max over the taps inside the input, a NaN winning, 0 for a window wholly in the
 * padding (ceil_mode can make one). */
/* MaxPool over rows of no columns (W 0) with padding: every window lies in the padding, so
 * every output is 0, and the kernel takes no scratch (fuzz_e2e: an offset into NULL). */
static void test_maxpool_empty_rows(void) {
    int64_t xd[4] = {1, 2, 3, 0}, k[2] = {2, 2}, pads[4] = {1, 1, 1, 1};
    ox_tensor x = mk(OX_FLOAT, 4, xd), y;
    struct attrs at = {0};
    attr_ints(&at, "kernel_shape", 2, k);
    attr_ints(&at, "pads", 4, pads);
    const ox_tensor *in[1] = {&x};
    ox_status st = run("MaxPool", 12, &at, 1, in, &y);
    CHECK(!st, "MaxPool of 3x0 maps: %s", ox_errmsg());
    if (!st) {
        bool zeros = y.rank == 4 && y.dims[2] == 4 && y.dims[3] == 1;
        for (int64_t i = 0; zeros && i < ox_tensor_numel(&y); i++)
            zeros = ((float *)y.data)[i] == 0;
        CHECK(zeros, "MaxPool of 3x0 maps: [1,2,4,1] of zeros");
        ox_tensor_free_data(&y);
    }
    ox_tensor_free_data(&x);
}

/* Pooling with a kernel far wider than its input (kernel_shape is an attribute: 3 x 2097151
 * with SAME_UPPER padding, the window mostly padding) against the definition over the window's
 * taps inside the input, and in milliseconds: every tap was visited before (40 s for a
 * 3 x 32 x 32 AveragePool, found by fuzz_e2e). */
static void test_pool_huge_kernel(void) {
    int64_t xd[4] = {1, 2, 5, 7}, k[2] = {3, 2097151};
    ox_tensor x = mk(OX_FLOAT, 4, xd);
    fill(&x);
    static const struct {
        const char *op;
        int include_pad; /* AveragePool's count_include_pad; p for LpPool */
    } cases[] = {{"AveragePool", 0}, {"AveragePool", 1}, {"MaxPool", 0}, {"LpPool", 2}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        struct attrs at = {0};
        attr_ints(&at, "kernel_shape", 2, k);
        attr_s(&at, "auto_pad", "SAME_UPPER");
        if (!strcmp(cases[c].op, "AveragePool"))
            attr_i(&at, "count_include_pad", cases[c].include_pad);
        if (!strcmp(cases[c].op, "LpPool")) attr_i(&at, "p", cases[c].include_pad);
        const ox_tensor *in[1] = {&x};
        ox_tensor y;
        ox_status st = run(cases[c].op, 11, &at, 1, in, &y);
        CHECK(!st, "%s: %s", cases[c].op, ox_errmsg());
        if (st) continue;
        CHECK(y.rank == 4 && !memcmp(y.dims, xd, sizeof xd), "%s: shape", cases[c].op);
        double worst = 0;
        for (int64_t ch = 0; ch < 2; ch++)
            for (int64_t oh = 0; oh < 5; oh++)
                for (int64_t ow = 0; ow < 7; ow++) {
                    /* SAME_UPPER, stride 1: total padding k - 1, the smaller half first */
                    int64_t h0 = oh - (k[0] - 1) / 2, w0 = ow - (k[1] - 1) / 2;
                    double sum = 0, sq = 0, mx = -INFINITY;
                    int64_t n = 0;
                    for (int64_t ih = h0 < 0 ? 0 : h0; ih < h0 + k[0] && ih < 5; ih++)
                        for (int64_t iw = w0 < 0 ? 0 : w0; iw < w0 + k[1] && iw < 7; iw++) {
                            double v = ox_get_f64(&x, (ch * 5 + ih) * 7 + iw);
                            sum += v, sq += v * v, n++;
                            mx = v > mx ? v : mx;
                        }
                    double want =
                        !strcmp(cases[c].op, "MaxPool") ? mx
                        : !strcmp(cases[c].op, "LpPool")
                            ? sqrt(sq)
                            : sum / (cases[c].include_pad ? (double)(k[0] * k[1]) : (double)n);
                    double e =
                        fabs(ox_get_f64(&y, (ch * 5 + oh) * 7 + ow) - want) / (1 + fabs(want));
                    worst = e > worst ? e : worst;
                }
        CHECK(worst < 1e-5, "%s (count_include_pad or p %d): error %g", cases[c].op,
              cases[c].include_pad, worst);
        ox_tensor_free_data(&y);
    }
    ox_tensor_free_data(&x);
}

static void test_maxpool_random(void) {
    for (int iter = 0; iter < 380; iter++) {
        /* from 300 on: 3 columns wide, stride 2, rows of 16 or more outputs (the one-pass
         * kernel, maxpool2d_k3s2), maps up to 120 wide, any rows, pads 0-2 */
        bool k3s2 = iter >= 300;
        /* some with many channels: the tiled kernel's blocks of 16 and a partial one */
        int64_t k[2], s[2], d[2], pads[4], yd[4];
        int64_t xd[4] = {irand(1, 2), iter % 4 == 3 ? irand(1, 40) : irand(1, 3)};
        int ceil_mode = (int)irand(0, 1);
        bool ok = true;
        for (int i = 0; i < 2; i++) {
            k[i] = irand(1, 4);
            s[i] = irand(1, 3);
            d[i] = irand(1, 2);
            pads[i] = irand(0, k[i] - 1 < 2 ? k[i] - 1 : 2);
            pads[i + 2] = irand(0, k[i] - 1 < 2 ? k[i] - 1 : 2);
            xd[i + 2] = i == 1 && iter % 3 == 0 ? irand(30, 70) : irand(1, 20);
            if (k3s2 && i == 1) k[i] = 3, s[i] = 2, d[i] = 1, xd[i + 2] = irand(31, 120);
            if (k3s2 && i == 1) pads[i] = irand(0, 2), pads[i + 2] = irand(0, 2);
            int64_t span = (k[i] - 1) * d[i] + 1, num = xd[i + 2] + pads[i] + pads[i + 2] - span;
            if (num < 0) ok = false;
            yd[i + 2] = ceil_mode ? (num + s[i] - 1) / s[i] + 1 : num / s[i] + 1;
            /* ONNX: with ceil_mode, the last window must start inside the input or left pad */
            if (ceil_mode && (yd[i + 2] - 1) * s[i] >= xd[i + 2] + pads[i]) yd[i + 2]--;
        }
        if (!ok) continue;
        yd[0] = xd[0], yd[1] = xd[1];
        ox_tensor x = mk(OX_FLOAT, 4, xd), y;
        fill(&x);
        if (iter % 5 == 0) ox_set_f64(&x, irand(0, ox_tensor_numel(&x) - 1), NAN);
        struct attrs at = {0};
        attr_ints(&at, "kernel_shape", 2, k);
        attr_ints(&at, "strides", 2, s);
        attr_ints(&at, "dilations", 2, d);
        attr_ints(&at, "pads", 4, pads);
        attr_i(&at, "ceil_mode", ceil_mode);
        const ox_tensor *in[1] = {&x};
        ox_status st = run("MaxPool", 12, &at, 1, in, &y);
        CHECK(!st, "iter %d: %s", iter, ox_errmsg());
        if (st) {
            ox_tensor_free_data(&x);
            continue;
        }
        bool shape = y.rank == 4 && !memcmp(y.dims, yd, sizeof yd);
        CHECK(shape, "iter %d: shape %lldx%lld, want %lldx%lld", iter, (long long)y.dims[2],
              (long long)y.dims[3], (long long)yd[2], (long long)yd[3]);
        int64_t H = xd[2], W = xd[3], bad = 0;
        for (int64_t nc = 0; shape && nc < xd[0] * xd[1]; nc++)
            for (int64_t oh = 0; oh < yd[2]; oh++)
                for (int64_t ow = 0; ow < yd[3]; ow++) {
                    double m = -INFINITY;
                    int taps = 0;
                    for (int64_t kh = 0; kh < k[0]; kh++)
                        for (int64_t kw = 0; kw < k[1]; kw++) {
                            int64_t ih = oh * s[0] - pads[0] + kh * d[0];
                            int64_t iw = ow * s[1] - pads[1] + kw * d[1];
                            if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                            double v = ox_get_f64(&x, (nc * H + ih) * W + iw);
                            taps++;
                            if (isnan(v) || v > m) m = isnan(m) ? m : v;
                        }
                    double got = ox_get_f64(&y, (nc * yd[2] + oh) * yd[3] + ow);
                    double want = taps ? m : 0.0;
                    if (!(got == want || (isnan(got) && isnan(want)))) bad++;
                }
        CHECK(!bad,
              "iter %d: %lld wrong outputs (x %lldx%lld, k %lldx%lld, s %lldx%lld, d "
              "%lldx%lld, ceil %d)",
              iter, (long long)bad, (long long)H, (long long)W, (long long)k[0], (long long)k[1],
              (long long)s[0], (long long)s[1], (long long)d[0], (long long)d[1], ceil_mode);
        ox_tensor_free_data(&y);
        ox_tensor_free_data(&x);
    }
}

/* ---- MaxRoiPool and MaxUnpool ------------------------------------------------------ */

static void test_maxroipool(void) {
    int64_t xd[4] = {1, 1, 4, 4}, rd[2] = {2, 5};
    ox_tensor x = mk(OX_FLOAT, 4, xd), rois = mk(OX_FLOAT, 2, rd), y;
    for (int i = 0; i < 16; i++) ((float *)x.data)[i] = (float)i;
    /* the whole image in 2x2 bins, and a box from (1,1) to (2,3) at scale 1 in 2x2 bins:
     * rows 1..3 (3 rows: bins [1,3) and [2,4)) and cols 1..2 (bins [1,2) and [2,3)) */
    float r[10] = {0, 0, 0, 3, 3, 0, 1, 1, 2, 3};
    memcpy(rois.data, r, sizeof r);
    struct attrs at = {0};
    int64_t ps[2] = {2, 2};
    attr_ints(&at, "pooled_shape", 2, ps);
    const ox_tensor *in[2] = {&x, &rois};
    ox_status st = run("MaxRoiPool", 1, &at, 2, in, &y);
    CHECK(!st && y.dims[0] == 2 && y.dims[2] == 2, "%s", ox_errmsg());
    if (!st) {
        float want[8] = {5, 7, 13, 15, 9, 10, 13, 14};
        bool eq = !memcmp(y.data, want, sizeof want);
        CHECK(eq, "values %g %g %g %g / %g %g %g %g", ((float *)y.data)[0], ((float *)y.data)[1],
              ((float *)y.data)[2], ((float *)y.data)[3], ((float *)y.data)[4],
              ((float *)y.data)[5], ((float *)y.data)[6], ((float *)y.data)[7]);
        ox_tensor_free_data(&y);
    }
    ((float *)rois.data)[5] = 1; /* batch index 1 of 1 image */
    CHECK(run("MaxRoiPool", 1, &at, 2, in, &y) == OX_E_INVALID, "batch index out of range");
    ox_tensor_free_data(&x);
    ox_tensor_free_data(&rois);
}

/* Indices address the default output ((2-1)*2+2 = 4 per axis); output_shape only pads or
 * cuts at the end of each axis; output_shape's data is asked for at plan time. */
static void test_maxunpool(void) {
    int64_t xd[4] = {1, 1, 2, 2}, osd = 4;
    ox_tensor x = mk(OX_FLOAT, 4, xd), ind = mk(OX_INT64, 4, xd), os = mk(OX_INT64, 1, &osd), y;
    float xv[4] = {1, 2, 3, 4};
    int64_t iv[4] = {0, 3, 9, 15}, ov[4] = {1, 1, 3, 5};
    memcpy(x.data, xv, sizeof xv);
    memcpy(ind.data, iv, sizeof iv);
    memcpy(os.data, ov, sizeof ov);
    struct attrs at = {0};
    int64_t k[2] = {2, 2};
    attr_ints(&at, "kernel_shape", 2, k);
    attr_ints(&at, "strides", 2, k);
    const ox_tensor *in[3] = {&x, &ind, &os};
    bool asked = false;
    ox_status st = run_n("MaxUnpool", 11, &at, 3, in, 1, &y, &asked);
    CHECK(!st && asked && y.dims[2] == 3 && y.dims[3] == 5, "%s", ox_errmsg());
    if (!st) {
        /* default 4x4: 1 at (0,0), 2 at (0,3), 3 at (2,1), 4 at (3,3) (cut) */
        float want[15] = {1, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0};
        CHECK(!memcmp(y.data, want, sizeof want), "values");
        ox_tensor_free_data(&y);
    }
    ((int64_t *)ind.data)[3] = 16;
    CHECK(run("MaxUnpool", 11, &at, 2, in, &y) == OX_E_INVALID, "index 16 of 16");
    ox_tensor_free_data(&x);
    ox_tensor_free_data(&ind);
    ox_tensor_free_data(&os);
}

/* ---- bench ------------------------------------------------------------------------- */

static void bench(void) {
    int64_t xd[4] = {1, 256, 28, 28}, wd[4] = {256, 128, 4, 4}, s[2] = {2, 2},
            pads[4] = {1, 1, 1, 1};
    ox_tensor x = mk(OX_FLOAT, 4, xd), w = mk(OX_FLOAT, 4, wd), y;
    fill(&x);
    fill(&w);
    struct attrs at = {0};
    attr_ints(&at, "strides", 2, s);
    attr_ints(&at, "pads", 4, pads);
    const ox_tensor *in[2] = {&x, &w};
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int reps = 10;
    for (int r = 0; r < reps; r++) {
        if (run("ConvTranspose", 11, &at, 2, in, &y)) break;
        ox_tensor_free_data(&y);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = ((double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
    double gflop = 2.0 * 256 * 128 * 16 * 28 * 28 / 1e9;
    printf("ConvTranspose 256->128 4x4 s2 on 28x28: %.2f ms, %.1f GFLOP/s\n", ms / reps,
           gflop / (ms / reps / 1e3));
    ox_tensor_free_data(&x);
    ox_tensor_free_data(&w);
}

int main(int argc, char **argv) {
    srand(1);
    test_convt_random();
    test_convt_padding_rules();
    test_convt_errors();
    test_matmulinteger();
    test_groupnorm();
    test_mvn();
    test_conv_random(false);
    test_conv_random(true);
    test_conv_pointwise();
    test_conv_winograd();
    test_depthwise_random();
    test_depthwise_s2_rows();
    test_conv_stem();
    test_maxpool_random();
    test_pool_huge_kernel();
    test_maxpool_empty_rows();
    test_maxroipool();
    test_maxunpool();
    return harness_finish_bench(argc, argv, bench);
}
