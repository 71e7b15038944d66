/* The exporter on graphs built through the IR API (what the optimizer, autograd and the
 * TorchScript importer make, rather than what a file held): what ONNX cannot express fails
 * naming the node and writes nothing; what it can comes back through the importer as it
 * was. Files go to the folder given as the first argument. */
#include "exporter/onnx.h"
#include "harness.h"
#include "importer/onnx.h"

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

/* x -> Relu -> y in a fresh main graph importing `opset` of the default domain. */
static struct ox_graph *relu_graph(int64_t opset, struct ox_node **node) {
    struct ox_graph *g = ox_graph_create(NULL);
    if (!g) exit(2);
    g->ir_version = 8;
    g->opsets = ox_graph_alloc(g, sizeof *g->opsets);
    g->opsets[0] = (struct ox_opset){"", opset};
    g->n_opsets = 1;
    g->name = "g";
    int x = ox_graph_add_value(g, "x"), y = ox_graph_add_value(g, "y");
    g->values[x].dtype = g->values[y].dtype = OX_FLOAT;
    g->values[x].rank = g->values[y].rank = 1;
    struct ox_dim *d = ox_graph_alloc(g, sizeof *d);
    d->value = -1;
    d->symbol = "n";
    g->values[x].dims = g->values[y].dims = d;
    g->inputs = ox_graph_alloc(g, sizeof(int));
    g->outputs = ox_graph_alloc(g, sizeof(int));
    g->inputs[g->n_inputs++] = x;
    g->outputs[g->n_outputs++] = y;
    *node = ox_graph_add_node(g, "relu_node", "", "Relu", 1, &x, 1, &y);
    (*node)->opset = (int)opset;
    return g;
}

static bool exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

static int n_files(const char *dir) {
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "ls -A '%s' | wc -l", dir);
    FILE *p = popen(cmd, "r");
    int n = -1;
    if (p && fscanf(p, "%d", &n) != 1) n = -1;
    if (p) pclose(p);
    return n;
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "test_exporter.tmp";
    char cmd[1100], path[1100];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", dir, dir);
    if (system(cmd) != 0) return 2;
    snprintf(path, sizeof path, "%s/m.onnx", dir);

    /* a graph the file format can hold: back through the importer unchanged */
    struct ox_node *n;
    struct ox_graph *g = relu_graph(13, &n);
    n->doc = "rectify";
    g->producer_name = "test_exporter";
    g->model_version = 3;
    EXPECT(ox_onnx_export_file(g, path, NULL) == OX_OK);
    struct ox_graph *back = NULL;
    EXPECT(ox_onnx_import_file(path, &back) == OX_OK);
    if (back) {
        CHECK(back->n_nodes == 1 && strcmp(back->nodes[0].op_type, "Relu") == 0 &&
                  strcmp(back->nodes[0].name, "relu_node") == 0 && back->nodes[0].doc &&
                  strcmp(back->nodes[0].doc, "rectify") == 0,
              "the node comes back with its name and doc string");
        int x = ox_graph_find_value(back, "x");
        CHECK(x >= 0 && back->values[x].rank == 1 && back->values[x].dims[0].value == -1 &&
                  back->values[x].dims[0].symbol &&
                  strcmp(back->values[x].dims[0].symbol, "n") == 0,
              "the symbolic dim comes back");
        CHECK(back->model_version == 3 && strcmp(back->producer_name, "test_exporter") == 0 &&
                  ox_graph_opset(back, "") == 13,
              "model version, producer and opset come back");
        ox_graph_free(back);
    }

    /* the same bytes from the file and from the buffer */
    void *buf = NULL;
    size_t len = 0;
    EXPECT(ox_onnx_export_buffer(g, &buf, &len) == OX_OK);
    FILE *f = fopen(path, "rb");
    char *file = malloc(len + 1);
    size_t got = f && file ? fread(file, 1, len + 1, f) : 0;
    if (f) fclose(f);
    CHECK(got == len && buf && memcmp(file, buf, len) == 0,
          "the file and the buffer hold the same bytes (%zu and %zu)", got, len);
    free(file);
    free(buf);

    /* a node newer than the model's opset: an error naming it; the old file is kept */
    n->opset = 14;
    ox_status st = ox_onnx_export_file(g, path, NULL);
    CHECK(st == OX_E_INVALID && strstr(ox_errmsg(), "relu_node") && strstr(ox_errmsg(), "opset 14"),
          "a node of a newer opset is refused, named: %s", ox_errmsg());
    CHECK(exists(path) && n_files(dir) == 1, "no temporary file is left, the old file stays");
    n->opset = 13;

    /* an attribute whose type was made inside onnxexec (no TypeProto kept) */
    struct ox_attr a = {.name = "type", .type = OX_ATTR_TYPE_PROTO, .s = "tensor(float)"};
    n->attrs = &a;
    n->n_attrs = 1;
    st = ox_onnx_export_buffer(g, &buf, &len);
    CHECK(st == OX_E_INVALID && strstr(ox_errmsg(), "relu_node") && strstr(ox_errmsg(), "type"),
          "a TYPE_PROTO attribute without its proto is refused, naming the node: %s", ox_errmsg());
    n->attrs = NULL;
    n->n_attrs = 0;

    /* a domain the model does not import is added to the opset imports */
    n->domain = "ai.onnxexec";
    n->opset = 1;
    EXPECT(ox_onnx_export_file(g, path, NULL) == OX_OK);
    back = NULL;
    EXPECT(ox_onnx_import_file(path, &back) == OX_OK);
    if (back) {
        CHECK(ox_graph_opset(back, "ai.onnxexec") == 1 && ox_graph_opset(back, "") == 13,
              "the ai.onnxexec domain is imported at version 1, the default domain kept");
        ox_graph_free(back);
    }
    ox_graph_free(g);

    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) return 2;
    return harness_finish();
}
