/* Classical machine-learning operators: LabelEncoder (ai.onnx.ml 2 on, tensor attributes
 * from 4), Binarizer and ArrayFeatureExtractor (ai.onnx.ml 1 on), TreeEnsemble (ai.onnx.ml 5
 * on), TreeEnsembleRegressor and TreeEnsembleClassifier (ai.onnx.ml 1 on), the
 * preprocessing and linear models of scikit-learn pipelines (Scaler, Normalizer, Imputer,
 * LinearRegressor, LinearClassifier, OneHotEncoder, FeatureVectorizer, CategoryMapper, and
 * ZipMap, whose output is a sequence of maps: ai.onnx.ml 1 on), the operators that take maps
 * (DictVectorizer, CastMap: ai.onnx.ml 1 on) and TfIdfVectorizer (default domain, 9 on).
 * The support vector machines are in svm.c.
 *
 * Every tree ensemble, of any version, is compiled once per plan into one `struct forest`
 * (prepared memory) that the same row loop walks.
 *
 * Lookups (LabelEncoder keys, TfIdfVectorizer n-gram pools) sort an index of the attribute's
 * entries in scratch on each run and binary-search it, so a run costs O((n + k) log k).
 * String outputs borrow the node's attribute strings, which live as long as the model.
 */
#include "kernels/cpu/ml.h"

#include <ctype.h>
#include <float.h>
#include <stdio.h>
#include <stdlib.h>

/* In-place heap sort of idx[0..n) by cmp(a, b, ctx) (negative, zero, positive). */
typedef int (*ml_cmp_fn)(int64_t a, int64_t b, const void *ctx);

static void sift_down(int64_t *idx, int64_t root, int64_t n, ml_cmp_fn cmp, const void *ctx) {
    for (;;) {
        int64_t c = 2 * root + 1;
        if (c >= n) return;
        if (c + 1 < n && cmp(idx[c], idx[c + 1], ctx) < 0) c++;
        if (cmp(idx[root], idx[c], ctx) >= 0) return;
        int64_t t = idx[root];
        idx[root] = idx[c], idx[c] = t;
        root = c;
    }
}

static void heap_sort(int64_t *idx, int64_t n, ml_cmp_fn cmp, const void *ctx) {
    for (int64_t i = n / 2 - 1; i >= 0; i--) sift_down(idx, i, n, cmp, ctx);
    for (int64_t end = n - 1; end > 0; end--) {
        int64_t t = idx[0];
        idx[0] = idx[end], idx[end] = t;
        sift_down(idx, 0, end, cmp, ctx);
    }
}

static const char *tensor_str(const ox_tensor *t, int64_t i) {
    const char *s = ((char *const *)t->data)[i];
    return s ? s : "";
}

/* ---- LabelEncoder ----------------------------------------------------------------------- */

/* A typed list read from an attribute: a list kind (floats, ints, strings) or a tensor. */
struct ml_list {
    ox_dtype dt; /* OX_FLOAT, OX_INT64, OX_STRING from lists; any from tensors */
    int64_t n;
    const ox_tensor *t;   /* tensor attributes */
    const float *f;       /* floats */
    const int64_t *i;     /* ints */
    const char *const *s; /* strings */
};

enum { KEY_NUM, KEY_INT, KEY_STR };

static int key_family(ox_dtype dt) {
    if (dt == OX_STRING) return KEY_STR;
    if (dt == OX_FLOAT || dt == OX_DOUBLE || dt == OX_FLOAT16 || dt == OX_BFLOAT16) return KEY_NUM;
    return KEY_INT;
}

static double list_f64(const struct ml_list *l, int64_t k) {
    return l->t ? ox_get_f64(l->t, k) : l->f ? l->f[k] : (double)l->i[k];
}

static int64_t list_i64(const struct ml_list *l, int64_t k) {
    return l->t ? ox_get_i64(l->t, k) : l->i ? l->i[k] : (int64_t)l->f[k];
}

static const char *list_str(const struct ml_list *l, int64_t k) {
    if (l->t) return tensor_str(l->t, k);
    return l->s[k] ? l->s[k] : "";
}

/* The list named `<prefix>_tensor` (opset 4 on), `_strings`, `_int64s` or `_floats`. */
static ox_status read_list(const struct ox_node *n, const char *prefix, struct ml_list *l) {
    char name[64];
    memset(l, 0, sizeof *l);
    int found = 0;
    const struct ox_attr *a;
    snprintf(name, sizeof name, "%s_tensor", prefix);
    if ((a = ox_node_attr(n, name)) && a->type == OX_ATTR_TENSOR && a->t) {
        if (n->opset < 4)
            return ox_node_err(n, OX_E_INVALID, "attribute '%s' needs ai.onnx.ml opset 4", name);
        if (a->t->kind != OX_IO_TENSOR ||
            (a->t->dtype != OX_STRING && !a->t->data && ox_tensor_numel(a->t) > 0))
            return ox_node_err(n, OX_E_INVALID, "attribute '%s' has no data", name);
        l->dt = a->t->dtype, l->n = ox_tensor_numel(a->t), l->t = a->t, found++;
        ox_dtype dt = l->dt;
        if (dt != OX_STRING && dt != OX_INT64 && dt != OX_INT32 && dt != OX_INT16 &&
            dt != OX_FLOAT && dt != OX_DOUBLE)
            return ox_node_err(n, OX_E_UNSUPPORTED, "attribute '%s' of type %s", name,
                               ox_dtype_name(dt));
    }
    snprintf(name, sizeof name, "%s_strings", prefix);
    if ((a = ox_node_attr(n, name)) && a->type == OX_ATTR_STRINGS)
        l->dt = OX_STRING, l->n = a->n, l->s = a->strings, found++;
    snprintf(name, sizeof name, "%s_int64s", prefix);
    if ((a = ox_node_attr(n, name)) && a->type == OX_ATTR_INTS)
        l->dt = OX_INT64, l->n = a->n, l->i = a->ints, found++;
    snprintf(name, sizeof name, "%s_floats", prefix);
    if ((a = ox_node_attr(n, name)) && a->type == OX_ATTR_FLOATS)
        l->dt = OX_FLOAT, l->n = a->n, l->f = a->floats, found++;
    if (found != 1)
        return ox_node_err(n, OX_E_INVALID,
                           "exactly one of the %s_* attributes must be set, "
                           "found %d",
                           prefix, found);
    return OX_OK;
}

static ox_status le_read(const struct ox_node *n, const ox_tensor *x, struct ml_list *keys,
                         struct ml_list *vals) {
    ox_status s;
    if (!x) return ox_node_err(n, OX_E_INVALID, "input is required");
    if ((s = read_list(n, "keys", keys)) || (s = read_list(n, "values", vals))) return s;
    if (keys->n != vals->n)
        return ox_node_err(n, OX_E_INVALID, "%lld keys but %lld values", (long long)keys->n,
                           (long long)vals->n);
    if (key_family(x->dtype) != key_family(keys->dt))
        return ox_node_err(n, OX_E_INVALID, "input of type %s, keys of type %s",
                           ox_dtype_name(x->dtype), ox_dtype_name(keys->dt));
    const struct ox_attr *d = ox_node_attr(n, "default_tensor");
    if (d && d->type == OX_ATTR_TENSOR && d->t) {
        if (d->t->dtype != vals->dt || ox_tensor_numel(d->t) != 1 ||
            (d->t->dtype != OX_STRING && !d->t->data))
            return ox_node_err(n, OX_E_INVALID, "default_tensor must hold one %s",
                               ox_dtype_name(vals->dt));
    }
    return OX_OK;
}

ox_status ox_sig_infer_label_encoder(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                     const ox_tensor *const *in, ox_tensor *const *out) {
    struct ml_list keys, vals;
    const ox_tensor *x = ox_in(n, in, 0);
    ox_status s = le_read(n, x, &keys, &vals);
    if (s) return s;
    ox_set_shape(out[0], vals.dt, x->rank, x->dims);
    size_t bytes;
    if (!ox_mul_size((size_t)keys.n, sizeof(int64_t), &bytes))
        return ox_node_err(n, OX_E_NOMEM, "too many keys");
    ctx->scratch_bytes = bytes;
    return OX_OK;
}

/* Keys compare by value in their family; floats by bits, all NaNs equal. */
static int num_cmp(double a, double b) {
    if (isnan(a) || isnan(b)) return isnan(a) - isnan(b);
    if (a < b) return -1;
    if (a > b) return 1;
    return signbit(a) == signbit(b) ? 0 : signbit(a) ? -1 : 1; /* -0 before +0 */
}

static int key_cmp(int64_t a, int64_t b, const void *ctx) {
    const struct ml_list *k = ctx;
    switch (key_family(k->dt)) {
    case KEY_STR: return strcmp(list_str(k, a), list_str(k, b));
    case KEY_NUM: return num_cmp(list_f64(k, a), list_f64(k, b));
    default: {
        int64_t x = list_i64(k, a), y = list_i64(k, b);
        return x < y ? -1 : x > y;
    }
    }
}

/* Compare input element e of x with key k. */
static int input_key_cmp(const ox_tensor *x, int64_t e, const struct ml_list *keys, int64_t k) {
    switch (key_family(keys->dt)) {
    case KEY_STR: return strcmp(tensor_str(x, e), list_str(keys, k));
    case KEY_NUM: return num_cmp(ox_get_f64(x, e), list_f64(keys, k));
    default: {
        int64_t a = ox_get_i64(x, e), b = list_i64(keys, k);
        return a < b ? -1 : a > b;
    }
    }
}

ox_status ox_sig_cpu_label_encoder(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                                   const ox_tensor *const *in, ox_tensor *const *out) {
    struct ml_list keys, vals;
    const ox_tensor *x = in[0];
    ox_tensor *y = out[0];
    ox_status s = le_read(n, x, &keys, &vals);
    if (s) return s;
    if (ctx->scratch_bytes < (size_t)keys.n * sizeof(int64_t))
        return ox_node_err(n, OX_E_INTERNAL, "scratch smaller than inferred");
    int64_t *idx = ctx->scratch;
    for (int64_t k = 0; k < keys.n; k++) idx[k] = k;
    heap_sort(idx, keys.n, key_cmp, &keys);
    /* the default value */
    const struct ox_attr *dt_attr = ox_node_attr(n, "default_tensor");
    const ox_tensor *dflt = dt_attr && dt_attr->type == OX_ATTR_TENSOR ? dt_attr->t : NULL;
    const char *dstr = "_Unused";
    double dnum = -0.0;
    int64_t dint = -1;
    if (dflt) {
        if (vals.dt == OX_STRING)
            dstr = tensor_str(dflt, 0);
        else
            dnum = ox_get_f64(dflt, 0), dint = ox_get_i64(dflt, 0);
    } else if (!vals.t) {
        dstr = ox_attr_str(n, "default_string", "_Unused");
        dnum = ox_attr_float(n, "default_float", -0.0f);
        dint = ox_attr_int(n, "default_int64", -1);
    }
    int64_t total = ox_tensor_numel(x);
    for (int64_t e = 0; e < total; e++) {
        int64_t lo = 0, hi = keys.n, hit = -1;
        while (lo < hi) {
            int64_t mid = lo + (hi - lo) / 2;
            int c = input_key_cmp(x, e, &keys, idx[mid]);
            if (c == 0) {
                hit = idx[mid];
                break;
            }
            if (c < 0)
                hi = mid;
            else
                lo = mid + 1;
        }
        switch (key_family(vals.dt)) {
        case KEY_STR:
            ((char **)y->data)[e] = (char *)(hit >= 0 ? list_str(&vals, hit) : dstr);
            break;
        case KEY_NUM: ox_set_f64(y, e, hit >= 0 ? list_f64(&vals, hit) : dnum); break;
        default: ox_set_i64(y, e, hit >= 0 ? list_i64(&vals, hit) : dint); break;
        }
    }
    return OX_OK;
}

/* ---- Binarizer -------------------------------------------------------------------------- */

static bool is_ml_num(ox_dtype dt) {
    return dt == OX_FLOAT || dt == OX_DOUBLE || dt == OX_INT64 || dt == OX_INT32;
}

/* Rows and features of a classical-ML input: [N, F], or [F] as one row. */
ox_status ox_ml_rows(const struct ox_node *n, const ox_tensor *x, int64_t *N, int64_t *F) {
    if (!x) return ox_node_err(n, OX_E_INVALID, "input X is required");
    if (!is_ml_num(x->dtype))
        return ox_node_err(n, OX_E_UNSUPPORTED,
                           "element type %s: expected float, double, int64 or int32",
                           ox_dtype_name(x->dtype));
    if (x->rank != 1 && x->rank != 2)
        return ox_node_err(n, OX_E_SHAPE, "input must be [N, F] or [F], got rank %d", x->rank);
    *N = x->rank == 2 ? x->dims[0] : 1;
    *F = x->dims[x->rank - 1];
    return OX_OK;
}

ox_status ox_sig_infer_binarizer(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                 const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    const ox_tensor *x = ox_in(n, in, 0);
    if (!x) return ox_node_err(n, OX_E_INVALID, "input is required");
    if (!is_ml_num(x->dtype))
        return ox_node_err(n, OX_E_UNSUPPORTED,
                           "element type %s: expected float, double, "
                           "int64 or int32",
                           ox_dtype_name(x->dtype));
    ox_set_like(out[0], x);
    return OX_OK;
}

ox_status ox_sig_cpu_binarizer(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                               const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    const ox_tensor *x = in[0];
    double th = ox_attr_float(n, "threshold", 0.0f);
    int64_t total = ox_tensor_numel(x);
    if (x->dtype == OX_FLOAT) {
        const float *a = x->data;
        float *b = out[0]->data, t = (float)th;
        for (int64_t i = 0; i < total; i++) b[i] = a[i] > t ? 1.0f : 0.0f;
        return OX_OK;
    }
    for (int64_t i = 0; i < total; i++) ox_set_f64(out[0], i, ox_get_f64(x, i) > th ? 1.0 : 0.0);
    return OX_OK;
}

