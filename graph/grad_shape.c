/* Gradient rules: tensor shape and indexing ops (graph/autograd.h says the contract).
 *
 * Ops that only move elements (Reshape, Transpose, Concat, Split, Slice, Pad, DepthToSpace)
 * send each output gradient back to the element it came from; ops that read an element more
 * than once (Gather*, Tile, Expand, Pad's reflect/edge/wrap modes) sum the gradients of its
 * copies. Scatter-adds need ScatterElements/ScatterND with reduction "add" (opset 16); below
 * that the rules build a one-hot matrix of the indices and contract it with the gradient.
 * Ops that pick distinct places (TopK, Compress, TensorScatter) scatter or gather there
 * without a reduction; Trilu, ReverseSequence and CenterCropPad map the gradient back with
 * the op itself. */
#include "graph/autograd.h"

#include "kernels/op.h"

#include <string.h>

#define END_MAX INT64_MAX /* a Slice end past any dim */

/* ---- helpers --------------------------------------------------------------------------- */

/* Axis a of a value of rank r, made non-negative; -1 when out of range. */
static int norm_axis(int64_t a, int r) {
    if (a < 0) a += r;
    return a >= 0 && a < r ? (int)a : -1;
}

/* A 1-D int64 shape assembled from constants and dims of values: constant pieces stay
 * constants, dims that are not known come from Shape at run time. */
struct shp {
    int n;
    int64_t c[2 * OX_MAX_RANK];
    int v[2 * OX_MAX_RANK], k[2 * OX_MAX_RANK];
};

static void shp_c(struct shp *s, int64_t c) {
    if (s->n >= 2 * OX_MAX_RANK) return;
    s->v[s->n] = -1;
    s->c[s->n++] = c;
}

static void shp_d(struct ox_ad *ad, struct shp *s, int v, int k) {
    int64_t d = ox_ad_dim(ad, v, k);
    if (d >= 0 || s->n >= 2 * OX_MAX_RANK) {
        shp_c(s, d);
        return;
    }
    s->v[s->n] = v;
    s->k[s->n] = k;
    s->c[s->n++] = -1;
}

static int shp_emit(struct ox_ad *ad, const struct shp *s) {
    int parts[2 * OX_MAX_RANK], np = 0;
    for (int i = 0; i < s->n;) {
        if (s->v[i] < 0) {
            int j = i;
            while (j < s->n && s->v[j] < 0) j++;
            parts[np++] = ox_ad_ints(ad, j - i, &s->c[i]);
            i = j;
        } else {
            int sh = ox_ad_shape(ad, s->v[i]);
            parts[np++] = OX_AD(ad, "Gather", sh, ox_ad_ints(ad, 1, (int64_t[]){s->k[i]}));
            i++;
        }
    }
    if (np == 0) return ox_ad_ints(ad, 0, NULL);
    if (np == 1) return parts[0];
    return ox_ad_opa(ad, "Concat", np, parts, "i:axis", (int64_t)0);
}

/* x's shape as a value (rank r known). */
static int shape_val(struct ox_ad *ad, int x, int r) {
    struct shp s = {0};
    for (int k = 0; k < r; k++) shp_d(ad, &s, x, k);
    return shp_emit(ad, &s);
}

/* Dim k of v as an int64 scalar. */
static int dim_scalar(struct ox_ad *ad, int v, int k) {
    int64_t d = ox_ad_dim(ad, v, k);
    if (d >= 0) return ox_ad_int(ad, d);
    return OX_AD(ad, "Gather", ox_ad_shape(ad, v), ox_ad_int(ad, k));
}

/* Record that r has x's dtype and rank (dims unknown). */
static void rank_info(struct ox_ad *ad, int r, int x, int rank) {
    ox_ad_set_info(ad, r, ox_ad_dtype(ad, x), rank, NULL);
}

/* Slice of x along one axis. */
static int slice1(struct ox_ad *ad, int x, int axis, int64_t start, int64_t end, int64_t step) {
    int in[5] = {x, ox_ad_ints(ad, 1, &start), ox_ad_ints(ad, 1, &end),
                 ox_ad_ints(ad, 1, (int64_t[]){axis}), step != 1 ? ox_ad_ints(ad, 1, &step) : -1};
    int r = ox_ad_op(ad, "Slice", step != 1 ? 5 : 4, in);
    rank_info(ad, r, x, ox_ad_rank(ad, x));
    return r;
}

static int concat(struct ox_ad *ad, int axis, int n, const int *parts, int like) {
    int r = ox_ad_opa(ad, "Concat", n, parts, "i:axis", (int64_t)axis);
    rank_info(ad, r, like, ox_ad_rank(ad, like));
    return r;
}

/* One-hot matrix of integer indices (any shape S, negative ones counting from the end) over
 * depth D (an int64 scalar value): shape S + [D], in the dtype of `like`. */
static int one_hot(struct ox_ad *ad, int idx, int depth, int like) {
    int wrapped = OX_AD(ad, "Mod", idx, depth);
    int col = ox_ad_unsqueeze(ad, wrapped, 1, (int64_t[]){-1});
    int iota = OX_AD(ad, "Range", ox_ad_int(ad, 0), depth, ox_ad_int(ad, 1));
    int eq = OX_AD(ad, "Equal", col, iota);
    return OX_AD(ad, "Where", eq, ox_ad_scalar_like(ad, 1.0, like),
                 ox_ad_scalar_like(ad, 0.0, like));
}

/* A permutation of r axes that swaps a and the last one (its own inverse). */
static void swap_last_perm(int r, int a, int64_t *perm) {
    for (int k = 0; k < r; k++) perm[k] = k;
    perm[a] = r - 1;
    perm[r - 1] = a;
}

/* ---- reshaping ------------------------------------------------------------------------- */

