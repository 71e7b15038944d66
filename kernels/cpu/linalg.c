/* MatMul (numpy semantics, batched with broadcasting) and Gemm, through OpenBLAS for float
 * and double; other element types (integers, float16, bfloat16) accumulate in double or
 * int64 and round on store. */
#include "kernels/op.h"

#include <cblas.h>

/* ---- the packed GEMM path (AVX-512) --------------------------------------------------- */

/* One float product Y = epilogue(op(A) op(B)) through the packed kernel: A packed into
 * scratch at each run; B, when constant, packed once into the node's prepared memory. */
struct fast_mm {
    bool ta, tb;
    int64_t M, N, K, lda, ldb;
    const float *A, *B;
};

static void pack_b_prepared(void *dst, void *arg) {
    const struct fast_mm *f = arg;
    struct ox_gemm_b b = {
        .pack = ox_gemm_b_pack_matrix, .data = f->B, .ld = f->ldb, .trans = f->tb};
    ox_sgemm_pack_b(&b, f->K, f->N, dst);
    ox_release_pages(f->B, sizeof(float) * (size_t)(f->K * f->N));
}

static void fast_mm_run(struct ox_kernel_ctx *ctx, const struct fast_mm *f, float *Y,
                        const struct ox_epilogue *ep, bool load_c) {
    float *ap = ctx->scratch;
    ox_sgemm_pack_a_pool(ctx->pool, f->A, f->lda, f->ta, f->M, f->K, ap);
    struct ox_gemm_b b = {
        .pack = ox_gemm_b_pack_matrix, .data = f->B, .ld = f->ldb, .trans = f->tb};
    struct ox_prep_key key = {f->B, {f->K, f->N, f->ldb, f->tb}};
    b.packed = ox_kernel_prepared(ctx, pack_b_prepared, (void *)f, &key);
    ox_sgemm_packed(ctx->pool, ap, f->M, f->N, f->K, &b, Y, f->N, ep, load_c);
}

/* Scratch and prepared memory for fast_mm_run, set in infer. */
static void fast_mm_reserve(struct ox_infer_ctx *ctx, int64_t M, int64_t N, int64_t K,
                            bool b_const) {
    ctx->scratch_bytes = (size_t)ox_sgemm_packed_a_floats(M, K) * sizeof(float);
    if (b_const) ctx->prepared_bytes = (size_t)ox_sgemm_packed_b_floats(K, N) * sizeof(float);
}

/* MatMul whose B is one matrix shared by all of A's rows (A [..., M, K] contiguous). */
static bool matmul_is_fast(const struct ox_matmul_shape *m, ox_dtype dt) {
    if (dt != OX_FLOAT || !ox_sgemm_is_fast() || m->K == 0) return false;
    for (int d = 0; d < m->brank; d++)
        if ((m->bstr[d] != 0 && m->bdims[d] != 1) || (m->astr[d] == 0 && m->bdims[d] != 1))
            return false;
    return true;
}

/* ---- MatMul ---------------------------------------------------------------------------- */

static bool mm_type_ok(ox_dtype dt) {
    switch (dt) {
    case OX_FLOAT:
    case OX_DOUBLE:
    case OX_FLOAT16:
    case OX_BFLOAT16:
    case OX_INT32:
    case OX_INT64:
    case OX_UINT32:
    case OX_UINT64: return true;
    default: return false;
    }
}

ox_status ox_nn_infer_matmul(struct ox_infer_ctx *ctx, const struct ox_node *n,
                             const ox_tensor *const *in, ox_tensor *const *out) {
    const ox_tensor *a = ox_in(n, in, 0), *b = ox_in(n, in, 1);
    if (!a || !b) return ox_node_err(n, OX_E_INVALID, "expected inputs A and B");
    if (a->dtype != b->dtype || !mm_type_ok(a->dtype))
        return ox_node_err(n, OX_E_UNSUPPORTED, "element types %s and %s", ox_dtype_name(a->dtype),
                           ox_dtype_name(b->dtype));
    struct ox_matmul_shape m;
    ox_status st = ox_matmul_shape(n, a, b, &m);
    if (st) return st;
    ox_set_shape(out[0], a->dtype, m.rank, m.dims);
    if (matmul_is_fast(&m, a->dtype))
        fast_mm_reserve(ctx, m.M * m.batch, m.N, m.K, ctx->const_inputs & 2);
    else if (a->dtype == OX_FLOAT && ox_sgemm_is_fast() && m.K > 0) /* batched: A per thread */
        ctx->scratch_bytes = (size_t)ox_sgemm_packed_a_floats(m.M, m.K) * sizeof(float) *
                             (size_t)(ctx->n_threads > 1 ? ctx->n_threads : 1);
    return OX_OK;
}

