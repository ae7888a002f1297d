#!/usr/bin/env python3
"""soak.py: tei-host on the real model under a steady mixed load (rerank, embedding and no-sharing
calls, with the prefix cache and prefix batching) for --minutes (default 10), its resident memory
sampled every --every seconds. After the warm-up (the first fifth of the run: caches and buffers
reach their size) the RSS must stay within --max-growth-mb (default 50) of its level then, and every
request must be answered 200. Prints the samples and a verdict; exit status 1 on failure.

Usage: soak.py --host BIN --model DIR --pydeps DIR [--minutes 10] [--clients 4]"""
import argparse
import sys
import threading
import time

import common


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for flag in ("--host", "--model", "--pydeps"):
        parser.add_argument(flag, required=True)
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--every", type=float, default=10)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--max-growth-mb", type=float, default=50)
    args = parser.parse_args()
    host = common.Host(args.host, args.model, ["--cpu-threads", "2", "--cache-mb", "128"],
                       {"RADIX_MLP_THRESHOLD": "1", "RADIX_MLP_BATCHER": "prefix"}, args.pydeps)
    trace = [r for kind in ("rerank", "embed", "no_sharing") for r in common.traffic(kind, 300, seed=3)]
    trace = [trace[i * 7 % len(trace)] for i in range(len(trace))]  # interleaved kinds
    samples, seconds = [], args.minutes * 60
    stop = threading.Event()

    def sample():
        start = time.time()
        while not stop.is_set():
            samples.append((time.time() - start, host.rss_mb()))
            print("  t=%5.0f s  RSS %.1f MB" % samples[-1], flush=True)
            stop.wait(args.every)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        result, wall = common.run_load(lambda r: host.port, trace, args.clients, seconds)
    finally:
        stop.set()
        sampler.join()
        host.stop()
    warm = [rss for t, rss in samples if t >= seconds / 5]
    base, peak, last = warm[0], max(warm), warm[-1]
    ok = result.codes.get(200, 0)
    print("soak: %.1f min, %d requests answered (%.2f/s), codes %s; RSS after warm-up %.1f MB, peak %.1f, "
          "last %.1f (growth %.1f MB, limit %.0f)" % (wall / 60, ok, ok / wall, result.codes, base, peak, last,
                                                     peak - base, args.max_growth_mb))
    if set(result.codes) != {200} or peak - base > args.max_growth_mb:
        print("soak: FAILED")
        return 1
    print("soak: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
