/* TorchScript code files (ast.h, SPEC-torchscript.md §3.4): a lexer with Python's token and
 * INDENT/DEDENT rules, then a recursive-descent parser for the printed subset.
 *
 * The lexer turns the whole file into a token array first (freed before returning), so the
 * parser can look ahead freely. Python constructs outside the subset are recognised and
 * refused by name (OX_E_UNSUPPORTED); text that is not Python at all is OX_E_INVALID. Every
 * read of the source is bounded by its length: it need not be NUL-terminated.
 */
#include "importer/torchscript/ast.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bytes of one code file. Real ones are kilobytes; the bound keeps what a hostile file can
 * make us allocate (tokens, then nodes: tens of bytes per source byte at worst) in check. */
#define MAX_SRC ((size_t)32 << 20)

/* ---- tokens ---------------------------------------------------------------------------- */

typedef enum {
    T_END,
    T_NEWLINE,
    T_INDENT,
    T_DEDENT,
    T_NAME,
    T_INT,
    T_FLOAT,
    T_STRING,
    T_OP,
} tok_kind;

struct tok {
    tok_kind kind;
    int line;
    uint32_t pos, len; /* the token's text in the source (which is under MAX_SRC) */
    union {
        uint64_t u;    /* T_INT (at most 2^63: only a negated literal may use 2^63) */
        double f;      /* T_FLOAT */
        const char *s; /* T_NAME: the name; T_STRING: the decoded bytes (s_len of them) */
    };
    uint32_t s_len;
};

struct parser {
    const char *src;
    size_t len;
    const char *path;
    struct ox_arena *a;
    struct tok *toks; /* malloc'd; ends with T_END */
    size_t n_toks, cap_toks, i;
    int depth; /* nesting of blocks, expressions and types being parsed */
};

/* "<path>:<line>: <message>" */
__attribute__((format(printf, 4, 5))) static ox_status perr(const struct parser *p, int line,
                                                            ox_status code, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return ox_err(code, "%s:%d: %s", p->path, line, msg);
}

static ox_status nomem(const struct parser *p, int line) {
    return perr(p, line, OX_E_NOMEM, "out of memory");
}

/* A token for messages: its text in quotes (shortened), or what it stands for. */
static const char *tok_desc(const struct parser *p, const struct tok *t, char *buf, size_t size) {
    switch (t->kind) {
    case T_END: return "end of file";
    case T_NEWLINE: return "end of line";
    case T_INDENT: return "an indent";
    case T_DEDENT: return "a dedent";
    default: break;
    }
    size_t n = t->len > 40 ? 40 : t->len, k = 0;
    buf[k++] = '\'';
    for (size_t j = 0; j < n && k + 8 < size; j++) {
        unsigned char c = (unsigned char)p->src[t->pos + j];
        if (c >= 0x20 && c < 0x7f)
            buf[k++] = (char)c;
        else
            k += (size_t)snprintf(buf + k, size - k, "\\x%02x", c);
    }
    if (n < t->len && k + 4 < size) {
        memcpy(buf + k, "...", 3);
        k += 3;
    }
    buf[k++] = '\'';
    buf[k] = 0;
    return buf;
}

/* ---- lexer ----------------------------------------------------------------------------- */

static ox_status push_tok(struct parser *p, tok_kind kind, int line, size_t pos, size_t len,
                          struct tok **out) {
    if (p->n_toks == p->cap_toks) {
        size_t cap = p->cap_toks ? p->cap_toks * 2 : 256;
        struct tok *t = realloc(p->toks, cap * sizeof *t);
        if (!t) return nomem(p, line);
        p->toks = t;
        p->cap_toks = cap;
    }
    struct tok *t = &p->toks[p->n_toks++];
    memset(t, 0, sizeof *t);
    t->kind = kind;
    t->line = line;
    t->pos = (uint32_t)pos;
    t->len = (uint32_t)len;
    if (out) *out = t;
    return OX_OK;
}

