#!/usr/bin/env bash
# Installs what is missing, builds (release preset), and trains the default job on Fashion-MNIST:
# an MLP 784-256-10 for one epoch with RepOps, stride checkpoints in runs/fashion_mlp/.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/bootstrap.sh
cmake --preset release
cmake --build --preset release -j "$(nproc)"
build/release/apps/tribunal train scenarios/jobs/fashion_mlp.toml --out runs/fashion_mlp "$@"
