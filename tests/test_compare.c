/* Parity (executor/compare.c) on a small graph built through the IR and on hand-made
 * tensors: identical runs agree with every metric 0; a perturbed weight makes its consumer
 * the first divergent value, with a path to the outputs; integer, shape and NaN mismatches;
 * quantiles and ULP distances against values worked out by hand; ox_model_run_all keeps
 * every value; ox_compare_reduce writes a case that runs and gives the captured value.
 * Files go to the folder given as the first argument. */
#include "exporter/onnx.h"
#include "harness.h"

#include "executor/session.h"

/* ---- the model --------------------------------------------------------------------------- */

static ox_tensor *floats(struct ox_graph *g, int rank, const int64_t *d, const float *vals) {
    ox_tensor *t = ox_graph_alloc(g, sizeof *t);
    if (ox_tensor_alloc(t, OX_FLOAT, rank, d)) exit(2);
    memcpy(t->data, vals, sizeof(float) * (size_t)ox_tensor_numel(t));
    return t;
}

/* x[2,3] -MatMul(W)-> h -Add(c)-> a -Relu-> r -Mul(k: Constant 0.5)-> s -Tanh-> y (output)
 *                                            r -ArgMax(axis=1, keepdims=0)-> idx (output)
 * W[0] is 0.1 + w_delta. */
static ox_model *make_model(float w_delta, bool optimize) {
    struct ox_graph *g = ox_graph_create(NULL);
    g->ir_version = 8;
    g->opsets = ox_graph_alloc(g, sizeof *g->opsets);
    g->opsets[0] = (struct ox_opset){"", 13};
    g->n_opsets = 1;
    g->name = "small";
    int64_t dx[2] = {2, 3}, dw[2] = {3, 4}, dc[1] = {4}, dy[2] = {2, 4}, di[1] = {2};
    float w[12] = {0.1f + w_delta, -0.2f, 0.3f,  0.4f, 0.5f, -0.6f,
                   0.7f,           0.8f,  -0.9f, 1.0f, 0.2f, 0.3f};
    float c[4] = {0.1f, 0.2f, -0.1f, 0.05f}, half = 0.5f;
    int x = graph_value(g, "x", OX_FLOAT, 2, dx), W = graph_value(g, "W", OX_FLOAT, 2, dw);
    int cv = graph_value(g, "c", OX_FLOAT, 1, dc);
    g->values[W].init = floats(g, 2, dw, w);
    g->values[cv].init = floats(g, 1, dc, c);
    int h = ox_graph_add_value(g, "h"), a = ox_graph_add_value(g, "a");
    int r = ox_graph_add_value(g, "r"), k = ox_graph_add_value(g, "k");
    int s = ox_graph_add_value(g, "s"), y = graph_value(g, "y", OX_FLOAT, 2, dy);
    int idx = graph_value(g, "idx", OX_INT64, 1, di);
    ox_graph_add_input(g, x);
    ox_graph_add_output(g, y);
    ox_graph_add_output(g, idx);
    graph_node(g, "mm", "MatMul", 2, (int[]){x, W}, h, 13);
    graph_node(g, "add", "Add", 2, (int[]){h, cv}, a, 13);
    graph_node(g, "relu", "Relu", 1, (int[]){a}, r, 13);
    struct ox_node *kn = graph_node(g, "k", "Constant", 0, NULL, k, 13);
    kn->attrs = ox_graph_alloc(g, sizeof *kn->attrs);
    kn->attrs[0] =
        (struct ox_attr){.name = "value", .type = OX_ATTR_TENSOR, .t = floats(g, 0, NULL, &half)};
    kn->n_attrs = 1;
    graph_node(g, "mul", "Mul", 2, (int[]){r, k}, s, 13);
    graph_node(g, "tanh", "Tanh", 1, (int[]){s}, y, 13);
    struct ox_node *am = graph_node(g, "argmax", "ArgMax", 1, (int[]){r}, idx, 13);
    am->attrs = ox_graph_alloc(g, sizeof *am->attrs * 2);
    am->attrs[0] = (struct ox_attr){.name = "axis", .type = OX_ATTR_INT, .i = 1};
    am->attrs[1] = (struct ox_attr){.name = "keepdims", .type = OX_ATTR_INT, .i = 0};
    am->n_attrs = 2;
    void *buf = NULL;
    size_t len = 0;
    ox_model *m = NULL;
    ox_model_options lo = {.no_optimize = !optimize};
    if (ox_onnx_export_buffer(g, &buf, &len) ||
        ox_model_load_buffer_with(buf, len, NULL, &lo, &m)) {
        printf("cannot build the model: %s\n", ox_errmsg());
        exit(2);
    }
    free(buf);
    ox_graph_free(g);
    return m;
}

