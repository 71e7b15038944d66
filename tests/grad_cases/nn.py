"""Gradient cases: convolution, pooling and Resize (graph/grad_nn.c)."""
import numpy as np
from onnx import helper, numpy_helper

from . import op_model, rng


def i64(*v):
    return np.array(v, dtype=np.int64)


def conv(name, x, w, b=None, op="Conv", opset=17, **attrs):
    ins = [("x", x), ("w", w)] + ([("b", b)] if b else [])
    return (name, op_model(op, ins, attrs, opset=opset))


def pool(name, op, x, opset=17, n_outputs=1, outputs=None, **attrs):
    return (name, op_model(op, [("x", x)], attrs, opset=opset, n_outputs=n_outputs,
                           outputs=outputs))


def resize(name, x, scales=None, sizes=None, roi=None, opset=13, **attrs):
    """A Resize whose float inputs (roi, scales) come from Constant nodes, so that gradcheck
    does not perturb them; sizes is an int64 initializer."""
    ins = [("x", x), None if roi is None else ("roi", [0]),
           None if scales is None else ("scales", [0]),
           None if sizes is None else ("sizes", i64(*sizes))]
    m = op_model("Resize", ins, attrs, opset=opset)
    g = m.graph
    consts = []
    for nm, val in (("roi", roi), ("scales", scales)):
        if val is None:
            continue
        # drop the placeholder graph input, feed the name from a Constant node
        for k, vi in enumerate(g.input):
            if vi.name == nm:
                del g.input[k]
                break
        t = numpy_helper.from_array(np.array(val, dtype=np.float32), nm)
        consts.append(helper.make_node("Constant", [], [nm], value=t))
    for c in reversed(consts):
        g.node.insert(0, c)
    return (name, m)


def distinct(shape, seed):
    """A fixed input of distinct values 0.37 apart: no max-pooling window ties within eps."""
    n = int(np.prod(shape))
    return (rng(seed).permutation(n).astype(np.float64) * 0.37 + 0.1).reshape(shape)


