#!/usr/bin/env python3
"""cli_bench_cpu.py: `radixmlp bench` on the CPU says where each mode's time went. One small case,
one layer, --json: per mode (off, on, compact) the forward's GEMM, attention, elementwise, gather
and other time, which are non-negative and add up to that mode's forward time within the clock's
reach, the plan's build time, and outputs of the three modes that agree. The text table prints the
same breakdown under each case, and stderr the run's progress: before each case its place and the
estimate of what is left, at the end the whole run's time. Without options the bench runs one case
per regime (deep sharing, a reranker's batch, nothing shared) whose estimate at the reference
machine's rates on 2 threads fits in the two minutes the main job has; --full runs the whole grid
of 11 cases, --quick its three smallest (--list names them, running nothing). `bench --serve --cost model` (a short rerank trace) gives the same
rows in two runs (but for the CPU times measured: the batcher's own, checked for order, and the
forwards'): the cost model charges nothing measured; and `--route rr|prefix` runs only that route
at K > 1, each row as in the run of both. `--slo-ms` brackets each policy's highest load at a p99
wait bound, which plain runs at the two loads confirm. The Gemma-2B shape (--shape gemma-2b) runs
the same case with its three modes agreeing.

    python3 tests/cli_bench_cpu.py BUILD/radixmlp
"""
import json
import os
import subprocess
import sys
import tempfile

from cli_check import check, radixmlp, summary



def bench(exe, *args):
    return radixmlp(exe, "bench", "--case", "b32_p128_s32", "--layers", "1", "--repeat", "1", *args)


FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration_tests", "fixtures", "qwen3_tiny")

# The whole grid (--full), in the order it runs: what `radixmlp bench` ran by default before the main
# job was cut to one case per regime.
GRID = ["b32_p128_s32", "b32_p128_s64", "b32_p448_s32", "b32_p448_s64", "b32_p128_s256", "b32_p448_s256",
        "b32_p2048_s32", "b32_p2048_s64", "b32_p2048_s256", "rerank_msmarco_32", "no_sharing_b32_s512"]

MEASURED = ("measured_busy_s", "next_p50_us", "next_p99_us", "next_max_us", "push_mean_us")


def strip_measured(row):
    """Drops the figures the machine moves (CPU times); the rest is exact under --cost model."""
    for key in MEASURED:
        row.pop(key, None)


