/* The TorchScript code of an archive's code/ files (SPEC-torchscript.md §3.4): a lexer with
 * Python's INDENT/DEDENT rules and a recursive-descent parser for the printed subset, into
 * the tree below. No evaluation happens here.
 *
 *     struct ox_arena a = {0};
 *     struct ox_ts_file *f;
 *     if (ox_ts_parse(src, len, "code/__torch__.py", &a, &f) != OX_OK) puts(ox_errmsg());
 *     for (int i = 0; i < f->n_classes; i++) ... f->classes[i]->methods ...
 *     ox_arena_free(&a);   // the whole tree
 *
 * Ownership: every node and string lives in the arena given to ox_ts_parse; the source is
 * only read during the call (it need not be NUL-terminated). Messages say
 * "<path>:<line>: <what>" and quote the token. Lines are 1-based.
 *
 * Beyond §3.4 the parser takes what is cheap and harmless: elif, a suite on the line of its
 * ':', single-quoted, raw and triple-quoted strings, hex/octal/binary ints, statements at
 * the top level, `x : T = v` in functions, Union[...]. Python outside the subset (infix
 * operators, lambda, decorators, import, slicing, comprehensions, with, try, global,
 * f-strings, ...) fails with OX_E_UNSUPPORTED naming the construct; non-Python fails with
 * OX_E_INVALID.
 *
 * Depth: a tree is at most OX_TS_MAX_DEPTH deep, counting blocks, elifs, expressions and
 * each link of a chain like a.b(c)[d], so walking it recursively is safe.
 */
#ifndef OX_IMPORTER_TORCHSCRIPT_AST_H
#define OX_IMPORTER_TORCHSCRIPT_AST_H

#include "graph/ir.h"

#define OX_TS_MAX_DEPTH 200 /* nesting of expressions and blocks (and bracket depth) */

/* ---- types (annotations) --------------------------------------------------------------- */

typedef enum {
    OX_TT_TENSOR,
    OX_TT_INT,
    OX_TT_FLOAT,
    OX_TT_BOOL,
    OX_TT_STR,
    OX_TT_NONE,     /* NoneType */
    OX_TT_DEVICE,   /* Device */
    OX_TT_ANY,      /* Any */
    OX_TT_OPTIONAL, /* args[0] */
    OX_TT_LIST,     /* args[0] */
    OX_TT_TUPLE,    /* args[n] (n may be 0: Tuple[()]) */
    OX_TT_DICT,     /* args[0] key, args[1] value */
    OX_TT_FINAL,    /* args[0] */
    OX_TT_CLASS,    /* name: a qualified name (__torch__.a.b.C) or another bare name */
    OX_TT_UNION,    /* args[n] (Union[...], printed by torch 2.x) */
} ox_ts_type_kind;

struct ox_ts_type {
    ox_ts_type_kind kind;
    const char *name; /* the (dotted) name as written: "Tensor", "Optional", "__torch__.a.C" */
    int n_args;
    struct ox_ts_type **args;
};

/* ---- expressions ----------------------------------------------------------------------- */

typedef enum {
    OX_TE_NAME,  /* name */
    OX_TE_INT,   /* i (a leading '-' folded in) */
    OX_TE_FLOAT, /* f (inf, -inf, nan included) */
    OX_TE_STR,   /* s, s_len (escapes decoded to UTF-8, NUL-terminated too; adjacent
                  * literals joined) */
    OX_TE_BOOL,  /* i: 0 or 1 */
    OX_TE_NONE,
    OX_TE_ATTR,      /* base.name */
    OX_TE_CALL,      /* base(args...); kw[k] is the keyword of args[k], NULL if positional
                      * (kw is NULL when n_args is 0); keyword arguments come last */
    OX_TE_SUBSCRIPT, /* base[index]; x[a, b] has an OX_TE_TUPLE index (Dict[str, int]) */
    OX_TE_TUPLE,     /* args[n]; (a, b), (a,), () and unparenthesised a, b */
    OX_TE_LIST,      /* args[n] */
    OX_TE_DICT,      /* args[2n]: key0, value0, ... */
    OX_TE_NEG,       /* -base (a name, or anything not a number literal) */
} ox_ts_expr_kind;

struct ox_ts_expr {
    ox_ts_expr_kind kind;
    int line;
    const char *name;
    int64_t i;
    double f;
    const char *s;
    size_t s_len;
    struct ox_ts_expr *base, *index;
    int n_args;
    struct ox_ts_expr **args;
    const char **kw;
};

/* ---- statements ------------------------------------------------------------------------ */

