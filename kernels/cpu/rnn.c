/* Recurrent layers: RNN, GRU and LSTM (opsets 7 and 14; 14 adds `layout`), float and double.
 *
 * Per direction, the input projection of every time step is one matrix product
 * (X·W^T for all T*B rows at once, with the biases folded in), then each step multiplies the
 * hidden state by R^T (one product for the batch) and applies the gates element-wise.
 * Gate order is the ONNX one: LSTM i, o, f, c (peepholes i, o, f); GRU z, r, h.
 * sequence_lens stops each batch entry after its length (a reverse pass starts at its last
 * valid step); Y is zero past the end. All working memory is scratch asked for in infer.
 */
#include "kernels/op.h"

#include <cblas.h>
#include <limits.h>
#include <strings.h>

enum { K_RNN, K_GRU, K_LSTM };

enum {
    A_RELU,
    A_TANH,
    A_SIGMOID,
    A_AFFINE,
    A_LEAKYRELU,
    A_THRESHOLDEDRELU,
    A_SCALEDTANH,
    A_HARDSIGMOID,
    A_ELU,
    A_SOFTSIGN,
    A_SOFTPLUS,
};

struct act {
    int kind;
    double alpha, beta;
};

/* The activation functions the recurrent ops accept, with the alpha/beta they take. */
static const struct act_def {
    const char *name;
    int kind;
    bool has_alpha, has_beta;
    float alpha, beta; /* defaults */
} act_defs[] = {
    {"Relu", A_RELU, false, false, 0, 0},
    {"Tanh", A_TANH, false, false, 0, 0},
    {"Sigmoid", A_SIGMOID, false, false, 0, 0},
    {"Affine", A_AFFINE, true, true, 1.0f, 0.0f},
    {"LeakyRelu", A_LEAKYRELU, true, false, 0.01f, 0},
    {"ThresholdedRelu", A_THRESHOLDEDRELU, true, false, 1.0f, 0},
    {"ScaledTanh", A_SCALEDTANH, true, true, 1.0f, 1.0f},
    {"HardSigmoid", A_HARDSIGMOID, true, true, 0.2f, 0.5f},
    {"Elu", A_ELU, true, false, 1.0f, 0},
    {"Softsign", A_SOFTSIGN, false, false, 0, 0},
    {"Softplus", A_SOFTPLUS, false, false, 0, 0},
};

static inline double act_apply(const struct act *a, double x) {
    switch (a->kind) {
    case A_RELU: return x > 0 ? x : 0;
    case A_TANH: return tanh(x);
    case A_SIGMOID: return 1.0 / (1.0 + exp(-x));
    case A_AFFINE: return a->alpha * x + a->beta;
    case A_LEAKYRELU: return x >= 0 ? x : a->alpha * x;
    case A_THRESHOLDEDRELU: return x > a->alpha ? x : 0;
    case A_SCALEDTANH: return a->alpha * tanh(a->beta * x);
    case A_HARDSIGMOID: {
        double v = a->alpha * x + a->beta;
        return v < 0 ? 0 : v > 1 ? 1 : v;
    }
    case A_ELU: return x >= 0 ? x : a->alpha * (exp(x) - 1);
    case A_SOFTSIGN: return x / (1 + fabs(x));
    case A_SOFTPLUS: return x > 30 ? x : log1p(exp(x));
    default: return x;
    }
}

/* Everything a run needs, checked once (infer and kernel share it). */
struct rnn {
    int kind, G;            /* gates: 1, 3, 4 */
    int64_t nt, nb, ni, nh; /* steps, batch, input size, hidden size */
    int ndir, layout;
    bool reverse; /* direction "reverse" (with one direction) */
    bool has_clip, lbr, input_forget;
    double clip;
    struct act act[2][3]; /* per direction: f, g, h */
    const ox_tensor *X, *W, *R, *Bias, *seq, *h0, *c0, *P;
};

static const char *kind_name(int kind) {
    return kind == K_LSTM ? "LSTM" : kind == K_GRU ? "GRU" : "RNN";
}

