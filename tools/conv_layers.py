#!/usr/bin/python3
"""Time single 3x3 convolution layers through `onnxexec bench`, with the Winograd form
(kernels/cpu/winograd.c) and without it (OX_WINOGRAD=0: the direct GEMM), and print a
table of the best times.

    tools/conv_layers.py --onnxexec build/onnxexec [--threads 1,2] [--batch 1] [--runs 200]

The layers are those of resnet18/50 (64-512 channels, 56x56 to 7x7 maps) and squeezenet1_1
(16-64 channels in, 13x13 to 55x55), stride 1, pads 1, random weights; each model is
written to a scratch folder with the onnx package (use /usr/bin/python3). Reports the
minimum over --runs runs (after 10 untimed ones): this machine's speed drifts, and the
minimum is the steadiest figure for one layer alone.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

LAYERS = [  # (input channels, output channels, map)
    (64, 64, 56), (128, 128, 28), (256, 256, 14), (512, 512, 7),
    (16, 64, 55), (32, 128, 27), (64, 256, 13),
]


def write_model(path, c, m, h):
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    w = (np.random.RandomState(0).randn(m, c, 3, 3) * 0.05).astype(np.float32)
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1],
                            kernel_shape=[3, 3])
    graph = helper.make_graph(
        [node], "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", c, h, h])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.zeros(m, np.float32), "b")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def best_ms(onnxexec, model, threads, batch, runs, winograd):
    env = dict(os.environ, OX_WINOGRAD="1" if winograd else "0")
    out = subprocess.run([onnxexec, "bench", model, "--json", "--threads", str(threads),
                          "--batch", str(batch), "--runs", str(runs), "--warmup", "10"],
                         env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])["min_ms"]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--onnxexec", default="build/onnxexec")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--runs", type=int, default=200)
    args = p.parse_args()
    threads = [int(t) for t in args.threads.split(",")]
    with tempfile.TemporaryDirectory(prefix="ox-conv-") as tmp:
        print("| layer (in, out, map) | threads | batch | GFLOP | Winograd (ms) | direct (ms) "
              "| direct / Winograd |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        for c, m, h in LAYERS:
            model = os.path.join(tmp, "conv_%d_%d_%d.onnx" % (c, m, h))
            write_model(model, c, m, h)
            gflop = 2.0 * args.batch * m * c * 9 * h * h / 1e9
            for t in threads:
                w = best_ms(args.onnxexec, model, t, args.batch, args.runs, True)
                d = best_ms(args.onnxexec, model, t, args.batch, args.runs, False)
                print("| %d, %d, %dx%d | %d | %d | %.3f | %.3f | %.3f | %.2f |"
                      % (c, m, h, h, t, args.batch, gflop, w, d, d / w))
                sys.stdout.flush()


if __name__ == "__main__":
    main()
