/* Gradient rules: convolution, pooling, Resize, MaxUnpool, Col2Im, AffineGrid and
 * RotaryEmbedding (graph/autograd.h says the contract).
 *
 * The windowed ops (Conv, ConvTranspose, the pools) share one geometry: a "big" side (the
 * input of Conv and of the pools, the output of ConvTranspose) and a "small" side, where
 * small position o and kernel tap kk touch big position o*s + kk*d - pb. Each gradient is an
 * op of that geometry: values on the small side are scattered onto the big side by a
 * ConvTranspose, gathered from the big side by a Conv, and the weights' gradients correlate
 * the two sides with a Conv whose stride and dilation are the forward's dilation and stride.
 * The pads and output_padding of these ops are chosen from the static spatial sizes so that
 * each result has the shape wanted exactly (a Conv result is cropped where it is larger).
 *
 * Resize is linear in X and separable: along each resized axis, Y = R X with R an [out, in]
 * interpolation matrix, built here as a constant from the same coordinate rules as the
 * kernel; dX applies R^T along each axis with MatMul.
 */
#include "graph/autograd.h"

#include "kernels/op.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NSP_MAX 3 /* spatial axes of the windowed ops */

/* ---- small pieces ---------------------------------------------------------------------- */

static bool is_float_type(ox_dtype dt) {
    return dt == OX_FLOAT || dt == OX_DOUBLE || dt == OX_FLOAT16 || dt == OX_BFLOAT16;
}

/* A constant of `like`'s float type with these dims and values (vals NULL: all `fill`). */
static int const_like(struct ox_ad *ad, const struct ox_node *n, int like, int rank,
                      const int64_t *dims, const double *vals, double fill) {
    ox_dtype dt = ox_ad_dtype(ad, like);
    if (!is_float_type(dt)) {
        ox_ad_fail(ad, n, OX_E_UNSUPPORTED, "the element type of '%s' is unknown",
                   ox_ad_graph(ad)->values[like].name);
        return -1;
    }
    ox_tensor t = {0};
    if (ox_tensor_alloc(&t, dt, rank, dims)) {
        ox_ad_fail(ad, n, OX_E_NOMEM, "out of memory");
        return -1;
    }
    int64_t cnt = ox_tensor_numel(&t);
    for (int64_t i = 0; i < cnt; i++) ox_tensor_set(&t, i, vals ? vals[i] : fill);
    int v = ox_ad_const(ad, &t);
    ox_tensor_free_data(&t);
    return v;
}

/* An int64 constant of any rank. */
static int const_int64(struct ox_ad *ad, const struct ox_node *n, int rank, const int64_t *dims,
                       const int64_t *vals) {
    ox_tensor t = {0};
    if (ox_tensor_alloc(&t, OX_INT64, rank, dims)) {
        ox_ad_fail(ad, n, OX_E_NOMEM, "out of memory");
        return -1;
    }
    memcpy(t.data, vals, sizeof(int64_t) * (size_t)ox_tensor_numel(&t));
    int v = ox_ad_const(ad, &t);
    ox_tensor_free_data(&t);
    return v;
}

/* Reshape x to `dims` (-1 and 0 as Reshape reads them). */
static int reshape(struct ox_ad *ad, int x, int rank, const int64_t *dims) {
    return OX_AD(ad, "Reshape", x, ox_ad_ints(ad, rank, dims));
}

/* The permutation of `rank` axes that swaps a and b. */
static void swap_perm(int rank, int a, int b, int64_t *perm) {
    for (int k = 0; k < rank; k++) perm[k] = k;
    perm[a] = b;
    perm[b] = a;
}

/* The data of a constant input (an initializer or a Constant node's value), or NULL. */
static const ox_tensor *const_input(struct ox_ad *ad, const struct ox_node *n, int i) {
    if (i >= n->n_inputs || n->inputs[i] < 0) return NULL;
    const struct ox_graph *g = ox_ad_graph(ad);
    const struct ox_value *v = &g->values[n->inputs[i]];
    if (v->init) return v->init;
    if (v->producer < 0) return NULL;
    const struct ox_node *p = &g->nodes[v->producer];
    if (strcmp(p->op_type, "Constant") != 0 || p->domain[0]) return NULL;
    const struct ox_attr *a = ox_node_attr(p, "value");
    return a && a->type == OX_ATTR_TENSOR ? a->t : NULL;
}

/* An ints attribute of `want` values (absent: every value `def`). */
static ox_status attr_ints(struct ox_ad *ad, const struct ox_node *n, const char *name, int want,
                           int64_t def, int64_t *out) {
    const struct ox_attr *a = ox_node_attr(n, name);
    if (!a) {
        for (int i = 0; i < want; i++) out[i] = def;
        return OX_OK;
    }
    if (a->type != OX_ATTR_INTS || a->n != want)
        return ox_ad_fail(ad, n, OX_E_INVALID, "attribute %s: expected %d ints", name, want);
    memcpy(out, a->ints, sizeof(int64_t) * (size_t)want);
    return OX_OK;
}

/* Give nd the attributes of n (but `skip`): for an op recomputed with n's settings. */
static ox_status copy_attrs(struct ox_ad *ad, struct ox_node *nd, const struct ox_node *n,
                            const char *skip) {
    for (int k = 0; k < n->n_attrs; k++) {
        const struct ox_attr *a = &n->attrs[k];
        if (skip && strcmp(a->name, skip) == 0) continue;
        char spec[80];
        ox_status st;
        if (strlen(a->name) > 60)
            return ox_ad_fail(ad, n, OX_E_UNSUPPORTED, "attribute name too long");
        switch (a->type) {
        case OX_ATTR_INT:
            snprintf(spec, sizeof spec, "i:%s", a->name);
            st = ox_ad_set_attr(ad, nd, spec, a->i);
            break;
        case OX_ATTR_FLOAT:
            snprintf(spec, sizeof spec, "f:%s", a->name);
            st = ox_ad_set_attr(ad, nd, spec, (double)a->f);
            break;
        case OX_ATTR_STRING:
            snprintf(spec, sizeof spec, "s:%s", a->name);
            st = ox_ad_set_attr(ad, nd, spec, a->s);
            break;
        case OX_ATTR_INTS:
            snprintf(spec, sizeof spec, "I:%s", a->name);
            st = ox_ad_set_attr(ad, nd, spec, a->n, a->ints);
            break;
        case OX_ATTR_FLOATS:
            snprintf(spec, sizeof spec, "F:%s", a->name);
            st = ox_ad_set_attr(ad, nd, spec, a->n, a->floats);
            break;
        default: return ox_ad_fail(ad, n, OX_E_UNSUPPORTED, "cannot copy attribute %s", a->name);
        }
        if (st) return st;
    }
    return OX_OK;
}

/* ---- window geometry ------------------------------------------------------------------- */

struct win {
    int nsp;
    int64_t big[NSP_MAX], small[NSP_MAX], k[NSP_MAX], s[NSP_MAX], d[NSP_MAX], pb[NSP_MAX];
    /* From win_finish: the end pad and output_padding with which a ConvTranspose from the
     * small side gives the big side exactly (and a Conv from the big side at least the
     * small side). */
    int64_t pe[NSP_MAX], opad[NSP_MAX];
};

static ox_status win_finish(struct ox_ad *ad, const struct ox_node *n, struct win *w) {
    for (int i = 0; i < w->nsp; i++) {
        if (w->k[i] < 1 || w->s[i] < 1 || w->d[i] < 1 || w->pb[i] < 0 || w->small[i] < 1 ||
            w->big[i] < 1)
            return ox_ad_fail(ad, n, OX_E_UNSUPPORTED,
                              "spatial axis %d: kernel %lld, stride %lld, dilation %lld, begin pad "
                              "%lld, sizes %lld and %lld",
                              i, (long long)w->k[i], (long long)w->s[i], (long long)w->d[i],
                              (long long)w->pb[i], (long long)w->big[i], (long long)w->small[i]);
        /* the padded big side the windows span */
        int64_t span = (w->small[i] - 1) * w->s[i] + (w->k[i] - 1) * w->d[i] + 1;
        int64_t end = span - w->big[i] - w->pb[i];
        w->pe[i] = end > 0 ? end : 0;
        w->opad[i] = end < 0 ? -end : 0;
    }
    return OX_OK;
}

