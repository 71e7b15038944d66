/* Gradient rules: elementwise math, reductions, CumSum, CumProd, MatMul, Gemm, Range, Det and
 * DequantizeLinear's scale (graph/autograd.h says the contract). Ops whose output moves in steps,
 * or depends on the input's shape only (Floor, Sign, EyeLike, the random ...Like ops), pass no
 * gradient. */
#include "graph/autograd.h"

#include "kernels/op.h"

#include <stdlib.h>
#include <string.h>

/* Rules flagged OX_GRAD_UNBROADCAST (grad_math.def) give gradients in the output's shape. */
ox_status ox_grad_add(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    for (int i = 0; i < 2; i++)
        if (ox_ad_wants(ad, n, i)) gx[i] = gy[0];
    return OX_OK;
}

ox_status ox_grad_sub(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    if (ox_ad_wants(ad, n, 0)) gx[0] = gy[0];
    if (ox_ad_wants(ad, n, 1)) gx[1] = ox_ad_neg(ad, gy[0]);
    return OX_OK;
}

ox_status ox_grad_mul(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    int a = n->inputs[0], b = n->inputs[1];
    if (ox_ad_wants(ad, n, 0)) gx[0] = ox_ad_mul(ad, gy[0], b);
    if (ox_ad_wants(ad, n, 1)) gx[1] = ox_ad_mul(ad, gy[0], a);
    return OX_OK;
}

/* y = a / b: da = g / b, db = -g * y / b */
ox_status ox_grad_div(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    int y = n->outputs[0];
    int gb = ox_ad_div(ad, gy[0], n->inputs[1]);
    if (ox_ad_wants(ad, n, 0)) gx[0] = gb;
    if (ox_ad_wants(ad, n, 1)) gx[1] = ox_ad_neg(ad, ox_ad_mul(ad, gb, y));
    return OX_OK;
}

ox_status ox_grad_neg(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    gx[0] = ox_ad_neg(ad, gy[0]);
    (void)n;
    return OX_OK;
}

ox_status ox_grad_identity(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    (void)ad, (void)n;
    gx[0] = gy[0];
    return OX_OK;
}

/* dx = g * (y > 0) */
ox_status ox_grad_relu(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    int y = n->outputs[0];
    int pos = OX_AD(ad, "Greater", y, ox_ad_scalar_like(ad, 0.0, y));
    int zero = ox_ad_scalar_like(ad, 0.0, y);
    gx[0] = OX_AD(ad, "Where", pos, gy[0], zero);
    return OX_OK;
}

ox_status ox_grad_sum(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    for (int i = 0; i < n->n_inputs; i++)
        if (ox_ad_wants(ad, n, i)) gx[i] = gy[0];
    return OX_OK;
}

/* The last two axes swapped, for a value of rank r (r >= 2). */
static int swap_last(struct ox_ad *ad, int x, int r) {
    int64_t perm[OX_MAX_RANK];
    for (int k = 0; k < r; k++) perm[k] = k;
    perm[r - 2] = r - 1;
    perm[r - 1] = r - 2;
    return ox_ad_transpose(ad, x, r, perm);
}

/* Y = A @ B (numpy matmul: 1-D operands get a dim added and removed, batch dims broadcast).
 * dA = dY @ B^T, dB = A^T @ dY in the broadcast batch shape (the walker sums them back); a
 * 1-D operand's added dim is squeezed out first. */
ox_status ox_grad_matmul(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    int a = n->inputs[0], b = n->inputs[1], g = gy[0];
    int ra = ox_ad_rank(ad, a), rb = ox_ad_rank(ad, b);
    if (ra < 1 || rb < 1)
        return ox_ad_fail(ad, n, OX_E_UNSUPPORTED, "MatMul needs operands of known rank");
    int a2 = a, b2 = b;
    /* 1-D operands: a [k] -> [1,k]; b [k] -> [k,1]; g gets the removed dims back */
    if (ra == 1) {
        a2 = ox_ad_unsqueeze(ad, a, 1, (int64_t[]){0});
        g = ox_ad_unsqueeze(ad, g, 1, (int64_t[]){rb == 1 ? 0 : -2});
        ra = 2;
    }
    if (rb == 1) {
        b2 = ox_ad_unsqueeze(ad, b, 1, (int64_t[]){1});
        g = ox_ad_unsqueeze(ad, g, 1, (int64_t[]){-1});
        rb = 2;
    }
    if (ox_ad_wants(ad, n, 0)) {
        int d = ox_ad_matmul(ad, g, swap_last(ad, b2, rb));
        gx[0] = a2 != a ? ox_ad_squeeze(ad, d, 1, (int64_t[]){-2}) : d;
    }
    if (ox_ad_wants(ad, n, 1)) {
        int d = ox_ad_matmul(ad, swap_last(ad, a2, ra), g);
        gx[1] = b2 != b ? ox_ad_squeeze(ad, d, 1, (int64_t[]){-1}) : d;
    }
    return OX_OK;
}

/* Y = alpha * A' B' + beta * C, A' = transA ? A^T : A, B' likewise.
 * dA' = alpha dY B'^T, dB' = alpha A'^T dY, dC = beta * unbroadcast(dY). */
