/* onnxexec — load ONNX models, plan them once, run them on a CPU.
 *
 *     ox_model *m;
 *     if (ox_model_load("net.onnx", &m) != OX_OK) { puts(ox_errmsg()); return 1; }
 *     ox_session *s;
 *     ox_session_create(m, NULL, &s);
 *     ox_tensor in = {.dtype = OX_FLOAT, .rank = 4, .dims = {1, 3, 224, 224}, .data = pixels};
 *     const ox_tensor *out;
 *     ox_session_run(s, &in, 1, &out);   // out[i] borrowed: valid until the next run
 *     ox_session_free(s);
 *     ox_model_free(m);
 *
 * Errors: every fallible function returns an ox_status (0 = OK, negative = error kind)
 * and leaves a message in a thread-local buffer that ox_errmsg() returns.
 * Ownership: pointers passed in are borrowed for the call; objects returned through
 * `**out` are owned by the caller and freed with their `_free`; `_free(NULL)` is a no-op.
 * Thread safety: a model may be shared by sessions in several threads, and a session may
 * be run from several threads at once (see ox_session_create); functions that change a
 * model (ox_model_gradient, ox_model_optimize, ox_model_convert_opset) need it to
 * themselves; everything else is safe where its comment does not say otherwise.
 */
#ifndef ONNXEXEC_H
#define ONNXEXEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Symbols: libonnxexec is compiled with hidden visibility, and what this header declares
 * is exported (GCC and Clang); nothing else leaves the shared library. */
#if defined(__GNUC__) && __GNUC__ >= 4
#pragma GCC visibility push(default)
#endif

#define OX_VERSION_MAJOR 0
#define OX_VERSION_MINOR 1
#define OX_VERSION_PATCH 0

/* Status codes. OX_OK is 0; errors are negative, grouped by kind. */
typedef enum {
    OX_OK = 0,
    OX_E_INVALID = -1,     /* the model or an argument is malformed */
    OX_E_UNSUPPORTED = -2, /* valid, but not implemented (op, type, attribute value) */
    OX_E_SHAPE = -3,       /* shapes or types do not agree */
    OX_E_NOMEM = -4,       /* allocation failed or a size limit was passed */
    OX_E_IO = -5,          /* a file could not be opened, read or written */
    OX_E_DEVICE = -6,      /* device error */
    OX_E_INTERNAL = -7,    /* a bug in onnxexec */
    OX_E_LIMIT = -8,       /* the model passes one of the limits of ox_limits (the message
                              names the limit, the value found, and how to raise it) */
} ox_status;

/* The name of a status code ("OX_OK", "OX_E_INVALID", ...); "?" for an unknown value.
 * A static string. */
const char *ox_status_name(ox_status st);

/* Element types, numbered as ONNX's TensorProto.DataType. Sub-byte types (int4, uint4,
 * float4e2m1, int2, uint2) are stored unpacked in memory, one element per byte. String
 * tensors hold an array of `char *` (NUL-terminated, owned by whoever owns the tensor). */
typedef enum {
    OX_UNDEFINED = 0,
    OX_FLOAT = 1,
    OX_UINT8 = 2,
    OX_INT8 = 3,
    OX_UINT16 = 4,
    OX_INT16 = 5,
    OX_INT32 = 6,
    OX_INT64 = 7,
    OX_STRING = 8,
    OX_BOOL = 9,
    OX_FLOAT16 = 10,
    OX_DOUBLE = 11,
    OX_UINT32 = 12,
    OX_UINT64 = 13,
    OX_COMPLEX64 = 14,
    OX_COMPLEX128 = 15,
    OX_BFLOAT16 = 16,
    OX_FLOAT8E4M3FN = 17,
    OX_FLOAT8E4M3FNUZ = 18,
    OX_FLOAT8E5M2 = 19,
    OX_FLOAT8E5M2FNUZ = 20,
    OX_UINT4 = 21,
    OX_INT4 = 22,
    OX_FLOAT4E2M1 = 23,
    OX_FLOAT8E8M0 = 24,
    OX_UINT2 = 25,
    OX_INT2 = 26,
    OX_N_DTYPES
} ox_dtype;

#define OX_MAX_RANK 16

/* What a value is (numbered as graph/ir.h's ox_value_kind). */
typedef enum {
    OX_IO_TENSOR = 0,
    OX_IO_SEQUENCE = 1,
    OX_IO_MAP = 2,
    OX_IO_OPTIONAL = 3,
    OX_IO_SPARSE = 4,
    OX_IO_UNKNOWN = 5,
} ox_io_kind;

/* A value: by default a dense tensor, row-major, `data` holding dims[0]*...*dims[rank-1]
 * elements. With kind OX_IO_SEQUENCE it is a sequence of n_items values at `items`; with
 * OX_IO_OPTIONAL, an optional holding n_items (0: none, or 1) value at `items`; with
 * OX_IO_MAP, a map of scalar values held as two 1-D tensors of one length at `items` (n_items
 * 2): its keys (int64 or string) and its values (ZipMap's output is a sequence of maps); for
 * these dtype is the element type of the tensors (a map's values) inside and rank, dims and
 * data are unused.
 * Whoever fills the struct owns `data` and `items` unless a function says otherwise.
 * A zero-initialised struct with dtype, rank, dims and data set is a tensor. */
