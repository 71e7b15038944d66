#!/usr/bin/python3
"""The trainer's optimizers against torch.optim: a few steps of `onnxexec train` on a small
MLP and tiny IDX data, then the trained parameters compared with PyTorch's after the same
steps (same initial weights, same batches in file order: --no-shuffle).

    /usr/bin/python3 tests/train_optim.py [--onnxexec build/onnxexec] [-v]

Per configuration (SGD plain, with momentum and weight decay, Nesterov; Adam with and
without L2; AdamW), every parameter must agree within 1e-5 relative (max |ours - torch|
over max |torch|) and the printed training loss of each epoch within 1e-5 relative too.
Prints one line per configuration, then `N passed, N failed`; exits 1 on a failure.
"""

import argparse
import gzip
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper
import torch
import torch.nn as nn

H, W, CLASSES, N_TRAIN, N_TEST, BATCH, EPOCHS = 6, 5, 4, 30, 12, 8, 3
RTOL = 1e-5

CONFIGS = [
    ("sgd", dict(lr=0.1), []),
    ("sgd momentum wd", dict(lr=0.05, momentum=0.9, weight_decay=1e-2),
     ["--momentum", "0.9", "--weight-decay", "0.01"]),
    ("sgd nesterov", dict(lr=0.05, momentum=0.8, nesterov=True),
     ["--momentum", "0.8", "--nesterov"]),
    ("adam", dict(lr=1e-2), []),
    ("adam l2", dict(lr=1e-2, weight_decay=0.05), ["--weight-decay", "0.05"]),
    ("adamw", dict(lr=1e-2, weight_decay=0.1), ["--weight-decay", "0.1"]),
]


def write_idx(path, arr):
    head = bytes([0, 0, 0x08, arr.ndim]) + b"".join(int(d).to_bytes(4, "big") for d in arr.shape)
    with gzip.open(path, "wb") as f:
        f.write(head + arr.astype(np.uint8).tobytes())


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(H * W, 16)
        self.fc2 = nn.Linear(16, CLASSES)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def torch_train(init, images, labels, name, kw):
    model = MLP()
    with torch.no_grad():
        for n, p in model.named_parameters():
            p.copy_(torch.from_numpy(init[n]))
    kind = name.split()[0]
    cls = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam, "adamw": torch.optim.AdamW}[kind]
    if kind == "adamw" and "weight_decay" not in kw:
        kw = dict(kw, weight_decay=0.0)
    opt = cls(model.parameters(), **kw)
    x = torch.from_numpy(images.reshape(len(images), -1).astype(np.float32) / np.float32(255))
    y = torch.from_numpy(labels.astype(np.int64))
    losses = []
    for _ in range(EPOCHS):
        total = 0.0
        for i in range(0, len(x), BATCH):
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x[i:i + BATCH]), y[i:i + BATCH])
            loss.backward()
            opt.step()
            total += loss.item() * len(x[i:i + BATCH])
        losses.append(total / len(x))
    return {n: p.detach().numpy().copy() for n, p in model.named_parameters()}, losses


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--onnxexec", default=os.path.join(root, "build", "onnxexec"))
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    rng = np.random.default_rng(7)
    torch.manual_seed(3)
    passed = failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        images = rng.integers(0, 256, (N_TRAIN, H, W), dtype=np.uint8)
        labels = rng.integers(0, CLASSES, N_TRAIN, dtype=np.uint8)
        write_idx(os.path.join(tmp, "train-images-idx3-ubyte.gz"), images)
        write_idx(os.path.join(tmp, "train-labels-idx1-ubyte.gz"), labels)
        write_idx(os.path.join(tmp, "t10k-images-idx3-ubyte.gz"), images[:N_TEST])
        write_idx(os.path.join(tmp, "t10k-labels-idx1-ubyte.gz"), labels[:N_TEST])
        model_path = os.path.join(tmp, "mlp.onnx")
        model = MLP().eval()
        torch.onnx.export(model, (torch.zeros(1, H * W),), model_path, opset_version=17,
                          input_names=["x"], output_names=["logits"],
                          dynamic_axes={"x": {0: "N"}, "logits": {0: "N"}})
        init = {n: p.detach().numpy().copy() for n, p in model.named_parameters()}
        for name, kw, flags in CONFIGS:
            out = os.path.join(tmp, "trained.onnx")
            cmd = [args.onnxexec, "train", model_path, "--data", tmp, "--epochs", str(EPOCHS),
                   "--batch", str(BATCH), "--optimizer", name.split()[0], "--lr",
                   str(kw["lr"]), "--no-shuffle", "--threads", "1", "-o", out] + flags
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                print(f"FAIL {name}: onnxexec exited {r.returncode}: {r.stderr.strip()}")
                failed += 1
                continue
            ours_loss = [float(v) for v in re.findall(r"train loss ([0-9.eE+-]+)", r.stdout)]
            trained = {t.name: numpy_helper.to_array(t) for t in onnx.load(out).graph.initializer}
            ref, ref_loss = torch_train(init, images, labels, name, dict(kw))
            worst, what = 0.0, ""
            for n, want in ref.items():
                got = trained[n].reshape(want.shape)
                rel = float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))
                moved = float(np.abs(want - init[n]).max())
                if args.verbose:
                    print(f"  {name:16} {n:12} rel err {rel:.2e} (moved {moved:.3g})")
                if rel > worst:
                    worst, what = rel, n
            # the printed loss has 4 decimals: compare to that precision
            loss_ok = len(ours_loss) == EPOCHS and all(
                abs(a - b) <= 5e-5 + RTOL * abs(b) for a, b in zip(ours_loss, ref_loss))
            ok = worst <= RTOL and loss_ok
            print(f"{'PASS' if ok else 'FAIL'} {name}: max rel err {worst:.2e} ({what}); "
                  f"loss ours {['%.4f' % v for v in ours_loss]} torch "
                  f"{['%.4f' % v for v in ref_loss]}")
            passed += ok
            failed += not ok
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
