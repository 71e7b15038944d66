/* onnxexec train — fit an image classifier on MNIST-style data with the library's trainer.
 *
 *     onnxexec train models/fmnist_cnn.onnx --data /usr/share/datasets/fashion-mnist \
 *         --epochs 3 --optimizer adam -o trained.onnx --curve curve.svg
 *
 * The data folder holds the four IDX files of MNIST and Fashion-MNIST (gzip'd or not):
 *     train-images-idx3-ubyte  magic 0x00000803, then N, H, W (big-endian uint32), N*H*W bytes
 *     train-labels-idx1-ubyte  magic 0x00000801, then N, N bytes (the classes)
 *     t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte   the test split, alike
 * Pixels become pixel / 255, then (x - mean) / std with --normalize. The model's first input
 * takes [N, 1, H, W], [N, H, W] or [N, H*W] (as its rank says), its first output class scores
 * [N, C]; the loss is softmax cross-entropy (ox_trainer's OX_LOSS_SOFTMAX_CROSS_ENTROPY).
 * A thin client of include/onnxexec.h, like tools/onnxexec.c, whose main calls cmd_train.
 */
#include "onnxexec.h"
#include "tools/cli.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

int cmd_train(int argc, char **argv);

static const char usage_train[] =
    "usage: onnxexec train MODEL --data DIR [--epochs N] [--batch N]\n"
    "                            [--optimizer sgd|adam|adamw] [--lr X] [--momentum X]\n"
    "                            [--nesterov] [--weight-decay X] [--threads N] [--limit N]\n"
    "                            [--test-limit N] [--normalize MEAN,STD] [--seed N]\n"
    "                            [--no-shuffle] [-o TRAINED.onnx] [--curve CURVE.svg]\n"
    "                            [--curve-every N]\n"
    "\n"
    "Train MODEL (an image classifier: first input [N,1,H,W], [N,H,W] or [N,H*W], first\n"
    "output class scores [N,C]) on MNIST-style IDX files with softmax cross-entropy, the\n"
    "gradient graph of `onnxexec grad`, and an optimizer that updates the parameters (every\n"
    "float initializer) as torch.optim does. The training images are shuffled each epoch.\n"
    "Prints, per epoch: the mean training loss, the test loss and accuracy, the time and the\n"
    "peak resident memory; a progress bar on a terminal.\n"
    "\n"
    "options:\n"
    "  --data DIR            folder with train-images-idx3-ubyte, train-labels-idx1-ubyte,\n"
    "                        t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte (each may end\n"
    "                        in .gz), e.g. /usr/share/datasets/fashion-mnist\n"
    "  --epochs N            passes over the training images (default 1)\n"
    "  --batch N             images per step (default 64; the last step takes the rest)\n"
    "  --optimizer NAME      sgd, adam (default) or adamw\n"
    "  --lr X                learning rate (default 0.01 for sgd, 0.001 for adam, adamw)\n"
    "  --momentum X          sgd: momentum (default 0)\n"
    "  --nesterov            sgd: Nesterov momentum\n"
    "  --weight-decay X      L2 penalty (adamw: decoupled weight decay) (default 0)\n"
    "  --threads N           threads for the CPU kernels (default: number of cores)\n"
    "  --limit N             train on the first N training images only (--limit\n"
    "                        NAME=VALUE, with an '=', is a limit on the model: below)\n"
    "  --test-limit N        test on the first N test images only\n"
    "  --normalize MEAN,STD  the normalisation the model expects after pixel / 255\n"
    "                        (default none)\n"
    "  --seed N              seed of the shuffle (default 0)\n"
    "  --no-shuffle          take the training images in file order every epoch\n"
    "  -o, --output FILE     write the trained model as ONNX\n"
    "  --curve FILE          write the loss and accuracy curves as SVG\n"
    "  --curve-every N       a training-loss point on the curve every N steps (default 50)\n"
    "\n"
    "example:\n"
    "  onnxexec train models/fmnist_cnn.onnx --data /usr/share/datasets/fashion-mnist \\\n"
    "      --epochs 3 -o trained.onnx --curve curve.svg\n";

