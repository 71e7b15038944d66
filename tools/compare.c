/* onnxexec compare — find where two executions of a model part ways (issue 9).
 *
 *     onnxexec compare model.onnx cpu cpu:noopt
 *     onnxexec compare model.onnx cpu torch_dump/ -i x=x.npy --html report.html
 *     onnxexec compare model.onnx cpu faulty.onnx --json --reduce case/
 *
 * A thin client of the parity section of include/onnxexec.h (ox_compare, ox_model_run_all,
 * ox_compare_reduce): it turns the command line into two sides, reads reference values
 * (backend-layout folders, folders of .npy/.pb files, .npz archives), makes the inputs, and
 * prints the report as a table, JSON or an HTML page with a drawing of the graph. The drawing
 * reads the graph through the library's internal IR (executor/session.h, graph/ir.h).
 * tools/onnxexec.c's main calls cmd_compare. Exit status: 0 agree, 1 diverge, 2 usage
 * error, 3 could not run.
 */
#include "onnxexec.h"
#include "tools/cli.h"

#include "executor/session.h"
#include "graph/ir.h"
#include "importer/torchscript/zip.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define EXIT_DIVERGE 1
#define EXIT_USAGE   2
#define EXIT_NORUN   3

int cmd_compare(int argc, char **argv);

static const char usage_compare[] =
    "usage: onnxexec compare MODEL A B [-i NAME=FILE]... [--inputs DIR] [--seed N]\n"
    "                        [--rtol X] [--atol X] [--outputs-only] [--json] [--all]\n"
    "                        [--html FILE] [--reduce DIR] [--threads N]\n"
    "                        [--shape NAME=d0,d1,...]...\n"
    "\n"
    "Compare two executions of MODEL value by value, outputs and intermediates, in the\n"
    "graph's order, and name the first node where they part ways: its value, op,\n"
    "attributes and input shapes, the error metrics, and how the error grows along the\n"
    "path to the outputs.\n"
    "\n"
    "sides (A and B):\n"
    "  cpu                   MODEL run by onnxexec, graph optimized (as `onnxexec run`)\n"
    "  cpu:noopt             MODEL run as the file has it (no fusions, no folding)\n"
    "  cuda[:N][:fp32|tf32|fp16][:noopt]\n"
    "                        MODEL on GPU N (default 0) in that precision (default fp32),\n"
    "                        optimized for a GPU unless noopt (a QDQ model's convolutions,\n"
    "                        sums and max pools stay float, not the CPU's 8-bit ones); a\n"
    "                        side in fp16 or tf32 is held to float16's tolerances. Builds\n"
    "                        without CUDA say so.\n"
    "  DIR                   reference values: a backend-test folder\n"
    "                        (DIR/test_data_set_0/output_K.pb, named by the files' tensor\n"
    "                        names, else by MODEL's K-th output), or a folder of NAME.npy\n"
    "                        and NAME.pb files, intermediates included (a '/' in a value\n"
    "                        name is written %2F)\n"
    "  FILE.npz              reference values, one array per value name (numpy.savez)\n"
    "  FILE.npy, FILE.pb     one reference value: the .pb's tensor name, else the file\n"
    "                        name, else MODEL's output when it has one\n"
    "  OTHER.onnx, OTHER.pt  another model that should compute the same thing, run by\n"
    "                        onnxexec (optimized) and compared by value name\n"
    "\n"
    "A value diverges when its relative L2 error ||a-b||/||a|| is over rtol and its largest\n"
    "absolute error over atol (floats), when any element differs (integers, booleans,\n"
    "strings), when the shapes differ, or when NaN or Inf appear on one side only.\n"
    "\n"
    "options:\n"
    "  -i, --input NAME=FILE an input of MODEL from .npy or .pb (FILE alone: the next input\n"
    "                        not named by another -i)\n"
    "  --inputs DIR          inputs from a backend-test folder (DIR/test_data_set_0 or DIR:\n"
    "                        input_K.pb); by default a side that is such a folder gives them\n"
    "  --seed N              seed of the random inputs (default 0): inputs given no other way\n"
    "                        get the values `onnxexec run --seed N` makes (floats uniform in\n"
    "                        [-1,1), integers in [0,10))\n"
    "  --shape NAME=d0,d1,.. shape of a random input, or the value of a symbolic dimension\n"
    "                        (--shape batch=4); for TorchScript archives, the shapes of\n"
    "                        forward's arguments\n"
    "  --rtol X, --atol X    tolerances for every float value (default per type: float32\n"
    "                        1e-4 and 1e-6, float16 1e-2 and 1e-3, bfloat16 2e-2 and 1e-2,\n"
    "                        float64 1e-10 and 1e-12)\n"
    "  --outputs-only        compare MODEL's outputs only\n"
    "  --threads N           threads of the runs (default: number of cores)\n"
    "  --json                one JSON object on stdout instead of the table\n"
    "  --all                 print every value in the table (by default, over 60 values, the\n"
    "                        first 20, those around the first divergence and the outputs)\n"
    "  --html FILE           write a self-contained page: summary, table, and the graph\n"
    "                        with each node coloured by its output's error (green within\n"
    "                        a tenth of the tolerance, yellow near it, red diverging, grey\n"
    "                        not compared)\n"
    "  --reduce DIR          write the first divergent node alone as a backend-test case\n"
    "                        (DIR/model.onnx, DIR/test_data_set_0) with its inputs as the\n"
    "                        first side that runs computed them; when B is another model,\n"
    "                        its node too in DIR/b\n"
    "\n"
    "exit status: 0 the sides agree, 1 they diverge, 2 usage error, 3 could not run\n"
    "\n"
    "examples:\n"
    "  onnxexec compare resnet18.onnx cpu cpu:noopt\n"
    "  onnxexec compare model.onnx cpu torch_out/ -i input=x.npy --html parity.html\n"
    "  onnxexec compare model.onnx cpu model_fp16.onnx --reduce first_bad/\n";

/* ---- messages and small helpers -------------------------------------------------------- */

/* A tolerance: a finite number > 0. */
static bool parse_tol(const char *s, double *out) {
    if (!s || !*s) return false;
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (errno || *end || end == s || !(v > 0) || isinf(v)) return false;
    *out = v;
    return true;
}

/* Whether the file starts as a zip does (TorchScript archives are zips). */
static bool is_zip(const char *path) {
    unsigned char head[4];
    FILE *f = fopen(path, "rb");
    bool zip = f && fread(head, 1, 4, f) == 4 && memcmp(head, "PK\003\004", 4) == 0;
    if (f) fclose(f);
    return zip;
}

/* A number as the table shows it: %.3g, non-finite ones as nan/inf. */
static const char *num3(char *buf, size_t len, double v) {
    snprintf(buf, len, "%.3g", v);
    return buf;
}

/* "[2,3,4]", or "int64[2]" for a value that is not float32. */
static void fmt_shape(const ox_compare_value *v, char *buf, size_t len) {
    size_t k = 0;
    if (v->dtype != OX_FLOAT) k += (size_t)snprintf(buf, len, "%s", ox_dtype_name(v->dtype));
    if (k < len) k += (size_t)snprintf(buf + k, len - k, "[");
    for (int d = 0; d < v->rank && k < len; d++)
        k += (size_t)snprintf(buf + k, len - k, "%s%" PRId64, d ? "," : "", v->dims[d]);
    if (k < len) snprintf(buf + k, len - k, "]");
}

/* Copy s into buf (at most `width` bytes shown): a long name keeps its start and its end. */
static void clip(const char *s, int width, char *buf, size_t len) {
    size_t n = strlen(s);
    if ((int)n <= width || width < 8) {
        snprintf(buf, len, "%.*s", (int)len - 1, s);
        return;
    }
    int head = (width - 3) / 3, tail = width - 3 - head;
    snprintf(buf, len, "%.*s...%s", head, s, s + n - (size_t)tail);
}

/* ---- tensors and named values ----------------------------------------------------------- */

/* Named tensors; each owns its data and its malloc'd name. */
struct vals {
    ox_tensor *t;
    int n, cap;
};

static void vals_free(struct vals *v) {
    for (int i = 0; i < v->n; i++) {
        free((char *)v->t[i].name);
        ox_tensor_free_data(&v->t[i]);
    }
    free(v->t);
    memset(v, 0, sizeof *v);
}

/* Append t under `name` (both owned by v afterwards, also on failure). */
static int vals_push(struct vals *v, ox_tensor *t, char *name) {
    if (v->n == v->cap) {
        int cap = v->cap ? v->cap * 2 : 16;
        ox_tensor *nt = realloc(v->t, (size_t)cap * sizeof *nt);
        if (!nt || !name) {
            if (nt) v->t = nt;
            free(name);
            ox_tensor_free_data(t);
            return cli_errorf(EXIT_NORUN, "out of memory");
        }
        v->t = nt, v->cap = cap;
    }
    if (!name) {
        ox_tensor_free_data(t);
        return cli_errorf(EXIT_NORUN, "out of memory");
    }
    v->t[v->n] = *t;
    v->t[v->n++].name = name;
    return 0;
}

static const ox_tensor *vals_find(const struct vals *v, const char *name) {
    for (int i = 0; i < v->n; i++)
        if (strcmp(v->t[i].name, name) == 0) return &v->t[i];
    return NULL;
}

/* Read a .npy or .pb file (by extension); *name (may be NULL) gets the .pb's tensor name
 * (malloc'd, NULL when empty). Errors are printed; returns EXIT_NORUN then. */
static int read_tensor(const char *path, ox_tensor *t, char **name) {
    ox_status st;
    memset(t, 0, sizeof *t);
    if (name) *name = NULL;
    if (cli_has_ext(path, ".npy")) {
        st = ox_tensor_read_npy(path, t);
    } else if (cli_has_ext(path, ".pb")) {
        char *nm = NULL;
        st = ox_tensor_read_pb(path, t, &nm);
        if (!st && name && nm && *nm)
            *name = nm;
        else
            free(nm);
    } else {
        return cli_errorf(EXIT_NORUN, "%s: unknown tensor file type (expected .npy or .pb)", path);
    }
    if (st != OX_OK) {
        const char *m = cli_lib_msg(st);
        memset(t, 0, sizeof *t);
        return strstr(m, path) ? cli_errorf(EXIT_NORUN, "%s", m)
                               : cli_errorf(EXIT_NORUN, "%s: %s", path, m);
    }
    return 0;
}

/* A file name stem back to a value name: "%2F" (any %XX) stands for that byte. */
static char *decode_stem(const char *file, size_t n) {
    char *s = malloc(n + 1);
    if (!s) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (file[i] == '%' && i + 2 < n && isxdigit((unsigned char)file[i + 1]) &&
            isxdigit((unsigned char)file[i + 2])) {
            char hex[3] = {file[i + 1], file[i + 2], 0};
            s[k++] = (char)strtol(hex, NULL, 16);
            i += 2;
        } else {
            s[k++] = file[i];
        }
    }
    s[k] = 0;
    return s;
}

/* ---- .npz archives ---------------------------------------------------------------------- */

/* numpy.savez writes a zip of NAME.npy members (STORED, or DEFLATE with savez_compressed;
 * zip64 fields for large ones), with no archive folder, so the directory is read here; the
 * members are inflated and checked with the library's zip code (importer/torchscript/zip.h)
 * and read through ox_tensor_read_npy from a temporary folder. Every offset and length is
 * checked against the file. */

static uint16_t rd16(const uint8_t *p) {
    return (uint16_t)(p[0] | p[1] << 8);
}
static uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t rd64(const uint8_t *p) {
    return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32;
}

