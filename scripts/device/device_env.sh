#!/usr/bin/env bash
# device_env.sh: the machine side of every script run on a lent GPU machine (scripts/device/window.sh, the
# plan of gpu/CHECKLIST.md, and the scripts it runs: scripts/device/first_run.sh, scripts/device/gpu_session.sh,
# scripts/device/gpu_decode_session.sh). Source it from the repository root:
#   . scripts/device/device_env.sh
# Sourcing it puts the toolkit's bin folder ($RMLP_CUDA_HOME, default /usr/local/cuda) on PATH when
# nvcc is not on it, then sources scripts/device/device_steps.sh (the steps, their time limits and their record
# in $OUT). Then call:
#   rmlp_find_cublas [MAJOR]   the ONE search for libcublas.so.MAJOR (default: the nvcc's major): the
#                              loader's cache and LD_LIBRARY_PATH, the toolkit's lib64 (next to nvcc,
#                              $CUDA_HOME, /usr/local/cuda*), then the pip wheels' folders
#                              (site-packages/nvidia/cu13/lib for CUDA 13, nvidia/cublas/lib for 12);
#                              prepends the folder to LD_LIBRARY_PATH, exports RADIX_MLP_CUBLAS (the
#                              library then opens that file), prints what it chose, and sets
#                              RMLP_CUBLAS_DIR. Returns 1 (and says so) when there is none. Call it in
#                              the script's own shell (rmlp_setup does), never in a pipeline or $(...):
#                              the LD_LIBRARY_PATH it exports would be lost with the subshell.
#   rmlp_find_sanitizer        sets RMLP_SANITIZER to compute-sanitizer's path (PATH or the toolkit).
#   rmlp_device_deps [DEBS]    makes OpenBLAS, jansson and pkg-config findable: nothing when they
#                              are installed, else unpacks the carried .debs (scripts/device/device_deps.sh).
#   rmlp_flashinfer_headers    says whether FlashInfer's headers were carried (third_party/flashinfer,
#                              which scripts/setup.sh fetches here; the configure then builds FlashInfer's
#                              attention), and names the decode, Hopper and CUTLASS headers missing;
#                              returns 1 when there are none (the reference attention only).
#   rmlp_cmake_args DIR [ARG...]  sets RMLP_CMAKE_ARGS, a CUDA configure of DIR (Ninja when there):
#                              one architecture, CUDA_COMPUTE_CAP: the environment's, else the device's
#                              compute capability (90 without a device),
#                              warnings NOT errors (RMLP_WERROR=OFF: a newer compiler's warnings go to the
#                              log), the static CUDA runtime where the toolkit has libcudart_static.a,
#                              else the shared one; ARGs after those (-DRMLP_FLASHINFER=OFF).
#   rmlp_cpu_cmake_args DIR [ARG...]  the same for a CPU-only configure (-DRMLP_CUDA=OFF).
#   rmlp_onednn_deps [DIR]     oneDNN's header (CPATH) and library for the bf16 CPU step: the
#                              machine's, else the carried .debs-onednn unpacked (below).
#   rmlp_environment           prints the machine: GPU, driver, nvcc, gcc, cmake, sanitizer, torch.
#   rmlp_prepare               the five setup steps every script starts with (the machine, OpenBLAS and
#                              jansson, FlashInfer's headers, oneDNN, cuBLAS), each recorded; once per command:
#                              it exports RMLP_PREPARED=1 and what it found, which the scripts scripts/device/window.sh
#                              runs after it inherit. Returns 1 when the build cannot work (no OpenBLAS).
#   RMLP_OLD_PATHS             the paths each newer one replaced (gpu/options.h), as one bench variant
#                              (`radixmlp bench --gpu-variant "$RMLP_OLD_PATHS"`); ${RMLP_OLD_PATHS//,/ } is
#                              the same as environment words (`env ... ctest`), read at context creation.
# Nothing here exits the shell that sources it.

rmlp_cuda_bin=${RMLP_CUDA_HOME:-/usr/local/cuda}/bin
if ! command -v nvcc >/dev/null 2>&1 && [ -x "$rmlp_cuda_bin/nvcc" ]; then
  export PATH="$rmlp_cuda_bin:$PATH"
