/* Attention and the transformer blocks around it: Attention (opset 23, 24), RMSNormalization,
 * RotaryEmbedding, Swish, SwiGLU, TensorScatter (KV-cache writes), CausalConvWithState,
 * LinearAttention, and FlexAttention (ai.onnx.preview).
 *
 * Attention and FlexAttention copy Q, K and V once into scratch in a compute type (double for
 * double inputs, float otherwise) laid out [B, H, S, D], then run one Q·K^T and one P·V
 * product per (batch, head) with cblas_sgemm or cblas_dgemm. Where the operators' function
 * bodies compute in the input type (Q and K pre-scaled by sqrt(scale), the scores, the bias
 * sum, the probabilities), float16 and bfloat16 are rounded at the same points, so narrow
 * results follow the specification rather than exact arithmetic. Softmax sums run in double.
 *
 * The other operators are elementwise or recurrent loops that read and write any float type
 * through double (float directly).
 */
#include "kernels/op.h"

#include <cblas.h>
#include <limits.h>
#include <stdint.h>

/* Prototypes of this file's rows, so the definitions are checked against the table. */
#define OX_OP(domain, type, since, until, infer, cpu, flags)                                       \
    ox_status infer(struct ox_infer_ctx *, const struct ox_node *, const ox_tensor *const *,       \
                    ox_tensor *const *);                                                           \
    ox_status cpu(struct ox_kernel_ctx *, const struct ox_node *, const ox_tensor *const *,        \
                  ox_tensor *const *);
#include "kernels/cpu/attention.def"
#undef OX_OP

/* ---- element access and rounding ------------------------------------------------------- */

static bool is_flt(ox_dtype dt) {
    return dt == OX_FLOAT || dt == OX_DOUBLE || dt == OX_FLOAT16 || dt == OX_BFLOAT16;
}

static ox_status need_flt(const struct ox_node *n, const ox_tensor *t, const char *what) {
    if (!t) return ox_node_err(n, OX_E_INVALID, "missing input %s", what);
    if (!is_flt(t->dtype))
        return ox_node_err(n, OX_E_UNSUPPORTED, "%s has element type %s: expected a float type",
                           what, ox_dtype_name(t->dtype));
    return OX_OK;
}

static ox_status same_type(const struct ox_node *n, const ox_tensor *t, const ox_tensor *ref,
                           const char *what, const char *refname) {
    if (t->dtype != ref->dtype)
        return ox_node_err(n, OX_E_SHAPE, "%s has element type %s: expected %s's %s", what,
                           ox_dtype_name(t->dtype), refname, ox_dtype_name(ref->dtype));
    return OX_OK;
}

/* v rounded to the precision of dt (the identity for double). */
static inline double rnd(ox_dtype dt, double v) {
    switch (dt) {
    case OX_FLOAT: return (float)v;
    case OX_FLOAT16: return ox_half_to_float(ox_float_to_half((float)v));
    case OX_BFLOAT16: return ox_bf16_to_float(ox_float_to_bf16((float)v));
    default: return v;
    }
}

/* Compute buffers hold float, or double when `dbl`. */
static inline double cget(const void *p, bool dbl, int64_t i) {
    return dbl ? ((const double *)p)[i] : ((const float *)p)[i];
}

static inline void cset(void *p, bool dbl, int64_t i, double v) {
    if (dbl)
        ((double *)p)[i] = v;
    else
        ((float *)p)[i] = (float)v;
}

/* C[M,N] = A[M,K] · B (B is [K,N], or [N,K] read transposed when `tb`), row-major. Sizes
 * were checked to fit an int by the caller. */
static void gemm(bool dbl, bool tb, int64_t M, int64_t N, int64_t K, const void *A, int64_t lda,
                 const void *B, int64_t ldb, void *C, int64_t ldc) {
    if (M == 0 || N == 0) return;
    if (K == 0) {
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) cset(C, dbl, i * ldc + j, 0);
        return;
    }
    enum CBLAS_TRANSPOSE t = tb ? CblasTrans : CblasNoTrans;
    if (dbl)
        cblas_dgemm(CblasRowMajor, CblasNoTrans, t, (int)M, (int)N, (int)K, 1.0, A, (int)lda, B,
                    (int)ldb, 0.0, C, (int)ldc);
    else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, t, (int)M, (int)N, (int)K, 1.0f, A, (int)lda, B,
                    (int)ldb, 0.0f, C, (int)ldc);
}

/* *acc += a * b * c * d, false on overflow or a negative factor. */
static bool add_prod(size_t *acc, int64_t a, int64_t b, int64_t c, int64_t d) {
    const int64_t f[4] = {a, b, c, d};
    size_t p = 1;
    for (int i = 0; i < 4; i++)
        if (f[i] < 0 || !ox_mul_size(p, (size_t)f[i], &p)) return false;
    return ox_add_size(*acc, p, acc);
}

static bool fits_int(int64_t v) {
    return v >= 0 && v <= INT_MAX;
}

static ox_status shape_err(const struct ox_node *n, const ox_tensor *t, const char *what,
                           const char *expected) {
    char buf[256];
    return ox_node_err(n, OX_E_SHAPE, "%s is %s: expected %s", what,
                       ox_tensor_desc(t, buf, sizeof buf), expected);
}

static bool is_softmax_type(int64_t dt) {
    return dt == OX_FLOAT || dt == OX_DOUBLE || dt == OX_FLOAT16 || dt == OX_BFLOAT16;
}

/* ---- Attention (opset 23, 24) ----------------------------------------------------------- */

/* Inputs Q, K, V, attn_mask, past_key, past_value, nonpad_kv_seqlen (24). Q, K and V are all
 * 4-D [B, H, S, D] or all 3-D [B, S, H*D] (then q_num_heads and kv_num_heads give H). Each
 * query head h reads KV head h / (Hq / Hkv). The bias added to the scores is the mask (bool:
 * true attends; float: added), the causal triangle (key j visible to query i when
 * j <= i + offset, offset = past length, or nonpad_kv_seqlen[b] - S without a past) and the
 * padding (keys from nonpad_kv_seqlen[b] on). A row whose bias is -inf everywhere gets zero
 * probabilities instead of NaN. */
struct attn {
    const ox_tensor *q, *k, *v, *mask, *pk, *pv, *nonpad;
    int64_t B, Hq, Hkv, S, L, P, T, Dk, Dv;
    bool three_d, causal;
    int64_t mstride[4]; /* mask strides over [B, Hq, S, T] (0 along broadcast axes) */
    int64_t mlen;       /* keys the mask covers; later keys are masked (opset 24 padding) */
    int mode;           /* qk_matmul_output_mode */
    ox_dtype sp;        /* softmax precision */
    double scale, softcap;
};

static ox_status attn_parse(const struct ox_node *n, const ox_tensor *const *in, struct attn *a) {
    memset(a, 0, sizeof *a);
    const ox_tensor *q = ox_in(n, in, 0), *k = ox_in(n, in, 1), *v = ox_in(n, in, 2);
    ox_status s;
    if ((s = need_flt(n, q, "Q")) || (s = need_flt(n, k, "K")) || (s = need_flt(n, v, "V")) ||
        (s = same_type(n, k, q, "K", "Q")) || (s = same_type(n, v, q, "V", "Q")))
        return s;
    if (q->rank != k->rank || q->rank != v->rank || (q->rank != 3 && q->rank != 4))
        return ox_node_err(n, OX_E_SHAPE,
                           "Q, K and V have ranks %d, %d and %d: expected all 3 "
                           "or all 4",
                           q->rank, k->rank, v->rank);
    a->q = q, a->k = k, a->v = v;
    a->B = q->dims[0];
    if (q->rank == 3) {
        a->three_d = true;
        a->Hq = ox_attr_int(n, "q_num_heads", 0);
        a->Hkv = ox_attr_int(n, "kv_num_heads", 0);
        if (a->Hq <= 0 || a->Hkv <= 0)
            return ox_node_err(n, OX_E_INVALID,
                               "3-D inputs need positive q_num_heads and "
                               "kv_num_heads (found %lld and %lld)",
                               (long long)a->Hq, (long long)a->Hkv);
        if (q->dims[2] % a->Hq)
            return shape_err(n, q, "Q", "a hidden size divisible by q_num_heads");
        if (v->dims[2] % a->Hkv)
            return shape_err(n, v, "V", "a hidden size divisible by kv_num_heads");
        a->S = q->dims[1], a->L = k->dims[1];
        a->Dk = q->dims[2] / a->Hq, a->Dv = v->dims[2] / a->Hkv;
        if (k->dims[0] != a->B || k->dims[2] != a->Hkv * a->Dk)
            return shape_err(n, k, "K", "[batch, kv_sequence, kv_num_heads * head_size]");
        if (v->dims[0] != a->B || v->dims[1] != a->L)
            return shape_err(n, v, "V", "[batch, kv_sequence, kv_num_heads * v_head_size]");
    } else {
        a->Hq = q->dims[1], a->S = q->dims[2], a->Dk = q->dims[3];
        a->Hkv = k->dims[1], a->L = k->dims[2], a->Dv = v->dims[3];
        if (k->dims[0] != a->B || k->dims[3] != a->Dk)
            return shape_err(n, k, "K", "[batch, kv_heads, kv_sequence, Q's head_size]");
        if (v->dims[0] != a->B || v->dims[1] != a->Hkv || v->dims[2] != a->L)
            return shape_err(n, v, "V", "[batch, K's kv_heads, K's kv_sequence, v_head_size]");
    }
    if (a->Hkv <= 0 || a->Hq % a->Hkv)
        return ox_node_err(n, OX_E_SHAPE, "%lld query heads are not a multiple of %lld KV heads",
                           (long long)a->Hq, (long long)a->Hkv);

    a->pk = ox_in(n, in, 4), a->pv = ox_in(n, in, 5);
    if (!a->pk != !a->pv)
        return ox_node_err(n, OX_E_INVALID, "past_key and past_value must be given together");
    if (a->pk) {
        if ((s = same_type(n, a->pk, q, "past_key", "Q")) ||
            (s = same_type(n, a->pv, q, "past_value", "Q")))
            return s;
        const ox_tensor *pk = a->pk, *pv = a->pv;
        if (pk->rank != 4 || pk->dims[0] != a->B || pk->dims[1] != a->Hkv || pk->dims[3] != a->Dk)
            return shape_err(n, pk, "past_key", "[batch, kv_heads, past_sequence, head_size]");
        a->P = pk->dims[2];
        if (pv->rank != 4 || pv->dims[0] != a->B || pv->dims[1] != a->Hkv || pv->dims[2] != a->P ||
            pv->dims[3] != a->Dv)
            return shape_err(n, pv, "past_value",
                             "[batch, kv_heads, past_key's past_sequence, v_head_size]");
    }
    a->T = a->P + a->L;

    const ox_tensor *np = ox_in(n, in, 6);
    if (np) {
        if (n->opset < 24)
            return ox_node_err(n, OX_E_INVALID,
                               "input nonpad_kv_seqlen needs opset 24 (the model imports %d)",
                               n->opset);
        if (np->dtype != OX_INT64 || np->rank != 1 || np->dims[0] != a->B)
            return shape_err(n, np, "nonpad_kv_seqlen", "int64[batch]");
        a->nonpad = np;
    }

    a->mode = (int)ox_attr_int(n, "qk_matmul_output_mode", 0);
    if (a->mode < 0 || a->mode > 3)
        return ox_node_err(n, OX_E_INVALID, "qk_matmul_output_mode %d: expected 0 to 3", a->mode);
    a->causal = ox_attr_int(n, "is_causal", 0) != 0;
    a->softcap = ox_attr_float(n, "softcap", 0.0f);
    a->scale =
        ox_node_attr(n, "scale") ? ox_attr_float(n, "scale", 1.0f) : 1.0f / sqrtf((float)a->Dk);
    int64_t sp = ox_attr_int(n, "softmax_precision", q->dtype);
    if (!is_softmax_type(sp))
        return ox_node_err(n, OX_E_INVALID, "softmax_precision %lld: expected a float type",
                           (long long)sp);
    a->sp = (ox_dtype)sp;

    const ox_tensor *m = ox_in(n, in, 3);
    if (m) {
        if (m->dtype != OX_BOOL && m->dtype != q->dtype)
            return ox_node_err(n, OX_E_SHAPE,
                               "attn_mask has element type %s: expected bool or "
                               "Q's %s",
                               ox_dtype_name(m->dtype), ox_dtype_name(q->dtype));
        if (m->rank < 1 || m->rank > 4) return shape_err(n, m, "attn_mask", "rank 1 to 4");
        const int64_t tgt[3] = {a->B, a->Hq, a->S};
        int64_t nat[4], ns = 1;
        for (int i = m->rank - 1; i >= 0; i--) nat[i] = ns, ns *= m->dims[i];
        for (int ax = 0; ax < 3; ax++) {
            int ma = ax - (4 - m->rank);
            a->mstride[ax] = 0;
            if (ma < 0) continue;
            if (m->dims[ma] == tgt[ax])
                a->mstride[ax] = nat[ma];
            else if (m->dims[ma] != 1)
                return shape_err(n, m, "attn_mask",
                                 "a shape that broadcasts to [batch, q_heads, q_sequence, "
                                 "total_sequence]");
        }
        int64_t last = m->dims[m->rank - 1];
        a->mstride[3] = 1, a->mlen = a->T;
        if (last == a->T)
            ;
        else if (n->opset >= 24 && last < a->T) /* padded with -inf up to total_sequence */
            a->mlen = last;
        else if (last == 1)
            a->mstride[3] = 0;
        else
            return shape_err(n, m, "attn_mask",
                             n->opset >= 24 ? "a last dimension of at most total_sequence"
                                            : "a last dimension of total_sequence (or 1)");
        a->mask = m;
    }
    if (!fits_int(a->S) || !fits_int(a->T) || !fits_int(a->Dk) || !fits_int(a->Dv) ||
        !fits_int(a->Hq * a->Dk) || !fits_int(a->Hkv * a->Dv))
        return ox_node_err(n, OX_E_UNSUPPORTED, "sizes beyond the BLAS int range");
    return OX_OK;
}

