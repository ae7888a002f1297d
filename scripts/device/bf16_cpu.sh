#!/usr/bin/env bash
# bf16_cpu.sh: oneDNN's bf16 GEMMs for bf16-weight CPU models (issue 32, cpu/linear_onednn.c) on the GPU
# machine's host CPU, which may have AMX-BF16 (the development VM, when it is a Zen 4, has AVX512-BF16
# only). The first step of command 4 (scripts/device/window.sh), cheap (~40 s) and capped (90 s):
#   1. oneDNN's header: the machine's, else the carried .debs-onednn (rmlp_onednn_deps; command 4
#      carries it, commands 1-3 do not: the three folders exceed a call's 64 MiB). Without it the
#      step records why and runs nothing: a build without the header has no oneDNN to test;
#   2. the build, CPU-only, in its own folder ($RMLP_BUILD-onednn, build-gpu-onednn by default):
#      command 1's CUDA build was configured without oneDNN's header (and the configure caches
#      that), so it is not reused. test_bf16_onednn and radixmlp, ~160 C jobs: ~27 s of CPU (2 cores
#      here), ~10 s with the configure on 16 cores. A folder configured without the header (a
#      window that did not carry it) is configured again;
#   3. test_bf16_onednn on the fixtures: where the CPU has the instructions, oneDNN's GEMM against the
#      widening path on the same rounded rows, the tiny model off / on / compact / cache and every
#      fixture against transformers within the stated tolerances (else its SKIP line says why);
#   4. where the test ran oneDNN: radixmlp bench --quick --cpu-weights bf16 --json on every core,
#      RADIX_MLP_CPU_BF16_GEMM=widen and =onednn alternating, RMLP_BC_ROUNDS rounds (default 2): the ratio for
#      which AUTO takes oneDNN (docs/bench/cpu-path.md), measured on this CPU too.
# Every step runs under `timeout -k 15` within the budget and is recorded as it ends.
# Files under $OUT: bf16_cpu.log (the test's and the benches' output, their JSON lines), steps.jsonl,
# summary.txt, build.log.
# Environment: RMLP_BC_BUDGET (seconds, default 90; fewer when window.sh's deadline comes sooner),
# RMLP_BC_ROUNDS, RMLP_BC_BUILD (the build folder; default ${RMLP_BUILD:-build-gpu}-onednn), RMLP_JOBS.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
. scripts/device/device_env.sh
OUT=${OUT:-/tmp/rmlp-bc-out}
mkdir -p "$OUT"
[ -n "${RMLP_WINDOW:-}" ] || : >"$OUT/steps.jsonl"
budget=$(rmlp_budget "${RMLP_BC_BUDGET:-90}")
rounds=${RMLP_BC_ROUNDS:-2}
build=${RMLP_BC_BUILD:-${RMLP_BUILD:-build-gpu}-onednn}
log=$OUT/bf16_cpu.log
touch "$log" "$OUT/build.log"
status=0

rmlp_prepare || exit 1
if ! rmlp_onednn_header; then
  rmlp_record "NOTE: bf16 CPU step not run" 0 "$SECONDS" 0 "no oneDNN header on this machine and none carried
(here: scripts/device/device_deps.sh fetch .debs; carry [\".debs\", \".debs-onednn\"])"
  exit 0
fi
if [ -f "$build/CMakeCache.txt" ] && ! grep -q '^RMLP_HAVE_ONEDNN_H:INTERNAL=1' "$build/CMakeCache.txt"; then
  rm -f "$build/CMakeCache.txt" # configured before the header was there: the check's result is cached
  rmlp_record "NOTE: $build configured again" 0 "$SECONDS" 0 "its configure had not found oneDNN's header"
fi
# configure (its slot: the budget less 35 + 30 kept), then the build within half the budget (45 s of 90;
# a dry run on 2 cores raises RMLP_BC_BUDGET), 35 s kept for the test
if ! rmlp_build_in "$build" $((budget / 2)) 35 "test_bf16_onednn radixmlp" "" rmlp_cpu_cmake_args; then
  rmlp_record "NO BUILD for the bf16 CPU step" FAILED "$SECONDS" 0 "$build (CPU-only) failed: build.log"
  exit 1
fi
dir=$build

n0=$(wc -l <"$log")
rmlp_step "test_bf16_onednn" 30 15 "$log" "$log" "$dir/tests/test_bf16_onednn" integration_tests/fixtures
rc=$?
((rc != 0)) && status=1
rmlp_done "$(rmlp_new_lines "$log" "$n0" | grep -E 'in hardware|SKIP|default GEMM|relative|passed, [0-9]+ failed|FAIL' |
  head -n 16)"

if ! rmlp_new_lines "$log" "$n0" | grep -q 'bf16 in hardware'; then
  rmlp_record "NOTE: no bench" 0 "$SECONDS" 0 "this CPU runs no bf16 GEMM in hardware (the test's SKIP line): nothing to time"
  exit $status
fi
# A bench row as "GEMM: off / on / compact ms", from its JSON line.
row() { sed -n 's/.*"bf16_gemm": "\([a-z]*\)".*"ms_off": \([0-9.]*\), "ms_on": \([0-9.]*\), "ms_compact": \([0-9.]*\).*/\1: \2 \/ \3 \/ \4 ms/p'; }
for ((r = 1; r <= rounds; r++)); do
  for gemm in widen onednn; do
    n0=$(wc -l <"$log")
    rmlp_step "bench --quick, bf16 $gemm, round $r" 20 0 "$log" "$log" env RADIX_MLP_CPU_BF16_GEMM=$gemm \
      "$dir/radixmlp" bench --quick --cpu-weights bf16 --json
    rc=$?
    ((rc != 0)) && status=1
    rmlp_done "$(rmlp_new_lines "$log" "$n0" | row) $(rmlp_new_lines "$log" "$n0" | grep -E -m2 'bf16 GEMMs|rmlp_' |
      cut -c1-200)"
  done
done

rmlp_record "bf16_cpu.sh done" 0 0 0 "status $status (1: a step above failed), $(rmlp_left) s of its budget left"
exit $status
