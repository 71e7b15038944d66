/* The trainer (executor/train.c) on small graphs built through the IR: a least-squares model
 * whose output is the loss (OX_LOSS_OUTPUT), checked against the gradient step worked out by
 * hand in double, and a linear classifier under softmax cross-entropy; evaluation, the
 * learning rate, saving, and the errors a caller can cause. tests/train_optim.py checks the
 * optimizers against torch.optim; this checks the API. Files go to the folder given as the
 * first argument. */
#include "exporter/onnx.h"
#include "harness.h"

#include "executor/session.h"

#define N 6 /* examples in the batch */

static struct ox_dim *dims_of(struct ox_graph *g, int rank, const int64_t *d, const char *sym) {
    struct ox_dim *dd = ox_graph_alloc(g, sizeof *dd * (size_t)(rank ? rank : 1));
    for (int k = 0; k < rank; k++) {
        dd[k].value = d[k];
        dd[k].symbol = d[k] < 0 ? sym : NULL;
    }
    return dd;
}

static int value(struct ox_graph *g, const char *name, ox_dtype dt, int rank, const int64_t *d) {
    int v = ox_graph_add_value(g, name);
    g->values[v].dtype = dt;
    g->values[v].rank = rank;
    g->values[v].dims = dims_of(g, rank, d, "n");
    return v;
}

static int init(struct ox_graph *g, const char *name, int rank, const int64_t *d,
                const float *vals) {
    int v = value(g, name, OX_FLOAT, rank, d);
    ox_tensor *t = ox_graph_alloc(g, sizeof *t);
    if (ox_tensor_alloc(t, OX_FLOAT, rank, d)) exit(2);
    memcpy(t->data, vals, sizeof(float) * (size_t)ox_tensor_numel(t));
    t->name = g->values[v].name;
    g->values[v].init = t;
    return v;
}

static void node(struct ox_graph *g, const char *op, int n_in, const int *in, int out) {
    struct ox_node *n = ox_graph_add_node(g, op, "", op, n_in, in, 1, &out);
    n->opset = 17;
}

static void io(struct ox_graph *g, bool input, int v) {
    int *n = input ? &g->n_inputs : &g->n_outputs, **a = input ? &g->inputs : &g->outputs;
    int *b = ox_graph_alloc(g, sizeof(int) * (size_t)(*n + 1));
    if (*n) memcpy(b, *a, sizeof(int) * (size_t)*n);
    b[(*n)++] = v;
    *a = b;
}

static ox_model *to_model(struct ox_graph *g) {
    void *buf = NULL;
    size_t len = 0;
    ox_model *m = NULL;
    ox_model_options lo = {.no_optimize = true};
    if (ox_onnx_export_buffer(g, &buf, &len) != OX_OK ||
        ox_model_load_buffer_with(buf, len, NULL, &lo, &m) != OX_OK) {
        printf("cannot build the test model: %s\n", ox_errmsg());
        exit(2);
    }
    free(buf);
    ox_graph_free(g);
    return m;
}

static struct ox_graph *new_graph(void) {
    struct ox_graph *g = ox_graph_create(NULL);
    if (!g) exit(2);
    g->ir_version = 8;
    g->opsets = ox_graph_alloc(g, sizeof *g->opsets);
    g->opsets[0] = (struct ox_opset){"", 17};
    g->n_opsets = 1;
    g->name = "g";
    return g;
}

static const float W0[2] = {0.5f, -0.25f}, B0[1] = {0.1f};

