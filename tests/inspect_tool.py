#!/usr/bin/python3
"""`onnxexec info`, `graph` and `plan` against the onnx package (tools/inspect.c).

info: the parameters (elements, bytes, initializers) are the file's initializers as onnx
reads them; FLOPs are 2 x the multiply-adds of Conv, ConvTranspose, Gemm and MatMul
computed here from onnx's shape inference at the same input shapes, for the shipped
Fashion-MNIST CNN (batch 3, and with --no-optimize), for a model made here with a grouped
Conv, a ConvTranspose, a Gemm with transA and a batched MatMul, for one with their integer
and quantized forms (QLinearConv, ConvInteger, MatMulInteger, QLinearMatMul), and for a QDQ
model as optimized for the CPU (its Conv and Add on bytes where the CPU has AVX-512 VNNI)
and, with --device cuda (no GPU needed), for a GPU (they stay float ops), the same count; the memory numbers are
those `bench --json` reports, in order (lower bound <= arena <= no reuse). graph: the DOT
has one box per node of the file (--no-optimize), and every edge's label is the dtype and
shape onnx infers for the value the edge carries; with Graphviz's dot installed, the SVG
parses and has a node per box. plan: the SVG parses, has one rectangle per arena value,
the rectangles stay inside the arena and never overlap in both time and offset (the plan
is valid), and the most bytes alive at one step is the lower bound info reports.
Usage errors exit 2 with a message that says what to do.
"""
import argparse
import atexit
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper, shape_inference

ap = argparse.ArgumentParser()
ap.add_argument("--onnxexec", required=True)
ap.add_argument("--models", required=True)
ap.add_argument("--bench", help="models/export_bench.py's folder: when it exists, FLOPs of its "
                "models against tools/bench_compare.py's count")
args = ap.parse_args()
EXE = args.onnxexec
fails = 0


def check(cond, what):
    global fails
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        fails += 1


def run(*a, code=0):
    r = subprocess.run([EXE, *a], capture_output=True, text=True)
    if r.returncode != code:
        print("command:", " ".join([EXE, *a]), "exit", r.returncode, "\n", r.stdout, r.stderr)
    check(r.returncode == code, "%s exits %d" % (" ".join(a[:1] + a[2:]), code))
    return r


def inferred_shapes(path, batch_dims):
    m = onnx.load(path)
    for i in m.graph.input:
        if i.name in batch_dims:
            for d, n in zip(i.type.tensor_type.shape.dim, batch_dims[i.name]):
                d.Clear()
                d.dim_value = n
    g = shape_inference.infer_shapes(m).graph
    shapes, types = {}, {}
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        tt = vi.type.tensor_type
        shapes[vi.name] = [d.dim_value for d in tt.shape.dim]
        types[vi.name] = tt.elem_type
    for t in g.initializer:
        shapes[t.name] = list(t.dims)
        types[t.name] = t.data_type
    return m, shapes, types


def flops_oracle(path, batch_dims):
    m, s, _ = inferred_shapes(path, batch_dims)
    total = 0
    for n in m.graph.node:
        if n.op_type not in ("Conv", "ConvTranspose", "Gemm", "MatMul", "QLinearConv",
                             "ConvInteger", "QLinearMatMul", "MatMulInteger"):
            continue
        at = {a.name: helper.get_attribute_value(a) for a in n.attribute}
        a, y = s[n.input[0]], s[n.output[0]]
        b = s[n.input[3 if n.op_type == "QLinearConv" else 1]]
        if n.op_type in ("Conv", "QLinearConv", "ConvInteger"):
            total += 2 * int(np.prod(y)) * int(np.prod(b[1:]))
        elif n.op_type == "ConvTranspose":
            total += 2 * int(np.prod(a)) * int(np.prod(b[1:]))
        elif n.op_type == "Gemm":
            total += 2 * int(np.prod(y)) * (a[0] if at.get("transA", 0) else a[1])
        else:  # MatMul and its integer forms
            total += 2 * int(np.prod(y)) * a[-1]
    return total


def params_oracle(path):
    m = onnx.load(path)
    arrs = [numpy_helper.to_array(t) for t in m.graph.initializer]
    return len(arrs), sum(a.size for a in arrs), sum(a.nbytes for a in arrs)