struct mm_batch_job {
    const struct ox_matmul_shape *m;
    const float *a, *b;
    float *y;
    float *scratch; /* packed A, one per thread (the packed kernel), or NULL (OpenBLAS) */
};

static void mm_batch_piece(void *arg, int64_t begin, int64_t end, int tid) {
    const struct mm_batch_job *j = arg;
    int64_t M = j->m->M, N = j->m->N, K = j->m->K;
    float *ap = j->scratch ? j->scratch + tid * ox_sgemm_packed_a_floats(M, K) : NULL;
    struct ox_epilogue ep = {.lo = -INFINITY, .hi = INFINITY};
    for (int64_t i = begin; i < end; i++) {
        int64_t ao, bo;
        ox_matmul_offsets(j->m, i, &ao, &bo);
        if (ap) {
            ox_sgemm_pack_a(j->a + ao, K, false, M, K, ap);
            struct ox_gemm_b b = {.pack = ox_gemm_b_pack_matrix, .data = j->b + bo, .ld = N};
            ox_sgemm_packed(NULL, ap, M, N, K, &b, j->y + i * M * N, N, &ep, false);
        } else {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)M, (int)N, (int)K, 1.0f,
                        j->a + ao, (int)K, j->b + bo, (int)N, 0.0f, j->y + i * M * N, (int)N);
        }
    }
}

/* y = a b; with the packed kernel, also + bias (a vector over the last axis) and the
 * clamp, in which case *done is set. */
static ox_status matmul_exec(struct ox_kernel_ctx *ctx, const struct ox_node *n, const ox_tensor *a,
                             const ox_tensor *b, ox_tensor *y, const ox_tensor *bias, float lo,
                             float hi, bool silu, bool *done) {
    *done = false;
    struct ox_matmul_shape m;
    ox_status st = ox_matmul_shape(n, a, b, &m);
    if (st) return st;
    int64_t M = m.M, K = m.K, N = m.N;
    if (M * N == 0 || m.batch == 0) return OX_OK;
    if (K == 0) {
        memset(y->data, 0, (size_t)(m.batch * M * N) * ox_dtype_size(y->dtype));
        return OX_OK;
    }
    if (matmul_is_fast(&m, a->dtype)) {
        struct fast_mm f = {false, false, M * m.batch, N, K, K, N, a->data, b->data};
        struct ox_epilogue ep = {.lo = lo, .hi = hi, .silu = silu};
        if (bias && bias->rank == 1 && bias->dims[0] == N && bias->dtype == OX_FLOAT &&
            y->rank >= 1 && y->dims[y->rank - 1] == N)
            ep.bias_col = bias->data;
        else if (bias)
            ep.lo = -INFINITY, ep.hi = INFINITY, ep.silu = false; /* all of it after */
        fast_mm_run(ctx, &f, y->data, &ep, false);
        *done = !bias || ep.bias_col;
        return OX_OK;
    }
    /* B shared by every batch item and A contiguous: one GEMM with M*batch rows */
    bool b_shared = true, a_contig = true;
    for (int d = 0; d < m.brank; d++) {
        if (m.bstr[d] != 0 && m.bdims[d] != 1) b_shared = false;
        if (m.astr[d] == 0 && m.bdims[d] != 1) a_contig = false;
    }
    int64_t rows = M, batch = m.batch;
    if (b_shared && a_contig) rows = M * m.batch, batch = 1;
    if (a->dtype == OX_FLOAT && batch > 1) {
        /* many GEMMs (attention heads): items split over the pool */
        struct mm_batch_job j = {&m, a->data, b->data, y->data,
                                 ox_sgemm_is_fast() && ctx->scratch ? ctx->scratch : NULL};
        ox_parallel_for(ctx->pool, batch, mm_batch_piece, &j);
        return OX_OK;
    }
    for (int64_t i = 0; i < batch; i++) {
        int64_t ao, bo;
        ox_matmul_offsets(&m, i, &ao, &bo);
        if (batch == 1) ao = bo = 0;
        int64_t yo = i * M * N;
        if (a->dtype == OX_FLOAT) {
            ox_sgemm(ctx->pool, false, false, rows, N, K, 1.0f, (const float *)a->data + ao, K,
                     (const float *)b->data + bo, N, 0.0f, (float *)y->data + yo, N);
        } else if (a->dtype == OX_DOUBLE) {
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)N, (int)K, 1.0,
                        (const double *)a->data + ao, (int)K, (const double *)b->data + bo, (int)N,
                        0.0, (double *)y->data + yo, (int)N);
        } else if (ox_dtype_is_int(a->dtype)) {
            for (int64_t r = 0; r < rows; r++)
                for (int64_t c = 0; c < N; c++) {
                    int64_t acc = 0;
                    for (int64_t k = 0; k < K; k++)
                        acc += ox_get_i64(a, ao + r * K + k) * ox_get_i64(b, bo + k * N + c);
                    ox_set_i64(y, yo + r * N + c, acc);
                }
        } else {
            for (int64_t r = 0; r < rows; r++)
                for (int64_t c = 0; c < N; c++) {
                    double acc = 0;
                    for (int64_t k = 0; k < K; k++)
                        acc += ox_get_f64(a, ao + r * K + k) * ox_get_f64(b, bo + k * N + c);
                    ox_set_f64(y, yo + r * N + c, acc);
                }
        }
    }
    return OX_OK;
}

