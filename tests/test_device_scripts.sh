#!/usr/bin/env bash
# test_device_scripts.sh: the shared parts of the device scripts (scripts/device/device_env.sh, device_steps.sh,
# device_deps.sh, summarize_window.py), checked without a GPU, a network or dpkg, on fakes:
#   - PATH gains the toolkit's bin folder when nvcc is not on it (and only then);
#   - rmlp_setup keeps what a step exports (rmlp_find_cublas's LD_LIBRARY_PATH), where a pipeline
#     loses it; no device script runs the cuBLAS search in a pipeline or $(...);
#   - a .deb unpacks without dpkg (ar + tar, xz and gzip data members) and its .pc files are relocated;
#   - steps: the time limit (rc 124), "not run" when the budget is spent, RMLP_DEADLINE, the JSON
#     record of awkward text, the summary naming what failed;
#   - rmlp_build retries with FlashInfer off when the build fails, once per command, and says so; a
#     build the budget leaves no time for is recorded as not run (no shell error); the configure
#     builds one architecture (CUDA_COMPUTE_CAP: the device's, 90 without one, or the caller's).
#   - oneDNN's .debs come from .debs-onednn; fetch's .debs lose their static libraries;
#   - bf16_cpu.sh builds in its own CPU-only folder, configured again when oneDNN's header came later;
#   - scripts/device/carry_size.sh on a checkout of known sizes (the sums, the warning, the refusal), then
#     on this one: every call of gpu/CHECKLIST.md's windows under 64 MiB, the folders absent here
#     (a fresh clone has no .debs) at their expected sizes.
# Usage: tests/test_device_scripts.sh (from anywhere; ctest runs it, label cpu).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
tmp=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
passed=0
failed=0
check() { # check WHAT COMMAND...: passes when COMMAND succeeds
  local what=$1
  shift
  if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)) && echo "FAIL: $what"; fi
}

