#!/usr/bin/python3
"""Progress bars (tools/cli.c cli_progress_*): `test`, `bench` and `convert` draw a bar on
standard error when it is a terminal (a pseudo-terminal here), ending at N/N and erased at the
end, and write nothing of it when it is not (a pipe); what goes to standard output is the same
either way (test's PASS lines, bench's table, convert's last line). ONNXEXEC_PROGRESS=0 turns
the bar off on a terminal."""
import argparse
import atexit
import os
import re
import shutil
import subprocess
import sys
import tempfile

ap = argparse.ArgumentParser()
ap.add_argument("--onnxexec", required=True)
ap.add_argument("--source", required=True)
args = ap.parse_args()
fails = 0


def check(cond, what):
    global fails
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        fails += 1


def run(cmd, tty, env=None):
    """(stdout, stderr) of cmd, stderr on a pseudo-terminal when tty."""
    e = dict(os.environ, **(env or {}))
    e.pop("ONNXEXEC_PROGRESS", None) if env is None else None
    if not tty:
        r = subprocess.run(cmd, capture_output=True, text=True, env=e)
        return r.returncode, r.stdout, r.stderr
    master, slave = os.openpty()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=slave, env=e)
    os.close(slave)
    err = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        err += chunk
    out = p.stdout.read().decode()
    rc = p.wait()
    os.close(master)
    return rc, out, err.decode(errors="replace")


model = os.path.join(args.source, "models", "fashion_mnist_cnn.onnx")
cases = os.path.join(args.source, "tests", "cases")
tmp = tempfile.mkdtemp(prefix="ox_progress_")
atexit.register(shutil.rmtree, tmp, True)  # also when a check exits early
n_cases = len([d for d in os.listdir(cases) if os.path.isdir(os.path.join(cases, d))])

for name, cmd, total, same_out in (
        ("test", [args.onnxexec, "test", cases], n_cases, True),
        ("bench", [args.onnxexec, "bench", model, "--runs", "30", "--threads", "1"], 30, False),
        ("convert", [args.onnxexec, "convert", model, os.path.join(tmp, "o.onnx"), "--optimize"],
         3, False)):
    rc_t, out_t, err_t = run(cmd, True)
    rc_p, out_p, err_p = run(cmd, False)
    check(rc_t == 0 and rc_p == 0, "%s exits 0 on a terminal and on a pipe" % name)
    bars = re.findall(r"\r%s \[([#.]{30})\] (\d+)/(\d+)" % name, err_t)
    check(bars and bars[-1][1] == bars[-1][2] == str(total) and bars[-1][0] == "#" * 30,
          "%s: a bar on the terminal, ending full at %d/%d (%d drawn)"
          % (name, total, total, len(bars)))
    check(err_t.rstrip(" ").endswith("\r\x1b[K"), "%s: the bar is erased at the end" % name)
    check("\r" not in err_p and "[#" not in err_p, "%s: no bar on a pipe" % name)
    if same_out:
        check(out_t.replace("\r\n", "\n") == out_p, "%s: the same standard output" % name)
    else:
        check(out_t.splitlines()[-1:] and out_p.splitlines()[-1:] and
              out_t.splitlines()[-1].split()[0] == out_p.splitlines()[-1].split()[0],
              "%s: the same kind of output (its last line)" % name)

rc, out, err = run([args.onnxexec, "bench", model, "--runs", "5"], True, {"ONNXEXEC_PROGRESS": "0"})
check(rc == 0 and "[#" not in err, "ONNXEXEC_PROGRESS=0: no bar on a terminal")

print("%d failed" % fails if fails else "all passed")
sys.exit(1 if fails else 0)
