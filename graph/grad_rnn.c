/* Gradient rules of the recurrent ops RNN, GRU and LSTM (graph/autograd.h says the contract).
 *
 * The backward pass is unrolled over the time steps (backpropagation through time) in plain
 * ONNX ops, so it needs the number of steps and the batch size to be fixed. Per direction the
 * rule recomputes the forward pass one step at a time (the same equations and bias placement
 * as kernels/cpu/rnn.c: gate order LSTM i o f c, GRU z r h), keeping each step's gates, then
 * walks the steps backwards. Each step gives the gradient of its gates' pre-activations
 * dG_t [batch, gates*hidden]; stacked over time, these give dX = dG W, dW = dG^T X,
 * dR = dG^T H_prev and dB = the sums of dG, each with one product.
 *
 * Internally everything is time-major ([steps*batch, ...]); layout 1 is transposed on the way
 * in (X) and out (dX). Handled: directions forward, reverse and bidirectional; activations
 * Sigmoid, Tanh and Relu in any slot; GRU linear_before_reset 0 and 1; optional B,
 * initial_h, initial_c and LSTM peepholes P; any of Y, Y_h, Y_c read. Not handled (an
 * OX_E_UNSUPPORTED error naming it): sequence_lens, clip, input_forget, other activations. */
#include "graph/autograd.h"

#include "kernels/op.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum { K_RNN, K_GRU, K_LSTM };
enum { ACT_SIGMOID, ACT_TANH, ACT_RELU };

/* The unrolled graph grows with the steps: a bound against absurd (hostile) sizes. */
#define MAX_STEPS 100000

/* The values of one time step t of one direction (forward, then backward). */
struct step {
    int hp, cp; /* state before the step: h, c (LSTM) */
    int a[4];   /* gate activations: LSTM i o f c~; GRU z r h~; RNN h */
    int c, hc;  /* LSTM: new cell, h-activation of it */
    int u;      /* GRU: r*hp (linear_before_reset 0) or hp R_h^T + Rb_h (1) */
    int h;      /* new hidden state */
    int dgx;    /* gradient of the gates' pre-activations, X side [batch, gates*hidden] */
    int dgr;    /* the same, recurrent side (differs for GRU; GRU lbr 0: z and r only) */
    int dgh;    /* GRU lbr 0: gradient of the h gate's recurrent product */
    int dp[3];  /* LSTM peepholes: gradient terms of P_i, P_o, P_f [batch, hidden] */
};

/* What the rule needs to know about the node, checked once. */
struct rg {
    struct ox_ad *ad;
    const struct ox_node *n;
    int kind, G, ndir, layout;
    bool reverse, lbr;
    int64_t T, B, H;
    int act[2][3]; /* per direction: f, g, h */
    int X, W, R, Bias, h0, c0, P;
    int x2;        /* X time-major as [T*B, input] */
    int one, zero; /* scalars of X's dtype */
    int zeros;     /* [B, H] zeros (made when first needed) */
    int *idx;      /* idx[t]: scalar int64 t */
    struct step *st;
};

/* Results of one direction (-1: not asked for). */
struct rg_dir {
    int dx, dw, dr, db, dp, dh0, dc0;
};

/* ---- small pieces ----------------------------------------------------------------------- */

static int gather(struct ox_ad *ad, int x, int idx, int axis) {
    return ox_ad_opa(ad, "Gather", 2, (int[]){x, idx}, "i:axis", (int64_t)axis);
}

/* Split x along axis into n parts of the given sizes (out[0..n)). */
static void split(struct ox_ad *ad, int x, int axis, int n, const int64_t *sizes, int *out) {
    for (int k = 0; k < n; k++) out[k] = -1;
    int s = ox_ad_ints(ad, n, sizes);
    struct ox_node *nd = ox_ad_node(ad, "Split", 2, (int[]){x, s}, n, out);
    if (nd) ox_ad_set_attr(ad, nd, "i:axis", (int64_t)axis);
}

static int concat(struct ox_ad *ad, int n, const int *v, int axis) {
    if (n == 1) return v[0];
    return ox_ad_opa(ad, "Concat", n, v, "i:axis", (int64_t)axis);
}

