#!/usr/bin/python3
"""Backend-layout cases for TreeEnsembleRegressor and TreeEnsembleClassifier (ai.onnx.ml 1
and 3), the operators scikit-learn, XGBoost and LightGBM models reach ONNX through, and
TreeEnsemble (ai.onnx.ml 5), with the operators' semantics written here in plain Python as
the oracle.

    tests/tree_cases.py OUTDIR --onnxexec BIN [--ort-dir DIR]

The forests are random (depths to 6, and to 10 where rows step through deep trees side by
side; all six comparison modes, NaN features with and without
nodes_missing_value_tracks_true) and the cases cover: each aggregate function, several
targets and several weights per leaf, base values (one for all columns or one per column),
every post transform, float/double/int64/int32 inputs, a 1-D input, the *_as_tensor
attributes, ai.onnx.ml opset 1, nodes listed out of order with interleaved trees and sparse
node ids, multi-class and binary classifiers (one class id: XGBoost/LightGBM/gradient
boosting; both ids: random forests), int64 and string labels, and enough rows to be split
over the threads; and four of the forests in TreeEnsemble's layout (set-membership branches,
SUM/AVERAGE/MIN/MAX, a MIN target no leaf feeds, float/double/float16 inputs and outputs,
deep trees). Each case runs optimized, with --no-optimize and through --roundtrip.
Malformed ensembles must fail naming what is wrong (when the model loads; a feature past the
input's width when it runs).

Semantics (those of ONNX's reference implementation; see kernels/cpu/ml.c): a NaN feature
goes the true way where its node's missing flag is set, else by the comparison; the
regressor aggregates each target (AVERAGE: the sum over the number of trees; a MIN or MAX
target no leaf feeds is 0) and adds base_values; the classifier sums class weights onto
base_values, and a binary model's one class score s becomes [1 - s, s] (post transform NONE
or PROBIT) or [-s, s]; then the post transform, and the label of the highest score.

With --ort-dir (onnxruntime-node from npm, as tools/bench_compare.py installs it), the cases
marked ORT-comparable also run in ONNX Runtime and must agree with the oracle: those where
ONNX Runtime follows the reference (it departs from it for single-target post transforms
other than PROBIT, MIN/MAX targets no leaf feeds, and the labels of binary classifiers
without a transform or with positive weights only) and that ONNX Runtime runs (its
TreeEnsembleRegressor takes no integer inputs, and it needs node ids below the node count and
each tree's nodes together).
"""
import argparse
import math
import os
import shutil
import subprocess
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ort_oracle  # noqa: E402
from case_dir import expect_error, write_case  # noqa: E402

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("outdir")
ap.add_argument("--onnxexec", required=True)
ap.add_argument("--ort-dir", help="compare the ORT-comparable cases with ONNX Runtime too")
args = ap.parse_args()
out = args.outdir
shutil.rmtree(out, ignore_errors=True)
os.makedirs(out)
rng = np.random.default_rng(11)

MODES = ["BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ"]
ONNX_TYPE = {np.float32: TensorProto.FLOAT, np.float64: TensorProto.DOUBLE,
             np.int64: TensorProto.INT64, np.int32: TensorProto.INT32}


def forest(n_trees, depth, F, n_cols, per_leaf=1, cols=None, positive=False, splits=None,
           modes=None):
    """Random trees as the parallel lists: nodes in preorder, node ids 0, 1, ... per tree.
    Each leaf gets per_leaf weights for distinct columns (or for every column in `cols`)."""
    nodes = {k: [] for k in ("tree", "node", "feat", "mode", "split", "yes", "no", "miss")}
    ws = {k: [] for k in ("tree", "node", "col", "w")}
    for t in range(n_trees):
        nid = [0]

        def grow(d):
            me = nid[0]
            nid[0] += 1
            i = len(nodes["tree"])
            for v in nodes.values():
                v.append(0)
            nodes["tree"][i], nodes["node"][i] = t, me
            if d == depth or (d > 1 and rng.random() < 0.15):
                nodes["mode"][i], nodes["split"][i] = "LEAF", 0.0
                chosen = cols if cols is not None else rng.choice(n_cols, per_leaf, replace=False)
                for c in chosen:
                    w = rng.random() if positive else rng.normal()
                    ws["tree"].append(t), ws["node"].append(me), ws["col"].append(int(c))
                    ws["w"].append(float(np.float32(w)))
                return me
            m = str(rng.choice(modes or MODES, p=None if modes else [.4, .2, .1, .1, .1, .1]))
            nodes["mode"][i] = m
            nodes["feat"][i] = int(rng.integers(F))
            # EQ/NEQ split on values the inputs take (integers), the others anywhere
            sp = (float(rng.integers(-2, 3)) if m in ("BRANCH_EQ", "BRANCH_NEQ") or splits == "int"
                  else float(np.float32(rng.normal())))
            nodes["split"][i] = sp
            nodes["miss"][i] = int(rng.random() < 0.4)
            nodes["yes"][i] = grow(d + 1)
            nodes["no"][i] = grow(d + 1)
            return me

        grow(0)
    return nodes, ws


