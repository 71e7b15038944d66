"""Gradient cases: shape and indexing ops (graph/grad_shape.c).

Shapes with a string dim ("N") are symbolic: the rules cannot read them when they build the
gradient graph and take their Shape-based forms (gradcheck runs them with N = 2)."""
import numpy as np
from onnx import helper, numpy_helper

from . import op_model


def i64(*v):
    return np.array(v, dtype=np.int64)


def ints(a):
    return np.array(a, dtype=np.int64)


def const_node(name, arr):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(arr, name))


def with_const_input(model, k, arr):
    """The model with its node's input k (an initializer) made a Constant node's output."""
    name = model.graph.node[0].input[k]
    inits = [t for t in model.graph.initializer if t.name != name]
    del model.graph.initializer[:]
    model.graph.initializer.extend(inits)
    model.graph.node.insert(0, const_node(name, arr))
    return model


CASES = [
    # reshaping
    ("Reshape", op_model("Reshape", [("x", [2, 3, 4]), ("s", i64(4, -1))])),
    ("Reshape_copy_zero", op_model("Reshape", [("x", [2, 3, 4]), ("s", i64(0, 12))])),
    ("Reshape_allowzero", op_model("Reshape", [("x", [2, 3, 4]), ("s", i64(3, 2, 4))],
                                   {"allowzero": 1}, opset=14)),
    ("Reshape_dyn", op_model("Reshape", [("x", ["N", 3, 4]), ("s", i64(-1, 6))])),
    ("Flatten", op_model("Flatten", [("x", [2, 3, 4, 1])], {"axis": 2})),
    ("Flatten_axis0", op_model("Flatten", [("x", [2, 3])], {"axis": 0})),
    ("Flatten_neg", op_model("Flatten", [("x", [2, 3, 4])], {"axis": -1})),
    ("Squeeze_axes", op_model("Squeeze", [("x", [2, 1, 3, 1]), ("a", i64(-1))])),
    ("Squeeze_all", op_model("Squeeze", [("x", [1, 3, 1, 2])])),
    ("Squeeze_attr11", op_model("Squeeze", [("x", [2, 1, 3])], {"axes": [1]}, opset=11)),
    ("Unsqueeze", op_model("Unsqueeze", [("x", [2, 3]), ("a", i64(0, -1))])),
    ("Unsqueeze_attr11", op_model("Unsqueeze", [("x", [2, 3])], {"axes": [1, 3]}, opset=11)),
    ("Expand", op_model("Expand", [("x", [3, 1]), ("s", i64(2, 3, 4))])),
    ("Expand_same_rank", op_model("Expand", [("x", [1, 3, 1]), ("s", i64(2, 1, 4))])),
    ("Expand_smaller_shape", op_model("Expand", [("x", [2, 3]), ("s", i64(3))])),
    ("Transpose_perm", op_model("Transpose", [("x", [2, 3, 4])], {"perm": [1, 2, 0]})),
    ("Transpose_default", op_model("Transpose", [("x", [2, 3, 4, 5])])),
    ("Concat", op_model("Concat", [("a", [2, 3]), ("b", [2, 1]), ("c", [2, 4])], {"axis": -1})),
    ("Concat_same_input", op_model("Concat", [("a", [1, 3]), ("b", [2, 3]), ("a", [1, 3])],
                                   {"axis": 0})),
    ("Concat_dyn", op_model("Concat", [("a", ["N", 3]), ("b", [1, 3])], {"axis": 0})),
    ("Split_sizes", op_model("Split", [("x", [2, 7]), ("s", i64(2, 4, 1))], {"axis": 1},
                             n_outputs=3)),
    ("Split_equal", op_model("Split", [("x", [6, 2])], n_outputs=3)),
    ("Split_num_outputs18", op_model("Split", [("x", [3, 7])], {"axis": -1, "num_outputs": 3},
                                     n_outputs=3, opset=18)),
    ("Split_unused", op_model("Split", [("x", [4, 3]), ("s", i64(1, 2, 1))],
                              outputs=["_y0", "y1", "_y2"])),
    ("Split_dyn_unused", op_model("Split", [("x", ["N", 4])], {"axis": 1},
                                  outputs=["y0", "_y1"])),
    # slicing and padding
    ("Slice_step1", op_model("Slice", [("x", [4, 5, 3]), ("s", i64(1, -4)), ("e", i64(3, 100)),
                                       ("a", i64(0, 1))])),
    ("Slice_default_axes", op_model("Slice", [("x", [5, 4]), ("s", i64(-3, 1)),
                                              ("e", i64(-1, 3))])),
    ("Slice_steps", op_model("Slice", [("x", [6, 5]), ("s", i64(1, 4)), ("e", i64(100, -100)),
                                       ("a", i64(0, -1)), ("st", i64(2, -2))])),
    ("Slice_reverse", op_model("Slice", [("x", [3, 4]), ("s", i64(-1)),
                                         ("e", i64(np.iinfo(np.int64).min)), ("a", i64(1)),
                                         ("st", i64(-1))])),
    ("Slice_dyn", op_model("Slice", [("x", ["N", 5]), ("s", i64(0, 1)), ("e", i64(1, 5)),
                                     ("a", i64(0, 1))])),
    ("Slice_const_node", with_const_input(
        op_model("Slice", [("x", [4, 6]), ("s", i64(1)), ("e", i64(5)), ("a", i64(1))]),
        1, i64(2))),
    ("Pad_const_node", with_const_input(
        op_model("Pad", [("x", [2, 3]), ("p", i64(0, 0, 0, 0))], {"mode": "edge"}),
        1, i64(1, 2, 0, 1))),
    ("Pad_constant", op_model("Pad", [("x", [2, 3, 4]), ("p", i64(0, 1, 2, 1, 0, 3))])),
    ("Pad_constant_value", op_model("Pad", [("x", [2, 3]), ("p", i64(1, 0, 2, 2)),
                                            ("v", np.array(0.5))])),
    ("Pad_crop", op_model("Pad", [("x", [4, 5]), ("p", i64(-1, 2, 1, -2)),
                                  ("v", np.array(1.5))])),
    ("Pad_axes18", op_model("Pad", [("x", [2, 3, 4]), ("p", i64(1, 2, 0, 1)), None,
                                    ("a", i64(-1, 1))], opset=18)),
    ("Pad_reflect", op_model("Pad", [("x", [3, 4]), ("p", i64(2, 1, 1, 3))],
                             {"mode": "reflect"})),
    ("Pad_reflect_dyn", op_model("Pad", [("x", ["N", 4]), ("p", i64(0, 2, 0, 3))],
                                 {"mode": "reflect"})),
    ("Pad_edge", op_model("Pad", [("x", [2, 3, 4]), ("p", i64(1, 0, 2, 2, 3, 0))],
                          {"mode": "edge"})),
    ("Pad_wrap19", op_model("Pad", [("x", [3, 4]), ("p", i64(3, 1, 2, 4))], {"mode": "wrap"},
                            opset=19)),
    ("Tile", op_model("Tile", [("x", [2, 1, 3]), ("r", i64(2, 3, 1))])),
    ("Tile_dyn", op_model("Tile", [("x", ["N", 3]), ("r", i64(3, 2))])),
    ("DepthToSpace_DCR", op_model("DepthToSpace", [("x", [2, 8, 2, 3])], {"blocksize": 2})),
    ("DepthToSpace_CRD", op_model("DepthToSpace", [("x", [1, 8, 2, 3])],
                                  {"blocksize": 2, "mode": "CRD"})),
    ("DepthToSpace_CRD_dyn", op_model("DepthToSpace", [("x", ["N", 9, 2, "N"])],
                                      {"blocksize": 3, "mode": "CRD"})),
    ("SpaceToDepth", op_model("SpaceToDepth", [("x", [2, 3, 4, 6])], {"blocksize": 2})),
    # gathering (repeated and negative indices accumulate)
    ("Gather_axis0", op_model("Gather", [("x", [5, 3]), ("i", i64(0, 2, -1, 2, 0))])),
    ("Gather_axis0_opset13", op_model("Gather", [("x", [5, 3]), ("i", i64(0, 2, -1, 2, 0))],
                                      opset=13)),
    ("Gather_axis1_2d", op_model("Gather", [("x", [2, 4, 3]), ("i", ints([[1, -1], [1, 0]]))],
                                 {"axis": 1})),
    ("Gather_axis1_2d_opset13", op_model("Gather", [("x", [2, 4, 3]),
                                                    ("i", ints([[1, -1], [1, 0]]))],
                                         {"axis": 1}, opset=13)),
    ("Gather_scalar", op_model("Gather", [("x", [3, 4]), ("i", np.array(-2, dtype=np.int64))],
                               {"axis": -1})),
    ("Gather_scalar_opset13", op_model("Gather", [("x", [3, 4]),
                                                  ("i", np.array(-2, dtype=np.int64))],
                                       {"axis": -1}, opset=13)),
    ("Gather_dyn", op_model("Gather", [("x", ["N", 4]), ("i", i64(3, 3, 0))], {"axis": 1})),
    ("Gather_dyn_opset13", op_model("Gather", [("x", [4, "N"]), ("i", i64(-1, 3, -1))],
                                    opset=13)),
    ("GatherElements", op_model("GatherElements", [("x", [3, 4]),
                                                   ("i", ints([[0, 3, 3], [-1, 1, 0]]))],
                                {"axis": 1})),
    ("GatherElements_opset13", op_model("GatherElements",
                                        [("x", [3, 4]), ("i", ints([[0, 3, 3], [-1, 1, 0]]))],
                                        {"axis": 1}, opset=13)),
    ("GatherElements_axis0_opset13", op_model("GatherElements",
                                              [("x", [3, 2, 2]),
                                               ("i", ints([[[0, 2], [2, 2]], [[-1, 0], [1, 1]]]))],
                                              opset=13)),
    ("GatherElements_dyn_opset13", op_model("GatherElements",
                                            [("x", ["N", 4]), ("i", ints([[1, 1, 2, -1]]))],
                                            {"axis": 1}, opset=13)),
    ("GatherND", op_model("GatherND", [("x", [3, 4, 2]), ("i", ints([[0, 1], [2, -1], [0, 1]]))])),
    ("GatherND_opset13", op_model("GatherND", [("x", [3, 4, 2]),
                                               ("i", ints([[0, 1], [2, -1], [0, 1]]))],
                                  opset=13)),
    ("GatherND_full", op_model("GatherND", [("x", [3, 2]), ("i", ints([[[1, 1]], [[1, 1]]]))])),
    ("GatherND_batch", op_model("GatherND", [("x", [2, 3, 4]), ("i", ints([[[1], [1]], [[2], [-3]]]))],
                                {"batch_dims": 1})),
    ("GatherND_batch_opset13", op_model("GatherND",
                                        [("x", [2, 3, 4]), ("i", ints([[[1], [1]], [[2], [-3]]]))],
                                        {"batch_dims": 1}, opset=13)),
    # scattering
    ("ScatterElements", op_model("ScatterElements",
                                 [("x", [3, 4]), ("i", ints([[1, 0], [3, -2]])), ("u", [2, 2])],
                                 {"axis": 1})),
    ("ScatterElements_add", op_model("ScatterElements",
                                     [("x", [3, 4]), ("i", ints([[1, 1], [2, 0]])), ("u", [2, 2])],
                                     {"reduction": "add"})),
    ("ScatterND", op_model("ScatterND", [("x", [4, 3]), ("i", ints([[2], [0]])), ("u", [2, 3])])),
    ("ScatterND_add", op_model("ScatterND", [("x", [2, 3]), ("i", ints([[1, 2], [1, 2]])),
                                             ("u", [2])], {"reduction": "add"})),
]

