/* onnxexec — the command-line tool: run a model, check it against ONNX backend test cases,
 * describe it.
 *
 *     onnxexec run model.onnx -i x=input.npy -o out/
 *     onnxexec test /usr/share/libonnx-testdata/data/node
 *     onnxexec info model.onnx
 *
 * A thin client of the public API (include/onnxexec.h): everything it knows about a model
 * comes through that header. Errors print one line `onnxexec: <message>` on stderr and
 * exit non-zero (1 for a failure, 2 for a usage error).
 */
#include "onnxexec.h"
#include "tools/cli.h"
#include "tools/image.h"
#include "tools/inspect.h"

#include "executor/session.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <time.h>

/* ---- messages -------------------------------------------------------------------------- */

/* Copy `s` into buf, replacing line breaks so that a message stays on one line. */
static void one_line(char *buf, size_t len, const char *s) {
    size_t k = 0;
    for (; s && *s && k + 1 < len; s++) buf[k++] = (*s == '\n' || *s == '\r') ? ' ' : *s;
    if (len) buf[k] = 0;
}

/* ---- help ------------------------------------------------------------------------------ */

static const char usage_main[] =
    "usage: onnxexec <command> [options]\n"
    "\n"
    "Run ONNX models on the CPU, check them against test data, describe them.\n"
    "\n"
    "commands:\n"
    "  run MODEL [options]   run a model on given or random inputs, print/save its outputs\n"
    "  test DIR...           run ONNX backend test cases (model.onnx + test_data_set_*)\n"
    "  bench MODEL [options] time a model: load, first run, median/p90, memory\n"
    "  info MODEL            show producer, opsets, inputs, outputs, operators, parameters,\n"
    "                        FLOPs and the memory plan (--json for tools)\n"
    "  graph MODEL -o FILE   draw the graph with shapes on the edges (.svg/.png/.dot)\n"
    "  plan MODEL -o FILE    draw the memory plan: buffers over time (.svg)\n"
    "  convert IN OUT        write a model (ONNX or TorchScript) as ONNX: optimized, another\n"
    "                        opset, external data\n"
    "  grad MODEL -o OUT     write the model with its gradient graph (autograd) as ONNX\n"
    "  gradcheck MODEL       check the model's gradients against finite differences\n"
    "  compare MODEL A B     where two executions (cpu, cpu:noopt, a reference folder or\n"
    "                        .npz, another model) part ways: the first divergent node\n"
    "  train MODEL --data DIR  train an image classifier on MNIST-format data (SGD, Adam,\n"
    "                        AdamW) and save the trained model\n"
    "  help [COMMAND]        show this help, or a command's help\n"
    "\n"
    "options:\n"
    "  -h, --help            show help (also after a command: onnxexec run --help)\n"
    "  --version             show the version\n"
    "\n"
    "examples:\n"
    "  onnxexec info resnet50.onnx\n"
    "  onnxexec run resnet50.onnx -i data=img.npy -o out/\n"
    "  onnxexec test /usr/share/libonnx-testdata/data/node\n";

static const char usage_bench[] =
    "usage: onnxexec bench MODEL [-i [NAME=]FILE]... [--shape NAME=d0,d1,...]...\n"
    "                            [--batch N] [--threads N] [--runs N] [--json]\n"
    "                            [--warmup N] [--profile] [--no-optimize]\n"
    "                            [--batch-split auto|on|off] [--device D] [--precision P]\n"
    "\n"
    "Time MODEL: model load, session creation, the first run (which plans), then N more\n"
    "runs (median, p90, min), the peak resident memory of the process, and the memory\n"
    "plan (arena bytes, the sum of all intermediates without reuse, and the lower bound:\n"
    "the most bytes alive at once). Inputs as for `run` (random when not given).\n"
    "\n"
    "options:\n"
    "  --batch N             the first dimension of inputs whose first dimension is not\n"
    "                        fixed (default 1)\n"
    "  --threads N           threads for the CPU kernels (default: number of cores)\n"
    "  --no-optimize         run the graph as the file has it (no BatchNormalization\n"
    "                        folding, no fused Conv/Gemm/MatMul; for comparisons)\n"
    "  --runs N              timed runs after the first (default 20)\n"
    "  --warmup N            untimed runs between the first and the timed ones (default 0)\n"
    "  --batch-split S       run a batch one item at a time, the threads taking items side\n"
    "                        by side, where the model keeps items apart (CNNs with a\n"
    "                        dynamic batch axis): auto (default: where it pays, see the\n"
    "                        README), on (whenever the model allows it), off\n"
    "  --device D            cpu (default), cuda or cuda:N (a GPU; see `run --help`)\n"
    "  --precision P         on a GPU: fp32 (default), tf32, fp16 or bf16 (`run --help`)\n"
    "  --json                one JSON object on stdout instead of the table\n"
    "  --profile             also time every node of the timed runs: the time per op\n"
    "                        type and the slowest nodes (with --json: every node)\n"
    "  -i, --shape, --seed, --preprocess  as for `run`\n"
    "\n"
    "example:\n"
    "  onnxexec bench resnet18.onnx --batch 8 --threads 2 --runs 50\n";

static const char usage_run[] =
    "usage: onnxexec run MODEL [-i [NAME=]FILE]... [-o DIR] [--format npy|pb|both]\n"
    "                          [--seed N] [--shape NAME=d0,d1,...]... [--threads N]\n"
    "                          [--repeat N] [--labels FILE] [--truth FILE]\n"
    "                          [--no-optimize] [--batch-split auto|on|off]\n"
    "                          [--device D] [--precision P]\n"
    "\n"
    "Run MODEL once and print, per output: name, dtype, shape, the first values and\n"
    "min/max/mean; then the run time.\n"
    "\n"
    "options:\n"
    "  -i, --input [NAME=]FILE  an input from a .npy file, a .pb file (ONNX TensorProto) or\n"
    "                        an image (.png, .jpg), chosen by the file's extension. With\n"
    "                        NAME= it binds to the graph input NAME; without, the k-th such\n"
    "                        option binds to the k-th graph input not named by another -i.\n"
    "                        A map, sequence or optional input is a .pb file holding a\n"
    "                        MapProto, SequenceProto or OptionalProto.\n"
    "  --preprocess P        how an image becomes a float tensor in the input's layout\n"
    "                        ([1,C,H,W], [C,H,W] or [1,H,W,C]; C 3, or 1 for grey):\n"
    "                        imagenet (shorter side resized to 256, centre crop 224, or the\n"
    "                        input's fixed H and W scaled by 256/224 first; / 255; ImageNet\n"
    "                        mean and std), scale (/ 255), none (0..255). With scale and\n"
    "                        none the image is resized to the input's fixed H and W.\n"
    "                        Default: imagenet for 3 channels, scale for 1.\n"
    "  -o, --output DIR      write each output to DIR/<name>.npy (created if missing); names\n"
    "                        are made safe for file names (characters other than letters,\n"
    "                        digits, '.', '-', '_' become '_').\n"
    "  --format F            file format for -o: npy (default), pb (TensorProto), or both.\n"
    "  --seed N              seed for random inputs (default 0).\n"
    "  --shape NAME=d0,d1,.. shape of a random input NAME, or, with one number, the value\n"
    "                        of the symbolic dimension NAME (e.g. --shape batch=8).\n"
    "                        Symbolic dimensions left unset are 1 (a note says so).\n"
    "  --threads N           threads for the CPU kernels (default: number of cores).\n"
    "  --no-optimize         run the graph as the file has it (no BatchNormalization\n"
    "                        folding, no fused Conv/Gemm/MatMul; for comparisons)\n"
    "  --batch-split S       auto (default), on or off: as for `bench`.\n"
    "  --device D            where the model runs: cpu (default), cuda (the first GPU) or\n"
    "                        cuda:N. The graph is optimized for it (on a GPU a QDQ model's\n"
    "                        convolutions, sums and max pools stay float operators, not\n"
    "                        the CPU's 8-bit ones); nodes without a GPU kernel run on the\n"
    "                        CPU with their data copied (bench says how many).\n"
    "  --precision P         on a GPU: fp32 (default: float32 throughout, TF32 off),\n"
    "                        tf32 (TF32 tensor-core products in Conv, Gemm and MatMul),\n"
    "                        fp16 (float32 values float16 on the GPU, products summed in\n"
    "                        float32; inputs and outputs stay float32) or bf16 (bfloat16\n"
    "                        likewise).\n"
    "  --repeat N            run N times and report the fastest and mean time (default 1).\n"
    "  --labels FILE         treat the first output as class scores [batch, classes]: print\n"
    "                        the top class of the first rows, named by FILE's lines.\n"
    "  --truth FILE          true class indices (.npy/.pb, one per row): print the accuracy.\n"
    "\n"
    "Inputs not given get random values of their declared dtype and shape: floats uniform\n"
    "in [-1,1), integers in [0,10), booleans 0/1, strings \"0\"..\"9\". Inputs with an\n"
    "initializer keep it when not given.\n"
    "\n"
    "example:\n"
    "  onnxexec run model.onnx -i input=x.npy --shape batch=4 -o out/ --format both\n";

static const char usage_test[] =
    "usage: onnxexec test DIR... [--rtol R] [--atol A] [--rel-l2 E] [--threads N]\n"
    "                            [--no-optimize]\n"
    "                            [--device D] [--precision P]\n"
    "                            [--roundtrip] [--export-dir DIR] [-v]\n"
    "\n"
    "Run ONNX backend test cases. A case is a folder with model.onnx and\n"
    "test_data_set_*/input_N.pb, output_N.pb; a DIR that holds case folders (like\n"
    ".../data/node) stands for all of them, sorted by name.\n"
    "\n"
    "Inputs bind by position (or by the tensors' names when they all name graph inputs).\n"
    "Each output must have the expected dtype and shape, and values that agree:\n"
    "|actual - expected| <= atol + rtol * |expected| for floating point (NaN equals NaN),\n"
    "exactly for integers, booleans and strings. With --rel-l2 E a floating-point output\n"
    "is judged as a whole instead: ||actual - expected|| / ||expected|| <= E (the norms\n"
    "over its finite elements; NaN and infinities must still match place by place).\n"
    "A FAIL of a floating-point output states its relative L2 error either way.\n"
    "\n"
    "Prints one line per case, `PASS <case>`, `FAIL <case>: <reason>`, or\n"
    "`SKIP <case>: <reason>` (cases with sequence, map or optional inputs or outputs, which\n"
    "the library's API cannot carry yet), then `N passed, N failed, N skipped`.\n"
    "Exits 1 if a case failed.\n"
    "\n"
    "options:\n"
    "  --rtol R              relative tolerance (default 1e-3)\n"
    "  --atol A              absolute tolerance (default 1e-7)\n"
    "  --rel-l2 E            judge floating-point outputs by their relative L2 error (for\n"
    "                        whole models: elements near zero differ by more than rtol\n"
    "                        wherever sums are ordered differently; 1e-4 is a fair bar\n"
    "                        in float32, 1e-2 in float16)\n"
    "  --threads N           threads for the CPU kernels (default: number of cores)\n"
    "  --device D            run the cases on cpu (default), cuda or cuda:N; with -v, each\n"
    "                        case says which of its nodes ran on the CPU instead\n"
    "  --precision P         on a GPU: fp32 (default), tf32, fp16 or bf16 (`run --help`)\n"
    "  --no-optimize         run the graph as the file has it (no BatchNormalization\n"
    "                        folding, no fused Conv/Gemm/MatMul; for comparisons)\n"
    "  --roundtrip           also write each model back out as ONNX (as loaded: optimized\n"
    "                        unless --no-optimize), load that, and require the same\n"
    "                        outputs bit for bit, and the same bytes when the reloaded\n"
    "                        model is written again\n"
    "  --export-dir DIR      with --roundtrip: keep each written model as DIR/CASE.onnx\n"
    "  -v, --verbose         show each data set's time and every mismatching output\n"
    "\n"
    "example:\n"
    "  onnxexec test /usr/share/libonnx-testdata/data/node/test_relu -v\n";

static const char usage_info[] =
    "usage: onnxexec info MODEL [--json] [--shape NAME=d0,d1,...]... [--batch N]\n"
    "                     [-i [NAME=]FILE]... [--no-optimize] [--device D]\n"
    "                     [--limit NAME=VALUE]...\n"
    "\n"
    "Describe MODEL: producer, IR version, opset imports, inputs and outputs with dtypes\n"
    "and shapes (symbolic dimensions by name, '?' when unknown), node count and a histogram\n"
    "of operators (after the graph optimizations), parameters (the initializers: elements\n"
    "and bytes). Then, from the model planned for concrete input shapes and run once on\n"
    "random inputs: FLOPs (2 x the multiply-adds of Conv, ConvTranspose, Gemm and MatMul,\n"
    "their integer and quantized forms included) and the memory plan's three numbers\n"
    "(arena bytes, bytes without reuse, and the lower bound: the most bytes alive at one\n"
    "step).\n"
    "\n"
    "options:\n"
    "  --json                one JSON object on stdout, for tools\n"
    "  --shape NAME=d0,d1,... plan input NAME with this shape; --shape SYM=N sets a\n"
    "                        symbolic dimension; other free dimensions are 1 (a note says so)\n"
    "  --batch N             the first dimension of inputs where it is not fixed\n"
    "  -i [NAME=]FILE        plan for the shape of this .npy/.pb input or image (as for\n"
    "                        run, with --preprocess)\n"
    "  --seed N              seed of the random inputs (default 0)\n"
    "  --threads N           threads of the one run (default: the number of cores)\n"
    "  --no-optimize         describe the graph as the file has it\n"
    "  --device D            the graph as optimized for D: cpu (default), cuda, cuda:N\n"
    "                        (on a GPU a QDQ model's convolutions, sums and max pools stay\n"
    "                        float operators); the planning run stays on the CPU\n"
    "\n"
    "examples:\n"
    "  onnxexec info resnet50.onnx --batch 8\n"
    "  onnxexec info bert.onnx --shape batch=1 --shape seq=128 --json\n";

static const char usage_graph[] =
    "usage: onnxexec graph MODEL -o FILE.svg|png|pdf|dot [--shape NAME=d0,d1,...]...\n"
    "                      [--batch N] [-i [NAME=]FILE]... [--no-optimize] [--device D]\n"
    "\n"
    "Draw MODEL's graph: a box per node (op and name, with the shapes and parameter count\n"
    "of its weights: initializers are not drawn as nodes), the graph's inputs and outputs,\n"
    "and an edge per value read, labelled with its dtype and shape as planned for the given\n"
    "input shapes (the declared ones when the model cannot be planned). Written as DOT\n"
    "and rendered by Graphviz's dot (Debian package graphviz) for .svg, .png and .pdf;\n"
    "without Graphviz, FILE.dot is written instead and a note says how to draw it.\n"
    "\n"
    "options:\n"
    "  -o FILE               the picture (.svg, .png, .pdf) or the DOT text (.dot)\n"
    "  --shape NAME=d0,d1,... input shapes for the edge labels (as for info)\n"
    "  --batch N             the first dimension of inputs where it is not fixed\n"
    "  -i [NAME=]FILE        take an input's shape from this .npy/.pb file\n"
    "  --seed N              seed of the random inputs of the planning run\n"
    "  --threads N           threads of the planning run\n"
    "  --no-optimize         the graph as the file has it (else after the optimizations)\n"
    "  --device D            after the optimizations for D (as for info)\n"
    "\n"
    "example:\n"
    "  onnxexec graph resnet18.onnx -o resnet18.svg --batch 1\n";

static const char usage_plan[] =
    "usage: onnxexec plan MODEL -o FILE.svg [--shape NAME=d0,d1,...]... [--batch N]\n"
    "                     [-i [NAME=]FILE]... [--no-optimize] [--device D]\n"
    "\n"
    "Draw MODEL's memory plan for the given input shapes as SVG: the schedule's steps\n"
    "across, arena offsets down, one rectangle per value held in the arena, spanning the\n"
    "steps it is alive at the offset the planner gave it (hover it for its name, type,\n"
    "size and producer). The title gives the plan's three numbers: arena bytes, bytes\n"
    "without reuse, lower bound.\n"
    "\n"
    "options:\n"
    "  -o FILE.svg           the picture\n"
    "  --shape NAME=d0,d1,... input shapes (as for info)\n"
    "  --batch N             the first dimension of inputs where it is not fixed\n"
    "  -i [NAME=]FILE        take an input's shape from this .npy/.pb file\n"
    "  --seed N              seed of the random inputs of the planning run\n"
    "  --threads N           threads of the planning run\n"
    "  --no-optimize         plan the graph as the file has it\n"
    "  --device D            plan the graph as optimized for D (as for info)\n"
    "\n"
    "example:\n"
    "  onnxexec plan resnet18.onnx -o plan.svg --batch 8\n";

/* ---- numbers --------------------------------------------------------------------------- */

