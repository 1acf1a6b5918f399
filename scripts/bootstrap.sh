#!/usr/bin/env bash
# Installs the Debian packages tribunal builds and runs with, if any is missing.
# Idempotent: does nothing (and needs no network) when everything is already installed.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config clang python3
  libboost1.81-dev libsodium-dev libfmt-dev doctest-dev libtomlplusplus-dev zlib1g-dev
  libopenblas-dev nlohmann-json3-dev libsqlite3-dev libcli11-dev
  dataset-fashion-mnist fortunes
)

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
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
