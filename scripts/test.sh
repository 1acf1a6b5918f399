#!/usr/bin/env bash
# CI entry point: the README's test command.
# Installs what is missing, builds (release preset, with the SIMT emulation of the CUDA kernels), runs
# every test suite (the CUDA kernels memcmp'd against the references and the short jobs' golden roots on
# the emulated device among them, docs/cuda.md), checks that a second
# configuration (clang++, portable -march, -O0) commits the same trajectory roots as the release
# build on every SIMD path the CPU has; then arm64: the aarch64 cross build under qemu-user (the NEON
# kernels memcmp'd against the references, the short jobs' roots equal to the x86 golden roots); then
# hardens: every suite again — the scenario suite included — under AddressSanitizer and
# UndefinedBehaviorSanitizer (asan-ubsan preset), and each libFuzzer target for FUZZ_SECONDS (default
# 30) on its committed seed corpus. Each step prints how long it took (CI must stay under 45 minutes).
set -euo pipefail
cd "$(dirname "$0")/.."

step_start=$SECONDS
took() {  # took WHAT: prints the time since the previous step ended
  echo "test.sh: $1 took $((SECONDS - step_start)) s"
  step_start=$SECONDS
}

scripts/bootstrap.sh
took "bootstrap"
cmake --preset release
cmake --build --preset release -j "$(nproc)"
took "the release build"
ctest --preset release
took "ctest (release)"
scripts/check_roots.sh "g++ -O3 -march=native" "clang++ -O0 -march=x86-64"
took "check_roots.sh (two more configurations)"

# arm64 under qemu-aarch64: only what runs there is built (tribunal, test_ops); each short job trains on
# the NEON and the scalar path (check_roots.sh trains with --no-eval: the held-out evaluation was nearly
# all of a GPT run under emulation).
scripts/bootstrap.sh --cross aarch64
cmake --preset aarch64
cmake --build --preset aarch64 -j "$(nproc)"
ctest --preset aarch64
JOBS="scenarios/jobs/short_mlp.toml scenarios/jobs/short_cnn.toml scenarios/jobs/short_gpt.toml" RUNS=simd \
  scripts/check_roots.sh preset:aarch64
took "the arm64 step"

cmake --preset asan-ubsan
cmake --build --preset asan-ubsan -j "$(nproc)"
took "the asan-ubsan build"
ctest --preset asan-ubsan
took "ctest (asan-ubsan)"
scripts/fuzz.sh "${FUZZ_SECONDS:-30}"
took "fuzzing"
echo "test.sh: all steps passed in $SECONDS s"
