/* FusedAttention's operands as strided views, and the BLAS calls that read them in place
 * (kernels/op.h). The CPU kernel (kernels/cpu/attention.c) and the CUDA one
 * (kernels/cuda/attention.cu) both run these descriptions:
 *
 *     struct ox_fattn a;
 *     ox_fattn_parse(n, in, &a);             // shapes, perms, broadcast batch strides
 *     struct ox_gemm_desc d;
 *     ox_gemm_describe(a.m[OX_FATTN_Q], a.m[OX_FATTN_K], scores, &d);   // one product
 *
 * A view (rows, cols, rs, cs) is BLAS-addressable when one stride is 1 and the other at
 * least the contiguous extent (a leading dimension); the stride of a dim of size 1 is free.
 */
#include "kernels/op.h"

#include <limits.h>

static bool fits_int(int64_t v) {
    return v >= 0 && v <= INT_MAX;
}

bool ox_mat_blas(struct ox_mat a, int64_t *ld, bool *row_major) {
    bool one_row = a.rows <= 1, one_col = a.cols <= 1;
    /* rows contiguous: (i, j) at i * ld + j */
    if ((one_col || a.cs == 1) && (one_row || a.rs >= a.cols)) {
        *ld = one_row ? (a.cols > 1 ? a.cols : 1) : a.rs;
        *row_major = true;
        return fits_int(*ld);
    }
    /* columns contiguous: (i, j) at i + j * ld */
    if ((one_row || a.rs == 1) && (one_col || a.cs >= a.rows)) {
        *ld = one_col ? (a.rows > 1 ? a.rows : 1) : a.cs;
        *row_major = false;
        return fits_int(*ld);
    }
    return false;
}

bool ox_gemm_describe(struct ox_mat a, struct ox_mat b, struct ox_mat c, struct ox_gemm_desc *d) {
    int64_t la, lb, lc;
    bool ra, rb, rc;
    if (!ox_mat_blas(a, &la, &ra) || !ox_mat_blas(b, &lb, &rb) || !ox_mat_blas(c, &lc, &rc))
        return false;
    if (!fits_int(a.rows) || !fits_int(a.cols) || !fits_int(b.cols)) return false;
    int M = (int)a.rows, K = (int)a.cols, N = (int)b.cols;
    if (!rc) { /* C column-major: C = op(A) op(B); a row-major operand is its transpose */
        *d = (struct ox_gemm_desc){.ta = ra,
                                   .tb = rb,
                                   .swap = false,
                                   .m = M,
                                   .n = N,
                                   .k = K,
                                   .lda = (int)la,
                                   .ldb = (int)lb,
                                   .ldc = (int)lc};
    } else { /* C row-major is C^T column-major: C^T = B^T A^T */
        *d = (struct ox_gemm_desc){.ta = !rb,
                                   .tb = !ra,
                                   .swap = true,
                                   .m = N,
                                   .n = M,
                                   .k = K,
                                   .lda = (int)lb,
                                   .ldb = (int)la,
                                   .ldc = (int)lc};
    }
    return true;
}

static ox_status shape_err(const struct ox_node *n, const char *what, const ox_tensor *t,
                           const char *expected) {
    char buf[256];
    return ox_node_err(n, OX_E_SHAPE, "%s is %s: expected %s", what,
                       ox_tensor_desc(t, buf, sizeof buf), expected);
}

/* Row-major strides of dims. */
static void natural(int rank, const int64_t *dims, int64_t *st) {
    int64_t s = 1;
    for (int i = rank - 1; i >= 0; i--) st[i] = s, s *= dims[i];
}

/* The perm attribute `name` for a tensor of `rank` (identity when absent), checked. */
static ox_status read_perm(const struct ox_node *n, const char *name, int rank, int64_t *p) {
    const int64_t *v;
    int c = ox_attr_ints(n, name, &v);
    for (int i = 0; i < rank; i++) p[i] = i;
    if (c < 0) return OX_OK;
    if (c != rank)
        return ox_node_err(n, OX_E_INVALID, "%s has %d entries for a rank-%d tensor", name, c,
                           rank);
    bool seen[OX_MAX_RANK] = {false};
    for (int i = 0; i < rank; i++) {
        if (v[i] < 0 || v[i] >= rank || seen[v[i]])
            return ox_node_err(n, OX_E_INVALID, "%s is not a permutation of 0..%d", name, rank - 1);
        seen[v[i]] = true;
        p[i] = v[i];
    }
    return OX_OK;
}