ox_status ox_grad_gemm(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    const struct ox_attr *at;
    float alpha = (at = ox_node_attr(n, "alpha")) ? at->f : 1.0f;
    float beta = (at = ox_node_attr(n, "beta")) ? at->f : 1.0f;
    bool ta = (at = ox_node_attr(n, "transA")) && at->i;
    bool tb = (at = ox_node_attr(n, "transB")) && at->i;
    int a = n->inputs[0], b = n->inputs[1], g = gy[0];
    if (ox_ad_wants(ad, n, 0)) {
        /* dA = alpha * (transA ? B' dY^T : dY B'^T) */
        int d = ta ? ox_ad_opa(ad, "Gemm", 2, (int[]){b, g}, "i:transA i:transB f:alpha",
                               (int64_t)tb, (int64_t)1, (double)alpha)
                   : ox_ad_opa(ad, "Gemm", 2, (int[]){g, b}, "i:transA i:transB f:alpha",
                               (int64_t)0, (int64_t)!tb, (double)alpha);
        gx[0] = d;
    }
    if (ox_ad_wants(ad, n, 1)) {
        /* dB = alpha * (transB ? dY^T A' : A'^T dY) */
        int d = tb ? ox_ad_opa(ad, "Gemm", 2, (int[]){g, a}, "i:transA i:transB f:alpha",
                               (int64_t)1, (int64_t)ta, (double)alpha)
                   : ox_ad_opa(ad, "Gemm", 2, (int[]){a, g}, "i:transA i:transB f:alpha",
                               (int64_t)!ta, (int64_t)0, (double)alpha);
        gx[1] = d;
    }
    if (n->n_inputs > 2 && ox_ad_wants(ad, n, 2)) {
        int d = g;
        if (beta != 1.0f) d = ox_ad_mul(ad, g, ox_ad_scalar_like(ad, beta, g));
        gx[2] = ox_ad_unbroadcast(ad, d, n->inputs[2]);
    }
    return OX_OK;
}

/* ---- helpers --------------------------------------------------------------------------- */

/* A scalar constant of like's element type. */
static int k(struct ox_ad *ad, double c, int like) {
    return ox_ad_scalar_like(ad, c, like);
}

/* r, recorded with v's rank and dims and element type dt: for results of ops the kit does not
 * follow (Where, Pow, ...) that the walker sums back over broadcast axes. */
static int info_as(struct ox_ad *ad, int r, int v, ox_dtype dt) {
    int64_t d[OX_MAX_RANK];
    int rank = ox_ad_rank(ad, v);
    for (int i = 0; i < rank; i++) d[i] = ox_ad_dim(ad, v, i);
    ox_ad_set_info(ad, r, dt, rank, d);
    return r;
}

/* r, recorded with the facts of v. */
static int info_of(struct ox_ad *ad, int r, int v) {
    return info_as(ad, r, v, ox_ad_dtype(ad, v));
}

static int sq(struct ox_ad *ad, int a) {
    return ox_ad_mul(ad, a, a);
}

/* g where mask holds, else 0 (zero of like's type). */
static int where_g(struct ox_ad *ad, int mask, int g, int like) {
    return OX_AD(ad, "Where", mask, g, k(ad, 0.0, like));
}

/* ---- elementwise unary ----------------------------------------------------------------- */

/* A rule of a one-input, one-output op: the body returns dx from g (the output's gradient),
 * x (the input) and y (the output); n is the node, for its attributes. */
#define UNARY_RULE(name)                                                                           \
    static int name##_dx(struct ox_ad *ad, const struct ox_node *n, int g, int x, int y);          \
    ox_status ox_grad_##name(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {  \
        gx[0] = name##_dx(ad, n, gy[0], n->inputs[0], n->outputs[0]);                              \
        return OX_OK;                                                                              \
    }                                                                                              \
    static int name##_dx(struct ox_ad *ad, const struct ox_node *n __attribute__((unused)), int g, \
                         int x __attribute__((unused)), int y __attribute__((unused)))

UNARY_RULE(exp) {
    return ox_ad_mul(ad, g, y);
}

UNARY_RULE(log) {
    return ox_ad_div(ad, g, x);
}

/* d sqrt(x) = 1 / (2 y) */
UNARY_RULE(sqrt) {
    return ox_ad_div(ad, g, ox_ad_mul(ad, y, k(ad, 2.0, y)));
}

/* d (1/x) = -y^2 */
UNARY_RULE(reciprocal) {
    return ox_ad_neg(ad, ox_ad_mul(ad, g, sq(ad, y)));
}

UNARY_RULE(abs) {
    return ox_ad_mul(ad, g, OX_AD(ad, "Sign", x));
}

/* d sigmoid = y (1 - y) */
UNARY_RULE(sigmoid) {
    return ox_ad_mul(ad, g, ox_ad_mul(ad, y, ox_ad_sub(ad, k(ad, 1.0, y), y)));
}

/* d tanh = 1 - y^2 */
UNARY_RULE(tanh) {
    return ox_ad_mul(ad, g, ox_ad_sub(ad, k(ad, 1.0, y), sq(ad, y)));
}

/* d erf = 2/sqrt(pi) exp(-x^2) */
UNARY_RULE(erf) {
    int e = OX_AD(ad, "Exp", ox_ad_neg(ad, sq(ad, x)));
    return ox_ad_mul(ad, g, ox_ad_mul(ad, e, k(ad, 1.12837916709551257390, x)));
}

UNARY_RULE(sin) {
    return ox_ad_mul(ad, g, OX_AD(ad, "Cos", x));
}

UNARY_RULE(cos) {
    return ox_ad_neg(ad, ox_ad_mul(ad, g, OX_AD(ad, "Sin", x)));
}

/* d tan = 1 + y^2 */
UNARY_RULE(tan) {
    return ox_ad_mul(ad, g, ox_ad_add(ad, k(ad, 1.0, y), sq(ad, y)));
}

/* d asin = 1 / sqrt(1 - x^2), d acos its negation */
UNARY_RULE(asin) {
    return ox_ad_div(ad, g, OX_AD(ad, "Sqrt", ox_ad_sub(ad, k(ad, 1.0, x), sq(ad, x))));
}

UNARY_RULE(acos) {
    return ox_ad_neg(ad,
                     ox_ad_div(ad, g, OX_AD(ad, "Sqrt", ox_ad_sub(ad, k(ad, 1.0, x), sq(ad, x)))));
}

/* d atan = 1 / (1 + x^2) */
UNARY_RULE(atan) {
    return ox_ad_div(ad, g, ox_ad_add(ad, k(ad, 1.0, x), sq(ad, x)));
}

UNARY_RULE(sinh) {
    return ox_ad_mul(ad, g, OX_AD(ad, "Cosh", x));
}

UNARY_RULE(cosh) {
    return ox_ad_mul(ad, g, OX_AD(ad, "Sinh", x));
}

