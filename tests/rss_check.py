"""Shared by the tests that bound onnxexec's memory (tests/shared_weights.py,
tests/loop_growth.py): the peak RSS `onnxexec bench` reports, checked against a bar, and the
common ending of such a test."""
import re
import shutil
import subprocess
import sys


def check_peak_rss(onnxexec, model, extra, bar_mib, what, failures, why, skip=False):
    """Runs `onnxexec bench MODEL EXTRA... --runs 2 --threads 1`; appends to failures when it
    fails or its peak RSS is not below bar_mib (`why` says what that would mean). With skip
    (a sanitizer build: its shadow memory and the quarantine of freed blocks inflate the RSS)
    the bench still runs, the bar is not checked."""
    r = subprocess.run([onnxexec, "bench", model] + extra + ["--runs", "2", "--threads", "1"],
                       capture_output=True, text=True)
    rss = re.search(r"peak RSS\s+([0-9.]+) MiB", r.stdout)
    if r.returncode or not rss:
        failures.append("%s: bench failed: %s%s" % (what, r.stdout, r.stderr))
        return
    if skip:
        print("note %s: peak RSS %s MiB, not checked (--skip-rss)" % (what, rss.group(1)))
        return
    ok = float(rss.group(1)) < bar_mib
    print("%s %s: peak RSS %s MiB (bar < %g)" % ("ok  " if ok else "FAIL", what, rss.group(1),
                                                 bar_mib))
    if not ok:
        failures.append("%s: peak RSS %s MiB: %s" % (what, rss.group(1), why))


def finish(failures, work, keep):
    """Prints the failures, removes the scratch folder unless kept, exits 1 on any failure."""
    for f in failures:
        print("FAIL", f)
    if not keep:
        shutil.rmtree(work)
    print("%d failures" % len(failures))
    sys.exit(1 if failures else 0)
