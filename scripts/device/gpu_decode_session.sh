#!/usr/bin/env bash
# gpu_decode_session.sh: the generation benchmark (issue 19) on a lent GPU machine: command 3 of the
# plan of gpu/CHECKLIST.md (scripts/device/window.sh runs it), or alone.
#   1. the setup and build of scripts/device/first_run.sh (radixmlp only; a no-op on a warm machine, configured
#      first on a bare one, retried once with FlashInfer off). The setup's cuBLAS search runs in this
#      shell (rmlp_setup), so the LD_LIBRARY_PATH it exports reaches the CUDA bench;
#   2. radixmlp bench --decode --device cuda --json: batched decode (shared-prefix and per-sequence
#      attention) vs one sequence at a time, bf16, on scripts/device/gpu_session.sh's 0.6B checkpoint when
#      this machine still has it (/tmp/rmlp-gs-model), else the built-in 28-layer model; the default
#      decode attention and every variant of RMLP_GD_VARIANTS (default RADIX_MLP_GPU_DECODE=own: the
#      library's own chain kernels beside FlashInfer's batch decode) interleaved in the same run
#      (--gpu-variant; a radixmlp without it runs the default only, and the record says so);
#   3. radixmlp bench --decode --json on the machine's CPU cores (all of them, the built-in 2-layer
#      model, fp32; the session's own threads, each GEMM one single-threaded OpenBLAS call:
#      docs/backends.md, "CPU threads");
#   4. p1024_m32 on one thread (OPENBLAS_NUM_THREADS=1, the CPU path's first count), as on the
#      development VM, when time is left (p2048_m32 as well did not fit its 60 s in either window).
# Every step runs under `timeout -k 15` within the budget and is recorded as it ends; each bench
# writes one JSON line per case as it goes (scripts/device/device_steps.sh). Without a GPU it records SKIP and
# exits 0 having run nothing, unless RMLP_GPU_DRY_RUN=1, which runs every step anyway.
# Usage, from the repository root: bash scripts/device/gpu_decode_session.sh
# Files under $OUT: steps.jsonl, summary.txt (the decode tables: scripts/device/summarize_window.py), build.log,
# decode.jsonl (every case's JSON line, "device" and "variant" telling the runs apart), decode.log
# (the benches' stderr).
# Environment: RMLP_GD_BUDGET (seconds, default 560; fewer when scripts/device/window.sh's deadline comes
# sooner), RMLP_GD_STEPS (decode steps per session, 8), RMLP_GD_REPEAT (2), RMLP_GD_VARIANTS
# (space-separated, each NAME=VALUE[,NAME=VALUE]), RMLP_BUILD (build-gpu), RMLP_JOBS.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
. scripts/device/device_env.sh
OUT=${OUT:-/tmp/rmlp-gd-out}
mkdir -p "$OUT"
[ -n "${RMLP_WINDOW:-}" ] || : >"$OUT/steps.jsonl" # scripts/device/window.sh starts the record itself
budget=$(rmlp_budget "${RMLP_GD_BUDGET:-560}")
steps=${RMLP_GD_STEPS:-8}
repeat=${RMLP_GD_REPEAT:-2}
build=${RMLP_BUILD:-build-gpu}
read -r -a variants <<<"${RMLP_GD_VARIANTS-RADIX_MLP_GPU_DECODE=own}"
model=/tmp/rmlp-gs-model # scripts/device/gpu_session.sh's checkpoint, when this machine still has it
touch "$OUT/decode.jsonl" "$OUT/decode.log"
status=0

rmlp_gpu_or_skip || exit 0
rmlp_prepare || exit 1
rmlp_build 240 150 60 radixmlp || exit 1
radixmlp=$RMLP_BUILD_DIR/radixmlp

# decode NAME MAX RESERVE [VAR=VALUE...] -- ARGS...: one radixmlp bench --decode run in that environment.
decode() {
  local name=$1 max=$2 reserve=$3 n0 rows0 rc
  local -a envs=()
  shift 3
  while [ "$#" -gt 0 ] && [ "$1" != -- ]; do envs+=("$1") && shift; done
  shift
  n0=$(wc -l <"$OUT/decode.log")
  rows0=$(wc -l <"$OUT/decode.jsonl")
  rmlp_step "$name" "$max" "$reserve" "$OUT/decode.jsonl" "$OUT/decode.log" env "${envs[@]}" \
    "$radixmlp" bench --decode --json --decode-steps "$steps" --repeat "$repeat" "$@"
  rc=$?
  ((rc != 0)) && status=1
  rmlp_done "$(rmlp_new_lines "$OUT/decode.jsonl" "$rows0" | grep -c '^{') cases in decode.jsonl
$(rmlp_new_lines "$OUT/decode.log" "$n0" | grep -v '^== ' | tail -n 3)"
}

variant_args=()
if ((${#variants[@]} > 0)); then
  if grep -q -- --gpu-variant <<<"$("$radixmlp" bench --help 2>&1)"; then
    for v in "${variants[@]}"; do variant_args+=(--gpu-variant "$v"); done
  else
    rmlp_record "NOTE: the default decode attention only" 0 "$SECONDS" 0 \
      "this radixmlp has no --gpu-variant (bench --help): ${variants[*]} not timed"
  fi
fi
cuda_model=()
[ -f "$model/model.safetensors" ] && cuda_model=(--model "$model")
decode "decode on CUDA${cuda_model:+ ($model)}" 150 90 -- --device cuda --dtype bf16 "${cuda_model[@]}" \
  "${variant_args[@]}"
decode "decode on $(nproc) CPU cores" 100 30 --
decode "decode on 1 CPU thread, p1024_m32" 60 0 OPENBLAS_NUM_THREADS=1 -- --case p1024_m32

rmlp_record "gpu_decode_session.sh done" 0 0 0 "status $status (1: a step above failed), $(rmlp_left) s of its budget left"
exit $status
