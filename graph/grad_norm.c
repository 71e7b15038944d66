/* Gradient rules: normalizations (BatchNormalization, LayerNormalization,
 * InstanceNormalization, GroupNormalization, LpNormalization, MeanVarianceNormalization,
 * RMSNormalization, LRN), Softmax and LogSoftmax (Hardmax: none), the
 * losses SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss, Dropout and Einsum
 * (graph/autograd.h says the contract).
 *
 * The normalizations share one backward: with xhat = (x - mean) * inv over some axes,
 * inv = 1 / sqrt(var + eps) and dxhat the gradient reaching xhat,
 *     dx = inv * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)).
 * Statistics are recomputed from x (exact, and independent of optional outputs). */
#include "graph/autograd.h"

#include "kernels/op.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers --------------------------------------------------------------------------- */

/* A one-input elementwise op. */
static int unary(struct ox_ad *ad, const char *op, int x) {
    int r = OX_AD(ad, op, x);
    ox_ad_info_as(ad, r, x, OX_UNDEFINED);
    return r;
}

/* The axes of [N, C, ...] that per-channel statistics run over: the spatial ones {2, ...},
 * after 0 (N) when with_batch. Returns their count. */
static int stat_axes(int rank, bool with_batch, int64_t *axes) {
    int n = 0;
    if (with_batch) axes[n++] = 0;
    for (int k = 2; k < rank; k++) axes[n++] = k;
    return n;
}

/* A per-channel [C] value as [C, 1, ...] (rank - 1 dims), to broadcast against [N, C, ...]. */
static int per_channel(struct ox_ad *ad, int p, int rank) {
    if (rank <= 2) return p;
    int64_t axes[OX_MAX_RANK];
    for (int k = 1; k < rank - 1; k++) axes[k - 1] = k;
    return ox_ad_unsqueeze(ad, p, rank - 2, axes);
}

/* The number of elements of x over `axes`, as a scalar of x's element type. */
static int count_of(struct ox_ad *ad, int x, int n_axes, const int64_t *axes) {
    double c = 1;
    bool known = true;
    for (int i = 0; i < n_axes; i++) {
        int64_t d = ox_ad_dim(ad, x, (int)axes[i]);
        if (d < 0)
            known = false;
        else
            c *= (double)d;
    }
    if (known) return ox_ad_scalar_like(ad, c, x);
    int s = ox_ad_shape(ad, x);
    int sel = OX_AD(ad, "Gather", s, ox_ad_ints(ad, n_axes, axes));
    int p = ox_ad_reduce(ad, "ReduceProd", sel, 0, NULL, false);
    ox_ad_set_info(ad, p, OX_INT64, 0, NULL);
    return ox_ad_cast_like(ad, p, x);
}

/* ---- normalization statistics ---------------------------------------------------------- */

struct nstats {
    int d;    /* x - mean */
    int inv;  /* 1 / sqrt(var + eps), kept dims */
    int xhat; /* d * inv */
};

static void norm_stats(struct ox_ad *ad, int x, int n_axes, const int64_t *axes, double eps,
                       struct nstats *s) {
    int m = ox_ad_reduce(ad, "ReduceMean", x, n_axes, axes, true);
    s->d = ox_ad_sub(ad, x, m);
    int var = ox_ad_reduce(ad, "ReduceMean", ox_ad_mul(ad, s->d, s->d), n_axes, axes, true);
    int ve = ox_ad_add(ad, var, ox_ad_scalar_like(ad, eps, x));
    s->inv = unary(ad, "Reciprocal", unary(ad, "Sqrt", ve));
    s->xhat = ox_ad_mul(ad, s->d, s->inv);
}

/* dx = inv * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)) */
static int norm_backward(struct ox_ad *ad, const struct nstats *s, int dxhat, int n_axes,
                         const int64_t *axes) {
    int m1 = ox_ad_reduce(ad, "ReduceMean", dxhat, n_axes, axes, true);
    int m2 = ox_ad_reduce(ad, "ReduceMean", ox_ad_mul(ad, dxhat, s->xhat), n_axes, axes, true);
    int c = ox_ad_sub(ad, ox_ad_sub(ad, dxhat, m1), ox_ad_mul(ad, s->xhat, m2));
    return ox_ad_mul(ad, s->inv, c);
}

/* ---- BatchNormalization ---------------------------------------------------------------- */

/* Inference: y = (x - mean) * inv * scale + B with inv = 1 / sqrt(var + eps), per channel.
 *   dx = gy * scale * inv          dscale = sum(gy * xhat)       dB = sum(gy)
 *   dmean = -sum(gy) * scale * inv dvar = -scale * inv^2 * sum(gy * xhat) / 2
 * Training (opset 14+, training_mode=1): batch statistics, the full backward; the running
 * statistics outputs rm = mean * momentum + bmean * (1 - momentum) (and rv likewise with the
 * batch's population variance) pass their gradients on to input_mean, input_var and x. */