fi
unset rmlp_cuda_bin
RMLP_OLD_PATHS=RADIX_MLP_GPU_FULL_KV=scatter,RADIX_MLP_GPU_ROPE=sincos,RADIX_MLP_GPU_FLASHINFER_SM90=off

rmlp_nvcc_major() {
  local v
  v=$(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9]*\)\..*/\1/p')
  echo "${v:-13}"
}

rmlp_find_cublas() {
  local major=${1:-$(rmlp_nvcc_major)} lib d how candidates=()
  lib="libcublas.so.$major"
  RMLP_CUBLAS_DIR=
  # 1. what the loader already finds
  d=$(ldconfig -p 2>/dev/null | awk -v l="$lib" '$1 == l && !d {d = $NF} END {print d}') # reads to the end: no SIGPIPE
  if [ -n "$d" ]; then
    RMLP_CUBLAS_DIR=$(dirname "$d")
    export RADIX_MLP_CUBLAS=$d
    echo "cuBLAS: $d (the loader's cache; RADIX_MLP_CUBLAS)"
    return 0
  fi
  local IFS_save=$IFS
  IFS=:
  for d in ${LD_LIBRARY_PATH:-}; do candidates+=("$d|LD_LIBRARY_PATH"); done
  IFS=$IFS_save
  # 2. the toolkit
  local nvcc_dir
  nvcc_dir=$(dirname "$(command -v nvcc 2>/dev/null || echo /nonexistent/nvcc)")
  for d in "$nvcc_dir/../lib64" "$nvcc_dir/../lib" "$nvcc_dir/../targets/x86_64-linux/lib" \
    ${CUDA_HOME:+"$CUDA_HOME/lib64"} /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
    /usr/local/cuda-"$major"*/lib64 /usr/lib/x86_64-linux-gnu; do
    candidates+=("$d|the CUDA toolkit")
  done
  # 3. pip wheels (nvidia-cublas: nvidia/cu13/lib for CUDA 13; nvidia/cublas/lib before)
  local sp
  while IFS= read -r sp; do
    [ -n "$sp" ] || continue
    for d in "$sp/nvidia/cu$major/lib" "$sp/nvidia/cublas/lib" "$sp"/nvidia/*/lib; do
      candidates+=("$d|a pip wheel")
    done
  done < <(python3 -c 'import site, sys
for p in site.getsitepackages() + [site.getusersitepackages()] + sys.path:
    print(p)' 2>/dev/null | awk '!seen[$0]++')
  local c
  for c in "${candidates[@]}"; do
    d=${c%|*}
    how=${c##*|}
    if [ -e "$d/$lib" ]; then
      RMLP_CUBLAS_DIR=$(cd "$d" && pwd)
      case ":${LD_LIBRARY_PATH:-}:" in
      *":$RMLP_CUBLAS_DIR:"*) ;;
      *) export LD_LIBRARY_PATH="$RMLP_CUBLAS_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ;;
      esac
      local lt="no libcublasLt.so.$major beside it"
      [ -e "$RMLP_CUBLAS_DIR/libcublasLt.so.$major" ] && lt="with libcublasLt.so.$major"
      export RADIX_MLP_CUBLAS=$RMLP_CUBLAS_DIR/$lib # the library opens this one (gpu/cublas_loader.h)
      echo "cuBLAS: $RMLP_CUBLAS_DIR/$lib ($how, $lt; added to LD_LIBRARY_PATH, RADIX_MLP_CUBLAS)"
      return 0
    fi
  done
  echo "cuBLAS: $lib NOT FOUND (looked in the loader's cache, LD_LIBRARY_PATH, the toolkit's lib64 and the pip wheels' nvidia/*/lib): CUDA model loads will fail"
  return 1
}

