#!/usr/bin/env bash
# Builds the Rust host of this folder against radix_mlp the documented ways (Cargo features `model`
# = radix-mlp's `full`, and `shared`), runs it, and checks what the binary loads:
#   1. full, shared, RADIX_MLP_LIB_DIR=BUILD_DIR: runs without LD_LIBRARY_PATH (rpath, see build.rs);
#   2. full, static, from the build folder (its radix_mlp-uninstalled.pc): no libradix_mlp.so;
#   3. full, shared, found through PKG_CONFIG_PATH alone (an installed prefix), rpath to the prefix;
#   4. the default (the planner alone, static) from the build folder: loads nothing of radix_mlp,
#      OpenBLAS, jansson or libstdc++; and with `shared`, loads libradix_mlp_plan and only that;
#   5. nothing set: the planner built from the sources radix-mlp-sys carries (no CMake), static
#      and shared (an rpath to it); a folder without the library, or no C compiler to build one: a
#      message saying what to set;
#   6. full, nothing set: the whole library built with CMake from those sources (RMLP_CONSUMER_FULL=0
#      skips this one, the slowest).
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
unset LD_LIBRARY_PATH RADIX_MLP_LIB_DIR PKG_CONFIG_PATH CC CFLAGS
mkdir "$scratch/empty"
system_libdir=${PKG_CONFIG_LIBDIR-unset} # CMake finds OpenBLAS and jansson through it in case 6
export PKG_CONFIG_LIBDIR="$scratch/empty" # no system .pc files: only what each case names
installed() { [ "$(cc -print-file-name="$1")" != "$1" ]; }

# cargo_build CASE [ARGS...]: builds into BUILD_DIR/rust_consumer/CASE (environment as set by the caller).
cargo_build() {
  local case=$1
  shift
  (cd "$here" && CARGO_TARGET_DIR="$build/rust_consumer/$case" cargo build --offline --quiet "$@")
}
bin() { echo "$build/rust_consumer/$1/debug/rust-consumer"; }
# built_here CASE LIB: the library file radix-mlp-sys built from its sources in CASE's output.
built_here() { find "$build/rust_consumer/$1/debug/build" -path '*radix-mlp-sys-*/out/*' -name "$2" | head -n1; }

echo "== 1. full, shared, from the build folder, run without LD_LIBRARY_PATH"
RADIX_MLP_LIB_DIR="$build" cargo_build shared --features model,shared
"$(bin shared)" "$fixture"
grep -q 'libradix_mlp.so' <<<"$(needed "$(bin shared)")" || fail "shared: needs $(needed "$(bin shared)")"

echo "== 2. full, static, from the build folder"
RADIX_MLP_LIB_DIR="$build" cargo_build static --features model
"$(bin static)" "$fixture"
if grep -q radix_mlp <<<"$(needed "$(bin static)")"; then fail "static: needs $(needed "$(bin static)")"; fi

echo "== 3. full, shared, from an installed prefix, through PKG_CONFIG_PATH"
cmake --install "$build" --prefix "$scratch/prefix" >/dev/null
pc=$(dirname "$(find "$scratch/prefix" -name radix_mlp.pc)")
PKG_CONFIG_PATH="$pc" cargo_build installed --features model,shared
"$(bin installed)" "$fixture"
readelf -d "$(bin installed)" | grep -q "PATH.*$scratch/prefix" || fail "installed: no rpath to the prefix"

echo "== 4. the default: the planner alone, static; then shared"
RADIX_MLP_LIB_DIR="$build" cargo_build plan_static
"$(bin plan_static)"
loads=$(ldd "$(bin plan_static)")
if grep -Eq 'radix_mlp|openblas|jansson|stdc\+\+|cudart' <<<"$loads"; then fail "plan_static loads: $loads"; fi
RADIX_MLP_LIB_DIR="$build" cargo_build plan_shared --features shared
"$(bin plan_shared)"
loads=$(ldd "$(bin plan_shared)")
grep -q libradix_mlp_plan <<<"$loads" || fail "plan_shared: does not load libradix_mlp_plan: $loads"
if grep -Eq 'openblas|jansson|stdc\+\+|cudart|libradix_mlp\.so' <<<"$loads"; then fail "plan_shared loads: $loads"; fi

echo "== 5. nothing set: the planner from the crate's sources; a wrong folder or no compiler: a message"
if installed libradix_mlp_plan.a; then
  echo "rust_consumer: (a libradix_mlp_plan.a is installed system-wide: the build from sources is not checked)"
else
  cargo_build from_source
  [ -n "$(built_here from_source libradix_mlp_plan.a)" ] || fail "from_source: no libradix_mlp_plan.a built from the sources"
  "$(bin from_source)"
  if grep -q radix_mlp <<<"$(needed "$(bin from_source)")"; then fail "from_source: needs $(needed "$(bin from_source)")"; fi
  cargo_build from_source_shared --features shared
  "$(bin from_source_shared)"
  grep -q "libradix_mlp_plan.so.0.3 => $build/rust_consumer/from_source_shared/" <<<"$(ldd "$(bin from_source_shared)")" ||
    fail "from_source_shared: does not load the libradix_mlp_plan it built: $(ldd "$(bin from_source_shared)")"
  if CC="$scratch/no-such-cc" cargo_build no_compiler >"$scratch/missing.log" 2>&1; then
    fail "built with no library and no C compiler"
  fi
  for advice in 'could not run the C compiler' 'RADIX_MLP_LIB_DIR=' 'PKG_CONFIG_PATH='; do
    grep -q "$advice" "$scratch/missing.log" || fail "no word of $advice: $(cat "$scratch/missing.log")"
  done
fi
if RADIX_MLP_LIB_DIR="$scratch/empty" cargo_build missing >"$scratch/wrong.log" 2>&1; then
  fail "built from an empty folder"
fi
grep -q "RADIX_MLP_LIB_DIR=$scratch/empty has no libradix_mlp_plan.a" "$scratch/wrong.log" ||
  fail "no word on the wrong folder: $(cat "$scratch/wrong.log")"

echo "== 6. full, shared, nothing set: the whole library built with CMake from the crate's sources"
if [ "${RMLP_CONSUMER_FULL:-1}" = 0 ]; then
  echo "rust_consumer: (RMLP_CONSUMER_FULL=0: skipped)"
elif installed libradix_mlp.so; then
  echo "rust_consumer: (a libradix_mlp.so is installed system-wide: the build from sources is not checked)"
else
  (if [ "$system_libdir" = unset ]; then unset PKG_CONFIG_LIBDIR; else export PKG_CONFIG_LIBDIR=$system_libdir; fi
   cargo_build full_from_source --features model,shared)
  [ -n "$(built_here full_from_source 'libradix_mlp.so*')" ] || fail "full_from_source: no libradix_mlp.so built"
  "$(bin full_from_source)" "$fixture"
fi
echo "rust_consumer: full shared (rpath), full static, installed (pkg-config), planner static and shared, from sources, and not-found cases passed"