def main():
    exe = sys.argv[1]
    r = bench(exe, "--json")
    check(r.returncode == 0, "bench --json: exit %d, stderr %r" % (r.returncode, r.stderr))
    rows = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    check(len(rows) == 1, "one case, one row: %r" % r.stdout)
    for row in rows:
        for mode in ("off", "on", "compact"):
            parts = [row["%s_ms_%s" % (p, mode)] for p in ("gemm", "attention", "elementwise", "gather", "other")]
            check(all(p >= -0.01 for p in parts[:4]) and row["gemm_ms_" + mode] > 0 and row["attention_ms_" + mode] > 0,
                  "%s: a phase without time or negative: %r" % (mode, parts))
            # the forward's own clock (total) sits inside the bench's wall clock around the call
            total = sum(parts)
            check(total <= row["ms_" + mode] + 0.05 and total >= 0.5 * row["ms_" + mode],
                  "%s: phases add up to %.2f ms, the forward took %.2f ms" % (mode, total, row["ms_" + mode]))
            check(row["plan_us_" + mode] > 0, "%s: plan build time %r" % (mode, row["plan_us_" + mode]))
        check(row["max_abs_diff"] < 1e-4 and row["max_abs_diff_compact"] < 1e-4,
              "off vs on / compact: %g / %g" % (row["max_abs_diff"], row["max_abs_diff_compact"]))
        check(row["n_compact"] < row["n_tokens"] and row["use_radix"], "a shared prefix: %r" % row)
    # the Gemma-2B shape (bge-reranker-v2-gemma's: GeGLU, one KV head of 256) on a small rerank-like
    # batch (a query and 4 passages): radix on and compact agree with off
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl") as f:
        query = list(range(1, 17))
        seqs = [query + [100 + 10 * p + t for t in range(8 + p)] for p in range(4)]
        cu = [0]
        for q in seqs:
            cu.append(cu[-1] + len(q))
        f.write(json.dumps({"case": "gemma_rerank", "input_ids": sum(seqs, []), "cu_seqlens": cu}) + "\n")
        f.flush()
        r = radixmlp(exe, "bench", "--batches", f.name, "--layers", "1", "--repeat", "1", "--json", "--shape",
                     "gemma-2b")
    rows = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    check(r.returncode == 0 and len(rows) == 1 and rows[0]["max_abs_diff"] < 1e-4 and
          rows[0]["max_abs_diff_compact"] < 1e-4 and rows[0]["use_radix"],
          "bench --shape gemma-2b: exit %d, rows %r, stderr %r" % (r.returncode, rows, r.stderr[-500:]))
    r = bench(exe)
    lines = r.stdout.splitlines()
    check(r.returncode == 0 and any(l.strip().startswith("off ") and "gemm" in l and "attention" in l for l in lines)
          and any(l.strip().startswith("compact ") for l in lines), "the text table's breakdown: %r" % r.stdout)
    check(r.stderr.count("radixmlp bench: [1/1] b32_p128_s32 (5120 tokens, 1 layers), about ") == 1
          and " s left..." in r.stderr and "radixmlp bench: 1 case in " in r.stderr, "the progress: %r" % r.stderr)
    # The progress of a run of several cases: two small batches of a file on the fixture model.
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "two.jsonl")
        with open(path, "w") as f:
            f.write(json.dumps({"case": "first", "input_ids": [5, 6, 7, 8, 5, 6, 7, 9], "cu_seqlens": [0, 4, 8]}) + "\n")
            f.write(json.dumps({"case": "second", "input_ids": [3, 4, 3, 4, 2], "cu_seqlens": [0, 2, 5]}) + "\n")
        r = radixmlp(exe, "bench", "--model", FIXTURE, "--batches", path, "--repeat", "1")
        progress = [l for l in r.stderr.splitlines() if l.startswith("radixmlp bench: [")]
        check(r.returncode == 0 and len(progress) == 2
              and progress[0].startswith("radixmlp bench: [1/2] first (8 tokens, ")
              and progress[1].startswith("radixmlp bench: [2/2] second (5 tokens, ")
              and all(" s left..." in l for l in progress) and "radixmlp bench: 2 cases in " in r.stderr,
              "the progress of two cases: exit %d, %r" % (r.returncode, r.stderr))
    # The cases of a run (--list runs nothing): the main job, --full and --quick.
    env = dict(os.environ, OPENBLAS_NUM_THREADS="2")
    listed = {}
    for mode in ("main", "--full", "--quick"):
        args = [exe, "bench", "--list", "--json"] + ([] if mode == "main" else [mode])
        r = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        listed[mode] = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
        check(r.returncode == 0 and listed[mode], "bench --list %s: exit %d, %r" % (mode, r.returncode, r.stderr))
    main = listed["main"]
    check([row["regime"] for row in main] == ["deep sharing", "a reranker's batch", "nothing shared"]
          and all(row["case"] in GRID for row in main), "the main job, one case per regime: %r" % main)
    if len(main) == 3:
        deep, rerank, nothing = main
        check(deep["n_compact"] <= 0.2 * deep["n_tokens"] and "rerank" in rerank["case"]
              and rerank["n_compact"] < rerank["n_tokens"] and nothing["n_compact"] == nothing["n_tokens"],
              "the regimes' N'/N: %r" % main)
    check(sum(row["estimate_s"] for row in main) <= 90, "the main job should take %.0f s on 2 threads, over the "
          "90 s it has (two minutes less the model's setup): %r" % (sum(row["estimate_s"] for row in main), main))
    check([row["case"] for row in listed["--full"]] == GRID, "--full: the whole grid: %r" % listed["--full"])
    check([row["case"] for row in listed["--quick"]] == GRID[:3], "--quick: %r" % listed["--quick"])
    for args, want in ((("--full", "--quick"), "--full runs the whole built-in grid; --quick picks other cases"),
                       (("--full", "--case", "rerank"), "--full runs the whole built-in grid; --case picks"),
                       (("--list", "--trace", "rerank"), "--list is about the cases; --trace runs its own"),
                       (("--list", "--dump-batches", "x.jsonl"), "--list runs nothing, so --dump-batches")):
        r = radixmlp(exe, "bench", *args)
        check(r.returncode == 2 and want in r.stderr, "bench %s: exit %d, %r" % (args, r.returncode, r.stderr))
    serve = ("--serve", "--trace", "rerank", "--requests", "12", "--sweep", "none", "--capacity", "--cost", "model")
    runs = [radixmlp(exe, "bench", *serve, "--json") for _ in range(2)]
    for r in runs:
        check(r.returncode == 0, "bench --serve --cost model: exit %d, stderr %r" % (r.returncode, r.stderr))
    served = [[json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")] for r in runs]
    for rows in served:
        check(len(rows) == 4 and all(row["cost"] == "model" and row["measured_busy_s"] > 0 for row in rows),
              "bench --serve --cost model: FIFO, prefix and their capacity rows: %r" % rows)
        for row in rows:  # the batcher's own CPU time, ordered percentiles, the deepest queue it saw
            check(0 <= row["next_p50_us"] <= row["next_p99_us"] <= row["next_max_us"] and row["push_mean_us"] > 0
                  and 0 < row["deepest_queue"] <= row["seqs"], "bench --serve: the batcher's cost: %r" % row)
            check(not row["saturated"] or row["deepest_queue"] == row["seqs"],
                  "a capacity run picks its first batch with every sequence queued: %r" % row)
            strip_measured(row)
    check(served[0] == served[1], "bench --serve --cost model: two runs differ: %r vs %r" % (served[0], served[1]))
    r = radixmlp(exe, "bench", "--serve", "--cost", "cpu")
    check(r.returncode == 2 and "--cost expects measured or model" in r.stderr, "--cost cpu: %r" % r.stderr)
    # --slo-ms: per policy the highest load found with p99 wait <= the bound and the least found
    # above it. Served again at those loads by the plain runs (the forward run, where the search only
    # plans), the first stays under the bound with the same p99 and the second goes over it.
    short = ("--serve", "--trace", "rerank", "--requests", "24", "--sweep", "none", "--cost", "model", "--cache-mb", "0",
             "--hidden", "64", "--layers", "1")
    r = radixmlp(exe, "bench", *short, "--slo-ms", "10", "--json")
    found = [json.loads(line) for line in r.stdout.splitlines() if '"slo_ms"' in line]
    check(r.returncode == 0 and [row["policy"] for row in found] == ["fifo", "prefix"],
          "bench --serve --slo-ms 10: exit %d, rows %r, stderr %r" % (r.returncode, found, r.stderr))
    for row in found:
        check(0.05 <= row["carried_load"] < row["refused_load"] <= row["carried_load"] + 0.005
              and row["wait_p99_ms"] <= 10.0, "--slo-ms: the bracket %r" % row)
        for load, under in ((row["carried_load"], True), (row["refused_load"], False)):
            r = radixmlp(exe, "bench", *short, "--load", repr(load), "--json")
            rows = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
            p99 = [x["wait_p99_ms"] for x in rows if x["policy"] == row["policy"]]
            check(r.returncode == 0 and len(p99) == 1 and (p99[0] <= 10.0) == under
                  and (not under or abs(p99[0] - row["wait_p99_ms"]) < 0.01),
                  "--slo-ms: %s at load %r: p99 %r, the search's %r" % (row["policy"], load, p99, row["wait_p99_ms"]))
    r = radixmlp(exe, "bench", "--serve", "--slo-ms", "300")
    check(r.returncode == 2 and "--slo-ms needs --cost model" in r.stderr, "--slo-ms measured: %r" % r.stderr)
    # --route: at K > 1 only the routes asked for, each row as in the run of both.
    sweep = ("--serve", "--trace", "none", "--requests", "12", "--replicas", "1,2", "--cost", "model", "--json")
    routed = {}
    for route in ("both", "rr", "prefix"):
        r = radixmlp(exe, "bench", *sweep, "--route", route)
        check(r.returncode == 0, "bench --serve --route %s: exit %d, stderr %r" % (route, r.returncode, r.stderr))
        rows = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
        for row in rows:
            strip_measured(row)
        routed[route] = {(row["replicas"], row["route"]): row for row in rows}
    check(sorted(routed["both"]) == [(1, "-"), (2, "prefix"), (2, "rr")], "--route both: %r" % sorted(routed["both"]))
    for route in ("rr", "prefix"):
        check(sorted(routed[route]) == [(1, "-"), (2, route)] and
              all(routed[route][k] == routed["both"][k] for k in routed[route]),
              "--route %s: rows %r, not the run of both's" % (route, sorted(routed[route])))
    r = radixmlp(exe, "bench", "--serve", "--route", "hash")
    check(r.returncode == 2 and "--route expects rr, prefix or both" in r.stderr, "--route hash: %r" % r.stderr)
    return summary("cli_bench_cpu")


if __name__ == "__main__":
    sys.exit(main())
