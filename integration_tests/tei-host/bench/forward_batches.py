#!/usr/bin/env python3
"""forward_batches.py: the batches of load.py's traffic as token ids, for `radixmlp bench --batches`,
so that the server's requests/s ratio can be set against the CPU forward's speedup on the same
traffic (docs/bench/tei-host.md). It builds the requests load.py sends (common.traffic, the same
seed), tokenizes them as tei-host does (the `tokenizers` package on the model's tokenizer.json,
special tokens added; a rerank call's prompts are the host's --rerank-template around the query and
each passage), and writes batches of K consecutive calls (a FIFO batcher under a closed loop of
clients batches the calls that are queued: K = load.py's seqs/batch over the sequences a call
holds) as JSON lines {"case", "input_ids", "cu_seqlens"}.

Usage: forward_batches.py --model DIR --pydeps DIR --out FILE [--traffic rerank32 ...] [--calls 1 2]
[--batches 2]   (then: radixmlp bench --model DIR --batches FILE --repeat 2 --json)"""
import argparse
import json
import os
import sys

import common


def call_texts(path, body):
    """The strings tei-host tokenizes for one call (src/validate.rs)."""
    if path == "/rerank":
        return [common.TEMPLATE.replace("{query}", body["query"]).replace("{text}", t) for t in body["texts"]]
    return list(body["inputs"])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--pydeps", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--traffic", nargs="+", default=list(common.TRAFFICS), choices=common.TRAFFICS)
    parser.add_argument("--calls", type=int, nargs="+", default=[1, 2], help="calls per batch (K)")
    parser.add_argument("--batches", type=int, default=2, help="batches per traffic and K")
    parser.add_argument("--seed", type=int, default=7, help="load.py's seed")
    args = parser.parse_args()
    sys.path.insert(0, args.pydeps)
    from tokenizers import Tokenizer
    tokenizer = Tokenizer.from_file(os.path.join(args.model, "tokenizer.json"))
    with open(args.out, "w") as out:
        for kind in args.traffic:
            calls = common.traffic(kind, 2000, seed=args.seed)
            for k in args.calls:
                for b in range(args.batches):
                    strings = [s for path, body, _ in calls[b * k:(b + 1) * k] for s in call_texts(path, body)]
                    ids = [e.ids for e in tokenizer.encode_batch(strings, add_special_tokens=True)]
                    cu = [0]
                    for seq in ids:
                        cu.append(cu[-1] + len(seq))
                    case = "%s_k%d_b%d" % (kind, k, b)
                    out.write(json.dumps({"case": case, "input_ids": [t for seq in ids for t in seq],
                                          "cu_seqlens": cu}) + "\n")
                    print("%s: %d sequences, %d tokens" % (case, len(ids), cu[-1]), file=sys.stderr)


if __name__ == "__main__":
    main()
