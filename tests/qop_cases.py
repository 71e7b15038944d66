#!/usr/bin/python3
"""Backend-layout cases for ONNX Runtime's quantized operators that its quantizer writes in
the QOperator format and onnxexec's CPU runs since stop 37 (domain com.microsoft: QGemm,
QLinearAveragePool, QLinearSoftmax, QAttention, DynamicQuantizeMatMul, MatMulIntegerToFloat), and for the QDQ Gemm that onnxexec runs as its twin of QGemm
(graph/optimize.c fold_qgemm), with numpy as the oracle.

    tests/qop_cases.py OUTDIR --onnxexec BIN [--ort-dir DIR]

QGemm's oracle is ONNX Runtime's definition (contrib_ops/cpu/quantization/quant_gemm.cc):
int32 sums of (a - a_zero_point)(b - b_zero_point) plus the int32 bias C, times alpha a_scale
b_scale[j] (/ y_scale) in float32, then rounded half to even, shifted by y_zero_point and
saturated when y_zero_point is given, else the float product. The cases: uint8 A against int8
B with one scale per column (the 8-bit products where the CPU has AVX-512 VNNI, B constant)
and the same B fed at run time; uint8 B with a zero point and transA; int8 against int8 with
alpha and an int8 output; per-column zero points; each bias broadcast (one value, [N], [1, N],
[M, 1], [M, N]); float outputs with and without y_scale; a K that is no multiple of 4 at one
row (a classifier's GEMV); outputs that saturate at both ends. All exact (rtol 0, atol 0),
optimized, unoptimized, through --roundtrip, with the int16 products (OX_IGEMM8=0) and with
the scalar loops (OX_SGEMM_PACKED=0). Inputs QGemm refuses fail naming the fault.

The QDQ cases are torch's export of Linear between QuantizeLinear and DequantizeLinear (W
int8 per output channel, the bias int32 through a DequantizeLinear with a ConstantOfShape zero
point, transB), with no activation, Relu and Clip, per-tensor weights, a float bias and none,
and onnxruntime's QDQ MatMul by a constant [K, N] (3-D and 1-D A, per column and per tensor);
QLinearAveragePool's oracle is ONNX Runtime's kernel (qlinear_pool.cc) in numpy: values
dequantized in float32, each window summed in float32 in row-major order, divided by its
count, then round(v / y_scale + y_zero_point) saturated; 2-D with and without
count_include_pad, int8, channels_last, ceil_mode, SAME_UPPER, 1-D and 3-D; exact. Dilations
are refused.

QLinearSoftmax's oracle is ONNX Runtime's lookup-table arithmetic (qlinear_softmax.cc) in
numpy float32: exp((i - 255 + shift) x_scale) for the 256 codes, rows shifted to their max,
float32 sums in order, round(t floor(1 / y_scale) / sum) + y_zero_point with only the upper
end saturated; uint8 and int8, opset 13 on the last axis and on a middle one, opset 12's
flattened rows; exact.

QAttention's oracle is BERT's attention in numpy (float64 heads) over ONNX Runtime's
projection (int32 sums of the 8-bit input and weights times input_scale weight_scale[j] in
float32, plus the bias): per-tensor and per-column weight scales, int8 and uint8 weights with
zero points, a key-length mask, unidirectional; within 1e-4 relative (float).

DynamicQuantizeMatMul and MatMulIntegerToFloat: A quantized as DynamicQuantizeLinear does
(the range with 0, scale (max - min) / 255, the zero point rounded half to even) or given in
8 bits, int32 sums against B, times a_scale b_scale[j] in float32, plus the bias; batched A,
int8 and uint8 B with zero points, per-column scales; exact.

The QDQ cases' oracle is the float graph written in numpy, within one step of the output's
scale (the
integer form rounds its bias and scales once, like fold_qconv's QLinearConv); on a CPU with
AVX-512 VNNI `onnxexec info` must show the QGemm, and the Gemms that must stay float (alpha
0.5, weights fed at run time, a Sigmoid before the QuantizeLinear) must. With
--ort-dir (onnxruntime-node from npm), the QGemm cases run in ONNX Runtime too and must give
the same bytes (floats within its tolerance).
"""
import argparse
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
from case_dir import expect_error, op_count, run_test, write_case  # noqa: E402

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("outdir")
ap.add_argument("--onnxexec", required=True)
ap.add_argument("--ort-dir", help="compare the QGemm cases with ONNX Runtime too")
args = ap.parse_args()
shutil.rmtree(args.outdir, ignore_errors=True)
exact_dir = os.path.join(args.outdir, "exact")
float_dir = os.path.join(args.outdir, "float")
qdq_dir = os.path.join(args.outdir, "qdq")
os.makedirs(exact_dir)
os.makedirs(float_dir)
os.makedirs(qdq_dir)
rng = np.random.default_rng(5)
exe = args.onnxexec
failed = 0