/* ---- helpers ----------------------------------------------------------------------------- */

static ox_tensor named(ox_tensor t, const char *name) {
    t.name = name;
    return t;
}

static ox_tensor vec(ox_dtype dt, int n, const double *v) {
    ox_tensor t = mk1(dt, n);
    for (int i = 0; i < n; i++) ox_tensor_set(&t, i, v[i]);
    return t;
}

static int find(const ox_compare_report *r, const char *name) {
    for (int i = 0; i < r->n_values; i++)
        if (!strcmp(r->values[i].name, name)) return i;
    return -1;
}

/* Compare given tensors a and b (one value each), into r. */
static ox_status compare_given(ox_tensor *a, ox_tensor *b, ox_compare_report *r) {
    ox_compare_side sa = {.values = a, .n_values = 1, .label = "a"};
    ox_compare_side sb = {.values = b, .n_values = 1, .label = "b"};
    return ox_compare(&sa, &sb, NULL, r);
}

/* ---- tests -------------------------------------------------------------------------------- */

static ox_tensor input_x(void) {
    int64_t dx[2] = {2, 3};
    ox_tensor x = mk(OX_FLOAT, 2, dx);
    float xv[6] = {1.0f, -0.5f, 0.25f, 0.3f, 0.9f, -1.2f};
    memcpy(x.data, xv, sizeof xv);
    x.name = "x";
    return x;
}

static void test_run_all(ox_model *m, const ox_tensor *x) {
    ox_tensor *vals = NULL;
    int n = 0;
    EXPECT(ox_model_run_all(m, x, 1, 1, &vals, &n) == OX_OK);
    const char *want[] = {"x", "W", "c", "h", "a", "r", "k", "s", "y", "idx"};
    CHECK(n == 10, "run_all: %d values, expected 10", n);
    for (int i = 0; i < n && i < 10; i++)
        CHECK(!strcmp(vals[i].name, want[i]), "run_all value %d: '%s', expected '%s'", i,
              vals[i].name, want[i]);
    /* the outputs as a plain run gives them */
    ox_session *s = NULL;
    const ox_tensor *outs[2];
    EXPECT(ox_session_create(m, NULL, &s) == OX_OK && ox_session_run(s, x, 1, outs) == OX_OK);
    if (n == 10 && s) {
        CHECK(vals[8].rank == 2 && vals[8].dims[1] == 4 &&
                  !memcmp(vals[8].data, outs[0]->data, 8 * sizeof(float)),
              "run_all's y is the run's");
        CHECK(vals[9].dtype == OX_INT64 && !memcmp(vals[9].data, outs[1]->data, 2 * 8),
              "run_all's idx is the run's");
        float *h = vals[3].data, *xv = x->data, *w = vals[1].data;
        CHECK(close_to(h[0], xv[0] * w[0] + xv[1] * w[4] + xv[2] * w[8], 1e-6),
              "run_all's intermediate h is x W");
    }
    ox_session_free(s);
    ox_values_free(vals, n);
}

