#!/usr/bin/env bash
# gpu_session.sh: the GPU benchmark session in ONE device call (at most 10 minutes of wall time),
# meant to run right after gpu/first_run.sh while the machine is still warm (it reuses its build):
#   1. build radixmlp in build-gpu/ (first_run.sh's folder: an incremental no-op when it is there;
#      else configured as first_run does it, gpu/device_env.sh: OpenBLAS/jansson from the carried
#      .debs, the one cuBLAS search, warnings kept in the log);
#   2. ctest -L gpu, unless first_run.sh passed them in this folder (build-gpu/.first_run_passed);
#   3. build-gpu/bench/bench_gather --json: the row gather's bandwidth against a device-to-device
#      copy, in the same run (RMLP_GS_GATHER=0 skips it);
#   4. per shape of RMLP_GS_SHAPES (default "0.6b"):
#      0.6b: radixmlp bench --device cuda (bf16, 28 layers, the Qwen3-0.6B-shaped random model):
#        --quick first (writing the checkpoint to keep and the batches to dump), then the headline
#        cases (b32_p2048_s256, the reranking batch, no sharing, b32_p448_s64), then the rest of the
#        grid, each within what is left of the time budget;
#      4b, 8b: --shape 4b/8b on RMLP_GS_LAYERS layers (default 8), b32_p2048_s256 and no sharing;
#      every case radix off, on, and on with attention in compact space; then
#      bench/peer_transformers.py: transformers (sdpa; flash_attention_2 if flash_attn is there) on
#      the same checkpoint and batches, timed the same way, outputs compared with ours;
#   5. bench/summarize_gpu.py: one table per shape, printed last.
# Run from the repository root on the device machine, carrying .debs and third_party/flashinfer
# (gpu/CHECKLIST.md, step 2):
#   bash bench/gpu_session.sh
# Environment: RMLP_GS_BUDGET (seconds for the whole script, default 570), RMLP_GS_CTEST=0/1 (skip or
# run the GPU tests; default: run them unless first_run.sh passed them), RMLP_GS_SHAPES ("0.6b";
# the call after it: RMLP_GS_SHAPES="4b 8b" RMLP_GS_GATHER=0), RMLP_GS_LAYERS (8), RMLP_GS_REPEAT (5),
# RMLP_GS_DTYPE (bf16), RMLP_GS_BUILD (build folder, default build-gpu), RMLP_GS_JOBS (build
# parallelism, default the core count), RMLP_GS_PEER_ARGS (more options for the peer).
# Files under $OUT (8, the most that come back): session.log, build.log, ctest_gpu.log, bench.jsonl,
# bench.err, peer.txt, peer.jsonl, summary.txt. Every step is bounded by `timeout`; a bench or peer
# cut off keeps the cases it finished (one line each, flushed).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-/tmp/rmlp-gs-out}
mkdir -p "$OUT"
budget=${RMLP_GS_BUDGET:-570}
repeat=${RMLP_GS_REPEAT:-5}
dtype=${RMLP_GS_DTYPE:-bf16}
build=${RMLP_GS_BUILD:-build-gpu}
. gpu/device_env.sh
model=/tmp/rmlp-gs-model  # the random checkpoint, written once by the quick run (~1.8 GB, F32)
dumps=/tmp/rmlp-gs-dumps
mkdir -p "$dumps"
: >"$OUT/bench.jsonl"
: >"$OUT/bench.err"
log() { echo "[$(printf '%3d' "$SECONDS") s] $*" | tee -a "$OUT/session.log"; }
status=0

log "gpu_session: budget ${budget} s, repeat ${repeat}, dtype ${dtype}, build ${build}"
rmlp_environment 2>&1 | tee -a "$OUT/session.log"

# --- 1. build --------------------------------------------------------------------------------
rmlp_device_deps .debs >>"$OUT/session.log" 2>&1 || log "no OpenBLAS/jansson: the configure will fail (carry [\".debs\"])"
rmlp_flashinfer_headers 2>&1 | tee -a "$OUT/session.log"
rmlp_find_cublas >"$OUT/cublas.txt" 2>&1
tee -a "$OUT/session.log" <"$OUT/cublas.txt"
rm -f "$OUT/cublas.txt"
run_ctest=${RMLP_GS_CTEST:-}
if [ -z "$run_ctest" ]; then
  run_ctest=1
  [ -f "$build/.first_run_passed" ] && run_ctest=0 && log "first_run.sh passed the GPU tests in $build: ctest skipped"
