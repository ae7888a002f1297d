#!/usr/bin/env bash
# tei-host with real clients on the real model (issue 34): builds the host (cargo, offline, Debian's
# crates), installs the clients from PyPI (openai, huggingface_hub, pinned, with pip --target into
# BUILD_DIR/tei_host/pydeps, nothing system-wide; kept and reused), and runs clients/test_clients.py
# on SmolLM2-135M-Instruct as integration_tests/real_model/run.sh converted it into
# BUILD_DIR/real_model/ (run that first). Where the model or PyPI is missing it says SKIPPED and
# exits 0. Uses Debian's python3 (its numpy serves huggingface_hub's feature_extraction).
# Usage: integration_tests/tei-host/run.sh BUILD_DIR   (the folder holding libradix_mlp and radixmlp)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ $# -lt 1 ] || [ ! -x "$1/radixmlp" ]; then
  echo "usage: $0 BUILD_DIR (the folder holding radixmlp and libradix_mlp)" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
cache="$build/tei_host"
deps="$cache/pydeps"
model="$build/real_model/smollm2"
tokenizers="$build/real_model/pydeps"
py=/usr/bin/python3
[ -x "$py" ] || py=python3
packages=(openai==3.51.0 huggingface_hub==2.4.0)

# shellcheck source=../pip_deps.sh
. "$here/../pip_deps.sh"
skip() {
  echo "== tei-host clients: SKIPPED: $*"
  exit 0
}

[ -f "$model/model.safetensors" ] && [ -d "$tokenizers/tokenizers" ] ||
  skip "no converted SmolLM2 with tokenizers in $build/real_model (integration_tests/real_model/run.sh $build makes it)"
mkdir -p "$cache"
pip_deps "tei-host clients" "$py" "$deps" "${packages[@]}"

[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
target="${CARGO_TARGET_DIR:-$build/cargo}"
(cd "$here" && RADIX_MLP_LIB_DIR="$build" CARGO_TARGET_DIR="$target" cargo build --offline --release --quiet)
PYTHONPATH="$deps" "$py" "$here/clients/test_clients.py" --host "$target/release/tei-host" \
  --radixmlp "$build/radixmlp" --model "$model" --pydeps "$tokenizers"
