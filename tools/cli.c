/* What the onnxexec subcommands share (cli.h). */
#include "tools/cli.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

const char *cli_prefix = "";
ox_limits cli_limits;

int cli_usage(const char *usage) {
    fputs(usage, stdout);
    fputs("\n"
          "limits (every command that loads a model):\n"
          "  --limit NAME=VALUE    a limit on what the model may ask for; repeatable; VALUE > 0,\n"
          "                        with K, M, G, T suffixes (powers of 1024). NAME (default):\n"
          "                        model_bytes (64G), tensor_bytes (16G), rank (16, the most),\n"
          "                        nodes (4M), subgraph_depth (64, at most 256), string_length\n"
          "                        (64M), plan_bytes (64G). A model over one fails naming it.\n",
          stdout);
    return 0;
}

/* A count with an optional K/M/G/T suffix (powers of 1024). */
static bool parse_scaled(const char *s, uint64_t *out) {
    if (!s || *s < '0' || *s > '9') return false;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno) return false;
    unsigned shift = 0;
    if (*end) {
        const char *units = "KMGT", *u = strchr(units, toupper((unsigned char)*end));
        if (!u || end[1]) return false;
        shift = 10 * (unsigned)(u - units + 1);
    }
    if (shift && v > (UINT64_MAX >> shift)) return false;
    *out = (uint64_t)v << shift;
    return true;
}

static int set_limit(const char *arg) {
    static const char *const names[] = {"model_bytes",    "tensor_bytes",  "rank",      "nodes",
                                        "subgraph_depth", "string_length", "plan_bytes"};
    const char *eq = arg ? strchr(arg, '=') : NULL;
    if (!eq)
        return cli_errorf(EXIT_USAGE, "--limit '%s': expected NAME=VALUE (e.g. --limit nodes=8M)",
                          arg ? arg : "");
    char name[32];
    size_t n = (size_t)(eq - arg);
    if (n >= sizeof name) n = sizeof name - 1;
    for (size_t i = 0; i < n; i++) name[i] = arg[i] == '-' ? '_' : arg[i];
    name[n] = 0;
    int k = 0, n_names = (int)(sizeof names / sizeof *names);
    while (k < n_names && strcmp(names[k], name) != 0) k++;
    if (k == n_names)
        return cli_errorf(EXIT_USAGE,
                          "--limit '%s': no limit '%s' (model_bytes, tensor_bytes, rank, nodes, "
                          "subgraph_depth, string_length, plan_bytes)",
                          arg, name);
    uint64_t v;
    if (!parse_scaled(eq + 1, &v) || v == 0)
        return cli_errorf(
            EXIT_USAGE, "--limit '%s': '%s' is not a positive number (K, M, G, T suffixes allowed)",
            arg, eq + 1);
    ox_limits *l = &cli_limits;
    bool fits = true;
    switch (k) {
    case 0: l->model_bytes = v; break;
    case 1: l->tensor_bytes = v; break;
    case 2:
        fits = v <= OX_MAX_RANK;
        l->rank = (int)v;
        break;
    case 3:
        fits = v <= INT64_MAX;
        l->nodes = (int64_t)v;
        break;
    case 4:
        fits = v <= OX_LIMIT_MAX_SUBGRAPH_DEPTH;
        l->subgraph_depth = (int)v;
        break;
    case 5: l->string_length = v; break;
    default: l->plan_bytes = v; break;
    }
    if (!fits)
        return cli_errorf(EXIT_USAGE, "--limit '%s': %s can be at most %d", arg, name,
                          k == 2 ? OX_MAX_RANK : OX_LIMIT_MAX_SUBGRAPH_DEPTH);
    return 0;
}

int cli_take_limits(int *argc, char **argv, int from, bool only_with_eq) {
    int k = from;
    for (int i = from; i < *argc; i++) {
        int rc = 0;
        bool bare = strcmp(argv[i], "--limit") == 0, joined = strncmp(argv[i], "--limit=", 8) == 0;
        const char *val = bare ? (i + 1 < *argc ? argv[i + 1] : NULL) : argv[i] + 8;
        if ((bare || joined) && only_with_eq && (!val || !strchr(val, '='))) {
            argv[k++] = argv[i];
        } else if (bare) {
            if (!val) return cli_errorf(EXIT_USAGE, "--limit needs NAME=VALUE");
            rc = set_limit(val);
            i++;
        } else if (joined) {
            rc = set_limit(val);
        } else {
            argv[k++] = argv[i];
        }
        if (rc) return rc;
    }
    *argc = k;
    return 0;
}

