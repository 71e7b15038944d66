#!/usr/bin/python3
"""Opset conversion (graph/opset.c, `onnxexec convert IN OUT --opset N`): the converted model
means what the original meant, in the form the target opset has.

  1. Adapters, both directions: small models built with onnx.helper at a source opset are
     converted; the output must import the target opset, pass onnx.checker (full check,
     targets up to 17: what onnx 1.12 knows), show the operator in its new form (attribute
     or input, renamed op, new constants), and compute the same outputs as the original on
     the same random inputs (`onnxexec run --no-optimize`, within 1e-6 relative; integers
     exactly), and, where easy, what numpy computes.
  2. Conformance: ONNX backend node cases (Debian libonnx-testdata, opsets <= 17) of the
     operators with adapters are converted up to 17 (and 18 where the op changed there)
     and down to every earlier version of the op; each converted model goes into a case
     folder linking the original test data, and `onnxexec test` must pass it (against the
     ONNX reference outputs). Cases whose parameters (axes, split, pads, scales, ...) come
     as graph inputs are also tried "frozen": those inputs made initializers from the test
     data, so that conversions needing constants can happen. A conversion may be refused,
     but only with exit status 1 and a message naming the node and the op; cases that fail
     before conversion are skipped.
  3. Failures: LayerNormalization (opset 17) to 16 exits 1 naming the node and leaves no
     output file; a computed axes input cannot become an attribute.

    opset_convert.py --onnxexec build/onnxexec [--data DIR] [--jobs N] [--keep DIR]
"""
import argparse
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import defs, helper, numpy_helper

ENV = dict(os.environ, OPENBLAS_NUM_THREADS="1")
EXE = None
TMP = None
CHECKER_MAX = 17  # the newest opset onnx 1.12 knows
NP = {T.FLOAT: np.float32, T.DOUBLE: np.float64, T.INT64: np.int64, T.INT32: np.int32,
      T.BOOL: np.bool_, T.FLOAT16: np.float16, T.UINT8: np.uint8}
FAILS = []
VERBOSE = False
LOCK = threading.Lock()


def fail(msg):
    FAILS.append(msg)
    print("FAIL", msg)


def run(args, timeout=120):
    return subprocess.run([EXE] + args, capture_output=True, text=True, env=ENV, timeout=timeout)


# ---- part 1: adapters on hand-made models -------------------------------------------------

def tensor(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def model(nodes, inputs, outputs, opset, inits=None, ir=None):
    """inputs: {name: array} (graph inputs, fed at run time); outputs: {name: (dtype, shape)}."""
    ins = [helper.make_tensor_value_info(n, onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[np.dtype(a.dtype)], a.shape)
           for n, a in inputs.items()]
    outs = [helper.make_tensor_value_info(n, dt, sh) for n, (dt, sh) in outputs.items()]
    ir = ir or (3 if opset < 9 else {9: 4, 10: 5, 11: 6}.get(opset, 7 if opset < 15 else 8))
    if ir < 4:  # before IR 4 every initializer is also a graph input
        ins += [helper.make_tensor_value_info(
            n, onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[np.asarray(a).dtype], np.asarray(a).shape)
            for n, a in (inits or {}).items()]
    g = helper.make_graph(nodes, "g", ins, outs,
                          initializer=[tensor(n, a) for n, a in (inits or {}).items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)],
                          producer_name="opset_convert.py")
    m.ir_version = ir
    return m


def node_of(m, op):
    found = [n for n in m.graph.node if n.op_type == op]
    if not found:
        for n in m.graph.node:  # subgraphs
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    found += [s for s in a.g.node if s.op_type == op]
    assert found, f"no {op} node in {[n.op_type for n in m.graph.node]}"
    return found[0]


def attr(n, name):
    for a in n.attribute:
        if a.name == name:
            v = helper.get_attribute_value(a)
            return v.decode() if isinstance(v, bytes) else v
    return None


def const(m, name):
    """Initializer or Constant-node value of name (None if neither)."""
    for i in m.graph.initializer:
        if i.name == name:
            return numpy_helper.to_array(i)
    for n in m.graph.node:
        if n.op_type == "Constant" and n.output[0] == name:
            return numpy_helper.to_array(attr_tensor(n))
    return None


def attr_tensor(n):
    for a in n.attribute:
        if a.name == "value":
            return a.t
    raise AssertionError("Constant without value")


def inp(n, k):
    return n.input[k] if k < len(n.input) else ""


def save_inputs(folder, feeds):
    args = []
    for name, arr in feeds.items():
        path = os.path.join(folder, f"in_{name}.npy")
        np.save(path, arr)
        args += ["-i", f"{name}={path}"]
    return args


def run_model(path, feeds, outdir):
    os.makedirs(outdir, exist_ok=True)
    r = run(["run", path, "-o", outdir, "--no-optimize"] + save_inputs(os.path.dirname(path), feeds))
    if r.returncode:
        raise AssertionError(f"onnxexec run {os.path.basename(path)}: {r.stderr.strip()}")
    m = onnx.load(path)
    return {o.name: np.load(os.path.join(outdir, re.sub(r"[^A-Za-z0-9._-]", "_", o.name) + ".npy"))
            for o in m.graph.output}


def same(a, b, what):
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        raise AssertionError(f"{what}: shape {a.shape} vs {b.shape}")
    if a.dtype.kind == "f" or b.dtype.kind == "f":
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        if not np.array_equal(np.isnan(a64), np.isnan(b64)) or not np.allclose(
                a64, b64, rtol=1e-6, atol=0, equal_nan=True):
            raise AssertionError(f"{what}: values differ (max |diff| "
                                 f"{np.nanmax(np.abs(a64 - b64)) if a64.size else 0})")
    elif not np.array_equal(a, b):
        raise AssertionError(f"{what}: values differ")


def close(a, ref, what, rtol=1e-5):
    a, ref = np.asarray(a, np.float64), np.asarray(ref, np.float64)
    if a.shape != ref.shape or not np.allclose(a, ref, rtol=rtol, atol=1e-6):
        raise AssertionError(f"{what}: differs from numpy ({a.shape} vs {ref.shape})")


class Case:
    """A model at opset `src`, converted to each target: form checks and same outputs."""

    def __init__(self, name, make, src, targets, feeds, ref=None):
        self.name, self.make, self.src, self.targets = name, make, src, targets
        self.feeds, self.ref = feeds, ref or {}


def convert(src_path, dst_path, target):
    return run(["convert", src_path, dst_path, "--opset", str(target)])


