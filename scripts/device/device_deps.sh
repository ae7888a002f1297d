#!/usr/bin/env bash
# device_deps.sh: the Debian packages the build needs (OpenBLAS, jansson, pkg-config), for a GPU
# machine that has CUDA but not these and cannot reach a package registry (see gpu/CHECKLIST.md).
#   scripts/device/device_deps.sh fetch DIR            here, with apt: download the .debs into DIR (~8 MB:
#                                           their static libraries are taken out, below),
#                                           and oneDNN's into DIR-onednn (~7 MB; a folder of its own,
#                                           carried by command 4 alone: the three no longer fit one
#                                           call beside FlashInfer's headers, scripts/device/carry_size.sh);
#                                           oneDNN .debs an older fetch left in DIR are removed from it;
#   . scripts/device/device_deps.sh install DIR PREFIX there: unpack them under PREFIX (no root, no dpkg
#                                           database), write relocated openblas.pc / jansson.pc to
#                                           PREFIX/pkgconfig and export PKG_CONFIG_PATH, PATH and
#                                           LD_LIBRARY_PATH for cmake and the tests;
#   . scripts/device/device_deps.sh install-onednn DIR PREFIX  there: oneDNN's .debs of DIR (DIR-onednn
#                                           above) alone.
# A .deb is unpacked with dpkg-deb where the machine has it, else without dpkg: its data member
# (an ar archive's data.tar.xz, .zst or .gz) through ar and tar (xz, else python3's lzma);
# RMLP_DEPS_NO_DPKG=1 takes that way even where dpkg is there (tests/test_device_scripts.sh).
# Neither runs maintainer scripts, so Debian's update-alternatives link openblas.pc ->
# openblas-pthread/pkgconfig/openblas.pc is made here by hand. libgfortran5 (OpenBLAS's LAPACK)
# needs libquadmath0. oneDNN (libdnnl2, its header libdnnl-dev, and the libOpenCL.so.1 it links) is
# for the bf16 CPU GEMMs (cpu/linear_onednn.c, scripts/device/bf16_cpu.sh): CPATH names its header
# for the build, LD_LIBRARY_PATH its library for the dlopen. The build links the shared libraries
# (pkg-config), so fetch rebuilds each .deb that holds a static library without it (dpkg-deb -R, then
# -b; the same name, never installed with dpkg): libopenblas-pthread-dev's libopenblas.a alone is
# 58 MB unpacked, 4.9 of the 13 MB of .debs, which every call carries (scripts/device/carry_size.sh).
[[ "${BASH_SOURCE[0]}" == "$0" ]] && set -euo pipefail # strict when run, not leaking into a shell that sources it
rmlp_deps_packages="libopenblas-dev libopenblas-pthread-dev libopenblas0-pthread libgfortran5 libquadmath0
  libjansson-dev libjansson4 pkgconf pkgconf-bin libpkgconf3 pkg-config"
rmlp_deps_onednn_packages="libdnnl2 libdnnl-dev ocl-icd-libopencl1"

# rmlp_unpack_deb DEB PREFIX: the package's files under PREFIX.
rmlp_unpack_deb() {
  if [ "${RMLP_DEPS_NO_DPKG:-0}" != 1 ] && command -v dpkg-deb >/dev/null 2>&1; then
    dpkg-deb -x "$1" "$2"
    return
  fi
  local member unpack=(cat)
  member=$(ar t "$1" | grep -m1 '^data\.tar') || {
    echo "$1: no data.tar member (ar t: $(ar t "$1" 2>&1 | tr '\n' ' '))" >&2
    return 1
  }
  case $member in
  *.xz) if command -v xz >/dev/null 2>&1; then unpack=(xz -dc); else
    unpack=(python3 -c 'import lzma, sys; sys.stdout.buffer.write(lzma.decompress(sys.stdin.buffer.read()))')
  fi ;;
  *.zst) unpack=(zstd -dc) ;;
  *.gz) unpack=(gzip -dc) ;;
  esac
  ar p "$1" "$member" | "${unpack[@]}" | tar -x -C "$2"
}

# rmlp_deps_no_static DEB: DEB rebuilt without its static libraries (*.a), where it has any.
rmlp_deps_no_static() {
  local d n
  [ "$(dpkg-deb -c "$1" | grep -c '\.a$')" -gt 0 ] || return 0 # grep -q could end dpkg-deb by SIGPIPE
  d=$(mktemp -d) || return 1
  dpkg-deb -R "$1" "$d/p" && n=$(find "$d/p" -name '*.a' -print -delete | wc -l) &&
    dpkg-deb -Zxz -b "$d/p" "$d/new.deb" >/dev/null && mv "$d/new.deb" "$1" &&
    echo "deps: $(basename "$1"): $n static libraries taken out ($(stat -c %s "$1") bytes left)"
  local rc=$?
  rm -rf "$d"
  return $rc
}