ONNX = {np.uint8: TensorProto.UINT8, np.int8: TensorProto.INT8, np.int32: TensorProto.INT32,
        np.float32: TensorProto.FLOAT}
RANGE = {np.uint8: (0, 255), np.int8: (-128, 127)}
f32 = np.float32


def ms_model(graph, opset=17):
    """A model of the graph importing the default domain at opset and com.microsoft 1."""
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset),
                                                   helper.make_opsetid("com.microsoft", 1)])


def codes(t, shape):
    lo, hi = RANGE[t]
    return rng.integers(lo, hi + 1, shape).astype(t)


def qgemm_ref(a, sa, za, b, sb, zb, c, sy, zy, alpha=1.0, ta=0, tb=0):
    """ONNX Runtime's QGemm in numpy: int sums, the float32 scale, rounding half to even."""
    A = (a.T if ta else a).astype(np.int64) - int(za)
    B = (b.T if tb else b).astype(np.int64)
    zbv = np.broadcast_to(np.asarray(zb, np.int64).reshape(-1), (B.shape[1],))
    acc = A @ (B - zbv[None, :])
    if c is not None:
        acc = acc + np.broadcast_to(c.reshape(c.shape if c.ndim == 2 else (1, -1)), acc.shape)
    acc = acc.astype(np.int32)
    sbv = np.broadcast_to(np.asarray(sb, f32).reshape(-1), (B.shape[1],))
    scale = (f32(alpha) * f32(sa)) * sbv
    if sy is not None:
        scale = (scale / f32(sy)).astype(f32)
    v = acc.astype(f32) * scale[None, :].astype(f32)
    if zy is None:
        return v.astype(f32)
    lo, hi = RANGE[type(zy)] if not isinstance(zy, np.ndarray) else RANGE[zy.dtype.type]
    return np.clip(np.rint(v) + f32(zy), lo, hi).astype(np.asarray(zy).dtype)


def qgemm_case(name, M, K, N, at=np.uint8, bt=np.int8, per_col=True, zb_nonzero=False,
               c_shape="N", y=np.uint8, sy=0.05, alpha=1.0, ta=0, tb=1, b_const=True,
               scale_a=0.02, scale_b=0.01):
    a = codes(at, (K, M) if ta else (M, K))
    b = codes(bt, (N, K) if tb else (K, N))
    za = at(rng.integers(0, 40)) if at == np.uint8 else at(rng.integers(-10, 10))
    sb = (rng.uniform(0.5, 1.5, N) * scale_b).astype(f32) if per_col else f32(scale_b)
    zbt = bt
    if zb_nonzero:
        zb = rng.integers(-5 if bt == np.int8 else 100, 6 if bt == np.int8 else 140,
                          N if per_col else None).astype(zbt)
    else:
        zb = np.zeros(N, zbt) if per_col else zbt(0)
    c = None
    if c_shape:
        shp = {"1": (), "N": (N,), "1N": (1, N), "M1": (M, 1), "MN": (M, N)}[c_shape]
        c = rng.integers(-3000, 3000, shp).astype(np.int32)
    zy = None if y is None else (y(128) if y == np.uint8 else y(-3))
    ysc = None if sy is None else f32(sy)
    want = qgemm_ref(a, f32(scale_a), za, b, sb, zb, c, ysc, zy, alpha, ta, tb)
    names = ["A", "a_scale", "a_zero_point", "B", "b_scale", "b_zero_point",
             "C" if c is not None else "", "y_scale" if ysc is not None else "",
             "y_zero_point" if zy is not None else ""]
    while names and names[-1] == "":
        names.pop()
    attrs = {"transA": ta, "transB": tb}
    if alpha != 1.0:
        attrs["alpha"] = alpha
    node = helper.make_node("QGemm", names, ["Y"], domain="com.microsoft", **attrs)
    consts = [numpy_helper.from_array(np.asarray(f32(scale_a)), "a_scale"),
              numpy_helper.from_array(np.asarray(za), "a_zero_point"),
              numpy_helper.from_array(np.asarray(sb), "b_scale"),
              numpy_helper.from_array(np.asarray(zb), "b_zero_point")]
    if c is not None:
        consts.append(numpy_helper.from_array(c, "C"))
    if ysc is not None:
        consts.append(numpy_helper.from_array(np.asarray(ysc), "y_scale"))
    if zy is not None:
        consts.append(numpy_helper.from_array(np.asarray(zy), "y_zero_point"))
    ins = [helper.make_tensor_value_info("A", ONNX[at], list(a.shape))]
    feeds = [("A", a)]
    if b_const:
        consts.append(numpy_helper.from_array(b, "B"))
    else:
        ins.append(helper.make_tensor_value_info("B", ONNX[bt], list(b.shape)))
        feeds.append(("B", b))
    yt = TensorProto.FLOAT if zy is None else ONNX[type(zy)]
    g = helper.make_graph([node], name, ins, [helper.make_tensor_value_info("Y", yt, [M, N])],
                          consts)
    m = ms_model(g, 17)
    write_case(exact_dir, name, m, feeds, [("Y", want)])
    return name


