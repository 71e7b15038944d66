/* The TorchScript code parser (importer/torchscript/parse.c, ast.h).
 *
 *     test_torchscript_parse SCRATCH                 unit checks on inline snippets
 *     test_torchscript_parse --dump FILE...          one line per AST node, for
 *                                                    tests/torchscript_parse.py to compare
 *                                                    with the same dump made from Python's ast
 *
 * The dump: per file a line "file PATH", then the nodes depth-first, each indented one space
 * per level below its parent; a file that fails gives "error MESSAGE" instead. Classes come
 * first (their parameters, buffers, slots, then methods), then free functions, then other
 * top-level statements. Each line starts with the node kind and, for expressions and
 * statements, "L<line>":
 *   class NAME base=B L1 / parameters "A","B" / buffers "A","B" / slot "NAME" : TYPE (value
 *   below)
 *   def NAME L1 ret=TYPE / param NAME : TYPE (default below) / body n=N / else n=N
 *   assign L1 names=A,B tuple=0|1 type=TYPE (value below) | assign L1 target type=- (target,
 *   value below) / expr / return / pass / break / continue / if / for L1 NAME / while /
 *   assert L1 msg=0|1 / raise
 *   name L1 ID / int L1 V / float L1 V (%.17g, inf, -inf, nan) / str L1 "ESCAPED" /
 *   bool L1 0|1 / none L1 / attr L1 NAME / call L1 n=N kw=K1,K2 / subscript L1 / tuple L1 n=N /
 *   list L1 n=N / dict L1 n=PAIRS / neg L1
 * Types print as Tensor, Optional[T], Tuple[A,B], Tuple[] ... ("-" when absent); strings
 * escape '\\', '"' and bytes outside 0x20..0x7e as \xHH (UTF-8 bytes).
 */
#include "harness.h"
#include "importer/torchscript/ast.h"

/* ---- dump ------------------------------------------------------------------------------ */

static void put_str(FILE *o, const char *s, size_t n) {
    fputc('"', o);
    for (size_t k = 0; k < n; k++) {
        unsigned char c = (unsigned char)s[k];
        if (c == '\\' || c == '"')
            fprintf(o, "\\%c", c);
        else if (c >= 0x20 && c < 0x7f)
            fputc(c, o);
        else
            fprintf(o, "\\x%02x", c);
    }
    fputc('"', o);
}

static void put_type(FILE *o, const struct ox_ts_type *t) {
    static const char *const NAMES[] = {
        [OX_TT_TENSOR] = "Tensor", [OX_TT_INT] = "int",     [OX_TT_FLOAT] = "float",
        [OX_TT_BOOL] = "bool",     [OX_TT_STR] = "str",     [OX_TT_NONE] = "NoneType",
        [OX_TT_DEVICE] = "Device", [OX_TT_ANY] = "Any",     [OX_TT_OPTIONAL] = "Optional",
        [OX_TT_LIST] = "List",     [OX_TT_TUPLE] = "Tuple", [OX_TT_DICT] = "Dict",
        [OX_TT_FINAL] = "Final",   [OX_TT_CLASS] = NULL,    [OX_TT_UNION] = "Union",
    };
    if (!t) {
        fputc('-', o);
        return;
    }
    fputs(t->kind == OX_TT_CLASS ? t->name : NAMES[t->kind], o);
    bool generic = t->kind == OX_TT_OPTIONAL || t->kind == OX_TT_LIST || t->kind == OX_TT_TUPLE ||
                   t->kind == OX_TT_DICT || t->kind == OX_TT_FINAL || t->kind == OX_TT_UNION;
    if (!generic) return;
    fputc('[', o);
    for (int k = 0; k < t->n_args; k++) {
        if (k) fputc(',', o);
        put_type(o, t->args[k]);
    }
    fputc(']', o);
}

static int n_nodes;

static void indent(FILE *o, int d) {
    n_nodes++;
    for (int k = 0; k < d; k++) fputc(' ', o);
}

static void dump_expr(FILE *o, const struct ox_ts_expr *e, int d) {
    indent(o, d);
    switch (e->kind) {
    case OX_TE_NAME: fprintf(o, "name L%d %s\n", e->line, e->name); return;
    case OX_TE_INT: fprintf(o, "int L%d %lld\n", e->line, (long long)e->i); return;
    case OX_TE_FLOAT:
        if (isnan(e->f))
            fprintf(o, "float L%d nan\n", e->line);
        else if (isinf(e->f))
            fprintf(o, "float L%d %sinf\n", e->line, e->f < 0 ? "-" : "");
        else
            fprintf(o, "float L%d %.17g\n", e->line, e->f);
        return;
    case OX_TE_STR:
        fprintf(o, "str L%d ", e->line);
        put_str(o, e->s, e->s_len);
        fputc('\n', o);
        return;
    case OX_TE_BOOL: fprintf(o, "bool L%d %d\n", e->line, (int)e->i); return;
    case OX_TE_NONE: fprintf(o, "none L%d\n", e->line); return;
    case OX_TE_ATTR:
        fprintf(o, "attr L%d %s\n", e->line, e->name);
        dump_expr(o, e->base, d + 1);
        return;
    case OX_TE_CALL: {
        fprintf(o, "call L%d n=%d kw=", e->line, e->n_args);
        int n_kw = 0;
        for (int k = 0; k < e->n_args; k++)
            if (e->kw[k]) fprintf(o, "%s%s", n_kw++ ? "," : "", e->kw[k]);
        fputc('\n', o);
        dump_expr(o, e->base, d + 1);
        for (int k = 0; k < e->n_args; k++) dump_expr(o, e->args[k], d + 1);
        return;
    }
    case OX_TE_SUBSCRIPT:
        fprintf(o, "subscript L%d\n", e->line);
        dump_expr(o, e->base, d + 1);
        dump_expr(o, e->index, d + 1);
        return;
    case OX_TE_TUPLE:
    case OX_TE_LIST:
    case OX_TE_DICT:
        fprintf(o, "%s L%d n=%d\n",
                e->kind == OX_TE_TUPLE  ? "tuple"
                : e->kind == OX_TE_LIST ? "list"
                                        : "dict",
                e->line, e->kind == OX_TE_DICT ? e->n_args / 2 : e->n_args);
        for (int k = 0; k < e->n_args; k++) dump_expr(o, e->args[k], d + 1);
        return;
    case OX_TE_NEG:
        fprintf(o, "neg L%d\n", e->line);
        dump_expr(o, e->base, d + 1);
        return;
    }
    fprintf(o, "?\n");
}

