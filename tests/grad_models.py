#!/usr/bin/python3
"""Parameter gradients of real PyTorch models against torch.autograd.

    tests/grad_models.py --onnxexec build/onnxexec [--only NAME] [--keep DIR] [--table FILE]

For each model (Debian's torch 1.13, fixed seeds, eval mode, float32) and each of two losses:
  - "seed": the model's output y with a random incoming gradient r: torch computes
    (y * r).sum().backward(); onnxexec gets r as the seed input y_grad;
  - "sce": SoftmaxCrossEntropyLoss inside the exported graph (F.cross_entropy(y, labels),
    mean): torch backpropagates the loss, onnxexec gets the seed 1;
the model is exported to ONNX (opset 17, parameters kept under their names), `onnxexec grad`
writes the gradient graph, onnx.checker (full check) must accept it, and `onnxexec run`
of that file must give every parameter's gradient within relative L2 1e-4 of torch's.
`onnxexec gradcheck` must pass on the float32 MLP and LSTM models too.
Exits 1 on failure; prints one line per model and loss, and a markdown table with --table.
"""

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

TOL = 1e-4


def rel_l2(got, want):
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    if got.shape != want.shape:
        return float("inf")
    den = np.linalg.norm(want)
    return float(np.linalg.norm(got - want) / den) if den > 0 else float(np.linalg.norm(got))


def models(torch):
    import torchvision

    nn = torch.nn

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(),
                                     nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))

        def forward(self, x):
            return self.net(x)

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            layer = nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True)
            self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            self.emb = nn.Linear(16, 64)
            self.head = nn.Linear(64, 10)

        def forward(self, x):
            return self.head(self.enc(self.emb(x)).mean(dim=1))

    class LSTMNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(12, 24, batch_first=True)
            self.head = nn.Linear(24, 10)

        def forward(self, x):
            y, (h, c) = self.lstm(x)
            return self.head(y[:, -1, :] + h[0])

    return [
        ("mlp", MLP, (4, 1, 28, 28)),
        ("resnet18", lambda: torchvision.models.resnet18(num_classes=10), (2, 3, 64, 64)),
        # full size: most 3x3 layers are large enough for the CPU's Winograd form, whose
        # rounding moved the first layer's gradient by 1.3e-3 before gradient graphs ran
        # the precise paths
        ("resnet18_224", lambda: torchvision.models.resnet18(num_classes=10), (2, 3, 224, 224)),
        ("mobilenet_v2", lambda: torchvision.models.mobilenet_v2(num_classes=10),
         (2, 3, 64, 64)),
        ("transformer_encoder", Encoder, (2, 12, 16)),
        ("lstm", LSTMNet, (3, 7, 12)),
    ]


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=1200)


