#!/usr/bin/env bash
# check_cuda12.sh: the CUDA code against CUDA 12.9 (TEI's images: nvidia/cuda:12.9.1), where CI's own
# toolkit is CUDA 13 (its nvcc builds build/). PyPI's CUDA 12.9 wheels carry the headers, the runtime,
# cuBLAS and ptxas but no nvcc, so the device code is compiled by Clang's CUDA mode (clang 16 or newer;
# Debian 12's clang-19 is installed when run as root and none is found):
#   1. the pinned wheels (nvidia-cuda-runtime-cu12, -cublas-cu12, -cuda-cccl-cu12, -cuda-nvcc-cu12) into
#      build/cuda12/site (pip --target: nothing system-wide; ~940 MB, cuBLAS's 820, fetched once), laid
#      out as a CUDA path in build/cuda12/cuda (include/, lib64/, bin/ptxas, nvvm/libdevice);
#   2. every gpu/*.cu with clang++ --cuda-path=build/cuda12/cuda: the device code for sm_75 and sm_90 to
#      SASS through 12.9's ptxas, the host code to an object, with -Werror; gpu/flashinfer.cu and
#      flashinfer_decode.cu as in a FlashInfer-less build (FlashInfer's headers are not valid C++ for
#      clang: `template` keywords missing, host calls of min/max) and gpu/flashinfer_sm90.cu left out;
#      blas.cu once more as an RMLP_CUBLAS_STATIC build compiles it;
#   3. every host-side C file that includes CUDA's headers (gpu/*.c, bench/bench_cuda.c,
#      bench/bench_gather.c, tests/test_gpu_*.c) with the C compiler, and every gpu/*.h alone as C++;
#   4. that no file compiled read a header of another CUDA (the dependency lists), that every CUDA
#      runtime function the objects call is exported by 12.9's libcudart.so.12, and every cuBLAS
#      function a static-cuBLAS build calls by its libcublas.so.12;
#   5. test_cublas_loader (built in BUILD_DIR, default build/) on 12.9's libcublas.so.12: it loads
#      through $CUDA_HOME, exports every entry point the library uses and says it is 12.9.
# Where PyPI cannot be reached (and nothing was fetched before) it says SKIP and exits 0; a failed
# check exits 1. RMLP_CUDA12_JOBS (default 2) compiles in parallel.
# Usage: scripts/check_cuda12.sh [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build=${1:-build}
jobs=${RMLP_CUDA12_JOBS:-2}
top=$root/build/cuda12
site=$top/site
cuda=$top/cuda
work=$top/check
wheels=(nvidia-cuda-runtime-cu12==12.9.79 nvidia-cublas-cu12==12.9.1.4 nvidia-cuda-cccl-cu12==12.9.27
  nvidia-cuda-nvcc-cu12==12.9.86)
archs=(sm_75 sm_90)
failed=0
fail() {
  echo "FAIL: $*"
  failed=1
}

# --- 1. the wheels, and a CUDA path over them ------------------------------------------------------
stamp="${wheels[*]}"
if [ "$(cat "$site/.rmlp-wheels" 2>/dev/null)" != "$stamp" ]; then
  rm -rf "$site"
  echo "cuda12: fetching ${wheels[*]} from PyPI into $site"
  if ! timeout 900 python3 -m pip install --quiet --disable-pip-version-check --no-cache-dir --no-deps --target "$site" \
    "${wheels[@]}" >"$top.pip.log" 2>&1; then
    if grep -q -i -E 'connection|resolve|network|unreachable|timed out|No matching distribution' "$top.pip.log"; then
      echo "SKIP: CUDA 12.9 not checked: PyPI cannot be reached ($(grep -m1 -i -E 'error|warning' "$top.pip.log" | cut -c1-160))"
      exit 0
    fi
    cat "$top.pip.log"
    echo "FAIL: pip could not install the CUDA 12.9 wheels"
    exit 1
  fi
  echo "$stamp" >"$site/.rmlp-wheels"