typedef struct ox_tensor {
    ox_dtype dtype;
    int rank;
    int64_t dims[OX_MAX_RANK];
    void *data;
    const char *name; /* optional: the graph input/output this tensor binds to */
    ox_io_kind kind;
    int n_items;
    struct ox_tensor *items;
} ox_tensor;

typedef struct ox_model ox_model;
typedef struct ox_session ox_session;

/* Options for a session; NULL means defaults. */
typedef struct ox_session_options {
    /* Threads of the session's pool (0: number of cores). Every kernel, OpenBLAS included
     * (on one thread inside the pool's pieces), runs on it. OpenBLAS starts threads of its
     * own when it loads and lets them spin for a while; run the program with
     * OPENBLAS_NUM_THREADS=1 so that it does not (the onnxexec tool does this itself), and
     * OPENBLAS_CORETYPE where OpenBLAS does not know the CPU (README, "Measuring"). */
    int n_threads;
    /* Time every node of every run (two clock reads per node); ox_session_profile reports
     * the times. */
    bool profile;
    /* The most bytes one plan may take (see ox_limits.plan_bytes); 0: the model's
     * limits.plan_bytes. A plan over it fails with OX_E_LIMIT when the session runs. */
    uint64_t plan_bytes;
    /* Running a batch one item at a time, for models that compute each item on its own
     * (every input and output has the batch on axis 0 and no op mixes items: CNNs
     * exported with a dynamic batch axis). Each item's activations then stay in cache, and
     * with n_threads > 1 the items run on the threads side by side (one plan per thread,
     * the packed weights shared), instead of each node being split over the threads.
     * Results are the same as a whole-batch run up to float rounding (a kernel may sum in
     * another order at another width). OX_BATCH_SPLIT_AUTO (0, the default) splits a batch of
     * at least n_threads items, at least 2, where the model has convolutions, its one-row
     * products (a classifier's Gemm) read at most 16 MiB of weights, and all its weights
     * are at most 3 times the bytes of one item's intermediates (each item reads the
     * weights again); _ON splits every batch of a separable model; _OFF never splits. */
    int batch_split;
    /* Where the session runs: NULL or "cpu", "cuda" (the first GPU) or "cuda:N". On a GPU
     * the weights are uploaded once per plan, activations take one device arena at the
     * CPU plan's offsets, kernels run on one stream, and a run whose steps all have GPU
     * kernels and whose shapes are static is captured once and replayed as one CUDA graph;
     * a node without a GPU kernel runs on the CPU with its inputs and outputs copied.
     * Creating the session fails with OX_E_DEVICE when there is no such GPU or the library
     * was built without CUDA. Batches are never split on a GPU. */
    const char *device;
    /* OX_PRECISION_FP32 (0, the default: float32 throughout, TF32 off), _TF32 (float32
     * data, TF32 tensor-core products in convolutions and matrix products), _FP16 and _BF16
     * (float32 values held as float16 or bfloat16 on the GPU, sums in float32; inputs and
     * outputs stay float32). GPU only. */
    int precision;
} ox_session_options;

#define OX_PRECISION_FP32 0
#define OX_PRECISION_TF32 1
#define OX_PRECISION_FP16 2
#define OX_PRECISION_BF16 3

#define OX_BATCH_SPLIT_AUTO 0
#define OX_BATCH_SPLIT_ON   1
#define OX_BATCH_SPLIT_OFF  (-1)

/* The message of the last error on this thread ("" if none). Borrowed. */
const char *ox_errmsg(void);
/* Library version, "MAJOR.MINOR.PATCH". */
const char *ox_version(void);
/* A short name for a dtype ("float", "int64", ...); "?" when out of range. */
const char *ox_dtype_name(ox_dtype dt);
/* Bytes of one element as stored in memory (1 for sub-byte types, sizeof(char*) for string). */
size_t ox_dtype_size(ox_dtype dt);
/* Number of elements of a tensor (1 for rank 0). */
int64_t ox_tensor_numel(const ox_tensor *t);

/* Element i of a real-valued tensor as a double: every float type (float16, bfloat16, the
 * float8 and float4 types included), the integers (exact up to 2^53) and bool (0 or 1); NaN
 * for strings and complex numbers. */
double ox_tensor_get(const ox_tensor *t, int64_t i);
/* Store v into element i, converted to the tensor's type as the Cast operator converts
 * (narrow floats round to nearest even and saturate); no effect on strings and complex. */
void ox_tensor_set(ox_tensor *t, int64_t i, double v);

