#!/usr/bin/env bash
# One rank's failure ends the job on every rank with that error, and no rank waits for it
# (engine/world.h, docs/running.md "Data-parallel training over MPI"). Rank 0 alone cannot write its
# checkpoint of step 4 (the file's name is taken by a directory, as a full disk would fail it):
#  - `tribunal train` on 2 ranks: every rank exits non-zero within the timeout, naming the failure;
#  - a provider on 2 ranks whose rank 0 cannot create the job's directory (a file holds its name), so
#    it fails before the ranks' first exchange, where rank 1 waits: the job fails on both ranks (the
#    client is told, the follower logs the error), and the next job trains on both ranks to the same
#    claim as a one-rank provider's (before engine/world.h, rank 1 waited forever and the next job
#    never finished).
# Usage: mpi_failure.sh TRIBUNAL SOURCE_DIR MPIEXEC
set -u
bin=$1 src=$2 mpiexec=$3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
job=$src/scenarios/jobs/sharded_mlp.toml
source "$(dirname "$0")/daemons.sh"
mpi=("$mpiexec" --oversubscribe --bind-to none)
blocked=step_000000004.safetensors

# 1. tribunal train: rank 0 fails at step 4's checkpoint; both ranks end within 120 s, exit 1.
mkdir -p "$tmp/out/$blocked/taken"
start=$(date +%s)
timeout 120 "${mpi[@]}" -np 2 "$bin" train "$job" --out "$tmp/out" --json --no-eval >"$tmp/train.out" 2>"$tmp/train.log"
rc=$?
[ "$rc" -ne 124 ] || fail "tribunal train on 2 ranks still runs after 120 s (a rank waits for the failed one)"
[ "$rc" -ne 0 ] || fail "tribunal train on 2 ranks exited 0 though rank 0 could not write a checkpoint"
grep -q "tribunal: error: rank 0 of 2 failed: .*$blocked" "$tmp/train.log" || fail "rank 0 does not name its failure"
grep -q "tribunal: error: rank 1 of 2 stopped: rank 0 of 2 failed: .*$blocked" "$tmp/train.log" ||
  fail "rank 1 does not name rank 0's failure"
echo "ok: tribunal train, rank 0's checkpoint failure ends both ranks (exit $rc, $(($(date +%s) - start)) s)"

# 2. A provider on 2 ranks: the same failure fails the job on both ranks; the ranks take the next job.
job_id=$("$bin" train "$job" --steps 1 --no-eval --json --out "$tmp/probe" | sed -n 's/.*"job_id":"\([0-9a-f]*\)".*/\1/p')
[[ "$job_id" =~ ^[0-9a-f]{64}$ ]] || fail "no job id"
mkdir -p "$tmp/a" && touch "$tmp/a/$job_id"
referee_pub=$("$bin" keygen "$tmp/referee.key") || fail "keygen"
"$bin" keygen "$tmp/a.key" >/dev/null && "$bin" keygen "$tmp/b.key" >/dev/null || fail "keygen"
rport=$(start_daemon referee "$bin" referee --listen 127.0.0.1:0 --key "$tmp/referee.key" --data "$tmp/referee-data" \
        --allow-network 127.0.0.0/8) || exit 1
aport=$(start_daemon ranks "${mpi[@]}" -np 2 "$bin" provider --listen 127.0.0.1:0 --key "$tmp/a.key" --store "$tmp/a" \
        --referee-key "$referee_pub") || exit 1
bport=$(start_daemon single "$bin" provider --listen 127.0.0.1:0 --key "$tmp/b.key" --store "$tmp/b" \
        --referee-key "$referee_pub") || exit 1
grep -q "2 training rank(s)" "$tmp/ranks.log" || fail "the provider does not train on 2 ranks"
delegate() {
  timeout 120 "$bin" delegate "$job" --provider "ws://127.0.0.1:$aport/" --provider "ws://127.0.0.1:$bport/" \
    --referee "ws://127.0.0.1:$rport/" --referee-key "$referee_pub" --out "$tmp/verdicts" >"$tmp/delegate$1.out" 2>&1
}
delegate 1
[ $? -ne 124 ] || fail "the first delegation still waits after 120 s"
grep -q "training failed on the provider" "$tmp/delegate1.out" || fail "the client was not told: $(cat "$tmp/delegate1.out")"
for _ in $(seq 100); do grep -q "the job failed on every rank" "$tmp/ranks.log" && break; sleep 0.1; done
grep -q "provider rank 1 of 2: the job failed on every rank: rank 0 of 2 failed: .*$job_id: cannot create" "$tmp/ranks.log" ||
  fail "rank 1 does not report rank 0's failure"
rm -f "${tmp:?}/a/$job_id"
delegate 2
rc=$?
[ "$rc" -ne 124 ] || fail "the next job does not finish within 120 s: the ranks are out of step"
[ "$rc" -eq 0 ] || fail "the next delegation exited $rc: $(cat "$tmp/delegate2.out")"
grep -q "accepted: the claim of" "$tmp/delegate2.out" || fail "no claim accepted: $(cat "$tmp/delegate2.out")"
grep -q "stands after 0 dispute" "$tmp/delegate2.out" ||
  fail "the 2-rank provider's claim differs from the 1-rank provider's: $(cat "$tmp/delegate2.out")"
echo "ok: a 2-rank provider whose rank 0 failed a job reports it on both ranks and trains the next job on both"
