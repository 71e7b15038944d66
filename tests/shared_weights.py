#!/usr/bin/python3
"""Weights that several nodes share: one packed copy, the right one for each use.

    tests/shared_weights.py --onnxexec BIN [--keep DIR]

Detectors apply one head's convolutions at every pyramid level (retinanet, FCOS: the same
initializer in five Conv nodes of different input sizes), and models tie weights between
layers. The CPU kernels pack constant weights once per node (ox_kernel_prepared); nodes whose
packing would come out the same now share one copy. Checked here, against PyTorch:

1. outputs: one 3x3 weight (Winograd-sized) used by Convs on three input sizes, with and
   without padding and stride (stride 2 packs differently from the Winograd form); one 1x1
   weight in three Convs; one square matrix used as MatMul's B and as Gemm's B with
   transB=1 (the same data packed two ways: they must not share); one B in MatMuls of
   different row counts;
2. memory: eight MatMuls sharing one 2048 x 2048 B keep one packed copy (16 MiB), not
   eight: `onnxexec bench` reports a peak RSS below 96 MiB (eight copies take 128 MiB
   more than one).

Standard library + numpy + onnx + torch. Exits 1 on any failure.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rss_check import check_peak_rss, finish  # noqa: E402

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--onnxexec", required=True)
ap.add_argument("--skip-rss", action="store_true",
                help="do not check the peak RSS (sanitizer builds inflate it)")
ap.add_argument("--keep", help="write the models and data here and keep them")
args = ap.parse_args()
work = args.keep or tempfile.mkdtemp(prefix="shared_weights_")
os.makedirs(work, exist_ok=True)
rng = np.random.default_rng(3)
failures = []


def vi(name, a):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, a.shape)


def run(name, nodes, inputs, inits, outputs):
    """Writes the model (outputs: {name: array of the output's shape}), runs it with onnxexec,
    returns {output: array}."""
    g = helper.make_graph(nodes, name, [vi(k, v) for k, v in inputs.items()],
                          [vi(o, a) for o, a in outputs.items()],
                          [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    path = os.path.join(work, name + ".onnx")
    onnx.save(m, path)
    cmd = [args.onnxexec, "run", path, "-o", os.path.join(work, name)]
    for k, v in inputs.items():
        f = os.path.join(work, "%s_%s.npy" % (name, k))
        np.save(f, v)
        cmd += ["-i", "%s=%s" % (k, f)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        failures.append("%s: onnxexec run failed: %s" % (name, r.stderr.strip()))
        return None
    return {o: np.load(os.path.join(work, name, o + ".npy")) for o in outputs}


def check(name, got, want, tol=1e-5):
    err = np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30)
    ok = got.shape == want.shape and err <= tol
    print("%s %s: relative L2 %.2e" % ("ok  " if ok else "FAIL", name, err))
    if not ok:
        failures.append("%s: shape %s vs %s, relative L2 %.2e" % (name, got.shape, want.shape, err))


# 1a. one 3x3 weight, Convs on three sizes (and one with stride 2), one 1x1 weight in three
W3 = (rng.standard_normal((32, 32, 3, 3)) * 0.1).astype(np.float32)
W1 = (rng.standard_normal((48, 32, 1, 1)) * 0.1).astype(np.float32)
B3 = rng.standard_normal(32).astype(np.float32)
xs = {"x%d" % i: rng.standard_normal((1, 32, s, s)).astype(np.float32)
      for i, s in enumerate([40, 20, 10])}
nodes, want = [], {}
for i, k in enumerate(xs):
    stride = 2 if i == 1 else 1
    nodes.append(helper.make_node("Conv", [k, "W3", "B3"], ["c%d" % i], pads=[1, 1, 1, 1],
                                  strides=[stride, stride]))
    nodes.append(helper.make_node("Conv", [k, "W1"], ["p%d" % i]))
    t = torch.from_numpy(xs[k])
    want["c%d" % i] = torch.nn.functional.conv2d(t, torch.from_numpy(W3), torch.from_numpy(B3),
                                                 stride=stride, padding=1).numpy()
    want["p%d" % i] = torch.nn.functional.conv2d(t, torch.from_numpy(W1)).numpy()
got = run("conv_shared", nodes, xs, {"W3": W3, "B3": B3, "W1": W1}, want)
for k in want:
    if got:
        check("conv_shared/" + k, got[k], want[k])

# 1b. one square matrix as MatMul's B and as Gemm's B with transB=1; one B, three row counts
Wm = rng.standard_normal((256, 256)).astype(np.float32)
ins = {"a": rng.standard_normal((64, 256)).astype(np.float32),
       "b": rng.standard_normal((5, 256)).astype(np.float32),
       "c": rng.standard_normal((3, 7, 256)).astype(np.float32)}
nodes = [helper.make_node("MatMul", ["a", "Wm"], ["ya"]),
         helper.make_node("Gemm", ["a", "Wm"], ["yg"], transB=1),
         helper.make_node("MatMul", ["b", "Wm"], ["yb"]),
         helper.make_node("MatMul", ["c", "Wm"], ["yc"])]
T = {k: torch.from_numpy(v).double() for k, v in ins.items()}
Wt = torch.from_numpy(Wm).double()
want = {"ya": (T["a"] @ Wt).numpy(), "yg": (T["a"] @ Wt.T).numpy(),
        "yb": (T["b"] @ Wt).numpy(), "yc": (T["c"] @ Wt).numpy()}
got = run("matmul_shared", nodes, ins, {"Wm": Wm}, want)
for k in want:
    if got:
        check("matmul_shared/" + k, got[k], want[k])

# 2. eight MatMuls sharing one 2048 x 2048 B: one packed copy
n = 2048
Wb = (rng.standard_normal((n, n)) * 0.02).astype(np.float32)
x = rng.standard_normal((16, n)).astype(np.float32)
nodes = [helper.make_node("MatMul", ["x" if i == 0 else "h%d" % (i - 1), "Wb"], ["h%d" % i])
         for i in range(8)]
g = helper.make_graph(nodes, "tied", [vi("x", x)],
                      [helper.make_tensor_value_info("h7", TensorProto.FLOAT, [16, n])],
                      [numpy_helper.from_array(Wb, "Wb")])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
m.ir_version = 8
path = os.path.join(work, "tied.onnx")
onnx.save(m, path)
check_peak_rss(args.onnxexec, path, [], 96, "tied: eight MatMuls on one 16 MiB B", failures,
               "the packed B is not shared", args.skip_rss)
finish(failures, work, args.keep)
