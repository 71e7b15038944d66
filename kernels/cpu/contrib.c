/* ONNX Runtime's contributed transformer operators (domain com.microsoft, version 1, and
 * SimplifiedLayerNormalization in the default domain, as ONNX Runtime registers it), which
 * models saved after ONNX Runtime's transformer optimizer, or exported by tools built on it,
 * hold:
 *
 *   Gelu(X)                          0.5 x (1 + erf(x / sqrt 2))
 *   BiasGelu(A, B)                   Gelu(A + B), B [H] over the last axis
 *   FastGelu(X, bias?)               the tanh form of Gelu of X (+ bias)
 *   QuickGelu(X; alpha = 1.702)      x sigmoid(alpha x)
 *   SkipLayerNormalization(input, skip, gamma, beta?, bias?; epsilon = 1e-12)
 *       s = input + skip (+ bias); output = (s - mean) / sqrt(var + epsilon) gamma (+ beta)
 *       over the last axis; outputs: output, mean?, inv_std_var? ([..., 1], float), s?
 *   SkipSimplifiedLayerNormalization(input, skip, gamma, bias?; epsilon = 1e-12)
 *       s = input + skip (+ bias); output = s / sqrt(mean(s^2) + epsilon) gamma; outputs:
 *       output, mean? (0), inv_std_var?, s?
 *   SimplifiedLayerNormalization(X, scale; axis = -1, epsilon = 1e-5)   (RMS norm)
 *       Y = X / sqrt(mean over axes axis.. of X^2 + epsilon) scale; outputs Y, inv_std_var?
 *   FusedMatMul(A, B; alpha = 1, transA, transB, transBatchA, transBatchB)   alpha op(A) op(B)
 *       as MatMul broadcasts; op moves axis 0 before the last axis (transBatch: both operands
 *       of one rank, 3 or more, as ONNX Runtime requires), then swaps the last two (trans); a
 *       vector is taken as it is
 *   EmbedLayerNormalization, Attention (BERT's, and GPT-2's with past and present; QAttention,
 *   its dynamically quantized form, projecting through com.microsoft QGemm),
 *   MultiHeadAttention (Q, K and V given: encoder-decoder and diffusion models),
 *   GroupQueryAttention (LLM decoders: grouped KV heads, per-item cache lengths, rotary),
 *   RotaryEmbedding (through the default domain's row), MatMulNBits (block-quantized
 *   weights): below. The three attentions share one core
 *   (attn_heads) over strided views of Q, K and V.
 *
 * The Gelu forms and FusedMatMul go through the default domain's Add, Gelu, Transpose and
 * MatMul rows; the normalizations are computed here in double, a row (the last axis, or the
 * axes from `axis`) per piece of the pool, and rounded once. Skip may be the input's shape
 * or its trailing elements repeated (ONNX Runtime reads skip[i mod |skip|]). */
#include "kernels/op.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- the Gelu forms --------------------------------------------------------------------- */

static const struct ox_node *gelu_node(const struct ox_node *n, bool tanh_form, struct ox_node *g,
                                       struct ox_attr *a) {
    memset(g, 0, sizeof *g);
    memset(a, 0, sizeof *a);
    g->name = n->name;
    g->domain = "";
    g->op_type = "Gelu";
    g->opset = 20;
    g->n_inputs = g->n_outputs = 1;
    g->inputs = g->outputs = n->inputs; /* only counted */
    a->name = "approximate";
    a->type = OX_ATTR_STRING;
    a->s = tanh_form ? "tanh" : "none";
    a->s_len = strlen(a->s);
    g->attrs = a;
    g->n_attrs = 1;
    return g;
}

/* Gelu (of the tanh form or not) of in[0] + in[1] when in[1] is there, else of in[0]: the
 * sum in out[0], then Gelu over it in place. */
static ox_status bias_gelu(struct ox_infer_ctx *ictx, struct ox_kernel_ctx *kctx,
                           const struct ox_node *n, const ox_tensor *const *in,
                           ox_tensor *const *out, bool tanh_form, bool bias_required) {
    const ox_tensor *x = ox_in(n, in, 0), *b = ox_in(n, in, 1);
    if (!x || (bias_required && !b))
        return ox_node_err(n, OX_E_INVALID, "input%s required",
                           bias_required ? "s A and B are" : " X is");
    if (b && (b->rank != 1 || x->rank < 1 || b->dims[0] != x->dims[x->rank - 1]))
        return ox_node_err(n, OX_E_SHAPE, "bias must be [%lld], the input's last axis",
                           (long long)(x->rank ? x->dims[x->rank - 1] : 0));
    struct ox_node g;
    struct ox_attr ga;
    gelu_node(n, tanh_form, &g, &ga);
    const struct ox_op *gelu = ox_op_find("", "Gelu", 20);
    ox_status st;
    if (b) {
        struct ox_node add = {.name = n->name,
                              .domain = "",
                              .op_type = "Add",
                              .opset = 14,
                              .n_inputs = 2,
                              .inputs = n->inputs,
                              .n_outputs = 1,
                              .outputs = n->outputs};
        const struct ox_op *a = ox_op_find("", "Add", 14);
        const ox_tensor *ain[2] = {x, b};
        st = ictx ? a->infer(ictx, &add, ain, out) : a->cpu(kctx, &add, ain, out);
        if (st) return st;
        x = out[0];
    }
    size_t scratch = ictx ? ictx->scratch_bytes : 0;
    st = ictx ? gelu->infer(ictx, &g, &x, out) : gelu->cpu(kctx, &g, &x, out);
    if (ictx && ictx->scratch_bytes < scratch) ictx->scratch_bytes = scratch;
    return st;
}

ox_status ox_ms_infer_bias_gelu(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                const ox_tensor *const *in, ox_tensor *const *out) {
    return bias_gelu(ctx, NULL, n, in, out, false, true);
}

ox_status ox_ms_cpu_bias_gelu(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                              const ox_tensor *const *in, ox_tensor *const *out) {
    return bias_gelu(NULL, ctx, n, in, out, false, true);
}

ox_status ox_ms_infer_fast_gelu(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                const ox_tensor *const *in, ox_tensor *const *out) {
    return bias_gelu(ctx, NULL, n, in, out, true, false);
}

ox_status ox_ms_cpu_fast_gelu(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                              const ox_tensor *const *in, ox_tensor *const *out) {
    return bias_gelu(NULL, ctx, n, in, out, true, false);
}

/* ---- QuickGelu ---------------------------------------------------------------------------- */

static bool is_float_type(ox_dtype dt) {
    return dt == OX_FLOAT || dt == OX_DOUBLE || dt == OX_FLOAT16 || dt == OX_BFLOAT16;
}

ox_status ox_ms_infer_quick_gelu(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                 const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    const ox_tensor *x = ox_in(n, in, 0);
    if (!x || !is_float_type(x->dtype))
        return ox_node_err(n, OX_E_UNSUPPORTED, "input X must be a float tensor");
    ox_set_like(out[0], x);
    return OX_OK;
}

struct qg_job {
    const ox_tensor *x;
    ox_tensor *y;
    double alpha;
};

static void qg_piece(void *arg, int64_t i0, int64_t i1, int tid) {
    (void)tid;
    const struct qg_job *j = arg;
    if (j->x->dtype == OX_FLOAT) {
        ox_quick_gelu_floats((const float *)j->x->data + i0, (float *)j->y->data + i0, i1 - i0,
                             (float)j->alpha);
        return;
    }
    for (int64_t i = i0; i < i1; i++) {
        double v = ox_ld(j->x, i);
        ox_set_f64(j->y, i, v / (1.0 + exp(-j->alpha * v)));
    }
}

ox_status ox_ms_cpu_quick_gelu(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                               const ox_tensor *const *in, ox_tensor *const *out) {
    struct qg_job j = {in[0], out[0], ox_attr_float(n, "alpha", 1.702f)};
    ox_parallel_for(ctx->pool, ox_tensor_numel(in[0]), qg_piece, &j);
    return OX_OK;
}

/* ---- the layer normalizations ----------------------------------------------------------- */

enum { NORM_SKIP, NORM_SKIP_RMS, NORM_RMS };

struct norm {
    int kind;
    const ox_tensor *x, *skip, *gamma, *beta, *bias;
    ox_tensor *y, *mean, *inv, *sum;
    int64_t rows, H, skip_n;
    double eps;
};

/* Reads and checks the inputs; sets the outputs' shapes (out may be NULL entries). */
static ox_status norm_read(const struct ox_node *n, int kind, const ox_tensor *const *in,
                           ox_tensor *const *out, struct norm *m) {
    memset(m, 0, sizeof *m);
    m->kind = kind;
    m->x = ox_in(n, in, 0);
    int axis_from;
    if (kind == NORM_RMS) {
        m->gamma = ox_in(n, in, 1);
        if (!m->x || !m->gamma)
            return ox_node_err(n, OX_E_INVALID, "inputs X and scale are required");
        int64_t axis = ox_attr_int(n, "axis", -1);
        if (axis < -m->x->rank || axis >= m->x->rank)
            return ox_node_err(n, OX_E_INVALID, "axis %lld for rank %d", (long long)axis,
                               m->x->rank);
        axis_from = (int)(axis < 0 ? axis + m->x->rank : axis);
        m->eps = ox_attr_float(n, "epsilon", 1e-5f);
    } else {
        m->skip = ox_in(n, in, 1);
        m->gamma = ox_in(n, in, 2);
        m->beta = kind == NORM_SKIP ? ox_in(n, in, 3) : NULL;
        m->bias = ox_in(n, in, kind == NORM_SKIP ? 4 : 3);
        if (!m->x || !m->skip || !m->gamma)
            return ox_node_err(n, OX_E_INVALID, "inputs input, skip and gamma are required");
        if (m->x->rank != 2 && m->x->rank != 3)
            return ox_node_err(n, OX_E_SHAPE, "input of rank %d: expected 2 or 3", m->x->rank);
        axis_from = m->x->rank - 1;
        m->eps = ox_attr_float(n, "epsilon", 1e-12f);
    }
    if (!is_float_type(m->x->dtype))
        return ox_node_err(n, OX_E_UNSUPPORTED, "input of type %s: expected a float type",
                           ox_dtype_name(m->x->dtype));
    if (!(m->eps >= 0)) return ox_node_err(n, OX_E_INVALID, "epsilon %g", m->eps);
    m->H = 1;
    m->rows = 1;
    for (int d = 0; d < m->x->rank; d++) *(d < axis_from ? &m->rows : &m->H) *= m->x->dims[d];
    const ox_tensor *per[3] = {m->gamma, m->beta, m->bias};
    static const char *const NAMES[3] = {"gamma", "beta", "bias"};
    for (int k = 0; k < 3; k++) {
        const ox_tensor *t = per[k];
        if (!t) continue;
        if (t->dtype != m->x->dtype || ox_tensor_numel(t) != m->H ||
            (kind != NORM_RMS && t->rank != 1))
            return ox_node_err(n, OX_E_SHAPE, "%s must hold %lld values of the input's type",
                               kind == NORM_RMS ? "scale" : NAMES[k], (long long)m->H);
    }
    if (m->skip) {
        m->skip_n = ox_tensor_numel(m->skip);
        int64_t total = m->rows * m->H;
        if (m->skip->dtype != m->x->dtype || m->skip->rank < 1 ||
            m->skip->dims[m->skip->rank - 1] != m->H || m->skip_n == 0 ||
            (total && total % m->skip_n))
            return ox_node_err(n, OX_E_SHAPE,
                               "skip must be the input's shape or its last axes (hidden size "
                               "%lld)",
                               (long long)m->H);
    }
    m->y = out[0];
    if (m->y) ox_set_like(m->y, m->x);
    int64_t sd[OX_MAX_RANK];
    for (int d = 0; d < m->x->rank; d++) sd[d] = d < axis_from ? m->x->dims[d] : 1;
    int n_out = n->n_outputs;
    if (kind == NORM_RMS) {
        m->inv = n_out > 1 ? out[1] : NULL;
    } else {
        m->mean = n_out > 1 ? out[1] : NULL;
        m->inv = n_out > 2 ? out[2] : NULL;
        m->sum = n_out > 3 ? out[3] : NULL;
    }
    if (m->mean) ox_set_shape(m->mean, OX_FLOAT, m->x->rank, sd);
    if (m->inv) ox_set_shape(m->inv, OX_FLOAT, m->x->rank, sd);
    if (m->sum) ox_set_like(m->sum, m->x);
    return OX_OK;
}

