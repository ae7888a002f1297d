#!/usr/bin/env python3
"""fairness.py: how long a small request waits behind a maximal one (issue 49). tei-host on the real
model with batches of --batch-tokens tokens; the maximal request is the largest the host accepts by
default, --max-client-batch-tokens (4 batches' worth) in sequences of half a batch, as token ids.
Measures, in one run: the maximal request alone (its time and its batches' mean time), a small
request of 16 ids alone (--trials times), and the small request sent while the maximal one runs
(right after its first batch started, --trials times): its latency, also in mean batch times. The host takes the jobs' sequences into the batcher in turns (src/fairness.rs), so the
small one should be answered within two batches' time; behind a plain queue it would wait for the
whole maximal request. Prints a markdown table; bounded in time by the trials.

Usage: fairness.py --host BIN --model DIR --pydeps DIR [--batch-tokens 4096] [--trials 5]"""
import http.client
import json
import random
import sys
import threading
import time

import common


def post(port, body):
    start = time.time()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.request("POST", "/embed", body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    r.read()
    c.close()
    return r.status, time.time() - start


def batches(port):
    m = common.read_metrics(port)
    return m.get("te_batch_inference_count", 0), m.get("te_batch_inference_duration_sum", 0)


def main():
    parser = common.arguments(__doc__)
    parser.add_argument("--batch-tokens", type=int, default=4096)
    parser.add_argument("--trials", type=int, default=5)
    args = parser.parse_args()
    b = args.batch_tokens
    host = common.Host(args.host, args.model, ["--cpu-threads", "2", "--max-batch-tokens", str(b),
                                               "--max-input-length", str(b // 2)], pydeps=args.pydeps)
    rng = random.Random(7)
    n_seqs = 4 * b // (b // 2)  # the default --max-client-batch-tokens: 4 batches
    big = {"inputs": [[rng.randrange(100, 40000) for _ in range(b // 2)] for _ in range(n_seqs)]}
    small = lambda i: {"inputs": [[rng.randrange(100, 40000) for _ in range(16)]]}  # noqa: E731
    rows = []

    def row(*cells):
        rows.append(cells)
        print("  " + " | ".join(cells), file=sys.stderr, flush=True)

    try:
        post(host.port, small(0))  # warm-up
        n0, t0 = batches(host.port)
        code, big_alone = post(host.port, big)
        n1, t1 = batches(host.port)
        assert code == 200, code
        batch = (t1 - t0) / (n1 - n0)
        row("maximal request alone (%d x %d ids, %d batches)" % (n_seqs, b // 2, n1 - n0),
            "%.0f" % (big_alone * 1e3), "%.2f" % (big_alone / batch))
        alone = [post(host.port, small(i))[1] for i in range(args.trials)]
        p50 = common.percentile(alone, 50)
        row("small request alone (16 ids), p50 of %d" % args.trials, "%.0f" % (p50 * 1e3), "%.2f" % (p50 / batch))
        for trial in range(args.trials):
            done = {}
            runner = threading.Thread(target=lambda: done.update(big=post(host.port, big)))
            before, _ = batches(host.port)
            runner.start()
            while batches(host.port)[0] < before + 1:
                time.sleep(0.005)
            code, waited = post(host.port, small(trial))
            runner.join()
            assert code == 200 and done["big"][0] == 200
            row("small request behind it, trial %d" % (trial + 1), "%.0f" % (waited * 1e3), "%.2f" % (waited / batch))
    finally:
        host.stop()
    print("mean batch time %.0f ms (--max-batch-tokens %d)\n" % (batch * 1e3, b))
    print("| request | latency ms | in mean batch times |")
    print("| --- | --- | --- |")
    for r in rows:
        print("| %s |" % " | ".join(r))


if __name__ == "__main__":
    main()
