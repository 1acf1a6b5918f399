#!/usr/bin/env bash
# tribunal export: the short MLP job's final checkpoint in the PyTorch form, read back with numpy alone
# (the safetensors header parsed by hand): names and shapes of nn.Sequential(Linear, ReLU, Linear), the
# Linear weights the checkpoint's transposed, the optimizer's slots and its I64 step, and the first
# element and sum `export --json` printed. A checkpoint of another job, a missing and a truncated file
# are refused with the path (and both job ids) named. Skipped (exit 77) without python3-numpy.
set -euo pipefail
tribunal=$1 src=$2
# The first python3 with numpy: the PATH's, else Debian's (a pyenv or venv python may lack it).
python=
for p in python3 /usr/bin/python3; do
  if "$p" -c "import numpy" 2> /dev/null; then python=$p; break; fi
done
[ -n "$python" ] || { echo "export_cli: skipped, no python3 with numpy (apt install python3-numpy)"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
job=$src/scenarios/jobs/short_mlp.toml
"$tribunal" train "$job" --out "$work/run" --no-eval > /dev/null
"$tribunal" export "$work/run/step_000000030.safetensors" --job "$job" --out "$work/torch" --json > "$work/export.json"

"$python" - "$work/torch" "$work/run/step_000000030.safetensors" "$work/export.json" <<'PY'
import json, struct, sys
import numpy as np

def read(path):
    """safetensors by hand: u64 LE header length, JSON header, raw little-endian data."""
    blob = open(path, "rb").read()
    (n,) = struct.unpack_from("<Q", blob, 0)
    header = json.loads(blob[8:8 + n])
    meta = header.pop("__metadata__", {})
    dtypes = {"F32": "<f4", "I64": "<i8"}
    out = {}
    for name, e in header.items():
        b, end = e["data_offsets"]
        out[name] = np.frombuffer(blob[8 + n + b:8 + n + end], dtype=dtypes[e["dtype"]]).reshape(e["shape"])
    return out, meta, header

model, meta, _ = read(sys.argv[1] + "/model.safetensors")
opt, opt_meta, opt_header = read(sys.argv[1] + "/optimizer.safetensors")
ckpt, ckpt_meta, _ = read(sys.argv[2])
printed = json.load(open(sys.argv[3]))

shapes = {"0.weight": (32, 784), "0.bias": (32,), "2.weight": (10, 32), "2.bias": (10,)}
assert list(model) == list(shapes), list(model)
for name, shape in shapes.items():
    assert model[name].shape == shape, (name, model[name].shape)
    assert model[name].dtype == np.float32
assert np.array_equal(model["0.weight"], ckpt["l0.weight"].T)
assert np.array_equal(model["2.weight"], ckpt["l1.weight"].T)
assert np.array_equal(model["0.bias"], ckpt["l0.bias"])
for layer, ours in (("0", "l0"), ("2", "l1")):
    assert np.array_equal(opt["exp_avg/" + layer + ".weight"], ckpt["adamw.m/" + ours + ".weight"].T)
    assert np.array_equal(opt["exp_avg_sq/" + layer + ".bias"], ckpt["adamw.v/" + ours + ".bias"])
assert sorted(opt) == sorted(["step"] + [s + "/" + n for s in ("exp_avg", "exp_avg_sq") for n in shapes]), sorted(opt)
assert opt_header["step"]["dtype"] == "I64" and opt["step"].shape == () and int(opt["step"]) == 30

assert meta["format"] == "tribunal-pytorch-model-1" and opt_meta["format"] == "tribunal-pytorch-optimizer-1"
assert meta["job_id"] == ckpt_meta["job_id"] == printed["job_id"]
assert meta["state_hash"] == ckpt_meta["state_hash"] == printed["state_hash"]
assert meta["step"] == "30" and opt_meta["optimizer"] == "adamw"
for t in printed["tensors"]:
    arr = (model if t["file"] == "model" else opt)[t["name"]]
    assert list(arr.shape) == t["shape"], t["name"]
    assert float(arr.reshape(-1)[0]) == t["first"], (t["name"], float(arr.reshape(-1)[0]), t["first"])
    assert abs(float(arr.astype(np.float64).sum()) - t["sum"]) <= 1e-9 * max(1.0, abs(t["sum"])), t["name"]
assert float(model["2.bias"][0]) != 0.0
PY

expect_error() {  # expect_error PATTERN ARGS…: exit 1 and PATTERN in the error line
  local pattern=$1; shift
  if "$tribunal" export "$@" > "$work/out.txt" 2> "$work/err.txt"; then echo "export $* succeeded"; exit 1; fi
  grep -q -- "$pattern" "$work/err.txt" || { echo "export $*: expected '$pattern', got:"; cat "$work/err.txt"; exit 1; }
}
id=$("$python" -c "import json,sys; print(json.load(open(sys.argv[1]))['job_id'])" "$work/export.json")
# Another job's file (the fast-mode MLP has another id): refused, naming both ids.
expect_error "a checkpoint of job $id, but .*short_mlp_fast.toml is job [0-9a-f]\{64\}" \
  "$work/run/step_000000030.safetensors" --job "$src/scenarios/jobs/short_mlp_fast.toml" --out "$work/other"
test ! -e "$work/other/model.safetensors"
expect_error "$work/run/step_000000099.safetensors: cannot open" \
  "$work/run/step_000000099.safetensors" --job "$job" --out "$work/missing"
head -c 2000 "$work/run/step_000000030.safetensors" > "$work/cut.safetensors"
expect_error "$work/cut.safetensors: " "$work/cut.safetensors" --job "$job" --out "$work/cut"
# A flipped bit in a tensor: the recorded state_hash no longer matches.
cp "$work/run/step_000000030.safetensors" "$work/flip.safetensors"
printf '\x7f' | dd of="$work/flip.safetensors" bs=1 seek=$(( $(stat -c %s "$work/flip.safetensors") - 100 )) conv=notrunc 2> /dev/null
expect_error "do not match the recorded state_hash" "$work/flip.safetensors" --job "$job" --out "$work/flip"
echo "export_cli: ok"
