#!/usr/bin/python3
"""Backend-layout cases for NonMaxSuppression, with expected selections from torchvision's
own NMS (torchvision.ops.nms, its C++ kernel) as the oracle: the shapes real detectors send.

    tests/nms_cases.py OUTDIR [--onnxexec BIN]

- one class of scattered boxes of mixed sizes (a few wide ones spanning most of the image);
- torchvision's batched_nms by the coordinate trick, as exported detectors (SSD, Faster
  R-CNN, RetinaNet) run it: thousands of boxes of many classes in one NonMaxSuppression,
  each class offset by the largest coordinate + 1, including boxes far larger than the rest;
- several batch items and classes with a score threshold and max_output_boxes_per_class;
- center_point_box=1, corners given in either diagonal order, zero-area and duplicated
  boxes, coordinates near 1e6 (precision of the kernel's bucketing).

Scores are distinct (a permutation), so the order of the selection is defined. Writes the
cases under OUTDIR; with --onnxexec, runs `BIN test OUTDIR` and exits with its status.
"""
import argparse
import os
import subprocess
import sys

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper
from torchvision.ops import nms as tv_nms

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("outdir")
ap.add_argument("--onnxexec", help="run BIN test OUTDIR after writing the cases")
args = ap.parse_args()
out = args.outdir
rng = np.random.default_rng(11)


def boxes_xyxy(n, extent, small=(4, 60), n_wide=0):
    """n boxes (x1, y1, x2, y2) inside [0, extent]^2, n_wide of them covering most of it."""
    c = rng.uniform(0, extent, size=(n, 2))
    wh = rng.uniform(small[0], small[1], size=(n, 2))
    if n_wide:
        k = rng.choice(n, n_wide, replace=False)
        wh[k] = rng.uniform(0.5 * extent, extent, size=(n_wide, 2))
    lo = np.clip(c - wh / 2, 0, extent)
    hi = np.clip(c + wh / 2, 0, extent)
    return np.concatenate([lo, hi], axis=1)


def scores_for(n):
    return (rng.permutation(n) + 1).astype(np.float64) / (n + 1)


def oracle(xyxy, sc, iou, thr=None, max_out=None):
    """Indices torchvision keeps, best first: scores above thr, at most max_out."""
    idx = np.arange(len(sc)) if thr is None else np.nonzero(sc > thr)[0]
    keep = tv_nms(torch.tensor(xyxy[idx], dtype=torch.float64),
                  torch.tensor(sc[idx], dtype=torch.float64), iou).numpy()
    keep = idx[keep]
    return keep if max_out is None else keep[:max_out]


def save(name, boxes, scores, iou, max_out, thr, want, center=0):
    d = os.path.join(out, name)
    os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    et = TensorProto.FLOAT
    ins = [("boxes", boxes.astype(np.float32)), ("scores", scores.astype(np.float32)),
           ("max_output_boxes_per_class", np.array([max_out], np.int64)),
           ("iou_threshold", np.array([iou], np.float32))]
    if thr is not None:
        ins.append(("score_threshold", np.array([thr], np.float32)))
    vi = [helper.make_tensor_value_info("boxes", et, boxes.shape),
          helper.make_tensor_value_info("scores", et, scores.shape),
          helper.make_tensor_value_info("max_output_boxes_per_class", TensorProto.INT64, [1]),
          helper.make_tensor_value_info("iou_threshold", TensorProto.FLOAT, [1])]
    if thr is not None:
        vi.append(helper.make_tensor_value_info("score_threshold", TensorProto.FLOAT, [1]))
    node = helper.make_node("NonMaxSuppression", [n for n, _ in ins], ["selected"],
                            center_point_box=center)
    yo = helper.make_tensor_value_info("selected", TensorProto.INT64, ["n", 3])
    g = helper.make_graph([node], name, vi, [yo])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 11)])
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    onnx.save(m, os.path.join(d, "model.onnx"))
    for k, (n, a) in enumerate(ins):
        t = numpy_helper.from_array(a, n)
        with open(os.path.join(d, "test_data_set_0", "input_%d.pb" % k), "wb") as f:
            f.write(t.SerializeToString())
    t = numpy_helper.from_array(np.asarray(want, np.int64).reshape(-1, 3), "selected")
    with open(os.path.join(d, "test_data_set_0", "output_0.pb"), "wb") as f:
        f.write(t.SerializeToString())


