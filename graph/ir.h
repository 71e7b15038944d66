/* The IR: one graph of values and nodes, shaped after ONNX but free of protobuf.
 *
 *     ox_graph *g = ox_graph_create(NULL);
 *     int x = ox_graph_add_value(g, "x");           // value ids index g->values
 *     int y = ox_graph_add_value(g, "y");
 *     ox_node *n = ox_graph_add_node(g, "relu0", "", "Relu", 1, &x, 1, &y);
 *     ...
 *     ox_graph_free(g);                             // frees everything reachable
 *
 * Ownership: the graph owns its nodes, values, names, attributes and subgraphs, all
 * allocated from its arena (ox_graph_alloc). Constant tensors (initializers) own their
 * data unless `borrowed` is set, in which case it points into a memory map that the
 * model owns. Nodes are kept in topological order (ox_graph_sort restores it).
 */
#ifndef OX_GRAPH_IR_H
#define OX_GRAPH_IR_H

#include "onnxexec.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- errors ---------------------------------------------------------------------------- */

/* Set the thread's error message and return `code`. */
ox_status ox_err(ox_status code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prefix the current message with more context ("node 'conv1' (Conv): ..."). */
ox_status ox_err_prefix(ox_status code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- limits (ox_limits) ---------------------------------------------------------------- */

/* `in` (NULL: all defaults) with every zero field replaced by its default. OX_E_INVALID when
 * a field is negative or over what onnxexec allows (rank > OX_MAX_RANK, subgraph_depth >
 * OX_LIMIT_MAX_SUBGRAPH_DEPTH). */
ox_status ox_limits_fill(const ox_limits *in, ox_limits *out);
/* The defaults (a static struct). */
const ox_limits *ox_limits_default(void);
/* An OX_E_LIMIT error: the message `fmt` (what was found, with its value), then
 * ": over the limit NAME=LIMIT (raise it: ox_limits.NAME, or onnxexec --limit NAME=N)".
 * `name` is the ox_limits field. */
ox_status ox_err_limit(const char *name, uint64_t limit, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A rank read from a model against the rank limit (<= OX_MAX_RANK): OX_E_UNSUPPORTED past
 * OX_MAX_RANK (which no limit raises), OX_E_LIMIT past `limit`. `what` starts the message
 * ("value 'x'", "the tensor"). */
ox_status ox_check_rank(uint64_t rank, int limit, const char *what);

/* ---- checked sizes --------------------------------------------------------------------- */

/* Return false on overflow. */
bool ox_mul_size(size_t a, size_t b, size_t *out);
bool ox_add_size(size_t a, size_t b, size_t *out);
/* Bytes of a tensor with these dims; false on overflow or negative dims. */
bool ox_tensor_bytes(ox_dtype dt, int rank, const int64_t *dims, size_t *out);

/* ---- arena ----------------------------------------------------------------------------- */

struct ox_arena_chunk;
struct ox_arena {
    struct ox_arena_chunk *head;
};
void *ox_arena_alloc(struct ox_arena *a, size_t n); /* zeroed, 16-byte aligned; NULL on OOM */
char *ox_arena_strdup(struct ox_arena *a, const char *s);
char *ox_arena_strndup(struct ox_arena *a, const char *s, size_t n);
void ox_arena_free(struct ox_arena *a);

/* ---- attributes ------------------------------------------------------------------------ */

/* Numbered as ONNX's AttributeProto.AttributeType. */
typedef enum {
    OX_ATTR_UNDEFINED = 0,
    OX_ATTR_FLOAT = 1,
    OX_ATTR_INT = 2,
    OX_ATTR_STRING = 3,
    OX_ATTR_TENSOR = 4,
    OX_ATTR_GRAPH = 5,
    OX_ATTR_FLOATS = 6,
    OX_ATTR_INTS = 7,
    OX_ATTR_STRINGS = 8,
    OX_ATTR_TENSORS = 9,
    OX_ATTR_GRAPHS = 10,
    OX_ATTR_SPARSE_TENSOR = 11,
    OX_ATTR_SPARSE_TENSORS = 12,
    OX_ATTR_TYPE_PROTO = 13,
    OX_ATTR_TYPE_PROTOS = 14,
} ox_attr_type;

struct ox_graph;

struct ox_attr {
    const char *name;
    ox_attr_type type;
    /* Inside an ONNX function body: the attribute of the calling node this one refers to
     * (resolved when the function is inlined); NULL otherwise. */
    const char *ref_attr_name;
    float f;
    int64_t i;
    const char *s; /* strings may hold NUL bytes: s_len is their length */
    size_t s_len;
    ox_tensor *t;
    struct ox_graph *g;
    int n; /* element count of the list kinds */
    float *floats;
    int64_t *ints;
    const char **strings;
    size_t *string_lens;
    /* TYPE_PROTO(S): the serialized TypeProto (what `s`/`strings` describe), so that the
     * exporter writes back exactly what was read. */
    const uint8_t *type_pb;
    size_t type_pb_len;
    const uint8_t **type_pbs;
    size_t *type_pb_lens;
    ox_tensor **tensors;
    struct ox_graph **graphs;
};

/* ---- values ---------------------------------------------------------------------------- */

/* What a value holds. Most are tensors. */
typedef enum {
    OX_KIND_TENSOR = 0,
    OX_KIND_SEQUENCE = 1,
    OX_KIND_MAP = 2,
    OX_KIND_OPTIONAL = 3,
    OX_KIND_SPARSE = 4,
    OX_KIND_UNKNOWN = 5,
} ox_value_kind;

/* One dimension: a number (>= 0), or unknown (value -1) with an optional symbol. */
struct ox_dim {
    int64_t value;
    const char *symbol;
};

struct ox_value {
    const char *name;
    ox_value_kind kind;
    ox_dtype dtype; /* element type (for sequences/optionals: of the tensors inside) */
    int rank;       /* -1 when unknown */
    struct ox_dim *dims;
    int producer;       /* index of the node that writes it; -1 for inputs and constants */
    ox_tensor *init;    /* constant data (initializer), or NULL; the struct is in the arena */
    bool init_borrowed; /* init->data points into one of g->maps: not freed with the graph */
    bool init_sparse;   /* the file held `init` as a sparse initializer (densified here) */
    int init_order;     /* 1 + its place among the file's initializers; 0: made later */
    bool is_outer;      /* in a subgraph: a name from an enclosing scope */
    /* Sequences, maps, optionals and sparse tensors: the serialized TypeProto the file gave
     * (the fields above keep only the innermost element type); NULL otherwise. */
    const uint8_t *type_pb;
    size_t type_pb_len;
};

/* ---- nodes ----------------------------------------------------------------------------- */

struct ox_op; /* kernels/op.h */

struct ox_node {
    const char *name;
    const char *domain; /* "" for the default ONNX domain ("ai.onnx" is normalised to "") */
    const char *op_type;
    int opset; /* the model's opset import for `domain` */
    int n_inputs;
    int *inputs; /* value ids; -1 for an omitted optional input */
    int n_outputs;
    int *outputs; /* value ids; -1 for an omitted optional output */
    int n_attrs;
    struct ox_attr *attrs;
    const char *doc;
    const struct ox_op *op; /* resolved operator-table row; NULL if none serves this node */
};

/* ---- graph ----------------------------------------------------------------------------- */

struct ox_opset {
    const char *domain;
    int64_t version;
};

struct ox_graph {
    struct ox_arena arena;
    struct ox_graph *parent; /* enclosing graph of a subgraph, else NULL */
    const char *name;
    int n_values, cap_values;
    struct ox_value *values;
    int n_nodes, cap_nodes;
    struct ox_node *nodes;
    int n_inputs; /* graph inputs, excluding initializers */
    int *inputs;
    int n_outputs;
    int *outputs;
    const char *graph_doc; /* GraphProto.doc_string (every graph) */
    /* Model-level facts (top-level graph only). */
    int n_opsets;
    struct ox_opset *opsets;
    int64_t ir_version;
    const char *producer_name, *producer_version, *doc; /* doc: ModelProto.doc_string */
    const char *model_domain;
    int64_t model_version;
    int n_meta; /* metadata_props, in file order */
    struct ox_meta {
        const char *key, *value;
    } * meta;
    /* Memory maps the graph keeps alive (the model file, external data files); unmapped by
     * ox_graph_free with ox_unmap. Attribute tensors always own their data. */
    int n_maps;
    struct ox_map {
        void *addr;
        size_t len;
    } * maps;
    /* Name → value id, for lookup during import and by name at run time. */
    int *hash;
    int hash_cap;
};

/* munmap wrapper (NULL is a no-op). */
void ox_unmap(void *addr, size_t len);
/* Keep a memory map alive as long as the graph. */
ox_status ox_graph_keep_map(struct ox_graph *g, void *addr, size_t len);

/* `parent` is NULL for a model's main graph. */
struct ox_graph *ox_graph_create(struct ox_graph *parent);
/* The model's metadata (metadata_props, kept by the main graph; a subgraph asks its main
 * graph): the value under key, or NULL. */
const char *ox_graph_meta(const struct ox_graph *g, const char *key);
/* Add or replace the main graph's metadata entry key (copied into the graph's arena). */
ox_status ox_graph_set_meta(struct ox_graph *g, const char *key, const char *value);
/* Set to "1" by the autograd pass on a graph that computes gradients; a plan of such a
 * graph runs every kernel's most accurate path (ox_infer_ctx.precise). */
#define OX_META_GRADIENTS "onnxexec.gradients"
void ox_graph_free(struct ox_graph *g);
void *ox_graph_alloc(struct ox_graph *g, size_t n);
char *ox_graph_strdup(struct ox_graph *g, const char *s);

/* Value id by name in this graph only, or -1. */
int ox_graph_find_value(const struct ox_graph *g, const char *name);
/* Add a value (or return the existing one with that name); -1 on OOM. Names must be unique:
 * a second call with the same name returns the same id. NULL or "" names get a fresh
 * unique name. */
int ox_graph_add_value(struct ox_graph *g, const char *name);
/* A new value named after value `like` with `suffix` (made unique: _1, _2, ...), of its kind
 * and element type, rank unknown (left to the plan); -1 on OOM. */
int ox_graph_add_value_like(struct ox_graph *g, int like, const char *suffix);
/* Append value v to the graph's inputs or outputs (OX_E_NOMEM on failure). */
ox_status ox_graph_add_input(struct ox_graph *g, int v);
ox_status ox_graph_add_output(struct ox_graph *g, int v);
/* True when v is one of the graph's inputs. */
bool ox_graph_is_input(const struct ox_graph *g, int v);
/* Append a node; inputs/outputs are copied. Returns NULL on OOM. */
struct ox_node *ox_graph_add_node(struct ox_graph *g, const char *name, const char *domain,
                                  const char *op_type, int n_inputs, const int *inputs,
                                  int n_outputs, const int *outputs);
/* Free what a node's attributes own (tensor data, subgraphs) and forget them: for a node
 * taken out of its graph (the rest lives in the graph's arena). */
void ox_node_free_attrs(struct ox_node *n);
/* Readers of each of g's values, into uses[g->n_values]: one per node input (nodes with
 * skip[i] set left out; skip may be NULL), and OX_USES_OUTSIDE for a graph output or a name
 * that a subgraph, at any depth, reads from g. Passes use it to find values read once. */
#define OX_USES_OUTSIDE 1000
void ox_graph_count_uses(const struct ox_graph *g, const bool *skip, int *uses);
/* Attribute lookup (NULL if absent). */
const struct ox_attr *ox_node_attr(const struct ox_node *n, const char *name);
/* Restore topological order (stable: keeps file order where it is already valid). Fails
 * with a message naming a node on a cycle, or a value that nothing produces. */
ox_status ox_graph_sort(struct ox_graph *g);
/* The opset version the model imports for `domain` (0 if none). */
int64_t ox_graph_opset(const struct ox_graph *g, const char *domain);

/* ---- tensors (internal helpers) -------------------------------------------------------- */

/* Allocate zeroed data for `t` with malloc (owned by the caller; free with
 * ox_tensor_free_data). String tensors get empty, owned strings. */
ox_status ox_tensor_alloc(ox_tensor *t, ox_dtype dt, int rank, const int64_t *dims);
/* Deep copy into `dst` (malloc'd data). */
ox_status ox_tensor_copy(ox_tensor *dst, const ox_tensor *src);
/* "float[1,3,224,224]" into buf. */
const char *ox_tensor_desc(const ox_tensor *t, char *buf, size_t len);
bool ox_dtype_is_float(ox_dtype dt);
bool ox_dtype_is_int(ox_dtype dt);

/* Float conversions for the narrow float types. */
float ox_half_to_float(uint16_t h);
uint16_t ox_float_to_half(float f);
float ox_bf16_to_float(uint16_t h);
uint16_t ox_float_to_bf16(float f);

#endif
