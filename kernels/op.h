/* The operator table: one row per operator (domain, type, opset range) naming its shape
 * inference and its CPU kernel. Rows live in kernels/cpu/<family>.def as
 *
 *     OX_OP("", "Relu", 1, OX_OPSET_MAX, infer_unary, cpu_relu, 0)
 *
 * and kernels/optable.c turns them into the table and the prototypes, so nothing is kept in
 * sync by hand. Adding an op: its row, its two functions in the family's .c, its tests.
 *
 * Contracts
 * - infer(ctx, node, in, out): `in[i]` describes input i (NULL for an omitted optional
 *   input; i < node->n_inputs). `in[i]->data` is set only when the value is known at plan
 *   time (constants, shape arithmetic) and always at run time for dynamic nodes. infer sets
 *   dtype, rank and dims of each `out[j]` (NULL for an omitted output) and may ask for
 *   scratch memory with ctx->scratch_bytes. It must not write data. When an output shape
 *   depends on input data that is not known, it returns OX_NEED_DATA, and the executor
 *   calls it again at run time with every input's data (the node is then "dynamic").
 * - cpu(ctx, node, in, out): computes out[j]->data (allocated by the executor with the
 *   dims that infer chose) from in[i]->data. It must not allocate: scratch is in ctx.
 * Both report errors with ox_node_err, which names the node and op.
 */
#ifndef OX_KERNELS_OP_H
#define OX_KERNELS_OP_H

#include "graph/ir.h"

#include <math.h>
#include <string.h>

#define OX_OPSET_MAX 1000

/* Hot loops get AVX-512 and AVX2 clones, picked when the library loads (GCC/clang
 * target_clones through ifunc), with the portable build as the fallback. The build turns off
 * floating-point contraction so that every clone rounds alike. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(OX_NO_CLONES)
#define OX_HOT __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define OX_HOT
#endif
/* Returned by infer (positive: not an error) when an output shape depends on unknown data. */
#define OX_NEED_DATA 1

/* Row flags. */
enum {
    OX_OP_NONDETERMINISTIC = 1 << 0, /* never folded at plan time (Random*, Dropout training) */
    OX_OP_SHAPE_ONLY = 1 << 1,       /* reads only its inputs' shapes: folded whenever they are
                                        known (Shape, Size), whatever their data */
    OX_OP_VIEW = 1 << 3,             /* output 0 is input 0's data under another shape
                                        (Reshape, Flatten, Squeeze, Unsqueeze, Identity) when
                                        the two have one type (Cast, CastLike: only then): the
                                        planner makes it a view, with no step and no copy */
    OX_OP_ALLOCATES = 1 << 2,        /* control flow: always run at run time, infer is not
                                        called; the kernel sets each output's type and shape
                                        and allocates it with ox_kernel_alloc */
    OX_OP_INPLACE = 1 << 4,          /* elementwise: element i of the output depends on
                                        element i of an input of the same shape and type (and
                                        broadcast operands) only, so the output may take that
                                        input's memory when the input dies there */
    OX_OP_VALUE_INPUTS = 1 << 5,     /* takes maps or sequences (DictVectorizer, CastMap): a
                                        dynamic step whose infer, at run time, reads them and
                                        sizes the outputs and scratch from them */
};

struct ox_infer_ctx {
    const struct ox_graph *graph;
    size_t scratch_bytes;  /* set by infer when the kernel needs scratch memory */
    int n_threads;         /* threads the kernel may split over (per-thread scratch) */
    unsigned const_inputs; /* bit k: input k is constant for the plan's life (weights) */
    size_t prepared_bytes; /* set by infer: memory prepared once from constant inputs */
    bool precise;          /* the kernel's most accurate path, not a faster one that rounds more (a
                              graph computing gradients, OX_META_GRADIENTS): the run's kernel ctx
                              says the same */
};

/* The CPU thread pool (executor/pool.c). ox_parallel_for splits [0, n) into at most one
 * contiguous piece per thread and calls fn(arg, begin, end, tid) for each, tid in
 * [0, ox_pool_size(pool)) naming the thread (for per-thread scratch); it returns when all
 * pieces are done. A NULL pool, a nested call or a busy pool run fn(arg, 0, n, 0) inline. */
struct ox_pool;
typedef void (*ox_range_fn)(void *arg, int64_t begin, int64_t end, int tid);
ox_status ox_pool_create(int n_threads, struct ox_pool **out);
void ox_pool_free(struct ox_pool *p);
int ox_pool_size(const struct ox_pool *p);
void ox_parallel_for(struct ox_pool *p, int64_t n, ox_range_fn fn, void *arg);
/* The same with at most per_thread pieces per thread (ox_parallel_for takes 4): fewer, for
 * work whose pieces each repeat a setup (a GEMM split by rows packs all of B per piece). */
