#!/usr/bin/python3
"""Backend-layout cases for the CUDA ScatterElements / Scatter / ScatterND kernels: every
reduction (none, add, mul, max, min) on float, float16, int32 and int64, int32 and int64
indices, negative indices, duplicates (with reductions), and a contended case of 20000
updates into 64 places. Values are chosen so that every order of the reductions gives the
same result exactly (small integers; mul by +-1, 2, 0.5), so the GPU's atomics must match.

    tests/scatter_cases.py OUTDIR [--onnxexec BIN [--device D]]

writes the cases under OUTDIR (backend-test layout, expected outputs from the numpy
references below); with --onnxexec, runs `BIN test OUTDIR` (on D: tests/gpu_check.py takes
OUTDIR as a --node folder on a GPU) and exits with its status. The CPU kernels pass them in
the `scatter_cases` test; on a GPU the atomics must give the same results."""
import argparse
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("outdir")
ap.add_argument("--onnxexec", help="run BIN test OUTDIR after writing the cases")
ap.add_argument("--device", help="run the cases there (e.g. cuda)")
args = ap.parse_args()
out = args.outdir
rng = np.random.default_rng(7)
TYPES = {"float32": onnx.TensorProto.FLOAT, "float16": onnx.TensorProto.FLOAT16,
         "int32": onnx.TensorProto.INT32, "int64": onnx.TensorProto.INT64}
OPS = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def vals(dt, shape, red):
    if red == "mul":
        v = rng.choice([-1, 1, 2] if dt.startswith("int") else [-1.0, 1.0, 2.0, 0.5], size=shape)
    else:
        v = rng.integers(-8, 9, size=shape)
    return v.astype(dt)


def save(name, op, opset, attrs, data, idx, upd, want):
    d = os.path.join(out, name)
    os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    ins = [("data", data), ("indices", idx), ("updates", upd)]
    node = helper.make_node(op, ["data", "indices", "updates"], ["y"], **attrs)
    vi = [helper.make_tensor_value_info(n, onnx.helper.np_dtype_to_tensor_dtype(a.dtype)
                                        if hasattr(onnx.helper, "np_dtype_to_tensor_dtype")
                                        else onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[a.dtype], a.shape)
          for n, a in ins]
    yo = helper.make_tensor_value_info("y", vi[0].type.tensor_type.elem_type, want.shape)
    g = helper.make_graph([node], name, vi, [yo])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.save(m, os.path.join(d, "model.onnx"))
    for k, (n, a) in enumerate(ins):
        t = numpy_helper.from_array(a, n)
        open(os.path.join(d, "test_data_set_0", "input_%d.pb" % k), "wb").write(t.SerializeToString())
    t = numpy_helper.from_array(want, "y")
    open(os.path.join(d, "test_data_set_0", "output_0.pb"), "wb").write(t.SerializeToString())


def ref_elements(data, idx, upd, axis, red):
    y = data.copy()
    for e in np.ndindex(*idx.shape):
        k = int(idx[e])
        if k < 0:
            k += data.shape[axis]
        p = list(e)
        p[axis] = k
        p = tuple(p)
        y[p] = upd[e] if red == "none" else OPS[red](y[p], upd[e])
    return y


def ref_nd(data, idx, upd, red):
    y = data.copy()
    k = idx.shape[-1]
    for e in np.ndindex(*idx.shape[:-1]):
        p = tuple(int(v) + (data.shape[j] if v < 0 else 0) for j, v in enumerate(idx[e]))
        y[p] = upd[e] if red == "none" else OPS[red](y[p], upd[e])
    return y


