/* Fuzz target: a model loaded, planned and run, end to end (docs/FUZZING.md).
 *
 * The input is a model: an ONNX file, or a TorchScript archive (an input starting like a
 * zip, loaded from the scratch folder since archives load from paths). Loading optimizes
 * the graph or not, as the input's byte sum is even or odd, with ox_limits set to the bounds
 * below (tensor bytes, nodes, nesting, plan bytes). What runs must stay small, so that every
 * input finishes in milliseconds; a model outside these bounds is skipped before anything
 * runs:
 *   - at most E2E_MAX_NODES nodes in all, subgraphs nested at most E2E_MAX_NESTING deep;
 *   - initializers of at most E2E_MAX_NUMEL elements; input dims fixed by the model at most
 *     E2E_MAX_DIM each and E2E_MAX_NUMEL in all (symbolic and unknown dims are 2, then 1);
 *   - every Loop has a trip count known before the run (an initializer, a Constant, or a
 *     graph input, which this target fills with small numbers) of at most E2E_MAX_TRIPS;
 *   - the plan for these inputs (ox_plan_build: shape inference and constant folding, which
 *     the library itself bounds) gives no value over E2E_MAX_NUMEL elements and an arena
 *     of at most E2E_MAX_ARENA bytes.
 * Then a session (one thread) runs the model twice, with symbolic dims 2 and then 1, and
 * every output byte is read. Inputs hold small numbers (floats in [-1.25, 1.25], integers 0,
 * 1, 2, booleans alternating), so that indices and counts taken from them stay in range.
 * Seeds: the conformance data's model.onnx files and the TorchScript fixtures.
 */
#include "fuzz.h"
#include "executor/session.h"
#include "importer/torchscript/torchscript.h"

#define E2E_MAX_NODES   64
#define E2E_MAX_NESTING 3
#define E2E_MAX_DIM     64
#define E2E_MAX_NUMEL   16384
#define E2E_MAX_TRIPS   8
#define E2E_MAX_ARENA   ((size_t)16 << 20)
#define E2E_MAX_INPUTS  64

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fuzz_init();
    return 0;
}

static volatile uint64_t sink;

/* ---- bounds on the graph --------------------------------------------------------------- */

/* The value of a Loop's trip count when known before the run: *small set when it is a
 * graph input of the main graph (filled by this target with 0, 1 or 2). */
static bool trip_count(const struct ox_graph *g, int v, int64_t *out, bool *small) {
    *small = false;
    const struct ox_value *val = &g->values[v];
    if (val->init) {
        if (ox_tensor_numel(val->init) != 1) return false;
        *out = (int64_t)ox_tensor_get(val->init, 0);
        return true;
    }
    if (val->is_outer && g->parent) {
        int pv = ox_graph_find_value(g->parent, val->name);
        return pv >= 0 && trip_count(g->parent, pv, out, small);
    }
    if (val->producer >= 0) {
        const struct ox_node *n = &g->nodes[val->producer];
        if (strcmp(n->op_type, "Constant") != 0) return false;
        const struct ox_attr *a = ox_node_attr(n, "value");
        if (a && a->type == OX_ATTR_TENSOR && a->t && ox_tensor_numel(a->t) == 1) {
            *out = (int64_t)ox_tensor_get(a->t, 0);
            return true;
        }
        a = ox_node_attr(n, "value_int");
        if (a && a->type == OX_ATTR_INT) {
            *out = a->i;
            return true;
        }
        return false;
    }
    for (int k = 0; !g->parent && k < g->n_inputs; k++)
        if (g->inputs[k] == v) return *small = true;
    return false;
}

