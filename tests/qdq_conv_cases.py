#!/usr/bin/python3
"""QDQ convolutions run as integer ones (graph/optimize.c fold_qconv), against numpy.

    tests/qdq_conv_cases.py OUTDIR --onnxexec BIN

A QDQ model's convolution, QuantizeLinear(Conv(DequantizeLinear(xq), DequantizeLinear(Wq),
B) [-> Relu or Clip]), is what ONNX Runtime fuses into an integer convolution. onnxexec does
the same where its uint8 x int8 kernel runs (a CPU with AVX-512 VNNI). The oracle here is
that fused operator written out in numpy from the definitions: QLinearConv's integer sums of
(xq - x_zero_point) * Wq, the bias B / (x_scale * w_scale) rounded to int32 (B itself a
DequantizeLinear of int32, as torch and onnxruntime write it, or a float constant), the
multiplier x_scale * w_scale / y_scale in float32, rounding half to even, the activation as
the range of codes QuantizeLinear gives its bounds; then DequantizeLinear. Checked:

- optimized and through --roundtrip (the fused node written as ONNX and read back): exactly
  the oracle, and `onnxexec info` shows the QLinearConv nodes where the fusion applies and
  none where it must not (a weight zero point not 0, group 2, uint8 weights, a Conv output
  that another node reads, fewer than 4 products per output or 8 output channels, a
  depthwise convolution of stride 3 or with two outputs per input channel); depthwise ones
  (kernels/cpu/qdw8.c: 3x3 with ReLU6, stride 2, 5x5 with int8 output) are fused;
- --no-optimize and OX_FUSE_QCONV=0 (the float graph, as the model states it): within one
  step of the output's scale of the oracle, the difference the fusion is allowed;
- on a CPU without AVX-512 VNNI nothing is fused and every run is held to the one-step bound.
"""
import os
import subprocess
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from case_dir import case_args, op_count, write_case  # noqa: E402

args = case_args(__doc__)
out = args.outdir
rng = np.random.default_rng(23)
ONNX_TYPE = {np.uint8: TensorProto.UINT8, np.int8: TensorProto.INT8,
             np.int32: TensorProto.INT32, np.float32: TensorProto.FLOAT}
RANGE = {np.uint8: (0, 255), np.int8: (-128, 127)}


def conv_int(x, w, stride, pad):
    """Exact 2-D convolution of int64 arrays, x [N, C, H, W], w [M, C, kh, kw]."""
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    kh, kw = w.shape[2:]
    oh = (xp.shape[2] - kh) // stride + 1
    ow = (xp.shape[3] - kw) // stride + 1
    y = np.zeros((x.shape[0], w.shape[0], oh, ow), np.int64)
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride]
            y += np.einsum("nchw,mc->nmhw", patch, w[:, :, i, j])
    return y


def q_code(v, s, z, qt):
    """QuantizeLinear of one float32 value."""
    lo, hi = RANGE[qt]
    return int(np.clip(np.rint(np.float32(v) / np.float32(s)) + int(z), lo, hi))