/* Where the central directory is, and how many entries it has. */
static int npz_directory(const char *path, const uint8_t *z, uint64_t size, uint64_t *cd_off,
                         uint64_t *cd_size, uint64_t *n) {
    if (size < 22) return cli_errorf(EXIT_NORUN, "%s: not a zip file (too short)", path);
    uint64_t eocd = UINT64_MAX;
    for (uint64_t i = size - 22;; i--) {
        if (rd32(z + i) == 0x06054b50) {
            eocd = i;
            break;
        }
        if (i == 0 || size - 22 - i >= 65535) break;
    }
    if (eocd == UINT64_MAX)
        return cli_errorf(EXIT_NORUN, "%s: not a zip file (no end of central directory)", path);
    *n = rd16(z + eocd + 10);
    *cd_size = rd32(z + eocd + 12);
    *cd_off = rd32(z + eocd + 16);
    if (*n == 0xffff || *cd_size == 0xffffffff || *cd_off == 0xffffffff) {
        if (eocd < 20 || rd32(z + eocd - 20) != 0x07064b50)
            return cli_errorf(EXIT_NORUN, "%s: zip64 end of directory locator missing", path);
        uint64_t r = rd64(z + eocd - 20 + 8);
        if (r > size - 56 || rd32(z + r) != 0x06064b50)
            return cli_errorf(EXIT_NORUN, "%s: zip64 end of directory record out of place", path);
        *n = rd64(z + r + 32);
        *cd_size = rd64(z + r + 40);
        *cd_off = rd64(z + r + 48);
    }
    if (*cd_off > size || *cd_size > size - *cd_off || *n > 1000000)
        return cli_errorf(EXIT_NORUN, "%s: zip central directory out of the file", path);
    return 0;
}

/* Entry i of the directory at *p: its name (borrowed, not NUL-terminated) and bytes. */
struct npz_entry {
    const char *name;
    size_t name_len;
    const uint8_t *data; /* into the file, or `owned` */
    uint64_t len;
    uint8_t *owned;
};

static int npz_entry(const char *path, const uint8_t *z, uint64_t size, uint64_t *p,
                     uint64_t cd_end, struct npz_entry *e) {
    memset(e, 0, sizeof *e);
    if (cd_end - *p < 46 || rd32(z + *p) != 0x02014b50)
        return cli_errorf(EXIT_NORUN, "%s: corrupt zip central directory", path);
    const uint8_t *c = z + *p;
    uint16_t flags = rd16(c + 8), method = rd16(c + 10), nl = rd16(c + 28), xl = rd16(c + 30),
             cl = rd16(c + 32);
    uint32_t crc = rd32(c + 16);
    uint64_t csize = rd32(c + 20), usize = rd32(c + 24), local = rd32(c + 42);
    if (cd_end - *p - 46 < (uint64_t)nl + xl + cl)
        return cli_errorf(EXIT_NORUN, "%s: corrupt zip central directory", path);
    e->name = (const char *)c + 46;
    e->name_len = nl;
    /* zip64 sizes and offset, for the fields that say 0xffffffff, in that order */
    for (const uint8_t *x = c + 46 + nl, *xe = x + xl; xe - x >= 4;) {
        uint16_t id = rd16(x), len = rd16(x + 2);
        if (len > xe - x - 4) break;
        const uint8_t *f = x + 4, *fe = f + len;
        if (id == 1) {
            if (usize == 0xffffffff && fe - f >= 8) usize = rd64(f), f += 8;
            if (csize == 0xffffffff && fe - f >= 8) csize = rd64(f), f += 8;
            if (local == 0xffffffff && fe - f >= 8) local = rd64(f), f += 8;
        }
        x = fe;
    }
    *p += 46 + (uint64_t)nl + xl + cl;
    if (flags & 1)
        return cli_errorf(EXIT_NORUN, "%s: member '%.*s' is encrypted", path, nl, e->name);
    if (local > size || size - local < 30 || rd32(z + local) != 0x04034b50)
        return cli_errorf(EXIT_NORUN, "%s: member '%.*s': bad local header", path, nl, e->name);
    uint64_t data = local + 30 + rd16(z + local + 26) + rd16(z + local + 28);
    if (data > size || csize > size - data)
        return cli_errorf(EXIT_NORUN, "%s: member '%.*s' runs past the end of the file", path, nl,
                          e->name);
    if (method == 0) {
        if (csize != usize)
            return cli_errorf(EXIT_NORUN, "%s: member '%.*s': stored sizes differ", path, nl,
                              e->name);
        e->data = z + data;
    } else if (method == 8) {
        /* DEFLATE expands at most 1032 times (plus a block header; importer/torchscript/zip.c):
         * a member that claims more is refused before anything is allocated for it */
        if (usize / 1032 > csize + 1)
            return cli_errorf(EXIT_NORUN,
                              "%s: member '%.*s' claims %" PRIu64 " bytes from %" PRIu64
                              " compressed: more than DEFLATE can give (a damaged or hostile file)",
                              path, nl, e->name, usize, csize);
        if (usize > (uint64_t)SIZE_MAX / 2 || !(e->owned = malloc(usize ? (size_t)usize : 1)))
            return cli_errorf(EXIT_NORUN, "%s: member '%.*s': out of memory for %" PRIu64 " bytes",
                              path, nl, e->name, usize);
        ox_status st = ox_inflate(z + data, (size_t)csize, e->owned, (size_t)usize);
        if (st) {
            free(e->owned), e->owned = NULL;
            return cli_errorf(EXIT_NORUN, "%s: member '%.*s': %s", path, nl, e->name,
                              cli_lib_msg(st));
        }
        e->data = e->owned;
    } else {
        return cli_errorf(EXIT_NORUN, "%s: member '%.*s': compression method %u (expected 0 or 8)",
                          path, nl, e->name, method);
    }
    e->len = usize;
    if (ox_crc32(e->data, (size_t)usize) != crc) {
        free(e->owned), e->owned = NULL;
        return cli_errorf(EXIT_NORUN, "%s: member '%.*s': CRC-32 mismatch", path, nl, e->name);
    }
    return 0;
}

static int write_file(const char *path, const uint8_t *data, uint64_t len) {
    FILE *f = fopen(path, "wb");
    if (!f) return cli_errorf(EXIT_NORUN, "%s: %s", path, strerror(errno));
    bool ok = fwrite(data, 1, (size_t)len, f) == len;
    ok = (fclose(f) == 0) && ok;
    if (!ok) return cli_errorf(EXIT_NORUN, "%s: write failed: %s", path, strerror(errno));
    return 0;
}

/* Every NAME.npy member of the archive, in its order, into out. */
static int read_npz(const char *path, struct vals *out) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) return cli_errorf(EXIT_NORUN, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size <= 0) {
        close(fd);
        return cli_errorf(EXIT_NORUN, "%s: empty or unreadable", path);
    }
    uint64_t size = (uint64_t)st.st_size;
    void *map = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED)
        return cli_errorf(EXIT_NORUN, "%s: cannot map: %s", path, strerror(errno));
    const uint8_t *z = map;
    char tmp[4096];
    const char *tdir = getenv("TMPDIR");
    snprintf(tmp, sizeof tmp, "%s/onnxexec-npz-XXXXXX", tdir && *tdir ? tdir : "/tmp");
    uint64_t cd_off = 0, cd_size = 0, n = 0;
    int rc = npz_directory(path, z, size, &cd_off, &cd_size, &n);
    if (!rc && !mkdtemp(tmp))
        rc =
            cli_errorf(EXIT_NORUN, "cannot create a temporary folder %s: %s", tmp, strerror(errno));
    if (rc) {
        munmap(map, (size_t)size);
        return rc;
    }
    char file[4200];
    snprintf(file, sizeof file, "%s/member.npy", tmp);
    uint64_t p = cd_off;
    for (uint64_t i = 0; i < n && !rc; i++) {
        struct npz_entry e;
        if ((rc = npz_entry(path, z, size, &p, cd_off + cd_size, &e))) break;
        if (e.name_len < 5 || memcmp(e.name + e.name_len - 4, ".npy", 4) != 0) {
            fprintf(stderr, "note: %s: member '%.*s' is not a .npy file: left out\n", path,
                    (int)e.name_len, e.name);
            free(e.owned);
            continue;
        }
        ox_tensor t;
        rc = write_file(file, e.data, e.len);
        if (!rc && (rc = read_tensor(file, &t, NULL)))
            fprintf(stderr, "onnxexec: compare: (that was %s, member '%.*s')\n", path,
                    (int)e.name_len, e.name);
        if (!rc) rc = vals_push(out, &t, strndup(e.name, e.name_len - 4));
        free(e.owned);
        unlink(file);
    }
    rmdir(tmp);
    munmap(map, (size_t)size);
    if (!rc && out->n == 0) rc = cli_errorf(EXIT_NORUN, "%s: no .npy member", path);
    return rc;
}

/* ---- reference values -------------------------------------------------------------------- */

/* Where a value comes in graph g's order: inputs, initializers, node outputs (as
 * ox_compare's runs list them); names not in g after all, in their given order. */
static int64_t graph_rank(const struct ox_graph *g, const char *name) {
    int v = g ? ox_graph_find_value(g, name) : -1;
    if (v < 0) return INT64_MAX;
    for (int k = 0; k < g->n_inputs; k++)
        if (g->inputs[k] == v) return k;
    if (g->values[v].producer < 0) return (int64_t)g->n_inputs + v;
    const struct ox_node *nd = &g->nodes[g->values[v].producer];
    int k = 0;
    while (k < nd->n_outputs && nd->outputs[k] != v) k++;
    return (int64_t)g->n_inputs + g->n_values + (int64_t)g->values[v].producer * 64 + k;
}

struct ranked {
    int64_t rank;
    int index;
};

static int cmp_ranked(const void *pa, const void *pb) {
    const struct ranked *a = pa, *b = pb;
    if (a->rank != b->rank) return a->rank < b->rank ? -1 : 1;
    return (a->index > b->index) - (a->index < b->index);
}

/* Put the values in g's order (so that, when neither side runs, the table follows the
 * graph). */
