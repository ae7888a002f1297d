"""Planner/Plan: the gate, padding, parameters from the environment, errors with the library's
messages, lifetime."""

import gc
import threading

import numpy as np
import pytest

import radix_mlp
from radix_mlp import Planner, PlanParams, RadixMLPError, plan_params_from_env
from test_reference import EXAMPLE_CU, EXAMPLE_IDS, EXAMPLE_POS, naive_fold, random_batch

NO_PARENT = radix_mlp.RMLP_NO_PARENT


@pytest.fixture
def planner():
    with Planner() as p:
        yield p


def check_plan(plan, ids, pos, cu, threshold, pad):
    """Every field of a plan against the naive fold and the gate's definition."""
    n = len(ids)
    cids, cpos, scatter, gather = naive_fold(ids, pos, cu)
    n_distinct = len(cids)
    assert plan.n_tokens == n and plan.n_seqs == len(cu) - 1
    np.testing.assert_array_equal(plan.cu_seqlens, np.array(cu, dtype=np.uint32))
    if threshold == 0:
        assert plan.n_distinct == n and not plan.use_radix
    else:
        assert plan.n_distinct == n_distinct
        ratio = n_distinct / n if n else 1.0
        assert plan.compact_ratio == pytest.approx(ratio)
        assert plan.use_radix == (threshold >= 1.0 or ratio < threshold)
    if plan.use_radix:
        assert plan.n_compact == n_distinct
        padded = n_distinct if not pad or n_distinct == 0 else -(-n_distinct // pad) * pad
        assert plan.n_compact_padded == padded
        extra = padded - n_distinct
        np.testing.assert_array_equal(plan.scatter, scatter)
        np.testing.assert_array_equal(plan.fold_gather, np.concatenate([gather, np.zeros(extra, np.uint32)]))
        np.testing.assert_array_equal(plan.compact_input_ids, np.concatenate([cids, np.zeros(extra, np.uint32)]))
        np.testing.assert_array_equal(plan.compact_position_ids, np.concatenate([cpos, np.zeros(extra, np.uint32)]))
    else:
        identity = np.arange(n, dtype=np.uint32)
        assert plan.n_compact == plan.n_compact_padded == n
        for a in (plan.scatter, plan.fold_gather):
            np.testing.assert_array_equal(a, identity)
        np.testing.assert_array_equal(plan.compact_input_ids, np.array(ids, dtype=np.uint32))
        np.testing.assert_array_equal(plan.compact_position_ids, np.array(pos, dtype=np.uint32))
    # compact_parent: the compact row of the previous token of the path, NO_PARENT at path starts and padding.
    starts = set(cu[:-1])
    for j in range(plan.n_compact_padded):
        if j >= plan.n_compact:
            assert plan.compact_parent[j] == NO_PARENT
            continue
        i = int(plan.fold_gather[j])
        want = NO_PARENT if i in starts else plan.scatter[i - 1]
        assert plan.compact_parent[j] == want, (j, i)
    assert plan.build_us >= 0
    check_layout(plan)


def check_layout(plan):
    """The layout of attention in compact space: sequence s owns the compact rows first reached
    in it, which are the last rows of its path, and its runs reassemble the path."""
    cu = plan.cu_seqlens.astype(np.int64)
    assert plan.qo_indptr.shape == plan.run_indptr.shape == (plan.n_seqs + 1,)
    assert plan.qo_indptr[0] == 0 and plan.qo_indptr[-1] == plan.n_compact
    assert plan.run_start.shape == (plan.n_runs,) and plan.run_indptr[-1] == plan.n_runs
    first_seq = np.searchsorted(cu, plan.fold_gather[:plan.n_compact], side="right") - 1
    for s in range(plan.n_seqs):
        path = plan.scatter[cu[s]:cu[s + 1]]
        owned = np.arange(plan.qo_indptr[s], plan.qo_indptr[s + 1], dtype=np.uint32)
        np.testing.assert_array_equal(owned, np.flatnonzero(first_seq == s))
        np.testing.assert_array_equal(path[len(path) - len(owned):], owned)
        runs = plan.path_runs(s)
        assert all(length > 0 for _, _, length in runs)
        assert [b for b, _, _ in runs] == list(cu[s] + np.cumsum([0] + [n for _, _, n in runs])[:-1])
        np.testing.assert_array_equal(np.array([c + i for _, c, n in runs for i in range(n)], np.int64), path)
        for (_, c0, n0), (_, c1, _) in zip(runs, runs[1:]):
            assert c1 != c0 + n0, "runs are maximal"


def test_plan_fields(planner):
    plan = planner.build([1, 2, 3, 1, 2, 4], [0, 1, 2, 0, 1, 2], [0, 3, 6])
    assert (plan.n_tokens, plan.n_seqs, plan.n_distinct, plan.n_compact, plan.n_compact_padded) == (6, 2, 4, 4, 4)
    assert plan.use_radix and plan.compact_ratio == pytest.approx(4 / 6)
    assert plan.fold_gather.tolist() == [0, 1, 2, 5]
    assert plan.scatter.tolist() == [0, 1, 2, 0, 1, 3]
    assert plan.compact_input_ids.tolist() == [1, 2, 3, 4]
    assert plan.compact_position_ids.tolist() == [0, 1, 2, 2]
    assert plan.compact_parent.tolist() == [NO_PARENT, 0, 1, 1]
    assert plan.cu_seqlens.tolist() == [0, 3, 6]
    assert "n_compact=4" in repr(plan)
    for name in ("fold_gather", "scatter", "compact_input_ids", "compact_position_ids", "compact_parent",
                 "cu_seqlens"):
        a = getattr(plan, name)
        assert a.dtype == np.uint32 and not a.flags.writeable


def test_compact_layout(planner):
    """[1, 2, 3] then [1, 2, 4]: the second sequence owns its last row, its path is two runs."""
    ids, pos, cu = [1, 2, 3, 1, 2, 4], [0, 1, 2, 0, 1, 2], [0, 3, 6]
    plan = planner.build(ids, pos, cu, threshold=1.0)
    check_layout(plan)
    np.testing.assert_array_equal(plan.qo_indptr, [0, 3, 4])
    assert plan.path_runs(0) == [(0, 0, 3)] and plan.path_runs(1) == [(3, 0, 2), (5, 3, 1)]
    off = planner.build(ids, pos, cu, threshold=0.0)
    np.testing.assert_array_equal(off.qo_indptr, cu)
    assert off.n_runs == 2 and not off.qo_indptr.flags.writeable


def test_plans_are_copies(planner):
    first = planner.build(EXAMPLE_IDS, EXAMPLE_POS, EXAMPLE_CU, threshold=1.0)
    planner.build([5, 6, 7], [0, 1, 2], [0, 3])
    planner.reserve(100000, 100, 64)
    assert first.n_compact == 12 and first.compact_input_ids.tolist() == [1, 2, 3, 4, 5, 6, 7, 5, 6, 7, 8, 9]
    planner.close()
    assert first.scatter.tolist()[:10] == list(range(7)) + [0, 1, 2]


def test_gate(planner):
    ids, pos, cu = [1, 2, 3, 1, 2, 4], [0, 1, 2, 0, 1, 2], [0, 3, 6]  # ratio 4/6 = 0.667
    assert planner.build(ids, pos, cu).use_radix  # default 0.85
    assert planner.build(ids, pos, cu, threshold=0.7).use_radix
    assert not planner.build(ids, pos, cu, threshold=0.6).use_radix
    assert not planner.build(ids, pos, cu, threshold=4 / 6).use_radix  # strict <
    off = planner.build(ids, pos, cu, threshold=0.0)
    assert not off.use_radix and off.n_distinct == 6 and off.compact_ratio == 1.0
    # Nothing shared: ratio 1.0, radix only when threshold >= 1.
    assert not planner.build([1, 2], [0, 1], [0, 2]).use_radix
    assert planner.build([1, 2], [0, 1], [0, 2], threshold=1.0).use_radix
    assert planner.build([1, 2], [0, 1], [0, 2], threshold=7.5).use_radix


def test_padding_and_gate(planner):
    plan = planner.build(EXAMPLE_IDS, EXAMPLE_POS, EXAMPLE_CU, threshold=1.0, pad_multiple_of=8)
    assert (plan.n_compact, plan.n_compact_padded) == (12, 16)
    assert plan.compact_parent[12:].tolist() == [NO_PARENT] * 4
    assert plan.fold_gather[12:].tolist() == [0] * 4
    declined = planner.build([1, 2, 3], [0, 1, 2], [0, 3], pad_multiple_of=8)  # gate declines: no padding
    assert not declined.use_radix and declined.n_compact_padded == 3


def test_params_object(planner):
    plan = planner.build(EXAMPLE_IDS, EXAMPLE_POS, EXAMPLE_CU, params=PlanParams(threshold=1.0, pad_multiple_of=32))
    assert plan.n_compact_padded == 32
    with pytest.raises(TypeError):
        planner.build(EXAMPLE_IDS, EXAMPLE_POS, EXAMPLE_CU, params={"threshold": 1.0})


def test_random_plans_against_naive(planner):
    rng = np.random.default_rng(99)
    for trial in range(300):
        ids, pos, cu = random_batch(rng)
        threshold = [0.0, 0.5, 0.85, 1.0, 0.95][trial % 5]
        pad = [None, 8, 3][trial % 3]
        plan = planner.build(ids, pos, cu, threshold=threshold, pad_multiple_of=pad)
        check_plan(plan, ids, pos, cu, threshold, pad)


def test_empty_batch_plan(planner):
    plan = planner.build([], [], [0, 0])
    assert plan.n_tokens == 0 and plan.n_seqs == 1 and plan.n_compact == 0 and plan.compact_ratio == 1.0
    assert plan.scatter.shape == (0,) and plan.cu_seqlens.tolist() == [0, 0]


def test_env_params(monkeypatch, planner):
    monkeypatch.delenv("RADIX_MLP_THRESHOLD", raising=False)
    monkeypatch.delenv("RADIX_MLP_PAD", raising=False)
    assert plan_params_from_env() == PlanParams(threshold=0.85, pad_multiple_of=None, gate="tei")
    monkeypatch.setenv("RADIX_MLP_THRESHOLD", "0.5")
    monkeypatch.setenv("RADIX_MLP_PAD", "16")
    params = plan_params_from_env()
    assert params == PlanParams(threshold=0.5, pad_multiple_of=16, gate="tei")
    ids, pos, cu = [1, 2, 3, 1, 2, 4], [0, 1, 2, 0, 1, 2], [0, 3, 6]
    assert not planner.build(ids, pos, cu, params=params).use_radix  # padded 16/6 >= 0.5
    monkeypatch.setenv("RADIX_MLP_THRESHOLD", "1")
    plan = planner.build(ids, pos, cu, params=plan_params_from_env())
    assert plan.use_radix and plan.n_compact_padded == 16
    monkeypatch.setenv("RADIX_MLP_THRESHOLD", "0")
    monkeypatch.setenv("RADIX_MLP_PAD", "")
    assert plan_params_from_env() == PlanParams(threshold=0.0, pad_multiple_of=None, gate="tei")


@pytest.mark.parametrize("var,value,pattern", [
    ("RADIX_MLP_THRESHOLD", "abc", "RADIX_MLP_THRESHOLD='abc' is not a number >= 0"),
    ("RADIX_MLP_THRESHOLD", "-0.5", "RADIX_MLP_THRESHOLD='-0.5' is not a number >= 0"),
    ("RADIX_MLP_THRESHOLD", "nan", "RADIX_MLP_THRESHOLD='nan'"),
    ("RADIX_MLP_PAD", "0", "RADIX_MLP_PAD='0' is not a whole number in 1..4096"),
    ("RADIX_MLP_PAD", "8.5", "RADIX_MLP_PAD='8.5' is not a whole number"),
    ("RADIX_MLP_PAD", "5000", "RADIX_MLP_PAD='5000'"),
])
def test_env_params_invalid(monkeypatch, var, value, pattern):
    monkeypatch.delenv("RADIX_MLP_THRESHOLD", raising=False)
    monkeypatch.delenv("RADIX_MLP_PAD", raising=False)
    monkeypatch.setenv(var, value)
    with pytest.raises(RadixMLPError, match=pattern) as info:
        plan_params_from_env()
    assert info.value.status == radix_mlp.RMLP_ERR_INVALID_ARGUMENT
    assert info.value.message.startswith("rmlp_plan_params_from_env: ")


@pytest.mark.parametrize("ids,pos,cu,kwargs,status,needle", [
    ([1, 2], [0, 1], [1, 3], {}, radix_mlp.RMLP_ERR_INVALID_SEQLENS, "rmlp_plan_build: cu_seqlens[0]=1, must be 0"),
    ([1, 2, 3], [0, 1, 2], [0, 2, 1, 3], {}, radix_mlp.RMLP_ERR_INVALID_SEQLENS, "cu_seqlens[2]=1 < cu_seqlens[1]=2"),
    ([1, 2, 3], [0, 1, 2], [0, 2], {}, radix_mlp.RMLP_ERR_INVALID_SEQLENS, "cu_seqlens[1]=2, must equal n_tokens=3"),
    ([1, 2], [0, 1], [], {}, radix_mlp.RMLP_ERR_INVALID_SEQLENS, "n_seqs is 0"),
    ([1, 2], [0, 1], [0, 2], {"threshold": float("nan")}, radix_mlp.RMLP_ERR_INVALID_ARGUMENT,
     "params->threshold is NaN"),
    ([1, 2], [0, 1], [0, 2], {"threshold": -1.0}, radix_mlp.RMLP_ERR_INVALID_ARGUMENT,
     "params->threshold=-1 is negative"),
    ([1, 2], [0, 1], [0, 2], {"pad_multiple_of": 0}, radix_mlp.RMLP_ERR_INVALID_ARGUMENT,
     "params->pad is set but params->pad_multiple_of is 0"),
    ([1, 2], [0, 1], [0, 2], {"pad_multiple_of": 8192}, radix_mlp.RMLP_ERR_INVALID_ARGUMENT,
     "params->pad_multiple_of=8192 exceeds RMLP_MAX_PAD_MULTIPLE=4096"),
])
def test_library_errors(planner, ids, pos, cu, kwargs, status, needle):
    with pytest.raises(RadixMLPError) as info:
        planner.build(ids, pos, cu, **kwargs)
    e = info.value
    assert isinstance(e, RuntimeError)
    assert e.status == status and e.args == (status, e.message)
    assert needle in e.message and needle in str(e)
    assert e.status_name in str(e)
    assert radix_mlp.last_error() == e.message  # still the thread's last error
    planner.build([1], [0], [0, 1])  # the planner stays usable; success clears the message
    assert radix_mlp.last_error() == ""


def test_python_side_errors(planner):
    with pytest.raises(ValueError, match="input_ids and position_ids must have the same length: 2 != 1"):
        planner.build([1, 2], [0], [0, 2])
    with pytest.raises(ValueError, match=r"input_ids\[0\]=-1 is negative"):
        planner.build([-1], [0], [0, 1])
    with pytest.raises(ValueError, match=r"cu_seqlens\[1\]=4294967296 is outside"):
        planner.build([1], [0], [0, 2**32])
    with pytest.raises(ValueError, match=r"pad_multiple_of=-1 is outside"):
        planner.build([1], [0], [0, 1], pad_multiple_of=-1)
    with pytest.raises(TypeError, match="threshold must be a number"):
        planner.build([1], [0], [0, 1], threshold="high")
    with pytest.raises(TypeError):
        planner.reserve(1.5, 1)


def test_error_message_is_thread_local():
    """Each thread's RadixMLPError carries its own call's message, while other threads fail
    differently or succeed at the same time."""
    errors = []

    def work(k):
        with Planner() as p:
            for _ in range(300):
                if k % 2:
                    p.build([1, 2, 3], [0, 1, 2], [0, 3])
                    continue
                try:
                    p.build([1, 2], [0, 1], [k + 1, 2])
                    errors.append("no error")
                except RadixMLPError as e:
                    if "cu_seqlens[0]=%d," % (k + 1) not in e.message:
                        errors.append(e.message)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_closed_planner():
    p = Planner()
    p.close()
    p.close()  # idempotent
    assert p.closed
    with pytest.raises(ValueError, match="Planner is closed"):
        p.build([1], [0], [0, 1])
    with Planner() as q:
        q.build([1], [0], [0, 1])
    assert q.closed


def test_del_frees_without_error():
    for _ in range(50):
        p = Planner()
        p.build(EXAMPLE_IDS, EXAMPLE_POS, EXAMPLE_CU)
        del p
    gc.collect()
