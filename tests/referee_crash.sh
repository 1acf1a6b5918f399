#!/usr/bin/env bash
# The referee survives SIGKILL and loses no dispute. On the short job, with an honest and a cheating
# provider:
#   1. an uncrashed referee (--data) and `tribunal delegate` give the reference verdict, and its store
#      gives the DisputeOpen and the number E of events one dispute commits;
#   2. for every N in 1..E, a referee started with the test hook --crash-after-events N kills itself
#      right after committing its N-th event; it is restarted on the same port and data directory,
#      and the client (reconnecting as `tribunal delegate` does) must get a verdict that `tribunal
#      verify` reads exactly as the reference (winner, reason, step, node, rounds, detail). A run whose
#      dispute commits fewer inputs than the reference's (they depend on timing) never reaches a late N:
#      its store must then hold fewer than N and its verdict be the reference's; all but 3 runs must crash;
#   3. the honest provider is killed and restarted mid-dispute (stopped before it could answer, then
#      again after answering the first round): the referee reconnects, and the honest claim still stands;
#   4. openings beyond --max-live-disputes / --max-disputes-per-client are refused with a reason, and
#      the same opening sent again attaches to the live dispute.
# Usage: referee_crash.sh PATH/TO/tribunal PATH/TO/dispute_client SOURCE_DIR
set -u
bin=$1
client=$2
src=$3
tmp=$(mktemp -d)
cleanup() {
  for f in "$tmp"/*.pid; do [ -f "$f" ] && kill -KILL "$(cat "$f")" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  for f in "$tmp"/*.log; do echo "== $f"; tail -n 30 "$f"; done >&2
  exit 1
}

# Starts a daemon and waits for its "listening on HOST:PORT" line; prints the port. (It runs in a
# command substitution, so its output must not go to our stdout, and its pid goes to a file.) A
# daemon restarted on a fixed port retries while the port is still held by its dying predecessor.
start() {
  local name=$1 try
  shift
  for try in $(seq 25); do
    "$bin" "$@" >"$tmp/$name.out" 2>"$tmp/$name.log" &
    echo $! >"$tmp/$name.pid"
    for _ in $(seq 300); do
      port=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$tmp/$name.log" 2>/dev/null)
      [ -n "$port" ] && { echo "$port"; return; }
      alive "$name" || break
      sleep 0.05
    done
    grep -q "Address already in use" "$tmp/$name.log" || break
    sleep 0.2
  done
  fail "$name did not start: $(cat "$tmp/$name.log")"
}
# Whether daemon $1 runs: some thread of it is not a zombie. (A killed daemon whose parent subshell
# is gone stays a zombie until init reaps it; and its main thread turns zombie before the others have
# exited and closed its sockets.)
alive() {
  local pid task
  pid=$(cat "$tmp/$1.pid" 2>/dev/null) || return 1
  for task in /proc/"$pid"/task/*/status; do
    [ -e "$task" ] || continue
    grep -q '^State:[[:space:]]*Z' "$task" 2>/dev/null || { [ -e "$task" ] && return 0; }
  done
  return 1
}
# Waits up to $2 seconds for daemon $1 to exit.
await_exit() {
  for _ in $(seq $(($2 * 50))); do alive "$1" || return 0; sleep 0.02; done
  return 1
}
stop() { kill -TERM "$(cat "$tmp/$1.pid")" 2>/dev/null; await_exit "$1" 10 || kill -KILL "$(cat "$tmp/$1.pid")" 2>/dev/null; rm -f "$tmp/$1.pid"; }
# The verdict as verify prints it, less its clocks line: the time each party had left depends on timing
# (a resumed dispute restarts the waiting clocks), everything else must be the reference's.
verify() {
  local out
  out=$("$bin" verify "$1" --referee-key "$referee_pub") || return 1
  grep -v '^clocks: ' <<<"$out"
}
t0=$(date +%s.%N)
lap() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$t0" "$(date +%s.%N)"; }

