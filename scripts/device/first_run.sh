#!/usr/bin/env bash
# first_run.sh: every CUDA path's correctness on a lent GPU. scripts/device/window.sh runs it for the plan of
# gpu/CHECKLIST.md: its tests in command 1 (RMLP_FR_SANITIZE=0), its sanitizers in command 4
# (RMLP_FR_TESTS=0); alone it does both.
#   1. the machine, OpenBLAS/jansson (the carried .debs), FlashInfer's headers, cuBLAS
#      (scripts/device/device_env.sh), unless scripts/device/window.sh did it already;
#   2. a CUDA build of everything (the GPU tests are whatever ctest labels gpu; the rest is C, seconds
#      on 16 cores) in build-gpu/ (configured first on a bare machine; retried once with FlashInfer off
#      in build-gpu-nofi, so that the tests still run);
#   3. the GPU tests (RMLP_FR_TESTS=1): every test of label gpu, each its own ctest run under its own
#      time limit, test_gpu_flashinfer first (FlashInfer never ran yet), the others in ctest's order;
#      then test_gpu_model and test_gpu_cache again with the old paths in the environment
#      ($RMLP_OLD_PATHS and RADIX_MLP_GPU_DECODE=own: the tests' contexts read it at creation);
#   4. compute-sanitizer (RMLP_FR_SANITIZE=1): memcheck on test_gpu_flashinfer, the kernel tests
#      (test_gpu_kernels_attention, test_gpu_kernels) and the quick model test
#      (RMLP_GPU_MODEL_QUICK=1), racecheck, synccheck and initcheck on the kernel tests
#      (RMLP_GPU_KERNELS_QUICK=1: f32 and bf16), memcheck on test_gpu_cache, then
#      on every other test_gpu_* program of label gpu; each bounded by what is left, the most
#      valuable first.
# Every step runs under `timeout -k 15` within the budget and is recorded as it ends
# (scripts/device/device_steps.sh). Without a GPU it records SKIP and exits 0 having run nothing, unless
# RMLP_GPU_DRY_RUN=1, which runs every step anyway (the tests then skip with their message).
# Usage, from the repository root: bash scripts/device/first_run.sh
# Files under $OUT: steps.jsonl, summary.txt (read it first), build.log, and with the tests
# ctest_gpu.log and errors.txt (every measured error line of the GPU tests, every FAIL line), with
# the sanitizers sanitizers.log.
# Environment: RMLP_FR_BUDGET (seconds, default 540; fewer when scripts/device/window.sh's deadline comes
# sooner), RMLP_FR_TESTS, RMLP_FR_SANITIZE (0/1, default 1), RMLP_BUILD (default build-gpu),
# RMLP_JOBS (build parallelism, default the core count).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
. scripts/device/device_env.sh
OUT=${OUT:-/tmp/rmlp-first-run}
mkdir -p "$OUT"
[ -n "${RMLP_WINDOW:-}" ] || : >"$OUT/steps.jsonl" # scripts/device/window.sh starts the record itself
budget=$(rmlp_budget "${RMLP_FR_BUDGET:-540}")
build=${RMLP_BUILD:-build-gpu}
tests=${RMLP_FR_TESTS:-1}
sanitize=${RMLP_FR_SANITIZE:-1}
status=0

rmlp_gpu_or_skip || exit 0
rmlp_prepare || exit 1

# --- build -----------------------------------------------------------------------------------------
rmlp_build 240 150 60 all || exit 1
dir=$RMLP_BUILD_DIR
# gpu_tests: the names of ctest's tests of label gpu in $dir, in its order, test_gpu_flashinfer first.
gpu_tests() {
  ctest --test-dir "$dir" -N -L gpu 2>/dev/null | sed -n 's/^ *Test *#[0-9]*: *//p' |
    awk '$1 == "test_gpu_flashinfer" {print; next} {rest[++n] = $1} END {for (i = 1; i <= n; i++) print rest[i]}'
}
mapfile -t tests_gpu < <(gpu_tests)

# --- the GPU tests ---------------------------------------------------------------------------------
# ctest_one NAME MAX RESERVE [VAR=VALUE...]: one test in the environment given, its output appended
# to ctest_gpu.log, its measured errors and FAIL lines to errors.txt.
ctest_one() {
  local name=$1 max=$2 reserve=$3 n0 part tag rc
  shift 3
  tag=${*:+ with $*}
  n0=$(wc -l <"$OUT/ctest_gpu.log")
  rmlp_step "ctest $name$tag" "$max" "$reserve" "$OUT/ctest_gpu.log" "$OUT/ctest_gpu.log" \
    env "$@" ctest --test-dir "$dir" -R "^$name\$" --output-on-failure -V
  rc=$?
  part=$(rmlp_new_lines "$OUT/ctest_gpu.log" "$n0" | sed 's/^[0-9]*: //')
  {
    echo "# $name$tag"
    grep -E 'max abs|bit-identical|differs \(|attention kernel|worst warm vs cold|worst device vs CPU|FAIL' <<<"$part"
  } >>"$OUT/errors.txt"
  ((rc == 0)) && grep -q -E 'Test +#[0-9]+: .*Skipped|^SKIP' <<<"$part" && RMLP_STEP_RC=77
  ((rc != 0)) && status=1
  rmlp_done "$(grep -E -m 12 'Test +#[0-9]+: |^[0-9]+ passed, [0-9]+ failed|^device 0|SKIP|FAIL|Not Run|Could not find' <<<"$part" |
    cut -c1-240)"
}

