#!/usr/bin/python3
"""A short end-to-end check of `onnxexec train`: models/fmnist_cnn.onnx trained for two epochs
on the first images of Fashion-MNIST (Debian's dataset-fashion-mnist), about a minute on two
cores.

    /usr/bin/python3 tests/train_smoke.py [--onnxexec build/onnxexec] [--limit N] [-v]

Checks: the training loss fell from the first epoch to the second and the test accuracy is
well above chance (10 classes); the trained model written with -o holds new parameters and,
loaded into the PyTorch module it was exported from, gives the accuracy the tool printed;
the SVG curve is well-formed XML with the loss and accuracy panels. Prints
`N passed, N failed` and exits 1 on a failure.
"""

import argparse
import gzip
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

import numpy as np
import onnx
from onnx import numpy_helper
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = "/usr/share/datasets/fashion-mnist"
MODEL = os.path.join(ROOT, "models", "fmnist_cnn.onnx")
sys.path.insert(0, os.path.join(ROOT, "tools"))
from make_fmnist_cnn import FmnistCNN  # noqa: E402


def read_idx(path):
    with gzip.open(path, "rb") as f:
        buf = f.read()
    ndim = buf[3]
    dims = np.frombuffer(buf, dtype=">u4", count=ndim, offset=4).astype(np.int64)
    return np.frombuffer(buf, dtype=np.uint8, offset=4 + 4 * ndim).reshape(tuple(dims))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--onnxexec", default=os.path.join(ROOT, "build", "onnxexec"))
    ap.add_argument("--data", default=DATA)
    ap.add_argument("--limit", type=int, default=8000)
    ap.add_argument("--test-limit", type=int, default=2000)
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    if not os.path.exists(os.path.join(args.data, "t10k-labels-idx1-ubyte.gz")):
        print(f"no Fashion-MNIST in {args.data}: install Debian's dataset-fashion-mnist")
        print("0 passed, 1 failed")
        return 1
    results = []

    def check(name, ok, detail=""):
        results.append(ok)
        print(f"{'PASS' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}")

    with tempfile.TemporaryDirectory() as tmp:
        out, curve = os.path.join(tmp, "trained.onnx"), os.path.join(tmp, "curve.svg")
        cmd = [args.onnxexec, "train", MODEL, "--data", args.data, "--epochs", "2",
               "--batch", "64", "--limit", str(args.limit), "--test-limit",
               str(args.test_limit), "--seed", "1", "--curve-every", "10", "-o", out,
               "--curve", curve]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if args.verbose or r.returncode:
            print(r.stdout + r.stderr)
        check("onnxexec train exits 0", r.returncode == 0, f"exit {r.returncode}")
        if r.returncode:
            print(f"{sum(results)} passed, {len(results) - sum(results)} failed")
            return 1
        epochs = re.findall(r"epoch (\d+)/2: train loss ([0-9.]+), test loss ([0-9.]+), "
                            r"test accuracy ([0-9.]+)%", r.stdout)
        check("two epoch lines", len(epochs) == 2, f"{len(epochs)} found")
        if len(epochs) == 2:
            l1, l2 = float(epochs[0][1]), float(epochs[1][1])
            acc = float(epochs[1][3]) / 100
            check("training loss fell", l2 < l1 and l1 < 2.3, f"{l1:.4f} -> {l2:.4f}")
            check("test accuracy well above chance", acc >= 0.6, f"{100 * acc:.2f}%")
            check("plain progress lines (stderr is not a terminal)",
                  "step " in r.stderr and "\r" not in r.stderr)
            # the written model: new parameters, and the printed accuracy in PyTorch
            before = {t.name: numpy_helper.to_array(t) for t in onnx.load(MODEL).graph.initializer}
            after_m = onnx.load(out)
            after = {t.name: numpy_helper.to_array(t) for t in after_m.graph.initializer}
            check("the written model has the forward graph only",
                  [n.op_type for n in after_m.graph.node] ==
                  [n.op_type for n in onnx.load(MODEL).graph.node] and
                  [o.name for o in after_m.graph.output] == ["logits"])
            moved = all(not np.array_equal(before[k], after[k]) for k in before)
            check("every parameter changed", moved and before.keys() == after.keys())
            model = FmnistCNN().eval()
            with torch.no_grad():
                for n, p in model.named_parameters():
                    p.copy_(torch.from_numpy(after[n].copy()).reshape(p.shape))
                x = read_idx(os.path.join(args.data, "t10k-images-idx3-ubyte.gz"))
                y = read_idx(os.path.join(args.data, "t10k-labels-idx1-ubyte.gz"))
                x = torch.from_numpy(x[:args.test_limit].astype(np.float32) / np.float32(255))
                pred = model(x.unsqueeze(1)).argmax(1).numpy()
            torch_acc = float((pred == y[:args.test_limit]).mean())
            check("PyTorch gives the printed accuracy with the written weights",
                  abs(torch_acc - acc) <= 0.002, f"{100 * torch_acc:.2f}% vs {100 * acc:.2f}%")
        try:
            svg = ET.parse(curve).getroot()
            texts = [t.text for t in svg.iter("{http://www.w3.org/2000/svg}text")]
            lines = list(svg.iter("{http://www.w3.org/2000/svg}polyline"))
            check("SVG curve", "loss" in texts and "accuracy" in texts and len(lines) >= 2,
                  f"{len(lines)} polylines")
        except (ET.ParseError, OSError) as e:
            check("SVG curve", False, str(e))
    print(f"{sum(results)} passed, {len(results) - sum(results)} failed")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