def onnx_corners(xyxy, swap=None):
    """[y1, x1, y2, x2]; rows in `swap` give the other diagonal's corners in reverse order."""
    b = xyxy[:, [1, 0, 3, 2]].copy()
    if swap is not None:
        b[swap] = b[swap][:, [2, 3, 0, 1]]
    return b


def one_class(name, xyxy, sc, iou, **kw):
    """One batch item, one class: the selection as triples. The oracle sees the coordinates
    as the file stores them (float32)."""
    xyxy = xyxy.astype(np.float32).astype(np.float64)
    keep = oracle(xyxy, sc, iou)
    want = [(0, 0, int(i)) for i in keep]
    boxes = kw.pop("boxes", onnx_corners(xyxy))
    save(name, boxes[None], sc[None, None], iou, len(sc), None, want, **kw)


# 1. one class, scattered boxes, a few covering most of the image
xyxy = boxes_xyxy(600, 320, n_wide=6)
one_class("test_nms_one_class", xyxy, scores_for(600), 0.5)
one_class("test_nms_one_class_iou03", xyxy, scores_for(600), 0.3)

# 2. batched_nms by the coordinate trick: 60 classes, 3000 boxes, offsets of max + 1
n, classes, extent = 3000, 60, 320.0
xyxy = boxes_xyxy(n, extent, n_wide=30)
labels = rng.integers(0, classes, size=n)
shifted = xyxy + (labels * (xyxy.max() + 1))[:, None]
one_class("test_nms_batched_trick", shifted, scores_for(n), 0.5)
# the same boxes near 1e6 (bucket arithmetic against float64 rounding)
one_class("test_nms_batched_trick_far", shifted + 1e6, scores_for(n), 0.45)

# 3. two batch items, three classes, a score threshold and max_output_boxes_per_class
B, K, S, thr, max_out, iou = 2, 3, 400, 0.35, 25, 0.5
xyxy = [boxes_xyxy(S, 200, n_wide=3).astype(np.float32).astype(np.float64) for _ in range(B)]
sc = np.stack([np.stack([scores_for(S) for _ in range(K)]) for _ in range(B)])
want = []
for b in range(B):
    for k in range(K):
        want += [(b, k, int(i)) for i in oracle(xyxy[b], sc[b, k], iou, thr, max_out)]
save("test_nms_batches_classes_threshold", np.stack([onnx_corners(x) for x in xyxy]), sc, iou,
     max_out, thr, want)

# 4. center_point_box=1: [x_center, y_center, width, height]
xyxy = boxes_xyxy(500, 300)
cwh = np.concatenate([(xyxy[:, :2] + xyxy[:, 2:]) / 2, xyxy[:, 2:] - xyxy[:, :2]], axis=1)
cwh = cwh.astype(np.float32).astype(np.float64)  # the corners as the kernel finds them
xyxy = np.concatenate([cwh[:, :2] - cwh[:, 2:] / 2, cwh[:, :2] + cwh[:, 2:] / 2], axis=1)
one_class("test_nms_center_point", xyxy, scores_for(500), 0.5, boxes=cwh, center=1)

# 5. corners in either diagonal order, zero-area boxes, exact duplicates
xyxy = boxes_xyxy(400, 256)
xyxy[:20, 2] = xyxy[:20, 0]  # zero width: never suppress nor suppressed
xyxy[20:40] = xyxy[40:60]    # duplicates of other boxes (IOU 1)
swap = rng.random(400) < 0.5
one_class("test_nms_corners_degenerate", xyxy, scores_for(400), 0.6,
          boxes=onnx_corners(xyxy, swap))

print(len(os.listdir(out)), "cases in", out)
if args.onnxexec:
    sys.exit(subprocess.run([args.onnxexec, "test", out]).returncode)
