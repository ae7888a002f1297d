"""The prefix KV cache (``model.context(..., cache_bytes=n)``) on qwen3_tiny: over reranker-like
batches (one query, then passages) that share, repeat and extend earlier ones, a context with a
cache gives the outputs of one without (1e-5 relative to the largest value); the counters show
the hits of repeated prefixes; clearing empties the cache; a host attention callback is refused;
a budget smaller than one batch runs every batch without the cache, with no error, and one a
little larger than a batch evicts."""

import ctypes
import os

import numpy as np
import pytest

import radix_mlp
from radix_mlp import CacheStats, Model, Planner, RadixMLPError, _abi
from conftest import FIXTURES

MAX_TOKENS = 512
ZERO = CacheStats(*[0] * 11)


@pytest.fixture(scope="module")
def tiny():
    model = Model.load(os.path.join(FIXTURES, "qwen3_tiny"))
    yield model
    model.close()


def batch(planner, query, passages):
    """The plan of ``query`` followed by each passage, positions 0.. per sequence."""
    seqs = [list(query) + list(p) for p in passages]
    ids = [t for s in seqs for t in s]
    pos = [p for s in seqs for p in range(len(s))]
    return planner.build(ids, pos, np.cumsum([0] + [len(s) for s in seqs]))


@pytest.fixture(scope="module")
def trace():
    """Two queries with their passages, a repeated batch, one extending cached paths, one sharing
    nothing; the last repeats the first."""
    rng = np.random.default_rng(7)

    def passages(n):
        return [rng.integers(100, 1000, size=rng.integers(3, 10)).tolist() for _ in range(n)]

    q1, q2 = list(range(1, 13)), list(range(20, 30))
    first = passages(4)
    with Planner() as planner:
        return [batch(planner, q1, first), batch(planner, q1, passages(5)), batch(planner, q1, first),
                batch(planner, q2, passages(4)), batch(planner, q1, [p + [7, 8, 9] for p in first]),
                batch(planner, [], passages(6)), batch(planner, q1, first)]


@pytest.fixture(scope="module")
def cold(tiny, trace):
    with tiny.context(MAX_TOKENS) as ctx:
        outs = [ctx.forward(plan) for plan in trace]
        assert ctx.cache_stats() == ZERO  # no cache, no counters
        ctx.cache_clear()  # and nothing to clear
    return outs


def relative_diff(got, want):
    return float(np.max(np.abs(got.astype(np.float64) - want)) / np.max(np.abs(want)))


def run_trace(ctx, trace, cold):
    """Every plan through ``ctx`` (forward_compact read through scatter for the fourth), each output
    checked against the context without a cache; the counters after each batch."""
    seen = []
    for b, (plan, want) in enumerate(zip(trace, cold)):
        got = ctx.forward_compact(plan)[plan.scatter] if b == 3 else ctx.forward(plan)
        assert relative_diff(got, want) <= 1e-5, "batch %d" % b
        stats = ctx.cache_stats()
        assert stats.batches == b + 1, stats
        assert stats.hit_tokens + stats.computed_tokens == stats.lookups, stats
        assert stats.slots_used <= stats.slots and stats.bytes_in_use == stats.slots_used * stats.bytes_per_slot, stats
        seen.append(stats)
    return seen


def delta(seen, b):
    """Batch ``b``'s own counters: (looked up, hit, computed, bypassed)."""
    now, before = seen[b], seen[b - 1] if b else ZERO
    return (now.lookups - before.lookups, now.hit_tokens - before.hit_tokens,
            now.computed_tokens - before.computed_tokens, now.bypassed - before.bypassed)


