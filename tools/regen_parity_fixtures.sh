#!/usr/bin/env bash
# Regenerates tests/fixtures/parity/{gpt,cnn,onnx_mlp,onnx_cnn,onnx_gpt2,onnx_llama,onnx_resnet,
# onnx_regressor}.safetensors (tests/engine/test_parity.cpp)
# by hand: exports each parity job's initial weights and batches (and an onnx job's dropout masks) with
# our parity_export tool, then runs the same steps in PyTorch (Debian python3-torch; python3-onnx for the
# onnx jobs, whose torch modules are tools/onnx_export.py's) with tools/torch_parity.py. Not part of the
# build or CI.
# Usage: tools/regen_parity_fixtures.sh [BUILD_DIR]   (default build-parity; configures and builds it)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-parity}
python=/usr/bin/python3
"$python" -c "import torch" || { echo "regen_parity_fixtures: $python has no torch (apt install python3-torch)" >&2; exit 1; }
"$python" -c "import onnx" || { echo "regen_parity_fixtures: $python has no onnx (apt install python3-onnx)" >&2; exit 1; }
[ -f "$build/build.ninja" ] || cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build "$build" -j 2 --target parity_export
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p tests/fixtures/parity
for model in gpt cnn; do
  "$build/bench/parity_export" "scenarios/jobs/parity_$model.toml" "$tmp/$model.safetensors"
  "$python" tools/torch_parity.py "$tmp/$model.safetensors" "tests/fixtures/parity/$model.safetensors"
done
# Imported models: the job's model file (tests/fixtures/onnx/<family>.onnx, from tools/onnx_export.py)
# and the torch module it was exported from; the regressor trains on the regression fixture (mse).
for family in mlp:Mlp cnn:Cnn gpt2:Gpt2 llama:Llama resnet:Resnet regressor:Regressor; do
  name=${family%%:*} module=${family##*:}
  onnx=tests/fixtures/onnx/$name.onnx
  "$build/bench/parity_export" "scenarios/jobs/parity_onnx_$name.toml" "$tmp/onnx_$name.safetensors" \
    --model "$name=$onnx" --dataset regression=tests/fixtures/regression
  "$python" tools/torch_parity.py "$tmp/onnx_$name.safetensors" "tests/fixtures/parity/onnx_$name.safetensors" \
    --onnx "$onnx" --module "$module"
done
