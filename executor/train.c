/* ox_trainer: gradient descent on a model's gradient graph (onnxexec.h says the contract).
 *
 * Three copies of the forward model serve three purposes: the training model (the loss node
 * appended, then its gradient graph: inputs + labels + seed + parameters -> loss + gradients),
 * the evaluation model (the forward graph with the parameters made inputs, so that they are
 * bound, not folded as constants), and the serialized forward model, reloaded by
 * ox_trainer_save to write the trained parameters into its initializers. The parameters
 * themselves live in the trainer (float32 buffers) and are bound by name at every run.
 */
#include "executor/session.h"
#include "graph/ir.h"
#include "kernels/op.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct param {
    char *name;      /* malloc'd */
    ox_tensor value; /* float32, owned; value.name = name */
    int grad_out;    /* index of "<name>_grad" among the training model's outputs */
    float *m1, *m2;  /* optimizer state: SGD momentum buffer (m1); Adam's moments */
};

struct ox_trainer {
    ox_trainer_options opt; /* params/output pointers cleared: not kept */
    double lr;
    int64_t steps;
    void *fwd_buf; /* the forward model, serialized */
    size_t fwd_len;
    ox_limits limits; /* the model's, for its copies */
    ox_model *train_m;
    ox_session *train_s;
    int loss_out; /* index of the loss among the training model's outputs */
    ox_tensor seed;
    float seed_one;
    ox_model *eval_m; /* made at the first evaluate */
    ox_session *eval_s;
    int n_params;
    struct param *params;
    int cap_bind;
    ox_tensor *bind;        /* scratch: the caller's inputs, the seed, the parameters */
    const ox_tensor **outs; /* scratch: the outputs of a training run */
};

/* A copy of the model in `buf`, unoptimized. */
static ox_status load_copy(const ox_trainer *t, ox_model **out) {
    ox_model_options lo = {.no_optimize = true, .limits = t->limits};
    return ox_model_load_buffer_with(t->fwd_buf, t->fwd_len, NULL, &lo, out);
}

/* The value id of the output the options name (NULL: the first output). */
static ox_status find_output(const struct ox_graph *g, const char *name, int *out) {
    if (!name) {
        if (!g->n_outputs) return ox_err(OX_E_INVALID, "trainer: the model has no output");
        *out = g->outputs[0];
        return OX_OK;
    }
    for (int i = 0; i < g->n_outputs; i++)
        if (strcmp(g->values[g->outputs[i]].name, name) == 0) {
            *out = g->outputs[i];
            return OX_OK;
        }
    return ox_err(OX_E_INVALID, "trainer: the model has no output '%s'", name);
}

