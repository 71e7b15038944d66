/* A plan: one graph made concrete for one input-shape signature.
 *
 *     struct ox_plan *p;
 *     ox_plan_build(graph, inputs, pool, &p);  // shape inference, folding, memory plan
 *     ox_plan_run(p, inputs);                  // no allocation when all shapes are static
 *     p->vals[graph->outputs[0]]                    // outputs, valid until the next run
 *     ox_plan_free(p);
 *
 * Building a plan walks the nodes in order and asks each op's infer function for its
 * output shapes. A node whose inputs are all known at plan time is run then and its outputs
 * become constants (this is how Shape→Gather→Concat→Reshape chains fold away). A node whose
 * output shape depends on data not known at plan time is "dynamic": it is inferred again
 * at run time and its outputs are allocated then, outside the arena; so is everything
 * downstream of it. Reshape-like ops (OX_OP_VIEW) become views: no step, no copy, the
 * output shows its input's memory, whose lifetime grows to cover the view's readers. Every
 * other intermediate gets an offset in one arena, chosen from the values' lifetimes over
 * the schedule (largest first, best fit), so values that are never alive at the same time
 * share memory.
 *
 * Ownership: the plan borrows the graph and owns the arena, the scratch buffer, the data of
 * folded constants and of dynamic values.
 */
#ifndef OX_EXECUTOR_PLAN_H
#define OX_EXECUTOR_PLAN_H

#include "kernels/op.h"

/* The values a subgraph reads from enclosing graphs are found through a chain of scopes:
 * the plan of the graph that holds the If/Loop/Scan node, then its own enclosing scope. */
struct ox_scope {
    struct ox_plan *plan;
    const struct ox_scope *parent;
};

/* The tensor named `name` in the nearest enclosing plan that computes it; *is_const tells
 * whether its data is fixed for the life of that plan (an initializer or folded value). */
const ox_tensor *ox_scope_find(const struct ox_scope *s, const char *name, bool *is_const);

/* Where a value's data lives in a plan. */
enum ox_slot {
    OX_SLOT_NONE = 0, /* not computed in this plan (unused) */
    OX_SLOT_CONST,    /* initializer data (borrowed from the graph) */
    OX_SLOT_FOLDED,   /* computed at plan time; data owned by the plan */
    OX_SLOT_INPUT,    /* bound to the caller's tensor at each run */
    OX_SLOT_ARENA,    /* at `offset` in the arena */
    OX_SLOT_DYNAMIC,  /* shape known only at run time; malloc'd per run */
    OX_SLOT_OUTER,    /* a subgraph's view of an enclosing graph's value, bound at each run */
    OX_SLOT_VIEW,     /* the data of another value (alias[v]) under this value's shape */
};

struct ox_step {
    int node;
    bool is_dynamic;
    const ox_tensor **in; /* node->n_inputs pointers into plan->vals (NULL if omitted) */
    ox_tensor **out;      /* node->n_outputs pointers (NULL if omitted) */
    void *prepared;       /* the kernel's prepared memory (ox_kernel_prepared), or NULL */
    bool is_skipped;      /* nothing to do: a Concat whose inputs were written in place, or
                           * the second node of a fused pair */
    bool fuse_next;       /* runs the next step's node too, as one kernel (plan_fuse_pw_dw) */
};