referee_pub=$("$bin" keygen "$tmp/referee.key") || fail "keygen"
"$bin" keygen "$tmp/a.key" >/dev/null && "$bin" keygen "$tmp/b.key" >/dev/null || fail "keygen"
aport=$(start honest provider --listen 127.0.0.1:0 --referee-key "$referee_pub" --key "$tmp/a.key" --store "$tmp/a") || exit 1
bport=$(start cheater provider --listen 127.0.0.1:0 --referee-key "$referee_pub" --key "$tmp/b.key" --store "$tmp/b" --corrupt 12:13) || exit 1
providers=(--provider "ws://127.0.0.1:$bport/" --provider "ws://127.0.0.1:$aport/")

# 1. The reference run.
rport=$(start ref referee --listen 127.0.0.1:0 --allow-network 127.0.0.0/8 --key "$tmp/referee.key" --data "$tmp/ref-data") || exit 1
out=$("$bin" delegate "$src/scenarios/jobs/short_mlp.toml" "${providers[@]}" --referee "ws://127.0.0.1:$rport/" \
      --referee-key "$referee_pub" --out "$tmp/ref-verdicts" 2>"$tmp/delegate.log") || fail "delegate: $out"
echo "$out" | grep -q "accepted: the claim of ws://127.0.0.1:$aport/" || fail "the honest claim did not stand: $out"
verify "$tmp"/ref-verdicts/verdict-*.bin >"$tmp/reference.txt" || fail "the reference verdict does not verify"
grep -q "outcome: claim 1 stands (wrong_output)" "$tmp/reference.txt" || fail "reference: $(cat "$tmp/reference.txt")"
grep -q "located: level 3, step 12, node 13" "$tmp/reference.txt" || fail "reference: $(cat "$tmp/reference.txt")"
stop ref
events=$(python3 - "$tmp/ref-data/referee.sqlite" "$tmp/open.bin" <<'EOF'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
(n,) = db.execute("SELECT count(*) FROM inputs").fetchone()
(opening,) = db.execute("SELECT envelope FROM inputs WHERE kind = 1").fetchone()
(verdicts,) = db.execute("SELECT count(*) FROM disputes WHERE verdict IS NOT NULL").fetchone()
assert verdicts == 1, "the reference store holds no verdict"
open(sys.argv[2], "wb").write(opening)
print(n)
EOF
) || fail "cannot read the reference store"
[ "$events" -ge 10 ] || fail "only $events events in the reference dispute"

t_ref=$(lap)

# 2. SIGKILL after every event, a few referees at a time (each on its own port and data directory).
# One run: prints nothing on success, the reason on failure.
kill_at() {
  local n=$1 rport cpid
  rport=$(start "r$n" referee --listen 127.0.0.1:0 --allow-network 127.0.0.0/8 --key "$tmp/referee.key" --data "$tmp/d$n" --crash-after-events "$n")
  [ -n "$rport" ] || { echo "referee $n did not start"; return; }
  timeout 90 "$client" open "ws://127.0.0.1:$rport/" "$referee_pub" "$tmp/open.bin" "$tmp/v$n.bin" 2>"$tmp/client$n.log" &
  cpid=$!
  # Until the referee has crashed or the client has its verdict. The inputs a dispute commits depend on
  # timing (a question written in a later millisecond than it was asked is one: Game::on_question_written),
  # so this run may commit fewer than the reference's E: a referee still up once the client has its
  # verdict must hold fewer than n inputs, and the verdict must be the reference's.
  for _ in $(seq 3000); do
    alive "r$n" && kill -0 "$cpid" 2>/dev/null || break
    sleep 0.02
  done
  if alive "r$n"; then
    wait "$cpid" || { echo "the referee did not crash at event $n and the client got no verdict"; return; }
    local inputs
    inputs=$(python3 -c 'import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute("SELECT count(*) FROM inputs").fetchone()[0])' \
             "$tmp/d$n/referee.sqlite") || { echo "referee $n: cannot read its store"; return; }
    [ "$inputs" -lt "$n" ] || { echo "the referee did not crash at event $n (its store holds $inputs inputs)"; return; }
    verify "$tmp/v$n.bin" >"$tmp/verdict$n.txt" || { echo "run $n: the verdict does not verify"; return; }
    diff "$tmp/reference.txt" "$tmp/verdict$n.txt" >/dev/null ||
      { echo "run $n: another verdict: $(diff "$tmp/reference.txt" "$tmp/verdict$n.txt")"; return; }
    stop "r$n"
    touch "$tmp/fewer$n"
    return
  fi
  grep -q "crash hook: SIGKILL after event $n" "$tmp/r$n.log" || { echo "referee $n exited without the crash hook"; return; }
  rm -f "$tmp/r$n.pid"
  [ -n "$(start "r${n}b" referee --listen "127.0.0.1:$rport" --allow-network 127.0.0.0/8 --key "$tmp/referee.key" --data "$tmp/d$n")" ] ||
    { echo "referee $n did not restart on port $rport"; return; }
  wait "$cpid" || { echo "kill at event $n: the client got no verdict"; return; }
  verify "$tmp/v$n.bin" >"$tmp/verdict$n.txt" || { echo "kill at event $n: the verdict does not verify"; return; }
  diff "$tmp/reference.txt" "$tmp/verdict$n.txt" >/dev/null ||
    { echo "kill at event $n: another verdict: $(diff "$tmp/reference.txt" "$tmp/verdict$n.txt")"; return; }
  stop "r${n}b"
  rm -f "$tmp/r$n.log" "$tmp/r${n}b.log" "$tmp/client$n.log" "$tmp/r$n.out" "$tmp/r${n}b.out"
}
lanes=${CRASH_LANES:-3}
for n in $(seq 1 "$events"); do
  (kill_at "$n" >"$tmp/result$n.txt" 2>&1) &
  while [ "$(jobs -rp | wc -l)" -ge "$lanes" ]; do sleep 0.05; done
