/* The unit tests' shared harness: counted checks, attribute lists, tensor builders, and a
 * runner that puts one node through its operator-table row (infer, then the CPU kernel) the
 * way the executor does. Each test program includes this header once (in its one .c file),
 * and the counters and the string arena below are that program's own.
 *
 *     struct attrs at = {0};
 *     attr_i(&at, "axis", 1);
 *     int64_t d[2] = {2, 3};
 *     ox_tensor x = mk(OX_FLOAT, 2, d), y;
 *     const ox_tensor *in[1] = {&x};
 *     CHECK(run("Softmax", 13, &at, 1, in, &y) == OX_OK, "softmax: %s", ox_errmsg());
 *     ...
 *     ox_tensor_free_data(&y);
 *     return harness_finish(); // prints "N checks, M failed"; exit status 0 when none failed
 *
 * What it gives
 * - CHECK(cond, fmt, ...): counts a check; when cond is false, counts a failure and prints
 *   "FAIL file:line: " and the message. EXPECT(cond): the same with the condition's text and
 *   the last error (ox_errmsg) as the message. n_checks and n_fail are the counters;
 *   harness_finish (or harness_finish_bench, for tests with a --bench mode) ends main.
 * - struct attrs and attr_i/_f/_s/_t/_ints/_floats/_strs: a node's attribute list, up to
 *   HARNESS_MAX_ATTRS entries.
 * - mk, mk1, mk_i64, scalar: allocated tensors (a failed allocation ends the program).
 * - run, run_dom, run_n, run_node: infer without input data (as at plan time), and again with
 *   it when infer answers OX_NEED_DATA; check the attribute types as the executor does;
 *   allocate the outputs; run the CPU kernel with the scratch memory infer asked for.
 * - free_out: frees an output the way its element type needs; close_to, irand, now.
 *
 * Who owns what
 * - struct attrs borrows every name, string, list and tensor given to it: they must outlive
 *   the runs that use it. It owns nothing and needs no freeing.
 * - Inputs are the caller's. The runners allocate every output they fill, and the caller
 *   frees it with free_out (ox_tensor_free_data for every type but strings). When infer or
 *   the kernel fails, the outputs are left zeroed and own nothing, so freeing them is
 *   harmless.
 * - A string output is an array of borrowed pointers: into the inputs, or to new strings
 *   that the kernel made in the harness's arena, which harness_finish frees.
 */
#ifndef OX_TESTS_HARNESS_H
#define OX_TESTS_HARNESS_H

#include "kernels/op.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define HARNESS_MAX_ATTRS 24 /* attributes of one node */
#define HARNESS_MAX_IN    32 /* inputs of one node */
#define HARNESS_MAX_OUT   8  /* outputs of one node */

/* ---- checks ---------------------------------------------------------------------------- */

static int n_fail, n_checks;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        n_checks++;                                                                                \
        if (!(cond)) {                                                                             \
            n_fail++;                                                                              \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                            \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
        }                                                                                          \
    } while (0)

#define EXPECT(cond) CHECK(cond, "%s (%s)", #cond, ox_errmsg())

/* New strings made by kernels, as the plan's arena holds them in a session. */
static struct ox_arena harness_strings;

/* run_node's kernels run on a pool of this many threads (1: none, serially); set it around
 * the cases that check how a kernel splits its work. */
static int harness_threads = 1;
static struct ox_pool *harness_pool;
static int harness_pool_threads;

static inline struct ox_pool *harness_get_pool(void) {
    if (harness_threads <= 1) return NULL;
    if (harness_pool && harness_pool_threads != harness_threads) {
        ox_pool_free(harness_pool);
        harness_pool = NULL;
    }
    if (!harness_pool && ox_pool_create(harness_threads, &harness_pool)) {
        printf("harness: no pool of %d threads\n", harness_threads);
        exit(2);
    }
    harness_pool_threads = harness_threads;
    return harness_pool;
}

/* Frees the string arena and the pool, prints the summary line and returns the exit
 * status. */
static inline int harness_finish(void) {
    ox_arena_free(&harness_strings);
    if (harness_pool) ox_pool_free(harness_pool);
    printf("%d checks, %d failed\n", n_checks, n_fail);
    return n_fail != 0;
}

/* harness_finish, then bench() when the first argument is --bench. */
static inline int harness_finish_bench(int argc, char **argv, void (*bench)(void)) {
    int rc = harness_finish();
    if (argc > 1 && !strcmp(argv[1], "--bench")) bench();
    return rc;
}

/* ---- attributes ------------------------------------------------------------------------ */

struct attrs {
    int n;
    struct ox_attr a[HARNESS_MAX_ATTRS];
};

