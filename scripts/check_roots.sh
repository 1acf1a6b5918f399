#!/usr/bin/env bash
# Builds `tribunal` in several configurations and checks that each short job's trajectory root is
# bitwise identical in all of them, on 1 and 2 threads, and when training stops halfway and resumes
# from its checkpoint (RepOps contract, docs/numerics.md).
#
#   scripts/check_roots.sh [CONFIG...]     CONFIG = "compiler flags…", e.g. "clang++ -O0 -march=x86-64"
#   JOBS="a.toml b.toml" scripts/check_roots.sh …   (default: the short MLP, GPT and CNN jobs)
#
# With no CONFIG it checks the full matrix: {g++, clang++} × {-O0, -O3} × {-march=x86-64, -march=native}.
# Each configuration builds in build/roots/<name>; prints one line per configuration, job and run,
# exits 1 on a mismatch.
set -euo pipefail
cd "$(dirname "$0")/.."

read -r -a jobs <<<"${JOBS:-scenarios/jobs/short_mlp.toml scenarios/jobs/short_gpt.toml scenarios/jobs/short_cnn.toml}"
if [ $# -eq 0 ]; then
  set --
  for cxx in g++ clang++; do
    for opt in -O0 -O3; do
      for march in -march=x86-64 -march=native; do set -- "$@" "$cxx $opt $march"; done
    done
  done
fi

root_of() {  # tribunal JOB OUT_DIR [train options…] → the trajectory root of the run
  local bin=$1 job=$2 out=$3
  shift 3
  "$bin" train "$job" --out "$out" --json "$@" | tail -n1 |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["trajectory_root"])'
}

declare -A first
status=0
for config in "$@"; do
  read -r cxx flags <<<"$config"
  name=$(echo "$config" | tr -c 'A-Za-z0-9+\n' '_')
  dir=build/roots/$name
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_CXX_FLAGS="$flags" \
    -DTRIBUNAL_BUILD_TESTS=OFF -DTRIBUNAL_BUILD_BENCH=OFF >/dev/null
  cmake --build "$dir" --target tribunal -j "$(nproc)" >/dev/null
  bin=$dir/apps/tribunal
  for job in "${jobs[@]}"; do
    steps=$(sed -n 's/^steps *= *\([0-9]*\).*/\1/p' "$job")
    for run in "1 thread" "2 threads" "resumed at $((steps / 2))"; do
      out=$(mktemp -d)
      case $run in
        "1 thread") root=$(root_of "$bin" "$job" "$out" --threads 1) ;;
        "2 threads") root=$(root_of "$bin" "$job" "$out" --threads 2) ;;
        *)
          root_of "$bin" "$job" "$out" --steps $((steps / 2)) >/dev/null
          root=$(root_of "$bin" "$job" "$out" --resume)
          ;;
      esac
      rm -rf "$out"
      first[$job]=${first[$job]:-$root}
      if [ "$root" = "${first[$job]}" ]; then mark=same; else mark=DIFFERENT; status=1; fi
      printf '%-28s %-22s %-18s %s %s\n' "$config" "$(basename "$job")" "$run" "$root" "$mark"
    done
  done
done
exit $status
