#!/usr/bin/env bash
# Jobs trained with `tribunal train --device DEVICE` (every op of every step a CUDA kernel: on a GPU for
# `cuda`, in the host SIMT emulation for `cuda-emulated`, docs/cuda.md) must commit the trajectory roots
# pinned in the given files (default tests/fixtures/golden_roots.txt; lines: job file, root).
# Usage: device_roots.sh PATH/TO/tribunal SOURCE_DIR DEVICE [ROOTS_FILE ...] (extra train flags in
# TRAIN_FLAGS, e.g. "--threads 8")
set -euo pipefail
bin=$1
cd "$2"
device=$3
shift 3
[ $# -gt 0 ] || set -- tests/fixtures/golden_roots.txt
models=()  # the imported models' jobs name their files (tests/fixtures/onnx/)
for f in tests/fixtures/onnx/*.onnx; do models+=(--model "$(basename "$f" .onnx)=$f"); done
models+=(--dataset regression=tests/fixtures/regression)  # the mse job's data set (short_onnx_mse.toml)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
for roots in "$@"; do
  while read -r job golden; do
    case $job in '' | '#'*) continue ;; esac
    # shellcheck disable=SC2086  # TRAIN_FLAGS is a list of flags
    root=$("$bin" train "$job" --device "$device" "${models[@]}" ${TRAIN_FLAGS:-} --out "$tmp/$(basename "$job" .toml)" --json \
      --no-eval | tail -n1 | python3 -c 'import json, sys; print(json.load(sys.stdin)["trajectory_root"])')
    if [ "$root" = "$golden" ]; then
      echo "ok   $job on $device: $root (pinned)"
    else
      echo "FAIL $job on $device: $root, pinned $golden"
      status=1
    fi
  done <"$roots"
done
exit $status