qcases = [
    qgemm_case("qgemm_u8s8_percol", 3, 40, 37),
    qgemm_case("qgemm_u8s8_b_at_run_time", 3, 40, 37, b_const=False),
    qgemm_case("qgemm_u8u8_zp_transA_float", 5, 24, 9, bt=np.uint8, zb_nonzero=True, ta=1,
               tb=0, c_shape="MN", y=None, sy=None),
    qgemm_case("qgemm_s8s8_alpha_s8out", 4, 33, 20, at=np.int8, per_col=False, c_shape="M1",
               y=np.int8, alpha=0.5),
    qgemm_case("qgemm_float_over_y_scale", 2, 16, 8, c_shape="1", y=None, sy=0.25),
    qgemm_case("qgemm_s8_zp_per_col", 3, 21, 35, zb_nonzero=True, c_shape="1N"),
    qgemm_case("qgemm_gemv_k_odd", 1, 1283, 70, c_shape="N"),
    qgemm_case("qgemm_no_bias", 6, 64, 40, c_shape=None),
    qgemm_case("qgemm_saturates", 4, 64, 33, sy=0.0005),
]


# ---- QLinearAveragePool ------------------------------------------------------------------
def qavgpool_ref(x, sx, zx, sy, zy, k, s, pads, include_pad, last, out_sp):
    """ONNX Runtime's QLinearAveragePool: float32 values, float32 sums in window order."""
    if last:
        x = np.moveaxis(x, -1, 1)
    N, C = x.shape[:2]
    sp = x.shape[2:]
    nsp = len(sp)
    xf = (f32(sx) * (x.astype(np.int32) - int(zx)).astype(f32)).astype(f32)
    lo_q, hi_q = RANGE[x.dtype.type]
    y = np.zeros((N, C) + tuple(out_sp), x.dtype)
    for idx in np.ndindex(*out_sp):
        ranges = []
        for i in range(nsp):
            st = idx[i] * s[i] - pads[i]
            ranges.append(range(max(st, 0), min(st + k[i], sp[i])))
        cnt = int(np.prod(k)) if include_pad else int(np.prod([len(r) for r in ranges]))
        for b in range(N):
            for c in range(C):
                acc = f32(0)
                for pos in np.ndindex(*[len(r) for r in ranges]):
                    acc = f32(acc + xf[(b, c) + tuple(ranges[i][pos[i]] for i in range(nsp))])
                v = f32(acc / f32(cnt)) if cnt else f32(0)
                r = np.rint(f32(v / f32(sy)) + f32(zy))
                y[(b, c) + idx] = np.clip(r, lo_q, hi_q)
    return np.moveaxis(y, 1, -1) if last else y


