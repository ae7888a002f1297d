"""Context.forward_last (each sequence's last row only, rmlp_forward_last) on every transformers
fixture: its rows against forward's last rows (1e-5 of each row's largest value) with radix on
and off plans and attention in full and compact space; pooling and scores of those rows
(cu_seqlens 0, 1, ..., n_seqs) against pooling "last" and the scores of forward's output; errors."""

import os

import numpy as np
import pytest

import radix_mlp
from radix_mlp import Model, Planner
from conftest import FIXTURES, FIXTURE_NAMES, load_fixture

ROW_TOL = 1e-5  # relative to each row's largest value: the last layer's GEMMs run on fewer rows


def flat(batch):
    ids = [t for seq in batch["input_ids"] for t in seq]
    pos = [p for seq in batch["position_ids"] for p in seq]
    return ids, pos, batch["cu_seqlens"]


def row_relative_diff(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.max(np.max(np.abs(got - want), axis=1) / np.max(np.abs(want), axis=1)))


@pytest.fixture(scope="module", params=FIXTURE_NAMES)
def fixture(request):
    folder, batch, _, expected = load_fixture(request.param)
    model = Model.load(folder)
    yield request.param, model, batch, expected
    model.close()


@pytest.mark.parametrize("attention", ["full", "compact"])
@pytest.mark.parametrize("radix", ["on", "off"])
def test_forward_last_is_forwards_last_rows(fixture, radix, attention):
    name, model, batch, expected = fixture
    ids, pos, cu = flat(batch)
    h = model.config.hidden_size
    ones = np.arange(len(cu), dtype=np.uint32)  # 0, 1, ..., n_seqs: one row per sequence
    last = np.asarray(cu[1:]) - 1
    with Planner() as planner, model.context(len(ids), attention=attention) as ctx:
        plan = planner.build(ids, pos, cu, threshold=1.0 if radix == "on" else 0.0,
                             pad_multiple_of=8 if radix == "on" else None)
        assert plan.use_radix == (radix == "on")
        full = ctx.forward(plan)
        got = ctx.forward_last(plan)
        assert got.shape == (plan.n_seqs, h) and got.dtype == np.float32
        diff = row_relative_diff(got, full[last])
        assert diff <= ROW_TOL, (name, radix, attention, diff)
        assert np.max(np.abs(got - expected["pooled_last"])) <= 1e-4  # transformers' last-token states
        # Into a given array, the same values.
        out = np.full((plan.n_seqs, h), np.nan, dtype=np.float32)
        assert ctx.forward_last(plan, out=out) is out
        np.testing.assert_array_equal(out, got)
        # Any pooling of one row per sequence is that row: pooling "last" of forward's output.
        for normalize in (False, True):
            want = radix_mlp.pool(full, cu, "last", normalize)
            for pooling in ("last", "mean", "first"):
                pooled = ctx.pool(got, ones, pooling, normalize)
                assert row_relative_diff(pooled, want) <= ROW_TOL, (name, pooling, normalize)
        if model.config.has_lm_head:
            (logits, prob), (want_logits, want_prob) = ctx.score_pair(got, ones, 3, 7), ctx.score_pair(full, cu, 3, 7)
            scale = max(1.0, float(np.max(np.abs(want_logits))))
            assert float(np.max(np.abs(logits - want_logits))) <= 1e-5 * scale, name
            assert float(np.max(np.abs(prob - want_prob))) <= 1e-5, name


def test_forward_last_errors():
    model = Model.load(os.path.join(FIXTURES, "qwen3_tiny"))
    with model, Planner() as planner, model.context(8) as ctx:
        plan = planner.build([1, 2, 3, 1, 2, 4], [0, 1, 2, 0, 1, 2], [0, 3, 6], threshold=1.0)
        with pytest.raises(ValueError, match=r"out must be a writable C-contiguous float32 array of shape \(2, 64\)"):
            ctx.forward_last(plan, out=np.empty((6, 64), dtype=np.float32))
        with pytest.raises(TypeError, match="plan must be a radix_mlp.Plan"):
            ctx.forward_last(None)
        with pytest.raises(TypeError, match="plan must be a radix_mlp.Plan"):
            ctx.forward_last_device(None, 0)
