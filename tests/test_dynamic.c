/* Values whose shapes depend on the data (after NonZero) keep their buffers from one run to
 * the next and reuse them when big enough (executor/plan.c, alloc_dynamic). One session runs
 *
 *     x[N] -Greater(0)-> m -NonZero-> nz[1,k] -Transpose-> t[k,1] -Squeeze(1)-> idx[k] (output)
 *     x, idx -Gather-> vals[k] (output)
 *     T[N,32], idx -Gather-> rows[k,32] -MatMul(B[32,16])-> prod[k,16] (output)
 *
 * (the MatMul's constant B packed once, kept by the plan for the runs after: a dynamic step's
 * prepared memory)
 * (the shape of torchvision's `torch.where(scores > t)` as exported) on inputs whose count
 * of positives k goes small, N, 0, middling, N, and each run's outputs must be exactly
 * the positions and values of the positives, counted here by a plain loop. Under the
 * sanitizers a reused buffer too small for its value would be caught. */
#include "exporter/onnx.h"
#include "harness.h"

#include "executor/session.h"

#define N 5000

/* T and B: small multiples of 1/4, so that every product sums exactly in float */
static float table(int i, int c) {
    return (float)(i % 7 + c % 5) * 0.25f;
}

static float weight(int c, int j) {
    return (float)((c + j) % 3 - 1);
}

static ox_model *make_model(void) {
    struct ox_graph *g = ox_graph_create(NULL);
    g->ir_version = 8;
    g->opsets = ox_graph_alloc(g, sizeof *g->opsets);
    g->opsets[0] = (struct ox_opset){"", 13};
    g->n_opsets = 1;
    g->name = "where";
    int64_t dx[1] = {N}, one = 1, dt[2] = {N, 32}, db[2] = {32, 16};
    int x = graph_value(g, "x", OX_FLOAT, 1, dx);
    int T = graph_value(g, "T", OX_FLOAT, 2, dt), B = graph_value(g, "B", OX_FLOAT, 2, db);
    ox_tensor *tt = ox_graph_alloc(g, sizeof *tt), *tb = ox_graph_alloc(g, sizeof *tb);
    if (ox_tensor_alloc(tt, OX_FLOAT, 2, dt) || ox_tensor_alloc(tb, OX_FLOAT, 2, db)) exit(2);
    for (int i = 0; i < N * 32; i++) ((float *)tt->data)[i] = table(i / 32, i % 32);
    for (int i = 0; i < 32 * 16; i++) ((float *)tb->data)[i] = weight(i / 16, i % 16);
    g->values[T].init = tt;
    g->values[B].init = tb;
    int zero = graph_value(g, "zero", OX_FLOAT, 0, NULL),
        ax = graph_value(g, "axes", OX_INT64, 1, &one);
    ox_tensor *z = ox_graph_alloc(g, sizeof *z), *a = ox_graph_alloc(g, sizeof *a);
    if (ox_tensor_alloc(z, OX_FLOAT, 0, NULL) || ox_tensor_alloc(a, OX_INT64, 1, &one)) exit(2);
    ((int64_t *)a->data)[0] = 1;
    g->values[zero].init = z;
    g->values[ax].init = a;
    int m = ox_graph_add_value(g, "m"), nz = ox_graph_add_value(g, "nz");
    int t = ox_graph_add_value(g, "t");
    int idx = ox_graph_add_value(g, "idx"), vals = ox_graph_add_value(g, "vals");
    int rows = ox_graph_add_value(g, "rows"), prod = ox_graph_add_value(g, "prod");
    ox_graph_add_input(g, x);
    ox_graph_add_output(g, idx);
    ox_graph_add_output(g, vals);
    ox_graph_add_output(g, prod);
    graph_node(g, "gt", "Greater", 2, (int[]){x, zero}, m, 13);
    graph_node(g, "nonzero", "NonZero", 1, (int[]){m}, nz, 13);
    struct ox_node *tr = graph_node(g, "transpose", "Transpose", 1, (int[]){nz}, t, 13);
    tr->attrs = ox_graph_alloc(g, sizeof *tr->attrs);
    int64_t *perm = ox_graph_alloc(g, sizeof *perm * 2);
    perm[0] = 1, perm[1] = 0;
    tr->attrs[0] = (struct ox_attr){.name = "perm", .type = OX_ATTR_INTS, .n = 2, .ints = perm};
    tr->n_attrs = 1;
    graph_node(g, "squeeze", "Squeeze", 2, (int[]){t, ax}, idx, 13);
    graph_node(g, "gather", "Gather", 2, (int[]){x, idx}, vals, 13);
    graph_node(g, "rows", "Gather", 2, (int[]){T, idx}, rows, 13);
    graph_node(g, "matmul", "MatMul", 2, (int[]){rows, B}, prod, 13);
    void *buf = NULL;
    size_t len = 0;
    ox_model *mo = NULL;
    if (ox_onnx_export_buffer(g, &buf, &len) || ox_model_load_buffer(buf, len, NULL, &mo)) {
        printf("cannot build the model: %s\n", ox_errmsg());
        exit(2);
    }
    free(buf);
    ox_graph_free(g);
    return mo;
}

