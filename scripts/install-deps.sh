#!/usr/bin/env bash
# Installs, with apt-get, only the Debian packages onboard needs that are missing. Idempotent.
# Usage: scripts/install-deps.sh        (as root, or with sudo available)
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config clang libclang-rt-14-dev clang-format
  libtorch-dev libgloo-dev
  libonnx-dev libprotobuf-dev protobuf-compiler
  libcpp-httplib-dev libssl-dev nlohmann-json3-dev
  libgtest-dev libgmock-dev libsqlite3-dev sqlite3
  libcli11-dev libfmt-dev
  libhwy-dev
  libopenblas0-pthread   # the BLAS LibTorch loads (its thread pool starts before main: tests/e2e)
  chromium
  slurm-wlm munge          # tests/backends/slurm_probe_test.cpp: slurmctld + slurmd + munged on localhost
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
