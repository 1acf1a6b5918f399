#!/usr/bin/env bash
# The README's walk-through ("Your data, your pretrained weights, a verified model back") as a user
# runs it: a .npy data set of one's own, pre-training, the export as pretrained weights, a fine-tuning
# job delegated to an honest and a cheating provider under a referee, and the delivered
# model.safetensors read with numpy alone. Checks that the cheater is convicted (wrong_output), that
# the delivered model's state hash is that of the same job trained locally, and that numpy computes
# the test accuracy `tribunal train` reports. Skipped (exit 77) without python3-numpy.
# Usage: own_data.sh PATH/TO/tribunal SOURCE_DIR
set -u
bin=$1
src=$2
ex=$src/examples/own_data
python=""
for p in python3 /usr/bin/python3; do
  if "$p" -c "import numpy" 2>/dev/null; then python=$p; break; fi
done
[ -n "$python" ] || { echo "own_data: skipped, no python3 with numpy (apt install python3-numpy)"; exit 77; }
source "$src/tests/daemons.sh"
start() { start_daemon "$1" "$bin" "${@:2}"; }
cd "$tmp" || fail "no temporary directory"

"$python" "$ex/make_blobs.py" mine || fail "make_blobs.py"
"$bin" train "$ex/pretrain.toml" --dataset mine=mine --out run0 --json >pre.json 2>pre.log || fail "pre-training"
"$bin" export run0/step_000000040.safetensors --job "$ex/pretrain.toml" --dataset mine=mine --out pre >export.out ||
  fail "export: $(cat export.out)"
data=(--dataset mine=mine --weights pre=pre/model.safetensors)

referee_pub=$("$bin" keygen referee.key) || fail "keygen"
"$bin" keygen a.key >/dev/null && "$bin" keygen b.key >/dev/null || fail "keygen"
rport=$(start referee referee --listen 127.0.0.1:0 --key referee.key --data referee-data \
  --allow-network 127.0.0.0/8 --weights pre=pre/model.safetensors) || exit 1
aport=$(start honest provider --listen 127.0.0.1:0 --key a.key --store store-a --referee-key "$referee_pub" \
  "${data[@]}") || exit 1
bport=$(start cheater provider --listen 127.0.0.1:0 --key b.key --store store-b --referee-key "$referee_pub" \
  "${data[@]}" --corrupt 12:13) || exit 1
"$bin" delegate "$ex/finetune.toml" --provider "ws://127.0.0.1:$bport/" --provider "ws://127.0.0.1:$aport/" \
  --referee "ws://127.0.0.1:$rport/" --referee-key "$referee_pub" "${data[@]}" --out out >delegate.out 2>delegate.log ||
  fail "delegate exited $?: $(cat delegate.out)"
grep -q "accepted: the claim of ws://127.0.0.1:$aport/" delegate.out || fail "the honest claim did not stand: $(cat delegate.out)"
"$python" -c 'import json, sys; r = json.load(open("out/result.json")); sys.exit(r["verdicts"][0]["reason"] != "wrong_output")' ||
  fail "the verdict is not wrong_output: $(cat out/result.json)"

# The same job trained here: the delivered state is its final state, and numpy's accuracy is its accuracy.
"$bin" train "$ex/finetune.toml" "${data[@]}" --out run1 --json >local.json 2>local.log || fail "local training"
want_hash=$("$python" -c 'import json; print(json.load(open("local.json"))["final_state_hash"])')
got_hash=$("$python" -c 'import json; print(json.load(open("out/result.json"))["final_state_hash"])')
[ "$want_hash" = "$got_hash" ] || fail "delivered state hash $got_hash, trained here $want_hash"
want_acc=$("$python" -c 'import json; print("test accuracy", json.load(open("local.json"))["test_accuracy"])')
got_acc=$("$python" "$ex/load_model.py") || fail "load_model.py"
[ "$want_acc" = "$got_acc" ] || fail "numpy: '$got_acc', tribunal train: '$want_acc'"
echo "ok: own data, pretrained weights, cheater convicted, delivered model verified ($got_acc)"