ox_status ox_grad_batchnorm(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    int x = n->inputs[0], scale = n->inputs[1], mean = n->inputs[3], var = n->inputs[4];
    int r = ox_ad_rank(ad, x);
    if (r < 2) return ox_ad_fail(ad, n, OX_E_UNSUPPORTED, "BatchNormalization needs X's rank");
    double eps = ox_attr_float(n, "epsilon", 1e-5f);
    bool train = n->opset >= 14 && ox_attr_int(n, "training_mode", 0);
    int64_t axes[OX_MAX_RANK];
    int n_axes = stat_axes(r, true, axes);
    int g = gy[0];
    if (!train) {
        if (g < 0) return OX_OK;
        int inv = unary(ad, "Reciprocal",
                        unary(ad, "Sqrt", ox_ad_add(ad, var, ox_ad_scalar_like(ad, eps, var))));
        int sinv = ox_ad_mul(ad, scale, inv);
        if (ox_ad_wants(ad, n, 0)) gx[0] = ox_ad_mul(ad, g, per_channel(ad, sinv, r));
        int gsum = -1, gxhat = -1;
        if (ox_ad_wants(ad, n, 2) || ox_ad_wants(ad, n, 3))
            gsum = ox_ad_reduce(ad, "ReduceSum", g, n_axes, axes, false);
        if (ox_ad_wants(ad, n, 1) || ox_ad_wants(ad, n, 4)) {
            int d = ox_ad_sub(ad, x, per_channel(ad, mean, r));
            int xhat = ox_ad_mul(ad, d, per_channel(ad, inv, r));
            gxhat = ox_ad_reduce(ad, "ReduceSum", ox_ad_mul(ad, g, xhat), n_axes, axes, false);
        }
        if (ox_ad_wants(ad, n, 1)) gx[1] = gxhat;
        if (ox_ad_wants(ad, n, 2)) gx[2] = gsum;
        if (ox_ad_wants(ad, n, 3)) gx[3] = ox_ad_neg(ad, ox_ad_mul(ad, gsum, sinv));
        if (ox_ad_wants(ad, n, 4)) {
            int c = ox_ad_mul(ad, ox_ad_mul(ad, sinv, inv), ox_ad_scalar_like(ad, -0.5, var));
            gx[4] = ox_ad_mul(ad, gxhat, c);
        }
        return OX_OK;
    }
    double mom = ox_attr_float(n, "momentum", 0.9f);
    int g_rm = n->n_outputs > 1 && n->outputs[1] >= 0 ? gy[1] : -1;
    int g_rv = n->n_outputs > 2 && n->outputs[2] >= 0 ? gy[2] : -1;
    struct nstats s;
    norm_stats(ad, x, n_axes, axes, eps, &s);
    if (g >= 0) {
        if (ox_ad_wants(ad, n, 0))
            gx[0] =
                norm_backward(ad, &s, ox_ad_mul(ad, g, per_channel(ad, scale, r)), n_axes, axes);
        if (ox_ad_wants(ad, n, 1))
            gx[1] = ox_ad_reduce(ad, "ReduceSum", ox_ad_mul(ad, g, s.xhat), n_axes, axes, false);
        if (ox_ad_wants(ad, n, 2)) gx[2] = ox_ad_reduce(ad, "ReduceSum", g, n_axes, axes, false);
    }
    /* running statistics */
    if (g_rm >= 0 && ox_ad_wants(ad, n, 3))
        gx[3] = ox_ad_mul(ad, g_rm, ox_ad_scalar_like(ad, mom, g_rm));
    if (g_rv >= 0 && ox_ad_wants(ad, n, 4))
        gx[4] = ox_ad_mul(ad, g_rv, ox_ad_scalar_like(ad, mom, g_rv));
    if ((g_rm >= 0 || g_rv >= 0) && ox_ad_wants(ad, n, 0)) {
        /* d(batch mean)/dx = 1/M, d(batch var)/dx = 2 (x - mean) / M */
        int c = -1;
        if (g_rm >= 0) c = per_channel(ad, ox_ad_cast_like(ad, g_rm, x), r);
        if (g_rv >= 0) {
            int t = ox_ad_mul(ad, per_channel(ad, ox_ad_cast_like(ad, g_rv, x), r),
                              ox_ad_mul(ad, s.d, ox_ad_scalar_like(ad, 2.0, x)));
            c = c >= 0 ? ox_ad_add(ad, c, t) : t;
        }
        int k = ox_ad_div(ad, ox_ad_scalar_like(ad, 1.0 - mom, x), count_of(ad, x, n_axes, axes));
        int d = ox_ad_mul(ad, c, k);
        if (g_rv < 0) d = ox_ad_expand_like(ad, d, x);
        gx[0] = gx[0] >= 0 ? ox_ad_add(ad, gx[0], d) : d;
    }
    return OX_OK;
}

/* ---- LayerNormalization, InstanceNormalization, GroupNormalization -------------------- */

/* y = xhat * Scale + B over the axes from `axis` on; Scale and B broadcast to those dims.
 * The optional outputs Mean and InvStdDev (kept dims) pass their gradients on to x:
 * dmean/dx = 1/D, dinv/dx = -inv^3 (x - mean) / D. */
ox_status ox_grad_layernorm(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    int x = n->inputs[0], scale = n->inputs[1];
    int bias = n->n_inputs > 2 ? n->inputs[2] : -1;
    int r = ox_ad_rank(ad, x);
    if (r < 1) return ox_ad_fail(ad, n, OX_E_UNSUPPORTED, "LayerNormalization needs X's rank");
    int64_t axis = ox_attr_int(n, "axis", -1);
    if (axis < 0) axis += r;
    if (axis < 0 || axis >= r)
        return ox_ad_fail(ad, n, OX_E_INVALID, "axis %lld for rank %d",
                          (long long)ox_attr_int(n, "axis", -1), r);
    int64_t axes[OX_MAX_RANK];
    int n_axes = 0;
    for (int64_t k = axis; k < r; k++) axes[n_axes++] = k;
    struct nstats s;
    norm_stats(ad, x, n_axes, axes, ox_attr_float(n, "epsilon", 1e-5f), &s);
    int g = gy[0];
    int g_m = n->n_outputs > 1 && n->outputs[1] >= 0 ? gy[1] : -1;
    int g_i = n->n_outputs > 2 && n->outputs[2] >= 0 ? gy[2] : -1;
    if (g >= 0) {
        if (ox_ad_wants(ad, n, 0))
            gx[0] = norm_backward(ad, &s, ox_ad_mul(ad, g, scale), n_axes, axes);
        if (ox_ad_wants(ad, n, 1)) gx[1] = ox_ad_unbroadcast(ad, ox_ad_mul(ad, g, s.xhat), scale);
        if (bias >= 0 && ox_ad_wants(ad, n, 2)) gx[2] = ox_ad_unbroadcast(ad, g, bias);
    }
    if ((g_m >= 0 || g_i >= 0) && ox_ad_wants(ad, n, 0)) {
        int c = -1;
        if (g_m >= 0) c = ox_ad_cast_like(ad, g_m, x);
        if (g_i >= 0) {
            int inv3 = ox_ad_mul(ad, s.inv, ox_ad_mul(ad, s.inv, s.inv));
            int t =
                ox_ad_neg(ad, ox_ad_mul(ad, ox_ad_mul(ad, ox_ad_cast_like(ad, g_i, x), inv3), s.d));
            c = c >= 0 ? ox_ad_add(ad, c, t) : t;
        }
        int d = ox_ad_div(ad, c, count_of(ad, x, n_axes, axes));
        if (g_i < 0) d = ox_ad_expand_like(ad, d, x);
        gx[0] = gx[0] >= 0 ? ox_ad_add(ad, gx[0], d) : d;
    }
    return OX_OK;
}