/* z = x @ w + b; loss = mean((z - t)^2). Outputs: z, loss. */
static ox_model *least_squares(void) {
    struct ox_graph *g = new_graph();
    int x = value(g, "x", OX_FLOAT, 2, (int64_t[]){-1, 2});
    int t = value(g, "t", OX_FLOAT, 2, (int64_t[]){-1, 1});
    int w = init(g, "w", 2, (int64_t[]){2, 1}, W0);
    int b = init(g, "b", 1, (int64_t[]){1}, B0);
    int y = value(g, "y", OX_FLOAT, 2, (int64_t[]){-1, 1});
    int z = value(g, "z", OX_FLOAT, 2, (int64_t[]){-1, 1});
    int d = value(g, "d", OX_FLOAT, 2, (int64_t[]){-1, 1});
    int sq = value(g, "sq", OX_FLOAT, 2, (int64_t[]){-1, 1});
    int loss = value(g, "mse", OX_FLOAT, 0, NULL);
    node(g, "MatMul", 2, (int[]){x, w}, y);
    node(g, "Add", 2, (int[]){y, b}, z);
    node(g, "Sub", 2, (int[]){z, t}, d);
    node(g, "Mul", 2, (int[]){d, d}, sq);
    node(g, "ReduceMean", 1, &sq, loss);
    g->nodes[g->n_nodes - 1].attrs = ox_graph_alloc(g, sizeof(struct ox_attr));
    g->nodes[g->n_nodes - 1].attrs[0] = (struct ox_attr){.name = "keepdims", .type = OX_ATTR_INT};
    g->nodes[g->n_nodes - 1].n_attrs = 1;
    io(g, true, x);
    io(g, true, t);
    io(g, false, z);
    io(g, false, loss);
    return to_model(g);
}

/* logits = Gemm(x, w, b): 3 features, 4 classes. */
static ox_model *classifier(const char *extra_value) {
    struct ox_graph *g = new_graph();
    float w[12], b[4] = {0};
    for (int i = 0; i < 12; i++) w[i] = 0.1f * (float)((i * 7) % 5 - 2);
    int x = value(g, "x", OX_FLOAT, 2, (int64_t[]){-1, 3});
    int wv = init(g, "w", 2, (int64_t[]){3, 4}, w);
    int bv = init(g, "b", 1, (int64_t[]){4}, b);
    int logits = value(g, "logits", OX_FLOAT, 2, (int64_t[]){-1, 4});
    node(g, "Gemm", 3, (int[]){x, wv, bv}, logits);
    io(g, true, x);
    io(g, false, logits);
    if (extra_value) { /* a value that takes a name the trainer needs */
        int e = value(g, extra_value, OX_FLOAT, 2, (int64_t[]){-1, 4});
        node(g, "Relu", 1, &logits, e);
        io(g, false, e);
    }
    return to_model(g);
}

static float param(const ox_trainer *t, const char *name, int i) {
    for (int k = 0; k < ox_trainer_n_params(t); k++) {
        const ox_tensor *p;
        ox_trainer_param(t, k, &p);
        if (strcmp(p->name, name) == 0) return ((const float *)p->data)[i];
    }
    return NAN;
}

