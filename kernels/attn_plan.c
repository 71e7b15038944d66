/* FusedAttention's operands as strided views, and the BLAS calls that read them in place
 * (kernels/op.h). The CPU kernel (kernels/cpu/attention.c) and the CUDA one
 * (kernels/cuda/reduce.cu) both run these descriptions:
 *
 *     struct ox_fattn a;
 *     ox_fattn_parse(n, in, &a);             // views, shapes, broadcast batch axes
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

/* ---- views: the input through Transpose, Reshape, Squeeze, Unsqueeze, Gather, Slice ---- */

static int64_t numel_of(int rank, const int64_t *d) {
    int64_t c = 1;
    for (int i = 0; i < rank; i++) c *= d[i];
    return c;
}

int64_t ox_view_axis_offset(const struct ox_view_axis *a, int64_t i) {
    int64_t off = 0;
    for (int k = a->n - 1; k >= 0; k--) {
        int64_t d = a->dims[k];
        off += (d ? i % d : 0) * a->strides[k];
        i = d ? i / d : 0;
    }
    return off;
}

static void axis_simple(struct ox_view_axis *a, int64_t d, int64_t s) {
    a->n = d == 1 ? 0 : 1;
    a->dims[0] = d, a->strides[0] = s;
}

/* The axes of dims nd over the sub-axes of ax (rank axes): each new dim takes whole sub-axes
 * or splits one, in row-major order; neighbours that stay contiguous merge. False when a
 * new dim would cut a sub-axis across (no affine view), or needs too many sub-axes. */
static bool reshape_axes(int rank, const struct ox_view_axis *ax, int nrank, const int64_t *nd,
                         struct ox_view_axis *out) {
    int64_t ld[OX_MAX_RANK * OX_VIEW_SUB], ls[OX_MAX_RANK * OX_VIEW_SUB];
    int nl = 0, at = 0;
    for (int i = 0; i < rank; i++)
        for (int k = 0; k < ax[i].n; k++)
            if (ax[i].dims[k] != 1) ld[nl] = ax[i].dims[k], ls[nl] = ax[i].strides[k], nl++;
    for (int j = 0; j < nrank; j++) {
        int64_t rem = nd[j], cd[OX_MAX_RANK * OX_VIEW_SUB + 1], cs[OX_MAX_RANK * OX_VIEW_SUB + 1];
        int nc = 0;
        while (rem > 1) {
            if (at >= nl) return false;
            int64_t d = ld[at], s = ls[at];
            if (rem % d == 0) {
                cd[nc] = d, cs[nc] = s, nc++, at++;
                rem /= d;
            } else if (d % rem == 0) {
                cd[nc] = rem, cs[nc] = s * (d / rem), nc++;
                ld[at] = d / rem;
                rem = 1;
            } else {
                return false;
            }
        }
        int m = 0;
        for (int c = 0; c < nc; c++) {
            if (m > 0 && cs[m - 1] == cd[c] * cs[c])
                cd[m - 1] *= cd[c], cs[m - 1] = cs[c];
            else
                cd[m] = cd[c], cs[m] = cs[c], m++;
        }
        if (m > OX_VIEW_SUB) return false;
        out[j].n = m;
        for (int c = 0; c < m; c++) out[j].dims[c] = cd[c], out[j].strides[c] = cs[c];
    }
    return at == nl;
}

/* A Reshape's dims from its shape tensor, by the Reshape op's own rule. */
static ox_status reshape_dims(const struct ox_node *n, const ox_tensor *shape, bool allowzero,
                              ox_dtype dt, int rank_in, const int64_t *din, int *rank_out,
                              int64_t *dout) {
    if (!shape || !shape->data || shape->dtype != OX_INT64 || shape->rank != 1 ||
        shape->dims[0] > OX_MAX_RANK)
        return ox_node_err(n, OX_E_INVALID,
                           "a view's Reshape has no int64 shape of at most %d entries at plan time",
                           OX_MAX_RANK);
    ox_tensor x;
    memset(&x, 0, sizeof x);
    x.dtype = dt;
    x.rank = rank_in;
    memcpy(x.dims, din, sizeof(int64_t) * (size_t)rank_in);
    *rank_out = (int)shape->dims[0];
    return ox_reshape_dims(n, &x, *rank_out, shape->data, allowzero, dout);
}

