#!/usr/bin/env bash
# `tribunal demo --tls-cert --tls-key --tls-ca` on the short MLP job: the referee, both providers and
# the client over wss:// on loopback, with a certificate made here by `openssl req` (no key is
# committed); the cheater must lose at exactly the injected step and node. Then the referee alone over
# TLS: a delegate that trusts another CA is refused in the TLS handshake (exit 5, nothing trained).
#   Usage: demo_tls.sh TRIBUNAL SOURCE_DIR
set -euo pipefail
tribunal=$1
src=$2
work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
cert() {  # NAME: a self-signed P-256 certificate for 127.0.0.1, valid a day
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 -subj "/CN=$1" \
    -addext subjectAltName=IP:127.0.0.1 -keyout "$work/$1.key" -out "$work/$1.pem" 2>/dev/null
}
cert tribunal
cert stranger

out=$("$tribunal" demo --job "$src/scenarios/jobs/short_mlp.toml" --seed 3 --out "$work/demo" --json \
  --tls-cert "$work/tribunal.pem" --tls-key "$work/tribunal.key" --tls-ca "$work/tribunal.pem" 2>/dev/null)
python3 - "$out" <<'PY'
import json, sys
r = json.loads(sys.argv[1])
assert r["referee"].startswith("wss://") and all(p.startswith("wss://") for p in r["providers"]), r
assert r["caught"], r
print("demo over TLS: caught at step", r["verdict"]["step"], "node", r["verdict"]["node"], "(" + r["verdict"]["reason"] + ")",
      "referee", r["referee"])
PY

# A delegate trusting another CA: refused by the TLS handshake of its check of the referee, before any
# provider is given the job: exit 5 with the reason.
"$tribunal" keygen "$work/referee.key" >"$work/referee.pub"
: >"$work/referee.log"
"$tribunal" referee --listen 127.0.0.1:0 --key "$work/referee.key" --data "$work/referee-data" \
  --tls-cert "$work/tribunal.pem" --tls-key "$work/tribunal.key" 2>"$work/referee.log" &
pids+=($!)
for _ in $(seq 100); do
  port=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\) .*wss:.*/\1/p' "$work/referee.log")
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || { cat "$work/referee.log"; exit 1; }
set +e
"$tribunal" delegate "$src/scenarios/jobs/short_mlp.toml" --referee "wss://127.0.0.1:$port/" \
  --referee-key "$(cat "$work/referee.pub")" --provider "wss://127.0.0.1:$port/" --provider "wss://127.0.0.1:$port/" \
  --tls-ca "$work/stranger.pem" >"$work/delegate.out" 2>"$work/delegate.err"
status=$?
set -e
grep -q "certificate verify failed" "$work/delegate.err" || { cat "$work/delegate.err"; exit 1; }
[ "$status" -eq 5 ] || { echo "delegate exited $status, expected 5"; exit 1; }
echo "wrong CA: refused ($(grep -o 'TLS handshake[^;]*' "$work/delegate.err" | head -1))"
