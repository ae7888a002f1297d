#!/usr/bin/env python3
"""cli_plan.py: `radixmlp plan` says what is wrong with a bad count (--passages 0, --repeat 0) or
gate rule instead of printing only the usage, and `--gate tei` applies TEI's rule: on a batch
whose padded compact length crosses the threshold the unpadded count does not, the two rules
decide differently, and at a threshold <= 1e-6 TEI's rule skips the trie.

    python3 tests/cli_plan.py BUILD/radixmlp
"""
import json
import sys

from cli_check import check, radixmlp, summary



def run(exe, *args):
    return radixmlp(exe, "plan", *args)


def plan_json(exe, *args):
    r = run(exe, "--passages", "3", "--repeat", "1", "--json", *args)
    check(r.returncode == 0, "plan %s: exit %d, stderr %r" % (" ".join(args), r.returncode, r.stderr))
    return json.loads(r.stdout) if r.returncode == 0 else None


def main():
    exe = sys.argv[1]
    for args, want in [
        (["--passages", "0"], "radixmlp: --passages expects a whole number from 1 to 1000000, got '0'"),
        (["--repeat", "0"], "radixmlp: --repeat expects a whole number from 1 to 1000000, got '0'"),
        (["--gate", "padded"], "radixmlp: --gate expects distinct (this library's rule) or tei (TEI's), got 'padded'"),
    ]:
        r = run(exe, *args)
        check(r.returncode == 2 and r.stderr.startswith(want + "\n"),
              "plan %s: exit %d, stderr %r, want it to start with %r" % (" ".join(args), r.returncode, r.stderr, want))

    base = plan_json(exe, "--threshold", "1")
    if base is None:
        return 1
    n, distinct, pad = base["n_tokens"], base["n_distinct"], 64
    padded = -(-distinct // pad) * pad
    check(distinct < padded, "the batch's %d distinct rows are already a multiple of %d" % (distinct, pad))
    between = "%.6f" % ((distinct + padded) / 2 / n)  # distinct/N < between < padded/N
    on = plan_json(exe, "--pad", str(pad), "--threshold", between)
    off = plan_json(exe, "--pad", str(pad), "--threshold", between, "--gate", "tei")
    check(on is not None and on["use_radix"] and on["gate"] == "distinct",
          "distinct rule, ratio %d/%d < %s: %r" % (distinct, n, between, on))
    check(off is not None and not off["use_radix"] and off["gate"] == "tei",
          "TEI's rule, padded %d/%d >= %s: %r" % (padded, n, between, off))
    tiny = plan_json(exe, "--threshold", "1e-7", "--gate", "tei")
    check(tiny is not None and not tiny["use_radix"] and tiny["n_distinct"] == n,
          "TEI's rule at threshold 1e-7 skips the trie: %r" % (tiny,))
    return summary("cli_plan")


if __name__ == "__main__":
    sys.exit(main())
