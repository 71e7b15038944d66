/* Unit tests of kernels/cpu/vision.c and kernels/cpu/misc.c through the operator table:
 * ConvTranspose, Col2Im and DeformConv against direct loops over random geometries (1-3
 * spatial dims, groups, strides, dilations, pads, output_padding; float, double, float16),
 * GridSample on identity grids, and the edge cases the ONNX node tests miss: empty inputs,
 * negative axes, sub-byte BitCast, integer wrap-around in CumProd, data-dependent shapes
 * (OX_NEED_DATA), and the errors that bad input must give instead of a crash.
 *
 *     test_vision            # exit status 0 when all pass
 */
#include "harness.h"

static void fill(ox_tensor *t) {
    int64_t n = ox_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) ox_set_f64(t, i, (double)(rand() % 17) / 8.0 - 1.0);
}

/* ---- ConvTranspose --------------------------------------------------------------------- */

/* Direct scatter: every input element times every tap lands at i * s - pb + k * d. */
static void convt_ref(const ox_tensor *x, const ox_tensor *w, const ox_tensor *b, int nsp,
                      const int64_t *s, const int64_t *d, const int64_t *pb, int64_t group,
                      ox_tensor *y) {
    int64_t N = x->dims[0], C = x->dims[1], M = y->dims[1], cg = C / group, mg = M / group;
    int64_t isz = 1, osz = 1, ksz = 1;
    for (int i = 0; i < nsp; i++)
        isz *= x->dims[i + 2], osz *= y->dims[i + 2], ksz *= w->dims[i + 2];
    double *acc = calloc((size_t)(N * M * osz) + 1, sizeof *acc);
    for (int64_t nn = 0; nn < N; nn++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t p = 0; p < isz; p++)
                for (int64_t m = 0; m < mg; m++)
                    for (int64_t kk = 0; kk < ksz; kk++) {
                        int64_t ip[3], kp[3], r = p, q = kk, off = 0;
                        bool in = true;
                        for (int i = nsp - 1; i >= 0; i--) {
                            ip[i] = r % x->dims[i + 2], r /= x->dims[i + 2];
                            kp[i] = q % w->dims[i + 2], q /= w->dims[i + 2];
                        }
                        for (int i = 0; i < nsp; i++) {
                            int64_t o = ip[i] * s[i] - pb[i] + kp[i] * d[i];
                            if (o < 0 || o >= y->dims[i + 2]) in = false;
                            off = off * y->dims[i + 2] + o;
                        }
                        if (!in) continue;
                        int64_t oc = c / cg * mg + m;
                        acc[(nn * M + oc) * osz + off] += ox_get_f64(x, (nn * C + c) * isz + p) *
                                                          ox_get_f64(w, (c * mg + m) * ksz + kk);
                    }
    for (int64_t i = 0; i < N * M * osz; i++)
        ox_set_f64(y, i, acc[i] + (b ? ox_get_f64(b, i / osz % M) : 0));
    free(acc);
}

static void test_convtranspose_random(void) {
    static const ox_dtype types[3] = {OX_FLOAT, OX_DOUBLE, OX_FLOAT16};
    for (int iter = 0; iter < 60; iter++) {
        ox_dtype dt = types[iter % 3];
        int nsp = 1 + iter % 3;
        int64_t group = irand(1, 2), cg = irand(1, 3), mg = irand(1, 3);
        int64_t xd[5] = {irand(1, 2), group * cg}, wd[5] = {group * cg, mg};
        int64_t s[3], d[3], pads[6], op[3], pb[3], yd[5] = {xd[0], group * mg};
        for (int i = 0; i < nsp; i++) {
            xd[i + 2] = irand(1, 4);
            wd[i + 2] = irand(1, 3);
            s[i] = irand(1, 3);
            d[i] = irand(1, 2);
            op[i] = irand(0, s[i] - 1);
            pads[i] = pb[i] = irand(0, 1);
            pads[i + nsp] = irand(0, 1);
            yd[i + 2] = s[i] * (xd[i + 2] - 1) + op[i] + (wd[i + 2] - 1) * d[i] + 1 - pads[i] -
                        pads[i + nsp];
            if (yd[i + 2] < 1) { /* no room for pads */
                yd[i + 2] += pads[i] + pads[i + nsp];
                pads[i] = pb[i] = pads[i + nsp] = 0;
            }
        }
        bool with_b = iter % 2;
        int64_t bd = group * mg;
        ox_tensor x = mk(dt, nsp + 2, xd), w = mk(dt, nsp + 2, wd), b = mk(dt, 1, &bd), y,
                  ref = mk(dt, nsp + 2, yd);
        fill(&x);
        fill(&w);
        fill(&b);
        struct attrs at = {0};
        attr_ints(&at, "strides", nsp, s);
        attr_ints(&at, "dilations", nsp, d);
        attr_ints(&at, "pads", 2 * nsp, pads);
        attr_ints(&at, "output_padding", nsp, op);
        attr_i(&at, "group", group);
        const ox_tensor *in[3] = {&x, &w, with_b ? &b : NULL};
        ox_status st = run("ConvTranspose", 11, &at, 3, in, &y);
        CHECK(!st, "iter %d: %s", iter, ox_errmsg());
        if (!st) {
            convt_ref(&x, &w, with_b ? &b : NULL, nsp, s, d, pb, group, &ref);
            bool shape_ok = y.rank == ref.rank;
            for (int i = 0; shape_ok && i < y.rank; i++) shape_ok = y.dims[i] == ref.dims[i];
            CHECK(shape_ok, "iter %d: output shape", iter);
            double tol = dt == OX_FLOAT16 ? 1e-2 : 1e-5;
            for (int64_t i = 0; shape_ok && i < ox_tensor_numel(&y); i++)
                if (!close_to(ox_get_f64(&y, i), ox_get_f64(&ref, i), tol)) {
                    CHECK(false, "iter %d (%s, %dD) [%lld]: %g vs %g", iter, ox_dtype_name(dt), nsp,
                          (long long)i, ox_get_f64(&y, i), ox_get_f64(&ref, i));
                    break;
                }
            ox_tensor_free_data(&y);
        }
        ox_tensor_free_data(&x);
        ox_tensor_free_data(&w);
        ox_tensor_free_data(&b);
        ox_tensor_free_data(&ref);
    }
}

