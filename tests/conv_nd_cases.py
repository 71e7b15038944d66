#!/usr/bin/python3
"""Backend-layout cases for 1-D and 3-D convolutions (and a few 2-D ones beside them), with
PyTorch's conv1d/conv2d/conv3d as the oracle: the shapes video and audio models send
(torchvision's r3d_18, r2plus1d_18, s3d; 1-D encoders).

    tests/conv_nd_cases.py OUTDIR [--onnxexec BIN]

Each case is one Conv (or Conv -> Relu, Conv + Add, which the optimizer fuses) with float32
inputs in [-1, 1) and weights scaled by 1/sqrt(fan-in), so outputs are O(1) and an element
off by one missed tap is far outside the tolerance. Covered: 3x3x3 stride 1 pad 1 (r3d),
(1,3,3) and (3,1,1) kernels (r2plus1d), strides 2 and 3 (the gathered patches), dilation,
asymmetric pads, kernels wider than the padded input along a leading dim (taps that fall
outside it), groups, batch 2, rows of the last dim longer than one 16-lane run, 1x1x1
(pointwise), float64 (the double path), and 1-D convolutions (one row). Convolutions whose
end taps read only padding (DeepLab's atrous 3x3 at dilation 24/36 on small maps, a 3x3 on
a 1x1 map), which run with those taps dropped, one weight shared by a trimmed and an
untrimmed convolution, and weights fed at run time. Then MaxPool and AveragePool in 3-D and 1-D (s3d's windows, ceil_mode,
dilation, asymmetric pads, count_include_pad, a NaN that must win its max windows), against
torch's pooling of an explicitly padded input. With --onnxexec the
cases run twice: on the packed AVX-512 GEMM where the CPU has it, and with
OX_SGEMM_PACKED=0 (the OpenBLAS path of CPUs without it); the script exits non-zero if
either run fails.
"""
import argparse
import os
import shutil
import subprocess
import sys

import numpy as np
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from case_dir import write_case  # noqa: E402

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("outdir")
ap.add_argument("--onnxexec", help="run BIN test OUTDIR (both GEMM paths) after writing")
args = ap.parse_args()
out = args.outdir
shutil.rmtree(out, ignore_errors=True)
gen = torch.Generator().manual_seed(7)

TYPES = {torch.float32: TensorProto.FLOAT, torch.float64: TensorProto.DOUBLE}


def rand(*shape, dtype=torch.float32, scale=1.0):
    return ((torch.rand(shape, generator=gen, dtype=torch.float64) * 2 - 1) * scale).to(dtype)


