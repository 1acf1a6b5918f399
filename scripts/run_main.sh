#!/usr/bin/env bash
# Installs what is missing, builds (release preset), and runs the main job: `tribunal demo`, a
# delegated Fashion-MNIST training run over loopback WebSockets in which one provider cheats and the
# referee catches it.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/bootstrap.sh
cmake --preset release
# Only the executable: a newcomer does not wait for the test suites and benchmarks to compile.
cmake --build --preset release -j "$(nproc)" --target tribunal
build/release/apps/tribunal demo "$@"
