#!/usr/bin/env python3
"""real_model_demo.py: text in, results out, on a real checkpoint (SmolLM2-135M-Instruct converted by
tools/gguf_to_hf.py) through the Python bindings, with radix off and on in one run.

  rerank: a query against 64 passages (tools/real_model_texts.py), each in a yes/no prompt; prints
          the ranking with each passage's score p("yes" vs "no"), N and N', the forward time with
          radix off, radix on, and radix on with attention in compact space, and how far apart the
          three runs' scores are.
  embed:  documents behind an instruction prefix, mean-pooled and L2-normalised: prints the first
          values of each vector and the cosine similarities between the six example documents, with
          the same timings (the batch also holds the 64 passages, so it is worth timing).

Usage: real_model_demo.py [rerank|embed|all] [--model DIR] [--repeat R] [--dump-batches FILE]
  --model DIR: the converted folder (default build/real_model/smollm2, where
               integration_tests/real_model/run.sh converts it); its tokenizer.json tokenizes.
  --repeat R:  time each forward R times and keep the fastest (default 1).
  --dump-batches FILE: write the batches as JSON lines for `radixmlp bench --batches FILE`.
Needs numpy, the `tokenizers` package, and libradix_mlp: RADIX_MLP_LIB_DIR, else the repository's
build/ folder.
"""
import argparse
import json
import os
import sys
import time

import numpy as np

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(root, "tools"))
sys.path.insert(0, os.path.join(root, "bindings", "python"))
os.environ.setdefault("RADIX_MLP_LIB_DIR", os.path.join(root, "build"))
import real_model_texts as texts  # noqa: E402
import radix_mlp  # noqa: E402

# name, plan threshold (0: the identity plan), context attention space
RUNS = [("radix off", 0.0, "full"), ("radix on", 1.0, "full"), ("radix on, compact attention", 1.0, "compact")]


def batch_of(sequences):
    """input_ids, position_ids, cu_seqlens (uint32) of sequences placed back to back."""
    lengths = [len(s) for s in sequences]
    ids = np.concatenate([np.asarray(s, dtype=np.uint32) for s in sequences])
    pos = np.concatenate([np.arange(n, dtype=np.uint32) for n in lengths])
    cu = np.concatenate([[0], np.cumsum(lengths)]).astype(np.uint32)
    return ids, pos, cu


def run_all(model, sequences, read_out, repeat):
    """Plans and runs the batch once per row of RUNS; returns [(name, plan, best ms, output)], where
    output is read_out(context, plan, hidden)."""
    ids, pos, cu = batch_of(sequences)
    planner, results = radix_mlp.Planner(), []
    for name, threshold, attention in RUNS:
        plan = planner.build(ids, pos, cu, threshold=threshold)
        with model.context(plan.n_tokens, attention=attention) as ctx:
            best = None
            for _ in range(repeat):
                start = time.perf_counter()
                hidden = ctx.forward(plan)
                ms = (time.perf_counter() - start) * 1e3
                best = ms if best is None else min(best, ms)
            results.append((name, plan, best, read_out(ctx, plan, hidden)))
    return results


def print_runs(results):
    off_ms = results[0][2]
    for name, plan, ms, out in results:
        diff = float(np.max(np.abs(out - results[0][3])))
        print("  %-28s N=%-5d N'=%-5d N'/N=%.3f  forward %8.1f ms  %5.2fx  max|diff vs off| %.2g" % (
            name, plan.n_tokens, plan.n_compact, plan.n_compact / plan.n_tokens, ms, off_ms / ms, diff))


