#!/usr/bin/python3
"""The GPU against outside oracles (issue 8): the ONNX backend test cases on the GPU, and
models on the GPU against the CPU.

    tests/gpu_check.py --onnxexec build/onnxexec --node /usr/share/libonnx-testdata/data/node \\
        [--model M.onnx[:SHAPE]]... [--json-out F]

Exits 77 (ctest's skip) when this onnxexec has no CUDA or the machine no GPU.

1. Conformance: every case of each --node folder runs with `onnxexec test` on the CPU and
   with `--device cuda -v`. The expected outputs come with the cases. A case that passes on
   the CPU and fails on the GPU is a failure (with its reason). `-v` says which nodes of each
   case ran on the CPU for want of a GPU kernel; from that the script lists, per op, the
   cases that ran it on the GPU and passed, and the ops that never reached the GPU.
2. Parity: each --model runs with `onnxexec run` on the CPU (fp32) and on the GPU in fp32,
   fp16 and bf16, on the same seeded random inputs (symbolic dimensions 1 unless SHAPE, as
   for --shape, e.g. model.onnx:N=32); every output must be within relative L2 1e-4 (fp32),
   1e-2 (fp16) and 5e-2 (bf16: 8 significant bits against float16's 11) of the CPU's.

Standard library and numpy; run it with python3.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

RESULT_RE = re.compile(r"^(PASS|FAIL|SKIP) (\S+)(?:: (.*))?$")
DEVICE_RE = re.compile(r"^# (.*?): (\d+) steps on the device, (\d+) on the CPU(, captured)?"
                       r"(?: \((.*)\))?$")
NO_GPU = ("built without CUDA", "no CUDA GPU")


def log(msg):
    print(msg, flush=True)


def run_cases(onnxexec, extra, suite, cases, timeout):
    """Run `onnxexec test` over cases; returns {case: (status, reason, device_line)}. A case
    that crashes or hangs its process is recorded as FAIL and the rest run in a new one."""
    results = {}
    todo = list(cases)
    while todo:
        cmd = [onnxexec, "test"] + extra + [os.path.join(suite, c) for c in todo]
        with tempfile.TemporaryFile() as out:
            try:
                proc = subprocess.run(cmd, stdout=out, stderr=subprocess.DEVNULL,
                                      timeout=timeout * len(todo))
                rc = proc.returncode
            except subprocess.TimeoutExpired:
                rc = None
            out.seek(0)
            lines = out.read().decode("utf-8", "replace").splitlines()
        pending = None
        for line in lines:
            m = DEVICE_RE.match(line)
            if m:
                pending = m
                continue
            m = RESULT_RE.match(line)
            if m and m.group(2) in todo:
                results[m.group(2)] = (m.group(1), m.group(3) or "", pending)
                pending = None
        left = [c for c in todo if c not in results]
        if not left:
            break
        # the first case without a result is where the process died
        why = "timeout" if rc is None else "crash (status %s)" % rc
        results[left[0]] = ("FAIL", why, None)
        todo = left[1:]
    return results


def conformance(onnxexec, suites, timeout):
    failures = []
    op_cases = {}  # op -> cases that ran it on the GPU and passed
    cpu_ops = {}   # op -> cases where it ran on the CPU
    n_pass = n_both = 0
    for suite in suites:
        cases = sorted(c for c in os.listdir(suite)
                       if os.path.isfile(os.path.join(suite, c, "model.onnx")))
        t0 = time.monotonic()
        cpu = run_cases(onnxexec, [], suite, cases, timeout)
        gpu = run_cases(onnxexec, ["--device", "cuda", "-v"], suite, cases, timeout)
        log("%s: %d cases, CPU and GPU runs in %.0f s" % (suite, len(cases),
                                                          time.monotonic() - t0))
        for c in cases:
            cs, _, _ = cpu.get(c, ("FAIL", "no result", None))
            gs, greason, dev = gpu.get(c, ("FAIL", "no result", None))
            if cs != "PASS":
                continue
            n_both += 1
            if gs != "PASS":
                failures.append((c, greason))
                continue
            n_pass += 1
            ops = op_names(os.path.join(suite, c, "model.onnx"))
            on_cpu = set()
            if dev and dev.group(5):
                on_cpu = {o.split(".")[-1] for o in dev.group(5).split(", ")}
            for op in ops:
                if op in on_cpu:
                    cpu_ops.setdefault(op, []).append(c)
                else:
                    op_cases.setdefault(op, []).append(c)
    return failures, op_cases, cpu_ops, n_pass, n_both


def op_names(path):
    """The op types of a model's main graph, read with the onnx package when present."""
    try:
        import onnx
        return sorted({n.op_type for n in onnx.load(path, load_external_data=False).graph.node})
    except Exception:
        return []