static ox_status parse_acts(const struct ox_node *n, struct rnn *r) {
    static const int defaults[3][3] = {
        {A_TANH, A_TANH, A_TANH},    /* RNN: f */
        {A_SIGMOID, A_TANH, A_TANH}, /* GRU: f, g */
        {A_SIGMOID, A_TANH, A_TANH}, /* LSTM: f, g, h */
    };
    int per = r->kind == K_LSTM ? 3 : r->kind == K_GRU ? 2 : 1;
    for (int d = 0; d < 2; d++)
        for (int k = 0; k < 3; k++) r->act[d][k] = (struct act){defaults[r->kind][k], 0, 0};
    const struct ox_attr *a = ox_node_attr(n, "activations");
    if (!a) return OX_OK;
    if (a->type != OX_ATTR_STRINGS)
        return ox_node_err(n, OX_E_INVALID, "attribute 'activations' must be a list of strings");
    if (a->n != per * r->ndir && a->n != per)
        return ox_node_err(n, OX_E_INVALID, "%d activations: expected %d (%d per direction)", a->n,
                           per * r->ndir, per);
    const float *alphas = NULL, *betas = NULL;
    int na = ox_attr_floats(n, "activation_alpha", &alphas);
    int nb = ox_attr_floats(n, "activation_beta", &betas);
    int ia = 0, ib = 0;
    for (int i = 0; i < a->n; i++) {
        const struct act_def *def = NULL;
        for (size_t k = 0; k < sizeof act_defs / sizeof act_defs[0]; k++)
            if (strlen(act_defs[k].name) == a->string_lens[i] &&
                strncasecmp(act_defs[k].name, a->strings[i], a->string_lens[i]) == 0)
                def = &act_defs[k];
        if (!def)
            return ox_node_err(n, OX_E_UNSUPPORTED, "activation '%.*s'", (int)a->string_lens[i],
                               a->strings[i]);
        struct act v = {def->kind, def->alpha, def->beta};
        if (def->has_alpha && ia < na) v.alpha = alphas[ia++];
        if (def->has_beta && ib < nb) v.beta = betas[ib++];
        r->act[i / per][i % per] = v;
        if (a->n == per) r->act[1][i % per] = v; /* one list for both directions */
    }
    return OX_OK;
}

static bool dims_are(const ox_tensor *t, int rank, int64_t d0, int64_t d1, int64_t d2) {
    int64_t d[3] = {d0, d1, d2};
    if (t->rank != rank) return false;
    for (int i = 0; i < rank; i++)
        if (t->dims[i] != d[i]) return false;
    return true;
}