/* Reshape, Flatten, Squeeze, Unsqueeze: the gradient under the input's shape. */
ox_status ox_grad_reshape(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    if (ox_ad_wants(ad, n, 0)) gx[0] = ox_ad_reshape_like(ad, gy[0], n->inputs[0]);
    return OX_OK;
}

/* Expand: flagged OX_GRAD_UNBROADCAST, so the walker sums gy back to x's shape. */
ox_status ox_grad_expand(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    if (ox_ad_wants(ad, n, 0)) gx[0] = gy[0];
    return OX_OK;
}

/* Transpose: the inverse permutation (default: reversed axes). */
ox_status ox_grad_transpose(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    int x = n->inputs[0], r = ox_ad_rank(ad, x);
    const struct ox_attr *p = ox_node_attr(n, "perm");
    if (r < 0 && p && p->type == OX_ATTR_INTS) r = p->n;
    if (r < 0) return ox_ad_fail(ad, n, OX_E_UNSUPPORTED, "Transpose needs an input of known rank");
    int64_t perm[OX_MAX_RANK], inv[OX_MAX_RANK];
    for (int k = 0; k < r; k++) perm[k] = r - 1 - k;
    if (p && p->type == OX_ATTR_INTS) {
        if (p->n != r)
            return ox_ad_fail(ad, n, OX_E_INVALID, "perm has %d axes for rank %d", p->n, r);
        for (int k = 0; k < r; k++) {
            int a = norm_axis(p->ints[k], r);
            if (a < 0) return ox_ad_fail(ad, n, OX_E_INVALID, "perm[%d] is out of range", k);
            perm[k] = a;
        }
    }
    for (int k = 0; k < r; k++) inv[perm[k]] = k;
    gx[0] = ox_ad_transpose(ad, gy[0], r, inv);
    return OX_OK;
}

/* Concat: Split of the gradient at the inputs' sizes along the axis. */
ox_status ox_grad_concat(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    int r = ox_ad_rank(ad, n->inputs[0]);
    int a = norm_axis(ox_attr_int(n, "axis", 0), r);
    if (r < 0 || a < 0)
        return ox_ad_fail(ad, n, OX_E_UNSUPPORTED, "Concat needs inputs of known rank and an axis");
    if (n->n_inputs == 1) {
        gx[0] = gy[0];
        return OX_OK;
    }
    struct shp s = {0};
    int sizes = -1;
    if (n->n_inputs <= 2 * OX_MAX_RANK) {
        for (int i = 0; i < n->n_inputs; i++) shp_d(ad, &s, n->inputs[i], a);
        sizes = shp_emit(ad, &s);
    } else {
        int parts[256];
        for (int i = 0; i < n->n_inputs; i++) {
            struct shp one = {0};
            shp_d(ad, &one, n->inputs[i], a);
            parts[i] = shp_emit(ad, &one);
        }
        sizes = ox_ad_opa(ad, "Concat", n->n_inputs, parts, "i:axis", (int64_t)0);
    }
    int outs[256];
    struct ox_node *nd = ox_ad_node(ad, "Split", 2, (int[]){gy[0], sizes}, n->n_inputs, outs);
    if (!nd || ox_ad_set_attr(ad, nd, "i:axis", (int64_t)a)) return OX_OK;
    for (int i = 0; i < n->n_inputs; i++)
        if (ox_ad_wants(ad, n, i)) gx[i] = outs[i];
    return OX_OK;
}

/* Split: Concat of the outputs' gradients (zeros for outputs no gradient reaches). */
ox_status ox_grad_split(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    int x = n->inputs[0], r = ox_ad_rank(ad, x);
    int a = norm_axis(ox_attr_int(n, "axis", 0), r);
    if (r < 0 || a < 0)
        return ox_ad_fail(ad, n, OX_E_UNSUPPORTED,
                          "Split needs an input of known rank and an axis");
    if (n->n_outputs == 1) {
        gx[0] = gy[0];
        return OX_OK;
    }
    int parts[64];
    for (int j = 0; j < n->n_outputs; j++) {
        if (n->outputs[j] < 0)
            return ox_ad_fail(ad, n, OX_E_UNSUPPORTED, "Split output %d is omitted", j);
        parts[j] = gy[j] >= 0 ? gy[j] : ox_ad_zeros_like(ad, n->outputs[j]);
    }
    gx[0] = concat(ad, a, n->n_outputs, parts, x);
    return OX_OK;
}

/* ---- slicing and padding --------------------------------------------------------------- */

/* Step-1 Slice with constant parameters of an input of known shape: Pad of the gradient. */
static bool slice_as_pad(struct ox_ad *ad, const struct ox_node *n, int g, int *out) {
    int x = n->inputs[0], r = ox_ad_rank(ad, x);
    if (r < 0 || !ox_ad_static(ad, x)) return false;
    int64_t st[OX_MAX_RANK], en[OX_MAX_RANK], ax[OX_MAX_RANK], sp[OX_MAX_RANK];
    int ns, ne, na = 0, np = 0;
    if (!ox_ad_const_ints(ad, n->inputs[1], OX_MAX_RANK, st, &ns) ||
        !ox_ad_const_ints(ad, n->inputs[2], OX_MAX_RANK, en, &ne) || ns != ne)
        return false;
    if (n->n_inputs > 3 && n->inputs[3] >= 0 &&
        !ox_ad_const_ints(ad, n->inputs[3], OX_MAX_RANK, ax, &na))
        return false;
    if (n->n_inputs > 4 && n->inputs[4] >= 0 &&
        !ox_ad_const_ints(ad, n->inputs[4], OX_MAX_RANK, sp, &np))
        return false;
    if ((na && na != ns) || (np && np != ns)) return false;
    int64_t pads[2 * OX_MAX_RANK] = {0};
    bool seen[OX_MAX_RANK] = {false};
    for (int i = 0; i < ns; i++) {
        int a = norm_axis(na ? ax[i] : i, r);
        if (a < 0 || seen[a] || (np && sp[i] != 1)) return false;
        seen[a] = true;
        int64_t d = ox_ad_dim(ad, x, a);
        int64_t b = st[i] < 0 ? st[i] + d : st[i],
                e = en[i] < 0 ? (en[i] < -d ? 0 : en[i] + d) : en[i];
        b = b < 0 ? 0 : b > d ? d : b;
        e = e < b ? b : e > d ? d : e;
        pads[a] = b;
        pads[r + a] = d - e;
    }
    int p = ox_ad_ints(ad, 2 * r, pads);
    *out = OX_AD(ad, "Pad", g, p);
    return true;
}