/* Append SoftmaxCrossEntropyLoss(scores, labels) -> loss; "loss" becomes the only output. */
static ox_status add_sce_loss(struct ox_graph *g, int scores) {
    const char *taken = ox_graph_find_value(g, "labels") >= 0 ? "labels"
                        : ox_graph_find_value(g, "loss") >= 0 ? "loss"
                                                              : NULL;
    if (taken)
        return ox_err(OX_E_INVALID,
                      "trainer: the model already has a value named '%s' (the loss's name)", taken);
    const struct ox_value *sv = &g->values[scores];
    if (sv->kind != OX_KIND_TENSOR || (sv->dtype != OX_FLOAT && sv->dtype != OX_UNDEFINED))
        return ox_err(OX_E_UNSUPPORTED, "trainer: output '%s' is %s, not float class scores",
                      sv->name, ox_dtype_name(sv->dtype));
    if (sv->rank >= 0 && sv->rank < 2)
        return ox_err(OX_E_INVALID,
                      "trainer: output '%s' has rank %d; class scores are [N, C] or [N, C, ...]",
                      sv->name, sv->rank);
    int opset = (int)ox_graph_opset(g, "");
    const struct ox_op *row = ox_op_find("", "SoftmaxCrossEntropyLoss", opset);
    if (!row)
        return ox_err(OX_E_UNSUPPORTED, "trainer: no SoftmaxCrossEntropyLoss at opset %d", opset);
    int labels = ox_graph_add_value(g, "labels");
    int loss = ox_graph_add_value(g, "loss");
    if (labels < 0 || loss < 0) return ox_err(OX_E_NOMEM, "out of memory");
    sv = &g->values[scores]; /* the value array may have moved */
    struct ox_value *lv = &g->values[labels];
    lv->kind = OX_KIND_TENSOR;
    lv->dtype = OX_INT64;
    lv->rank = sv->rank >= 0 ? sv->rank - 1 : -1;
    if (lv->rank > 0) {
        lv->dims = ox_graph_alloc(g, sizeof *lv->dims * (size_t)lv->rank);
        if (!lv->dims) return ox_err(OX_E_NOMEM, "out of memory");
        for (int k = 0; k < lv->rank; k++) {
            int from = k ? k + 1 : 0; /* N, then the dims after C */
            lv->dims[k] = sv->dims ? sv->dims[from] : (struct ox_dim){.value = -1};
        }
    }
    struct ox_value *ls = &g->values[loss];
    ls->kind = OX_KIND_TENSOR;
    ls->dtype = OX_FLOAT;
    ls->rank = 0;
    struct ox_node *n = ox_graph_add_node(g, "ox_train_loss", "", "SoftmaxCrossEntropyLoss", 2,
                                          (int[]){scores, labels}, 1, &loss);
    if (!n) return ox_err(OX_E_NOMEM, "out of memory");
    n->opset = opset;
    n->op = row;
    ox_status st = ox_graph_add_input(g, labels);
    if (st) return st;
    g->n_outputs = 0;
    return ox_graph_add_output(g, loss);
}

static int find_output_index(const struct ox_graph *g, const char *name) {
    for (int i = 0; i < g->n_outputs; i++)
        if (strcmp(g->values[g->outputs[i]].name, name) == 0) return i;
    return -1;
}

/* The parameters: the wrt values whose gradients the gradient pass added as outputs
 * [n_out0, n_outputs). Their buffers are copies of the initializers. */
static ox_status take_params(ox_trainer *t, const struct ox_graph *g, int n_out0) {
    int n = g->n_outputs - n_out0;
    t->params = calloc((size_t)(n > 0 ? n : 1), sizeof *t->params);
    if (!t->params) return ox_err(OX_E_NOMEM, "out of memory");
    for (int k = n_out0; k < g->n_outputs; k++) {
        const char *gname = g->values[g->outputs[k]].name;
        size_t len = strlen(gname);
        if (len < 5 || strcmp(gname + len - 5, "_grad") != 0)
            return ox_err(OX_E_INTERNAL, "trainer: gradient output '%s' is not '<name>_grad'",
                          gname);
        struct param *p = &t->params[t->n_params];
        p->name = strndup(gname, len - 5);
        if (!p->name) return ox_err(OX_E_NOMEM, "out of memory");
        t->n_params++;
        p->grad_out = k;
        int v = ox_graph_find_value(g, p->name);
        const ox_tensor *init = v >= 0 ? g->values[v].init : NULL;
        if (!init)
            return ox_err(OX_E_INVALID, "trainer: parameter '%s' is not an initializer", p->name);
        if (init->kind != OX_IO_TENSOR || init->dtype != OX_FLOAT)
            return ox_err(OX_E_UNSUPPORTED,
                          "trainer: parameter '%s' is %s; only float32 parameters are trained "
                          "(name the ones to train in the options' params)",
                          p->name, ox_dtype_name(init->dtype));
        ox_status st = ox_tensor_copy(&p->value, init);
        if (st) return st;
        p->value.name = p->name;
        size_t numel = (size_t)ox_tensor_numel(&p->value);
        bool need_m1 = t->opt.optimizer != OX_OPTIM_SGD || t->opt.momentum != 0;
        bool need_m2 = t->opt.optimizer != OX_OPTIM_SGD;
        if (need_m1 && !(p->m1 = calloc(numel ? numel : 1, sizeof(float))))
            return ox_err(OX_E_NOMEM, "out of memory");
        if (need_m2 && !(p->m2 = calloc(numel ? numel : 1, sizeof(float))))
            return ox_err(OX_E_NOMEM, "out of memory");
    }
    if (!t->n_params)
        return ox_err(OX_E_INVALID, "trainer: no parameter: no float initializer reaches the "
                                    "loss");
    return OX_OK;
}