static int order_by_graph(struct vals *v, const struct ox_graph *g) {
    if (!g || v->n < 2) return 0;
    struct ranked *r = malloc(sizeof *r * (size_t)v->n);
    ox_tensor *t = malloc(sizeof *t * (size_t)v->n);
    if (!r || !t) {
        free(r), free(t);
        return cli_errorf(EXIT_NORUN, "out of memory");
    }
    for (int i = 0; i < v->n; i++) r[i] = (struct ranked){graph_rank(g, v->t[i].name), i};
    qsort(r, (size_t)v->n, sizeof *r, cmp_ranked);
    for (int i = 0; i < v->n; i++) t[i] = v->t[r[i].index];
    memcpy(v->t, t, sizeof *t * (size_t)v->n);
    free(r), free(t);
    return 0;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A backend data set folder: dir/test_data_set_0 (malloc'd), or dir itself when it holds
 * output_0.pb or input_0.pb; NULL when it is neither. */
static char *dataset_of(const char *dir) {
    char *ds = cli_path_join(dir, "test_data_set_0");
    if (ds && cli_is_dir(ds)) return ds;
    free(ds);
    char *o = cli_path_join(dir, "output_0.pb"), *i = cli_path_join(dir, "input_0.pb");
    bool here = (o && cli_is_file(o)) || (i && cli_is_file(i));
    free(o), free(i);
    return here ? strdup(dir) : NULL;
}

/* dataset/<prefix>K.pb for K = 0, 1, ... while they exist; names from the files, else
 * names[K] (when K < n_names), else "<prefix>K". */
static int read_pb_series(const char *ds, const char *prefix, const char *const *names, int n_names,
                          struct vals *out) {
    for (int k = 0;; k++) {
        char fn[64];
        snprintf(fn, sizeof fn, "%s%d.pb", prefix, k);
        char *p = cli_path_join(ds, fn);
        if (!p) return cli_errorf(EXIT_NORUN, "out of memory");
        if (!cli_is_file(p)) {
            free(p);
            return 0;
        }
        ox_tensor t;
        char *name;
        int rc = read_tensor(p, &t, &name);
        free(p);
        if (rc) return rc;
        if (!name && k < n_names && names[k]) name = strdup(names[k]);
        if (!name) name = strndup(fn, strlen(fn) - 3); /* "output_K" */
        if ((rc = vals_push(out, &t, name))) return rc;
    }
}

/* A folder side: backend layout, or NAME.npy / NAME.pb files. *dataset gets the backend data
 * set folder (malloc'd) or NULL. */
static int read_folder(const char *dir, const ox_model *info, struct vals *out, char **dataset) {
    *dataset = dataset_of(dir);
    if (*dataset) {
        int n_out = info ? ox_model_n_outputs(info) : 0;
        const char **names = calloc((size_t)n_out + 1, sizeof *names);
        if (!names) return cli_errorf(EXIT_NORUN, "out of memory");
        for (int k = 0; k < n_out; k++) {
            ox_tensor d;
            if (ox_model_output(info, k, &d, NULL) == OX_OK) names[k] = d.name;
        }
        int rc = read_pb_series(*dataset, "output_", names, n_out, out);
        free(names);
        if (!rc && out->n == 0)
            rc = cli_errorf(EXIT_NORUN, "%s: a backend-test folder without output_0.pb", *dataset);
        return rc;
    }
    DIR *d = opendir(dir);
    if (!d) return cli_errorf(EXIT_NORUN, "%s: %s", dir, strerror(errno));
    char **files = NULL;
    int n = 0, cap = 0, rc = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.' ||
            !(cli_has_ext(e->d_name, ".npy") || cli_has_ext(e->d_name, ".pb")))
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            char **f = realloc(files, sizeof *f * (size_t)cap);
            if (!f) {
                rc = cli_errorf(EXIT_NORUN, "out of memory");
                break;
            }
            files = f;
        }
        if (!(files[n] = strdup(e->d_name))) {
            rc = cli_errorf(EXIT_NORUN, "out of memory");
            break;
        }
        n++;
    }
    closedir(d);
    if (n > 1) qsort(files, (size_t)n, sizeof *files, cmp_str);
    for (int i = 0; i < n && !rc; i++) {
        char *p = cli_path_join(dir, files[i]);
        ox_tensor t;
        if (!p) {
            rc = cli_errorf(EXIT_NORUN, "out of memory");
            break;
        }
        rc = read_tensor(p, &t, NULL);
        free(p);
        if (rc) break;
        size_t stem = strlen(files[i]) - (cli_has_ext(files[i], ".npy") ? 4 : 3);
        char *name = decode_stem(files[i], stem);
        if (name && vals_find(out, name)) {
            rc = cli_errorf(EXIT_NORUN, "%s: two files hold value '%s' (%s and another)", dir, name,
                            files[i]);
            free(name);
            ox_tensor_free_data(&t);
            break;
        }
        rc = vals_push(out, &t, name);
    }
    for (int i = 0; i < n; i++) free(files[i]);
    free(files);
    if (!rc && out->n == 0)
        rc = cli_errorf(EXIT_NORUN,
                        "%s: no reference values (expected test_data_set_0/output_K.pb, or "
                        "NAME.npy / NAME.pb files)",
                        dir);
    return rc;
}

/* One .npy or .pb file: the .pb's name, else the file's stem when MODEL has such a value,
 * else MODEL's only output. */
static int read_single(const char *path, const ox_model *info, struct vals *out) {
    ox_tensor t;
    char *name;
    int rc = read_tensor(path, &t, &name);
    if (rc) return rc;
    if (!name) {
        const char *base = strrchr(path, '/');
        base = base ? base + 1 : path;
        name = decode_stem(base, strlen(base) - (cli_has_ext(base, ".npy") ? 4 : 3));
        const struct ox_graph *g = info ? ox_model_graph(info) : NULL;
        ox_tensor d;
        if (name && g && ox_graph_find_value(g, name) < 0 && ox_model_n_outputs(info) == 1 &&
            ox_model_output(info, 0, &d, NULL) == OX_OK && d.name) {
            fprintf(stderr, "note: %s: taken as the model's output '%s'\n", path, d.name);
            free(name);
            name = strdup(d.name);
        }
    }
    return vals_push(out, &t, name);
}

/* ---- sides ------------------------------------------------------------------------------ */

enum side_kind { SIDE_RUN, SIDE_VALUES };

struct side {
    const char *spec; /* as given */
    enum side_kind kind;
    bool noopt;        /* cpu:noopt, cuda:...:noopt */
    char device[32];   /* "cuda:N" for a GPU side, else "" */
    int precision;     /* OX_PRECISION_* of a GPU side */
    const char *other; /* SIDE_RUN: another model file; NULL for MODEL */
    ox_model *model;   /* SIDE_RUN: borrowed from the command's models */
    struct vals vals;  /* SIDE_VALUES */
    char *dataset;     /* a backend folder's data set (malloc'd), or NULL */
};

/* "cuda[:N][:fp32|tf32|fp16|bf16][:noopt]", its fields in that order, each at most once, into
 * the side; false when it is not that. */
static bool parse_cuda_spec(const char *s, struct side *side) {
    if (strncmp(s, "cuda", 4) != 0) return false;
    s += 4;
    long index = 0;
    int stage = 0; /* 0: device number next, 1: precision, 2: noopt, 3: nothing */
    while (*s) {
        if (*s++ != ':') return false;
        const char *e = strchr(s, ':');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        if (n == 0) return false;
        bool digits = true;
        for (size_t k = 0; k < n; k++) digits &= isdigit((unsigned char)s[k]) != 0;
        int prec = cli_precision(s, n);
        if (stage == 0 && digits) {
            index = strtol(s, NULL, 10);
            stage = 1;
        } else if (stage <= 1 && prec >= 0) {
            side->precision = prec;
            stage = 2;
        } else if (stage <= 2 && n == 5 && !strncmp(s, "noopt", 5)) {
            side->noopt = true;
            stage = 3;
        } else {
            return false;
        }
        s += n;
    }
    snprintf(side->device, sizeof side->device, "cuda:%ld", index);
    return true;
}

/* What a side names; values are read later, once MODEL is known. */
static int parse_side(const char *spec, struct side *s) {
    memset(s, 0, sizeof *s);
    s->spec = spec;
    if (strcmp(spec, "cpu") == 0 || strcmp(spec, "cpu:noopt") == 0) {
        s->kind = SIDE_RUN;
        s->noopt = spec[3] == ':';
        return 0;
    }
    if (strncmp(spec, "cpu:", 4) == 0)
        return cli_errorf(EXIT_USAGE, "side '%s': expected cpu or cpu:noopt", spec);
    if (strncmp(spec, "cuda", 4) == 0 && (spec[4] == 0 || spec[4] == ':')) {
        if (!parse_cuda_spec(spec, s))
            return cli_errorf(EXIT_USAGE, "side '%s': expected cuda[:N][:fp32|tf32|fp16][:noopt]",
                              spec);
        s->kind = SIDE_RUN;
        return 0;
    }
    if (cli_is_dir(spec)) {
        s->kind = SIDE_VALUES;
        return 0;
    }
    if (!cli_is_file(spec))
        return cli_errorf(
            EXIT_NORUN,
            "side '%s': no such file or folder (a side is cpu, cpu:noopt, a folder of "
            "reference values, a .npz, .npy or .pb file, or a model file)",
            spec);
    if (cli_has_ext(spec, ".npz") || cli_has_ext(spec, ".npy") || cli_has_ext(spec, ".pb")) {
        s->kind = SIDE_VALUES;
        return 0;
    }
    s->kind = SIDE_RUN;
    s->other = spec;
    return 0;
}

static int load_values(struct side *s, const ox_model *info) {
    int rc;
    if (cli_is_dir(s->spec))
        rc = read_folder(s->spec, info, &s->vals, &s->dataset);
    else if (cli_has_ext(s->spec, ".npz"))
        rc = read_npz(s->spec, &s->vals);
    else
        rc = read_single(s->spec, info, &s->vals);
    if (!rc) rc = order_by_graph(&s->vals, info ? ox_model_graph(info) : NULL);
    return rc;
}

/* ---- options, models and inputs ------------------------------------------------------- */

struct shape_opt {
    char *name; /* malloc'd */
    int rank;
    int64_t dims[OX_MAX_RANK];
    bool used;
};

static int parse_shape_opt(const char *arg, struct shape_opt *o) {
    const char *eq = strchr(arg, '=');
    memset(o, 0, sizeof *o);
    if (!eq || eq == arg || !eq[1])
        return cli_errorf(EXIT_USAGE, "--shape '%s': expected NAME=d0,d1,... (e.g. x=1,3,224,224)",
                          arg);
    for (const char *p = eq + 1; *p;) {
        if (o->rank == OX_MAX_RANK)
            return cli_errorf(EXIT_USAGE, "--shape '%s': more than %d dimensions", arg,
                              OX_MAX_RANK);
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (errno || end == p || v < 0 || (*end && *end != ',') || (*end == ',' && !end[1]))
            return cli_errorf(EXIT_USAGE, "--shape '%s': expected dimensions >= 0 separated by ','",
                              arg);
        o->dims[o->rank++] = v;
        p = *end ? end + 1 : end;
    }
    if (!(o->name = strndup(arg, (size_t)(eq - arg))))
        return cli_errorf(EXIT_NORUN, "out of memory");
    return 0;
}

struct input_opt {
    const char *arg;
    char *name; /* the NAME of NAME=FILE (malloc'd), or NULL: by position */
    const char *file;
    ox_tensor t; /* read before the models load (their shapes serve TorchScript imports) */
    int bound;   /* the MODEL input it binds to, -1 until bound */
};

struct opts {
    const char *model_path;
    const char *side_spec[2];
    struct input_opt *iopts;
    int n_iopts;
    struct shape_opt *sopts;
    int n_sopts;
    const char *inputs_dir, *html, *reduce;
    uint64_t seed;
    double rtol, atol;
    bool outputs_only, json, all;
    int n_threads;
};

static void opts_free(struct opts *o) {
    for (int i = 0; o->iopts && i < o->n_iopts; i++) {
        free(o->iopts[i].name);
        ox_tensor_free_data(&o->iopts[i].t);
    }
    for (int i = 0; o->sopts && i < o->n_sopts; i++) free(o->sopts[i].name);
    free(o->iopts), free(o->sopts);
}