/* Slice: the gradient scattered into zeros at the places the slice read. In general (any
 * steps, parameters computed at run time) the same Slice applied to the flat positions of x
 * gives them: ScatterElements of the flat gradient there (the places are distinct). */
ox_status ox_grad_slice(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    int x = n->inputs[0], r = ox_ad_rank(ad, x);
    if (slice_as_pad(ad, n, gy[0], &gx[0])) return OX_OK;
    if (r < 0) return ox_ad_fail(ad, n, OX_E_UNSUPPORTED, "Slice needs an input of known rank");
    int size = OX_AD(ad, "Size", x);
    int iota = OX_AD(ad, "Range", ox_ad_int(ad, 0), size, ox_ad_int(ad, 1));
    int pos = OX_AD(ad, "Reshape", iota, shape_val(ad, x, r));
    int in[5] = {pos, -1, -1, -1, -1};
    for (int i = 1; i < n->n_inputs && i < 5; i++) in[i] = n->inputs[i];
    int picked = ox_ad_op(ad, "Slice", n->n_inputs < 5 ? n->n_inputs : 5, in);
    int flat = ox_ad_ints(ad, 1, (int64_t[]){-1});
    int where = OX_AD(ad, "Reshape", picked, flat);
    int g = OX_AD(ad, "Reshape", gy[0], flat);
    int zeros = OX_AD(ad, "Reshape", ox_ad_zeros_like(ad, x), flat);
    int s = ox_ad_opa(ad, "ScatterElements", 3, (int[]){zeros, where, g}, "i:axis", (int64_t)0);
    gx[0] = ox_ad_reshape_like(ad, s, x);
    return OX_OK;
}

/* Pad mode reflect/edge/wrap along axis k by b before and e after (both >= 0): the gradient
 * g of the padded tensor folded back onto the L elements of x along k. */
static int unpad_axis(struct ox_ad *ad, int g, int k, int64_t b, int64_t e, int mode) {
    int gb = b ? slice1(ad, g, k, 0, b, 1) : -1;
    int ge = e ? slice1(ad, g, k, -e, END_MAX, 1) : -1;
    int m = slice1(ad, g, k, b, e ? -e : END_MAX, 1);
    if (mode == 'r') {
        /* y[j] = x[b - j] before, y[b + L + j] = x[L - 2 - j] after */
        if (b) {
            int flip = slice1(ad, gb, k, -1, INT64_MIN, -1);
            int mid = ox_ad_add(ad, slice1(ad, m, k, 1, b + 1, 1), flip);
            int parts[3] = {slice1(ad, m, k, 0, 1, 1), mid, slice1(ad, m, k, b + 1, END_MAX, 1)};
            m = concat(ad, k, 3, parts, g);
        }
        if (e) {
            int flip = slice1(ad, ge, k, -1, INT64_MIN, -1);
            int mid = ox_ad_add(ad, slice1(ad, m, k, -(e + 1), -1, 1), flip);
            int parts[3] = {slice1(ad, m, k, 0, -(e + 1), 1), mid,
                            slice1(ad, m, k, -1, END_MAX, 1)};
            m = concat(ad, k, 3, parts, g);
        }
    } else if (mode == 'e') {
        /* the first and last elements are repeated */
        if (b) {
            int sum = ox_ad_reduce(ad, "ReduceSum", gb, 1, (int64_t[]){k}, true);
            int parts[2] = {ox_ad_add(ad, slice1(ad, m, k, 0, 1, 1), sum),
                            slice1(ad, m, k, 1, END_MAX, 1)};
            m = concat(ad, k, 2, parts, g);
        }
        if (e) {
            int sum = ox_ad_reduce(ad, "ReduceSum", ge, 1, (int64_t[]){k}, true);
            int parts[2] = {slice1(ad, m, k, 0, -1, 1),
                            ox_ad_add(ad, slice1(ad, m, k, -1, END_MAX, 1), sum)};
            m = concat(ad, k, 2, parts, g);
        }
    } else {
        /* wrap: y[j] = x[L - b + j] before, y[b + L + j] = x[j] after */
        if (b) {
            int parts[2] = {slice1(ad, m, k, 0, -b, 1),
                            ox_ad_add(ad, slice1(ad, m, k, -b, END_MAX, 1), gb)};
            m = concat(ad, k, 2, parts, g);
        }
        if (e) {
            int parts[2] = {ox_ad_add(ad, slice1(ad, m, k, 0, e, 1), ge),
                            slice1(ad, m, k, e, END_MAX, 1)};
            m = concat(ad, k, 2, parts, g);
        }
    }
    return m;
}

/* Pad. Constant mode: the gradient of x is the slice of gy that x landed in (negative pads
 * crop x: their places get zeros back), and the pad value's is the sum of the rest of gy.
 * Reflect, edge and wrap modes: each axis folds its padding back onto x (unpad_axis). */