# relative L2 against the CPU per precision; PARITY_PRECISIONS (environment, comma list)
# picks the ones run
PARITY_TOL = {"fp32": 1e-4, "tf32": 1e-2, "fp16": 1e-2, "bf16": 5e-2}
PARITY_PRECISIONS = [p for p in os.environ.get("PARITY_PRECISIONS", "fp32,fp16,bf16").split(",")
                     if p in PARITY_TOL]


def parity(onnxexec, models, work):
    import numpy as np
    rows = []
    bad = []
    for spec in models:
        path, _, shape = spec.partition(":")
        extra = ["--seed", "1"] + (["--shape", shape] if shape else [])
        outs = {}
        sides = [("cpu", [])] + [(p, ["--device", "cuda", "--precision", p])
                                 for p in PARITY_PRECISIONS]
        for side, args in sides:
            tag = os.path.basename(path) + ("." + shape.replace("=", "") if shape else "")
            d = os.path.join(work, tag + "." + side)
            os.makedirs(d, exist_ok=True)
            p = subprocess.run([onnxexec, "run", path, "-o", d] + extra + args,
                               capture_output=True, text=True)
            if p.returncode:
                outs[side] = p.stderr.strip().splitlines()[-1:] or ["failed"]
                continue
            outs[side] = {f: np.load(os.path.join(d, f)) for f in sorted(os.listdir(d))}
        ref = outs["cpu"]
        if not isinstance(ref, dict):
            bad.append((spec, "cpu", ref[0]))
            continue
        for side, tol in ((p, PARITY_TOL[p]) for p in PARITY_PRECISIONS):
            got = outs[side]
            if not isinstance(got, dict):
                bad.append((spec, side, got[0]))
                rows.append((spec, side, None, tol))
                continue
            worst = 0.0
            for name, a in ref.items():
                b = got.get(name)
                if b is None or b.shape != a.shape:
                    worst = float("inf")
                    continue
                a64, b64 = a.astype(np.float64), b.astype(np.float64)
                den = np.linalg.norm(a64)
                err = np.linalg.norm(a64 - b64) / (den if den > 0 else 1.0)
                worst = max(worst, float(err) if np.isfinite(err) else float("inf"))
            rows.append((spec, side, worst, tol))
            if not worst <= tol:
                bad.append((spec, side, "relative L2 %.3g > %g" % (worst, tol)))
    return rows, bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--onnxexec", required=True)
    ap.add_argument("--node", action="append", default=[], help="a folder of backend cases")
    ap.add_argument("--model", action="append", default=[], help="MODEL.onnx[:SHAPE]")
    ap.add_argument("--work", default=None)
    ap.add_argument("--timeout", type=float, default=60, help="seconds per case")
    ap.add_argument("--json-out")
    a = ap.parse_args()

    probe = subprocess.run([a.onnxexec, "bench", "--runs", "1", "--device", "cuda",
                            os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                         "models", "fashion_mnist_cnn.onnx")],
                           capture_output=True, text=True)
    if probe.returncode and any(s in probe.stderr for s in NO_GPU):
        log("SKIP: " + probe.stderr.strip().splitlines()[-1])
        return 77
    if probe.returncode:
        log("the probe failed: " + probe.stderr.strip())
        return 1
    log(probe.stdout.strip())
    status = 0
    report = {}
    if a.model:
        work = a.work or tempfile.mkdtemp(prefix="gpu_check.")
        rows, bad = parity(a.onnxexec, a.model, work)
        log("parity (relative L2 of the outputs against the CPU's):")
        for spec, side, err, tol in rows:
            log("  %-40s %-5s %s (bar %g)" % (os.path.basename(spec), side,
                                             "failed" if err is None else "%.3g" % err, tol))
        for spec, side, why in bad:
            log("  FAIL %s %s: %s" % (os.path.basename(spec), side, why))
        report["parity"] = {"rows": rows, "failures": bad}
        status |= bool(bad)
    if a.node:
        failures, op_cases, cpu_ops, n_pass, n_both = conformance(a.onnxexec, a.node, a.timeout)
        log("conformance: %d of %d cases that pass on the CPU pass on the GPU" % (n_pass, n_both))
        for c, why in failures:
            log("  FAIL %s: %s" % (c, why[:200]))
        log("ops run on the GPU in passing cases: %d" % len(op_cases))
        log("  " + ", ".join("%s %d" % (op, len(cs)) for op, cs in sorted(op_cases.items())))
        only_cpu = sorted(set(cpu_ops) - set(op_cases))
        log("ops that ran on the CPU only: %d" % len(only_cpu))
        log("  " + ", ".join(only_cpu))
        report["conformance"] = {"pass": n_pass, "of": n_both, "failures": failures,
                                 "gpu_ops": {k: len(v) for k, v in op_cases.items()},
                                 "cpu_only_ops": only_cpu}
        status |= bool(failures)
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump(report, f, indent=1, default=str)
    log("gpu_check: %s" % ("FAILED" if status else "passed"))
    return status


if __name__ == "__main__":
    sys.exit(main())