static ox_status rnn_setup(const struct ox_node *n, const ox_tensor *const *in, int kind,
                           struct rnn *r) {
    char s0[256], s1[256];
    memset(r, 0, sizeof *r);
    r->kind = kind;
    r->G = kind == K_LSTM ? 4 : kind == K_GRU ? 3 : 1;
    r->X = ox_in(n, in, 0), r->W = ox_in(n, in, 1), r->R = ox_in(n, in, 2);
    r->Bias = ox_in(n, in, 3), r->seq = ox_in(n, in, 4), r->h0 = ox_in(n, in, 5);
    r->c0 = kind == K_LSTM ? ox_in(n, in, 6) : NULL;
    r->P = kind == K_LSTM ? ox_in(n, in, 7) : NULL;
    if (!r->X || !r->W || !r->R) return ox_node_err(n, OX_E_INVALID, "expected inputs X, W and R");
    ox_dtype dt = r->X->dtype;
    if (dt != OX_FLOAT && dt != OX_DOUBLE)
        return ox_node_err(n, OX_E_UNSUPPORTED, "element type %s: supported are float and double",
                           ox_dtype_name(dt));
    const ox_tensor *same[] = {r->W, r->R, r->Bias, r->h0, r->c0, r->P};
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++)
        if (same[i] && same[i]->dtype != dt)
            return ox_node_err(n, OX_E_INVALID, "input %s: expected element type %s like X",
                               ox_tensor_desc(same[i], s0, sizeof s0), ox_dtype_name(dt));
    const char *dir = ox_attr_str(n, "direction", "forward");
    if (strcmp(dir, "forward") == 0) {
        r->ndir = 1;
    } else if (strcmp(dir, "reverse") == 0) {
        r->ndir = 1, r->reverse = true;
    } else if (strcmp(dir, "bidirectional") == 0) {
        r->ndir = 2;
    } else {
        return ox_node_err(n, OX_E_INVALID,
                           "direction '%s': expected forward, reverse or bidirectional", dir);
    }
    r->layout = n->opset >= 14 ? (int)ox_attr_int(n, "layout", 0) : 0;
    if (r->layout != 0 && r->layout != 1)
        return ox_node_err(n, OX_E_INVALID, "layout %d: expected 0 or 1", r->layout);
    if (r->X->rank != 3)
        return ox_node_err(n, OX_E_SHAPE, "X %s: expected rank 3",
                           ox_tensor_desc(r->X, s0, sizeof s0));
    r->nt = r->X->dims[r->layout ? 1 : 0], r->nb = r->X->dims[r->layout ? 0 : 1],
    r->ni = r->X->dims[2];
    if (r->R->rank != 3 || r->R->dims[1] % r->G)
        return ox_node_err(n, OX_E_SHAPE, "R %s: expected [directions, %d*hidden, hidden]",
                           ox_tensor_desc(r->R, s0, sizeof s0), r->G);
    r->nh = r->R->dims[2];
    int64_t hs = ox_attr_int(n, "hidden_size", r->nh);
    if (hs != r->nh)
        return ox_node_err(n, OX_E_SHAPE, "hidden_size %lld disagrees with R %s", (long long)hs,
                           ox_tensor_desc(r->R, s0, sizeof s0));
    /* BLAS takes int sizes: steps*batch, gates*hidden and the input size must fit */
    if (r->nh > INT_MAX / 8 || r->ni > INT_MAX || (r->nb && r->nt > INT_MAX / r->nb))
        return ox_node_err(n, OX_E_UNSUPPORTED, "sizes over INT_MAX");
    int64_t GH = r->G * r->nh;
    if (!dims_are(r->W, 3, r->ndir, GH, r->ni) || !dims_are(r->R, 3, r->ndir, GH, r->nh))
        return ox_node_err(
            n, OX_E_SHAPE, "W %s and R %s: expected [%d, %lld, %lld] and [%d, %lld, %lld]",
            ox_tensor_desc(r->W, s0, sizeof s0), ox_tensor_desc(r->R, s1, sizeof s1), r->ndir,
            (long long)GH, (long long)r->ni, r->ndir, (long long)GH, (long long)r->nh);
    if (r->Bias && !dims_are(r->Bias, 2, r->ndir, 2 * GH, 0))
        return ox_node_err(n, OX_E_SHAPE, "B %s: expected [%d, %lld]",
                           ox_tensor_desc(r->Bias, s0, sizeof s0), r->ndir, (long long)(2 * GH));
    if (r->seq && (!ox_dtype_is_int(r->seq->dtype) || !dims_are(r->seq, 1, r->nb, 0, 0)))
        return ox_node_err(n, OX_E_SHAPE, "sequence_lens %s: expected int32[%lld]",
                           ox_tensor_desc(r->seq, s0, sizeof s0), (long long)r->nb);
    const ox_tensor *st[] = {r->h0, r->c0};
    for (int i = 0; i < 2; i++)
        if (st[i] && !(r->layout ? dims_are(st[i], 3, r->nb, r->ndir, r->nh)
                                 : dims_are(st[i], 3, r->ndir, r->nb, r->nh)))
            return ox_node_err(n, OX_E_SHAPE, "%s %s: expected the shape of Y_h",
                               i ? "initial_c" : "initial_h", ox_tensor_desc(st[i], s0, sizeof s0));
    if (r->P && !dims_are(r->P, 2, r->ndir, 3 * r->nh, 0))
        return ox_node_err(n, OX_E_SHAPE, "P %s: expected [%d, %lld]",
                           ox_tensor_desc(r->P, s0, sizeof s0), r->ndir, (long long)(3 * r->nh));
    const struct ox_attr *clip = ox_node_attr(n, "clip");
    if (clip) {
        if (clip->type != OX_ATTR_FLOAT)
            return ox_node_err(n, OX_E_INVALID, "attribute 'clip' must be a float");
        r->has_clip = true, r->clip = clip->f;
    }
    r->lbr = kind == K_GRU && ox_attr_int(n, "linear_before_reset", 0) != 0;
    r->input_forget = kind == K_LSTM && ox_attr_int(n, "input_forget", 0) != 0;
    return parse_acts(n, r);
}

