# pip_deps.sh: sourced by the test scripts that need PyPI packages (real_model/run.sh, tei-host/run.sh).
# pip_deps LABEL PY DEPS [--no-deps] PACKAGE...: installs the pinned PACKAGEs with `PY -m pip install
# --target DEPS` (nothing system-wide) unless DEPS already holds exactly them; where PyPI cannot be
# reached or pip is missing it calls the sourcing script's `skip` (which says SKIPPED and exits 0);
# any other pip failure prints pip's log and exits 1.
pip_deps() {
  local label=$1 py=$2 deps=$3 flags=()
  shift 3
  if [ "${1:-}" = --no-deps ]; then flags+=(--no-deps); shift; fi
  [ "$(cat "$deps/.installed" 2>/dev/null)" = "$*" ] && return 0
  "$py" -m pip --version >/dev/null 2>&1 || skip "pip is not installed for $py (apt-get install python3-pip)"
  rm -rf "$deps"
  echo "$label: pip install --target $deps $*"
  local log network="connection|resolve|unreachable|timed out|max retries|proxy|ssl|could not fetch"
  if ! log=$("$py" -m pip install --quiet --disable-pip-version-check --no-cache-dir "${flags[@]}" --timeout 30 --retries 2 \
    --target "$deps" "$@" 2>&1); then
    rm -rf "$deps"
    if grep -qiE "$network" <<<"$log"; then
      skip "PyPI cannot be reached: $(grep -iE -m1 "$network" <<<"$log")"
    fi
    echo "$log" >&2
    echo "$label: pip install failed (not a network error)" >&2
    exit 1
  fi
  echo "$*" >"$deps/.installed"
}