/* Limits on what a model may ask for. Every model file is treated as hostile: each limit is
 * checked where the data is read (the ONNX and TorchScript importers; the planner for
 * plan_bytes), before anything of that size is allocated, and a model over one fails with
 * OX_E_LIMIT and a message that names the limit, the value found, the limit, and how to
 * raise it (this struct's field, and the `onnxexec --limit NAME=VALUE` option).
 * A field left 0 takes its default (OX_LIMIT_*); a negative count, or a rank or depth over
 * what onnxexec allows, makes the load fail with OX_E_INVALID before the file is read. The
 * struct is plain data, copied where it is passed (a model keeps its own copy): nothing is
 * borrowed or owned, and any thread may fill and pass one.
 *
 *     ox_model_options o = {.limits = {.nodes = 10000000, .tensor_bytes = 32ull << 30}};
 *     ox_model_load_with("big.onnx", &o, &m);
 */
typedef struct ox_limits {
    /* Bytes of the model as read: the ONNX file (or buffer) plus the external data its
     * tensors read; a TorchScript archive's file, and its records once inflated (zip
     * bombs). */
    uint64_t model_bytes;
    /* Bytes of one tensor in memory: an initializer, a constant or tensor attribute, a
     * sparse tensor densified, a TorchScript parameter or buffer. */
    uint64_t tensor_bytes;
    /* Dims of a tensor or value type: at most OX_MAX_RANK, the default. */
    int rank;
    /* Nodes of the model in all: every graph and subgraph, after local functions are
     * inlined (ONNX) or methods and loops are (TorchScript). */
    int64_t nodes;
    /* Nesting of subgraphs (If, Loop, Scan bodies inside each other): at most
     * OX_LIMIT_MAX_SUBGRAPH_DEPTH, which keeps recursion on the stack bounded. */
    int subgraph_depth;
    /* Bytes of one string read from the model: a name, an op type or domain, a doc string,
     * an attribute or metadata string, an element of a string tensor, a pickled string. */
    uint64_t string_length;
    /* Bytes one plan (one per input-shape signature; subgraph plans each count alone) may
     * take when it is built: its arena, its scratch, kernels' prepared data and the
     * constants folded at plan time. Outputs of data-dependent ops, allocated at run time,
     * are not known then and do not count. A session takes it from the model's limits unless
     * ox_session_options.plan_bytes says otherwise. */
    uint64_t plan_bytes;
} ox_limits;

#define OX_LIMIT_MODEL_BYTES        ((uint64_t)64 << 30) /* 64 GiB */
#define OX_LIMIT_TENSOR_BYTES       ((uint64_t)16 << 30) /* 16 GiB */
#define OX_LIMIT_RANK               OX_MAX_RANK          /* 16, also the most allowed */
#define OX_LIMIT_NODES              ((int64_t)1 << 22)   /* 4194304 */
#define OX_LIMIT_SUBGRAPH_DEPTH     64
#define OX_LIMIT_MAX_SUBGRAPH_DEPTH 256                  /* the most subgraph_depth may be */
#define OX_LIMIT_STRING_LENGTH      ((uint64_t)64 << 20) /* 64 MiB */
#define OX_LIMIT_PLAN_BYTES         ((uint64_t)64 << 30) /* 64 GiB */

/* Options for loading a model; NULL means defaults. */
typedef struct ox_model_options {
    /* Keep the graph as the file has it. By default a loaded graph is optimized: constant
     * weights absorb BatchNormalization, and Conv/Gemm/MatMul absorb a following bias,
     * residual Add and Relu/Clip (ops of domain "ai.onnxexec"); unused nodes go. Outputs
     * stay within float32 rounding of the unoptimized graph's. */
    bool no_optimize;
    /* Optimize with standard ONNX operators only, at the model's own opset: BatchNormalization
     * folding, LayerNormalization and Gelu where the opset has them (17, 20), unused nodes
     * removed; no ops of domain "ai.onnxexec". What `onnxexec convert --optimize` writes, so
     * that other runtimes can read it. */
    bool standard_ops_only;
    /* TorchScript archives (.pt): the types and shapes of forward's tensor arguments (each
     * `name` set: by name; else by position; data unused), which the import needs because
     * traced code folds shapes. Without them a torch 2.x traced archive gives the shapes it
     * was traced with; others fail naming the argument. Ignored for ONNX files. */
    const ox_tensor *input_shapes;
    int n_input_shapes;
    /* Limits on what the model may ask for (zero fields: the defaults). The model keeps
     * them: its sessions plan within limits.plan_bytes. */
    ox_limits limits;
    /* The device its sessions will run on, named as in ox_session_options.device (NULL or
     * "cpu", "cuda", "cuda:N"); a name of no device fails the load with OX_E_INVALID, and no
     * GPU is needed to load. For a GPU the optimizer leaves out its rewrites into operators
     * that only the CPU has kernels for (a QDQ model's convolutions, residual sums and max
     * pools on 8-bit codes: QLinearConv, QLinearAdd, MaxPool of uint8), so that those nodes
     * stay float operators that run on the device. Sessions on any device may still use the
     * model: on a GPU, one loaded for the CPU runs such nodes as CPU steps (ox_session_device
     * counts them); the integer forms' results are within one step of the output's scale of
     * the float ones. */
    const char *device;
} ox_model_options;

