/* `onnxexec info`, `graph` and `plan` (see tools/inspect.h).
 *
 * info counts what the model holds (initializers: parameters and bytes) and, from the plan
 * made for the given input shapes, what one run does: FLOPs (2 x the multiply-adds of
 * Conv, ConvTranspose, Gemm and MatMul, fused, integer or quantized or not: the count
 * tools/bench_compare.py makes from the ONNX graph) and the memory plan's three numbers.
 * graph writes the graph as DOT (Graphviz) with the planned shapes on the edges; plan draws
 * the arena as SVG: one rectangle per value, over the steps it lives, at the offset it was
 * given.
 */
#include "tools/inspect.h"

#include "executor/session.h"
#include "graph/ir.h"
#include "tools/cli.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- formatting ------------------------------------------------------------------------ */

/* "float[1,3,224,224]"; a dim that is not fixed by its symbol or '?'. */
static void fmt_dims(char *buf, size_t len, ox_dtype dt, int rank, const int64_t *dims,
                     const char *const *names) {
    size_t k = (size_t)snprintf(buf, len, "%s", ox_dtype_name(dt));
    if (rank < 0) {
        if (k < len) snprintf(buf + k, len - k, "[?]");
        return;
    }
    for (int i = 0; i < rank && k < len; i++) {
        const char *sep = i ? "," : "[";
        if (dims[i] >= 0)
            k += (size_t)snprintf(buf + k, len - k, "%s%" PRId64, sep, dims[i]);
        else
            k += (size_t)snprintf(buf + k, len - k, "%s%s", sep,
                                  names && names[i] && *names[i] ? names[i] : "?");
    }
    if (k < len) snprintf(buf + k, len - k, rank ? "]" : "[]");
}

static void fmt_tensor(char *buf, size_t len, const ox_tensor *t) {
    fmt_dims(buf, len, t->dtype, t->rank, t->dims, NULL);
}

/* A value's declared type ("float[N,10]"). */
static void fmt_decl(char *buf, size_t len, const struct ox_value *v) {
    int64_t dims[OX_MAX_RANK];
    const char *names[OX_MAX_RANK];
    int rank = v->rank > OX_MAX_RANK ? OX_MAX_RANK : v->rank;
    for (int i = 0; i < rank; i++) dims[i] = v->dims[i].value, names[i] = v->dims[i].symbol;
    fmt_dims(buf, len, v->dtype, rank, dims, names);
}

static void fmt_bytes(char *buf, size_t len, double b) {
    static const char *const unit[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (b >= 1024 && u < 4) b /= 1024, u++;
    if (u == 0)
        snprintf(buf, len, "%.0f bytes", b);
    else
        snprintf(buf, len, "%.*f %s", b < 10 ? 2 : b < 100 ? 1 : 0, b, unit[u]);
}

/* 1234567 -> "1.23 M<unit>", 160 -> "160 <unit>" (or "160" when unit is "") */
static void fmt_si(char *buf, size_t len, double x, const char *unit) {
    static const char *const prefix[] = {"", "K", "M", "G", "T", "P"};
    int u = 0;
    while (x >= 1000 && u < 5) x /= 1000, u++;
    snprintf(buf, len, "%.*f%s%s%s",
             u ? (x < 10    ? 2
                  : x < 100 ? 1
                            : 0)
               : 0,
             x, u || *unit ? " " : "", prefix[u], unit);
}

/* s with the characters of XML escaped */
static void xml_str(FILE *f, const char *s) {
    for (; s && *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default:
            if ((unsigned char)*s >= 0x20 || *s == '\t') fputc(*s, f);
        }
    }
}

/* s inside a DOT string ("..."): quotes and backslashes escaped, line breaks as \n */
static void dot_str(FILE *f, const char *s) {
    for (; s && *s; s++) {
        if (*s == '"' || *s == '\\')
            fprintf(f, "\\%c", *s);
        else if (*s == '\n')
            fputs("\\n", f);
        else if ((unsigned char)*s >= 0x20)
            fputc(*s, f);
    }
}

/* ---- what the model holds -------------------------------------------------------------- */

struct params {
    int n_init;
    double count, bytes;
};

/* Initializers (constants with no producer): their elements and bytes. */
static struct params count_params(const struct ox_graph *g) {
    struct params r = {0};
    for (int v = 0; v < g->n_values; v++) {
        const struct ox_value *val = &g->values[v];
        if (!val->init || val->producer >= 0) continue;
        int64_t n = ox_tensor_numel(val->init);
        r.n_init++;
        r.count += (double)n;
        r.bytes += (double)n * (double)ox_dtype_size(val->init->dtype);
    }
    return r;
}