fi
targets=(radixmlp bench_gather)
[ "$run_ctest" != 0 ] && targets+=(test_gpu_probe test_gpu_kernels test_gpu_model test_gpu_flashinfer test_gpu_cache)
log "configure + build ${targets[*]}"
if timeout "$(rmlp_slot 300 200)" bash -c ". gpu/device_env.sh && rmlp_cmake_configure '$build' && cmake --build '$build' \
    -j${RMLP_GS_JOBS:-$(nproc)} --target ${targets[*]}" >"$OUT/build.log" 2>&1; then
  grep -m1 'radix_mlp .*CUDA' "$OUT/build.log" | tee -a "$OUT/session.log"
  log "build ok ($(grep -Ec 'warning( #[0-9]+-D)?:' "$OUT/build.log") lines mention a warning)"
else
  log "BUILD FAILED (rc=$?): tail of build.log:"
  tail -n 30 "$OUT/build.log" | tee -a "$OUT/session.log"
  exit 1
fi
radixmlp=$build/radixmlp
"$radixmlp" version | tee -a "$OUT/session.log"

# --- 2. the GPU tests ------------------------------------------------------------------------
if [ "$run_ctest" != 0 ]; then
  t=$(rmlp_slot 180 300)
  if ((t < 60)); then
    log "ctest -L gpu skipped: only $(rmlp_left) s left"
  else
    log "ctest -L gpu (at most $t s)"
    timeout "$t" ctest --test-dir "$build" -L gpu --output-on-failure -V --timeout "$t" >"$OUT/ctest_gpu.log" 2>&1
    rc=$?
    grep -E '^[0-9]+% tests passed|Test +#[0-9]+: .*(Passed|Failed|\*\*\*|Not Run)|SKIP' "$OUT/ctest_gpu.log" |
      tail -n 12 | tee -a "$OUT/session.log"
    grep -E '^[0-9]+ passed, [0-9]+ failed' "$OUT/ctest_gpu.log" | tee -a "$OUT/session.log"
    ((rc != 0)) && status=1 && log "ctest -L gpu: $(rmlp_rc $rc)"
  fi
else
  log "ctest -L gpu skipped"
fi

# --- 3. the gather kernel's bandwidth against a device-to-device copy -----------------------------
if [ "${RMLP_GS_GATHER:-1}" != 0 ] && [ -x "$build/bench/bench_gather" ]; then
  t=$(rmlp_slot 90 300)
  log "bench_gather (at most $t s)"
  timeout "$t" "$build/bench/bench_gather" --json >"$dumps/gather.jsonl" 2>>"$OUT/bench.err"
  rc=$?
  grep -v '^{' "$dumps/gather.jsonl" | tee -a "$OUT/session.log" # SKIP or FAIL lines
  grep '^{' "$dumps/gather.jsonl" >>"$OUT/bench.jsonl"
  ((rc != 0)) && status=1 && log "bench_gather: $(rmlp_rc $rc)"
fi

