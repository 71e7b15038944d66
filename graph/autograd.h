/* Reverse-mode autograd as a graph pass (DESIGN.md, "Autograd").
 *
 *     struct ox_ad_request r = {.n_of = 1, .of = &loss};   // wrt: every float initializer
 *     if (ox_autograd(g, &r) != OX_OK) puts(ox_errmsg());    // on a path to `loss`
 *     // g now has an input "loss_grad" (the seed) and outputs "<param>_grad"
 *
 * The pass walks g's nodes backwards from the values to differentiate (`of`). For every node
 * that lies between a value to differentiate with respect to (`wrt`) and an `of` value, it
 * asks the node's gradient rule (a row of the rule table, graph/grad_*.def) to append the
 * nodes that compute the gradients of the node's inputs from the gradients of its outputs.
 * Gradients that reach one value from several readers are summed (one Sum node). Rules emit
 * default-domain ONNX operators only, at the model's opset (raised to 13 first when it is
 * lower, through graph/opset.c), so that the gradient graph exports as plain ONNX.
 *
 * Shapes: a rule may need to undo broadcasting or rebuild a shape. It asks the kit below
 * for a value's dtype, rank and dims; dims that do not depend on the model's symbolic input
 * dims are known (found by planning the forward graph twice with different sizes for those
 * dims), the others read -1 and the kit emits Shape-based arithmetic instead, which the
 * planner folds away once the input shapes are known at run time.
 *
 * Parameters: every `wrt` value that is an initializer becomes a graph input as well (its
 * initializer stays as the default), so that a caller may bind new parameter values at each
 * run (training) and the planner never treats them as constant.
 */
#ifndef OX_GRAPH_AUTOGRAD_H
#define OX_GRAPH_AUTOGRAD_H

#include "graph/ir.h"

struct ox_ad_request {
    int n_of;
    const int *of; /* value ids to differentiate (float) */
    /* Per `of` value: the value holding its incoming gradient (same shape). NULL: a new graph
     * input named "<name>_grad" for each. */
    const int *seeds;
    /* Values to differentiate with respect to; n_wrt == 0: every float initializer from which
     * a gradient reaches an `of` value (those with no path are left out). */
    int n_wrt;
    const int *wrt;
    /* Out, per wrt value (n_wrt entries; needs n_wrt > 0): the value holding its gradient.
     * NULL: each gradient becomes a graph output named "<name>_grad" (explicit wrt values that
     * no gradient reaches get zeros). */
    int *grads;
};

/* Append the backward graph to g (a main graph). On error g may hold part of it: callers
 * work on a copy they can drop. Errors: OX_E_UNSUPPORTED (a differentiable op without a rule,
 * or control flow on the path; the message names the node and op), OX_E_INVALID (unknown
 * names, a name "<x>_grad" already taken), OX_E_NOMEM. */
ox_status ox_autograd(struct ox_graph *g, const struct ox_ad_request *r);

/* Replace every Gradient node (domain ai.onnx.preview.training) of g by the nodes that
 * compute it: the gradient of its `y` with respect to its `xs`, seeded with ones. */
ox_status ox_autograd_expand_gradient_ops(struct ox_graph *g);

/* ---- the rule kit ---------------------------------------------------------------------- */

struct ox_ad;

/* Rule table rows: OX_GRAD(domain, op_type, function, flags). With OX_GRAD_UNBROADCAST the
 * rule gives each input's gradient in the shape the input was broadcast to (the output's),
 * and the walker sums it back to the input's shape (ox_ad_unbroadcast): for the ops that
 * broadcast numpy-style (Add, Mul, Where, Pow, ...). */
#define OX_GRAD_UNBROADCAST 1u

/* A rule: given the forward node n (a copy: g's node array may move while the rule emits)
 * and gy[j], the gradient of output j (-1: zero), set gx[i] to the gradient of input i for
 * every i with ox_ad_wants(ad, n, i) (leave -1 for none: zero, or not differentiable).
 * Emitting functions return -1 once an error is recorded; the walker checks after the
 * rule, so a rule may go on emitting and just return OX_OK (or its own error). */
typedef ox_status (*ox_grad_rule_fn)(struct ox_ad *ad, const struct ox_node *n, const int *gy,
                                     int *gx);

/* The rule of ops through which no gradient flows (Floor, Sign, Round, ...). */
ox_status ox_grad_none(struct ox_ad *ad, const struct ox_node *n, const int *gy, int *gx);

/* Is the gradient of input i of n asked for (it depends on a wrt value, and is float)? */
bool ox_ad_wants(const struct ox_ad *ad, const struct ox_node *n, int i);
struct ox_graph *ox_ad_graph(struct ox_ad *ad);
int ox_ad_opset(const struct ox_ad *ad); /* of the default domain */

/* Facts about a forward or emitted value: dtype (OX_UNDEFINED when unknown), rank (-1 when
 * unknown), dim k (-1 when it depends on input sizes or is unknown), all dims known. */
ox_dtype ox_ad_dtype(const struct ox_ad *ad, int v);
int ox_ad_rank(const struct ox_ad *ad, int v);
int64_t ox_ad_dim(const struct ox_ad *ad, int v, int k);
bool ox_ad_static(const struct ox_ad *ad, int v);
/* Record facts about an emitted value (rules that know them, so later kit calls can use
 * static forms). dims may be NULL (rank only); -1 entries stay unknown. */