/* The per-direction values v[0..n) stacked along a new axis. */
static int stack(struct ox_ad *ad, int n, const int *v, int axis) {
    int u[2];
    for (int d = 0; d < n; d++) u[d] = ox_ad_unsqueeze(ad, v[d], 1, (int64_t[]){axis});
    return concat(ad, n, u, axis);
}

/* a + b where -1 is zero. */
static int add_opt(struct ox_ad *ad, int a, int b) {
    return a < 0 ? b : b < 0 ? a : ox_ad_add(ad, a, b);
}

/* a^T b for a [rows, m], b [rows, k]: [m, k] */
static int tmatmul(struct ox_ad *ad, int a, int b) {
    return ox_ad_opa(ad, "Gemm", 2, (int[]){a, b}, "i:transA", (int64_t)1);
}

static int sum_rows(struct ox_ad *ad, int x) {
    return ox_ad_reduce(ad, "ReduceSum", x, 1, (int64_t[]){0}, false);
}

static int zeros_bh(struct rg *s) {
    if (s->zeros < 0)
        s->zeros = OX_AD(s->ad, "Expand", s->zero, ox_ad_ints(s->ad, 2, (int64_t[]){s->B, s->H}));
    return s->zeros;
}

static int act_fwd(struct rg *s, int kind, int x) {
    static const char *const ops[] = {"Sigmoid", "Tanh", "Relu"};
    return ox_ad_op(s->ad, ops[kind], 1, &x);
}

/* g times the activation's derivative, written with its output y. */
static int act_bwd(struct rg *s, int kind, int y, int g) {
    struct ox_ad *ad = s->ad;
    switch (kind) {
    case ACT_SIGMOID: return ox_ad_mul(ad, g, ox_ad_mul(ad, y, ox_ad_sub(ad, s->one, y)));
    case ACT_TANH: return ox_ad_mul(ad, g, ox_ad_sub(ad, s->one, ox_ad_mul(ad, y, y)));
    default: return OX_AD(ad, "Where", OX_AD(ad, "Greater", y, s->zero), g, s->zero);
    }
}

/* ---- checks ----------------------------------------------------------------------------- */

static ox_status parse_acts(struct rg *s) {
    static const int defaults[3][3] = {
        {ACT_TANH, ACT_TANH, ACT_TANH},    /* RNN: f */
        {ACT_SIGMOID, ACT_TANH, ACT_TANH}, /* GRU: f, g */
        {ACT_SIGMOID, ACT_TANH, ACT_TANH}, /* LSTM: f, g, h */
    };
    static const char *const names[] = {"Sigmoid", "Tanh", "Relu"};
    int per = s->kind == K_LSTM ? 3 : s->kind == K_GRU ? 2 : 1;
    for (int d = 0; d < 2; d++)
        for (int k = 0; k < 3; k++) s->act[d][k] = defaults[s->kind][k];
    const struct ox_attr *a = ox_node_attr(s->n, "activations");
    if (!a) return OX_OK;
    if (a->type != OX_ATTR_STRINGS || (a->n != per && a->n != per * s->ndir))
        return ox_ad_fail(s->ad, s->n, OX_E_INVALID,
                          "attribute 'activations': expected %d strings per direction", per);
    for (int i = 0; i < a->n; i++) {
        int kind = -1;
        for (int k = 0; k < 3; k++)
            if (strlen(names[k]) == a->string_lens[i] &&
                strncasecmp(names[k], a->strings[i], a->string_lens[i]) == 0)
                kind = k;
        if (kind < 0)
            return ox_ad_fail(s->ad, s->n, OX_E_UNSUPPORTED,
                              "activations: '%.*s' (the gradient handles Sigmoid, Tanh and Relu)",
                              (int)a->string_lens[i], a->strings[i]);
        s->act[i / per][i % per] = kind;
        if (a->n == per) s->act[1][i % per] = kind;
    }
    return OX_OK;
}

static int input(const struct ox_node *n, int i) {
    return i < n->n_inputs ? n->inputs[i] : -1;
}

