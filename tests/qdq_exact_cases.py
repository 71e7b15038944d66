#!/usr/bin/python3
"""QDQ rewrites that must keep the float graph's result bit for bit, against numpy.

    tests/qdq_exact_cases.py OUTDIR --onnxexec BIN

graph/optimize.c runs two QDQ patterns on the bytes instead of dequantizing them:

- fold_qadd: QuantizeLinear(Add(DequantizeLinear(a), DequantizeLinear(b)) [-> Relu or Clip]),
  the residual sums of a quantized ResNet or MobileNet, becomes onnxexec's QLinearAdd (the
  com.microsoft operator's inputs and a y_range for the activation), reading the two byte
  tensors once;
- fold_qmaxpool: QuantizeLinear(MaxPool(DequantizeLinear(x))) with the same scale and zero
  point becomes MaxPool(x) on the bytes (kernels/cpu/conv.c's 8-bit form).

Unlike the convolution's fusion these must give the float graph's result exactly, so the
oracle is the float graph itself written out in numpy from the operator definitions:
DequantizeLinear ((q - zero point) in float32 times the scale), Add in float32, the
activation, MaxPool over the window's elements inside the input, QuantizeLinear (float32
division, rounding half to even, saturation). Checked, every run exactly:

- optimized and through --roundtrip (the rewritten node written as ONNX and read back), and
  `onnxexec info` shows the QLinearAdd nodes where the fusion applies and none where it
  must not (a per-channel scale, an Add that another node reads, inputs of two types), and
  the dequantizations left (only the output's where a MaxPool runs on bytes; a MaxPool
  between other parameters, or with its Indices output, keeps its input's too);
- --no-optimize and OX_FUSE_QADD=0: the float graph, which must agree with the same oracle.

Shapes cover the vector loops' tails, pieces over the thread pool (more than 16384
elements), broadcasting (the general loop), uint8 and int8, saturation at both ends, scales
that make QuantizeLinear's halfway cases common (rounding half to even), and max pools of
stride 1, 2 (ResNet's 3x3) and 3, with padding, rows over 64 bytes and ceil_mode.
"""
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from case_dir import case_args, expect_error, op_count, write_case  # noqa: E402

args = case_args(__doc__)
out = args.outdir
rng = np.random.default_rng(31)
ONNX_TYPE = {np.uint8: TensorProto.UINT8, np.int8: TensorProto.INT8}
RANGE = {np.uint8: (0, 255), np.int8: (-128, 127)}


def quantize(v, s, z, qt):
    """QuantizeLinear in float32 (numpy: float32 division, rint is half to even)."""
    lo, hi = RANGE[qt]
    r = np.rint(np.asarray(v, np.float32) / np.float32(s)) + np.float32(z)
    return np.clip(r, lo, hi).astype(qt)


def dequantize(q, s, z):
    return ((q.astype(np.int32) - int(z)).astype(np.float32) * np.float32(s)).astype(np.float32)


def params(qt, s_lo=0.02, s_hi=0.08):
    s = np.float32(rng.uniform(s_lo, s_hi))
    z = np.asarray(rng.integers(100, 156) if qt == np.uint8 else rng.integers(-20, 20), qt)
    return s, z


