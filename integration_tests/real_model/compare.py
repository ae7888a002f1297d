#!/usr/bin/env python3
"""compare.py: `radixmlp run` on a converted SmolLM2-135M-Instruct (tools/gguf_to_hf.py) against
the committed transformers reference (reference.json, make_reference.py), in every run mode.

For each mode of MODES (radix off, radix on, radix on with attention in compact space; a new
`radixmlp run` setting is one more row) and each
case of the reference (a kind of output of CHECKS: hidden states, pooled vectors, reranker
scores), the case's token ids go through `radixmlp run` as one batch and its output is compared:
- hidden states after the final norm: relative L2 error per row at most 1e-5 (30 layers of fp32
  rounding reach about 1e-4 absolute where |h| is near 50);
- pooled vectors (L2-normalised) and reranker scores: at most 1e-4 absolute; the two logits
  behind each score at most 1e-4 relative to their size.
With radix on, each batch must really have been compacted (N' < N in radixmlp's summary).

The ids are the reference's (transformers' tokenizer on the GGUF), so the numbers do not depend on
this project's tokenizer; that is checked apart: where the `tokenizers` package is importable,
the converted folder's tokenizer.json must give the same ids for every text (else it says it
skipped). The converted folder must come from the GGUF file the reference was made from
(converted_from.json's sha256).

Usage: compare.py RADIXMLP MODEL_DIR [--reference FILE]   (standard library; tokenizers optional)
Exit status 0 when everything agrees, 1 otherwise (each disagreement is printed).
"""
import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))

HIDDEN_REL_L2 = 1e-5
POOLED_ABS = 1e-4
SCORE_ABS = 1e-4
LOGIT_REL = 1e-4

# name, `radixmlp run` flags, whether the plan must compact the batch
MODES = [
    ("radix off", ["--no-radix"], False),
    ("radix on", ["--threshold", "1"], True),
    ("compact", ["--threshold", "1", "--attention", "compact"], True),
]


def run_flags(case):
    """The `radixmlp run` flags that make it output what the case holds."""
    if case["kind"] == "hidden":
        return ["--pooling", "none"]
    if case["kind"] == "pooled":
        return ["--pooling", case["pooling"]] + (["--normalize"] if case["normalize"] else [])
    if case["kind"] == "score":
        return ["--score-tokens", "%d,%d" % tuple(case["score_tokens"])]
    raise SystemExit("compare: case %s has kind %r, which this script cannot check" % (case["name"], case["kind"]))


def rel_l2(got, want):
    num = math.fsum((a - b) ** 2 for a, b in zip(got, want))
    den = math.fsum(b * b for b in want)
    if len(got) != len(want) or any(math.isnan(a) for a in got):
        return math.inf
    return math.sqrt(num / den) if den > 0 else math.sqrt(num)


def max_abs(got, want):
    if len(got) != len(want):
        return math.inf
    return max((abs(a - b) if not math.isnan(a) else math.inf for a, b in zip(got, want)), default=0.0)


def check_hidden(case, lines):
    """[(what, error, limit)] for each reference row."""
    out = []
    for s, (rows, want) in enumerate(zip(case["rows"], case["hidden"])):
        got = lines[s]["hidden_states"]
        if len(got) != len(case["input_ids"][s]):
            return [("sequence %d: %d rows for %d tokens" % (s, len(got), len(case["input_ids"][s])), math.inf, 0)]
        out += [("seq %d row %d rel L2" % (s, r), rel_l2(got[r], w), HIDDEN_REL_L2) for r, w in zip(rows, want)]
    return out


def check_pooled(case, lines):
    return [("seq %d max abs" % s, max_abs(lines[s]["embedding"], want), POOLED_ABS)
            for s, want in enumerate(case["vectors"])]


def check_score(case, lines):
    out = []
    for s, (score, logits) in enumerate(zip(case["scores"], case["logits"])):
        out.append(("seq %d score abs" % s, abs(lines[s]["score"] - score), SCORE_ABS))
        scale = max(1.0, max(abs(x) for x in logits))
        out.append(("seq %d logits rel" % s, max_abs(lines[s]["logits"], logits) / scale, LOGIT_REL))
    return out


CHECKS = {"hidden": check_hidden, "pooled": check_pooled, "score": check_score}

