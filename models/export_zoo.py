#!/usr/bin/python3
"""Export torchvision's model zoo (classification, segmentation, video, optical flow) to ONNX
in the backend-test layout, with PyTorch's outputs as reference, for `onnxexec test` and
tools/bench_compare.py.

    /usr/bin/python3 models/export_zoo.py [OUTDIR] [--only NAME...] [--group G...]
                                          [--opset 17] [--list]   (default OUTDIR: build/zoo)

What users send after the handful of models export_bench.py measures: every architecture
family torchvision 0.14 has, at batch 1, exported the way its documentation shows
(torch.onnx.export, constant folding, static shapes). The largest members of a family are
left out (they add memory, not new graphs): vit_h_14, vit_l_*, regnet_y_128gf/32gf,
regnet_x_32gf, efficientnet_b5..b7, efficientnet_v2_l, convnext_large, swin_b, swin_v2_b,
resnext101_64x4d, wide_resnet101_2, vgg13/16/19 (with and without BN), the 101-layer
segmentation models, mvit_v1_b, mvit_v2_s (torch 1.13's exporter needs more than 24 GiB for
it). swin_v2_t/s do not export with torch 1.13 (aten::zero) and are reported as failures.

Weights are torchvision's seeded random initialisation (no download), with noise added to
the parameters that start at one value (zero heads, ConvNeXt's 1e-6 layer scale, norm
weights, biases: see perturb_constant_parameters). BatchNorm statistics
are first measured on four random images (train mode, cumulative averages): with its
initial statistics a random deep network's activations grow or vanish layer by layer, and
its outputs would test nothing. Inputs are uniform in [0, 1):

    classification   [1, 3, 224, 224] (inception_v3: 299; vit, swin, maxvit need 224)
    segmentation     [1, 3, 224, 224] -> the "out" map (the model's dict, first entry)
    video            [1, 3, 16, 112, 112] (s3d: [1, 3, 16, 224, 224])
    optical flow     two images [1, 3, 128, 128] -> the last flow estimate (raft_small,
                     12 refinement steps: GridSample, a correlation pyramid)

Written as OUTDIR/<name>/model.onnx and test_data_set_0/{input_<k>,output_0}.pb.
"""

import argparse
import os
import sys
import time

import onnx
import torch
import torchvision

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_parity import save_tensor  # noqa: E402

LEFT_OUT = {
    "vit_h_14", "vit_l_16", "vit_l_32", "regnet_y_128gf", "regnet_y_32gf", "regnet_x_32gf",
    "efficientnet_b5", "efficientnet_b6", "efficientnet_b7", "efficientnet_v2_l",
    "convnext_large", "swin_b", "swin_v2_b", "resnext101_64x4d", "wide_resnet101_2", "vgg13",
    "vgg16", "vgg19", "vgg13_bn", "vgg16_bn", "vgg19_bn", "deeplabv3_resnet101",
    "fcn_resnet101", "mvit_v1_b", "mvit_v2_s", "raft_large",
}


def zoo():
    """{name: (group, constructor, input shapes)} for every model exported."""
    tv = torchvision.models
    out = {}
    for name in tv.list_models(module=tv):
        size = 299 if name == "inception_v3" else 224
        out[name] = ("classification", getattr(tv, name), [(1, 3, size, size)])
    for name in tv.list_models(module=tv.segmentation):
        out[name] = ("segmentation", getattr(tv.segmentation, name), [(1, 3, 224, 224)])
    for name in tv.list_models(module=tv.video):
        side = 224 if name == "s3d" else 112
        out[name] = ("video", getattr(tv.video, name), [(1, 3, 16, side, side)])
    for name in tv.list_models(module=tv.optical_flow):
        out[name] = ("optical_flow", getattr(tv.optical_flow, name), [(1, 3, 128, 128)] * 2)
    return {k: v for k, v in out.items() if k not in LEFT_OUT}


