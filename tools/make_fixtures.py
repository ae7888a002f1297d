#!/usr/bin/env python3
"""Hugging Face transformers reference fixtures for radix-mlp.

Builds tiny random-weight Llama-family and Gemma decoders with transformers itself (plain ones, and one
per architecture with every bias flag of config.json on), saves them as safetensors
checkpoints, and records what transformers computes for a batch with shared prefixes, so the
library's tests can compare against it without torch:

    python tools/make_fixtures.py --out integration_tests/fixtures [--only NAME ...]

--only regenerates the named fixtures and keeps the others (and their rows of the README's
table of checks) as they are.

Needs torch, transformers, safetensors and numpy (see integration_tests/fixtures/README.md
for the versions used). Deterministic: fixed seeds, CPU, fp32, eager attention. Every
reference is computed from the checkpoint as saved and loaded back (so the bf16 model's
outputs are those of its bf16-rounded weights, upcast to fp32), one sequence at a time
(batch 1, no padding). Before writing, the script asserts that a padded batch gives the
same rows to identical sequences, that a prefix's rows equal the first rows of the longer
sequence, and that an independent NumPy forward pass reproduces every model.
"""

import argparse
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import safetensors
import safetensors.numpy
import safetensors.torch
import torch
import transformers
from transformers import (AutoModel, AutoModelForCausalLM, Gemma2Config, Gemma3TextConfig, GemmaConfig, LlamaConfig,
                          MistralConfig, Qwen2Config, Qwen3Config)

from fixture_reference import numpy_forward, numpy_weights

VOCAB = 1000
TOLERANCE = 1e-4
COMMON = dict(vocab_size=VOCAB, max_position_embeddings=512, rms_norm_eps=1e-6)