BOOL = np.bool_

# selecting: TopK (with and without its Indices output), Compress, OneHot's values
CASES += [
    ("TopK_last", op_model("TopK", [("x", [3, 5]), ("k", i64(2))], outputs=["y0", "_i"])),
    ("TopK_no_indices", op_model("TopK", [("x", [3, 5]), ("k", i64(3))])),
    ("TopK_axis0_smallest", op_model("TopK", [("x", [4, 2, 3]), ("k", i64(2))],
                                     {"axis": 0, "largest": 0}, outputs=["y0", "_i"])),
    ("TopK_axis1_unsorted_recompute", op_model("TopK", [("x", [2, 5, 3]), ("k", i64(3))],
                                               {"axis": 1, "sorted": 0})),
    ("TopK_axis_neg2_smallest_recompute", op_model("TopK", [("x", [2, 4, 3]), ("k", i64(4))],
                                                   {"axis": -2, "largest": 0})),
    ("TopK_symbolic", op_model("TopK", [("x", ["N", 6]), ("k", i64(2))], opset=13)),
    ("Compress_axis0", op_model("Compress", [("x", [4, 3]),
                                             ("c", np.array([1, 0, 1, 1], BOOL))], {"axis": 0})),
    ("Compress_axis1_short", op_model("Compress", [("x", [2, 5, 2]),
                                                   ("c", np.array([0, 1, 1], BOOL))],
                                      {"axis": 1})),
    ("Compress_axis_neg1", op_model("Compress", [("x", [2, 3, 4]),
                                                 ("c", np.array([1, 0, 0, 1], BOOL))],
                                    {"axis": -1})),
    ("Compress_flat", op_model("Compress", [("x", [3, 4]),
                                            ("c", np.array([1, 0, 1, 1, 0, 0, 1], BOOL))])),
    ("Compress_symbolic", op_model("Compress", [("x", ["N", 4]),
                                                ("c", np.array([0, 1, 0, 1], BOOL))],
                                   {"axis": 1})),
    ("OneHot_last", op_model("OneHot", [("i", ints([[0, 2], [3, 1], [2, 2]])),
                                        ("d", np.array(4, np.int64)), ("v", [2])])),
    ("OneHot_axis0_negative", op_model("OneHot", [("i", ints([1, -1, 0, -3])),
                                                  ("d", np.array(3, np.int64)), ("v", [2])],
                                       {"axis": 0})),
    ("OneHot_axis1", op_model("OneHot", [("i", ints([[0, 2], [1, 1]])),
                                         ("d", np.array([5], np.int64)), ("v", [2])],
                                {"axis": 1})),
]

