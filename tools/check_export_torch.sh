#!/usr/bin/env bash
# `tribunal export` in PyTorch, by hand (Debian python3-torch; not part of the build or CI): for the
# parity GPT and CNN jobs and the short MLP job, trains to step T − 1, resumes to T, exports both
# checkpoints and runs tools/torch_export_check.py, which loads the step T − 1 export into the reference
# torch module (load_state_dict(strict=True)) and torch.optim.AdamW, and checks that torch computes the
# loss the run reported for step T − 1 and the weights and moments of the step T export.
# Usage: tools/check_export_torch.sh [BUILD_DIR]   (default build/release; builds tribunal, parity_export)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/release}
python=/usr/bin/python3
"$python" -c "import torch" || { echo "check_export_torch: $python has no torch (apt install python3-torch)" >&2; exit 1; }
cmake --build "$build" -j 2 --target tribunal parity_export
tribunal=$build/apps/tribunal
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for job in parity_gpt parity_cnn short_mlp; do
  file=scenarios/jobs/$job.toml
  steps=$(sed -n 's/^steps = \([0-9]*\).*/\1/p' "$file")
  "$tribunal" train "$file" --steps $((steps - 1)) --out "$tmp/$job" --no-eval > /dev/null
  "$tribunal" train "$file" --resume --out "$tmp/$job" --no-eval > /dev/null
  for t in $((steps - 1)) "$steps"; do
    "$tribunal" export "$(printf '%s/%s/step_%09d.safetensors' "$tmp" "$job" "$t")" --job "$file" \
      --out "$tmp/$job.export$t" > /dev/null
  done
  "$build/bench/parity_export" "$file" "$tmp/$job.batches.safetensors" > /dev/null
  "$python" tools/torch_export_check.py "$tmp/$job.batches.safetensors" "$tmp/$job.export$((steps - 1))" \
    "$tmp/$job.export$steps"
done