static ox_status setup(struct rg *s) {
    const struct ox_node *n = s->n;
    struct ox_ad *ad = s->ad;
    s->G = s->kind == K_LSTM ? 4 : s->kind == K_GRU ? 3 : 1;
    s->X = input(n, 0), s->W = input(n, 1), s->R = input(n, 2), s->Bias = input(n, 3);
    s->h0 = input(n, 5);
    s->c0 = s->kind == K_LSTM ? input(n, 6) : -1;
    s->P = s->kind == K_LSTM ? input(n, 7) : -1;
    s->zeros = -1;
    if (s->X < 0 || s->W < 0 || s->R < 0)
        return ox_ad_fail(ad, n, OX_E_INVALID, "expected inputs X, W and R");
    if (input(n, 4) >= 0)
        return ox_ad_fail(ad, n, OX_E_UNSUPPORTED, "input sequence_lens is not handled");
    if (ox_node_attr(n, "clip"))
        return ox_ad_fail(ad, n, OX_E_UNSUPPORTED, "attribute 'clip' is not handled");
    if (s->kind == K_LSTM && ox_attr_int(n, "input_forget", 0) != 0)
        return ox_ad_fail(ad, n, OX_E_UNSUPPORTED, "attribute 'input_forget' = 1 is not handled");
    const char *dir = ox_attr_str(n, "direction", "forward");
    if (strcmp(dir, "forward") == 0) {
        s->ndir = 1;
    } else if (strcmp(dir, "reverse") == 0) {
        s->ndir = 1, s->reverse = true;
    } else if (strcmp(dir, "bidirectional") == 0) {
        s->ndir = 2;
    } else {
        return ox_ad_fail(ad, n, OX_E_INVALID, "direction '%s'", dir);
    }
    s->layout = n->opset >= 14 ? (int)ox_attr_int(n, "layout", 0) : 0;
    if (s->layout != 0 && s->layout != 1)
        return ox_ad_fail(ad, n, OX_E_INVALID, "layout %d: expected 0 or 1", s->layout);
    s->lbr = s->kind == K_GRU && ox_attr_int(n, "linear_before_reset", 0) != 0;
    if (ox_ad_rank(ad, s->X) != 3)
        return ox_ad_fail(ad, n, OX_E_UNSUPPORTED, "X must have a known rank of 3");
    s->T = ox_ad_dim(ad, s->X, s->layout ? 1 : 0);
    s->B = ox_ad_dim(ad, s->X, s->layout ? 0 : 1);
    s->H = ox_ad_rank(ad, s->R) == 3 ? ox_ad_dim(ad, s->R, 2) : -1;
    if (s->H < 0) s->H = ox_attr_int(n, "hidden_size", -1);
    if (s->T < 0 || s->B < 0 || s->H < 0)
        return ox_ad_fail(ad, n, OX_E_UNSUPPORTED,
                          "the unrolled backward pass needs fixed sizes: steps %lld, batch %lld, "
                          "hidden %lld (-1: depends on the input sizes)",
                          (long long)s->T, (long long)s->B, (long long)s->H);
    if (s->T < 1 || s->T > MAX_STEPS)
        return ox_ad_fail(ad, n, OX_E_UNSUPPORTED, "%lld steps: the unrolled pass takes 1 to %d",
                          (long long)s->T, MAX_STEPS);
    return parse_acts(s);
}

/* ---- one step forward, per kind ---------------------------------------------------------- */

/* xw: this step's input projection with the biases folded in [B, G*H]. */
static void lstm_fwd(struct rg *s, const int *dw, struct step *p, int xw) {
    struct ox_ad *ad = s->ad;
    int H = (int)s->H, f = s->act[dw[0]][0], g = s->act[dw[0]][1], h = s->act[dw[0]][2];
    int gates = ox_ad_add(ad, xw, ox_ad_matmul(ad, p->hp, dw[1]));
    int pre[4];
    split(ad, gates, 1, 4, (int64_t[]){H, H, H, H}, pre);
    if (dw[3] >= 0) {
        pre[0] = ox_ad_add(ad, pre[0], ox_ad_mul(ad, dw[3], p->cp));
        pre[2] = ox_ad_add(ad, pre[2], ox_ad_mul(ad, dw[5], p->cp));
    }
    p->a[0] = act_fwd(s, f, pre[0]);
    p->a[2] = act_fwd(s, f, pre[2]);
    p->a[3] = act_fwd(s, g, pre[3]);
    p->c = ox_ad_add(ad, ox_ad_mul(ad, p->a[2], p->cp), ox_ad_mul(ad, p->a[0], p->a[3]));
    if (dw[3] >= 0) pre[1] = ox_ad_add(ad, pre[1], ox_ad_mul(ad, dw[4], p->c));
    p->a[1] = act_fwd(s, f, pre[1]);
    p->hc = act_fwd(s, h, p->c);
    p->h = ox_ad_mul(ad, p->a[1], p->hc);
}