# triangles, reversals, crops
CASES += [
    ("Trilu_upper", op_model("Trilu", [("x", [3, 4])], opset=14)),
    ("Trilu_lower_k", op_model("Trilu", [("x", [2, 4, 3]), ("k", np.array(-1, np.int64))],
                               {"upper": 0}, opset=14)),
    ("Trilu_upper_k2", op_model("Trilu", [("x", [2, 1, 3, 5]), ("k", np.array(2, np.int64))],
                                {"upper": 1}, opset=14)),
    ("Trilu_lower_symbolic", op_model("Trilu", [("x", ["N", 3, 3])], {"upper": 0}, opset=14)),
    ("ReverseSequence_time0", op_model("ReverseSequence", [("x", [4, 3, 2]),
                                                           ("l", i64(4, 1, 3))],
                                       {"time_axis": 0, "batch_axis": 1})),
    ("ReverseSequence_batch0", op_model("ReverseSequence", [("x", [3, 5]), ("l", i64(2, 5, 0))],
                                        {"time_axis": 1, "batch_axis": 0})),
    ("CenterCropPad_crop_pad", op_model("CenterCropPad", [("x", [5, 2, 3]), ("s", i64(2, 5, 3))],
                                        opset=18)),
    ("CenterCropPad_axes", op_model("CenterCropPad", [("x", [2, 7, 4]), ("s", i64(4, 7))],
                                    {"axes": [-1, 1]}, opset=18)),
    ("CenterCropPad_odd", op_model("CenterCropPad", [("x", [3, 6]), ("s", i64(6, 3))],
                                   opset=18)),
    ("CenterCropPad_symbolic", op_model("CenterCropPad", [("x", ["N", 5]), ("s", i64(2))],
                                        {"axes": [1]}, opset=18)),
]

# TensorScatter (opset 24): a KV-cache write, linear and circular
CASES += [
    ("TensorScatter_linear", op_model("TensorScatter", [("c", [2, 3, 5, 2]), ("u", [2, 3, 2, 2]),
                                                        ("w", i64(1, 3))], opset=24)),
    ("TensorScatter_no_indices", op_model("TensorScatter", [("c", [2, 4, 3]), ("u", [2, 2, 3])],
                                          {"axis": 1}, opset=24)),
    ("TensorScatter_circular", op_model("TensorScatter", [("c", [2, 2, 4, 3]),
                                                          ("u", [2, 2, 3, 3]), ("w", i64(2, 3))],
                                        {"mode": "circular"}, opset=24)),
    ("TensorScatter_axis_last_symbolic", op_model("TensorScatter",
                                                  [("c", [2, "H", 6]), ("u", [2, "H", 2]),
                                                   ("w", i64(4, 0))], {"axis": -1}, opset=24)),
]
