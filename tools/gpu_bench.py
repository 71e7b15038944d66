#!/usr/bin/python3
"""Time onnxexec's CUDA device against PyTorch (eager and torch.compile) on one GPU.

    tools/gpu_bench.py --onnxexec build/onnxexec [--work build/gpu_bench]
                       [--models resnet18,resnet50,mobilenet_v2,bert_base]
                       [--batches 1,32] [--precisions fp32,fp16] [--runs 50]
                       [--no-compile] [--budget 330]
                       [--out docs/GPU_BENCHMARKS.md] [--json-out build/gpu_bench.json]

Models (random seeded weights, eval mode, no download):

    resnet18, resnet50, mobilenet_v2   torchvision, input float32 [N,3,224,224]
    bert_base                          nn.TransformerEncoder: 12 x TransformerEncoderLayer
                                       (d_model 768, 12 heads, dim_feedforward 3072, gelu,
                                       post-norm, batch_first), input float32 [N,128,768]

BatchNorm running statistics and affine parameters and every transformer parameter are
redrawn from a seeded generator (as models/export_bench.py does), so the numbers are those
of a model with non-trivial weights. Each model is exported once to WORK/<name>.onnx at
opset 17 with a dynamic batch axis ("N") by the TorchScript exporter
(torch.onnx.export(..., dynamo=False); a torch without that keyword gets the call without
it; a torch without that exporter gets the dynamo exporter, and the report says which ran).
The MHA fast path is off while exporting. A file whose WORK/<name>.meta.json matches the
torch version and seed is reused (--reexport forces a new export).

For every model x batch x precision it measures, in this order, so that the numbers that
matter most come first when time runs short:

  1. onnxexec: `ONNXEXEC bench WORK/<name>.onnx --device DEV --precision P --batch N
     --runs R --warmup W --json` (its median_ms and p90_ms), and PyTorch eager
     (torch.inference_mode, cudnn.benchmark on, fp16 = model.half() and half inputs, inputs
     already on the GPU; W untimed runs, then R runs each timed on the host between two
     torch.cuda.synchronize(), as onnxexec's bench times each run on the host); the two
     alternate --rounds times (default 3) and each side's round with the lowest median is
     reported (all rounds' medians are in the JSON), since one round of eager has moved by
     2x between runs on the same GPU;
  2. torch.compile, mode "reduce-overhead" (CUDA graphs) for every model x precision, then
     mode "default", at the --compile-batches (default 1): the first call (the compile) is
     timed apart, then 3 untimed runs and R timed ones. A compile that fails is reported
     with its error and the run goes on.

fp32 means fp32 on both sides: TF32 is off for PyTorch (cuBLAS and cuDNN); "tf32" may be
named in --precisions and turns it on for PyTorch and passes --precision tf32 to onnxexec.
PyTorch eager runs with its default MHA fast path for bert_base (--eager-fastpath off to
time the plain path); the torch.compile runs have it off (Inductor fuses on its own).

--budget SECONDS (default 330, the whole run from its start): no measurement starts past
it, and no compile starts with less than --compile-reserve (default 45) seconds left, since
a compile cannot be cut short; what is skipped is reported as "not run". --out and
--json-out are written once after step 1 (marked PARTIAL) and again at the end; SIGTERM or
Ctrl-C stops the run and writes what was measured (marked INTERRUPTED). Progress lines with
the elapsed time go to standard error.

The report: per configuration the medians (ms) of eager, compile default, compile
reduce-overhead and onnxexec, onnxexec / eager and onnxexec / the better compile mode; the
compile and onnxexec start-up times; then the bar of issue 8, one PASS / FAIL / n/a line
each: at batch 1, onnxexec <= 0.5 x eager and <= 1.0 x the better compile mode (every model
and precision); at larger batches onnxexec <= 1.0 x eager, and onnxexec fp16 at least 2 x
faster than its fp32. Printed, and with --out written as Markdown with the command line,
date, GPU, and versions; --json-out writes every figure. Exit status 0 unless nothing ran.

Output checks are not made here (a separate test compares outputs). torch is imported
lazily, so --help works without it. Run it as a script (python3 tools/gpu_bench.py): with
`python3 -c` from the repository's root, its onnx/ folder would shadow the onnx package.
"""
import argparse
import contextlib
import copy
import datetime
import gc
import json
import math
import os
import shlex
import signal
import subprocess
import sys
import time

