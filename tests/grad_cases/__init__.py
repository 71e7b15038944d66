"""Gradient-rule cases for tests/gradcheck_ops.py: one module per rule family.

Each module defines CASES, a list of (name, model) pairs built with `op_model`, each a small
float64 ONNX model around one operator, with random shapes that include broadcasting and
size-1 dims where the operator broadcasts. Integer inputs (indices, shapes) are initializers,
so that `onnxexec gradcheck` only perturbs float inputs.
"""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F64 = TensorProto.DOUBLE


def op_model(op, inputs, attrs=None, n_outputs=1, opset=17, domain="", extra_nodes=(),
             outputs=None):
    """A model of one `op` node.

    inputs: list of items, each
      - a tuple (name, shape): a float64 graph input (random in gradcheck), or
      - a tuple (name, numpy array): an initializer (int64 indices, or a fixed float64
        tensor; float initializers are checked too), or
      - None: an omitted optional input.
    outputs: names of the node's outputs (default y0, y1, ...); every one is a graph output
    unless its name starts with '_' (then it is left unread).
    extra_nodes: more nodes appended after (e.g. to make a loss of several outputs).
    """
    vi, inits, names = [], [], []
    for k, item in enumerate(inputs):
        if item is None:
            names.append("")
            continue
        name, spec = item
        names.append(name)
        if name in names[:-1]:
            continue  # the same input read twice
        if isinstance(spec, np.ndarray):
            inits.append(numpy_helper.from_array(spec, name))
        else:
            vi.append(helper.make_tensor_value_info(name, F64, list(spec)))
    outs = outputs or [f"y{j}" for j in range(n_outputs)]
    node = helper.make_node(op, names, outs, domain=domain, **(attrs or {}))
    g_out = [helper.make_tensor_value_info(o, F64, None) for o in outs if not o.startswith("_")]
    for n in extra_nodes:
        for o in n.output:
            if not o.startswith("_"):
                g_out.append(helper.make_tensor_value_info(o, F64, None))
    graph = helper.make_graph([node, *extra_nodes], op, vi, g_out, inits)
    imports = [helper.make_opsetid("", opset)]
    if domain:
        imports.append(helper.make_opsetid(domain, 1))
    return helper.make_model(graph, opset_imports=imports)


def rng(seed):
    return np.random.default_rng(seed)