/* The planned type of value v, or NULL when the plan does not compute it. */
static const ox_tensor *planned(const struct ox_plan *p, int v) {
    if (!p || v < 0 || p->slot[v] == OX_SLOT_NONE) return NULL;
    const ox_tensor *t = &p->vals[v];
    if (t->rank < 0 || t->rank > OX_MAX_RANK) return NULL;
    for (int i = 0; i < t->rank; i++)
        if (t->dims[i] < 0) return NULL;
    return t;
}

static double numel_of(const ox_tensor *t) {
    double n = 1;
    for (int i = 0; i < t->rank; i++) n *= (double)t->dims[i];
    return n;
}

/* The op a node computes FLOPs as (Conv, ConvTranspose, Gemm, MatMul), or NULL; *w: the
 * input that holds a convolution's weights. The integer and quantized forms count as the
 * float op they compute (QLinearConv, ConvInteger; QLinearMatMul, MatMulInteger,
 * com.microsoft MatMulNBits; com.microsoft QGemm), so that a QDQ model counts the same, its
 * convolutions fused or not. */
static const char *flop_op(const struct ox_node *n, int *w) {
    static const char *const ops[] = {"Conv", "ConvTranspose", "Gemm", "MatMul"};
    static const char *const fused[] = {"FusedConv", NULL, "FusedGemm", "FusedMatMul"};
    bool std = !n->domain || !*n->domain, own = n->domain && strcmp(n->domain, "ai.onnxexec") == 0;
    bool ms = n->domain && strcmp(n->domain, "com.microsoft") == 0;
    *w = 1;
    for (int i = 0; i < 4; i++) {
        if (std && strcmp(n->op_type, ops[i]) == 0) return ops[i];
        if (own && fused[i] && strcmp(n->op_type, fused[i]) == 0) return ops[i];
    }
    if (own && strcmp(n->op_type, "FusedAttention") == 0) return "MatMul"; /* two of them */
    if ((std || own || ms) && strcmp(n->op_type, "QLinearConv") == 0) {
        *w = 3; /* x, x_scale, x_zero_point, w, ... */
        return "Conv";
    }
    if (std && strcmp(n->op_type, "ConvInteger") == 0) return "Conv";
    if (std &&
        (strcmp(n->op_type, "QLinearMatMul") == 0 || strcmp(n->op_type, "MatMulInteger") == 0))
        return "MatMul"; /* y's elements each take A's last dim of products */
    if (ms && strcmp(n->op_type, "MatMulNBits") == 0) return "MatMul";
    if ((ms || own) && strcmp(n->op_type, "QGemm") == 0) {
        *w = 3; /* A, a_scale, a_zero_point, B, ... */
        return "Gemm";
    }
    return NULL;
}

static int64_t attr_int(const struct ox_node *n, const char *name, int64_t dflt) {
    for (int i = 0; i < n->n_attrs; i++)
        if (strcmp(n->attrs[i].name, name) == 0) return n->attrs[i].i;
    return dflt;
}

/* 2 x the multiply-adds of node n at the planned shapes; false when a shape is unknown. */
static bool node_flops(const struct ox_plan *p, const struct ox_node *n, const char *op, int w,
                       double *flops) {
    const ox_tensor *a = n->n_inputs > 0 ? planned(p, n->inputs[0]) : NULL;
    const ox_tensor *b = n->n_inputs > w ? planned(p, n->inputs[w]) : NULL;
    const ox_tensor *y = n->n_outputs > 0 ? planned(p, n->outputs[0]) : NULL;
    if (!a || !b || !y) return false;
    if (strcmp(n->op_type, "FusedAttention") == 0) { /* Q . KT, then P . V */
        const ox_tensor *in[32] = {NULL};
        if (n->n_inputs > 32) return false;
        for (int i = 0; i < n->n_inputs; i++)
            in[i] = n->inputs[i] >= 0 ? planned(p, n->inputs[i]) : NULL;
        struct ox_fattn f;
        if (ox_fattn_parse(n, in, &f) != OX_OK) return false;
        if (f.generic) {
            *flops = 2.0 * (double)f.mm1.batch * (double)(f.mm1.M * f.mm1.N * f.mm1.K) +
                     2.0 * (double)f.mm2.batch * (double)(f.mm2.M * f.mm2.N * f.mm2.K);
            return true;
        }
        *flops = 2.0 * (double)f.batch * (double)f.S * (double)f.T * (double)(f.Dk + f.Dv);
        return true;
    }
    double k;
    if (strcmp(op, "Conv") == 0 || strcmp(op, "ConvTranspose") == 0) {
        if (b->rank < 1) return false;
        double per = numel_of(b) / (double)(b->dims[0] ? b->dims[0] : 1);
        /* Conv: each output element takes C/group x kernel MACs (W: [M, C/group, k...]);
         * ConvTranspose: each input element scatters into M/group x kernel outputs
         * (W: [C, M/group, k...]) */
        *flops = 2 * (strcmp(op, "Conv") == 0 ? numel_of(y) : numel_of(a)) * per;
        return true;
    }
    if (strcmp(op, "Gemm") == 0) { /* onnxexec's QGemm also takes A [..., K] */
        if (a->rank < 1 || (a->rank != 2 && attr_int(n, "transA", 0))) return false;
        k = (double)(attr_int(n, "transA", 0) ? a->dims[0] : a->dims[a->rank - 1]);
    } else {
        if (a->rank < 1) return false;
        k = (double)a->dims[a->rank - 1];
    }
    *flops = 2 * numel_of(y) * k;
    return true;
}