/* The spatial sizes of value v (axes 2..), which must be static. */
static ox_status spatial_dims(struct ox_ad *ad, const struct ox_node *n, int v, int nsp,
                              int64_t *out) {
    for (int i = 0; i < nsp; i++)
        if ((out[i] = ox_ad_dim(ad, v, i + 2)) < 0)
            return ox_ad_fail(ad, n, OX_E_UNSUPPORTED,
                              "the gradient needs the spatial sizes of '%s', which depend on the "
                              "input sizes",
                              ox_ad_graph(ad)->values[v].name);
    return OX_OK;
}

/* The geometry of Conv and the pools: big = X, small = Y, taps k. */
static ox_status win_forward(struct ox_ad *ad, const struct ox_node *n, int nsp, const int64_t *k,
                             struct win *w) {
    if (nsp < 1 || nsp > NSP_MAX)
        return ox_ad_fail(ad, n, OX_E_UNSUPPORTED, "%d spatial axes (1 to %d are handled)", nsp,
                          NSP_MAX);
    w->nsp = nsp;
    int64_t pads[2 * NSP_MAX];
    ox_status st;
    if ((st = spatial_dims(ad, n, n->inputs[0], nsp, w->big)) ||
        (st = spatial_dims(ad, n, n->outputs[0], nsp, w->small)) ||
        (st = attr_ints(ad, n, "strides", nsp, 1, w->s)) ||
        (st = attr_ints(ad, n, "dilations", nsp, 1, w->d)) ||
        (st = attr_ints(ad, n, "pads", 2 * nsp, 0, pads)))
        return st;
    const char *ap = ox_attr_str(n, "auto_pad", "NOTSET");
    bool same = strcmp(ap, "SAME_UPPER") == 0 || strcmp(ap, "SAME_LOWER") == 0;
    for (int i = 0; i < nsp; i++) {
        w->k[i] = k[i];
        if (same) {
            int64_t total = (w->small[i] - 1) * w->s[i] + (k[i] - 1) * w->d[i] + 1 - w->big[i];
            if (total < 0) total = 0;
            w->pb[i] = ap[5] == 'U' ? total / 2 : total - total / 2;
        } else if (strcmp(ap, "VALID") == 0) {
            w->pb[i] = 0;
        } else if (strcmp(ap, "NOTSET") == 0) {
            w->pb[i] = pads[i];
        } else {
            return ox_ad_fail(ad, n, OX_E_INVALID, "auto_pad '%s'", ap);
        }
    }
    return win_finish(ad, n, w);
}

/* ConvTranspose of z (small side) onto the big side with weights wt. */
static int scatter_convt(struct ox_ad *ad, const struct win *w, int z, int wt, int64_t group) {
    int64_t pads[2 * NSP_MAX];
    for (int i = 0; i < w->nsp; i++) pads[i] = w->pb[i], pads[i + w->nsp] = w->pe[i];
    return ox_ad_opa(ad, "ConvTranspose", 2, (int[]){z, wt},
                     "I:strides I:dilations I:pads I:output_padding i:group", w->nsp, w->s, w->nsp,
                     w->d, 2 * w->nsp, pads, w->nsp, w->opad, group);
}

/* x cropped to `want` along the spatial axes where it has `have` > want. */
static int crop(struct ox_ad *ad, int x, int nsp, const int64_t *have, const int64_t *want) {
    int64_t axes[NSP_MAX], ends[NSP_MAX], zeros[NSP_MAX] = {0};
    int n_axes = 0;
    for (int i = 0; i < nsp; i++)
        if (have[i] > want[i]) axes[n_axes] = i + 2, ends[n_axes++] = want[i];
    if (!n_axes) return x;
    return OX_AD(ad, "Slice", x, ox_ad_ints(ad, n_axes, zeros), ox_ad_ints(ad, n_axes, ends),
                 ox_ad_ints(ad, n_axes, axes));
}

/* Conv of z (big side) with weights wt to the small side: Y[o] = sum_kk z[o*s + kk*d - pb]. */
static int gather_conv(struct ox_ad *ad, const struct win *w, int z, int wt, int64_t group) {
    int64_t pads[2 * NSP_MAX], have[NSP_MAX];
    for (int i = 0; i < w->nsp; i++) {
        pads[i] = w->pb[i], pads[i + w->nsp] = w->pe[i];
        int64_t ext = (w->k[i] - 1) * w->d[i] + 1;
        have[i] = (w->big[i] + w->pb[i] + w->pe[i] - ext) / w->s[i] + 1;
    }
    int r = ox_ad_opa(ad, "Conv", 2, (int[]){z, wt}, "I:strides I:dilations I:pads i:group", w->nsp,
                      w->s, w->nsp, w->d, 2 * w->nsp, pads, group);
    return crop(ad, r, w->nsp, have, w->small);
}

/* The weights' gradient: a on the big side [N, G*ca, big...], b on the small side
 * [N, G*cb, small...]; returns [G*cb, ca, k...] with
 *     R[g*cb + j, i, kk] = sum_n sum_o b[n, g*cb + j, o] a[n, g*ca + i, o*s + kk*d - pb],
 * a Conv with batch ca and G groups of N channels: input a as [ca, G*N, big], weights b as
 * [G*cb, N, small], stride d and dilation s. */
static int correlate(struct ox_ad *ad, const struct win *w, int a, int b, int64_t group,
                     int64_t ca) {
    int nsp = w->nsp, rank = nsp + 2;
    int64_t perm[NSP_MAX + 2], dims[NSP_MAX + 3];
    swap_perm(rank, 0, 1, perm);
    int in;
    if (group == 1) {
        in = ox_ad_transpose(ad, a, rank, perm);
    } else {
        dims[0] = -1, dims[1] = group, dims[2] = ca;
        for (int i = 0; i < nsp; i++) dims[3 + i] = w->big[i];
        int split = reshape(ad, a, rank + 1, dims); /* [N, G, ca, big] */
        int64_t p5[NSP_MAX + 3];
        swap_perm(rank + 1, 0, 2, p5);
        int t = ox_ad_transpose(ad, split, rank + 1, p5); /* [ca, G, N, big] */
        dims[0] = ca, dims[1] = -1;
        for (int i = 0; i < nsp; i++) dims[2 + i] = w->big[i];
        in = reshape(ad, t, rank, dims);
    }
    int kern = ox_ad_transpose(ad, b, rank, perm);
    int64_t pads[2 * NSP_MAX], have[NSP_MAX];
    for (int i = 0; i < nsp; i++) {
        pads[i] = w->pb[i], pads[i + nsp] = w->pe[i];
        int64_t ext = (w->small[i] - 1) * w->s[i] + 1;
        have[i] = (w->big[i] + w->pb[i] + w->pe[i] - ext) / w->d[i] + 1;
    }
    int r = ox_ad_opa(ad, "Conv", 2, (int[]){in, kern}, "I:strides I:dilations I:pads i:group", nsp,
                      w->d, nsp, w->s, 2 * nsp, pads, group);
    r = crop(ad, r, nsp, have, w->k);
    return ox_ad_transpose(ad, r, rank, perm);
}

/* The bias gradient: dY summed over every axis but the channels. */
static int bias_grad(struct ox_ad *ad, const struct ox_node *n, int g, int rank) {
    if (rank < 3) {
        ox_ad_fail(ad, n, OX_E_UNSUPPORTED, "the gradient needs Y of known rank >= 3");
        return -1;
    }
    int64_t axes[OX_MAX_RANK];
    int n_axes = 0;
    for (int k = 0; k < rank; k++)
        if (k != 1) axes[n_axes++] = k;
    return ox_ad_reduce(ad, "ReduceSum", g, n_axes, axes, false);
}

/* ---- Conv and ConvTranspose ------------------------------------------------------------ */

