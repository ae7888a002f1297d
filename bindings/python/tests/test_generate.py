"""Generation through the Python bindings (Context.generate_*, radix_mlp.generate): greedy ids
equal transformers' ``generate(do_sample=False)`` on every fixture with an LM head (generate.json,
tools/make_generate_fixtures.py), from a Model and from a Context with a cache, shared-prefix
attention on and off; the session driven by hand gives the same ids, its active set and
counters follow the steps; seeded sampling repeats itself, changes with the seed, and with
top_k=1 equals greedy; bad input raises RadixMLPError / ValueError / TypeError."""

import json
import os

import numpy as np
import pytest

from conftest import FIXTURES, FIXTURE_NAMES


def _load(name):
    path = os.path.join(FIXTURES, name, "generate.json")
    with open(path) as f:
        return json.load(f)


GENERATE_FIXTURES = [n for n in FIXTURE_NAMES if os.path.exists(os.path.join(FIXTURES, n, "generate.json"))]


def _model(rm, name):
    return rm.Model.load(os.path.join(FIXTURES, name))


def _plan(rm, prompts):
    ids = np.concatenate([np.asarray(p, dtype=np.uint32) for p in prompts])
    pos = np.concatenate([np.arange(len(p), dtype=np.uint32) for p in prompts])
    cu = np.concatenate([[0], np.cumsum([len(p) for p in prompts])]).astype(np.uint32)
    return rm.Planner().build(ids, pos, cu, threshold=1.0)


def test_every_lm_fixture_has_generate_json():
    assert len(GENERATE_FIXTURES) >= 8, GENERATE_FIXTURES
    assert "qwen3_embedding_noprefix" not in GENERATE_FIXTURES


@pytest.mark.parametrize("name", GENERATE_FIXTURES)
@pytest.mark.parametrize("shared", [True, False])
def test_greedy_matches_transformers(rm, name, shared):
    f = _load(name)
    model = _model(rm, name)
    got = rm.generate(model, f["prompts"], max_new_tokens=f["max_new_tokens"], eos=f["eos_token_id"],
                      shared_prefix_attention=shared)
    assert got == f["generated"]


def test_greedy_on_a_context_keeps_rows_cached(rm):
    f = _load(GENERATE_FIXTURES[0])
    model = _model(rm, GENERATE_FIXTURES[0])
    ctx = model.context(256, cache_bytes=32 << 20)
    first = rm.generate(ctx, f["prompts"], max_new_tokens=f["max_new_tokens"], eos=f["eos_token_id"])
    computed = ctx.cache_stats().computed_tokens
    again = rm.generate(ctx, f["prompts"], max_new_tokens=f["max_new_tokens"], eos=f["eos_token_id"])
    assert first == again == f["generated"]
    assert ctx.cache_stats().computed_tokens == computed  # every prompt and generated row was cached


def test_session_by_hand(rm):
    name = GENERATE_FIXTURES[0]
    f = _load(name)
    model = _model(rm, name)
    n, max_new, eos = len(f["prompts"]), f["max_new_tokens"], set(f["eos_token_id"])
    with model.context(256, cache_bytes=32 << 20) as ctx:
        assert ctx.generate_active().tolist() == []
        assert ctx.generate_stats() == rm.GenerateStats(0, 0, 0, 0, 0, 0.0, 0.0)
        logits = ctx.generate_begin(_plan(rm, f["prompts"]), max_new_tokens=max_new)
        assert logits.shape == (n, model.config.vocab_size) and logits.dtype == np.float32
        got, steps, rows = [[] for _ in range(n)], 0, 0
        while True:
            active = ctx.generate_active()
            tokens = []
            for i, s in enumerate(active):
                t = int(np.argmax(logits[i]))
                got[s].append(t)
                if t in eos or len(got[s]) == max_new:
                    ctx.generate_finish(s)
                else:
                    tokens.append(t)
            if not tokens:
                break
            logits = ctx.generate_step(tokens)
            assert logits.shape == (len(tokens), model.config.vocab_size)
            steps, rows = steps + 1, rows + len(tokens)
            stats = ctx.generate_stats()
            assert (stats.n_seqs, stats.steps, stats.rows) == (n, steps, rows)
            assert stats.rows_computed <= stats.rows and stats.step_ms >= stats.attention_ms >= 0
        assert got == f["generated"]
        assert ctx.generate_stats().n_active == 0
        ctx.generate_end()
        ctx.generate_end()  # without a session: nothing to do
        assert ctx.generate_stats().n_seqs == 0


def test_sampling_is_seeded_and_top_k_1_is_greedy(rm):
    name = GENERATE_FIXTURES[0]
    f = _load(name)
    model = _model(rm, name)
    kw = dict(max_new_tokens=f["max_new_tokens"], eos=f["eos_token_id"])
    a = rm.generate(model, f["prompts"], temperature=1.0, seed=7, **kw)
    b = rm.generate(model, f["prompts"], temperature=1.0, seed=7, **kw)
    c = rm.generate(model, f["prompts"], temperature=1.0, seed=8, **kw)
    assert a == b
    assert a != c
    assert a != f["generated"]  # a tiny random model's softmax at T=1 is far from one-hot
    # a prompt's draws do not depend on the others: the first prompt alone draws the same
    assert rm.generate(model, f["prompts"][:1], temperature=1.0, seed=7, **kw) == a[:1]
    assert rm.generate(model, f["prompts"], temperature=0.7, top_k=1, seed=3, **kw) == f["generated"]
    assert rm.generate(model, f["prompts"], temperature=5.0, top_p=1e-6, seed=3, **kw) == f["generated"]


