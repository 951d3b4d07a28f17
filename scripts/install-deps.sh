#!/usr/bin/env bash
# Installs, with apt-get, only the Debian packages onboard needs that are missing. Idempotent.
# Usage: scripts/install-deps.sh        (as root, or with sudo available)
#        ONBOARD_ENGINE_CHECKS=1 scripts/install-deps.sh   also the Python packages the engines' own
#        validation of the exports needs (scripts/check-exports-with-engines.sh; `make test` does not)
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
# Optional: Debian's torch and what Megatron-LM, torchtitan, Megatron-Bridge and MindSpeed-LLM import on
# the way to their argument/config validation (the engines' sources are checkouts, not packages:
# scripts/README.md, "Engine checkouts"). Left out by default so a plain install and `make test` stay as
# they are.
if [ "${ONBOARD_ENGINE_CHECKS:-0}" = 1 ]; then
  PACKAGES+=(
    python3-torch python3-numpy python3-packaging python3-yaml
    python3-filelock python3-fsspec python3-tqdm python3-regex python3-httpx python3-typer
    python3-omegaconf python3-rich python3-six python3-scipy python3-pil
  )
fi

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