ox_status ox_grad_pad(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    int x = n->inputs[0], r = ox_ad_rank(ad, x);
    if (r < 0) return ox_ad_fail(ad, n, OX_E_UNSUPPORTED, "Pad needs an input of known rank");
    const char *mode = ox_attr_str(n, "mode", "constant");
    int64_t pads[2 * OX_MAX_RANK], axes[OX_MAX_RANK];
    int np, na = r;
    if (n->n_inputs < 2 || !ox_ad_const_ints(ad, n->inputs[1], 2 * OX_MAX_RANK, pads, &np))
        return ox_ad_fail(ad, n, OX_E_UNSUPPORTED, "Pad needs constant pads");
    if (n->n_inputs > 3 && n->inputs[3] >= 0) {
        if (!ox_ad_const_ints(ad, n->inputs[3], OX_MAX_RANK, axes, &na))
            return ox_ad_fail(ad, n, OX_E_UNSUPPORTED, "Pad needs constant axes");
    } else {
        for (int k = 0; k < r; k++) axes[k] = k;
    }
    if (np != 2 * na) return ox_ad_fail(ad, n, OX_E_INVALID, "Pad has %d pads for %d axes", np, na);
    int64_t b[OX_MAX_RANK] = {0}, e[OX_MAX_RANK] = {0};
    for (int i = 0; i < na; i++) {
        int a = norm_axis(axes[i], r);
        if (a < 0)
            return ox_ad_fail(ad, n, OX_E_INVALID, "Pad axis %lld is out of range",
                              (long long)axes[i]);
        b[a] = pads[i];
        e[a] = pads[na + i];
    }
    if (strcmp(mode, "constant") == 0) {
        int64_t st[OX_MAX_RANK], en[OX_MAX_RANK], ax[OX_MAX_RANK], back[2 * OX_MAX_RANK] = {0};
        int ns = 0;
        bool crop = false;
        for (int k = 0; k < r; k++) {
            if (b[k] > 0 || e[k] > 0) {
                st[ns] = b[k] > 0 ? b[k] : 0;
                en[ns] = e[k] > 0 ? -e[k] : END_MAX;
                ax[ns++] = k;
            }
            back[k] = b[k] < 0 ? -b[k] : 0;
            back[r + k] = e[k] < 0 ? -e[k] : 0;
            crop |= b[k] < 0 || e[k] < 0;
        }
        int inner = gy[0];
        if (ns) {
            int in[4] = {gy[0], ox_ad_ints(ad, ns, st), ox_ad_ints(ad, ns, en),
                         ox_ad_ints(ad, ns, ax)};
            inner = ox_ad_op(ad, "Slice", 4, in);
            rank_info(ad, inner, x, r);
        }
        if (ox_ad_wants(ad, n, 0))
            gx[0] = crop ? OX_AD(ad, "Pad", inner, ox_ad_ints(ad, 2 * r, back)) : inner;
        if (ox_ad_wants(ad, n, 2)) {
            int all = ox_ad_reduce(ad, "ReduceSum", gy[0], 0, NULL, false);
            int in = ox_ad_reduce(ad, "ReduceSum", inner, 0, NULL, false);
            gx[2] = ox_ad_reshape_like(ad, ox_ad_sub(ad, all, in), n->inputs[2]);
        }
        return OX_OK;
    }
    int m = strcmp(mode, "reflect") == 0 ? 'r'
            : strcmp(mode, "edge") == 0  ? 'e'
            : strcmp(mode, "wrap") == 0  ? 'w'
                                         : 0;
    if (!m) return ox_ad_fail(ad, n, OX_E_UNSUPPORTED, "Pad mode '%s' has no gradient", mode);
    int g = gy[0];
    for (int k = 0; k < r; k++) {
        if (!b[k] && !e[k]) continue;
        int64_t L = ox_ad_dim(ad, x, k);
        if (b[k] < 0 || e[k] < 0)
            return ox_ad_fail(ad, n, OX_E_UNSUPPORTED, "Pad mode '%s' with negative pads", mode);
        if (L >= 0 && ((m == 'r' && (b[k] >= L || e[k] >= L)) || (m == 'e' && L == 0) ||
                       (m == 'w' && (b[k] > L || e[k] > L))))
            return ox_ad_fail(ad, n, OX_E_UNSUPPORTED,
                              "Pad mode '%s': pads %lld, %lld on axis %d of size %lld", mode,
                              (long long)b[k], (long long)e[k], k, (long long)L);
        g = unpad_axis(ad, g, k, b[k], e[k], m);
    }
    gx[0] = g;
    return OX_OK;
}

/* Tile: gy viewed as [r0, d0, r1, d1, ...] summed over the repeat axes. */
ox_status ox_grad_tile(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    int x = n->inputs[0], r = ox_ad_rank(ad, x);
    int64_t reps[OX_MAX_RANK], red[OX_MAX_RANK];
    int nr, n_red = 0;
    if (r < 0) return ox_ad_fail(ad, n, OX_E_UNSUPPORTED, "Tile needs an input of known rank");
    if (!ox_ad_const_ints(ad, n->inputs[1], OX_MAX_RANK, reps, &nr) || nr != r)
        return ox_ad_fail(ad, n, OX_E_UNSUPPORTED, "Tile needs %d constant repeats", r);
    struct shp s = {0};
    for (int k = 0; k < r; k++) {
        if (reps[k] != 1) {
            red[n_red++] = s.n;
            shp_c(&s, reps[k]);
        }
        shp_d(ad, &s, x, k);
    }
    if (!n_red) {
        gx[0] = gy[0];
        return OX_OK;
    }
    int g = OX_AD(ad, "Reshape", gy[0], shp_emit(ad, &s));
    rank_info(ad, g, x, s.n);
    gx[0] = ox_ad_reduce(ad, "ReduceSum", g, n_red, red, false);
    return OX_OK;
}

/* DepthToSpace: in DCR mode SpaceToDepth undoes it; in CRD mode, gy [N, C, H*b, W*b] is
 * viewed as [N, C, H, b, W, b] and its blocks moved back to the channels. */