/* d asinh = 1 / sqrt(x^2 + 1) */
UNARY_RULE(asinh) {
    return ox_ad_div(ad, g, OX_AD(ad, "Sqrt", ox_ad_add(ad, sq(ad, x), k(ad, 1.0, x))));
}

/* d acosh = 1 / sqrt(x^2 - 1) */
UNARY_RULE(acosh) {
    return ox_ad_div(ad, g, OX_AD(ad, "Sqrt", ox_ad_sub(ad, sq(ad, x), k(ad, 1.0, x))));
}

/* d atanh = 1 / (1 - x^2) */
UNARY_RULE(atanh) {
    return ox_ad_div(ad, g, ox_ad_sub(ad, k(ad, 1.0, x), sq(ad, x)));
}

/* d log(1 + e^x) = sigmoid(x) */
UNARY_RULE(softplus) {
    return ox_ad_mul(ad, g, OX_AD(ad, "Sigmoid", x));
}

/* d x/(1+|x|) = 1 / (1+|x|)^2 */
UNARY_RULE(softsign) {
    int d = ox_ad_add(ad, k(ad, 1.0, x), OX_AD(ad, "Abs", x));
    return ox_ad_div(ad, g, sq(ad, d));
}

/* x > 0: 1; else alpha e^x = y + alpha */
UNARY_RULE(elu) {
    double alpha = ox_attr_float(n, "alpha", 1.0f);
    int pos = OX_AD(ad, "Greater", x, k(ad, 0.0, x));
    return OX_AD(ad, "Where", pos, g, ox_ad_mul(ad, g, ox_ad_add(ad, y, k(ad, alpha, y))));
}

/* x > 0: gamma; else gamma alpha e^x = y + gamma alpha */
UNARY_RULE(selu) {
    double alpha = ox_attr_float(n, "alpha", 1.67326319217681884765625f);
    double gamma = ox_attr_float(n, "gamma", 1.05070102214813232421875f);
    int pos = OX_AD(ad, "Greater", x, k(ad, 0.0, x));
    int neg = ox_ad_mul(ad, g, ox_ad_add(ad, y, k(ad, gamma * alpha, y)));
    return OX_AD(ad, "Where", pos, ox_ad_mul(ad, g, k(ad, gamma, x)), neg);
}

/* x > 0: 1; else e^(x/alpha) */
UNARY_RULE(celu) {
    double alpha = ox_attr_float(n, "alpha", 1.0f);
    int pos = OX_AD(ad, "Greater", x, k(ad, 0.0, x));
    int e = OX_AD(ad, "Exp", ox_ad_div(ad, x, k(ad, alpha, x)));
    return OX_AD(ad, "Where", pos, g, ox_ad_mul(ad, g, e));
}

/* x < 0: alpha; else 1 */
UNARY_RULE(leakyrelu) {
    double alpha = ox_attr_float(n, "alpha", 0.01f);
    int neg = OX_AD(ad, "Less", x, k(ad, 0.0, x));
    return OX_AD(ad, "Where", neg, ox_ad_mul(ad, g, k(ad, alpha, x)), g);
}

/* y = clamp(alpha x + beta, 0, 1): alpha where 0 < y < 1 */
UNARY_RULE(hardsigmoid) {
    double alpha = ox_attr_float(n, "alpha", 0.2f);
    int in = OX_AD(ad, "And", OX_AD(ad, "Greater", y, k(ad, 0.0, y)),
                   OX_AD(ad, "Less", y, k(ad, 1.0, y)));
    return where_g(ad, in, ox_ad_mul(ad, g, k(ad, alpha, y)), y);
}

/* y = x clamp(x/6 + 1/2, 0, 1): 0 below -3, 1 above 3, x/3 + 1/2 between */
UNARY_RULE(hardswish) {
    int mid = ox_ad_add(ad, ox_ad_div(ad, x, k(ad, 3.0, x)), k(ad, 0.5, x));
    int hi = OX_AD(ad, "Where", OX_AD(ad, "Greater", x, k(ad, 3.0, x)), k(ad, 1.0, x), mid);
    int d = OX_AD(ad, "Where", OX_AD(ad, "Less", x, k(ad, -3.0, x)), k(ad, 0.0, x), hi);
    return ox_ad_mul(ad, g, d);
}

/* x > alpha: 1; else 0 */
UNARY_RULE(thresholdedrelu) {
    double alpha = ox_attr_float(n, "alpha", 1.0f);
    return where_g(ad, OX_AD(ad, "Greater", x, k(ad, alpha, x)), g, x);
}

/* none: y = x Phi(x), dy = Phi(x) + x phi(x) with Phi(x) = (1 + erf(x/sqrt2))/2,
 * phi(x) = e^(-x^2/2)/sqrt(2 pi).
 * tanh: y = x (1 + t)/2, t = tanh(u), u = c (x + a x^3): dy = (1 + t)/2 + x (1 - t^2) du/2,
 * du = c (1 + 3 a x^2). */
UNARY_RULE(gelu) {
    const char *approx = ox_attr_str(n, "approximate", "none");
    int x2 = sq(ad, x), d;
    if (strcmp(approx, "tanh") == 0) {
        const double c = 0.79788456080286535588, a = 0.044715;
        int u = ox_ad_mul(ad, ox_ad_add(ad, x, ox_ad_mul(ad, ox_ad_mul(ad, x2, x), k(ad, a, x))),
                          k(ad, c, x));
        int t = OX_AD(ad, "Tanh", u);
        int du = ox_ad_mul(ad, ox_ad_add(ad, k(ad, 1.0, x), ox_ad_mul(ad, x2, k(ad, 3 * a, x))),
                           k(ad, c, x));
        int left = ox_ad_mul(ad, ox_ad_add(ad, k(ad, 1.0, x), t), k(ad, 0.5, x));
        int right = ox_ad_mul(ad, ox_ad_mul(ad, x, ox_ad_sub(ad, k(ad, 1.0, x), sq(ad, t))),
                              ox_ad_mul(ad, du, k(ad, 0.5, x)));
        d = ox_ad_add(ad, left, right);
    } else if (strcmp(approx, "none") == 0) {
        int erf = OX_AD(ad, "Erf", ox_ad_mul(ad, x, k(ad, 0.70710678118654752440, x)));
        int cdf = ox_ad_mul(ad, ox_ad_add(ad, k(ad, 1.0, x), erf), k(ad, 0.5, x));
        int pdf = ox_ad_mul(ad, OX_AD(ad, "Exp", ox_ad_mul(ad, x2, k(ad, -0.5, x))),
                            k(ad, 0.39894228040143267794, x));
        d = ox_ad_add(ad, cdf, ox_ad_mul(ad, x, pdf));
    } else {
        ox_ad_fail(ad, n, OX_E_UNSUPPORTED, "Gelu approximate '%s'", approx);
        return -1;
    }
    return ox_ad_mul(ad, g, d);
}