tmp = tempfile.mkdtemp(prefix="ox_inspect_")
atexit.register(shutil.rmtree, tmp, True)  # also when a check exits early
cnn = os.path.join(args.models, "fashion_mnist_cnn.onnx")

# ---- a model with the other FLOP shapes ----------------------------------------------------
rng = np.random.default_rng(0)
W = lambda name, *shape: numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)  # noqa: E731
nodes = [
    helper.make_node("Conv", ["x", "wc"], ["c"], group=2, pads=[1, 1, 1, 1], strides=[2, 2]),
    helper.make_node("ConvTranspose", ["c", "wt"], ["t"], group=2, strides=[2, 2]),
    helper.make_node("Reshape", ["t", "shape"], ["r"]),
    helper.make_node("Gemm", ["r", "wg"], ["gm"], transA=1),
    helper.make_node("MatMul", ["q", "wm"], ["mm"]),
]
graph = helper.make_graph(
    nodes, "flops",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", 4, 10, 10]),
     helper.make_tensor_value_info("q", TensorProto.FLOAT, [2, 3, 5, 7])],
    [helper.make_tensor_value_info("gm", TensorProto.FLOAT, [20, 5]),
     helper.make_tensor_value_info("mm", TensorProto.FLOAT, [2, 3, 5, 9])],
    [W("wc", 6, 2, 3, 3), W("wt", 6, 4, 2, 2),
     numpy_helper.from_array(np.array([-1, 20], np.int64), "shape"), W("wm", 7, 9)])
# Reshape to (-1, 20) then Gemm with transA: A is (k, 20) transposed, W (k, 5)
ops = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
# B=2: Conv out (2,6,5,5); ConvTranspose out (2,8,10,10) = 1600 elems -> r (80, 20);
# Gemm: A^T (20, 80) x (80, 5)
ops.graph.initializer.append(W("wg", 80, 5))
ops_path = os.path.join(tmp, "ops.onnx")
onnx.save(ops, ops_path)
onnx.checker.check_model(ops)

# ---- the integer and quantized forms: native ones, and a QDQ model the optimizer rewrites --
C = lambda name, a: numpy_helper.from_array(np.asarray(a), name)  # noqa: E731
q_nodes = [
    helper.make_node("QLinearConv", ["xq", "sx", "zx", "wq", "sw", "zw", "sy", "zy"], ["c1"],
                     pads=[1, 1, 1, 1]),
    helper.make_node("ConvInteger", ["xq", "wq2", "zx"], ["c2"], strides=[2, 2]),
    helper.make_node("MatMulInteger", ["aq", "bq", "zx"], ["m1"]),
    helper.make_node("QLinearMatMul", ["aq", "sx", "zx", "bq", "sx", "zx", "sy", "zy"], ["m2"]),
]
qops = helper.make_model(helper.make_graph(
    q_nodes, "qflops",
    [helper.make_tensor_value_info("xq", TensorProto.UINT8, [1, 8, 6, 6]),
     helper.make_tensor_value_info("aq", TensorProto.UINT8, [3, 5, 7])],
    [helper.make_tensor_value_info("c1", TensorProto.UINT8, [1, 16, 6, 6]),
     helper.make_tensor_value_info("c2", TensorProto.INT32, [1, 4, 3, 3]),
     helper.make_tensor_value_info("m1", TensorProto.INT32, [3, 5, 9]),
     helper.make_tensor_value_info("m2", TensorProto.UINT8, [3, 5, 9])],
    [C("sx", np.float32(0.1)), C("zx", np.uint8(120)), C("sw", np.float32(0.05)),
     C("zw", np.int8(0)), C("sy", np.float32(0.2)), C("zy", np.uint8(128)),
     C("wq", rng.integers(-100, 100, (16, 8, 3, 3)).astype(np.int8)),
     C("wq2", rng.integers(0, 255, (4, 8, 2, 2)).astype(np.uint8)),
     C("bq", rng.integers(0, 255, (7, 9)).astype(np.uint8))]),
    opset_imports=[helper.make_opsetid("", 13)])
onnx.checker.check_model(qops)
qops_path = os.path.join(tmp, "qops.onnx")
onnx.save(qops, qops_path)