/* Load a model from a file: ONNX, or a TorchScript archive written by torch.jit.save
 * (recognised by its contents). Errors: OX_E_IO, OX_E_INVALID, OX_E_UNSUPPORTED,
 * OX_E_LIMIT (a limit of opt->limits passed), OX_E_NOMEM. */
ox_status ox_model_load(const char *path, ox_model **out);
ox_status ox_model_load_with(const char *path, const ox_model_options *opt, ox_model **out);
/* Load from memory; `dir` is the folder external data is relative to (may be NULL: external
 * data is then refused). External data must stay inside `dir` (or the model file's folder):
 * a location that is absolute, has a ".." component, or resolves through a symlink to a
 * file outside is refused with OX_E_INVALID, as is a range past the end of its file. */
ox_status ox_model_load_buffer(const void *buf, size_t len, const char *dir, ox_model **out);
ox_status ox_model_load_buffer_with(const void *buf, size_t len, const char *dir,
                                    const ox_model_options *opt, ox_model **out);
void ox_model_free(ox_model *m);

/* Options for writing a model; NULL means defaults. */
typedef struct ox_save_options {
    /* Tensors of external_threshold bytes or more (0: 1024) go to a side file beside the model,
     * `external_file` (relative to the model's folder; NULL: the model's file name + ".data").
     * A model too big for protobuf's 2 GiB limit is written that way even without it. */
    bool external_data;
    size_t external_threshold;
    const char *external_file;
} ox_save_options;

/* Write the model (as loaded: optimized unless its options said otherwise) as an ONNX file.
 * Written to a temporary file and renamed into place: a failure leaves no partial file.
 * The same model gives the same bytes. Errors: OX_E_INVALID (something ONNX cannot express,
 * named in the message), OX_E_IO, OX_E_NOMEM. */
ox_status ox_model_save(const ox_model *m, const char *path, const ox_save_options *opt);
/* Rewrite the model for another opset of the default ONNX domain (up or down), where its
 * operators allow it. Before any session of the model exists. Errors: OX_E_UNSUPPORTED (the
 * message names the node that has no way across; the model is then unchanged). */
ox_status ox_model_convert_opset(ox_model *m, int opset);
/* Run the graph optimizations on a model loaded with no_optimize (ox_model_options says
 * which; standard_ops_only keeps to default-domain ops of the model's opset; for the device
 * its options named). Before any session of the model exists. */
ox_status ox_model_optimize(ox_model *m, bool standard_ops_only);
/* Serialize the model into *buf (malloc'd: free it with free()). OX_E_NOMEM when it is over
 * protobuf's 2 GiB limit. */
ox_status ox_model_save_buffer(const ox_model *m, void **buf, size_t *len);

/* Reverse-mode autograd. ox_model_gradient appends to the model the graph that computes the
 * gradients of outputs `of` (NULL/0: every float output) with respect to values `wrt` (names;
 * NULL/0: every float initializer from which a gradient reaches them, those with no path left
 * out; a named value with no path gets zeros). The model then has, besides its inputs and
 * outputs:
 *   - an input "<output>_grad" per differentiated output: the incoming gradient (the seed;
 *     ones for a loss, or any tensor of the output's shape);
 *   - an output "<value>_grad" per wrt value, the gradient, of that value's shape;
 *   - every wrt initializer as an input too, with its initializer as the default, so that
 *     new parameter values may be bound at each run.
 * This gives the contract evaluate(params, inputs, output_gradients) -> (outputs, gradients):
 * run a session of the model binding inputs, seeds and (optionally) parameters by name; the
 * outputs are the model's outputs followed by the gradients. The gradient graph uses
 * standard ONNX operators only (the opset is raised to 13 if it was lower), so the model
 * saves as plain ONNX that other runtimes run. The model must have been loaded with
 * no_optimize (fused operators have no gradient rules) and have no session yet.
 * Errors: OX_E_UNSUPPORTED (an operator on the path without a gradient rule, or control flow;
 * the message names the node and op), OX_E_INVALID (an unknown name, a "<name>_grad" name
 * already taken, an optimized model), OX_E_NOMEM. After an error the model may hold part of
 * the gradient graph: free it. */
typedef struct ox_grad_options {
    const char *const *of; /* names of values to differentiate */
    int n_of;
    const char *const *wrt; /* names of values to differentiate with respect to */
    int n_wrt;
} ox_grad_options;
ox_status ox_model_gradient(ox_model *m, const ox_grad_options *opt);
/* Check a model's gradients against central finite differences. The model (loaded with
 * no_optimize; borrowed, unchanged) is differentiated on a copy; random inputs and random
 * seeds for every float output give a scalar L = sum(seed * output), and for up to max_checks
 * elements of each wrt value (picked at random) (L(x + eps) - L(x - eps)) / 2 eps, computed
 * in double from outputs of the model's own precision, is compared with the gradient. An
 * element passes when |analytic - numeric| <= atol + rtol * max(|analytic|, |numeric|).
 * float64 models give a tight check; float32 ones a loose one (their defaults below). */
