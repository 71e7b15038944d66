"""Gradient cases: normalizations, softmax, losses, Dropout and Einsum (graph/grad_norm.c)."""
import numpy as np
from onnx import TensorProto, helper, numpy_helper

from . import op_model, rng

R = rng(7)


def pos(*shape):
    """A fixed positive float64 initializer value (variances, weights)."""
    return R.uniform(0.5, 2.0, size=shape).astype(np.float64)


def labels(shape, n_classes, ignore=None):
    t = R.integers(0, n_classes, size=shape).astype(np.int64)
    if ignore is not None:
        t.flat[:: 3] = ignore  # every third target ignored
    return t


TRUE = np.array(True)


def bn(name, x, opset=15, attrs=None, outputs=None, var_init=True):
    c = x[1]
    var = ("var", pos(c)) if var_init else ("var", [c])
    return (name, op_model("BatchNormalization",
                           [("x", x), ("scale", [c]), ("b", [c]), ("mean", [c]), var],
                           attrs, opset=opset, outputs=outputs))


def dropout_ratio_constant(name, ratio, seed=None):
    """Dropout with ratio from a Constant node (not an initializer, so not checked)."""
    const = helper.make_node("Constant", [], ["ratio"],
                             value=numpy_helper.from_array(np.array(ratio), "ratio"))
    attrs = {"seed": seed} if seed is not None else {}
    node = helper.make_node("Dropout", ["x", "ratio", "tm"], ["y0", "mask"], **attrs)
    graph = helper.make_graph(
        [const, node], name,
        [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [3, 4])],
        [helper.make_tensor_value_info("y0", TensorProto.DOUBLE, None)],
        [numpy_helper.from_array(TRUE, "tm")])
    return (name, helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)]))


def es(name, eq, *shapes):
    ins = [(chr(ord("a") + k), s) for k, s in enumerate(shapes)]
    return (name, op_model("Einsum", ins, {"equation": eq}))