/* ---- ArrayFeatureExtractor -------------------------------------------------------------- */

ox_status ox_sig_infer_afe(struct ox_infer_ctx *ctx, const struct ox_node *n,
                           const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    const ox_tensor *x = ox_in(n, in, 0), *idx = ox_in(n, in, 1);
    if (!x || !idx) return ox_node_err(n, OX_E_INVALID, "inputs X and Y are required");
    if (!is_ml_num(x->dtype) && x->dtype != OX_STRING)
        return ox_node_err(n, OX_E_UNSUPPORTED, "element type %s is not supported",
                           ox_dtype_name(x->dtype));
    if (idx->dtype != OX_INT64)
        return ox_node_err(n, OX_E_INVALID, "indices must be int64, got %s",
                           ox_dtype_name(idx->dtype));
    if (x->rank < 1) return ox_node_err(n, OX_E_SHAPE, "input must have rank >= 1");
    int64_t dims[OX_MAX_RANK], k = ox_tensor_numel(idx);
    if (x->rank == 1) { /* a vector gives one row, as onnxruntime does */
        dims[0] = 1, dims[1] = k;
        ox_set_shape(out[0], x->dtype, 2, dims);
        return OX_OK;
    }
    for (int i = 0; i < x->rank - 1; i++) dims[i] = x->dims[i];
    dims[x->rank - 1] = k;
    ox_set_shape(out[0], x->dtype, x->rank, dims);
    return OX_OK;
}

ox_status ox_sig_cpu_afe(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                         const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    const ox_tensor *x = in[0], *idx = in[1];
    int64_t last = x->dims[x->rank - 1], k = ox_tensor_numel(idx);
    int64_t rows = 1;
    for (int i = 0; i < x->rank - 1; i++) rows *= x->dims[i];
    const int64_t *ix = idx->data;
    for (int64_t j = 0; j < k; j++)
        if (ix[j] < 0 || ix[j] >= last)
            return ox_node_err(n, OX_E_INVALID, "index %lld out of range [0, %lld)",
                               (long long)ix[j], (long long)last);
    size_t es = ox_dtype_size(x->dtype);
    const char *src = x->data;
    char *dst = out[0]->data;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < k; j++)
            memcpy(dst + (size_t)(r * k + j) * es, src + (size_t)(r * last + ix[j]) * es, es);
    return OX_OK;
}

/* ---- TreeEnsemble ----------------------------------------------------------------------- */

/* Its attributes are read and checked here (tree_read); it runs as a compiled forest
 * (forest_build_v5, after the opset 1/3 ensembles below). */

enum { BR_LEQ, BR_LT, BR_GTE, BR_GT, BR_EQ, BR_NEQ, BR_MEMBER };
enum { AGG_AVERAGE, AGG_SUM, AGG_MIN, AGG_MAX };

/* The comparisons of the tree ensembles' branches (every version), v against split sp. */
static inline bool branch_go(int mode, double v, double sp) {
    switch (mode) {
    case BR_LEQ: return v <= sp;
    case BR_LT: return v < sp;
    case BR_GTE: return v >= sp;
    case BR_GT: return v > sp;
    case BR_EQ: return v == sp;
    default: return v != sp;
    }
}

struct tree {
    int64_t n_nodes, n_leaves, n_roots, n_targets, n_members, n_features;
    const int64_t *feat, *tid, *fid, *tleaf, *fleaf, *ltarget, *roots, *missing;
    const ox_tensor *modes, *splits, *weights, *members;
    int agg, post;
};

static ox_status ints_attr(const struct ox_node *n, const char *name, bool required,
                           const int64_t **v, int64_t *count) {
    int c = ox_attr_ints(n, name, v);
    if (c < 0) {
        *v = NULL;
        *count = 0;
        return required ? ox_node_err(n, OX_E_INVALID, "attribute '%s' is required", name) : OX_OK;
    }
    *count = c;
    return OX_OK;
}

static const ox_tensor *tensor_attr(const struct ox_node *n, const char *name) {
    const struct ox_attr *a = ox_node_attr(n, name);
    return a && a->type == OX_ATTR_TENSOR && a->t && a->t->kind == OX_IO_TENSOR ? a->t : NULL;
}

/* The attributes; `full` also checks every node, set and leaf (infer: once per plan; the
 * kernel's runs read the compiled forest). */
static ox_status tree_read(const struct ox_node *n, const ox_tensor *x, bool full, struct tree *t) {
    if (!x) return ox_node_err(n, OX_E_INVALID, "input is required");
    if (x->dtype != OX_FLOAT && x->dtype != OX_DOUBLE && x->dtype != OX_FLOAT16)
        return ox_node_err(n, OX_E_UNSUPPORTED, "element type %s: expected a float type",
                           ox_dtype_name(x->dtype));
    if (x->rank != 2)
        return ox_node_err(n, OX_E_SHAPE, "input must be [N, F], got rank %d", x->rank);
    t->n_features = x->dims[1];
    ox_status s;
    int64_t c[7];
    if ((s = ints_attr(n, "nodes_featureids", true, &t->feat, &c[0])) ||
        (s = ints_attr(n, "nodes_truenodeids", true, &t->tid, &c[1])) ||
        (s = ints_attr(n, "nodes_falsenodeids", true, &t->fid, &c[2])) ||
        (s = ints_attr(n, "nodes_trueleafs", true, &t->tleaf, &c[3])) ||
        (s = ints_attr(n, "nodes_falseleafs", true, &t->fleaf, &c[4])) ||
        (s = ints_attr(n, "leaf_targetids", true, &t->ltarget, &c[5])) ||
        (s = ints_attr(n, "tree_roots", true, &t->roots, &t->n_roots)) ||
        (s = ints_attr(n, "nodes_missing_value_tracks_true", false, &t->missing, &c[6])))
        return s;
    t->modes = tensor_attr(n, "nodes_modes");
    t->splits = tensor_attr(n, "nodes_splits");
    t->weights = tensor_attr(n, "leaf_weights");
    t->members = tensor_attr(n, "membership_values");
    if (!t->modes || !t->splits || !t->weights)
        return ox_node_err(n, OX_E_INVALID,
                           "attributes nodes_modes, nodes_splits and leaf_weights are required");
    t->n_nodes = c[0];
    t->n_leaves = c[5];
    if (c[1] != t->n_nodes || c[2] != t->n_nodes || c[3] != t->n_nodes || c[4] != t->n_nodes ||
        ox_tensor_numel(t->modes) != t->n_nodes || ox_tensor_numel(t->splits) != t->n_nodes ||
        (t->missing && c[6] != t->n_nodes))
        return ox_node_err(n, OX_E_INVALID, "the nodes_* attributes differ in length");
    if (ox_tensor_numel(t->weights) != t->n_leaves)
        return ox_node_err(n, OX_E_INVALID, "leaf_weights has %lld values for %lld leaves",
                           (long long)ox_tensor_numel(t->weights), (long long)t->n_leaves);
    if (!ox_dtype_is_int(t->modes->dtype) ||
        (t->splits->dtype != OX_FLOAT && t->splits->dtype != OX_DOUBLE &&
         t->splits->dtype != OX_FLOAT16) ||
        (t->weights->dtype != OX_FLOAT && t->weights->dtype != OX_DOUBLE &&
         t->weights->dtype != OX_FLOAT16) ||
        (t->n_nodes && (!t->modes->data || !t->splits->data)) || (t->n_leaves && !t->weights->data))
        return ox_node_err(n, OX_E_INVALID,
                           "nodes_modes must be integers, nodes_splits and "
                           "leaf_weights floats");
    if (t->n_nodes + t->n_leaves >= INT32_MAX)
        return ox_node_err(n, OX_E_UNSUPPORTED, "more than 2^31 nodes and leaves");
    t->n_members = 0;
    if (t->members) {
        if (!ox_dtype_is_float(t->members->dtype) ||
            (ox_tensor_numel(t->members) && !t->members->data))
            return ox_node_err(n, OX_E_INVALID, "membership_values must be floats");
        t->n_members = ox_tensor_numel(t->members);
    }
    int64_t n_member_nodes = 0, n_sets = 0;
    for (int64_t i = 0; full && i < t->n_nodes; i++) {
        int64_t m = ox_get_i64(t->modes, i);
        if (m < BR_LEQ || m > BR_MEMBER)
            return ox_node_err(n, OX_E_INVALID, "node %lld: mode %lld", (long long)i, (long long)m);
        n_member_nodes += m == BR_MEMBER;
        if (t->feat[i] < 0 || t->feat[i] >= t->n_features)
            return ox_node_err(n, OX_E_INVALID, "node %lld: feature %lld out of range [0, %lld)",
                               (long long)i, (long long)t->feat[i], (long long)t->n_features);
        int64_t ids[2] = {t->tid[i], t->fid[i]}, leaf[2] = {t->tleaf[i], t->fleaf[i]};
        for (int k = 0; k < 2; k++) {
            int64_t lim = leaf[k] ? t->n_leaves : t->n_nodes;
            if (ids[k] < 0 || ids[k] >= lim)
                return ox_node_err(n, OX_E_INVALID, "node %lld: %s branch %lld out of range",
                                   (long long)i, k ? "false" : "true", (long long)ids[k]);
        }
    }
    for (int64_t j = 0; full && j < t->n_members; j++) n_sets += isnan(ox_get_f64(t->members, j));
    if (n_member_nodes && n_sets != n_member_nodes)
        return ox_node_err(n, OX_E_INVALID,
                           "%lld set-membership nodes but %lld NaN-delimited "
                           "sets in membership_values",
                           (long long)n_member_nodes, (long long)n_sets);
    int64_t most = -1;
    bool has_targets = ox_node_attr(n, "n_targets") != NULL;
    for (int64_t i = 0; (full || !has_targets) && i < t->n_leaves; i++) {
        if (t->ltarget[i] < 0)
            return ox_node_err(n, OX_E_INVALID, "leaf %lld: negative target", (long long)i);
        if (t->ltarget[i] > most) most = t->ltarget[i];
    }
    t->n_targets = ox_attr_int(n, "n_targets", most + 1);
    if (t->n_targets < 0 || most >= t->n_targets)
        return ox_node_err(n, OX_E_INVALID, "leaf target %lld outside n_targets %lld",
                           (long long)most, (long long)t->n_targets);
    for (int64_t r = 0; r < t->n_roots; r++)
        if (t->roots[r] < 0 || t->roots[r] >= t->n_nodes)
            return ox_node_err(n, OX_E_INVALID, "tree root %lld out of range",
                               (long long)t->roots[r]);
    t->agg = (int)ox_attr_int(n, "aggregate_function", AGG_SUM);
    t->post = (int)ox_attr_int(n, "post_transform", POST_NONE);
    if (t->agg < AGG_AVERAGE || t->agg > AGG_MAX)
        return ox_node_err(n, OX_E_INVALID, "aggregate_function %d", t->agg);
    if (t->post < POST_NONE || t->post > POST_PROBIT)
        return ox_node_err(n, OX_E_INVALID, "post_transform %d", t->post);
    return OX_OK;
}

/* Inverse of the error function: a rational first guess refined by Newton steps. */
static double erfinv(double y) {
    if (y <= -1) return -INFINITY;
    if (y >= 1) return INFINITY;
    double w = -log((1.0 - y) * (1.0 + y)), x;
    if (w < 5) { /* Giles' single-precision approximation as the starting point */
        w -= 2.5;
        x = 2.81022636e-08;
        x = 3.43273939e-07 + x * w;
        x = -3.5233877e-06 + x * w;
        x = -4.39150654e-06 + x * w;
        x = 0.00021858087 + x * w;
        x = -0.00125372503 + x * w;
        x = -0.00417768164 + x * w;
        x = 0.246640727 + x * w;
        x = 1.50140941 + x * w;
    } else {
        w = sqrt(w) - 3;
        x = -0.000200214257;
        x = 0.000100950558 + x * w;
        x = 0.00134934322 + x * w;
        x = -0.00367342844 + x * w;
        x = 0.00573950773 + x * w;
        x = -0.0076224613 + x * w;
        x = 0.00943887047 + x * w;
        x = 1.00167406 + x * w;
        x = 2.83297682 + x * w;
    }
    x *= y;
    for (int i = 0; i < 2; i++) x -= (erf(x) - y) / (2.0 / sqrt(M_PI) * exp(-x * x));
    return x;
}

/* The post transforms (ml.h). */
void ox_ml_post_apply(int post, double *acc, int64_t T) {
    if (post == POST_SOFTMAX || post == POST_SOFTMAX_ZERO) {
        double mx = -INFINITY, sum = 0;
        for (int64_t k = 0; k < T; k++)
            if ((post == POST_SOFTMAX || acc[k] != 0) && acc[k] > mx) mx = acc[k];
        for (int64_t k = 0; k < T; k++) {
            if (post == POST_SOFTMAX_ZERO && acc[k] == 0) continue;
            acc[k] = exp(acc[k] - mx);
            sum += acc[k];
        }
        for (int64_t k = 0; k < T; k++)
            if (sum > 0 && (post == POST_SOFTMAX || acc[k] != 0)) acc[k] /= sum;
    } else if (post == POST_LOGISTIC) {
        for (int64_t k = 0; k < T; k++) acc[k] = 1.0 / (1.0 + exp(-acc[k]));
    } else if (post == POST_PROBIT) {
        for (int64_t k = 0; k < T; k++) acc[k] = M_SQRT2 * erfinv(2.0 * acc[k] - 1.0);
    }
}