/* W's dims (all static) into wd; returns the rank or -1 after recording an error. */
static int weight_dims(struct ox_ad *ad, const struct ox_node *n, int64_t *wd) {
    int wv = n->inputs[1], rank = ox_ad_rank(ad, wv);
    if (rank < 3 || rank > NSP_MAX + 2 || rank != ox_ad_rank(ad, n->inputs[0])) {
        ox_ad_fail(ad, n, OX_E_UNSUPPORTED, "the gradient needs X and W of one known rank, 3 to %d",
                   NSP_MAX + 2);
        return -1;
    }
    for (int k = 0; k < rank; k++)
        if ((wd[k] = ox_ad_dim(ad, wv, k)) < 0) {
            ox_ad_fail(ad, n, OX_E_UNSUPPORTED, "the gradient needs W's shape to be known");
            return -1;
        }
    return rank;
}

/* Y = Conv(X, W, B): X [N, C, big], W [M, C/G, k], Y [N, M, small].
 * dX = ConvTranspose(dY, W) onto X's shape; dW = the correlation of X with dY; dB = dY summed
 * over all axes but 1. */
ox_status ox_grad_conv(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    int g = gy[0];
    if (g < 0) return OX_OK;
    int rank = ox_ad_rank(ad, n->outputs[0]);
    if (n->n_inputs > 2 && ox_ad_wants(ad, n, 2)) gx[2] = bias_grad(ad, n, g, rank);
    if (!ox_ad_wants(ad, n, 0) && !ox_ad_wants(ad, n, 1)) return OX_OK;
    int64_t wd[NSP_MAX + 2];
    if ((rank = weight_dims(ad, n, wd)) < 0) return OX_OK;
    int64_t group = ox_attr_int(n, "group", 1);
    if (group < 1 || wd[0] % group)
        return ox_ad_fail(ad, n, OX_E_INVALID, "group %lld does not divide %lld output channels",
                          (long long)group, (long long)wd[0]);
    struct win w;
    if (win_forward(ad, n, rank - 2, wd + 2, &w)) return OX_OK;
    if (ox_ad_wants(ad, n, 0)) gx[0] = scatter_convt(ad, &w, g, n->inputs[1], group);
    if (ox_ad_wants(ad, n, 1)) gx[1] = correlate(ad, &w, n->inputs[0], g, group, wd[1]);
    return OX_OK;
}

/* Y = ConvTranspose(X, W, B): X [N, C, small], W [C, M/G, k], Y [N, M, big].
 * dX = Conv(dY, W) cropped to X's shape; dW = the correlation of dY with X; dB as Conv's. */
ox_status ox_grad_conv_transpose(struct ox_ad *ad, const struct ox_node *n, const int *gy,
                                 int *gx) {
    int g = gy[0];
    if (g < 0) return OX_OK;
    int rank = ox_ad_rank(ad, n->outputs[0]);
    if (n->n_inputs > 2 && ox_ad_wants(ad, n, 2)) gx[2] = bias_grad(ad, n, g, rank);
    if (!ox_ad_wants(ad, n, 0) && !ox_ad_wants(ad, n, 1)) return OX_OK;
    int64_t wd[NSP_MAX + 2];
    if ((rank = weight_dims(ad, n, wd)) < 0) return OX_OK;
    int nsp = rank - 2;
    int64_t group = ox_attr_int(n, "group", 1);
    if (group < 1 || wd[0] % group)
        return ox_ad_fail(ad, n, OX_E_INVALID, "group %lld does not divide %lld input channels",
                          (long long)group, (long long)wd[0]);
    struct win w = {.nsp = nsp};
    int64_t pads[2 * NSP_MAX], opad[NSP_MAX];
    ox_status st;
    if ((st = spatial_dims(ad, n, n->outputs[0], nsp, w.big)) ||
        (st = spatial_dims(ad, n, n->inputs[0], nsp, w.small)) ||
        (st = attr_ints(ad, n, "strides", nsp, 1, w.s)) ||
        (st = attr_ints(ad, n, "dilations", nsp, 1, w.d)) ||
        (st = attr_ints(ad, n, "pads", 2 * nsp, 0, pads)) ||
        (st = attr_ints(ad, n, "output_padding", nsp, 0, opad)))
        return OX_OK;
    /* pads as the operator places them: from output_shape or SAME, the total padding is split
     * (the odd one at the end for SAME_UPPER, at the beginning otherwise) */
    const char *ap = ox_attr_str(n, "auto_pad", "NOTSET");
    bool same = strcmp(ap, "SAME_UPPER") == 0 || strcmp(ap, "SAME_LOWER") == 0;
    bool derived = same || ox_node_attr(n, "output_shape");
    for (int i = 0; i < nsp; i++) {
        w.k[i] = wd[i + 2];
        if (derived) {
            int64_t full = w.s[i] * (w.small[i] - 1) + opad[i] + (w.k[i] - 1) * w.d[i] + 1;
            int64_t total = full - w.big[i];
            w.pb[i] = total <= 0                      ? 0
                      : strcmp(ap, "SAME_UPPER") == 0 ? total / 2
                                                      : total - total / 2;
        } else {
            w.pb[i] = strcmp(ap, "VALID") == 0 ? 0 : pads[i];
        }
    }
    if (win_finish(ad, n, &w)) return OX_OK;
    if (ox_ad_wants(ad, n, 0)) gx[0] = gather_conv(ad, &w, g, n->inputs[1], group);
    if (ox_ad_wants(ad, n, 1)) gx[1] = correlate(ad, &w, g, n->inputs[0], group, wd[1]);
    return OX_OK;
}

/* ---- pooling --------------------------------------------------------------------------- */

/* The pools' geometry: kernel_shape and the window attributes. */
static ox_status pool_win(struct ox_ad *ad, const struct ox_node *n, struct win *w) {
    int rank = ox_ad_rank(ad, n->inputs[0]);
    int nsp = rank - 2;
    if (nsp < 1 || nsp > NSP_MAX)
        return ox_ad_fail(ad, n, OX_E_UNSUPPORTED, "the gradient needs X of rank 3 to %d",
                          NSP_MAX + 2);
    int64_t k[NSP_MAX];
    ox_status st = attr_ints(ad, n, "kernel_shape", nsp, 0, k);
    if (st) return st;
    return win_forward(ad, n, nsp, k, w);
}

static int64_t win_taps(const struct win *w) {
    int64_t t = 1;
    for (int i = 0; i < w->nsp; i++) t *= w->k[i];
    return t;
}

static int64_t win_size(const int64_t *dims, int nsp) {
    int64_t t = 1;
    for (int i = 0; i < nsp; i++) t *= dims[i];
    return t;
}

/* z [N, C, small] scattered onto X's shape through the kernel kern [1, 1, k]: each window's
 * value adds into every input position it read (channels flattened into the batch). */
static int pool_scatter(struct ox_ad *ad, const struct win *w, int z, int kern, int x) {
    int64_t dims[NSP_MAX + 2] = {-1, 1};
    for (int i = 0; i < w->nsp; i++) dims[i + 2] = 0; /* 0: z's spatial sizes */
    int r = scatter_convt(ad, w, reshape(ad, z, w->nsp + 2, dims), kern, 1);
    return ox_ad_reshape_like(ad, r, x);
}

/* Does some window hold no position of the input (it reads only padding)? */
static bool has_empty_window(const struct win *w) {
    for (int i = 0; i < w->nsp; i++)
        for (int64_t o = 0; o < w->small[i]; o++) {
            bool any = false;
            for (int64_t t = 0; t < w->k[i] && !any; t++) {
                int64_t p = o * w->s[i] + t * w->d[i] - w->pb[i];
                any = p >= 0 && p < w->big[i];
            }
            if (!any) return true;
        }
    return false;
}

/* Y = AveragePool(X): Y[o] = sum of the window's inputs / divisor[o], the divisor set by
 * count_include_pad and ceil_mode as the operator counts it. The scale 1/divisor is read
 * from the operator itself: AveragePool(ones) / (number of inputs in the window), then
 * dX = ConvTranspose(dY * scale) with a kernel of ones. */