CASES = [
    # BatchNormalization, inference (X, scale, B, mean and var all differentiated)
    bn("BatchNorm_infer_4d", [2, 3, 4, 5]),
    bn("BatchNorm_infer_2d_opset9", [4, 3], opset=9, attrs={"epsilon": 1e-3}),
    bn("BatchNorm_infer_3d_opset14", [2, 3, 5], opset=14, attrs={"training_mode": 0}),
    # training: batch statistics; running statistics as outputs too
    bn("BatchNorm_train_4d", [3, 2, 2, 3], attrs={"training_mode": 1},
       outputs=["y0", "_rm", "_rv"]),
    bn("BatchNorm_train_2d", [5, 3], opset=14, attrs={"training_mode": 1, "epsilon": 1e-2},
       outputs=["y0", "_rm", "_rv"]),
    bn("BatchNorm_train_running", [2, 3, 4], attrs={"training_mode": 1, "momentum": 0.7},
       outputs=["y0", "rm", "rv"], var_init=False),
    bn("BatchNorm_train_running_only", [2, 3, 4], attrs={"training_mode": 1},
       outputs=["_y", "rm", "rv"], var_init=False),
    # LayerNormalization
    ("LayerNorm_last", op_model("LayerNormalization", [("x", [2, 3, 4]), ("s", [4]), ("b", [4])])),
    ("LayerNorm_axis1", op_model("LayerNormalization", [("x", [2, 3, 4]), ("s", [3, 4]),
                                                        ("b", [4])],
                                 {"axis": 1, "epsilon": 1e-3})),
    ("LayerNorm_scale_bcast", op_model("LayerNormalization", [("x", [2, 3, 4]), ("s", [3, 1]),
                                                              ("b", [1, 4])], {"axis": -2})),
    ("LayerNorm_no_bias", op_model("LayerNormalization", [("x", [3, 5]), ("s", [5])])),
    ("LayerNorm_axis0", op_model("LayerNormalization", [("x", [2, 3]), ("s", [2, 3]),
                                                        ("b", [2, 3])], {"axis": 0})),
    ("LayerNorm_stats_out", op_model("LayerNormalization", [("x", [2, 3, 4]), ("s", [4]),
                                                            ("b", [4])],
                                     {"axis": -1, "stash_type": TensorProto.DOUBLE},
                                     outputs=["y0", "mean", "inv"])),
    ("LayerNorm_mean_only", op_model("LayerNormalization", [("x", [2, 3, 4]), ("s", [3, 4])],
                                     {"axis": 1, "stash_type": TensorProto.DOUBLE},
                                     outputs=["y0", "mean", "_inv"])),
    ("LayerNorm_inv_only", op_model("LayerNormalization", [("x", [3, 4]), ("s", [4])],
                                    {"stash_type": TensorProto.DOUBLE},
                                    outputs=["_y", "_mean", "inv"])),
    # InstanceNormalization
    ("InstanceNorm_4d", op_model("InstanceNormalization", [("x", [2, 3, 4, 2]), ("s", [3]),
                                                           ("b", [3])])),
    ("InstanceNorm_3d", op_model("InstanceNormalization", [("x", [3, 2, 5]), ("s", [2]),
                                                           ("b", [2])], {"epsilon": 1e-2})),
    # GroupNormalization: scale per group (18), per channel (21)
    ("GroupNorm_18", op_model("GroupNormalization", [("x", [2, 6, 3, 2]), ("s", [3]),
                                                     ("b", [3])], {"num_groups": 3}, opset=18)),
    ("GroupNorm_18_one_group", op_model("GroupNormalization", [("x", [2, 4, 3]), ("s", [1]),
                                                               ("b", [1])],
                                        {"num_groups": 1, "epsilon": 1e-3}, opset=18)),
    ("GroupNorm_21", op_model("GroupNormalization", [("x", [2, 6, 4]), ("s", [6]), ("b", [6])],
                              {"num_groups": 2}, opset=21)),
    ("GroupNorm_21_per_channel", op_model("GroupNormalization", [("x", [3, 4, 2, 2]),
                                                                 ("s", [4]), ("b", [4])],
                                          {"num_groups": 4}, opset=21)),
    ("GroupNorm_21_2d", op_model("GroupNormalization", [("x", [3, 6]), ("s", [6]), ("b", [6])],
                                 {"num_groups": 3}, opset=21)),
    # LpNormalization
    ("LpNorm_p2_last", op_model("LpNormalization", [("x", [3, 4])])),
    ("LpNorm_p2_axis0", op_model("LpNormalization", [("x", [3, 2, 4])], {"axis": 0, "p": 2})),
    ("LpNorm_p1_axis1", op_model("LpNormalization", [("x", [2, 5, 3])], {"axis": 1, "p": 1})),
    # Softmax, LogSoftmax
    ("Softmax_last", op_model("Softmax", [("x", [3, 5])])),
    ("Softmax_axis0", op_model("Softmax", [("x", [4, 2, 3])], {"axis": 0})),
    ("Softmax_axis1", op_model("Softmax", [("x", [2, 3, 4])], {"axis": 1})),
    ("Softmax_1d", op_model("Softmax", [("x", [6])])),
    ("LogSoftmax_last", op_model("LogSoftmax", [("x", [3, 5])])),
    ("LogSoftmax_axis1", op_model("LogSoftmax", [("x", [2, 3, 4])], {"axis": 1})),
    ("LogSoftmax_axis_neg3", op_model("LogSoftmax", [("x", [3, 2, 2])], {"axis": -3})),
    # NegativeLogLikelihoodLoss
    ("NLL_mean", op_model("NegativeLogLikelihoodLoss", [("x", [5, 4]), ("t", labels([5], 4))])),
    ("NLL_sum", op_model("NegativeLogLikelihoodLoss", [("x", [5, 4]), ("t", labels([5], 4))],
                         {"reduction": "sum"})),
    ("NLL_none", op_model("NegativeLogLikelihoodLoss", [("x", [5, 4]), ("t", labels([5], 4))],
                          {"reduction": "none"})),
    ("NLL_mean_weight", op_model("NegativeLogLikelihoodLoss",
                                 [("x", [6, 3]), ("t", labels([6], 3)), ("w", pos(3))])),
    ("NLL_sum_weight_input", op_model("NegativeLogLikelihoodLoss",
                                      [("x", [6, 3]), ("t", labels([6], 3)), ("w", [3])],
                                      {"reduction": "sum"})),
    ("NLL_none_weight_ignore", op_model("NegativeLogLikelihoodLoss",
                                        [("x", [6, 4]), ("t", labels([6], 4, ignore=1)),
                                         ("w", pos(4))],
                                        {"reduction": "none", "ignore_index": 1})),
    ("NLL_mean_weight_ignore_nd", op_model("NegativeLogLikelihoodLoss",
                                           [("x", [3, 4, 2, 3]), ("t", labels([3, 2, 3], 4, 2)),
                                            ("w", pos(4))], {"ignore_index": 2})),
    ("NLL_mean_ignore_outside", op_model("NegativeLogLikelihoodLoss",
                                         [("x", [2, 3, 4]), ("t", labels([2, 4], 3, -100))],
                                         {"ignore_index": -100})),
    ("NLL_none_nd", op_model("NegativeLogLikelihoodLoss",
                             [("x", [2, 3, 4]), ("t", labels([2, 4], 3))],
                             {"reduction": "none"})),
    # SoftmaxCrossEntropyLoss
    ("SCE_mean", op_model("SoftmaxCrossEntropyLoss", [("x", [5, 4]), ("t", labels([5], 4))])),
    ("SCE_sum", op_model("SoftmaxCrossEntropyLoss", [("x", [5, 4]), ("t", labels([5], 4))],
                         {"reduction": "sum"})),
    ("SCE_none_nd", op_model("SoftmaxCrossEntropyLoss",
                             [("x", [2, 3, 4, 2]), ("t", labels([2, 4, 2], 3))],
                             {"reduction": "none"})),
    ("SCE_mean_weight_ignore", op_model("SoftmaxCrossEntropyLoss",
                                        [("x", [6, 4]), ("t", labels([6], 4, ignore=0)),
                                         ("w", pos(4))], {"ignore_index": 0})),
    ("SCE_sum_weight_log_prob", op_model("SoftmaxCrossEntropyLoss",
                                         [("x", [4, 3, 2]), ("t", labels([4, 2], 3)),
                                          ("w", pos(3))], {"reduction": "sum"},
                                         outputs=["y0", "log_prob"])),
    ("SCE_mean_weight_log_prob_nd", op_model("SoftmaxCrossEntropyLoss",
                                             [("x", [2, 3, 2, 2]),
                                              ("t", labels([2, 2, 2], 3, ignore=1)),
                                              ("w", pos(3))], {"ignore_index": 1},
                                             outputs=["y0", "log_prob"])),
    ("SCE_log_prob_only", op_model("SoftmaxCrossEntropyLoss",
                                   [("x", [3, 4]), ("t", labels([3], 4))],
                                   outputs=["_loss", "log_prob"])),
    # Dropout: inference is the identity; training uses the mask (deterministic: seeded)
    ("Dropout_inference", op_model("Dropout", [("x", [3, 4])])),
    ("Dropout_inference_ratio", op_model("Dropout", [("x", [3, 4]), ("r", np.array(0.4)),
                                                     ("tm", np.array(False))])),
    ("Dropout_train_mask", op_model("Dropout", [("x", [4, 5]), ("r", np.array(0.3)),
                                                ("tm", TRUE)], outputs=["y0", "_mask"])),
    ("Dropout_train_seed_no_mask", op_model("Dropout", [("x", [4, 5]), ("r", np.array(0.5)),
                                                        ("tm", TRUE)], {"seed": 3})),
    ("Dropout_train_default_ratio", op_model("Dropout", [("x", [3, 6]), None, ("tm", TRUE)],
                                             {"seed": 1}, outputs=["y0", "_mask"])),
    dropout_ratio_constant("Dropout_train_ratio0", 0.0),
    dropout_ratio_constant("Dropout_train_ratio_const", 0.25, seed=5),
    # Einsum
    es("Einsum_matmul", "ij,jk->ik", [3, 4], [4, 2]),
    es("Einsum_batched", "bij,bjk->bik", [2, 3, 4], [2, 4, 5]),
    es("Einsum_transpose", "ij->ji", [3, 4]),
    es("Einsum_sum_all", "ij->", [3, 4]),
    es("Einsum_row_sum", "ij->i", [3, 4]),
    es("Einsum_dot", "i,i->", [5], [5]),
    es("Einsum_outer", "i,j->ij", [3], [4]),
    es("Einsum_implicit_matmul", "ij,jk", [3, 4], [4, 2]),
    es("Einsum_implicit_transpose", "ba", [3, 4]),
    es("Einsum_three", "ij,jk,kl->il", [2, 3], [3, 4], [4, 2]),
    es("Einsum_hadamard", "ij,ij->ij", [3, 4], [3, 4]),
    es("Einsum_bilinear", "bn,anm,bm->ba", [2, 3], [4, 3, 5], [2, 5]),
    es("Einsum_contract_lonely", "ijk,jl->il", [2, 3, 4], [3, 5]),
    es("Einsum_ellipsis_bcast", "...ij,...jk->...ik", [2, 1, 3, 4], [5, 4, 2]),
    es("Einsum_ellipsis_middle", "i...j,j->i...", [3, 2, 4, 5], [5]),
    es("Einsum_ellipsis_one", "...ij->...ji", [2, 3, 4]),
    es("Einsum_ellipsis_summed", "...ij,jk->ik", [2, 3, 4], [4, 5]),
    es("Einsum_ellipsis_other", "...ij,jk->...ik", [2, 3, 4], [4, 5]),
    es("Einsum_diagonal", "ii->i", [4, 4]),
    es("Einsum_trace", "ii", [3, 3]),
    es("Einsum_batch_diag_mul", "bii,bi->bi", [2, 3, 3], [2, 3]),
    es("Einsum_two_diagonals", "iij,iji->j", [3, 3, 2], [3, 2, 3]),
    es("Einsum_diag_ellipsis", "...jj->...j", [2, 3, 3]),
    es("Einsum_triple_diag", "iii->i", [3, 3, 3]),
]

