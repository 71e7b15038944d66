#!/usr/bin/python3
"""The ONNX exporter through `onnxexec convert`, checked against the onnx package.

    tests/export.py --onnxexec build/onnxexec [--keep DIR] [--large]

1. Fidelity: models written with onnx.helper in the form the exporter writes (raw_data
   tensors, canonical order) come back from `onnxexec convert` as the same ModelProto
   (compared as protobuf messages): doc strings, metadata_props, model domain and version,
   producer, opset imports, symbolic dims, value_info, every attribute kind (float, int,
   string, tensor, sparse tensor, graph, floats, ints, strings, tensors, type proto),
   subgraphs with outer-scope names, sequence and optional values, initializers that are
   also inputs. onnx.checker (full check) accepts every file written.
2. Normalisation: what the IR does not keep comes back in its canonical form and means the
   same (typed tensor fields become raw_data, local functions are inlined, sparse
   initializers are re-encoded with 2-D indices): same outputs from `onnxexec run`.
3. External data: --external-data puts tensors over the threshold in a side file, at
   aligned offsets; onnx.load reads the same arrays back; converting again is
   byte-identical; a model read from external data converts back to one file.
4. Bad input: no partial file on failure (an existing output stays as it was, no
   temporary file is left), clear errors for an external file outside the folder, a
   missing output folder, an ai.onnxexec-only graph written with --optimize=all reads back
   in onnxexec.
5. --large: a 2.5 GiB model (ten 8192 x 8192 MatMuls, written straight to external data)
   converted without --external-data: the exporter must notice protobuf's 2 GiB limit and
   write external data itself; the result runs bit-identically to the original. The files
   are removed afterwards.

Standard library + numpy + onnx (Debian's python3-onnx). Exits 1 on any failure.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

FAILURES = []


def check(cond, what):
    if cond:
        print("ok   " + what)
    else:
        print("FAIL " + what)
        FAILURES.append(what)
    return cond


def run(cmd, expect_rc=0):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if expect_rc is not None and r.returncode != expect_rc:
        print("  command: %s\n  exit %d\n  stdout: %s\n  stderr: %s"
              % (" ".join(cmd), r.returncode, r.stdout[-2000:], r.stderr[-2000:]))
    return r


def convert(exe, src, dst, *opts, expect_rc=0):
    return run([exe, "convert", src, dst] + list(opts), expect_rc)


def full_check(path, what):
    try:
        onnx.checker.check_model(onnx.load(path), full_check=True)
        return check(True, "onnx.checker accepts " + what)
    except Exception as e:  # the message says why
        print("  " + " ".join(str(e).split())[:500])
        return check(False, "onnx.checker accepts " + what)


def run_outputs(exe, model, inputs, work):
    """Outputs of `onnxexec run` on the given inputs, as written with --format pb:
    {name: (file bytes, array or None)}; arrays for tensors."""
    d = tempfile.mkdtemp(dir=work)
    args = [exe, "run", model, "-o", os.path.join(d, "out"), "--format", "pb", "--threads", "1"]
    for name, arr in inputs.items():
        p = os.path.join(d, name + ".npy")
        np.save(p, arr)
        args += ["-i", "%s=%s" % (name, p)]
    r = run(args)
    if r.returncode:
        return None
    out = {}
    od = os.path.join(d, "out")
    for f in sorted(os.listdir(od)):
        if f.endswith(".pb"):
            raw = open(os.path.join(od, f), "rb").read()
            arr = None
            try:
                t = TensorProto()
                t.ParseFromString(raw)
                arr = numpy_helper.to_array(t)
            except Exception:
                pass  # a sequence or optional: compared by its bytes
            out[f[:-3]] = (raw, arr)
    return out


def same_outputs(a, b):
    """The same outputs, bit for bit (the serialized tensors are equal)."""
    if a is None or b is None or sorted(a) != sorted(b):
        return False
    return all(a[k][0] == b[k][0] for k in a)


# ---- 1. fidelity ------------------------------------------------------------------------

def rich_model():
    """A model that uses what the IR keeps, written the way the exporter writes it."""
    rng = np.random.default_rng(5)
    W = numpy_helper.from_array(rng.standard_normal((4, 3)).astype(np.float32), "W")
    b = numpy_helper.from_array(rng.standard_normal(3).astype(np.float32), "b")
    scale = numpy_helper.from_array(np.array(2.0, np.float32), "scale")  # also an input
    cond_t = numpy_helper.from_array(np.array(True), "cond")
    then_g = helper.make_graph(
        [helper.make_node("Mul", ["h", "scale"], ["t_out"], name="then_mul")], "then_branch",
        [], [helper.make_tensor_value_info("t_out", TensorProto.FLOAT, ["N", 3])])
    else_g = helper.make_graph(
        [helper.make_node("Neg", ["h"], ["e_out"], name="else_neg", doc_string="negate")],
        "else_branch", [], [helper.make_tensor_value_info("e_out", TensorProto.FLOAT, ["N", 3])])
    const_t = numpy_helper.from_array(np.arange(6, dtype=np.int64).reshape(2, 3), "ct")
    strs = numpy_helper.from_array(np.array([b"a", b"bc"], dtype=object), "st")
    nodes = [
        helper.make_node("MatMul", ["X", "W"], ["mm"], name="matmul", doc_string="x times w"),
        helper.make_node("Add", ["mm", "b"], ["h"], name="bias"),
        helper.make_node("If", ["cond"], ["y_if"], name="branch", then_branch=then_g,
                         else_branch=else_g),
        helper.make_node("LeakyRelu", ["y_if"], ["Y"], name="leaky", alpha=0.25),
        helper.make_node("Constant", [], ["c_int"], name="c0", value=const_t),
        helper.make_node("Constant", [], ["c_str"], name="c1", value=strs),
        helper.make_node("Constant", [], ["c_floats"], name="c3", value_floats=[0.5, 1.5]),
        helper.make_node("Constant", [], ["c_ints"], name="c4", value_ints=[3, -4, 5]),
        helper.make_node("Constant", [], ["c_string"], name="c5", value_string="hello"),
        helper.make_node("Constant", [], ["c_strings"], name="c6", value_strings=["x", "yz"]),
        helper.make_node("Constant", [], ["c_float"], name="c7", value_float=3.25),
        helper.make_node("Constant", [], ["c_int1"], name="c8", value_int=-7),
        helper.make_node("SequenceConstruct", ["X", "X"], ["seq"], name="seqc"),
        helper.make_node("Optional", [], ["opt_none"], name="opt",
                         type=helper.make_tensor_type_proto(TensorProto.FLOAT, [2])),
        helper.make_node("OptionalHasElement", ["opt_none"], ["has"], name="has_elem"),
        helper.make_node("Cast", ["c_int"], ["c_int_f"], name="cast", to=TensorProto.FLOAT),
    ]
    graph = helper.make_graph(
        nodes, "rich", [
            helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 4]),
            helper.make_tensor_value_info("scale", TensorProto.FLOAT, []),
        ], [
            helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["N", 3]),
            helper.make_tensor_value_info("c_int_f", TensorProto.FLOAT, [2, 3]),
            helper.make_tensor_value_info("c_str", TensorProto.STRING, [2]),
            helper.make_tensor_value_info("c_floats", TensorProto.FLOAT, [2]),
            helper.make_tensor_value_info("c_ints", TensorProto.INT64, [3]),
            helper.make_tensor_value_info("c_string", TensorProto.STRING, []),
            helper.make_tensor_value_info("c_strings", TensorProto.STRING, [2]),
            helper.make_tensor_value_info("c_float", TensorProto.FLOAT, []),
            helper.make_tensor_value_info("c_int1", TensorProto.INT64, []),
            helper.make_value_info("seq", helper.make_sequence_type_proto(
                helper.make_tensor_type_proto(TensorProto.FLOAT, ["N", 4]))),
            helper.make_tensor_value_info("has", TensorProto.BOOL, []),
        ], [W, b, scale, cond_t], doc_string="graph doc",
        value_info=[helper.make_tensor_value_info("mm", TensorProto.FLOAT, ["N", 3]),
                    helper.make_tensor_value_info("h", TensorProto.FLOAT, ["N", 3])])
    m = helper.make_model(graph, producer_name="export-test", producer_version="1.2",
                          doc_string="model doc", domain="org.example", model_version=42,
                          opset_imports=[helper.make_opsetid("", 16),
                                         helper.make_opsetid("ai.onnx.ml", 3)])
    m.ir_version = 8
    helper.set_model_props(m, {"author": "tests", "licence": "MIT"})
    return m


def sparse_attr_model():
    """A Constant with a sparse_value (which onnxexec reads but does not run)."""
    sparse = helper.make_sparse_tensor(
        numpy_helper.from_array(np.array([1.5, -2.0], np.float32), "sv"),
        numpy_helper.from_array(np.array([[0, 1], [1, 2]], np.int64), ""), [2, 3])
    g = helper.make_graph(
        [helper.make_node("Constant", [], ["c"], name="c2", sparse_value=sparse)], "sparse_attr",
        [], [helper.make_value_info("c", helper.make_sparse_tensor_type_proto(
            TensorProto.FLOAT, [2, 3]))])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 16)])
    m.ir_version = 8
    return m


def test_fidelity(exe, work):
    m = sparse_attr_model()
    src, dst = os.path.join(work, "sp.onnx"), os.path.join(work, "sp_out.onnx")
    onnx.save(m, src)
    r = convert(exe, src, dst)
    check(r.returncode == 0 and onnx.load(dst) == m,
          "a sparse tensor attribute and a sparse tensor output come back as they were")
    m = rich_model()
    onnx.checker.check_model(m, full_check=True)
    src = os.path.join(work, "rich.onnx")
    dst = os.path.join(work, "rich_out.onnx")
    onnx.save(m, src)
    r = convert(exe, src, dst)
    if not check(r.returncode == 0, "convert writes a model that uses every attribute kind"):
        return
    back = onnx.load(dst)
    same = back == m
    if not same:
        for field in ("ir_version", "producer_name", "producer_version", "domain",
                      "model_version", "doc_string", "opset_import", "metadata_props"):
            if getattr(back, field) != getattr(m, field):
                print("  differs: %s: %r vs %r" % (field, getattr(back, field),
                                                   getattr(m, field)))
        for field in ("node", "initializer", "sparse_initializer", "input", "output",
                      "value_info", "name", "doc_string"):
            a, b = getattr(back.graph, field), getattr(m.graph, field)
            if a != b:
                print("  differs: graph.%s:\n    exported %s\n    original %s"
                      % (field, str(a)[:1500], str(b)[:1500]))
    check(same, "the exported ModelProto equals the original, field for field")
    full_check(dst, "the exported model")
    X = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    check(same_outputs(run_outputs(exe, src, {"X": X}, work),
                       run_outputs(exe, dst, {"X": X}, work)),
          "original and exported model give the same outputs, bit for bit")
    again = os.path.join(work, "rich_again.onnx")
    convert(exe, dst, again)
    check(open(again, "rb").read() == open(dst, "rb").read(),
          "converting the converted model again gives the same bytes")


# ---- 2. normalisation -------------------------------------------------------------------

def test_normalised(exe, work):
    rng = np.random.default_rng(2)
    W = rng.standard_normal((4, 4)).astype(np.float32)
    # float_data instead of raw_data, a sparse initializer, a local function
    Wt = helper.make_tensor("W", TensorProto.FLOAT, [4, 4], W.flatten().tolist())
    S = helper.make_sparse_tensor(
        helper.make_tensor("S", TensorProto.FLOAT, [3], [1.0, 2.0, 3.0]),
        helper.make_tensor("", TensorProto.INT64, [3], [0, 5, 15]), [4, 4])
    fn = helper.make_function(
        "local", "AddTwice", ["a", "b"], ["c"],
        [helper.make_node("Add", ["a", "b"], ["t"]), helper.make_node("Add", ["t", "b"], ["c"])],
        [helper.make_opsetid("", 15)])
    g = helper.make_graph(
        [helper.make_node("MatMul", ["X", "W"], ["m"]),
         helper.make_node("AddTwice", ["m", "S"], ["Y"], domain="local")],
        "norm", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [4, 4])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [4, 4])], [Wt])
    g.sparse_initializer.extend([S])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 15),
                                            helper.make_opsetid("local", 1)],
                          functions=[fn])
    m.ir_version = 8
    src, dst = os.path.join(work, "norm.onnx"), os.path.join(work, "norm_out.onnx")
    onnx.save(m, src)
    if not check(convert(exe, src, dst).returncode == 0,
                 "convert reads typed fields, sparse initializers and local functions"):
        return
    back = onnx.load(dst)
    check(len(back.functions) == 0 and [n.op_type for n in back.graph.node] ==
          ["MatMul", "Add", "Add"], "the local function is written inlined")
    check(back.graph.initializer[0].HasField("raw_data") and
          np.array_equal(numpy_helper.to_array(back.graph.initializer[0]), W),
          "a float_data tensor is written as raw_data with the same values")
    sp = back.graph.sparse_initializer
    dense = np.zeros(16, np.float32)
    dense[[0, 5, 15]] = [1, 2, 3]
    ok = len(sp) == 1 and list(sp[0].dims) == [4, 4]
    if ok:
        vals = numpy_helper.to_array(sp[0].values)
        idx = numpy_helper.to_array(sp[0].indices)
        got = np.zeros((4, 4), np.float32)
        got[idx[:, 0], idx[:, 1]] = vals
        ok = np.array_equal(got.flatten(), dense)
    check(ok, "the sparse initializer stays sparse (COO, 2-D indices), same values")
    # (no onnx.checker here: ONNX types a sparse initializer as a sparse tensor, which Add
    # does not take; onnxexec densifies it)
    X = rng.standard_normal((4, 4)).astype(np.float32)
    a = run_outputs(exe, src, {"X": X}, work)
    b = run_outputs(exe, dst, {"X": X}, work)
    check(same_outputs(a, b), "normalised model: same outputs, bit for bit")
    want = X.astype(np.float64) @ W + 2 * dense.reshape(4, 4)
    check(a is not None and np.allclose(a["Y"][1], want, rtol=1e-5, atol=1e-5),
          "normalised model agrees with numpy")


# ---- 3. external data -------------------------------------------------------------------

def mlp(rng, sizes, name):
    inits, nodes, prev = [], [], "X"
    for i in range(len(sizes) - 1):
        w = (rng.standard_normal((sizes[i], sizes[i + 1])) / np.sqrt(sizes[i])).astype(np.float32)
        bias = rng.standard_normal(sizes[i + 1]).astype(np.float32)
        inits += [numpy_helper.from_array(w, "w%d" % i), numpy_helper.from_array(bias, "b%d" % i)]
        nodes += [helper.make_node("Gemm", [prev, "w%d" % i, "b%d" % i], ["g%d" % i]),
                  helper.make_node("Relu", ["g%d" % i], ["r%d" % i])]
        prev = "r%d" % i
    nodes[-1].output[0] = "Y"
    g = helper.make_graph(nodes, name,
                          [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", sizes[0]])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT,
                                                         ["N", sizes[-1]])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    return m


def test_external(exe, work):
    rng = np.random.default_rng(3)
    m = mlp(rng, [300, 600, 10], "ext")
    src = os.path.join(work, "ext.onnx")
    onnx.save(m, src)
    d = os.path.join(work, "extout")
    os.makedirs(d)
    dst = os.path.join(d, "ext.onnx")
    r = convert(exe, src, dst, "--external-data", "--external-threshold", "2000")
    if not check(r.returncode == 0, "convert --external-data"):
        return
    check(sorted(os.listdir(d)) == ["ext.onnx", "ext.onnx.data"],
          "the side file is ext.onnx.data, nothing else is left in the folder")
    back = onnx.load(dst, load_external_data=False)
    ext = {t.name: {e.key: e.value for e in t.external_data} for t in back.graph.initializer
           if t.data_location == TensorProto.EXTERNAL}
    sizes = {t.name: numpy_helper.to_array(t).nbytes for t in m.graph.initializer}
    want_ext = sorted(k for k, v in sizes.items() if v >= 2000)
    check(sorted(ext) == want_ext, "exactly the tensors of 2000 bytes or more are external (%s)"
          % ", ".join(want_ext))
    aligned = all(int(e["offset"]) % (4096 if int(e["length"]) >= 1 << 20 else 64) == 0 and
                  e["location"] == "ext.onnx.data" for e in ext.values())
    check(aligned, "offsets are aligned (64 bytes; 4096 from 1 MiB) and locations relative")
    loaded = onnx.load(dst)
    check(all(np.array_equal(numpy_helper.to_array(a), numpy_helper.to_array(b))
              for a, b in zip(sorted(loaded.graph.initializer, key=lambda t: t.name),
                              sorted(m.graph.initializer, key=lambda t: t.name))),
          "onnx.load reads the same weights back from the external data")
    full_check(dst, "the model with external data")
    X = rng.standard_normal((5, 300)).astype(np.float32)
    check(same_outputs(run_outputs(exe, src, {"X": X}, work), run_outputs(exe, dst, {"X": X}, work)),
          "the model with external data gives the same outputs, bit for bit")
    d2 = os.path.join(work, "extout2")
    os.makedirs(d2)
    dst2 = os.path.join(d2, "ext.onnx")
    convert(exe, dst, dst2, "--external-data", "--external-threshold", "2000")
    check(open(dst, "rb").read() == open(dst2, "rb").read() and
          open(dst + ".data", "rb").read() == open(dst2 + ".data", "rb").read(),
          "converting again with external data: the same bytes in both files")
    inline = os.path.join(work, "ext_inline.onnx")
    convert(exe, dst, inline)
    back = onnx.load(inline, load_external_data=False)
    check(all(t.data_location != TensorProto.EXTERNAL for t in back.graph.initializer) and
          not os.path.exists(inline + ".data"), "without --external-data, one file again")
    named = os.path.join(d, "named.onnx")
    r = convert(exe, src, named, "--external-file", "weights/all.bin", expect_rc=1)
    check(r.returncode == 1 and "cannot create" in r.stderr and not os.path.exists(named),
          "--external-file in a missing subfolder is a clear error, and nothing is written")
    os.makedirs(os.path.join(d, "weights"))
    convert(exe, src, named, "--external-file", "weights/all.bin")
    locs = {e.value for t in onnx.load(named, load_external_data=False).graph.initializer
            for e in t.external_data if e.key == "location"}
    check(locs == {"weights/all.bin"} and
          same_outputs(run_outputs(exe, src, {"X": X}, work), run_outputs(exe, named, {"X": X}, work)),
          "--external-file weights/all.bin: written there, named so, same outputs")


# ---- 4. bad input -----------------------------------------------------------------------

def test_bad(exe, work):
    m = mlp(np.random.default_rng(4), [8, 8], "bad")
    src = os.path.join(work, "bad.onnx")
    onnx.save(m, src)
    d = os.path.join(work, "badout")
    os.makedirs(d)
    dst = os.path.join(d, "out.onnx")
    with open(dst, "wb") as f:
        f.write(b"previous contents")
    r = convert(exe, src, dst, "--external-file", "../escape.data", expect_rc=1)
    check(r.returncode == 1 and "relative path inside" in r.stderr,
          "an external file outside the model's folder is refused: %s" % r.stderr.strip()[:200])
    check(open(dst, "rb").read() == b"previous contents" and sorted(os.listdir(d)) == ["out.onnx"],
          "after a failed convert the old output is intact and no temporary file is left")
    r = convert(exe, src, os.path.join(work, "no", "such", "dir", "x.onnx"), expect_rc=1)
    check(r.returncode == 1 and "cannot create" in r.stderr,
          "a missing output folder is a clear error: %s" % r.stderr.strip()[:200])
    r = convert(exe, src, d, expect_rc=2)
    check(r.returncode == 2 and "folder" in r.stderr, "an output that is a folder is refused")
    r = convert(exe, src, dst, "--optimize=fast", expect_rc=2)
    check(r.returncode == 2, "an unknown --optimize level is refused")
    # the fused graph: ai.onnxexec ops, imported as such by onnxexec; the standard one: no
    opt_all, opt_std = os.path.join(work, "all.onnx"), os.path.join(work, "std.onnx")
    convert(exe, src, opt_all, "--optimize=all")
    convert(exe, src, opt_std, "--optimize")
    a, s = onnx.load(opt_all), onnx.load(opt_std)
    check(any(n.domain == "ai.onnxexec" for n in a.graph.node) and
          any(o.domain == "ai.onnxexec" for o in a.opset_import),
          "--optimize=all writes ai.onnxexec ops and imports their domain")
    check(all(n.domain == "" for n in s.graph.node), "--optimize writes standard ops only")
    full_check(opt_std, "the --optimize model")
    X = np.random.default_rng(6).standard_normal((2, 8)).astype(np.float32)
    ref = run_outputs(exe, src, {"X": X}, work)
    check(same_outputs(ref, run_outputs(exe, opt_all, {"X": X}, work)),
          "the --optimize=all model runs in onnxexec with the same outputs as the original")


def test_opset_then_optimize(exe, work):
    """--opset and --optimize together: the opset is converted first, so a LayerNormalization
    found by the optimizer is opset 17's standard op in an opset-17 file."""
    rng = np.random.default_rng(8)
    inits = [numpy_helper.from_array(rng.standard_normal(16).astype(np.float32), "gamma"),
             numpy_helper.from_array(rng.standard_normal(16).astype(np.float32), "beta"),
             numpy_helper.from_array(np.array(2.0, np.float32), "two"),
             numpy_helper.from_array(np.array(1e-5, np.float32), "eps")]
    nodes = [helper.make_node("ReduceMean", ["X"], ["m"], axes=[-1]),
             helper.make_node("Sub", ["X", "m"], ["d"]), helper.make_node("Pow", ["d", "two"], ["p"]),
             helper.make_node("ReduceMean", ["p"], ["v"], axes=[-1]),
             helper.make_node("Add", ["v", "eps"], ["ve"]), helper.make_node("Sqrt", ["ve"], ["sd"]),
             helper.make_node("Div", ["d", "sd"], ["n"]), helper.make_node("Mul", ["n", "gamma"], ["g"]),
             helper.make_node("Add", ["g", "beta"], ["Y"])]
    g = helper.make_graph(nodes, "ln", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [3, 16])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [3, 16])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 7
    src, dst = os.path.join(work, "ln14.onnx"), os.path.join(work, "ln17.onnx")
    onnx.save(m, src)
    r = convert(exe, src, dst, "--opset", "17", "--optimize")
    if not check(r.returncode == 0, "convert --opset 17 --optimize on an opset-14 model"):
        return
    out = onnx.load(dst)
    check([o.version for o in out.opset_import if o.domain == ""] == [17] and
          [n.op_type for n in out.graph.node] == ["LayerNormalization"],
          "the opset is raised first, then the LayerNormalization pattern becomes opset 17's op")
    full_check(dst, "the converted and optimized model")
    X = rng.standard_normal((3, 16)).astype(np.float32)
    a, b = run_outputs(exe, src, {"X": X}, work), run_outputs(exe, dst, {"X": X}, work)
    check(a is not None and b is not None and np.allclose(a["Y"][1], b["Y"][1], rtol=1e-5, atol=1e-5),
          "and computes what the original computes")