# name -> how to build it. "causal_lm": with lm_head; "dtype": as saved; "shard": max_shard_size;
# "hub_config": config.json rewritten in the older hub form (default: for base models);
# "layer_types": False drops layer_types from config.json (transformers then derives it).
SPECS = {
    "qwen3_tiny": dict(
        config=Qwen3Config, seed=1, causal_lm=True, dtype=torch.float32, shard=None,
        kw=dict(hidden_size=64, intermediate_size=160, num_hidden_layers=3, num_attention_heads=4,
                num_key_value_heads=2, head_dim=32, rope_theta=1e6, tie_word_embeddings=False),
        about="Qwen3, fp32, 3 layers, untied lm_head, head_dim 32 != hidden/heads (16)"),
    "qwen3_bf16": dict(
        config=Qwen3Config, seed=2, causal_lm=True, dtype=torch.bfloat16, shard=None,
        kw=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, head_dim=16, rope_theta=1e6, tie_word_embeddings=True),
        about="Qwen3 saved in bf16, tied embeddings (no lm_head.weight in the file); references "
              "are fp32 runs of the bf16-rounded weights"),
    "qwen2_sharded": dict(
        config=Qwen2Config, seed=3, causal_lm=True, dtype=torch.float32, shard="400KB",
        kw=dict(hidden_size=64, intermediate_size=192, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, rope_theta=1e6, tie_word_embeddings=False),
        about="Qwen2 (q/k/v bias, no q/k norm), fp32, saved in 3 shards with "
              "model.safetensors.index.json"),
    "llama_tiny": dict(
        config=LlamaConfig, seed=4, causal_lm=True, dtype=torch.float32, shard=None,
        kw=dict(hidden_size=96, intermediate_size=224, num_hidden_layers=2, num_attention_heads=6,
                num_key_value_heads=2, rope_theta=1e4, tie_word_embeddings=False),
        about="Llama, fp32, no attention bias, no q/k norm, rope_theta 1e4"),
    "qwen3_embedding_noprefix": dict(
        config=Qwen3Config, seed=5, causal_lm=False, dtype=torch.float32, shard=None,
        kw=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=8,
                num_key_value_heads=2, head_dim=16, rope_theta=1e6, tie_word_embeddings=False),
        about="Qwen3 base model (Qwen3Model) like Qwen3-Embedding: tensor names without `model.`, "
              "no lm_head; config.json in the older hub form (top-level rope_theta, torch_dtype)"),
    "llama_bias": dict(
        config=LlamaConfig, seed=6, causal_lm=True, dtype=torch.float32, shard=None,
        kw=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, rope_theta=1e4, tie_word_embeddings=True, attention_bias=True,
                mlp_bias=True),
        biases=["mlp.down_proj", "mlp.gate_proj", "mlp.up_proj", "self_attn.k_proj", "self_attn.o_proj",
                "self_attn.q_proj", "self_attn.v_proj"],
        about="Llama with attention_bias and mlp_bias: biases on q, k, v, o_proj, gate, up and down; "
              "tied embeddings"),
    "qwen3_bias": dict(
        config=Qwen3Config, seed=7, causal_lm=True, dtype=torch.float32, shard=None,
        kw=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, head_dim=16, rope_theta=1e6, tie_word_embeddings=True,
                attention_bias=True, mlp_bias=True),
        biases=["self_attn.k_proj", "self_attn.o_proj", "self_attn.q_proj", "self_attn.v_proj"],
        about="Qwen3 with attention_bias (biases on q, k, v and o_proj) and mlp_bias, which Qwen3 does "
              "not read (no MLP biases); tied embeddings"),
    "qwen2_bias": dict(
        config=Qwen2Config, seed=8, causal_lm=True, dtype=torch.float32, shard=None, hub_config=True,
        layer_types=False,
        kw=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, rope_theta=1e6, tie_word_embeddings=True, attention_bias=True,
                mlp_bias=True, use_sliding_window=True, sliding_window=8, max_window_layers=2),
        biases=["self_attn.k_proj", "self_attn.q_proj", "self_attn.v_proj"],
        about="Qwen2 with attention_bias and mlp_bias, which Qwen2 does not read (q, k, v biases only); "
              "use_sliding_window with every layer below max_window_layers, so full attention "
              "everywhere (sliding_window 8 is shorter than the sequences); config.json in the older "
              "hub form without layer_types; tied embeddings"),
    "mistral_bias": dict(
        config=MistralConfig, seed=9, causal_lm=True, dtype=torch.float32, shard=None,
        kw=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, rope_theta=1e4, tie_word_embeddings=True, attention_bias=True,
                mlp_bias=True),
        biases=[],
        about="Mistral with attention_bias and mlp_bias, which Mistral does not read (no biases at "
              "all); sliding_window 4096 (longer than the sequences); tied embeddings"),
    # sliding windows and RoPE scaling (model/config_attention.c): windows shorter than the batch's
    # 22-token shared prefix, scalings whose frequencies differ from plain RoPE's at every position
    "qwen2_window": dict(
        config=Qwen2Config, seed=10, causal_lm=True, dtype=torch.float32, shard=None, hub_config=True,
        layer_types=False,
        kw=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=3, num_attention_heads=4,
                num_key_value_heads=2, rope_theta=1e6, tie_word_embeddings=True, use_sliding_window=True,
                sliding_window=5, max_window_layers=1),
        about="Qwen2 with sliding windows: use_sliding_window, sliding_window 5, max_window_layers 1 (layers 1 "
              "and 2 slide over 5 keys, fewer than the shared prefix's 22); config.json in the older hub form "
              "without layer_types; tied embeddings"),
    "mistral_window": dict(
        config=MistralConfig, seed=11, causal_lm=True, dtype=torch.float32, shard=None,
        kw=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, rope_theta=1e4, tie_word_embeddings=False, sliding_window=6),
        about="Mistral with sliding_window 6 in every layer; untied lm_head"),
    "llama3_rope": dict(
        config=LlamaConfig, seed=12, causal_lm=True, dtype=torch.float32, shard=None, hub_config=True,
        kw=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, tie_word_embeddings=True,
                rope_parameters={"rope_type": "llama3", "rope_theta": 5e5, "factor": 8.0, "low_freq_factor": 1.0,
                                 "high_freq_factor": 4.0, "original_max_position_embeddings": 64}),
        about="Llama with Llama 3.1's RoPE scaling (llama3: factor 8, low/high_freq_factor 1/4, original 64 "
              "positions: head_dim 16's frequencies fall in each of its three bands); config.json in the hub "
              "form (rope_scaling, top-level rope_theta 5e5); tied embeddings"),
    "qwen2_yarn": dict(
        config=Qwen2Config, seed=13, causal_lm=True, dtype=torch.float32, shard=None, hub_config=True,
        kw=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, tie_word_embeddings=True,
                rope_parameters={"rope_type": "yarn", "rope_theta": 1e6, "factor": 4.0,
                                 "original_max_position_embeddings": 128}),
        about="Qwen2 with yarn RoPE scaling as Qwen2.5 declares it (rope_scaling type yarn, factor 4, original "
              "128 positions; attention factor 0.1 ln 4 + 1 on cos and sin); hub form; tied embeddings"),
    "qwen3_linear": dict(
        config=Qwen3Config, seed=14, causal_lm=False, dtype=torch.float32, shard=None, hub_config=False,
        kw=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, head_dim=16, tie_word_embeddings=False,
                rope_parameters={"rope_type": "linear", "rope_theta": 1e6, "factor": 2.0}),
        about="Qwen3 base model with linear RoPE scaling (factor 2) in transformers 5's rope_parameters"),
    # the Gemma family (model/config_gemma.c): norms as 1 + w, embeddings times sqrt(hidden), GeGLU
    "gemma_bias": dict(
        config=GemmaConfig, seed=15, causal_lm=True, dtype=torch.float32, shard=None,
        kw=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=1, head_dim=32, rope_theta=1e4, tie_word_embeddings=True,
                attention_bias=True, hidden_act="gelu"),
        biases=["self_attn.k_proj", "self_attn.o_proj", "self_attn.q_proj", "self_attn.v_proj"],
        about="Gemma shaped like bge-reranker-v2-gemma's Gemma-2B (one KV head, head_dim 32 != hidden/heads, "
              "tied head) with attention_bias (biases on q, k, v and o_proj); hidden_act gelu, which "
              "GemmaConfig reads as gelu_pytorch_tanh"),
    "gemma2_window": dict(
        config=Gemma2Config, seed=16, causal_lm=True, dtype=torch.float32, shard=None,
        kw=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=3, num_attention_heads=4,
                num_key_value_heads=2, head_dim=16, rope_theta=1e4, tie_word_embeddings=True, sliding_window=5,
                query_pre_attn_scalar=24, attn_logit_softcapping=3.0, final_logit_softcapping=4.0),
        biases=[],
        about="Gemma 2: its alternating layers (0 and 2 slide over 5 keys), query_pre_attn_scalar 24 "
              "(!= head_dim), attention and final logits soft-capped at 3 and 4, norms after each sublayer; "
              "tied head"),
    "gemma3_text": dict(
        config=Gemma3TextConfig, seed=17, causal_lm=True, dtype=torch.float32, shard=None,
        kw=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=3, num_attention_heads=4,
                num_key_value_heads=2, head_dim=16, tie_word_embeddings=False, sliding_window=4,
                layer_types=["sliding_attention", "full_attention", "sliding_attention"], query_pre_attn_scalar=16,
                rope_parameters={"full_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e6},
                                 "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}),
        biases=[],
        about="Gemma 3 text: q/k norm, layers 0 and 2 slide over 4 keys and rotate by their own RoPE (theta "
              "1e4), layer 1 by linear-scaled RoPE (factor 2, theta 1e6); untied head"),
}


