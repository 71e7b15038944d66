/* Support vector machines (ai.onnx.ml 1 on): SVMClassifier and SVMRegressor, what
 * scikit-learn's SVC, NuSVC, SVR, NuSVR and OneClassSVM (libsvm's models) convert to.
 *
 * A model is either kernel vectors (support_vectors [V, F], with vectors_per_class for a
 * classifier or n_supports for a regressor) or, without them, a linear model whose
 * coefficients act on the features. The kernels, with kernel_params = [gamma, coef0, degree]
 * (all 0 when absent): LINEAR x.v, POLY (gamma x.v + coef0)^degree (degree truncated to an
 * integer), RBF exp(-gamma |x - v|^2), SIGMOID tanh(gamma x.v + coef0).
 *
 * Classifier (libsvm's one-versus-one): coefficients [C - 1, V]; for classes i < j the
 * decision s_ij = rho[p] + sum over i's vectors of coef[j - 1] k + sum over j's vectors of
 * coef[i] k (pairs p in the order (0,1), (0,2), ..., (1,2), ...); s_ij > 0 votes for i, else
 * for j; the label is the class with the most votes (the first on ties). Scores: with
 * prob_a/prob_b, libsvm's probabilities (each pair's sigmoid 1 / (1 + exp(s prob_a +
 * prob_b)) clipped to [1e-7, 1 - 1e-7], coupled by libsvm's iteration, two classes too, as
 * scikit-learn, ONNX Runtime and the reference do: the iteration stops within 0.005 / C, so
 * two classes' probabilities may differ from the pair's sigmoid by 1e-3); else the C(C-1)/2
 * decisions, or [-s, s] for two classes. Linear
 * mode: score c = rho[0] + x.coef[c], the label the highest score's, except that two classes
 * whose coefficients are all >= 0 take the second label when the highest score is >= 0.5.
 * The post transform then applies to the scores. Where ONNX's reference implementation and
 * ONNX Runtime disagree on labels (a one-rho linear model of other than two classes: the
 * reference gives the integers 1/0, ONNX Runtime the highest score's label), onnxexec gives
 * the highest score's label.
 *
 * Regressor: rho[0] + sum coef[v] k(x, v), or rho[0] + x.coef in linear mode; one_class
 * gives 1 for a positive value and -1 otherwise; the post transform applies to the value.
 *
 * Numbers are computed in double: the dot products of a block of rows with the vectors are
 * one cblas_dgemm (the vectors converted to double once per plan, in prepared memory; RBF
 * from |x|^2 + |v|^2 - 2 x.v), so results match libsvm's float64 ones to the rounding of the
 * float attributes. Rows are split over the pool in blocks. */
#include "kernels/cpu/ml.h"

#include <cblas.h>
#include <ctype.h>
#include <stdio.h>

enum { K_LINEAR, K_POLY, K_RBF, K_SIGMOID };

#define SVM_BLOCK 64 /* rows per dgemm */

struct svm {
    bool classifier;
    int64_t N, F;
    int64_t V;       /* support vectors; 0: linear mode */
    int64_t M;       /* vectors the rows are multiplied with: V, or the linear rows */
    int64_t C;       /* classifier: classes */
    int64_t n_pairs; /* classifier: C(C-1)/2 */
    int64_t n_cols;  /* columns of the scores output */
    const float *w;  /* the M vectors [M, F]: support vectors or linear coefficients */
    const float *coef, *rho, *pa, *pb;
    const int64_t *per_class; /* classifier: vectors per class */
    int64_t *first;           /* classifier: each class's first vector (scratch of the caller) */
    const int64_t *li;
    const char *const *ls;
    int64_t n_prob;
    int kernel, post;
    double gamma, coef0, degree;
    bool one_class, all_pos;
};

static int kernel_code(const char *s) {
    static const char *const NAMES[] = {"LINEAR", "POLY", "RBF", "SIGMOID"};
    for (int i = 0; i < 4; i++) {
        const char *a = s, *b = NAMES[i];
        while (*a && toupper((unsigned char)*a) == *b) a++, b++;
        if (!*a && !*b) return i;
    }
    return -1;
}