static ox_status rnn_infer(struct ox_infer_ctx *ctx, const struct ox_node *n,
                           const ox_tensor *const *in, ox_tensor *const *out, int kind) {
    struct rnn r;
    ox_status st = rnn_setup(n, in, kind, &r);
    if (st) return st;
    ox_dtype dt = r.X->dtype;
    int64_t y[4] = {r.nt, r.ndir, r.nb, r.nh}, y1[4] = {r.nb, r.nt, r.ndir, r.nh};
    int64_t yh[3] = {r.ndir, r.nb, r.nh}, yh1[3] = {r.nb, r.ndir, r.nh};
    int n_out = kind == K_LSTM ? 3 : 2;
    if (n->n_outputs > n_out)
        return ox_node_err(n, OX_E_INVALID, "%d outputs: %s has at most %d", n->n_outputs,
                           kind_name(kind), n_out);
    if (n->n_outputs > 0 && out[0]) ox_set_shape(out[0], dt, 4, r.layout ? y1 : y);
    for (int i = 1; i < n->n_outputs; i++)
        if (out[i]) ox_set_shape(out[i], dt, 3, r.layout ? yh1 : yh);
    /* projections of all steps, one step's recurrent product, h, c and one spare state */
    size_t elems, esz = ox_dtype_size(dt), total;
    int64_t GH = r.G * r.nh;
    if (!ox_mul_size((size_t)(r.nt * r.nb), (size_t)GH, &elems) ||
        !ox_add_size(elems, (size_t)(r.nb * GH + 3 * r.nb * r.nh), &elems) ||
        !ox_mul_size(elems, esz, &total))
        return ox_node_err(n, OX_E_NOMEM, "scratch size overflows");
    ctx->scratch_bytes = total;
    return OX_OK;
}

ox_status ox_rnn_infer_rnn(struct ox_infer_ctx *ctx, const struct ox_node *n,
                           const ox_tensor *const *in, ox_tensor *const *out) {
    return rnn_infer(ctx, n, in, out, K_RNN);
}

ox_status ox_rnn_infer_gru(struct ox_infer_ctx *ctx, const struct ox_node *n,
                           const ox_tensor *const *in, ox_tensor *const *out) {
    return rnn_infer(ctx, n, in, out, K_GRU);
}

ox_status ox_rnn_infer_lstm(struct ox_infer_ctx *ctx, const struct ox_node *n,
                            const ox_tensor *const *in, ox_tensor *const *out) {
    return rnn_infer(ctx, n, in, out, K_LSTM);
}

/* c[M,N] = a[M,K] * b[N,K]^T (row-major, leading dims given). */
static void gemm_nt_float(int64_t M, int64_t N, int64_t K, const float *a, int64_t lda,
                          const float *b, int64_t ldb, float *c, int64_t ldc) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0) {
        for (int64_t i = 0; i < M; i++) memset(c + i * ldc, 0, sizeof(float) * (size_t)N);
        return;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)N, (int)K, 1.0f, a, (int)lda,
                b, (int)ldb, 0.0f, c, (int)ldc);
}

static void gemm_nt_double(int64_t M, int64_t N, int64_t K, const double *a, int64_t lda,
                           const double *b, int64_t ldb, double *c, int64_t ldc) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0) {
        for (int64_t i = 0; i < M; i++) memset(c + i * ldc, 0, sizeof(double) * (size_t)N);
        return;
    }
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)N, (int)K, 1.0, a, (int)lda,
                b, (int)ldb, 0.0, c, (int)ldc);
}

static inline double clipv(const struct rnn *r, double v) {
    if (!r->has_clip) return v;
    return v < -r->clip ? -r->clip : v > r->clip ? r->clip : v;
}

/* Row of the projections (and of X) for time t, batch entry b. */
static inline int64_t xrow(const struct rnn *r, int64_t t, int64_t b) {
    return r->layout ? b * r->nt + t : t * r->nb + b;
}

/* Offset of (direction d, batch b) in Y_h / initial_h. */
static inline int64_t hoff(const struct rnn *r, int d, int64_t b) {
    return (r->layout ? b * r->ndir + d : d * r->nb + b) * r->nh;
}

/* Offset of (t, d, b) in Y. */
static inline int64_t yoff(const struct rnn *r, int64_t t, int d, int64_t b) {
    return (r->layout ? (b * r->nt + t) * r->ndir + d : (t * r->ndir + d) * r->nb + b) * r->nh;
}

static inline int64_t seq_len(const struct rnn *r, int64_t b) {
    return r->seq ? ox_get_i64(r->seq, b) : r->nt;
}

