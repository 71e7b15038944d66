/* Image files as model inputs (see tools/image.h). */
#include "tools/image.h"

#include "tools/cli.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef OX_HAVE_PNG
#include <png.h>
#endif
#ifdef OX_HAVE_JPEG
#include <jpeglib.h>
#include <setjmp.h>
#endif

/* The largest image read: 2^28 pixels (16384 x 16384). */
#define IMAGE_MAX_PIXELS ((size_t)1 << 28)

bool image_is_file(const char *path) {
    return cli_has_ext(path, ".png") || cli_has_ext(path, ".jpg") || cli_has_ext(path, ".jpeg");
}

/* An 8-bit RGB image, rows top to bottom. */
struct rgb {
    int w, h;
    unsigned char *px; /* w * h * 3, malloc'd */
};

static bool size_ok(int64_t w, int64_t h, const char *path, char *err, size_t errlen) {
    if (w < 1 || h < 1 || (size_t)w > IMAGE_MAX_PIXELS / (size_t)h) {
        snprintf(err, errlen,
                 "%s: %lld x %lld pixels: not an image size read here (at most %zu "
                 "pixels)",
                 path, (long long)w, (long long)h, IMAGE_MAX_PIXELS);
        return false;
    }
    return true;
}

#ifdef OX_HAVE_PNG
static int read_png(const char *path, struct rgb *im, char *err, size_t errlen) {
    png_image p;
    memset(&p, 0, sizeof p);
    p.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_file(&p, path)) {
        snprintf(err, errlen, "%s: not a PNG file libpng can read (%s)", path, p.message);
        return -1;
    }
    if (!size_ok(p.width, p.height, path, err, errlen)) {
        png_image_free(&p);
        return -1;
    }
    p.format = PNG_FORMAT_RGB; /* grey expanded; alpha composited onto black */
    im->w = (int)p.width;
    im->h = (int)p.height;
    im->px = malloc(PNG_IMAGE_SIZE(p));
    if (!im->px) {
        png_image_free(&p);
        snprintf(err, errlen, "%s: out of memory", path);
        return -1;
    }
    png_color bg = {0, 0, 0};
    if (!png_image_finish_read(&p, &bg, im->px, 0, NULL)) {
        snprintf(err, errlen, "%s: broken PNG file (%s)", path, p.message);
        free(im->px);
        im->px = NULL;
        png_image_free(&p);
        return -1;
    }
    return 0;
}
#else
static int read_png(const char *path, struct rgb *im, char *err, size_t errlen) {
    (void)im;
    snprintf(err, errlen,
             "%s: this onnxexec was built without libpng: install it (apt-get install "
             "libpng-dev) and build again, or give the input as .npy",
             path);
    return -1;
}
#endif

#ifdef OX_HAVE_JPEG
struct jpeg_fail {
    struct jpeg_error_mgr mgr;
    jmp_buf jump;
    char msg[JMSG_LENGTH_MAX];
};

static void jpeg_fail_exit(j_common_ptr c) {
    struct jpeg_fail *f = (struct jpeg_fail *)c->err;
    f->mgr.format_message(c, f->msg);
    longjmp(f->jump, 1);
}

static void jpeg_quiet(j_common_ptr c) {
    (void)c;
}

static int read_jpeg(const char *path, struct rgb *im, char *err, size_t errlen) {
    FILE *file = fopen(path, "rb");
    if (!file) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    struct jpeg_decompress_struct c;
    struct jpeg_fail fail;
    unsigned char *volatile px = NULL;
    c.err = jpeg_std_error(&fail.mgr);
    fail.mgr.error_exit = jpeg_fail_exit;
    fail.mgr.output_message = jpeg_quiet;
    if (setjmp(fail.jump)) {
        snprintf(err, errlen, "%s: not a JPEG file libjpeg can read (%s)", path, fail.msg);
        goto fail;
    }
    jpeg_create_decompress(&c);
    jpeg_stdio_src(&c, file);
    jpeg_read_header(&c, TRUE);
    c.out_color_space = JCS_RGB;
    if (!size_ok(c.image_width, c.image_height, path, err, errlen)) goto fail;
    jpeg_start_decompress(&c);
    px = malloc((size_t)c.output_width * c.output_height * 3);
    if (!px) {
        snprintf(err, errlen, "%s: out of memory", path);
        goto fail;
    }
    while (c.output_scanline < c.output_height) {
        JSAMPROW row = px + (size_t)c.output_scanline * c.output_width * 3;
        jpeg_read_scanlines(&c, &row, 1);
    }
    jpeg_finish_decompress(&c);
    im->w = (int)c.output_width;
    im->h = (int)c.output_height;
    im->px = px;
    jpeg_destroy_decompress(&c);
    fclose(file);
    return 0;
fail:
    free(px);
    jpeg_destroy_decompress(&c);
    fclose(file);
    return -1;
}
#else
static int read_jpeg(const char *path, struct rgb *im, char *err, size_t errlen) {
    (void)im;
    snprintf(err, errlen,
             "%s: this onnxexec was built without libjpeg: install it (apt-get install "
             "libjpeg62-turbo-dev) and build again, or give the input as .npy",
             path);
    return -1;
}
#endif