/* Reads and checks the attributes against input x. Counts only: the vectors' values are read
 * by the runs. */
static ox_status svm_read(const struct ox_node *n, const ox_tensor *x, bool classifier,
                          struct svm *m) {
    memset(m, 0, sizeof *m);
    m->classifier = classifier;
    ox_status s = ox_ml_rows(n, x, &m->N, &m->F);
    if (s || (s = ox_ml_post_code(n, &m->post))) return s;
    const char *kt = ox_attr_str(n, "kernel_type", "LINEAR");
    if ((m->kernel = kernel_code(kt)) < 0)
        return ox_node_err(n, OX_E_INVALID,
                           "kernel_type '%s': expected LINEAR, POLY, RBF or SIGMOID", kt);
    const float *kp;
    int n_kp = ox_attr_floats(n, "kernel_params", &kp);
    if (n_kp > 0 && n_kp < 3)
        return ox_node_err(n, OX_E_INVALID,
                           "kernel_params has %d values: expected gamma, coef0 and degree", n_kp);
    if (n_kp >= 3) {
        m->gamma = kp[0];
        m->coef0 = kp[1];
        m->degree = (double)(int64_t)kp[2];
    }
    int n_coef = ox_attr_floats(n, "coefficients", &m->coef);
    int n_rho = ox_attr_floats(n, "rho", &m->rho);
    if (n_coef <= 0) return ox_node_err(n, OX_E_INVALID, "attribute 'coefficients' is required");
    if (n_rho <= 0) return ox_node_err(n, OX_E_INVALID, "attribute 'rho' is required");
    int n_sv = ox_attr_floats(n, "support_vectors", &m->w);
    if (n_sv < 0) n_sv = 0;
    if (classifier) {
        if ((s = ox_ml_class_labels(n, "classlabels_ints", &m->li, &m->ls, &m->C))) return s;
        if (m->C < 1) return ox_node_err(n, OX_E_INVALID, "no class labels");
        int n_pc = ox_attr_ints(n, "vectors_per_class", &m->per_class);
        if (n_pc > 0) {
            if (n_pc != m->C)
                return ox_node_err(n, OX_E_INVALID,
                                   "vectors_per_class has %d counts for %lld classes", n_pc,
                                   (long long)m->C);
            for (int i = 0; i < n_pc; i++) {
                if (m->per_class[i] < 0 || m->per_class[i] > INT32_MAX)
                    return ox_node_err(n, OX_E_INVALID, "vectors_per_class[%d] is %lld", i,
                                       (long long)m->per_class[i]);
                m->V += m->per_class[i];
            }
            if (m->V > INT32_MAX)
                return ox_node_err(n, OX_E_INVALID, "%lld support vectors", (long long)m->V);
        }
        const float *pb;
        int n_pa = ox_attr_floats(n, "prob_a", &m->pa), n_pb = ox_attr_floats(n, "prob_b", &pb);
        m->pb = pb;
        if ((n_pa < 0 ? 0 : n_pa) != (n_pb < 0 ? 0 : n_pb))
            return ox_node_err(n, OX_E_INVALID, "prob_a has %d values and prob_b %d",
                               n_pa < 0 ? 0 : n_pa, n_pb < 0 ? 0 : n_pb);
        m->n_prob = n_pa < 0 ? 0 : n_pa;
        m->n_pairs = m->C * (m->C - 1) / 2;
        if (m->V > 0) {
            if (m->C < 2)
                return ox_node_err(n, OX_E_INVALID,
                                   "a support vector classifier needs two classes");
            if (n_coef < (m->C - 1) * m->V)
                return ox_node_err(n, OX_E_INVALID,
                                   "%d coefficients: expected %lld (classes - 1) x %lld vectors",
                                   n_coef, (long long)(m->C - 1), (long long)m->V);
            if (n_rho < m->n_pairs)
                return ox_node_err(n, OX_E_INVALID, "%d rho values for %lld pairs of classes",
                                   n_rho, (long long)m->n_pairs);
            if (m->n_prob && m->n_prob < m->n_pairs)
                return ox_node_err(n, OX_E_INVALID, "%lld prob_a values for %lld pairs of classes",
                                   (long long)m->n_prob, (long long)m->n_pairs);
            m->n_cols = m->n_prob ? m->C : m->C == 2 ? 2 : m->n_pairs;
        } else {
            m->n_pairs = 0;
            size_t cf;
            if (!ox_mul_size((size_t)m->C, (size_t)m->F, &cf) || cf != (size_t)n_coef)
                return ox_node_err(n, OX_E_INVALID,
                                   "%d coefficients: expected %lld classes x %lld features", n_coef,
                                   (long long)m->C, (long long)m->F);
            m->n_cols = m->C;
        }
    } else {
        m->V = ox_attr_int(n, "n_supports", 0);
        if (m->V < 0 || m->V > INT32_MAX)
            return ox_node_err(n, OX_E_INVALID, "n_supports is %lld", (long long)m->V);
        m->one_class = ox_attr_int(n, "one_class", 0) != 0;
        if (m->V > 0 && n_coef < m->V)
            return ox_node_err(n, OX_E_INVALID, "%d coefficients for %lld support vectors", n_coef,
                               (long long)m->V);
        if (m->V == 0 && n_coef != m->F)
            return ox_node_err(n, OX_E_INVALID, "%d coefficients for %lld features", n_coef,
                               (long long)m->F);
        m->n_cols = 1;
    }
    if (m->V > 0) {
        size_t vf;
        if (!ox_mul_size((size_t)m->V, (size_t)m->F, &vf) || vf != (size_t)n_sv)
            return ox_node_err(n, OX_E_INVALID,
                               "%d support vector values: expected %lld vectors x %lld features "
                               "(the input's width)",
                               n_sv, (long long)m->V, (long long)m->F);
        m->M = m->V;
    } else {
        m->w = m->coef; /* linear mode: the rows are the coefficients */
        m->M = classifier ? m->C : 1;
        m->kernel = K_LINEAR;
    }
    /* read only by a two-class linear-mode classifier's label rule */
    m->all_pos = classifier && m->V == 0 && m->C == 2;
    for (int i = 0; m->all_pos && i < n_coef; i++)
        if (!(m->coef[i] >= 0)) m->all_pos = false;
    return OX_OK;
}