# ---------------------------------------------------------------------------- batch

def make_batch(seed):
    """Six sequences (lengths 3..36) with the sharing patterns the planner must handle."""
    rng = np.random.RandomState(100 + seed)
    draw = lambda n: [int(t) for t in rng.randint(1, VOCAB, size=n)]
    template, query, query2 = draw(14), draw(8), draw(6)
    query2[0] = (query[0] + 1) % VOCAB or 1               # diverges right after the template
    pa, pb = draw(10), draw(14)
    pb[0] = (pa[0] + 1) % VOCAB or 1                       # diverge right after template+query
    pb[3] = pa[3]                                          # same (token, position), other parent
    s0 = template + query + pa                             # 32
    s1 = template + query + pb                             # 36
    s3 = s1[:27]                                           # strict prefix of s1
    s4 = template + query2                                 # shares only the template, 20
    lone = [(template[0] + 7) % VOCAB or 1, template[1], draw(1)[0]]  # shares nothing, 3
    seqs = [s0, s1, list(s0), s3, s4, lone]
    note = ("6 sequences, positions 0..len-1 each. s0 and s2 identical; s0, s1, s3 share a "
            "22-token prefix (14 template + 8 query) then diverge (s0/s1 at position 22, with "
            "the same token at position 25 under different parents); s3 is a strict prefix of "
            "s1 (27 of its 36 tokens); s4 shares only the 14-token template; s5 shares nothing "
            "(its position-1 token equals the template's, under a different parent).")
    return seqs, note