/* The seed of the loss's gradient: ones, of the loss's shape, which must be one element. */
static ox_status make_seed(ox_trainer *t, const struct ox_graph *g, const char *loss_name) {
    char name[512];
    snprintf(name, sizeof name, "%s_grad", loss_name);
    int v = ox_graph_find_value(g, name);
    if (v < 0 || !ox_graph_is_input(g, v))
        return ox_err(OX_E_INTERNAL, "trainer: the gradient graph has no input '%s'", name);
    const struct ox_value *sv = &g->values[v];
    if (sv->dtype != OX_FLOAT)
        return ox_err(OX_E_UNSUPPORTED, "trainer: the loss '%s' is %s; float32 is trained",
                      loss_name, ox_dtype_name(sv->dtype));
    bool one = sv->rank >= 0;
    for (int k = 0; one && k < sv->rank; k++) one = sv->dims && sv->dims[k].value == 1;
    if (!one)
        return ox_err(OX_E_INVALID,
                      "trainer: the loss '%s' must be one element (a scalar); its shape is "
                      "not [] or [1, ...]",
                      loss_name);
    t->seed_one = 1.0f;
    t->seed =
        (ox_tensor){.dtype = OX_FLOAT, .rank = sv->rank, .data = &t->seed_one, .name = sv->name};
    for (int k = 0; k < sv->rank; k++) t->seed.dims[k] = 1;
    return OX_OK;
}

static ox_status check_options(const ox_trainer_options *o) {
    if (o->loss != OX_LOSS_OUTPUT && o->loss != OX_LOSS_SOFTMAX_CROSS_ENTROPY)
        return ox_err(OX_E_INVALID, "trainer: unknown loss kind %d", (int)o->loss);
    if (o->optimizer != OX_OPTIM_SGD && o->optimizer != OX_OPTIM_ADAM &&
        o->optimizer != OX_OPTIM_ADAMW)
        return ox_err(OX_E_INVALID, "trainer: unknown optimizer %d", (int)o->optimizer);
    if (!(o->lr >= 0) || !isfinite(o->lr))
        return ox_err(OX_E_INVALID, "trainer: lr %g is not a positive number", o->lr);
    if (!(o->momentum >= 0) || !isfinite(o->momentum))
        return ox_err(OX_E_INVALID, "trainer: momentum %g is negative", o->momentum);
    if (o->nesterov && !(o->momentum > 0))
        return ox_err(OX_E_INVALID, "trainer: Nesterov momentum needs momentum > 0");
    if (!(o->weight_decay >= 0) || !isfinite(o->weight_decay))
        return ox_err(OX_E_INVALID, "trainer: weight_decay %g is negative", o->weight_decay);
    if (!(o->beta1 >= 0 && o->beta1 < 1) || !(o->beta2 >= 0 && o->beta2 < 1))
        return ox_err(OX_E_INVALID, "trainer: betas (%g, %g) are not in [0, 1)", o->beta1,
                      o->beta2);
    if (!(o->eps >= 0) || !isfinite(o->eps))
        return ox_err(OX_E_INVALID, "trainer: eps %g is negative", o->eps);
    if (o->n_params < 0 || (o->n_params > 0 && !o->params))
        return ox_err(OX_E_INVALID, "trainer: %d params named with no names", o->n_params);
    return OX_OK;
}

