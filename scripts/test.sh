#!/usr/bin/env bash
# Installs what is missing, builds (release preset), runs every test suite, then checks that a second
# configuration (clang++, portable -march, -O0) commits the same trajectory root as the release build.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/bootstrap.sh
cmake --preset release
cmake --build --preset release -j "$(nproc)"
ctest --preset release
scripts/check_roots.sh "g++ -O3 -march=native" "clang++ -O0 -march=x86-64"