void ox_parallel_for_pieces(struct ox_pool *p, int64_t n, int per_thread, ox_range_fn fn,
                            void *arg);
/* Where the process may use as many CPUs as the pool has threads, each worker is held to
 * one of them, and a thread that starts a job on a worker's CPU is moved to another and held
 * there until ox_pool_release_caller (the session calls it at the end of each run) gives it
 * back the CPUs it had. OX_AFFINITY=0 in the environment turns this off. ox_pool_cpu(p, tid)
 * is the CPU thread tid is held to (tid 0: where a caller is moved), -1 when none. */
void ox_pool_release_caller(struct ox_pool *p);
int ox_pool_cpu(const struct ox_pool *p, int tid);
/* C = alpha * op(A) op(B) + beta * C for row-major float matrices (cblas_sgemm's contract),
 * split over the pool (kernels/cpu/gemm.c). */
void ox_sgemm(struct ox_pool *pool, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
              const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
              int64_t ldc);

/* n rounded up to a multiple of 64: the alignment of scratch (and prepared memory), by
 * which kernels lay out their pieces of it. */
static inline size_t ox_align64(size_t n) {
    return (n + 63) & ~(size_t)63;
}

/* base + off bytes, but base itself when off is 0: a kernel whose scratch is empty gets a
 * NULL base, and NULL + 0 is undefined behaviour in C. */
static inline void *ox_scratch_at(void *base, size_t off) {
    return off ? (char *)base + off : base;
}

/* Packed-operand float GEMM with a fused epilogue (kernels/cpu/sgemm.c, where the layout
 * is described). Fast on CPUs with AVX-512 (ox_sgemm_is_fast), else use ox_sgemm. */
#define OX_GEMM_MR 8   /* rows of a packed A panel */
#define OX_GEMM_NR 32  /* columns of a packed B block */
#define OX_GEMM_KC 256 /* rows of a packed B block */
struct ox_epilogue {
    const float *bias_row; /* + bias_row[i], or NULL */
    const float *bias_col; /* + bias_col[j], or NULL */
    const float *residual; /* + residual[i * ld_residual + j], or NULL */
    int64_t ld_residual;
    float lo, hi; /* then clamp to [lo, hi] (-INFINITY, INFINITY: none) */
    bool silu;    /* then x * sigmoid(x) (SiLU, Swish) */
};
/* A source of B: pack rows [k0, k1) and columns [j0, j1) (at most OX_GEMM_NR) into dst,
 * k-major with row stride OX_GEMM_NR, columns past j1 zero. */
struct ox_gemm_b {
    void (*pack)(const struct ox_gemm_b *b, int64_t k0, int64_t k1, int64_t j0, int64_t j1,
                 float *dst);
    const float *data; /* a matrix: element (k, j) at data[k * ld + j] (trans: [j * ld + k]) */
    int64_t ld;
    bool trans;
    const void *ctx;     /* other packers' state */
    const float *packed; /* or all of B packed ahead by ox_sgemm_pack_b (pack unused) */
    /* or B read in place, never packed (pack unused): element (k, j) at data[offs[k] + j],
     * and rows are read whole blocks of OX_GEMM_NR wide, so data[offs[k] + j] must be
     * readable up to the block past the last column (a direct convolution, conv.c) */
    const int32_t *offs;
};
void ox_gemm_b_pack_matrix(const struct ox_gemm_b *b, int64_t k0, int64_t k1, int64_t j0,
                           int64_t j1, float *dst);
bool ox_sgemm_is_fast(void);
/* Whether QLinearConv's uint8 x int8 2-D form of group 1 runs as integer products here
 * (AVX-512 VNNI: kernels/cpu/qconv8.c), faster than the float convolution it replaces;
 * graph/optimize.c makes QDQ convolutions integer ones only then. */
bool ox_qconv8_available(void);
/* Whether a 2-D depthwise QLinearConv of that kernel and horizontal stride runs as
 * kernels/cpu/qdw8.c's integer sums here (AVX-512BW; stride 1 or 2; 256 taps at most). */
bool ox_qdw8_supports(int64_t kh, int64_t kw, int64_t stride_w);
int64_t ox_sgemm_packed_a_floats(int64_t M, int64_t K);
void ox_sgemm_pack_a(const float *A, int64_t lda, bool ta, int64_t M, int64_t K, float *dst);
/* The same, the panels split over the pool. */
void ox_sgemm_pack_a_pool(struct ox_pool *pool, const float *A, int64_t lda, bool ta, int64_t M,
                          int64_t K, float *dst);