/* One direction, element type T. ws: scratch; Y, Yh, Yc: outputs or NULL. */
#define DEF_RNN_DIR(T)                                                                             \
    static void rnn_dir_##T(const struct rnn *r, int d, T *ws, T *Y, T *Yh, T *Yc) {               \
        int64_t NT = r->nt, B = r->nb, H = r->nh, GH = r->G * r->nh, rows = NT * B;                \
        T *xw = ws, *hr = xw + NT * B * GH, *h = hr + B * GH, *c = h + B * H, *tmp = c + B * H;    \
        /* an input size of 0 leaves W without data: no offset into NULL */                        \
        const T *W = r->ni ? (const T *)r->W->data + d * GH * r->ni : (const T *)r->W->data;       \
        const T *R = (const T *)r->R->data + d * GH * H;                                           \
        const T *bias = r->Bias ? (const T *)r->Bias->data + d * 2 * GH : NULL;                    \
        const T *P = r->P ? (const T *)r->P->data + d * 3 * H : NULL;                              \
        const struct act *fa = &r->act[d][0], *ga = &r->act[d][1], *ha = &r->act[d][2];            \
        bool rev = r->reverse || d == 1;                                                           \
        gemm_nt_##T(rows, GH, r->ni, r->X->data, r->ni, W, r->ni, xw, GH);                         \
        if (bias)                                                                                  \
            for (int64_t row = 0; row < rows; row++)                                               \
                for (int64_t j = 0; j < GH; j++)                                                   \
                    xw[row * GH + j] += bias[j] + (r->lbr && j >= 2 * H ? 0 : bias[GH + j]);       \
        for (int64_t b = 0; b < B; b++)                                                            \
            for (int64_t k = 0; k < H; k++) {                                                      \
                int64_t o = hoff(r, d, b) + k;                                                     \
                h[b * H + k] = r->h0 ? ((const T *)r->h0->data)[o] : 0;                            \
                c[b * H + k] = r->c0 ? ((const T *)r->c0->data)[o] : 0;                            \
            }                                                                                      \
        for (int64_t s = 0; s < NT; s++) {                                                         \
            bool gru2 = r->kind == K_GRU && !r->lbr; /* h gate needs r first */                    \
            gemm_nt_##T(B, gru2 ? 2 * H : GH, H, h, H, R, H, hr, GH);                              \
            if (gru2) {                                                                            \
                for (int64_t b = 0; b < B; b++) {                                                  \
                    int64_t L = seq_len(r, b), t = rev ? L - 1 - s : s;                            \
                    T *hb = h + b * H, *g = hr + b * GH, *tb = tmp + b * H;                        \
                    if (s >= L) {                                                                  \
                        memset(tb, 0, sizeof(T) * (size_t)H);                                      \
                        continue;                                                                  \
                    }                                                                              \
                    const T *x = xw + xrow(r, t, b) * GH;                                          \
                    for (int64_t k = 0; k < H; k++) {                                              \
                        g[k] = (T)act_apply(fa, clipv(r, (double)x[k] + g[k]));                    \
                        T rg = (T)act_apply(fa, clipv(r, (double)x[H + k] + g[H + k]));            \
                        tb[k] = rg * hb[k];                                                        \
                    }                                                                              \
                }                                                                                  \
                gemm_nt_##T(B, H, H, tmp, H, R + 2 * H * H, H, hr + 2 * H, GH);                    \
            }                                                                                      \
            for (int64_t b = 0; b < B; b++) {                                                      \
                int64_t L = seq_len(r, b), t = rev ? L - 1 - s : s;                                \
                if (s >= L) continue;                                                              \
                const T *x = xw + xrow(r, t, b) * GH;                                              \
                T *g = hr + b * GH, *hb = h + b * H, *cb = c + b * H;                              \
                if (r->kind == K_RNN) {                                                            \
                    for (int64_t k = 0; k < H; k++)                                                \
                        hb[k] = (T)act_apply(fa, clipv(r, (double)x[k] + g[k]));                   \
                } else if (r->kind == K_GRU) {                                                     \
                    for (int64_t k = 0; k < H; k++) {                                              \
                        double z, hh;                                                              \
                        if (gru2) {                                                                \
                            z = g[k];                                                              \
                            hh = act_apply(ga, clipv(r, (double)x[2 * H + k] + g[2 * H + k]));     \
                        } else {                                                                   \
                            z = act_apply(fa, clipv(r, (double)x[k] + g[k]));                      \
                            double rg = act_apply(fa, clipv(r, (double)x[H + k] + g[H + k]));      \
                            double rh = g[2 * H + k] + (bias ? bias[GH + 2 * H + k] : 0);          \
                            hh = act_apply(ga, clipv(r, x[2 * H + k] + rg * rh));                  \
                        }                                                                          \
                        hb[k] = (T)((1 - z) * hh + z * hb[k]);                                     \
                    }                                                                              \
                } else {                                                                           \
                    for (int64_t k = 0; k < H; k++) {                                              \
                        double cp = cb[k];                                                         \
                        double pi = (double)x[k] + g[k] + (P ? P[k] * cp : 0);                     \
                        double i = act_apply(fa, clipv(r, pi));                                    \
                        double f;                                                                  \
                        if (r->input_forget) {                                                     \
                            f = 1 - i;                                                             \
                        } else {                                                                   \
                            double pf =                                                            \
                                (double)x[2 * H + k] + g[2 * H + k] + (P ? P[2 * H + k] * cp : 0); \
                            f = act_apply(fa, clipv(r, pf));                                       \
                        }                                                                          \
                        double cc = act_apply(ga, clipv(r, (double)x[3 * H + k] + g[3 * H + k]));  \
                        T cn = (T)(f * cp + i * cc);                                               \
                        double po = (double)x[H + k] + g[H + k] + (P ? P[H + k] * cn : 0);         \
                        double o = act_apply(fa, clipv(r, po));                                    \
                        cb[k] = cn;                                                                \
                        hb[k] = (T)(o * act_apply(ha, cn));                                        \
                    }                                                                              \
                }                                                                                  \
                if (Y) memcpy(Y + yoff(r, t, d, b), hb, sizeof(T) * (size_t)H);                    \
            }                                                                                      \
        }                                                                                          \
        for (int64_t b = 0; b < B; b++) {                                                          \
            if (Yh) memcpy(Yh + hoff(r, d, b), h + b * H, sizeof(T) * (size_t)H);                  \
            if (Yc) memcpy(Yc + hoff(r, d, b), c + b * H, sizeof(T) * (size_t)H);                  \
        }                                                                                          \
    }