def check_case(case, counts):
    folder = os.path.join(TMP, "unit", case.name)
    os.makedirs(folder, exist_ok=True)
    m = case.make(case.src)
    src_path = os.path.join(folder, f"src{case.src}.onnx")
    onnx.save(m, src_path)
    base = run_model(src_path, case.feeds, os.path.join(folder, "out_src"))
    for name, ref in case.ref.items():
        close(base[name], ref, f"{case.name} at opset {case.src}, output {name}")
    for target, form in case.targets:
        what = f"{case.name}: {case.src} -> {target}"
        dst = os.path.join(folder, f"to{target}.onnx")
        r = convert(src_path, dst, target)
        if r.returncode:
            raise AssertionError(f"{what}: convert failed: {r.stderr.strip()}")
        out = onnx.load(dst)
        imports = {o.domain: o.version for o in out.opset_import}
        if imports.get("") != target:
            raise AssertionError(f"{what}: imports {imports}")
        if target <= CHECKER_MAX:
            try:
                onnx.checker.check_model(out, full_check=True)
            except Exception as e:  # noqa: BLE001 - the checker's own exception types
                raise AssertionError(f"{what}: onnx.checker: {e}") from None
        try:
            form(out)
        except AssertionError as e:
            raise AssertionError(f"{what}: form: {e}") from None
        got = run_model(dst, case.feeds, os.path.join(folder, f"out{target}"))
        for name, val in base.items():
            same(got[name], val, f"{what}, output {name}")
        with LOCK:
            counts["unit"] += 1
    print(f"ok   {case.name} ({case.src} -> {', '.join(str(t) for t, _ in case.targets)})")


def expect(cond, msg):
    if not cond:
        raise AssertionError(msg)