# --- 4. our bench and the transformers peer on the same checkpoint and batches, per shape ----------
bench() { # bench NAME SECONDS ARGS...: one radixmlp bench run, JSON to bench.jsonl, stderr to bench.err
  local name=$1 t=$2
  shift 2
  if ((t < 20)); then
    log "bench $name skipped: only $(rmlp_left) s left"
    return 1
  fi
  log "bench $name (at most $t s)"
  echo "== $name: radixmlp bench $*" >>"$OUT/bench.err"
  timeout "$t" "$radixmlp" bench --device cuda --dtype "$dtype" --repeat "$repeat" --json "$@" \
    >>"$OUT/bench.jsonl" 2>>"$OUT/bench.err"
  local rc=$?
  ((rc != 0)) && log "bench $name: $(rmlp_rc $rc)" && tail -n 3 "$OUT/bench.err" | tee -a "$OUT/session.log"
  return $rc
}
peer() { # peer SHAPE MODEL SECONDS BATCHES...: transformers on MODEL and the batches our bench dumped
  local shape=$1 dir=$2 t=$3
  shift 3
  cat "$@" >"$dumps/peer_in.jsonl" 2>/dev/null
  if [ ! -s "$dumps/peer_in.jsonl" ] || ((t < 40)); then
    log "peer $shape skipped: $( [ -s "$dumps/peer_in.jsonl" ] && echo "only $(rmlp_left) s left" || echo "no batches dumped")"
    return 0
  fi
  log "peer $shape (at most $t s)"
  read -r -a peer_args <<<"${RMLP_GS_PEER_ARGS:-}"
  echo "== peer $shape: $dir" >>"$OUT/peer.txt"
  rm -f "$dumps/peer_out.jsonl" # a peer that fails before writing must not pass on the last shape's rows
  PYTHONUNBUFFERED=1 timeout "$t" python3 bench/peer_transformers.py --model "$dir" --batches "$dumps/peer_in.jsonl" \
    --repeat "$repeat" --budget $((t - 30)) --json "$dumps/peer_out.jsonl" "${peer_args[@]}" >>"$OUT/peer.txt" 2>&1
  local rc=$?
  cat "$dumps/peer_out.jsonl" >>"$OUT/peer.jsonl" 2>/dev/null
  ((rc != 0)) && log "peer $shape: $(rmlp_rc $rc)" && tail -n 5 "$OUT/peer.txt" | tee -a "$OUT/session.log"
  return $rc
}
: >"$OUT/peer.jsonl"
read -r -a shapes <<<"${RMLP_GS_SHAPES:-0.6b}"
for ((i = 0; i < ${#shapes[@]}; i++)); do
  shape=${shapes[i]}
  later=$(((${#shapes[@]} - i - 1) * 200)) # kept for the shapes after this one
  if [ "$shape" = 0.6b ]; then
    # All 28 layers and the whole grid, the checkpoint kept for bench/gpu_decode_session.sh.
    rm -rf "$model" "$dumps"/quick.jsonl "$dumps"/headline.jsonl "$dumps"/rest.jsonl
    bench quick "$(rmlp_slot 120 $((150 + later)))" --quick --keep-model "$model" \
      --dump-batches "$dumps/quick.jsonl" || status=1
    if [ -f "$model/model.safetensors" ]; then
      bench headline "$(rmlp_slot 150 $((100 + later)))" --model "$model" --dump-batches "$dumps/headline.jsonl" \
        --case b32_p2048_s256 --case rerank --case no_sharing --case b32_p448_s64 || status=1
      bench rest "$(rmlp_slot 150 $((100 + later)))" --model "$model" --dump-batches "$dumps/rest.jsonl" \
        --case b32_p128_s256 --case b32_p448_s256 --case b32_p2048_s32 --case b32_p2048_s64 || status=1
    fi
    peer "$shape" "$model" "$(rmlp_slot 240 $((10 + later)))" "$dumps/headline.jsonl" "$dumps/quick.jsonl" \
      "$dumps/rest.jsonl" || status=1
  else
    # A larger shape on fewer layers (the speedup is per layer; the checkpoint is written F32).
    dir=$model-$shape
    rm -rf "$dir" "$dumps/$shape.jsonl"
    bench "$shape" "$(rmlp_slot 200 $((60 + later)))" --shape "$shape" --layers "${RMLP_GS_LAYERS:-8}" \
      --keep-model "$dir" --dump-batches "$dumps/$shape.jsonl" --case b32_p2048_s256 --case no_sharing || status=1
    peer "$shape" "$dir" "$(rmlp_slot 150 $((10 + later)))" "$dumps/$shape.jsonl" || status=1
    rm -rf "$dir" # GBs of F32
  fi
done
tail -n +1 "$OUT/bench.jsonl" | cut -c1-200 >>"$OUT/session.log"

# --- 5. summary --------------------------------------------------------------------------------
log "done, status $status"
python3 bench/summarize_gpu.py "$OUT/bench.jsonl" "$OUT/peer.jsonl" >"$OUT/summary.txt" 2>&1
tee -a "$OUT/session.log" <"$OUT/summary.txt"
exit $status