ox_status ox_grad_depth_to_space(struct ox_ad *ad, const struct ox_node *n, const int *gy,
                                 int *gx) {
    int x = n->inputs[0];
    int64_t bs = ox_attr_int(n, "blocksize", 0);
    if (bs <= 0) return ox_ad_fail(ad, n, OX_E_INVALID, "DepthToSpace needs a blocksize");
    if (strcmp(ox_attr_str(n, "mode", "DCR"), "CRD") != 0) {
        gx[0] = ox_ad_opa(ad, "SpaceToDepth", 1, &gy[0], "i:blocksize", bs);
        return OX_OK;
    }
    struct shp s = {0};
    shp_c(&s, 0);
    shp_c(&s, 0);
    shp_c(&s, -1);
    shp_c(&s, bs);
    shp_d(ad, &s, x, 3);
    shp_c(&s, bs);
    int g = OX_AD(ad, "Reshape", gy[0], shp_emit(ad, &s));
    rank_info(ad, g, x, 6);
    g = ox_ad_transpose(ad, g, 6, (int64_t[]){0, 1, 3, 5, 2, 4});
    gx[0] = ox_ad_reshape_like(ad, g, x);
    return OX_OK;
}

/* SpaceToDepth: DepthToSpace in DCR mode undoes it. */
ox_status ox_grad_space_to_depth(struct ox_ad *ad, const struct ox_node *n, const int *gy,
                                 int *gx) {
    int64_t bs = ox_attr_int(n, "blocksize", 0);
    if (bs <= 0) return ox_ad_fail(ad, n, OX_E_INVALID, "SpaceToDepth needs a blocksize");
    gx[0] = ox_ad_opa(ad, "DepthToSpace", 1, &gy[0], "i:blocksize s:mode", bs, "DCR");
    return OX_OK;
}

/* ---- gathering ------------------------------------------------------------------------- */

/* Gather along axis a: gy viewed as x's shape with the indices flattened at a, then
 * scatter-added at the indices (opset 16), or contracted with their one-hot matrix. */
ox_status ox_grad_gather(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    int x = n->inputs[0], idx = n->inputs[1], r = ox_ad_rank(ad, x);
    int a = norm_axis(ox_attr_int(n, "axis", 0), r);
    if (r < 0 || a < 0)
        return ox_ad_fail(ad, n, OX_E_UNSUPPORTED,
                          "Gather needs an input of known rank and an axis");
    if (!ox_ad_wants(ad, n, 0)) return OX_OK;
    struct shp s = {0};
    for (int k = 0; k < r; k++) {
        if (k == a)
            shp_c(&s, -1);
        else
            shp_d(ad, &s, x, k);
    }
    int g = OX_AD(ad, "Reshape", gy[0], shp_emit(ad, &s));
    rank_info(ad, g, x, r);
    if (ox_ad_opset(ad) >= 16) {
        int64_t col[OX_MAX_RANK];
        for (int k = 0; k < r; k++) col[k] = k == a ? -1 : 1;
        int where = OX_AD(ad, "Reshape", idx, ox_ad_ints(ad, r, col));
        where = OX_AD(ad, "Expand", where, ox_ad_shape(ad, g));
        gx[0] = ox_ad_opa(ad, "ScatterElements", 3, (int[]){ox_ad_zeros_like(ad, x), where, g},
                          "i:axis s:reduction", (int64_t)a, "add");
        return OX_OK;
    }
    int64_t perm[OX_MAX_RANK];
    swap_last_perm(r, a, perm);
    if (a != r - 1) g = ox_ad_transpose(ad, g, r, perm);
    int flat = OX_AD(ad, "Reshape", idx, ox_ad_ints(ad, 1, (int64_t[]){-1}));
    int oh = one_hot(ad, flat, dim_scalar(ad, x, a), g);
    g = OX_AD(ad, "MatMul", g, oh);
    rank_info(ad, g, x, r);
    gx[0] = a != r - 1 ? ox_ad_transpose(ad, g, r, perm) : g;
    return OX_OK;
}

/* GatherElements: ScatterElements with reduction add (opset 16); below, along the axis moved
 * last, gy [..., J] times the one-hot [..., J, D] of the indices, padded up to x's shape
 * where the indices are smaller than x on the other axes. */
ox_status ox_grad_gather_elements(struct ox_ad *ad, const struct ox_node *n, const int *gy,
                                  int *gx) {
    int x = n->inputs[0], idx = n->inputs[1], r = ox_ad_rank(ad, x);
    int a = norm_axis(ox_attr_int(n, "axis", 0), r);
    if (r < 0 || a < 0)
        return ox_ad_fail(ad, n, OX_E_UNSUPPORTED,
                          "GatherElements needs an input of known rank and an axis");
    if (!ox_ad_wants(ad, n, 0)) return OX_OK;
    if (ox_ad_opset(ad) >= 16) {
        gx[0] = ox_ad_opa(ad, "ScatterElements", 3, (int[]){ox_ad_zeros_like(ad, x), idx, gy[0]},
                          "i:axis s:reduction", (int64_t)a, "add");
        return OX_OK;
    }
    int64_t perm[OX_MAX_RANK];
    swap_last_perm(r, a, perm);
    int it = idx, g = gy[0];
    if (a != r - 1) {
        it = ox_ad_transpose(ad, idx, r, perm);
        g = ox_ad_transpose(ad, g, r, perm);
    }
    int oh = one_hot(ad, it, dim_scalar(ad, x, a), g);
    g = ox_ad_unsqueeze(ad, g, 1, (int64_t[]){-2});
    g = ox_ad_squeeze(ad, OX_AD(ad, "MatMul", g, oh), 1, (int64_t[]){-2});
    rank_info(ad, g, x, r);
    if (a != r - 1) g = ox_ad_transpose(ad, g, r, perm);
    bool same = true;
    for (int k = 0; k < r; k++)
        same &=
            k == a || (ox_ad_dim(ad, idx, k) >= 0 && ox_ad_dim(ad, idx, k) == ox_ad_dim(ad, x, k));
    if (!same) {
        int64_t zeros[OX_MAX_RANK] = {0};
        int rest = OX_AD(ad, "Sub", shape_val(ad, x, r), ox_ad_shape(ad, g));
        int pads = ox_ad_opa(ad, "Concat", 2, (int[]){ox_ad_ints(ad, r, zeros), rest}, "i:axis",
                             (int64_t)0);
        g = OX_AD(ad, "Pad", g, pads);
    }
    gx[0] = g;
    return OX_OK;
}