ox_status ox_grad_avgpool(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    int x = n->inputs[0];
    struct win w;
    if (gy[0] < 0 || pool_win(ad, n, &w)) return OX_OK;
    int nsp = w.nsp;
    int64_t dims[NSP_MAX + 2] = {1, 1};
    for (int i = 0; i < nsp; i++) dims[i + 2] = w.big[i];
    int ones = const_like(ad, n, x, nsp + 2, dims, NULL, 1);
    int avg = -1;
    struct ox_node *nd = ox_ad_node(ad, "AveragePool", 1, &ones, 1, &avg);
    if (!nd || copy_attrs(ad, nd, n, NULL)) return OX_OK;
    /* 1 / the number of inputs each window holds (0 for none) */
    int64_t n_out = win_size(w.small, nsp);
    double *inv = malloc(sizeof *inv * (size_t)n_out);
    if (!inv) return ox_ad_fail(ad, n, OX_E_NOMEM, "out of memory");
    for (int64_t q = 0; q < n_out; q++) {
        int64_t c = 1, qr = q;
        for (int i = nsp - 1; i >= 0; i--) {
            int64_t o = qr % w.small[i], in = 0;
            qr /= w.small[i];
            for (int64_t t = 0; t < w.k[i]; t++) {
                int64_t p = o * w.s[i] + t * w.d[i] - w.pb[i];
                in += p >= 0 && p < w.big[i];
            }
            c *= in;
        }
        inv[q] = c > 0 ? 1 / (double)c : 0;
    }
    for (int i = 0; i < nsp; i++) dims[i + 2] = w.small[i];
    int scale = ox_ad_mul(ad, avg, const_like(ad, n, x, nsp + 2, dims, inv, 0));
    free(inv);
    ox_ad_set_info(ad, scale, ox_ad_dtype(ad, x), nsp + 2, dims);
    for (int i = 0; i < nsp; i++) dims[i + 2] = w.k[i];
    int kern = const_like(ad, n, x, nsp + 2, dims, NULL, 1);
    gx[0] = pool_scatter(ad, &w, ox_ad_mul(ad, gy[0], scale), kern, x);
    return OX_OK;
}

/* Y = MaxPool(X): dY goes to the position the Indices output names. From opset 16 a
 * ScatterElements with reduction add over the flattened X does it (overlapping windows add);
 * below, each tap's share is masked (Indices == the position the tap reads) and scattered by a
 * ConvTranspose with a one-hot kernel per tap. */
ox_status ox_grad_maxpool(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    int x = n->inputs[0], g = gy[0];
    struct win w;
    if (g < 0 || pool_win(ad, n, &w)) return OX_OK;
    int nsp = w.nsp;
    /* row-major indices: the node's own, or those of a recomputation */
    int idx = n->n_outputs > 1 && n->outputs[1] >= 0 && ox_attr_int(n, "storage_order", 0) == 0
                  ? n->outputs[1]
                  : -1;
    if (idx < 0) {
        int outs[2];
        struct ox_node *nd = ox_ad_node(ad, "MaxPool", 1, &x, 2, outs);
        if (!nd || copy_attrs(ad, nd, n, "storage_order")) return OX_OK;
        idx = outs[1];
    }
    if (ox_ad_opset(ad) >= 16) {
        int64_t minus1 = -1;
        int flat_i = reshape(ad, idx, 1, &minus1), flat_g = reshape(ad, g, 1, &minus1);
        if (has_empty_window(&w)) { /* such windows give -1: nothing flows from them */
            int keep = OX_AD(ad, "GreaterOrEqual", flat_i, ox_ad_int(ad, 0));
            flat_g = OX_AD(ad, "Where", keep, flat_g, ox_ad_scalar_like(ad, 0.0, x));
            flat_i = OX_AD(ad, "Max", flat_i, ox_ad_int(ad, 0));
        }
        int zeros = reshape(ad, ox_ad_zeros_like(ad, x), 1, &minus1);
        int sc = ox_ad_opa(ad, "ScatterElements", 3, (int[]){zeros, flat_i, flat_g},
                           "i:axis s:reduction", (int64_t)0, "add");
        gx[0] = ox_ad_reshape_like(ad, sc, x);
        return OX_OK;
    }
    /* taps[kk, o]: the flat spatial position tap kk of window o reads (-1: padding) */
    int64_t K = win_taps(&w), n_out = win_size(w.small, nsp), in_size = win_size(w.big, nsp);
    int64_t *taps = malloc(sizeof *taps * (size_t)(K * n_out));
    double *onehot = calloc((size_t)(K * K), sizeof *onehot);
    if (!taps || !onehot) {
        free(taps);
        free(onehot);
        return ox_ad_fail(ad, n, OX_E_NOMEM, "out of memory");
    }
    for (int64_t kk = 0; kk < K; kk++) {
        onehot[kk * K + kk] = 1;
        for (int64_t q = 0; q < n_out; q++) {
            int64_t pos = 0, kr = kk, qr = q;
            bool inside = true;
            int64_t t[NSP_MAX], o[NSP_MAX];
            for (int i = nsp - 1; i >= 0; i--) {
                t[i] = kr % w.k[i], kr /= w.k[i];
                o[i] = qr % w.small[i], qr /= w.small[i];
            }
            for (int i = 0; i < nsp; i++) {
                int64_t p = o[i] * w.s[i] + t[i] * w.d[i] - w.pb[i];
                inside &= p >= 0 && p < w.big[i];
                pos = pos * w.big[i] + p;
            }
            taps[kk * n_out + q] = inside ? pos : -1;
        }
    }
    int64_t dims[NSP_MAX + 2] = {1, K};
    for (int i = 0; i < nsp; i++) dims[i + 2] = w.small[i];
    int tapv = const_int64(ad, n, nsp + 2, dims, taps);
    dims[0] = K, dims[1] = 1;
    for (int i = 0; i < nsp; i++) dims[i + 2] = w.k[i];
    int kern = const_like(ad, n, x, nsp + 2, dims, onehot, 0);
    free(taps);
    free(onehot);
    dims[0] = -1, dims[1] = 1;
    for (int i = 0; i < nsp; i++) dims[i + 2] = 0;
    int pos = OX_AD(ad, "Mod", idx, ox_ad_int(ad, in_size));
    int hit = OX_AD(ad, "Equal", reshape(ad, pos, nsp + 2, dims), tapv);
    int share = OX_AD(ad, "Where", hit, reshape(ad, g, nsp + 2, dims),
                      ox_ad_scalar_like(ad, 0.0, x)); /* [N*C, K, small] */
    int r = scatter_convt(ad, &w, share, kern, 1);
    gx[0] = ox_ad_reshape_like(ad, r, x);
    return OX_OK;
}

/* sign(x) |x|^(p-1): the derivative of |x|^p / p. */
static int lp_factor(struct ox_ad *ad, int x, int64_t p) {
    if (p == 2) return x;
    int sign = OX_AD(ad, "Sign", x);
    if (p == 1) return sign;
    int mag = OX_AD(ad, "Pow", OX_AD(ad, "Abs", x), ox_ad_scalar_like(ad, (double)(p - 1), x));
    return ox_ad_mul(ad, sign, mag);
}

/* dY / Y^(p-1), and 0 where Y is 0 (a window of zeros: the norm has no derivative there). */
static int lp_scale(struct ox_ad *ad, int g, int y, int64_t p) {
    if (p == 1) return g;
    int den = p == 2 ? y : OX_AD(ad, "Pow", y, ox_ad_scalar_like(ad, (double)(p - 1), y));
    int zero = ox_ad_scalar_like(ad, 0.0, y);
    int pos = OX_AD(ad, "Greater", y, zero);
    return OX_AD(ad, "Where", pos, ox_ad_div(ad, g, den), zero);
}

/* Y = LpPool(X) = (sum over the window of |x|^p)^(1/p):
 * dX = sign(x) |x|^(p-1) * ConvTranspose(dY / Y^(p-1)) with a kernel of ones. */
ox_status ox_grad_lppool(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    int x = n->inputs[0];
    struct win w;
    if (gy[0] < 0 || pool_win(ad, n, &w)) return OX_OK;
    int64_t p = ox_attr_int(n, "p", 2);
    if (p < 1) return ox_ad_fail(ad, n, OX_E_UNSUPPORTED, "p = %lld", (long long)p);
    int64_t dims[NSP_MAX + 2] = {1, 1};
    for (int i = 0; i < w.nsp; i++) dims[i + 2] = w.k[i];
    int kern = const_like(ad, n, x, w.nsp + 2, dims, NULL, 1);
    int z = lp_scale(ad, gy[0], n->outputs[0], p);
    gx[0] = ox_ad_mul(ad, pool_scatter(ad, &w, z, kern, x), lp_factor(ad, x, p));
    return OX_OK;
}

