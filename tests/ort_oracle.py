"""ONNX Runtime as a second oracle for generated cases: run the named cases of OUT (backend
layout) in onnxruntime-node and compare with their expected outputs. Shared by the
generated-case scripts' --ort-dir option (by hand: CI has no ONNX Runtime). Needs node and an
npm install of onnxruntime-node in ort_dir (tools/bench_compare.py makes one)."""
import json
import os
import subprocess

import numpy as np
from onnx import load_tensor, numpy_helper

ORT_JS = r"""
const fs = require('fs');
const ort = require(process.argv[2] + '/node_modules/onnxruntime-node');
(async () => {
  const res = {};
  for (const c of JSON.parse(fs.readFileSync(process.argv[3]))) {
    try {
      const feeds = {};
      for (const i of c.inputs) {
        if (i.dtype === 'string') {
          feeds[i.name] = new ort.Tensor('string', i.data, i.shape);
          continue;
        }
        const b = fs.readFileSync(i.file);
        const ab = b.buffer.slice(b.byteOffset, b.byteOffset + b.length);
        const T = {float32: Float32Array, float64: Float64Array, int64: BigInt64Array,
                   int32: Int32Array, uint8: Uint8Array, int8: Int8Array}[i.dtype];
        feeds[i.name] = new ort.Tensor(i.dtype, new T(ab), i.shape);
      }
      const s = await ort.InferenceSession.create(c.model);
      const r = await s.run(feeds);
      const o = {};
      for (const k of Object.keys(r))
        o[k] = Array.from(r[k].data, v => typeof v === 'bigint' ? Number(v) : v);
      res[c.name] = o;
    } catch (e) {
      res[c.name] = {error: e.message};
    }
  }
  console.log(JSON.stringify(res));
})().catch(e => { console.error(e.message); process.exit(1); });
"""


def _tensors(d, kind):
    k = 0
    while os.path.exists(os.path.join(d, "%s_%d.pb" % (kind, k))):
        t = load_tensor(os.path.join(d, "%s_%d.pb" % (kind, k)))
        yield k, t.name, numpy_helper.to_array(t)
        k += 1


def _strings(a):
    return [v.decode() if isinstance(v, bytes) else v for v in a.ravel()]


def compare(out, names, ort_dir):
    """Run cases `names` of `out` in ONNX Runtime; print one line each; return the failures.
    Strings and integers must be equal, floats within 1e-6 + 1e-4 |expected| (ONNX Runtime
    computes these operators in float: sums rounded in float, logistic of a negative score
    as 1 - v in float)."""
    meta = []
    for name in names:
        d = os.path.join(out, name, "test_data_set_0")
        ins = []
        for k, tname, a in _tensors(d, "input"):
            e = {"name": tname, "shape": list(a.shape)}
            if a.dtype == object:
                e.update(dtype="string", data=_strings(a))
            else:
                e.update(dtype=str(a.dtype), file=os.path.join(d, "in%d.bin" % k))
                a.tofile(e["file"])
            ins.append(e)
        meta.append({"name": name, "model": os.path.join(out, name, "model.onnx"), "inputs": ins})
    with open(os.path.join(out, "ort_meta.json"), "w") as f:
        json.dump(meta, f)
    with open(os.path.join(out, "ort.js"), "w") as f:
        f.write(ORT_JS)
    r = subprocess.run(["node", os.path.join(out, "ort.js"), os.path.abspath(ort_dir),
                        os.path.join(out, "ort_meta.json")], capture_output=True, text=True)
    if r.returncode:
        print("FAIL ONNX Runtime: " + r.stderr)
        return 1
    got = json.loads(r.stdout)
    failed = 0
    for name in names:
        if "error" in got[name]:
            print("FAIL ORT %s: %s" % (name, got[name]["error"]))
            failed += 1
            continue
        ok, worst = True, 0.0
        for _, tname, want in _tensors(os.path.join(out, name, "test_data_set_0"), "output"):
            have = got[name][tname]
            if want.dtype == object:
                ok &= _strings(want) == have
            elif want.dtype.kind in "iu":
                ok &= want.ravel().tolist() == have
            elif want.size:
                w = want.ravel().astype(np.float64)
                err = np.abs(np.array(have, np.float64) - w) / (1e-6 + 1e-4 * np.abs(w))
                worst = max(worst, float(err.max()))
                ok &= bool(err.max() < 1)
        print("%s ORT %s: largest difference %.2g of the allowed" % ("PASS" if ok else "FAIL",
                                                                     name, worst))
        failed += not ok
    return failed
