#!/usr/bin/env bash
# time_flashinfer_compile.sh: the CPU time (user + sys) and object size of compiling gpu/flashinfer.cu
# alone, with the exact command a CUDA build uses (docs/building.md, "CMake": the figures there).
#   scripts/time_flashinfer_compile.sh BUILD_DIR [ARCH] [SOURCE]
# BUILD_DIR: a configured CUDA build with FlashInfer (it is reconfigured with
# CMAKE_EXPORT_COMPILE_COMMANDS=ON if it lacks compile_commands.json); ARCH: one architecture (e.g.
# 80) instead of the build's set; SOURCE: another copy of the file to compile in its place (e.g. an
# older revision: git show REV:gpu/flashinfer.cu > /tmp/old/gpu/flashinfer.cu, next to that
# revision's gpu/ headers). The object goes to a temporary file, removed after.
set -euo pipefail
build=${1:?usage: $0 BUILD_DIR [ARCH] [SOURCE]}
arch=${2:-}
root=$(cd "$(dirname "$0")/.." && pwd)
source=${3:-$root/gpu/flashinfer.cu}
[ -f "$build/compile_commands.json" ] || cmake -S "$root" -B "$build" -DCMAKE_EXPORT_COMPILE_COMMANDS=ON >/dev/null
cmd=$(python3 - "$build/compile_commands.json" <<'EOF'
import json, sys
for entry in json.load(open(sys.argv[1])):
    if entry["file"].endswith("gpu/flashinfer.cu"):
        print(entry["directory"])
        print(entry["command"])
        break
else:
    sys.exit("no gpu/flashinfer.cu in the build (not a CUDA build with FlashInfer?)")
EOF
)
dir=$(head -n 1 <<<"$cmd")
cmd=$(tail -n +2 <<<"$cmd")
obj=$(mktemp --suffix=.o)
trap 'rm -f "$obj"' EXIT
if [ -n "$arch" ]; then
    cmd=$(sed -E "s/--generate-code=arch=compute_[0-9a-z]+,code=\[[a-z_0-9,]+\] ?//g; s/ -c / --generate-code=arch=compute_$arch,code=[sm_$arch] -c /" <<<"$cmd")
fi
cmd=$(sed -E "s# -o [^ ]+flashinfer\.cu\.o# -o $obj#; s# -c [^ ]+# -c $source#" <<<"$cmd")
cd "$dir"
label=${arch:-all of the build}
/usr/bin/time -f "gpu/flashinfer.cu (architectures: $label): user %U s, sys %S s, wall %e s" $cmd
echo "object: $(stat -c %s "$obj") bytes; $(lscpu | grep 'Model name' | sed 's/  */ /g'); nvcc $(nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')"