static bool attn_scratch(const struct attn *a, size_t *bytes) {
    size_t e = 0;
    bool ok = add_prod(&e, a->B, a->Hq, a->S, a->Dk) && add_prod(&e, a->B, a->Hkv, a->T, a->Dk) &&
              add_prod(&e, a->B, a->Hkv, a->T, a->Dv) && add_prod(&e, a->S, a->T, 1, 1) &&
              add_prod(&e, a->S, a->Dv, 1, 1);
    size_t es = a->q->dtype == OX_DOUBLE ? sizeof(double) : sizeof(float);
    return ok && ox_mul_size(e, es, bytes);
}

ox_status ox_attn_infer_attention(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                  const ox_tensor *const *in, ox_tensor *const *out) {
    struct attn a;
    ox_status s = attn_parse(n, in, &a);
    if (s) return s;
    if (n->n_outputs > 4)
        return ox_node_err(n, OX_E_INVALID, "%d outputs: expected at most 4", n->n_outputs);
    ox_dtype dt = a.q->dtype;
    if (out[0]) {
        int64_t y3[3] = {a.B, a.S, a.Hq * a.Dv}, y4[4] = {a.B, a.Hq, a.S, a.Dv};
        ox_set_shape(out[0], dt, a.three_d ? 3 : 4, a.three_d ? y3 : y4);
    }
    int64_t pk[4] = {a.B, a.Hkv, a.T, a.Dk}, pv[4] = {a.B, a.Hkv, a.T, a.Dv};
    int64_t qk[4] = {a.B, a.Hq, a.S, a.T};
    if (n->n_outputs > 1 && out[1]) ox_set_shape(out[1], dt, 4, pk);
    if (n->n_outputs > 2 && out[2]) ox_set_shape(out[2], dt, 4, pv);
    if (n->n_outputs > 3 && out[3]) ox_set_shape(out[3], dt, 4, qk);
    if (!attn_scratch(&a, &ctx->scratch_bytes))
        return ox_node_err(n, OX_E_NOMEM, "scratch size overflows");
    return OX_OK;
}

static inline double mask_val(const ox_tensor *m, int64_t i) {
    if (m->dtype == OX_BOOL) return ((const uint8_t *)m->data)[i] ? 0.0 : -INFINITY;
    return ox_ld(m, i);
}

ox_status ox_attn_cpu_attention(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                                const ox_tensor *const *in, ox_tensor *const *out) {
    struct attn a;
    ox_status s = attn_parse(n, in, &a);
    if (s) return s;
    size_t need;
    if (!attn_scratch(&a, &need) || need > ctx->scratch_bytes)
        return ox_node_err(n, OX_E_INTERNAL, "scratch of %zu bytes is too small",
                           ctx->scratch_bytes);
    const int64_t B = a.B, Hq = a.Hq, Hkv = a.Hkv, S = a.S, L = a.L, P = a.P, T = a.T;
    const int64_t Dk = a.Dk, Dv = a.Dv, G = Hq / Hkv;
    const ox_dtype dt = a.q->dtype;
    const bool dbl = dt == OX_DOUBLE;
    const size_t es = dbl ? sizeof(double) : sizeof(float), esz = ox_dtype_size(dt);
    ox_tensor *Y = out[0], *PK = n->n_outputs > 1 ? out[1] : NULL;
    ox_tensor *PV = n->n_outputs > 2 ? out[2] : NULL, *QK = n->n_outputs > 3 ? out[3] : NULL;

    char *w = ctx->scratch;
    void *q = w;
    void *k = w += (size_t)(B * Hq * S * Dk) * es;
    void *v = w += (size_t)(B * Hkv * T * Dk) * es;
    void *sc = w += (size_t)(B * Hkv * T * Dv) * es;
    void *y = w += (size_t)(S * T) * es;

    /* Q and K scaled by sqrt(scale) each (computed in float), as the function body does. */
    const double sq = rnd(dt, sqrtf((float)a.scale));
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hq; h++)
            for (int64_t i = 0; i < S; i++) {
                int64_t src =
                    a.three_d ? (b * S + i) * Hq * Dk + h * Dk : ((b * Hq + h) * S + i) * Dk;
                int64_t dst = ((b * Hq + h) * S + i) * Dk;
                for (int64_t d = 0; d < Dk; d++)
                    cset(q, dbl, dst + d, rnd(dt, ox_ld(a.q, src + d) * sq));
            }
    /* K and V: the past, then the new keys; present_key/value are the same, unscaled. */
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hkv; h++)
            for (int64_t t = 0; t < T; t++) {
                const ox_tensor *ks = a.k, *vs = a.v;
                int64_t ko, vo, u = t - P;
                if (t < P) {
                    ks = a.pk, vs = a.pv;
                    ko = ((b * Hkv + h) * P + t) * Dk, vo = ((b * Hkv + h) * P + t) * Dv;
                } else if (a.three_d) {
                    ko = (b * L + u) * Hkv * Dk + h * Dk, vo = (b * L + u) * Hkv * Dv + h * Dv;
                } else {
                    ko = ((b * Hkv + h) * L + u) * Dk, vo = ((b * Hkv + h) * L + u) * Dv;
                }
                int64_t kd = ((b * Hkv + h) * T + t) * Dk, vd = ((b * Hkv + h) * T + t) * Dv;
                for (int64_t d = 0; d < Dk; d++)
                    cset(k, dbl, kd + d, rnd(dt, ox_ld(ks, ko + d) * sq));
                for (int64_t d = 0; d < Dv; d++) cset(v, dbl, vd + d, ox_ld(vs, vo + d));
                if (PK && Dk)
                    memcpy((char *)PK->data + (size_t)kd * esz,
                           (const char *)ks->data + (size_t)ko * esz, (size_t)Dk * esz);
                if (PV && Dv)
                    memcpy((char *)PV->data + (size_t)vd * esz,
                           (const char *)vs->data + (size_t)vo * esz, (size_t)Dv * esz);
            }

    const bool has_bias = a.mask || a.causal || a.nonpad;
    const bool fast = dt == OX_FLOAT && a.sp == OX_FLOAT && !a.mask && !(a.softcap > 0) && !QK;
    const double cap = rnd(dt, a.softcap);
    const int64_t *ms = a.mstride;
    for (int64_t b = 0; b < B; b++) {
        int64_t valid = T, off = P; /* keys past `valid` are padding; causal offset */
        if (a.nonpad) {
            valid = ox_get_i64(a.nonpad, b);
            if (!a.pk) off = valid - S;
        }
        for (int64_t h = 0; h < Hq; h++) {
            const char *qb = (const char *)q + (size_t)((b * Hq + h) * S * Dk) * es;
            const char *kb = (const char *)k + (size_t)((b * Hkv + h / G) * T * Dk) * es;
            const char *vb = (const char *)v + (size_t)((b * Hkv + h / G) * T * Dv) * es;
            gemm(dbl, true, S, T, Dk, qb, Dk, kb, Dk, sc, T);
            for (int64_t i = 0; i < S; i++) {
                if (fast) { /* float without mask, softcap or qk output: the bias is a prefix */
                    float *x = (float *)sc + i * T, mx = -INFINITY;
                    int64_t lim = valid < T ? valid : T;
                    if (a.causal && i + off + 1 < lim) lim = i + off + 1;
                    if (lim < 0) lim = 0;
                    double sum = 0;
                    for (int64_t j = 0; j < lim; j++) mx = x[j] > mx ? x[j] : mx;
                    for (int64_t j = 0; j < lim; j++) sum += x[j] = expf(x[j] - mx);
                    for (int64_t j = 0; j < lim; j++) x[j] = (float)(x[j] / sum);
                    for (int64_t j = lim; j < T; j++) x[j] = 0;
                    continue;
                }
                int64_t qo = ((b * Hq + h) * S + i) * T, mrow = b * ms[0] + h * ms[1] + i * ms[2];
                bool all_masked = has_bias;
                double mx = -INFINITY;
                for (int64_t j = 0; j < T; j++) {
                    double x = rnd(dt, cget(sc, dbl, i * T + j));
                    if (QK && a.mode == 0) ox_st(QK, qo + j, x);
                    if (a.softcap > 0) x = rnd(dt, rnd(dt, tanh(rnd(dt, x / cap))) * cap);
                    if (QK && a.mode == 1) ox_st(QK, qo + j, x);
                    if (has_bias) {
                        double bv = 0;
                        if (a.mask)
                            bv = j < a.mlen ? mask_val(a.mask, mrow + j * ms[3]) : -INFINITY;
                        if (a.causal && j > i + off) bv += -INFINITY;
                        if (j >= valid) bv += -INFINITY;
                        bv = rnd(dt, bv);
                        if (bv != -INFINITY) all_masked = false;
                        x = rnd(dt, x + bv);
                    }
                    if (QK && a.mode == 2) ox_st(QK, qo + j, x);
                    x = rnd(a.sp, x);
                    cset(sc, dbl, i * T + j, x);
                    if (x > mx) mx = x;
                }
                double sum = 0;
                for (int64_t j = 0; j < T; j++) {
                    double e = exp(cget(sc, dbl, i * T + j) - mx);
                    cset(sc, dbl, i * T + j, e);
                    sum += e;
                }
                for (int64_t j = 0; j < T; j++) {
                    double p = all_masked ? 0 : rnd(dt, rnd(a.sp, cget(sc, dbl, i * T + j) / sum));
                    cset(sc, dbl, i * T + j, p);
                    if (QK && a.mode == 3) ox_st(QK, qo + j, p);
                }
            }
            if (!Y) continue;
            gemm(dbl, false, S, Dv, T, sc, T, vb, Dv, y, Dv);
            for (int64_t i = 0; i < S; i++) {
                int64_t yo =
                    a.three_d ? (b * S + i) * Hq * Dv + h * Dv : ((b * Hq + h) * S + i) * Dv;
                for (int64_t d = 0; d < Dv; d++) ox_st(Y, yo + d, cget(y, dbl, i * Dv + d));
            }
        }
    }
    return OX_OK;
}