def case(name, C=8, M=40, H=9, k=3, stride=1, pad=1, act=None, bias="dq", per_channel=True,
         yt=np.uint8, fused=True, wz=0, group=1, wt=np.int8, conv_read=False, shared_x=False):
    xs, xz = np.float32(rng.uniform(0.01, 0.05)), np.uint8(rng.integers(90, 160))
    ys = np.float32(rng.uniform(0.05, 0.2))
    yz = np.asarray(rng.integers(100, 140) if yt == np.uint8 else rng.integers(-10, 10), yt)
    ws = (rng.uniform(0.002, 0.01, M) if per_channel else rng.uniform(0.002, 0.01, 1)).astype(
        np.float32)
    lo_w, hi_w = (-127, 127) if wt == np.int8 else (0, 255)
    wq = rng.integers(lo_w, hi_w + 1, size=(M, C // group, k, k)).astype(wt)
    xq = rng.integers(0, 256, size=(1, C, H, H)).astype(np.uint8)
    x = ((xq.astype(np.int32) - int(xz)).astype(np.float32) * xs)  # exactly representable
    wsv = ws if per_channel else np.full(M, ws[0], np.float32)
    acc_scale = (xs * wsv).astype(np.float32)
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             helper.make_node("Cast", ["xq"], ["xqc"], to=TensorProto.UINT8),
             helper.make_node("DequantizeLinear", ["xqc", "xs", "xz"], ["xd"]),
             helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["w"],
                              **({"axis": 0} if per_channel else {}))]
    inits = [("xs", xs), ("xz", xz), ("wq", wq), ("ws", ws if per_channel else ws[0]),
             ("wz", np.full(M if per_channel else 1, wz, wt) if per_channel else wt(wz)),
             ("ys", ys), ("yz", yz)]
    conv_in = ["xd", "w"]
    if bias == "dq":  # int32 at x_scale * w_scale, as torch writes it
        bq = rng.integers(-3000, 3000, M).astype(np.int32)
        nodes.append(helper.make_node("DequantizeLinear", ["bq", "bs"], ["b"], axis=0))
        inits += [("bq", bq), ("bs", acc_scale)]
        bf = (bq.astype(np.float32) * acc_scale).astype(np.float32)
        conv_in.append("b")
    elif bias == "float":
        bf = rng.uniform(-0.5, 0.5, M).astype(np.float32)
        inits.append(("bf", bf))
        conv_in.append("bf")
    else:
        bf = np.zeros(M, np.float32)
    nodes.append(helper.make_node("Conv", conv_in, ["c"], pads=[pad] * 4, strides=[stride] * 2,
                                  group=group))
    src, qlo, qhi = "c", RANGE[yt][0], RANGE[yt][1]
    if act == "relu":
        nodes.append(helper.make_node("Relu", ["c"], ["r"]))
        src, qlo = "r", q_code(0.0, ys, yz, yt)
    elif act in ("clip", "clip6", "clip_reversed"):  # Clip with min > max gives max
        lo_v, hi_v = {"clip": (-1.0, 6.0), "clip6": (0.0, 6.0), "clip_reversed": (0.5, 0.2)}[act]
        nodes.append(helper.make_node("Clip", ["c", "clo", "chi"], ["r"]))
        inits += [("clo", np.float32(lo_v)), ("chi", np.float32(hi_v))]
        qlo, qhi = q_code(lo_v, ys, yz, yt), q_code(hi_v, ys, yz, yt)
        src, qlo = "r", min(qlo, qhi)
    nodes += [helper.make_node("QuantizeLinear", [src, "ys", "yz"], ["yq"]),
              helper.make_node("DequantizeLinear", ["yq", "ys", "yz"], ["y"])]
    outputs = [("y", None)]
    if conv_read:  # the float convolution is an output too: it must stay
        outputs.append(("c", None))
    if shared_x:  # a second convolution reads the same dequantized input
        nodes.append(helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["w2"],
                                      **({"axis": 0} if per_channel else {})))
        nodes.append(helper.make_node("Conv", ["xd", "w2"] + conv_in[2:], ["c2"],
                                      pads=[pad] * 4, strides=[stride] * 2))
        nodes.append(helper.make_node("QuantizeLinear", ["c2", "ys", "yz"], ["y2q"]))
        nodes.append(helper.make_node("DequantizeLinear", ["y2q", "ys", "yz"], ["y2"]))
        outputs.append(("y2", None))
    # the oracle: the fused integer convolution
    xi = xq.astype(np.int64) - int(xz)
    wi = wq.astype(np.int64) - int(wz)
    if group == 1:
        acc = conv_int(xi, wi, stride, pad)
    else:
        cg, mg = C // group, M // group
        acc = np.concatenate([conv_int(xi[:, g * cg:(g + 1) * cg], wi[g * mg:(g + 1) * mg],
                                       stride, pad) for g in range(group)], axis=1)
    b32 = np.rint(bf.astype(np.float64) / acc_scale.astype(np.float64)).astype(np.int64)
    mult = (acc_scale / ys).astype(np.float32).astype(np.float64)
    r = np.rint((acc + b32.reshape(1, M, 1, 1)) * mult.reshape(1, M, 1, 1)) + int(yz)
    yq = np.clip(r, qlo, qhi).astype(yt)
    y = ((yq.astype(np.int32) - int(yz)).astype(np.float32) * ys).astype(np.float32)
    expected = [("y", y)]
    if conv_read:  # the float graph's convolution, to the kernels' rounding: checked loosely
        c = (conv_int(xi, wi, stride, pad).astype(np.float64) *
             acc_scale.reshape(1, M, 1, 1).astype(np.float64) + bf.reshape(1, M, 1, 1))
        expected.append(("c", c.astype(np.float32)))
    if shared_x:
        r2 = np.rint((acc + b32.reshape(1, M, 1, 1)) * mult.reshape(1, M, 1, 1)) + int(yz)
        y2q = np.clip(r2, *RANGE[yt]).astype(yt)
        expected.append(("y2", ((y2q.astype(np.int32) - int(yz)).astype(np.float32) * ys)))
    g = helper.make_graph(
        nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n, _ in expected],
        [numpy_helper.from_array(np.asarray(v), n) for n, v in inits])
    write_case(out, name, helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]),
               [("x", x)], expected)
    cases[name] = (fused * (2 if shared_x else 1), float(ys))


