/* What the ai.onnx.ml kernels share (defined in kernels/cpu/ml.c; used there and by
 * kernels/cpu/svm.c): the rows of a classical-ML input, the post transforms, class labels.
 *
 *     int64_t N, F;
 *     int post;
 *     if ((s = ox_ml_rows(n, x, &N, &F)) || (s = ox_ml_post_code(n, &post))) return s;
 *     ... scores of row r into acc[0..C) ...
 *     ox_ml_post_apply(post, acc, C);
 *
 * Everything returned points into the node's attributes (borrowed, as long as the model). */
#ifndef OX_KERNELS_CPU_ML_H
#define OX_KERNELS_CPU_ML_H

#include "kernels/op.h"

/* post_transform codes, in the order of TreeEnsemble (opset 5)'s integer attribute. */
enum { POST_NONE, POST_SOFTMAX, POST_LOGISTIC, POST_SOFTMAX_ZERO, POST_PROBIT };

/* Rows and features of a classical-ML input (float, double, int64 or int32): [N, F], or [F]
 * as one row. */
ox_status ox_ml_rows(const struct ox_node *n, const ox_tensor *x, int64_t *N, int64_t *F);
/* post_transform by name (NONE, SOFTMAX, LOGISTIC, SOFTMAX_ZERO, PROBIT; NONE when absent). */
ox_status ox_ml_post_code(const struct ox_node *n, int *post);
/* The post transform in place on one row of T scores: SOFTMAX_ZERO leaves zero scores at
 * zero and normalises the others among themselves; PROBIT is sqrt(2) erfinv(2p - 1). */
void ox_ml_post_apply(int post, double *acc, int64_t T);
/* Class labels: the int64 list `ints` (classlabels_int64s, or classlabels_ints) or
 * classlabels_strings, exactly one; *li or *ls is set, the other NULL. */
ox_status ox_ml_class_labels(const struct ox_node *n, const char *ints, const int64_t **li,
                             const char *const **ls, int64_t *count);

#endif