/* auto_pad SAME_* gives in * stride; output_shape picks the extent; bad groups are errors. */
static void test_convtranspose_shapes(void) {
    int64_t xd[4] = {1, 2, 3, 5}, wd[4] = {2, 1, 3, 2}, s[2] = {2, 3};
    ox_tensor x = mk(OX_FLOAT, 4, xd), w = mk(OX_FLOAT, 4, wd), y;
    fill(&x);
    fill(&w);
    const ox_tensor *in[2] = {&x, &w};
    const char *modes[2] = {"SAME_UPPER", "SAME_LOWER"};
    for (int m = 0; m < 2; m++) {
        struct attrs at = {0};
        attr_s(&at, "auto_pad", modes[m]);
        attr_ints(&at, "strides", 2, s);
        ox_status st = run("ConvTranspose", 11, &at, 2, in, &y);
        CHECK(!st && y.dims[2] == 6 && y.dims[3] == 15 && y.dims[1] == 1, "%s: %s", modes[m],
              st ? ox_errmsg() : "shape");
        if (!st) ox_tensor_free_data(&y);
    }
    int64_t os[2] = {9, 17};
    struct attrs at = {0};
    attr_ints(&at, "output_shape", 2, os);
    attr_ints(&at, "strides", 2, s);
    ox_status st = run("ConvTranspose", 11, &at, 2, in, &y);
    CHECK(!st && y.dims[2] == 9 && y.dims[3] == 17, "output_shape: %s", st ? ox_errmsg() : "shape");
    if (!st) ox_tensor_free_data(&y);
    struct attrs bad = {0};
    attr_i(&bad, "group", 3);
    CHECK(run("ConvTranspose", 11, &bad, 2, in, &y) == OX_E_SHAPE, "group 3 of 2 channels");
    ox_tensor_free_data(&x);
    ox_tensor_free_data(&w);
}

/* ---- Col2Im and DeformConv ------------------------------------------------------------- */

/* Col2Im is ConvTranspose's second half: compare with a direct loop. */
static void test_col2im(void) {
    for (int iter = 0; iter < 20; iter++) {
        int nsp = 1 + iter % 3;
        int64_t img[3], blk[3], s[3], d[3], pads[6], nb[3], C = irand(1, 2), ks = 1, L = 1;
        for (int i = 0; i < nsp; i++) {
            blk[i] = irand(1, 3);
            d[i] = irand(1, 2);
            s[i] = irand(1, 2);
            pads[i] = irand(0, 1);
            pads[i + nsp] = irand(0, 1);
            img[i] = (blk[i] - 1) * d[i] + 1 + irand(0, 3);
            nb[i] = (img[i] + pads[i] + pads[i + nsp] - (blk[i] - 1) * d[i] - 1) / s[i] + 1;
            ks *= blk[i];
            L *= nb[i];
        }
        int64_t xd[3] = {2, C * ks, L};
        ox_tensor x = mk(OX_FLOAT, 3, xd), ish = mk_i64(nsp, img), bsh = mk_i64(nsp, blk), y;
        fill(&x);
        struct attrs at = {0};
        attr_ints(&at, "strides", nsp, s);
        attr_ints(&at, "dilations", nsp, d);
        attr_ints(&at, "pads", 2 * nsp, pads);
        const ox_tensor *in[3] = {&x, &ish, &bsh};
        bool asked = false;
        ox_status st = run_n("Col2Im", 18, &at, 3, in, 1, &y, &asked);
        CHECK(!st && asked, "iter %d: %s", iter, st ? ox_errmsg() : "did not ask for data");
        if (st) goto next;
        int64_t isz = 1;
        for (int i = 0; i < nsp; i++) isz *= img[i];
        double *ref = calloc((size_t)(2 * C * isz), sizeof *ref);
        for (int64_t n = 0; n < 2; n++)
            for (int64_t c = 0; c < C; c++)
                for (int64_t k = 0; k < ks; k++)
                    for (int64_t l = 0; l < L; l++) {
                        int64_t kr = k, lr = l, off = 0;
                        int64_t kp[3], lp[3];
                        bool in_img = true;
                        for (int i = nsp - 1; i >= 0; i--) {
                            kp[i] = kr % blk[i], kr /= blk[i];
                            lp[i] = lr % nb[i], lr /= nb[i];
                        }
                        for (int i = 0; i < nsp; i++) {
                            int64_t v = lp[i] * s[i] - pads[i] + kp[i] * d[i];
                            if (v < 0 || v >= img[i]) in_img = false;
                            off = off * img[i] + v;
                        }
                        if (in_img)
                            ref[(n * C + c) * isz + off] +=
                                ox_get_f64(&x, ((n * C + c) * ks + k) * L + l);
                    }
        for (int64_t i = 0; i < 2 * C * isz; i++)
            if (!close_to(ox_get_f64(&y, i), ref[i], 1e-5)) {
                CHECK(false, "iter %d [%lld]: %g vs %g", iter, (long long)i, ox_get_f64(&y, i),
                      ref[i]);
                break;
            }
        free(ref);
        ox_tensor_free_data(&y);
    next:
        ox_tensor_free_data(&x);
        ox_tensor_free_data(&ish);
        ox_tensor_free_data(&bsh);
    }
}