struct flops {
    double total;
    int n_nodes, n_unknown;
    int n_bodies; /* If/Loop/Scan nodes run: their bodies are not counted */
    double by_op[4];
};

static const char *const flop_ops[4] = {"Conv", "ConvTranspose", "Gemm", "MatMul"};

/* Over the plan's steps: the nodes one run executes (folded constants are not counted). */
static struct flops count_flops(const struct ox_plan *p) {
    struct flops r = {0};
    for (int s = 0; s < p->n_steps; s++) {
        const struct ox_node *n = &p->graph->nodes[p->steps[s].node];
        for (int a = 0; a < n->n_attrs; a++)
            if (n->attrs[a].g || (n->attrs[a].graphs && n->attrs[a].n > 0)) {
                r.n_bodies++;
                break;
            }
        int w;
        const char *op = flop_op(n, &w);
        if (!op) continue;
        double f;
        if (!node_flops(p, n, op, w, &f)) {
            r.n_unknown++;
            continue;
        }
        r.n_nodes++;
        r.total += f;
        for (int i = 0; i < 4; i++)
            if (strcmp(op, flop_ops[i]) == 0) r.by_op[i] += f;
    }
    return r;
}

static int n_arena_values(const struct ox_plan *p) {
    int n = 0;
    for (int v = 0; v < p->graph->n_values; v++) n += p->slot[v] == OX_SLOT_ARENA;
    return n;
}

/* ---- info ------------------------------------------------------------------------------ */

struct op_count {
    const char *domain, *op_type;
    int n;
};

static int cmp_op_count(const void *a, const void *b) {
    const struct op_count *x = a, *y = b;
    if (x->n != y->n) return x->n > y->n ? -1 : 1;
    int c = strcmp(x->domain, y->domain);
    return c ? c : strcmp(x->op_type, y->op_type);
}

static const char *kind_word(ox_io_kind k) {
    switch (k) {
    case OX_IO_TENSOR: return "tensor";
    case OX_IO_SEQUENCE: return "sequence";
    case OX_IO_MAP: return "map";
    case OX_IO_OPTIONAL: return "optional";
    case OX_IO_SPARSE: return "sparse tensor";
    default: return "unknown";
    }
}

static void info_io(const ox_model *m, bool is_in, int i, bool json) {
    ox_tensor d = {0};
    const char *dn[OX_MAX_RANK] = {0};
    ox_status st = is_in ? ox_model_input(m, i, &d, dn) : ox_model_output(m, i, &d, dn);
    ox_io_kind kind = is_in ? ox_model_input_kind(m, i) : ox_model_output_kind(m, i);
    bool dflt = is_in && ox_model_input_has_default(m, i);
    if (d.rank > OX_MAX_RANK) d.rank = OX_MAX_RANK;
    if (json) {
        printf("%s{\"name\": ", i ? ", " : "");
        cli_json_str(stdout, st == OX_OK ? d.name : NULL);
        printf(", \"kind\": \"%s\", \"dtype\": \"%s\", \"shape\": ", kind_word(kind),
               st == OX_OK ? ox_dtype_name(d.dtype) : "undefined");
        if (st != OX_OK || d.rank < 0) {
            printf("null");
        } else {
            printf("[");
            for (int k = 0; k < d.rank; k++) {
                if (k) printf(", ");
                if (d.dims[k] >= 0)
                    printf("%" PRId64, d.dims[k]);
                else
                    cli_json_str(stdout, dn[k] && *dn[k] ? dn[k] : NULL);
            }
            printf("]");
        }
        if (is_in) printf(", \"has_initializer\": %s", dflt ? "true" : "false");
        printf("}");
        return;
    }
    if (st != OX_OK) {
        printf("  %d: (%s)\n", i, cli_lib_msg(st));
        return;
    }
    char type[700];
    fmt_dims(type, sizeof type, d.dtype, d.rank, d.dims, dn);
    if (kind != OX_IO_TENSOR)
        printf("  %-24s %s(%s)%s\n", d.name ? d.name : "?", kind_word(kind), type,
               dflt ? "  (has an initializer)" : "");
    else
        printf("  %-24s %s%s\n", d.name ? d.name : "?", type, dflt ? "  (has an initializer)" : "");
}