done
wait
crashed=0
fewer=0
for n in $(seq 1 "$events"); do
  [ -s "$tmp/result$n.txt" ] && fail "$(cat "$tmp/result$n.txt")"
  if [ -e "$tmp/fewer$n" ]; then fewer=$((fewer + 1)); else crashed=$((crashed + 1)); fi
done
[ "$crashed" -ge $((events - 3)) ] || fail "only $crashed of $events runs reached their kill point"
t_kill=$(lap)

# 3. The honest provider killed and restarted mid-dispute. (a) Stopped before it can answer the
# first question (the cheater answers it), killed, restarted on its port and store.
rport=$(start pa referee --listen 127.0.0.1:0 --allow-network 127.0.0.0/8 --key "$tmp/referee.key" --data "$tmp/pa-data") || exit 1
kill -STOP "$(cat "$tmp/honest.pid")"
timeout 90 "$client" open "ws://127.0.0.1:$rport/" "$referee_pub" "$tmp/open.bin" "$tmp/pa.bin" 2>"$tmp/client-pa.log" &
cpid=$!
for _ in $(seq 200); do grep -q "round 1: level 1" "$tmp/pa.log" && break; sleep 0.05; done
sleep 0.5
kill -KILL "$(cat "$tmp/honest.pid")"
await_exit honest 10 || fail "the honest provider did not die"
start honest provider --listen "127.0.0.1:$aport" --referee-key "$referee_pub" --key "$tmp/a.key" --store "$tmp/a" >/dev/null
wait "$cpid" || fail "provider restart (a): the client got no verdict"
verify "$tmp/pa.bin" >"$tmp/pa.txt" && diff "$tmp/reference.txt" "$tmp/pa.txt" >/dev/null ||
  fail "provider restart (a): another verdict: $(cat "$tmp/pa.txt")"
grep -q "provider 1 .*reconnecting" "$tmp/pa.log" || fail "provider restart (a): the referee never lost the provider"
stop pa

# (b) Killed after answering: the cheater, stopped before the dispute opens, holds the dispute in its
# first round, which the honest provider answers; the honest provider is then killed and restarted on its
# port and store, and the cheater resumed, so a fresh process is asked the later rounds (level 2's
# commitments among them, recomputed from its store) of a dispute it did not open. (A kill timed from the
# referee's log raced the dispute, which ended 0.07 s after level 2 began, before the kill landed.)
answered=$(grep -c "answering dispute" "$tmp/honest.log")
rport=$(start pb referee --listen 127.0.0.1:0 --allow-network 127.0.0.0/8 --key "$tmp/referee.key" --data "$tmp/pb-data") || exit 1
kill -STOP "$(cat "$tmp/cheater.pid")"
timeout 90 "$client" open "ws://127.0.0.1:$rport/" "$referee_pub" "$tmp/open.bin" "$tmp/pb.bin" 2>"$tmp/client-pb.log" &
cpid=$!
for _ in $(seq 200); do
  [ "$(grep -c "answering dispute" "$tmp/honest.log")" -gt "$answered" ] && break
  sleep 0.05
