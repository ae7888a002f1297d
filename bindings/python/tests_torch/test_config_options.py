"""Sliding windows and RoPE scaling against transformers: random configs of each option, saved by
transformers, loaded by the library, whose hidden states (radix off, on, compact attention, and
through the prefix cache, cold and warm) must match transformers' within 1e-4 of each row's norm,
and whose greedy decode steps (shared prefixes read once, and each sequence alone) must give
transformers' logits for the same tokens, as test_config_keys.py checks the other keys. A bf16
checkpoint is also run with its weights held in bf16 (the bf16 bound: the same 1e-4 against
transformers' fp32 run of the bf16 weights).

The options, in turn, each with its sizes, windows and factors drawn at random:
  - Qwen2 / Qwen3 sliding layers: use_sliding_window + sliding_window + max_window_layers
    (transformers derives layer_types), or layer_types given at random;
  - Mistral's sliding_window (every layer);
  - llama3 RoPE scaling (Llama 3.1's, in rope_scaling as the hub writes it, or rope_parameters);
  - yarn (Qwen2.5's rope_scaling, with or without its optional keys: attention_factor, beta_fast,
    beta_slow, mscale + mscale_all_dim, truncate);
  - linear, on any architecture;
  - a window and a scaling together.
Windows are 2 to 7 keys and every batch shares a prefix of 8 to 14 tokens, so shared prefixes
longer than the window, and sequences up to 30 tokens, are the rule. The refusals that remain are
checked to be named: dynamic and longrope RoPE (with the reason), a sliding_window on Llama.
RADIX_MLP_OPTION_DRAWS (default 24) and RADIX_MLP_OPTION_SEED (default 0) pick the draws.
"""

import unittest

import numpy as np
import torch
import transformers

from _checkpoints import check_draw, check_refused, draw_settings

transformers.logging.set_verbosity_error()  # yarn's factor against max_position_embeddings: a warning per draw