static int parse_args(int argc, char **argv, struct opts *o, bool *help) {
    int n_pos = 0;
    *help = false;
    o->iopts = calloc((size_t)argc + 1, sizeof *o->iopts);
    o->sopts = calloc((size_t)argc + 1, sizeof *o->sopts);
    if (!o->iopts || !o->sopts) return cli_errorf(EXIT_NORUN, "out of memory");
    for (int a = 0; a < argc; a++) {
        const char *arg = argv[a];
        if (cli_is_help(arg)) {
            *help = true;
            return 0;
        }
        bool takes = !strcmp(arg, "-i") || !strcmp(arg, "--input") || !strcmp(arg, "--inputs") ||
                     !strcmp(arg, "--seed") || !strcmp(arg, "--rtol") || !strcmp(arg, "--atol") ||
                     !strcmp(arg, "--html") || !strcmp(arg, "--reduce") ||
                     !strcmp(arg, "--threads") || !strcmp(arg, "--shape");
        if (takes && a + 1 >= argc)
            return cli_errorf(EXIT_USAGE, "%s needs a value (see onnxexec compare --help)", arg);
        const char *v = takes ? argv[++a] : NULL;
        int64_t i64;
        if (!strcmp(arg, "-i") || !strcmp(arg, "--input")) {
            struct input_opt *io = &o->iopts[o->n_iopts++];
            const char *eq = strchr(v, '=');
            io->arg = v, io->file = v, io->bound = -1;
            if (eq && eq != v && !cli_is_file(v)) {
                if (!(io->name = strndup(v, (size_t)(eq - v))))
                    return cli_errorf(EXIT_NORUN, "out of memory");
                io->file = eq + 1;
            }
        } else if (!strcmp(arg, "--inputs")) {
            o->inputs_dir = v;
        } else if (!strcmp(arg, "--seed")) {
            if (!cli_parse_i64(v, &i64) || i64 < 0)
                return cli_errorf(EXIT_USAGE, "--seed '%s': expected a number >= 0", v);
            o->seed = (uint64_t)i64;
        } else if (!strcmp(arg, "--rtol") || !strcmp(arg, "--atol")) {
            if (!parse_tol(v, arg[2] == 'r' ? &o->rtol : &o->atol))
                return cli_errorf(EXIT_USAGE, "%s '%s': expected a number > 0", arg, v);
        } else if (!strcmp(arg, "--html")) {
            o->html = v;
        } else if (!strcmp(arg, "--reduce")) {
            o->reduce = v;
        } else if (!strcmp(arg, "--threads")) {
            if (!cli_parse_i64(v, &i64) || i64 < 0 || i64 > 4096)
                return cli_errorf(EXIT_USAGE, "--threads '%s': expected a number in 0..4096", v);
            o->n_threads = (int)i64;
        } else if (!strcmp(arg, "--shape")) {
            int rc = parse_shape_opt(v, &o->sopts[o->n_sopts]);
            if (rc) return rc;
            o->n_sopts++;
        } else if (!strcmp(arg, "--outputs-only")) {
            o->outputs_only = true;
        } else if (!strcmp(arg, "--json")) {
            o->json = true;
        } else if (!strcmp(arg, "--all")) {
            o->all = true;
        } else if (arg[0] == '-' && arg[1]) {
            return cli_errorf(EXIT_USAGE, "unknown option '%s' (see onnxexec compare --help)", arg);
        } else if (n_pos == 0) {
            o->model_path = arg, n_pos++;
        } else if (n_pos < 3) {
            o->side_spec[n_pos++ - 1] = arg;
        } else {
            return cli_errorf(EXIT_USAGE,
                              "unexpected argument '%s' (usage: onnxexec compare MODEL A B)", arg);
        }
    }
    if (n_pos < 3)
        return cli_errorf(EXIT_USAGE,
                          "needs MODEL and two sides A and B (usage: onnxexec compare MODEL A B "
                          "[options]; see onnxexec compare --help)");
    return 0;
}

/* The models the command loads: MODEL optimized and as read, and another model file per
 * side; each loaded once. */
struct models {
    ox_model *opt, *noopt, *other[2];
    ox_model *opt_gpu;    /* optimized for a GPU side (optimize.h: OX_OPT_GPU) */
    ox_tensor *ts_shapes; /* TorchScript argument shapes (names malloc'd) */
    int n_ts_shapes;
};

static void models_free(struct models *m) {
    ox_model_free(m->opt);
    ox_model_free(m->noopt);
    ox_model_free(m->opt_gpu);
    ox_model_free(m->other[0]);
    ox_model_free(m->other[1]);
    for (int i = 0; i < m->n_ts_shapes; i++) free((char *)m->ts_shapes[i].name);
    free(m->ts_shapes);
}

/* The shapes a TorchScript import needs, from the -i files and --shape options. */
static int make_ts_shapes(const struct opts *o, struct models *m) {
    m->ts_shapes = calloc((size_t)(o->n_iopts + o->n_sopts) + 1, sizeof *m->ts_shapes);
    if (!m->ts_shapes) return cli_errorf(EXIT_NORUN, "out of memory");
    for (int i = 0; i < o->n_iopts; i++) {
        ox_tensor *d = &m->ts_shapes[m->n_ts_shapes++];
        const ox_tensor *t = &o->iopts[i].t;
        *d = (ox_tensor){.dtype = t->dtype, .rank = t->rank};
        memcpy(d->dims, t->dims, sizeof d->dims);
        if (o->iopts[i].name && !(d->name = strdup(o->iopts[i].name)))
            return cli_errorf(EXIT_NORUN, "out of memory");
    }
    for (int i = 0; i < o->n_sopts; i++) {
        ox_tensor *d = &m->ts_shapes[m->n_ts_shapes++];
        *d = (ox_tensor){.dtype = OX_FLOAT, .rank = o->sopts[i].rank};
        memcpy(d->dims, o->sopts[i].dims, sizeof d->dims);
        if (!(d->name = strdup(o->sopts[i].name))) return cli_errorf(EXIT_NORUN, "out of memory");
    }
    return 0;
}

/* MODEL as read (noopt) or optimized, for the CPU or (device "cuda...") a GPU. */
static int load_model(const char *path, bool noopt, const char *device, const struct models *mm,
                      ox_model **out) {
    if (!cli_is_file(path)) {
        if (cli_is_dir(path))
            return cli_errorf(EXIT_NORUN, "%s: is a folder, not a model file", path);
        return cli_errorf(EXIT_NORUN, "%s: %s", path, strerror(errno ? errno : ENOENT));
    }
    ox_model_options lo = {.no_optimize = noopt, .limits = cli_limits, .device = device};
    if (is_zip(path)) {
        lo.input_shapes = mm->ts_shapes;
        lo.n_input_shapes = mm->n_ts_shapes;
    }
    ox_status st = ox_model_load_with(path, &lo, out);
    if (st != OX_OK) {
        const char *msg = cli_lib_msg(st);
        return strstr(msg, path) ? cli_errorf(EXIT_NORUN, "%s", msg)
                                 : cli_errorf(EXIT_NORUN, "%s: %s", path, msg);
    }
    return 0;
}

/* ---- random inputs (as `onnxexec run` makes them) -------------------------------------- */

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

/* Allocate t (dtype and dims set) and fill it: floats uniform in [-1, 1) (narrow float
 * types: one of 256 steps), integers in [0, 10) ([0, 4) for 2-bit ones), booleans 0/1,
 * strings "0".."9". */
static int fill_random(ox_tensor *t, uint64_t *rng) {
    int64_t n = ox_tensor_numel(t);
    size_t es = ox_dtype_size(t->dtype);
    bool narrow = t->dtype >= OX_FLOAT8E4M3FN && t->dtype != OX_UINT4 && t->dtype != OX_INT4 &&
                  t->dtype != OX_UINT2 && t->dtype != OX_INT2;
    if (es == 0 || t->dtype == OX_UNDEFINED || t->dtype >= OX_N_DTYPES)
        return cli_errorf(EXIT_NORUN, "input '%s': cannot make random values of type %s", t->name,
                          ox_dtype_name(t->dtype));
    if (n < 0 || (n > 0 && (uint64_t)n > (SIZE_MAX / 4) / es))
        return cli_errorf(EXIT_NORUN, "input '%s': too large", t->name);
    if (!(t->data = calloc((size_t)(n ? n : 1), es)))
        return cli_errorf(EXIT_NORUN, "input '%s': out of memory (%" PRId64 " elements)", t->name,
                          n);
    for (int64_t i = 0; i < n; i++) {
        double u = rng_unit(rng);
        uint64_t r = rng_next(rng);
        switch (t->dtype) {
        case OX_FLOAT: ((float *)t->data)[i] = (float)u; break;
        case OX_DOUBLE: ((double *)t->data)[i] = u; break;
        case OX_COMPLEX64:
            ((float *)t->data)[2 * i] = (float)u;
            ((float *)t->data)[2 * i + 1] = (float)rng_unit(rng);
            break;
        case OX_COMPLEX128:
            ((double *)t->data)[2 * i] = u;
            ((double *)t->data)[2 * i + 1] = rng_unit(rng);
            break;
        case OX_BOOL: ((uint8_t *)t->data)[i] = (uint8_t)(r & 1); break;
        case OX_STRING: {
            char *s = malloc(2);
            if (!s) {
                ox_tensor_free_data(t);
                return cli_errorf(EXIT_NORUN, "out of memory");
            }
            s[0] = (char)('0' + r % 10), s[1] = 0;
            ((char **)t->data)[i] = s;
            break;
        }
        case OX_FLOAT16:
        case OX_BFLOAT16: ox_tensor_set(t, i, (float)u); break;
        default:
            if (narrow)
                ox_tensor_set(t, i, (double)(((int)((u + 1.0) * 128) & 255) - 128) / 128.0);
            else
                ox_tensor_set(t, i,
                              (double)(r % (t->dtype == OX_UINT2 || t->dtype == OX_INT2 ? 4 : 10)));
            break;
        }
    }
    return 0;
}

/* The declared shape of MODEL input i made concrete by --shape (free dims: 1, with a note). */
static int random_shape(const ox_model *m, int i, struct opts *o, ox_tensor *t) {
    ox_tensor d;
    const char *dn[OX_MAX_RANK] = {0};
    if (ox_model_input(m, i, &d, dn) != OX_OK)
        return cli_errorf(EXIT_NORUN, "input %d: %s", i, cli_lib_msg(OX_E_INVALID));
    *t = (ox_tensor){.dtype = d.dtype, .rank = d.rank, .name = d.name};
    memcpy(t->dims, d.dims, sizeof t->dims);
    for (int k = 0; k < o->n_sopts; k++) {
        struct shape_opt *s = &o->sopts[k];
        if (strcmp(s->name, d.name) != 0) continue;
        s->used = true;
        if (d.rank >= 0 && d.rank != s->rank)
            return cli_errorf(EXIT_USAGE, "--shape %s: input '%s' has rank %d, %d dimensions given",
                              s->name, d.name, d.rank, s->rank);
        for (int j = 0; j < s->rank && d.rank >= 0; j++)
            if (d.dims[j] >= 0 && d.dims[j] != s->dims[j])
                return cli_errorf(EXIT_USAGE,
                                  "--shape %s: dimension %d of input '%s' is fixed at %" PRId64,
                                  s->name, j, d.name, d.dims[j]);
        t->rank = s->rank;
        memcpy(t->dims, s->dims, sizeof t->dims);
        return 0;
    }
    if (d.rank < 0 || d.rank > OX_MAX_RANK)
        return cli_errorf(EXIT_USAGE,
                          "input '%s' has no declared shape: give it with -i %s=FILE or --shape "
                          "%s=d0,d1,...",
                          d.name, d.name, d.name);
    for (int k = 0; k < t->rank; k++) {
        if (t->dims[k] >= 0) continue;
        struct shape_opt *sym = NULL;
        for (int j = 0; dn[k] && *dn[k] && j < o->n_sopts; j++)
            if (strcmp(o->sopts[j].name, dn[k]) == 0) sym = &o->sopts[j];
        if (sym && sym->rank != 1)
            return cli_errorf(EXIT_USAGE, "--shape %s: a symbolic dimension takes one number",
                              sym->name);
        if (sym) {
            sym->used = true;
            t->dims[k] = sym->dims[0];
            continue;
        }
        t->dims[k] = 1;
        if (dn[k] && *dn[k])
            fprintf(stderr, "note: input '%s' dimension %d ('%s') set to 1; use --shape %s=SIZE\n",
                    d.name, k, dn[k], dn[k]);
        else
            fprintf(stderr,
                    "note: input '%s' dimension %d is not fixed, set to 1; use --shape "
                    "%s=d0,d1,...\n",
                    d.name, k, d.name);
    }
    return 0;
}

