#!/usr/bin/env bash
# Installs a built radix_mlp into a scratch prefix, then builds and runs the C host against it
# three ways: CMake find_package (shared and static library) and pkg-config.
# Usage: run.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cmake --install "$build" --prefix "$scratch/prefix" >/dev/null
cmake -S "$here" -B "$scratch/host" -DCMAKE_PREFIX_PATH="$scratch/prefix" >/dev/null
cmake --build "$scratch/host" >/dev/null
"$scratch/host/c_host_shared"
"$scratch/host/c_host_static"
libdir=$(dirname "$(find "$scratch/prefix" -name radix_mlp.pc)")/..
export PKG_CONFIG_PATH="$libdir/pkgconfig"
# shellcheck disable=SC2046
cc -std=c11 -Wall -Werror -o "$scratch/c_host_pc" "$here/main.c" $(pkg-config --cflags --libs radix_mlp)
LD_LIBRARY_PATH="$libdir" "$scratch/c_host_pc"
echo "c_host: find_package (shared, static) and pkg-config consumers passed"
