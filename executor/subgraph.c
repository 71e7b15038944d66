/* Subgraphs (the bodies of If, Loop and Scan) run as plans of their own, cached in the plan
 * of the node that runs them, one per input signature, the most recently used first. Their
 * outer names resolve through the scope chain (executor/plan.h). */
#include "executor/plan.h"

/* Plans kept per subgraph: a Loop whose carried value grows at every iteration (torchvision's
 * Mask R-CNN pastes 100 masks into a [i, H, W] tensor) makes a new signature each time, and
 * keeping them all held every iteration's arena (4.8 GiB at 320 x 320). The least recently
 * used beyond this many are freed; their outputs were consumed (copied by the If, Loop or
 * Scan kernel) before the next run of the subgraph. */
#define SUBPLANS_PER_GRAPH 4

static void trim_cache(struct ox_plan *parent, const struct ox_graph *g) {
    int seen = 0;
    for (struct ox_plan **pp = &parent->subplans; *pp;) {
        struct ox_plan *q = *pp;
        if (q->graph == g && ++seen > SUBPLANS_PER_GRAPH) {
            *pp = q->next;
            ox_plan_free(q);
        } else {
            pp = &q->next;
        }
    }
}

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
        trim_cache(parent, g);
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