static void gru_fwd(struct rg *s, const int *dw, struct step *p, int xw) {
    struct ox_ad *ad = s->ad;
    int H = (int)s->H, f = s->act[dw[0]][0], g = s->act[dw[0]][1];
    int x[3], hr[3];
    split(ad, xw, 1, 3, (int64_t[]){H, H, H}, x);
    if (s->lbr) {
        split(ad, ox_ad_matmul(ad, p->hp, dw[1]), 1, 3, (int64_t[]){H, H, H}, hr);
        p->u = dw[3] >= 0 ? ox_ad_add(ad, hr[2], dw[3]) : hr[2];
    } else {
        split(ad, ox_ad_matmul(ad, p->hp, dw[1]), 1, 2, (int64_t[]){H, H}, hr);
    }
    p->a[0] = act_fwd(s, f, ox_ad_add(ad, x[0], hr[0]));
    p->a[1] = act_fwd(s, f, ox_ad_add(ad, x[1], hr[1]));
    int ph;
    if (s->lbr) {
        ph = ox_ad_add(ad, x[2], ox_ad_mul(ad, p->a[1], p->u));
    } else {
        p->u = ox_ad_mul(ad, p->a[1], p->hp);
        ph = ox_ad_add(ad, x[2], ox_ad_matmul(ad, p->u, dw[2]));
    }
    p->a[2] = act_fwd(s, g, ph);
    /* h = (1 - z) h~ + z hp = h~ + z (hp - h~) */
    p->h = ox_ad_add(ad, p->a[2], ox_ad_mul(ad, p->a[0], ox_ad_sub(ad, p->hp, p->a[2])));
}

/* ---- one step backward, per kind ---------------------------------------------------------- */

/* dh, dc: gradients reaching the step's new h and c (dc may be -1). Sets the step's gate
 * gradients; returns the gradients of its hp and cp in *dhp, *dcp when need_prev. */
static void lstm_bwd(struct rg *s, const int *dw, struct step *p, int dh, int dc, bool need_prev,
                     int *dhp, int *dcp) {
    struct ox_ad *ad = s->ad;
    int f = s->act[dw[0]][0], g = s->act[dw[0]][1], h = s->act[dw[0]][2];
    bool peep = dw[3] >= 0;
    int dgo = act_bwd(s, f, p->a[1], ox_ad_mul(ad, dh, p->hc));
    int dct = add_opt(ad, dc, act_bwd(s, h, p->hc, ox_ad_mul(ad, dh, p->a[1])));
    if (peep) dct = ox_ad_add(ad, dct, ox_ad_mul(ad, dgo, dw[4]));
    int dgi = act_bwd(s, f, p->a[0], ox_ad_mul(ad, dct, p->a[3]));
    int dgf = act_bwd(s, f, p->a[2], ox_ad_mul(ad, dct, p->cp));
    int dgc = act_bwd(s, g, p->a[3], ox_ad_mul(ad, dct, p->a[0]));
    p->dgx = p->dgr = concat(ad, 4, (int[]){dgi, dgo, dgf, dgc}, 1);
    if (peep && ox_ad_wants(ad, s->n, 7)) {
        p->dp[0] = ox_ad_mul(ad, dgi, p->cp);
        p->dp[1] = ox_ad_mul(ad, dgo, p->c);
        p->dp[2] = ox_ad_mul(ad, dgf, p->cp);
    }
    if (!need_prev) return;
    *dhp = ox_ad_matmul(ad, p->dgx, dw[2]);
    *dcp = ox_ad_mul(ad, dct, p->a[2]);
    if (peep)
        *dcp = ox_ad_add(ad, *dcp,
                         ox_ad_add(ad, ox_ad_mul(ad, dgi, dw[3]), ox_ad_mul(ad, dgf, dw[5])));
}