def inputs(N, F, dtype, nan=True):
    x = rng.normal(size=(N, F))
    x = np.where(rng.random((N, F)) < 0.25, np.round(x * 2), x)  # values EQ splits hit
    if dtype in (np.int64, np.int32):
        return np.round(x * 2).astype(dtype)
    x = x.astype(np.float32).astype(dtype)
    if nan:
        x[rng.random((N, F)) < 0.08] = np.nan
    return x


def leaf(nodes, index, root, x):
    """The index of the leaf row x reaches from node `root` (index: (tree, node) -> i)."""
    i = root
    t = nodes["tree"][root]
    while nodes["mode"][i] != "LEAF":
        v, sp, m = float(x[nodes["feat"][i]]), nodes["split"][i], nodes["mode"][i]
        if math.isnan(v) and nodes["miss"][i]:
            go = True
        elif m == "BRANCH_MEMBER":
            go = v in nodes["sets"][i]
        else:
            go = {"BRANCH_LEQ": v <= sp, "BRANCH_LT": v < sp, "BRANCH_GTE": v >= sp,
                  "BRANCH_GT": v > sp, "BRANCH_EQ": v == sp, "BRANCH_NEQ": v != sp}[m]
        i = index[(t, nodes["yes"][i] if go else nodes["no"][i])]
    return i


def post(kind, s):
    s = np.array(s, dtype=np.float64)
    if kind == "LOGISTIC":
        return 1 / (1 + np.exp(-s))
    if kind == "SOFTMAX":
        e = np.exp(s - s.max())
        return e / e.sum()
    if kind == "SOFTMAX_ZERO":
        nz = s != 0
        r = np.zeros_like(s)
        if nz.any():
            e = np.exp(s[nz] - s[nz].max())
            r[nz] = e / e.sum()
        return r
    if kind == "PROBIT":
        from statistics import NormalDist
        return np.array([NormalDist().inv_cdf(v) if 0 < v < 1 else
                         (-math.inf if v <= 0 else math.inf) for v in s])
    return s


def oracle(nodes, ws, X, n_cols, agg="SUM", base=None, post_kind="NONE", classifier=False,
           unfed=0.0):
    """unfed: a MIN or MAX target no reached leaf feeds (TreeEnsembleRegressor: 0)."""
    trees = sorted(set(nodes["tree"]))
    X2 = X.reshape(1, -1) if X.ndim == 1 else X
    wmap = {}
    for k in range(len(ws["tree"])):
        wmap.setdefault((ws["tree"][k], ws["node"][k]), []).append((ws["col"][k], ws["w"][k]))
    one_class = sorted(set(ws["col"]))
    binary = classifier and n_cols == 2 and len(one_class) == 1
    rows, labels = [], []
    index = {(nodes["tree"][i], nodes["node"][i]): i for i in range(len(nodes["tree"]))}
    # a tree's root: its first node listed
    roots = {t: nodes["tree"].index(t) for t in trees}
    for x in X2:
        acc, hit = [0.0] * n_cols, [False] * n_cols
        for t in trees:
            i = leaf(nodes, index, roots[t], x)
            for c, w in wmap.get((t, nodes["node"][i]), []):
                if agg == "MIN":
                    acc[c] = w if not hit[c] else min(acc[c], w)
                elif agg == "MAX":
                    acc[c] = w if not hit[c] else max(acc[c], w)
                else:
                    acc[c] += w
                hit[c] = True
        for c in range(n_cols):
            if agg == "AVERAGE":
                acc[c] /= len(trees)
            if agg in ("MIN", "MAX") and not hit[c]:
                acc[c] = unfed
            if base is not None:
                acc[c] += base[0] if len(base) == 1 else base[c]
        if binary:
            p = acc[one_class[0]]
            acc = [1 - p if post_kind in ("NONE", "PROBIT") else -p, p]
        s = post(post_kind, acc)
        rows.append(s)
        labels.append(int(np.argmax(s)))
    return np.array(rows, dtype=np.float32), labels


