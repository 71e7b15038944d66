#!/usr/bin/python3
"""Backend-layout cases for the integer operators on model-sized shapes (ConvInteger,
QLinearConv, MatMulInteger, QLinearMatMul), with exact integer arithmetic in numpy as the
oracle.

    tests/int_gemm_cases.py OUTDIR --onnxexec BIN

The official cases are a few elements each; these cover what the GEMM of kernels/cpu/igemm.c
splits and pads: output channels not a multiple of its 8-row panels, output positions not a
multiple of its 32-column blocks, odd K (its pairs of k), groups and depthwise, pointwise,
strides, dilations and asymmetric padding in 1, 2 and 3 dimensions, batches, the extremes of
the 8-bit ranges (sums near the largest that int32 holds), int8 and uint8 on either side,
per-channel zero points and scales, a bias, MatMul batches that broadcast B, and weights
fed at run time (packed at each run rather than once); DynamicQuantizeLinear (ties, one-signed
inputs) alone and before a MatMulInteger, as onnxruntime's dynamic quantization writes it. Every case
must agree exactly: on the AVX-512 paths (uint8 by int8 four k at a time with vpdpbusd, int16
pairs with vpdpwssd, and with vpmaddwd), and with OX_SGEMM_PACKED=0 (the scalar loops).
"""
import itertools
import os
import subprocess
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from case_dir import case_args, write_case  # noqa: E402

args = case_args(__doc__)
out = args.outdir
rng = np.random.default_rng(11)
OT = {np.uint8: TensorProto.UINT8, np.int8: TensorProto.INT8, np.int32: TensorProto.INT32}
RANGE = {np.uint8: (0, 255), np.int8: (-128, 127)}


def ints(dt, shape, extreme=None):
    lo, hi = RANGE[dt]
    if extreme == "low":
        return np.full(shape, lo, dt)
    if extreme == "high":
        return np.full(shape, hi, dt)
    return rng.integers(lo, hi + 1, size=shape).astype(dt)