/* ---- PIL's bilinear resampling (Resample.c), in float with 8-bit results per pass ------ */

static double triangle(double x) {
    x = fabs(x);
    return x < 1 ? 1 - x : 0;
}

/* Output pixel i reads n[i] inputs from first[i] with weights w[i * ksize ...]. */
struct coeffs {
    int ksize;
    int *first, *n;
    double *w;
};

static bool make_coeffs(int in, int out, struct coeffs *c) {
    double scale = (double)in / out, fs = scale < 1 ? 1 : scale, support = fs;
    c->ksize = (int)ceil(support) * 2 + 1;
    c->first = malloc(sizeof(int) * (size_t)out);
    c->n = malloc(sizeof(int) * (size_t)out);
    c->w = calloc((size_t)out * (size_t)c->ksize, sizeof(double));
    if (!c->first || !c->n || !c->w) return false;
    for (int o = 0; o < out; o++) {
        double center = (o + 0.5) * scale, sum = 0;
        int lo = (int)(center - support + 0.5), hi = (int)(center + support + 0.5);
        if (lo < 0) lo = 0;
        if (hi > in) hi = in;
        double *w = c->w + (size_t)o * (size_t)c->ksize;
        for (int x = 0; x < hi - lo && x < c->ksize; x++)
            sum += w[x] = triangle((x + lo - center + 0.5) / fs);
        for (int x = 0; x < hi - lo && x < c->ksize; x++)
            if (sum != 0) w[x] /= sum;
        c->first[o] = lo;
        c->n[o] = hi - lo < c->ksize ? hi - lo : c->ksize;
    }
    return true;
}

static void free_coeffs(struct coeffs *c) {
    free(c->first), free(c->n), free(c->w);
}

static unsigned char clip8(double v) {
    v = floor(v + 0.5);
    return (unsigned char)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* Resize im to w x h (horizontal pass, then vertical, as PIL does). */
static int resize(struct rgb *im, int w, int h, char *err, size_t errlen) {
    if (im->w == w && im->h == h) return 0;
    struct coeffs cx = {0}, cy = {0};
    unsigned char *mid = NULL, *out = NULL;
    int rc = -1;
    if (!make_coeffs(im->w, w, &cx) || !make_coeffs(im->h, h, &cy) ||
        !(mid = malloc((size_t)w * (size_t)im->h * 3)) ||
        !(out = malloc((size_t)w * (size_t)h * 3))) {
        snprintf(err, errlen, "out of memory resizing an image to %d x %d", w, h);
        goto done;
    }
    for (int y = 0; y < im->h; y++)
        for (int x = 0; x < w; x++)
            for (int ch = 0; ch < 3; ch++) {
                double s = 0;
                const double *k = cx.w + (size_t)x * (size_t)cx.ksize;
                for (int i = 0; i < cx.n[x]; i++)
                    s += k[i] * im->px[((size_t)y * (size_t)im->w + (size_t)(cx.first[x] + i)) * 3 +
                                       (size_t)ch];
                mid[((size_t)y * (size_t)w + (size_t)x) * 3 + (size_t)ch] = clip8(s);
            }
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int ch = 0; ch < 3; ch++) {
                double s = 0;
                const double *k = cy.w + (size_t)y * (size_t)cy.ksize;
                for (int i = 0; i < cy.n[y]; i++)
                    s += k[i] *
                         mid[((size_t)(cy.first[y] + i) * (size_t)w + (size_t)x) * 3 + (size_t)ch];
                out[((size_t)y * (size_t)w + (size_t)x) * 3 + (size_t)ch] = clip8(s);
            }
    free(im->px);
    im->px = out;
    im->w = w;
    im->h = h;
    out = NULL;
    rc = 0;
done:
    free(mid);
    free(out);
    free_coeffs(&cx);
    free_coeffs(&cy);
    return rc;
}

/* ---- layout ------------------------------------------------------------------------------ */