/* y = x tanh(sp(x)), sp = softplus: dy = t + x (1 - t^2) sigmoid(x), t = tanh(sp(x)) */
UNARY_RULE(mish) {
    int t = OX_AD(ad, "Tanh", OX_AD(ad, "Softplus", x));
    int s = OX_AD(ad, "Sigmoid", x);
    int d = ox_ad_add(ad, t,
                      ox_ad_mul(ad, ox_ad_mul(ad, x, ox_ad_sub(ad, k(ad, 1.0, x), sq(ad, t))), s));
    return ox_ad_mul(ad, g, d);
}

/* y = x - bias above lambd, x + bias below -lambd, 0 between: dx = g where |x| > lambd */
UNARY_RULE(shrink) {
    double lambd = ox_attr_float(n, "lambd", 0.5f);
    return where_g(ad, OX_AD(ad, "Greater", OX_AD(ad, "Abs", x), k(ad, lambd, x)), g, x);
}

/* y = x s, s = sigmoid(alpha x) (opset 24): dy = s (1 + alpha x (1 - s)) */
UNARY_RULE(swish) {
    double alpha = ox_attr_float(n, "alpha", 1.0f);
    int s = OX_AD(ad, "Sigmoid", ox_ad_mul(ad, x, k(ad, alpha, x)));
    int t = ox_ad_mul(ad, ox_ad_mul(ad, x, k(ad, alpha, x)), ox_ad_sub(ad, k(ad, 1.0, x), s));
    return ox_ad_mul(ad, g, ox_ad_mul(ad, s, ox_ad_add(ad, k(ad, 1.0, x), t)));
}

/* ---- elementwise, several inputs ------------------------------------------------------- */

/* y = x < 0 ? slope x : x (slope broadcasts to x): dx = x < 0 ? g slope : g,
 * dslope = x < 0 ? g x : 0, in y's shape (summed back by the walker). */
ox_status ox_grad_prelu(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    int x = n->inputs[0], s = n->inputs[1], y = n->outputs[0], g = gy[0];
    int neg = OX_AD(ad, "Less", x, k(ad, 0.0, x));
    if (ox_ad_wants(ad, n, 0))
        gx[0] = info_of(ad, OX_AD(ad, "Where", neg, ox_ad_mul(ad, g, s), g), y);
    if (ox_ad_wants(ad, n, 1)) gx[1] = info_of(ad, where_g(ad, neg, ox_ad_mul(ad, g, x), y), y);
    return OX_OK;
}

/* y = min(max(x, lo), hi) (lo > hi gives hi everywhere): dx = g where lo < x < hi; dlo = g
 * where x < lo <= hi; dhi = g where x > hi or lo > hi. Bounds are optional scalar inputs. */
ox_status ox_grad_clip(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    int x = n->inputs[0], y = n->outputs[0], g = gy[0];
    int lo = n->n_inputs > 1 ? n->inputs[1] : -1, hi = n->n_inputs > 2 ? n->inputs[2] : -1;
    if (ox_ad_wants(ad, n, 0)) {
        int pass = -1;
        if (lo >= 0) pass = OX_AD(ad, "Greater", x, lo);
        if (hi >= 0) {
            int below = OX_AD(ad, "Less", x, hi);
            pass = pass >= 0 ? OX_AD(ad, "And", pass, below) : below;
        }
        gx[0] = pass >= 0 ? info_of(ad, where_g(ad, pass, g, y), y) : g;
    }
    int crossed = lo >= 0 && hi >= 0 ? OX_AD(ad, "Greater", lo, hi) : -1;
    if (ox_ad_wants(ad, n, 1)) {
        int m = OX_AD(ad, "Less", x, lo);
        if (crossed >= 0) m = OX_AD(ad, "And", m, OX_AD(ad, "Not", crossed));
        gx[1] = info_of(ad, where_g(ad, m, g, y), y);
    }
    if (ox_ad_wants(ad, n, 2)) {
        int m = OX_AD(ad, "Greater", x, hi);
        if (crossed >= 0) m = OX_AD(ad, "Or", m, crossed);
        gx[2] = info_of(ad, where_g(ad, m, g, y), y);
    }
    return OX_OK;
}

/* y = a^b: da = g b a^(b-1), db = g y log(a). The exponent may have another type (an integer
 * power of a float): it is cast to a's type for da, and db is cast back to b's type. */
ox_status ox_grad_pow(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    int a = n->inputs[0], b = n->inputs[1], y = n->outputs[0], g = gy[0];
    ox_dtype ta = ox_ad_dtype(ad, a), tb = ox_ad_dtype(ad, b);
    if (ox_ad_wants(ad, n, 0)) {
        int bb = ta == tb && ta != OX_UNDEFINED ? b : ox_ad_cast_like(ad, b, a);
        int p = OX_AD(ad, "Pow", a, ox_ad_sub(ad, bb, k(ad, 1.0, a)));
        gx[0] = info_of(ad, ox_ad_mul(ad, g, ox_ad_mul(ad, bb, p)), y);
    }
    if (ox_ad_wants(ad, n, 1)) {
        int d = ox_ad_mul(ad, g, ox_ad_mul(ad, y, OX_AD(ad, "Log", a)));
        if (ta != tb) d = ox_ad_cast_like(ad, d, b);
        gx[1] = info_as(ad, d, y, tb);
    }
    return OX_OK;
}

