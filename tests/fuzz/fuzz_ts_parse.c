/* Fuzz target: the TorchScript code parser (importer/torchscript/ast.h, docs/FUZZING.md).
 *
 * Each input is parsed as one code/ file (ox_ts_parse); the tree it gives is walked: every
 * statement and expression, every subscript, name and attribute read as a type as the
 * evaluator reads annotate(T, v) and unchecked_cast(T, v) (ox_ts_expr_type), and every
 * class, method and function found again by name. Seeds: the .py records under code/ in the .pt
 * archives.
 */
#include "fuzz.h"
#include "importer/torchscript/ast.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fuzz_init();
    return 0;
}

static volatile uint64_t sink;

static void walk_block(const struct ox_ts_block *b, struct ox_arena *a, int depth);

static void walk_expr(const struct ox_ts_expr *e, struct ox_arena *a, int depth) {
    if (!e) return;
    if (depth > 2 * OX_TS_MAX_DEPTH + 8) abort(); /* the parser bounds the depth */
    sink += (uint64_t)e->kind + (uint64_t)e->line + (uint64_t)e->i + e->s_len;
    if (e->name) sink += strlen(e->name);
    if (e->kind == OX_TE_SUBSCRIPT || e->kind == OX_TE_NAME || e->kind == OX_TE_ATTR) {
        struct ox_ts_type *t;
        if (ox_ts_expr_type(e, "code/fuzz.py", a, &t) == OX_OK) sink += (uint64_t)t->kind;
    }
    walk_expr(e->base, a, depth + 1);
    walk_expr(e->index, a, depth + 1);
    for (int k = 0; k < e->n_args; k++) { /* a dict's n_args counts keys and values */
        if (e->kw && e->kw[k]) sink += strlen(e->kw[k]);
        walk_expr(e->args[k], a, depth + 1);
    }
}

static void walk_stmt(const struct ox_ts_stmt *s, struct ox_arena *a, int depth) {
    sink += (uint64_t)s->kind + (uint64_t)s->line;
    for (int k = 0; k < s->n_targets; k++) sink += strlen(s->targets[k]);
    walk_expr(s->target_attr, a, depth + 1);
    walk_expr(s->value, a, depth + 1);
    walk_expr(s->msg, a, depth + 1);
    walk_block(&s->body, a, depth + 1);
    walk_block(&s->orelse, a, depth + 1);
}

static void walk_block(const struct ox_ts_block *b, struct ox_arena *a, int depth) {
    for (int k = 0; k < b->n; k++) walk_stmt(b->stmts[k], a, depth);
}

static void walk_func(const struct ox_ts_func *f, struct ox_arena *a) {
    for (int k = 0; k < f->n_params; k++) {
        sink += strlen(f->params[k].name);
        walk_expr(f->params[k].dflt, a, 0);
    }
    walk_block(&f->body, a, 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct ox_arena a = {0};
    struct ox_ts_file *f;
    if (ox_ts_parse((const char *)data, size, "code/fuzz.py", &a, &f) == OX_OK) {
        for (int i = 0; i < f->n_classes; i++) {
            const struct ox_ts_class *c = f->classes[i];
            if (ox_ts_find_class(f, c->name) == NULL) abort();
            for (int k = 0; k < c->n_slots; k++) walk_expr(c->slots[k].value, &a, 0);
            for (int k = 0; k < c->n_methods; k++) {
                walk_func(c->methods[k], &a);
                (void)ox_ts_find_method(c, c->methods[k]->name);
            }
        }
        for (int i = 0; i < f->n_funcs; i++) {
            walk_func(f->funcs[i], &a);
            (void)ox_ts_find_func(f, f->funcs[i]->name);
        }
        walk_block(&f->body, &a, 0);
    }
    ox_arena_free(&a);
    return 0;
}
