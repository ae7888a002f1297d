"""radix_mlp.torch on Gemma, Gemma 2 and Gemma 3 (text) against the plain transformers model: outputs
and every parameter's gradient of a listwise loss within 1e-5 (relative to each tensor's largest
value), fp32 on the CPU, attention in full and in compact space, radix on and off (the identity plan).

The configs cover what Gemma adds to the Llama layer: the sqrt(hidden) embedding scale, RMSNorms of
(1 + w), GeGLU MLPs, Gemma 2/3's norms after attention and around the MLP, query_pre_attn_scalar,
Gemma 2's attention logit soft-cap (eager; with sdpa it is refused, see test_refusals.py), sliding
windows of 3 keys on some layers (every batch shares a 9-token prefix, longer than the window),
Gemma 3's q/k norms and its local (sliding layers) and global (full layers, linear-scaled) RoPE, sdpa
where transformers builds the model with it (Gemma, Gemma 3), and head-less base models. Also: the
comparisons fail when the wrapper leaves out a Gemma part (the embedding scale, a sandwich norm, the
soft-cap, the local RoPE, the window), and ``RadixMLP.logits`` gives the CausalLM's soft-capped
logits."""

import unittest
from unittest import mock

import torch
from transformers import Gemma2Config, Gemma3TextConfig, GemmaConfig

import radix_mlp.torch as rt
from _common import EquivalenceAsserts, listwise_batch, plain_step, radix_step, relative_error, tiny_model

COMMON = dict(vocab_size=97, max_position_embeddings=128, attention_dropout=0.0, rms_norm_eps=1e-6)
WINDOWED = ["sliding_attention", "full_attention", "sliding_attention"]


def configs():
    return {
        # Gemma: GQA 2:1, head_dim 16 != hidden/heads, tied, gelu_pytorch_tanh; eager and sdpa.
        "gemma_gqa_eager": GemmaConfig(hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                                       num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                       hidden_act="gelu_pytorch_tanh", attention_bias=True,
                                       attn_implementation="eager", **COMMON),
        "gemma_linear_rope_sdpa": GemmaConfig(hidden_size=24, intermediate_size=40, num_hidden_layers=2,
                                              num_attention_heads=3, num_key_value_heads=1, head_dim=8,
                                              tie_word_embeddings=False,
                                              rope_parameters={"rope_type": "linear", "rope_theta": 1e4,
                                                               "factor": 2.0},
                                              attn_implementation="sdpa", **COMMON),
        # Gemma 2: windows of 3 on layers 0 and 2, a small attention soft-cap that matters,
        # query_pre_attn_scalar 12 != head_dim, final soft-cap (not used by the wrapper: no logits).
        "gemma2_window_softcap": Gemma2Config(hidden_size=32, intermediate_size=48, num_hidden_layers=3,
                                              num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                              sliding_window=3, layer_types=WINDOWED, query_pre_attn_scalar=12,
                                              attn_logit_softcapping=1.5, final_logit_softcapping=2.0,
                                              hidden_activation="gelu_pytorch_tanh", attn_implementation="eager",
                                              **COMMON),
        # Gemma 2 without attention soft-cap, alternating windows (its default layer types), a base
        # model; eager (transformers 5.23 builds no Gemma 2 with sdpa).
        "gemma2_base_no_softcap": Gemma2Config(hidden_size=24, intermediate_size=32, num_hidden_layers=2,
                                               num_attention_heads=2, num_key_value_heads=1, head_dim=12,
                                               sliding_window=3, attn_logit_softcapping=None,
                                               query_pre_attn_scalar=12, hidden_activation="gelu_pytorch_tanh",
                                               architectures=["Gemma2Model"], attn_implementation="eager",
                                               **COMMON),
        # Gemma 3: q/k norms, local RoPE (theta 100) on the sliding layers, linear-scaled global RoPE,
        # windows of 3, query_pre_attn_scalar 20; eager, then sdpa on a base model.
        "gemma3_local_global_eager": Gemma3TextConfig(
            hidden_size=32, intermediate_size=48, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
            head_dim=16, sliding_window=3, layer_types=WINDOWED, query_pre_attn_scalar=20,
            rope_parameters={"full_attention": {"rope_type": "linear", "rope_theta": 1e5, "factor": 4.0},
                             "sliding_attention": {"rope_type": "default", "rope_theta": 100.0}},
            hidden_activation="gelu_pytorch_tanh", attn_implementation="eager", **COMMON),
        "gemma3_base_model_sdpa": Gemma3TextConfig(
            hidden_size=24, intermediate_size=40, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2,
            head_dim=8, sliding_window=3, layer_types=["sliding_attention", "full_attention"],
            rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 1e6},
                             "sliding_attention": {"rope_type": "default", "rope_theta": 1e3}},
            architectures=["Gemma3TextModel"], attn_implementation="sdpa", **COMMON),
    }


