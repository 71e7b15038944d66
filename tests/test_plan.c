/* Plans: a static-shape model runs with no allocation after its first run; the plan is
 * cached per input-shape signature and a new shape makes a new plan; arena offsets let
 * values that are never alive together share memory; Flatten is a view, not a copy; an
 * elementwise op whose input dies there writes in place; a profiled session times each
 * node that runs.
 *
 * Linked with -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=posix_memalign so the
 * library's allocations can be counted. The model is the shipped Fashion-MNIST CNN.
 *     test_plan SCRATCH MODELS_DIR
 */
#include "executor/session.h"
#include "harness.h"

static long n_allocs;
#ifndef OX_NO_ALLOC_COUNT /* sanitizer builds own malloc: counting is left to the plain build */
void *__real_malloc(size_t n);
void *__real_calloc(size_t a, size_t b);
void *__real_realloc(void *p, size_t n);
int __real_posix_memalign(void **p, size_t a, size_t n);
void *__wrap_malloc(size_t n) {
    n_allocs++;
    return __real_malloc(n);
}
void *__wrap_calloc(size_t a, size_t b) {
    n_allocs++;
    return __real_calloc(a, b);
}
void *__wrap_realloc(void *p, size_t n) {
    n_allocs++;
    return __real_realloc(p, n);
}
int __wrap_posix_memalign(void **p, size_t a, size_t n) {
    n_allocs++;
    return __real_posix_memalign(p, a, n);
}
#endif

