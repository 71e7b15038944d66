#!/usr/bin/python3
"""Batches run one item at a time (ox_session_options.batch_split, `--batch-split`).

    tests/batch_split.py --onnxexec build/onnxexec [--keep DIR]

Small PyTorch models exported by Debian's torch with a dynamic batch axis, run at batch 5
(not a multiple of the 2 threads) with `--batch-split on`, `auto` and `off`:
- models that keep items apart (convolutions, pooling, residual adds, a channel Concat,
  Linear over [N, S, D], a residual LayerNorm, Softmax over the last axis, an embedding
  lookup) must be split (`bench --json` says how many items ran one at a time) and give
  PyTorch's outputs;
- models that mix items (a mean over the batch, Softmax over axis 0, a Reshape whose shape is
  computed from Shape, a transpose that moves the batch axis) must not be split, and still
  give PyTorch's outputs;
- `off` never splits; `auto` splits a small CNN (weights far smaller than its activations)
  and not an MLP (no convolutions).
Oracle: PyTorch's outputs (relative L2 <= 1e-5).
"""
import argparse
import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn as nn

BATCH = 5


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU())
        self.pool = nn.MaxPool2d(2)
        self.dw = nn.Conv2d(16, 16, 3, padding=1, groups=16)
        self.c2 = nn.Conv2d(16, 16, 1)
        self.head = nn.Linear(16, 7)

    def forward(self, x):
        y = self.pool(self.c1(x))
        y = torch.relu(self.c2(self.dw(y)) + y)
        return self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(y, 1), 1))


class Fire(nn.Module):
    def __init__(self):
        super().__init__()
        self.s = nn.Conv2d(4, 8, 1)
        self.e1 = nn.Conv2d(8, 6, 1)
        self.e3 = nn.Conv2d(8, 6, 3, padding=1)

    def forward(self, x):
        s = torch.relu(self.s(x))
        return torch.sigmoid(torch.cat([self.e1(s), self.e3(s)], 1)) * 2.0


class Seq(nn.Module):  # [N, S, D]: Linear, a residual LayerNorm, Softmax over the last axis
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(50, 16)
        self.lin = nn.Linear(16, 16)
        self.ln = nn.LayerNorm(16)

    def forward(self, ids):
        e = self.emb(ids)  # the residual Add and the norm: one SkipLayerNormalization
        h = self.ln(e + torch.nn.functional.gelu(self.lin(e)))
        return torch.softmax(h, -1)


class BatchMean(nn.Module):  # mixes items: a mean over the batch axis
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 4, 3)

    def forward(self, x):
        y = self.c(x)
        return y - y.mean(0, keepdim=True)


class Softmax0(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 4, 1)

    def forward(self, x):
        return torch.softmax(self.c(x), 0)


class ViewShape(nn.Module):  # x.view(x.size(0), -1): a Reshape fed by Shape
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 4, 3)
        self.fc = nn.Linear(4 * 6 * 6, 3)

    def forward(self, x):
        y = self.c(x)
        return self.fc(y.view(y.size(0), -1))


class Permute(nn.Module):  # the batch axis moved, then moved back
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 4, 1)

    def forward(self, x):
        y = self.c(x).permute(1, 0, 2, 3)
        y = y - y.amax(1, keepdim=True)  # the max over the (moved) batch
        return y.permute(1, 0, 2, 3)


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 4))

    def forward(self, x):
        return self.net(x)


# name, module, input shape per item, dtype, separable, auto splits
CASES = [
    ("cnn", Cnn, (3, 16, 16), "float", True, True),
    ("fire", Fire, (4, 9, 9), "float", True, True),
    ("seq", Seq, (12,), "int64", True, False),  # no convolutions: auto leaves it whole
    ("batch_mean", BatchMean, (3, 8, 8), "float", False, False),
    ("softmax0", Softmax0, (3, 5, 5), "float", False, False),
    ("view_shape", ViewShape, (3, 8, 8), "float", False, False),
    ("permute", Permute, (3, 5, 5), "float", False, False),
    ("mlp", Mlp, (20,), "float", True, False),
]


