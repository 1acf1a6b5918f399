#!/usr/bin/env bash
# tribunal audit on a short honest run (every check but the timing-dependent resource check passes) and on the same run with its loss
# log cut short and with its losses halved (exit 1, the check named fails); the tolerance verifier on
# the fast-mode job (calibration written, run accepted).
set -euo pipefail
tribunal=$1 src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$tribunal" train "$src/scenarios/jobs/short_mlp.toml" --out "$work/run" --no-eval > /dev/null
# Exit 0 unless a check fails. The resource check reads CPU-time samples measured while this test
# trained, which a loaded machine makes noisy (docs/verifiers.md: it can flag an honest run), so its
# verdict is not asserted here (test_verifiers tests it on fixed samples); every other check must pass.
"$tribunal" audit "$work/run" --job "$src/scenarios/jobs/short_mlp.toml" --json > "$work/ok.json" || true
python3 - "$work/ok.json" <<'PY'
import json, sys
checks = {c["name"]: c for c in json.load(open(sys.argv[1]))["checks"]}
assert sorted(checks) == ["loss_count", "pev", "resource_utilisation", "vmo"], sorted(checks)
for name in ("loss_count", "pev", "vmo"):
    assert checks[name]["passed"], (name, checks[name]["detail"])
assert checks["resource_utilisation"]["figures"]["samples"] == 30
PY

cp "$work/run/losses.csv" "$work/losses.orig"
head -n 30 "$work/losses.orig" > "$work/run/losses.csv"   # header + 29 of 30 losses
if "$tribunal" audit "$work/run" --job "$src/scenarios/jobs/short_mlp.toml" > "$work/cut.txt"; then
  echo "a loss log with a missing step passed"; exit 1
fi
grep -q '^loss_count .*FAIL .*29 losses logged' "$work/cut.txt"

awk -F, 'NR == 1 { print; next } { printf "%s,%.9g\n", $1, $2 / 2 }' "$work/losses.orig" > "$work/run/losses.csv"
if "$tribunal" audit "$work/run" --job "$src/scenarios/jobs/short_mlp.toml" > "$work/half.txt"; then
  echo "halved losses passed"; exit 1
fi
grep -q '^pev .*FAIL' "$work/half.txt"

"$tribunal" train "$src/scenarios/jobs/short_mlp_fast.toml" --out "$work/fast" --float32-gemm reversed --no-eval > /dev/null
"$tribunal" audit "$work/fast" --job "$src/scenarios/jobs/short_mlp_fast.toml" --tolerance --sample-fraction 1 \
  --calibration "$work/cal.json" --kernel naive/0 > "$work/tol.txt"
grep -q '^boundary' "$work/tol.txt"
test -s "$work/cal.json"
echo "audit_cli: ok"
