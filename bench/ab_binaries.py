#!/usr/bin/env python3
"""Two radixmlp binaries on the same `radixmlp bench --json` cases, interleaved: same output, same speed?

For a change that should change neither (a refactor): runs OLD and NEW in turn, ROUNDS times each
(old, new, old, new, ...), each with the same bench options, and prints per case the median of each
timing (ms_off, ms_on, ms_compact) for both and the ratio new/old. It fails (exit 1) when the two
print different JSON keys, different cases or sizes, or a different max |off - on| (the same random
model and batches: the numbers must match), so output shapes are checked too. Timings from a shared
machine are noisy: compare the ratios, and re-run on a quiet one.

    bench/ab_binaries.py OLD/radixmlp NEW/radixmlp [--rounds 3] [-- BENCH OPTIONS]
    (default options: --quick; e.g. -- --quick --layers 1, or -- --case b32_p128_s32 --repeat 3)
"""
import json
import statistics
import subprocess
import sys

TIMES = ("ms_off", "ms_on", "ms_compact")
EXACT = ("n_seqs", "n_tokens", "n_compact", "use_radix", "layers", "max_abs_diff", "max_abs_diff_compact")


def run(binary, options):
    out = subprocess.run([binary, "bench", "--json"] + options, check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def main(argv):
    if "--" in argv:
        argv, options = argv[:argv.index("--")], argv[argv.index("--") + 1:]
    else:
        options = ["--quick"]
    rounds = 3
    if "--rounds" in argv:
        i = argv.index("--rounds")
        rounds = int(argv[i + 1])
        argv = argv[:i] + argv[i + 2:]
    if len(argv) != 2:
        sys.exit(__doc__)
    runs = {"old": [], "new": []}
    for r in range(rounds):
        for name, binary in (("old", argv[0]), ("new", argv[1])):
            runs[name].append(run(binary, options))
            print("round %d/%d: %s done" % (r + 1, rounds, name), file=sys.stderr)
    failures = []
    first = {name: rows[0] for name, rows in runs.items()}
    if [sorted(row) for row in first["old"]] != [sorted(row) for row in first["new"]]:
        failures.append("the JSON keys differ")
    if [row["case"] for row in first["old"]] != [row["case"] for row in first["new"]]:
        failures.append("the cases differ")
    print("%-16s %-10s %10s %10s %7s" % ("case", "timing", "old ms", "new ms", "new/old"))
    for k, case in enumerate(row["case"] for row in first["old"]):
        for key in EXACT:
            values = {json.dumps(rows[k].get(key)) for name in runs for rows in runs[name]}
            if len(values) > 1:
                failures.append("%s: %s differs between runs: %s" % (case, key, ", ".join(sorted(values))))
        for key in TIMES:
            if key not in first["old"][k]:
                continue
            old = statistics.median(rows[k][key] for rows in runs["old"])
            new = statistics.median(rows[k][key] for rows in runs["new"])
            print("%-16s %-10s %10.1f %10.1f %7.3f" % (case, key, old, new, new / old))
    for failure in failures:
        print("ab_binaries: " + failure, file=sys.stderr)
    print("ab_binaries: %d rounds of %s each; %s" % (rounds, " ".join(["bench", "--json"] + options),
                                                      "%d failures" % len(failures) if failures else
                                                      "same keys, cases, sizes and errors"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
