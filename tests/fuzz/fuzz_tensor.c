/* Fuzz target: the tensor file readers (docs/FUZZING.md).
 *
 * The input is a tensor file, told apart by its first bytes as the tools do by extension:
 *   "\x93NUMPY"  .npy: ox_tensor_read_npy, and what it reads written back and read again
 *   "PK"         .npz: the reader of `onnxexec compare` (tools/compare.c: the zip directory
 *                read there, members inflated and checked by importer/torchscript/zip.h,
 *                each member through ox_tensor_read_npy). It lives in the tool, not the
 *                library, so this target compiles tools/compare.c in.
 *   otherwise    .pb: ox_tensor_read_pb (and write back, read again), then the same bytes
 *                as a SequenceProto, a MapProto and an OptionalProto (ox_value_read_pb)
 * The readers take paths: the input is written to the scratch folder first (fuzz.h).
 * Seeds: the conformance data's input_*.pb/output_*.pb, .npy and .npz files made with numpy.
 */
#include "fuzz.h"

/* The .npz reader is static in the tool: compile the tool's file into this target. */
#include "tools/compare.c"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fuzz_init();
    return 0;
}

static void npy(const uint8_t *data, size_t size) {
    const char *path = fuzz_file("in.npy", data, size);
    ox_tensor t;
    if (!path || ox_tensor_read_npy(path, &t) != OX_OK) return;
    char out[512];
    fuzz_path(out, sizeof out, "out.npy");
    if (ox_tensor_write_npy(out, &t) == OX_OK) {
        ox_tensor back;
        if (ox_tensor_read_npy(out, &back) == OX_OK) ox_tensor_free_data(&back);
    }
    ox_tensor_free_data(&t);
}

static void npz(const uint8_t *data, size_t size) {
    const char *path = fuzz_file("in.npz", data, size);
    if (!path) return;
    struct vals v = {0};
    (void)read_npz(path, &v);
    vals_free(&v);
}

static void pb(const uint8_t *data, size_t size) {
    const char *path = fuzz_file("in.pb", data, size);
    if (!path) return;
    ox_tensor t;
    char *name = NULL;
    if (ox_tensor_read_pb(path, &t, &name) == OX_OK) {
        char out[512];
        fuzz_path(out, sizeof out, "out.pb");
        if (ox_tensor_write_pb(out, &t, name) == OX_OK) {
            ox_tensor back;
            char *back_name = NULL;
            if (ox_tensor_read_pb(out, &back, &back_name) == OX_OK) {
                ox_tensor_free_data(&back);
                free(back_name);
            }
        }
        ox_tensor_free_data(&t);
        free(name);
    }
    static const ox_io_kind kinds[] = {OX_IO_SEQUENCE, OX_IO_MAP, OX_IO_OPTIONAL};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        ox_tensor v;
        char *vname = NULL;
        if (ox_value_read_pb(path, kinds[k], &v, &vname) != OX_OK) continue;
        ox_tensor_free_data(&v);
        free(vname);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size >= 6 && memcmp(data, "\x93NUMPY", 6) == 0)
        npy(data, size);
    else if (size >= 2 && data[0] == 'P' && data[1] == 'K')
        npz(data, size);
    else
        pb(data, size);
    return 0;
}