/* y = xhat * scale + B per (image, channel) over the spatial axes; scale and B are [C]. */
ox_status ox_grad_instancenorm(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    int x = n->inputs[0], scale = n->inputs[1], g = gy[0];
    int r = ox_ad_rank(ad, x);
    if (r < 3) return ox_ad_fail(ad, n, OX_E_UNSUPPORTED, "InstanceNormalization needs X's rank");
    int64_t sp[OX_MAX_RANK], nsp[OX_MAX_RANK];
    int n_sp = stat_axes(r, false, sp), n_nsp = stat_axes(r, true, nsp);
    struct nstats s;
    norm_stats(ad, x, n_sp, sp, ox_attr_float(n, "epsilon", 1e-5f), &s);
    if (ox_ad_wants(ad, n, 0))
        gx[0] = norm_backward(ad, &s, ox_ad_mul(ad, g, per_channel(ad, scale, r)), n_sp, sp);
    if (ox_ad_wants(ad, n, 1))
        gx[1] = ox_ad_reduce(ad, "ReduceSum", ox_ad_mul(ad, g, s.xhat), n_nsp, nsp, false);
    if (ox_ad_wants(ad, n, 2)) gx[2] = ox_ad_reduce(ad, "ReduceSum", g, n_nsp, nsp, false);
    return OX_OK;
}

/* v [N, C, ...] viewed as [N, G, C/G * ...]. */
static int grouped(struct ox_ad *ad, int v, int x, int64_t groups) {
    int s = ox_ad_ints(ad, 3, (int64_t[]){0, groups, -1});
    int r = OX_AD(ad, "Reshape", v, s);
    int64_t k = 1;
    for (int i = 1; i < ox_ad_rank(ad, x); i++) {
        int64_t d = ox_ad_dim(ad, x, i);
        k = d < 0 || k < 0 ? -1 : k * d;
    }
    if (k >= 0) k /= groups;
    ox_ad_set_info(ad, r, ox_ad_dtype(ad, v), 3, (int64_t[]){ox_ad_dim(ad, x, 0), groups, k});
    return r;
}

/* Statistics per (image, group of C/G channels). scale and B: per group at opset 18, per
 * channel from 21. */
ox_status ox_grad_groupnorm(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    int x = n->inputs[0], scale = n->inputs[1], g = gy[0];
    int r = ox_ad_rank(ad, x);
    int64_t G = ox_attr_int(n, "num_groups", 0);
    if (r < 2 || G <= 0)
        return ox_ad_fail(ad, n, OX_E_UNSUPPORTED,
                          "GroupNormalization needs X's rank and num_groups");
    int xg = grouped(ad, x, x, G);
    int64_t two = 2, nsp[OX_MAX_RANK];
    int n_nsp = stat_axes(r, true, nsp);
    struct nstats s;
    norm_stats(ad, xg, 1, &two, ox_attr_float(n, "epsilon", 1e-5f), &s);
    if (n->opset < 21) { /* everything in the grouped view; scale and B are [G] */
        int gg = grouped(ad, g, x, G);
        int sg = ox_ad_unsqueeze(ad, scale, 1, (int64_t[]){1});
        if (ox_ad_wants(ad, n, 0))
            gx[0] =
                ox_ad_reshape_like(ad, norm_backward(ad, &s, ox_ad_mul(ad, gg, sg), 1, &two), x);
        int64_t ax[2] = {0, 2};
        if (ox_ad_wants(ad, n, 1))
            gx[1] = ox_ad_reduce(ad, "ReduceSum", ox_ad_mul(ad, gg, s.xhat), 2, ax, false);
        if (ox_ad_wants(ad, n, 2)) gx[2] = ox_ad_reduce(ad, "ReduceSum", gg, 2, ax, false);
        return OX_OK;
    }
    if (ox_ad_wants(ad, n, 0)) {
        int dxhat = grouped(ad, ox_ad_mul(ad, g, per_channel(ad, scale, r)), x, G);
        gx[0] = ox_ad_reshape_like(ad, norm_backward(ad, &s, dxhat, 1, &two), x);
    }
    if (ox_ad_wants(ad, n, 1)) {
        int xhat = ox_ad_reshape_like(ad, s.xhat, x);
        gx[1] = ox_ad_reduce(ad, "ReduceSum", ox_ad_mul(ad, g, xhat), n_nsp, nsp, false);
    }
    if (ox_ad_wants(ad, n, 2)) gx[2] = ox_ad_reduce(ad, "ReduceSum", g, n_nsp, nsp, false);
    return OX_OK;
}

/* y = x / |x|_p along axis (p = 1 or 2): dx = (gy - s * sum(gy * y)) / |x|_p with
 * s = y for p = 2 and sign(x) for p = 1. */
ox_status ox_grad_lpnorm(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    int x = n->inputs[0], y = n->outputs[0];
    int r = ox_ad_rank(ad, x);
    int64_t p = ox_attr_int(n, "p", 2), axis = ox_attr_int(n, "axis", -1);
    if (r < 1 || (p != 1 && p != 2))
        return ox_ad_fail(ad, n, OX_E_UNSUPPORTED, "LpNormalization needs X's rank and p 1 or 2");
    int norm = ox_ad_reduce(ad, p == 2 ? "ReduceL2" : "ReduceL1", x, 1, &axis, true);
    int dot = ox_ad_reduce(ad, "ReduceSum", ox_ad_mul(ad, gy[0], y), 1, &axis, true);
    int s = p == 2 ? y : unary(ad, "Sign", x);
    gx[0] = ox_ad_div(ad, ox_ad_sub(ad, gy[0], ox_ad_mul(ad, s, dot)), norm);
    return OX_OK;
}

/* y = (x - mean) / (sqrt(var) + 1e-9) over `axes` (default {0, 2, 3}), as ONNX's function body
 * computes it. With d = x - mean, s = sqrt(var), r = 1 / (s + 1e-9):
 *     dx = r * (gy - mean(gy) - d * (r / s) * mean(gy * d)). */
ox_status ox_grad_mvn(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    int x = n->inputs[0], g = gy[0];
    int r = ox_ad_rank(ad, x);
    static const int64_t def[3] = {0, 2, 3};
    const int64_t *ax;
    int n_axes = ox_attr_ints(n, "axes", &ax);
    if (n_axes < 0) ax = def, n_axes = 3;
    if (r < 0 || n_axes > OX_MAX_RANK)
        return ox_ad_fail(ad, n, OX_E_UNSUPPORTED, "MeanVarianceNormalization needs X's rank");
    int64_t axes[OX_MAX_RANK];
    for (int i = 0; i < n_axes; i++) {
        axes[i] = ax[i] < 0 ? ax[i] + r : ax[i];
        if (axes[i] < 0 || axes[i] >= r)
            return ox_ad_fail(ad, n, OX_E_INVALID, "axis %lld for rank %d", (long long)ax[i], r);
    }
    int m = ox_ad_reduce(ad, "ReduceMean", x, n_axes, axes, true);
    int d = ox_ad_sub(ad, x, m);
    int var = ox_ad_reduce(ad, "ReduceMean", ox_ad_mul(ad, d, d), n_axes, axes, true);
    int s = unary(ad, "Sqrt", var);
    int rcp = unary(ad, "Reciprocal", ox_ad_add(ad, s, ox_ad_scalar_like(ad, 1e-9, x)));
    int gm = ox_ad_reduce(ad, "ReduceMean", g, n_axes, axes, true);
    int gdm = ox_ad_reduce(ad, "ReduceMean", ox_ad_mul(ad, g, d), n_axes, axes, true);
    int t = ox_ad_mul(ad, d, ox_ad_mul(ad, ox_ad_div(ad, rcp, s), gdm));
    gx[0] = ox_ad_mul(ad, rcp, ox_ad_sub(ad, ox_ad_sub(ad, g, gm), t));
    return OX_OK;
}