static void dump_block(FILE *o, const char *what, const struct ox_ts_block *b, int d);

static void dump_stmt(FILE *o, const struct ox_ts_stmt *s, int d) {
    indent(o, d);
    switch (s->kind) {
    case OX_TS_ASSIGN:
        if (s->target_attr) {
            fprintf(o, "assign L%d target type=", s->line);
            put_type(o, s->type);
            fputc('\n', o);
            dump_expr(o, s->target_attr, d + 1);
        } else {
            fprintf(o, "assign L%d names=", s->line);
            for (int k = 0; k < s->n_targets; k++) fprintf(o, "%s%s", k ? "," : "", s->targets[k]);
            fprintf(o, " tuple=%d type=", s->is_tuple);
            put_type(o, s->type);
            fputc('\n', o);
        }
        dump_expr(o, s->value, d + 1);
        return;
    case OX_TS_EXPR:
        fprintf(o, "expr L%d\n", s->line);
        dump_expr(o, s->value, d + 1);
        return;
    case OX_TS_RETURN:
        fprintf(o, "return L%d\n", s->line);
        if (s->value) dump_expr(o, s->value, d + 1);
        return;
    case OX_TS_PASS: fprintf(o, "pass L%d\n", s->line); return;
    case OX_TS_BREAK: fprintf(o, "break L%d\n", s->line); return;
    case OX_TS_CONTINUE: fprintf(o, "continue L%d\n", s->line); return;
    case OX_TS_IF:
        fprintf(o, "if L%d\n", s->line);
        dump_expr(o, s->value, d + 1);
        dump_block(o, "body", &s->body, d + 1);
        if (s->orelse.n) dump_block(o, "else", &s->orelse, d + 1);
        return;
    case OX_TS_FOR:
        fprintf(o, "for L%d %s\n", s->line, s->targets[0]);
        dump_expr(o, s->value, d + 1);
        dump_block(o, "body", &s->body, d + 1);
        return;
    case OX_TS_WHILE:
        fprintf(o, "while L%d\n", s->line);
        dump_expr(o, s->value, d + 1);
        dump_block(o, "body", &s->body, d + 1);
        return;
    case OX_TS_ASSERT:
        fprintf(o, "assert L%d msg=%d\n", s->line, s->msg != NULL);
        dump_expr(o, s->value, d + 1);
        if (s->msg) dump_expr(o, s->msg, d + 1);
        return;
    case OX_TS_RAISE:
        fprintf(o, "raise L%d\n", s->line);
        if (s->value) dump_expr(o, s->value, d + 1);
        return;
    }
    fprintf(o, "?\n");
}

static void dump_block(FILE *o, const char *what, const struct ox_ts_block *b, int d) {
    indent(o, d);
    fprintf(o, "%s n=%d\n", what, b->n);
    for (int k = 0; k < b->n; k++) dump_stmt(o, b->stmts[k], d + 1);
}

static void dump_func(FILE *o, const struct ox_ts_func *f, int d) {
    indent(o, d);
    fprintf(o, "def %s L%d ret=", f->name, f->line);
    put_type(o, f->ret);
    fputc('\n', o);
    for (int k = 0; k < f->n_params; k++) {
        indent(o, d + 1);
        fprintf(o, "param %s : ", f->params[k].name);
        put_type(o, f->params[k].type);
        fputc('\n', o);
        if (f->params[k].dflt) dump_expr(o, f->params[k].dflt, d + 2);
    }
    dump_block(o, "body", &f->body, d + 1);
}

static void dump_names(FILE *o, const char *what, int n, const char **names, int d) {
    if (!n) return;
    indent(o, d);
    fprintf(o, "%s ", what);
    for (int k = 0; k < n; k++) {
        if (k) fputc(',', o);
        put_str(o, names[k], strlen(names[k]));
    }
    fputc('\n', o);
}

static void dump_file(FILE *o, const struct ox_ts_file *f) {
    for (int c = 0; c < f->n_classes; c++) {
        const struct ox_ts_class *k = f->classes[c];
        indent(o, 0);
        fprintf(o, "class %s base=%s L%d\n", k->name, k->base ? k->base : "-", k->line);
        dump_names(o, "parameters", k->n_parameters, k->parameters, 1);
        dump_names(o, "buffers", k->n_buffers, k->buffers, 1);
        for (int s = 0; s < k->n_slots; s++) {
            indent(o, 1);
            fputs("slot ", o);
            put_str(o, k->slots[s].name, strlen(k->slots[s].name));
            fputs(" : ", o);
            put_type(o, k->slots[s].type);
            fputc('\n', o);
            if (k->slots[s].value) dump_expr(o, k->slots[s].value, 2);
        }
        for (int m = 0; m < k->n_methods; m++) dump_func(o, k->methods[m], 1);
    }
    for (int k = 0; k < f->n_funcs; k++) dump_func(o, f->funcs[k], 0);
    for (int k = 0; k < f->body.n; k++) dump_stmt(o, f->body.stmts[k], 0);
}