def unit_cases(rng):
    f32 = lambda *s: rng.standard_normal(s).astype(np.float32)
    FL = T.FLOAT
    cases = []

    # Split: split attribute <-> input (13); num_outputs (18)
    x = f32(2, 6, 4)
    split = lambda opset: model(
        [helper.make_node("Split", ["x"], ["a", "b", "c"], axis=1, name="sp",
                          **({"split": [1, 2, 3]} if opset < 13 else {}))]
        if opset < 13 else
        [helper.make_node("Split", ["x", "s"], ["a", "b", "c"], axis=1, name="sp")],
        {"x": x}, {"a": (FL, [2, 1, 4]), "b": (FL, [2, 2, 4]), "c": (FL, [2, 3, 4])}, opset,
        inits={"s": np.array([1, 2, 3], np.int64)} if opset >= 13 else None)
    ref = dict(zip("abc", np.split(x, [1, 3], axis=1)))
    cases.append(Case("split_attr_input", split, 11, [
        (13, lambda m: expect(list(const(m, inp(node_of(m, "Split"), 1))) == [1, 2, 3]
                              and attr(node_of(m, "Split"), "split") is None, "split not an input")),
        (18, lambda m: expect(attr(node_of(m, "Split"), "num_outputs") is None, "num_outputs set")),
        (2, lambda m: expect(attr(node_of(m, "Split"), "split") == [1, 2, 3], "split attr"))],
        {"x": x}, ref))
    cases.append(Case("split_input_attr", split, 13, [
        (11, lambda m: expect(attr(node_of(m, "Split"), "split") == [1, 2, 3]
                              and len(node_of(m, "Split").input) == 1, "split not an attribute")),
        (1, lambda m: expect(attr(node_of(m, "Split"), "split") == [1, 2, 3], "split attr"))],
        {"x": x}, ref))
    x7 = f32(7, 3)
    numout = lambda opset: model(
        [helper.make_node("Split", ["x"], ["a", "b", "c"], name="sp",
                          **({"num_outputs": 3} if opset >= 18 else {}))],
        {"x": x7} if opset >= 18 else {"x": f32(6, 3)},
        dict(zip("abc", [(FL, s) for s in ([[3, 3], [3, 3], [1, 3]] if opset >= 18 else
                                           [[2, 3]] * 3)])), opset)
    cases.append(Case("split_num_outputs_down", numout, 18, [
        (13, lambda m: expect(list(const(m, inp(node_of(m, "Split"), 1))) == [3, 3, 1]
                              and attr(node_of(m, "Split"), "num_outputs") is None,
                              "split sizes [3, 3, 1] expected")),
        (11, lambda m: expect(attr(node_of(m, "Split"), "split") == [3, 3, 1], "split attr"))],
        {"x": x7}, dict(zip("abc", np.split(x7, [3, 6])))))
    x6 = f32(6, 3)
    cases.append(Case("split_num_outputs_up", numout, 13, [
        (18, lambda m: expect(attr(node_of(m, "Split"), "num_outputs") == 3, "num_outputs 3"))],
        {"x": x6}, dict(zip("abc", np.split(x6, 3)))))

    # Squeeze / Unsqueeze: axes attribute <-> input (13); negative axes below 11
    xs = f32(3, 1, 4, 1)
    sq = lambda opset: model(
        [helper.make_node("Squeeze", ["x"] + (["ax"] if opset >= 13 else []), ["y"], name="sq",
                          **({"axes": [1, -1]} if opset < 13 else {}))],
        {"x": xs}, {"y": (FL, [3, 4])}, opset,
        inits={"ax": np.array([1, -1], np.int64)} if opset >= 13 else None)
    cases.append(Case("squeeze_up", sq, 11, [
        (13, lambda m: expect(list(const(m, inp(node_of(m, "Squeeze"), 1))) == [1, -1], "axes in")),
        (21, lambda m: expect(attr(node_of(m, "Squeeze"), "axes") is None, "axes attr left"))],
        {"x": xs}, {"y": xs.reshape(3, 4)}))
    cases.append(Case("squeeze_down", sq, 13, [
        (11, lambda m: expect(attr(node_of(m, "Squeeze"), "axes") == [1, -1], "axes attr")),
        (1, lambda m: expect(attr(node_of(m, "Squeeze"), "axes") == [1, 3], "axes made positive"))],
        {"x": xs}, {"y": xs.reshape(3, 4)}))
    xu = f32(3, 4)
    usq = lambda opset: model(
        [helper.make_node("Unsqueeze", ["x"] + (["ax"] if opset >= 13 else []), ["y"], name="usq",
                          **({"axes": [0, -1]} if opset < 13 else {}))],
        {"x": xu}, {"y": (FL, [1, 3, 4, 1])}, opset,
        inits={"ax": np.array([0, -1], np.int64)} if opset >= 13 else None)
    cases.append(Case("unsqueeze_down", usq, 13, [
        (12, lambda m: expect(attr(node_of(m, "Unsqueeze"), "axes") == [0, -1], "axes attr")),
        (9, lambda m: expect(attr(node_of(m, "Unsqueeze"), "axes") == [0, 3], "output rank used"))],
        {"x": xu}, {"y": xu.reshape(1, 3, 4, 1)}))
    cases.append(Case("unsqueeze_up", usq, 11, [
        (13, lambda m: expect(list(const(m, inp(node_of(m, "Unsqueeze"), 1))) == [0, -1], "axes"))],
        {"x": xu}, {"y": xu.reshape(1, 3, 4, 1)}))

    # ReduceSum (13) and the other Reduce ops (18): axes attribute <-> input
    xr = f32(2, 3, 4)
    for op, fn, at in (("ReduceSum", np.sum, 13), ("ReduceMean", np.mean, 18),
                       ("ReduceMax", np.max, 18), ("ReduceL2", None, 18),
                       ("ReduceLogSumExp", None, 18)):
        def red(opset, op=op, at=at):
            return model(
                [helper.make_node(op, ["x"] + (["ax"] if opset >= at else []), ["y"], name="r",
                                  keepdims=0, **({"axes": [0, -1]} if opset < at else {}))],
                {"x": xr}, {"y": (FL, [3])}, opset,
                inits={"ax": np.array([0, -1], np.int64)} if opset >= at else None)
        refs = {"y": fn(xr.astype(np.float64), axis=(0, 2))} if fn else {}
        cases.append(Case(f"{op.lower()}_up", red, at - 2, [
            (at, lambda m, op=op: expect(list(const(m, inp(node_of(m, op), 1))) == [0, -1]
                                         and attr(node_of(m, op), "axes") is None, "axes input"))],
            {"x": xr}, refs))
        cases.append(Case(f"{op.lower()}_down", red, at, [
            (at - 1, lambda m, op=op: expect(attr(node_of(m, op), "axes") == [0, -1], "axes attr")),
            (10, lambda m, op=op: expect(attr(node_of(m, op), "axes") == [0, 2], "axes positive"))],
            {"x": xr}, refs))
    all_red = lambda opset: model(  # no axes: everything, both ways
        [helper.make_node("ReduceMean", ["x"], ["y"], name="r")], {"x": xr}, {"y": (FL, [1, 1, 1])},
        opset)
    cases.append(Case("reducemean_all", all_red, 18, [
        (13, lambda m: expect(attr(node_of(m, "ReduceMean"), "axes") is None, "no axes"))],
        {"x": xr}, {"y": np.mean(xr.astype(np.float64), keepdims=True)}))

    # Clip: min/max attributes (< 11) <-> inputs
    xc = f32(4, 5) * 3
    clip6 = lambda opset: model(
        [helper.make_node("Clip", ["x"], ["y"], name="cl", min=-1.0, max=1.5)] if opset < 11 else
        [helper.make_node("Clip", ["x", "lo", "hi"], ["y"], name="cl")],
        {"x": xc}, {"y": (FL, [4, 5])}, opset,
        inits={"lo": np.array(-1, np.float32), "hi": np.array(1.5, np.float32)} if opset >= 11 else None)
    cases.append(Case("clip_attrs_up", clip6, 6, [
        (11, lambda m: expect(float(const(m, inp(node_of(m, "Clip"), 1))) == -1.0
                              and float(const(m, inp(node_of(m, "Clip"), 2))) == 1.5, "bounds")),
        (13, lambda m: expect(attr(node_of(m, "Clip"), "min") is None, "attr left"))],
        {"x": xc}, {"y": np.clip(xc, -1, 1.5)}))
    cases.append(Case("clip_inputs_down", clip6, 13, [
        (10, lambda m: expect(attr(node_of(m, "Clip"), "min") == -1.0
                              and attr(node_of(m, "Clip"), "max") == 1.5
                              and len(node_of(m, "Clip").input) == 1, "bounds as attributes")),
        (1, lambda m: expect(attr(node_of(m, "Clip"), "max") == 1.5, "max"))],
        {"x": xc}, {"y": np.clip(xc, -1, 1.5)}))
    clip_max = lambda opset: model(
        [helper.make_node("Clip", ["x", "", "hi"], ["y"], name="cl")], {"x": xc},
        {"y": (FL, [4, 5])}, opset, inits={"hi": np.array(0.5, np.float32)})
    cases.append(Case("clip_max_only_down", clip_max, 12, [
        (6, lambda m: expect(attr(node_of(m, "Clip"), "min") == -np.inf, "min is -inf"))],
        {"x": xc}, {"y": np.minimum(xc, 0.5)}))

    # Pad: pads/value attributes (< 11) <-> inputs; axes input (18)
    xp = f32(2, 3)
    pad = lambda opset: model(
        [helper.make_node("Pad", ["x"], ["y"], name="pd", mode="constant", value=1.5,
                          **{"pads" if opset >= 2 else "paddings": [0, 1, 2, 0]})] if opset < 11 else
        [helper.make_node("Pad", ["x", "p", "v"], ["y"], name="pd", mode="constant")],
        {"x": xp}, {"y": (FL, [4, 4])}, opset,
        inits={"p": np.array([0, 1, 2, 0], np.int64), "v": np.array(1.5, np.float32)}
        if opset >= 11 else None)
    pref = {"y": np.pad(xp, ((0, 2), (1, 0)), constant_values=1.5)}
    cases.append(Case("pad_attrs_up", pad, 2, [
        (11, lambda m: expect(list(const(m, inp(node_of(m, "Pad"), 1))) == [0, 1, 2, 0]
                              and float(const(m, inp(node_of(m, "Pad"), 2))) == 1.5, "pads, value")),
        (19, lambda m: expect(attr(node_of(m, "Pad"), "pads") is None, "pads attr left"))],
        {"x": xp}, pref))
    cases.append(Case("pad_inputs_down", pad, 13, [
        (10, lambda m: expect(attr(node_of(m, "Pad"), "pads") == [0, 1, 2, 0]
                              and attr(node_of(m, "Pad"), "value") == 1.5, "attributes")),
        (1, lambda m: expect(attr(node_of(m, "Pad"), "paddings") == [0, 1, 2, 0], "paddings"))],
        {"x": xp}, pref))
    pad_axes = lambda opset: model(
        [helper.make_node("Pad", ["x", "p", "", "ax"], ["y"], name="pd", mode="edge")],
        {"x": xp}, {"y": (FL, [2, 6])}, opset,
        inits={"p": np.array([1, 2], np.int64), "ax": np.array([-1], np.int64)})
    cases.append(Case("pad_axes_down", pad_axes, 18, [
        (13, lambda m: expect(list(const(m, inp(node_of(m, "Pad"), 1))) == [0, 1, 0, 2]
                              and len(node_of(m, "Pad").input) == 2, "pads over every axis")),
        (2, lambda m: expect(attr(node_of(m, "Pad"), "pads") == [0, 1, 0, 2], "pads attr"))],
        {"x": xp}, {"y": np.pad(xp, ((0, 0), (1, 2)), mode="edge")}))

    # Slice: starts/ends/axes attributes (< 10) <-> inputs; negative axes below 11
    xl = f32(5, 6, 3)
    sl = lambda opset: model(
        [helper.make_node("Slice", ["x"], ["y"], name="sl", starts=[1, -4], ends=[4, 100],
                          axes=[0, 1])] if opset < 10 else
        [helper.make_node("Slice", ["x", "s", "e", "a"], ["y"], name="sl")],
        {"x": xl}, {"y": (FL, [3, 4, 3])}, opset,
        inits={"s": np.array([1, -4], np.int64), "e": np.array([4, 100], np.int64),
               "a": np.array([0, -2], np.int64)} if opset >= 10 else None)
    slref = {"y": xl[1:4, -4:]}
    cases.append(Case("slice_attrs_up", sl, 9, [
        (10, lambda m: expect(list(const(m, inp(node_of(m, "Slice"), 1))) == [1, -4], "starts")),
        (13, lambda m: expect(attr(node_of(m, "Slice"), "starts") is None, "attr left"))],
        {"x": xl}, slref))
    cases.append(Case("slice_inputs_down", sl, 13, [
        (10, lambda m: expect(list(const(m, inp(node_of(m, "Slice"), 3))) == [0, 1],
                              "axes made positive")),
        (9, lambda m: expect(attr(node_of(m, "Slice"), "axes") == [0, 1]
                             and attr(node_of(m, "Slice"), "ends") == [4, 100], "attributes"))],
        {"x": xl}, slref))

    # TopK: k attribute (< 10) <-> input
    xk = f32(3, 7)
    topk = lambda opset: model(
        [helper.make_node("TopK", ["x"] + (["k"] if opset >= 10 else []), ["v", "i"], name="tk",
                          axis=1, **({"k": 3} if opset < 10 else {}))],
        {"x": xk}, {"v": (FL, [3, 3]), "i": (T.INT64, [3, 3])}, opset,
        inits={"k": np.array([3], np.int64)} if opset >= 10 else None)
    order = np.argsort(-xk, axis=1, kind="stable")[:, :3]
    tkref = {"v": np.take_along_axis(xk, order, 1), "i": order}
    cases.append(Case("topk_attr_up", topk, 9, [
        (10, lambda m: expect(list(const(m, inp(node_of(m, "TopK"), 1))) == [3], "k input")),
        (11, lambda m: expect(attr(node_of(m, "TopK"), "k") is None, "k attr left"))],
        {"x": xk}, tkref))
    cases.append(Case("topk_input_down", topk, 11, [
        (9, lambda m: expect(attr(node_of(m, "TopK"), "k") == 3, "k attribute"))],
        {"x": xk}, tkref))

    # Dropout: ratio attribute (< 12) <-> input, training_mode a constant false
    xd = f32(3, 4)
    drop = lambda opset: model(
        [helper.make_node("Dropout", ["x"], ["y"], name="dr", ratio=0.25)] if opset < 12 else
        [helper.make_node("Dropout", ["x", "r", "t"], ["y"], name="dr", seed=3)],
        {"x": xd}, {"y": (FL, [3, 4])}, opset,
        inits={"r": np.array(0.25, np.float32), "t": np.array(False)} if opset >= 12 else None)
    cases.append(Case("dropout_ratio_up", drop, 10, [
        (12, lambda m: expect(float(const(m, inp(node_of(m, "Dropout"), 1))) == 0.25, "ratio in")),
        (13, lambda m: expect(attr(node_of(m, "Dropout"), "ratio") is None, "ratio attr left"))],
        {"x": xd}, {"y": xd}))
    cases.append(Case("dropout_ratio_down", drop, 13, [
        (10, lambda m: expect(attr(node_of(m, "Dropout"), "ratio") == 0.25
                              and len(node_of(m, "Dropout").input) == 1, "ratio attribute")),
        (7, lambda m: expect(attr(node_of(m, "Dropout"), "seed") is None, "seed left"))],
        {"x": xd}, {"y": xd}))

    # Upsample <-> Resize (10 renames; 11: asymmetric, roi, nearest_mode; 13, 18, 19)
    xi = f32(1, 2, 3, 4)
    ups = lambda opset: model(
        [helper.make_node("Upsample", ["x"] + (["sc"] if opset >= 9 else []), ["y"], name="up",
                          mode="nearest", **({"scales": [1.0, 1.0, 2.0, 3.0]} if opset < 9 else {}))],
        {"x": xi}, {"y": (FL, [1, 2, 6, 12])}, opset,
        inits={"sc": np.array([1, 1, 2, 3], np.float32)} if opset >= 9 else None)
    upref = {"y": xi.repeat(2, axis=2).repeat(3, axis=3)}
    cases.append(Case("upsample_to_resize", ups, 9, [
        (10, lambda m: expect(node_of(m, "Resize") is not None, "Resize")),
        (11, lambda m: expect(attr(node_of(m, "Resize"), "coordinate_transformation_mode")
                              == "asymmetric" and attr(node_of(m, "Resize"), "nearest_mode")
                              == "floor" and len(node_of(m, "Resize").input) == 3, "Resize-11")),
        (13, lambda m: expect(inp(node_of(m, "Resize"), 1) == "", "roi left out")),
        (19, lambda m: expect(node_of(m, "Resize") is not None, "Resize"))],
        {"x": xi}, upref))
    cases.append(Case("upsample_scales_attr", ups, 7, [
        (9, lambda m: expect(len(node_of(m, "Upsample").input) == 2, "scales input")),
        (17, lambda m: expect(node_of(m, "Resize") is not None, "Resize"))],
        {"x": xi}, upref))
    rs_down = lambda opset: model(
        [helper.make_node("Resize", ["x", "", "", "sz"], ["y"], name="rz", mode="nearest",
                          coordinate_transformation_mode="asymmetric", nearest_mode="floor")],
        {"x": xi}, {"y": (FL, [1, 2, 6, 12])}, opset, inits={"sz": np.array([1, 2, 6, 12], np.int64)})
    cases.append(Case("resize_to_upsample", rs_down, 13, [
        (11, lambda m: expect(len(node_of(m, "Resize").input) == 4
                              and const(m, node_of(m, "Resize").input[2]).size == 0, "empty scales")),
        (10, lambda m: expect(list(const(m, node_of(m, "Resize").input[1])) == [1, 1, 2, 3],
                              "sizes became scales")),
        (9, lambda m: expect(node_of(m, "Upsample") is not None, "Upsample")),
        (7, lambda m: expect(attr(node_of(m, "Upsample"), "scales") == [1, 1, 2, 3], "scales"))],
        {"x": xi}, upref))
    rs_lin = lambda opset: model(
        [helper.make_node("Resize", ["x", "roi", "sc"], ["y"], name="rz", mode="linear")],
        {"x": xi}, {"y": (FL, [1, 2, 5, 6])}, opset,
        inits={"roi": np.zeros(0, np.float32), "sc": np.array([1, 1, 1.7, 1.5], np.float32)})
    cases.append(Case("resize_linear_11_up", rs_lin, 11, [
        (13, lambda m: expect(inp(node_of(m, "Resize"), 1) == "", "empty roi left out")),
        (18, lambda m: expect(attr(node_of(m, "Resize"), "antialias") is None, "no antialias")),
        (19, lambda m: expect(node_of(m, "Resize") is not None, "Resize"))], {"x": xi}))
    rs18 = lambda opset: model(
        [helper.make_node("Resize", ["x", "", "sc"], ["y"], name="rz", mode="cubic", antialias=0,
                          keep_aspect_ratio_policy="stretch")],
        {"x": xi}, {"y": (FL, [1, 2, 5, 6])}, opset,
        inits={"sc": np.array([1, 1, 1.7, 1.5], np.float32)})
    cases.append(Case("resize_18_down", rs18, 19, [
        (17, lambda m: expect(attr(node_of(m, "Resize"), "antialias") is None, "antialias left")),
        (11, lambda m: expect(const(m, node_of(m, "Resize").input[1]).size == 0, "empty roi"))],
        {"x": xi}))

    # BatchNormalization: spatial, is_test, consumed_inputs at their defaults; training_mode
    xb = f32(2, 3, 4, 5)
    bn_init = {"s": rng.random(3).astype(np.float32) + 0.5, "b": f32(3),
               "mu": f32(3), "var": rng.random(3).astype(np.float32) + 0.5}
    bn = lambda opset: model(
        [helper.make_node("BatchNormalization", ["x", "s", "b", "mu", "var"], ["y"], name="bn",
                          epsilon=1e-3, **({"consumed_inputs": [0, 0, 0, 1, 1]} if opset < 6 else {}),
                          **({"is_test": 1} if opset < 7 else {}),
                          **({"spatial": 1} if opset < 9 else {}))],
        {"x": xb}, {"y": (FL, [2, 3, 4, 5])}, opset, inits=bn_init)
    sh = (1, 3, 1, 1)
    bnref = {"y": (xb - bn_init["mu"].reshape(sh)) / np.sqrt(bn_init["var"].reshape(sh) + 1e-3)
             * bn_init["s"].reshape(sh) + bn_init["b"].reshape(sh)}
    cases.append(Case("batchnorm_up", bn, 5, [
        (7, lambda m: expect(attr(node_of(m, "BatchNormalization"), "is_test") is None
                             and attr(node_of(m, "BatchNormalization"), "consumed_inputs") is None,
                             "is_test, consumed_inputs gone")),
        (9, lambda m: expect(attr(node_of(m, "BatchNormalization"), "spatial") is None, "spatial")),
        (15, lambda m: expect(attr(node_of(m, "BatchNormalization"), "epsilon") is not None, "eps"))],
        {"x": xb}, bnref))
    cases.append(Case("batchnorm_down", bn, 15, [
        (9, lambda m: expect(attr(node_of(m, "BatchNormalization"), "training_mode") is None, "tm")),
        (6, lambda m: expect(attr(node_of(m, "BatchNormalization"), "is_test") == 1, "is_test=1")),
        (5, lambda m: expect(attr(node_of(m, "BatchNormalization"), "consumed_inputs") is not None,
                             "consumed_inputs"))],
        {"x": xb}, bnref))

    # Softmax: coerced 2-D (< 13) vs one axis (13)
    xm = f32(4, 6)
    sm = lambda opset: model([helper.make_node("Softmax", ["x"], ["y"], name="sm")],
                             {"x": xm}, {"y": (FL, [4, 6])}, opset)
    e = np.exp(xm.astype(np.float64) - xm.max(1, keepdims=True))
    smref = {"y": e / e.sum(1, keepdims=True)}
    cases.append(Case("softmax_up", sm, 11, [
        (13, lambda m: expect(attr(node_of(m, "Softmax"), "axis") == 1, "axis 1 (the last)"))],
        {"x": xm}, smref))
    cases.append(Case("softmax_down", sm, 13, [
        (11, lambda m: expect(attr(node_of(m, "Softmax"), "axis") == -1, "axis -1 explicit")),
        (1, lambda m: expect(attr(node_of(m, "Softmax"), "axis") == 1, "axis made positive"))],
        {"x": xm}, smref))

    # numpy-style broadcasting (7) vs broadcast/axis attributes
    xa, ba = f32(2, 3, 4), f32(3)
    add6 = lambda opset: model(
        [helper.make_node("Add", ["x", "b"], ["y"], name="ad", broadcast=1, axis=1)]
        if opset < 7 else [helper.make_node("Add", ["x", "b"], ["y"], name="ad")],
        {"x": xa}, {"y": (FL, [2, 3, 4])}, opset,
        inits={"b": ba if opset < 7 else ba.reshape(3, 1)})
    cases.append(Case("add_broadcast_axis_up", add6, 6, [
        (7, lambda m: expect(const(m, inp(node_of(m, "Add"), 1)).shape == (3, 1),
                             "B reshaped to [3, 1]"))],
        {"x": xa}, {"y": xa + ba.reshape(3, 1)}))
    b4 = f32(4)
    add7 = lambda opset: model([helper.make_node("Mul", ["x", "b"], ["y"], name="mu")],
                               {"x": xa, "b": b4}, {"y": (FL, [2, 3, 4])}, opset)
    cases.append(Case("mul_broadcast_down", add7, 14, [
        (6, lambda m: expect(attr(node_of(m, "Mul"), "broadcast") == 1, "broadcast=1"))],
        {"x": xa, "b": b4}, {"y": xa * b4}))

    # Cast: `to` as a type name (< 6)
    xcast = f32(3, 4) * 10
    cast = lambda opset: model(
        [helper.make_node("Cast", ["x"], ["y"], name="ca", to="INT32" if opset < 6 else T.INT32)],
        {"x": xcast}, {"y": (T.INT32, [3, 4])}, opset)
    cases.append(Case("cast_to", cast, 13, [
        (5, lambda m: expect(attr(node_of(m, "Cast"), "to") == "INT32", "to is a name"))],
        {"x": xcast}, {"y": xcast.astype(np.int32)}))

    # Constant value_ints (12) -> value tensor; Scatter <-> ScatterElements (11)
    xq = f32(3, 4)
    cst = lambda opset: model(
        [helper.make_node("Constant", [], ["sh"], name="c", value_ints=[4, 3]),
         helper.make_node("Reshape", ["x", "sh"], ["y"], name="re")],
        {"x": xq}, {"y": (FL, [4, 3])}, opset)
    cases.append(Case("constant_value_ints", cst, 13, [
        (11, lambda m: expect(list(numpy_helper.to_array(attr_tensor(node_of(m, "Constant"))))
                              == [4, 3], "value tensor")),
        (9, lambda m: expect(list(numpy_helper.to_array(attr_tensor(node_of(m, "Constant"))))
                             == [4, 3], "value tensor"))],
        {"x": xq}, {"y": xq.reshape(4, 3)}))
    rsh = lambda opset: model(
        [helper.make_node("Reshape", ["x"] + (["sh"] if opset >= 5 else []), ["y"], name="re",
                          **({"shape": [2, -1]} if opset < 5 else {}))],
        {"x": xq}, {"y": (FL, [2, 6])}, opset,
        inits={"sh": np.array([2, -1], np.int64)} if opset >= 5 else None)
    cases.append(Case("reshape_shape_attr", rsh, 13, [
        (4, lambda m: expect(attr(node_of(m, "Reshape"), "shape") == [2, -1]
                             and len(node_of(m, "Reshape").input) == 1
                             and len(m.graph.initializer) == 0, "shape attribute, constant gone"))],
        {"x": xq}, {"y": xq.reshape(2, 6)}))
    cases.append(Case("reshape_shape_input", rsh, 1, [
        (5, lambda m: expect(list(const(m, inp(node_of(m, "Reshape"), 1))) == [2, -1], "input"))],
        {"x": xq}, {"y": xq.reshape(2, 6)}))
    idx = np.array([[1, 0, 2, 0]], np.int64)
    upd = f32(1, 4)
    sc = lambda opset: model(
        [helper.make_node("ScatterElements" if opset >= 11 else "Scatter", ["x", "i", "u"], ["y"],
                          name="sc", axis=0)],
        {"x": xq}, {"y": (FL, [3, 4])}, opset, inits={"i": idx, "u": upd})
    scref = xq.copy()
    for j in range(4):
        scref[idx[0, j], j] = upd[0, j]
    cases.append(Case("scatter_rename_down", sc, 13, [
        (10, lambda m: expect(node_of(m, "Scatter") is not None, "Scatter"))], {"x": xq},
        {"y": scref}))
    cases.append(Case("scatter_rename_up", sc, 9, [
        (11, lambda m: expect(node_of(m, "ScatterElements") is not None, "ScatterElements")),
        (17, lambda m: expect(node_of(m, "ScatterElements") is not None, "ScatterElements"))],
        {"x": xq}, {"y": scref}))

    # GroupNormalization: scale and bias per group (18) <-> per channel (21)
    xg = f32(2, 4, 3)
    gs, gb = np.array([0.5, 2.0], np.float32), np.array([1.0, -1.0], np.float32)
    gn = lambda opset: model(
        [helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], name="gn", num_groups=2,
                          epsilon=1e-4)], {"x": xg}, {"y": (FL, [2, 4, 3])}, opset,
        inits={"s": gs.repeat(2) if opset >= 21 else gs, "b": gb.repeat(2) if opset >= 21 else gb})
    grp = xg.reshape(2, 2, 6).astype(np.float64)
    norm = ((grp - grp.mean(-1, keepdims=True)) / np.sqrt(grp.var(-1, keepdims=True) + 1e-4))
    gnref = {"y": norm.reshape(2, 4, 3) * gs.repeat(2).reshape(1, 4, 1) + gb.repeat(2).reshape(1, 4, 1)}
    cases.append(Case("groupnorm_per_channel_up", gn, 18, [
        (21, lambda m: expect(list(const(m, inp(node_of(m, "GroupNormalization"), 1)))
                              == [0.5, 0.5, 2.0, 2.0], "scale per channel"))],
        {"x": xg}, gnref))
    cases.append(Case("groupnorm_per_group_down", gn, 21, [
        (18, lambda m: expect(list(const(m, inp(node_of(m, "GroupNormalization"), 2)))
                              == [1.0, -1.0], "bias per group"))],
        {"x": xg}, gnref))

    # Gemm: C optional from 11 (a zero C below); GridSample's modes renamed at 20
    ga, gbm = f32(3, 4), f32(4, 5)
    gemm = lambda opset: model([helper.make_node("Gemm", ["a", "b"], ["y"], name="gm", alpha=0.5)],
                               {"a": ga}, {"y": (FL, [3, 5])}, opset, inits={"b": gbm})
    cases.append(Case("gemm_without_c_down", gemm, 13, [
        (9, lambda m: expect(float(const(m, inp(node_of(m, "Gemm"), 2))) == 0, "zero C")),
        (6, lambda m: expect(attr(node_of(m, "Gemm"), "broadcast") == 1, "broadcast=1"))],
        {"a": ga}, {"y": 0.5 * ga.astype(np.float64) @ gbm}))
    gx, grid = f32(1, 2, 4, 5), (rng.random((1, 3, 3, 2)) * 2 - 1).astype(np.float32)
    gsm = lambda opset: model(
        [helper.make_node("GridSample", ["x", "g"], ["y"], name="gsm",
                          mode="bicubic" if opset < 20 else "cubic", align_corners=1)],
        {"x": gx, "g": grid}, {"y": (FL, [1, 2, 3, 3])}, opset)
    cases.append(Case("gridsample_modes", gsm, 16, [
        (20, lambda m: expect(attr(node_of(m, "GridSample"), "mode") == "cubic", "cubic"))],
        {"x": gx, "g": grid}))
    cases.append(Case("gridsample_modes_down", gsm, 20, [
        (16, lambda m: expect(attr(node_of(m, "GridSample"), "mode") == "bicubic", "bicubic"))],
        {"x": gx, "g": grid}))

    # a subgraph: an If whose branches squeeze with an axes attribute (11) / input (13)
    xsub = f32(1, 5)
    def branch(opset, name, scale):
        ns = [helper.make_node("Squeeze", ["x"] + (["ax"] if opset >= 13 else []), [name + "_s"],
                               **({"axes": [0]} if opset < 13 else {})),
              helper.make_node("Mul", [name + "_s", name + "_k"], [name + "_y"])]
        inits = [tensor(name + "_k", np.array(scale, np.float32))]
        if opset >= 13:
            ns.insert(0, helper.make_node("Constant", [], ["ax"], value=tensor("ax_t", np.array([0], np.int64))))
            ns[0].output[0] = name + "_ax"
            ns[1].input[1] = name + "_ax"
        return helper.make_graph(ns, name, [], [helper.make_tensor_value_info(name + "_y", FL, [5])],
                                 initializer=inits)
    iff = lambda opset: model(
        [helper.make_node("If", ["c"], ["y"], name="if", then_branch=branch(opset, "t", 2.0),
                          else_branch=branch(opset, "e", -1.0))],
        {"x": xsub, "c": np.array(True)}, {"y": (FL, [5])}, opset)
    cases.append(Case("if_subgraph_up", iff, 11, [
        (13, lambda m: expect(len(node_of(m, "Squeeze").input) == 2, "axes input in the branch"))],
        {"x": xsub, "c": np.array(True)}, {"y": xsub[0] * 2}))
    cases.append(Case("if_subgraph_down", iff, 13, [
        (11, lambda m: expect(attr(node_of(m, "Squeeze"), "axes") == [0], "axes attr in branch"))],
        {"x": xsub, "c": np.array(False)}, {"y": xsub[0] * -1}))
    return cases


