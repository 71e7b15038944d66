#!/usr/bin/python3
"""Backend-layout cases for QDQ models (QuantizeLinear -> DequantizeLinear between float
operators), with the ONNX operators' definitions written in numpy as the oracle.

    tests/qdq_cases.py OUTDIR --onnxexec BIN

onnxexec fuses a QuantizeLinear and the DequantizeLinear reading it (directly or through a
Cast of the quantized type to itself, as torch exports them) into one QuantizeDequantize
node when both use the same constant parameters. The cases check that the fused node gives
the two operators' results exactly (ties rounded half to even, saturation at both ends,
NaN to the low bound, infinities, zero points of 8 and 16 bits, no zero point, per-axis
scales, float16, a tensor large enough to be split over the threads), that the pairs it must
not fuse (different scales or zero points, a Cast to another type, block quantization) still
compute their own results, that a quantized value read elsewhere stays, and that the
fusion happened where it should (`onnxexec info`). Each case runs optimized and with
--no-optimize, and optimized through --roundtrip (the fused node written as ONNX and read
back).
"""
import os
import subprocess
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from case_dir import case_args, write_case  # noqa: E402

args = case_args(__doc__)
out = args.outdir
rng = np.random.default_rng(7)

RANGE = {np.uint8: (0, 255), np.int8: (-128, 127), np.uint16: (0, 65535),
         np.int16: (-32768, 32767)}
ONNX_TYPE = {np.uint8: TensorProto.UINT8, np.int8: TensorProto.INT8,
             np.uint16: TensorProto.UINT16, np.int16: TensorProto.INT16,
             np.float32: TensorProto.FLOAT, np.float16: TensorProto.FLOAT16}


def per_axis(p, x, axis):
    """Parameter p (one value or one per index of axis) broadcast against x."""
    p = np.asarray(p)
    if p.shape == x.shape:  # blocked: already one per element
        return p
    if p.size == 1:
        return p.reshape(())
    shape = [1] * x.ndim
    shape[axis] = -1
    return p.reshape(shape)


def quantize(x, s, z, qt, axis=1):
    """QuantizeLinear: saturate(round_half_even(x / s) + z), in the type of x and s."""
    s, zz = per_axis(s, x, axis), per_axis(z if z is not None else 0, x, axis)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        r = np.rint(x / s).astype(np.float64) + zz.astype(np.float64)
    lo, hi = RANGE[qt]
    r = np.where(np.isnan(r), lo, np.clip(r, lo, hi))
    return r.astype(qt)


def dequantize(q, s, z, axis=1):
    """DequantizeLinear: (q - z) * s, in float32 (or the scale's type when narrower)."""
    s, zz = per_axis(s, q, axis), per_axis(z if z is not None else 0, q, axis)
    d = (q.astype(np.int32) - zz.astype(np.int32)).astype(np.float32)
    return (d * s.astype(np.float32)).astype(s.dtype)


def special(shape, scale, qt, dtype=np.float32):
    """Random values across and beyond the type's range, with ties, NaN and infinities."""
    lo, hi = RANGE[qt]
    x = rng.uniform((lo - 260) * scale, (hi + 260) * scale, size=shape)
    flat = x.reshape(-1)
    extras = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.0, -0.0, np.nan, np.inf, -np.inf, 1e30, -1e30]
    for k, e in enumerate(extras):
        if k < flat.size:
            flat[k * 7 % flat.size] = e * scale if np.isfinite(e) and abs(e) < 10 else e
    with np.errstate(over="ignore"):  # 1e30 is inf in float16
        return x.astype(dtype)