/* ---- RMSNormalization (opset 23) -------------------------------------------------------- */

/* Y = X / sqrt(mean(X^2 over axes [axis, rank)) + epsilon) * Scale, Scale broadcasting
 * (unidirectionally) to the normalized dims. The mean runs in double; the normalized value
 * is rounded to X's type before the product, as in the function body. */
static ox_status rms_check(const struct ox_node *n, const ox_tensor *const *in, int *axis) {
    const ox_tensor *x = ox_in(n, in, 0), *scale = ox_in(n, in, 1);
    ox_status s;
    if ((s = need_flt(n, x, "X")) || (s = need_flt(n, scale, "scale"))) return s;
    if ((s = ox_norm_axis(n, ox_attr_int(n, "axis", -1), x->rank, axis))) return s;
    if (x->rank == 0) return shape_err(n, x, "X", "rank 1 or more");
    int64_t stash = ox_attr_int(n, "stash_type", OX_FLOAT);
    if (!is_softmax_type(stash))
        return ox_node_err(n, OX_E_INVALID, "stash_type %lld: expected a float type",
                           (long long)stash);
    if (!ox_tail_broadcasts(scale, x, *axis))
        return shape_err(n, scale, "scale", "a shape that broadcasts to X's normalized dims");
    return OX_OK;
}

ox_status ox_attn_infer_rmsnorm(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    int axis;
    ox_status s = rms_check(n, in, &axis);
    if (s) return s;
    ox_set_like(out[0], in[0]);
    return OX_OK;
}

ox_status ox_attn_cpu_rmsnorm(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                              const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    int axis;
    ox_status s = rms_check(n, in, &axis);
    if (s) return s;
    const ox_tensor *x = in[0], *scale = in[1];
    ox_dtype stash = (ox_dtype)ox_attr_int(n, "stash_type", OX_FLOAT);
    double eps = rnd(stash, ox_attr_float(n, "epsilon", 1e-5f));
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < x->rank; i++) *(i < axis ? &outer : &inner) *= x->dims[i];
    bool plain = ox_tensor_numel(scale) == inner;
    for (int64_t o = 0; o < outer; o++) {
        int64_t base = o * inner;
        double ss = 0;
        for (int64_t j = 0; j < inner; j++) {
            double v = ox_ld(x, base + j);
            ss += v * v;
        }
        double rms = sqrt(ss / (double)inner + eps);
        for (int64_t j = 0; j < inner; j++) {
            double w = ox_ld(scale, plain ? j : ox_tail_index(scale, x, axis, j));
            ox_st(out[0], base + j, rnd(x->dtype, ox_ld(x, base + j) / rms) * w);
        }
    }
    return OX_OK;
}

/* ---- RotaryEmbedding (opset 23) --------------------------------------------------------- */

/* X is [B, H, S, D] or [B, S, H*D] (num_heads gives H). The first rotary_embedding_dim (R,
 * default D) features of each head rotate by the angle of the token's position: the pairs
 * are (k, k + R/2), or (2k, 2k + 1) when interleaved. With position_ids [B, S] the caches are
 * [max_position, R/2] tables; without, they are [B, S, R/2]. */
struct rope {
    int64_t B, H, S, D, R;
    bool three_d;
};

static ox_status rope_parse(const struct ox_node *n, const ox_tensor *const *in, struct rope *r) {
    const ox_tensor *x = ox_in(n, in, 0), *cs = ox_in(n, in, 1), *sn = ox_in(n, in, 2);
    const ox_tensor *pos = ox_in(n, in, 3);
    ox_status s;
    if ((s = need_flt(n, x, "input")) || (s = need_flt(n, cs, "cos_cache")) ||
        (s = need_flt(n, sn, "sin_cache")) || (s = same_type(n, cs, x, "cos_cache", "input")) ||
        (s = same_type(n, sn, x, "sin_cache", "input")))
        return s;
    if (x->rank == 4) {
        r->three_d = false;
        r->B = x->dims[0], r->H = x->dims[1], r->S = x->dims[2], r->D = x->dims[3];
    } else if (x->rank == 3) {
        r->three_d = true;
        r->H = ox_attr_int(n, "num_heads", 0);
        if (r->H <= 0) return ox_node_err(n, OX_E_INVALID, "3-D input needs a positive num_heads");
        if (x->dims[2] % r->H)
            return shape_err(n, x, "input", "a hidden size divisible by num_heads");
        r->B = x->dims[0], r->S = x->dims[1], r->D = x->dims[2] / r->H;
    } else {
        return shape_err(n, x, "input",
                         "[batch, heads, sequence, head_size] or "
                         "[batch, sequence, hidden]");
    }
    r->R = ox_attr_int(n, "rotary_embedding_dim", 0);
    if (r->R == 0) r->R = r->D;
    if (r->R < 0 || r->R > r->D || r->R % 2)
        return ox_node_err(n, OX_E_INVALID,
                           "rotary_embedding_dim %lld: expected an even number "
                           "up to the head size %lld",
                           (long long)r->R, (long long)r->D);
    bool same = cs->rank == sn->rank;
    for (int i = 0; same && i < cs->rank; i++) same = cs->dims[i] == sn->dims[i];
    if (!same) return shape_err(n, sn, "sin_cache", "cos_cache's shape");
    if (pos) {
        if (!ox_dtype_is_int(pos->dtype) || pos->rank != 2 || pos->dims[0] != r->B ||
            pos->dims[1] != r->S)
            return shape_err(n, pos, "position_ids", "an integer [batch, sequence]");
        if (cs->rank != 2 || cs->dims[1] != r->R / 2)
            return shape_err(n, cs, "cos_cache", "[max_position, rotary_dim / 2]");
    } else if (cs->rank != 3 || cs->dims[0] != r->B || cs->dims[1] != r->S ||
               cs->dims[2] != r->R / 2) {
        return shape_err(n, cs, "cos_cache", "[batch, sequence, rotary_dim / 2] (no position_ids)");
    }
    return OX_OK;
}

ox_status ox_attn_infer_rotary(struct ox_infer_ctx *ctx, const struct ox_node *n,
                               const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    struct rope r;
    ox_status s = rope_parse(n, in, &r);
    if (s) return s;
    ox_set_like(out[0], in[0]);
    return OX_OK;
}

ox_status ox_attn_cpu_rotary(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                             const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    struct rope r;
    ox_status s = rope_parse(n, in, &r);
    if (s) return s;
    const ox_tensor *x = in[0], *cs = in[1], *sn = in[2], *pos = ox_in(n, in, 3);
    ox_tensor *y = out[0];
    const bool inter = ox_attr_int(n, "interleaved", 0) != 0;
    const int64_t half = r.R / 2, D = r.D, H = r.H, S = r.S;
    for (int64_t b = 0; b < r.B; b++)
        for (int64_t t = 0; t < S; t++) {
            int64_t row; /* first element of this token's cache row */
            if (pos) {
                int64_t p = ox_get_i64(pos, b * S + t);
                if (p < 0 || p >= cs->dims[0])
                    return ox_node_err(n, OX_E_INVALID, "position id %lld out of range [0, %lld)",
                                       (long long)p, (long long)cs->dims[0]);
                row = p * half;
            } else {
                row = (b * S + t) * half;
            }
            for (int64_t h = 0; h < H; h++) {
                int64_t base = r.three_d ? (b * S + t) * H * D + h * D : ((b * H + h) * S + t) * D;
                for (int64_t k = 0; k < half; k++) {
                    int64_t i1 = inter ? base + 2 * k : base + k;
                    int64_t i2 = inter ? i1 + 1 : i1 + half;
                    double c = ox_ld(cs, row + k), sv = ox_ld(sn, row + k);
                    double x1 = ox_ld(x, i1), x2 = ox_ld(x, i2);
                    ox_st(y, i1, rnd(x->dtype, c * x1) - rnd(x->dtype, sv * x2));
                    ox_st(y, i2, rnd(x->dtype, sv * x1) + rnd(x->dtype, c * x2));
                }
                for (int64_t d = r.R; d < D; d++) ox_st(y, base + d, ox_ld(x, base + d));
            }
        }
    return OX_OK;
}

/* ---- Swish (opset 24), SwiGLU (opset 28) ------------------------------------------------ */

/* Swish(x) = x * sigmoid(alpha * x); SwiGLU(A, B) = Swish(A) * B with A and B of one shape. */
static double swish(ox_dtype dt, double x, double alpha) {
    double ax = rnd(dt, rnd(dt, alpha) * x);
    return rnd(dt, x * rnd(dt, 1.0 / (1.0 + exp(-ax))));
}

