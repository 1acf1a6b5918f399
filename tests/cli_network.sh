#!/usr/bin/env bash
# The daemons as a user runs them: keygen, a referee, an honest and a cheating provider, delegate,
# and offline verification of the verdict. Usage: cli_network.sh PATH/TO/tribunal SOURCE_DIR
set -u
bin=$1
src=$2
tmp=$(mktemp -d)
cleanup() {
  for f in "$tmp"/*.pid; do [ -f "$f" ] && kill -TERM "$(cat "$f")" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; for f in "$tmp"/*.log; do echo "== $f"; cat "$f"; done; exit 1; }

# Starts a daemon and waits for its "listening on HOST:PORT" line; prints the port. (It runs in a
# command substitution, so its output must not go to our stdout, and its pid goes to a file.)
start() {
  local name=$1
  shift
  "$bin" "$@" >"$tmp/$name.out" 2>"$tmp/$name.log" &
  echo $! >"$tmp/$name.pid"
  for _ in $(seq 100); do
    port=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$tmp/$name.log")
    [ -n "$port" ] && { echo "$port"; return; }
    sleep 0.1
  done
  fail "$name did not start"
}

referee_pub=$("$bin" keygen "$tmp/referee.key") || fail "keygen"
"$bin" keygen "$tmp/a.key" >/dev/null && "$bin" keygen "$tmp/b.key" >/dev/null || fail "keygen"
rport=$(start referee referee --listen 127.0.0.1:0 --key "$tmp/referee.key" --data "$tmp/referee-data" \
        --allow-network 127.0.0.0/8)
aport=$(start honest provider --listen 127.0.0.1:0 --key "$tmp/a.key" --store "$tmp/a" --referee-key "$referee_pub")
bport=$(start cheater provider --listen 127.0.0.1:0 --key "$tmp/b.key" --store "$tmp/b" --referee-key "$referee_pub" \
        --corrupt 12:13)

out=$("$bin" delegate "$src/scenarios/jobs/short_mlp.toml" --provider "ws://127.0.0.1:$bport/" \
      --provider "ws://127.0.0.1:$aport/" --referee "ws://127.0.0.1:$rport/" --referee-key "$referee_pub" \
      --out "$tmp/verdicts" 2>"$tmp/delegate.log")
rc=$?
[ "$rc" -eq 0 ] || fail "delegate exited $rc: $out"
echo "$out" | grep -q "accepted: the claim of ws://127.0.0.1:$aport/" || fail "the honest claim did not stand: $out"
verdict=$(ls "$tmp"/verdicts/verdict-*.bin) || fail "no verdict file"
"$bin" verify "$verdict" --referee-key "$referee_pub" >"$tmp/verify.out" || fail "verify rejected the verdict"
grep -q "outcome: claim 1 stands (wrong_output)" "$tmp/verify.out" || fail "unexpected verdict: $(cat "$tmp/verify.out")"
grep -q "located: level 3, step 12, node 13" "$tmp/verify.out" || fail "wrong location: $(cat "$tmp/verify.out")"
# Another referee key, or a flipped byte, must not verify.
other=$("$bin" keygen "$tmp/other.key")
"$bin" verify "$verdict" --referee-key "$other" >/dev/null 2>&1 && fail "verified with the wrong referee key"
python3 -c "import sys; b=bytearray(open(sys.argv[1],'rb').read()); b[len(b)//2]^=1; open(sys.argv[1]+'.bad','wb').write(b)" "$verdict"
"$bin" verify "$verdict.bad" --referee-key "$referee_pub" >/dev/null 2>&1 && fail "verified a corrupted verdict"
# Without the referee's key a verdict proves nothing: verify refuses to call it valid.
"$bin" verify "$verdict" >"$tmp/nokey.out" 2>&1
[ $? -eq 2 ] && grep -q "referee-key HEX is required" "$tmp/nokey.out" || fail "verify without --referee-key: $(cat "$tmp/nokey.out")"
echo "ok: delegate → dispute → verdict verified offline"
