/* Internal access to models and sessions for other modules of the library (tests, tools
 * that need the IR). Users include only onnxexec.h. */
#ifndef OX_EXECUTOR_SESSION_H
#define OX_EXECUTOR_SESSION_H

#include "executor/plan.h"

/* The model's graph (borrowed). */
struct ox_graph *ox_model_graph(const ox_model *m);
/* The limits the model was loaded with (filled; borrowed). */
const ox_limits *ox_model_limits(const ox_model *m);
/* The plan for the inputs bound by the last ox_session_run (borrowed). */
ox_status ox_session_plan(ox_session *s, struct ox_plan **out);

#endif
