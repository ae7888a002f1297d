#!/usr/bin/env bash
# Runs the tests that need torch and transformers (bindings/python/tests_torch: radix_mlp.torch's
# training on the library's plan against the plain transformers model, and the library's reading of
# config.json against transformers' own, test_config_keys.py) against a built libradix_mlp.
# Usage: bindings/python/run_torch_tests.sh LIB_DIR   (a folder holding libradix_mlp.so.0.3, e.g. build/)
#
# Needs a python with numpy, torch, transformers and safetensors: RADIX_MLP_TORCH_PYTHON if set, else the
# first of `python3` on PATH and /usr/bin/python3 that has them. Where none has them, it installs the
# tested versions from PyPI with pip into LIB_DIR/torch_pydeps (pip --target, nothing system-wide; the
# torch wheel from PyPI brings its CUDA libraries: several GB, once) unless RADIX_MLP_TORCH_INSTALL=0;
# where that cannot be done (no pip, PyPI unreachable, under 10 GiB free on LIB_DIR's disk) it says
# SKIPPED and why, and exits 0. The tests are unittest modules (no pytest needed); about a minute on
# 2 cores.
set -euo pipefail
if [ $# -lt 1 ] || [ ! -d "$1" ]; then
  echo "usage: $0 LIB_DIR (the folder holding libradix_mlp.so.0.3)" >&2
  exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
lib=$(cd "$1" && pwd)
export RADIX_MLP_LIB_DIR="$lib"
unset RADIX_MLP_LIB RADIX_MLP_THRESHOLD RADIX_MLP_PAD RADIX_MLP_GATE
export PYTHONDONTWRITEBYTECODE=1
deps="$lib/torch_pydeps"
packages=(torch==2.15.0 transformers==5.23.0)
probe='import numpy, torch, transformers, safetensors; print("torch %s, transformers %s" % (torch.__version__, transformers.__version__))'

skip() {
  echo "== radix_mlp.torch tests: SKIPPED: $*"
  exit 0
}

candidates=()
[ -n "${RADIX_MLP_TORCH_PYTHON:-}" ] && candidates+=("$RADIX_MLP_TORCH_PYTHON")
candidates+=(python3 /usr/bin/python3)

py="" versions=""
for c in "${candidates[@]}"; do
  command -v "$c" >/dev/null 2>&1 || continue
  if versions=$("$c" -c "$probe" 2>/dev/null); then
    py=$(command -v "$c")
    break
  fi
done

if [ -z "$py" ]; then
  # No python has them: the cached install, else install it from PyPI.
  for c in "${candidates[@]}"; do
    if command -v "$c" >/dev/null 2>&1 && "$c" -m pip --version >/dev/null 2>&1; then
      py=$(command -v "$c")
      break
    fi
  done
  [ -n "$py" ] || skip "no python with torch and transformers, and no pip to install them (apt-get install python3-pip)"
  if [ "$(cat "$deps/.installed" 2>/dev/null)" != "$py ${packages[*]}" ]; then
    [ "${RADIX_MLP_TORCH_INSTALL:-1}" != 0 ] ||
      skip "no python with torch and transformers (RADIX_MLP_TORCH_INSTALL=0: not installing ${packages[*]})"
    rm -rf "$deps"
    # The wheels unpack to ~6 GB; a disk that fills mid-install would starve the steps after this one.
    free_kb=$(df -Pk "$lib" | awk 'NR == 2 { print $4 }')
    [ "${free_kb:-0}" -ge $((10 * 1024 * 1024)) ] ||
      skip "$((${free_kb:-0} / 1024)) MiB free on the disk of $lib, 10 GiB needed to install ${packages[*]}"
    echo "radix_mlp.torch tests: pip install --target $deps ${packages[*]} (from PyPI, several GB with CUDA libraries)"
    if ! log=$("$py" -m pip install --quiet --disable-pip-version-check --no-cache-dir --timeout 60 --retries 2 \
      --target "$deps" "${packages[@]}" 2>&1); then
      rm -rf "$deps"
      skip "pip could not install ${packages[*]} from PyPI: $(tail -n 1 <<<"$log")"
    fi
    echo "$py ${packages[*]}" >"$deps/.installed"
  fi
  export PYTHONPATH="$deps${PYTHONPATH:+:$PYTHONPATH}"
  versions=$("$py" -c "$probe" 2>&1) || skip "torch/transformers installed in $deps do not import: $(tail -n 1 <<<"$versions")"
fi

echo "== radix_mlp.torch tests with $py ($versions)"
export PYTHONPATH="$root/bindings/python${PYTHONPATH:+:$PYTHONPATH}"
cd "$root"
exec "$py" -m unittest discover -v -s bindings/python/tests_torch -t bindings/python/tests_torch