def out_extent(n, k, s, pb, pe, ceil):
    span = n + pb + pe - k
    return (-(-span // s) if ceil else span // s) + 1


def qavgpool_case(name, shape, k, s, pads=None, include_pad=0, t=np.uint8, last=0, ceil=0,
                  auto_pad=None):
    nsp = len(k)
    x = codes(t, shape)
    sx, zx = f32(0.05), t(10 if t == np.uint8 else -4)
    sy, zy = f32(0.04), t(20 if t == np.uint8 else 3)
    sp = shape[1:-1] if last else shape[2:]
    if auto_pad:
        out_sp = [-(-sp[i] // s[i]) for i in range(nsp)]
        pb = []
        for i in range(nsp):
            total = max((out_sp[i] - 1) * s[i] + k[i] - sp[i], 0)
            pb.append(total // 2 if auto_pad == "SAME_UPPER" else total - total // 2)
    else:
        p = pads or [0] * (2 * nsp)
        pb = p[:nsp]
        out_sp = [out_extent(sp[i], k[i], s[i], p[i], p[i + nsp], ceil) for i in range(nsp)]
    want = qavgpool_ref(x, sx, zx, sy, zy, k, s, pb, include_pad, last, out_sp)
    attrs = {"kernel_shape": k, "strides": s}
    if pads:
        attrs["pads"] = pads
    if include_pad:
        attrs["count_include_pad"] = 1
    if last:
        attrs["channels_last"] = 1
    if ceil:
        attrs["ceil_mode"] = 1
    if auto_pad:
        attrs["auto_pad"] = auto_pad
    node = helper.make_node("QLinearAveragePool", ["x", "sx", "zx", "sy", "zy"], ["y"],
                            domain="com.microsoft", **attrs)
    consts = [numpy_helper.from_array(np.asarray(v), n)
              for n, v in (("sx", sx), ("zx", zx), ("sy", sy), ("zy", zy))]
    g = helper.make_graph([node], name, [helper.make_tensor_value_info("x", ONNX[t], list(shape))],
                          [helper.make_tensor_value_info("y", ONNX[t], list(want.shape))], consts)
    m = ms_model(g, 17)
    write_case(exact_dir, name, m, [("x", x)], [("y", want)])
    return name


qcases += [
    qavgpool_case("qavgpool_3x3_pads", (2, 3, 9, 9), [3, 3], [1, 1], [1, 1, 1, 1]),
    qavgpool_case("qavgpool_include_pad_s8", (1, 4, 8, 8), [3, 3], [2, 2], [1, 1, 1, 1],
                  include_pad=1, t=np.int8),
    qavgpool_case("qavgpool_channels_last", (2, 6, 6, 5), [2, 2], [2, 2], last=1),
    qavgpool_case("qavgpool_ceil_mode", (1, 2, 8, 8), [3, 3], [2, 2], ceil=1),
    qavgpool_case("qavgpool_same_upper", (1, 3, 7, 7), [3, 3], [2, 2], auto_pad="SAME_UPPER"),
    qavgpool_case("qavgpool_1d", (2, 3, 11), [3], [1], [1, 0]),
    qavgpool_case("qavgpool_3d", (1, 2, 4, 5, 4), [2, 2, 2], [1, 2, 1]),
]


# ---- QLinearSoftmax ---------------------------------------------------------------------
def qsoftmax_ref(x, sx, sy, zy, axis, opset):
    sgn = x.dtype == np.int8
    shape = x.shape
    ax = axis % x.ndim
    if opset < 13:
        rows = x.reshape(int(np.prod(shape[:ax], dtype=np.int64)), -1)
    else:
        rows = np.moveaxis(x, ax, -1).reshape(-1, shape[ax])
    D = rows.shape[1]
    shift = max(0.0, np.log(np.finfo(np.float32).max / D) - 5) / float(sx)
    table = np.zeros(256, f32)
    for i in range(256):
        table[(i - 128) & 0xFF if sgn else i] = f32(np.exp((i - 255 + shift) * float(sx)))
    ysf = f32(np.floor(f32(1) / f32(sy)))
    out = np.zeros(rows.shape, np.int64)
    for r in range(rows.shape[0]):
        v = rows[r].astype(np.int64)
        adj = (127 if sgn else 255) - int(v.max())
        idx = (v + adj) & 0xFF
        tot = f32(0)
        for t in table[idx]:
            tot = f32(tot + t)
        q = np.rint((table[idx] * ysf).astype(f32) / tot).astype(np.int64) + int(zy)
        out[r] = np.where(q > 255, 255, q)
    out = (out & 0xFF).astype(np.uint8).view(x.dtype)
    if opset < 13:
        return out.reshape(shape)
    moved = list(shape)
    moved.append(moved.pop(ax))
    return np.moveaxis(out.reshape(moved), -1, ax)


def qsoftmax_case(name, shape, t=np.uint8, axis=-1, opset=13, sx=0.1, sy=1 / 256.0):
    x = codes(t, shape)
    zx = t(0) if t == np.uint8 else t(-5)
    zy = t(0) if t == np.uint8 else t(-128)
    want = qsoftmax_ref(x, f32(sx), f32(sy), zy, axis, opset)
    node = helper.make_node("QLinearSoftmax", ["x", "sx", "zx", "sy", "zy"], ["y"],
                            domain="com.microsoft", axis=axis, opset=opset)
    consts = [numpy_helper.from_array(np.asarray(v), n)
              for n, v in (("sx", f32(sx)), ("zx", zx), ("sy", f32(sy)), ("zy", zy))]
    g = helper.make_graph([node], name, [helper.make_tensor_value_info("x", ONNX[t], list(shape))],
                          [helper.make_tensor_value_info("y", ONNX[t], list(shape))], consts)
    m = ms_model(g, 13)
    write_case(exact_dir, name, m, [("x", x)], [("y", want)])
    return name


qcases += [
    qsoftmax_case("qsoftmax_u8_last", (4, 10)),
    qsoftmax_case("qsoftmax_s8_last", (3, 1000), t=np.int8, sx=0.05),
    qsoftmax_case("qsoftmax_u8_middle_axis", (2, 7, 5), axis=1, sx=0.2, sy=1 / 128.0),
    qsoftmax_case("qsoftmax_opset12_flattened", (2, 3, 4), axis=1, opset=12),
    qsoftmax_case("qsoftmax_s8_small_scale", (5, 16), t=np.int8, sx=0.01, sy=0.003),
]


# ---- QAttention --------------------------------------------------------------------------
def qattention_case(name, B=2, S=5, D=16, H=2, wt=np.int8, per_col=False, mask=True,
                    causal=0):
    x = codes(np.uint8, (B, S, D))
    w = codes(wt, (D, 3 * D))
    bias = (rng.standard_normal(3 * D) * 0.1).astype(f32)
    xs, xz = f32(0.02), np.uint8(rng.integers(100, 140))
    ws = (rng.uniform(0.5, 1.5, 3 * D) * 0.02).astype(f32) if per_col else f32(0.02)
    wz = (np.zeros(3 * D, wt) if per_col else wt(0)) if wt == np.int8 else \
        (rng.integers(120, 136, 3 * D).astype(wt) if per_col else wt(128))
    acc = (x.reshape(B * S, D).astype(np.int64) - int(xz)) @ \
        (w.astype(np.int64) - np.broadcast_to(np.asarray(wz, np.int64), (3 * D,))[None, :])
    scale = (xs * np.broadcast_to(ws, (3 * D,))).astype(f32)
    qkv = (acc.astype(np.int32).astype(f32) * scale[None, :]).astype(f32) + bias
    qkv = qkv.astype(np.float64).reshape(B, S, 3, H, D // H)
    q, k, v = (qkv[:, :, i].transpose(0, 2, 1, 3) for i in range(3))
    sc = q @ k.transpose(0, 1, 3, 2) / np.sqrt(D // H)
    lens = rng.integers(2, S + 1, B).astype(np.int32)
    if mask:
        for b in range(B):
            sc[b, :, :, lens[b]:] += -10000.0
    if causal:
        sc += np.triu(np.full((S, S), -np.inf), 1)[None, None]
    p = np.exp(sc - sc.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    want = (p @ v).transpose(0, 2, 1, 3).reshape(B, S, D).astype(f32)
    names = ["x", "w", "bias", "xs", "ws", "mask" if mask else "", "xz", "wz"]
    node = helper.make_node("QAttention", names, ["y"], domain="com.microsoft", num_heads=H,
                            unidirectional=causal)
    consts = [numpy_helper.from_array(np.asarray(v), n) for n, v in
              (("w", w), ("bias", bias), ("xs", xs), ("ws", ws), ("xz", xz), ("wz", wz))]
    ins = [helper.make_tensor_value_info("x", TensorProto.UINT8, [B, S, D])]
    feeds = [("x", x)]
    if mask:
        ins.append(helper.make_tensor_value_info("mask", TensorProto.INT32, [B]))
        feeds.append(("mask", lens))
    g = helper.make_graph([node], name, ins,
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [B, S, D])],
                          consts)
    m = ms_model(g, 17)
    write_case(float_dir, name, m, feeds, [("y", want)])
    return name


fcases = [
    qattention_case("qattention_s8"),
    qattention_case("qattention_per_col", per_col=True, S=7, D=24, H=3),
    qattention_case("qattention_u8_weights", wt=np.uint8, mask=False),
    qattention_case("qattention_u8_per_col_causal", wt=np.uint8, per_col=True, mask=False,
                    causal=1),
]


# ---- DynamicQuantizeMatMul, MatMulIntegerToFloat ------------------------------------------
def mm_float_case(name, a_shape, N, dynamic=True, bt=np.int8, per_col=False, bias=True,
                  at=np.uint8):
    K = a_shape[-1]
    b = codes(bt, (K, N))
    bs = (rng.uniform(0.5, 1.5, N) * 0.01).astype(f32) if per_col else f32(0.01)
    bz = (rng.integers(120, 136, N) if per_col else 128) if bt == np.uint8 else \
        (np.zeros(N) if per_col else 0)
    bz = np.asarray(bz).astype(bt)
    bias_v = (rng.standard_normal(N) * 0.1).astype(f32)
    if dynamic:
        a = (rng.standard_normal(a_shape) * 2).astype(f32)
        mn, mx = min(f32(0), a.min()), max(f32(0), a.max())
        sa = f32(1) if mx == mn else f32((mx - mn) / f32(255))
        za = np.uint8(np.rint(np.clip(f32(0) - mn / sa, 0, 255)))
        aq = np.clip(np.rint(a / sa) + f32(za), 0, 255).astype(np.uint8)
    else:
        aq = codes(at, a_shape)
        a, sa = aq, f32(0.03)
        za = at(7) if at == np.uint8 else at(-3)
    acc = (aq.reshape(-1, K).astype(np.int64) - int(za)) @ \
        (b.astype(np.int64) - np.broadcast_to(bz.astype(np.int64), (N,))[None, :])
    y = acc.astype(np.int32).astype(f32) * (sa * np.broadcast_to(bs, (N,))).astype(f32)[None, :]
    if bias:
        y = y + bias_v
    want = y.astype(f32).reshape(tuple(a_shape[:-1]) + (N,))
    consts = [numpy_helper.from_array(b, "b"), numpy_helper.from_array(np.asarray(bs), "bs"),
              numpy_helper.from_array(bz, "bz"), numpy_helper.from_array(bias_v, "bias")]
    if dynamic:
        names = ["a", "b", "bs", "bz", "bias" if bias else ""]
        op, at_onnx = "DynamicQuantizeMatMul", TensorProto.FLOAT
    else:
        names = ["a", "b", "as", "bs", "az", "bz", "bias" if bias else ""]
        op, at_onnx = "MatMulIntegerToFloat", ONNX[at]
        consts += [numpy_helper.from_array(np.asarray(sa), "as"),
                   numpy_helper.from_array(np.asarray(za), "az")]
    while names[-1] == "":
        names.pop()
    node = helper.make_node(op, names, ["y"], domain="com.microsoft")
    g = helper.make_graph([node], name, [helper.make_tensor_value_info("a", at_onnx,
                                                                        list(a_shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                         list(want.shape))], consts)
    write_case(exact_dir, name, ms_model(g), [("a", a)], [("y", want)])
    return name


qcases += [
    mm_float_case("dqmatmul_s8", (2, 3, 40), 24),
    mm_float_case("dqmatmul_u8_zp_no_bias", (5, 33), 17, bt=np.uint8, bias=False),
    mm_float_case("dqmatmul_per_col", (4, 64), 40, per_col=True),
    mm_float_case("mmint2float_u8", (3, 2, 48), 20, dynamic=False),
    mm_float_case("mmint2float_u8_b_per_col", (6, 31), 9, dynamic=False, bt=np.uint8,
                  per_col=True),
]


# ---- QDQ Gemm (torch's Linear) ---------------------------------------------------------
def qdq_linear(name, M=4, K=48, N=24, act=None, per_col=True, bias="int32", alpha=1.0,
               w_input=False, fused=True):
    x = rng.standard_normal((M, K)).astype(f32)
    sx, zx = f32(0.03), np.uint8(120)
    wq = rng.integers(-100, 101, (N, K)).astype(np.int8)
    sw = (rng.uniform(0.5, 1.5, N) * 0.01).astype(f32) if per_col else f32(0.01)
    zw = np.zeros(N, np.int8) if per_col else np.int8(0)
    sy, zy = f32(0.05), np.uint8(100)
    nodes, consts = [], []
    C = lambda n, v: consts.append(numpy_helper.from_array(np.asarray(v), n))  # noqa: E731
    C("sx", sx), C("zx", zx), C("sw", sw), C("zw", zw), C("sy", sy), C("zy", zy)
    nodes += [helper.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]),
              helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
              helper.make_node("DequantizeLinear", ["wq", "sw", "zw"], ["wd"], axis=0)]
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [M, K])]
    feeds = [("x", x)]
    if w_input:
        ins.append(helper.make_tensor_value_info("wq", TensorProto.INT8, [N, K]))
        feeds.append(("wq", wq))
    else:
        C("wq", wq)
    gemm_in = ["xd", "wd"]
    # float oracle: numpy's version of each op in float32
    xq = np.clip(np.rint(x / sx) + f32(zx), 0, 255).astype(np.uint8)
    xd = (xq.astype(f32) - f32(zx)) * sx
    swv = np.broadcast_to(sw, (N,))
    zwv = np.broadcast_to(zw, (N,)).astype(f32)
    wd = (wq.astype(f32) - zwv[:, None]) * swv[:, None]
    bias_f = None
    if bias == "int32":
        bq = rng.integers(-2000, 2000, N).astype(np.int32)
        sb = (sx * swv).astype(f32)
        C("bq", bq), C("sb", sb), C("shape_n", np.array([N], np.int64))
        nodes += [helper.make_node("ConstantOfShape", ["shape_n"], ["zb0"]),
                  helper.make_node("Cast", ["zb0"], ["zb"], to=TensorProto.INT32),
                  helper.make_node("DequantizeLinear", ["bq", "sb", "zb"], ["bd"], axis=0)]
        gemm_in.append("bd")
        bias_f = bq.astype(f32) * sb
    elif bias == "float":
        bias_f = rng.standard_normal(N).astype(f32) * f32(0.1)
        C("bf", bias_f)
        gemm_in.append("bf")
    attrs = {"transB": 1}
    if alpha != 1.0:
        attrs["alpha"] = alpha
    nodes.append(helper.make_node("Gemm", gemm_in, ["g"], **attrs))
    y = (f32(alpha) * (xd @ wd.T)).astype(f32)
    if bias_f is not None:
        y = y + bias_f
    src = "g"
    if act == "relu":
        nodes.append(helper.make_node("Relu", ["g"], ["a"]))
        y, src = np.maximum(y, 0), "a"
    elif act == "sigmoid":
        nodes.append(helper.make_node("Sigmoid", ["g"], ["a"]))
        y, src = (1 / (1 + np.exp(-y.astype(np.float64)))).astype(f32), "a"
    elif act == "clip":
        C("lo", f32(0.0)), C("hi", f32(1.5))
        nodes.append(helper.make_node("Clip", ["g", "lo", "hi"], ["a"]))
        y, src = np.clip(y, 0, 1.5), "a"
    nodes += [helper.make_node("QuantizeLinear", [src, "sy", "zy"], ["yq"]),
              helper.make_node("DequantizeLinear", ["yq", "sy", "zy"], ["y"])]
    yq = np.clip(np.rint(y / sy) + f32(zy), 0, 255)
    want = ((yq - f32(zy)) * sy).astype(f32)
    g = helper.make_graph(nodes, name, ins, [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                                           [M, N])], consts)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    write_case(qdq_dir, name, m, feeds, [("y", want)])
    return name, fused


def qdq_matmul(name, a_shape, N, per_col=True, relu=False, fused=True):
    """QuantizeLinear(MatMul(DequantizeLinear(a), DequantizeLinear(W [K, N]))) as onnxruntime's
    QDQ quantizer writes a transformer's projection (W per column: axis 1)."""
    K = a_shape[-1]
    x = rng.standard_normal(a_shape).astype(f32)
    sx, zx = f32(0.03), np.uint8(120)
    wq = rng.integers(-100, 101, (K, N)).astype(np.int8)
    sw = (rng.uniform(0.5, 1.5, N) * 0.01).astype(f32) if per_col else f32(0.01)
    zw = np.zeros(N, np.int8) if per_col else np.int8(0)
    sy, zy = f32(0.05), np.uint8(100)
    consts = [numpy_helper.from_array(np.asarray(v), n) for n, v in
              (("sx", sx), ("zx", zx), ("sw", sw), ("zw", zw), ("sy", sy), ("zy", zy),
               ("wq", wq))]
    nodes = [helper.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
             helper.make_node("DequantizeLinear", ["wq", "sw", "zw"], ["wd"], axis=1),
             helper.make_node("MatMul", ["xd", "wd"], ["m"])]
    xq = np.clip(np.rint(x / sx) + f32(zx), 0, 255)
    xd = ((xq - f32(zx)) * sx).astype(f32)
    wd = ((wq.astype(f32) - np.broadcast_to(zw, (N,)).astype(f32)) * sw).astype(f32)
    y, src = np.matmul(xd, wd).astype(f32), "m"
    if relu:
        nodes.append(helper.make_node("Relu", ["m"], ["r"]))
        y, src = np.maximum(y, 0), "r"
    nodes += [helper.make_node("QuantizeLinear", [src, "sy", "zy"], ["yq"]),
              helper.make_node("DequantizeLinear", ["yq", "sy", "zy"], ["y"])]
    want = ((np.clip(np.rint(y / sy) + f32(zy), 0, 255) - f32(zy)) * sy).astype(f32)
    out_shape = list(a_shape[:-1]) + [N]
    g = helper.make_graph(nodes, name,
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(a_shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)],
                          consts)
    write_case(qdq_dir, name, helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]),
               [("x", x)], [("y", want)])
    return name, fused


