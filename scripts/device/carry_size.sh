#!/usr/bin/env bash
# carry_size.sh: what each `run` call of the GPU windows would carry, against the 64 MiB a call takes
# (a call above it is refused before it starts). Run it before a window (gpu/CHECKLIST.md's
# pre-step); tests/test_device_scripts.sh runs it in CI.
#   scripts/device/carry_size.sh [--estimate]           every carry list of gpu/CHECKLIST.md's run calls
#                                                       (`window.sh N", ..., carry=[...]`), one line each
#   scripts/device/carry_size.sh [--estimate] PATH...   that one carry list
# A call carries the files git tracks (as they are in the working tree), the untracked files git does
# not ignore, shared/ (its ignored files: the rest is counted already) and every file under the
# carried paths. Each file is counted rounded up to 4 KiB, as `du` counts it: the first window's
# call was refused with 66.8 MB of plain bytes (63.7 MiB: the tree at c606ca5, .debs with oneDNN's,
# FlashInfer's 1,190 headers; 68.5 MiB counted so), so the device tool counts more than the bytes;
# 4 KiB a file bounds a tar archive's headers and padding too. The plain bytes are printed beside.
# --estimate: a carried path missing here counts at its expected size (below), as on CI's fresh
# clone, which has no .debs; without it a missing path is an error.
# Exit: 0 (a WARN line above 60 MiB), 1 when a list is above 64 MiB, 2 when a carried path is
# missing (without --estimate) or there is no carry list.
set -uo pipefail
cd "$(git rev-parse --show-toplevel 2>/dev/null || echo .)" || exit 2
limit=$((64 << 20)) warn=$((60 << 20))
estimate=0
[ "${1:-}" = --estimate ] && estimate=1 && shift
# "counted bytes" (4 KiB a file) of each folder, measured 2026-11-29 and rounded up
# (.rust-device: scripts/device/rust_prebuilt.sh's test program, where a window carries it)
declare -A expected=([.debs]=8000000 [.debs-onednn]=7200000 [third_party/flashinfer]=31100000 [.rust-device]=1400000)

# sizes < NUL-separated names: "COUNTED BYTES" (COUNTED: each file rounded up to 4 KiB)
sizes() {
  xargs -0 -r stat -c %s -- 2>/dev/null | awk '{c += int(($1 + 4095) / 4096) * 4096; b += $1} END {print c + 0, b + 0}'
}
mib() { awk -v b="$1" 'BEGIN {printf "%.1f MiB", b / 1048576}'; }

read -r tracked tracked_b < <(git ls-files -z | sizes)
read -r untracked untracked_b < <(git ls-files -z -o --exclude-standard | sizes)
shared=0 shared_b=0
[ -d shared ] && read -r shared shared_b < <(git ls-files -z -o -i --exclude-standard -- shared | sizes)
tree=$((tracked + untracked + shared)) tree_b=$((tracked_b + untracked_b + shared_b))

if (($# > 0)); then
  lists=("- $*")
else
  checklist=gpu/CHECKLIST.md
  mapfile -t lists < <(grep -oE 'window\.sh [0-9]+"[^)]*carry=\[[^]]*\]' "$checklist" 2>/dev/null |
    sed -E 's/^window\.sh ([0-9]+)".*carry=\[([^]]*)\]$/\1 \2/; s/[",]/ /g; s/  +/ /g; s/ $//' | sort -u)
  ((${#lists[@]} > 0)) || { echo "carry_size: no run(... carry=[...]) call in $checklist" >&2; exit 2; }
fi

status=0
declare -A missing=()
echo "the tree: $(mib "$tree") ($(mib "$tree_b") of bytes): $(git ls-files | wc -l) tracked files $(mib "$tracked"), untracked" \
  "(not ignored) $(mib "$untracked")$([ -d shared ] && echo ", shared/ $(mib "$shared")")"
for l in "${lists[@]}"; do
  read -r cmd paths <<<"$l"
  total=$tree total_b=$tree_b parts='' absent=''
  for p in $paths; do
    if [ -e "$p" ]; then
      read -r n b < <(find "$p" \( -type f -o -type l \) -print0 | sizes)
      parts+=", $p $(mib "$n")"
    elif ((estimate)) && [ -n "${expected[$p]:-}" ]; then
      n=${expected[$p]} b=${expected[$p]}
      parts+=", $p $(mib "$n") (absent here: its expected size)"
    else
      [ -n "${missing[$p]:-}" ] || echo "carry_size: $p is missing here (scripts/device/device_deps.sh fetch .debs;" \
        "scripts/setup.sh fetches third_party/flashinfer)" >&2
      missing[$p]=1 status=2 absent+=" $p"
      continue
    fi
    total=$((total + n)) total_b=$((total_b + b))
  done
  verdict=OK
  if ((total > limit)); then
    verdict="OVER $(mib "$limit"): the call would be refused"
    ((status == 0)) && status=1
  elif [ -n "$absent" ]; then
    verdict="INCOMPLETE: missing here:$absent"
  elif ((total > warn)); then
    verdict="WARN: above $(mib "$warn"), $(mib $((limit - total))) from a refused call"
  fi
  echo "$([ "$cmd" = - ] && echo "carry" || echo "command $cmd") [${paths// /, }]: $(mib "$total") of $(mib "$limit")" \
    "($(mib "$total_b") of bytes; the tree $(mib "$tree")$parts): $verdict"
done
exit $status