static int info(const char *path, const ox_model *m, const struct ox_plan *p, bool json) {
    const struct ox_graph *g = ox_model_graph(m);
    int n_nodes = ox_model_n_nodes(m);
    struct op_count *ops = calloc((size_t)(n_nodes > 0 ? n_nodes : 1), sizeof *ops);
    if (!ops) return cli_errorf(EXIT_FAIL, "out of memory");
    int n_ops = 0;
    for (int i = 0; i < n_nodes; i++) {
        const char *op = NULL, *dom = NULL;
        if (ox_model_node(m, i, NULL, &op, &dom) != OX_OK) continue;
        if (!op) op = "?";
        if (!dom) dom = "";
        int j = 0;
        while (j < n_ops && !(strcmp(ops[j].op_type, op) == 0 && strcmp(ops[j].domain, dom) == 0))
            j++;
        if (j == n_ops) ops[n_ops++] = (struct op_count){dom, op, 0};
        ops[j].n++;
    }
    qsort(ops, (size_t)n_ops, sizeof *ops, cmp_op_count);
    struct params par = count_params(g);
    struct flops fl = {0};
    if (p) fl = count_flops(p);
    const char *prod = ox_model_producer(m), *ver = ox_model_producer_version(m);
    int n_opsets = ox_model_n_opsets(m), n_in = ox_model_n_inputs(m), n_out = ox_model_n_outputs(m);

    if (json) {
        printf("{\"model\": ");
        cli_json_str(stdout, path);
        printf(", \"producer\": ");
        cli_json_str(stdout, prod && *prod ? prod : NULL);
        printf(", \"producer_version\": ");
        cli_json_str(stdout, ver && *ver ? ver : NULL);
        printf(", \"ir_version\": %" PRId64 ", \"opsets\": [", ox_model_ir_version(m));
        for (int i = 0, k = 0; i < n_opsets; i++) {
            const char *dom = NULL;
            int64_t v = 0;
            if (ox_model_opset(m, i, &dom, &v) != OX_OK) continue;
            printf("%s{\"domain\": ", k++ ? ", " : "");
            cli_json_str(stdout, dom && *dom ? dom : "ai.onnx");
            printf(", \"version\": %" PRId64 "}", v);
        }
        printf("],\n \"inputs\": [");
        for (int i = 0; i < n_in; i++) info_io(m, true, i, true);
        printf("],\n \"outputs\": [");
        for (int i = 0; i < n_out; i++) info_io(m, false, i, true);
        printf("],\n \"nodes\": %d, \"ops\": [", n_nodes);
        for (int j = 0; j < n_ops; j++) {
            printf("%s{\"domain\": ", j ? ", " : "");
            cli_json_str(stdout, ops[j].domain);
            printf(", \"op_type\": ");
            cli_json_str(stdout, ops[j].op_type);
            printf(", \"count\": %d}", ops[j].n);
        }
        printf("],\n \"parameters\": {\"initializers\": %d, \"count\": %.0f, \"bytes\": %.0f}",
               par.n_init, par.count, par.bytes);
        if (p) {
            printf(",\n \"planned_for\": [");
            for (int i = 0; i < g->n_inputs; i++) {
                const ox_tensor *t = &p->vals[g->inputs[i]];
                printf("%s{\"name\": ", i ? ", " : "");
                cli_json_str(stdout, g->values[g->inputs[i]].name);
                printf(", \"dtype\": \"%s\", \"shape\": [", ox_dtype_name(t->dtype));
                for (int k = 0; k < t->rank; k++) printf("%s%" PRId64, k ? ", " : "", t->dims[k]);
                printf("]}");
            }
            printf("],\n \"flops\": %.0f, \"flops_by_op\": {", fl.total);
            for (int i = 0, k = 0; i < 4; i++)
                if (fl.by_op[i] > 0)
                    printf("%s\"%s\": %.0f", k++ ? ", " : "", flop_ops[i], fl.by_op[i]);
            printf("}, \"flop_nodes\": %d, \"flop_nodes_unknown\": %d, \"subgraph_nodes\": %d",
                   fl.n_nodes, fl.n_unknown, fl.n_bodies);
            printf(",\n \"memory\": {\"arena_bytes\": %zu, \"no_reuse_bytes\": %zu, "
                   "\"lower_bound_bytes\": %zu, \"arena_values\": %d, \"steps\": %d}",
                   p->arena_bytes, p->sum_bytes, p->peak_bytes, n_arena_values(p), p->n_steps);
        } else {
            printf(",\n \"planned_for\": null, \"flops\": null, \"memory\": null");
        }
        printf("}\n");
        free(ops);
        return 0;
    }

    printf("model:      %s\n", path);
    printf("producer:   %s%s%s\n", prod && *prod ? prod : "(none)", ver && *ver ? " " : "",
           ver ? ver : "");
    printf("ir version: %" PRId64 "\n", ox_model_ir_version(m));
    printf("opsets:    ");
    for (int i = 0; i < n_opsets; i++) {
        const char *dom = NULL;
        int64_t v = 0;
        if (ox_model_opset(m, i, &dom, &v) != OX_OK) continue;
        printf("%s %s %" PRId64, i ? "," : "", dom && *dom ? dom : "ai.onnx", v);
    }
    printf("%s\n", n_opsets ? "" : " (none)");
    printf("inputs (%d):\n", n_in);
    for (int i = 0; i < n_in; i++) info_io(m, true, i, false);
    printf("outputs (%d):\n", n_out);
    for (int i = 0; i < n_out; i++) info_io(m, false, i, false);
    printf("nodes:      %d\n", n_nodes);
    for (int j = 0; j < n_ops; j++)
        printf("  %6d  %s%s%s\n", ops[j].n, ops[j].domain, *ops[j].domain ? "." : "",
               ops[j].op_type);
    free(ops);
    char b1[64], b2[64], b3[64];
    fmt_si(b1, sizeof b1, par.count, "");
    fmt_bytes(b2, sizeof b2, par.bytes);
    if (par.n_init)
        printf("parameters: %.0f (%s), %s in %d initializers\n", par.count, b1, b2, par.n_init);
    else
        printf("parameters: none (no initializers)\n");
    if (!p) {
        printf("FLOPs, memory: not computed (the model could not be planned: see above)\n");
        return 0;
    }
    printf("planned for:");
    for (int i = 0; i < g->n_inputs; i++) {
        char t[700];
        fmt_tensor(t, sizeof t, &p->vals[g->inputs[i]]);
        printf("%s %s %s", i ? "," : "", g->values[g->inputs[i]].name, t);
    }
    printf("%s\n", g->n_inputs ? "" : " (no inputs)");
    fmt_si(b1, sizeof b1, fl.total, "FLOP");
    if (fl.n_nodes)
        printf("FLOPs:      %.0f (%s): 2 x the multiply-adds of %d Conv/ConvTranspose/Gemm/"
               "MatMul nodes",
               fl.total, b1, fl.n_nodes);
    else
        printf("FLOPs:      0 (no Conv, ConvTranspose, Gemm or MatMul runs)");
    if (fl.n_unknown) printf("; %d more with shapes known only at run time", fl.n_unknown);
    if (fl.n_bodies) printf("; not counted: the bodies of %d If/Loop/Scan nodes", fl.n_bodies);
    printf("\n");
    for (int i = 0; i < 4; i++)
        if (fl.by_op[i] > 0) {
            fmt_si(b1, sizeof b1, fl.by_op[i], "FLOP");
            printf("  %16s  %s\n", b1, flop_ops[i]);
        }
    fmt_bytes(b1, sizeof b1, (double)p->arena_bytes);
    fmt_bytes(b2, sizeof b2, (double)p->sum_bytes);
    fmt_bytes(b3, sizeof b3, (double)p->peak_bytes);
    printf("memory:     arena %s, without reuse %s, lower bound %s (%d values over %d steps)\n", b1,
           b2, b3, n_arena_values(p), p->n_steps);
    return 0;
}

