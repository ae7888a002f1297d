#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ with clang (ASan + UBSan) into build-fuzz/ and runs
# each for SECONDS_PER_TARGET seconds (default 20), one after another, on a scratch copy of
# its committed seed corpus fuzz/corpus/<target>/ (so the committed corpus never grows here),
# with fuzz/<target>.dict as dictionary where there is one. Fails when any target finds a
# crash, a leak, a timeout or an invariant violation; the input that did it is kept under
# build-fuzz/artifacts/<target>/ (add it to the seed corpus with the fix). Prints each
# target's final figures: executions, exec/s, coverage (cov/ft) and corpus size.
# Usage: scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
#   (targets: fuzz_plan fuzz_safetensors fuzz_config fuzz_cache fuzz_forged_plans fuzz_batcher)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
seconds=${1:-20}
[ $# -gt 0 ] && shift
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_plan fuzz_safetensors fuzz_config fuzz_cache fuzz_forged_plans fuzz_batcher)
case "$seconds" in
  '' | *[!0-9]*) echo "fuzz.sh: SECONDS_PER_TARGET '$seconds' is not a whole number" >&2; exit 2 ;;
esac
command -v clang >/dev/null || { echo "fuzz.sh: clang not found (scripts/setup.sh installs it)" >&2; exit 1; }

build=build-fuzz
echo "== fuzz: building ${targets[*]} in $build/"
cmake -S . -B "$build" -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRMLP_CUDA=OFF -DRMLP_FUZZ=ON \
  >/dev/null
cmake --build "$build" --target "${targets[@]}" -j"${RMLP_BUILD_JOBS:-$(nproc)}"

scratch=$(mktemp -d "${TMPDIR:-/tmp}/rmlp-fuzz.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$build/logs"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
failed=()
summary=()
for target in "${targets[@]}"; do
  seeds="fuzz/corpus/$target"
  [ -d "$seeds" ] || { echo "fuzz.sh: no seed corpus $seeds" >&2; exit 1; }
  corpus="$scratch/$target"
  artifacts="$build/artifacts/$target"
  log="$build/logs/$target.log"
  rm -rf "$artifacts"
  mkdir -p "$corpus" "$artifacts"
  cp -R "$seeds/." "$corpus/"
  args=(-max_total_time="$seconds" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 -use_value_profile=1
    -artifact_prefix="$artifacts/")
  [ -f "fuzz/$target.dict" ] && args+=(-dict="fuzz/$target.dict")
  echo "== fuzz: $target for ${seconds}s ($(ls "$seeds" | wc -l) seeds; log $log)"
  status=0
  # TMPDIR: where fuzz_safetensors and fuzz_config write each input as a file (one per process).
  TMPDIR="$scratch" "$build/fuzz/$target" "${args[@]}" "$corpus" >"$log" 2>&1 || status=$?
  runs=$(sed -n 's/^stat::number_of_executed_\(runs\|units\): *//p' "$log" | tail -1) # "units" in clang 14
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  last=$(grep -E '^#[0-9]+[[:space:]]+(DONE|NEW|REDUCE|pulse|INITED)' "$log" | tail -1 || true)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  corp=$(sed -n 's/.* corp: \([^ ]*\).*/\1/p' <<<"$last")
  line="$target: ${runs:-?} executions, ${rate:-?} exec/s, cov ${cov:-?}, ft ${ft:-?}, corpus ${corp:-?} (files/bytes)"
  if [ "$status" -ne 0 ]; then
    failed+=("$target")
    line="$line, FAILED (exit $status)"
    echo "-- $target failed (exit $status); the end of its log:" >&2
    tail -n 60 "$log" >&2
    echo "-- the input that did it: $(ls "$artifacts" | sed "s|^|$artifacts/|" | tr '\n' ' ')" >&2
  fi
  summary+=("$line")
  echo "   $line"
done

echo "== fuzz summary"
printf '   %s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz.sh: ${failed[*]} failed" >&2
  exit 1
fi
echo "== fuzz: no findings"