/* The inputs of the runs, by MODEL's input names: -i, else --inputs or a backend side's
 * input_K.pb, else the initializer (not passed), else random. */
struct inputs {
    ox_tensor *t; /* per MODEL input; data owned when has[i] && !borrowed[i] */
    bool *has, *borrowed;
    int n;
    ox_tensor *pass; /* shallow copies passed to the runs */
    int n_pass;
    struct vals files; /* input_K.pb */
};

static void inputs_free(struct inputs *in) {
    for (int i = 0; in->t && i < in->n; i++)
        if (in->has[i] && !in->borrowed[i]) ox_tensor_free_data(&in->t[i]);
    free(in->t), free(in->has), free(in->borrowed), free(in->pass);
    vals_free(&in->files);
}

static int prepare_inputs(const ox_model *m, struct opts *o, const char *dataset,
                          struct inputs *in) {
    int n = ox_model_n_inputs(m), rc = 0;
    in->n = n;
    in->t = calloc((size_t)n + 1, sizeof *in->t);
    in->has = calloc((size_t)n + 1, sizeof *in->has);
    in->borrowed = calloc((size_t)n + 1, sizeof *in->borrowed);
    in->pass = calloc((size_t)n + 1, sizeof *in->pass);
    const char **names = calloc((size_t)n + 1, sizeof *names);
    if (!in->t || !in->has || !in->borrowed || !in->pass || !names) {
        rc = cli_errorf(EXIT_NORUN, "out of memory");
        goto out;
    }
    for (int i = 0; i < n; i++) {
        ox_tensor d;
        if (ox_model_input(m, i, &d, NULL) != OX_OK || !d.name) {
            rc = cli_errorf(EXIT_NORUN, "input %d: %s", i, cli_lib_msg(OX_E_INVALID));
            goto out;
        }
        names[i] = d.name;
    }
    /* -i NAME=FILE, then FILE alone by position */
    for (int k = 0; k < o->n_iopts; k++) {
        struct input_opt *io = &o->iopts[k];
        if (!io->name) continue;
        for (int i = 0; i < n && io->bound < 0; i++)
            if (strcmp(names[i], io->name) == 0) io->bound = i;
        if (io->bound < 0) {
            rc = cli_errorf(EXIT_USAGE, "-i %s: the model has no input '%s' (see onnxexec info %s)",
                            io->arg, io->name, o->model_path);
            goto out;
        }
        if (in->has[io->bound]) {
            rc = cli_errorf(EXIT_USAGE, "-i %s: input '%s' given twice", io->arg, io->name);
            goto out;
        }
        in->has[io->bound] = in->borrowed[io->bound] = true;
    }
    for (int k = 0, next = 0; k < o->n_iopts; k++) {
        struct input_opt *io = &o->iopts[k];
        if (io->name) continue;
        while (next < n && in->has[next]) next++;
        if (next >= n) {
            rc = cli_errorf(EXIT_USAGE, "-i %s: too many inputs (the model takes %d)", io->arg, n);
            goto out;
        }
        io->bound = next;
        in->has[next] = in->borrowed[next] = true;
    }
    for (int k = 0; k < o->n_iopts; k++) {
        in->t[o->iopts[k].bound] = o->iopts[k].t;
        in->t[o->iopts[k].bound].name = names[o->iopts[k].bound];
    }
    /* input_K.pb of a backend data set: by the files' names when they are inputs, else K */
    if (dataset && (rc = read_pb_series(dataset, "input_", NULL, 0, &in->files))) goto out;
    for (int k = 0; k < in->files.n; k++) {
        int i = -1;
        for (int j = 0; j < n && i < 0; j++)
            if (strcmp(names[j], in->files.t[k].name) == 0) i = j;
        if (i < 0) i = k;
        if (i >= n || in->has[i]) continue;
        in->t[i] = in->files.t[k];
        in->t[i].name = names[i];
        in->has[i] = in->borrowed[i] = true;
    }
    /* random values for the rest */
    uint64_t rng = o->seed;
    for (int i = 0; i < n; i++) {
        if (in->has[i]) continue;
        for (int k = 0; k < o->n_sopts; k++)
            if (strcmp(o->sopts[k].name, names[i]) == 0 && ox_model_input_has_default(m, i)) {
                rc = cli_errorf(EXIT_USAGE,
                                "--shape %s: input '%s' has an initializer; give "
                                "another value with -i %s=FILE",
                                names[i], names[i], names[i]);
                goto out;
            }
        if (ox_model_input_has_default(m, i)) continue;
        if (ox_model_input_kind(m, i) != OX_IO_TENSOR) {
            rc = cli_errorf(EXIT_NORUN,
                            "input '%s' is not a tensor: the command line passes "
                            "tensors only",
                            names[i]);
            goto out;
        }
        if ((rc = random_shape(m, i, o, &in->t[i])) || (rc = fill_random(&in->t[i], &rng)))
            goto out;
        in->has[i] = true;
        char dims[256];
        size_t k = 0;
        for (int d = 0; d < in->t[i].rank && k < sizeof dims; d++)
            k += (size_t)snprintf(dims + k, sizeof dims - k, "%s%" PRId64, d ? "," : "",
                                  in->t[i].dims[d]);
        if (!k) dims[0] = 0;
        fprintf(stderr, "note: input '%s' not given: random %s[%s] (seed %" PRIu64 ")\n", names[i],
                ox_dtype_name(in->t[i].dtype), dims, o->seed);
    }
    for (int k = 0; k < o->n_sopts; k++)
        if (!o->sopts[k].used && !is_zip(o->model_path))
            fprintf(stderr, "note: --shape %s: no random input or symbolic dimension uses it\n",
                    o->sopts[k].name);
    for (int i = 0; i < n; i++)
        if (in->has[i]) in->pass[in->n_pass++] = in->t[i];
out:
    free(names);
    return rc;
}

/* Another model binds MODEL's inputs by name when it has those names, else by position. */
static void bind_for(const ox_model *other, struct inputs *in) {
    int n = ox_model_n_inputs(other);
    bool all = true;
    for (int k = 0; k < in->n_pass; k++)
        if (!in->pass[k].name) return; /* bound by position already */
    for (int k = 0; k < in->n_pass && all; k++) {
        bool found = false;
        for (int i = 0; i < n && !found; i++) {
            ox_tensor d;
            found = ox_model_input(other, i, &d, NULL) == OX_OK && d.name &&
                    strcmp(d.name, in->pass[k].name) == 0;
        }
        all = found;
    }
    if (all) return;
    bool leading = in->n_pass <= in->n;
    for (int k = 0; k < in->n_pass && leading; k++) leading = in->has[k];
    if (!leading) return; /* by name: the run names what is missing */
    fprintf(stderr, "note: the models' input names differ: inputs bind by position\n");
    for (int k = 0; k < in->n_pass; k++) in->pass[k].name = NULL;
}

/* ---- the report as text --------------------------------------------------------------- */

/* Why value v diverges, in a few words. */
static void why(const ox_compare_value *v, char *buf, size_t len) {
    char a[32], b[32], c[32], d[32];
    bool fl = v->rtol > 0 || v->atol > 0;
    if (v->shape_mismatch)
        snprintf(buf, len, "the sides' shapes or types differ");
    else if (fl && !(v->rel_l2 > v->rtol && v->max_abs > v->atol))
        snprintf(buf, len,
                 "NaN or Inf on one side only (NaN: %" PRId64 " vs %" PRId64 ", Inf: %" PRId64
                 " vs %" PRId64 ")",
                 v->nan_a, v->nan_b, v->inf_a, v->inf_b);
    else if (fl)
        snprintf(buf, len, "rel L2 %s > tol %s (max abs %s > atol %s)",
                 num3(a, sizeof a, v->rel_l2), num3(b, sizeof b, v->rtol),
                 num3(c, sizeof c, v->max_abs), num3(d, sizeof d, v->atol));
    else
        snprintf(buf, len, "%" PRId64 " of %" PRId64 " elements differ", v->n_mismatch, v->n);
}

/* A short note for a table row: reasons beyond the numbers. */
static void row_note(const ox_compare_value *v, char *buf, size_t len) {
    buf[0] = 0;
    if (v->shape_mismatch)
        snprintf(buf, len, "shapes differ");
    else if (v->nan_a != v->nan_b || v->inf_a != v->inf_b)
        snprintf(buf, len, "NaN %" PRId64 "/%" PRId64 " Inf %" PRId64 "/%" PRId64, v->nan_a,
                 v->nan_b, v->inf_a, v->inf_b);
    else if (!(v->rtol > 0 || v->atol > 0) && v->n_mismatch)
        snprintf(buf, len, "%" PRId64 " differ", v->n_mismatch);
}

/* The summary: sides, verdict, the first divergent node and the error's path. */
static void print_summary(FILE *f, const ox_compare_report *r, const char *la, const char *lb) {
    char x[32], y[32], w[512];
    fprintf(f, "%s vs %s: %d value%s compared", la, lb, r->n_values, r->n_values == 1 ? "" : "s");
    if (r->n_only_a || r->n_only_b)
        fprintf(f, " (not compared: %d only in %s, %d only in %s)", r->n_only_a, la, r->n_only_b,
                lb);
    fputc('\n', f);
    if (r->first_divergent < 0) {
        int worst = -1;
        for (int i = 0; i < r->n_values; i++)
            if (!r->values[i].shape_mismatch && r->values[i].rtol > 0 &&
                (worst < 0 || r->values[i].rel_l2 / r->values[i].rtol >
                                  r->values[worst].rel_l2 / r->values[worst].rtol))
                worst = i;
        fprintf(f, "agree: every compared value is within tolerance");
        if (worst >= 0)
            fprintf(f, " (largest rel L2 %s at %s, tol %s)",
                    num3(x, sizeof x, r->values[worst].rel_l2), r->values[worst].name,
                    num3(y, sizeof y, r->values[worst].rtol));
        fputc('\n', f);
        return;
    }
    const ox_compare_value *v = &r->values[r->first_divergent];
    why(v, w, sizeof w);
    if (v->node)
        fprintf(f, "first divergent value %s (node %s, op %s): %s\n", v->name, v->node, v->op, w);
    else
        fprintf(f,
                "first divergent value %s (no node: a graph input, a constant or a given "
                "value): %s\n",
                v->name, w);
    if (v->node_desc) fprintf(f, "  node: %s\n", v->node_desc);
    if (!v->shape_mismatch)
        fprintf(f,
                "  error: max abs %.3g, max rel %.3g, cosine %.6g, max ULP %.3g, |a-b| quantiles "
                "50%% %.3g 90%% %.3g 99%% %.3g, %" PRId64 " of %" PRId64 " elements differ\n",
                v->max_abs, v->max_rel, v->cosine, v->max_ulp, v->q50, v->q90, v->q99,
                v->n_mismatch, v->n);
    if (r->n_path > 1) {
        fprintf(f, "  error growth to the outputs:\n");
        int nw = 8;
        for (int k = 0; k < r->n_path; k++) {
            const ox_compare_value *p = &r->values[r->path[k]];
            int len = (int)strlen(p->name);
            if (len > nw) nw = len < 48 ? len : 48;
        }
        for (int k = 0; k < r->n_path; k++) {
            if (r->n_path > 16 && k == 8) {
                fprintf(f, "    ... %d more ...\n", r->n_path - 15);
                k = r->n_path - 7;
            }
            const ox_compare_value *p = &r->values[r->path[k]];
            char name[64];
            clip(p->name, 48, name, sizeof name);
            fprintf(f, "    %-*s  %-16s rel L2 %-9s%s%s\n", nw, name, p->op ? p->op : "-",
                    num3(x, sizeof x, p->rel_l2), p->diverges ? " !" : "",
                    p->is_output ? " (output)" : "");
        }
    }
    int n_out = 0, n_bad = 0;
    for (int i = 0; i < r->n_values; i++)
        if (r->values[i].is_output) n_out++, n_bad += r->values[i].diverges;
    if (n_out)
        fprintf(f, "  outputs: %d of %d diverge%s\n", n_bad, n_out,
                r->outputs_diverge ? "" : " (the error stays inside the graph)");
}

