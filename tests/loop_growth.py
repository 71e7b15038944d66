#!/usr/bin/python3
"""A Loop whose carried value grows at every iteration, as torchvision's Mask R-CNN pastes
its masks: outputs against numpy, and the memory it takes.

    tests/loop_growth.py --onnxexec BIN [--keep DIR]

The body concatenates one [1, 64, 64] slice (the input times the iteration number) to the
carried [i, 64, 64] tensor, for 120 iterations; the carried input's declared shape is
[0, 64, 64], what an exporter writes after tracing the first iteration (Mask R-CNN's ONNX has
this), so a runtime must take the declared dims of a subgraph's inputs as hints. Each
iteration is a new input signature for the body, and subgraph plans are cached per signature:
keeping all 120 would hold every iteration's arena (129 MiB peak here), so the cache keeps a
few per subgraph. Checked: the output equals numpy's loop exactly, and `onnxexec bench` reports
a peak RSS below 80 MiB (25 MiB with the cache trimmed).

Standard library + numpy + onnx. Exits 1 on any failure.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rss_check import check_peak_rss, finish  # noqa: E402

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--onnxexec", required=True)
ap.add_argument("--skip-rss", action="store_true",
                help="do not check the peak RSS (sanitizer builds inflate it)")
ap.add_argument("--keep", help="write the model and data here and keep them")
args = ap.parse_args()
work = args.keep or tempfile.mkdtemp(prefix="loop_growth_")
os.makedirs(work, exist_ok=True)
ITERS, S = 120, 64

body = helper.make_graph(
    [helper.make_node("Cast", ["i"], ["fi"], to=TensorProto.FLOAT),
     helper.make_node("Mul", ["x", "fi"], ["slice"]),
     helper.make_node("Concat", ["acc_in", "slice"], ["acc_out"], axis=0),
     helper.make_node("Identity", ["cond_in"], ["cond_out"])],
    "body",
    [helper.make_tensor_value_info("i", TensorProto.INT64, []),
     helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
     helper.make_tensor_value_info("acc_in", TensorProto.FLOAT, [0, S, S])],
    [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
     helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, None)])
g = helper.make_graph(
    [helper.make_node("Loop", ["M", "", "acc0"], ["acc"], body=body)],
    "loop_growth",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, S, S])],
    [helper.make_tensor_value_info("acc", TensorProto.FLOAT, ["n", S, S])],
    [numpy_helper.from_array(np.array(ITERS, np.int64), "M"),
     numpy_helper.from_array(np.zeros((0, S, S), np.float32), "acc0")])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
m.ir_version = 8
path = os.path.join(work, "loop_growth.onnx")
onnx.save(m, path)

x = np.random.default_rng(5).standard_normal((1, S, S)).astype(np.float32)
np.save(os.path.join(work, "x.npy"), x)
want = np.concatenate([x * np.float32(i) for i in range(ITERS)], axis=0)

failures = []
r = subprocess.run([args.onnxexec, "run", path, "-i", "x=" + os.path.join(work, "x.npy"), "-o",
                    os.path.join(work, "out")], capture_output=True, text=True)
if r.returncode:
    failures.append("run failed: " + r.stderr.strip())
else:
    got = np.load(os.path.join(work, "out", "acc.npy"))
    ok = got.shape == want.shape and np.array_equal(got, want)
    print("%s output %s (numpy's %s)" % ("ok  " if ok else "FAIL", got.shape, want.shape))
    if not ok:
        failures.append("output differs from numpy's loop")
check_peak_rss(args.onnxexec, path, ["-i", "x=" + os.path.join(work, "x.npy")], 80,
               "%d growing iterations" % ITERS, failures, "the body's plans are all kept",
               args.skip_rss)
finish(failures, work, args.keep)
