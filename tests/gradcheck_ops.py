#!/usr/bin/python3
"""Gradient rules checked one operator at a time: every case of tests/grad_cases/*.py (a
float64 model around one op) through `onnxexec gradcheck` (central differences in float64).

A case fails when an element disagrees (|a - n| > atol + rtol max(|a|, |n|)), or when every
numeric gradient is zero (a check that cannot fail). The script also fails when a rule of the
table (graph/grad_*.def) has no case, so that no rule goes untested.

usage: tests/gradcheck_ops.py --onnxexec BUILD/onnxexec [--only SUBSTRING] [-v]
"""
import argparse
import importlib
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def rule_ops():
    ops = set()
    for p in sorted((HERE.parent / "graph").glob("grad_*.def")):
        for m in re.finditer(r'OX_GRAD\("([^"]*)",\s*"([^"]+)"', p.read_text()):
            ops.add((m.group(1), m.group(2)))
    return ops


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--onnxexec", required=True)
    ap.add_argument("--only", default="")
    ap.add_argument("-v", action="store_true")
    args = ap.parse_args()
    cases = []
    for p in sorted((HERE / "grad_cases").glob("*.py")):
        if p.name.startswith("_"):
            continue
        mod = importlib.import_module("grad_cases." + p.stem)
        cases += [(p.stem, name, model) for name, model in mod.CASES]
    covered = set()
    failed = []
    with tempfile.TemporaryDirectory() as tmp:
        for fam, name, model in cases:
            for n in model.graph.node:
                covered.add((n.domain if n.domain != "ai.onnx" else "", n.op_type))
            if args.only and args.only not in name:
                continue
            path = os.path.join(tmp, name + ".onnx")
            import onnx
            onnx.save(model, path)
            r = subprocess.run([args.onnxexec, "gradcheck", path, "--json", "--checks", "24"],
                               capture_output=True, text=True)
            try:
                rep = json.loads(r.stdout)
            except ValueError:
                failed.append(name)
                print(f"FAIL {fam}/{name}: {r.stderr.strip() or r.stdout.strip()}")
                continue
            vacuous = all(v["max_abs_numeric"] == 0 for v in rep["values"])
            ok = rep["passed"] and not vacuous and r.returncode == 0
            worst = max(rep["values"], key=lambda v: v["max_abs_err"])
            line = (f"{'PASS' if ok else 'FAIL'} {fam}/{name}: worst {worst['name']} abs "
                    f"{worst['max_abs_err']:.2g} rel {worst['max_rel_err']:.2g}"
                    + ("  (every numeric gradient is zero)" if vacuous else ""))
            if not ok:
                failed.append(name)
                print(line)
                for v in rep["values"]:
                    if not v["passed"]:
                        print(f"    {v['name']}[{v['worst_index']}]: analytic {v['analytic']:.9g}"
                              f" numeric {v['numeric']:.9g}")
            elif args.v:
                print(line)
    missing = sorted(op for d, op in rule_ops() - covered)
    print(f"{len(cases) - len(failed)} of {len(cases)} gradient cases pass; "
          f"{len(rule_ops())} rules, {len(missing)} without a case")
    if missing and not args.only:
        print("rules without a case: " + ", ".join(missing))
    return 1 if failed or (missing and not args.only) else 0


if __name__ == "__main__":
    sys.exit(main())