/* All of B (K x N) packed ahead, for constant weights: column blocks of OX_GEMM_NR, each
 * K rows of OX_GEMM_NR floats. */
int64_t ox_sgemm_packed_b_floats(int64_t K, int64_t N);
void ox_sgemm_pack_b(const struct ox_gemm_b *b, int64_t K, int64_t N, float *dst);
/* C = epilogue(A B) (load_c: C + A B), A packed by ox_sgemm_pack_a, split over the pool. */
void ox_sgemm_packed(struct ox_pool *pool, const float *ap, int64_t M, int64_t N, int64_t K,
                     const struct ox_gemm_b *b, float *C, int64_t ldc, const struct ox_epilogue *ep,
                     bool load_c);

/* A pointwise FusedConv (pw, its inputs pin and output pout) whose output only a depthwise
 * FusedConv (dw, inputs din, output dout) reads, run as one kernel by a CPU plan
 * (executor/plan.c, plan_fuse_pw_dw; kernels/cpu/conv.c): the scratch bytes it needs on
 * n_threads, 0 where the pair does not fit it; and the kernel, which writes dout only. */
struct ox_node;
size_t ox_nn_pw_dw_scratch(const struct ox_node *pw, const ox_tensor *const *pin,
                           const ox_tensor *pout, const struct ox_node *dw,
                           const ox_tensor *const *din, const ox_tensor *dout, int n_threads);
struct ox_kernel_ctx;
ox_status ox_nn_cpu_pw_dw(struct ox_kernel_ctx *ctx, const struct ox_node *pw,
                          const ox_tensor *const *pin, const ox_tensor *pout,
                          const struct ox_node *dw, const ox_tensor *const *din,
                          ox_tensor *const *dout);

struct ox_plan;
struct ox_scope;

struct ox_kernel_ctx {
    void *scratch; /* scratch_bytes as infer asked, 64-byte aligned */
    size_t scratch_bytes;
    struct ox_pool *pool; /* NULL: run serially */
    void *prepared;       /* prepared_bytes as infer asked (see ox_kernel_prepared) */
    bool prepared_once;   /* `prepared` lives for this call only (plan-time folding, dynamic
                           * steps): not shared, unless prepared_keep */
    bool prepared_keep;   /* a dynamic step: what it fills with a key is kept by the plan and
                           * found again by its later runs (ox_kernel_prepared) */
    /* String tensors hold borrowed `char *`: kernels that move strings copy the pointers;
     * a kernel that makes new strings allocates them here (ox_arena_strdup). They live as
     * long as the plan. The executor never frees string elements. */
    struct ox_arena *strings;
    struct ox_plan *plan;         /* the plan running this node (subgraph plans cache here) */
    const struct ox_scope *scope; /* the enclosing scope of that plan (NULL at top level) */
    bool precise;                 /* as ox_infer_ctx.precise was for this node's infer */
};

typedef ox_status (*ox_infer_fn)(struct ox_infer_ctx *ctx, const struct ox_node *n,
                                 const ox_tensor *const *in, ox_tensor *const *out);
typedef ox_status (*ox_kernel_fn)(struct ox_kernel_ctx *ctx, const struct ox_node *n,
                                  const ox_tensor *const *in, ox_tensor *const *out);

struct ox_op {
    const char *domain;
    const char *type;
    int since, until; /* opset versions of `domain` this row serves, inclusive */
    ox_infer_fn infer;
    ox_kernel_fn cpu;
    unsigned flags;
};

/* Memory a kernel prepares once from its constant inputs (packed weights): infer asks for
 * it with ctx->prepared_bytes (only when the inputs it reads are in const_inputs); the
 * first run calls fill(dst, arg) to fill it, under a lock; every run gets the same data
 * back. NULL when the plan gave none (a dynamic node, or folding at plan time).
 *
 * `key` (or NULL) says what the bytes are made from: the constant's data and every size the
 * packing depends on, so that fill with the same key makes the same bytes. Steps of one plan
 * that call with the same fill and key then share the first one's buffer (the head
 * convolutions of a detector applied at every pyramid level, weights tied between layers);
 * the others' stay untouched. */
struct ox_prep_key {
    const void *src;
    int64_t dims[4];
};
/* Once a kernel has prepared its copy of constant data: let the system reclaim the pages
 * of the original where it can do so without loss (those mapped from the model file are
 * read again from it if anything needs them; other memory stays). */