static bool parse_int(const char *s, int lo, int hi, int *out) {
    int64_t v;
    if (!cli_parse_i64(s, &v) || v < lo || v > hi) return false;
    *out = (int)v;
    return true;
}

static bool parse_double(const char *s, double *out) {
    if (!s || !*s) return false;
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (errno || *end || end == s || !(v >= 0) || isinf(v)) return false;
    *out = v;
    return true;
}

/* ---- element types --------------------------------------------------------------------- */

typedef enum { C_FLOAT, C_INT, C_UINT, C_BOOL, C_COMPLEX, C_STRING, C_OTHER } elem_class;

static elem_class class_of(ox_dtype dt) {
    switch (dt) {
    case OX_FLOAT:
    case OX_DOUBLE:
    case OX_FLOAT16:
    case OX_BFLOAT16:
    case OX_FLOAT8E4M3FN:
    case OX_FLOAT8E4M3FNUZ:
    case OX_FLOAT8E5M2:
    case OX_FLOAT8E5M2FNUZ:
    case OX_FLOAT4E2M1:
    case OX_FLOAT8E8M0: return C_FLOAT;
    case OX_INT8:
    case OX_INT16:
    case OX_INT32:
    case OX_INT64:
    case OX_INT4:
    case OX_INT2: return C_INT;
    case OX_UINT8:
    case OX_UINT16:
    case OX_UINT32:
    case OX_UINT64:
    case OX_UINT4:
    case OX_UINT2: return C_UINT;
    case OX_BOOL: return C_BOOL;
    case OX_COMPLEX64:
    case OX_COMPLEX128: return C_COMPLEX;
    case OX_STRING: return C_STRING;
    default: return C_OTHER;
    }
}

/* Element i of a C_FLOAT tensor, or part `part` (0 real, 1 imaginary) of a complex one. */
static double get_f(const ox_tensor *t, int64_t i, int part) {
    const unsigned char *p = t->data;
    switch (t->dtype) {
    case OX_COMPLEX64: return ((const float *)p)[2 * i + part];
    case OX_COMPLEX128: return ((const double *)p)[2 * i + part];
    default: return ox_tensor_get(t, i);
    }
}

static int64_t get_i(const ox_tensor *t, int64_t i) {
    switch (t->dtype) {
    case OX_INT8:
    case OX_INT4:
    case OX_INT2: return ((const int8_t *)t->data)[i];
    case OX_INT16: return ((const int16_t *)t->data)[i];
    case OX_INT32: return ((const int32_t *)t->data)[i];
    case OX_INT64: return ((const int64_t *)t->data)[i];
    default: return 0;
    }
}

static uint64_t get_u(const ox_tensor *t, int64_t i) {
    switch (t->dtype) {
    case OX_UINT8:
    case OX_UINT4:
    case OX_UINT2:
    case OX_BOOL: return ((const uint8_t *)t->data)[i];
    case OX_UINT16: return ((const uint16_t *)t->data)[i];
    case OX_UINT32: return ((const uint32_t *)t->data)[i];
    case OX_UINT64: return ((const uint64_t *)t->data)[i];
    default: return 0;
    }
}

static const char *get_s(const ox_tensor *t, int64_t i) {
    const char *s = ((char *const *)t->data)[i];
    return s ? s : "";
}

/* Element i as text. */
static void fmt_elem(const ox_tensor *t, int64_t i, char *buf, size_t len) {
    switch (class_of(t->dtype)) {
    case C_FLOAT:
        snprintf(buf, len, t->dtype == OX_DOUBLE ? "%.15g" : "%.7g", get_f(t, i, 0));
        break;
    case C_COMPLEX: {
        const char *f = t->dtype == OX_COMPLEX128 ? "%.15g%+.15gj" : "%.7g%+.7gj";
        snprintf(buf, len, f, get_f(t, i, 0), get_f(t, i, 1));
        break;
    }
    case C_INT: snprintf(buf, len, "%" PRId64, get_i(t, i)); break;
    case C_UINT: snprintf(buf, len, "%" PRIu64, get_u(t, i)); break;
    case C_BOOL: snprintf(buf, len, "%s", get_u(t, i) ? "true" : "false"); break;
    case C_STRING: {
        /* quoted, cut at 40 bytes, control bytes as '?' */
        const char *s = get_s(t, i);
        size_t k = 0;
        if (len < 8) {
            if (len) buf[0] = 0;
            break;
        }
        buf[k++] = '"';
        for (size_t j = 0; s[j] && k + 5 < len; j++) {
            if (j == 40) {
                memcpy(buf + k, "...", 3);
                k += 3;
                break;
            }
            buf[k++] = (unsigned char)s[j] < 0x20 ? '?' : s[j];
        }
        buf[k++] = '"';
        buf[k] = 0;
        break;
    }
    default: snprintf(buf, len, "?"); break;
    }
}

/* "[2,3,4]" into buf; dims of -1 print as their symbol (when given) or '?'. */
static void fmt_dims(const int64_t *dims, int rank, const char **names, char *buf, size_t len) {
    size_t k = 0;
    k += (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < rank && k < len; i++) {
        const char *sep = i ? "," : "";
        if (dims[i] < 0)
            k += (size_t)snprintf(buf + k, len - k, "%s%s", sep,
                                  names && names[i] && *names[i] ? names[i] : "?");
        else
            k += (size_t)snprintf(buf + k, len - k, "%s%" PRId64, sep, dims[i]);
    }
    if (k < len) snprintf(buf + k, len - k, "]");
}

/* "float[2,3]" */
static void fmt_type(const ox_tensor *t, const char **names, char *buf, size_t len) {
    if (t->rank < 0) {
        snprintf(buf, len, "%s[...]", ox_dtype_name(t->dtype));
        return;
    }
    char dims[512];
    fmt_dims(t->dims, t->rank, names, dims, sizeof dims);
    snprintf(buf, len, "%s%s", ox_dtype_name(t->dtype), dims);
}

/* Flat index → "[i,j,k]". */
static void fmt_index(const ox_tensor *t, int64_t flat, char *buf, size_t len) {
    int64_t idx[OX_MAX_RANK];
    for (int d = t->rank - 1; d >= 0; d--) {
        int64_t n = t->dims[d] > 0 ? t->dims[d] : 1;
        idx[d] = flat % n;
        flat /= n;
    }
    fmt_dims(idx, t->rank < 0 ? 0 : t->rank, NULL, buf, len);
}

/* Whether a tensor from the library or a file is safe to read: rank and dims in range,
 * data present when there are elements. */
static bool tensor_ok(const ox_tensor *t) {
    if (!t || t->rank < 0 || t->rank > OX_MAX_RANK) return false;
    for (int d = 0; d < t->rank; d++)
        if (t->dims[d] < 0) return false;
    return ox_tensor_numel(t) == 0 || t->data != NULL;
}

/* ---- random inputs --------------------------------------------------------------------- */

static uint64_t rng_next(uint64_t *s) {
    /* splitmix64 */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [-1, 1). */
static double rng_unit(uint64_t *s) {
    return (double)(rng_next(s) >> 11) * 0x1.0p-52 - 1.0;
}

/* The code of a small float type nearest to v (searching all codes). */
static uint8_t nearest_small(ox_dtype dt, double v) {
    int n = dt == OX_FLOAT4E2M1 ? 16 : 256, best = 0;
    double best_err = INFINITY;
    for (int c = 0; c < n; c++) {
        uint8_t code = (uint8_t)c;
        ox_tensor one = {.dtype = dt, .rank = 0, .data = &code};
        double x = ox_tensor_get(&one, 0);
        if (isnan(x)) continue;
        double err = fabs(x - v);
        if (err < best_err) best_err = err, best = c;
    }
    return (uint8_t)best;
}

/* Allocate t (dtype and dims already set) and fill it with random values. */
static int fill_random(ox_tensor *t, uint64_t *rng) {
    int64_t n = ox_tensor_numel(t);
    size_t es = ox_dtype_size(t->dtype);
    if (class_of(t->dtype) == C_OTHER || es == 0)
        return cli_errorf(EXIT_FAIL, "input '%s': cannot make random values of type %s", t->name,
                          ox_dtype_name(t->dtype));
    if (n < 0 || (n > 0 && (uint64_t)n > (SIZE_MAX / 2) / es))
        return cli_errorf(EXIT_FAIL, "input '%s': too large", t->name);
    t->data = calloc((size_t)(n ? n : 1), es);
    if (!t->data)
        return cli_errorf(EXIT_FAIL, "input '%s': out of memory (%" PRId64 " elements)", t->name,
                          n);
    uint8_t small[256];
    bool have_small = false;
    if (t->dtype == OX_FLOAT8E4M3FN || t->dtype == OX_FLOAT8E4M3FNUZ || t->dtype == OX_FLOAT8E5M2 ||
        t->dtype == OX_FLOAT8E5M2FNUZ || t->dtype == OX_FLOAT8E8M0 || t->dtype == OX_FLOAT4E2M1) {
        /* a table of the codes nearest to 256 values spread over [-1, 1) */
        for (int k = 0; k < 256; k++) small[k] = nearest_small(t->dtype, (k - 128) / 128.0);
        have_small = true;
    }
    for (int64_t i = 0; i < n; i++) {
        double u = rng_unit(rng);
        uint64_t r = rng_next(rng);
        switch (t->dtype) {
        case OX_FLOAT: ((float *)t->data)[i] = (float)u; break;
        case OX_DOUBLE: ((double *)t->data)[i] = u; break;
        case OX_FLOAT16:
        case OX_BFLOAT16: ox_tensor_set(t, i, (float)u); break;
        case OX_COMPLEX64:
            ((float *)t->data)[2 * i] = (float)u;
            ((float *)t->data)[2 * i + 1] = (float)rng_unit(rng);
            break;
        case OX_COMPLEX128:
            ((double *)t->data)[2 * i] = u;
            ((double *)t->data)[2 * i + 1] = rng_unit(rng);
            break;
        case OX_INT8:
        case OX_UINT8:
        case OX_INT4:
        case OX_UINT4:
        case OX_INT2:
        case OX_UINT2:
            ((uint8_t *)t->data)[i] = (uint8_t)(r % (t->dtype >= OX_UINT2 ? 4 : 10));
            break;
        case OX_INT16:
        case OX_UINT16: ((uint16_t *)t->data)[i] = (uint16_t)(r % 10); break;
        case OX_INT32:
        case OX_UINT32: ((uint32_t *)t->data)[i] = (uint32_t)(r % 10); break;
        case OX_INT64:
        case OX_UINT64: ((uint64_t *)t->data)[i] = r % 10; break;
        case OX_BOOL: ((uint8_t *)t->data)[i] = (uint8_t)(r & 1); break;
        case OX_STRING: {
            char *s = malloc(2);
            if (!s) {
                ox_tensor_free_data(t);
                return cli_errorf(EXIT_FAIL, "out of memory");
            }
            s[0] = (char)('0' + r % 10), s[1] = 0;
            ((char **)t->data)[i] = s;
            break;
        }
        default:
            if (have_small) ((uint8_t *)t->data)[i] = small[(int)((u + 1.0) * 128) & 255];
            break;
        }
    }
    return 0;
}

/* ---- files ----------------------------------------------------------------------------- */

/* mkdir -p */
static int make_dirs(const char *path) {
    char buf[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof buf) return cli_errorf(EXIT_FAIL, "%s: bad output folder name", path);
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] != '/' && buf[i] != 0) continue;
        char c = buf[i];
        buf[i] = 0;
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return cli_errorf(EXIT_FAIL, "%s: cannot create folder: %s", buf, strerror(errno));
        buf[i] = c;
    }
    if (!cli_is_dir(path)) return cli_errorf(EXIT_FAIL, "%s: not a folder", path);
    return 0;
}

/* Read a tensor from .npy or .pb (by extension). *name gets the .pb tensor's name (malloc'd,
 * may be NULL). Returns a status; the message is the library's. */
/* --preprocess for image inputs; -1: not given (imagenet for 3 channels, scale for 1) */
static int image_pp = -1;

/* An image file as an input of `rank` dims `want` (-1 where free; rank < 0: unknown). */
static int read_image(const char *path, int rank, const int64_t *want, ox_tensor *t, char *err,
                      size_t errlen) {
    int pp = image_pp;
    bool grey = rank == 4 && (want[1] == 1 || (want[3] == 1 && want[1] != 3));
    grey = grey || (rank == 3 && want[0] == 1);
    if (pp < 0) pp = grey ? IMAGE_SCALE : IMAGE_IMAGENET;
    if (image_read(path, (enum image_preprocess)pp, rank, want, t, err, errlen)) return -1;
    if (image_pp < 0)
        fprintf(
            stderr, "note: %s: %s (--preprocess %s); --preprocess imagenet|scale|none to choose\n",
            path, grey ? "pixels / 255" : "resized to 256, centre crop, / 255, ImageNet mean/std",
            grey ? "scale" : "imagenet");
    return 0;
}

static int read_tensor(const char *path, ox_tensor *t, char **name, char *err, size_t errlen) {
    ox_status st;
    memset(t, 0, sizeof *t);
    if (name) *name = NULL;
    if (cli_has_ext(path, ".npy")) {
        st = ox_tensor_read_npy(path, t);
    } else if (cli_has_ext(path, ".pb")) {
        char *nm = NULL;
        st = ox_tensor_read_pb(path, t, &nm);
        if (name)
            *name = nm;
        else
            free(nm);
    } else if (image_is_file(path)) {
        return read_image(path, -1, NULL, t, err, errlen);
    } else {
        snprintf(err, errlen, "%s: unknown tensor file type (expected .npy, .pb, .png or .jpg)",
                 path);
        return -1;
    }
    if (st != OX_OK) {
        char m[1024];
        one_line(m, sizeof m, cli_lib_msg(st));
        /* name the file unless the library already did */
        if (strstr(m, path))
            snprintf(err, errlen, "%s", m);
        else
            snprintf(err, errlen, "%s: %s", path, m);
        memset(t, 0, sizeof *t);
        if (name) free(*name), *name = NULL;
        return -1;
    }
    if (!tensor_ok(t)) {
        snprintf(err, errlen, "%s: the library returned a malformed tensor", path);
        ox_tensor_free_data(t);
        if (name) free(*name), *name = NULL;
        return -1;
    }
    return 0;
}

/* A name made safe for a file name: [A-Za-z0-9._-], no leading '.', at most 200 bytes. */
static void safe_name(const char *name, int index, char *buf, size_t len) {
    size_t k = 0;
    for (const char *p = name ? name : ""; *p && k + 1 < len && k < 200; p++) {
        unsigned char c = (unsigned char)*p;
        bool ok = isalnum(c) || c == '.' || c == '-' || c == '_';
        if (k == 0 && c == '.') ok = false;
        buf[k] = ok ? (char)c : '_';
        k++;
    }
    buf[k] = 0;
    if (k == 0) snprintf(buf, len, "output_%d", index);
}

/* --no-optimize, taken out of the arguments of run, test and bench by main */
static ox_model_options model_opts;

static int load_model(const char *path, ox_model **m) {
    if (!cli_is_file(path)) {
        if (cli_is_dir(path))
            return cli_errorf(EXIT_FAIL, "%s: is a folder, not a model file", path);
        return cli_errorf(EXIT_FAIL, "%s: %s", path, strerror(errno ? errno : ENOENT));
    }
    ox_status st = ox_model_load_with(path, &model_opts, m);
    if (st != OX_OK) {
        const char *msg = cli_lib_msg(st);
        if (strstr(msg, path)) return cli_errorf(EXIT_FAIL, "%s", msg);
        return cli_errorf(EXIT_FAIL, "%s: %s", path, msg);
    }
    return 0;
}

static const char *kind_name(ox_io_kind k) {
    switch (k) {
    case OX_IO_TENSOR: return "tensor";
    case OX_IO_SEQUENCE: return "sequence";
    case OX_IO_MAP: return "map";
    case OX_IO_OPTIONAL: return "optional";
    case OX_IO_SPARSE: return "sparse tensor";
    default: return "value of unknown type";
    }
}

/* ---- run ------------------------------------------------------------------------------- */

struct shape_opt {
    const char *name;
    int rank;
    int64_t dims[OX_MAX_RANK];
    bool used;
};

static int parse_shape_opt(const char *arg, struct shape_opt *o) {
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg)
        return cli_errorf(
            EXIT_USAGE, "--shape '%s': expected NAME=d0,d1,... (e.g. --shape x=1,3,224,224)", arg);
    memset(o, 0, sizeof *o);
    size_t nl = (size_t)(eq - arg);
    char *name = malloc(nl + 1);
    if (!name) return cli_errorf(EXIT_FAIL, "out of memory");
    memcpy(name, arg, nl);
    name[nl] = 0;
    o->name = name;
    const char *p = eq + 1;
    while (*p) {
        if (o->rank == OX_MAX_RANK)
            return cli_errorf(EXIT_USAGE, "--shape '%s': more than %d dimensions", arg,
                              OX_MAX_RANK);
        char num[32];
        size_t k = 0;
        while (*p && *p != ',' && k + 1 < sizeof num) num[k++] = *p++;
        num[k] = 0;
        int64_t v;
        if (!cli_parse_i64(num, &v) || v < 0 || (*p && *p != ','))
            return cli_errorf(EXIT_USAGE, "--shape '%s': '%s' is not a dimension (a number >= 0)",
                              arg, num);
        o->dims[o->rank++] = v;
        if (*p == ',') {
            p++;
            if (!*p) return cli_errorf(EXIT_USAGE, "--shape '%s': trailing ','", arg);
        }
    }
    return 0;
}

