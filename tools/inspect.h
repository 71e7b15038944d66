/* `onnxexec info`, `graph` and `plan`: what a model is, drawn or counted from its memory plan.
 *
 *     ox_session_run(s, in, n, out);          // one run plans the model for these inputs
 *     struct ox_plan *p;
 *     ox_session_plan(s, &p);                 // borrowed from the session
 *     inspect_report(INSPECT_INFO, "m.onnx", m, p, false, NULL);
 *
 * The plan may be NULL (the model could not be planned): info then leaves out FLOPs and the
 * memory plan, graph labels edges with the declared shapes, plan fails. tools/onnxexec.c
 * parses the options (-i, --shape, --batch as for run) and makes the plan.
 */
#ifndef OX_TOOLS_INSPECT_H
#define OX_TOOLS_INSPECT_H

#include "onnxexec.h"

#include <stdbool.h>

struct ox_plan;

enum inspect_what {
    INSPECT_INFO,  /* text or JSON on stdout */
    INSPECT_GRAPH, /* out: .dot, or .svg/.png/.pdf rendered by Graphviz's dot */
    INSPECT_PLAN,  /* out: .svg */
};

/* 0, or an exit code after a message. m and p are borrowed. */
int inspect_report(enum inspect_what what, const char *model_path, const ox_model *m,
                   const struct ox_plan *p, bool json, const char *out);

#endif