int main(int argc, char **argv) {
    const char *models = argc > 2 ? argv[2] : "models";
    char path[4096];
    snprintf(path, sizeof path, "%s/fashion_mnist_cnn.onnx", models);
    ox_model *m;
    if (ox_model_load(path, &m) != OX_OK) {
        printf("FAIL load %s: %s\n", path, ox_errmsg());
        return 1;
    }
    ox_session *s;
    EXPECT(ox_session_create(m, NULL, &s) == OX_OK);

    static float img[4 * 28 * 28];
    for (int i = 0; i < 4 * 28 * 28; i++) img[i] = (float)((i * 7919) % 256) / 255.0f;
    ox_tensor in = {.dtype = OX_FLOAT, .rank = 4, .dims = {1, 1, 28, 28}, .data = img};
    const ox_tensor *out[1];
    EXPECT(ox_session_run(s, &in, 1, out) == OX_OK);
    float first[10];
    memcpy(first, out[0]->data, sizeof first);

    /* second run, same shapes: the cached plan, no allocation */
    long before = n_allocs;
    EXPECT(ox_session_run(s, &in, 1, out) == OX_OK);
    long during = n_allocs - before;
    printf("allocations during a static-shape run: %ld\n", during);
    EXPECT(during == 0);
    EXPECT(memcmp(first, out[0]->data, sizeof first) == 0);

    /* a batch of 4 gets its own plan; image 0 of the batch gives the same logits */
    memcpy(img + 28 * 28, img, sizeof(float) * 28 * 28 * 1);
    ox_tensor in4 = {.dtype = OX_FLOAT, .rank = 4, .dims = {4, 1, 28, 28}, .data = img};
    EXPECT(ox_session_run(s, &in4, 1, out) == OX_OK);
    EXPECT(out[0]->rank == 2 && out[0]->dims[0] == 4 && out[0]->dims[1] == 10);
    for (int k = 0; k < 10; k++) {
        float a = ((const float *)out[0]->data)[k], b = ((const float *)out[0]->data)[10 + k];
        EXPECT(a - first[k] < 1e-4f && first[k] - a < 1e-4f);
        EXPECT(a - b < 1e-4f && b - a < 1e-4f);
    }

    /* the memory plan: reuse makes the arena smaller than all values side by side, and
     * it can never be below the most bytes alive at once */
    size_t arena, no_reuse, peak;
    EXPECT(ox_session_memory(s, &arena, &no_reuse, &peak) == OX_OK);
    printf("arena %zu bytes, no reuse %zu, lower bound %zu\n", arena, no_reuse, peak);
    EXPECT(arena < no_reuse);
    EXPECT(arena >= peak);

    /* the model's one Flatten is a view: no step, no copy, the same memory as its input */
    struct ox_plan *plan;
    EXPECT(ox_session_plan(s, &plan) == OX_OK);
    EXPECT(plan->n_views == 1);
    for (int i = 0; i < plan->n_views; i++) {
        int v = plan->view_order[i];
        EXPECT(plan->vals[v].data == plan->vals[plan->alias[v]].data);
        EXPECT(plan->vals[v].rank == 2);
    }

    /* back to batch 1: the first plan again, still no allocation */
    before = n_allocs;
    EXPECT(ox_session_run(s, &in, 1, out) == OX_OK);
    EXPECT(n_allocs - before == 0);

    /* wrong shape: a clear error, no crash */
    ox_tensor bad = {.dtype = OX_FLOAT, .rank = 4, .dims = {1, 1, 27, 28}, .data = img};
    EXPECT(ox_session_run(s, &bad, 1, out) == OX_E_SHAPE);
    EXPECT(strstr(ox_errmsg(), "image") != NULL);

    ox_session_free(s);
    ox_model_free(m);

    /* unoptimized, the model's Relus run in place: each writes over its input, which dies
     * there (the output is a view of it), and the logits do not change */
    ox_model_options no_opt = {.no_optimize = true};
    EXPECT(ox_model_load_with(path, &no_opt, &m) == OX_OK);
    EXPECT(ox_session_create(m, NULL, &s) == OX_OK);
    EXPECT(ox_session_run(s, &in, 1, out) == OX_OK);
    for (int k = 0; k < 10; k++) {
        float a = ((const float *)out[0]->data)[k];
        EXPECT(a - first[k] < 1e-4f && first[k] - a < 1e-4f);
    }
    EXPECT(ox_session_plan(s, &plan) == OX_OK);
    int n_relu_in_place = 0;
    for (int i = 0; i < plan->n_views; i++) {
        int v = plan->view_order[i], src = plan->alias[v];
        const struct ox_graph *mg = ox_model_graph(m);
        int prod = mg->values[v].producer;
        EXPECT(plan->vals[v].data == plan->vals[src].data);
        if (prod >= 0 && !strcmp(mg->nodes[prod].op_type, "Relu")) n_relu_in_place++;
    }
    printf("Relus in place: %d\n", n_relu_in_place);
    EXPECT(n_relu_in_place >= 2);
    const ox_node_time *times;
    int n_times;
    EXPECT(ox_session_profile(s, false, &times, &n_times) == OX_E_INVALID); /* not profiled */
    ox_session_free(s);

    /* profiling: one entry per node that runs, in execution order, with the runs counted;
     * a reset starts the sums again */
    ox_session_options prof = {.n_threads = 1, .profile = true};
    EXPECT(ox_session_create(m, &prof, &s) == OX_OK);
    EXPECT(ox_session_profile(s, false, &times, &n_times) == OX_E_INVALID); /* no run yet */
    for (int r = 0; r < 3; r++) EXPECT(ox_session_run(s, &in, 1, out) == OX_OK);
    EXPECT(ox_session_plan(s, &plan) == OX_OK);
    int want_steps = 0;
    for (int i = 0; i < plan->n_steps; i++) want_steps += !plan->steps[i].is_skipped;
    EXPECT(ox_session_profile(s, true, &times, &n_times) == OX_OK);
    EXPECT(n_times == want_steps && n_times > 0);
    double total = 0;
    for (int i = 0; i < n_times; i++) {
        EXPECT(times[i].runs == 3);
        EXPECT(times[i].seconds >= 0);
        total += times[i].seconds;
        int id = plan->steps[i].node; /* no step of this model is skipped */
        EXPECT(!strcmp(times[i].op_type, ox_model_graph(m)->nodes[id].op_type));
    }
    EXPECT(total > 0);
    EXPECT(ox_session_run(s, &in, 1, out) == OX_OK);
    EXPECT(ox_session_profile(s, false, &times, &n_times) == OX_OK);
    EXPECT(n_times > 0 && times[0].runs == 1);
    ox_session_free(s);
    ox_model_free(m);
    return harness_finish();
}