/* Doubles of work a row needs past its kernel values: scores, decisions, votes, and the
 * coupling's matrices. */
static int64_t svm_work(const struct svm *m) {
    int64_t w = m->n_cols + m->n_pairs + m->C + 2;          /* scores, decisions, votes */
    if (m->V > 0 && m->n_prob) w += 2 * m->C * m->C + m->C; /* r, Q, Qp (C(C-1)/2 <= n_prob) */
    return w;
}

/* Prepared: the vectors [M, F] as doubles, then their squared norms [M]. */
static bool svm_prepared_bytes(const struct svm *m, size_t *bytes) {
    size_t a;
    return ox_mul_size((size_t)m->M, (size_t)m->F + 1, &a) && ox_mul_size(a, sizeof(double), bytes);
}

/* Per thread: a block of rows (double), their products with the vectors, their norms, and
 * the work of one row (the callers add each class's first vector once, after all threads'). */
static bool svm_thread_bytes(const struct svm *m, size_t *bytes) {
    size_t a, b;
    return ox_add_size((size_t)m->F, (size_t)m->M, &a) && ox_add_size(a, 1, &a) &&
           ox_mul_size(a, SVM_BLOCK, &a) && ox_add_size(a, (size_t)svm_work(m), &a) &&
           ox_mul_size(a, sizeof(double), &b) && ox_add_size(b, 63, &b) &&
           (*bytes = b & ~(size_t)63, true);
}

