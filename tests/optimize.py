#!/usr/bin/python3
"""Graph optimizations (graph/optimize.c): the optimized graph computes what the file says.

Builds small ONNX models with onnx.helper in a temporary folder and, for each, runs
`onnxexec run MODEL -i NAME=FILE.npy ... -o DIR` with and without --no-optimize, and checks

  (a) optimized vs unoptimized: relative L2 <= 1e-6 and max |diff| <= 1e-5 * (1 + max |value|),
      NaN positions identical (float16: 1e-3 for both);
  (b) unoptimized vs an outside oracle (numpy / torch.nn.functional in float64): relative
      L2 <= 1e-5 (float16: 1e-3), NaN positions identical;
  (c) `onnxexec info MODEL` op counts: the fusion/folding happened (e.g.
      ai.onnxexec.FusedConv present, no BatchNormalization / Relu left), or did NOT happen
      where it must not (a value read twice, a graph output, a rank-2 MatMul bias, ...).

One line per case; exits non-zero, naming what failed, if any case fails.

    optimize.py --onnxexec build/onnxexec [--keep DIR] [-k SUBSTRING] [--device cuda]

With --device the optimized runs go to that device (tools/gpu_session.sh checks the GPU's
FusedAttention this way); the plan-step checks then do not apply.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import torch
import torch.nn.functional as F

F32, F64, F16 = TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16
NP_OF = {F32: np.float32, F64: np.float64, F16: np.float16}
FUSED_CONV, FUSED_MM, FUSED_GEMM = ("ai.onnxexec.FusedConv", "ai.onnxexec.FusedMatMul",
                                    "ai.onnxexec.FusedGemm")


# ---- oracles (float64) ------------------------------------------------------------------

def t64(a):
    return torch.from_numpy(np.ascontiguousarray(np.asarray(a, dtype=np.float64)))


def conv(x, w, b=None, stride=1, pad=0, group=1, dil=1):
    fn = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[x.ndim - 2]
    return fn(t64(x), t64(w), None if b is None else t64(b), stride, pad, dil, group).numpy()


def bn(y, scale, bias, mean, var, eps=1e-5):
    sh = (1, -1) + (1,) * (y.ndim - 2)
    f = lambda a: np.asarray(a, np.float64).reshape(sh)
    return (y - f(mean)) / np.sqrt(f(var) + eps) * f(scale) + f(bias)


def relu(y):
    return np.maximum(y, 0)  # NaN stays NaN


def clip(y, lo, hi):
    return np.minimum(np.maximum(y, lo), hi)  # lo > hi gives hi (ONNX, numpy, torch.clamp)


def mm(a, b):
    return np.matmul(np.asarray(a, np.float64), np.asarray(b, np.float64))


# ---- model building ---------------------------------------------------------------------

class Case:
    def __init__(self, name, nodes, inputs, outputs, inits=None, expect=None, oracle=None,
                 opset=13, dtype=F32, note="", threads=None, one_step=None, env=None,
                 run_ops=None):
        self.name, self.nodes, self.inputs, self.outputs = name, nodes, inputs, outputs
        self.threads = threads  # --threads of the runs (None: onnxexec's default)
        self.env = env or {}    # extra environment of the runs (e.g. OX_SGEMM_PACKED=0)
        # op -> the steps of that op a run of the optimized model times (the rest folded,
        # views, or dropped as unread), checked with bench --profile
        self.run_ops = run_ops
        # (first, second): node names the CPU plan must run as one step (True) or apart
        self.one_step = one_step
        self.inits = inits or {}
        self.expect = expect or {}  # op -> exact count in the optimized graph
        self.oracle = oracle or {}  # output name -> float64 array
        self.opset, self.dtype, self.note = opset, dtype, note

    def model(self):
        def vi(name, arr):
            return helper.make_tensor_value_info(name, self.elem(arr), list(arr.shape))
        ins = [vi(n, a) for n, a in self.inputs.items()]
        # initializers that are also graph inputs (overridable): listed as inputs too
        ins += [vi(n, self.inits[n]) for n in getattr(self, "init_inputs", [])]
        outs = [helper.make_tensor_value_info(n, self.dtype, list(self.oracle[n].shape))
                for n in self.outputs]
        inits = [numpy_helper.from_array(a, n) for n, a in self.inits.items()]
        g = helper.make_graph(self.nodes, self.name, ins, outs, initializer=inits)
        imports = [helper.make_opsetid("", self.opset)]
        if any(n.domain == "ai.onnxexec" for n in self.nodes):  # a node of onnxexec's own
            imports.append(helper.make_opsetid("ai.onnxexec", 1))
        m = helper.make_model(g, opset_imports=imports, producer_name="tests/optimize.py")
        m.ir_version = 7
        onnx.checker.check_model(m)
        return m

    @staticmethod
    def elem(arr):
        return {np.dtype(np.float32): F32, np.dtype(np.float64): F64,
                np.dtype(np.float16): F16, np.dtype(np.int64): TensorProto.INT64,
                np.dtype(np.bool_): TensorProto.BOOL}[arr.dtype]


def dims(shape):
    return ",".join(map(str, shape))


def rnd(rng, shape, dt=np.float32, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(dt)


def weights(rng, shape, dt=np.float32, gain=1.0):
    fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
    return rnd(rng, shape, dt, gain / np.sqrt(fan_in))


def bn_params(rng, m, dt=np.float32):
    return dict(scale=(rng.uniform(0.5, 1.5, m) * rng.choice([-1, 1], m)).astype(dt),
                bias=rnd(rng, m, dt, 0.5), mean=rnd(rng, m, dt, 0.5),
                var=rng.uniform(0.3, 2.0, m).astype(dt))


def bn_node(inp, out, pre, eps=1e-5):
    return helper.make_node("BatchNormalization",
                            [inp, pre + "_s", pre + "_b", pre + "_m", pre + "_v"], [out],
                            epsilon=eps)


def bn_inits(p, pre):
    return {pre + "_s": p["scale"], pre + "_b": p["bias"], pre + "_m": p["mean"],
            pre + "_v": p["var"]}


def no_fusion(*ops):
    return {FUSED_CONV: 0, FUSED_MM: 0, FUSED_GEMM: 0, **{o: 1 for o in ops}}


# ---- the cases --------------------------------------------------------------------------

def cases():
    out = []
    rng = np.random.default_rng(20240611)

    # 1. Conv(+bias) -> BatchNormalization -> Relu: BN folded, Relu fused
    X, W, B = rnd(rng, (2, 3, 8, 8)), weights(rng, (8, 3, 3, 3)), rnd(rng, 8, scale=0.3)
    p = bn_params(rng, 8)
    out.append(Case(
        "1_conv_bn_relu",
        [helper.make_node("Conv", ["X", "W", "B"], ["c"], pads=[1, 1, 1, 1]),
         bn_node("c", "n", "bn"), helper.make_node("Relu", ["n"], ["Y"])],
        {"X": X}, ["Y"], {"W": W, "B": B, **bn_inits(p, "bn")},
        {FUSED_CONV: 1, "Conv": 0, "BatchNormalization": 0, "Relu": 0},
        {"Y": relu(bn(conv(X, W, B, pad=1), **p))}))

    # 2. Conv -> Add(residual graph input, same shape) -> Relu
    def residual_case(name, X, Z, note=""):
        r = np.random.default_rng(2)
        W, B = weights(r, (8, 4, 3, 3)), rnd(r, 8, scale=0.3)
        return Case(
            name,
            [helper.make_node("Conv", ["X", "W", "B"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c", "Z"], ["s"]), helper.make_node("Relu", ["s"], ["Y"])],
            {"X": X, "Z": Z}, ["Y"], {"W": W, "B": B},
            {FUSED_CONV: 1, "Conv": 0, "Add": 0, "Relu": 0},
            {"Y": relu(conv(X, W, B, pad=1) + Z)}, note=note)
    X2, Z2 = rnd(rng, (1, 4, 6, 6)), rnd(rng, (1, 8, 6, 6))
    out.append(residual_case("2_conv_add_residual_relu", X2, Z2))

    # 3. Conv -> Add(constant per channel) -> Relu: the constant becomes the bias
    for shape, with_b in (((8, 1, 1), True), ((1, 8, 1, 1), False)):
        X, W, B, K = (rnd(rng, (2, 4, 7, 7)), weights(rng, (8, 4, 3, 3)), rnd(rng, 8, scale=0.3),
                      rnd(rng, shape, scale=0.5))
        ins = ["X", "W", "B"] if with_b else ["X", "W"]
        out.append(Case(
            "3_conv_add_const[%s]%s_relu" % (dims(shape), "" if with_b else "_nobias"),
            [helper.make_node("Conv", ins, ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c", "K"], ["s"]), helper.make_node("Relu", ["s"], ["Y"])],
            {"X": X}, ["Y"], {"W": W, "K": K, **({"B": B} if with_b else {})},
            {FUSED_CONV: 1, "Conv": 0, "Add": 0, "Relu": 0},
            {"Y": relu(conv(X, W, B if with_b else None, pad=1) + K.astype(np.float64))}))

    # 4. Conv -> Add(graph input Z [1,M,1,1], broadcast into the output) -> Clip(0, 6), opset 13
    X, W, B, Z = (rnd(rng, (1, 4, 6, 6)), weights(rng, (8, 4, 3, 3), gain=6.0),
                  rnd(rng, 8), rnd(rng, (1, 8, 1, 1), scale=2.0))
    out.append(Case(
        "4_conv_add_bcastZ_clip06",
        [helper.make_node("Conv", ["X", "W", "B"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("Add", ["c", "Z"], ["s"]),
         helper.make_node("Clip", ["s", "lo", "hi"], ["Y"])],
        {"X": X, "Z": Z}, ["Y"],
        {"W": W, "B": B, "lo": np.array(0, np.float32), "hi": np.array(6, np.float32)},
        {FUSED_CONV: 1, "Conv": 0, "Add": 0, "Clip": 0},
        {"Y": clip(conv(X, W, B, pad=1) + Z, 0, 6)}))

    # 5. Conv output [1,M,1,1] + Z [1,M,4,4] -> Relu: Z makes the output larger (scratch path)
    for k in (1, 3):
        X, W, B, Z = (rnd(rng, (1, 4, 1, 1)), weights(rng, (8, 4, k, k)), rnd(rng, 8),
                      rnd(rng, (1, 8, 4, 4)))
        pads = [k // 2] * 4
        out.append(Case(
            "5_conv%dx%d_out1x1_add_largerZ_relu" % (k, k),
            [helper.make_node("Conv", ["X", "W", "B"], ["c"], pads=pads),
             helper.make_node("Add", ["c", "Z"], ["s"]), helper.make_node("Relu", ["s"], ["Y"])],
            {"X": X, "Z": Z}, ["Y"], {"W": W, "B": B},
            {FUSED_CONV: 1, "Conv": 0, "Add": 0, "Relu": 0},
            {"Y": relu(conv(X, W, B, pad=k // 2) + Z)}))

    # 6. The Conv's output is also a graph output / read by a second node: no fusion there
    X, W, B = rnd(rng, (1, 4, 6, 6)), weights(rng, (8, 4, 3, 3)), rnd(rng, 8)
    c = conv(X, W, B, pad=1)
    out.append(Case(
        "6a_conv_is_graph_output_relu",
        [helper.make_node("Conv", ["X", "W", "B"], ["C"], pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["C"], ["Y"])],
        {"X": X}, ["C", "Y"], {"W": W, "B": B}, no_fusion("Conv", "Relu"),
        {"C": c, "Y": relu(c)}))
    out.append(Case(
        "6b_conv_read_twice_relu_sigmoid",
        [helper.make_node("Conv", ["X", "W", "B"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c"], ["Y"]), helper.make_node("Sigmoid", ["c"], ["S"])],
        {"X": X}, ["Y", "S"], {"W": W, "B": B}, no_fusion("Conv", "Relu", "Sigmoid"),
        {"Y": relu(c), "S": 1 / (1 + np.exp(-c))}))
    p = bn_params(rng, 8)
    out.append(Case(
        "6c_conv_is_graph_output_bn",
        [helper.make_node("Conv", ["X", "W", "B"], ["C"], pads=[1, 1, 1, 1]),
         bn_node("C", "Y", "bn")],
        {"X": X}, ["C", "Y"], {"W": W, "B": B, **bn_inits(p, "bn")},
        no_fusion("Conv", "BatchNormalization"), {"C": c, "Y": bn(c, **p)}))
    Zr = rnd(rng, (1, 8, 6, 6))
    out.append(Case(
        "6d_add_is_graph_output_relu",  # Conv+Add fuse; the Add's output is an output
        [helper.make_node("Conv", ["X", "W", "B"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("Add", ["c", "Z"], ["S"]), helper.make_node("Relu", ["S"], ["Y"])],
        {"X": X, "Z": Zr}, ["S", "Y"], {"W": W, "B": B},
        {FUSED_CONV: 1, "Conv": 0, "Add": 0, "Relu": 1},
        {"S": c + Zr, "Y": relu(c + Zr)}))

    # 7. MatMul -> Add(constant) [-> Relu]
    A, Bm = rnd(rng, (2, 5, 16)), weights(rng, (8, 16)).T.copy()
    for bshape, fused, act in (((8,), True, True), ((1,), True, False), ((1, 8), False, False)):
        bias = rnd(rng, bshape)
        nodes = [helper.make_node("MatMul", ["A", "Bm"], ["p"]),
                 helper.make_node("Add", ["p", "bias"], ["s" if act else "Y"])]
        want = mm(A, Bm) + bias
        if act:
            nodes.append(helper.make_node("Relu", ["s"], ["Y"]))
            want = relu(want)
        expect = ({FUSED_MM: 1, "MatMul": 0, "Add": 0, "Relu": 0} if fused
                  else {FUSED_MM: 0, "MatMul": 1, "Add": 1})
        out.append(Case(
            "7_matmul_add_const[%s]%s" % (dims(bshape), "_relu" if act else ""),
            nodes, {"A": A}, ["Y"], {"Bm": Bm, "bias": bias}, expect, {"Y": want}))
    # 7d. MatMul output [2,5,1] + bias [8]: the bias makes the output larger (scratch path)
    B1, bias = weights(rng, (16, 1)), rnd(rng, 8)
    out.append(Case(
        "7d_matmul_N1_add_const[8]_relu",
        [helper.make_node("MatMul", ["A", "B1"], ["p"]),
         helper.make_node("Add", ["p", "bias"], ["s"]), helper.make_node("Relu", ["s"], ["Y"])],
        {"A": A}, ["Y"], {"B1": B1, "bias": bias},
        {FUSED_MM: 1, "MatMul": 0, "Add": 0, "Relu": 0}, {"Y": relu(mm(A, B1) + bias)}))
    # 7e. 1-D A: [16] x [16, 8] + [8]
    a1 = rnd(rng, 16)
    out.append(Case(
        "7e_matmul_1dA_add_const[8]_relu",
        [helper.make_node("MatMul", ["a", "Bm"], ["p"]),
         helper.make_node("Add", ["bias", "p"], ["s"]), helper.make_node("Relu", ["s"], ["Y"])],
        {"a": a1}, ["Y"], {"Bm": Bm, "bias": rnd(rng, 8)},
        {FUSED_MM: 1, "MatMul": 0, "Add": 0, "Relu": 0}, None))
    out[-1].oracle = {"Y": relu(mm(a1, Bm) + out[-1].inits["bias"])}

    # 8. Gemm(transB=1, C) -> Relu; Gemm -> Clip at opset 6 (min/max attributes)
    Ag, Bg, Cg = rnd(rng, (4, 16)), weights(rng, (8, 16)), rnd(rng, 8)
    out.append(Case(
        "8a_gemm_transB_bias_relu",
        [helper.make_node("Gemm", ["A", "B", "C"], ["g"], transB=1),
         helper.make_node("Relu", ["g"], ["Y"])],
        {"A": Ag}, ["Y"], {"B": Bg, "C": Cg}, {FUSED_GEMM: 1, "Gemm": 0, "Relu": 0},
        {"Y": relu(mm(Ag, Bg.T) + Cg)}))
    Cfull = rnd(rng, (4, 8))
    out.append(Case(
        "8b_gemm_clip_opset6_attrs",
        [helper.make_node("Gemm", ["A", "B", "C"], ["g"], transB=1),
         helper.make_node("Clip", ["g"], ["Y"], min=-0.5, max=0.75)],
        {"A": Ag}, ["Y"], {"B": Bg, "C": Cfull}, {FUSED_GEMM: 1, "Gemm": 0, "Clip": 0},
        {"Y": clip(mm(Ag, Bg.T) + Cfull, -0.5, 0.75)}, opset=6))
    out.append(Case(
        "8c_gemm_alpha_beta_relu",  # alpha != 1: not the packed path, the clamp after
        [helper.make_node("Gemm", ["A", "B", "C"], ["g"], transB=1, alpha=0.5, beta=2.0),
         helper.make_node("Relu", ["g"], ["Y"])],
        {"A": Ag}, ["Y"], {"B": Bg, "C": Cg}, {FUSED_GEMM: 1, "Gemm": 0, "Relu": 0},
        {"Y": relu(0.5 * mm(Ag, Bg.T) + 2.0 * Cg)}))
    Crow = rnd(rng, (4, 1))
    out.append(Case(
        "8d_gemm_C[M,1]_relu",
        [helper.make_node("Gemm", ["A", "B", "C"], ["g"], transB=1),
         helper.make_node("Relu", ["g"], ["Y"])],
        {"A": Ag}, ["Y"], {"B": Bg, "C": Crow}, {FUSED_GEMM: 1, "Gemm": 0, "Relu": 0},
        {"Y": relu(mm(Ag, Bg.T) + Crow)}))

    # 9. double Conv -> Add(residual) -> Relu; float16 Conv -> Relu (and -> Add -> Relu)
    X, W, B, Z = (rnd(rng, (1, 4, 6, 6), np.float64), weights(rng, (8, 4, 3, 3), np.float64),
                  rnd(rng, 8, np.float64), rnd(rng, (1, 8, 6, 6), np.float64))
    out.append(Case(
        "9a_double_conv_add_residual_relu",
        [helper.make_node("Conv", ["X", "W", "B"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("Add", ["c", "Z"], ["s"]), helper.make_node("Relu", ["s"], ["Y"])],
        {"X": X, "Z": Z}, ["Y"], {"W": W, "B": B},
        {FUSED_CONV: 1, "Conv": 0, "Add": 0, "Relu": 0},
        {"Y": relu(conv(X, W, B, pad=1) + Z)}, dtype=F64))
    X, W, B, Z = (rnd(rng, (1, 4, 6, 6), np.float16), weights(rng, (8, 4, 3, 3), np.float16),
                  rnd(rng, 8, np.float16), rnd(rng, (1, 8, 6, 6), np.float16))
    out.append(Case(
        "9b_float16_conv_relu",
        [helper.make_node("Conv", ["X", "W", "B"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c"], ["Y"])],
        {"X": X}, ["Y"], {"W": W, "B": B}, {FUSED_CONV: 1, "Conv": 0, "Relu": 0},
        {"Y": relu(conv(X, W, B, pad=1))}, dtype=F16))
    out.append(Case(
        "9c_float16_conv_add_residual_relu",
        [helper.make_node("Conv", ["X", "W", "B"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("Add", ["c", "Z"], ["s"]), helper.make_node("Relu", ["s"], ["Y"])],
        {"X": X, "Z": Z}, ["Y"], {"W": W, "B": B},
        {FUSED_CONV: 1, "Conv": 0, "Add": 0, "Relu": 0},
        {"Y": relu(conv(X, W, B, pad=1) + Z.astype(np.float64))}, dtype=F16))

    # 10. depthwise Conv (group = channels) -> BatchNormalization -> Clip(0, 6): MobileNet
    for stride in (1, 2):
        X, W = rnd(rng, (1, 8, 9, 9), scale=3.0), weights(rng, (8, 1, 3, 3), gain=3.0)
        p = bn_params(rng, 8)
        p["scale"] *= 3
        out.append(Case(
            "10_depthwise_s%d_bn_clip06" % stride,
            [helper.make_node("Conv", ["X", "W"], ["c"], pads=[1, 1, 1, 1], group=8,
                              strides=[stride, stride]),
             bn_node("c", "n", "bn", eps=1e-3), helper.make_node("Clip", ["n", "lo", "hi"], ["Y"])],
            {"X": X}, ["Y"],
            {"W": W, "lo": np.array(0, np.float32), "hi": np.array(6, np.float32),
             **bn_inits(p, "bn")},
            {FUSED_CONV: 1, "Conv": 0, "BatchNormalization": 0, "Clip": 0},
            {"Y": clip(bn(conv(X, W, None, stride=stride, pad=1, group=8), **p, eps=1e-3), 0, 6)}))

    # 11. NaN in the inputs of case 2 (X, then Z): NaN positions must match
    Xn = X2.copy()
    Xn[0, 1, 2, 3] = np.nan
    out.append(residual_case("11a_nan_in_X_conv_add_relu", Xn, Z2))
    Zn = Z2.copy()
    Zn[0, 3, 1, 4] = np.nan
    Zn[0, 5, 0, 0] = np.nan
    out.append(residual_case("11b_nan_in_Z_conv_add_relu", X2, Zn))
    # ... and through the depthwise kernel's own epilogue
    Xd, Wd = rnd(rng, (1, 8, 6, 6)), weights(rng, (8, 1, 3, 3))
    Xd[0, 2, 3, 3] = np.nan
    out.append(Case(
        "11c_nan_in_X_depthwise_relu",
        [helper.make_node("Conv", ["X", "W"], ["c"], pads=[1, 1, 1, 1], group=8),
         helper.make_node("Relu", ["c"], ["Y"])],
        {"X": Xd}, ["Y"], {"W": Wd}, {FUSED_CONV: 1, "Conv": 0, "Relu": 0},
        {"Y": relu(conv(Xd, Wd, None, pad=1, group=8))}))

    # ---- more edges of the same passes ----
    # 12. Clip with min > max: ONNX (and numpy, torch.clamp) give max everywhere
    for kind in ("depthwise", "dense", "bcastZ"):
        X = rnd(rng, (1, 8, 5, 5))
        W = weights(rng, (8, 1, 3, 3) if kind == "depthwise" else (8, 8, 3, 3))
        group = 8 if kind == "depthwise" else 1
        nodes = [helper.make_node("Conv", ["X", "W"], ["c"], pads=[1, 1, 1, 1], group=group)]
        ins, want, cur = {"X": X}, conv(X, W, None, pad=1, group=group), "c"
        if kind == "bcastZ":
            Zc = rnd(rng, (1, 8, 1, 1))
            nodes.append(helper.make_node("Add", ["c", "Z"], ["s"]))
            ins["Z"], want, cur = Zc, want + Zc, "s"
        nodes.append(helper.make_node("Clip", [cur, "lo", "hi"], ["Y"]))
        out.append(Case(
            "12_%s_conv_clip_min_gt_max" % kind, nodes, ins, ["Y"],
            {"W": W, "lo": np.array(0.5, np.float32), "hi": np.array(-0.25, np.float32)},
            {FUSED_CONV: 1, "Conv": 0, "Clip": 0, "Add": 0}, {"Y": clip(want, 0.5, -0.25)}))

    # ... and through FusedGemm's pass after the product (alpha != 1), Clip-6 attributes
    out.append(Case(
        "12_gemm_alpha_clip_min_gt_max",
        [helper.make_node("Gemm", ["A", "B", "C"], ["g"], transB=1, alpha=0.5),
         helper.make_node("Clip", ["g"], ["Y"], min=0.5, max=-0.25)],
        {"A": Ag}, ["Y"], {"B": Bg, "C": Cfull}, {FUSED_GEMM: 1, "Gemm": 0, "Clip": 0},
        {"Y": clip(0.5 * mm(Ag, Bg.T) + Cfull, 0.5, -0.25)}, opset=6))

    # 13. Conv [1,M,1,4] + Z [1,M,4,1]: both broadcast; Z of higher rank [2,1,M,4,4]
    X, W, B = rnd(rng, (1, 4, 1, 4)), weights(rng, (8, 4, 1, 3)), rnd(rng, 8)
    for zshape in ((1, 8, 4, 1), (2, 1, 8, 1, 4)):
        Z = rnd(rng, zshape)
        out.append(Case(
            "13_conv_out[1,8,1,4]_add_Z[%s]_relu" % dims(zshape),
            [helper.make_node("Conv", ["X", "W", "B"], ["c"], pads=[0, 1, 0, 1]),
             helper.make_node("Add", ["c", "Z"], ["s"]), helper.make_node("Relu", ["s"], ["Y"])],
            {"X": X, "Z": Z}, ["Y"], {"W": W, "B": B},
            {FUSED_CONV: 1, "Conv": 0, "Add": 0, "Relu": 0},
            {"Y": relu(conv(X, W, B, pad=(0, 1)) + Z)}))

    # 14. W is an initializer that is also a graph input (overridable): no BN folding
    X, W = rnd(rng, (1, 4, 6, 6)), weights(rng, (8, 4, 3, 3))
    p = bn_params(rng, 8)
    cs = Case(
        "14_overridable_W_conv_bn_relu",
        [helper.make_node("Conv", ["X", "W"], ["c"], pads=[1, 1, 1, 1]),
         bn_node("c", "n", "bn"), helper.make_node("Relu", ["n"], ["Y"])],
        {"X": X}, ["Y"], {"W": W, **bn_inits(p, "bn")},
        {FUSED_CONV: 0, "Conv": 1, "BatchNormalization": 1, "Relu": 1},
        {"Y": relu(bn(conv(X, W, None, pad=1), **p))})
    cs.init_inputs = ["W"]
    out.append(cs)

    # 15. ResNet block: Conv -> BN -> Add(X) -> Relu (residual read by the Conv too)
    X, W = rnd(rng, (2, 8, 5, 5)), weights(rng, (8, 8, 3, 3))
    p = bn_params(rng, 8)
    out.append(Case(
        "15_resnet_conv_bn_add_input_relu",
        [helper.make_node("Conv", ["X", "W"], ["c"], pads=[1, 1, 1, 1]),
         bn_node("c", "n", "bn"), helper.make_node("Add", ["X", "n"], ["s"]),
         helper.make_node("Relu", ["s"], ["Y"])],
        {"X": X}, ["Y"], {"W": W, **bn_inits(p, "bn")},
        {FUSED_CONV: 1, "Conv": 0, "BatchNormalization": 0, "Add": 0, "Relu": 0},
        {"Y": relu(bn(conv(X, W, None, pad=1), **p) + X)}))

    # 16. BN's output is a graph output and read by Relu: BN folds, Relu stays
    X, W, B = rnd(rng, (1, 4, 6, 6)), weights(rng, (8, 4, 3, 3)), rnd(rng, 8)
    p = bn_params(rng, 8)
    n = bn(conv(X, W, B, pad=1), **p)
    out.append(Case(
        "16_bn_is_graph_output_relu",
        [helper.make_node("Conv", ["X", "W", "B"], ["c"], pads=[1, 1, 1, 1]),
         bn_node("c", "N", "bn"), helper.make_node("Relu", ["N"], ["Y"])],
        {"X": X}, ["N", "Y"], {"W": W, "B": B, **bn_inits(p, "bn")},
        {FUSED_CONV: 0, "Conv": 1, "BatchNormalization": 0, "Relu": 1},
        {"N": n, "Y": relu(n)}))

    # 17. Conv1d + Add const [M,1] -> Relu; grouped Conv (group 2), batch 2, + const [M,1,1]
    X, W, B, K = (rnd(rng, (2, 4, 11)), weights(rng, (6, 4, 3)), rnd(rng, 6),
                  rnd(rng, (6, 1)))
    out.append(Case(
        "17a_conv1d_add_const[M,1]_relu",
        [helper.make_node("Conv", ["X", "W", "B"], ["c"], pads=[1, 1]),
         helper.make_node("Add", ["c", "K"], ["s"]), helper.make_node("Relu", ["s"], ["Y"])],
        {"X": X}, ["Y"], {"W": W, "B": B, "K": K},
        {FUSED_CONV: 1, "Conv": 0, "Add": 0, "Relu": 0},
        {"Y": relu(conv(X, W, B, pad=1) + K)}))
    X, W, K = rnd(rng, (2, 8, 6, 6)), weights(rng, (8, 4, 3, 3)), rnd(rng, (8, 1, 1))
    out.append(Case(
        "17b_grouped_conv_add_const_relu",
        [helper.make_node("Conv", ["X", "W"], ["c"], pads=[1, 1, 1, 1], group=2),
         helper.make_node("Add", ["K", "c"], ["s"]), helper.make_node("Relu", ["s"], ["Y"])],
        {"X": X}, ["Y"], {"W": W, "K": K}, {FUSED_CONV: 1, "Conv": 0, "Add": 0, "Relu": 0},
        {"Y": relu(conv(X, W, None, pad=1, group=2) + K)}))
    # a constant of the output's full shape: a residual, not a bias
    X, W = rnd(rng, (1, 4, 5, 5)), weights(rng, (8, 4, 3, 3))
    Kf = rnd(rng, (1, 8, 5, 5))
    out.append(Case(
        "17c_conv_add_const_fullshape_relu",
        [helper.make_node("Conv", ["X", "W"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("Add", ["c", "K"], ["s"]), helper.make_node("Relu", ["s"], ["Y"])],
        {"X": X}, ["Y"], {"W": W, "K": Kf}, {FUSED_CONV: 1, "Conv": 0, "Add": 0, "Relu": 0},
        {"Y": relu(conv(X, W, None, pad=1) + Kf)}))
    # depthwise with channel multiplier 2 (group = C, M = 2C) -> BN -> Relu
    X, W = rnd(rng, (1, 4, 7, 7)), weights(rng, (8, 1, 3, 3))
    p = bn_params(rng, 8)
    out.append(Case(
        "17d_depthwise_mult2_bn_relu",
        [helper.make_node("Conv", ["X", "W"], ["c"], pads=[1, 1, 1, 1], group=4),
         bn_node("c", "n", "bn"), helper.make_node("Relu", ["n"], ["Y"])],
        {"X": X}, ["Y"], {"W": W, **bn_inits(p, "bn")},
        {FUSED_CONV: 1, "Conv": 0, "BatchNormalization": 0, "Relu": 0},
        {"Y": relu(bn(conv(X, W, None, pad=1, group=4), **p))}))

    # 18. Clip at opset 11 with only max; MatMul in double with a double bias
    X, W, B = rnd(rng, (1, 4, 6, 6)), weights(rng, (8, 4, 3, 3), gain=3), rnd(rng, 8)
    out.append(Case(
        "18a_conv_clip_opset11_max_only",
        [helper.make_node("Conv", ["X", "W", "B"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("Clip", ["c", "", "hi"], ["Y"])],
        {"X": X}, ["Y"], {"W": W, "B": B, "hi": np.array(0.5, np.float32)},
        {FUSED_CONV: 1, "Conv": 0, "Clip": 0}, {"Y": np.minimum(conv(X, W, B, pad=1), 0.5)},
        opset=11))
    Ad, Bd, bd = (rnd(rng, (3, 16), np.float64), weights(rng, (16, 8), np.float64),
                  rnd(rng, 8, np.float64))
    out.append(Case(
        "18b_double_matmul_add_const[8]_relu",
        [helper.make_node("MatMul", ["A", "Bm"], ["p"]),
         helper.make_node("Add", ["p", "bias"], ["s"]), helper.make_node("Relu", ["s"], ["Y"])],
        {"A": Ad}, ["Y"], {"Bm": Bd, "bias": bd}, {FUSED_MM: 1, "MatMul": 0, "Add": 0, "Relu": 0},
        {"Y": relu(mm(Ad, Bd) + bd)}, dtype=F64))

    # 19. MatMul edges: vector . vector (a scalar) + bias [8]; batched B (not one matrix)
    a, b, bias = rnd(rng, 16), rnd(rng, 16), rnd(rng, 8)
    out.append(Case(
        "19a_matmul_dot_add_const[8]_relu",
        [helper.make_node("MatMul", ["a", "b"], ["p"]),
         helper.make_node("Add", ["p", "bias"], ["s"]), helper.make_node("Relu", ["s"], ["Y"])],
        {"a": a, "b": b}, ["Y"], {"bias": bias}, {FUSED_MM: 1, "MatMul": 0, "Add": 0, "Relu": 0},
        {"Y": relu(mm(a, b) + bias)}))
    A3, B3, bias = rnd(rng, (2, 5, 16)), rnd(rng, (2, 16, 8)), rnd(rng, 8)
    out.append(Case(
        "19b_matmul_batchedB_add_const[8]_clip",
        [helper.make_node("MatMul", ["A", "B"], ["p"]),
         helper.make_node("Add", ["p", "bias"], ["s"]),
         helper.make_node("Clip", ["s", "lo", "hi"], ["Y"])],
        {"A": A3, "B": B3}, ["Y"],
        {"bias": bias, "lo": np.array(-1, np.float32), "hi": np.array(1.5, np.float32)},
        {FUSED_MM: 1, "MatMul": 0, "Add": 0, "Clip": 0},
        {"Y": clip(mm(A3, B3) + bias, -1, 1.5)}))
    # Gemm with a scalar C; Gemm without C
    Cs = rnd(rng, 1)
    out.append(Case(
        "19c_gemm_C[1]_relu",
        [helper.make_node("Gemm", ["A", "B", "C"], ["g"], transB=1),
         helper.make_node("Relu", ["g"], ["Y"])],
        {"A": Ag}, ["Y"], {"B": Bg, "C": Cs}, {FUSED_GEMM: 1, "Gemm": 0, "Relu": 0},
        {"Y": relu(mm(Ag, Bg.T) + Cs)}))
    out.append(Case(
        "19d_gemm_noC_relu",
        [helper.make_node("Gemm", ["A", "B"], ["g"], transB=1),
         helper.make_node("Relu", ["g"], ["Y"])],
        {"A": Ag}, ["Y"], {"B": Bg}, {FUSED_GEMM: 1, "Gemm": 0, "Relu": 0},
        {"Y": relu(mm(Ag, Bg.T))}))

    # 20. Conv3d -> BN -> Relu; a dead node is removed
    X, W, B = rnd(rng, (1, 2, 4, 5, 4)), weights(rng, (4, 2, 3, 3, 3)), rnd(rng, 4)
    p = bn_params(rng, 4)
    out.append(Case(
        "20a_conv3d_bn_relu_and_dead_node",
        [helper.make_node("Conv", ["X", "W", "B"], ["c"], pads=[1] * 6),
         bn_node("c", "n", "bn"), helper.make_node("Relu", ["n"], ["Y"]),
         helper.make_node("Sigmoid", ["X"], ["unused"])],
        {"X": X}, ["Y"], {"W": W, "B": B, **bn_inits(p, "bn")},
        {FUSED_CONV: 1, "Conv": 0, "BatchNormalization": 0, "Relu": 0, "Sigmoid": 0},
        {"Y": relu(bn(conv(X, W, B, pad=1), **p))}))

    # 21. A subgraph (If) reads the Conv's output by name: no fusion of that edge
    X, W, B = rnd(rng, (1, 4, 5, 5)), weights(rng, (8, 4, 3, 3)), rnd(rng, 8)
    c = conv(X, W, B, pad=1)
    def branch(name, op):
        return helper.make_graph(
            [helper.make_node(op, ["c"], ["r_" + name])], name, [],
            [helper.make_tensor_value_info("r_" + name, F32, [1, 8, 5, 5])])
    out.append(Case(
        "21_conv_read_by_if_subgraph_relu",
        [helper.make_node("Conv", ["X", "W", "B"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c"], ["Y"]),
         helper.make_node("If", ["cond"], ["R"], then_branch=branch("then", "Neg"),
                          else_branch=branch("else", "Identity"))],
        {"X": X, "cond": np.array(True)}, ["Y", "R"], {"W": W, "B": B},
        no_fusion("Conv", "Relu", "If"), {"Y": relu(c), "R": -c}))

    # 22. SiLU as exported (Sigmoid, then Mul with the same input, either order) after Conv,
    # depthwise Conv, MatMul + bias and Gemm; not when the Sigmoid is read elsewhere too
    def silu(y):
        return y / (1.0 + np.exp(-y))
    X, W, B = rnd(rng, (1, 4, 6, 6), scale=3.0), weights(rng, (8, 4, 3, 3)), rnd(rng, 8)
    c = conv(X, W, B, pad=1)
    for order in (("c", "s"), ("s", "c")):
        out.append(Case(
            "22a_conv_silu_mul_%s_%s" % order,
            [helper.make_node("Conv", ["X", "W", "B"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Sigmoid", ["c"], ["s"]), helper.make_node("Mul", list(order), ["Y"])],
            {"X": X}, ["Y"], {"W": W, "B": B},
            {FUSED_CONV: 1, "Conv": 0, "Sigmoid": 0, "Mul": 0}, {"Y": silu(c)}))
    Wd = weights(rng, (4, 1, 3, 3))
    cd = conv(X, Wd, None, stride=2, pad=1, group=4)
    out.append(Case(
        "22b_depthwise_silu",
        [helper.make_node("Conv", ["X", "Wd"], ["c"], pads=[1, 1, 1, 1], strides=[2, 2], group=4),
         helper.make_node("Sigmoid", ["c"], ["s"]), helper.make_node("Mul", ["c", "s"], ["Y"])],
        {"X": X}, ["Y"], {"Wd": Wd}, {FUSED_CONV: 1, "Conv": 0, "Sigmoid": 0, "Mul": 0},
        {"Y": silu(cd)}))
    A3, Bm, bias = rnd(rng, (2, 5, 16), scale=2.0), weights(rng, (16, 8)), rnd(rng, 8)
    out.append(Case(
        "22c_matmul_bias_silu",
        [helper.make_node("MatMul", ["A", "Bm"], ["p"]), helper.make_node("Add", ["p", "bias"], ["q"]),
         helper.make_node("Sigmoid", ["q"], ["s"]), helper.make_node("Mul", ["s", "q"], ["Y"])],
        {"A": A3}, ["Y"], {"Bm": Bm, "bias": bias},
        {FUSED_MM: 1, "MatMul": 0, "Add": 0, "Sigmoid": 0, "Mul": 0},
        {"Y": silu(mm(A3, Bm) + bias)}))
    Ag, Bg, Cg = rnd(rng, (4, 16), scale=2.0), weights(rng, (8, 16)), rnd(rng, 8)
    out.append(Case(
        "22d_gemm_silu",
        [helper.make_node("Gemm", ["A", "B", "C"], ["g"], transB=1),
         helper.make_node("Sigmoid", ["g"], ["s"]), helper.make_node("Mul", ["g", "s"], ["Y"])],
        {"A": Ag}, ["Y"], {"B": Bg, "C": Cg}, {FUSED_GEMM: 1, "Gemm": 0, "Sigmoid": 0, "Mul": 0},
        {"Y": silu(mm(Ag, Bg.T) + Cg)}))
    out.append(Case(
        "22e_conv_sigmoid_also_output_no_silu",
        [helper.make_node("Conv", ["X", "W", "B"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("Sigmoid", ["c"], ["S"]), helper.make_node("Mul", ["c", "S"], ["Y"])],
        {"X": X}, ["Y", "S"], {"W": W, "B": B}, no_fusion("Conv", "Sigmoid", "Mul"),
        {"Y": silu(c), "S": 1.0 / (1.0 + np.exp(-c))}))

    # 23. LayerNormalization as exported below opset 17 -> one LayerNormalization node
    def ln_ref(x, gm, bt, eps):
        m = x.mean(-1, keepdims=True)
        return (x - m) / np.sqrt(((x - m) ** 2).mean(-1, keepdims=True) + eps) * gm + bt

    def ln_nodes(square="pow", extra_reader=False):
        sq = (helper.make_node("Pow", ["d", "two"], ["p"]) if square == "pow"
              else helper.make_node("Mul", ["d", "d"], ["p"]))
        nodes = [helper.make_node("ReduceMean", ["X"], ["m"], axes=[-1]),
                 helper.make_node("Sub", ["X", "m"], ["d"]), sq,
                 helper.make_node("ReduceMean", ["p"], ["v"], axes=[-1]),
                 helper.make_node("Add", ["v", "eps"], ["ve"]),
                 helper.make_node("Sqrt", ["ve"], ["s"]), helper.make_node("Div", ["d", "s"], ["n"]),
                 helper.make_node("Mul", ["n", "gamma"], ["g"]),
                 helper.make_node("Add", ["g", "beta"], ["Y"])]
        if extra_reader:
            nodes.append(helper.make_node("Neg", ["d"], ["D"]))
        return nodes
    X = rnd(rng, (2, 5, 16), scale=3.0) + 1.5
    gm, bt = rnd(rng, 16), rnd(rng, 16)
    inits = {"gamma": gm, "beta": bt, "two": np.array(2.0, np.float32),
             "eps": np.array(1e-5, np.float32)}
    want = ln_ref(X.astype(np.float64), gm, bt, 1e-5)
    # below opset 17 the fused node is onnxexec's twin of LayerNormalization
    gone = {"ai.onnxexec.LayerNormalization": 1, "ReduceMean": 0, "Sub": 0, "Pow": 0, "Sqrt": 0,
            "Div": 0}
    out.append(Case("23a_layernorm_pattern_pow", ln_nodes("pow"), {"X": X}, ["Y"], inits,
                    gone, {"Y": want}, opset=14))
    out.append(Case("23b_layernorm_pattern_mul_dd", ln_nodes("mul"), {"X": X}, ["Y"], inits,
                    {"ai.onnxexec.LayerNormalization": 1, "ReduceMean": 0, "Sub": 0, "Sqrt": 0},
                    {"Y": want}, opset=14))
    out.append(Case("23d_layernorm_pattern_opset17", ln_nodes("pow"), {"X": X}, ["Y"], inits,
                    {"LayerNormalization": 1, "ai.onnxexec.LayerNormalization": 0,
                     "ReduceMean": 0, "Sub": 0, "Sqrt": 0}, {"Y": want}, opset=17))
    # torch's export of equal initializers: the second an Identity of the first (an
    # untrained LayerNorm's ones and zeros): gamma and beta through Identity nodes still fold
    dedup = [helper.make_node("Identity", ["gamma0"], ["gamma"]),
             helper.make_node("Identity", ["beta0"], ["beta"])] + ln_nodes("pow")
    out.append(Case("23e_layernorm_pattern_identity_params", dedup, {"X": X}, ["Y"],
                    dict({k: v for k, v in inits.items() if k not in ("gamma", "beta")},
                         gamma0=gm, beta0=bt), gone, {"Y": want}, opset=14))
    out.append(Case("23c_layernorm_pattern_d_read_elsewhere_no_fusion",
                    ln_nodes("pow", extra_reader=True), {"X": X}, ["Y", "D"], inits,
                    {"LayerNormalization": 0, "ReduceMean": 2, "Sqrt": 1},
                    {"Y": want, "D": -(X - X.mean(-1, keepdims=True))}, opset=14))

    # 28. A residual Add read only by a LayerNormalization -> SkipLayerNormalization: inputs
    # of the same shape, a broadcast one, float16 (the sum rounded first, as Add does), no
    # bias, after a MatMul + bias (fused first), after the exported LN pattern; not when the
    # sum or the Mean is also read
    SKIP = "ai.onnxexec.SkipLayerNormalization"
    Xs, Rs = rnd(rng, (2, 5, 16), scale=2.0), rnd(rng, (2, 5, 16), scale=2.0)
    gs, bs = rnd(rng, 16), rnd(rng, 16)
    lnodes = [helper.make_node("Add", ["X", "R"], ["s"]),
              helper.make_node("LayerNormalization", ["s", "g", "b"], ["Y"], epsilon=1e-3)]
    sref = Xs.astype(np.float64) + Rs
    out.append(Case("28a_skip_layernorm", lnodes, {"X": Xs, "R": Rs}, ["Y"], {"g": gs, "b": bs},
                    {SKIP: 1, "Add": 0, "LayerNormalization": 0},
                    {"Y": ln_ref(sref, gs, bs, 1e-3)}, opset=17))
    Rb = rnd(rng, (5, 16), scale=2.0)
    out.append(Case("28b_skip_layernorm_broadcast_skip",
                    [helper.make_node("Add", ["R", "X"], ["s"]),
                     helper.make_node("LayerNormalization", ["s", "g"], ["Y"], axis=-1)],
                    {"X": Xs, "R": Rb}, ["Y"], {"g": gs},
                    {SKIP: 1, "Add": 0, "LayerNormalization": 0},
                    {"Y": ln_ref(Xs.astype(np.float64) + Rb, gs, 0.0, 1e-5)}, opset=17))
    Xh, Rh, gh, bh = (a.astype(np.float16) for a in (Xs, Rs, gs, bs))
    sh = (Xh + Rh).astype(np.float64)  # rounded to float16 by the sum, as Add rounds it
    out.append(Case("28c_skip_layernorm_float16", lnodes, {"X": Xh, "R": Rh}, ["Y"],
                    {"g": gh, "b": bh}, {SKIP: 1, "Add": 0, "LayerNormalization": 0},
                    {"Y": ln_ref(sh, gh.astype(np.float64), bh.astype(np.float64), 1e-3)},
                    opset=17, dtype=F16))
    out.append(Case("28d_skip_layernorm_sum_also_output_no_fusion", lnodes,
                    {"X": Xs, "R": Rs}, ["Y", "s"], {"g": gs, "b": bs},
                    {SKIP: 0, "Add": 1, "LayerNormalization": 1},
                    {"Y": ln_ref(sref, gs, bs, 1e-3), "s": sref}, opset=17))
    mean_out = sref.mean(-1, keepdims=True)
    out.append(Case("28e_skip_layernorm_mean_read_no_fusion",
                    [lnodes[0], helper.make_node("LayerNormalization", ["s", "g", "b"],
                                                 ["Y", "M"], epsilon=1e-3)],
                    {"X": Xs, "R": Rs}, ["Y", "M"], {"g": gs, "b": bs},
                    {SKIP: 0, "Add": 1, "LayerNormalization": 1},
                    {"Y": ln_ref(sref, gs, bs, 1e-3), "M": mean_out}, opset=17))
    Wm, bm = weights(rng, (16, 16)), rnd(rng, 16)
    mref = mm(Xs, Wm) + bm + Rs
    out.append(Case("28f_matmul_bias_residual_layernorm",
                    [helper.make_node("MatMul", ["X", "W"], ["p"]),
                     helper.make_node("Add", ["p", "bm"], ["q"]),
                     helper.make_node("Add", ["R", "q"], ["s"]),
                     helper.make_node("LayerNormalization", ["s", "g", "b"], ["Y"])],
                    {"X": Xs, "R": Rs}, ["Y"], {"W": Wm, "bm": bm, "g": gs, "b": bs},
                    {FUSED_MM: 1, SKIP: 1, "Add": 0, "MatMul": 0, "LayerNormalization": 0},
                    {"Y": ln_ref(mref, gs, bs, 1e-5)}, opset=17))
    pn = ln_nodes("pow")
    pn[0].input[0] = pn[1].input[0] = "xr"
    out.append(Case("28g_residual_then_layernorm_pattern",
                    [helper.make_node("Add", ["X", "R"], ["xr"])] + pn, {"X": Xs, "R": Rs}, ["Y"],
                    {"gamma": gs, "beta": bs, "two": np.array(2.0, np.float32),
                     "eps": np.array(1e-5, np.float32)},
                    {SKIP: 1, "ai.onnxexec.LayerNormalization": 0, "ReduceMean": 0, "Add": 0},
                    {"Y": ln_ref(sref, gs, bs, 1e-5)}, opset=14))

    # 24. GELU as torch exports nn.GELU (and with the 0.5 applied to x first) -> Gelu
    import math
    Xg = rnd(rng, (3, 40), scale=3.0)
    gelu = np.vectorize(lambda v: 0.5 * v * (1.0 + math.erf(v / math.sqrt(2.0))))(
        Xg.astype(np.float64))
    ginits = {"sqrt2": np.array(math.sqrt(2.0), np.float32), "one": np.array(1.0, np.float32),
              "half": np.array(0.5, np.float32)}
    out.append(Case(
        "24a_gelu_pattern_torch",
        [helper.make_node("Div", ["X", "sqrt2"], ["a"]), helper.make_node("Erf", ["a"], ["e"]),
         helper.make_node("Add", ["e", "one"], ["p"]), helper.make_node("Mul", ["X", "p"], ["q"]),
         helper.make_node("Mul", ["q", "half"], ["Y"])],
        {"X": Xg}, ["Y"], ginits, {"ai.onnxexec.Gelu": 1, "Erf": 0, "Div": 0, "Mul": 0}, {"Y": gelu},
        opset=17))
    out.append(Case(
        "24b_gelu_pattern_half_first",
        [helper.make_node("Mul", ["X", "half"], ["h"]), helper.make_node("Div", ["X", "sqrt2"], ["a"]),
         helper.make_node("Erf", ["a"], ["e"]), helper.make_node("Add", ["one", "e"], ["p"]),
         helper.make_node("Mul", ["h", "p"], ["Y"])],
        {"X": Xg}, ["Y"], ginits, {"ai.onnxexec.Gelu": 1, "Erf": 0, "Div": 0, "Mul": 0}, {"Y": gelu},
        opset=17))

    # GELU's tanh form, as torch 1.13 exports F.gelu(approximate="tanh") (x^3 as x (x x), the
    # constants first), Hugging Face's gelu_new (Pow(x, 3), the 0.5 on x first) and GPT-2's
    # code (((x c) x) x) -> Gelu(approximate="tanh"); a constant off by 1e-3 or an
    # intermediate read elsewhere keeps the nodes
    xg = Xg.astype(np.float64)
    gelu_t = 0.5 * xg * (1 + np.tanh(np.sqrt(2 / np.pi) * (xg + 0.044715 * xg ** 3)))
    tinits = {"k": np.array(0.044715, np.float32), "s2p": np.array(np.sqrt(2 / np.pi), np.float32),
              "one": np.array(1.0, np.float32), "half": np.array(0.5, np.float32),
              "three": np.array(3.0, np.float32), "kbad": np.array(0.0457, np.float32)}
    tail_torch = [helper.make_node("Tanh", ["u"], ["t"]), helper.make_node("Add", ["one", "t"], ["p"]),
                  helper.make_node("Mul", ["X", "p"], ["q"]),
                  helper.make_node("Mul", ["half", "q"], ["Y"])]
    tail_hf = [helper.make_node("Tanh", ["u"], ["t"]), helper.make_node("Add", ["t", "one"], ["p"]),
               helper.make_node("Mul", ["X", "half"], ["h"]), helper.make_node("Mul", ["h", "p"], ["Y"])]
    forms = {
        "torch": [helper.make_node("Mul", ["X", "X"], ["x2"]), helper.make_node("Mul", ["X", "x2"], ["x3"]),
                  helper.make_node("Mul", ["k", "x3"], ["kx3"]), helper.make_node("Add", ["X", "kx3"], ["a"]),
                  helper.make_node("Mul", ["s2p", "a"], ["u"])] + tail_torch,
        "hf_pow": [helper.make_node("Pow", ["X", "three"], ["x3"]), helper.make_node("Mul", ["x3", "k"], ["kx3"]),
                   helper.make_node("Add", ["X", "kx3"], ["a"]), helper.make_node("Mul", ["a", "s2p"], ["u"])]
        + tail_hf,
        "gpt2": [helper.make_node("Mul", ["X", "k"], ["xk"]), helper.make_node("Mul", ["xk", "X"], ["xkx"]),
                 helper.make_node("Mul", ["xkx", "X"], ["kx3"]), helper.make_node("Add", ["kx3", "X"], ["a"]),
                 helper.make_node("Mul", ["a", "s2p"], ["u"])] + tail_hf,
    }
    for tag, nodes in forms.items():
        out.append(Case("24c_gelu_tanh_" + tag, nodes, {"X": Xg}, ["Y"], tinits,
                        {"ai.onnxexec.Gelu": 1, "Tanh": 0, "Mul": 0, "Add": 0, "Pow": 0},
                        {"Y": gelu_t}, opset=17))
    bad = [helper.make_node("Mul", ["kbad", "x3"], ["kx3"]) if n.output[0] == "kx3" else n
           for n in forms["torch"]]
    gelu_bad = 0.5 * xg * (1 + np.tanh(np.sqrt(2 / np.pi) * (xg + 0.0457 * xg ** 3)))
    out.append(Case("24d_gelu_tanh_other_constant_no_fusion", bad, {"X": Xg}, ["Y"], tinits,
                    {"ai.onnxexec.Gelu": 0, "Tanh": 1}, {"Y": gelu_bad}, opset=17))
    out.append(Case("24e_gelu_tanh_cube_read_no_fusion", forms["torch"], {"X": Xg}, ["Y", "x3"],
                    tinits, {"ai.onnxexec.Gelu": 0, "Tanh": 1},
                    {"Y": gelu_t, "x3": xg ** 3}, opset=17))
    sq = [helper.make_node("Mul", ["k", "x2"], ["kx3"]) if n.output[0] == "kx3" else n
          for n in forms["torch"] if n.output[0] != "x3"]
    out.append(Case("24f_gelu_tanh_square_no_fusion", sq, {"X": Xg}, ["Y"], tinits,
                    {"ai.onnxexec.Gelu": 0, "Tanh": 1},
                    {"Y": 0.5 * xg * (1 + np.tanh(np.sqrt(2 / np.pi) * (xg + 0.044715 * xg ** 2)))},
                    opset=17))
    # a cube term of 12 Muls (x x x times ten constants whose product is 0.044715): past the
    # matcher's chain, kept (it once overflowed the chain array: caught under ASan)
    long = [helper.make_node("Mul", ["X", "X"], ["m0"]), helper.make_node("Mul", ["m0", "X"], ["m1"])]
    for i in range(10):
        long.append(helper.make_node("Mul", ["m%d" % (i + 1), "k" if i == 0 else "one"],
                                     ["kx3" if i == 9 else "m%d" % (i + 2)]))
    long += [n for n in forms["torch"] if n.output[0] not in ("x2", "x3", "kx3")]
    out.append(Case("24g_gelu_tanh_long_cube_no_fusion", long, {"X": Xg}, ["Y"], tinits,
                    {"ai.onnxexec.Gelu": 0, "Tanh": 1}, {"Y": gelu_t}, opset=17))
    # a one-element constant of higher rank than x broadcasts the result up ([1, 1, 1] 0.5):
    # the fused node would not, so neither form fuses
    rinits = dict(tinits, half=np.array([[[0.5]]], np.float32))
    out.append(Case("24h_gelu_tanh_rank3_half_no_fusion", forms["torch"], {"X": Xg}, ["Y"], rinits,
                    {"ai.onnxexec.Gelu": 0, "Tanh": 1}, {"Y": gelu_t[None]}, opset=17))
    ginits3 = dict(ginits, half=np.array([[[0.5]]], np.float32))
    out.append(Case(
        "24i_gelu_rank3_half_no_fusion",
        [helper.make_node("Div", ["X", "sqrt2"], ["a"]), helper.make_node("Erf", ["a"], ["e"]),
         helper.make_node("Add", ["e", "one"], ["p"]), helper.make_node("Mul", ["X", "p"], ["q"]),
         helper.make_node("Mul", ["q", "half"], ["Y"])],
        {"X": Xg}, ["Y"], ginits3, {"ai.onnxexec.Gelu": 0, "Erf": 1}, {"Y": gelu[None]},
        opset=17))
    # 25. Gemm -> BatchNormalization (an MLP's BatchNorm1d) -> Relu: folded, then fused
    A = rnd(rng, (5, 12))
    for tb, with_c in ((1, True), (0, True), (1, False)):
        Wg = weights(rng, (8, 12) if tb else (12, 8))
        p = bn_params(rng, 8)
        inits = {"B": Wg, **bn_inits(p, "bn")}
        ins = ["A", "B"]
        y = mm(A, Wg.T if tb else Wg)
        if with_c:
            inits["C"] = rnd(rng, 8)
            ins.append("C")
            y = y + inits["C"]
        out.append(Case(
            "25_gemm_transB%d_%s_bn_relu" % (tb, "C" if with_c else "noC"),
            [helper.make_node("Gemm", ins, ["g"], transB=tb), bn_node("g", "b", "bn"),
             helper.make_node("Relu", ["b"], ["Y"])],
            {"A": A}, ["Y"], inits, {FUSED_GEMM: 1, "Gemm": 0, "BatchNormalization": 0, "Relu": 0},
            {"Y": relu(bn(y, **p))}))

    # 26. A pointwise Conv whose output only a depthwise Conv reads, both fused with their
    # activations: the CPU plan runs the pair as one step where the widened tensor is 1 MiB
    # or more, on 2 threads or more (kernels/cpu/conv.c, ox_nn_cpu_pw_dw: bands of rows,
    # shared rows kept between bands). Each depthwise path (rows in place, 16-channel tiles, the padded
    # copy, strides other than 2 across), 1-2 images, odd sizes, pads that differ per side,
    # dilation, no biases; and a pair that must stay apart (the widened tensor read twice).
    def act_of(name, y):
        return {"Relu": relu, "Clip": lambda v: clip(v, 0, 6), "Silu": silu,
                "": lambda v: v}[name](y)

    def act_nodes(name, inp, outp, tag):
        if name == "Relu":
            return [helper.make_node("Relu", [inp], [outp])]
        if name == "Clip":
            return [helper.make_node("Clip", [inp, "lo", "hi"], [outp])]
        if name == "Silu":
            return [helper.make_node("Sigmoid", [inp], [tag + "_s"]),
                    helper.make_node("Mul", [inp, tag + "_s"], [outp])]
        return [helper.make_node("Identity", [inp], [outp])]

    def pw_dw_case(name, xshape, c2, k, stride, pads, dil, act1, act2, threads, bias=True,
                   apart=False, one_step=True, made=False):
        r = np.random.default_rng(26)
        c1 = xshape[1]
        X = rnd(r, xshape)
        # made: X is computed (Neg of the graph input), so that its memory is in the arena and
        # could be handed to the depthwise output if the pair's step did not keep it alive
        src = "Xn" if made else "X"
        W1, W2 = weights(r, (c2, c1, 1, 1), gain=2.0), weights(r, (c2, 1, k[0], k[1]), gain=2.0)
        B1, B2 = rnd(r, c2, scale=0.3), rnd(r, c2, scale=0.3)
        inits = {"W1": W1, "W2": W2, "lo": np.array(0, np.float32),
                 "hi": np.array(6, np.float32)}
        if bias:
            inits.update(B1=B1, B2=B2)
        nodes = [helper.make_node("Neg", ["Xm"], ["Xn"])] if made else []
        nodes += [helper.make_node("Conv", [src, "W1"] + (["B1"] if bias else []), ["p"],
                                   name="pw")]
        nodes += act_nodes(act1, "p", "pa", "pw") if act1 else []
        widened = "pa" if act1 else "p"
        nodes.append(helper.make_node("Conv", [widened, "W2"] + (["B2"] if bias else []), ["d"],
                                      name="dw", group=c2, kernel_shape=list(k),
                                      strides=list(stride), pads=list(pads), dilations=list(dil)))
        nodes += act_nodes(act2, "d", "Y", "dw")
        pt = act_of(act1, conv(X, W1, B1 if bias else None))
        # torch pads both sides alike: pad explicitly (zeros), then a valid convolution
        padded = np.pad(pt, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
        y = act_of(act2, conv(padded, W2, B2 if bias else None, stride=tuple(stride),
                              group=c2, dil=tuple(dil)))
        outs, oracle = ["Y"], {"Y": y}
        if apart:  # the widened tensor is a graph output too
            nodes.append(helper.make_node("Identity", [widened], ["P"]))
            outs.append("P")
            oracle["P"] = pt
        return Case("26_pw_dw_" + name, nodes, {"Xm" if made else "X": -X if made else X}, outs,
                    inits, None, oracle,
                    threads=threads, one_step=("pw", "dw", one_step and not apart))

    out.append(pw_dw_case("s2rows_1t_apart", (1, 8, 40, 100), 72, (3, 3), (2, 2), (1, 1, 1, 1),
                          (1, 1), "Clip", "Clip", 1, one_step=False))
    out.append(pw_dw_case("s2rows_1img_2t", (1, 8, 40, 100), 72, (3, 3), (2, 2), (1, 1, 1, 1),
                          (1, 1), "Clip", "Clip", 2))
    out.append(pw_dw_case("s2rows_2t_2img", (2, 8, 41, 99), 72, (3, 3), (2, 2), (1, 0, 1, 2),
                          (1, 1), "Relu", "Clip", 2))
    out.append(pw_dw_case("s1_tiles_2t", (2, 16, 48, 60), 96, (3, 3), (1, 1), (1, 1, 1, 1),
                          (1, 1), "Relu", "Relu", 2))
    out.append(pw_dw_case("5x5s2_silu_2t", (1, 12, 57, 61), 80, (5, 5), (2, 2), (2, 2, 2, 2),
                          (1, 1), "Silu", "Silu", 2))
    out.append(pw_dw_case("s1_wide_dil2_nobias_2t", (1, 8, 70, 75), 64, (3, 3), (1, 1),
                          (0, 2, 2, 1), (2, 2), "", "Clip", 2, bias=False))
    out.append(pw_dw_case("s2x1_2t", (1, 8, 66, 70), 64, (3, 3), (2, 1), (1, 1, 1, 1), (1, 1),
                          "Clip", "", 2))
    out.append(pw_dw_case("s1_tiles_3t_made", (2, 16, 48, 60), 96, (3, 3), (1, 1), (1, 1, 1, 1),
                          (1, 1), "Relu", "Relu", 3, made=True))
    out.append(pw_dw_case("s2rows_2t_made", (1, 8, 40, 100), 72, (3, 3), (2, 2), (1, 1, 1, 1),
                          (1, 1), "Clip", "Clip", 2, made=True))
    out.append(pw_dw_case("read_twice_2t", (1, 8, 40, 100), 72, (3, 3), (2, 2), (1, 1, 1, 1),
                          (1, 1), "Clip", "Clip", 2, apart=True))
    # 27. Attention chains -> one ai.onnxexec.FusedAttention node (fold_attention): the forms
    # exporters write (Hugging Face style, torch 1.13's nn.MultiheadAttention, torch 2.x's
    # scaled_dot_product_attention with its scale computed from Shape), broadcasting, masks
    # (a row masked everywhere gives NaN, as Softmax does), operands BLAS cannot address in
    # place, other element types, OpenBLAS instead of the packed kernel, and chains that must
    # stay apart. Oracle: numpy in float64.
    FA = "ai.onnxexec.FusedAttention"

    def sdpa_ref(q, kt, v, mask=None, scale=1.0):
        s = mm(q, kt) * scale
        if mask is not None:
            s = s + np.asarray(mask, np.float64)
        with np.errstate(invalid="ignore"):
            e = np.exp(s - s.max(-1, keepdims=True))
            return mm(e / e.sum(-1, keepdims=True), v)

    def c64(vals, dt=np.int64):
        return np.array(vals, dt)

    def hf_case(name, B, S, H, D, mask_shape=None, threads=None, env=None, mask_fill=None):
        r = np.random.default_rng(27)
        E = H * D
        xq, xk, xv = rnd(r, (B, S, E)), rnd(r, (B, S, E)), rnd(r, (B, S, E))
        inits = {"shp": c64([B, S, H, D]), "oshp": c64([B, S, E]),
                 "sqd": np.array(np.sqrt(D), np.float32)}
        nodes = [helper.make_node("Reshape", ["Xq", "shp"], ["q4"]),
                 helper.make_node("Transpose", ["q4"], ["q"], perm=[0, 2, 1, 3]),
                 helper.make_node("Reshape", ["Xk", "shp"], ["k4"]),
                 helper.make_node("Transpose", ["k4"], ["kt"], perm=[0, 2, 3, 1]),
                 helper.make_node("Reshape", ["Xv", "shp"], ["v4"]),
                 helper.make_node("Transpose", ["v4"], ["v"], perm=[0, 2, 1, 3]),
                 helper.make_node("MatMul", ["q", "kt"], ["s"]),
                 helper.make_node("Div", ["s", "sqd"], ["s2"])]
        ins = {"Xq": xq, "Xk": xk, "Xv": xv}
        sm_in, mask = "s2", None
        if mask_shape is not None:
            mask = (r.uniform(size=mask_shape) < 0.3).astype(np.float32) * -10000.0
            if mask_fill is not None:
                mask[mask_fill] = -np.inf
            ins["M"] = mask
            nodes.append(helper.make_node("Add", ["s2", "M"], ["s3"]))
            sm_in = "s3"
        nodes += [helper.make_node("Softmax", [sm_in], ["p"], axis=-1),
                  helper.make_node("MatMul", ["p", "v"], ["o"]),
                  helper.make_node("Transpose", ["o"], ["o2"], perm=[0, 2, 1, 3]),
                  helper.make_node("Reshape", ["o2", "oshp"], ["Y"])]
        q = xq.reshape(B, S, H, D).transpose(0, 2, 1, 3)
        kt = xk.reshape(B, S, H, D).transpose(0, 2, 3, 1)
        v = xv.reshape(B, S, H, D).transpose(0, 2, 1, 3)
        y = sdpa_ref(q, kt, v, mask, 1.0 / np.sqrt(D)).transpose(0, 2, 1, 3).reshape(B, S, E)
        return Case("27_attention_hf_" + name, nodes, ins, ["Y"], inits,
                    {FA: 1, "Transpose": 0, "MatMul": 0, "Softmax": 0, "Div": 0, "Add": 0},
                    {"Y": y}, threads=threads, env=env)

    out.append(hf_case("nomask", 1, 7, 2, 8))
    out.append(hf_case("mask_b11t_2t", 3, 9, 4, 16, (3, 1, 1, 9), threads=2))
    out.append(hf_case("mask_b11t_openblas", 2, 9, 4, 16, (2, 1, 1, 9),
                       env={"OX_SGEMM_PACKED": "0"}))
    # a query whose keys are all masked: NaN there (exp(-inf - -inf)), as Softmax gives
    out.append(hf_case("mask_row_all_inf", 1, 5, 2, 4, (1, 2, 5, 5), mask_fill=(0, 1, 3)))

    def mha113_case(name, S, B, H, D, dt=np.float32):
        # torch 1.13's nn.MultiheadAttention: [S, B*H, D] views, Transpose(1, 0, 2), q / sqrt(D),
        # keys as Transpose(1, 2, 0), the product back through Transpose(1, 0, 2)
        r = np.random.default_rng(271)
        E = H * D
        xq, xk, xv = (rnd(r, (S, B, E), dt) for _ in range(3))
        inits = {"shp": c64([S, B * H, D]), "oshp": c64([S, B, E]),
                 "c": np.array(np.sqrt(D), dt)}
        nodes = [helper.make_node("Reshape", ["Xq", "shp"], ["q3"]),
                 helper.make_node("Transpose", ["q3"], ["qt"], perm=[1, 0, 2]),
                 helper.make_node("Div", ["qt", "c"], ["q"]),
                 helper.make_node("Reshape", ["Xk", "shp"], ["k3"]),
                 helper.make_node("Transpose", ["k3"], ["kt"], perm=[1, 2, 0]),
                 helper.make_node("MatMul", ["q", "kt"], ["s"]),
                 helper.make_node("Softmax", ["s"], ["p"], axis=-1),
                 helper.make_node("Reshape", ["Xv", "shp"], ["v3"]),
                 helper.make_node("Transpose", ["v3"], ["v"], perm=[1, 0, 2]),
                 helper.make_node("MatMul", ["p", "v"], ["o"]),
                 helper.make_node("Transpose", ["o"], ["o2"], perm=[1, 0, 2]),
                 helper.make_node("Reshape", ["o2", "oshp"], ["Y"])]
        q = xq.reshape(S, B * H, D).transpose(1, 0, 2).astype(np.float64) / np.sqrt(D)
        kt = xk.reshape(S, B * H, D).transpose(1, 2, 0)
        v = xv.reshape(S, B * H, D).transpose(1, 0, 2)
        y = sdpa_ref(q, kt, v).transpose(1, 0, 2).reshape(S, B, E)
        return Case("27_attention_mha113_" + name, nodes, {"Xq": xq, "Xk": xk, "Xv": xv}, ["Y"],
                    inits, {FA: 1, "Transpose": 0, "MatMul": 0, "Softmax": 0, "Div": 0},
                    {"Y": y}, opset=11 if dt == np.float32 else 13, dtype=Case.elem(xq))

    out.append(mha113_case("opset11", 10, 2, 3, 8))
    out.append(mha113_case("float16", 10, 2, 3, 8, np.float16))

    def shape_nodes(src, pre, consts):
        # [Shape(src)[0], consts...] as exporters compute Reshape targets from the input's
        # shape (known only when a plan is built)
        return [helper.make_node("Shape", [src], [pre + "_sh"]),
                helper.make_node("Gather", [pre + "_sh", "i0"], [pre + "_d0"], axis=0),
                helper.make_node("Unsqueeze", [pre + "_d0", "ax0"], [pre + "_d0u"]),
                helper.make_node("Concat", [pre + "_d0u", consts], [pre + "_shape"], axis=0)]

    def torch2_mha_case(name, S, B, H, D, mask=False):
        # torch 2.x's nn.MultiheadAttention through its TorchScript exporter: the packed
        # projection unflattened, Unsqueeze, Transpose, Squeeze, Gather 0/1/2 into q, k, v;
        # each viewed [S, B*H, D] (the target computed from Shape), Transpose(1, 0, 2), viewed
        # [B, H, S, D]; scaled_dot_product_attention's symbolic; permute(2, 0, 1, 3), view
        r = np.random.default_rng(274)
        E = H * D
        x = rnd(r, (S, B, 3 * E))
        inits = {"unfl": c64([S, B, 3, E]), "ax0": c64([0]), "axm2": c64([-2]),
                 "i0": np.array(0, np.int64), "i1": np.array(1, np.int64),
                 "i2": np.array(2, np.int64), "bhd": c64([B * H, D]), "bhsd": c64([B, H, S, D]),
                 "oshp": c64([S * B, E]), "st": c64([-1]), "en": c64([np.iinfo(np.int64).max]),
                 "one": np.array([1.0], np.float32)}
        nodes = [helper.make_node("Reshape", ["X", "unfl"], ["u"]),
                 helper.make_node("Unsqueeze", ["u", "ax0"], ["u1"]),
                 helper.make_node("Transpose", ["u1"], ["u2"], perm=[3, 1, 2, 0, 4]),
                 helper.make_node("Squeeze", ["u2", "axm2"], ["u3"])]
        for t, idx in (("q", "i0"), ("k", "i1"), ("v", "i2")):
            nodes += [helper.make_node("Gather", ["u3", idx], [t], axis=0)]
            nodes += shape_nodes(t, t, "bhd")
            nodes += [helper.make_node("Reshape", [t, t + "_shape"], [t + "3"]),
                      helper.make_node("Transpose", [t + "3"], [t + "_t"], perm=[1, 0, 2]),
                      helper.make_node("Reshape", [t + "_t", "bhsd"], [t + "4"])]
        nodes += [helper.make_node("Shape", ["q4"], ["sh"]),
                  helper.make_node("Slice", ["sh", "st", "en"], ["last"]),
                  helper.make_node("Cast", ["last"], ["lf"], to=F32),
                  helper.make_node("Sqrt", ["lf"], ["sq"]),
                  helper.make_node("Div", ["one", "sq"], ["sc"]),
                  helper.make_node("Sqrt", ["sc"], ["u_"]),
                  helper.make_node("Transpose", ["k4"], ["kt"], perm=[0, 1, 3, 2]),
                  helper.make_node("Mul", ["q4", "u_"], ["qs"]),
                  helper.make_node("Mul", ["kt", "u_"], ["kts"]),
                  helper.make_node("MatMul", ["qs", "kts"], ["s"])]
        ins, m = {"X": x}, None
        sm_in = "s"
        if mask:
            m = np.triu(np.full((S, S), -np.inf, np.float32), 1)  # causal
            ins["M"] = m
            nodes.append(helper.make_node("Add", ["s", "M"], ["s2"]))
            sm_in = "s2"
        nodes += [helper.make_node("Softmax", [sm_in], ["p"], axis=-1),
                  helper.make_node("MatMul", ["p", "v4"], ["o"]),
                  helper.make_node("Transpose", ["o"], ["o2"], perm=[2, 0, 1, 3]),
                  helper.make_node("Reshape", ["o2", "oshp"], ["Y"])]
        qkv = x.reshape(S, B, 3, E)
        heads = [qkv[:, :, i].reshape(S, B * H, D).transpose(1, 0, 2).reshape(B, H, S, D)
                 for i in range(3)]
        y = sdpa_ref(heads[0], np.swapaxes(heads[1], -1, -2), heads[2], m, 1.0 / np.sqrt(D))
        y = y.transpose(2, 0, 1, 3).reshape(S * B, E)
        return Case("27_attention_torch2_mha_" + name, nodes, ins, ["Y"], inits,
                    {FA: 1, "MatMul": 0, "Softmax": 0, "Mul": 0}, {"Y": y}, opset=17,
                    run_ops={"FusedAttention": 1})

    out.append(torch2_mha_case("nomask", 7, 2, 3, 8))
    out.append(torch2_mha_case("causal", 9, 3, 2, 16, mask=True))

    # torch 1.13's packed projection: q, k, v as Slices of it whose ends are computed from
    # Shape (known at plan time); the views read the projection in place
    r = np.random.default_rng(275)
    S, B, H, D = 6, 2, 3, 4
    E = H * D
    x = rnd(r, (S, B, 3 * E))
    inits = {"shp": c64([S, B * H, D]), "oshp": c64([S, B, E]), "c": np.array(2.0, np.float32),
             "ax2": c64([2]), "i2": np.array(2, np.int64), "three": np.array(3, np.int64),
             "z": c64([0]), "ax0": c64([0])}
    def packed_mha_nodes(src, y):
        # q, k, v Slices of src [S, B, 3E] ending where Shape(src) says, viewed [S, B*H, D]
        # (target "shp"), q / c, the product back to [S, B, E] ("oshp") as y
        nodes = [helper.make_node("Shape", [src], ["xs"]),
                 helper.make_node("Gather", ["xs", "i2"], ["w3"], axis=0),
                 helper.make_node("Div", ["w3", "three"], ["w"]),
                 helper.make_node("Unsqueeze", ["w", "ax0"], ["wu"]),
                 helper.make_node("Add", ["wu", "wu"], ["w2u"]),
                 helper.make_node("Add", ["w2u", "wu"], ["w3u"])]
        for t, a, b in (("q", "z", "wu"), ("k", "wu", "w2u"), ("v", "w2u", "w3u")):
            nodes += [helper.make_node("Slice", [src, a, b, "ax2"], [t + "s"]),
                      helper.make_node("Reshape", [t + "s", "shp"], [t + "3"])]
        return nodes + [helper.make_node("Transpose", ["q3"], ["qt"], perm=[1, 0, 2]),
                        helper.make_node("Div", ["qt", "c"], ["q"]),
                        helper.make_node("Transpose", ["k3"], ["kt"], perm=[1, 2, 0]),
                        helper.make_node("MatMul", ["q", "kt"], ["s"]),
                        helper.make_node("Softmax", ["s"], ["p"], axis=-1),
                        helper.make_node("Transpose", ["v3"], ["v"], perm=[1, 0, 2]),
                        helper.make_node("MatMul", ["p", "v"], ["o"]),
                        helper.make_node("Transpose", ["o"], ["o2"], perm=[1, 0, 2]),
                        helper.make_node("Reshape", ["o2", "oshp"], [y])]

    nodes = packed_mha_nodes("X", "Y")
    qs, ks, vs = (x[:, :, i * E:(i + 1) * E].reshape(S, B * H, D) for i in range(3))
    y = sdpa_ref(qs.transpose(1, 0, 2) / 2.0, ks.transpose(1, 2, 0),
                 vs.transpose(1, 0, 2)).transpose(1, 0, 2).reshape(S, B, E)
    out.append(Case("27_attention_mha113_packed_slices", nodes, {"X": x}, ["Y"], inits,
                    {FA: 1, "Transpose": 0, "MatMul": 0, "Softmax": 0},
                    {"Y": y}, opset=13, run_ops={"FusedAttention": 1}))

    # views that are not one strided matrix per item, gathered: a Reshape that cuts across
    # what a Transpose parted (through the stages), and a matrix dim merged from two that a
    # Transpose parted (through the merged dim's sub-axes)
    r = np.random.default_rng(276)
    xq, kt, v = rnd(r, (2, 4, 6)), rnd(r, (2, 6, 5)), rnd(r, (2, 5, 3))
    nodes = [helper.make_node("Transpose", ["Xq"], ["xt"], perm=[0, 2, 1]),
             helper.make_node("Reshape", ["xt", "shp"], ["q"]),
             helper.make_node("MatMul", ["q", "KT"], ["s"]),
             helper.make_node("Softmax", ["s"], ["p"], axis=-1),
             helper.make_node("MatMul", ["p", "V"], ["Y"])]
    q = xq.transpose(0, 2, 1).reshape(2, 4, 6)
    for tag, env in (("packed", None), ("openblas", {"OX_SGEMM_PACKED": "0"})):
        out.append(Case("27_attention_view_stages_" + tag, nodes,
                        {"Xq": xq, "KT": kt, "V": v}, ["Y"], {"shp": c64([2, 4, 6])},
                        {FA: 1, "Transpose": 0, "Reshape": 0, "MatMul": 0},
                        {"Y": sdpa_ref(q, kt, v)}, env=env))
    xq, kt, v = rnd(r, (3, 2, 4)), rnd(r, (4, 5)), rnd(r, (5, 3))
    q = xq.transpose(1, 0, 2).reshape(6, 4)
    nodes = [helper.make_node("Transpose", ["Xq"], ["xt"], perm=[1, 0, 2])] + nodes[1:]
    out.append(Case("27_attention_view_merged_rows", nodes, {"Xq": xq, "KT": kt, "V": v}, ["Y"],
                    {"shp": c64([6, 4])}, {FA: 1, "Transpose": 0, "Reshape": 0, "MatMul": 0},
                    {"Y": sdpa_ref(q, kt, v)}))

    def sdpa_case(name, B, H, S, T, D, Dv, dt=np.float32, kv_heads=None, mask_shape=None,
                  env=None):
        # torch 2.x's symbolic for scaled_dot_product_attention: scale = 1 / sqrt(Q's last
        # dim) from Shape, Q and KT each times sqrt(scale), an additive float mask
        r = np.random.default_rng(272)
        hk = kv_heads or H
        q, k, v = rnd(r, (B, H, S, D), dt), rnd(r, (B, hk, T, D), dt), rnd(r, (1, hk, T, Dv), dt)
        onnx_dt = Case.elem(q)
        inits = {"st": c64([-1]), "en": c64([np.iinfo(np.int64).max]),
                 "one": np.array([1.0], np.float32)}
        nodes = [helper.make_node("Shape", ["Q"], ["sh"]),
                 helper.make_node("Slice", ["sh", "st", "en"], ["last"]),
                 helper.make_node("Cast", ["last"], ["lf"], to=F32),
                 helper.make_node("Sqrt", ["lf"], ["sq"]),
                 helper.make_node("Div", ["one", "sq"], ["sc"]),
                 helper.make_node("Cast", ["sc"], ["sc2"], to=onnx_dt),
                 helper.make_node("Sqrt", ["sc2"], ["u"]),
                 helper.make_node("Transpose", ["K"], ["kt"], perm=[0, 1, 3, 2]),
                 helper.make_node("Mul", ["Q", "u"], ["qs"]),
                 helper.make_node("Mul", ["kt", "u"], ["kts"]),
                 helper.make_node("MatMul", ["qs", "kts"], ["s"])]
        ins = {"Q": q, "K": k, "V": v}
        sm_in, mask = "s", None
        if mask_shape is not None:
            mask = np.where(r.uniform(size=mask_shape) < 0.25, -np.inf, 0).astype(dt)
            mask[..., 0] = 0  # every query sees its first key
            ins["M"] = mask
            nodes.append(helper.make_node("Add", ["M", "s"], ["s2"]))
            sm_in = "s2"
        nodes += [helper.make_node("Softmax", [sm_in], ["p"], axis=-1),
                  helper.make_node("MatMul", ["p", "V"], ["Y"])]
        y = sdpa_ref(q, np.swapaxes(k, -1, -2), v, mask, 1.0 / np.sqrt(D))
        return Case("27_attention_sdpa_" + name, nodes, ins, ["Y"], inits,
                    {FA: 1, "Transpose": 0, "MatMul": 0, "Softmax": 0, "Mul": 0},
                    {"Y": y}, opset=17, dtype=onnx_dt, env=env)

    out.append(sdpa_case("mask_st", 2, 3, 6, 11, 8, 8, mask_shape=(6, 11)))
    # keys shared by the heads (multi-query), values shared by the batch, a 1-D mask, Dv != D
    out.append(sdpa_case("mqa_mask_t_dv", 2, 4, 5, 7, 8, 12, kv_heads=1, mask_shape=(7,)))
    out.append(sdpa_case("double", 2, 3, 6, 11, 8, 8, np.float64, mask_shape=(2, 1, 6, 11)))
    out.append(sdpa_case("double_openblas", 2, 3, 6, 11, 8, 8, np.float64,
                         env={"OX_SGEMM_PACKED": "0"}))
    out.append(sdpa_case("float16", 2, 3, 6, 11, 8, 8, np.float16, mask_shape=(2, 3, 6, 11)))
    out.append(sdpa_case("openblas", 2, 3, 6, 11, 8, 16, mask_shape=(6, 11),
                         env={"OX_SGEMM_PACKED": "0"}))

    # Q and the output as views no BLAS call can address (neither stride 1): copied through rows
    r = np.random.default_rng(273)
    B, S, T, D, Dv = 2, 5, 6, 4, 3
    xq, kt, v = rnd(r, (D, S, B)), rnd(r, (B, D, T)), rnd(r, (B, T, Dv))
    nodes = [helper.make_node("Transpose", ["Xq"], ["q"], perm=[2, 1, 0]),
             helper.make_node("MatMul", ["q", "KT"], ["s"]),
             helper.make_node("Softmax", ["s"], ["p"], axis=-1),
             helper.make_node("MatMul", ["p", "V"], ["o"]),
             helper.make_node("Transpose", ["o"], ["Y"], perm=[2, 1, 0])]
    for tag, env in (("packed", None), ("openblas", {"OX_SGEMM_PACKED": "0"})):
        out.append(Case("27_attention_strided_views_" + tag, nodes, {"Xq": xq, "KT": kt, "V": v},
                        ["Y"], {}, {FA: 1, "Transpose": 0, "MatMul": 0, "Softmax": 0},
                        {"Y": sdpa_ref(xq.transpose(2, 1, 0), kt, v).transpose(2, 1, 0)},
                        env=env))

    # the output with contiguous columns (Transpose [0, 2, 1] after the product): OpenBLAS
    # writes it in place as a column-major C, the packed kernel through rows
    q, kt, v = rnd(r, (3, 5, 4)), rnd(r, (3, 4, 6)), rnd(r, (3, 6, 7))
    nodes = [helper.make_node("MatMul", ["Q", "KT"], ["s"]),
             helper.make_node("Softmax", ["s"], ["p"], axis=-1),
             helper.make_node("MatMul", ["p", "V"], ["o"]),
             helper.make_node("Transpose", ["o"], ["Y"], perm=[0, 2, 1])]
    for tag, env in (("packed", None), ("openblas", {"OX_SGEMM_PACKED": "0"})):
        out.append(Case("27_attention_output_columns_" + tag, nodes, {"Q": q, "KT": kt, "V": v},
                        ["Y"], {}, {FA: 1, "Transpose": 0, "MatMul": 0, "Softmax": 0},
                        {"Y": sdpa_ref(q, kt, v).transpose(0, 2, 1)}, env=env))

    # shapes the strided kernel does not cover, computed as the chain is written (MatMul's
    # and Add's rules, in double): a key that is a vector (its rank unknown when the model
    # loads: the output of a Squeeze), so that the scores are [T] and the output [Dv]; and a
    # mask that grows the scores (one query against a mask of four rows)
    r = np.random.default_rng(277)
    h, w2, h2 = rnd(r, (7, 5)), rnd(r, (5, 1)), rnd(r, (7, 3))
    sc = mm(h, w2[:, 0])
    e = np.exp(sc - sc.max())
    out.append(Case("27_attention_generic_vector_key",
                    [helper.make_node("Squeeze", ["W2", "ax1"], ["w"]),
                     helper.make_node("MatMul", ["H", "w"], ["s"]),
                     helper.make_node("Softmax", ["s"], ["p"], axis=-1),
                     helper.make_node("MatMul", ["p", "H2"], ["Y"])],
                    {"H": h, "W2": w2, "H2": h2}, ["Y"], {"ax1": c64([1])},
                    {FA: 1, "MatMul": 0, "Softmax": 0}, {"Y": mm(e / e.sum(), h2)}))
    q, kt, v, mask = rnd(r, (2, 1, 4)), rnd(r, (2, 4, 6)), rnd(r, (2, 6, 3)), rnd(r, (2, 4, 6))
    out.append(Case("27_attention_generic_mask_grows_scores",
                    [helper.make_node("MatMul", ["Q", "KT"], ["s"]),
                     helper.make_node("Add", ["s", "M"], ["s2"]),
                     helper.make_node("Softmax", ["s2"], ["p"], axis=-1),
                     helper.make_node("MatMul", ["p", "V"], ["Y"])],
                    {"Q": q, "KT": kt, "V": v, "M": mask}, ["Y"], {},
                    {FA: 1, "MatMul": 0, "Softmax": 0}, {"Y": sdpa_ref(q, kt, v, mask)}))

    # random chains of view ops (Transpose, Reshape splitting or merging, Slice, Gather,
    # Squeeze, Unsqueeze) in front of Q: whatever the chain, the fused node reads what numpy
    # computes (strided, merged dims through their sub-axes, or through the stages)
    def random_view_case(seed):
        r = np.random.default_rng(2800 + seed)
        a = rnd(r, tuple(int(d) for d in r.integers(1, 5, size=int(r.integers(2, 5)))))
        x, nodes, inits, cur = a, [], {}, "X"

        def emit(op, ins, **attrs):
            nonlocal cur
            out_name = "v%d" % len(nodes)
            nodes.append(helper.make_node(op, [cur] + ins, [out_name], **attrs))
            cur = out_name

        def const(vals):
            name = "c%d" % len(inits)
            inits[name] = c64(vals)
            return name
        for _ in range(int(r.integers(2, 6))):
            kind = int(r.integers(0, 6))
            if kind == 0 and a.ndim >= 2:
                perm = [int(i) for i in r.permutation(a.ndim)]
                a = a.transpose(perm)
                emit("Transpose", [], perm=perm)
            elif kind == 1:  # split an axis into two factors, or merge two neighbours
                ax = int(r.integers(0, a.ndim))
                d = a.shape[ax]
                fs = [f for f in range(1, d + 1) if d % f == 0]
                if r.integers(0, 2) and a.ndim < 6:
                    f = int(r.choice(fs))
                    shape = a.shape[:ax] + (f, d // f) + a.shape[ax + 1:]
                elif a.ndim >= 2 and ax + 1 < a.ndim:
                    shape = a.shape[:ax] + (d * a.shape[ax + 1],) + a.shape[ax + 2:]
                else:
                    continue
                a = a.reshape(shape)
                emit("Reshape", [const(list(shape))])
            elif kind == 2:
                ax = int(r.integers(0, a.ndim))
                d = a.shape[ax]
                b = int(r.integers(0, d))
                e = int(r.integers(b + 1, d + 1))
                a = a[(slice(None),) * ax + (slice(b, e),)]
                emit("Slice", [const([b]), const([e]), const([ax])])
            elif kind == 3 and a.ndim >= 3:
                ax = int(r.integers(0, a.ndim))
                i = int(r.integers(0, a.shape[ax]))
                keep = bool(r.integers(0, 2))
                a = np.take(a, [i] if keep else i, axis=ax)
                idx = "g%d" % len(inits)
                inits[idx] = np.array([i] if keep else i, np.int64)
                emit("Gather", [idx], axis=ax)
            elif kind == 4 and a.ndim < 6:
                ax = int(r.integers(0, a.ndim + 1))
                a = np.expand_dims(a, ax)
                emit("Unsqueeze", [const([ax])])
            elif kind == 5 and 1 in a.shape and a.ndim >= 3:
                ax = a.shape.index(1)
                a = np.squeeze(a, ax)
                emit("Squeeze", [const([ax])])
        while a.ndim < 2:
            a = np.expand_dims(a, 0)
            emit("Unsqueeze", [const([0])])
        D, T, Dv = a.shape[-1], int(r.integers(1, 6)), int(r.integers(1, 5))
        kt, v = rnd(r, (D, T)), rnd(r, (T, Dv))
        nodes += [helper.make_node("MatMul", [cur, "KT"], ["s"]),
                  helper.make_node("Softmax", ["s"], ["p"], axis=-1),
                  helper.make_node("MatMul", ["p", "V"], ["Y"])]
        return Case("27_attention_random_views_%02d" % seed, nodes, {"X": x, "KT": kt, "V": v},
                    ["Y"], inits, {FA: 1, "MatMul": 0, "Softmax": 0},
                    {"Y": sdpa_ref(a, kt, v)})

    out += [random_view_case(i) for i in range(16)]

    # float16 products of several tiles each way for the GPU's tensor-core kernel (forced by
    # the GPU check with OX_CUDA_ATTENTION=tc): queries and keys not multiples of 16, Dk and
    # Dv unequal, a mask broadcast over heads and rows (one query's keys all masked: NaN), and
    # keys at the kernel's limit of 256. On the CPU they check the float16 path as well.
    def f16_tiles_case(name, B, H, S, T, Dk, Dv, masked):
        r = np.random.default_rng(277)
        q, kt, v = (rnd(r, shp, np.float16) for shp in ((B, H, S, Dk), (B, H, Dk, T),
                                                         (B, H, T, Dv)))
        c = np.array(np.sqrt(Dk), np.float16)
        nodes = [helper.make_node("MatMul", ["Q", "KT"], ["s"]),
                 helper.make_node("Div", ["s", "c"], ["s2"])]
        ins, mask, sm_in = {"Q": q, "KT": kt, "V": v}, None, "s2"
        if masked:
            mask = np.where(r.uniform(size=(B, 1, 1, T)) < 0.3, -np.inf, 0).astype(np.float16)
            mask = np.broadcast_to(mask, (B, 1, S, T)).copy()
            mask[0, 0, 5, :] = -np.inf
            ins["M"] = mask
            nodes.append(helper.make_node("Add", ["s2", "M"], ["s3"]))
            sm_in = "s3"
        nodes += [helper.make_node("Softmax", [sm_in], ["p"], axis=-1),
                  helper.make_node("MatMul", ["p", "V"], ["Y"])]
        return Case("27_attention_f16_tiles_" + name, nodes, ins, ["Y"], {"c": c},
                    {FA: 1, "MatMul": 0, "Softmax": 0},
                    {"Y": sdpa_ref(q, kt, v, mask, 1.0 / np.sqrt(Dk))}, opset=13,
                    dtype=Case.elem(q))

    out.append(f16_tiles_case("masked", 2, 2, 70, 100, 40, 24, True))
    out.append(f16_tiles_case("keys_256", 1, 2, 33, 256, 64, 64, False))

    # a factor that is not provably one element (a [H, 1, 1] input): on Q it stays a Mul
    # that feeds the fused node; on the scores it keeps the chain apart
    q, k, v = rnd(r, (2, 3, 4, 8)), rnd(r, (2, 3, 8, 5)), rnd(r, (2, 3, 5, 8))
    temp = rnd(r, (3, 1, 1))
    out.append(Case("27_attention_head_factor_on_q_kept",
                    [helper.make_node("Mul", ["Q", "Tm"], ["qm"]),
                     helper.make_node("MatMul", ["qm", "KT"], ["s"]),
                     helper.make_node("Softmax", ["s"], ["p"], axis=-1),
                     helper.make_node("MatMul", ["p", "V"], ["Y"])],
                    {"Q": q, "KT": k, "V": v, "Tm": temp}, ["Y"], {},
                    {FA: 1, "Mul": 1, "MatMul": 0, "Softmax": 0},
                    {"Y": sdpa_ref(q * temp, k, v)}))
    out.append(Case("27_attention_head_factor_on_scores_no_fusion",
                    [helper.make_node("MatMul", ["Q", "KT"], ["s"]),
                     helper.make_node("Mul", ["s", "Tm"], ["s2"]),
                     helper.make_node("Softmax", ["s2"], ["p"], axis=-1),
                     helper.make_node("MatMul", ["p", "V"], ["Y"])],
                    {"Q": q, "KT": k, "V": v, "Tm": temp}, ["Y"], {},
                    {FA: 0, "Mul": 1, "MatMul": 2, "Softmax": 1},
                    {"Y": sdpa_ref(q, k, v, None, temp)}))

    # chains that must stay apart: the probabilities also a graph output; Softmax along
    # another axis; the scale applied after the mask (the mask would be scaled too)
    s = mm(q, k)
    e = np.exp(s - s.max(-1, keepdims=True))
    p = e / e.sum(-1, keepdims=True)
    out.append(Case("27_attention_probs_output_no_fusion",
                    [helper.make_node("MatMul", ["Q", "KT"], ["s"]),
                     helper.make_node("Softmax", ["s"], ["P"], axis=-1),
                     helper.make_node("MatMul", ["P", "V"], ["Y"])],
                    {"Q": q, "KT": k, "V": v}, ["Y", "P"], {},
                    {FA: 0, "MatMul": 2, "Softmax": 1}, {"Y": mm(p, v), "P": p}))
    qs = rnd(r, (2, 3, 5, 8))
    s = mm(qs, k)
    e = np.exp(s - s.max(-2, keepdims=True))
    out.append(Case("27_attention_softmax_axis_m2_no_fusion",
                    [helper.make_node("MatMul", ["Q", "KT"], ["s"]),
                     helper.make_node("Softmax", ["s"], ["p"], axis=-2),
                     helper.make_node("MatMul", ["p", "V"], ["Y"])],
                    {"Q": qs, "KT": k, "V": v}, ["Y"], {},
                    {FA: 0, "MatMul": 2, "Softmax": 1},
                    {"Y": mm(e / e.sum(-2, keepdims=True), v)}))
    mask = rnd(r, (4, 5))
    s = (mm(q, k) + mask) / 3.0
    e = np.exp(s - s.max(-1, keepdims=True))
    out.append(Case("27_attention_scale_after_mask_no_fusion",
                    [helper.make_node("MatMul", ["Q", "KT"], ["s"]),
                     helper.make_node("Add", ["s", "M"], ["s2"]),
                     helper.make_node("Div", ["s2", "three"], ["s3"]),
                     helper.make_node("Softmax", ["s3"], ["p"], axis=-1),
                     helper.make_node("MatMul", ["p", "V"], ["Y"])],
                    {"Q": q, "KT": k, "V": v, "M": mask}, ["Y"],
                    {"three": np.array(3.0, np.float32)},
                    {FA: 0, "MatMul": 2, "Softmax": 1},
                    {"Y": mm(e / e.sum(-1, keepdims=True), v)}))

    # 29. torch's batch-first MultiheadAttention swaps the batch and sequence axes of its
    # input before the projection; the Transpose moves into the FusedAttention's views and
    # the projection reads the input as it is (hoist_transpose). The Transposes left in the
    # graph for Shape nodes are folded with them when the plan is built (run_ops: what runs).
    # Oracle: numpy in float64.
    def batch_first_case(name, N, S, H, D, dt=np.float32, extra=None, w_shape=None,
                         moved=True, residual=None):
        r = np.random.default_rng(29)
        E = H * D
        x = rnd(r, (N, S, E), dt)
        w = weights(r, w_shape or (E, 3 * E), dt)
        bias = rnd(r, (3 * E,), dt, 0.1)
        inits = {"W": w, "bias": bias, "oshp": c64([S, N, E]), "c": np.array(np.sqrt(D), dt),
                 "i1": np.array(1, np.int64), "i2": np.array(2, np.int64),
                 "three": np.array(3, np.int64), "z": c64([0]), "ax0": c64([0]),
                 "ax2": c64([2]), "hd": c64([H, D])}
        # torch 1.13's form: the [S, N*H, D] targets computed from the transposed input's
        # Shape, the slices' ends from the projection's
        nodes = [helper.make_node("Transpose", ["X"], ["xt"], perm=[1, 0, 2]),
                 helper.make_node("Shape", ["xt"], ["xts"]),
                 helper.make_node("Gather", ["xts", "z"], ["s_"], axis=0),
                 helper.make_node("Gather", ["xts", "i1"], ["n_"], axis=0),
                 helper.make_node("Mul", ["n_", "hd"], ["nh_"]),
                 helper.make_node("Slice", ["nh_", "z", "i1u"], ["nh1"]),
                 helper.make_node("Slice", ["hd", "i1u", "i2u"], ["d1"]),
                 helper.make_node("Concat", ["s_", "nh1", "d1"], ["shp"], axis=0),
                 helper.make_node("MatMul", ["xt", "W"], ["pm"]),
                 helper.make_node("Add", ["pm", "bias"], ["P"])]
        inits["i1u"], inits["i2u"] = c64([1]), c64([2])
        nodes += packed_mha_nodes("P", "o3")
        opset = 13
        if residual:  # the residual and its norm: Y = LayerNorm(X + o3 swapped back)
            opset = 17
            inits["g"], inits["b"] = rnd(r, (E,), dt), rnd(r, (E,), dt, 0.1)
            add_ins = {"first": ["ot", "R"], "second": ["R", "ot"]}[residual[0]]
            nodes += [helper.make_node("Transpose", ["o3"], ["ot"], perm=[1, 0, 2]),
                      helper.make_node("Add", add_ins, ["sum"]),
                      helper.make_node("LayerNormalization", ["sum", "g", "b"], ["Y"], axis=-1)]
        else:
            nodes.append(helper.make_node("Transpose", ["o3"], ["Y"], perm=[1, 0, 2]))
        outs = ["Y"]
        xt = x.astype(np.float64).transpose(1, 0, 2)
        pr = mm(xt, w) + bias
        oracle = {}
        if extra == "reader":  # the projection is also an output: nothing moves
            outs.append("P")
            oracle["P"] = pr
        qs, ks, vs = (pr[:, :, i * E:(i + 1) * E].reshape(S, N * H, D) for i in range(3))
        y = sdpa_ref(qs.transpose(1, 0, 2) / np.sqrt(D), ks.transpose(1, 2, 0),
                     vs.transpose(1, 0, 2)).transpose(1, 0, 2).reshape(S, N, E)
        oracle["Y"] = y.transpose(1, 0, 2)
        run = {"FusedMatMul": 1, "FusedAttention": 1, "Transpose": 1 if moved else 2}
        ins = {"X": x}
        if residual:  # R: X itself, or a [1, S, E] that broadcasts
            rr = x if residual[1] == "x" else rnd(r, (1, S, E), dt)
            ins["R"] = rr
            sm = oracle["Y"] + rr.astype(np.float64)
            mu = sm.mean(-1, keepdims=True)
            sd = np.sqrt(((sm - mu) ** 2).mean(-1, keepdims=True) + 1e-5)
            oracle["Y"] = (sm - mu) / sd * inits["g"].astype(np.float64) + inits["b"]
            run = {"FusedMatMul": 1, "FusedAttention": 1, "SkipLayerNormalization": 1}
        if extra == "reader":
            run = None
        return Case("29_transpose_into_attention_" + name, nodes, ins, outs, inits,
                    {FA: 1, "MatMul": 0, "Softmax": 0}, oracle, opset=opset,
                    dtype=Case.elem(x), run_ops=run,
                    note="moved" if moved else "not moved")

    out.append(batch_first_case("mha113", 3, 5, 2, 4))
    out.append(batch_first_case("float16", 2, 6, 3, 8, np.float16))
    out.append(batch_first_case("projection_read_no_move", 2, 5, 2, 4, extra="reader",
                                moved=False))
    # the Transpose back after the attention, into the residual's SkipLayerNormalization
    # (skip_perm), either side of the Add, in float16, and with the other addend broadcast
    out.append(batch_first_case("residual_layernorm", 3, 5, 2, 4, residual=("second", "x")))
    out.append(batch_first_case("residual_layernorm_skip_first", 2, 6, 2, 8,
                                residual=("first", "x")))
    out.append(batch_first_case("residual_layernorm_float16", 2, 6, 3, 8, np.float16,
                                residual=("second", "x")))
    out.append(batch_first_case("residual_layernorm_broadcast", 3, 5, 2, 4,
                                residual=("second", "b")))

    # separate projections whose views start with a Transpose (merged with the moved one);
    # the input's Transpose then has no reader left and goes
    r = np.random.default_rng(291)
    N, S, E = 2, 5, 6
    x = rnd(r, (N, S, E))
    ws = {t: weights(r, (E, E)) for t in "qkv"}
    nodes = [helper.make_node("Transpose", ["X"], ["xt"], perm=[1, 0, 2])]
    for t in "qkv":
        nodes.append(helper.make_node("MatMul", ["xt", "W" + t], ["p" + t]))
    nodes += [helper.make_node("Transpose", ["pq"], ["q"], perm=[1, 0, 2]),
              helper.make_node("Transpose", ["pk"], ["kt"], perm=[1, 2, 0]),
              helper.make_node("Transpose", ["pv"], ["v"], perm=[1, 0, 2]),
              helper.make_node("MatMul", ["q", "kt"], ["s"]),
              helper.make_node("Softmax", ["s"], ["p"], axis=-1),
              helper.make_node("MatMul", ["p", "v"], ["Y"])]
    xt = x.astype(np.float64).transpose(1, 0, 2)
    pq, pk, pv = (mm(xt, ws[t]) for t in "qkv")
    y = sdpa_ref(pq.transpose(1, 0, 2), pk.transpose(1, 2, 0), pv.transpose(1, 0, 2))
    out.append(Case("29_transpose_into_attention_merged_perms", nodes, {"X": x}, ["Y"],
                    {"W" + t: ws[t] for t in "qkv"}, {FA: 1, "Transpose": 0, "MatMul": 3},
                    {"Y": y}, opset=13, run_ops={"MatMul": 3, "FusedAttention": 1}))

    # a FusedAttention the model itself holds, whose projection only an unread Shape reads
    # besides: the Transpose moves, and neither the old one nor the one made for the Shape is
    # left in the graph (a second dead-code pass after the sort)
    r = np.random.default_rng(293)
    x = rnd(r, (2, 5, 3, 8))
    w = weights(r, (8, 8))
    nodes = [helper.make_node("Transpose", ["X"], ["x0"], perm=[0, 2, 1, 3]),
             helper.make_node("Transpose", ["x0"], ["xt"], perm=[1, 2, 0, 3]),
             helper.make_node("MatMul", ["xt", "W"], ["P"]),
             helper.make_node("FusedAttention", ["P", "P", "P"], ["Y"], domain="ai.onnxexec",
                              view_q=[1, 4, 2, 0, 1, 3], view_k=[1, 4, 2, 0, 3, 1],
                              view_v=[1, 4, 2, 0, 1, 3]),
             helper.make_node("Shape", ["P"], ["sh"])]
    pr = mm(x.astype(np.float64).transpose(0, 2, 1, 3).transpose(1, 2, 0, 3), w)
    q = pr.transpose(2, 0, 1, 3)
    out.append(Case("29_transpose_into_attention_unread_shape", nodes, {"X": x}, ["Y"], {"W": w},
                    {FA: 1, "Transpose": 0, "Shape": 0, "MatMul": 1},
                    {"Y": sdpa_ref(q, pr.transpose(2, 0, 3, 1), q)}, opset=17))

    # weights per position ([S, E, E]: MatMul batched over the transposed input's first
    # axis) and a Transpose that moves the last axis: the Transpose stays where it is
    for tag, perm, wshape in (("batched_weights", [1, 0, 2], (5, 6, 6)),
                              ("last_axis_moved", [0, 2, 1], (2, 6))):
        r = np.random.default_rng(292)
        x = rnd(r, (2, 5, 6)) if tag == "batched_weights" else rnd(r, (5, 2, 6))
        w = weights(r, wshape)
        nodes = [helper.make_node("Transpose", ["X"], ["xt"], perm=perm),
                 helper.make_node("MatMul", ["xt", "W"], ["pq"]),
                 helper.make_node("Transpose", ["pq"], ["kt"], perm=[0, 2, 1]),
                 helper.make_node("MatMul", ["pq", "kt"], ["s"]),
                 helper.make_node("Softmax", ["s"], ["p"], axis=-1),
                 helper.make_node("MatMul", ["p", "pq"], ["Y"])]
        pq = mm(x.astype(np.float64).transpose(perm), w)
        y = sdpa_ref(pq, pq.transpose(0, 2, 1), pq)
        out.append(Case("29_transpose_into_attention_" + tag + "_no_move", nodes, {"X": x},
                        ["Y"], {"W": w}, {FA: 1, "Transpose": 1, "MatMul": 1}, {"Y": y},
                        opset=13, run_ops={"Transpose": 1, "MatMul": 1, "FusedAttention": 1}))
    return out


# ---- running and checking ---------------------------------------------------------------

def compare(got, want, rel_tol, abs_tol=None):
    """(rel L2, problem or None): shapes, NaN positions, relative L2, max |diff|."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if got.shape != want.shape:
        return float("nan"), "shape %s, expected %s" % (list(got.shape), list(want.shape))
    gn, wn = np.isnan(got), np.isnan(want)
    if (gn != wn).any():
        where = np.argwhere(gn != wn)[:4].tolist()
        return float("nan"), "NaN positions differ (%d NaN vs %d expected; first at %s)" % (
            gn.sum(), wn.sum(), where)
    g, w = got[~wn], want[~wn]
    den = np.linalg.norm(w)
    rel = float(np.linalg.norm(g - w) / (den if den > 0 else 1.0))
    if not rel <= rel_tol:
        return rel, "relative L2 %.3g > %.0e" % (rel, rel_tol)
    if abs_tol is not None and g.size:
        lim = abs_tol * (1 + np.abs(w).max())
        mad = float(np.abs(g - w).max())
        if not mad <= lim:
            return rel, "max |diff| %.3g > %.3g" % (mad, lim)
    return rel, None


