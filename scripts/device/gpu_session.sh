#!/usr/bin/env bash
# gpu_session.sh: the CUDA benchmark on a lent GPU. scripts/device/window.sh runs it for the plan of
# gpu/CHECKLIST.md: in command 1 the 0.6B shape (RMLP_GS_SHAPES=0.6b RMLP_GS_GATHER=0), in command 2
# the gather, the 8B and 4B shapes and the Gemma-2B one (RMLP_GS_SHAPES="8b 4b gemma-2b"); alone it does
# what its environment says.
#   1. the setup and build of scripts/device/first_run.sh (radixmlp and bench_gather only; a no-op on a warm
#      machine, configured first on a bare one, retried once with FlashInfer off);
#   2. build-gpu/bench/bench_gather --json (RMLP_GS_GATHER=1, the default): the row gather's bandwidth
#      against a device-to-device copy in the same run;
#   3. per shape of RMLP_GS_SHAPES (default "0.6b"), one `radixmlp bench --device cuda --json` run
#      per case, each under its own time limit: 0.6b (Qwen3-0.6B-shaped random model, 28 layers):
#      b32_p2048_s256, rerank, no_sharing; 4b, 8b (RMLP_GS_LAYERS layers, default 8): b32_p2048_s256,
#      no_sharing; gemma-2b (the same layers; issue 52's reranker shape): rerank, without a peer.
#      Every case radix off, on and on with attention in compact space, each side for the
#      default paths and for every variant of RMLP_GS_VARIANTS (default: the old paths,
#      $RMLP_OLD_PATHS of scripts/device/device_env.sh), interleaved in the same run (--gpu-variant); a radixmlp
#      without --gpu-variant runs the default paths only and the record says so. The shape's first
#      run writes its checkpoint (--keep-model; 0.6b's stays in /tmp/rmlp-gs-model for
#      scripts/device/gpu_decode_session.sh), the others load it; each dumps its batch;
#      then bench/peer_transformers.py (transformers, sdpa, and flash_attention_2 if flash_attn is
#      there) on the same checkpoint and batches, timed the same way, outputs compared with ours;
#      for 0.6b, when time is left, b32_p2048_s256 once more with RMLP_GS_LATE_VARIANT (default
#      RADIX_MLP_GPU_ATTENTION=reference: the reference attention kernel beside FlashInfer).
# Every step runs under `timeout -k 15` within the budget, the most valuable first, and is recorded as
# it ends; bench and peer write one JSON line per case as they go (scripts/device/device_steps.sh).
# Usage, from the repository root: bash scripts/device/gpu_session.sh
# Files under $OUT: steps.jsonl, summary.txt (the tables of bench/summarize_gpu.py), build.log,
# bench.jsonl (bench_gather's and the bench's rows), bench.log (their stderr and the peer's output),
# peer.jsonl.
# Environment: RMLP_GS_BUDGET (seconds, default 560; fewer when scripts/device/window.sh's deadline comes
# sooner), RMLP_GS_SHAPES, RMLP_GS_GATHER, RMLP_GS_LAYERS, RMLP_GS_VARIANTS (space-separated, each
# NAME=VALUE[,NAME=VALUE]), RMLP_GS_LATE_VARIANT (empty: none), RMLP_GS_REPEAT (5), RMLP_GS_DTYPE
# (bf16), RMLP_BUILD (build-gpu), RMLP_GS_PEER_ARGS (more options for the peer), RMLP_JOBS.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
. scripts/device/device_env.sh
OUT=${OUT:-/tmp/rmlp-gs-out}
mkdir -p "$OUT"
[ -n "${RMLP_WINDOW:-}" ] || : >"$OUT/steps.jsonl" # scripts/device/window.sh starts the record itself
budget=$(rmlp_budget "${RMLP_GS_BUDGET:-560}")
repeat=${RMLP_GS_REPEAT:-5}
dtype=${RMLP_GS_DTYPE:-bf16}
build=${RMLP_BUILD:-build-gpu}
read -r -a shapes <<<"${RMLP_GS_SHAPES:-0.6b}"
read -r -a variants <<<"${RMLP_GS_VARIANTS-$RMLP_OLD_PATHS}"
late_variant=${RMLP_GS_LATE_VARIANT-RADIX_MLP_GPU_ATTENTION=reference}
model=/tmp/rmlp-gs-model # the 0.6b checkpoint (~1.8 GB, F32), kept for the decode session
dumps=/tmp/rmlp-gs-dumps
mkdir -p "$dumps"
touch "$OUT/bench.jsonl" "$OUT/bench.log" "$OUT/peer.jsonl"
status=0

