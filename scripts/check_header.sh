#!/usr/bin/env bash
# Fails when ffi/include/radix_mlp.h differs from what cbindgen generates from the ABI crate.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
fresh=$(mktemp)
trap 'rm -f "$fresh"' EXIT
"$root/scripts/gen_header.sh" "$fresh"
if ! diff -u "$root/ffi/include/radix_mlp.h" "$fresh"; then
  echo "header drift: ffi/include/radix_mlp.h is stale; run scripts/gen_header.sh and commit it" >&2
  exit 1
fi
echo "header drift: ffi/include/radix_mlp.h matches bindings/rust/radix-mlp-sys/src/"
