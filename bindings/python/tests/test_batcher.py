"""The batcher and the routing key through the Python bindings: a small queue's batches checked by
hand (prefix grouping, FIFO, the age bound, the budget in compact rows), refusals with their
status, every request answered once with its own tokens, the batch fed to the planner as it is,
the prefix cache's preference on qwen3_tiny, and keys against an independent implementation
(FNV-1a 64 + fmix64, here in Python)."""

import os

import numpy as np
import pytest

import radix_mlp
from radix_mlp import Batcher, Planner, RadixMLPError, route_key, route_key_header
from conftest import FIXTURES


def python_key(ids):
    mask, h = (1 << 64) - 1, 0xCBF29CE484222325
    for t in ids:
        for b in int(t).to_bytes(4, "little"):
            h = ((h ^ b) * 0x100000001B3) & mask
    for shift, mul in ((33, 0xFF51AFD7ED558CCD), (33, 0xC4CEB9FE1A85EC53)):
        h = ((h ^ (h >> shift)) * mul) & mask
    return h ^ (h >> 33)


def interleaved(b):
    for rid, tokens, t in [(10, [1, 2, 3, 10], 0), (20, [7, 8, 9], 1), (30, [4, 5, 6, 20], 2), (11, [1, 2, 3, 11], 3),
                           (31, [4, 5, 6, 21], 4), (12, [1, 2, 3, 12], 5)]:
        b.push(rid, tokens, t)


def test_prefix_groups_and_fifo():
    with Batcher(max_wait_us=2**64 - 1) as b:
        interleaved(b)
        batch = b.next_batch(12, 8, 100)
        assert list(batch.ids) == [10, 11, 12] and batch.shared_tokens == 6 and len(batch) == 3
        assert list(batch.tokens(1)) == [1, 2, 3, 11]
        assert list(b.next_batch(12, 8, 100).ids) == [30, 31, 20]
        assert len(b.next_batch(12, 8, 100)) == 0
    with Batcher(mode="fifo") as b:
        interleaved(b)
        assert list(b.next_batch(12, 8, 100).ids) == [10, 20, 30]
        b.push(40, [9] * 20, 6)
        assert list(b.next_batch(100, 2, 100).ids) == [11, 31]
        assert list(b.next_batch(12, 8, 100).ids) == [12]
        batch = b.next_batch(12, 8, 100)
        assert list(batch.ids) == [40] and batch.oversized


def test_rows_budget():
    shared = [(1, [1, 2, 3, 4, 5, 6, 7, 8]), (2, [1, 2, 3, 4, 5, 6, 7, 9]), (3, [9, 9, 9, 9])]
    for mode in ("fifo", "prefix"):
        with Batcher(mode=mode, max_wait_us=2**64 - 1) as b:
            for rid, tokens in shared:
                b.push(rid, tokens, 0)
            batch = b.next_batch(100, 8, 0, max_rows=9)  # rows 8 + 1
            assert list(batch.ids) == [1, 2] and batch.shared_tokens == 7, mode
            assert list(b.next_batch(100, 8, 0, max_rows=9).ids) == [3], mode
    with Batcher(mode="fifo") as b:
        for rid, tokens in shared[:2]:
            b.push(rid, tokens, 0)
        assert list(b.next_batch(9, 8, 0).ids) == [1]  # the token budget alone: one
        with pytest.raises(RadixMLPError) as e:
            b.next_batch(100, 8, 0, max_rows=0)
        assert e.value.status == radix_mlp.RMLP_ERR_INVALID_ARGUMENT and "max_rows is 0" in e.value.message
        with pytest.raises(ValueError):
            b.next_batch(100, 8, 0, max_rows=-1)
        b.push(3, [5] * 20, 0)  # 20 rows, more than max_rows: alone, after id 2
        assert list(b.next_batch(100, 8, 0, max_rows=9).ids) == [2]
        batch = b.next_batch(100, 8, 0, max_rows=9)
        assert list(batch.ids) == [3] and batch.oversized


def test_age_bound():
    b = Batcher(max_wait_us=100)
    b.push(1, [9, 9, 9, 9], 0)
    for rid, last in ((2, 4), (3, 5), (4, 6)):
        b.push(rid, [1, 2, 3, last], 150)
    batch = b.next_batch(8, 8, 200)  # the aged loner; the group (12 tokens) does not fit whole: not split
    assert list(batch.ids) == [1] and batch.n_aged == 1 and list(batch.arrival_us) == [0]
    batch = b.next_batch(8, 8, 200)  # the group starts the next batch (larger than it: cut)
    assert list(batch.ids) == [2, 3] and batch.n_aged == 0 and list(batch.arrival_us) == [150, 150]
    b.close()
    with pytest.raises(ValueError, match="closed"):
        b.push(5, [1], 0)