SUMMARY = re.compile(r"N=(\d+) N'=(\d+) ratio=\S+ gate=(\w+)")


def run(radixmlp, model, case, flags):
    """Runs the case's ids as one batch; returns (output lines in order, (N, N', gate))."""
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = os.path.join(tmp, "in.jsonl"), os.path.join(tmp, "out.jsonl")
        with open(src, "w") as f:
            f.writelines(json.dumps({"input_ids": ids}) + "\n" for ids in case["input_ids"])
        cmd = [radixmlp, "run", "--model", model, "--input", src, "--output", dst, *run_flags(case), *flags]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit("compare: %s failed (exit %d):\n%s" % (" ".join(cmd), done.returncode, done.stderr))
        with open(dst) as f:
            lines = [json.loads(line) for line in f]
    summary = SUMMARY.search(done.stderr)
    if summary is None or len(lines) != len(case["input_ids"]):
        raise SystemExit("compare: unexpected output of %s:\n%s" % (" ".join(cmd), done.stderr))
    return lines, (int(summary.group(1)), int(summary.group(2)), summary.group(3))


def check_tokenizer(model, cases):
    """Our tokenizer.json against the reference's ids; returns the number of disagreements."""
    try:
        from tokenizers import Tokenizer
    except ImportError:
        print("compare: tokenizer check SKIPPED: the tokenizers package is not installed")
        return 0
    tokenizer = Tokenizer.from_file(os.path.join(model, "tokenizer.json"))
    bad = 0
    for case in cases:
        for s, (text, want) in enumerate(zip(case["texts"], case["input_ids"])):
            got = tokenizer.encode(text, add_special_tokens=False).ids
            if got != want:
                bad += 1
                first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
                print("compare: FAIL tokenizer: %s text %d: ids differ from transformers' at token %d (%d vs %d ids)"
                      % (case["name"], s, first, len(got), len(want)))
    n_texts = sum(len(c["texts"]) for c in cases)
    print("compare: tokenizer.json gives transformers' ids for %d of %d texts" % (n_texts - bad, n_texts))
    return bad


def read_arguments(doc, default_reference):
    """(args, reference): RADIXMLP MODEL_DIR [--reference FILE] parsed, the reference read, and the
    converted folder checked to come from the GGUF file the reference was made from."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("radixmlp")
    parser.add_argument("model")
    parser.add_argument("--reference", default=os.path.join(here, default_reference))
    args = parser.parse_args()
    with open(args.reference) as f:
        reference = json.load(f)
    with open(os.path.join(args.model, "converted_from.json")) as f:
        converted = json.load(f)
    if converted["gguf_sha256"] != reference["source"]["gguf_sha256"]:
        raise SystemExit("%s: %s was converted from a GGUF with sha256 %s, the reference %s from %s (%s)"
                         % (parser.prog, args.model, converted["gguf_sha256"], args.reference,
                            reference["source"]["gguf_sha256"], reference["source"]["package"]))
    return args, reference


def main():
    args, reference = read_arguments(__doc__, "reference.json")
    failures = check_tokenizer(args.model, reference["cases"])
    for mode, flags, must_compact in MODES:
        for case in reference["cases"]:
            lines, (n, n_compact, gate) = run(args.radixmlp, args.model, case, flags)
            results = CHECKS[case["kind"]](case, lines)
            worst = max(results, key=lambda r: r[1] / r[2] if r[2] else math.inf)
            bad = [r for r in results if not r[1] <= r[2]]
            if must_compact and not (gate == "radix" and n_compact < n):
                bad.append(("the plan did not compact the batch (gate=%s, N'=%d, N=%d)" % (gate, n_compact, n),
                            math.inf, 0))
            failures += len(bad)
            print("compare: %-4s %-9s %-12s N=%-4d N'=%-4d %2d checks, worst %s = %.3g (limit %g)" % (
                "ok" if not bad else "FAIL", mode, case["name"], n, n_compact, len(results), worst[0], worst[1],
                worst[2]))
            for what, error, limit in bad:
                print("compare:   FAIL %s %s: %s = %.3g > %g" % (mode, case["name"], what, error, limit))
    if failures:
        print("compare: %d disagreements with the transformers reference" % failures)
        return 1
    print("compare: radixmlp run agrees with transformers (%s) in %d modes" % (reference["source"]["transformers"],
                                                                            len(MODES)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