def make_model(op, nodes, ws, F, xtype, attrs, ml_opset=3, as_tensor=False, rank=2):
    pre = "class" if op == "TreeEnsembleClassifier" else "target"
    kw = dict(nodes_treeids=nodes["tree"], nodes_nodeids=nodes["node"],
              nodes_featureids=nodes["feat"], nodes_modes=nodes["mode"],
              nodes_truenodeids=nodes["yes"], nodes_falsenodeids=nodes["no"],
              nodes_missing_value_tracks_true=nodes["miss"])
    kw[pre + "_treeids"], kw[pre + "_nodeids"], kw[pre + "_ids"] = ws["tree"], ws["node"], ws["col"]
    dbl = {}
    if as_tensor:
        dbl["nodes_values_as_tensor"] = np.array(nodes["split"], np.float64)
        dbl[pre + "_weights_as_tensor"] = np.array(ws["w"], np.float64)
        if "base_values" in attrs:
            dbl["base_values_as_tensor"] = np.array(attrs.pop("base_values"), np.float64)
    else:
        kw["nodes_values"], kw[pre + "_weights"] = nodes["split"], ws["w"]
    kw.update(attrs)
    if op == "TreeEnsembleClassifier":
        lt = TensorProto.STRING if "classlabels_strings" in attrs else TensorProto.INT64
        outs = [helper.make_tensor_value_info("label", lt, None),
                helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, None)]
    else:
        outs = [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)]
    node = helper.make_node(op, ["X"], [o.name for o in outs], domain="ai.onnx.ml", **kw)
    for k, v in dbl.items():
        node.attribute.append(helper.make_attribute(k, numpy_helper.from_array(v)))
    shape = [None, F] if rank == 2 else [F]
    g = helper.make_graph([node], op, [helper.make_tensor_value_info("X", ONNX_TYPE[xtype], shape)],
                          outs)
    return helper.make_model(g, ir_version=8, opset_imports=[
        helper.make_opsetid("", 13), helper.make_opsetid("ai.onnx.ml", ml_opset)])


ort_cases = []


def case(name, op, nodes, ws, n_cols, X, attrs, ort=False, **model_kw):
    attrs = dict(attrs)
    clf = op == "TreeEnsembleClassifier"
    base = attrs.get("base_values")
    Z, lab = oracle(nodes, ws, X, n_cols, agg=attrs.get("aggregate_function", "SUM"), base=base,
                    post_kind=attrs.get("post_transform", "NONE"), classifier=clf)
    m = make_model(op, nodes, ws, X.shape[-1], X.dtype.type, attrs,
                   rank=X.ndim, **model_kw)
    if clf:
        labels = attrs.get("classlabels_int64s") or attrs.get("classlabels_strings")
        lv = np.array([labels[k] for k in lab], dtype=object if isinstance(labels[0], str)
                      else np.int64)
        outputs = [("label", lv), ("probabilities", Z)]
    else:
        outputs = [("Y", Z)]
    write_case(out, name, m, [("X", X)], outputs)
    if ort:
        ort_cases.append(name)


F = 7
X = inputs(300, F, np.float32)
n, w = forest(40, 6, F, 1)
case("reg_sum_1", "TreeEnsembleRegressor", n, w, 1, X, {"n_targets": 1}, ort=True)
case("reg_sum_1_opset1", "TreeEnsembleRegressor", n, w, 1, X[:5], {"n_targets": 1}, ml_opset=1)
n, w = forest(12, 5, F, 3, per_leaf=2)
case("reg_avg_3_base", "TreeEnsembleRegressor", n, w, 3, X,
     {"n_targets": 3, "aggregate_function": "AVERAGE", "base_values": [0.5, -1.0, 2.0]}, ort=True)
