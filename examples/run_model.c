/* run_model: load a model, run it once, print its outputs. A small program that uses
 * libonnxexec through its public header only.
 *
 *     run_model MODEL [INPUT]...
 *
 * MODEL is an ONNX file or a TorchScript archive. Each INPUT is a tensor file, .npy or .pb
 * (an ONNX TensorProto, as in the backend-test layout's input_0.pb), and binds to the
 * model's inputs in order: the first file to the first graph input, and so on. Inputs
 * without a file are filled with ones (symbolic dimensions taken as 1), except those with a
 * default value in the model, which keep it. For each output it prints the name, element
 * type and shape, then the first values:
 *
 *     output 0: logits, float, shape [1, 10]
 *       first 10 of 10: -3.24 1.07 ...
 *
 * OpenBLAS starts threads of its own when it loads, which compete with onnxexec's thread
 * pool; run the program with OPENBLAS_NUM_THREADS=1 (it must be set before the program
 * starts: OpenBLAS reads it while the program loads).
 */
#include <onnxexec.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_SHOWN 10 /* values printed per output */

/* Every fallible onnxexec call returns a status and leaves a message that says what went
 * wrong and where: the file, the node, the value expected and the one found. */
static int fail(const char *what) {
    if (what)
        fprintf(stderr, "run_model: %s: %s\n", what, ox_errmsg());
    else
        fprintf(stderr, "run_model: %s\n", ox_errmsg());
    return 1;
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* Fill `t` with ones, shaped like graph input `desc` (symbolic dimensions become 1). */
static int make_ones(const ox_tensor *desc, ox_tensor *t) {
    if (desc->rank < 0 || desc->dtype == OX_STRING || desc->dtype == OX_UNDEFINED) {
        fprintf(stderr, "run_model: input %s (%s, rank %d): give it a file\n", desc->name,
                ox_dtype_name(desc->dtype), desc->rank);
        return 1;
    }
    memset(t, 0, sizeof *t);
    t->dtype = desc->dtype;
    t->rank = desc->rank;
    for (int d = 0; d < desc->rank; d++) t->dims[d] = desc->dims[d] < 0 ? 1 : desc->dims[d];
    int64_t n = ox_tensor_numel(t);
    t->data = malloc(n > 0 ? (size_t)n * ox_dtype_size(t->dtype) : 1);
    if (!t->data) {
        fprintf(stderr, "run_model: input %s: out of memory\n", desc->name);
        return 1;
    }
    /* ox_tensor_set converts to the tensor's element type (float16, int8, bool, ...). */
    for (int64_t i = 0; i < n; i++) ox_tensor_set(t, i, 1.0);
    return 0;
}

static void print_output(const ox_model *m, int i, const ox_tensor *out) {
    ox_tensor desc;
    ox_model_output(m, i, &desc, NULL); /* for the name; i is in range */
    printf("output %d: %s, ", i, desc.name);
    if (out->kind != OX_IO_TENSOR) {
        /* Sequences and optionals hold n_items tensors in `items`. */
        printf("a %s of %d %s tensor(s)\n", out->kind == OX_IO_SEQUENCE ? "sequence" : "value",
               out->n_items, ox_dtype_name(out->dtype));
        return;
    }
    printf("%s, shape [", ox_dtype_name(out->dtype));
    for (int d = 0; d < out->rank; d++) printf(d ? ", %lld" : "%lld", (long long)out->dims[d]);
    printf("]\n");

    int64_t n = ox_tensor_numel(out);
    int64_t shown = n < N_SHOWN ? n : N_SHOWN;
    printf("  first %lld of %lld:", (long long)shown, (long long)n);
    for (int64_t k = 0; k < shown; k++) {
        if (out->dtype == OX_STRING)
            printf(" \"%s\"", ((char *const *)out->data)[k]);
        else
            printf(" %.9g", ox_tensor_get(out, k)); /* any real type, as a double */
    }
    printf("\n");
}

int main(int argc, char **argv) {
    if (argc < 2 || argv[1][0] == '-') {
        fprintf(stderr,
                "usage: run_model MODEL [INPUT.npy|INPUT.pb]...\n"
                "Runs MODEL once (libonnxexec %s) and prints its outputs.\n",
                ox_version());
        return 2;
    }
    const char *path = argv[1];
    int n_files = argc - 2;
    int status = 1;

    /* The model: parsed, checked and optimized once; sessions borrow it. */
    ox_model *m = NULL;
    if (ox_model_load(path, &m) != OX_OK) return fail(NULL); /* the message names the file */

    int n_in = ox_model_n_inputs(m), n_out = ox_model_n_outputs(m);
    if (n_files > n_in) {
        fprintf(stderr, "run_model: %s has %d input(s), %d file(s) given\n", path, n_in, n_files);
        ox_model_free(m);
        return 1;
    }
    ox_tensor *inputs = calloc((size_t)n_in + 1, sizeof *inputs);
    const ox_tensor **outputs = calloc((size_t)n_out + 1, sizeof *outputs);
    ox_session *s = NULL;
    int n_bound = 0; /* inputs[0..n_bound) are filled and own their data */
    if (!inputs || !outputs) {
        fprintf(stderr, "run_model: out of memory\n");
        goto done;
    }

    for (int k = 0; k < n_in; k++) {
        ox_tensor desc;
        if (ox_model_input(m, k, &desc, NULL) != OX_OK) {
            fail("ox_model_input");
            goto done;
        }
        ox_tensor *t = &inputs[n_bound];
        if (k < n_files) {
            /* Tensors read from files own their data (ox_tensor_free_data frees it). */
            const char *file = argv[2 + k];
            ox_status st = ends_with(file, ".npy") ? ox_tensor_read_npy(file, t)
                                                   : ox_tensor_read_pb(file, t, NULL);
            if (st != OX_OK) {
                fail(NULL);
                goto done;
            }
        } else if (ox_model_input_has_default(m, k)) {
            continue; /* an initializer serves as its value */
        } else if (make_ones(&desc, t)) {
            goto done;
        }
        /* Bind by name, so that skipped inputs do not shift the others. The name is
         * borrowed from the model, which outlives the run. */
        t->name = desc.name;
        n_bound++;
    }

    /* A session plans the model for the inputs' shapes (the plan is cached) and owns the
     * outputs: they stay valid until its next run or ox_session_free. NULL options: a thread
     * per core. */
    if (ox_session_create(m, NULL, &s) != OX_OK) {
        fail("ox_session_create");
        goto done;
    }
    if (ox_session_run(s, inputs, n_bound, outputs) != OX_OK) {
        fail(path);
        goto done;
    }
    for (int i = 0; i < n_out; i++) print_output(m, i, outputs[i]);
    status = 0;

done:
    /* Every _free takes NULL. */
    ox_session_free(s);
    for (int k = 0; k < n_bound; k++) ox_tensor_free_data(&inputs[k]);
    free(inputs);
    free(outputs);
    ox_model_free(m);
    return status;
}
