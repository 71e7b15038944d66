#!/usr/bin/python3
"""PyTorch's side of the training comparison: the model of models/fmnist_cnn.onnx, from the
same initial weights, trained on the same Fashion-MNIST data with the same batch size,
optimizer and epochs as `onnxexec train`, printing what it prints: per epoch the mean
training loss, the test loss and accuracy, the time, and the peak resident memory.

    /usr/bin/python3 tests/train_fmnist_torch.py [--data DIR] [--epochs N] [--batch N]
        [--optimizer adam|adamw|sgd] [--lr X] [--momentum X] [--weight-decay X]
        [--threads N] [--limit N] [--test-limit N] [--seed N]

    # the same run with onnxexec:
    build/onnxexec train models/fmnist_cnn.onnx --data DIR --epochs N --batch N --threads N

Preprocessing as onnxexec train does it: pixel / 255 as float32, computed per batch from
the uint8 images (so neither side holds a float copy of the data set). The shuffle differs
(a torch.Generator here), so the losses agree in trend, not digit for digit. The peak RSS
includes the Python interpreter and the torch library (about 300 MiB before any work).
"""

import argparse
import gzip
import os
import sys
import time

import numpy as np
import onnx
from onnx import numpy_helper
import torch
import torch.nn as nn

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from make_fmnist_cnn import FmnistCNN  # noqa: E402


def read_idx(path):
    with (gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")) as f:
        buf = f.read()
    ndim = buf[3]
    dims = np.frombuffer(buf, dtype=">u4", count=ndim, offset=4).astype(np.int64)
    return np.frombuffer(buf, dtype=np.uint8, offset=4 + 4 * ndim).reshape(tuple(dims))


def load(data, prefix, limit):
    def find(name):
        p = os.path.join(data, name)
        return p if os.path.exists(p) else p + ".gz"
    x = read_idx(find(f"{prefix}-images-idx3-ubyte"))
    y = read_idx(find(f"{prefix}-labels-idx1-ubyte")).astype(np.int64)
    if limit:
        x, y = x[:limit], y[:limit]
    return torch.from_numpy(x.copy()), torch.from_numpy(y)


def peak_rss_mib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "fmnist_cnn.onnx"),
                    help="initial weights (default: models/fmnist_cnn.onnx)")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--optimizer", default="adam", choices=["sgd", "adam", "adamw"])
    ap.add_argument("--lr", type=float)
    ap.add_argument("--momentum", type=float, default=0.0)
    ap.add_argument("--weight-decay", type=float, default=0.0)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--test-limit", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    t_start = time.time()
    train_x, train_y = load(args.data, "train", args.limit)
    test_x, test_y = load(args.data, "t10k", args.test_limit)
    model = FmnistCNN()
    init = {t.name: numpy_helper.to_array(t) for t in onnx.load(args.model).graph.initializer}
    with torch.no_grad():
        for n, p in model.named_parameters():
            p.copy_(torch.from_numpy(init[n].copy()).reshape(p.shape))
    lr = args.lr or (0.01 if args.optimizer == "sgd" else 0.001)
    if args.optimizer == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=args.momentum,
                              weight_decay=args.weight_decay)
    else:
        cls = torch.optim.Adam if args.optimizer == "adam" else torch.optim.AdamW
        opt = cls(model.parameters(), lr=lr, weight_decay=args.weight_decay)
    n_values = sum(p.numel() for p in model.parameters())
    print(f"torch {torch.__version__}, {args.threads} threads: train {len(train_x)} images, "
          f"test {len(test_x)}; {n_values} parameter values; {args.optimizer} lr {lr:g}; "
          f"batch {args.batch}")
    gen = torch.Generator().manual_seed(args.seed)
    loss_fn = nn.CrossEntropyLoss()
    scale = np.float32(1 / 255)

    def batch_input(xb):
        return (xb.to(torch.float32) * scale).unsqueeze(1)

    for epoch in range(args.epochs):
        t0 = time.time()
        model.train()
        perm = torch.randperm(len(train_x), generator=gen)
        total = 0.0
        for i in range(0, len(perm), args.batch):
            idx = perm[i:i + args.batch]
            opt.zero_grad()
            loss = loss_fn(model(batch_input(train_x[idx])), train_y[idx])
            loss.backward()
            opt.step()
            total += loss.item() * len(idx)
        t_train = time.time() - t0
        t1 = time.time()
        model.eval()
        test_loss, right = 0.0, 0
        with torch.no_grad():
            for i in range(0, len(test_x), args.batch):
                z = model(batch_input(test_x[i:i + args.batch]))
                yb = test_y[i:i + args.batch]
                test_loss += nn.functional.cross_entropy(z, yb, reduction="sum").item()
                right += int((z.argmax(1) == yb).sum())
        t_test = time.time() - t1
        print(f"epoch {epoch + 1}/{args.epochs}: train loss {total / len(train_x):.4f}, "
              f"test loss {test_loss / len(test_x):.4f}, test accuracy "
              f"{100 * right / len(test_x):.2f}%, train {t_train:.1f} s "
              f"({len(train_x) / t_train:.0f} img/s), test {t_test:.1f} s, "
              f"peak RSS {peak_rss_mib():.1f} MiB", flush=True)
    print(f"done: {args.epochs} epochs in {time.time() - t_start:.1f} s, "
          f"peak RSS {peak_rss_mib():.1f} MiB")


if __name__ == "__main__":
    main()
