#!/usr/bin/env bash
# Builds the Rust host of this folder against a built radix_mlp the documented ways, runs it, and
# checks what the binary loads:
#   1. shared, RADIX_MLP_LIB_DIR=BUILD_DIR: runs without LD_LIBRARY_PATH (rpath, see build.rs);
#   2. RADIX_MLP_STATIC=1 from the build folder (its radix_mlp-uninstalled.pc): no libradix_mlp.so;
#   3. shared, found through PKG_CONFIG_PATH alone (an installed prefix), rpath to the prefix;
#   4. RADIX_MLP_PLAN_ONLY=1: loads libradix_mlp_plan, and neither OpenBLAS, jansson nor libstdc++;
#   5. nothing set, or a folder without the library: the build stops with a message saying what to set.
# Cargo's output stays in BUILD_DIR/rust_consumer/<case>, so later runs rebuild little.
# Usage: run.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
fixture="$here/../fixtures/qwen3_tiny"
# shellcheck disable=SC1091
if ! command -v cargo >/dev/null && [ -f "$HOME/.cargo/env" ]; then . "$HOME/.cargo/env"; fi
command -v cargo >/dev/null || { echo "rust_consumer: SKIPPED: cargo not found"; exit 77; }
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
fail() { echo "rust_consumer: FAILED: $*" >&2; exit 1; }
needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' '; }
unset LD_LIBRARY_PATH RADIX_MLP_LIB_DIR RADIX_MLP_STATIC RADIX_MLP_PLAN_ONLY PKG_CONFIG_PATH
mkdir "$scratch/empty"
export PKG_CONFIG_LIBDIR="$scratch/empty" # no system .pc files: only what each case names

# cargo_build CASE [ARGS...]: builds into BUILD_DIR/rust_consumer/CASE (environment as set by the caller).
cargo_build() {
  local case=$1
  shift
  (cd "$here" && CARGO_TARGET_DIR="$build/rust_consumer/$case" cargo build --offline --quiet "$@")
}
bin() { echo "$build/rust_consumer/$1/debug/rust-consumer"; }

echo "== 1. shared from the build folder, run without LD_LIBRARY_PATH"
RADIX_MLP_LIB_DIR="$build" cargo_build shared --features model
"$(bin shared)" "$fixture"
grep -q 'libradix_mlp.so' <<<"$(needed "$(bin shared)")" || fail "shared: needs $(needed "$(bin shared)")"

echo "== 2. RADIX_MLP_STATIC=1 from the build folder"
RADIX_MLP_LIB_DIR="$build" RADIX_MLP_STATIC=1 cargo_build static --features model
"$(bin static)" "$fixture"
if grep -q radix_mlp <<<"$(needed "$(bin static)")"; then fail "static: needs $(needed "$(bin static)")"; fi

echo "== 3. shared from an installed prefix, through PKG_CONFIG_PATH"
cmake --install "$build" --prefix "$scratch/prefix" >/dev/null
pc=$(dirname "$(find "$scratch/prefix" -name radix_mlp.pc)")
PKG_CONFIG_PATH="$pc" cargo_build installed --features model
"$(bin installed)" "$fixture"
readelf -d "$(bin installed)" | grep -q "PATH.*$scratch/prefix" || fail "installed: no rpath to the prefix"

echo "== 4. RADIX_MLP_PLAN_ONLY=1"
RADIX_MLP_LIB_DIR="$build" RADIX_MLP_PLAN_ONLY=1 cargo_build plan_only
"$(bin plan_only)"
loads=$(ldd "$(bin plan_only)")
grep -q libradix_mlp_plan <<<"$loads" || fail "plan_only: does not load libradix_mlp_plan: $loads"
if grep -Eq 'openblas|jansson|stdc\+\+|cudart|libradix_mlp\.so' <<<"$loads"; then fail "plan_only loads: $loads"; fi

echo "== 5. the library not found: a message saying what to set"
if [ "$(cc -print-file-name=libradix_mlp.so)" != libradix_mlp.so ]; then
  echo "rust_consumer: (a libradix_mlp.so is installed system-wide: the not-found case is not checked)"
else
  if cargo_build missing >"$scratch/missing.log" 2>&1; then fail "built with no library to link"; fi
  for advice in 'RADIX_MLP_LIB_DIR=' 'PKG_CONFIG_PATH='; do
    grep -q "$advice" "$scratch/missing.log" || fail "no word of $advice: $(cat "$scratch/missing.log")"
  done
fi
if RADIX_MLP_LIB_DIR="$scratch/empty" cargo_build missing >"$scratch/wrong.log" 2>&1; then
  fail "built from an empty folder"
fi
grep -q "RADIX_MLP_LIB_DIR=$scratch/empty has no libradix_mlp.so" "$scratch/wrong.log" ||
  fail "no word on the wrong folder: $(cat "$scratch/wrong.log")"
echo "rust_consumer: shared (rpath), static, installed (pkg-config), planner-only and not-found cases passed"
