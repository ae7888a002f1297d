#!/usr/bin/env python3
"""`radixmlp bench --batches FILE` on a fixture model: the batches of a file are the cases (names,
N and N' as the plan of each batch gives them, with and without position_ids), --case filters
them, what --dump-batches writes reads back as the same batches, and every malformed file is an
error naming the file, line and key (exit 1; --quick with --batches is a usage error, exit 2).
Usage: cli_bench_batches.py RADIXMLP FIXTURES_DIR   (standard library only)
"""
import json
import os
import subprocess
import sys
import tempfile


def distinct_paths(ids, cu, pos=None):
    """N' of the radix plan: the number of distinct (token, position) paths from sequence starts."""
    paths = set()
    for s in range(len(cu) - 1):
        prefix = ()
        for i in range(cu[s], cu[s + 1]):
            prefix += ((ids[i], pos[i] if pos else i - cu[s]),)
            paths.add(prefix)
    return len(paths)


BATCHES = [
    {"case": "shared_prefix", "input_ids": [5, 6, 7, 8, 5, 6, 7, 9, 5, 6, 1, 5, 6, 7, 8],
     "cu_seqlens": [0, 4, 8, 11, 15]},
    {"case": "given_positions", "input_ids": [3, 4, 3, 4, 2], "cu_seqlens": [0, 2, 5],
     "position_ids": [0, 1, 0, 2, 3], "ignored_key": True},
]


def main():
    radixmlp, fixtures = sys.argv[1], sys.argv[2]
    model = os.path.join(fixtures, "qwen3_tiny")
    failures = checks = 0

    def check(ok, what):
        nonlocal failures, checks
        checks += 1
        if not ok:
            failures += 1
            print(f"FAIL {what}")

    def bench(path, *flags):
        return subprocess.run([radixmlp, "bench", "--model", model, "--json", "--batches", path, *flags],
                              capture_output=True, text=True)

    with tempfile.TemporaryDirectory() as tmp:
        good, dumped = os.path.join(tmp, "good.jsonl"), os.path.join(tmp, "dumped.jsonl")
        with open(good, "w") as f:
            f.write("\n".join(json.dumps(b) for b in BATCHES) + "\n\n")  # a blank line is skipped
        done = bench(good, "--dump-batches", dumped)
        check(done.returncode == 0, f"bench --batches exits 0: {done.stderr}")
        rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        check([r["case"] for r in rows] == [b["case"] for b in BATCHES], f"cases in file order: {rows}")
        for r, b in zip(rows, BATCHES):
            want = distinct_paths(b["input_ids"], b["cu_seqlens"], b.get("position_ids"))
            check(r["n_tokens"] == len(b["input_ids"]) and r["n_compact"] == want and r["use_radix"],
                  f"{b['case']}: N={r['n_tokens']} N'={r['n_compact']}, want {len(b['input_ids'])} and {want}")
            check(r["max_abs_diff"] < 1e-4, f"{b['case']}: radix on agrees with off ({r['max_abs_diff']})")
        again = bench(dumped)
        rows2 = [json.loads(line) for line in again.stdout.splitlines() if line.startswith("{")]
        check(again.returncode == 0 and [(r["case"], r["n_tokens"], r["n_compact"]) for r in rows2] ==
              [(r["case"], r["n_tokens"], r["n_compact"]) for r in rows], "the --dump-batches file reads back")
        only = bench(good, "--case", "given")
        check(only.returncode == 0 and [json.loads(x)["case"] for x in only.stdout.splitlines()] ==
              ["given_positions"], f"--case filters the file's cases: {only.stdout}")
        usage = bench(good, "--quick")
        check(usage.returncode == 2 and "--quick" in usage.stderr, "--quick with --batches is a usage error")

        bad_files = [
            ("not json", ":1: not a JSON object"),
            ('{"input_ids": [1], "cu_seqlens": [0, 1]}', ':1: "case" (the batch\'s name) is not a string'),
            ('{"case": "x", "cu_seqlens": [0, 1]}', ':1: "input_ids" is not a non-empty array'),
            ('{"case": "x", "input_ids": [1, -2], "cu_seqlens": [0, 2]}', ":1: input_ids[1] is not a whole number"),
            ('{"case": "x", "input_ids": [1, 2], "cu_seqlens": [0, 3]}', ":1: cu_seqlens must run from 0 to the 2"),
            ('{"case": "x", "input_ids": [1, 2, 3], "cu_seqlens": [0, 2, 1, 3]}',
             ":1: cu_seqlens[2]=1 < cu_seqlens[1]=2"),
            ('{"case": "x", "input_ids": [1, 2, 3], "cu_seqlens": [0, 3], "position_ids": [0, 1]}',
             ":1: 2 position_ids for 3 input_ids"),
            (json.dumps(BATCHES[0]) + '\n{"case": 7}', ':2: "case" (the batch\'s name) is not a string'),
            ("\n", "holds no batch"),
            ('{"case": "x", "input_ids": [1, 1000], "cu_seqlens": [0, 2]}', ">= vocab_size=1000"),
        ]
        for text, message in bad_files:
            path = os.path.join(tmp, "bad.jsonl")
            with open(path, "w") as f:
                f.write(text)
            done = bench(path)
            check(done.returncode == 1 and message in done.stderr and ("vocab" in message or path in done.stderr),
                  f"{text!r}: exit {done.returncode}, want 1 and {message!r} in: {done.stderr.strip()}")
        missing = bench(os.path.join(tmp, "missing.jsonl"))
        check(missing.returncode == 1 and "missing.jsonl: cannot open it" in missing.stderr, "a missing file")
    print(f"{checks - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