# ---------------------------------------------------------------------------- models

def build_model(spec):
    """A transformers model from its config, weights drawn so activations stay O(1)."""
    config = spec["config"](**COMMON, **spec["kw"])
    auto = AutoModelForCausalLM if spec["causal_lm"] else AutoModel
    torch.manual_seed(spec["seed"])
    model = auto.from_config(config, dtype=torch.float32, attn_implementation="eager")
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:                             # RMSNorm and q/k norm weights (Gemma's: 1 + w)
                p.copy_(0.1 * torch.randn_like(p) + (0 if "Gemma" in type(config).__name__ else 1))
            elif "embed_tokens" in name:                   # keeps tied logits O(3)
                p.normal_(0.0, 0.3)
            elif name.endswith(".bias"):
                p.normal_(0.0, 0.2)
            else:                                          # Linear (out, in): unit-variance outputs
                p.normal_(0.0, p.shape[1] ** -0.5)
    return model.eval()


def to_hub_config(path, layer_types=True):
    """Rewrite config.json as transformers 4.x wrote it: top-level rope_theta, torch_dtype, and
    without layer_types unless asked to keep them."""
    cfg = json.loads(path.read_text())
    rope = cfg.pop("rope_parameters")
    cfg["rope_theta"] = rope.pop("rope_theta")
    if rope.get("rope_type", "default") != "default":  # the hub's rope_scaling, with the older key name
        rope["type"] = rope.pop("rope_type")
        cfg["rope_scaling"] = rope
    cfg["torch_dtype"] = cfg.pop("dtype")
    if not layer_types:
        cfg.pop("layer_types")
    path.write_text(json.dumps(dict(sorted(cfg.items())), indent=2) + "\n")


def save_model(model, spec, outdir):
    """save_pretrained in the spec's dtype and sharding; check the tensor names it wrote."""
    if outdir.exists():
        shutil.rmtree(outdir)
    model.to(spec["dtype"]).save_pretrained(
        outdir, safe_serialization=True, **({"max_shard_size": spec["shard"]} if spec["shard"] else {}))
    names = sorted(tensor_names(outdir))
    files = sorted(p.name for p in outdir.glob("*.safetensors"))
    if "biases" in spec:  # the biases transformers built for the architecture, as layer 0 has them
        got = sorted(n.split("layers.0.")[1].removesuffix(".bias") for n in names
                     if "layers.0." in n and n.endswith(".bias"))
        assert got == spec["biases"], got
    if spec["shard"]:
        assert 2 <= len(files) <= 3 and (outdir / "model.safetensors.index.json").exists(), files
    else:
        assert files == ["model.safetensors"], files
    if spec["causal_lm"]:
        assert all(n.startswith("model.") or n == "lm_head.weight" for n in names), names
        assert ("lm_head.weight" in names) != spec["kw"]["tie_word_embeddings"], names
    else:
        assert not any(n.startswith("model.") or n.startswith("lm_head") for n in names), names
    if spec.get("hub_config", not spec["causal_lm"]):
        to_hub_config(outdir / "config.json", spec.get("layer_types", True))


def tensor_names(outdir):
    names = []
    for f in outdir.glob("*.safetensors"):
        with safetensors.safe_open(f, "pt") as st:
            names += list(st.keys())
    return names


def load_reference(spec, outdir):
    """The saved checkpoint loaded back by transformers in fp32 (bf16 weights upcast)."""
    auto = AutoModelForCausalLM if spec["causal_lm"] else AutoModel
    model = auto.from_pretrained(outdir, dtype=torch.float32, attn_implementation="eager")
    return model.eval()


# ---------------------------------------------------------------------------- references