# ---- 5. over 2 GiB ----------------------------------------------------------------------

def test_large(exe, work):
    n, layers = 8192, 10  # 10 x 256 MiB of float32 weights: 2.5 GiB
    d = os.path.join(work, "large")
    os.makedirs(d)
    src = os.path.join(d, "big.onnx")
    inits, nodes, prev = [], [], "X"
    rng = np.random.default_rng(7)
    with open(os.path.join(d, "big.bin"), "wb") as f:
        for i in range(layers):
            w = (rng.standard_normal((n, n), dtype=np.float32) * np.float32(1 / np.sqrt(n)))
            off = f.tell()
            f.write(w.tobytes())
            t = TensorProto(name="w%d" % i, data_type=TensorProto.FLOAT, dims=[n, n],
                            data_location=TensorProto.EXTERNAL)
            for k, v in (("location", "big.bin"), ("offset", str(off)), ("length", str(w.nbytes))):
                e = t.external_data.add()
                e.key, e.value = k, v
            inits.append(t)
            nodes.append(helper.make_node("MatMul", [prev, "w%d" % i], ["h%d" % i]))
            prev = "h%d" % i
            del w
    nodes[-1].output[0] = "Y"
    g = helper.make_graph(nodes, "big", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, n])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, n])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    with open(src, "wb") as f:
        f.write(m.SerializeToString())
    del m, g, inits
    out_dir = os.path.join(d, "out")
    os.makedirs(out_dir)
    dst = os.path.join(out_dir, "big.onnx")
    r = convert(exe, src, dst)  # no --external-data: the exporter must see the 2 GiB limit
    if not check(r.returncode == 0, "a 2.5 GiB model converts"):
        return
    size = os.path.getsize(dst)
    data = dst + ".data"
    check(size < 1 << 20 and os.path.isfile(data) and os.path.getsize(data) >= layers * n * n * 4,
          "it is written with external data on its own (model %d bytes, data %d bytes)"
          % (size, os.path.getsize(data) if os.path.isfile(data) else 0))
    X = rng.standard_normal((1, n)).astype(np.float32)
    check(same_outputs(run_outputs(exe, src, {"X": X}, work), run_outputs(exe, dst, {"X": X}, work)),
          "the reloaded 2.5 GiB model gives the same outputs, bit for bit")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--onnxexec", required=True)
    p.add_argument("--keep", help="keep the files in this folder")
    p.add_argument("--large", action="store_true", help="also the 2.5 GiB model")
    args = p.parse_args()
    exe = os.path.abspath(args.onnxexec)
    work = args.keep or tempfile.mkdtemp(prefix="ox-export-")
    os.makedirs(work, exist_ok=True)
    try:
        test_fidelity(exe, work)
        test_normalised(exe, work)
        test_external(exe, work)
        test_bad(exe, work)
        test_opset_then_optimize(exe, work)
        if args.large:
            test_large(exe, work)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        elif args.large:
            shutil.rmtree(os.path.join(work, "large"), ignore_errors=True)
    if FAILURES:
        print("\n%d checks FAILED" % len(FAILURES))
        return 1
    print("\nall checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
