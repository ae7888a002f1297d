#!/usr/bin/env bash
# first_run.sh: every CUDA path's correctness on a lent GPU in ONE device call (at most ~9 minutes):
#   0. the machine: nvidia-smi -L, driver, nvcc, gcc, cmake, compute-sanitizer, the cuBLAS found
#      (gpu/device_env.sh: the one search for libcublas, toolkit lib64 or pip wheel);
#   1. OpenBLAS/jansson from the carried .debs when the machine lacks them; FlashInfer's carried
#      headers (third_party/flashinfer: without them the build has the reference attention only);
#   2. a CUDA build of only what the GPU tests (bench_gather's quick run among them) and radixmlp
#      need, warnings kept in the log, not errors (RMLP_WERROR=OFF), in build-gpu/ (ignored by
#      git; a warm machine keeps it for the benchmark call, bench/gpu_session.sh, which reuses it);
#   3. ctest -L gpu with a timeout per test;
#   4. compute-sanitizer: memcheck on test_gpu_kernels, on the quick model test and on
#      test_gpu_flashinfer, then racecheck, synccheck and initcheck on test_gpu_kernels (the model
#      test mostly instruments cuBLAS); each bounded by what is left of the budget, the most
#      valuable first.
# Without a GPU it says SKIP and exits 0 having run nothing, unless RMLP_FR_DRY_RUN=1, which runs
# every step anyway (the tests then skip with their message; for checking the script here).
# Usage, from the repository root (device `run`, carry [".debs", "third_party/flashinfer"], timeout_s 600):
#   bash gpu/first_run.sh
# Files under $OUT (5): summary.txt (the machine, each step's outcome and timing, pass/fail lines,
# sanitizer summaries: read this first), build.log, ctest_gpu.log, errors.txt (every measured error
# line of test_gpu_model and test_gpu_flashinfer, the GPU tests' failures), sanitizers.log (each run's tail).
# Environment: RMLP_FR_BUDGET (seconds, default 540), RMLP_FR_BUILD (default build-gpu),
# RMLP_FR_JOBS (default: the core count), RMLP_FR_SANITIZE=0 (skip step 4).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
. gpu/device_env.sh
OUT=${OUT:-/tmp/rmlp-first-run}
mkdir -p "$OUT"
budget=${RMLP_FR_BUDGET:-540}
build=${RMLP_FR_BUILD:-build-gpu}
jobs=${RMLP_FR_JOBS:-$(nproc)}
summary=$OUT/summary.txt
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
: >"$summary"
say() { echo "[$(printf '%3d' "$SECONDS") s] $*" | tee -a "$summary"; }
# Runs "$@" in this shell (its exports stay), its output into the summary too.
record() {
  "$@" >"$scratch/step" 2>&1
  local rc=$?
  tee -a "$summary" <"$scratch/step"
  return $rc
}
status=0

if ! nvidia-smi -L >/dev/null 2>&1; then
  if [ "${RMLP_FR_DRY_RUN:-0}" != 1 ]; then
    say "SKIP: no GPU on this machine (nvidia-smi -L fails or is absent); nothing was run (RMLP_FR_DRY_RUN=1 runs every step anyway)"
    exit 0
  fi
  say "DRY RUN: no GPU; every step runs, the GPU tests skip"
fi

# --- 0. the machine ------------------------------------------------------------------------------
say "first_run: budget ${budget} s, build folder ${build}, ${jobs} jobs"
record rmlp_environment
record rmlp_find_cublas || status=1

# --- 1. dependencies ------------------------------------------------------------------------------
if ! record rmlp_device_deps .debs; then
  say "FAILED: the build needs OpenBLAS and jansson"
  exit 1
fi
record rmlp_flashinfer_headers || status=1

# --- 2. build ---------------------------------------------------------------------------------------
targets=(test_gpu_probe test_gpu_kernels test_gpu_model test_gpu_flashinfer test_gpu_cache bench_gather radixmlp)
say "configure + build ${targets[*]}"
t=$(rmlp_slot 300 150)
if timeout "$t" bash -c ". gpu/device_env.sh && rmlp_cmake_configure '$build' && cmake --build '$build' -j$jobs \
    --target ${targets[*]}" >"$OUT/build.log" 2>&1; then
  grep -m1 'radix_mlp .*CUDA' "$OUT/build.log" | tee -a "$summary"
  warnings=$(grep -Ec 'warning( #[0-9]+-D)?:' "$OUT/build.log")
  say "build ok: $warnings lines mention a warning$( ((warnings > 0)) && echo ' (RMLP_WERROR=OFF kept them going; the first ones:)')"
  grep -E -m 10 'warning( #[0-9]+-D)?:' "$OUT/build.log" | cut -c1-220 | tee -a "$summary"
