#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan+UBSan) and runs each for SECONDS (default 60) starting
# from the seed corpus committed in tests/fuzz/corpus/<target>/. A crash fails the script; its input
# is left in build/fuzz/artifacts/ (add it to the corpus as a regression input once fixed).
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]      targets: fuzz_decode fuzz_envelope fuzz_merkle fuzz_game
#                                                       fuzz_parse_job
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_decode fuzz_envelope fuzz_merkle fuzz_game fuzz_parse_job fuzz_onnx_import)

scripts/bootstrap.sh
cmake -S . -B build/fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DTRIBUNAL_FUZZ=ON -DTRIBUNAL_WERROR=ON -DTRIBUNAL_BUILD_TESTS=OFF -DTRIBUNAL_BUILD_BENCH=OFF \
  -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link,address,undefined" >/dev/null
cmake --build build/fuzz --target "${targets[@]}" -j "$(nproc)"

mkdir -p build/fuzz/artifacts
status=0
for t in "${targets[@]}"; do
  work=build/fuzz/corpus/$t
  rm -rf "$work" && mkdir -p "$work" && cp tests/fuzz/corpus/"$t"/* "$work"/
  if build/fuzz/tests/fuzz/"$t" "$work" -max_total_time="$seconds" -max_len=4096 \
       -artifact_prefix=build/fuzz/artifacts/"$t"- >build/fuzz/"$t".log 2>&1; then
    echo "$t: $(grep -o 'Done [0-9]* runs' build/fuzz/"$t".log | tail -n1) in ${seconds}s, no crash"
  else
    echo "$t: CRASH — see build/fuzz/$t.log and build/fuzz/artifacts/"
    status=1
  fi
done
exit $status
