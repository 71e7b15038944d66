#!/usr/bin/python3
"""Compare onnxexec with ONNX Runtime on the same models, inputs and thread counts.

    tools/bench_compare.py --onnxexec build/onnxexec CASE_DIR... [--threads 1,2] [--runs 30]
                           [--rounds 3] [--pin] [--out docs/BENCHMARKS.md] [--json-out FILE]

Each CASE_DIR is a model in the backend-test layout (model.onnx + test_data_set_0/input_*.pb),
as models/export_parity.py and models/export_bench.py write them. A CASE_DIR may be a glob
(quoted or expanded by the shell: build/bench/*) or a folder of case folders (build/bench);
entries without a model.onnx are skipped with a note. ONNX Runtime comes from npm
(onnxruntime-node, CPU), installed into a scratch folder (--ort-dir, default build/ort) with
its install script skipped; it is never a dependency of onnxexec. For every model and thread
count the two runtimes run alternately (ORT: graph optimization level "all", intra-op
threads = ours), each timing `--runs` runs after the first and `--warmup` untimed ones (both
sides alike), in rounds so that load on the
machine hits both alike.

Per configuration (model x threads) it reports: each runtime's relative L2 to the case's
expected output (test_data_set_0/output_0.pb: what the exporting framework computed); median
latency of both and the ratio
onnxexec/ORT; GFLOP of the model's Conv/Gemm/MatMul (2 x MACs, counted from the ONNX graph
with shape inference at the test input's shapes) and GFLOP/s achieved by both; load time
(onnxexec: model load + session creation; ORT: InferenceSession.create) and the first run
(onnxexec plans there); peak RSS (VmHWM) of both processes, and ORT's net of node's own
baseline; onnxexec's memory plan: arena bytes, the sum of all intermediates without reuse,
and the lower bound (most bytes alive at once). Then a summary against the bar of issue 4:
geometric mean of the ratios <= 1.0, worst ratio <= 1.25, arena <= 1.1 x lower bound on
every model, peak RSS <= ORT's and load <= ORT's on every configuration, each "met" or
"not met" with the numbers. All of it is printed and, with --out, written to a Markdown
file together with the command that produced it; --json-out writes the raw figures.
A configuration that fails (an op onnxexec rejects, say) is reported with its error message
and counts as "not met"; the others still run. Exit status 0 unless nothing could be run.
Needs /usr/bin/python3 with python3-onnx and numpy (to read the .pb inputs), node and npm.
"""
import argparse
import glob
import json
import math
import os
import statistics
import subprocess
import sys

BAR_GEOMEAN = 1.0
BAR_WORST = 1.25
BAR_ARENA = 1.1

# The inputs of a model for ONNX Runtime, from the raw files and JSON export_inputs writes
# (tools/node_compare.py's script uses it too).
FEEDS_JS = r"""
function readFeeds(ort, fs, meta) {
  const feeds = {};
  for (const m of meta) {
    const b = fs.readFileSync(m.file);
    const ab = b.buffer.slice(b.byteOffset, b.byteOffset + b.length);
    const T = {float32: Float32Array, int64: BigInt64Array, int32: Int32Array,
               float64: Float64Array, uint8: Uint8Array, int8: Int8Array}[m.dtype];
    feeds[m.name] = new ort.Tensor(m.dtype, new T(ab), m.shape);
  }
  return feeds;
}
"""