/* x with about `frac` of its elements positive (frac 1: all, 0: none) */
static void fill(float *x, double frac, unsigned seed) {
    for (int i = 0; i < N; i++) {
        seed = seed * 1103515245u + 12345u;
        double u = (double)(seed >> 8) / (double)(1u << 24);
        x[i] = (float)(u < frac ? 0.5 + u : -0.5 - u);
    }
}

static void run_once(ox_session *s, float *x, double frac, unsigned seed) {
    fill(x, frac, seed);
    int64_t dx[1] = {N};
    ox_tensor in = {.dtype = OX_FLOAT, .rank = 1, .data = x, .name = "x"};
    in.dims[0] = dx[0];
    const ox_tensor *out[3];
    if (ox_session_run(s, &in, 1, out) != OX_OK) {
        CHECK(false, "run with %.2f positive: %s", frac, ox_errmsg());
        return;
    }
    int64_t k = 0;
    for (int i = 0; i < N; i++) k += x[i] > 0;
    CHECK(out[0]->rank == 1 && out[0]->dims[0] == k && out[1]->rank == 1 && out[1]->dims[0] == k,
          "%.2f positive: %lld positives, outputs of %lld and %lld", frac, (long long)k,
          (long long)(out[0]->rank == 1 ? out[0]->dims[0] : -1),
          (long long)(out[1]->rank == 1 ? out[1]->dims[0] : -1));
    if (out[0]->dims[0] != k || out[1]->dims[0] != k) return;
    const int64_t *idx = out[0]->data;
    const float *vals = out[1]->data, *prod = out[2]->data;
    int64_t j = 0, bad = 0;
    CHECK(out[2]->rank == 2 && out[2]->dims[0] == k && out[2]->dims[1] == 16,
          "%.2f positive: the product is not [%lld, 16]", frac, (long long)k);
    if (out[2]->rank != 2 || out[2]->dims[0] != k) return;
    for (int i = 0; i < N; i++)
        if (x[i] > 0) {
            bad += idx[j] != i || vals[j] != x[i];
            for (int c = 0; c < 16; c++) {
                float want = 0;
                for (int q = 0; q < 32; q++) want += table(i, q) * weight(q, c);
                bad += prod[j * 16 + c] != want;
            }
            j++;
        }
    CHECK(bad == 0, "%.2f positive: %lld of %lld positions or values wrong", frac, (long long)bad,
          (long long)k);
}

int main(void) {
    ox_model *m = make_model();
    ox_session *s = NULL;
    EXPECT(ox_session_create(m, &(ox_session_options){.n_threads = 1}, &s) == OX_OK);
    static float x[N];
    const double fracs[] = {0.01, 1.0, 0.0, 0.5, 1.0, 0.3, 1.0};
    for (int r = 0; s && r < (int)(sizeof fracs / sizeof *fracs); r++)
        run_once(s, x, fracs[r], 17u + (unsigned)r);
    ox_session_free(s);
    ox_model_free(m);
    return harness_finish();
}