/* With zero offsets DeformConv is Conv (times the mask): compare with ConvTranspose's
 * adjoint written directly. */
static void test_deformconv_zero_offsets(void) {
    for (int iter = 0; iter < 12; iter++) {
        ox_dtype dt = iter % 2 ? OX_DOUBLE : OX_FLOAT;
        int64_t group = irand(1, 2), og = irand(1, 2), mg = irand(1, 2), C = 4, cg = C / group;
        int64_t k[2] = {irand(1, 3), irand(1, 3)}, s[2] = {irand(1, 2), irand(1, 2)};
        int64_t dl[2] = {irand(1, 2), 1}, pads[4] = {irand(0, 1), irand(0, 1), irand(0, 1), 0};
        int64_t H = 5, W = 6, oh, ow;
        oh = (H + pads[0] + pads[2] - (k[0] - 1) * dl[0] - 1) / s[0] + 1;
        ow = (W + pads[1] + pads[3] - (k[1] - 1) * dl[1] - 1) / s[1] + 1;
        int64_t xd[4] = {2, C, H, W}, wd[4] = {group * mg, cg, k[0], k[1]};
        int64_t od[4] = {2, og * k[0] * k[1] * 2, oh, ow}, md[4] = {2, og * k[0] * k[1], oh, ow};
        int64_t bd = group * mg;
        ox_tensor x = mk(dt, 4, xd), w = mk(dt, 4, wd), off = mk(dt, 4, od), mask = mk(dt, 4, md),
                  b = mk(dt, 1, &bd), y;
        fill(&x);
        fill(&w);
        fill(&b);
        for (int64_t i = 0; i < ox_tensor_numel(&mask); i++) ox_set_f64(&mask, i, 0.5);
        struct attrs at = {0};
        attr_ints(&at, "strides", 2, s);
        attr_ints(&at, "dilations", 2, dl);
        attr_ints(&at, "pads", 4, pads);
        attr_i(&at, "group", group);
        attr_i(&at, "offset_group", og);
        const ox_tensor *in[5] = {&x, &w, &off, &b, &mask};
        ox_status st = run("DeformConv", 19, &at, 5, in, &y);
        CHECK(!st, "iter %d: %s", iter, ox_errmsg());
        if (!st) {
            CHECK(y.dims[2] == oh && y.dims[3] == ow, "iter %d: shape", iter);
            for (int64_t n = 0; n < 2; n++)
                for (int64_t m = 0; m < group * mg; m++)
                    for (int64_t i = 0; i < oh; i++)
                        for (int64_t j = 0; j < ow; j++) {
                            double acc = ox_get_f64(&b, m);
                            int64_t gr = m / mg;
                            for (int64_t c = 0; c < cg; c++)
                                for (int64_t a = 0; a < k[0]; a++)
                                    for (int64_t e = 0; e < k[1]; e++) {
                                        int64_t hi = i * s[0] - pads[0] + a * dl[0];
                                        int64_t wi = j * s[1] - pads[1] + e * dl[1];
                                        if (hi < 0 || hi >= H || wi < 0 || wi >= W) continue;
                                        acc += 0.5 *
                                               ox_get_f64(&x, ((n * C + gr * cg + c) * H + hi) * W +
                                                                  wi) *
                                               ox_get_f64(&w, ((m * cg + c) * k[0] + a) * k[1] + e);
                                    }
                            double got = ox_get_f64(&y, ((n * group * mg + m) * oh + i) * ow + j);
                            if (!close_to(got, acc, 1e-5)) {
                                CHECK(false, "iter %d: %g vs %g", iter, got, acc);
                                goto done;
                            }
                        }
        done:
            ox_tensor_free_data(&y);
        }
        ox_tensor_free_data(&x);
        ox_tensor_free_data(&w);
        ox_tensor_free_data(&off);
        ox_tensor_free_data(&mask);
        ox_tensor_free_data(&b);
    }
}