ox_status ox_attn_infer_swish(struct ox_infer_ctx *ctx, const struct ox_node *n,
                              const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    ox_status s = need_flt(n, ox_in(n, in, 0), "X");
    if (s) return s;
    ox_set_like(out[0], in[0]);
    return OX_OK;
}

ox_status ox_attn_cpu_swish(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                            const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    const ox_tensor *x = in[0];
    double alpha = ox_attr_float(n, "alpha", 1.0f);
    int64_t cnt = ox_tensor_numel(x);
    for (int64_t i = 0; i < cnt; i++) ox_st(out[0], i, swish(x->dtype, ox_ld(x, i), alpha));
    return OX_OK;
}

ox_status ox_attn_infer_swiglu(struct ox_infer_ctx *ctx, const struct ox_node *n,
                               const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    const ox_tensor *a = ox_in(n, in, 0), *b = ox_in(n, in, 1);
    ox_status s;
    if ((s = need_flt(n, a, "A")) || (s = need_flt(n, b, "B")) ||
        (s = same_type(n, b, a, "B", "A")))
        return s;
    bool same = a->rank == b->rank;
    for (int i = 0; same && i < a->rank; i++) same = a->dims[i] == b->dims[i];
    if (!same) return shape_err(n, b, "B", "A's shape (SwiGLU does not broadcast)");
    ox_set_like(out[0], a);
    return OX_OK;
}

ox_status ox_attn_cpu_swiglu(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                             const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    const ox_tensor *a = in[0], *b = in[1];
    double alpha = ox_attr_float(n, "alpha", 1.0f);
    int64_t cnt = ox_tensor_numel(a);
    for (int64_t i = 0; i < cnt; i++)
        ox_st(out[0], i, swish(a->dtype, ox_ld(a, i), alpha) * ox_ld(b, i));
    return OX_OK;
}

/* ---- TensorScatter (opset 24) ----------------------------------------------------------- */

/* present = past_cache with `update` written along `axis` (the sequence axis, default -2) at
 * write_indices[batch] (0 when omitted); "circular" mode wraps the index modulo the cache
 * length, "linear" requires the update to fit. */
static ox_status ts_parse(const struct ox_node *n, const ox_tensor *const *in, int *axis,
                          bool *circular) {
    const ox_tensor *c = ox_in(n, in, 0), *u = ox_in(n, in, 1), *wi = ox_in(n, in, 2);
    if (!c || !u) return ox_node_err(n, OX_E_INVALID, "past_cache and update are required");
    ox_status s = same_type(n, u, c, "update", "past_cache");
    if (s) return s;
    if (c->rank < 2) return shape_err(n, c, "past_cache", "rank 2 or more");
    if ((s = ox_norm_axis(n, ox_attr_int(n, "axis", -2), c->rank, axis))) return s;
    if (*axis == 0)
        return ox_node_err(n, OX_E_INVALID, "axis is the batch axis: expected a sequence axis");
    bool ok = u->rank == c->rank;
    for (int i = 0; ok && i < c->rank; i++)
        ok = i == *axis ? u->dims[i] <= c->dims[i] : u->dims[i] == c->dims[i];
    if (!ok) return shape_err(n, u, "update", "past_cache's shape, shorter or equal along axis");
    if (wi && (!ox_dtype_is_int(wi->dtype) || wi->rank != 1 || wi->dims[0] != c->dims[0]))
        return shape_err(n, wi, "write_indices", "an integer [batch]");
    const char *mode = ox_attr_str(n, "mode", "linear");
    if (strcmp(mode, "linear") && strcmp(mode, "circular"))
        return ox_node_err(n, OX_E_INVALID, "mode '%s': expected 'linear' or 'circular'", mode);
    *circular = strcmp(mode, "circular") == 0;
    return OX_OK;
}

ox_status ox_attn_infer_tensorscatter(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                      const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    int axis;
    bool circular;
    ox_status s = ts_parse(n, in, &axis, &circular);
    if (s) return s;
    ox_set_like(out[0], in[0]);
    return OX_OK;
}

ox_status ox_attn_cpu_tensorscatter(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                                    const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    int axis;
    bool circular;
    ox_status s = ts_parse(n, in, &axis, &circular);
    if (s) return s;
    const ox_tensor *c = in[0], *u = in[1], *wi = ox_in(n, in, 2);
    size_t esz = ox_dtype_size(c->dtype);
    int64_t cnt = ox_tensor_numel(c);
    if (cnt) memcpy(out[0]->data, c->data, (size_t)cnt * esz);
    int64_t prefix = 1, per_batch = 1, inner = 1;
    for (int i = 0; i < c->rank; i++) {
        if (i < axis) prefix *= c->dims[i];
        if (i > 0 && i < axis) per_batch *= c->dims[i];
        if (i > axis) inner *= c->dims[i];
    }
    const int64_t max_len = c->dims[axis], len = u->dims[axis];
    const size_t row = (size_t)inner * esz;
    for (int64_t p = 0; p < prefix; p++) {
        int64_t b = p / per_batch, start = wi ? ox_get_i64(wi, b) : 0;
        if (start < 0 || (!circular && start + len > max_len))
            return ox_node_err(n, OX_E_INVALID,
                               "write index %lld for batch %lld: %lld positions do not fit in %lld",
                               (long long)start, (long long)b, (long long)len, (long long)max_len);
        for (int64_t t = 0; t < len && row; t++) {
            int64_t dst = start + t;
            if (circular) dst %= max_len;
            memcpy((char *)out[0]->data + (size_t)(p * max_len + dst) * row,
                   (const char *)u->data + (size_t)(p * len + t) * row, row);
        }
    }
    return OX_OK;
}

/* ---- CausalConvWithState (opset 27) ----------------------------------------------------- */

/* Depthwise causal 1-D convolution over [B, C, L] with weight [C, 1, K]: the input is
 * prefixed with past_state [B, C, K-1] (zeros when omitted), convolved without padding, and
 * optionally passed through SiLU ("silu" or "swish"). present_state is the last K-1 positions
 * of the prefixed input. */
static ox_status ccs_parse(const struct ox_node *n, const ox_tensor *const *in, bool *silu) {
    const ox_tensor *x = ox_in(n, in, 0), *w = ox_in(n, in, 1), *b = ox_in(n, in, 2);
    const ox_tensor *ps = ox_in(n, in, 3);
    ox_status s;
    if ((s = need_flt(n, x, "input")) || (s = need_flt(n, w, "weight")) ||
        (s = same_type(n, w, x, "weight", "input")))
        return s;
    if (x->rank != 3) return shape_err(n, x, "input", "[batch, channels, length]");
    int64_t C = x->dims[1];
    if (w->rank != 3 || w->dims[0] != C || w->dims[1] != 1 || w->dims[2] < 1)
        return shape_err(n, w, "weight", "[channels, 1, kernel_size]");
    if (b && ((s = same_type(n, b, x, "bias", "input")) || b->rank != 1 || b->dims[0] != C))
        return s ? s : shape_err(n, b, "bias", "[channels]");
    if (ps && ((s = same_type(n, ps, x, "past_state", "input")) || ps->rank != 3 ||
               ps->dims[0] != x->dims[0] || ps->dims[1] != C || ps->dims[2] != w->dims[2] - 1))
        return s ? s : shape_err(n, ps, "past_state", "[batch, channels, kernel_size - 1]");
    const char *act = ox_attr_str(n, "activation", "none");
    if (strcmp(act, "none") && strcmp(act, "silu") && strcmp(act, "swish"))
        return ox_node_err(n, OX_E_INVALID, "activation '%s': expected none, silu or swish", act);
    *silu = strcmp(act, "none") != 0;
    return OX_OK;
}

ox_status ox_attn_infer_causalconv(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                   const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    bool silu;
    ox_status s = ccs_parse(n, in, &silu);
    if (s) return s;
    const ox_tensor *x = in[0];
    ox_set_like(out[0], x);
    int64_t dims[3] = {x->dims[0], x->dims[1], in[1]->dims[2] - 1};
    if (n->n_outputs > 1 && out[1]) ox_set_shape(out[1], x->dtype, 3, dims);
    return OX_OK;
}

/* Element p of one channel's prefixed sequence [past_state (H long) | input]. */
static inline double prefixed(const ox_tensor *x, const ox_tensor *ps, int64_t xo, int64_t po,
                              int64_t H, int64_t p) {
    return p < H ? (ps ? ox_ld(ps, po + p) : 0.0) : ox_ld(x, xo + p - H);
}

ox_status ox_attn_cpu_causalconv(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                                 const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    bool silu;
    ox_status s = ccs_parse(n, in, &silu);
    if (s) return s;
    const ox_tensor *x = in[0], *w = in[1], *bias = ox_in(n, in, 2), *ps = ox_in(n, in, 3);
    ox_tensor *ys = n->n_outputs > 1 ? out[1] : NULL;
    const int64_t B = x->dims[0], C = x->dims[1], L = x->dims[2], K = w->dims[2], H = K - 1;
    const ox_dtype dt = x->dtype;
    for (int64_t b = 0; b < B; b++)
        for (int64_t c = 0; c < C; c++) {
            int64_t xo = (b * C + c) * L, po = (b * C + c) * H;
            for (int64_t t = 0; t < L; t++) {
                double acc = bias ? ox_ld(bias, c) : 0.0;
                for (int64_t k = 0; k < K; k++)
                    acc += ox_ld(w, c * K + k) * prefixed(x, ps, xo, po, H, t + k);
                double o = rnd(dt, acc);
                if (silu) o = o / (1.0 + exp(-o));
                ox_st(out[0], xo + t, o);
            }
            if (ys)
                for (int64_t t = 0; t < H; t++)
                    ox_st(ys, po + t, prefixed(x, ps, xo, po, H, L + t));
        }
    return OX_OK;
}

/* ---- LinearAttention (opset 27) --------------------------------------------------------- */

/* A recurrent state S [d_k, d_v] per (batch, KV head), carried over T steps:
 *   gated rules:  S = exp(g_t) * S                      (decay per head or per key dim)
 *   delta rules:  v_t = beta_t * (v_t - S^T k_t)        (k_t gated by erase_gate if given)
 *   all:          S = S + k_t v_t^T;  o_t = scale * q_t^T S   for each query head of the group
 * Query, key, value, decay and beta are packed [B, T, H*D]. The state is kept in float, as
 * the reference does; present_state has past_state's type (query's when omitted). */
struct lin {
    int64_t B, T, Hq, Hkv, dk, dv;
    bool gated, delta, per_dim_decay;
    int64_t beta_heads;
    double scale;
    const ox_tensor *q, *k, *v, *past, *decay, *beta, *erase;
};