/* True when g and its subgraphs keep to the bounds; *n_nodes counts nodes. */
static bool graph_ok(const struct ox_graph *g, int nesting, int *n_nodes) {
    if (nesting > E2E_MAX_NESTING) return false;
    *n_nodes += g->n_nodes;
    if (*n_nodes > E2E_MAX_NODES) return false;
    for (int v = 0; v < g->n_values; v++)
        if (g->values[v].init && ox_tensor_numel(g->values[v].init) > E2E_MAX_NUMEL) return false;
    for (int i = 0; i < g->n_nodes; i++) {
        const struct ox_node *n = &g->nodes[i];
        if (strcmp(n->op_type, "Loop") == 0) {
            int64_t trips;
            bool small;
            if (n->n_inputs < 1 || n->inputs[0] < 0 || !trip_count(g, n->inputs[0], &trips, &small))
                return false;
            if (!small && trips > E2E_MAX_TRIPS) return false;
        }
        for (int k = 0; k < n->n_attrs; k++) {
            const struct ox_attr *a = &n->attrs[k];
            if (a->type == OX_ATTR_GRAPH && a->g && !graph_ok(a->g, nesting + 1, n_nodes))
                return false;
            for (int j = 0; a->type == OX_ATTR_GRAPHS && j < a->n; j++)
                if (!graph_ok(a->graphs[j], nesting + 1, n_nodes)) return false;
            if ((a->type == OX_ATTR_TENSOR || a->type == OX_ATTR_SPARSE_TENSOR) && a->t &&
                ox_tensor_numel(a->t) > E2E_MAX_NUMEL)
                return false;
        }
    }
    return true;
}

/* ---- inputs ---------------------------------------------------------------------------- */

static char *const strings[] = {"a", "bc", "", "def"};

static void fill(ox_tensor *t) {
    int64_t n = ox_tensor_numel(t);
    if (t->dtype == OX_STRING) {
        for (int64_t i = 0; i < n; i++) ((char **)t->data)[i] = strings[i % 4];
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        double v = t->dtype == OX_BOOL ? (double)(i % 2)
                   : t->dtype == OX_FLOAT || t->dtype == OX_DOUBLE || t->dtype == OX_FLOAT16 ||
                           t->dtype == OX_BFLOAT16
                       ? (double)((i * 7) % 11 - 5) * 0.25
                       : (double)(i % 3);
        ox_tensor_set(t, i, v);
    }
}

/* A tensor of dtype dt and this shape, filled; false when it is too big or cannot be made. */
static bool make_tensor(ox_tensor *t, ox_dtype dt, int rank, const int64_t *dims, int64_t sym) {
    memset(t, 0, sizeof *t);
    if (dt == OX_UNDEFINED || (unsigned)dt >= OX_N_DTYPES) return false;
    if (rank < 0) rank = 1; /* unknown rank: a vector */
    int64_t numel = 1;
    for (int d = 0; d < rank; d++) {
        int64_t k = dims ? dims[d] : -1;
        if (k < 0) k = sym;
        if (k > E2E_MAX_DIM) return false;
        t->dims[d] = k;
        numel *= k;
        if (numel > E2E_MAX_NUMEL) return false;
    }
    t->dtype = dt;
    t->rank = rank;
    size_t bytes = (size_t)(numel ? numel : 1) * ox_dtype_size(dt);
    if (!(t->data = calloc(1, bytes))) return false;
    fill(t);
    return true;
}

/* Frees what make_input made (string tensors point at static strings, so not through
 * ox_tensor_free_data). */
static void free_input(ox_tensor *t) {
    for (int k = 0; k < t->n_items; k++) free_input(&t->items[k]);
    free(t->items);
    free(t->data);
    memset(t, 0, sizeof *t);
}

/* Input i of the model as a value with symbolic dims `sym`; false to skip the model. */
static bool make_input(const ox_model *m, int i, int64_t sym, ox_tensor *t) {
    ox_tensor desc;
    memset(t, 0, sizeof *t);
    if (ox_model_input(m, i, &desc, NULL) != OX_OK) return false;
    ox_io_kind kind = ox_model_input_kind(m, i);
    if (kind == OX_IO_TENSOR) {
        if (!make_tensor(t, desc.dtype, desc.rank, desc.dims, sym)) return false;
    } else if (kind == OX_IO_SEQUENCE || kind == OX_IO_OPTIONAL) {
        int n = kind == OX_IO_SEQUENCE ? 2 : 1;
        t->kind = kind;
        t->dtype = desc.dtype;
        if (!(t->items = calloc((size_t)n, sizeof *t->items))) return false;
        t->n_items = n;
        int64_t dims[1] = {sym};
        for (int k = 0; k < n; k++)
            if (!make_tensor(&t->items[k], desc.dtype, 1, dims, sym)) {
                free_input(t);
                return false;
            }
    } else {
        return false;
    }
    t->name = desc.name;
    return true;
}

/* ---- the run --------------------------------------------------------------------------- */