/* GatherND with batch_dims b: idx [B..., Q..., k] reads x [B..., X_0..X_k-1, T...]. Opset 16:
 * ScatterND with reduction add, the batch coordinates put in front of the indices when b > 0.
 * Below: the flat position of each index among the X_0 * ... * X_k-1 rows (x of known
 * shape), one-hot, contracted with gy per batch. */
ox_status ox_grad_gather_nd(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    int x = n->inputs[0], idx = n->inputs[1], r = ox_ad_rank(ad, x), q = ox_ad_rank(ad, idx);
    int64_t b = ox_attr_int(n, "batch_dims", 0), k = q > 0 ? ox_ad_dim(ad, idx, q - 1) : -1;
    if (r < 0 || q < 1 || k < 0 || b < 0 || b + k > r || b >= q)
        return ox_ad_fail(ad, n, OX_E_UNSUPPORTED,
                          "GatherND needs inputs of known rank and a known index depth");
    if (!ox_ad_wants(ad, n, 0)) return OX_OK;
    if (ox_ad_opset(ad) >= 16) {
        int where = idx;
        if (b > 0) {
            /* coordinates of the batch: c_j [B..., Q..., 1] = j-th batch position */
            int parts[OX_MAX_RANK + 1];
            int lead = OX_AD(ad, "Slice", ox_ad_shape(ad, idx), ox_ad_ints(ad, 1, (int64_t[]){0}),
                             ox_ad_ints(ad, 1, (int64_t[]){-1}));
            for (int j = 0; j < b; j++) {
                int64_t col[OX_MAX_RANK];
                for (int t = 0; t < q - 1; t++) col[t] = t == j ? -1 : 1;
                int iota =
                    OX_AD(ad, "Range", ox_ad_int(ad, 0), dim_scalar(ad, idx, j), ox_ad_int(ad, 1));
                int c = OX_AD(ad, "Reshape", iota, ox_ad_ints(ad, q - 1, col));
                c = OX_AD(ad, "Expand", c, lead);
                ox_ad_set_info(ad, c, OX_INT64, q - 1, NULL);
                parts[j] = ox_ad_unsqueeze(ad, c, 1, (int64_t[]){-1});
            }
            parts[b] = idx;
            where = ox_ad_opa(ad, "Concat", (int)b + 1, parts, "i:axis", (int64_t)-1);
        }
        gx[0] = ox_ad_opa(ad, "ScatterND", 3, (int[]){ox_ad_zeros_like(ad, x), where, gy[0]},
                          "s:reduction", "add");
        return OX_OK;
    }
    if (!ox_ad_static(ad, x))
        return ox_ad_fail(ad, n, OX_E_UNSUPPORTED,
                          "GatherND below opset 16 needs an input of known shape");
    int64_t dims[OX_MAX_RANK], strides[OX_MAX_RANK], rows = 1, batch = 1, tail = 1;
    for (int t = (int)(b + k) - 1; t >= b; t--) {
        dims[t - b] = ox_ad_dim(ad, x, t);
        strides[t - b] = rows;
        rows *= dims[t - b];
    }
    for (int t = 0; t < b; t++) batch *= ox_ad_dim(ad, x, t);
    for (int t = (int)(b + k); t < r; t++) tail *= ox_ad_dim(ad, x, t);
    int flat = ox_ad_int(ad, 0);
    if (k > 0) {
        int wrapped = OX_AD(ad, "Mod", idx, ox_ad_ints(ad, (int)k, dims));
        int scaled = OX_AD(ad, "Mul", wrapped, ox_ad_ints(ad, (int)k, strides));
        ox_ad_set_info(ad, scaled, OX_INT64, q, NULL);
        flat = ox_ad_reduce(ad, "ReduceSum", scaled, 1, (int64_t[]){-1}, false);
    } else {
        /* k == 0: every index reads the whole row block */
        flat =
            OX_AD(ad, "Mul", ox_ad_reduce(ad, "ReduceSum", idx, 1, (int64_t[]){-1}, false), flat);
    }
    int oh = one_hot(ad, flat, ox_ad_int(ad, rows), gy[0]); /* [B..., Q..., rows] */
    oh = OX_AD(ad, "Reshape", oh, ox_ad_ints(ad, 3, (int64_t[]){batch, -1, rows}));
    ox_ad_set_info(ad, oh, ox_ad_dtype(ad, gy[0]), 3, NULL);
    oh = ox_ad_transpose(ad, oh, 3, (int64_t[]){0, 2, 1});
    int g = OX_AD(ad, "Reshape", gy[0], ox_ad_ints(ad, 3, (int64_t[]){batch, -1, tail}));
    gx[0] = ox_ad_reshape_like(ad, OX_AD(ad, "MatMul", oh, g), x);
    return OX_OK;
}

/* ---- scattering ------------------------------------------------------------------------ */

/* ScatterElements / ScatterND with reduction none: data's gradient is gy with the written
 * places zeroed, the updates' is gy gathered there; with reduction add, data's is gy. */