qdq = [
    qdq_matmul("qdq_matmul_3d", (2, 5, 64), 48),
    qdq_matmul("qdq_matmul_1d_relu", (96,), 40, relu=True),
    qdq_matmul("qdq_matmul_per_tensor", (3, 7, 33), 20, per_col=False),
    qdq_linear("qdq_linear"),
    qdq_linear("qdq_linear_relu", act="relu"),
    qdq_linear("qdq_linear_clip", act="clip", M=1, K=1280, N=100),
    qdq_linear("qdq_linear_per_tensor_float_bias", per_col=False, bias="float"),
    qdq_linear("qdq_linear_no_bias", bias=None),
    qdq_linear("qdq_linear_alpha", alpha=0.5, fused=False),
    qdq_linear("qdq_linear_w_at_run_time", w_input=True, fused=False),
    qdq_linear("qdq_linear_sigmoid", act="sigmoid", fused=False),
]


for extra in ([], ["--no-optimize"], ["--roundtrip"]):
    failed += run_test(exe, exact_dir, ["--rtol", "0", "--atol", "0"] + extra)
# OX_IGEMM8=0: the int16 products where the 8-bit ones would run; OX_SGEMM_PACKED=0: the
# scalar loops of CPUs without AVX-512 (products and the scaling of the sums)
failed += run_test(exe, exact_dir, ["--rtol", "0", "--atol", "0"], {"OX_IGEMM8": "0"})
failed += run_test(exe, exact_dir, ["--rtol", "0", "--atol", "0"], {"OX_SGEMM_PACKED": "0"})
for extra in ([], ["--no-optimize"], ["--roundtrip"]):
    failed += run_test(exe, float_dir, ["--rtol", "1e-4", "--atol", "1e-5"] + extra)