def case(name, x_shape, m, k, strides=None, pads=None, dil=None, group=1, bias=True,
         post=None, dtype=torch.float32, w_input=False):
    """Conv of x [x_shape] by m filters of extent k; pads as ONNX gives them (begins, ends);
    post: None, "relu" or "add" (a residual of the output's shape)."""
    nsp = len(k)
    strides = strides or [1] * nsp
    dil = dil or [1] * nsp
    pads = pads or [0] * (2 * nsp)
    c = x_shape[1]
    fan_in = c // group * int(np.prod(k))
    x = rand(*x_shape, dtype=dtype)
    w = rand(m, c // group, *k, dtype=dtype, scale=fan_in ** -0.5)
    b = rand(m, dtype=dtype) if bias else None
    # torch pads symmetrically: pad the input explicitly (zeros), then convolve unpadded
    tp = []
    for i in reversed(range(nsp)):
        tp += [pads[i], pads[nsp + i]]
    conv = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[nsp]
    with torch.no_grad():
        y = conv(F.pad(x, tp), w, b, stride=strides, dilation=dil, groups=group)
    t = TYPES[dtype]
    inits = [] if w_input else [numpy_helper.from_array(w.numpy(), "w")]
    conv_in = ["x", "w"]
    if bias:
        inits.append(numpy_helper.from_array(b.numpy(), "b"))
        conv_in.append("b")
    attrs = dict(kernel_shape=list(k), strides=strides, pads=pads, dilations=dil, group=group)
    inputs = [helper.make_tensor_value_info("x", t, list(x_shape))]
    feeds = [x]
    if w_input:  # weights fed at run time: not constant, never trimmed
        inputs.append(helper.make_tensor_value_info("w", t, list(w.shape)))
        feeds.append(w)
    if post is None:
        nodes = [helper.make_node("Conv", conv_in, ["y"], **attrs)]
    elif post == "relu":
        nodes = [helper.make_node("Conv", conv_in, ["c"], **attrs),
                 helper.make_node("Relu", ["c"], ["y"])]
        y = torch.relu(y)
    else:
        z = rand(*y.shape, dtype=dtype)
        inputs.append(helper.make_tensor_value_info("z", t, list(y.shape)))
        feeds.append(z)
        nodes = [helper.make_node("Conv", conv_in, ["c"], **attrs),
                 helper.make_node("Add", ["c", "z"], ["y"])]
        y = y + z
    g = helper.make_graph(nodes, name, inputs, [helper.make_tensor_value_info("y", t,
                                                                              list(y.shape))],
                          inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    names = [i.name for i in inputs]
    write_case(out, name, model, [(nm, v.numpy()) for v, nm in zip(feeds, names)],
               [("y", y.numpy())])


# 3-D
case("c3_k3_s1_p1", (1, 5, 6, 9, 11), 7, (3, 3, 3), pads=[1] * 6)
case("c3_k3_s1_p1_relu", (1, 8, 4, 12, 20), 16, (3, 3, 3), pads=[1] * 6, post="relu")
case("c3_k3_s1_p1_add", (1, 8, 4, 12, 20), 16, (3, 3, 3), pads=[1] * 6, post="add")
case("c3_k133", (1, 6, 5, 14, 14), 9, (1, 3, 3), pads=[0, 1, 1, 0, 1, 1])
case("c3_k311", (1, 9, 7, 10, 10), 6, (3, 1, 1), pads=[1, 0, 0, 1, 0, 0])
case("c3_k311_s2", (1, 9, 8, 10, 10), 6, (3, 1, 1), strides=[2, 1, 1],
     pads=[1, 0, 0, 1, 0, 0])
case("c3_s2_asym_dil", (1, 4, 9, 13, 17), 5, (3, 3, 3), strides=[2, 2, 2],
     pads=[0, 1, 2, 2, 1, 0], dil=[2, 1, 2])
case("c3_s3_long_rows", (1, 3, 5, 7, 70), 8, (2, 3, 3), strides=[1, 3, 3],
     pads=[1, 1, 1, 0, 2, 2])
case("c3_stem_s122", (1, 3, 4, 40, 40), 12, (3, 7, 7), strides=[1, 2, 2], pads=[1, 3, 3] * 2)
case("c3_depth_beyond", (1, 4, 2, 6, 6), 5, (3, 3, 3), pads=[1] * 6)
case("c3_dil_beyond", (1, 4, 3, 5, 5), 6, (3, 3, 3), dil=[2, 1, 1], pads=[2, 1, 1, 2, 1, 1])
case("c3_groups_batch2", (2, 8, 4, 9, 9), 12, (3, 3, 3), pads=[1] * 6, group=2)
case("c3_pointwise", (1, 16, 4, 7, 9), 8, (1, 1, 1))
case("c3_no_bias", (1, 6, 5, 8, 8), 4, (2, 2, 2), strides=[2, 2, 2], bias=False)
case("c3_float64", (1, 4, 5, 7, 9), 6, (3, 3, 3), pads=[1, 0, 1, 1, 2, 0], dtype=torch.float64)
# taps that read only padding for every output (conv_trim): ASPP's atrous 3x3 at dilation
# 36 and 24 on a 14x14 map (a 1x1 remains), strided, a 3x3 on a 1x1 map, a partial trim of
# one dim, a 3-D kernel on one frame, fused residual Add; weights fed at run time (kept)
case("trim_aspp_d36", (1, 16, 14, 14), 8, (3, 3), pads=[36] * 4, dil=[36, 36])
case("trim_aspp_d24_s2", (1, 16, 14, 14), 8, (3, 3), strides=[2, 2], pads=[24] * 4,
     dil=[24, 24])
case("trim_aspp_d12_kept", (1, 16, 14, 14), 8, (3, 3), pads=[12] * 4, dil=[12, 12])
case("trim_3x3_on_1x1", (2, 8, 1, 1), 6, (3, 3), pads=[1] * 4, post="relu")
case("trim_partial_h", (1, 6, 5, 9), 7, (5, 5), pads=[6, 2, 6, 2], dil=[3, 1])
case("trim_3d_one_frame", (1, 4, 1, 6, 6), 5, (3, 3, 3), pads=[1] * 6)
case("trim_add", (1, 8, 7, 7), 8, (3, 3), pads=[9] * 4, dil=[9, 9], post="add")
case("trim_w_input", (1, 16, 14, 14), 8, (3, 3), pads=[36] * 4, dil=[36, 36], w_input=True)


def shared_weights_trimmed(name, shapes, pads, dil):
    """One weight [6, 8, 3, 3] for two convolutions with the same attributes on inputs of
    two sizes whose live taps differ. Each must pack its own taps (conv_weights_key)."""
    w = rand(6, 8, 3, 3, scale=72 ** -0.5)
    xs = [rand(*shape) for shape in shapes]
    tp = [pads[1], pads[3], pads[0], pads[2]]
    ys = [F.conv2d(F.pad(x, tp), w, dilation=dil) for x in xs]
    attrs = dict(kernel_shape=[3, 3], pads=pads, dilations=dil)
    nodes = [helper.make_node("Conv", ["x%d" % i, "w"], ["y%d" % i], **attrs) for i in (0, 1)]
    vi = helper.make_tensor_value_info
    g = helper.make_graph(nodes, name,
                          [vi("x%d" % i, TensorProto.FLOAT, list(xs[i].shape)) for i in (0, 1)],
                          [vi("y%d" % i, TensorProto.FLOAT, list(ys[i].shape)) for i in (0, 1)],
                          [numpy_helper.from_array(w.numpy(), "w")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    write_case(out, name, model, [("x%d" % i, xs[i].numpy()) for i in (0, 1)],
               [("y%d" % i, ys[i].numpy()) for i in (0, 1)])


# on 14x14 only the centre tap is live, on 40x40 all are
shared_weights_trimmed("trim_shared_weight", [(1, 8, 14, 14), (1, 8, 40, 40)], [36] * 4,
                       [36, 36])
# 2 x 3 live taps against 3 x 2: the same number of weights, other taps
shared_weights_trimmed("trim_shared_same_count", [(1, 8, 2, 3), (1, 8, 3, 2)], [0, 0, 1, 1],
                       [1, 1])

# 1-D
case("c1_k5_p2", (1, 6, 100), 10, (5,), pads=[2, 2])
case("c1_k3_s2_dil2", (2, 8, 83), 12, (3,), strides=[2], dil=[2], pads=[1, 3])
case("c1_groups3", (1, 12, 40), 9, (4,), pads=[0, 3], group=3)
case("c1_s3_relu", (1, 5, 200), 7, (7,), strides=[3], pads=[3, 3], post="relu")
case("c1_float64", (1, 3, 33), 4, (3,), pads=[1, 1], dtype=torch.float64)
# 2-D beside them (the same packing): stride 3 and dilation with asymmetric pads
case("c2_s3_dil2", (1, 5, 23, 41), 6, (3, 3), strides=[3, 3], dil=[2, 2], pads=[1, 2, 3, 0])
case("c2_k1x7", (1, 6, 17, 17), 8, (1, 7), pads=[0, 3, 0, 3])



def pool_case(name, x_shape, op, k, strides=None, pads=None, dil=None, ceil=0, include_pad=0):
    """MaxPool or AveragePool of x [x_shape]. The oracle pools an explicitly padded input
    (-inf for max; for average the sums of zeros over the counts of a ones mask, or of the
    padded extent with count_include_pad)."""
    nsp = len(k)
    strides = strides or [1] * nsp
    dil = dil or [1] * nsp
    pads = pads or [0] * (2 * nsp)
    x = rand(*x_shape)
    x[(0,) * x.dim()] = float("nan") if op == "MaxPool" else 0.5  # a NaN wins a max window
    tp = []
    for i in reversed(range(nsp)):
        tp += [pads[i], pads[nsp + i]]
    # ceil_mode: extend the end so that the last window that starts inside is kept
    extra = []
    for i in range(nsp):
        span = (k[i] - 1) * dil[i] + 1
        n = x_shape[2 + i] + pads[i] + pads[nsp + i]
        o = -(-(n - span) // strides[i]) + 1 if ceil else (n - span) // strides[i] + 1
        if ceil and (o - 1) * strides[i] >= x_shape[2 + i] + pads[i]:
            o -= 1  # a window must start inside the input or the begin padding
        extra.append(max(0, (o - 1) * strides[i] + span - n))
    tp_ext = list(tp)
    for i in range(nsp):
        tp_ext[2 * (nsp - 1 - i) + 1] += extra[i]
    if op == "MaxPool":
        pool = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[nsp]
        y = pool(F.pad(x, tp_ext, value=-float("inf")), k, strides, dilation=dil)
    else:
        pool = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}[nsp]
        sums = pool(F.pad(x, tp_ext), k, strides) * float(np.prod(k))
        if include_pad:  # counts the begin and end padding, not what ceil_mode adds
            mask = F.pad(F.pad(torch.ones_like(x), tp, value=1.0),
                         [e for i in reversed(range(nsp)) for e in (0, extra[i])])
        else:
            mask = F.pad(torch.ones_like(x), tp_ext)
        y = sums / (pool(mask, k, strides) * float(np.prod(k)))
    attrs = dict(kernel_shape=list(k), strides=strides, pads=pads, ceil_mode=ceil)
    if op == "MaxPool":
        attrs["dilations"] = dil
    else:
        attrs["count_include_pad"] = include_pad
    g = helper.make_graph([helper.make_node(op, ["x"], ["y"], **attrs)], name,
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(y.shape))])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])
    write_case(out, name, model, [("x", x.numpy())], [("y", y.numpy())])


