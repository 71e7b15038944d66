/* Fuzz target: the ONNX importer on raw bytes (a ModelProto, docs/FUZZING.md).
 *
 * Each input is loaded as a model from memory (import, Gradient-op expansion, the graph
 * optimizations; the default ox_limits, but 64 MiB per tensor); what loads is described through the
 * API, written back out as ONNX and that file loaded again. Errors are expected; crashes, hangs,
 * leaks and sanitizer reports are findings. Seeds: the model.onnx files of the conformance data.
 */
#include "fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fuzz_init();
    return 0;
}

/* Read every fact the API gives about a model (the describe and lookup paths). */
static void describe(const ox_model *m) {
    for (int i = 0; i < ox_model_n_inputs(m); i++) {
        ox_tensor d;
        const char *names[OX_MAX_RANK];
        if (ox_model_input(m, i, &d, names) == OX_OK) (void)ox_model_input_kind(m, i);
        (void)ox_model_input_has_default(m, i);
    }
    for (int i = 0; i < ox_model_n_outputs(m); i++) {
        ox_tensor d;
        if (ox_model_output(m, i, &d, NULL) == OX_OK) (void)ox_model_output_kind(m, i);
    }
    for (int i = 0; i < ox_model_n_opsets(m); i++) {
        const char *domain;
        int64_t version;
        (void)ox_model_opset(m, i, &domain, &version);
    }
    for (int i = 0; i < ox_model_n_nodes(m); i++) {
        const char *name, *op, *domain;
        (void)ox_model_node(m, i, &name, &op, &domain);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ox_model *m = NULL;
    /* the default limits but one: a tensor may take 64 MiB (the default 16 GiB would let a
     * few bytes ask for gigabytes, which only slows the search) */
    ox_model_options opt = {.limits = {.tensor_bytes = 64 << 20}};
    if (ox_model_load_buffer_with(data, size, NULL, &opt, &m) != OX_OK) return 0;
    describe(m);
    void *buf = NULL;
    size_t len = 0;
    if (ox_model_save_buffer(m, &buf, &len) == OX_OK) {
        ox_model *again = NULL;
        opt.no_optimize = true;
        if (ox_model_load_buffer_with(buf, len, NULL, &opt, &again) == OX_OK) describe(again);
        ox_model_free(again);
        free(buf);
    }
    ox_model_free(m);
    return 0;
}
