#!/usr/bin/python3
"""Export the parity models (ResNet-18, MobileNetV2, a small transformer encoder)
to ONNX in the ONNX backend-test layout, with PyTorch's outputs as reference.

    /usr/bin/python3 models/export_parity.py [OUTDIR]      (default: build/models)

For each model <name> it writes

    OUTDIR/<name>/model.onnx
    OUTDIR/<name>/test_data_set_0/input_0.pb     (onnx TensorProto, name = graph input)
    OUTDIR/<name>/test_data_set_0/output_0.pb    (onnx TensorProto, name = graph output)

The weights are random (fixed seeds, no download); BatchNorm statistics and
affine parameters are randomised too so that folding/fusing them is actually
exercised, and every transformer parameter is redrawn so its two layers differ. Everything is seeded, so two runs give byte-identical files.
These files are generated at test time and are not committed.
"""

import argparse
import os
import random
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import onnx
from onnx import numpy_helper

SEED = 0


def checked_io(onnx_path):
    """The exported model (passed through onnx.checker) and its one input and output name."""
    proto = onnx.load(onnx_path)
    onnx.checker.check_model(proto)
    init_names = {i.name for i in proto.graph.initializer}
    in_names = [i.name for i in proto.graph.input if i.name not in init_names]
    out_names = [o.name for o in proto.graph.output]
    assert len(in_names) == 1 and len(out_names) == 1, (in_names, out_names)
    return proto, in_names, out_names


def seed_everything(seed=SEED):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def randomise_batchnorm(model, gen):
    """Give every BatchNorm non-trivial running stats and affine parameters."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm):
                n = m.num_features
                m.running_mean.copy_(torch.randn(n, generator=gen) * 0.1)
                m.running_var.copy_(torch.empty(n).uniform_(0.5, 1.5, generator=gen))
                m.weight.copy_(torch.empty(n).uniform_(0.5, 1.5, generator=gen))
                m.bias.copy_(torch.randn(n, generator=gen) * 0.1)


def randomise_transformer(model, gen):
    """nn.TransformerEncoder deep-copies its layer, so all layers start with
    identical weights, LayerNorm weight 1 / bias 0 and zero attention biases
    (and the exporter then shares them through Identity nodes). Redraw every
    parameter from the seeded generator so that each layer is different."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() >= 2:
                fan_out, fan_in = p.shape[0], p[0].numel()
                a = (6.0 / (fan_in + fan_out)) ** 0.5
                p.copy_(torch.empty(p.shape).uniform_(-a, a, generator=gen))
            elif ".norm" in name and name.endswith(".weight"):
                p.copy_(torch.empty(p.shape).uniform_(0.5, 1.5, generator=gen))
            else:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.1)


class SmallTransformer(nn.Module):
    """2-layer post-norm transformer encoder (d_model 64, 4 heads) + Linear head."""

    def __init__(self, d_model=64, nhead=4, dim_ff=128, num_layers=2, n_out=10):
        super().__init__()
        layer = nn.TransformerEncoderLayer(d_model=d_model, nhead=nhead,
                                           dim_feedforward=dim_ff, dropout=0.1,
                                           batch_first=True)
        # enable_nested_tensor=False: keep the plain (exportable) code path.
        self.encoder = nn.TransformerEncoder(layer, num_layers=num_layers,
                                             enable_nested_tensor=False)
        self.head = nn.Linear(d_model, n_out)

    def forward(self, x):
        return self.head(self.encoder(x))


def build_models():
    import torchvision

    models = []

    seed_everything(SEED)
    gen = torch.Generator().manual_seed(1000)
    m = torchvision.models.resnet18(weights=None).eval()
    randomise_batchnorm(m, gen)
    x = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(1))
    models.append(("resnet18", m, x, 13))

    seed_everything(SEED)
    gen = torch.Generator().manual_seed(1001)
    m = torchvision.models.mobilenet_v2(weights=None).eval()
    randomise_batchnorm(m, gen)
    x = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(2))
    models.append(("mobilenet_v2", m, x, 13))

    seed_everything(SEED)
    gen = torch.Generator().manual_seed(1002)
    m = SmallTransformer().eval()
    randomise_transformer(m, gen)
    x = torch.randn(1, 16, 64, generator=torch.Generator().manual_seed(3))
    models.append(("transformer_encoder", m, x, 14))

    return models


def disable_mha_fastpath():
    # torch >= 2.0 has this switch; on 1.13 enable_nested_tensor=False and the
    # autograd-enabled export trace keep us off the fused fast path.
    mha = getattr(torch.backends, "mha", None)
    if mha is not None and hasattr(mha, "set_fastpath_enabled"):
        mha.set_fastpath_enabled(False)


def save_tensor(array, name, path):
    t = numpy_helper.from_array(np.ascontiguousarray(array), name=name)
    with open(path, "wb") as f:
        f.write(t.SerializeToString())


def export_one(name, model, x, opset, outdir):
    t0 = time.time()
    case = os.path.join(outdir, name)
    data = os.path.join(case, "test_data_set_0")
    os.makedirs(data, exist_ok=True)
    onnx_path = os.path.join(case, "model.onnx")

    with torch.no_grad():
        y = model(x)

    torch.onnx.export(model, (x,), onnx_path, export_params=True,
                      opset_version=opset, do_constant_folding=True,
                      input_names=["input"], output_names=["output"],
                      training=torch.onnx.TrainingMode.EVAL)

    proto, in_names, out_names = checked_io(onnx_path)

    save_tensor(x.numpy(), in_names[0], os.path.join(data, "input_0.pb"))
    save_tensor(y.numpy(), out_names[0], os.path.join(data, "output_0.pb"))

    # Verification: reload the saved tensors and re-run PyTorch on them.
    xin = numpy_helper.to_array(onnx.load_tensor(os.path.join(data, "input_0.pb")))
    yref = numpy_helper.to_array(onnx.load_tensor(os.path.join(data, "output_0.pb")))
    with torch.no_grad():
        y2 = model(torch.from_numpy(xin.copy())).numpy()
    maxdiff = float(np.max(np.abs(y2 - yref)))
    assert maxdiff == 0.0 or np.allclose(y2, yref, rtol=1e-5, atol=1e-6), maxdiff

    ops = sorted({n.op_type for n in proto.graph.node})
    print(f"{name}: opset {opset}, input '{in_names[0]}' {list(x.shape)}, "
          f"output '{out_names[0]}' {list(y.shape)}, "
          f"model.onnx {os.path.getsize(onnx_path)} bytes, "
          f"{len(proto.graph.node)} nodes, |y| max {float(y.abs().max()):.4g}, "
          f"rerun max diff {maxdiff:.3g}, {time.time() - t0:.1f}s")
    print(f"  ops: {' '.join(ops)}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outdir", nargs="?", default="build/models")
    ap.add_argument("--only", nargs="*", help="export only these model names")
    args = ap.parse_args(argv)

    torch.set_num_threads(min(2, torch.get_num_threads()))
    disable_mha_fastpath()
    t0 = time.time()
    for name, model, x, opset in build_models():
        if args.only and name not in args.only:
            continue
        export_one(name, model, x, opset, args.outdir)
    print(f"done in {time.time() - t0:.1f}s -> {args.outdir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