SETTINGS = [("full", 1.0), ("compact", 1.0), ("compact", 0.0)]


class TestGemmaTraining(EquivalenceAsserts, unittest.TestCase):
    def step(self, name, seed):
        config = configs()[name]
        model = tiny_model(config, seed=seed).train()
        sequences, groups = listwise_batch(config.vocab_size, seed=seed)
        weight = torch.randn(config.hidden_size, generator=torch.Generator().manual_seed(seed))
        return model, sequences, groups, weight

    def test_configs(self):
        for seed, name in enumerate(sorted(configs())):
            model, sequences, groups, weight = self.step(name, seed + 1)
            ref = plain_step(model, sequences, groups, weight)
            for attention, threshold in SETTINGS:
                what = "%s attention=%s threshold=%g" % (name, attention, threshold)
                with self.subTest(what):
                    got = radix_step(rt.RadixMLP(model, attention=attention, threshold=threshold), sequences, groups,
                                     weight)
                    self.assertEqual(got[3].plan.n_compact < got[3].plan.n_tokens, threshold > 0, what)
                    self.assert_same_step(got, ref, what)

    def test_logits_final_softcap(self):
        """RadixMLP.logits: the CausalLM's logits (Gemma 2's final soft-cap of 2, which matters, applied)."""
        model, sequences, _, _ = self.step("gemma2_window_softcap", 3)
        model.eval()
        wrapper = rt.RadixMLP(model, attention="compact", threshold=1.0)
        with torch.no_grad():
            ref = torch.cat([model(input_ids=torch.tensor([s])).logits[0] for s in sequences])
            got = wrapper.logits(wrapper(wrapper.plan(sequences)))
            uncapped = model.lm_head(wrapper(wrapper.plan(sequences)))
        self.assert_close(got, ref, "logits")
        self.assertGreater(relative_error(uncapped, ref), 1e-2)
        base = tiny_model(configs()["gemma3_base_model_sdpa"])
        with self.assertRaisesRegex(ValueError, "has no lm_head"):
            rt.RadixMLP(base).logits(torch.zeros(1, 24))

    def test_fails_without_gemma_parts(self):
        """Each Gemma part, left out of the wrapper's run, moves its hidden rows well past the tolerance."""
        def drop_sandwich(layer_fn):
            def run(layer, *args):
                with mock.patch.object(layer, "post_feedforward_layernorm", torch.nn.Identity()):
                    return layer_fn(layer, *args)
            return run

        cases = {
            "embedding scale": ("gemma_gqa_eager", lambda m, w: mock.patch.object(
                m.model.embed_tokens, "embed_scale", torch.tensor(1.0))),
            "post_feedforward_layernorm": ("gemma2_window_softcap", lambda m, w: mock.patch.object(
                w, "_layer", drop_sandwich(w._layer))),
            "attention soft-cap": ("gemma2_window_softcap", lambda m, w: mock.patch.object(
                w, "_softcap", lambda attn: None)),
            "local RoPE": ("gemma3_local_global_eager", lambda m, w: mock.patch.object(
                m.model.rotary_emb, "sliding_attention_inv_freq", m.model.rotary_emb.full_attention_inv_freq)),
            "sliding window": ("gemma3_local_global_eager", lambda m, w: mock.patch.object(
                w, "_windows", lambda: [None] * m.config.num_hidden_layers)),
        }
        for part, (name, patch) in cases.items():
            with self.subTest(part):
                model, sequences, groups, weight = self.step(name, 5)
                ref_hidden = plain_step(model, sequences, groups, weight)[0]
                wrapper = rt.RadixMLP(model, attention="compact", threshold=1.0)
                with patch(model, wrapper):
                    hidden = radix_step(wrapper, sequences, groups, weight)[0]
                self.assertGreater(relative_error(hidden, ref_hidden), 100 * 1e-5, "%s left out: still matches" % part)
                self.assert_close(radix_step(wrapper, sequences, groups, weight)[0], ref_hidden, part + " restored")


if __name__ == "__main__":
    unittest.main()
