#!/usr/bin/python3
"""Exports the small ONNX models of tests/fixtures/onnx/ from PyTorch modules (docs/onnx.md).

    /usr/bin/python3 tools/onnx_export.py [OUT_DIR]     (default tests/fixtures/onnx; needs python3-torch)

Each family is defined here as a user would define it, and exported the way docs/onnx.md tells users
to: torch.onnx.export in training mode (dropout kept as training-mode Dropout nodes), opset 17, no
constant folding by the exporter (tribunal folds shape computations itself), a dynamic batch axis.
The initializers are torch's default initialization under a fixed seed: the job's state 0.

  mlp.onnx  Linear(784, 64) → ReLU → Dropout(0.1) → Linear(64, 10)            (Fashion-MNIST, 51k params)
  cnn.onnx  Conv(1→8, 3×3, pad 1) → ReLU → MaxPool 2 → Conv(8→16, 3×3, pad 1) → ReLU → MaxPool 2
            → Flatten → Linear(784, 10)                                       (Fashion-MNIST, 9.1k params)

Not run in CI (python3-torch stays out of its critical path): the exported files are committed.
"""
import pathlib
import sys

import torch
from torch import nn


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 64)
        self.drop = nn.Dropout(0.1)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        return self.fc2(self.drop(torch.relu(self.fc1(x))))


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.fc = nn.Linear(16 * 7 * 7, 10)

    def forward(self, x):
        x = nn.functional.max_pool2d(torch.relu(self.conv1(x)), 2)
        x = nn.functional.max_pool2d(torch.relu(self.conv2(x)), 2)
        return self.fc(torch.flatten(x, 1))


def export(module, example, path):
    module.train()
    torch.onnx.export(module, example, str(path), opset_version=17, training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, input_names=["x"], output_names=["logits"],
                      dynamic_axes={"x": {0: "batch"}, "logits": {0: "batch"}})
    print(f"{path}: {path.stat().st_size} bytes, {sum(p.numel() for p in module.parameters())} parameters")


def main():
    out = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/onnx")
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(2026)
    export(Mlp(), torch.zeros(4, 784), out / "mlp.onnx")
    torch.manual_seed(2027)
    export(Cnn(), torch.zeros(4, 1, 28, 28), out / "cnn.onnx")


if __name__ == "__main__":
    main()