def run_per_sequence(model, seqs, causal_lm):
    """last_hidden (N, H), pooled_last/pooled_mean (B, H), logits_last (B, V): batch 1 each."""
    base = model.model if causal_lm else model
    normed = []
    hook = base.norm.register_forward_hook(lambda m, i, o: normed.append(o))
    rows, last, mean, logits = [], [], [], []
    with torch.no_grad():
        for s in seqs:
            ids = torch.tensor([s])
            pos = torch.arange(len(s))[None]
            out = base(input_ids=ids, position_ids=pos)
            h = out.last_hidden_state[0]
            assert torch.equal(h, normed.pop()[0]), "last_hidden_state is not the final norm's output"
            rows.append(h)
            last.append(h[-1])
            mean.append(h.mean(0))
            if causal_lm:
                full = model(input_ids=ids, position_ids=pos).logits[0, -1]
                head = model.lm_head(h[-1])
                cap = getattr(model.config, "final_logit_softcapping", None)  # Gemma 2's, on the logits
                head = cap * torch.tanh(head / cap) if cap else head
                assert torch.allclose(full, head, atol=1e-5, rtol=1e-6), "lm_head(last_hidden) != logits"
                logits.append(full)
    hook.remove()
    res = dict(last_hidden=torch.cat(rows), pooled_last=torch.stack(last), pooled_mean=torch.stack(mean))
    if causal_lm:
        res["logits_last"] = torch.stack(logits)
    return {k: v.float().numpy().copy() for k, v in res.items()}


def hidden_states_last_is_normed(model, seqs, causal_lm):
    """Whether output_hidden_states' last entry is after the final norm (told in the README)."""
    base = model.model if causal_lm else model
    with torch.no_grad():
        out = base(input_ids=torch.tensor([seqs[0]]), output_hidden_states=True)
    return bool(torch.equal(out.hidden_states[-1], out.last_hidden_state))


# ---------------------------------------------------------------------------- checks

def offsets(seqs):
    return np.cumsum([0] + [len(s) for s in seqs])


def check_batched(model, seqs, causal_lm, ref):
    """Right-padded batch: identical sequences give identical rows, and match the batch-1 runs."""
    base = model.model if causal_lm else model
    L = max(map(len, seqs))
    ids = torch.zeros(len(seqs), L, dtype=torch.long)
    mask = torch.zeros(len(seqs), L, dtype=torch.long)
    for b, s in enumerate(seqs):
        ids[b, :len(s)] = torch.tensor(s)
        mask[b, :len(s)] = 1
    with torch.no_grad():
        h = base(input_ids=ids, attention_mask=mask).last_hidden_state.numpy()
    cu = offsets(seqs)
    worst = 0.0
    for b, s in enumerate(seqs):
        worst = max(worst, np.abs(h[b, :len(s)] - ref["last_hidden"][cu[b]:cu[b + 1]]).max())
        for c in range(b):
            if seqs[c] == s:
                assert np.array_equal(h[b, :len(s)], h[c, :len(s)]), f"identical seqs {c},{b} differ"
    assert worst <= 1e-5, f"padded batch vs batch-1 runs: {worst}"
    return worst


def check_prefix(seqs, ref):
    """Causality: a sequence that is a prefix of another has the same rows as its start."""
    cu, found = offsets(seqs), 0
    for a, sa in enumerate(seqs):
        for b, sb in enumerate(seqs):
            if len(sa) < len(sb) and sb[:len(sa)] == sa:
                ha = ref["last_hidden"][cu[a]:cu[a + 1]]
                hb = ref["last_hidden"][cu[b]:cu[b] + len(sa)]
                assert np.abs(ha - hb).max() <= 1e-6, f"seq {a} vs prefix of seq {b}"
                found += 1
    assert found, "batch has no strict prefix pair"


def check_numpy(outdir, seqs, ref):
    """Max abs error of the NumPy forward against transformers' last_hidden and logits_last."""
    cfg = json.loads((outdir / "config.json").read_text())
    w = numpy_weights(outdir)
    cu, err = offsets(seqs), 0.0
    for b, s in enumerate(seqs):
        x, logits = numpy_forward(w, cfg, s)
        err = max(err, np.abs(x - ref["last_hidden"][cu[b]:cu[b + 1]]).max())
        assert (logits is None) == ("logits_last" not in ref)
        if logits is not None:
            err = max(err, np.abs(logits - ref["logits_last"][b]).max())
    assert err <= TOLERANCE, f"NumPy forward vs transformers: max abs error {err}"
    return err


# ---------------------------------------------------------------------------- output