/* Max/Min: the gradient goes to the first input that equals the result (elementwise, after
 * broadcasting), so ties do not count twice. */
ox_status ox_grad_max(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    int y = n->outputs[0], g = gy[0], taken = -1;
    if (n->n_inputs == 1) {
        gx[0] = g;
        return OX_OK;
    }
    for (int i = 0; i < n->n_inputs; i++) {
        int m = OX_AD(ad, "Equal", n->inputs[i], y);
        if (taken >= 0) m = OX_AD(ad, "And", m, OX_AD(ad, "Not", taken));
        if (ox_ad_wants(ad, n, i)) gx[i] = info_of(ad, where_g(ad, m, g, y), y);
        if (i + 1 < n->n_inputs) taken = taken >= 0 ? OX_AD(ad, "Or", taken, m) : m;
    }
    return OX_OK;
}

ox_status ox_grad_mean(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    int d = ox_ad_div(ad, gy[0], k(ad, n->n_inputs, n->outputs[0]));
    for (int i = 0; i < n->n_inputs; i++)
        if (ox_ad_wants(ad, n, i)) gx[i] = d;
    return OX_OK;
}

/* y = c ? a : b: da = c ? g : 0, db = c ? 0 : g (c has no gradient). */
ox_status ox_grad_where(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    int c = n->inputs[0], y = n->outputs[0], g = gy[0];
    if (ox_ad_wants(ad, n, 1)) gx[1] = info_of(ad, where_g(ad, c, g, y), y);
    if (ox_ad_wants(ad, n, 2)) gx[2] = info_of(ad, OX_AD(ad, "Where", c, k(ad, 0.0, y), g), y);
    return OX_OK;
}

/* SwiGLU (opset 28): y = swish(a) b, a and b of one shape; da = g b swish'(a),
 * db = g swish(a), swish(a) = a s, s = sigmoid(alpha a), swish' = s (1 + alpha a (1 - s)). */
ox_status ox_grad_swiglu(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    int a = n->inputs[0], b = n->inputs[1], g = gy[0];
    double alpha = ox_attr_float(n, "alpha", 1.0f);
    int aa = ox_ad_mul(ad, a, k(ad, alpha, a));
    int s = OX_AD(ad, "Sigmoid", aa);
    if (ox_ad_wants(ad, n, 0)) {
        int t = ox_ad_mul(ad, aa, ox_ad_sub(ad, k(ad, 1.0, a), s));
        int d = ox_ad_mul(ad, s, ox_ad_add(ad, k(ad, 1.0, a), t));
        gx[0] = ox_ad_mul(ad, ox_ad_mul(ad, g, b), d);
    }
    if (ox_ad_wants(ad, n, 1)) gx[1] = ox_ad_mul(ad, g, ox_ad_mul(ad, a, s));
    return OX_OK;
}

/* Mod of floats: y = a - b q with q = trunc(a / b) (fmod = 1, C's fmod) or floor(a / b)
 * (fmod = 0, the divisor's sign). q is piecewise constant: da = g, db = -g q. */
ox_status ox_grad_mod(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    int a = n->inputs[0], b = n->inputs[1], y = n->outputs[0], g = gy[0];
    if (ox_ad_wants(ad, n, 0)) gx[0] = g;
    if (ox_ad_wants(ad, n, 1)) {
        int q = ox_ad_div(ad, a, b);
        if (ox_attr_int(n, "fmod", 0))
            q = ox_ad_mul(ad, OX_AD(ad, "Sign", q), OX_AD(ad, "Floor", OX_AD(ad, "Abs", q)));
        else
            q = OX_AD(ad, "Floor", q);
        gx[1] = info_of(ad, ox_ad_neg(ad, ox_ad_mul(ad, g, q)), y);
    }
    return OX_OK;
}

/* y = start + i delta for i in [0, n): dstart = sum(g), ddelta = sum(g i); the count n moves
 * in steps, so limit gets nothing. */
ox_status ox_grad_range(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    int g = gy[0];
    if (ox_ad_wants(ad, n, 0)) gx[0] = ox_ad_reduce(ad, "ReduceSum", g, 0, NULL, false);
    if (ox_ad_wants(ad, n, 2)) {
        int cnt = OX_AD(ad, "Size", g);
        ox_ad_set_info(ad, cnt, OX_INT64, 0, NULL);
        int i = OX_AD(ad, "Range", ox_ad_int(ad, 0), cnt, ox_ad_int(ad, 1));
        ox_ad_set_info(ad, i, OX_INT64, 1, NULL);
        i = ox_ad_cast_like(ad, i, g);
        gx[2] = ox_ad_reduce(ad, "ReduceSum", ox_ad_mul(ad, g, i), 0, NULL, false);
    }
    return OX_OK;
}

/* Det of [..., M, M] (M known): d det / dX[i][j] is the cofactor (-1)^(i+j) det(minor ij),
 * exact even where X is singular. The minors come from two Gathers of the rows and columns
 * other than i and j, [..., M, M-1, M, M-1], moved to [..., M, M, M-1, M-1]. */
