/* Opset conversion of the default ONNX domain ("version conversion"): rewrite a main graph
 * written for one opset so that it means the same under another, up or down.
 *
 *     if (ox_graph_convert_opset(g, 18) != OX_OK) puts(ox_errmsg());  // g now imports 18
 *
 * graph/opset.c lists the adapters (which op changed how at which version); a node whose
 * op cannot be expressed at the target opset makes the conversion fail with the node's
 * name, leaving g unchanged.
 */
#ifndef OX_GRAPH_OPSET_H
#define OX_GRAPH_OPSET_H

#include "graph/ir.h"

/* Convert g (a main graph, subgraphs included) to `target` opset of the default domain.
 * Errors: OX_E_UNSUPPORTED (an op without a way across; the message names the node, the op
 * and the versions), OX_E_INVALID (target out of range), OX_E_NOMEM. */
ox_status ox_graph_convert_opset(struct ox_graph *g, int64_t target);

#endif