static ox_status svm_infer(struct ox_infer_ctx *ctx, const struct ox_node *n,
                           const ox_tensor *const *in, ox_tensor *const *out, bool classifier) {
    struct svm m;
    ox_status s = svm_read(n, ox_in(n, in, 0), classifier, &m);
    if (s) return s;
    int64_t dims[2] = {m.N, m.n_cols};
    if (classifier) {
        if (out[0]) ox_set_shape(out[0], m.ls ? OX_STRING : OX_INT64, 1, dims);
        if (n->n_outputs > 1 && out[1]) ox_set_shape(out[1], OX_FLOAT, 2, dims);
    } else {
        ox_set_shape(out[0], OX_FLOAT, 2, dims);
    }
    int threads = ctx->n_threads > 0 ? ctx->n_threads : 1;
    size_t per, all, firsts;
    if (!svm_prepared_bytes(&m, &ctx->prepared_bytes) || !svm_thread_bytes(&m, &per) ||
        !ox_mul_size(per, (size_t)threads, &all) ||
        !ox_mul_size((size_t)m.C + 1, sizeof(int64_t), &firsts) ||
        !ox_add_size(all, firsts, &ctx->scratch_bytes))
        return ox_node_err(n, OX_E_NOMEM, "support vector machine too large");
    return OX_OK;
}

static void svm_fill(void *dst, void *arg) {
    const struct svm *m = arg;
    double *w = dst, *norm = w + m->M * m->F;
    for (int64_t v = 0; v < m->M; v++) {
        double ss = 0;
        for (int64_t j = 0; j < m->F; j++) {
            double e = m->w[v * m->F + j];
            w[v * m->F + j] = e;
            ss += e * e;
        }
        norm[v] = ss;
    }
}

struct svm_job {
    const struct svm *m;
    const ox_tensor *x;
    ox_tensor *y, *z;
    const double *w, *norm; /* prepared: the vectors as doubles, their squared norms */
    char *scratch;
    size_t per_thread;
};

/* libsvm's sigmoid of a decision value. */
static double svm_sigmoid(double s, double a, double b) {
    double f = s * a + b;
    return f >= 0 ? exp(-f) / (1.0 + exp(-f)) : 1.0 / (1.0 + exp(f));
}

/* libsvm's pairwise coupling (Wu, Lin and Weng, 2004): class probabilities p[C] from r[C, C]
 * (r[i][j] the probability of i against j), by the fixed-point sweeps libsvm runs (at most
 * max(100, C), until every |(Qp)_t - p'Qp| < 0.005 / C). */
static void svm_couple(const double *r, int64_t C, double *Q, double *Qp, double *p) {
    for (int64_t t = 0; t < C; t++) {
        p[t] = 1.0 / (double)C;
        Q[t * C + t] = 0;
        for (int64_t j = 0; j < t; j++) {
            Q[t * C + t] += r[j * C + t] * r[j * C + t];
            Q[t * C + j] = Q[j * C + t];
        }
        for (int64_t j = t + 1; j < C; j++) {
            Q[t * C + t] += r[j * C + t] * r[j * C + t];
            Q[t * C + j] = -r[j * C + t] * r[t * C + j];
        }
    }
    int64_t iters = C > 100 ? C : 100;
    double eps = 0.005 / (double)C;
    for (int64_t it = 0; it < iters; it++) {
        double pQp = 0, max_err = 0;
        for (int64_t t = 0; t < C; t++) {
            Qp[t] = 0;
            for (int64_t j = 0; j < C; j++) Qp[t] += Q[t * C + j] * p[j];
            pQp += p[t] * Qp[t];
        }
        for (int64_t t = 0; t < C; t++) {
            double e = fabs(Qp[t] - pQp);
            if (e > max_err) max_err = e;
        }
        if (max_err < eps) break;
        for (int64_t t = 0; t < C; t++) {
            double diff = (-Qp[t] + pQp) / Q[t * C + t];
            p[t] += diff;
            pQp = (pQp + diff * (diff * Q[t * C + t] + 2 * Qp[t])) / (1 + diff) / (1 + diff);
            for (int64_t j = 0; j < C; j++) {
                Qp[j] = (Qp[j] + diff * Q[t * C + j]) / (1 + diff);
                p[j] /= 1 + diff;
            }
        }
    }
}

