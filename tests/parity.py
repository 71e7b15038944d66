#!/usr/bin/python3
"""Model parity: onnxexec against PyTorch's own outputs.

Exports torchvision resnet18, mobilenet_v2 and a transformer encoder with
models/export_parity.py, and the BERT-like encoder of models/export_bench.py (Debian
python3-torch, fixed seeds), runs each through
`onnxexec run`, and requires a relative L2 error <= 1e-4 against PyTorch's outputs.
Then runs the shipped Fashion-MNIST CNN on its 1000 test images and compares the
logits with PyTorch's (models/fashion_mnist_cnn.expected.npy) and the predicted
labels with the true ones. Each model's memory plan must also be within 1.1x of its
lower bound (`onnxexec bench --json`: arena bytes vs the most bytes alive at once), at
batch 1 and 4.

    parity.py --onnxexec build/onnxexec --work build/models --source .
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np

TOL_REL_L2 = 1e-4


def read_pb(path):
    import onnx
    from onnx import numpy_helper
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return t.name, numpy_helper.to_array(t)


def rel_l2(got, want):
    got = got.astype(np.float64).ravel()
    want = want.astype(np.float64).ravel()
    den = np.linalg.norm(want)
    return np.linalg.norm(got - want) / (den if den > 0 else 1.0)


def run(onnxexec, model, inputs, outdir):
    cmd = [onnxexec, "run", model, "-o", outdir]
    for name, path in inputs:
        cmd += ["-i", f"{name}={path}"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}{r.stderr}")
    return r.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--onnxexec", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--source", required=True)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)

    script = os.path.join(args.source, "models", "export_parity.py")
    bench_script = os.path.join(args.source, "models", "export_bench.py")
    stamp = os.path.join(args.work, ".stamp")
    mtime = str(os.path.getmtime(script)) + " " + str(os.path.getmtime(bench_script))
    if not os.path.exists(stamp) or open(stamp).read() != mtime:
        subprocess.run([sys.executable, script, args.work], check=True)
        # the issue-4 BERT-like encoder (4 layers, d 256, sequence 128) at batch 2
        subprocess.run([sys.executable, bench_script, args.work, "--only", "bert_encoder",
                        "--batches", "2"], check=True)
        with open(stamp, "w") as f:
            f.write(mtime)

    failures = 0
    print(f"{'model':24} {'output':10} {'rel L2':>10} {'max abs':>10}  verdict")
    for name in ("resnet18", "mobilenet_v2", "transformer_encoder", "bert_encoder_b2"):
        case = os.path.join(args.work, name)
        ds = os.path.join(case, "test_data_set_0")
        inputs = []
        i = 0
        while os.path.exists(os.path.join(ds, f"input_{i}.pb")):
            p = os.path.join(ds, f"input_{i}.pb")
            inputs.append((read_pb(p)[0], p))
            i += 1
        out = os.path.join(args.work, name + ".out")
        os.makedirs(out, exist_ok=True)
        try:
            run(args.onnxexec, os.path.join(case, "model.onnx"), inputs, out)
        except Exception as e:  # report and go on with the other models
            print(f"{name:24} FAIL: {e}")
            failures += 1
            continue
        j = 0
        while os.path.exists(os.path.join(ds, f"output_{j}.pb")):
            oname, want = read_pb(os.path.join(ds, f"output_{j}.pb"))
            got = np.load(os.path.join(out, oname + ".npy"))
            if got.shape != want.shape:
                print(f"{name:24} {oname:10} shape {got.shape} != {want.shape}  FAIL")
                failures += 1
            else:
                e = rel_l2(got, want)
                ok = e <= TOL_REL_L2
                failures += not ok
                print(f"{name:24} {oname:10} {e:10.2e} {np.abs(got - want).max():10.2e}  "
                      f"{'ok' if ok else 'FAIL'}")
            j += 1
        for batch in (1, 4):  # the planner: arena within 1.1x of the lower bound
            cmd = [args.onnxexec, "bench", os.path.join(case, "model.onnx"), "--runs", "1",
                   "--batch", str(batch), "--json"]
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
            try:
                js = json.loads(r.stdout)
                ratio = js["arena_bytes"] / max(js["lower_bound_bytes"], 1)
            except (ValueError, KeyError) as e:
                print(f"{name:24} bench --json failed: {e}: {r.stdout}{r.stderr}")
                failures += 1
                continue
            ok = ratio <= 1.1
            failures += not ok
            print(f"{name:24} {'arena':10} {ratio:10.3f} {'x lower bound, batch %d' % batch:>24}  "
                  f"{'ok' if ok else 'FAIL'}")

    # The shipped model: PyTorch's logits and the true labels.
    mdir = os.path.join(args.source, "models")
    labels = np.load(os.path.join(mdir, "fashion_mnist_test_labels.npy"))
    want = np.load(os.path.join(mdir, "fashion_mnist_cnn.expected.npy"))
    fimg = os.path.join(mdir, "fashion_mnist_test_images.npy")
    out = os.path.join(args.work, "fashion.out")
    os.makedirs(out, exist_ok=True)
    try:
        run(args.onnxexec, os.path.join(mdir, "fashion_mnist_cnn.onnx"), [("image", fimg)], out)
        got = np.load(os.path.join(out, "logits.npy"))
        e = rel_l2(got, want)
        acc = float((got.argmax(1) == labels).mean())
        agree = float((got.argmax(1) == want.argmax(1)).mean())
        ok = e <= TOL_REL_L2 and agree == 1.0
        failures += not ok
        print(f"{'fashion_mnist_cnn':24} {'logits':10} {e:10.2e} {np.abs(got - want).max():10.2e}  "
              f"{'ok' if ok else 'FAIL'} (accuracy {acc:.3f}, same labels as PyTorch: {agree:.3f})")
    except Exception as e:
        print(f"fashion_mnist_cnn FAIL: {e}")
        failures += 1
    print("model parity:", "FAILED" if failures else "all within", f"rel L2 <= {TOL_REL_L2:g}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
