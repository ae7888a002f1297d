#!/usr/bin/env bash
# gpu_decode_session.sh: the generation benchmark (issue 19) on a lent GPU machine, in ONE device
# call (7 minutes at most by default; a few on a warm machine), meant to run after bench/gpu_session.sh while the machine
# is warm (it reuses build-gpu/ and the checkpoint that script wrote to /tmp/rmlp-gs-model; on a
# fresh machine it configures and builds radixmlp as first_run.sh does, and writes the built-in
# 28-layer model):
#   1. radixmlp bench --device cuda --decode: batched decode (shared-prefix and per-sequence
#      attention) vs one sequence at a time, bf16, the Qwen3-0.6B-shaped random model;
#   2. radixmlp bench --decode on the machine's CPU cores (OpenBLAS's default thread count, the
#      built-in 2-layer model, fp32): the CPU targets of issue 19 on a many-core host, with the
#      ceiling column (what the machine's GEMM throughput allows); OPENBLAS_THREAD_TIMEOUT=4, so
#      OpenBLAS's idle threads sleep instead of spinning beside the session's own threads (decode
#      attention, few-row linear layers; README, set_cpu_threads);
#   3. the same with one OpenBLAS thread, as on the development VM, when time is left.
# Run from the repository root on the device machine, carrying .debs and third_party/flashinfer:
#   bash bench/gpu_decode_session.sh
# Environment: RMLP_GD_BUDGET (seconds for the whole script, default 420), RMLP_GD_STEPS (decode
# steps per session, 8), RMLP_GD_REPEAT (2), RMLP_GD_BUILD (build folder, default build-gpu),
# RMLP_GD_DRY_RUN=1 (without a GPU, run every step anyway: for checking the script here; else it
# says so and exits 0).
# Files under $OUT: decode.log (environment, every step's outcome), build_decode.log,
# decode_cuda.txt, decode_cpu.txt, decode_cpu1.txt (the tables), decode.err (the benches' stderr).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-/tmp/rmlp-gd-out}
mkdir -p "$OUT"
budget=${RMLP_GD_BUDGET:-420}
steps=${RMLP_GD_STEPS:-8}
repeat=${RMLP_GD_REPEAT:-2}
build=${RMLP_GD_BUILD:-build-gpu}
model=/tmp/rmlp-gs-model # bench/gpu_session.sh's checkpoint, when this machine still has it
. gpu/device_env.sh
: >"$OUT/decode.err"
log() { echo "[$(printf '%3d' "$SECONDS") s] $*" | tee -a "$OUT/decode.log"; }
status=0

if ! nvidia-smi -L >/dev/null 2>&1; then
  if [ "${RMLP_GD_DRY_RUN:-0}" != 1 ]; then
    log "SKIP: no GPU on this machine (nvidia-smi -L fails or is absent); nothing was run (RMLP_GD_DRY_RUN=1 runs every step anyway)"
    exit 0
  fi
  log "DRY RUN: no GPU; every step runs, the CUDA bench fails with its message"
fi
log "gpu_decode_session: budget ${budget} s, ${steps} steps, repeat ${repeat}, build ${build}"
rmlp_environment 2>&1 | tee -a "$OUT/decode.log"
nproc | sed 's/^/cpu cores: /' | tee -a "$OUT/decode.log"

rmlp_device_deps .debs >>"$OUT/decode.log" 2>&1 || log "no OpenBLAS/jansson: the configure will fail (carry [\".debs\"])"
rmlp_flashinfer_headers 2>&1 | tee -a "$OUT/decode.log"
rmlp_find_cublas 2>&1 | tee -a "$OUT/decode.log"
log "configure + build radixmlp"
if ! timeout "$(rmlp_slot 300 200)" bash -c ". gpu/device_env.sh && rmlp_cmake_configure '$build' && cmake --build '$build' \
    -j$(nproc) --target radixmlp" >"$OUT/build_decode.log" 2>&1; then
  log "BUILD FAILED: tail of build_decode.log:"
  tail -n 30 "$OUT/build_decode.log" | tee -a "$OUT/decode.log"
  exit 1
fi
radixmlp=$build/radixmlp

decode() { # decode NAME SECONDS ARGS...: one radixmlp bench --decode run, its table to NAME.txt
  local name=$1 t=$2
  shift 2
  if ((t < 30)); then
    log "$name skipped: only $(rmlp_left) s left"
    return 1
  fi
  log "$name: radixmlp bench --decode $* (at most $t s)"
  echo "== $name: radixmlp bench --decode $*" >>"$OUT/decode.err"
  timeout "$t" "$radixmlp" bench --decode --decode-steps "$steps" --repeat "$repeat" "$@" >"$OUT/$name.txt" \
    2>>"$OUT/decode.err"
  local rc=$?
  tee -a "$OUT/decode.log" <"$OUT/$name.txt"
  ((rc != 0)) && log "$name: $(rmlp_rc $rc)" && tail -n 3 "$OUT/decode.err" | tee -a "$OUT/decode.log"
  return $rc
}

cuda_model=()
[ -f "$model/model.safetensors" ] && cuda_model=(--model "$model")
decode decode_cuda "$(rmlp_slot 180 150)" --device cuda --dtype bf16 "${cuda_model[@]}" || status=1
OPENBLAS_THREAD_TIMEOUT=4 decode decode_cpu "$(rmlp_slot 150 60)" || status=1
OPENBLAS_NUM_THREADS=1 decode decode_cpu1 "$(rmlp_slot 240 10)" --case p1024_m32 --case p2048_m32 || status=1
log "done, status $status"
exit $status