static bool is_name_start(int c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool is_name_char(int c) {
    return is_name_start(c) || (c >= '0' && c <= '9');
}

static int hex_val(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* The length of the UTF-8 sequence at s[0..n), or 0 when it is not valid UTF-8 (overlong
 * forms and code points past U+10FFFF included; surrogates refused as Python does). */
static size_t utf8_len(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    size_t k;
    uint32_t cp, min;
    if (c < 0x80) return 1;
    if (c >= 0xc2 && c <= 0xdf)
        k = 2, cp = c & 0x1f, min = 0x80;
    else if (c >= 0xe0 && c <= 0xef)
        k = 3, cp = c & 0x0f, min = 0x800;
    else if (c >= 0xf0 && c <= 0xf4)
        k = 4, cp = c & 0x07, min = 0x10000;
    else
        return 0;
    if (n < k) return 0;
    for (size_t j = 1; j < k; j++) {
        if ((s[j] & 0xc0) != 0x80) return 0;
        cp = cp << 6 | (s[j] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    return k;
}

/* Code point to UTF-8 (lone surrogates as three bytes, as Python's surrogatepass). */
static size_t put_utf8(char *d, uint32_t cp) {
    if (cp < 0x80) {
        d[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        d[0] = (char)(0xc0 | cp >> 6);
        d[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        d[0] = (char)(0xe0 | cp >> 12);
        d[1] = (char)(0x80 | (cp >> 6 & 0x3f));
        d[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    d[0] = (char)(0xf0 | cp >> 18);
    d[1] = (char)(0x80 | (cp >> 12 & 0x3f));
    d[2] = (char)(0x80 | (cp >> 6 & 0x3f));
    d[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* A string literal whose opening quote is at *pos (prefix already read: raw or not). Finds
 * the end, then decodes the escapes Python knows into a new arena string. */
static ox_status lex_string(struct parser *p, size_t start, size_t *pos, int *line, bool raw) {
    const char *s = p->src;
    size_t n = p->len, i = *pos;
    int first_line = *line;
    char q = s[i];
    bool triple = i + 2 < n && s[i + 1] == q && s[i + 2] == q;
    size_t body = i + (triple ? 3 : 1), j = body, end;
    for (;;) {
        if (j >= n) return perr(p, first_line, OX_E_INVALID, "unterminated string literal");
        char c = s[j];
        if (c == '\\') {
            if (j + 1 >= n) return perr(p, first_line, OX_E_INVALID, "unterminated string literal");
            if (s[j + 1] == '\n') (*line)++;
            if (s[j + 1] == '\r') {
                (*line)++;
                if (j + 2 < n && s[j + 2] == '\n') j++;
            }
            j += 2;
            continue;
        }
        if (c == '\n' || c == '\r') {
            if (!triple) return perr(p, first_line, OX_E_INVALID, "unterminated string literal");
            (*line)++;
            if (c == '\r' && j + 1 < n && s[j + 1] == '\n') j++;
            j++;
            continue;
        }
        if (c == q && (!triple || (j + 2 < n && s[j + 1] == q && s[j + 2] == q))) {
            end = j;
            j += triple ? 3 : 1;
            break;
        }
        j++;
    }
    /* Decoded bytes never outnumber the source bytes: "\777" is 4 for 2, "\U0010ffff" 10
     * for 4, a raw character 1 for 1. */
    char *d = ox_arena_alloc(p->a, end - body + 1);
    if (!d) return nomem(p, first_line);
    size_t k = 0;
    int ln = first_line;
    for (size_t m = body; m < end;) {
        char c = s[m];
        if (c == '\r') { /* universal newlines, as Python reads source files */
            d[k++] = '\n';
            ln++;
            m += m + 1 < end && s[m + 1] == '\n' ? 2 : 1;
            continue;
        }
        if (c == '\n') ln++;
        if (c != '\\' || raw) { /* raw: a backslash stays (it only kept a quote inside) */
            d[k++] = c;
            m++;
            continue;
        }
        char e = s[m + 1]; /* the scan above saw it: m + 1 < end */
        m += 2;
        uint32_t cp;
        switch (e) {
        case '\n': ln++; continue;
        case '\r':
            ln++;
            if (m < end && s[m] == '\n') m++;
            continue;
        case '\\': d[k++] = '\\'; continue;
        case '\'': d[k++] = '\''; continue;
        case '"': d[k++] = '"'; continue;
        case 'a': d[k++] = '\a'; continue;
        case 'b': d[k++] = '\b'; continue;
        case 'f': d[k++] = '\f'; continue;
        case 'n': d[k++] = '\n'; continue;
        case 'r': d[k++] = '\r'; continue;
        case 't': d[k++] = '\t'; continue;
        case 'v': d[k++] = '\v'; continue;
        case 'x':
        case 'u':
        case 'U': {
            int nd = e == 'x' ? 2 : e == 'u' ? 4 : 8;
            cp = 0;
            for (int h = 0; h < nd; h++) {
                int v = m < end ? hex_val((unsigned char)s[m]) : -1;
                if (v < 0)
                    return perr(p, ln, OX_E_INVALID,
                                "truncated \\%c escape in a string (%d hex digits expected)", e,
                                nd);
                cp = cp << 4 | (uint32_t)v;
                m++;
            }
            if (cp > 0x10ffff)
                return perr(p, ln, OX_E_INVALID, "escape \\U%08x is past U+10FFFF", (unsigned)cp);
            k += put_utf8(d + k, cp);
            continue;
        }
        case 'N':
            return perr(p, ln, OX_E_UNSUPPORTED,
                        "named Unicode escape '\\N{...}' is not supported");
        default:
            if (e >= '0' && e <= '7') {
                cp = (uint32_t)(e - '0');
                for (int h = 0; h < 2 && m < end && s[m] >= '0' && s[m] <= '7'; h++)
                    cp = cp * 8 + (uint32_t)(s[m++] - '0');
                k += put_utf8(d + k, cp);
                continue;
            }
            /* unknown escapes keep their backslash, as in Python */
            d[k++] = '\\';
            m--;
            continue;
        }
    }
    d[k] = 0;
    struct tok *t = NULL;
    ox_status st = push_tok(p, T_STRING, first_line, start, j - start, &t);
    if (st) return st;
    t->s = d;
    t->s_len = (uint32_t)k;
    *pos = j;
    return OX_OK;
}

static ox_status lex_number(struct parser *p, size_t *pos, int line) {
    const char *s = p->src;
    size_t n = p->len, i = *pos, start = i;
    bool is_float = false;
    uint64_t u = 0;
    bool too_big = false;
    int base = 10;
    if (s[i] == '0' && i + 1 < n && s[i + 1] && strchr("xXoObB", s[i + 1])) {
        base = s[i + 1] == 'x' || s[i + 1] == 'X' ? 16 : s[i + 1] == 'o' || s[i + 1] == 'O' ? 8 : 2;
        i += 2;
        size_t d0 = i;
        for (; i < n; i++) {
            int v = hex_val((unsigned char)s[i]);
            if (v < 0 || v >= base) break;
            if (u > (UINT64_MAX - (uint64_t)v) / (uint64_t)base) too_big = true;
            u = u * (uint64_t)base + (uint64_t)v;
        }
        if (i == d0)
            return perr(p, line, OX_E_INVALID, "invalid number literal: no digits after '0%c'",
                        s[d0 - 1]);
    } else {
        for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
            uint64_t v = (uint64_t)(s[i] - '0');
            if (u > (UINT64_MAX - v) / 10) too_big = true;
            u = u * 10 + v;
        }
        if (i < n && s[i] == '.') {
            is_float = true;
            i++;
            while (i < n && s[i] >= '0' && s[i] <= '9') i++;
        }
        if (i < n && (s[i] == 'e' || s[i] == 'E')) {
            size_t k = i + 1;
            if (k < n && (s[k] == '+' || s[k] == '-')) k++;
            if (k < n && s[k] >= '0' && s[k] <= '9') {
                is_float = true;
                i = k;
                while (i < n && s[i] >= '0' && s[i] <= '9') i++;
            }
        }
    }
    if (i < n && (is_name_char((unsigned char)s[i]) || s[i] == '.')) {
        size_t e = i + 1;
        while (e < n && is_name_char((unsigned char)s[e]) && e - start < 40) e++;
        return perr(p, line, OX_E_INVALID, "invalid number literal '%.*s'", (int)(e - start),
                    s + start);
    }
    struct tok *t = NULL;
    ox_status st = push_tok(p, is_float ? T_FLOAT : T_INT, line, start, i - start, &t);
    if (st) return st;
    if (is_float) {
        /* strtod needs a terminated copy; the digits are ASCII, so the C locale's '.' is
         * what the library sees unless the program changed LC_NUMERIC. */
        char *txt = ox_arena_strndup(p->a, s + start, i - start);
        if (!txt) return nomem(p, line);
        t->f = strtod(txt, NULL);
    } else {
        if (base == 10 && s[start] == '0')
            for (size_t k = start; k < i; k++)
                if (s[k] != '0')
                    return perr(p, line, OX_E_INVALID,
                                "leading zeros in the decimal integer '%.*s'",
                                (int)(i - start > 40 ? 40 : i - start), s + start);
        if (too_big || u > (uint64_t)1 << 63)
            return perr(p, line, OX_E_UNSUPPORTED, "integer literal '%.*s' does not fit in 64 bits",
                        (int)(i - start > 40 ? 40 : i - start), s + start);
        t->u = u;
    }
    *pos = i;
    return OX_OK;
}

/* Operators, longest first. */
static const char *const OPS[] = {
    "**=", "//=", ">>=", "<<=", "...", "->", "**", "//", "<<", ">>", "<=", ">=",
    "==",  "!=",  "+=",  "-=",  "*=",  "/=", "%=", "&=", "|=", "^=", "@=", ":=",
    "(",   ")",   "[",   "]",   "{",   "}",  ",",  ":",  ".",  ";",  "=",  "+",
    "-",   "*",   "/",   "%",   "@",   "&",  "|",  "^",  "~",  "<",  ">",
};

static ox_status lex(struct parser *p) {
    const char *s = p->src;
    size_t n = p->len, i = 0;
    int line = 1;
    int indents[OX_TS_MAX_DEPTH + 1], n_indents = 1;
    char brackets[OX_TS_MAX_DEPTH];
    int bracket_lines[OX_TS_MAX_DEPTH], n_brackets = 0;
    bool at_bol = true;
    ox_status st;
    indents[0] = 0;
    for (size_t k = 0; k < n;) { /* Python reads source files as UTF-8 */
        size_t m = utf8_len((const unsigned char *)s + k, n - k);
        if (m == 0) {
            int ln = 1;
            for (size_t j = 0; j < k; j++) ln += s[j] == '\n';
            return perr(p, ln, OX_E_INVALID, "invalid UTF-8 (byte 0x%02x)", (unsigned char)s[k]);
        }
        k += m;
    }
    if (n >= 3 && memcmp(s, "\xef\xbb\xbf", 3) == 0) i = 3;
    for (;;) {
        if (at_bol && n_brackets == 0) {
            size_t k = i;
            int col = 0;
            while (k < n && s[k] == ' ') k++, col++;
            if (k < n && (s[k] == '\t' || s[k] == '\f'))
                return perr(
                    p, line, OX_E_UNSUPPORTED,
                    "a tab or form feed in indentation is not supported (indent with spaces)");
            if (k >= n) {
                i = k;
                break;
            }
            if (s[k] == '#') {
                while (k < n && s[k] != '\n' && s[k] != '\r') k++;
            }
            if (k < n && (s[k] == '\n' || s[k] == '\r')) { /* blank line */
                k += s[k] == '\r' && k + 1 < n && s[k + 1] == '\n' ? 2 : 1;
                i = k;
                line++;
                continue;
            }
            if (k >= n) {
                i = k;
                break;
            }
            i = k;
            at_bol = false;
            if (col > indents[n_indents - 1]) {
                if (n_indents > OX_TS_MAX_DEPTH)
                    return perr(p, line, OX_E_UNSUPPORTED, "more than %d indentation levels",
                                OX_TS_MAX_DEPTH);
                indents[n_indents++] = col;
                if ((st = push_tok(p, T_INDENT, line, i, 0, NULL))) return st;
            } else {
                while (col < indents[n_indents - 1]) {
                    n_indents--;
                    if ((st = push_tok(p, T_DEDENT, line, i, 0, NULL))) return st;
                }
                if (col != indents[n_indents - 1])
                    return perr(p, line, OX_E_INVALID,
                                "unindent does not match any outer indentation level");
            }
        }
        while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\f')) i++;
        if (i >= n) break;
        unsigned char c = (unsigned char)s[i];
        if (c == '#') {
            while (i < n && s[i] != '\n' && s[i] != '\r') i++;
            continue;
        }
        if (c == '\n' || c == '\r') {
            if (n_brackets == 0) {
                if ((st = push_tok(p, T_NEWLINE, line, i, 1, NULL))) return st;
                at_bol = true;
            }
            i += c == '\r' && i + 1 < n && s[i + 1] == '\n' ? 2 : 1;
            line++;
            continue;
        }
        if (c == '\\') {
            if (i + 1 < n && (s[i + 1] == '\n' || s[i + 1] == '\r')) {
                i += s[i + 1] == '\r' && i + 2 < n && s[i + 2] == '\n' ? 3 : 2;
                line++;
                if (i >= n)
                    return perr(p, line - 1, OX_E_INVALID,
                                "unexpected end of file after a line continuation");
                continue;
            }
            return perr(p, line, OX_E_INVALID, "a backslash outside a string must end its line");
        }
        if (is_name_start(c)) {
            size_t k = i;
            while (k < n && is_name_char((unsigned char)s[k])) k++;
            if (k < n && (s[k] == '"' || s[k] == '\'') && k - i <= 2) {
                char pre[3] = {0};
                for (size_t j = i; j < k; j++) pre[j - i] = (char)(s[j] | 0x20);
                bool raw = strchr(pre, 'r') != NULL;
                if (strchr(pre, 'f'))
                    return perr(p, line, OX_E_UNSUPPORTED, "f-string '%.*s%c' is not supported",
                                (int)(k - i), s + i, s[k]);
                if (strchr(pre, 'b'))
                    return perr(p, line, OX_E_UNSUPPORTED,
                                "bytes literal '%.*s%c' is not supported", (int)(k - i), s + i,
                                s[k]);
                if (!strcmp(pre, "r") || !strcmp(pre, "u")) {
                    size_t start = i;
                    i = k;
                    if ((st = lex_string(p, start, &i, &line, raw))) return st;
                    continue;
                }
            }
            struct tok *t = NULL;
            if ((st = push_tok(p, T_NAME, line, i, k - i, &t))) return st;
            if (!(t->s = ox_arena_strndup(p->a, s + i, k - i))) return nomem(p, line);
            t->s_len = (uint32_t)(k - i);
            i = k;
            continue;
        }
        if ((c >= '0' && c <= '9') ||
            (c == '.' && i + 1 < n && s[i + 1] >= '0' && s[i + 1] <= '9')) {
            if ((st = lex_number(p, &i, line))) return st;
            continue;
        }
        if (c == '"' || c == '\'') {
            if ((st = lex_string(p, i, &i, &line, false))) return st;
            continue;
        }
        size_t op_len = 0;
        for (size_t k = 0; k < sizeof OPS / sizeof OPS[0]; k++) {
            size_t m = strlen(OPS[k]);
            if (m <= n - i && memcmp(s + i, OPS[k], m) == 0) {
                op_len = m;
                break;
            }
        }
        if (op_len == 0) {
            if (c >= 0x80)
                return perr(p, line, OX_E_INVALID, "non-ASCII character outside a string");
            if (c < 0x20 || c == 0x7f)
                return perr(p, line, OX_E_INVALID, "unexpected character '\\x%02x'", c);
            return perr(p, line, OX_E_INVALID, "unexpected character '%c'", c);
        }
        if (op_len == 1 && strchr("([{", c)) {
            if (n_brackets == OX_TS_MAX_DEPTH)
                return perr(p, line, OX_E_UNSUPPORTED, "brackets nested deeper than %d",
                            OX_TS_MAX_DEPTH);
            brackets[n_brackets] = (char)c;
            bracket_lines[n_brackets++] = line;
        } else if (op_len == 1 && strchr(")]}", c)) {
            if (n_brackets == 0) return perr(p, line, OX_E_INVALID, "unmatched '%c'", c);
            char open = brackets[--n_brackets];
            if ((open == '(') != (c == ')') || (open == '[') != (c == ']'))
                return perr(p, line, OX_E_INVALID, "closing '%c' does not match '%c' (line %d)", c,
                            open, bracket_lines[n_brackets]);
        }
        if ((st = push_tok(p, T_OP, line, i, op_len, NULL))) return st;
        i += op_len;
    }
    if (n_brackets)
        return perr(p, bracket_lines[n_brackets - 1], OX_E_INVALID, "'%c' was never closed",
                    brackets[n_brackets - 1]);
    if (p->n_toks && p->toks[p->n_toks - 1].kind != T_NEWLINE)
        if ((st = push_tok(p, T_NEWLINE, line, n, 0, NULL))) return st;
    for (; n_indents > 1; n_indents--)
        if ((st = push_tok(p, T_DEDENT, line, n, 0, NULL))) return st;
    return push_tok(p, T_END, line, n, 0, NULL);
}

/* ---- parser helpers -------------------------------------------------------------------- */

static const struct tok *peek(const struct parser *p) {
    return &p->toks[p->i];
}

static const struct tok *peek_at(const struct parser *p, size_t k) {
    size_t j = p->i + k;
    return &p->toks[j < p->n_toks ? j : p->n_toks - 1];
}

static const struct tok *next(struct parser *p) {
    const struct tok *t = &p->toks[p->i];
    if (t->kind != T_END) p->i++;
    return t;
}

static bool tok_is_op(const struct parser *p, const struct tok *t, const char *op) {
    size_t m = strlen(op);
    return t->kind == T_OP && t->len == m && memcmp(p->src + t->pos, op, m) == 0;
}

static bool is_op(const struct parser *p, const char *op) {
    return tok_is_op(p, peek(p), op);
}

static bool tok_is_name(const struct tok *t, const char *name) {
    return t->kind == T_NAME && strcmp(t->s, name) == 0;
}

static bool is_name(const struct parser *p, const char *name) {
    return tok_is_name(peek(p), name);
}

static bool accept_op(struct parser *p, const char *op) {
    if (!is_op(p, op)) return false;
    next(p);
    return true;
}

static ox_status unexpected(const struct parser *p, const struct tok *t, const char *wanted) {
    char buf[200];
    return perr(p, t->line, OX_E_INVALID, "expected %s, found %s", wanted,
                tok_desc(p, t, buf, sizeof buf));
}

static ox_status expect_op(struct parser *p, const char *op) {
    if (accept_op(p, op)) return OX_OK;
    char want[16];
    snprintf(want, sizeof want, "'%s'", op);
    return unexpected(p, peek(p), want);
}

static ox_status expect_newline(struct parser *p) {
    const struct tok *t = peek(p);
    if (t->kind == T_NEWLINE) {
        next(p);
        return OX_OK;
    }
    if (tok_is_op(p, t, ";"))
        return perr(p, t->line, OX_E_UNSUPPORTED,
                    "several statements on one line (';') are not supported");
    return unexpected(p, t, "the end of the line");
}

static ox_status enter(struct parser *p, int line) {
    if (++p->depth > OX_TS_MAX_DEPTH)
        return perr(p, line, OX_E_UNSUPPORTED, "nesting deeper than %d levels", OX_TS_MAX_DEPTH);
    return OX_OK;
}

/* Room for one more element in an arena array: doubles it (the old copy stays in the arena
 * until it is freed, so a list costs at most twice its size). */
static ox_status grow(struct parser *p, void **arr, int n, int *cap, size_t elem, int line) {
    if (n < *cap) return OX_OK;
    if (n > (1 << 28)) return perr(p, line, OX_E_NOMEM, "list of more than %d items", 1 << 28);
    int nc = *cap > 4 ? *cap : 4;
    while (nc <= n) nc *= 2;
    void *na = ox_arena_alloc(p->a, (size_t)nc * elem);
    if (!na) return nomem(p, line);
    if (n) memcpy(na, *arr, (size_t)n * elem);
    *arr = na;
    *cap = nc;
    return OX_OK;
}

#define PUSH(p, arr, n, cap, x, line)                                                              \
    do {                                                                                           \
        void *arr_ = (void *)(arr);                                                                \
        ox_status st_ = grow(p, &arr_, n, &(cap), sizeof *(arr), line);                            \
        if (st_) return st_;                                                                       \
        (arr) = arr_;                                                                              \
        (arr)[(n)++] = (x);                                                                        \
    } while (0)

#define TRY(x)                                                                                     \
    do {                                                                                           \
        ox_status st_ = (x);                                                                       \
        if (st_) return st_;                                                                       \
    } while (0)

static struct ox_ts_expr *new_expr(struct parser *p, ox_ts_expr_kind kind, int line) {
    struct ox_ts_expr *e = ox_arena_alloc(p->a, sizeof *e);
    if (e) {
        e->kind = kind;
        e->line = line;
    }
    return e;
}

/* Keywords that never name a value, with what to call them in a message. */
static const char *keyword_construct(const char *name) {
    static const char *const KW[][2] = {
        {"lambda", "lambda"},
        {"not", "the 'not' operator"},
        {"and", "the boolean operator 'and'"},
        {"or", "the boolean operator 'or'"},
        {"in", "the operator 'in'"},
        {"is", "the operator 'is'"},
        {"if", "a conditional expression"},
        {"for", "a comprehension"},
        {"async", "async"},
        {"await", "await"},
        {"yield", "yield"},
        {"import", "import"},
        {"from", "'from'"},
        {"with", "the 'with' statement"},
        {"try", "the 'try' statement"},
        {"except", "'except'"},
        {"finally", "'finally'"},
        {"global", "the 'global' statement"},
        {"nonlocal", "the 'nonlocal' statement"},
        {"del", "the 'del' statement"},
        {"class", "'class'"},
        {"def", "'def'"},
        {"return", "'return'"},
        {"pass", "'pass'"},
        {"break", "'break'"},
        {"continue", "'continue'"},
        {"raise", "'raise'"},
        {"assert", "'assert'"},
        {"while", "'while'"},
        {"else", "'else'"},
        {"elif", "'elif'"},
        {"as", "'as'"},
    };
    for (size_t k = 0; k < sizeof KW / sizeof KW[0]; k++)
        if (!strcmp(name, KW[k][0])) return KW[k][1];
    return NULL;
}

static bool is_keyword(const struct tok *t) {
    return t->kind == T_NAME && (keyword_construct(t->s) || !strcmp(t->s, "True") ||
                                 !strcmp(t->s, "False") || !strcmp(t->s, "None"));
}

/* ---- expressions ----------------------------------------------------------------------- */

static ox_status parse_expr(struct parser *p, struct ox_ts_expr **out);

/* What may not follow a complete expression: infix operators and the keywords that would
 * continue it in Python. */
static ox_status check_after_expr(struct parser *p) {
    const struct tok *t = peek(p);
    char buf[200];
    if (t->kind == T_OP) {
        static const char *const INFIX[] = {"+", "-", "*", "/", "//", "%",  "**", "@",  "<<", ">>",
                                            "&", "|", "^", "<", ">",  "<=", ">=", "==", "!="};
        for (size_t k = 0; k < sizeof INFIX / sizeof INFIX[0]; k++)
            if (tok_is_op(p, t, INFIX[k]))
                return perr(p, t->line, OX_E_UNSUPPORTED,
                            "infix operator %s is not supported (the printed code calls torch.add, "
                            "torch.lt, ...)",
                            tok_desc(p, t, buf, sizeof buf));
        if (tok_is_op(p, t, ":="))
            return perr(p, t->line, OX_E_UNSUPPORTED,
                        "assignment expression ':=' is not supported");
        return OX_OK;
    }
    if (t->kind == T_NAME) {
        static const char *const KW[] = {"and", "or", "in", "is", "not", "if", "for", "async"};
        for (size_t k = 0; k < sizeof KW / sizeof KW[0]; k++)
            if (!strcmp(t->s, KW[k]))
                return perr(p, t->line, OX_E_UNSUPPORTED, "%s is not supported: '%s'",
                            keyword_construct(t->s), t->s);
    }
    return OX_OK;
}

/* Elements up to the closing bracket `close`, commas between, a trailing one allowed. */
static ox_status parse_elements(struct parser *p, const char *close, struct ox_ts_expr *e) {
    int cap = 0;
    while (!is_op(p, close)) {
        struct ox_ts_expr *x = NULL;
        if (is_op(p, "*") || is_op(p, "**"))
            return perr(p, peek(p)->line, OX_E_UNSUPPORTED, "unpacking with '%s' is not supported",
                        is_op(p, "*") ? "*" : "**");
        TRY(parse_expr(p, &x));
        PUSH(p, e->args, e->n_args, cap, x, x->line);
        if (!accept_op(p, ",")) break;
    }
    char want[40];
    snprintf(want, sizeof want, "',' or '%s'", close);
    if (!accept_op(p, close)) return unexpected(p, peek(p), want);
    return OX_OK;
}

static ox_status parse_call_args(struct parser *p, struct ox_ts_expr *e) {
    int cap = 0, cap_kw = 0, n_kw = 0;
    bool seen_kw = false;
    while (!is_op(p, ")")) {
        const struct tok *t = peek(p);
        if (is_op(p, "*") || is_op(p, "**"))
            return perr(p, t->line, OX_E_UNSUPPORTED,
                        "argument unpacking with '%s' is not supported",
                        is_op(p, "*") ? "*" : "**");
        const char *kw = NULL;
        if (t->kind == T_NAME && tok_is_op(p, peek_at(p, 1), "=")) {
            if (is_keyword(t)) {
                char buf[200];
                return perr(p, t->line, OX_E_INVALID, "keyword argument named by the keyword %s",
                            tok_desc(p, t, buf, sizeof buf));
            }
            kw = t->s;
            next(p);
            next(p);
            seen_kw = true;
        } else if (seen_kw) {
            return perr(p, t->line, OX_E_INVALID, "positional argument after a keyword argument");
        }
        struct ox_ts_expr *x = NULL;
        TRY(parse_expr(p, &x));
        if (is_op(p, "="))
            return perr(p, peek(p)->line, OX_E_INVALID,
                        "a keyword argument must be a plain name before '='");
        PUSH(p, e->args, e->n_args, cap, x, x->line);
        PUSH(p, e->kw, n_kw, cap_kw, kw, x->line);
        if (!accept_op(p, ",")) break;
    }
    if (!accept_op(p, ")")) return unexpected(p, peek(p), "',' or ')' in the call");
    return OX_OK;
}

static ox_status parse_atom(struct parser *p, struct ox_ts_expr **out) {
    const struct tok *t = next(p);
    struct ox_ts_expr *e = NULL;
    char buf[200];
    switch (t->kind) {
    case T_NAME: {
        const char *kc = keyword_construct(t->s);
        if (kc) {
            if (!strcmp(t->s, "lambda") || !strcmp(t->s, "not") || !strcmp(t->s, "await") ||
                !strcmp(t->s, "yield"))
                return perr(p, t->line, OX_E_UNSUPPORTED, "%s is not supported: '%s'", kc, t->s);
            return perr(p, t->line, OX_E_INVALID, "expected an expression, found the keyword '%s'",
                        t->s);
        }
        if (!strcmp(t->s, "True") || !strcmp(t->s, "False")) {
            if (!(e = new_expr(p, OX_TE_BOOL, t->line))) return nomem(p, t->line);
            e->i = t->s[0] == 'T';
        } else if (!strcmp(t->s, "None")) {
            if (!(e = new_expr(p, OX_TE_NONE, t->line))) return nomem(p, t->line);
        } else if (!strcmp(t->s, "inf") || !strcmp(t->s, "nan")) {
            if (!(e = new_expr(p, OX_TE_FLOAT, t->line))) return nomem(p, t->line);
            e->f = t->s[0] == 'i' ? (double)INFINITY : (double)NAN;
        } else {
            if (!(e = new_expr(p, OX_TE_NAME, t->line))) return nomem(p, t->line);
            e->name = t->s;
        }
        break;
    }
    case T_INT:
        if (t->u > (uint64_t)INT64_MAX)
            return perr(p, t->line, OX_E_UNSUPPORTED, "integer literal %s does not fit in 64 bits",
                        tok_desc(p, t, buf, sizeof buf));
        if (!(e = new_expr(p, OX_TE_INT, t->line))) return nomem(p, t->line);
        e->i = (int64_t)t->u;
        break;
    case T_FLOAT:
        if (!(e = new_expr(p, OX_TE_FLOAT, t->line))) return nomem(p, t->line);
        e->f = t->f;
        break;
    case T_STRING: {
        /* adjacent literals are one string, as in Python */
        size_t total = t->s_len;
        const struct tok *u = t;
        while (peek(p)->kind == T_STRING) total += next(p)->s_len;
        if (!(e = new_expr(p, OX_TE_STR, t->line))) return nomem(p, t->line);
        if (u == peek(p) - 1) {
            e->s = t->s;
        } else {
            char *d = ox_arena_alloc(p->a, total + 1);
            if (!d) return nomem(p, t->line);
            size_t k = 0;
            for (const struct tok *v = u; v < peek(p); v++) {
                memcpy(d + k, v->s, v->s_len);
                k += v->s_len;
            }
            e->s = d;
        }
        e->s_len = total;
        break;
    }
    case T_OP:
        if (tok_is_op(p, t, "(")) {
            if (accept_op(p, ")")) {
                if (!(e = new_expr(p, OX_TE_TUPLE, t->line))) return nomem(p, t->line);
                break;
            }
            if (is_op(p, "*"))
                return perr(p, peek(p)->line, OX_E_UNSUPPORTED,
                            "unpacking with '*' is not supported");
            struct ox_ts_expr *x = NULL;
            TRY(parse_expr(p, &x));
            if (accept_op(p, ")")) {
                e = x; /* a parenthesised expression keeps its own line */
                break;
            }
            if (!is_op(p, ",")) return unexpected(p, peek(p), "',' or ')'");
            next(p);
            if (!(e = new_expr(p, OX_TE_TUPLE, t->line))) return nomem(p, t->line);
            int cap = 0;
            PUSH(p, e->args, e->n_args, cap, x, x->line);
            TRY(parse_elements(p, ")", e));
            break;
        }
        if (tok_is_op(p, t, "[")) {
            if (!(e = new_expr(p, OX_TE_LIST, t->line))) return nomem(p, t->line);
            TRY(parse_elements(p, "]", e));
            break;
        }
        if (tok_is_op(p, t, "{")) {
            if (!(e = new_expr(p, OX_TE_DICT, t->line))) return nomem(p, t->line);
            int cap = 0;
            while (!is_op(p, "}")) {
                struct ox_ts_expr *k = NULL, *v = NULL;
                if (is_op(p, "**"))
                    return perr(p, peek(p)->line, OX_E_UNSUPPORTED,
                                "dict unpacking with '**' is not supported");
                TRY(parse_expr(p, &k));
                if (is_op(p, ",") || is_op(p, "}"))
                    return perr(p, peek(p)->line, OX_E_UNSUPPORTED,
                                "set literals are not supported");
                TRY(expect_op(p, ":"));
                TRY(parse_expr(p, &v));
                PUSH(p, e->args, e->n_args, cap, k, k->line);
                PUSH(p, e->args, e->n_args, cap, v, v->line);
                if (!accept_op(p, ",")) break;
            }
            if (!accept_op(p, "}")) return unexpected(p, peek(p), "',' or '}' in the dict");
            break;
        }
        if (tok_is_op(p, t, "..."))
            return perr(p, t->line, OX_E_UNSUPPORTED, "Ellipsis '...' is not supported");
        if (tok_is_op(p, t, "+") || tok_is_op(p, t, "~"))
            return perr(p, t->line, OX_E_UNSUPPORTED, "unary operator %s is not supported",
                        tok_desc(p, t, buf, sizeof buf));
        if (tok_is_op(p, t, "*") || tok_is_op(p, t, "**"))
            return perr(p, t->line, OX_E_UNSUPPORTED, "unpacking with %s is not supported",
                        tok_desc(p, t, buf, sizeof buf));
        if (tok_is_op(p, t, "@"))
            return perr(p, t->line, OX_E_UNSUPPORTED, "decorator '@' is not supported");
        return perr(p, t->line, OX_E_INVALID, "expected an expression, found %s",
                    tok_desc(p, t, buf, sizeof buf));
    case T_INDENT: return perr(p, t->line, OX_E_INVALID, "unexpected indent");
    default:
        return perr(p, t->line, OX_E_INVALID, "expected an expression, found %s",
                    tok_desc(p, t, buf, sizeof buf));
    }
    *out = e;
    return OX_OK;
}

/* atom { "." NAME | "(" args ")" | "[" index "]" }. The nodes take the line where the whole
 * primary starts (the "(" of "(lin).forward(x, )"), as Python's ast does. */
static ox_status parse_postfix(struct parser *p, struct ox_ts_expr **out) {
    int line = peek(p)->line, depth = p->depth;
    struct ox_ts_expr *e = NULL;
    TRY(parse_atom(p, &e));
    for (;;) {
        const struct tok *t = peek(p);
        ox_ts_expr_kind kind;
        if (tok_is_op(p, t, "."))
            kind = OX_TE_ATTR;
        else if (tok_is_op(p, t, "("))
            kind = OX_TE_CALL;
        else if (tok_is_op(p, t, "["))
            kind = OX_TE_SUBSCRIPT;
        else
            break;
        TRY(enter(p, t->line)); /* a chain is as deep as its links */
        next(p);
        struct ox_ts_expr *x = new_expr(p, kind, line);
        if (!x) return nomem(p, t->line);
        x->base = e;
        if (kind == OX_TE_ATTR) {
            const struct tok *nt = next(p);
            if (nt->kind != T_NAME) return unexpected(p, nt, "an attribute name after '.'");
            x->name = nt->s;
        } else if (kind == OX_TE_CALL) {
            TRY(parse_call_args(p, x));
        } else {
            if (is_op(p, ":"))
                return perr(p, peek(p)->line, OX_E_UNSUPPORTED,
                            "slicing ':' is not supported (only single-index subscripts)");
            if (is_op(p, "]")) return perr(p, peek(p)->line, OX_E_INVALID, "empty subscript");
            struct ox_ts_expr *ix = NULL;
            TRY(parse_expr(p, &ix));
            if (is_op(p, ":"))
                return perr(p, peek(p)->line, OX_E_UNSUPPORTED,
                            "slicing ':' is not supported (only single-index subscripts)");
            if (is_op(p, ",")) { /* x[a, b]: a tuple index, as in Dict[str, int] */
                struct ox_ts_expr *tu = new_expr(p, OX_TE_TUPLE, ix->line);
                if (!tu) return nomem(p, t->line);
                int cap = 0;
                PUSH(p, tu->args, tu->n_args, cap, ix, ix->line);
                next(p);
                TRY(parse_elements(p, "]", tu));
                ix = tu;
            } else {
                TRY(expect_op(p, "]"));
            }
            x->index = ix;
        }
        e = x;
    }
    p->depth = depth;
    *out = e;
    return OX_OK;
}

/* "-" folds into a number literal (-9223372036854775808 included); on anything else it
 * is an OX_TE_NEG node. */
static ox_status parse_unary(struct parser *p, struct ox_ts_expr **out) {
    const struct tok *t = peek(p);
    if (!tok_is_op(p, t, "-")) return parse_postfix(p, out);
    TRY(enter(p, t->line));
    next(p);
    const struct tok *u = peek(p);
    struct ox_ts_expr *x = NULL;
    if (u->kind == T_INT && u->u == (uint64_t)1 << 63 && !tok_is_op(p, peek_at(p, 1), ".") &&
        !tok_is_op(p, peek_at(p, 1), "(") && !tok_is_op(p, peek_at(p, 1), "[")) {
        next(p);
        if (!(x = new_expr(p, OX_TE_INT, t->line))) return nomem(p, t->line);
        x->i = INT64_MIN;
    } else {
        TRY(parse_unary(p, &x));
        if (x->kind == OX_TE_INT) {
            if (x->i == INT64_MIN)
                return perr(p, t->line, OX_E_UNSUPPORTED,
                            "integer literal 9223372036854775808 does not fit in 64 bits");
            x->i = -x->i;
            x->line = t->line;
        } else if (x->kind == OX_TE_FLOAT) {
            x->f = -x->f;
            x->line = t->line;
        } else {
            struct ox_ts_expr *neg = new_expr(p, OX_TE_NEG, t->line);
            if (!neg) return nomem(p, t->line);
            neg->base = x;
            x = neg;
        }
    }
    p->depth--;
    *out = x;
    return OX_OK;
}

static ox_status parse_expr(struct parser *p, struct ox_ts_expr **out) {
    TRY(enter(p, peek(p)->line));
    TRY(parse_unary(p, out));
    TRY(check_after_expr(p));
    p->depth--;
    return OX_OK;
}

/* expr { "," expr } [","]: a tuple (line of its first element) when there is a comma. Stops
 * at the end of the line, "=", ":" and ")". */
static ox_status parse_expr_list(struct parser *p, struct ox_ts_expr **out) {
    struct ox_ts_expr *x = NULL;
    TRY(parse_expr(p, &x));
    if (!is_op(p, ",")) {
        *out = x;
        return OX_OK;
    }
    struct ox_ts_expr *tu = new_expr(p, OX_TE_TUPLE, x->line);
    if (!tu) return nomem(p, x->line);
    int cap = 0;
    PUSH(p, tu->args, tu->n_args, cap, x, x->line);
    while (accept_op(p, ",")) {
        const struct tok *t = peek(p);
        if (t->kind == T_NEWLINE || t->kind == T_END || tok_is_op(p, t, "=") ||
            tok_is_op(p, t, ":") || tok_is_op(p, t, ")") || tok_is_op(p, t, ";"))
            break;
        TRY(parse_expr(p, &x));
        PUSH(p, tu->args, tu->n_args, cap, x, x->line);
    }
    *out = tu;
    return OX_OK;
}

/* ---- types ----------------------------------------------------------------------------- */

/* A dotted name ("a.b.C") of a chain of OX_TE_NAME/OX_TE_ATTR, built without recursion;
 * NULL when the chain holds anything else. */
static const char *dotted_name(struct ox_arena *a, const struct ox_ts_expr *e, bool *nomem_out) {
    size_t n = 0;
    const struct ox_ts_expr *x = e;
    for (; x->kind == OX_TE_ATTR; x = x->base) n += strlen(x->name) + 1;
    if (x->kind != OX_TE_NAME) return NULL;
    if (x == e) return x->name;
    n += strlen(x->name);
    char *d = ox_arena_alloc(a, n + 1);
    if (!d) {
        *nomem_out = true;
        return NULL;
    }
    size_t k = n;
    d[k] = 0;
    for (x = e; x->kind == OX_TE_ATTR; x = x->base) {
        size_t m = strlen(x->name);
        k -= m;
        memcpy(d + k, x->name, m);
        d[--k] = '.';
    }
    memcpy(d, x->name, k);
    return d;
}

ox_status ox_ts_expr_type(const struct ox_ts_expr *e, const char *path, struct ox_arena *a,
                          struct ox_ts_type **out) {
    static const struct {
        const char *name;
        ox_ts_type_kind kind;
        int n_args; /* of the generic form; -1: any number, 0: not generic */
    } NAMES[] = {
        {"Tensor", OX_TT_TENSOR, 0}, {"int", OX_TT_INT, 0},      {"float", OX_TT_FLOAT, 0},
        {"bool", OX_TT_BOOL, 0},     {"str", OX_TT_STR, 0},      {"NoneType", OX_TT_NONE, 0},
        {"Device", OX_TT_DEVICE, 0}, {"Any", OX_TT_ANY, 0},      {"Optional", OX_TT_OPTIONAL, 1},
        {"List", OX_TT_LIST, 1},     {"Tuple", OX_TT_TUPLE, -1}, {"Dict", OX_TT_DICT, 2},
        {"Final", OX_TT_FINAL, 1},   {"Union", OX_TT_UNION, -1},
    };
    if (!path) path = "<code>";
    struct ox_ts_type *t = ox_arena_alloc(a, sizeof *t);
    if (!t) return ox_err(OX_E_NOMEM, "%s:%d: out of memory", path, e->line);
    if (e->kind == OX_TE_NONE) {
        t->kind = OX_TT_NONE;
        t->name = "NoneType";
        *out = t;
        return OX_OK;
    }
    const struct ox_ts_expr *head = e->kind == OX_TE_SUBSCRIPT ? e->base : e;
    bool oom = false;
    const char *name = dotted_name(a, head, &oom);
    if (oom) return ox_err(OX_E_NOMEM, "%s:%d: out of memory", path, e->line);
    if (!name)
        return ox_err(OX_E_INVALID, "%s:%d: expected a type, found an expression", path, e->line);
    t->kind = OX_TT_CLASS;
    t->name = name;
    int want = 0;
    for (size_t k = 0; k < sizeof NAMES / sizeof NAMES[0]; k++)
        if (!strcmp(name, NAMES[k].name)) {
            t->kind = NAMES[k].kind;
            want = NAMES[k].n_args;
        }
    if (e->kind != OX_TE_SUBSCRIPT) {
        if (want != 0)
            return ox_err(OX_E_INVALID, "%s:%d: type '%s' needs its arguments in [...]", path,
                          e->line, name);
        *out = t;
        return OX_OK;
    }
    if (want == 0)
        return ox_err(OX_E_UNSUPPORTED, "%s:%d: type '%s' takes no arguments in [...]", path,
                      e->line, name);
    const struct ox_ts_expr *ix = e->index;
    int n = ix->kind == OX_TE_TUPLE ? ix->n_args : 1;
    if (want > 0 && n != want)
        return ox_err(OX_E_INVALID, "%s:%d: type '%s' takes %d argument%s, found %d", path, e->line,
                      name, want, want == 1 ? "" : "s", n);
    if (n == 0 && t->kind != OX_TT_TUPLE)
        return ox_err(OX_E_INVALID, "%s:%d: type '%s' needs arguments", path, e->line, name);
    t->n_args = n;
    if (n) {
        t->args = ox_arena_alloc(a, (size_t)n * sizeof *t->args);
        if (!t->args) return ox_err(OX_E_NOMEM, "%s:%d: out of memory", path, e->line);
    }
    for (int k = 0; k < n; k++) {
        ox_status st =
            ox_ts_expr_type(ix->kind == OX_TE_TUPLE ? ix->args[k] : ix, path, a, &t->args[k]);
        if (st) return st;
    }
    *out = t;
    return OX_OK;
}

static ox_status parse_type(struct parser *p, struct ox_ts_type **out) {
    struct ox_ts_expr *e = NULL;
    TRY(parse_expr(p, &e));
    return ox_ts_expr_type(e, p->path, p->a, out);
}

/* ---- statements ------------------------------------------------------------------------ */

static ox_status parse_block(struct parser *p, struct ox_ts_block *b);
static ox_status parse_func(struct parser *p, struct ox_ts_func **out);

static ox_status parse_simple_targets(struct parser *p, struct ox_ts_stmt *s, struct ox_ts_expr *t,
                                      int line) {
    if (t->kind == OX_TE_NAME) {
        s->n_targets = 1;
        s->targets = ox_arena_alloc(p->a, sizeof *s->targets);
        if (!s->targets) return nomem(p, line);
        s->targets[0] = t->name;
        return OX_OK;
    }
    if (t->kind == OX_TE_ATTR || t->kind == OX_TE_SUBSCRIPT) {
        s->target_attr = t;
        return OX_OK;
    }
    if (t->kind == OX_TE_TUPLE || t->kind == OX_TE_LIST) {
        if (t->n_args == 0) return perr(p, line, OX_E_INVALID, "nothing to assign to");
        s->is_tuple = true;
        s->n_targets = t->n_args;
        s->targets = ox_arena_alloc(p->a, (size_t)t->n_args * sizeof *s->targets);
        if (!s->targets) return nomem(p, line);
        for (int k = 0; k < t->n_args; k++) {
            if (t->args[k]->kind != OX_TE_NAME)
                return perr(p, line, OX_E_UNSUPPORTED,
                            "unpacking into anything but plain names is not supported");
            s->targets[k] = t->args[k]->name;
        }
        return OX_OK;
    }
    return perr(p, line, OX_E_INVALID, "cannot assign to this expression");
}

/* A simple statement (expression, assignment, return, ...), up to its end of line. */
static ox_status parse_simple(struct parser *p, struct ox_ts_stmt *s) {
    const struct tok *t = peek(p);
    char buf[200];
    if (t->kind == T_NAME) {
        if (!strcmp(t->s, "pass") || !strcmp(t->s, "break") || !strcmp(t->s, "continue")) {
            s->kind = t->s[0] == 'p' ? OX_TS_PASS : t->s[0] == 'b' ? OX_TS_BREAK : OX_TS_CONTINUE;
            next(p);
            return expect_newline(p);
        }
        if (!strcmp(t->s, "return")) {
            s->kind = OX_TS_RETURN;
            next(p);
            if (peek(p)->kind != T_NEWLINE) TRY(parse_expr_list(p, &s->value));
            return expect_newline(p);
        }
        if (!strcmp(t->s, "assert")) {
            s->kind = OX_TS_ASSERT;
            next(p);
            TRY(parse_expr(p, &s->value));
            if (accept_op(p, ",")) TRY(parse_expr(p, &s->msg));
            return expect_newline(p);
        }
        if (!strcmp(t->s, "raise")) {
            s->kind = OX_TS_RAISE;
            next(p);
            if (peek(p)->kind != T_NEWLINE) TRY(parse_expr(p, &s->value));
            if (is_name(p, "from"))
                return perr(p, peek(p)->line, OX_E_UNSUPPORTED,
                            "'raise ... from' is not supported");
            return expect_newline(p);
        }
        static const char *const STMT_KW[] = {"import",  "from",   "with",     "try", "except",
                                              "finally", "global", "nonlocal", "del", "class",
                                              "def",     "async",  "yield"};
        for (size_t k = 0; k < sizeof STMT_KW / sizeof STMT_KW[0]; k++)
            if (!strcmp(t->s, STMT_KW[k])) {
                if (!strcmp(t->s, "def"))
                    return perr(p, t->line, OX_E_UNSUPPORTED,
                                "nested function 'def' is not supported");
                if (!strcmp(t->s, "class"))
                    return perr(p, t->line, OX_E_UNSUPPORTED, "nested 'class' is not supported");
                return perr(p, t->line, OX_E_UNSUPPORTED, "%s is not supported: '%s'",
                            keyword_construct(t->s), t->s);
            }
        if (!strcmp(t->s, "else") || !strcmp(t->s, "elif"))
            return perr(p, t->line, OX_E_INVALID, "'%s' without a matching 'if'", t->s);
    }
    if (tok_is_op(p, t, "@"))
        return perr(p, t->line, OX_E_UNSUPPORTED, "decorator '@' is not supported");
    struct ox_ts_expr *x = NULL;
    TRY(parse_expr_list(p, &x));
    const struct tok *o = peek(p);
    if (tok_is_op(p, o, "=")) {
        next(p);
        s->kind = OX_TS_ASSIGN;
        TRY(parse_simple_targets(p, s, x, s->line));
        TRY(parse_expr_list(p, &s->value));
        if (is_op(p, "="))
            return perr(p, peek(p)->line, OX_E_UNSUPPORTED,
                        "chained assignment 'a = b = c' is not supported");
        return expect_newline(p);
    }
    if (tok_is_op(p, o, ":")) {
        if (x->kind != OX_TE_NAME)
            return perr(p, o->line, OX_E_UNSUPPORTED,
                        "an annotated assignment needs a plain name as its target");
        next(p);
        s->kind = OX_TS_ASSIGN;
        TRY(parse_simple_targets(p, s, x, s->line));
        TRY(parse_type(p, &s->type));
        if (!accept_op(p, "="))
            return perr(p, peek(p)->line, OX_E_UNSUPPORTED,
                        "an annotation without a value ('x : T') is not supported in a function");
        TRY(parse_expr_list(p, &s->value));
        return expect_newline(p);
    }
    if (o->kind == T_OP && o->len >= 2 && p->src[o->pos + o->len - 1] == '=' &&
        !tok_is_op(p, o, "==") && !tok_is_op(p, o, "<=") && !tok_is_op(p, o, ">=") &&
        !tok_is_op(p, o, "!="))
        return perr(p, o->line, OX_E_UNSUPPORTED, "augmented assignment %s is not supported",
                    tok_desc(p, o, buf, sizeof buf));
    s->kind = OX_TS_EXPR;
    s->value = x;
    return expect_newline(p);
}

static ox_status parse_stmt(struct parser *p, struct ox_ts_stmt **out) {
    const struct tok *t = peek(p);
    struct ox_ts_stmt *s = ox_arena_alloc(p->a, sizeof *s);
    if (!s) return nomem(p, t->line);
    s->line = t->line;
    *out = s;
    if (tok_is_name(t, "if")) {
        /* elif chains become nested ifs in orelse, built in a loop */
        struct ox_ts_stmt *cur = s;
        int depth = p->depth;
        for (;;) {
            next(p);
            cur->kind = OX_TS_IF;
            TRY(parse_expr(p, &cur->value));
            TRY(expect_op(p, ":"));
            TRY(parse_block(p, &cur->body));
            if (is_name(p, "elif")) {
                TRY(enter(p, peek(p)->line)); /* each elif is one if deeper */
                struct ox_ts_stmt *e = ox_arena_alloc(p->a, sizeof *e);
                cur->orelse.stmts = ox_arena_alloc(p->a, sizeof *cur->orelse.stmts);
                if (!e || !cur->orelse.stmts) return nomem(p, t->line);
                e->line = peek(p)->line;
                cur->orelse.n = 1;
                cur->orelse.stmts[0] = e;
                cur = e;
                continue;
            }
            if (is_name(p, "else")) {
                next(p);
                TRY(expect_op(p, ":"));
                TRY(parse_block(p, &cur->orelse));
            }
            p->depth = depth;
            return OX_OK;
        }
    }
    if (tok_is_name(t, "for")) {
        next(p);
        s->kind = OX_TS_FOR;
        const struct tok *n = next(p);
        if (n->kind != T_NAME || is_keyword(n)) return unexpected(p, n, "a loop variable name");
        if (is_op(p, ","))
            return perr(p, n->line, OX_E_UNSUPPORTED,
                        "a for loop with several targets is not supported");
        s->n_targets = 1;
        if (!(s->targets = ox_arena_alloc(p->a, sizeof *s->targets))) return nomem(p, n->line);
        s->targets[0] = n->s;
        if (!is_name(p, "in")) return unexpected(p, peek(p), "'in'");
        next(p);
        TRY(parse_expr_list(p, &s->value));
        TRY(expect_op(p, ":"));
        TRY(parse_block(p, &s->body));
        if (is_name(p, "else"))
            return perr(p, peek(p)->line, OX_E_UNSUPPORTED,
                        "'else' after a for loop is not supported");
        return OX_OK;
    }
    if (tok_is_name(t, "while")) {
        next(p);
        s->kind = OX_TS_WHILE;
        TRY(parse_expr(p, &s->value));
        TRY(expect_op(p, ":"));
        TRY(parse_block(p, &s->body));
        if (is_name(p, "else"))
            return perr(p, peek(p)->line, OX_E_UNSUPPORTED,
                        "'else' after a while loop is not supported");
        return OX_OK;
    }
    if (t->kind == T_INDENT) return perr(p, t->line, OX_E_INVALID, "unexpected indent");
    return parse_simple(p, s);
}

/* ":" was read. Either NEWLINE INDENT stmt+ DEDENT, or one simple statement on the line. */
static ox_status parse_block(struct parser *p, struct ox_ts_block *b) {
    const struct tok *t = peek(p);
    int cap = 0;
    TRY(enter(p, t->line));
    if (t->kind != T_NEWLINE) {
        struct ox_ts_stmt *s = ox_arena_alloc(p->a, sizeof *s);
        if (!s) return nomem(p, t->line);
        s->line = t->line;
        TRY(parse_simple(p, s));
        PUSH(p, b->stmts, b->n, cap, s, t->line);
        p->depth--;
        return OX_OK;
    }
    next(p);
    if (peek(p)->kind != T_INDENT)
        return perr(p, peek(p)->line, OX_E_INVALID, "expected an indented block");
    next(p);
    while (peek(p)->kind != T_DEDENT && peek(p)->kind != T_END) {
        struct ox_ts_stmt *s = NULL;
        TRY(parse_stmt(p, &s));
        PUSH(p, b->stmts, b->n, cap, s, s->line);
    }
    next(p);
    p->depth--;
    return OX_OK;
}

/* ---- definitions ----------------------------------------------------------------------- */

/* "def" NAME "(" [param {"," param} [","]] ")" ["->" type] ":" block */
static ox_status parse_func(struct parser *p, struct ox_ts_func **out) {
    const struct tok *d = next(p);
    struct ox_ts_func *f = ox_arena_alloc(p->a, sizeof *f);
    if (!f) return nomem(p, d->line);
    f->line = d->line;
    const struct tok *n = next(p);
    if (n->kind != T_NAME || is_keyword(n)) return unexpected(p, n, "a function name after 'def'");
    f->name = n->s;
    TRY(expect_op(p, "("));
    int cap = 0;
    bool seen_default = false;
    while (!is_op(p, ")")) {
        const struct tok *t = next(p);
        if (tok_is_op(p, t, "*") || tok_is_op(p, t, "**") || tok_is_op(p, t, "/"))
            return perr(p, t->line, OX_E_UNSUPPORTED, "parameter marker '%.*s' is not supported",
                        (int)t->len, p->src + t->pos);
        if (t->kind != T_NAME || is_keyword(t)) return unexpected(p, t, "a parameter name");
        struct ox_ts_param prm = {.name = t->s};
        if (accept_op(p, ":")) TRY(parse_type(p, &prm.type));
        if (accept_op(p, "=")) {
            TRY(parse_expr(p, &prm.dflt));
            seen_default = true;
        } else if (seen_default) {
            return perr(p, t->line, OX_E_INVALID,
                        "parameter '%s' without a default follows one with a default", t->s);
        }
        PUSH(p, f->params, f->n_params, cap, prm, t->line);
        if (!accept_op(p, ",")) break;
    }
    if (!accept_op(p, ")")) return unexpected(p, peek(p), "',' or ')' in the parameters");
    if (accept_op(p, "->")) TRY(parse_type(p, &f->ret));
    TRY(expect_op(p, ":"));
    TRY(parse_block(p, &f->body));
    *out = f;
    return OX_OK;
}

/* A string list: __parameters__ = ["weight", "bias", ] */
static ox_status string_list(struct parser *p, const struct ox_ts_expr *e, const char *what, int *n,
                             const char ***out) {
    if (e->kind != OX_TE_LIST && e->kind != OX_TE_TUPLE)
        return perr(p, e->line, OX_E_INVALID, "%s must be a list of strings", what);
    const char **names = NULL;
    if (e->n_args && !(names = ox_arena_alloc(p->a, (size_t)e->n_args * sizeof *names)))
        return nomem(p, e->line);
    for (int k = 0; k < e->n_args; k++) {
        if (e->args[k]->kind != OX_TE_STR)
            return perr(p, e->args[k]->line, OX_E_INVALID, "%s must be a list of strings", what);
        names[k] = e->args[k]->s;
    }
    *n = e->n_args;
    *out = names;
    return OX_OK;
}

static ox_status parse_class(struct parser *p, struct ox_ts_class **out) {
    const struct tok *c = next(p);
    char buf[200];
    struct ox_ts_class *k = ox_arena_alloc(p->a, sizeof *k);
    if (!k) return nomem(p, c->line);
    k->line = c->line;
    const struct tok *n = next(p);
    if (n->kind != T_NAME || is_keyword(n)) return unexpected(p, n, "a class name after 'class'");
    k->name = n->s;
    if (accept_op(p, "(")) {
        if (!accept_op(p, ")")) {
            struct ox_ts_expr *b = NULL;
            TRY(parse_expr(p, &b));
            bool oom = false;
            if (!(k->base = dotted_name(p->a, b, &oom)))
                return oom ? nomem(p, b->line)
                           : perr(p, b->line, OX_E_UNSUPPORTED, "a class base must be a name");
            if (accept_op(p, ",") && !is_op(p, ")"))
                return perr(p, b->line, OX_E_UNSUPPORTED,
                            "several base classes (or a metaclass) are not supported");
            TRY(expect_op(p, ")"));
        }
    }
    TRY(expect_op(p, ":"));
    TRY(enter(p, c->line));
    bool one_line = peek(p)->kind != T_NEWLINE;
    if (!one_line) {
        next(p);
        if (peek(p)->kind != T_INDENT)
            return perr(p, peek(p)->line, OX_E_INVALID, "expected an indented class body");
        next(p);
    }
    int cap_slots = 0, cap_methods = 0;
    bool seen_params = false, seen_buffers = false;
    do {
        const struct tok *t = peek(p);
        if (tok_is_name(t, "def")) {
            if (one_line)
                return perr(p, t->line, OX_E_INVALID,
                            "a method cannot follow 'class ...:' on its line");
            struct ox_ts_func *f = NULL;
            TRY(parse_func(p, &f));
            PUSH(p, k->methods, k->n_methods, cap_methods, f, t->line);
            continue;
        }
        if (tok_is_name(t, "pass")) {
            next(p);
            TRY(expect_newline(p));
            continue;
        }
        if (tok_is_op(p, t, "@"))
            return perr(p, t->line, OX_E_UNSUPPORTED, "decorator '@' is not supported");
        if (t->kind == T_INDENT) return perr(p, t->line, OX_E_INVALID, "unexpected indent");
        if (t->kind != T_NAME || is_keyword(t))
            return perr(p, t->line, is_keyword(t) ? OX_E_UNSUPPORTED : OX_E_INVALID,
                        "unexpected %s in a class body", tok_desc(p, t, buf, sizeof buf));
        next(p);
        if (!strcmp(t->s, "__annotations__")) { /* __annotations__["0"] = <type> */
            TRY(expect_op(p, "["));
            const struct tok *key = next(p);
            if (key->kind != T_STRING)
                return unexpected(p, key, "a string key in __annotations__[...]");
            TRY(expect_op(p, "]"));
            TRY(expect_op(p, "="));
            struct ox_ts_slot sl = {.name = key->s};
            TRY(parse_type(p, &sl.type));
            PUSH(p, k->slots, k->n_slots, cap_slots, sl, t->line);
            TRY(expect_newline(p));
            continue;
        }
        if (accept_op(p, ":")) { /* name : type [= value] */
            struct ox_ts_slot sl = {.name = t->s};
            TRY(parse_type(p, &sl.type));
            if (accept_op(p, "=")) TRY(parse_expr_list(p, &sl.value));
            PUSH(p, k->slots, k->n_slots, cap_slots, sl, t->line);
            TRY(expect_newline(p));
            continue;
        }
        if (!accept_op(p, "="))
            return unexpected(p, peek(p), "':' or '=' after a class attribute name");
        struct ox_ts_expr *v = NULL;
        TRY(parse_expr_list(p, &v));
        if (!strcmp(t->s, "__parameters__")) {
            if (seen_params) return perr(p, t->line, OX_E_INVALID, "__parameters__ given twice");
            seen_params = true;
            TRY(string_list(p, v, "__parameters__", &k->n_parameters, &k->parameters));
        } else if (!strcmp(t->s, "__buffers__")) {
            if (seen_buffers) return perr(p, t->line, OX_E_INVALID, "__buffers__ given twice");
            seen_buffers = true;
            TRY(string_list(p, v, "__buffers__", &k->n_buffers, &k->buffers));
        } else { /* name = value: an Enum member or another class constant */
            struct ox_ts_slot sl = {.name = t->s, .value = v};
            PUSH(p, k->slots, k->n_slots, cap_slots, sl, t->line);
        }
        TRY(expect_newline(p));
    } while (!one_line && peek(p)->kind != T_DEDENT && peek(p)->kind != T_END);
    if (!one_line) next(p);
    p->depth--;
    *out = k;
    return OX_OK;
}

static ox_status parse_file(struct parser *p, struct ox_ts_file *f) {
    int cap_classes = 0, cap_funcs = 0, cap_body = 0;
    while (peek(p)->kind != T_END) {
        const struct tok *t = peek(p);
        if (t->kind == T_INDENT) return perr(p, t->line, OX_E_INVALID, "unexpected indent");
        if (t->kind == T_DEDENT || t->kind == T_NEWLINE) { /* cannot happen; be safe */
            next(p);
            continue;
        }
        if (tok_is_name(t, "class")) {
            struct ox_ts_class *c = NULL;
            TRY(parse_class(p, &c));
            PUSH(p, f->classes, f->n_classes, cap_classes, c, t->line);
        } else if (tok_is_name(t, "def")) {
            struct ox_ts_func *fn = NULL;
            TRY(parse_func(p, &fn));
            PUSH(p, f->funcs, f->n_funcs, cap_funcs, fn, t->line);
        } else {
            struct ox_ts_stmt *s = NULL;
            TRY(parse_stmt(p, &s));
            PUSH(p, f->body.stmts, f->body.n, cap_body, s, t->line);
        }
    }
    return OX_OK;
}

ox_status ox_ts_parse(const char *src, size_t len, const char *path, struct ox_arena *a,
                      struct ox_ts_file **out) {
    *out = NULL;
    if (!path) path = "<code>";
    if (len > MAX_SRC)
        return ox_err(OX_E_NOMEM, "%s: %zu bytes of code is past the limit of %zu", path, len,
                      MAX_SRC);
    struct parser p = {.src = src ? src : "", .len = src ? len : 0, .path = path, .a = a};
    struct ox_ts_file *f = ox_arena_alloc(a, sizeof *f);
    if (!f || !(f->path = ox_arena_strdup(a, path)))
        return ox_err(OX_E_NOMEM, "%s: out of memory", path);
    p.path = f->path;
    ox_status st = lex(&p);
    if (!st) st = parse_file(&p, f);
    free(p.toks);
    if (st) return st;
    *out = f;
    return OX_OK;
}

/* ---- lookups --------------------------------------------------------------------------- */

const struct ox_ts_class *ox_ts_find_class(const struct ox_ts_file *f, const char *name) {
    if (!f || !name) return NULL;
    for (int k = 0; k < f->n_classes; k++)
        if (!strcmp(f->classes[k]->name, name)) return f->classes[k];
    return NULL;
}

const struct ox_ts_func *ox_ts_find_method(const struct ox_ts_class *c, const char *name) {
    if (!c || !name) return NULL;
    for (int k = 0; k < c->n_methods; k++)
        if (!strcmp(c->methods[k]->name, name)) return c->methods[k];
    return NULL;
}

const struct ox_ts_func *ox_ts_find_func(const struct ox_ts_file *f, const char *name) {
    if (!f || !name) return NULL;
    for (int k = 0; k < f->n_funcs; k++)
        if (!strcmp(f->funcs[k]->name, name)) return f->funcs[k];
    return NULL;
}