/* ---- TreeEnsembleRegressor and TreeEnsembleClassifier (ai.onnx.ml 1 and 3) ------------- */

/* What scikit-learn, XGBoost and LightGBM models converted to ONNX hold. Nodes are named by
 * (tree id, node id) pairs in parallel lists (nodes_*), each branch naming its children by
 * node id within its tree; a tree's root is its first node in the lists; weights
 * (target_* / class_*) name a leaf by its pair and add to one output column each, so a leaf
 * may feed several. The lists are compiled once per plan into `struct forest` (prepared
 * memory; scratch when the plan gives none): nodes by index with their children resolved,
 * each leaf's weights contiguous, the roots in tree-id order.
 *
 * Semantics (ONNX's reference implementation where ONNX Runtime departs from it):
 * - a NaN feature goes the true way where nodes_missing_value_tracks_true says so, else by
 *   the comparison (false, except BRANCH_NEQ);
 * - the regressor aggregates each column by SUM, AVERAGE (the sum over the number of trees),
 *   MIN or MAX, then adds base_values (one value for every column, or one per column); a MIN
 *   or MAX column that no reached leaf feeds is its base value (0 without one);
 * - the classifier sums each class's weights onto its base value; where every weight is for
 *   one class of two (a binary model: XGBoost, LightGBM, gradient boosting), that class's
 *   score s is the second column and the first is 1 - s (post transform NONE or PROBIT) or
 *   -s (the others); the label is the class of the highest transformed score (the first on
 *   ties);
 * - the post transform applies to every row whatever the number of columns. */

enum { BR_LEAF = BR_MEMBER + 1 };

struct fnode {
    double split;
    int32_t feat;
    int32_t yes, no; /* a branch's children (node indices); a leaf's weights: ws[yes, no) */
    uint8_t mode, miss;
};

struct fweight {
    double w;
    int64_t col;
};

struct forest {
    int64_t n_nodes, n_trees, n_w, max_feat;
    int64_t bin_col; /* a binary classifier: the one class every weight is for; else -1 */
    int bad;
    char msg[200];
};

struct fattr {
    bool classifier;
    int64_t n_nodes, n_w, n_out, n_base, n_miss;
    const int64_t *tree, *node, *feat, *yes, *no, *miss, *wtree, *wnode, *wcol;
    const struct ox_attr *modes;
    const float *split_f, *w_f, *base_f;
    const ox_tensor *split_t, *w_t, *base_t;
    const int64_t *labels_i;
    const char *const *labels_s;
    int agg, post;
    /* TreeEnsemble (opset 5), compiled into the same forest: its attributes; a MIN or MAX
     * column no reached leaf feeds is `init` (the input type's largest magnitude), and the
     * output has the input's type */
    const struct tree *v5;
    double init;
};

/* Offsets of the parts of a compiled forest and its size: n_nodes nodes (and as many root
 * slots and sort positions), n_w weights, n_members set members (TreeEnsemble). */
struct forest_layout {
    size_t nodes, roots, ws, order, members, bytes;
};

static struct forest_layout forest_layout(int64_t n_nodes, int64_t n_w, int64_t n_members) {
    struct forest_layout l;
    l.nodes = ox_align64(sizeof(struct forest));
    l.roots = l.nodes + ox_align64((size_t)n_nodes * sizeof(struct fnode));
    l.ws = l.roots + ox_align64((size_t)n_nodes * sizeof(int32_t));
    l.order = l.ws + ox_align64((size_t)n_w * sizeof(struct fweight));
    l.members = l.order + ox_align64((size_t)n_nodes * sizeof(int64_t));
    l.bytes = l.members + ox_align64((size_t)n_members * sizeof(double));
    return l;
}

/* A float list `name`, or its double `name_as_tensor` (opset 3). */
static ox_status floats_or_tensor(const struct ox_node *n, const char *name, const float **f,
                                  const ox_tensor **t, int64_t *count) {
    char tn[64];
    snprintf(tn, sizeof tn, "%s_as_tensor", name);
    *f = NULL;
    *t = tensor_attr(n, tn);
    *count = 0;
    if (*t) {
        if (!ox_dtype_is_float((*t)->dtype) || (ox_tensor_numel(*t) && !(*t)->data))
            return ox_node_err(n, OX_E_INVALID, "attribute '%s' must hold floats", tn);
        *count = ox_tensor_numel(*t);
        return OX_OK;
    }
    int c = ox_attr_floats(n, name, f);
    if (c > 0) *count = c;
    return OX_OK;
}

static double fattr_num(const float *f, const ox_tensor *t, int64_t i) {
    return t ? ox_get_f64(t, i) : f[i];
}

static int name_code(const char *s, const char *const *names, int count) {
    for (int i = 0; i < count; i++)
        if (strcmp(s, names[i]) == 0) return i;
    return -1;
}

ox_status ox_ml_post_code(const struct ox_node *n, int *post) {
    static const char *const NAMES[] = {"NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO", "PROBIT"};
    const char *pt = ox_attr_str(n, "post_transform", "NONE");
    if ((*post = name_code(pt, NAMES, 5)) < 0)
        return ox_node_err(n, OX_E_INVALID, "post_transform '%s'", pt);
    return OX_OK;
}

static const char *const MODE_NAMES[] = {"BRANCH_LEQ", "BRANCH_LT",  "BRANCH_GTE", "BRANCH_GT",
                                         "BRANCH_EQ",  "BRANCH_NEQ", "LEAF"};
static const int MODE_CODES[] = {BR_LEQ, BR_LT, BR_GTE, BR_GT, BR_EQ, BR_NEQ, BR_LEAF};

/* Class labels (ml.h). */
ox_status ox_ml_class_labels(const struct ox_node *n, const char *ints, const int64_t **li,
                             const char *const **ls, int64_t *count) {
    const struct ox_attr *s = ox_node_attr(n, "classlabels_strings");
    int ni = ox_attr_ints(n, ints, li);
    bool has_s = s && s->type == OX_ATTR_STRINGS;
    if ((ni >= 0) == has_s)
        return ox_node_err(n, OX_E_INVALID, "exactly one of %s and classlabels_strings must be set",
                           ints);
    if (ni < 0) *li = NULL;
    *ls = has_s ? s->strings : NULL;
    *count = has_s ? s->n : ni;
    return OX_OK;
}

/* A classifier's row r: the label of its highest score (the first on ties) into y, its C
 * scores into z (either may be NULL). */
static void classifier_row(ox_tensor *y, ox_tensor *z, int64_t r, const int64_t *li,
                           const char *const *ls, const double *acc, int64_t C) {
    int64_t best = 0;
    for (int64_t k = 1; k < C; k++)
        if (acc[k] > acc[best]) best = k;
    if (y && ls)
        ((const char **)y->data)[r] = ls[best] ? ls[best] : "";
    else if (y)
        ((int64_t *)y->data)[r] = li[best];
    if (z)
        for (int64_t k = 0; k < C; k++) ((float *)z->data)[r * C + k] = (float)acc[k];
}

/* The attributes; `full` also checks every node and weight (infer: once per plan; the
 * kernel's runs read the lists without going through them again). */
static ox_status fattr_read(const struct ox_node *n, const ox_tensor *x, bool classifier, bool full,
                            struct fattr *a) {
    memset(a, 0, sizeof *a);
    a->classifier = classifier;
    int64_t N, F;
    ox_status s = ox_ml_rows(n, x, &N, &F);
    if (s) return s;
    int64_t c[6], cw[3];
    const char *w = classifier ? "class" : "target";
    char wt[32], wn[32], wi[32], ww[32];
    snprintf(wt, sizeof wt, "%s_treeids", w);
    snprintf(wn, sizeof wn, "%s_nodeids", w);
    snprintf(wi, sizeof wi, "%s_ids", w);
    snprintf(ww, sizeof ww, "%s_weights", w);
    int64_t n_split, n_wv;
    if ((s = ints_attr(n, "nodes_treeids", true, &a->tree, &a->n_nodes)) ||
        (s = ints_attr(n, "nodes_nodeids", true, &a->node, &c[0])) ||
        (s = ints_attr(n, "nodes_featureids", true, &a->feat, &c[1])) ||
        (s = ints_attr(n, "nodes_truenodeids", true, &a->yes, &c[2])) ||
        (s = ints_attr(n, "nodes_falsenodeids", true, &a->no, &c[3])) ||
        (s = ints_attr(n, "nodes_missing_value_tracks_true", false, &a->miss, &a->n_miss)) ||
        (s = ints_attr(n, wt, false, &a->wtree, &a->n_w)) ||
        (s = ints_attr(n, wn, false, &a->wnode, &cw[0])) ||
        (s = ints_attr(n, wi, false, &a->wcol, &cw[1])) ||
        (s = floats_or_tensor(n, "nodes_values", &a->split_f, &a->split_t, &n_split)) ||
        (s = floats_or_tensor(n, ww, &a->w_f, &a->w_t, &n_wv)) ||
        (s = floats_or_tensor(n, "base_values", &a->base_f, &a->base_t, &a->n_base)))
        return s;
    a->modes = ox_node_attr(n, "nodes_modes");
    if (!a->modes || a->modes->type != OX_ATTR_STRINGS)
        return ox_node_err(n, OX_E_INVALID, "attribute 'nodes_modes' (strings) is required");
    c[4] = a->modes->n, c[5] = n_split;
    for (int k = 0; k < 6; k++)
        if (c[k] != a->n_nodes)
            return ox_node_err(n, OX_E_INVALID,
                               "the nodes_* attributes differ in length (%lld nodes_treeids)",
                               (long long)a->n_nodes);
    if (a->n_miss && a->n_miss != a->n_nodes)
        return ox_node_err(n, OX_E_INVALID,
                           "nodes_missing_value_tracks_true has %lld values for "
                           "%lld nodes",
                           (long long)a->n_miss, (long long)a->n_nodes);
    cw[2] = n_wv;
    for (int k = 0; k < 3; k++)
        if (cw[k] != a->n_w)
            return ox_node_err(n, OX_E_INVALID, "the %s_* attributes differ in length", w);
    if (a->n_nodes == 0) return ox_node_err(n, OX_E_INVALID, "the ensemble has no nodes");
    if (a->n_nodes >= INT32_MAX || a->n_w >= INT32_MAX)
        return ox_node_err(n, OX_E_UNSUPPORTED, "more than 2^31 nodes or weights");
    for (int64_t i = 0; full && i < a->n_nodes; i++) {
        const char *m = a->modes->strings[i] ? a->modes->strings[i] : "";
        int code = name_code(m, MODE_NAMES, 7);
        if (code < 0) return ox_node_err(n, OX_E_INVALID, "node %lld: mode '%s'", (long long)i, m);
        if (MODE_CODES[code] != BR_LEAF && a->feat[i] < 0)
            return ox_node_err(n, OX_E_INVALID, "node %lld: feature %lld", (long long)i,
                               (long long)a->feat[i]);
    }
    if (classifier) {
        if ((s = ox_ml_class_labels(n, "classlabels_int64s", &a->labels_i, &a->labels_s,
                                    &a->n_out)))
            return s;
        if (a->n_out < 2)
            return ox_node_err(n, OX_E_UNSUPPORTED, "%lld class labels: at least 2 are needed",
                               (long long)a->n_out);
        a->agg = AGG_SUM;
    } else {
        a->n_out = ox_attr_int(n, "n_targets", -1);
        if (a->n_out == -1) { /* the largest target id + 1 */
            for (int64_t k = 0; k < a->n_w; k++)
                a->n_out = a->wcol[k] > a->n_out ? a->wcol[k] : a->n_out;
            a->n_out++;
        }
        if (a->n_out < 1)
            return ox_node_err(n, OX_E_INVALID, "n_targets %lld", (long long)a->n_out);
        static const char *const AGG_NAMES[] = {"AVERAGE", "SUM", "MIN", "MAX"};
        const char *ag = ox_attr_str(n, "aggregate_function", "SUM");
        if ((a->agg = name_code(ag, AGG_NAMES, 4)) < 0)
            return ox_node_err(n, OX_E_INVALID, "aggregate_function '%s'", ag);
    }
    if ((s = ox_ml_post_code(n, &a->post))) return s;
    for (int64_t k = 0; full && k < a->n_w; k++)
        if (a->wcol[k] < 0 || a->wcol[k] >= a->n_out)
            return ox_node_err(n, OX_E_INVALID, "%s %lld: column %lld outside [0, %lld)", wi,
                               (long long)k, (long long)a->wcol[k], (long long)a->n_out);
    if (a->n_base > 1 && a->n_base != a->n_out)
        return ox_node_err(n, OX_E_INVALID, "%lld base_values for %lld %s", (long long)a->n_base,
                           (long long)a->n_out, classifier ? "classes" : "targets");
    return OX_OK;
}

static int pair_cmp(int64_t i, int64_t j, const void *ctx) {
    const struct fattr *a = ctx;
    if (a->tree[i] != a->tree[j]) return a->tree[i] < a->tree[j] ? -1 : 1;
    if (a->node[i] != a->node[j]) return a->node[i] < a->node[j] ? -1 : 1;
    return i < j ? -1 : i > j;
}