/* Kernel values in place over g[M] (the row's products with the vectors; xx its |x|^2). */
static void svm_kernel(const struct svm *m, const double *norm, double xx, double *g) {
    switch (m->kernel) {
    case K_POLY:
        for (int64_t v = 0; v < m->M; v++) g[v] = pow(m->gamma * g[v] + m->coef0, m->degree);
        break;
    case K_RBF:
        for (int64_t v = 0; v < m->M; v++) {
            double d = xx + norm[v] - 2 * g[v];
            g[v] = exp(-m->gamma * (d > 0 ? d : 0));
        }
        break;
    case K_SIGMOID:
        for (int64_t v = 0; v < m->M; v++) g[v] = tanh(m->gamma * g[v] + m->coef0);
        break;
    default: break;
    }
}

static void svm_write_label(const struct svm *m, ox_tensor *y, int64_t r, int64_t k) {
    if (!y) return;
    if (m->ls)
        ((const char **)y->data)[r] = m->ls[k] ? m->ls[k] : "";
    else
        ((int64_t *)y->data)[r] = m->li[k];
}

/* Row r of a classifier from its kernel values k[M] (linear mode: its scores less rho). */
static void svm_classify(const struct svm_job *j, int64_t r, const double *k, double *work) {
    const struct svm *m = j->m;
    int64_t C = m->C, best = 0;
    double *sc = work, *dec = sc + m->n_cols; /* scores; decisions [n_pairs] */
    if (m->V == 0) {
        for (int64_t c = 0; c < C; c++) sc[c] = k[c] + m->rho[0];
        for (int64_t c = 1; c < C; c++)
            if (sc[c] > sc[best]) best = c;
        if (C == 2 && m->all_pos && sc[best] >= 0.5) best = 1;
    } else {
        double *votes = dec + m->n_pairs;
        for (int64_t c = 0; c < C; c++) votes[c] = 0;
        int64_t p = 0;
        for (int64_t a = 0; a < C; a++)
            for (int64_t b = a + 1; b < C; b++, p++) {
                const float *ca = m->coef + (b - 1) * m->V, *cb = m->coef + a * m->V;
                double s = m->rho[p];
                for (int64_t v = m->first[a]; v < m->first[a + 1]; v++) s += ca[v] * k[v];
                for (int64_t v = m->first[b]; v < m->first[b + 1]; v++) s += cb[v] * k[v];
                dec[p] = s;
                votes[s > 0 ? a : b] += 1;
            }
        for (int64_t c = 1; c < C; c++)
            if (votes[c] > votes[best]) best = c;
        if (m->n_prob) {
            double *rm = votes + C, *Q = rm + C * C, *Qp = Q + C * C;
            p = 0;
            for (int64_t a = 0; a < C; a++)
                for (int64_t b = a + 1; b < C; b++, p++) {
                    double v = svm_sigmoid(dec[p], m->pa[p], m->pb[p]);
                    v = v < 1e-7 ? 1e-7 : v > 1 - 1e-7 ? 1 - 1e-7 : v;
                    rm[a * C + b] = v;
                    rm[b * C + a] = 1 - v;
                }
            svm_couple(rm, C, Q, Qp, sc);
        } else if (C == 2) {
            sc[0] = -dec[0];
            sc[1] = dec[0];
        } else {
            for (int64_t q = 0; q < m->n_pairs; q++) sc[q] = dec[q];
        }
    }
    ox_ml_post_apply(m->post, sc, m->n_cols);
    svm_write_label(m, j->y, r, best);
    if (j->z)
        for (int64_t c = 0; c < m->n_cols; c++)
            ((float *)j->z->data)[r * m->n_cols + c] = (float)sc[c];
}

static void svm_regress(const struct svm_job *j, int64_t r, const double *k) {
    const struct svm *m = j->m;
    double s = m->rho[0];
    if (m->V == 0)
        s += k[0];
    else
        for (int64_t v = 0; v < m->V; v++) s += m->coef[v] * k[v];
    ox_ml_post_apply(m->post, &s, 1);
    if (m->one_class) s = s > 0 ? 1 : -1;
    ((float *)j->y->data)[r] = (float)s;
}