ORT_JS = FEEDS_JS + r"""
const fs = require('fs');
const rssKb = (k) => {
  const m = new RegExp(k + ':\\s*(\\d+)').exec(fs.readFileSync('/proc/self/status', 'utf8'));
  return m ? Number(m[1]) : -1;
};
const baseRss = rssKb('VmRSS');   // node itself, before ONNX Runtime is loaded
const ort = require('onnxruntime-node');
(async () => {
  const [model, metaPath, threads, runs, warmup] = process.argv.slice(2);
  const meta = JSON.parse(fs.readFileSync(metaPath));
  const t0 = process.hrtime.bigint();
  const s = await ort.InferenceSession.create(model, {
    intraOpNumThreads: Number(threads), interOpNumThreads: 1,
    graphOptimizationLevel: 'all', executionMode: 'sequential'});
  const load = Number(process.hrtime.bigint() - t0) / 1e6;
  const feeds = readFeeds(ort, fs, meta);
  const f0 = process.hrtime.bigint();
  await s.run(feeds);
  const first = Number(process.hrtime.bigint() - f0) / 1e6;
  for (let i = 0; i < Number(warmup); i++) await s.run(feeds);
  const times = [];
  for (let i = 0; i < Number(runs); i++) {
    const a = process.hrtime.bigint();
    await s.run(feeds);
    times.push(Number(process.hrtime.bigint() - a) / 1e6);
  }
  const outPath = process.argv[7];  // the first output, raw float32, for the agreement table
  if (outPath) {
    const o = (await s.run(feeds))[s.outputNames[0]];
    if (o.type === 'float32')
      fs.writeFileSync(outPath, Buffer.from(o.data.buffer, o.data.byteOffset, o.data.byteLength));
  }
  let version = '?';
  try { version = require('onnxruntime-node/package.json').version; } catch (e) {}
  console.log(JSON.stringify({load_ms: load, first_run_ms: first, times,
                              peak_rss_kb: rssKb('VmHWM'), base_rss_kb: baseRss, version}));
})().catch(e => { console.error(e.message); process.exit(1); });
"""


def ensure_ort(ort_dir):
    mod = os.path.join(ort_dir, "node_modules", "onnxruntime-node")
    if not os.path.isdir(mod):
        os.makedirs(ort_dir, exist_ok=True)
        subprocess.run(["npm", "init", "-y"], cwd=ort_dir, check=True, capture_output=True)
        subprocess.run(["npm", "install", "--ignore-scripts", "onnxruntime-node"], cwd=ort_dir,
                       check=True, capture_output=True)
    js = os.path.join(ort_dir, "bench_ort.js")
    with open(js, "w") as f:
        f.write(ORT_JS)
    return js


def export_inputs(case, scratch):
    """The case's inputs as raw files plus a JSON description for the node script.
    Returns (meta path, onnxexec -i arguments, {input name: shape})."""
    import onnx
    from onnx import numpy_helper
    ds = os.path.join(case, "test_data_set_0")
    model = onnx.load(os.path.join(case, "model.onnx"), load_external_data=False)
    names = [i.name for i in model.graph.input
             if i.name not in {t.name for t in model.graph.initializer}]
    meta, args, shapes = [], [], {}
    tag = case_name(case)
    for k, name in enumerate(names):
        p = os.path.join(ds, f"input_{k}.pb")
        t = onnx.TensorProto()
        with open(p, "rb") as f:
            t.ParseFromString(f.read())
        a = numpy_helper.to_array(t)
        raw = os.path.join(scratch, f"{tag}_in{k}.bin")
        a.tofile(raw)
        meta.append({"name": name, "dtype": str(a.dtype), "shape": list(a.shape), "file": raw})
        args += ["-i", f"{name}={p}"]
        shapes[name] = list(a.shape)
    mp = os.path.join(scratch, f"{tag}_meta.json")
    with open(mp, "w") as f:
        json.dump(meta, f)
    return mp, args, shapes


def case_name(case):
    return os.path.basename(os.path.normpath(case))


def expand_cases(patterns):
    """Globs and folders of cases -> case folders (those holding a model.onnx), in order."""
    out = []
    for pat in patterns:
        hits = sorted(glob.glob(pat)) if glob.has_magic(pat) else [pat]
        if not hits:
            print(f"note: {pat}: no match", file=sys.stderr)
        for h in hits:
            if os.path.isfile(os.path.join(h, "model.onnx")):
                out.append(h)
            elif os.path.isdir(h) and any(os.path.isfile(os.path.join(h, d, "model.onnx"))
                                          for d in os.listdir(h)):
                out += [os.path.join(h, d) for d in sorted(os.listdir(h))
                        if os.path.isfile(os.path.join(h, d, "model.onnx"))]
            else:
                print(f"note: {h}: no model.onnx, skipped", file=sys.stderr)
    seen, uniq = set(), []
    for c in out:
        k = os.path.realpath(c)
        if k not in seen:
            seen.add(k)
            uniq.append(c)
    return uniq


# ---------------------------------------------------------------------------------------
# FLOP count: 2 x MACs of Conv, ConvTranspose, Gemm and MatMul at the given input shapes.
# onnx's shape inference (1.12) does not see through the Shape -> Gather -> Concat ->
# Reshape chains the exporter writes for attention, so the small integer tensors of those
# chains are evaluated here with numpy and fed back as initializers until nothing changes.