/* The index of node (tree, id) through the sorted order, or -1. */
static int64_t forest_find(const struct fattr *a, const int64_t *order, int64_t tree, int64_t id) {
    int64_t lo = 0, hi = a->n_nodes;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2, k = order[mid];
        if (a->tree[k] == tree && a->node[k] == id) return k;
        if (a->tree[k] < tree || (a->tree[k] == tree && a->node[k] < id))
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

#define FOREST_BAD(f, ...) (snprintf((f)->msg, sizeof(f)->msg, __VA_ARGS__), (f)->bad = 1)

/* Compile the lists into dst (forest_layout's bytes); errors are left in dst->bad/msg. */
static void forest_build(void *dst, void *arg) {
    const struct fattr *a = arg;
    struct forest *f = dst;
    struct forest_layout l = forest_layout(a->n_nodes, a->n_w, 0);
    struct fnode *nd = (struct fnode *)((char *)dst + l.nodes);
    int32_t *roots = (int32_t *)((char *)dst + l.roots);
    struct fweight *ws = (struct fweight *)((char *)dst + l.ws);
    int64_t *order = (int64_t *)((char *)dst + l.order);
    memset(f, 0, sizeof *f);
    f->n_nodes = a->n_nodes, f->n_w = a->n_w, f->max_feat = -1, f->bin_col = -1;
    if (a->classifier && a->n_out == 2 && a->n_w > 0) {
        f->bin_col = a->wcol[0];
        for (int64_t k = 1; k < a->n_w; k++)
            if (a->wcol[k] != f->bin_col) f->bin_col = -1;
    }
    for (int64_t i = 0; i < a->n_nodes; i++) {
        struct fnode *p = &nd[i];
        memset(p, 0, sizeof *p);
        p->mode = (uint8_t)MODE_CODES[name_code(a->modes->strings[i], MODE_NAMES, 7)];
        p->split = fattr_num(a->split_f, a->split_t, i);
        p->miss = a->n_miss && a->miss[i] != 0;
        if (p->mode != BR_LEAF) {
            p->feat = (int32_t)(a->feat[i] < INT32_MAX ? a->feat[i] : INT32_MAX);
            if (p->feat > f->max_feat) f->max_feat = p->feat;
        }
        order[i] = i;
    }
    heap_sort(order, a->n_nodes, pair_cmp, a);
    for (int64_t k = 0; k < a->n_nodes; k++) {
        int64_t i = order[k];
        if (k > 0 && a->tree[i] == a->tree[order[k - 1]] && a->node[i] == a->node[order[k - 1]]) {
            FOREST_BAD(f, "node %lld of tree %lld appears twice", (long long)a->node[i],
                       (long long)a->tree[i]);
            return;
        }
        if (k == 0 || a->tree[i] != a->tree[order[k - 1]])
            roots[f->n_trees++] = (int32_t)i;
        else if (i < roots[f->n_trees - 1])
            roots[f->n_trees - 1] = (int32_t)i;
    }
    for (int64_t i = 0; i < a->n_nodes; i++) {
        if (nd[i].mode == BR_LEAF) continue;
        int64_t yes = forest_find(a, order, a->tree[i], a->yes[i]);
        int64_t no = forest_find(a, order, a->tree[i], a->no[i]);
        if (yes < 0 || no < 0 || yes == i || no == i) {
            FOREST_BAD(f, "node %lld of tree %lld: its %s node %lld %s", (long long)a->node[i],
                       (long long)a->tree[i], yes < 0 || yes == i ? "true" : "false",
                       (long long)(yes < 0 || yes == i ? a->yes[i] : a->no[i]),
                       yes < 0 || no < 0 ? "is not in the tree" : "is itself");
            return;
        }
        nd[i].yes = (int32_t)yes, nd[i].no = (int32_t)no;
    }
    /* each leaf's weights together: count (in `no`), offsets (`yes`), then place (`no` as the
     * cursor). Weights of branches are never reached; zero weights change no sum (SUM and
     * AVERAGE: a random forest's pure leaves list every class, all but one at 0). */
    bool drop_zeros = a->agg == AGG_SUM || a->agg == AGG_AVERAGE;
    for (int pass = 0; pass < 2; pass++) {
        for (int64_t k = 0; k < a->n_w; k++) {
            int64_t i = forest_find(a, order, a->wtree[k], a->wnode[k]);
            if (i < 0) {
                FOREST_BAD(f, "weight %lld: node %lld of tree %lld does not exist", (long long)k,
                           (long long)a->wnode[k], (long long)a->wtree[k]);
                return;
            }
            double w = fattr_num(a->w_f, a->w_t, k);
            if (nd[i].mode != BR_LEAF || (drop_zeros && w == 0)) continue;
            if (pass == 0) {
                nd[i].no++;
                continue;
            }
            ws[nd[i].no].w = w;
            ws[nd[i].no++].col = a->wcol[k];
        }
        for (int64_t i = 0, pos = 0; pass == 0 && i < a->n_nodes; i++) {
            if (nd[i].mode != BR_LEAF) continue;
            int32_t count = nd[i].no;
            nd[i].yes = nd[i].no = (int32_t)pos;
            pos += count;
        }
    }
}

/* Rows go through the trees a block at a time, tree by tree (each tree's nodes stay in cache
 * for the block): scratch per thread holds a block of rows of sums and of has-a-score flags. */
#define FOREST_BLOCK 64
#define FOREST_LANES 8

static size_t forest_row_bytes(int64_t n_out) {
    return ox_align64((size_t)FOREST_BLOCK * (size_t)n_out * (sizeof(double) + 1));
}

static ox_status forest_infer(struct ox_infer_ctx *ctx, const struct ox_node *n,
                              const ox_tensor *const *in, ox_tensor *const *out, bool classifier) {
    struct fattr a;
    const ox_tensor *x = ox_in(n, in, 0);
    ox_status s = fattr_read(n, x, classifier, true, &a);
    if (s) return s;
    int64_t N = x->rank == 2 ? x->dims[0] : 1, dims[2] = {N, a.n_out};
    if (classifier) {
        if (out[0]) ox_set_shape(out[0], a.labels_s ? OX_STRING : OX_INT64, 1, dims);
        if (n->n_outputs > 1 && out[1]) ox_set_shape(out[1], OX_FLOAT, 2, dims);
    } else {
        ox_set_shape(out[0], OX_FLOAT, 2, dims);
    }
    struct forest_layout l = forest_layout(a.n_nodes, a.n_w, 0);
    /* compile once now so that a malformed ensemble fails when the model loads */
    struct forest *f = malloc(l.bytes);
    if (!f) return ox_node_err(n, OX_E_NOMEM, "out of memory");
    forest_build(f, &a);
    if (f->bad) s = ox_node_err(n, OX_E_INVALID, "%s", f->msg);
    free(f);
    if (s) return s;
    int threads = ctx->n_threads > 0 ? ctx->n_threads : 1;
    ctx->prepared_bytes = l.bytes;
    ctx->scratch_bytes = l.bytes + (size_t)threads * forest_row_bytes(a.n_out);
    return OX_OK;
}

struct forest_job {
    const struct forest *f;
    const struct fnode *nd;
    const int32_t *roots;
    const struct fweight *ws;
    const struct fattr *a;
    const ox_tensor *x;
    ox_tensor *y, *z; /* regressor: y; classifier: labels y and scores z (either may be NULL) */
    const double *members; /* TreeEnsemble's sets, each ending in a NaN */
    int64_t F;
    char *rows; /* per-thread rows */
    size_t row_bytes;
    int cycle;
};

static double forest_base(const struct fattr *a, int64_t k) {
    if (!a->n_base) return 0;
    return fattr_num(a->base_f, a->base_t, a->n_base == 1 ? 0 : k);
}

/* Where row x (at offset off) goes from branch p (a set-membership branch's split: where its
 * set starts in members). */
static inline int32_t forest_step(const struct fnode *p, const ox_tensor *x, int64_t off,
                                  const double *members) {
    double v = ox_ld(x, off + p->feat), sp = p->split;
    bool go = false;
    if (isnan(v) && p->miss) {
        go = true;
    } else if (p->mode == BR_MEMBER) {
        for (const double *m = members + (int64_t)sp; !isnan(*m); m++)
            if (*m == v) {
                go = true;
                break;
            }
    } else {
        go = branch_go(p->mode, v, sp);
    }
    return go ? p->yes : p->no;
}

/* Row r's output from its sums and flags. */
static void forest_finish(const struct forest_job *j, int64_t r, double *acc, const uint8_t *has) {
    const struct fattr *a = j->a;
    int64_t T = a->n_out;
    for (int64_t k = 0; k < T; k++) {
        if (a->agg == AGG_AVERAGE) acc[k] /= (double)j->f->n_trees;
        acc[k] += forest_base(a, k);
        if (a->v5 && (a->agg == AGG_MIN || a->agg == AGG_MAX) && !has[k]) acc[k] = a->init;
    }
    if (j->f->bin_col >= 0) {
        double p = acc[j->f->bin_col];
        acc[1] = p;
        acc[0] = a->post == POST_NONE || a->post == POST_PROBIT ? 1.0 - p : -p;
    }
    ox_ml_post_apply(a->post, acc, T);
    if (!a->classifier && j->y->dtype != OX_FLOAT) {
        for (int64_t k = 0; k < T; k++) ox_set_f64(j->y, r * T + k, acc[k]);
        return;
    }
    if (!a->classifier) {
        float *y = (float *)j->y->data + r * T;
        for (int64_t k = 0; k < T; k++) y[k] = (float)acc[k];
        return;
    }
    classifier_row(j->y, j->z, r, a->labels_i, a->labels_s, acc, T);
}

/* Leaf p's weights into one row's sums and flags. */
static inline void forest_add(const struct fattr *a, const struct fweight *ws,
                              const struct fnode *p, double *acc, uint8_t *has) {
    for (int32_t k = p->yes; k < p->no; k++) {
        double w = ws[k].w;
        int64_t c = ws[k].col;
        if (a->agg == AGG_MIN)
            acc[c] = !has[c] || w < acc[c] ? w : acc[c];
        else if (a->agg == AGG_MAX)
            acc[c] = !has[c] || w > acc[c] ? w : acc[c];
        else
            acc[c] += w;
        has[c] = 1;
    }
}

static void forest_rows(void *arg, int64_t r0, int64_t r1, int tid) {
    struct forest_job *j = arg;
    const struct fattr *a = j->a;
    const struct fnode *nd = j->nd;
    int64_t T = a->n_out;
    double *acc = (double *)(j->rows + (size_t)tid * j->row_bytes);
    uint8_t *has = (uint8_t *)(acc + FOREST_BLOCK * T);
    /* side by side pays where trees are deep (their nodes miss the cache); shallow trees (a
     * boosted model's depth 3 to 6) go a row at a time, which costs less per step */
    bool deep = j->f->n_nodes > 64 * j->f->n_trees;
    for (int64_t b0 = r0; b0 < r1; b0 += FOREST_BLOCK) {
        int64_t nb = r1 - b0 < FOREST_BLOCK ? r1 - b0 : FOREST_BLOCK;
        /* a MIN or MAX column no leaf feeds stays 0 */
        memset(acc, 0, (size_t)(nb * T) * sizeof *acc);
        memset(has, 0, (size_t)(nb * T));
        for (int64_t t = 0; t < j->f->n_trees; t++) {
            int32_t root = j->roots[t];
            if (!deep) {
                for (int64_t b = 0; b < nb; b++) {
                    int32_t i = root;
                    for (int64_t steps = 0; nd[i].mode != BR_LEAF; steps++) {
                        if (steps >= j->f->n_nodes) goto cycle;
                        i = forest_step(&nd[i], j->x, (b0 + b) * j->F, j->members);
                    }
                    forest_add(a, j->ws, &nd[i], acc + b * T, has + b * T);
                }
                continue;
            }
            /* FOREST_LANES rows step through the tree side by side: their node loads, which
             * miss the cache in deep trees, overlap */
            for (int64_t b = 0; b < nb; b += FOREST_LANES) {
                int nl = nb - b < FOREST_LANES ? (int)(nb - b) : FOREST_LANES;
                int32_t at[FOREST_LANES];
                for (int l = 0; l < nl; l++) at[l] = root;
                for (int64_t steps = 0;; steps++) {
                    bool moved = false;
                    for (int l = 0; l < nl; l++) {
                        const struct fnode *p = &nd[at[l]];
                        if (p->mode == BR_LEAF) continue;
                        at[l] = forest_step(p, j->x, (b0 + b + l) * j->F, j->members);
                        moved = true;
                    }
                    if (!moved) break;
                    if (steps >= j->f->n_nodes) goto cycle;
                }
                for (int l = 0; l < nl; l++)
                    forest_add(a, j->ws, &nd[at[l]], acc + (b + l) * T, has + (b + l) * T);
            }
        }
        for (int64_t b = 0; b < nb; b++) forest_finish(j, b0 + b, acc + b * T, has + b * T);
    }
    return;
cycle:
    __atomic_store_n(&j->cycle, 1, __ATOMIC_RELAXED);
}

/* Runs a forest compiled by build(arg) (l: its layout; key: what it is made from) over x. */
static ox_status forest_exec(struct ox_kernel_ctx *ctx, const struct ox_node *n, const ox_tensor *x,
                             ox_tensor *y, ox_tensor *z, const struct fattr *a,
                             void (*build)(void *, void *), void *arg, struct forest_layout l,
                             const struct ox_prep_key *key) {
    int threads = ctx->pool ? ox_pool_size(ctx->pool) : 1;
    size_t row_bytes = forest_row_bytes(a->n_out);
    if (ctx->scratch_bytes < l.bytes + (size_t)threads * row_bytes)
        return ox_node_err(n, OX_E_INTERNAL, "scratch smaller than inferred");
    void *mem = ox_kernel_prepared(ctx, build, arg, key);
    if (!mem) {
        mem = ctx->scratch;
        build(mem, arg);
    }
    const struct forest *f = mem;
    if (f->bad) return ox_node_err(n, OX_E_INVALID, "%s", f->msg);
    struct forest_job j = {
        .f = f,
        .nd = (const struct fnode *)((const char *)mem + l.nodes),
        .roots = (const int32_t *)((const char *)mem + l.roots),
        .ws = (const struct fweight *)((const char *)mem + l.ws),
        .a = a,
        .x = x,
        .y = y,
        .z = z,
        .members = (const double *)((const char *)mem + l.members),
        .F = x->rank == 2 ? x->dims[1] : x->dims[0],
        .rows = (char *)ctx->scratch + l.bytes,
        .row_bytes = row_bytes,
    };
    if (f->max_feat >= j.F)
        return ox_node_err(n, OX_E_INVALID, "a node reads feature %lld of an input with %lld",
                           (long long)f->max_feat, (long long)j.F);
    int64_t N = x->rank == 2 ? x->dims[0] : 1;
    ox_parallel_for(ctx->pool, N, forest_rows, &j);
    if (j.cycle) return ox_node_err(n, OX_E_INVALID, "a tree has a cycle");
    return OX_OK;
}

static ox_status forest_run(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                            const ox_tensor *const *in, ox_tensor *const *out, bool classifier) {
    struct fattr a;
    ox_status s = fattr_read(n, in[0], classifier, false, &a);
    if (s) return s;
    struct ox_prep_key key = {n, {a.n_nodes, a.n_w, classifier, 0}};
    return forest_exec(ctx, n, in[0], out[0], classifier && n->n_outputs > 1 ? out[1] : NULL, &a,
                       forest_build, &a, forest_layout(a.n_nodes, a.n_w, 0), &key);
}

/* TreeEnsemble (opset 5) compiled into a forest: its nodes first (a child is a node index, or
 * n_nodes + a leaf index), then one leaf node per leaf with its one weight; a membership
 * node's split is where its set starts in the members (each set ends in a NaN, which
 * tree_read checked). */
static void forest_build_v5(void *dst, void *arg) {
    const struct tree *t = ((const struct fattr *)arg)->v5;
    int64_t n_nodes = t->n_nodes, total = n_nodes + t->n_leaves;
    struct forest_layout l = forest_layout(total, t->n_leaves, t->n_members);
    struct forest *f = dst;
    struct fnode *nd = (struct fnode *)((char *)dst + l.nodes);
    int32_t *roots = (int32_t *)((char *)dst + l.roots);
    struct fweight *ws = (struct fweight *)((char *)dst + l.ws);
    double *members = (double *)((char *)dst + l.members);
    memset(f, 0, sizeof *f);
    f->n_nodes = total, f->n_w = t->n_leaves, f->n_trees = t->n_roots, f->max_feat = -1;
    f->bin_col = -1;
    for (int64_t k = 0; k < t->n_members; k++) members[k] = ox_get_f64(t->members, k);
    for (int64_t i = 0, set = 0; i < n_nodes; i++) {
        struct fnode *p = &nd[i];
        memset(p, 0, sizeof *p);
        p->mode = (uint8_t)ox_get_i64(t->modes, i);
        p->feat = (int32_t)t->feat[i];
        if (p->feat > f->max_feat) f->max_feat = p->feat;
        p->miss = t->missing && t->missing[i];
        p->yes = (int32_t)(t->tleaf[i] ? n_nodes + t->tid[i] : t->tid[i]);
        p->no = (int32_t)(t->fleaf[i] ? n_nodes + t->fid[i] : t->fid[i]);
        if (p->mode != BR_MEMBER) {
            p->split = ox_get_f64(t->splits, i);
            continue;
        }
        p->split = (double)set;
        while (set < t->n_members && !isnan(members[set])) set++;
        set++;
    }
    for (int64_t k = 0; k < t->n_leaves; k++) {
        struct fnode *p = &nd[n_nodes + k];
        memset(p, 0, sizeof *p);
        p->mode = BR_LEAF;
        p->yes = (int32_t)k, p->no = (int32_t)(k + 1);
        ws[k].w = ox_get_f64(t->weights, k);
        ws[k].col = t->ltarget[k];
    }
    for (int64_t r = 0; r < t->n_roots; r++) roots[r] = (int32_t)t->roots[r];
}

static void tree_fattr(const struct tree *t, const ox_tensor *x, struct fattr *a) {
    memset(a, 0, sizeof *a);
    a->v5 = t;
    a->n_out = t->n_targets;
    a->agg = t->agg;
    a->post = t->post;
    double big = x->dtype == OX_DOUBLE ? DBL_MAX : FLT_MAX;
    a->init = t->agg == AGG_MIN ? big : -big;
}

static struct forest_layout tree_layout(const struct tree *t) {
    return forest_layout(t->n_nodes + t->n_leaves, t->n_leaves, t->n_members);
}

ox_status ox_sig_infer_tree(struct ox_infer_ctx *ctx, const struct ox_node *n,
                            const ox_tensor *const *in, ox_tensor *const *out) {
    struct tree t;
    const ox_tensor *x = ox_in(n, in, 0);
    ox_status s = tree_read(n, x, true, &t);
    if (s) return s;
    int64_t dims[2] = {x->dims[0], t.n_targets};
    ox_set_shape(out[0], x->dtype, 2, dims);
    struct forest_layout l = tree_layout(&t);
    int threads = ctx->n_threads > 0 ? ctx->n_threads : 1;
    ctx->prepared_bytes = l.bytes;
    ctx->scratch_bytes = l.bytes + (size_t)threads * forest_row_bytes(t.n_targets);
    return OX_OK;
}

ox_status ox_sig_cpu_tree(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                          const ox_tensor *const *in, ox_tensor *const *out) {
    struct tree t;
    struct fattr a;
    ox_status s = tree_read(n, in[0], false, &t);
    if (s) return s;
    tree_fattr(&t, in[0], &a);
    struct ox_prep_key key = {n, {t.n_nodes, t.n_leaves, t.n_members, 5}};
    return forest_exec(ctx, n, in[0], out[0], NULL, &a, forest_build_v5, &a, tree_layout(&t), &key);
}

ox_status ox_sig_infer_tree_regressor(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                      const ox_tensor *const *in, ox_tensor *const *out) {
    return forest_infer(ctx, n, in, out, false);
}

ox_status ox_sig_cpu_tree_regressor(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                                    const ox_tensor *const *in, ox_tensor *const *out) {
    return forest_run(ctx, n, in, out, false);
}

ox_status ox_sig_infer_tree_classifier(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                       const ox_tensor *const *in, ox_tensor *const *out) {
    return forest_infer(ctx, n, in, out, true);
}

ox_status ox_sig_cpu_tree_classifier(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                                     const ox_tensor *const *in, ox_tensor *const *out) {
    return forest_run(ctx, n, in, out, true);
}

/* ---- Scaler, Normalizer, Imputer, LinearRegressor, LinearClassifier, OneHotEncoder,
 *      FeatureVectorizer, CategoryMapper (ai.onnx.ml 1 on) ------------------------------ */

/* What scikit-learn pipelines converted to ONNX hold around their estimators (StandardScaler,
 * Normalizer, SimpleImputer, linear models, OneHotEncoder, column concatenation). Inputs are
 * [N, F] or [F] (one row); numbers are read as double and results rounded once. Semantics are
 * ONNX's reference implementation's: Normalizer MAX divides by the largest magnitude (as
 * scikit-learn does), a row of zeros stays zeros; a linear classifier with one coefficient
 * row and two labels scores [-s, s] before its post transform; labels are the highest score's. */

/* A float list attribute with 0 (absent), 1 or F values: value j of it (def when absent). */
static ox_status per_feature(const struct ox_node *n, const char *name, int64_t F, const float **v,
                             int *count) {
    *count = ox_attr_floats(n, name, v);
    if (*count < 0) *count = 0;
    if (*count > 1 && *count != F)
        return ox_node_err(n, OX_E_INVALID, "%s has %d values for %lld features", name, *count,
                           (long long)F);
    return OX_OK;
}

static double feature_at(const float *v, int count, int64_t j, double def) {
    return count == 0 ? def : v[count == 1 ? 0 : j];
}

ox_status ox_sig_infer_scaler(struct ox_infer_ctx *ctx, const struct ox_node *n,
                              const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    const ox_tensor *x = ox_in(n, in, 0);
    int64_t N = 0, F = 0;
    const float *v;
    int c;
    ox_status s;
    if ((s = ox_ml_rows(n, x, &N, &F)) || (s = per_feature(n, "offset", F, &v, &c)) ||
        (s = per_feature(n, "scale", F, &v, &c)))
        return s;
    ox_set_shape(out[0], OX_FLOAT, x->rank, x->dims);
    return OX_OK;
}

ox_status ox_sig_cpu_scaler(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                            const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    const ox_tensor *x = in[0];
    int64_t N = 0, F = 0;
    const float *off, *sc;
    int n_off, n_sc;
    ox_status s;
    if ((s = ox_ml_rows(n, x, &N, &F)) || (s = per_feature(n, "offset", F, &off, &n_off)) ||
        (s = per_feature(n, "scale", F, &sc, &n_sc)))
        return s;
    float *y = out[0]->data;
    for (int64_t r = 0; r < N; r++)
        for (int64_t j = 0; j < F; j++)
            y[r * F + j] = (float)((ox_ld(x, r * F + j) - feature_at(off, n_off, j, 0.0)) *
                                   feature_at(sc, n_sc, j, 1.0));
    return OX_OK;
}

enum { NORM_MAX, NORM_L1, NORM_L2 };

static ox_status norm_kind(const struct ox_node *n, int *kind) {
    static const char *const NAMES[] = {"MAX", "L1", "L2"};
    const char *s = ox_attr_str(n, "norm", "MAX");
    if ((*kind = name_code(s, NAMES, 3)) < 0)
        return ox_node_err(n, OX_E_INVALID, "norm '%s': expected MAX, L1 or L2", s);
    return OX_OK;
}

ox_status ox_sig_infer_normalizer(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                  const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    const ox_tensor *x = ox_in(n, in, 0);
    int64_t N = 0, F = 0;
    int kind;
    ox_status s;
    if ((s = ox_ml_rows(n, x, &N, &F)) || (s = norm_kind(n, &kind))) return s;
    ox_set_shape(out[0], OX_FLOAT, x->rank, x->dims);
    return OX_OK;
}

ox_status ox_sig_cpu_normalizer(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                                const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    const ox_tensor *x = in[0];
    int64_t N = 0, F = 0;
    int kind;
    ox_status s;
    if ((s = ox_ml_rows(n, x, &N, &F)) || (s = norm_kind(n, &kind))) return s;
    float *y = out[0]->data;
    for (int64_t r = 0; r < N; r++) {
        double mx = 0, norm = 0;
        for (int64_t j = 0; j < F; j++) mx = fmax(mx, fabs(ox_ld(x, r * F + j)));
        /* in units of the largest magnitude, so that the squares cannot overflow */
        for (int64_t j = 0; j < F && mx > 0; j++) {
            double v = ox_ld(x, r * F + j) / mx;
            norm += kind == NORM_L2 ? v * v : fabs(v);
        }
        double div = kind == NORM_MAX ? mx : kind == NORM_L1 ? mx * norm : mx * sqrt(norm);
        for (int64_t j = 0; j < F; j++) {
            double v = ox_ld(x, r * F + j);
            y[r * F + j] = (float)(div > 0 ? v / div : v);
        }
    }
    return OX_OK;
}

ox_status ox_sig_infer_imputer(struct ox_infer_ctx *ctx, const struct ox_node *n,
                               const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    const ox_tensor *x = ox_in(n, in, 0);
    int64_t N = 0, F = 0;
    ox_status s = ox_ml_rows(n, x, &N, &F);
    if (s) return s;
    const float *vf;
    const int64_t *vi;
    int nf = ox_attr_floats(n, "imputed_value_floats", &vf);
    int ni = ox_attr_ints(n, "imputed_value_int64s", &vi);
    bool is_float = x->dtype == OX_FLOAT || x->dtype == OX_DOUBLE;
    int c = is_float ? nf : ni;
    if (c <= 0)
        return ox_node_err(n, OX_E_INVALID, "input of type %s needs imputed_value_%s",
                           ox_dtype_name(x->dtype), is_float ? "floats" : "int64s");
    if (c > 1 && c != F)
        return ox_node_err(n, OX_E_INVALID, "%d imputed values for %lld features", c, (long long)F);
    ox_set_like(out[0], x);
    return OX_OK;
}

ox_status ox_sig_cpu_imputer(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                             const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    const ox_tensor *x = in[0];
    ox_tensor *y = out[0];
    int64_t N = 0, F = 0;
    ox_status s = ox_ml_rows(n, x, &N, &F);
    if (s) return s;
    if (x->dtype == OX_FLOAT || x->dtype == OX_DOUBLE) {
        const float *v;
        int c = ox_attr_floats(n, "imputed_value_floats", &v);
        double rep = ox_attr_float(n, "replaced_value_float", 0.0f);
        for (int64_t e = 0; e < N * F; e++) {
            double a = ox_ld(x, e);
            bool hit = isnan(rep) ? isnan(a) : a == rep;
            ox_st(y, e, hit ? v[c == 1 ? 0 : e % F] : a);
        }
        return OX_OK;
    }
    const int64_t *v;
    int c = ox_attr_ints(n, "imputed_value_int64s", &v);
    int64_t rep = ox_attr_int(n, "replaced_value_int64", 0);
    for (int64_t e = 0; e < N * F; e++) {
        int64_t a = ox_get_i64(x, e);
        ox_set_i64(y, e, a == rep ? v[c == 1 ? 0 : e % F] : a);
    }
    return OX_OK;
}

/* The linear models: coefficients [K, F] (row k for target or class k) and intercepts [K]. */
struct linear {
    const float *coef, *icpt;
    int64_t K, F, n_icpt;
    int post;
};

static ox_status linear_read(const struct ox_node *n, const ox_tensor *x, int64_t K_attr,
                             struct linear *l, int64_t *N) {
    ox_status s = ox_ml_rows(n, x, N, &l->F);
    if (s) return s;
    int nc = ox_attr_floats(n, "coefficients", &l->coef);
    int ni = ox_attr_floats(n, "intercepts", &l->icpt);
    if (nc <= 0) return ox_node_err(n, OX_E_INVALID, "attribute 'coefficients' is required");
    if (l->F == 0 || nc % l->F)
        return ox_node_err(n, OX_E_INVALID, "%d coefficients for %lld features", nc,
                           (long long)l->F);
    l->K = nc / l->F;
    if (K_attr > 0 && l->K != K_attr)
        return ox_node_err(n, OX_E_INVALID, "%d coefficients for %lld targets of %lld features", nc,
                           (long long)K_attr, (long long)l->F);
    l->n_icpt = ni < 0 ? 0 : ni;
    if (l->n_icpt && l->n_icpt != l->K)
        return ox_node_err(n, OX_E_INVALID, "%lld intercepts for %lld rows of coefficients",
                           (long long)l->n_icpt, (long long)l->K);
    return ox_ml_post_code(n, &l->post);
}

/* Row r's K scores into acc. */
static void linear_row(const struct linear *l, const ox_tensor *x, int64_t r, double *acc) {
    for (int64_t k = 0; k < l->K; k++) {
        double s = l->n_icpt ? l->icpt[k] : 0.0;
        for (int64_t j = 0; j < l->F; j++)
            s += (double)l->coef[k * l->F + j] * ox_ld(x, r * l->F + j);
        acc[k] = s;
    }
}

ox_status ox_sig_infer_linear_regressor(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                        const ox_tensor *const *in, ox_tensor *const *out) {
    struct linear l;
    int64_t N = 0;
    ox_status s = linear_read(n, ox_in(n, in, 0), ox_attr_int(n, "targets", 1), &l, &N);
    if (s) return s;
    int64_t dims[2] = {N, l.K};
    ox_set_shape(out[0], OX_FLOAT, 2, dims);
    ctx->scratch_bytes = (size_t)l.K * sizeof(double);
    return OX_OK;
}

ox_status ox_sig_cpu_linear_regressor(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                                      const ox_tensor *const *in, ox_tensor *const *out) {
    struct linear l;
    int64_t N = 0;
    ox_status s = linear_read(n, in[0], ox_attr_int(n, "targets", 1), &l, &N);
    if (s) return s;
    if (ctx->scratch_bytes < (size_t)l.K * sizeof(double))
        return ox_node_err(n, OX_E_INTERNAL, "scratch smaller than inferred");
    double *acc = ctx->scratch;
    float *y = out[0]->data;
    for (int64_t r = 0; r < N; r++) {
        linear_row(&l, in[0], r, acc);
        ox_ml_post_apply(l.post, acc, l.K);
        for (int64_t k = 0; k < l.K; k++) y[r * l.K + k] = (float)acc[k];
    }
    return OX_OK;
}

/* A linear classifier's score columns: two for one coefficient row and two labels. */
static int64_t linear_cols(const struct linear *l, int64_t n_labels) {
    return l->K == 1 && n_labels == 2 ? 2 : l->K;
}

ox_status ox_sig_infer_linear_classifier(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                         const ox_tensor *const *in, ox_tensor *const *out) {
    struct linear l;
    int64_t N = 0, n_labels = 0;
    const int64_t *li = NULL;
    const char *const *ls = NULL;
    ox_status s = linear_read(n, ox_in(n, in, 0), 0, &l, &N);
    if (s || (s = ox_ml_class_labels(n, "classlabels_ints", &li, &ls, &n_labels))) return s;
    int64_t C = linear_cols(&l, n_labels), dims[2] = {N, C};
    if (n_labels < C)
        return ox_node_err(n, OX_E_INVALID, "%lld class labels for %lld score columns",
                           (long long)n_labels, (long long)C);
    if (out[0]) ox_set_shape(out[0], ls ? OX_STRING : OX_INT64, 1, dims);
    if (n->n_outputs > 1 && out[1]) ox_set_shape(out[1], OX_FLOAT, 2, dims);
    ctx->scratch_bytes = (size_t)C * sizeof(double);
    return OX_OK;
}

ox_status ox_sig_cpu_linear_classifier(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                                       const ox_tensor *const *in, ox_tensor *const *out) {
    struct linear l;
    int64_t N = 0, n_labels = 0;
    const int64_t *li = NULL;
    const char *const *ls = NULL;
    ox_status s = linear_read(n, in[0], 0, &l, &N);
    if (s || (s = ox_ml_class_labels(n, "classlabels_ints", &li, &ls, &n_labels))) return s;
    int64_t C = linear_cols(&l, n_labels);
    if (ctx->scratch_bytes < (size_t)C * sizeof(double))
        return ox_node_err(n, OX_E_INTERNAL, "scratch smaller than inferred");
    double *acc = ctx->scratch;
    ox_tensor *y = out[0], *z = n->n_outputs > 1 ? out[1] : NULL;
    for (int64_t r = 0; r < N; r++) {
        linear_row(&l, in[0], r, acc + (C - l.K));
        if (C != l.K) acc[0] = -acc[1];
        ox_ml_post_apply(l.post, acc, C);
        classifier_row(y, z, r, li, ls, acc, C);
    }
    return OX_OK;
}

/* OneHotEncoder and CategoryMapper: categories as int64s or strings. */
struct cats {
    const int64_t *i;
    const char *const *s;
    int64_t n;
};

static ox_status cats_read(const struct ox_node *n, bool both, struct cats *c) {
    const struct ox_attr *s = ox_node_attr(n, "cats_strings");
    int ni = ox_attr_ints(n, "cats_int64s", &c->i);
    bool has_s = s && s->type == OX_ATTR_STRINGS;
    c->s = has_s ? s->strings : NULL;
    if (ni < 0) c->i = NULL;
    if (both) {
        if (ni < 0 || !has_s || s->n != ni)
            return ox_node_err(n, OX_E_INVALID,
                               "cats_int64s and cats_strings must both be set, of one length");
    } else if ((ni >= 0) == has_s) {
        return ox_node_err(n, OX_E_INVALID,
                           "exactly one of cats_int64s and cats_strings must be set");
    }
    c->n = has_s ? s->n : ni;
    return OX_OK;
}

static int cat_cmp_str(int64_t a, int64_t b, const void *ctx) {
    const struct cats *c = ctx;
    int r = strcmp(c->s[a] ? c->s[a] : "", c->s[b] ? c->s[b] : "");
    return r ? r : (a > b) - (a < b);
}

static int cat_cmp_int(int64_t a, int64_t b, const void *ctx) {
    const struct cats *c = ctx;
    if (c->i[a] != c->i[b]) return c->i[a] < c->i[b] ? -1 : 1;
    return (a > b) - (a < b);
}

/* Category of element e of x (string or number) through idx (sorted), or -1; the first
 * listed of equal categories. */
static int64_t cat_find(const struct cats *c, const int64_t *idx, bool strings, const ox_tensor *x,
                        int64_t e) {
    int64_t lo = 0, hi = c->n;
    const char *sv = strings ? tensor_str(x, e) : NULL;
    int64_t iv = strings ? 0 : ox_get_i64(x, e);
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2, k = idx[mid];
        int r = strings ? strcmp(c->s[k] ? c->s[k] : "", sv) : (c->i[k] > iv) - (c->i[k] < iv);
        if (r < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == c->n) return -1;
    int64_t k = idx[lo];
    return (strings ? strcmp(c->s[k] ? c->s[k] : "", sv) == 0 : c->i[k] == iv) ? k : -1;
}

/* A kernel's categories (`both`: int64s and strings, CategoryMapper) and their index in
 * scratch, sorted by the kind x is looked up by (strings: the input's are). */
static ox_status cats_index(struct ox_kernel_ctx *ctx, const struct ox_node *n, bool both,
                            const ox_tensor *x, struct cats *c, int64_t **idx, bool *strings) {
    ox_status s = cats_read(n, both, c);
    if (s) return s;
    if (ctx->scratch_bytes < (size_t)c->n * sizeof(int64_t))
        return ox_node_err(n, OX_E_INTERNAL, "scratch smaller than inferred");
    *strings = both ? x->dtype == OX_STRING : c->s != NULL;
    *idx = ctx->scratch;
    for (int64_t k = 0; k < c->n; k++) (*idx)[k] = k;
    heap_sort(*idx, c->n, *strings ? cat_cmp_str : cat_cmp_int, c);
    return OX_OK;
}

ox_status ox_sig_infer_one_hot_encoder(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                       const ox_tensor *const *in, ox_tensor *const *out) {
    struct cats c;
    const ox_tensor *x = ox_in(n, in, 0);
    ox_status s = cats_read(n, false, &c);
    if (s) return s;
    if (!x) return ox_node_err(n, OX_E_INVALID, "input X is required");
    if ((x->dtype == OX_STRING) != (c.s != NULL) || (x->dtype != OX_STRING && !is_ml_num(x->dtype)))
        return ox_node_err(n, OX_E_INVALID, "input of type %s for %s categories",
                           ox_dtype_name(x->dtype), c.s ? "string" : "int64");
    if (x->rank >= OX_MAX_RANK) return ox_node_err(n, OX_E_SHAPE, "input rank too large");
    int64_t dims[OX_MAX_RANK];
    memcpy(dims, x->dims, sizeof(int64_t) * (size_t)x->rank);
    dims[x->rank] = c.n;
    ox_set_shape(out[0], OX_FLOAT, x->rank + 1, dims);
    ctx->scratch_bytes = (size_t)c.n * sizeof(int64_t);
    return OX_OK;
}

ox_status ox_sig_cpu_one_hot_encoder(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                                     const ox_tensor *const *in, ox_tensor *const *out) {
    struct cats c;
    const ox_tensor *x = in[0];
    int64_t *idx = NULL, total = ox_tensor_numel(x);
    bool strings = false, zeros = ox_attr_int(n, "zeros", 1) != 0;
    ox_status s = cats_index(ctx, n, false, x, &c, &idx, &strings);
    if (s) return s;
    float *y = out[0]->data;
    memset(y, 0, (size_t)(total * c.n) * sizeof *y);
    for (int64_t e = 0; e < total; e++) {
        /* numbers compare as integers, as the categories are: 2.5 is no category */
        bool whole = strings || !ox_dtype_is_float(x->dtype) || ox_ld(x, e) == trunc(ox_ld(x, e));
        int64_t k = whole ? cat_find(&c, idx, strings, x, e) : -1;
        if (k >= 0)
            y[e * c.n + k] = 1.0f;
        else if (!zeros)
            return ox_node_err(n, OX_E_INVALID, "element %lld is no category (and zeros is 0)",
                               (long long)e);
    }
    return OX_OK;
}

ox_status ox_sig_infer_category_mapper(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                       const ox_tensor *const *in, ox_tensor *const *out) {
    struct cats c;
    const ox_tensor *x = ox_in(n, in, 0);
    ox_status s = cats_read(n, true, &c);
    if (s) return s;
    if (!x || (x->dtype != OX_STRING && x->dtype != OX_INT64))
        return ox_node_err(n, OX_E_INVALID, "input must be string or int64");
    ox_set_shape(out[0], x->dtype == OX_STRING ? OX_INT64 : OX_STRING, x->rank, x->dims);
    ctx->scratch_bytes = (size_t)c.n * sizeof(int64_t);
    return OX_OK;
}

ox_status ox_sig_cpu_category_mapper(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                                     const ox_tensor *const *in, ox_tensor *const *out) {
    struct cats c;
    const ox_tensor *x = in[0];
    int64_t *idx = NULL, total = ox_tensor_numel(x);
    bool strings = false;
    ox_status s = cats_index(ctx, n, true, x, &c, &idx, &strings);
    if (s) return s;
    int64_t dint = ox_attr_int(n, "default_int64", -1);
    const char *dstr = ox_attr_str(n, "default_string", "_Unused");
    for (int64_t e = 0; e < total; e++) {
        int64_t k = cat_find(&c, idx, strings, x, e);
        if (strings)
            ((int64_t *)out[0]->data)[e] = k >= 0 ? c.i[k] : dint;
        else
            ((const char **)out[0]->data)[e] = k >= 0 ? (c.s[k] ? c.s[k] : "") : dstr;
    }
    return OX_OK;
}

ox_status ox_sig_infer_feature_vectorizer(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                          const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    const int64_t *d;
    int nd = ox_attr_ints(n, "inputdimensions", &d);
    if (nd != n->n_inputs)
        return ox_node_err(n, OX_E_INVALID, "inputdimensions has %d values for %d inputs", nd,
                           n->n_inputs);
    int64_t N = -1, total = 0;
    for (int i = 0; i < n->n_inputs; i++) {
        const ox_tensor *x = in[i];
        if (!x || !is_ml_num(x->dtype) || x->rank < 1 || d[i] < 0)
            return ox_node_err(n, OX_E_INVALID,
                               "input %d: a numeric tensor of rank >= 1 is "
                               "needed, with inputdimensions >= 0",
                               i);
        int64_t rows = x->rank == 1 ? 1 : x->dims[0];
        if (N >= 0 && rows != N)
            return ox_node_err(n, OX_E_SHAPE, "input %d has %lld rows, input 0 %lld", i,
                               (long long)rows, (long long)N);
        N = rows;
        total += d[i];
    }
    int64_t dims[2] = {N < 0 ? 1 : N, total};
    ox_set_shape(out[0], OX_FLOAT, 2, dims);
    return OX_OK;
}

ox_status ox_sig_cpu_feature_vectorizer(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                                        const ox_tensor *const *in, ox_tensor *const *out) {
    (void)ctx;
    const int64_t *d;
    ox_attr_ints(n, "inputdimensions", &d);
    int64_t N = out[0]->dims[0], W = out[0]->dims[1], at = 0;
    float *y = out[0]->data;
    for (int i = 0; i < n->n_inputs; i++) {
        const ox_tensor *x = in[i];
        /* each row of an input: its first inputdimensions values, zeros past its width */
        int64_t w = N ? ox_tensor_numel(x) / N : 0;
        for (int64_t r = 0; r < N; r++)
            for (int64_t j = 0; j < d[i]; j++)
                y[r * W + at + j] = j < w ? (float)ox_ld(x, r * w + j) : 0.0f;
        at += d[i];
    }
    return OX_OK;
}

/* ---- ZipMap (ai.onnx.ml 1 on) ------------------------------------------------------------ */

/* One map per row of X [N, C] (or [C]: one row), from the C labels to the row's C scores:
 * what scikit-learn classifiers converted by skl2onnx end with. A map is an ox_tensor of
 * kind OX_IO_MAP holding its keys and values as two 1-D tensors (include/onnxexec.h). The
 * row allocates its output (OX_OP_ALLOCATES): its infer is the sequence rows' (never called). */
ox_status ox_sig_cpu_zipmap(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                            const ox_tensor *const *in, ox_tensor *const *out) {
    const ox_tensor *x = ox_in(n, in, 0);
    const int64_t *li = NULL;
    const char *const *ls = NULL;
    int64_t C = 0;
    ox_status st = ox_ml_class_labels(n, "classlabels_int64s", &li, &ls, &C);
    if (st) return st;
    bool strings = ls != NULL;
    if (!x || x->kind != OX_IO_TENSOR || x->dtype != OX_FLOAT || x->rank < 1 || x->rank > 2)
        return ox_node_err(n, OX_E_INVALID, "input must be a float tensor [N, C] or [C]");
    int64_t N = x->rank == 2 ? x->dims[0] : 1;
    if (x->dims[x->rank - 1] != C)
        return ox_node_err(n, OX_E_SHAPE, "%lld scores per row for %lld labels",
                           (long long)x->dims[x->rank - 1], (long long)C);
    if (N > INT32_MAX) return ox_node_err(n, OX_E_UNSUPPORTED, "%lld rows", (long long)N);
    st = ox_kernel_alloc_items(ctx, out[0], OX_IO_SEQUENCE, OX_FLOAT, (int)N);
    for (int64_t r = 0; !st && r < N; r++) {
        ox_tensor *m = &out[0]->items[r];
        if ((st = ox_kernel_alloc_items(ctx, m, OX_IO_MAP, OX_FLOAT, 2))) break;
        ox_set_shape(&m->items[0], strings ? OX_STRING : OX_INT64, 1, &C);
        ox_set_shape(&m->items[1], OX_FLOAT, 1, &C);
        if ((st = ox_kernel_alloc(ctx, &m->items[0])) || (st = ox_kernel_alloc(ctx, &m->items[1])))
            break;
        for (int64_t k = 0; k < C; k++) {
            if (strings)
                ((const char **)m->items[0].data)[k] = ls[k] ? ls[k] : "";
            else
                ((int64_t *)m->items[0].data)[k] = li[k];
        }
        memcpy(m->items[1].data, (const float *)x->data + r * C, (size_t)C * sizeof(float));
    }
    return st;
}

/* ---- DictVectorizer and CastMap (ai.onnx.ml 1 on): maps in, tensors out --------------- */

/* Their input is a map (or, for DictVectorizer, a sequence of maps): the rows carry
 * OX_OP_VALUE_INPUTS, so that infer runs when the map is there and sizes the output from it.
 * As ONNX Runtime has them: DictVectorizer gives [1, C] for one map (ONNX's reference a 1-D
 * [C]) and [N, C] for a sequence of N maps, position i the value of vocabulary[i] (0, or ""
 * for strings, when the map lacks it; keys outside the vocabulary are left out, as ONNX
 * Runtime does, where the spec asks for every key to be in it); CastMap gives [1, n] of the
 * values in ascending key order (DENSE) or [1, max_map] with the value of key k at k and pads
 * elsewhere (SPARSE: 0, or "0.f" for strings as ONNX Runtime writes it), numbers cast as C
 * casts them (floats to int64 truncate), strings parsed as whole numbers and numbers written
 * as "%f" (std::to_string). A key twice in one map is an error. */

/* The rows of a map or a sequence of maps: *rows, the value type and the key type (those of
 * the maps with entries, which must agree; *kt is OX_UNDEFINED when none has any). */
static ox_status map_rows(const struct ox_node *n, const ox_tensor *x, bool seq_ok, int64_t *rows,
                          ox_dtype *vt, ox_dtype *kt) {
    if (!x) return ox_node_err(n, OX_E_INVALID, "input X is required");
    const ox_tensor *maps = x;
    int64_t m = 1;
    if (x->kind == OX_IO_SEQUENCE && seq_ok) {
        maps = x->items;
        m = x->n_items;
        *vt = x->dtype;
    } else if (x->kind != OX_IO_MAP) {
        return ox_node_err(n, OX_E_INVALID, "input must be a map%s",
                           seq_ok ? " or a sequence of maps" : "");
    }
    const ox_tensor *first = NULL; /* the first map with entries: an empty one has no types */
    for (int64_t r = 0; r < m; r++) {
        const ox_tensor *mp = &maps[r];
        if (mp->kind != OX_IO_MAP || mp->n_items != 2 || mp->items[0].rank != 1 ||
            mp->items[1].rank != 1 || mp->items[0].dims[0] != mp->items[1].dims[0])
            return ox_node_err(n, OX_E_INVALID, "item %lld is not a map of keys and values",
                               (long long)r);
        if (mp->items[0].dims[0] == 0) continue;
        if (!first) {
            first = mp;
            *vt = mp->items[1].dtype;
        }
        if (mp->items[1].dtype != *vt || mp->items[0].dtype != first->items[0].dtype)
            return ox_node_err(n, OX_E_INVALID, "maps of different types");
    }
    if (!first && x->kind == OX_IO_MAP) *vt = x->items[1].dtype;
    *kt = first ? first->items[0].dtype : OX_UNDEFINED;
    *rows = m;
    return OX_OK;
}

static const ox_tensor *map_at(const ox_tensor *x, int64_t r) {
    return x->kind == OX_IO_MAP ? x : &x->items[r];
}

/* The vocabulary of DictVectorizer: int64_vocabulary or string_vocabulary, exactly one. */
static ox_status dv_read(const struct ox_node *n, const ox_tensor *x, struct ml_list *voc,
                         int64_t *rows, ox_dtype *vt) {
    memset(voc, 0, sizeof *voc);
    const struct ox_attr *si = ox_node_attr(n, "string_vocabulary");
    int ni = ox_attr_ints(n, "int64_vocabulary", &voc->i);
    bool has_s = si && si->type == OX_ATTR_STRINGS;
    if ((ni >= 0) == has_s)
        return ox_node_err(n, OX_E_INVALID,
                           "exactly one of int64_vocabulary and string_vocabulary must be set");
    voc->dt = has_s ? OX_STRING : OX_INT64;
    voc->n = has_s ? si->n : ni;
    voc->s = has_s ? si->strings : NULL;
    if (ni < 0) voc->i = NULL;
    ox_dtype kt;
    ox_status s = map_rows(n, x, true, rows, vt, &kt);
    if (s) return s;
    if (kt != OX_UNDEFINED && kt != voc->dt)
        return ox_node_err(n, OX_E_INVALID, "map keys of type %s for a %s vocabulary",
                           ox_dtype_name(kt), has_s ? "string" : "int64");
    if (*vt != OX_STRING && *vt != OX_FLOAT && *vt != OX_DOUBLE && *vt != OX_INT64 &&
        *vt != OX_INT32)
        return ox_node_err(n, OX_E_UNSUPPORTED,
                           "map values of type %s: expected float, double, int64, int32 or string",
                           ox_dtype_name(*vt));
    return OX_OK;
}

ox_status ox_sig_infer_dict_vectorizer(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                       const ox_tensor *const *in, ox_tensor *const *out) {
    struct ml_list voc;
    int64_t rows = 0;
    ox_dtype vt = OX_FLOAT;
    ox_status s = dv_read(n, ox_in(n, in, 0), &voc, &rows, &vt);
    if (s) return s;
    int64_t dims[2] = {rows, voc.n};
    ox_set_shape(out[0], vt, 2, dims);
    if (!ox_mul_size((size_t)voc.n, sizeof(int64_t), &ctx->scratch_bytes))
        return ox_node_err(n, OX_E_NOMEM, "vocabulary too large");
    return OX_OK;
}

ox_status ox_sig_cpu_dict_vectorizer(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                                     const ox_tensor *const *in, ox_tensor *const *out) {
    struct ml_list voc;
    int64_t rows = 0, C;
    ox_dtype vt = OX_FLOAT;
    const ox_tensor *x = in[0];
    ox_tensor *y = out[0];
    ox_status s = dv_read(n, x, &voc, &rows, &vt);
    if (s) return s;
    C = voc.n;
    if (ctx->scratch_bytes < (size_t)C * sizeof(int64_t))
        return ox_node_err(n, OX_E_INTERNAL, "scratch smaller than inferred");
    int64_t *idx = ctx->scratch;
    for (int64_t k = 0; k < C; k++) idx[k] = k;
    heap_sort(idx, C, key_cmp, &voc);
    size_t es = vt == OX_STRING ? sizeof(char *) : ox_dtype_size(vt);
    if (vt == OX_STRING)
        for (int64_t e = 0; e < rows * C; e++) ((const char **)y->data)[e] = "";
    else if (rows > 0 && C > 0)
        memset(y->data, 0, (size_t)(rows * C) * es);
    for (int64_t r = 0; r < rows; r++) {
        const ox_tensor *mp = map_at(x, r), *keys = &mp->items[0], *vals = &mp->items[1];
        char *row = (char *)y->data + (size_t)(r * C) * es;
        for (int64_t e = 0; e < keys->dims[0]; e++) {
            int64_t lo = 0, hi = C;
            while (lo < hi) { /* the first vocabulary entry >= key e */
                int64_t mid = lo + (hi - lo) / 2;
                if (input_key_cmp(keys, e, &voc, idx[mid]) > 0)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            for (; lo < C && input_key_cmp(keys, e, &voc, idx[lo]) == 0; lo++)
                memcpy(row + (size_t)idx[lo] * es, (const char *)vals->data + (size_t)e * es, es);
        }
    }
    return OX_OK;
}

enum { CM_FLOAT, CM_STRING, CM_INT64 };

struct castmap {
    int to;
    bool sparse;
    int64_t n, len; /* entries of the map; columns of the output */
};

static ox_status cm_read(const struct ox_node *n, const ox_tensor *x, struct castmap *c) {
    static const char *const TO[] = {"TO_FLOAT", "TO_STRING", "TO_INT64"};
    static const char *const FORM[] = {"DENSE", "SPARSE"};
    const char *to = ox_attr_str(n, "cast_to", "TO_FLOAT");
    const char *form = ox_attr_str(n, "map_form", "DENSE");
    int f;
    if ((c->to = name_code(to, TO, 3)) < 0)
        return ox_node_err(n, OX_E_INVALID,
                           "cast_to '%s': expected TO_FLOAT, TO_STRING or TO_INT64", to);
    if ((f = name_code(form, FORM, 2)) < 0)
        return ox_node_err(n, OX_E_INVALID, "map_form '%s': expected DENSE or SPARSE", form);
    c->sparse = f == 1;
    int64_t rows;
    ox_dtype vt, kt;
    ox_status s = map_rows(n, x, false, &rows, &vt, &kt);
    if (s) return s;
    if (kt != OX_UNDEFINED && kt != OX_INT64)
        return ox_node_err(n, OX_E_INVALID, "map keys of type %s: expected int64",
                           ox_dtype_name(kt));
    if (vt != OX_STRING && (!ox_dtype_is_float(vt) && vt != OX_INT64 && vt != OX_INT32))
        return ox_node_err(n, OX_E_UNSUPPORTED, "map values of type %s", ox_dtype_name(vt));
    c->n = x->items[0].dims[0];
    c->len = c->n;
    if (c->sparse) {
        c->len = ox_attr_int(n, "max_map", 1);
        if (c->len < 1) return ox_node_err(n, OX_E_INVALID, "max_map is %lld", (long long)c->len);
    }
    return OX_OK;
}

ox_status ox_sig_infer_cast_map(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                const ox_tensor *const *in, ox_tensor *const *out) {
    struct castmap c;
    ox_status s = cm_read(n, ox_in(n, in, 0), &c);
    if (s) return s;
    static const ox_dtype DT[] = {OX_FLOAT, OX_STRING, OX_INT64};
    int64_t dims[2] = {1, c.len};
    ox_set_shape(out[0], DT[c.to], 2, dims);
    if (!ox_mul_size((size_t)c.n, sizeof(int64_t), &ctx->scratch_bytes))
        return ox_node_err(n, OX_E_NOMEM, "map too large");
    return OX_OK;
}

static int int_key_cmp(int64_t a, int64_t b, const void *ctx) {
    const int64_t *k = ctx;
    return k[a] < k[b] ? -1 : k[a] > k[b];
}

/* Value e of the map cast into element o of y. */
static ox_status cm_put(struct ox_kernel_ctx *ctx, const struct ox_node *n, const struct castmap *c,
                        const ox_tensor *vals, int64_t e, int64_t key, ox_tensor *y, int64_t o) {
    bool str_in = vals->dtype == OX_STRING;
    const char *sv = str_in ? tensor_str(vals, e) : NULL;
    if (c->to == CM_STRING) {
        char buf[64];
        if (!str_in) {
            if (ox_dtype_is_float(vals->dtype))
                snprintf(buf, sizeof buf, "%f", ox_get_f64(vals, e));
            else
                snprintf(buf, sizeof buf, "%lld", (long long)ox_get_i64(vals, e));
            if (!(sv = ox_arena_strdup(ctx->strings, buf)))
                return ox_node_err(n, OX_E_NOMEM, "out of memory");
        }
        ((const char **)y->data)[o] = sv;
        return OX_OK;
    }
    double v;
    char *end = NULL;
    if (str_in) {
        v = strtod(sv, &end);
        while (end && isspace((unsigned char)*end)) end++;
        if (end == sv || *end)
            return ox_node_err(n, OX_E_INVALID, "the value of key %lld, '%s', is not a number",
                               (long long)key, sv);
    } else {
        v = ox_get_f64(vals, e);
    }
    if (c->to == CM_FLOAT) {
        ((float *)y->data)[o] = (float)v;
    } else if (!str_in && !ox_dtype_is_float(vals->dtype)) {
        ((int64_t *)y->data)[o] = ox_get_i64(vals, e);
    } else if (str_in && !strpbrk(sv, ".eEnNxX")) { /* digits only: exact past 2^53 */
        ((int64_t *)y->data)[o] = strtoll(sv, NULL, 10);
    } else {
        if (!(v > -9.3e18 && v < 9.3e18))
            return ox_node_err(n, OX_E_INVALID, "the value of key %lld, %g, is outside int64",
                               (long long)key, v);
        ((int64_t *)y->data)[o] = (int64_t)v;
    }
    return OX_OK;
}

ox_status ox_sig_cpu_cast_map(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                              const ox_tensor *const *in, ox_tensor *const *out) {
    struct castmap c;
    const ox_tensor *x = in[0];
    ox_tensor *y = out[0];
    ox_status s = cm_read(n, x, &c);
    if (s) return s;
    if (ctx->scratch_bytes < (size_t)c.n * sizeof(int64_t))
        return ox_node_err(n, OX_E_INTERNAL, "scratch smaller than inferred");
    const int64_t *keys = x->items[0].data;
    const ox_tensor *vals = &x->items[1];
    int64_t *idx = ctx->scratch;
    for (int64_t e = 0; e < c.n; e++) idx[e] = e;
    heap_sort(idx, c.n, int_key_cmp, keys);
    for (int64_t e = 1; e < c.n; e++)
        if (keys[idx[e]] == keys[idx[e - 1]])
            return ox_node_err(n, OX_E_INVALID, "key %lld appears twice in the map",
                               (long long)keys[idx[e]]);
    if (c.sparse) {
        for (int64_t o = 0; o < c.len; o++) {
            if (c.to == CM_STRING)
                ((const char **)y->data)[o] = "0.f";
            else if (c.to == CM_FLOAT)
                ((float *)y->data)[o] = 0;
            else
                ((int64_t *)y->data)[o] = 0;
        }
        if (c.n && keys[idx[0]] < 0)
            return ox_node_err(n, OX_E_INVALID, "negative key %lld in a SPARSE map",
                               (long long)keys[idx[0]]);
    }
    for (int64_t e = 0; e < c.n; e++) {
        int64_t key = keys[idx[e]];
        if (c.sparse && key >= c.len) break; /* past max_map: left out */
        if ((s = cm_put(ctx, n, &c, vals, idx[e], key, y, c.sparse ? key : e))) return s;
    }
    return OX_OK;
}

/* ---- TfIdfVectorizer -------------------------------------------------------------------- */

struct tfidf {
    int64_t min_g, max_g, skip, out_size, n_pool_items, n_ngrams, n_sizes;
    const int64_t *counts, *indexes, *pool_i;
    const char *const *pool_s;
    const float *weights;
    int64_t n_weights;
    int mode; /* 1 TF, 2 IDF, 3 TFIDF */
};

static ox_status tfidf_read(const struct ox_node *n, const ox_tensor *x, struct tfidf *t) {
    if (!x) return ox_node_err(n, OX_E_INVALID, "input is required");
    t->min_g = ox_attr_int(n, "min_gram_length", -1);
    t->max_g = ox_attr_int(n, "max_gram_length", -1);
    t->skip = ox_attr_int(n, "max_skip_count", -1);
    if (t->min_g < 1 || t->max_g < t->min_g || t->skip < 0)
        return ox_node_err(n, OX_E_INVALID,
                           "min_gram_length %lld, max_gram_length %lld, "
                           "max_skip_count %lld: expected 1 <= min <= max and skip >= 0",
                           (long long)t->min_g, (long long)t->max_g, (long long)t->skip);
    const char *mode = ox_attr_str(n, "mode", "");
    t->mode = strcmp(mode, "TF") == 0      ? 1
              : strcmp(mode, "IDF") == 0   ? 2
              : strcmp(mode, "TFIDF") == 0 ? 3
                                           : 0;
    if (!t->mode) return ox_node_err(n, OX_E_INVALID, "mode '%s': expected TF, IDF or TFIDF", mode);
    int c = ox_attr_ints(n, "ngram_counts", &t->counts);
    if (c < 0) return ox_node_err(n, OX_E_INVALID, "attribute 'ngram_counts' is required");
    t->n_sizes = c;
    int ni = ox_attr_ints(n, "ngram_indexes", &t->indexes);
    if (ni < 0) return ox_node_err(n, OX_E_INVALID, "attribute 'ngram_indexes' is required");
    const struct ox_attr *ps = ox_node_attr(n, "pool_strings");
    int pi = ox_attr_ints(n, "pool_int64s", &t->pool_i);
    if ((pi >= 0) == (ps && ps->type == OX_ATTR_STRINGS))
        return ox_node_err(n, OX_E_INVALID,
                           "exactly one of pool_strings and pool_int64s must be "
                           "set");
    if (pi >= 0) {
        t->pool_s = NULL;
        t->n_pool_items = pi;
        if (x->dtype != OX_INT32 && x->dtype != OX_INT64)
            return ox_node_err(n, OX_E_INVALID, "pool_int64s needs an int32 or int64 input, got %s",
                               ox_dtype_name(x->dtype));
    } else {
        t->pool_i = NULL;
        t->pool_s = ps->strings;
        t->n_pool_items = ps->n;
        if (x->dtype != OX_STRING)
            return ox_node_err(n, OX_E_INVALID, "pool_strings needs a string input, got %s",
                               ox_dtype_name(x->dtype));
    }
    /* n-grams in the pool: block i (gram size i + 1) runs from counts[i] to counts[i+1] */
    t->n_ngrams = 0;
    for (int64_t i = 0; i < t->n_sizes; i++) {
        int64_t b = t->counts[i], e = i + 1 < t->n_sizes ? t->counts[i + 1] : t->n_pool_items;
        if (b < 0 || e < b || e > t->n_pool_items || (e - b) % (i + 1))
            return ox_node_err(n, OX_E_INVALID,
                               "ngram_counts[%lld] = %lld does not split the "
                               "pool of %lld items into %lld-grams",
                               (long long)i, (long long)b, (long long)t->n_pool_items,
                               (long long)(i + 1));
        t->n_ngrams += (e - b) / (i + 1);
    }
    if (ni != t->n_ngrams)
        return ox_node_err(n, OX_E_INVALID, "ngram_indexes has %d values for %lld n-grams", ni,
                           (long long)t->n_ngrams);
    t->out_size = 0;
    for (int64_t i = 0; i < ni; i++) {
        if (t->indexes[i] < 0) return ox_node_err(n, OX_E_INVALID, "negative ngram_indexes value");
        if (t->indexes[i] + 1 > t->out_size) t->out_size = t->indexes[i] + 1;
    }
    int nw = ox_attr_floats(n, "weights", &t->weights);
    t->n_weights = nw < 0 ? 0 : nw;
    if (nw < 0) t->weights = NULL;
    if (x->rank > 2)
        return ox_node_err(n, OX_E_SHAPE, "input must be [C] or [N, C], got rank %d", x->rank);
    return OX_OK;
}

ox_status ox_sig_infer_tfidf(struct ox_infer_ctx *ctx, const struct ox_node *n,
                             const ox_tensor *const *in, ox_tensor *const *out) {
    struct tfidf t;
    const ox_tensor *x = ox_in(n, in, 0);
    ox_status s = tfidf_read(n, x, &t);
    if (s) return s;
    int64_t dims[2] = {x->rank == 2 ? x->dims[0] : 1, t.out_size};
    if (x->rank == 2)
        ox_set_shape(out[0], OX_FLOAT, 2, dims);
    else
        ox_set_shape(out[0], OX_FLOAT, 1, dims + 1);
    size_t bytes;
    if (!ox_mul_size((size_t)t.n_ngrams, 2 * sizeof(int64_t), &bytes))
        return ox_node_err(n, OX_E_NOMEM, "n-gram pool too large");
    ctx->scratch_bytes = bytes;
    return OX_OK;
}

/* Sorting context: n-grams are numbered globally; start[j] is where n-gram j begins in the
 * pool and all n-grams compared have the same size g. */
struct tf_sort {
    const struct tfidf *t;
    const int64_t *start;
    int64_t g;
};

static int pool_item_cmp(const struct tfidf *t, int64_t a, int64_t b) {
    if (t->pool_s)
        return strcmp(t->pool_s[a] ? t->pool_s[a] : "", t->pool_s[b] ? t->pool_s[b] : "");
    return t->pool_i[a] < t->pool_i[b] ? -1 : t->pool_i[a] > t->pool_i[b];
}

static int ngram_cmp(int64_t a, int64_t b, const void *ctx) {
    const struct tf_sort *c = ctx;
    for (int64_t k = 0; k < c->g; k++) {
        int r = pool_item_cmp(c->t, c->start[a] + k, c->start[b] + k);
        if (r) return r;
    }
    return 0;
}

/* Compare the input's n-gram (x[e], x[e+d], ...) with pool n-gram j. */
static int input_ngram_cmp(const struct tf_sort *c, const ox_tensor *x, int64_t e, int64_t d,
                           int64_t j) {
    const struct tfidf *t = c->t;
    for (int64_t k = 0; k < c->g; k++) {
        int64_t p = c->start[j] + k, xe = e + k * d;
        int r;
        if (t->pool_s) {
            r = strcmp(tensor_str(x, xe), t->pool_s[p] ? t->pool_s[p] : "");
        } else {
            int64_t a = ox_get_i64(x, xe), b = t->pool_i[p];
            r = a < b ? -1 : a > b;
        }
        if (r) return r;
    }
    return 0;
}

ox_status ox_sig_cpu_tfidf(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                           const ox_tensor *const *in, ox_tensor *const *out) {
    struct tfidf t;
    const ox_tensor *x = in[0];
    ox_status s = tfidf_read(n, x, &t);
    if (s) return s;
    if (ctx->scratch_bytes < (size_t)t.n_ngrams * 2 * sizeof(int64_t))
        return ox_node_err(n, OX_E_INTERNAL, "scratch smaller than inferred");
    /* idx: n-gram numbers sorted within each size block; start: where each begins */
    int64_t *idx = ctx->scratch, *start = idx + t.n_ngrams;
    int64_t blk_lo[64], blk_hi[64]; /* n-gram number range per gram size (1-based) */
    int64_t j = 0;
    for (int64_t i = 0; i < t.n_sizes; i++) {
        int64_t b = t.counts[i], e = i + 1 < t.n_sizes ? t.counts[i + 1] : t.n_pool_items;
        int64_t g = i + 1, lo = j;
        for (int64_t p = b; p < e; p += g, j++) idx[j] = j, start[j] = p;
        if (g < 64) blk_lo[g] = lo, blk_hi[g] = j;
        struct tf_sort c = {&t, start, g};
        heap_sort(idx + lo, j - lo, ngram_cmp, &c);
    }
    int64_t rows = x->rank == 2 ? x->dims[0] : 1, C = x->rank == 0 ? 1 : x->dims[x->rank - 1];
    float *y = out[0]->data;
    int64_t total = rows * t.out_size;
    for (int64_t i = 0; i < total; i++) y[i] = 0.0f;
    int64_t gmax = t.max_g < t.n_sizes ? t.max_g : t.n_sizes;
    if (gmax > 63) gmax = 63;
    for (int64_t r = 0; r < rows; r++) {
        float *yr = y + r * t.out_size;
        int64_t base = r * C;
        for (int64_t d = 1; d <= t.skip + 1; d++) {
            /* unigrams do not depend on the skip: count them at d = 1 only */
            int64_t gmin = d == 1 || t.min_g > 1 ? t.min_g : 2;
            for (int64_t st = 0; st < C; st++)
                for (int64_t g = gmin; g <= gmax; g++) {
                    if (st + (g - 1) * d >= C) break;
                    struct tf_sort c = {&t, start, g};
                    int64_t lo = blk_lo[g], hi = blk_hi[g];
                    while (lo < hi) {
                        int64_t mid = lo + (hi - lo) / 2;
                        int cmp = input_ngram_cmp(&c, x, base + st, d, idx[mid]);
                        if (cmp == 0) {
                            yr[t.indexes[idx[mid]]] += 1.0f;
                            break;
                        }
                        if (cmp < 0)
                            hi = mid;
                        else
                            lo = mid + 1;
                    }
                }
        }
        /* weights scale output columns, as onnxruntime and the reference do */
        for (int64_t k = 0; k < t.out_size; k++) {
            float w = t.weights && k < t.n_weights ? t.weights[k] : 1.0f;
            if (t.mode == 2)
                yr[k] = yr[k] > 0 ? w : 0.0f;
            else if (t.mode == 3)
                yr[k] *= w;
        }
    }
    return OX_OK;
}