rmlp_find_sanitizer() {
  local d
  RMLP_SANITIZER=$(command -v compute-sanitizer 2>/dev/null)
  if [ -z "$RMLP_SANITIZER" ]; then
    d=$(dirname "$(command -v nvcc 2>/dev/null || echo /nonexistent/nvcc)")
    for f in "$d/compute-sanitizer" "$d/../compute-sanitizer/compute-sanitizer" /usr/local/cuda/bin/compute-sanitizer \
      /usr/local/cuda/compute-sanitizer/compute-sanitizer; do
      [ -x "$f" ] && RMLP_SANITIZER=$f && break
    done
  fi
  [ -n "$RMLP_SANITIZER" ]
}

rmlp_device_deps() {
  local debs=${1:-.debs}
  if pkg-config --exists openblas jansson 2>/dev/null; then
    echo "deps: OpenBLAS $(pkg-config --modversion openblas), jansson $(pkg-config --modversion jansson) installed"
    return 0
  fi
  if [ ! -d "$debs" ]; then
    echo "deps: OpenBLAS/jansson missing and no $debs carried (here: scripts/device/device_deps.sh fetch .debs; carry [\".debs\"])"
    return 1
  fi
  echo "deps: unpacking the carried $debs into /tmp/rmlp-deps"
  . "$RMLP_GPU_DIR/device_deps.sh" install "$debs" /tmp/rmlp-deps
}

# rmlp_onednn_header: whether the C compiler ($CC, else cc) finds oneDNN's header (CPATH included).
# A here-string, not a pipe: a compiler that does not read all of stdin would fail the pipeline.
rmlp_onednn_header() { ${CC:-cc} -E -x c - <<<'#include <oneapi/dnnl/dnnl.h>' >/dev/null 2>&1; }

# rmlp_onednn_deps [DIR]: oneDNN's header and library for the bf16 CPU GEMMs (scripts/device/bf16_cpu.sh),
# from the machine when it has them, else from the carried DIR (default .debs-onednn, which
# `scripts/device/device_deps.sh fetch .debs` fills and command 4 alone carries; .debs as an older
# fetch left it), unpacked into $RMLP_DNNL_PREFIX (/tmp/rmlp-dnnl). Never fatal: without it the bf16
# step says so and is not run.
rmlp_onednn_deps() {
  local d debs=
  if rmlp_onednn_header; then
    echo "oneDNN: its header is found (CPATH ${CPATH:-unset}): a build configured now has the bf16 CPU GEMMs"
    return 0
  fi
  for d in ${1:-.debs-onednn .debs}; do
    ls "$d"/libdnnl2_*.deb >/dev/null 2>&1 && debs=$d && break
  done
  if [ -z "$debs" ]; then
    echo "oneDNN: no header and no libdnnl2 .deb in ${1:-.debs-onednn} (carry [\".debs-onednn\"]): builds have the" \
      "widening bf16 path only, and the bf16 CPU step is not run"
    return 0
  fi
  . "$RMLP_GPU_DIR/device_deps.sh" install-onednn "$debs" "${RMLP_DNNL_PREFIX:-/tmp/rmlp-dnnl}"
}

rmlp_flashinfer_headers() {
  local dir=third_party/flashinfer
  if [ -f "$dir/VERSION" ] && [ -f "$dir/include/flashinfer/attention/prefill.cuh" ]; then
    local missing=() f
    for f in include/flashinfer/attention/decode.cuh include/flashinfer/attention/hopper/prefill_sm90.cuh \
      cutlass/cute/tensor.hpp; do
      [ -f "$dir/$f" ] || missing+=("$f")
    done
    echo "FlashInfer: $(cut -d' ' -f1-2 "$dir/VERSION") headers in $dir ($(du -sh "$dir" | cut -f1)): its attention is" \
      "built$( ((${#missing[@]} > 0)) && echo "; MISSING ${missing[*]} (decode / Hopper prefill not built: scripts/setup.sh here)")"
    return 0
  fi
  echo "FlashInfer: NO headers in $dir (here: scripts/setup.sh fetches them; carry [\"third_party/flashinfer\"]): the" \
    "build has the reference attention only and test_gpu_flashinfer skips"
  return 1
}


