#!/usr/bin/python3
"""Run the ONNX backend test suite through `onnxexec test` and check it against a list of
known failures.

    tests/conformance.py --onnxexec build/onnxexec \\
        --data /usr/share/libonnx-testdata/data --known tests/known_failures.txt

For each suite (a folder of test cases: model.onnx + test_data_set_*/), runs one
`onnxexec test CASE...` process over its cases, sorted by name, and reads the
`PASS <case>` / `FAIL <case>: <reason>` / `SKIP <case>: <reason>` lines as they come. If
the process crashes or a case runs longer than --timeout seconds, that case is recorded
as a failure (crash or timeout) and a new process goes on with the next case, so one bad
case never loses the rest of the suite.

Prints `suite: P passed, F failed, S skipped of N` per suite, then exits 1 if a case
fails (or is skipped) that the known-failures file does not list, or if a listed case
now passes (so the list only shrinks). `--update` rewrites the file from this run.

known_failures.txt: one case per line, `suite/case  reason` (the reason is free text);
blank lines and lines starting with '#' are ignored. Skipped cases (sequence, map or
optional values, which the API cannot carry yet) are listed too. A reason that starts with
tolerances, `--atol A:` or `--rtol R --atol A:`, lists a case whose expected outputs need a
looser tolerance than the suite's (float32 round-off beyond atol 1e-7 where the expected
value is near 0): it is run again with them, and must pass so; it is never "now passing".

Standard library only; run it with /usr/bin/python3.
"""

import argparse
import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time

DEFAULT_SUITES = "node,simple,pytorch-converted,pytorch-operator"
RESULT_RE = re.compile(r"^(PASS|FAIL|SKIP) (\S+)(?:: (.*))?$")
SUMMARY_RE = re.compile(r"^\d+ passed, \d+ failed, \d+ skipped$")
REASON_MAX = 240


def list_cases(suite_dir):
    """Case folders of a suite, sorted by name (the order onnxexec runs them in)."""
    names = []
    for name in os.listdir(suite_dir):
        if os.path.isfile(os.path.join(suite_dir, name, "model.onnx")):
            names.append(name)
    return sorted(names)


def signal_name(rc):
    try:
        return signal.Signals(-rc).name
    except ValueError:
        return "signal %d" % -rc


def last_line(f):
    """The last non-empty line of an open binary file, shortened (for crash reports)."""
    f.flush()
    f.seek(0, os.SEEK_END)
    f.seek(max(0, f.tell() - 8192))
    lines = [l.strip() for l in f.read().decode("utf-8", "replace").splitlines()]
    lines = [l for l in lines if l]
    return lines[-1][:160] if lines else ""


def run_batch(onnxexec, extra, suite_dir, cases, timeout, results, problems, verbose):
    """Run `onnxexec test` over cases (names in suite_dir) until it finishes, crashes or a
    case times out. Fills results[name] = (status, reason) for the cases it reported, and
    for the case it died on. Returns the number of cases consumed (reported or blamed)."""
    cmd = [onnxexec, "test"] + extra + [os.path.join(suite_dir, c) for c in cases]
    with tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err,
                                    start_new_session=True)
        except OSError as e:
            sys.exit("conformance.py: cannot run %s: %s" % (onnxexec, e))
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        fd = proc.stdout.fileno()
        buf = b""
        idx = 0
        finished = False
        timed_out = False
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            if not sel.select(remaining):
                continue
            data = os.read(fd, 65536)
            if not data:
                break
            buf += data
            *lines, buf = buf.split(b"\n")
            for raw in lines:
                line = raw.decode("utf-8", "replace").rstrip("\r")
                if SUMMARY_RE.match(line):
                    finished = True
                    continue
                m = RESULT_RE.match(line)
                if not m:
                    if verbose and line.strip():
                        print("    " + line)
                    continue
                status, name, reason = m.group(1), m.group(2), m.group(3) or ""
                if idx < len(cases) and name == cases[idx]:
                    idx += 1
                elif name in cases[idx:]:
                    # onnxexec skipped ahead: should not happen; record what we were told
                    idx = cases.index(name, idx) + 1
                else:
                    continue
                results[name] = (status, reason)
                deadline = time.monotonic() + timeout
        sel.close()
        if timed_out:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        rc = proc.wait()
        proc.stdout.close()
        if idx >= len(cases):
            if rc not in (0, 1) or not finished:
                # e.g. a sanitizer's leak report at exit: blame the batch's last case
                how = ("killed by %s" % signal_name(rc)) if rc < 0 else ("exited with status %d" % rc)
                tail = last_line(err)
                problems.append("%s: onnxexec %s after its last case%s"
                                % (os.path.basename(suite_dir), how,
                                   " (%s)" % tail if tail else ""))
            return idx
        # the case at idx was running when the process stopped
        name = cases[idx]
        if timed_out:
            reason = "timeout: no result after %g s" % timeout
        else:
            tail = last_line(err)
            how = ("killed by %s" % signal_name(rc)) if rc < 0 else ("exited with status %d" % rc)
            reason = "crash: onnxexec %s" % how + (" (%s)" % tail if tail else "")
        results[name] = ("FAIL", reason)
        return idx + 1