struct input_opt {
    const char *arg;
    const char *name; /* NULL: positional */
    const char *file;
};

static void print_tensor_summary(const char *name, const ox_tensor *t) {
    char type[600];
    fmt_type(t, NULL, type, sizeof type);
    printf("%s: %s", name, type);
    if (!tensor_ok(t)) {
        printf(" (no data)\n");
        return;
    }
    int64_t n = ox_tensor_numel(t);
    elem_class c = class_of(t->dtype);
    if (c == C_OTHER) {
        printf("\n");
        return;
    }
    printf(" = [");
    int64_t shown = n < 8 ? n : 8;
    for (int64_t i = 0; i < shown; i++) {
        char v[128];
        fmt_elem(t, i, v, sizeof v);
        printf("%s%s", i ? ", " : "", v);
    }
    printf("%s]", n > shown ? ", ..." : "");
    if ((c == C_FLOAT || c == C_INT || c == C_UINT) && n > 0) {
        double lo = INFINITY, hi = -INFINITY, sum = 0;
        int64_t n_nan = 0, n_num = 0;
        for (int64_t i = 0; i < n; i++) {
            double v = c == C_FLOAT ? get_f(t, i, 0)
                       : c == C_INT ? (double)get_i(t, i)
                                    : (double)get_u(t, i);
            if (isnan(v)) {
                n_nan++;
                continue;
            }
            if (v < lo) lo = v;
            if (v > hi) hi = v;
            sum += v;
            n_num++;
        }
        if (c == C_FLOAT) {
            if (n_num) printf("  min %.6g max %.6g mean %.6g", lo, hi, sum / (double)n_num);
            if (n_nan) printf("  (%" PRId64 " NaN)", n_nan);
        } else {
            printf("  min %.0f max %.0f", lo, hi);
        }
    }
    printf("\n");
}

/* Sequences, maps and optionals: their kind and size, then their first items (a map's keys
 * and values side by side), nested ones indented. */
static void print_value_summary(const char *name, const ox_tensor *t, int depth) {
    if (t->kind == OX_IO_TENSOR) {
        printf("%*s", 2 * depth, "");
        print_tensor_summary(name, t);
        return;
    }
    printf("%*s%s: %s", 2 * depth, "", name, kind_name(t->kind));
    if (t->kind == OX_IO_MAP && t->n_items == 2 && tensor_ok(&t->items[0]) &&
        tensor_ok(&t->items[1])) {
        int64_t n = ox_tensor_numel(&t->items[0]), shown = n < 8 ? n : 8;
        printf(" of %" PRId64 " entries {", n);
        for (int64_t i = 0; i < shown; i++) {
            char k[128], v[128];
            fmt_elem(&t->items[0], i, k, sizeof k);
            fmt_elem(&t->items[1], i, v, sizeof v);
            printf("%s%s: %s", i ? ", " : "", k, v);
        }
        printf("%s}\n", n > shown ? ", ..." : "");
        return;
    }
    printf(" of %d item%s\n", t->n_items, t->n_items == 1 ? "" : "s");
    int shown = t->n_items < 4 ? t->n_items : 4;
    for (int i = 0; i < shown; i++) {
        char item[300];
        snprintf(item, sizeof item, "%.280s[%d]", name, i);
        print_value_summary(item, &t->items[i], depth + 1);
    }
    if (t->n_items > shown) printf("%*s...\n", 2 * depth + 2, "");
}

/* Everything cmd_run holds, freed in one place. */
struct run_state {
    struct input_opt *iopts;
    struct shape_opt *sopts;
    int n_iopts, n_sopts;
    ox_model *m;
    ox_session *s;
    int n_in, n_out;
    const char **in_names; /* borrowed from the model */
    int *given;            /* per input: index + 1 of the -i option that gives it, or 0 */
    ox_tensor *ins;        /* per input; owned when has[i] */
    bool *has;
    ox_tensor *pass; /* shallow copies of the inputs passed to the run */
    const ox_tensor **outs;
    char **stems;  /* per output: its file name stem */
    int64_t batch; /* bench --batch: the first dimension where it is not fixed (0: unset) */
    bool quiet;    /* no note for random inputs (info, graph, plan) */
};

static void run_state_free(struct run_state *r) {
    for (int i = 0; r->ins && i < r->n_in; i++)
        if (r->has[i]) ox_tensor_free_data(&r->ins[i]);
    for (int k = 0; r->stems && k < r->n_out; k++) free(r->stems[k]);
    for (int k = 0; k < r->n_sopts; k++) free((void *)r->sopts[k].name);
    free(r->iopts), free(r->sopts), free(r->in_names), free(r->given), free(r->ins);
    free(r->has), free(r->pass), free(r->outs), free(r->stems);
    ox_session_free(r->s);
    ox_model_free(r->m);
}

/* Bind the -i options to graph inputs: NAME=FILE when NAME is a graph input, else by
 * position among the inputs that no NAME= option names. */
/* For a TorchScript archive: the input shapes its import needs, from the -i files
 * (NAME=FILE, or by position) and the --shape options, into model_opts (*shapes malloc'd:
 * freed by the caller after the load). Nothing for other files. */
static int archive_shapes(struct run_state *r, const char *path, ox_tensor **shapes) {
    unsigned char head[4];
    FILE *f = fopen(path, "rb");
    bool zip = f && fread(head, 1, 4, f) == 4 && memcmp(head, "PK\003\004", 4) == 0;
    if (f) fclose(f);
    *shapes = NULL;
    if (!zip) return 0;
    int n = r->n_iopts + r->n_sopts, k = 0;
    *shapes = calloc((size_t)(n ? n : 1), sizeof **shapes);
    if (!*shapes) return cli_errorf(EXIT_FAIL, "out of memory");
    for (int i = 0; i < r->n_iopts; i++) {
        const char *arg = r->iopts[i].arg, *eq = strchr(arg, '=');
        const char *file = eq && !cli_is_file(arg) ? eq + 1 : arg;
        ox_tensor t = {0};
        char err[1200];
        if (read_tensor(file, &t, NULL, err, sizeof err))
            return cli_errorf(EXIT_FAIL, "-i %s: %s", arg, err);
        ox_tensor *d = &(*shapes)[k++];
        d->dtype = t.dtype;
        d->rank = t.rank;
        memcpy(d->dims, t.dims, sizeof d->dims);
        d->name = eq && file != arg ? strndup(arg, (size_t)(eq - arg)) : NULL;
        ox_tensor_free_data(&t);
    }
    for (int i = 0; i < r->n_sopts; i++) {
        if (r->sopts[i].rank < 1) continue; /* a symbolic dim's value: not a shape */
        ox_tensor *d = &(*shapes)[k++];
        d->dtype = OX_FLOAT;
        d->rank = r->sopts[i].rank;
        memcpy(d->dims, r->sopts[i].dims, sizeof(int64_t) * (size_t)d->rank);
        d->name = strdup(r->sopts[i].name);
    }
    model_opts.input_shapes = *shapes;
    model_opts.n_input_shapes = k;
    return 0;
}

static int bind_input_opts(struct run_state *r, const char *model_path) {
    for (int k = 0; k < r->n_iopts; k++) {
        struct input_opt *io = &r->iopts[k];
        const char *arg = io->arg, *eq = strchr(arg, '=');
        io->file = arg;
        if (!eq) continue;
        size_t nl = (size_t)(eq - arg);
        for (int i = 0; i < r->n_in && !io->name; i++) {
            if (strlen(r->in_names[i]) != nl || strncmp(r->in_names[i], arg, nl) != 0) continue;
            if (r->given[i])
                return cli_errorf(EXIT_USAGE, "-i %s: input '%s' given twice", arg, r->in_names[i]);
            io->name = r->in_names[i];
            io->file = eq + 1;
            r->given[i] = k + 1;
        }
        if (!io->name && !cli_is_file(arg))
            return cli_errorf(EXIT_USAGE,
                              "-i %s: the model has no input '%.*s' (see onnxexec info %s)", arg,
                              (int)(nl < 200 ? nl : 200), arg, model_path);
    }
    for (int k = 0, next = 0; k < r->n_iopts; k++) {
        if (r->iopts[k].name) continue;
        while (next < r->n_in && r->given[next]) next++;
        if (next >= r->n_in)
            return cli_errorf(EXIT_USAGE, "-i %s: too many inputs (the model takes %d)",
                              r->iopts[k].arg, r->n_in);
        r->given[next] = k + 1;
        r->iopts[k].name = r->in_names[next];
    }
    return 0;
}

/* Declared dtype and shape of input i, made concrete by --shape options (or 1 for free
 * dims), into t. */
static int random_input_shape(struct run_state *r, int i, ox_tensor *t) {
    const char *name = r->in_names[i];
    ox_tensor d;
    const char *dn[OX_MAX_RANK] = {0};
    if (ox_model_input(r->m, i, &d, dn) != OX_OK)
        return cli_errorf(EXIT_FAIL, "input '%s': %s", name, cli_lib_msg(OX_E_INVALID));
    *t = (ox_tensor){.dtype = d.dtype, .rank = d.rank, .name = name};
    memcpy(t->dims, d.dims, sizeof t->dims);
    struct shape_opt *whole = NULL;
    for (int k = 0; k < r->n_sopts; k++)
        if (strcmp(r->sopts[k].name, name) == 0) whole = &r->sopts[k];
    if (whole) {
        whole->used = true;
        if (d.rank >= 0 && d.rank != whole->rank)
            return cli_errorf(EXIT_USAGE, "--shape %s: input '%s' has rank %d, %d dimensions given",
                              whole->name, name, d.rank, whole->rank);
        for (int k = 0; k < whole->rank && d.rank >= 0; k++)
            if (d.dims[k] >= 0 && d.dims[k] != whole->dims[k])
                return cli_errorf(EXIT_USAGE,
                                  "--shape %s: dimension %d of input '%s' is fixed at %" PRId64
                                  ", %" PRId64 " given",
                                  whole->name, k, name, d.dims[k], whole->dims[k]);
        t->rank = whole->rank;
        memcpy(t->dims, whole->dims, sizeof t->dims);
        return 0;
    }
    if (d.rank < 0)
        return cli_errorf(EXIT_USAGE,
                          "input '%s' has no declared shape: give it with -i %s=FILE or "
                          "--shape %s=d0,d1,...",
                          name, name, name);
    if (d.rank > OX_MAX_RANK)
        return cli_errorf(EXIT_FAIL, "input '%s': rank %d is over %d", name, d.rank, OX_MAX_RANK);
    for (int k = 0; k < t->rank; k++) {
        if (t->dims[k] >= 0) continue;
        if (k == 0 && r->batch > 0) {
            t->dims[k] = r->batch;
            continue;
        }
        struct shape_opt *sym = NULL;
        for (int j = 0; dn[k] && *dn[k] && j < r->n_sopts; j++)
            if (strcmp(r->sopts[j].name, dn[k]) == 0) sym = &r->sopts[j];
        if (sym && sym->rank != 1)
            return cli_errorf(EXIT_USAGE, "--shape %s: a symbolic dimension takes one number",
                              sym->name);
        if (sym) {
            sym->used = true;
            t->dims[k] = sym->dims[0];
        } else if (dn[k] && *dn[k]) {
            t->dims[k] = 1;
            fprintf(stderr,
                    "note: input '%s' dimension %d ('%s') set to 1; use --shape %s=N or "
                    "--shape %s=d0,d1,...\n",
                    name, k, dn[k], dn[k], name);
        } else {
            t->dims[k] = 1;
            fprintf(stderr,
                    "note: input '%s' dimension %d is not fixed, set to 1; use --shape "
                    "%s=d0,d1,...\n",
                    name, k, name);
        }
    }
    return 0;
}

static int read_value(const char *path, ox_io_kind kind, ox_tensor *t, char **name, char *err,
                      size_t errlen);

/* Load the given inputs, make random ones for the rest. */
static int prepare_inputs(struct run_state *r, uint64_t seed) {
    uint64_t rng = seed;
    int rc;
    for (int i = 0; i < r->n_in; i++) {
        const char *name = r->in_names[i];
        ox_io_kind kind = ox_model_input_kind(r->m, i);
        if (kind != OX_IO_TENSOR && !r->given[i])
            return cli_errorf(EXIT_FAIL,
                              "input '%s' is a %s: give it with -i %s=FILE.pb (a %s as the ONNX "
                              "backend test data stores one); only tensors are made up",
                              name, kind_name(kind), name,
                              kind == OX_IO_MAP        ? "MapProto"
                              : kind == OX_IO_SEQUENCE ? "SequenceProto"
                                                       : "OptionalProto");
        if (kind != OX_IO_TENSOR) {
            char err[1200];
            if (read_value(r->iopts[r->given[i] - 1].file, kind, &r->ins[i], NULL, err, sizeof err))
                return cli_errorf(EXIT_FAIL, "input '%s': %s", name, err);
            r->has[i] = true;
            r->ins[i].name = name;
            continue;
        }
        if (r->given[i]) {
            char err[1200];
            const char *file = r->iopts[r->given[i] - 1].file;
            ox_tensor d = {0};
            int bad;
            if (image_is_file(file) && ox_model_input(r->m, i, &d, NULL) == OX_OK &&
                d.rank <= OX_MAX_RANK)
                bad = read_image(file, d.rank, d.dims, &r->ins[i], err, sizeof err);
            else
                bad = read_tensor(file, &r->ins[i], NULL, err, sizeof err);
            if (bad) return cli_errorf(EXIT_FAIL, "input '%s': %s", name, err);
            r->has[i] = true;
            r->ins[i].name = name;
            for (int k = 0; k < r->n_sopts; k++)
                if (strcmp(r->sopts[k].name, name) == 0) {
                    r->sopts[k].used = true;
                    fprintf(stderr, "note: --shape %s ignored: the input is given with -i\n", name);
                }
            continue;
        }
        if (ox_model_input_has_default(r->m, i)) {
            for (int k = 0; k < r->n_sopts; k++)
                if (strcmp(r->sopts[k].name, name) == 0)
                    return cli_errorf(EXIT_USAGE,
                                      "--shape %s: input '%s' has an initializer; give another "
                                      "value with -i %s=FILE",
                                      name, name, name);
            continue; /* not passed: the initializer serves */
        }
        ox_tensor t;
        if ((rc = random_input_shape(r, i, &t))) return rc;
        if ((rc = fill_random(&t, &rng))) return rc;
        r->ins[i] = t;
        r->has[i] = true;
        if (r->quiet) continue;
        char type[600];
        fmt_type(&t, NULL, type, sizeof type);
        fprintf(stderr, "note: input '%s' not given: random %s (seed %" PRIu64 ")\n", name, type,
                seed);
    }
    for (int k = 0; k < r->n_sopts; k++)
        if (!r->sopts[k].used)
            return cli_errorf(EXIT_USAGE,
                              "--shape %s: no input or symbolic dimension has that name",
                              r->sopts[k].name);
    return 0;
}

/* Print the outputs; with out_dir, write them there. */
static int save_outputs(struct run_state *r, const char *out_dir, bool want_npy, bool want_pb) {
    int rc = 0;
    if (out_dir && (rc = make_dirs(out_dir))) return rc;
    for (int k = 0; k < r->n_out; k++) {
        ox_tensor d;
        const char *name = ox_model_output(r->m, k, &d, NULL) == OX_OK && d.name ? d.name : "?";
        const ox_tensor *t = r->outs[k];
        if (!t) {
            printf("%s: (not computed)\n", name);
            continue;
        }
        print_value_summary(name, t, 0);
        if (out_dir && t->kind != OX_IO_TENSOR)
            printf("  (not written: only tensor outputs are saved to files)\n");
        if (!out_dir || !tensor_ok(t)) continue;
        /* a file stem no other output has */
        char base[256], stem[300];
        safe_name(name, k, base, sizeof base);
        snprintf(stem, sizeof stem, "%s", base);
        for (int j = 0, n = 1; j < k; j++)
            if (r->stems[j] && strcmp(r->stems[j], stem) == 0) {
                snprintf(stem, sizeof stem, "%s_%d", base, n++);
                j = -1; /* check the new stem against all again */
            }
        if (!(r->stems[k] = strdup(stem))) return cli_errorf(EXIT_FAIL, "out of memory");
        char path[4600];
        for (int f = 0; f < 2; f++) {
            if (!(f == 0 ? want_npy : want_pb)) continue;
            snprintf(path, sizeof path, "%s/%s.%s", out_dir, stem, f == 0 ? "npy" : "pb");
            ox_status st =
                f == 0 ? ox_tensor_write_npy(path, t) : ox_tensor_write_pb(path, t, name);
            if (st != OX_OK) {
                const char *msg = cli_lib_msg(st);
                rc = strstr(msg, path) ? cli_errorf(EXIT_FAIL, "%s", msg)
                                       : cli_errorf(EXIT_FAIL, "%s: %s", path, msg);
            } else {
                printf("  -> %s\n", path);
            }
        }
    }
    return rc;
}

