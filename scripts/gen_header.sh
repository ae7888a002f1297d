#!/usr/bin/env bash
# Regenerates the C headers from the ABI crate: ffi/include/radix_mlp.h and its parts, one per
# module of bindings/rust/radix-mlp-sys/src/, in ffi/include/radix_mlp/, and their types in
# ffi/include/radix_mlp/types.h and radix_mlp/types/ (scripts/gen_header.py says how).
# Usage: scripts/gen_header.sh [OUTDIR]   (default: ffi/include, the committed headers)
set -euo pipefail
exec python3 "$(cd "$(dirname "$0")" && pwd)/gen_header.py" "$@"