TOLERANCE = re.compile(r"^((?:--(?:atol|rtol) [0-9.eE+-]+ ?)+):")


def tolerance_args(reason):
    """The options of a known-failures reason that starts with tolerances, else None."""
    m = TOLERANCE.match(reason or "")
    return m.group(1).split() if m else None


def run_suite(args, data, suite):
    suite_dir = os.path.join(data, suite)
    if not os.path.isdir(suite_dir):
        sys.exit("conformance.py: %s: no such suite folder" % suite_dir)
    cases = list_cases(suite_dir)
    if args.filter:
        rx = re.compile(args.filter)
        cases = [c for c in cases if rx.search(c)]
    extra = []
    if args.rtol is not None:
        extra += ["--rtol", str(args.rtol)]
    if args.atol is not None:
        extra += ["--atol", str(args.atol)]
    if args.threads is not None:
        extra += ["--threads", str(args.threads)]
    export_dir = None
    if args.roundtrip:
        extra += ["--roundtrip"]
        if args.checker:
            export_dir = tempfile.mkdtemp(prefix="ox-roundtrip-")
            extra += ["--export-dir", export_dir]
    results = {}
    problems = []
    start = 0
    while start < len(cases):
        start += run_batch(args.onnxexec, extra, suite_dir, cases[start:], args.timeout,
                           results, problems, args.verbose)
    # cases listed with looser tolerances: run again with them (the last options win)
    for c in cases:
        tol = args.tolerances.get(args.suite_name + "/" + c)
        if tol and results.get(c, ("FAIL", ""))[0] != "PASS":
            run_batch(args.onnxexec, extra + tol, suite_dir, [c], args.timeout, results,
                      problems, args.verbose)
    return cases, results, problems, export_dir


def checker_supports(model, onnx):
    """True when this onnx package knows the model's IR version and opsets."""
    if model.ir_version > onnx.IR_VERSION:
        return False
    known = {"": onnx.defs.onnx_opset_version(), "ai.onnx": onnx.defs.onnx_opset_version()}
    try:
        known["ai.onnx.ml"] = onnx.defs.get_schema("LinearClassifier", 100, "ai.onnx.ml").since_version
        known["ai.onnx.ml"] = max(known["ai.onnx.ml"], 3)
    except Exception:
        pass
    for op in model.opset_import:
        if op.domain in known and op.version > known[op.domain]:
            return False
    return True


def check_exported(suite_dir, export_dir, cases, results, counts):
    """onnx.checker (full check) on the exported model of every passing case whose IR
    version and opsets the onnx package knows. The exported file must pass wherever the
    original does. Returns a list of problems."""
    import onnx  # Debian's python3-onnx; only needed here
    problems = []
    for c in cases:
        if results.get(c, ("FAIL",))[0] != "PASS":
            continue
        path = os.path.join(export_dir, c + ".onnx")
        if not os.path.exists(path):
            problems.append("%s: no exported model" % c)
            continue
        exported = onnx.load(path)
        if not checker_supports(exported, onnx):
            counts["unsupported"] += 1
            continue
        try:
            onnx.checker.check_model(exported, full_check=True)
            counts["ok"] += 1
            continue
        except Exception as e:
            why = " ".join(str(e).split())[:300]
        try:
            onnx.checker.check_model(onnx.load(os.path.join(suite_dir, c, "model.onnx")),
                                     full_check=True)
        except Exception:
            counts["original_fails"] += 1  # the checker rejects the original as well
            continue
        problems.append("%s: onnx.checker rejects the exported model (and accepts the "
                        "original): %s" % (c, why))
    return problems