# Symbolic dims: the rules' Shape-based forms (counts, class ids, group views, broadcasts)
CASES += [
    bn("BatchNorm_train_running_symbolic", ["N", 3, "S"], attrs={"training_mode": 1},
       outputs=["y0", "rm", "rv"], var_init=False),
    ("LayerNorm_stats_symbolic", op_model("LayerNormalization", [("x", ["N", "T", 4]),
                                                                 ("s", [4]), ("b", [4])],
                                          {"axis": 1, "stash_type": TensorProto.DOUBLE},
                                          outputs=["y0", "mean", "inv"])),
    ("GroupNorm_18_symbolic", op_model("GroupNormalization", [("x", ["N", 4, "S"]), ("s", [2]),
                                                              ("b", [2])], {"num_groups": 2},
                                       opset=18)),
    ("GroupNorm_21_symbolic", op_model("GroupNormalization", [("x", ["N", 4, "S"]), ("s", [4]),
                                                              ("b", [4])], {"num_groups": 2},
                                       opset=21)),
    ("SCE_mean_weight_symbolic", op_model("SoftmaxCrossEntropyLoss",
                                          [("x", [3, "C"]), ("t", np.array([1, 0, 1], np.int64)),
                                           ("w", ["C"])], {"ignore_index": 1})),
    ("NLL_none_symbolic", op_model("NegativeLogLikelihoodLoss",
                                   [("x", [2, "C", 2]), ("t", np.array([[0, 1], [1, 1]]))],
                                   {"reduction": "none"})),
    es("Einsum_ellipsis_bcast_symbolic", "...ij,...jk->...ik", ["B", 1, 3, 4], [2, 4, 2]),
    es("Einsum_ellipsis_middle_symbolic", "i...j,...jk->i...k", [3, "A", 1, 4], ["A", 5, 4, 2]),
    es("Einsum_lonely_symbolic", "ij,j->", ["N", 4], [4]),
    es("Einsum_diag_symbolic", "ii,ij->j", ["N", "N"], ["N", 3]),
]

