/* The broken-model corpus of tests/bad/ (made by tests/bad/make_bad.py) through the library:
 * - every file that breaks one validation rule fails with the exact status code, at the
 *   step where it must (loading, or the first run, which plans), and a message that holds
 *   the key words: what is wrong and where;
 * - every limit of ox_limits: a model just over it fails with OX_E_LIMIT naming the limit,
 *   and the same model loads (and runs) once the limit is raised to what it needs;
 * - external data stays in the model's folder: symlinks made here that lead out (to a file,
 *   through a folder, absolute) are refused, one that stays inside is followed;
 * - pickles that name os.system or builtins.eval with an argument that would create a file
 *   are refused, and the file does not exist afterwards: nothing ran.
 *
 *     test_bad_models BADDIR TMPDIR
 */
#include "harness.h"

#include <errno.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

static char bad_dir[PATH_MAX], tmp_dir[PATH_MAX];

static const char *in_bad(const char *name) {
    static char buf[PATH_MAX + 64];
    snprintf(buf, sizeof buf, "%s/%s", bad_dir, name);
    return buf;
}

static const char *in_tmp(const char *name) {
    static char buf[PATH_MAX + 64];
    snprintf(buf, sizeof buf, "%s/%s", tmp_dir, name);
    return buf;
}

/* TorchScript archives of the corpus take forward(x: float[2,3]). */
static const ox_tensor ts_x = {.dtype = OX_FLOAT, .rank = 2, .dims = {2, 3}, .name = "x"};

static ox_model_options opts(const char *path) {
    ox_model_options o = {0};
    size_t n = strlen(path);
    if (n > 3 && strcmp(path + n - 3, ".pt") == 0) {
        o.input_shapes = &ts_x;
        o.n_input_shapes = 1;
    }
    return o;
}

/* Load `path`; when it loads, run it once on zeros of its inputs' declared types and shapes
 * (dims not fixed: 1). The status of the step that failed (*stage "load" or "run"), or OX_OK.
 * With `y`, the first output's first six floats are copied there. */
static ox_status load_run(const char *path, const ox_model_options *mo,
                          const ox_session_options *so, const char **stage, float *y) {
    ox_model *m = NULL;
    ox_session *s = NULL;
    *stage = "load";
    ox_status st = ox_model_load_with(path, mo, &m);
    if (st) return st;
    *stage = "run";
    int n = ox_model_n_inputs(m);
    ox_tensor in[8] = {{0}};
    for (int i = 0; i < n && i < 8 && !st; i++) {
        st = ox_model_input(m, i, &in[i], NULL);
        for (int d = 0; d < in[i].rank; d++)
            if (in[i].dims[d] < 0) in[i].dims[d] = 1;
        int64_t numel = ox_tensor_numel(&in[i]);
        in[i].data = calloc((size_t)(numel ? numel : 1), ox_dtype_size(in[i].dtype));
        if (!in[i].data) st = OX_E_NOMEM;
    }
    if (!st) st = ox_session_create(m, so, &s);
    const ox_tensor *out[8];
    if (!st && ox_model_n_outputs(m) > 8) st = ox_err(OX_E_INVALID, "too many outputs");
    if (!st) st = ox_session_run(s, in, n, out);
    if (!st && y) {
        CHECK(out[0]->dtype == OX_FLOAT && ox_tensor_numel(out[0]) == 6, "%s: output", path);
        if (out[0]->dtype == OX_FLOAT && ox_tensor_numel(out[0]) == 6)
            memcpy(y, out[0]->data, 6 * sizeof(float));
    }
    for (int i = 0; i < n && i < 8; i++) free(in[i].data);
    ox_session_free(s);
    ox_model_free(m);
    return st;
}