static ox_status lin_parse(const struct ox_node *n, const ox_tensor *const *in, struct lin *l) {
    memset(l, 0, sizeof *l);
    const ox_tensor *q = ox_in(n, in, 0), *k = ox_in(n, in, 1), *v = ox_in(n, in, 2);
    ox_status s;
    if ((s = need_flt(n, q, "query")) || (s = need_flt(n, k, "key")) ||
        (s = need_flt(n, v, "value")) || (s = same_type(n, k, q, "key", "query")) ||
        (s = same_type(n, v, q, "value", "query")))
        return s;
    l->q = q, l->k = k, l->v = v;
    l->Hq = ox_attr_int(n, "q_num_heads", 0), l->Hkv = ox_attr_int(n, "kv_num_heads", 0);
    if (l->Hq <= 0 || l->Hkv <= 0 || l->Hq % l->Hkv)
        return ox_node_err(n, OX_E_INVALID,
                           "q_num_heads %lld must be a positive multiple of "
                           "kv_num_heads %lld",
                           (long long)l->Hq, (long long)l->Hkv);
    if (q->rank != 3) return shape_err(n, q, "query", "[batch, sequence, q_num_heads * d_k]");
    l->B = q->dims[0], l->T = q->dims[1];
    if (q->dims[2] % l->Hq) return shape_err(n, q, "query", "a last dim divisible by q_num_heads");
    l->dk = q->dims[2] / l->Hq;
    if (k->rank != 3 || k->dims[0] != l->B || k->dims[1] != l->T || k->dims[2] != l->Hkv * l->dk)
        return shape_err(n, k, "key", "[batch, sequence, kv_num_heads * d_k]");
    if (v->rank != 3 || v->dims[0] != l->B || v->dims[1] != l->T || v->dims[2] % l->Hkv)
        return shape_err(n, v, "value", "[batch, sequence, kv_num_heads * d_v]");
    l->dv = v->dims[2] / l->Hkv;

    const char *rule = ox_attr_str(n, "update_rule", "gated_delta");
    if (!strcmp(rule, "linear"))
        ;
    else if (!strcmp(rule, "gated"))
        l->gated = true;
    else if (!strcmp(rule, "delta"))
        l->delta = true;
    else if (!strcmp(rule, "gated_delta"))
        l->gated = l->delta = true;
    else
        return ox_node_err(n, OX_E_INVALID,
                           "update_rule '%s': expected linear, gated, delta or "
                           "gated_delta",
                           rule);
    l->past = ox_in(n, in, 3), l->decay = ox_in(n, in, 4), l->beta = ox_in(n, in, 5);
    l->erase = ox_in(n, in, 6);
    if (!l->decay != !l->gated)
        return ox_node_err(n, OX_E_INVALID, "update_rule '%s' %s the decay input", rule,
                           l->gated ? "requires" : "forbids");
    if (!l->beta != !l->delta)
        return ox_node_err(n, OX_E_INVALID, "update_rule '%s' %s the beta input", rule,
                           l->delta ? "requires" : "forbids");
    if (l->erase && !l->delta)
        return ox_node_err(n, OX_E_INVALID, "update_rule '%s' forbids the erase_gate input", rule);
    const ox_tensor *d = l->decay, *b = l->beta, *e = l->erase, *p = l->past;
    if (d) {
        if ((s = need_flt(n, d, "decay"))) return s;
        if (d->rank != 3 || d->dims[0] != l->B || d->dims[1] != l->T ||
            (d->dims[2] != l->Hkv && d->dims[2] != l->Hkv * l->dk))
            return shape_err(n, d, "decay", "[batch, sequence, kv_num_heads (* d_k)]");
        l->per_dim_decay = d->dims[2] != l->Hkv;
    }
    if (b) {
        if ((s = need_flt(n, b, "beta"))) return s;
        if (b->rank != 3 || b->dims[0] != l->B || b->dims[1] != l->T ||
            (b->dims[2] != l->Hkv && b->dims[2] != 1))
            return shape_err(n, b, "beta", "[batch, sequence, kv_num_heads or 1]");
        l->beta_heads = b->dims[2];
    }
    if (e) {
        if ((s = need_flt(n, e, "erase_gate"))) return s;
        if (e->rank != 3 || e->dims[0] != l->B || e->dims[1] != l->T ||
            e->dims[2] != l->Hkv * l->dk)
            return shape_err(n, e, "erase_gate", "[batch, sequence, kv_num_heads * d_k]");
    }
    if (p) {
        if ((s = need_flt(n, p, "past_state"))) return s;
        if (p->rank != 4 || p->dims[0] != l->B || p->dims[1] != l->Hkv || p->dims[2] != l->dk ||
            p->dims[3] != l->dv)
            return shape_err(n, p, "past_state", "[batch, kv_num_heads, d_k, d_v]");
    }
    double sc = ox_attr_float(n, "scale", 0.0f);
    l->scale = sc != 0 ? sc : 1.0 / sqrt((double)l->dk);
    return OX_OK;
}

ox_status ox_attn_infer_linear(struct ox_infer_ctx *ctx, const struct ox_node *n,
                               const ox_tensor *const *in, ox_tensor *const *out) {
    struct lin l;
    ox_status s = lin_parse(n, in, &l);
    if (s) return s;
    int64_t y[3] = {l.B, l.T, l.Hq * l.dv}, st4[4] = {l.B, l.Hkv, l.dk, l.dv};
    if (out[0]) ox_set_shape(out[0], l.q->dtype, 3, y);
    if (n->n_outputs > 1 && out[1])
        ox_set_shape(out[1], l.past ? l.past->dtype : l.q->dtype, 4, st4);
    size_t e = 0;
    if (!add_prod(&e, l.dk, l.dv, 1, 1) || !add_prod(&e, 2, l.dk, 1, 1) ||
        !add_prod(&e, 2, l.dv, 1, 1) || !ox_mul_size(e, sizeof(float), &ctx->scratch_bytes))
        return ox_node_err(n, OX_E_NOMEM, "scratch size overflows");
    return OX_OK;
}

ox_status ox_attn_cpu_linear(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                             const ox_tensor *const *in, ox_tensor *const *out) {
    struct lin l;
    ox_status s = lin_parse(n, in, &l);
    if (s) return s;
    const int64_t B = l.B, T = l.T, Hq = l.Hq, Hkv = l.Hkv, dk = l.dk, dv = l.dv, G = Hq / Hkv;
    float *S = ctx->scratch, *kt = S + dk * dv, *ke = kt + dk, *vt = ke + dk, *r = vt + dv;
    ox_tensor *Y = out[0], *PS = n->n_outputs > 1 ? out[1] : NULL;
    for (int64_t b = 0; b < B; b++)
        for (int64_t hk = 0; hk < Hkv; hk++) {
            int64_t so = (b * Hkv + hk) * dk * dv;
            for (int64_t i = 0; i < dk * dv; i++)
                S[i] = l.past ? (float)ox_ld(l.past, so + i) : 0.0f;
            for (int64_t t = 0; t < T; t++) {
                int64_t bt = b * T + t;
                for (int64_t d = 0; d < dk; d++)
                    kt[d] = (float)ox_ld(l.k, bt * Hkv * dk + hk * dk + d);
                for (int64_t m = 0; m < dv; m++)
                    vt[m] = (float)ox_ld(l.v, bt * Hkv * dv + hk * dv + m);
                if (l.gated)
                    for (int64_t d = 0; d < dk; d++) {
                        int64_t gi = l.per_dim_decay ? bt * Hkv * dk + hk * dk + d : bt * Hkv + hk;
                        float g = expf((float)ox_ld(l.decay, gi));
                        for (int64_t m = 0; m < dv; m++) S[d * dv + m] *= g;
                    }
                if (l.delta) {
                    float beta =
                        (float)ox_ld(l.beta, bt * l.beta_heads + (l.beta_heads == 1 ? 0 : hk));
                    for (int64_t d = 0; d < dk; d++)
                        ke[d] = l.erase ? (float)ox_ld(l.erase, bt * Hkv * dk + hk * dk + d) * kt[d]
                                        : kt[d];
                    for (int64_t m = 0; m < dv; m++) r[m] = 0;
                    for (int64_t d = 0; d < dk; d++)
                        for (int64_t m = 0; m < dv; m++) r[m] += S[d * dv + m] * ke[d];
                    for (int64_t m = 0; m < dv; m++) vt[m] = beta * (vt[m] - r[m]);
                }
                for (int64_t d = 0; d < dk; d++)
                    for (int64_t m = 0; m < dv; m++) S[d * dv + m] += kt[d] * vt[m];
                if (!Y) continue;
                for (int64_t g = 0; g < G; g++) {
                    int64_t h = hk * G + g, qo = bt * Hq * dk + h * dk, yo = bt * Hq * dv + h * dv;
                    for (int64_t m = 0; m < dv; m++) r[m] = 0;
                    for (int64_t d = 0; d < dk; d++) {
                        float qd = (float)ox_ld(l.q, qo + d);
                        for (int64_t m = 0; m < dv; m++) r[m] += qd * S[d * dv + m];
                    }
                    for (int64_t m = 0; m < dv; m++) ox_st(Y, yo + m, (float)(l.scale * r[m]));
                }
            }
            if (PS)
                for (int64_t i = 0; i < dk * dv; i++) ox_st(PS, so + i, S[i]);
        }
    return OX_OK;
}

/* ---- FlexAttention (ai.onnx.preview 1) -------------------------------------------------- */

/* Attention over 4-D Q [B, Hq, L, E], K [B, Hkv, S, E], V [B, Hkv, S, Ev] with optional
 * subgraphs: score_mod rewrites the whole [B, Hq, L, S] score tensor before the softmax,
 * prob_mod the probabilities after it. Both see tensors of softmax_precision (float unless
 * the inputs are double). Query head h reads KV head h / (Hq / Hkv). */
struct flex {
    int64_t B, Hq, Hkv, L, S, E, Ev;
    ox_dtype sp;
    bool dbl; /* compute in double */
    double scale;
    const struct ox_graph *score_mod, *prob_mod;
};

static ox_status flex_graph(const struct ox_node *n, const char *name, const struct ox_graph **g) {
    const struct ox_attr *a = ox_node_attr(n, name);
    *g = NULL;
    if (!a) return OX_OK;
    if (a->type != OX_ATTR_GRAPH || !a->g)
        return ox_node_err(n, OX_E_INVALID, "attribute %s must be a graph", name);
    if (a->g->n_inputs != 1 || a->g->n_outputs != 1)
        return ox_node_err(n, OX_E_INVALID, "%s has %d inputs and %d outputs: expected 1 and 1",
                           name, a->g->n_inputs, a->g->n_outputs);
    *g = a->g;
    return OX_OK;
}

