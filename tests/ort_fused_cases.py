#!/usr/bin/python3
"""Backend-layout cases for the operators ONNX Runtime's graph optimizer writes into the models
it saves (SessionOptions.optimized_model_filepath; kernels/cpu/ortopt.c, contrib.c), with numpy
as the oracle.

    tests/ort_fused_cases.py OUTDIR --onnxexec BIN [--ort-dir DIR]

- com.microsoft FusedConv: activation(Conv(X, W, B) + Z) for each activation ORT's kernel takes
  (Relu, Tanh, Sigmoid, LeakyRelu, Clip, HardSigmoid: their activation_params) and none;
  with Z, without B, grouped and depthwise, strided, dilated, 1-D. The oracle: the
  convolution in float64 numpy, then the activation as ONNX defines it.
- com.microsoft FusedGemm: activation(Gemm(A, B, C)) for each activation ORT's functors take
  (Relu, Tanh, Sigmoid, LeakyRelu, HardSigmoid, Elu, Selu, Softplus, Softsign,
  ThresholdedRelu), activation_alpha/beta/gamma given and left to the ONNX op's default,
  transA, transB, alpha, beta, C of each broadcast.
- com.microsoft FusedMatMul's transBatchA and transBatchB: ONNX Runtime's definition
  (FusedMatMulShapeInference): the operand's axis 0 moves before its last axis, then transA
  swaps the last two; ranks 3 and 4, broadcast batches, with alpha, and transA/transB on a
  vector (taken as it is); operands of ranks 2, or of two ranks, with transBatch are refused
  as ONNX Runtime refuses them.
- com.microsoft QLinearConv with channels_last 1 (ORT's NHWC transformer, "all" level on x86:
  X and Y [N, H, W, C], W as the default domain's) and 0; uint8 x int8 per channel, int8 x
  int8, groups and depthwise, stride and padding. The oracle: integer sums in numpy, scaled
  as the default domain's QLinearConv is here (x_scale w_scale[m] / y_scale in float32,
  applied in double, rounded half to even): exact.
- com.microsoft NhwcMaxPool: MaxPool of uint8 and int8 [N, H, W, C]; padding, strides,
  ceil_mode, dilations. Exact.
- ONNX Runtime's attention at its "extended" level, FusedMatMul(Q, K; transB, transBatchA,
  transBatchB, alpha) [-> Add(mask)] -> Softmax -> FusedMatMul(P, V; transBatchB), becomes one
  FusedAttention whose view programs end in the products' permutations (`info` counts it; a
  second product with an alpha stays as it is); the oracle: attention in numpy float64.
- com.microsoft QuickGelu of alpha 1 after a Conv (ORT's form of SiLU) joins the
  convolution's epilogue (`info` counts no QuickGelu left), alpha 1.702 does not; both
  within 1e-5 of numpy.

All float cases within 1e-5 relative (1e-6 absolute), optimized (ONNX Runtime's FusedConv and
FusedGemm become onnxexec's own, graph/optimize.c adopt_ms_fused: `info` counts them, for
the CPU and for a GPU), unoptimized (the com.microsoft kernels) and through --roundtrip.
Refused: an activation ORT does not take, the wrong number of activation_params, and the
com.microsoft.nchwc operators (ORT's channel-blocked layout, "all" level), naming the fix.

With --ort-dir (onnxruntime-node from npm), every case runs in ONNX Runtime too: floats within
its tolerance, codes equal (by hand: CI has no ONNX Runtime).
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ort_oracle  # noqa: E402
from case_dir import case_args, expect_error, op_count, run_test, write_case  # noqa: E402

args = case_args(__doc__, ort="compare every case with ONNX Runtime too")
float_dir = os.path.join(args.outdir, "float")
exact_dir = os.path.join(args.outdir, "exact")
os.makedirs(float_dir)
os.makedirs(exact_dir)
rng = np.random.default_rng(11)
exe = args.onnxexec
failed = 0
f32 = np.float32
ONNX = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.uint8): TensorProto.UINT8,
        np.dtype(np.int8): TensorProto.INT8, np.dtype(np.int32): TensorProto.INT32}


def ms_model(nodes, inputs, outputs, consts, opset=17):
    """A model importing the default domain at opset and com.microsoft 1. inputs, outputs:
    (name, numpy array) pairs; consts: name -> array (initializers)."""
    g = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info(n, ONNX[a.dtype], list(a.shape)) for n, a in inputs],
        [helper.make_tensor_value_info(n, ONNX[a.dtype], None) for n, a in outputs],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in consts.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset),
                                               helper.make_opsetid("com.microsoft", 1)])


# ---- oracles -------------------------------------------------------------------------------
def conv_ref(x, w, b=None, strides=None, pads=None, dilations=None, group=1):
    """Conv of any spatial rank in float64 (NC... layout), as the ONNX operator defines it."""
    x, w = x.astype(np.float64), w.astype(np.float64)
    nsp = x.ndim - 2
    strides = strides or [1] * nsp
    dilations = dilations or [1] * nsp
    pads = pads or [0] * (2 * nsp)
    xp = np.pad(x, [(0, 0), (0, 0)] + [(pads[i], pads[i + nsp]) for i in range(nsp)])
    N, C = x.shape[:2]
    M, cg = w.shape[:2]
    ks = w.shape[2:]
    out_sp = [(xp.shape[2 + i] - dilations[i] * (ks[i] - 1) - 1) // strides[i] + 1
              for i in range(nsp)]
    y = np.zeros([N, M] + out_sp)
    mg = M // group
    for idx in np.ndindex(*ks):  # one tap at a time over every output position
        sl = tuple(slice(idx[i] * dilations[i],
                         idx[i] * dilations[i] + strides[i] * (out_sp[i] - 1) + 1, strides[i])
                   for i in range(nsp))
        patch = xp[(slice(None), slice(None)) + sl]  # [N, C, out...]
        for gi in range(group):
            wt = w[gi * mg:(gi + 1) * mg, :, *idx]  # [mg, cg]
            y[:, gi * mg:(gi + 1) * mg] += np.einsum(
                "mc,nc...->nm...", wt, patch[:, gi * cg:(gi + 1) * cg])
    if b is not None:
        y += b.astype(np.float64).reshape([1, M] + [1] * nsp)
    return y


def softplus(v):
    return np.logaddexp(0, v)


ACT = {  # ONNX's definitions, float64
    "": lambda v, p: v,
    "Relu": lambda v, p: np.maximum(v, 0),
    "Tanh": lambda v, p: np.tanh(v),
    "Sigmoid": lambda v, p: 1 / (1 + np.exp(-v)),
    "LeakyRelu": lambda v, p: np.where(v >= 0, v, p.get("alpha", 0.01) * v),
    "Clip": lambda v, p: np.clip(v, p["min"], p["max"]),
    "HardSigmoid": lambda v, p: np.clip(p.get("alpha", 0.2) * v + p.get("beta", 0.5), 0, 1),
    "Elu": lambda v, p: np.where(v >= 0, v, p.get("alpha", 1.0) * np.expm1(np.minimum(v, 0))),
    "Selu": lambda v, p: p.get("gamma", 1.0507009873554805) * np.where(
        v > 0, v, p.get("alpha", 1.6732632423543772) * np.expm1(np.minimum(v, 0))),
    "Softplus": lambda v, p: softplus(v),
    "Softsign": lambda v, p: v / (1 + np.abs(v)),
    "ThresholdedRelu": lambda v, p: np.where(v > p.get("alpha", 1.0), v, 0),
}

fcases, qcases = [], []


def add_float(name, model, inputs, outputs, ort=True):
    """ort False: ONNX Runtime refuses the node (a FusedGemm without an activation, or one
    whose activation attributes are left to the ONNX op's defaults, which it requires)."""
    write_case(float_dir, name, model, inputs, outputs)
    if ort:
        fcases.append(name)


def add_exact(name, model, inputs, outputs):
    write_case(exact_dir, name, model, inputs, outputs)
    qcases.append(name)


# ---- FusedConv -----------------------------------------------------------------------------
CONV_PARAMS = {"LeakyRelu": [0.1], "Clip": [-0.5, 0.75], "HardSigmoid": [0.3, 0.4]}


def fused_conv(name, act, x_shape=(1, 4, 9, 9), m=6, k=(3, 3), group=1, z=False, bias=True,
               **attrs):
    x = rng.standard_normal(x_shape).astype(f32)
    c = x_shape[1]
    w = (rng.standard_normal((m, c // group) + k) / np.sqrt(c // group * np.prod(k))).astype(f32)
    b = rng.standard_normal(m).astype(f32) * 0.3
    kw = dict(kernel_shape=list(k), group=group, **attrs)
    if act:
        kw["activation"] = act
    if act in CONV_PARAMS:
        kw["activation_params"] = CONV_PARAMS[act]
    y = conv_ref(x, w, b if bias else None, kw.get("strides"), kw.get("pads"),
                 kw.get("dilations"), group)
    ins = ["X", "W", "B" if bias else ""]
    inputs = [("X", x)]
    if z:
        zv = rng.standard_normal(y.shape).astype(f32)
        y = y + zv
        ins.append("Z")
        inputs.append(("Z", zv))
    names = {"LeakyRelu": ("alpha",), "Clip": ("min", "max"), "HardSigmoid": ("alpha", "beta")}
    prm = dict(zip(names.get(act, ()), CONV_PARAMS.get(act, ())))
    y = ACT[act](y, prm).astype(f32)
    consts = {"W": w}
    if bias:
        consts["B"] = b
    node = helper.make_node("FusedConv", ins, ["Y"], domain="com.microsoft", **kw)
    add_float(name, ms_model([node], inputs, [("Y", y)], consts), inputs, [("Y", y)])


for act in ["", "Relu", "Tanh", "Sigmoid", "LeakyRelu", "Clip", "HardSigmoid"]:
    fused_conv("fused_conv_%s" % (act or "none"), act, pads=[1, 1, 1, 1])
fused_conv("fused_conv_relu_z", "Relu", z=True, pads=[1, 1, 1, 1])
fused_conv("fused_conv_sigmoid_z", "Sigmoid", z=True, strides=[2, 2])
fused_conv("fused_conv_none_z_nobias", "", z=True, bias=False)
fused_conv("fused_conv_depthwise_clip", "Clip", x_shape=(2, 8, 10, 10), m=8, group=8,
           pads=[1, 1, 1, 1], strides=[2, 2])
fused_conv("fused_conv_grouped_leaky", "LeakyRelu", x_shape=(1, 8, 7, 7), m=12, group=4,
           dilations=[2, 2], pads=[2, 2, 2, 2])
fused_conv("fused_conv_1d_hardsigmoid", "HardSigmoid", x_shape=(2, 3, 17), m=5, k=(5,),
           pads=[2, 1], strides=[2])
fused_conv("fused_conv_pointwise_tanh", "Tanh", x_shape=(1, 16, 6, 6), m=24, k=(1, 1))

# ---- FusedGemm -----------------------------------------------------------------------------
GEMM_ATTRS = {"LeakyRelu": {"alpha": 0.2}, "HardSigmoid": {"alpha": 0.25, "beta": 0.45},
              "Elu": {"alpha": 0.7}, "Selu": {"alpha": 1.5, "gamma": 1.1},
              "ThresholdedRelu": {"alpha": 0.3}}


def fused_gemm(name, act, M=5, K=7, N=6, ta=0, tb=0, alpha=1.0, beta=1.0, c_shape=(6,),
               defaults=False):
    a = rng.standard_normal((K, M) if ta else (M, K)).astype(f32)
    b = rng.standard_normal((N, K) if tb else (K, N)).astype(f32)
    A = a.T if ta else a
    B = b.T if tb else b
    y = alpha * (A.astype(np.float64) @ B.astype(np.float64))
    consts = {"B": b}
    ins = ["A", "B"]
    if c_shape is not None:
        c = rng.standard_normal(c_shape).astype(f32)
        y = y + beta * c.astype(np.float64)
        consts["C"] = c
        ins.append("C")
    prm = {} if defaults else GEMM_ATTRS.get(act, {})
    kw = {"transA": ta, "transB": tb, "alpha": alpha, "beta": beta}
    if act:
        kw["activation"] = act
    for k, v in prm.items():
        kw["activation_" + k] = v
    y = ACT[act](y, prm).astype(f32)
    node = helper.make_node("FusedGemm", ins, ["Y"], domain="com.microsoft", **kw)
    add_float(name, ms_model([node], [("A", a)], [("Y", y)], consts), [("A", a)], [("Y", y)],
              ort=bool(act) and not (defaults and act in GEMM_ATTRS))


for act in ["", "Relu", "Tanh", "Sigmoid", "LeakyRelu", "HardSigmoid", "Elu", "Selu",
            "Softplus", "Softsign", "ThresholdedRelu"]:
    fused_gemm("fused_gemm_%s" % (act or "none"), act)
for act in ["LeakyRelu", "HardSigmoid", "Elu", "Selu", "ThresholdedRelu"]:
    fused_gemm("fused_gemm_%s_defaults" % act, act, defaults=True)
fused_gemm("fused_gemm_trans_alpha_beta", "Relu", ta=1, tb=1, alpha=0.5, beta=2.0,
           c_shape=(5, 1))
fused_gemm("fused_gemm_c_scalar", "Sigmoid", c_shape=())
fused_gemm("fused_gemm_c_full", "Tanh", c_shape=(5, 6), tb=1)
fused_gemm("fused_gemm_no_c", "Elu", c_shape=None, M=1, K=64, N=10)


# ---- FusedMatMul's batch transposes ------------------------------------------------------
def op_perm(shape_len, trans, batch):
    """ONNX Runtime's FusedMatMul permutation of an operand (a vector is taken as it is)."""
    r = shape_len
    p = list(range(r))
    if r < 2:
        return p
    if batch:
        p = list(range(1, r - 1)) + [0, r - 1]
    if trans:
        p[-1], p[-2] = p[-2], p[-1]
    return p


def fused_matmul(name, a_shape, b_shape, ta=0, tb=0, bta=0, btb=0, alpha=1.0):
    a = rng.standard_normal(a_shape).astype(f32)
    b = rng.standard_normal(b_shape).astype(f32)
    A = np.transpose(a, op_perm(a.ndim, ta, bta)).astype(np.float64)
    B = np.transpose(b, op_perm(b.ndim, tb, btb)).astype(np.float64)
    y = (alpha * np.matmul(A, B)).astype(f32)
    node = helper.make_node("FusedMatMul", ["A", "B"], ["Y"], domain="com.microsoft",
                            transA=ta, transB=tb, transBatchA=bta, transBatchB=btb, alpha=alpha)
    inputs = [("A", a), ("B", b)]
    add_float(name, ms_model([node], inputs, [("Y", y)], {}), inputs, [("Y", y)])


# ONNX Runtime's attention Q.K^T: Q [S, B*H, d] and K [S, B*H, d] -> [B*H, S, S]
fused_matmul("fused_matmul_batch_ab_transb", (7, 6, 4), (7, 6, 4), tb=1, bta=1, btb=1,
             alpha=0.5)
fused_matmul("fused_matmul_batch_b", (6, 7, 7), (7, 6, 4), btb=1)  # P.V with V [S, B*H, d]
fused_matmul("fused_matmul_batch_a_transa", (5, 3, 2, 4), (3, 2, 5, 6), ta=1, bta=1)
fused_matmul("fused_matmul_batch_b_4d_broadcast", (1, 2, 3, 5), (5, 4, 2, 6), btb=1)
fused_matmul("fused_matmul_trans_vector", (4,), (5, 4), ta=1, tb=1)


# ---- attention through FusedMatMul ---------------------------------------------------------
def softmax(v):
    e = np.exp(v - v.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def ms_attention(name, S=6, BH=4, d=8, mask=False, alpha2=1.0, fused=True):
    """ONNX Runtime's attention at its "extended" level: Q, K, V [S, B*H, d] (sequence-first),
    FusedMatMul(Q, K; transB, transBatchA, transBatchB, alpha) [-> Add(mask)] -> Softmax ->
    FusedMatMul(P, V; transBatchB): Y [B*H, S, d]. Fused into one FusedAttention unless the
    second product has an alpha."""
    q, k, v = (rng.standard_normal((S, BH, d)).astype(f32) for _ in range(3))
    alpha = 1 / np.sqrt(d)
    sc = alpha * np.matmul(q.transpose(1, 0, 2).astype(np.float64),
                           k.transpose(1, 2, 0).astype(np.float64))
    inputs = [("Q", q), ("K", k), ("V", v)]
    nodes = [helper.make_node("FusedMatMul", ["Q", "K"], ["s"], domain="com.microsoft",
                              alpha=float(alpha), transA=0, transB=1, transBatchA=1,
                              transBatchB=1)]
    scores = "s"
    if mask:
        mv = np.where(rng.random((1, S, S)) < 0.3, -1e4, 0).astype(f32)
        sc = sc + mv
        inputs.append(("M", mv))
        nodes.append(helper.make_node("Add", ["s", "M"], ["sm"]))
        scores = "sm"
    nodes += [helper.make_node("Softmax", [scores], ["p"], axis=-1),
              helper.make_node("FusedMatMul", ["p", "V"], ["Y"], domain="com.microsoft",
                               alpha=alpha2, transBatchB=1)]
    y = (alpha2 * np.matmul(softmax(sc), v.transpose(1, 0, 2).astype(np.float64))).astype(f32)
    add_float(name, ms_model(nodes, inputs, [("Y", y)], {}), inputs, [("Y", y)])
    attention.append((name, fused))


attention = []
ms_attention("ms_attention", fused=True)
ms_attention("ms_attention_mask", mask=True, fused=True)
ms_attention("ms_attention_alpha2", alpha2=0.5, fused=False)


# ---- com.microsoft QLinearConv (channels_last) and NhwcMaxPool ---------------------------
def qconv_ref(x, xs, xz, w, ws, wz, ys, yz, b, strides, pads, group):
    """The default domain's QLinearConv as this runtime scales it (kernels/cpu/quant.c): int
    sums exact, x_scale w_scale[m] in float32 / y_scale in float32, applied in double."""
    M = w.shape[0]
    acc = conv_ref(x.astype(np.int64) - int(xz), w.astype(np.int64) -
                   np.asarray(wz, np.int64).reshape(-1, 1, 1, 1), None, strides, pads, None, group)
    acc = np.rint(acc).astype(np.int64)
    if b is not None:
        acc += b.reshape(1, M, 1, 1)
    mult = ((f32(xs) * np.broadcast_to(ws, (M,)).astype(f32)).astype(f32) / f32(ys)).astype(f32)
    v = acc.astype(np.float64) * mult.astype(np.float64).reshape(1, M, 1, 1)
    lo, hi = (0, 255) if yz.dtype == np.uint8 else (-128, 127)
    return np.clip(np.rint(v) + int(yz), lo, hi).astype(yz.dtype)


def ms_qconv(name, channels_last, xt=np.uint8, x_shape=(1, 6, 9, 9), m=8, group=1,
             strides=(1, 1), pads=(1, 1, 1, 1), per_channel=True, bias=True):
    n, c, h, wd = x_shape
    lo, hi = (0, 255) if xt == np.uint8 else (-128, 127)
    x = rng.integers(lo, hi + 1, x_shape).astype(xt)
    w = rng.integers(-127, 128, (m, c // group, 3, 3)).astype(np.int8)
    xs, xz = f32(0.02), xt(rng.integers(100, 140) if xt == np.uint8 else rng.integers(-8, 8))
    ws = (rng.uniform(0.5, 1.5, m) * 0.004).astype(f32) if per_channel else f32(0.004)
    wz = np.zeros(m, np.int8) if per_channel else np.int8(0)
    ys, yz = f32(0.05 * np.sqrt(c // group)), np.uint8(120) if xt == np.uint8 else np.int8(-5)
    b = rng.integers(-20000, 20000, m).astype(np.int32) if bias else None
    y = qconv_ref(x, xs, xz, w, ws, wz, ys, yz, b, list(strides), list(pads), group)
    consts = {"xs": xs, "xz": xz, "w": w, "ws": ws, "wz": wz, "ys": ys, "yz": yz}
    ins = ["X", "xs", "xz", "w", "ws", "wz", "ys", "yz"]
    if bias:
        consts["b"] = b
        ins.append("b")
    if channels_last:
        x = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
        y = np.ascontiguousarray(y.transpose(0, 2, 3, 1))
    node = helper.make_node("QLinearConv", ins, ["Y"], domain="com.microsoft",
                            kernel_shape=[3, 3], group=group, strides=list(strides),
                            pads=list(pads), channels_last=channels_last)
    add_exact(name, ms_model([node], [("X", x)], [("Y", y)], consts), [("X", x)], [("Y", y)])


ms_qconv("ms_qlinear_conv_nhwc", 1)
ms_qconv("ms_qlinear_conv_nhwc_s2_per_tensor", 1, strides=(2, 2), per_channel=False,
         x_shape=(2, 5, 11, 10))
ms_qconv("ms_qlinear_conv_nhwc_int8", 1, xt=np.int8, bias=False)
ms_qconv("ms_qlinear_conv_nhwc_depthwise", 1, x_shape=(1, 16, 8, 8), m=16, group=16)
ms_qconv("ms_qlinear_conv_nhwc_grouped", 1, x_shape=(1, 8, 7, 7), m=12, group=2, pads=(0, 1, 1, 0))
ms_qconv("ms_qlinear_conv_nchw", 0)


def maxpool_ref(x, k, strides, pads, dilations, ceil_mode):
    """MaxPool of NHWC codes; padding never wins (it is -inf)."""
    n, h, w, c = x.shape
    lo = np.iinfo(x.dtype).min
    out = []
    for i, (size, kk, s, d) in enumerate(zip((h, w), k, strides, dilations)):
        span = size + pads[i] + pads[i + 2] - d * (kk - 1) - 1
        o = (-(-span // s) if ceil_mode else span // s) + 1
        if ceil_mode and (o - 1) * s >= size + pads[i]:
            o -= 1
        out.append(o)
    y = np.full((n, out[0], out[1], c), lo, np.int64)
    for oh in range(out[0]):
        for ow in range(out[1]):
            for a in range(k[0]):
                for bb in range(k[1]):
                    ih = oh * strides[0] - pads[0] + a * dilations[0]
                    iw = ow * strides[1] - pads[1] + bb * dilations[1]
                    if 0 <= ih < h and 0 <= iw < w:
                        y[:, oh, ow] = np.maximum(y[:, oh, ow], x[:, ih, iw])
    return y.astype(x.dtype)


def nhwc_maxpool(name, xt, shape=(2, 9, 10, 5), k=(3, 3), strides=(2, 2), pads=(1, 1, 1, 1),
                 dilations=(1, 1), ceil_mode=0):
    info = np.iinfo(xt)
    x = rng.integers(info.min, info.max + 1, shape).astype(xt)
    y = maxpool_ref(x, k, strides, pads, dilations, ceil_mode)
    node = helper.make_node("NhwcMaxPool", ["X"], ["Y"], domain="com.microsoft",
                            kernel_shape=list(k), strides=list(strides), pads=list(pads),
                            dilations=list(dilations), ceil_mode=ceil_mode)
    add_exact(name, ms_model([node], [("X", x)], [("Y", y)], {}), [("X", x)], [("Y", y)])


nhwc_maxpool("nhwc_maxpool_u8", np.uint8)
nhwc_maxpool("nhwc_maxpool_i8_ceil", np.int8, shape=(1, 10, 10, 3), ceil_mode=1, pads=(0, 0, 0, 0))
nhwc_maxpool("nhwc_maxpool_u8_dilated", np.uint8, k=(2, 2), strides=(1, 1), pads=(0, 0, 0, 0),
             dilations=(2, 2))


# ---- QuickGelu after a Conv ----------------------------------------------------------------
def conv_quick_gelu(name, alpha):
    x = rng.standard_normal((1, 4, 8, 8)).astype(f32)
    w = (rng.standard_normal((6, 4, 3, 3)) / 6).astype(f32)
    b = rng.standard_normal(6).astype(f32)
    v = conv_ref(x, w, b, None, [1, 1, 1, 1])
    y = (v / (1 + np.exp(-alpha * v))).astype(f32)
    nodes = [helper.make_node("Conv", ["X", "W", "B"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("QuickGelu", ["c"], ["Y"], domain="com.microsoft", alpha=alpha)]
    add_float(name, ms_model(nodes, [("X", x)], [("Y", y)], {"W": w, "B": b}), [("X", x)],
              [("Y", y)])


conv_quick_gelu("conv_quick_gelu_silu", 1.0)
conv_quick_gelu("conv_quick_gelu_1702", 1.702)


for extra in ([], ["--no-optimize"], ["--roundtrip"]):
    failed += run_test(exe, float_dir, ["--rtol", "1e-5", "--atol", "1e-6"] + extra)
    failed += run_test(exe, exact_dir, ["--rtol", "0", "--atol", "0"] + extra)


def count_check(name, types, want, device=None):
    global failed
    model = os.path.join(float_dir, name, "model.onnx")
    if device:
        r = subprocess.run([exe, "info", model, "--device", device], capture_output=True,
                           text=True)
        got = sum(int(f[0]) for f in (line.split() for line in r.stdout.splitlines())
                  if len(f) == 2 and f[1] in types) if r.returncode == 0 else None
    else:
        got = op_count(exe, model, types)
    ok = got == want
    print("%s %s%s: %s %s node(s), expected %d" % ("PASS" if ok else "FAIL", name,
                                                  " for " + device if device else "", got,
                                                  "/".join(types), want))
    failed += not ok


# ORT's fused ops become onnxexec's (the activations other than a clamp as their own node)
for dev in (None, "cuda"):
    count_check("fused_conv_relu_z", ("com.microsoft.FusedConv",), 0, dev)
    count_check("fused_conv_relu_z", ("ai.onnxexec.FusedConv",), 1, dev)
    count_check("fused_conv_sigmoid_z", ("ai.onnxexec.FusedConv",), 1, dev)
    count_check("fused_conv_sigmoid_z", ("Sigmoid",), 1, dev)
    count_check("fused_gemm_Selu", ("ai.onnxexec.FusedGemm",), 1, dev)
    count_check("fused_gemm_Selu", ("Selu",), 1, dev)
# ORT's attention products: one FusedAttention (its permutations in the views), unless the
# second product scales
for name, fused in attention:
    count_check(name, ("ai.onnxexec.FusedAttention",), 1 if fused else 0)
    count_check(name, ("com.microsoft.FusedMatMul",), 0 if fused else 2)
count_check("conv_quick_gelu_silu", ("com.microsoft.QuickGelu",), 0)
count_check("conv_quick_gelu_1702", ("com.microsoft.QuickGelu",), 1)


# ---- NHWC graphs: Transposes cancelled ----------------------------------------------------
# ONNX Runtime's NHWC transformer ("all" level, quantized models): a Transpose to channels-last
# after the QuantizeLinear, the channels-last operators, elementwise ops between them on
# NHWC tensors, a Transpose back before the classifier. The graph pass lowers each
# channels-last op to the channels-first one between Transposes and moves and cancels them;
# the oracle is the same model run as the file has it (each com.microsoft kernel, checked
# against numpy above), equal byte for byte, and `info` must count the Transposes left.
layout_dir = os.path.join(args.outdir, "layout")
os.makedirs(layout_dir)
layouts = []


def q_scalars(prefix, scale, zp):
    return {prefix + "_s": np.asarray(f32(scale)), prefix + "_z": np.asarray(np.uint8(zp))}


def nhwc_qconv(consts, name, x, c_in, m, k=3, pads=1, group=1):
    w = rng.integers(-127, 128, (m, c_in // group, k, k)).astype(np.int8)
    consts.update({name + "_w": w, name + "_ws": (rng.uniform(0.5, 1.5, m) * 0.004).astype(f32),
                   name + "_wz": np.zeros(m, np.int8),
                   name + "_b": rng.integers(-5000, 5000, m).astype(np.int32)})
    consts.update(q_scalars(name + "_y", 0.05 * np.sqrt(c_in // group), 120))
    return helper.make_node(
        "QLinearConv", [x, "x_s", "x_z", name + "_w", name + "_ws", name + "_wz", name + "_y_s",
                        name + "_y_z", name + "_b"], [name], domain="com.microsoft",
        kernel_shape=[k, k], pads=[pads] * 4, group=group, channels_last=1)


def layout_case(name, extra, want_transposes):
    """extra(nodes, consts, last) appends to the NHWC body after the first convolution and
    returns the value it ends in (NHWC uint8 with scale x_s / zero point x_z)."""
    consts = {"in_s": np.asarray(f32(0.02)), "in_z": np.asarray(np.uint8(128))}
    consts.update(q_scalars("x", 0.05, 120))
    x = rng.standard_normal((1, 8, 10, 10)).astype(f32)
    nodes = [helper.make_node("QuantizeLinear", ["X", "in_s", "in_z"], ["xq"]),
             helper.make_node("Transpose", ["xq"], ["xt"], perm=[0, 2, 3, 1]),
             nhwc_qconv(consts, "c1", "xt", 8, 8)]
    nodes.append(helper.make_node("QLinearConv", ["c1", "c1_y_s", "c1_y_z", "c1_w", "c1_ws",
                                                  "c1_wz", "x_s", "x_z", "c1_b"], ["c1n"],
                                  domain="com.microsoft", kernel_shape=[3, 3], pads=[1] * 4,
                                  channels_last=1))
    last = extra(nodes, consts, "c1n")
    nodes += [helper.make_node("QLinearGlobalAveragePool", [last, "x_s", "x_z", "x_s", "x_z"],
                               ["gap"], domain="com.microsoft", channels_last=1),
              helper.make_node("Transpose", ["gap"], ["gapt"], perm=[0, 3, 1, 2]),
              helper.make_node("DequantizeLinear", ["gapt", "x_s", "x_z"], ["Y"])]
    y = np.zeros((1, 8, 1, 1), f32)
    model = ms_model(nodes, [("X", x)], [("Y", y)], consts)
    write_case(layout_dir, name, model, [("X", x)], [("Y", y)])
    layouts.append((name, want_transposes))


def residual(nodes, consts, last):
    """A depthwise branch and a residual QLinearAdd, a NhwcMaxPool, QLinearLeakyRelu."""
    nodes.append(nhwc_qconv(consts, "dw", last, 8, 8, group=8))
    nodes.append(helper.make_node("QLinearAdd", [last, "x_s", "x_z", "dw", "dw_y_s", "dw_y_z",
                                                 "x_s", "x_z"], ["sum"], domain="com.microsoft"))
    nodes.append(helper.make_node("NhwcMaxPool", ["sum"], ["mp"], domain="com.microsoft",
                                  kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]))
    nodes.append(helper.make_node("QLinearLeakyRelu", ["mp", "x_s", "x_z", "x_s", "x_z"],
                                  ["lr"], domain="com.microsoft", alpha=0.1))
    return "lr"


def hardswish(nodes, consts, last):
    """MobileNetV3's x * HardSigmoid(x) in float between a DequantizeLinear pair reading one
    NHWC tensor (two readers of one Transpose) and a QuantizeLinear."""
    nodes += [helper.make_node("DequantizeLinear", [last, "x_s", "x_z"], ["d1"]),
              helper.make_node("DequantizeLinear", [last, "x_s", "x_z"], ["d2"]),
              helper.make_node("HardSigmoid", ["d2"], ["hs"], alpha=1 / 6, beta=0.5),
              helper.make_node("Mul", ["d1", "hs"], ["hsw"]),
              helper.make_node("QuantizeLinear", ["hsw", "x_s", "x_z"], ["hq"])]
    return "hq"


def channel_bias(nodes, consts, last):
    """An Add of a per-channel constant on the NHWC tensor: the Transposes stay around it."""
    consts["bias"] = rng.standard_normal(8).astype(f32)
    nodes += [helper.make_node("DequantizeLinear", [last, "x_s", "x_z"], ["d"]),
              helper.make_node("Add", ["d", "bias"], ["a"]),
              helper.make_node("QuantizeLinear", ["a", "x_s", "x_z"], ["aq"])]
    return "aq"


def algebra_case(name, nodes, inputs, outputs, want_transposes, consts=None):
    """Transposes around float elementwise ops, numpy's outputs expected (exact: only data
    moves, and the ops are the same either way)."""
    model = ms_model(nodes, inputs, outputs, consts or {})
    write_case(layout_dir, name, model, inputs, outputs)
    layouts.append((name, want_transposes))


xa = rng.standard_normal((2, 3, 4, 5)).astype(f32)
# two rotations that are not inverse: both stay
algebra_case("two_rotations", [helper.make_node("Transpose", ["X"], ["t1"], perm=[0, 2, 3, 1]),
                               helper.make_node("Transpose", ["t1"], ["Y"], perm=[0, 2, 3, 1])],
             [("X", xa)], [("Y", xa.transpose(0, 2, 3, 1).transpose(0, 2, 3, 1))], 2)
# Add of two differently permuted operands: nothing moves
xb = rng.standard_normal((2, 5, 4, 3)).astype(f32)
algebra_case("different_perms",
             [helper.make_node("Transpose", ["X"], ["ta"], perm=[0, 2, 3, 1]),
              helper.make_node("Transpose", ["B"], ["tb"], perm=[0, 2, 1, 3]),
              helper.make_node("Add", ["ta", "tb"], ["Y"])],
             [("X", xa), ("B", xb)], [("Y", xa.transpose(0, 2, 3, 1) + xb.transpose(0, 2, 1, 3))],
             2)
# a Transpose moved past a scalar Add and a Relu meets its inverse, which wrote the graph's
# output (an Identity now): none left
algebra_case("sink_and_cancel",
             [helper.make_node("Transpose", ["X"], ["t"], perm=[0, 2, 3, 1]),
              helper.make_node("Add", ["t", "half"], ["a"]),
              helper.make_node("Relu", ["a"], ["s"]),
              helper.make_node("Transpose", ["s"], ["Y"], perm=[0, 3, 1, 2])],
             [("X", xa)], [("Y", np.maximum(xa + f32(0.5), 0))], 0,
             {"half": np.asarray(f32(0.5))})
# the first Transpose is a graph output too: it stays, and so does the one after the Relu
algebra_case("transpose_is_output",
             [helper.make_node("Transpose", ["X"], ["T"], perm=[0, 2, 3, 1]),
              helper.make_node("Relu", ["T"], ["r"]),
              helper.make_node("Transpose", ["r"], ["Y"], perm=[0, 3, 1, 2])],
             [("X", xa)], [("T", xa.transpose(0, 2, 3, 1)), ("Y", np.maximum(xa, 0))], 2)
# two elementwise readers of a Transpose whose results meet no inverse: it stays where it is
# (moved, it would become two)
ta = xa.transpose(0, 2, 3, 1)
algebra_case("no_inverse_ahead",
             [helper.make_node("Transpose", ["X"], ["t"], perm=[0, 2, 3, 1]),
              helper.make_node("Relu", ["t"], ["Y1"]),
              helper.make_node("Clip", ["t", "lo", "hi"], ["Y2"])],
             [("X", xa)], [("Y1", np.maximum(ta, 0)), ("Y2", np.clip(ta, -0.5, 0.5))], 1,
             {"lo": np.asarray(f32(-0.5)), "hi": np.asarray(f32(0.5))})
layout_case("nhwc_residual", residual, 0)
layout_case("nhwc_hardswish", hardswish, 0)
layout_case("nhwc_channel_bias", channel_bias, 2)
for name, want in layouts:
    model = os.path.join(layout_dir, name, "model.onnx")
    ins = []
    for k in range(2):
        pb = os.path.join(layout_dir, name, "test_data_set_0", "input_%d.pb" % k)
        if os.path.exists(pb):
            ins += ["-i", "%s=%s" % (onnx.load_tensor(pb).name, pb)]
    r = subprocess.run([exe, "compare", model, "cpu", "cpu:noopt", "--outputs-only", "--json"] +
                       ins, capture_output=True, text=True)
    try:
        worst = max(v["max_abs"] for v in json.loads(r.stdout)["values"])
    except (ValueError, KeyError, TypeError):
        worst = None
    ok = r.returncode == 0 and worst == 0
    print("%s %s: optimized against as the file has it, exact%s" % (
        "PASS" if ok else "FAIL", name, "" if ok else ":\n" + r.stdout + r.stderr))
    failed += not ok
    count_check_dir = float_dir
    float_dir = layout_dir
    count_check(name, ("Transpose",), want)
    float_dir = count_check_dir
algebra = ["two_rotations", "different_perms", "sink_and_cancel", "transpose_is_output",
           "no_inverse_ahead"]
for extra in ([], ["--no-optimize"]):
    d = os.path.join(args.outdir, "algebra")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    for name in algebra:
        shutil.copytree(os.path.join(layout_dir, name), os.path.join(d, name))
    failed += run_test(exe, d, ["--rtol", "0", "--atol", "0"] + extra)


# ---- what is refused ------------------------------------------------------------------------
bad_dir = os.path.join(args.outdir, "bad")
os.makedirs(bad_dir)
x = rng.standard_normal((1, 2, 5, 5)).astype(f32)
x_pb = os.path.join(bad_dir, "x.pb")
with open(x_pb, "wb") as f:
    f.write(numpy_helper.from_array(x, "X").SerializeToString())
w = rng.standard_normal((3, 2, 3, 3)).astype(f32)
y = np.zeros((1, 3, 3, 3), f32)
for name, kw, says in (
        ("fused_conv_gelu", {"activation": "Gelu"}, "activation 'Gelu': expected Relu, Tanh"),
        ("fused_conv_leaky_two_params", {"activation": "LeakyRelu",
                                         "activation_params": [0.1, 0.2]},
         "activation LeakyRelu takes 1 activation_params, not 2"),
        ("fused_conv_clip_no_params", {"activation": "Clip"},
         "activation Clip takes 2 activation_params, not 0")):
    node = helper.make_node("FusedConv", ["X", "W"], ["Y"], domain="com.microsoft",
                            kernel_shape=[3, 3], **kw)
    path = os.path.join(bad_dir, name + ".onnx")
    onnx.save(ms_model([node], [("X", x)], [("Y", y)], {"W": w}), path)
    for extra in ([], ["--no-optimize"]):
        failed += expect_error(exe, name, path, [("X", x_pb)], says, extra)
a = rng.standard_normal((2, 3)).astype(f32)
a_pb = os.path.join(bad_dir, "a.pb")
with open(a_pb, "wb") as f:
    f.write(numpy_helper.from_array(a, "A").SerializeToString())
node = helper.make_node("FusedGemm", ["A", "B"], ["Y"], domain="com.microsoft",
                        activation="Clip")
path = os.path.join(bad_dir, "fused_gemm_clip.onnx")
onnx.save(ms_model([node], [("A", a)], [("Y", np.zeros((2, 2), f32))],
                   {"B": np.ones((3, 2), f32)}), path)
failed += expect_error(exe, "fused_gemm_clip", path, [("A", a_pb)],
                       "activation 'Clip': expected Relu, Tanh, Sigmoid, LeakyRelu, HardSigmoid")
# transBatch needs operands of one rank, 3 or more (ONNX Runtime's MatMulComputeHelper)
for name, a_shape, b_shape in (("fused_matmul_batch_rank2", (3, 4), (4, 5)),
                               ("fused_matmul_batch_ranks_3_4", (2, 3, 4), (1, 2, 4, 5))):
    node = helper.make_node("FusedMatMul", ["A", "B"], ["Y"], domain="com.microsoft",
                            transBatchA=1)
    av = rng.standard_normal(a_shape).astype(f32)
    ab_pb = os.path.join(bad_dir, name + "_a.pb")
    with open(ab_pb, "wb") as f:
        f.write(numpy_helper.from_array(av, "A").SerializeToString())
    path = os.path.join(bad_dir, name + ".onnx")
    onnx.save(ms_model([node], [("A", av)], [("Y", av)],
                       {"B": rng.standard_normal(b_shape).astype(f32)}), path)
    failed += expect_error(exe, name, path, [("A", ab_pb)],
                           "they must have one rank, 3 or more")
# ONNX Runtime's channel-blocked layout ("all" level on x86, float models): its filters
# reordered as graph/nchwc.c describes, in numpy here; the oracle is the unblocked network in
# numpy. bs 16 with channel counts padded from 24 and 40 (both 8 and 16 would fit the file:
# OX_NCHWC_BLOCK=16 says which), and bs 8 with 24 and 40 (no padding; 16 does not fit: found).
nchwc_dir = os.path.join(args.outdir, "nchwc")
os.makedirs(nchwc_dir)


def pad_to(n, bs):
    return (n + bs - 1) // bs * bs


def reorder_bo(w, bs):
    """OIHWBo: (o, i, kh, kw) at (((o // bs) I + i) KH + kh) KW + kw) bs + o % bs."""
    O, I, KH, KW = w.shape
    return np.ascontiguousarray(w.reshape(O // bs, bs, I, KH, KW).transpose(0, 2, 3, 4, 1)
                                ).reshape(O, I, KH, KW)


def reorder_bibo(w, bs):
    """OIHWBiBo: (o, i, kh, kw) at ((((o // bs) I/bs + i // bs) KH + kh) KW + kw) bs^2 +
    (i % bs) bs + o % bs."""
    O, I, KH, KW = w.shape
    return np.ascontiguousarray(w.reshape(O // bs, bs, I // bs, bs, KH, KW)
                                .transpose(0, 2, 4, 5, 3, 1)).reshape(O, I, KH, KW)


def padded(w, o, i):
    out = np.zeros((o, i) + w.shape[2:], f32)
    out[:w.shape[0], :w.shape[1]] = w
    return out


def nchwc_case(name, bs, c1, c2):
    """X [1, 3, 12, 12] -> Conv 3x3 (c1, Relu; an NCHW input) -> depthwise 3x3 (Clip 0..6) ->
    pointwise (c2) -> Conv 3x3 (c2) + the pointwise's output (Sum), LeakyRelu -> MaxPool 2x2 ->
    GlobalAveragePool -> ReorderOutput: Y [1, c2, 1, 1]; and X2 [1, c1, 6, 6] (its channel
    count symbolic) -> ReorderInput -> pointwise (c2) -> ReorderOutput -> Sigmoid: Y2; the
    pointwise's output -> ReorderOutput -> Relu -> ReorderInput -> pointwise (c1) ->
    ReorderOutput: Y3."""
    p1, p2 = pad_to(c1, bs), pad_to(c2, bs)
    w1 = (rng.standard_normal((c1, 3, 3, 3)) / 4).astype(f32)
    b1 = rng.standard_normal(c1).astype(f32) * 0.1
    wd = (rng.standard_normal((c1, 1, 3, 3)) / 3).astype(f32)
    wp = (rng.standard_normal((c2, c1, 1, 1)) / np.sqrt(c1)).astype(f32)
    w4 = (rng.standard_normal((c2, c2, 3, 3)) / np.sqrt(9 * c2)).astype(f32)
    b4 = rng.standard_normal(c2).astype(f32) * 0.1
    w5 = (rng.standard_normal((c2, c1, 1, 1)) / np.sqrt(c1)).astype(f32)
    x = rng.standard_normal((1, 3, 12, 12)).astype(f32)
    x2 = rng.standard_normal((1, c1, 6, 6)).astype(f32)
    # the network in numpy
    h = np.maximum(conv_ref(x, w1, b1, None, [1, 1, 1, 1]), 0)
    h = np.clip(conv_ref(h, wd, None, None, [1, 1, 1, 1], None, c1), 0, 6)
    pw = conv_ref(h, wp)
    h = conv_ref(pw, w4, b4, None, [1, 1, 1, 1]) + pw
    h = np.where(h >= 0, h, 0.1 * h)
    h = h.reshape(1, c2, 6, 2, 6, 2).max(axis=(3, 5))
    y = h.mean(axis=(2, 3), keepdims=True).astype(f32)
    y2 = (1 / (1 + np.exp(-conv_ref(x2, w5)))).astype(f32)
    w6 = (rng.standard_normal((c1, c2, 1, 1)) / np.sqrt(c2)).astype(f32)
    y3 = conv_ref(np.maximum(pw, 0), w6).astype(f32)
    consts = {"w1": reorder_bo(padded(w1, p1, 3), bs), "b1": np.pad(b1, (0, p1 - c1)),
              "wd": reorder_bo(padded(wd, p1, 1), bs), "bd": np.zeros(p1, f32),
              "wp": reorder_bibo(padded(wp, p2, p1), bs), "bp": np.zeros(p2, f32),
              "w4": reorder_bibo(padded(w4, p2, p2), bs), "b4": np.pad(b4, (0, p2 - c2)),
              "w5": reorder_bibo(padded(w5, p2, p1), bs), "b5": np.zeros(p2, f32),
              "w6": reorder_bibo(padded(w6, p1, p2), bs), "b6": np.zeros(p1, f32)}
    N = "com.microsoft.nchwc"
    nodes = [
        helper.make_node("Conv", ["X", "w1", "b1"], ["t1"], domain=N, kernel_shape=[3, 3],
                         pads=[1, 1, 1, 1], activation="Relu"),
        helper.make_node("Conv", ["t1", "wd", "bd"], ["t2"], domain=N, kernel_shape=[3, 3],
                         pads=[1, 1, 1, 1], group=p1, activation="Clip",
                         activation_params=[0.0, 6.0]),
        helper.make_node("Conv", ["t2", "wp", "bp"], ["t3"], domain=N, kernel_shape=[1, 1]),
        helper.make_node("Conv", ["t3", "w4", "b4", "t3"], ["t4"], domain=N, kernel_shape=[3, 3],
                         pads=[1, 1, 1, 1], activation="LeakyRelu", activation_params=[0.1]),
        helper.make_node("MaxPool", ["t4"], ["t5"], domain=N, kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("GlobalAveragePool", ["t5"], ["t6"], domain=N),
        helper.make_node("ReorderOutput", ["t6"], ["Y"], domain=N, channels=c2),
        helper.make_node("ReorderInput", ["X2"], ["u1"], domain=N),
        helper.make_node("Conv", ["u1", "w5", "b5"], ["u2"], domain=N, kernel_shape=[1, 1]),
        helper.make_node("ReorderOutput", ["u2"], ["u3"], domain=N, channels=c2),
        helper.make_node("Sigmoid", ["u3"], ["Y2"]),
        # the count known (ReorderOutput's channels, through a Relu): constant pads
        helper.make_node("ReorderOutput", ["t3"], ["v1"], domain=N, channels=c2),
        helper.make_node("Relu", ["v1"], ["v2"]),
        helper.make_node("ReorderInput", ["v2"], ["v3"], domain=N),
        helper.make_node("Conv", ["v3", "w6", "b6"], ["v4"], domain=N, kernel_shape=[1, 1]),
        helper.make_node("ReorderOutput", ["v4"], ["Y3"], domain=N, channels=c1)]
    g = helper.make_graph(
        nodes, name, [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 3, 12, 12]),
                      helper.make_tensor_value_info("X2", TensorProto.FLOAT, [1, "C", 6, 6])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, c2, 1, 1]),
         helper.make_tensor_value_info("Y2", TensorProto.FLOAT, [1, c2, 6, 6]),
         helper.make_tensor_value_info("Y3", TensorProto.FLOAT, [1, c1, 12, 12])],
        [numpy_helper.from_array(np.asarray(v, f32), k) for k, v in consts.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                            helper.make_opsetid(N, 1)])
    write_case(nchwc_dir, name, m, [("X", x), ("X2", x2)], [("Y", y), ("Y2", y2), ("Y3", y3)])


nchwc_case("nchwc_bs16", 16, 24, 40)
nchwc_case("nchwc_bs8", 8, 24, 40)
for extra in ([], ["--no-optimize"], ["--roundtrip"]):
    for env, case in (({"OX_NCHWC_BLOCK": "16"}, "nchwc_bs16"), ({}, "nchwc_bs8")):
        d = os.path.join(args.outdir, "nchwc_run")
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        shutil.copytree(os.path.join(nchwc_dir, case), os.path.join(d, case))
        failed += run_test(exe, d, ["--rtol", "1e-4", "--atol", "1e-5"] + extra, env)
# `convert` writes the rewritten graph: portable ONNX (onnx.checker's full check), no nchwc
# node, no reordered filter left, the same outputs
port = os.path.join(args.outdir, "nchwc_portable")
shutil.copytree(os.path.join(nchwc_dir, "nchwc_bs8"), os.path.join(port, "nchwc_bs8"))
pm = os.path.join(port, "nchwc_bs8", "model.onnx")
r = subprocess.run([exe, "convert", os.path.join(nchwc_dir, "nchwc_bs8", "model.onnx"), pm],
                   capture_output=True, text=True)
ok = r.returncode == 0
if ok:
    m = onnx.load(pm)
    try:
        onnx.checker.check_model(m, full_check=True)
    except Exception as e:  # noqa: BLE001 (any checker complaint fails the case)
        ok = False
        print("checker: %s" % e)
    blocked = [n.op_type for n in m.graph.node if n.domain == "com.microsoft.nchwc"]
    names = {i.name for i in m.graph.initializer}
    ok &= not blocked and not names & {"w1", "wd", "wp", "w4", "w5", "w6"}
print("%s convert nchwc_bs8: portable (%s)" % ("PASS" if ok else "FAIL", r.stderr.strip()))
failed += not ok
failed += run_test(exe, port, ["--rtol", "1e-4", "--atol", "1e-5"])
# the counts fit no block size; OX_NCHWC_BLOCK that does not fit; an nchwc op not known
for name, model, env, says in (
        ("nchwc_no_block", "nchwc_bs16", {"OX_NCHWC_BLOCK": "32"},
         "OX_NCHWC_BLOCK=32 does not fit"),
        ("nchwc_bad_env", "nchwc_bs8", {"OX_NCHWC_BLOCK": "x"}, "expected a block size")):
    r = subprocess.run([exe, "run", os.path.join(nchwc_dir, model, "model.onnx")],
                       capture_output=True, text=True, env=dict(os.environ, **env))
    ok = r.returncode != 0 and says in r.stderr
    print("%s bad/%s: %s" % ("PASS" if ok else "FAIL", name, r.stderr.strip()))
    failed += not ok
m = onnx.load(os.path.join(nchwc_dir, "nchwc_bs8", "model.onnx"))
m.graph.node[4].op_type = "MaxPoolish"
path = os.path.join(bad_dir, "nchwc_unknown.onnx")
onnx.save(m, path)
failed += expect_error(exe, "nchwc_unknown", path, [],
                       "op MaxPoolish in domain com.microsoft.nchwc")

if args.ort_dir:
    for name, _ in layouts:  # ONNX Runtime's output on the model as the expected one
        if name in algebra:
            continue
        r = subprocess.run([exe, "run", os.path.join(layout_dir, name, "model.onnx"), "-i",
                            "X=" + os.path.join(layout_dir, name, "test_data_set_0", "input_0.pb"),
                            "-o", os.path.join(layout_dir, name, "out")], capture_output=True)
        y = np.load(os.path.join(layout_dir, name, "out", "Y.npy"))
        with open(os.path.join(layout_dir, name, "test_data_set_0", "output_0.pb"), "wb") as f:
            f.write(numpy_helper.from_array(y, "Y").SerializeToString())
    failed += ort_oracle.compare(layout_dir, [n for n, _ in layouts], args.ort_dir)
    failed += ort_oracle.compare(nchwc_dir, ["nchwc_bs16"], args.ort_dir)  # its block size here
    failed += ort_oracle.compare(float_dir, fcases, args.ort_dir)
    failed += ort_oracle.compare(exact_dir, qcases, args.ort_dir)
print("%d failed" % failed if failed else "all passed")
sys.exit(1 if failed else 0)
