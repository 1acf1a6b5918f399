#!/usr/bin/env bash
# SIGTERM stops a training provider within seconds (issue 28, hole 5): a `tribunal provider` process
# trains a long job submitted by `tribunal delegate`; on SIGTERM it stops between two steps, keeps only
# whole checkpoints in STORE/<job_id>/ and exits 0. Usage: provider_sigterm.sh PATH/TO/tribunal SOURCE_DIR
set -u
bin=$1
src=$2
source "$(dirname "$0")/daemons.sh"

referee_pub=$("$bin" keygen "$tmp/referee.key") || fail "keygen"
"$bin" keygen "$tmp/p.key" >/dev/null || fail "keygen"
# A real referee: the delegate checks it before any provider is given the job (docs/protocol.md,
# "Checking the referee"); no dispute is played here.
rport=$(start_daemon referee "$bin" referee --listen 127.0.0.1:0 --key "$tmp/referee.key" --data "$tmp/referee-data" \
  --allow-network 127.0.0.0/8) || exit 1
# Started here, not by start_daemon (a subshell), so that `wait` gets its exit status.
"$bin" provider --listen 127.0.0.1:0 --key "$tmp/p.key" --store "$tmp/store" --referee-key "$referee_pub" \
  >"$tmp/provider.out" 2>"$tmp/provider.log" &
pid=$!
echo $pid >"$tmp/provider.pid"
for _ in $(seq 300); do
  port=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$tmp/provider.log")
  [[ "$port" =~ ^[1-9][0-9]*$ ]] && break
  sleep 0.1
done
[[ "$port" =~ ^[1-9][0-9]*$ ]] || fail "the provider did not start"
# The short MLP for 200000 steps: minutes of training, far longer than this test waits.
sed 's/^steps = 30$/steps = 200000/' "$src/scenarios/jobs/short_mlp.toml" >"$tmp/long.toml"
grep -q "^steps = 200000$" "$tmp/long.toml" || fail "cannot make the long job"
# Both "providers" are this one: the second submission of the job shares the first's run.
"$bin" delegate "$tmp/long.toml" --provider "ws://127.0.0.1:$port/" --provider "ws://127.0.0.1:$port/" \
  --referee "ws://127.0.0.1:$rport/" --referee-key "$referee_pub" --out "$tmp/verdicts" >"$tmp/delegate.out" 2>"$tmp/delegate.log" &
echo $! >"$tmp/delegate.pid"
for _ in $(seq 300); do
  grep -q "training job" "$tmp/provider.log" && break
  sleep 0.1
done
grep -q "training job" "$tmp/provider.log" || fail "the provider did not start training"
sleep 1  # a few steps and checkpoints
# Its training progress on /metrics (docs/running.md, "Monitoring"): the step it reached, the job's T
# and a positive rate.
python3 - "$port" <<'PY' || fail "the provider's progress gauges"
import re, sys, urllib.request
text = urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics", timeout=10).read().decode()
def value(name):
    m = re.search(rf"^{name} (\S+)$", text, re.M)
    if not m: sys.exit(f"no {name}")
    return float(m.group(1))
step, total, rate = (value(f"tribunal_provider_training_{n}") for n in ("step", "job_steps", "steps_per_second"))
if not (0 < step < total == 200000 and rate > 0): sys.exit(f"step {step} of {total} at {rate}/s")
print(f"progress on /metrics: step {step:.0f} of {total:.0f}, {rate:.0f} steps/s")
PY
start=$(date +%s.%N)
kill -TERM "$pid"
for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
kill -0 "$pid" 2>/dev/null && fail "the provider still runs 5 s after SIGTERM"
wait "$pid"
rc=$?
rm -f "$tmp/provider.pid"
elapsed=$(echo "$(date +%s.%N) - $start" | bc)
[ "$rc" -eq 0 ] || fail "the provider exited $rc after SIGTERM"
grep -qE "training of job [0-9a-f]+ stopped at step [0-9]+ of 200000 \(the provider is shutting down\)" "$tmp/provider.log" ||
  fail "no log line of the stopped training"
ls "$tmp"/store/*/step_*.safetensors >/dev/null 2>&1 || fail "no checkpoint kept"
ls "$tmp"/store/*/*.tmp >/dev/null 2>&1 && fail "a half-written checkpoint was left"
echo "provider exited $rc ${elapsed}s after SIGTERM"
exit 0