void ox_release_pages(const void *p, size_t n);
void *ox_kernel_prepared(struct ox_kernel_ctx *ctx, void (*fill)(void *dst, void *arg), void *arg,
                         const struct ox_prep_key *key);
/* For OX_OP_ALLOCATES kernels: allocate t's data (zeroed) for the dtype and shape set in t;
 * the executor frees it. */
ox_status ox_kernel_alloc(struct ox_kernel_ctx *ctx, ox_tensor *t);
/* For OX_OP_ALLOCATES kernels: make t a sequence or optional of n zeroed items (each then
 * set with ox_kernel_copy, or a shape and ox_kernel_alloc), owned by the executor. */
ox_status ox_kernel_alloc_items(struct ox_kernel_ctx *ctx, ox_tensor *t, ox_io_kind kind,
                                ox_dtype dt, int n);
/* dst = a deep copy of src (tensor, sequence or optional), owned by the executor. */
ox_status ox_kernel_copy(struct ox_kernel_ctx *ctx, ox_tensor *dst, const ox_tensor *src);
/* Run subgraph `g` (an attribute of the node being run) on inputs[0..g->n_inputs) in the
 * scope of the running plan; outputs[k] receives borrowed pointers to g's outputs, valid
 * until the next ox_subgraph_run of the same graph. Plans are built once per signature and
 * cached in the running plan. */
ox_status ox_subgraph_run(struct ox_kernel_ctx *ctx, const struct ox_graph *g,
                          const ox_tensor *const *inputs, const ox_tensor **outputs);

/* The row serving (domain, type) at `opset`, or NULL. */
const struct ox_op *ox_op_find(const char *domain, const char *type, int opset);
/* True when some row has this (domain, type) at any opset. */
bool ox_op_known(const char *domain, const char *type);
int ox_op_count(void);
const struct ox_op *ox_op_at(int i);

/* ---- helpers for infer functions and kernels (kernels/util.c) ------------------------- */

