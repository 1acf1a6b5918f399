#!/usr/bin/env bash
# The nodes' JSON logs (docs/running.md, "Logs"; issue 34, item 1): a referee, an honest and a cheating
# provider and `tribunal delegate`, all with --log-format json, play a dispute; every line each writes
# on stderr is one JSON object with time (ISO 8601 UTC), level, node and message, and the lines about a
# dispute or a job carry its full id in the fields `dispute` and `job`, matching the id the message
# names. Usage: logs_json.sh PATH/TO/tribunal SOURCE_DIR
set -u
bin=$1
src=$2
source "$(dirname "$0")/daemons.sh"
json=(--log-format json --log-level debug)

referee_pub=$("$bin" keygen "$tmp/referee.key") || fail "keygen"
"$bin" keygen "$tmp/a.key" >/dev/null && "$bin" keygen "$tmp/b.key" >/dev/null || fail "keygen"
rport=$(start_daemon referee "$bin" referee --listen 127.0.0.1:0 --key "$tmp/referee.key" --data "$tmp/referee-data" \
        --allow-network 127.0.0.0/8 "${json[@]}") || exit 1
aport=$(start_daemon honest "$bin" provider --listen 127.0.0.1:0 --key "$tmp/a.key" --store "$tmp/a" \
        --referee-key "$referee_pub" "${json[@]}") || exit 1
bport=$(start_daemon cheater "$bin" provider --listen 127.0.0.1:0 --key "$tmp/b.key" --store "$tmp/b" \
        --referee-key "$referee_pub" --corrupt 12:13 "${json[@]}") || exit 1
"$bin" delegate "$src/scenarios/jobs/short_mlp.toml" --provider "ws://127.0.0.1:$bport/" \
  --provider "ws://127.0.0.1:$aport/" --referee "ws://127.0.0.1:$rport/" --referee-key "$referee_pub" \
  --out "$tmp/verdicts" "${json[@]}" >"$tmp/delegate.out" 2>"$tmp/delegate.log" || fail "delegate failed"
ls "$tmp"/verdicts/verdict-*.bin >/dev/null 2>&1 || fail "no verdict"
sleep 0.5  # the referee's last lines after the verdict went out

python3 - "$tmp" <<'PY' || fail "the JSON log lines"
import json, re, sys
tmp = sys.argv[1]
time_re = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
hex64 = re.compile(r"^[0-9a-f]{64}$")
keyed = {}
for name in ("referee", "honest", "cheater", "delegate"):
    lines = [l for l in open(f"{tmp}/{name}.log", encoding="utf-8").read().split("\n") if l]
    if not lines: sys.exit(f"{name}: no log line")
    counts = {"dispute": 0, "job": 0}
    for n, line in enumerate(lines, 1):
        try:
            j = json.loads(line)
        except ValueError as e:
            sys.exit(f"{name}.log:{n}: not JSON ({e}): {line}")
        for k in ("time", "level", "node", "message"):
            if not isinstance(j.get(k), str): sys.exit(f"{name}.log:{n}: no string {k}: {line}")
        if not time_re.match(j["time"]): sys.exit(f"{name}.log:{n}: time {j['time']!r} is not ISO 8601 UTC")
        if j["level"] not in ("trace", "debug", "info", "warning", "error", "critical"):
            sys.exit(f"{name}.log:{n}: level {j['level']!r}")
        for k in ("dispute", "job"):
            if k in j:
                if not hex64.match(j[k]): sys.exit(f"{name}.log:{n}: {k} {j[k]!r} is not a full id")
                counts[k] += 1
                # A message naming a short id names this one.
                m = re.search(rf"\b{k} ([0-9a-f]{{12,64}})\b", j["message"])
                if m and not j[k].startswith(m.group(1)):
                    sys.exit(f"{name}.log:{n}: field {k} {j[k]} but the message names {m.group(1)}")
        if re.search(r"referee: dispute [0-9a-f]+ round \d+", j["message"]) and "dispute" not in j:
            sys.exit(f"{name}.log:{n}: a dispute's round without its dispute field: {line}")
        if re.search(r"training job [0-9a-f]+", j["message"]) and "job" not in j:
            sys.exit(f"{name}.log:{n}: a training line without its job field: {line}")
    keyed[name] = counts
want = {"referee": ("dispute", "job"), "honest": ("dispute", "job"), "cheater": ("dispute", "job"), "delegate": ("dispute", "job")}
for name, kinds in want.items():
    for k in kinds:
        if keyed[name][k] == 0: sys.exit(f"{name}: no line keyed by {k} ({keyed[name]})")
print("JSON log lines checked:", keyed)
PY
exit 0