# LRN: large alpha so that the window term weighs; odd and even sizes (asymmetric windows),
# windows wider than C, ranks 3 to 5
CASES += [
    ("LRN_default", op_model("LRN", [("x", [2, 5, 3, 2])], {"size": 3})),
    ("LRN_size3", op_model("LRN", [("x", [2, 5, 3, 2])],
                           {"size": 3, "alpha": 2.0, "beta": 0.75, "bias": 1.0})),
    ("LRN_size2", op_model("LRN", [("x", [2, 4, 3])], {"size": 2, "alpha": 1.5, "beta": 0.6})),
    ("LRN_size4_bias", op_model("LRN", [("x", [1, 6, 2, 3])],
                                {"size": 4, "alpha": 3.0, "beta": 1.2, "bias": 2.0})),
    ("LRN_size7_wide", op_model("LRN", [("x", [2, 3, 2, 2, 2])],
                                {"size": 7, "alpha": 1.0, "beta": 0.5, "bias": 0.5})),
    ("LRN_size1", op_model("LRN", [("x", [2, 3, 4])], {"size": 1, "alpha": 0.8})),
    ("LRN_symbolic", op_model("LRN", [("x", ["N", 4, "H", 2])], {"size": 5, "alpha": 2.5})),
]

# MeanVarianceNormalization: default axes {0, 2, 3}, others
CASES += [
    ("MVN_default", op_model("MeanVarianceNormalization", [("x", [2, 3, 2, 3])])),
    ("MVN_axes_spatial", op_model("MeanVarianceNormalization", [("x", [2, 3, 4, 2])],
                                  {"axes": [2, 3]})),
    ("MVN_axes_last", op_model("MeanVarianceNormalization", [("x", [3, 5])], {"axes": [-1]})),
    ("MVN_axes_01", op_model("MeanVarianceNormalization", [("x", [2, 3, 4])], {"axes": [0, 1]})),
    ("MVN_opset9", op_model("MeanVarianceNormalization", [("x", [3, 2, 2, 2])], opset=9)),
    ("MVN_symbolic", op_model("MeanVarianceNormalization", [("x", ["N", 3, "S"])],
                              {"axes": [0, 2]})),
]

# RMSNormalization (opset 23)
CASES += [
    ("RMSNorm_last", op_model("RMSNormalization", [("x", [2, 3, 4]), ("s", [4])], opset=23)),
    ("RMSNorm_axis1", op_model("RMSNormalization", [("x", [2, 3, 4]), ("s", [3, 4])],
                               {"axis": 1, "epsilon": 1e-3}, opset=23)),
    ("RMSNorm_scale_bcast", op_model("RMSNormalization", [("x", [2, 3, 4]), ("s", [3, 1])],
                                     {"axis": -2}, opset=23)),
    ("RMSNorm_stash_double", op_model("RMSNormalization", [("x", [3, 5]), ("s", [5])],
                                      {"stash_type": TensorProto.DOUBLE}, opset=23)),
    ("RMSNorm_symbolic", op_model("RMSNormalization", [("x", ["N", "T", 4]), ("s", [4])],
                                  opset=23)),
]

# Hardmax: no gradient through it; y * x carries one (hardmax(x)) so the check is not vacuous
CASES += [
    ("Hardmax_times_x", op_model("Hardmax", [("x", [3, 4])], {"axis": 1},
                                 extra_nodes=[helper.make_node("Mul", ["y0", "x"], ["z"])])),
]