def failures(counts):
    """Conversions that must fail: exit status 1, a message naming the node, no output."""
    folder = os.path.join(TMP, "fail")
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 4)).astype(np.float32)
    cases = [
        ("layernorm_17_to_16", model(
            [helper.make_node("Relu", ["x"], ["r"], name="relu0"),
             helper.make_node("LayerNormalization", ["r", "g"], ["y"], name="ln1")],
            {"x": x}, {"y": (T.FLOAT, [2, 4])}, 17, inits={"g": np.ones(4, np.float32)}), 16,
         ["node 'ln1' (LayerNormalization)", "no LayerNormalization before opset 17"]),
        ("computed_axes", model(
            [helper.make_node("Squeeze", ["x", "ax"], ["y"], name="sq0")],
            {"x": rng.standard_normal((1, 4)).astype(np.float32), "ax": np.array([0], np.int64)},
            {"y": (T.FLOAT, [4])}, 13), 11,
         ["node 'sq0' (Squeeze)", "Squeeze-13 to Squeeze-11", "not a constant"]),
        ("split_num_outputs_unknown_dim", model(
            [helper.make_node("Split", ["x"], ["a", "b"], name="sp0", axis=0, num_outputs=2)],
            {}, {"a": (T.FLOAT, None), "b": (T.FLOAT, None)}, 18), 13,
         ["node 'sp0' (Split)", "num_outputs", "not known"]),
        ("softmax_axis_not_last", model(
            [helper.make_node("Softmax", ["x3"], ["y"], name="sm0", axis=0)],
            {"x3": rng.standard_normal((2, 3, 4)).astype(np.float32)}, {"y": (T.FLOAT, [2, 3, 4])},
            13), 12, ["node 'sm0' (Softmax)", "Softmax-13 to Softmax-11"]),
        ("pad_wrap_down", model(
            [helper.make_node("Pad", ["x", "p"], ["y"], name="pd0", mode="wrap")],
            {"x": x}, {"y": (T.FLOAT, [2, 6])}, 19, inits={"p": np.array([0, 1, 0, 1], np.int64)}),
         18, ["node 'pd0' (Pad)", "'wrap'"]),
        ("topk_smallest_down", model(
            [helper.make_node("TopK", ["x", "k"], ["v", "i"], name="tk0", largest=0)],
            {"x": x}, {"v": (T.FLOAT, [2, 2]), "i": (T.INT64, [2, 2])}, 11,
            inits={"k": np.array([2], np.int64)}), 10, ["node 'tk0' (TopK)", "largest"]),
    ]
    # the Split model's input has no known shape
    cases[2][1].graph.input.append(helper.make_tensor_value_info("x", T.FLOAT, None))
    for name, m, target, words in cases:
        src = os.path.join(folder, name + ".onnx")
        dst = os.path.join(folder, name + ".out.onnx")
        onnx.save(m, src)
        r = convert(src, dst, target)
        msg = r.stderr.strip()
        if r.returncode != 1:
            fail(f"{name}: exit status {r.returncode}, expected 1 ({msg})")
        elif os.path.exists(dst):
            fail(f"{name}: the output file exists after the failure")
        elif not all(w in msg for w in words):
            fail(f"{name}: message {msg!r} lacks {words}")
        else:
            counts["refused_ok"] += 1
            print(f"ok   {name}: {msg}")