static ox_status bad_view(const struct ox_node *n, const char *name, const char *why) {
    return ox_node_err(n, OX_E_INVALID, "view %s: %s", name, why);
}

/* The view `name` (a program, kernels/op.h) of input t. */
static ox_status view_build(const struct ox_node *n, const ox_tensor *const *in, const char *name,
                            const ox_tensor *t, struct ox_view *v) {
    memset(v, 0, sizeof *v);
    int rank = t->rank;
    int64_t dims[OX_MAX_RANK], st[OX_MAX_RANK], base = 0;
    struct ox_view_axis ax[OX_MAX_RANK];
    memcpy(dims, t->dims, sizeof(int64_t) * (size_t)rank);
    natural(rank, dims, st);
    for (int i = 0; i < rank; i++) axis_simple(&ax[i], dims[i], st[i]);
    v->src_rank = rank;
    memcpy(v->src_dims, dims, sizeof(int64_t) * (size_t)rank);
    bool affine = true;
    const int64_t *pg;
    int len = ox_attr_ints(n, name, &pg);
    for (int at = 0; at < len;) {
        if (v->n_stages == OX_VIEW_MAX_OPS) return bad_view(n, name, "too many ops");
        struct ox_view_stage *sg = &v->st[v->n_stages++];
        sg->op = (int)pg[at];
        sg->rank_in = rank;
        memcpy(sg->dims_in, dims, sizeof dims);
        int64_t nd[OX_MAX_RANK];
        struct ox_view_axis na[OX_MAX_RANK];
        int nr = rank, k = at + 1 < len ? (int)pg[at + 1] : -1;
        switch (sg->op) {
        case OX_VIEW_MATPERM: { /* becomes the Transpose it is at this rank */
            if (at + 3 > len) return bad_view(n, name, "a truncated FusedMatMul permutation");
            bool trans = pg[at + 1] != 0, batch = pg[at + 2] != 0;
            for (int i = 0; i < rank; i++) sg->p[i] = i;
            if (rank >= 2 && batch) {
                for (int i = 0; i < rank - 2; i++) sg->p[i] = i + 1;
                sg->p[rank - 2] = 0;
            }
            if (rank >= 2 && trans) {
                int64_t t = sg->p[rank - 1];
                sg->p[rank - 1] = sg->p[rank - 2], sg->p[rank - 2] = t;
            }
            sg->op = OX_VIEW_TRANSPOSE;
            for (int i = 0; i < rank; i++) nd[i] = dims[sg->p[i]], na[i] = ax[sg->p[i]];
            at += 3;
            break;
        }
        case OX_VIEW_TRANSPOSE: {
            if (k != rank || at + 2 + k > len) return bad_view(n, name, "a perm of the wrong rank");
            bool seen[OX_MAX_RANK] = {false};
            for (int i = 0; i < k; i++) {
                int64_t q = pg[at + 2 + i];
                if (q < 0 || q >= rank || seen[q]) return bad_view(n, name, "not a permutation");
                seen[q] = true;
                sg->p[i] = q, nd[i] = dims[q], na[i] = ax[q];
            }
            at += 2 + k;
            break;
        }
        case OX_VIEW_RESHAPE: {
            if (at + 3 > len) return bad_view(n, name, "a truncated Reshape");
            ox_status s = reshape_dims(n, k >= 0 ? ox_in(n, in, k) : NULL, pg[at + 2] != 0,
                                       t->dtype, rank, dims, &nr, nd);
            if (s) return s;
            if (numel_of(rank, dims) == 0) { /* nothing is read */
                int64_t ns[OX_MAX_RANK];
                natural(nr, nd, ns);
                for (int i = 0; i < nr; i++) axis_simple(&na[i], nd[i], ns[i]);
            } else if (affine) {
                affine = reshape_axes(rank, ax, nr, nd, na);
            }
            at += 3;
            break;
        }
        case OX_VIEW_GATHER: {
            if (at + 4 > len) return bad_view(n, name, "a truncated Gather");
            int64_t axis = pg[at + 1], idx = pg[at + 2], keep = pg[at + 3];
            if (axis < 0) axis += rank;
            if (axis < 0 || axis >= rank) return bad_view(n, name, "a Gather axis out of range");
            if (idx < 0) idx += dims[axis];
            if (idx < 0 || idx >= dims[axis])
                return ox_node_err(n, OX_E_SHAPE, "view %s: Gather index %lld of a dim of %lld",
                                   name, (long long)pg[at + 2], (long long)dims[axis]);
            sg->p[0] = axis, sg->p[1] = idx, sg->p[2] = keep != 0;
            if (affine) base += ox_view_axis_offset(&ax[axis], idx);
            nr = 0;
            for (int i = 0; i < rank; i++) {
                if (i == axis && !keep) continue;
                nd[nr] = i == axis ? 1 : dims[i];
                na[nr] = ax[i];
                if (i == axis) na[nr].n = 0;
                nr++;
            }
            at += 4;
            break;
        }
        case OX_VIEW_SQUEEZE:
        case OX_VIEW_UNSQUEEZE: {
            bool sq = sg->op == OX_VIEW_SQUEEZE;
            if (k < 0 || at + 2 + k > len) return bad_view(n, name, "truncated axes");
            nr = sq ? (k ? rank - k : rank) : rank + k;
            if (nr < 0 || nr > OX_MAX_RANK) return bad_view(n, name, "a rank out of range");
            bool mark[OX_MAX_RANK] = {false};
            for (int i = 0; i < k; i++) {
                int64_t ax = pg[at + 2 + i], r = sq ? rank : nr;
                if (ax < 0) ax += r;
                if (ax < 0 || ax >= r || mark[ax]) return bad_view(n, name, "an axis out of range");
                if (sq && dims[ax] != 1)
                    return ox_node_err(n, OX_E_SHAPE, "view %s: Squeeze of a dim of %lld", name,
                                       (long long)dims[ax]);
                mark[ax] = true;
            }
            if (sq) {
                nr = 0;
                for (int i = 0; i < rank; i++)
                    if (!(k ? mark[i] : dims[i] == 1)) nd[nr] = dims[i], na[nr] = ax[i], nr++;
            } else {
                for (int i = 0, j = 0; i < nr; i++) {
                    if (mark[i])
                        nd[i] = 1, na[i].n = 0;
                    else
                        nd[i] = dims[j], na[i] = ax[j], j++;
                }
            }
            at += 2 + k;
            break;
        }
        case OX_VIEW_SLICE: {
            if (at + 5 > len) return bad_view(n, name, "a truncated Slice");
            int64_t par[4][OX_MAX_RANK];
            int cnt[4] = {-1, -1, -1, -1};
            for (int i = 0; i < 4; i++) {
                const ox_tensor *t = pg[at + 1 + i] >= 0 ? ox_in(n, in, (int)pg[at + 1 + i]) : NULL;
                if (!t) continue;
                if (!t->data || t->rank != 1 || t->dims[0] > OX_MAX_RANK ||
                    (t->dtype != OX_INT64 && t->dtype != OX_INT32))
                    return bad_view(n, name, "a Slice parameter not known at plan time");
                cnt[i] = (int)t->dims[0];
                for (int j = 0; j < cnt[i]; j++)
                    par[i][j] = t->dtype == OX_INT64 ? ((const int64_t *)t->data)[j]
                                                     : ((const int32_t *)t->data)[j];
            }
            if (cnt[0] < 0 || cnt[1] != cnt[0] || (cnt[2] >= 0 && cnt[2] != cnt[0]) ||
                (cnt[3] >= 0 && cnt[3] != cnt[0]))
                return bad_view(n, name, "Slice parameters of different lengths");
            memcpy(nd, dims, sizeof dims);
            memcpy(na, ax, sizeof ax);
            for (int i = 0; i < rank; i++) sg->p[i] = 0, sg->q[i] = 1;
            for (int i = 0; i < cnt[0]; i++) {
                int64_t x = cnt[2] >= 0 ? par[2][i] : i, b = par[0][i], e = par[1][i];
                int64_t step = cnt[3] >= 0 ? par[3][i] : 1;
                if (x < 0) x += rank;
                if (x < 0 || x >= rank) return bad_view(n, name, "a Slice axis out of range");
                if (step == 0 || step == INT64_MIN)
                    return bad_view(n, name, "a Slice step of 0 or -2^63");
                int64_t d = dims[x], c;
                if (b < 0) b += d;
                if (e < 0) e += d;
                if (step > 0) {
                    b = b < 0 ? 0 : b > d ? d : b;
                    e = e < 0 ? 0 : e > d ? d : e;
                    c = e > b ? 1 + (e - b - 1) / step : 0;
                } else {
                    b = b < 0 ? 0 : b > d - 1 ? d - 1 : b;
                    e = e < -1 ? -1 : e > d - 1 ? d - 1 : e;
                    c = b > e ? 1 + (b - e - 1) / -step : 0;
                }
                sg->p[x] = b, sg->q[x] = step;
                nd[x] = c;
                struct ox_view_axis *a = &na[x];
                if (!affine || (c == d && step == 1)) continue; /* all of it */
                if (a->n > 1) {
                    affine = false; /* part of a merged dim */
                    continue;
                }
                int64_t s0 = a->n ? a->strides[0] : 0;
                if (c) base += b * s0;
                axis_simple(a, c, s0 * step);
            }
            at += 5;
            break;
        }
        default: return bad_view(n, name, "an unknown op");
        }
        rank = nr;
        memcpy(dims, nd, sizeof(int64_t) * (size_t)nr);
        memcpy(ax, na, sizeof(struct ox_view_axis) * (size_t)nr);
    }
    v->rank = rank;
    memcpy(v->dims, dims, sizeof(int64_t) * (size_t)rank);
    memcpy(v->ax, ax, sizeof(struct ox_view_axis) * (size_t)rank);
    v->base = base;
    v->affine = affine;
    return OX_OK;
}