case("reg_sum_3_logistic", "TreeEnsembleRegressor", n, w, 3, X,
     {"n_targets": 3, "post_transform": "LOGISTIC"}, ort=True)
case("reg_sum_3_softmax", "TreeEnsembleRegressor", n, w, 3, X,
     {"n_targets": 3, "post_transform": "SOFTMAX"}, ort=True)
# one weight per leaf for one of 3 targets: zeros that SOFTMAX_ZERO leaves at zero
n, w = forest(2, 3, F, 3, per_leaf=1)
case("reg_sum_3_softmax_zero", "TreeEnsembleRegressor", n, w, 3, X,
     {"n_targets": 3, "post_transform": "SOFTMAX_ZERO"})
case("reg_min_3", "TreeEnsembleRegressor", n, w, 3, X,
     {"n_targets": 3, "aggregate_function": "MIN", "base_values": [0.25]})
case("reg_max_3", "TreeEnsembleRegressor", n, w, 3, X,
     {"n_targets": 3, "aggregate_function": "MAX"})
n, w = forest(9, 4, F, 2, per_leaf=2, positive=True)
case("reg_avg_probit", "TreeEnsembleRegressor", n, w, 2, X,
     {"n_targets": 2, "aggregate_function": "AVERAGE", "post_transform": "PROBIT"})
case("reg_logistic_1", "TreeEnsembleRegressor", *forest(6, 4, F, 1), 1, X,
     {"n_targets": 1, "post_transform": "LOGISTIC"})
n, w = forest(10, 5, F, 2, per_leaf=2)
Xd = inputs(64, F, np.float64)
case("reg_double_as_tensor", "TreeEnsembleRegressor", n, w, 2, Xd,
     {"n_targets": 2, "base_values": [1.5, -0.5]}, as_tensor=True, ort=True)
n, w = forest(10, 5, F, 2, per_leaf=2, splits="int")
case("reg_int64", "TreeEnsembleRegressor", n, w, 2, inputs(50, F, np.int64), {"n_targets": 2})
case("reg_int32", "TreeEnsembleRegressor", n, w, 2, inputs(50, F, np.int32), {"n_targets": 2})
case("reg_1d_input", "TreeEnsembleRegressor", n, w, 2, X[3], {"n_targets": 2})
# deep trees (more than 64 nodes a tree on average): rows step through them side by side
n, w = forest(5, 10, F, 2, per_leaf=2)
assert len(n["tree"]) > 64 * 5
case("reg_deep_trees", "TreeEnsembleRegressor", n, w, 2, X, {"n_targets": 2}, ort=True)
case("reg_deep_trees_max", "TreeEnsembleRegressor", n, w, 2, X,
     {"n_targets": 2, "aggregate_function": "MAX"})
# the lists shuffled (each tree's root kept first among its nodes), the trees interleaved, node
# ids sparse and in no order: the children and weights are found by their (tree, node) pairs
n, w = forest(8, 5, F, 2, per_leaf=2)
# ids: a permutation within each tree, so that a root's id is not the smallest of its tree
count = {t: n["tree"].count(t) for t in set(n["tree"])}
shuf = {t: rng.permutation(c) for t, c in count.items()}
ids = {(t, k): 3 * int(shuf[t][k]) + 1000 * t + 5 for t, k in zip(n["tree"], n["node"])}
assert any(ids[(t, 0)] != min(v for (u, _), v in ids.items() if u == t) for t in count)
for i in range(len(n["tree"])):
    t = n["tree"][i]
    if n["mode"][i] != "LEAF":
        n["yes"][i], n["no"][i] = ids[(t, n["yes"][i])], ids[(t, n["no"][i])]
    n["node"][i] = ids[(t, n["node"][i])]
    n["tree"][i] = 7 * t + 3
