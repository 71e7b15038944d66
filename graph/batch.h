/* Whether a graph computes each item of a batch on its own, so that a batch may be run one
 * item at a time (executor/session.c runs large batches of such graphs that way, to keep each
 * item's activations in cache, and on several threads at once).
 *
 *     struct ox_batch_info bi;
 *     ox_graph_batch_info(g, &bi);
 *     if (bi.is_separable) ...   // every input and output has the batch on axis 0
 *
 * A graph is separable when every graph input is a tensor whose first dimension is the same
 * symbol (the exporter's dynamic batch axis), every graph output carries that axis first, and
 * every node that reads a batched value is one whose items do not mix along axis 0: a known
 * op whose attributes and constant inputs keep axis 0 apart (Conv, pooling, elementwise ops
 * broadcasting constants that have no batch axis, Gemm with A batched, MatMul, Concat or
 * Softmax over another axis, Reshape keeping dim 0, ...). Anything the analysis does not know
 * (Shape of a batched value, control flow, random ops, an unknown op, a rank it cannot
 * follow) makes the graph not separable: the answer errs on the side of "no".
 */
#ifndef OX_GRAPH_BATCH_H
#define OX_GRAPH_BATCH_H

#include "graph/ir.h"

struct ox_batch_info {
    bool is_separable;
    /* When not separable: the first node (or input/output) that made it so, for messages. */
    const char *why;
    /* Of the MACs of Conv/ConvTranspose nodes against those of Gemm/MatMul nodes whose
     * batched operand has one row per item (a classifier's head): filled for separable
     * graphs, for the executor's choice. Weights, in bytes, read by such one-row products. */
    int64_t row_product_weight_bytes;
    int n_convs;
};

void ox_graph_batch_info(const struct ox_graph *g, struct ox_batch_info *out);

#endif
