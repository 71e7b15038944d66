"""Write one ONNX backend-test case: OUT/NAME/model.onnx and test_data_set_0/{input,output}_k.pb
(the layout `onnxexec test` reads). Shared by the generated-case scripts, as is the check of
a model that must fail (expect_error)."""
import argparse
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def case_args(doc, ort=None):
    """The command line of a case script that writes its cases to OUTDIR (emptied first) and
    checks them with `onnxexec test`: OUTDIR --onnxexec BIN, and [--ort-dir DIR] (help: ort)
    where ort is given. Returns the parsed arguments."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("outdir")
    ap.add_argument("--onnxexec", required=True)
    if ort:
        ap.add_argument("--ort-dir", help=ort)
    args = ap.parse_args()
    shutil.rmtree(args.outdir, ignore_errors=True)
    return args


def write_case(out, name, model, inputs, outputs):
    """inputs, outputs: lists of (tensor name, numpy array), in the graph's order."""
    d = os.path.join(out, name, "test_data_set_0")
    os.makedirs(d)
    onnx.save(model, os.path.join(out, name, "model.onnx"))
    for kind, values in (("input", inputs), ("output", outputs)):
        for k, (tname, arr) in enumerate(values):
            with open(os.path.join(d, "%s_%d.pb" % (kind, k)), "wb") as f:
                f.write(numpy_helper.from_array(arr, tname).SerializeToString())


def op_count(exe, model, types):
    """How many nodes of the given op types `onnxexec info` lists for model after optimizing
    (types as info prints them: "QLinearConv", "ai.onnxexec.QLinearConv"); None if it fails."""
    r = subprocess.run([exe, "info", model], capture_output=True, text=True)
    if r.returncode:
        return None
    return sum(int(f[0]) for f in (line.split() for line in r.stdout.splitlines())
               if len(f) == 2 and f[1] in types)


def zipmap_type(strings):
    """The TypeProto of ZipMap's output: a sequence of maps from int64 or string to float."""
    return helper.make_sequence_type_proto(
        map_type(TensorProto.STRING if strings else TensorProto.INT64, TensorProto.FLOAT))


def map_proto(keys, values, name=""):
    """A MapProto of int64 or string keys and scalar values (numpy scalars: their type; str:
    strings), as the backend test data stores a map."""
    mp = onnx.MapProto(name=name)
    strings = isinstance(keys[0], str) if len(keys) else False
    mp.key_type = TensorProto.STRING if strings else TensorProto.INT64
    if strings:
        mp.string_keys.extend([k.encode() for k in keys])
    else:
        mp.keys.extend([int(k) for k in keys])
    mp.values.elem_type = 1  # tensors
    for v in values:
        mp.values.tensor_values.append(numpy_helper.from_array(
            np.array(v, dtype=object if isinstance(v, str) else None)))
    return mp


def seq_of_maps(name, labels, scores):
    """A SequenceProto of one MapProto per row of scores, labels -> float32 values (ZipMap's
    output as the backend test data stores it; python3-onnx 1.12 has no helper for it)."""
    seq = onnx.SequenceProto(name=name, elem_type=4)  # 4: map
    for row in scores:
        seq.map_values.append(map_proto(labels, [np.float32(v) for v in row]))
    return seq


def map_type(key_type, value_type):
    """The TypeProto of a map of scalar values (TensorProto element types)."""
    mt = onnx.TypeProto()
    mt.map_type.key_type = key_type
    mt.map_type.value_type.CopyFrom(helper.make_tensor_type_proto(value_type, []))
    return mt


def expect_error(exe, tag, model, x_pb, expect, extra=()):
    """`onnxexec run MODEL -i X=X_PB [EXTRA...]` must fail with `expect` in its message: prints
    PASS or FAIL bad/TAG and returns the number of failures (0 or 1). X_PB may also be a list
    of (input name, .pb path), one -i each."""
    inputs = [("X", x_pb)] if isinstance(x_pb, str) else x_pb
    r = subprocess.run([exe, "run", model] + [a for k, p in inputs for a in ("-i", k + "=" + p)] +
                       list(extra), capture_output=True, text=True)
    if r.returncode == 0 or expect not in r.stderr:
        print("FAIL bad/%s%s: rc %d, expected an error with %r, got: %s"
              % (tag, " " + " ".join(extra) if extra else "", r.returncode, expect,
                 r.stderr.strip()))
        return 1
    print("PASS bad/%s%s: %s" % (tag, " " + " ".join(extra) if extra else "",
                                 r.stderr.strip().splitlines()[-1]))
    return 0


def run_test(exe, d, extra, env=None):
    """`onnxexec test D --threads 2 EXTRA...` (environment env added): prints its summary line
    and the FAIL lines; returns the number of failures (0 or 1)."""
    r = subprocess.run([exe, "test", d, "--threads", "2"] + extra, capture_output=True,
                       text=True, env=dict(os.environ, **(env or {})))
    tail = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""
    print("onnxexec test %s %s%s: %s" % (os.path.basename(d), " ".join(extra),
                                         "".join(" %s=%s" % kv for kv in (env or {}).items()),
                                         tail))
    if not r.returncode:
        return 0
    sys.stdout.write("".join(l + "\n" for l in r.stdout.splitlines() if "FAIL" in l))
    sys.stdout.write(r.stderr)
    return 1
