#!/usr/bin/env bash
# device_env.sh: what every script run on a lent GPU machine shares (gpu/first_run.sh,
# bench/gpu_session.sh, bench/gpu_decode_session.sh, the commands of gpu/CHECKLIST.md). Source it
# from the repository root:
#   . gpu/device_env.sh
# then call:
#   rmlp_find_cublas [MAJOR]   the ONE search for libcublas.so.MAJOR (default: the nvcc's major): the
#                              loader's cache and LD_LIBRARY_PATH, the toolkit's lib64 (next to nvcc,
#                              $CUDA_HOME, /usr/local/cuda*), then the pip wheels' folders
#                              (site-packages/nvidia/cu13/lib for CUDA 13, nvidia/cublas/lib for 12);
#                              prepends the folder to LD_LIBRARY_PATH, prints what it chose, and sets
#                              RMLP_CUBLAS_DIR. Returns 1 (and says so) when there is none.
#   rmlp_find_sanitizer        sets RMLP_SANITIZER to compute-sanitizer's path (PATH or the toolkit).
#   rmlp_device_deps [DEBS]    makes OpenBLAS, jansson and pkg-config findable: nothing when they
#                              are installed, else unpacks the carried .debs (gpu/device_deps.sh).
#   rmlp_flashinfer_headers    says whether FlashInfer's headers were carried (third_party/flashinfer,
#                              which scripts/setup.sh fetches here; the configure then builds FlashInfer's
#                              attention); returns 1 when they are missing (the reference attention only).
#   rmlp_cmake_configure DIR   configures a CUDA build in DIR (Ninja when there): architectures from
#                              the device's compute capability (90 without a device), warnings NOT
#                              errors (RMLP_WERROR=OFF: a newer compiler's warnings go to the log),
#                              the static CUDA runtime where the toolkit has libcudart_static.a,
#                              else the shared one.
#   rmlp_environment           prints the machine: GPU, driver, nvcc, gcc, cmake, sanitizer, torch.
#   rmlp_left, rmlp_slot MAX RESERVE
#                              the seconds left of the caller's $budget (since its start: $SECONDS),
#                              and those a step may take: at most MAX, leaving RESERVE for the steps
#                              after it (0 when nothing is left).
#   rmlp_rc RC                 "rc=RC", with " (the time limit)" when RC is 124 (timeout's status).
# Nothing here exits the shell that sources it.

rmlp_left() { echo $((budget - SECONDS)); }

rmlp_rc() {
  if (($1 == 124)); then echo "rc=$1 (the time limit)"; else echo "rc=$1"; fi
}

rmlp_slot() {
  local s=$((budget - SECONDS - $2))
  ((s > $1)) && s=$1
  ((s < 0)) && s=0
  echo "$s"
}

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
  d=$(ldconfig -p 2>/dev/null | awk -v l="$lib" '$1 == l {print $NF; exit}')
  if [ -n "$d" ]; then
    RMLP_CUBLAS_DIR=$(dirname "$d")
    echo "cuBLAS: $d (the loader's cache)"
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
      echo "cuBLAS: $RMLP_CUBLAS_DIR/$lib ($how, $lt; added to LD_LIBRARY_PATH)"
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
    echo "deps: OpenBLAS/jansson missing and no $debs carried (here: gpu/device_deps.sh fetch .debs; carry [\".debs\"])"
    return 1
  fi
  echo "deps: unpacking the carried $debs into /tmp/rmlp-deps"
  . gpu/device_deps.sh install "$debs" /tmp/rmlp-deps
}

rmlp_flashinfer_headers() {
  local dir=third_party/flashinfer
  if [ -f "$dir/VERSION" ] && [ -f "$dir/include/flashinfer/attention/prefill.cuh" ]; then
    echo "FlashInfer: $(cut -d' ' -f1-2 "$dir/VERSION") headers in $dir ($(du -sh "$dir" | cut -f1)): its attention is built"
    return 0
  fi
  echo "FlashInfer: NO headers in $dir (here: scripts/setup.sh fetches them; carry [\"third_party/flashinfer\"]): the" \
    "build has the reference attention only and test_gpu_flashinfer skips"
  return 1
}

rmlp_cmake_configure() {
  local dir=$1 arch cudart=Static gen=()
  arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
  [[ "$arch" =~ ^[0-9]+$ ]] || arch=90
  local lib
  lib=$(dirname "$(command -v nvcc 2>/dev/null || echo /nonexistent/nvcc)")
  ls "$lib"/../lib64/libcudart_static.a "$lib"/../lib/libcudart_static.a \
    "$lib"/../targets/x86_64-linux/lib/libcudart_static.a >/dev/null 2>&1 || cudart=Shared
  if [ -f "$dir/CMakeCache.txt" ]; then
    gen=() # keep the generator it was configured with
  elif command -v ninja >/dev/null; then
    gen=(-G Ninja)
  fi
  echo "configure: $dir (architecture $arch, CUDA runtime $cudart, warnings not errors)"
  cmake -S . -B "$dir" "${gen[@]}" -DRMLP_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$arch" -DCMAKE_BUILD_TYPE=Release \
    -DRMLP_WERROR=OFF -DCMAKE_CUDA_RUNTIME_LIBRARY="$cudart" -DCMAKE_CUDA_COMPILER="$(command -v nvcc)"
}

rmlp_environment() {
  echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  nvidia-smi -L 2>&1 | head -4
  nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader 2>&1 | head -2
  echo "nvcc: $(command -v nvcc) $(nvcc --version 2>/dev/null | grep -o 'release [0-9.]*, V[0-9.]*')"
  echo "gcc: $(gcc --version 2>/dev/null | head -1)"
  echo "cmake: $(cmake --version 2>/dev/null | head -1), ninja: $(ninja --version 2>/dev/null || echo none)"
  if rmlp_find_sanitizer; then
    echo "compute-sanitizer: $RMLP_SANITIZER ($("$RMLP_SANITIZER" --version 2>/dev/null | grep -o 'Version [0-9.]*' | head -1))"
  else
    echo "compute-sanitizer: not found"
  fi
  python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)' 2>/dev/null ||
    echo "torch/transformers: not importable"
}