/* `path` must fail at `stage` with `code` and a message holding every '|'-separated word. */
static void expect_fail(const char *path, const ox_model_options *mo, const ox_session_options *so,
                        const char *stage, ox_status code, const char *words, int line) {
    const char *at;
    ox_status st = load_run(path, mo, so, &at, NULL);
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", ox_errmsg());
    bool ok = st == code && strcmp(at, stage) == 0;
    CHECK(ok, "line %d: %s: %s at %s (%s), expected %s at %s", line, path, ox_status_name(st), at,
          msg, ox_status_name(code), stage);
    for (const char *w = words; *w;) {
        size_t k = strcspn(w, "|");
        char word[256];
        snprintf(word, sizeof word, "%.*s", (int)k, w);
        bool has = strstr(msg, word) != NULL;
        CHECK(has, "line %d: %s: the message lacks '%s': %s", line, path, word, msg);
        ok &= has;
        w += k + (w[k] == '|');
    }
    if (ok) printf("ok   %-28s %-16s %s\n", strrchr(path, '/') + 1, ox_status_name(st), msg);
}

static void expect_ok(const char *path, const ox_model_options *mo, const ox_session_options *so,
                      int line) {
    const char *at;
    ox_status st = load_run(path, mo, so, &at, NULL);
    CHECK(st == OX_OK, "line %d: %s: %s at %s: %s", line, path, ox_status_name(st), at,
          ox_errmsg());
}

/* ---- the corpus: one file per validation rule ------------------------------------------ */

static void corpus(void) {
    static const struct {
        const char *file, *stage;
        ox_status code;
        const char *words;
    } cases[] = {
        {"no_such_model.onnx", "load", OX_E_IO, "no_such_model.onnx|No such file"},
        {"empty.onnx", "load", OX_E_INVALID, "empty.onnx|empty file"},
        {"truncated.onnx", "load", OX_E_INVALID, "truncated.onnx|not an ONNX model"},
        {"garbage.onnx", "load", OX_E_INVALID, "garbage.onnx|not an ONNX model"},
        {"raw_data_size.onnx", "load", OX_E_INVALID,
         "initializer 'w'|raw_data has 10 bytes|float[2,3] needs 24"},
        {"negative_dim.onnx", "load", OX_E_INVALID, "initializer 'w'|dimension 0 is negative (-2)"},
        {"overflow_dims.onnx", "load", OX_E_INVALID, "initializer 'w'|dims overflow"},
        {"huge_dims.onnx", "load", OX_E_LIMIT,
         "initializer 'w'|4398046511104 bytes|tensor_bytes=17179869184|--limit tensor_bytes="},
        {"cycle.onnx", "load", OX_E_INVALID, "cycle|'neg0' (Neg)"},
        {"duplicate_output.onnx", "load", OX_E_INVALID,
         "'y' is produced by two nodes|'relu0' (Relu)|'neg0' (Neg)"},
        {"undefined_input.onnx", "load", OX_E_INVALID,
         "node 'add0' (Add) input 'ghost'|no graph input, initializer or node output"},
        {"unknown_op.onnx", "run", OX_E_UNSUPPORTED, "node 'frob0'|unknown op 'FrobnicateOp'"},
        {"unknown_domain.onnx", "run", OX_E_UNSUPPORTED,
         "node 'relu0'|unknown op 'Relu' in domain 'com.example'"},
        {"wrong_attr_type.onnx", "run", OX_E_INVALID,
         "node 'softmax0' (Softmax)|attribute 'axis' must be of type int, got string"},
        {"missing_attr.onnx", "run", OX_E_INVALID,
         "node 'concat0' (Concat)|attribute 'axis' is required"},
        {"no_first_output.onnx", "run", OX_E_INVALID,
         "node 'topk0' (TopK)|TopK needs its first output"},
        {"scan8_batch_mismatch.onnx", "run", OX_E_SHAPE,
         "node 'scan0' (Scan)|input 2 has another batch axis where input 1's is 3"},
        {"ir_version_99.onnx", "load", OX_E_UNSUPPORTED, "IR version 99|1 to 13"},
        {"ext_absolute.onnx", "load", OX_E_INVALID,
         "initializer 'w'|'/etc/hostname' is an absolute path"},
        {"ext_dotdot.onnx", "load", OX_E_INVALID,
         "initializer 'w'|'../bad/ext_data.bin' has a '..' component"},
        {"ext_past_end.onnx", "load", OX_E_INVALID,
         "initializer 'w'|offset 16 length 24 lies past the end of 'ext_data.bin' (24 bytes)"},
        {"ts_truncated.pt", "load", OX_E_INVALID, "ts_truncated.pt|not a zip archive"},
        {"ts_zip_bomb.pt", "load", OX_E_LIMIT,
         "85899346008 bytes once inflated|model_bytes=68719476736|--limit model_bytes="},
        {"ts_pickle_system.pt", "load", OX_E_UNSUPPORTED,
         "data.pkl|GLOBAL|'os.system' is not allowed|nothing is run"},
        {"ts_pickle_eval.pt", "load", OX_E_UNSUPPORTED,
         "data.pkl|GLOBAL|'builtins.eval' is not allowed"},
        {"ts_memo_index.pt", "load", OX_E_INVALID, "data.pkl|LONG_BINPUT|memo index 268435440"},
        {"ts_truncated_storage.pt", "load", OX_E_INVALID,
         "storage data/0 holds 12 bytes, fewer than its 6 elements"},
        {"fused_attention_bad_perm.onnx", "run", OX_E_INVALID,
         "node 'fa0' (FusedAttention)|view view_q: a perm of the wrong rank"},
        {"fused_attention_cut_program.onnx", "run", OX_E_INVALID,
         "node 'fa0' (FusedAttention)|view view_q: a truncated Gather"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *p = in_bad(cases[i].file);
        ox_model_options o = opts(p);
        expect_fail(p, &o, NULL, cases[i].stage, cases[i].code, cases[i].words, __LINE__);
    }
    /* and the good ones load and run */
    static const char *const good[] = {"good_relu.onnx", "ext_data.onnx",  "two_nodes.onnx",
                                       "rank3.onnx",     "nested_if.onnx", "long_name.onnx",
                                       "ts_good.pt",     "ts_inflate.pt",  "ts_nested_if.pt"};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        const char *p = in_bad(good[i]);
        ox_model_options o = opts(p);
        expect_ok(p, &o, NULL, __LINE__);
    }
}