ox_status ox_trainer_create(const ox_model *m, const ox_trainer_options *opt, ox_trainer **out) {
    *out = NULL;
    if (!m) return ox_err(OX_E_INVALID, "ox_trainer_create: model is NULL");
    ox_trainer_options o = opt ? *opt : (ox_trainer_options){0};
    ox_status st = check_options(&o);
    if (st) return st;
    bool sgd = o.optimizer == OX_OPTIM_SGD;
    if (o.lr == 0) o.lr = sgd ? 0.01 : 0.001;
    if (o.beta1 == 0) o.beta1 = 0.9;
    if (o.beta2 == 0) o.beta2 = 0.999;
    if (o.eps == 0) o.eps = 1e-8;
    ox_trainer *t = calloc(1, sizeof *t);
    if (!t) return ox_err(OX_E_NOMEM, "out of memory");
    t->opt = o;
    t->opt.params = NULL;
    t->opt.n_params = 0;
    t->opt.output = NULL;
    t->lr = o.lr;
    t->loss_out = -1;
    t->limits = *ox_model_limits(m);
    if ((st = ox_model_save_buffer(m, &t->fwd_buf, &t->fwd_len))) goto fail;
    if ((st = load_copy(t, &t->train_m))) goto fail;
    struct ox_graph *g = ox_model_graph(t->train_m);
    /* the loss runs at 13 at least, as the gradient graph does */
    if (ox_graph_opset(g, "") < 13 && (st = ox_model_convert_opset(t->train_m, 13))) goto fail;
    int out_v = -1;
    if ((st = find_output(g, o.output, &out_v))) goto fail;
    if (o.loss == OX_LOSS_SOFTMAX_CROSS_ENTROPY && (st = add_sce_loss(g, out_v))) goto fail;
    const char *loss_name =
        o.loss == OX_LOSS_SOFTMAX_CROSS_ENTROPY ? "loss" : g->values[out_v].name;
    int n_out0 = g->n_outputs;
    ox_grad_options go = {.of = &loss_name, .n_of = 1, .wrt = o.params, .n_wrt = o.n_params};
    if ((st = ox_model_gradient(t->train_m, &go))) goto fail;
    g = ox_model_graph(t->train_m);
    if ((st = take_params(t, g, n_out0))) goto fail;
    if ((st = make_seed(t, g, loss_name))) goto fail;
    t->loss_out = find_output_index(g, loss_name);
    if (t->loss_out < 0) {
        st = ox_err(OX_E_INTERNAL, "trainer: no output '%s'", loss_name);
        goto fail;
    }
    ox_session_options so = {.n_threads = o.n_threads};
    if ((st = ox_session_create(t->train_m, &so, &t->train_s))) goto fail;
    t->outs = calloc((size_t)g->n_outputs + 1, sizeof *t->outs);
    if (!t->outs) {
        st = ox_err(OX_E_NOMEM, "out of memory");
        goto fail;
    }
    *out = t;
    return OX_OK;
fail:
    ox_trainer_free(t);
    return st;
}

void ox_trainer_free(ox_trainer *t) {
    if (!t) return;
    for (int i = 0; i < t->n_params; i++) {
        struct param *p = &t->params[i];
        p->value.name = NULL;
        ox_tensor_free_data(&p->value);
        free(p->name);
        free(p->m1);
        free(p->m2);
    }
    free(t->params);
    ox_session_free(t->train_s);
    ox_model_free(t->train_m);
    ox_session_free(t->eval_s);
    ox_model_free(t->eval_m);
    free(t->fwd_buf);
    free(t->bind);
    free(t->outs);
    free(t);
}