static void test_identical(ox_model *m1, ox_model *m2, const ox_tensor *x) {
    ox_compare_side a = {.model = m1, .n_threads = 1, .label = "one"};
    ox_compare_side b = {.model = m2, .n_threads = 2, .label = "two"};
    ox_compare_report r;
    EXPECT(ox_compare(&a, &b, &(ox_compare_options){.inputs = x, .n_inputs = 1}, &r) == OX_OK);
    CHECK(r.n_values == 7 && r.first_divergent == -1 && !r.outputs_diverge && r.n_path == 0 &&
              r.n_only_a == 0 && r.n_only_b == 0,
          "identical runs agree on the 7 computed values (%d, first %d)", r.n_values,
          r.first_divergent);
    for (int i = 0; i < r.n_values; i++) {
        const ox_compare_value *v = &r.values[i];
        CHECK(!v->diverges && v->max_abs == 0 && v->max_rel == 0 && v->rel_l2 == 0 &&
                  v->cosine == 1 && v->max_ulp == 0 && v->q99 == 0 && v->n_mismatch == 0 &&
                  !v->shape_mismatch,
              "identical value '%s': all metrics 0", v->name);
    }
    int h = find(&r, "h"), y = find(&r, "y"), idx = find(&r, "idx"), k = find(&r, "k");
    CHECK(h == 0 && y >= 0 && idx >= 0, "the values come in topological order");
    if (h == 0) {
        const ox_compare_value *v = &r.values[h];
        CHECK(v->node && !strcmp(v->node, "mm") && v->op && !strcmp(v->op, "MatMul") &&
                  !v->is_output && v->dtype == OX_FLOAT && v->rank == 2 && v->dims[1] == 4 &&
                  v->n == 8 && v->rtol == 1e-4 && v->atol == 1e-6,
              "h: node mm (MatMul), float[2,4], float32 tolerances");
        CHECK(v->node_desc && strstr(v->node_desc, "mm (MatMul)") &&
                  strstr(v->node_desc, "float[2,3] x") && strstr(v->node_desc, "float[3,4] W"),
              "h's description: %s", v->node_desc ? v->node_desc : "(null)");
    }
    if (y >= 0 && idx >= 0)
        CHECK(r.values[y].is_output && r.values[idx].is_output && r.values[idx].rtol == 0,
              "y and idx are outputs; integers are exact");
    if (idx >= 0)
        CHECK(r.values[idx].node_desc && strstr(r.values[idx].node_desc, "axis=1, keepdims=0"),
              "ArgMax's attributes: %s", r.values[idx].node_desc);
    if (k >= 0)
        CHECK(r.values[k].node_desc && strstr(r.values[k].node_desc, "value=float[]"),
              "Constant's tensor attribute: %s", r.values[k].node_desc);
    ox_compare_report_free(&r);

    /* outputs only */
    ox_compare_options o = {.inputs = x, .n_inputs = 1, .outputs_only = true};
    EXPECT(ox_compare(&a, &b, &o, &r) == OX_OK);
    CHECK(r.n_values == 2 && r.first_divergent == -1, "outputs only: %d values", r.n_values);
    ox_compare_report_free(&r);
}

static void test_optimized(ox_model *m, const ox_tensor *x) {
    ox_model *opt = make_model(0, true);
    ox_compare_side a = {.model = opt, .label = "cpu"}, b = {.model = m, .label = "cpu:noopt"};
    ox_compare_report r;
    EXPECT(ox_compare(&a, &b, &(ox_compare_options){.inputs = x, .n_inputs = 1}, &r) == OX_OK);
    CHECK(r.first_divergent == -1 && find(&r, "y") >= 0 && find(&r, "idx") >= 0,
          "optimized and unoptimized runs agree (%d values, %d only in the unoptimized)",
          r.n_values, r.n_only_b);
    ox_compare_report_free(&r);
    ox_model_free(opt);
}

