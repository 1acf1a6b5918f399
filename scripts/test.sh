#!/usr/bin/env bash
# CI entry point: the README's test command. Installs what is missing, checks the sources (format,
# layering), then builds and runs, each step building only the targets it runs:
#  1. release (g++ -O3, the SIMT emulation of the CUDA kernels, warnings as errors): every suite, two
#     at a time (the heavy end-to-end runs alone: RUN_SERIAL in tests/CMakeLists.txt) — the CUDA kernels
#     memcmp'd against the references and the short jobs' golden roots among them (docs/cuda.md);
#  2. two more configurations (g++ -march=native, clang++ -O0): the short jobs' trajectory roots on every
#     SIMD path the CPU has equal the golden roots (scripts/check_roots.sh);
#  3. arm64: the aarch64 cross build under qemu-user — the NEON kernels memcmp'd against the references,
#     the short jobs' roots equal to the golden roots;
#  4. AddressSanitizer and UndefinedBehaviorSanitizer on the suites that take untrusted input (protocol,
#     net, referee, nodes, the scenario suite and network-fault campaign, the crash test, the CLI);
#  5. ThreadSanitizer on the net, referee and node suites;
#  6. each libFuzzer target for FUZZ_SECONDS (default 20) on its committed seed corpus.
# Compile caching (ccache, CMakeLists.txt) carries an earlier build's objects on the same machine into a
# fresh clone. Each step prints how long it took; the budget per step is in docs/performance.md.
set -euo pipefail
cd "$(dirname "$0")/.."

step_start=$SECONDS
took() {  # took WHAT: prints the time since the previous step ended
  echo "test.sh: $1 took $((SECONDS - step_start)) s"
  step_start=$SECONDS
}

scripts/bootstrap.sh
took "bootstrap"
scripts/lint.sh
took "lint (format, layers)"

cmake --preset release
cmake --build --preset release -j "$(nproc)"
took "the release build"
ctest --preset release -j "$(nproc)"
took "ctest (release)"
# --no-eval runs only: 1 and 2 threads and the resumed run are checked by the release suites
# (test_engine); here each compiler's build trains on every SIMD path.
RUNS=simd scripts/check_roots.sh "g++ -O3 -march=native" "clang++ -O0 -march=x86-64"
took "check_roots.sh (two more configurations)"

# arm64 under qemu-aarch64: only what runs there is built (tribunal, test_ops); each short job trains on
# the NEON and the scalar path (check_roots.sh trains with --no-eval: the held-out evaluation was nearly
# all of a GPT run under emulation).
scripts/bootstrap.sh --cross aarch64
cmake --preset aarch64
cmake --build --preset aarch64 -j "$(nproc)"
ctest --preset aarch64
JOBS="scenarios/jobs/short_mlp.toml scenarios/jobs/short_cnn.toml scenarios/jobs/short_gpt.toml scenarios/jobs/short_onnx_cnn.toml scenarios/jobs/short_onnx_gpt2.toml scenarios/jobs/short_onnx_llama.toml scenarios/jobs/short_onnx_resnet.toml scenarios/jobs/short_onnx_mse.toml" RUNS=simd \
  scripts/check_roots.sh preset:aarch64
took "the arm64 step"

cmake --preset asan-ubsan
cmake --build --preset asan-ubsan -j "$(nproc)"
took "the asan-ubsan build"
ctest --preset asan-ubsan -j "$(nproc)"
took "ctest (asan-ubsan)"

cmake --preset tsan
cmake --build --preset tsan -j "$(nproc)"
took "the tsan build"
ctest --preset tsan
took "ctest (tsan)"

scripts/fuzz.sh "${FUZZ_SECONDS:-20}"
took "fuzzing"
echo "test.sh: all steps passed in $SECONDS s"