static void svm_rows(void *arg, int64_t b0, int64_t b1, int tid) {
    const struct svm_job *j = arg;
    const struct svm *m = j->m;
    int64_t F = m->F, M = m->M;
    double *xb = (double *)(j->scratch + (size_t)tid * j->per_thread);
    double *g = xb + SVM_BLOCK * F, *xx = g + SVM_BLOCK * M, *work = xx + SVM_BLOCK;
    for (int64_t blk = b0; blk < b1; blk++) {
        int64_t r0 = blk * SVM_BLOCK, nr = m->N - r0 < SVM_BLOCK ? m->N - r0 : SVM_BLOCK;
        for (int64_t i = 0; i < nr; i++) {
            double ss = 0;
            for (int64_t f = 0; f < F; f++) {
                double e = ox_ld(j->x, (r0 + i) * F + f);
                xb[i * F + f] = e;
                ss += e * e;
            }
            xx[i] = ss;
        }
        if (F > 0)
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nr, (int)M, (int)F, 1.0, xb,
                        (int)F, j->w, (int)F, 0.0, g, (int)M);
        else
            memset(g, 0, (size_t)(nr * M) * sizeof(double));
        for (int64_t i = 0; i < nr; i++) {
            double *k = g + i * M;
            svm_kernel(m, j->norm, xx[i], k);
            if (m->classifier)
                svm_classify(j, r0 + i, k, work);
            else
                svm_regress(j, r0 + i, k);
        }
    }
}

static ox_status svm_run(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                         const ox_tensor *const *in, ox_tensor *const *out, bool classifier) {
    struct svm m;
    ox_status s = svm_read(n, in[0], classifier, &m);
    if (s) return s;
    int threads = ctx->pool ? ox_pool_size(ctx->pool) : 1;
    size_t per, all;
    if (!svm_thread_bytes(&m, &per) || !ox_mul_size(per, (size_t)threads, &all) ||
        ctx->scratch_bytes < all + ((size_t)m.C + 1) * sizeof(int64_t))
        return ox_node_err(n, OX_E_INTERNAL, "scratch smaller than inferred");
    m.first = (int64_t *)((char *)ctx->scratch + all);
    m.first[0] = 0;
    for (int64_t c = 0; c < m.C && m.per_class && m.V > 0; c++)
        m.first[c + 1] = m.first[c] + m.per_class[c];
    struct ox_prep_key key = {n, {m.M, m.F, classifier, 0}};
    const double *w = ox_kernel_prepared(ctx, svm_fill, &m, &key);
    if (!w) return ox_node_err(n, OX_E_INTERNAL, "no prepared memory for the vectors");
    struct svm_job j = {
        .m = &m,
        .x = in[0],
        .y = out[0],
        .z = classifier && n->n_outputs > 1 ? out[1] : NULL,
        .w = w,
        .norm = w + m.M * m.F,
        .scratch = ctx->scratch,
        .per_thread = per,
    };
    if (classifier && !j.y && !j.z) return OX_OK;
    ox_parallel_for(ctx->pool, (m.N + SVM_BLOCK - 1) / SVM_BLOCK, svm_rows, &j);
    return OX_OK;
}

ox_status ox_sig_infer_svm_classifier(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                      const ox_tensor *const *in, ox_tensor *const *out) {
    return svm_infer(ctx, n, in, out, true);
}

ox_status ox_sig_cpu_svm_classifier(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                                    const ox_tensor *const *in, ox_tensor *const *out) {
    return svm_run(ctx, n, in, out, true);
}

ox_status ox_sig_infer_svm_regressor(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                     const ox_tensor *const *in, ox_tensor *const *out) {
    return svm_infer(ctx, n, in, out, false);
}

ox_status ox_sig_cpu_svm_regressor(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                                   const ox_tensor *const *in, ox_tensor *const *out) {
    return svm_run(ctx, n, in, out, false);
}