static ox_status flex_parse(const struct ox_node *n, const ox_tensor *const *in, struct flex *f) {
    const ox_tensor *q = ox_in(n, in, 0), *k = ox_in(n, in, 1), *v = ox_in(n, in, 2);
    ox_status s;
    if ((s = need_flt(n, q, "Q")) || (s = need_flt(n, k, "K")) || (s = need_flt(n, v, "V")) ||
        (s = same_type(n, k, q, "K", "Q")) || (s = same_type(n, v, q, "V", "Q")))
        return s;
    if (q->rank != 4) return shape_err(n, q, "Q", "[batch, q_heads, q_sequence, head_size]");
    f->B = q->dims[0], f->Hq = q->dims[1], f->L = q->dims[2], f->E = q->dims[3];
    if (k->rank != 4 || k->dims[0] != f->B || k->dims[3] != f->E)
        return shape_err(n, k, "K", "[batch, kv_heads, kv_sequence, Q's head_size]");
    f->Hkv = k->dims[1], f->S = k->dims[2];
    if (v->rank != 4 || v->dims[0] != f->B || v->dims[1] != f->Hkv || v->dims[2] != f->S)
        return shape_err(n, v, "V", "[batch, K's kv_heads, K's kv_sequence, v_head_size]");
    f->Ev = v->dims[3];
    if (f->Hkv <= 0 || f->Hq % f->Hkv)
        return ox_node_err(n, OX_E_SHAPE, "%lld query heads are not a multiple of %lld KV heads",
                           (long long)f->Hq, (long long)f->Hkv);
    int64_t sp = ox_attr_int(n, "softmax_precision", q->dtype == OX_DOUBLE ? OX_DOUBLE : OX_FLOAT);
    if (!is_softmax_type(sp))
        return ox_node_err(n, OX_E_INVALID, "softmax_precision %lld: expected a float type",
                           (long long)sp);
    f->sp = (ox_dtype)sp;
    f->dbl = q->dtype == OX_DOUBLE || f->sp == OX_DOUBLE;
    f->scale =
        ox_node_attr(n, "scale") ? ox_attr_float(n, "scale", 1.0f) : 1.0f / sqrtf((float)f->E);
    if ((s = flex_graph(n, "score_mod", &f->score_mod)) ||
        (s = flex_graph(n, "prob_mod", &f->prob_mod)))
        return s;
    if (!fits_int(f->L) || !fits_int(f->S) || !fits_int(f->E) || !fits_int(f->Ev))
        return ox_node_err(n, OX_E_UNSUPPORTED, "sizes beyond the BLAS int range");
    return OX_OK;
}

/* Bytes of scratch: Q, K, V and all scores in the compute type, one output block, and the
 * scores again in softmax_precision when that is narrower than the compute type. */
static bool flex_scratch(const struct flex *f, size_t *bytes, size_t *conv_off) {
    size_t e = 0, es = f->dbl ? sizeof(double) : sizeof(float), c = 0;
    if (!add_prod(&e, f->B, f->Hq, f->L, f->E) || !add_prod(&e, f->B, f->Hkv, f->S, f->E) ||
        !add_prod(&e, f->B, f->Hkv, f->S, f->Ev) || !add_prod(&e, f->B, f->Hq, f->L, f->S) ||
        !add_prod(&e, f->L, f->Ev, 1, 1) || !ox_mul_size(e, es, bytes))
        return false;
    *conv_off = ox_align64(*bytes);
    if (ox_dtype_size(f->sp) == es) return true;
    return add_prod(&c, f->B, f->Hq, f->L, f->S) && ox_mul_size(c, ox_dtype_size(f->sp), &c) &&
           ox_add_size(*conv_off, c, bytes);
}

ox_status ox_attn_infer_flex(struct ox_infer_ctx *ctx, const struct ox_node *n,
                             const ox_tensor *const *in, ox_tensor *const *out) {
    struct flex f;
    ox_status s = flex_parse(n, in, &f);
    if (s) return s;
    int64_t y[4] = {f.B, f.Hq, f.L, f.Ev};
    ox_set_shape(out[0], in[0]->dtype, 4, y);
    size_t off;
    if (!flex_scratch(&f, &ctx->scratch_bytes, &off))
        return ox_node_err(n, OX_E_NOMEM, "scratch size overflows");
    return OX_OK;
}

/* Run modifier `g` over the [B, Hq, L, S] tensor in `sc` (compute type), in place. */
static ox_status flex_mod(struct ox_kernel_ctx *ctx, const struct ox_node *n, const struct flex *f,
                          const struct ox_graph *g, const char *name, void *sc, void *conv) {
    ox_tensor t = {.dtype = f->sp, .rank = 4, .dims = {f->B, f->Hq, f->L, f->S}};
    int64_t cnt = ox_tensor_numel(&t);
    t.data = conv ? conv : sc;
    if (conv)
        for (int64_t i = 0; i < cnt; i++) ox_set_f64(&t, i, cget(sc, f->dbl, i));
    const ox_tensor *gin[1] = {&t}, *gout[1] = {NULL};
    ox_status s = ox_subgraph_run(ctx, g, gin, gout);
    if (s) return ox_err_prefix(s, "node '%s' (FlexAttention): %s: ", n->name ? n->name : "", name);
    const ox_tensor *r = gout[0];
    bool same = r && r->dtype == f->sp && r->rank == 4;
    for (int i = 0; same && i < 4; i++) same = r->dims[i] == t.dims[i];
    if (!same) {
        char buf[256];
        return ox_node_err(n, OX_E_SHAPE,
                           "%s returned %s: expected its input's %s[%lld,%lld,%lld,%lld]", name,
                           r ? ox_tensor_desc(r, buf, sizeof buf) : "nothing", ox_dtype_name(f->sp),
                           (long long)f->B, (long long)f->Hq, (long long)f->L, (long long)f->S);
    }
    for (int64_t i = 0; i < cnt; i++) cset(sc, f->dbl, i, ox_ld(r, i));
    return OX_OK;
}

ox_status ox_attn_cpu_flex(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                           const ox_tensor *const *in, ox_tensor *const *out) {
    struct flex f;
    ox_status s = flex_parse(n, in, &f);
    if (s) return s;
    size_t need, conv_off;
    if (!flex_scratch(&f, &need, &conv_off) || need > ctx->scratch_bytes)
        return ox_node_err(n, OX_E_INTERNAL, "scratch of %zu bytes is too small",
                           ctx->scratch_bytes);
    const ox_tensor *Q = in[0], *K = in[1], *V = in[2];
    ox_tensor *Y = out[0];
    const int64_t B = f.B, Hq = f.Hq, Hkv = f.Hkv, L = f.L, S = f.S, E = f.E, Ev = f.Ev;
    const int64_t G = Hq / Hkv;
    const ox_dtype dt = Q->dtype, sp = f.sp;
    const bool dbl = f.dbl;
    const size_t es = dbl ? sizeof(double) : sizeof(float);
    char *w = ctx->scratch;
    void *q = w;
    void *k = w = ox_scratch_at(w, (size_t)(B * Hq * L * E) * es);
    void *v = w = ox_scratch_at(w, (size_t)(B * Hkv * S * E) * es);
    void *sc = w = ox_scratch_at(w, (size_t)(B * Hkv * S * Ev) * es);
    void *y = w = ox_scratch_at(w, (size_t)(B * Hq * L * S) * es);
    void *conv = ox_dtype_size(sp) == es ? NULL : ox_scratch_at(ctx->scratch, conv_off);

    const double sq = rnd(dt, sqrtf((float)f.scale));
    int64_t nq = B * Hq * L * E, nk = B * Hkv * S * E, nv = B * Hkv * S * Ev;
    for (int64_t i = 0; i < nq; i++) cset(q, dbl, i, rnd(dt, ox_ld(Q, i) * sq));
    for (int64_t i = 0; i < nk; i++) cset(k, dbl, i, rnd(dt, ox_ld(K, i) * sq));
    for (int64_t i = 0; i < nv; i++) cset(v, dbl, i, rnd(sp, ox_ld(V, i)));
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hq; h++) {
            const char *qb = (const char *)q + (size_t)((b * Hq + h) * L * E) * es;
            const char *kb = (const char *)k + (size_t)((b * Hkv + h / G) * S * E) * es;
            char *sb = (char *)sc + (size_t)((b * Hq + h) * L * S) * es;
            gemm(dbl, true, L, S, E, qb, E, kb, E, sb, S);
        }
    int64_t ns = B * Hq * L * S;
    for (int64_t i = 0; i < ns; i++) cset(sc, dbl, i, rnd(sp, rnd(dt, cget(sc, dbl, i))));
    if (f.score_mod && (s = flex_mod(ctx, n, &f, f.score_mod, "score_mod", sc, conv))) return s;
    for (int64_t r = 0; r < B * Hq * L; r++) {
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < S; j++) mx = fmax(mx, cget(sc, dbl, r * S + j));
        for (int64_t j = 0; j < S; j++) {
            double e = exp(cget(sc, dbl, r * S + j) - mx);
            cset(sc, dbl, r * S + j, e);
            sum += e;
        }
        for (int64_t j = 0; j < S; j++)
            cset(sc, dbl, r * S + j, rnd(sp, cget(sc, dbl, r * S + j) / sum));
    }
    if (f.prob_mod && (s = flex_mod(ctx, n, &f, f.prob_mod, "prob_mod", sc, conv))) return s;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hq; h++) {
            const char *pb = (const char *)sc + (size_t)((b * Hq + h) * L * S) * es;
            const char *vb = (const char *)v + (size_t)((b * Hkv + h / G) * S * Ev) * es;
            gemm(dbl, false, L, Ev, S, pb, S, vb, Ev, y, Ev);
            int64_t yo = (b * Hq + h) * L * Ev;
            for (int64_t i = 0; i < L * Ev; i++) ox_st(Y, yo + i, rnd(sp, cget(y, dbl, i)));
        }
    return OX_OK;
}

/* ---- FusedAttention (ai.onnxexec; kernels/op.h, graph/optimize.c) ------------------------ */

/* Per batch item: the scores in [S, T] rows (alpha Q . KT through BLAS), the mask added, a
 * softmax per row, then Y = P . V through BLAS, reading Q, KT, V and writing Y in place
 * through their strides; an operand BLAS cannot address is copied into rows first (the
 * output: computed in rows, then scattered). float and double compute in their own type;
 * float16 and bfloat16 are copied to float first and rounded where the graph's own nodes
 * round (the scores, the masked scores, the probabilities, the output). Items run in
 * parallel, each thread in its own part of the scratch. */
enum { FA_SCORES, FA_PACK_Q, FA_PACK_K, FA_PACK_V, FA_PACK_Y, FA_PANELS, FA_N_PARTS };

struct fattn_layout {
    bool fast; /* float through the packed kernel (ox_sgemm_packed), else BLAS calls */
    bool pack[OX_FATTN_N];
    struct ox_gemm_desc g1, g2;
    size_t part[FA_N_PARTS]; /* byte offsets in a thread's scratch */
    size_t per_thread;       /* bytes, 64-aligned */
    size_t shared;           /* bytes of float copies (float16/bfloat16), before the threads' */
    size_t bytes;            /* all: shared + per_thread x the threads */
};

static int64_t dims_numel(int rank, const int64_t *d) {
    int64_t c = 1;
    for (int i = 0; i < rank; i++) c *= d[i];
    return c;
}

static struct ox_mat rows_of(int64_t r, int64_t c) {
    return (struct ox_mat){r, c, c, 1};
}