/* ---- GridSample ------------------------------------------------------------------------ */

/* An identity grid with align_corners=1 samples the pixels themselves, in every mode. */
static void test_gridsample_identity(void) {
    const char *modes[3] = {"linear", "nearest", "cubic"};
    for (int nsp = 2; nsp <= 3; nsp++)
        for (int m = 0; m < 3; m++) {
            int64_t xd[5] = {1, 2, 3, 4, 5}, gd[5] = {1, 3, 4, 5, 5};
            gd[nsp + 1] = nsp;
            ox_tensor x = mk(OX_FLOAT, nsp + 2, xd), g = mk(OX_FLOAT, nsp + 2, gd), y;
            fill(&x);
            int64_t P = 1;
            for (int i = 0; i < nsp; i++) P *= xd[i + 2];
            for (int64_t p = 0; p < P; p++) {
                int64_t r = p;
                for (int i = nsp - 1; i >= 0; i--) {
                    int64_t v = r % xd[i + 2];
                    r /= xd[i + 2];
                    /* grid's last dim lists x (the last spatial dim) first */
                    ox_set_f64(&g, p * nsp + (nsp - 1 - i),
                               -1 + 2.0 * (double)v / (double)(xd[i + 2] - 1));
                }
            }
            struct attrs at = {0};
            attr_i(&at, "align_corners", 1);
            attr_s(&at, "mode", modes[m]);
            attr_s(&at, "padding_mode", m == 2 ? "border" : "zeros");
            const ox_tensor *in[2] = {&x, &g};
            ox_status st = run("GridSample", 20, &at, 2, in, &y);
            CHECK(!st, "%dD %s: %s", nsp, modes[m], ox_errmsg());
            if (!st) {
                for (int64_t i = 0; i < ox_tensor_numel(&x); i++)
                    if (!close_to(ox_get_f64(&y, i), ox_get_f64(&x, i), 1e-5)) {
                        CHECK(false, "%dD %s [%lld]: %g vs %g", nsp, modes[m], (long long)i,
                              ox_get_f64(&y, i), ox_get_f64(&x, i));
                        break;
                    }
                ox_tensor_free_data(&y);
            }
            ox_tensor_free_data(&x);
            ox_tensor_free_data(&g);
        }
    /* mode names follow the opset: 16 says bilinear, 20 says linear */
    int64_t xd[4] = {1, 1, 2, 2}, gd[4] = {1, 1, 1, 2};
    ox_tensor x = mk(OX_FLOAT, 4, xd), g = mk(OX_FLOAT, 4, gd), y;
    const ox_tensor *in[2] = {&x, &g};
    struct attrs a16 = {0}, a20 = {0};
    attr_s(&a16, "mode", "linear");
    attr_s(&a20, "mode", "bilinear");
    CHECK(run("GridSample", 16, &a16, 2, in, &y) == OX_E_INVALID, "opset 16 takes 'linear'");
    CHECK(run("GridSample", 20, &a20, 2, in, &y) == OX_E_INVALID, "opset 20 takes 'bilinear'");
    /* a NaN or huge coordinate must not crash */
    ox_set_f64(&g, 0, NAN);
    ox_set_f64(&g, 1, 1e30);
    const char *pads[3] = {"zeros", "border", "reflection"};
    for (int p = 0; p < 3; p++) {
        struct attrs at = {0};
        attr_s(&at, "padding_mode", pads[p]);
        ox_status st = run("GridSample", 16, &at, 2, in, &y);
        CHECK(!st, "NaN grid, %s: %s", pads[p], ox_errmsg());
        if (!st) ox_tensor_free_data(&y);
    }
    ox_tensor_free_data(&x);
    ox_tensor_free_data(&g);
}

/* ---- data-dependent shapes ------------------------------------------------------------- */

