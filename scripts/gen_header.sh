#!/usr/bin/env bash
# Regenerates ffi/include/radix_mlp.h from the ABI crate with cbindgen, which reads src/lib.rs and
# the modules it declares (one per object), in the order lib.rs declares them.
# Usage: scripts/gen_header.sh [OUTPUT]   (default: the committed header)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/ffi/include/radix_mlp.h}
crate=$root/bindings/rust/radix-mlp-sys
command -v cbindgen >/dev/null || { echo "gen_header: cbindgen not found (apt-get install cbindgen)" >&2; exit 2; }
cbindgen --quiet --config "$crate/cbindgen.toml" --lang c --output "$out" "$crate/src/lib.rs"