OPSET = 17
SEED = 0
TRACE_BATCH = 2  # not 1, so that nothing in the exported graph is specialised to batch 1
MODEL_NAMES = ["resnet18", "resnet50", "mobilenet_v2", "bert_base"]
COMPILE_MODES = ["reduce-overhead", "default"]  # order of measurement (see the docstring)

BAR_B1_EAGER = 0.5  # batch 1: onnxexec <= 0.5 x eager
BAR_B1_COMPILE = 1.0  # batch 1: onnxexec <= 1.0 x the better compile mode
BAR_BIG_EAGER = 1.0  # larger batches: onnxexec <= 1.0 x eager
BAR_FP16_SPEEDUP = 2.0  # larger batches: onnxexec fp32 / fp16 >= 2

torch = None  # imported by _torch(), so that --help needs no torch
_T0 = time.time()


def _torch():
    global torch
    if torch is None:
        import torch as t
        torch = t
    return torch


def log(msg):
    sys.stderr.write(f"[{time.time() - _T0:7.1f}s] {msg}\n")
    sys.stderr.flush()


def first_line(text):
    for line in str(text).splitlines():
        if line.strip():
            return line.strip()[:300]
    return str(text).strip()[:300] or "(no message)"


# ---- models ---------------------------------------------------------------------------------

def _parity():
    """models/export_parity.py, whose seeding and weight randomisation the models share with
    the CPU benchmark's and parity tests' (it imports torch, so it is loaded when needed)."""
    _torch()
    models = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models")
    if models not in sys.path:
        sys.path.insert(0, models)
    import export_parity
    return export_parity


def build_model(name):
    """(fp32 CPU module in eval mode, per-sample input shape) for model `name`."""
    parity = _parity()
    index = MODEL_NAMES.index(name)
    parity.seed_everything(SEED)
    gen = torch.Generator().manual_seed(3000 + index)
    if name == "bert_base":
        nn = torch.nn
        layer = nn.TransformerEncoderLayer(d_model=768, nhead=12, dim_feedforward=3072,
                                           dropout=0.1, activation="gelu", batch_first=True)
        # enable_nested_tensor=False: keep the plain (exportable) code path.
        m = nn.TransformerEncoder(layer, num_layers=12, enable_nested_tensor=False).eval()
        parity.randomise_transformer(m, gen)
        return m, (128, 768)
    import torchvision
    m = getattr(torchvision.models, name)(weights=None).eval()
    parity.randomise_batchnorm(m, gen)
    return m, (3, 224, 224)


def make_input(name, shape, batch):
    index = MODEL_NAMES.index(name)
    gen = _torch().Generator().manual_seed(100 * index + batch)
    return torch.randn((batch,) + tuple(shape), generator=gen)


def mha_fastpath(enabled):
    """Set the MHA fast path (torch >= 2.0); returns the previous setting or None."""
    mha = getattr(_torch().backends, "mha", None)
    if mha is None or not hasattr(mha, "set_fastpath_enabled"):
        return None
    prev = mha.get_fastpath_enabled() if hasattr(mha, "get_fastpath_enabled") else True
    mha.set_fastpath_enabled(bool(enabled))
    return prev


@contextlib.contextmanager
def fastpath_set(enabled):
    prev = mha_fastpath(enabled)
    try:
        yield
    finally:
        if prev is not None:
            mha_fastpath(prev)


# ---- export ---------------------------------------------------------------------------------

def export_onnx(model, name, shape, path):
    """Export `model` (fp32, CPU) to `path`, opset 17, batch axis dynamic ("N").
    Returns a note naming the exporter that ran."""
    _torch()
    x = make_input(name, shape, TRACE_BATCH)
    common = dict(export_params=True, opset_version=OPSET, input_names=["input"],
                  output_names=["output"], dynamic_axes={"input": {0: "N"}, "output": {0: "N"}})
    legacy = dict(common, do_constant_folding=True)
    with fastpath_set(False):
        try:
            torch.onnx.export(model, (x,), path, dynamo=False, **legacy)
            return "TorchScript exporter (dynamo=False)"
        except TypeError as e:
            if "dynamo" not in str(e):
                raise
        # A torch without the keyword (< 2.5) has only the TorchScript exporter.
        try:
            torch.onnx.export(model, (x,), path, **legacy)
            return "TorchScript exporter (this torch has no dynamo= keyword)"
        except Exception as e:  # noqa: BLE001
            legacy_err = first_line(e)
        log(f"{name}: the TorchScript exporter failed ({legacy_err}); trying dynamo=True")
        torch.onnx.export(model, (x,), path, dynamo=True, **common)
        return f"dynamo exporter (TorchScript exporter failed: {legacy_err})"