/* The product of X's spatial sizes (static), or -1 after recording an error. */
static int64_t global_size(struct ox_ad *ad, const struct ox_node *n) {
    int x = n->inputs[0], rank = ox_ad_rank(ad, x);
    if (rank < 3) {
        ox_ad_fail(ad, n, OX_E_UNSUPPORTED, "the gradient needs X of known rank >= 3");
        return -1;
    }
    int64_t sp[OX_MAX_RANK];
    if (spatial_dims(ad, n, x, rank - 2, sp)) return -1;
    return win_size(sp, rank - 2);
}

/* dX = dY / (spatial size), broadcast over the spatial axes. */
ox_status ox_grad_global_avgpool(struct ox_ad *ad, const struct ox_node *n, const int *gy,
                                 int *gx) {
    int x = n->inputs[0];
    int64_t size = global_size(ad, n);
    if (gy[0] < 0 || size < 0) return OX_OK;
    int scaled = ox_ad_mul(ad, gy[0], ox_ad_scalar_like(ad, 1.0 / (double)size, x));
    gx[0] = ox_ad_expand_like(ad, scaled, x);
    return OX_OK;
}

/* dY goes to the first position of the maximum (ArgMax over the flattened spatial axes). */
ox_status ox_grad_global_maxpool(struct ox_ad *ad, const struct ox_node *n, const int *gy,
                                 int *gx) {
    int x = n->inputs[0];
    int64_t size = global_size(ad, n);
    if (gy[0] < 0 || size < 0) return OX_OK;
    int64_t flat[3] = {0, 0, -1};
    int xf = reshape(ad, x, 3, flat); /* [N, C, H*W...] */
    ox_ad_set_info(ad, xf, ox_ad_dtype(ad, x), 3,
                   (int64_t[]){ox_ad_dim(ad, x, 0), ox_ad_dim(ad, x, 1), size});
    int at = ox_ad_opa(ad, "ArgMax", 1, &xf, "i:axis i:keepdims", (int64_t)2, (int64_t)1);
    int gf = reshape(ad, gy[0], 3, flat);
    int zeros = ox_ad_zeros_like(ad, xf);
    int sc = ox_ad_opa(ad, "ScatterElements", 3, (int[]){zeros, at, gf}, "i:axis", (int64_t)2);
    gx[0] = ox_ad_reshape_like(ad, sc, x);
    return OX_OK;
}

/* Y = (sum over the spatial axes of |x|^p)^(1/p): dX = sign(x) |x|^(p-1) dY / Y^(p-1). */
ox_status ox_grad_global_lppool(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    int x = n->inputs[0];
    int64_t p = ox_attr_int(n, "p", 2);
    if (gy[0] < 0) return OX_OK;
    if (p < 1) return ox_ad_fail(ad, n, OX_E_UNSUPPORTED, "p = %lld", (long long)p);
    int z = lp_scale(ad, gy[0], n->outputs[0], p);
    gx[0] = ox_ad_mul(ad, z, lp_factor(ad, x, p));
    return OX_OK;
}

/* ---- Resize ---------------------------------------------------------------------------- */

enum { RS_NEAREST, RS_LINEAR, RS_CUBIC };
enum { CT_HALF, CT_HALF_SYM, CT_PYTORCH, CT_ALIGN, CT_ASYM, CT_TF_NN, CT_TF_CROP };
enum { NM_ROUND_FLOOR, NM_ROUND_CEIL, NM_FLOOR, NM_CEIL };

/* One resized axis, as the operator reads it. */
struct rs_axis {
    int mode, ctm, nearest;
    double a; /* cubic_coeff_a */
    bool exclude_outside, antialias;
    int64_t in, out;
    double scale, roi_s, roi_e;
};