static ox_status grad_scatter(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx,
                              bool nd) {
    const char *red = n->opset >= 16 ? ox_attr_str(n, "reduction", "none") : "none";
    bool add = strcmp(red, "add") == 0;
    if (!add && strcmp(red, "none") != 0)
        return ox_ad_fail(ad, n, OX_E_UNSUPPORTED, "%s with reduction '%s' has no gradient",
                          n->op_type, red);
    int idx = n->inputs[1], u = n->inputs[2];
    int64_t axis = ox_attr_int(n, "axis", 0);
    if (ox_ad_wants(ad, n, 0)) {
        if (add) {
            gx[0] = gy[0];
        } else {
            int in[3] = {gy[0], idx, ox_ad_zeros_like(ad, u)};
            gx[0] = nd ? ox_ad_op(ad, "ScatterND", 3, in)
                       : ox_ad_opa(ad, "ScatterElements", 3, in, "i:axis", axis);
        }
    }
    if (ox_ad_wants(ad, n, 2))
        gx[2] = nd ? OX_AD(ad, "GatherND", gy[0], idx)
                   : ox_ad_opa(ad, "GatherElements", 2, (int[]){gy[0], idx}, "i:axis", axis);
    return OX_OK;
}

ox_status ox_grad_scatter_elements(struct ox_ad *ad, const struct ox_node *n, const int *gy,
                                   int *gx) {
    return grad_scatter(ad, n, gy, gx, false);
}

ox_status ox_grad_scatter_nd(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    return grad_scatter(ad, n, gy, gx, true);
}

/* ---- selecting ------------------------------------------------------------------------- */

/* TopK: the values' gradient goes back to the places named by the Indices output (distinct
 * within a slice, so a plain ScatterElements). When the node leaves that output out, a TopK
 * of the same inputs and attributes finds the places again. */
ox_status ox_grad_topk(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    int x = n->inputs[0], r = ox_ad_rank(ad, x);
    int a = norm_axis(ox_attr_int(n, "axis", -1), r);
    if (r < 0 || a < 0)
        return ox_ad_fail(ad, n, OX_E_UNSUPPORTED, "TopK needs an input of known rank and an axis");
    if (gy[0] < 0 || !ox_ad_wants(ad, n, 0)) return OX_OK;
    int idx = n->n_outputs > 1 ? n->outputs[1] : -1;
    if (idx < 0) {
        int out[2];
        struct ox_node *nd = ox_ad_node(ad, "TopK", n->n_inputs, n->inputs, 2, out);
        if (!nd) return OX_OK;
        ox_ad_set_attr(ad, nd, "i:axis i:largest i:sorted", (int64_t)a,
                       ox_attr_int(n, "largest", 1), ox_attr_int(n, "sorted", 1));
        rank_info(ad, out[0], x, r);
        ox_ad_set_info(ad, out[1], OX_INT64, r, NULL);
        idx = out[1];
    }
    gx[0] = ox_ad_opa(ad, "ScatterElements", 3, (int[]){ox_ad_zeros_like(ad, x), idx, gy[0]},
                      "i:axis", (int64_t)a);
    return OX_OK;
}

/* Compress: the kept slices (NonZero of the condition) scattered back into zeros, along
 * `axis`, or into x flattened when the node has none. */
ox_status ox_grad_compress(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    int x = n->inputs[0], r = ox_ad_rank(ad, x);
    if (!ox_ad_wants(ad, n, 0)) return OX_OK;
    int nz = OX_AD(ad, "NonZero", n->inputs[1]);
    int idx = OX_AD(ad, "Reshape", nz, ox_ad_ints(ad, 1, (int64_t[]){-1}));
    ox_ad_set_info(ad, idx, OX_INT64, 1, NULL);
    if (!ox_node_attr(n, "axis")) {
        int z = OX_AD(ad, "Reshape", ox_ad_zeros_like(ad, x), ox_ad_ints(ad, 1, (int64_t[]){-1}));
        rank_info(ad, z, x, 1);
        int s = ox_ad_opa(ad, "ScatterElements", 3, (int[]){z, idx, gy[0]}, "i:axis", (int64_t)0);
        rank_info(ad, s, x, 1);
        gx[0] = ox_ad_reshape_like(ad, s, x);
        return OX_OK;
    }
    int a = norm_axis(ox_attr_int(n, "axis", 0), r);
    if (r < 0 || a < 0)
        return ox_ad_fail(ad, n, OX_E_UNSUPPORTED, "Compress needs an input of known rank");
    int64_t col[OX_MAX_RANK];
    for (int k = 0; k < r; k++) col[k] = k == a ? -1 : 1;
    int where = OX_AD(ad, "Reshape", idx, ox_ad_ints(ad, r, col));
    where = OX_AD(ad, "Expand", where, ox_ad_shape(ad, gy[0]));
    ox_ad_set_info(ad, where, OX_INT64, r, NULL);
    gx[0] = ox_ad_opa(ad, "ScatterElements", 3, (int[]){ox_ad_zeros_like(ad, x), where, gy[0]},
                      "i:axis", (int64_t)a);
    return OX_OK;
}

/* OneHot: the output holds values[1] (on) at the one-hot places and values[0] (off) at the
 * others, so d(on) = sum(gy * mask), d(off) = sum(gy) - d(on), mask = OneHot with [0, 1]. */
ox_status ox_grad_onehot(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    int vals = n->inputs[2];
    if (!ox_ad_wants(ad, n, 2)) return OX_OK;
    int bits = ox_ad_cast_like(ad, ox_ad_ints(ad, 2, (int64_t[]){0, 1}), vals);
    int mask = ox_ad_opa(ad, "OneHot", 3, (int[]){n->inputs[0], n->inputs[1], bits}, "i:axis",
                         ox_attr_int(n, "axis", -1));
    rank_info(ad, mask, gy[0], ox_ad_rank(ad, gy[0]));
    int on = ox_ad_reduce(ad, "ReduceSum", ox_ad_mul(ad, gy[0], mask), 0, NULL, false);
    int off = ox_ad_sub(ad, ox_ad_reduce(ad, "ReduceSum", gy[0], 0, NULL, false), on);
    int parts[2] = {ox_ad_unsqueeze(ad, off, 1, (int64_t[]){0}),
                    ox_ad_unsqueeze(ad, on, 1, (int64_t[]){0})};
    gx[2] = ox_ad_reshape_like(ad, concat(ad, 0, 2, parts, parts[0]), vals);
    return OX_OK;
}