/* ---- limits ------------------------------------------------------------------------------ */

static uint64_t file_size(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 ? (uint64_t)sb.st_size : 0;
}

/* `file` with limits `over` fails naming the limit (and the words); with `at` it loads and
 * runs. */
static void over_then_at(const char *file, ox_limits over, ox_limits at, const char *words,
                         int line) {
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s", in_bad(file));
    ox_model_options o = opts(path);
    o.limits = over;
    expect_fail(path, &o, NULL, "load", OX_E_LIMIT, words, line);
    o.limits = at;
    expect_ok(path, &o, NULL, line);
}

static void limits(void) {
    uint64_t s = file_size(in_bad("good_relu.onnx"));
    char w[256];
    snprintf(w, sizeof w, "the file has %llu bytes|model_bytes=%llu|ox_limits.model_bytes",
             (unsigned long long)s, (unsigned long long)s - 1);
    over_then_at("good_relu.onnx", (ox_limits){.model_bytes = s - 1}, (ox_limits){.model_bytes = s},
                 w, __LINE__);
    /* external data counts: the file and the 24 bytes it reads */
    s = file_size(in_bad("ext_data.onnx"));
    snprintf(w, sizeof w, "external data it reads take %llu bytes|model_bytes=%llu",
             (unsigned long long)s + 24, (unsigned long long)s + 23);
    over_then_at("ext_data.onnx", (ox_limits){.model_bytes = s + 23},
                 (ox_limits){.model_bytes = s + 24}, w, __LINE__);
    over_then_at("ext_data.onnx", (ox_limits){.tensor_bytes = 23}, (ox_limits){.tensor_bytes = 24},
                 "initializer 'w'|float[2,3] takes 24 bytes|tensor_bytes=23|--limit tensor_bytes=N",
                 __LINE__);
    over_then_at("rank3.onnx", (ox_limits){.rank = 2}, (ox_limits){.rank = 3},
                 "value 'x' has rank 3|rank=2|ox_limits.rank", __LINE__);
    over_then_at("two_nodes.onnx", (ox_limits){.nodes = 1}, (ox_limits){.nodes = 2},
                 "at least 2 nodes|nodes=1|--limit nodes=N", __LINE__);
    over_then_at("nested_if.onnx", (ox_limits){.subgraph_depth = 1},
                 (ox_limits){.subgraph_depth = 2},
                 "node 'if_inner' (If)|nesting level 2|subgraph_depth=1", __LINE__);
    over_then_at("long_name.onnx", (ox_limits){.string_length = 99},
                 (ox_limits){.string_length = 100},
                 "string of 100 bytes (NodeProto.name)|string_length=99", __LINE__);

    /* TorchScript: the archive and its records once inflated, w (float[2,3]), the two nodes
     * relu(x + w), the longest pickled string ('training'), ifs on run-time values */
    s = file_size(in_bad("ts_good.pt"));
    snprintf(w, sizeof w, "the file has %llu bytes|model_bytes=%llu", (unsigned long long)s,
             (unsigned long long)s - 1);
    over_then_at("ts_good.pt", (ox_limits){.model_bytes = s - 1},
                 (ox_limits){.model_bytes = 1 << 20}, w, __LINE__);
    over_then_at("ts_inflate.pt", (ox_limits){.model_bytes = 1 << 20},
                 (ox_limits){.model_bytes = 8 << 20}, "once inflated|model_bytes=1048576",
                 __LINE__);
    over_then_at("ts_good.pt", (ox_limits){.tensor_bytes = 23}, (ox_limits){.tensor_bytes = 24},
                 "tensor data/0 takes 24 bytes|tensor_bytes=23", __LINE__);
    over_then_at("ts_good.pt", (ox_limits){.rank = 1}, (ox_limits){.rank = 2},
                 "tensor data/0 has rank 2|rank=1", __LINE__);
    over_then_at("ts_good.pt", (ox_limits){.nodes = 1}, (ox_limits){.nodes = 2},
                 "code/__torch__.py:9|at least 2 nodes|nodes=1", __LINE__);
    over_then_at("ts_good.pt", (ox_limits){.string_length = 7}, (ox_limits){.string_length = 8},
                 "data.pkl|a string of 8 bytes|string_length=7", __LINE__);
    over_then_at("ts_nested_if.pt", (ox_limits){.subgraph_depth = 1},
                 (ox_limits){.subgraph_depth = 2}, "nesting level 2|subgraph_depth=1", __LINE__);

    /* plan_bytes: good_relu's plan takes 64 bytes (its [2,3] output, aligned), at the first
     * run; from the model's limits, or the session's option, which wins */
    const char *p = in_bad("good_relu.onnx");
    ox_model_options o = {.limits = {.plan_bytes = 63}};
    expect_fail(p, &o, NULL, "run", OX_E_LIMIT,
                "takes 64 bytes (arena 64|plan_bytes=63|ox_session_options.plan_bytes", __LINE__);
    o.limits.plan_bytes = 64;
    expect_ok(p, &o, NULL, __LINE__);
    ox_session_options so = {.n_threads = 1, .plan_bytes = 63};
    expect_fail(p, NULL, &so, "run", OX_E_LIMIT, "plan_bytes=63", __LINE__);
    o.limits.plan_bytes = 63;
    so.plan_bytes = 64;
    expect_ok(p, &o, &so, __LINE__);

    /* limits out of range are refused before the file is read */
    static const struct {
        ox_limits l;
        const char *words;
    } bad[] = {
        {{.rank = OX_MAX_RANK + 1}, "ox_limits.rank 17"},
        {{.rank = -1}, "ox_limits.rank -1"},
        {{.nodes = -5}, "ox_limits.nodes -5"},
        {{.subgraph_depth = OX_LIMIT_MAX_SUBGRAPH_DEPTH + 1}, "ox_limits.subgraph_depth 257"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        o = (ox_model_options){.limits = bad[i].l};
        expect_fail(p, &o, NULL, "load", OX_E_INVALID, bad[i].words, __LINE__);
    }
    /* and the defaults are what the header says */
    CHECK(strcmp(ox_status_name(OX_E_LIMIT), "OX_E_LIMIT") == 0, "ox_status_name");
    CHECK(strcmp(ox_status_name((ox_status)-100), "?") == 0, "ox_status_name of an unknown code");
}

/* ---- external data confinement ----------------------------------------------------------- */

static bool copy_file(const char *from, const char *to) {
    FILE *f = fopen(from, "rb"), *t = fopen(to, "wb");
    char buf[4096];
    size_t n;
    bool ok = f && t;
    while (ok && (n = fread(buf, 1, sizeof buf, f)) > 0) ok = fwrite(buf, 1, n, t) == n;
    if (f) fclose(f);
    if (t) ok &= fclose(t) == 0;
    return ok;
}

/* tmp/<name>/ made afresh, holding `model` (from the corpus). */
static const char *folder_with(const char *name, const char *model) {
    static char dir[PATH_MAX + 64];
    char cmd[2 * sizeof dir + 64];
    snprintf(dir, sizeof dir, "%s", in_tmp(name));
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", dir, dir);
    CHECK(system(cmd) == 0, "%s", cmd);
    char to[PATH_MAX + 128];
    snprintf(to, sizeof to, "%s/%s", dir, model);
    CHECK(copy_file(in_bad(model), to), "copy %s to %s", model, to);
    return dir;
}

static void external_data(void) {
    char path[PATH_MAX + 128], target[PATH_MAX + 128];
    /* outside.bin and outside_dir/ext_data.bin lie beside the folders, not in them */
    CHECK(copy_file(in_bad("ext_data.bin"), in_tmp("outside.bin")), "outside.bin");
    mkdir(in_tmp("outside_dir"), 0755);
    CHECK(copy_file(in_bad("ext_data.bin"), in_tmp("outside_dir/ext_data.bin")), "outside_dir");

    /* a symlink that stays inside the folder is followed: y = 0 + w = 0, 1, ..., 5 */
    const char *d = folder_with("ext_in", "ext_data.onnx");
    snprintf(path, sizeof path, "%s/real", d);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/real/w.bin", d);
    CHECK(copy_file(in_bad("ext_data.bin"), path), "real/w.bin");
    snprintf(path, sizeof path, "%s/ext_data.bin", d);
    CHECK(symlink("real/w.bin", path) == 0, "symlink %s: %s", path, strerror(errno));
    snprintf(path, sizeof path, "%s/ext_data.onnx", d);
    float y[6] = {0};
    const char *at;
    ox_status st = load_run(path, NULL, NULL, &at, y);
    CHECK(st == OX_OK, "a symlink inside the folder: %s", ox_errmsg());
    for (int i = 0; i < 6; i++) CHECK(y[i] == (float)i, "y[%d] = %g", i, y[i]);

    /* a symlink to a file beside the folder */
    d = folder_with("ext_out", "ext_data.onnx");
    snprintf(path, sizeof path, "%s/ext_data.bin", d);
    CHECK(symlink("../outside.bin", path) == 0, "symlink %s: %s", path, strerror(errno));
    snprintf(path, sizeof path, "%s/ext_data.onnx", d);
    expect_fail(path, NULL, NULL, "load", OX_E_INVALID,
                "initializer 'w'|location 'ext_data.bin' leads (through a symlink) to|outside.bin|"
                "outside the model's folder",
                __LINE__);
    /* the same from memory, with that folder */
    FILE *f = fopen(path, "rb");
    unsigned char buf[4096];
    size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
    if (f) fclose(f);
    ox_model *m = NULL;
    st = ox_model_load_buffer_with(buf, n, d, NULL, &m);
    CHECK(st == OX_E_INVALID && strstr(ox_errmsg(), "outside the model's folder"),
          "from memory: %s: %s", ox_status_name(st), ox_errmsg());
    ox_model_free(m);

    /* an absolute symlink to the corpus' own ext_data.bin */
    d = folder_with("ext_abs", "ext_data.onnx");
    snprintf(path, sizeof path, "%s/ext_data.bin", d);
    snprintf(target, sizeof target, "%s", in_bad("ext_data.bin"));
    CHECK(symlink(target, path) == 0, "symlink %s: %s", path, strerror(errno));
    snprintf(path, sizeof path, "%s/ext_data.onnx", d);
    expect_fail(path, NULL, NULL, "load", OX_E_INVALID, "outside the model's folder", __LINE__);

    /* a folder of the location that is a symlink leading out */
    d = folder_with("ext_dir", "ext_data_sub.onnx");
    snprintf(path, sizeof path, "%s/sub", d);
    CHECK(symlink("../outside_dir", path) == 0, "symlink %s: %s", path, strerror(errno));
    snprintf(path, sizeof path, "%s/ext_data_sub.onnx", d);
    expect_fail(path, NULL, NULL, "load", OX_E_INVALID,
                "location 'sub/ext_data.bin' leads (through a symlink)|outside_dir/ext_data.bin",
                __LINE__);

    /* a dangling symlink, and a missing file: not found */
    d = folder_with("ext_gone", "ext_data.onnx");
    snprintf(path, sizeof path, "%s/ext_data.bin", d);
    CHECK(symlink("nowhere.bin", path) == 0, "symlink %s: %s", path, strerror(errno));
    snprintf(path, sizeof path, "%s/ext_data.onnx", d);
    expect_fail(path, NULL, NULL, "load", OX_E_IO, "ext_data.bin|No such file", __LINE__);
}

/* ---- pickles that would run something ------------------------------------------------------ */

static void pickles_run_nothing(void) {
    char old[PATH_MAX];
    CHECK(getcwd(old, sizeof old) != NULL, "getcwd");
    CHECK(chdir(tmp_dir) == 0, "chdir %s", tmp_dir);
    static const char *const files[] = {"ts_pickle_system.pt", "ts_pickle_eval.pt"};
    for (int i = 0; i < 2; i++) {
        unlink("pwned");
        const char *p = in_bad(files[i]);
        ox_model_options o = opts(p);
        ox_model *m = NULL;
        ox_status st = ox_model_load_with(p, &o, &m);
        CHECK(st == OX_E_UNSUPPORTED, "%s: %s", p, ox_errmsg());
        ox_model_free(m);
        CHECK(access("pwned", F_OK) != 0 && errno == ENOENT,
              "%s: the file 'pwned' exists: something ran", files[i]);
    }
    CHECK(chdir(old) == 0, "chdir back");
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: test_bad_models BADDIR TMPDIR\n");
        return 2;
    }
    mkdir(argv[2], 0755);
    if (!realpath(argv[1], bad_dir) || !realpath(argv[2], tmp_dir)) {
        fprintf(stderr, "test_bad_models: %s or %s: %s\n", argv[1], argv[2], strerror(errno));
        return 2;
    }
    corpus();
    limits();
    external_data();
    pickles_run_nothing();
    return harness_finish();
}