w["node"] = [ids[(t, k)] for t, k in zip(w["tree"], w["node"])]
w["tree"] = [7 * t + 3 for t in w["tree"]]
roots = [min(i for i in range(len(n["tree"])) if n["tree"][i] == t) for t in sorted(set(n["tree"]))]
rest = [i for i in range(len(n["tree"])) if i not in roots]
perm = roots + list(rng.permutation(rest))
n = {k: [v[i] for i in perm] for k, v in n.items()}
wp = rng.permutation(len(w["tree"]))
w = {k: [v[i] for i in wp] for k, v in w.items()}
case("reg_shuffled_sparse_ids", "TreeEnsembleRegressor", n, w, 2, X, {"n_targets": 2})

# classifiers
n, w = forest(20, 6, F, 4, per_leaf=2)
case("clf_4_softmax", "TreeEnsembleClassifier", n, w, 4, X,
     {"classlabels_int64s": [3, 1, 4, 15], "post_transform": "SOFTMAX"}, ort=True)
case("clf_4_none_base", "TreeEnsembleClassifier", n, w, 4, X,
     {"classlabels_int64s": [0, 1, 2, 3], "base_values": [0.1, 0.2, -0.3, 0.0]}, ort=True)
case("clf_4_strings_logistic", "TreeEnsembleClassifier", n, w, 4, X,
     {"classlabels_strings": ["cat", "dog", "eel", "fox"], "post_transform": "LOGISTIC"}, ort=True)
case("clf_4_double_as_tensor", "TreeEnsembleClassifier", n, w, 4, Xd,
     {"classlabels_int64s": [0, 1, 2, 3], "base_values": [0.5, 0.0, 0.0, -0.5]}, as_tensor=True,
     ort=True)
# XGBoost/LightGBM binary: every weight for class 0, mixed signs, a base margin, LOGISTIC
n, w = forest(30, 5, F, 1)
case("clf_binary_logistic_base", "TreeEnsembleClassifier", n, w, 2, X,
     {"classlabels_int64s": [0, 1], "post_transform": "LOGISTIC", "base_values": [0.3]}, ort=True)
case("clf_binary_logistic_strings", "TreeEnsembleClassifier", n, w, 2, X,
     {"classlabels_strings": ["no", "yes"], "post_transform": "LOGISTIC"}, ort=True)
case("clf_binary_none", "TreeEnsembleClassifier", n, w, 2, X, {"classlabels_int64s": [5, 9]})
case("clf_binary_softmax", "TreeEnsembleClassifier", n, w, 2, X,
     {"classlabels_int64s": [5, 9], "post_transform": "SOFTMAX"})
# the one class named 1, positive averaged weights in (0, 1): PROBIT of p and 1 - p
n, w = forest(4, 4, F, 2, cols=[1], positive=True)
w["w"] = [float(np.float32(v / 4)) for v in w["w"]]
case("clf_binary_class1_probit", "TreeEnsembleClassifier", n, w, 2, X,
     {"classlabels_int64s": [0, 1], "post_transform": "PROBIT"})
# a random forest: both classes' probabilities at each leaf, averaged by their weights
n, w = forest(10, 6, F, 2, cols=[0, 1], positive=True)
for k in range(0, len(w["w"]), 2):
    p = w["w"][k] / (w["w"][k] + w["w"][k + 1]) / 10
    w["w"][k], w["w"][k + 1] = float(np.float32(p)), float(np.float32(0.1 - p))
case("clf_forest_probabilities", "TreeEnsembleClassifier", n, w, 2, X,
     {"classlabels_int64s": [0, 1]})


# TreeEnsemble (ai.onnx.ml 5): the same random forests (one weight per leaf) in its layout --
# branches and leaves in two index spaces, modes as integers, splits and weights as tensors
# of the input's type -- with set-membership branches (BRANCH_EQ nodes turned into sets of
# values the inputs take); a MIN or MAX target no reached leaf feeds is the input type's
# largest magnitude (float16: infinity); the output has the input's type
V5_MODES = {m: k for k, m in enumerate(MODES + ["BRANCH_MEMBER"])}
AGGS = {"AVERAGE": 0, "SUM": 1, "MIN": 2, "MAX": 3}
POSTS = {"NONE": 0, "SOFTMAX": 1, "LOGISTIC": 2, "SOFTMAX_ZERO": 3, "PROBIT": 4}
V5_TYPE = {np.float32: TensorProto.FLOAT, np.float64: TensorProto.DOUBLE,
           np.float16: TensorProto.FLOAT16}