/* ---- messages and small helpers -------------------------------------------------------- */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static bool parse_long(const char *s, long lo, long hi, long *out) {
    if (!s || !*s) return false;
    errno = 0;
    char *end;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

static bool parse_num(const char *s, double *out) {
    if (!s || !*s) return false;
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (errno || *end || end == s || !isfinite(v)) return false;
    *out = v;
    return true;
}

static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* ---- IDX files ------------------------------------------------------------------------- */

#define IDX_MAX_ITEMS (1L << 26)
#define IDX_MAX_BYTES (1L << 32)

struct idx {
    int ndim;
    int64_t dims[3];
    uint8_t *data; /* malloc'd: dims[0] * dims[1] * ... bytes */
};

/* Read dir/name or dir/name.gz (zlib reads either) as an IDX file of uint8 with `ndim` dims. */
static int read_idx(const char *dir, const char *name, int ndim, struct idx *out) {
    char path[4096];
    memset(out, 0, sizeof *out);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (access(path, R_OK) != 0) snprintf(path, sizeof path, "%s/%s.gz", dir, name);
    gzFile f = gzopen(path, "rb");
    if (!f) return cli_errorf(EXIT_FAIL, "cannot open %s/%s[.gz]: %s", dir, name, strerror(errno));
    unsigned char head[16];
    int want = 4 + 4 * ndim;
    int rc = 0;
    if (gzread(f, head, (unsigned)want) != want) {
        rc = cli_errorf(EXIT_FAIL, "%s: shorter than an IDX header", path);
        goto done;
    }
    if (head[0] || head[1] || head[2] != 0x08 || head[3] != ndim) {
        rc = cli_errorf(EXIT_FAIL,
                        "%s: not an IDX file of bytes with %d dims (magic %02x%02x%02x%02x, "
                        "expected 000008%02x)",
                        path, ndim, head[0], head[1], head[2], head[3], ndim);
        goto done;
    }
    int64_t total = 1;
    out->ndim = ndim;
    for (int k = 0; k < ndim; k++) {
        const unsigned char *b = head + 4 + 4 * k;
        out->dims[k] = (int64_t)b[0] << 24 | (int64_t)b[1] << 16 | (int64_t)b[2] << 8 | b[3];
        if (out->dims[k] <= 0 || (k == 0 && out->dims[k] > IDX_MAX_ITEMS) ||
            (k > 0 && out->dims[k] > 65536)) {
            rc = cli_errorf(EXIT_FAIL, "%s: dimension %d is %lld (out of range)", path, k,
                            (long long)out->dims[k]);
            goto done;
        }
        total *= out->dims[k];
        if (total > IDX_MAX_BYTES) {
            rc = cli_errorf(EXIT_FAIL, "%s: over %ld bytes of data", path, IDX_MAX_BYTES);
            goto done;
        }
    }
    out->data = malloc((size_t)total);
    if (!out->data) {
        rc = cli_errorf(EXIT_FAIL, "%s: out of memory for %lld bytes", path, (long long)total);
        goto done;
    }
    for (int64_t got = 0; got < total;) {
        unsigned chunk = total - got > (1 << 30) ? 1u << 30 : (unsigned)(total - got);
        int n = gzread(f, out->data + got, chunk);
        if (n <= 0) {
            int zerr;
            const char *msg = gzerror(f, &zerr);
            rc = cli_errorf(EXIT_FAIL, "%s: %lld of %lld data bytes (%s)", path, (long long)got,
                            (long long)total, zerr ? msg : "truncated");
            goto done;
        }
        got += n;
    }
done:
    gzclose(f);
    if (rc) {
        free(out->data);
        out->data = NULL;
    }
    return rc;
}

struct split {
    int64_t n, h, w;
    uint8_t *images; /* n * h * w */
    uint8_t *labels; /* n */
};

static void split_free(struct split *s) {
    free(s->images);
    free(s->labels);
}

static int read_split(const char *dir, const char *prefix, long limit, struct split *out) {
    char name[64];
    struct idx im, lb;
    snprintf(name, sizeof name, "%s-images-idx3-ubyte", prefix);
    int rc = read_idx(dir, name, 3, &im);
    if (rc) return rc;
    snprintf(name, sizeof name, "%s-labels-idx1-ubyte", prefix);
    if ((rc = read_idx(dir, name, 1, &lb))) {
        free(im.data);
        return rc;
    }
    if (lb.dims[0] != im.dims[0]) {
        free(im.data), free(lb.data);
        return cli_errorf(EXIT_FAIL, "%s/%s: %lld labels for %lld images", dir, prefix,
                          (long long)lb.dims[0], (long long)im.dims[0]);
    }
    *out = (struct split){
        .n = im.dims[0], .h = im.dims[1], .w = im.dims[2], .images = im.data, .labels = lb.data};
    if (limit > 0 && limit < out->n) out->n = limit;
    return 0;
}

/* ---- the SVG curves -------------------------------------------------------------------- */

struct series {
    const char *label, *color;
    int n;
    const double *x, *y;
    bool dots;    /* a marker at each point */
    double width; /* stroke width */
};

/* A step of 1, 2 or 5 times a power of ten giving about `n` ticks over `range`. */
static double nice_step(double range, int n) {
    double raw = range / n, p = pow(10, floor(log10(raw))), f = raw / p;
    return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p;
}

/* One chart at (x0, y0), size w x h: axes, grid, ticks, the series and a legend. */
static void svg_panel(FILE *f, double x0, double y0, double w, double h, const char *title,
                      const char *ylabel, double xmax, const struct series *s, int n_series,
                      bool percent) {
    double ymin = INFINITY, ymax = -INFINITY;
    for (int k = 0; k < n_series; k++)
        for (int i = 0; i < s[k].n; i++)
            if (isfinite(s[k].y[i])) ymin = fmin(ymin, s[k].y[i]), ymax = fmax(ymax, s[k].y[i]);
    if (!(ymin <= ymax)) ymin = 0, ymax = 1;
    if (ymax - ymin < 1e-9) ymin -= 0.5, ymax += 0.5;
    double pad = (ymax - ymin) * 0.05;
    ymin -= pad, ymax += pad;
    double ystep = nice_step(ymax - ymin, 5);
    ymin = floor(ymin / ystep) * ystep, ymax = ceil(ymax / ystep) * ystep;
    if (xmax <= 0) xmax = 1;
    double xstep = xmax <= 10 ? 1 : nice_step(xmax, 8);
    double ml = 60, mr = 16, mt = 30, mb = 42; /* margins */
    double pw = w - ml - mr, ph = h - mt - mb, px = x0 + ml, py = y0 + mt;
#define SX(v) (px + (v) / xmax * pw)
#define SY(v) (py + ph - ((v)-ymin) / (ymax - ymin) * ph)
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"15\" text-anchor=\"middle\">%s</text>\n",
            px + pw / 2, y0 + 18, title);
    for (double v = ymin; v <= ymax + ystep * 1e-6; v += ystep) {
        fprintf(f,
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n"
                "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%.*f%s</text>\n",
                px, SY(v), px + pw, SY(v), px - 5, SY(v) + 4,
                percent ? (ystep * 100 < 1 ? 1 : 0)
                        : (ystep < 0.01  ? 3
                           : ystep < 0.1 ? 2
                                         : 1),
                percent ? v * 100 : v, percent ? "%" : "");
    }
    for (double v = 0; v <= xmax + xstep * 1e-6; v += xstep)
        fprintf(f,
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#999\"/>\n"
                "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\">%g</text>\n",
                SX(v), py + ph, SX(v), py + ph + 4, SX(v), py + ph + 17, v);
    fprintf(f,
            "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
            "stroke=\"#333\"/>\n",
            px, py, pw, ph);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" text-anchor=\"middle\">epoch</text>\n",
            px + pw / 2, py + ph + 34);
    fprintf(f,
            "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" text-anchor=\"middle\" "
            "transform=\"rotate(-90 %.1f %.1f)\">%s</text>\n",
            x0 + 14, py + ph / 2, x0 + 14, py + ph / 2, ylabel);
    size_t longest = 0; /* legend: its longest label sets where it starts */
    for (int k = 0; k < n_series; k++)
        if (strlen(s[k].label) > longest) longest = strlen(s[k].label);
    for (int k = 0; k < n_series; k++) {
        const struct series *c = &s[k];
        if (c->n > 1) {
            fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%.1f\" points=\"",
                    c->color, c->width);
            for (int i = 0; i < c->n; i++)
                if (isfinite(c->y[i])) fprintf(f, "%.1f,%.1f ", SX(c->x[i]), SY(c->y[i]));
            fputs("\"/>\n", f);
        }
        for (int i = 0; c->dots && i < c->n; i++)
            if (isfinite(c->y[i]))
                fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"/>\n", SX(c->x[i]),
                        SY(c->y[i]), c->color);
        double ly = py + 14 + 16 * k, lx = px + pw - 8 - 6.5 * (double)longest - 28;
        fprintf(f,
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                "stroke-width=\"2.5\"/>\n"
                "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\">%s</text>\n",
                lx, ly, lx + 22, ly, c->color, lx + 28, ly + 4, c->label);
    }