static void test_perturbed(ox_model *m, const ox_tensor *x, const char *dir) {
    ox_model *bad = make_model(0.5f, false);
    ox_compare_side a = {.model = m, .label = "good"}, b = {.model = bad, .label = "bad"};
    ox_compare_report r;
    EXPECT(ox_compare(&a, &b, &(ox_compare_options){.inputs = x, .n_inputs = 1}, &r) == OX_OK);
    int fd = r.first_divergent;
    CHECK(fd >= 0 && !strcmp(r.values[fd].name, "h") && !strcmp(r.values[fd].node, "mm"),
          "the perturbed weight's consumer is the first divergent (%s)",
          fd >= 0 ? r.values[fd].name : "none");
    CHECK(r.outputs_diverge, "an output diverges");
    if (fd >= 0) {
        const ox_compare_value *v = &r.values[fd];
        CHECK(v->max_abs > 0.1 && v->rel_l2 > 1e-2 && v->cosine < 1 && v->max_ulp > 1000 &&
                  v->n_mismatch == 2,
              "h's metrics: max_abs %g rel_l2 %g cosine %g ulp %g mismatches %lld", v->max_abs,
              v->rel_l2, v->cosine, v->max_ulp, (long long)v->n_mismatch);
    }
    CHECK(r.n_path >= 2 && r.path[0] == fd && r.values[r.path[r.n_path - 1]].is_output,
          "the path goes from h to an output (%d values)", r.n_path);
    for (int i = 1; i < r.n_path; i++) CHECK(r.path[i] > r.path[i - 1], "the path goes forward");
    ox_compare_report_free(&r);

    /* reduce the nodes that make a (an initializer input) and s (a Constant input) */
    ox_tensor *vals = NULL;
    int n = 0;
    EXPECT(ox_model_run_all(bad, x, 1, 1, &vals, &n) == OX_OK);
    const char *names[2] = {"a", "s"};
    for (int t = 0; t < 2; t++) {
        char sub[1100], path[1200];
        snprintf(sub, sizeof sub, "%s/reduce_%s/deeper", dir, names[t]);
        EXPECT(ox_compare_reduce(bad, vals, n, names[t], sub) == OX_OK);
        snprintf(path, sizeof path, "%s/model.onnx", sub);
        ox_model *rm = NULL;
        EXPECT(ox_model_load(path, &rm) == OX_OK);
        ox_tensor in = {0}, want = {0};
        char *in_name = NULL;
        snprintf(path, sizeof path, "%s/test_data_set_0/input_0.pb", sub);
        EXPECT(ox_tensor_read_pb(path, &in, &in_name) == OX_OK);
        snprintf(path, sizeof path, "%s/test_data_set_0/output_0.pb", sub);
        EXPECT(ox_tensor_read_pb(path, &want, NULL) == OX_OK);
        snprintf(path, sizeof path, "%s/test_data_set_0/input_1.pb", sub);
        FILE *f = fopen(path, "rb");
        CHECK(!f, "reduce %s: one input, the constant is an initializer", names[t]);
        if (f) fclose(f);
        ox_session *s = NULL;
        const ox_tensor *out[1];
        if (rm && in.data && want.data) {
            CHECK(ox_model_n_inputs(rm) == 1 && ox_model_n_outputs(rm) == 1 &&
                      ox_model_n_nodes(rm) == 1,
                  "reduce %s: one node, one input, one output", names[t]);
            CHECK(in_name && !strcmp(in_name, t ? "r" : "h"), "reduce %s: its input is '%s'",
                  names[t], in_name ? in_name : "(null)");
            EXPECT(ox_session_create(rm, NULL, &s) == OX_OK &&
                   ox_session_run(s, &in, 1, out) == OX_OK);
            const ox_tensor *cap = NULL;
            for (int i = 0; i < n; i++)
                if (!strcmp(vals[i].name, names[t])) cap = &vals[i];
            if (s && cap)
                CHECK(out[0]->dtype == OX_FLOAT && ox_tensor_numel(out[0]) == 8 &&
                          !memcmp(out[0]->data, want.data, 8 * sizeof(float)) &&
                          !memcmp(want.data, cap->data, 8 * sizeof(float)),
                      "reduce %s: the case reproduces the captured value", names[t]);
        }
        ox_session_free(s);
        ox_model_free(rm);
        ox_tensor_free_data(&in);
        ox_tensor_free_data(&want);
        free(in_name);
    }
    char sub[1100];
    snprintf(sub, sizeof sub, "%s/reduce_x", dir);
    CHECK(ox_compare_reduce(bad, vals, n, "x", sub) == OX_E_INVALID && strstr(ox_errmsg(), "'x'"),
          "reduce refuses a graph input: %s", ox_errmsg());
    ox_values_free(vals, n);

    /* a model against given values: the model is the reference; only y is in common */
    ox_session *s = NULL;
    const ox_tensor *outs[2];
    EXPECT(ox_session_create(bad, NULL, &s) == OX_OK && ox_session_run(s, x, 1, outs) == OX_OK);
    if (s) {
        ox_tensor y = *outs[0];
        y.name = "y";
        ox_compare_side given = {.values = &y, .n_values = 1, .label = "dump"};
        EXPECT(ox_compare(&given, &a, &(ox_compare_options){.inputs = x, .n_inputs = 1}, &r) ==
               OX_OK);
        CHECK(r.n_values == 1 && r.first_divergent == 0 && r.n_only_a == 0 && r.n_only_b == 6 &&
                  r.values[0].is_output && r.values[0].node && !strcmp(r.values[0].op, "Tanh"),
              "a dump against a model: y compared, described by the model (%d values, %d "
              "only in the model)",
              r.n_values, r.n_only_b);
        ox_compare_report_free(&r);
    }
    ox_session_free(s);
    ox_model_free(bad);
}

