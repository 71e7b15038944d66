/* ONNX Runtime's channel-blocked operators (domain com.microsoft.nchwc) as default-domain ones
 * (graph/nchwc.c says how). */
#ifndef OX_GRAPH_NCHWC_H
#define OX_GRAPH_NCHWC_H

#include "graph/ir.h"

/* Rewrite g's main graph, when it holds com.microsoft.nchwc nodes, into default-domain nodes
 * computing the same outputs; a graph without them is left as it is. Errors name the node
 * (OX_E_UNSUPPORTED: an operator or attribute this does not take, a block size that does not
 * fit the file; OX_E_NOMEM). On failure the graph may be half-rewritten and must be freed. */
ox_status ox_graph_lower_nchwc(struct ox_graph *g);

#endif