#undef SX
#undef SY
}

struct curves {
    int n_steps, cap_steps, n_epochs;
    double *step_x, *step_loss;                       /* per --curve-every steps: x in epochs */
    double *ep_x, *train_loss, *test_loss, *test_acc; /* per epoch */
};

static int write_svg(const char *path, const struct curves *c, const char *subtitle, long every) {
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) return cli_errorf(EXIT_FAIL, "cannot write %s: %s", tmp, strerror(errno));
    double W = 960, H = 400, xmax = c->n_epochs;
    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
            "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\">\n"
            "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
            "<text x=\"%.0f\" y=\"20\" font-size=\"12\" text-anchor=\"middle\" "
            "fill=\"#555\">",
            W, H, W, H, W / 2);
    for (const char *s = subtitle; *s; s++) { /* escape for XML */
        if (*s == '<')
            fputs("&lt;", f);
        else if (*s == '>')
            fputs("&gt;", f);
        else if (*s == '&')
            fputs("&amp;", f);
        else
            fputc(*s, f);
    }
    fputs("</text>\n", f);
    char every_label[64];
    snprintf(every_label, sizeof every_label, "train (mean of %ld steps)", every);
    struct series loss[3] = {
        {every_label, "#9ecae1", c->n_steps, c->step_x, c->step_loss, false, 1.2},
        {"train (epoch mean)", "#08519c", c->n_epochs, c->ep_x, c->train_loss, true, 2},
        {"test", "#d94801", c->n_epochs, c->ep_x, c->test_loss, true, 2},
    };
    struct series acc[1] = {{"test", "#d94801", c->n_epochs, c->ep_x, c->test_acc, true, 2}};
    svg_panel(f, 0, 24, W / 2, H - 24, "loss", "cross-entropy", xmax, loss, 3, false);
    svg_panel(f, W / 2, 24, W / 2, H - 24, "accuracy", "test accuracy", xmax, acc, 1, true);
    fputs("</svg>\n", f);
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        remove(tmp);
        return cli_errorf(EXIT_FAIL, "cannot write %s: %s", path, strerror(errno));
    }
    return 0;
}