/* Error naming the node and op: "node 'conv1' (Conv): <message>". */
ox_status ox_node_err(const struct ox_node *n, ox_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Attributes with defaults. ox_attr_ints returns the count (or -1 if absent) and points
 * *out at the values (borrowed from the node). An attribute present with another kind than
 * the getter's reads as absent and is reported by ox_attr_check, which the executor calls
 * after every infer function: kernels need not check kinds themselves. */
int64_t ox_attr_int(const struct ox_node *n, const char *name, int64_t def);
float ox_attr_float(const struct ox_node *n, const char *name, float def);
const char *ox_attr_str(const struct ox_node *n, const char *name, const char *def);
int ox_attr_ints(const struct ox_node *n, const char *name, const int64_t **out);
int ox_attr_floats(const struct ox_node *n, const char *name, const float **out);
/* The first kind mismatch since the last call, as an error naming node and attribute. */
ox_status ox_attr_check(const struct ox_node *n);

/* Input i, or NULL when omitted or out of range. */
static inline const ox_tensor *ox_in(const struct ox_node *n, const ox_tensor *const *in, int i) {
    return i < n->n_inputs ? in[i] : NULL;
}

/* Set an output's type and shape. */
void ox_set_shape(ox_tensor *t, ox_dtype dt, int rank, const int64_t *dims);
/* Same dtype and shape as src. */
void ox_set_like(ox_tensor *t, const ox_tensor *src);

/* Read an integer tensor (int32/int64/any int type, any rank) into out[0..max); returns the
 * count, or -1 (with a node error set) when it is not an integer tensor or too long. The
 * tensor's data must be present. */
int64_t ox_read_ints(const struct ox_node *n, const ox_tensor *t, int64_t *out, int64_t max);
/* Normalise a possibly negative axis into [0, rank); error when out of range. */
ox_status ox_norm_axis(const struct ox_node *n, int64_t axis, int rank, int *out);

/* Reshape's dims: x's data as the k-entry shape (0 copies x's dim unless allowzero, one -1
 * is inferred); errors name the node (a bad entry, a count that does not match). */
ox_status ox_reshape_dims(const struct ox_node *n, const ox_tensor *x, int k, const int64_t *shape,
                          bool allowzero, int64_t *dims);

/* numpy broadcasting of two shapes into out (rank max of both). */
ox_status ox_broadcast(const struct ox_node *n, const ox_tensor *a, const ox_tensor *b, int *rank,
                       int64_t *dims);
/* Strides of `t` as seen from an output of rank `rank` (0 along broadcast axes). */
void ox_broadcast_strides(const ox_tensor *t, int rank, const int64_t *dims, int64_t *strides);

/* numpy matmul shapes (MatMul, MatMulInteger, QLinearMatMul): A [..., M, K] times
 * B [..., K, N] with the batch dims broadcast; a 1-D A is [1, K] and a 1-D B is [K, 1], the
 * added dim then removed from the result. Shape errors name the node. */
struct ox_matmul_shape {
    int64_t M, K, N;
    int brank;                                    /* batch rank of the output */
    int64_t bdims[OX_MAX_RANK];                   /* output batch dims */
    int64_t astr[OX_MAX_RANK], bstr[OX_MAX_RANK]; /* batch strides in elements (0: broadcast) */
    int64_t batch;                                /* product of bdims */
    int rank;                                     /* the output's rank and dims */
    int64_t dims[OX_MAX_RANK];
};
ox_status ox_matmul_shape(const struct ox_node *n, const ox_tensor *a, const ox_tensor *b,
                          struct ox_matmul_shape *m);
/* Element offsets into A and B of the matrices of batch item i (0 <= i < m->batch). */
void ox_matmul_offsets(const struct ox_matmul_shape *m, int64_t i, int64_t *ao, int64_t *bo);

/* The Mersenne Twister MT19937 as numpy's legacy RandomState runs it: seeding from a 32-bit
 * integer, doubles of 53 bits from two draws, and Gaussians by the polar method with one
 * value cached. The random ops use it so that a seeded node draws what the ONNX reference
 * (numpy) draws. */
struct ox_mt19937 {
    uint32_t key[624];
    int pos;
    bool has_gauss;
    double gauss;
};
void ox_mt_seed(struct ox_mt19937 *m, uint32_t seed);
uint32_t ox_mt_next(struct ox_mt19937 *m);
double ox_mt_double(struct ox_mt19937 *m);
double ox_mt_gauss(struct ox_mt19937 *m);

/* Normalization parameters (LayerNorm's and RMSNorm's Scale and B) broadcast
 * unidirectionally to x's dims from `axis` on. ox_tail_broadcasts tells whether p does;
 * ox_tail_index gives the element of p for element j of one normalized block of x. */
bool ox_tail_broadcasts(const ox_tensor *p, const ox_tensor *x, int axis);
int64_t ox_tail_index(const ox_tensor *p, const ox_tensor *x, int axis, int64_t j);

/* The perms of rank r taking [N, spatial..., C] to [N, C, spatial...] (to_first) and back
 * (to_last). */
void ox_nhwc_perms(int r, int64_t *to_first, int64_t *to_last);

/* dst (its dims and data set) = src transposed by perm, through the Transpose kernel (no
 * scratch); errors name node n. */
ox_status ox_transpose_run(struct ox_kernel_ctx *ctx, const struct ox_node *n, const ox_tensor *src,
                           ox_tensor *dst, const int64_t *perm);

/* The activation of ONNX Runtime's FusedConv or FusedGemm (com.microsoft; kernels/cpu/ortopt.c)
 * as onnxexec's fused ops take it: the clamp [lo, hi] (Relu, Clip) in the op, and any other
 * as the default-domain op `post` (NULL: none) with its float attributes, run after it.
 * Refuses (naming the node) an activation ORT's kernels do not take. */
struct ox_ms_activation {
    float lo, hi;
    const char *post;
    int n_attrs;
    struct ox_attr attrs[2];
};
ox_status ox_ms_activation(const struct ox_node *n, struct ox_ms_activation *a);
/* The attributes of onnxexec's fused op for n into attrs (room for n's count + 2): n's own but
 * the activation ones, then "activation" (Relu, Clip or "") and "activation_params" pointing at
 * clamp (2 floats, set here to [lo, hi]); their count. */
int ox_ms_fused_attrs(const struct ox_node *n, const struct ox_ms_activation *a, float *clamp,
                      struct ox_attr *attrs);

/* Vectorized float rows (kernels/cpu/vecmath.c): y = softmax(x) over n floats; y = f(x) for
 * exp, the sigmoid, GELU (erf and tanh forms), tanh and erf. y may be x. */
void ox_softmax_row(const float *x, float *y, int64_t n);
void ox_exp_floats(const float *x, float *y, int64_t n);
void ox_sigmoid_floats(const float *x, float *y, int64_t n);
void ox_gelu_floats(const float *x, float *y, int64_t n);
void ox_gelu_tanh_floats(const float *x, float *y, int64_t n);
void ox_tanh_floats(const float *x, float *y, int64_t n);
void ox_quick_gelu_floats(const float *x, float *y, int64_t n, float alpha); /* x sigmoid(ax) */
void ox_erf_floats(const float *x, float *y, int64_t n);

/* ---- FusedAttention (ai.onnxexec; graph/optimize.c, kernels/attn_plan.c) -------------------
 *
 *     Y = Transpose(Softmax(alpha * Q . KT + mask) . V, perm_y)
 *
 * Q [..., S, Dk], KT [..., Dk, T], V [..., T, Dv] are inputs 0, 1, 2 seen through the view
 * programs "view_q", "view_k", "view_v" (the Transpose, Reshape, Squeeze, Unsqueeze, Gather
 * and Slice nodes the exporter put between a projection and the product, OX_VIEW_* below);
 * the batch dims ("...") of Q, KT, V and the optional mask in[3] (broadcast onto
 * [..., S, T] without growing S or T) broadcast as MatMul's and Add's do. alpha is the
 * attribute "scale" (default 1) times the one-element inputs 4, 5 and 6 where present
 * (factors the graph put on Q, KT and the scores); from input 7 on, the int tensors the
 * views read (Reshape shapes, Slice starts, ends, axes and steps), known at plan time.
 * Softmax runs along T; a row that is -inf everywhere gives NaN, as Softmax does. Both
 * products read the inputs and write the output in place through strides (no copies)
 * wherever a view is strided and BLAS can address it; other operands are gathered. */
/* View programs: ints, op after op from the input toward the operand. */
enum {
    OX_VIEW_TRANSPOSE = 1, /* n, perm[n] */
    OX_VIEW_RESHAPE = 2,   /* input slot of the shape, allowzero */
    OX_VIEW_GATHER = 3,    /* axis, index, keep (1: indices of shape [1] keep the axis) */
    OX_VIEW_SQUEEZE = 4,   /* n, axes[n] (n 0: every axis of size 1) */
    OX_VIEW_UNSQUEEZE = 5, /* n, axes[n] (of the output) */
    OX_VIEW_SLICE = 6,     /* input slots of starts, ends, axes, steps (-1: absent) */
    OX_VIEW_MATPERM = 7,   /* trans, batch: ONNX Runtime FusedMatMul's operand permutation
                              for the rank the plan finds (batch: axis 0 moved before the
                              last axis; then trans: the last two swapped; rank < 2: none) */
};
#define OX_VIEW_MAX_OPS 8
struct ox_view_stage { /* one op, with the dims it reads and its parameters per input axis */
    int op, rank_in;
    int64_t dims_in[OX_MAX_RANK];
    int64_t p[OX_MAX_RANK]; /* Transpose: perm; Slice: start; Gather: axis, index, keep */
    int64_t q[OX_MAX_RANK]; /* Slice: step */
};
/* One dim of a view as row-major sub-axes of the input: index i, written in the digits of
 * dims[], reads sum digit_k * strides[k] (n 0: a dim of 1). A dim made by merging dims that
 * a Transpose had parted has several (the [S, B*H, D] view of a [S, B, 3E] projection). */
#define OX_VIEW_SUB 4
struct ox_view_axis {
    int n;
    int64_t dims[OX_VIEW_SUB], strides[OX_VIEW_SUB];
};
int64_t ox_view_axis_offset(const struct ox_view_axis *a, int64_t i);
struct ox_view {
    int n_stages, src_rank, rank;
    struct ox_view_stage st[OX_VIEW_MAX_OPS];
    int64_t src_dims[OX_MAX_RANK], dims[OX_MAX_RANK];
    /* affine: element (i...) at base + sum ox_view_axis_offset(&ax[k], i_k); else (a
     * Reshape cut across sub-axes, a Slice of a merged dim) through the stages */
    bool affine;
    int64_t base;
    struct ox_view_axis ax[OX_MAX_RANK];
};
/* The input element that element idx (a multi-index of v->dims) of the view reads. */
int64_t ox_view_source(const struct ox_view *v, const int64_t *idx);
struct ox_mat { /* a strided matrix: element (i, j) at i * rs + j * cs elements */
    int64_t rows, cols, rs, cs;
};
/* C = A . B as a column-major BLAS call (cblas_?gemm with CblasColMajor, cublasGemmEx):
 * gemm(ta, tb, m, n, k, alpha, first, lda, second, ldb, beta, C, ldc), where first is A and
 * second B, or (swap: C row-major, computed as C^T = B^T A^T) first B and second A. */
struct ox_gemm_desc {
    bool ta, tb, swap;
    int m, n, k, lda, ldb, ldc;
};
/* Whether BLAS can address a (one of its strides 1, the other a leading dimension); if so
 * *ld and *row_major (a's rows are contiguous) describe it. */
bool ox_mat_blas(struct ox_mat a, int64_t *ld, bool *row_major);
/* The call for C = A . B (false when a view is not BLAS-addressable or a size exceeds int). */
bool ox_gemm_describe(struct ox_mat a, struct ox_mat b, struct ox_mat c, struct ox_gemm_desc *d);

enum { OX_FATTN_Q, OX_FATTN_K, OX_FATTN_V, OX_FATTN_MASK, OX_FATTN_Y, OX_FATTN_N };
#define OX_FATTN_SHAPES 7 /* the first input slot of the views' int tensors */
enum { OX_FATTN_STRIDED, OX_FATTN_AXES, OX_FATTN_STAGES };
struct ox_fattn {
    ox_dtype dtype;
    int64_t S, T, Dk, Dv;
    int brank; /* batch dims of the product (the output's before perm_y) */
    int64_t bdims[OX_MAX_RANK], batch;
    /* per operand (OX_FATTN_*): its batch axes as the product's batch dims see them (n 0:
     * broadcast), the offset of its first element, and its matrix, a strided view where
     * how[k] is OX_FATTN_STRIDED (the mask and Y always). Q, KT, V: their views of inputs
     * 0-2; OX_FATTN_AXES: a merged matrix dim (gathered through the axes), OX_FATTN_STAGES:
     * not affine (gathered through ox_view_source; bax and base unused). */
    struct ox_mat m[OX_FATTN_N];
    struct ox_view_axis bax[OX_FATTN_N][OX_MAX_RANK];
    int64_t base[OX_FATTN_N];
    int how[3];
    struct ox_view view[3];
    /* generic: an operand of rank below 2 or a mask that grows the scores (numpy's
     * broadcasting then reaches past [..., S, T]): the chain is computed as written, with
     * MatMul's and Add's shape rules, in double (the CPU kernel only); mm1 and mm2 are the
     * products, s_dims the scores after the mask. The fields above are then unused. */
    bool generic;
    struct ox_matmul_shape mm1, mm2;
    int s_rank;
    int64_t s_dims[OX_MAX_RANK];
    bool has_mask;
    double scale; /* the attribute; ox_fattn_alpha multiplies in the inputs */
    int y_rank;   /* the output's dims (perm_y applied) */
    int64_t y_dims[OX_MAX_RANK], y_perm[OX_MAX_RANK];
};
/* Shapes, perms and strides of node n's operands; errors name the node. */
ox_status ox_fattn_parse(const struct ox_node *n, const ox_tensor *const *in, struct ox_fattn *a);
/* Element offsets of batch item i (0 <= i < a->batch) into each operand. */
void ox_fattn_offsets(const struct ox_fattn *a, int64_t i, int64_t off[OX_FATTN_N]);
/* alpha: the scale attribute times the factor inputs' values (their data must be present). */
double ox_fattn_alpha(const struct ox_node *n, const ox_tensor *const *in,
                      const struct ox_fattn *a);

/* Fused ops (graph/optimize.c): the base op's inputs, then Z, then "activation" and
 * "activation_params". ox_fused_clamp: the activation as [lo, hi] (none: all of it).
 * ox_fused_infer, after the base op's infer: checks the activation, broadcasts Z into the
 * output (Add's rule); when that makes the output larger, the base op's output is put in
 * scratch ahead of the base op's own scratch. ox_fused_split, in the kernel: true when so,
 * with tmp the base op's output there and base_ctx the context to run the base op in.
 * ox_fused_post: y = clamp(src + z, lo, hi) (silu: (src + z) sigmoid(src + z)), both
 * broadcast to y, any float type, src may be y. */
#define OX_DOMAIN_ONNXEXEC "ai.onnxexec"
static inline bool ox_same_shape(const ox_tensor *a, const ox_tensor *b) {
    return a->dtype == b->dtype && a->rank == b->rank &&
           !memcmp(a->dims, b->dims, sizeof(int64_t) * (size_t)a->rank);
}
void ox_fused_clamp(const struct ox_node *n, float *lo, float *hi);
/* The fused ops' activation on one float: x * sigmoid(x) = x / (1 + e^-x) (silu), else
 * clamped to [lo, hi], the max first (with lo > hi: hi, as Clip does; a NaN stays). The
 * AVX-512 epilogues do the same on 16 lanes. */
static inline float ox_fused_act(float v, float lo, float hi, bool silu) {
    if (silu) return v / (1.0f + expf(-v));
    v = v < lo ? lo : v;
    return v > hi ? hi : v;
}
/* True when the fused op's activation is Silu: x * sigmoid(x) (the clamp is then none). */
bool ox_fused_silu(const struct ox_node *n);
ox_status ox_fused_infer(struct ox_infer_ctx *ctx, const struct ox_node *n, const ox_tensor *z,
                         ox_tensor *out);
bool ox_fused_split(struct ox_kernel_ctx *ctx, const struct ox_node *n, const ox_tensor *const *in,
                    const ox_tensor *z, ox_infer_fn base_infer, ox_tensor *tmp,
                    struct ox_kernel_ctx *base_ctx);
ox_status ox_fused_post(const struct ox_node *n, const ox_tensor *src, const ox_tensor *z,
                        ox_tensor *y, float lo, float hi, bool silu);

/* Generic element access through double (slow path for rare types; exact for ints up to
 * 2^53). float16 and bfloat16 convert through float; the float8 types, float8e8m0 and
 * float4e2m1 through ox_narrow_decode and ox_narrow_encode (saturating, e8m0 rounded up: the
 * defaults of Cast). */
double ox_get_f64(const ox_tensor *t, int64_t i);
void ox_set_f64(ox_tensor *t, int64_t i, double v);
/* The same with float and double read and written directly (the common types). */
static inline double ox_ld(const ox_tensor *t, int64_t i) {
    if (t->dtype == OX_FLOAT) return ((const float *)t->data)[i];
    if (t->dtype == OX_DOUBLE) return ((const double *)t->data)[i];
    return ox_get_f64(t, i);
}

static inline void ox_st(ox_tensor *t, int64_t i, double v) {
    if (t->dtype == OX_FLOAT)
        ((float *)t->data)[i] = (float)v;
    else if (t->dtype == OX_DOUBLE)
        ((double *)t->data)[i] = v;
    else
        ox_set_f64(t, i, v);
}

/* Integer access for the integer types (exact for int64/uint64 within range). */
int64_t ox_get_i64(const ox_tensor *t, int64_t i);
void ox_set_i64(ox_tensor *t, int64_t i, int64_t v);

/* Narrow element types, one code per byte: float8 (E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ),
 * float8e8m0, float4e2m1, and int4/uint4/int2/uint2 (signed ones stored sign-extended). The
 * one codec that Cast, QuantizeLinear, DequantizeLinear and ox_get_f64/ox_set_f64 use:
 *
 *     double v = ox_narrow_decode(OX_FLOAT8E4M3FN, 0x7e);                      // 448
 *     uint8_t c = ox_narrow_encode(OX_FLOAT8E4M3FN, INFINITY, OX_NARROW_SATURATE); // 0x7e
 *
 * Decoding is exact (NaN keeps its sign in E4M3FN and E5M2). Encoding follows the tables of
 * the ONNX Cast operator (opset 24 and later) and its reference implementation:
 * - float8: round to nearest even; out of range, +-Inf included, gives +-the largest finite
 *   value with OX_NARROW_SATURATE, else +-Inf (E5M2) or NaN; NaN keeps its sign except in the
 *   FNUZ formats (one NaN, 0x80), which also have no -0.
 * - float4e2m1: round to nearest even, clamped to +-6 (the flags do not apply); NaN gives 0x8.
 * - float8e8m0: rounded up, or down / to nearest (ties up) by flag; values past the largest
 *   give 0xfe with OX_NARROW_SATURATE, else NaN (0xff); zero and negatives give 0.
 * - int4/uint4/int2/uint2: truncated toward zero, then wrapped to the type's bits (Cast, as
 *   numpy's astype). QuantizeLinear saturates its integers itself and does not use this.
 * Other types decode to 0 and encode to 0. */
enum ox_narrow_flag {
    OX_NARROW_SATURATE = 1 << 0,     /* Cast's and QuantizeLinear's saturate=1 (their default) */
    OX_NARROW_E8M0_DOWN = 1 << 1,    /* Cast round_mode "down" (toward zero) */
    OX_NARROW_E8M0_NEAREST = 1 << 2, /* Cast round_mode "nearest" (ties up) */
};
bool ox_is_narrow(ox_dtype dt);
double ox_narrow_decode(ox_dtype dt, uint8_t code);
/* `flags`: OX_NARROW_* values or'ed together. */
uint8_t ox_narrow_encode(ox_dtype dt, double v, unsigned flags);

#endif
