#!/bin/sh
# rust_device_buffers.sh BUILD_DIR: the safe Rust crate's layer calls on device buffers
# (bindings/rust/radix-mlp/tests/device_buffers.rs) as a ctest of label gpu, so the GPU windows run
# it with the C tests: cargo test of that file against the CUDA library in BUILD_DIR (the crate is
# std only: --offline). Where cargo is missing (the lent GPU machines), the test binary built
# elsewhere by scripts/device/rust_prebuilt.sh (.rust-device/device_buffers, carried) runs against
# BUILD_DIR's library instead. Exit 77 (ctest's skip) where neither is there or the test skipped (no
# device, a build without CUDA), with its reason on the output.
set -u
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
prebuilt="$root/.rust-device/device_buffers"
log="$build/rust_device_buffers.log"
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
if command -v cargo >/dev/null 2>&1; then
  cd "$root/bindings/rust/radix-mlp" &&
    RADIX_MLP_LIB_DIR="$build" LD_LIBRARY_PATH="$build${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
      CARGO_TARGET_DIR="$build/cargo-gpu" cargo test --offline --test device_buffers -- --test-threads 1 >"$log" 2>&1
  status=$?
elif [ -x "$prebuilt" ]; then
  echo "rust_device_buffers: no cargo here: the binary scripts/device/rust_prebuilt.sh built from" \
    "$(cat "$root/.rust-device/SOURCE" 2>/dev/null || echo 'an unknown commit'), against $build"
  RADIX_MLP_FIXTURES="$root/integration_tests/fixtures" LD_LIBRARY_PATH="$build${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    "$prebuilt" --test-threads 1 >"$log" 2>&1
  status=$?
else
  echo "SKIP rust_device_buffers: no cargo on this machine and no .rust-device/device_buffers" \
    "(build it where cargo is: scripts/device/rust_prebuilt.sh; carry [\".rust-device\"])"
  exit 77
fi
cat "$log"
[ $status -ne 0 ] && exit $status
grep -q "SKIP device_buffers::" "$log" && exit 77
exit 0