/* ---- graph ----------------------------------------------------------------------------- */

/* The type label of value v: planned when the plan has it, else declared. */
static void value_label(char *buf, size_t len, const struct ox_graph *g, const struct ox_plan *p,
                        int v) {
    const ox_tensor *t = planned(p, v);
    if (t)
        fmt_tensor(buf, len, t);
    else
        fmt_decl(buf, len, &g->values[v]);
}

static void write_dot(FILE *f, const char *model_path, const struct ox_graph *g,
                      const struct ox_plan *p) {
    struct params par = count_params(g);
    char b1[64], b2[64], t[700];
    fmt_si(b1, sizeof b1, par.count, "");
    fmt_bytes(b2, sizeof b2, par.bytes);
    fprintf(f, "digraph model {\n  graph [rankdir=TB, fontname=\"Helvetica\", labelloc=t, "
               "label=\"");
    dot_str(f, model_path);
    fprintf(f, "\\n%d nodes; %d initializers: %s parameters, %s%s\"];\n", g->n_nodes, par.n_init,
            b1, b2, p ? "" : "; declared shapes (not planned)");
    fprintf(f, "  node [shape=box, style=\"rounded,filled\", fillcolor=\"#e8eef7\", "
               "fontname=\"Helvetica\", fontsize=11];\n"
               "  edge [fontname=\"Helvetica\", fontsize=9, color=\"#555555\"];\n");
    for (int i = 0; i < g->n_inputs; i++) {
        int v = g->inputs[i];
        value_label(t, sizeof t, g, p, v);
        fprintf(f, "  in%d [shape=ellipse, fillcolor=\"#d9f2d9\", label=\"", i);
        dot_str(f, g->values[v].name);
        fprintf(f, "\\n%s\"];\n", t);
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const struct ox_node *n = &g->nodes[i];
        fprintf(f, "  n%d [label=\"", i);
        if (n->domain && *n->domain) dot_str(f, n->domain), fputc('.', f);
        dot_str(f, n->op_type);
        if (n->name && *n->name) fputs("\\n", f), dot_str(f, n->name);
        int n_w = 0;
        double w_count = 0;
        for (int k = 0; k < n->n_inputs; k++) {
            int v = n->inputs[k];
            if (v < 0 || !g->values[v].init || g->values[v].producer >= 0 ||
                ox_graph_is_input(g, v))
                continue;
            w_count += (double)ox_tensor_numel(g->values[v].init);
            if (n_w++ < 3) {
                fmt_tensor(t, sizeof t, g->values[v].init);
                fprintf(f, "%s%s", n_w == 1 ? "\\n" : ", ", t);
            }
        }
        if (n_w > 3) fprintf(f, " +%d more", n_w - 3);
        if (n_w) {
            fmt_si(b1, sizeof b1, w_count, "");
            fprintf(f, " (%s)", b1);
        }
        fprintf(f, "\"];\n");
    }
    /* edges: from the producer (or graph input) of every computed value a node reads */
    for (int i = 0; i < g->n_nodes; i++) {
        const struct ox_node *n = &g->nodes[i];
        for (int k = 0; k < n->n_inputs; k++) {
            int v = n->inputs[k];
            if (v < 0) continue;
            const struct ox_value *val = &g->values[v];
            char from[32];
            if (val->producer >= 0) {
                snprintf(from, sizeof from, "n%d", val->producer);
            } else {
                int j = 0;
                while (j < g->n_inputs && g->inputs[j] != v) j++;
                if (j == g->n_inputs) continue; /* an initializer: in the node's label */
                snprintf(from, sizeof from, "in%d", j);
            }
            value_label(t, sizeof t, g, p, v);
            fprintf(f, "  %s -> n%d [label=\"%s\", tooltip=\"", from, i, t);
            dot_str(f, val->name);
            fprintf(f, "\"];\n");
        }
    }
    for (int i = 0; i < g->n_outputs; i++) {
        int v = g->outputs[i];
        value_label(t, sizeof t, g, p, v);
        fprintf(f, "  out%d [shape=ellipse, fillcolor=\"#f7e3c8\", label=\"", i);
        dot_str(f, g->values[v].name);
        fprintf(f, "\\n%s\"];\n", t);
        if (g->values[v].producer >= 0)
            fprintf(f, "  n%d -> out%d [label=\"%s\"];\n", g->values[v].producer, i, t);
    }
    fprintf(f, "}\n");
}