/* t->bind = inputs, then `extra` (the seed or nothing), then the parameters. */
static ox_status bind(ox_trainer *t, const ox_tensor *inputs, int n_inputs,
                      const ox_tensor *extra) {
    if (n_inputs < 0 || (n_inputs > 0 && !inputs))
        return ox_err(OX_E_INVALID, "trainer: %d inputs with no array", n_inputs);
    int n = n_inputs + 1 + t->n_params;
    if (n > t->cap_bind) {
        ox_tensor *b = realloc(t->bind, sizeof *b * (size_t)n);
        if (!b) return ox_err(OX_E_NOMEM, "out of memory");
        t->bind = b;
        t->cap_bind = n;
    }
    int k = 0;
    for (int i = 0; i < n_inputs; i++) t->bind[k++] = inputs[i];
    if (extra) t->bind[k++] = *extra;
    for (int i = 0; i < t->n_params; i++) t->bind[k++] = t->params[i].value;
    return OX_OK;
}

/* One optimizer update of p with gradient g (n elements), in torch.optim's order of float32
 * operations: scalars are rounded to float where torch passes them to a float kernel. */
static void update(const ox_trainer *t, struct param *p, const float *g, int64_t n) {
    const ox_trainer_options *o = &t->opt;
    float *w = p->value.data;
    float lr = (float)t->lr, wd = (float)o->weight_decay;
    if (o->optimizer == OX_OPTIM_SGD) {
        float mom = (float)o->momentum;
        bool first = t->steps == 1;
        for (int64_t i = 0; i < n; i++) {
            float d = g[i];
            if (o->weight_decay != 0) d = d + wd * w[i];
            if (o->momentum != 0) {
                float b = first ? d : p->m1[i] * mom + d;
                p->m1[i] = b;
                d = o->nesterov ? d + mom * b : b;
            }
            w[i] = w[i] + -lr * d;
        }
        return;
    }
    double step = (double)t->steps;
    double bc1 = 1 - pow(o->beta1, step), bc2 = 1 - pow(o->beta2, step);
    float step_size = (float)(-(t->lr / bc1)), bc2_sqrt = (float)sqrt(bc2);
    float b1 = (float)o->beta1, b2 = (float)o->beta2;
    float c1 = (float)(1 - o->beta1), c2 = (float)(1 - o->beta2), eps = (float)o->eps;
    bool adamw = o->optimizer == OX_OPTIM_ADAMW;
    float decay = (float)(1 - t->lr * o->weight_decay);
    for (int64_t i = 0; i < n; i++) {
        float d = g[i];
        if (adamw) {
            if (o->weight_decay != 0) w[i] = w[i] * decay;
        } else if (o->weight_decay != 0) {
            d = d + wd * w[i];
        }
        float m = p->m1[i] * b1 + c1 * d;
        float v = p->m2[i] * b2 + c2 * d * d;
        p->m1[i] = m;
        p->m2[i] = v;
        float denom = sqrtf(v) / bc2_sqrt + eps;
        w[i] = w[i] + step_size * (m / denom);
    }
}

ox_status ox_trainer_step(ox_trainer *t, const ox_tensor *inputs, int n_inputs, float *loss) {
    if (!t) return ox_err(OX_E_INVALID, "ox_trainer_step: trainer is NULL");
    ox_status st = bind(t, inputs, n_inputs, &t->seed);
    if (st) return st;
    st = ox_session_run(t->train_s, t->bind, n_inputs + 1 + t->n_params, t->outs);
    if (st) return st;
    /* check every gradient before the first update, so that an error changes nothing */
    for (int i = 0; i < t->n_params; i++) {
        const struct param *p = &t->params[i];
        const ox_tensor *gr = t->outs[p->grad_out];
        if (gr->dtype != OX_FLOAT || ox_tensor_numel(gr) != ox_tensor_numel(&p->value))
            return ox_err(OX_E_INTERNAL,
                          "trainer: the gradient of '%s' is %s with %lld elements, the "
                          "parameter %lld",
                          p->name, ox_dtype_name(gr->dtype), (long long)ox_tensor_numel(gr),
                          (long long)ox_tensor_numel(&p->value));
    }
    if (loss) *loss = (float)ox_tensor_get(t->outs[t->loss_out], 0);
    t->steps++;
    for (int i = 0; i < t->n_params; i++) {
        struct param *p = &t->params[i];
        update(t, p, t->outs[p->grad_out]->data, ox_tensor_numel(&p->value));
    }
    return OX_OK;
}