# one step of the output's scale (0.05), and a little for float rounding
for extra in ([], ["--no-optimize"], ["--roundtrip"]):
    failed += run_test(exe, qdq_dir, ["--rtol", "0", "--atol", "0.0501"] + extra)

cpu = open("/proc/cpuinfo").read() if os.path.exists("/proc/cpuinfo") else ""
vnni = " avx512_vnni" in cpu and " avx512bw" in cpu
for name, fused in qdq:
    got = op_count(exe, os.path.join(qdq_dir, name, "model.onnx"), ("ai.onnxexec.QGemm",))
    want = 1 if fused and vnni else 0
    ok = got == want
    print("%s %s: %s QGemm node(s), expected %d" % ("PASS" if ok else "FAIL", name, got, want))
    failed += not ok
    # info's FLOPs count the fused node as the float Gemm or MatMul it stands for
    fl = []
    for extra in ([], ["--no-optimize"]):
        r = subprocess.run([exe, "info", os.path.join(qdq_dir, name, "model.onnx"), "--json"] +
                           extra, capture_output=True, text=True)
        j = json.loads(r.stdout) if r.returncode == 0 else {}
        fl.append((j.get("flops"), j.get("flop_nodes_unknown")))
    ok = fl[0] == fl[1] and fl[0][0] and fl[0][1] == 0
    print("%s %s: FLOPs %s optimized, %s as the file has it" % ("PASS" if ok else "FAIL", name,
                                                                fl[0], fl[1]))
    failed += not ok
    if fused and vnni:  # the same model for a GPU keeps its float Gemm
        r = subprocess.run([exe, "info", os.path.join(qdq_dir, name, "model.onnx"), "--device",
                            "cuda"], capture_output=True, text=True)
        ok = r.returncode == 0 and "QGemm" not in r.stdout
        print("%s %s for a GPU: no QGemm" % ("PASS" if ok else "FAIL", name))
        failed += not ok


