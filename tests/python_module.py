#!/usr/bin/python3
"""The Python module (python/onnxexec.py, ctypes over libonnxexec.so) with Debian's Python:
the shipped Fashion-MNIST CNN on its 1000 test images gives PyTorch's logits
(models/fashion_mnist_cnn.expected.npy) by name and by position, in one batch and one image
at a time, optimized or not; inputs and outputs are described; dtypes other than float32
go through (an int64/bool/float64 model made here, against numpy), string tensors and
ZipMap's sequence of maps come back as str arrays and dicts, and str arrays, dicts and lists
of dicts go in (LabelEncoder, DictVectorizer, CastMap); errors are exceptions
with the library's status and message (a missing file, a wrong shape, an unknown input
name); the memory plan's numbers are those of the tool's bench.

    tests/python_module.py --lib build/libonnxexec.so --source . [--module-dir DIR]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("--lib", help="libonnxexec.so to load (ONNXEXEC_LIB); default: the module's")
ap.add_argument("--source", required=True, help="the source tree (models/)")
ap.add_argument("--module-dir", help="where onnxexec.py is (default: SOURCE/python)")
ap.add_argument("--onnxexec", help="the tool, to compare memory numbers with bench")
args = ap.parse_args()
if args.lib:
    os.environ["ONNXEXEC_LIB"] = args.lib
sys.path.insert(0, args.module_dir or os.path.join(args.source, "python"))
import onnxexec  # noqa: E402

fails = 0


def check(cond, what):
    global fails
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        fails += 1


print("library:", onnxexec.LIBRARY, "version", onnxexec.version())
models = os.path.join(args.source, "models")
path = os.path.join(models, "fashion_mnist_cnn.onnx")
images = np.load(os.path.join(models, "fashion_mnist_test_images.npy"))
expected = np.load(os.path.join(models, "fashion_mnist_cnn.expected.npy"))

with onnxexec.Model(path) as m:
    check(m.inputs == [("image", np.dtype(np.float32), ("N", 1, 28, 28))],
          "inputs described: %s" % m.inputs)
    check(m.outputs == [("logits", np.dtype(np.float32), ("N", 10))],
          "outputs described: %s" % m.outputs)
    with m.session(threads=2) as s:
        (y,) = s.run({"image": images})
        err = np.abs(y - expected).max()
        check(y.shape == (1000, 10) and y.dtype == np.float32 and
              np.allclose(y, expected, rtol=1e-4, atol=1e-4),
              "1000 images by name: PyTorch's logits, max |diff| %.2g" % err)
        check((y.argmax(1) == expected.argmax(1)).all(), "the same predicted classes")
        ys = np.concatenate([s.run([images[i:i + 1]])[0] for i in range(0, 1000, 97)])
        check(np.allclose(ys, expected[::97], rtol=1e-4, atol=1e-4),
              "one image at a time, by position (a plan per shape)")
        mem = s.memory()
        check(0 < mem["lower_bound"] <= mem["arena"] <= mem["no_reuse"], "memory: %s" % mem)
        try:
            s.run({"image": images[:, :, :27]})
            check(False, "a wrong shape raises")
        except onnxexec.Error as e:
            check(e.status == "OX_E_SHAPE" and "28" in str(e), "a wrong shape raises: %s" % e)
        try:
            s.run({"picture": images[:1]})
            check(False, "an unknown input name raises")
        except onnxexec.Error as e:
            check(e.status == "OX_E_INVALID" and "picture" in str(e),
                  "an unknown input name raises: %s" % e)
        (again,) = s.run({"image": images[:4]})
        check(np.allclose(again, expected[:4], rtol=1e-4, atol=1e-4), "the session runs on after errors")
    if args.onnxexec:
        b = json.loads(subprocess.run([args.onnxexec, "bench", path, "--json", "--runs", "1",
                                       "--batch", "3"], capture_output=True, text=True,
                                      check=True).stdout)
        with m.session(threads=1) as s:
            s.run([images[:3]])
            mem = s.memory()
        check((mem["arena"], mem["no_reuse"], mem["lower_bound"]) ==
              (b["arena_bytes"], b["no_reuse_bytes"], b["lower_bound_bytes"]),
              "memory numbers at batch 3 are bench's")

with onnxexec.Model(path, optimize=False) as m:
    y = m.run([images[:50]])[0]
    check(np.allclose(y, expected[:50], rtol=1e-4, atol=1e-4), "optimize=False: the same logits")

try:
    onnxexec.Model(os.path.join(models, "no_such_model.onnx"))
    check(False, "a missing file raises")
except onnxexec.Error as e:
    check(e.status == "OX_E_IO" and "no_such_model.onnx" in str(e), "a missing file raises: %s" % e)

# other dtypes, two outputs
try:
    import onnx
    from onnx import TensorProto, helper
    g = helper.make_graph(
        [helper.make_node("Add", ["a", "b"], ["s"]),
         helper.make_node("Greater", ["s", "c"], ["g"]),
         helper.make_node("Cast", ["a"], ["d"], to=TensorProto.DOUBLE)],
        "types",
        [helper.make_tensor_value_info("a", TensorProto.INT64, [2, 3]),
         helper.make_tensor_value_info("b", TensorProto.INT64, [3]),
         helper.make_tensor_value_info("c", TensorProto.INT64, [])],
        [helper.make_tensor_value_info("s", TensorProto.INT64, [2, 3]),
         helper.make_tensor_value_info("g", TensorProto.BOOL, [2, 3]),
         helper.make_tensor_value_info("d", TensorProto.DOUBLE, [2, 3])])
    with tempfile.TemporaryDirectory() as tmp:
        p = os.path.join(tmp, "types.onnx")
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), p)
        a = np.arange(6, dtype=np.int64).reshape(2, 3) - 2
        b = np.array([10, -20, 30], np.int64)
        c = np.array(5, np.int64)
        with onnxexec.Model(p) as m:
            s_, g_, d_ = m.run({"a": a, "b": b, "c": c})
        check(s_.dtype == np.int64 and np.array_equal(s_, a + b), "int64 Add: numpy's")
        check(g_.dtype == np.bool_ and np.array_equal(g_, a + b > c), "bool Greater: numpy's")
        check(d_.dtype == np.float64 and np.array_equal(d_, a.astype(np.float64)),
              "Cast to float64: numpy's")
    # string tensors and maps: a classifier's labels and ZipMap's sequence of maps
    mt = onnx.TypeProto()
    mt.map_type.key_type = TensorProto.STRING
    mt.map_type.value_type.CopyFrom(helper.make_tensor_type_proto(TensorProto.FLOAT, []))
    ml = dict(domain="ai.onnx.ml")
    g = helper.make_graph(
        [helper.make_node("LinearClassifier", ["x"], ["label", "scores"], **ml,
                          coefficients=[1.0, 0.0, 0.0, 1.0], classlabels_strings=["cat", "dog"]),
         helper.make_node("ZipMap", ["scores"], ["probs"], **ml, classlabels_strings=["cat", "dog"])],
        "zipmap", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 2])],
        [helper.make_tensor_value_info("label", TensorProto.STRING, [None]),
         helper.make_value_info("probs", helper.make_sequence_type_proto(mt))])
    with tempfile.TemporaryDirectory() as tmp:
        p = os.path.join(tmp, "zipmap.onnx")
        onnx.save(helper.make_model(g, ir_version=8, opset_imports=[
            helper.make_opsetid("", 13), helper.make_opsetid("ai.onnx.ml", 1)]), p)
        with onnxexec.Model(p) as m:
            label, probs = m.run([np.array([[0.25, 0.5], [2.0, -1.0]], np.float32)])
        check(label.dtype == object and label.tolist() == ["dog", "cat"],
              "string labels: %s" % label.tolist())
        check(probs == [{"cat": 0.25, "dog": 0.5}, {"cat": 2.0, "dog": -1.0}],
              "ZipMap: a list of dicts: %s" % probs)
    # string tensors and maps in: a LabelEncoder on str arrays; a dict (its values as the
    # model's float) and a list of dicts through DictVectorizer; a dict of strings to CastMap
    def small(name, node, in_type, out_type):
        g = helper.make_graph([node], name, [helper.make_value_info("x", in_type)],
                              [helper.make_tensor_value_info("y", out_type, None)])
        p = os.path.join(tmp, name + ".onnx")
        onnx.save(helper.make_model(g, ir_version=8, opset_imports=[
            helper.make_opsetid("", 13), helper.make_opsetid("ai.onnx.ml", 2)]), p)
        return p

    seq_mt = helper.make_sequence_type_proto(mt)
    imt = onnx.TypeProto()
    imt.map_type.key_type = TensorProto.INT64
    imt.map_type.value_type.CopyFrom(helper.make_tensor_type_proto(TensorProto.STRING, []))
    with tempfile.TemporaryDirectory() as tmp:
        le = small("le", helper.make_node("LabelEncoder", ["x"], ["y"], **ml,
                                          keys_strings=["a", "b"], values_int64s=[7, 8]),
                   helper.make_tensor_type_proto(TensorProto.STRING, [None]), TensorProto.INT64)
        dv = small("dv", helper.make_node("DictVectorizer", ["x"], ["y"], **ml,
                                          string_vocabulary=["cat", "dog", "eel"]),
                   mt, TensorProto.FLOAT)
        dvs = small("dvs", helper.make_node("DictVectorizer", ["x"], ["y"], **ml,
                                            string_vocabulary=["cat", "dog"]),
                    seq_mt, TensorProto.FLOAT)
        cm = small("cm", helper.make_node("CastMap", ["x"], ["y"], **ml), imt, TensorProto.FLOAT)
        with onnxexec.Model(le) as m:
            (y,) = m.run([np.array(["b", "a", "zz", "b"], dtype=object)])
        check(y.tolist() == [8, 7, -1, 8], "a str array in: %s" % y.tolist())
        with onnxexec.Model(dv) as m:
            (y,) = m.run({"x": {"eel": 3, "cat": 0.5}})
        check(y.dtype == np.float32 and y.tolist() == [[0.5, 0.0, 3.0]],
              "a dict in (int values as float): %s" % y.tolist())
        with onnxexec.Model(dvs) as m:
            (y,) = m.run([[{"dog": 1.5}, {}, {"cat": -2.0, "dog": 4.0}]])
        check(y.tolist() == [[0, 1.5], [0, 0], [-2, 4]], "a list of dicts in: %s" % y.tolist())
        with onnxexec.Model(cm) as m:
            (y,) = m.run([{3: "0.25", 1: "-4"}])
        check(y.tolist() == [[-4.0, 0.25]], "a dict of strings in: %s" % y.tolist())
except ImportError:
    print("skip the dtype model: the onnx package is not installed")

# session options reach the library whole (the struct once lacked batch_split and device):
# a device the library does not know is refused by name; the CPU by name runs
with onnxexec.Model(path) as m:
    try:
        m.session(device="tpu")
        check(False, "device 'tpu': refused")
    except onnxexec.Error as e:
        check("unknown device 'tpu'" in str(e), "device 'tpu': %s" % e)
    with m.session(threads=1, device="cpu") as s:
        check(np.allclose(s.run([images[:2]])[0], m.run([images[:2]])[0]), "device='cpu' runs")
        d = s.device()
        check(d["device"] == "cpu" and d["device_steps"] == 0 and d["cpu_steps"] > 0 and
              not d["graph_replay"], "device(): %s" % d)
    try:
        m.session(precision="fp8")
        check(False, "precision 'fp8': refused")
    except ValueError:
        pass

# model options reach the library whole (the limits' struct once had three fields too many,
# which the device after it would have been read past): a device name the library does not
# know fails the load by name; a model loaded for a GPU needs none to load, runs on the CPU
# as the unoptimized graph does, and its sessions default to the GPU
try:
    onnxexec.Model(path, device="tpu")
    check(False, "Model(device='tpu'): refused")
except onnxexec.Error as e:
    check("unknown device 'tpu'" in str(e), "Model(device='tpu'): %s" % e)
with onnxexec.Model(path, device="cuda") as m, onnxexec.Model(path, optimize=False) as m0:
    with m.session(threads=1, device="cpu") as s:
        got, want = s.run([images[:2]])[0], m0.run([images[:2]])[0]
        check(np.allclose(got, want, rtol=1e-4, atol=1e-5), "loaded for cuda, run on the CPU")
    try:
        with m.session() as s:
            d = s.device()
            check(d["device"].startswith("cuda:0"), "the session on the model's device: %s" % d)
    except onnxexec.Error as e:  # no GPU here, or a build without CUDA
        check(str(e).startswith("OX_E_DEVICE"), "the session on the model's device: %s" % e)

# sessions left open: the model's close (or the interpreter's exit) closes them first
m = onnxexec.Model(path)
s1, s2 = m.session(), m.session()
s1.run([images[:2]])
m.close()
check(not s1._h and not s2._h, "closing a model closes its sessions")
r = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, %r); import numpy as np, "
                    "onnxexec; m = onnxexec.Model(%r); s = m.session(); "
                    "s.run([np.zeros((1, 1, 28, 28), np.float32)]); print('done')"
                    % (os.path.dirname(onnxexec.__file__), path)], capture_output=True, text=True)
check(r.returncode == 0 and r.stdout.strip() == "done" and not r.stderr,
      "objects left for the interpreter's exit: a clean exit (%d, %r)" % (r.returncode, r.stderr[-200:]))

print("%d failed" % fails if fails else "all passed")
sys.exit(1 if fails else 0)