static void norm_rows(void *arg, int64_t r0, int64_t r1, int tid) {
    (void)tid;
    const struct norm *m = arg;
    int64_t H = m->H;
    for (int64_t r = r0; r < r1; r++) {
        int64_t off = r * H;
        double mean = 0, ss = 0;
        for (int64_t h = 0; h < H; h++) { /* the sum, rounded to the type, into y (and sum) */
            double v = ox_ld(m->x, off + h);
            if (m->skip) v += ox_ld(m->skip, (off + h) % m->skip_n);
            if (m->bias) v += ox_ld(m->bias, h);
            ox_set_f64(m->y, off + h, v);
            v = ox_ld(m->y, off + h);
            if (m->sum) ox_set_f64(m->sum, off + h, v);
            mean += v;
        }
        mean = m->kind == NORM_SKIP ? mean / (double)H : 0;
        for (int64_t h = 0; h < H; h++) {
            double d = ox_ld(m->y, off + h) - mean;
            ss += d * d;
        }
        double inv = 1.0 / sqrt(ss / (double)H + m->eps);
        for (int64_t h = 0; h < H; h++) {
            double v = (ox_ld(m->y, off + h) - mean) * inv * ox_ld(m->gamma, h);
            if (m->beta) v += ox_ld(m->beta, h);
            ox_set_f64(m->y, off + h, v);
        }
        if (m->mean) ((float *)m->mean->data)[r] = (float)mean;
        if (m->inv) ((float *)m->inv->data)[r] = (float)inv;
    }
}

static ox_status norm_infer(struct ox_infer_ctx *ctx, const struct ox_node *n, int kind,
                            const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    struct norm m;
    return norm_read(n, kind, in, out, &m);
}

static ox_status norm_cpu(struct ox_kernel_ctx *ctx, const struct ox_node *n, int kind,
                          const ox_tensor *const *in, ox_tensor *const *out) {
    struct norm m;
    ox_status st = norm_read(n, kind, in, out, &m);
    if (st) return st;
    if (m.y && m.H > 0) ox_parallel_for(ctx->pool, m.rows, norm_rows, &m);
    return OX_OK;
}

ox_status ox_ms_infer_skip_layernorm(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                     const ox_tensor *const *in, ox_tensor *const *out) {
    return norm_infer(ctx, n, NORM_SKIP, in, out);
}

ox_status ox_ms_cpu_skip_layernorm(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                                   const ox_tensor *const *in, ox_tensor *const *out) {
    return norm_cpu(ctx, n, NORM_SKIP, in, out);
}

ox_status ox_ms_infer_skip_rmsnorm(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                   const ox_tensor *const *in, ox_tensor *const *out) {
    return norm_infer(ctx, n, NORM_SKIP_RMS, in, out);
}

ox_status ox_ms_cpu_skip_rmsnorm(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                                 const ox_tensor *const *in, ox_tensor *const *out) {
    return norm_cpu(ctx, n, NORM_SKIP_RMS, in, out);
}

ox_status ox_ms_infer_rmsnorm(struct ox_infer_ctx *ctx, const struct ox_node *n,
                              const ox_tensor *const *in, ox_tensor *const *out) {
    return norm_infer(ctx, n, NORM_RMS, in, out);
}

ox_status ox_ms_cpu_rmsnorm(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                            const ox_tensor *const *in, ox_tensor *const *out) {
    return norm_cpu(ctx, n, NORM_RMS, in, out);
}

/* ---- FusedMatMul -------------------------------------------------------------------------- */

/* The permutation FusedMatMul applies to an operand of rank r (ONNX Runtime's
 * FusedMatMulShapeInference): transBatch moves axis 0 to just before the last axis
 * ([1, ..., r-2, 0, r-1]), then trans swaps the last two; a vector is taken as it is. Whether
 * that moves anything. */
static bool operand_perm(int r, bool trans, bool trans_batch, int64_t *perm) {
    for (int d = 0; d < r; d++) perm[d] = d;
    if (r < 2) return false;
    if (trans_batch) {
        for (int d = 0; d < r - 2; d++) perm[d] = d + 1;
        perm[r - 2] = 0;
    }
    if (trans) {
        int64_t t = perm[r - 1];
        perm[r - 1] = perm[r - 2];
        perm[r - 2] = t;
    }
    for (int d = 0; d < r; d++)
        if (perm[d] != d) return true;
    return false;
}

/* Scratch: A and B permuted where asked, then MatMul's own scratch. */
static ox_status fused_matmul(struct ox_infer_ctx *ictx, struct ox_kernel_ctx *kctx,
                              const struct ox_node *n, const ox_tensor *const *in,
                              ox_tensor *const *out) {
    const ox_tensor *ab[2] = {ox_in(n, in, 0), ox_in(n, in, 1)};
    if (!ab[0] || !ab[1]) return ox_node_err(n, OX_E_INVALID, "inputs A and B are required");
    bool trans[2] = {ox_attr_int(n, "transA", 0) != 0, ox_attr_int(n, "transB", 0) != 0};
    bool batch[2] = {ox_attr_int(n, "transBatchA", 0) != 0, ox_attr_int(n, "transBatchB", 0) != 0};
    if ((batch[0] || batch[1]) && !(ab[0]->rank > 2 && ab[0]->rank == ab[1]->rank))
        return ox_node_err(n, OX_E_SHAPE,
                           "transBatchA or transBatchB on operands of ranks %d and %d: they "
                           "must have one rank, 3 or more",
                           ab[0]->rank, ab[1]->rank);
    ox_tensor moved[2];
    const ox_tensor *mm_in[2] = {ab[0], ab[1]};
    size_t off = 0;
    int64_t perm[OX_MAX_RANK];
    for (int k = 0; k < 2; k++) {
        const ox_tensor *t = ab[k];
        if (!operand_perm(t->rank, trans[k], batch[k], perm)) continue;
        moved[k] = *t;
        moved[k].data = NULL;
        for (int d = 0; d < t->rank; d++) moved[k].dims[d] = t->dims[perm[d]];
        size_t bytes;
        if (!ox_tensor_bytes(t->dtype, t->rank, t->dims, &bytes))
            return ox_node_err(n, OX_E_NOMEM, "operand too large");
        if (kctx) {
            moved[k].data = ox_scratch_at(kctx->scratch, off);
            ox_status st = ox_transpose_run(kctx, n, t, &moved[k], perm);
            if (st) return st;
        }
        off += ox_align64(bytes);
        mm_in[k] = &moved[k];
    }
    struct ox_node mm = {.name = n->name,
                         .domain = "",
                         .op_type = "MatMul",
                         .opset = 13,
                         .n_inputs = 2,
                         .inputs = n->inputs,
                         .n_outputs = 1,
                         .outputs = n->outputs};
    const struct ox_op *row = ox_op_find("", "MatMul", 13);
    ox_status st;
    if (ictx) {
        struct ox_infer_ctx sub = *ictx;
        sub.scratch_bytes = 0, sub.const_inputs = 0, sub.prepared_bytes = 0;
        if ((st = row->infer(&sub, &mm, mm_in, out))) return st;
        ictx->scratch_bytes = off + sub.scratch_bytes;
        return OX_OK;
    }
    struct ox_kernel_ctx sub = *kctx;
    sub.scratch = ox_scratch_at(kctx->scratch, off);
    sub.scratch_bytes = kctx->scratch_bytes - off;
    sub.prepared = NULL;
    if ((st = row->cpu(&sub, &mm, mm_in, out))) return st;
    double alpha = ox_attr_float(n, "alpha", 1.0f);
    if (alpha != 1.0) {
        int64_t total = ox_tensor_numel(out[0]);
        for (int64_t i = 0; i < total; i++) ox_set_f64(out[0], i, alpha * ox_ld(out[0], i));
    }
    return OX_OK;
}

ox_status ox_ms_infer_fused_matmul(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                   const ox_tensor *const *in, ox_tensor *const *out) {
    return fused_matmul(ctx, NULL, n, in, out);
}

ox_status ox_ms_cpu_fused_matmul(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                                 const ox_tensor *const *in, ox_tensor *const *out) {
    return fused_matmul(NULL, ctx, n, in, out);
}

/* ---- EmbedLayerNormalization ------------------------------------------------------------ */

/* Inputs: input_ids [B, S] (int32), segment_ids? [B, S], word_embedding [V, D],
 * position_embedding [P, D], segment_embedding? [G, D], gamma [D], beta [D], mask? [B, S]
 * (int32), position_ids? ([B, S] or [1, S]; else the position s); epsilon = 1e-12.
 * Outputs: LayerNorm(word + position + segment) [B, S, D]; mask_index [B] (int32: the
 * count of 1s in each mask row, 0 without a mask); embedding_sum? (the sum before the norm).
 * An id outside its table is an error. */
struct eln {
    const ox_tensor *ids, *seg, *word, *pos, *segemb, *gamma, *beta, *mask, *pos_ids;
    ox_tensor *y, *mask_index, *sum;
    int64_t B, S, D;
    double eps;
    int bad; /* an id out of range, seen by a piece */
};

static ox_status eln_read(const struct ox_node *n, const ox_tensor *const *in,
                          ox_tensor *const *out, struct eln *e) {
    memset(e, 0, sizeof *e);
    e->ids = ox_in(n, in, 0), e->seg = ox_in(n, in, 1), e->word = ox_in(n, in, 2);
    e->pos = ox_in(n, in, 3), e->segemb = ox_in(n, in, 4), e->gamma = ox_in(n, in, 5);
    e->beta = ox_in(n, in, 6), e->mask = ox_in(n, in, 7), e->pos_ids = ox_in(n, in, 8);
    if (!e->ids || !e->word || !e->pos || !e->gamma || !e->beta)
        return ox_node_err(n, OX_E_INVALID,
                           "inputs input_ids, word_embedding, position_embedding, gamma and beta "
                           "are required");
    if (e->ids->rank != 2 || e->ids->dtype != OX_INT32)
        return ox_node_err(n, OX_E_SHAPE, "input_ids must be int32 [batch, sequence]");
    e->B = e->ids->dims[0], e->S = e->ids->dims[1];
    if (e->word->rank != 2 || e->word->dtype != OX_FLOAT)
        return ox_node_err(n, OX_E_UNSUPPORTED,
                           "word_embedding must be float [vocabulary, hidden]");
    e->D = e->word->dims[1];
    const ox_tensor *tables[2] = {e->pos, e->segemb};
    for (int k = 0; k < 2; k++)
        if (tables[k] &&
            (tables[k]->rank != 2 || tables[k]->dtype != OX_FLOAT || tables[k]->dims[1] != e->D))
            return ox_node_err(n, OX_E_SHAPE, "%s_embedding must be float [N, %lld]",
                               k ? "segment" : "position", (long long)e->D);
    if ((e->seg == NULL) != (e->segemb == NULL))
        return ox_node_err(n, OX_E_INVALID, "segment_ids and segment_embedding go together");
    const ox_tensor *rows[3] = {e->seg, e->mask, e->pos_ids};
    static const char *const RN[3] = {"segment_ids", "mask", "position_ids"};
    for (int k = 0; k < 3; k++) {
        const ox_tensor *t = rows[k];
        if (t && (t->dtype != OX_INT32 || t->rank != 2 || t->dims[1] != e->S ||
                  (t->dims[0] != e->B && !(k == 2 && t->dims[0] == 1))))
            return ox_node_err(n, OX_E_SHAPE, "%s must be int32 [%lld, %lld]", RN[k],
                               (long long)e->B, (long long)e->S);
    }
    if (e->gamma->dtype != OX_FLOAT || ox_tensor_numel(e->gamma) != e->D ||
        e->beta->dtype != OX_FLOAT || ox_tensor_numel(e->beta) != e->D)
        return ox_node_err(n, OX_E_SHAPE, "gamma and beta must be float [%lld]", (long long)e->D);
    e->eps = ox_attr_float(n, "epsilon", 1e-12f);
    int64_t dims[3] = {e->B, e->S, e->D};
    e->y = out[0];
    e->mask_index = n->n_outputs > 1 ? out[1] : NULL;
    e->sum = n->n_outputs > 2 ? out[2] : NULL;
    if (e->y) ox_set_shape(e->y, OX_FLOAT, 3, dims);
    if (e->mask_index) ox_set_shape(e->mask_index, OX_INT32, 1, dims);
    if (e->sum) ox_set_shape(e->sum, OX_FLOAT, 3, dims);
    return OX_OK;
}