static int dump_files(int n, char **paths) {
    int n_err = 0;
    for (int k = 0; k < n; k++) {
        printf("file %s\n", paths[k]);
        FILE *fp = fopen(paths[k], "rb");
        if (!fp) {
            printf("error cannot open\n");
            n_err++;
            continue;
        }
        size_t cap = 1 << 16, len = 0;
        char *buf = malloc(cap);
        size_t got;
        while (buf && (got = fread(buf + len, 1, cap - len, fp)) > 0) {
            len += got;
            if (len == cap) buf = realloc(buf, cap *= 2);
        }
        fclose(fp);
        if (!buf) return 2;
        struct ox_arena a = {0};
        struct ox_ts_file *f;
        if (ox_ts_parse(buf, len, paths[k], &a, &f) == OX_OK) {
            dump_file(stdout, f);
        } else {
            printf("error %s\n", ox_errmsg());
            n_err++;
        }
        ox_arena_free(&a);
        free(buf);
    }
    fprintf(stderr, "%d files, %d nodes, %d failed\n", n, n_nodes, n_err);
    return n_err != 0;
}

/* ---- unit checks ----------------------------------------------------------------------- */

static struct ox_arena arena;

/* Parses src (copied into a buffer of exactly its length, so that ASan sees any read past
 * the end) and returns the file, or NULL with the message in ox_errmsg(). */
static struct ox_ts_file *parse(const char *src) {
    size_t n = strlen(src);
    char *copy = malloc(n ? n : 1);
    if (!copy) exit(2);
    memcpy(copy, src, n);
    struct ox_ts_file *f;
    ox_status st = ox_ts_parse(copy, n, "t.py", &arena, &f);
    free(copy);
    return st == OX_OK ? f : NULL;
}

/* The dump of src, in a static buffer ("" on failure). */
static const char *dumped(const char *src) {
    static char out[1 << 16];
    struct ox_ts_file *f = parse(src);
    out[0] = 0;
    if (!f) return out;
    FILE *o = fmemopen(out, sizeof out, "w");
    if (!o) exit(2);
    dump_file(o, f);
    fclose(o);
    return out;
}

/* src parses and dumps exactly as `want`. */
#define DUMPS(src, want)                                                                           \
    do {                                                                                           \
        const char *got_ = dumped(src);                                                            \
        CHECK(strcmp(got_, want) == 0, "dump of %s\n--- got:\n%s--- want:\n%s--- (%s)", #src,      \
              got_, want, ox_errmsg());                                                            \
    } while (0)

/* src fails with `code`, and the message holds `t.py:LINE:` and each of the words. */
static void fails(int src_line, const char *src, ox_status code, int line, const char *w1,
                  const char *w2) {
    size_t n = strlen(src);
    char *copy = malloc(n ? n : 1);
    if (!copy) exit(2);
    memcpy(copy, src, n);
    struct ox_ts_file *f = (void *)1;
    ox_status st = ox_ts_parse(copy, n, "t.py", &arena, &f);
    free(copy);
    char where[32];
    snprintf(where, sizeof where, "t.py:%d: ", line);
    const char *m = ox_errmsg();
    n_checks++;
    if (st != code || f != NULL || strncmp(m, where, strlen(where)) != 0 ||
        (w1 && !strstr(m, w1)) || (w2 && !strstr(m, w2))) {
        n_fail++;
        printf("FAIL %s:%d: status %d (want %d), message \"%s\" (want \"%s\" with \"%s\" and "
               "\"%s\")\n",
               __FILE__, src_line, st, code, st ? m : "", where, w1 ? w1 : "", w2 ? w2 : "");
    }
}

#define FAILS(src, code, line, w1, w2) fails(__LINE__, src, code, line, w1, w2)