def _np_dtype(onnx_type):
    from onnx import mapping
    return mapping.TENSOR_TYPE_TO_NP_TYPE[onnx_type]


def _eval_small(node, vals, shapes):
    """Value of node's first output if it is a small computation on known values, else None."""
    import numpy as np
    from onnx import helper, numpy_helper
    op = node.op_type
    at = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    ins = list(node.input)

    def v(i):
        return vals[ins[i]] if i < len(ins) and ins[i] else None

    if op == "Constant":
        if "value" in at:
            return numpy_helper.to_array(at["value"])
        for k, dt in (("value_int", np.int64), ("value_float", np.float32)):
            if k in at:
                return np.array(at[k], dtype=dt)
        for k, dt in (("value_ints", np.int64), ("value_floats", np.float32)):
            if k in at:
                return np.array(at[k], dtype=dt)
        return None
    if op == "Shape":
        s = shapes.get(ins[0])
        if s is None or any(d is None for d in s):
            return None
        s = np.array(s, dtype=np.int64)
        return s[at.get("start", 0):at.get("end", len(s))] if ("start" in at or "end" in at) else s
    if op == "Size":
        s = shapes.get(ins[0])
        if s is None or any(d is None for d in s):
            return None
        return np.array(int(np.prod(s)), dtype=np.int64)
    if any(i and i not in vals for i in ins):
        return None
    if op == "Identity":
        return v(0)
    if op == "Cast":
        return v(0).astype(_np_dtype(at["to"]))
    if op == "Gather":
        return np.take(v(0), v(1), axis=at.get("axis", 0))
    if op == "Unsqueeze":
        axes = at.get("axes") if v(1) is None else list(v(1))
        x = v(0)
        for a in sorted(int(a) % (x.ndim + len(axes)) for a in axes):
            x = np.expand_dims(x, a)
        return x
    if op == "Squeeze":
        axes = at.get("axes") if v(1) is None else list(v(1))
        return np.squeeze(v(0), axis=None if axes is None else tuple(int(a) for a in axes))
    if op == "Concat":
        return np.concatenate([vals[i] for i in ins], axis=at["axis"])
    if op == "Slice":
        x = v(0)
        starts, ends = v(1), v(2)
        axes = v(3) if v(3) is not None else range(len(starts))
        steps = v(4) if v(4) is not None else [1] * len(starts)
        sl = [slice(None)] * x.ndim
        for s, e, a, st in zip(starts, ends, axes, steps):
            sl[int(a)] = slice(int(s), int(e), int(st))
        return x[tuple(sl)]
    if op in ("Add", "Sub", "Mul"):
        return {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply}[op](v(0), v(1))
    if op == "Div":
        a, b = v(0), v(1)
        if np.issubdtype(a.dtype, np.integer):
            return (np.trunc(a / b)).astype(a.dtype)
        return (a / b).astype(a.dtype)
    if op == "Sqrt":
        return np.sqrt(v(0))
    if op == "Equal":
        return np.equal(v(0), v(1))
    if op == "Where":
        return np.where(v(0), v(1), v(2))
    if op == "ConstantOfShape":
        fill = numpy_helper.to_array(at["value"]) if "value" in at else np.zeros(1, np.float32)
        return np.full(tuple(int(d) for d in v(0)), fill.reshape(-1)[0], dtype=fill.dtype)
    if op == "Range":
        return np.arange(v(0), v(1), v(2)).astype(v(0).dtype)
    return None


def _shapes_of(graph):
    shapes = {}
    for vi in list(graph.input) + list(graph.value_info) + list(graph.output):
        tt = vi.type.tensor_type
        if tt.HasField("shape"):
            shapes[vi.name] = [d.dim_value if d.HasField("dim_value") else None
                               for d in tt.shape.dim]
    for t in graph.initializer:
        shapes[t.name] = list(t.dims)
    return shapes