static void eln_rows(void *arg, int64_t r0, int64_t r1, int tid) {
    (void)tid;
    struct eln *e = arg;
    int64_t D = e->D;
    for (int64_t r = r0; r < r1; r++) {
        int64_t s = r % e->S;
        int64_t w = ((const int32_t *)e->ids->data)[r];
        int64_t p =
            e->pos_ids ? ((const int32_t *)e->pos_ids->data)[e->pos_ids->dims[0] == 1 ? s : r] : s;
        int64_t g = e->seg ? ((const int32_t *)e->seg->data)[r] : 0;
        if (w < 0 || w >= e->word->dims[0] || p < 0 || p >= e->pos->dims[0] ||
            (e->seg && (g < 0 || g >= e->segemb->dims[0]))) {
            __atomic_store_n(&e->bad, 1, __ATOMIC_RELAXED);
            continue;
        }
        const float *we = (const float *)e->word->data + w * D;
        const float *pe = (const float *)e->pos->data + p * D;
        const float *ge = e->seg ? (const float *)e->segemb->data + g * D : NULL;
        float *y = (float *)e->y->data + r * D;
        double mean = 0, ss = 0;
        for (int64_t h = 0; h < D; h++) {
            float v = we[h] + pe[h] + (ge ? ge[h] : 0.0f);
            y[h] = v;
            if (e->sum) ((float *)e->sum->data)[r * D + h] = v;
            mean += v;
        }
        mean /= (double)D;
        for (int64_t h = 0; h < D; h++) ss += (y[h] - mean) * (y[h] - mean);
        double inv = 1.0 / sqrt(ss / (double)D + e->eps);
        for (int64_t h = 0; h < D; h++)
            y[h] = (float)((y[h] - mean) * inv * ((const float *)e->gamma->data)[h] +
                           ((const float *)e->beta->data)[h]);
    }
}

ox_status ox_ms_infer_embed_layernorm(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                      const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    struct eln e;
    return eln_read(n, in, out, &e);
}

ox_status ox_ms_cpu_embed_layernorm(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                                    const ox_tensor *const *in, ox_tensor *const *out) {
    struct eln e;
    ox_status st = eln_read(n, in, out, &e);
    if (st || !e.y) return st;
    ox_parallel_for(ctx->pool, e.B * e.S, eln_rows, &e);
    if (e.bad)
        return ox_node_err(n, OX_E_INVALID,
                           "an input, segment or position id is outside its table");
    for (int64_t b = 0; e.mask_index && b < e.B; b++) {
        int32_t count = 0;
        for (int64_t s = 0; e.mask && s < e.S; s++)
            count += ((const int32_t *)e.mask->data)[b * e.S + s] == 1;
        ((int32_t *)e.mask_index->data)[b] = count;
    }
    return OX_OK;
}

/* ---- Attention ---------------------------------------------------------------------------- */

/* ONNX Runtime's fused self-attention (BERT, GPT-2): input [B, S, Din], weights
 * [Din, Dq + Dk + Dv] (qkv_hidden_sizes, else three equal parts), bias? [Dq + Dk + Dv],
 * mask_index? (int32: [B] key lengths, [2B] ends then starts, [B, T] or [B, S, T] of 1 to
 * attend and 0 not), attention_bias? ([B or 1, H or 1, S, T], float); num_heads, scale (1 /
 * sqrt(Dq / H) when 0), unidirectional (a query attends to no later key), mask_filter_value
 * (-10000, added where the mask says no, as ONNX Runtime does rather than -inf).
 * past? [2, B, H, P, Dk / H] (keys and values of earlier steps: the T = P + S keys are the
 * past's then this step's, a query s at position P + s), present? [2, B, H, T, Dk / H].
 * Output [B, S, Dv]. Rotary embeddings and a shared past/present buffer are refused. Q, K and V
 * come from one GEMM into scratch; each (batch, head) scores its rows with one more, softmaxes, and
 * multiplies by V, in pieces over the pool (attn_heads, which MultiHeadAttention shares). */

/* Element (b, row, h, d) of Q, K or V at p[b bs + row rs + h hs + d]. */
struct attn_view {
    const float *p;
    int64_t bs, rs, hs;
};

struct attn {
    const ox_tensor *x, *w, *bias, *mask, *ab, *past;
    /* QAttention: x and w 8-bit, their scales and zero points (the projection a QGemm) */
    bool quant;
    const ox_tensor *xs, *ws, *xz, *wz;
    ox_tensor *y, *present;
    int64_t B, S, Din, H, dq, dk, dv, Dt;
    int64_t L, P, T; /* this step's keys, past keys, all keys (P + L) */
    float scale, filter;
    bool causal;
    /* GroupQueryAttention's (zero for the others): query head h reads key and value head
     * h / group; item b has seqlens[b] + 1 keys, its queries at the last S positions (from 0
     * in a first prompt), each seeing the keys up to its own, the last `window` of them when
     * window > 0; scores capped to softcap tanh(x / softcap) when softcap > 0; a softmax
     * whose denominator also holds exp(sink) (sinks[h], or 0) when smooth. */
    int64_t group, window;
    const int32_t *seqlens;
    bool first, smooth;
    float softcap;
    const float *sinks;
    struct attn_view q, k, v;
    const float *past_k, *past_v; /* [B, H, P, dk / H], [B, H, P, dv / H] */
    float *present_k, *present_v; /* [B, H, T, dk / H], [B, H, T, dv / H] */
    float *qkv;                   /* Attention: [B * S, Dt] */
    float *work; /* per thread: scores [S, T], then K and V of one head [T, head size] each */
};

static ox_status attn_read(const struct ox_node *n, const ox_tensor *const *in,
                           ox_tensor *const *out, struct attn *a) {
    memset(a, 0, sizeof *a);
    a->x = ox_in(n, in, 0), a->w = ox_in(n, in, 1), a->bias = ox_in(n, in, 2);
    a->quant = strcmp(n->op_type, "QAttention") == 0;
    if (a->quant) { /* input, weight, bias, input_scale, weight_scale, mask_index,
                       input_zero_point, weight_zero_point, past */
        a->xs = ox_in(n, in, 3), a->ws = ox_in(n, in, 4), a->mask = ox_in(n, in, 5);
        a->xz = ox_in(n, in, 6), a->wz = ox_in(n, in, 7), a->past = ox_in(n, in, 8);
    } else {
        a->mask = ox_in(n, in, 3), a->past = ox_in(n, in, 4), a->ab = ox_in(n, in, 5);
    }
    a->present = n->n_outputs > 1 ? out[1] : NULL;
    if ((!a->quant && ox_in(n, in, 6)) || ox_attr_int(n, "past_present_share_buffer", 0))
        return ox_node_err(n, OX_E_UNSUPPORTED,
                           "past_sequence_length and a shared past/present buffer are not "
                           "supported");
    if (ox_attr_int(n, "do_rotary", 0))
        return ox_node_err(n, OX_E_UNSUPPORTED, "do_rotary is not supported");
    if (!a->x || !a->w)
        return ox_node_err(n, OX_E_INVALID, "inputs input and weights are required");
    if (a->quant && (!a->xs || !a->ws))
        return ox_node_err(n, OX_E_INVALID, "inputs input_scale and weight_scale are required");
    bool q8 = (a->x->dtype == OX_UINT8 || a->x->dtype == OX_INT8) &&
              (a->w->dtype == OX_UINT8 || a->w->dtype == OX_INT8);
    if ((a->quant ? !q8 : a->x->dtype != OX_FLOAT || a->w->dtype != OX_FLOAT) || a->x->rank != 3 ||
        a->w->rank != 2 || a->w->dims[0] != a->x->dims[2])
        return ox_node_err(n, OX_E_SHAPE, "input must be %s [B, S, D] and weights [D, 3 x hidden]",
                           a->quant ? "8-bit" : "float");
    a->B = a->x->dims[0], a->S = a->x->dims[1], a->Din = a->x->dims[2], a->Dt = a->w->dims[1];
    a->H = ox_attr_int(n, "num_heads", 0);
    if (a->H <= 0) return ox_node_err(n, OX_E_INVALID, "num_heads must be positive");
    const int64_t *qkv;
    int nq = ox_attr_ints(n, "qkv_hidden_sizes", &qkv);
    if (nq > 0 && nq != 3) return ox_node_err(n, OX_E_INVALID, "qkv_hidden_sizes needs 3 values");
    a->dq = nq == 3 ? qkv[0] : a->Dt / 3, a->dk = nq == 3 ? qkv[1] : a->Dt / 3;
    a->dv = nq == 3 ? qkv[2] : a->Dt / 3;
    if (a->dq != a->dk || a->dq <= 0 || a->dv <= 0 || a->dq + a->dk + a->dv != a->Dt ||
        a->dq % a->H || a->dv % a->H)
        return ox_node_err(n, OX_E_SHAPE,
                           "hidden sizes %lld/%lld/%lld for weights of %lld columns and %lld heads",
                           (long long)a->dq, (long long)a->dk, (long long)a->dv, (long long)a->Dt,
                           (long long)a->H);
    if (a->bias && (a->bias->dtype != OX_FLOAT || ox_tensor_numel(a->bias) != a->Dt))
        return ox_node_err(n, OX_E_SHAPE, "bias must be float [%lld]", (long long)a->Dt);
    int64_t B = a->B, S = a->S, hk = a->dk / a->H;
    if ((a->past || a->present) && a->dv != a->dk)
        return ox_node_err(n, OX_E_SHAPE, "past and present need K and V of one size");
    if (a->past) {
        const ox_tensor *t = a->past;
        if (t->dtype != OX_FLOAT || t->rank != 5 || t->dims[0] != 2 || t->dims[1] != B ||
            t->dims[2] != a->H || t->dims[4] != hk)
            return ox_node_err(n, OX_E_SHAPE, "past must be float [2, %lld, %lld, P, %lld]",
                               (long long)B, (long long)a->H, (long long)hk);
        a->P = t->dims[3];
    }
    a->L = S;
    int64_t T = a->T = a->P + S;
    if (a->mask) {
        const ox_tensor *m = a->mask;
        bool ok = m->dtype == OX_INT32 &&
                  ((m->rank == 1 && (m->dims[0] == B || m->dims[0] == 2 * B)) ||
                   (m->rank == 2 && m->dims[0] == B && m->dims[1] == T) ||
                   (m->rank == 3 && m->dims[0] == B && m->dims[1] == S && m->dims[2] == T));
        if (!ok)
            return ox_node_err(n, OX_E_UNSUPPORTED,
                               "mask_index: int32 [B], [2B], [B, T] or [B, S, T] expected (T = "
                               "past + sequence; 4-D masks are not supported)");
    }
    if (a->ab) {
        const ox_tensor *t = a->ab;
        if (t->dtype != OX_FLOAT || t->rank != 4 || (t->dims[0] != 1 && t->dims[0] != B) ||
            (t->dims[1] != 1 && t->dims[1] != a->H) || t->dims[2] != S || t->dims[3] != T)
            return ox_node_err(n, OX_E_SHAPE,
                               "attention_bias must be float [B or 1, %lld or 1, S, T]",
                               (long long)a->H);
    }
    float sc = ox_attr_float(n, "scale", 0.0f);
    a->scale = sc != 0 ? sc : (float)(1.0 / sqrt((double)(a->dq / a->H)));
    a->filter = ox_attr_float(n, "mask_filter_value", -10000.0f);
    a->causal = ox_attr_int(n, "unidirectional", 0) != 0;
    int64_t dims[3] = {B, S, a->dv}, pdims[5] = {2, B, a->H, T, hk};
    a->y = out[0];
    if (a->y) ox_set_shape(a->y, OX_FLOAT, 3, dims);
    if (a->present) ox_set_shape(a->present, OX_FLOAT, 5, pdims);
    return OX_OK;
}

