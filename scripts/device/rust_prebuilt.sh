#!/usr/bin/env bash
# rust_prebuilt.sh [BUILD_DIR]: builds, here, the safe Rust crate's device-buffer test
# (bindings/rust/radix-mlp/tests/device_buffers.rs) into .rust-device/device_buffers, for a GPU
# machine without cargo (the lent ones have none): tests/rust_device_buffers.sh runs that binary
# there against the library the machine built, so the window checks the layer calls on device
# buffers from safe Rust too. BUILD_DIR (default build/) is a CUDA build of the library here, to link
# against; the binary loads libradix_mlp.so.0.3 by its soname from LD_LIBRARY_PATH at run time.
# Stripped, about 1.3 MB (carry [".rust-device"]); .rust-device/SOURCE names the commit it was built
# from (with "+changes" when the tree differed), which the test prints.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
build=$(cd "${1:-build}" && pwd)
if ! nm -D "$build/libradix_mlp.so" 2>/dev/null | grep ' T rmlp_cuda_device_count' >/dev/null; then # not -q: with pipefail, nm's SIGPIPE would fail the test
  echo "rust_prebuilt: $build/libradix_mlp.so is missing or has no rmlp_cuda_device_count" >&2
  exit 1
fi
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
target="$build/cargo-prebuilt"
out=$(cd bindings/rust/radix-mlp &&
  RADIX_MLP_LIB_DIR="$build" CARGO_TARGET_DIR="$target" cargo test --offline --test device_buffers --no-run \
    --message-format short 2>&1) || {
  echo "$out" >&2
  exit 1
}
bin=$(sed -n 's/.*Executable tests\/device_buffers\.rs (\(.*\))$/\1/p' <<<"$out" | tail -n 1)
[ -x "$bin" ] || {
  echo "rust_prebuilt: cargo named no test executable:" >&2
  echo "$out" >&2
  exit 1
}
mkdir -p .rust-device
strip -o .rust-device/device_buffers "$bin"
changes=$(git status --porcelain --untracked-files=no | grep -q . && echo "+changes" || true)
echo "$(git rev-parse --short HEAD)$changes" >.rust-device/SOURCE
echo "rust_prebuilt: $root/.rust-device/device_buffers ($(du -h .rust-device/device_buffers | cut -f1)," \
  "from $(cat .rust-device/SOURCE)): carry [\".rust-device\"]"