def export(mod, path, shape, dtype):
    torch.manual_seed(0)
    m = mod().eval()
    for p in m.modules():  # BatchNorm statistics that are not the identity
        if isinstance(p, nn.BatchNorm2d):
            p.running_mean.uniform_(-0.5, 0.5)
            p.running_var.uniform_(0.5, 2.0)
    g = torch.Generator().manual_seed(1)
    if dtype == "int64":
        x = torch.randint(0, 50, (BATCH,) + shape, generator=g)
    else:
        x = torch.randn((BATCH,) + shape, generator=g)
    with torch.no_grad():
        y = m(x).numpy()
    torch.onnx.export(m, (x,), path, input_names=["x"], output_names=["y"], opset_version=17,
                      dynamic_axes={"x": {0: "N"}, "y": {0: "N"}})
    return x.numpy(), y


def run(exe, model, x_path, mode, out_dir):
    r = subprocess.run([exe, "run", model, "-i", "x=" + x_path, "--threads", "2",
                        "--batch-split", mode, "-o", out_dir], capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError("onnxexec run failed: " + r.stderr)
    return np.load(os.path.join(out_dir, "y.npy"))


def split_items(exe, model, x_path, mode):
    r = subprocess.run([exe, "bench", model, "-i", "x=" + x_path, "--threads", "2", "--runs",
                        "2", "--json", "--batch-split", mode], capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError("onnxexec bench failed: " + r.stderr)
    return json.loads(r.stdout)["split_items"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--onnxexec", required=True)
    ap.add_argument("--keep")
    a = ap.parse_args()
    tmp = a.keep or tempfile.mkdtemp(prefix="ox_split_")
    if not a.keep:  # a scratch folder goes however the script ends; --keep stays
        atexit.register(shutil.rmtree, tmp, True)
    os.makedirs(tmp, exist_ok=True)
    fails = checks = 0

    def check(ok, what):
        nonlocal fails, checks
        checks += 1
        if not ok:
            fails += 1
        print(("ok   " if ok else "FAIL ") + what)

    for name, mod, shape, dtype, separable, auto in CASES:
        model = os.path.join(tmp, name + ".onnx")
        x, ref = export(mod, model, shape, dtype)
        x_path = os.path.join(tmp, name + "_x.npy")
        np.save(x_path, x)
        for mode in ("on", "auto", "off"):
            y = run(a.onnxexec, model, x_path, mode, os.path.join(tmp, name + "_" + mode))
            err = float(np.linalg.norm(y - ref) / max(np.linalg.norm(ref), 1e-30))
            check(y.shape == ref.shape and err <= 1e-5,
                  f"{name} --batch-split {mode}: shape {y.shape}, relative L2 {err:.2e}")
            items = split_items(a.onnxexec, model, x_path, mode)
            want = BATCH if (mode == "on" and separable) or (mode == "auto" and auto) else 0
            check(items == want, f"{name} --batch-split {mode}: {items} items split "
                  f"(expected {want})")
    # fewer items than threads: any thread may take one, each on a plan of its own
    model = os.path.join(tmp, "cnn.onnx")
    x2 = np.load(os.path.join(tmp, "cnn_x.npy"))[:2]
    x2_path = os.path.join(tmp, "cnn_x2.npy")
    np.save(x2_path, x2)
    _, ref2 = export(Cnn, model, (3, 16, 16), "float")
    for threads in ("8", "3"):
        r = subprocess.run([a.onnxexec, "run", model, "-i", "x=" + x2_path, "--threads", threads,
                            "--batch-split", "on", "--repeat", "200", "-o",
                            os.path.join(tmp, "cnn2")],
                           capture_output=True, text=True)
        y = np.load(os.path.join(tmp, "cnn2", "y.npy")) if not r.returncode else None
        ok = y is not None and np.linalg.norm(y - ref2[:2]) <= 1e-5 * np.linalg.norm(ref2[:2])
        check(ok, f"cnn at batch 2 on {threads} threads, 200 runs, --batch-split on: "
              + ("PyTorch's outputs" if ok else r.stderr.strip() or
                 (f"exit status {r.returncode}" if r.returncode else "outputs differ")))
    print(f"{checks - fails} of {checks} checks passed")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