if [ "$tests" = 1 ]; then
  touch "$OUT/ctest_gpu.log"
  : >"$OUT/errors.txt"
  read -r -a old <<<"${RMLP_OLD_PATHS//,/ } RADIX_MLP_GPU_DECODE=own"
  # name, time limit, environment; each keeps 10 s for every one after it (most take seconds), and
  # one is run when it gets 10 s at least
  declare -A limit=([test_gpu_probe]=30 [test_gpu_model]=180 [bench_gather_quick]=60 [cli_bench_device]=90)
  runs=()
  for name in "${tests_gpu[@]}"; do runs+=("$name ${limit[$name]:-120}"); done
  for name in test_gpu_model test_gpu_cache; do
    [[ " ${tests_gpu[*]} " == *" $name "* ]] && runs+=("$name $((${limit[$name]:-120} - 30)) old")
  done
  rmlp_record "the GPU tests" "$( ((${#tests_gpu[@]} > 0)) && echo 0 || echo FAILED)" "$SECONDS" 0 \
    "${#tests_gpu[@]} of label gpu in $dir (ctest -N -L gpu): ${tests_gpu[*]}"
  n_left=${#runs[@]}
  RMLP_MIN_STEP=10
  for r in "${runs[@]}"; do
    read -r name max paths <<<"$r"
    n_left=$((n_left - 1))
    if [ "${paths:-}" = old ]; then
      ctest_one "$name" "$max" $((n_left * 10)) "${old[@]}"
    else
      ctest_one "$name" "$max" $((n_left * 10))
    fi
  done
  RMLP_MIN_STEP=20
fi

# --- compute-sanitizer ---------------------------------------------------------------------------
if [ "$sanitize" = 1 ]; then
  if ! rmlp_find_sanitizer; then
    rmlp_record "compute-sanitizer" FAILED "$SECONDS" 0 "not found (PATH, next to nvcc, /usr/local/cuda): no sanitizer run"
    exit 1
  fi
  touch "$OUT/sanitizers.log"
  fixtures=$PWD/integration_tests/fixtures
  # tool, test, its options; the most valuable first.
  runs=("memcheck|test_gpu_flashinfer|--leak-check full" "memcheck|test_gpu_kernels_attention|--leak-check full"
    "memcheck|test_gpu_kernels|--leak-check full" "memcheck|test_gpu_model|--leak-check full"
    "racecheck|test_gpu_kernels_attention|" "racecheck|test_gpu_kernels|" "synccheck|test_gpu_kernels_attention|"
    "synccheck|test_gpu_kernels|" "initcheck|test_gpu_kernels_attention|" "initcheck|test_gpu_kernels|"
    "memcheck|test_gpu_cache|--leak-check full")
  for name in "${tests_gpu[@]}"; do
    [[ "$name" == test_gpu_* && " ${runs[*]} " != *"|$name|"* && -x "$dir/tests/$name" ]] &&
      runs+=("memcheck|$name|--leak-check full")
  done
  n_left=${#runs[@]}
  RMLP_MIN_STEP=15
  for r in "${runs[@]}"; do
    IFS='|' read -r tool test extra <<<"$r"
    n_left=$((n_left - 1))
    args=()
    case "$test" in test_gpu_model | test_gpu_bind | test_gpu_graph | test_gpu_cache | test_gpu_forward_last) args=("$fixtures") ;; esac
    n0=$(wc -l <"$OUT/sanitizers.log")
    # shellcheck disable=SC2086 # $extra is a word list
    rmlp_step "compute-sanitizer --tool $tool $test" 200 $((n_left * 15)) "$OUT/sanitizers.log" "$OUT/sanitizers.log" \
      env RMLP_GPU_MODEL_QUICK=1 RMLP_GPU_KERNELS_QUICK=1 "$RMLP_SANITIZER" --tool "$tool" --error-exitcode 1 \
      --print-limit 20 $extra "$dir/tests/$test" "${args[@]}"
    (($? != 0)) && status=1
    part=$(rmlp_new_lines "$OUT/sanitizers.log" "$n0")
    rmlp_done "$(grep -m1 'ERROR SUMMARY' <<<"$part" || echo 'no ERROR SUMMARY line')
$(grep -E '^[0-9]+ passed, [0-9]+ failed|SKIP' <<<"$part" | tail -1)
$(grep -E -m 5 '^========= [A-Z]' <<<"$part" | grep -v 'ERROR SUMMARY')"
  done
fi

rmlp_record "first_run.sh done" 0 0 0 "status $status (1: a step above failed), $(rmlp_left) s of its budget left"
exit $status