# A QDQ model as torch exports it: its Conv (16 x 8 x 3 x 3), residual Add and MaxPool
# between DequantizeLinear and QuantizeLinear nodes; optimized for the CPU they run on bytes
# (where it has AVX-512 VNNI), for a GPU they stay float ops (--device cuda, no GPU needed).
def qdq(v, s, z, out):
    return [helper.make_node("QuantizeLinear", [v, s, z], [out + "_q"]),
            helper.make_node("DequantizeLinear", [out + "_q", s, z], [out])]


qdq_nodes = (qdq("x", "s1", "z1", "xd") +
             [helper.make_node("DequantizeLinear", ["wq", "sw", "zw"], ["wd"]),
              helper.make_node("Conv", ["xd", "wd", "bias"], ["cv"], pads=[1, 1, 1, 1])] +
             qdq("cv", "s2", "z1", "cvd") + qdq("r", "s2", "z1", "rd") +
             [helper.make_node("Add", ["cvd", "rd"], ["sum"])] + qdq("sum", "s3", "z1", "sd") +
             [helper.make_node("MaxPool", ["sd"], ["mp"], kernel_shape=[2, 2], strides=[2, 2])] +
             qdq("mp", "s3", "z1", "y"))
qdq_model = helper.make_model(helper.make_graph(
    qdq_nodes, "qdq",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 10, 10]),
     helper.make_tensor_value_info("r", TensorProto.FLOAT, [1, 16, 10, 10])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 5, 5])],
    [C("s1", np.float32(0.03)), C("s2", np.float32(0.05)), C("s3", np.float32(0.08)),
     C("z1", np.uint8(128)), C("sw", np.float32(0.01)), C("zw", np.int8(0)),
     C("wq", rng.integers(-120, 120, (16, 8, 3, 3)).astype(np.int8)),
     C("bias", rng.standard_normal(16).astype(np.float32))]),
    opset_imports=[helper.make_opsetid("", 13)])
onnx.checker.check_model(qdq_model)
qdq_path = os.path.join(tmp, "qdq.onnx")
onnx.save(qdq_model, qdq_path)
cpuinfo = open("/proc/cpuinfo").read() if os.path.exists("/proc/cpuinfo") else ""
vnni = " avx512_vnni" in cpuinfo and " avx512bw" in cpuinfo
want = flops_oracle(qdq_path, {})
bytes_ops = {"QLinearConv", "QLinearAdd"}
for extra, on_bytes in (([], vnni), (["--device", "cuda"], False), (["--device", "cuda:3"], False),
                        (["--no-optimize"], False)):
    j = json.loads(run("info", qdq_path, "--json", *extra).stdout)
    ops = {o["op_type"]: o["count"] for o in j["ops"]}
    name = "qdq model info %s" % " ".join(extra)
    check(j["flops"] == want, "%s: FLOPs %s, onnx shapes say %d" % (name, j["flops"], want))
    if on_bytes:
        check(ops.get("QLinearConv") == 1 and ops.get("QLinearAdd") == 1 and
              "Conv" not in ops and "Add" not in ops and "MaxPool" in ops,
              "%s: Conv and Add on bytes (QLinearConv, QLinearAdd): %s" % (name, ops))
    else:
        check(not bytes_ops & set(ops) and ops.get("Add") == 1 and ops.get("MaxPool") == 1 and
              ops.get("Conv", 0) + ops.get("FusedConv", 0) == 1,
              "%s: Conv, Add and MaxPool stay float ops: %s" % (name, ops))
for bad, says in (("tpu", "unknown device 'tpu'"), ("cuda:x", "expected cuda:N")):
    r = run("info", qdq_path, "--device", bad, code=1)
    check(says in r.stderr, "info --device %s refused: %s" % (bad, r.stderr.strip()))