/* Read up to `max` lines of a text file into names (malloc'd); returns the count or -1. */
static int read_lines(const char *path, char **names, int max) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[512];
    int n = 0;
    while (n < max && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = 0;
        names[n] = strdup(line);
        if (!names[n]) break;
        n++;
    }
    fclose(f);
    return n;
}

/* --labels/--truth: read the first output as class scores ([B, C] or [C]), print the top
 * class of the first rows, the accuracy against the true labels, and the time per row. */
static int classify_report(const ox_tensor *y, const char *labels_path, const char *truth_path,
                           double ms) {
    enum { MAX_CLASSES = 100000, SHOW = 10 };
    if (!(y->rank == 2 || y->rank == 1) || class_of(y->dtype) != C_FLOAT)
        return cli_errorf(EXIT_FAIL,
                          "--labels/--truth: the first output is %s, expected float "
                          "scores [batch, classes]",
                          ox_dtype_name(y->dtype));
    int64_t B = y->rank == 2 ? y->dims[0] : 1, C = y->dims[y->rank - 1];
    if (C <= 0 || C > MAX_CLASSES)
        return cli_errorf(EXIT_FAIL, "--labels: %lld classes", (long long)C);
    char **names = calloc((size_t)C, sizeof *names);
    int n_names = 0, rc = 0;
    ox_tensor truth = {0};
    if (!names) return cli_errorf(EXIT_FAIL, "out of memory");
    if (labels_path && (n_names = read_lines(labels_path, names, (int)C)) < 0) {
        rc = cli_errorf(EXIT_FAIL, "--labels %s: %s", labels_path, strerror(errno));
        goto done;
    }
    if (truth_path) {
        char err[512];
        if (read_tensor(truth_path, &truth, NULL, err, sizeof err)) {
            rc = cli_errorf(EXIT_FAIL, "--truth %s", err);
            goto done;
        }
        if ((class_of(truth.dtype) != C_INT && class_of(truth.dtype) != C_UINT) ||
            ox_tensor_numel(&truth) < B) {
            rc = cli_errorf(EXIT_FAIL, "--truth %s: expected at least %lld integer labels",
                            truth_path, (long long)B);
            goto done;
        }
    }
    int64_t correct = 0;
    for (int64_t b = 0; b < B; b++) {
        int64_t best = 0;
        for (int64_t c = 1; c < C; c++)
            if (get_f(y, b * C + c, 0) > get_f(y, b * C + best, 0)) best = c;
        int64_t want = truth_path ? get_i(&truth, b) : -1;
        correct += best == want;
        if (b < SHOW) {
            printf("  #%-4lld %-16s score %8.3f", (long long)b, best < n_names ? names[best] : "",
                   get_f(y, b * C + best, 0));
            if (!(best < n_names)) printf("  (class %lld)", (long long)best);
            if (truth_path)
                printf("  truth %-16s %s", want >= 0 && want < n_names ? names[want] : "",
                       best == want ? "ok" : "WRONG");
            printf("\n");
        }
    }
    if (B > SHOW) printf("  ... %lld more\n", (long long)(B - SHOW));
    if (truth_path)
        printf("accuracy: %.4f (%lld of %lld)\n", (double)correct / (double)B, (long long)correct,
               (long long)B);
    printf("time per item: %.4f ms (batch of %lld)\n", ms / (double)B, (long long)B);
done:
    for (int i = 0; i < n_names; i++) free(names[i]);
    free(names);
    if (truth.data) ox_tensor_free_data(&truth);
    return rc;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Time the first run and, after `warmup` untimed ones, `runs` more; print a table or JSON. */
struct op_total {
    const char *op;
    double seconds;
    int count;
};

static int cmp_time_desc(const void *a, const void *b) {
    double x = ((const ox_node_time *)a)->seconds, y = ((const ox_node_time *)b)->seconds;
    return x > y ? -1 : x < y;
}

static int cmp_op_desc(const void *a, const void *b) {
    double x = ((const struct op_total *)a)->seconds, y = ((const struct op_total *)b)->seconds;
    return x > y ? -1 : x < y;
}

/* bench --profile: time per op type and the slowest nodes, per run, of the timed runs. */
static int print_profile(ox_session *s, bool json) {
    const ox_node_time *t;
    int n;
    if (ox_session_profile(s, false, &t, &n)) return cli_errorf(EXIT_FAIL, "%s", ox_errmsg());
    ox_node_time *byt = malloc(sizeof *byt * (size_t)(n ? n : 1));
    struct op_total *ops = calloc((size_t)(n ? n : 1), sizeof *ops);
    if (!byt || !ops) {
        free(byt), free(ops);
        return cli_errorf(EXIT_FAIL, "out of memory");
    }
    memcpy(byt, t, sizeof *byt * (size_t)n);
    double total = 0, runs = n && t[0].runs > 0 ? (double)t[0].runs : 1;
    int n_ops = 0;
    for (int i = 0; i < n; i++) {
        total += t[i].seconds;
        int k = 0;
        while (k < n_ops && strcmp(ops[k].op, t[i].op_type) != 0) k++;
        if (k == n_ops) ops[n_ops++].op = t[i].op_type;
        ops[k].seconds += t[i].seconds;
        ops[k].count++;
    }
    qsort(byt, (size_t)n, sizeof *byt, cmp_time_desc);
    qsort(ops, (size_t)n_ops, sizeof *ops, cmp_op_desc);
    if (json) {
        printf(", \"profile\": {\"nodes_ms\": [");
        for (int i = 0; i < n; i++) {
            printf("%s{\"node\": ", i ? ", " : "");
            cli_json_str(stdout, t[i].node);
            printf(", \"op\": ");
            cli_json_str(stdout, t[i].op_type);
            printf(", \"ms\": %.4f}", t[i].seconds * 1e3 / runs);
        }
        printf("]}");
    } else {
        printf("profile      %.3f ms per run in %d nodes (timed runs only)\n", total * 1e3 / runs,
               n);
        printf("  %-28s %6s %10s %6s\n", "op type", "nodes", "ms/run", "share");
        for (int k = 0; k < n_ops; k++)
            printf("  %-28s %6d %10.3f %5.1f%%\n", ops[k].op, ops[k].count,
                   ops[k].seconds * 1e3 / runs, total > 0 ? 100 * ops[k].seconds / total : 0);
        int top = n < 15 ? n : 15;
        printf("  slowest nodes:\n");
        for (int i = 0; i < top; i++) { /* long names: their ends tell nodes apart */
            const char *nm = byt[i].node[0] ? byt[i].node : "(unnamed)";
            size_t len = strlen(nm);
            printf("  %s%-*s %-20.20s %10.3f %5.1f%%\n", len > 44 ? "..." : "", len > 44 ? 41 : 44,
                   len > 44 ? nm + len - 41 : nm, byt[i].op_type, byt[i].seconds * 1e3 / runs,
                   total > 0 ? 100 * byt[i].seconds / total : 0);
        }
    }
    free(byt);
    free(ops);
    return 0;
}

/* --precision: fp32, tf32, fp16 or bf16. */
static int parse_precision(const char *val, int *out) {
    int p = val ? cli_precision(val, strlen(val)) : -1;
    if (p < 0)
        return cli_errorf(EXIT_USAGE, "--precision '%s': expected fp32, tf32, fp16 or bf16",
                          val ? val : "");
    *out = p;
    return 0;
}

static int bench_report(struct run_state *r, int n_pass, int warmup, int runs, bool json,
                        bool profile, const char *path, double t_load, double t_create) {
    double *t = malloc(sizeof *t * (size_t)runs);
    if (!t) return cli_errorf(EXIT_FAIL, "out of memory");
    double t_first = cli_now_ms();
    ox_status st = ox_session_run(r->s, r->pass, n_pass, r->outs);
    t_first = cli_now_ms() - t_first;
    struct cli_progress bar;
    cli_progress_start(&bar, "bench", runs);
    for (int k = 0; st == OX_OK && k < warmup; k++)
        st = ox_session_run(r->s, r->pass, n_pass, r->outs);
    if (profile && st == OX_OK) { /* count the timed runs only */
        const ox_node_time *pt;
        int pn;
        ox_session_profile(r->s, true, &pt, &pn);
    }
    for (int k = 0; st == OX_OK && k < runs; k++) {
        double t0 = cli_now_ms();
        st = ox_session_run(r->s, r->pass, n_pass, r->outs);
        t[k] = cli_now_ms() - t0;
        cli_progress_update(&bar, k + 1, "runs");
    }
    cli_progress_clear(&bar);
    if (st != OX_OK) {
        free(t);
        return cli_errorf(EXIT_FAIL, "%s", cli_lib_msg(st));
    }
    qsort(t, (size_t)runs, sizeof *t, cmp_double);
    double med = runs % 2 ? t[runs / 2] : (t[runs / 2 - 1] + t[runs / 2]) / 2;
    int i90 = (int)ceil(0.9 * runs) - 1;
    double p90 = t[i90 < 0 ? 0 : i90], tmin = t[0];
    size_t arena = 0, no_reuse = 0, peak = 0;
    ox_session_memory(r->s, &arena, &no_reuse, &peak);
    int64_t split_items = 0;
    int split_lanes = 0;
    ox_session_split(r->s, &split_items, &split_lanes);
    long rss = cli_peak_rss_kb();
    const char *dev_name = "cpu";
    int n_dev = 0, n_cpu = 0;
    bool captured = false;
    ox_session_device(r->s, &dev_name, &n_dev, &n_cpu, NULL, &captured);
    if (json) {
        printf("{\"model\": \"%s\", \"load_ms\": %.3f, \"create_ms\": %.3f, "
               "\"first_run_ms\": %.3f, \"runs\": %d, \"median_ms\": %.3f, \"p90_ms\": %.3f, "
               "\"min_ms\": %.3f, \"peak_rss_kb\": %ld, \"arena_bytes\": %zu, "
               "\"no_reuse_bytes\": %zu, \"lower_bound_bytes\": %zu, \"split_items\": %lld, "
               "\"split_lanes\": %d, \"device\": ",
               path, t_load, t_create, t_first, runs, med, p90, tmin, rss, arena, no_reuse, peak,
               (long long)split_items, split_lanes);
        cli_json_str(stdout, dev_name);
        printf(", \"device_steps\": %d, \"cpu_steps\": %d, \"graph_replay\": %s", n_dev, n_cpu,
               captured ? "true" : "false");
        int prc = profile ? print_profile(r->s, true) : 0;
        printf("}\n");
        if (prc) {
            free(t);
            return prc;
        }
    } else {
        printf("model        %s\n", path);
        if (strcmp(dev_name, "cpu") != 0)
            printf("device       %s: %d steps there, %d on the CPU%s\n", dev_name, n_dev, n_cpu,
                   captured ? "; runs replay one CUDA graph" : "");
        printf("load         %.3f ms (session %.3f ms)\n", t_load, t_create);
        printf("first run    %.3f ms (plans)\n", t_first);
        printf("%-12s median %.3f ms, p90 %.3f ms, min %.3f ms\n", "runs", med, p90, tmin);
        printf("peak RSS     %.1f MiB\n", rss / 1024.0);
        printf("arena        %.2f MiB (no reuse %.2f MiB, lower bound %.2f MiB)\n",
               arena / 1048576.0, no_reuse / 1048576.0, peak / 1048576.0);
        if (split_items)
            printf("batch        %lld items run one at a time, on %d thread%s side by side "
                   "(memory: every thread's plan and the batch's outputs)\n",
                   (long long)split_items, split_lanes, split_lanes == 1 ? "" : "s");
        if (profile) {
            int prc = print_profile(r->s, false);
            if (prc) {
                free(t);
                return prc;
            }
        }
    }
    free(t);
    return 0;
}

/* `run` and `bench`: the same inputs and session; bench times instead of printing. */
enum run_mode { MODE_RUN, MODE_BENCH, MODE_INFO, MODE_GRAPH, MODE_PLAN };

/* info, graph and plan: plan the model for the inputs (-i, --shape, --batch; random data),
 * run it once, and report from that plan (tools/inspect.c). info goes on without the plan
 * when planning fails, graph too (with the declared shapes). */
static int inspect_main(struct run_state *r, enum run_mode mode, const char *model_path,
                        const char *out, bool json, int n_threads, uint64_t seed) {
    struct ox_plan *p = NULL;
    r->quiet = true;
    int rc = prepare_inputs(r, seed);
    if (rc == EXIT_USAGE && (r->n_sopts || r->n_iopts || r->batch)) return rc;
    if (!rc) {
        int n_pass = 0;
        for (int i = 0; i < r->n_in; i++)
            if (r->has[i]) r->pass[n_pass++] = r->ins[i];
        ox_session_options so = {.n_threads = n_threads};
        ox_status st = ox_session_create(r->m, &so, &r->s);
        if (st == OX_OK) st = ox_session_run(r->s, r->pass, n_pass, r->outs);
        if (st == OX_OK) st = ox_session_plan(r->s, &p);
        if (st != OX_OK) rc = cli_errorf(EXIT_FAIL, "%s", cli_lib_msg(st));
    }
    if (rc && mode == MODE_PLAN) return rc;
    if (rc)
        fprintf(stderr, "note: %s\n",
                mode == MODE_INFO ? "FLOPs and the memory plan need the model planned (see above)"
                                  : "edges show the declared shapes: the model could not be "
                                    "planned (see above)");
    return inspect_report(mode == MODE_INFO    ? INSPECT_INFO
                          : mode == MODE_GRAPH ? INSPECT_GRAPH
                                               : INSPECT_PLAN,
                          model_path, r->m, p, json, out);
}

static int run_main(int argc, char **argv, enum run_mode mode) {
    static const char *const cmd_names[] = {"run", "bench", "info", "graph", "plan"};
    const char *cmd = cmd_names[mode];
    bool bench = mode == MODE_BENCH, inspect = mode >= MODE_INFO;
    const char *model_path = NULL, *out_dir = NULL;
    int runs = 20, warmup = 0;
    bool json = false, profile = false;
    const char *labels_path = NULL, *truth_path = NULL;
    bool want_npy = true, want_pb = false;
    uint64_t seed = 0;
    int n_threads = 0, repeat = 1, rc, batch_split = OX_BATCH_SPLIT_AUTO;
    const char *device = NULL;
    int precision = OX_PRECISION_FP32;
    struct run_state r = {0};
    r.iopts = calloc((size_t)argc + 1, sizeof *r.iopts);
    r.sopts = calloc((size_t)argc + 1, sizeof *r.sopts);
    if (!r.iopts || !r.sopts) {
        rc = cli_errorf(EXIT_FAIL, "out of memory");
        goto done;
    }
    for (int a = 0; a < argc; a++) {
        const char *arg = argv[a];
        const char *val = a + 1 < argc ? argv[a + 1] : NULL;
        bool takes =
            strcmp(arg, "-i") == 0 || strcmp(arg, "--input") == 0 || strcmp(arg, "-o") == 0 ||
            strcmp(arg, "--output") == 0 || strcmp(arg, "--seed") == 0 ||
            strcmp(arg, "--shape") == 0 || strcmp(arg, "--threads") == 0 ||
            strcmp(arg, "--preprocess") == 0 || strcmp(arg, "--device") == 0 ||
            (!inspect && (strcmp(arg, "--format") == 0 || strcmp(arg, "--repeat") == 0 ||
                          strcmp(arg, "--batch-split") == 0 || strcmp(arg, "--precision") == 0 ||
                          strcmp(arg, "--labels") == 0 || strcmp(arg, "--truth") == 0)) ||
            ((bench || inspect) && strcmp(arg, "--batch") == 0) ||
            (bench && (strcmp(arg, "--runs") == 0 || strcmp(arg, "--warmup") == 0));
        if (cli_is_help(arg)) {
            static const char *const usages[] = {usage_run, usage_bench, usage_info, usage_graph,
                                                 usage_plan};
            cli_usage(usages[mode]);
            rc = 0;
            goto done;
        }
        if (takes && !val) {
            rc = cli_errorf(EXIT_USAGE, "%s needs a value (see onnxexec %s --help)", arg, cmd);
            goto done;
        }
        if (takes) a++;
        if (strcmp(arg, "-i") == 0 || strcmp(arg, "--input") == 0) {
            r.iopts[r.n_iopts++].arg = val;
        } else if (strcmp(arg, "-o") == 0 || strcmp(arg, "--output") == 0) {
            out_dir = val;
        } else if (strcmp(arg, "--seed") == 0) {
            int64_t v;
            if (!cli_parse_i64(val, &v) || v < 0) {
                rc = cli_errorf(EXIT_USAGE, "--seed '%s': expected a number >= 0", val);
                goto done;
            }
            seed = (uint64_t)v;
        } else if (strcmp(arg, "--shape") == 0) {
            if ((rc = parse_shape_opt(val, &r.sopts[r.n_sopts++]))) goto done;
        } else if (strcmp(arg, "--preprocess") == 0) {
            if (strcmp(val, "imagenet") == 0)
                image_pp = IMAGE_IMAGENET;
            else if (strcmp(val, "scale") == 0)
                image_pp = IMAGE_SCALE;
            else if (strcmp(val, "none") == 0)
                image_pp = IMAGE_NONE;
            else {
                rc = cli_errorf(EXIT_USAGE, "--preprocess '%s': expected imagenet, scale or none",
                                val);
                goto done;
            }
        } else if (strcmp(arg, "--format") == 0) {
            if (strcmp(val, "npy") == 0)
                want_npy = true, want_pb = false;
            else if (strcmp(val, "pb") == 0)
                want_npy = false, want_pb = true;
            else if (strcmp(val, "both") == 0)
                want_npy = true, want_pb = true;
            else {
                rc = cli_errorf(EXIT_USAGE, "--format '%s': expected npy, pb or both", val);
                goto done;
            }
        } else if (strcmp(arg, "--threads") == 0) {
            if (!parse_int(val, 0, 4096, &n_threads)) {
                rc = cli_errorf(EXIT_USAGE, "--threads '%s': expected a number in 0..4096", val);
                goto done;
            }
        } else if (!inspect && strcmp(arg, "--batch-split") == 0) {
            if (val && strcmp(val, "auto") == 0)
                batch_split = OX_BATCH_SPLIT_AUTO;
            else if (val && strcmp(val, "on") == 0)
                batch_split = OX_BATCH_SPLIT_ON;
            else if (val && strcmp(val, "off") == 0)
                batch_split = OX_BATCH_SPLIT_OFF;
            else {
                rc = cli_errorf(EXIT_USAGE, "--batch-split '%s': expected auto, on or off",
                                val ? val : "");
                goto done;
            }
        } else if (strcmp(arg, "--device") == 0) {
            device = val;
        } else if (!inspect && strcmp(arg, "--precision") == 0) {
            if ((rc = parse_precision(val, &precision))) goto done;
        } else if ((bench || mode == MODE_INFO) && strcmp(arg, "--json") == 0) {
            json = true;
        } else if (bench && strcmp(arg, "--profile") == 0) {
            profile = true;
        } else if (bench && strcmp(arg, "--runs") == 0) {
            if (!parse_int(val, 1, 1000000, &runs)) {
                rc = cli_errorf(EXIT_USAGE, "--runs '%s': expected a number >= 1", val);
                goto done;
            }
        } else if (bench && strcmp(arg, "--warmup") == 0) {
            if (!parse_int(val, 0, 1000000, &warmup)) {
                rc = cli_errorf(EXIT_USAGE, "--warmup '%s': expected a number >= 0", val);
                goto done;
            }
        } else if ((bench || inspect) && strcmp(arg, "--batch") == 0) {
            int b;
            if (!parse_int(val, 1, 1 << 30, &b)) {
                rc = cli_errorf(EXIT_USAGE, "--batch '%s': expected a number >= 1", val);
                goto done;
            }
            r.batch = b;
        } else if (strcmp(arg, "--labels") == 0) {
            labels_path = val;
        } else if (strcmp(arg, "--truth") == 0) {
            truth_path = val;
        } else if (strcmp(arg, "--repeat") == 0) {
            if (!parse_int(val, 1, 1000000, &repeat)) {
                rc = cli_errorf(EXIT_USAGE, "--repeat '%s': expected a number >= 1", val);
                goto done;
            }
        } else if (arg[0] == '-' && arg[1]) {
            rc = cli_errorf(EXIT_USAGE, "%s: unknown option '%s' (see onnxexec %s --help)", cmd,
                            arg, cmd);
            goto done;
        } else if (!model_path) {
            model_path = arg;
        } else {
            rc = cli_errorf(EXIT_USAGE, "%s: unexpected argument '%s'%s", cmd, arg,
                            inspect ? " (one model at a time)" : " (inputs go with -i)");
            goto done;
        }
    }
    if (!model_path) {
        rc = cli_errorf(EXIT_USAGE, "%s: no model given (usage: onnxexec %s MODEL [options])", cmd,
                        cmd);
        goto done;
    }
    if (mode == MODE_INFO && out_dir) {
        rc = cli_errorf(EXIT_USAGE,
                        "info: -o: info prints on stdout (--json for tools); pictures come "
                        "from onnxexec graph|plan MODEL -o FILE.svg");
        goto done;
    }
    if ((mode == MODE_GRAPH || mode == MODE_PLAN) && !out_dir) {
        rc = cli_errorf(EXIT_USAGE, "%s: needs -o FILE (%s)", cmd,
                        mode == MODE_GRAPH ? "FILE.svg, .png, .pdf or .dot" : "FILE.svg");
        goto done;
    }
    ox_tensor *ts_shapes = NULL;
    if ((rc = archive_shapes(&r, model_path, &ts_shapes))) goto done;
    double t_load = cli_now_ms();
    model_opts.device = device; /* optimized for where it runs */
    rc = load_model(model_path, &r.m);
    for (int i = 0; ts_shapes && i < model_opts.n_input_shapes; i++)
        free((void *)ts_shapes[i].name);
    free(ts_shapes);
    model_opts.input_shapes = NULL;
    model_opts.n_input_shapes = 0;
    if (rc) goto done;
    t_load = cli_now_ms() - t_load;

    r.n_in = ox_model_n_inputs(r.m);
    r.n_out = ox_model_n_outputs(r.m);
    size_t ni = (size_t)(r.n_in > 0 ? r.n_in : 1), no = (size_t)(r.n_out > 0 ? r.n_out : 1);
    r.in_names = calloc(ni, sizeof *r.in_names);
    r.given = calloc(ni, sizeof *r.given);
    r.ins = calloc(ni, sizeof *r.ins);
    r.has = calloc(ni, sizeof *r.has);
    r.pass = calloc(ni, sizeof *r.pass);
    r.outs = calloc(no, sizeof *r.outs);
    r.stems = calloc(no, sizeof *r.stems);
    if (!r.in_names || !r.given || !r.ins || !r.has || !r.pass || !r.outs || !r.stems) {
        rc = cli_errorf(EXIT_FAIL, "out of memory");
        goto done;
    }
    for (int i = 0; i < r.n_in; i++) {
        ox_tensor d;
        if (ox_model_input(r.m, i, &d, NULL) != OX_OK || !d.name) {
            rc = cli_errorf(EXIT_FAIL, "input %d: %s", i, cli_lib_msg(OX_E_INVALID));
            goto done;
        }
        r.in_names[i] = d.name;
    }
    if ((rc = bind_input_opts(&r, model_path))) goto done;
    if (inspect) {
        rc = inspect_main(&r, mode, model_path, out_dir, json, n_threads, seed);
        goto done;
    }
    if ((rc = prepare_inputs(&r, seed))) goto done;

    /* pass the inputs we hold, by name */
    int n_pass = 0;
    for (int i = 0; i < r.n_in; i++)
        if (r.has[i]) r.pass[n_pass++] = r.ins[i];
    ox_session_options so = {.n_threads = n_threads,
                             .profile = profile,
                             .batch_split = batch_split,
                             .device = device,
                             .precision = precision};
    double t_create = cli_now_ms();
    ox_status st = ox_session_create(r.m, &so, &r.s);
    t_create = cli_now_ms() - t_create;
    if (st != OX_OK) {
        rc = cli_errorf(EXIT_FAIL, "%s", cli_lib_msg(st));
        goto done;
    }
    if (bench) {
        rc = bench_report(&r, n_pass, warmup, runs, json, profile, model_path, t_load, t_create);
        goto done;
    }
    double best = INFINITY, total = 0;
    for (int k = 0; k < repeat; k++) {
        double t0 = cli_now_ms();
        st = ox_session_run(r.s, r.pass, n_pass, r.outs);
        double dt = cli_now_ms() - t0;
        if (st != OX_OK) {
            rc = cli_errorf(EXIT_FAIL, "%s", cli_lib_msg(st));
            goto done;
        }
        total += dt;
        if (dt < best) best = dt;
    }
    rc = save_outputs(&r, out_dir, want_npy, want_pb);
    if (repeat > 1)
        printf("time: %.3f ms (fastest of %d runs; mean %.3f ms)\n", best, repeat, total / repeat);
    else
        printf("time: %.3f ms\n", best);
    if (!rc && (labels_path || truth_path) && r.n_out > 0)
        rc = classify_report(r.outs[0], labels_path, truth_path, best);
done:
    run_state_free(&r);
    return rc;
}

static int cmd_run(int argc, char **argv) {
    return run_main(argc, argv, MODE_RUN);
}

static int cmd_bench(int argc, char **argv) {
    return run_main(argc, argv, MODE_BENCH);
}

/* ---- test ------------------------------------------------------------------------------ */

struct test_opts {
    double rtol, atol;
    double rel_l2; /* --rel-l2: judge float outputs by ||got - exp|| / ||exp|| (< 0: off) */
    int n_threads;
    bool verbose;
    bool roundtrip;         /* also check export -> import against the model as loaded */
    const char *export_dir; /* with roundtrip: keep each exported model there as CASE.onnx */
    const char *device;     /* --device (NULL: the CPU) */
    int precision;
};

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

struct str_list {
    char **v;
    int n, cap;
};

static bool list_push(struct str_list *l, char *s) {
    if (!s) return false;
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 16;
        char **v = realloc(l->v, (size_t)cap * sizeof *v);
        if (!v) {
            free(s);
            return false;
        }
        l->v = v, l->cap = cap;
    }
    l->v[l->n++] = s;
    return true;
}