# --- PATH and the cuBLAS search ------------------------------------------------------------------------
mkdir -p "$tmp/cuda/bin" "$tmp/cuda/lib64"
printf '#!/bin/sh\necho "Cuda compilation tools, release 99.0, V99.0.1"\n' >"$tmp/cuda/bin/nvcc"
chmod +x "$tmp/cuda/bin/nvcc"
: >"$tmp/cuda/lib64/libcublas.so.99"
(
  PATH=/usr/bin:/bin
  command -v nvcc >/dev/null && exit 0 # a machine with nvcc in /usr/bin: nothing to check here
  RMLP_CUDA_HOME=$tmp/cuda . scripts/device/device_env.sh
  [ "$(command -v nvcc)" = "$tmp/cuda/bin/nvcc" ]
)
check "device_env.sh puts \$RMLP_CUDA_HOME/bin on PATH when nvcc is not on it" test $? = 0
(
  PATH=$tmp/cuda/bin:/usr/bin:/bin
  RMLP_CUDA_HOME=/nonexistent . scripts/device/device_env.sh
  [ "$(command -v nvcc)" = "$tmp/cuda/bin/nvcc" ] && [ "${PATH%%:*}" = "$tmp/cuda/bin" ]
)
check "device_env.sh leaves PATH alone when nvcc is on it" test $? = 0
(
  PATH=$tmp/cuda/bin:/usr/bin:/bin
  export OUT=$tmp/out-cublas LD_LIBRARY_PATH=
  mkdir -p "$OUT"
  . scripts/device/device_env.sh
  rmlp_find_cublas 99 | cat >/dev/null
  [ -z "$LD_LIBRARY_PATH" ] || exit 1 # a pipeline's subshell loses the export: the bug this guards against
  rmlp_setup "cuBLAS" rmlp_find_cublas 99 >/dev/null
  [ "${LD_LIBRARY_PATH%%:*}" = "$tmp/cuda/lib64" ] && grep -q 'libcublas.so.99' "$OUT/steps.jsonl" &&
    [ "$RADIX_MLP_CUBLAS" = "$tmp/cuda/lib64/libcublas.so.99" ]
)
check "rmlp_setup keeps rmlp_find_cublas's LD_LIBRARY_PATH and RADIX_MLP_CUBLAS (a pipeline does not)" test $? = 0
bad=$(grep -n -E 'rmlp_find_cublas[^|#]*\||\$\(rmlp_find_cublas|<\(rmlp_find_cublas' scripts/device/*.sh)
check "no device script runs rmlp_find_cublas in a pipeline or \$(...): $bad" test -z "$bad"

# --- a .deb without dpkg ---------------------------------------------------------------------------------
make_deb() { # make_deb NAME COMPRESSION FILE=CONTENT...
  local name=$1 comp=$2 d=$tmp/deb-$1
  shift 2
  mkdir -p "$d/data" "$tmp/debs"
  for spec in "$@"; do
    mkdir -p "$d/data/$(dirname "${spec%%=*}")"
    printf '%b' "${spec#*=}" >"$d/data/${spec%%=*}"
  done
  echo 2.0 >"$d/debian-binary"
  tar -C "$d/data" -cf - . | $comp -c >"$d/data.tar.${comp/gzip/gz}"
  tar -C "$d/data" -cf - ./usr | xz -c >"$d/control.tar.xz"
  (cd "$d" && ar rc "$tmp/debs/$name.deb" debian-binary control.tar.xz "data.tar.${comp/gzip/gz}")
}
lib=usr/lib/x86_64-linux-gnu
make_deb openblas xz "$lib/openblas-pthread/pkgconfig/openblas.pc=libdir=/usr/lib/x86_64-linux-gnu/openblas-pthread/\nincludedir=/usr/include\nName: openblas\nDescription: fake\nVersion: 9.8.7\nLibs: -L\${libdir} -lopenblas\n"
make_deb jansson gzip "$lib/pkgconfig/jansson.pc=prefix=/usr\nlibdir=\${prefix}/lib\nName: jansson\nDescription: fake\nVersion: 6.5\nLibs: -ljansson\n"
(
  export PKG_CONFIG_PATH= LD_LIBRARY_PATH=
  versions=$(RMLP_DEPS_NO_DPKG=1 . scripts/device/device_deps.sh install "$tmp/debs" "$tmp/prefix" 2>&1) || exit 1
  grep -q 'ar and tar, no dpkg' <<<"$versions" && grep -qx '9.8.7' <<<"$versions" && grep -qx '6.5' <<<"$versions" &&
    grep -q "^libdir=$tmp/prefix/usr/lib/x86_64-linux-gnu/openblas-pthread/" "$tmp/prefix/pkgconfig/openblas.pc" &&
    grep -q "^prefix=$tmp/prefix/usr" "$tmp/prefix/pkgconfig/jansson.pc"
)
check "device_deps.sh install unpacks .debs without dpkg (xz and gzip members) and relocates their .pc files" test $? = 0
check "device_deps.sh fetches libquadmath0 (libgfortran5 needs it)" grep -q 'libquadmath0' scripts/device/device_deps.sh

# --- steps, their limits and their record ----------------------------------------------------------------
(
  export OUT=$tmp/out-steps
  mkdir -p "$OUT"
  . scripts/device/device_env.sh
  budget=100
  start=$SECONDS
  RMLP_MIN_STEP=1 # steps of a few seconds here
  rmlp_step 'sleep "quoted" \ and	tab' 1 0 "$OUT/o.log" "$OUT/e.log" sleep 30
  [ "$RMLP_STEP_RC" = 124 ] && ((SECONDS - start < 10)) || exit 1
  rmlp_done "$(printf 'line "one" \\ back\tslash\nline two \342\200\230cut\342\200\231 \377')" >/dev/null
  rmlp_step "starved" 60 100 "$OUT/o.log" "$OUT/e.log" true && exit 1
  [[ "$RMLP_STEP_RC" == "not run: "* ]] || exit 1
  rmlp_done >/dev/null
  rmlp_step "ok" 10 0 "$OUT/o.log" "$OUT/e.log" sh -c 'echo out; echo err >&2' && rmlp_done >/dev/null || exit 1
  grep -qx out "$OUT/o.log" && grep -qx err "$OUT/e.log" || exit 1
  RMLP_DEADLINE=$(($(date +%s) + 7))
  [ "$(rmlp_budget 500)" -le 7 ] && [ "$(rmlp_budget 3)" = 3 ] || exit 1
  python3 - "$OUT/steps.jsonl" <<'EOF' || exit 1
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1], encoding="ascii")]
assert [r["step"] for r in rows] == ['sleep "quoted" \\ and tab', "starved", "ok"], rows
assert rows[0]["rc"] == 124 and rows[0]["lines"] == ['line "one" \\ back slash', "line two cut "], rows[0]
assert rows[1]["rc"].startswith("not run") and rows[2]["rc"] == 0, rows
EOF
  grep -q '^# NOT OK: sleep "quoted" \\ and tab (rc=124 (time limit)); starved (not run' "$OUT/summary.txt"
)
check "steps: time limit, not run, deadline, JSON record, summary" test $? = 0

# --- the build and its fallback without FlashInfer, on a fake cmake ------------------------------------------
mkdir -p "$tmp/fakebin"
cat >"$tmp/fakebin/cmake" <<'EOF'
#!/bin/sh
# configure: -S . -B DIR ...: writes DIR/CMakeCache.txt; --build DIR: fails, printing $FAKE_FAILED,
# unless DIR ends in -nofi or $FAKE_BUILD_OK is set
if [ "$1" = --build ]; then
  case $2 in *-nofi) echo built; exit 0 ;; esac
  [ -n "${FAKE_BUILD_OK:-}" ] && echo built && exit 0
  echo "${FAKE_FAILED:-FAILED: CMakeFiles/radix_mlp_objects.dir/gpu/flashinfer.cu.o}"; echo "fake failure"; exit 1
fi
mkdir -p "$4" && echo "$*" >"$4/CMakeCache.txt" && echo "-- radix_mlp 0.0: CUDA ON (x), attention: fake, warnings"
EOF
chmod +x "$tmp/fakebin/cmake"
(
  export OUT=$tmp/out-build PATH=$tmp/fakebin:$PATH
  mkdir -p "$OUT"
  . scripts/device/device_env.sh
  budget=1000 build=$tmp/b
  unset CUDA_COMPUTE_CAP
  rmlp_build 30 30 0 radixmlp >/dev/null && [ "$RMLP_BUILD_DIR" = "$tmp/b-nofi" ] || exit 1
  grep -q 'RMLP_FLASHINFER=OFF' "$tmp/b-nofi/CMakeCache.txt" && grep -q '"NOTE: built without FlashInfer"' "$OUT/steps.jsonl" &&
    grep -q 'fake failure' "$OUT/steps.jsonl" || exit 1
  # one architecture: the device's (no nvidia-smi here: 90), or CUDA_COMPUTE_CAP's
  command -v nvidia-smi >/dev/null || grep -q -- '-DCUDA_COMPUTE_CAP=90 ' "$tmp/b/CMakeCache.txt" || exit 1
  CUDA_COMPUTE_CAP=80 rmlp_cmake_args "$tmp/arch" && [[ " ${RMLP_CMAKE_ARGS[*]} " == *" -DCUDA_COMPUTE_CAP=80 "* ]] || exit 1
  n=$(grep -c '"step": "build radixmlp in' "$OUT/steps.jsonl")
  rmlp_build 30 30 0 radixmlp >/dev/null && [ "$RMLP_BUILD_DIR" = "$tmp/b-nofi" ] || exit 1
  grep -q "\"step\": \"build in $tmp/b\", \"rc\": \"not run\"" "$OUT/steps.jsonl" &&
    [ "$(grep -c '"step": "build radixmlp in' "$OUT/steps.jsonl")" = $((n + 1)) ] || exit 1 # the nofi one only
  RMLP_WINDOW_ID=another-command FAKE_BUILD_OK=1 rmlp_build 30 30 0 radixmlp >/dev/null && [ "$RMLP_BUILD_DIR" = "$tmp/b" ] || exit 1
  # only a program failed: the library built, so no second build; the record names what failed
  build=$tmp/p
  FAKE_FAILED="FAILED: tests/CMakeFiles/test_gpu_model.dir/test_gpu_model.c.o" rmlp_build 30 30 0 radixmlp >/dev/null &&
    [ "$RMLP_BUILD_DIR" = "$tmp/p" ] && [ ! -e "$tmp/p-nofi" ] &&
    grep '"NOTE: some programs did not build"' "$OUT/steps.jsonl" | grep -q 'test_gpu_model.dir' || exit 1
  build=$tmp/c
  PATH=$tmp/fakebin:$PATH
  printf '#!/bin/sh\n[ "$1" = --build ] && exit 2\nmkdir -p "$4"; : >"$4/CMakeCache.txt"\n' >"$tmp/fakebin/cmake"
  rmlp_build 30 30 0 radixmlp >/dev/null && exit 1
  [ -z "$RMLP_BUILD_DIR" ] && grep -q '"step": "NO BUILD"' "$OUT/steps.jsonl"
)
check "rmlp_build: FlashInfer off after a failed build, once per command, and NO BUILD when both fail" test $? = 0
(
  export OUT=$tmp/out-nobudget PATH=$tmp/fakebin:$PATH
  mkdir -p "$OUT"
  . scripts/device/device_env.sh
  budget=10 build=$tmp/d
  mkdir -p "$build" && : >"$build/CMakeCache.txt"
  # too little budget for the build: "not run" (a text, not a status: no arithmetic on it), then NO BUILD
  rmlp_build 30 30 0 radixmlp >"$OUT/stdout" 2>"$OUT/stderr" && exit 1
  ! grep -q 'unbound variable\|syntax error' "$OUT/stderr" && grep -q '"step": "NO BUILD"' "$OUT/steps.jsonl" &&
    grep -q '"rc": "not run: ' "$OUT/steps.jsonl"
)
check "rmlp_build: a build with no budget left is not run and recorded, without a shell error" test $? = 0

# --- oneDNN's .debs in their own folder, and .debs without static libraries ---------------------------------
make_deb libdnnl2_9_amd64 xz "$lib/libdnnl.so.2=fake"
make_deb libdnnl-dev_9_amd64 xz "usr/include/oneapi/dnnl/dnnl.h=/* fake */\n" \
  "usr/include/oneapi/dnnl/dnnl_version.h=#define DNNL_VERSION_MAJOR 9\n#define DNNL_VERSION_MINOR 8\n#define DNNL_VERSION_PATCH 7\n"
make_deb ocl-icd-libopencl1_9_amd64 gzip "$lib/libOpenCL.so.1=fake"
mkdir -p "$tmp/onednn-checkout/.debs-onednn" && mv "$tmp"/debs/lib{dnnl2,dnnl-dev}_9_amd64.deb \
  "$tmp"/debs/ocl-icd-libopencl1_9_amd64.deb "$tmp/onednn-checkout/.debs-onednn/"
(
  export OUT=$tmp/out-onednn CPATH= LD_LIBRARY_PATH= RMLP_DNNL_PREFIX=$tmp/dnnl RMLP_DEPS_NO_DPKG=1
  mkdir -p "$OUT"
  . scripts/device/device_env.sh
  cd "$tmp/onednn-checkout" || exit 1
  CC=false rmlp_setup "oneDNN" rmlp_onednn_deps >/dev/null || exit 1 # CC=false: no header on "this machine"
  [ "${CPATH%%:*}" = "$tmp/dnnl/usr/include" ] && [ -f "$tmp/dnnl/usr/include/oneapi/dnnl/dnnl.h" ] &&
    [ "${LD_LIBRARY_PATH%%:*}" = "$tmp/dnnl/usr/lib/x86_64-linux-gnu" ] && grep -q 'oneDNN 9.8.7 unpacked' "$OUT/steps.jsonl"
)
check "rmlp_onednn_deps unpacks oneDNN's .debs from .debs-onednn (CPATH, LD_LIBRARY_PATH)" test $? = 0
bad=$(grep -n -E 'rmlp_onednn_deps[^(]*\.debs($| )' scripts/device/*.sh)
check "rmlp_prepare looks for oneDNN in .debs-onednn, not in .debs: $bad" test -z "$bad"
if command -v dpkg-deb >/dev/null; then # fetch's rebuild of a .deb without its static libraries
  mkdir -p "$tmp/pkg/DEBIAN" "$tmp/pkg/$lib"
  printf 'Package: fake-dev\nVersion: 1\nArchitecture: amd64\nMaintainer: t <t@example.org>\nDescription: fake\n' \
    >"$tmp/pkg/DEBIAN/control"
  head -c 300000 /dev/urandom >"$tmp/pkg/$lib/libfake.a" && echo so >"$tmp/pkg/$lib/libfake.so"
  dpkg-deb -b "$tmp/pkg" "$tmp/fake-dev.deb" >/dev/null
  (
    . scripts/device/device_deps.sh install /dev/null /dev/null >/dev/null 2>&1 # the functions (install fails)
    rmlp_deps_no_static "$tmp/fake-dev.deb" >/dev/null && listing=$(dpkg-deb -c "$tmp/fake-dev.deb") &&
      grep -q 'libfake\.so$' <<<"$listing" && ! grep -q 'libfake\.a$' <<<"$listing" &&
      (($(stat -c %s "$tmp/fake-dev.deb") < 100000))
  )
  check "device_deps.sh rebuilds a .deb without its static library, keeping the rest" test $? = 0
fi

# --- the bf16 CPU step: its own CPU-only build with oneDNN's header, on a fake cmake ------------------------
# configure: the cache records the arguments, and oneDNN's header as $FAKE_ONEDNN says; --build DIR: a
# test_bf16_onednn that prints a SKIP line
mkdir -p "$tmp/bcbin"
printf '%s\n' '#!/bin/sh' 'if [ "$1" = --build ]; then' \
  '  mkdir -p "$2/tests" && printf "#!/bin/sh\necho \"SKIP: fake\"\necho \"1 passed, 0 failed\"\n" >"$2/tests/test_bf16_onednn"' \
  '  chmod +x "$2/tests/test_bf16_onednn" && echo built && exit 0' 'fi' \
  'mkdir -p "$4" && { echo "$*"; echo "RMLP_HAVE_ONEDNN_H:INTERNAL=${FAKE_ONEDNN:-}"; } >"$4/CMakeCache.txt" &&' \
  '  echo "-- radix_mlp 0.0: CUDA OFF" && echo "-- radix_mlp: oneDNN bf16 GEMMs ${FAKE_ONEDNN:-}"' >"$tmp/bcbin/cmake"
chmod +x "$tmp/bcbin/cmake"
(
  export OUT=$tmp/out-bc PATH=$tmp/bcbin:$PATH RMLP_PREPARED=1 RMLP_BC_BUILD=$tmp/bc
  unset RMLP_WINDOW RMLP_DEADLINE
  configures() { grep -c "\"step\": \"configure $tmp/bc\"" "$OUT/steps.jsonl"; }
  CC=false bash scripts/device/bf16_cpu.sh >/dev/null || exit 1 # no header: nothing built
  [ ! -e "$tmp/bc" ] && grep -q '"NOTE: bf16 CPU step not run"' "$OUT/steps.jsonl" || exit 1
  CC=true bash scripts/device/bf16_cpu.sh >/dev/null || exit 1 # "found" by CC, not by the configure
  grep -q -- '-DRMLP_CUDA=OFF' "$tmp/bc/CMakeCache.txt" && ! grep -q -- '-DRMLP_CUDA=ON' "$tmp/bc/CMakeCache.txt" &&
    [ "$(configures)" = 1 ] && grep -q '"step": "test_bf16_onednn", "rc": 0' "$OUT/steps.jsonl" || exit 1
  FAKE_ONEDNN=1 CC=true bash scripts/device/bf16_cpu.sh >/dev/null || exit 1 # the header is there now
  grep -q "\"NOTE: $tmp/bc configured again\"" "$OUT/steps.jsonl" && [ "$(configures)" = 1 ] &&
    grep -q 'oneDNN bf16 GEMMs 1' "$OUT/steps.jsonl" || exit 1
  CC=true bash scripts/device/bf16_cpu.sh >/dev/null && [ "$(configures)" = 0 ] # configured with it: built only
)
check "bf16_cpu.sh: its own CPU-only build, configured again when oneDNN's header came later, none without it" test $? = 0

# --- what a window's call carries: under 64 MiB --------------------------------------------------------------
# A checkout of known sizes (sparse files): the sums, the warning, the refusal, a missing folder.
mkdir -p "$tmp/carry/gpu" "$tmp/carry/big" "$tmp/carry/third_party/flashinfer"
(
  cd "$tmp/carry" && git init -q . && git config user.email t@example.org && git config user.name t || exit 1
  printf '/big/\n/third_party/\n/.debs/\n/ignored\n' >.gitignore
  printf '%s\n' '| A | `run(command="bash scripts/device/window.sh 1", timeout_s=580, carry=[".debs", "third_party/flashinfer"])` |' \
    ' `run(command="X=<L-70> bash scripts/device/window.sh 4", timeout_s=<L-30>, carry=["big"])` |' >gpu/CHECKLIST.md
  truncate -s $((3 << 20)) tracked.bin && git add .gitignore gpu tracked.bin && git commit -q -m t || exit 1
  truncate -s 4097 untracked.bin && truncate -s $((9 << 20)) ignored && truncate -s $((59 << 20)) big/a &&
    truncate -s $((1 << 20)) third_party/flashinfer/h
)
carry() { (cd "$tmp/carry" && bash "$root/scripts/device/carry_size.sh" "$@"); }
out=$(carry --estimate) # 3 MiB + 2 small files tracked, 4097 bytes untracked (8 KiB in blocks); .debs: its estimate
want=$(awk -v b=$(((3 << 20) + 2 * 4096 + 8192 + (1 << 20) + 8000000)) 'BEGIN {printf "%.1f MiB", b / 1048576}')
check "carry_size.sh: the sum per command in 4 KiB blocks, ignored files left out, an absent .debs estimated ($want: $out)" \
  grep -q "^command 1 \[.debs, third_party/flashinfer\]: $want of 64.0 MiB.*absent here.*: OK$" <<<"$out"
check "carry_size.sh warns above 60 MiB and still passes: 62 MiB ($out)" \
  grep -q '^command 4 \[big\]: 62.0 MiB of 64.0 MiB.*: WARN' <<<"$out"
truncate -s $((61 << 20)) "$tmp/carry/big/a"
carry --estimate >"$tmp/carry.out" 2>&1
rc=$?
check "carry_size.sh fails above 64 MiB ($(cat "$tmp/carry.out"))" test $rc = 1
check "carry_size.sh names the call that would be refused" grep -q '^command 4 \[big\]: 64.0 MiB.*OVER' "$tmp/carry.out"
carry >"$tmp/carry.out" 2>&1
rc=$?
check "carry_size.sh fails on a carried folder that is missing, unless estimating ($(cat "$tmp/carry.out"))" test $rc = 2
# This checkout: the tree and the carry lists of gpu/CHECKLIST.md, the folders absent here (CI) at their
# expected sizes: fails when the tracked tree outgrows a call.
out=$(scripts/device/carry_size.sh --estimate 2>&1)
check "every call of gpu/CHECKLIST.md's windows carries under 64 MiB:
$out" test $? = 0
check "gpu/CHECKLIST.md's windows carry oneDNN's .debs in command 4 alone ($out)" \
  test "$(grep -c '^command [0-9] .*\.debs-onednn' <<<"$out")" = 1 -a "$(grep -c '^command 4 .*\.debs-onednn' <<<"$out")" = 1

echo "$passed passed, $failed failed"
((failed == 0))