typedef struct ox_gradcheck_options {
    const char *const *wrt; /* NULL/0: every float graph input and float initializer */
    int n_wrt;
    const ox_tensor *inputs; /* inputs given by name (others: floats normal(0,1), others 0) */
    int n_inputs;
    uint64_t seed;          /* of the random inputs, seeds and picks (0: 1) */
    int max_checks;         /* elements per wrt value (0: 32) */
    double eps, atol, rtol; /* 0: float64 1e-6, 1e-5, 1e-3; float32 1e-3, 1e-2, 2e-2 */
    int64_t symbolic_dim;   /* size of inputs' symbolic dims (0: 2) */
} ox_gradcheck_options;
typedef struct ox_gradcheck_value {
    char *name; /* the wrt value (malloc'd) */
    int n_checked;
    double max_abs_err, max_rel_err; /* rel: abs / max(|analytic|, |numeric|, 1e-12) */
    int64_t worst_index;             /* flat index of the worst element */
    double analytic, numeric;        /* at worst_index */
    double max_abs_numeric;          /* the largest |numeric| seen (0: a vacuous check) */
    bool passed;
} ox_gradcheck_value;
typedef struct ox_gradcheck_report {
    int n_values;
    ox_gradcheck_value *values; /* malloc'd */
    double eps, atol, rtol;     /* what was used */
    bool passed;                /* every element of every value */
} ox_gradcheck_report;
/* Errors: those of ox_model_gradient and of running the model. The report is filled (and
 * must be freed) only on OX_OK; a failed check is OX_OK with passed false. */
ox_status ox_gradcheck(const ox_model *m, const ox_gradcheck_options *opt,
                       ox_gradcheck_report *report);
void ox_gradcheck_report_free(ox_gradcheck_report *report);

/* Training: fit a model's float parameters by gradient descent, on the gradient graph that
 * ox_model_gradient builds.
 *
 *     ox_trainer_options o = {.loss = OX_LOSS_SOFTMAX_CROSS_ENTROPY,
 *                             .optimizer = OX_OPTIM_ADAM, .lr = 1e-3};
 *     ox_trainer *t;
 *     if (ox_trainer_create(m, &o, &t) != OX_OK) puts(ox_errmsg());  // m: no_optimize
 *     ox_tensor in[2] = {{.name = "image", ...}, {.name = "labels", .dtype = OX_INT64, ...}};
 *     float loss;
 *     ox_trainer_step(t, in, 2, &loss);       // forward, backward, one update
 *     ox_trainer_evaluate(t, in, 1, outs);    // the model's outputs, current parameters
 *     ox_trainer_save(t, "trained.onnx");
 *     ox_trainer_free(t);
 *
 * The trainer works on copies: the model passed in is borrowed for ox_trainer_create only.
 * It owns one float32 buffer per parameter (copied from the initializer) and the optimizer's
 * state, and binds the parameters by name at every run, so an update shows in the next step.
 * Thread safety: one thread at a time per trainer (it holds sessions); trainers of one model
 * may run in parallel. */
typedef struct ox_trainer ox_trainer;

/* What is minimised. */
typedef enum {
    /* The model's output `output` is the loss already (a tensor of one element). */
    OX_LOSS_OUTPUT = 0,
    /* The output `output` holds class scores [N, C] (or [N, C, d1, ...]): the trainer adds
     * SoftmaxCrossEntropyLoss (reduction mean) with a new int64 input "labels" [N] (or
     * [N, d1, ...]) and a scalar output "loss". */
    OX_LOSS_SOFTMAX_CROSS_ENTROPY = 1,
} ox_loss_kind;

/* Update rules, as torch.optim 1.13 computes them (in float32, step by step):
 *   SGD: g += weight_decay * p; with momentum, b = g at the first step, then
 *        b = momentum * b + g, and g = nesterov ? g + momentum * b : b; p -= lr * g.
 *   Adam: g += weight_decay * p; m = beta1 m + (1 - beta1) g; v = beta2 v + (1 - beta2) g^2;
 *        p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps).
 *   AdamW: p *= 1 - lr * weight_decay (decoupled), then Adam's update without the L2 term. */
typedef enum {
    OX_OPTIM_SGD = 0,
    OX_OPTIM_ADAM = 1,
    OX_OPTIM_ADAMW = 2,
} ox_optimizer_kind;

/* Options for a trainer; NULL means defaults (a zeroed struct). */
typedef struct ox_trainer_options {
    ox_loss_kind loss;
    const char *output; /* the scores or loss output (NULL: the model's first output) */
    /* Names of the initializers to train (float32). NULL/0: every float initializer from
     * which a gradient reaches the loss. */
    const char *const *params;
    int n_params;
    ox_optimizer_kind optimizer;
    double lr;           /* learning rate (0: 0.01 for SGD, 0.001 for Adam and AdamW) */
    double momentum;     /* SGD (0: none) */
    bool nesterov;       /* SGD: Nesterov momentum (needs momentum > 0) */
    double weight_decay; /* SGD and Adam: L2 added to the gradient; AdamW: decoupled (0: none) */
    double beta1, beta2, eps; /* Adam, AdamW (0: 0.9, 0.999, 1e-8) */
    int n_threads;            /* of the trainer's sessions (0: number of cores) */
} ox_trainer_options;