static void test_least_squares(const char *dir) {
    ox_model *m = least_squares();
    int n_nodes = ox_model_n_nodes(m), n_in = ox_model_n_inputs(m);
    float x[N * 2], tv[N];
    for (int i = 0; i < N; i++) {
        x[2 * i] = (float)i / N - 0.4f;
        x[2 * i + 1] = (float)((i * 5) % N) / N - 0.5f;
        tv[i] = 2.0f * x[2 * i] - 3.0f * x[2 * i + 1] + 0.5f; /* w = (2, -3), b = 0.5 */
    }
    ox_tensor in[2] = {
        {.dtype = OX_FLOAT, .rank = 2, .dims = {N, 2}, .data = x, .name = "x"},
        {.dtype = OX_FLOAT, .rank = 2, .dims = {N, 1}, .data = tv, .name = "t"},
    };
    ox_trainer_options o = {.loss = OX_LOSS_OUTPUT, .output = "mse", .lr = 0.1};
    ox_trainer *t = NULL;
    EXPECT(ox_trainer_create(m, &o, &t) == OX_OK);
    if (!t) return;
    CHECK(ox_model_n_nodes(m) == n_nodes && ox_model_n_inputs(m) == n_in &&
              ox_model_n_outputs(m) == 2,
          "the model passed in is unchanged");
    CHECK(ox_trainer_n_params(t) == 2 && ox_trainer_lr(t) == 0.1 && ox_trainer_steps(t) == 0,
          "two parameters, lr 0.1, no step yet");
    /* one step, by hand in double: dL/dw = 2/N X^T r, dL/db = 2/N sum r, r = Xw + b - t */
    double gw[2] = {0}, gb = 0, l0 = 0;
    for (int i = 0; i < N; i++) {
        double r = x[2 * i] * (double)W0[0] + x[2 * i + 1] * (double)W0[1] + B0[0] - tv[i];
        l0 += r * r / N;
        gw[0] += 2.0 / N * x[2 * i] * r;
        gw[1] += 2.0 / N * x[2 * i + 1] * r;
        gb += 2.0 / N * r;
    }
    float loss = -1;
    EXPECT(ox_trainer_step(t, in, 2, &loss) == OX_OK);
    CHECK(fabs(loss - l0) <= 1e-6 * l0, "step 1 loss %.9g, by hand %.9g", loss, l0);
    CHECK(fabs(param(t, "w", 0) - (W0[0] - 0.1 * gw[0])) < 1e-6 &&
              fabs(param(t, "w", 1) - (W0[1] - 0.1 * gw[1])) < 1e-6 &&
              fabs(param(t, "b", 0) - (B0[0] - 0.1 * gb)) < 1e-6,
          "SGD step: w (%.7g, %.7g) b %.7g, by hand (%.7g, %.7g) %.7g", param(t, "w", 0),
          param(t, "w", 1), param(t, "b", 0), W0[0] - 0.1 * gw[0], W0[1] - 0.1 * gw[1],
          B0[0] - 0.1 * gb);
    CHECK(ox_trainer_set_lr(t, 0) == OX_E_INVALID && ox_trainer_set_lr(t, NAN) == OX_E_INVALID,
          "a learning rate of 0 or NaN is refused");
    EXPECT(ox_trainer_set_lr(t, 0.5) == OX_OK && ox_trainer_lr(t) == 0.5);
    for (int s = 0; s < 300; s++) ox_trainer_step(t, in, 2, &loss);
    CHECK(ox_trainer_steps(t) == 301, "301 steps counted, not %lld",
          (long long)ox_trainer_steps(t));
    CHECK(loss < 1e-8 && fabs(param(t, "w", 0) - 2) < 1e-3 && fabs(param(t, "w", 1) + 3) < 1e-3 &&
              fabs(param(t, "b", 0) - 0.5) < 1e-3,
          "converges to w (2, -3), b 0.5: loss %g, w (%g, %g), b %g", loss, param(t, "w", 0),
          param(t, "w", 1), param(t, "b", 0));
    /* evaluate: the model's outputs with the current parameters */
    const ox_tensor *outs[2] = {0};
    EXPECT(ox_trainer_evaluate(t, in, 2, outs) == OX_OK);
    if (outs[0] && outs[1]) {
        float z2 = ((const float *)outs[0]->data)[2];
        float want = x[4] * param(t, "w", 0) + x[5] * param(t, "w", 1) + param(t, "b", 0);
        CHECK(outs[0]->dims[0] == N && fabsf(z2 - want) < 1e-5f && ox_tensor_get(outs[1], 0) < 1e-8,
              "evaluate: z[2] %g (want %g), mse %g", z2, want, ox_tensor_get(outs[1], 0));
    }
    /* save: the forward model with the trained parameters */
    char path[1100];
    snprintf(path, sizeof path, "%s/trained.onnx", dir);
    EXPECT(ox_trainer_save(t, path) == OX_OK);
    ox_model *back = NULL;
    ox_model_options lo = {.no_optimize = true};
    EXPECT(ox_model_load_with(path, &lo, &back) == OX_OK);
    if (back) {
        CHECK(ox_model_n_nodes(back) == n_nodes && ox_model_n_inputs(back) == 2 &&
                  ox_model_n_outputs(back) == 2,
              "the saved model is the forward graph: %d nodes, %d inputs, %d outputs",
              ox_model_n_nodes(back), ox_model_n_inputs(back), ox_model_n_outputs(back));
        const struct ox_graph *g = ox_model_graph(back);
        int w = ox_graph_find_value(g, "w");
        const float *wd = w >= 0 && g->values[w].init ? g->values[w].init->data : NULL;
        CHECK(wd && wd[0] == param(t, "w", 0) && wd[1] == param(t, "w", 1),
              "the saved initializer holds the trained w");
        ox_model_free(back);
    }
    /* a failed step changes nothing */
    float w_before = param(t, "w", 0);
    ox_tensor bad[2] = {in[0], in[1]};
    bad[1].dims[0] = N - 1;
    CHECK(ox_trainer_step(t, bad, 2, &loss) != OX_OK && param(t, "w", 0) == w_before &&
              ox_trainer_steps(t) == 301,
          "a step with mismatched inputs fails and leaves the parameters");
    ox_trainer_free(t);

    /* errors at creation */
    t = NULL;
    o.output = "z"; /* [n, 1]: not one element */
    CHECK(ox_trainer_create(m, &o, &t) == OX_E_INVALID && !t && strstr(ox_errmsg(), "one element"),
          "a loss of several elements is refused: %s", ox_errmsg());
    o.output = "nope";
    CHECK(ox_trainer_create(m, &o, &t) == OX_E_INVALID && strstr(ox_errmsg(), "nope"),
          "an unknown output is named: %s", ox_errmsg());
    o.output = "mse";
    o.nesterov = true;
    CHECK(ox_trainer_create(m, &o, &t) == OX_E_INVALID && strstr(ox_errmsg(), "momentum"),
          "Nesterov without momentum is refused: %s", ox_errmsg());
    o.nesterov = false;
    o.beta1 = 1.5;
    CHECK(ox_trainer_create(m, &o, &t) == OX_E_INVALID, "beta1 1.5 is refused: %s", ox_errmsg());
    o.beta1 = 0;
    const char *only_b[] = {"b"};
    o.params = only_b;
    o.n_params = 1;
    EXPECT(ox_trainer_create(m, &o, &t) == OX_OK);
    if (t) {
        CHECK(ox_trainer_n_params(t) == 1 && ox_trainer_step(t, in, 2, NULL) == OX_OK &&
                  param(t, "b", 0) != B0[0],
              "options.params: only b is trained");
        ox_trainer_free(t);
        t = NULL;
    }
    const char *unknown[] = {"w", "nothing"};
    o.params = unknown;
    o.n_params = 2;
    CHECK(ox_trainer_create(m, &o, &t) == OX_E_INVALID && strstr(ox_errmsg(), "nothing"),
          "an unknown parameter is named: %s", ox_errmsg());
    ox_trainer_free(NULL);
    ox_model_free(m);
}

