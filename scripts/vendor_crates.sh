#!/usr/bin/env bash
# Copies the Rust crates into another project's tree, as `cargo package` would ship them: DEST/radix-mlp-sys
# (with the C sources it carries in csrc/, real files instead of this repository's links) and DEST/radix-mlp
# beside it, so radix-mlp's path to radix-mlp-sys still holds. The host then names DEST/radix-mlp in one
# dependency line (docs/deploying.md, "Wiring it into a TEI build").
# Usage: scripts/vendor_crates.sh DEST     (DEST's two crate folders are replaced)
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 DEST" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck disable=SC1091
if ! command -v cargo >/dev/null && [ -f "$HOME/.cargo/env" ]; then . "$HOME/.cargo/env"; fi
mkdir -p "$1"
dest=$(cd "$1" && pwd)
for crate in radix-mlp-sys radix-mlp; do
  src="$root/bindings/rust/$crate"
  rm -rf "${dest:?}/$crate"
  mkdir -p "$dest/$crate"
  # The files `cargo package` ships, less those it writes itself; -L copies what links point at.
  (cd "$src" && CARGO_TARGET_DIR="$dest/.vendor-target" cargo package --list --offline --allow-dirty 2>/dev/null) |
    grep -vxE '\.cargo_vcs_info\.json|Cargo\.lock|Cargo\.toml\.orig' |
    (cd "$src" && xargs cp -L --parents -t "$dest/$crate")
done
rm -rf "$dest/.vendor-target"
echo "vendor_crates: $dest/radix-mlp-sys ($(find "$dest/radix-mlp-sys/csrc" -type f | wc -l) files of C sources in csrc/)," \
  "$dest/radix-mlp"
