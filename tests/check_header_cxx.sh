#!/usr/bin/env bash
# check_header_cxx.sh CXX INCLUDE_DIR SOURCE: compiles SOURCE (tests/header_cxx.cpp) against the
# public header as C++11 with every warning an error, and runs it. Exit 77 (skip) without CXX.
set -euo pipefail
cxx=${1:-} include=$2 source=$3
if [ -z "$cxx" ] || ! command -v "$cxx" >/dev/null; then
  echo "SKIP: no C++ compiler found (install g++ or clang++ to check the header as C++)"
  exit 77
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$cxx" -std=c++11 -Wall -Wextra -Werror -pedantic -I "$include" "$source" -o "$dir/header_cxx"
"$dir/header_cxx"
echo "header_cxx: radix_mlp.h compiles as C++11 ($cxx), status codes a typed enum, rmlp_status int32_t"