def v5_case(name, nodes, ws, n_cols, X, agg="SUM", post_kind="NONE"):
    dt = X.dtype.type
    nodes = {k: list(v) for k, v in nodes.items()}
    nodes["split"] = [float(dt(v)) for v in nodes["split"]]
    nodes["sets"] = {}
    for i, m in enumerate(nodes["mode"]):
        if m == "BRANCH_EQ" and i % 2:
            nodes["mode"][i] = "BRANCH_MEMBER"
            nodes["sets"][i] = sorted({nodes["split"][i], float(rng.integers(-2, 3)), 7.5})
    ws = dict(ws, w=[float(dt(v)) for v in ws["w"]])
    big = float(np.finfo(np.float64 if dt == np.float64 else np.float32).max)
    Z, _ = oracle(nodes, ws, X.astype(np.float64), n_cols, agg=agg, post_kind=post_kind,
                  unfed=big if agg == "MIN" else -big)
    key = lambda i: (nodes["tree"][i], nodes["node"][i])  # noqa: E731
    branch = [i for i in range(len(nodes["tree"])) if nodes["mode"][i] != "LEAF"]
    leaves = [i for i in range(len(nodes["tree"])) if nodes["mode"][i] == "LEAF"]
    bix = {key(i): k for k, i in enumerate(branch)}
    lix = {key(i): k for k, i in enumerate(leaves)}
    wmap = {(t, nd): (c, v) for t, nd, c, v in zip(ws["tree"], ws["node"], ws["col"], ws["w"])}
    assert len(wmap) == len(leaves)
    kids = {}
    for side in ("yes", "no"):
        ids = [(nodes["tree"][i], nodes[side][i]) for i in branch]
        kids[side] = [lix[k] if k in lix else bix[k] for k in ids]
        kids[side + "_leaf"] = [int(k in lix) for k in ids]
    members = [v for i in branch if i in nodes["sets"] for v in nodes["sets"][i] + [math.nan]]
    roots = [bix[key(min(i for i in range(len(nodes["tree"])) if nodes["tree"][i] == t))]
             for t in sorted(set(nodes["tree"]))]
    attrs = dict(nodes_featureids=[nodes["feat"][i] for i in branch],
                 nodes_splits=numpy_helper.from_array(np.array(
                     [nodes["split"][i] for i in branch], dt)),
                 nodes_modes=numpy_helper.from_array(np.array(
                     [V5_MODES[nodes["mode"][i]] for i in branch], np.uint8)),
                 nodes_truenodeids=kids["yes"], nodes_trueleafs=kids["yes_leaf"],
                 nodes_falsenodeids=kids["no"], nodes_falseleafs=kids["no_leaf"],
                 nodes_missing_value_tracks_true=[nodes["miss"][i] for i in branch],
                 leaf_targetids=[wmap[key(i)][0] for i in leaves],
                 leaf_weights=numpy_helper.from_array(np.array(
                     [wmap[key(i)][1] for i in leaves], dt)),
                 tree_roots=roots, n_targets=n_cols, aggregate_function=AGGS[agg],
                 post_transform=POSTS[post_kind])
    if members:
        attrs["membership_values"] = numpy_helper.from_array(np.array(members, dt))
    node = helper.make_node("TreeEnsemble", ["X"], ["Y"], domain="ai.onnx.ml", **attrs)
    g = helper.make_graph([node], name, [helper.make_tensor_value_info(
        "X", V5_TYPE[dt], [None, X.shape[1]])], [helper.make_tensor_value_info(
            "Y", V5_TYPE[dt], None)])
    m = helper.make_model(g, ir_version=10, opset_imports=[
        helper.make_opsetid("", 21), helper.make_opsetid("ai.onnx.ml", 5)])
    with np.errstate(over="ignore"):  # float16: the float32 maximum becomes infinity
        Z = Z.astype(dt)
    write_case(out, name, m, [("X", X)], [("Y", Z)])


n, w = forest(30, 6, F, 3, modes=MODES + ["BRANCH_EQ"] * 3)
v5_case("v5_sum_3", n, w, 3, X)
v5_case("v5_avg_double_logistic", n, w, 3, inputs(100, F, np.float64), agg="AVERAGE",
        post_kind="LOGISTIC")
