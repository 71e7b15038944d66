/* Fuzz target: the pickle machine of TorchScript archives (importer/torchscript/pickle.h,
 * docs/FUZZING.md).
 *
 * Each input is run as a pickle (ox_pickle_load); the value tree it gives is walked (every
 * string, item and tensor view read, shared values once per visit up to a bound, since memo
 * references make a graph, not a tree) and looked up as the importer does (ox_pv_get).
 * Seeds: the data.pkl, constants.pkl and traced_inputs.pkl records of the .pt archives.
 */
#include "fuzz.h"
#include "importer/torchscript/pickle.h"

#define FUZZ_MAX_VISITS 100000

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fuzz_init();
    return 0;
}

static volatile uint64_t sink;

static void walk(const struct ox_pv *v, int depth, int *visits) {
    if (!v || ++*visits > FUZZ_MAX_VISITS) return;
    if (depth > OX_PICKLE_MAX_DEPTH + 8) abort(); /* the machine bounds nesting */
    sink += (uint64_t)v->kind + (uint64_t)v->i + (uint64_t)v->n;
    for (size_t k = 0; v->s && k < v->s_len; k++) sink += (uint8_t)v->s[k];
    if (v->cls) sink += strlen(v->cls);
    if (v->type_tag) sink += strlen(v->type_tag);
    if (v->kind == OX_PV_TENSOR || v->kind == OX_PV_STORAGE) {
        const struct ox_pv_tensor *t = &v->tensor;
        if (t->storage.key) sink += strlen(t->storage.key);
        if (t->storage.location) sink += strlen(t->storage.location);
        for (int d = 0; d < t->rank; d++) sink += (uint64_t)(t->size[d] + t->stride[d]);
    }
    int n = v->kind == OX_PV_DICT ? 2 * v->n : v->n;
    for (int k = 0; v->items && k < n; k++) walk(v->items[k], depth + 1, visits);
    walk(v->state, depth + 1, visits);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct ox_pickle *p;
    struct ox_pv *root;
    if (ox_pickle_load(data, size, "fuzz.pt: data.pkl", &p, &root) != OX_OK) return 0;
    int visits = 0;
    walk(root, 0, &visits);
    static const char *const keys[] = {"training", "_parameters", "weight", "bias", "forward"};
    const struct ox_pv *state = root && root->kind == OX_PV_OBJECT ? root->state : root;
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) (void)ox_pv_get(state, keys[k]);
    ox_pickle_free(p);
    return 0;
}