/* ---- triangles, reversals, crops ------------------------------------------------------- */

/* Trilu: keeps a triangle, so the gradient is the same triangle of gy. */
ox_status ox_grad_trilu(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    if (!ox_ad_wants(ad, n, 0)) return OX_OK;
    int in[2] = {gy[0], n->n_inputs > 1 ? n->inputs[1] : -1};
    gx[0] = ox_ad_opa(ad, "Trilu", in[1] >= 0 ? 2 : 1, in, "i:upper", ox_attr_int(n, "upper", 1));
    return OX_OK;
}

/* ReverseSequence: reversing each sequence's prefix is its own inverse. */
ox_status ox_grad_reverse_sequence(struct ox_ad *ad, const struct ox_node *n, const int *gy,
                                   int *gx) {
    if (!ox_ad_wants(ad, n, 0)) return OX_OK;
    gx[0] = ox_ad_opa(ad, "ReverseSequence", 2, (int[]){gy[0], n->inputs[1]},
                      "i:batch_axis i:time_axis", ox_attr_int(n, "batch_axis", 1),
                      ox_attr_int(n, "time_axis", 0));
    return OX_OK;
}

/* CenterCropPad: cropping drops (in - out) / 2 (rounded down) at the start where padding puts
 * (out - in) / 2, so CenterCropPad back to x's extents is the adjoint. */
ox_status ox_grad_center_crop_pad(struct ox_ad *ad, const struct ox_node *n, const int *gy,
                                  int *gx) {
    int x = n->inputs[0];
    if (!ox_ad_wants(ad, n, 0)) return OX_OK;
    const int64_t *axes;
    int n_axes = ox_attr_ints(n, "axes", &axes);
    int shape = ox_ad_shape(ad, x);
    if (n_axes >= 0) shape = OX_AD(ad, "Gather", shape, ox_ad_ints(ad, n_axes, axes));
    struct ox_node *nd = ox_ad_node(ad, "CenterCropPad", 2, (int[]){gy[0], shape}, 1, &gx[0]);
    if (nd && n_axes >= 0) ox_ad_set_attr(ad, nd, "I:axes", n_axes, axes);
    return OX_OK;
}

/* TensorScatter (opset 24): present = past_cache with `update` written along `axis` at
 * positions write_indices[b] + j (0 + j without them; modulo the cache length in circular
 * mode), distinct within a batch. dpast: gy with those places zeroed (a TensorScatter of
 * zeros); dupdate: gy read there (GatherElements). */
ox_status ox_grad_tensor_scatter(struct ox_ad *ad, const struct ox_node *n, const int *gy,
                                 int *gx) {
    int c = n->inputs[0], u = n->inputs[1], g = gy[0], r = ox_ad_rank(ad, c);
    int wi = n->n_inputs > 2 ? n->inputs[2] : -1;
    int a = norm_axis(ox_attr_int(n, "axis", -2), r);
    const char *mode = ox_attr_str(n, "mode", "linear");
    if (r < 2 || a < 1)
        return ox_ad_fail(ad, n, OX_E_UNSUPPORTED,
                          "TensorScatter needs a cache of known rank and a sequence axis");
    if (ox_ad_wants(ad, n, 0)) {
        struct ox_node *nd = ox_ad_node(ad, "TensorScatter", wi >= 0 ? 3 : 2,
                                        (int[]){g, ox_ad_zeros_like(ad, u), wi}, 1, &gx[0]);
        if (nd) ox_ad_set_attr(ad, nd, "i:axis s:mode", (int64_t)a, mode);
    }
    if (!ox_ad_wants(ad, n, 1)) return OX_OK;
    int pos = OX_AD(ad, "Range", ox_ad_int(ad, 0), dim_scalar(ad, u, a), ox_ad_int(ad, 1));
    ox_ad_set_info(ad, pos, OX_INT64, 1, NULL);
    struct shp s = {0}; /* the positions' view: [B or 1, 1, ..., len at axis, ..., 1] */
    if (wi >= 0) {
        int start = wi;
        if (ox_ad_dtype(ad, wi) != OX_INT64) {
            start = ox_ad_opa(ad, "Cast", 1, &wi, "i:to", (int64_t)OX_INT64);
            ox_ad_set_info(ad, start, OX_INT64, 1, NULL);
        }
        pos = OX_AD(ad, "Add", ox_ad_unsqueeze(ad, start, 1, (int64_t[]){1}),
                    ox_ad_unsqueeze(ad, pos, 1, (int64_t[]){0}));
        shp_d(ad, &s, c, 0);
    } else {
        shp_c(&s, 1);
    }
    if (strcmp(mode, "circular") == 0) pos = OX_AD(ad, "Mod", pos, dim_scalar(ad, c, a));
    for (int k = 1; k < r; k++) {
        if (k == a)
            shp_d(ad, &s, u, a);
        else
            shp_c(&s, 1);
    }
    pos = OX_AD(ad, "Reshape", pos, shp_emit(ad, &s));
    pos = OX_AD(ad, "Expand", pos, ox_ad_shape(ad, u));
    ox_ad_set_info(ad, pos, OX_INT64, r, NULL);
    gx[1] = ox_ad_opa(ad, "GatherElements", 2, (int[]){g, pos}, "i:axis", (int64_t)a);
    return OX_OK;
}