/* The rows to show: all, or (over 60) the first 20, those around the first divergence, and
 * the outputs. */
static void pick_rows(const ox_compare_report *r, bool all, bool *show) {
    for (int i = 0; i < r->n_values; i++) {
        int fd = r->first_divergent;
        show[i] = all || r->n_values <= 60 || i < 20 || r->values[i].is_output ||
                  (fd >= 0 && i >= fd - 5 && i <= fd + 5);
    }
}

static void print_table(const ox_compare_report *r, bool all) {
    bool *show = calloc((size_t)r->n_values + 1, sizeof *show);
    if (!show) return;
    pick_rows(r, all, show);
    int wn = 5, wo = 2, ws = 5, wi = 1;
    for (int i = 0; i < r->n_values; i++) {
        if (!show[i]) continue;
        const ox_compare_value *v = &r->values[i];
        char s[400];
        fmt_shape(v, s, sizeof s);
        int ln = (int)strlen(v->name), lo = v->op ? (int)strlen(v->op) : 1, ls = (int)strlen(s);
        wn = ln > wn ? (ln < 48 ? ln : 48) : wn;
        wo = lo > wo ? (lo < 24 ? lo : 24) : wo;
        ws = ls > ws ? (ls < 32 ? ls : 32) : ws;
    }
    for (int n = r->n_values; n >= 10; n /= 10) wi++;
    printf("%*s  %-*s  %-*s  %-*s  %9s  %9s  %9s  %9s\n", wi, "#", wn, "value", wo, "op", ws,
           "shape", "max abs", "rel L2", "cosine", "ULP");
    int skipped = 0, left_out = 0;
    for (int i = 0; i <= r->n_values; i++) {
        if (i < r->n_values && !show[i]) {
            skipped++, left_out++;
            continue;
        }
        if (skipped) printf("%*s  ... %d value%s ...\n", wi, "", skipped, skipped == 1 ? "" : "s");
        skipped = 0;
        if (i == r->n_values) break;
        const ox_compare_value *v = &r->values[i];
        char name[64], op[32], shape[64], s[400], a[32], b[32], c[32], d[32], note[128];
        clip(v->name, wn, name, sizeof name);
        clip(v->op ? v->op : "-", wo, op, sizeof op);
        fmt_shape(v, s, sizeof s);
        clip(s, ws, shape, sizeof shape);
        row_note(v, note, sizeof note);
        bool fl = v->rtol > 0 || v->atol > 0;
        if (v->shape_mismatch)
            snprintf(a, sizeof a, "-"), snprintf(b, sizeof b, "-"), snprintf(c, sizeof c, "-"),
                snprintf(d, sizeof d, "-");
        else {
            num3(a, sizeof a, v->max_abs), num3(b, sizeof b, v->rel_l2);
            num3(c, sizeof c, v->cosine);
            if (fl && v->dtype != OX_COMPLEX64 && v->dtype != OX_COMPLEX128)
                num3(d, sizeof d, v->max_ulp);
            else
                snprintf(d, sizeof d, "-");
        }
        const char *mark = i == r->first_divergent ? "  << first divergence"
                           : v->diverges           ? "  !"
                                                   : "";
        printf("%*d  %-*s  %-*s  %-*s  %9s  %9s  %9s  %9s%s%s%s\n", wi, i, wn, name, wo, op, ws,
               shape, a, b, c, d, mark, note[0] ? "  " : "", note);
    }
    if (left_out)
        printf("(%d of %d values shown: the first 20, those around the first divergence and the "
               "outputs; --all prints every one)\n",
               r->n_values - left_out, r->n_values);
    free(show);
}

/* ---- JSON ------------------------------------------------------------------------------ */

static void json_num(FILE *f, const char *key, double v) {
    fprintf(f, ", \"%s\": ", key);
    if (isfinite(v))
        fprintf(f, "%.9g", v);
    else
        fputs("null", f);
}

static void json_value(FILE *f, const ox_compare_value *v) {
    fputs("{\"name\": ", f);
    cli_json_str(f, v->name);
    fputs(", \"node\": ", f);
    cli_json_str(f, v->node);
    fputs(", \"op\": ", f);
    cli_json_str(f, v->op);
    fputs(", \"node_desc\": ", f);
    cli_json_str(f, v->node_desc);
    fprintf(f, ", \"is_output\": %s, \"dtype\": ", v->is_output ? "true" : "false");
    cli_json_str(f, ox_dtype_name(v->dtype));
    fputs(", \"shape\": [", f);
    for (int d = 0; d < v->rank; d++) fprintf(f, "%s%" PRId64, d ? ", " : "", v->dims[d]);
    fprintf(f, "], \"shape_mismatch\": %s, \"n\": %" PRId64, v->shape_mismatch ? "true" : "false",
            v->n);
    json_num(f, "max_abs", v->max_abs);
    json_num(f, "max_rel", v->max_rel);
    json_num(f, "rel_l2", v->rel_l2);
    json_num(f, "cosine", v->cosine);
    json_num(f, "max_ulp", v->max_ulp);
    json_num(f, "q50", v->q50);
    json_num(f, "q90", v->q90);
    json_num(f, "q99", v->q99);
    fprintf(f,
            ", \"n_mismatch\": %" PRId64 ", \"nan_a\": %" PRId64 ", \"nan_b\": %" PRId64
            ", \"inf_a\": %" PRId64 ", \"inf_b\": %" PRId64,
            v->n_mismatch, v->nan_a, v->nan_b, v->inf_a, v->inf_b);
    json_num(f, "rtol", v->rtol);
    json_num(f, "atol", v->atol);
    fprintf(f, ", \"diverges\": %s}", v->diverges ? "true" : "false");
}

static void print_json(const ox_compare_report *r, const char *model, const char *la,
                       const char *lb) {
    FILE *f = stdout;
    fputs("{\"model\": ", f);
    cli_json_str(f, model);
    fputs(", \"a\": ", f);
    cli_json_str(f, la);
    fputs(", \"b\": ", f);
    cli_json_str(f, lb);
    fprintf(f, ", \"agree\": %s, \"first_divergent\": ", r->first_divergent < 0 ? "true" : "false");
    if (r->first_divergent < 0)
        fputs("null", f);
    else
        json_value(f, &r->values[r->first_divergent]);
    fputs(", \"path\": [", f);
    for (int k = 0; k < r->n_path; k++) {
        if (k) fputs(", ", f);
        cli_json_str(f, r->values[r->path[k]].name);
    }
    fprintf(f, "], \"only_a\": %d, \"only_b\": %d, \"outputs_diverge\": %s, \"values\": [",
            r->n_only_a, r->n_only_b, r->outputs_diverge ? "true" : "false");
    for (int i = 0; i < r->n_values; i++) {
        fputs(i ? ",\n  " : "\n  ", f);
        json_value(f, &r->values[i]);
    }
    fputs("]}\n", f);
}

/* ---- HTML ------------------------------------------------------------------------------ */

static void html_str(FILE *f, const char *s) {
    for (; s && *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
    }
}

/* Status of a compared value: 1 green (error under a tenth of the tolerance), 2 yellow
 * (under it), 3 red (diverges). */
static int value_status(const ox_compare_value *v) {
    if (v->diverges) return 3;
    if (v->rtol > 0 && !(v->rel_l2 / v->rtol < 0.1)) return 2;
    return 1;
}

static const char *const status_class[] = {"grey", "green", "yellow", "red"};
static const char *const status_fill[] = {"#d9d9d9", "#9fd89f", "#f5dc72", "#ef7b7b"};

/* Report values by name, for the drawing. */
struct name_index {
    const ox_compare_report *r;
    int *order; /* value indices sorted by name */
};

static const ox_compare_report *g_sort_report; /* for qsort's comparison only */

static int cmp_by_name(const void *a, const void *b) {
    return strcmp(g_sort_report->values[*(const int *)a].name,
                  g_sort_report->values[*(const int *)b].name);
}