static void test_unique(void) {
    /* strings, first-occurrence order */
    const char *words[6] = {"b", "a", "b", "c", "a", "b"};
    int64_t six = 6;
    ox_tensor x = mk(OX_STRING, 1, &six), out[4];
    for (int i = 0; i < 6; i++) {
        free(((char **)x.data)[i]);
        ((const char **)x.data)[i] = words[i];
    }
    for (int sorted = 0; sorted < 2; sorted++) {
        struct attrs at = {0};
        attr_i(&at, "sorted", sorted);
        const ox_tensor *in[1] = {&x};
        bool asked = false;
        ox_status st = run_n("Unique", 11, &at, 1, in, 4, out, &asked);
        CHECK(!st && asked && out[0].dims[0] == 3, "strings sorted=%d: %s", sorted,
              st ? ox_errmsg() : "shape");
        if (st) continue;
        const char *want = sorted ? "abc" : "bac";
        int64_t first_s[3] = {1, 0, 3}, first_u[3] = {0, 1, 3};
        int64_t cnt_s[3] = {2, 3, 1}, cnt_u[3] = {3, 2, 1};
        for (int u = 0; u < 3; u++) {
            CHECK(((char **)out[0].data)[u][0] == want[u], "sorted=%d Y[%d]", sorted, u);
            CHECK(((int64_t *)out[1].data)[u] == (sorted ? first_s : first_u)[u],
                  "sorted=%d indices[%d]", sorted, u);
            CHECK(((int64_t *)out[3].data)[u] == (sorted ? cnt_s : cnt_u)[u],
                  "sorted=%d counts[%d]", sorted, u);
        }
        for (int i = 0; i < 6; i++) {
            int64_t slot = ((int64_t *)out[2].data)[i];
            CHECK(((char **)out[0].data)[slot][0] == words[i][0], "sorted=%d inverse[%d]", sorted,
                  i);
        }
        for (int k = 0; k < 4; k++) free_out(&out[k]);
    }
    free(x.data);
    /* empty input: no unique values */
    int64_t zero = 0;
    ox_tensor e = mk(OX_FLOAT, 1, &zero);
    const ox_tensor *ein[1] = {&e};
    ox_status st = run_n("Unique", 11, NULL, 1, ein, 4, out, NULL);
    CHECK(!st && out[0].dims[0] == 0 && out[2].dims[0] == 0, "empty: %s",
          st ? ox_errmsg() : "shape");
    if (!st)
        for (int k = 0; k < 4; k++) ox_tensor_free_data(&out[k]);
    ox_tensor_free_data(&e);
    /* rows along a negative axis */
    int64_t d2[2] = {2, 3};
    ox_tensor m = mk(OX_INT32, 2, d2);
    int32_t vals[6] = {1, 0, 1, 2, 5, 2}; /* columns (1,2) (0,5) (1,2) */
    memcpy(m.data, vals, sizeof vals);
    struct attrs at = {0};
    attr_i(&at, "axis", -1);
    const ox_tensor *min[1] = {&m};
    st = run_n("Unique", 11, &at, 1, min, 4, out, NULL);
    CHECK(!st && out[0].rank == 2 && out[0].dims[0] == 2 && out[0].dims[1] == 2, "axis -1: %s",
          st ? ox_errmsg() : "shape");
    if (!st) {
        int32_t *y = out[0].data;
        CHECK(y[0] == 0 && y[1] == 1 && y[2] == 5 && y[3] == 2, "axis -1: values");
        CHECK(((int64_t *)out[3].data)[1] == 2, "axis -1: counts");
        for (int k = 0; k < 4; k++) ox_tensor_free_data(&out[k]);
    }
    ox_tensor_free_data(&m);
}

static void test_nms(void) {
    int64_t bd[3] = {1, 3, 4}, sd[3] = {1, 1, 3};
    ox_tensor boxes = mk(OX_FLOAT, 3, bd), scores = mk(OX_FLOAT, 3, sd), y;
    float bv[12] = {0, 0, 1, 1, 0, 0.1f, 1, 1.1f, 0, 5, 1, 6};
    float sv[3] = {0.9f, 0.95f, 0.1f};
    memcpy(boxes.data, bv, sizeof bv);
    memcpy(scores.data, sv, sizeof sv);
    int64_t mo = 10;
    ox_tensor maxo = mk_i64(1, &mo), iou = mk(OX_FLOAT, 1, (int64_t[]){1});
    ((float *)iou.data)[0] = 0.5f;
    const ox_tensor *in[4] = {&boxes, &scores, &maxo, &iou};
    bool asked = false;
    ox_status st = run_n("NonMaxSuppression", 11, NULL, 4, in, 1, &y, &asked);
    CHECK(!st && asked && y.dims[0] == 2 && y.dims[1] == 3, "nms: %s", st ? ox_errmsg() : "shape");
    if (!st) {
        int64_t *v = y.data;
        CHECK(v[2] == 1 && v[5] == 2, "nms picks box 1 then box 2, got %lld %lld", (long long)v[2],
              (long long)v[5]);
        ox_tensor_free_data(&y);
    }
    /* no max_output_boxes_per_class: nothing selected */
    st = run_n("NonMaxSuppression", 11, NULL, 2, in, 1, &y, NULL);
    CHECK(!st && y.dims[0] == 0 && y.dims[1] == 3, "nms default max: %s",
          st ? ox_errmsg() : "shape");
    if (!st) ox_tensor_free_data(&y);
    ox_tensor_free_data(&boxes);
    ox_tensor_free_data(&scores);
    ox_tensor_free_data(&maxo);
    ox_tensor_free_data(&iou);
}

