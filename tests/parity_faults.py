#!/usr/bin/python3
"""`onnxexec compare` against planted faults: it must name the node that was changed.

Models: four hand-made ONNX graphs (an MLP with a softmax written out in pieces, a CNN with
BatchNorm and pooling, a residual block with squeeze-excitation, an attention block with
LayerNorm and Gelu written out in pieces) and three exported from Debian's torch 1.13 with
the seeded weights of models/export_parity.py (resnet18 and mobilenet_v2 at 64x64, a
2-layer transformer encoder), all at opset 17.

Faults: copies of a model that differ from it in exactly one node (or one chain that stands
for one operation), the node drawn with a fixed seed among the eligible ones:
  changed attribute   Conv pads shifted, dilations, strides (the output shape changes),
                      Gemm transB/alpha, Softmax axis, LeakyRelu alpha, Clip bounds, the
                      epsilon of BatchNormalization / LayerNormalization / LayerNorm pieces
  perturbed weight    an initializer read by that node only, scaled by 1 + 1e-3 or with
                      1e-3 relative noise
  swapped op          Relu -> LeakyRelu(0.01), Sigmoid -> HardSigmoid, Gelu pieces -> the
                      tanh approximation, Div by c -> Mul by float16(1/c), Exp -> Pow(e, x)
  reduced precision   Cast to float16 and back on the node's output (the second Cast
                      writes the original name)
For each, `onnxexec compare ORIG cpu FAULTY --json` on random inputs must diverge and its
first divergent value must be the planted node's output, or, where side A's graph optimizer
fused that node into a later one, the value of the fused node (the first compared value
downstream of it), or the perturbed initializer itself. Expectations come from an oracle:
`onnxexec run --no-optimize` of both models with every value made a graph output, compared
in numpy with the contract's rule (relative L2 > rtol and max abs > atol, shapes, NaN/Inf);
the tool's first divergent value and its metrics must match it. The swaps Div -> Mul and
Exp -> Pow may be equal up to rounding: numpy decides first whether the pair must agree or
diverge.

Equal pairs must agree: cpu vs cpu:noopt, the model vs `onnxexec convert` of it (as read,
--optimize, --optimize=all, --opset 18 where that converts). PyTorch's outputs and some
intermediates of the exported models, written as a backend-layout folder, a folder of .npy
files (a "/" in a name as %2F) and a .npz, must agree; perturbed by 1e-2 they must diverge
and name the perturbed value. Also --reduce (the written case runs under `onnxexec test`),
--html (an SVG), --outputs-only, --rtol, the plain-text summary and the exit statuses.

    parity_faults.py --onnxexec build/onnxexec --work build/tests/parity_faults.tmp --source .
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import time
import zlib
from collections import defaultdict

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper, shape_inference

OPSET = 17
RTOL, ATOL = 1e-4, 1e-6  # the contract's float32 defaults
MARGIN = 1.2             # oracle values within this factor of a tolerance are borderline
FLOAT = TensorProto.FLOAT


# ------------------------------------------------------------------------------------------
# Checks


class Checks:
    def __init__(self):
        self.n_pass = 0
        self.failures = []
        self.debatable = []
        self.counts = defaultdict(int)

    def check(self, ok, what, detail=""):
        line = f"{'PASS' if ok else 'FAIL'} {what}" + (f": {detail}" if detail else "")
        print(line, flush=True)
        if ok:
            self.n_pass += 1
        else:
            self.failures.append(line)
        return ok

    def note(self, what, detail):
        line = f"NOTE {what}: {detail}"
        print(line, flush=True)
        self.debatable.append(line)


def run_cmd(cmd, timeout=300):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    return r.returncode, r.stdout, r.stderr


class Tool:
    def __init__(self, exe):
        self.exe = exe
        self.n_compare = 0

    def compare(self, model, a, b, extra=()):
        """`onnxexec compare MODEL A B ... --json`: exit status, report (None when not
        JSON), stdout, stderr."""
        cmd = [self.exe, "compare", model, a, b] + list(extra) + ["--json"]
        self.n_compare += 1
        rc, out, err = run_cmd(cmd)
        rep = None
        if rc in (0, 1):
            try:
                rep = json.loads(out)
            except ValueError as e:
                err += f"\n(not JSON: {e}; stdout starts {out[:200]!r})"
        return rc, rep, out, err

    def run(self, args):
        return run_cmd([self.exe] + list(args))


def short(err, n=300):
    err = " ".join(err.split())
    return err[-n:]


# ------------------------------------------------------------------------------------------
# The models


def _init(name, arr):
    return numpy_helper.from_array(np.asarray(arr, dtype=np.float32), name)


def _model(name, nodes, inputs, outputs, inits):
    g = helper.make_graph(nodes, name, inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)],
                          producer_name="parity_faults")
    onnx.checker.check_model(m)
    return m


def hand_mlp(rng):
    w = lambda *s: rng.standard_normal(s).astype(np.float32) / math.sqrt(s[-1] if len(s) > 1 else 1)
    n = helper.make_node
    nodes = [
        n("Gemm", ["x", "W1", "b1"], ["h1"], "mlp/gemm1", transB=1),
        n("Relu", ["h1"], ["a1"], "mlp/relu1"),
        n("Gemm", ["a1", "W2", "b2"], ["h2"], "mlp/gemm2", transB=0),
        n("LeakyRelu", ["h2"], ["a2"], "mlp/leaky2", alpha=0.1),
        n("Gemm", ["a2", "W3", "b3"], ["h3"], "mlp/gemm3", transB=1, alpha=1.0),
        n("Div", ["h3", "three"], ["d3"], "mlp/div3"),
        n("Clip", ["d3", "lo", "hi"], ["c3"], "mlp/clip3"),
        n("Gemm", ["c3", "W4", "b4"], ["logits"], "mlp/gemm4", transB=1),
        n("ReduceMax", ["logits"], ["mx"], "mlp/softmax/max", axes=[1], keepdims=1),
        n("Sub", ["logits", "mx"], ["sh"], "mlp/softmax/sub"),
        n("Exp", ["sh"], ["ex"], "mlp/softmax/exp"),
        n("ReduceSum", ["ex", "axis1"], ["sm"], "mlp/softmax/sum", keepdims=1),
        n("Div", ["ex", "sm"], ["probs"], "mlp/softmax/div"),
    ]
    inits = [_init("W1", w(64, 32)), _init("b1", 0.1 * rng.standard_normal(64)),
             _init("W2", w(64, 64)), _init("b2", 0.1 * rng.standard_normal(64)),
             _init("W3", w(64, 64)), _init("b3", 0.1 * rng.standard_normal(64)),
             _init("three", 3.0), _init("lo", -0.3), _init("hi", 0.3),
             _init("W4", w(10, 64)), _init("b4", 0.1 * rng.standard_normal(10)),
             numpy_helper.from_array(np.array([1], dtype=np.int64), "axis1")]
    m = _model("mlp", nodes, [helper.make_tensor_value_info("x", FLOAT, [4, 32])],
               [helper.make_tensor_value_info("probs", FLOAT, [4, 10])], inits)
    return m, {"x": rng.standard_normal((4, 32)).astype(np.float32)}


def _bn(rng, prefix, c):
    return [_init(prefix + "_s", rng.uniform(0.5, 1.5, c)),
            _init(prefix + "_b", 0.1 * rng.standard_normal(c)),
            _init(prefix + "_m", 0.1 * rng.standard_normal(c)),
            _init(prefix + "_v", rng.uniform(0.5, 1.5, c))]


def _bn_node(name, x, y, prefix, eps=1e-5):
    return helper.make_node("BatchNormalization",
                            [x, prefix + "_s", prefix + "_b", prefix + "_m", prefix + "_v"],
                            [y], name, epsilon=eps)


def _conv_w(rng, co, ci, k):
    return rng.standard_normal((co, ci, k, k)).astype(np.float32) * math.sqrt(2.0 / (ci * k * k))


def hand_cnn(rng):
    n = helper.make_node
    nodes = [
        n("Conv", ["x", "Wc1", "bc1"], ["c1"], "cnn/conv1", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        _bn_node("cnn/bn1", "c1", "n1", "bn1"),
        n("Relu", ["n1"], ["r1"], "cnn/relu1"),
        n("MaxPool", ["r1"], ["p1"], "cnn/pool1", kernel_shape=[2, 2], strides=[2, 2]),
        n("Conv", ["p1", "Wc2", "bc2"], ["c2"], "cnn/conv2", kernel_shape=[3, 3],
          pads=[1, 1, 1, 1], strides=[1, 1]),
        _bn_node("cnn/bn2", "c2", "n2", "bn2"),
        n("LeakyRelu", ["n2"], ["r2"], "cnn/leaky2", alpha=0.2),
        n("Conv", ["r2", "Wc3", "bc3"], ["c3"], "cnn/conv3", kernel_shape=[1, 1]),
        n("Sigmoid", ["c3"], ["g3"], "cnn/sigmoid3"),
        n("Mul", ["c3", "g3"], ["s3"], "cnn/silu3"),
        n("AveragePool", ["s3"], ["p2"], "cnn/pool2", kernel_shape=[2, 2], strides=[2, 2]),
        n("Conv", ["p2", "Wc4", "bc4"], ["c4"], "cnn/conv4", kernel_shape=[3, 3],
          pads=[1, 1, 1, 1]),
        _bn_node("cnn/bn4", "c4", "n4", "bn4"),
        n("Relu", ["n4"], ["r4"], "cnn/relu4"),
        n("GlobalAveragePool", ["r4"], ["gp"], "cnn/gap"),
        n("Flatten", ["gp"], ["fl"], "cnn/flatten"),
        n("Gemm", ["fl", "Wfc", "bfc"], ["logits"], "cnn/fc", transB=1),
    ]
    inits = [_init("Wc1", _conv_w(rng, 8, 3, 3)), _init("bc1", 0.1 * rng.standard_normal(8)),
             _init("Wc2", _conv_w(rng, 16, 8, 3)), _init("bc2", 0.1 * rng.standard_normal(16)),
             _init("Wc3", _conv_w(rng, 16, 16, 1)), _init("bc3", 0.1 * rng.standard_normal(16)),
             _init("Wc4", _conv_w(rng, 16, 16, 3)), _init("bc4", 0.1 * rng.standard_normal(16)),
             _init("Wfc", rng.standard_normal((10, 16)) / 4.0),
             _init("bfc", 0.1 * rng.standard_normal(10))]
    inits += _bn(rng, "bn1", 8) + _bn(rng, "bn2", 16) + _bn(rng, "bn4", 16)
    m = _model("cnn", nodes, [helper.make_tensor_value_info("x", FLOAT, [2, 3, 16, 16])],
               [helper.make_tensor_value_info("logits", FLOAT, [2, 10])], inits)
    return m, {"x": rng.standard_normal((2, 3, 16, 16)).astype(np.float32)}


def hand_residual(rng):
    n = helper.make_node
    nodes = [
        n("Conv", ["x", "Wr1", "br1"], ["c1"], "res/conv1", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        _bn_node("res/bn1", "c1", "n1", "rbn1"),
        n("Relu", ["n1"], ["r1"], "res/relu1"),
        n("Conv", ["r1", "Wr2", "br2"], ["c2"], "res/conv2", kernel_shape=[3, 3],
          pads=[1, 1, 1, 1]),
        _bn_node("res/bn2", "c2", "n2", "rbn2"),
        n("Add", ["n2", "x"], ["s"], "res/add"),
        n("Relu", ["s"], ["r2"], "res/relu2"),
        n("GlobalAveragePool", ["r2"], ["sq"], "res/se/gap"),
        n("Conv", ["sq", "Wse1", "bse1"], ["e1"], "res/se/conv1", kernel_shape=[1, 1]),
        n("Relu", ["e1"], ["e1r"], "res/se/relu"),
        n("Conv", ["e1r", "Wse2", "bse2"], ["e2"], "res/se/conv2", kernel_shape=[1, 1]),
        n("Sigmoid", ["e2"], ["gate"], "res/se/sigmoid"),
        n("Mul", ["r2", "gate"], ["out"], "res/se/scale"),
    ]
    inits = [_init("Wr1", _conv_w(rng, 16, 16, 3)), _init("br1", 0.1 * rng.standard_normal(16)),
             _init("Wr2", _conv_w(rng, 16, 16, 3)), _init("br2", 0.1 * rng.standard_normal(16)),
             _init("Wse1", _conv_w(rng, 4, 16, 1)), _init("bse1", 0.1 * rng.standard_normal(4)),
             _init("Wse2", _conv_w(rng, 16, 4, 1)), _init("bse2", 0.1 * rng.standard_normal(16))]
    inits += _bn(rng, "rbn1", 16) + _bn(rng, "rbn2", 16)
    m = _model("residual", nodes, [helper.make_tensor_value_info("x", FLOAT, [1, 16, 12, 12])],
               [helper.make_tensor_value_info("out", FLOAT, [1, 16, 12, 12])], inits)
    return m, {"x": rng.standard_normal((1, 16, 12, 12)).astype(np.float32)}


def hand_attention(rng):
    d, f = 48, 96
    w = lambda a, b: rng.standard_normal((a, b)).astype(np.float32) / math.sqrt(a)
    n = helper.make_node
    nodes = [
        n("MatMul", ["x", "Wq"], ["q"], "att/q"),
        n("MatMul", ["x", "Wk"], ["k"], "att/k"),
        n("MatMul", ["x", "Wv"], ["v"], "att/v"),
        n("Transpose", ["k"], ["kt"], "att/kt", perm=[0, 2, 1]),
        n("MatMul", ["q", "kt"], ["sc"], "att/scores"),
        n("Div", ["sc", "sqrt_d"], ["scs"], "att/scale"),
        n("Softmax", ["scs"], ["p"], "att/softmax", axis=-1),
        n("MatMul", ["p", "v"], ["ctx"], "att/ctx"),
        n("MatMul", ["ctx", "Wo"], ["o"], "att/o"),
        n("Add", ["x", "o"], ["r1"], "att/residual1"),
        n("ReduceMean", ["r1"], ["mu"], "att/ln/mean", axes=[-1], keepdims=1),
        n("Sub", ["r1", "mu"], ["dv"], "att/ln/sub"),
        n("Pow", ["dv", "two"], ["dv2"], "att/ln/pow"),
        n("ReduceMean", ["dv2"], ["var"], "att/ln/var", axes=[-1], keepdims=1),
        n("Add", ["var", "ln_eps"], ["vare"], "att/ln/add_eps"),
        n("Sqrt", ["vare"], ["sd"], "att/ln/sqrt"),
        n("Div", ["dv", "sd"], ["nrm"], "att/ln/div"),
        n("Mul", ["nrm", "gamma"], ["lng"], "att/ln/mul"),
        n("Add", ["lng", "beta"], ["ln"], "att/ln/add"),
        n("MatMul", ["ln", "W1"], ["f1"], "att/ffn/mm1"),
        n("Add", ["f1", "bf1"], ["f1b"], "att/ffn/add1"),
        n("Div", ["f1b", "sqrt2"], ["gd"], "att/gelu/div"),
        n("Erf", ["gd"], ["ge"], "att/gelu/erf"),
        n("Add", ["ge", "one"], ["ga"], "att/gelu/add"),
        n("Mul", ["f1b", "ga"], ["gm"], "att/gelu/mul"),
        n("Mul", ["gm", "half"], ["gelu"], "att/gelu/mul_half"),
        n("MatMul", ["gelu", "W2"], ["f2"], "att/ffn/mm2"),
        n("Add", ["f2", "bf2"], ["f2b"], "att/ffn/add2"),
        n("Add", ["ln", "f2b"], ["y"], "att/residual2"),
    ]
    inits = [_init("Wq", w(d, d)), _init("Wk", w(d, d)), _init("Wv", w(d, d)),
             _init("Wo", w(d, d)), _init("sqrt_d", math.sqrt(d)), _init("two", 2.0),
             _init("ln_eps", 1e-5), _init("gamma", rng.uniform(0.5, 1.5, d)),
             _init("beta", 0.1 * rng.standard_normal(d)), _init("W1", w(d, f)),
             _init("bf1", 0.1 * rng.standard_normal(f)), _init("sqrt2", math.sqrt(2.0)),
             _init("one", 1.0), _init("half", 0.5), _init("W2", w(f, d)),
             _init("bf2", 0.1 * rng.standard_normal(d))]
    m = _model("attention", nodes, [helper.make_tensor_value_info("x", FLOAT, [2, 10, d])],
               [helper.make_tensor_value_info("y", FLOAT, [2, 10, d])], inits)
    return m, {"x": rng.standard_normal((2, 10, d)).astype(np.float32)}


# Modules whose outputs PyTorch hooks give as reference intermediates, with the scope torch's
# exporter names their nodes under: the ONNX value is the output of the scope's last node
# (kept only when its shape is the hooked tensor's).
TORCH_SCOPES = {
    "resnet18": {"layer1": "/layer1/", "layer2": "/layer2/", "layer3": "/layer3/",
                 "layer4": "/layer4/"},
    "mobilenet_v2": {"features.3": "/features/features.3/", "features.7": "/features/features.7/",
                     "features.14": "/features/features.14/",
                     "features.18": "/features/features.18/"},
    "transformer_encoder": {"encoder.layers.0": "/encoder/layers.0/",
                            "encoder.layers.1": "/encoder/layers.1/"},
}


def export_torch_models(source, work):
    """resnet18, mobilenet_v2 (64x64) and the transformer encoder with the weights of
    models/export_parity.py; returns [(name, model, inputs, outputs, intermediates)]."""
    import torch
    sys.path.insert(0, os.path.join(source, "models"))
    import export_parity as ep
    torch.set_num_threads(2)
    ep.disable_mha_fastpath()
    found = []
    for name, module, x, _ in ep.build_models():
        if name in ("resnet18", "mobilenet_v2"):
            x = torch.randn(1, 3, 64, 64, generator=torch.Generator().manual_seed(7))
        path = os.path.join(work, name + ".export.onnx")
        torch.onnx.export(module, (x,), path, export_params=True, opset_version=OPSET,
                          do_constant_folding=True, input_names=["input"],
                          output_names=["output"], training=torch.onnx.TrainingMode.EVAL)
        m = onnx.load(path)
        os.remove(path)
        hooked = {}
        hooks = []
        for scope in TORCH_SCOPES[name]:
            sub = module.get_submodule(scope)
            hooks.append(sub.register_forward_hook(
                lambda mod, inp, out, scope=scope:
                    hooked.__setitem__(scope, out.detach().numpy().copy())))
        with torch.no_grad():
            y = module(x).numpy()
        for h in hooks:
            h.remove()
        inter = {}
        shapes = Graph(m).shapes
        for scope, arr in hooked.items():
            last = [nd for nd in m.graph.node if nd.name.startswith(TORCH_SCOPES[name][scope])]
            if last and shapes.get(last[-1].output[0]) == list(arr.shape):
                inter[last[-1].output[0]] = arr
        found.append((name, m, {"input": x.numpy()}, {"output": y}, inter))
    return found


# ------------------------------------------------------------------------------------------
# Graph helpers


class Graph:
    """Facts about a model: producers, readers, constants, inferred element types/shapes."""

    def __init__(self, model):
        self.model = model
        g = model.graph
        self.inits = {t.name: t for t in g.initializer}
        self.nodes = list(g.node)
        self.prod = {o: nd for nd in g.node for o in nd.output if o}
        self.readers = defaultdict(list)
        for nd in g.node:
            for i in nd.input:
                if i and nd not in self.readers[i]:
                    self.readers[i].append(nd)
        self.inputs = [i.name for i in g.input if i.name not in self.inits]
        self.outputs = [o.name for o in g.output]
        inferred = shape_inference.infer_shapes(model)
        self.types, self.shapes = {}, {}
        for vi in list(inferred.graph.value_info) + list(inferred.graph.input) + \
                list(inferred.graph.output):
            tt = vi.type.tensor_type
            self.types[vi.name] = tt.elem_type
            if tt.HasField("shape"):
                self.shapes[vi.name] = [d.dim_value if d.HasField("dim_value") else None
                                        for d in tt.shape.dim]
        for t in g.initializer:
            self.types[t.name] = t.data_type
            self.shapes[t.name] = list(t.dims)

    def const(self, name):
        if name in self.inits:
            return numpy_helper.to_array(self.inits[name])
        nd = self.prod.get(name)
        if nd is not None and nd.op_type == "Constant":
            for a in nd.attribute:
                if a.name == "value":
                    return numpy_helper.to_array(a.t)
        return None

    def values(self):
        """Every value a node computes, plus the graph inputs, in graph order."""
        vals = list(self.inputs)
        for nd in self.nodes:
            vals += [o for o in nd.output if o]
        return vals

    def is_float(self, name):
        return self.types.get(name) == FLOAT


def attr(node, name, default=None):
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def set_attr(node, name, value):
    for i, a in enumerate(node.attribute):
        if a.name == name:
            del node.attribute[i]
            break
    node.attribute.append(helper.make_attribute(name, value))


def find_node(model, name):
    for nd in model.graph.node:
        if nd.name == name:
            return nd
    raise KeyError(name)


def add_init(model, name, arr):
    model.graph.initializer.append(numpy_helper.from_array(np.asarray(arr), name))


def replace_init(model, name, arr):
    for t in model.graph.initializer:
        if t.name == name:
            t.CopyFrom(numpy_helper.from_array(arr.astype(np.float32), name))
            return
    raise KeyError(name)


def drop_dead_constants(model):
    """Remove Constant nodes and initializers no node reads any more (the planted node's
    old operands), so that the pair differs in the planted node only."""
    used = {i for nd in model.graph.node for i in nd.input} | {o.name for o in model.graph.output}
    keep = [nd for nd in model.graph.node if nd.op_type != "Constant" or nd.output[0] in used]
    del model.graph.node[:]
    model.graph.node.extend(keep)
    inputs = {i.name for i in model.graph.input}
    keep_i = [t for t in model.graph.initializer if t.name in used or t.name in inputs]
    del model.graph.initializer[:]
    model.graph.initializer.extend(keep_i)


def viable(model):
    """onnx.checker and strict shape inference accept it (a changed shape is consistent).
    Checked on a skeleton whose large initializers are graph inputs of the same type and
    shape: shape inference reads only small constants, and the weights cost seconds."""
    src = model.graph
    small = [t for t in src.initializer if np.prod(t.dims) <= 64]
    inputs = list(src.input) + [helper.make_tensor_value_info(t.name, t.data_type, list(t.dims))
                                for t in src.initializer if np.prod(t.dims) > 64]
    g = helper.make_graph(src.node, src.name, inputs, src.output, small)
    m = helper.make_model(g, opset_imports=model.opset_import, ir_version=model.ir_version)
    try:
        onnx.checker.check_model(m)
        shape_inference.infer_shapes(m, check_type=True, strict_mode=True)
        return True
    except Exception:
        return False


# ------------------------------------------------------------------------------------------
# Planted faults


class Fault:
    def __init__(self, kind, node, outputs, desc, model, init=None, near=None, nodes=None):
        self.kind = kind
        self.node = node          # the planted node's name (the last of a chain)
        self.nodes = set(nodes or [node])
        self.outputs = outputs    # its outputs: the expected first divergent values
        self.desc = desc
        self.model = model
        self.init = init          # the perturbed initializer, if any
        self.near = near          # (op input, function a(x), function b(x)) for near swaps


def _copy(model):
    m = onnx.ModelProto()
    m.CopyFrom(model)
    del m.graph.value_info[:]
    return m


def _conv_kernel(G, nd):
    k = attr(nd, "kernel_shape")
    if k is None and nd.input[1] in G.shapes:
        k = G.shapes[nd.input[1]][2:]
    return list(k or [])


def plant_conv_pads(G, nd):
    pads = list(attr(nd, "pads", []))
    k = _conv_kernel(G, nd)
    if len(pads) != 4 or len(k) != 2 or k[0] < 2 or pads[0] < 1 or pads[2] < 1:
        return None
    b = _copy(G.model)
    new = [pads[0] + 1, pads[1], pads[2] - 1, pads[3]]
    set_attr(find_node(b, nd.name), "pads", new)
    return Fault("conv_pads", nd.name, [nd.output[0]], f"pads {pads} -> {new} (same shape)", b)


def plant_conv_dilation(G, nd):
    pads = list(attr(nd, "pads", []))
    if _conv_kernel(G, nd) != [3, 3] or pads != [1, 1, 1, 1] or \
            list(attr(nd, "dilations", [1, 1])) != [1, 1]:
        return None
    b = _copy(G.model)
    bn = find_node(b, nd.name)
    set_attr(bn, "dilations", [2, 2])
    set_attr(bn, "pads", [2, 2, 2, 2])
    return Fault("conv_dilation", nd.name, [nd.output[0]],
                 "dilations [1,1] -> [2,2], pads [1,1,1,1] -> [2,2,2,2] (same shape)", b)


def plant_conv_strides(G, nd):
    shape = G.shapes.get(nd.output[0])
    if not shape or len(shape) != 4 or not shape[2] or shape[2] < 3:
        return None
    s = list(attr(nd, "strides", [1, 1]))
    new = [1, 1] if s == [2, 2] else [2, 2] if s == [1, 1] else None
    if new is None:
        return None
    b = _copy(G.model)
    set_attr(find_node(b, nd.name), "strides", new)
    return Fault("conv_strides", nd.name, [nd.output[0]],
                 f"strides {s} -> {new} (the output shape changes)", b)


def plant_gemm_transb(G, nd):
    shp = G.shapes.get(nd.input[1])
    if nd.input[1] not in G.inits or not shp or len(shp) != 2 or shp[0] != shp[1]:
        return None
    b = _copy(G.model)
    t = attr(nd, "transB", 0)
    set_attr(find_node(b, nd.name), "transB", 1 - t)
    return Fault("gemm_transB", nd.name, [nd.output[0]], f"transB {t} -> {1 - t}", b)


def plant_gemm_alpha(G, nd):
    a = attr(nd, "alpha", 1.0)
    b = _copy(G.model)
    set_attr(find_node(b, nd.name), "alpha", float(a * 1.02))
    return Fault("gemm_alpha", nd.name, [nd.output[0]], f"alpha {a:g} -> {a * 1.02:g}", b)


def plant_softmax_axis(G, nd):
    shape = G.shapes.get(nd.input[0])
    if not shape or len(shape) < 2:
        return None
    r = len(shape)
    a = attr(nd, "axis", -1) % r
    others = [i for i in range(r) if i != a and shape[i] and shape[i] > 1]
    if not others:
        return None
    new = max(others)
    b = _copy(G.model)
    set_attr(find_node(b, nd.name), "axis", new)
    return Fault("softmax_axis", nd.name, [nd.output[0]], f"axis {a} -> {new} of {shape}", b)


def plant_leaky_alpha(G, nd):
    a = attr(nd, "alpha", 0.01)
    b = _copy(G.model)
    set_attr(find_node(b, nd.name), "alpha", float(a * 1.5))
    return Fault("leakyrelu_alpha", nd.name, [nd.output[0]], f"alpha {a:g} -> {a * 1.5:g}", b)


def plant_clip_min(G, nd):
    if len(nd.input) < 2 or not nd.input[1]:
        return None
    lo = G.const(nd.input[1])
    hi = G.const(nd.input[2]) if len(nd.input) > 2 and nd.input[2] else None
    if lo is None or lo.size != 1:
        return None
    span = float(hi) - float(lo) if hi is not None else 1.0
    new = np.array(float(lo) + 0.02 * span, dtype=lo.dtype)  # raised: it cuts more values
    b = _copy(G.model)
    name = nd.name + "/planted_min"
    add_init(b, name, new)
    find_node(b, nd.name).input[1] = name
    drop_dead_constants(b)
    return Fault("clip_bounds", nd.name, [nd.output[0]], f"min {float(lo):g} -> {float(new):g}", b)


def plant_norm_eps(G, nd):
    if nd.op_type in ("BatchNormalization", "LayerNormalization"):
        b = _copy(G.model)
        e = attr(nd, "epsilon", 1e-5)
        set_attr(find_node(b, nd.name), "epsilon", float(e + 1e-2))
        return Fault("norm_epsilon", nd.name, [nd.output[0]], f"epsilon {e:g} -> {e + 1e-2:g}", b)
    # LayerNorm in pieces: Add(var, eps) read by Sqrt
    if nd.op_type != "Add" or not any(r.op_type == "Sqrt" for r in G.readers[nd.output[0]]):
        return None
    for k in (0, 1):
        c = G.const(nd.input[k])
        if c is not None and c.size == 1 and 0 < float(c) < 1e-3:
            b = _copy(G.model)
            name = nd.name + "/planted_eps"
            add_init(b, name, np.array(float(c) + 1e-2, dtype=np.float32))
            find_node(b, nd.name).input[k] = name
            drop_dead_constants(b)
            return Fault("norm_epsilon", nd.name, [nd.output[0]],
                         f"epsilon (LayerNorm pieces) {float(c):g} -> {float(c) + 1e-2:g}", b)
    return None


WEIGHT_INPUT = {"Conv": 1, "Gemm": 1, "MatMul": 1, "BatchNormalization": 1,
                "LayerNormalization": 1}


def _weight(G, nd):
    k = WEIGHT_INPUT.get(nd.op_type)
    if k is None or len(nd.input) <= k:
        return None
    w = nd.input[k]
    if w not in G.inits or G.types.get(w) != FLOAT or G.readers[w] != [nd] or \
            list(nd.input).count(w) != 1 or w in G.inputs:
        return None
    arr = numpy_helper.to_array(G.inits[w])
    return (w, arr) if arr.size >= 2 else None


def plant_weight_scale(G, nd):
    wa = _weight(G, nd)
    if wa is None:
        return None
    b = _copy(G.model)
    replace_init(b, wa[0], wa[1] * np.float32(1 + 1e-3))
    return Fault("weight_scale", nd.name, [nd.output[0]],
                 f"initializer {wa[0]} {list(wa[1].shape)} scaled by 1+1e-3", b, init=wa[0])


def plant_weight_noise(G, nd, rng):
    wa = _weight(G, nd)
    if wa is None:
        return None
    b = _copy(G.model)
    noise = rng.standard_normal(wa[1].shape).astype(np.float32)
    replace_init(b, wa[0], wa[1] * (1 + np.float32(1e-3) * noise))
    return Fault("weight_noise", nd.name, [nd.output[0]],
                 f"initializer {wa[0]} {list(wa[1].shape)} with 1e-3 relative noise", b, init=wa[0])


def plant_relu_leaky(G, nd):
    b = _copy(G.model)
    bn = find_node(b, nd.name)
    bn.op_type = "LeakyRelu"
    set_attr(bn, "alpha", 0.01)
    return Fault("relu_to_leakyrelu", nd.name, [nd.output[0]], "Relu -> LeakyRelu(alpha 0.01)", b)


def plant_sigmoid_hard(G, nd):
    b = _copy(G.model)
    find_node(b, nd.name).op_type = "HardSigmoid"
    return Fault("sigmoid_to_hardsigmoid", nd.name, [nd.output[0]], "Sigmoid -> HardSigmoid", b)


def plant_div_mul16(G, nd):
    if not G.is_float(nd.output[0]):
        return None
    c = G.const(nd.input[1])
    if c is None or c.size != 1 or c.dtype != np.float32 or float(c) == 0:
        return None
    c = np.float32(c.reshape(()))
    inv = np.float32(np.float16(np.float32(1) / c))
    b = _copy(G.model)
    bn = find_node(b, nd.name)
    bn.op_type = "Mul"
    name = nd.name + "/planted_inv"
    add_init(b, name, np.array(inv, dtype=np.float32))
    bn.input[1] = name
    drop_dead_constants(b)
    near = (nd.input[0], lambda x: x / c, lambda x: x * inv)
    return Fault("div_to_mul_fp16", nd.name, [nd.output[0]],
                 f"Div by {c:.7g} -> Mul by float16(1/c) = {inv:.7g}", b, near=near)


def plant_exp_pow(G, nd):
    b = _copy(G.model)
    bn = find_node(b, nd.name)
    bn.op_type = "Pow"
    name = nd.name + "/planted_e"
    add_init(b, name, np.array(math.e, dtype=np.float32))
    x = bn.input[0]
    del bn.input[:]
    bn.input.extend([name, x])
    e32 = np.float32(math.e)
    near = (x, lambda v: np.exp(v), lambda v: np.power(e32, v))
    return Fault("exp_to_pow", nd.name, [nd.output[0]], "Exp(x) -> Pow(e, x)", b, near=near)


def _gelu_chain(G, div):
    """Div(x, sqrt 2) -> Erf -> Add(1) -> Mul(x, .) -> Mul(0.5): the five nodes, or None."""
    c = G.const(div.input[1])
    if c is None or c.size != 1 or abs(float(c) - math.sqrt(2)) > 1e-4:
        return None
    x = div.input[0]

    def only(value, op):
        r = G.readers[value]
        return r[0] if len(r) == 1 and r[0].op_type == op else None
    erf = only(div.output[0], "Erf")
    add = erf and only(erf.output[0], "Add")
    mul = add and only(add.output[0], "Mul")
    half = mul and only(mul.output[0], "Mul")
    if not half or x not in mul.input:
        return None
    return [div, erf, add, mul, half]


def plant_gelu_tanh(G, nd):
    chain = _gelu_chain(G, nd)
    if chain is None:
        return None
    b = _copy(G.model)
    x, out, p = nd.input[0], chain[-1].output[0], chain[-1].name + "/planted_tanh"
    consts = {"c3": 0.044715, "ck": math.sqrt(2 / math.pi), "one": 1.0, "half": 0.5}
    for k, v in consts.items():
        add_init(b, f"{p}/{k}", np.array(v, dtype=np.float32))
    mk = lambda op, ins, o: helper.make_node(op, ins, [o], f"{p}/{o}")
    new = [mk("Mul", [x, x], f"{p}/x2"), mk("Mul", [f"{p}/x2", x], f"{p}/x3"),
           mk("Mul", [f"{p}/x3", f"{p}/c3"], f"{p}/t"), mk("Add", [x, f"{p}/t"], f"{p}/u"),
           mk("Mul", [f"{p}/u", f"{p}/ck"], f"{p}/w"), mk("Tanh", [f"{p}/w"], f"{p}/th"),
           mk("Add", [f"{p}/th", f"{p}/one"], f"{p}/a"), mk("Mul", [x, f"{p}/a"], f"{p}/m"),
           helper.make_node("Mul", [f"{p}/m", f"{p}/half"], [out], chain[-1].name)]
    names = {c.name for c in chain}
    nodes = list(b.graph.node)
    at = [i for i, n in enumerate(nodes) if n.name in names][0]
    rest = [n for n in nodes if n.name not in names]
    del b.graph.node[:]
    b.graph.node.extend(rest[:at] + new + rest[at:])
    drop_dead_constants(b)
    return Fault("gelu_to_tanh", chain[-1].name, [out],
                 "Gelu pieces (Div, Erf, Add, Mul, Mul) -> tanh approximation", b,
                 nodes=[c.name for c in chain] + [n.name for n in new])


def plant_cast_fp16(G, nd):
    out = nd.output[0]
    if nd.op_type in ("Constant", "Identity", "Shape") or not G.is_float(out):
        return None
    b = _copy(G.model)
    nodes = list(b.graph.node)
    i = [k for k, n in enumerate(nodes) if n.name == nd.name][0]
    nodes[i].output[0] = out + "/planted_fp32"
    c1 = helper.make_node("Cast", [out + "/planted_fp32"], [out + "/planted_fp16"],
                          nd.name + "/planted_cast_fp16", to=TensorProto.FLOAT16)
    c2 = helper.make_node("Cast", [out + "/planted_fp16"], [out],
                          nd.name + "/planted_cast_fp32", to=FLOAT)
    del b.graph.node[:]
    b.graph.node.extend(nodes[:i + 1] + [c1, c2] + nodes[i + 1:])
    return Fault("cast_fp16", c2.name, [out], f"Cast to float16 and back on {nd.op_type} "
                 f"{nd.name}'s output", b, nodes=[c1.name, c2.name])


# kind: (ops it applies to, planter, how many per model)
PLANTERS = [
    ("conv_pads", ("Conv",), plant_conv_pads, 2),
    ("conv_dilation", ("Conv",), plant_conv_dilation, 1),
    ("conv_strides", ("Conv",), plant_conv_strides, 1),
    ("gemm_transB", ("Gemm",), plant_gemm_transb, 1),
    ("gemm_alpha", ("Gemm",), plant_gemm_alpha, 1),
    ("softmax_axis", ("Softmax",), plant_softmax_axis, 1),
    ("leakyrelu_alpha", ("LeakyRelu",), plant_leaky_alpha, 1),
    ("clip_bounds", ("Clip",), plant_clip_min, 1),
    ("norm_epsilon", ("BatchNormalization", "LayerNormalization", "Add"), plant_norm_eps, 1),
    ("weight_scale", tuple(WEIGHT_INPUT), plant_weight_scale, 1),
    ("weight_noise", tuple(WEIGHT_INPUT), plant_weight_noise, 1),
    ("relu_to_leakyrelu", ("Relu",), plant_relu_leaky, 1),
    ("sigmoid_to_hardsigmoid", ("Sigmoid",), plant_sigmoid_hard, 1),
    ("gelu_to_tanh", ("Div",), plant_gelu_tanh, 1),
    ("div_to_mul_fp16", ("Div",), plant_div_mul16, 2),
    ("exp_to_pow", ("Exp",), plant_exp_pow, 1),
    ("cast_fp16", None, plant_cast_fp16, 2),
]


def plant_all(model_name, G):
    faults = []
    for kind, ops, planter, count in PLANTERS:
        seed = zlib.crc32(f"{model_name}/{kind}".encode())
        rng = np.random.default_rng(seed)
        cands = [nd for nd in G.nodes if nd.name and (ops is None or nd.op_type in ops)]
        order = rng.permutation(len(cands)) if cands else []
        got = 0
        for k in order:
            nd = cands[k]
            f = planter(G, nd, rng) if planter is plant_weight_noise else planter(G, nd)
            if f is None or not viable(f.model):
                continue
            faults.append(f)
            got += 1
            if got == count:
                break
    return faults


# ------------------------------------------------------------------------------------------
# The oracle


def rel_l2(a, b):
    a = a.astype(np.float64).ravel()
    b = b.astype(np.float64).ravel()
    d = np.linalg.norm(a - b)
    na = np.linalg.norm(a)
    return d / na if na > 0 else d


def verdict(a, b, rtol=RTOL, atol=ATOL):
    """The contract's rule on two arrays: 'agree', 'diverge', or 'border' (a float value
    within MARGIN of a tolerance, where optimized and unoptimized runs may differ)."""
    if a is None or b is None:
        return "unknown", {}
    if a.shape != b.shape or a.dtype != b.dtype:
        return "diverge", {"shape_mismatch": True}
    if a.dtype.kind != "f":
        return ("agree" if np.array_equal(a, b) else "diverge"), {}
    if not np.array_equal(np.isnan(a), np.isnan(b)) or \
            not np.array_equal(np.isinf(a), np.isinf(b)):
        return "diverge", {"nonfinite": True}
    fin = np.isfinite(a) & np.isfinite(b)
    r = rel_l2(a[fin], b[fin]) if fin.any() else 0.0
    m = float(np.max(np.abs(a[fin].astype(np.float64) - b[fin]))) if fin.any() else 0.0
    info = {"rel_l2": r, "max_abs": m}
    if r > rtol * MARGIN and m > atol * MARGIN:
        return "diverge", info
    if r < rtol / MARGIN or m < atol / MARGIN:
        return "agree", info
    return "border", info


class Oracle:
    """Every value of a model from `onnxexec run --no-optimize`, each made a graph output
    through an Identity node; initializers straight from the file."""

    def __init__(self, tool, work):
        self.tool = tool
        self.work = work
        self.n = 0

    def values(self, model, names, types, input_files):
        produced = {o for nd in model.graph.node for o in nd.output if o}
        graph_inputs = {i.name for i in model.graph.input}
        inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
        m = _copy(model)
        wanted = []
        for name in names:
            if name in produced or (name in graph_inputs and name not in inits):
                k = len(wanted)
                m.graph.node.append(helper.make_node("Identity", [name], [f"oracle_{k}"],
                                                     f"oracle_id_{k}"))
                m.graph.output.append(helper.make_tensor_value_info(
                    f"oracle_{k}", types.get(name, FLOAT), None))
                wanted.append(name)
        self.n += 1
        d = os.path.join(self.work, f"oracle{self.n}")
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        path = os.path.join(d, "model.onnx")
        onnx.save(m, path)
        args = ["run", path, "--no-optimize", "-o", d]
        for k, v in input_files.items():
            args += ["-i", f"{k}={v}"]
        rc, out, err = self.tool.run(args)
        if rc != 0:
            raise RuntimeError(f"oracle run failed ({rc}): {short(out + err)}")
        vals = {name: np.load(os.path.join(d, f"oracle_{k}.npy")) for k, name in enumerate(wanted)}
        for name, arr in inits.items():
            vals.setdefault(name, arr)
        shutil.rmtree(d, ignore_errors=True)
        return vals


def optimized_constants(tool, path):
    """The initializers of the graph onnxexec runs for `path` (`convert --optimize=all`),
    with the outputs of the nodes that read each: the oracle for the constants the graph
    optimizer makes (BatchNormalization folded into a Conv's weights and bias)."""
    out = path + ".opt.onnx"
    rc, so, se = tool.run(["convert", path, out, "--optimize=all"])
    if rc != 0:
        raise RuntimeError(f"convert --optimize=all {path} failed: {short(so + se)}")
    m = onnx.load(out)
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    readers = defaultdict(set)
    for nd in m.graph.node:
        for i in nd.input:
            if i in inits:
                readers[i] |= {o for o in nd.output if o}
    return inits, readers


def absorbers(G, value, compared):
    """The compared values that stand for `value`: itself when compared, else the first
    compared values downstream of it (the outputs of the node side A fused it into)."""
    if value in compared:
        return {value}
    found, seen, todo = set(), set(), [value]
    while todo:
        v = todo.pop()
        for nd in G.readers.get(v, []):
            for o in nd.output:
                if not o or o in seen:
                    continue
                seen.add(o)
                if o in compared:
                    found.add(o)
                else:
                    todo.append(o)
    return found


# ------------------------------------------------------------------------------------------
# The run


def fmt(x):
    return "null" if x is None else f"{x:.3g}"


def save_inputs(d, inputs):
    os.makedirs(d, exist_ok=True)
    files = {}
    for k, v in inputs.items():
        p = os.path.join(d, k.replace("/", "_") + ".npy")
        np.save(p, v)
        files[k] = p
    return files


def input_args(files):
    out = []
    for k, v in files.items():
        out += ["-i", f"{k}={v}"]
    return out


def check_report_shape(C, what, rc, rep, out, err):
    """Exit status and JSON agree with each other; returns False when unusable."""
    if rep is None:
        C.check(False, what, f"exit {rc}, no JSON report: {short(out + err)}")
        return False
    if rc != (0 if rep.get("agree") else 1):
        C.check(False, what, f"exit {rc} but agree is {rep.get('agree')}")
        return False
    return True


def evaluate_fault(C, tool, oracle, name, G, va, f, fpath, opath, files, types, opt_a):
    what = f"fault {name}/{f.kind} at {f.node}"
    vb = oracle.values(f.model, list(va), types, files)
    rc, rep, out, err = tool.compare(opath, "cpu", fpath, input_args(files))
    C.counts["faults"] += 1
    if not check_report_shape(C, what, rc, rep, out, err):
        return None
    vals = rep.get("values") or []
    order = [v["name"] for v in vals]
    compared = set(order)
    first = rep.get("first_divergent")
    fname = first["name"] if first else None

    # Initializers as the graph optimizer leaves them (it may fold, transpose or make new
    # ones: BatchNormalization folded into a Conv), from the optimized files, where the
    # tool compares initializers.
    const_readers = {}
    if any(v in G.inits or v not in va for v in order):
        opt_a, opt_b = opt_a(), optimized_constants(tool, fpath)
        for v in order:
            if v in opt_a[0]:
                if v not in va:
                    const_readers[v] = opt_a[1][v]
                va[v], vb[v] = opt_a[0][v], opt_b[0].get(v)

    # The oracle's expectation: the first compared value that is not clearly equal.
    exp, exp_kind, verdicts = None, None, {}
    for v in order:
        kind, info = verdict(va.get(v), vb.get(v))
        verdicts[v] = (kind, info)
        if kind in ("diverge", "border") and exp is None:
            exp, exp_kind = v, kind
    unknown = [v for v in order if verdicts[v][0] == "unknown"]

    planted = set()
    for o in f.outputs:
        planted |= absorbers(G, o, compared)
    if f.init and f.init in compared:
        planted.add(f.init)
    # a constant the optimizer made, read by the node that absorbed the planted one
    planted |= {v for v, outs in const_readers.items() if outs & planted}
    named = fname is not None and (fname in planted or (first.get("node") in f.nodes))

    # Near-equivalent swaps: numpy says first whether the planted node's output changes.
    expect = "diverge"
    if f.near is not None:
        x = va.get(f.near[0])
        kind, info = verdict(f.near[1](x).astype(np.float32), f.near[2](x).astype(np.float32))
        expect = {"agree": "agree", "diverge": "diverge", "border": "either"}[kind]
        what += f" (numpy: rel L2 {fmt(info.get('rel_l2'))} -> {expect})"

    detail = f"{f.desc}; tool: "
    if first is None:
        detail += "agree"
    else:
        detail += (f"{fname} (node {first.get('node')}, {first.get('op')}, "
                   f"rel L2 {fmt(first.get('rel_l2'))})")
    detail += f"; oracle: {exp or 'agree'}"
    if exp is not None:
        detail += f" ({exp_kind}, rel L2 {fmt(verdicts[exp][1].get('rel_l2'))})"

    if expect == "agree":
        C.counts["equal_pairs"] += 1
        ok = first is None and exp is None
        if ok:
            C.counts["equal_agree"] += 1
        C.check(ok, what, detail)
        return rep
    if fname is not None and fname in unknown:
        C.check(False, what, detail + f"; {fname} is not a value of the original graph")
        return rep
    if expect == "either" or exp_kind == "border":
        ok = first is None or named or (exp is not None and fname == exp)
        if first is not None:
            C.counts["planted"] += 1
            C.counts["named"] += named
        C.check(ok, what, detail)
        C.note(what, "borderline (within 20% of the tolerance): " +
               ("the tool agrees" if first is None else f"the tool diverges at {fname}"))
        return rep

    C.counts["planted"] += 1
    problems = []
    if exp is None:
        problems.append("the oracle sees no divergence: the planted fault is too weak")
    elif exp not in planted:
        problems.append(f"the oracle's first divergent value {exp} is not the planted node's")
    if first is None:
        problems.append("the tool reports agreement")
    elif fname != exp:
        problems.append(f"the tool names {fname}, the oracle {exp}")
    if not named:
        problems.append(f"not the planted node (expected one of {sorted(planted)})")
    else:
        C.counts["named"] += 1
        if fname in const_readers:
            C.counts["named_const"] += 1
            C.note(what, f"named by {fname}, a constant the optimizer made for the node "
                   f"that absorbed the planted one (its reader writes "
                   f"{sorted(const_readers[fname])})")
        elif fname == f.init:
            C.counts["named_init"] += 1
        elif fname not in f.outputs:
            C.counts["named_fused"] += 1
    if first is not None and exp == fname:
        kind, info = verdicts[fname]
        if info.get("shape_mismatch"):
            if not first.get("shape_mismatch"):
                problems.append("shapes differ but shape_mismatch is false")
        elif "rel_l2" in info and first.get("rel_l2") is not None:
            r, m = info["rel_l2"], info["max_abs"]
            if abs(first["rel_l2"] - r) > 0.05 * r + 1e-5:
                problems.append(f"rel L2 {first['rel_l2']:.4g}, oracle {r:.4g}")
            if first.get("max_abs") is None or abs(first["max_abs"] - m) > 0.05 * m + 1e-5:
                problems.append(f"max abs {first.get('max_abs')}, oracle {m:.4g}")
        path = rep.get("path") or []
        outs = {v["name"] for v in vals if v.get("is_output")}
        if not path or path[0] != fname or path[-1] not in outs:
            problems.append(f"path {path[:1]}..{path[-1:]} does not run from {fname} to an output")
    C.check(not problems, what, detail + ("" if not problems else "; " + "; ".join(problems)))
    return rep


def equal_pair(C, tool, what, model, a, b, extra=(), min_values=2):
    rc, rep, out, err = tool.compare(model, a, b, extra)
    C.counts["equal_pairs"] += 1
    if not check_report_shape(C, what, rc, rep, out, err):
        return None
    first = rep.get("first_divergent")
    n = len(rep.get("values") or [])
    ok = rep.get("agree") is True and first is None and n >= min_values
    C.counts["equal_agree"] += ok
    worst = max((v.get("rel_l2") or 0 for v in rep.get("values") or []), default=0)
    C.check(ok, what, f"{n} values compared, largest rel L2 {worst:.3g}" +
            ("" if first is None else f"; first divergent {first['name']} rel L2 "
             f"{fmt(first.get('rel_l2'))}") +
            ("" if n >= min_values else f"; expected at least {min_values} values"))
    return rep


def equal_pairs(C, tool, name, opath, d):
    # noopt runs keep every value: at least the values the optimized graph has left
    equal_pair(C, tool, f"equal {name}: cpu vs cpu:noopt", opath, "cpu", "cpu:noopt",
               min_values=3)
    for label, opts in (("convert", []), ("convert --optimize", ["--optimize"]),
                        ("convert --optimize=all", ["--optimize=all"]),
                        ("convert --opset 18", ["--opset", "18"])):
        out = os.path.join(d, "conv_" + label.replace(" ", "_").replace("-", "").replace("=", "_")
                           + ".onnx")
        rc, so, se = tool.run(["convert", opath, out] + opts)
        if rc != 0:
            if "opset" in label:
                print(f"SKIP equal {name}: cpu vs {label}: convert fails: {short(so + se, 160)}")
                continue
            C.check(False, f"equal {name}: cpu vs {label}", f"convert failed: {short(so + se)}")
            continue
        rep = equal_pair(C, tool, f"equal {name}: cpu vs {label}", opath, "cpu", out,
                         min_values=2)
        if rep and rep.get("agree"):
            os.remove(out)


def torch_references(C, tool, name, opath, d, inputs, outputs, inter):
    x_name, x = next(iter(inputs.items()))
    y_name, y = next(iter(outputs.items()))
    rng = np.random.default_rng(zlib.crc32(name.encode()))

    def backend(folder, yv):
        ds = os.path.join(folder, "test_data_set_0")
        os.makedirs(ds, exist_ok=True)
        with open(os.path.join(ds, "input_0.pb"), "wb") as fh:
            fh.write(numpy_helper.from_array(x, x_name).SerializeToString())
        with open(os.path.join(ds, "output_0.pb"), "wb") as fh:
            fh.write(numpy_helper.from_array(yv, y_name).SerializeToString())

    def npy(folder, vals):
        os.makedirs(folder, exist_ok=True)
        for k, v in vals.items():
            np.save(os.path.join(folder, k.replace("/", "%2F") + ".npy"), v)

    ref = os.path.join(d, "torch_ref")
    shutil.rmtree(ref, ignore_errors=True)
    backend(os.path.join(ref, "backend"), y)
    allv = {y_name: y, x_name: x}
    allv.update(inter)
    npy(os.path.join(ref, "npy"), allv)
    np.savez(os.path.join(ref, "ref.npz"), **{y_name: y}, **inter)
    xfile = os.path.join(ref, "npy", x_name + ".npy")
    inter_names = sorted(inter)

    def agrees(what, side, extra, need):
        rc, rep, out, err = tool.compare(opath, "cpu", side, extra)
        C.counts["torch_refs"] += 1
        if not check_report_shape(C, what, rc, rep, out, err):
            return
        got = {v["name"]: v for v in rep.get("values") or []}
        missing = [n for n in need if n not in got]
        worst = max((v.get("rel_l2") or 0 for v in got.values()), default=0)
        first = rep.get("first_divergent")
        ok = rep.get("agree") is True and not missing
        C.counts["torch_refs_ok"] += ok
        C.check(ok, what, f"{len(got)} values compared, largest rel L2 {worst:.3g}" +
                ("" if first is None else f"; first divergent {first['name']} rel L2 "
                 f"{fmt(first.get('rel_l2'))}") +
                (f"; not compared: {missing}" if missing else ""))

    def diverges(what, side, extra, want):
        rc, rep, out, err = tool.compare(opath, "cpu", side, extra)
        C.counts["torch_refs"] += 1
        if not check_report_shape(C, what, rc, rep, out, err):
            return
        first = rep.get("first_divergent")
        ok = first is not None and first["name"] == want
        C.counts["torch_refs_ok"] += ok
        C.check(ok, what, f"first divergent {first and first['name']}, rel L2 "
                f"{fmt(first and first.get('rel_l2'))}; expected {want}")

    agrees(f"torch {name}: backend folder", os.path.join(ref, "backend"), [], [y_name])
    agrees(f"torch {name}: .npy folder with {len(inter)} intermediates", os.path.join(ref, "npy"),
           ["-i", f"{x_name}={xfile}"], [y_name] + inter_names)
    agrees(f"torch {name}: .npz", os.path.join(ref, "ref.npz"), ["-i", f"{x_name}={xfile}"],
           [y_name] + inter_names)

    bad = os.path.join(d, "torch_ref_bad")
    shutil.rmtree(bad, ignore_errors=True)
    backend(os.path.join(bad, "backend"), (y * np.float32(1 + 1e-2)).astype(np.float32))
    diverges(f"torch {name}: backend folder, output scaled by 1+1e-2",
             os.path.join(bad, "backend"), [], y_name)
    if inter_names:
        victim = inter_names[len(inter_names) // 2]
        v = inter[victim]
        bad_vals = dict(allv)
        bad_vals[victim] = (v * (1 + 1e-2 * rng.standard_normal(v.shape))).astype(np.float32)
        npy(os.path.join(bad, "npy"), bad_vals)
        diverges(f"torch {name}: .npy folder, {victim} with 1e-2 relative noise",
                 os.path.join(bad, "npy"), ["-i", f"{x_name}={xfile}"], victim)
    np.savez(os.path.join(bad, "ref.npz"),
             **{y_name: (y + 1e-2 * np.abs(y).max() *
                         rng.standard_normal(y.shape)).astype(np.float32)})
    diverges(f"torch {name}: .npz, output with 1e-2 noise", os.path.join(bad, "ref.npz"),
             ["-i", f"{x_name}={xfile}"], y_name)


# the faults the checks of the options run on (the first named one of each kind)
CLI_KINDS = ("conv_pads", "softmax_axis", "cast_fp16")


def cli_checks(C, tool, work, fault_cases, equal_case):
    """--reduce, --html, --outputs-only, --rtol, the plain summary, exit statuses."""
    opath, files = equal_case
    args = input_args(files)
    rtol_cases = [c for c in fault_cases if c[0].kind == "cast_fp16"]
    fault_cases = [c for c in fault_cases if c[0].kind != "cast_fp16"]

    # exit statuses for usage errors, bad files, devices this build lacks
    rc, out, err = tool.run(["compare", opath, "cpu"])
    C.check(rc == 2, "exit: compare with one side is a usage error (2)", f"exit {rc}")
    rc, out, err = tool.run(["compare", opath, "cpu", "cpu", "--rtol", "abc"])
    C.check(rc == 2, "exit: --rtol abc is a usage error (2)", f"exit {rc}")
    rc, out, err = tool.run(["compare", os.path.join(work, "missing.onnx"), "cpu", "cpu:noopt"])
    C.check(rc == 3, "exit: a missing model could not run (3)", f"exit {rc}: {short(err, 120)}")
    rc, out, err = tool.run(["compare", opath, "cpu", "cuda"])
    C.check(rc in (2, 3) and "cuda" in (out + err).lower(),
            "exit: side cuda says it is not available in this build",
            f"exit {rc}: {short(out + err, 160)}")

    # plain text
    rc, out, err = tool.run(["compare", opath, "cpu", "cpu:noopt"] + args)
    C.check(rc == 0 and "agree" in out.lower(), "text: an equal pair prints \"agree\"",
            f"exit {rc}, last line: {out.strip().splitlines()[-1:] if out.strip() else err[-120:]}")
    if fault_cases:
        f, fpath, fopath, ffiles, fname = fault_cases[0]
        rc, out, err = tool.run(["compare", fopath, "cpu", fpath] + input_args(ffiles))
        C.check(rc == 1 and "first divergent value" in out and fname in out,
                f"text: a fault prints \"first divergent value {fname}\"", f"exit {rc}")

    # --html
    html = os.path.join(work, "equal.html")
    rc, out, err = tool.run(["compare", opath, "cpu", "cpu:noopt", "--html", html] + args)
    body = open(html, encoding="utf-8", errors="replace").read() if os.path.exists(html) else ""
    C.check(rc == 0 and "<svg" in body, "html: equal pair, exit 0, page with <svg",
            f"exit {rc}, {len(body)} bytes")
    for k, (f, fpath, fopath, ffiles, fname) in enumerate(fault_cases[:2]):
        html = os.path.join(work, f"fault{k}.html")
        rc, out, err = tool.run(["compare", fopath, "cpu", fpath, "--html", html] +
                                input_args(ffiles))
        body = open(html, encoding="utf-8", errors="replace").read() if os.path.exists(html) else ""
        C.check(rc == 1 and "<svg" in body, f"html: fault {f.kind}, exit 1, page with <svg",
                f"exit {rc}, {len(body)} bytes")

    # --rtol: float16 rounding (rel L2 about 2e-4) is within 1e-3
    for f, fpath, fopath, ffiles, fname in rtol_cases:
        rc, rep, out, err = tool.compare(fopath, "cpu", fpath,
                                         input_args(ffiles) + ["--rtol", "1e-3"])
        if check_report_shape(C, "rtol", rc, rep, out, err):
            rtols = {v.get("rtol") for v in rep.get("values") or []}
            C.check(rep["agree"] is True and rtols == {1e-3},
                    f"rtol: fault {f.kind} at {fname} agrees with --rtol 1e-3",
                    f"exit {rc}, rtol used {sorted(rtols)}")

    # --outputs-only on a fault
    for f, fpath, fopath, ffiles, fname in fault_cases[:1]:
        rc, rep, out, err = tool.compare(fopath, "cpu", fpath,
                                         input_args(ffiles) + ["--outputs-only"])
        if check_report_shape(C, "outputs-only", rc, rep, out, err):
            vals = rep.get("values") or []
            ok = rep["agree"] is False and vals and all(v.get("is_output") for v in vals) and \
                rep["first_divergent"]["is_output"]
            C.check(ok, f"outputs-only: fault {f.kind}: only outputs compared, an output diverges",
                    f"{len(vals)} values")

    # --reduce on the first two faults
    for k, (f, fpath, fopath, ffiles, fname) in enumerate(fault_cases[:2]):
        d = os.path.join(work, f"reduce{k}")
        shutil.rmtree(d, ignore_errors=True)
        rc, rep, out, err = tool.compare(fopath, "cpu", fpath, input_args(ffiles) + ["--reduce", d])
        red_err = err
        what = f"reduce: fault {f.kind} at {fname}"
        ds = os.path.join(d, "test_data_set_0")
        files_ok = os.path.exists(os.path.join(d, "model.onnx")) and \
            os.path.exists(os.path.join(ds, "input_0.pb")) and \
            os.path.exists(os.path.join(ds, "output_0.pb"))
        if not C.check(rc == 1 and files_ok, what + ": model.onnx, input_0.pb, output_0.pb",
                       f"exit {rc}" + ("" if files_ok else f", {short(err, 160)}")):
            continue
        rc, out, err = tool.run(["test", d])
        C.check(rc == 0, what + ": `onnxexec test` passes on side A's values",
                short(out + err, 200))
        b = os.path.join(d, "b")
        if os.path.exists(os.path.join(b, "model.onnx")):
            rc, out, err = tool.run(["test", b])
            C.check(rc == 0, what + ": `onnxexec test` of b/ passes on side B's values",
                    short(out + err, 200))
            ins_a = [i.name for i in onnx.load(os.path.join(d, "model.onnx")).graph.input]
            ins_b = [i.name for i in onnx.load(os.path.join(b, "model.onnx")).graph.input]
            if ins_a != ins_b:  # side A fused the chain that B's fault broke apart
                C.check("different nodes" in red_err,
                        what + ": the sides' nodes differ (%s vs %s) and the tool says so"
                        % (ins_a, ins_b), short(red_err, 200))
                continue
            rc, rep, out, err = tool.compare(os.path.join(d, "model.onnx"), "cpu",
                                             os.path.join(b, "model.onnx"),
                                             ["--inputs", ds])
            C.check(rc == 1 and rep and rep["first_divergent"] and
                    rep["first_divergent"]["name"] == fname,
                    what + ": the reduced pair diverges at the same value",
                    f"exit {rc}, {rep and (rep.get('first_divergent') or {}).get('name')}"
                    f" {short(err, 120)}")
        else:
            print(f"SKIP {what}: no b/ case written")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--onnxexec", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--only", nargs="*", help="only these models")
    ap.add_argument("--no-torch", action="store_true", help="hand-made models only")
    args = ap.parse_args()
    t0 = time.time()
    work = os.path.abspath(args.work)
    os.makedirs(work, exist_ok=True)
    tool = Tool(os.path.abspath(args.onnxexec))
    oracle = Oracle(tool, work)
    C = Checks()

    rng = np.random.default_rng(2024)
    models = []
    for name, build in (("mlp", hand_mlp), ("cnn", hand_cnn), ("residual", hand_residual),
                        ("attention", hand_attention)):
        m, inputs = build(rng)
        models.append((name, m, inputs, None, None))
    if not args.no_torch:
        t1 = time.time()
        models += export_torch_models(args.source, work)
        print(f"exported the torch models in {time.time() - t1:.1f}s", flush=True)
    if args.only:
        models = [m for m in models if m[0] in args.only]

    fault_cases, equal_case = [], None
    for name, model, inputs, outputs, inter in models:
        t1 = time.time()
        d = os.path.join(work, name)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        opath = os.path.join(d, "orig.onnx")
        onnx.save(model, opath)
        files = save_inputs(os.path.join(d, "inputs"), inputs)
        G = Graph(model)
        types = dict(G.types)
        va = oracle.values(model, G.values() + list(G.inits), types, files)
        cache = []

        def opt_a(opath=opath, cache=cache):
            if not cache:
                cache.append(optimized_constants(tool, opath))
            return cache[0]
        faults = plant_all(name, G)
        print(f"-- {name}: {len(G.nodes)} nodes, {len(faults)} faults planted", flush=True)
        for k, f in enumerate(faults):
            fpath = os.path.join(d, f"fault{k:02d}_{f.kind}.onnx")
            onnx.save(f.model, fpath)
            n_failed = len(C.failures)
            try:
                rep = evaluate_fault(C, tool, oracle, name, G, dict(va), f, fpath, opath, files,
                                     types, opt_a)
            except RuntimeError as e:
                C.check(False, f"fault {name}/{f.kind} at {f.node}", str(e))
                continue
            if rep and rep.get("first_divergent") and f.near is None and \
                    f.kind in CLI_KINDS and \
                    not any(c[0].kind == f.kind for c in fault_cases):
                fault_cases.append((f, fpath, opath, files, rep["first_divergent"]["name"]))
            elif len(C.failures) == n_failed:  # keep the files of failures only
                for p in (fpath, fpath + ".opt.onnx"):
                    if os.path.exists(p):
                        os.remove(p)
        equal_pairs(C, tool, name, opath, d)
        if outputs is not None:
            torch_references(C, tool, name, opath, d, inputs, outputs, inter)
        if equal_case is None:
            equal_case = (opath, files)
        print(f"-- {name}: {time.time() - t1:.1f}s", flush=True)

    if equal_case:
        cli_checks(C, tool, work, fault_cases, equal_case)

    c = C.counts
    print(f"\nfaults planted {c['faults']}: {c['planted']} must be named, {c['named']} named "
          f"correctly ({c['named_fused']} through a fused node, {c['named_init']} by the "
          f"perturbed initializer, {c['named_const']} by a folded constant); "
          f"equal pairs {c['equal_agree']}/{c['equal_pairs']} agree; "
          f"PyTorch references {c['torch_refs_ok']}/{c['torch_refs']}; "
          f"{tool.n_compare} compares in {time.time() - t0:.1f}s")
    for line in C.debatable:
        print(line)
    print(f"{C.n_pass} passed, {len(C.failures)} failed")
    for line in C.failures:
        print(line)
    return 1 if C.failures else 0


if __name__ == "__main__":
    sys.exit(main())
