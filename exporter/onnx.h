/* The ONNX exporter: IR (graph/ir.h) → ModelProto, written with the protobuf-c code
 * generated from the system's onnx.proto. Internal header.
 *
 *     struct ox_export_options o = {.external_data = true};   // weights to "net.onnx.data"
 *     if (ox_onnx_export_file(g, "out/net.onnx", &o) != OX_OK) puts(ox_errmsg());
 *
 * What is written, for the main graph and every subgraph:
 * - the model: IR version, opset imports (plus any domain a node uses that the model does
 *   not import, such as "ai.onnxexec" after optimization), producer name and version,
 *   domain, model version, doc string, metadata_props, in the order the IR keeps them;
 * - graph inputs and outputs with their types (numeric and symbolic dims; sequences, maps
 *   and optionals as the file that was read described them), initializers in value order
 *   (sparse ones back as sparse, as COO with 2-D indices), nodes in topological order with
 *   every attribute kind, and value_info for every node output whose type is known;
 * - tensors as raw_data (little-endian, sub-byte types packed), strings as string_data.
 * Local functions are not written: the importer inlined them, and the graph says the same
 * thing without them.
 *
 * Output is deterministic: the same graph gives the same bytes, and exporting a model that
 * was read back from an exported file gives that file again.
 *
 * External data: with external_data set, every tensor of external_threshold bytes or more
 * (initializers and tensor attributes) goes to one side file next to the model, at offsets
 * aligned to 64 bytes (4096 for tensors of 1 MiB or more, so that each can be mapped on its
 * own), named in the tensor by `location`, `offset` and `length`. A model that would not fit
 * protobuf's 2 GiB limit is written that way even when external_data is not set.
 *
 * Files are written to a temporary name in the destination folder and renamed into place
 * once complete: a failed export leaves no partial file and keeps an older file of that
 * name intact.
 */
#ifndef OX_EXPORTER_ONNX_H
#define OX_EXPORTER_ONNX_H

#include "graph/ir.h"

#define OX_EXPORT_EXTERNAL_THRESHOLD 1024
#define OX_EXPORT_MAX_PROTO          ((size_t)INT32_MAX) /* protobuf's limit on a message */

struct ox_export_options {
    bool external_data;
    size_t external_threshold; /* 0: OX_EXPORT_EXTERNAL_THRESHOLD */
    /* The side file, relative to the model's folder (no '..', not absolute); NULL: the model
     * file's name + ".data". */
    const char *external_name;
};

/* Write g (a main graph) as an ONNX file; `o` may be NULL. Errors: OX_E_INVALID (a value or
 * attribute that ONNX cannot express; the message names the node), OX_E_IO, OX_E_NOMEM. */
ox_status ox_onnx_export_file(const struct ox_graph *g, const char *path,
                              const struct ox_export_options *o);
/* Serialize g into *buf (malloc'd; the caller frees it) of *len bytes. Fails with
 * OX_E_NOMEM when the model is over protobuf's 2 GiB limit (write a file with external
 * data instead). */
ox_status ox_onnx_export_buffer(const struct ox_graph *g, void **buf, size_t *len);

#endif