def case(name, shape_a, shape_b=None, act=None, qt=np.uint8, bt=None, fused=True,
         per_channel=False, add_read=False, same_input=False, scales=None, spread=1.0):
    bt = bt or qt
    shape_b = shape_b or shape_a
    (sa, za), (sb, zb), (sy, zy) = scales if scales else (params(qt), params(bt), params(qt))
    sa, sb, sy = np.float32(sa), np.float32(sb), np.float32(sy)
    za, zb, zy = np.asarray(za, qt), np.asarray(zb, bt), np.asarray(zy, qt)
    # inputs spread over (and past) each type's range, so that both ends saturate
    a = (rng.uniform(-160, 160, shape_a) * spread * sa).astype(np.float32)
    b = (rng.uniform(-160, 160, shape_b) * spread * sb).astype(np.float32)
    inits = [("sa", sa), ("za", za), ("sb", sb), ("zb", zb), ("sy", sy), ("zy", zy)]
    sa_in = "sa"
    if per_channel:  # one scale per channel of a: not fused
        sac = rng.uniform(0.02, 0.08, shape_a[1]).astype(np.float32)
        inits += [("sac", sac), ("zac", np.full(shape_a[1], za, qt))]
        sa_in = "sac"
    nodes = [helper.make_node("QuantizeLinear", ["a", sa_in, "zac" if per_channel else "za"],
                              ["aq"], **({"axis": 1} if per_channel else {})),
             helper.make_node("Cast", ["aq"], ["aqc"], to=ONNX_TYPE[qt]),
             helper.make_node("DequantizeLinear", ["aqc", sa_in, "zac" if per_channel else "za"],
                              ["ad"], **({"axis": 1} if per_channel else {}))]
    if same_input:
        b_name = "ad"
    else:
        nodes += [helper.make_node("QuantizeLinear", ["b", "sb", "zb"], ["bq"]),
                  helper.make_node("Cast", ["bq"], ["bqc"], to=ONNX_TYPE[bt]),
                  helper.make_node("DequantizeLinear", ["bqc", "sb", "zb"], ["bd"])]
        b_name = "bd"
    nodes.append(helper.make_node("Add", ["ad", b_name], ["s"]))
    # the oracle: the float graph in numpy
    if per_channel:
        bshape = (1, -1) + (1,) * (len(shape_a) - 2)
        aq = np.clip(np.rint(a / sac.reshape(bshape)) + np.float32(za), *RANGE[qt]).astype(qt)
        fa = ((aq.astype(np.int32) - int(za)).astype(np.float32) * sac.reshape(bshape))
    else:
        fa = dequantize(quantize(a, sa, za, qt), sa, za)
    fb = fa if same_input else dequantize(quantize(b, sb, zb, bt), sb, zb)
    v = (fa + fb).astype(np.float32)
    src = "s"
    if act == "relu":
        nodes.append(helper.make_node("Relu", ["s"], ["r"]))
        v, src = np.maximum(v, np.float32(0)), "r"
    elif act in ("clip", "clip_reversed"):  # Clip with min > max gives max
        lo_v, hi_v = (-1.0, 2.5) if act == "clip" else (0.5, 0.2)
        nodes.append(helper.make_node("Clip", ["s", "clo", "chi"], ["r"]))
        inits += [("clo", np.float32(lo_v)), ("chi", np.float32(hi_v))]
        v, src = np.minimum(np.maximum(v, np.float32(lo_v)), np.float32(hi_v)), "r"
    nodes += [helper.make_node("QuantizeLinear", [src, "sy", "zy"], ["yq"]),
              helper.make_node("DequantizeLinear", ["yq", "sy", "zy"], ["y"])]
    expected = [("y", dequantize(quantize(v, sy, zy, qt), sy, zy))]
    if add_read:  # the float sum is an output too: the Add must stay
        expected.append(("s", (fa + fb).astype(np.float32)))
    inputs = [("a", a)] + ([] if same_input else [("b", b)])
    g = helper.make_graph(
        nodes, name, [helper.make_tensor_value_info(n, TensorProto.FLOAT, t.shape)
                      for n, t in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n, _ in expected],
        [numpy_helper.from_array(np.asarray(t), n) for n, t in inits])
    write_case(out, name, helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]),
               inputs, expected)
    cases[name] = 1 if fused else 0


cases = {}  # name -> QLinearAdd nodes expected after optimizing
case("qadd_relu_pieces", (1, 64, 28, 28), act="relu")  # 50176 elements: pieces over the pool
case("qadd_no_act_tail", (2, 3, 7, 11))  # 462: a 14-element tail
case("qadd_int8_clip", (1, 16, 9, 9), act="clip", qt=np.int8)
case("qadd_clip_reversed", (1, 8, 6, 6), act="clip_reversed")
case("qadd_broadcast", (1, 8, 5, 5), (1, 8, 1, 1), act="relu")
case("qadd_same_input", (3, 5, 17), same_input=True)
case("qadd_halfway", (1, 4, 10, 10),  # integers halved: every odd sum is a halfway case
     scales=((1.0, 128), (1.0, 128), (2.0, 128)), spread=1 / 4)
case("qadd_saturating", (1, 2, 40, 40), act="relu", spread=3.0)
# not fused: the float graph stays
case("qadd_per_channel_scale", (1, 4, 6, 6), per_channel=True, fused=False)
case("qadd_sum_read", (1, 4, 6, 6), add_read=True, fused=False)
case("qadd_two_types", (1, 4, 6, 6), bt=np.int8, fused=False)



def pool_case(name, shape, k, stride, pads, qt=np.uint8, ceil=0, fused=True, other_scale=False,
              indices=False):
    (sx, zx) = params(qt)
    sy, zy = (sx * np.float32(1.5), zx) if other_scale else (sx, zx)
    x = (rng.uniform(-160, 160, shape) * sx).astype(np.float32)
    xq = quantize(x, sx, zx, qt)
    fx = dequantize(xq, sx, zx)
    H, W = shape[2:]
    pt, pl, pb, pr = pads
    dims = []
    for n_in, p0, p1 in ((H, pt, pb), (W, pl, pr)):
        span = n_in + p0 + p1 - k
        dims.append((-(-span // stride) if ceil else span // stride) + 1)
    OH, OW = dims
    pooled = np.full(shape[:2] + [OH, OW], -np.inf, np.float32)
    for oh in range(OH):
        for ow in range(OW):
            r0, c0 = oh * stride - pt, ow * stride - pl
            win = fx[:, :, max(r0, 0):min(r0 + k, H), max(c0, 0):min(c0 + k, W)]
            pooled[:, :, oh, ow] = win.max(axis=(2, 3))
    attrs = {"kernel_shape": [k, k], "strides": [stride, stride], "pads": [pt, pl, pb, pr]}
    if ceil:
        attrs["ceil_mode"] = 1
    nodes = [helper.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]),
             helper.make_node("Cast", ["xq"], ["xqc"], to=ONNX_TYPE[qt]),
             helper.make_node("DequantizeLinear", ["xqc", "sx", "zx"], ["xd"]),
             helper.make_node("MaxPool", ["xd"], ["p", "pi"] if indices else ["p"], **attrs),
             helper.make_node("QuantizeLinear", ["p", "sy", "zy"], ["yq"]),
             helper.make_node("DequantizeLinear", ["yq", "sy", "zy"], ["y"])]
    inits = [("sx", sx), ("zx", zx), ("sy", sy), ("zy", zy)]
    expected = [("y", dequantize(quantize(pooled, sy, zy, qt), sy, zy))]
    g = helper.make_graph(
        nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.asarray(t), n) for n, t in inits])
    write_case(out, name, helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]),
               [("x", x)], expected)
    dq_cases[name] = 1 if fused else 2  # the output's dequantization, and the input's


