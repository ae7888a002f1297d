#!/bin/sh
# rust_device_buffers.sh BUILD_DIR: the safe Rust crate's layer calls on device buffers
# (bindings/rust/radix-mlp/tests/device_buffers.rs) as a ctest of label gpu, so the GPU windows run
# it with the C tests: cargo test of that file against the CUDA library in BUILD_DIR (the crate is
# std only: --offline). Exit 77 (ctest's skip) where cargo is missing or the test skipped (no device,
# a build without CUDA), with its reason on the output.
set -u
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
if ! command -v cargo >/dev/null 2>&1; then
  echo "SKIP rust_device_buffers: no cargo on this machine"
  exit 77
fi
log="$build/rust_device_buffers.log"
cd "$here/../bindings/rust/radix-mlp" &&
  RADIX_MLP_LIB_DIR="$build" LD_LIBRARY_PATH="$build${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    CARGO_TARGET_DIR="$build/cargo-gpu" cargo test --offline --test device_buffers -- --test-threads 1 >"$log" 2>&1
status=$?
cat "$log"
[ $status -ne 0 ] && exit $status
grep -q "SKIP device_buffers::" "$log" && exit 77
exit 0