/* What the mask adds to score (b, s, t): query s is at position P + s among the T keys. */
static float attn_mask(const struct attn *a, int64_t b, int64_t s, int64_t t) {
    float add = 0;
    if (a->causal && t > a->P + s) add += a->filter;
    const ox_tensor *m = a->mask;
    if (!m) return add;
    const int32_t *md = m->data;
    int64_t S = a->S, T = a->T;
    bool keep;
    if (m->rank == 1)
        keep = t < md[b] && (m->dims[0] == a->B || t >= md[a->B + b]);
    else if (m->rank == 2)
        keep = md[b * T + t] != 0;
    else
        keep = md[(b * S + s) * T + t] != 0;
    return keep ? add : add + a->filter;
}

/* Floats of work per thread: the scores [S, T], and K and V of one head [T, head size] each
 * when there is a past (else they are read from their views in place). */
static int64_t attn_work_floats(const struct attn *a) {
    return a->S * a->T + (a->past ? a->T * ((a->dk + a->dv) / a->H) : 0);
}

/* Rows [0, n) of head h of view w (batch b), contiguous into dst [n, hd]. */
static void attn_rows(float *dst, const struct attn_view *w, int64_t b, int64_t h, int64_t n,
                      int64_t hd) {
    for (int64_t r = 0; r < n; r++)
        memcpy(dst + r * hd, w->p + b * w->bs + r * w->rs + h * w->hs, (size_t)hd * sizeof(float));
}

/* Row s of item b, head h: scores [0, Tb) of which keys [lo, hi) are visible, into
 * probabilities (zero outside [lo, hi)). */
static void attn_softmax_row(const struct attn *a, float *row, int64_t b, int64_t h, int64_t s,
                             int64_t lo, int64_t hi, int64_t Tb) {
    float mx = -INFINITY;
    for (int64_t t = lo; t < hi; t++) {
        if (a->softcap > 0) row[t] = a->softcap * tanhf(row[t] / a->softcap);
        float add = attn_mask(a, b, s, t);
        if (a->ab) {
            const ox_tensor *ab = a->ab;
            int64_t bb = ab->dims[0] == 1 ? 0 : b, hh = ab->dims[1] == 1 ? 0 : h;
            add +=
                ((const float *)ab->data)[((bb * ab->dims[1] + hh) * a->S + s) * ab->dims[3] + t];
        }
        row[t] += add;
        if (row[t] > mx) mx = row[t];
    }
    double sum = 0;
    if (a->smooth) { /* the sink joins the maximum and the denominator */
        float sink = a->sinks ? a->sinks[h] : 0.0f;
        if (sink > mx) mx = sink;
        sum = expf(sink - mx);
    }
    for (int64_t t = lo; t < hi; t++) sum += row[t] = expf(row[t] - mx);
    for (int64_t t = lo; t < hi; t++) row[t] = (float)(row[t] / sum);
    for (int64_t t = 0; t < lo; t++) row[t] = 0;
    for (int64_t t = hi; t < Tb; t++) row[t] = 0;
}

static void attn_heads(void *arg, int64_t i0, int64_t i1, int tid) {
    const struct attn *a = arg;
    int64_t S = a->S, T = a->T, P = a->P, L = a->L, H = a->H, hq = a->dq / H, hv = a->dv / H;
    int64_t group = a->group > 0 ? a->group : 1;
    float *p = a->work + (size_t)tid * (size_t)attn_work_floats(a);
    for (int64_t i = i0; i < i1; i++) {
        int64_t b = i / H, h = i % H, kh = h / group;
        int64_t Tb = T, Pb = P; /* this item's keys, and the position of its first query */
        if (a->seqlens) Tb = a->seqlens[b] + 1, Pb = a->first ? 0 : Tb - S;
        const float *q = a->q.p + b * a->q.bs + h * a->q.hs;
        const float *k = a->k.p + b * a->k.bs + kh * a->k.hs;
        const float *v = a->v.p + b * a->v.bs + kh * a->v.hs;
        int64_t ldk = a->k.rs, ldv = a->v.rs;
        if (a->past_k) { /* past keys and values, then this step's, contiguous */
            float *kb = p + S * T, *vb = kb + T * hq;
            memcpy(kb, a->past_k + (b * H + h) * P * hq, (size_t)(P * hq) * sizeof(float));
            memcpy(vb, a->past_v + (b * H + h) * P * hv, (size_t)(P * hv) * sizeof(float));
            attn_rows(kb + P * hq, &a->k, b, h, L, hq);
            attn_rows(vb + P * hv, &a->v, b, h, L, hv);
            k = kb, v = vb, ldk = hq, ldv = hv;
        }
        if (a->present_k) /* [B, H, T, head size] each */
            for (int64_t t = 0; t < T; t++) {
                memcpy(a->present_k + ((b * H + h) * T + t) * hq, k + t * ldk,
                       (size_t)hq * sizeof(float));
                memcpy(a->present_v + ((b * H + h) * T + t) * hv, v + t * ldv,
                       (size_t)hv * sizeof(float));
            }
        ox_sgemm(NULL, false, true, S, Tb, hq, a->scale, q, a->q.rs, k, ldk, 0.0f, p, T);
        for (int64_t s = 0; s < S; s++) {
            int64_t lo = 0, hi = Tb;
            if (a->seqlens) { /* causal from the item's own position, within its window */
                hi = Pb + s + 1 < Tb ? Pb + s + 1 : Tb;
                if (a->window > 0 && hi > a->window) lo = hi - a->window;
            }
            attn_softmax_row(a, p + s * T, b, h, s, lo, hi, Tb);
        }
        float *y = (float *)a->y->data + b * S * a->dv + h * hv;
        ox_sgemm(NULL, false, false, S, hv, Tb, 1.0f, p, T, v, ldv, 0.0f, y, a->dv);
    }
}

static size_t attn_qkv_bytes(const struct attn *a) {
    return ox_align64((size_t)(a->B * a->S * a->Dt) * sizeof(float));
}

/* Q, K and V, [B, S, Dt], are input x weights through the MatMul row (its packed weights
 * when they are constant), in scratch after the scores. */
static ox_status attn_project(struct ox_infer_ctx *ictx, struct ox_kernel_ctx *kctx,
                              const struct ox_node *n, struct attn *a, size_t off) {
    /* QAttention: com.microsoft QGemm of the rows [B S, D] by the weights, its float output
     * (ONNX Runtime's: int32 sums times input_scale weight_scale[j]) */
    int ids[6] = {0, 1, 2, 3, 4, 5};
    struct ox_node mm = {.name = n->name,
                         .domain = a->quant ? "com.microsoft" : "",
                         .op_type = a->quant ? "QGemm" : "MatMul",
                         .opset = a->quant ? 1 : 13,
                         .n_inputs = a->quant ? 6 : 2,
                         .inputs = a->quant ? ids : n->inputs,
                         .n_outputs = 1,
                         .outputs = n->outputs};
    const struct ox_op *row = ox_op_find(mm.domain, mm.op_type, mm.opset);
    ox_tensor x2 = *a->x;
    x2.rank = 2, x2.dims[0] = a->B * a->S, x2.dims[1] = a->Din;
    const ox_tensor *ins[6] = {a->x, a->w};
    if (a->quant)
        ins[0] = &x2, ins[1] = a->xs, ins[2] = a->xz, ins[3] = a->w, ins[4] = a->ws, ins[5] = a->wz;
    ox_tensor qkv = {.dtype = OX_FLOAT, .rank = 3, .dims = {a->B, a->S, a->Dt}, .data = a->qkv};
    if (a->quant) qkv.rank = 2, qkv.dims[0] = a->B * a->S, qkv.dims[1] = a->Dt;
    ox_tensor *outs[1] = {&qkv};
    if (ictx) {
        struct ox_infer_ctx sub = *ictx;
        sub.scratch_bytes = 0, sub.prepared_bytes = 0, sub.const_inputs = ictx->const_inputs & 2;
        if (a->quant) /* the weights (1), their scale (4) and zero point (7) as QGemm's 3, 4, 5 */
            sub.const_inputs = (ictx->const_inputs >> 1 & 1) << 3 |
                               (ictx->const_inputs >> 4 & 1) << 4 |
                               (ictx->const_inputs >> 7 & 1) << 5;
        ox_status st = row->infer(&sub, &mm, ins, outs);
        if (st) return st;
        ictx->prepared_bytes = sub.prepared_bytes;
        if (!ox_add_size(off, sub.scratch_bytes, &ictx->scratch_bytes))
            return ox_node_err(n, OX_E_NOMEM, "attention too large");
        return OX_OK;
    }
    struct ox_kernel_ctx sub = *kctx;
    sub.scratch = ox_scratch_at(kctx->scratch, off);
    sub.scratch_bytes = kctx->scratch_bytes - off;
    return row->cpu(&sub, &mm, ins, outs);
}

/* Scratch: Q, K and V; each thread's work; the projection's own. */
static bool attn_scratch_off(const struct attn *a, int threads, size_t *off) {
    size_t per;
    return ox_mul_size((size_t)attn_work_floats(a), sizeof(float) * (size_t)threads, &per) &&
           ox_add_size(attn_qkv_bytes(a), ox_align64(per), off);
}

ox_status ox_ms_infer_attention(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                const ox_tensor *const *in, ox_tensor *const *out) {
    struct attn a;
    ox_status st = attn_read(n, in, out, &a);
    if (st) return st;
    size_t off;
    if (!attn_scratch_off(&a, ctx->n_threads > 0 ? ctx->n_threads : 1, &off))
        return ox_node_err(n, OX_E_NOMEM, "attention too large");
    return attn_project(ctx, NULL, n, &a, off);
}

