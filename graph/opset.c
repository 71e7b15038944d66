/* Opset conversion of the default domain (graph/opset.h). */
#include "graph/opset.h"

ox_status ox_graph_convert_opset(struct ox_graph *g, int64_t target) {
    int64_t from = ox_graph_opset(g, "");
    if (target == from) return OX_OK;
    return ox_err(OX_E_UNSUPPORTED, "converting from opset %lld to %lld is not written yet",
                  (long long)from, (long long)target);
}