/* ---- Gemm ------------------------------------------------------------------------------ */

static ox_status gemm_shape(const struct ox_node *n, const ox_tensor *a, const ox_tensor *b,
                            const ox_tensor *c, int64_t *M, int64_t *N, int64_t *K) {
    char sa[256], sb[256];
    if (a->rank != 2 || b->rank != 2)
        return ox_node_err(n, OX_E_SHAPE, "A and B must be matrices, got %s and %s",
                           ox_tensor_desc(a, sa, sizeof sa), ox_tensor_desc(b, sb, sizeof sb));
    bool ta = ox_attr_int(n, "transA", 0), tb = ox_attr_int(n, "transB", 0);
    *M = ta ? a->dims[1] : a->dims[0];
    *K = ta ? a->dims[0] : a->dims[1];
    *N = tb ? b->dims[0] : b->dims[1];
    int64_t kb = tb ? b->dims[1] : b->dims[0];
    if (kb != *K)
        return ox_node_err(n, OX_E_SHAPE, "inner dimensions differ: %s%s times %s%s",
                           ox_tensor_desc(a, sa, sizeof sa), ta ? "^T" : "",
                           ox_tensor_desc(b, sb, sizeof sb), tb ? "^T" : "");
    if (c) {
        bool ok = c->rank <= 2;
        if (ok && c->rank == 2)
            ok = (c->dims[0] == *M || c->dims[0] == 1) && (c->dims[1] == *N || c->dims[1] == 1);
        if (ok && c->rank == 1) ok = c->dims[0] == *N || c->dims[0] == 1;
        if (!ok)
            return ox_node_err(n, OX_E_SHAPE, "C %s does not broadcast to [%lld,%lld]",
                               ox_tensor_desc(c, sa, sizeof sa), (long long)*M, (long long)*N);
    }
    return OX_OK;
}

/* Gemm through the packed kernel: float, alpha 1 (C, scaled by beta, goes in the
 * epilogue). */
static bool gemm_is_fast(const struct ox_node *n, ox_dtype dt, int64_t K) {
    return dt == OX_FLOAT && ox_sgemm_is_fast() && K > 0 && ox_attr_float(n, "alpha", 1.0f) == 1.0f;
}

