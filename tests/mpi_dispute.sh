#!/usr/bin/env bash
# A dispute across world sizes: an honest provider trains the sharded MLP job (train.shards = 6) on 3
# MPI ranks, a cheating provider on 2 ranks whose rank 1 adds 0.5 to its shard's weight-gradient
# partial (node 50, shard3/grad/l0.weight, which rank 1 of 2 computes) at step 4. The referee must
# locate exactly that node, as between two single-process providers; the verdict verifies offline.
# Usage: mpi_dispute.sh TRIBUNAL SOURCE_DIR MPIEXEC
set -u
bin=$1 src=$2 mpiexec=$3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
job=$src/scenarios/jobs/sharded_mlp.toml
source "$(dirname "$0")/daemons.sh"

# The node a cheating rank 1 of 2 corrupts: shard 3 of 6 is its first.
node=$("$bin" scenario graph "$job" | awk '$3 == "shard3/grad/l0.weight" { print $1 }')
[[ "$node" =~ ^[0-9]+$ ]] || fail "no node shard3/grad/l0.weight in the graph"
mpi=("$mpiexec" --oversubscribe --bind-to none)
referee_pub=$("$bin" keygen "$tmp/referee.key") || fail "keygen"
"$bin" keygen "$tmp/a.key" >/dev/null && "$bin" keygen "$tmp/b.key" >/dev/null || fail "keygen"
rport=$(start_daemon referee "$bin" referee --listen 127.0.0.1:0 --key "$tmp/referee.key" --data "$tmp/referee-data" \
        --allow-network 127.0.0.0/8) || exit 1
aport=$(start_daemon honest "${mpi[@]}" -np 3 "$bin" provider --listen 127.0.0.1:0 --key "$tmp/a.key" --store "$tmp/a" \
        --referee-key "$referee_pub") || exit 1
bport=$(start_daemon cheater "${mpi[@]}" -np 2 "$bin" provider --listen 127.0.0.1:0 --key "$tmp/b.key" --store "$tmp/b" \
        --referee-key "$referee_pub" --corrupt "4:$node") || exit 1
grep -q "3 training rank(s)" "$tmp/honest.log" || fail "the honest provider does not train on 3 ranks"
grep -q "2 training rank(s)" "$tmp/cheater.log" || fail "the cheating provider does not train on 2 ranks"

dispute_verdict "$job" "$bport" "$aport"
grep -q "outcome: claim 1 stands (wrong_output)" "$tmp/verify.out" || fail "unexpected verdict: $(cat "$tmp/verify.out")"
grep -q "located: level 3, step 4, node $node (matmul)" "$tmp/verify.out" || fail "wrong location: $(cat "$tmp/verify.out")"
echo "ok: 3-rank honest provider against a 2-rank cheater: caught at step 4, node $node (shard3/grad/l0.weight)"
