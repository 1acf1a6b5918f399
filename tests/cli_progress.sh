#!/usr/bin/env bash
# Progress and results a person or a script can follow (docs/running.md, "Progress", "Results as
# JSON"): `train` redirected to a file logs progress lines at a steady interval and writes losses.csv
# as it trains; a provider logs its training's progress; `delegate` logs which providers still train,
# each one's step from its /metrics and the dispute's level from the referee's /disputes.json, and
# prints one JSON object with --json, as `verify`, `report` and `keygen` do; a referee configured
# from TRIBUNAL_* environment variables alone. Usage: cli_progress.sh PATH/TO/tribunal SOURCE_DIR
set -u
bin=$1
src=$2
source "$(dirname "$0")/daemons.sh"
start() { start_daemon "$1" "$bin" "${@:2}"; }
# json FILE EXPR: EXPR (Python, `j` the object in FILE) printed; fails when FILE is not one JSON object.
json() { python3 -c 'import json, sys; j = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }

# A job long enough to be watched: short_mlp's model and optimizer, 6000 steps in one stride, so a
# dispute at step 1900 has its providers commit to all 6000 steps at level 2 for seconds while the
# delegate watches (with a stride of 1000 a dispute took 0.97 s on a Zen 5 machine, under the 1 s
# between the delegate's lines).
sed -e 's/^steps = .*/steps = 6000/' -e 's/^stride = .*/stride = 6000/' "$src/scenarios/jobs/short_mlp.toml" >"$tmp/long.toml"
sed -e 's/^steps = .*/steps = 10000000/' -e 's/^stride = .*/stride = 1000000/' "$src/scenarios/jobs/short_mlp.toml" \
  >"$tmp/endless.toml"

# 1. train, stderr to a file: a line at the first step, then every --progress-seconds; losses.csv
# grows while the run trains (it is still running when its lines are read).
"$bin" train "$tmp/endless.toml" --out "$tmp/run" --no-eval --progress-seconds 1 >"$tmp/train.out" 2>"$tmp/train.err" &
train_pid=$!
echo "$train_pid" >"$tmp/train.pid"
for _ in $(seq 300); do
  [ "$(grep -c '^train: step' "$tmp/train.err")" -ge 3 ] && [ "$(grep -c . "$tmp/run/losses.csv" 2>/dev/null)" -ge 21 ] && break
  kill -0 "$train_pid" 2>/dev/null || fail "train exited early: $(cat "$tmp/train.err")"
  sleep 0.1
done
kill -0 "$train_pid" 2>/dev/null || fail "train is no longer running"
lines=$(grep -c '^train: step' "$tmp/train.err")
[ "$lines" -ge 3 ] || fail "train redirected: $lines progress lines after 30 s (want 3 at 1 s intervals): $(cat "$tmp/train.err")"
grep -qE '^train: step 1/10000000 \(0\.0 %\), elapsed [0-9.]+ s, loss [0-9]+\.[0-9]{4}$' "$tmp/train.err" ||
  fail "no first-step line: $(head -n1 "$tmp/train.err")"
grep -qE '^train: step [0-9]+/10000000 \([0-9.]+ %\), [0-9.]+ steps/s, elapsed [0-9.:]+( s)?, ETA [0-9:.]+( s)?, loss [0-9]+\.[0-9]{4}$' \
  "$tmp/train.err" || fail "no line with rate and ETA: $(cat "$tmp/train.err")"
[ "$(head -n1 "$tmp/run/losses.csv")" = "step,loss" ] && sed -n 2p "$tmp/run/losses.csv" | grep -qE '^0,[0-9.]+$' ||
  fail "losses.csv while training: $(head -n3 "$tmp/run/losses.csv")"
grep -qE '^[0-9]+,' "$tmp/run/resources.csv" || fail "resources.csv while training: $(head -n3 "$tmp/run/resources.csv")"
kill -TERM "$train_pid"
wait "$train_pid" 2>/dev/null
echo "ok   train redirected: $lines progress lines, $(($(grep -c . "$tmp/run/losses.csv") - 1)) losses while it trained"

# 2. A network: the referee from the environment alone (a near-clock-end threshold of 5 s included), an
# honest and a cheating provider.
referee_pub=$("$bin" keygen "$tmp/referee.key") || fail "keygen"
"$bin" keygen --json "$tmp/a.key" >"$tmp/keygen.json" || fail "keygen --json"
[ "$(json "$tmp/keygen.json" 'j["file"]')" = "$tmp/a.key" ] && [ "$(json "$tmp/keygen.json" 'len(j["public_key"])')" = 64 ] ||
  fail "keygen --json: $(cat "$tmp/keygen.json")"
"$bin" keygen "$tmp/b.key" >/dev/null || fail "keygen"
rport=$(TRIBUNAL_LISTEN=127.0.0.1:0 TRIBUNAL_KEY="$tmp/referee.key" TRIBUNAL_DATA="$tmp/referee-data" \
        TRIBUNAL_NEAR_CLOCK_END_SECONDS=5 start referee referee --allow-network 127.0.0.0/8) || exit 1
[ -f "$tmp/referee-data/referee.sqlite" ] || fail "TRIBUNAL_DATA was not used"
python3 -c 'import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())' \
  "http://127.0.0.1:$rport/metrics" >"$tmp/referee.metrics" || fail "GET /metrics of the referee"
grep -q '^# HELP tribunal_referee_disputes_near_clock_end Undecided disputes whose awaited party has under 5 seconds left' \
  "$tmp/referee.metrics" || fail "TRIBUNAL_NEAR_CLOCK_END_SECONDS was not used: $(grep near_clock "$tmp/referee.metrics")"
aport=$(start honest provider --listen 127.0.0.1:0 --key "$tmp/a.key" --store "$tmp/a" --referee-key "$referee_pub") || exit 1
bport=$(TRIBUNAL_REFEREE_KEY="$referee_pub" start cheater provider --listen 127.0.0.1:0 --key "$tmp/b.key" --store "$tmp/b" \
        --corrupt 1900:13) || exit 1

"$bin" delegate "$tmp/long.toml" --provider "ws://127.0.0.1:$bport/" --provider "ws://127.0.0.1:$aport/" \
  --referee "ws://127.0.0.1:$rport/" --referee-key "$referee_pub" --out "$tmp/verdicts" --json --progress-seconds 1 \
  >"$tmp/delegate.json" 2>"$tmp/delegate.log"
rc=$?
[ "$rc" -eq 0 ] || fail "delegate --json exited $rc: $(cat "$tmp/delegate.json")"
[ "$(grep -c . "$tmp/delegate.json")" -eq 1 ] || fail "delegate --json: not one line: $(cat "$tmp/delegate.json")"
[ "$(json "$tmp/delegate.json" 'j["outcome"], j["winner"], j["exit_code"], len(j["verdicts"]), len(j["claims"])')" = \
  "('accepted', 'ws://127.0.0.1:$aport/', 0, 1, 2)" ] || fail "delegate --json: $(cat "$tmp/delegate.json")"
[ -f "$(json "$tmp/delegate.json" 'j["delivered"]["model"]')" ] || fail "delegate --json: no delivered model: $(cat "$tmp/delegate.json")"
# While the providers trained: which were still training, every second (this job takes seconds).
grep -qE "delegate: job [0-9a-f]{16}: [01] of 2 claims in after [0-9.]+ s; still training: ws://127.0.0.1:" "$tmp/delegate.log" ||
  fail "delegate: no progress line while the providers trained: $(cat "$tmp/delegate.log")"
# Each provider logs its training's progress: the first step and the last at least.
for p in honest cheater; do
  grep -qE "provider [0-9a-f]{8}: job [0-9a-f]{12}: step 1/6000 \(0\.0 %\), elapsed" "$tmp/$p.log" &&
    grep -qE "provider [0-9a-f]{8}: job [0-9a-f]{12}: step 6000/6000 \(100\.0 %\), [0-9.]+ steps/s, elapsed .*, loss" "$tmp/$p.log" ||
    fail "$p: no training progress in its log"
done
# The delegate shows each provider's step from its /metrics (step ≤ 6000, a rate, an ETA) and the
# dispute's level and round from the referee's /disputes.json, never going back.
grep -E "delegate: provider ws://127\.0\.0\.1:($aport|$bport)/ step [0-9]+/6000, [0-9.]+ steps/s, ETA [0-9:.]+( s)?$" "$tmp/delegate.log" \
  >"$tmp/training.lines" || fail "delegate: no provider step line: $(cat "$tmp/delegate.log")"
grep -E "delegate: dispute [0-9a-f]{16} level [123] \([a-z_]+\), round [0-9]+" "$tmp/delegate.log" >"$tmp/level.lines" ||
  fail "delegate: no dispute level line: $(cat "$tmp/delegate.log")"
python3 - "$tmp/training.lines" "$tmp/level.lines" <<'PY' || fail "delegate: implausible progress lines: $(cat "$tmp/training.lines" "$tmp/level.lines")"
import re, sys
steps = [int(m.group(1)) for m in map(re.compile(r"step (\d+)/6000").search, open(sys.argv[1]))]
assert steps and all(0 <= s <= 6000 for s in steps), steps
levels = [(int(m.group(1)), int(m.group(2))) for m in map(re.compile(r"level (\d) \(\w+\), round (\d+)").search, open(sys.argv[2]))]
assert levels == sorted(levels) and levels[0][1] >= 1, levels  # the dispute narrows: never back
PY
echo "ok   delegate --json: $(json "$tmp/delegate.json" 'j["outcome"]'), $(grep -c 'still training' "$tmp/delegate.log") progress line(s), $(grep -c . "$tmp/training.lines") provider step line(s), $(grep -c . "$tmp/level.lines") dispute level line(s)"

# 3. verify --json and report --json of the verdict.
verdict=$(json "$tmp/delegate.json" 'j["verdicts"][0]')
"$bin" verify "$verdict" --referee-key "$referee_pub" --json >"$tmp/verify.json" || fail "verify --json"
[ "$(json "$tmp/verify.json" 'j["outcome"], j["winners"], j["reason"], j["level"], j["step"], j["node"], j["op"]')" = \
  "('claim stands', [1], 'wrong_output', 3, 1900, 13, 'adamw')" ] || fail "verify --json: $(cat "$tmp/verify.json")"
"$bin" report "$verdict" --out "$tmp/report.html" --json >"$tmp/report.json" || fail "report --json"
dispute=$(json "$tmp/verify.json" 'j["dispute_id"]')
[ "$(json "$tmp/report.json" 'j["out"], j["dispute_id"]')" = "('$tmp/report.html', '$dispute')" ] && [ -s "$tmp/report.html" ] || fail "report --json: $(cat "$tmp/report.json")"
echo "ok   verify --json and report --json: $(json "$tmp/verify.json" 'j["reason"]') at step $(json "$tmp/verify.json" 'j["step"]')"