rmlp_cmake_args() {
  local dir=$1 arch=${CUDA_COMPUTE_CAP:-} cudart=Static gen=() lib
  shift
  [ -n "$arch" ] || arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
  [[ "$arch" =~ ^[0-9]+$ ]] || arch=90
  lib=$(dirname "$(command -v nvcc 2>/dev/null || echo /nonexistent/nvcc)")
  ls "$lib"/../lib64/libcudart_static.a "$lib"/../lib/libcudart_static.a \
    "$lib"/../targets/x86_64-linux/lib/libcudart_static.a >/dev/null 2>&1 || cudart=Shared
  if [ -f "$dir/CMakeCache.txt" ]; then
    gen=() # keep the generator it was configured with
  elif command -v ninja >/dev/null; then
    gen=(-G Ninja)
  fi
  RMLP_CMAKE_ARGS=(-S . -B "$dir" "${gen[@]}" -DRMLP_CUDA=ON -DCUDA_COMPUTE_CAP="$arch"
    -DCMAKE_BUILD_TYPE=Release -DRMLP_WERROR=OFF -DCMAKE_CUDA_RUNTIME_LIBRARY="$cudart"
    -DCMAKE_CUDA_COMPILER="$(command -v nvcc)" "$@")
}

# rmlp_cpu_cmake_args DIR [ARG...]: sets RMLP_CMAKE_ARGS, a CPU-only configure of DIR (Ninja when
# there; Release, RMLP_WERROR=OFF as above): what scripts/device/bf16_cpu.sh builds.
rmlp_cpu_cmake_args() {
  local dir=$1 gen=()
  shift
  [ ! -f "$dir/CMakeCache.txt" ] && command -v ninja >/dev/null && gen=(-G Ninja)
  RMLP_CMAKE_ARGS=(-S . -B "$dir" "${gen[@]}" -DRMLP_CUDA=OFF -DCMAKE_BUILD_TYPE=Release -DRMLP_WERROR=OFF "$@")
}

rmlp_environment() {
  echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(nproc) cores"
  # The host CPU and its bf16 matrix instructions (issue 32: a bf16 GEMM needs AVX512-BF16 or AMX).
  echo "cpu: $(grep -m1 '^model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//'), bf16 ISA:" \
    "$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | tr ' ' '\n' | grep -E -x 'avx512_bf16|amx_bf16|amx_tile|avx512f' |
      sort -u | tr '\n' ' ')"
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi -L 2>&1 | head -4
    nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader 2>&1 | head -2
  else
    echo "nvidia-smi: not found"
  fi
  echo "nvcc: $(command -v nvcc) $(nvcc --version 2>/dev/null | grep -o 'release [0-9.]*, V[0-9.]*')"
  echo "gcc: $(gcc --version 2>/dev/null | head -1)"
  echo "cmake: $(cmake --version 2>/dev/null | head -1), ninja: $(ninja --version 2>/dev/null || echo none)"
  if rmlp_find_sanitizer; then
    echo "compute-sanitizer: $RMLP_SANITIZER ($("$RMLP_SANITIZER" --version 2>/dev/null | grep -o 'Version [0-9.]*' | head -1))"
  else
    echo "compute-sanitizer: not found"
  fi
  timeout -k 5 60 python3 -c 'import torch, transformers; print("python3", __import__("sys").version.split()[0], "torch",
  torch.__version__, "transformers", transformers.__version__)' 2>/dev/null || echo "torch/transformers: not importable"
}

rmlp_prepare() {
  [ "${RMLP_PREPARED:-0}" = 1 ] && return 0
  rmlp_setup "the machine" rmlp_environment
  if ! rmlp_setup "OpenBLAS and jansson" rmlp_device_deps .debs; then
    rmlp_record "no OpenBLAS/jansson: nothing can be built" FAILED "$SECONDS" 0
    return 1
  fi
  rmlp_setup "FlashInfer headers" rmlp_flashinfer_headers
  rmlp_setup "oneDNN (bf16 CPU GEMMs)" rmlp_onednn_deps
  rmlp_setup "cuBLAS" rmlp_find_cublas
  export RMLP_PREPARED=1 RMLP_CUBLAS_DIR PATH LD_LIBRARY_PATH PKG_CONFIG_PATH CPATH
  return 0
}

. "$(dirname "${BASH_SOURCE[0]}")/device_steps.sh"