static void test_hand_made(void) {
    ox_compare_report r;
    /* integers: exact */
    double i1[3] = {1, 2, 3}, i2[3] = {1, 2, 4};
    ox_tensor a = named(vec(OX_INT64, 3, i1), "v"), b = named(vec(OX_INT64, 3, i2), "v");
    EXPECT(compare_given(&a, &b, &r) == OX_OK);
    CHECK(r.n_values == 1 && r.first_divergent == 0 && r.values[0].n_mismatch == 1 &&
              r.values[0].max_abs == 1 && r.values[0].node == NULL && r.values[0].is_output &&
              r.outputs_diverge && r.n_path == 1,
          "an integer mismatch diverges");
    ox_compare_report_free(&r);
    ox_tensor_free_data(&a), ox_tensor_free_data(&b);

    /* shapes */
    int64_t d22[2] = {2, 2};
    a = named(mk(OX_FLOAT, 2, d22), "v"), b = named(mk1(OX_FLOAT, 4), "v");
    EXPECT(compare_given(&a, &b, &r) == OX_OK);
    CHECK(r.first_divergent == 0 && r.values[0].shape_mismatch && isnan(r.values[0].rel_l2) &&
              r.values[0].rank == 2,
          "a shape mismatch diverges, without metrics");
    ox_compare_report_free(&r);
    ox_tensor_free_data(&b);
    b = named(mk(OX_DOUBLE, 2, d22), "v");
    EXPECT(compare_given(&a, &b, &r) == OX_OK);
    CHECK(r.first_divergent == 0 && r.values[0].shape_mismatch, "a type mismatch diverges");
    ox_compare_report_free(&r);
    ox_tensor_free_data(&a), ox_tensor_free_data(&b);

    /* NaN on one side; on both sides at the same place */
    double n1[3] = {1, NAN, 3}, n2[3] = {1, 2, 3}, n3[3] = {1, NAN, INFINITY},
           n4[3] = {1, NAN, INFINITY};
    a = named(vec(OX_FLOAT, 3, n1), "v"), b = named(vec(OX_FLOAT, 3, n2), "v");
    EXPECT(compare_given(&a, &b, &r) == OX_OK);
    CHECK(r.first_divergent == 0 && r.values[0].nan_a == 1 && r.values[0].nan_b == 0 &&
              r.values[0].max_abs == 0 && r.values[0].n_mismatch == 1,
          "NaN on one side diverges");
    ox_compare_report_free(&r);
    ox_tensor_free_data(&a), ox_tensor_free_data(&b);
    a = named(vec(OX_FLOAT, 3, n3), "v"), b = named(vec(OX_FLOAT, 3, n4), "v");
    EXPECT(compare_given(&a, &b, &r) == OX_OK);
    CHECK(r.first_divergent == -1 && r.values[0].nan_b == 1 && r.values[0].inf_a == 1 &&
              r.values[0].n_mismatch == 0,
          "NaN and Inf at the same places agree");
    ox_compare_report_free(&r);
    ox_tensor_free_data(&a), ox_tensor_free_data(&b);

    /* quantiles (numpy's linear interpolation), max_rel, rel_l2 by hand */
    double q1[5] = {1, 2, 3, 4, 5}, q2[5] = {1, 2.5, 3.25, 5, 5};
    a = named(vec(OX_FLOAT, 5, q1), "v"), b = named(vec(OX_FLOAT, 5, q2), "v");
    EXPECT(compare_given(&a, &b, &r) == OX_OK);
    {
        const ox_compare_value *v = &r.values[0];
        /* |a - b| = {0, 0.5, 0.25, 1, 0}: sorted {0, 0, 0.25, 0.5, 1} */
        CHECK(v->q50 == 0.25 && close_to(v->q90, 0.8, 1e-12) && close_to(v->q99, 0.98, 1e-12),
              "quantiles %g %g %g, expected 0.25 0.8 0.98", v->q50, v->q90, v->q99);
        CHECK(v->max_abs == 1 && close_to(v->max_rel, 0.2, 1e-12) && v->n_mismatch == 3,
              "max_abs %g max_rel %g", v->max_abs, v->max_rel);
        double dot = 1 + 5 + 9.75 + 20 + 25;
        CHECK(close_to(v->rel_l2, sqrt(1.3125 / 55), 1e-12) &&
                  close_to(v->cosine, dot / sqrt(55 * (1 + 6.25 + 10.5625 + 25 + 25)), 1e-12),
              "rel_l2 %g cosine %g", v->rel_l2, v->cosine);
        CHECK(v->diverges, "a 5%% error diverges at float32's tolerance");
    }
    ox_compare_report_free(&r);
    ox_tensor_free_data(&a), ox_tensor_free_data(&b);

    /* ULPs: float32 3 apart, across zero, -0 and +0; float16 and bfloat16 2 apart */
    a = named(mk1(OX_FLOAT, 3), "v"), b = named(mk1(OX_FLOAT, 3), "v");
    uint32_t ua[3] = {0x3f800000u, 0x00000001u, 0x00000000u},
             ub[3] = {0x3f800003u, 0x80000001u, 0x80000000u};
    memcpy(a.data, ua, sizeof ua), memcpy(b.data, ub, sizeof ub);
    EXPECT(compare_given(&a, &b, &r) == OX_OK);
    CHECK(r.values[0].max_ulp == 3 && r.values[0].n_mismatch == 3 && r.first_divergent == -1,
          "float32 ULP: %g, expected 3 (and 2 across zero, 0 for -0)", r.values[0].max_ulp);
    ox_compare_report_free(&r);
    memcpy(a.data, &ua[1], 4), memcpy(b.data, &ub[1], 4); /* only the pair across zero */
    memcpy((char *)b.data + 4, (char *)a.data + 4, 8);
    EXPECT(compare_given(&a, &b, &r) == OX_OK);
    CHECK(r.values[0].max_ulp == 2, "float32 ULP across zero: %g", r.values[0].max_ulp);
    ox_compare_report_free(&r);
    ox_tensor_free_data(&a), ox_tensor_free_data(&b);
    ox_dtype halves[2] = {OX_FLOAT16, OX_BFLOAT16};
    for (int k = 0; k < 2; k++) {
        a = named(mk1(halves[k], 1), "v"), b = named(mk1(halves[k], 1), "v");
        uint16_t ha = k ? 0x3f80 : 0x3c00, hb = (uint16_t)(ha + 2);
        memcpy(a.data, &ha, 2), memcpy(b.data, &hb, 2);
        EXPECT(compare_given(&a, &b, &r) == OX_OK);
        CHECK(r.values[0].max_ulp == 2 && r.values[0].rtol == (k ? 2e-2 : 1e-2), "%s ULP: %g",
              ox_dtype_name(halves[k]), r.values[0].max_ulp);
        ox_compare_report_free(&r);
        ox_tensor_free_data(&a), ox_tensor_free_data(&b);
    }

    /* tolerances given; strings; errors */
    double t1[2] = {1, 2}, t2[2] = {1, 2.01};
    a = named(vec(OX_DOUBLE, 2, t1), "v"), b = named(vec(OX_DOUBLE, 2, t2), "v");
    ox_compare_side sa = {.values = &a, .n_values = 1}, sb = {.values = &b, .n_values = 1};
    EXPECT(ox_compare(&sa, &sb, &(ox_compare_options){.rtol = 1e-2}, &r) == OX_OK);
    CHECK(r.first_divergent == -1 && r.values[0].rtol == 1e-2 && r.values[0].atol == 1e-12,
          "a given rtol, the type's atol");
    ox_compare_report_free(&r);
    ox_tensor_free_data(&b);
    b = named(vec(OX_DOUBLE, 2, t2), "w");
    ox_status st = ox_compare(&sa, &sb, NULL, &r);
    CHECK(st == OX_E_INVALID && r.n_values == 0 && r.values == NULL, "no values in common: %s",
          ox_errmsg());
    sb = (ox_compare_side){.label = "empty"};
    st = ox_compare(&sa, &sb, NULL, &r);
    CHECK(st == OX_E_INVALID && strstr(ox_errmsg(), "empty"), "an empty side: %s", ox_errmsg());
    ox_tensor_free_data(&a), ox_tensor_free_data(&b);

    a = named(mk1(OX_STRING, 2), "v"), b = named(mk1(OX_STRING, 2), "v");
    char **pa = a.data, **pb = b.data;
    free(pa[0]), free(pb[0]);
    pa[0] = strdup("cat"), pb[0] = strdup("dog");
    sa = (ox_compare_side){.values = &a, .n_values = 1};
    sb = (ox_compare_side){.values = &b, .n_values = 1};
    EXPECT(ox_compare(&sa, &sb, NULL, &r) == OX_OK);
    CHECK(r.first_divergent == 0 && r.values[0].n_mismatch == 1, "strings compare exactly");
    ox_compare_report_free(&r);
    ox_tensor_free_data(&a), ox_tensor_free_data(&b);
    ox_compare_report_free(NULL);
    ox_values_free(NULL, 0);
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "test_compare.tmp";
    char cmd[1100];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", dir, dir);
    if (system(cmd) != 0) return 2;
    ox_model *m1 = make_model(0, false), *m2 = make_model(0, false);
    ox_tensor x = input_x();
    test_run_all(m1, &x);
    test_identical(m1, m2, &x);
    test_optimized(m1, &x);
    test_perturbed(m1, &x, dir);
    test_hand_made();
    ox_tensor_free_data(&x);
    ox_model_free(m1);
    ox_model_free(m2);
    return harness_finish();
}