int image_read(const char *path, enum image_preprocess pp, int rank, const int64_t *want,
               ox_tensor *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    /* where C, H, W sit in the input */
    int ic = 1, ih = 2, iw = 3, r = 4;
    if (rank == 3) {
        ic = 0, ih = 1, iw = 2, r = 3;
    } else if (rank == 4 && (want[3] == 1 || want[3] == 3) && want[1] != 1 && want[1] != 3) {
        ih = 1, iw = 2, ic = 3;
    } else if (rank >= 0 && rank != 4) {
        snprintf(err, errlen,
                 "%s: the input has rank %d; an image becomes [1,C,H,W], [C,H,W] or [1,H,W,C]",
                 path, rank);
        return -1;
    }
    int64_t c = rank >= 0 && want[ic] >= 0 ? want[ic] : 3;
    int64_t th = rank >= 0 ? want[ih] : -1, tw = rank >= 0 ? want[iw] : -1;
    if (c != 1 && c != 3) {
        snprintf(err, errlen, "%s: the input has %lld channels; an image gives 1 or 3", path,
                 (long long)c);
        return -1;
    }
    if (pp == IMAGE_IMAGENET && c != 3) {
        snprintf(err, errlen,
                 "%s: --preprocess imagenet normalises 3 channels, the input has 1; use "
                 "--preprocess scale or none",
                 path);
        return -1;
    }
    if (rank == 4 && want[0] > 1) {
        snprintf(err, errlen,
                 "%s: the input's batch is fixed at %lld; an image file gives one (stack images "
                 "into a .npy for more)",
                 path, (long long)want[0]);
        return -1;
    }
    struct rgb im = {0};
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    unsigned char head[8] = {0};
    size_t got = fread(head, 1, sizeof head, f);
    fclose(f);
    bool png = got >= 8 && memcmp(head, "\x89PNG\r\n\x1a\n", 8) == 0;
    bool jpg = got >= 3 && head[0] == 0xff && head[1] == 0xd8 && head[2] == 0xff;
    if (!png && !jpg) {
        snprintf(err, errlen, "%s: neither a PNG nor a JPEG file (by its first bytes)", path);
        return -1;
    }
    if ((png ? read_png : read_jpeg)(path, &im, err, errlen)) return -1;

    /* the crop: the whole (resized) image, or a centred window; every size checked before it
     * is used (the model's dims are the file's) */
    int crop_h, crop_w;
    if (pp == IMAGE_IMAGENET) {
        int64_t ch = th > 0 ? th : tw > 0 ? tw : 224, cw = tw > 0 ? tw : ch;
        if (!size_ok(cw, ch, path, err, errlen)) goto fail;
        crop_h = (int)ch, crop_w = (int)cw;
        int64_t shorter = (int64_t)((double)(ch < cw ? ch : cw) * 256 / 224);
        /* torchvision Resize(int): the shorter side to `shorter`, the longer in proportion */
        int64_t nw, nh;
        if (im.w <= im.h)
            nw = shorter, nh = shorter * im.h / im.w;
        else
            nh = shorter, nw = shorter * im.w / im.h;
        if (!size_ok(nw, nh, path, err, errlen) || resize(&im, (int)nw, (int)nh, err, errlen))
            goto fail;
    } else {
        int64_t nw = tw > 0 ? tw : im.w, nh = th > 0 ? th : im.h;
        if (!size_ok(nw, nh, path, err, errlen) || resize(&im, (int)nw, (int)nh, err, errlen))
            goto fail;
        crop_h = im.h, crop_w = im.w;
    }
    /* torchvision CenterCrop: offsets rounded half to even; outside the image is 0 */
    int top = (int)nearbyint((im.h - crop_h) / 2.0), left = (int)nearbyint((im.w - crop_w) / 2.0);

    out->dtype = OX_FLOAT;
    out->rank = r;
    if (r == 4) out->dims[0] = 1;
    out->dims[ic] = c;
    out->dims[ih] = crop_h;
    out->dims[iw] = crop_w;
    size_t n = (size_t)c * (size_t)crop_h * (size_t)crop_w;
    float *d = malloc(n * sizeof(float));
    if (!d) {
        snprintf(err, errlen, "%s: out of memory", path);
        goto fail;
    }
    static const double mean[3] = {0.485, 0.456, 0.406}, std[3] = {0.229, 0.224, 0.225};
    bool hwc = ic == 3;
    for (int y = 0; y < crop_h; y++)
        for (int x = 0; x < crop_w; x++) {
            int sy = y + top, sx = x + left;
            bool in = sy >= 0 && sy < im.h && sx >= 0 && sx < im.w;
            const unsigned char *p =
                in ? im.px + ((size_t)sy * (size_t)im.w + (size_t)sx) * 3 : NULL;
            for (int ch = 0; ch < c; ch++) {
                double v;
                if (!p)
                    v = 0;
                else if (c == 1)
                    v = (double)((19595u * p[0] + 38470u * p[1] + 7471u * p[2] + 0x8000u) >> 16);
                else
                    v = p[ch];
                if (pp != IMAGE_NONE) v /= 255;
                if (pp == IMAGE_IMAGENET) v = (v - mean[ch]) / std[ch];
                size_t at =
                    hwc ? ((size_t)y * (size_t)crop_w + (size_t)x) * (size_t)c + (size_t)ch
                        : ((size_t)ch * (size_t)crop_h + (size_t)y) * (size_t)crop_w + (size_t)x;
                d[at] = (float)v;
            }
        }
    out->data = d;
    free(im.px);
    return 0;
fail:
    free(im.px);
    return -1;
}
