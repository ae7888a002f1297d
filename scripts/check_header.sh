#!/usr/bin/env bash
# Fails when the committed C headers (ffi/include/radix_mlp.h, ffi/include/radix_mlp/*.h and
# ffi/include/radix_mlp/types/*.h) differ from what scripts/gen_header.sh generates from the ABI
# crate, or when either folder holds a header it does not generate.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
fresh=$(mktemp -d)
trap 'rm -rf "$fresh"' EXIT
"$root/scripts/gen_header.sh" "$fresh"
if ! diff -u "$root/ffi/include/radix_mlp.h" "$fresh/radix_mlp.h" ||
   ! diff -ru "$root/ffi/include/radix_mlp" "$fresh/radix_mlp"; then
  echo "header drift: ffi/include/radix_mlp.h or ffi/include/radix_mlp/ is stale; run scripts/gen_header.sh and commit them" >&2
  exit 1
fi
echo "header drift: ffi/include/radix_mlp.h, radix_mlp/*.h and radix_mlp/types/*.h match bindings/rust/radix-mlp-sys/src/"