static void test_center_crop_pad(void) {
    /* [5, 2] -> [2, 5]: crop 5 to 2 (start 1), pad 2 to 5 (start 1) */
    int64_t xd[2] = {5, 2}, want[2] = {2, 5};
    ox_tensor x = mk(OX_FLOAT, 2, xd), shape = mk_i64(2, want), y;
    for (int i = 0; i < 10; i++) ((float *)x.data)[i] = (float)i;
    const ox_tensor *in[2] = {&x, &shape};
    ox_status st = run("CenterCropPad", 18, NULL, 2, in, &y);
    CHECK(!st && y.dims[0] == 2 && y.dims[1] == 5, "crop/pad: %s", st ? ox_errmsg() : "shape");
    if (!st) {
        float exp[10] = {0, 2, 3, 0, 0, 0, 4, 5, 0, 0};
        for (int i = 0; i < 10; i++)
            CHECK(((float *)y.data)[i] == exp[i], "crop/pad [%d]: %g vs %g", i,
                  ((float *)y.data)[i], exp[i]);
        ox_tensor_free_data(&y);
    }
    ox_tensor_free_data(&shape);
    /* to zero along an axis */
    int64_t z[1] = {0};
    struct attrs at = {0};
    int64_t ax[1] = {-1};
    attr_ints(&at, "axes", 1, ax);
    shape = mk_i64(1, z);
    st = run("CenterCropPad", 18, &at, 2, in, &y);
    CHECK(!st && y.dims[0] == 5 && y.dims[1] == 0, "crop to empty: %s", st ? ox_errmsg() : "shape");
    if (!st) ox_tensor_free_data(&y);
    ox_tensor_free_data(&shape);
    ox_tensor_free_data(&x);
}

/* ---- MatMulInteger, BitCast, CumProd, MaxUnpool, normalizations ------------------------- */

static void test_matmulinteger(void) {
    /* A [3] (1-D), B [2, 3, 4] (batched), per-column b zero point */
    int64_t ad[1] = {3}, bd[3] = {2, 3, 4}, zd[1] = {4};
    ox_tensor a = mk(OX_UINT8, 1, ad), b = mk(OX_INT8, 3, bd), za = mk(OX_UINT8, 0, NULL),
              zb = mk(OX_INT8, 1, zd), y;
    for (int i = 0; i < 3; i++) ((uint8_t *)a.data)[i] = (uint8_t)(200 + i);
    for (int i = 0; i < 24; i++) ((int8_t *)b.data)[i] = (int8_t)(i * 11 - 128);
    ((uint8_t *)za.data)[0] = 100;
    for (int i = 0; i < 4; i++) ((int8_t *)zb.data)[i] = (int8_t)(i - 2);
    const ox_tensor *in[4] = {&a, &b, &za, &zb};
    ox_status st = run("MatMulInteger", 10, NULL, 4, in, &y);
    CHECK(!st && y.rank == 2 && y.dims[0] == 2 && y.dims[1] == 4 && y.dtype == OX_INT32,
          "shape: %s", st ? ox_errmsg() : "shape");
    if (!st) {
        for (int q = 0; q < 2; q++)
            for (int j = 0; j < 4; j++) {
                int32_t acc = 0;
                for (int k = 0; k < 3; k++)
                    acc += (200 + k - 100) * (((int8_t *)b.data)[(q * 3 + k) * 4 + j] - (j - 2));
                CHECK(((int32_t *)y.data)[q * 4 + j] == acc, "[%d,%d]: %d vs %d", q, j,
                      ((int32_t *)y.data)[q * 4 + j], acc);
            }
        ox_tensor_free_data(&y);
    }
    ox_tensor_free_data(&a);
    ox_tensor_free_data(&b);
    ox_tensor_free_data(&za);
    ox_tensor_free_data(&zb);
}

static void test_bitcast(void) {
    int64_t two = 2;
    ox_tensor s = mk(OX_INT4, 1, &two), y;
    ((int8_t *)s.data)[0] = -1;
    ((int8_t *)s.data)[1] = 7;
    struct attrs at = {0};
    attr_i(&at, "to", OX_UINT4);
    const ox_tensor *in[1] = {&s};
    ox_status st = run("BitCast", 26, &at, 1, in, &y);
    CHECK(!st && ((uint8_t *)y.data)[0] == 15 && ((uint8_t *)y.data)[1] == 7, "int4 -> uint4");
    if (!st) {
        struct attrs back = {0};
        attr_i(&back, "to", OX_INT4);
        ox_tensor z;
        const ox_tensor *in2[1] = {&y};
        st = run("BitCast", 26, &back, 1, in2, &z);
        CHECK(!st && ((int8_t *)z.data)[0] == -1 && ((int8_t *)z.data)[1] == 7, "uint4 -> int4");
        if (!st) ox_tensor_free_data(&z);
        ox_tensor_free_data(&y);
    }
    struct attrs wide = {0};
    attr_i(&wide, "to", OX_INT16);
    CHECK(run("BitCast", 26, &wide, 1, in, &y) == OX_E_SHAPE, "int4 -> int16 is an error");
    struct attrs str = {0};
    attr_i(&str, "to", OX_STRING);
    CHECK(run("BitCast", 26, &str, 1, in, &y) == OX_E_INVALID, "to string is an error");
    ox_tensor_free_data(&s);
}

