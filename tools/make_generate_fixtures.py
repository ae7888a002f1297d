#!/usr/bin/env python3
"""Expected greedy generations for the transformers fixtures (generate.json per causal-LM fixture).

For every fixture of integration_tests/fixtures that has an LM head (a causal LM: lm_head.weight,
or embeddings tied), loads the saved checkpoint with transformers (fp32, eager attention) and runs
`model.generate(do_sample=False, max_new_tokens=N)` on prompts taken from the fixture's batch.json
(its sequences 0, 1, 3, 4, 5: s0/s1/s3 share a 22-token prefix, s3 is a strict prefix of s1, s4
shares the 14-token template, s5 shares nothing; plus s0 again, an identical prompt), one prompt at
a time (batch 1, no padding), and writes

    generate.json: {"max_new_tokens": N, "eos_token_id": [...] or [], "prompts": [[...], ...],
                    "generated": [[...], ...],   # the new ids, stopping at (and including) an EOS
                    "min_top2_gap": g}           # the smallest top-1 minus top-2 logit met (ties)

It writes no other file: the fixtures' tensors stay as tools/make_fixtures.py made them.

    python tools/make_generate_fixtures.py --fixtures integration_tests/fixtures [--max-new-tokens 8]
"""

import argparse
import json
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM

PROMPT_SEQS = [0, 1, 3, 4, 5, 0]


def has_lm_head(d: Path) -> bool:
    cfg = json.loads((d / "config.json").read_text())
    return any(a.endswith("ForCausalLM") for a in cfg.get("architectures", []))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fixtures", default="integration_tests/fixtures")
    ap.add_argument("--max-new-tokens", type=int, default=8)
    a = ap.parse_args()
    torch.manual_seed(0)
    for d in sorted(Path(a.fixtures).iterdir()):
        if not (d / "batch.json").exists() or not has_lm_head(d):
            continue
        model = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32, attn_implementation="eager").eval()
        batch = json.loads((d / "batch.json").read_text())
        eos = model.generation_config.eos_token_id
        eos = [] if eos is None else ([eos] if isinstance(eos, int) else list(eos))
        prompts, generated, gap = [], [], float("inf")
        for s in PROMPT_SEQS:
            ids = batch["input_ids"][s]
            with torch.no_grad():
                out = model.generate(torch.tensor([ids]), do_sample=False, max_new_tokens=a.max_new_tokens,
                                     output_logits=True, return_dict_in_generate=True, pad_token_id=0)
            new = out.sequences[0, len(ids):].tolist()
            for logits in out.logits:
                top = torch.topk(logits[0].float(), 2).values
                gap = min(gap, float(top[0] - top[1]))
            prompts.append(ids)
            generated.append(new)
        doc = {"max_new_tokens": a.max_new_tokens, "eos_token_id": eos, "prompts": prompts, "generated": generated,
               "min_top2_gap": gap}
        (d / "generate.json").write_text(json.dumps(doc) + "\n")
        print(f"{d.name}: {[len(g) for g in generated]} new tokens, smallest top-2 gap {gap:.2e}")


if __name__ == "__main__":
    main()