# ---- part 2: conformance ---------------------------------------------------------------------

# Operators whose node cases are converted, and which inputs are parameters that a frozen
# variant makes initializers.
PARAMS = {"Split": [1], "Squeeze": [1], "Unsqueeze": [1], "Clip": [1, 2], "Pad": [1, 2, 3],
          "Slice": [1, 2, 3, 4], "TopK": [1], "Resize": [1, 2, 3], "Upsample": [1],
          "Dropout": [1, 2], "BatchNormalization": [], "Softmax": [], "LogSoftmax": [],
          "Reshape": [1], "Selu": [], "ScatterElements": [], "Scatter": [], "Cast": []}
for _op in ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
            "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"):
    PARAMS[_op] = [1]
RENAMED = {"Resize": "Upsample", "ScatterElements": "Scatter", "Upsample": "Resize",
           "Scatter": "ScatterElements"}
CHANGED_AT_18 = {"Split", "Pad", "Resize"} | {op for op in PARAMS if op.startswith("Reduce")}


def op_versions(op):
    vs = {s.since_version for s in defs.get_all_schemas_with_history()
          if s.domain == "" and s.name in (op, RENAMED.get(op, ""))}
    return sorted(vs)


def case_op(m):
    ops = [n.op_type for n in m.graph.node if n.op_type != "Constant"]
    return ops[0] if len(ops) == 1 else None


