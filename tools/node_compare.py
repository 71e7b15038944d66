#!/usr/bin/python3
"""Where one model's time goes, node by node, in onnxexec and in ONNX Runtime.

    tools/node_compare.py --onnxexec build/onnxexec CASE_DIR [--threads 1] [--rounds 3]
                          [--runs 20] [--top 25] [--ort-dir build/ort]

CASE_DIR is a model in the backend-test layout (model.onnx + test_data_set_0/input_*.pb), as
for tools/bench_compare.py, whose ONNX Runtime install (onnxruntime-node from npm, in
--ort-dir) and input export this reuses. The two runtimes run alternately, --rounds times
each (so that a noisy stretch of the machine hits both alike): ORT with its profiler on
(`enableProfiling`, graph optimization level all, intra-op threads = ours), onnxexec with
`bench --profile --json`, both on the first --threads CPUs. Each node's time is the minimum
over the rounds of its median (ORT) or mean (onnxexec) over --runs runs.

The two graphs differ after optimization (ORT's NCHWc Conv nodes, our FusedConv), so nodes
are paired by their order among the heavy ops (convolutions, Gemm/MatMul, MaxPool): the
k-th such node of one with the k-th of the other; a warning says when the counts differ
(then pairs past the first difference are not the same layer: on 2+ threads, a pointwise
and a depthwise Conv that our plan runs as one step show as one node, README "Measuring"),
and parallel branches
(SqueezeNet's fire modules) may run in another order in ORT, crossing the pairs there. Prints both runtimes'
medians per round, the sums of the paired nodes, and the pairs with the largest and the
smallest difference, with our node names. Needs node and npm, /usr/bin/python3 with
python3-onnx.
"""
import argparse
import collections
import glob
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_compare import FEEDS_JS, ensure_ort, export_inputs  # noqa: E402

HEAVY = {"Conv", "FusedConv", "Gemm", "FusedGemm", "MatMul", "FusedMatMul", "MaxPool"}

PROFILE_JS = FEEDS_JS + r"""
const fs = require('fs');
const ort = require('onnxruntime-node');
(async () => {
  const [model, metaPath, threads, runs, prefix] = process.argv.slice(2);
  const meta = JSON.parse(fs.readFileSync(metaPath));
  const s = await ort.InferenceSession.create(model, {
    intraOpNumThreads: Number(threads), interOpNumThreads: 1, graphOptimizationLevel: 'all',
    executionMode: 'sequential', enableProfiling: true, profileFilePrefix: prefix});
  const feeds = readFeeds(ort, fs, meta);
  for (let i = 0; i < 3; i++) await s.run(feeds);
  const times = [];
  for (let i = 0; i < Number(runs); i++) {
    const a = process.hrtime.bigint();
    await s.run(feeds);
    times.push(Number(process.hrtime.bigint() - a) / 1e6);
  }
  times.sort((a, b) => a - b);
  await s.endProfiling();
  console.log(JSON.stringify({median_ms: times[times.length >> 1]}));
})().catch(e => { console.error(e.message); process.exit(1); });
"""


def ort_round(ort_dir, js, model, meta, threads, runs, cpus, scratch):
    """[(node, ms)] of the heavy nodes in execution order, and ORT's median run."""
    prefix = os.path.join(scratch, "ort_profile")
    out = subprocess.run(["taskset", "-c", cpus, "node", js, model, meta, str(threads), str(runs),
                          prefix], cwd=ort_dir, capture_output=True, text=True, check=True)
    res = json.loads(out.stdout.strip().splitlines()[-1])
    path = max(glob.glob(prefix + "*.json"), key=os.path.getmtime)
    with open(path) as f:
        events = json.load(f)
    os.remove(path)
    durs, last = collections.defaultdict(list), {}
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            name = e["name"][:-len("_kernel_time")]
            durs[name].append(e["dur"])
            last[name] = (e["ts"], e["args"].get("op_name"))
    nodes = [(n, sorted(durs[n])[len(durs[n]) // 2] / 1000.0)
             for n, (ts, op) in sorted(last.items(), key=lambda kv: kv[1][0]) if op in HEAVY]
    return nodes, res["median_ms"]


def ox_round(onnxexec, model, inputs, threads, runs, cpus):
    out = subprocess.run(["taskset", "-c", cpus, onnxexec, "bench", model, "--json", "--profile",
                          "--threads", str(threads), "--runs", str(runs), "--warmup", "3"]
                         + inputs, capture_output=True, text=True, check=True)
    d = json.loads(out.stdout.strip().splitlines()[-1])
    nodes = [(r["node"], r["ms"]) for r in d["profile"]["nodes_ms"] if r["op"] in HEAVY]
    return nodes, d["median_ms"]


def keep_min(acc, nodes):
    return nodes if acc is None else [(a[0], min(a[1], b[1])) for a, b in zip(acc, nodes)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--onnxexec", required=True)
    ap.add_argument("case")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--ort-dir", default="build/ort")
    args = ap.parse_args()
    model = os.path.abspath(os.path.join(args.case, "model.onnx"))
    ort_dir = os.path.abspath(args.ort_dir)
    ensure_ort(ort_dir)
    js = os.path.join(ort_dir, "node_profile.js")
    with open(js, "w") as f:
        f.write(PROFILE_JS)
    cpus = "0" if args.threads == 1 else f"0-{args.threads - 1}"
    ox_min = ort_min = None
    ox_med, ort_med = [], []
    with tempfile.TemporaryDirectory(prefix="ox-nodes-") as scratch:
        meta, inputs, _ = export_inputs(args.case, scratch)
        for _ in range(args.rounds):
            nodes, med = ort_round(ort_dir, js, model, meta, args.threads, args.runs, cpus, scratch)
            ort_min = keep_min(ort_min, nodes)
            ort_med.append(med)
            nodes, med = ox_round(args.onnxexec, model, inputs, args.threads, args.runs, cpus)
            ox_min = keep_min(ox_min, nodes)
            ox_med.append(med)
    print(f"medians per round (ms): onnxexec {' '.join(f'{m:.3f}' for m in ox_med)}; "
          f"ORT {' '.join(f'{m:.3f}' for m in ort_med)}")
    if len(ox_min) != len(ort_min):
        print(f"warning: {len(ox_min)} heavy nodes in onnxexec, {len(ort_min)} in ORT: pairs "
              "past the first difference are not the same layer", file=sys.stderr)
    pairs = list(zip(ox_min, ort_min))
    print(f"{len(pairs)} paired nodes; sums: onnxexec {sum(a[1] for a, _ in pairs):.3f} ms, "
          f"ORT {sum(b[1] for _, b in pairs):.3f} ms")
    rows = sorted(((a[1] - b[1], a[1], b[1], a[0]) for a, b in pairs), reverse=True)
    print("onnxexec (ms)  ORT (ms)  difference  node (onnxexec's name)")
    shown = rows if len(rows) <= 2 * args.top else rows[:args.top] + [None] + rows[-5:]
    for r in shown:
        print("..." if r is None else f"{r[1]:13.3f} {r[2]:9.3f} {r[0]:+11.3f}  {r[3]}")


if __name__ == "__main__":
    main()