static void test_classifier(void) {
    ox_model *m = classifier(NULL);
    ox_trainer_options o = {
        .loss = OX_LOSS_SOFTMAX_CROSS_ENTROPY, .optimizer = OX_OPTIM_ADAM, .lr = 0.05};
    ox_trainer *t = NULL;
    EXPECT(ox_trainer_create(m, &o, &t) == OX_OK);
    if (!t) return;
    float x[N * 3];
    int64_t y[N];
    for (int i = 0; i < N; i++) {
        y[i] = i % 4;
        for (int k = 0; k < 3; k++) x[3 * i + k] = (float)(k == y[i] % 3) + 0.1f * (float)i;
    }
    /* by position: the model's input, then "labels" */
    ox_tensor in[2] = {
        {.dtype = OX_FLOAT, .rank = 2, .dims = {N, 3}, .data = x},
        {.dtype = OX_INT64, .rank = 1, .dims = {N}, .data = y},
    };
    float first = 0, loss = 0;
    EXPECT(ox_trainer_step(t, in, 2, &first) == OX_OK);
    CHECK(fabsf(first - logf(4)) < 0.3f, "the first loss %g is near log 4", first);
    for (int s = 0; s < 100; s++) ox_trainer_step(t, in, 2, &loss);
    CHECK(loss < 0.5f * first, "the loss falls: %g -> %g", first, loss);
    const ox_tensor *outs[1] = {0};
    EXPECT(ox_trainer_evaluate(t, in, 1, outs) == OX_OK);
    CHECK(outs[0] && outs[0]->rank == 2 && outs[0]->dims[0] == N && outs[0]->dims[1] == 4,
          "evaluate gives the logits [N, 4]");
    /* a label out of range: an error, and the parameters stay */
    float w0 = param(t, "w", 0);
    y[0] = 7;
    CHECK(ox_trainer_step(t, in, 2, &loss) != OX_OK && param(t, "w", 0) == w0,
          "a label out of range fails the step and leaves the parameters");
    ox_trainer_free(t);
    ox_model_free(m);

    m = classifier("loss");
    t = NULL;
    CHECK(ox_trainer_create(m, &o, &t) == OX_E_INVALID && strstr(ox_errmsg(), "'loss'"),
          "a model with a value named 'loss' is refused: %s", ox_errmsg());
    ox_model_free(m);
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "test_train.tmp";
    char cmd[1100];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", dir, dir);
    if (system(cmd) != 0) return 2;
    test_least_squares(dir);
    test_classifier();
    return harness_finish();
}