def const(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def model(name, nodes, inputs, outputs, inits, opset=13):
    g = helper.make_graph(nodes, name, inputs, outputs, inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def vi(name, dtype, shape):
    return helper.make_tensor_value_info(name, ONNX_TYPE[dtype], list(shape))


expect_fused = {}  # case name -> number of QuantizeDequantize nodes after optimizing


def qdq_case(name, shape, scale, qt, zp, cast=False, axis=None, dtype=np.float32, opset=13):
    """x -> QuantizeLinear -> [Cast to the same type] -> DequantizeLinear -> y."""
    s = np.asarray(scale, dtype=dtype)
    z = None if zp is None else np.asarray(zp, dtype=qt)
    x = special(shape, float(np.max(s)), qt, dtype)
    params = ["s"] + (["z"] if z is not None else [])
    kw = {} if axis is None else {"axis": axis}
    nodes = [helper.make_node("QuantizeLinear", ["x"] + params, ["q"], **kw)]
    src = "q"
    if cast:
        nodes.append(helper.make_node("Cast", ["q"], ["qc"], to=ONNX_TYPE[qt]))
        src = "qc"
    nodes.append(helper.make_node("DequantizeLinear", [src] + params, ["y"], **kw))
    inits = [const("s", s)] + ([const("z", z)] if z is not None else [])
    ax = 1 if axis is None else axis
    y = dequantize(quantize(x, s, z, qt, ax), s, z, ax)
    write_case(out, name, model(name, nodes, [vi("x", dtype, shape)], [vi("y", dtype, shape)],
                                inits, opset), [("x", x)], [("y", y)])
    expect_fused[name] = 1


qdq_case("qdq_uint8_cast", [2, 3, 5, 7], 0.05, np.uint8, 128, cast=True)
qdq_case("qdq_int8_zp", [4, 33], 0.125, np.int8, -3)
qdq_case("qdq_no_zero_point", [3, 17], 0.02, np.uint8, None)
qdq_case("qdq_uint16", [5, 19], 0.001, np.uint16, 30000, cast=True)
qdq_case("qdq_int16", [5, 19], 0.003, np.int16, -7)
qdq_case("qdq_per_axis", [2, 4, 3, 3], [0.1, 0.02, 0.5, 0.07], np.int8, [0, 3, -5, 1], axis=1)
qdq_case("qdq_float16", [3, 21], 0.05, np.uint8, 100, dtype=np.float16)
qdq_case("qdq_large", [3, 64, 61, 59], 0.04, np.uint8, 17, cast=True)  # over the threads

# A torch-style block: QDQ of the input, Conv with dequantized int8 weights (per output
# channel) and an int32 bias, Relu, QDQ of the result; the quantized input also an output.
# Scales that are powers of two make every product and sum of the Conv exact in float32, so
# that its result, and the quantization of it, do not depend on the order of summation.
xs, ws = 2.0 ** -6, np.array([2.0 ** -7, 2.0 ** -6, 2.0 ** -8], np.float32)
x = special([1, 2, 9, 9], xs, np.uint8)
wq = rng.integers(-127, 128, size=(3, 2, 3, 3)).astype(np.int8)
bq = rng.integers(-500, 500, size=3).astype(np.int32)
ys, yz = np.float32(0.03), np.uint8(5)
nodes = [
    helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
    helper.make_node("Cast", ["xq"], ["xqc"], to=TensorProto.UINT8),
    helper.make_node("DequantizeLinear", ["xqc", "xs", "xz"], ["xd"]),
    helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["w"], axis=0),
    helper.make_node("DequantizeLinear", ["bq", "bs"], ["b"], axis=0),
    helper.make_node("Conv", ["xd", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
    helper.make_node("Relu", ["c"], ["r"]),
    helper.make_node("QuantizeLinear", ["r", "ys", "yz"], ["yq"]),
    helper.make_node("DequantizeLinear", ["yq", "ys", "yz"], ["y"]),
]
inits = [const("xs", np.float32(xs)), const("xz", np.uint8(128)), const("wq", wq),
         const("ws", ws), const("wz", np.zeros(3, np.int8)), const("bq", bq),
         const("bs", (ws * np.float32(xs)).astype(np.float32)), const("ys", ys),
         const("yz", yz)]
xq = quantize(x, np.float32(xs), np.uint8(128), np.uint8)
xd = dequantize(xq, np.float32(xs), np.uint8(128))
w = dequantize(wq, ws, np.zeros(3, np.int8), axis=0)
b = dequantize(bq, (ws * np.float32(xs)).astype(np.float32), None, axis=0)
xp = np.pad(xd.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
c = np.zeros((1, 3, 9, 9))
for i in range(3):
    for j in range(3):
        c += np.einsum("nchw,mc->nmhw", xp[:, :, i:i + 9, j:j + 9], w[:, :, i, j].astype(np.float64))
c = (c + b.reshape(1, 3, 1, 1)).astype(np.float32)
y = dequantize(quantize(np.maximum(c, 0), ys, yz, np.uint8), ys, yz)
write_case(out, "qdq_conv_block",
           model("qdq_conv_block", nodes, [vi("x", np.float32, x.shape)],
                 [vi("y", np.float32, y.shape), vi("xq", np.uint8, x.shape)], inits),
           [("x", x)], [("y", y), ("xq", xq)])
expect_fused["qdq_conv_block"] = 2


def pair_case(name, qs, qz, ds, dz, qt, cast_to=None, fused=0, block=None):
    """QuantizeLinear and a DequantizeLinear with their own parameters (not one round trip
    unless they agree)."""
    x = special([4, 8], max(qs, ds), qt)
    kw = {} if block is None else {"axis": 1, "block_size": block}
    qp, dp = (["qs", "qz"], ["ds", "dz"]) if qz is not None else (["qs"], ["ds"])
    nodes = [helper.make_node("QuantizeLinear", ["x"] + qp, ["q"], **kw)]
    src, mid_t = "q", qt
    if cast_to is not None:
        nodes.append(helper.make_node("Cast", ["q"], ["qc"], to=ONNX_TYPE[cast_to]))
        src, mid_t = "qc", cast_to
    nodes.append(helper.make_node("DequantizeLinear", [src] + dp, ["y"], **kw))
    if block is None:
        qsa, dsa = np.float32(qs), np.float32(ds)
        qza, dza = (None, None) if qz is None else (np.asarray(qz, qt), np.asarray(dz, mid_t))
        q = quantize(x, qsa, qza, qt)
        if cast_to is not None:
            q = q.astype(cast_to)
        y = dequantize(q, dsa, dza)
    else:  # one scale per block of `block` along axis 1
        qsa = np.full((4, 8 // block), qs, np.float32)
        dsa = qsa
        qza = np.full((4, 8 // block), qz, qt)
        dza = qza
        rep = lambda p: np.repeat(p, block, axis=1)  # noqa: E731
        q = quantize(x, rep(qsa), rep(qza), qt)
        y = ((q.astype(np.int32) - rep(dza).astype(np.int32)).astype(np.float32) * rep(dsa))
    inits = [const("qs", qsa), const("ds", dsa)]
    if qz is not None:
        inits += [const("qz", qza), const("dz", dza)]
    write_case(out, name, model(name, nodes, [vi("x", np.float32, x.shape)],
                                [vi("y", np.float32, x.shape)], inits, 21 if block else 13),
               [("x", x)], [("y", y)])
    expect_fused[name] = fused


pair_case("qdq_other_scale", 0.05, 10, 0.1, 10, np.uint8)
pair_case("qdq_other_zero_point", 0.05, 10, 0.05, 12, np.uint8)
pair_case("qdq_cast_to_int16", 0.05, -4, 0.05, -4, np.int8, cast_to=np.int16)
# no zero points: uint8 cast to int8 wraps 128..255 round to negative values
pair_case("qdq_cast_to_int8", 0.05, None, 0.05, None, np.uint8, cast_to=np.int8)
pair_case("qdq_same_params", 0.05, 10, 0.05, 10, np.uint8, fused=1)
pair_case("qdq_blocked", 0.05, 3, 0.05, 3, np.int8, block=4)

exe = args.onnxexec
failed = 0
# OX_SGEMM_PACKED=0: the kernels' paths for CPUs without AVX-512 (the scalar loop here)
for extra, env in (([], {}), (["--no-optimize"], {}), (["--roundtrip"], {}),
                   ([], {"OX_SGEMM_PACKED": "0"})):
    r = subprocess.run([exe, "test", out, "--rtol", "0", "--atol", "0", "--threads", "2"] + extra,
                       capture_output=True, text=True, env=dict(os.environ, **env))
    sys.stdout.write("onnxexec test %s%s:\n%s" % (" ".join(extra) or "(optimized)",
                                                 "".join(" " + k + "=" + v for k, v in env.items()),
                                                 r.stdout))
    if r.returncode:
        failed += 1
        sys.stdout.write(r.stderr)
for name, want in sorted(expect_fused.items()):
    # OX_FUSE_QCONV=0: the count of QuantizeDequantize pairs before qdq_conv_block's
    # convolution becomes an integer one (tests/qdq_conv_cases.py checks that fusion)
    r = subprocess.run([exe, "info", os.path.join(out, name, "model.onnx")],
                       capture_output=True, text=True, env=dict(os.environ, OX_FUSE_QCONV="0"))
    got = 0
    for line in r.stdout.splitlines():
        f = line.split()
        if len(f) == 2 and f[1] == "ai.onnxexec.QuantizeDequantize":
            got = int(f[0])
    if r.returncode or got != want:
        print("FAIL %s: %d QuantizeDequantize nodes after optimizing, expected %d"
              % (name, got, want))
        failed += 1
    else:
        print("PASS %s: %d QuantizeDequantize" % (name, got))
sys.exit(1 if failed else 0)
