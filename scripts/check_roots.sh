#!/usr/bin/env bash
# Builds `tribunal` in several configurations and checks that each short job's trajectory root is
# bitwise identical in all of them, on 1 and 2 threads, when training stops halfway and resumes from
# its checkpoint, and on every SIMD path the machine has (TRIBUNAL_SIMD=scalar|avx2|avx512|neon), and
# that it equals the job's golden root in tests/fixtures/golden_roots.txt (RepOps contract,
# docs/numerics.md).
#
#   scripts/check_roots.sh [CONFIG...]
#     CONFIG = "compiler flags…", e.g. "clang++ -O0 -march=x86-64", built in build/roots/<name>;
#           or "preset:NAME", a CMake preset's build of tribunal in build/NAME, run under the
#           emulator its toolchain names (e.g. preset:aarch64: arm64 under qemu-aarch64)
#   JOBS="a.toml b.toml" scripts/check_roots.sh …   (default: the short MLP, GPT, CNN and imported CNN jobs)
#   RUNS="2 threads,simd" scripts/check_roots.sh …  (default: "1 thread,2 threads,resumed,simd")
#
# With no CONFIG it checks the full matrix: {g++, clang++} × {-O0, -O3} × {-march=x86-64, -march=native}.
# Prints one line per configuration, job and run; a path this build or CPU lacks is listed as absent.
# Exits 1 on a root that differs from the golden one (or, for a job without one, from its first).
set -euo pipefail
cd "$(dirname "$0")/.."

read -r -a jobs <<<"${JOBS:-scenarios/jobs/short_mlp.toml scenarios/jobs/short_gpt.toml scenarios/jobs/short_cnn.toml scenarios/jobs/short_onnx_cnn.toml scenarios/jobs/short_onnx_gpt2.toml scenarios/jobs/short_onnx_llama.toml scenarios/jobs/short_onnx_resnet.toml scenarios/jobs/short_onnx_mse.toml}"
IFS=, read -r -a runs <<<"${RUNS:-1 thread,2 threads,resumed,simd}"
if [ $# -eq 0 ]; then
  set --
  for cxx in g++ clang++; do
    for opt in -O0 -O3; do
      for march in -march=x86-64 -march=native; do set -- "$@" "$cxx $opt $march"; done
    done
  done
fi

# The golden roots: "job file" → root.
declare -A golden
while read -r file root; do
  case $file in '' | '#'*) continue ;; esac
  golden[$file]=$root
done <tests/fixtures/golden_roots.txt

# The imported models' jobs (model.kind = "onnx") name their files; every run registers the fixtures.
models=()
for f in tests/fixtures/onnx/*.onnx; do models+=(--model "$(basename "$f" .onnx)=$f"); done
models+=(--dataset regression=tests/fixtures/regression)  # short_onnx_mse.toml's data set

emulator=()
root_of() {  # tribunal JOB OUT_DIR [train options…] → the trajectory root of the run (stderr: its errors)
  local bin=$1 job=$2 out=$3
  shift 3
  # --no-eval: the held-out evaluation does not touch the trajectory (and is most of a GPT run under qemu).
  "${emulator[@]}" "$bin" train "$job" --out "$out" --json --no-eval "${models[@]}" "$@" | tail -n1 |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["trajectory_root"])'
}

build() {  # DIR: builds tribunal there; on a failure prints the build's output and exits 1
  if ! cmake --build "$1" --target tribunal -j "$(nproc)" >"$1/build.log" 2>&1; then
    grep -E -B2 -A6 "error|FAILED" "$1/build.log" | head -60 >&2
    echo "check_roots: the build in $1 failed (log: $1/build.log)" >&2
    exit 1
  fi
}

declare -A first
status=0
report() {  # CONFIG JOB RUN ROOT: prints the line, compares ROOT with the golden (or first) root
  local config=$1 job=$2 run=$3 root=$4 mark
  first[$job]=${first[$job]:-${golden[$job]:-$root}}
  if [ "$root" = "${first[$job]}" ]; then mark=same; else mark=DIFFERENT; status=1; fi
  [ -n "${golden[$job]:-}" ] && [ "$mark" = same ] && mark="same (golden)"
  printf '%-28s %-22s %-18s %s %s\n' "$config" "$(basename "$job")" "$run" "$root" "$mark"
}

for config in "$@"; do
  if [[ $config == preset:* ]]; then
    preset=${config#preset:}
    dir=build/$preset
    cmake --preset "$preset" >/dev/null
    build "$dir"
    # CMake's list separator is ';'.
    IFS=';' read -r -a emulator <<<"$(sed -n 's/^CMAKE_CROSSCOMPILING_EMULATOR:[A-Z]*=//p' "$dir/CMakeCache.txt")"
  else
    read -r cxx flags <<<"$config"
    dir=build/roots/$(echo "$config" | tr -c 'A-Za-z0-9+\n' '_')
    # The C compiler (BLAKE3's sources) of the same family: cmake/blake3.cmake refuses a mixed pair.
    cc=${cxx/clang++/clang} && cc=${cc/g++/gcc}
    # Without the CUDA emulation (its roots are test_engine's, in the release build): less to build.
    cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=None -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
      -DCMAKE_CXX_FLAGS="$flags" \
      -DTRIBUNAL_BUILD_TESTS=OFF -DTRIBUNAL_BUILD_BENCH=OFF -DTRIBUNAL_CUDA_EMULATE=OFF >/dev/null
    # Warnings are not errors here (g++ -march=native warns falsely inside fmt); the presets check them.
    build "$dir"
    emulator=()
  fi
  bin=$dir/apps/tribunal
  for job in "${jobs[@]}"; do
    steps=$(sed -n 's/^steps *= *\([0-9]*\).*/\1/p' "$job")
    for run in "${runs[@]}"; do
      case $run in
        "1 thread" | "2 threads")
          out=$(mktemp -d)
          report "$config" "$job" "$run" "$(root_of "$bin" "$job" "$out" --threads "${run%% *}")"
          rm -rf "$out"
          ;;
        resumed)
          out=$(mktemp -d)
          root_of "$bin" "$job" "$out" --steps $((steps / 2)) >/dev/null
          report "$config" "$job" "resumed at $((steps / 2))" "$(root_of "$bin" "$job" "$out" --resume)"
          rm -rf "$out"
          ;;
        simd)
          # Every path, forced for the whole run; one the build or CPU lacks fails at once (the
          # ops library checks TRIBUNAL_SIMD when the run makes its thread pool) and is skipped.
          for path in scalar avx2 avx512 neon; do
            out=$(mktemp -d)
            if root=$(TRIBUNAL_SIMD=$path root_of "$bin" "$job" "$out" --threads 2 2>"$out.err"); then
              report "$config" "$job" "simd $path" "$root"
            elif grep -qE "has no SIMD path|not supported by this CPU" "$out.err"; then
              printf '%-28s %-22s %-18s %s\n' "$config" "$(basename "$job")" "simd $path" "(not on this machine)"
            else
              cat "$out.err" >&2
              status=1
            fi
            rm -rf "$out" "$out.err"
          done
          ;;
        *) echo "check_roots: unknown run '$run' in RUNS" >&2; exit 2 ;;
      esac
    done
  done
done
exit $status
