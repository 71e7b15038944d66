#!/usr/bin/python3
"""`onnxexec test --rel-l2 E`: floating-point outputs judged as a whole by their relative L2
error, with numpy's norms as the oracle.

    tests/rel_l2.py ONNXEXEC OUTDIR

A whole model's output differs from another runtime's in the last bits wherever sums are
ordered differently, and the elements near zero then fail any relative tolerance while the
output as a whole agrees to 1e-6. Each case is an Identity model (so onnxexec returns the
input exactly) whose expected output is the input with chosen errors added:

- small errors everywhere and a large relative error on elements near zero: FAIL
  element-wise, PASS with --rel-l2 just above numpy's relative L2, FAIL just below it;
  the FAIL line states the relative L2 as numpy computes it (3 significant digits);
- a NaN where the expected value is finite: FAIL even with a generous --rel-l2;
- NaN against NaN and +inf against +inf (excluded from the norms): PASS;
- an all-zero expectation: PASS only when the output is exactly zero;
- an int64 output off by one: FAIL whatever --rel-l2 says (integers are exact);
- float16 and float64 outputs (norms taken in float64 either way).
"""
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper

exe, out = sys.argv[1], sys.argv[2]
shutil.rmtree(out, ignore_errors=True)
rng = np.random.default_rng(5)
failures = []

ONNX_TYPE = {np.float32: onnx.TensorProto.FLOAT, np.float16: onnx.TensorProto.FLOAT16,
             np.float64: onnx.TensorProto.DOUBLE, np.int64: onnx.TensorProto.INT64}


def case(name, x, expected):
    """An Identity model fed x, expecting `expected` (same dtype and shape)."""
    d = os.path.join(out, name)
    os.makedirs(os.path.join(d, "test_data_set_0"))
    t = ONNX_TYPE[x.dtype.type]
    g = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], name,
                          [helper.make_tensor_value_info("x", t, x.shape)],
                          [helper.make_tensor_value_info("y", t, x.shape)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(m, os.path.join(d, "model.onnx"))
    for fname, arr, tname in (("input_0.pb", x, "x"), ("output_0.pb", expected, "y")):
        with open(os.path.join(d, "test_data_set_0", fname), "wb") as f:
            f.write(numpy_helper.from_array(arr, tname).SerializeToString())
    return d


def rel_l2(got, exp):
    g, e = got.astype(np.float64).ravel(), exp.astype(np.float64).ravel()
    fin = np.isfinite(e) & np.isfinite(g)
    return np.linalg.norm((g - e)[fin]) / np.linalg.norm(e[fin])


def run(d, *opts):
    r = subprocess.run([exe, "test", d] + list(opts), capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def expect(what, d, opts, want_pass, want_in=None):
    rc, text = run(d, *opts)
    ok = (rc == 0) == want_pass and (want_in is None or want_in in text)
    if rc not in (0, 1):
        ok = False
    print("%s %s: exit %d%s" % ("ok  " if ok else "FAIL", what, rc,
                                "" if ok else "\n" + text.strip()))
    if not ok:
        failures.append(what)
    return text


def stated_l2(text):
    m = re.search(r"relative L2 ([0-9.e+-]+|inf)", text)
    return float(m.group(1)) if m else None


# 1. Near-zero elements off by far more than rtol; the whole agrees to ~1e-6.
x = rng.standard_normal(4096).astype(np.float32)
x[:16] = rng.uniform(-1e-5, 1e-5, 16).astype(np.float32)
exp = (x.astype(np.float64) * (1 + rng.uniform(-2e-6, 2e-6, x.size))).astype(np.float32)
exp[:16] += np.float32(3e-6)
d = case("near_zero", x, exp)
r = rel_l2(x, exp)
text = expect("near_zero element-wise", d, [], False, "elements differ")
s = stated_l2(text)
if s is None or abs(s - r) > 1e-3 * r + 1e-12:
    failures.append("near_zero stated L2")
    print("FAIL near_zero: the FAIL line states relative L2 %s, numpy %.6g" % (s, r))
expect("near_zero --rel-l2 just above", d, ["--rel-l2", "%.6g" % (r * 1.01)], True)
text = expect("near_zero --rel-l2 just below", d, ["--rel-l2", "%.6g" % (r * 0.99)], False,
              "relative L2")
s = stated_l2(text)
if s is None or abs(s - r) > 1e-3 * r:
    failures.append("near_zero stated L2 (whole)")
    print("FAIL near_zero --rel-l2: states %s, numpy %.6g" % (s, r))

# 2. A NaN where a number was expected: no norm hides it.
x = rng.standard_normal((8, 8)).astype(np.float32)
exp = x.copy()
x[3, 5] = np.nan
expect("NaN against a number", case("nan_vs_number", x, exp), ["--rel-l2", "1"], False)

# 3. NaN against NaN and inf against inf agree, and stay out of the norms.
x = rng.standard_normal(64).astype(np.float32)
x[7], x[9] = np.nan, np.inf
exp = x.copy()
exp[20] *= np.float32(1 + 1e-6)
expect("NaN/inf matched", case("nan_inf_matched", x, exp), ["--rel-l2", "1e-4"], True)

# 4. An all-zero expectation: only zero passes.
z = np.zeros(32, np.float32)
expect("zero vs zero", case("zero_vs_zero", z, z.copy()), ["--rel-l2", "1e-4"], True)
x = z.copy()
x[4] = np.float32(1e-30)
expect("tiny vs zero", case("tiny_vs_zero", x, z), ["--rel-l2", "1e-4"], False, "inf")

# 5. Integers stay exact.
xi = np.arange(10, dtype=np.int64)
ei = xi.copy()
ei[2] += 1
expect("int64 off by one", case("int_off_by_one", xi, ei), ["--rel-l2", "1"], False)

# 6. float16 and float64.
for dt, scale in ((np.float16, 1e-3), (np.float64, 1e-12)):
    x = rng.standard_normal(1000).astype(dt)
    exp = (x.astype(np.float64) * (1 + scale * rng.standard_normal(1000))).astype(dt)
    d = case("whole_" + np.dtype(dt).name, x, exp)
    r = rel_l2(x, exp)
    if r == 0:
        failures.append("%s: no error made" % np.dtype(dt).name)
        continue
    expect(np.dtype(dt).name + " above", d, ["--rel-l2", "%.6g" % (r * 1.01)], True)
    expect(np.dtype(dt).name + " below", d, ["--rel-l2", "%.6g" % (r * 0.99)], False)

# 7. A bad value is refused.
rc, text = run(out, "--rel-l2", "-1")
if rc != 2 or "--rel-l2" not in text:
    failures.append("--rel-l2 -1 accepted")
    print("FAIL --rel-l2 -1: exit %d: %s" % (rc, text.strip()))

print("%d failures" % len(failures) if failures else "all passed")
sys.exit(1 if failures else 0)