def link_case(src_dir, dst_dir, model):
    os.makedirs(dst_dir, exist_ok=True)
    for d in os.listdir(src_dir):
        if d.startswith("test_data_set_"):
            os.symlink(os.path.join(src_dir, d), os.path.join(dst_dir, d))
    if model:
        shutil.copy(model, os.path.join(dst_dir, "model.onnx"))


def freeze(src_dir, dst_dir, m, op):
    """A copy of case m whose parameter graph inputs are initializers (from the data sets,
    which must agree), with data set folders that link the remaining inputs. None if there
    is nothing to freeze."""
    node = next(n for n in m.graph.node if n.op_type == op)
    names = {node.input[k] for k in PARAMS[op] if k < len(node.input) and node.input[k]}
    gin = [i.name for i in m.graph.input]
    frozen = [n for n in gin if n in names]
    if not frozen:
        return None
    sets = sorted(d for d in os.listdir(src_dir) if d.startswith("test_data_set_"))
    values = {}
    for s in sets:
        for k, n in enumerate(gin):
            if n not in frozen:
                continue
            t = onnx.TensorProto()
            with open(os.path.join(src_dir, s, f"input_{k}.pb"), "rb") as f:
                t.ParseFromString(f.read())
            a = numpy_helper.to_array(t)
            if n in values and not np.array_equal(values[n], a):
                return None
            values[n] = a
    fm = onnx.ModelProto()
    fm.CopyFrom(m)
    keep = [i for i in fm.graph.input if i.name not in frozen]
    del fm.graph.input[:]
    fm.graph.input.extend(keep)
    fm.graph.initializer.extend(tensor(n, a) for n, a in values.items())
    os.makedirs(dst_dir, exist_ok=True)
    onnx.save(fm, os.path.join(dst_dir, "model.onnx"))
    for s in sets:
        os.makedirs(os.path.join(dst_dir, s))
        j = 0
        for k, n in enumerate(gin):
            if n not in frozen:
                os.symlink(os.path.join(src_dir, s, f"input_{k}.pb"),
                           os.path.join(dst_dir, s, f"input_{j}.pb"))
                j += 1
        for f in os.listdir(os.path.join(src_dir, s)):
            if f.startswith("output_"):
                os.symlink(os.path.join(src_dir, s, f), os.path.join(dst_dir, s, f))
    return fm