def test_refusals():
    b = Batcher(max_requests=2, max_queued_tokens=8)
    b.push(1, [1, 2, 3], 0)
    for args, status, words in [((1, [4], 0), radix_mlp.RMLP_ERR_INVALID_ARGUMENT, "already queued"),
                                ((2, [], 0), radix_mlp.RMLP_ERR_INVALID_ARGUMENT, "is empty"),
                                ((2, [0] * 9, 0), radix_mlp.RMLP_ERR_TOO_LARGE, "more than the queue holds"),
                                ((2, [0] * 6, 0), radix_mlp.RMLP_ERR_FULL, "the queue is full")]:
        with pytest.raises(RadixMLPError) as e:
            b.push(*args)
        assert e.value.status == status and words in e.value.message, e.value.message
    assert radix_mlp.RMLP_ERR_FULL == -13 and radix_mlp.status_string(-13) == "queue full"
    assert RadixMLPError(-13, "").status_name == "RMLP_ERR_FULL"
    assert b.pending() == (1, 3)
    with pytest.raises(RadixMLPError, match="no request with id=9"):
        b.remove(9)
    with pytest.raises(RadixMLPError, match="max_seqs is 0"):
        b.next_batch(8, 0, 0)
    with pytest.raises(ValueError):
        b.push(-1, [1], 0)
    with pytest.raises(ValueError):
        Batcher(mode="lifo")
    with pytest.raises(RadixMLPError, match="max_requests is 0"):
        Batcher(max_requests=0)


def test_every_request_once_and_planned():
    rng = np.random.default_rng(3)
    b, planner, pushed, answered = Batcher(max_wait_us=50), Planner(), {}, set()
    for rnd in range(150):
        for k in range(3):
            rid = rnd * 3 + k
            head = [int(rng.integers(1, 4))] * 4
            tokens = (head + list(rng.integers(1, 20, size=int(rng.integers(0, 8)))))[:int(rng.integers(1, 12))]
            b.push(rid, tokens, rnd * 10)
            pushed[rid] = tokens
        batch = b.next_batch(40, 4, rnd * 10)
        for i, rid in enumerate(batch.ids):
            assert int(rid) not in answered and list(batch.tokens(i)) == pushed[int(rid)]
            answered.add(int(rid))
        if len(batch):
            plan = planner.build(batch.input_ids, batch.position_ids, batch.cu_seqlens)
            assert batch.shared_tokens == plan.n_tokens - plan.n_distinct
    while True:
        batch = b.next_batch(1000, 100, 2**40)
        if not len(batch):
            break
        answered.update(int(r) for r in batch.ids)
    assert answered == set(pushed)


def test_cached_groups_preferred():
    model = radix_mlp.Model.load(os.path.join(FIXTURES, "qwen3_tiny"))
    with model.context(64, cache_bytes=1 << 20) as ctx, model.context(64) as plain:
        plan = Planner().build([1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 7], list(range(6)) * 2, [0, 6, 12])
        ctx.forward(plan)
        assert radix_mlp.cached_prefix(ctx, [1, 2, 3, 4, 5, 9]) == 5
        assert radix_mlp.cached_prefix(ctx, [2, 2]) == 0 and radix_mlp.cached_prefix(plain, [1, 2]) == 0
        # Arriving together, the group under the cached prefix first with the cache; an older group
        # first whatever is cached (with a cache the batches go by age).
        b = Batcher(max_wait_us=2**64 - 1)
        for i in range(3):
            b.push(10 + i, [8, 8, 8, 8, 8, i, i], 1)  # nothing cached
            b.push(20 + i, [1, 2, 3, 4, 5, i, i], 1)  # under the cached prefix
            b.push(30 + i, [9, 9, 9, 9, 9, i, i], 0)  # older, nothing cached
        batch = b.next_batch(21, 8, 3, context=ctx)
        assert list(batch.ids) == [30, 31, 32] and batch.cached_tokens == 0
        batch = b.next_batch(21, 8, 3, context=ctx, max_rows=11)  # rows 7 + 2 + 2
        assert list(batch.ids) == [20, 21, 22] and batch.cached_tokens == 5 and not batch.cache_skipped
        assert list(b.next_batch(21, 8, 3).ids) == [10, 11, 12]
        with pytest.raises(RadixMLPError, match="no prefix cache"):
            b.next_batch(21, 8, 3, context=plain)
        with pytest.raises(RadixMLPError, match="no prefix cache"):
            b.next_batch(21, 8, 3, context=plain, max_rows=21)


def test_route_keys():
    for ids in ([], [0], [1, 2, 3], [151668, 7, 2**32 - 1], list(range(64))):
        assert route_key(ids, prefix_tokens=1000) == (python_key(ids), len(ids))
    ids = list(range(80))
    assert route_key(ids) == (python_key(ids[:64]), 64)
    assert route_key(ids, prefix_tokens=5) == (python_key(ids[:5]), 5)
    assert route_key(ids, separator=3) == (python_key(ids[:4]), 4)
    assert route_key_header(0xF50E90AAE860FE4C) == "f50e90aae860fe4c" and route_key_header(1) == "0" * 15 + "1"
    with pytest.raises(RadixMLPError, match="prefix_tokens is 0"):
        route_key(ids, prefix_tokens=0)