static int index_find(const struct name_index *x, const char *name) {
    int lo = 0, hi = x->r->n_values - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2, c = strcmp(x->r->values[x->order[mid]].name, name);
        if (c == 0) return x->order[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

/* One box of the drawing: a graph input or a node. */
struct item {
    int node;  /* node index, -1 for a graph input */
    int value; /* the graph input's value, or the node's first output */
    int depth, status, first;
    bool live; /* reached from a graph input */
    double key, x, y;
};

struct edge {
    int from, to;
};

static int cmp_item_key(const void *a, const void *b) {
    const struct item *x = *(const struct item *const *)a, *y = *(const struct item *const *)b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return (x->node > y->node) - (x->node < y->node);
}

#define BOX_W     168
#define BOX_H     38
#define STEP_X    (BOX_W + 18)
#define STEP_Y    (BOX_H + 44)
#define MARGIN    16
#define MAX_DRAWN 5000

/* Place the items of each layer left to right, centred in a width of `widest` boxes. */
static void place_layer(struct item **layer, int n, int depth, int widest) {
    qsort(layer, (size_t)n, sizeof *layer, cmp_item_key);
    double x0 = MARGIN + (double)(widest - n) * STEP_X / 2;
    for (int k = 0; k < n; k++) {
        layer[k]->x = x0 + k * STEP_X;
        layer[k]->y = MARGIN + (double)depth * STEP_Y;
    }
}

/* The graph as SVG: boxes in layers by longest path from the inputs (constants just above
 * their first reader), ordered by the mean position of their predecessors, each coloured by
 * its outputs' error and linked to its row of the table. */
static void html_graph(FILE *f, const struct ox_graph *g, const ox_compare_report *r) {
    int n_items = g->n_inputs + g->n_nodes;
    if (n_items > MAX_DRAWN) {
        fprintf(f, "<p>The graph has %d nodes: too many to draw.</p>\n", g->n_nodes);
        return;
    }
    struct item *it = calloc((size_t)n_items + 1, sizeof *it);
    int *producer = malloc(sizeof(int) * ((size_t)g->n_values + 1));
    struct edge *e = NULL;
    int n_e = 0, cap_e = 0, n_layers = 0;
    struct name_index x = {r, malloc(sizeof(int) * ((size_t)r->n_values + 1))};
    struct item **layer = calloc((size_t)n_items + 1, sizeof *layer);
    int *count = NULL;
    if (!it || !producer || !x.order || !layer) goto done;
    for (int i = 0; i < r->n_values; i++) x.order[i] = i;
    g_sort_report = r;
    qsort(x.order, (size_t)r->n_values, sizeof *x.order, cmp_by_name);
    for (int v = 0; v < g->n_values; v++) producer[v] = -1;
    for (int k = 0; k < g->n_inputs; k++) {
        it[k] = (struct item){.node = -1, .value = g->inputs[k], .live = true};
        producer[g->inputs[k]] = k;
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const struct ox_node *nd = &g->nodes[i];
        struct item *t = &it[g->n_inputs + i];
        *t = (struct item){.node = i, .value = -1};
        for (int k = 0; k < nd->n_outputs; k++)
            if (nd->outputs[k] >= 0) {
                if (t->value < 0) t->value = nd->outputs[k];
                producer[nd->outputs[k]] = g->n_inputs + i;
            }
    }
    /* edges and depths (nodes come in execution order: producers first) */
    for (int i = 0; i < g->n_nodes; i++) {
        const struct ox_node *nd = &g->nodes[i];
        int to = g->n_inputs + i;
        for (int k = 0; k < nd->n_inputs; k++) {
            int v = nd->inputs[k], from = v >= 0 ? producer[v] : -1;
            if (from < 0 || from == to) continue;
            if (n_e == cap_e) {
                cap_e = cap_e ? cap_e * 2 : 256;
                struct edge *ne = realloc(e, sizeof *ne * (size_t)cap_e);
                if (!ne) goto done;
                e = ne;
            }
            e[n_e++] = (struct edge){from, to};
            if (it[from].live) {
                it[to].live = true;
                if (it[from].depth + 1 > it[to].depth) it[to].depth = it[from].depth + 1;
            }
        }
        if (!it[to].live) it[to].depth = -1; /* placed below */
    }
    for (int i = g->n_nodes - 1; i >= 0; i--) {
        struct item *t = &it[g->n_inputs + i];
        if (t->live) continue;
        int best = -1;
        for (int k = 0; k < n_e; k++)
            if (e[k].from == g->n_inputs + i && it[e[k].to].depth >= 0 &&
                (best < 0 || it[e[k].to].depth < best))
                best = it[e[k].to].depth;
        t->depth = best > 0 ? best - 1 : 0;
    }
    for (int k = 0; k < n_items; k++)
        if (it[k].depth + 1 > n_layers) n_layers = it[k].depth + 1;
    /* colours: the worst of the item's compared outputs */
    for (int k = 0; k < n_items; k++) {
        const struct ox_node *nd = it[k].node >= 0 ? &g->nodes[it[k].node] : NULL;
        int n_out = nd ? nd->n_outputs : 1;
        for (int j = 0; j < n_out; j++) {
            int v = nd ? nd->outputs[j] : it[k].value;
            int idx = v >= 0 ? index_find(&x, g->values[v].name) : -1;
            if (idx < 0) continue;
            int s = value_status(&r->values[idx]);
            if (s > it[k].status) it[k].status = s;
            if (idx == r->first_divergent) it[k].first = 1;
        }
    }
    /* layout: layer by layer, each item after the mean x of its predecessors */
    count = calloc((size_t)n_layers + 1, sizeof *count);
    if (!count) goto done;
    int widest = 1;
    for (int k = 0; k < n_items; k++) count[it[k].depth]++;
    for (int d = 0; d < n_layers; d++) widest = count[d] > widest ? count[d] : widest;
    for (int pass = 0; pass < 2; pass++) {
        for (int d = 0; d < n_layers; d++) {
            int n = 0;
            for (int k = 0; k < n_items; k++) {
                if (it[k].depth != d) continue;
                double sum = 0;
                int m = 0;
                for (int j = 0; j < n_e; j++) {
                    /* pass 0: predecessors above; pass 1: also readers (for constants) */
                    if (e[j].to == k && it[e[j].from].depth < d) sum += it[e[j].from].x, m++;
                    if (pass == 1 && !m && e[j].from == k && it[e[j].to].depth > d)
                        sum += it[e[j].to].x, m++;
                }
                if (pass == 0 || m) it[k].key = m ? sum / m : 1e12 + k;
                layer[n++] = &it[k];
            }
            place_layer(layer, n, d, widest);
        }
    }
    double width = 2 * MARGIN + (double)widest * STEP_X, height = 2 * MARGIN + n_layers * STEP_Y;
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
            "viewBox=\"0 0 %.0f %.0f\">\n<g stroke=\"#8a8a8a\" stroke-width=\"1\" fill=\"none\">\n",
            width, height, width, height);
    for (int k = 0; k < n_e; k++) {
        const struct item *a = &it[e[k].from], *b = &it[e[k].to];
        fprintf(f, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\"/>\n", a->x + BOX_W / 2.0,
                a->y + BOX_H, b->x + BOX_W / 2.0, b->y);
    }
    fputs("</g>\n", f);
    for (int k = 0; k < n_items; k++) {
        const struct item *t = &it[k];
        const char *vname = t->value >= 0 ? g->values[t->value].name : "";
        int idx = t->value >= 0 ? index_find(&x, vname) : -1;
        const char *op = t->node >= 0 ? g->nodes[t->node].op_type : "input";
        char label[64], a[32], b[32];
        if (idx >= 0) fprintf(f, "<a href=\"#v%d\">", idx);
        fputs("<g><title>", f);
        if (t->node >= 0 && g->nodes[t->node].name && *g->nodes[t->node].name) {
            html_str(f, g->nodes[t->node].name);
            fputs(" ", f);
        }
        fprintf(f, "(%s) ", op);
        html_str(f, vname);
        if (idx >= 0) {
            const ox_compare_value *v = &r->values[idx];
            fprintf(f, ": rel L2 %s, max abs %s%s", num3(a, sizeof a, v->rel_l2),
                    num3(b, sizeof b, v->max_abs), v->diverges ? ", diverges" : "");
        } else {
            fputs(": not compared", f);
        }
        fprintf(f,
                "</title><rect x=\"%.0f\" y=\"%.0f\" width=\"%d\" height=\"%d\" rx=\"5\" "
                "fill=\"%s\" stroke=\"%s\" stroke-width=\"%d\"/>",
                t->x, t->y, BOX_W, BOX_H, status_fill[t->status], t->first ? "#000" : "#666",
                t->first ? 3 : 1);
        clip(op, 22, label, sizeof label);
        fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\" font-weight=\"bold\">",
                t->x + BOX_W / 2.0, t->y + 15);
        html_str(f, label);
        size_t vl = strlen(vname); /* the end of a long name tells most */
        snprintf(label, sizeof label, "%s%s", vl > 24 ? "..." : "",
                 vl > 24 ? vname + vl - 21 : vname);
        fprintf(f, "</text><text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">", t->x + BOX_W / 2.0,
                t->y + 30);
        html_str(f, label);
        fputs("</text></g>", f);
        fputs(idx >= 0 ? "</a>\n" : "\n", f);
    }
    fputs("</svg>\n", f);
done:
    free(it), free(producer), free(e), free(x.order), free(layer), free(count);
}

static const char html_style[] =
    "body{font-family:system-ui,-apple-system,sans-serif;margin:24px;color:#222}\n"
    "h1{font-size:22px}h2{font-size:18px;margin-top:28px}\n"
    "pre{background:#f5f5f5;padding:10px;overflow-x:auto;font-size:13px}\n"
    "table{border-collapse:collapse;font-size:12px}\n"
    "th,td{padding:2px 7px;border-bottom:1px solid #e3e3e3;text-align:right;"
    "white-space:nowrap}\n"
    "th{background:#eee;position:sticky;top:0}td.l,th.l{text-align:left}\n"
    "tr.red td{background:#fbd3d3}tr.yellow td{background:#fcf1c2}tr.first td{font-weight:bold}\n"
    "tr:target td{outline:2px solid #333}\n"
    ".legend span{display:inline-block;padding:2px 10px;margin-right:8px;border:1px solid #666}\n"
    ".graph{overflow:auto;border:1px solid #ddd;max-height:90vh}\n"
    "svg text{font-family:ui-monospace,monospace;font-size:11px}\n";

static int write_html(const char *path, const ox_compare_report *r, const char *model,
                      const char *la, const char *lb, const struct ox_graph *g) {
    FILE *f = fopen(path, "w");
    if (!f) return cli_errorf(EXIT_NORUN, "--html %s: %s", path, strerror(errno));
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>onnxexec "
          "compare: ",
          f);
    html_str(f, model);
    fprintf(f, "</title>\n<style>\n%s</style></head>\n<body>\n<h1>onnxexec compare</h1>\n<p>Model ",
            html_style);
    html_str(f, model);
    fputs(": <b>A</b> ", f);
    html_str(f, la);
    fputs(", <b>B</b> ", f);
    html_str(f, lb);
    fputs(".</p>\n<pre>", f);
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    if (mem) {
        print_summary(mem, r, la, lb);
        fclose(mem);
        html_str(f, text);
    }
    free(text);
    fputs("</pre>\n<h2>Graph</h2>\n<p class=\"legend\">", f);
    const char *meaning[] = {"not compared", "agrees (rel L2 under a tenth of the tolerance)",
                             "near the tolerance", "diverges"};
    for (int s = 0; s < 4; s++)
        fprintf(f, "<span style=\"background:%s\">%s</span>", status_fill[s], meaning[s]);
    fputs(" The first divergent node has a thick border; a box links to its row.</p>\n"
          "<div class=\"graph\">\n",
          f);
    if (g) html_graph(f, g, r);
    fputs("</div>\n<h2>Values</h2>\n<table>\n<tr><th>#</th><th class=\"l\">value</th>"
          "<th class=\"l\">node</th><th class=\"l\">op</th><th class=\"l\">type</th>"
          "<th>max abs</th><th>max rel</th><th>rel L2</th><th>cosine</th><th>max ULP</th>"
          "<th>q50</th><th>q90</th><th>q99</th><th>differ</th><th>NaN a/b</th>"
          "<th>Inf a/b</th><th>rtol</th><th>atol</th><th class=\"l\">verdict</th></tr>\n",
          f);
    for (int i = 0; i < r->n_values; i++) {
        const ox_compare_value *v = &r->values[i];
        char s[400], n[12][32];
        fmt_shape(v, s, sizeof s);
        if (v->dtype == OX_FLOAT) {
            memmove(s + 5, s, strlen(s) + 1);
            memcpy(s, "float", 5);
        }
        fprintf(f, "<tr id=\"v%d\" class=\"%s%s\"><td>%d</td><td class=\"l\">", i,
                status_class[value_status(v)], i == r->first_divergent ? " first" : "", i);
        html_str(f, v->name);
        fputs("</td><td class=\"l\">", f);
        html_str(f, v->node ? v->node : "-");
        fputs("</td><td class=\"l\">", f);
        html_str(f, v->op ? v->op : "-");
        fputs("</td><td class=\"l\">", f);
        html_str(f, s);
        fprintf(f,
                "</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td>"
                "<td>%s</td><td>%s</td><td>%" PRId64 "</td><td>%" PRId64 "/%" PRId64 "</td>"
                "<td>%" PRId64 "/%" PRId64 "</td><td>%s</td><td>%s</td><td class=\"l\">%s%s</td>"
                "</tr>\n",
                num3(n[0], 32, v->max_abs), num3(n[1], 32, v->max_rel), num3(n[2], 32, v->rel_l2),
                num3(n[3], 32, v->cosine), num3(n[4], 32, v->max_ulp), num3(n[5], 32, v->q50),
                num3(n[6], 32, v->q90), num3(n[7], 32, v->q99), v->n_mismatch, v->nan_a, v->nan_b,
                v->inf_a, v->inf_b, num3(n[8], 32, v->rtol), num3(n[9], 32, v->atol),
                v->diverges ? "diverges" : "agrees", v->is_output ? " (output)" : "");
    }
    fputs("</table>\n</body></html>\n", f);
    if (fclose(f) != 0) return cli_errorf(EXIT_NORUN, "--html %s: write failed", path);
    return 0;
}

/* ---- --reduce -------------------------------------------------------------------------- */