def first_diff(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if got.shape != want.shape:
        return ""
    d = np.abs(np.nan_to_num(got - want, nan=np.inf))
    d[np.isnan(got) & np.isnan(want)] = 0
    i = np.unravel_index(np.argmax(d), d.shape)
    return " (worst at %s: got %r, expected %r)" % (list(i), got[i].item(), want[i].item())


def run(exe, model, inputs, outdir, optimize, threads=None, env=None, device=None):
    cmd = [exe, "run", model, "-o", outdir] + [a for n, p in inputs for a in ("-i", f"{n}={p}")]
    if not optimize:
        cmd.append("--no-optimize")
    if device:
        cmd += ["--device", device]
    if threads:
        cmd += ["--threads", str(threads)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, **(env or {})))
    if r.returncode != 0:
        raise RuntimeError("%s failed (exit %d):\n%s%s" % (" ".join(cmd), r.returncode,
                                                            r.stdout, r.stderr))


def profiled_steps(exe, model, threads):
    """(node, op) of the steps `onnxexec bench --profile` times."""
    cmd = [exe, "bench", model, "--runs", "1", "--warmup", "0", "--profile", "--json"]
    if threads:
        cmd += ["--threads", str(threads)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise RuntimeError("%s failed (exit %d): %s" % (" ".join(cmd), r.returncode, r.stderr))
    return [(q["node"], q["op"])
            for q in json.loads(r.stdout.strip().splitlines()[-1])["profile"]["nodes_ms"]]


def profiled_nodes(exe, model, threads):
    """The nodes `onnxexec bench --profile` times: a step that runs two nodes as one shows
    as its first node only."""
    return {n for n, _ in profiled_steps(exe, model, threads)}


def op_counts(exe, model):
    r = subprocess.run([exe, "info", model], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise RuntimeError("onnxexec info %s failed (exit %d): %s" % (model, r.returncode,
                                                                      r.stderr))
    counts, in_nodes = {}, False
    for line in r.stdout.splitlines():
        if line.startswith("nodes:"):
            in_nodes = True
            continue
        m = re.match(r"^\s+(\d+)\s+(\S+)\s*$", line)
        if in_nodes and m:
            counts[m.group(2)] = int(m.group(1))
        elif in_nodes and line and not line[0].isspace():
            in_nodes = False
    return counts


def check(exe, case, work, device=None):
    """Returns (summary, [problems]). With device, the optimized run is on it."""
    d = os.path.join(work, case.name)
    os.makedirs(d, exist_ok=True)
    model = os.path.join(d, "model.onnx")
    onnx.save(case.model(), model)
    inputs = []
    for n, a in case.inputs.items():
        p = os.path.join(d, "in_%s.npy" % n)
        np.save(p, a)
        inputs.append((n, p))
    outs = {}
    for opt in (True, False):
        od = os.path.join(d, "opt" if opt else "noopt")
        run(exe, model, inputs, od, opt, case.threads, case.env, device if opt else None)
        outs[opt] = {n: np.load(os.path.join(od, n + ".npy")) for n in case.outputs}
    f16 = case.dtype == F16
    tol_same, tol_abs, tol_oracle = (1e-3, 1e-3, 1e-3) if f16 else (1e-6, 1e-5, 1e-5)
    problems, rels_same, rels_oracle = [], [], []
    want_dt = NP_OF[case.dtype]
    for n in case.outputs:
        o, u = outs[True][n], outs[False][n]
        for tag, arr in (("optimized", o), ("unoptimized", u)):
            if arr.dtype != want_dt:
                problems.append("%s output %s is %s, expected %s" % (tag, n, arr.dtype,
                                                                     np.dtype(want_dt)))
        rel, why = compare(o, u, tol_same, tol_abs)
        rels_same.append(rel)
        if why:
            problems.append("output %s: optimized vs --no-optimize: %s%s" % (
                n, why, first_diff(o, u)))
        if n in case.oracle:
            rel, why = compare(u, case.oracle[n], tol_oracle)
            rels_oracle.append(rel)
            if why:
                problems.append("output %s: --no-optimize vs oracle: %s%s" % (
                    n, why, first_diff(u, case.oracle[n])))
            rel, why = compare(o, case.oracle[n], tol_oracle)
            if why:
                problems.append("output %s: optimized vs oracle: %s%s" % (
                    n, why, first_diff(o, case.oracle[n])))
        else:
            problems.append("output %s: no oracle" % n)
    counts = op_counts(exe, model)
    for op, want in case.expect.items():
        if counts.get(op, 0) != want:
            problems.append("optimized graph has %d %s, expected %d (ops: %s)" % (
                counts.get(op, 0), op, want, counts))
    if case.run_ops is not None and not device:
        ran = {}
        for _, op in profiled_steps(exe, model, case.threads):
            ran[op] = ran.get(op, 0) + 1
        if ran != case.run_ops:
            problems.append("a run times steps %s, expected %s" % (ran, case.run_ops))
    if case.one_step and not device:
        first, second, together = case.one_step
        timed = profiled_nodes(exe, model, case.threads)
        if first not in timed:
            problems.append("node %s not in the profile (%s)" % (first, sorted(timed)))
        elif together and second in timed:
            problems.append("nodes %s and %s ran as two steps, expected one" % (first, second))
        elif not together and second not in timed:
            problems.append("nodes %s and %s ran as one step, expected two" % (first, second))
    fused = " ".join("%s=%d" % (k.split(".")[-1], v) for k, v in sorted(counts.items()))
    summary = "opt/noopt relL2 %-9s oracle relL2 %-9s ops: %s" % (
        "%.2e" % max(rels_same), "%.2e" % max(rels_oracle) if rels_oracle else "-", fused)
    return summary, problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--onnxexec", required=True)
    ap.add_argument("--keep", help="write the models and outputs here (kept)")
    ap.add_argument("-k", action="append",
                    help="only the cases whose name contains this (repeatable: any of them)")
    ap.add_argument("--device", help="run the optimized side there (e.g. cuda): a GPU check")
    args = ap.parse_args()
    tmp = None
    if args.keep:
        work = args.keep
        os.makedirs(work, exist_ok=True)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="ox_optimize_")
        work = tmp.name
    failed = []
    all_cases = [c for c in cases() if not args.k or any(k in c.name for k in args.k)]
    width = max(len(c.name) for c in all_cases)
    for c in all_cases:
        try:
            summary, problems = check(args.onnxexec, c, work, args.device)
        except Exception as e:  # a crash or an unreadable output: this case fails
            summary, problems = "error", [str(e).strip()]
        verdict = "FAIL" if problems else "ok"
        print("%-4s %-*s %s" % (verdict, width, c.name, summary), flush=True)
        for p in problems:
            print("       " + p.replace("\n", "\n       "), flush=True)
        if problems:
            failed.append(c.name)
    if tmp:
        tmp.cleanup()
    if failed:
        print("\n%d of %d cases FAILED: %s" % (len(failed), len(all_cases), ", ".join(failed)))
        if not args.keep:
            print("(rerun with --keep DIR to keep the models and outputs)")
        return 1
    print("\nall %d cases passed" % len(all_cases))
    return 0


if __name__ == "__main__":
    sys.exit(main())