static ox_status fattn_layout(const struct ox_node *n, const ox_tensor *const *in,
                              const struct ox_fattn *a, int n_threads, struct fattn_layout *l) {
    memset(l, 0, sizeof *l);
    static const int64_t one = 1;
    const int64_t *r[OX_FATTN_N] = {&a->S, &a->Dk, &a->T, &one, &a->S};
    const int64_t *c[OX_FATTN_N] = {&a->Dk, &a->T, &a->Dv, &one, &a->Dv};
    struct ox_mat v[OX_FATTN_N];
    l->fast = a->dtype == OX_FLOAT && ox_sgemm_is_fast();
    for (int k = 0; k < OX_FATTN_N; k++) {
        int64_t ld;
        bool rm = true;
        v[k] = a->m[k];
        /* the packed kernel writes rows: an output without contiguous rows is scattered */
        l->pack[k] = k != OX_FATTN_MASK &&
                     ((k < 3 && a->how[k] != OX_FATTN_STRIDED) || !ox_mat_blas(v[k], &ld, &rm) ||
                      (l->fast && k == OX_FATTN_Y && !rm));
        if (l->pack[k]) v[k] = rows_of(*r[k], *c[k]);
    }
    struct ox_mat sc = rows_of(a->S, a->T);
    if (!ox_gemm_describe(v[OX_FATTN_Q], v[OX_FATTN_K], sc, &l->g1) ||
        !ox_gemm_describe(sc, v[OX_FATTN_V], v[OX_FATTN_Y], &l->g2) || a->S * a->T > INT_MAX)
        return ox_node_err(n, OX_E_UNSUPPORTED, "sizes beyond the BLAS int range");
    size_t es = a->dtype == OX_DOUBLE ? sizeof(double) : sizeof(float), at = 0;
    int64_t panels = 0;
    if (l->fast) {
        panels = ox_sgemm_packed_a_floats(a->S, a->Dk);
        if (ox_sgemm_packed_a_floats(a->S, a->T) > panels)
            panels = ox_sgemm_packed_a_floats(a->S, a->T);
    }
    const int64_t prod[FA_N_PARTS][2] = {{a->S, a->T},  {a->S, a->Dk}, {a->Dk, a->T},
                                         {a->T, a->Dv}, {a->S, a->Dv}, {panels, 1}};
    const int which[FA_N_PARTS] = {-1, OX_FATTN_Q, OX_FATTN_K, OX_FATTN_V, OX_FATTN_Y, -1};
    for (int p = 0; p < FA_N_PARTS; p++) {
        l->part[p] = at;
        size_t b = 0;
        if ((which[p] < 0 || l->pack[which[p]]) &&
            !(add_prod(&b, prod[p][0], prod[p][1], (int64_t)es, 1) && ox_add_size(at, b, &at) &&
              ox_add_size(at, 63, &at)))
            return ox_node_err(n, OX_E_NOMEM, "scratch size overflows");
        at &= ~(size_t)63;
    }
    l->per_thread = at;
    if (a->dtype == OX_FLOAT16 || a->dtype == OX_BFLOAT16) {
        size_t e = 0;
        for (int k = 0; k < 4; k++)
            if (ox_in(n, in, k) && !add_prod(&e, ox_tensor_numel(in[k]), 1, 1, 1))
                return ox_node_err(n, OX_E_NOMEM, "scratch size overflows");
        if (!add_prod(&e, dims_numel(a->y_rank, a->y_dims), 1, 1, 1) ||
            !ox_mul_size(e, sizeof(float), &l->shared) || !ox_add_size(l->shared, 63, &l->shared))
            return ox_node_err(n, OX_E_NOMEM, "scratch size overflows");
        l->shared &= ~(size_t)63;
    }
    if (!ox_mul_size(l->per_thread, (size_t)(n_threads > 0 ? n_threads : 1), &l->bytes) ||
        !ox_add_size(l->bytes, l->shared, &l->bytes))
        return ox_node_err(n, OX_E_NOMEM, "scratch size overflows");
    return OX_OK;
}

/* ---- the generic path (kernels/op.h: a->generic) ---- */

/* Doubles of scratch: Q', KT', V' dense, the product, the masked scores (then P), Y. */
static bool generic_scratch(const struct ox_fattn *a, size_t *bytes) {
    size_t e = 0;
    int64_t parts[6] = {dims_numel(a->view[0].rank, a->view[0].dims),
                        dims_numel(a->view[1].rank, a->view[1].dims),
                        dims_numel(a->view[2].rank, a->view[2].dims),
                        dims_numel(a->mm1.rank, a->mm1.dims),
                        dims_numel(a->s_rank, a->s_dims),
                        dims_numel(a->mm2.rank, a->mm2.dims)};
    for (int i = 0; i < 6; i++)
        if (!add_prod(&e, parts[i], 1, 1, 1)) return false;
    return ox_mul_size(e, sizeof(double), bytes);
}

/* dst = view v of t, dense, in double. */
static void generic_dense(const struct ox_view *v, const ox_tensor *t, double *dst) {
    int64_t cnt = dims_numel(v->rank, v->dims), idx[OX_MAX_RANK];
    for (int64_t i = 0; i < cnt; i++) {
        for (int64_t r = i, x = v->rank - 1; x >= 0; x--) {
            idx[x] = r % v->dims[x];
            r /= v->dims[x];
        }
        dst[i] = ox_ld(t, ox_view_source(v, idx));
    }
}

/* C = alpha A B by MatMul's rules (m from ox_matmul_shape; A, B, C dense). */
static void generic_matmul(const struct ox_matmul_shape *m, const double *A, const double *B,
                           double *C, double alpha) {
    for (int64_t b = 0; b < m->batch; b++) {
        int64_t ao, bo;
        ox_matmul_offsets(m, b, &ao, &bo);
        for (int64_t i = 0; i < m->M; i++)
            for (int64_t j = 0; j < m->N; j++) {
                double acc = 0;
                for (int64_t k = 0; k < m->K; k++)
                    acc += A[ao + i * m->K + k] * B[bo + k * m->N + j];
                C[(b * m->M + i) * m->N + j] = alpha * acc;
            }
    }
}

/* Element strides of dense dims (rank r) as seen from the broadcast dims (rank R, dims D). */
static void seen_from(int r, const int64_t *d, int R, const int64_t *D, int64_t *st) {
    int64_t s = 1;
    for (int i = R - 1; i >= 0; i--) {
        int j = i - (R - r);
        st[i] = j >= 0 && d[j] == D[i] ? s : 0;
        if (j >= 0) s *= d[j];
    }
}

static void generic_run(const struct ox_node *n, const ox_tensor *const *in, ox_tensor *y,
                        const struct ox_fattn *a, double *w) {
    double *q = w, *k = q + dims_numel(a->view[0].rank, a->view[0].dims);
    double *v = k + dims_numel(a->view[1].rank, a->view[1].dims);
    double *sc = v + dims_numel(a->view[2].rank, a->view[2].dims);
    double *s2 = sc + dims_numel(a->mm1.rank, a->mm1.dims);
    double *yd = s2 + dims_numel(a->s_rank, a->s_dims);
    for (int i = 0; i < 3; i++) generic_dense(&a->view[i], in[i], i == 0 ? q : i == 1 ? k : v);
    generic_matmul(&a->mm1, q, k, sc, ox_fattn_alpha(n, in, a));
    /* the scores broadcast with the mask */
    const ox_tensor *m = ox_in(n, in, 3);
    int R = a->s_rank;
    int64_t cnt = dims_numel(R, a->s_dims), sst[OX_MAX_RANK], mst[OX_MAX_RANK] = {0};
    seen_from(a->mm1.rank, a->mm1.dims, R, a->s_dims, sst);
    if (m) seen_from(m->rank, m->dims, R, a->s_dims, mst);
    for (int64_t e = 0; e < cnt; e++) {
        int64_t so = 0, mo = 0;
        for (int64_t r = e, x = R - 1; x >= 0; x--) {
            int64_t c = r % a->s_dims[x];
            r /= a->s_dims[x];
            so += c * sst[x], mo += c * mst[x];
        }
        s2[e] = sc[so] + (m ? ox_ld(m, mo) : 0.0);
    }
    /* Softmax along the last axis (a scalar is a row of one) */
    int64_t len = R ? a->s_dims[R - 1] : 1;
    for (int64_t r0 = 0; len && r0 < cnt; r0 += len) {
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < len; j++) mx = s2[r0 + j] > mx ? s2[r0 + j] : mx;
        for (int64_t j = 0; j < len; j++) sum += s2[r0 + j] = exp(s2[r0 + j] - mx);
        for (int64_t j = 0; j < len; j++) s2[r0 + j] /= sum;
    }
    generic_matmul(&a->mm2, s2, v, yd, 1.0);
    /* Y through perm_y */
    const int64_t *perm = a->y_perm;
    int64_t lst[OX_MAX_RANK], ny = dims_numel(a->y_rank, a->y_dims);
    for (int64_t s = 1, i = a->y_rank - 1; i >= 0; i--) lst[i] = s, s *= a->mm2.dims[i];
    for (int64_t e = 0; e < ny; e++) {
        int64_t src = 0;
        for (int64_t r = e, x = a->y_rank - 1; x >= 0; x--) {
            src += (r % a->y_dims[x]) * lst[perm[x]];
            r /= a->y_dims[x];
        }
        ox_st(y, e, yd[src]);
    }
}

ox_status ox_attn_infer_fused(struct ox_infer_ctx *ctx, const struct ox_node *n,
                              const ox_tensor *const *in, ox_tensor *const *out) {
    struct ox_fattn a;
    struct fattn_layout l;
    ox_status s = ox_fattn_parse(n, in, &a);
    if (!s && a.generic) {
        ox_set_shape(out[0], a.dtype, a.y_rank, a.y_dims);
        if (!generic_scratch(&a, &ctx->scratch_bytes))
            return ox_node_err(n, OX_E_NOMEM, "scratch size overflows");
        return OX_OK;
    }
    if (s || (s = fattn_layout(n, in, &a, ctx->n_threads, &l))) return s;
    ox_set_shape(out[0], a.dtype, a.y_rank, a.y_dims);
    ctx->scratch_bytes = l.bytes;
    return OX_OK;
}

struct fattn_job {
    const struct ox_fattn *a;
    const struct fattn_layout *l;
    bool dbl, narrow;
    const char *src[4]; /* Q, KT, V, mask in the compute type */
    char *y;            /* the output in the compute type */
    double alpha;
    char *scratch;
    int64_t n_parts; /* threads whose scratch is there */
};

/* Copies between a strided view and rows (to_rows: view -> rows). */
static void copy_view(bool dbl, struct ox_mat m, const char *from, char *to, bool to_rows) {
    for (int64_t i = 0; i < m.rows; i++)
        for (int64_t j = 0; j < m.cols; j++) {
            int64_t v = i * m.rs + j * m.cs, r = i * m.cols + j;
            int64_t s = to_rows ? v : r, d = to_rows ? r : v;
            if (dbl)
                ((double *)to)[d] = ((const double *)from)[s];
            else
                ((float *)to)[d] = ((const float *)from)[s];
        }
}