ox_status ox_grad_det(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    int x = n->inputs[0], r = ox_ad_rank(ad, x);
    int64_t m = r >= 2 ? ox_ad_dim(ad, x, r - 1) : -1;
    if (m < 1 || m > 64 || r + 2 > OX_MAX_RANK)
        return ox_ad_fail(ad, n, OX_E_UNSUPPORTED,
                          "Det needs an input of known rank with a known matrix size (up to 64)");
    int gk = ox_ad_unsqueeze(ad, gy[0], 2, (int64_t[]){-2, -1});
    if (m == 1) {
        gx[0] = ox_ad_expand_like(ad, gk, x);
        return OX_OK;
    }
    int64_t *others = calloc((size_t)(m * (m - 1)), sizeof *others);
    double *sign = calloc((size_t)(m * m), sizeof *sign);
    if (!others || !sign) {
        free(others);
        free(sign);
        return ox_ad_fail(ad, n, OX_E_NOMEM, "out of memory");
    }
    for (int64_t i = 0; i < m; i++) {
        for (int64_t j = 0, c = 0; j < m; j++)
            if (j != i) others[i * (m - 1) + c++] = j;
        for (int64_t j = 0; j < m; j++) sign[i * m + j] = (i + j) % 2 ? -1.0 : 1.0;
    }
    int oth = ox_ad_ints(ad, (int)(m * (m - 1)), others);
    oth = OX_AD(ad, "Reshape", oth, ox_ad_ints(ad, 2, (int64_t[]){m, m - 1}));
    ox_tensor st = {.dtype = OX_DOUBLE, .rank = 2, .dims = {m, m}, .data = sign};
    int sg = ox_ad_cast_like(ad, ox_ad_const(ad, &st), x);
    free(others);
    free(sign);
    /* [..., M, M] -> rows [..., M, M-1, M] -> columns [..., M, M-1, M, M-1] */
    int rows = ox_ad_opa(ad, "Gather", 2, (int[]){x, oth}, "i:axis", (int64_t)(r - 2));
    int minors = ox_ad_opa(ad, "Gather", 2, (int[]){rows, oth}, "i:axis", (int64_t)r);
    ox_ad_set_info(ad, minors, ox_ad_dtype(ad, x), r + 2, NULL);
    int64_t perm[OX_MAX_RANK];
    for (int k2 = 0; k2 < r - 2; k2++) perm[k2] = k2;
    perm[r - 2] = r - 2, perm[r - 1] = r, perm[r] = r - 1, perm[r + 1] = r + 1;
    int det = OX_AD(ad, "Det", ox_ad_transpose(ad, minors, r + 2, perm));
    ox_ad_info_as(ad, det, x, OX_UNDEFINED);
    gx[0] = ox_ad_mul(ad, gk, ox_ad_mul(ad, det, sg));
    return OX_OK;
}

/* DequantizeLinear: y = (x - zero_point) * scale; x is an integer, so only the scale learns:
 * dscale sums gy * (x - zero_point) over the elements each scale covers (all of them per
 * tensor; all but `axis` per axis; blocks of block_size along `axis`, blocked). x - zero_point
 * comes from a DequantizeLinear with ones for the scale. The com.microsoft form is the same
 * op (per tensor or per axis). */
ox_status ox_grad_dequantize(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    int x = n->inputs[0], s = n->inputs[1], g = gy[0], r = ox_ad_rank(ad, x);
    int zp = n->n_inputs > 2 ? n->inputs[2] : -1;
    if (!ox_ad_wants(ad, n, 1)) return OX_OK;
    if (r < 0 || !ox_ad_static(ad, s))
        return ox_ad_fail(ad, n, OX_E_UNSUPPORTED,
                          "DequantizeLinear needs x of known rank and a scale of known shape");
    int sr = ox_ad_rank(ad, s);
    int64_t sn = 1;
    for (int k = 0; k < sr; k++) sn *= ox_ad_dim(ad, s, k);
    int64_t axis = ox_attr_int(n, "axis", 1), block = 0;
    if (axis < 0) axis += r;
    if (!n->domain[0] && n->opset >= 21) block = ox_attr_int(n, "block_size", 0);
    int dq = -1;
    struct ox_node *nd = ox_ad_node(ad, "DequantizeLinear", zp >= 0 ? 3 : 2,
                                    (int[]){x, ox_ad_ones_like(ad, s), zp}, 1, &dq);
    if (nd && sn != 1) ox_ad_set_attr(ad, nd, "i:axis", axis);
    if (nd && block > 0) ox_ad_set_attr(ad, nd, "i:block_size", block);
    if (nd && !n->domain[0] && n->opset >= 23 && ox_attr_int(n, "output_dtype", 0))
        ox_ad_set_attr(ad, nd, "i:output_dtype", ox_attr_int(n, "output_dtype", 0));
    ox_ad_set_info(ad, dq, ox_ad_dtype(ad, g), r, NULL);
    int p = ox_ad_mul(ad, g, dq), d;
    if (sn == 1) {
        d = ox_ad_reshape_like(ad, ox_ad_reduce(ad, "ReduceSum", p, 0, NULL, false), s);
    } else if (axis < 0 || axis >= r) {
        return ox_ad_fail(ad, n, OX_E_INVALID, "axis %lld for rank %d",
                          (long long)ox_attr_int(n, "axis", 1), r);
    } else if (block <= 0) {
        int64_t axes[OX_MAX_RANK];
        int n_axes = 0;
        for (int k = 0; k < r; k++)
            if (k != axis) axes[n_axes++] = k;
        d = n_axes ? ox_ad_reduce(ad, "ReduceSum", p, n_axes, axes, false) : p;
    } else {
        /* pad the axis up to (number of blocks) * block, view it as [blocks, block], sum */
        int64_t nb = sr == r ? ox_ad_dim(ad, s, (int)axis) : -1, len = ox_ad_dim(ad, x, (int)axis);
        if (nb < 0 || len < 0 || r + 1 > OX_MAX_RANK)
            return ox_ad_fail(ad, n, OX_E_UNSUPPORTED,
                              "blocked DequantizeLinear needs the axis' length");
        if (nb * block > len) {
            int64_t pads[2 * OX_MAX_RANK] = {0};
            pads[r + axis] = nb * block - len;
            p = OX_AD(ad, "Pad", p, ox_ad_ints(ad, 2 * r, pads));
        }
        int64_t view[OX_MAX_RANK + 1]; /* 0 copies a dim before the axis; one -1 after it */
        int unknown = 0;
        for (int k = 0, j = 0; k < r; k++) {
            int64_t dk = ox_ad_dim(ad, x, k);
            view[j++] = k < axis ? 0 : k == axis ? nb : dk;
            if (k == axis) view[j++] = block;
            if (k > axis && dk < 0) unknown++;
        }
        if (unknown > 1)
            return ox_ad_fail(ad, n, OX_E_UNSUPPORTED,
                              "blocked DequantizeLinear needs x's dims after the axis");
        p = OX_AD(ad, "Reshape", p, ox_ad_ints(ad, r + 1, view));
        ox_ad_set_info(ad, p, ox_ad_dtype(ad, g), r + 1, NULL);
        d = ox_ad_reduce(ad, "ReduceSum", p, 1, (int64_t[]){axis + 1}, false);
    }
    gx[1] = ox_ad_cast_like(ad, d, s);
    return OX_OK;
}

