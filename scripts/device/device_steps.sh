#!/usr/bin/env bash
# device_steps.sh: the steps of the device scripts, their time limits and their record (sourced by
# scripts/device/device_env.sh). A lent GPU machine runs one command for at most 600 s and is taken back when
# idle, so every step runs under its own `timeout -k 15 N`, bounded by what is left of the caller's
# budget, and each step's outcome is written at once: one JSON line in $OUT/steps.jsonl ({"step",
# "rc", "at": seconds since the command began, "seconds", "limit", "lines": what to read of its
# output}), after which $OUT/summary.txt is regenerated (scripts/device/summarize_window.py, from steps.jsonl
# and the benches' JSON lines). A command cut off keeps everything done before.
#   rmlp_budget DEFAULT        DEFAULT seconds, or fewer when $RMLP_DEADLINE (an epoch second, which
#                              scripts/device/window.sh sets for the scripts it runs) comes sooner; 0 at least.
#   rmlp_left, rmlp_slot MAX RESERVE
#                              the seconds left of the caller's $budget (since its start: $SECONDS),
#                              and those a step may take: at most MAX, leaving RESERVE for the steps
#                              after it (0 when nothing is left).
#   rmlp_rc RC                 "rc=RC", naming timeout's statuses (124, 137) and a test's skip (77).
#   rmlp_step NAME MAX RESERVE OUT ERR CMD...
#                              runs CMD (a program, not a function: `env VAR=V prog` for a variant)
#                              under `timeout -k 15 SLOT`, SLOT = rmlp_slot MAX RESERVE, stdout appended
#                              to OUT, stderr to ERR (a header line there first); not run when SLOT is
#                              under $RMLP_MIN_STEP (20 s). Returns CMD's status, 1 when not run; then
#   rmlp_done [LINES]          records that step with LINES (newline-separated).
#   rmlp_setup NAME CMD...     runs CMD (a function too) in THIS shell, no pipeline or $(...), so that
#                              what it exports stays (rmlp_find_cublas's LD_LIBRARY_PATH), and records
#                              its output as step NAME.
#   rmlp_record NAME RC START LIMIT [LINES]
#                              the record itself: the JSON line, a progress line on stdout, the summary.
#   rmlp_new_lines FILE N      FILE's lines after its first N (a step's own part of a shared log).
#   rmlp_gpu_or_skip           0 where nvidia-smi lists a GPU, or with RMLP_GPU_DRY_RUN=1 (every step then
#                              runs here, the GPU tests skipping and the CUDA runs failing with their
#                              messages); else records SKIP and returns 1. Silent where scripts/device/window.sh
#                              checked it already (RMLP_GPU_CHECKED=1).
#   rmlp_build MAX RETRY RESERVE TARGET...
#                              TARGETs in $build (configured first when the folder has no CMakeCache.txt:
#                              a bare machine), within rmlp_slot MAX, going on past a failed file. When
#                              only programs failed (not the library, FlashInfer's files in it), what
#                              built is used and the record says what did not. Else (the library, or the
#                              time limit) once more with FlashInfer off in $build-nofi within rmlp_slot
#                              RETRY RESERVE, so that the correctness tests still run, and the record
#                              says so (NOTE: built without FlashInfer). A build that failed is not tried
#                              again in the same command (scripts/device/window.sh's RMLP_WINDOW_ID). Sets
#                              RMLP_BUILD_DIR to the folder to run from (empty: none); returns 1 when
#                              neither built. Logs: $OUT/build.log.
# Sourcing sets RMLP_T0 (the epoch second the command began; kept when set), RMLP_WINDOW_ID (kept when
# set) and RMLP_SCRATCH (a temporary folder removed at exit: this sets the shell's EXIT trap).

export RMLP_T0=${RMLP_T0:-$(date +%s)}
export RMLP_WINDOW_ID=${RMLP_WINDOW_ID:-$$}
RMLP_GPU_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
RMLP_SCRATCH=$(mktemp -d)
trap 'rm -rf "$RMLP_SCRATCH"' EXIT

rmlp_budget() {
  local b=$1 d
  if [ -n "${RMLP_DEADLINE:-}" ]; then
    d=$((RMLP_DEADLINE - $(date +%s)))
    ((d < b)) && b=$d
  fi
  ((b < 0)) && b=0
  echo "$b"
}

rmlp_left() { echo $((budget - SECONDS)); }

rmlp_slot() {
  local s=$((budget - SECONDS - $2))
  ((s > $1)) && s=$1
  ((s < 0)) && s=0
  echo "$s"
}