# rmlp_install_debs DIR PREFIX: every .deb of DIR under PREFIX, the .pc files relocated, the
# environment exported.
rmlp_install_debs() {
  local dir prefix deb arch=x86_64-linux-gnu
  dir=$(cd "$1" && pwd) || return 1
  mkdir -p "$2" && prefix=$(cd "$2" && pwd) || return 1
  for deb in "$dir"/*.deb; do
    rmlp_unpack_deb "$deb" "$prefix" || { echo "deps: unpacking $deb failed" >&2; return 1; }
  done
  echo "deps: $(ls "$dir"/*.deb | wc -l) packages unpacked into $prefix ($(
    [ "${RMLP_DEPS_NO_DPKG:-0}" != 1 ] && command -v dpkg-deb >/dev/null 2>&1 && echo dpkg-deb || echo 'ar and tar, no dpkg'))"
  mkdir -p "$prefix/pkgconfig"
  sed "s|=/usr/|=$prefix/usr/|g" "$prefix/usr/lib/$arch/openblas-pthread/pkgconfig/openblas.pc" >"$prefix/pkgconfig/openblas.pc" &&
    sed "s|^prefix=/usr|prefix=$prefix/usr|" "$prefix/usr/lib/$arch/pkgconfig/jansson.pc" >"$prefix/pkgconfig/jansson.pc" ||
    return 1
  export PKG_CONFIG_PATH="$prefix/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  export LD_LIBRARY_PATH="$prefix/usr/lib/$arch:$prefix/usr/lib/$arch/openblas-pthread${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export CPATH="$prefix/usr/include${CPATH:+:$CPATH}" # oneDNN's header too, where DIR holds its .debs
  command -v pkg-config >/dev/null || export PATH="$prefix/usr/bin:$PATH"
  pkg-config --modversion openblas jansson
}

# rmlp_install_onednn DIR PREFIX: oneDNN's .debs of DIR under PREFIX, CPATH and LD_LIBRARY_PATH exported.
rmlp_install_onednn() {
  local p deb prefix arch=x86_64-linux-gnu
  mkdir -p "$2" && prefix=$(cd "$2" && pwd) || return 1
  for p in $rmlp_deps_onednn_packages; do
    deb=$(ls "$1"/"${p}"_*.deb 2>/dev/null | head -1)
    [ -n "$deb" ] || { echo "deps: no $p .deb in $1" >&2; return 1; }
    rmlp_unpack_deb "$deb" "$prefix" || { echo "deps: unpacking $deb failed" >&2; return 1; }
  done
  export CPATH="$prefix/usr/include${CPATH:+:$CPATH}"
  export LD_LIBRARY_PATH="$prefix/usr/lib/$arch${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  echo "deps: oneDNN $(sed -n 's/^#define DNNL_VERSION_\(MAJOR\|MINOR\|PATCH\) //p' \
    "$prefix/usr/include/oneapi/dnnl/dnnl_version.h" | paste -sd.) unpacked into $prefix"
}

case "${1:-}" in
fetch)
  [ -n "${2:-}" ] || { echo "usage: scripts/device/device_deps.sh fetch DIR" >&2; exit 2; }
  mkdir -p "$2" "${2%/}-onednn"
  # shellcheck disable=SC2086 # word lists
  (cd "$2" && apt-get download $rmlp_deps_packages) &&
    (cd "${2%/}-onednn" && apt-get download $rmlp_deps_onednn_packages) || exit 1
  for deb in "$2"/*.deb; do
    rmlp_deps_no_static "$deb" || { echo "deps: taking the static libraries out of $deb failed" >&2; exit 1; }
  done
  for p in $rmlp_deps_onednn_packages; do # an older fetch put them in DIR: carried with it, too large
    for deb in "$2/${p}"_*.deb; do
      [ -e "$deb" ] && rm -f "$deb" && echo "deps: removed $deb (oneDNN's .debs are in ${2%/}-onednn)"
    done
  done
  echo "deps: $(find "$2" -name '*.deb' -printf '%s\n' | awk '{s += $1} END {printf "%.1f MB", s / 1e6}') in $2," \
    "$(find "${2%/}-onednn" -name '*.deb' -printf '%s\n' | awk '{s += $1} END {printf "%.1f MB", s / 1e6}') in ${2%/}-onednn"
  ;;
install)
  rmlp_install_debs "$2" "$3"
  ;;
install-onednn) # a machine that has OpenBLAS and jansson: oneDNN's .debs alone
  rmlp_install_onednn "$2" "$3"
  ;;
*)
  echo "usage: scripts/device/device_deps.sh fetch DIR | . scripts/device/device_deps.sh install|install-onednn DIR PREFIX" >&2
  return 2 2>/dev/null || exit 2
  ;;
esac
