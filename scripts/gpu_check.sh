#!/usr/bin/env bash
# The checks of the CUDA backend that need a GPU (docs/cuda.md "On a GPU"), run from the repository
# root on a machine with one, given a -DTRIBUNAL_CUDA=ON build. Never part of CI (CI has no GPU).
#
#   scripts/gpu_check.sh OUT_DIR
#     BIN=build/cuda/apps/tribunal  TEST=build/cuda/tests/cuda/test_backend_ops
#     BENCH=build/cuda/bench/bench_cuda_gemm  FORTUNES=/usr/share/games/fortunes  (environment)
#     SANITIZE_SECONDS=300 (per compute-sanitizer tool; 0 skips them)
#
# 1. every op on GPU 0 against the CPU reference, memcmp (test_backend_ops, suite backend-gpu);
# 2. the short and sharded jobs trained with --device cuda give their pinned roots;
# 3. the CUDA scenarios (scenarios/suite_cuda/) with the providers on the GPU instead of the emulation;
# 4. the character GPT (scenarios/jobs/gpt_chars.toml, 40 steps) on the GPU and the CPU: equal roots,
#    and the time per step of each;
# 5. bench_cuda_gemm: our matmul kernel against cuBLAS, and its output against the CPU's, bit for bit;
# 6. compute-sanitizer's racecheck and memcheck over the op suite, each for at most SANITIZE_SECONDS.
# Writes OUT_DIR/gpu_check.log and OUT_DIR/bench_cuda_gemm.json; exits 1 if a check failed.
set -uo pipefail
out=${1:?usage: gpu_check.sh OUT_DIR}
mkdir -p "$out"
bin=${BIN:-build/cuda/apps/tribunal}
test_bin=${TEST:-build/cuda/tests/cuda/test_backend_ops}
bench=${BENCH:-build/cuda/bench/bench_cuda_gemm}
fortunes=${FORTUNES:-/usr/share/games/fortunes}
sanitize=${SANITIZE_SECONDS:-300}
threads=$(nproc)
log=$out/gpu_check.log
status=0
say() { echo "$*" | tee -a "$log"; }
step() { # step NAME COMMAND...: runs it, logs its output and time, records a failure
  local name=$1 t0 rc
  shift
  say "== $name"
  t0=$(date +%s%N)
  "$@" 2>&1 | tee -a "$log"
  rc=${PIPESTATUS[0]}
  say "== $name: exit $rc in $((($(date +%s%N) - t0) / 1000000)) ms"
  [ "$rc" = 0 ] || status=1
}

say "gpu_check $(date -u +%FT%TZ) on $(uname -m), $threads CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | tee -a "$log"

step "1 every op on the GPU" "$test_bin" --test-suite=backend-gpu --success=false
step "2 pinned roots on --device cuda" bash tests/cuda/device_roots.sh "$bin" . cuda \
  tests/fixtures/golden_roots.txt tests/fixtures/sharded_roots.txt

scen=scenarios/.gpu_check
rm -rf "$scen" && mkdir -p "$scen"
for f in scenarios/suite_cuda/*.toml; do
  sed -e 's/"cuda-emulated"/"cuda"/' -e 's/^name = "device\/emulated-/name = "device\/gpu-/' "$f" >"$scen/$(basename "$f")"
done
step "3 CUDA scenarios on the GPU" "$bin" scenario run "$scen"/*.toml
rm -rf "$scen"

gpt() { # gpt DEVICE: trains 40 steps of the character GPT, prints root and seconds per step
  local dir rc
  dir=$(mktemp -d)
  "$bin" train scenarios/jobs/gpt_chars.toml --steps 40 --device "$1" --threads "$threads" --no-eval --json \
    --dataset fortunes="$fortunes" --out "$dir" | tail -n1 |
    python3 -c 'import json, sys; j = json.load(sys.stdin); print(j["trajectory_root"], j["seconds_per_step"], "s/step")'
  rc=$?
  rm -rf "$dir"
  return $rc
}
gpt_compare() {
  local g c
  g=$(gpt cuda) || return 1
  c=$(gpt cpu) || return 1
  echo "cuda: $g"
  echo "cpu ($threads threads): $c"
  [ "${g%% *}" = "${c%% *}" ]
}
step "4 character GPT, 40 steps, GPU against CPU" gpt_compare

say "== 5 bench_cuda_gemm"
"$bench" --min-time 0.1 >"$out/bench_cuda_gemm.json" 2> >(tee -a "$log" >&2) || status=1
python3 - "$out/bench_cuda_gemm.json" <<'PY' 2>&1 | tee -a "$log"
import json, sys
j = json.load(open(sys.argv[1]))
print(j["device"])
for r in j["shapes"]:
    print(f'{r["shape"]:24s} ours {r["ours_tflops"]:6.2f} TFLOP/s  cuBLAS {r["cublas_tflops"]:6.2f}  '
          f'time ratio {r["ours_over_cublas_time"]:5.2f}  equal to CPU {r.get("gpu_equals_cpu")}  '
          f'cuBLAS bits differ {r.get("cublas_differs", "-")}')
sys.exit(0 if all(r.get("gpu_equals_cpu", True) for r in j["shapes"]) else 1)
PY
[ "${PIPESTATUS[0]}" = 0 ] || status=1

if [ "$sanitize" != 0 ] && command -v compute-sanitizer >/dev/null; then
  for tool in racecheck memcheck; do
    step "6 compute-sanitizer --tool $tool (at most $sanitize s)" timeout "$sanitize" \
      compute-sanitizer --tool "$tool" --error-exitcode 3 "$test_bin" --test-suite=backend-gpu
  done
fi
say "gpu_check: $([ $status = 0 ] && echo all checks passed || echo SOME CHECKS FAILED)"
exit $status