ox_status ox_ms_cpu_attention(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                              const ox_tensor *const *in, ox_tensor *const *out) {
    struct attn a;
    ox_status st = attn_read(n, in, out, &a);
    if (st || !a.y) return st;
    size_t off;
    if (!attn_scratch_off(&a, ctx->pool ? ox_pool_size(ctx->pool) : 1, &off) ||
        ctx->scratch_bytes < off)
        return ox_node_err(n, OX_E_INTERNAL, "scratch smaller than inferred");
    int64_t rows = a.B * a.S;
    if (rows == 0) return OX_OK;
    a.qkv = ctx->scratch;
    a.work = (float *)ox_scratch_at(ctx->scratch, attn_qkv_bytes(&a));
    if ((st = attn_project(NULL, ctx, n, &a, off))) return st;
    for (int64_t r = 0; a.bias && r < rows; r++)
        for (int64_t c = 0; c < a.Dt; c++) a.qkv[r * a.Dt + c] += ((const float *)a.bias->data)[c];
    int64_t S = a.S, Dt = a.Dt, hq = a.dq / a.H, hv = a.dv / a.H;
    a.q = (struct attn_view){a.qkv, S * Dt, Dt, hq};
    a.k = (struct attn_view){a.qkv + a.dq, S * Dt, Dt, hq};
    a.v = (struct attn_view){a.qkv + a.dq + a.dk, S * Dt, Dt, hv};
    if (a.past) {
        a.past_k = a.past->data;
        a.past_v = a.past_k + a.B * a.H * a.P * hq;
    }
    if (a.present) {
        a.present_k = a.present->data;
        a.present_v = a.present_k + a.B * a.H * a.T * hq;
    }
    ox_parallel_for(ctx->pool, a.B * a.H, attn_heads, &a);
    return OX_OK;
}

/* ---- MultiHeadAttention ------------------------------------------------------------------- */

/* query [B, S, D]; key and value either [B, L, D] and [B, L, Dv] (bias? [D + D + Dv] added to
 * the three) or already split into heads, [B, H, L, D / H] and [B, H, L, Dv / H] (no bias);
 * key_padding_mask? int32 [B] key lengths, [B, T] or [B, S, T] (1 to attend, 0 not);
 * attention_bias? [B or 1, H or 1, S, T]; past_key? / past_value? [B, H, P, head] before this
 * step's keys (3-D key and value only); num_heads, scale, mask_filter_value, unidirectional
 * as Attention's. Outputs: [B, S, Dv], present_key? / present_value? [B, H, T, head]. Packed
 * QKV (no key), past_sequence_length, cache_indirection and the qk output are refused. */
static ox_status mha_read(const struct ox_node *n, const ox_tensor *const *in,
                          ox_tensor *const *out, struct attn *a) {
    memset(a, 0, sizeof *a);
    const ox_tensor *q = ox_in(n, in, 0), *k = ox_in(n, in, 1), *v = ox_in(n, in, 2);
    const ox_tensor *pk = ox_in(n, in, 6), *pv = ox_in(n, in, 7);
    a->bias = ox_in(n, in, 3), a->mask = ox_in(n, in, 4), a->ab = ox_in(n, in, 5);
    if (ox_in(n, in, 8) || ox_in(n, in, 9) || (n->n_outputs > 3 && out[3]))
        return ox_node_err(n, OX_E_UNSUPPORTED,
                           "past_sequence_length, cache_indirection and the qk output are not "
                           "supported");
    if (!q || !k || !v)
        return ox_node_err(n, OX_E_UNSUPPORTED,
                           "query, key and value are required (packed QKV is not supported)");
    a->H = ox_attr_int(n, "num_heads", 0);
    if (a->H <= 0) return ox_node_err(n, OX_E_INVALID, "num_heads must be positive");
    int64_t H = a->H;
    if (q->dtype != OX_FLOAT || q->rank != 3 || k->dtype != OX_FLOAT || v->dtype != OX_FLOAT ||
        k->rank != v->rank || (k->rank != 3 && k->rank != 4))
        return ox_node_err(n, OX_E_SHAPE,
                           "query must be float [B, S, D], key and value [B, L, D] or [B, H, L, "
                           "head]");
    a->B = q->dims[0], a->S = q->dims[1], a->dq = a->dk = q->dims[2];
    int64_t B = a->B, hq = a->dq / H;
    bool split = k->rank == 4;
    if (a->dq % H)
        return ox_node_err(n, OX_E_SHAPE, "hidden size %lld for %lld heads", (long long)a->dq,
                           (long long)H);
    if (split) {
        a->L = k->dims[2], a->dv = v->dims[3] * H;
        if (k->dims[0] != B || k->dims[1] != H || k->dims[3] != hq || v->dims[0] != B ||
            v->dims[1] != H || v->dims[2] != a->L)
            return ox_node_err(n, OX_E_SHAPE, "key and value must be [%lld, %lld, L, head]",
                               (long long)B, (long long)H);
        if (a->bias || pk || pv)
            return ox_node_err(n, OX_E_UNSUPPORTED,
                               "a bias or past state with key and value split into heads");
    } else {
        a->L = k->dims[1], a->dv = v->dims[2];
        if (k->dims[0] != B || k->dims[2] != a->dq || v->dims[0] != B || v->dims[1] != a->L ||
            a->dv % H)
            return ox_node_err(n, OX_E_SHAPE, "key must be [%lld, L, %lld], value [%lld, L, Dv]",
                               (long long)B, (long long)a->dq, (long long)B);
    }
    int64_t hv = a->dv / H;
    if (a->bias && (a->bias->dtype != OX_FLOAT || ox_tensor_numel(a->bias) != 2 * a->dq + a->dv))
        return ox_node_err(n, OX_E_SHAPE, "bias must be float [%lld]",
                           (long long)(2 * a->dq + a->dv));
    if ((pk == NULL) != (pv == NULL))
        return ox_node_err(n, OX_E_INVALID, "past_key and past_value go together");
    if (pk) {
        if (pk->dtype != OX_FLOAT || pk->rank != 4 || pk->dims[0] != B || pk->dims[1] != H ||
            pk->dims[3] != hq || pv->dtype != OX_FLOAT || pv->rank != 4 || pv->dims[0] != B ||
            pv->dims[1] != H || pv->dims[2] != pk->dims[2] || pv->dims[3] != hv)
            return ox_node_err(n, OX_E_SHAPE,
                               "past_key and past_value must be [%lld, %lld, P, head]",
                               (long long)B, (long long)H);
        a->P = pk->dims[2];
        a->past = pk;
        a->past_k = pk->data, a->past_v = pv->data;
    }
    int64_t S = a->S, T = a->T = a->P + a->L;
    if (a->mask) {
        const ox_tensor *m = a->mask;
        if (m->dtype != OX_INT32 ||
            !((m->rank == 1 && m->dims[0] == B) ||
              (m->rank == 2 && m->dims[0] == B && m->dims[1] == T) ||
              (m->rank == 3 && m->dims[0] == B && m->dims[1] == S && m->dims[2] == T)))
            return ox_node_err(n, OX_E_UNSUPPORTED,
                               "key_padding_mask: int32 [B], [B, T] or [B, S, T] expected");
    }
    if (a->ab) {
        const ox_tensor *t = a->ab;
        if (t->dtype != OX_FLOAT || t->rank != 4 || (t->dims[0] != 1 && t->dims[0] != B) ||
            (t->dims[1] != 1 && t->dims[1] != H) || t->dims[2] != S || t->dims[3] != T)
            return ox_node_err(n, OX_E_SHAPE,
                               "attention_bias must be float [B or 1, %lld or 1, S, T]",
                               (long long)H);
    }
    float sc = ox_attr_float(n, "scale", 0.0f);
    a->scale = sc != 0 ? sc : (float)(1.0 / sqrt((double)hq));
    a->filter = ox_attr_float(n, "mask_filter_value", -10000.0f);
    a->causal = ox_attr_int(n, "unidirectional", 0) != 0;
    a->x = q;
    a->q = (struct attn_view){q->data, S * a->dq, a->dq, hq};
    if (split) {
        a->k = (struct attn_view){k->data, H * a->L * hq, hq, a->L * hq};
        a->v = (struct attn_view){v->data, H * a->L * hv, hv, a->L * hv};
    } else {
        a->k = (struct attn_view){k->data, a->L * a->dq, a->dq, hq};
        a->v = (struct attn_view){v->data, a->L * a->dv, a->dv, hv};
    }
    int64_t dims[3] = {B, S, a->dv}, kd[4] = {B, H, T, hq}, vd[4] = {B, H, T, hv};
    a->y = out[0];
    if (a->y) ox_set_shape(a->y, OX_FLOAT, 3, dims);
    ox_tensor *prk = n->n_outputs > 1 ? out[1] : NULL, *prv = n->n_outputs > 2 ? out[2] : NULL;
    if (prk) ox_set_shape(prk, OX_FLOAT, 4, kd);
    if (prv) ox_set_shape(prv, OX_FLOAT, 4, vd);
    if ((prk == NULL) != (prv == NULL))
        return ox_node_err(n, OX_E_INVALID, "present_key and present_value go together");
    a->present = prk;
    if (prk) a->present_k = prk->data, a->present_v = prv->data;
    return OX_OK;
}

/* Scratch: Q, K and V with the bias added (when there is one); each thread's work. */
static bool mha_scratch(const struct attn *a, int threads, size_t *bias_bytes, size_t *total) {
    size_t per, qkv = 0;
    if (a->bias)
        qkv = ox_align64((size_t)(a->B * (a->S * a->dq + a->L * (a->dq + a->dv))) * sizeof(float));
    *bias_bytes = qkv;
    return ox_mul_size((size_t)attn_work_floats(a), sizeof(float) * (size_t)threads, &per) &&
           ox_add_size(qkv, per, total);
}

ox_status ox_ms_infer_mha(struct ox_infer_ctx *ctx, const struct ox_node *n,
                          const ox_tensor *const *in, ox_tensor *const *out) {
    struct attn a;
    ox_status st = mha_read(n, in, out, &a);
    size_t qkv;
    if (!st && !mha_scratch(&a, ctx->n_threads > 0 ? ctx->n_threads : 1, &qkv, &ctx->scratch_bytes))
        st = ox_node_err(n, OX_E_NOMEM, "attention too large");
    return st;
}

/* x [rows, d] + bias [d] into dst. */
static float *mha_add_bias(float *dst, const float *x, const float *bias, int64_t rows, int64_t d) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < d; c++) dst[r * d + c] = x[r * d + c] + bias[c];
    return dst + rows * d;
}

ox_status ox_ms_cpu_mha(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                        const ox_tensor *const *in, ox_tensor *const *out) {
    struct attn a;
    ox_status st = mha_read(n, in, out, &a);
    if (st || !a.y) return st;
    size_t qkv, total;
    if (!mha_scratch(&a, ctx->pool ? ox_pool_size(ctx->pool) : 1, &qkv, &total) ||
        ctx->scratch_bytes < total)
        return ox_node_err(n, OX_E_INTERNAL, "scratch smaller than inferred");
    if (a.B * a.S == 0) return OX_OK;
    if (a.bias) { /* Q, K and V with their bias, in the same layouts */
        const float *bias = a.bias->data;
        float *q = ctx->scratch, *k = mha_add_bias(q, a.q.p, bias, a.B * a.S, a.dq);
        float *v = mha_add_bias(k, a.k.p, bias + a.dq, a.B * a.L, a.dq);
        mha_add_bias(v, a.v.p, bias + 2 * a.dq, a.B * a.L, a.dv);
        a.q.p = q, a.k.p = k, a.v.p = v;
    }
    a.work = (float *)ox_scratch_at(ctx->scratch, qkv);
    ox_parallel_for(ctx->pool, a.B * a.H, attn_heads, &a);
    return OX_OK;
}

/* The default domain's RotaryEmbedding (opset 23) node that rotates for node n (GroupQuery-
 * Attention's Q and K, com.microsoft RotaryEmbedding): a 3-D input of `heads` heads, the first
 * R features of each. */