/* Dims and strides of Transpose(t, perm) as a view of t. */
static ox_status operand(const struct ox_node *n, const ox_tensor *t, const char *what,
                         const char *perm, int64_t *dims, int64_t *st, int *rank) {
    if (!t) return ox_node_err(n, OX_E_INVALID, "missing input %s", what);
    if (t->rank < 2) return shape_err(n, what, t, "rank 2 or more");
    int64_t nat[OX_MAX_RANK], p[OX_MAX_RANK];
    ox_status s = read_perm(n, perm, t->rank, p);
    if (s) return s;
    natural(t->rank, t->dims, nat);
    for (int i = 0; i < t->rank; i++) dims[i] = t->dims[p[i]], st[i] = nat[p[i]];
    *rank = t->rank;
    return OX_OK;
}

static bool is_float_type(ox_dtype dt) {
    return dt == OX_FLOAT || dt == OX_DOUBLE || dt == OX_FLOAT16 || dt == OX_BFLOAT16;
}

ox_status ox_fattn_parse(const struct ox_node *n, const ox_tensor *const *in, struct ox_fattn *a) {
    memset(a, 0, sizeof *a);
    static const char *names[] = {"Q", "KT", "V", "mask"},
                      *perms[] = {"perm_q", "perm_k", "perm_v"};
    int64_t dims[4][OX_MAX_RANK], st[4][OX_MAX_RANK];
    int rank[4] = {0};
    ox_status s;
    for (int k = 0; k < 3; k++)
        if ((s = operand(n, ox_in(n, in, k), names[k], perms[k], dims[k], st[k], &rank[k])))
            return s;
    const ox_tensor *q = in[0];
    a->dtype = q->dtype;
    if (!is_float_type(a->dtype))
        return ox_node_err(n, OX_E_UNSUPPORTED, "Q has element type %s: expected a float type",
                           ox_dtype_name(a->dtype));
    for (int k = 1; k < 3; k++)
        if (in[k]->dtype != a->dtype)
            return ox_node_err(n, OX_E_SHAPE, "%s has element type %s: expected Q's %s", names[k],
                               ox_dtype_name(in[k]->dtype), ox_dtype_name(a->dtype));
    a->S = dims[0][rank[0] - 2], a->Dk = dims[0][rank[0] - 1];
    a->T = dims[1][rank[1] - 1], a->Dv = dims[2][rank[2] - 1];
    if (dims[1][rank[1] - 2] != a->Dk)
        return shape_err(n, "KT", in[1], "Q's last dim as its second-last (a MatMul)");
    if (dims[2][rank[2] - 2] != a->T)
        return shape_err(n, "V", in[2], "KT's last dim as its second-last (a MatMul)");
    const ox_tensor *m = ox_in(n, in, 3);
    if (m) {
        if (m->dtype != a->dtype)
            return ox_node_err(n, OX_E_SHAPE, "mask has element type %s: expected Q's %s",
                               ox_dtype_name(m->dtype), ox_dtype_name(a->dtype));
        /* the mask's own dims, padded on the left to rank 2 */
        int pad = m->rank < 2 ? 2 - m->rank : 0;
        rank[3] = m->rank + pad;
        int64_t nat[OX_MAX_RANK];
        natural(m->rank, m->dims, nat);
        for (int i = 0; i < rank[3]; i++) {
            dims[3][i] = i < pad ? 1 : m->dims[i - pad];
            st[3][i] = i < pad ? 0 : nat[i - pad];
        }
        int64_t ms = dims[3][rank[3] - 2], mt = dims[3][rank[3] - 1];
        if ((ms != 1 && ms != a->S) || (mt != 1 && mt != a->T))
            return shape_err(n, "mask", m, "a shape that broadcasts to the scores [..., S, T]");
        a->has_mask = true;
    }
    /* the batch dims: every operand's leading dims, broadcast */
    int n_ops = m ? 4 : 3;
    a->brank = 0;
    for (int k = 0; k < n_ops; k++)
        if (rank[k] - 2 > a->brank) a->brank = rank[k] - 2;
    for (int x = 0; x < a->brank; x++) a->bdims[x] = 1;
    for (int k = 0; k < n_ops; k++) {
        int off = a->brank - (rank[k] - 2);
        for (int x = off; x < a->brank; x++) {
            int64_t d = dims[k][x - off];
            if (d == 1) continue;
            if (a->bdims[x] != 1 && a->bdims[x] != d)
                return ox_node_err(n, OX_E_SHAPE,
                                   "%s's batch dim %lld does not broadcast with %lld", names[k],
                                   (long long)d, (long long)a->bdims[x]);
            a->bdims[x] = d;
        }
    }
    a->batch = 1;
    for (int x = 0; x < a->brank; x++) a->batch *= a->bdims[x];
    for (int k = 0; k < n_ops; k++) {
        int off = a->brank - (rank[k] - 2);
        for (int x = 0; x < a->brank; x++)
            a->bstr[k][x] = x >= off && dims[k][x - off] != 1 ? st[k][x - off] : 0;
        int r = rank[k];
        a->m[k] =
            (struct ox_mat){dims[k][r - 2], dims[k][r - 1], dims[k][r - 2] == 1 ? 0 : st[k][r - 2],
                            dims[k][r - 1] == 1 ? 0 : st[k][r - 1]};
    }
    if (m) /* the mask's matrix is the scores' S x T, broadcast where its dims are 1 */
        a->m[OX_FATTN_MASK].rows = a->S, a->m[OX_FATTN_MASK].cols = a->T;
    /* the output: Transpose([batch..., S, Dv], perm_y), contiguous */
    int yr = a->brank + 2;
    int64_t yl[OX_MAX_RANK], p[OX_MAX_RANK], ost[OX_MAX_RANK], lst[OX_MAX_RANK];
    if (yr > OX_MAX_RANK) return ox_node_err(n, OX_E_SHAPE, "rank %d exceeds the limit", yr);
    memcpy(yl, a->bdims, sizeof(int64_t) * (size_t)a->brank);
    yl[yr - 2] = a->S, yl[yr - 1] = a->Dv;
    if ((s = read_perm(n, "perm_y", yr, p))) return s;
    a->y_rank = yr;
    for (int i = 0; i < yr; i++) a->y_dims[i] = yl[p[i]];
    natural(yr, a->y_dims, ost);
    for (int i = 0; i < yr; i++) lst[p[i]] = ost[i];
    for (int x = 0; x < a->brank; x++) a->bstr[OX_FATTN_Y][x] = a->bdims[x] == 1 ? 0 : lst[x];
    a->m[OX_FATTN_Y] = (struct ox_mat){a->S, a->Dv, lst[yr - 2], lst[yr - 1]};
    /* the factors: one element each, of a rank the operand they scale already has */
    static const char *fnames[] = {"Q's factor", "KT's factor", "the scores' factor"};
    int frank[3] = {rank[0], rank[1], yr};
    for (int k = 4; k < 7; k++) {
        const ox_tensor *f = ox_in(n, in, k);
        if (!f) continue;
        if (!is_float_type(f->dtype) || ox_tensor_numel(f) != 1 || f->rank > frank[k - 4])
            return shape_err(n, fnames[k - 4], f,
                             "one float element, of no higher rank than what it scales");
    }
    a->scale = ox_attr_float(n, "scale", 1.0f);
    return OX_OK;
}

void ox_fattn_offsets(const struct ox_fattn *a, int64_t i, int64_t off[OX_FATTN_N]) {
    for (int k = 0; k < OX_FATTN_N; k++) off[k] = 0;
    for (int x = a->brank - 1; x >= 0; x--) {
        int64_t d = a->bdims[x], c = d ? i % d : 0;
        i = d ? i / d : 0;
        for (int k = 0; k < OX_FATTN_N; k++) off[k] += c * a->bstr[k][x];
    }
}

double ox_fattn_alpha(const struct ox_node *n, const ox_tensor *const *in,
                      const struct ox_fattn *a) {
    double alpha = a->scale;
    for (int k = 4; k < 7; k++) {
        const ox_tensor *f = ox_in(n, in, k);
        if (f) alpha *= ox_get_f64(f, 0);
    }
    return alpha;
}