# ---- info ----------------------------------------------------------------------------------
for path, extra, batch in ((cnn, ["--batch", "3"], {"image": [3, 1, 28, 28]}),
                           (cnn, ["--batch", "3", "--no-optimize"], {"image": [3, 1, 28, 28]}),
                           (ops_path, ["--shape", "B=2", "--no-optimize"], {"x": [2, 4, 10, 10]}),
                           (ops_path, ["--shape", "x=2,4,10,10"], {"x": [2, 4, 10, 10]}),
                           (qops_path, [], {})):
    name = os.path.basename(path) + " " + " ".join(extra)
    r = run("info", path, "--json", *extra)
    j = json.loads(r.stdout)
    want = flops_oracle(path, batch)
    check(j["flops"] == want, "%s: FLOPs %s, onnx shapes say %d" % (name, j["flops"], want))
    check(j["flop_nodes_unknown"] == 0, "%s: every FLOP node's shapes known" % name)
    if "--no-optimize" in extra:
        n_init, count, nbytes = params_oracle(path)
        p = j["parameters"]
        check((p["initializers"], p["count"], p["bytes"]) == (n_init, count, nbytes),
              "%s: parameters %s, onnx says %d initializers, %d elements, %d bytes"
              % (name, p, n_init, count, nbytes))
        check(j["nodes"] == len(onnx.load(path).graph.node), "%s: node count" % name)
    mem = j["memory"]
    check(0 < mem["lower_bound_bytes"] <= mem["arena_bytes"] <= mem["no_reuse_bytes"],
          "%s: lower bound <= arena <= no reuse: %s" % (name, mem))
    b = json.loads(run("bench", path, "--json", "--runs", "1", *extra).stdout)
    check((b["arena_bytes"], b["no_reuse_bytes"], b["lower_bound_bytes"]) ==
          (mem["arena_bytes"], mem["no_reuse_bytes"], mem["lower_bound_bytes"]),
          "%s: the memory numbers are bench's" % name)

r = run("info", cnn)
check(re.search(r"^FLOPs: +2234112 \(2\.23 MFLOP\)", r.stdout, re.M) is not None,
      "info text: FLOPs at batch 1 (hand count: 2 x (16*28*28*9 + 32*14*14*144 + 1568*64 + 64*10))")
check("dimension 0 ('N') set to 1" in r.stderr, "info says which symbolic dims it set to 1")
check(re.search(r"^memory: +arena .*, without reuse .*, lower bound", r.stdout, re.M) is not None,
      "info text: the memory plan's three numbers")
check("parameters: 105866" in r.stdout, "info text: parameters")

# ---- usage errors say what to do -------------------------------------------------------------
r = run("info", code=2)
check("usage: onnxexec info MODEL" in r.stderr, "info without a model: the usage")
r = run("info", cnn, "-o", "x.svg", code=2)
check("onnxexec graph|plan" in r.stderr, "info -o points at graph and plan")
r = run("graph", cnn, code=2)
check("needs -o FILE" in r.stderr, "graph without -o")
r = run("plan", cnn, "-o", os.path.join(tmp, "p.png"), code=2)
check("expected a .svg" in r.stderr, "plan -o .png refused")
r = run("info", cnn, "--shape", "nope=3", code=2)
check("no input or symbolic dimension" in r.stderr, "info --shape with an unknown name")
for cmd in ("info", "graph", "plan"):
    r = run(cmd, "--help")
    check(r.stdout.startswith("usage: onnxexec " + cmd), cmd + " --help")

# ---- graph ---------------------------------------------------------------------------------
for path, extra, batch in ((cnn, ["--batch", "2"], {"image": [2, 1, 28, 28]}),
                           (ops_path, ["--shape", "B=2"], {"x": [2, 4, 10, 10]})):
    dot_path = os.path.join(tmp, "g.dot")
    run("graph", path, "-o", dot_path, "--no-optimize", *extra)
    text = open(dot_path).read()
    m, shapes, types = inferred_shapes(path, batch)
    boxes = re.findall(r"^  n\d+ \[label=", text, re.M)
    check(len(boxes) == len(m.graph.node), "graph %s: %d boxes for %d nodes"
          % (os.path.basename(path), len(boxes), len(m.graph.node)))
    edges = re.findall(r'^  \w+ -> n\d+ \[label="([^"]*)", tooltip="([^"]*)"\]', text, re.M)
    bad = []
    for label, value in edges:
        want = "%s[%s]" % (TensorProto.DataType.Name(types[value]).lower(),
                           ",".join(map(str, shapes[value])))
        if label != want:
            bad.append((value, label, want))
    n_reads = sum(1 for n in m.graph.node for i in n.input
                  if i and i not in {t.name for t in m.graph.initializer})
    check(len(edges) == n_reads and not bad,
          "graph %s: %d edges (%d values read), labels as onnx infers them %s"
          % (os.path.basename(path), len(edges), n_reads, bad[:3]))
    if shutil.which("dot"):
        svg = os.path.join(tmp, "g.svg")
        run("graph", path, "-o", svg, "--no-optimize", *extra)
        root = ET.parse(svg).getroot()
        ns = "{http://www.w3.org/2000/svg}"
        gnodes = [g for g in root.iter(ns + "g") if g.get("class") == "node"]
        want = len(m.graph.node) + len(m.graph.input) + len(m.graph.output)
        check(len(gnodes) == want, "graph %s: dot drew %d nodes (%d boxes, inputs, outputs)"
              % (os.path.basename(path), len(gnodes), want))
    else:
        print("skip graph -o .svg: Graphviz's dot is not installed")
    # without Graphviz (a PATH where dot is not): the DOT beside, and what to install
    r = subprocess.run([EXE, "graph", path, "-o", os.path.join(tmp, "h.svg")], capture_output=True,
                       text=True, env=dict(os.environ, PATH="/nonexistent"))
    check(r.returncode == 0 and os.path.exists(os.path.join(tmp, "h.dot")) and
          not os.path.exists(os.path.join(tmp, "h.svg")) and "apt-get install graphviz" in r.stderr,
          "without dot: writes h.dot and says what to install")

