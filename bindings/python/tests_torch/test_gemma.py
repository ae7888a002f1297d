"""Gemma, Gemma 2 and Gemma 3 (text) against transformers: random configs of each architecture,
saved by transformers, loaded by the library, whose hidden states (radix off, on, compact attention,
and through the prefix cache, cold and warm) must match transformers' within 1e-4 of each row's
norm, and whose greedy decode steps (shared prefixes read once, and each sequence alone) must give
transformers' logits for the same tokens (Gemma 2's final-logit soft-capping included), as
test_config_keys.py checks the other architectures. A bf16 checkpoint is also run with its weights
held in bf16 (the same 1e-4 against transformers' fp32 run of the bf16 weights).

What each draw picks at random, by architecture:
  - every one: sizes, GQA, head_dim (256, Gemma's own, in some), attention_bias, tied or untied head,
    the activation (gelu_pytorch_tanh, gelu or silu, by hidden_act or hidden_activation);
  - Gemma 2: windows (its alternating layers, or layer_types at random), query_pre_attn_scalar,
    attn_logit_softcapping (its default 50, none, or a small cap that matters), final_logit_softcapping;
  - Gemma 3: windows (layer_types, or sliding_window_pattern with layer_types left out), its RoPE per
    layer type (transformers 5's rope_parameters, scaled or not, or the hub's older rope_theta,
    rope_local_base_freq and rope_scaling), query_pre_attn_scalar, final_logit_softcapping.
Windows are 2 to 7 keys and every batch shares a prefix of 8 to 14 tokens, longer than the window.
The refusals that remain are checked to be named: use_bidirectional_attention (Gemma's embedders)
and the multimodal Gemma 3's model_type. RADIX_MLP_GEMMA_DRAWS (default 24) and
RADIX_MLP_GEMMA_SEED (default 0) pick the draws.
"""

import unittest

import torch
import transformers

from _checkpoints import check_draw, check_refused, draw_settings

transformers.logging.set_verbosity_error()

MODEL_TYPES = ["gemma", "gemma2", "gemma3_text"]


def pick(rng, values):
    return values[int(rng.integers(0, len(values)))]


def draw(rng, model_type):
    """(config kwargs, config.json changes, dtype, base model or not) for a random `model_type`."""
    kv = int(rng.integers(1, 3))
    heads = kv * int(rng.choice([1, 2]))
    head_dim = int(pick(rng, [8, 16, 256]))
    layers = int(rng.integers(2, 5))
    kwargs = dict(vocab_size=int(rng.integers(40, 100)), hidden_size=heads * 8, head_dim=head_dim,
                  intermediate_size=int(rng.integers(16, 48)), num_hidden_layers=layers, num_attention_heads=heads,
                  num_key_value_heads=kv, max_position_embeddings=128, rms_norm_eps=1e-6,
                  tie_word_embeddings=bool(rng.random() < 0.7), attention_bias=bool(rng.integers(0, 2)))
    changes = {}
    activation = pick(rng, ["gelu_pytorch_tanh", "gelu_pytorch_tanh", "gelu", "silu"])
    kwargs["hidden_act" if model_type == "gemma" else "hidden_activation"] = activation
    theta = float(10 ** rng.uniform(3, 6))
    window = int(rng.integers(2, 8))
    if model_type == "gemma":
        kwargs["rope_parameters"] = {"rope_type": "default", "rope_theta": theta}
        if rng.random() < 0.3:
            kwargs["rope_parameters"] = {"rope_type": "linear", "factor": 2.0, "rope_theta": theta}
        return kwargs, changes
    kwargs["sliding_window"] = window
    kwargs["query_pre_attn_scalar"] = int(pick(rng, [head_dim, 12, 256]))
    kwargs["final_logit_softcapping"] = pick(rng, [None, 30.0, 2.0])
    if model_type == "gemma2":
        kwargs["rope_parameters"] = {"rope_type": "default", "rope_theta": theta}
        kwargs["attn_logit_softcapping"] = pick(rng, [50.0, None, 1.5])
        if rng.random() < 0.5:
            kwargs["layer_types"] = [pick(rng, ["full_attention", "sliding_attention"]) for _ in range(layers)]
        return kwargs, changes
    kwargs["attn_logit_softcapping"] = pick(rng, [None, 1.5])  # Gemma 3 reads it and does not apply it
    if rng.random() < 0.5:
        kwargs["layer_types"] = [pick(rng, ["full_attention", "sliding_attention"]) for _ in range(layers)]
    else:  # transformers derives layer_types from the pattern when config.json has none
        changes.update(layer_types=None, _sliding_window_pattern=None, sliding_window_pattern=int(rng.integers(1, 4)))
    local = float(10 ** rng.uniform(2, 4))
    full = {"rope_type": "default", "rope_theta": theta}
    if rng.random() < 0.4:
        full = {"rope_type": "linear", "factor": float(pick(rng, [2.0, 8.0])), "rope_theta": theta}
    if rng.random() < 0.5:  # transformers 5's form: rope_parameters per layer type
        kwargs["rope_parameters"] = {"full_attention": full,
                                     "sliding_attention": {"rope_type": "default", "rope_theta": local}}
    else:  # the hub's older form: rope_theta, rope_local_base_freq, rope_scaling for full attention
        changes.update(rope_parameters=None, rope_theta=theta, rope_local_base_freq=local)
        if full["rope_type"] != "default":
            changes["rope_scaling"] = {"rope_type": "linear", "factor": full["factor"]}
    return kwargs, changes


class TestGemma(unittest.TestCase):
    def test_random_configs(self):
        draws, seed, rng = draw_settings("GEMMA")
        matched, generated, seen = 0, 0, set()
        for i in range(draws):
            model_type = MODEL_TYPES[i % len(MODEL_TYPES)]
            kwargs, changes = draw(rng, model_type)
            dtype = torch.bfloat16 if rng.random() < 0.25 else torch.float32
            base = bool(rng.random() < 0.25)
            label = "draw %d (seed %d): %s %s, config.json changes %s, %s%s" % (
                i, seed, model_type, kwargs, changes, dtype, ", base model" if base else "")
            result = check_draw(self, rng, label, model_type, kwargs, changes, i, dtype, base, same_architecture=True)
            if result is not None:
                generated += result
                matched += 1
                seen.add(model_type)
        print("\ngemma: %d draws matched transformers (%d generating too), architectures %s" %
              (matched, generated, sorted(seen)))
        self.assertEqual(matched, draws)
        self.assertEqual(len(seen), min(draws, len(MODEL_TYPES)))

    def test_refused_by_name(self):
        cases = (("gemma3_text", {"use_bidirectional_attention": True}, {}, "use_bidirectional_attention",
                  "attends in both directions"),
                 ("gemma", {"use_bidirectional_attention": True}, {}, "use_bidirectional_attention",
                  "attends in both directions"),
                 ("gemma3_text", {}, {"model_type": "gemma3"}, "gemma3", "the multimodal Gemma 3"),
                 ("gemma2", {"sliding_window": None}, {"layer_types": None}, "sliding_window",
                  "transformers cannot build its mask"))
        for model_type, kwargs, changes, key, reason in cases:
            check_refused(self, model_type, changes, key, reason, **kwargs)


if __name__ == "__main__":
    unittest.main()
