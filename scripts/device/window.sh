#!/usr/bin/env bash
# window.sh: the plan for the GPU windows (15 minutes of device time a lent session since 2026-11, 30
# before; at most 600 s per command, the machine taken back after 30 s idle): four commands, two a
# session (1 then 4, then 2 then 3: gpu/CHECKLIST.md), in the order of their value, each
# self-contained: it configures and builds what it needs when build-gpu/ is gone (a bare machine), runs every step under its own `timeout -k 15`, writes each step's outcome into $OUT as
# it ends and regenerates $OUT/summary.txt from the JSON lines written so far, and ends within its
# budget: RMLP_WINDOW_BUDGET, by default 540, 400, 280 and 260 s (the `run` calls' timeout_s 580,
# 440, 320 and 300); a session's second command gets what its first left (RMLP_WINDOW_BUDGET).
#   bash scripts/device/window.sh 1   build; the GPU tests without sanitizers (test_gpu_flashinfer first; then
#                          test_gpu_model and test_gpu_cache again with the old paths); the 0.6B bench
#                          on b32_p2048_s256, rerank and no sharing (off, on, compact; default paths
#                          and old paths interleaved) with the transformers peer; b32_p2048_s256 with
#                          the reference attention kernel too when time is left
#                          (scripts/device/first_run.sh, then scripts/device/gpu_session.sh)
#   bash scripts/device/window.sh 2   the gather's bandwidth, the 8B and 4B shapes (8 layers, same cases
#                          but rerank, same sides and variants) with their peers, then the Gemma-2B
#                          shape's rerank case (8 layers, no peer) (scripts/device/gpu_session.sh)
#   bash scripts/device/window.sh 3   decode: CUDA with FlashInfer's decode and with the own kernels, then the
#                          machine's CPU cores (scripts/device/gpu_decode_session.sh)
#   bash scripts/device/window.sh 4   oneDNN's bf16 GEMMs on the host CPU, its own CPU-only build, at most 90 s
#                          (RMLP_BC_BUDGET; scripts/device/bf16_cpu.sh);
#                          compute-sanitizer: memcheck, racecheck, synccheck, initcheck on the GPU
#                          tests (scripts/device/first_run.sh)
# gpu/CHECKLIST.md has the exact `run` calls and what each must show. Without a GPU it records SKIP
# and runs nothing, unless RMLP_GPU_DRY_RUN=1: then every step runs here, the GPU ones skipping or
# failing with their message (for checking the scripts; RMLP_JOBS=2 on a shared machine).
# Files under $OUT (at most 8, what a `run` brings back): summary.txt (read it first; printed last),
# steps.jsonl, build.log, and per command: 1: ctest_gpu.log, errors.txt, bench.jsonl, bench.log,
# peer.jsonl; 2: bench.jsonl, bench.log, peer.jsonl; 3: decode.jsonl, decode.log; 4: bf16_cpu.log,
# sanitizers.log.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
case ${1:-} in
1 | 2 | 3 | 4) ;;
*)
  sed -n '/^#   bash/,/^# gpu\/CHECKLIST/p' "$0" | sed '$d' | cut -c3- >&2
  exit 2
  ;;
esac
export RMLP_WINDOW=$1
export OUT=${OUT:-/tmp/rmlp-window-$1}
mkdir -p "$OUT"
: >"$OUT/steps.jsonl"
. scripts/device/device_env.sh
default_budget=(0 540 400 280 260)
budget=${RMLP_WINDOW_BUDGET:-${default_budget[$1]}}
export RMLP_DEADLINE=$((RMLP_T0 + budget))
rmlp_record "scripts/device/window.sh $1" 0 "$SECONDS" 0 "budget $budget s (RMLP_WINDOW_BUDGET), every step within it"

finish() {
  rmlp_summary
  echo "========== $OUT/summary.txt"
  cat "$OUT/summary.txt"
  exit "$1"
}
rmlp_gpu_or_skip || finish 0
rmlp_prepare || finish 1
export RMLP_GPU_CHECKED=1

status=0
case $1 in
1)
  # The build and the tests first, within all but 150 s (390 of 540): correctness before speed, so a
  # slow build (154 s in a dry run on 2 cores) leaves the first tests their time; the bench gets
  # the rest (~230 s when the build takes ~100 s and the tests seconds each).
  RMLP_FR_BUDGET=$((budget - 150)) RMLP_FR_SANITIZE=0 bash scripts/device/first_run.sh || status=1
  if grep -q '"step": "NO BUILD"' "$OUT/steps.jsonl"; then
    finish 1
  fi
  RMLP_GS_SHAPES=0.6b RMLP_GS_GATHER=0 bash scripts/device/gpu_session.sh || status=1
  ;;
2)
  RMLP_GS_SHAPES="8b 4b gemma-2b" RMLP_GS_GATHER=1 RMLP_GS_LATE_VARIANT='' bash scripts/device/gpu_session.sh || status=1
  ;;
3)
  bash scripts/device/gpu_decode_session.sh || status=1
  ;;
4)
  # issue 32's one chance at a CPU with bf16 instructions, capped, before the sanitizers take the rest
  RMLP_BC_BUDGET=${RMLP_BC_BUDGET:-90} bash scripts/device/bf16_cpu.sh || status=1
  RMLP_FR_TESTS=0 RMLP_FR_SANITIZE=1 bash scripts/device/first_run.sh || status=1
  ;;
esac
finish $status