def test_folder(folder, jobs):
    """`onnxexec test` over every case folder in `folder` (split over `jobs` processes):
    {case: (passed, line)}."""
    names = sorted(os.listdir(folder))
    parts = [names[i::jobs] for i in range(jobs)]
    results = {}

    def one(part):
        if not part:
            return ""
        r = run(["test"] + [os.path.join(folder, n) for n in part] + ["--threads", "1"],
                 timeout=600)
        return r.stdout + r.stderr

    with concurrent.futures.ThreadPoolExecutor(jobs) as ex:
        for out in ex.map(one, parts):
            for line in out.splitlines():
                mt = re.match(r"(PASS|FAIL|SKIP) (\S+?)(:|$)", line)
                if mt:
                    results[mt.group(2)] = (mt.group(1), line)
    return results


def conformance(data, jobs, counts):
    base_dir = os.path.join(TMP, "base")
    conv_dir = os.path.join(TMP, "conv")
    os.makedirs(base_dir)
    os.makedirs(conv_dir)
    chosen = {}
    for c in sorted(os.listdir(data)):
        path = os.path.join(data, c, "model.onnx")
        if not os.path.exists(path):
            continue
        m = onnx.load(path)
        op = case_op(m)
        if op not in PARAMS or any(o.domain not in ("", "ai.onnx") for o in m.opset_import):
            continue
        if "_expanded" in c or "_random" in c:
            continue
        if op.startswith("Reduce") and op != "ReduceSum" and "keepdims_example" not in c:
            continue  # ReduceSum all; the others keep and drop dims
        if op == "Cast" and not re.search(r"FLOAT_to_(DOUBLE|FLOAT16|STRING)|BFLOAT16_to_FLOAT"
                                          r"|DOUBLE_to_FLOAT$|STRING_to_FLOAT", c):
            continue
        chosen[c] = (m, op)
        link_case(os.path.join(data, c), os.path.join(base_dir, c), path)
    t0 = time.time()
    base = test_folder(base_dir, jobs)
    print(f"  base runs {time.time() - t0:.1f} s")
    variants = []  # (name, source dir, model path, op, up targets, down targets)
    for c, (m, op) in chosen.items():
        if base.get(c, ("",))[0] != "PASS":
            counts["skipped"] += 1
            continue
        src = [o.version for o in m.opset_import if o.domain in ("", "ai.onnx")][0]
        down = [v for v in op_versions(op) if v < src]
        up = sorted({17} | ({18} if op in CHANGED_AT_18 else set()) - {src})
        fz = os.path.join(TMP, "frozen", c)
        frozen = freeze(os.path.join(data, c), fz, m, op)
        # up, and down to every earlier version; with parameters as graph inputs, the case
        # itself takes only the first step down (a refusal, mostly), its frozen variant all
        variants.append((c, os.path.join(data, c), os.path.join(data, c, "model.onnx"), op, up,
                         down[-1:] if frozen else down))
        if frozen:
            variants.append((c + "_frozen", fz, os.path.join(fz, "model.onnx"), op, up, down))

    def do(variant):
        """Conversions of one case: up to each target; down to each earlier version, newest
        first, until one is refused (the older ones cross the same step)."""
        name, sdir, mpath, op, up, down = variant
        done = []
        for t, going_down in [(t, False) for t in up] + [(t, True) for t in reversed(down)]:
            dst = os.path.join(conv_dir, f"{name}_to{t}")
            link_case(sdir, dst, None)
            r = convert(mpath, os.path.join(dst, "model.onnx"), t)
            done.append((f"{name}_to{t}", t, op, r))
            if r.returncode and going_down:
                break
        return done

    t0 = time.time()
    with concurrent.futures.ThreadPoolExecutor(jobs) as ex:
        done = [d for part in ex.map(do, variants) for d in part]
    print(f"conformance: {len(chosen)} cases of {len(PARAMS)} operators, "
          f"{counts['skipped']} failing before conversion skipped, {len(done)} conversions "
          f"({time.time() - t0:.1f} s)")
    converted = {}
    t0 = time.time()
    for name, t, op, r in done:
        dst = os.path.join(conv_dir, name)
        if r.returncode == 0:
            out = onnx.load(os.path.join(dst, "model.onnx"))
            imp = {o.domain: o.version for o in out.opset_import}
            if imp.get("") != t:
                fail(f"{name}: imports {imp}")
            if t <= CHECKER_MAX:
                try:
                    onnx.checker.check_model(out, full_check=True)
                except Exception as e:  # noqa: BLE001
                    fail(f"{name}: onnx.checker: {e}")
            converted[name] = (t, op)
            continue
        shutil.rmtree(dst)
        msg = r.stderr.strip()
        if r.returncode != 1 or "node " not in msg or f"({op})" not in msg:
            fail(f"{name}: convert exit {r.returncode}: {msg!r}")
        else:
            counts["refused"] += 1
            if VERBOSE:
                print(f"refused {name}: {msg.split(': ', 1)[-1]}")
    print(f"  checker {time.time() - t0:.1f} s")
    t0 = time.time()
    results = test_folder(conv_dir, jobs)
    print(f"  tests {time.time() - t0:.1f} s")
    for name, (t, op) in converted.items():
        status, line = results.get(name, ("MISSING", name))
        if status == "PASS":
            counts["conformance"] += 1
        elif status == "FAIL" and f"is not supported at opset {t}" in line:
            counts["no_kernel"] += 1  # converted (and checked), but onnxexec runs no such op
        else:
            fail(f"{name}: {line}")
    # conversions that must have happened (the adapters' down paths on real test data)
    for name in ("test_split_variable_parts_2d_frozen_to2", "test_squeeze_frozen_to1",
                 "test_unsqueeze_axis_1_frozen_to1", "test_reduce_sum_keepdims_example_frozen_to1",
                 "test_reduce_mean_keepdims_example_to1", "test_clip_frozen_to6",
                 "test_constant_pad_frozen_to2", "test_slice_negative_axes_frozen_to1",
                 "test_top_k_frozen_to1", "test_resize_upsample_scales_nearest_to17",
                 "test_upsample_nearest_frozen_to17", "test_upsample_nearest_frozen_to7", "test_dropout_default_ratio_frozen_to7",
                 "test_batchnorm_example_to1", "test_split_equal_parts_1d_to18",
                 "test_resize_upsample_scales_linear_frozen_to18"):
        if name not in converted:
            fail(f"{name}: expected a conversion")


