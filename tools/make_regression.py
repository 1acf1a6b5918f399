#!/usr/bin/python3
"""Writes the small regression data set of tests/fixtures/regression/ (a tensors data set, docs/running.md).

    /usr/bin/python3 tools/make_regression.py [OUT_DIR]     (default tests/fixtures/regression; numpy)

Known functions of four features plus Gaussian noise, so a regressor trained on it (the mse job
scenarios/jobs/short_onnx_mse.toml) has something to learn and a floor it cannot beat (the noise):

  x ~ uniform [-1, 1]^4
  y0 = sin(pi x0) x1 + 0.5 x2^2 + 0.05 n0
  y1 = x0 - x1 x3 + 0.25 x2 + 0.05 n1          n ~ N(0, 1)

  features.npy '<f4' [256, 4], targets.npy '<f4' [256, 2]            (the training split)
  test-features.npy '<f4' [64, 4], test-targets.npy '<f4' [64, 2]    (the test split)

Deterministic (numpy's PCG64 under a fixed seed); the written files are committed, so tests never run this.
"""
import pathlib
import sys

import numpy as np


def split(rng, n):
    x = rng.uniform(-1.0, 1.0, size=(n, 4))
    noise = rng.standard_normal(size=(n, 2))
    y0 = np.sin(np.pi * x[:, 0]) * x[:, 1] + 0.5 * x[:, 2] ** 2 + 0.05 * noise[:, 0]
    y1 = x[:, 0] - x[:, 1] * x[:, 3] + 0.25 * x[:, 2] + 0.05 * noise[:, 1]
    return x.astype(np.float32), np.stack([y0, y1], axis=1).astype(np.float32)


def main():
    out = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/regression")
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(31)
    for prefix, n in (("", 256), ("test-", 64)):
        x, y = split(rng, n)
        np.save(out / f"{prefix}features.npy", x)
        np.save(out / f"{prefix}targets.npy", y)
        print(f"{out}/{prefix}features.npy {x.shape}, {prefix}targets.npy {y.shape}")


if __name__ == "__main__":
    main()