/* Opset 23: y = x * inv * scale with inv = 1 / sqrt(mean(x^2) + eps) over the axes from
 * `axis` on; xhat = x * inv, h = gy * scale:
 *     dx = inv * (h - xhat * mean(h * xhat)),   dscale = gy * xhat summed to scale's shape. */
ox_status ox_grad_rmsnorm(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    int x = n->inputs[0], scale = n->inputs[1], g = gy[0];
    int r = ox_ad_rank(ad, x);
    if (r < 1) return ox_ad_fail(ad, n, OX_E_UNSUPPORTED, "RMSNormalization needs X's rank");
    int64_t axis = ox_attr_int(n, "axis", -1);
    if (axis < 0) axis += r;
    if (axis < 0 || axis >= r)
        return ox_ad_fail(ad, n, OX_E_INVALID, "axis %lld for rank %d",
                          (long long)ox_attr_int(n, "axis", -1), r);
    int64_t axes[OX_MAX_RANK];
    int n_axes = 0;
    for (int64_t k = axis; k < r; k++) axes[n_axes++] = k;
    double eps = ox_attr_float(n, "epsilon", 1e-5f);
    int ms = ox_ad_reduce(ad, "ReduceMean", ox_ad_mul(ad, x, x), n_axes, axes, true);
    int inv = unary(ad, "Reciprocal",
                    unary(ad, "Sqrt", ox_ad_add(ad, ms, ox_ad_scalar_like(ad, eps, x))));
    int xhat = ox_ad_mul(ad, x, inv);
    if (ox_ad_wants(ad, n, 0)) {
        int h = ox_ad_mul(ad, g, scale);
        int dot = ox_ad_reduce(ad, "ReduceMean", ox_ad_mul(ad, h, xhat), n_axes, axes, true);
        gx[0] = ox_ad_mul(ad, inv, ox_ad_sub(ad, h, ox_ad_mul(ad, xhat, dot)));
    }
    if (ox_ad_wants(ad, n, 1)) gx[1] = ox_ad_unbroadcast(ad, ox_ad_mul(ad, g, xhat), scale);
    return OX_OK;
}

/* The sums of v [N, C, ...] over the channel windows [c - lo, c + hi] (clipped to [0, C)): a
 * Conv of v viewed as [N, 1, C, rest] with a ones kernel [1, 1, lo + hi + 1, 1]. */
static int channel_window_sum(struct ox_ad *ad, int v, int64_t lo, int64_t hi) {
    int flat = OX_AD(ad, "Reshape", v, ox_ad_ints(ad, 3, (int64_t[]){0, 0, -1}));
    ox_ad_set_info(ad, flat, ox_ad_dtype(ad, v), 3, NULL);
    int u = ox_ad_unsqueeze(ad, flat, 1, (int64_t[]){1});
    int kern = OX_AD(ad, "Expand", ox_ad_scalar_like(ad, 1.0, v),
                     ox_ad_ints(ad, 4, (int64_t[]){1, 1, lo + hi + 1, 1}));
    int c = ox_ad_opa(ad, "Conv", 2, (int[]){u, kern}, "I:pads", 4, (int64_t[]){lo, 0, hi, 0});
    ox_ad_set_info(ad, c, ox_ad_dtype(ad, v), 4, NULL);
    int s = ox_ad_squeeze(ad, c, 1, (int64_t[]){1});
    return ox_ad_reshape_like(ad, s, v);
}

/* y = x * D^-beta with D = bias + alpha / size * S, S the sum of x^2 over the channel window
 * [c - floor((size-1)/2), c + ceil((size-1)/2)]. Channel j lies in the windows of the
 * channels [j - ceil, j + floor] (the transposed window), so
 *     dx = gy * D^-beta - 2 alpha beta / size * x * S'(gy * x * D^(-beta-1)),
 * S' the window sum with the pads swapped. */
ox_status ox_grad_lrn(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    int x = n->inputs[0], g = gy[0];
    int64_t size = ox_attr_int(n, "size", 0);
    if (size <= 0) return ox_ad_fail(ad, n, OX_E_INVALID, "LRN needs a positive size");
    double alpha = ox_attr_float(n, "alpha", 1e-4f), beta = ox_attr_float(n, "beta", 0.75f);
    double bias = ox_attr_float(n, "bias", 1.0f);
    int64_t lo = (size - 1) / 2, hi = size - 1 - lo;
    int s = channel_window_sum(ad, ox_ad_mul(ad, x, x), lo, hi);
    int d = ox_ad_add(ad, ox_ad_scalar_like(ad, bias, x),
                      ox_ad_mul(ad, ox_ad_scalar_like(ad, alpha / (double)size, x), s));
    int p = OX_AD(ad, "Pow", d, ox_ad_scalar_like(ad, -beta, x));
    ox_ad_info_as(ad, p, x, OX_UNDEFINED);
    int gp = ox_ad_mul(ad, g, p);
    int back = channel_window_sum(ad, ox_ad_div(ad, ox_ad_mul(ad, gp, x), d), hi, lo);
    int k = ox_ad_scalar_like(ad, -2.0 * alpha * beta / (double)size, x);
    gx[0] = ox_ad_add(ad, gp, ox_ad_mul(ad, ox_ad_mul(ad, k, x), back));
    return OX_OK;
}

/* ---- Softmax, LogSoftmax --------------------------------------------------------------- */

/* Along one axis (opset 13+): dx = y * (gy - sum(gy * y)). */
ox_status ox_grad_softmax(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    int y = n->outputs[0], r = ox_ad_rank(ad, y);
    if (n->opset < 13)
        return ox_ad_fail(ad, n, OX_E_UNSUPPORTED, "Softmax before opset 13 (coerced to 2-D)");
    if (r == 0) {
        gx[0] = ox_ad_zeros_like(ad, n->inputs[0]);
        return OX_OK;
    }
    int64_t axis = ox_attr_int(n, "axis", -1);
    int dot = ox_ad_reduce(ad, "ReduceSum", ox_ad_mul(ad, gy[0], y), 1, &axis, true);
    gx[0] = ox_ad_mul(ad, y, ox_ad_sub(ad, gy[0], dot));
    return OX_OK;
}