def test_sample_token(rm):
    logits = np.array([0.5, 3.0, 3.0, -1.0, 2.0], dtype=np.float32)
    assert rm.sample_token(logits) == 1  # argmax, lowest id on ties
    rng = np.random.default_rng(0)
    draws = [rm.sample_token(logits, temperature=1.0, top_k=3, rng=rng) for _ in range(2000)]
    assert set(draws) == {1, 2, 4}  # top_k=3 keeps ids 1, 2 and 4
    # frequencies follow the softmax of the kept logits
    p = np.exp([3.0, 3.0, 2.0]) / np.exp([3.0, 3.0, 2.0]).sum()
    freq = np.array([draws.count(i) for i in (1, 2, 4)]) / len(draws)
    assert np.max(np.abs(freq - p)) < 0.05, (freq, p)
    # top_p: ids 1 and 2 hold 0.42 each of the mass, so 0.5 needs both, 0.4 only id 1
    assert {rm.sample_token(logits, 1.0, top_p=0.5, rng=rng) for _ in range(200)} == {1, 2}
    assert {rm.sample_token(logits, 1.0, top_p=0.4, rng=rng) for _ in range(50)} == {1}


def test_bad_input(rm):
    name = GENERATE_FIXTURES[0]
    f = _load(name)
    model = _model(rm, name)
    prompts = f["prompts"]
    plan = _plan(rm, prompts)
    n, vocab = len(prompts), model.config.vocab_size
    # Python-side checks
    for kw, error in [(dict(max_new_tokens=0), ValueError), (dict(max_new_tokens=1.5), TypeError),
                      (dict(temperature=-1.0), ValueError), (dict(temperature=float("nan")), ValueError),
                      (dict(top_k=-1), ValueError), (dict(top_p=0.0), ValueError), (dict(top_p=1.5), ValueError),
                      (dict(seed=-1), ValueError), (dict(eos=[-2]), ValueError)]:
        with pytest.raises(error):
            rm.generate(model, prompts, **kw)
    with pytest.raises(ValueError, match="empty"):
        rm.generate(model, [])
    with pytest.raises(ValueError, match=r"prompts\[1\] is empty"):
        rm.generate(model, [[1, 2], []])
    with pytest.raises(ValueError, match="negative"):
        rm.generate(model, [[1, -3]])
    with pytest.raises(TypeError):
        rm.generate("model", prompts)
    with pytest.raises(rm.RadixMLPError) as info:
        rm.generate(model, [[vocab]])
    assert info.value.status == rm.RMLP_ERR_INVALID_ARGUMENT and "vocab_size" in info.value.message
    # no cache; no LM head
    with model.context(256) as plain:
        with pytest.raises(rm.RadixMLPError) as info:
            rm.generate(plain, prompts)
        assert info.value.status == rm.RMLP_ERR_UNSUPPORTED and "cache_bytes" in info.value.message
    embedder = _model(rm, "qwen3_embedding_noprefix")
    with pytest.raises(rm.RadixMLPError) as info:
        rm.generate(embedder, prompts)
    assert info.value.status == rm.RMLP_ERR_UNSUPPORTED and "LM head" in info.value.message
    # the session's refusals
    with model.context(256, cache_bytes=32 << 20) as ctx:
        with pytest.raises(rm.RadixMLPError, match="no generation session"):
            ctx.generate_step([1] * n)
        with pytest.raises(rm.RadixMLPError) as info:
            ctx.generate_begin(plan, max_new_tokens=1 << 31)
        assert info.value.status == rm.RMLP_ERR_TOO_LARGE
        with pytest.raises(ValueError):
            ctx.generate_begin(plan, max_new_tokens=-1)
        ctx.generate_begin(plan, max_new_tokens=2)
        with pytest.raises(rm.RadixMLPError, match="session already"):
            ctx.generate_begin(plan)
        with pytest.raises(rm.RadixMLPError, match="n_tokens"):
            ctx.generate_step([1] * (n + 1))
        with pytest.raises(rm.RadixMLPError, match="vocab_size"):
            ctx.generate_step([vocab] * n)
        with pytest.raises(ValueError):
            ctx.generate_step([1] * n, out=np.empty((n, vocab), dtype=np.float64))
        with pytest.raises(rm.RadixMLPError, match="generation session is in progress"):
            ctx.cache_clear()
        ctx.generate_step([1] * n)
        ctx.generate_step([2] * n)
        with pytest.raises(rm.RadixMLPError, match="max_new_tokens"):
            ctx.generate_step([3] * n)
        with pytest.raises(rm.RadixMLPError, match="session has"):
            ctx.generate_finish(n)
        with pytest.raises(ValueError):
            ctx.generate_finish(-1)
        ctx.generate_finish(0)
        with pytest.raises(rm.RadixMLPError, match="finished already"):
            ctx.generate_finish(0)
        assert ctx.generate_active().tolist() == list(range(1, n))
        ctx.generate_end()
        ctx.cache_clear()  # no session left
    # a context closed with a session open frees it
    ctx = model.context(256, cache_bytes=32 << 20)
    ctx.generate_begin(plan)
    ctx.close()
    with pytest.raises(ValueError, match="closed"):
        ctx.generate_active()
