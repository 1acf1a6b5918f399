#!/usr/bin/env bash
# Data-parallel exactness over MPI: the sharded MLP, GPT and CNN jobs (train.shards = 6) commit their
# pinned trajectory root (tests/fixtures/sharded_roots.txt) under `mpirun -np K` for K = 1, 2, 3 and 6,
# and when a run on one rank count is resumed on another; a rank count that does not divide the
# shards is refused. Oversubscribed: CI has 2 cores.
# Usage: mpi_roots.sh TRIBUNAL SOURCE_DIR MPIEXEC
set -euo pipefail
tribunal=$1 src=$2 mpiexec=$3
# Open MPI refuses root without these (CI runs as root); --bind-to none keeps oversubscribed ranks from
# being pinned to one core each.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
run() { "$mpiexec" --oversubscribe --bind-to none -np "$1" "$tribunal" train "${@:2}" --json --no-eval; }
field() { sed -n "s/.*\"$1\":\"\{0,1\}\([0-9a-f]*\).*/\1/p"; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() {  # what, got, want
  if [[ "$2" == "$3" ]]; then echo "ok   $1"; else echo "FAIL $1: root $2, pinned $3"; fail=1; fi
}

for job in sharded_mlp sharded_gpt sharded_cnn; do
  file=scenarios/jobs/$job.toml
  want=$(awk -v f="$file" '$1 == f { print $2 }' "$src/tests/fixtures/sharded_roots.txt")
  for k in 1 2 3 6; do
    out=$(run "$k" "$src/$file" --out "$tmp/$job-$k")
    check "$job on $k rank(s)" "$(field trajectory_root <<<"$out")" "$want"
    [[ "$(field ranks <<<"$out")" == "$k" ]] || { echo "FAIL $job: ranks is not $k in $out"; fail=1; }
  done
  # A run stopped on 3 ranks, resumed on 2; one stopped on 1 rank, resumed on 6.
  run 3 "$src/$file" --out "$tmp/$job-r32" --steps 3 >/dev/null
  check "$job on 3 ranks resumed on 2" "$(run 2 "$src/$file" --out "$tmp/$job-r32" --resume | field trajectory_root)" "$want"
  run 1 "$src/$file" --out "$tmp/$job-r16" --steps 2 >/dev/null
  check "$job on 1 rank resumed on 6" "$(run 6 "$src/$file" --out "$tmp/$job-r16" --resume | field trajectory_root)" "$want"
done

# 4 ranks cannot share 6 shards: a clear error, a failing exit.
if err=$(run 4 "$src/scenarios/jobs/sharded_mlp.toml" --out "$tmp/four" 2>&1); then
  echo "FAIL 4 ranks for 6 shards were accepted"; fail=1
elif ! grep -q "4 ranks cannot share train.shards = 6" <<<"$err"; then
  echo "FAIL 4 ranks for 6 shards: unclear error: $err"; fail=1
else
  echo "ok   4 ranks for 6 shards refused"
fi
exit $fail
