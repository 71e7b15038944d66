#!/usr/bin/python3
"""TorchScript import against PyTorch: `onnxexec run model.pt` and the converted `.onnx`
must give what `torch.jit.load(model)(input)` gives.

    tests/torchscript_models.py --onnxexec build/onnxexec [--set ci|all] [--keep DIR]
                                [--filter REGEX] [--table FILE]

For each model (traced and/or scripted with Debian's torch 1.13, random weights, eval mode):
  1. torch.jit.save it, run torch.jit.load(file)(x) for the expected outputs;
  2. `onnxexec run file.pt -i x=x.npy`: relative L2 error <= 1e-5 on every output;
  3. `onnxexec convert file.pt file.onnx --shape ...`, `onnxexec run file.onnx`: the same
     bound, and onnx.checker (full check) accepts the file.
Then the archives written by torch 2.11 (../shared/torchscript/torch-2.11) must import, and
run where they are models: against torch 1.13's outputs where it can load them.
Then bad archives (a torch.save state dict, a .ptl, a quantized module, a truncated
archive) must each fail with a clear message, never a crash.

--set ci: small models and inputs (the CI test); --set all: every torchvision
classification model of torchvision 0.14 as well (slow; for the closing note's table).
Prints one line per model and a table (--table writes it as markdown). Exits 1 on failure.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

TOL = 1e-5
RESULTS = []  # (name, kind, status, err_pt, err_onnx, note)


def rel_l2(got, want):
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    if got.shape != want.shape:
        return float("inf")
    den = np.linalg.norm(want)
    num = np.linalg.norm(got - want)
    return float(num / den) if den > 0 else float(num)


def run(cmd, timeout=900):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


# ---- models ------------------------------------------------------------------------------

def small_models(torch):
    nn = torch.nn

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.act, self.fc2 = nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)

        def forward(self, x):
            return self.fc2(self.act(self.fc1(x)))

    class SmallCNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, padding=1)
            self.bn = nn.BatchNorm2d(8)
            self.pool = nn.MaxPool2d(2)
            self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1, groups=2)
            self.gap = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(16, 5)

        def forward(self, x):
            x = self.pool(torch.relu(self.bn(self.conv(x))))
            x = torch.nn.functional.hardtanh(self.conv2(x), 0.0, 6.0)
            return self.fc(torch.flatten(self.gap(x), 1))

    class Control(nn.Module):
        n_iter: int

        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(6, 6)
            self.scale = 2.0
            self.n_iter = 3

        def forward(self, x, flag: bool = True):
            y = self.lin(x)
            if self.n_iter > 2:
                y = y * self.scale
            else:
                y = -y
            for i in range(self.n_iter):
                y = torch.relu(y + i)
            parts = []
            for j in range(2):
                parts.append(y[j])
            if flag:
                y = y + torch.stack(parts).sum()
            return y, parts[0].size(0)

    class Seq(nn.Module):
        def __init__(self, rnn):
            super().__init__()
            self.rnn, self.head = rnn, nn.Linear(20, 5)

        def forward(self, x):
            out, _ = self.rnn(x)
            return self.head(out[:, -1, :])

    enc = nn.TransformerEncoderLayer(32, 4, 64, batch_first=True)
    dec = nn.TransformerDecoderLayer(32, 4, 64, batch_first=True)

    class Dec(nn.Module):
        def __init__(self):
            super().__init__()
            self.dec = dec

        def forward(self, x, mem):
            return self.dec(x, mem)

    class RuntimeIf(nn.Module):
        def __init__(self, sign: float):
            super().__init__()
            self.lin = nn.Linear(6, 6)
            self.sign = sign

        def forward(self, x):
            y = self.lin(x)
            if bool((y.sum() * self.sign) > 0):
                z = y * 2.0
                w = torch.relu(y)
            else:
                z = -y
                w = y
            return z + w

    torch.manual_seed(0)
    items = [
        ("runtime_if_then", RuntimeIf(1.0), [(2, 6)], ("script",)),
        ("runtime_if_else", RuntimeIf(-1.0), [(2, 6)], ("script",)),
        ("mlp", MLP(), [(2, 8)], ("trace", "script")),
        ("smallcnn", SmallCNN(), [(1, 3, 32, 32)], ("trace", "script")),
        ("control", Control(), [(2, 6)], ("script",)),
        ("lstm", Seq(nn.LSTM(10, 20, 2, batch_first=True)), [(2, 7, 10)], ("trace",)),
        ("gru", Seq(nn.GRU(10, 20, 2, batch_first=True)), [(2, 7, 10)], ("trace",)),
        ("transformer_enc", enc, [(2, 5, 32)], ("trace", "trace_fastpath", "script")),
        ("transformer_dec", Dec(), [(2, 5, 32), (2, 6, 32)], ("trace", "script")),
        ("transformer_stack", nn.TransformerEncoder(nn.TransformerEncoderLayer(32, 4, 64, batch_first=True), 2),
         [(2, 5, 32)], ("trace", "trace_fastpath", "script")),
        ("lstm_script", Seq(nn.LSTM(10, 20, 2, batch_first=True)), [(2, 7, 10)], ("script",)),
        ("gru_script", Seq(nn.GRU(10, 20, 2, batch_first=True)), [(2, 7, 10)], ("script",)),
    ]
    return items


def vision_models(torch, everything):
    import torchvision.models as tvm
    names = ["resnet18", "mobilenet_v2", "squeezenet1_1"]
    if everything:
        names = [n for n in sorted(tvm.__dict__) if not n.startswith("_") and
                 callable(tvm.__dict__[n]) and n.islower() and
                 n not in ("get_model", "get_weight", "list_models", "get_model_weights",
                           "get_model_builder")]
    out = []
    for n in names:
        size = 299 if n.startswith("inception") else 224 if n.startswith(("vit", "swin", "maxvit")) else 64
        kinds = ("trace", "script") if everything else ("trace",)
        out.append((n, lambda n=n: getattr(tvm, n)(), [(1, 3, size, size)], kinds))
    # a segmentation model: forward returns a dict ({"out": ...}), flattened into outputs
    out.append(("lraspp_mobilenet_v3_large",
                lambda: tvm.segmentation.lraspp_mobilenet_v3_large(weights_backbone=None),
                [(1, 3, 64, 64)], ("trace", "script")))
    return out


def save_model(torch, model, shapes, kind, path):
    model.eval()
    # torchvision zero-initializes some layers (ViT's and GoogLeNet's heads): the outputs would
    # then be constant and compare nothing; give such parameters random values
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for prm in model.parameters():
            if prm.numel() > 1 and not prm.abs().max() > 0:
                prm.copy_(torch.randn(prm.shape, generator=g) * 0.02)
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    ts = [torch.from_numpy(x) for x in xs]
    if kind == "script":
        m = torch.jit.script(model)
    elif kind == "trace_fastpath":
        with torch.no_grad():
            m = torch.jit.trace(model, tuple(ts), check_trace=False, strict=False)
    else:  # strict=False: dict outputs (torchvision's segmentation models) are traced too
        m = torch.jit.trace(model, tuple(ts), check_trace=False, strict=False)
    torch.jit.save(m, path)
    loaded = torch.jit.load(path)
    with torch.no_grad():
        y = loaded(*ts)
    flat = []

    def walk(v):  # the outputs in onnxexec's order: containers flattened, dicts by value
        if isinstance(v, dict):
            for i in v.values():
                walk(i)
        elif isinstance(v, (tuple, list)):
            for i in v:
                walk(i)
        elif isinstance(v, torch.Tensor):
            flat.append(v.numpy())
        elif v is None:  # absent optional results (aux outputs in eval): not outputs
            pass
        else:
            flat.append(np.array(v))
    walk(y)
    return xs, flat


def check_model(exe, work, name, kind, path, xs, want, arg_names):
    d = os.path.join(work, "%s_%s" % (name, kind))
    os.makedirs(d, exist_ok=True)
    args, shapes = [], []
    for an, x in zip(arg_names, xs):
        p = os.path.join(d, an + ".npy")
        np.save(p, x)
        args += ["-i", "%s=%s" % (an, p)]
        shapes += ["--shape", "%s=%s" % (an, ",".join(str(s) for s in x.shape))]
    errs = []
    for label, model, extra in (("pt", path, args), ("onnx", None, None)):
        if label == "onnx":
            model = os.path.join(d, "model.onnx")
            r = run([exe, "convert", path, model] + shapes)
            if r.returncode:
                return "FAIL", errs, "convert: " + (r.stderr.strip().splitlines() or ["?"])[-1][:300]
            try:
                import onnx
                onnx.checker.check_model(model, full_check=True)  # by path: models over 2 GiB have external data
            except Exception as e:
                return "FAIL", errs, "onnx.checker: " + " ".join(str(e).split())[:300]
            extra = args
        od = os.path.join(d, "out_" + label)
        r = run([exe, "run", model, "-o", od, "--threads", "2"] + extra)
        if r.returncode:
            return "FAIL", errs, "run %s: %s" % (label, (r.stderr.strip().splitlines() or ["?"])[-1][:300])
        # the files in the graph's output order, as `run` lists them ("  -> DIR/name.npy")
        outs = [ln.split("-> ", 1)[1].strip() for ln in r.stdout.splitlines()
                if ln.startswith("  -> ") and ln.strip().endswith(".npy")]
        got = [np.load(f) for f in outs]
        if len(got) != len(want):
            return "FAIL", errs, "%s: %d outputs, torch gives %d" % (label, len(got), len(want))
        err = max(rel_l2(g, w) for g, w in zip(got, want)) if want else 0.0
        errs.append(err)
        if not err <= TOL:
            return "FAIL", errs, "%s: relative L2 error %.3g > %g" % (label, err, TOL)
    return "PASS", errs, ""


def forward_arg_names(torch, path):
    m = torch.jit.load(path)
    sch = m.forward.schema if hasattr(m.forward, "schema") else m._c._get_method("forward").schema
    return [a.name for a in sch.arguments[1:]]


def test_models(exe, work, everything, rx):
    import torch
    torch.set_num_threads(2)
    run_items(torch, exe, work, small_models(torch) + vision_models(torch, everything), rx)


def run_items(torch, exe, work, items, rx, strict=False):
    """Check each (name, model or maker, input shapes, kinds) into RESULTS. A model torch
    cannot trace or script is skipped, or with strict (every case is ours) fails, as do
    non-finite expected outputs."""
    for name, model, shapes, kinds in items:
        for kind in kinds:
            if rx and not rx.search("%s_%s" % (name, kind)):
                continue
            t0 = time.time()
            path = os.path.join(work, "%s_%s.pt" % (name, kind))
            try:
                m = model() if callable(model) and not isinstance(model, torch.nn.Module) else model
                xs, want = save_model(torch, m, shapes, kind, path)
                arg_names = forward_arg_names(torch, path)[:len(xs)]
                if strict and not all(np.all(np.isfinite(np.asarray(w, np.float64))) for w in want):
                    raise ValueError("torch gives non-finite values")
            except Exception as e:  # torch itself cannot trace/script it: not ours
                status = "FAIL" if strict else "SKIP"
                RESULTS.append((name, kind, status, None, None,
                                "torch: " + " ".join(str(e).split())[:150]))
                print("%s %s %s (torch: %s)" % (status, name, kind, str(e).splitlines()[0][:100]))
                continue
            status, errs, note = check_model(exe, work, name, kind, path, xs, want, arg_names)
            e_pt = errs[0] if errs else None
            e_onnx = errs[1] if len(errs) > 1 else None
            RESULTS.append((name, kind, status, e_pt, e_onnx, note))
            print("%s %s %s  pt %s  onnx %s  (%.1f s)%s" % (
                status, name, kind, "%.2e" % e_pt if e_pt is not None else "-",
                "%.2e" % e_onnx if e_onnx is not None else "-", time.time() - t0,
                "  " + note if note else ""))
            sys.stdout.flush()


# The fixtures' forward arguments (SPEC-torchscript.md §9); traced ones carry their shapes.
FIXTURE_INPUTS = {
    "mlp_scripted": [("x", (2, 8))], "mlp_traced": [("x", (2, 8))],
    "smallcnn_scripted": [("x", (1, 3, 32, 32))], "smallcnn_traced": [("x", (1, 3, 32, 32))],
    "control_scripted": [("x", (2, 4))], "frozen_convbn": [("input", (1, 3, 16, 16))],
    "my.model.v1": [("input", (3, 2))], "saved_to_buffer": [("input", (3, 2))],
    "lstm_traced": None, "transformer_enc_traced": None, "transformer_enc_fastpath_traced": None,
}


def test_fixtures(exe, work, fixtures):
    """The torch 2.11 archives: they import, and run; against torch 1.13 where it loads them."""
    import torch
    if not os.path.isdir(fixtures):
        print("note: %s not found, torch 2.11 fixtures skipped" % fixtures)
        return
    for f in sorted(os.listdir(fixtures)):
        if not f.endswith(".pt"):
            continue
        name = f[:-3]
        path = os.path.join(fixtures, f)
        if name == "state_dict_torchsave":
            r = run([exe, "convert", path, os.path.join(work, "sd.onnx")])
            msg = (r.stderr.strip().splitlines() or [""])[-1][:300]
            ok = r.returncode == 1 and "torch.save" in r.stderr
            RESULTS.append((name, "torch 2.11", "PASS" if ok else "FAIL", None, None,
                            "refused: " + msg))
            print("%s fixture %s refused: %s" % ("PASS" if ok else "FAIL", name, msg))
            continue
        inputs = FIXTURE_INPUTS.get(name)
        args = []
        xs = []
        rng = np.random.default_rng(3)
        for an, shape in inputs or []:
            x = rng.standard_normal(shape).astype(np.float32)
            p = os.path.join(work, "fx_%s_%s.npy" % (name, an))
            np.save(p, x)
            xs.append(x)
            args += ["-i", "%s=%s" % (an, p)]
        od = os.path.join(work, "fx_" + name)
        r = run([exe, "run", path, "-o", od] + args)
        if r.returncode:
            msg = (r.stderr.strip().splitlines() or [""])[-1][:300]
            RESULTS.append((name, "torch 2.11", "FAIL", None, None, msg))
            print("FAIL fixture %s: %s" % (name, msg))
            continue
        note, err, status = "runs", None, "PASS"
        try:
            m = torch.jit.load(path)
            if xs:
                with torch.no_grad():
                    y = m(*[torch.from_numpy(x) for x in xs])
                y = y[0] if isinstance(y, tuple) else y
                got = np.load(os.path.join(od, "output_0.npy"))
                err = rel_l2(got, y.numpy())
                note = "runs; against torch 1.13"
                if not err <= TOL:
                    status, note = "FAIL", "relative L2 error %.3g against torch 1.13" % err
        except Exception as e:
            note = "runs; torch 1.13 cannot load it (%s)" % str(e).splitlines()[0][:80]
        RESULTS.append((name, "torch 2.11", status, err, None, note))
        print("%s fixture %s: %s%s" % (status, name, note, "" if err is None else " (%.2e)" % err))


def test_bad(exe, work):
    import torch
    cases = []
    sd = os.path.join(work, "state_dict.pt")
    torch.save(torch.nn.Linear(3, 2).state_dict(), sd)
    cases.append(("torch.save state dict", sd, "torch.save"))
    lin = torch.jit.script(torch.nn.Linear(3, 2))
    ptl = os.path.join(work, "lite.ptl")
    lin._save_for_lite_interpreter(ptl)
    # a .ptl that keeps the TorchScript code (what torch 1.13 writes) runs like a .pt; one
    # with bytecode only is refused
    import zipfile
    bare = os.path.join(work, "bytecode_only.ptl")
    with zipfile.ZipFile(ptl) as zi, zipfile.ZipFile(bare, "w") as zo:
        for it in zi.infolist():
            if "/code/" not in it.filename and not it.filename.endswith("constants.pkl"):
                zo.writestr(it, zi.read(it.filename))
    cases.append(("lite-interpreter archive without code", bare, "lite-interpreter"))
    x = np.random.default_rng(1).standard_normal((2, 3)).astype(np.float32)
    xp = os.path.join(work, "ptl_x.npy")
    np.save(xp, x)
    od = os.path.join(work, "ptl_out")
    r = run([exe, "run", ptl, "-i", "input=" + xp, "-o", od])
    with torch.no_grad():
        want = torch.jit.load(ptl)(torch.from_numpy(x)).numpy()
    err = rel_l2(np.load(os.path.join(od, "output_0.npy")), want) if r.returncode == 0 else None
    ok = err is not None and err <= TOL
    RESULTS.append(("lite-interpreter .ptl with code", "torch 1.13", "PASS" if ok else "FAIL", err,
                    None, "runs like a .pt" if ok else (r.stderr.strip()[:200])))
    print("%s .ptl with code: %s" % ("PASS" if ok else "FAIL", err))
    q = torch.quantization.quantize_dynamic(torch.nn.Sequential(torch.nn.Linear(4, 4)),
                                            {torch.nn.Linear}, dtype=torch.qint8)
    qp = os.path.join(work, "quantized.pt")
    torch.jit.save(torch.jit.script(q), qp)
    cases.append(("quantized module", qp, "quantiz"))
    class Unknown(torch.nn.Module):
        def forward(self, x):
            return torch.cummax(x, 0)[0]

    unk = os.path.join(work, "unknown_op.pt")
    torch.jit.save(torch.jit.script(Unknown()), unk)
    cases.append(("an unknown aten op (named with its file and line)", unk, "cummax: unknown operator"))
    good = os.path.join(work, "trunc_src.pt")
    torch.jit.save(lin, good)
    data = open(good, "rb").read()
    tr = os.path.join(work, "truncated.pt")
    open(tr, "wb").write(data[:len(data) // 2])
    cases.append(("truncated archive", tr, ""))
    for what, path, words in cases:
        r = run([exe, "run", path, "--shape", "input=2,3", "--shape", "x=2,3"])
        ok = r.returncode == 1 and words.lower() in r.stderr.lower() and "Traceback" not in r.stderr
        if "line" in what:
            ok = ok and re.search(r"code/\S+\.py:\d+: ", r.stderr) is not None
        RESULTS.append((what, "bad input", "PASS" if ok else "FAIL", None, None,
                        (r.stderr.strip().splitlines() or [""])[-1][:200]))
        print("%s bad input %s: exit %d: %s" % ("PASS" if ok else "FAIL", what, r.returncode,
                                                 r.stderr.strip()[:200]))


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--onnxexec", required=True)
    p.add_argument("--set", choices=("ci", "all"), default="ci")
    p.add_argument("--keep", help="keep the files in this folder")
    p.add_argument("--filter", help="only models whose name_kind matches this regex")
    p.add_argument("--table", help="write the results as a markdown table to this file")
    p.add_argument("--fixtures", default=os.path.join(here, "..", "..", "shared", "torchscript",
                                                      "torch-2.11"))
    args = p.parse_args()
    exe = os.path.abspath(args.onnxexec)
    work = args.keep or tempfile.mkdtemp(prefix="ox-ts-")
    os.makedirs(work, exist_ok=True)
    rx = re.compile(args.filter) if args.filter else None
    try:
        test_models(exe, work, args.set == "all", rx)
        if not rx:
            test_fixtures(exe, work, args.fixtures)
            test_bad(exe, work)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    lines = ["| model | kind | result | rel. L2 (.pt) | rel. L2 (.onnx) | note |",
             "| --- | --- | --- | ---: | ---: | --- |"]
    for name, kind, status, a, b, note in RESULTS:
        lines.append("| %s | %s | %s | %s | %s | %s |" % (
            name, kind, status, "%.2e" % a if a is not None else "", "%.2e" % b if b is not None else "",
            note.replace("|", "/")))
    if args.table:
        with open(args.table, "w") as f:
            f.write("\n".join(lines) + "\n")
    fails = [r for r in RESULTS if r[2] == "FAIL"]
    print("\n%d passed, %d failed, %d skipped" % (sum(r[2] == "PASS" for r in RESULTS), len(fails),
                                                 sum(r[2] == "SKIP" for r in RESULTS)))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