static bool curves_push_step(struct curves *c, double x, double y) {
    if (c->n_steps == c->cap_steps) {
        int cap = c->cap_steps ? c->cap_steps * 2 : 256;
        double *a = realloc(c->step_x, sizeof *a * (size_t)cap);
        if (!a) return false;
        c->step_x = a;
        double *b = realloc(c->step_loss, sizeof *b * (size_t)cap);
        if (!b) return false;
        c->step_loss = b;
        c->cap_steps = cap;
    }
    c->step_x[c->n_steps] = x;
    c->step_loss[c->n_steps++] = y;
    return true;
}

/* ---- training -------------------------------------------------------------------------- */

struct batcher {
    int rank; /* of the model's input: 4 [B,1,H,W], 3 [B,H,W], 2 [B,H*W] */
    int64_t h, w;
    double mean, std;
    float *x;   /* [batch, h*w] */
    int64_t *y; /* [batch] */
    ox_tensor in[2];
};

/* Fill the batch with images idx[0..n) of s. */
static void make_batch(struct batcher *b, const struct split *s, const int64_t *idx, int64_t n,
                       const char *input_name) {
    int64_t hw = b->h * b->w;
    float scale = (float)(1.0 / (255.0 * b->std)), shift = (float)(b->mean / b->std);
    for (int64_t i = 0; i < n; i++) {
        const uint8_t *p = s->images + idx[i] * hw;
        float *q = b->x + i * hw;
        for (int64_t k = 0; k < hw; k++) q[k] = (float)p[k] * scale - shift;
        b->y[i] = s->labels[idx[i]];
    }
    ox_tensor *t = &b->in[0];
    *t = (ox_tensor){.dtype = OX_FLOAT, .rank = b->rank, .data = b->x, .name = input_name};
    t->dims[0] = n;
    if (b->rank == 4)
        t->dims[1] = 1, t->dims[2] = b->h, t->dims[3] = b->w;
    else if (b->rank == 3)
        t->dims[1] = b->h, t->dims[2] = b->w;
    else
        t->dims[1] = hw;
    b->in[1] =
        (ox_tensor){.dtype = OX_INT64, .rank = 1, .dims = {n}, .data = b->y, .name = "labels"};
}