# pooling, 3-D (s3d's MaxPool3d k3 s1 p1 and k(1,3,3) s(1,2,2)), 1-D, 2-D average
pool_case("max3_k3_s1_p1", (1, 6, 5, 9, 11), "MaxPool", (3, 3, 3), pads=[1] * 6)
pool_case("max3_k133_s122", (1, 4, 6, 13, 13), "MaxPool", (1, 3, 3), strides=[1, 2, 2],
          pads=[0, 1, 1, 0, 1, 1])
pool_case("max3_k2_s2_ceil", (1, 3, 5, 7, 9), "MaxPool", (2, 2, 2), strides=[2, 2, 2], ceil=1)
pool_case("max3_dil_asym", (2, 3, 7, 8, 40), "MaxPool", (2, 3, 3), strides=[1, 2, 3],
          pads=[1, 0, 2, 0, 2, 1], dil=[2, 1, 2])
pool_case("max1_k3_s2", (1, 5, 50), "MaxPool", (3,), strides=[2], pads=[1, 1])
pool_case("avg3_k3_s1_p1", (1, 6, 5, 9, 11), "AveragePool", (3, 3, 3), pads=[1] * 6)
pool_case("avg3_k3_s1_p1_incl", (1, 6, 5, 9, 11), "AveragePool", (3, 3, 3), pads=[1] * 6,
          include_pad=1)
