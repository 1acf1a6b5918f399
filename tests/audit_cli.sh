#!/usr/bin/env bash
# tribunal audit on a short honest run (exit 0, every check passes) and on the same run with its loss
# log cut short and with its losses halved (exit 1, the check named fails); the tolerance verifier on
# the fast-mode job (calibration written, run accepted).
set -euo pipefail
tribunal=$1 src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$tribunal" train "$src/scenarios/jobs/short_mlp.toml" --out "$work/run" --no-eval > /dev/null
"$tribunal" audit "$work/run" --job "$src/scenarios/jobs/short_mlp.toml" --json > "$work/ok.json"
grep -q '"passed":true' "$work/ok.json"

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