class FirstOutput(torch.nn.Module):
    """The segmentation models return a dict, raft a list of flow estimates: export one
    tensor (the "out" map, the last estimate), as deployments do."""

    def __init__(self, model, group):
        super().__init__()
        self.model = model
        self.group = group

    def forward(self, *xs):
        y = self.model(*xs)
        if self.group == "segmentation":
            return y["out"]
        if self.group == "optical_flow":
            return y[-1]
        return y


def perturb_constant_parameters(model, gen):
    """torchvision starts some parameters at one value for all elements: ViT's head at zero
    (the output would be all zeros), ConvNeXt's layer scale at 1e-6 (every block nearly the
    identity), norm weights at one, biases at zero. Add N(0, 0.1) noise to each of them, so
    that every block takes part in the output."""
    with torch.no_grad():
        for p in model.parameters():
            if p.numel() > 1 and bool((p == p.flatten()[0]).all()):
                p.add_(torch.randn(p.shape, generator=gen) * 0.1)


def calibrate_batchnorm(model, shapes, gen):
    bns = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return
    for m in bns:
        m.momentum = None
        m.reset_running_stats()
    model.train()
    with torch.no_grad():
        for _ in range(2):
            xs = [torch.rand((2,) + s[1:], generator=gen) for s in shapes]
            model(*xs)
    model.eval()


def export(name, spec, outdir, opset):
    group, ctor, shapes = spec
    t0 = time.time()
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    kwargs = {"weights": None}
    if group == "segmentation":
        kwargs["weights_backbone"] = None
        kwargs["aux_loss"] = False
    if name in ("googlenet", "inception_v3"):
        kwargs["aux_logits"] = False
        kwargs["init_weights"] = True
    model = ctor(**kwargs).eval()
    perturb_constant_parameters(model, gen)
    calibrate_batchnorm(model, shapes, gen)
    wrapped = FirstOutput(model, group).eval()
    xs = [torch.rand(s, generator=gen) for s in shapes]
    with torch.no_grad():
        ref = wrapped(*xs)
    d = os.path.join(outdir, name)
    os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    path = os.path.join(d, "model.onnx")
    in_names = ["image"] if len(xs) == 1 else ["image%d" % (k + 1) for k in range(len(xs))]
    torch.onnx.export(wrapped, tuple(xs), path, opset_version=opset, input_names=in_names,
                      output_names=["output"], do_constant_folding=True)
    model_proto = onnx.load(path, load_external_data=False)
    graph_inputs = [i.name for i in model_proto.graph.input]
    for k, x in enumerate(xs):
        save_tensor(x.numpy(), graph_inputs[k],
                    os.path.join(d, "test_data_set_0", "input_%d.pb" % k))
    save_tensor(ref.numpy(), model_proto.graph.output[0].name,
                os.path.join(d, "test_data_set_0", "output_0.pb"))
    print("%s (%s): output %s, %.1f MB, %.1f s" % (name, group, tuple(ref.shape),
                                                  os.path.getsize(path) / 1e6,
                                                  time.time() - t0), flush=True)


def main():
    models = zoo()
    groups = sorted({g for g, _, _ in models.values()})
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outdir", nargs="?", default="build/zoo")
    ap.add_argument("--only", nargs="+", choices=sorted(models), metavar="NAME")
    ap.add_argument("--group", nargs="+", choices=groups)
    ap.add_argument("--opset", type=int, default=17)
    ap.add_argument("--list", action="store_true", help="print the names and exit")
    args = ap.parse_args()
    names = args.only or [n for n, s in models.items() if not args.group or s[0] in args.group]
    if args.list:
        for n in names:
            print("%-34s %s" % (n, models[n][0]))
        return
    failed = []
    for name in names:
        try:
            export(name, models[name], args.outdir, args.opset)
        except Exception as e:  # one model's exporter failure must not stop the others
            failed.append(name)
            print("%s: export failed: %s" % (name, str(e).splitlines()[0] if str(e) else
                                             type(e).__name__), flush=True)
    if failed:
        print("export failed for %d: %s" % (len(failed), " ".join(failed)))
        sys.exit(1)


if __name__ == "__main__":
    main()