# ---- what QGemm refuses ------------------------------------------------------------------
def bad_model(name, mutate):
    a = codes(np.uint8, (2, 8))
    consts = {"a_scale": np.asarray(f32(0.1)), "a_zero_point": np.asarray(np.uint8(3)),
              "B": codes(np.int8, (8, 4)), "b_scale": np.asarray(f32(0.2)),
              "b_zero_point": np.asarray(np.int8(0)), "C": np.zeros(4, np.int32)}
    ins = ["A", "a_scale", "a_zero_point", "B", "b_scale", "b_zero_point", "C"]
    a_shape = mutate(consts, ins) or list(a.shape)
    node = helper.make_node("QGemm", ins, ["Y"], domain="com.microsoft")
    g = helper.make_graph(
        [node], name, [helper.make_tensor_value_info("A", TensorProto.UINT8, a_shape)],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(v, k) for k, v in consts.items()])
    return ms_model(g, 17)


def c_int8(consts, ins):
    consts["C"] = np.zeros(4, np.int8)


def c_wrong_shape(consts, ins):
    consts["C"] = np.zeros(3, np.int32)


def b_scale_wrong(consts, ins):
    consts["b_scale"] = np.ones(3, f32)


def a_rank3(consts, ins):
    return [1, 2, 8]