/* When the two sides compute `value` with different nodes (one side fused a chain that the
 * other ran apart, e.g. an attention block whose Softmax the other side changed), their cases
 * read different inputs and cannot be run against each other: say so. */
static void note_unlike_nodes(const struct ox_graph *ga, const struct ox_graph *gb,
                              const char *value, const char *dir_b) {
    int va = ox_graph_find_value(ga, value), vb = ox_graph_find_value(gb, value);
    if (va < 0 || vb < 0 || ga->values[va].producer < 0 || gb->values[vb].producer < 0) return;
    const struct ox_node *na = &ga->nodes[ga->values[va].producer];
    const struct ox_node *nb = &gb->nodes[gb->values[vb].producer];
    bool same = na->n_inputs == nb->n_inputs && !strcmp(na->op_type, nb->op_type);
    for (int k = 0; same && k < na->n_inputs; k++) {
        int a = na->inputs[k], b = nb->inputs[k];
        same = (a < 0) == (b < 0) && (a < 0 || !strcmp(ga->values[a].name, gb->values[b].name));
    }
    if (!same)
        fprintf(stderr,
                "note: --reduce: the sides compute %s with different nodes (%s%s%s, %s%s%s): the "
                "case in %s reads other inputs than the first one\n",
                value, na->domain && *na->domain ? na->domain : "",
                na->domain && *na->domain ? "." : "", na->op_type,
                nb->domain && *nb->domain ? nb->domain : "", nb->domain && *nb->domain ? "." : "",
                nb->op_type, dir_b);
}

static int reduce_one(ox_model *m, const struct inputs *in, int n_threads, const char *value,
                      const char *dir, bool json) {
    ox_tensor *vals = NULL;
    int n = 0;
    ox_status st = ox_model_run_all(m, in->pass, in->n_pass, n_threads, &vals, &n);
    if (!st) st = ox_compare_reduce(m, vals, n, value, dir);
    ox_values_free(vals, n);
    if (st) return cli_errorf(EXIT_NORUN, "--reduce %s: %s", dir, cli_lib_msg(st));
    fprintf(json ? stderr : stdout,
            "reduced: %s (the node of %s; check it with onnxexec test %s)\n", dir, value, dir);
    return 0;
}

/* Load side s's model file. Its inputs bind as MODEL's do, by name when it has those
 * names, else by position. When its outputs are named unlike MODEL's (an export renames
 * them), it runs here and becomes a side of values, its outputs renamed to MODEL's by
 * position, so that at least the outputs meet. */
static int load_other(struct side *s, ox_model **slot, const ox_model *info, struct inputs *in,
                      int n_threads) {
    struct models shapes = {0};
    int rc;
    if (is_zip(s->other)) {
        shapes.ts_shapes = calloc((size_t)in->n_pass + 1, sizeof *shapes.ts_shapes);
        if (!shapes.ts_shapes) return cli_errorf(EXIT_NORUN, "out of memory");
        for (int k = 0; k < in->n_pass; k++) {
            shapes.ts_shapes[k] = in->pass[k];
            shapes.ts_shapes[k].name = NULL; /* forward's names are not MODEL's */
            shapes.ts_shapes[k].data = NULL;
        }
        shapes.n_ts_shapes = in->n_pass;
    }
    rc = load_model(s->other, false, NULL, &shapes, slot);
    free(shapes.ts_shapes);
    if (rc) return rc;
    s->model = *slot;
    bind_for(s->model, in);
    int n_out = ox_model_n_outputs(info);
    if (n_out == 0 || ox_model_n_outputs(s->model) != n_out) return 0;
    for (int k = 0; k < n_out; k++)
        for (int j = 0; j < n_out; j++) {
            ox_tensor da, db;
            if (ox_model_output(info, k, &da, NULL) == OX_OK &&
                ox_model_output(s->model, j, &db, NULL) == OX_OK && da.name && db.name &&
                strcmp(da.name, db.name) == 0)
                return 0; /* an output name in common: compared by name */
        }
    ox_tensor *vals = NULL;
    int n = 0;
    ox_status st = ox_model_run_all(s->model, in->pass, in->n_pass, n_threads, &vals, &n);
    if (st) return cli_errorf(EXIT_NORUN, "side %s: %s", s->spec, cli_lib_msg(st));
    for (int i = 0; i < n && !rc; i++) {
        char *name = (char *)vals[i].name;
        for (int k = 0; k < n_out; k++) {
            ox_tensor da, db;
            if (ox_model_output(s->model, k, &db, NULL) == OX_OK && db.name &&
                strcmp(db.name, name) == 0 && ox_model_output(info, k, &da, NULL) == OX_OK) {
                free(name);
                name = strdup(da.name);
                break;
            }
        }
        rc = vals_push(&s->vals, &vals[i], name);
        vals[i].name = NULL;
        memset(&vals[i], 0, sizeof vals[i]);
    }
    ox_values_free(vals, n);
    if (rc) return rc;
    fprintf(stderr, "note: %s names its outputs unlike MODEL: they are matched by position\n",
            s->spec);
    s->kind = SIDE_VALUES;
    s->model = NULL;
    return 0;
}

/* ---- the command ----------------------------------------------------------------------- */

int cmd_compare(int argc, char **argv) {
    cli_prefix = "compare: ";
    struct opts o = {0};
    struct models mm = {0};
    struct side sd[2] = {0};
    struct inputs in = {0};
    ox_compare_report rep = {0};
    bool help, have_rep = false;
    int rc = parse_args(argc, argv, &o, &help);
    if (rc || help) {
        if (help) cli_usage(usage_compare);
        goto done;
    }
    for (int k = 0; k < 2; k++)
        if ((rc = parse_side(o.side_spec[k], &sd[k]))) goto done;
    int ref = sd[0].kind == SIDE_RUN ? 0 : sd[1].kind == SIDE_RUN ? 1 : -1;
    if (o.reduce && ref < 0) {
        rc = cli_errorf(EXIT_USAGE,
                        "--reduce needs a side that onnxexec runs (cpu, cpu:noopt or a "
                        "model file): '%s' and '%s' are both reference values",
                        o.side_spec[0], o.side_spec[1]);
        goto done;
    }
    /* -i files first: their shapes serve a TorchScript MODEL's import */
    for (int k = 0; k < o.n_iopts; k++)
        if ((rc = read_tensor(o.iopts[k].file, &o.iopts[k].t, NULL))) goto done;
    if ((rc = make_ts_shapes(&o, &mm))) goto done;
    for (int k = 0; k < 2; k++) {
        struct side *s = &sd[k];
        if (s->kind != SIDE_RUN || s->other) continue;
        bool gpu = s->device[0] && !s->noopt; /* optimized for where it runs */
        ox_model **slot = s->noopt ? &mm.noopt : gpu ? &mm.opt_gpu : &mm.opt;
        if (!*slot && (rc = load_model(o.model_path, s->noopt, gpu ? s->device : NULL, &mm, slot)))
            goto done;
        s->model = *slot;
    }
    /* MODEL as a description: names of outputs and inputs, the order of reference values */
    ox_model *info = mm.opt ? mm.opt : mm.noopt ? mm.noopt : mm.opt_gpu;
    if (!info) {
        if ((rc = load_model(o.model_path, true, NULL, &mm, &mm.noopt))) goto done;
        info = mm.noopt;
    }
    for (int k = 0; k < 2; k++)
        if (sd[k].kind == SIDE_VALUES && (rc = load_values(&sd[k], info))) goto done;
    if (ref >= 0) {
        const char *ds = sd[0].dataset ? sd[0].dataset : sd[1].dataset;
        char *given = NULL;
        if (o.inputs_dir && !(given = dataset_of(o.inputs_dir))) {
            rc = cli_errorf(EXIT_NORUN,
                            "--inputs %s: not a backend-test folder (no "
                            "test_data_set_0/input_0.pb, no input_0.pb)",
                            o.inputs_dir);
            goto done;
        }
        rc = prepare_inputs(info, &o, given ? given : ds, &in);
        free(given);
        if (rc) goto done;
    }
    /* other models: loaded now that the inputs are known (a TorchScript import takes their
     * shapes, by position) */
    for (int k = 0; k < 2; k++)
        if (sd[k].kind == SIDE_RUN && sd[k].other &&
            (rc = load_other(&sd[k], &mm.other[k], info, &in, o.n_threads)))
            goto done;
    ref = sd[0].model ? 0 : sd[1].model ? 1 : -1;
    if (o.reduce && ref < 0) {
        rc = cli_errorf(EXIT_USAGE, "--reduce: neither side is run by onnxexec under MODEL's value "
                                    "names");
        goto done;
    }
    ox_compare_side cs[2];
    for (int k = 0; k < 2; k++)
        cs[k] = (ox_compare_side){.model = sd[k].model,
                                  .n_threads = o.n_threads,
                                  .values = sd[k].vals.t,
                                  .n_values = sd[k].vals.n,
                                  .label = sd[k].spec,
                                  .device = sd[k].device[0] ? sd[k].device : NULL,
                                  .precision = sd[k].precision};
    ox_compare_options co = {.inputs = in.pass,
                             .n_inputs = in.n_pass,
                             .rtol = o.rtol,
                             .atol = o.atol,
                             .outputs_only = o.outputs_only};
    ox_status st = ox_compare(&cs[0], &cs[1], &co, &rep);
    if (st) {
        const char *m = cli_lib_msg(st);
        rc = cli_errorf(EXIT_NORUN, "%s", strncmp(m, "compare: ", 9) ? m : m + 9);
        goto done;
    }
    have_rep = true;
    if (o.json) {
        print_json(&rep, o.model_path, sd[0].spec, sd[1].spec);
    } else {
        print_table(&rep, o.all);
        putchar('\n');
        print_summary(stdout, &rep, sd[0].spec, sd[1].spec);
    }
    fflush(stdout);
    rc = rep.first_divergent >= 0 ? EXIT_DIVERGE : 0;
    int rc2 = 0;
    if (o.html) {
        const struct ox_graph *g = ox_model_graph(ref >= 0 ? sd[ref].model : info);
        rc2 = write_html(o.html, &rep, o.model_path, sd[0].spec, sd[1].spec, g);
    }
    if (!rc2 && o.reduce && rep.first_divergent < 0)
        fprintf(stderr, "note: --reduce: the sides agree, nothing to reduce\n");
    if (!rc2 && o.reduce && rep.first_divergent >= 0) {
        const char *value = rep.values[rep.first_divergent].name;
        rc2 = reduce_one(sd[ref].model, &in, o.n_threads, value, o.reduce, o.json);
        struct side *b = &sd[1 - ref];
        if (!rc2 && b->kind == SIDE_RUN && b->other) {
            const struct ox_graph *gb = ox_model_graph(b->model);
            int v = ox_graph_find_value(gb, value);
            char *dir = cli_path_join(o.reduce, "b");
            if (!dir)
                rc2 = cli_errorf(EXIT_NORUN, "out of memory");
            else if (v < 0 || gb->values[v].producer < 0)
                fprintf(stderr, "note: --reduce: no node of %s computes %s: no case in %s\n",
                        b->spec, value, dir);
            else
                rc2 = reduce_one(b->model, &in, o.n_threads, value, dir, o.json);
            if (!rc2 && v >= 0 && gb->values[v].producer >= 0)
                note_unlike_nodes(ox_model_graph(sd[ref].model), gb, value, dir);
            free(dir);
        }
    }
    if (rc2) rc = rc2;
done:
    if (have_rep) ox_compare_report_free(&rep);
    inputs_free(&in);
    for (int k = 0; k < 2; k++) {
        vals_free(&sd[k].vals);
        free(sd[k].dataset);
    }
    models_free(&mm);
    opts_free(&o);
    return rc;
}
