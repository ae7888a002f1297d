#!/usr/bin/env python3
"""load.py: requests/s and latency of tei-host on the real model under a closed loop of clients on
loopback, radix off, on, and on with prefix batching and the prefix cache, on rerank, embedding and
no-sharing traffic (common.py; `rerank32`: rerank calls of 32 passages). Each configuration is its
own host; their runs are interleaved in --rounds slices of --seconds in all (after a warm-up of
--warmup requests each), so that the shared machine's slow spells fall on all of them alike. The
hosts run their GEMMs on --cpu-threads threads, each one single-threaded OpenBLAS call
(docs/backends.md, CPU threads), as `radixmlp bench` does, so forward_batches.py's batches of the
same traffic are timed alike. Prints a Markdown table (docs/bench/tei-host.md).

Usage: load.py --host BIN --model DIR --pydeps DIR [--seconds 40] [--clients 8] [--traffic rerank rerank32 ...]
(--pydeps: the folder with `tokenizers` for the host's workers, BUILD/real_model/pydeps)."""
import argparse

import common

CONFIGS = [
    # name, environment, flags
    ("radix off", {"RADIX_MLP_THRESHOLD": "0", "RADIX_MLP_BATCHER": "fifo"}, ["--cache-mb", "0"]),
    ("radix on", {"RADIX_MLP_THRESHOLD": "1", "RADIX_MLP_BATCHER": "fifo"}, ["--cache-mb", "0"]),
    ("radix on + prefix batching + cache", {"RADIX_MLP_THRESHOLD": "1", "RADIX_MLP_BATCHER": "prefix"},
     ["--cache-mb", "256"]),
]


def measure(args, kind):
    """Every configuration of CONFIGS on `kind`, each on its own host, in --rounds interleaved slices
    of the run (a slow spell of the shared machine falls on all of them alike)."""
    hosts = [common.Host(args.host, args.model, ["--cpu-threads", str(args.cpu_threads), *flags], env,
                         args.pydeps) for _, env, flags in CONFIGS]
    requests = common.traffic(kind, 2000, seed=7)
    totals = [{"ok": 0, "other": 0, "wall": 0.0, "latencies": [], "before": None, "after": None} for _ in CONFIGS]
    try:
        for host in hosts:  # warm-up, a fixed count
            common.run_load(lambda r, h=host: h.port, requests[-args.warmup:], 2, 600, count=args.warmup)
        for t, host in zip(totals, hosts):
            t["before"] = host.metrics()
        for round_ in range(args.rounds):
            for t, host in zip(totals, hosts):
                offset = round_ * len(requests) // args.rounds
                result, wall = common.run_load(lambda r, h=host: h.port, requests[offset:] + requests[:offset],
                                               args.clients, args.seconds / args.rounds)
                t["ok"] += result.codes.get(200, 0)
                t["other"] += sum(n for c, n in result.codes.items() if c != 200)
                t["wall"] += wall
                t["latencies"] += result.latencies
        for t, host in zip(totals, hosts):
            t["after"] = host.metrics()
    finally:
        for host in hosts:
            host.stop()
    rows = []
    for (name, _, _), t in zip(CONFIGS, totals):
        d = lambda k: t["after"].get(k, 0.0) - t["before"].get(k, 0.0)  # noqa: E731
        computed, lookups = d("te_radix_mlp_computed_tokens"), d("te_radix_mlp_cache_lookup_tokens")
        rows.append({
            "config": name, "ok": t["ok"], "other": t["other"], "rps": t["ok"] / t["wall"],
            "p50": common.percentile(t["latencies"], 50) * 1e3, "p99": common.percentile(t["latencies"], 99) * 1e3,
            "n_over_computed": d("te_batch_next_tokens_sum") / computed if computed else float("nan"),
            "hit": d("te_radix_mlp_cache_hit_tokens") / lookups if lookups else 0.0,
            "batch": d("te_batch_next_size_sum") / max(1.0, d("te_batch_next_size_count")),
            "tokens": d("te_batch_next_tokens_sum") / max(1.0, d("te_batch_next_tokens_count")),
        })
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--pydeps", required=True)
    parser.add_argument("--seconds", type=float, default=40)
    parser.add_argument("--warmup", type=int, default=8)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--cpu-threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--traffic", nargs="+", default=list(common.TRAFFICS), choices=common.TRAFFICS)
    args = parser.parse_args()
    print("| traffic | configuration | requests | req/s | vs off | p50 ms | p99 ms | N/computed | cache hit | seqs/batch "
          "| tokens/batch |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for kind in args.traffic:
        rows = measure(args, kind)
        base = rows[0]["rps"]
        for r in rows:
            print("| %s | %s | %d%s | %.2f | %.2fx | %.0f | %.0f | %.2f | %.1f%% | %.1f | %.0f |" % (
                kind, r["config"], r["ok"], " (+%d not 200)" % r["other"] if r["other"] else "", r["rps"], r["rps"] / base,
                r["p50"], r["p99"], r["n_over_computed"], 100 * r["hit"], r["batch"], r["tokens"]), flush=True)


if __name__ == "__main__":
    main()
