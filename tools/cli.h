/* What the onnxexec subcommands share (tools/onnxexec.c, tools/train.c, tools/compare.c):
 * messages, argument parsing, files, clocks.
 *
 *     cli_prefix = "train: ";                      // messages read "onnxexec: train: ..."
 *     if (!cli_parse_i64(arg, &n)) return cli_errorf(EXIT_USAGE, "bad number '%s'", arg);
 */
#ifndef OX_TOOLS_CLI_H
#define OX_TOOLS_CLI_H

#include "onnxexec.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define EXIT_FAIL  1
#define EXIT_USAGE 2

/* Put after "onnxexec: " in every message ("" by default; a subcommand sets its name). */
extern const char *cli_prefix;

/* Print "onnxexec: <prefix><message>" on stderr and return code. */
int cli_errorf(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The library's message for a failed call, on one line, never empty (thread-local buffer). */
const char *cli_lib_msg(ox_status st);
bool cli_is_help(const char *arg); /* -h or --help */
/* A whole decimal integer (no trailing characters). */
bool cli_parse_i64(const char *s, int64_t *out);
/* The OX_PRECISION_* named by the len characters at name ("fp32", "tf32", "fp16", "bf16"),
 * or -1. */
int cli_precision(const char *name, size_t len);
bool cli_has_ext(const char *path, const char *ext); /* case-insensitive */
bool cli_is_dir(const char *path);
bool cli_is_file(const char *path);
/* "a/b", malloc'd (NULL on OOM). */
char *cli_path_join(const char *a, const char *b);
/* s as a JSON string ("null" for NULL). */
void cli_json_str(FILE *f, const char *s);
double cli_now_ms(void);    /* a monotonic clock */
long cli_peak_rss_kb(void); /* the process's peak resident memory, or -1 */

/* A progress bar on standard error when it is a terminal (ONNXEXEC_PROGRESS=0 turns it off,
 * =1 forces it); nothing otherwise, where commands print their own plain lines.
 *
 *     struct cli_progress p;
 *     cli_progress_start(&p, "test", n);
 *     for (i = 0; i < n; i++) {
 *         cli_progress_clear(&p);   // before printing a line of output
 *         ...
 *         cli_progress_update(&p, i + 1, "3 failed");
 *     }
 *     cli_progress_clear(&p);
 */
struct cli_progress {
    bool on;
    const char *what;
    int64_t total;
    double t0, drawn_at;
    bool shown;
};
void cli_progress_start(struct cli_progress *p, const char *what, int64_t total);
/* Redraw (at most 10 times a second, and always at the end): bar, done/total, `extra`
 * (may be NULL), elapsed time and an estimate of the time left. */
void cli_progress_update(struct cli_progress *p, int64_t done, const char *extra);
/* Erase the bar (it comes back at the next update). */
void cli_progress_clear(struct cli_progress *p);

/* --limit NAME=VALUE: the limits of every command that loads a model (main takes the options
 * out of the arguments; the commands copy cli_limits into their ox_model_options). */
extern ox_limits cli_limits;
/* Print a command's help, then the --limit option every command that loads a model takes;
 * returns 0. */
int cli_usage(const char *usage);
/* Take every `--limit NAME=VALUE` (or `--limit=NAME=VALUE`) out of argv[from..*argc), into
 * cli_limits. With only_with_eq, a --limit whose value holds no '=' is left in place (train's
 * own `--limit N`). 0, or EXIT_USAGE after a message. */
int cli_take_limits(int *argc, char **argv, int from, bool only_with_eq);

#endif