DEF_RNN_DIR(float)
DEF_RNN_DIR(double)

static ox_status rnn_run(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                         const ox_tensor *const *in, ox_tensor *const *out, int kind) {
    struct rnn r;
    ox_status st = rnn_setup(n, in, kind, &r);
    if (st) return st;
    for (int64_t b = 0; r.seq && b < r.nb; b++) {
        int64_t L = ox_get_i64(r.seq, b);
        if (L < 0 || L > r.nt)
            return ox_node_err(n, OX_E_INVALID, "sequence_lens[%lld] = %lld: expected 0 to %lld",
                               (long long)b, (long long)L, (long long)r.nt);
    }
    ox_tensor *y = n->n_outputs > 0 ? out[0] : NULL, *yh = n->n_outputs > 1 ? out[1] : NULL;
    ox_tensor *yc = kind == K_LSTM && n->n_outputs > 2 ? out[2] : NULL;
    /* a batch or hidden size of 0: every output is empty, and the scratch is NULL */
    if (r.nb == 0 || r.nh == 0) return OX_OK;
    /* steps past a sequence's end stay zero in Y */
    if (y && ox_tensor_numel(y))
        memset(y->data, 0, (size_t)ox_tensor_numel(y) * ox_dtype_size(y->dtype));
    for (int d = 0; d < r.ndir; d++) {
        if (r.X->dtype == OX_FLOAT)
            rnn_dir_float(&r, d, ctx->scratch, y ? y->data : NULL, yh ? yh->data : NULL,
                          yc ? yc->data : NULL);
        else
            rnn_dir_double(&r, d, ctx->scratch, y ? y->data : NULL, yh ? yh->data : NULL,
                           yc ? yc->data : NULL);
    }
    return OX_OK;
}

ox_status ox_rnn_cpu_rnn(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                         const ox_tensor *const *in, ox_tensor *const *out) {
    return rnn_run(ctx, n, in, out, K_RNN);
}

ox_status ox_rnn_cpu_gru(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                         const ox_tensor *const *in, ox_tensor *const *out) {
    return rnn_run(ctx, n, in, out, K_GRU);
}

ox_status ox_rnn_cpu_lstm(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                          const ox_tensor *const *in, ox_tensor *const *out) {
    return rnn_run(ctx, n, in, out, K_LSTM);
}