done
sleep 0.5
grep -q "round 1: level 1" "$tmp/pb.log" || fail "provider restart (b): the dispute never asked its first round"
grep -q "round 2: " "$tmp/pb.log" && fail "provider restart (b): the first round ended with the cheater stopped"
kill -KILL "$(cat "$tmp/honest.pid")"
await_exit honest 10 || fail "the honest provider did not die"
start honest provider --listen "127.0.0.1:$aport" --referee-key "$referee_pub" --key "$tmp/a.key" --store "$tmp/a" >/dev/null
kill -CONT "$(cat "$tmp/cheater.pid")"
wait "$cpid" || fail "provider restart (b): the client got no verdict"
verify "$tmp/pb.bin" >"$tmp/pb.txt" && diff "$tmp/reference.txt" "$tmp/pb.txt" >/dev/null ||
  fail "provider restart (b): another verdict: $(cat "$tmp/pb.txt")"
grep -q "level 2: commit to every step" "$tmp/pb.log" ||
  fail "provider restart (b): the dispute never reached level 2"
grep -q "provider 1 connection lost" "$tmp/pb.log" ||
  fail "provider restart (b): the referee never lost the provider (the kill did not happen mid-dispute)"
stop pb

# 4. Bounds: with the honest provider stopped, the first dispute stays live; a second one (the same
# claims in the other order) is refused beyond --max-live-disputes or --max-disputes-per-client, and
# the first one's opening sent again attaches instead of counting twice.
"$client" swap "$tmp/open.bin" "$tmp/open2.bin" || fail "swap"
kill -STOP "$(cat "$tmp/honest.pid")"
for limit in "--max-live-disputes 1" "--max-disputes-per-client 1"; do
  # shellcheck disable=SC2086
  rport=$(start caps referee --listen 127.0.0.1:0 --allow-network 127.0.0.0/8 --key "$tmp/referee.key" --data "$tmp/caps-data-${limit%% *}" $limit) || exit 1
  timeout 60 "$client" open "ws://127.0.0.1:$rport/" "$referee_pub" "$tmp/open.bin" "$tmp/caps.bin" 2>"$tmp/client-caps1.log" &
  c1=$!
  for _ in $(seq 200); do grep -q "round 1: level 1" "$tmp/caps.log" && break; sleep 0.05; done
  timeout 60 "$client" open "ws://127.0.0.1:$rport/" "$referee_pub" "$tmp/open.bin" "$tmp/caps-again.bin" 2>"$tmp/client-caps2.log" &
  c2=$!
  for _ in $(seq 200); do grep -q "attached" "$tmp/caps.log" && break; sleep 0.05; done
  grep -q "attached" "$tmp/caps.log" || fail "$limit: the same opening again did not attach"
  timeout 20 "$client" open "ws://127.0.0.1:$rport/" "$referee_pub" "$tmp/open2.bin" "$tmp/caps2.bin" 2>"$tmp/client-caps3.log" &&
    fail "$limit: a dispute beyond the limit was accepted"
  grep -qE "its limit|the limit per client" "$tmp/client-caps3.log" ||
    fail "$limit: refused without saying why: $(cat "$tmp/client-caps3.log")"
  kill -TERM "$c1" "$c2" 2>/dev/null
  wait "$c1" "$c2" 2>/dev/null
  kill -KILL "$(cat "$tmp/caps.pid")"
  await_exit caps 10
done
kill -CONT "$(cat "$tmp/honest.pid")"

echo "timing: reference run ${t_ref} s, kills until ${t_kill} s, total $(lap) s"
echo "ok: referee killed after each of $events events and restarted: $crashed/$events same verdict" \
     "($fewer runs committed fewer inputs than the reference and gave its verdict uncrashed);" \
     "honest provider killed and restarted mid-dispute wins (before its first answer, and after level 1);" \
     "live-dispute limits refuse"