/* The full path of program `name` on $PATH (malloc'd), or NULL. */
static char *find_program(const char *name) {
    const char *path = getenv("PATH");
    if (!path || !*path) path = "/usr/local/bin:/usr/bin:/bin";
    while (*path) {
        const char *end = strchr(path, ':');
        size_t n = end ? (size_t)(end - path) : strlen(path);
        char *full = malloc(n + strlen(name) + 2);
        if (!full) return NULL;
        snprintf(full, n + strlen(name) + 2, "%.*s/%s", (int)n, n ? path : ".", name);
        if (access(full, X_OK) == 0 && cli_is_file(full)) return full;
        free(full);
        path += n + (end ? 1 : 0);
    }
    return NULL;
}

/* Run argv[0] with argv; its exit status, or -1 when it could not start. */
static int run_program(char *const *argv) {
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        execv(argv[0], argv);
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static const char *ext_of(const char *path) {
    const char *slash = strrchr(path, '/'), *dot = strrchr(path, '.');
    return dot && (!slash || dot > slash) ? dot + 1 : "";
}

static int graph(const char *model_path, const struct ox_graph *g, const struct ox_plan *p,
                 const char *out) {
    const char *ext = ext_of(out);
    bool is_dot = cli_has_ext(out, ".dot") || cli_has_ext(out, ".gv");
    if (!is_dot && !cli_has_ext(out, ".svg") && !cli_has_ext(out, ".png") &&
        !cli_has_ext(out, ".pdf"))
        return cli_errorf(EXIT_USAGE, "-o %s: expected a .svg, .png, .pdf or .dot file", out);
    FILE *probe = fopen(out, "w"); /* say now when the picture cannot be written there */
    if (!probe) return cli_errorf(EXIT_FAIL, "-o %s: %s", out, strerror(errno));
    fclose(probe);
    char *dot = is_dot ? NULL : find_program("dot");
    size_t len = strlen(out) + 16;
    char *dot_path = malloc(len);
    if (!dot_path) return free(dot), cli_errorf(EXIT_FAIL, "out of memory");
    if (is_dot)
        snprintf(dot_path, len, "%s", out);
    else if (dot)
        snprintf(dot_path, len, "%s.tmp.dot", out);
    else /* no Graphviz: the DOT file beside where the picture would go */
        snprintf(dot_path, len, "%.*s.dot", (int)(strlen(out) - strlen(ext) - 1), out);
    if (!is_dot && !dot) remove(out);
    int rc = 0;
    FILE *f = fopen(dot_path, "w");
    if (!f) {
        rc = cli_errorf(EXIT_FAIL, "%s: %s", dot_path, strerror(errno));
        goto done;
    }
    write_dot(f, model_path, g, p);
    if (fclose(f) != 0) {
        rc = cli_errorf(EXIT_FAIL, "%s: %s", dot_path, strerror(errno));
        goto done;
    }
    if (is_dot) {
        printf("wrote %s (%d nodes); draw it with: dot -Tsvg %s -o graph.svg\n", out, g->n_nodes,
               out);
    } else if (!dot) {
        fprintf(stderr,
                "note: Graphviz's dot was not found, so %s was not drawn; wrote the graph as "
                "%s (install Graphviz: apt-get install graphviz, then: dot -T%s %s -o %s)\n",
                out, dot_path, ext, dot_path, out);
    } else {
        char fmt[16];
        snprintf(fmt, sizeof fmt, "-T%s", ext);
        for (char *c = fmt + 2; *c; c++) *c = (char)(*c >= 'A' && *c <= 'Z' ? *c + 32 : *c);
        char *argv[] = {dot, fmt, "-o", (char *)out, dot_path, NULL};
        int st = run_program(argv);
        remove(dot_path);
        if (st != 0)
            rc = cli_errorf(EXIT_FAIL,
                            "%s: Graphviz's dot failed (exit status %d); write DOT "
                            "with -o FILE.dot to look at its input",
                            out, st);
        else
            printf("wrote %s (%d nodes, rendered by %s)\n", out, g->n_nodes, dot);
    }
done:
    free(dot);
    free(dot_path);
    return rc;
}

/* ---- plan ------------------------------------------------------------------------------ */

static int plan_svg(const char *model_path, const struct ox_plan *p, const char *out) {
    if (!cli_has_ext(out, ".svg"))
        return cli_errorf(EXIT_USAGE, "-o %s: expected a .svg file", out);
    const struct ox_graph *g = p->graph;
    FILE *f = fopen(out, "w");
    if (!f) return cli_errorf(EXIT_FAIL, "%s: %s", out, strerror(errno));
    const double left = 90, top = 60, pw = 1000, ph = 560, W = left + pw + 30, H = top + ph + 60;
    int n_cols = p->n_steps + 1; /* graph outputs live to step n_steps */
    double arena = p->arena_bytes ? (double)p->arena_bytes : 1;
    char b1[64], b2[64], b3[64];
    fmt_bytes(b1, sizeof b1, (double)p->arena_bytes);
    fmt_bytes(b2, sizeof b2, (double)p->sum_bytes);
    fmt_bytes(b3, sizeof b3, (double)p->peak_bytes);
    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
            "viewBox=\"0 0 %.0f %.0f\" font-family=\"Helvetica, Arial, sans-serif\" "
            "font-size=\"12\">\n",
            W, H, W, H);
    fprintf(f, "<text x=\"%.0f\" y=\"20\" font-size=\"14\">memory plan of ", left);
    xml_str(f, model_path);
    fprintf(f,
            "</text>\n<text x=\"%.0f\" y=\"40\">arena %s, without reuse %s, lower bound %s; "
            "%d values in the arena over %d steps (hover a block for its value)</text>\n",
            left, b1, b2, b3, n_arena_values(p), p->n_steps);
    fprintf(f,
            "<g fill=\"none\" stroke=\"#888\"><line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
            "y2=\"%.1f\"/><line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/></g>\n",
            left, top, left, top + ph, left, top + ph, left + pw, top + ph);
    /* axes: offsets (y) and steps (x) */
    for (int i = 0; i <= 4; i++) {
        double y = top + ph * i / 4;
        fmt_bytes(b1, sizeof b1, arena * i / 4);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", left - 6, y + 4,
                b1);
    }
    int every = n_cols <= 20 ? 1 : (n_cols + 9) / 10;
    for (int s = 0; s < n_cols; s += every)
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%d</text>\n",
                left + pw * (s + 0.5) / n_cols, top + ph + 16, s);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">schedule step</text>\n",
            left + pw / 2, top + ph + 36);
    fprintf(f,
            "<text transform=\"translate(16,%.1f) rotate(-90)\" text-anchor=\"middle\">arena "
            "offset</text>\n",
            top + ph / 2);
    for (int v = 0; v < g->n_values; v++) {
        if (p->slot[v] != OX_SLOT_ARENA) continue;
        const ox_tensor *t = &p->vals[v];
        size_t bytes = 0;
        ox_tensor_bytes(t->dtype, t->rank, t->dims, &bytes);
        int a = p->first_step[v], b = p->last_step[v];
        if (a < 0) a = 0;
        if (b < a) b = a;
        double x = left + pw * a / n_cols, w = pw * (b - a + 1) / n_cols;
        double y = top + ph * (double)p->offset[v] / arena;
        double h = ph * (double)bytes / arena;
        unsigned hash = 2166136261u;
        for (const char *c = g->values[v].name; c && *c; c++)
            hash = (hash ^ (unsigned char)*c) * 16777619u;
        char type[700];
        fmt_tensor(type, sizeof type, t);
        fmt_bytes(b1, sizeof b1, (double)bytes);
        fprintf(f,
                "<rect class=\"value\" x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" "
                "fill=\"hsl(%u,55%%,65%%)\" stroke=\"#333\" stroke-width=\"0.3\" "
                "data-offset=\"%zu\" data-bytes=\"%zu\" data-first=\"%d\" data-last=\"%d\"><title>",
                x, y, w, h < 0.5 ? 0.5 : h, hash % 360, p->offset[v], bytes, a, b);
        xml_str(f, g->values[v].name);
        fprintf(f, ": %s, %s at offset %zu, steps %d-%d", type, b1, p->offset[v], a, b);
        int prod = g->values[v].producer;
        if (prod >= 0) {
            fprintf(f, " (from ");
            xml_str(f, g->nodes[prod].op_type);
            if (g->nodes[prod].name && *g->nodes[prod].name) {
                fputc(' ', f);
                xml_str(f, g->nodes[prod].name);
            }
            fputc(')', f);
        }
        fprintf(f, "</title></rect>\n");
    }
    fprintf(f, "</svg>\n");
    if (fclose(f) != 0) return cli_errorf(EXIT_FAIL, "%s: %s", out, strerror(errno));
    printf("wrote %s (%d values over %d steps; arena %zu bytes)\n", out, n_arena_values(p),
           p->n_steps, p->arena_bytes);
    return 0;
}

int inspect_report(enum inspect_what what, const char *model_path, const ox_model *m,
                   const struct ox_plan *p, bool json, const char *out) {
    if (what == INSPECT_INFO) return info(model_path, m, p, json);
    if (what == INSPECT_GRAPH) return graph(model_path, ox_model_graph(m), p, out);
    if (!p) return cli_errorf(EXIT_FAIL, "%s: no plan to draw", model_path);
    return plan_svg(model_path, p, out);
}
