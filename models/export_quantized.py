#!/usr/bin/python3
"""Quantized models as users get them, for measuring onnxexec (not part of the tests).

    models/export_quantized.py qdq OUTDIR [NAME...]        # torchvision, QDQ form
    models/export_quantized.py dynamic MODEL.onnx OUT.onnx  # MatMuls, dynamic quantization

qdq: torchvision's quantizable classifiers (resnet18, resnet50, mobilenet_v2,
mobilenet_v3_large by default; seeded random weights) quantized with torch's FX tools (the
fbgemm configuration, calibrated on four random images) and exported to ONNX at batch 1:
QuantizeLinear -> Cast -> DequantizeLinear around each float operator, int8 weights per
output channel. Each goes to OUTDIR/NAME/model.onnx with test_data_set_0 holding a random
image and PyTorch's output (which computes in integers: expect a relative L2 of a few 1e-2
against it, as ONNX Runtime shows too).

dynamic: every MatMul of MODEL.onnx by a constant 2-D weight becomes what onnxruntime's
quantize_dynamic writes: DynamicQuantizeLinear of the input, MatMulInteger by the weight in
int8 (one scale, symmetric), Cast to float, Mul by the product of the two scales.
"""
import os
import sys

import numpy as np


def export_qdq(out, names):
    import onnx  # noqa: F401  (torch.onnx needs it)
    import torch
    import torchvision
    from onnx import numpy_helper
    from torch.ao.quantization import get_default_qconfig_mapping
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

    for name in names:
        torch.manual_seed(0)
        m = getattr(torchvision.models.quantization, name)(weights=None, quantize=False)
        # batch-norm statistics of the random weights' own activations (a few batches in
        # training mode): with the initial ones (mean 0, variance 1) a MobileNet's
        # activations fade layer by layer and its int8 output is all zeros
        m.train()
        with torch.no_grad():
            for _ in range(4):
                m(torch.randn(8, 3, 224, 224))
        m.eval()
        x = torch.randn(1, 3, 224, 224)
        qm = prepare_fx(m, get_default_qconfig_mapping("fbgemm"), (x,))
        with torch.no_grad():
            for _ in range(4):
                qm(torch.randn(1, 3, 224, 224))
        qm = convert_fx(qm)
        with torch.no_grad():
            y = qm(x)
        d = os.path.join(out, name)
        os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
        torch.onnx.export(qm, x, os.path.join(d, "model.onnx"), opset_version=13,
                          input_names=["x"], output_names=["y"])
        for kind, name_, arr in (("input", "x", x), ("output", "y", y)):
            with open(os.path.join(d, "test_data_set_0", kind + "_0.pb"), "wb") as f:
                f.write(numpy_helper.from_array(arr.numpy(), name_).SerializeToString())
        print("wrote", d, flush=True)


def quantize_dynamic(src, dst):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    m = onnx.load(src)
    g = m.graph
    inits = {t.name: t for t in g.initializer}
    nodes, k = [], 0
    for n in g.node:
        w = inits.get(n.input[1]) if n.op_type == "MatMul" else None
        if w is None or len(w.dims) != 2:
            nodes.append(n)
            continue
        w = numpy_helper.to_array(w).astype(np.float32)
        ws = np.float32(np.abs(w).max() / 127.0)
        wq = np.clip(np.rint(w / ws), -127, 127).astype(np.int8)
        p = "dynq%d_" % k
        k += 1
        g.initializer.extend([numpy_helper.from_array(wq, p + "w"),
                              numpy_helper.from_array(ws, p + "w_scale"),
                              numpy_helper.from_array(np.int8(0), p + "w_zero_point")])
        nodes += [
            helper.make_node("DynamicQuantizeLinear", [n.input[0]],
                             [p + "x", p + "x_scale", p + "x_zero_point"]),
            helper.make_node("MatMulInteger", [p + "x", p + "w", p + "x_zero_point",
                                               p + "w_zero_point"], [p + "sums"]),
            helper.make_node("Cast", [p + "sums"], [p + "sums_f"], to=TensorProto.FLOAT),
            helper.make_node("Mul", [p + "x_scale", p + "w_scale"], [p + "scale"]),
            helper.make_node("Mul", [p + "sums_f", p + "scale"], [n.output[0]]),
        ]
    del g.node[:]
    g.node.extend(nodes)
    onnx.save(m, dst)
    print("quantized %d MatMuls into %s" % (k, dst))


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "qdq":
        export_qdq(sys.argv[2], sys.argv[3:] or ["resnet18", "resnet50", "mobilenet_v2",
                                                  "mobilenet_v3_large"])
    elif len(sys.argv) == 4 and sys.argv[1] == "dynamic":
        quantize_dynamic(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
