"""Shared pieces of the radix_mlp.torch tests: tiny random transformers models, listwise batches,
the plain model's forward and loss (each sequence run alone, as transformers runs it), and the
comparison of outputs and every parameter's gradient.

Tolerance: a tensor matches its reference when max |got - ref| <= RTOL * max |ref| (relative to the
tensor's largest value; element-wise relative error is meaningless for entries near zero)."""

import os

import numpy as np
import torch
import torch.nn.functional as F
import transformers

RTOL = 1e-5
torch.set_num_threads(1)  # tiny models: one thread is fastest, and the test machine has 2 shared cores
transformers.utils.logging.disable_progress_bar()
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
FIXTURES = os.path.join(ROOT, "integration_tests", "fixtures")


def randomize(model, seed):
    """Weights like the committed fixtures' (tools/make_fixtures.py): Linear ~ N(0, 1/in), embeddings
    ~ N(0, 0.3^2), biases ~ N(0, 0.2^2), RMSNorm weights ~ 1 + 0.1 N(0, 1): activations O(1), every
    norm weight matters (transformers' own init, std 0.02, leaves the layers nearly linear)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            shape = p.shape
            if name.endswith("embed_tokens.weight"):
                values = 0.3 * torch.randn(shape, generator=gen, dtype=torch.float64)
            elif name.endswith("bias"):
                values = 0.2 * torch.randn(shape, generator=gen, dtype=torch.float64)
            elif p.dim() == 1:  # RMSNorm weights
                values = 1 + 0.1 * torch.randn(shape, generator=gen, dtype=torch.float64)
            else:
                values = torch.randn(shape, generator=gen, dtype=torch.float64) / shape[1] ** 0.5
            p.copy_(values.to(p.dtype))
    return model


def tiny_model(config, seed=0, dtype=torch.float32):
    """A causal LM (or a base model when ``config.architectures`` names one) from ``config``."""
    torch.manual_seed(seed)
    if config.architectures and not config.architectures[0].endswith("ForCausalLM"):
        model = transformers.AutoModel.from_config(config)
    else:
        model = transformers.AutoModelForCausalLM.from_config(config)
    return randomize(model.to(dtype), seed)


def listwise_batch(vocab, seed=0, query_len=9, passages=(7, 11, 5, 11, 1, 8), n_groups=2):
    """Groups of (query + passage) sequences: each group one query, passages of the given lengths;
    in each group passage 3 repeats passage 1 (a whole sequence shared) and passage 2 is a prefix of
    passage 1; the last group's query starts with the first group's first tokens. Returns
    (sequences, groups) with groups a list of index lists."""
    rng = np.random.default_rng(seed)
    sequences, groups = [], []
    first_query = None
    for g in range(n_groups):
        query = [int(t) for t in rng.integers(1, vocab, query_len)]
        if first_query is None:
            first_query = query
        else:
            query[:3] = first_query[:3]
        texts = [[int(t) for t in rng.integers(1, vocab, n)] for n in passages]
        if len(texts) > 3:
            texts[3] = list(texts[1])
            texts[2] = texts[1][: len(texts[2])]
        groups.append(list(range(len(sequences), len(sequences) + len(texts))))
        sequences.extend(query + t for t in texts)
    return sequences, groups


def base_of(model):
    return getattr(model, "base_model", model)


def listwise_loss(model, last, mean, groups, score_tokens=(3, 4), weight=None):
    """Softmax cross-entropy over each group's scores (target: the group's first passage) plus a
    small mean-pooling term so every row's output carries gradient. Scores: the LM head's logit
    difference of two tokens when the model has a head, else ``last @ weight``."""
    head = getattr(model, "lm_head", None)
    if head is not None:
        logits = head(last)
        scores = logits[:, score_tokens[0]] - logits[:, score_tokens[1]]
    else:
        scores = last @ weight
    loss = 0.0
    for g in groups:
        loss = loss + F.cross_entropy(scores[g][None], torch.zeros(1, dtype=torch.long))
    return loss + 0.1 * (mean @ torch.linspace(-1, 1, mean.shape[1], dtype=mean.dtype)).square().mean()


def plain_forward(model, sequences):
    """The base model's last_hidden_state of each sequence run alone: (n_tokens, H)."""
    base = base_of(model)
    return torch.cat([base(input_ids=torch.tensor([s])).last_hidden_state[0] for s in sequences])