static void test_classes(void) {
    DUMPS("class Conv2d(Module):\n"
          "  __parameters__ = [\"weight\", \"bias\", ]\n"
          "  __buffers__ = []\n"
          "  weight : Tensor\n"
          "  bias : Optional[Tensor]\n"
          "  stride : Final[Tuple[int, int]] = (1, 1)\n"
          "  __annotations__[\"0\"] = __torch__.torch.nn.modules.conv.___torch_mangle_3.Conv2d\n"
          "  def forward(self: __torch__.a.Conv2d,\n"
          "    input: Tensor) -> Tensor:\n"
          "    return input\n",
          "class Conv2d base=Module L1\n"
          " parameters \"weight\",\"bias\"\n"
          " slot \"weight\" : Tensor\n"
          " slot \"bias\" : Optional[Tensor]\n"
          " slot \"stride\" : Final[Tuple[int,int]]\n"
          "  tuple L6 n=2\n"
          "   int L6 1\n"
          "   int L6 1\n"
          " slot \"0\" : __torch__.torch.nn.modules.conv.___torch_mangle_3.Conv2d\n"
          " def forward L8 ret=Tensor\n"
          "  param self : __torch__.a.Conv2d\n"
          "  param input : Tensor\n"
          "  body n=1\n"
          "   return L10\n"
          "    name L10 input\n");
    /* every type, defaults, no annotations, an empty class, Enum-like and NamedTuple bodies */
    DUMPS("class E(Enum):\n  A = 1\n  B = \"x\"\n"
          "class P(NamedTuple):\n  data : Tensor\n  d : Dict[str, List[Tuple[()]]]\n"
          "class Q(Module): pass\n"
          "class R:\n  pass\n"
          "def f(x, y: Any=None, z: Device=\"cpu\", w: Union[int, NoneType]=-1,\n"
          "      v: str='a', u: bool=False, t: float=-inf,):\n  pass\n",
          "class E base=Enum L1\n"
          " slot \"A\" : -\n  int L2 1\n"
          " slot \"B\" : -\n  str L3 \"x\"\n"
          "class P base=NamedTuple L4\n"
          " slot \"data\" : Tensor\n"
          " slot \"d\" : Dict[str,List[Tuple[]]]\n"
          "class Q base=Module L7\n"
          "class R base=- L8\n"
          "def f L10 ret=-\n"
          " param x : -\n"
          " param y : Any\n  none L10\n"
          " param z : Device\n  str L10 \"cpu\"\n"
          " param w : Union[int,NoneType]\n  int L10 -1\n"
          " param v : str\n  str L11 \"a\"\n"
          " param u : bool\n  bool L11 0\n"
          " param t : float\n  float L11 -inf\n"
          " body n=1\n  pass L12\n");
    struct ox_ts_file *f = parse("class A(Module):\n  def forward(self):\n    pass\n"
                                 "  def forward1(self):\n    pass\n"
                                 "class B(Module):\n  pass\n"
                                 "def g():\n  pass\n");
    EXPECT(f != NULL);
    if (f) {
        const struct ox_ts_class *a = ox_ts_find_class(f, "A");
        CHECK(a && ox_ts_find_class(f, "B") && !ox_ts_find_class(f, "C"), "find_class");
        CHECK(a && ox_ts_find_method(a, "forward1") == a->methods[1] &&
                  !ox_ts_find_method(a, "forward2"),
              "find_method");
        CHECK(ox_ts_find_func(f, "g") == f->funcs[0] && !ox_ts_find_func(f, "forward"),
              "find_func");
        CHECK(!ox_ts_find_class(NULL, "A") && !ox_ts_find_method(NULL, "f") &&
                  !ox_ts_find_func(NULL, "g"),
              "lookups on NULL");
    }
}

static void test_statements(void) {
    DUMPS("def f(x: Tensor) -> Tuple[Tensor, int]:\n"
          "  a = x\n"
          "  q, k, v, = torch.chunk(x, 3, -1)\n"
          "  b, c = a, x\n"
          "  d, = g(x)\n"
          "  self.num_batches_tracked = d\n"
          "  l[0] = 1\n"
          "  m : Optional[Tensor] = None\n"
          "  torch.append(l, a)\n"
          "  return (a, 1)\n",
          "def f L1 ret=Tuple[Tensor,int]\n"
          " param x : Tensor\n"
          " body n=9\n"
          "  assign L2 names=a tuple=0 type=-\n   name L2 x\n"
          "  assign L3 names=q,k,v tuple=1 type=-\n"
          "   call L3 n=3 kw=\n    attr L3 chunk\n     name L3 torch\n    name L3 x\n"
          "    int L3 3\n    int L3 -1\n"
          "  assign L4 names=b,c tuple=1 type=-\n   tuple L4 n=2\n    name L4 a\n    name L4 x\n"
          "  assign L5 names=d tuple=1 type=-\n   call L5 n=1 kw=\n    name L5 g\n    name L5 x\n"
          "  assign L6 target type=-\n   attr L6 num_batches_tracked\n    name L6 self\n"
          "   name L6 d\n"
          "  assign L7 target type=-\n   subscript L7\n    name L7 l\n    int L7 0\n"
          "   int L7 1\n"
          "  assign L8 names=m tuple=0 type=Optional[Tensor]\n   none L8\n"
          "  expr L9\n   call L9 n=2 kw=\n    attr L9 append\n     name L9 torch\n"
          "    name L9 l\n    name L9 a\n"
          "  return L10\n   tuple L10 n=2\n    name L10 a\n    int L10 1\n");
    DUMPS("def f(x):\n"
          "  if x:\n    pass\n"
          "  elif y:\n    return\n"
          "  elif z: return 1, 2\n"
          "  else:\n    raise\n"
          "  for i in range(3):\n    continue\n"
          "  while c:\n    break\n"
          "  assert x\n"
          "  assert x, \"msg\"\n"
          "  raise ValueError(\"v\")\n",
          "def f L1 ret=-\n param x : -\n body n=6\n"
          "  if L2\n   name L2 x\n   body n=1\n    pass L3\n   else n=1\n"
          "    if L4\n     name L4 y\n     body n=1\n      return L5\n     else n=1\n"
          "      if L6\n       name L6 z\n       body n=1\n        return L6\n"
          "         tuple L6 n=2\n          int L6 1\n          int L6 2\n"
          "       else n=1\n        raise L8\n"
          "  for L9 i\n   call L9 n=1 kw=\n    name L9 range\n    int L9 3\n"
          "   body n=1\n    continue L10\n"
          "  while L11\n   name L11 c\n   body n=1\n    break L12\n"
          "  assert L13 msg=0\n   name L13 x\n"
          "  assert L14 msg=1\n   name L14 x\n   str L14 \"msg\"\n"
          "  raise L15\n   call L15 n=1 kw=\n    name L15 ValueError\n    str L15 \"v\"\n");
    /* top-level statements of older producers; comments, blank lines, continuation */
    DUMPS("op_version_set = 1\n\n# a comment\n"
          "def f():  # trailing\n"
          "\n"
          "     \n"
          "  x = \\\n    1\n"
          "  return x\n",
          "def f L4 ret=-\n body n=2\n  assign L7 names=x tuple=0 type=-\n   int L8 1\n"
          "  return L9\n   name L9 x\n"
          "assign L1 names=op_version_set tuple=0 type=-\n int L1 1\n");
}