/* dx = gy - exp(y) * sum(gy). */
ox_status ox_grad_logsoftmax(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    int y = n->outputs[0], r = ox_ad_rank(ad, y);
    if (n->opset < 13)
        return ox_ad_fail(ad, n, OX_E_UNSUPPORTED, "LogSoftmax before opset 13 (coerced to 2-D)");
    if (r == 0) {
        gx[0] = ox_ad_zeros_like(ad, n->inputs[0]);
        return OX_OK;
    }
    int64_t axis = ox_attr_int(n, "axis", -1);
    int sum = ox_ad_reduce(ad, "ReduceSum", gy[0], 1, &axis, true);
    gx[0] = ox_ad_sub(ad, gy[0], ox_ad_mul(ad, unary(ad, "Exp", y), sum));
    return OX_OK;
}

/* ---- SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss -------------------------------- */

/* The class ids 0..C-1 of scores x [N, C, ...] (int64 [C]), with ignore_index, when it is a
 * class, replaced by -1 (a target never matches it). */
static int classes(struct ox_ad *ad, const struct ox_node *n, int x) {
    const struct ox_attr *ig = ox_node_attr(n, "ignore_index");
    int64_t ignore = ig && ig->type == OX_ATTR_INT ? ig->i : -1;
    int64_t C = ox_ad_dim(ad, x, 1);
    if (C >= 0 && C <= 65536) {
        int64_t *ids = malloc(sizeof *ids * (size_t)(C ? C : 1));
        if (!ids) {
            ox_ad_fail(ad, n, OX_E_NOMEM, "out of memory");
            return -1;
        }
        for (int64_t c = 0; c < C; c++) ids[c] = c == ignore ? -1 : c;
        int v = ox_ad_ints(ad, (int)C, ids);
        free(ids);
        return v;
    }
    int c = OX_AD(ad, "Gather", ox_ad_shape(ad, x), ox_ad_int(ad, 1));
    int cls = ox_ad_op(ad, "Range", 3, (int[]){ox_ad_int(ad, 0), c, ox_ad_int(ad, 1)});
    if (ignore >= 0) {
        int is = OX_AD(ad, "Equal", cls, ox_ad_int(ad, ignore));
        cls = OX_AD(ad, "Where", is, ox_ad_int(ad, -1), cls);
    }
    ox_ad_set_info(ad, cls, OX_INT64, 1, NULL);
    return cls;
}

/* SCE's log-probabilities: its log_prob output, else a LogSoftmax over axis 1 (made once). */
static int log_probs(struct ox_ad *ad, const struct ox_node *n, int *lp) {
    if (*lp >= 0) return *lp;
    if (n->n_outputs > 1 && n->outputs[1] >= 0) return *lp = n->outputs[1];
    int x = n->inputs[0];
    *lp = ox_ad_opa(ad, "LogSoftmax", 1, &x, "i:axis", (int64_t)1);
    ox_ad_info_as(ad, *lp, x, OX_UNDEFINED);
    return *lp;
}

/* With logp [N, C, d...] (NLL's input, SCE's log-softmax over axis 1), targets t [N, d...],
 * M = onehot(t) (zero at ignore_index) and weights w [C] (ones when absent), position k
 * loses l_k = -logp[k, t_k] w[t_k]; `none` gives l, `sum` sums, `mean` divides the sum by
 * W = sum_k w[t_k]. With gp the gradient per position (gy, gy, gy / W):
 *   dlogp = -M w gp,   dw[c] = sum_k M[k,c] (-logp[k,c] - L) gp_k  (L: the mean, else 0).
 * SCE: dx = dlogp' - softmax(x) sum_c dlogp', dlogp' = dlogp + the log_prob output's. */
static ox_status loss_grad(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx,
                           bool sce) {
    int x = n->inputs[0], t = n->inputs[1];
    int w = n->n_inputs > 2 ? n->inputs[2] : -1;
    int r = ox_ad_rank(ad, x);
    if (r < 2) return ox_ad_fail(ad, n, OX_E_UNSUPPORTED, "%s needs the scores' rank", n->op_type);
    const char *red = ox_attr_str(n, "reduction", "mean");
    bool none = strcmp(red, "none") == 0, mean = strcmp(red, "mean") == 0;
    if (!none && !mean && strcmp(red, "sum") != 0)
        return ox_ad_fail(ad, n, OX_E_INVALID, "reduction '%s'", red);
    int g = gy[0];
    int g_lp = sce && n->n_outputs > 1 && n->outputs[1] >= 0 ? gy[1] : -1;
    int64_t other[OX_MAX_RANK]; /* every axis but the class axis */
    int n_other = stat_axes(r, true, other);
    int dlogp = -1, dw = -1, lp = -1;
    if (g >= 0) {
        int cls = classes(ad, n, x);
        int64_t outer[OX_MAX_RANK]; /* [C] -> [1, C, 1, ...] */
        outer[0] = 0;
        for (int k = 2; k < r; k++) outer[k - 1] = k;
        cls = ox_ad_unsqueeze(ad, cls, r - 1, outer);
        int t64 = t;
        if (ox_ad_dtype(ad, t) != OX_INT64) {
            t64 = ox_ad_opa(ad, "Cast", 1, &t, "i:to", (int64_t)OX_INT64);
            ox_ad_info_as(ad, t64, t, OX_INT64);
        }
        int tu = ox_ad_unsqueeze(ad, t64, 1, (int64_t[]){1});
        int eq = OX_AD(ad, "Equal", tu, cls);
        ox_ad_info_as(ad, eq, x, OX_BOOL);
        int mf = ox_ad_cast_like(ad, eq, x);
        int mw = w >= 0 ? ox_ad_mul(ad, mf, ox_ad_unsqueeze(ad, w, r - 1, outer)) : mf;
        int gp = g;
        if (none) gp = ox_ad_unsqueeze(ad, g, 1, (int64_t[]){1});
        if (mean) gp = ox_ad_div(ad, g, ox_ad_reduce(ad, "ReduceSum", mw, 0, NULL, false));
        if (ox_ad_wants(ad, n, 0)) dlogp = ox_ad_neg(ad, ox_ad_mul(ad, mw, gp));
        if (w >= 0 && ox_ad_wants(ad, n, 2)) {
            int term = ox_ad_neg(ad, sce ? log_probs(ad, n, &lp) : x);
            if (mean) term = ox_ad_sub(ad, term, n->outputs[0]);
            dw = ox_ad_reduce(ad, "ReduceSum", ox_ad_mul(ad, ox_ad_mul(ad, mf, term), gp), n_other,
                              other, false);
        }
    }
    if (w >= 0 && ox_ad_wants(ad, n, 2)) gx[2] = dw;
    if (!ox_ad_wants(ad, n, 0)) return OX_OK;
    if (!sce) {
        gx[0] = dlogp;
        return OX_OK;
    }
    int d = dlogp;
    if (g_lp >= 0) d = d >= 0 ? ox_ad_add(ad, d, g_lp) : g_lp;
    if (d < 0) return OX_OK;
    int sum = ox_ad_reduce(ad, "ReduceSum", d, 1, (int64_t[]){1}, true);
    gx[0] = ox_ad_sub(ad, d, ox_ad_mul(ad, unary(ad, "Exp", log_probs(ad, n, &lp)), sum));
    return OX_OK;
}

