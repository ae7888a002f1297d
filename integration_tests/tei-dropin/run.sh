#!/usr/bin/env bash
# The TEI drop-in, as a TEI build would take it: the workspace of this folder (TEI's `core` and
# `router` shapes, one dependency line) is built with `cargo build --offline` and an empty
# environment, and its router run with none, three times:
#   1. against this tree (the dependency line a path to bindings/rust/radix-mlp);
#   2. a copy with the crates vendored into it by scripts/vendor_crates.sh and the line of
#      docs/deploying.md's patch to TEI's Cargo.toml (`path = "radix-mlp/radix-mlp"`);
#   3. against the crates `cargo package` makes of bindings/rust/radix-mlp-sys and radix-mlp, served
#      from a directory registry (as crates.io would serve them: nothing from this tree but the
#      .crate files), the line then a version.
# Each time the binary must load nothing of radix_mlp (the planner is linked statically), and where
# no libradix_mlp_plan is installed the planner must have been built from the sources the crate
# carries. Cargo's output stays in BUILD_DIR/tei-dropin/. Usage: run.sh BUILD_DIR
set -euo pipefail
build=$(mkdir -p "$1" && cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck disable=SC1091
if ! command -v cargo >/dev/null && [ -f "$HOME/.cargo/env" ]; then . "$HOME/.cargo/env"; fi
command -v cargo >/dev/null || { echo "tei-dropin: SKIPPED: cargo not found"; exit 77; }
cargo_dir=$(dirname "$(command -v cargo)")
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
fail() { echo "tei-dropin: FAILED: $*" >&2; exit 1; }
# bare CMD...: CMD with no environment but a PATH to cargo and the C compiler, and HOME.
bare() { env -i PATH="$cargo_dir:/usr/local/bin:/usr/bin:/bin" HOME="$HOME" "$@"; }
installed=$( [ "$(cc -print-file-name=libradix_mlp_plan.a)" != libradix_mlp_plan.a ] && echo yes || echo no)

# check CASE WORKSPACE: builds WORKSPACE bare into BUILD_DIR/tei-dropin/CASE, runs the router bare.
check() {
  local case=$1 ws=$2 target="$build/tei-dropin/$1"
  echo "== $case: cargo build --offline, no environment"
  [ "$case" = tree ] || rm -rf "$target" # the sources are new each run: so is their build
  (cd "$ws" && bare cargo build --offline --quiet --target-dir "$target")
  local bin="$target/debug/tei-dropin-router"
  if readelf -d "$bin" | grep -q 'NEEDED.*radix_mlp'; then fail "$case: the router needs $(readelf -d "$bin" | grep NEEDED)"; fi
  if [ "$installed" = no ] &&
    [ -z "$(find "$target/debug/build" -path '*radix-mlp-sys-*/out/lib/*' -name libradix_mlp_plan.a)" ]; then
    fail "$case: no libradix_mlp_plan.a built from the crate's sources"
  fi
  bare "$bin"
}

check tree "$here"

# copy_workspace DIR LINE: this workspace in DIR, its radix_mlp line replaced by LINE.
copy_workspace() {
  cp -r "$here" "$1"
  rm -rf "$1/target" "$1/Cargo.lock"
  sed -i "s|^radix_mlp = .*|$2|" "$1/Cargo.toml"
  grep -qxF "$2" "$1/Cargo.toml" || fail "no dependency line to change"
}

echo "== vendored: scripts/vendor_crates.sh, and the line of docs/deploying.md"
line=$(sed -n 's/^+\(radix_mlp = .*\)$/\1/p' "$root/docs/deploying.md" | head -n1)
[ "$line" = 'radix_mlp = { package = "radix-mlp", path = "radix-mlp/radix-mlp" }' ] ||
  fail "docs/deploying.md's patch to TEI's Cargo.toml changed (found: $line): update this check with it"
copy_workspace "$scratch/vendored" "$line"
"$root/scripts/vendor_crates.sh" "$scratch/vendored/radix-mlp" >/dev/null
if find "$scratch/vendored/radix-mlp" -type l | grep -q .; then fail "the vendored crates hold links"; fi
check vendored "$scratch/vendored"

echo "== package: cargo package of radix-mlp-sys, then of radix-mlp against it"
registry="$scratch/registry"
mkdir -p "$registry"
# unpack NAME: the .crate into the directory registry, with the checksum file such a source needs.
unpack() {
  local crate="$scratch/package/package/$1-0.3.0.crate"
  tar xzf "$crate" -C "$registry"
  printf '{"files":{},"package":"%s"}\n' "$(sha256sum "$crate" | cut -d' ' -f1)" \
    >"$registry/$1-0.3.0/.cargo-checksum.json"
}
packaged=(--config "source.crates-io.replace-with='packaged'" --config "source.packaged.directory='$registry'")
(cd "$root/bindings/rust/radix-mlp-sys" &&
  CARGO_TARGET_DIR="$scratch/package" cargo package --offline --allow-dirty --no-verify --quiet)
unpack radix-mlp-sys
[ -f "$registry/radix-mlp-sys-0.3.0/csrc/trie/planner.c" ] || fail "the packaged radix-mlp-sys carries no C sources"
(cd "$root/bindings/rust/radix-mlp" &&
  CARGO_TARGET_DIR="$scratch/package" cargo package --offline --allow-dirty --no-verify --quiet "${packaged[@]}")
unpack radix-mlp

# The workspace again, outside this tree, its one line a registry version.
ws="$scratch/workspace"
copy_workspace "$ws" 'radix_mlp = { package = "radix-mlp", version = "0.3.0" }'
mkdir -p "$ws/.cargo"
printf '[source.crates-io]\nreplace-with = "packaged"\n[source.packaged]\ndirectory = "%s"\n' "$registry" \
  >"$ws/.cargo/config.toml"
check packaged "$ws"
echo "tei-dropin: the TEI-shaped workspace built and checked against this tree, vendored, and packaged" \
  "(planner $( [ "$installed" = yes ] && echo "installed system-wide" || echo "built from the crate's sources"))"