def conv_ref(x, w, strides, pads, dil, group):
    """Exact convolution of int64 arrays: x [N, C, *sp], w [M, C/group, *k]."""
    nsp = x.ndim - 2
    xp = np.pad(x, [(0, 0), (0, 0)] + [(pads[i], pads[i + nsp]) for i in range(nsp)])
    ks = w.shape[2:]
    outs = [(xp.shape[2 + i] - (ks[i] - 1) * dil[i] - 1) // strides[i] + 1 for i in range(nsp)]
    N, M, cg = x.shape[0], w.shape[0], w.shape[1]
    mg = M // group
    y = np.zeros([N, M] + outs, np.int64)
    for off in itertools.product(*[range(k) for k in ks]):
        sl = tuple(slice(off[i] * dil[i], off[i] * dil[i] + (outs[i] - 1) * strides[i] + 1,
                         strides[i]) for i in range(nsp))
        patch = xp[(slice(None), slice(None)) + sl]  # [N, C, *outs]
        for g in range(group):
            wg = w[g * mg:(g + 1) * mg, :, *off]  # [mg, cg]
            y[:, g * mg:(g + 1) * mg] += np.einsum("nc...,mc->nm...",
                                                   patch[:, g * cg:(g + 1) * cg], wg)
    return y


def vi(name, dt, shape):
    return helper.make_tensor_value_info(name, OT[dt], list(shape))


def save(name, nodes, inputs, outputs, inits, feeds, expected):
    g = helper.make_graph(nodes, name, inputs, outputs,
                          [numpy_helper.from_array(np.asarray(a), n) for n, a in inits])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    write_case(out, name, m, feeds, expected)


def save_int(name, nodes, x, w, w_fed, inits, y):
    """A case with input x, weights w (an initializer, or fed as a second input) and an int32
    output y; x and w: (name, array)."""
    ins, feeds = [vi(x[0], x[1].dtype.type, x[1].shape)], [x]
    if w_fed:
        ins.append(vi(w[0], w[1].dtype.type, w[1].shape))
        feeds.append(w)
    else:
        inits = inits + [w]
    save(name, nodes, ins, [vi("y", np.int32, y.shape)], inits, feeds, [("y", y.astype(np.int32))])


def conv_attrs(nsp, strides, pads, dil, group):
    return dict(strides=strides or [1] * nsp, pads=pads or [0] * (2 * nsp),
                dilations=dil or [1] * nsp, group=group)


def conv_integer(name, xshape, wshape, xt=np.uint8, wt=np.int8, strides=None, pads=None,
                 dil=None, group=1, xz=None, wz=None, extreme=None, w_fed=False):
    """w_fed: the weights an input of the graph (packed at every run, not once)."""
    nsp = len(xshape) - 2
    a = conv_attrs(nsp, strides, pads, dil, group)
    x = ints(xt, xshape, extreme and extreme[0])
    w = ints(wt, wshape, extreme and extreme[1])
    xzv = np.asarray(xz if xz is not None else 0, xt)
    wzv = np.asarray(wz if wz is not None else 0, wt)
    wz_b = wzv.reshape([-1] + [1] * (nsp + 1)) if wzv.ndim else wzv
    y = conv_ref(x.astype(np.int64) - xzv.astype(np.int64), w.astype(np.int64) - wz_b.astype(np.int64),
                 a["strides"], a["pads"], a["dilations"], group)
    assert np.abs(y).max() < 2 ** 31
    nodes = [helper.make_node("ConvInteger", ["x", "w", "xz", "wz"], ["y"], **a)]
    save_int(name, nodes, ("x", x), ("w", w), w_fed, [("xz", xzv), ("wz", wzv)], y)


conv_integer("convint_resnet_3x3", [1, 64, 56, 56], [64, 64, 3, 3], pads=[1, 1, 1, 1], xz=128)
conv_integer("convint_tails", [2, 7, 11, 13], [13, 7, 3, 3], strides=[2, 2], pads=[1, 0, 2, 1],
             xz=3, wz=-2)
conv_integer("convint_groups", [1, 8, 9, 9], [12, 2, 3, 3], group=4, pads=[1, 1, 1, 1], xz=7)
conv_integer("convint_depthwise", [1, 24, 15, 15], [24, 1, 3, 3], group=24, strides=[2, 2],
             pads=[1, 1, 1, 1], xz=128)
# K = 1 (one input channel, one tap per output): the 8-bit packing as large as the int16 one
conv_integer("convint_depthwise_1x1", [1, 16, 5, 5], [16, 1, 1, 1], group=16, xz=7)
conv_integer("convint_pointwise", [1, 40, 14, 14], [24, 40, 1, 1], xz=100)
conv_integer("convint_1d_dilated", [1, 5, 30], [6, 5, 5], dil=[2], pads=[3, 1], xz=9)
conv_integer("convint_3d", [1, 3, 5, 6, 7], [4, 3, 2, 3, 3], pads=[0, 1, 1, 1, 1, 0], xz=50)
conv_integer("convint_weights_fed", [1, 16, 12, 12], [20, 8, 3, 3], group=2, pads=[1, 1, 1, 1],
             xz=128, wz=3, w_fed=True)
conv_integer("convint_small", [1, 2, 3, 3], [3, 2, 2, 2], xz=1)
# the largest products: 255 x -128 summed over 2304 taps
conv_integer("convint_extremes", [1, 256, 6, 6], [9, 256, 3, 3], extreme=("high", "low"))
conv_integer("convint_int8_x_uint8_w", [1, 17, 10, 10], [10, 17, 3, 3], xt=np.int8, wt=np.uint8,
             pads=[1, 1, 1, 1], xz=-5, wz=np.arange(10) * 20 + 3)


def qlinear_conv(name, xshape, wshape, xt, wt, yt, per_channel, bias, extreme=(None, None),
                 **kw):
    nsp = len(xshape) - 2
    a = conv_attrs(nsp, kw.get("strides"), kw.get("pads"), kw.get("dil"), kw.get("group", 1))
    M = wshape[0]
    x, w = ints(xt, xshape, extreme[0]), ints(wt, wshape, extreme[1])
    xs, xz = np.float32(0.02), np.asarray(128 if xt == np.uint8 else -3, xt)
    ws = (rng.uniform(0.002, 0.01, M) if per_channel else np.asarray(0.005)).astype(np.float32)
    wz = np.asarray(kw.get("wz", 0), wt)
    ys, yz = np.float32(0.3), np.asarray(120 if yt == np.uint8 else 4, yt)
    b = rng.integers(-20000, 20000, M).astype(np.int32) if bias else None
    wz_b = wz.reshape([-1] + [1] * (nsp + 1)) if wz.ndim else wz
    acc = conv_ref(x.astype(np.int64) - int(xz), w.astype(np.int64) - wz_b.astype(np.int64),
                   a["strides"], a["pads"], a["dilations"], a["group"])
    if b is not None:
        acc = acc + b.reshape([1, M] + [1] * nsp)
    # the multiplier x_scale * w_scale / y_scale in float32, as the ONNX reference rounds it
    mult = (np.float32(xs) * np.broadcast_to(ws, [M]).astype(np.float32) / ys).astype(np.float32)
    r = np.rint(acc * mult.astype(np.float64).reshape([1, M] + [1] * nsp)) + int(yz)
    lo, hi = RANGE[yt]
    y = np.clip(r, lo, hi).astype(yt)
    ins = ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"] + (["b"] if bias else [])
    nodes = [helper.make_node("QLinearConv", ins, ["y"], **a)]
    inits = [("xs", xs), ("xz", xz), ("w", w), ("ws", ws), ("wz", wz), ("ys", ys), ("yz", yz)]
    if bias:
        inits.append(("b", b))
    save(name, nodes, [vi("x", xt, x.shape)], [vi("y", yt, y.shape)], inits, [("x", x)],
         [("y", y)])


qlinear_conv("qlinearconv_per_channel", [1, 32, 28, 28], [45, 32, 3, 3], np.uint8, np.int8,
             np.uint8, True, True, pads=[1, 1, 1, 1])
qlinear_conv("qlinearconv_int8_strided", [2, 19, 17, 15], [21, 19, 5, 5], np.int8, np.int8,
             np.int8, False, False, strides=[2, 2], pads=[2, 1, 2, 2])
# kernels/cpu/qconv8.c's form (2-D, group 1, uint8 by int8 with zero points of 0): a stem
# of 3 channels (one 4-byte group, mostly padding) with two images; channels not a multiple
# of 4 against 70 outputs (a block of 32 and a tail of 6), a 3 x 2 kernel, unequal strides
# and dilations and padding on every side, int8 output; a pointwise layer of stride 2
# without bias (the tap table's only tap); 512 channels at the extremes of both ranges
# (sums near -1.5e8), a 7 x 7 map (tiles of 7 pixels)
qlinear_conv("qlinearconv_stem", [2, 3, 37, 29], [64, 3, 7, 7], np.uint8, np.int8, np.uint8,
             True, True, strides=[2, 2], pads=[3, 3, 3, 3])
qlinear_conv("qlinearconv_odd_geometry", [1, 17, 23, 26], [70, 17, 3, 2], np.uint8, np.int8,
             np.int8, True, True, strides=[1, 2], pads=[1, 0, 2, 1], dil=[2, 1])
qlinear_conv("qlinearconv_pointwise_s2", [1, 64, 20, 18], [33, 64, 1, 1], np.uint8, np.int8,
             np.uint8, False, False, strides=[2, 2])
qlinear_conv("qlinearconv_extremes", [1, 512, 7, 7], [40, 512, 3, 3], np.uint8, np.int8,
             np.uint8, True, True, pads=[1, 1, 1, 1], extreme=("high", "low"))
# few channels and a wide kernel, folded into channels (qconv8.c fold_cols; the stem above
# too): 5 channels, a 3x4 kernel of column dilation 2, unequal strides and padding; one
# channel (a grayscale stem) 5x5
qlinear_conv("qlinearconv_folded_dilated", [1, 5, 19, 23], [40, 5, 3, 4], np.uint8, np.int8,
             np.uint8, True, True, strides=[2, 1], pads=[1, 2, 0, 3], dil=[1, 2])
qlinear_conv("qlinearconv_folded_gray", [2, 1, 28, 28], [32, 1, 5, 5], np.uint8, np.int8,
             np.int8, False, True, pads=[2, 2, 2, 2])

# kernels/cpu/qdw8.c's form (2-D depthwise, any 8-bit types and zero points): 3x3 of stride
# 1 with a row tail (21 = 16 + 5 outputs); stride 2 with two images (32 bytes as words);
# 5x5 int8 by uint8 with weight zero points per channel, int8 output; stride 3 across
# (which qdw8.c leaves to the general form), dilation 2, a 3x2 kernel and unequal padding;
# 7x7 at the extremes of both ranges (the largest sums, exact in float below 2^24)
qlinear_conv("qlinearconv_depthwise", [1, 37, 23, 21], [37, 1, 3, 3], np.uint8, np.int8,
             np.uint8, True, True, group=37, pads=[1, 1, 1, 1])
qlinear_conv("qlinearconv_depthwise_s2", [2, 19, 40, 35], [19, 1, 3, 3], np.uint8, np.int8,
             np.uint8, True, False, group=19, strides=[2, 2], pads=[1, 1, 1, 1])
qlinear_conv("qlinearconv_depthwise_5x5_zero_points", [1, 12, 19, 33], [12, 1, 5, 5], np.int8,
             np.uint8, np.int8, True, True, group=12, strides=[2, 2], pads=[2, 2, 2, 2],
             wz=np.arange(12) * 20 + 3)
qlinear_conv("qlinearconv_depthwise_odd_geometry", [1, 9, 17, 29], [9, 1, 3, 2], np.uint8,
             np.int8, np.uint8, False, True, group=9, strides=[1, 3], pads=[2, 0, 1, 3],
             dil=[2, 2])
qlinear_conv("qlinearconv_depthwise_extremes", [1, 16, 11, 11], [16, 1, 7, 7], np.uint8,
             np.int8, np.uint8, True, True, group=16, pads=[3, 3, 3, 3], extreme=("high", "low"))


def matmul_integer(name, ashape, bshape, at, bt, za=None, zb=None, b_fed=False):
    a, b = ints(at, ashape), ints(bt, bshape)
    zav = np.asarray(za if za is not None else 0, at)
    zbv = np.asarray(zb if zb is not None else 0, bt)
    za_b = zav.reshape(-1, 1) if zav.ndim == 1 else zav  # per row of A ([M] or [..., M, 1])
    y = np.matmul(a.astype(np.int64) - za_b.astype(np.int64), b.astype(np.int64) - zbv.astype(np.int64))
    nodes = [helper.make_node("MatMulInteger", ["a", "b", "za", "zb"], ["y"])]
    save_int(name, nodes, ("a", a), ("b", b), b_fed, [("za", zav), ("zb", zbv)], y)


matmul_integer("matmulint_bert_like", [2, 37, 129], [129, 77], np.uint8, np.int8, za=131,
               zb=np.arange(77) % 5 - 2)
matmul_integer("matmulint_b_fed", [3, 5, 40], [3, 40, 33], np.uint8, np.uint8, za=2, zb=200,
               b_fed=True)
# batches of A times one B are one product of all their rows: zero points per row of M and
# per row of each batch
matmul_integer("matmulint_batched_row_zero_points", [3, 9, 33], [33, 40], np.uint8, np.int8,
               za=np.arange(9) * 7, zb=1)
matmul_integer("matmulint_batched_zero_point_per_batch_row", [2, 9, 33], [33, 40], np.int8,
               np.int8, za=np.arange(18).reshape(2, 9, 1) - 9)
# uint8 A by int8 B with no zero point: the 8-bit form (column sums of B correct A's zero
# points), per row of M and per row of each batch
matmul_integer("matmulint_u8s8_row_zero_points", [3, 9, 35], [35, 70], np.uint8, np.int8,
               za=np.arange(9) * 7)
matmul_integer("matmulint_u8s8_zero_point_per_batch_row", [2, 9, 33], [33, 40], np.uint8,
               np.int8, za=np.arange(18).reshape(2, 9, 1) * 3, zb=0)
matmul_integer("matmulint_row_zero_points", [9, 33], [33, 70], np.int8, np.uint8,
               za=np.arange(9) - 4, zb=128)


def qlinear_matmul(name, ashape, bshape, at, bt, yt, per_col):
    a, b = ints(at, ashape), ints(bt, bshape)
    N = bshape[-1]
    as_, az = np.float32(0.03), np.asarray(100 if at == np.uint8 else -7, at)
    bs = (rng.uniform(0.001, 0.01, N) if per_col else np.asarray(0.004)).astype(np.float32)
    bz = (np.asarray(rng.integers(0, 255, N) if bt == np.uint8 else rng.integers(-9, 9, N), bt)
          if per_col else np.asarray(0, bt))
    ys, yz = np.float32(0.5), np.asarray(128 if yt == np.uint8 else 0, yt)
    acc = np.matmul(a.astype(np.int64) - int(az), b.astype(np.int64) - bz.astype(np.int64))
    mult = (np.float32(as_) * np.broadcast_to(bs, [N]).astype(np.float32) / ys).astype(np.float32)
    lo, hi = RANGE[yt]
    y = np.clip(np.rint(acc * mult.astype(np.float64)) + int(yz), lo, hi).astype(yt)
    nodes = [helper.make_node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"],
                              ["y"])]
    save(name, nodes, [vi("a", at, a.shape)], [vi("y", yt, y.shape)],
         [("as", as_), ("az", az), ("b", b), ("bs", bs), ("bz", bz), ("ys", ys), ("yz", yz)],
         [("a", a)], [("y", y)])


