/* The ONNX importer: ModelProto (protobuf, read with the protobuf-c code generated from the
 * system's onnx.proto) → IR (graph/ir.h). Internal header.
 *
 *     struct ox_graph *g;
 *     if (ox_onnx_import_file("net.onnx", &g) != OX_OK) { puts(ox_errmsg()); return 1; }
 *     ...                       // g->nodes in topological order, node->op resolved or NULL
 *     ox_graph_free(g);         // also unmaps the model and external data files
 *
 * What the importer does with a model:
 * - Graph inputs that are not initializers become g->inputs. An initializer that is also a
 *   graph input is an overridable default: it stays in g->inputs and its value has `init`.
 *   Other initializers (dense and sparse, densified) are values with `init` set.
 * - Initializer data is borrowed (init_borrowed) from the memory-mapped model or external
 *   data file when its bytes are laid out as in memory and aligned for the element type;
 *   otherwise it is copied. Sub-byte types are unpacked to one element per byte.
 * - Nodes calling a local function (ModelProto.functions, matched by domain, name and
 *   overload) are replaced by the function's body, with fresh value names
 *   ("<caller>/<name>"), attribute references resolved, and nested calls inlined.
 * - Subgraph attributes (If, Loop, Scan, ...) become child graphs (parent set). A name a
 *   subgraph reads from an enclosing scope is a value of the subgraph with is_outer set;
 *   every enclosing graph between the subgraph and the one that defines the name also holds
 *   it as an is_outer value, so each graph's outer names resolve in its direct parent.
 * - Attributes: SPARSE_TENSOR(S) are densified into `t`/`tensors` (the type stays
 *   OX_ATTR_SPARSE_TENSOR(S)). TYPE_PROTO(S) are kept as ONNX type strings in `s`/`strings`
 *   ("tensor(float)", "seq(tensor(int64))", "optional(tensor(float))",
 *   "map(int64,tensor(float))", "sparse_tensor(float)") with the innermost element dtype in
 *   `i`/`ints`.
 * - Values carry the types of graph inputs, outputs and value_info: kind, dtype, rank, dims.
 *   Sequences and maps have rank -1; an optional tensor has the tensor's shape.
 * - node->op is ox_op_find(domain, op_type, opset), NULL when no row serves the node (the
 *   executor reports unsupported ops when it plans, so a model can still be inspected).
 * Limits (ox_limits, the defaults unless the caller gives others; OX_E_LIMIT past them):
 * model bytes (the file or buffer, plus the external data read), tensor bytes, rank, nodes in
 * all after inlining, subgraph nesting, string length (checked for every string and bytes
 * field but raw_data while the protobuf is pre-scanned, before it is unpacked). Fixed: function
 * call nesting 64, protobuf message nesting max(256, 3 * subgraph_depth + 64), IR versions up
 * to OX_ONNX_MAX_IR_VERSION.
 * External data stays inside the model's folder: a location that is absolute, has a ".."
 * component, or resolves (symlinks followed) to a file outside the folder is refused, and so
 * is a range past the end of the file.
 */
#ifndef OX_IMPORTER_ONNX_H
#define OX_IMPORTER_ONNX_H

#include "graph/ir.h"

#define OX_ONNX_MAX_GRAPH_DEPTH OX_LIMIT_SUBGRAPH_DEPTH /* the default; ox_limits */
#define OX_ONNX_MAX_CALL_DEPTH  64
#define OX_ONNX_MAX_MSG_DEPTH   256
#define OX_ONNX_MAX_NODES       OX_LIMIT_NODES /* the default; ox_limits */
#define OX_ONNX_MAX_IR_VERSION  13             /* ONNX 1.20 and later */

/* Import an ONNX model file. External data is looked up relative to the file's folder.
 * *out is owned by the caller (ox_graph_free). Errors: OX_E_IO (open, map), OX_E_INVALID
 * (malformed model), OX_E_UNSUPPORTED (valid but beyond what onnxexec handles), OX_E_NOMEM;
 * the message starts with the path. */
ox_status ox_onnx_import_file(const char *path, struct ox_graph **out);
/* Import from memory. `buf` is borrowed for the call only (data is copied out of it);
 * `dir` is the folder external data is relative to (NULL: a model with external data is
 * rejected). */
