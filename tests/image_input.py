#!/usr/bin/python3
"""Image inputs (`onnxexec run -i x=FILE.png|jpg --preprocess imagenet|scale|none`,
tools/image.c) against PIL and torchvision: an Identity model hands the tensor the tool made
back as its output, which is compared with
- imagenet: torchvision's Resize(256), CenterCrop(224), ToTensor(), Normalize(ImageNet) on the
  PIL image, for a landscape and an odd-sized portrait image (PIL rounds to 8 bits after each
  resampling pass, onnxexec computes the passes in float and rounds the same way: at most one
  pixel level apart, and nearly all equal);
- none and scale, no resize: np.asarray(PIL image) exactly (PNG, and JPEG decoded by the same
  libjpeg-turbo), in NCHW and NHWC layouts;
- a grey [1,1,28,28] input: PIL's resize to 28x28 then convert("L"), / 255;
and errors that say what to do (a bad --preprocess, imagenet on a grey input, a file that is
not an image).
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper

try:
    from PIL import Image
except ImportError:
    print("skip: PIL is not installed (apt-get install python3-pil)")
    sys.exit(77)

ap = argparse.ArgumentParser()
ap.add_argument("--onnxexec", required=True)
args = ap.parse_args()
fails = 0


def check(cond, what):
    global fails
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        fails += 1


tmp = tempfile.mkdtemp(prefix="ox_image_")


def identity(name, shape):
    g = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "id",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)])
    path = os.path.join(tmp, name + ".onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


def run(model, image, *extra, code=0):
    out = os.path.join(tmp, "out")
    shutil.rmtree(out, ignore_errors=True)
    r = subprocess.run([args.onnxexec, "run", model, "-i", "x=" + image, "-o", out, *extra],
                       capture_output=True, text=True)
    if r.returncode != code:
        print(r.stdout, r.stderr)
    check(r.returncode == code, "run %s %s %s exits %d" % (os.path.basename(model),
                                                           os.path.basename(image),
                                                           " ".join(extra), code))
    return np.load(os.path.join(out, "y.npy")) if code == 0 else r


def make_image(w, h, seed):
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([x * 255.0 / w, y * 255.0 / h, (x + y) * 127.0 / (w + h)], -1)
    noise = rng.normal(0, 30, (h, w, 3))
    return Image.fromarray(np.clip(base + noise, 0, 255).astype(np.uint8), "RGB")


nchw224 = identity("nchw224", [1, 3, 224, 224])
nchw_free = identity("nchw_free", [1, 3, "H", "W"])
nhwc_free = identity("nhwc_free", [1, "H", "W", 3])
grey28 = identity("grey28", [1, 1, 28, 28])

try:
    import torch  # noqa: F401
    from torchvision import transforms
    tv = transforms.Compose([transforms.Resize(256), transforms.CenterCrop(224),
                             transforms.ToTensor(),
                             transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
except ImportError:
    tv = None
    print("skip the torchvision comparison: torchvision is not installed")

for w, h, seed in ((320, 240, 1), (201, 333, 2)):
    img = make_image(w, h, seed)
    png = os.path.join(tmp, "img_%dx%d.png" % (w, h))
    img.save(png)
    arr = np.asarray(img)
    probe = subprocess.run([args.onnxexec, "run", nchw_free, "-i", "x=" + png],
                           capture_output=True, text=True)
    if "built without" in probe.stderr:
        print("skip: " + probe.stderr.strip())
        sys.exit(77)
    # imagenet
    got = run(nchw224, png, "--preprocess", "imagenet")
    if tv is not None:
        want = tv(img).numpy()[None]
        d = np.abs(got - want)
        level = 1 / 255 / 0.224 + 1e-5  # one pixel level in the channel of the smallest std
        check(got.shape == want.shape and d.max() <= level and (d < 1e-5).mean() > 0.9,
              "imagenet %dx%d: torchvision's tensor, max diff %.4f (one level %.4f), %.1f%% equal"
              % (w, h, d.max(), level, 100 * (d < 1e-5).mean()))
    # none / scale, no resize: exact
    got = run(nchw_free, png, "--preprocess", "none")
    check(np.array_equal(got, arr.transpose(2, 0, 1)[None].astype(np.float32)),
          "none %dx%d NCHW: the PNG's pixels" % (w, h))
    got = run(nhwc_free, png, "--preprocess", "scale")
    check(np.array_equal(got, (arr[None].astype(np.float32) / np.float32(255))) or
          np.abs(got - arr[None] / 255.0).max() < 1e-7,
          "scale %dx%d NHWC: the PNG's pixels / 255" % (w, h))
    jpg = os.path.join(tmp, "img_%dx%d.jpg" % (w, h))
    img.save(jpg, quality=90)
    got = run(nchw_free, jpg, "--preprocess", "none")
    check(np.array_equal(got, np.asarray(Image.open(jpg).convert("RGB")).transpose(2, 0, 1)[None]
                         .astype(np.float32)), "none %dx%d JPEG: PIL's decoded pixels" % (w, h))
    # grey, resized to the fixed 28x28
    got = run(grey28, png, "--preprocess", "scale")
    want = np.asarray(img.resize((28, 28), Image.BILINEAR).convert("L"))[None, None] / 255.0
    d = np.abs(got - want)
    check(d.max() <= 1 / 255 + 1e-6 and (d < 1e-6).mean() > 0.9,
          "grey 28x28 from %dx%d: PIL resize + convert('L'), max diff %.4f, %.1f%% equal"
          % (w, h, d.max(), 100 * (d < 1e-6).mean()))

# default preprocessing is said; errors say what to do
r = subprocess.run([args.onnxexec, "run", nchw224, "-i", "x=" + png], capture_output=True,
                   text=True)
check(r.returncode == 0 and "--preprocess imagenet" in r.stderr,
      "no --preprocess: imagenet for 3 channels, and a note says so")
r = run(nchw224, png, "--preprocess", "bogus", code=2)
check("expected imagenet, scale or none" in r.stderr, "a bad --preprocess is named")
r = run(grey28, png, "--preprocess", "imagenet", code=1)
check("use --preprocess scale or none" in r.stderr, "imagenet on a grey input says what to use")
fake = os.path.join(tmp, "fake.png")
open(fake, "wb").write(b"not a picture at all")
r = run(nchw224, fake, code=1)
check("neither a PNG nor a JPEG" in r.stderr, "a file that is not an image: %s" % r.stderr.strip())

shutil.rmtree(tmp)
print("%d failed" % fails if fails else "all passed")
sys.exit(1 if fails else 0)
