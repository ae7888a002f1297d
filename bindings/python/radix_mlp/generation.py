"""generation: text generation on the prefix tree, the host loop around Context.generate_* with
greedy decoding or seeded numpy sampling (temperature, top-k, top-p), EOS ids and a token budget.

The prompts run as one batch: prefilled once through the context's prefix cache (shared
prefixes computed once), then one decode step for every active sequence at a time."""

import math
import numbers

import numpy as np

from .model import Context, Model
from .planner import plan_sequences

__all__ = ["generate", "sample_token"]


def _slot_bytes(config):
    """Bytes of one prefix-cache slot: a row's K and V in every layer and its hidden state."""
    kv = 2 * config.num_hidden_layers * config.num_key_value_heads * config.head_dim
    return (kv + config.hidden_size) * 4


def sample_token(logits, temperature=0.0, top_k=0, top_p=1.0, rng=None):
    """The next token id from one logits row (vocab,): the argmax (the lowest id on ties) at
    ``temperature`` 0, else a draw from the softmax of ``logits / temperature`` restricted to the
    ``top_k`` largest (0: all) and then to the fewest most likely tokens whose probability reaches
    ``top_p`` (1: all), with ``rng`` (a numpy Generator)."""
    logits = np.asarray(logits)
    if temperature == 0:
        return int(np.argmax(logits))
    order = np.argsort(-logits.astype(np.float64), kind="stable")  # descending, lower ids first on ties
    if 0 < top_k < order.shape[0]:
        order = order[:top_k]
    scaled = (logits[order].astype(np.float64) - float(logits[order[0]])) / temperature
    weights = np.exp(scaled)
    probs = weights / weights.sum()
    if top_p < 1.0:
        keep = min(int(np.searchsorted(np.cumsum(probs), top_p)) + 1, order.shape[0])  # the nucleus
        order, weights = order[:keep], weights[:keep]
    u = rng.random() * weights.sum()
    at = int(np.searchsorted(np.cumsum(weights), u, side="right"))
    return int(order[min(at, order.shape[0] - 1)])


def _check_options(max_new_tokens, temperature, top_k, top_p, seed, eos):
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, numbers.Integral):
        raise TypeError("max_new_tokens must be an int, got %r" % (max_new_tokens,))
    if not 1 <= max_new_tokens < 1 << 32:
        raise ValueError("max_new_tokens=%d must be in 1..2^32-1" % max_new_tokens)
    if not isinstance(temperature, numbers.Real) or not math.isfinite(temperature) or temperature < 0:
        raise ValueError("temperature=%r must be a finite number >= 0" % (temperature,))
    if isinstance(top_k, bool) or not isinstance(top_k, numbers.Integral) or top_k < 0:
        raise ValueError("top_k=%r must be an int >= 0 (0: no limit)" % (top_k,))
    if not isinstance(top_p, numbers.Real) or not 0 < top_p <= 1:
        raise ValueError("top_p=%r must be in (0, 1]" % (top_p,))
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ValueError("seed=%r must be an int >= 0" % (seed,))
    if eos is None:
        return frozenset()
    if isinstance(eos, numbers.Integral):
        eos = [eos]
    eos = frozenset(int(e) for e in eos)
    if any(e < 0 for e in eos):
        raise ValueError("eos ids must be >= 0, got %s" % sorted(eos))
    return eos


def generate(model_or_context, prompts, max_new_tokens=32, temperature=0.0, top_k=0, top_p=1.0, seed=0, eos=None,
             shared_prefix_attention=True):
    """Continues each prompt (a sequence of token ids) and returns the generated ids, one list per
    prompt in order. Greedy by default (``temperature=0``: the argmax, as transformers'
    ``generate(do_sample=False)``); with a temperature, each token is drawn by ``sample_token``
    (``top_k``, ``top_p``) from a numpy generator seeded with ``(seed, prompt index)``, so a
    prompt's draws do not depend on the others and a seed repeats them. A sequence finishes at an
    id of ``eos`` (an int or ids; kept in its output; None: no EOS) or after ``max_new_tokens``.

    ``model_or_context``: a Model (a context with a prefix cache large enough for the prompts and
    every generated row is made and closed here) or a Context with a prefix cache (``cache_bytes``
    > 0) and ``max_tokens`` for the prompts; its cache keeps the rows afterwards, so later
    prompts that continue them are not recomputed. Raises ValueError/TypeError for bad arguments
    and RadixMLPError for what the library refuses (no LM head, no cache, a full cache)."""
    eos = _check_options(max_new_tokens, temperature, top_k, top_p, seed, eos)
    if isinstance(model_or_context, Model):
        model, context = model_or_context, None
    elif isinstance(model_or_context, Context):
        model, context = model_or_context.model, model_or_context
    else:
        raise TypeError("model_or_context must be a radix_mlp.Model or Context, got %r" % (model_or_context,))
    plan = plan_sequences(prompts, 1.0, "generate", "prompts")  # threshold 1: shared rows computed once
    if context is None:
        budget = (plan.n_tokens + plan.n_seqs * max_new_tokens + 64) * _slot_bytes(model.config)
        with Context(model, plan.n_tokens, cache_bytes=budget) as own:
            return _run(own, plan, max_new_tokens, temperature, top_k, top_p, seed, eos, shared_prefix_attention)
    return _run(context, plan, max_new_tokens, temperature, top_k, top_p, seed, eos, shared_prefix_attention)


def _run(context, plan, max_new_tokens, temperature, top_k, top_p, seed, eos, shared_prefix_attention):
    n = plan.n_seqs
    rngs = [np.random.default_rng([int(seed), s]) for s in range(n)] if temperature > 0 else [None] * n
    out = [[] for _ in range(n)]
    logits = context.generate_begin(plan, max_new_tokens=max_new_tokens,
                                    shared_prefix_attention=shared_prefix_attention)
    try:
        active = list(range(n))
        while active:
            tokens, still = [], []
            for i, s in enumerate(active):
                token = sample_token(logits[i], temperature, top_k, top_p, rngs[s])
                out[s].append(token)
                if token in eos or len(out[s]) >= max_new_tokens:
                    context.generate_finish(s)
                else:
                    tokens.append(token)
                    still.append(s)
            if tokens:
                logits = context.generate_step(tokens)
            active = still
    finally:
        context.generate_end()
    return out