static inline struct ox_attr *attr_add(struct attrs *at, const char *name, ox_attr_type type) {
    if (at->n == HARNESS_MAX_ATTRS) {
        printf("harness: more than %d attributes (at '%s')\n", HARNESS_MAX_ATTRS, name);
        exit(2);
    }
    struct ox_attr *a = &at->a[at->n++];
    *a = (struct ox_attr){.name = name, .type = type};
    return a;
}

static inline void attr_i(struct attrs *at, const char *name, int64_t v) {
    attr_add(at, name, OX_ATTR_INT)->i = v;
}

static inline void attr_f(struct attrs *at, const char *name, float v) {
    attr_add(at, name, OX_ATTR_FLOAT)->f = v;
}

static inline void attr_s(struct attrs *at, const char *name, const char *v) {
    struct ox_attr *a = attr_add(at, name, OX_ATTR_STRING);
    a->s = v;
    a->s_len = strlen(v);
}

static inline void attr_t(struct attrs *at, const char *name, ox_tensor *t) {
    attr_add(at, name, OX_ATTR_TENSOR)->t = t;
}

static inline void attr_ints(struct attrs *at, const char *name, int n, int64_t *v) {
    struct ox_attr *a = attr_add(at, name, OX_ATTR_INTS);
    a->n = n;
    a->ints = v;
}

static inline void attr_floats(struct attrs *at, const char *name, int n, float *v) {
    struct ox_attr *a = attr_add(at, name, OX_ATTR_FLOATS);
    a->n = n;
    a->floats = v;
}

/* `lens` (n entries, the caller's) receives the lengths and becomes string_lens; with NULL
 * the attribute has no string_lens. */
static inline void attr_strs(struct attrs *at, const char *name, int n, const char **v,
                             size_t *lens) {
    struct ox_attr *a = attr_add(at, name, OX_ATTR_STRINGS);
    if (lens)
        for (int i = 0; i < n; i++) lens[i] = strlen(v[i]);
    a->n = n;
    a->strings = v;
    a->string_lens = lens;
}

/* ---- tensors --------------------------------------------------------------------------- */

/* Graphs built through the IR (then exported and loaded as a model): a value with a dtype
 * and static shape, and a one-output node of the default domain at `opset`. */
static inline int graph_value(struct ox_graph *g, const char *name, ox_dtype dt, int rank,
                              const int64_t *d) {
    int v = ox_graph_add_value(g, name);
    struct ox_dim *dd = ox_graph_alloc(g, sizeof *dd * (size_t)(rank + 1));
    for (int k = 0; k < rank; k++) dd[k].value = d[k];
    g->values[v].dtype = dt;
    g->values[v].rank = rank;
    g->values[v].dims = dd;
    return v;
}

static inline struct ox_node *graph_node(struct ox_graph *g, const char *name, const char *op,
                                         int n_in, const int *in, int out, int opset) {
    struct ox_node *n = ox_graph_add_node(g, name, "", op, n_in, in, 1, &out);
    n->opset = opset;
    return n;
}

static inline ox_tensor mk(ox_dtype dt, int rank, const int64_t *dims) {
    ox_tensor t;
    memset(&t, 0, sizeof t);
    if (ox_tensor_alloc(&t, dt, rank, dims) != OX_OK) {
        printf("alloc failed: %s\n", ox_errmsg());
        exit(2);
    }
    return t;
}

static inline ox_tensor mk1(ox_dtype dt, int64_t d0) {
    return mk(dt, 1, &d0);
}

static inline ox_tensor mk_i64(int n, const int64_t *v) {
    int64_t d = n;
    ox_tensor t = mk(OX_INT64, 1, &d);
    if (n) memcpy(t.data, v, (size_t)n * sizeof *v);
    return t;
}

static inline ox_tensor scalar(ox_dtype dt, double v) {
    ox_tensor t = mk(dt, 0, NULL);
    ox_set_f64(&t, 0, v);
    return t;
}

/* Frees a runner's output and zeroes it. A string output holds borrowed pointers: only the
 * array is freed. */
static inline void free_out(ox_tensor *t) {
    if (t->dtype == OX_STRING) {
        free(t->data);
        memset(t, 0, sizeof *t);
    } else {
        ox_tensor_free_data(t);
    }
}

/* ---- one node -------------------------------------------------------------------------- */

/* A node "t" of `op`; every input and output names value 0 (kernels do not look). */
static inline struct ox_node mknode(const char *domain, const char *op, int opset,
                                    const struct attrs *at, int n_in, int n_out) {
    static int ids[HARNESS_MAX_IN > HARNESS_MAX_OUT ? HARNESS_MAX_IN : HARNESS_MAX_OUT];
    return (struct ox_node){.name = "t",
                            .domain = domain,
                            .op_type = op,
                            .opset = opset,
                            .n_inputs = n_in,
                            .inputs = ids,
                            .n_outputs = n_out,
                            .outputs = ids,
                            .n_attrs = at ? at->n : 0,
                            .attrs = at ? (struct ox_attr *)at->a : NULL};
}