static void test_expressions(void) {
    DUMPS("x = torch.div(a, CONSTANTS.c0, rounding_mode=\"trunc\", )\n",
          "assign L1 names=x tuple=0 type=-\n"
          " call L1 n=3 kw=rounding_mode\n  attr L1 div\n   name L1 torch\n  name L1 a\n"
          "  attr L1 c0\n   name L1 CONSTANTS\n  str L1 \"trunc\"\n");
    /* the "(" of a parenthesised callee gives the call its line; arguments over lines */
    DUMPS("y = (\n  lin).forward(x,\n  )\n",
          "assign L1 names=y tuple=0 type=-\n"
          " call L1 n=1 kw=\n  attr L1 forward\n   name L2 lin\n  name L2 x\n");
    DUMPS("x = [1., 2, -3.5, 1.0000000000000001e-05, 0x10, 0o17, 0b101, .5, 1e3, -nan]\n",
          "assign L1 names=x tuple=0 type=-\n list L1 n=10\n  float L1 1\n  int L1 2\n"
          "  float L1 -3.5\n  float L1 1.0000000000000001e-05\n  int L1 16\n  int L1 15\n"
          "  int L1 5\n  float L1 0.5\n  float L1 1000\n  float L1 nan\n");
    DUMPS("x = (9223372036854775807, -9223372036854775808, - -4, -y, -(x.a), -True)\n",
          "assign L1 names=x tuple=0 type=-\n tuple L1 n=6\n  int L1 9223372036854775807\n"
          "  int L1 -9223372036854775808\n  int L1 4\n  neg L1\n   name L1 y\n"
          "  neg L1\n   attr L1 a\n    name L1 x\n  neg L1\n   bool L1 1\n");
    DUMPS("x = ((), (a,), (a, b,), [], {}, {\"k\": 1, 2: [3]}, d[\"a\"], (t)[1], s[-1])\n",
          "assign L1 names=x tuple=0 type=-\n tuple L1 n=9\n  tuple L1 n=0\n"
          "  tuple L1 n=1\n   name L1 a\n  tuple L1 n=2\n   name L1 a\n   name L1 b\n"
          "  list L1 n=0\n  dict L1 n=0\n"
          "  dict L1 n=2\n   str L1 \"k\"\n   int L1 1\n   int L1 2\n   list L1 n=1\n    int L1 3\n"
          "  subscript L1\n   name L1 d\n   str L1 \"a\"\n"
          "  subscript L1\n   name L1 t\n   int L1 1\n"
          "  subscript L1\n   name L1 s\n   int L1 -1\n");
    DUMPS("x = annotate(Dict[str, List[Tensor]], {})\n",
          "assign L1 names=x tuple=0 type=-\n call L1 n=2 kw=\n  name L1 annotate\n"
          "  subscript L1\n   name L1 Dict\n   tuple L1 n=2\n    name L1 str\n"
          "    subscript L1\n     name L1 List\n     name L1 Tensor\n  dict L1 n=0\n");
    /* strings: both quotes, escapes as Python decodes them, adjacent literals, raw, triple */
    DUMPS("s = (\"q\\n\\\"x\", 'it\\'s', \"\\t\\\\\\x41\\101\\0\\u00e9\\U0001F600\\q\", \"a\" 'b',"
          " r\"\\n\", \"\"\"l1\nl2\"\"\", \"caf\xc3\xa9\", \"\\\nz\", \"\\777\")\n",
          "assign L1 names=s tuple=0 type=-\n tuple L1 n=9\n  str L1 \"q\\x0a\\\"x\"\n"
          "  str L1 \"it's\"\n  str L1 \"\\x09\\\\AA\\x00\\xc3\\xa9\\xf0\\x9f\\x98\\x80\\\\q\"\n"
          "  str L1 \"ab\"\n  str L1 \"\\\\n\"\n  str L1 \"l1\\x0al2\"\n"
          "  str L2 \"caf\\xc3\\xa9\"\n  str L2 \"z\"\n  str L3 \"\\xc7\\xbf\"\n");
    struct ox_ts_file *f = parse("x = \"a\\x00b\"\n");
    CHECK(f && f->body.stmts[0]->value->s_len == 3 && f->body.stmts[0]->value->s[1] == 0,
          "a string keeps its NUL byte");
    /* CRLF line ends, a BOM, no newline at the end, tabs between tokens */
    DUMPS("\xef\xbb\xbf"
          "def f(x):\r\n  if x:\r\n    return\tx\r\n  return 1",
          "def f L1 ret=-\n param x : -\n body n=2\n  if L2\n   name L2 x\n   body n=1\n"
          "    return L3\n     name L3 x\n  return L4\n   int L4 1\n");
    DUMPS("", "");
    DUMPS("\n\n# only a comment", "");
}