def count_flops(model_path, input_shapes, max_small=4096):
    """(FLOPs, number of Conv/Gemm/MatMul nodes whose shapes stayed unknown)."""
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper, shape_inference

    model = onnx.load(model_path, load_external_data=False)
    g = model.graph
    # Large weights become typed graph inputs: shape inference needs their shapes only.
    init_names = {t.name for t in g.initializer}
    vals = {}
    keep = []
    for t in g.initializer:
        if int(np.prod(t.dims)) <= max_small:
            vals[t.name] = numpy_helper.to_array(t)
            keep.append(t)
        else:
            if t.name not in {i.name for i in g.input}:
                g.input.append(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    del g.initializer[:]
    g.initializer.extend(keep)
    for i in g.input:
        if i.name in input_shapes and i.name not in init_names:
            dims = i.type.tensor_type.shape.dim
            for d, n in zip(dims, input_shapes[i.name]):
                d.Clear()
                d.dim_value = int(n)
    nodes = list(g.node)
    for _ in range(50):
        inferred = shape_inference.infer_shapes(model)
        shapes = _shapes_of(inferred.graph)
        new = False
        for n in nodes:
            if not n.output or n.output[0] in vals or len(n.output) != 1:
                continue
            try:
                r = _eval_small(n, vals, shapes)
            except Exception:
                r = None
            if r is not None and np.asarray(r).size <= max_small:
                vals[n.output[0]] = np.asarray(r)
                new = True
        if not new:
            break
        # Feed the known values back: their nodes go, their outputs become initializers.
        del g.node[:]
        g.node.extend(n for n in nodes if not (n.output and n.output[0] in vals))
        have = {t.name for t in g.initializer}
        for k, a in vals.items():
            if k not in have:
                g.initializer.append(numpy_helper.from_array(np.ascontiguousarray(a), k))
    flops, unknown = 0, 0
    known = lambda s: s is not None and all(d is not None for d in s)  # noqa: E731
    for n in nodes:
        # the integer and quantized forms count as the float op they compute
        op = {"QLinearConv": "Conv", "ConvInteger": "Conv", "QLinearMatMul": "MatMul",
              "MatMulInteger": "MatMul", "QGemm": "Gemm"}.get(n.op_type, n.op_type)
        if op not in ("Conv", "ConvTranspose", "Gemm", "MatMul"):
            continue
        a = shapes.get(n.input[0])
        b = shapes.get(n.input[3 if n.op_type in ("QLinearConv", "QGemm") else 1])
        y = shapes.get(n.output[0])
        at = {x.name: helper.get_attribute_value(x) for x in n.attribute}
        if op == "Conv" and known(y) and known(b):
            flops += 2 * int(np.prod(y)) * int(np.prod(b[1:]))
        elif op == "ConvTranspose" and known(a) and known(b):
            flops += 2 * int(np.prod(a)) * int(np.prod(b[1:]))
        elif op == "Gemm" and known(a) and known(y):
            k = a[0] if at.get("transA", 0) else a[1]
            flops += 2 * int(np.prod(y)) * int(k)
        elif op == "MatMul" and known(a) and known(y):
            flops += 2 * int(np.prod(y)) * int(a[-1])
        else:
            unknown += 1
    return flops, unknown


# ---------------------------------------------------------------------------------------

def pinned_cpus(threads, pin):
    """The CPUs both runtimes are held to for a thread count: with --pin, the first `threads`
    CPUs this process may use when that is fewer than all of them (a 1-thread run then stays on
    one CPU for both sides, where a VM's vCPUs may differ in speed); else None (anywhere)."""
    if not pin or not hasattr(os, "sched_getaffinity"):
        return None
    cpus = sorted(os.sched_getaffinity(0))
    return set(cpus[:threads]) if threads < len(cpus) else None


def run_json(cmd, timeout, cpus=None):
    """(parsed last stdout line as JSON, None) or (None, error message); cpus: the CPUs the
    process may run on (None: any)."""
    pre = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                           preexec_fn=pre)
    except subprocess.TimeoutExpired:
        return None, "timed out after %d s" % timeout
    if r.returncode != 0:
        msg = (r.stderr.strip() or r.stdout.strip() or "no message").splitlines()
        return None, "exit %d: %s" % (r.returncode, " / ".join(msg[-3:]))
    try:
        return json.loads(r.stdout.strip().splitlines()[-1]), None
    except (ValueError, IndexError):
        return None, "unreadable output: %r" % r.stdout[-200:]


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def mib(b):
    return b / 1048576.0


def mib_or_none(b):
    return None if b is None else mib(b)


def fmt(x, f="%.3f"):
    return "n/a" if x is None else f % x


