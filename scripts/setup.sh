#!/usr/bin/env bash
# Installs what radix-mlp needs from Debian's packages (when run as root and something is
# missing), fetches FlashInfer's headers when nvcc is found, and builds into build/ (CUDA too when
# nvcc is found): the library and `radixmlp` (the main job), or with --tests (scripts/test.sh)
# everything, with the packages the tests need.
# Usage: scripts/setup.sh [--tests] [extra cmake arguments]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
tests=0
if [ "${1:-}" = --tests ]; then
  tests=1
  shift
fi

packages=(build-essential cmake pkg-config cbindgen libopenblas-dev libjansson-dev libdnnl-dev python3 python3-numpy python3-pip
  python3-pytest valgrind clang libclang-rt-14-dev
  librust-hyper-dev librust-tokio-dev librust-serde-json-dev librust-serde-derive-dev librust-prometheus-dev
  librust-httparse-dev librust-socket2-dev)
# Without --tests, only what the library and radixmlp need (python3: CMake's configure of the tests).
((tests)) || packages=(build-essential cmake pkg-config libopenblas-dev libjansson-dev libdnnl-dev python3)
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
((tests == 0)) || command -v cargo >/dev/null 2>&1 || [ -x "$HOME/.cargo/bin/cargo" ] || missing+=(cargo)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: missing Debian packages: ${missing[*]} (run as root, or apt-get install them)" >&2
    exit 1
  fi
  echo "setup: installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# FlashInfer's attention kernels for the CUDA build (gpu/flashinfer.cu): the headers they include, from a
# pinned flashinfer-python wheel on PyPI (checked against its sha256), into third_party/flashinfer/ (ignored
# by git; a GPU machine gets them carried, gpu/CHECKLIST.md). Only where nvcc is; without them (no network)
# the CUDA build runs the reference attention kernel and says so.
FLASHINFER_VERSION=0.7.2.post1
FLASHINFER_SHA256=bfdc18b9e1e4d8d0730fe4343dc0e284cd0c160086de80f99888bc4867922d49
nvcc=$(command -v nvcc || { [ -x /usr/local/cuda/bin/nvcc ] && echo /usr/local/cuda/bin/nvcc; } || true)
if [ -n "$nvcc" ]; then
  python3 scripts/fetch_flashinfer.py "$FLASHINFER_VERSION" "$FLASHINFER_SHA256" third_party/flashinfer \
    "$(dirname "$nvcc")/../include" || echo "setup: FlashInfer's headers not fetched: CUDA attention is the reference kernel"
fi

# The main job's CUDA build is for one architecture: this machine's GPU (nvidia-smi), else 90; the seven of
# a release build (docs/building.md) take about 10 minutes of CPU more. CUDA_COMPUTE_CAP, or an argument
# naming CMAKE_CUDA_ARCHITECTURES or CUDA_COMPUTE_CAP, chooses instead; --tests passes its own.
arch_args=()
if ((tests == 0)) && [ -n "$nvcc" ] && [ -z "${CUDA_COMPUTE_CAP:-}" ] && [[ " $* " != *" -DCMAKE_CUDA_ARCHITECTURES"* ]] &&
  [[ " $* " != *" -DCUDA_COMPUTE_CAP"* ]]; then
  cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d ' .' || true)
  [[ "$cap" =~ ^[0-9]+$ ]] || cap=90
  arch_args=(-DCUDA_COMPUTE_CAP="$cap")
  echo "setup: CUDA for architecture $cap only (all seven: scripts/setup.sh -DCUDA_COMPUTE_CAP=)"
fi

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "${arch_args[@]}" "$@" >/dev/null
if ((tests)); then
  cmake --build build -j"$(nproc)"
else
  cmake --build build -j"$(nproc)" --target radixmlp
  echo "setup: built libradix_mlp and build/radixmlp; the tests, examples and other programs: scripts/setup.sh --tests"
fi