static void rope_row_node(const struct ox_node *n, bool interleaved, int64_t heads, int64_t R,
                          struct ox_node *rn, struct ox_attr *ra) {
    ra[0] = (struct ox_attr){.name = "interleaved", .type = OX_ATTR_INT, .i = interleaved};
    ra[1] = (struct ox_attr){.name = "num_heads", .type = OX_ATTR_INT, .i = heads};
    ra[2] = (struct ox_attr){.name = "rotary_embedding_dim", .type = OX_ATTR_INT, .i = R};
    *rn = (struct ox_node){.name = n->name,
                           .domain = "",
                           .op_type = "RotaryEmbedding",
                           .opset = 23,
                           .n_inputs = 4,
                           .inputs = n->inputs, /* only counted */
                           .n_outputs = 1,
                           .outputs = n->outputs,
                           .attrs = ra,
                           .n_attrs = 3};
}

/* ---- GroupQueryAttention ----------------------------------------------------------------- */

/* The LLM decoders' attention (onnxruntime-genai's model builder: Llama, Phi-3, Mistral, Qwen):
 * query [B, S, N hd], key and value [B, S, Nkv hd], or query packing all three [B, S,
 * (N + 2 Nkv) hd] with no key and value; past_key? / past_value? [B, Nkv, P, hd]; seqlens_k
 * int32 [B] (item b's keys, minus one); total_sequence_length int32 (the longest item's keys);
 * cos_cache? / sin_cache? [max position, R / 2] for do_rotary (rotary_interleaved), applied to
 * Q and K at position_ids? int64 [B, S] (a first prompt reads only its first element as the
 * offset of position 0) or else at each query's position; attention_bias? [B or 1, N or 1, S,
 * total]; head_sink? [N]. Attributes num_heads, kv_num_heads, scale (1 / sqrt(hd)), softcap,
 * local_window_size (a query sees that many keys, itself included; -1: all), smooth_softmax.
 * Outputs [B, S, N hd], present_key? / present_value? [B, Nkv, max(P, total), hd].
 *
 * As ONNX Runtime decides it: a first prompt has S = total (every item's past is empty, its
 * keys those of its own S tokens: right padding); otherwise item b's past is seqlens_k[b] +
 * 1 - S keys (S is 1, or the batch is 1), read from the front of past_key, whether that holds
 * just those keys or is the max-length buffer shared with present_key. Present rows are the
 * past's, then this step's S, then zeros. A padded query (of a first prompt, past its item's
 * length) sees all its item's keys. Quantized caches (k_scale, v_scale), q/k norm weights,
 * the output_qk output, causal = 0 and sliding_window_cache are refused. The present keys and
 * values (scratch when those outputs are not asked for) are filled first, rotated where asked,
 * and the shared core reads them in place. */
struct gqa {
    const ox_tensor *q, *k, *v, *pk, *pv, *seqlens, *cos, *sin, *pos;
    ox_tensor *prk, *prv;
    int64_t B, S, N, Nkv, hd, P, Tp, total, R;
    bool packed, rotary, interleaved, first;
    float scale, softcap;
    int64_t window;
    bool smooth;
    const ox_tensor *ab, *sinks;
};

static ox_status gqa_float(const struct ox_node *n, const ox_tensor *t, const char *what, int rank,
                           const int64_t *dims) {
    bool ok = t->dtype == OX_FLOAT && t->rank == rank;
    for (int d = 0; ok && d < rank; d++) ok = dims[d] < 0 || t->dims[d] == dims[d];
    if (ok) return OX_OK;
    char want[160];
    int len = snprintf(want, sizeof want, "float [");
    for (int d = 0; d < rank && len < (int)sizeof want - 24; d++)
        len += dims[d] < 0 ? snprintf(want + len, sizeof want - len, "%s_", d ? ", " : "")
                           : snprintf(want + len, sizeof want - len, "%s%lld", d ? ", " : "",
                                      (long long)dims[d]);
    snprintf(want + len, sizeof want - len, "]");
    char buf[256];
    return ox_node_err(n, OX_E_SHAPE, "%s is %s: expected %s", what,
                       ox_tensor_desc(t, buf, sizeof buf), want);
}

static ox_status gqa_read(const struct ox_node *n, const ox_tensor *const *in,
                          ox_tensor *const *out, struct gqa *g) {
    memset(g, 0, sizeof *g);
    static const char *const REFUSED_IN[4] = {"k_scale (a quantized cache)", "v_scale",
                                              "q_norm_weight", "k_norm_weight"};
    for (int i = 12; i < 16; i++)
        if (ox_in(n, in, i))
            return ox_node_err(n, OX_E_UNSUPPORTED, "input %s is not supported",
                               REFUSED_IN[i - 12]);
    if ((n->n_outputs > 3 && out[3]) || ox_attr_int(n, "qk_output", 0))
        return ox_node_err(n, OX_E_UNSUPPORTED,
                           "qk_output and the output_qk output are not "
                           "supported");
    if (ox_attr_int(n, "causal", 1) != 1)
        return ox_node_err(n, OX_E_UNSUPPORTED, "causal = %lld is not supported (only 1)",
                           (long long)ox_attr_int(n, "causal", 1));
    if (ox_attr_int(n, "sliding_window_cache", 0))
        return ox_node_err(n, OX_E_UNSUPPORTED, "sliding_window_cache is not supported");
    const char *kq = ox_attr_str(n, "k_quant_type", "NONE"),
               *vq = ox_attr_str(n, "v_quant_type", "NONE");
    if (strcmp(kq, "NONE") || strcmp(vq, "NONE"))
        return ox_node_err(n, OX_E_UNSUPPORTED,
                           "k_quant_type %s / v_quant_type %s: only NONE is "
                           "supported",
                           kq, vq);
    g->q = ox_in(n, in, 0), g->k = ox_in(n, in, 1), g->v = ox_in(n, in, 2);
    g->pk = ox_in(n, in, 3), g->pv = ox_in(n, in, 4), g->seqlens = ox_in(n, in, 5);
    const ox_tensor *tot = ox_in(n, in, 6);
    g->cos = ox_in(n, in, 7), g->sin = ox_in(n, in, 8), g->pos = ox_in(n, in, 9);
    g->ab = ox_in(n, in, 10), g->sinks = ox_in(n, in, 11);
    if (!g->q || !g->seqlens || !tot)
        return ox_node_err(n, OX_E_INVALID,
                           "inputs query, seqlens_k and total_sequence_length are required");
    g->N = ox_attr_int(n, "num_heads", 0), g->Nkv = ox_attr_int(n, "kv_num_heads", 0);
    if (g->N <= 0 || g->Nkv <= 0 || g->N > INT32_MAX || g->N % g->Nkv)
        return ox_node_err(n, OX_E_INVALID,
                           "num_heads %lld and kv_num_heads %lld: positive, and num_heads a "
                           "multiple of kv_num_heads expected",
                           (long long)g->N, (long long)g->Nkv);
    if (g->q->dtype != OX_FLOAT || g->q->rank != 3)
        return gqa_float(n, g->q, "query", 3, (const int64_t[3]){-1, -1, -1});
    g->B = g->q->dims[0], g->S = g->q->dims[1];
    int64_t D = g->q->dims[2], B = g->B, S = g->S, N = g->N, Nkv = g->Nkv;
    g->packed = g->k == NULL;
    if (g->packed != (g->v == NULL))
        return ox_node_err(n, OX_E_INVALID, "key and value go together (neither: packed QKV)");
    int64_t heads = g->packed ? N + 2 * Nkv : N;
    if (D % heads || D == 0)
        return ox_node_err(n, OX_E_SHAPE, "query's hidden size %lld is no multiple of %lld heads",
                           (long long)D, (long long)heads);
    int64_t hd = g->hd = D / heads;
    ox_status st;
    const int64_t kvd[3] = {B, S, Nkv * hd}, pd[4] = {B, Nkv, -1, hd};
    if (!g->packed &&
        ((st = gqa_float(n, g->k, "key", 3, kvd)) || (st = gqa_float(n, g->v, "value", 3, kvd))))
        return st;
    if ((g->pk == NULL) != (g->pv == NULL))
        return ox_node_err(n, OX_E_INVALID, "past_key and past_value go together");
    if (g->pk) {
        if ((st = gqa_float(n, g->pk, "past_key", 4, pd)) ||
            (st = gqa_float(n, g->pv, "past_value", 4,
                            (const int64_t[4]){B, Nkv, g->pk->dims[2], hd})))
            return st;
        g->P = g->pk->dims[2];
    }
    if (g->seqlens->dtype != OX_INT32 || g->seqlens->rank != 1 || g->seqlens->dims[0] != B)
        return ox_node_err(n, OX_E_SHAPE, "seqlens_k must be int32 [%lld]", (long long)B);
    if (tot->dtype != OX_INT32 || ox_tensor_numel(tot) != 1)
        return ox_node_err(n, OX_E_SHAPE, "total_sequence_length must be one int32");
    if (!tot->data) return OX_NEED_DATA; /* it sizes the present outputs */
    g->total = *(const int32_t *)tot->data;
    if (g->total < 1 || g->total < S)
        return ox_node_err(n, OX_E_INVALID, "total_sequence_length %lld for %lld queries",
                           (long long)g->total, (long long)S);
    g->Tp = g->P > g->total ? g->P : g->total;
    g->first = S == g->total;
    if (!g->first && S > 1 && B != 1)
        return ox_node_err(n, OX_E_INVALID,
                           "%lld queries after a past (total_sequence_length %lld) need a batch of "
                           "1, not %lld",
                           (long long)S, (long long)g->total, (long long)B);
    g->rotary = ox_attr_int(n, "do_rotary", 0) != 0;
    g->interleaved = ox_attr_int(n, "rotary_interleaved", 0) != 0;
    if (g->rotary) {
        if (!g->cos || !g->sin)
            return ox_node_err(n, OX_E_INVALID, "do_rotary needs cos_cache and sin_cache");
        if ((st = gqa_float(n, g->cos, "cos_cache", 2, (const int64_t[2]){-1, -1})) ||
            (st = gqa_float(n, g->sin, "sin_cache", 2, g->cos->dims)))
            return st;
        g->R = 2 * g->cos->dims[1];
        if (g->R == 0 || g->R > hd)
            return ox_node_err(n, OX_E_SHAPE, "cos_cache of %lld columns for a head size of %lld",
                               (long long)g->cos->dims[1], (long long)hd);
        if (g->pos && (g->pos->dtype != OX_INT64 || g->pos->rank != 2 || g->pos->dims[0] != B ||
                       g->pos->dims[1] != S))
            return ox_node_err(n, OX_E_SHAPE, "position_ids must be int64 [%lld, %lld]",
                               (long long)B, (long long)S);
    }
    if (g->ab &&
        (st = gqa_float(n, g->ab, "attention_bias", 4, (const int64_t[4]){-1, -1, S, g->total})))
        return st;
    if (g->ab && ((g->ab->dims[0] != 1 && g->ab->dims[0] != B) ||
                  (g->ab->dims[1] != 1 && g->ab->dims[1] != N)))
        return ox_node_err(n, OX_E_SHAPE, "attention_bias must be [%lld or 1, %lld or 1, S, total]",
                           (long long)B, (long long)N);
    if (g->sinks && (st = gqa_float(n, g->sinks, "head_sink", 1, (const int64_t[1]){N}))) return st;
    float sc = ox_attr_float(n, "scale", 0.0f);
    g->scale = sc != 0 ? sc : (float)(1.0 / sqrt((double)hd));
    g->softcap = ox_attr_float(n, "softcap", 0.0f);
    g->window = ox_attr_int(n, "local_window_size", -1);
    if (g->window == 0 || g->window < -1)
        return ox_node_err(n, OX_E_INVALID, "local_window_size %lld: -1 or positive expected",
                           (long long)g->window);
    g->smooth = ox_attr_int(n, "smooth_softmax", 0) != 0 || g->sinks;
    int64_t yd[3] = {B, S, N * hd}, prd[4] = {B, Nkv, g->Tp, hd};
    if (out[0]) ox_set_shape(out[0], OX_FLOAT, 3, yd);
    g->prk = n->n_outputs > 1 ? out[1] : NULL, g->prv = n->n_outputs > 2 ? out[2] : NULL;
    if (g->prk) ox_set_shape(g->prk, OX_FLOAT, 4, prd);
    if (g->prv) ox_set_shape(g->prv, OX_FLOAT, 4, prd);
    return OX_OK;
}

