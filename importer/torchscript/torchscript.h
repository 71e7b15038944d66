/* The TorchScript importer: a `torch.jit.save` archive (traced or scripted) → IR, without
 * libtorch (SPEC-torchscript.md §3.6 describes the algorithm).
 *
 *     struct ox_ts_input in[1] = {{"x", OX_FLOAT, 4, {1, 3, 224, 224}}};
 *     struct ox_graph *g;
 *     if (ox_ts_import_file("resnet18.pt", in, 1, &g) != OX_OK) puts(ox_errmsg());
 *
 * The archive's `forward` is executed symbolically: scalar, list and string work is done at
 * import time (traced shape arithmetic folds to constants), every tensor operation becomes
 * ONNX nodes (default domain, opset OX_TS_OPSET) whose types and shapes are inferred as
 * they are made, module methods are inlined (node names carry the module path), `if` needs
 * a condition known at import time, loops are unrolled. Parameters, buffers and constants
 * become initializers (views materialized, shared storages read once per view).
 *
 * Input shapes: from `inputs` (by the forward argument's name), else from the archive's
 * traced_inputs.pkl (torch 2.x traced files), else the import fails naming the argument.
 * Errors name the archive, and for code the file and line: "m.pt: code/__torch__.py:12:
 * torch.foo: unknown operator". Bad archives (a torch.save state dict, a lite-interpreter
 * .ptl, a quantized module, the legacy model.json layout) are refused with what they are.
 */
#ifndef OX_IMPORTER_TORCHSCRIPT_H
#define OX_IMPORTER_TORCHSCRIPT_H

#include "graph/ir.h"

#define OX_TS_OPSET          17
#define OX_TS_MAX_CALL_DEPTH 200       /* inlined method calls */
#define OX_TS_MAX_UNROLL     (1 << 20) /* loop iterations in all */

struct ox_ts_input {
    const char *name;
    ox_dtype dtype; /* OX_UNDEFINED: float */
    int rank;
    int64_t dims[OX_MAX_RANK];
};

/* True when the file starts like a zip archive (what TorchScript files are). */
bool ox_ts_is_archive(const void *buf, size_t len);
/* Import a TorchScript archive. *out is owned by the caller (ox_graph_free). */
ox_status ox_ts_import_file(const char *path, const struct ox_ts_input *inputs, int n_inputs,
                            struct ox_graph **out);
/* The same within limits `lim` (NULL: the defaults; zero fields: their defaults), OX_E_LIMIT
 * past one: model bytes (the file, and the sum of its records once inflated: zip bombs fail
 * before anything is inflated), tensor bytes and rank of parameters, buffers and constants,
 * nodes emitted (loops unrolled and methods inlined), nesting of If subgraphs (ifs on values
 * known only at run time), and the length of pickled strings. */
ox_status ox_ts_import_file_with(const char *path, const struct ox_ts_input *inputs, int n_inputs,
                                 const ox_limits *lim, struct ox_graph **out);

#endif