def test_cached_context_matches_uncached_and_counts_hits(tiny, trace, cold):
    budget = 8 << 20
    with tiny.context(MAX_TOKENS, cache_bytes=budget) as ctx:
        assert repr(ctx) == "Context(max_tokens=512, attention='full', cache_bytes=%d)" % budget
        seen = run_trace(ctx, trace, cold)
        last = seen[-1]
        assert last.bytes_budget == budget and last.slots == budget // last.bytes_per_slot > 0, last
        assert last.bypassed == 0 and last.evicted_tokens == 0, last
        n = [plan.n_compact for plan in trace]
        assert delta(seen, 0) == (n[0], 0, n[0], 0)  # a cold cache computes every row
        assert delta(seen, 1)[0] == n[1] and delta(seen, 1)[1] >= 12  # the 12-token query is reused
        assert delta(seen, 2) == (n[2], n[2], 0, 0)  # a repeated batch is all hits
        assert delta(seen, 4)[1] >= n[0] and delta(seen, 4)[2] > 0  # an extension reuses the cached paths
        assert delta(seen, 5)[1] == 0  # nothing shared, nothing hit
        assert delta(seen, 6) == (n[6], n[6], 0, 0)
        assert last.slots_used == last.computed_tokens  # nothing evicted

        ctx.cache_clear()
        cleared = ctx.cache_stats()
        assert cleared.slots_used == 0 and cleared.bytes_in_use == 0, cleared
        assert (cleared.batches, cleared.lookups, cleared.hit_tokens) == (last.batches, last.lookups, last.hit_tokens)
        assert relative_diff(ctx.forward(trace[0]), cold[0]) <= 1e-5
        after = ctx.cache_stats()
        assert after.hit_tokens == cleared.hit_tokens and after.slots_used == n[0], after


def test_small_budgets_bypass_or_evict(tiny, trace, cold):
    with tiny.context(MAX_TOKENS, cache_bytes=1 << 20) as probe:
        slot = probe.cache_stats().bytes_per_slot
    assert min(plan.n_compact for plan in trace) > 3
    for budget in (1, slot // 2, 3 * slot):  # smaller than every batch
        with tiny.context(MAX_TOKENS, cache_bytes=budget) as ctx:
            last = run_trace(ctx, trace, cold)[-1]
        assert last.slots == budget // slot and last.bypassed == len(trace), last
        assert last.hit_tokens == 0 and last.slots_used == 0, last
    largest, total = max(p.n_compact for p in trace), sum(p.n_compact for p in trace)
    assert largest + 5 < total // 2
    with tiny.context(MAX_TOKENS, cache_bytes=(largest + 5) * slot) as ctx:  # larger than any batch
        last = run_trace(ctx, trace, cold)[-1]
    assert last.bypassed == 0 and last.evicted_tokens > 0 and last.hit_tokens > 0, last


def test_host_attention_is_refused(tiny, trace):
    calls = []

    def attention(user_data, args):
        calls.append(args)
        return 0

    callback = _abi.rmlp_attention_fn(attention)
    plan = trace[0]
    out = np.empty((plan.n_tokens, tiny.config.hidden_size), np.float32)
    with tiny.context(MAX_TOKENS, cache_bytes=1 << 20) as ctx:
        for fn in (radix_mlp._LIB.rmlp_forward, radix_mlp._LIB.rmlp_forward_compact):
            status = fn(ctx._handle, ctypes.byref(plan._as_c()), callback, None, out.ctypes.data)
            assert status == radix_mlp.RMLP_ERR_UNSUPPORTED and "prefix cache" in radix_mlp.last_error()
        assert calls == [] and ctx.cache_stats().slots_used == 0
        ctx.forward(plan)
        assert ctx.cache_stats().slots_used == plan.n_compact


def test_cache_bytes_checks(tiny):
    with pytest.raises(TypeError, match="cache_bytes must be an int, got 1.5"):
        tiny.context(8, cache_bytes=1.5)
    with pytest.raises(TypeError, match="cache_bytes must be an int, got True"):
        tiny.context(8, cache_bytes=True)
    with pytest.raises(ValueError, match=r"cache_bytes=-1 must be in \[0, 2\^64\)"):
        tiny.context(8, cache_bytes=-1)
    with tiny.context(8, cache_bytes=np.uint64(1 << 20)) as ctx:
        assert ctx.cache_stats().bytes_budget == 1 << 20
    ctx = tiny.context(8, cache_bytes=1 << 20)
    ctx.close()
    with pytest.raises(ValueError, match="closed"):
        ctx.cache_stats()
    with pytest.raises(ValueError, match="closed"):
        ctx.cache_clear()