def check(torch, exe, name, make, shape, loss, work):
    import onnx

    torch.manual_seed(0)
    model = make().eval()
    # distinct values everywhere: torch's exporter merges initializers that are equal (the
    # BatchNorm ones and zeros), which would sum their gradients
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
        for bname, b in model.named_buffers():
            if bname.endswith("running_mean"):
                b.copy_(torch.randn_like(b) * 0.1)
            elif bname.endswith("running_var"):
                b.copy_(torch.rand_like(b) + 0.5)
    gen = np.random.default_rng(1)
    x = gen.standard_normal(shape).astype(np.float32)
    batch = shape[0]
    labels = gen.integers(0, 10, size=(batch,)).astype(np.int64)

    class WithLoss(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, x, labels):
            return torch.nn.functional.cross_entropy(self.m(x), labels)

    net = WithLoss(model) if loss == "sce" else model
    args = (torch.from_numpy(x), torch.from_numpy(labels)) if loss == "sce" else (
        torch.from_numpy(x),)
    names = ["x", "labels"] if loss == "sce" else ["x"]
    path = os.path.join(work, f"{name}_{loss}.onnx")
    torch.onnx.export(net, args, path, input_names=names, output_names=["y"], opset_version=17,
                      do_constant_folding=False, training=torch.onnx.TrainingMode.PRESERVE)
    # torch's gradients
    net.zero_grad()
    y = net(*args)
    seed = np.ones((), np.float32) if loss == "sce" else gen.standard_normal(
        tuple(y.shape)).astype(np.float32)
    (y * torch.from_numpy(seed)).sum().backward()
    prefix = "m." if loss == "sce" else ""
    want = {n[len(prefix):] if n.startswith(prefix) else n: p.grad.numpy()
            for n, p in net.named_parameters()}
    # onnxexec
    gpath = os.path.join(work, f"{name}_{loss}_grad.onnx")
    r = run([exe, "grad", path, "-o", gpath])
    if r.returncode:
        return f"grad failed: {r.stderr.strip()}", None
    try:
        onnx.checker.check_model(onnx.load(gpath), full_check=True)
    except Exception as e:  # noqa: BLE001 - report any checker complaint
        return f"onnx.checker: {str(e).splitlines()[0]}", None
    np.save(os.path.join(work, "x.npy"), x)
    np.save(os.path.join(work, "labels.npy"), labels)
    np.save(os.path.join(work, "seed.npy"), seed)
    out = os.path.join(work, f"{name}_{loss}_out")
    cmd = [exe, "run", gpath, "-i", "x=" + os.path.join(work, "x.npy"),
           "-i", "y_grad=" + os.path.join(work, "seed.npy"), "-o", out]
    if loss == "sce":
        cmd += ["-i", "labels=" + os.path.join(work, "labels.npy")]
    r = run(cmd)
    if r.returncode:
        return f"run failed: {r.stderr.strip()}", None
    # names in the exported graph: the parameters keep torch's names (prefixed in sce)
    worst, worst_name, n = 0.0, "", 0
    for pname, g in want.items():
        cands = [pname, "m." + pname]
        files = [os.path.join(out, c + "_grad.npy") for c in cands]
        f = next((f for f in files if os.path.exists(f)), None)
        if f is None:
            return f"no gradient output for parameter {pname}", None
        e = rel_l2(np.load(f), g)
        n += 1
        if e > worst or np.isnan(e):
            worst, worst_name = e, pname
    if not worst <= TOL:
        return f"{worst_name}: relative L2 {worst:.3g} > {TOL}", worst
    return None, (worst, worst_name, n)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--onnxexec", required=True)
    ap.add_argument("--only", default="")
    ap.add_argument("--keep", default="")
    ap.add_argument("--table", default="")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(2)
    exe = os.path.abspath(args.onnxexec)
    rows, failed = [], 0
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or tmp
        os.makedirs(work, exist_ok=True)
        for name, make, shape in models(torch):
            if args.only and args.only not in name:
                continue
            for loss in ("seed", "sce"):
                err, res = check(torch, exe, name, make, shape, loss, work)
                if err:
                    failed += 1
                    print(f"FAIL {name} ({loss}): {err}")
                    rows.append((name, loss, "FAIL", err))
                else:
                    worst, wname, n = res
                    print(f"PASS {name} ({loss}): {n} parameter gradients, worst relative L2 "
                          f"{worst:.2g} ({wname})")
                    rows.append((name, loss, "pass", f"{n} gradients, worst {worst:.2g} "
                                                     f"({wname})"))
                sys.stdout.flush()
            if name in ("mlp", "lstm"):
                # the float32 path of gradcheck, on the exported model (defaults: eps 1e-3)
                r = run([exe, "gradcheck", os.path.join(work, f"{name}_seed.onnx"), "--checks",
                         "8"])
                ok = r.returncode == 0 and "PASS" in r.stdout
                failed += not ok
                print(f"{'PASS' if ok else 'FAIL'} {name}: onnxexec gradcheck (float32) "
                      f"{r.stdout.strip().splitlines()[-1] if r.stdout.strip() else r.stderr}")
    if args.table:
        with open(args.table, "w") as f:
            f.write("| model | loss | result | detail |\n|---|---|---|---|\n")
            for r in rows:
                f.write("| " + " | ".join(r) + " |\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