static void list_free(struct str_list *l) {
    for (int i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

static bool is_case_dir(const char *dir) {
    char *p = cli_path_join(dir, "model.onnx");
    bool ok = p && cli_is_file(p);
    free(p);
    return ok;
}

/* Subfolders of dir whose name starts with `prefix` (and, if `need_case`, that are test
 * cases), sorted by name. */
static int list_subdirs(const char *dir, const char *prefix, bool need_case, struct str_list *out) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    struct dirent *e;
    size_t np = strlen(prefix);
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' || strncmp(e->d_name, prefix, np) != 0) continue;
        char *p = cli_path_join(dir, e->d_name);
        if (!p || !cli_is_dir(p) || (need_case && !is_case_dir(p))) {
            free(p);
            continue;
        }
        free(p);
        if (!list_push(out, strdup(e->d_name))) {
            closedir(d);
            return -1;
        }
    }
    closedir(d);
    if (out->n) qsort(out->v, (size_t)out->n, sizeof *out->v, cmp_str);
    return 0;
}

/* Data sets test_data_set_N sorted by N. */
static int cmp_dataset(const void *a, const void *b) {
    const char *x = *(char *const *)a, *y = *(char *const *)b;
    long nx = strtol(x + strlen("test_data_set_"), NULL, 10);
    long ny = strtol(y + strlen("test_data_set_"), NULL, 10);
    return nx < ny ? -1 : nx > ny ? 1 : strcmp(x, y);
}

/* Read dir/<prefix>N.pb for N = 0, 1, ... while they exist. */
/* A .pb value of the given kind: tensors as read_tensor does, sequences, maps and optionals
 * through ox_value_read_pb. */
static int read_value(const char *path, ox_io_kind kind, ox_tensor *t, char **name, char *err,
                      size_t errlen) {
    if (kind != OX_IO_SEQUENCE && kind != OX_IO_OPTIONAL && kind != OX_IO_MAP)
        return read_tensor(path, t, name, err, errlen);
    ox_status st = ox_value_read_pb(path, kind, t, name);
    if (st != OX_OK) {
        one_line(err, errlen, cli_lib_msg(st));
        return -1;
    }
    return 0;
}

static int read_pb_series(const char *dir, const char *prefix, const ox_model *m, bool is_in,
                          ox_tensor **out, char ***names, int *n, char *err, size_t errlen) {
    *out = NULL, *names = NULL, *n = 0;
    int cap = 0;
    for (int k = 0;; k++) {
        char fn[64], *path;
        snprintf(fn, sizeof fn, "%s%d.pb", prefix, k);
        if (!(path = cli_path_join(dir, fn))) goto oom;
        if (!cli_is_file(path)) {
            free(path);
            return 0;
        }
        if (k == cap) {
            cap = cap ? cap * 2 : 8;
            ox_tensor *t = realloc(*out, (size_t)cap * sizeof *t);
            if (t) *out = t;
            char **nm = realloc(*names, (size_t)cap * sizeof *nm);
            if (nm) *names = nm;
            if (!t || !nm) {
                free(path);
                goto oom;
            }
        }
        ox_io_kind kind = is_in ? ox_model_input_kind(m, k) : ox_model_output_kind(m, k);
        if (read_value(path, kind, &(*out)[k], &(*names)[k], err, errlen)) {
            free(path);
            return -1;
        }
        free(path);
        *n = k + 1;
    }
oom:
    snprintf(err, errlen, "out of memory");
    return -1;
}

static void free_series(ox_tensor *t, char **names, int n) {
    for (int i = 0; i < n; i++) {
        ox_tensor_free_data(&t[i]);
        free(names[i]);
    }
    free(t);
    free(names);
}

static bool same_shape(const ox_tensor *a, const ox_tensor *b) {
    if (a->rank != b->rank) return false;
    for (int d = 0; d < a->rank; d++)
        if (a->dims[d] != b->dims[d]) return false;
    return true;
}

/* Compare output k: 0 if it matches, else 1 with the reason in `why`. */
static int compare(int k, const char *name, const ox_tensor *exp, const ox_tensor *got,
                   const struct test_opts *o, char *why, size_t len);

/* Sequences, maps and optionals: the same kind and count, then item by item (a map: its keys
 * exactly, then its values). */
static int compare_value(int k, const char *name, const ox_tensor *exp, const ox_tensor *got,
                         const struct test_opts *o, char *why, size_t len) {
    if (exp->kind == OX_IO_TENSOR && (!got || got->kind == OX_IO_TENSOR))
        return compare(k, name, exp, got, o, why, len);
    if (!got || got->kind != exp->kind) {
        snprintf(why, len, "output %d '%s': expected a %s, got a %s", k, name, kind_name(exp->kind),
                 got ? kind_name(got->kind) : "nothing");
        return 1;
    }
    if (got->n_items != exp->n_items) {
        snprintf(why, len, "output %d '%s': expected %d items, got %d", k, name, exp->n_items,
                 got->n_items);
        return 1;
    }
    for (int i = 0; i < exp->n_items; i++) {
        char item[300];
        snprintf(item, sizeof item, "%.280s[%d]", name, i);
        if (compare_value(k, item, &exp->items[i], &got->items[i], o, why, len)) return 1;
    }
    return 0;
}

