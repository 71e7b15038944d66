/* Graph optimizations (graph/optimize.c says which, and what they keep). */
#ifndef OX_GRAPH_OPTIMIZE_H
#define OX_GRAPH_OPTIMIZE_H

#include "graph/ir.h"

struct ox_opt_stats {
    int folded_bn;            /* BatchNormalization nodes folded into Conv weights */
    int fused_nodes;          /* nodes fused into others (Conv/Gemm/MatMul epilogues, chains) */
    int fused_attention;      /* FusedAttention nodes made */
    int fused_skip_layernorm; /* SkipLayerNormalization nodes made (residual Add + norm) */
    int moved_transposes;     /* batch-first Transposes moved into FusedAttention views */
    int removed_nodes;        /* nodes whose outputs nothing read */
    int removed_constants;    /* initializers nothing read any more */
    int adopted_nodes;        /* ONNX Runtime's FusedConv/FusedGemm made onnxexec's own */
};

/* What the optimized graph is for (ox_graph_optimize's flags, or-ed). */
enum {
    /* only rewrites into default-domain ops of the model's opset (other runtimes read it) */
    OX_OPT_STANDARD_ONLY = 1,
    /* a GPU runs it: no rewrites into ops that only the CPU has kernels for (a QDQ graph's
     * convolutions, sums and max pools on 8-bit codes), which would leave the device for
     * them */
    OX_OPT_GPU = 2,
};

/* Optimize g's main graph in place for the OX_OPT_* flags; st (may be NULL) receives what was
 * done. On failure (out of memory) the graph may be half-rewritten and must be freed. */
ox_status ox_graph_optimize(struct ox_graph *g, unsigned flags, struct ox_opt_stats *st);

#endif
