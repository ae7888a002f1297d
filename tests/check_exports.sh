#!/usr/bin/env bash
# check_exports.sh LIBRARY: the shared library defines rmlp_* dynamic symbols and no others
# (cmake/radix_mlp.map), so a host linking it gets the C ABI and nothing of the C++ inside.
set -euo pipefail
lib=$1
symbols=$(nm -D --defined-only "$lib" | awk 'NF == 3 {print $3}')
ours=$(grep -c '^rmlp_' <<<"$symbols" || true)
others=$(grep -v '^rmlp_' <<<"$symbols" || true)
if [ "$ours" -eq 0 ]; then
  echo "FAIL: $lib exports no rmlp_* symbol (nm -D found: ${symbols:-nothing})"
  exit 1
fi
if [ -n "$others" ]; then
  echo "FAIL: $lib exports symbols besides rmlp_*:"
  echo "$others"
  exit 1
fi
echo "$lib: $ours rmlp_* symbols exported, nothing else"