struct ox_plan {
    struct ox_plan *next;         /* the session's cache list */
    const struct ox_graph *graph; /* borrowed */
    bool precise;                 /* kernels take their most accurate paths (OX_META_GRADIENTS) */
    int n_sig;
    int64_t *sig;        /* per input: dtype, rank, dims */
    ox_tensor *vals;     /* one per graph value */
    unsigned char *slot; /* enum ox_slot, per value */
    size_t *offset;      /* arena offset, per value */
    int n_steps;
    struct ox_step *steps;
    void *arena;
    size_t arena_bytes; /* the arena as planned */
    size_t sum_bytes;   /* all arena values side by side (no reuse) */
    size_t peak_bytes;  /* the most bytes alive at one step (lower bound) */
    void *scratch;
    size_t scratch_bytes;
    struct ox_arena strings; /* new strings made by kernels (see ox_kernel_ctx) */
    int *alias;              /* per value: the value a view shows, else -1 */
    size_t *view_off;        /* per view: its byte offset in that value (Concat inputs) */
    int n_views;
    int *view_order; /* views in the order they are bound */
    int n_outer;
    int *outer;               /* value ids read from enclosing scopes (subgraphs) */
    struct ox_plan *subplans; /* plans of the subgraphs of this plan's nodes (a cache) */
    bool has_dynamic;
    struct ox_pool *pool; /* borrowed: the session's threads (NULL: serial) */
    double *step_seconds; /* per step, summed over runs, when profiling (else NULL) */
    int64_t profiled_runs;
    uint64_t max_bytes; /* the plan_bytes limit (0: none); subgraph plans inherit it */
    /* Per value: the lifetime the arena was planned with, from the step of its first write to
     * that of its last read (a graph output's last is n_steps); read it for arena values (other
     * slots may hold -1). For tools that draw the plan. */
    int *first_step, *last_step;
    /* The steps' prepared memory belongs to another plan of the same graph and shapes
     * (executor/session.c's batch lanes share one copy of the packed weights). */
    bool prepared_borrowed;
    /* Filled prepared buffers by fill function and key, which steps with the same key share
     * (ox_kernel_prepared): the first step's buffer, kept by that step. */
    struct ox_prep_share *prep_shared;
    /* Dynamic values' buffers kept between runs (per value, or NULL until the first), and
     * the scratch of dynamic steps, kept too (executor/plan.c, alloc_dynamic). */
    struct ox_dyn_buf *dyn;
    void *dyn_scratch;
    size_t dyn_scratch_bytes;
    struct ox_devplan *devplan; /* the same plan on a device (executor/devplan.c), or NULL */
};

/* A step's prepared memory of `bytes` (for ox_kernel_ctx.prepared), and its release. */
void *ox_prepared_new(size_t bytes);
void ox_prepared_free(void *prepared);

/* Build a plan for these inputs (bound in graph-input order; descriptors only, the data is
 * not read), to run on `pool` (borrowed; kernels size per-thread scratch for it). A
 * subgraph's plan runs on its enclosing plan's pool; it takes the scope its outer names come from
 * (NULL for a model's main graph). Errors name the node or input at fault. */
ox_status ox_plan_build(const struct ox_graph *g, const ox_tensor *const *inputs,
                        struct ox_pool *pool, struct ox_plan **out);
/* The same within max_bytes (0: no limit) for the arena, scratch, prepared and folded data:
 * OX_E_LIMIT past it, before the arena is allocated. Subgraph plans built from its scope
 * take the same limit, each on its own. With cpu_only (no device plan will run it), pairs of
 * nodes that a CPU kernel runs faster together become one step (plan_fuse_pw_dw). */
ox_status ox_plan_build_limited(const struct ox_graph *g, const ox_tensor *const *inputs,
                                struct ox_pool *pool, uint64_t max_bytes, bool cpu_only,
                                struct ox_plan **out);
ox_status ox_plan_build_scoped(const struct ox_graph *g, const ox_tensor *const *inputs,
                               const struct ox_scope *scope, struct ox_plan **out);
/* True when the plan was built for inputs (and outer values) of exactly these dtypes and
 * shapes. */
bool ox_plan_matches(const struct ox_plan *p, const ox_tensor *const *inputs);
bool ox_plan_matches_scoped(const struct ox_plan *p, const ox_tensor *const *inputs,
                            const struct ox_scope *scope);
/* Run: inputs in graph-input order (NULL where the input has an initializer default). */
ox_status ox_plan_run(struct ox_plan *p, const ox_tensor *const *inputs);
ox_status ox_plan_run_scoped(struct ox_plan *p, const ox_tensor *const *inputs,
                             const struct ox_scope *scope);
void ox_plan_free(struct ox_plan *p);
/* Seconds on a monotonic clock (the step profiles'). */
double ox_seconds(void);
/* A run in parts (ox_plan_run_scoped is both): bind the inputs (and outer values) and the
 * views over them, then run step s (in order, each once). For the device plans, which run
 * some steps elsewhere. */
ox_status ox_plan_bind(struct ox_plan *p, const ox_tensor *const *inputs,
                       const struct ox_scope *scope);
ox_status ox_plan_run_step(struct ox_plan *p, int s, const struct ox_scope *scope);

#endif
