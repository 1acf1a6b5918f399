#!/usr/bin/env python3
"""Writes a small classification data set in the layout `dataset = "tensors"` reads (docs/running.md,
"Your own data"): DIR/features.npy [N, 20] float32, DIR/labels.npy [N] int64 (4 classes: Gaussian
blobs around 4 fixed centres), and a test split. For the README's walk-through; needs numpy.

    python3 examples/own_data/make_blobs.py DIR [--train 4000] [--test 1000]
"""
import argparse
import os

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir")
    ap.add_argument("--train", type=int, default=4000)
    ap.add_argument("--test", type=int, default=1000)
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    rng = np.random.default_rng(7)
    centres = np.random.default_rng(1).normal(0, 1, (4, 20))

    def split(n: int) -> tuple[np.ndarray, np.ndarray]:
        y = rng.integers(0, 4, n)
        x = centres[y] + rng.normal(0, 0.8, (n, 20))
        return x.astype(np.float32), y.astype(np.int64)

    for prefix, n in (("", a.train), ("test-", a.test)):
        x, y = split(n)
        np.save(os.path.join(a.dir, prefix + "features.npy"), x)
        np.save(os.path.join(a.dir, prefix + "labels.npy"), y)


if __name__ == "__main__":
    main()