dq_cases = {}  # name -> DequantizeLinear nodes expected after optimizing
pool_case("qmaxpool_resnet", [1, 16, 37, 41], 3, 2, [1, 1, 1, 1])  # ResNet's stem pool
pool_case("qmaxpool_int8_k2", [2, 3, 9, 13], 2, 2, [0, 0, 0, 0], qt=np.int8)
pool_case("qmaxpool_s1_wide", [1, 4, 7, 70], 3, 1, [1, 2, 1, 0])  # rows over 64 bytes
pool_case("qmaxpool_s3", [1, 5, 11, 17], 3, 3, [1, 1, 0, 2], qt=np.int8)
pool_case("qmaxpool_ceil", [1, 3, 10, 10], 3, 2, [0, 0, 0, 0], ceil=1)
# not rewritten: the float MaxPool stays between its DequantizeLinear and QuantizeLinear
pool_case("qmaxpool_other_scale", [1, 4, 8, 8], 3, 2, [1, 1, 1, 1], fused=False,
          other_scale=True)
pool_case("qmaxpool_indices", [1, 4, 8, 8], 3, 2, [1, 1, 1, 1], fused=False, indices=True)

exe = args.onnxexec
failed = 0
exact = ["--rtol", "0", "--atol", "0"]
for name in sorted(list(cases) + list(dq_cases)):
    d = os.path.join(out, name)
    for extra, env in [([], {}), (["--roundtrip"], {}), (["--no-optimize"], {}),
                       ([], {"OX_FUSE_QADD": "0"})]:
        r = subprocess.run([exe, "test", d, "--threads", "2"] + exact + extra,
                           capture_output=True, text=True, env=dict(os.environ, **env))
        label = " ".join(extra + ["%s=%s" % kv for kv in env.items()]) or "optimized"
        print("%s %s (%s)" % ("PASS" if r.returncode == 0 else "FAIL", name, label))
        if r.returncode:
            failed += 1
            sys.stdout.write(r.stdout + r.stderr)
    # a MaxPool left in float keeps two dequantizations (as QuantizeDequantize nodes)
    what, want = (("ai.onnxexec.QLinearAdd",), cases[name]) if name in cases else (
        ("DequantizeLinear", "ai.onnxexec.QuantizeDequantize"), dq_cases[name])
    got = op_count(exe, os.path.join(d, "model.onnx"), what)
    ok = got == want
    print("%s %s: %s %s after optimizing, expected %d" % ("PASS" if ok else "FAIL", name, got,
                                                         " or ".join(what), want))
    failed += not ok
# onnxexec's QLinearAdd as a file gives it: a y_range outside the output type's codes is
# refused by name (it would store codes past 255 in uint8)
bad = os.path.join(out, "bad")
os.makedirs(bad, exist_ok=True)
for tag, rng_ in (("qlinearadd_y_range_past_uint8", [0, 300]), ("qlinearadd_y_range_reversed",
                                                                 [9, 3])):
    node = helper.make_node("QLinearAdd", ["a", "s", "z", "a", "s", "z", "s", "z"], ["y"],
                            domain="ai.onnxexec", y_range=rng_)
    g = helper.make_graph([node], tag, [helper.make_tensor_value_info("a", TensorProto.UINT8,
                                                                      [4])],
                          [helper.make_tensor_value_info("y", TensorProto.UINT8, None)],
                          [numpy_helper.from_array(np.float32(0.1), "s"),
                           numpy_helper.from_array(np.uint8(3), "z")])
    path = os.path.join(bad, tag + ".onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13),
                                                  helper.make_opsetid("ai.onnxexec", 1)]), path)
    xp = os.path.join(bad, tag + "_a.pb")
    with open(xp, "wb") as f:
        f.write(numpy_helper.from_array(np.arange(4, dtype=np.uint8), "a").SerializeToString())
    failed += expect_error(exe, tag, path, [("a", xp)], "y_range")
sys.exit(1 if failed else 0)