/* Cast, CastLike: between float types, the gradient cast back to the input's type; from or to
 * other types nothing flows (the walker asks only for float values). */
ox_status ox_grad_cast(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    int x = n->inputs[0];
    if (ox_ad_wants(ad, n, 0) && ox_dtype_is_float(ox_ad_dtype(ad, n->outputs[0])))
        gx[0] = ox_ad_cast_like(ad, gy[0], x);
    return OX_OK;
}

/* ---- reductions ------------------------------------------------------------------------ */

/* What a Reduce* node reduces: `all` axes, `none` (noop_with_empty_axes with no axes), or the
 * n_axes listed (as given, negative ones included); keep: keepdims. */
struct red {
    bool all, none, keep;
    int n_axes;
    int64_t axes[OX_MAX_RANK];
};

static ox_status red_read(struct ox_ad *ad, const struct ox_node *n, struct red *r) {
    memset(r, 0, sizeof *r);
    r->keep = ox_attr_int(n, "keepdims", 1) != 0;
    bool noop = false;
    if (n->opset >= (strcmp(n->op_type, "ReduceSum") == 0 ? 13 : 18)) {
        int a = n->n_inputs > 1 ? n->inputs[1] : -1;
        if (a >= 0 && !ox_ad_const_ints(ad, a, OX_MAX_RANK, r->axes, &r->n_axes))
            return ox_ad_fail(ad, n, OX_E_UNSUPPORTED,
                              "%s: the axes '%s' are not a constant of at most %d integers",
                              n->op_type, ox_ad_graph(ad)->values[a].name, OX_MAX_RANK);
        noop = ox_attr_int(n, "noop_with_empty_axes", 0) != 0;
    } else {
        const int64_t *axes;
        int na = ox_attr_ints(n, "axes", &axes);
        if (na > OX_MAX_RANK)
            return ox_ad_fail(ad, n, OX_E_UNSUPPORTED, "%s: %d axes", n->op_type, na);
        for (int i = 0; i < na; i++) r->axes[i] = axes[i];
        r->n_axes = na > 0 ? na : 0;
    }
    if (!r->n_axes) {
        r->none = noop;
        r->all = !noop;
    }
    return OX_OK;
}

/* A reduced value (g or y) with the reduced axes back as size-1 dims, so that it broadcasts
 * against the input. Without keepdims over every axis it is a scalar, which broadcasts. */
static int red_keep(struct ox_ad *ad, const struct red *r, int v) {
    if (r->keep || r->all || r->none) return v;
    return ox_ad_unsqueeze(ad, v, r->n_axes, r->axes);
}

/* v reduced with `op` over the same axes, keeping dims. */
static int red_again(struct ox_ad *ad, const struct red *r, const char *op, int v) {
    if (r->none) return v;
    return ox_ad_reduce(ad, op, v, r->all ? 0 : r->n_axes, r->axes, true);
}

/* The gradient of a Reduce* node's input x, from g kept (gk) and y kept (yk). */
static int red_dx(struct ox_ad *ad, const struct ox_node *n, const struct red *r, int gk, int x,
                  int yk) {
    const char *op = n->op_type + strlen("Reduce");
    if (strcmp(op, "Sum") == 0) return ox_ad_expand_like(ad, gk, x);
    if (strcmp(op, "Mean") == 0) {
        /* divided by the count of elements reduced into each */
        if (r->none) return gk;
        int rank = ox_ad_rank(ad, x);
        int64_t count = 1;
        bool known = rank >= 0;
        for (int d = 0; known && d < rank; d++) {
            bool reduced = r->all;
            for (int i = 0; i < r->n_axes; i++)
                reduced |= r->axes[i] == d || r->axes[i] + rank == d;
            if (!reduced) continue;
            count *= ox_ad_dim(ad, x, d);
            known = ox_ad_dim(ad, x, d) >= 0;
        }
        int c;
        if (known) {
            c = k(ad, (double)count, x);
        } else {
            int sizes = OX_AD(ad, "Div", OX_AD(ad, "Size", x), OX_AD(ad, "Size", n->outputs[0]));
            c = ox_ad_cast_like(ad, sizes, x);
        }
        return ox_ad_expand_like(ad, ox_ad_div(ad, gk, c), x);
    }
    if (strcmp(op, "Max") == 0 || strcmp(op, "Min") == 0) {
        /* to the elements equal to the result, split evenly among ties */
        int hit = ox_ad_cast_like(ad, OX_AD(ad, "Equal", x, yk), x);
        int count = red_again(ad, r, "ReduceSum", hit);
        return ox_ad_mul(ad, hit, ox_ad_div(ad, gk, count));
    }
    if (strcmp(op, "Prod") == 0) return ox_ad_mul(ad, gk, ox_ad_div(ad, yk, x));
    if (strcmp(op, "L1") == 0) return ox_ad_mul(ad, gk, OX_AD(ad, "Sign", x));
    if (strcmp(op, "L2") == 0) return ox_ad_mul(ad, ox_ad_div(ad, gk, yk), x);
    if (strcmp(op, "SumSquare") == 0) return ox_ad_mul(ad, gk, ox_ad_mul(ad, x, k(ad, 2.0, x)));
    if (strcmp(op, "LogSum") == 0)
        return ox_ad_expand_like(ad, ox_ad_div(ad, gk, red_again(ad, r, "ReduceSum", x)), x);
    if (strcmp(op, "LogSumExp") == 0)
        return ox_ad_mul(ad, gk, OX_AD(ad, "Exp", ox_ad_sub(ad, x, yk)));
    ox_ad_fail(ad, n, OX_E_INTERNAL, "no gradient for %s", n->op_type);
    return -1;
}