ox_status ox_grad_nll_loss(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    return loss_grad(ad, n, gy, gx, false);
}

ox_status ox_grad_sce_loss(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    return loss_grad(ad, n, gy, gx, true);
}

/* ---- Dropout --------------------------------------------------------------------------- */

/* Inference (no training_mode, or false): the identity. Training: y = x * mask / (1 - ratio)
 * so dx = gy * mask / (1 - ratio), from the node's mask output; without one, the mask is
 * drawn again by a Dropout of ones with the same seed (only when a seed is set: otherwise
 * the draws of two nodes need not agree). dratio = sum(gy * y) / (1 - ratio). */
ox_status ox_grad_dropout(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    int x = n->inputs[0], g = gy[0];
    int ratio = n->n_inputs > 1 ? n->inputs[1] : -1;
    int tm = n->n_inputs > 2 ? n->inputs[2] : -1;
    if (g < 0) return OX_OK;
    bool train = false;
    if (n->opset >= 12 && tm >= 0) {
        const ox_tensor *t = ox_ad_const_value(ad, tm);
        if (!t || ox_tensor_numel(t) != 1)
            return ox_ad_fail(ad, n, OX_E_UNSUPPORTED,
                              "Dropout's training_mode '%s' is not a constant",
                              ox_ad_graph(ad)->values[tm].name);
        train = ox_tensor_get(t, 0) != 0;
    }
    if (!train) {
        if (ox_ad_wants(ad, n, 0)) gx[0] = g;
        return OX_OK;
    }
    int mask = n->n_outputs > 1 ? n->outputs[1] : -1;
    /* 1 / (1 - ratio), in x's element type, where needed */
    int inv_keep = -1;
    if ((mask >= 0 && ox_ad_wants(ad, n, 0)) || (ratio >= 0 && ox_ad_wants(ad, n, 1))) {
        int rt = ratio >= 0 ? ox_ad_cast_like(ad, ratio, x) : ox_ad_scalar_like(ad, 0.5, x);
        inv_keep = unary(ad, "Reciprocal", ox_ad_sub(ad, ox_ad_scalar_like(ad, 1.0, x), rt));
    }
    if (ox_ad_wants(ad, n, 0)) {
        if (mask >= 0) {
            int m = ox_ad_cast_like(ad, mask, x);
            gx[0] = ox_ad_mul(ad, ox_ad_mul(ad, g, m), inv_keep);
        } else if (ox_node_attr(n, "seed")) {
            int in[3] = {ox_ad_ones_like(ad, x), ratio, tm};
            int s = ox_ad_opa(ad, "Dropout", 3, in, "i:seed", ox_attr_int(n, "seed", 0));
            ox_ad_info_as(ad, s, x, OX_UNDEFINED);
            gx[0] = ox_ad_mul(ad, g, s);
        } else {
            return ox_ad_fail(ad, n, OX_E_UNSUPPORTED,
                              "Dropout in training mode needs its mask output, or a seed, to "
                              "be differentiated");
        }
    }
    if (ratio >= 0 && ox_ad_wants(ad, n, 1)) {
        int s = ox_ad_reduce(ad, "ReduceSum", ox_ad_mul(ad, g, n->outputs[0]), 0, NULL, false);
        int d = ox_ad_cast_like(ad, ox_ad_mul(ad, s, inv_keep), ratio);
        gx[1] = ox_ad_reshape_like(ad, d, ratio);
    }
    return OX_OK;
}

/* ---- Einsum ---------------------------------------------------------------------------- */

#define ES_MAX_TERMS 32

/* One term of an equation: its letters, and where the ellipsis sits among them (-1: none). */
struct es_term {
    int n;
    char lab[64];
    int ell;
};

static bool es_parse_term(const char *s, size_t len, struct es_term *t) {
    t->n = 0;
    t->ell = -1;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (c == ' ') continue;
        if (c == '.') {
            if (i + 2 >= len || s[i + 1] != '.' || s[i + 2] != '.' || t->ell >= 0) return false;
            t->ell = t->n;
            i += 2;
            continue;
        }
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) || t->n >= (int)sizeof t->lab)
            return false;
        t->lab[t->n++] = c;
    }
    return true;
}

/* Write a term: its letters with "..." at the ellipsis; `ell` false leaves it out. */
static void es_write(char *buf, size_t cap, size_t *len, const struct es_term *t, bool ell) {
    for (int i = 0; i <= t->n; i++) {
        if (i == t->ell && ell && *len + 3 < cap) {
            memcpy(buf + *len, "...", 3);
            *len += 3;
        }
        if (i < t->n && *len + 1 < cap) buf[(*len)++] = t->lab[i];
    }
    buf[*len] = '\0';
}

static bool es_has(const struct es_term *t, char c) {
    return memchr(t->lab, c, (size_t)t->n) != NULL;
}

/* Broadcast two dims (-1: unknown) the numpy way. */
static int64_t bdim(int64_t a, int64_t b) {
    return a == 1 ? b : b == 1 ? a : a < 0 ? b : a;
}

/* A letter that no term uses (0 if none is left). */
static char fresh_letter(const struct es_term *in, int n_in, const struct es_term *out,
                         const struct es_term *k) {
    for (int c = 'A'; c <= 'z'; c++) {
        if (c > 'Z' && c < 'a') continue;
        bool used = es_has(out, (char)c) || es_has(k, (char)c);
        for (int j = 0; j < n_in && !used; j++) used = es_has(&in[j], (char)c);
        if (!used) return (char)c;
    }
    return 0;
}