static ox_status rs_modes(struct ox_ad *ad, const struct ox_node *n, struct rs_axis *ax) {
    static const char *const modes[] = {"nearest", "linear", "cubic"};
    static const char *const ctms[] = {
        "half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
        "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize"};
    static const char *const nms[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
    const char *m = ox_attr_str(n, "mode", "nearest");
    const char *c = ox_attr_str(n, "coordinate_transformation_mode", "half_pixel");
    const char *nm = ox_attr_str(n, "nearest_mode", "round_prefer_floor");
    ax->mode = ax->ctm = ax->nearest = -1;
    for (int i = 0; i < 3; i++)
        if (strcmp(m, modes[i]) == 0) ax->mode = i;
    for (int i = 0; i < 7; i++)
        if (strcmp(c, ctms[i]) == 0) ax->ctm = i;
    for (int i = 0; i < 4; i++)
        if (strcmp(nm, nms[i]) == 0) ax->nearest = i;
    if (ax->mode < 0 || ax->ctm < 0 || ax->nearest < 0)
        return ox_ad_fail(ad, n, OX_E_UNSUPPORTED,
                          "mode '%s', coordinate_transformation_mode '%s', nearest_mode '%s'", m, c,
                          nm);
    const struct ox_attr *at = ox_node_attr(n, "cubic_coeff_a");
    ax->a = at && at->type == OX_ATTR_FLOAT ? at->f : -0.75f;
    ax->exclude_outside = ox_attr_int(n, "exclude_outside", 0) != 0;
    ax->antialias = n->opset >= 18 && ox_attr_int(n, "antialias", 0) != 0;
    return OX_OK;
}

/* The input position of output coordinate j; false outside the crop (tf_crop_and_resize). */
static bool rs_coord(const struct rs_axis *ax, int64_t j, double *pos) {
    double x = (double)j, s = ax->scale, in = (double)ax->in, len = s * in;
    switch (ax->ctm) {
    case CT_HALF: *pos = (x + 0.5) / s - 0.5; break;
    case CT_HALF_SYM: {
        double adj = (double)ax->out / len, center = in / 2;
        *pos = center * (1 - adj) + (x + 0.5) / s - 0.5;
        break;
    }
    case CT_PYTORCH: *pos = ax->out > 1 ? (x + 0.5) / s - 0.5 : 0; break;
    case CT_ALIGN: *pos = len == 1 ? 0 : x * (in - 1) / (len - 1); break;
    case CT_ASYM: *pos = x / s; break;
    case CT_TF_NN: *pos = (x + 0.5) / s; break;
    default: {
        double a = ax->roi_s, b = ax->roi_e;
        *pos = len == 1 ? (b - a) * (in - 1) / 2 : x * (b - a) * (in - 1) / (len - 1);
        *pos += a * (in - 1);
        return !(*pos < 0 || *pos > in - 1);
    }
    }
    return true;
}

static double cubic_weight(double a, double x) {
    x = fabs(x);
    if (x <= 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
    if (x < 2) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
    return 0;
}

static int64_t clamp_index(int64_t k, int64_t n) {
    return k < 0 ? 0 : k >= n ? n - 1 : k;
}

/* Row j of the axis' interpolation matrix: the weight of each input index (row[in], zeroed
 * by the caller). Indices outside the input clamp to its edge; exclude_outside drops them
 * and renormalises; a position outside the crop leaves the row zero. */
static void rs_row(const struct rs_axis *ax, int64_t j, double *row) {
    double pos;
    if (!rs_coord(ax, j, &pos)) return;
    int64_t n = ax->in;
    double fl = floor(pos), r = pos - fl;
    int64_t base = (int64_t)fl;
    if (ax->mode == RS_NEAREST) {
        int64_t k = base;
        switch (ax->nearest) {
        case NM_ROUND_FLOOR: k = r <= 0.5 ? base : base + 1; break;
        case NM_ROUND_CEIL: k = r < 0.5 ? base : base + 1; break;
        case NM_FLOOR: k = base; break;
        default: k = r > 0 ? base + 1 : base; break;
        }
        row[clamp_index(k, n)] += 1;
        return;
    }
    /* taps: filter stretched by 1/scale when antialiasing a downscale */
    double fs = ax->antialias && ax->scale < 1 ? ax->scale : 1.0;
    double support = ax->mode == RS_LINEAR ? 1.0 : 2.0;
    int64_t start = (int64_t)(floor(-support / fs) + 1), count = 2 - 2 * start;
    double sum = 0, wts[64];
    int64_t idx[64];
    int m = 0;
    double *wbuf = count > 64 ? calloc((size_t)count, sizeof *wbuf) : wts;
    int64_t *ibuf = count > 64 ? calloc((size_t)count, sizeof *ibuf) : idx;
    if (!wbuf || !ibuf) {
        if (wbuf != wts) free(wbuf);
        if (ibuf != idx) free(ibuf);
        return;
    }
    for (int64_t i = start; i < start + count; i++) {
        double t = (double)i - r, wt;
        if (ax->mode == RS_LINEAR)
            wt = fs == 1 ? (i == 0 ? 1 - r : i == 1 ? r : 0) : fmax(0, 1 - fabs(t * fs));
        else
            wt = cubic_weight(ax->a, t * fs);
        int64_t k = base + i;
        if (ax->exclude_outside && (k < 0 || k >= n)) wt = 0;
        sum += wt;
        if (wt == 0) continue;
        ibuf[m] = clamp_index(k, n);
        wbuf[m++] = wt;
    }
    bool normalise = fs != 1 || ax->exclude_outside;
    for (int i = 0; i < m; i++) row[ibuf[i]] += normalise && sum != 0 ? wbuf[i] / sum : wbuf[i];
    if (m == 0) row[clamp_index(base, n)] += 1; /* every weight vanished: the nearest index */
    if (wbuf != wts) free(wbuf);
    if (ibuf != idx) free(ibuf);
}

/* Sizes, scales and roi of every axis of a Resize with X of `rank`, as the operator derives
 * them from its inputs (which must be constant). */
static ox_status rs_axes(struct ox_ad *ad, const struct ox_node *n, int rank,
                         struct rs_axis *axes) {
    struct rs_axis base;
    ox_status st = rs_modes(ad, n, &base);
    if (st) return st;
    int list[OX_MAX_RANK], n_axes = rank;
    for (int d = 0; d < rank; d++) list[d] = d;
    const struct ox_attr *aa = n->opset >= 18 ? ox_node_attr(n, "axes") : NULL;
    if (aa) {
        if (aa->type != OX_ATTR_INTS || aa->n > rank)
            return ox_ad_fail(ad, n, OX_E_INVALID, "attribute axes");
        n_axes = aa->n;
        for (int i = 0; i < n_axes; i++) {
            int64_t v = aa->ints[i] < 0 ? aa->ints[i] + rank : aa->ints[i];
            if (v < 0 || v >= rank) return ox_ad_fail(ad, n, OX_E_INVALID, "attribute axes");
            list[i] = (int)v;
        }
    }
    for (int d = 0; d < rank; d++) {
        axes[d] = base;
        axes[d].in = axes[d].out = ox_ad_dim(ad, n->inputs[0], d);
        axes[d].scale = 1, axes[d].roi_s = 0, axes[d].roi_e = 1;
    }
    bool touched[OX_MAX_RANK] = {false};
    for (int i = 0; i < n_axes; i++) touched[list[i]] = true;
    const ox_tensor *roi = const_input(ad, n, 1), *scales = const_input(ad, n, 2),
                    *sizes = const_input(ad, n, 3);
    bool has_sizes = n->n_inputs > 3 && n->inputs[3] >= 0;
    bool has_scales = n->n_inputs > 2 && n->inputs[2] >= 0;
    if (has_sizes && sizes && ox_tensor_numel(sizes) == 0) has_sizes = false;
    if (has_scales && scales && ox_tensor_numel(scales) == 0) has_scales = false;
    if ((has_sizes && !sizes) || (!has_sizes && has_scales && !scales))
        return ox_ad_fail(ad, n, OX_E_UNSUPPORTED,
                          "the gradient needs constant scales or sizes (an initializer or a "
                          "Constant)");
    if (base.ctm == CT_TF_CROP && n->n_inputs > 1 && n->inputs[1] >= 0) {
        if (!roi) return ox_ad_fail(ad, n, OX_E_UNSUPPORTED, "the gradient needs a constant roi");
        if (ox_tensor_numel(roi) == 2 * n_axes)
            for (int i = 0; i < n_axes; i++) {
                axes[list[i]].roi_s = ox_tensor_get(roi, i);
                axes[list[i]].roi_e = ox_tensor_get(roi, n_axes + i);
            }
    }
    if (has_sizes) {
        if (ox_tensor_numel(sizes) != n_axes)
            return ox_ad_fail(ad, n, OX_E_INVALID, "sizes has %lld values, expected %d",
                              (long long)ox_tensor_numel(sizes), n_axes);
        double fs[OX_MAX_RANK];
        for (int i = 0; i < n_axes; i++) {
            struct rs_axis *ax = &axes[list[i]];
            ax->out = (int64_t)ox_tensor_get(sizes, i);
            fs[i] = ax->in ? (double)ax->out / (double)ax->in : 1.0;
            ax->scale = fs[i];
        }
        const char *pol =
            n->opset >= 18 ? ox_attr_str(n, "keep_aspect_ratio_policy", "stretch") : "stretch";
        if (strcmp(pol, "stretch") != 0) {
            bool smaller = strcmp(pol, "not_larger") == 0;
            double s = fs[0];
            for (int i = 1; i < n_axes; i++) s = smaller ? fmin(s, fs[i]) : fmax(s, fs[i]);
            for (int i = 0; i < n_axes; i++) {
                struct rs_axis *ax = &axes[list[i]];
                ax->scale = s;
                ax->out = (int64_t)(s * (double)ax->in + 0.5);
            }
        }
    } else if (has_scales) {
        if (ox_tensor_numel(scales) != n_axes)
            return ox_ad_fail(ad, n, OX_E_INVALID, "scales has %lld values, expected %d",
                              (long long)ox_tensor_numel(scales), n_axes);
        for (int i = 0; i < n_axes; i++) {
            struct rs_axis *ax = &axes[list[i]];
            ax->scale = ox_tensor_get(scales, i);
            if (!(ax->scale > 0)) return ox_ad_fail(ad, n, OX_E_INVALID, "scales[%d]", i);
            ax->out = (int64_t)floor(ax->scale * (double)ax->in);
        }
    } else {
        return ox_ad_fail(ad, n, OX_E_INVALID, "one of scales and sizes is needed");
    }
    /* an axis of unknown size (a batch axis) must keep its values: scale 1 */
    for (int d = 0; d < rank; d++) {
        if (axes[d].in >= 0) continue;
        bool same = axes[d].scale == 1 && (!touched[d] || !has_sizes) && base.ctm != CT_TF_NN &&
                    !(touched[d] && base.ctm == CT_TF_CROP);
        if (!same)
            return ox_ad_fail(ad, n, OX_E_UNSUPPORTED,
                              "the gradient needs the size of X's axis %d, which depends on the "
                              "input sizes",
                              d);
        axes[d].out = -1;
    }
    for (int d = 0; d < rank; d++) {
        int64_t y = ox_ad_dim(ad, n->outputs[0], d);
        if (y >= 0 && axes[d].out >= 0 && y != axes[d].out)
            return ox_ad_fail(ad, n, OX_E_INTERNAL,
                              "axis %d: %lld outputs, the gradient expects %lld", d, (long long)y,
                              (long long)axes[d].out);
    }
    return OX_OK;
}

/* Y = Resize(X): along each axis Y = R X, so dX = R^T dY along each axis, one MatMul per
 * axis whose R is not the identity (the axis moved last and back where it is not one of the
 * last two). roi, scales and sizes get no gradient. */
ox_status ox_grad_resize(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    int x = n->inputs[0], g = gy[0];
    int rank = ox_ad_rank(ad, x);
    if (g < 0 || !ox_ad_wants(ad, n, 0)) return OX_OK;
    if (rank < 1) return ox_ad_fail(ad, n, OX_E_UNSUPPORTED, "the gradient needs X of known rank");
    struct rs_axis axes[OX_MAX_RANK];
    if (rs_axes(ad, n, rank, axes)) return OX_OK;
    for (int d = 0; d < rank; d++) {
        const struct rs_axis *ax = &axes[d];
        if (ax->in < 0) continue; /* unknown size, scale 1 (rs_axes): the identity */
        size_t cells;
        if (!ox_mul_size((size_t)ax->out, (size_t)ax->in, &cells) || cells > ((size_t)1 << 26))
            return ox_ad_fail(ad, n, OX_E_UNSUPPORTED,
                              "axis %d: an interpolation matrix of %lld x %lld is too large", d,
                              (long long)ax->out, (long long)ax->in);
        double *m = calloc(cells ? cells : 1, sizeof *m),
               *row = calloc((size_t)ax->in + 1, sizeof *row);
        if (!m || !row) {
            free(m);
            free(row);
            return ox_ad_fail(ad, n, OX_E_NOMEM, "out of memory");
        }
        bool identity = ax->in == ax->out;
        /* m is R [out, in], or R^T [in, out] for the second-last axis (it multiplies from
         * the left) */
        bool left = rank >= 2 && d == rank - 2;
        for (int64_t j = 0; j < ax->out; j++) {
            memset(row, 0, sizeof *row * (size_t)ax->in);
            rs_row(ax, j, row);
            for (int64_t i = 0; i < ax->in; i++) {
                identity &= row[i] == (i == j ? 1.0 : 0.0);
                m[left ? i * ax->out + j : j * ax->in + i] = row[i];
            }
        }
        free(row);
        if (identity) {
            free(m);
            continue;
        }
        int64_t dims[2] = {left ? ax->in : ax->out, left ? ax->out : ax->in};
        int r = const_like(ad, n, x, 2, dims, m, 0);
        free(m);
        if (left) {
            g = ox_ad_matmul(ad, r, g);
        } else if (d == rank - 1) {
            g = rank == 1 ? OX_AD(ad, "MatMul", g, r) : ox_ad_matmul(ad, g, r);
        } else {
            int64_t perm[OX_MAX_RANK];
            swap_perm(rank, d, rank - 1, perm);
            g = ox_ad_transpose(ad, ox_ad_matmul(ad, ox_ad_transpose(ad, g, rank, perm), r), rank,
                                perm);
        }
    }
    gx[0] = g;
    return OX_OK;
}

/* ---- MaxUnpool ------------------------------------------------------------------------- */

/* Y holds X's values at the flat places I names, of the default output shape ((in - 1) *
 * stride + kernel - pads per spatial axis); an output_shape that differs keeps each place's
 * coordinates, cutting or adding zeros at the end of each axis. dX: gy brought back to the
 * default shape (cut, padded with zeros), flattened and gathered at I. */
ox_status ox_grad_maxunpool(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    int x = n->inputs[0], g = gy[0], rank = ox_ad_rank(ad, x);
    if (!ox_ad_wants(ad, n, 0)) return OX_OK;
    if (n->n_inputs > 2 && n->inputs[2] >= 0) {
        int nsp = rank - 2;
        const int64_t *ks;
        if (nsp < 1 || ox_attr_ints(n, "kernel_shape", &ks) != nsp)
            return ox_ad_fail(ad, n, OX_E_UNSUPPORTED,
                              "MaxUnpool needs X of known rank and its kernel_shape");
        int64_t s[OX_MAX_RANK], p[2 * OX_MAX_RANK], extra[OX_MAX_RANK], zeros[OX_MAX_RANK] = {0};
        ox_status st;
        if ((st = attr_ints(ad, n, "strides", nsp, 1, s)) ||
            (st = attr_ints(ad, n, "pads", 2 * nsp, 0, p)))
            return st;
        for (int i = 0; i < nsp; i++) extra[i] = ks[i] - p[i] - p[i + nsp] - s[i];
        /* default dims: [N, C] then in * stride + (kernel - pads - stride) */
        int shape = ox_ad_shape(ad, x);
        int head = OX_AD(ad, "Slice", shape, ox_ad_ints(ad, 1, (int64_t[]){0}),
                         ox_ad_ints(ad, 1, (int64_t[]){2}));
        int sp = OX_AD(ad, "Slice", shape, ox_ad_ints(ad, 1, (int64_t[]){2}),
                       ox_ad_ints(ad, 1, (int64_t[]){rank}));
        sp = OX_AD(ad, "Add", OX_AD(ad, "Mul", sp, ox_ad_ints(ad, nsp, s)),
                   ox_ad_ints(ad, nsp, extra));
        int def = ox_ad_opa(ad, "Concat", 2, (int[]){head, sp}, "i:axis", (int64_t)0);
        int cut = OX_AD(ad, "Slice", g, ox_ad_ints(ad, rank, zeros), def);
        ox_ad_set_info(ad, cut, ox_ad_dtype(ad, g), rank, NULL);
        int rest = OX_AD(ad, "Sub", def, ox_ad_shape(ad, cut));
        int pads = ox_ad_opa(ad, "Concat", 2, (int[]){ox_ad_ints(ad, rank, zeros), rest}, "i:axis",
                             (int64_t)0);
        g = OX_AD(ad, "Pad", cut, pads);
        ox_ad_set_info(ad, g, ox_ad_dtype(ad, x), rank, NULL);
    }
    int flat = reshape(ad, g, 1, (int64_t[]){-1});
    ox_ad_set_info(ad, flat, ox_ad_dtype(ad, x), 1, NULL);
    gx[0] = OX_AD(ad, "Gather", flat, n->inputs[1]);
    return OX_OK;
}

/* ---- RotaryEmbedding ------------------------------------------------------------------- */

/* Per head and token, the first R features pair up ((k, k + R/2), or (2k, 2k + 1) when
 * interleaved) and turn by the token's angle: y1 = c x1 - s x2, y2 = s x1 + c x2.
 * A turn's adjoint turns back: dX = RotaryEmbedding(gy, cos, -sin). The caches get, per head
 * and token, dc = g1 x1 + g2 x2 and ds = g2 x1 - g1 x2: the pair sums of gy * x and of
 * gy * x' (x' = x turned a quarter, (-x2, x1): RotaryEmbedding with cos 0 and sin 1), summed
 * over the heads, added into the rows position_ids names (or [B, S, R/2] as they are). */
struct rope_geom {
    int rank;        /* of X: 4 ([B, H, S, D]) or 3 ([B, S, H*D]) */
    int64_t H, D, R; /* heads (3-D), head size, rotated features */
    bool interleaved;
};

/* v [B, H, S, D] or [B, S, H*D] -> the pair sums of its rotated features over the heads,
 * [B, S, R/2]. */
static int rope_pair_sums(struct ox_ad *ad, const struct rope_geom *rg, int v) {
    ox_dtype dt = ox_ad_dtype(ad, v);
    int64_t half = rg->R / 2;
    if (rg->rank == 3) v = reshape(ad, v, 4, (int64_t[]){0, 0, rg->H, rg->D});
    ox_ad_set_info(ad, v, dt, 4, NULL);
    int last = ox_ad_ints(ad, 1, (int64_t[]){-1});
    if (rg->R < rg->D) {
        v = OX_AD(ad, "Slice", v, ox_ad_ints(ad, 1, (int64_t[]){0}),
                  ox_ad_ints(ad, 1, (int64_t[]){rg->R}), last);
        ox_ad_set_info(ad, v, dt, 4, NULL);
    }
    if (rg->interleaved) {
        v = reshape(ad, v, 5, (int64_t[]){0, 0, 0, half, 2});
        ox_ad_set_info(ad, v, dt, 5, NULL);
        v = ox_ad_reduce(ad, "ReduceSum", v, 1, (int64_t[]){4}, false);
    } else {
        int a = OX_AD(ad, "Slice", v, ox_ad_ints(ad, 1, (int64_t[]){0}),
                      ox_ad_ints(ad, 1, (int64_t[]){half}), last);
        int b = OX_AD(ad, "Slice", v, ox_ad_ints(ad, 1, (int64_t[]){half}),
                      ox_ad_ints(ad, 1, (int64_t[]){rg->R}), last);
        ox_ad_set_info(ad, a, dt, 4, NULL);
        ox_ad_set_info(ad, b, dt, 4, NULL);
        v = ox_ad_add(ad, a, b);
    }
    ox_ad_set_info(ad, v, dt, 4, NULL);
    return ox_ad_reduce(ad, "ReduceSum", v, 1, (int64_t[]){rg->rank == 4 ? 1 : 2}, false);
}

/* The cache's gradient from the per-token sums d [B, S, R/2]. */
static int rope_cache_grad(struct ox_ad *ad, int cache, int pos, int d) {
    if (pos < 0) return d;
    int where = ox_ad_unsqueeze(ad, pos, 1, (int64_t[]){-1});
    return ox_ad_opa(ad, "ScatterND", 3, (int[]){ox_ad_zeros_like(ad, cache), where, d},
                     "s:reduction", "add");
}

ox_status ox_grad_rotary(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    int x = n->inputs[0], cs = n->inputs[1], sn = n->inputs[2], g = gy[0];
    int pos = n->n_inputs > 3 ? n->inputs[3] : -1;
    int n_in = pos >= 0 ? 4 : 3;
    if (ox_ad_wants(ad, n, 0)) {
        int in[4] = {g, cs, ox_ad_neg(ad, sn), pos};
        struct ox_node *nd = ox_ad_node(ad, "RotaryEmbedding", n_in, in, 1, &gx[0]);
        if (nd) copy_attrs(ad, nd, n, NULL);
    }
    bool wc = ox_ad_wants(ad, n, 1), ws = ox_ad_wants(ad, n, 2);
    if (!wc && !ws) return OX_OK;
    struct rope_geom rg = {.rank = ox_ad_rank(ad, x),
                           .interleaved = ox_attr_int(n, "interleaved", 0) != 0};
    if (rg.rank == 4) {
        rg.D = ox_ad_dim(ad, x, 3);
    } else if (rg.rank == 3) {
        rg.H = ox_attr_int(n, "num_heads", 0);
        int64_t hidden = ox_ad_dim(ad, x, 2);
        rg.D = rg.H > 0 && hidden >= 0 ? hidden / rg.H : -1;
    } else {
        rg.D = -1;
    }
    rg.R = ox_attr_int(n, "rotary_embedding_dim", 0);
    if (rg.R == 0) rg.R = rg.D;
    if (rg.D < 1 || rg.R < 2 || rg.R > rg.D || rg.R % 2)
        return ox_ad_fail(ad, n, OX_E_UNSUPPORTED,
                          "the caches' gradients need X of rank 3 or 4 with a known head size");
    if (wc) gx[1] = rope_cache_grad(ad, cs, pos, rope_pair_sums(ad, &rg, ox_ad_mul(ad, g, x)));
    if (ws) {
        int in[4] = {x, ox_ad_zeros_like(ad, cs), ox_ad_ones_like(ad, sn), pos};
        int turned = -1;
        struct ox_node *nd = ox_ad_node(ad, "RotaryEmbedding", n_in, in, 1, &turned);
        if (nd) copy_attrs(ad, nd, n, NULL);
        ox_ad_info_as(ad, turned, x, OX_UNDEFINED);
        gx[2] = rope_cache_grad(ad, sn, pos, rope_pair_sums(ad, &rg, ox_ad_mul(ad, g, turned)));
    }
    return OX_OK;
}

/* ---- Col2Im, AffineGrid ---------------------------------------------------------------- */

/* Col2Im (opset 18) adds column (c, k) at block position o into image position
 * o * s - pb + k * d: its adjoint reads those positions, a Conv of gy viewed as
 * [N * C, 1, image...] with a one-hot kernel [K, 1, block...] (kernel k picks offset k)
 * under the same strides, dilations and pads, giving [N * C, K, blocks...] = x's layout. */
ox_status ox_grad_col2im(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    int x = n->inputs[0];
    if (!ox_ad_wants(ad, n, 0)) return OX_OK;
    int64_t block[NSP_MAX], dims[NSP_MAX + 2];
    int nsp = 0;
    if (!ox_ad_const_ints(ad, n->inputs[2], NSP_MAX, block, &nsp) || nsp < 1)
        return ox_ad_fail(ad, n, OX_E_UNSUPPORTED,
                          "Col2Im needs a constant block_shape of 1 to %d values", NSP_MAX);
    int64_t K = 1;
    for (int i = 0; i < nsp; i++) {
        if (block[i] < 1 || block[i] > 4096)
            return ox_ad_fail(ad, n, OX_E_UNSUPPORTED, "block_shape[%d] = %lld", i,
                              (long long)block[i]);
        K *= block[i];
    }
    if (K > 65536) return ox_ad_fail(ad, n, OX_E_UNSUPPORTED, "a block of %lld", (long long)K);
    double *w = calloc((size_t)(K * K), sizeof *w);
    if (!w) return ox_ad_fail(ad, n, OX_E_NOMEM, "out of memory");
    for (int64_t k = 0; k < K; k++) w[k * K + k] = 1; /* [K, 1, block...]: row k, offset k */
    dims[0] = K, dims[1] = 1;
    for (int i = 0; i < nsp; i++) dims[i + 2] = block[i];
    int kern = const_like(ad, n, x, nsp + 2, dims, w, 0);
    free(w);
    int64_t view[NSP_MAX + 2] = {-1, 1, 0, 0, 0}; /* 0: gy's image dims, in place */
    int img = reshape(ad, gy[0], nsp + 2, view);
    ox_ad_set_info(ad, img, ox_ad_dtype(ad, x), nsp + 2, NULL);
    int out = -1;
    struct ox_node *nd = ox_ad_node(ad, "Conv", 2, (int[]){img, kern}, 1, &out);
    if (nd) copy_attrs(ad, nd, n, NULL);
    ox_ad_set_info(ad, out, ox_ad_dtype(ad, x), nsp + 2, NULL);
    gx[0] = ox_ad_reshape_like(ad, out, x);
    return OX_OK;
}

/* AffineGrid (opset 20): grid[n, p, i] = sum_k theta[n, i, k] base[p, k], base the
 * homogeneous points (x, y[, z], 1) of the output grid. dtheta[n] = gy[n]^T base, with the
 * points from an AffineGrid of the identity for one image, and a column of ones. */
ox_status ox_grad_affine_grid(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx) {
    int theta = n->inputs[0], y = n->outputs[0];
    int r = ox_ad_rank(ad, y) - 2;
    if (!ox_ad_wants(ad, n, 0)) return OX_OK;
    if (r < 2 || r > 3)
        return ox_ad_fail(ad, n, OX_E_UNSUPPORTED, "AffineGrid needs a grid of known rank");
    double eye[12] = {0};
    for (int i = 0; i < r; i++) eye[i * (r + 1) + i] = 1;
    int id = const_like(ad, n, theta, 3, (int64_t[]){1, r, r + 1}, eye, 0);
    int size = n->inputs[1];
    int rest = OX_AD(ad, "Slice", size, ox_ad_ints(ad, 1, (int64_t[]){1}),
                     ox_ad_ints(ad, 1, (int64_t[]){r + 2}));
    int one = ox_ad_opa(ad, "Concat", 2, (int[]){ox_ad_ints(ad, 1, (int64_t[]){1}), rest}, "i:axis",
                        (int64_t)0);
    int pts = -1;
    struct ox_node *nd = ox_ad_node(ad, "AffineGrid", 2, (int[]){id, one}, 1, &pts);
    if (nd) copy_attrs(ad, nd, n, NULL);
    ox_ad_set_info(ad, pts, ox_ad_dtype(ad, theta), r + 2, NULL);
    pts = reshape(ad, pts, 3, (int64_t[]){1, -1, r}); /* [1, P, r] */
    ox_ad_set_info(ad, pts, ox_ad_dtype(ad, theta), 3, NULL);
    int col = OX_AD(ad, "Slice", pts, ox_ad_ints(ad, 1, (int64_t[]){0}),
                    ox_ad_ints(ad, 1, (int64_t[]){1}), ox_ad_ints(ad, 1, (int64_t[]){2}));
    ox_ad_set_info(ad, col, ox_ad_dtype(ad, theta), 3, NULL);
    int ones = ox_ad_ones_like(ad, col); /* [1, P, 1] */
    int base = ox_ad_opa(ad, "Concat", 2, (int[]){pts, ones}, "i:axis", (int64_t)2);
    ox_ad_set_info(ad, base, ox_ad_dtype(ad, theta), 3, NULL);
    int g = reshape(ad, gy[0], 3, (int64_t[]){0, -1, r}); /* [N, P, r] */
    ox_ad_set_info(ad, g, ox_ad_dtype(ad, theta), 3, NULL);
    gx[0] = ox_ad_matmul(ad, ox_ad_transpose(ad, g, 3, (int64_t[]){0, 2, 1}), base);
    return OX_OK;
}