cases = {}  # name -> (QLinearConv nodes expected after optimizing, the output's step)
case("qconv_relu_dq_bias", act="relu")
case("qconv_no_act_float_bias", bias="float", per_channel=False)
case("qconv_clip_no_bias_int8_out", act="clip", bias=None, yt=np.int8)
case("qconv_clip_reversed", act="clip_reversed", C=16)
case("qconv_stride2_7x7", C=3, M=40, H=23, k=7, stride=2, pad=3, act="relu")
case("qconv_pointwise", C=64, M=33, H=6, k=1, pad=0)
case("qconv_shared_input", shared_x=True)
# small layers, fused since stop 36: 36 products per output (MobileNet's 3-channel stem has
# 27), 16 outputs (its 16- and 24-channel projections)
case("qconv_small_k", C=4, M=40, k=3)
case("qconv_small_m", C=8, M=16, act="relu")
# depthwise (kernels/cpu/qdw8.c): MobileNet's 3x3 with ReLU6, stride 2 without bias, 5x5
case("qconv_depthwise_relu6", C=24, M=24, group=24, act="clip6")
case("qconv_depthwise_s2", C=32, M=32, H=15, group=32, stride=2, bias=None)
case("qconv_depthwise_5x5", C=40, M=40, H=11, k=5, pad=2, group=40, per_channel=False,
     yt=np.int8)
# not fused: their float graph stays, checked within one step like every unfused run
case("qconv_depthwise_stride3", C=16, M=16, group=16, stride=3, fused=False)
case("qconv_channel_multiplier", C=8, M=16, group=8, fused=False)
case("qconv_weight_zero_point", wz=3, fused=False)
case("qconv_group2", C=8, M=12, group=2, fused=False)
case("qconv_uint8_weights", wt=np.uint8, fused=False)
case("qconv_output_read", conv_read=True, fused=False)
case("qconv_few_products", C=2, M=40, k=1, pad=0, fused=False)  # 2 products per output
case("qconv_few_outputs", C=8, M=4, fused=False)

cpu = open("/proc/cpuinfo").read() if os.path.exists("/proc/cpuinfo") else ""
vnni = " avx512_vnni" in cpu and " avx512bw" in cpu
exe = args.onnxexec
failed = 0
for name, (want, step) in sorted(cases.items()):
    d = os.path.join(out, name)
    runs = [([], {}), (["--roundtrip"], {}), (["--no-optimize"], {}), ([], {"OX_FUSE_QCONV": "0"})]
    for extra, env in runs:
        exact = vnni and want and not extra[:1] == ["--no-optimize"] and not env
        # outputs of the float convolution itself (conv_read) only to the float kernels' rounding
        tol = ["--rtol", "0", "--atol", "0"] if exact else ["--rtol", "1e-5",
                                                            "--atol", "%.9g" % (step * 1.0001)]
        r = subprocess.run([exe, "test", d, "--threads", "2"] + tol + extra,
                           capture_output=True, text=True, env=dict(os.environ, **env))
        label = " ".join(extra + ["%s=%s" % kv for kv in env.items()]) or "optimized"
        print("%s %s (%s): %s" % ("PASS" if r.returncode == 0 else "FAIL", name, label,
                                  "exact" if exact else "within one step"))
        if r.returncode:
            failed += 1
            sys.stdout.write(r.stdout + r.stderr)
    got = op_count(exe, os.path.join(d, "model.onnx"), ("QLinearConv", "ai.onnxexec.QLinearConv"))
    expect = want if vnni else 0
    ok = got == expect
    print("%s %s: %s QLinearConv after optimizing, expected %d" % ("PASS" if ok else "FAIL",
                                                                  name, got, expect))
    failed += not ok
sys.exit(1 if failed else 0)