CASES = [
    # Conv
    conv("Conv_1d_pads_bias", [2, 3, 7], [4, 3, 3], [4], pads=[1, 2]),
    conv("Conv_1d_stride_drop", [1, 2, 10], [2, 2, 2], strides=[3]),
    conv("Conv_2d_stride_pads", [1, 2, 7, 6], [3, 2, 3, 2], [3], strides=[2, 3],
         pads=[1, 0, 0, 1]),
    conv("Conv_2d_dilations", [2, 2, 7, 7], [2, 2, 2, 3], dilations=[2, 1], strides=[1, 2]),
    conv("Conv_2d_dil_stride_pads", [1, 1, 9, 8], [2, 1, 3, 2], dilations=[2, 3],
         strides=[2, 2], pads=[2, 1, 1, 3]),
    conv("Conv_2d_group", [1, 4, 5, 5], [6, 2, 3, 3], [6], group=2, pads=[1, 1, 1, 1]),
    conv("Conv_2d_depthwise", [2, 3, 6, 5], [3, 1, 3, 3], group=3, strides=[2, 2],
         pads=[1, 1, 1, 1]),
    conv("Conv_2d_depthwise_mult", [1, 3, 5, 5], [6, 1, 2, 3], [6], group=3, strides=[2, 1],
         dilations=[1, 2]),
    conv("Conv_2d_same_upper", [1, 2, 5, 6], [2, 2, 3, 2], auto_pad="SAME_UPPER",
         strides=[2, 2]),
    conv("Conv_2d_same_lower", [1, 2, 6, 5], [3, 2, 2, 3], auto_pad="SAME_LOWER",
         strides=[2, 3], dilations=[2, 1]),
    conv("Conv_2d_valid", [2, 2, 7, 6], [2, 2, 3, 2], auto_pad="VALID", strides=[2, 3]),
    conv("Conv_3d_group", [1, 4, 4, 5, 4], [2, 2, 2, 3, 2], [2], group=2, strides=[1, 2, 1],
         pads=[1, 0, 1, 0, 1, 0], dilations=[1, 1, 2]),
    conv("Conv_size1_spatial", [1, 2, 1, 5], [2, 2, 1, 3], [2], pads=[0, 1, 0, 1]),
    conv("Conv_batch_symbolic", ["N", 4, 5, 5], [6, 2, 3, 3], group=2, strides=[2, 2],
         pads=[1, 1, 1, 1]),
    conv("Conv_opset13", [1, 2, 5, 5], [2, 1, 3, 3], group=2, strides=[2, 2], opset=13),
    # ConvTranspose
    conv("ConvTranspose_1d", [2, 3, 4], [3, 2, 3], [2], op="ConvTranspose", pads=[1, 0]),
    conv("ConvTranspose_2d_stride_opad", [1, 2, 3, 4], [2, 3, 3, 2], op="ConvTranspose",
         strides=[2, 3], pads=[1, 0, 0, 1], output_padding=[1, 2]),
    conv("ConvTranspose_2d_opad_over_pad", [1, 2, 3, 3], [2, 2, 2, 2], [2], op="ConvTranspose",
         strides=[3, 2], output_padding=[2, 1], pads=[0, 1, 1, 0]),
    conv("ConvTranspose_2d_dilations", [2, 2, 3, 3], [2, 2, 2, 3], op="ConvTranspose",
         strides=[2, 1], dilations=[2, 2], pads=[1, 1, 0, 2]),
    conv("ConvTranspose_2d_group", [1, 4, 3, 4], [4, 3, 3, 3], [6], op="ConvTranspose",
         group=2, strides=[2, 2], pads=[1, 1, 1, 1], output_padding=[1, 0]),
    conv("ConvTranspose_2d_depthwise", [1, 3, 4, 3], [3, 1, 3, 3], op="ConvTranspose", group=3,
         strides=[2, 2]),
    conv("ConvTranspose_output_shape", [1, 2, 3, 3], [2, 2, 3, 3], op="ConvTranspose",
         strides=[2, 2], output_shape=[6, 7]),
    conv("ConvTranspose_same_upper", [1, 2, 3, 4], [2, 1, 3, 2], op="ConvTranspose",
         strides=[2, 2], auto_pad="SAME_UPPER"),
    conv("ConvTranspose_same_lower", [1, 2, 3, 3], [2, 2, 2, 3], op="ConvTranspose",
         strides=[2, 1], auto_pad="SAME_LOWER"),
    conv("ConvTranspose_batch_symbolic", ["N", 4, 3, 3], [4, 3, 3, 3], op="ConvTranspose",
         group=2, strides=[2, 2], output_padding=[1, 0]),
    conv("ConvTranspose_3d", [1, 2, 2, 3, 2], [2, 2, 2, 2, 3], [2], op="ConvTranspose",
         strides=[2, 1, 2], pads=[0, 1, 1, 1, 0, 0], dilations=[1, 2, 1]),
    # MaxPool (opset 17: ScatterElements; opset 13: the one-hot ConvTranspose)
    ("MaxPool_2d_overlap", op_model("MaxPool", [("x", distinct([2, 2, 5, 5], 1))],
                                    {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]})),
    ("MaxPool_2d_stride_ceil", op_model("MaxPool", [("x", distinct([1, 2, 6, 7], 2))],
                                        {"kernel_shape": [2, 3], "strides": [2, 2],
                                         "ceil_mode": 1, "pads": [0, 1, 1, 0]})),
    ("MaxPool_2d_dilations", op_model("MaxPool", [("x", distinct([1, 1, 7, 6], 3))],
                                      {"kernel_shape": [2, 2], "dilations": [2, 3],
                                       "strides": [1, 2]})),
    ("MaxPool_2d_empty_window", op_model("MaxPool", [("x", distinct([1, 1, 4, 5], 4))],
                                         {"kernel_shape": [2, 2], "dilations": [3, 1],
                                          "pads": [2, 0, 2, 0]})),
    ("MaxPool_1d_same_upper", op_model("MaxPool", [("x", distinct([2, 2, 7], 5))],
                                       {"kernel_shape": [3], "strides": [2],
                                        "auto_pad": "SAME_UPPER"})),
    ("MaxPool_3d", op_model("MaxPool", [("x", distinct([1, 2, 4, 4, 3], 6))],
                            {"kernel_shape": [2, 2, 2], "strides": [1, 2, 1],
                             "pads": [1, 0, 0, 0, 1, 1]})),
    ("MaxPool_indices_output", op_model("MaxPool", [("x", distinct([1, 2, 5, 4], 7))],
                                        {"kernel_shape": [3, 2], "strides": [1, 1]},
                                        outputs=["y0", "_idx"])),
    ("MaxPool_storage_order", op_model("MaxPool", [("x", distinct([1, 1, 5, 4], 8))],
                                       {"kernel_shape": [2, 2], "storage_order": 1},
                                       outputs=["y0", "_idx"])),
    ("MaxPool_opset13_overlap", op_model("MaxPool", [("x", distinct([2, 2, 5, 6], 9))],
                                         {"kernel_shape": [3, 2], "pads": [1, 1, 1, 0],
                                          "strides": [1, 2]}, opset=13)),
    ("MaxPool_opset13_ceil_dil", op_model("MaxPool", [("x", distinct([1, 2, 7, 5], 10))],
                                          {"kernel_shape": [2, 2], "strides": [2, 2],
                                           "dilations": [2, 1], "ceil_mode": 1}, opset=13)),
    ("MaxPool_opset13_empty_window", op_model("MaxPool", [("x", distinct([1, 1, 4, 5], 11))],
                                              {"kernel_shape": [2, 2], "dilations": [3, 1],
                                               "pads": [2, 0, 2, 0]}, opset=13)),
    pool("MaxPool_batch_symbolic", "MaxPool", ["N", 2, 5, 5], kernel_shape=[3, 3],
         pads=[1, 1, 1, 1]),
    pool("MaxPool_opset13_batch_symbolic", "MaxPool", ["N", 2, 5, 4], kernel_shape=[2, 2],
         strides=[1, 2], opset=13),
    # AveragePool
    pool("AveragePool_2d_pads_exclude", "AveragePool", [2, 2, 5, 5], kernel_shape=[3, 3],
         pads=[1, 1, 1, 1]),
    pool("AveragePool_2d_pads_include", "AveragePool", [1, 2, 5, 6], kernel_shape=[3, 2],
         pads=[1, 0, 1, 1], count_include_pad=1),
    pool("AveragePool_ceil_exclude", "AveragePool", [1, 2, 6, 7], kernel_shape=[3, 3],
         strides=[2, 2], ceil_mode=1, pads=[1, 0, 0, 1]),
    pool("AveragePool_ceil_include", "AveragePool", [1, 2, 6, 7], kernel_shape=[3, 3],
         strides=[2, 2], ceil_mode=1, pads=[1, 1, 0, 1], count_include_pad=1),
    pool("AveragePool_stride_drop", "AveragePool", [1, 1, 8, 7], kernel_shape=[2, 2],
         strides=[3, 3]),
    pool("AveragePool_same_lower", "AveragePool", [1, 2, 5, 6], kernel_shape=[3, 2],
         strides=[2, 2], auto_pad="SAME_LOWER"),
    pool("AveragePool_1d", "AveragePool", [2, 3, 7], kernel_shape=[3], strides=[2],
         pads=[1, 1]),
    pool("AveragePool_3d_include", "AveragePool", [1, 2, 4, 5, 3], kernel_shape=[2, 3, 2],
         strides=[2, 1, 1], pads=[1, 1, 0, 0, 1, 1], count_include_pad=1),
    pool("AveragePool_dilations", "AveragePool", [1, 2, 7, 6], kernel_shape=[2, 2],
         dilations=[2, 2], pads=[1, 0, 1, 1], opset=19),
    pool("AveragePool_batch_symbolic", "AveragePool", ["N", 2, 5, 5], kernel_shape=[3, 3],
         pads=[1, 1, 1, 1], strides=[2, 1]),
    pool("AveragePool_opset13", "AveragePool", [1, 2, 5, 5], kernel_shape=[2, 2],
         strides=[2, 2], ceil_mode=1, opset=13),
    # LpPool and the global pools
    pool("LpPool_p2_pads", "LpPool", [1, 2, 5, 5], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
    pool("LpPool_p1_stride", "LpPool", [2, 2, 6, 5], kernel_shape=[2, 2], strides=[2, 2], p=1),
    pool("LpPool_p3_1d", "LpPool", [1, 3, 7], kernel_shape=[3], strides=[2], p=3),
    pool("LpPool_ceil_dilations", "LpPool", [1, 2, 7, 6], kernel_shape=[2, 2],
         dilations=[2, 1], strides=[2, 2], ceil_mode=1, p=2, opset=18),
    pool("GlobalAveragePool_2d", "GlobalAveragePool", [2, 3, 4, 5]),
    pool("GlobalAveragePool_1d", "GlobalAveragePool", [2, 3, 5]),
    ("GlobalMaxPool_2d", op_model("GlobalMaxPool", [("x", distinct([1, 2, 3, 4], 12))])),
    ("GlobalMaxPool_3d", op_model("GlobalMaxPool", [("x", distinct([1, 2, 3, 2, 3], 13))])),
    ("GlobalMaxPool_opset13", op_model("GlobalMaxPool", [("x", distinct([2, 2, 2, 3], 14))],
                                       opset=13)),
    pool("GlobalMaxPool_batch_symbolic", "GlobalMaxPool", ["N", 2, 2, 3]),
    pool("GlobalLpPool_p2", "GlobalLpPool", [2, 3, 4, 3]),
    pool("GlobalLpPool_p3", "GlobalLpPool", [1, 2, 5], p=3),
    # Resize
    resize("Resize_nearest_asym_floor", [1, 2, 3, 4], scales=[1, 1, 2, 1.5],
           mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
    resize("Resize_nearest_half_round_floor", [1, 2, 4, 5], sizes=[1, 2, 7, 3],
           mode="nearest"),
    resize("Resize_nearest_half_round_ceil", [2, 1, 4, 3], sizes=[2, 1, 6, 8],
           mode="nearest", nearest_mode="round_prefer_ceil"),
    resize("Resize_nearest_align_ceil", [1, 1, 5, 4], sizes=[1, 1, 3, 7], mode="nearest",
           coordinate_transformation_mode="align_corners", nearest_mode="ceil"),
    resize("Resize_linear_half_pixel", [1, 2, 3, 4], scales=[1, 1, 2, 2], mode="linear"),
    resize("Resize_linear_half_pixel_down", [1, 2, 6, 7], sizes=[1, 2, 4, 3], mode="linear"),
    resize("Resize_linear_pytorch", [2, 1, 4, 3], sizes=[2, 1, 7, 1], mode="linear",
           coordinate_transformation_mode="pytorch_half_pixel"),
    resize("Resize_linear_align_corners", [1, 2, 3, 5], sizes=[1, 2, 5, 4], mode="linear",
           coordinate_transformation_mode="align_corners"),
    resize("Resize_linear_asymmetric", [1, 1, 4, 3], scales=[1, 1, 1.5, 2.5], mode="linear",
           coordinate_transformation_mode="asymmetric"),
    resize("Resize_linear_3d", [1, 2, 2, 3, 4], sizes=[1, 2, 3, 5, 3], mode="linear"),
    resize("Resize_linear_1d", [2, 3, 4], scales=[1, 1, 1.75], mode="linear"),
    resize("Resize_linear_batch_axis", [2, 3, 4], sizes=[3, 3, 4], mode="linear"),
    resize("Resize_batch_symbolic", ["N", 2, 3, 4], scales=[1, 1, 2, 1.5], mode="linear"),
    resize("Resize_cubic", [1, 1, 4, 5], sizes=[1, 1, 6, 3], mode="cubic"),
    resize("Resize_cubic_exclude_outside", [1, 2, 4, 4], scales=[1, 1, 1.5, 2], mode="cubic",
           exclude_outside=1, cubic_coeff_a=-0.5),
    resize("Resize_tf_crop_and_resize", [1, 1, 5, 4], sizes=[1, 1, 4, 5],
           roi=[0, 0, 0.2, -0.1, 1, 1, 0.9, 1.2], mode="linear",
           coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=3.0),
    resize("Resize_antialias_linear", [1, 2, 8, 9], sizes=[3, 4], mode="linear", antialias=1,
           axes=[2, 3], opset=18),
    resize("Resize_antialias_cubic", [1, 1, 7, 6], scales=[0.5, 0.6], mode="cubic",
           antialias=1, axes=[-2, -1], opset=18),
    resize("Resize_keep_aspect", [1, 1, 4, 6], sizes=[6, 12], mode="linear", axes=[2, 3],
           keep_aspect_ratio_policy="not_larger", opset=18),
    resize("Resize_half_pixel_symmetric", [1, 2, 3, 4], scales=[1, 1, 1.7, 0.6],
           mode="linear", coordinate_transformation_mode="half_pixel_symmetric", opset=19),
]


# ---- MaxUnpool: indices as a MaxPool with kernel = stride would give (one place per window,
# distinct) ----
def _unpool_indices(seed, x_shape, k):
    r = rng(seed)
    n, c, sp = x_shape[0], x_shape[1], x_shape[2:]
    out = [d * kk for d, kk in zip(sp, k)]
    idx = np.zeros(x_shape, np.int64)
    for pos in np.ndindex(*x_shape):
        coords = [pos[2 + i] * k[i] + r.integers(0, k[i]) for i in range(len(sp))]
        flat = pos[0] * c + pos[1]
        for i, cc in enumerate(coords):
            flat = flat * out[i] + cc
        idx[pos] = flat
    return idx


CASES += [
    ("MaxUnpool_2d", op_model("MaxUnpool", [("x", [2, 2, 2, 3]),
                                            ("i", _unpool_indices(1, [2, 2, 2, 3], [2, 2]))],
                              {"kernel_shape": [2, 2], "strides": [2, 2]})),
    ("MaxUnpool_1d", op_model("MaxUnpool", [("x", [1, 3, 4]),
                                            ("i", _unpool_indices(2, [1, 3, 4], [3]))],
                              {"kernel_shape": [3], "strides": [3]})),
    ("MaxUnpool_output_shape_larger", op_model(
        "MaxUnpool", [("x", [1, 2, 2, 2]), ("i", _unpool_indices(3, [1, 2, 2, 2], [2, 2])),
                      ("s", i64(1, 2, 5, 6))],
        {"kernel_shape": [2, 2], "strides": [2, 2]})),
    ("MaxUnpool_output_shape_mixed", op_model(
        "MaxUnpool", [("x", [1, 2, 3, 2]), ("i", _unpool_indices(4, [1, 2, 3, 2], [2, 2])),
                      ("s", i64(1, 2, 5, 5))],
        {"kernel_shape": [2, 2], "strides": [2, 2]})),
    ("MaxUnpool_output_shape_pads", op_model(
        "MaxUnpool", [("x", [1, 1, 2, 2]), ("i", _unpool_indices(5, [1, 1, 2, 2], [2, 2])),
                      ("s", i64(1, 1, 4, 4))],
        {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 0, 0]})),
]