/* Build a trainer for m, a model loaded with no_optimize (borrowed for the call, unchanged):
 * a copy of it with the loss (as opt->loss says) and its gradient graph, a session, the
 * parameters and the optimizer's state. Errors: OX_E_INVALID (an unknown output or
 * parameter, an option out of range, a name "labels" or "loss" already taken, a loss of more
 * than one element), OX_E_UNSUPPORTED (an op on the path without a gradient rule, which is
 * what a model loaded optimized gives: fused ops have none; a parameter that is not float32),
 * OX_E_NOMEM. *out is owned by the caller. */
ox_status ox_trainer_create(const ox_model *m, const ox_trainer_options *opt, ox_trainer **out);
void ox_trainer_free(ox_trainer *t);

/* One training step on a batch: forward, backward, and one update of every parameter.
 * inputs (borrowed) bind by name, or by position in the order: the model's inputs, then
 * "labels" (OX_LOSS_SOFTMAX_CROSS_ENTROPY). The batch's loss before the update goes to *loss
 * (may be NULL). Errors: those of ox_session_run; on an error the parameters are unchanged. */
ox_status ox_trainer_step(ox_trainer *t, const ox_tensor *inputs, int n_inputs, float *loss);

/* The learning rate of the following steps (a schedule calls it between steps); > 0. */
ox_status ox_trainer_set_lr(ox_trainer *t, double lr);
double ox_trainer_lr(const ox_trainer *t);
/* Steps taken so far. */
int64_t ox_trainer_steps(const ox_trainer *t);

/* Forward only, with the current parameters: the model's own outputs (no loss), as
 * ox_session_run gives them. outputs receives ox_model_n_outputs(m) pointers to tensors owned
 * by the trainer, valid until its next evaluate or ox_trainer_free. Errors: those of
 * ox_session_run. */
ox_status ox_trainer_evaluate(ox_trainer *t, const ox_tensor *inputs, int n_inputs,
                              const ox_tensor **outputs);

/* Parameter i (0 <= i < ox_trainer_n_params): name and current value, borrowed from the
 * trainer (the data changes with each step). OX_E_INVALID for an i out of range. */
int ox_trainer_n_params(const ox_trainer *t);
ox_status ox_trainer_param(const ox_trainer *t, int i, const ox_tensor **param);

/* Write the forward model (without loss or gradient graph) with the current parameters as
 * its initializers, as ONNX (ox_model_save's rules: a temporary file renamed into place).
 * Errors: OX_E_IO, OX_E_NOMEM, and those of loading the model's copy. */
ox_status ox_trainer_save(const ox_trainer *t, const char *path);

/* Parity: where two executions of a model part ways.
 *
 *     ox_compare_side a = {.model = m_opt, .label = "cpu"};
 *     ox_compare_side b = {.model = m_noopt, .label = "cpu:noopt"};
 *     ox_compare_report r;
 *     if (ox_compare(&a, &b, &(ox_compare_options){.inputs = in, .n_inputs = 1}, &r)) ...
 *     if (r.first_divergent >= 0) puts(r.values[r.first_divergent].node_desc);
 *     ox_compare_report_free(&r);
 *
 * Each side is either a model that onnxexec runs (every value its main graph computes is
 * kept: outputs and intermediates), or a set of named tensors given by the caller (a
 * reference dump: outputs only, or intermediates named by value too). The values that both
 * sides have (matched by name: the graph optimizer names a fused node's output after the
 * last value of the chain it replaced, so optimized and unoptimized runs line up) are
 * compared in the topological order of the reference side (the first side that is a model;
 * the order of the given tensors when neither is). A float value diverges when its relative
 * L2 error exceeds rtol and its largest absolute error exceeds atol; an integer, bool or
 * string value when any element differs; any value when its shape differs or when NaN/Inf
 * appear on one side only. The first divergent value in that order names the node where
 * the executions part ways.
 * Thread safety: ox_compare runs sessions of the sides' models; do not run other sessions
 * of those models from other threads at the same time. */
typedef struct ox_compare_side {
    /* A model to run (borrowed; load it as the side wants: no_optimize for an unoptimized
     * run), or NULL for given values. */
    ox_model *model;
    int n_threads; /* the run's threads (0: number of cores) */
    /* Given values (borrowed; each `name` set): a reference dump. */
    const ox_tensor *values;
    int n_values;
    const char *label; /* for messages and reports ("cpu", "cpu:noopt", a folder) */
    /* Where a model side runs (ox_session_options.device and .precision: NULL and 0, the
     * CPU). A side in fp16 or tf32 is compared with float16's default tolerances, one in
     * bf16 with bfloat16's. */
    const char *device;
    int precision;
} ox_compare_side;

typedef struct ox_compare_options {
    /* The inputs the model sides run on (borrowed; by name, or by position). */
    const ox_tensor *inputs;
    int n_inputs;
    /* Tolerances; 0: per element type: float32 rtol 1e-4 atol 1e-6, float16 1e-2 / 1e-3,
     * bfloat16 2e-2 / 1e-2, float64 1e-10 / 1e-12. */
    double rtol, atol;
    bool outputs_only; /* compare the model's outputs only */
} ox_compare_options;

