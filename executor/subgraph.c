/* Subgraphs (the bodies of If, Loop and Scan) run as plans of their own, cached in the plan
 * of the node that runs them, one per input signature. Their outer names resolve through
 * the scope chain (executor/plan.h). */
#include "executor/plan.h"

ox_status ox_subgraph_run(struct ox_kernel_ctx *ctx, const struct ox_graph *g,
                          const ox_tensor *const *inputs, const ox_tensor **outputs) {
    struct ox_plan *parent = ctx->plan;
    if (!parent) return ox_err(OX_E_INTERNAL, "subgraph run outside a plan");
    struct ox_scope scope = {parent, ctx->scope};
    struct ox_plan *p = parent->subplans, *prev = NULL;
    while (p && !(p->graph == g && ox_plan_matches_scoped(p, inputs, &scope)))
        prev = p, p = p->next;
    if (!p) {
        ox_status st = ox_plan_build_scoped(g, inputs, &scope, &p);
        if (st) return st;
        p->next = parent->subplans;
        parent->subplans = p;
    } else if (prev) { /* most recently used first */
        prev->next = p->next;
        p->next = parent->subplans;
        parent->subplans = p;
    }
    ox_status st = ox_plan_run_scoped(p, inputs, &scope);
    if (st) return st;
    for (int k = 0; k < g->n_outputs; k++) outputs[k] = &p->vals[g->outputs[k]];
    return OX_OK;
}