/* The identity matrix of x's element type, of size x's dim `dim`. */
static int identity_of(struct ox_ad *ad, int x, int dim) {
    int64_t d = ox_ad_dim(ad, x, dim);
    int shape =
        d >= 0 ? ox_ad_ints(ad, 2, (int64_t[]){d, d})
               : OX_AD(ad, "Gather", ox_ad_shape(ad, x), ox_ad_ints(ad, 2, (int64_t[]){dim, dim}));
    int r = OX_AD(ad, "EyeLike", OX_AD(ad, "ConstantOfShape", shape)); /* float */
    ox_ad_set_info(ad, r, OX_FLOAT, 2, (int64_t[]){d, d});
    return ox_ad_cast_like(ad, r, x);
}

/* The gradient of operand k is an Einsum of gy with the other operands, whose output is k's
 * term: "out,others->k". Letters of k found nowhere else (summed out of k alone) are left out
 * of that output and broadcast back; ellipsis dims that k broadcast are summed back; a letter
 * repeated within k (a diagonal, a trace) is tied to its first place by an identity matrix. */
ox_status ox_grad_einsum(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    const struct ox_attr *eqa = ox_node_attr(n, "equation");
    if (!eqa || eqa->type != OX_ATTR_STRING)
        return ox_ad_fail(ad, n, OX_E_INVALID, "Einsum without an equation");
    const char *eq = eqa->s;
    size_t len = eqa->s_len;
    int n_in = n->n_inputs;
    if (n_in < 1 || n_in > ES_MAX_TERMS)
        return ox_ad_fail(ad, n, OX_E_UNSUPPORTED, "Einsum with %d inputs", n_in);
    struct es_term in[ES_MAX_TERMS], out;
    const char *arrow = NULL;
    for (size_t i = 0; i + 1 < len; i++)
        if (eq[i] == '-' && eq[i + 1] == '>') {
            arrow = eq + i;
            break;
        }
    size_t lhs = arrow ? (size_t)(arrow - eq) : len, pos = 0;
    for (int k = 0; k < n_in; k++) {
        size_t end = pos;
        while (end < lhs && eq[end] != ',') end++;
        if ((k + 1 < n_in) != (end < lhs) || !es_parse_term(eq + pos, end - pos, &in[k]))
            return ox_ad_fail(ad, n, OX_E_INVALID, "Einsum equation '%.*s'", (int)len, eq);
        pos = end + 1;
    }
    /* ellipsis ranks, and the dims of each letter and of the broadcast ellipsis */
    int e[ES_MAX_TERMS], ell_max = 0;
    bool any_ell = false;
    int64_t ldim[128], edim[OX_MAX_RANK];
    for (int c = 0; c < 128; c++) ldim[c] = -1;
    for (int q = 0; q < OX_MAX_RANK; q++) edim[q] = 1;
    for (int k = 0; k < n_in; k++) {
        int v = n->inputs[k], rank = ox_ad_rank(ad, v);
        e[k] = 0;
        if (in[k].ell >= 0) {
            any_ell = true;
            if (rank < 0)
                return ox_ad_fail(ad, n, OX_E_UNSUPPORTED, "Einsum: input %d's rank is unknown", k);
            e[k] = rank - in[k].n;
            if (e[k] < 0 || e[k] > OX_MAX_RANK)
                return ox_ad_fail(ad, n, OX_E_INVALID, "Einsum: input %d has rank %d", k, rank);
        }
        if (e[k] > ell_max) ell_max = e[k];
        for (int i = 0; i < in[k].n; i++) {
            int dim = i < in[k].ell || in[k].ell < 0 ? i : i + e[k];
            int64_t d = ox_ad_dim(ad, v, dim);
            if (d >= 0) ldim[(int)in[k].lab[i]] = d;
        }
    }
    for (int k = 0; k < n_in; k++)
        for (int q = 0; q < e[k]; q++) {
            int64_t d = ox_ad_dim(ad, n->inputs[k], in[k].ell + q);
            int at = ell_max - e[k] + q;
            edim[at] = bdim(edim[at], d);
        }
    if (arrow) {
        if (!es_parse_term(arrow + 2, len - lhs - 2, &out))
            return ox_ad_fail(ad, n, OX_E_INVALID, "Einsum equation '%.*s'", (int)len, eq);
    } else { /* implicit: the ellipsis, then the letters seen once, in ASCII order */
        out.n = 0;
        out.ell = any_ell ? 0 : -1;
        for (int c = 'A'; c <= 'z'; c++) {
            int cnt = 0;
            for (int k = 0; k < n_in; k++)
                for (int i = 0; i < in[k].n; i++) cnt += in[k].lab[i] == c;
            if (cnt == 1) out.lab[out.n++] = (char)c;
        }
    }
    for (int k = 0; k < n_in; k++) {
        if (!ox_ad_wants(ad, n, k)) continue;
        int x = n->inputs[k];
        /* a letter repeated within k (a diagonal) becomes a fresh letter tied to the first by
         * an identity matrix, an extra operand of the gradient einsum */
        struct es_term tkd = in[k], eye[OX_MAX_RANK];
        const struct es_term *tk = &tkd;
        int n_eye = 0, eye_v[OX_MAX_RANK];
        for (int i = 0; i < tkd.n; i++) {
            const char *first = memchr(tkd.lab, in[k].lab[i], (size_t)i);
            if (!first) continue;
            char f = fresh_letter(in, n_in, &out, &tkd);
            if (!f || n_eye == OX_MAX_RANK)
                return ox_ad_fail(ad, n, OX_E_UNSUPPORTED, "Einsum: no letter left");
            int p = (int)(first - tkd.lab);
            int dim = p < tkd.ell || tkd.ell < 0 ? p : p + e[k];
            tkd.lab[i] = f;
            ldim[(int)f] = ldim[(int)in[k].lab[i]];
            eye[n_eye] = (struct es_term){.n = 2, .lab = {in[k].lab[i], f}, .ell = -1};
            eye_v[n_eye++] = identity_of(ad, x, dim);
        }
        if (tk->n + e[k] > OX_MAX_RANK || tk->n + ell_max > OX_MAX_RANK)
            return ox_ad_fail(ad, n, OX_E_UNSUPPORTED, "Einsum: input %d: too many dims", k);
        /* the gradient einsum: gy, then the other operands */
        int ins[ES_MAX_TERMS + OX_MAX_RANK];
        int n_ins = 0;
        ins[n_ins++] = gy[0];
        char eqn[1024];
        size_t el = 0;
        es_write(eqn, sizeof eqn, &el, &out, true);
        int r_ell = out.ell >= 0 ? ell_max : 0; /* ellipsis rank of the result */
        int64_t rdim[OX_MAX_RANK];
        for (int q = 0; q < r_ell; q++) rdim[q] = edim[q];
        for (int j = 0; j < n_in; j++) {
            if (j == k) continue;
            ins[n_ins++] = n->inputs[j];
            if (el + 1 < sizeof eqn) eqn[el++] = ',';
            es_write(eqn, sizeof eqn, &el, &in[j], true);
            if (in[j].ell >= 0 && out.ell < 0) { /* ellipsis dims of the others */
                if (e[j] > r_ell) {
                    int sh = e[j] - r_ell;
                    memmove(rdim + sh, rdim, sizeof(int64_t) * (size_t)r_ell);
                    for (int q = 0; q < sh; q++) rdim[q] = 1;
                    r_ell = e[j];
                }
                for (int q = 0; q < e[j]; q++) {
                    int at = r_ell - e[j] + q;
                    rdim[at] = bdim(rdim[at], ox_ad_dim(ad, n->inputs[j], in[j].ell + q));
                }
            }
        }
        for (int j = 0; j < n_eye; j++) {
            ins[n_ins++] = eye_v[j];
            if (el + 1 < sizeof eqn) eqn[el++] = ',';
            es_write(eqn, sizeof eqn, &el, &eye[j], true);
        }
        bool any_in_ell = out.ell >= 0;
        for (int j = 0; j < n_in; j++) any_in_ell |= j != k && in[j].ell >= 0;
        if (!any_in_ell) r_ell = 0;
        /* the output: "..." first whenever an input has one (the dims it stands for are then
         * summed down to k's), then k's letters found in gy or another operand */
        struct es_term gt = {.n = 0, .ell = any_in_ell ? 0 : -1};
        int64_t lonely[64];
        int n_lonely = 0;
        for (int i = 0; i < tk->n; i++) {
            char c = tk->lab[i];
            bool found = es_has(&out, c);
            for (int j = 0; j < n_in && !found; j++) found = j != k && es_has(&in[j], c);
            for (int j = 0; j < n_eye && !found; j++) found = es_has(&eye[j], c);
            if (found)
                gt.lab[gt.n++] = c;
            else
                lonely[n_lonely++] = r_ell + i;
        }
        if (el + 2 < sizeof eqn) memcpy(eqn + el, "->", 2), el += 2;
        es_write(eqn, sizeof eqn, &el, &gt, true);
        if (el + 1 >= sizeof eqn)
            return ox_ad_fail(ad, n, OX_E_UNSUPPORTED, "Einsum equation too long");
        int res = ox_ad_opa(ad, "Einsum", n_ins, ins, "s:equation", eqn);
        int64_t d[OX_MAX_RANK];
        int rr = 0;
        for (int q = 0; q < r_ell; q++) d[rr++] = rdim[q];
        for (int i = 0; i < gt.n; i++) d[rr++] = ldim[(int)gt.lab[i]];
        ox_ad_set_info(ad, res, ox_ad_dtype(ad, x), rr, d);
        if (r_ell == 0 && e[k] == 0) {
            /* no ellipsis dims: only letters summed out of k alone to restore */
            if (n_lonely) {
                res = ox_ad_unsqueeze(ad, res, n_lonely, lonely);
                res = ox_ad_expand_like(ad, res, x);
            }
            gx[k] = res;
            continue;
        }
        /* k's layout with its ellipsis dims first */
        int rank = tk->n + e[k];
        int64_t perm[OX_MAX_RANK], inv[OX_MAX_RANK];
        int np = 0;
        for (int q = 0; q < e[k]; q++) perm[np++] = tk->ell + q;
        for (int i = 0; i < tk->n; i++) perm[np++] = i < tk->ell ? i : i + e[k];
        bool moved = false;
        for (int i = 0; i < rank; i++) {
            inv[perm[i]] = i;
            moved |= perm[i] != i;
        }
        /* x's dims in that layout; x itself is transposed only when they are not known */
        int64_t xd[OX_MAX_RANK];
        bool known = true;
        for (int q = 0; q < rank; q++) known &= (xd[q] = ox_ad_dim(ad, x, (int)perm[q])) >= 0;
        int xt = moved && !known ? ox_ad_transpose(ad, x, rank, perm) : x;
        if (n_lonely) res = ox_ad_unsqueeze(ad, res, n_lonely, lonely);
        /* expand (both ways) where k's dims are larger, then sum where k's are 1 or absent */
        bool expand = n_lonely || r_ell < e[k];
        for (int q = 0; q < e[k] && !expand; q++) {
            int64_t a = ox_ad_dim(ad, res, r_ell - e[k] + q), b = known ? xd[q] : -1;
            expand = a < 0 || b < 0 || (a == 1 && b != 1);
        }
        int rres = ox_ad_rank(ad, res);
        if (expand) {
            int rb = rres > rank ? rres : rank;
            int64_t bd[OX_MAX_RANK];
            for (int q = 0; q < rb; q++) {
                int qa = q - (rb - rres), qb = q - (rb - rank);
                int64_t a = qa >= 0 ? ox_ad_dim(ad, res, qa) : 1;
                int64_t b = qb >= 0 && known ? xd[qb] : qb >= 0 ? -1 : 1;
                bd[q] = a < 0 || b < 0 ? (a == 1 ? b : b == 1 ? a : -1) : bdim(a, b);
            }
            int shape = known ? ox_ad_ints(ad, rank, xd) : ox_ad_shape(ad, xt);
            res = OX_AD(ad, "Expand", res, shape);
            ox_ad_set_info(ad, res, ox_ad_dtype(ad, x), rb, bd);
            rres = rb;
        }
        if (known) { /* sum the dims k does not have, or has as 1 */
            int lead = rres - rank, n_axes = 0;
            int64_t axes[OX_MAX_RANK];
            for (int q = 0; q < rres; q++)
                if (q < lead || (xd[q - lead] == 1 && ox_ad_dim(ad, res, q) != 1))
                    axes[n_axes++] = q;
            if (n_axes) {
                res = ox_ad_reduce(ad, "ReduceSum", res, n_axes, axes, lead == 0);
                if (lead && n_axes > lead)
                    res = OX_AD(ad, "Reshape", res, ox_ad_ints(ad, rank, xd));
                ox_ad_set_info(ad, res, ox_ad_dtype(ad, x), rank, xd);
            }
        } else {
            res = ox_ad_unbroadcast(ad, res, xt);
        }
        gx[k] = moved ? ox_ad_transpose(ad, res, rank, inv) : res;
    }
    return OX_OK;
}