qlinear_matmul("qlinearmatmul_per_column", [3, 41, 70], [70, 45], np.uint8, np.int8, np.uint8, True)
qlinear_matmul("qlinearmatmul_int8", [19, 128], [128, 8], np.int8, np.uint8, np.int8, False)

def dynamic_quantize(x):
    """DynamicQuantizeLinear in float32: the range with 0 in it, over 255; zero point and
    values rounded half to even and saturated to uint8."""
    mn, mx = np.float32(min(0, x.min())), np.float32(max(0, x.max()))
    scale = np.float32((mx - mn) / np.float32(255))
    zp = np.float32(np.clip(np.rint(np.float32(0) - mn / scale), 0, 255))
    y = np.clip(np.rint(x / scale) + zp, 0, 255).astype(np.uint8)
    return y, scale, np.uint8(zp)


def dyn_quant_case(name, x):
    y, s, z = dynamic_quantize(x)
    nodes = [helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])]
    g = helper.make_graph(nodes, name,
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                          [vi("y", np.uint8, y.shape),
                           helper.make_tensor_value_info("s", TensorProto.FLOAT, []),
                           vi("z", np.uint8, [])])
    write_case(out, name, helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]),
               [("x", x)], [("y", y), ("s", np.asarray(s)), ("z", np.asarray(z))])