pool_case("avg3_incl_ceil", (1, 2, 5, 6, 7), "AveragePool", (2, 3, 2), strides=[2, 2, 2],
          pads=[0, 1, 0, 0, 0, 0], ceil=1, include_pad=1)
pool_case("avg3_k2_s2_ceil", (1, 3, 5, 7, 9), "AveragePool", (2, 2, 2), strides=[2, 2, 2],
          ceil=1)
pool_case("avg3_asym", (1, 2, 6, 7, 30), "AveragePool", (3, 2, 3), strides=[2, 1, 2],
          pads=[1, 0, 2, 0, 1, 1])
pool_case("avg1_k4_s3_incl", (2, 3, 41), "AveragePool", (4,), strides=[3], pads=[2, 1],
          include_pad=1)
pool_case("avg2_k3_s2_p1", (1, 4, 15, 17), "AveragePool", (3, 3), strides=[2, 2],
          pads=[1, 1, 1, 1])

print("wrote %d cases to %s" % (len(os.listdir(out)), out))
if args.onnxexec:
    rc = 0
    for env in ({}, {"OX_SGEMM_PACKED": "0"}):
        print("-- %s" % (" ".join("%s=%s" % kv for kv in env.items()) or "default GEMM"),
              flush=True)
        r = subprocess.run([args.onnxexec, "test", out, "--atol", "1e-5"],
                           env=dict(os.environ, **env))
        rc |= r.returncode
    sys.exit(rc)