def k_mismatch(consts, ins):
    consts["B"] = codes(np.int8, (7, 4))


def qavgpool_dilated():
    node = helper.make_node("QLinearAveragePool", ["x", "sx", "zx", "sy", "zy"], ["y"],
                            domain="com.microsoft", kernel_shape=[2, 2], dilations=[2, 2])
    consts = [numpy_helper.from_array(np.asarray(v), n) for n, v in
              (("sx", f32(0.1)), ("zx", np.uint8(0)), ("sy", f32(0.1)), ("zy", np.uint8(0)))]
    g = helper.make_graph([node], "dilated",
                          [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, 1, 6, 6])],
                          [helper.make_tensor_value_info("y", TensorProto.UINT8, None)], consts)
    return ms_model(g, 17)


bad_dir = os.path.join(args.outdir, "bad")
os.makedirs(bad_dir)
for name, mutate, says in (("c_int8", c_int8, "expected int32"),
                           ("c_wrong_shape", c_wrong_shape, "does not broadcast"),
                           ("b_scale_wrong", b_scale_wrong, "b_scale"),
                           ("a_rank3", a_rank3, "expected matrices"),
                           ("k_mismatch", k_mismatch, "do not multiply")):
    path, a_pb = os.path.join(bad_dir, name + ".onnx"), os.path.join(bad_dir, name + "_a.pb")
    onnx.save(bad_model(name, mutate), path)
    with open(a_pb, "wb") as f:
        a = codes(np.uint8, (1, 2, 8) if name == "a_rank3" else (2, 8))
        f.write(numpy_helper.from_array(a, "A").SerializeToString())
    failed += expect_error(exe, name, path, [("A", a_pb)], says)
path, x_pb = os.path.join(bad_dir, "qavgpool_dilated.onnx"), os.path.join(bad_dir, "x.pb")
onnx.save(qavgpool_dilated(), path)
with open(x_pb, "wb") as f:
    f.write(numpy_helper.from_array(codes(np.uint8, (1, 1, 6, 6)), "x").SerializeToString())
failed += expect_error(exe, "qavgpool_dilated", path, [("x", x_pb)], "dilations other than 1")

if args.ort_dir:
    failed += ort_oracle.compare(exact_dir, qcases, args.ort_dir)
    failed += ort_oracle.compare(float_dir, fcases, args.ort_dir)
print("%d failed" % failed if failed else "all passed")
sys.exit(1 if failed else 0)
