#!/usr/bin/env bash
# The Truss examples (examples/truss/) under truss's own code (issue 50): installs truss 0.18.36 and
# the packages its model server imports (pinned, pip --target into BUILD_DIR/truss/pydeps, nothing
# system-wide; kept and reused), builds tei-host, and runs test_truss.py: truss's config loader and
# image builder, its ModelWrapper and server running model/model.py, and the tei-host custom
# server's start command with its endpoints probed, against `radixmlp run` on a fixture and on the
# real SmolLM2 (when integration_tests/real_model/run.sh converted it into BUILD_DIR/real_model/).
# Where PyPI cannot be reached it says SKIPPED and exits 0. Uses Debian's python3.
# Usage: integration_tests/truss/run.sh BUILD_DIR   (the folder holding libradix_mlp and radixmlp)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
if [ $# -lt 1 ] || [ ! -x "$1/radixmlp" ]; then
  echo "usage: $0 BUILD_DIR (the folder holding radixmlp and libradix_mlp)" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
deps="$build/truss/pydeps"
py=/usr/bin/python3
[ -x "$py" ] || py=python3
# truss, and what its server (templates/server/requirements.txt) imports to run a model: the
# versions pip chose within truss's bounds, pinned.
packages=(truss==0.18.36 fastapi==0.124.4 uvicorn==0.54.0 opentelemetry-sdk==1.45.2
  opentelemetry-exporter-otlp-proto-http==1.45.2 prometheus-client==0.26.0 python-json-logger==4.2.0
  msgpack==1.1.0 msgpack-numpy==0.4.8 numpy==1.26.4 tokenizers==0.23.3)

# shellcheck source=../pip_deps.sh
. "$here/../pip_deps.sh"
skip() {
  echo "== truss examples: SKIPPED: $*"
  exit 0
}

mkdir -p "$build/truss"
pip_deps "truss examples" "$py" "$deps" "${packages[@]}"

[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
target="${CARGO_TARGET_DIR:-$build/cargo}"
(cd "$root/integration_tests/tei-host" && RADIX_MLP_LIB_DIR="$build" CARGO_TARGET_DIR="$target" \
  cargo build --offline --release --quiet)
model=()
[ -f "$build/real_model/smollm2/tokenizer.json" ] && model=(--model "$build/real_model/smollm2")
RADIX_MLP_LIB_DIR="$build" PYTHONPATH="$deps:$root/bindings/python" "$py" "$here/test_truss.py" \
  --radixmlp "$build/radixmlp" --tei-host "$target/release/tei-host" --fixtures "$root/integration_tests/fixtures" \
  "${model[@]}"