for dt in TYPES:
    for red in ["none", "add", "mul", "max", "min"]:
        attrs = {} if red == "none" else {"reduction": red}
        for ix in ["int64", "int32"]:
            # ScatterElements, axis 1 of [4,5], indices [3,4] in [-5,5): duplicates only
            # with a reduction (without one the winner is undefined)
            data = vals(dt, (4, 5), red)
            if red == "none":
                idx = np.array([rng.permutation(5)[:4] - 5 * (r % 2) for r in range(3)], ix)
            else:
                idx = rng.integers(-5, 5, size=(3, 4)).astype(ix)
            upd = vals(dt, (3, 4), red)
            save("test_sc_elements_%s_%s_%s" % (red, dt, ix), "ScatterElements", 18,
                 dict(attrs, axis=1), data, idx, upd, ref_elements(data, idx, upd, 1, red))
            # along axis 0 of [5,3,4] (not the last axis: each index row spreads over columns)
            data = vals(dt, (5, 3, 4), red)
            if red == "none":
                idx = np.stack([rng.permutation(5)[:4] for _ in range(12)], axis=1)
                idx = (idx.reshape(4, 3, 4) - 5 * (rng.random((4, 3, 4)) < 0.5)).astype(ix)
            else:
                idx = rng.integers(-5, 5, size=(4, 3, 4)).astype(ix)
            upd = vals(dt, (4, 3, 4), red)
            save("test_sc_elements_axis0_%s_%s_%s" % (red, dt, ix), "ScatterElements", 18,
                 dict(attrs, axis=0), data, idx, upd, ref_elements(data, idx, upd, 0, red))
            # ScatterND: k=1 slices of [4,3,2] and k=3 elements
            data = vals(dt, (4, 3, 2), red)
            idx = (np.array([[1], [-1], [0]]) if red == "none"
                   else np.array([[1], [-3], [3], [-1], [1]])).astype(ix)
            upd = vals(dt, (idx.shape[0], 3, 2), red)
            save("test_sc_nd_slices_%s_%s_%s" % (red, dt, ix), "ScatterND", 18, attrs, data,
                 idx, upd, ref_nd(data, idx, upd, red))
            idx = (np.array([[0, 1, 1], [-1, -1, 0], [2, 0, -2]]) if red == "none"
                   else np.array([[0, 1, 1], [-4, -2, 1], [3, 2, 0], [-1, -1, -2]])).astype(ix)
            upd = vals(dt, (idx.shape[0],), red)
            save("test_sc_nd_elems_%s_%s_%s" % (red, dt, ix), "ScatterND", 18, attrs, data,
                 idx, upd, ref_nd(data, idx, upd, red))
        if red != "none":
            # contended: 20000 updates into 64 places of [2,64] along axis 1 (sums stay exact:
            # 0/1 values in float16, small integers elsewhere)
            data = vals(dt, (2, 64), red)
            idx = rng.integers(-64, 64, size=(2, 10000)).astype(np.int64)
            if red == "mul":
                upd = rng.choice([-1, 1], size=(2, 10000)).astype(dt)
            elif dt == "float16":
                upd = rng.integers(0, 2, size=(2, 10000)).astype(dt)
            else:
                upd = rng.integers(-8, 9, size=(2, 10000)).astype(dt)
            want = data.copy()
            OPS[red].at(want, (np.arange(2)[:, None], np.where(idx < 0, idx + 64, idx)), upd)
            save("test_sc_contended_%s_%s" % (red, dt), "ScatterElements", 18,
                 dict(attrs, axis=1), data, idx, upd, want)
# opset 10's Scatter (no reduction)
data = vals("float32", (3, 4), "none")
idx = np.array([[1, -1, 0], [3, 2, -4]], np.int64)
upd = vals("float32", (2, 3), "none")
save("test_sc_scatter10", "Scatter", 10, {"axis": 1}, data, idx, upd,
     ref_elements(data, idx, upd, 1, "none"))
print(len(os.listdir(out)), "cases in", out)
if args.onnxexec:
    cmd = [args.onnxexec, "test", out] + (["--device", args.device, "-v"] if args.device else [])
    sys.exit(subprocess.run(cmd).returncode)