static void test_cumprod(void) {
    int64_t d[2] = {2, 3};
    ox_tensor x = mk(OX_UINT64, 2, d), axis = mk(OX_INT32, 0, NULL), y;
    uint64_t v[6] = {UINT64_MAX, 2, 3, 4, 5, 6};
    memcpy(x.data, v, sizeof v);
    ((int32_t *)axis.data)[0] = -1;
    struct attrs at = {0};
    attr_i(&at, "exclusive", 1);
    attr_i(&at, "reverse", 1);
    const ox_tensor *in[2] = {&x, &axis};
    ox_status st = run("CumProd", 26, &at, 2, in, &y);
    CHECK(!st, "cumprod: %s", ox_errmsg());
    if (!st) {
        uint64_t *r = y.data;
        /* reverse exclusive along the last axis: [2*3, 3, 1], [5*6, 6, 1] */
        CHECK(r[0] == 6 && r[1] == 3 && r[2] == 1 && r[3] == 30 && r[4] == 6 && r[5] == 1,
              "exclusive reverse");
        ox_tensor_free_data(&y);
    }
    struct attrs inc = {0};
    st = run("CumProd", 26, &inc, 2, in, &y);
    CHECK(!st && ((uint64_t *)y.data)[1] == UINT64_MAX * 2, "uint64 wraps");
    if (!st) ox_tensor_free_data(&y);
    ((int32_t *)axis.data)[0] = 2;
    CHECK(run("CumProd", 26, &inc, 2, in, &y) == OX_E_INVALID, "axis out of range");
    ox_tensor_free_data(&x);
    ox_tensor_free_data(&axis);
}

static void test_maxunpool_bad_index(void) {
    int64_t d[4] = {1, 1, 1, 1}, k[2] = {2, 2}, s[2] = {2, 2};
    ox_tensor x = mk(OX_FLOAT, 4, d), ind = mk(OX_INT64, 4, d), y;
    ((int64_t *)ind.data)[0] = 4; /* the output has 4 elements: 0..3 */
    struct attrs at = {0};
    attr_ints(&at, "kernel_shape", 2, k);
    attr_ints(&at, "strides", 2, s);
    const ox_tensor *in[2] = {&x, &ind};
    CHECK(run("MaxUnpool", 11, &at, 2, in, &y) == OX_E_INVALID, "index past the end");
    ((int64_t *)ind.data)[0] = 3;
    ((float *)x.data)[0] = 7;
    ox_status st = run("MaxUnpool", 11, &at, 2, in, &y);
    CHECK(!st && ((float *)y.data)[3] == 7 && ((float *)y.data)[0] == 0, "unpool: %s",
          st ? ox_errmsg() : "values");
    if (!st) ox_tensor_free_data(&y);
    ox_tensor_free_data(&x);
    ox_tensor_free_data(&ind);
}

/* RoiAlign with a sampling_ratio of 130 million (fuzz_e2e: a model that ran for hours on a
 * few outputs) is refused with what the limit is; 256, the largest taken, still runs and
 * averages a constant map to that constant. */
static void test_roialign_huge_ratio(void) {
    int64_t xd[4] = {1, 1, 4, 4}, rd[2] = {1, 4};
    ox_tensor x = mk(OX_FLOAT, 4, xd), rois = mk(OX_FLOAT, 2, rd), bi = mk_i64(1, &(int64_t){0});
    float r[4] = {0, 0, 3, 3};
    memcpy(rois.data, r, sizeof r);
    for (int i = 0; i < 16; i++) ((float *)x.data)[i] = 2.5f;
    for (int k = 0; k < 2; k++) {
        struct attrs at = {0};
        attr_i(&at, "sampling_ratio", k ? 256 : 130842132);
        const ox_tensor *in[3] = {&x, &rois, &bi};
        ox_tensor y;
        ox_status st = run("RoiAlign", 16, &at, 3, in, &y);
        if (!k) {
            CHECK(st == OX_E_UNSUPPORTED && strstr(ox_errmsg(), "sampling_ratio 130842132") &&
                      strstr(ox_errmsg(), "at most 256"),
                  "RoiAlign sampling_ratio 130842132: %s (%s)", ox_status_name(st), ox_errmsg());
        } else {
            CHECK(!st && ox_tensor_numel(&y) == 1 && fabsf(((float *)y.data)[0] - 2.5f) < 1e-5f,
                  "RoiAlign sampling_ratio 256 on a constant map: %s", st ? ox_errmsg() : "value");
        }
        if (!st) ox_tensor_free_data(&y);
    }
    ox_tensor_free_data(&x);
    ox_tensor_free_data(&rois);
    ox_tensor_free_data(&bi);
}

/* RoiAlign over an empty feature map (H 0): every sample is off the map and weighs nothing,
 * so the output is zeros and the map is never read (fuzz_e2e found a read past it). */