/* Scratch offsets: the present keys and values where not outputs, the rotary's positions,
 * its Q and K and (packed) their unrotated copies, then each thread's scores. */
struct gqa_scratch {
    size_t prk, prv, pos, qr, kr, qt, kt, work, total;
};

static bool gqa_take(size_t *off, size_t *at, bool want, int64_t n, size_t elem) {
    size_t bytes;
    *at = *off;
    if (!want) return true;
    return ox_mul_size((size_t)n, elem, &bytes) && bytes < SIZE_MAX - 64 &&
           ox_add_size(*off, ox_align64(bytes), off);
}

static bool gqa_scratch(const struct gqa *g, int threads, struct gqa_scratch *o) {
    size_t off = 0, work;
    int64_t kv = g->B * g->Nkv * g->Tp * g->hd, rows = g->B * g->S;
    bool ok = gqa_take(&off, &o->prk, !g->prk, kv, sizeof(float)) &&
              gqa_take(&off, &o->prv, !g->prv, kv, sizeof(float)) &&
              gqa_take(&off, &o->pos, g->rotary, rows, sizeof(int64_t)) &&
              gqa_take(&off, &o->qr, g->rotary, rows * g->N * g->hd, sizeof(float)) &&
              gqa_take(&off, &o->kr, g->rotary, rows * g->Nkv * g->hd, sizeof(float)) &&
              gqa_take(&off, &o->qt, g->rotary && g->packed, rows * g->N * g->hd, sizeof(float)) &&
              gqa_take(&off, &o->kt, g->rotary && g->packed, rows * g->Nkv * g->hd, sizeof(float));
    o->work = off;
    return ok && ox_mul_size((size_t)(g->S * g->Tp), sizeof(float) * (size_t)threads, &work) &&
           ox_add_size(off, work, &o->total);
}

ox_status ox_ms_infer_gqa(struct ox_infer_ctx *ctx, const struct ox_node *n,
                          const ox_tensor *const *in, ox_tensor *const *out) {
    struct gqa g;
    ox_status st = gqa_read(n, in, out, &g);
    if (st) return st;
    struct gqa_scratch o;
    if (!gqa_scratch(&g, ctx->n_threads > 0 ? ctx->n_threads : 1, &o))
        return ox_node_err(n, OX_E_NOMEM, "attention too large");
    ctx->scratch_bytes = o.total;
    return OX_OK;
}

/* Q or K (heads of one width) rotated by the default domain's RotaryEmbedding row: x [B, S,
 * heads hd] into y at positions pos [B, S]. */
static ox_status gqa_rotate(struct ox_kernel_ctx *ctx, const struct ox_node *n, const struct gqa *g,
                            const float *x, float *y, int64_t heads, const ox_tensor *pos) {
    struct ox_attr ra[3];
    struct ox_node rn;
    rope_row_node(n, g->interleaved, heads, g->R, &rn, ra);
    ox_tensor xt = {.dtype = OX_FLOAT, .rank = 3, .dims = {g->B, g->S, heads * g->hd}}, yt = xt;
    xt.data = (void *)x, yt.data = y;
    const ox_tensor *rin[4] = {&xt, g->cos, g->sin, pos};
    ox_tensor *rout[1] = {&yt};
    return ox_op_find("", "RotaryEmbedding", 23)->cpu(ctx, &rn, rin, rout);
}

ox_status ox_ms_cpu_gqa(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                        const ox_tensor *const *in, ox_tensor *const *out) {
    struct gqa g;
    ox_status st = gqa_read(n, in, out, &g);
    if (st) return st;
    struct gqa_scratch o;
    if (!gqa_scratch(&g, ctx->pool ? ox_pool_size(ctx->pool) : 1, &o) ||
        ctx->scratch_bytes < o.total)
        return ox_node_err(n, OX_E_INTERNAL, "scratch smaller than inferred");
    int64_t B = g.B, S = g.S, N = g.N, Nkv = g.Nkv, hd = g.hd, Tp = g.Tp;
    const int32_t *sl = g.seqlens->data;
    for (int64_t b = 0; b < B; b++) { /* item b's keys: its past, then this step's */
        int64_t Tb = (int64_t)sl[b] + 1, Pb = g.first ? 0 : Tb - S;
        if (sl[b] < 0 || Tb > Tp || Pb < 0 || Pb > g.P)
            return ox_node_err(n, OX_E_INVALID,
                               "seqlens_k[%lld] = %d: %s (%lld queries, past_key of %lld, "
                               "total_sequence_length %lld)",
                               (long long)b, sl[b],
                               g.first ? "more keys than the present holds"
                                       : "its past does not fit the past_key",
                               (long long)S, (long long)g.P, (long long)g.total);
    }
    if (B * S == 0) return OX_OK;
    int64_t Dq = g.packed ? (N + 2 * Nkv) * hd : N * hd, Dk = g.packed ? Dq : Nkv * hd;
    const float *qp = g.q->data;
    struct attn_view qv = {qp, S * Dq, Dq, hd};
    struct attn_view kv = {g.packed ? qp + N * hd : g.k->data, S * Dk, Dk, hd};
    struct attn_view vv = {g.packed ? qp + (N + Nkv) * hd : g.v->data, S * Dk, Dk, hd};
    if (g.rotary) {
        ox_tensor pos = {.dtype = OX_INT64, .rank = 2, .dims = {B, S}};
        int64_t *pd = pos.data = ox_scratch_at(ctx->scratch, o.pos);
        const int64_t *given = g.pos ? g.pos->data : NULL;
        for (int64_t b = 0; b < B; b++)
            for (int64_t s = 0; s < S; s++)
                pd[b * S + s] = g.first ? (given ? given[0] : 0) + s
                                : given ? given[b * S + s]
                                        : (int64_t)sl[b] + 1 - S + s;
        float *qr = ox_scratch_at(ctx->scratch, o.qr), *kr = ox_scratch_at(ctx->scratch, o.kr);
        const float *qs = qv.p, *ks = kv.p;
        if (g.packed) { /* Q and K out of the packed rows, contiguous */
            float *qt = ox_scratch_at(ctx->scratch, o.qt), *kt = ox_scratch_at(ctx->scratch, o.kt);
            for (int64_t r = 0; r < B * S; r++) {
                memcpy(qt + r * N * hd, qp + r * Dq, (size_t)(N * hd) * sizeof(float));
                memcpy(kt + r * Nkv * hd, qp + r * Dq + N * hd, (size_t)(Nkv * hd) * sizeof(float));
            }
            qs = qt, ks = kt;
        }
        if ((st = gqa_rotate(ctx, n, &g, qs, qr, N, &pos)) ||
            (st = gqa_rotate(ctx, n, &g, ks, kr, Nkv, &pos)))
            return st;
        qv = (struct attn_view){qr, S * N * hd, N * hd, hd};
        kv = (struct attn_view){kr, S * Nkv * hd, Nkv * hd, hd};
    }
    float *prk = g.prk ? g.prk->data : ox_scratch_at(ctx->scratch, o.prk);
    float *prv = g.prv ? g.prv->data : ox_scratch_at(ctx->scratch, o.prv);
    for (int64_t b = 0; b < B; b++) { /* present: the past's rows, this step's, zeros */
        int64_t Pb = g.first ? 0 : (int64_t)sl[b] + 1 - S, tail = Tp - Pb - S;
        for (int64_t h = 0; h < Nkv; h++) {
            int64_t at = (b * Nkv + h) * Tp * hd, from = (b * Nkv + h) * g.P * hd;
            float *dk = prk + at, *dv = prv + at;
            if (Pb) {
                memcpy(dk, (const float *)g.pk->data + from, (size_t)(Pb * hd) * sizeof(float));
                memcpy(dv, (const float *)g.pv->data + from, (size_t)(Pb * hd) * sizeof(float));
            }
            attn_rows(dk + Pb * hd, &kv, b, h, S, hd);
            attn_rows(dv + Pb * hd, &vv, b, h, S, hd);
            if (tail > 0) {
                memset(dk + (Pb + S) * hd, 0, (size_t)(tail * hd) * sizeof(float));
                memset(dv + (Pb + S) * hd, 0, (size_t)(tail * hd) * sizeof(float));
            }
        }
    }
    struct attn a = {.y = out[0],
                     .B = B,
                     .S = S,
                     .H = N,
                     .dq = N * hd,
                     .dk = N * hd,
                     .dv = N * hd,
                     .L = Tp,
                     .T = Tp,
                     .scale = g.scale,
                     .ab = g.ab,
                     .q = qv,
                     .k = {prk, Nkv * Tp * hd, hd, Tp * hd},
                     .v = {prv, Nkv * Tp * hd, hd, Tp * hd},
                     .group = N / Nkv,
                     .window = g.window > 0 ? g.window : 0,
                     .seqlens = sl,
                     .first = g.first,
                     .smooth = g.smooth,
                     .softcap = g.softcap > 0 ? g.softcap : 0,
                     .sinks = g.sinks ? g.sinks->data : NULL,
                     .work = ox_scratch_at(ctx->scratch, o.work)};
    if (a.y) ox_parallel_for(ctx->pool, B * N, attn_heads, &a);
    return OX_OK;
}

/* ---- RotaryEmbedding (com.microsoft) --------------------------------------------------- */

/* input [B, S, hidden] or [B, N, S, hd]; position_ids int64 [B, S], or one value: the position
 * of token 0 (token s at that + s); cos_cache / sin_cache [max position, R / 2]; interleaved,
 * num_heads (for a 3-D input: needed with rotary_embedding_dim, else hidden / (2 x cos_cache's
 * columns) heads of 2 x that), rotary_embedding_dim (R, default the head size). The default
 * domain's RotaryEmbedding row computes it, the offset form's positions first written out in
 * scratch. scale only rescales caches that ONNX Runtime would extend past max position, which
 * it refuses (as does this, through the row's position check); is_packed_batching is refused. */
struct msrope {
    const ox_tensor *x, *pos, *cos, *sin;
    int64_t B, S, heads, R;
    bool offset; /* position_ids is one value */
};

