#!/usr/bin/python3
"""Write models/fmnist_cnn.onnx: the small, untrained CNN that `onnxexec train` trains.

    /usr/bin/python3 tools/make_fmnist_cnn.py [-o models/fmnist_cnn.onnx] [--seed 0]

Conv(1->32, 3x3, pad 1) - Relu - MaxPool 2 - Conv(32->64, 3x3, pad 1) - Relu - MaxPool 2 -
Flatten - Linear(3136, 128) - Relu - Linear(128, 10), PyTorch's default initialisation
under a fixed seed, exported in eval mode at opset 17. Input "image" float32 [N, 1, 28, 28]
(pixels / 255, no other normalisation), output "logits" float32 [N, 10]; N is dynamic.
The parameters keep PyTorch's names (features.0.weight, ...). tests/train_fmnist_torch.py
trains the same module, from these weights, with PyTorch.
"""

import argparse
import os
import sys

import torch
import torch.nn as nn


class FmnistCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        )
        self.classifier = nn.Sequential(
            nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10),
        )

    def forward(self, x):
        return self.classifier(self.features(x))


def main(argv=None):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-o", "--output", default=os.path.join(root, "models", "fmnist_cnn.onnx"))
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    torch.manual_seed(args.seed)
    model = FmnistCNN().eval()
    x = torch.zeros(1, 1, 28, 28)
    torch.onnx.export(model, (x,), args.output, export_params=True, opset_version=17,
                      do_constant_folding=True, input_names=["image"],
                      output_names=["logits"],
                      dynamic_axes={"image": {0: "N"}, "logits": {0: "N"}})
    n = sum(p.numel() for p in model.parameters())
    print(f"wrote {args.output}: {n} parameters", file=sys.stderr)


if __name__ == "__main__":
    main()