def rel_l2(got, case):
    """||got - expected|| / ||expected|| in float64 against the case's first output, or None
    (no float output, another size, an all-zero expectation)."""
    import numpy as np
    import onnx
    from onnx import numpy_helper
    p = os.path.join(case, "test_data_set_0", "output_0.pb")
    if got is None or not os.path.exists(p):
        return None
    t = onnx.TensorProto()
    with open(p, "rb") as f:
        t.ParseFromString(f.read())
    ref = numpy_helper.to_array(t).astype(np.float64).ravel()
    got = np.asarray(got, np.float64).ravel()
    if got.size != ref.size or not np.linalg.norm(ref):
        return None
    return float(np.linalg.norm(got - ref) / np.linalg.norm(ref))


def outputs_agreement(args, js, case, model, meta, inputs, th):
    """Each runtime's first output on the case's inputs, against the case's expected output
    (what the exporter's framework computed): onnxexec run -o, ORT's raw float32."""
    import numpy as np
    import onnx
    scratch = os.path.dirname(meta)
    tag = "%s_t%d" % (case_name(case), th)
    ox, ort_out = None, None
    d = os.path.join(scratch, tag + "_ox")
    r = subprocess.run([args.onnxexec, "run", model, "--threads", str(th), "-o", d] + inputs,
                       capture_output=True, text=True, timeout=args.timeout)
    name = onnx.load(model, load_external_data=False).graph.output[0].name
    f = os.path.join(d, name.replace("/", "%2F") + ".npy")
    if r.returncode == 0 and os.path.exists(f):
        ox = np.load(f)
    raw = os.path.join(scratch, tag + "_ort.bin")
    r = subprocess.run(["node", js, model, meta, str(th), "1", "0", raw], capture_output=True,
                       text=True, timeout=args.timeout)
    if r.returncode == 0 and os.path.exists(raw):
        ort_out = np.fromfile(raw, np.float32)
    return rel_l2(ox, case), rel_l2(ort_out, case)


