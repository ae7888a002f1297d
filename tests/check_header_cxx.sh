#!/usr/bin/env bash
# check_header_cxx.sh CXX INCLUDE_DIR SOURCE: compiles SOURCE (tests/header_cxx.cpp) against the
# public header as C++11 with every warning an error, and runs it; then compiles each part of the
# header, radix_mlp/<module>.h, radix_mlp/types.h and radix_mlp/types/<module>.h, included alone, as
# C99, C11 and C++11 (each part includes what it needs). Exit 77 (skip) without CXX.
set -euo pipefail
cxx=${1:-} include=$2 source=$3
if [ -z "$cxx" ] || ! command -v "$cxx" >/dev/null; then
  echo "SKIP: no C++ compiler found (install g++ or clang++ to check the header as C++)"
  exit 77
fi
cc=${CC:-cc}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$cxx" -std=c++11 -Wall -Wextra -Werror -pedantic -I "$include" "$source" -o "$dir/header_cxx"
"$dir/header_cxx"
parts=0 types=0
for part in "$include"/radix_mlp/*.h "$include"/radix_mlp/types/*.h; do
  name=${part#"$include"/}
  case $name in radix_mlp/types/*) types=$((types + 1)) ;; esac
  printf '#include "%s"\n#include "%s"\nint rmlp_part_check;\n' "$name" "$name" >"$dir/part.c"
  for std in c99 c11; do
    "$cc" -std=$std -Wall -Wextra -Werror -pedantic -I "$include" -c "$dir/part.c" -o "$dir/part.o" ||
      { echo "header part $name does not compile alone as $std" >&2; exit 1; }
  done
  cp "$dir/part.c" "$dir/part.cpp"
  "$cxx" -std=c++11 -Wall -Wextra -Werror -pedantic -I "$include" -c "$dir/part.cpp" -o "$dir/part.o" ||
    { echo "header part $name does not compile alone as C++11" >&2; exit 1; }
  parts=$((parts + 1))
done
[ "$parts" -ge 20 ] && [ "$types" -ge 10 ] ||
  { echo "expected the header's parts under $include/radix_mlp/ and radix_mlp/types/," \
      "found $parts ($types types)" >&2; exit 1; }
echo "header_cxx: radix_mlp.h compiles as C++11 ($cxx), status codes a typed enum, rmlp_status int32_t;" \
  "its $parts parts ($types of them type headers) each compile alone as C99, C11 and C++11"
