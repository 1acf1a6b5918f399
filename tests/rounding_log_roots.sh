#!/usr/bin/env bash
# Rounding-log mode against real float64 nondeterminism (docs/numerics.md "Rounding-log mode"): the short
# MLP, GPT and CNN rounding-log jobs trained with OpenBLAS's DGEMM on one thread, then replayed from that
# run's logs with two other float64 GEMMs — a naive loop, and OpenBLAS on two threads with another core
# type — commit the same trajectory root. A log with one forged decision is refused at its node.
# Usage: rounding_log_roots.sh TRIBUNAL SOURCE_DIR
set -euo pipefail
tribunal=$1 src=$2
field() { sed -n "s/.*\"$1\":\"\{0,1\}\([0-9a-f]*\).*/\1/p"; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() {  # what, got, want
  if [[ -n "$2" && "$2" == "$3" ]]; then echo "ok   $1"; else echo "FAIL $1: root '$2', want '$3'"; fail=1; fi
}
train() { "$tribunal" train "$@" --json --no-eval; }
# Another core type than the one OpenBLAS picks here (Haswell kernels run on every x86-64 CI machine).
other_core=Haswell
[[ "$(grep -m1 -o 'avx512f' /proc/cpuinfo || true)" == avx512f ]] || other_core=Sandybridge

for job in short_mlp_rlog short_gpt_rlog short_cnn_rlog; do
  file=$src/scenarios/jobs/$job.toml
  a=$(OPENBLAS_NUM_THREADS=1 train "$file" --float64-gemm openblas --out "$tmp/$job-a")
  root=$(field trajectory_root <<<"$a")
  b=$(train "$file" --float64-gemm naive --replay-logs "$tmp/$job-a" --out "$tmp/$job-b")
  check "$job: naive loop replaying OpenBLAS's logs" "$(field trajectory_root <<<"$b")" "$root"
  c=$(OPENBLAS_NUM_THREADS=2 OPENBLAS_CORETYPE=$other_core train "$file" --float64-gemm openblas \
        --replay-logs "$tmp/$job-a" --out "$tmp/$job-c")
  check "$job: OpenBLAS $other_core on 2 threads replaying" "$(field trajectory_root <<<"$c")" "$root"
  # Without the logs, each GEMM rounds its own float64 values: the same root only if no value straddled
  # a rounding boundary between the two (reported, not asserted: short jobs rarely meet one).
  own=$(train "$file" --float64-gemm naive --out "$tmp/$job-own" | field trajectory_root)
  if [[ "$own" == "$root" ]]; then echo "note $job: the naive loop's own logs give the same root";
  else echo "note $job: the naive loop's own logs give another root ($own)"; fi
  grep -q '"logged_decisions":[1-9]' <<<"$a" || { echo "FAIL $job logged no decision: $a"; fail=1; }
done

# A forged decision: the first node (a gather, whose values are float32 already, never near a boundary)
# gets an "up" for its first value. The replay refuses it at step 0, node 0.
log=$tmp/short_mlp_rlog-a/rounding_logs/step_00000000.rlog.zst
zstd -q -dc "$log" > "$tmp/raw"
printf '\x02' | dd of="$tmp/raw" bs=1 seek=48 conv=notrunc status=none  # magic 24 + step 8 + nodes 8 + count 8
mkdir -p "$tmp/forged/rounding_logs" && zstd -q -c "$tmp/raw" > "$tmp/forged/rounding_logs/step_00000000.rlog.zst"
if err=$(train "$src/scenarios/jobs/short_mlp_rlog.toml" --replay-logs "$tmp/forged" --out "$tmp/f" 2>&1); then
  echo "FAIL a forged rounding decision was replayed"; fail=1
elif ! grep -q "step 0 node 0 (gather): the rounding log's decision for output 0 element 0 is not allowed" <<<"$err"; then
  echo "FAIL forged decision: unclear error: $err"; fail=1
else
  echo "ok   a forged rounding decision is refused at its node"
fi
exit $fail