rmlp_gpu_or_skip || exit 0
rmlp_prepare || exit 1

# --- build -----------------------------------------------------------------------------------------
targets=(radixmlp)
[ "${RMLP_GS_GATHER:-1}" != 0 ] && targets+=(bench_gather)
rmlp_build 240 150 120 "${targets[@]}" || exit 1
radixmlp=$RMLP_BUILD_DIR/radixmlp
variant_args=()
if ((${#variants[@]} > 0)) || [ -n "$late_variant" ]; then
  if grep -q -- --gpu-variant <<<"$("$radixmlp" bench --help 2>&1)"; then
    for v in "${variants[@]}"; do variant_args+=(--gpu-variant "$v"); done
  else
    rmlp_record "NOTE: default paths only" 0 "$SECONDS" 0 \
      "this radixmlp has no --gpu-variant (bench --help): the variants ${variants[*]} $late_variant are not timed"
    variants=()
    late_variant=
  fi
fi

# --- the row gather against a device-to-device copy ---------------------------------------------------
if [ "${RMLP_GS_GATHER:-1}" != 0 ]; then
  n0=$(wc -l <"$OUT/bench.log")
  rows0=$(wc -l <"$OUT/bench.jsonl")
  rmlp_step "bench_gather" 60 $((${#shapes[@]} * 120)) "$OUT/bench.jsonl" "$OUT/bench.log" \
    "$RMLP_BUILD_DIR/bench/bench_gather" --json
  (($? != 0)) && status=1
  rmlp_done "$(rmlp_new_lines "$OUT/bench.jsonl" "$rows0" | grep -c '^{') gather rows in bench.jsonl
$(rmlp_new_lines "$OUT/bench.jsonl" "$rows0" | grep -v '^{' | head -n 5)
$(rmlp_new_lines "$OUT/bench.log" "$n0" | grep -v '^== ' | tail -n 5)"
fi

# --- our bench and the transformers peer on the same checkpoint and batches, per shape ----------------
# bench NAME MAX RESERVE ARGS...: one radixmlp bench run, its JSON lines to bench.jsonl as they come.
bench() {
  local name=$1 max=$2 reserve=$3 n0 rows0 rc
  shift 3
  n0=$(wc -l <"$OUT/bench.log")
  rows0=$(grep -c '^{' "$OUT/bench.jsonl")
  rmlp_step "bench $name" "$max" "$reserve" "$OUT/bench.jsonl" "$OUT/bench.log" \
    "$radixmlp" bench --device cuda --dtype "$dtype" --repeat "$repeat" --json "$@"
  rc=$?
  ((rc != 0)) && status=1
  rmlp_done "$(($(grep -c '^{' "$OUT/bench.jsonl") - rows0)) rows in bench.jsonl
$(rmlp_new_lines "$OUT/bench.log" "$n0" | grep -v '^== ' | tail -n "$( ((rc != 0)) && echo 4 || echo 1)")"
  return $rc
}
# peer SHAPE DIR MAX RESERVE BATCHES...: transformers on the checkpoint DIR and the batches dumped.
peer() {
  local shape=$1 dir=$2 max=$3 reserve=$4 n0 t
  shift 4
  cat "$@" >"$dumps/peer_in.jsonl" 2>/dev/null
  if [ ! -s "$dumps/peer_in.jsonl" ]; then
    rmlp_record "peer $shape" "not run: no batch dumped" "$SECONDS" 0
    return 0
  fi
  read -r -a peer_args <<<"${RMLP_GS_PEER_ARGS:-}"
  rm -f "$dumps/peer_out.jsonl" # a peer that fails before writing must not pass on the last shape's rows
  n0=$(wc -l <"$OUT/bench.log")
  t=$(rmlp_slot "$max" "$reserve")
  rmlp_step "peer $shape" "$max" "$reserve" "$OUT/bench.log" "$OUT/bench.log" env PYTHONUNBUFFERED=1 \
    python3 bench/peer_transformers.py --model "$dir" --batches "$dumps/peer_in.jsonl" --repeat "$repeat" \
    --budget $((t > 60 ? t - 30 : t / 2)) --json "$dumps/peer_out.jsonl" "${peer_args[@]}"
  (($? != 0)) && status=1
  cat "$dumps/peer_out.jsonl" >>"$OUT/peer.jsonl" 2>/dev/null
  rmlp_done "$(cat "$dumps/peer_out.jsonl" 2>/dev/null | grep -c '^{') rows in peer.jsonl
$(rmlp_new_lines "$OUT/bench.log" "$n0" | grep -v '^== ' | tail -n 3)"
}

for ((i = 0; i < ${#shapes[@]}; i++)); do
  shape=${shapes[i]}
  later=$(((${#shapes[@]} - i - 1) * 120)) # kept for the shapes after this one
  with_peer=1 # the transformers peer on the same checkpoint, which the bench then keeps
  if [ "$shape" = 0.6b ]; then
    dir=$model
    cases=(b32_p2048_s256 rerank no_sharing)
    make=()
  elif [ "$shape" = gemma-2b ]; then # issue 52: compact/off on a reranker's batch against 0.6b's
    dir=$model-$shape
    cases=(rerank)
    make=(--shape "$shape" --layers "${RMLP_GS_LAYERS:-8}")
    with_peer=0
  else
    dir=$model-$shape
    cases=(b32_p2048_s256 no_sharing)
    make=(--shape "$shape" --layers "${RMLP_GS_LAYERS:-8}")
  fi
  rm -rf "$dir" "$dumps/$shape"-*.jsonl
  batches=()
  for ((c = 0; c < ${#cases[@]}; c++)); do
    case_name=${cases[c]}
    # what the cases after this one and the peer need at least
    reserve=$(((${#cases[@]} - c - 1) * 40 + 60 + later))
    if [ -f "$dir/model.safetensors" ]; then
      from=(--model "$dir")
    elif ((with_peer)); then
      from=("${make[@]}" --keep-model "$dir")
    else
      from=("${make[@]}")
    fi
    bench "$shape $case_name" $((c == 0 ? 150 : 90)) "$reserve" "${from[@]}" --case "$case_name" \
      --dump-batches "$dumps/$shape-$case_name.jsonl" "${variant_args[@]}"
    batches+=("$dumps/$shape-$case_name.jsonl")
  done
  ((with_peer)) && peer "$shape" "$dir" 150 "$later" "${batches[@]}"
  if [ "$shape" = 0.6b ] && [ -n "$late_variant" ] && [ -f "$dir/model.safetensors" ]; then
    bench "$shape b32_p2048_s256, $late_variant" 90 "$later" --model "$dir" --case b32_p2048_s256 \
      --gpu-variant "$late_variant"
  fi
  [ "$shape" = 0.6b ] || rm -rf "$dir" # GBs of F32
done

rmlp_record "gpu_session.sh done" 0 0 0 "status $status (1: a step above failed), $(rmlp_left) s of its budget left"
exit $status
