#!/usr/bin/env bash
# Runs the Python bindings' tests against a built libradix_mlp.
# Usage: bindings/python/run_tests.sh LIB_DIR   (a folder holding libradix_mlp.so.0.3, e.g. build/)
# Needs Debian's python3 with numpy and pytest (apt-get install python3-numpy python3-pytest).
set -euo pipefail
if [ $# -lt 1 ] || [ ! -d "$1" ]; then
  echo "usage: $0 LIB_DIR (the folder holding libradix_mlp.so.0.3)" >&2
  exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
export RADIX_MLP_LIB_DIR=$(cd "$1" && pwd)
unset RADIX_MLP_LIB RADIX_MLP_THRESHOLD RADIX_MLP_PAD RADIX_MLP_GATE
export PYTHONDONTWRITEBYTECODE=1
cd "$here/../.."
exec /usr/bin/python3 -m pytest -q -p no:cacheprovider bindings/python/tests