static void gru_bwd(struct rg *s, const int *dw, struct step *p, int dh, bool need_prev, int *dhp) {
    struct ox_ad *ad = s->ad;
    int f = s->act[dw[0]][0], g = s->act[dw[0]][1];
    int dgz = act_bwd(s, f, p->a[0], ox_ad_mul(ad, dh, ox_ad_sub(ad, p->hp, p->a[2])));
    int dgh = act_bwd(s, g, p->a[2], ox_ad_mul(ad, dh, ox_ad_sub(ad, s->one, p->a[0])));
    int dr, dhp_r = -1;
    if (s->lbr) {
        dr = ox_ad_mul(ad, dgh, p->u);
        p->dgh = ox_ad_mul(ad, dgh, p->a[1]); /* of hp R_h^T + Rb_h */
    } else {
        int du = ox_ad_matmul(ad, dgh, dw[4]); /* of u = r hp */
        dr = ox_ad_mul(ad, du, p->hp);
        if (need_prev) dhp_r = ox_ad_mul(ad, du, p->a[1]);
        p->dgh = dgh;
    }
    int dgr = act_bwd(s, f, p->a[1], dr);
    p->dgx = concat(ad, 3, (int[]){dgz, dgr, dgh}, 1);
    p->dgr =
        s->lbr ? concat(ad, 3, (int[]){dgz, dgr, p->dgh}, 1) : concat(ad, 2, (int[]){dgz, dgr}, 1);
    if (!need_prev) return;
    /* lbr 1: dw[5] is R; lbr 0: R_zr */
    *dhp = add_opt(ad, ox_ad_add(ad, ox_ad_mul(ad, dh, p->a[0]), ox_ad_matmul(ad, p->dgr, dw[5])),
                   dhp_r);
}

/* ---- one direction ------------------------------------------------------------------------ */