fi
nv=$site/nvidia
rm -rf "$cuda"
mkdir -p "$cuda/include" "$cuda/lib64" "$cuda/bin" "$cuda/nvvm"
for part in cuda_runtime cuda_cccl cublas cuda_nvcc; do
  for f in "$nv/$part/include"/*; do
    case $(basename "$f") in __init__.py | __pycache__) continue ;; esac
    [ -e "$cuda/include/$(basename "$f")" ] || ln -s "$f" "$cuda/include/"
  done
done
ln -s "$nv"/cuda_runtime/lib/* "$nv"/cublas/lib/* "$cuda/lib64/"
ln -s libcudart.so.12 "$cuda/lib64/libcudart.so"
ln -s "$nv/cuda_nvcc/bin/ptxas" "$cuda/bin/ptxas"
ln -s "$nv/cuda_nvcc/nvvm/libdevice" "$cuda/nvvm/libdevice"
version=$(sed -n 's/^#define CUDA_VERSION \([0-9]*\).*/\1/p' "$cuda/include/cuda.h")
echo "cuda12: CUDA path $cuda: cuda.h $version, $("$cuda/bin/ptxas" --version | tail -1)"
[ "$version" = 12090 ] || fail "cuda.h says $version, not 12090"

# --- 2. the device and host code with clang ---------------------------------------------------------
clang=
for v in 19 18 17 16; do command -v "clang++-$v" >/dev/null && clang=clang++-$v && break; done
if [ -z "$clang" ] && [ "$(id -u)" = 0 ]; then
  echo "cuda12: installing Debian's clang-19 (clang 14 cannot read CUDA 12's headers)"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends clang-19 >/dev/null &&
    clang=clang++-19