static int compare(int k, const char *name, const ox_tensor *exp, const ox_tensor *got,
                   const struct test_opts *o, char *why, size_t len) {
    char a[600], b[600];
    if (!got) {
        snprintf(why, len, "output %d '%s': not computed", k, name);
        return 1;
    }
    if (!tensor_ok(got)) {
        snprintf(why, len, "output %d '%s': malformed tensor (rank %d)", k, name, got->rank);
        return 1;
    }
    if (exp->dtype != got->dtype) {
        snprintf(why, len, "output %d '%s': dtype mismatch (expected %s, got %s)", k, name,
                 ox_dtype_name(exp->dtype), ox_dtype_name(got->dtype));
        return 1;
    }
    if (!same_shape(exp, got)) {
        fmt_dims(exp->dims, exp->rank, NULL, a, sizeof a);
        fmt_dims(got->dims, got->rank, NULL, b, sizeof b);
        snprintf(why, len, "output %d '%s': shape mismatch (expected %s, got %s)", k, name, a, b);
        return 1;
    }
    int64_t n = ox_tensor_numel(exp), n_bad = 0, worst = -1;
    double worst_err = -1, diff2 = 0, exp2 = 0; /* squared norms over the finite elements */
    elem_class c = class_of(exp->dtype);
    bool whole = o->rel_l2 >= 0 && (c == C_FLOAT || c == C_COMPLEX);
    for (int64_t i = 0; i < n; i++) {
        bool ok;
        double err = 0;
        if (c == C_FLOAT || c == C_COMPLEX) {
            double e = get_f(exp, i, 0), g = get_f(got, i, 0);
            double ei = c == C_COMPLEX ? get_f(exp, i, 1) : 0;
            double gi = c == C_COMPLEX ? get_f(got, i, 1) : 0;
            bool nan_e = isnan(e) || isnan(ei), nan_g = isnan(g) || isnan(gi);
            if (nan_e || nan_g) {
                ok = nan_e && nan_g;
                err = INFINITY;
            } else if (isinf(e) || isinf(g) || isinf(ei) || isinf(gi)) {
                ok = e == g && ei == gi;
                err = INFINITY;
            } else {
                err = c == C_COMPLEX ? hypot(g - e, gi - ei) : fabs(g - e);
                double mag = c == C_COMPLEX ? hypot(e, ei) : fabs(e);
                diff2 += err * err;
                exp2 += mag * mag;
                ok = err <= o->atol + o->rtol * mag;
                if (whole) { /* judged after the loop; the worst kept for the report */
                    if (err > worst_err) worst_err = err, worst = i;
                    ok = true;
                }
            }
        } else if (c == C_INT) {
            int64_t e = get_i(exp, i), g = get_i(got, i);
            ok = e == g;
            err = fabs((double)g - (double)e);
        } else if (c == C_UINT || c == C_BOOL) {
            uint64_t e = get_u(exp, i), g = get_u(got, i);
            if (c == C_BOOL) e = e != 0, g = g != 0;
            ok = e == g;
            err = e > g ? (double)(e - g) : (double)(g - e);
        } else if (c == C_STRING) {
            ok = strcmp(get_s(exp, i), get_s(got, i)) == 0;
            err = 1;
        } else {
            size_t es = ox_dtype_size(exp->dtype);
            ok = memcmp((const char *)exp->data + (size_t)i * es,
                        (const char *)got->data + (size_t)i * es, es) == 0;
            err = 1;
        }
        if (!ok) {
            n_bad++;
            if (err > worst_err) worst_err = err, worst = i;
        }
    }
    /* ||got - exp|| / ||exp||; an all-zero expectation is met only exactly */
    double rel = exp2 > 0 ? sqrt(diff2 / exp2) : diff2 > 0 ? INFINITY : 0;
    bool whole_bad = whole && !n_bad && rel > o->rel_l2; /* values differ as a whole */
    if (!n_bad && !whole_bad) return 0;
    char idx[600], l2[80] = "";
    fmt_index(exp, worst, idx, sizeof idx);
    fmt_elem(exp, worst, a, sizeof a);
    fmt_elem(got, worst, b, sizeof b);
    if (whole_bad) {
        snprintf(why, len,
                 "output %d '%s': relative L2 %.3g > %g (max abs err %.6g at %s: expected %s, "
                 "got %s)",
                 k, name, rel, o->rel_l2, worst_err, idx, a, b);
        return 1;
    }
    if (c == C_FLOAT || c == C_COMPLEX) snprintf(l2, sizeof l2, ", relative L2 %.3g", rel);
    if (c == C_STRING || c == C_OTHER)
        snprintf(why, len,
                 "output %d '%s': differs at %s (expected %s, got %s), %" PRId64 " of %" PRId64
                 " elements differ",
                 k, name, idx, a, b, n_bad, n);
    else
        snprintf(why, len,
                 "output %d '%s': max abs err %.6g at %s (expected %s, got %s), %" PRId64
                 " of %" PRId64 " elements differ%s",
                 k, name, worst_err, idx, a, b, n_bad, n, l2);
    return 1;
}

enum { R_PASS, R_FAIL, R_SKIP };

/* Run one case; the reason of a FAIL or SKIP goes to `why`. */
static const char *case_name(const char *path);

/* Bit-for-bit equality of two values (the round trip's check); the first difference goes
 * to why. */
static int same_bits(const char *name, const ox_tensor *a, const ox_tensor *b, char *why,
                     size_t len) {
    if (a->kind != b->kind || a->dtype != b->dtype || a->n_items != b->n_items ||
        (a->kind == OX_IO_TENSOR && !same_shape(a, b))) {
        char ta[600], tb[600];
        fmt_type(a, NULL, ta, sizeof ta);
        fmt_type(b, NULL, tb, sizeof tb);
        snprintf(why, len, "'%s': %s %s after the round trip, %s %s before", name,
                 kind_name(b->kind), tb, kind_name(a->kind), ta);
        return 1;
    }
    for (int i = 0; i < a->n_items; i++) {
        char item[300];
        snprintf(item, sizeof item, "%.280s[%d]", name, i);
        if (same_bits(item, &a->items[i], &b->items[i], why, len)) return 1;
    }
    if (a->kind != OX_IO_TENSOR) return 0;
    int64_t n = ox_tensor_numel(a);
    size_t sz = ox_dtype_size(a->dtype);
    for (int64_t i = 0; i < n; i++) {
        bool same = a->dtype == OX_STRING ? strcmp(get_s(a, i), get_s(b, i)) == 0
                                          : memcmp((const char *)a->data + (size_t)i * sz,
                                                   (const char *)b->data + (size_t)i * sz, sz) == 0;
        if (!same) {
            char at[128], ea[128], eb[128];
            fmt_index(a, i, at, sizeof at);
            fmt_elem(a, i, ea, sizeof ea);
            fmt_elem(b, i, eb, sizeof eb);
            snprintf(why, len, "'%s'%s: %s after the round trip, %s before (bits differ)", name, at,
                     eb, ea);
            return 1;
        }
    }
    return 0;
}

/* The round trip of a loaded model: export, import the bytes again, export that: the two
 * exports must be the same bytes. *m2 receives the re-imported model. */
static int roundtrip_model(const ox_model *m, const char *dir, const struct test_opts *o,
                           ox_model **m2, char *why, size_t len) {
    void *b1 = NULL, *b2 = NULL;
    size_t l1 = 0, l2 = 0;
    int rc = 1;
    ox_status st = ox_model_save_buffer(m, &b1, &l1);
    if (st) {
        char msg[2048];
        one_line(msg, sizeof msg, cli_lib_msg(st));
        snprintf(why, len, "round trip: export: %s", msg);
        goto out;
    }
    if (o->export_dir) {
        char *p = malloc(strlen(o->export_dir) + strlen(case_name(dir)) + 8);
        if (p) {
            sprintf(p, "%s/%s.onnx", o->export_dir, case_name(dir));
            FILE *f = fopen(p, "wb");
            bool ok = f && fwrite(b1, 1, l1, f) == l1;
            if (f) ok &= fclose(f) == 0;
            if (!ok) snprintf(why, len, "round trip: cannot write %s: %s", p, strerror(errno));
            free(p);
            if (!ok) goto out;
        }
    }
    ox_model_options keep = {.no_optimize = true, .limits = cli_limits}; /* as exported */
    st = ox_model_load_buffer_with(b1, l1, dir, &keep, m2);
    if (st) {
        char msg[2048];
        one_line(msg, sizeof msg, cli_lib_msg(st));
        snprintf(why, len, "round trip: the exported model does not load: %s", msg);
        goto out;
    }
    st = ox_model_save_buffer(*m2, &b2, &l2);
    if (st) {
        char msg[2048];
        one_line(msg, sizeof msg, cli_lib_msg(st));
        snprintf(why, len, "round trip: second export: %s", msg);
        goto out;
    }
    if (l1 != l2 || memcmp(b1, b2, l1) != 0) {
        size_t at = 0;
        while (at < l1 && at < l2 && ((char *)b1)[at] == ((char *)b2)[at]) at++;
        snprintf(why, len,
                 "round trip: exporting the re-imported model gives other bytes (%zu and %zu "
                 "bytes, first difference at byte %zu)",
                 l1, l2, at);
        goto out;
    }
    rc = 0;
out:
    free(b1);
    free(b2);
    return rc;
}

/* -v on a device: which nodes ran on the CPU for want of a device kernel. */
static void report_device(ox_session *s, const ox_model *m) {
    const char *name;
    int n_dev, n_cpu;
    const int *nodes;
    bool captured;
    ox_session_device(s, &name, &n_dev, &n_cpu, &nodes, &captured);
    printf("# %s: %d steps on the device, %d on the CPU%s", name, n_dev, n_cpu,
           captured ? ", captured" : "");
    for (int i = 0; nodes && i < n_cpu; i++) {
        const char *op = "?", *domain = "";
        ox_model_node(m, nodes[i], NULL, &op, &domain);
        printf("%s%s%s%s", i ? ", " : " (", *domain ? domain : "", *domain ? "." : "", op);
    }
    printf("%s\n", n_cpu && nodes ? ")" : "");
}

static int run_case(const char *dir, const struct test_opts *o, char *why, size_t len) {
    char *model_path = cli_path_join(dir, "model.onnx");
    ox_model *m = NULL;
    ox_session *s = NULL, *s2 = NULL;
    ox_model *m2 = NULL;
    struct str_list sets = {0};
    const ox_tensor **outs = NULL, **outs2 = NULL;
    int result = R_FAIL;
    if (!model_path) {
        snprintf(why, len, "out of memory");
        return R_FAIL;
    }
    ox_status st = ox_model_load_with(model_path, &model_opts, &m);
    if (st != OX_OK) {
        one_line(why, len, cli_lib_msg(st));
        goto done;
    }
    int n_in = ox_model_n_inputs(m), n_out = ox_model_n_outputs(m);
    for (int i = 0; i < n_in + n_out; i++) {
        bool is_in = i < n_in;
        int j = is_in ? i : i - n_in;
        ox_io_kind kind = is_in ? ox_model_input_kind(m, j) : ox_model_output_kind(m, j);
        if (kind == OX_IO_SPARSE) {
            ox_tensor d = {0};
            if (is_in)
                ox_model_input(m, j, &d, NULL);
            else
                ox_model_output(m, j, &d, NULL);
            snprintf(why, len, "%s %s '%s' (not supported yet)", kind_name(kind),
                     is_in ? "input" : "output", d.name ? d.name : "?");
            result = R_SKIP;
            goto done;
        }
    }
    if (list_subdirs(dir, "test_data_set_", false, &sets)) {
        snprintf(why, len, "%s: cannot list: %s", dir, strerror(errno));
        goto done;
    }
    if (sets.n == 0) {
        snprintf(why, len, "no test_data_set_* folder");
        goto done;
    }
    qsort(sets.v, (size_t)sets.n, sizeof *sets.v, cmp_dataset);
    ox_session_options so = {
        .n_threads = o->n_threads, .device = o->device, .precision = o->precision};
    if ((st = ox_session_create(m, &so, &s)) != OX_OK) {
        one_line(why, len, cli_lib_msg(st));
        goto done;
    }
    if (o->roundtrip) {
        if (roundtrip_model(m, dir, o, &m2, why, len)) goto done;
        if ((st = ox_session_create(m2, &so, &s2)) != OX_OK) {
            one_line(why, len, cli_lib_msg(st));
            goto done;
        }
    }
    outs = calloc((size_t)(n_out > 0 ? n_out : 1), sizeof *outs);
    outs2 = calloc((size_t)(n_out > 0 ? n_out : 1), sizeof *outs2);
    if (!outs || !outs2) {
        snprintf(why, len, "out of memory");
        goto done;
    }
    result = R_PASS;
    for (int ds = 0; ds < sets.n && result == R_PASS; ds++) {
        char *sdir = cli_path_join(dir, sets.v[ds]);
        ox_tensor *in = NULL, *ex = NULL;
        char **in_names = NULL, **ex_names = NULL, err[1200];
        int n_given = 0, n_ex = 0;
        /* prefix the data set's name only where a case has several */
        char pre[300] = "";
        if (sets.n > 1) snprintf(pre, sizeof pre, "%s: ", sets.v[ds]);
        if (!sdir) {
            snprintf(why, len, "out of memory");
            result = R_FAIL;
        } else if (read_pb_series(sdir, "input_", m, true, &in, &in_names, &n_given, err,
                                  sizeof err) ||
                   read_pb_series(sdir, "output_", m, false, &ex, &ex_names, &n_ex, err,
                                  sizeof err)) {
            snprintf(why, len, "%s%s", pre, err);
            result = R_FAIL;
        } else if (n_given > n_in) {
            snprintf(why, len, "%s%d input files, the model takes %d inputs", pre, n_given, n_in);
            result = R_FAIL;
        } else if (n_ex > n_out) {
            snprintf(why, len, "%s%d output files, the model has %d outputs", pre, n_ex, n_out);
            result = R_FAIL;
        }
        if (result != R_PASS) goto next;
        /* bind by name when every file names a distinct graph input, else by position */
        bool by_name = n_given > 0;
        for (int k = 0; k < n_given && by_name; k++) {
            in[k].name = NULL;
            int hit = -1;
            for (int i = 0; i < n_in && in_names[k]; i++) {
                ox_tensor d;
                if (ox_model_input(m, i, &d, NULL) == OX_OK && d.name &&
                    strcmp(d.name, in_names[k]) == 0)
                    hit = i;
            }
            if (hit < 0) by_name = false;
            for (int j = 0; j < k && by_name; j++)
                if (strcmp(in_names[j], in_names[k]) == 0) by_name = false;
        }
        for (int k = 0; k < n_given; k++) in[k].name = by_name ? in_names[k] : NULL;
        /* The ONNX test data stores bfloat16 tensors as uint16 (numpy has no bfloat16): take
         * the bits as bfloat16 where the model declares bfloat16. */
        for (int k = 0; k < n_given; k++) {
            int slot = k;
            for (int i = 0; by_name && i < n_in; i++) {
                ox_tensor d;
                if (ox_model_input(m, i, &d, NULL) == OX_OK && d.name &&
                    strcmp(d.name, in_names[k]) == 0)
                    slot = i;
            }
            ox_tensor d = {0};
            if (in[k].dtype == OX_UINT16 && ox_model_input(m, slot, &d, NULL) == OX_OK &&
                d.dtype == OX_BFLOAT16)
                in[k].dtype = OX_BFLOAT16;
        }
        for (int k = 0; k < n_ex; k++) {
            ox_tensor d = {0};
            if (ex[k].dtype == OX_UINT16 && ox_model_output(m, k, &d, NULL) == OX_OK &&
                d.dtype == OX_BFLOAT16)
                ex[k].dtype = OX_BFLOAT16;
        }
        double t0 = cli_now_ms();
        st = ox_session_run(s, in, n_given, outs);
        double dt = cli_now_ms() - t0;
        if (st == OX_OK && o->device && o->verbose) report_device(s, m);
        if (st != OX_OK) {
            char msg[2048];
            one_line(msg, sizeof msg, cli_lib_msg(st));
            snprintf(why, len, "%s%s", pre, msg);
            result = R_FAIL;
            goto next;
        }
        if (s2) { /* the re-imported model: the same bits as the model as loaded */
            st = ox_session_run(s2, in, n_given, outs2);
            if (st != OX_OK) {
                char msg[2048];
                one_line(msg, sizeof msg, cli_lib_msg(st));
                snprintf(why, len, "%sround trip: %s", pre, msg);
                result = R_FAIL;
                goto next;
            }
            for (int k = 0; k < n_out; k++) {
                ox_tensor d = {0};
                ox_model_output(m, k, &d, NULL);
                char w[2048];
                if (same_bits(d.name ? d.name : "?", outs[k], outs2[k], w, sizeof w)) {
                    snprintf(why, len, "%sround trip: output %d %s", pre, k, w);
                    result = R_FAIL;
                    goto next;
                }
            }
        }
        for (int k = 0; k < n_ex; k++) {
            ox_tensor d = {0};
            ox_model_output(m, k, &d, NULL);
            char w[2048];
            if (compare_value(k, d.name ? d.name : "?", &ex[k], outs[k], o, w, sizeof w)) {
                if (result == R_PASS) snprintf(why, len, "%s%s", pre, w);
                result = R_FAIL;
                if (!o->verbose) break;
                printf("  %s: %s\n", sets.v[ds], w);
            }
        }
        if (o->verbose)
            printf("  %s: %d inputs, %d outputs, %.3f ms%s\n", sets.v[ds], n_given, n_ex, dt,
                   result == R_PASS ? "" : " (mismatch)");
    next:
        free_series(in, in_names, n_given);
        free_series(ex, ex_names, n_ex);
        free(sdir);
    }
done:
    free(outs);
    free(outs2);
    list_free(&sets);
    ox_session_free(s);
    ox_session_free(s2);
    ox_model_free(m2);
    ox_model_free(m);
    free(model_path);
    return result;
}