static void test_types(void) {
    struct ox_ts_file *f = parse("def f(a: Tuple[()], b: Optional[List[__torch__.x.C]],\n"
                                 "      c: Dict[int, Final[float]], d: NoneType, e: None) -> "
                                 "Union[Tensor, str]:\n  pass\n");
    EXPECT(f != NULL);
    if (!f) return;
    const struct ox_ts_func *fn = f->funcs[0];
    CHECK(fn->params[0].type->kind == OX_TT_TUPLE && fn->params[0].type->n_args == 0, "Tuple[()]");
    const struct ox_ts_type *b = fn->params[1].type;
    CHECK(b->kind == OX_TT_OPTIONAL && b->args[0]->kind == OX_TT_LIST &&
              b->args[0]->args[0]->kind == OX_TT_CLASS &&
              !strcmp(b->args[0]->args[0]->name, "__torch__.x.C"),
          "Optional[List[class]]");
    const struct ox_ts_type *c = fn->params[2].type;
    CHECK(c->kind == OX_TT_DICT && c->n_args == 2 && c->args[0]->kind == OX_TT_INT &&
              c->args[1]->kind == OX_TT_FINAL && c->args[1]->args[0]->kind == OX_TT_FLOAT,
          "Dict[int, Final[float]]");
    CHECK(fn->params[3].type->kind == OX_TT_NONE && fn->params[4].type->kind == OX_TT_NONE,
          "NoneType and None");
    CHECK(fn->ret->kind == OX_TT_UNION && fn->ret->n_args == 2, "Union");
    /* a type written as an expression (annotate's first argument) */
    f = parse("x = annotate(List[Tuple[int, Tensor]], [])\n");
    struct ox_ts_type *t = NULL;
    EXPECT(f && ox_ts_expr_type(f->body.stmts[0]->value->args[0], "t.py", &arena, &t) == OX_OK);
    CHECK(t && t->kind == OX_TT_LIST && t->args[0]->kind == OX_TT_TUPLE &&
              t->args[0]->n_args == 2 && t->args[0]->args[1]->kind == OX_TT_TENSOR,
          "ox_ts_expr_type");
    f = parse("x = annotate(torch.add(a), [])\n");
    CHECK(f &&
              ox_ts_expr_type(f->body.stmts[0]->value->args[0], "t.py", &arena, &t) == OX_E_INVALID,
          "not a type");
}