/* Mean cross-entropy (summed into *loss) and correct predictions of scores [n, C]. */
static int score(const ox_tensor *out, const int64_t *y, int64_t n, double *loss, int64_t *right) {
    if (out->dtype != OX_FLOAT || out->rank != 2 || out->dims[0] != n)
        return cli_errorf(EXIT_FAIL, "the model's first output is not class scores [%lld, C]",
                          (long long)n);
    int64_t c = out->dims[1];
    const float *z = out->data;
    for (int64_t i = 0; i < n; i++) {
        const float *r = z + i * c;
        int64_t best = 0;
        double mx = r[0], sum = 0;
        for (int64_t k = 1; k < c; k++)
            if (r[k] > mx) mx = r[k], best = k;
        for (int64_t k = 0; k < c; k++) sum += exp((double)r[k] - mx);
        if (y[i] >= c)
            return cli_errorf(EXIT_FAIL, "label %lld is out of the model's %lld classes",
                              (long long)y[i], (long long)c);
        *loss += log(sum) + mx - r[y[i]];
        *right += best == y[i];
    }
    return 0;
}

static void progress(bool tty, int epoch, int epochs, int64_t step, int64_t n_steps, double loss,
                     double t0, int64_t images) {
    double el = now_s() - t0, rate = el > 0 ? (double)images / el : 0;
    double eta = step > 0 ? el / (double)step * (double)(n_steps - step) : 0;
    if (tty) {
        char bar[31];
        int fill = (int)(30 * step / (n_steps ? n_steps : 1));
        for (int k = 0; k < 30; k++) bar[k] = k < fill ? '#' : '.';
        bar[30] = 0;
        fprintf(stderr, "\repoch %d/%d [%s] %lld/%lld  loss %.4f  %.0f img/s  %.0fs left \033[K",
                epoch, epochs, bar, (long long)step, (long long)n_steps, loss, rate, eta);
    } else {
        fprintf(stderr, "epoch %d/%d: step %lld/%lld, loss %.4f, %.0f img/s\n", epoch, epochs,
                (long long)step, (long long)n_steps, loss, rate);
    }
    fflush(stderr);
}

struct train_args {
    const char *model, *data, *out, *curve;
    long epochs, batch, threads, limit, test_limit, curve_every;
    uint64_t seed;
    bool no_shuffle;
    ox_trainer_options topt;
    double mean, std;
};