def pooled(hidden, sequences):
    """(last, mean) of each sequence from batch rows (n_tokens, H)."""
    cu = np.concatenate([[0], np.cumsum([len(s) for s in sequences])])
    last = torch.stack([hidden[cu[i + 1] - 1] for i in range(len(sequences))])
    mean = torch.stack([hidden[cu[i]:cu[i + 1]].mean(0) for i in range(len(sequences))])
    return last, mean


def grads(model):
    """{name: grad or None} of every parameter (copies)."""
    return {n: None if p.grad is None else p.grad.detach().clone() for n, p in model.named_parameters()}


def plain_step(model, sequences, groups, weight=None):
    """Forward, listwise loss and backward of the plain model: (hidden rows, loss, grads)."""
    model.zero_grad(set_to_none=True)
    hidden = plain_forward(model, sequences)
    loss = listwise_loss(model, *pooled(hidden, sequences), groups, weight=weight)
    loss.backward()
    result = (hidden.detach().clone(), loss.detach().clone(), grads(model))
    model.zero_grad(set_to_none=True)
    return result


def radix_step(wrapper, sequences, groups, weight=None, plan=None):
    """The same through the wrapper: (hidden rows, loss, grads, plan)."""
    model = wrapper.model
    model.zero_grad(set_to_none=True)
    plan = wrapper.plan(sequences) if plan is None else plan
    hidden_c = wrapper.forward_compact(plan)
    loss = listwise_loss(model, plan.pool(hidden_c, "last"), plan.pool(hidden_c, "mean"), groups, weight=weight)
    loss.backward()
    result = (plan.to_batch(hidden_c).detach().clone(), loss.detach().clone(), grads(model), plan)
    model.zero_grad(set_to_none=True)
    return result


def relative_error(got, ref):
    """max |got - ref| / max |ref| (0/0 = 0)."""
    scale = ref.abs().max().item()
    diff = (got - ref).abs().max().item()
    if scale == 0.0:
        return 0.0 if diff == 0.0 else float("inf")
    return diff / scale


class EquivalenceAsserts:
    """Mixin for unittest.TestCase: outputs and every gradient within RTOL of the reference."""

    def assert_close(self, got, ref, what, rtol=RTOL):
        self.assertEqual(tuple(got.shape), tuple(ref.shape), what)
        self.assertTrue(torch.isfinite(got).all().item(), "%s: not finite" % what)
        err = relative_error(got, ref)
        self.assertLessEqual(err, rtol, "%s: max|got-ref|/max|ref| = %.3g > %g" % (what, err, rtol))
        return err

    def assert_same_step(self, got, ref, what, rtol=RTOL):
        """got, ref: (hidden rows, loss, grads) of radix_step / plain_step: each within rtol."""
        self.assert_close(got[0], ref[0], what + ": hidden rows", rtol)
        self.assert_close(got[1], ref[1], what + ": loss", rtol)
        return self.assert_same_grads(got[2], ref[2], what, rtol)

    def assert_same_grads(self, got, ref, what, rtol=RTOL):
        self.assertEqual(sorted(got), sorted(ref), what)
        n_checked, worst = 0, 0.0
        for name in ref:
            if ref[name] is None:
                self.assertIsNone(got[name], "%s: %s has a gradient, the plain model's has none" % (what, name))
                continue
            self.assertIsNotNone(got[name], "%s: %s has no gradient" % (what, name))
            self.assertGreater(ref[name].abs().max().item(), 0.0, "%s: %s's reference gradient is zero" % (what, name))
            worst = max(worst, self.assert_close(got[name], ref[name], "%s: grad of %s" % (what, name), rtol))
            n_checked += 1
        self.assertGreater(n_checked, 0, what)
        return worst