ox_status ox_nn_infer_gemm(struct ox_infer_ctx *ctx, const struct ox_node *n,
                           const ox_tensor *const *in, ox_tensor *const *out) {
    const ox_tensor *a = ox_in(n, in, 0), *b = ox_in(n, in, 1), *c = ox_in(n, in, 2);
    if (!a || !b) return ox_node_err(n, OX_E_INVALID, "expected inputs A and B");
    if (a->dtype != b->dtype || (c && c->dtype != a->dtype) || !mm_type_ok(a->dtype))
        return ox_node_err(n, OX_E_UNSUPPORTED, "element types %s, %s", ox_dtype_name(a->dtype),
                           ox_dtype_name(b->dtype));
    int64_t M, N, K;
    ox_status st = gemm_shape(n, a, b, c, &M, &N, &K);
    if (st) return st;
    int64_t dims[2] = {M, N};
    ox_set_shape(out[0], a->dtype, 2, dims);
    if (gemm_is_fast(n, a->dtype, K)) fast_mm_reserve(ctx, M, N, K, ctx->const_inputs & 2);
    return OX_OK;
}

/* C broadcast into Y (as double through the generic accessors, float directly). */
static void gemm_fill_c(const ox_tensor *c, ox_tensor *y, int64_t M, int64_t N, double beta) {
    int64_t rs = 0, cs = 0;
    if (c->rank == 2) rs = c->dims[0] == 1 ? 0 : c->dims[1], cs = c->dims[1] == 1 ? 0 : 1;
    if (c->rank == 1) cs = c->dims[0] == 1 ? 0 : 1;
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            if (y->dtype == OX_FLOAT)
                ((float *)y->data)[i * N + j] =
                    (float)beta * ((const float *)c->data)[i * rs + j * cs];
            else
                ox_set_f64(y, i * N + j, beta * ox_get_f64(c, i * rs + j * cs));
        }
}

/* y = alpha op(a) op(b) + beta c; with the packed kernel also the clamp (*done set). */
static ox_status gemm_exec(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                           const ox_tensor *const *in, ox_tensor *y, float lo, float hi, bool silu,
                           bool *done) {
    const ox_tensor *a = in[0], *b = in[1], *c = ox_in(n, in, 2);
    *done = false;
    int64_t M, N, K;
    ox_status st = gemm_shape(n, a, b, c, &M, &N, &K);
    if (st) return st;
    bool ta = ox_attr_int(n, "transA", 0), tb = ox_attr_int(n, "transB", 0);
    double alpha = ox_attr_float(n, "alpha", 1.0f), beta = ox_attr_float(n, "beta", 1.0f);
    if (M * N == 0) return OX_OK;
    bool has_c = c && beta != 0;
    if (gemm_is_fast(n, a->dtype, K)) {
        struct fast_mm f = {ta, tb, M, N, K, a->dims[1], b->dims[1], a->data, b->data};
        struct ox_epilogue ep = {.lo = lo, .hi = hi, .silu = silu};
        bool load_c = false;
        *done = true;
        int64_t c0 = !has_c         ? 0
                     : c->rank == 2 ? c->dims[0]
                                    : 1,
                c1 = !has_c    ? 0
                     : c->rank ? c->dims[c->rank - 1]
                               : 1;
        if (!has_c) {
        } else if (beta == 1 && c1 == N && c0 == 1 && (N > 1 || M == 1)) {
            ep.bias_col = c->data; /* [N] or [1, N] */
        } else if (beta == 1 && c0 == M && c1 == N) {
            ep.residual = c->data, ep.ld_residual = N; /* [M, N] */
        } else if (beta == 1 && c->rank == 2 && c0 == M && c1 == 1) {
            ep.bias_row = c->data; /* [M, 1] */
        } else {
            gemm_fill_c(c, y, M, N, beta);
            load_c = true;
        }
        fast_mm_run(ctx, &f, y->data, &ep, load_c);
        return OX_OK;
    }
    if (has_c) gemm_fill_c(c, y, M, N, beta);
    if (a->dtype == OX_FLOAT || a->dtype == OX_DOUBLE) {
        if (!has_c) memset(y->data, 0, (size_t)(M * N) * ox_dtype_size(y->dtype));
        if (K == 0) return OX_OK;
        if (a->dtype == OX_FLOAT)
            ox_sgemm(ctx->pool, ta, tb, M, N, K, (float)alpha, a->data, a->dims[1], b->data,
                     b->dims[1], 1.0f, y->data, N);
        else
            cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
                        tb ? CblasTrans : CblasNoTrans, (int)M, (int)N, (int)K, alpha, a->data,
                        (int)a->dims[1], b->data, (int)b->dims[1], 1.0, y->data, (int)N);
        return OX_OK;
    }
    bool is_int = ox_dtype_is_int(a->dtype);
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double acc = 0;
            int64_t iacc = 0;
            for (int64_t k = 0; k < K; k++) {
                int64_t ai = ta ? k * M + i : i * K + k, bi = tb ? j * K + k : k * N + j;
                if (is_int)
                    iacc += ox_get_i64(a, ai) * ox_get_i64(b, bi);
                else
                    acc += ox_get_f64(a, ai) * ox_get_f64(b, bi);
            }
            double base = has_c ? ox_get_f64(y, i * N + j) : 0;
            if (is_int)
                ox_set_i64(y, i * N + j, (int64_t)(alpha * (double)iacc + base));
            else
                ox_set_f64(y, i * N + j, alpha * acc + base);
        }
    return OX_OK;
}