void ox_ad_set_info(struct ox_ad *ad, int v, ox_dtype dt, int rank, const int64_t *dims);

/* Record an error (returns it), e.g. an attribute value the rule does not handle. */
ox_status ox_ad_fail(struct ox_ad *ad, const struct ox_node *n, ox_status code, const char *fmt,
                     ...) __attribute__((format(printf, 4, 5)));

/* Append a default-domain node with fresh outputs (written to out[0..n_out)), returning it;
 * the pointer is valid until the next emission (set attributes right away). in[i] == -1 is an
 * omitted optional input. */
struct ox_node *ox_ad_node(struct ox_ad *ad, const char *op, int n_in, const int *in, int n_out,
                           int *out);
/* The same with one output, returned (-1 on error). */
int ox_ad_op(struct ox_ad *ad, const char *op, int n_in, const int *in);
/* An op with attributes set by a printf-like spec: each of "i:name" (int64_t), "f:name" (double),
 * "s:name" (const char *), "I:name" (int n, const int64_t *vals), "F:name" (int n,
 * const float *vals), separated by spaces. Example:
 *     ox_ad_opa(ad, "Transpose", 1, &x, "I:perm", 2, (int64_t[]){1, 0});  */
int ox_ad_opa(struct ox_ad *ad, const char *op, int n_in, const int *in, const char *spec, ...);
ox_status ox_ad_set_attr(struct ox_ad *ad, struct ox_node *nd, const char *spec, ...);

#define OX_AD_N(...) ((int)(sizeof((int[]){__VA_ARGS__}) / sizeof(int)))
/* OX_AD(ad, "Mul", a, b): one-output op on the listed inputs. */
#define OX_AD(ad, op, ...) ox_ad_op(ad, op, OX_AD_N(__VA_ARGS__), (int[]){__VA_ARGS__})

/* Constants (initializers of g): a scalar of v's dtype (CastLike when unknown), float64 value
 * `x`; a 1-D int64 tensor; a scalar int64. */
int ox_ad_scalar_like(struct ox_ad *ad, double x, int v);
int ox_ad_ints(struct ox_ad *ad, int n, const int64_t *vals);
int ox_ad_int(struct ox_ad *ad, int64_t x);

/* Constant data of value v: an initializer that no graph input overrides, or the `value` of
 * a Constant node; NULL otherwise. */
const ox_tensor *ox_ad_const_value(const struct ox_ad *ad, int v);
/* The integers of a constant v (ox_ad_const_value, or a Constant's value_int/value_ints): at
 * most `max` into out, their count into *n; false when v is not a constant integer tensor of
 * at most `max` elements. */
bool ox_ad_const_ints(const struct ox_ad *ad, int v, int max, int64_t *out, int *n);
/* A Constant node holding a copy of t (facts: t's dtype and dims). */
int ox_ad_const(struct ox_ad *ad, const ox_tensor *t);
/* Facts of dst: src's rank and dims, element type dt (OX_UNDEFINED: src's). */
void ox_ad_info_as(struct ox_ad *ad, int dst, int src, ox_dtype dt);

/* Common pieces. Each returns the new value (-1 on error). */
/* v converted to like's element type (v itself when both are known to agree): Cast when it
 * is known, CastLike otherwise (an error below opset 15). */
int ox_ad_cast_like(struct ox_ad *ad, int v, int like);
int ox_ad_add(struct ox_ad *ad, int a, int b);
int ox_ad_sub(struct ox_ad *ad, int a, int b);
int ox_ad_mul(struct ox_ad *ad, int a, int b);
int ox_ad_div(struct ox_ad *ad, int a, int b);
int ox_ad_neg(struct ox_ad *ad, int a);
int ox_ad_matmul(struct ox_ad *ad, int a, int b);       /* MatMul (operands of rank >= 2) */
int ox_ad_shape(struct ox_ad *ad, int x);               /* Shape(x), int64 [rank] */
int ox_ad_zeros_like(struct ox_ad *ad, int x);          /* zeros of x's dtype and shape */
int ox_ad_ones_like(struct ox_ad *ad, int x);           /* ones of x's dtype and shape */
int ox_ad_reshape_like(struct ox_ad *ad, int g, int x); /* g under x's shape */
int ox_ad_expand_like(struct ox_ad *ad, int g, int x);  /* g broadcast to x's shape */
/* g (the gradient of a broadcast result) summed down to x's shape: the reduction that undoes
 * numpy-style broadcasting of x. Returns g itself when the shapes are known to be equal. */
int ox_ad_unbroadcast(struct ox_ad *ad, int g, int x);
/* ReduceSum/ReduceMax/... of x over `axes` (n_axes == 0: all), keepdims as given; the
 * opset's form (axes as input from 13 for ReduceSum, from 18 for the others). */
int ox_ad_reduce(struct ox_ad *ad, const char *op, int x, int n_axes, const int64_t *axes,
                 bool keepdims);
/* Unsqueeze/Squeeze with axes (the opset's form). */
int ox_ad_unsqueeze(struct ox_ad *ad, int x, int n_axes, const int64_t *axes);
int ox_ad_squeeze(struct ox_ad *ad, int x, int n_axes, const int64_t *axes);
/* Transpose with a permutation. */
int ox_ad_transpose(struct ox_ad *ad, int x, int rank, const int64_t *perm);

#endif
