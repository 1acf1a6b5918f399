#!/usr/bin/env bash
# Builds `tribunal` in several configurations and checks that the short job's trajectory root is
# bitwise identical in all of them (RepOps contract, docs/numerics.md).
#
#   scripts/check_roots.sh [CONFIG...]     CONFIG = "compiler flags…", e.g. "clang++ -O0 -march=x86-64"
#
# With no CONFIG it checks the full matrix: {g++, clang++} × {-O0, -O3} × {-march=x86-64, -march=native}.
# Each configuration builds in build/roots/<name>; prints one line per configuration, exits 1 on a mismatch.
set -euo pipefail
cd "$(dirname "$0")/.."

job=scenarios/jobs/short_mlp.toml
if [ $# -eq 0 ]; then
  set --
  for cxx in g++ clang++; do
    for opt in -O0 -O3; do
      for march in -march=x86-64 -march=native; do set -- "$@" "$cxx $opt $march"; done
    done
  done
fi

jobs=$(nproc)
first=""
status=0
for config in "$@"; do
  read -r cxx flags <<<"$config"
  name=$(echo "$config" | tr -c 'A-Za-z0-9+\n' '_')
  dir=build/roots/$name
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_CXX_FLAGS="$flags" \
    -DTRIBUNAL_BUILD_TESTS=OFF -DTRIBUNAL_BUILD_BENCH=OFF >/dev/null
  cmake --build "$dir" --target tribunal -j "$jobs" >/dev/null
  out=$(mktemp -d)
  root=$("$dir/apps/tribunal" train "$job" --out "$out" --json | tail -n1 |
         python3 -c 'import json, sys; print(json.load(sys.stdin)["trajectory_root"])')
  rm -rf "$out"
  first=${first:-$root}
  if [ "$root" = "$first" ]; then mark=same; else mark=DIFFERENT; status=1; fi
  printf '%-40s %s %s\n' "$config" "$root" "$mark"
done
exit $status