def check_onnx(path):
    """(n_nodes, batch axis is dynamic) of the exported file, or (None, None) without onnx."""
    try:
        import onnx
    except ImportError:
        return None, None
    m = onnx.load(path, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    ins = [i for i in m.graph.input if i.name not in inits]
    dyn = bool(ins) and ins[0].type.tensor_type.shape.dim[0].dim_param != ""
    return len(m.graph.node), dyn


def ensure_exported(name, model, shape, work, reexport=False):
    """Path of WORK/<name>.onnx, exported unless an up-to-date one is there; and its info."""
    path = os.path.join(work, f"{name}.onnx")
    meta_path = os.path.join(work, f"{name}.meta.json")
    want = {"model": name, "torch": str(_torch().__version__), "seed": SEED, "opset": OPSET,
            "trace_batch": TRACE_BATCH}
    if not reexport and os.path.exists(path) and os.path.exists(meta_path):
        try:
            with open(meta_path) as f:
                meta = json.load(f)
            if all(meta.get(k) == v for k, v in want.items()):
                meta["reused"] = True
                return path, meta
        except (OSError, ValueError):
            pass
    t0 = time.time()
    exporter = export_onnx(model, name, shape, path)
    n_nodes, dyn = check_onnx(path)
    meta = dict(want, exporter=exporter, export_s=round(time.time() - t0, 2),
                bytes=os.path.getsize(path), n_nodes=n_nodes, dynamic_batch=dyn)
    with open(meta_path, "w") as f:
        json.dump(meta, f, indent=1)
    meta["reused"] = False
    return path, meta


# ---- timing ---------------------------------------------------------------------------------

def summarise(times_ms):
    t = sorted(times_ms)
    n = len(t)
    med = t[n // 2] if n % 2 else (t[n // 2 - 1] + t[n // 2]) / 2
    i90 = max(0, math.ceil(0.9 * n) - 1)  # as onnxexec's bench_report
    return {"median_ms": med, "p90_ms": t[i90], "min_ms": t[0], "runs": n}


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_calls(fn, device, warmup, runs):
    for _ in range(warmup):
        fn()
    sync(device)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        sync(device)
        times.append((time.perf_counter() - t0) * 1e3)
    return summarise(times)


def set_tf32(on):
    """TF32 for cuBLAS and cuDNN, by the legacy flags only: torch >= 2.9 refuses to read a
    mix of those and the new fp32_precision API, and Inductor reads the legacy ones."""
    try:
        torch.backends.cuda.matmul.allow_tf32 = on
        torch.backends.cudnn.allow_tf32 = on
    except RuntimeError:  # a torch that takes only the new API
        torch.backends.cuda.matmul.fp32_precision = "tf32" if on else "ieee"
        torch.backends.cudnn.conv.fp32_precision = "tf32" if on else "ieee"


def torch_dtype(precision):
    return {"fp16": torch.float16, "bf16": torch.bfloat16}.get(precision, torch.float32)


def model_on(cpu_model, device, precision):
    m = copy.deepcopy(cpu_model).to(device)
    return m.to(torch_dtype(precision)) if precision in ("fp16", "bf16") else m


def free_gpu():
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def measure_eager(model, x, device, args):
    with torch.inference_mode():
        r = time_calls(lambda: model(x), device, args.warmup, args.runs)
        y = model(x)
        sync(device)
        r["finite"] = bool(torch.isfinite(y.float()).all())
    return r


def measure_eager_host(model, x_host, device, precision, args):
    """Eager from host memory to host memory, as onnxexec's API runs: the float32 input
    copied to the GPU (and cast there), the output copied back as float32."""
    dt = torch_dtype(precision)

    def call():
        return model(x_host.to(device).to(dt)).float().cpu()

    with torch.inference_mode():
        return time_calls(call, device, args.warmup, args.runs)


def measure_compile(model, x, device, mode, args):
    if not hasattr(torch, "compile"):
        raise RuntimeError(f"torch {torch.__version__} has no torch.compile")
    torch._dynamo.reset()
    with fastpath_set(False), torch.inference_mode():
        cm = torch.compile(model, mode=mode)
        t0 = time.perf_counter()
        cm(x)
        sync(device)
        compile_s = time.perf_counter() - t0
        r = time_calls(lambda: cm(x), device, args.compile_warmup, args.runs)
    r["compile_s"] = compile_s
    return r


def run_onnxexec(args, path, precision, batch, timeout):
    cmd = [args.onnxexec, "bench", path, "--device", args.device, "--precision", precision,
           "--batch", str(batch), "--runs", str(args.runs), "--warmup", str(args.warmup), "--json"]
    env = dict(os.environ, ONNXEXEC_PROGRESS="0")
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f}s", "cmd": shlex.join(cmd)}
    except OSError as e:
        return {"error": first_line(e), "cmd": shlex.join(cmd)}
    if p.returncode != 0:
        return {"error": f"exit {p.returncode}: {first_line(p.stderr or p.stdout)}",
                "cmd": shlex.join(cmd)}
    obj = None
    try:
        obj = json.loads(p.stdout)
    except ValueError:
        for line in reversed(p.stdout.splitlines()):
            if line.strip().startswith("{"):
                try:
                    obj = json.loads(line)
                    break
                except ValueError:
                    pass
    if not isinstance(obj, dict) or "median_ms" not in obj:
        return {"error": f"no JSON with median_ms in its output: {first_line(p.stdout)}",
                "cmd": shlex.join(cmd)}
    keep = ("median_ms", "p90_ms", "min_ms", "runs", "load_ms", "create_ms", "first_run_ms",
            "arena_bytes", "peak_rss_kb")
    r = {k: obj[k] for k in keep if k in obj}
    r["cmd"] = shlex.join(cmd)
    return r


# ---- report ---------------------------------------------------------------------------------

def med(cell):
    return cell.get("median_ms") if isinstance(cell, dict) else None


def fmt_cell(cell):
    if not isinstance(cell, dict):
        return "not run"
    if "median_ms" in cell:
        return f"{cell['median_ms']:.3f}"
    if "error" in cell:
        return "failed"
    return cell.get("status", "not run")


def describe(cell):
    if "median_ms" in cell:
        return f"median {cell['median_ms']:.3f} ms, p90 {cell['p90_ms']:.3f} ms"
    return f"failed: {cell['error']}" if "error" in cell else cell.get("status", "not run")


def ratio(a, b):
    return a / b if a is not None and b else None


def fmt_ratio(x):
    return "—" if x is None else f"{x:.2f}"


def best_compile(row):
    vals = [med(row.get(m)) for m in COMPILE_MODES]
    vals = [v for v in vals if v is not None]
    return min(vals) if vals else None


def table_rows(rows):
    head = ["model", "batch", "precision", "eager ms", "eager host-to-host ms",
            "compile default ms", "compile reduce-overhead ms", "onnxexec ms",
            "onnxexec / eager", "onnxexec / eager host-to-host",
            "onnxexec / best compile"]
    out = []
    for r in rows:
        ox = med(r.get("onnxexec"))
        out.append([r["model"], str(r["batch"]), r["precision"], fmt_cell(r.get("eager")),
                    fmt_cell(r.get("eager_host")),
                    fmt_cell(r.get("default")), fmt_cell(r.get("reduce-overhead")),
                    fmt_cell(r.get("onnxexec")), fmt_ratio(ratio(ox, med(r.get("eager")))),
                    fmt_ratio(ratio(ox, med(r.get("eager_host")))),
                    fmt_ratio(ratio(ox, best_compile(r)))])
    return head, out


def bar_checks(rows):
    """[(status, text)], status PASS / FAIL / n/a."""
    by = {(r["model"], r["batch"], r["precision"]): r for r in rows}
    checks = []

    def check(ok, text):
        checks.append(("n/a" if ok is None else "PASS" if ok else "FAIL", text))

    for r in rows:
        m, b, p = r["model"], r["batch"], r["precision"]
        ox, eg = med(r.get("onnxexec")), med(r.get("eager"))
        tag = f"{m} b{b} {p}"
        if b == 1:
            q = ratio(ox, eg)
            check(None if q is None else q <= BAR_B1_EAGER,
                  f"{tag}: onnxexec <= {BAR_B1_EAGER} x eager ({fmt_ratio(q)})")
            bc = best_compile(r)
            q = ratio(ox, bc)
            missing = [k for k in COMPILE_MODES if med(r.get(k)) is None]
            note = f"; {', '.join(missing)} missing" if missing and bc is not None else ""
            check(None if q is None else q <= BAR_B1_COMPILE,
                  f"{tag}: onnxexec <= {BAR_B1_COMPILE} x better compile mode "
                  f"({fmt_ratio(q)}{note})")
        else:
            q = ratio(ox, eg)
            check(None if q is None else q <= BAR_BIG_EAGER,
                  f"{tag}: onnxexec <= {BAR_BIG_EAGER} x eager ({fmt_ratio(q)})")
    models = list(dict.fromkeys(r["model"] for r in rows))
    batches = sorted({r["batch"] for r in rows if r["batch"] > 1})
    for m in models:
        for b in batches:
            r32, r16 = by.get((m, b, "fp32")), by.get((m, b, "fp16"))
            if r32 is None or r16 is None:
                continue
            q = ratio(med(r32.get("onnxexec")), med(r16.get("onnxexec")))
            check(None if q is None else q >= BAR_FP16_SPEEDUP,
                  f"{m} b{b}: onnxexec fp16 >= {BAR_FP16_SPEEDUP} x faster than fp32 "
                  f"(fp32 / fp16 = {fmt_ratio(q)})")
    return checks


def startup_rows(rows):
    out = []
    for r in rows:
        ox = r.get("onnxexec") or {}
        parts = [ox.get(k) for k in ("load_ms", "create_ms", "first_run_ms")]
        ox_s = f"{sum(parts) / 1e3:.2f}" if all(v is not None for v in parts) else "—"
        cs = []
        for x in [r.get("default"), r.get("reduce-overhead")]:
            cs.append(f"{x['compile_s']:.1f}" if isinstance(x, dict) and "compile_s" in x
                      else fmt_cell(x))
        out.append([r["model"], str(r["batch"]), r["precision"], ox_s] + cs)
    return ["model", "batch", "precision", "onnxexec load + session + first run (s)",
            "compile default (s)", "compile reduce-overhead (s)"], out


def errors(rows):
    out = []
    for r in rows:
        for k in ["onnxexec", "eager", "eager_host"] + COMPILE_MODES:
            c = r.get(k)
            if isinstance(c, dict) and "error" in c:
                out.append(f"{r['model']} b{r['batch']} {r['precision']} {k}: {c['error']}")
    return out


def text_table(head, rows):
    w = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    lines = ["  ".join(str(x).ljust(n) if i < 3 else str(x).rjust(n)
                       for i, (x, n) in enumerate(zip(line, w))) for line in [head] + rows]
    return "\n".join(lines)


def md_table(head, rows):
    lines = ["| " + " | ".join(head) + " |",
             "| " + " | ".join("---" if i < 3 else "---:" for i in range(len(head))) + " |"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def markdown(info, rows, exports, checks, errs):
    head, body = table_rows(rows)
    shead, sbody = startup_rows(rows)
    n = {s: sum(1 for c in checks if c[0] == s) for s in ("PASS", "FAIL", "n/a")}
    lines = [
        "# GPU benchmarks: onnxexec (CUDA) against PyTorch eager and torch.compile",
        "",
        "Produced by:",
        "",
        f"    {info['command']}",
        "",
        f"Date: {info['date']}. GPU: {info['gpu']}. torch {info['torch']} (CUDA {info['cuda']}, "
        f"cuDNN {info['cudnn']}), torchvision {info['torchvision']}. onnxexec: "
        f"{info['onnxexec_version']}. Wall time of the run: {info['elapsed_s']:.0f} s "
        f"(budget {info['budget_s']:.0f} s)"
        f"{'' if info['complete'] else '; PARTIAL: written before the compile phase'}"
        f"{'; INTERRUPTED: the rest was not run' if info.get('interrupted') else ''}.",
        "",
        f"Medians of {info['runs']} runs, each timed on the host and ended by a device "
        f"synchronisation; onnxexec and eager alternate {info.get('rounds', 1)} times per "
        f"configuration and each side's lowest median counts (onnxexec: its own "
        f"`bench --json`, after {info['warmup']} untimed "
        f"runs; eager: after {info['warmup']} untimed runs, torch.inference_mode, "
        f"cudnn.benchmark on; torch.compile: the first call (compile) timed apart, then "
        f"{info['compile_warmup']} untimed runs). Inputs on the GPU for PyTorch, except in "
        f"'eager host-to-host' (a float32 input in host memory copied in and cast, the "
        f"output copied back as float32, as onnxexec's runs do). fp32: TF32 "
        f"off in PyTorch (cuBLAS, cuDNN); fp16: model.half() and half inputs in PyTorch, "
        f"`--precision fp16` for onnxexec on the fp32 ONNX file. bert_base eager: MHA fast "
        f"path {info['eager_fastpath']}; torch.compile runs with it off. Models: random "
        f"seeded weights, exported at opset {OPSET} with a dynamic batch axis "
        f"({'; '.join(f'{k}: {v}' for k, v in exports.items())}).",
        "",
        "## Latency (ms)",
        "",
        md_table(head, body),
        "",
        "## Start-up",
        "",
        md_table(shead, sbody),
        "",
        f"## Bar (issue 8): {n['PASS']} PASS, {n['FAIL']} FAIL, {n['n/a']} n/a",
        "",
    ]
    lines += [f"- {s}: {t}" for s, t in checks]
    if errs:
        lines += ["", "## Errors (first line of each)", ""] + [f"- {e}" for e in errs]
    return "\n".join(lines) + "\n"


def onnxexec_version(path):
    try:
        p = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=20)
        return first_line(p.stdout or p.stderr)
    except (OSError, subprocess.SubprocessError) as e:
        return f"unknown ({first_line(e)})"


# ---- main -----------------------------------------------------------------------------------

def parse_list(text, conv=str):
    return [conv(x.strip()) for x in text.split(",") if x.strip()]


def parse_args(argv):
    doc = __doc__.split("\n\n")
    ap = argparse.ArgumentParser(description=doc[0], epilog="\n\n".join(doc[1:]),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--onnxexec", required=True, help="the onnxexec binary")
    ap.add_argument("--work", default="build/gpu_bench", help="folder for the ONNX files")
    ap.add_argument("--models", default=",".join(MODEL_NAMES),
                    help="comma list of: " + ", ".join(MODEL_NAMES))
    ap.add_argument("--batches", default="1,32")
    ap.add_argument("--precisions", default="fp32,fp16",
                    help="comma list of fp32, fp16, bf16, tf32")
    ap.add_argument("--runs", type=int, default=50, help="timed runs per measurement")
    ap.add_argument("--warmup", type=int, default=10, help="untimed runs before (eager, onnxexec)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="onnxexec and eager alternate this many times per configuration; "
                         "each side's lowest median counts")
    ap.add_argument("--compile-warmup", type=int, default=3,
                    help="untimed runs after the compile")
    ap.add_argument("--compile-batches", default="1", help="batches timed with torch.compile")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    ap.add_argument("--budget", type=float, default=330.0,
                    help="seconds for the whole run; no measurement starts past it")
    ap.add_argument("--compile-reserve", type=float, default=45.0,
                    help="no compile starts with fewer seconds of the budget left")
    ap.add_argument("--onnxexec-timeout", type=float, default=120.0,
                    help="seconds for one onnxexec bench")
    ap.add_argument("--device", default="cuda", help="cuda or cuda:N (both sides)")
    ap.add_argument("--eager-fastpath", choices=["on", "off"], default="on",
                    help="bert_base eager with the MHA fast path (PyTorch's default) or not")
    ap.add_argument("--reexport", action="store_true", help="export even if WORK has the file")
    ap.add_argument("--export-only", action="store_true", help="export the models and stop")
    ap.add_argument("--out", help="Markdown report")
    ap.add_argument("--json-out", help="JSON with every figure")
    a = ap.parse_args(argv)
    a.models = parse_list(a.models)
    bad = [m for m in a.models if m not in MODEL_NAMES]
    if bad:
        ap.error("unknown model(s): " + ", ".join(bad))
    try:
        a.batches = parse_list(a.batches, int)
        a.compile_batches = parse_list(a.compile_batches, int)
    except ValueError:
        ap.error("--batches and --compile-batches take integers, as 1,32")
    if not a.batches or min(a.batches) < 1:
        ap.error("--batches: at least one batch, each >= 1")
    a.precisions = parse_list(a.precisions)
    bad = [p for p in a.precisions if p not in ("fp32", "fp16", "bf16", "tf32")]
    if bad or not a.precisions:
        ap.error("--precisions: fp32, fp16, bf16 or tf32, not " + ", ".join(bad))
    if a.runs < 1 or a.warmup < 0 or a.compile_warmup < 0 or a.rounds < 1:
        ap.error("--runs and --rounds must be >= 1, warm-ups >= 0")
    return a


class Interrupted(Exception):
    """SIGTERM (a timeout around this script): stop, and report what was measured."""


def _on_sigterm(signum, frame):
    raise Interrupted()


def export_all(args):
    """({name: (cpu model, shape)}, {name: onnx path}, {name: exporter note or error})."""
    cpu_models, paths, exports = {}, {}, {}
    for name in args.models:
        t0 = time.time()
        model, shape = build_model(name)
        cpu_models[name] = (model, shape)
        try:
            paths[name], meta = ensure_exported(name, model, shape, args.work, args.reexport)
            exports[name] = meta["exporter"]
            log(f"{name}: {'reused' if meta['reused'] else 'exported'} {paths[name]} "
                f"({meta['exporter']}; {meta.get('n_nodes')} nodes, dynamic batch "
                f"{meta.get('dynamic_batch')}; {time.time() - t0:.1f}s)")
        except Exception as e:  # noqa: BLE001
            exports[name] = f"export failed: {first_line(e)}"
            log(f"{name}: export failed: {first_line(e)}")
    return cpu_models, paths, exports


def keep_best(row, key, cell):
    """row[key] = the measurement with the lowest median of the rounds so far (an error only
    while no round succeeded); row[key]["round_medians"] lists every round's median."""
    old = row.get(key)
    meds = (old.get("round_medians", []) if isinstance(old, dict) else []) + \
        ([med(cell)] if med(cell) is not None else [])
    if med(cell) is not None and (med(old) is None or med(cell) < med(old)):
        row[key] = dict(cell)
    elif old is None:
        row[key] = dict(cell)
    if isinstance(row[key], dict) and meds:
        row[key]["round_medians"] = meds


def phase_eager_onnxexec(args, device, cpu_models, paths, exports, by, left):
    """onnxexec and eager for every configuration, alternately, --rounds times each: the
    round with the lowest median counts, for each side alike (the GPU's clocks and the host
    drift between minutes: one round's eager median has moved by 2x between runs)."""
    for name in args.models:
        cpu_model, shape = cpu_models[name]
        for p in args.precisions:
            set_tf32(p == "tf32")
            gpu_model = None
            for b in args.batches:
                r = by[(name, b, p)]
                tag = f"{name} b{b} {p}"
                if left() <= 0:
                    log(f"{tag}: not run (budget)")
                    continue
                for rnd in range(args.rounds):
                    if rnd and left() <= 0:
                        break
                    if name in paths:
                        o = run_onnxexec(args, paths[name], p, b,
                                         max(20.0, min(args.onnxexec_timeout, left())))
                    else:
                        o = {"error": exports[name]}
                    keep_best(r, "onnxexec", o)
                    log(f"{tag} onnxexec: {describe(o)}")
                    try:
                        if gpu_model is None:
                            gpu_model = model_on(cpu_model, device, p)
                        x_host = make_input(name, shape, b)
                        x = x_host.to(device, torch_dtype(p))
                        with fastpath_set(args.eager_fastpath == "on"):
                            e = measure_eager(gpu_model, x, device, args)
                            h = measure_eager_host(gpu_model, x_host, device, p, args)
                        del x, x_host
                    except Exception as ex:  # noqa: BLE001
                        e = h = {"error": first_line(ex)}
                    keep_best(r, "eager", e)
                    keep_best(r, "eager_host", h)
                    log(f"{tag} eager: {describe(e)}, host to host: {describe(h)}")
            del gpu_model
            free_gpu()


def phase_compile(args, device, cpu_models, by, left):
    """torch.compile: reduce-overhead for every configuration first, then default."""
    for mode in COMPILE_MODES:
        for name in args.models:
            cpu_model, shape = cpu_models[name]
            for p in args.precisions:
                for b in args.batches:
                    r = by[(name, b, p)]
                    if b not in args.compile_batches:
                        r[mode] = {"status": "—"}
                        continue
                    if args.no_compile:
                        r[mode] = {"status": "skipped"}
                        continue
                    tag = f"{name} b{b} {p} compile {mode}"
                    if left() < args.compile_reserve:
                        log(f"{tag}: not run (budget: {left():.0f}s left)")
                        continue
                    log(f"{tag}: compiling")
                    set_tf32(p == "tf32")
                    gpu_model = x = None
                    try:
                        gpu_model = model_on(cpu_model, device, p)
                        x = make_input(name, shape, b).to(device, torch_dtype(p))
                        r[mode] = measure_compile(gpu_model, x, device, mode, args)
                    except Exception as e:  # noqa: BLE001
                        r[mode] = {"error": first_line(e)}
                    log(f"{tag}: {describe(r[mode])}"
                        + (f" (compile {r[mode]['compile_s']:.1f}s)" if "compile_s" in r[mode]
                           else ""))
                    del gpu_model, x
                    if hasattr(torch, "_dynamo"):
                        torch._dynamo.reset()
                    free_gpu()


def write_reports(args, info, rows, exports, final):
    """Print the tables (final only) and write --out and --json-out."""
    info = dict(info, elapsed_s=time.time() - _T0, complete=final)
    checks = bar_checks(rows)
    errs = errors(rows)
    if final:
        head, body = table_rows(rows)
        print(text_table(head, body))
        print()
        shead, sbody = startup_rows(rows)
        print(text_table(shead, sbody))
        print()
        n = {s: sum(1 for c in checks if c[0] == s) for s in ("PASS", "FAIL", "n/a")}
        print(f"bar (issue 8): {n['PASS']} PASS, {n['FAIL']} FAIL, {n['n/a']} n/a")
        for s, t in checks:
            print(f"  {s:4}  {t}")
        if errs:
            print("errors:")
            for e in errs:
                print("  " + e)
        sys.stdout.flush()
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            f.write(markdown(info, rows, exports, checks, errs))
    if args.json_out:
        os.makedirs(os.path.dirname(os.path.abspath(args.json_out)), exist_ok=True)
        with open(args.json_out, "w") as f:
            json.dump({"info": info, "exports": exports, "rows": rows,
                       "checks": [{"status": s, "text": t} for s, t in checks]}, f, indent=1)
    if final and (args.out or args.json_out):
        log("wrote " + " and ".join(x for x in (args.out, args.json_out) if x))


def main(argv=None):
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _on_sigterm)
    log(f"gpu_bench: importing torch (budget {args.budget:.0f}s)")
    _torch()
    import torchvision

    def left():
        return args.budget - (time.time() - _T0)

    os.makedirs(args.work, exist_ok=True)
    torch.set_num_threads(min(8, torch.get_num_threads()))  # export runs on the CPU
    cpu_models, paths, exports = export_all(args)
    if args.export_only:
        return 0 if paths else 1

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        log("no CUDA device visible to torch")
        return 1
    device = torch.device(args.device if ":" in args.device else args.device + ":0")
    torch.backends.cudnn.benchmark = True
    set_tf32(False)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else "none (CPU)"
    log(f"device {gpu}, torch {torch.__version__}")
    info = {
        "command": "python3 " + shlex.join([sys.argv[0]] + (sys.argv[1:] if argv is None
                                                             else list(argv))),
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "gpu": gpu, "torch": str(torch.__version__), "cuda": str(torch.version.cuda),
        "cudnn": str(torch.backends.cudnn.version()),
        "torchvision": str(torchvision.__version__),
        "onnxexec_version": onnxexec_version(args.onnxexec),
        "budget_s": args.budget, "runs": args.runs, "warmup": args.warmup,
        "rounds": args.rounds,
        "compile_warmup": args.compile_warmup, "eager_fastpath": args.eager_fastpath,
        "tf32_fp32": False,
    }
    rows = [{"model": m, "batch": b, "precision": p}
            for m in args.models for b in args.batches for p in args.precisions]
    by = {(r["model"], r["batch"], r["precision"]): r for r in rows}

    try:
        phase_eager_onnxexec(args, device, cpu_models, paths, exports, by, left)
        write_reports(args, info, rows, exports, final=False)  # in case the rest is cut off
        phase_compile(args, device, cpu_models, by, left)
    except (KeyboardInterrupt, Interrupted):
        info["interrupted"] = True
        log("interrupted: reporting what was measured")
    set_tf32(False)
    write_reports(args, info, rows, exports, final=True)
    log(f"done in {time.time() - _T0:.0f}s")
    ran = any(med(r.get(k)) is not None
              for r in rows for k in ["onnxexec", "eager"] + COMPILE_MODES)
    return 0 if ran else 1


if __name__ == "__main__":
    sys.exit(main())