def rope_scaling(rng, kind, max_positions, head_dim, theta):
    """A random rope_scaling dict of `kind` (the keys transformers reads for it). llama3's
    original_max_position_embeddings puts the wavelength of dimension pair head_dim/4 between its
    two bounds, so each of its three cases (kept, divided, interpolated) has dimensions."""
    factor = float(rng.choice([1.5, 2.0, 4.0, 8.0]))
    if kind == "linear":
        return {"rope_type": "linear", "factor": factor}
    original = int(rng.integers(8, max_positions // 2))
    if kind == "llama3":
        low = float(rng.choice([0.5, 1.0, 2.0]))
        high = low * float(rng.choice([2.0, 4.0]))
        wavelength = 2 * np.pi * theta ** ((head_dim // 4) * 2 / head_dim)
        original = max(1, int(round(wavelength * (low * high) ** 0.5)))
        return {"rope_type": "llama3", "factor": factor, "low_freq_factor": low, "high_freq_factor": high,
                "original_max_position_embeddings": original}
    r = {"type": "yarn", "factor": factor, "original_max_position_embeddings": original}
    for key, values in (("attention_factor", [0.8, 1.3]), ("beta_fast", [8, 24.0]), ("beta_slow", [0.5, 2]),
                        ("truncate", [False, True])):
        if rng.random() < 0.3:
            r[key] = values[int(rng.integers(0, len(values)))]
    if rng.random() < 0.3:
        r.update(mscale=float(rng.choice([0.5, 1.0])), mscale_all_dim=float(rng.choice([0.7, 1.0])))
    return r


OPTIONS = ["qwen_window", "qwen_layer_types", "mistral_window", "llama3", "yarn", "linear", "window_and_scaling"]


def draw(rng, option):
    """(what, model_type, config kwargs, config.json changes, dtype, base model or not) for `option`."""
    model_type = {"qwen_window": str(rng.choice(["qwen2", "qwen3"])), "qwen_layer_types": str(rng.choice(["qwen2",
                  "qwen3"])), "mistral_window": "mistral", "llama3": "llama", "yarn": "qwen2",
                  "linear": str(rng.choice(["qwen2", "qwen3", "llama", "mistral"])),
                  "window_and_scaling": str(rng.choice(["qwen2", "mistral"]))}[option]
    kv = int(rng.integers(1, 3))
    heads = kv * int(rng.choice([1, 2]))
    head_dim = int(rng.choice([8, 16]))
    layers = int(rng.integers(2, 4))
    kwargs = dict(vocab_size=int(rng.integers(40, 100)), hidden_size=heads * head_dim,
                  intermediate_size=int(rng.integers(16, 48)), num_hidden_layers=layers, num_attention_heads=heads,
                  num_key_value_heads=kv, max_position_embeddings=128, rms_norm_eps=1e-6,
                  tie_word_embeddings=bool(rng.integers(0, 2)))
    theta = float(10 ** rng.uniform(3, 6))
    kwargs["rope_parameters"] = {"rope_type": "default", "rope_theta": theta}
    changes = {}
    window = int(rng.integers(2, 8))
    if option in ("qwen_window", "window_and_scaling") and model_type != "mistral":
        kwargs.update(use_sliding_window=True, sliding_window=window, max_window_layers=int(rng.integers(0, layers)))
        changes["layer_types"] = None  # transformers derives them from max_window_layers
    elif option == "qwen_layer_types":
        kinds = [str(rng.choice(["full_attention", "sliding_attention"])) for _ in range(layers)]
        kinds[int(rng.integers(0, layers))] = "sliding_attention"
        kwargs.update(use_sliding_window=True, sliding_window=window, layer_types=kinds)
    elif model_type == "mistral" and option in ("mistral_window", "window_and_scaling"):
        kwargs["sliding_window"] = window
    elif model_type == "mistral":
        kwargs["sliding_window"] = None  # no window: the scaling alone
    if option in ("llama3", "yarn", "linear", "window_and_scaling"):
        kind = option if option != "window_and_scaling" else str(rng.choice(["linear", "yarn", "llama3"]))
        scaling = rope_scaling(rng, kind, kwargs["max_position_embeddings"], head_dim, theta)
        if rng.random() < 0.5:  # the hub's form: top-level rope_theta and rope_scaling
            changes.update(rope_parameters=None, rope_theta=theta, rope_scaling=scaling)
        else:  # transformers 5's: one rope_parameters object
            kwargs["rope_parameters"] = dict(scaling, rope_theta=theta)
    dtype = torch.bfloat16 if rng.random() < 0.25 else torch.float32
    what = "%s on %s" % (option, model_type)
    return what, model_type, kwargs, changes, dtype, bool(rng.random() < 0.3)


class TestConfigOptions(unittest.TestCase):
    def test_random_options(self):
        draws, seed, rng = draw_settings("OPTION")
        matched, generated, options = 0, 0, set()
        for i in range(draws):
            what, model_type, kwargs, changes, dtype, base = draw(rng, OPTIONS[i % len(OPTIONS)])
            label = "draw %d (seed %d): %s, %s, config.json changes %s, %s%s" % (
                i, seed, what, kwargs, changes, dtype, ", base model" if base else "")
            result = check_draw(self, rng, label, model_type, kwargs, changes, i, dtype, base)
            if result is not None:
                generated += result
                matched += 1
                options.add(what.split(" on ")[0])
        print("\nconfig options: %d draws matched transformers (%d generating too), options %s" %
              (matched, generated, sorted(options)))
        self.assertEqual(matched, draws)
        self.assertEqual(len(options), min(draws, len(OPTIONS)), "the draws left options unchecked")

    def test_refused_by_name(self):
        cases = (("qwen2", {"rope_scaling": {"rope_type": "dynamic", "factor": 2.0}}, "dynamic",
                  "depend on the sequence's length"),
                 ("llama", {"rope_scaling": {"rope_type": "longrope", "factor": 2.0, "short_factor": [1.0] * 4,
                                             "long_factor": [2.0] * 4, "original_max_position_embeddings": 32}},
                  "longrope", "depend on the sequence's length"),
                 ("llama", {"sliding_window": 4}, "sliding_window", "sliding_window is set"))
        for model_type, changes, key, reason in cases:
            check_refused(self, model_type, changes, key, reason)


if __name__ == "__main__":
    unittest.main()