v5_case("v5_min_float16", n, w, 4, inputs(80, F, np.float16), agg="MIN")  # target 3 unfed
n, w = forest(5, 10, F, 2, modes=MODES + ["BRANCH_EQ"] * 3)
assert len(n["tree"]) > 64 * 5  # deep: rows side by side
v5_case("v5_deep_max_softmax", n, w, 3, X, agg="MAX", post_kind="SOFTMAX")

def bad(name, op, mutate, expect, n_cols=2, attrs=None):
    n, w = forest(3, 3, F, n_cols)
    attrs = dict(attrs or ({"n_targets": n_cols} if op == "TreeEnsembleRegressor"
                           else {"classlabels_int64s": list(range(n_cols))}))
    mutate(n, w, attrs)
    m = make_model(op, n, w, F, np.float32, attrs)
    d = os.path.join(out, "bad", name)
    os.makedirs(d)
    p = os.path.join(d, "model.onnx")
    with open(p, "wb") as f:
        f.write(m.SerializeToString())
    xp = os.path.join(d, "x.pb")
    with open(xp, "wb") as f:
        f.write(numpy_helper.from_array(inputs(2, F, np.float32), "X").SerializeToString())
    return name, p, xp, expect


def first_branch(n):
    return next(i for i in range(len(n["mode"])) if n["mode"][i] != "LEAF")


bads = [
    bad("missing_child", "TreeEnsembleRegressor",
        lambda n, w, a: n["yes"].__setitem__(first_branch(n), 999), "true node 999"),
    bad("duplicate_node", "TreeEnsembleRegressor",
        lambda n, w, a: n["node"].__setitem__(1, n["node"][2]), "appears twice"),
    bad("weight_nowhere", "TreeEnsembleRegressor",
        lambda n, w, a: w["node"].__setitem__(0, 777), "node 777"),
    bad("class_out_of_range", "TreeEnsembleClassifier",
        lambda n, w, a: w["col"].__setitem__(0, 2), "outside [0, 2)"),
    bad("feature_past_input", "TreeEnsembleRegressor",
        lambda n, w, a: n["feat"].__setitem__(first_branch(n), F + 3), "feature %d" % (F + 3)),
    bad("unknown_mode", "TreeEnsembleRegressor",
        lambda n, w, a: n["mode"].__setitem__(first_branch(n), "BRANCH_LIKE"), "BRANCH_LIKE"),
    bad("lengths_differ", "TreeEnsembleRegressor",
        lambda n, w, a: n["feat"].pop(), "differ in length"),
    bad("bad_aggregate", "TreeEnsembleRegressor",
        lambda n, w, a: a.__setitem__("aggregate_function", "MEDIAN"), "MEDIAN"),
    bad("base_values_count", "TreeEnsembleRegressor",
        lambda n, w, a: a.__setitem__("base_values", [1.0, 2.0, 3.0]), "3 base_values"),
    bad("no_labels", "TreeEnsembleClassifier",
        lambda n, w, a: a.pop("classlabels_int64s"), "classlabels"),
    bad("self_child", "TreeEnsembleRegressor",
        lambda n, w, a: n["no"].__setitem__(0, n["node"][0]), "is itself"),
    bad("cycle", "TreeEnsembleRegressor",
        lambda n, w, a: [n["no"].__setitem__(i, 0) for i in range(1, len(n["mode"]))
                         if n["mode"][i] != "LEAF" and n["tree"][i] == 0], "cycle"),
]

exe = args.onnxexec
failed = 0
for extra in ([], ["--no-optimize"], ["--roundtrip"]):
    r = subprocess.run([exe, "test", out, "--rtol", "1e-6", "--atol", "1e-7", "--threads", "2"]
                       + extra, capture_output=True, text=True)
    sys.stdout.write("onnxexec test %s:\n%s" % (" ".join(extra) or "(optimized)", r.stdout))
    if r.returncode or " 0 failed" not in r.stdout:
        failed += 1
        sys.stdout.write(r.stderr)
for name, model, xp, expect in bads:
    failed += expect_error(exe, name, model, xp, expect)

if args.ort_dir:
    failed += ort_oracle.compare(out, ort_cases, args.ort_dir)
sys.exit(1 if failed else 0)