typedef struct ox_compare_value {
    char *name;      /* the value (malloc'd) */
    char *node;      /* its producer in the reference model: the node's name (or "op #i" when
                        unnamed), NULL for a graph input or a given value (malloc'd) */
    char *op;        /* the producer's op type, NULL likewise (malloc'd) */
    char *node_desc; /* one line: node, op, attributes, input types and shapes (malloc'd;
                        NULL likewise) */
    bool is_output;  /* a graph output of the reference side (any value when no side is a
                        model) */
    ox_dtype dtype;
    int rank;
    int64_t dims[OX_MAX_RANK]; /* side a's shape */
    bool shape_mismatch;       /* the sides' shapes or types differ (metrics NaN then) */
    int64_t n;                 /* elements compared; metrics: those finite on both sides */
    double max_abs, max_rel;   /* rel: |a - b| / max(|a|, |b|), over elements not both 0 */
    double rel_l2;             /* ||a - b|| / ||a|| (||a - b|| when a is all zeros) */
    double cosine;             /* cos(a, b); 1 when both are zero */
    double max_ulp;            /* the largest distance in units in the last place (floats) */
    double q50, q90, q99;      /* quantiles of |a - b| */
    int64_t n_mismatch;        /* elements with a != b (bitwise for floats, NaN == NaN) */
    int64_t nan_a, nan_b, inf_a, inf_b;
    double rtol, atol; /* the tolerances used for this value */
    bool diverges;
} ox_compare_value;

typedef struct ox_compare_report {
    int n_values;
    ox_compare_value *values; /* compared values, in order (malloc'd) */
    int first_divergent;      /* index in values, -1 when the sides agree */
    /* How the error grew: indices in values along a path of the reference graph from the
     * first divergent value to the graph output with the largest relative L2 error. */
    int n_path;
    int *path;
    int n_only_a, n_only_b; /* values one side has and the other lacks (not compared) */
    bool outputs_diverge;   /* a graph output diverges */
} ox_compare_report;

/* Compare two executions. Errors: OX_E_INVALID (no values in common, a side with neither
 * model nor values), and those of running the models. On OX_OK the report is filled (free
 * it with ox_compare_report_free); agreement or divergence is in the report. */
ox_status ox_compare(const ox_compare_side *a, const ox_compare_side *b,
                     const ox_compare_options *opt, ox_compare_report *report);
void ox_compare_report_free(ox_compare_report *report);

/* Run the model once and return every value of its main graph (inputs, initializers read
 * by nodes, intermediates, outputs) by name: *values (malloc'd array of *n_values tensors,
 * each owning its data and a malloc'd name; free with ox_values_free). For dumps and for
 * callers that compare values themselves. Errors: those of ox_session_run. */
ox_status ox_model_run_all(ox_model *m, const ox_tensor *inputs, int n_inputs, int n_threads,
                           ox_tensor **values, int *n_values);
void ox_values_free(ox_tensor *values, int n_values);

/* Write the smallest model that reproduces value `index` of a report: the node that
 * produces it in `model` (the reference side's model, borrowed), alone, its computed
 * inputs as graph inputs, constants as initializers, into folder `dir` (created) in the
 * backend-test layout: dir/model.onnx and dir/test_data_set_0/input_K.pb holding the
 * inputs as `values` (side a's run, from ox_model_run_all) has them, and output_0.pb the
 * value as `values` has it. Errors: OX_E_INVALID (a value no node of the model produces),
 * OX_E_IO. */
ox_status ox_compare_reduce(const ox_model *model, const ox_tensor *values, int n_values,
                            const char *value_name, const char *dir);

/* The number of graph inputs (initializers that are also inputs included) and outputs of
 * the model's main graph. Thread-safe: the model is only read. */
int ox_model_n_inputs(const ox_model *m);
int ox_model_n_outputs(const ox_model *m);
/* Describe graph input/output i: name, dtype and shape; a dim that is not fixed is -1 and
 * its symbolic name (if any) goes to dim_names[k] (borrowed; may be NULL). */
ox_status ox_model_input(const ox_model *m, int i, ox_tensor *desc, const char **dim_names);
ox_status ox_model_output(const ox_model *m, int i, ox_tensor *desc, const char **dim_names);

/* What graph input/output i holds (tensor, sequence, optional, ...); OX_IO_UNKNOWN for an
 * out-of-range i. */
ox_io_kind ox_model_input_kind(const ox_model *m, int i);
ox_io_kind ox_model_output_kind(const ox_model *m, int i);