def bench_config(args, js, case, model, meta, inputs, th, gflop):
    ox_t, ort_t, ox_load, ort_load, ox_first, ort_first = [], [], [], [], [], []
    ox_mem, ox_rss, ort_rss, ort_base, ort_ver = None, 0, 0, 0, "?"
    ox_err = ort_err = None
    per_round = max(1, args.runs // args.rounds)
    cpus = pinned_cpus(th, args.pin)
    for _ in range(args.rounds):  # alternate the two runtimes
        if ox_err is None:
            j, ox_err = run_json([args.onnxexec, "bench", model, "--json", "--threads", str(th),
                                  "--runs", str(per_round), "--warmup", str(args.warmup)] + inputs,
                                 args.timeout, cpus)
            if j is not None:
                ox_t.append(j["median_ms"])
                ox_load.append(j["load_ms"] + j["create_ms"])
                ox_first.append(j["first_run_ms"])
                ox_mem = j
                ox_rss = max(ox_rss, j["peak_rss_kb"])
        if ort_err is None:
            j, ort_err = run_json(["node", js, model, meta, str(th), str(per_round),
                                   str(args.warmup)],
                                  args.timeout, cpus)
            if j is not None:
                ort_t.append(statistics.median(j["times"]))
                ort_load.append(j["load_ms"])
                ort_first.append(j.get("first_run_ms", float("nan")))
                ort_rss = max(ort_rss, j["peak_rss_kb"])
                ort_base = max(ort_base, j.get("base_rss_kb", 0))
                ort_ver = j.get("version", "?")
    med = lambda xs: statistics.median(xs) if xs else None  # noqa: E731
    r = {"model": case_name(case), "case": case, "threads": th, "gflop": gflop,
         "ox_ms": med(ox_t), "ort_ms": med(ort_t),
         "ox_load_ms": med(ox_load), "ort_load_ms": med(ort_load),
         "ox_first_ms": med(ox_first), "ort_first_ms": med(ort_first),
         "ox_rss_kb": ox_rss if ox_mem else None, "ort_rss_kb": ort_rss if ort_t else None,
         "ort_base_rss_kb": ort_base if ort_t else None, "ort_version": ort_ver,
         "arena_bytes": ox_mem["arena_bytes"] if ox_mem else None,
         "no_reuse_bytes": ox_mem["no_reuse_bytes"] if ox_mem else None,
         "lower_bound_bytes": ox_mem["lower_bound_bytes"] if ox_mem else None,
         "split_items": ox_mem.get("split_items", 0) if ox_mem else None,
         "split_lanes": ox_mem.get("split_lanes", 0) if ox_mem else None,
         "ox_error": ox_err, "ort_error": ort_err}
    r["ratio"] = r["ox_ms"] / r["ort_ms"] if r["ox_ms"] and r["ort_ms"] else None
    r["ox_rel_l2"], r["ort_rel_l2"] = outputs_agreement(args, js, case, model, meta, inputs, th)
    r["ort_rss_net_kb"] = (r["ort_rss_kb"] - r["ort_base_rss_kb"]) if r["ort_rss_kb"] else None
    return r


def tables(rows):
    lat = ["| model | threads | GFLOP | onnxexec median (ms) | ORT median (ms) | ratio "
           "| onnxexec GFLOP/s | ORT GFLOP/s | onnxexec load (ms) | ORT load (ms) "
           "| onnxexec first run (ms) | ORT first run (ms) |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    agree = ["| model | threads | onnxexec relative L2 | ORT relative L2 |",
             "| --- | ---: | ---: | ---: |"]
    mem = ["| model | threads | onnxexec peak RSS (MiB) | ORT peak RSS (MiB) "
           "| ORT peak RSS net of node (MiB) | arena (MiB) | no-reuse sum (MiB) "
           "| lower bound (MiB) | arena / lower bound | onnxexec batch |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for r in rows:
        gf = r["gflop"]
        gfs = "n/a" if gf is None else ("%.4g" % gf[0] + ("+" if gf[1] else ""))

        def rate(ms):
            return "n/a" if gf is None or not ms else "%.1f" % (gf[0] / (ms / 1e3))
        lat.append("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["model"], r["threads"], gfs, fmt(r["ox_ms"]), fmt(r["ort_ms"]),
            fmt(r["ratio"], "%.2f"), rate(r["ox_ms"]), rate(r["ort_ms"]),
            fmt(r["ox_load_ms"], "%.1f"), fmt(r["ort_load_ms"], "%.1f"),
            fmt(r["ox_first_ms"], "%.1f"), fmt(r["ort_first_ms"], "%.1f")))
        agree.append("| %s | %d | %s | %s |" % (r["model"], r["threads"],
                                                 fmt(r.get("ox_rel_l2"), "%.3e"),
                                                 fmt(r.get("ort_rel_l2"), "%.3e")))
        lb = r["lower_bound_bytes"]
        split = ("%d items one at a time on %d lane%s" % (
            r["split_items"], r["split_lanes"], "" if r["split_lanes"] == 1 else "s")
            if r.get("split_items") else "whole")
        mem.append("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["model"], r["threads"],
            fmt(r["ox_rss_kb"] and r["ox_rss_kb"] / 1024, "%.1f"),
            fmt(r["ort_rss_kb"] and r["ort_rss_kb"] / 1024, "%.1f"),
            fmt(r["ort_rss_net_kb"] and r["ort_rss_net_kb"] / 1024, "%.1f"),
            fmt(mib_or_none(r["arena_bytes"]), "%.3f"),
            fmt(mib_or_none(r["no_reuse_bytes"]), "%.3f"),
            fmt(mib_or_none(lb), "%.3f"),
            "n/a" if not lb else "%.3f" % (r["arena_bytes"] / lb), split))
    errs = [r for r in rows if r["ox_error"] or r["ort_error"]]
    notes = []
    for r in errs:
        if r["ox_error"]:
            notes.append("- %s, %d threads: onnxexec failed: %s" % (r["model"], r["threads"],
                                                                   r["ox_error"]))
        if r["ort_error"]:
            notes.append("- %s, %d threads: ORT failed: %s" % (r["model"], r["threads"],
                                                              r["ort_error"]))
    return lat, mem, agree, notes