int64_t ox_view_source(const struct ox_view *v, const int64_t *idx) {
    int64_t cur[OX_MAX_RANK], prev[OX_MAX_RANK];
    int rank = v->rank;
    const int64_t *dims = v->dims;
    memcpy(cur, idx, sizeof(int64_t) * (size_t)rank);
    for (int s = v->n_stages - 1; s >= 0; s--) {
        const struct ox_view_stage *sg = &v->st[s];
        int ri = sg->rank_in;
        switch (sg->op) {
        case OX_VIEW_TRANSPOSE:
            for (int i = 0; i < rank; i++) prev[sg->p[i]] = cur[i];
            break;
        case OX_VIEW_GATHER:
            for (int i = 0, j = 0; i < ri; i++)
                prev[i] = i == sg->p[0] ? (j += sg->p[2] != 0, sg->p[1]) : cur[j++];
            break;
        case OX_VIEW_SLICE:
            for (int i = 0; i < ri; i++) prev[i] = sg->p[i] + cur[i] * sg->q[i];
            break;
        default: { /* Reshape, Squeeze, Unsqueeze: the same row-major order */
            int64_t lin = 0;
            for (int i = 0; i < rank; i++) lin = lin * dims[i] + cur[i];
            for (int i = ri - 1; i >= 0; i--) {
                int64_t d = sg->dims_in[i];
                prev[i] = d ? lin % d : 0;
                lin = d ? lin / d : 0;
            }
        }
        }
        rank = ri;
        dims = sg->dims_in;
        memcpy(cur, prev, sizeof(int64_t) * (size_t)rank);
    }
    int64_t off = 0;
    for (int i = 0; i < rank; i++) off = off * v->src_dims[i] + cur[i];
    return off;
}