static void test_errors(void) {
    /* Python outside the subset: OX_E_UNSUPPORTED, naming the construct, quoting the token */
    FAILS("def f(a):\n  return a + 1\n", OX_E_UNSUPPORTED, 2, "infix operator", "'+'");
    FAILS("def f(a):\n  x = a - b\n", OX_E_UNSUPPORTED, 2, "infix operator", "'-'");
    FAILS("def f(a):\n  x = torch.add(a,\n   b < c)\n", OX_E_UNSUPPORTED, 3, "infix", "'<'");
    FAILS("def f(a):\n  x = a == b\n", OX_E_UNSUPPORTED, 2, "infix", "'=='");
    FAILS("def f(a):\n  x = a and b\n", OX_E_UNSUPPORTED, 2, "boolean operator", "'and'");
    FAILS("def f(a):\n  x = not a\n", OX_E_UNSUPPORTED, 2, "'not' operator", "'not'");
    FAILS("def f(a):\n  x = a if b else c\n", OX_E_UNSUPPORTED, 2, "conditional expression",
          "'if'");
    FAILS("def f(a):\n  x = a is None\n", OX_E_UNSUPPORTED, 2, "operator 'is'", NULL);
    FAILS("def f(a):\n  x = lambda y: y\n", OX_E_UNSUPPORTED, 2, "lambda", "'lambda'");
    FAILS("@torch.jit.export\ndef f(a):\n  pass\n", OX_E_UNSUPPORTED, 1, "decorator", "'@'");
    FAILS("class A(Module):\n  @property\n  def f(self):\n    pass\n", OX_E_UNSUPPORTED, 2,
          "decorator", "'@'");
    FAILS("import torch\n", OX_E_UNSUPPORTED, 1, "import", "'import'");
    FAILS("from torch import nn\n", OX_E_UNSUPPORTED, 1, "from", NULL);
    FAILS("def f(a):\n  return a[1:2]\n", OX_E_UNSUPPORTED, 2, "slicing", "':'");
    FAILS("def f(a):\n  return a[:]\n", OX_E_UNSUPPORTED, 2, "slicing", "':'");
    FAILS("def f(a):\n  return [x for x in a]\n", OX_E_UNSUPPORTED, 2, "comprehension", "'for'");
    FAILS("def f(a):\n  return f(x for x in a)\n", OX_E_UNSUPPORTED, 2, "comprehension", NULL);
    FAILS("def f(a):\n  with a:\n    pass\n", OX_E_UNSUPPORTED, 2, "'with' statement", "'with'");
    FAILS("def f(a):\n  try:\n    pass\n", OX_E_UNSUPPORTED, 2, "'try' statement", "'try'");
    FAILS("def f(a):\n  global g\n", OX_E_UNSUPPORTED, 2, "'global' statement", NULL);
    FAILS("def f(a):\n  del a\n", OX_E_UNSUPPORTED, 2, "'del' statement", NULL);
    FAILS("def f(a):\n  return f\"{a}\"\n", OX_E_UNSUPPORTED, 2, "f-string", "'f\"'");
    FAILS("def f(a):\n  return b'x'\n", OX_E_UNSUPPORTED, 2, "bytes literal", NULL);
    FAILS("def f(a):\n  a += 1\n", OX_E_UNSUPPORTED, 2, "augmented assignment", "'+='");
    FAILS("def f(a):\n  a = b = 1\n", OX_E_UNSUPPORTED, 2, "chained assignment", NULL);
    FAILS("def f(a):\n  x = 1; y = 2\n", OX_E_UNSUPPORTED, 2, "';'", NULL);
    FAILS("def f(a):\n  return g(*a)\n", OX_E_UNSUPPORTED, 2, "unpacking", "'*'");
    FAILS("def f(*a):\n  pass\n", OX_E_UNSUPPORTED, 1, "parameter marker", "'*'");
    FAILS("def f(a):\n  def g():\n    pass\n", OX_E_UNSUPPORTED, 2, "nested function", NULL);
    FAILS("def f(a):\n  x = {1, 2}\n", OX_E_UNSUPPORTED, 2, "set literal", NULL);
    FAILS("def f(a):\n  x = a[...]\n", OX_E_UNSUPPORTED, 2, "Ellipsis", NULL);
    FAILS("def f(a):\n  x = ~a\n", OX_E_UNSUPPORTED, 2, "unary operator", "'~'");
    FAILS("def f(a):\n  a.b, c = 1, 2\n", OX_E_UNSUPPORTED, 2, "unpacking", NULL);
    FAILS("def f(a):\n  for i, j in x:\n    pass\n", OX_E_UNSUPPORTED, 2, "several targets", NULL);
    FAILS("def f(a):\n  for i in x:\n    pass\n  else:\n    pass\n", OX_E_UNSUPPORTED, 4,
          "'else' after a for loop", NULL);
    FAILS("def f(a):\n  raise A from B\n", OX_E_UNSUPPORTED, 2, "from", NULL);
    FAILS("x = 9223372036854775808\n", OX_E_UNSUPPORTED, 1, "64 bits", "9223372036854775808");
    FAILS("x = 99999999999999999999\n", OX_E_UNSUPPORTED, 1, "64 bits", NULL);
    FAILS("x = - -9223372036854775808\n", OX_E_UNSUPPORTED, 1, "64 bits", NULL);
    FAILS("def f(a):\n\tpass\n", OX_E_UNSUPPORTED, 2, "tab", "indentation");
    FAILS("def f(x: Foo[int]):\n  pass\n", OX_E_UNSUPPORTED, 1, "'Foo'", "no arguments");
    FAILS("x = \"\\N{DASH}\"\n", OX_E_UNSUPPORTED, 1, "\\N{", NULL);
    FAILS("class A(B, C):\n  pass\n", OX_E_UNSUPPORTED, 1, "several base classes", NULL);
    /* not Python at all: OX_E_INVALID */
    FAILS("def f(a):\n    x = 1\n  y = 2\n", OX_E_INVALID, 3, "unindent", NULL);
    FAILS("def f(a):\n  x = 1\n    y = 2\n", OX_E_INVALID, 3, "unexpected indent", NULL);
    FAILS("  x = 1\n", OX_E_INVALID, 1, "unexpected indent", NULL);
    FAILS("def f(a):\nx = 1\n", OX_E_INVALID, 2, "indented block", NULL);
    FAILS("def f(a):\n  x = g(a,\n  b\n", OX_E_INVALID, 2, "'(' was never closed", NULL);
    FAILS("x = (1]\n", OX_E_INVALID, 1, "']' does not match '('", NULL);
    FAILS("x = 1)\n", OX_E_INVALID, 1, "unmatched ')'", NULL);
    FAILS("x = \"abc\n", OX_E_INVALID, 1, "unterminated string", NULL);
    FAILS("x = \"\"\"abc\n\n", OX_E_INVALID, 1, "unterminated string", NULL);
    FAILS("x = '\\x4'\n", OX_E_INVALID, 1, "truncated \\x", NULL);
    FAILS("x = \"\\U00110000\"\n", OX_E_INVALID, 1, "U+10FFFF", NULL);
    FAILS("x = 1 \\ 2\n", OX_E_INVALID, 1, "backslash", NULL);
    FAILS("x = 1 \\", OX_E_INVALID, 1, "backslash", NULL);
    FAILS("x = 1\\\n", OX_E_INVALID, 1, "end of file", NULL);
    FAILS("x = $\n", OX_E_INVALID, 1, "unexpected character", "'$'");
    FAILS("\n\nx = \x01\n", OX_E_INVALID, 3, "unexpected character", "\\x01");
    FAILS("x = caf\xc3\xa9\n", OX_E_INVALID, 1, "non-ASCII", NULL);
    FAILS("x = \"\xff\"\n", OX_E_INVALID, 1, "invalid UTF-8", "0xff");
    FAILS("x = \"\xed\xa0\x80\"\n", OX_E_INVALID, 1, "invalid UTF-8", NULL);
    FAILS("x = 0123\n", OX_E_INVALID, 1, "leading zeros", NULL);
    FAILS("x = 1_000\n", OX_E_INVALID, 1, "invalid number literal", "'1_000'");
    FAILS("x = 1j\n", OX_E_INVALID, 1, "invalid number literal", "'1j'");
    FAILS("x = 0x\n", OX_E_INVALID, 1, "no digits", NULL);
    FAILS("def f(a):\n  return g(a=1, 2)\n", OX_E_INVALID, 2, "positional argument after", NULL);
    FAILS("def f(a):\n  return g(a.b=1)\n", OX_E_INVALID, 2, "keyword argument", NULL);
    FAILS("def f(a=1, b):\n  pass\n", OX_E_INVALID, 1, "without a default", NULL);
    FAILS("def f(a):\n  return a[]\n", OX_E_INVALID, 2, "empty subscript", NULL);
    FAILS("def f(a):\n  else:\n    pass\n", OX_E_INVALID, 2, "without a matching 'if'", NULL);
    FAILS("def f(a):\n  g(a) = 1\n", OX_E_INVALID, 2, "cannot assign", NULL);
    FAILS("def f(a):\n  x = \n", OX_E_INVALID, 2, "expected an expression", "end of line");
    FAILS("def f(a):\n  x = a b\n", OX_E_INVALID, 2, "expected the end of the line", "'b'");
    FAILS("def f(a):\n  x = a.1\n", OX_E_INVALID, 2, "expected the end of the line", "'.1'");
    FAILS("def (a):\n  pass\n", OX_E_INVALID, 1, "function name", "'('");
    FAILS("class A(Module):\n  __parameters__ = [1]\n", OX_E_INVALID, 2, "__parameters__",
          "list of strings");
    FAILS("class A(Module):\n  __buffers__ = []\n  __buffers__ = []\n", OX_E_INVALID, 3,
          "__buffers__ given twice", NULL);
    FAILS("class A(Module):\n  x\n", OX_E_INVALID, 2, "':' or '='", NULL);
    FAILS("def f(x: Optional[int, str]):\n  pass\n", OX_E_INVALID, 1, "'Optional' takes 1",
          "found 2");
    FAILS("def f(x: List):\n  pass\n", OX_E_INVALID, 1, "'List' needs", NULL);
    FAILS("def f(x: 3):\n  pass\n", OX_E_INVALID, 1, "expected a type", NULL);
    FAILS("x = g(if=1)\n", OX_E_INVALID, 1, "keyword", "'if'");
}