fi
rm -rf "$work"
mkdir -p "$work"
# One line per compilation: OUTPUT<TAB>COMMAND... (words); run by xargs, each writing OUTPUT.log.
jobs_file=$work/jobs.txt
: >"$jobs_file"
common=(-isystem "$cuda/include" -I ffi/include -I . -DRMLP_WITH_CUDA=1 -Wall -Wextra -Werror -O2)
if [ -n "$clang" ]; then
  # -Wno-unknown-cuda-version: clang 19 knows CUDA up to 12.5 and says so; -Wno-unknown-attributes:
  # it ignores __grid_constant__ (gpu/rope.cu's table argument; a copy instead, the same semantics)
  cflags=(-x cuda --cuda-path="$cuda" -Wno-unknown-cuda-version -Wno-unknown-attributes -std=c++17 "${common[@]}")
  for f in gpu/*.cu; do
    b=$(basename "$f" .cu)
    extra=(-fno-exceptions)
    case $b in
    flashinfer_sm90) continue ;;
    flashinfer | flashinfer_decode) extra=(-fexceptions) ;;
    esac
    for a in "${archs[@]}"; do
      echo "$work/$b.$a.cubin ${clang} ${cflags[*]} ${extra[*]} --cuda-gpu-arch=$a --cuda-device-only -c $f" >>"$jobs_file"
    done
    echo "$work/$b.host.o ${clang} ${cflags[*]} ${extra[*]} --cuda-gpu-arch=sm_90 --cuda-host-only -c $f" >>"$jobs_file"
  done
  echo "$work/blas_static.host.o ${clang} ${cflags[*]} -fno-exceptions -DRMLP_CUBLAS_STATIC=1 --cuda-gpu-arch=sm_90 --cuda-host-only -c gpu/blas.cu" >>"$jobs_file"
else
  echo "SKIP: no clang 16 or newer (Debian 12: apt-get install clang-19): the .cu files are not compiled against 12.9"
fi

# --- 3. host-side C and the headers ---------------------------------------------------------------
for f in gpu/*.c bench/bench_cuda.c bench/bench_gather.c tests/test_gpu_*.c; do
  b=$(echo "$f" | tr / _)
  echo "$work/${b%.c}.o ${CC:-cc} -std=c11 ${common[*]} -Wshadow -Wstrict-prototypes -I tests -DRMLP_WITH_FLASHINFER=1 -DRMLP_EXPECT_FLASHINFER=1 -c $f" >>"$jobs_file"
done
for h in gpu/*.h; do
  b=$(echo "$h" | tr / _)
  printf '#include "%s"\n' "$h" >"$work/$b.cpp"
  echo "$work/${b%.h}.hdr.o ${CXX:-c++} -std=c++17 ${common[*]} -c $work/$b.cpp" >>"$jobs_file"
done
echo "cuda12: $(wc -l <"$jobs_file") compilations, $jobs at a time"
# shellcheck disable=SC2016 # expanded by the inner shell
if ! xargs -P "$jobs" -L 1 sh -c 'out=$1; shift; "$@" -MD -MF "$out.d" -o "$out" >"$out.log" 2>&1 || echo "$out" >>"$0"' \
  "$work/failed.txt" <"$jobs_file"; then
  fail "xargs"
fi
if [ -s "$work/failed.txt" ]; then
  while read -r out; do
    fail "$(grep -F "$out " "$jobs_file" | grep -o -E '[^ ]+\.(cu|c|cpp)$' || true) ($(basename "$out")):"
    grep -E 'error|warning' "$out.log" | head -n 8
  done <"$work/failed.txt"
fi

# --- 4. what the objects read and call ------------------------------------------------------------
foreign=$(cat "$work"/*.d 2>/dev/null | tr ' \\' '\n\n' | grep -E '(cuda|cublas|crt/)' | grep -v -F "$top/" |
  grep '^/' | grep -v -E '/(lib|usr/lib)/(llvm|gcc|clang)' | sort -u | head -n 5 || true)
[ -z "$foreign" ] || fail "headers of another CUDA were read: $foreign"
defined() { nm -D --defined-only "$1" | awk '{print $NF}' | sed 's/@.*//' | sort -u; }
mapfile -t objects < <(ls "$work"/*.o 2>/dev/null | grep -v 'blas_static')
called=$(nm -u "${objects[@]}" 2>/dev/null | awk '{print $NF}' | grep -E '^_*cuda' | sort -u || true)
missing=$(comm -23 <(echo "$called") <(defined "$cuda/lib64/libcudart.so.12") || true)
echo "cuda12: $(echo "$called" | grep -c .) CUDA runtime functions called by ${#objects[@]} objects"
[ -z "$missing" ] || fail "not in CUDA 12.9's libcudart.so.12: $(echo $missing)"
if [ -f "$work/blas_static.host.o" ]; then
  called=$(nm -u "$work/blas_static.host.o" | awk '{print $NF}' | grep -E '^cublas' | sort -u || true)
  missing=$(comm -23 <(echo "$called") <(defined "$cuda/lib64/libcublas.so.12") || true)
  echo "cuda12: a static-cuBLAS build calls $(echo "$called" | grep -c .) cuBLAS functions: $(echo $called)"
  [ -z "$missing" ] || fail "not in CUDA 12.9's libcublas.so.12: $(echo $missing)"
fi
n_cubin=$(ls "$work"/*.cubin 2>/dev/null | wc -l)
echo "cuda12: $n_cubin device objects (${archs[*]}) and $(ls "$work"/*.o 2>/dev/null | wc -l) host objects compiled"

# --- 5. the loader on 12.9's libcublas.so.12 --------------------------------------------------------
loader=$build/tests/test_cublas_loader
if [ -x "$loader" ]; then
  out=$("$loader" "$build"/tests/librmlp_fake_cublas_{NONE,OLD,NEW}.so "$cuda" 12 2>&1) || fail "test_cublas_loader:"
  echo "$out" | grep -E 'FAIL|cuBLAS|tried|passed' | sed 's/^/  /'
  grep -q 'cuBLAS 12\.9\.' <<<"$out" || fail "test_cublas_loader did not load cuBLAS 12.9"
else
  echo "SKIP: $loader not built: the loader not checked on libcublas.so.12"
fi

if ((failed)); then
  echo "cuda12: FAILED"
  exit 1
fi
echo "cuda12: OK (CUDA $version${clang:+, $($clang --version | head -1)})"
