/* The TorchScript evaluator's internals, shared by eval.c (values, statements, calls,
 * modules) and aten.c (the operator lowerings). Internal to importer/torchscript/. */
#ifndef OX_IMPORTER_TORCHSCRIPT_EVAL_H
#define OX_IMPORTER_TORCHSCRIPT_EVAL_H

#include "importer/torchscript/ast.h"
#include "importer/torchscript/pickle.h"
#include "importer/torchscript/torchscript.h"
#include "importer/torchscript/zip.h"

#define TS_MAX_IN 64 /* operands of one emitted node */

/* ---- values ---------------------------------------------------------------------------- */

typedef enum {
    TV_NONE,
    TV_BOOL,
    TV_INT,
    TV_FLOAT,
    TV_STR,
    TV_DEVICE,
    TV_LIST,
    TV_TUPLE,
    TV_DICT,   /* items[2n] */
    TV_OBJ,    /* a module or scripted object: obj (pickle) and cls */
    TV_TENSOR, /* a graph value (vid) and/or constant data (cdata); type and shape */
    TV_FUNC,   /* a free function or a class (NamedTuple) by qualified name: s */
    TV_UNINIT, /* uninitialized(T): only on paths that raise */
} tv_kind;

struct tv {
    tv_kind k;
    bool b;
    int64_t i;
    double f;
    const char *s;
    size_t s_len;
    int n;
    struct tv **items;
    const struct ox_pv *obj; /* TV_OBJ */
    const char *cls;         /* TV_OBJ: qualified class name */
    struct tv_attr *attrs;   /* TV_OBJ: attributes set by code (self.x = ...) */
    int vid;                 /* TV_TENSOR: value id in graph g, -1 while only constant */
    struct ox_graph *g;      /* TV_TENSOR: the graph vid belongs to */
    const ox_tensor *cdata;  /* TV_TENSOR: known data (constant), or NULL */
    struct tv *vbase;        /* TV_TENSOR: a view of this constant (slices, selects), so that
                                in-place ops on the view change it; NULL otherwise */
    int64_t voff;            /* the view's first element in vbase, and its strides there */
    int64_t vstride[OX_MAX_RANK];
    ox_dtype dt; /* TV_TENSOR: element type (OX_UNDEFINED: unknown) */
    int rank;    /* TV_TENSOR: -1 when unknown */
    int64_t dims[OX_MAX_RANK];
};

struct tv_attr {
    const char *name;
    struct tv *v;
    struct tv_attr *next;
};

/* ---- the evaluator --------------------------------------------------------------------- */

struct ts_file_cache {
    const char *path; /* "code/__torch__/a/b.py" */
    struct ox_ts_file *file;
    struct ts_file_cache *next;
};

struct ts_tensor_cache { /* one initializer per pickled tensor */
    const struct ox_pv *pv;
    struct tv *v;
    struct ts_tensor_cache *next;
};

struct ev {
    const char *archive; /* for messages */
    struct ox_zip *zip;
    struct ox_pickle *data_pk, *const_pk;
    struct ox_pv *root, *constants;
    struct ox_graph *g;      /* the graph nodes go to: the main graph, or an If branch */
    struct ox_graph *main_g; /* the main graph: inputs, initializers, constants */
    struct ox_arena a;       /* values, scopes, code trees */
    struct ts_file_cache *files;
    struct ts_tensor_cache *tensors;
    ox_tensor **owned; /* constant data made during evaluation */
    int n_owned, cap_owned;
    const char *file; /* the code file being run (for messages) */
    int line;
    char prefix[1024]; /* module path of the code being run ("layer1.0.conv1") */
    int depth;
    long unrolled;
    int n_nodes;
    const struct ox_pv *traced; /* traced_inputs.pkl's root, while inputs are bound */
    bool borrowed;              /* some initializer uses the archive's bytes in place */
    ox_limits lim;              /* filled: no zero fields */
};

/* Errors: "<archive>: <file>:<line>: <message>". */
ox_status ts_err(struct ev *e, ox_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

struct tv *tv_new(struct ev *e, tv_kind k);
struct tv *tv_int(struct ev *e, int64_t i);
struct tv *tv_float(struct ev *e, double f);
struct tv *tv_bool(struct ev *e, bool b);
struct tv *tv_none(struct ev *e);
struct tv *tv_list(struct ev *e, tv_kind k, int n); /* TV_LIST or TV_TUPLE of n NULL items */
const char *tv_kind_name(tv_kind k);

/* Constant tensors: `t` (data malloc'd) becomes owned by the evaluator. */
struct tv *tv_const(struct ev *e, ox_tensor *t);
/* A new constant tensor of dtype dt and the given shape, zeroed, owned by the evaluator. */
struct tv *tv_const_new(struct ev *e, ox_dtype dt, int rank, const int64_t *dims, void **data);
/* A scalar as a 0-dim constant tensor of dtype dt. */
struct tv *tv_scalar_tensor(struct ev *e, double v, ox_dtype dt);
/* The graph value of a tensor (a constant becomes an initializer); -1 on OOM. */
int tv_vid(struct ev *e, struct tv *v);

/* Attributes of an emitted node. */
struct ts_attrs {
    int n;
    struct ox_attr a[16];
};
void ta_int(struct ts_attrs *t, const char *name, int64_t v);
void ta_float(struct ts_attrs *t, const char *name, float v);
void ta_str(struct ts_attrs *t, const char *name, const char *v);
void ta_ints(struct ts_attrs *t, const char *name, int n, const int64_t *v);
/* v[n] strings; lens[n] (the caller's) receives their lengths */
void ta_strs(struct ts_attrs *t, const char *name, int n, const char *const *v, size_t *lens);
void ta_tensor(struct ts_attrs *t, const char *name, ox_tensor *v);

/* Emit op (default domain, OX_TS_OPSET) on inputs (NULL: omitted) into n_out results.
 * Types and shapes are inferred; when every input is constant, the op runs now and the
 * results are constants. */
ox_status ts_emit(struct ev *e, const char *op, int n_in, struct tv *const *in,
                  const struct ts_attrs *at, int n_out, struct tv **out);
/* One-output shorthand. */
ox_status ts_emit1(struct ev *e, const char *op, int n_in, struct tv *const *in,
                   const struct ts_attrs *at, struct tv **out);
/* An int64 1-D constant tensor. */
struct tv *tv_i64s(struct ev *e, int n, const int64_t *v);

/* ---- operators (aten.c) ---------------------------------------------------------------- */

/* Call `name` ("torch.add", "ops.prim.NumToTensor", "int", ...) on args; kw[k] names
 * args[k] for keyword arguments (NULL: positional). *handled is false when no lowering
 * has the name (the caller then reports it). */
ox_status ts_call_op(struct ev *e, const char *name, int n, struct tv **args, const char **kw,
                     struct tv **out, bool *handled);

/* Scalar helpers. */
bool tv_is_num(const struct tv *v);
double tv_num(const struct tv *v);
ox_status tv_to_ints(struct ev *e, const struct tv *v, int64_t *out, int max, int *n);
ox_status tv_to_int(struct ev *e, const struct tv *v, int64_t *out);
bool tv_truthy(const struct tv *v, bool *out);

#endif
