#!/usr/bin/python3
"""Export torchvision's object detectors to ONNX in the backend-test layout, with PyTorch's
outputs as reference, for `onnxexec test` and tools/bench_compare.py.

    /usr/bin/python3 models/export_detection.py [OUTDIR] [--only NAME...]
                                                (default OUTDIR: build/detection)

Models (torchvision, random seeded weights, no download; eval mode; opset 11, as torchvision
documents for these). Random backbones with BatchNorm at its initial statistics blow up and
saturate every score to 1, so the statistics are first measured on four random images
(train mode, cumulative averages), and the heads' parameters are perturbed (std 0.01) so
that the scores differ:

    ssdlite320_mobilenet_v3_large          320 x 320, up to 300 detections
    fasterrcnn_mobilenet_v3_large_320_fpn  320 x 320, box_score_thresh 0
    retinanet_resnet50_fpn                 min_size = max_size = 320, score_thresh 0
    fcos_resnet50_fpn                      min_size = max_size = 320, score_thresh 0
    maskrcnn_resnet50_fpn                  min_size = max_size = 320, box_score_thresh 0
    keypointrcnn_resnet50_fpn              the same (also masks / keypoints and their scores)

Each takes one image float32 [3, 320, 320] (uniform in [0, 1)) and returns boxes, scores
and labels, through the graphs real exports have: NonMaxSuppression over thousands of
boxes of many classes (batched_nms by the coordinate trick), TopK, NonZero, RoiAlign, If.
Written as OUTDIR/<name>/model.onnx and test_data_set_0/{input_0,output_<k>}.pb.
Everything is seeded. Scores still lie close together (relative gaps down to 1e-7), so
detections may come in another order than PyTorch's where float sums differ in the last
bits: compare selected sets, not only positions, where that matters.
"""

import argparse
import os
import sys

import numpy as np
import onnx
import torch
import torchvision

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_parity import save_tensor  # noqa: E402

MODELS = {
    "ssdlite320_mobilenet_v3_large": {},
    "fasterrcnn_mobilenet_v3_large_320_fpn": {"box_score_thresh": 0.0},
    "retinanet_resnet50_fpn": {"score_thresh": 0.0, "min_size": 320, "max_size": 320},
    "fcos_resnet50_fpn": {"score_thresh": 0.0, "min_size": 320, "max_size": 320},
    "maskrcnn_resnet50_fpn": {"box_score_thresh": 0.0, "min_size": 320, "max_size": 320},
    "keypointrcnn_resnet50_fpn": {"box_score_thresh": 0.0, "min_size": 320, "max_size": 320},
}


def export(name, outdir):
    torch.manual_seed(0)
    m = getattr(torchvision.models.detection, name)(weights=None, weights_backbone=None,
                                                    **MODELS[name]).eval()
    for mod in m.modules():
        if isinstance(mod, torch.nn.modules.batchnorm._BatchNorm):
            mod.momentum = None
            mod.reset_running_stats()
    m.backbone.train()
    with torch.no_grad():
        images, _ = m.transform([torch.rand(3, 320, 320) for _ in range(4)])
        for _ in range(3):
            m.backbone(images.tensors)
    m.eval()
    with torch.no_grad():
        for n, p in m.named_parameters():
            if "head" in n:
                p.add_(torch.randn_like(p) * 0.01)
    x = torch.rand(3, 320, 320)
    with torch.no_grad():
        ref = m([x])[0]
    d = os.path.join(outdir, name)
    os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    path = os.path.join(d, "model.onnx")
    torch.onnx.export(m, ([x],), path, opset_version=11, input_names=["image"],
                      output_names=list(ref), do_constant_folding=True)
    model = onnx.load(path, load_external_data=False)
    names = [o.name for o in model.graph.output]
    save_tensor(x.numpy(), "image", os.path.join(d, "test_data_set_0", "input_0.pb"))
    for k, o in enumerate(names):
        save_tensor(ref[o].numpy(), o, os.path.join(d, "test_data_set_0", "output_%d.pb" % k))
    print("%s: %s" % (name, ", ".join("%s %s" % (o, tuple(ref[o].shape)) for o in names)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outdir", nargs="?", default="build/detection")
    ap.add_argument("--only", nargs="+", choices=sorted(MODELS))
    args = ap.parse_args()
    for name in args.only or MODELS:
        export(name, args.outdir)


if __name__ == "__main__":
    main()
