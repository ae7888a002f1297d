#!/usr/bin/env python3
"""compare_generate.py: greedy generation on a converted SmolLM2-135M-Instruct against the
committed transformers reference (generate_reference.json, make_generate_reference.py): every
reference prompt in one batch (they share the chat template's system turn, two the user turn's
start too, and two plain texts share nothing), 16 new tokens, EOS as transformers used it.

Checked, each giving transformers' ids exactly (the reference keeps only prompts whose smallest
top-2 logit gap is above 1e-3, far above fp32 rounding):
- `radixmlp generate` with shared-prefix attention on, and off (--no-shared-prefix);
- the Python bindings' radix_mlp.generate (bindings/python, the library of RADIXMLP's folder),
  where numpy is importable (else it says it skipped).
The converted folder must come from the GGUF file the reference was made from.

Usage: compare_generate.py RADIXMLP MODEL_DIR [--reference FILE]   (standard library; numpy optional)
Exit status 0 when everything agrees, 1 otherwise (each disagreement is printed).
"""
import json
import os
import subprocess
import sys
import tempfile

from compare import read_arguments  # this folder's compare.py: the arguments and the GGUF check

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.abspath(os.path.join(here, "..", ".."))

# name, `radixmlp generate` flags
MODES = [("shared-prefix attention", []), ("per-sequence attention", ["--no-shared-prefix"])]


def run_cli(radixmlp, model, reference, flags):
    """The generated ids of every prompt, in order, from one `radixmlp generate` batch."""
    prompts = reference["prompts"]
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = os.path.join(tmp, "in.jsonl"), os.path.join(tmp, "out.jsonl")
        with open(src, "w") as f:
            f.writelines(json.dumps({"input_ids": p["input_ids"]}) + "\n" for p in prompts)
        cmd = [radixmlp, "generate", "--model", model, "--input", src, "--output", dst,
               "--max-new-tokens", str(reference["max_new_tokens"]),
               "--eos", ",".join(map(str, reference["eos_token_id"])), *flags]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit("compare_generate: %s failed (exit %d):\n%s" % (" ".join(cmd), done.returncode,
                                                                             done.stderr))
        with open(dst) as f:
            lines = [json.loads(line) for line in f]
    print("compare_generate: %s" % done.stderr.strip().splitlines()[-1])
    return [line["generated_ids"] for line in sorted(lines, key=lambda line: line["index"])]


def run_python(radixmlp, model, reference):
    """The same through radix_mlp.generate, or None where numpy is missing."""
    try:
        import numpy  # noqa: F401
    except ImportError:
        return None
    os.environ["RADIX_MLP_LIB_DIR"] = os.path.dirname(os.path.abspath(radixmlp))
    sys.path.insert(0, os.path.join(root, "bindings", "python"))
    import radix_mlp

    with radix_mlp.Model.load(model) as m:
        return radix_mlp.generate(m, [p["input_ids"] for p in reference["prompts"]],
                                  max_new_tokens=reference["max_new_tokens"], eos=reference["eos_token_id"])


def compare(what, got, reference):
    """Prints each prompt that disagrees; returns their number."""
    bad = 0
    for s, (ids, p) in enumerate(zip(got, reference["prompts"])):
        want = p["generated_ids"]
        if ids != want:
            bad += 1
            first = next((i for i, (a, b) in enumerate(zip(ids, want)) if a != b), min(len(ids), len(want)))
            print("compare_generate: FAIL %s: prompt %d differs from transformers at new token %d:\n  got  %s\n  want %s"
                  % (what, s, first, ids, want))
    if len(got) != len(reference["prompts"]):
        bad += 1
        print("compare_generate: FAIL %s: %d outputs for %d prompts" % (what, len(got), len(reference["prompts"])))
    n_tokens = sum(len(p["generated_ids"]) for p in reference["prompts"])
    print("compare_generate: %-4s %-24s %d prompts, %d tokens" % ("ok" if not bad else "FAIL", what, len(got),
                                                                   n_tokens))
    return bad


def main():
    args, reference = read_arguments(__doc__, "generate_reference.json")
    failures = 0
    for mode, flags in MODES:
        failures += compare("radixmlp generate, " + mode, run_cli(args.radixmlp, args.model, reference, flags),
                            reference)
    got = run_python(args.radixmlp, args.model, reference)
    if got is None:
        print("compare_generate: Python bindings SKIPPED: numpy is not importable")
    else:
        failures += compare("radix_mlp.generate", got, reference)
    if failures:
        print("compare_generate: %d disagreements with transformers' greedy ids" % failures)
        return 1
    print("compare_generate: greedy ids equal transformers' (%s)" % reference["source"]["transformers"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