# ---- RotaryEmbedding (opset 23): X, and both caches (float inputs) ----
def rope(name, x, cache, pos=None, **attrs):
    ins = [("x", x), ("cos", cache), ("sin", cache)] + ([("p", pos)] if pos is not None else [])
    return (name, op_model("RotaryEmbedding", ins, attrs, opset=23))


_pos = np.array([[0, 3, 1], [4, 4, 2]], np.int64)
CASES += [
    rope("Rotary_4d", [2, 2, 3, 4], [2, 3, 2]),
    rope("Rotary_4d_positions", [2, 3, 3, 6], [5, 3], _pos),
    rope("Rotary_4d_interleaved_partial", [2, 2, 3, 6], [5, 2], _pos, interleaved=1,
         rotary_embedding_dim=4),
    rope("Rotary_3d_heads", [2, 3, 8], [2, 3, 2], num_heads=2),
    rope("Rotary_3d_partial_positions", [2, 3, 12], [5, 1], _pos, num_heads=3,
         rotary_embedding_dim=2),
    rope("Rotary_3d_interleaved", [2, 3, 8], [5, 2], _pos, num_heads=2, interleaved=1),
    rope("Rotary_symbolic", ["B", 2, "S", 4], ["B", "S", 2]),
]

# ---- Col2Im (opset 18), AffineGrid (opset 20) ----
CASES += [
    ("Col2Im_plain", op_model("Col2Im", [("x", [2, 2 * 4, 6]), ("i", i64(3, 4)),
                                         ("b", i64(2, 2))], opset=18)),
    ("Col2Im_strides_pads_dilations", op_model(
        "Col2Im", [("x", [1, 3 * 6, 9]), ("i", i64(5, 6)), ("b", i64(2, 3))],
        {"strides": [2, 1], "pads": [1, 0, 0, 1], "dilations": [1, 2]}, opset=18)),
    ("Col2Im_1d", op_model("Col2Im", [("x", [2, 3, 4]), ("i", i64(7,)), ("b", i64(3,))],
                           {"strides": [2], "pads": [1, 1]}, opset=18)),
    ("AffineGrid_2d", op_model("AffineGrid", [("t", [2, 2, 3]), ("s", i64(2, 3, 4, 5))],
                               opset=20)),
    ("AffineGrid_2d_align", op_model("AffineGrid", [("t", [1, 2, 3]), ("s", i64(1, 1, 3, 1))],
                                     {"align_corners": 1}, opset=20)),
    ("AffineGrid_3d", op_model("AffineGrid", [("t", [2, 3, 4]), ("s", i64(2, 1, 2, 3, 4))],
                               opset=20)),
    ("AffineGrid_3d_align", op_model("AffineGrid", [("t", [1, 3, 4]),
                                                    ("s", i64(1, 2, 3, 2, 2))],
                                     {"align_corners": 1}, opset=20)),
]