def write_fixture(name, spec, outroot):
    outdir = outroot / name
    save_model(build_model(spec), spec, outdir)
    model = load_reference(spec, outdir)
    seqs, note = make_batch(spec["seed"])
    ref = run_per_sequence(model, seqs, spec["causal_lm"])
    stats = dict(
        batched_err=float(check_batched(model, seqs, spec["causal_lm"], ref)),
        numpy_err=float(check_numpy(outdir, seqs, ref)),
        hs_last_normed=hidden_states_last_is_normed(model, seqs, spec["causal_lm"]),
        n_tokens=int(sum(map(len, seqs))), lengths=[len(s) for s in seqs],
        absmax=float(np.abs(ref["last_hidden"]).max()))
    check_prefix(seqs, ref)
    write_batch(outdir / "batch.json", seqs, note)
    safetensors.numpy.save_file(
        {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in ref.items()},
        outdir / "expected.safetensors",
        metadata={"fixture": f"{name}; transformers {transformers.__version__}; "
                              f"tolerance max abs {TOLERANCE:g}"})  # one key: Rust maps reorder
    return stats


def write_batch(path, seqs, note):
    """batch.json: one sequence per line; position ids 0..len-1, cu_seqlens (B+1)."""
    rows = lambda xs: "[\n    " + ",\n    ".join(json.dumps(x) for x in xs) + "\n  ]"
    path.write_text(
        "{\n"
        f'  "note": {json.dumps(note)},\n'
        f'  "input_ids": {rows(seqs)},\n'
        f'  "position_ids": {rows([list(range(len(s))) for s in seqs])},\n'
        f'  "cu_seqlens": {json.dumps(offsets(seqs).tolist())}\n'
        "}\n")
    assert json.loads(path.read_text())["input_ids"] == seqs


def versions():
    return dict(python=sys.version.split()[0], torch=torch.__version__,
                transformers=transformers.__version__, safetensors=safetensors.__version__,
                numpy=np.__version__)


def old_check_rows(outroot):
    """name -> its row of the table of checks in the current README (kept for fixtures not rebuilt)."""
    readme = outroot / "README.md"
    rows = {}
    for line in (readme.read_text().splitlines() if readme.exists() else []):
        if line.startswith("| `") and line.count("|") == 6:
            rows[line.split("`")[1]] = line
    return rows