/* The plan for these inputs keeps to the bounds (values, arena, no Loop made at run time). */
static bool plan_ok(ox_model *m, const ox_tensor *in, const bool *bound) {
    const struct ox_graph *g = ox_model_graph(m);
    const ox_tensor *by_pos[E2E_MAX_INPUTS] = {0};
    for (int i = 0, k = 0; i < g->n_inputs; i++) by_pos[i] = bound[i] ? &in[k++] : NULL;
    struct ox_plan *p;
    if (ox_plan_build(g, by_pos, NULL, &p) != OX_OK) return true; /* the run fails alike */
    bool ok = p->arena_bytes <= E2E_MAX_ARENA && p->scratch_bytes <= E2E_MAX_ARENA;
    for (int v = 0; ok && v < g->n_values; v++)
        if (p->slot[v] != OX_SLOT_NONE && p->slot[v] != OX_SLOT_DYNAMIC &&
            p->slot[v] != OX_SLOT_OUTER && p->vals[v].kind == OX_IO_TENSOR &&
            ox_tensor_numel(&p->vals[v]) > E2E_MAX_NUMEL)
            ok = false;
    ox_plan_free(p);
    return ok;
}

static void read_value(const ox_tensor *t) {
    if (!t) return;
    for (int k = 0; k < t->n_items; k++) read_value(&t->items[k]);
    if (t->kind != OX_IO_TENSOR || !t->data) return;
    size_t bytes;
    if (!ox_tensor_bytes(t->dtype, t->rank, t->dims, &bytes)) abort(); /* outputs are sound */
    if (t->dtype == OX_STRING) {
        for (size_t i = 0; i < bytes / sizeof(char *); i++)
            if (((char **)t->data)[i]) sink += strlen(((char **)t->data)[i]);
        return;
    }
    for (size_t i = 0; i < bytes; i++) sink += ((const uint8_t *)t->data)[i];
}

/* One run with symbolic dims `sym`; false when the model is skipped or the run fails. */
static bool run_once(ox_model *m, ox_session *s, int64_t sym) {
    int n_in = ox_model_n_inputs(m), n_out = ox_model_n_outputs(m);
    if (n_in > E2E_MAX_INPUTS || n_out > 4096) return false;
    ox_tensor in[E2E_MAX_INPUTS];
    bool bound[E2E_MAX_INPUTS];
    int n = 0;
    bool ok = true;
    for (int i = 0; i < n_in && ok; i++) {
        bound[i] = !ox_model_input_has_default(m, i);
        if (bound[i]) ok = make_input(m, i, sym, &in[n++]);
        if (!ok) n--;
    }
    if (ok) ok = plan_ok(m, in, bound);
    if (ok) {
        const ox_tensor **out = calloc((size_t)n_out + 1, sizeof *out);
        ok = out && ox_session_run(s, in, n, out) == OX_OK;
        for (int k = 0; ok && k < n_out; k++) read_value(out[k]);
        free(out);
    }
    for (int k = 0; k < n; k++) free_input(&in[k]);
    return ok;
}

static ox_model *load(const uint8_t *data, size_t size) {
    ox_model *m = NULL;
    unsigned sum = 0;
    for (size_t i = 0; i < size; i++) sum += data[i];
    ox_model_options opt = {.no_optimize = sum & 1,
                            .limits = {.tensor_bytes = E2E_MAX_NUMEL * 16,
                                       .nodes = E2E_MAX_NODES,
                                       .subgraph_depth = E2E_MAX_NESTING,
                                       .plan_bytes = 4 * E2E_MAX_ARENA}};
    if (ox_ts_is_archive(data, size)) {
        const char *path = fuzz_file("model.pt", data, size);
        if (path) (void)ox_model_load_with(path, &opt, &m);
    } else {
        (void)ox_model_load_buffer_with(data, size, NULL, &opt, &m);
    }
    return m;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ox_model *m = load(data, size);
    if (!m) return 0;
    int n_nodes = 0;
    ox_session *s = NULL;
    if (graph_ok(ox_model_graph(m), 0, &n_nodes) &&
        ox_session_create(m, &(ox_session_options){.n_threads = 1}, &s) == OX_OK) {
        if (run_once(m, s, 2) && run_once(m, s, 1)) {
            size_t arena, no_reuse, peak;
            (void)ox_session_memory(s, &arena, &no_reuse, &peak);
        }
    }
    ox_session_free(s);
    ox_model_free(m);
    return 0;
}
