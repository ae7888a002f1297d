#!/usr/bin/env bash
# bf16_cpu.sh: oneDNN's bf16 GEMMs for bf16-weight CPU models (issue 32, cpu/linear_onednn.c) on the GPU
# machine's host CPU, which may have AMX-BF16 (the development VM, when it is a Zen 4, has AVX512-BF16
# only). The first step of command 4 (scripts/device/window.sh), cheap (~30 s) and capped (90 s):
#   1. the build (rmlp_build: test_bf16_onednn and radixmlp; nothing to do on command 1's build; on
#      a bare machine, without it, the step is not run);
#   2. test_bf16_onednn on the fixtures: where the CPU has the instructions, oneDNN's GEMM against the
#      widening path on the same rounded rows, the tiny model off / on / compact / cache and every
#      fixture against transformers within the stated tolerances (else its SKIP line says why);
#   3. where the test ran oneDNN: radixmlp bench --quick --cpu-weights bf16 --json on every core,
#      RADIX_MLP_CPU_BF16_GEMM=widen and =onednn alternating, RMLP_BC_ROUNDS rounds (default 2): the ratio for
#      which AUTO takes oneDNN (docs/bench/cpu-path.md), measured on this CPU too.
# Every step runs under `timeout -k 15` within the budget and is recorded as it ends.
# Files under $OUT: bf16_cpu.log (the test's and the benches' output, their JSON lines), steps.jsonl,
# summary.txt, build.log.
# Environment: RMLP_BC_BUDGET (seconds, default 90; fewer when window.sh's deadline comes sooner),
# RMLP_BC_ROUNDS, RMLP_BUILD (build-gpu), RMLP_JOBS.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
. scripts/device/device_env.sh
OUT=${OUT:-/tmp/rmlp-bc-out}
mkdir -p "$OUT"
[ -n "${RMLP_WINDOW:-}" ] || : >"$OUT/steps.jsonl"
budget=$(rmlp_budget "${RMLP_BC_BUDGET:-90}")
rounds=${RMLP_BC_ROUNDS:-2}
build=${RMLP_BUILD:-build-gpu}
log=$OUT/bf16_cpu.log
touch "$log"
status=0

rmlp_prepare || exit 1
if [ ! -x "$build/radixmlp" ] && [ ! -x "$build-nofi/radixmlp" ]; then
  # a bare machine: the full build is first_run.sh's (after this), not a capped step's to start
  rmlp_record "NOTE: bf16 CPU step not run" 0 "$SECONDS" 0 "no build from command 1 on this machine ($build)"
  exit 0
fi
rmlp_build 40 0 15 test_bf16_onednn radixmlp || exit 1 # command 1 built them: seconds
dir=$RMLP_BUILD_DIR

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