static void direction(struct rg *s, int d, int gY, int gYh, int gYc, struct rg_dir *out) {
    struct ox_ad *ad = s->ad;
    const struct ox_node *n = s->n;
    int64_t T = s->T, B = s->B, H = s->H, GH = s->G * H;
    int saxis = s->layout ? 1 : 0; /* direction axis of Y_h, initial_h */
    int di = ox_ad_int(ad, d);
    int Wd = gather(ad, s->W, di, 0), Rd = gather(ad, s->R, di, 0);
    /* the biases folded into the input projection; GRU lbr 1 keeps Rb_h apart */
    int xbias = -1, rbh = -1, wbrb[2] = {-1, -1};
    if (s->Bias >= 0) {
        split(ad, gather(ad, s->Bias, di, 0), 0, 2, (int64_t[]){GH, GH}, wbrb);
        if (s->lbr) {
            int wb[2], rb[2];
            split(ad, wbrb[0], 0, 2, (int64_t[]){2 * H, H}, wb);
            split(ad, wbrb[1], 0, 2, (int64_t[]){2 * H, H}, rb);
            xbias = concat(ad, 2, (int[]){ox_ad_add(ad, wb[0], rb[0]), wb[1]}, 0);
            rbh = rb[1];
        } else {
            xbias = ox_ad_add(ad, wbrb[0], wbrb[1]);
        }
    }
    int xw = xbias >= 0
                 ? ox_ad_opa(ad, "Gemm", 3, (int[]){s->x2, Wd, xbias}, "i:transB", (int64_t)1)
                 : ox_ad_opa(ad, "Gemm", 2, (int[]){s->x2, Wd}, "i:transB", (int64_t)1);
    int xw3 = OX_AD(ad, "Reshape", xw, ox_ad_ints(ad, 3, (int64_t[]){T, B, GH}));
    /* dw: per kind, what the step functions read:
     *   LSTM: d, R^T, R, P_i, P_o, P_f;  RNN: d, R^T, R
     *   GRU lbr 1: d, R^T, -, Rb_h, -, R;  GRU lbr 0: d, R_zr^T, R_h^T, -, R_h, R_zr */
    int dw[6] = {d, -1, -1, -1, -1, -1};
    if (s->kind == K_GRU && !s->lbr) {
        int rs[2];
        split(ad, Rd, 0, 2, (int64_t[]){2 * H, H}, rs);
        dw[1] = ox_ad_transpose(ad, rs[0], 2, (int64_t[]){1, 0});
        dw[2] = ox_ad_transpose(ad, rs[1], 2, (int64_t[]){1, 0});
        dw[4] = rs[1];
        dw[5] = rs[0];
    } else {
        dw[1] = ox_ad_transpose(ad, Rd, 2, (int64_t[]){1, 0});
        dw[2] = Rd;
        if (s->kind == K_GRU) dw[3] = rbh, dw[5] = Rd;
    }
    if (s->P >= 0) split(ad, gather(ad, s->P, di, 0), 0, 3, (int64_t[]){H, H, H}, &dw[3]);
    bool rev = s->reverse || d == 1;
    /* forward */
    int hp = s->h0 >= 0 ? gather(ad, s->h0, di, saxis) : zeros_bh(s);
    int cp = s->kind != K_LSTM ? -1 : s->c0 >= 0 ? gather(ad, s->c0, di, saxis) : zeros_bh(s);
    for (int64_t k = 0; k < T && hp >= 0; k++) {
        struct step *p = &s->st[rev ? T - 1 - k : k];
        memset(p, 0xff, sizeof *p); /* every value -1 */
        p->hp = hp, p->cp = cp;
        int x = gather(ad, xw3, s->idx[rev ? T - 1 - k : k], 0);
        if (s->kind == K_LSTM) {
            lstm_fwd(s, dw, p, x);
        } else if (s->kind == K_GRU) {
            gru_fwd(s, dw, p, x);
        } else {
            p->h = p->a[0] =
                act_fwd(s, s->act[d][0], ox_ad_add(ad, x, ox_ad_matmul(ad, hp, dw[1])));
        }
        hp = p->h, cp = p->c;
    }
    /* backward: the gradients reaching h and c after each step */
    int gYd = gY >= 0 ? gather(ad, gY, di, s->layout ? 2 : 1) : -1; /* [T,B,H] or [B,T,H] */
    int dh = gYh >= 0 ? gather(ad, gYh, di, saxis) : -1;
    int dc = gYc >= 0 ? gather(ad, gYc, di, saxis) : -1;
    bool want_h0 = ox_ad_wants(ad, n, 5), want_c0 = ox_ad_wants(ad, n, 6);
    for (int64_t k = T - 1; k >= 0 && hp >= 0; k--) {
        int64_t t = rev ? T - 1 - k : k;
        struct step *p = &s->st[t];
        if (gYd >= 0) dh = add_opt(ad, dh, gather(ad, gYd, s->idx[t], s->layout ? 1 : 0));
        if (dh < 0) dh = zeros_bh(s); /* only Y_c is read */
        bool need = k > 0 || want_h0 || want_c0;
        int dhp = -1, dcp = -1;
        if (s->kind == K_LSTM) {
            lstm_bwd(s, dw, p, dh, dc, need, &dhp, &dcp);
        } else if (s->kind == K_GRU) {
            gru_bwd(s, dw, p, dh, need, &dhp);
        } else {
            p->dgx = p->dgr = act_bwd(s, s->act[d][0], p->h, dh);
            if (need) dhp = ox_ad_matmul(ad, p->dgx, Rd);
        }
        dh = dhp, dc = dcp;
        if (p->dgx < 0) hp = -1; /* an error is recorded: stop */
    }
    if (want_h0) out->dh0 = dh;
    if (want_c0) out->dc0 = dc;
    if (hp < 0) return; /* an error is recorded (the walker reports it) */
    /* sums over the steps: stacked time-major [T*B, ...] */
    int *v = malloc(sizeof(int) * (size_t)T * 2);
    if (!v) {
        ox_ad_fail(ad, n, OX_E_NOMEM, "out of memory");
        return;
    }
    int *v2 = v + T;
    for (int64_t t = 0; t < T; t++) v[t] = s->st[t].dgx;
    int dgx = concat(ad, (int)T, v, 0);
    if (ox_ad_wants(ad, n, 0)) out->dx = ox_ad_matmul(ad, dgx, Wd);
    if (ox_ad_wants(ad, n, 1)) out->dw = tmatmul(ad, dgx, s->x2);
    bool gru0 = s->kind == K_GRU && !s->lbr;
    int dgr = dgx;
    if (s->kind == K_GRU) {
        for (int64_t t = 0; t < T; t++) v[t] = s->st[t].dgr;
        dgr = concat(ad, (int)T, v, 0);
    }
    if (ox_ad_wants(ad, n, 2)) {
        for (int64_t t = 0; t < T; t++) v[t] = s->st[t].hp;
        out->dr = tmatmul(ad, dgr, concat(ad, (int)T, v, 0));
        if (gru0) { /* the h gate's rows: the product of u = r hp */
            for (int64_t t = 0; t < T; t++) v[t] = s->st[t].dgh, v2[t] = s->st[t].u;
            int dgh = concat(ad, (int)T, v, 0), u = concat(ad, (int)T, v2, 0);
            out->dr = concat(ad, 2, (int[]){out->dr, tmatmul(ad, dgh, u)}, 0);
        }
    }
    if (ox_ad_wants(ad, n, 3)) {
        int dwb = sum_rows(ad, dgx);
        int drb = s->lbr ? sum_rows(ad, dgr) : dwb;
        out->db = concat(ad, 2, (int[]){dwb, drb}, 0);
    }
    if (s->P >= 0 && ox_ad_wants(ad, n, 7)) {
        int dp[3];
        for (int j = 0; j < 3; j++) {
            for (int64_t t = 0; t < T; t++) v[t] = s->st[t].dp[j];
            int sum = T == 1 ? v[0] : ox_ad_op(ad, "Sum", (int)T, v);
            dp[j] = sum_rows(ad, sum);
        }
        out->dp = concat(ad, 3, dp, 0);
    }
    free(v);
}