def read_known(path):
    """{ 'suite/case': reason }, in file order; missing file: empty."""
    known = {}
    if not os.path.exists(path):
        return known
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split(None, 1)
            key = parts[0]
            if "/" not in key:
                sys.exit("conformance.py: %s:%d: expected 'suite/case  reason', got %r"
                         % (path, n, line))
            known[key] = parts[1].strip() if len(parts) > 1 else ""
    return known


def write_known(path, entries):
    lines = [
        "# Conformance cases onnxexec does not pass yet: `suite/case  reason`.",
        "# tests/conformance.py fails when a case fails that is not listed here, or when a",
        "# listed case passes (then remove its line). A reason that starts with `--atol A:`",
        "# (or `--rtol R --atol A:`) marks a case that must pass with those tolerances.",
        "# Regenerate with:",
        "#   tests/conformance.py --onnxexec BUILD/onnxexec --update",
        "",
    ]
    width = max([len(k) for k in entries] + [0]) + 2
    for key in sorted(entries):
        lines.append(("%-*s%s" % (width, key, entries[key])).rstrip())
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(tmp, path)


def short(reason):
    reason = " ".join(reason.split())
    return reason if len(reason) <= REASON_MAX else reason[:REASON_MAX - 3] + "..."


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(
        description="Run the ONNX backend test suites through `onnxexec test` and compare "
                    "with the known failures.",
        epilog="example: tests/conformance.py --onnxexec build/onnxexec --suites node")
    p.add_argument("--onnxexec", required=True, help="path of the onnxexec executable")
    p.add_argument("--data", default="/usr/share/libonnx-testdata/data",
                   help="folder that holds the suites (default: %(default)s)")
    p.add_argument("--known", default=os.path.join(here, "known_failures.txt"),
                   help="known-failures file (default: tests/known_failures.txt)")
    p.add_argument("--suites", default=DEFAULT_SUITES,
                   help="comma-separated suites (default: %(default)s)")
    p.add_argument("--corpus", action="append", default=[], metavar="LABEL=DIR:SUITES",
                   help="one more corpus: its cases are keyed LABEL/suite/case; SUITES is "
                        "comma-separated (e.g. onnx-1.23=../shared/onnx-tests:node,simple). "
                        "A corpus whose folder is absent is skipped with a note")
    p.add_argument("--update", action="store_true",
                   help="rewrite the known-failures file from this run")
    p.add_argument("--timeout", type=float, default=60,
                   help="seconds one case may run (default: %(default)s)")
    p.add_argument("--filter", help="only cases whose name matches this regular expression "
                                    "(a partial run: listed cases not run are not checked)")
    p.add_argument("--rtol", type=float, help="passed to onnxexec test")
    p.add_argument("--atol", type=float, help="passed to onnxexec test")
    p.add_argument("--threads", type=int, help="passed to onnxexec test")
    p.add_argument("--roundtrip", action="store_true",
                   help="run the cases through onnxexec test --roundtrip (export, import "
                        "again: same outputs bit for bit, same bytes on a second export)")
    p.add_argument("--checker", action="store_true",
                   help="with --roundtrip: onnx.checker (full check) on every exported model "
                        "of a passing case whose IR version and opsets it knows; it must "
                        "accept each one whose original it accepts")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="print every failing and skipped case")
    args = p.parse_args()

    if not (os.path.isfile(args.onnxexec) and os.access(args.onnxexec, os.X_OK)):
        sys.exit("conformance.py: %s: not an executable file" % args.onnxexec)
    args.onnxexec = os.path.abspath(args.onnxexec)
    if args.update and args.filter:
        sys.exit("conformance.py: --update needs a full run (no --filter)")
    # (label, folder, suite) for every suite of every corpus
    runs = [("", args.data, x) for x in args.suites.split(",") if x]
    for spec in args.corpus:
        label, _, rest = spec.partition("=")
        folder, _, names = rest.rpartition(":")
        if not label or not folder or not names:
            sys.exit("conformance.py: --corpus %r: expected LABEL=DIR:SUITES" % spec)
        if not os.path.isdir(folder):
            print("%s: %s not found, corpus skipped" % (label, folder))
            continue
        runs += [(label, folder, x) for x in names.split(",") if x]
    prefixes = [(lb + "/" if lb else "") + x + "/" for lb, _, x in runs]
    known = read_known(args.known)
    args.tolerances = {k: tolerance_args(r) for k, r in known.items() if tolerance_args(r)}

    all_results = {}  # '[label/]suite/case' -> (status, reason)
    all_problems = []  # abnormal exits after all cases of a batch reported
    checker_problems = []
    totals = [0, 0, 0, 0]
    for label, folder, suite in runs:
        t0 = time.monotonic()
        args.suite_name = (label + "/" if label else "") + suite
        cases, results, problems, export_dir = run_suite(args, folder, suite)
        all_problems += problems
        if export_dir:
            cc = {"ok": 0, "unsupported": 0, "original_fails": 0}
            bad = check_exported(os.path.join(folder, suite), export_dir, cases, results, cc)
            shutil.rmtree(export_dir, ignore_errors=True)
            checker_problems.extend(bad)
            print("  onnx.checker: %d exported models accepted, %d rejected, %d rejected like "
                  "their originals, %d beyond what it knows (IR/opset)"
                  % (cc["ok"], len(bad), cc["original_fails"], cc["unsupported"]))
        name = (label + "/" if label else "") + suite
        counts = {"PASS": 0, "FAIL": 0, "SKIP": 0}
        for c in cases:
            status, reason = results.get(c, ("FAIL", "no result"))
            counts[status] += 1
            all_results[name + "/" + c] = (status, reason)
            if args.verbose and status != "PASS":
                print("  %s %s/%s: %s" % (status, name, c, reason))
        print("%s: %d passed, %d failed, %d skipped of %d  (%.0f s)"
              % (name, counts["PASS"], counts["FAIL"], counts["SKIP"], len(cases),
                 time.monotonic() - t0))
        sys.stdout.flush()
        for i, k in enumerate(("PASS", "FAIL", "SKIP")):
            totals[i] += counts[k]
        totals[3] += len(cases)
    if len(runs) > 1:
        print("total: %d passed, %d failed, %d skipped of %d" % tuple(totals))

    in_run = lambda key: any(key.startswith(x) for x in prefixes)
    new_fail = sorted(k for k, (s, _) in all_results.items()
                      if s != "PASS" and (k not in known or k in args.tolerances))
    now_pass = sorted(k for k, (s, _) in all_results.items()
                      if s == "PASS" and k in known and k not in args.tolerances)
    stale = [] if args.filter else sorted(k for k in known if in_run(k) and k not in all_results)

    if args.update:
        entries = {k: r for k, r in known.items() if not in_run(k)}
        for k, (s, r) in all_results.items():
            if k in args.tolerances:
                entries[k] = known[k]
                continue
            if s == "PASS":
                continue
            if k in known and known[k]:
                entries[k] = known[k]
            elif s == "SKIP":
                entries[k] = short("skipped: " + r)
            else:
                entries[k] = short(r)
        write_known(args.known, entries)
        print("%s: %d known failures written (%d new, %d now passing, %d gone)"
              % (args.known, sum(1 for k in entries if in_run(k)), len(new_fail),
                 len(now_pass), len(stale)))
        return 0

    ok = True
    if new_fail:
        ok = False
        print("\nNEW FAILURES (not in %s, or failing at the tolerances it gives):" % args.known)
        for k in new_fail:
            s, r = all_results[k]
            print("  %s %s: %s" % (s, k, r))
    if now_pass:
        ok = False
        print("\nNOW PASSING (remove them from %s, or run with --update):" % args.known)
        for k in now_pass:
            print("  " + k)
    if stale:
        ok = False
        print("\nLISTED BUT NOT FOUND (remove them from %s):" % args.known)
        for k in stale:
            print("  " + k)
    if checker_problems:
        ok = False
        print("\nEXPORTED MODELS THAT onnx.checker REJECTS:")
        for p in checker_problems:
            print("  " + p)
    if all_problems:
        ok = False
        print("\nABNORMAL EXITS:")
        for p in all_problems:
            print("  " + p)
    if ok:
        print("conformance: OK (%d known failures)" % sum(1 for k in known if in_run(k)))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