/* The name a case prints as: its folder's last component. */
static const char *case_name(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static int cmd_test(int argc, char **argv) {
    struct test_opts o = {.rtol = 1e-3, .atol = 1e-7, .rel_l2 = -1};
    struct str_list cases = {0};
    int rc = EXIT_USAGE, n_dirs = 0;
    for (int a = 0; a < argc; a++) {
        const char *arg = argv[a], *val = a + 1 < argc ? argv[a + 1] : NULL;
        if (cli_is_help(arg)) {
            cli_usage(usage_test);
            rc = 0;
            goto done;
        } else if (strcmp(arg, "-v") == 0 || strcmp(arg, "--verbose") == 0) {
            o.verbose = true;
        } else if (strcmp(arg, "--rtol") == 0 || strcmp(arg, "--atol") == 0) {
            if (!parse_double(val, strcmp(arg, "--rtol") == 0 ? &o.rtol : &o.atol)) {
                cli_errorf(EXIT_USAGE, "%s '%s': expected a number >= 0", arg, val ? val : "");
                goto done;
            }
            a++;
        } else if (strcmp(arg, "--rel-l2") == 0) {
            if (!parse_double(val, &o.rel_l2)) {
                cli_errorf(EXIT_USAGE, "%s '%s': expected a number >= 0", arg, val ? val : "");
                goto done;
            }
            a++;
        } else if (strcmp(arg, "--roundtrip") == 0) {
            o.roundtrip = true;
        } else if (strcmp(arg, "--device") == 0) {
            if (!val) {
                cli_errorf(EXIT_USAGE, "--device needs a value (cpu, cuda or cuda:N)");
                goto done;
            }
            o.device = strcmp(val, "cpu") == 0 ? NULL : val;
            model_opts.device = o.device; /* the cases optimized for where they run */
            a++;
        } else if (strcmp(arg, "--precision") == 0) {
            if (parse_precision(val, &o.precision)) goto done;
            a++;
        } else if (strcmp(arg, "--export-dir") == 0) {
            if (!val || !cli_is_dir(val)) {
                cli_errorf(EXIT_USAGE, "--export-dir '%s': not a folder", val ? val : "");
                goto done;
            }
            o.roundtrip = true;
            o.export_dir = val;
            a++;
        } else if (strcmp(arg, "--threads") == 0) {
            if (!parse_int(val, 0, 4096, &o.n_threads)) {
                cli_errorf(EXIT_USAGE, "--threads '%s': expected a number in 0..4096",
                           val ? val : "");
                goto done;
            }
            a++;
        } else if (arg[0] == '-' && arg[1]) {
            cli_errorf(EXIT_USAGE, "test: unknown option '%s' (see onnxexec test --help)", arg);
            goto done;
        } else {
            /* a case, or a folder of cases */
            n_dirs++;
            char dir[4096];
            size_t n = strlen(arg);
            if (n >= sizeof dir) {
                cli_errorf(EXIT_USAGE, "%.60s...: path too long", arg);
                goto done;
            }
            memcpy(dir, arg, n + 1);
            while (n > 1 && dir[n - 1] == '/') dir[--n] = 0;
            if (!cli_is_dir(dir)) {
                cli_errorf(EXIT_USAGE, "%s: %s", dir,
                           cli_is_file(dir) ? "not a folder" : strerror(ENOENT));
                goto done;
            }
            if (is_case_dir(dir)) {
                if (!list_push(&cases, strdup(dir))) goto oom;
                continue;
            }
            struct str_list sub = {0};
            if (list_subdirs(dir, "", true, &sub)) {
                list_free(&sub);
                cli_errorf(EXIT_FAIL, "%s: cannot list: %s", dir, strerror(errno));
                goto done;
            }
            if (sub.n == 0) {
                cli_errorf(EXIT_USAGE, "%s: not a test case (no model.onnx) and holds none", dir);
                goto done;
            }
            for (int i = 0; i < sub.n; i++)
                if (!list_push(&cases, cli_path_join(dir, sub.v[i]))) {
                    list_free(&sub);
                    goto oom;
                }
            list_free(&sub);
        }
    }
    if (!n_dirs) {
        cli_errorf(EXIT_USAGE, "test: no test folder given (usage: onnxexec test DIR...)");
        goto done;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    int n_pass = 0, n_fail = 0, n_skip = 0;
    struct cli_progress bar; /* on a terminal, below the case lines */
    cli_progress_start(&bar, "test", cases.n);
    for (int i = 0; i < cases.n; i++) {
        char why[4096] = "";
        cli_progress_clear(&bar);
        if (o.verbose) printf("RUN  %s\n", case_name(cases.v[i]));
        fflush(stdout);
        int r = run_case(cases.v[i], &o, why, sizeof why);
        const char *name = case_name(cases.v[i]);
        cli_progress_clear(&bar);
        if (r == R_PASS)
            printf("PASS %s\n", name), n_pass++;
        else if (r == R_SKIP)
            printf("SKIP %s: %s\n", name, why), n_skip++;
        else
            printf("FAIL %s: %s\n", name, why[0] ? why : "failed"), n_fail++;
        fflush(stdout);
        char counts[64];
        snprintf(counts, sizeof counts, "%d failed, %d skipped", n_fail, n_skip);
        cli_progress_update(&bar, i + 1, counts);
    }
    cli_progress_clear(&bar);
    printf("%d passed, %d failed, %d skipped\n", n_pass, n_fail, n_skip);
    rc = n_fail ? EXIT_FAIL : 0;
    goto done;
oom:
    rc = cli_errorf(EXIT_FAIL, "out of memory");
done:
    list_free(&cases);
    return rc;
}

/* ---- info, graph, plan (tools/inspect.c) ---------------------------------------------- */

static int cmd_info(int argc, char **argv) {
    return run_main(argc, argv, MODE_INFO);
}

static int cmd_graph(int argc, char **argv) {
    return run_main(argc, argv, MODE_GRAPH);
}

static int cmd_plan(int argc, char **argv) {
    return run_main(argc, argv, MODE_PLAN);
}

/* ---- convert --------------------------------------------------------------------------- */

static const char usage_convert[] =
    "usage: onnxexec convert IN OUT [--optimize[=standard|all]] [--opset N]\n"
    "                               [--external-data] [--external-threshold BYTES]\n"
    "                               [--external-file NAME] [--shape NAME=d0,d1,...]...\n"
    "\n"
    "Read the model IN and write it to OUT as ONNX. Without options the graph is written as\n"
    "read (local functions inlined): the same outputs, bit for bit, from a file that\n"
    "onnx.checker accepts. Converting a converted file again gives the same bytes.\n"
    "OUT is written to a temporary file and renamed into place, so a failure never leaves\n"
    "a partial file. A model over protobuf's 2 GiB limit is written with external data.\n"
    "IN may be a TorchScript archive (torch.jit.save): give the shapes of its forward\n"
    "arguments with --shape (torch 2.x traced archives carry their own).\n"
    "\n"
    "options:\n"
    "  --optimize[=standard] write the graph after onnxexec's graph optimizations that keep\n"
    "                        to standard ONNX operators at the model's opset\n"
    "                        (BatchNormalization folded into Conv/Gemm, LayerNormalization\n"
    "                        and Gelu recognised where the opset has them, dead nodes\n"
    "                        removed): any ONNX runtime can read the result\n"
    "  --optimize=all        also the fused operators of domain ai.onnxexec (FusedConv,\n"
    "                        FusedGemm, FusedMatMul): what onnxexec runs; only onnxexec\n"
    "                        reads these\n"
    "  --opset N             convert the default domain to opset N first (up or down)\n"
    "                        where the operators allow it; fails naming the node otherwise\n"
    "  --external-data       put tensors of BYTES or more in a side file next to OUT\n"
    "  --external-threshold BYTES\n"
    "                        (default 1024)\n"
    "  --external-file NAME  the side file, relative to OUT's folder (default OUT's name\n"
    "                        + \".data\")\n"
    "  --shape NAME=d0,d1,.. the shape of a TorchScript model's input NAME (float32)\n"
    "\n"
    "examples:\n"
    "  onnxexec convert resnet50.onnx resnet50-opt.onnx --optimize\n"
    "  onnxexec convert big.onnx out/big.onnx --external-data\n"
    "  onnxexec convert model.onnx model-opset18.onnx --opset 18\n"
    "  onnxexec convert resnet18.pt resnet18.onnx --shape x=1,3,224,224\n";

/* convert's stages: on a terminal, a bar that names the stage; otherwise, for a big model
 * (plain), one line per stage. */
static void convert_stage(struct cli_progress *bar, bool plain, int k, const char *what,
                          const char *file) {
    char msg[600];
    snprintf(msg, sizeof msg, "%s %s", what, file);
    if (plain) fprintf(stderr, "convert: %s\n", msg);
    bar->drawn_at = -1e9; /* draw now */
    cli_progress_update(bar, k, msg);
}

static int cmd_convert(int argc, char **argv) {
    const char *in = NULL, *out = NULL;
    ox_save_options so = {0};
    int opset = 0, n_shapes = 0;
    static ox_tensor shapes[64]; /* names leak with the process: a few bytes */
    for (int a = 0; a < argc; a++) {
        const char *arg = argv[a];
        if (cli_is_help(arg)) {
            cli_usage(usage_convert);
            return 0;
        }
        if (strcmp(arg, "--optimize") == 0 || strcmp(arg, "--optimize=standard") == 0) {
            model_opts.no_optimize = false;
            model_opts.standard_ops_only = true;
        } else if (strcmp(arg, "--optimize=all") == 0) {
            model_opts.no_optimize = false;
            model_opts.standard_ops_only = false;
        } else if (strncmp(arg, "--optimize=", 11) == 0) {
            return cli_errorf(EXIT_USAGE, "convert: --optimize takes 'standard' or 'all', not '%s'",
                              arg + 11);
        } else if (strcmp(arg, "--external-data") == 0) {
            so.external_data = true;
        } else if (strcmp(arg, "--shape") == 0) {
            if (a + 1 >= argc) return cli_errorf(EXIT_USAGE, "convert: --shape needs a value");
            struct shape_opt so1 = {0};
            int rc1 = parse_shape_opt(argv[++a], &so1);
            if (rc1) return rc1;
            if (n_shapes == 64) return cli_errorf(EXIT_USAGE, "convert: too many --shape options");
            shapes[n_shapes] = (ox_tensor){.dtype = OX_FLOAT, .rank = so1.rank, .name = so1.name};
            memcpy(shapes[n_shapes++].dims, so1.dims, sizeof so1.dims);
            model_opts.input_shapes = shapes;
            model_opts.n_input_shapes = n_shapes;
        } else if (strcmp(arg, "--opset") == 0 || strcmp(arg, "--external-threshold") == 0 ||
                   strcmp(arg, "--external-file") == 0) {
            if (a + 1 >= argc) return cli_errorf(EXIT_USAGE, "convert: %s needs a value", arg);
            const char *v = argv[++a];
            if (strcmp(arg, "--opset") == 0) {
                if (!parse_int(v, 1, 1000, &opset))
                    return cli_errorf(EXIT_USAGE,
                                      "convert: --opset takes an opset number, not '%s'", v);
            } else if (strcmp(arg, "--external-threshold") == 0) {
                int64_t t;
                if (!cli_parse_i64(v, &t) || t < 1)
                    return cli_errorf(EXIT_USAGE,
                                      "convert: --external-threshold takes a byte count, not '%s'",
                                      v);
                so.external_threshold = (size_t)t;
                so.external_data = true;
            } else {
                so.external_file = v;
                so.external_data = true;
            }
        } else if (arg[0] == '-' && arg[1]) {
            return cli_errorf(EXIT_USAGE,
                              "convert: unknown option '%s' (see onnxexec convert --help)", arg);
        } else if (!in) {
            in = arg;
        } else if (!out) {
            out = arg;
        } else {
            return cli_errorf(EXIT_USAGE, "convert: one model at a time ('%s' is extra)", arg);
        }
    }
    if (!in || !out)
        return cli_errorf(EXIT_USAGE, "convert: needs an input and an output file (usage: onnxexec "
                                      "convert IN OUT)");
    if (cli_is_dir(out))
        return cli_errorf(EXIT_USAGE, "convert: %s is a folder: name the output file", out);
    double t0 = cli_now_ms();
    ox_model *m;
    bool optimize = !model_opts.no_optimize;
    model_opts.no_optimize = true; /* the opset first, then the optimizations at the target */
    struct cli_progress bar;
    int stage = 0;
    cli_progress_start(&bar, "convert", 2 + (opset != 0) + optimize);
    struct stat isb;
    bool plain = !bar.on && stat(in, &isb) == 0 && isb.st_size >= (256 << 20);
    convert_stage(&bar, plain, stage++, "loading", in);
    int rc = load_model(in, &m);
    if (rc) return cli_progress_clear(&bar), rc;
    ox_status st = OX_OK;
    if (opset) {
        convert_stage(&bar, plain, stage++, "converting the opset of", in);
        st = ox_model_convert_opset(m, opset);
        if (st) {
            ox_model_free(m);
            cli_progress_clear(&bar);
            return cli_errorf(EXIT_FAIL, "%s: %s", in, cli_lib_msg(st));
        }
    }
    if (optimize) convert_stage(&bar, plain, stage++, "optimizing", in);
    if (optimize && (st = ox_model_optimize(m, model_opts.standard_ops_only))) {
        ox_model_free(m);
        cli_progress_clear(&bar);
        return cli_errorf(EXIT_FAIL, "%s: %s", in, cli_lib_msg(st));
    }
    convert_stage(&bar, plain, stage++, "writing", out);
    st = ox_model_save(m, out, &so);
    int n_nodes = ox_model_n_nodes(m);
    ox_model_free(m);
    cli_progress_update(&bar, stage, "done");
    cli_progress_clear(&bar);
    if (st) return cli_errorf(EXIT_FAIL, "%s", cli_lib_msg(st));
    struct stat sb;
    long long bytes = stat(out, &sb) == 0 ? (long long)sb.st_size : -1;
    printf("wrote %s: %d nodes, %lld bytes, in %.0f ms\n", out, n_nodes, bytes, cli_now_ms() - t0);
    return 0;
}

/* onnxexec train (tools/train.c), onnxexec compare (tools/compare.c) */
int cmd_train(int argc, char **argv);
int cmd_compare(int argc, char **argv);

/* ---- grad, gradcheck ------------------------------------------------------------------- */

static const char usage_grad[] =
    "usage: onnxexec grad MODEL -o OUT [--of NAME]... [--wrt NAME]... [--external-data]\n"
    "                                  [--shape NAME=d0,d1,...]...\n"
    "\n"
    "Differentiate MODEL (reverse mode) and write it, with its gradient graph, to OUT as\n"
    "ONNX that any runtime can run. The written model has, besides MODEL's inputs and outputs:\n"
    "  - an input NAME_grad for each differentiated output NAME: the incoming gradient\n"
    "    (feed ones, of the output's shape, for the gradient of a loss);\n"
    "  - an output VALUE_grad for each value differentiated with respect to;\n"
    "  - each such parameter (initializer) as an input too, its stored value the default.\n"
    "The gradient graph uses standard ONNX operators only (opset raised to 13 if lower).\n"
    "\n"
    "options:\n"
    "  -o, --output OUT      the file to write (required)\n"
    "  --of NAME             an output (or any value) to differentiate; repeat for more\n"
    "                        (default: every float output)\n"
    "  --wrt NAME            a value to differentiate with respect to; repeat for more\n"
    "                        (default: every float initializer that reaches an output)\n"
    "  --external-data       put large tensors in a side file next to OUT\n"
    "  --shape NAME=DIMS     TorchScript input: the shape of forward's argument NAME\n"
    "\n"
    "examples:\n"
    "  onnxexec grad mlp.onnx -o mlp_grad.onnx\n"
    "  onnxexec grad net.onnx --of loss --wrt fc.weight --wrt fc.bias -o g.onnx\n";

static const char usage_gradcheck[] =
    "usage: onnxexec gradcheck MODEL [--wrt NAME]... [-i NAME=FILE]... [--seed N]\n"
    "                                [--checks N] [--eps E] [--atol A] [--rtol R]\n"
    "                                [--dim N] [--shape NAME=d0,d1,...]... [--json]\n"
    "\n"
    "Check MODEL's gradients (the autograd pass onnxexec grad uses) against central finite\n"
    "differences. With random inputs and random seeds s for every float output y, the\n"
    "scalar L = sum(s * y) is differentiated; for up to N elements of each checked value,\n"
    "(L(x+eps) - L(x-eps)) / 2eps must agree with the gradient: |a - n| <= atol + rtol *\n"
    "max(|a|, |n|). A float64 model gives a tight check (defaults eps 1e-6, atol 1e-5, rtol\n"
    "1e-3); a float32 model a loose one (eps 1e-3, atol 1e-2, rtol 2e-2).\n"
    "Exit status: 0 when every element passes, 1 when one does not (or on error).\n"
    "\n"
    "options:\n"
    "  --wrt NAME            a value to check; repeat for more (default: every float input\n"
    "                        and float initializer)\n"
    "  -i NAME=FILE          an input from a .npy or .pb file (others: normal(0,1) floats,\n"
    "                        zeros for integers)\n"
    "  --seed N              random seed (default 1)\n"
    "  --checks N            elements checked per value, picked at random (default 32)\n"
    "  --eps E, --atol A, --rtol R\n"
    "                        the step and tolerances (defaults above)\n"
    "  --dim N               the size given to inputs' symbolic dims (default 2)\n"
    "  --shape NAME=DIMS     TorchScript input: the shape of forward's argument NAME\n"
    "  --json                one JSON object on stdout\n"
    "\n"
    "example:\n"
    "  onnxexec gradcheck conv_f64.onnx --checks 100\n";

static int cmd_grad(int argc, char **argv) {
    const char *in = NULL, *out = NULL;
    const char *of[256], *wrt[4096];
    int n_of = 0, n_wrt = 0, n_shapes = 0;
    ox_save_options so = {0};
    static ox_tensor shapes[64];
    for (int a = 0; a < argc; a++) {
        const char *arg = argv[a];
        if (cli_is_help(arg)) return cli_usage(usage_grad);
        bool takes = strcmp(arg, "-o") == 0 || strcmp(arg, "--output") == 0 ||
                     strcmp(arg, "--of") == 0 || strcmp(arg, "--wrt") == 0 ||
                     strcmp(arg, "--shape") == 0;
        if (takes && a + 1 >= argc) return cli_errorf(EXIT_USAGE, "grad: %s needs a value", arg);
        if (strcmp(arg, "-o") == 0 || strcmp(arg, "--output") == 0) {
            out = argv[++a];
        } else if (strcmp(arg, "--of") == 0) {
            if (n_of == 256) return cli_errorf(EXIT_USAGE, "grad: too many --of");
            of[n_of++] = argv[++a];
        } else if (strcmp(arg, "--wrt") == 0) {
            if (n_wrt == 4096) return cli_errorf(EXIT_USAGE, "grad: too many --wrt");
            wrt[n_wrt++] = argv[++a];
        } else if (strcmp(arg, "--shape") == 0) {
            struct shape_opt so1 = {0};
            int rc1 = parse_shape_opt(argv[++a], &so1);
            if (rc1) return rc1;
            if (n_shapes == 64) return cli_errorf(EXIT_USAGE, "grad: too many --shape options");
            shapes[n_shapes] = (ox_tensor){.dtype = OX_FLOAT, .rank = so1.rank, .name = so1.name};
            memcpy(shapes[n_shapes++].dims, so1.dims, sizeof so1.dims);
            model_opts.input_shapes = shapes;
            model_opts.n_input_shapes = n_shapes;
        } else if (strcmp(arg, "--external-data") == 0) {
            so.external_data = true;
        } else if (arg[0] == '-' && arg[1]) {
            return cli_errorf(EXIT_USAGE, "grad: unknown option '%s' (see onnxexec grad --help)",
                              arg);
        } else if (!in) {
            in = arg;
        } else {
            return cli_errorf(EXIT_USAGE, "grad: one model at a time ('%s' is extra)", arg);
        }
    }
    if (!in || !out)
        return cli_errorf(EXIT_USAGE,
                          "grad: needs a model and -o OUT (usage: onnxexec grad MODEL -o "
                          "OUT)");
    if (cli_is_dir(out))
        return cli_errorf(EXIT_USAGE, "grad: %s is a folder: name the output file", out);
    double t0 = cli_now_ms();
    model_opts.no_optimize = true;
    ox_model *m;
    int rc = load_model(in, &m);
    if (rc) return rc;
    int n_out0 = ox_model_n_outputs(m);
    ox_grad_options go = {.of = of, .n_of = n_of, .wrt = wrt, .n_wrt = n_wrt};
    ox_status st = ox_model_gradient(m, &go);
    if (!st) st = ox_model_save(m, out, &so);
    if (st) {
        ox_model_free(m);
        return cli_errorf(EXIT_FAIL, "%s: %s", in, cli_lib_msg(st));
    }
    int n_grads = ox_model_n_outputs(m) - n_out0;
    printf("wrote %s: %d gradients, %d nodes, in %.0f ms\n", out, n_grads, ox_model_n_nodes(m),
           cli_now_ms() - t0);
    ox_model_free(m);
    return 0;
}

static int cmd_gradcheck(int argc, char **argv) {
    const char *in = NULL;
    const char *wrt[4096];
    int n_wrt = 0, n_inputs = 0, rc = 0, n_shapes = 0;
    ox_tensor inputs[64];
    static ox_tensor shapes[64];
    bool json = false;
    ox_gradcheck_options go = {0};
    for (int a = 0; a < argc && !rc; a++) {
        const char *arg = argv[a];
        if (cli_is_help(arg)) return cli_usage(usage_gradcheck);
        bool takes = strcmp(arg, "--wrt") == 0 || strcmp(arg, "-i") == 0 ||
                     strcmp(arg, "--shape") == 0 || strcmp(arg, "--seed") == 0 ||
                     strcmp(arg, "--checks") == 0 || strcmp(arg, "--eps") == 0 ||
                     strcmp(arg, "--atol") == 0 || strcmp(arg, "--rtol") == 0 ||
                     strcmp(arg, "--dim") == 0;
        if (takes && a + 1 >= argc)
            return cli_errorf(EXIT_USAGE, "gradcheck: %s needs a value", arg);
        const char *v = takes ? argv[++a] : NULL;
        double d;
        int64_t i64;
        if (strcmp(arg, "--json") == 0) {
            json = true;
        } else if (strcmp(arg, "--shape") == 0) {
            struct shape_opt so1 = {0};
            int rc1 = parse_shape_opt(v, &so1);
            if (rc1) return rc1;
            if (n_shapes == 64)
                return cli_errorf(EXIT_USAGE, "gradcheck: too many --shape options");
            shapes[n_shapes] = (ox_tensor){.dtype = OX_FLOAT, .rank = so1.rank, .name = so1.name};
            memcpy(shapes[n_shapes++].dims, so1.dims, sizeof so1.dims);
            model_opts.input_shapes = shapes;
            model_opts.n_input_shapes = n_shapes;
        } else if (strcmp(arg, "--wrt") == 0) {
            if (n_wrt == 4096) return cli_errorf(EXIT_USAGE, "gradcheck: too many --wrt");
            wrt[n_wrt++] = v;
        } else if (strcmp(arg, "-i") == 0) {
            const char *eq = strchr(v, '=');
            if (!eq || eq == v)
                return cli_errorf(EXIT_USAGE, "gradcheck: -i takes NAME=FILE, not '%s'", v);
            if (n_inputs == 64) return cli_errorf(EXIT_USAGE, "gradcheck: too many -i");
            char err[1200];
            if (read_tensor(eq + 1, &inputs[n_inputs], NULL, err, sizeof err))
                return cli_errorf(EXIT_FAIL, "%s", err);
            inputs[n_inputs++].name = strndup(v, (size_t)(eq - v));
        } else if (strcmp(arg, "--seed") == 0 || strcmp(arg, "--checks") == 0 ||
                   strcmp(arg, "--dim") == 0) {
            if (!cli_parse_i64(v, &i64) || i64 < 1 || i64 > INT32_MAX)
                return cli_errorf(EXIT_USAGE, "gradcheck: %s takes a positive number, not '%s'",
                                  arg, v);
            if (arg[2] == 's')
                go.seed = (uint64_t)i64;
            else if (arg[2] == 'c')
                go.max_checks = (int)i64;
            else
                go.symbolic_dim = i64;
        } else if (strcmp(arg, "--eps") == 0 || strcmp(arg, "--atol") == 0 ||
                   strcmp(arg, "--rtol") == 0) {
            if (!parse_double(v, &d) || !(d > 0))
                return cli_errorf(EXIT_USAGE, "gradcheck: %s takes a positive number, not '%s'",
                                  arg, v);
            if (arg[2] == 'e')
                go.eps = d;
            else if (arg[2] == 'a')
                go.atol = d;
            else
                go.rtol = d;
        } else if (arg[0] == '-' && arg[1]) {
            return cli_errorf(
                EXIT_USAGE, "gradcheck: unknown option '%s' (see onnxexec gradcheck --help)", arg);
        } else if (!in) {
            in = arg;
        } else {
            return cli_errorf(EXIT_USAGE, "gradcheck: one model at a time ('%s' is extra)", arg);
        }
    }
    if (!in)
        return cli_errorf(EXIT_USAGE, "gradcheck: needs a model (usage: onnxexec gradcheck MODEL)");
    model_opts.no_optimize = true;
    ox_model *m;
    rc = load_model(in, &m);
    if (rc) return rc;
    go.wrt = wrt;
    go.n_wrt = n_wrt;
    go.inputs = inputs;
    go.n_inputs = n_inputs;
    ox_gradcheck_report rep;
    ox_status st = ox_gradcheck(m, &go, &rep);
    ox_model_free(m);
    for (int i = 0; i < n_inputs; i++) {
        free((char *)inputs[i].name);
        ox_tensor_free_data(&inputs[i]);
    }
    if (st) return cli_errorf(EXIT_FAIL, "%s: %s", in, cli_lib_msg(st));
    if (json) {
        printf("{\"model\": ");
        cli_json_str(stdout, in);
        printf(", \"passed\": %s, \"eps\": %g, \"atol\": %g, \"rtol\": %g, \"values\": [",
               rep.passed ? "true" : "false", rep.eps, rep.atol, rep.rtol);
        for (int i = 0; i < rep.n_values; i++) {
            const ox_gradcheck_value *r = &rep.values[i];
            printf("%s{\"name\": ", i ? ", " : "");
            cli_json_str(stdout, r->name);
            printf(", \"checked\": %d, \"passed\": %s, \"max_abs_err\": %.6g, \"max_rel_err\": "
                   "%.6g, \"worst_index\": %lld, \"analytic\": %.17g, \"numeric\": %.17g, "
                   "\"max_abs_numeric\": %.6g}",
                   r->n_checked, r->passed ? "true" : "false", r->max_abs_err, r->max_rel_err,
                   (long long)r->worst_index, r->analytic, r->numeric, r->max_abs_numeric);
        }
        printf("]}\n");
    } else {
        printf("%-32s %7s %12s %12s  %s\n", "value", "checked", "max abs err", "max rel err",
               "worst element (analytic vs numeric)");
        for (int i = 0; i < rep.n_values; i++) {
            const ox_gradcheck_value *r = &rep.values[i];
            printf("%-32s %7d %12.3g %12.3g  [%lld] %.9g vs %.9g%s\n", r->name, r->n_checked,
                   r->max_abs_err, r->max_rel_err, (long long)r->worst_index, r->analytic,
                   r->numeric, r->passed ? "" : "  FAIL");
        }
        printf("%s (eps %g, atol %g, rtol %g)\n", rep.passed ? "PASS" : "FAIL", rep.eps, rep.atol,
               rep.rtol);
    }
    rc = rep.passed ? 0 : EXIT_FAIL;
    ox_gradcheck_report_free(&rep);
    return rc;
}

/* ---- main ------------------------------------------------------------------------------ */

static int cmd_help(int argc, char **argv) {
    if (argc == 0) return fputs(usage_main, stdout), 0;
    if (strcmp(argv[0], "run") == 0) return cli_usage(usage_run);
    if (strcmp(argv[0], "test") == 0) return cli_usage(usage_test);
    if (strcmp(argv[0], "info") == 0) return cli_usage(usage_info);
    if (strcmp(argv[0], "graph") == 0) return cli_usage(usage_graph);
    if (strcmp(argv[0], "plan") == 0) return cli_usage(usage_plan);
    if (strcmp(argv[0], "bench") == 0) return cli_usage(usage_bench);
    if (strcmp(argv[0], "convert") == 0) return cli_usage(usage_convert);
    if (strcmp(argv[0], "grad") == 0) return cli_usage(usage_grad);
    if (strcmp(argv[0], "gradcheck") == 0) return cli_usage(usage_gradcheck);
    if (strcmp(argv[0], "train") == 0) return cmd_train(1, (char *[]){"--help", NULL});
    if (strcmp(argv[0], "compare") == 0) return cmd_compare(1, (char *[]){"--help", NULL});
    if (strcmp(argv[0], "help") == 0) return fputs(usage_main, stdout), 0;
    return cli_errorf(
        EXIT_USAGE,
        "help: unknown command '%s' (commands: run, test, bench, convert, info, grad, "
        "gradcheck, train, compare)",
        argv[0]);
}

char *openblas_get_corename(void); /* OpenBLAS's own extensions (cblas.h) */
char *openblas_get_config(void);

/* The OpenBLAS kernels this CPU can run, when OpenBLAS chose older ones: its run-time
 * detection knows the CPU models of its release only, and on newer ones (an Emerald Rapids
 * VM here) falls back to Prescott's SSE3 kernels, 34 GFLOP/s where SkylakeX's reach 163.
 * NULL when its choice stands. */
static const char *openblas_better_core(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    const char *core = openblas_get_corename();
    if (!core) return NULL;
    __builtin_cpu_init();
    bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                  __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
                  __builtin_cpu_supports("avx512cd");
    bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    static const char *const with_avx512[] = {"SkylakeX", "Cooperlake", "SapphireRapids", "Zen4"};
    static const char *const with_avx2[] = {"Haswell",        "Zen", "SkylakeX", "Cooperlake",
                                            "SapphireRapids", "Zen4"};
    bool has512 = false, has2 = false;
    for (size_t i = 0; i < sizeof with_avx512 / sizeof *with_avx512; i++)
        has512 |= strcasecmp(core, with_avx512[i]) == 0;
    for (size_t i = 0; i < sizeof with_avx2 / sizeof *with_avx2; i++)
        has2 |= strcasecmp(core, with_avx2[i]) == 0;
    if (avx512 && !has512) return "SkylakeX";
    if (avx2 && !avx512 && !has2) return "Haswell";
#endif
    return NULL;
}

int main(int argc, char **argv) {
    /* OpenBLAS starts its own threads when it loads and lets them spin for a while, but the
     * library runs OpenBLAS on one thread inside its own pool: those threads would only
     * compete with the pool for the cores. With OPENBLAS_NUM_THREADS=1 at load OpenBLAS
     * starts none, so the tool restarts itself once with it set (unless the user set it).
     * OpenBLAS also picks its kernels when it loads: where it picked older ones than the CPU
     * runs, the same restart sets OPENBLAS_CORETYPE (unless the user set it). */
    bool restart = false;
    if (!getenv("OPENBLAS_NUM_THREADS")) {
        setenv("OPENBLAS_NUM_THREADS", "1", 1);
        restart = true;
    }
    const char *core = getenv("OPENBLAS_CORETYPE") ? NULL : openblas_better_core();
    if (core) {
        setenv("OPENBLAS_CORETYPE", core, 1);
        restart = true;
    }
    if (restart) execv("/proc/self/exe", argv); /* on failure, go on as we are */
    if (argc < 2) {
        fputs(usage_main, stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (cli_is_help(cmd)) return cmd_help(0, NULL);
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
        printf("onnxexec %s\n", ox_version());
        printf("BLAS: %s\n", openblas_get_config());
        return 0;
    }
    if (strcmp(cmd, "help") == 0) return cmd_help(argc - 2, argv + 2);
    static const char *const loads_model[] = {"run",       "test",  "bench",   "info",
                                              "graph",     "plan",  "convert", "grad",
                                              "gradcheck", "train", "compare"};
    for (size_t i = 0; i < sizeof loads_model / sizeof *loads_model; i++)
        if (strcmp(cmd, loads_model[i]) == 0) {
            int rc = cli_take_limits(&argc, argv, 2, strcmp(cmd, "train") == 0);
            if (rc) return rc;
            model_opts.limits = cli_limits;
        }
    if (strcmp(cmd, "run") == 0 || strcmp(cmd, "test") == 0 || strcmp(cmd, "bench") == 0 ||
        strcmp(cmd, "info") == 0 || strcmp(cmd, "graph") == 0 || strcmp(cmd, "plan") == 0) {
        int k = 2;
        for (int i = 2; i < argc; i++) { /* a model or folder is never named --no-optimize */
            if (strcmp(argv[i], "--no-optimize") == 0)
                model_opts.no_optimize = true;
            else
                argv[k++] = argv[i];
        }
        argc = k;
    }
    if (strcmp(cmd, "run") == 0) return cmd_run(argc - 2, argv + 2);
    if (strcmp(cmd, "test") == 0) return cmd_test(argc - 2, argv + 2);
    if (strcmp(cmd, "bench") == 0) return cmd_bench(argc - 2, argv + 2);
    if (strcmp(cmd, "info") == 0) return cmd_info(argc - 2, argv + 2);
    if (strcmp(cmd, "graph") == 0) return cmd_graph(argc - 2, argv + 2);
    if (strcmp(cmd, "plan") == 0) return cmd_plan(argc - 2, argv + 2);
    if (strcmp(cmd, "convert") == 0) {
        model_opts.no_optimize = true; /* as read, unless --optimize */
        return cmd_convert(argc - 2, argv + 2);
    }
    if (strcmp(cmd, "grad") == 0) return cmd_grad(argc - 2, argv + 2);
    if (strcmp(cmd, "gradcheck") == 0) return cmd_gradcheck(argc - 2, argv + 2);
    if (strcmp(cmd, "train") == 0) return cmd_train(argc - 2, argv + 2);
    if (strcmp(cmd, "compare") == 0) return cmd_compare(argc - 2, argv + 2);
    return cli_errorf(EXIT_USAGE, "unknown command '%s' (try onnxexec --help)", cmd);
}