ox_status ox_trainer_set_lr(ox_trainer *t, double lr) {
    if (!(lr > 0) || !isfinite(lr))
        return ox_err(OX_E_INVALID, "trainer: lr %g is not a positive number", lr);
    t->lr = lr;
    return OX_OK;
}

double ox_trainer_lr(const ox_trainer *t) {
    return t->lr;
}

int64_t ox_trainer_steps(const ox_trainer *t) {
    return t->steps;
}

int ox_trainer_n_params(const ox_trainer *t) {
    return t->n_params;
}

ox_status ox_trainer_param(const ox_trainer *t, int i, const ox_tensor **param) {
    if (i < 0 || i >= t->n_params)
        return ox_err(OX_E_INVALID, "trainer: parameter %d of %d", i, t->n_params);
    *param = &t->params[i].value;
    return OX_OK;
}

/* The evaluation model: the forward graph with the parameters as inputs (their initializers
 * the defaults), so that the planner binds them rather than folding them. */
static ox_status make_eval(ox_trainer *t) {
    ox_status st = load_copy(t, &t->eval_m);
    if (st) return st;
    struct ox_graph *g = ox_model_graph(t->eval_m);
    for (int i = 0; i < t->n_params; i++) {
        int v = ox_graph_find_value(g, t->params[i].name);
        if (v < 0 || !g->values[v].init)
            return ox_err(OX_E_INTERNAL, "trainer: parameter '%s' is not in the model",
                          t->params[i].name);
        if (!ox_graph_is_input(g, v) && (st = ox_graph_add_input(g, v))) return st;
    }
    ox_session_options so = {.n_threads = t->opt.n_threads};
    return ox_session_create(t->eval_m, &so, &t->eval_s);
}

ox_status ox_trainer_evaluate(ox_trainer *t, const ox_tensor *inputs, int n_inputs,
                              const ox_tensor **outputs) {
    if (!t) return ox_err(OX_E_INVALID, "ox_trainer_evaluate: trainer is NULL");
    ox_status st = OX_OK;
    if (!t->eval_s && (st = make_eval(t))) {
        ox_session_free(t->eval_s);
        ox_model_free(t->eval_m);
        t->eval_s = NULL;
        t->eval_m = NULL;
        return st;
    }
    if ((st = bind(t, inputs, n_inputs, NULL))) return st;
    return ox_session_run(t->eval_s, t->bind, n_inputs + t->n_params, outputs);
}

ox_status ox_trainer_save(const ox_trainer *t, const char *path) {
    if (!t || !path) return ox_err(OX_E_INVALID, "ox_trainer_save: trainer or path is NULL");
    ox_model *m;
    ox_status st = load_copy(t, &m);
    if (st) return st;
    struct ox_graph *g = ox_model_graph(m);
    for (int i = 0; !st && i < t->n_params; i++) {
        const struct param *p = &t->params[i];
        int v = ox_graph_find_value(g, p->name);
        ox_tensor *init = v >= 0 ? g->values[v].init : NULL;
        if (!init || init->dtype != OX_FLOAT ||
            ox_tensor_numel(init) != ox_tensor_numel(&p->value)) {
            st = ox_err(OX_E_INTERNAL, "trainer: parameter '%s' does not match the model", p->name);
            break;
        }
        size_t bytes = sizeof(float) * (size_t)ox_tensor_numel(init);
        if (g->values[v].init_borrowed) { /* points into a map: give it its own copy */
            void *d = malloc(bytes ? bytes : 1);
            if (!d) {
                st = ox_err(OX_E_NOMEM, "out of memory");
                break;
            }
            init->data = d;
            g->values[v].init_borrowed = false;
        }
        memcpy(init->data, p->value.data, bytes);
    }
    if (!st) st = ox_model_save(m, path, NULL);
    ox_model_free(m);
    return st;
}