else
  say "BUILD FAILED ($(rmlp_rc $?)); the end of build.log:"
  tail -n 40 "$OUT/build.log" | tee -a "$summary"
  exit 1
fi

# --- 3. the GPU tests -----------------------------------------------------------------------------
t=$(rmlp_slot 240 120)
say "ctest -L gpu (at most $t s, 200 s per test)"
timeout "$t" ctest --test-dir "$build" -L gpu --output-on-failure -V --timeout 200 >"$OUT/ctest_gpu.log" 2>&1
rc=$?
grep -E 'Test +#[0-9]+: .*(Passed|Failed|\*\*\*|Not Run|Skipped)|tests passed|SKIP' "$OUT/ctest_gpu.log" |
  sed 's/^[0-9]*: //' | tee -a "$summary"
grep -E '^[0-9]+: [0-9]+ passed, [0-9]+ failed|^[0-9]+ passed, [0-9]+ failed|^device 0' "$OUT/ctest_gpu.log" |
  tee -a "$summary"
{
  echo "# test_gpu_model's and test_gpu_flashinfer's measured errors and comparisons, which attention kernel the"
  echo "# model test saw, then every FAIL line of the GPU tests"
  grep -E 'max abs|bit-identical|differs \(|attention kernel|worst warm vs cold|worst device vs CPU' "$OUT/ctest_gpu.log" | sed 's/^[0-9]*: //'
  grep -E 'FAIL' "$OUT/ctest_gpu.log" | sed 's/^[0-9]*: //'
} >"$OUT/errors.txt"
fails=$(grep -c 'FAIL' "$OUT/ctest_gpu.log")
say "ctest -L gpu: rc=$rc, $fails FAIL lines (errors.txt)$( ((fails > 0)) && echo '; the first:')"
grep -m 15 'FAIL' "$OUT/ctest_gpu.log" | sed 's/^[0-9]*: //' | cut -c1-300 | tee -a "$summary"
((rc != 0)) && status=1
[ "$rc" = 0 ] && [ -n "$(grep -E 'Test +#[0-9]+: test_gpu_model .*Passed' "$OUT/ctest_gpu.log")" ] && touch "$build/.first_run_passed"

# --- 4. compute-sanitizer ----------------------------------------------------------------------------
: >"$OUT/sanitizers.log"
if [ "${RMLP_FR_SANITIZE:-1}" = 0 ]; then
  say "compute-sanitizer skipped (RMLP_FR_SANITIZE=0)"
elif ! rmlp_find_sanitizer; then
  say "compute-sanitizer not found: step 4 skipped"
  status=1
else
  fixtures=$PWD/integration_tests/fixtures
  # tool, test, what runs it; the most valuable first.
  runs=("memcheck|test_gpu_kernels|--leak-check full" "memcheck|test_gpu_model|--leak-check full"
    "memcheck|test_gpu_flashinfer|--leak-check full" "racecheck|test_gpu_kernels|" "synccheck|test_gpu_kernels|"
    "initcheck|test_gpu_kernels|" "memcheck|test_gpu_cache|--leak-check full")
  n_left=${#runs[@]}
  for r in "${runs[@]}"; do
    IFS='|' read -r tool test extra <<<"$r"
    n_left=$((n_left - 1))
    t=$(rmlp_slot 200 $((n_left * 30)))
    if ((t < 30)); then
      say "sanitizer $tool $test skipped: only $(rmlp_left) s left"
      status=1
      continue
    fi
    args=()
    [ "$test" = test_gpu_model ] || [ "$test" = test_gpu_cache ] && args=("$fixtures")
    start=$SECONDS
    # shellcheck disable=SC2086 # $extra is a word list
    (cd "$build/tests" && RMLP_GPU_MODEL_QUICK=1 RMLP_GPU_KERNELS_QUICK=1 timeout "$t" "$RMLP_SANITIZER" \
      --tool "$tool" --error-exitcode 1 --print-limit 20 $extra "./$test" "${args[@]}") >"$scratch/san.log" 2>&1
    rc=$?
    errors=$(grep -m1 'ERROR SUMMARY' "$scratch/san.log" || echo 'no ERROR SUMMARY line')
    result=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$scratch/san.log" | tail -1)
    say "sanitizer $tool $test: $(rmlp_rc $rc), $((SECONDS - start)) s, $errors, test: ${result:-no summary line}"
    ((rc != 0)) && status=1
    {
      echo "===== compute-sanitizer --tool $tool $extra $test: rc=$rc, $((SECONDS - start)) s"
      grep -E '^=========' "$scratch/san.log" | head -n 80
      echo "----- last lines"
      tail -n 15 "$scratch/san.log"
    } >>"$OUT/sanitizers.log"
  done
fi

say "first_run done: status $status ($(rmlp_left) s of the budget left)"
exit $status
