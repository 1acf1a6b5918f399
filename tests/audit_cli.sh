#!/usr/bin/env bash
# tribunal audit on a short honest run (every check but the timing-dependent resource check passes) and on the same run with its loss
# log cut short and with its losses halved (exit 1, the check named fails); the tolerance verifier on
# the fast-mode job (calibration written, run accepted).
set -euo pipefail
tribunal=$1 src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$tribunal" train "$src/scenarios/jobs/short_mlp.toml" --out "$work/run" --no-eval --json > "$work/short.json"
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
# A run folder or checkpoints of another job are refused, naming both job ids: the audit of one job
# on another's run, and a dispute report drawing another job's loss curve.
sed 's/^seed = 11$/seed = 12/' "$src/scenarios/jobs/short_mlp.toml" > "$work/other.toml"
grep -q '^seed = 12$' "$work/other.toml"
other_id=$("$tribunal" train "$work/other.toml" --out "$work/other" --no-eval --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["job_id"])')
short_id=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["job_id"])' "$work/short.json")
[ ${#other_id} -eq 64 ] && [ ${#short_id} -eq 64 ] && [ "$other_id" != "$short_id" ]
if "$tribunal" audit "$work/other" --job "$src/scenarios/jobs/short_mlp.toml" > /dev/null 2> "$work/other_audit.txt"; then
  echo "an audit of another job's run passed"; exit 1
fi
grep -q "^tribunal: error: audit: $work/other holds checkpoints of job $other_id (step_000000000.safetensors), not of job $short_id\$" "$work/other_audit.txt" ||
  { echo "audit of another job's run:"; cat "$work/other_audit.txt"; exit 1; }
demo=$("$tribunal" demo --job "$src/scenarios/jobs/short_mlp.toml" --seed 1 --out "$work/demo" --json 2>/dev/null)
read -r verdict key honest < <(python3 -c 'import json, sys; r = json.loads(sys.argv[1])
print(r["verdict"]["file"], r["referee_key"], r["stores"][0])' "$demo")
"$tribunal" report "$verdict" --referee-key "$key" --checkpoints "$honest" --out "$work/ok.html" > /dev/null
if "$tribunal" report "$verdict" --referee-key "$key" --checkpoints "$work/other" --out "$work/other.html" 2> "$work/other_report.txt"; then
  echo "a report drew another job's checkpoints"; exit 1
fi
grep -q "^tribunal: error: report --checkpoints (of the disputed job): $work/other holds checkpoints of job $other_id (step_000000000.safetensors), not of job $short_id\$" "$work/other_report.txt" ||
  { echo "report with another job's checkpoints:"; cat "$work/other_report.txt"; exit 1; }
test ! -e "$work/other.html"
echo "audit_cli: ok"