static int run_training(const struct train_args *a) {
    int rc = 0;
    struct split tr = {0}, te = {0};
    ox_model *m = NULL;
    ox_trainer *t = NULL;
    struct batcher b = {0};
    struct curves cv = {0};
    int64_t *order = NULL, *test_idx = NULL;
    const ox_tensor **outs = NULL;
    double t_start = now_s();
    if ((rc = read_split(a->data, "train", a->limit, &tr))) goto done;
    if ((rc = read_split(a->data, "t10k", a->test_limit, &te))) goto done;
    if (te.h != tr.h || te.w != tr.w) {
        rc = cli_errorf(EXIT_FAIL, "test images are %lldx%lld, training images %lldx%lld",
                        (long long)te.h, (long long)te.w, (long long)tr.h, (long long)tr.w);
        goto done;
    }
    ox_model_options lo = {.no_optimize = true, .limits = cli_limits};
    ox_status st = ox_model_load_with(a->model, &lo, &m);
    if (st) {
        const char *msg = cli_lib_msg(st);
        rc = strstr(msg, a->model) ? cli_errorf(EXIT_FAIL, "%s", msg)
                                   : cli_errorf(EXIT_FAIL, "%s: %s", a->model, msg);
        goto done;
    }
    /* the input: its rank says the layout; fixed dims must agree with the images */
    ox_tensor desc;
    if (ox_model_n_inputs(m) < 1 || ox_model_input(m, 0, &desc, NULL) != OX_OK ||
        desc.dtype != OX_FLOAT || desc.rank < 2 || desc.rank > 4) {
        rc = cli_errorf(EXIT_FAIL,
                        "%s: the first input is not float images [N,1,H,W], [N,H,W] or "
                        "[N,H*W]",
                        a->model);
        goto done;
    }
    int64_t want[4] = {-1, 1, tr.h, tr.w};
    if (desc.rank == 3) want[1] = tr.h, want[2] = tr.w;
    if (desc.rank == 2) want[1] = tr.h * tr.w;
    for (int k = 1; k < desc.rank; k++)
        if (desc.dims[k] >= 0 && desc.dims[k] != want[k]) {
            rc = cli_errorf(EXIT_FAIL, "%s: input '%s' dim %d is %lld; the images need %lld",
                            a->model, desc.name, k, (long long)desc.dims[k], (long long)want[k]);
            goto done;
        }
    const char *input_name = desc.name;
    ox_trainer_options topt = a->topt;
    topt.loss = OX_LOSS_SOFTMAX_CROSS_ENTROPY;
    topt.n_threads = (int)a->threads;
    double t0 = now_s();
    if ((st = ox_trainer_create(m, &topt, &t))) {
        rc = cli_errorf(EXIT_FAIL, "%s: %s", a->model, cli_lib_msg(st));
        goto done;
    }
    double t_create = now_s() - t0;
    int64_t n_values = 0;
    for (int i = 0; i < ox_trainer_n_params(t); i++) {
        const ox_tensor *p;
        ox_trainer_param(t, i, &p);
        n_values += ox_tensor_numel(p);
    }
    static const char *opt_names[] = {"sgd", "adam", "adamw"};
    printf("train %lld images %lldx%lld, test %lld; %s: %d parameters (%lld values); %s lr %g; "
           "batch %ld; trainer built in %.2f s\n",
           (long long)tr.n, (long long)tr.h, (long long)tr.w, (long long)te.n, a->model,
           ox_trainer_n_params(t), (long long)n_values, opt_names[topt.optimizer], ox_trainer_lr(t),
           a->batch, t_create);
    fflush(stdout);
    int64_t hw = tr.h * tr.w, batch = a->batch;
    b = (struct batcher){.rank = desc.rank, .h = tr.h, .w = tr.w, .mean = a->mean, .std = a->std};
    b.x = malloc(sizeof(float) * (size_t)(batch * hw));
    b.y = malloc(sizeof(int64_t) * (size_t)batch);
    order = malloc(sizeof(int64_t) * (size_t)tr.n);
    test_idx = malloc(sizeof(int64_t) * (size_t)te.n);
    outs = calloc((size_t)ox_model_n_outputs(m) + 1, sizeof *outs);
    cv.ep_x = calloc((size_t)a->epochs * 4, sizeof(double));
    if (!b.x || !b.y || !order || !test_idx || !outs || !cv.ep_x) {
        rc = cli_errorf(EXIT_FAIL, "out of memory");
        goto done;
    }
    cv.train_loss = cv.ep_x + a->epochs;
    cv.test_loss = cv.ep_x + 2 * a->epochs;
    cv.test_acc = cv.ep_x + 3 * a->epochs;
    for (int64_t i = 0; i < tr.n; i++) order[i] = i;
    for (int64_t i = 0; i < te.n; i++) test_idx[i] = i;
    uint64_t rng = a->seed;
    bool tty = isatty(STDERR_FILENO);
    int64_t n_steps = (tr.n + batch - 1) / batch;
    int64_t report = tty ? 1 : (n_steps + 9) / 10; /* plain lines: about ten per epoch */
    double train_total = 0;
    for (int e = 0; e < a->epochs; e++) {
        for (int64_t i = a->no_shuffle ? 0 : tr.n - 1; i > 0; i--) { /* Fisher-Yates */
            int64_t j = (int64_t)(rng_next(&rng) % (uint64_t)(i + 1));
            int64_t x = order[i];
            order[i] = order[j], order[j] = x;
        }
        double te0 = now_s(), sum = 0, win = 0, last_draw = 0;
        int n_win = 0;
        for (int64_t s = 0; s < n_steps; s++) {
            int64_t off = s * batch, n = tr.n - off < batch ? tr.n - off : batch;
            make_batch(&b, &tr, order + off, n, input_name);
            float loss;
            if ((st = ox_trainer_step(t, b.in, 2, &loss))) {
                if (tty) fputc('\n', stderr);
                rc = cli_errorf(EXIT_FAIL, "epoch %d, step %lld: %s", e + 1, (long long)s + 1,
                                cli_lib_msg(st));
                goto done;
            }
            sum += (double)loss * (double)n;
            win += loss;
            n_win++;
            if (n_win == a->curve_every || s + 1 == n_steps) {
                double x = e + (double)(s + 1) / (double)n_steps;
                if (!curves_push_step(&cv, x, win / n_win)) {
                    rc = cli_errorf(EXIT_FAIL, "out of memory");
                    goto done;
                }
                win = 0, n_win = 0;
            }
            double tnow = now_s();
            if ((tty && (tnow - last_draw > 0.1 || s + 1 == n_steps)) ||
                (!tty && ((s + 1) % report == 0 && s + 1 < n_steps))) {
                progress(tty, e + 1, (int)a->epochs, s + 1, n_steps, sum / (double)(off + n), te0,
                         off + n);
                last_draw = tnow;
            }
        }
        if (tty) fputc('\n', stderr);
        double t_train = now_s() - te0;
        train_total += t_train;
        /* test */
        double tt0 = now_s(), test_loss = 0;
        int64_t right = 0;
        for (int64_t off = 0; off < te.n; off += batch) {
            int64_t n = te.n - off < batch ? te.n - off : batch;
            make_batch(&b, &te, test_idx + off, n, input_name);
            if ((st = ox_trainer_evaluate(t, b.in, 1, outs))) {
                rc = cli_errorf(EXIT_FAIL, "test: %s", cli_lib_msg(st));
                goto done;
            }
            if ((rc = score(outs[0], b.y, n, &test_loss, &right))) goto done;
        }
        double t_test = now_s() - tt0;
        cv.n_epochs = e + 1;
        cv.ep_x[e] = e + 1;
        cv.train_loss[e] = sum / (double)tr.n;
        cv.test_loss[e] = test_loss / (double)(te.n ? te.n : 1);
        cv.test_acc[e] = (double)right / (double)(te.n ? te.n : 1);
        printf("epoch %d/%ld: train loss %.4f, test loss %.4f, test accuracy %.2f%%, "
               "train %.1f s (%.0f img/s), test %.1f s, peak RSS %.1f MiB\n",
               e + 1, a->epochs, cv.train_loss[e], cv.test_loss[e], 100 * cv.test_acc[e], t_train,
               (double)tr.n / t_train, t_test, cli_peak_rss_kb() / 1024.0);
        fflush(stdout);
    }
    if (a->out) {
        if ((st = ox_trainer_save(t, a->out))) {
            rc = cli_errorf(EXIT_FAIL, "%s: %s", a->out, cli_lib_msg(st));
            goto done;
        }
        printf("wrote %s\n", a->out);
    }
    if (a->curve) {
        char sub[512];
        snprintf(sub, sizeof sub, "%s, %s lr %g, batch %ld, %lld training images", a->model,
                 opt_names[topt.optimizer], ox_trainer_lr(t), a->batch, (long long)tr.n);
        if ((rc = write_svg(a->curve, &cv, sub, a->curve_every))) goto done;
        printf("wrote %s\n", a->curve);
    }
    printf("done: %ld epochs in %.1f s (training %.1f s), final test accuracy %.2f%%, peak RSS "
           "%.1f MiB\n",
           a->epochs, now_s() - t_start, train_total,
           cv.n_epochs ? 100 * cv.test_acc[cv.n_epochs - 1] : 0.0, cli_peak_rss_kb() / 1024.0);
done:
    ox_trainer_free(t);
    ox_model_free(m);
    split_free(&tr);
    split_free(&te);
    free(b.x);
    free(b.y);
    free(order);
    free(test_idx);
    free(outs);
    free(cv.ep_x);
    free(cv.step_x);
    free(cv.step_loss);
    return rc;
}