/* Runs one node. in[i] is NULL for an omitted input, out[j] NULL for an omitted output;
 * *asked (when given) is set when infer wanted the input data. */
static inline ox_status run_node(const char *domain, const char *op, int opset,
                                 const struct attrs *at, int n_in, const ox_tensor *const *in,
                                 int n_out, ox_tensor *const *out, bool *asked) {
    if (n_in > HARNESS_MAX_IN || n_out > HARNESS_MAX_OUT) {
        printf("harness: %s with %d inputs and %d outputs is past the limits\n", op, n_in, n_out);
        exit(2);
    }
    for (int j = 0; j < n_out; j++)
        if (out[j]) memset(out[j], 0, sizeof *out[j]);
    struct ox_node node = mknode(domain, op, opset, at, n_in, n_out);
    const struct ox_op *o = ox_op_find(domain, op, opset);
    if (!o) return ox_err(OX_E_UNSUPPORTED, "no row for %s at opset %d", op, opset);
    ox_tensor shapes[HARNESS_MAX_IN], desc[HARNESS_MAX_OUT];
    const ox_tensor *sp[HARNESS_MAX_IN];
    ox_tensor *outs[HARNESS_MAX_OUT];
    for (int i = 0; i < n_in; i++) {
        sp[i] = NULL;
        if (!in[i]) continue;
        shapes[i] = *in[i];
        shapes[i].data = NULL;
        sp[i] = &shapes[i];
    }
    memset(desc, 0, sizeof desc);
    for (int j = 0; j < n_out; j++) outs[j] = out[j] ? &desc[j] : NULL;
    struct ox_infer_ctx ictx = {.n_threads = harness_threads > 1 ? harness_threads : 1};
    (void)ox_attr_check(&node); /* forget mismatches read outside an infer function */
    ox_status st = o->infer(&ictx, &node, sp, outs);
    if (asked) *asked = st == OX_NEED_DATA;
    if (st == OX_NEED_DATA) st = o->infer(&ictx, &node, in, outs);
    ox_status ast = ox_attr_check(&node);
    if (st) return st;
    if (ast) return ast;
    for (int j = 0; j < n_out; j++) {
        if (!out[j]) continue;
        if (desc[j].dtype == OX_STRING) { /* the kernel fills in borrowed pointers */
            *out[j] = desc[j];
            out[j]->data = calloc((size_t)ox_tensor_numel(&desc[j]) + 1, sizeof(char *));
        } else {
            *out[j] = mk(desc[j].dtype, desc[j].rank, desc[j].dims);
        }
        outs[j] = out[j];
    }
    void *scratch = NULL;
    if (ictx.scratch_bytes && posix_memalign(&scratch, 64, ictx.scratch_bytes)) {
        printf("harness: no memory for %zu bytes of scratch\n", ictx.scratch_bytes);
        exit(2);
    }
    struct ox_kernel_ctx kctx = {.scratch = scratch,
                                 .scratch_bytes = ictx.scratch_bytes,
                                 .strings = &harness_strings,
                                 .pool = harness_get_pool()};
    st = o->cpu(&kctx, &node, in, outs);
    free(scratch);
    if (st)
        for (int j = 0; j < n_out; j++)
            if (out[j]) free_out(out[j]);
    return st;
}

/* n_out outputs into out[0..n_out-1], op in the default domain. */
static inline ox_status run_n(const char *op, int opset, const struct attrs *at, int n_in,
                              const ox_tensor *const *in, int n_out, ox_tensor *out, bool *asked) {
    ox_tensor *outs[HARNESS_MAX_OUT];
    for (int j = 0; j < n_out && j < HARNESS_MAX_OUT; j++) outs[j] = &out[j];
    return run_node("", op, opset, at, n_in, in, n_out, outs, asked);
}

/* One output, op in `domain`. */
static inline ox_status run_dom(const char *domain, const char *op, int opset,
                                const struct attrs *at, int n_in, const ox_tensor *const *in,
                                ox_tensor *out) {
    return run_node(domain, op, opset, at, n_in, in, 1, &out, NULL);
}

/* One output, op in the default domain. */
static inline ox_status run(const char *op, int opset, const struct attrs *at, int n_in,
                            const ox_tensor *const *in, ox_tensor *out) {
    return run_node("", op, opset, at, n_in, in, 1, &out, NULL);
}

/* ---- comparing and timing -------------------------------------------------------------- */

/* a is b within a relative tolerance; NaN matches NaN, an infinity only itself. */
static inline bool close_to(double a, double b, double tol) {
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
    if (isinf(a) || isinf(b)) return a == b;
    return fabs(a - b) <= tol * (1 + fabs(b));
}

/* A random integer in [lo, hi] from rand(). */
static inline int64_t irand(int64_t lo, int64_t hi) {
    return lo + rand() % (hi - lo + 1);
}

/* Seconds on the monotonic clock. */
static inline double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#endif