x = rng.standard_normal((3, 77, 41)).astype(np.float32) * 3
x.reshape(-1)[::97] = np.float32(0.5) * np.float32((x.max() - min(0, x.min())) / 255)  # ties
dyn_quant_case("dynquant_mixed", x)
dyn_quant_case("dynquant_positive", rng.uniform(0.5, 9, (129,)).astype(np.float32))
dyn_quant_case("dynquant_negative", rng.uniform(-9, -0.5, (5, 33)).astype(np.float32))

# onnxruntime's dynamically quantized MatMul: DynamicQuantizeLinear, MatMulInteger, Cast, Mul
x = rng.standard_normal((2, 45, 96)).astype(np.float32)
wq = ints(np.int8, (96, 70))
ws = np.float32(0.02)
xq, xs, xz = dynamic_quantize(x)
acc = np.matmul(xq.astype(np.int64) - int(xz), wq.astype(np.int64)).astype(np.int32)
y = acc.astype(np.float32) * np.float32(xs * ws)
nodes = [helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
         helper.make_node("MatMulInteger", ["xq", "wq", "xz"], ["acc"]),
         helper.make_node("Cast", ["acc"], ["accf"], to=TensorProto.FLOAT),
         helper.make_node("Mul", ["xs", "ws"], ["s"]),
         helper.make_node("Mul", ["accf", "s"], ["y"])]