/* True when input i has an initializer that serves as its default (it may be omitted). */
bool ox_model_input_has_default(const ox_model *m, int i);
/* Model facts for `onnxexec info` and tools. Strings are borrowed from the model. */
const char *ox_model_producer(const ox_model *m);
const char *ox_model_producer_version(const ox_model *m);
int64_t ox_model_ir_version(const ox_model *m);
int ox_model_n_opsets(const ox_model *m);
ox_status ox_model_opset(const ox_model *m, int i, const char **domain, int64_t *version);
int ox_model_n_nodes(const ox_model *m);
/* Node i in execution order; any out-pointer may be NULL. */
ox_status ox_model_node(const ox_model *m, int i, const char **name, const char **op_type,
                        const char **domain);

/* A session runs one model (borrowed: it must outlive the session) and caches one plan per
 * input-shape signature. Errors: OX_E_INVALID, OX_E_NOMEM.
 * Threads: ox_session_run may be called on one session from many threads at once. Each
 * calling thread gets plans of its own (arena, scratch, outputs, and its own copy of packed
 * weights: memory grows with the number of threads that run it) and shares the model's
 * weights and the session's thread pool (a kernel that finds the pool busy runs on its
 * caller's thread). ox_session_memory and ox_session_profile answer for the calling
 * thread's last run. ox_session_free must not race with anything else on the session.
 * Sessions of one model may also run in parallel. */
ox_status ox_session_create(ox_model *m, const ox_session_options *opt, ox_session **out);
void ox_session_free(ox_session *s);

/* Run with n_inputs tensors. Inputs bind by `name` when set, else by position. The outputs
 * array receives ox_model_n_outputs() pointers to tensors owned by the session, valid until
 * the next run of the session on the same thread, or ox_session_free. Errors: OX_E_INVALID
 * (missing/unknown input), OX_E_SHAPE (wrong dtype or shape, with the expected one in the message),
 * OX_E_LIMIT (the plan for these input shapes would take more than the plan_bytes limit), kernel
 * errors. */
ox_status ox_session_run(ox_session *s, const ox_tensor *inputs, int n_inputs,
                         const ox_tensor **outputs);

/* The memory plan of the calling thread's last run: arena bytes, the sum of all intermediates (no
 * reuse) and the lower bound (most bytes alive at one step). OX_E_INVALID before the first run. */
ox_status ox_session_memory(ox_session *s, size_t *arena, size_t *no_reuse, size_t *peak);
/* Whether the calling thread's last run split its batch (ox_session_options.batch_split):
 * *items, the batch size run one item at a time (0: the batch ran whole), and *lanes, the
 * threads that took items side by side. A split run's memory (ox_session_memory) is that
 * of every lane's plan plus the batch's outputs. OX_E_INVALID before the first run. */
ox_status ox_session_split(ox_session *s, int64_t *items, int *lanes);

/* The session's device (*name: "cpu", or "cuda:0 (NVIDIA H100 80GB HBM3)"; borrowed) and how
 * the calling thread's last plan runs: steps on the device, steps on the CPU (all of them on
 * a CPU session; on a GPU, the nodes without a GPU kernel), the graph's node index of each
 * of those on a GPU (*cpu_nodes, n_cpu_steps of them, borrowed; NULL on a CPU session), and
 * whether runs replay one captured CUDA graph. Any pointer may be NULL. */
ox_status ox_session_device(ox_session *s, const char **name, int *n_device_steps, int *n_cpu_steps,
                            const int **cpu_nodes, bool *is_captured);

/* One node's time in a profiled session (ox_session_options.profile). */
typedef struct ox_node_time {
    const char *node;    /* the node's name ("" when the file gives none); borrowed */
    const char *op_type; /* borrowed */
    double seconds;      /* summed over the runs */
    int64_t runs;        /* runs of the plan that were timed */
} ox_node_time;

/* Per-node times of the plan that ran last on the calling thread (one plan per input-shape
 * signature), in execution order, summed over every run of that plan since it was built or since
 * the last call with reset = true. *times (owned by the session, valid until the next call or
 * ox_session_free) receives *n entries; nodes the plan skips (folded constants, views) are left
 * out. Errors: OX_E_INVALID when the session was not created with profile or has not run,
 * OX_E_NOMEM. */
ox_status ox_session_profile(ox_session *s, bool reset, const ox_node_time **times, int *n);

/* Tensor files. Loaded tensors own their data: free with ox_tensor_free_data. A `name`
 * out-pointer (may be NULL) receives the stored tensor name, malloc'd: the caller frees it. */
ox_status ox_tensor_read_pb(const char *path, ox_tensor *out, char **name);
ox_status ox_tensor_write_pb(const char *path, const ox_tensor *t, const char *name);
ox_status ox_tensor_read_npy(const char *path, ox_tensor *out);
ox_status ox_tensor_write_npy(const char *path, const ox_tensor *t);
/* Read a .pb file holding a TensorProto, SequenceProto, MapProto (of scalar values) or
 * OptionalProto (as `kind` says) into a value that owns its data and items (free with
 * ox_tensor_free_data). */
ox_status ox_value_read_pb(const char *path, ox_io_kind kind, ox_tensor *out, char **name);
/* Frees data, items (recursively) and the strings of a string tensor; zeroes the struct. */
void ox_tensor_free_data(ox_tensor *t);

#if defined(__GNUC__) && __GNUC__ >= 4
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif
#endif
