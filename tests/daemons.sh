# Sourced by the daemon tests (cli_network.sh, mpi_dispute.sh): a temporary directory whose daemons are
# stopped and which is removed on exit, failure reports with every daemon's log, and start_daemon.
tmp=$(mktemp -d)
cleanup() {
  for f in "$tmp"/*.pid; do [ -f "$f" ] && kill -TERM "$(cat "$f")" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
# Reports to stderr (a failure inside a command substitution must still be seen) and exits.
fail() { { echo "FAIL: $*"; for f in "$tmp"/*.log; do echo "== $f"; cat "$f"; done; } >&2; exit 1; }

# start_daemon NAME COMMAND...: starts a daemon and waits for its "listening on HOST:PORT" line; prints
# the port. It runs in a command substitution, so its output must not go to our stdout, its pid goes
# to a file, and its `fail` ends only that subshell: every caller adds `|| exit 1`. A daemon that exits
# before listening fails at once; one that does not listen within 30 s fails.
start_daemon() {
  local name=$1 port
  shift
  "$@" >"$tmp/$name.out" 2>"$tmp/$name.log" &
  echo $! >"$tmp/$name.pid"
  for _ in $(seq 300); do
    port=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$tmp/$name.log")
    [[ "$port" =~ ^[1-9][0-9]*$ ]] && { echo "$port"; return 0; }
    kill -0 "$(cat "$tmp/$name.pid")" 2>/dev/null || fail "$name exited before listening"
    sleep 0.1
  done
  fail "$name did not start"
}

# dispute_verdict JOB CHEATER_PORT HONEST_PORT: `tribunal delegate` of JOB to the cheating provider
# (claim 0) and the honest one (claim 1) under the referee at $rport ($referee_pub); the honest claim
# must stand and the verdict must verify offline. Sets $verdict (the file); `tribunal verify`'s output
# is in $tmp/verify.out.
dispute_verdict() {
  local out rc
  out=$("$bin" delegate "$1" --provider "ws://127.0.0.1:$2/" --provider "ws://127.0.0.1:$3/" \
        --referee "ws://127.0.0.1:$rport/" --referee-key "$referee_pub" --out "$tmp/verdicts" 2>"$tmp/delegate.log")
  rc=$?
  [ "$rc" -eq 0 ] || fail "delegate exited $rc: $out"
  echo "$out" | grep -q "accepted: the claim of ws://127.0.0.1:$3/" || fail "the honest claim did not stand: $out"
  verdict=$(ls "$tmp"/verdicts/verdict-*.bin) || fail "no verdict file"
  "$bin" verify "$verdict" --referee-key "$referee_pub" >"$tmp/verify.out" || fail "verify rejected the verdict"
}