def write_readme(outroot, stats, kept_rows):
    v = versions()
    lines = [
        "# transformers reference fixtures",
        "",
        "Tiny random-weight Llama-family checkpoints and what Hugging Face transformers computes",
        "for them, for the library's CPU path to match without torch. Generated by",
        "",
        "```sh",
        "python tools/make_fixtures.py --out integration_tests/fixtures",
        "```",
        "",
        "with " + ", ".join(f"{k} {val}" for k, val in v.items()) + " (CPU).",
        "Regenerating with other versions may change the last bits of the outputs.",
        "",
        "**Tolerance:** the library's fp32 CPU path must match every tensor of `expected.safetensors`",
        f"within max abs error <= {TOLERANCE:g}.",
        "",
        "## Fixtures",
        "",
        "| dir | what | hidden / layers / heads / kv / head_dim / intermediate / vocab |",
        "| --- | --- | --- |",
    ]
    for name, spec in SPECS.items():
        kw = spec["kw"]
        hd = kw.get("head_dim", kw["hidden_size"] // kw["num_attention_heads"])
        lines.append(f"| `{name}` | {spec['about']} | {kw['hidden_size']} / {kw['num_hidden_layers']} / "
                     f"{kw['num_attention_heads']} / {kw['num_key_value_heads']} / {hd} / "
                     f"{kw['intermediate_size']} / {VOCAB} |")
    lines += [
        "",
        "All: rms_norm_eps 1e-6, max_position_embeddings 512, SiLU (Gemma: GeGLU, gelu_pytorch_tanh),",
        "rope_theta 1e6 (Qwen) or 1e4 (Llama, Mistral, Gemma), plain (default) RoPE and full attention but",
        "where the table says otherwise",
        "(`*_window`: sliding windows; `llama3_rope`, `qwen2_yarn`, `qwen3_linear`: RoPE scaling).",
        "Weights: Linear ~ N(0, 1/in_features), embeddings ~ N(0, 0.3²),",
        "biases ~ N(0, 0.2), every RMSNorm weight (input, post-attention, final, q/k norm)",
        "~ 1 + 0.1 N(0, 1) (Gemma's, which scale by 1 + w: ~ 0.1 N(0, 1)), so activations are O(1) and norm",
        "weights matter.",
        "",
        "config.json is as transformers writes it (`rope_parameters: {rope_theta, rope_type}`,",
        "`dtype`, `layer_types`), except `qwen3_embedding_noprefix`, `qwen2_bias`, `qwen2_window`,",
        "`llama3_rope` and `qwen2_yarn`, rewritten in the older hub form that most published checkpoints",
        "have (top-level `rope_theta`, `rope_scaling` with its `type`, `torch_dtype`; `qwen2_bias` and",
        "`qwen2_window` also without `layer_types`, which transformers then derives from",
        "`use_sliding_window` and `max_window_layers`); a loader should read both.",
        "",
        "## Files in each directory",
        "",
        "- the checkpoint: `config.json`, `model.safetensors` (or `model-0000i-of-0000n.safetensors`",
        "  plus `model.safetensors.index.json`), and for causal LMs `generation_config.json`.",
        "- `batch.json`: the batch, B = 6 sequences of N tokens in all: `input_ids` and",
        "  `position_ids` (one list per sequence; positions are 0..len-1 in every sequence),",
        "  `cu_seqlens` (B+1 offsets of the sequences laid back to back), `note` (what is shared).",
        "- `expected.safetensors` (all F32, computed by transformers in fp32 with eager attention,",
        "  one sequence at a time: batch size 1, no padding, from the saved checkpoint loaded back;",
        "  for `qwen3_bf16` that is the bf16 weights upcast to fp32):",
        "  - `last_hidden` (N, hidden): the base model's `last_hidden_state`, i.e. after the final",
        "    RMSNorm, every row of every sequence concatenated in batch order.",
        "  - `pooled_last` (B, hidden): each sequence's last row of `last_hidden`.",
        "  - `pooled_mean` (B, hidden): the mean of each sequence's rows of `last_hidden`.",
        "  - `logits_last` (B, vocab), causal LMs only: the LM head logits at each sequence's last",
        "    token (`lm_head(pooled_last)`, soft-capped in `gemma2_window`; tied to `embed_tokens` in",
        "    `qwen3_bf16`).",
        "  None is L2-normalized.",
        "",
        "## Checks made before writing",
        "",
        "- A right-padded batch through transformers gives bit-identical rows to the two identical",
        "  sequences, and matches the batch-1 runs within 1e-5.",
        "- The rows of a sequence that is a strict prefix of another equal the first rows of the",
        "  longer one within 1e-6 (causality).",
        "- `last_hidden_state` is the final norm's output (checked with a hook), and the causal",
        "  LM's logits equal `lm_head(last_hidden)` (soft-capped where the config says). With these",
        "  versions `hidden_states[-1]` of",
        "  `output_hidden_states=True` is " + ("" if all(s["hs_last_normed"] for s in stats.values())
                                              else "NOT always ") + "the same tensor (after the norm).",
        "- An independent float64 NumPy forward (RMSNorm, Q/K/V with optional bias, per-head q/k",
        "  norm, rotate-half RoPE with the published linear, llama3 and yarn frequencies, causal GQA",
        "  softmax attention within each layer's sliding window, SwiGLU, final norm, LM head; Gemma's",
        "  1 + w norms, scaled embedding, GeGLU, norms after each sublayer, query scale, soft-caps and RoPE",
        "  per layer type: tools/fixture_reference.py) run from the saved safetensors and config.json",
        "  reproduces `last_hidden` and `logits_last`.",
        "",
        "| dir | tokens N (lengths) | max abs of last_hidden | padded batch vs batch 1 | NumPy vs transformers |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name in SPECS:
        s = stats.get(name)
        lines.append(kept_rows[name] if s is None else
                     f"| `{name}` | {s['n_tokens']} ({', '.join(map(str, s['lengths']))}) | "
                     f"{s['absmax']:.2f} | {s['batched_err']:.1e} | {s['numpy_err']:.1e} |")
    (outroot / "README.md").write_text("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="fixtures directory")
    ap.add_argument("--only", nargs="+", choices=sorted(SPECS), help="rebuild these fixtures only")
    args = ap.parse_args()
    torch.use_deterministic_algorithms(True)
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    args.out.mkdir(parents=True, exist_ok=True)
    kept_rows = old_check_rows(args.out)
    stats = {}
    for name, spec in SPECS.items():
        if args.only and name not in args.only:
            assert name in kept_rows, f"{name} is not rebuilt but the README has no row of checks for it"
            continue
        stats[name] = write_fixture(name, spec, args.out)
        print(f"{name}: {stats[name]}")
    write_readme(args.out, stats, kept_rows)


if __name__ == "__main__":
    main()