def summary(rows):
    def cfg(r):
        return "%s/%dt" % (r["model"], r["threads"])
    ok = [r for r in rows if r["ratio"] is not None]
    failed = [r for r in rows if r["ratio"] is None]
    fail_note = (" (%d configuration(s) failed: %s)" % (len(failed), ", ".join(map(cfg, failed)))
                 if failed else "")
    ratios = [r["ratio"] for r in ok]
    lines = []

    def verdict(good):
        return "met" if good and not failed else "NOT MET"
    g = geomean(ratios)
    lines.append("- latency, geometric mean of the ratios onnxexec/ORT over %d configurations: "
                 "%.3f (bar <= %.2f): %s%s" % (len(ok), g, BAR_GEOMEAN,
                                               verdict(ratios and g <= BAR_GEOMEAN), fail_note))
    if ok:
        w = max(ok, key=lambda r: r["ratio"])
        over = [r for r in ok if r["ratio"] > BAR_WORST]
        lines.append("- latency, worst ratio: %.3f on %s (bar <= %.2f): %s%s%s" % (
            w["ratio"], cfg(w), BAR_WORST, verdict(w["ratio"] <= BAR_WORST),
            "; over the bar: " + ", ".join("%s %.2f" % (cfg(r), r["ratio"]) for r in over)
            if over else "", fail_note))
    else:
        lines.append("- latency, worst ratio: n/a: NOT MET%s" % fail_note)
    mem = [r for r in rows if r["lower_bound_bytes"]]
    if mem:
        worst = max(mem, key=lambda r: r["arena_bytes"] / r["lower_bound_bytes"])
        over = [r for r in mem if r["arena_bytes"] > BAR_ARENA * r["lower_bound_bytes"]]
        nofig = [r for r in rows if not r["lower_bound_bytes"]]
        lines.append("- arena <= %.1f x lower bound on every model: worst %.3f x on %s "
                     "(%.3f MiB for a lower bound of %.3f MiB): %s%s%s" % (
                         BAR_ARENA, worst["arena_bytes"] / worst["lower_bound_bytes"], cfg(worst),
                         mib(worst["arena_bytes"]), mib(worst["lower_bound_bytes"]),
                         "met" if not over and not nofig else "NOT MET",
                         "; over: " + ", ".join(cfg(r) for r in over) if over else "",
                         "; no figures for " + ", ".join(cfg(r) for r in nofig) if nofig else ""))
    else:
        lines.append("- arena <= %.1f x lower bound: no figures: NOT MET" % BAR_ARENA)
    both = [r for r in rows if r["ox_rss_kb"] and r["ort_rss_net_kb"]]
    if both:
        over = [r for r in both if r["ox_rss_kb"] > r["ort_rss_net_kb"]]
        over_raw = [r for r in both if r["ox_rss_kb"] > r["ort_rss_kb"]]
        w = max(both, key=lambda r: r["ox_rss_kb"] / r["ort_rss_net_kb"])
        lines.append("- peak RSS <= ORT's on every configuration (ORT net of node's own %.0f MiB; "
                     "onnxexec whole process): worst %.1f MiB vs %.1f MiB (%.2f x) on %s: %s%s; "
                     "against ORT's whole node process: %s" % (
                         w["ort_base_rss_kb"] / 1024, w["ox_rss_kb"] / 1024,
                         w["ort_rss_net_kb"] / 1024, w["ox_rss_kb"] / w["ort_rss_net_kb"], cfg(w),
                         verdict(not over),
                         "; over: " + ", ".join(cfg(r) for r in over) if over else "",
                         "met" if not over_raw and not failed else "NOT MET"))
    else:
        lines.append("- peak RSS <= ORT's: no figures: NOT MET")
    both = [r for r in rows if r["ox_load_ms"] is not None and r["ort_load_ms"] is not None]
    if both:
        over = [r for r in both if r["ox_load_ms"] > r["ort_load_ms"]]
        w = max(both, key=lambda r: r["ox_load_ms"] / r["ort_load_ms"])
        lines.append("- load <= ORT's on every configuration (onnxexec model load + session "
                     "creation vs ORT session creation): worst %.1f ms vs %.1f ms (%.2f x) on %s: "
                     "%s%s" % (w["ox_load_ms"], w["ort_load_ms"], w["ox_load_ms"] / w["ort_load_ms"],
                              cfg(w), verdict(not over),
                              "; over: " + ", ".join(cfg(r) for r in over) if over else ""))
        over = [r for r in both if r["ox_load_ms"] + r["ox_first_ms"] >
                r["ort_load_ms"] + r["ort_first_ms"]]
        w = max(both, key=lambda r: (r["ox_load_ms"] + r["ox_first_ms"]) /
                (r["ort_load_ms"] + r["ort_first_ms"]))
        lines.append("- also (not part of the bar; onnxexec plans at the first run): load + first "
                     "run <= ORT's: worst %.1f ms vs %.1f ms on %s: %s%s" % (
                         w["ox_load_ms"] + w["ox_first_ms"], w["ort_load_ms"] + w["ort_first_ms"],
                         cfg(w), verdict(not over),
                         "; over: " + ", ".join(cfg(r) for r in over) if over else ""))
    else:
        lines.append("- load <= ORT's: no figures: NOT MET")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--onnxexec", required=True)
    ap.add_argument("cases", nargs="+", help="case folders, globs, or folders of cases")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=3,
                    help="untimed runs after the first, on both sides (default 3)")
    ap.add_argument("--ort-dir", default="build/ort")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per process (default 600)")
    ap.add_argument("--no-flops", action="store_true", help="skip counting FLOPs")
    ap.add_argument("--pin", action="store_true",
                    help="hold both runtimes to the same first N CPUs when a configuration uses "
                         "N threads and the machine has more (1-thread runs on one CPU)")
    ap.add_argument("--out", help="write the Markdown report here")
    ap.add_argument("--json-out", help="write the raw figures here")
    args = ap.parse_args()
    cases = expand_cases(args.cases)
    if not cases:
        ap.error("no case folder with a model.onnx among: " + " ".join(args.cases))
    if not os.access(args.onnxexec, os.X_OK):
        ap.error("%s: not an executable (build onnxexec first)" % args.onnxexec)
    threads = [int(x) for x in str(args.threads).split(",") if x.strip()]
    js = ensure_ort(os.path.abspath(args.ort_dir))
    scratch = os.path.abspath(args.ort_dir)
    rows = []
    for case in cases:
        meta, inputs, shapes = export_inputs(case, scratch)
        model = os.path.join(case, "model.onnx")
        gflop = None
        if not args.no_flops:
            try:
                f, unknown = count_flops(model, shapes)
                gflop = (f / 1e9, unknown)
            except Exception as e:  # the count is a nicety; never let it stop the run
                print("note: %s: FLOPs not counted: %s" % (case_name(case), e), file=sys.stderr)
        for th in threads:
            r = bench_config(args, js, case, model, meta, inputs, th, gflop)
            rows.append(r)
            print("%-22s threads %d: onnxexec %s ms  ORT %s ms  ratio %s%s%s" % (
                r["model"], th, fmt(r["ox_ms"], "%8.3f"), fmt(r["ort_ms"], "%8.3f"),
                fmt(r["ratio"], "%.2f"),
                "  [onnxexec: %s]" % r["ox_error"] if r["ox_error"] else "",
                "  [ORT: %s]" % r["ort_error"] if r["ort_error"] else ""))
            sys.stdout.flush()
    lat, mem, agree, notes = tables(rows)
    summ = summary(rows)
    text = ["## Latency and load", ""] + lat + ["", "## Memory", ""] + mem + [""]
    text += ["## Agreement with the case's expected output", "",
             "Relative L2 of each runtime's first output to the case's output_0.pb (what the "
             "exporting framework computed; n/a without one):", ""] + agree + [""]
    if notes:
        text += ["## Failures", ""] + notes + [""]
    text += ["## Against the bar (issue 4)", ""] + summ
    print()
    print("\n".join(text))
    versions = sorted({r["ort_version"] for r in rows if r["ort_version"] != "?"})
    if args.out:
        cmd = " ".join(["tools/bench_compare.py"] + sys.argv[1:])
        with open(args.out, "w") as f:
            f.write("# Benchmarks: onnxexec against ONNX Runtime\n\n")
            f.write("Produced by:\n\n    %s\n\n" % cmd)
            f.write("ONNX Runtime: onnxruntime-node %s from npm, CPU, graph optimization level all, "
                    "intra-op threads as onnxexec's. Medians of %d runs in %d alternating rounds "
                    "after the first run and %d untimed ones on each side; batch as in each "
                    "model's test input. GFLOP: 2 x the MACs of "
                    "Conv/Gemm/MatMul counted from the ONNX graph (\"+\": some nodes' shapes "
                    "unknown, not counted). Load: onnxexec model load + session creation, ORT "
                    "InferenceSession.create; onnxexec plans at the first run. Peak RSS: VmHWM of "
                    "each process; \"net of node\" subtracts node's RSS before ONNX Runtime was "
                    "loaded.%s\n\n" % ("/".join(versions) or "?", args.runs, args.rounds,
                                       args.warmup,
                                       " With --pin: a configuration of N threads on a machine "
                                       "of more CPUs runs both sides on the same first N CPUs."
                                       if args.pin else ""))
            f.write("\n".join(text) + "\n")
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump({"command": sys.argv, "runs": args.runs, "rounds": args.rounds,
                       "rows": rows, "summary": summ}, f, indent=1)
    return 0 if any(r["ratio"] is not None for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