/* Rows of operand k's matrix for batch item `item` (whose batch offset is `at`), element
 * by element: through the view's axes where a matrix dim is merged (OX_FATTN_AXES), else
 * through its stages (OX_FATTN_STAGES). */
static void gather_rows(const struct fattn_job *j, int k, int64_t item, int64_t at, char *to) {
    const struct ox_fattn *a = j->a;
    const struct ox_view *v = &a->view[k];
    int r = v->rank, lead = a->brank - (r - 2);
    bool stages = a->how[k] == OX_FATTN_STAGES;
    int64_t idx[OX_MAX_RANK] = {0};
    for (int x = a->brank - 1; x >= 0; x--) {
        int64_t d = a->bdims[x], c = item % d;
        item /= d;
        if (x >= lead) idx[x - lead] = v->dims[x - lead] == 1 ? 0 : c;
    }
    int64_t rows = v->dims[r - 2], cols = v->dims[r - 1];
    for (int64_t i = 0; i < rows; i++)
        for (int64_t c = 0; c < cols; c++) {
            idx[r - 2] = i, idx[r - 1] = c;
            int64_t src = stages ? ox_view_source(v, idx)
                                 : at + ox_view_axis_offset(&v->ax[r - 2], i) +
                                       ox_view_axis_offset(&v->ax[r - 1], c);
            if (j->dbl)
                ((double *)to)[i * cols + c] = ((const double *)j->src[k])[src];
            else
                ((float *)to)[i * cols + c] = ((const float *)j->src[k])[src];
        }
}

static void zero_view(bool dbl, struct ox_mat m, char *to) {
    for (int64_t i = 0; i < m.rows; i++)
        for (int64_t j = 0; j < m.cols; j++) {
            if (dbl)
                ((double *)to)[i * m.rs + j * m.cs] = 0;
            else
                ((float *)to)[i * m.rs + j * m.cs] = 0;
        }
}

static void blas_desc(bool dbl, const struct ox_gemm_desc *d, double alpha, const void *a,
                      const void *b, void *c) {
    const void *first = d->swap ? b : a, *second = d->swap ? a : b;
    enum CBLAS_TRANSPOSE ta = d->ta ? CblasTrans : CblasNoTrans;
    enum CBLAS_TRANSPOSE tb = d->tb ? CblasTrans : CblasNoTrans;
    if (dbl)
        cblas_dgemm(CblasColMajor, ta, tb, d->m, d->n, d->k, alpha, first, d->lda, second, d->ldb,
                    0.0, c, d->ldc);
    else
        cblas_sgemm(CblasColMajor, ta, tb, d->m, d->n, d->k, (float)alpha, first, d->lda, second,
                    d->ldb, 0.0f, c, d->ldc);
}

/* C (rows ldc apart) = A . B through the packed kernel; A and B BLAS-addressable views. */
static void packed_gemm(struct ox_mat a, const float *A, struct ox_mat b, const float *B, float *C,
                        int64_t ldc, float *panels) {
    int64_t lda, ldb;
    bool ra, rb;
    ox_mat_blas(a, &lda, &ra);
    ox_mat_blas(b, &ldb, &rb);
    ox_sgemm_pack_a(A, lda, !ra, a.rows, a.cols, panels);
    struct ox_gemm_b gb = {.pack = ox_gemm_b_pack_matrix, .data = B, .ld = ldb, .trans = !rb};
    struct ox_epilogue ep = {.lo = -INFINITY, .hi = INFINITY};
    ox_sgemm_packed(NULL, panels, a.rows, b.cols, a.cols, &gb, C, ldc, &ep, false);
}

static void fattn_item(const struct fattn_job *j, int64_t item, char *w) {
    const struct ox_fattn *a = j->a;
    const struct fattn_layout *l = j->l;
    const size_t es = j->dbl ? sizeof(double) : sizeof(float);
    const int64_t S = a->S, T = a->T;
    int64_t off[OX_FATTN_N];
    ox_fattn_offsets(a, item, off);
    const char *op[3];
    static const int part[3] = {FA_PACK_Q, FA_PACK_K, FA_PACK_V};
    for (int k = 0; k < 3; k++) {
        op[k] = j->src[k] + (size_t)off[k] * es;
        if (l->pack[k]) {
            if (a->how[k] == OX_FATTN_STRIDED)
                copy_view(j->dbl, a->m[k], op[k], w + l->part[part[k]], true);
            else
                gather_rows(j, k, item, off[k], w + l->part[part[k]]);
            op[k] = w + l->part[part[k]];
        }
    }
    char *sc = w + l->part[FA_SCORES];
    char *y = l->pack[OX_FATTN_Y] ? w + l->part[FA_PACK_Y] : j->y + (size_t)off[OX_FATTN_Y] * es;
    struct ox_mat ym = l->pack[OX_FATTN_Y] ? rows_of(S, a->Dv) : a->m[OX_FATTN_Y];
    if (S == 0 || a->Dv == 0) return;
    if (T == 0) { /* no keys: an empty softmax, nothing summed */
        zero_view(j->dbl, ym, y);
    } else {
        float *panels = (float *)(w + l->part[FA_PANELS]);
        struct ox_mat qm = l->pack[OX_FATTN_Q] ? rows_of(S, a->Dk) : a->m[OX_FATTN_Q];
        struct ox_mat km = l->pack[OX_FATTN_K] ? rows_of(a->Dk, T) : a->m[OX_FATTN_K];
        if (a->Dk == 0)
            memset(sc, 0, (size_t)(S * T) * es);
        else if (l->fast)
            packed_gemm(qm, (const float *)op[0], km, (const float *)op[1], (float *)sc, T, panels);
        else
            blas_desc(j->dbl, &l->g1, j->alpha, op[0], op[1], sc);
        const struct ox_mat *mm = &a->m[OX_FATTN_MASK];
        const char *mask = a->has_mask ? j->src[3] + (size_t)off[OX_FATTN_MASK] * es : NULL;
        const float alpha = l->fast ? (float)j->alpha : 1.0f; /* else in the BLAS call */
        for (int64_t i = 0; i < S; i++) {
            if (j->dbl) {
                double *x = (double *)sc + i * T, mx = -INFINITY, sum = 0;
                for (int64_t t = 0; t < T; t++) {
                    if (mask) x[t] += ((const double *)mask)[i * mm->rs + t * mm->cs];
                    mx = x[t] > mx ? x[t] : mx;
                }
                for (int64_t t = 0; t < T; t++) sum += x[t] = exp(x[t] - mx);
                for (int64_t t = 0; t < T; t++) x[t] /= sum;
                continue;
            }
            float *x = (float *)sc + i * T;
            if (alpha != 1.0f)
                for (int64_t t = 0; t < T; t++) x[t] *= alpha;
            if (j->narrow)
                for (int64_t t = 0; t < T; t++) x[t] = (float)rnd(a->dtype, x[t]);
            if (mask)
                for (int64_t t = 0; t < T; t++) {
                    x[t] += ((const float *)mask)[i * mm->rs + t * mm->cs];
                    if (j->narrow) x[t] = (float)rnd(a->dtype, x[t]);
                }
            ox_softmax_row(x, x, T);
            if (j->narrow)
                for (int64_t t = 0; t < T; t++) x[t] = (float)rnd(a->dtype, x[t]);
        }
        struct ox_mat vm = l->pack[OX_FATTN_V] ? rows_of(T, a->Dv) : a->m[OX_FATTN_V];
        if (l->fast)
            packed_gemm(rows_of(S, T), (const float *)sc, vm, (const float *)op[2], (float *)y,
                        ym.rows > 1 ? ym.rs : a->Dv, panels);
        else
            blas_desc(j->dbl, &l->g2, 1.0, sc, op[2], y);
    }
    if (l->pack[OX_FATTN_Y])
        copy_view(j->dbl, a->m[OX_FATTN_Y], y, j->y + (size_t)off[OX_FATTN_Y] * es, false);
}

static void fattn_piece(void *arg, int64_t b, int64_t e, int tid) {
    const struct fattn_job *j = arg;
    char *w = j->scratch + j->l->shared + (size_t)(tid < j->n_parts ? tid : 0) * j->l->per_thread;
    for (int64_t i = b; i < e; i++) fattn_item(j, i, w);
}

ox_status ox_attn_cpu_fused(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                            const ox_tensor *const *in, ox_tensor *const *out) {
    struct ox_fattn a;
    struct fattn_layout l;
    int threads = ctx->pool ? ox_pool_size(ctx->pool) : 1;
    ox_status s = ox_fattn_parse(n, in, &a);
    if (!s && a.generic) {
        size_t need;
        if (!generic_scratch(&a, &need) || need > ctx->scratch_bytes)
            return ox_node_err(n, OX_E_INTERNAL, "scratch of %zu bytes is too small",
                               ctx->scratch_bytes);
        generic_run(n, in, out[0], &a, ctx->scratch);
        return OX_OK;
    }
    if (s || (s = fattn_layout(n, in, &a, 1, &l))) return s;
    /* the threads whose scratch infer asked for; with fewer, the pool is not used */
    if (l.shared + l.per_thread > ctx->scratch_bytes)
        return ox_node_err(n, OX_E_INTERNAL, "scratch of %zu bytes is too small",
                           ctx->scratch_bytes);
    int64_t parts = (int64_t)((ctx->scratch_bytes - l.shared) / (l.per_thread ? l.per_thread : 1));
    struct fattn_job j = {.a = &a,
                          .l = &l,
                          .dbl = a.dtype == OX_DOUBLE,
                          .narrow = a.dtype == OX_FLOAT16 || a.dtype == OX_BFLOAT16,
                          .alpha = ox_fattn_alpha(n, in, &a),
                          .scratch = ctx->scratch,
                          .n_parts = parts};
    ox_tensor *Y = out[0];
    int64_t ny = ox_tensor_numel(Y);
    if (j.narrow) { /* float copies of the inputs, then of the output */
        float *f = ctx->scratch;
        for (int k = 0; k < 4; k++) {
            const ox_tensor *t = ox_in(n, in, k);
            if (!t) continue;
            int64_t cnt = ox_tensor_numel(t);
            for (int64_t i = 0; i < cnt; i++) f[i] = (float)ox_ld(t, i);
            j.src[k] = (const char *)f;
            f += cnt;
        }
        j.y = (char *)f;
    } else {
        for (int k = 0; k < 4; k++) j.src[k] = ox_in(n, in, k) ? ox_in(n, in, k)->data : NULL;
        j.y = Y->data;
    }
    if (threads > 1 && parts >= threads && a.batch > 1)
        ox_parallel_for(ctx->pool, a.batch, fattn_piece, &j);
    else
        fattn_piece(&j, 0, a.batch, 0);
    if (j.narrow)
        for (int64_t i = 0; i < ny; i++) ox_st(Y, i, ((const float *)j.y)[i]);
    return OX_OK;
}