g = helper.make_graph(nodes, "dynquant_matmul",
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, y.shape)],
                      [numpy_helper.from_array(wq, "wq"), numpy_helper.from_array(ws, "ws")])
write_case(out, "dynquant_matmul", helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]),
           [("x", x)], [("y", y)])

failed = 0
# OX_IGEMM8=0: uint8 by int8 on the int16 path too (and qdw8.c's depthwise sums in float);
# OX_IGEMM_VNNI=0: vpmaddwd + vpaddd where the CPU has AVX-512 VNNI's vpdpwssd
# OX_QCONV8=0: QLinearConv's uint8 by int8 2-D form through im2col and the GEMM too
for env in ({}, {"OX_QCONV8": "0"}, {"OX_IGEMM8": "0"}, {"OX_IGEMM8": "0", "OX_IGEMM_VNNI": "0"},
            {"OX_SGEMM_PACKED": "0"}):
    r = subprocess.run([args.onnxexec, "test", out, "--rtol", "0", "--atol", "0", "--threads", "2"],
                       capture_output=True, text=True, env=dict(os.environ, **env))
    sys.stdout.write("onnxexec test%s:\n%s%s" % ("".join(" " + k + "=" + v for k, v in env.items()),
                                                 r.stdout, r.stderr))
    failed += r.returncode != 0
sys.exit(1 if failed else 0)