ox_status ox_grad_reduce(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    struct red r;
    ox_status st = red_read(ad, n, &r);
    if (st) return st;
    gx[0] =
        red_dx(ad, n, &r, red_keep(ad, &r, gy[0]), n->inputs[0], red_keep(ad, &r, n->outputs[0]));
    return OX_OK;
}

/* y = CumSum(x) along axis: dx = CumSum(g) the other way, with the same exclusive. */
ox_status ox_grad_cumsum(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    int64_t exclusive = ox_attr_int(n, "exclusive", 0) != 0;
    int64_t reverse = ox_attr_int(n, "reverse", 0) != 0;
    gx[0] = ox_ad_opa(ad, "CumSum", 2, (int[]){gy[0], n->inputs[1]}, "i:exclusive i:reverse",
                      exclusive, !reverse);
    return OX_OK;
}

/* v reversed along its last axis. */
static int flip_last(struct ox_ad *ad, int v) {
    int in[5] = {v, ox_ad_ints(ad, 1, (int64_t[]){-1}), ox_ad_ints(ad, 1, (int64_t[]){INT64_MIN}),
                 ox_ad_ints(ad, 1, (int64_t[]){-1}), ox_ad_ints(ad, 1, (int64_t[]){-1})};
    return info_of(ad, ox_ad_op(ad, "Slice", 5, in), v);
}

/* y = CumProd(x) along axis (opset 26). Along the axis moved last (and reversed for reverse),
 * inclusive: dx_i = L_i S_i with L_i = prod_{k<i} x_k and S_i = sum_{j>=i} g_j prod_{i<k<=j} x_k,
 * exact where x has zeros (no division): the products prod_{i<k<=j} x_k are a CumProd of
 * A [..., i, j] = (j > i ? x_j : 1) over j. Exclusive (y_j = prod_{k<j} x_k) is the inclusive
 * form with g shifted: g'_j = g_{j+1}, g'_{n-1} = 0. */
ox_status ox_grad_cumprod(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    int x = n->inputs[0], r = ox_ad_rank(ad, x), len;
    int64_t axis;
    if (!ox_ad_const_ints(ad, n->inputs[1], 1, &axis, &len) || len != 1 || r < 1 ||
        r + 1 > OX_MAX_RANK)
        return ox_ad_fail(ad, n, OX_E_UNSUPPORTED,
                          "CumProd needs an input of known rank and a constant axis");
    if (axis < 0) axis += r;
    if (axis < 0 || axis >= r) return ox_ad_fail(ad, n, OX_E_INVALID, "axis out of range");
    bool excl = ox_attr_int(n, "exclusive", 0) != 0, rev = ox_attr_int(n, "reverse", 0) != 0;
    int64_t perm[OX_MAX_RANK];
    for (int k = 0; k < r; k++) perm[k] = k;
    perm[axis] = r - 1, perm[r - 1] = axis;
    int xt = x, g = gy[0];
    if (axis != r - 1) {
        xt = ox_ad_transpose(ad, x, r, perm);
        g = ox_ad_transpose(ad, g, r, perm);
    }
    if (rev) {
        xt = flip_last(ad, xt);
        g = flip_last(ad, g);
    }
    if (excl) {
        int in[4] = {g, ox_ad_ints(ad, 1, (int64_t[]){1}),
                     ox_ad_ints(ad, 1, (int64_t[]){INT64_MAX}), ox_ad_ints(ad, 1, (int64_t[]){-1})};
        int rest = info_of(ad, ox_ad_op(ad, "Slice", 4, in), g);
        int64_t pads[2 * OX_MAX_RANK] = {0};
        pads[2 * r - 1] = 1;
        g = info_of(ad, OX_AD(ad, "Pad", rest, ox_ad_ints(ad, 2 * r, pads)), xt);
    }
    int cnt = OX_AD(ad, "Gather", ox_ad_shape(ad, xt), ox_ad_int(ad, r - 1));
    int iota = OX_AD(ad, "Range", ox_ad_int(ad, 0), cnt, ox_ad_int(ad, 1));
    ox_ad_set_info(ad, iota, OX_INT64, 1, NULL);
    int row = ox_ad_unsqueeze(ad, iota, 1, (int64_t[]){1}),
        col = ox_ad_unsqueeze(ad, iota, 1, (int64_t[]){0});
    int after = OX_AD(ad, "Less", row, col);       /* [i, j]: j > i */
    int from = OX_AD(ad, "LessOrEqual", row, col); /* [i, j]: j >= i */
    int a = OX_AD(ad, "Where", after, ox_ad_unsqueeze(ad, xt, 1, (int64_t[]){-2}), k(ad, 1.0, x));
    ox_ad_set_info(ad, a, ox_ad_dtype(ad, x), r + 1, NULL);
    int prods = OX_AD(ad, "CumProd", a, ox_ad_int(ad, -1));
    ox_ad_set_info(ad, prods, ox_ad_dtype(ad, x), r + 1, NULL);
    int terms =
        where_g(ad, from, ox_ad_mul(ad, ox_ad_unsqueeze(ad, g, 1, (int64_t[]){-2}), prods), x);
    ox_ad_set_info(ad, terms, ox_ad_dtype(ad, x), r + 1, NULL);
    int s = ox_ad_reduce(ad, "ReduceSum", terms, 1, (int64_t[]){-1}, false);
    int lead =
        ox_ad_opa(ad, "CumProd", 2, (int[]){xt, ox_ad_int(ad, -1)}, "i:exclusive", (int64_t)1);
    int d = ox_ad_mul(ad, info_of(ad, lead, xt), info_of(ad, s, xt));
    if (rev) d = flip_last(ad, info_of(ad, d, xt));
    gx[0] = axis != r - 1 ? ox_ad_transpose(ad, d, r, perm) : d;
    return OX_OK;
}
