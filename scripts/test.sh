#!/usr/bin/env bash
# Installs what is missing, builds (release preset), runs every test suite, checks that a second
# configuration (clang++, portable -march, -O0) commits the same trajectory root as the release
# build, then hardens: every suite again — the scenario suite included — under AddressSanitizer and
# UndefinedBehaviorSanitizer (asan-ubsan preset), and each libFuzzer target for FUZZ_SECONDS (default
# 60) on its committed seed corpus.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/bootstrap.sh
cmake --preset release
cmake --build --preset release -j "$(nproc)"
ctest --preset release
scripts/check_roots.sh "g++ -O3 -march=native" "clang++ -O0 -march=x86-64"

cmake --preset asan-ubsan
cmake --build --preset asan-ubsan -j "$(nproc)"
ctest --preset asan-ubsan
scripts/fuzz.sh "${FUZZ_SECONDS:-60}"
