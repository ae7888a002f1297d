"""What radix_mlp.torch cannot honour it refuses by name instead of computing something else: another
model type, bidirectional attention (is_causal false, Gemma's use_bidirectional_attention), Gemma 2's
attention soft-cap under sdpa (transformers' sdpa drops it), batch-dependent RoPE (Gemma 3's per layer
type too), a sliding window that cuts a sequence of the batch, attention
dropout in training, attention implementations other than eager/sdpa, bad batches. Where the same
setting is harmless (a window longer than the batch, dropout in eval mode) it runs and matches the
plain model. Also: ``import radix_mlp`` does not import torch."""

import os
import subprocess
import sys
import unittest

import torch
from transformers import (Gemma2Config, Gemma3TextConfig, GemmaConfig, GPT2Config, GPT2Model, LlamaConfig,
                          MistralConfig, Qwen2Config, Qwen3Config)

import radix_mlp.torch as rt
from _common import EquivalenceAsserts, listwise_batch, plain_step, radix_step, tiny_model

SMALL = dict(vocab_size=50, hidden_size=16, intermediate_size=24, num_hidden_layers=2, num_attention_heads=2,
             num_key_value_heads=1, max_position_embeddings=64, attn_implementation="eager")


class TestRefusals(EquivalenceAsserts, unittest.TestCase):
    def test_model_type(self):
        model = GPT2Model(GPT2Config(n_layer=1, n_embd=8, n_head=2, vocab_size=20, n_positions=16, bos_token_id=None,
                                      eos_token_id=None))
        with self.assertRaisesRegex(rt.UnsupportedModel, "config.model_type='gpt2' is not supported"):
            rt.RadixMLP(model)

    def test_bidirectional(self):
        """is_causal false: transformers attends both ways (its masks follow the config), refused."""
        config = Qwen3Config(**SMALL)
        config.is_causal = False
        model = tiny_model(config)
        ids = torch.tensor([[1, 2, 3, 4]])
        with torch.no_grad():
            both_ways = model.model(ids).last_hidden_state
            model.config.is_causal = True
            causal = model.model(ids).last_hidden_state
            model.config.is_causal = False
        self.assertGreater(float((both_ways[0, 0] - causal[0, 0]).abs().max()), 1e-3)  # the setting matters
        with self.assertRaisesRegex(rt.UnsupportedModel, "config.is_causal=False"):
            rt.RadixMLP(model)

    def test_gemma_bidirectional(self):
        """use_bidirectional_attention (Gemma's embedders): refused by that name; Gemma 3's causal twin runs."""
        for config_class in (GemmaConfig, Gemma3TextConfig):
            with self.subTest(config_class.model_type):
                model = tiny_model(config_class(use_bidirectional_attention=True, head_dim=8, **SMALL))
                with self.assertRaisesRegex(rt.UnsupportedModel, "config.use_bidirectional_attention=True: the %s "
                                            "model then attends in both directions" % config_class.model_type):
                    rt.RadixMLP(model)
        model = tiny_model(Gemma3TextConfig(use_bidirectional_attention=False, head_dim=8, **SMALL))
        self.assertEqual(rt.RadixMLP(model)(rt.RadixMLP(model).plan([[1, 2, 3]])).shape, (3, SMALL["hidden_size"]))

    def test_gemma2_softcap_with_sdpa(self):
        """sdpa cannot apply Gemma 2's attn_logit_softcapping (transformers 5.19's sdpa function drops it,
        5.23's raises and will not build a Gemma 2 with sdpa): refused by name with sdpa, runs with eager."""
        config = Gemma2Config(attn_logit_softcapping=0.5, head_dim=8, query_pre_attn_scalar=8, sliding_window=4,
                              **SMALL)
        model = tiny_model(config).eval()
        ids = torch.tensor([[1, 2, 3, 4, 5, 6]])
        wrapper = rt.RadixMLP(model)
        plan = wrapper.plan([[1, 2, 3], [1, 2, 4]])
        try:
            with torch.no_grad():
                eager = model.model(ids).last_hidden_state
                model.config._attn_implementation = "sdpa"
                try:
                    sdpa = model.model(ids).last_hidden_state
                    self.assertGreater(float((eager - sdpa).abs().max()), 1e-3)  # it dropped the soft-cap
                except ValueError as e:
                    self.assertIn("softcap", str(e))                             # or refused it
            with self.assertRaisesRegex(rt.UnsupportedModel, "config.attn_logit_softcapping=0.5 with "
                                        "config._attn_implementation='sdpa': sdpa cannot apply the soft-cap"):
                wrapper(plan)
        finally:
            model.config._attn_implementation = "eager"
        self.assertEqual(wrapper(plan).shape, (6, SMALL["hidden_size"]))

    def test_batch_dependent_rope(self):
        for kind, extra in (("dynamic", {"factor": 2.0}),
                            ("longrope", {"short_factor": [1.0] * 4, "long_factor": [2.0] * 4,
                                          "original_max_position_embeddings": 32})):
            with self.subTest(rope_type=kind):
                config = LlamaConfig(rope_parameters=dict(rope_type=kind, rope_theta=1e4, **extra), **SMALL)
                with self.assertRaisesRegex(rt.UnsupportedModel, "rope_type '%s'" % kind):
                    rt.RadixMLP(tiny_model(config))
        config = Gemma3TextConfig(head_dim=8, rope_parameters={
            "full_attention": {"rope_type": "default", "rope_theta": 1e6},
            "sliding_attention": {"rope_type": "dynamic", "rope_theta": 1e4, "factor": 2.0}}, **SMALL)
        with self.subTest("gemma3_text sliding layers' rope_type dynamic"):
            with self.assertRaisesRegex(rt.UnsupportedModel, "rope_type 'dynamic'"):
                rt.RadixMLP(tiny_model(config))

    def test_sliding_window(self):
        """Mistral applies its window in every layer, Qwen2 in the layers from max_window_layers on: a
        batch longer than the window (and sharing a prefix longer than it) gives the plain model's
        outputs and gradients, in both attention spaces."""
        cases = (("mistral", MistralConfig(sliding_window=3, **SMALL)),
                 ("qwen2", Qwen2Config(use_sliding_window=True, sliding_window=3, max_window_layers=1, **SMALL)))
        batch = [[1, 2, 3, 4, 5, 6, 7, 8, 9], [1, 2, 3, 4, 5, 9, 8], [1, 2, 3]]
        for name, config in cases:
            model = tiny_model(config).train()
            ref_hidden, _, ref_grads = plain_step(model, batch, [[0, 1, 2]])
            for attention in ("full", "compact"):
                with self.subTest(model=name, attention=attention):
                    wrapper = rt.RadixMLP(model, attention=attention, threshold=1.0)
                    hidden, _, got, _ = radix_step(wrapper, batch, [[0, 1, 2]])
                    self.assert_close(hidden, ref_hidden, name + " window 3")
                    self.assert_same_grads(got, ref_grads, name + " window 3")

    def test_attention_dropout(self):
        config = Qwen3Config(attention_dropout=0.1, **SMALL)
        model = tiny_model(config)
        sequences, groups = listwise_batch(config.vocab_size, passages=(3, 4, 2, 4))
        wrapper = rt.RadixMLP(model, threshold=1.0)
        plan = wrapper.plan(sequences)
        model.train()
        with self.assertRaisesRegex(rt.UnsupportedModel, r"config.attention_dropout=0.1 in training mode"):
            wrapper(plan)
        model.eval()
        ref_hidden, _, ref_grads = plain_step(model, sequences, groups)
        hidden, _, got, _ = radix_step(wrapper, sequences, groups)
        self.assert_close(hidden, ref_hidden, "dropout in eval mode")
        self.assert_same_grads(got, ref_grads, "dropout in eval mode")

    def test_attention_implementation(self):
        model = tiny_model(Qwen3Config(**SMALL))
        wrapper = rt.RadixMLP(model)
        plan = wrapper.plan([[1, 2, 3], [1, 2, 4]])
        model.config._attn_implementation = "flex_attention"
        try:
            with self.assertRaisesRegex(rt.UnsupportedModel, "config._attn_implementation='flex_attention'"):
                wrapper(plan)
        finally:
            model.config._attn_implementation = "eager"
        self.assertEqual(wrapper(plan).shape, (6, SMALL["hidden_size"]))

    def test_bad_batches(self):
        model = tiny_model(Qwen3Config(**SMALL))
        wrapper = rt.RadixMLP(model)
        with self.assertRaisesRegex(ValueError, "token id 50 is outside the vocabulary \\(50 tokens\\)"):
            wrapper(wrapper.plan([[1, 2, 3], [1, 50]]))
        with self.assertRaisesRegex(ValueError, "sequence 1 is empty"):
            wrapper.plan([[1, 2, 3], [], [4]])
        with self.assertRaisesRegex(TypeError, "needs a TorchPlan"):
            wrapper([[1, 2, 3]])
        with self.assertRaisesRegex(ValueError, "attention must be 'full' or 'compact', got 'paged'"):
            rt.RadixMLP(model, attention="paged")
        with self.assertRaisesRegex(ValueError, "position_ids must have one list per sequence"):
            wrapper.plan([[1, 2, 3]], position_ids=[[0, 1]])
        if torch.device("meta") != model.model.embed_tokens.weight.device:
            plan = rt.TorchPlan(wrapper.plan([[1, 2]]).plan, device="meta")
            with self.assertRaisesRegex(ValueError, "the plan is on meta, the model on cpu"):
                wrapper(plan)

    def test_import_radix_mlp_does_not_import_torch(self):
        code = "import sys, radix_mlp; print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=os.environ.copy(),
                             check=True).stdout.strip()
        self.assertEqual(out, "[]")


if __name__ == "__main__":
    unittest.main()
