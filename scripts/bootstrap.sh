#!/usr/bin/env bash
# Installs the Debian packages tribunal builds and runs with, if any is missing.
# Idempotent: does nothing (and needs no network) when everything is already installed.
#
#   scripts/bootstrap.sh                    the native build's packages
#   scripts/bootstrap.sh --cross aarch64    also the arm64 cross build's: Debian's cross compiler,
#                                           qemu-user to run its binaries, and the libraries as
#                                           multiarch :arm64 packages (adds the arm64 architecture)
set -euo pipefail

cross=
case "${1:-}" in
  "") ;;
  --cross)
    [ "${2:-}" = aarch64 ] || { echo "bootstrap: --cross supports only aarch64" >&2; exit 2; }
    cross=aarch64
    ;;
  *) echo "usage: scripts/bootstrap.sh [--cross aarch64]" >&2; exit 2 ;;
esac

packages=(
  build-essential cmake ninja-build ccache pkg-config clang clang-format libclang-rt-14-dev python3 python3-numpy
  libboost1.81-dev libboost-context1.81-dev libsodium-dev libfmt-dev doctest-dev libtomlplusplus-dev zlib1g-dev
  libzstd-dev zstd
  libopenblas-dev nlohmann-json3-dev libsqlite3-dev libcli11-dev libspdlog-dev prometheus-cpp-dev
  libonnx-dev libprotobuf-dev libonnx-testdata
  librust-blake3-dev b3sum
  libssl-dev openssl chromium systemd
  openmpi-bin libopenmpi-dev
  dataset-fashion-mnist fortunes
)
if [ "$cross" = aarch64 ]; then
  # Only what the aarch64 preset builds (tribunal and test_ops): no OpenBLAS (benchmarks only).
  # Header-only packages (nlohmann-json, CLI11, doctest) are architecture-independent: the native
  # ones above serve the cross build too. libc6:arm64 gives qemu-aarch64 the arm64 loader.
  # prometheus-cpp-dev:arm64 cannot sit beside the native one (its civetweb is not multiarch): the
  # cross build links the arm64 core library and uses the native package's headers (CMakeLists.txt).
  # libonnx-dev:arm64 cannot either (both architectures ship /usr/lib/libonnxifi.so): the cross build
  # links libonnx1:arm64 with the native headers (onnx/CMakeLists.txt).
  packages+=(
    g++-aarch64-linux-gnu qemu-user libc6:arm64
    libsodium-dev:arm64 libfmt-dev:arm64 libtomlplusplus-dev:arm64 zlib1g-dev:arm64 libzstd-dev:arm64
    libsqlite3-dev:arm64 libboost1.81-dev:arm64 libssl-dev:arm64
    libspdlog-dev:arm64 libprometheus-cpp-core1.0:arm64 libonnx1:arm64 libprotobuf-dev:arm64
  )
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "bootstrap: installing ${missing[*]}" >&2
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
if [ "$cross" = aarch64 ] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
  "${sudo_cmd[@]}" dpkg --add-architecture arm64
fi
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
