#!/usr/bin/env bash
# device_deps.sh: the Debian packages the build needs (OpenBLAS, jansson, pkg-config), for a GPU
# machine that has CUDA but not these and cannot reach a package registry (see gpu/CHECKLIST.md).
#   gpu/device_deps.sh fetch DIR            here, with apt: download the .debs into DIR
#   . gpu/device_deps.sh install DIR PREFIX there: unpack them under PREFIX (no root, no dpkg
#                                           database), write relocated openblas.pc / jansson.pc to
#                                           PREFIX/pkgconfig and export PKG_CONFIG_PATH, PATH and
#                                           LD_LIBRARY_PATH for cmake and the tests.
# dpkg -x runs no maintainer scripts, so Debian's update-alternatives link openblas.pc ->
# openblas-pthread/pkgconfig/openblas.pc is made here by hand.
[[ "${BASH_SOURCE[0]}" == "$0" ]] && set -euo pipefail # strict when run, not leaking into a shell that sources it
packages="libopenblas-dev libopenblas-pthread-dev libopenblas0-pthread libgfortran5 libjansson-dev libjansson4
  pkgconf pkgconf-bin libpkgconf3 pkg-config"
case "${1:-}" in
fetch)
  mkdir -p "$2"
  (cd "$2" && apt-get download $packages)
  ;;
install)
  dir=$(cd "$2" && pwd)
  mkdir -p "$3"
  prefix=$(cd "$3" && pwd)
  for deb in "$dir"/*.deb; do dpkg -x "$deb" "$prefix"; done
  mkdir -p "$prefix/pkgconfig"
  arch=x86_64-linux-gnu
  sed "s|=/usr/|=$prefix/usr/|g" "$prefix/usr/lib/$arch/openblas-pthread/pkgconfig/openblas.pc" >"$prefix/pkgconfig/openblas.pc"
  sed "s|^prefix=/usr|prefix=$prefix/usr|" "$prefix/usr/lib/$arch/pkgconfig/jansson.pc" >"$prefix/pkgconfig/jansson.pc"
  export PKG_CONFIG_PATH="$prefix/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  export LD_LIBRARY_PATH="$prefix/usr/lib/$arch:$prefix/usr/lib/$arch/openblas-pthread${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  command -v pkg-config >/dev/null || export PATH="$prefix/usr/bin:$PATH"
  pkg-config --modversion openblas jansson
  ;;
*)
  echo "usage: gpu/device_deps.sh fetch DIR | . gpu/device_deps.sh install DIR PREFIX" >&2
  return 2 2>/dev/null || exit 2
  ;;
esac