def main():
    global EXE, TMP, VERBOSE
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--onnxexec", required=True)
    ap.add_argument("--data", default="/usr/share/libonnx-testdata/data/node")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--keep", help="keep the work files in this folder")
    ap.add_argument("-k", help="only unit cases whose name has this substring")
    ap.add_argument("-v", "--verbose", action="store_true", help="show every refusal")
    args = ap.parse_args()
    VERBOSE = args.verbose
    EXE = os.path.abspath(args.onnxexec)
    TMP = args.keep or tempfile.mkdtemp(prefix="opset_convert.")
    if args.keep:
        shutil.rmtree(TMP, ignore_errors=True)
        os.makedirs(TMP)
    t0 = time.time()
    counts = {"unit": 0, "refused_ok": 0, "conformance": 0, "refused": 0, "skipped": 0,
              "no_kernel": 0}
    try:
        cases = [c for c in unit_cases(np.random.default_rng(0)) if not args.k or args.k in c.name]

        def one(case):
            try:
                check_case(case, counts)
            except Exception as e:  # noqa: BLE001 - any failure names the case
                fail(str(e) if isinstance(e, AssertionError) else f"{case.name}: {e!r}")

        with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as ex:
            list(ex.map(one, cases))
        print(f"unit part: {time.time() - t0:.1f} s")
        failures(counts)
        if os.path.isdir(args.data):
            conformance(args.data, max(1, args.jobs), counts)
        else:
            print(f"note: {args.data} not found: conformance part skipped")
    finally:
        if not args.keep:
            shutil.rmtree(TMP, ignore_errors=True)
    print(f"{counts['unit']} unit conversions checked, {counts['refused_ok']} refusals as "
          f"expected; conformance: {counts['conformance']} converted cases passed, "
          f"{counts['refused']} conversions refused with a message naming the node, "
          f"{counts['no_kernel']} converted to an op version onnxexec does not run; "
          f"{time.time() - t0:.1f} s")
    if FAILS:
        print(f"{len(FAILS)} failure(s)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