def rerank(model, tokenizer, repeat, dump):
    prompts = [texts.rerank_prompt(texts.RERANK_QUERY, p) for p in texts.RERANK_PASSAGES]
    sequences = [tokenizer.encode(p, add_special_tokens=False).ids for p in prompts]
    yes, no = (tokenizer.token_to_id(t) for t in texts.RERANK_TOKENS)
    print("rerank: %r against %d passages (prompt: tools/real_model_texts.py; score p(%r) vs p(%r))"
          % (texts.RERANK_QUERY, len(sequences), *texts.RERANK_TOKENS))
    results = run_all(model, sequences, lambda ctx, plan, h: ctx.score_pair(h, plan.cu_seqlens, yes, no)[1], repeat)
    scores = results[0][3]
    order = np.argsort(-scores, kind="stable")
    for rank, i in enumerate(order[:10]):
        mark = "*" if i in texts.RERANK_RELEVANT else " "
        print("  %2d. %.4f %s %s" % (rank + 1, scores[i], mark, texts.RERANK_PASSAGES[i]))
    places = sorted(int(np.where(order == i)[0][0]) + 1 for i in texts.RERANK_RELEVANT)
    print("  (* answers the query; the %d that do rank %s of %d)" % (len(places), places, len(order)))
    print_runs(results)
    dump("smollm2_rerank_64", sequences)


def embed(model, tokenizer, repeat, dump):
    documents = texts.EMBED_DOCUMENTS + texts.RERANK_PASSAGES
    sequences = [tokenizer.encode(texts.embed_text(d), add_special_tokens=False).ids for d in documents]
    print("embed: %d documents behind %r, mean pooling, L2-normalised" % (len(documents), texts.EMBED_INSTRUCTION))
    results = run_all(model, sequences, lambda ctx, plan, h: ctx.pool(h, plan.cu_seqlens, "mean", True), repeat)
    vectors = results[0][3]
    shown = len(texts.EMBED_DOCUMENTS)
    for i in range(shown):
        print("  v%d = [%s, ...] (%d values)  %s" % (i, ", ".join("%+.4f" % x for x in vectors[i, :4]),
                                                     vectors.shape[1], texts.EMBED_DOCUMENTS[i]))
    cosine = vectors[:shown] @ vectors[:shown].T
    print("  cosine similarity:" + "".join("%8s" % ("v%d" % j) for j in range(shown)))
    for i in range(shown):
        print("  %18s" % ("v%d" % i) + "".join("%8.4f" % cosine[i, j] for j in range(shown)))
    print_runs(results)
    dump("smollm2_embed_%d" % len(documents), sequences)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("demo", nargs="?", choices=("rerank", "embed", "all"), default="all")
    parser.add_argument("--model", default=os.path.join(root, "build", "real_model", "smollm2"))
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--dump-batches", metavar="FILE")
    args = parser.parse_args()
    try:
        from tokenizers import Tokenizer
    except ImportError:
        sys.exit("real_model_demo: needs the tokenizers package (pip install tokenizers, or "
                 "PYTHONPATH=build/real_model/pydeps after integration_tests/real_model/run.sh build)")
    if not os.path.isfile(os.path.join(args.model, "tokenizer.json")):
        sys.exit("real_model_demo: %s holds no converted model: run integration_tests/real_model/run.sh build, "
                 "or tools/gguf_to_hf.py --out DIR" % args.model)
    tokenizer = Tokenizer.from_file(os.path.join(args.model, "tokenizer.json"))
    model = radix_mlp.Model.load(args.model)
    print("model: %s (%s, %d layers, hidden %d), %d CPU threads" % (
        args.model, model.config.architecture, model.config.num_hidden_layers, model.config.hidden_size,
        radix_mlp.cpu_threads()))
    out = open(args.dump_batches, "w") if args.dump_batches else None

    def dump(name, sequences):
        if out:
            ids, _, cu = batch_of(sequences)
            out.write(json.dumps({"case": name, "input_ids": ids.tolist(), "cu_seqlens": cu.tolist()}) + "\n")

    for name, demo in (("rerank", rerank), ("embed", embed)):
        if args.demo in (name, "all"):
            demo(model, tokenizer, args.repeat, dump)
    if out:
        out.close()
        print("batches written to %s (radixmlp bench --model %s --batches %s)" % (args.dump_batches, args.model,
                                                                                  args.dump_batches))


if __name__ == "__main__":
    main()
