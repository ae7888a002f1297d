"""radix_mlp.torch on the committed transformers fixtures (integration_tests/fixtures): the wrapped
forward (radix on, attention in full and in compact space) reproduces the committed references
(expected.safetensors, within the fixtures' 1e-4), and outputs and every gradient of a listwise loss
equal the plain model's within 1e-5 relative (fp32, CPU). Covers the fixtures' cases: untied and
tied heads, bf16 weights upcast, sharded checkpoints, biases, a base model with no "model."
prefix, Qwen2's sliding window switched off per layer and Mistral's window longer than the batch,
sliding windows shorter than the shared prefix (Qwen2's per layer, Mistral's, Gemma 2/3's), RoPE
scaling (llama3, yarn, linear), Gemma's embedding scale and sandwich norms, Gemma 2's soft-caps (the
final one through ``RadixMLP.logits``) and Gemma 3's local/global RoPE (fixtures gemma_bias,
gemma2_window, gemma3_text)."""

import json
import os
import unittest

import torch
import transformers
from safetensors.torch import load_file

import radix_mlp.torch as rt
from _common import FIXTURES, EquivalenceAsserts, plain_step, radix_step

FIXTURE_TOL = 1e-4  # integration_tests/fixtures/README.md: max abs error vs expected.safetensors
GROUPS = [[0, 1, 2, 3], [4, 5]]


def fixture_names():
    return sorted(d for d in os.listdir(FIXTURES) if os.path.isfile(os.path.join(FIXTURES, d, "batch.json")))


def load_fixture(name):
    folder = os.path.join(FIXTURES, name)
    with open(os.path.join(folder, "config.json")) as f:
        causal = any(a.endswith("ForCausalLM") for a in json.load(f).get("architectures") or [])
    cls = transformers.AutoModelForCausalLM if causal else transformers.AutoModel
    model = cls.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager")
    with open(os.path.join(folder, "batch.json")) as f:
        batch = json.load(f)
    expected = load_file(os.path.join(folder, "expected.safetensors"))
    return model, batch["input_ids"], expected


class TestFixtures(EquivalenceAsserts, unittest.TestCase):
    def test_fixture_names(self):
        self.assertGreaterEqual(len(fixture_names()), 14)

    def test_reference_outputs(self):
        """The wrapped forward against what transformers computed for the fixtures (committed)."""
        for name in fixture_names():
            model, sequences, expected = load_fixture(name)
            model.eval()
            for attention in ("full", "compact"):
                with self.subTest(fixture=name, attention=attention), torch.no_grad():
                    wrapper = rt.RadixMLP(model, attention=attention, threshold=1.0)
                    plan = wrapper.plan(sequences)
                    self.assertTrue(plan.plan.use_radix)
                    hidden_c = wrapper.forward_compact(plan)
                    checks = {"last_hidden": plan.to_batch(hidden_c), "pooled_last": plan.pool(hidden_c, "last"),
                              "pooled_mean": plan.pool(hidden_c, "mean")}
                    if "logits_last" in expected:
                        checks["logits_last"] = wrapper.logits(plan.pool(hidden_c, "last"))
                    for key, got in checks.items():
                        ref = expected[key]
                        self.assertEqual(tuple(got.shape), tuple(ref.shape), key)
                        err = (got - ref).abs().max().item()
                        self.assertLessEqual(err, FIXTURE_TOL, "%s %s %s: max abs error %.3g" % (name, attention, key,
                                                                                                 err))

    def test_gradients(self):
        """Outputs, loss and every parameter's gradient against the plain model, on the fixture batch."""
        for name in fixture_names():
            model, sequences, _ = load_fixture(name)
            model.train()
            weight = torch.linspace(-1, 1, model.config.hidden_size)
            ref_hidden, ref_loss, ref_grads = plain_step(model, sequences, GROUPS, weight)
            for attention, threshold in (("full", 1.0), ("compact", 1.0), ("compact", 0.0)):
                what = "%s attention=%s threshold=%g" % (name, attention, threshold)
                with self.subTest(what):
                    wrapper = rt.RadixMLP(model, attention=attention, threshold=threshold)
                    hidden, loss, got, _ = radix_step(wrapper, sequences, GROUPS, weight)
                    self.assert_close(hidden, ref_hidden, what + ": hidden rows")
                    self.assert_close(loss, ref_loss, what + ": loss")
                    self.assert_same_grads(got, ref_grads, what)


if __name__ == "__main__":
    unittest.main()
