"""torch.autograd.gradcheck of radix_mlp.torch in float64 on a tiny model: the analytic gradient of the
wrapped forward (batch rows, through the compact rows) with respect to every parameter against finite
differences, with attention in compact space (the whole Jacobian) and in full space (gradcheck's fast mode: a
random projection of it, to keep the test short) on a padded radix plan.

transformers computes RMSNorm in float32 whatever the dtype (and eager attention's softmax too), which
puts float32 rounding into a float64 forward and makes finite differences disagree with any exact
gradient (also the plain model's). Here the norms run in the input's dtype (the same formula) and
attention is sdpa, which stays in float64."""

import types
import unittest

import torch
from torch.func import functional_call
from transformers import Qwen3Config

import radix_mlp.torch as rt
from _common import tiny_model

SEQUENCES = [[5, 3, 7, 2], [5, 3, 7, 9, 1], [5, 3, 4], [5, 3, 7, 2], [8, 3]]


def rms_norm_in_input_dtype(self, x):
    """The model's RMSNorm formula without its float32 round trip."""
    return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon))


def keep_float64(model):
    norms = [m for m in model.modules() if type(m).__name__.endswith("RMSNorm")]
    assert norms and all(hasattr(m, "variance_epsilon") for m in norms)
    for m in norms:
        m.forward = types.MethodType(rms_norm_in_input_dtype, m)
    return model


class TestGradcheck(unittest.TestCase):
    def test_gradcheck_float64(self):
        config = Qwen3Config(vocab_size=12, hidden_size=8, intermediate_size=10, num_hidden_layers=1,
                             num_attention_heads=2, num_key_value_heads=1, head_dim=4, attention_bias=True,
                             max_position_embeddings=16, architectures=["Qwen3Model"], attn_implementation="sdpa")
        model = keep_float64(tiny_model(config, seed=5, dtype=torch.float64).train())
        for attention, fast in (("compact", False), ("full", True)):
            with self.subTest(attention=attention):
                wrapper = rt.RadixMLP(model, attention=attention, threshold=1.0, pad_multiple_of=4)
                plan = wrapper.plan(SEQUENCES)
                self.assertTrue(plan.plan.use_radix)
                self.assertLess(plan.plan.n_compact, plan.plan.n_tokens)
                names = [n for n, _ in wrapper.named_parameters()]
                params = tuple(p.detach().clone().requires_grad_(True) for _, p in wrapper.named_parameters())

                def rows(*tensors):
                    return functional_call(wrapper, dict(zip(names, tensors)), (plan,))

                self.assertEqual(rows(*params).shape, (plan.plan.n_tokens, config.hidden_size))
                self.assertTrue(torch.autograd.gradcheck(rows, params, eps=1e-6, atol=1e-8, rtol=1e-6,
                                                         fast_mode=fast))


if __name__ == "__main__":
    unittest.main()