/* ---- the rule ------------------------------------------------------------------------------ */

static ox_status rnn_grad(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx,
                          int kind) {
    struct rg s = {.ad = ad, .n = n, .kind = kind};
    ox_status st = setup(&s);
    if (st) return st;
    int64_t T = s.T, B = s.B;
    s.idx = malloc(sizeof *s.idx * (size_t)T);
    s.st = malloc(sizeof *s.st * (size_t)T);
    if (!s.idx || !s.st) {
        free(s.idx);
        free(s.st);
        return ox_ad_fail(ad, n, OX_E_NOMEM, "out of memory");
    }
    for (int64_t t = 0; t < T; t++) s.idx[t] = ox_ad_int(ad, t);
    s.one = ox_ad_scalar_like(ad, 1.0, s.X);
    s.zero = ox_ad_scalar_like(ad, 0.0, s.X);
    int xt = s.layout ? ox_ad_transpose(ad, s.X, 3, (int64_t[]){1, 0, 2}) : s.X;
    s.x2 = OX_AD(ad, "Reshape", xt, ox_ad_ints(ad, 2, (int64_t[]){T * B, -1}));
    int gY = n->n_outputs > 0 ? gy[0] : -1, gYh = n->n_outputs > 1 ? gy[1] : -1;
    int gYc = kind == K_LSTM && n->n_outputs > 2 ? gy[2] : -1;
    struct rg_dir r[2];
    for (int d = 0; d < s.ndir; d++) {
        r[d] = (struct rg_dir){-1, -1, -1, -1, -1, -1, -1};
        direction(&s, d, gY, gYh, gYc, &r[d]);
    }
    free(s.idx);
    free(s.st);
    int v[2];
    if (ox_ad_wants(ad, n, 0)) {
        int dx = s.ndir == 2 ? ox_ad_add(ad, r[0].dx, r[1].dx) : r[0].dx;
        dx = OX_AD(ad, "Reshape", dx, ox_ad_ints(ad, 3, (int64_t[]){T, B, -1}));
        gx[0] = s.layout ? ox_ad_transpose(ad, dx, 3, (int64_t[]){1, 0, 2}) : dx;
    }
#define STACK(i, field, axis)                                                                      \
    if (ox_ad_wants(ad, n, i)) {                                                                   \
        for (int d = 0; d < s.ndir; d++) v[d] = r[d].field;                                        \
        gx[i] = stack(ad, s.ndir, v, axis);                                                        \
    }
    STACK(1, dw, 0)
    STACK(2, dr, 0)
    STACK(3, db, 0)
    STACK(5, dh0, s.layout ? 1 : 0)
    STACK(6, dc0, s.layout ? 1 : 0)
    STACK(7, dp, 0)
#undef STACK
    return OX_OK;
}

ox_status ox_grad_rnn(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    return rnn_grad(ad, n, gy, gx, K_RNN);
}

ox_status ox_grad_gru(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    return rnn_grad(ad, n, gy, gx, K_GRU);
}

ox_status ox_grad_lstm(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    return rnn_grad(ad, n, gy, gx, K_LSTM);
}