# ---- plan ----------------------------------------------------------------------------------
for path, extra in ((cnn, ["--batch", "4"]), (cnn, ["--batch", "4", "--no-optimize"]),
                    (ops_path, ["--shape", "B=2"])):
    name = os.path.basename(path) + " " + " ".join(extra)
    svg = os.path.join(tmp, "p.svg")
    run("plan", path, "-o", svg, *extra)
    j = json.loads(run("info", path, "--json", *extra).stdout)["memory"]
    root = ET.parse(svg).getroot()
    rects = [e for e in root.iter("{http://www.w3.org/2000/svg}rect") if e.get("class") == "value"]
    check(len(rects) == j["arena_values"], "plan %s: %d rectangles, %d arena values"
          % (name, len(rects), j["arena_values"]))
    blocks = [(int(e.get("data-offset")), -(-int(e.get("data-bytes")) // 64) * 64,
               int(e.get("data-first")), int(e.get("data-last"))) for e in rects]
    inside = all(o + b <= j["arena_bytes"] for o, b, _, _ in blocks)
    overlap = [(x, y) for i, x in enumerate(blocks) for y in blocks[i + 1:]
               if x[2] <= y[3] and y[2] <= x[3] and x[0] < y[0] + y[1] and y[0] < x[0] + x[1]]
    check(inside and not overlap, "plan %s: blocks inside the arena, none overlapping %s"
          % (name, overlap[:2]))
    steps = j["steps"]
    live = max(sum(b for _, b, f, l in blocks if f <= s <= l) for s in range(steps + 1))
    check(live == j["lower_bound_bytes"], "plan %s: most bytes alive %d = lower bound %d"
          % (name, live, j["lower_bound_bytes"]))
    titles = [e.find("{http://www.w3.org/2000/svg}title").text for e in rects]
    check(all(t and ": float[" in t for t in titles), "plan %s: every block has a tooltip" % name)

# ---- the benchmark models, when they were exported: tools/bench_compare.py's count ---------
if args.bench and os.path.isdir(args.bench):
    import importlib.util
    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location(
        "bench_compare", os.path.join(here, "..", "tools", "bench_compare.py"))
    bc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bc)
    for case in sorted(os.listdir(args.bench)):
        path = os.path.join(args.bench, case, "model.onnx")
        if not os.path.isfile(path):
            continue
        inp = onnx.load(path, load_external_data=False).graph.input[0]
        batch = 8 if case.endswith("_b8") else 1
        dims = [d.dim_value or (batch if k == 0 else 1)
                for k, d in enumerate(inp.type.tensor_type.shape.dim)]
        want, unknown = bc.count_flops(path, {inp.name: dims})
        r = run("info", path, "--json", "--shape", "%s=%s" % (inp.name, ",".join(map(str, dims))))
        got = json.loads(r.stdout)["flops"] if r.returncode == 0 else None
        check(unknown == 0 and got == want, "%s: FLOPs %s, bench_compare.py counts %d"
              % (case, got, want))
else:
    print("skip the benchmark models: %s not found (models/export_bench.py makes them)"
          % args.bench)

print("%d failed" % fails if fails else "all passed")
sys.exit(1 if fails else 0)
