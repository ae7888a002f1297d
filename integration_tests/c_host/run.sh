#!/usr/bin/env bash
# Installs a built radix_mlp into a scratch prefix (checking every header of ffi/include is there,
# as it is), then builds and runs C hosts against it every documented way and checks what each
# binary loads (model_host.c uses the model, plan_host.c only the planner):
#   1. CMake, a C-only project: find_package(radix_mlp), the shared, static and planner targets;
#   2. the same in a consumer image without the CUDA toolkit and pkg-config (both hidden from CMake):
#      the shared and planner targets work, COMPONENTS static fails naming what is missing;
#   3. pkg-config: radix_mlp shared and --static (libradix_mlp.a), radix_mlp_plan.
# Usage: run.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
fixture="$here/../fixtures/qwen3_tiny"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
fail() { echo "c_host: FAILED: $*" >&2; exit 1; }
needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' '; }
# not_loading BINARY: fails when BINARY (or what it loads) pulls in the model code's dependencies.
not_loading() {
  local loads
  loads=$(ldd "$1")
  if grep -Eq 'openblas|jansson|stdc\+\+|cudart|gfortran|libradix_mlp\.so' <<<"$loads"; then
    fail "$(basename "$1") loads more than the planner: $loads"
  fi
}
# log_has FILE TEXT: FILE contains TEXT, CMake's line wrapping aside.
log_has() { tr -s ' \n' ' ' <"$1" | grep -qF "$2"; }
static_of_radix_mlp() { # BINARY: must not need any shared libradix_mlp*
  if grep -q radix_mlp <<<"$(needed "$1")"; then fail "$(basename "$1") needs $(needed "$1")"; fi
}

prefix="$scratch/prefix"
cmake --install "$build" --prefix "$prefix" >/dev/null
# Every header of ffi/include (radix_mlp.h, its parts, radix_mlp/types/) is installed, as it is.
includedir=$(dirname "$(find "$prefix" -name radix_mlp.h)")
diff -r "$here/../../ffi/include" "$includedir" >"$scratch/headers.diff" ||
  fail "the installed headers differ from ffi/include: $(cat "$scratch/headers.diff")"
libdir=$(dirname "$(find "$prefix" -name radix_mlp.pc)")/..
libdir=$(cd "$libdir" && pwd)
cuda_build=false
if grep -q 'set(radix_mlp_WITH_CUDA ON)' "$libdir/cmake/radix_mlp/radix_mlpConfig.cmake"; then cuda_build=true; fi

# The planner library needs nothing beyond libc.
for lib in "$libdir"/libradix_mlp_plan.so.*.*.*; do
  for dep in $(needed "$lib"); do
    case $dep in libc.so.* | ld-linux*) ;; *) fail "$(basename "$lib") needs $dep" ;; esac
  done
done

echo "== CMake consumer (C only): shared, static, planner"
cmake -S "$here" -B "$scratch/host" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$scratch/host" >/dev/null
"$scratch/host/model_host_shared" "$fixture"
"$scratch/host/model_host_static" "$fixture"
static_of_radix_mlp "$scratch/host/model_host_static"
"$scratch/host/plan_host_shared"
not_loading "$scratch/host/plan_host_shared"
"$scratch/host/plan_host_static"
static_of_radix_mlp "$scratch/host/plan_host_static"

echo "== CMake consumer without the CUDA toolkit and pkg-config"
bare=(-DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON
  -DCMAKE_DISABLE_FIND_PACKAGE_PkgConfig=ON)
cmake -S "$here" -B "$scratch/bare" "${bare[@]}" -DC_HOST_STATIC=OFF >"$scratch/bare.log" 2>&1 ||
  fail "find_package(radix_mlp) without the CUDA toolkit and pkg-config: $(cat "$scratch/bare.log")"
log_has "$scratch/bare.log" 'radix_mlp::radix_mlp_static is not defined' ||
  fail "no word on the missing static target: $(cat "$scratch/bare.log")"
cmake --build "$scratch/bare" >/dev/null
"$scratch/bare/model_host_shared" "$fixture"
"$scratch/bare/plan_host_shared"
if cmake -S "$here" -B "$scratch/bare_static" "${bare[@]}" -DC_HOST_REQUIRE_STATIC=ON >"$scratch/static.log" 2>&1; then
  fail "COMPONENTS static was found without its dependencies"
fi
log_has "$scratch/static.log" 'what it links was not found: openblas (pkg-config module)' ||
  fail "$(cat "$scratch/static.log")"
if $cuda_build && ! log_has "$scratch/static.log" 'find_package(CUDAToolkit)'; then fail "$(cat "$scratch/static.log")"; fi

echo "== pkg-config consumer: shared, --static, planner"
export PKG_CONFIG_PATH="$libdir/pkgconfig"
cc=(cc -std=c11 -Wall -Werror)
# shellcheck disable=SC2046
"${cc[@]}" -o "$scratch/pc_shared" "$here/model_host.c" $(pkg-config --cflags --libs radix_mlp) -lm
LD_LIBRARY_PATH="$libdir" "$scratch/pc_shared" "$fixture"
static_libs=$(pkg-config --static --libs radix_mlp)
# shellcheck disable=SC2046,SC2086
"${cc[@]}" -o "$scratch/pc_static" "$here/model_host.c" $(pkg-config --cflags radix_mlp) \
  ${static_libs/-lradix_mlp/-l:libradix_mlp.a} -lm
"$scratch/pc_static" "$fixture"
static_of_radix_mlp "$scratch/pc_static"
# shellcheck disable=SC2046
"${cc[@]}" -o "$scratch/pc_plan" "$here/plan_host.c" $(pkg-config --cflags --libs radix_mlp_plan)
LD_LIBRARY_PATH="$libdir" "$scratch/pc_plan"
LD_LIBRARY_PATH="$libdir" not_loading "$scratch/pc_plan"
echo "c_host: CMake (shared, static, planner; no CUDA toolkit) and pkg-config (shared, --static, planner) passed"