static ox_status msrope_read(const struct ox_node *n, const ox_tensor *const *in,
                             struct msrope *r) {
    memset(r, 0, sizeof *r);
    r->x = ox_in(n, in, 0), r->pos = ox_in(n, in, 1), r->cos = ox_in(n, in, 2);
    r->sin = ox_in(n, in, 3);
    if (ox_attr_int(n, "is_packed_batching", 0))
        return ox_node_err(n, OX_E_UNSUPPORTED, "is_packed_batching is not supported");
    if (!r->x || !r->pos || !r->cos || !r->sin)
        return ox_node_err(n, OX_E_INVALID,
                           "inputs input, position_ids, cos_cache and sin_cache are required");
    const ox_tensor *x = r->x, *c = r->cos;
    if ((x->rank != 3 && x->rank != 4) || c->rank != 2 || c->dims[1] <= 0)
        return ox_node_err(n, OX_E_SHAPE,
                           "input must be [B, S, hidden] or [B, N, S, head], cos_cache [max "
                           "position, rotary dim / 2]");
    int64_t R0 = ox_attr_int(n, "rotary_embedding_dim", 0), N0 = ox_attr_int(n, "num_heads", 0);
    if (R0 < 0 || N0 < 0 || (R0 > 0 && N0 == 0))
        return ox_node_err(n, OX_E_INVALID,
                           "rotary_embedding_dim %lld and num_heads %lld: num_heads is needed with "
                           "rotary_embedding_dim",
                           (long long)R0, (long long)N0);
    int64_t hd;
    r->B = x->dims[0];
    if (x->rank == 4) {
        r->heads = x->dims[1], r->S = x->dims[2], hd = x->dims[3];
    } else {
        r->S = x->dims[1];
        hd = R0 > 0 ? (x->dims[2] / N0) : 2 * c->dims[1];
        r->heads = hd > 0 ? x->dims[2] / hd : 0;
        if (r->heads * hd != x->dims[2] || (N0 > 0 && r->heads != N0))
            return ox_node_err(n, OX_E_SHAPE,
                               "hidden size %lld is not %lld heads of %lld (num_heads %lld, "
                               "cos_cache's columns %lld)",
                               (long long)x->dims[2], (long long)r->heads, (long long)hd,
                               (long long)N0, (long long)c->dims[1]);
    }
    r->R = R0 > 0 ? R0 : hd;
    if (r->R != 2 * c->dims[1] || r->R > hd)
        return ox_node_err(n, OX_E_SHAPE,
                           "cos_cache has %lld columns: expected half the rotary dim %lld (head "
                           "size %lld)",
                           (long long)c->dims[1], (long long)r->R, (long long)hd);
    const ox_tensor *p = r->pos;
    r->offset = ox_tensor_numel(p) == 1 && p->rank <= 1;
    if (p->dtype != OX_INT64 ||
        (!r->offset && (p->rank != 2 || p->dims[0] != r->B || p->dims[1] != r->S)))
        return ox_node_err(n, OX_E_SHAPE, "position_ids must be int64 [%lld, %lld] or one value",
                           (long long)r->B, (long long)r->S);
    return OX_OK;
}

/* Shape inference (ictx) or the kernel (kctx) through the default domain's row; scratch: the
 * positions of the offset form. */
static ox_status ms_rotary(struct ox_infer_ctx *ictx, struct ox_kernel_ctx *kctx,
                           const struct ox_node *n, const ox_tensor *const *in,
                           ox_tensor *const *out) {
    struct msrope r;
    ox_status st = msrope_read(n, in, &r);
    if (st) return st;
    struct ox_node rn;
    struct ox_attr ra[3];
    rope_row_node(n, ox_attr_int(n, "interleaved", 0) != 0, r.heads, r.R, &rn, ra);
    const struct ox_op *row = ox_op_find("", "RotaryEmbedding", 23);
    ox_tensor pos = *r.pos;
    size_t bytes;
    if (r.offset) {
        if (!ox_mul_size((size_t)(r.B * r.S), sizeof(int64_t), &bytes))
            return ox_node_err(n, OX_E_NOMEM, "position_ids too large");
        pos = (ox_tensor){.dtype = OX_INT64, .rank = 2, .dims = {r.B, r.S}};
    }
    const ox_tensor *rin[4] = {r.x, r.cos, r.sin, &pos};
    if (ictx) {
        if ((st = row->infer(ictx, &rn, rin, out))) return st;
        if (r.offset) ictx->scratch_bytes = bytes;
        return OX_OK;
    }
    if (r.offset) { /* token s of every item at position_ids + s */
        if (kctx->scratch_bytes < bytes)
            return ox_node_err(n, OX_E_INTERNAL, "scratch smaller than inferred");
        int64_t *pd = pos.data = kctx->scratch, p0 = *(const int64_t *)r.pos->data;
        for (int64_t i = 0; i < r.B * r.S; i++) pd[i] = p0 + i % r.S;
    }
    return row->cpu(kctx, &rn, rin, out);
}

ox_status ox_ms_infer_rotary(struct ox_infer_ctx *ctx, const struct ox_node *n,
                             const ox_tensor *const *in, ox_tensor *const *out) {
    return ms_rotary(ctx, NULL, n, in, out);
}

ox_status ox_ms_cpu_rotary(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                           const ox_tensor *const *in, ox_tensor *const *out) {
    return ms_rotary(NULL, ctx, n, in, out);
}

/* ---- MatMulNBits -------------------------------------------------------------------------- */

/* Y = A [.., K] x dequantize(B)^T (+ bias [N]): B uint8 [N, blocks, block_size x bits / 8],
 * each row's K codes in blocks of block_size along K, packed low bits first (bits 2, 4 or 8;
 * the last block padded); scales [N x blocks] of A's type; zero_points? either packed like the
 * codes ([N, ceil(blocks x bits / 8)] uint8) or unpacked of A's type [N x blocks], else
 * 2^(bits - 1); weight = (code - zero point) x scale. The weights are dequantized once per plan
 * into prepared memory when B, scales and zero points are constant (initializers, as the
 * quantizers write them), else into scratch at every run; then one GEMM. g_idx is refused. */
struct mnb {
    const ox_tensor *a, *b, *scales, *zp, *bias;
    int64_t K, N, bits, bs, blocks, blob, M;
    bool zp_packed;
};

static ox_status mnb_read(const struct ox_node *n, const ox_tensor *const *in, struct mnb *m) {
    memset(m, 0, sizeof *m);
    m->a = ox_in(n, in, 0), m->b = ox_in(n, in, 1), m->scales = ox_in(n, in, 2);
    m->zp = ox_in(n, in, 3), m->bias = ox_in(n, in, 5);
    if (ox_in(n, in, 4)) return ox_node_err(n, OX_E_UNSUPPORTED, "g_idx is not supported");
    if (!m->a || !m->b || !m->scales)
        return ox_node_err(n, OX_E_INVALID, "inputs A, B and scales are required");
    m->K = ox_attr_int(n, "K", -1), m->N = ox_attr_int(n, "N", -1);
    m->bits = ox_attr_int(n, "bits", 4), m->bs = ox_attr_int(n, "block_size", -1);
    if (m->K <= 0 || m->N <= 0 || m->K > INT32_MAX || m->N > INT32_MAX)
        return ox_node_err(n, OX_E_INVALID, "attributes K and N must be positive");
    if (m->bits != 2 && m->bits != 4 && m->bits != 8)
        return ox_node_err(n, OX_E_UNSUPPORTED, "bits %lld: expected 2, 4 or 8",
                           (long long)m->bits);
    if (m->bs < 16 || m->bs > (1 << 20) || (m->bs & (m->bs - 1)))
        return ox_node_err(n, OX_E_INVALID, "block_size %lld: a power of 2 from 16 expected",
                           (long long)m->bs);
    m->blocks = (m->K + m->bs - 1) / m->bs;
    m->blob = m->bs * m->bits / 8;
    const ox_tensor *a = m->a;
    if (a->dtype != OX_FLOAT || a->rank < 1 || a->dims[a->rank - 1] != m->K)
        return ox_node_err(n, OX_E_SHAPE, "A must be float [..., %lld]", (long long)m->K);
    if (m->b->dtype != OX_UINT8 || ox_tensor_numel(m->b) != m->N * m->blocks * m->blob)
        return ox_node_err(n, OX_E_SHAPE, "B must be uint8 [%lld, %lld, %lld]", (long long)m->N,
                           (long long)m->blocks, (long long)m->blob);
    if (m->scales->dtype != OX_FLOAT || ox_tensor_numel(m->scales) != m->N * m->blocks)
        return ox_node_err(n, OX_E_SHAPE, "scales must hold %lld floats",
                           (long long)(m->N * m->blocks));
    if (m->zp) {
        int64_t packed = m->N * ((m->blocks * m->bits + 7) / 8);
        m->zp_packed = m->zp->dtype == OX_UINT8;
        if ((m->zp_packed && ox_tensor_numel(m->zp) != packed) ||
            (!m->zp_packed &&
             (m->zp->dtype != OX_FLOAT || ox_tensor_numel(m->zp) != m->N * m->blocks)))
            return ox_node_err(n, OX_E_SHAPE,
                               "zero_points must be uint8 [%lld] (packed) or float [%lld]",
                               (long long)packed, (long long)(m->N * m->blocks));
    }
    if (m->bias && (m->bias->dtype != OX_FLOAT || ox_tensor_numel(m->bias) != m->N))
        return ox_node_err(n, OX_E_SHAPE, "bias must be float [%lld]", (long long)m->N);
    m->M = ox_tensor_numel(a) / m->K;
    return OX_OK;
}

/* The weights [N, K] as floats. */
static void mnb_dequant(void *dst, void *arg) {
    const struct mnb *m = arg;
    float *w = dst;
    const uint8_t *b = m->b->data, *zb = m->zp && m->zp_packed ? m->zp->data : NULL;
    const float *sc = m->scales->data, *zf = m->zp && !m->zp_packed ? m->zp->data : NULL;
    int64_t mask = (1 << m->bits) - 1, zrow = (m->blocks * m->bits + 7) / 8;
    for (int64_t n = 0; n < m->N; n++)
        for (int64_t blk = 0; blk < m->blocks; blk++) {
            double z = (double)(1 << (m->bits - 1));
            if (zb) z = (zb[n * zrow + blk * m->bits / 8] >> (blk * m->bits % 8)) & mask;
            if (zf) z = zf[n * m->blocks + blk];
            double s = sc[n * m->blocks + blk];
            const uint8_t *codes = b + (n * m->blocks + blk) * m->blob;
            for (int64_t j = 0; j < m->bs && blk * m->bs + j < m->K; j++) {
                int64_t q = (codes[j * m->bits / 8] >> (j * m->bits % 8)) & mask;
                w[n * m->K + blk * m->bs + j] = (float)(((double)q - z) * s);
            }
        }
}

ox_status ox_ms_infer_matmul_nbits(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                   const ox_tensor *const *in, ox_tensor *const *out) {
    struct mnb m;
    ox_status st = mnb_read(n, in, &m);
    if (st) return st;
    int64_t dims[OX_MAX_RANK];
    memcpy(dims, m.a->dims, sizeof dims);
    dims[m.a->rank - 1] = m.N;
    ox_set_shape(out[0], OX_FLOAT, m.a->rank, dims);
    size_t bytes;
    if (!ox_mul_size((size_t)(m.N * m.K), sizeof(float), &bytes))
        return ox_node_err(n, OX_E_NOMEM, "weights too large");
    unsigned need = 2u | 4u | (m.zp ? 8u : 0u); /* B, scales, zero points */
    if ((ctx->const_inputs & need) == need)
        ctx->prepared_bytes = bytes;
    else
        ctx->scratch_bytes = bytes;
    return OX_OK;
}

ox_status ox_ms_cpu_matmul_nbits(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                                 const ox_tensor *const *in, ox_tensor *const *out) {
    struct mnb m;
    ox_status st = mnb_read(n, in, &m);
    if (st) return st;
    struct ox_prep_key key = {m.b->data, {m.N, m.K, m.bits, m.bs}};
    float *w = ctx->prepared ? ox_kernel_prepared(ctx, mnb_dequant, &m, &key) : NULL;
    if (!w) {
        if (ctx->scratch_bytes < (size_t)(m.N * m.K) * sizeof(float))
            return ox_node_err(n, OX_E_INTERNAL, "scratch smaller than inferred");
        w = ctx->scratch;
        mnb_dequant(w, &m);
    }
    float *y = out[0]->data;
    if (m.M == 0) return OX_OK;
    ox_sgemm(ctx->pool, false, true, m.M, m.N, m.K, 1.0f, m.a->data, m.K, w, m.K, 0.0f, y, m.N);
    for (int64_t r = 0; m.bias && r < m.M; r++)
        for (int64_t c = 0; c < m.N; c++) y[r * m.N + c] += ((const float *)m.bias->data)[c];
    return OX_OK;
}