int cli_errorf(int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "onnxexec: %s", cli_prefix);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return code;
}

const char *cli_lib_msg(ox_status st) {
    static _Thread_local char buf[2048];
    const char *m = ox_errmsg();
    if (!m || !*m) {
        snprintf(buf, sizeof buf, "error %d", (int)st);
        return buf;
    }
    size_t k = 0;
    for (; *m && k + 1 < sizeof buf; m++) buf[k++] = (*m == '\n' || *m == '\r') ? ' ' : *m;
    buf[k] = 0;
    return buf;
}

bool cli_is_help(const char *a) {
    return strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0;
}

int cli_precision(const char *name, size_t len) {
    static const char *const names[] = {"fp32", "tf32", "fp16", "bf16"}; /* OX_PRECISION_* */
    for (int i = 0; name && i < 4; i++)
        if (len == 4 && strncmp(name, names[i], 4) == 0) return i;
    return -1;
}

bool cli_parse_i64(const char *s, int64_t *out) {
    if (!s || !*s) return false;
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || end == s) return false;
    *out = v;
    return true;
}

bool cli_has_ext(const char *path, const char *ext) {
    size_t n = strlen(path), e = strlen(ext);
    return n > e && strcasecmp(path + n - e, ext) == 0;
}

bool cli_is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

bool cli_is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

char *cli_path_join(const char *a, const char *b) {
    size_t na = strlen(a), nb = strlen(b);
    char *p = malloc(na + nb + 2);
    if (!p) return NULL;
    memcpy(p, a, na);
    p[na] = '/';
    memcpy(p + na + 1, b, nb + 1);
    return p;
}

void cli_json_str(FILE *f, const char *s) {
    if (!s) {
        fputs("null", f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

double cli_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

long cli_peak_rss_kb(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmHWM:", 6) == 0) kb = strtol(line + 6, NULL, 10);
    if (f) fclose(f);
    if (kb < 0) {
        struct rusage ru;
        if (getrusage(RUSAGE_SELF, &ru) == 0) kb = ru.ru_maxrss;
    }
    return kb;
}

void cli_progress_start(struct cli_progress *p, const char *what, int64_t total) {
    const char *env = getenv("ONNXEXEC_PROGRESS");
    *p = (struct cli_progress){.what = what, .total = total, .t0 = cli_now_ms(), .drawn_at = -1e9};
    p->on = env && *env ? strcmp(env, "0") != 0 : isatty(STDERR_FILENO) == 1;
}

static void fmt_secs(char *buf, size_t len, double s) {
    if (s < 60)
        snprintf(buf, len, "%.0fs", s);
    else if (s < 3600)
        snprintf(buf, len, "%dm%02ds", (int)(s / 60), (int)s % 60);
    else
        snprintf(buf, len, "%dh%02dm", (int)(s / 3600), (int)(s / 60) % 60);
}

void cli_progress_update(struct cli_progress *p, int64_t done, const char *extra) {
    double now = cli_now_ms();
    if (!p->on || (now - p->drawn_at < 100 && done < p->total)) return;
    p->drawn_at = now;
    int fill = p->total > 0 ? (int)(30 * (done < p->total ? done : p->total) / p->total) : 0;
    char bar[31], el[16], left[16];
    for (int k = 0; k < 30; k++) bar[k] = k < fill ? '#' : '.';
    bar[30] = 0;
    double secs = (now - p->t0) / 1e3;
    fmt_secs(el, sizeof el, secs);
    fmt_secs(left, sizeof left, done > 0 ? secs / (double)done * (double)(p->total - done) : 0);
    fprintf(stderr, "\r%s [%s] %lld/%lld%s%s  %s, %s left\033[K", p->what, bar, (long long)done,
            (long long)p->total, extra ? "  " : "", extra ? extra : "", el, left);
    fflush(stderr);
    p->shown = true;
}

void cli_progress_clear(struct cli_progress *p) {
    if (!p->on || !p->shown) return;
    fputs("\r\033[K", stderr);
    fflush(stderr);
    p->shown = false;
    p->drawn_at = -1e9;
}
