/* Gradient rules: elementwise math, MatMul and Gemm (graph/autograd.h says the contract). */
#include "graph/autograd.h"

#include "kernels/op.h"

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
