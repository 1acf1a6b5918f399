#!/usr/bin/env bash
# The daemons as a user runs them: keygen, a referee, an honest and a cheating provider, delegate,
# and offline verification of the verdict. Usage: cli_network.sh PATH/TO/tribunal SOURCE_DIR
set -u
bin=$1
src=$2
source "$(dirname "$0")/daemons.sh"
# start NAME ARGS...: `tribunal ARGS` as a daemon (start_daemon in daemons.sh).
start() { start_daemon "$1" "$bin" "${@:2}"; }

# expect_refusal WHAT PATTERN -- ARGS...: `tribunal ARGS` must exit 1 (a refusal, not a crash or a
# usage error) with one stderr line matching PATTERN.
expect_refusal() {
  local what=$1 pattern=$2 rc
  shift 3
  "$bin" "$@" >"$tmp/refusal.out" 2>"$tmp/refusal.err"
  rc=$?
  [ "$rc" -eq 1 ] && [ "$(grep -c . "$tmp/refusal.err")" -eq 1 ] && grep -qE -e "$pattern" "$tmp/refusal.err" ||
    fail "$what: exit $rc (want 1), stderr: $(cat "$tmp/refusal.err")"
}

referee_pub=$("$bin" keygen "$tmp/referee.key") || fail "keygen"
"$bin" keygen "$tmp/a.key" >/dev/null && "$bin" keygen "$tmp/b.key" >/dev/null || fail "keygen"
rport=$(start referee referee --listen 127.0.0.1:0 --key "$tmp/referee.key" --data "$tmp/referee-data" \
        --allow-network 127.0.0.0/8) || exit 1
aport=$(start honest provider --listen 127.0.0.1:0 --key "$tmp/a.key" --store "$tmp/a" --referee-key "$referee_pub") || exit 1
bport=$(start cheater provider --listen 127.0.0.1:0 --key "$tmp/b.key" --store "$tmp/b" --referee-key "$referee_pub" \
        --corrupt 12:13) || exit 1

dispute_verdict "$src/scenarios/jobs/short_mlp.toml" "$bport" "$aport"
grep -q "outcome: claim 1 stands (wrong_output)" "$tmp/verify.out" || fail "unexpected verdict: $(cat "$tmp/verify.out")"
grep -q "located: level 3, step 12, node 13 (adamw)" "$tmp/verify.out" || fail "wrong location: $(cat "$tmp/verify.out")"
grep -Eq "^clocks: claim 0 [0-9]+\.[0-9]{3} s left, claim 1 [0-9]+\.[0-9]{3} s left$" "$tmp/verify.out" || fail "no clocks: $(cat "$tmp/verify.out")"
# Another referee key, or a flipped byte, must not verify: each is refused for its own reason.
other=$("$bin" keygen "$tmp/other.key") || fail "keygen"
expect_refusal "verify with the wrong referee key" "^tribunal: error: $verdict: the verdict is signed by another key than the referee's$" \
  -- verify "$verdict" --referee-key "$other"
python3 -c "import sys; b=bytearray(open(sys.argv[1],'rb').read()); b[len(b)//2]^=1; open(sys.argv[1]+'.bad','wb').write(b)" "$verdict" ||
  fail "cannot write the corrupted verdict"
cmp -s "$verdict" "$verdict.bad" && fail "the corrupted verdict is the verdict"
expect_refusal "verify a corrupted verdict" "^tribunal: error: $verdict.bad: not a valid signed verdict \(Envelope.signature: does not verify under the sender key" \
  -- verify "$verdict.bad" --referee-key "$referee_pub"
# Without the referee's key a verdict proves nothing: verify refuses to call it valid.
"$bin" verify "$verdict" >"$tmp/nokey.out" 2>&1
[ $? -eq 2 ] && grep -q "referee-key HEX is required" "$tmp/nokey.out" || fail "verify without --referee-key: $(cat "$tmp/nokey.out")"
echo "ok: delegate → dispute → verdict verified offline"
