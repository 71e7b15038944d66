/* Float GEMM over the session's thread pool: OpenBLAS runs one thread per piece, and the
 * pieces are column blocks of C (or row blocks, when C is too narrow to split). Each
 * element of C comes from one sgemm call over the whole K: no split-K partial sums. */
#include "kernels/op.h"

#include <cblas.h>

#define SPLIT_ALIGN     16      /* columns or rows per block: a multiple of the sgemm tiles */
#define SPLIT_MIN_FLOPS 200000. /* below this one call is faster than waking the pool */

struct sgemm_job {
    bool ta, tb, by_cols;
    int64_t M, N, K, lda, ldb, ldc;
    float alpha, beta;
    const float *A, *B;
    float *C;
};

static void sgemm_piece(void *arg, int64_t b, int64_t e, int tid) {
    (void)tid;
    const struct sgemm_job *j = arg;
    int64_t lo = b * SPLIT_ALIGN, hi = e * SPLIT_ALIGN;
    int64_t lim = j->by_cols ? j->N : j->M;
    if (hi > lim) hi = lim;
    if (hi <= lo) return;
    const float *A = j->A, *B = j->B;
    float *C = j->C;
    int64_t M = j->M, N = j->N;
    if (j->by_cols) {
        B += j->tb ? lo * j->ldb : lo;
        C += lo;
        N = hi - lo;
    } else {
        A += j->ta ? lo : lo * j->lda;
        C += lo * j->ldc;
        M = hi - lo;
    }
    cblas_sgemm(CblasRowMajor, j->ta ? CblasTrans : CblasNoTrans, j->tb ? CblasTrans : CblasNoTrans,
                (int)M, (int)N, (int)j->K, j->alpha, A, (int)j->lda, B, (int)j->ldb, j->beta, C,
                (int)j->ldc);
}

void ox_sgemm(struct ox_pool *pool, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
              const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
              int64_t ldc) {
    struct sgemm_job j = {ta, tb, true, M, N, K, lda, ldb, ldc, alpha, beta, A, B, C};
    int T = ox_pool_size(pool);
    if (M <= 0 || N <= 0) return;
    int64_t nb_cols = (N + SPLIT_ALIGN - 1) / SPLIT_ALIGN,
            nb_rows = (M + SPLIT_ALIGN - 1) / SPLIT_ALIGN;
    if (T == 1 || 2.0 * (double)M * (double)N * (double)K < SPLIT_MIN_FLOPS ||
        (nb_cols < 2 && nb_rows < 2)) {
        sgemm_piece(&j, 0, nb_cols, 0);
        return;
    }
    /* columns when each thread gets a few blocks of them, else the longer side */
    j.by_cols = nb_cols >= 4 * T || nb_cols >= nb_rows;
    ox_parallel_for(pool, j.by_cols ? nb_cols : nb_rows, sgemm_piece, &j);
}
