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
};

/* Optimize g's main graph in place; st (may be NULL) receives what was done. With
 * standard_only, only rewrites into default-domain ops of the model's opset. On failure
 * (out of memory) the graph may be half-rewritten and must be freed. */
ox_status ox_graph_optimize(struct ox_graph *g, bool standard_only, struct ox_opt_stats *st);

#endif
