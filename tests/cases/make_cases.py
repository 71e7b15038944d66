#!/usr/bin/python3
"""Writes small regression cases in the ONNX backend-test layout (checked in; run by the
`cases` test through `onnxexec test`). Expected outputs are computed here with numpy.

    loop_outer_lifetime: a Loop body reads `v` from the main graph after v's last direct
    use; the planner must keep v alive through the Loop (its memory was reused before).
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def save_case(name, model, inputs, outputs):
    os.makedirs(f"{name}/test_data_set_0", exist_ok=True)
    onnx.save(model, f"{name}/model.onnx")
    for i, (n, a) in enumerate(inputs):
        with open(f"{name}/test_data_set_0/input_{i}.pb", "wb") as f:
            f.write(numpy_helper.from_array(a, n).SerializeToString())
    for i, (n, a) in enumerate(outputs):
        with open(f"{name}/test_data_set_0/output_{i}.pb", "wb") as f:
            f.write(numpy_helper.from_array(a, n).SerializeToString())


def loop_outer_lifetime():
    f = TensorProto.FLOAT
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Add", ["s_in", "v"], ["s_out"]),
         helper.make_node("Identity", ["s_in"], ["scan"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("s_in", f, [4])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("s_out", f, [4]),
         helper.make_tensor_value_info("scan", f, [4])])
    two = numpy_helper.from_array(np.array(2, np.float32), "two")
    m3 = numpy_helper.from_array(np.array(3, np.int64), "m")
    g = helper.make_graph(
        [helper.make_node("Mul", ["x", "two"], ["v"]),
         helper.make_node("Neg", ["v"], ["w"]),
         helper.make_node("Exp", ["w"], ["u"]),
         helper.make_node("Loop", ["m", "", "x"], ["final", "scans"], body=body)],
        "loop_outer_lifetime",
        [helper.make_tensor_value_info("x", f, [4])],
        [helper.make_tensor_value_info("u", f, [4]),
         helper.make_tensor_value_info("final", f, [4]),
         helper.make_tensor_value_info("scans", f, [3, 4])],
        [two, m3])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    x = np.array([0.5, -1.0, 2.0, 3.0], np.float32)
    v = x * 2
    scans = np.stack([x + k * v for k in range(3)]).astype(np.float32)
    save_case("loop_outer_lifetime", model, [("x", x)],
              [("u", np.exp(-v)), ("final", (x + 3 * v).astype(np.float32)), ("scans", scans)])


def loop_swap_views():
    """A Loop body that swaps its two carried values and scans one of them, all through
    Identity: the body's outputs show its inputs' memory (views), so the Loop must copy every
    new value before it drops an old one."""
    f = TensorProto.FLOAT
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Identity", ["b_in"], ["a_out"]),
         helper.make_node("Identity", ["a_in"], ["b_out"]),
         helper.make_node("Identity", ["a_in"], ["scan"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("a_in", f, [3]),
         helper.make_tensor_value_info("b_in", f, [3])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("a_out", f, [3]),
         helper.make_tensor_value_info("b_out", f, [3]),
         helper.make_tensor_value_info("scan", f, [3])])
    m3 = numpy_helper.from_array(np.array(3, np.int64), "m")
    g = helper.make_graph(
        [helper.make_node("Loop", ["m", "", "a", "b"], ["a_final", "b_final", "scans"],
                          body=body)],
        "loop_swap_views",
        [helper.make_tensor_value_info("a", f, [3]), helper.make_tensor_value_info("b", f, [3])],
        [helper.make_tensor_value_info("a_final", f, [3]),
         helper.make_tensor_value_info("b_final", f, [3]),
         helper.make_tensor_value_info("scans", f, [3, 3])],
        [m3])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    a = np.array([1, 2, 3], np.float32)
    b = np.array([-1, -2, -3], np.float32)
    cur, scans = (a, b), []
    for _ in range(3):
        scans.append(cur[0])
        cur = (cur[1], cur[0])
    save_case("loop_swap_views", model, [("a", a), ("b", b)],
              [("a_final", cur[0]), ("b_final", cur[1]), ("scans", np.stack(scans))])


def conv_ref(x, w, stride, pads, dil, group):
    """Direct numpy convolution (N, C, H, W), the oracle for the depthwise cases."""
    n, c, h, wd = x.shape
    m, cg, kh, kw = w.shape
    xp = np.zeros((n, c, h + pads[0] + pads[2], wd + pads[1] + pads[3]), np.float64)
    xp[:, :, pads[0]:pads[0] + h, pads[1]:pads[1] + wd] = x
    oh = (xp.shape[2] - ((kh - 1) * dil[0] + 1)) // stride[0] + 1
    ow = (xp.shape[3] - ((kw - 1) * dil[1] + 1)) // stride[1] + 1
    y = np.zeros((n, m, oh, ow))
    mg = m // group
    for o in range(m):
        gr = o // mg
        for i in range(oh):
            for j in range(ow):
                win = xp[:, gr * cg:(gr + 1) * cg, i * stride[0]:i * stride[0] + (kh - 1) * dil[0] + 1:dil[0],
                         j * stride[1]:j * stride[1] + (kw - 1) * dil[1] + 1:dil[1]]
                y[:, o, i, j] = (win * w[o]).sum(axis=(1, 2, 3))
    return y.astype(np.float32)


def depthwise_cases():
    """3x3 depthwise convolutions (the MobileNet kernel) at the edges of its fast path: strides
    1 and 2, dilation 2, asymmetric pads, widths where no output is interior, and wide rows
    where 16 outputs in a row have every tap inside it."""
    rng = np.random.default_rng(7)
    for name, hw, stride, pads, dil in (("dw3x3_s1_p1", (7, 9), (1, 1), (1, 1, 1, 1), (1, 1)),
                                        ("dw3x3_s2_p1", (8, 11), (2, 2), (1, 1, 1, 1), (1, 1)),
                                        ("dw3x3_s2_asym", (9, 10), (2, 2), (0, 2, 1, 0), (1, 1)),
                                        ("dw3x3_dil2", (9, 9), (1, 1), (2, 2, 2, 2), (2, 2)),
                                        ("dw3x3_narrow", (5, 2), (1, 1), (1, 1, 1, 1), (1, 1)),
                                        # wide rows: 16-output chunks wholly inside the row
                                        ("dw3x3_s1_wide", (3, 70), (1, 1), (1, 1, 1, 1), (1, 1)),
                                        ("dw3x3_s2_wide", (4, 101), (2, 2), (1, 1, 1, 1), (1, 1))):
        c = 3
        x = rng.standard_normal((2, c, *hw)).astype(np.float32)
        w = rng.standard_normal((c, 1, 3, 3)).astype(np.float32)
        b = rng.standard_normal(c).astype(np.float32)
        y = conv_ref(x, w, stride, pads, dil, c) + b[None, :, None, None]
        node = helper.make_node("Conv", ["x", "w", "b"], ["y"], group=c, strides=list(stride),
                                pads=list(pads), dilations=list(dil), kernel_shape=[3, 3])
        g = helper.make_graph(
            [node], name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(y.shape))],
            [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
        model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
        model.ir_version = 7
        save_case(name, model, [("x", x)], [("y", y.astype(np.float32))])


def layernorm_double():
    """LayerNormalization of doubles differing only past float's precision: they must be read
    as doubles (they were once rounded through float, which made them all equal)."""
    x = (1.0 + np.arange(8, dtype=np.float64) * 1e-9).reshape(2, 4)
    scale = np.ones(4, np.float64)
    bias = np.zeros(4, np.float64)
    eps = 1e-12
    mean = x.mean(axis=1, keepdims=True)
    y = (x - mean) / np.sqrt(((x - mean) ** 2).mean(axis=1, keepdims=True) + eps)
    node = helper.make_node("LayerNormalization", ["x", "s", "b"], ["y"], axis=-1, epsilon=eps)
    d = TensorProto.DOUBLE
    g = helper.make_graph([node], "layernorm_double", [helper.make_tensor_value_info("x", d, [2, 4])],
                          [helper.make_tensor_value_info("y", d, [2, 4])],
                          [numpy_helper.from_array(scale, "s"), numpy_helper.from_array(bias, "b")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    save_case("layernorm_double", model, [("x", x)], [("y", y)])


def concat_in_place():
    """Concat whose inputs the planner has their producers write in place (Relu after two
    1x1 convolutions, batch 1), next to Concats it must leave alone: batch 2 (the inputs are
    not contiguous blocks of the output), an input that is also a graph output, and an input
    read twice."""
    rng = np.random.default_rng(11)
    for name, n, extra_out, twice in (("concat_in_place", 1, False, False),
                                      ("concat_batch2", 2, False, False),
                                      ("concat_input_is_output", 1, True, False),
                                      ("concat_input_read_twice", 1, False, True)):
        x = rng.standard_normal((n, 3, 4, 5)).astype(np.float32)
        w1 = rng.standard_normal((2, 3, 1, 1)).astype(np.float32)
        w2 = rng.standard_normal((4, 3, 1, 1)).astype(np.float32)
        c1 = np.maximum(np.einsum("nchw,oc->nohw", x, w1[:, :, 0, 0]), 0)
        c2 = np.maximum(np.einsum("nchw,oc->nohw", x, w2[:, :, 0, 0]), 0)
        y = np.concatenate([c1, c2, c1 if twice else c2[:, :0]], axis=1)
        nodes = [helper.make_node("Conv", ["x", "w1"], ["a"]), helper.make_node("Relu", ["a"], ["r1"]),
                 helper.make_node("Conv", ["x", "w2"], ["b"]), helper.make_node("Relu", ["b"], ["r2"]),
                 helper.make_node("Concat", ["r1", "r2"] + (["r1"] if twice else []), ["y"], axis=1)]
        outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(y.shape))]
        vals = [("y", y.astype(np.float32))]
        if extra_out:
            outs.append(helper.make_tensor_value_info("r2", TensorProto.FLOAT, list(c2.shape)))
            vals.append(("r2", c2.astype(np.float32)))
        g = helper.make_graph(nodes, name,
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                              outs, [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")])
        model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
        model.ir_version = 7
        save_case(name, model, [("x", x)], vals)


def maxpool_nan():
    """A NaN in a pooling window gives NaN (as numpy's max and PyTorch do), on the float 2-D
    path and on the general path (with the Indices output)."""
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    x[0, 0, 1, 1] = np.nan
    x[0, 0, 2, 3] = np.nan
    y = x.reshape(1, 1, 2, 2, 2, 2).transpose(0, 1, 2, 4, 3, 5).reshape(1, 1, 2, 2, 4).max(-1)
    for name, outs in (("maxpool_nan", ["y"]), ("maxpool_nan_indices", ["y", "i"])):
        node = helper.make_node("MaxPool", ["x"], outs, kernel_shape=[2, 2], strides=[2, 2])
        g = helper.make_graph(
            [node], name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4])],
            [helper.make_tensor_value_info(o, TensorProto.FLOAT if o == "y" else TensorProto.INT64,
                                           [1, 1, 2, 2]) for o in outs])
        model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
        model.ir_version = 7
        expected = [("y", y.astype(np.float32))]
        if len(outs) == 2:  # flat index of each window's max; numpy's argmax picks a NaN
            flat = np.arange(16).reshape(1, 1, 2, 2, 2, 2).transpose(0, 1, 2, 4, 3, 5)
            win = x.reshape(1, 1, 2, 2, 2, 2).transpose(0, 1, 2, 4, 3, 5).reshape(1, 1, 2, 2, 4)
            arg = win.argmax(-1)
            idx = np.take_along_axis(flat.reshape(1, 1, 2, 2, 4), arg[..., None], -1)[..., 0]
            expected.append(("i", idx.astype(np.int64)))
        save_case(name, model, [("x", x)], expected)


if __name__ == "__main__":
    os.chdir(os.path.dirname(os.path.abspath(__file__)))
    loop_outer_lifetime()
    maxpool_nan()
    loop_swap_views()
    depthwise_cases()
    layernorm_double()
    concat_in_place()