/* Dims and strides of the operand input t makes through its view program. */
static ox_status operand(const struct ox_node *n, const ox_tensor *const *in, int k,
                         const char *what, const char *prog, struct ox_view *v) {
    const ox_tensor *t = ox_in(n, in, k);
    if (!t) return ox_node_err(n, OX_E_INVALID, "missing input %s", what);
    return view_build(n, in, prog, t, v);
}

static bool is_float_type(ox_dtype dt) {
    return dt == OX_FLOAT || dt == OX_DOUBLE || dt == OX_FLOAT16 || dt == OX_BFLOAT16;
}

/* The factors: one element each, of a rank the operand they scale (ranks frank) already has;
 * then the scale attribute. */
static ox_status check_factors(const struct ox_node *n, const ox_tensor *const *in,
                               const int *frank, struct ox_fattn *a) {
    static const char *fnames[] = {"Q's factor", "KT's factor", "the scores' factor"};
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

/* The chain as written (a->generic): Q' . KT' by MatMul's rules (1-D operands promoted and
 * their dim dropped), + mask by Add's, Softmax along the last axis, . V' by MatMul's. */
static ox_status generic_shapes(const struct ox_node *n, const ox_tensor *const *in,
                                struct ox_fattn *a) {
    a->generic = true;
    ox_tensor t[3];
    memset(t, 0, sizeof t);
    for (int k = 0; k < 3; k++) {
        t[k].dtype = a->dtype;
        t[k].rank = a->view[k].rank;
        memcpy(t[k].dims, a->view[k].dims, sizeof(int64_t) * (size_t)t[k].rank);
    }
    ox_status s = ox_matmul_shape(n, &t[0], &t[1], &a->mm1);
    if (s) return s;
    a->s_rank = a->mm1.rank;
    memcpy(a->s_dims, a->mm1.dims, sizeof a->s_dims);
    const ox_tensor *m = ox_in(n, in, 3);
    if (m) { /* numpy broadcasting of the scores and the mask */
        int r = m->rank > a->s_rank ? m->rank : a->s_rank;
        int64_t d[OX_MAX_RANK];
        for (int i = 0; i < r; i++) {
            int si = i - (r - a->s_rank), mi = i - (r - m->rank);
            int64_t x = si >= 0 ? a->s_dims[si] : 1, y = mi >= 0 ? m->dims[mi] : 1;
            if (x != y && x != 1 && y != 1)
                return shape_err(n, "mask", m, "a shape that broadcasts with the scores");
            d[i] = x == 1 ? y : x;
        }
        a->s_rank = r;
        memcpy(a->s_dims, d, sizeof(int64_t) * (size_t)r);
        a->has_mask = true;
    }
    ox_tensor p;
    memset(&p, 0, sizeof p);
    p.dtype = a->dtype;
    p.rank = a->s_rank;
    memcpy(p.dims, a->s_dims, sizeof(int64_t) * (size_t)p.rank);
    if ((s = ox_matmul_shape(n, &p, &t[2], &a->mm2))) return s;
    if ((s = read_perm(n, "perm_y", a->mm2.rank, a->y_perm))) return s;
    a->y_rank = a->mm2.rank;
    for (int i = 0; i < a->y_rank; i++) a->y_dims[i] = a->mm2.dims[a->y_perm[i]];
    int frank[3] = {t[0].rank, t[1].rank, a->mm1.rank};
    return check_factors(n, in, frank, a);
}

ox_status ox_fattn_parse(const struct ox_node *n, const ox_tensor *const *in, struct ox_fattn *a) {
    memset(a, 0, sizeof *a);
    static const char *names[] = {"Q", "KT", "V", "mask"},
                      *progs[] = {"view_q", "view_k", "view_v"};
    int64_t dims[4][OX_MAX_RANK];
    struct ox_view_axis axs[4][OX_MAX_RANK];
    int rank[4] = {0};
    ox_status s;
    for (int k = 0; k < 3; k++) {
        struct ox_view *v = &a->view[k];
        if ((s = operand(n, in, k, names[k], progs[k], v))) return s;
        rank[k] = v->rank;
        memcpy(dims[k], v->dims, sizeof(int64_t) * (size_t)v->rank);
        memcpy(axs[k], v->ax, sizeof(struct ox_view_axis) * (size_t)v->rank);
        a->base[k] = v->base;
    }
    const ox_tensor *q = in[0];
    a->dtype = q->dtype;
    if (!is_float_type(a->dtype))
        return ox_node_err(n, OX_E_UNSUPPORTED, "Q has element type %s: expected a float type",
                           ox_dtype_name(a->dtype));
    for (int k = 1; k < 3; k++)
        if (in[k]->dtype != a->dtype)
            return ox_node_err(n, OX_E_SHAPE, "%s has element type %s: expected Q's %s", names[k],
                               ox_dtype_name(in[k]->dtype), ox_dtype_name(a->dtype));
    const ox_tensor *m = ox_in(n, in, 3);
    if (m && m->dtype != a->dtype)
        return ox_node_err(n, OX_E_SHAPE, "mask has element type %s: expected Q's %s",
                           ox_dtype_name(m->dtype), ox_dtype_name(a->dtype));
    if (rank[0] < 2 || rank[1] < 2 || rank[2] < 2) return generic_shapes(n, in, a);
    a->S = dims[0][rank[0] - 2], a->Dk = dims[0][rank[0] - 1];
    a->T = dims[1][rank[1] - 1], a->Dv = dims[2][rank[2] - 1];
    if (dims[1][rank[1] - 2] != a->Dk)
        return shape_err(n, "KT", in[1], "Q's last dim as its second-last (a MatMul)");
    if (dims[2][rank[2] - 2] != a->T)
        return shape_err(n, "V", in[2], "KT's last dim as its second-last (a MatMul)");
    if (m) {
        /* the mask's own dims, padded on the left to rank 2 */
        int pad = m->rank < 2 ? 2 - m->rank : 0;
        rank[3] = m->rank + pad;
        int64_t nat[OX_MAX_RANK];
        natural(m->rank, m->dims, nat);
        for (int i = 0; i < rank[3]; i++) {
            dims[3][i] = i < pad ? 1 : m->dims[i - pad];
            axis_simple(&axs[3][i], dims[3][i], i < pad ? 0 : nat[i - pad]);
        }
        int64_t ms = dims[3][rank[3] - 2], mt = dims[3][rank[3] - 1];
        if ((ms != 1 && ms != a->S) || (mt != 1 && mt != a->T)) return generic_shapes(n, in, a);
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
            if (x >= off && dims[k][x - off] != 1)
                a->bax[k][x] = axs[k][x - off];
            else
                a->bax[k][x].n = 0;
        int r = rank[k];
        const struct ox_view_axis *ra = &axs[k][r - 2], *ca = &axs[k][r - 1];
        a->m[k] = (struct ox_mat){dims[k][r - 2], dims[k][r - 1], ra->n ? ra->strides[0] : 0,
                                  ca->n ? ca->strides[0] : 0};
        if (k < 3)
            a->how[k] = !a->view[k].affine       ? OX_FATTN_STAGES
                        : ra->n > 1 || ca->n > 1 ? OX_FATTN_AXES
                                                 : OX_FATTN_STRIDED;
    }
    if (m) /* the mask's matrix is the scores' S x T, broadcast where its dims are 1 */
        a->m[OX_FATTN_MASK].rows = a->S, a->m[OX_FATTN_MASK].cols = a->T;
    /* the output: Transpose([batch..., S, Dv], perm_y), contiguous */
    int yr = a->brank + 2;
    int64_t yl[OX_MAX_RANK], ost[OX_MAX_RANK], lst[OX_MAX_RANK];
    if (yr > OX_MAX_RANK) return ox_node_err(n, OX_E_SHAPE, "rank %d exceeds the limit", yr);
    memcpy(yl, a->bdims, sizeof(int64_t) * (size_t)a->brank);
    yl[yr - 2] = a->S, yl[yr - 1] = a->Dv;
    if ((s = read_perm(n, "perm_y", yr, a->y_perm))) return s;
    const int64_t *p = a->y_perm;
    a->y_rank = yr;
    for (int i = 0; i < yr; i++) a->y_dims[i] = yl[p[i]];
    natural(yr, a->y_dims, ost);
    for (int i = 0; i < yr; i++) lst[p[i]] = ost[i];
    for (int x = 0; x < a->brank; x++) axis_simple(&a->bax[OX_FATTN_Y][x], a->bdims[x], lst[x]);
    a->m[OX_FATTN_Y] = (struct ox_mat){a->S, a->Dv, lst[yr - 2], lst[yr - 1]};
    int frank[3] = {rank[0], rank[1], yr};
    return check_factors(n, in, frank, a);
}

void ox_fattn_offsets(const struct ox_fattn *a, int64_t i, int64_t off[OX_FATTN_N]) {
    for (int k = 0; k < OX_FATTN_N; k++) off[k] = a->base[k];
    for (int x = a->brank - 1; x >= 0; x--) {
        int64_t d = a->bdims[x], c = d ? i % d : 0;
        i = d ? i / d : 0;
        for (int k = 0; k < OX_FATTN_N; k++) off[k] += ox_view_axis_offset(&a->bax[k][x], c);
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
