"""radix_mlp.torch against the plain transformers model on configs outside the fixtures: outputs and
every parameter's gradient of a listwise loss within 1e-5 (relative to each tensor's largest value),
fp32 on the CPU, attention in full and in compact space, radix on, off (the identity plan) and
padded. The configs vary the architecture (Qwen3, Qwen2 with q/k/v bias, Llama with biases,
Mistral), GQA ratio, head_dim (also != hidden/heads), rope_theta and RoPE scaling, tied embeddings,
rms eps, the attention implementation (eager, sdpa) and a head-less base model."""

import unittest

import numpy as np
import torch
from transformers import LlamaConfig, MistralConfig, Qwen2Config, Qwen3Config

import radix_mlp.torch as rt
from _common import EquivalenceAsserts, listwise_batch, plain_step, radix_step, tiny_model

COMMON = dict(vocab_size=97, max_position_embeddings=128, attention_dropout=0.0)

CONFIGS = {
    # GQA 4:1, head_dim 12 != hidden/heads, attention biases, tied embeddings, rms eps 1e-5.
    "qwen3_gqa4_bias_tied": Qwen3Config(hidden_size=40, intermediate_size=72, num_hidden_layers=2,
                                        num_attention_heads=8, num_key_value_heads=2, head_dim=12,
                                        attention_bias=True, tie_word_embeddings=True, rms_norm_eps=1e-5,
                                        rope_parameters={"rope_type": "default", "rope_theta": 5e5},
                                        attn_implementation="eager", **COMMON),
    # MHA, head_dim 8, untied, sdpa, YaRN RoPE.
    "qwen3_mha_yarn_sdpa": Qwen3Config(hidden_size=32, intermediate_size=40, num_hidden_layers=3,
                                       num_attention_heads=4, num_key_value_heads=4, head_dim=8,
                                       tie_word_embeddings=False, rms_norm_eps=1e-6,
                                       rope_parameters={"rope_type": "yarn", "rope_theta": 1e6, "factor": 4.0,
                                                        "original_max_position_embeddings": 32},
                                       attn_implementation="sdpa", **COMMON),
    # Qwen2 (q/k/v bias), GQA 3:1, sliding window on the upper layers but longer than every sequence.
    "qwen2_gqa3_window": Qwen2Config(hidden_size=48, intermediate_size=64, num_hidden_layers=3,
                                     num_attention_heads=6, num_key_value_heads=2, rope_theta=1e4,
                                     use_sliding_window=True, sliding_window=64, max_window_layers=1,
                                     tie_word_embeddings=False, rms_norm_eps=1e-6, attn_implementation="eager",
                                     **COMMON),
    # Llama with attention and MLP biases, llama3 RoPE scaling, MQA (1 KV head), sdpa, tied.
    "llama_bias_llama3_mqa": LlamaConfig(hidden_size=32, intermediate_size=56, num_hidden_layers=2,
                                         num_attention_heads=4, num_key_value_heads=1, attention_bias=True,
                                         mlp_bias=True, tie_word_embeddings=True, rms_norm_eps=1e-5,
                                         rope_parameters={"rope_type": "llama3", "rope_theta": 5e5, "factor": 8.0,
                                                          "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                                          "original_max_position_embeddings": 16},
                                         attn_implementation="sdpa", **COMMON),
    # Llama with linear RoPE scaling, eager, untied.
    "llama_linear_rope": LlamaConfig(hidden_size=24, intermediate_size=40, num_hidden_layers=2,
                                     num_attention_heads=3, num_key_value_heads=3,
                                     rope_parameters={"rope_type": "linear", "rope_theta": 1e4, "factor": 2.0},
                                     attn_implementation="eager", **COMMON),
    # Mistral: head_dim 16 with hidden 48 / 4 heads, GQA 2:1, a sliding window longer than the batch.
    "mistral_headdim_window": MistralConfig(hidden_size=48, intermediate_size=80, num_hidden_layers=2,
                                            num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                            sliding_window=4096, rope_theta=1e4, tie_word_embeddings=True,
                                            attn_implementation="eager", **COMMON),
    # A base model (no head, as an embedding model): scores are last-token hidden . w.
    "qwen3_base_model": Qwen3Config(hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                                    num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                    architectures=["Qwen3Model"], attn_implementation="eager", **COMMON),
}

# (attention, threshold, pad_multiple_of): radix on in both spaces, padded, and off.
SETTINGS = [("full", 1.0, None), ("compact", 1.0, None), ("compact", 1.0, 8), ("full", 0.0, None),
            ("compact", 0.0, None)]


class TestAgainstTransformers(EquivalenceAsserts, unittest.TestCase):
    def check_config(self, name, config, seed):
        model = tiny_model(config, seed=seed)
        model.train()
        sequences, groups = listwise_batch(config.vocab_size, seed=seed)
        weight = torch.randn(config.hidden_size, generator=torch.Generator().manual_seed(seed))
        ref = plain_step(model, sequences, groups, weight)
        for attention, threshold, pad in SETTINGS:
            what = "%s attention=%s threshold=%g pad=%s" % (name, attention, threshold, pad)
            with self.subTest(what):
                wrapper = rt.RadixMLP(model, attention=attention, threshold=threshold, pad_multiple_of=pad)
                got = radix_step(wrapper, sequences, groups, weight)
                plan = got[3].plan
                self.assertEqual(plan.use_radix, threshold > 0, what)
                if threshold > 0:
                    self.assertLess(plan.n_compact, plan.n_tokens, what)
                self.assert_same_step(got, ref, what)

    def test_configs(self):
        for seed, (name, config) in enumerate(sorted(CONFIGS.items())):
            self.check_config(name, config, seed + 1)

    def test_one_query_many_passages(self):
        """A listwise group as training uses it: one query, 24 passages, some repeated."""
        config = CONFIGS["qwen3_gqa4_bias_tied"]
        model = tiny_model(config, seed=7).train()
        sequences, groups = listwise_batch(config.vocab_size, seed=7, query_len=16,
                                           passages=(6, 9, 4, 9) + (5, 7, 3, 8) * 5, n_groups=1)
        ref_hidden, ref_loss, ref_grads = plain_step(model, sequences, groups)
        for attention in ("full", "compact"):
            wrapper = rt.RadixMLP(model, attention=attention, threshold=1.0)
            hidden, loss, got, plan = radix_step(wrapper, sequences, groups)
            self.assertLess(plan.plan.n_compact, 0.6 * plan.plan.n_tokens)
            self.assert_close(hidden, ref_hidden, attention + ": hidden rows")
            self.assert_close(loss, ref_loss, attention + ": loss")
            self.assert_same_grads(got, ref_grads, attention)

    def test_gradient_checkpointing(self):
        """model.activation_checkpointing_enable() is honoured (layers recomputed in backward), same grads."""
        config = CONFIGS["llama_linear_rope"]
        model = tiny_model(config, seed=3).train()
        sequences, groups = listwise_batch(config.vocab_size, seed=3)
        ref_hidden, _, ref_grads = plain_step(model, sequences, groups)
        model.activation_checkpointing_enable()
        calls = []
        for layer in model.model.layers:
            func = layer._gradient_checkpointing_func
            layer._gradient_checkpointing_func = lambda *a, func=func, **k: calls.append(1) or func(*a, **k)
        try:
            wrapper = rt.RadixMLP(model, attention="compact", threshold=1.0)
            hidden, _, got, _ = radix_step(wrapper, sequences, groups)
        finally:
            model.activation_checkpointing_disable()
        self.assertEqual(len(calls), config.num_hidden_layers, "each layer ran through the model's checkpoint function")
        self.assert_close(hidden, ref_hidden, "checkpointed: hidden rows")
        self.assert_same_grads(got, ref_grads, "checkpointed")


class TestWrapper(unittest.TestCase):
    def setUp(self):
        self.config = CONFIGS["qwen3_gqa4_bias_tied"]
        self.model = tiny_model(self.config, seed=11)
        self.sequences, _ = listwise_batch(self.config.vocab_size, seed=11)

    def test_no_copy(self):
        """The wrapper's parameters are the model's own objects; an optimizer step through the
        wrapper changes the model."""
        wrapper = rt.RadixMLP(self.model)
        self.assertEqual([id(p) for p in wrapper.parameters()], [id(p) for p in self.model.parameters()])
        before = self.model.model.layers[0].mlp.up_proj.weight.detach().clone()
        opt = torch.optim.AdamW(wrapper.parameters(), lr=1e-2)
        wrapper(wrapper.plan(self.sequences)).square().mean().backward()
        opt.step()
        self.assertGreater((self.model.model.layers[0].mlp.up_proj.weight - before).abs().max().item(), 0.0)

    def test_position_wise_parts_run_on_compact_rows(self):
        """Embedding, norms, projections and the MLP of every layer see N'pad rows, not N."""
        wrapper = rt.RadixMLP(self.model, attention="full", threshold=1.0, pad_multiple_of=4)
        plan = wrapper.plan(self.sequences)
        n_rows = {}
        hooks = []
        for name, module in self.model.named_modules():
            if name.endswith(("embed_tokens", "q_proj", "k_proj", "v_proj", "o_proj", "mlp", "input_layernorm",
                              "post_attention_layernorm", "model.norm")):
                hooks.append(module.register_forward_hook(
                    lambda mod, args, out, name=name: n_rows.__setitem__(name, args[0].shape[0])))
        try:
            wrapper.forward_compact(plan)
        finally:
            for h in hooks:
                h.remove()
        self.assertEqual(len(n_rows), 1 + 2 * 7 + 1)
        self.assertEqual(plan.plan.n_compact_padded % 4, 0)
        self.assertLess(plan.plan.n_compact_padded, plan.plan.n_tokens)
        for name, rows in n_rows.items():
            self.assertEqual(rows, plan.plan.n_compact_padded, name)

    def test_compact_attention_layout(self):
        """In compact space only owned rows are queries: one query of 16 tokens with 8 passages of 8
        is cut into pieces of 8 queries (the first sequence's 24 owned rows into three), so no query
        slot is padding; full space has every sequence's 24 rows."""
        rng = np.random.default_rng(0)
        query = rng.integers(1, 90, 16).tolist()
        passages = [[100 + i] + rng.integers(1, 90, 7).tolist() for i in range(8)]  # distinct first tokens
        plan = rt.TorchPlan.from_sequences([query + p for p in passages], threshold=1.0)
        compact, full = plan.layout("compact"), plan.layout("full")
        self.assertEqual(plan.plan.n_compact, 80)
        self.assertEqual((compact.n_att, compact.q_max, compact.k_max), (10, 8, 24))
        self.assertEqual(sorted(compact.q_index.tolist()), list(range(80)))
        self.assertEqual((full.n_att, full.q_max, full.k_max), (8, 24, 24))

    def test_plan_maps(self):
        """The TorchPlan's tensors are the library plan's maps, on the model's device."""
        wrapper = rt.RadixMLP(self.model, threshold=1.0)
        plan = wrapper.plan(self.sequences)
        p = plan.plan
        self.assertEqual(plan.scatter.tolist(), p.scatter.tolist())
        self.assertEqual(plan.input_ids.tolist(), p.compact_input_ids.tolist())
        self.assertEqual(plan.position_ids.tolist(), p.compact_position_ids.tolist())
        flat = [t for s in self.sequences for t in s]
        self.assertEqual(plan.input_ids[plan.scatter].tolist(), flat)
        self.assertEqual(plan.scatter.device, self.model.model.embed_tokens.weight.device)


if __name__ == "__main__":
    unittest.main()
