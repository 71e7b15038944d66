/* Image files as model inputs (`onnxexec run -i x=cat.png --preprocess imagenet`).
 *
 *     ox_tensor t;
 *     char err[512];
 *     int64_t want[4] = {1, 3, 224, 224};          // the model's input shape, -1 where free
 *     if (image_read("cat.jpg", IMAGE_IMAGENET, 4, want, &t, err, sizeof err)) puts(err);
 *     ...
 *     ox_tensor_free_data(&t);                     // t owns its data
 *
 * PNG through libpng, JPEG through libjpeg (Debian libpng-dev, libjpeg62-turbo-dev; each
 * optional at build time: without it, reading that format fails saying what to install).
 * Pixels are decoded as 8-bit RGB (grey files expanded) and made float32 in the layout the
 * model's input asks for: [1,C,H,W] (or [C,H,W], or [1,H,W,C] when the last dim is 1 or 3 and
 * the second is not), C = 3, or 1 (luma as PIL's convert("L"): (19595 R + 38470 G + 7471 B +
 * 2^15) >> 16). Resizing is PIL's bilinear filter (antialiased when shrinking), computed in
 * float, and the crops are torchvision's (CenterCrop rounding).
 */
#ifndef OX_TOOLS_IMAGE_H
#define OX_TOOLS_IMAGE_H

#include "onnxexec.h"

#include <stdbool.h>
#include <stddef.h>

enum image_preprocess {
    IMAGE_NONE,     /* pixel values 0..255 as floats */
    IMAGE_SCALE,    /* / 255 */
    IMAGE_IMAGENET, /* torchvision's Resize(256), CenterCrop(224) (or the input's fixed H and W,
                       resized by 256/224 first), / 255, mean (0.485, 0.456, 0.406), std (0.229,
                       0.224, 0.225) */
};

/* True for a file name ending in .png, .jpg or .jpeg. */
bool image_is_file(const char *path);

/* Read an image into *out (float32, owning its data) for a model input of `rank` dims `want`
 * (-1 for a free dim; rank < 0: unknown, taken as [1,3,H,W]). With IMAGE_NONE and
 * IMAGE_SCALE, an image whose size differs from the input's fixed H and W is resized to them.
 * 0, or -1 with a message in err. */
int image_read(const char *path, enum image_preprocess pp, int rank, const int64_t *want,
               ox_tensor *out, char *err, size_t errlen);

#endif