rmlp_rc() {
  case $1 in
  124) echo "rc=124 (the time limit)" ;;
  137) echo "rc=137 (killed: 15 s past the time limit, or out of memory)" ;;
  77) echo "rc=77 (skipped)" ;;
  0 | [1-9] | [1-9][0-9] | [1-9][0-9][0-9]) echo "rc=$1" ;;
  *) echo "$1" ;;
  esac
}

rmlp_json_str() {
  local s=$1
  s=${s//\\/\\\\}
  s=${s//\"/\\\"}
  s=${s//$'\t'/ }
  printf '"%s"' "$(printf '%s' "$s" | LC_ALL=C tr -cd '\40-\176')" # printable ASCII: valid JSON and UTF-8
}

rmlp_summary() {
  if python3 "$RMLP_GPU_DIR/summarize_window.py" "$OUT" >"$RMLP_SCRATCH/summary.txt" 2>&1; then
    cp "$RMLP_SCRATCH/summary.txt" "$OUT/summary.txt"
  else
    { cat "$RMLP_SCRATCH/summary.txt"; echo "# scripts/device/summarize_window.py failed: the steps as recorded"; cat "$OUT/steps.jsonl"; } \
      >"$OUT/summary.txt"
  fi
}

rmlp_record() {
  local name=$1 rc=$2 start=$3 limit=${4:-0} lines=${5:-} line json sep='' at
  at=$(($(date +%s) - RMLP_T0))
  json="{\"step\": $(rmlp_json_str "$name"), \"rc\": "
  if [[ "$rc" =~ ^[0-9]+$ ]]; then json+=$rc; else json+=$(rmlp_json_str "$rc"); fi
  json+=", \"at\": $at, \"seconds\": $((SECONDS - start)), \"limit\": $limit, \"lines\": ["
  while IFS= read -r line; do
    [ -n "$line" ] || continue
    json+="$sep$(rmlp_json_str "${line:0:400}")"
    sep=", "
  done <<<"$lines"
  echo "$json]}" >>"$OUT/steps.jsonl"
  echo "[$(printf '%4d' "$at") s] $name: $(rmlp_rc "$rc"), $((SECONDS - start)) s$( ((limit > 0)) && echo " (at most $limit)")"
  [ -z "$lines" ] || sed -e '/^$/d' -e 's/^/         /' <<<"$lines" | cut -c1-240
  rmlp_summary
}

rmlp_new_lines() { tail -n +$(($2 + 1)) "$1" 2>/dev/null; }

rmlp_step() {
  RMLP_STEP_NAME=$1
  RMLP_STEP_START=$SECONDS
  RMLP_STEP_LIMIT=$(rmlp_slot "$2" "$3")
  local reserve=$3 out=$4 err=$5
  shift 5
  if ((RMLP_STEP_LIMIT < ${RMLP_MIN_STEP:-20})); then
    RMLP_STEP_RC="not run: $(rmlp_left) s left of the budget, $reserve of them kept for the steps after it"
    echo "== $RMLP_STEP_NAME: $RMLP_STEP_RC" >>"$err"
    return 1
  fi
  echo "== $RMLP_STEP_NAME (at most $RMLP_STEP_LIMIT s): $*" >>"$err"
  timeout -k 15 "$RMLP_STEP_LIMIT" "$@" >>"$out" 2>>"$err"
  RMLP_STEP_RC=$?
  return "$RMLP_STEP_RC"
}

rmlp_done() { rmlp_record "$RMLP_STEP_NAME" "$RMLP_STEP_RC" "$RMLP_STEP_START" "$RMLP_STEP_LIMIT" "${1:-}"; }

rmlp_setup() {
  local name=$1 start=$SECONDS rc
  shift
  "$@" >"$RMLP_SCRATCH/setup.txt" 2>&1
  rc=$?
  rmlp_record "$name" "$rc" "$start" 0 "$(cat "$RMLP_SCRATCH/setup.txt")"
  return $rc
}

rmlp_gpu_or_skip() {
  [ "${RMLP_GPU_CHECKED:-0}" = 1 ] && return 0 # scripts/device/window.sh checked (and recorded) it
  nvidia-smi -L >/dev/null 2>&1 && return 0
  if [ "${RMLP_GPU_DRY_RUN:-0}" = 1 ]; then
    rmlp_record "DRY RUN: no GPU here" 0 "$SECONDS" 0 \
      "every step runs; the GPU tests skip (rc=77 or Skipped) and the CUDA runs fail with their message"
    return 0
  fi
  rmlp_record "SKIP: no GPU on this machine" 0 "$SECONDS" 0 \
    "nvidia-smi -L fails or is absent; nothing was run (RMLP_GPU_DRY_RUN=1 runs every step anyway)"
  return 1
}

# rmlp_build_in DIR MAX RESERVE TARGETS ARGS [HOW]: one attempt (configure when needed, then build);
# TARGETS and ARGS (cmake's configure arguments) are words of one string each; HOW sets the configure's
# RMLP_CMAKE_ARGS (rmlp_cmake_args, a CUDA build, unless given: rmlp_cpu_cmake_args).
rmlp_build_in() {
  local dir=$1 max=$2 reserve=$3 how=${6:-rmlp_cmake_args} log=$OUT/build.log n0 warnings
  local -a targets args
  read -r -a targets <<<"$4"
  read -r -a args <<<"${5:-}"
  if [ ! -f "$dir/CMakeCache.txt" ]; then
    "$how" "$dir" "${args[@]}"
    n0=$(wc -l <"$log")
    rmlp_step "configure $dir${5:+ ($5)}" 90 $((reserve + 30)) "$log" "$log" cmake "${RMLP_CMAKE_ARGS[@]}"
    local rc=$?
    rmlp_new_lines "$log" "$n0" | grep -m1 'radix_mlp .*CUDA' >"$dir/.rmlp_configured" 2>/dev/null
    rmlp_done "$(rmlp_new_lines "$log" "$n0" | grep -E -m5 'radix_mlp .*CUDA|radix_mlp: .*(Hopper|oneDNN)|CMake Error|not found')"
    if ((rc != 0)); then
      rm -f "$dir/CMakeCache.txt"
      return 1
    fi
  fi
  n0=$(wc -l <"$log")
  local keep_going=(-k) # on, past a failed file, so that one failing target does not sink the others
  [ -f "$dir/build.ninja" ] && keep_going=(-k 0)
  rmlp_step "build ${targets[*]} in $dir" "$max" "$reserve" "$log" "$log" \
    cmake --build "$dir" -j"${RMLP_JOBS:-$(nproc)}" --target "${targets[@]}" -- "${keep_going[@]}"
  local rc=$?
  RMLP_BUILD_FAILED=$(rmlp_new_lines "$log" "$n0" | grep -E '^FAILED: |\*\*\* \[' | cut -c1-200)
  warnings=$(rmlp_new_lines "$log" "$n0" | grep -Ec 'warning( #[0-9]+-D)?:')
  if ((rc == 0)); then
    rmlp_done "$warnings lines mention a warning$( ((warnings > 0)) && echo ' (RMLP_WERROR=OFF kept them going; the first ones:)')
$(rmlp_new_lines "$log" "$n0" | grep -E -m 10 'warning( #[0-9]+-D)?:')"
  else
    rmlp_done "BUILD FAILED; what failed, then the end of its log:
$RMLP_BUILD_FAILED
$(rmlp_new_lines "$log" "$n0" | grep -v '^== ' | tail -n 25)"
  fi
  return $rc
}

rmlp_build() {
  local max=$1 retry=$2 reserve=$3 targets
  shift 3
  targets="$*"
  RMLP_BUILD_DIR=
  touch "$OUT/build.log"
  if [ "$(cat "$build/.rmlp_failed" 2>/dev/null)" = "$RMLP_WINDOW_ID" ]; then
    rmlp_record "build in $build" "not run" "$SECONDS" 0 "it failed earlier in this command: $build-nofi (FlashInfer off) instead"
  elif rmlp_build_in "$build" "$max" $((reserve + retry / 2)) "$targets"; then
    RMLP_BUILD_DIR=$build
    return 0
  elif [[ "$RMLP_STEP_RC" =~ ^[0-9]+$ ]] && ((RMLP_STEP_RC != 124 && RMLP_STEP_RC != 137)) &&
    [ -n "$RMLP_BUILD_FAILED" ] &&
    ! grep -q -E 'radix_mlp_objects|libradix_mlp' <<<"$RMLP_BUILD_FAILED"; then
    # The library built, FlashInfer in it: only some programs failed. Building without FlashInfer
    # would fail them the same; the others run from here.
    RMLP_BUILD_DIR=$build
    rmlp_record "NOTE: some programs did not build" 0 "$SECONDS" 0 "the library did; what built runs from $build, the rest
is missing (ctest: Not Run): what depends on
$RMLP_BUILD_FAILED"
    return 0
  else
    mkdir -p "$build" && echo "$RMLP_WINDOW_ID" >"$build/.rmlp_failed"
  fi
  if rmlp_build_in "$build-nofi" "$retry" "$reserve" "$targets" -DRMLP_FLASHINFER=OFF; then
    RMLP_BUILD_DIR=$build-nofi
    rmlp_record "NOTE: built without FlashInfer" 0 "$SECONDS" 0 \
      "the build in $build failed; $RMLP_BUILD_DIR has the reference attention only, so that the correctness tests still run"
    return 0
  fi
  rmlp_record "NO BUILD" FAILED "$SECONDS" 0 "$build and $build-nofi both failed (build.log)"
  return 1
}
