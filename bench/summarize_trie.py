#!/usr/bin/env python3
"""Summarises several runs of bench_trie (JSON lines on stdin) as a Markdown table.

Per case: the best us_min over the runs and the median of the runs' medians, so one run
disturbed by a neighbour on a shared machine does not decide the figure.
Usage: for i in 1 2 3 4 5; do build/bench/bench_trie; done | bench/summarize_trie.py
"""
import json
import statistics
import sys

runs = {}
for line in sys.stdin:
    if line.strip():
        row = json.loads(line)
        runs.setdefault(row["case"], []).append(row)

print("| case | B | N | N' | runs | µs min | µs median | ns/token |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for case, rows in runs.items():
    median = statistics.median(r["us_median"] for r in rows)
    first = rows[0]
    print(f"| `{case}` | {first['n_seqs']} | {first['n_tokens']} | {first['n_compact']} | {len(rows)} "
          f"| {min(r['us_min'] for r in rows):.2f} | {median:.2f} | {median * 1e3 / first['n_tokens']:.2f} |")