typedef enum {
    OX_TS_ASSIGN, /* targets = value. n_targets names (a trailing comma or several names:
                   * unpacking, is_tuple set); or one attribute target (target_attr).
                   * `x : T = v` sets type. value may be a tuple: a, b = c, d */
    OX_TS_EXPR,   /* value */
    OX_TS_RETURN, /* value (NULL for a bare return) */
    OX_TS_PASS,
    OX_TS_IF,    /* value: the condition; body, orelse (an elif: one OX_TS_IF in orelse) */
    OX_TS_FOR,   /* targets[0] (the loop name); value: the iterable; body */
    OX_TS_WHILE, /* value: the condition; body */
    OX_TS_BREAK,
    OX_TS_CONTINUE,
    OX_TS_ASSERT, /* value; msg (may be NULL) */
    OX_TS_RAISE,  /* value (may be NULL) */
} ox_ts_stmt_kind;

struct ox_ts_block {
    int n;
    struct ox_ts_stmt **stmts;
};

struct ox_ts_stmt {
    ox_ts_stmt_kind kind;
    int line;
    int n_targets;
    const char **targets;
    bool is_tuple;
    struct ox_ts_expr *target_attr; /* an OX_TE_ATTR or OX_TE_SUBSCRIPT target */
    struct ox_ts_type *type;        /* OX_TS_ASSIGN: the annotation of `x : T = v`, or NULL */
    struct ox_ts_expr *value, *msg;
    struct ox_ts_block body, orelse;
};

/* ---- definitions ----------------------------------------------------------------------- */

struct ox_ts_param {
    const char *name;
    struct ox_ts_type *type; /* NULL when not annotated */
    struct ox_ts_expr *dflt; /* NULL when none */
};

struct ox_ts_func {
    const char *name;
    int line;
    int n_params;
    struct ox_ts_param *params; /* a method's first one is self */
    struct ox_ts_type *ret;     /* NULL when not annotated */
    struct ox_ts_block body;
};

/* One `name : type [= value]` slot of a class, or an __annotations__["name"] = type line,
 * or a `name = value` line (Enum members): type NULL. */
struct ox_ts_slot {
    const char *name;
    struct ox_ts_type *type;  /* NULL for `name = value` */
    struct ox_ts_expr *value; /* Final constants' value, and `name = value`; NULL otherwise */
};

struct ox_ts_class {
    const char *name; /* as written after `class` */
    const char *base; /* "Module", "NamedTuple", "Enum", ... (dotted if so written); NULL
                       * for `class C:` */
    int line;
    int n_parameters, n_buffers;
    const char **parameters, **buffers; /* __parameters__ / __buffers__ */
    int n_slots;
    struct ox_ts_slot *slots;
    int n_methods;
    struct ox_ts_func **methods;
};

struct ox_ts_file {
    const char *path;
    int n_classes;
    struct ox_ts_class **classes;
    int n_funcs;
    struct ox_ts_func **funcs; /* free functions */
    struct ox_ts_block body;   /* any other top-level statements (op_version_set = 1 of old
                                * producers), in order */
};

/* Parse one code file (src[0..len), UTF-8). Errors: OX_E_INVALID (not Python: bad
 * indentation, unclosed bracket, invalid UTF-8, ...) / OX_E_UNSUPPORTED (Python outside the
 * subset, or past OX_TS_MAX_DEPTH) with "<path>:<line>: ..." naming the construct (an infix
 * operator, a lambda, a decorator, ...) and quoting the token; OX_E_NOMEM (also for code
 * over 32 MiB). On error *out is NULL and the arena may hold partial nodes. */
ox_status ox_ts_parse(const char *src, size_t len, const char *path, struct ox_arena *a,
                      struct ox_ts_file **out);
/* The type an expression spells: annotate(List[Tensor], []), unchecked_cast(T, v),
 * uninitialized(T), isinstance(x, T) carry types as expressions. Annotations go through
 * this too, so both read alike. New nodes in `a`; path (may be NULL) for messages.
 * Errors: OX_E_INVALID (not a type, wrong argument count), OX_E_UNSUPPORTED, OX_E_NOMEM. */
ox_status ox_ts_expr_type(const struct ox_ts_expr *e, const char *path, struct ox_arena *a,
                          struct ox_ts_type **out);
/* Lookups (NULL when absent). */
const struct ox_ts_class *ox_ts_find_class(const struct ox_ts_file *f, const char *name);
const struct ox_ts_func *ox_ts_find_method(const struct ox_ts_class *c, const char *name);
const struct ox_ts_func *ox_ts_find_func(const struct ox_ts_file *f, const char *name);

#endif