ox_status ox_nn_cpu_matmul(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                           const ox_tensor *const *in, ox_tensor *const *out) {
    bool done;
    return matmul_exec(ctx, n, in[0], in[1], out[0], NULL, -INFINITY, INFINITY, false, &done);
}

ox_status ox_nn_cpu_gemm(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                         const ox_tensor *const *in, ox_tensor *const *out) {
    bool done;
    return gemm_exec(ctx, n, in, out[0], -INFINITY, INFINITY, false, &done);
}

/* FusedMatMul (ai.onnxexec, graph/optimize.c): A, B, then Z (the bias the Add added), then
 * the activation. FusedGemm: Gemm's inputs and attributes, then the activation. */
ox_status ox_nn_infer_fused_matmul(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                   const ox_tensor *const *in, ox_tensor *const *out) {
    ox_status st = ox_nn_infer_matmul(ctx, n, in, out);
    return st ? st : ox_fused_infer(ctx, n, ox_in(n, in, 2), out[0]);
}

ox_status ox_nn_cpu_fused_matmul(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                                 const ox_tensor *const *in, ox_tensor *const *out) {
    float lo, hi;
    ox_fused_clamp(n, &lo, &hi);
    bool silu = ox_fused_silu(n);
    const ox_tensor *z = ox_in(n, in, 2);
    ox_tensor tmp;
    struct ox_kernel_ctx bc;
    bool done, split = ox_fused_split(ctx, n, in, z, ox_nn_infer_matmul, &tmp, &bc);
    ox_tensor *y = split ? &tmp : out[0];
    ox_status st = matmul_exec(&bc, n, in[0], in[1], y, split ? NULL : z, split ? -INFINITY : lo,
                               split ? INFINITY : hi, silu && !split, &done);
    if (st || (done && !split)) return st;
    return ox_fused_post(n, y, z, out[0], lo, hi, silu);
}

ox_status ox_nn_infer_fused_gemm(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                 const ox_tensor *const *in, ox_tensor *const *out) {
    ox_status st = ox_nn_infer_gemm(ctx, n, in, out);
    return st ? st : ox_fused_infer(ctx, n, NULL, out[0]);
}

ox_status ox_nn_cpu_fused_gemm(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                               const ox_tensor *const *in, ox_tensor *const *out) {
    float lo, hi;
    bool done, silu = ox_fused_silu(n);
    ox_fused_clamp(n, &lo, &hi);
    ox_status st = gemm_exec(ctx, n, in, out[0], lo, hi, silu, &done);
    if (st || done || (lo == -INFINITY && hi == INFINITY && !silu)) return st;
    return ox_fused_post(n, out[0], NULL, out[0], lo, hi, silu);
}