int cmd_train(int argc, char **argv) {
    cli_prefix = "train: ";
    struct train_args a = {.epochs = 1, .batch = 64, .curve_every = 50, .std = 1};
    a.topt.optimizer = OX_OPTIM_ADAM;
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) return cli_usage(usage_train);
        if (strcmp(arg, "--nesterov") == 0 || strcmp(arg, "--no-shuffle") == 0) {
            if (arg[2] == 'n' && arg[3] == 'e')
                a.topt.nesterov = true;
            else
                a.no_shuffle = true;
            continue;
        }
        if (arg[0] != '-' || !arg[1]) {
            if (a.model) return cli_errorf(EXIT_USAGE, "one model at a time ('%s' is extra)", arg);
            a.model = arg;
            continue;
        }
        if (i + 1 >= argc) return cli_errorf(EXIT_USAGE, "%s needs a value", arg);
        const char *v = argv[++i];
        long n;
        double d;
        if (strcmp(arg, "--data") == 0) {
            a.data = v;
        } else if (strcmp(arg, "-o") == 0 || strcmp(arg, "--output") == 0) {
            a.out = v;
        } else if (strcmp(arg, "--curve") == 0) {
            a.curve = v;
        } else if (strcmp(arg, "--optimizer") == 0) {
            if (strcmp(v, "sgd") == 0)
                a.topt.optimizer = OX_OPTIM_SGD;
            else if (strcmp(v, "adam") == 0)
                a.topt.optimizer = OX_OPTIM_ADAM;
            else if (strcmp(v, "adamw") == 0)
                a.topt.optimizer = OX_OPTIM_ADAMW;
            else
                return cli_errorf(EXIT_USAGE, "--optimizer is sgd, adam or adamw, not '%s'", v);
        } else if (strcmp(arg, "--epochs") == 0 || strcmp(arg, "--batch") == 0 ||
                   strcmp(arg, "--threads") == 0 || strcmp(arg, "--limit") == 0 ||
                   strcmp(arg, "--test-limit") == 0 || strcmp(arg, "--curve-every") == 0) {
            bool zero_ok = strcmp(arg, "--threads") == 0;
            if (!parse_long(v, zero_ok ? 0 : 1, strcmp(arg, "--batch") == 0 ? 1 << 20 : 1L << 30,
                            &n))
                return cli_errorf(EXIT_USAGE, "%s takes a whole number%s, not '%s'", arg,
                                  zero_ok ? " >= 0" : " > 0", v);
            if (arg[2] == 'e')
                a.epochs = n;
            else if (arg[2] == 'b')
                a.batch = n;
            else if (arg[2] == 't' && arg[3] == 'h')
                a.threads = n;
            else if (arg[2] == 'l')
                a.limit = n;
            else if (arg[2] == 't')
                a.test_limit = n;
            else
                a.curve_every = n;
        } else if (strcmp(arg, "--seed") == 0) {
            if (!parse_long(v, 0, __LONG_MAX__, &n))
                return cli_errorf(EXIT_USAGE, "--seed takes a whole number >= 0, not '%s'", v);
            a.seed = (uint64_t)n;
        } else if (strcmp(arg, "--lr") == 0 || strcmp(arg, "--momentum") == 0 ||
                   strcmp(arg, "--weight-decay") == 0) {
            bool lr = arg[2] == 'l';
            if (!parse_num(v, &d) || d < 0 || (lr && d == 0))
                return cli_errorf(EXIT_USAGE, "%s takes a number %s, not '%s'", arg,
                                  lr ? "> 0" : ">= 0", v);
            if (lr)
                a.topt.lr = d;
            else if (arg[2] == 'm')
                a.topt.momentum = d;
            else
                a.topt.weight_decay = d;
        } else if (strcmp(arg, "--normalize") == 0) {
            char buf[128], *comma;
            snprintf(buf, sizeof buf, "%s", v);
            comma = strchr(buf, ',');
            if (comma) *comma = 0;
            if (!comma || !parse_num(buf, &a.mean) || !parse_num(comma + 1, &a.std) || !(a.std > 0))
                return cli_errorf(EXIT_USAGE, "--normalize takes MEAN,STD (STD > 0), not '%s'", v);
        } else {
            return cli_errorf(EXIT_USAGE, "unknown option '%s' (see onnxexec train --help)", arg);
        }
    }
    if (a.epochs > 1000000) return cli_errorf(EXIT_USAGE, "--epochs is at most 1000000");
    if (!a.model || !a.data)
        return cli_errorf(EXIT_USAGE, "needs a model and --data DIR (usage: onnxexec train MODEL "
                                      "--data DIR)");
    if (a.topt.nesterov && !(a.topt.momentum > 0))
        return cli_errorf(EXIT_USAGE, "--nesterov needs --momentum > 0");
    if ((a.topt.momentum > 0 || a.topt.nesterov) && a.topt.optimizer != OX_OPTIM_SGD)
        return cli_errorf(EXIT_USAGE, "--momentum and --nesterov are for --optimizer sgd");
    return run_training(&a);
}