static void test_roialign_empty_map(void) {
    int64_t xd[4] = {1, 2, 0, 3}, rd[2] = {1, 4};
    ox_tensor x = mk(OX_FLOAT, 4, xd), rois = mk(OX_FLOAT, 2, rd), bi = mk_i64(1, &(int64_t){0});
    float r[4] = {0, 0, 2, 2};
    memcpy(rois.data, r, sizeof r);
    for (int max = 0; max < 2; max++) {
        struct attrs at = {0};
        attr_i(&at, "output_height", 2);
        attr_i(&at, "output_width", 2);
        attr_i(&at, "sampling_ratio", 2);
        attr_s(&at, "mode", max ? "max" : "avg");
        const ox_tensor *in[3] = {&x, &rois, &bi};
        ox_tensor y;
        ox_status st = run("RoiAlign", 16, &at, 3, in, &y);
        CHECK(!st, "RoiAlign on an empty map (%s): %s", max ? "max" : "avg", ox_errmsg());
        if (st) continue;
        bool zeros = ox_tensor_numel(&y) == 8;
        for (int64_t i = 0; i < ox_tensor_numel(&y); i++) zeros &= ((float *)y.data)[i] == 0;
        CHECK(zeros, "RoiAlign on an empty map (%s): 8 zeros", max ? "max" : "avg");
        ox_tensor_free_data(&y);
    }
    ox_tensor_free_data(&x);
    ox_tensor_free_data(&rois);
    ox_tensor_free_data(&bi);
}

/* GroupNormalization 18 takes per-group scale, 21 per-channel; MVN with negative axes. */
static void test_normalizations(void) {
    int64_t xd[3] = {1, 4, 2}, g2 = 2, c4 = 4;
    ox_tensor x = mk(OX_FLOAT, 3, xd), s2 = mk(OX_FLOAT, 1, &g2), b2 = mk(OX_FLOAT, 1, &g2),
              s4 = mk(OX_FLOAT, 1, &c4), b4 = mk(OX_FLOAT, 1, &c4), y18, y21;
    fill(&x);
    for (int i = 0; i < 2; i++)
        ((float *)s2.data)[i] = (float)(i + 1), ((float *)b2.data)[i] = (float)i;
    for (int i = 0; i < 4; i++)
        ((float *)s4.data)[i] = (float)(i / 2 + 1), ((float *)b4.data)[i] = (float)(i / 2);
    struct attrs at = {0};
    attr_i(&at, "num_groups", 2);
    const ox_tensor *i18[3] = {&x, &s2, &b2}, *i21[3] = {&x, &s4, &b4};
    ox_status s1 = run("GroupNormalization", 18, &at, 3, i18, &y18);
    ox_status s2_ = run("GroupNormalization", 21, &at, 3, i21, &y21);
    CHECK(!s1 && !s2_, "groupnorm: %s", ox_errmsg());
    if (!s1 && !s2_) {
        for (int i = 0; i < 8; i++)
            CHECK(close_to(ox_get_f64(&y18, i), ox_get_f64(&y21, i), 1e-6), "18 vs 21 [%d]", i);
        ox_tensor_free_data(&y18);
        ox_tensor_free_data(&y21);
    }
    CHECK(run("GroupNormalization", 21, &at, 3, i18, &y18) == OX_E_SHAPE,
          "opset 21 wants per-channel scale");
    int64_t axes[2] = {-1, 0};
    struct attrs ma = {0};
    attr_ints(&ma, "axes", 2, axes);
    const ox_tensor *mi[1] = {&x};
    ox_tensor y;
    ox_status st = run("MeanVarianceNormalization", 13, &ma, 1, mi, &y);
    CHECK(!st, "mvn: %s", ox_errmsg());
    if (!st) {
        for (int c = 0; c < 4; c++) {
            double a = ox_get_f64(&y, c * 2), b = ox_get_f64(&y, c * 2 + 1);
            bool same = ox_get_f64(&x, c * 2) == ox_get_f64(&x, c * 2 + 1);
            CHECK(close_to(a + b, 0, 1e-6) && (same || close_to(fabs(a), 1, 1e-5)),
                  "mvn channel %d: %g %g", c, a, b);
        }
        ox_tensor_free_data(&y);
    }
    ox_tensor_free_data(&x);
    ox_tensor_free_data(&s2);
    ox_tensor_free_data(&b2);
    ox_tensor_free_data(&s4);
    ox_tensor_free_data(&b4);
}

int main(int argc, char **argv) {
    (void)argc;
    (void)argv;
    srand(12345);
    test_convtranspose_random();
    test_convtranspose_shapes();
    test_col2im();
    test_deformconv_zero_offsets();
    test_gridsample_identity();
    test_unique();
    test_nms();
    test_center_crop_pad();
    test_matmulinteger();
    test_bitcast();
    test_cumprod();
    test_maxunpool_bad_index();
    test_normalizations();
    test_roialign_empty_map();
    test_roialign_huge_ratio();
    return harness_finish();
}
