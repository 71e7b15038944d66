#!/usr/bin/python3
"""Save a model as ONNX Runtime optimizes it, and check onnxexec on what it saved.

    tools/ort_saved.py MODEL OUT.onnx [--level basic|extended|all] [--ort-dir DIR]
                       [--check --onnxexec BIN [--seed N] [--shape NAME=d0,d1,...]...]

ONNX Runtime (onnxruntime-node from npm, CPU; installed into --ort-dir, default build/ort, with
its install script skipped, as tools/bench_compare.py does; never a dependency of onnxexec)
loads MODEL at graph optimization level --level (default extended) and writes the graph it
would run to OUT.onnx (SessionOptions.optimizedModelFilePath): the file a user gets from
`optimized_model_filepath`. Its operators: README, "Models ONNX Runtime optimized".

With --check, both runtimes run OUT.onnx on the same seeded random inputs (float inputs from
a standard normal, integer ones in [0, 100), dynamic dimensions 1 unless --shape says) and
the outputs are compared: relative L2 and the largest difference per output, and how many
values differ. ONNX Runtime runs the saved file with its optimizations off (it is already its
graph); onnxexec as it loads any model. Exit status 1 when onnxexec fails to run the model.
Needs /usr/bin/python3 with python3-onnx and numpy, node and npm.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_compare import ensure_ort  # noqa: E402

SAVE_JS = r"""
const ort = require(process.argv[2] + '/node_modules/onnxruntime-node');
ort.InferenceSession.create(process.argv[3], {graphOptimizationLevel: process.argv[5],
                                              optimizedModelFilePath: process.argv[4],
                                              executionProviders: ['cpu']})
  .catch(e => { console.error(e.message); process.exit(1); });
"""

RUN_JS = r"""
const fs = require('fs');
const ort = require(process.argv[2] + '/node_modules/onnxruntime-node');
(async () => {
  const meta = JSON.parse(fs.readFileSync(process.argv[4]));
  const s = await ort.InferenceSession.create(process.argv[3],
                                              {graphOptimizationLevel: 'disabled'});
  const feeds = {};
  for (const i of meta) {
    const b = fs.readFileSync(i.file);
    const ab = b.buffer.slice(b.byteOffset, b.byteOffset + b.length);
    const T = {float32: Float32Array, int64: BigInt64Array, int32: Int32Array,
               uint8: Uint8Array, int8: Int8Array}[i.dtype];
    feeds[i.name] = new ort.Tensor(i.dtype, new T(ab), i.shape);
  }
  const r = await s.run(feeds);
  const out = {};
  for (const k of s.outputNames) {
    const f = process.argv[5] + '/ort_' + s.outputNames.indexOf(k) + '.bin';
    fs.writeFileSync(f, Buffer.from(r[k].data.buffer, r[k].data.byteOffset, r[k].data.byteLength));
    out[k] = {file: f, type: r[k].type, dims: r[k].dims};
  }
  console.log(JSON.stringify(out));
})().catch(e => { console.error(e.message); process.exit(1); });
"""

NP = {1: np.float32, 7: np.int64, 6: np.int32, 2: np.uint8, 3: np.int8}


def safe(name):
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("out")
    ap.add_argument("--level", default="extended", choices=("basic", "extended", "all"))
    ap.add_argument("--ort-dir", default="build/ort")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--onnxexec", help="onnxexec binary (with --check)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--shape", action="append", default=[], help="NAME=d0,d1,... for --check")
    a = ap.parse_args()
    if a.check and not a.onnxexec:
        ap.error("--check needs --onnxexec")
    ensure_ort(a.ort_dir)
    ort_dir = os.path.abspath(a.ort_dir)
    work = tempfile.mkdtemp(prefix="ort_saved_")
    try:
        js = os.path.join(work, "save.js")
        with open(js, "w") as f:
            f.write(SAVE_JS)
        r = subprocess.run(["node", js, ort_dir, os.path.abspath(a.model), os.path.abspath(a.out),
                            a.level], capture_output=True, text=True)
        if r.returncode:
            sys.exit("ONNX Runtime could not load %s: %s" % (a.model, r.stderr.strip()))
        print("wrote %s (ONNX Runtime, level %s)" % (a.out, a.level))
        return check(a, ort_dir, work) if a.check else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


def check(a, ort_dir, work):
    import onnx
    from onnx import numpy_helper
    m = onnx.load(a.out, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    shapes = dict(s.split("=", 1) for s in a.shape)
    rng = np.random.default_rng(a.seed)
    meta, args = [], []
    for i in m.graph.input:
        if i.name in inits:
            continue
        tt = i.type.tensor_type
        if i.name in shapes:
            shape = [int(d) for d in shapes[i.name].split(",")]
        else:
            shape = [d.dim_value if d.dim_value > 0 else int(shapes.get(d.dim_param, 1))
                     for d in tt.shape.dim]
        dt = NP.get(tt.elem_type)
        if dt is None:
            sys.exit("input %s: element type %d not supported here" % (i.name, tt.elem_type))
        x = (rng.standard_normal(shape) if dt == np.float32
             else rng.integers(0, 100, shape)).astype(dt)
        raw = os.path.join(work, "in_%d.bin" % len(meta))
        x.tofile(raw)
        pb = os.path.join(work, "in_%d.pb" % len(meta))
        with open(pb, "wb") as f:
            f.write(numpy_helper.from_array(x, i.name).SerializeToString())
        meta.append({"name": i.name, "file": raw, "dtype": np.dtype(dt).name, "shape": shape})
        args += ["-i", "%s=%s" % (i.name, pb)]
    with open(os.path.join(work, "meta.json"), "w") as f:
        json.dump(meta, f)
    js = os.path.join(work, "run.js")
    with open(js, "w") as f:
        f.write(RUN_JS)
    r = subprocess.run(["node", js, ort_dir, os.path.abspath(a.out),
                        os.path.join(work, "meta.json"), work], capture_output=True, text=True)
    if r.returncode:
        sys.exit("ONNX Runtime could not run %s: %s" % (a.out, r.stderr.strip()))
    ort_out = json.loads(r.stdout)
    od = os.path.join(work, "onnxexec")
    r = subprocess.run([a.onnxexec, "run", a.out, "-o", od] + args, capture_output=True,
                       text=True)
    if r.returncode:
        print("onnxexec failed: " + r.stderr.strip())
        return 1
    for name, o in ort_out.items():
        want = np.fromfile(o["file"], {"float32": np.float32, "int64": np.int64,
                                       "int32": np.int32, "uint8": np.uint8,
                                       "int8": np.int8}[o["type"]]).astype(np.float64)
        got = np.load(os.path.join(od, safe(name) + ".npy")).ravel().astype(np.float64)
        if got.size != want.size:
            print("%s: %d values from onnxexec, %d from ONNX Runtime" % (name, got.size,
                                                                         want.size))
            return 1
        d = np.abs(got - want)
        norm = np.linalg.norm(want)
        rel = np.linalg.norm(got - want) / norm if norm else float(d.max(initial=0))
        print("%s %s: relative L2 %.3g, largest difference %.3g, %d of %d values differ"
              % (name, o["dims"], rel, d.max(initial=0), int((d > 0).sum()), d.size))
    return 0


if __name__ == "__main__":
    sys.exit(main())
