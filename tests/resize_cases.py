#!/usr/bin/python3
"""Backend-layout cases for Resize on the shapes segmentation and flow models send, with
PyTorch's F.interpolate as the oracle.

    tests/resize_cases.py OUTDIR [--onnxexec BIN]

deeplabv3/fcn/lraspp end with a bilinear upsampling of the class map by 8 to 16 (the
planes path of kernels/cpu/resize.c, a row interpolated once and reused by many output
rows); beside it: align_corners, bicubic (cubic_coeff_a -0.75, as PyTorch), non-integer
scales, an antialiased bilinear and bicubic downscale (opset 18; PyTorch's, like PIL's,
drops the taps outside the image, exclude_outside=1, and its bicubic uses a = -0.5), a rank-3 linear resize of
the last axis only, a 5-D trilinear one (the general path), batch 2 with several channels,
and an input with a NaN (it must spread only to the outputs whose taps read it).
"""
import argparse
import os
import shutil
import subprocess
import sys

import torch
import torch.nn.functional as F
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from case_dir import write_case  # noqa: E402

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("outdir")
ap.add_argument("--onnxexec", help="run BIN test OUTDIR after writing the cases")
args = ap.parse_args()
out = args.outdir
shutil.rmtree(out, ignore_errors=True)
gen = torch.Generator().manual_seed(3)


def case(name, x_shape, size, mode, align_corners=False, antialias=False, nan_at=None):
    x = torch.rand(x_shape, generator=gen) * 4 - 2
    if nan_at is not None:
        x[nan_at] = float("nan")
    kw = {} if mode == "nearest" else {"align_corners": align_corners}
    if antialias:
        kw["antialias"] = True
    y = F.interpolate(x, size=size, mode=mode, **kw)
    onnx_mode = {"bilinear": "linear", "linear": "linear", "trilinear": "linear",
                 "bicubic": "cubic"}[mode]
    ctm = "align_corners" if align_corners else "pytorch_half_pixel"
    sizes = list(x_shape[:2]) + list(size)
    attrs = dict(mode=onnx_mode, coordinate_transformation_mode=ctm)
    if mode == "bicubic":  # PyTorch's antialiased bicubic is PIL's: a = -0.5
        attrs["cubic_coeff_a"] = -0.5 if antialias else -0.75
    if antialias:  # PyTorch (as PIL) drops the taps outside the image and renormalises
        attrs["antialias"] = 1
        attrs["exclude_outside"] = 1
    nodes = [helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], **attrs)]
    g = helper.make_graph(nodes, name,
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, sizes)],
                          [numpy_helper.from_array(torch.tensor(sizes).numpy(), "sizes")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    write_case(out, name, model, [("x", x.numpy())], [("y", y.numpy())])


case("bilinear_x16", (1, 21, 14, 14), (224, 224), "bilinear")
case("bilinear_x8_batch2", (2, 5, 28, 21), (224, 168), "bilinear")
case("bilinear_align", (1, 3, 7, 9), (50, 61), "bilinear", align_corners=True)
case("bilinear_fraction", (1, 4, 13, 17), (30, 23), "bilinear")
case("bicubic_x4", (1, 3, 10, 12), (40, 48), "bicubic")
case("bicubic_align", (1, 2, 9, 8), (25, 31), "bicubic", align_corners=True)
case("bilinear_down", (1, 3, 40, 50), (17, 13), "bilinear")
case("bilinear_down_antialias", (1, 3, 64, 80), (15, 22), "bilinear", antialias=True)
case("bicubic_down_antialias", (1, 2, 45, 45), (16, 20), "bicubic", antialias=True)
case("linear_rank3", (2, 5, 19), (57,), "linear")
case("trilinear", (1, 2, 4, 6, 5), (8, 9, 10), "trilinear")
case("bilinear_nan", (1, 2, 6, 6), (24, 24), "bilinear", nan_at=(0, 1, 2, 3))

print("wrote %d cases to %s" % (len(os.listdir(out)), out))
if args.onnxexec:
    sys.exit(subprocess.run([args.onnxexec, "test", out, "--atol", "1e-5"]).returncode)
