#!/usr/bin/python3
"""Export the benchmark model set (issue 4) to ONNX in the backend-test layout,
with PyTorch's outputs as reference, for `onnxexec test` and tools/bench_compare.py.

    /usr/bin/python3 models/export_bench.py [OUTDIR] [--only NAME...] [--batches 1,8]
                                            (default OUTDIR: build/bench)

Models (random seeded weights, no download; eval mode; opset 17; dynamic batch axis):

    resnet18, resnet50, mobilenet_v2, efficientnet_b0, squeezenet1_1
                        torchvision, input float32 [N,3,224,224], output [N,1000]
    bert_encoder        nn.TransformerEncoder, 4 x TransformerEncoderLayer(d_model 256,
                        4 heads, dim_feedforward 1024, batch_first) + Linear(256,256),
                        input float32 [N,128,256], output [N,128,256]
    mlp                 784-512-512-10 with ReLU, input float32 [N,784], output [N,10]

For each model <name> and batch <b> it writes

    OUTDIR/<name>_b<b>/model.onnx                  (the same file for every batch: hard link)
    OUTDIR/<name>_b<b>/test_data_set_0/input_0.pb  (onnx TensorProto, name = graph input)
    OUTDIR/<name>_b<b>/test_data_set_0/output_0.pb (name = graph output; PyTorch's output)

BatchNorm running statistics and affine parameters are randomised (as in
export_parity.py) so that folding them is exercised (in eval mode the exporter folds
them into the preceding Conv), and every transformer parameter is redrawn so the
layers differ. The model is traced with the largest batch so that nothing is
specialised to batch 1; the batch axis of input and output is dynamic ("N").
Everything is seeded: two runs give byte-identical files.
"""

import argparse
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import onnx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_parity import (SmallTransformer, checked_io, disable_mha_fastpath, randomise_batchnorm,  # noqa: E402
                           randomise_transformer, save_tensor, seed_everything)

OPSET = 17
SEED = 0
MODEL_NAMES = ["resnet18", "resnet50", "mobilenet_v2", "efficientnet_b0", "squeezenet1_1",
               "bert_encoder", "mlp"]


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(784, 512), nn.ReLU(),
                                 nn.Linear(512, 512), nn.ReLU(),
                                 nn.Linear(512, 10))

    def forward(self, x):
        return self.net(x)


def build(name, index):
    """(module, per-sample input shape) for model `name`, weights from seeds of `index`."""
    import torchvision

    seed_everything(SEED)
    gen = torch.Generator().manual_seed(2000 + index)
    if name == "bert_encoder":
        # BERT-like: 4 post-norm layers, d_model 256, 4 heads, FF 1024, + Linear(256, 256)
        m = SmallTransformer(d_model=256, nhead=4, dim_ff=1024, num_layers=4, n_out=256).eval()
        randomise_transformer(m, gen)
        return m, (128, 256)
    if name == "mlp":
        return MLP().eval(), (784,)
    m = getattr(torchvision.models, name)(weights=None).eval()
    randomise_batchnorm(m, gen)
    return m, (3, 224, 224)


def export_model(name, index, batches, outdir):
    t0 = time.time()
    model, shape = build(name, index)
    xs = {b: torch.randn((b,) + shape, generator=torch.Generator().manual_seed(100 * index + b))
          for b in batches}
    ys = {}
    with torch.no_grad():
        for b in batches:
            ys[b] = model(xs[b])

    cases = [os.path.join(outdir, f"{name}_b{b}") for b in batches]
    for c in cases:
        os.makedirs(os.path.join(c, "test_data_set_0"), exist_ok=True)
    onnx_path = os.path.join(cases[-1], "model.onnx")
    trace_b = max(batches)
    torch.onnx.export(model, (xs[trace_b],), onnx_path, export_params=True,
                      opset_version=OPSET, do_constant_folding=True,
                      input_names=["input"], output_names=["output"],
                      dynamic_axes={"input": {0: "N"}, "output": {0: "N"}},
                      training=torch.onnx.TrainingMode.EVAL)
    for c in cases[:-1]:
        p = os.path.join(c, "model.onnx")
        if os.path.lexists(p):
            os.remove(p)
        try:
            os.link(onnx_path, p)
        except OSError:
            with open(onnx_path, "rb") as src, open(p, "wb") as dst:
                dst.write(src.read())

    proto, in_names, out_names = checked_io(onnx_path)
    dim0 = proto.graph.input[[i.name for i in proto.graph.input].index(in_names[0])] \
        .type.tensor_type.shape.dim[0]
    assert dim0.dim_param == "N", "batch axis is not dynamic"

    for b, c in zip(batches, cases):
        data = os.path.join(c, "test_data_set_0")
        save_tensor(xs[b].numpy(), in_names[0], os.path.join(data, "input_0.pb"))
        save_tensor(ys[b].numpy(), out_names[0], os.path.join(data, "output_0.pb"))
        assert np.isfinite(ys[b].numpy()).all(), f"{name} b{b}: non-finite output"

    ops = sorted({n.op_type for n in proto.graph.node})
    params = sum(int(np.prod(t.dims)) for t in proto.graph.initializer)
    ymax = max(float(y.abs().max()) for y in ys.values())
    print(f"{name}: opset {OPSET}, batches {','.join(map(str, batches))}, "
          f"input '{in_names[0]}' [N,{','.join(map(str, shape))}], "
          f"output '{out_names[0]}' [N,{','.join(map(str, ys[batches[0]].shape[1:]))}], "
          f"{params / 1e6:.2f} M params, model.onnx {os.path.getsize(onnx_path) / 1e6:.1f} MB, "
          f"{len(proto.graph.node)} nodes, |y| max {ymax:.4g}, {time.time() - t0:.1f}s")
    print(f"  ops: {' '.join(ops)}")
    sys.stdout.flush()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outdir", nargs="?", default="build/bench")
    ap.add_argument("--only", nargs="*", help="export only these models: " + " ".join(MODEL_NAMES))
    ap.add_argument("--batches", default="1,8")
    args = ap.parse_args(argv)
    batches = sorted({int(x) for x in args.batches.split(",")})
    unknown = set(args.only or []) - set(MODEL_NAMES)
    if unknown:
        ap.error("unknown model(s): " + " ".join(sorted(unknown)))

    torch.set_num_threads(min(2, torch.get_num_threads()))
    disable_mha_fastpath()
    t0 = time.time()
    for index, name in enumerate(MODEL_NAMES):
        if args.only and name not in args.only:
            continue
        export_model(name, index, batches, args.outdir)
    print(f"done in {time.time() - t0:.1f}s -> {args.outdir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
