#!/usr/bin/env bash
# The short jobs of tests/fixtures/golden_roots.txt trained with `tribunal train --device cuda-emulated`
# (every op of every step a CUDA kernel in the host SIMT emulation, docs/cuda.md) must commit their
# golden trajectory roots. Usage: emulated_roots.sh PATH/TO/tribunal SOURCE_DIR
set -euo pipefail
bin=$1
cd "$2"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
while read -r job golden; do
  case $job in '' | '#'*) continue ;; esac
  root=$("$bin" train "$job" --device cuda-emulated --out "$tmp/$(basename "$job" .toml)" --json --no-eval |
    tail -n1 | python3 -c 'import json, sys; print(json.load(sys.stdin)["trajectory_root"])')
  if [ "$root" = "$golden" ]; then
    echo "ok   $job on cuda-emulated: $root (golden)"
  else
    echo "FAIL $job on cuda-emulated: $root, golden $golden"
    status=1
  fi
done <tests/fixtures/golden_roots.txt
exit $status