/* A growing test source: src_k characters of src so far. */
static char src[1 << 20];
static size_t src_k;

__attribute__((format(printf, 1, 2))) static void add(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(src + src_k, sizeof src - src_k, fmt, ap);
    va_end(ap);
    if (m < 0 || (size_t)m >= sizeof src - src_k) {
        printf("test source too long\n");
        exit(2);
    }
    src_k += (size_t)m;
}

static void add_n(int n, const char *s) {
    for (int j = 0; j < n; j++) add("%s", s);
}

/* Depth bounds: nested brackets, unary minus, attribute/call chains and blocks past
 * OX_TS_MAX_DEPTH fail cleanly; just inside the bound parses. */
static void test_limits(void) {
    int n = OX_TS_MAX_DEPTH + 5;
    src_k = 0;
    add("x = ");
    add_n(n, "[");
    add_n(n, "]");
    add("\n");
    FAILS(src, OX_E_UNSUPPORTED, 1, "deeper than 200", NULL);
    src_k = 0;
    add("x = ");
    add_n(100000, "-");
    add("1\n");
    FAILS(src, OX_E_UNSUPPORTED, 1, "deeper than 200", NULL);
    src_k = 0;
    add("x = a");
    for (int j = 0; j < 100000; j++) add("%s", j % 3 ? ".b" : j % 2 ? "()" : "[0]");
    add("\n");
    FAILS(src, OX_E_UNSUPPORTED, 1, "deeper than 200", NULL);
    src_k = 0;
    for (int j = 0; j < n; j++) {
        add_n(j, " ");
        add("if x:\n");
    }
    FAILS(src, OX_E_UNSUPPORTED, OX_TS_MAX_DEPTH + 2, "more than 200 indentation levels", NULL);
    src_k = 0;
    add("if x:\n  pass\n");
    add_n(300, "elif x:\n  pass\n");
    FAILS(src, OX_E_UNSUPPORTED, 2 * OX_TS_MAX_DEPTH + 1, "deeper than 200", NULL);
    src_k = 0;
    add("x = ");
    add_n(60, "(");
    add("1");
    add_n(60, ")");
    add("\n");
    CHECK(parse(src) != NULL, "60 nested parentheses parse (%s)", ox_errmsg());
    /* a long flat file and a long flat list are fine */
    src_k = 0;
    add("def f(x):\n");
    for (int j = 0; j < 20000; j++) add("  x = torch.add(x, %d)\n", j);
    struct ox_ts_file *f = parse(src);
    CHECK(f && f->funcs[0]->body.n == 20000 && f->funcs[0]->body.stmts[19999]->line == 20001,
          "20000 statements");
    src_k = 0;
    add("x = [");
    for (int j = 0; j < 50000; j++) add("%d, ", j);
    add("]\n");
    f = parse(src);
    CHECK(f && f->body.stmts[0]->value->n_args == 50000 &&
              f->body.stmts[0]->value->args[49999]->i == 49999,
          "a list of 50000");
    /* every prefix of a real snippet: no crash, no read past the end (under ASan) */
    const char *real = "class C(Module):\n  __parameters__ = [\"w\", ]\n  w : Tensor\n"
                       "  def forward(self: __torch__.C,\n    x: Tensor) -> Tensor:\n"
                       "    _0 = \"a\\n\\x41\"\n    if bool(x):\n      y = -1.5e-05\n"
                       "    else:\n      y = (x).f(x, k=[1, 2], )[0]\n    return y\n";
    int n_ok = 0;
    for (size_t len = 0; len <= strlen(real); len++) {
        char *copy = malloc(len ? len : 1);
        if (!copy) exit(2);
        memcpy(copy, real, len);
        struct ox_ts_file *g;
        n_ok += ox_ts_parse(copy, len, "t.py", &arena, &g) == OX_OK;
        free(copy);
    }
    CHECK(n_ok > 5, "some prefixes parse (%d)", n_ok);
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--dump")) return dump_files(argc - 2, argv + 2);
    test_classes();
    test_statements();
    test_expressions();
    test_types();
    test_errors();
    test_limits();
    ox_arena_free(&arena);
    return harness_finish();
}