ox_status ox_onnx_import_buffer(const void *buf, size_t len, const char *dir,
                                struct ox_graph **out);
/* The same within limits `lim` (NULL: the defaults; zero fields: their defaults). */
ox_status ox_onnx_import_file_with(const char *path, const ox_limits *lim, struct ox_graph **out);
ox_status ox_onnx_import_buffer_with(const void *buf, size_t len, const char *dir,
                                     const ox_limits *lim, struct ox_graph **out);

/* ---- shared with tensor_pb.c ----------------------------------------------------------- */

struct Onnx__TensorProto;
struct Onnx__SparseTensorProto;
struct ox_ext_cache;

/* Where a TensorProto's data may come from and go to. */
struct ox_pb_src {
    /* Folder that external data locations are relative to; NULL rejects external data. */
    const char *dir;
    /* Graph whose memory maps keep borrowed data alive (external data files are mapped and
     * kept there); NULL: data is always copied. */
    struct ox_graph *keep;
    /* The exact place of the tensor's raw_data bytes inside a map that `keep` holds, when
     * known (NULL: unknown). Used only if the bytes there equal raw_data. */
    const unsigned char *raw_at;
    /* External files mapped so far in this import (with `keep`); may be NULL. */
    struct ox_ext_cache *ext;
    /* Leave raw_data in the proto (it is converted again later, as in a function body that
     * is inlined more than once); otherwise it may be taken over to save a copy. */
    bool keep_raw;
    /* Limits on tensor bytes, rank and model bytes (filled: no zero fields); NULL: the
     * defaults. */
    const ox_limits *lim;
    /* The model's bytes read so far (its file), to which external data adds; checked against
     * lim->model_bytes. NULL: not counted. */
    uint64_t *model_bytes;
};

/* Convert a TensorProto (raw_data, every typed field, or external data) into `out`
 * (dtype, rank, dims, data). Data is malloc'd and owned by `out` unless *borrowed is set,
 * in which case it points into one of src->keep's maps. Unless src->keep_raw, raw_data may
 * be taken over from `tp` (it is then cleared there). Messages say what is wrong without
 * naming the tensor: callers prefix their context. This is the one conversion used by
 * initializers, tensor attributes, sparse tensors and ox_tensor_read_pb. */
ox_status ox_tensor_from_proto(struct Onnx__TensorProto *tp, const struct ox_pb_src *src,
                               ox_tensor *out, bool *borrowed);
/* Densify a SparseTensorProto into `out` (owned, malloc'd data). */
ox_status ox_tensor_from_sparse_proto(struct Onnx__SparseTensorProto *sp,
                                      const struct ox_pb_src *src, ox_tensor *out);
/* An external data location must stay inside the model's folder: not empty, relative, no
 * ".." component (either slash counts). OX_E_INVALID saying which rule it breaks. The
 * importer checks what it reads, the exporter what it is asked to write. (The importer also
 * resolves the path it opens, symlinks included, and refuses one that leads outside.) */
ox_status ox_check_data_location(const char *loc);
/* The bytes of a fixed-size tensor's elements as raw_data and external data hold them
 * (little-endian, sub-byte types packed two or four to a byte, bool as 0/1). *bytes points
 * at t->data when that is already the layout (*owned NULL), else at *owned (malloc'd: the
 * caller frees it). Errors: OX_E_INVALID (string or undefined type), OX_E_NOMEM. */
ox_status ox_tensor_wire(const ox_tensor *t, const unsigned char **bytes, size_t *len,
                         unsigned char **owned);
/* A whole file read into malloc'd memory (size-checked); messages name the file. */
ox_status ox_pb_read_file(const char *path, unsigned char **buf, size_t *len);
/* The folder of a path, malloc'd ("." for a bare name); NULL on OOM. */
char *ox_pb_dir_of(const char *path);
/* True when buf parses as `desc` within the importer's nesting limit (protobuf-c itself
 * recurses without one); else false with the error set. */
struct ProtobufCMessageDescriptor;
bool ox_pb_check_nesting(const struct ProtobufCMessageDescriptor *desc, const void *buf,
                         size_t len);

/* External-data map cache: created empty, freed after the import (the maps themselves
 * belong to the graph). */
struct ox_ext_cache *ox_ext_cache_create(void);
void ox_ext_cache_free(struct ox_ext_cache *c);

#endif
