"""Models against Hugging Face transformers' outputs (integration_tests/fixtures): forward,
pooling, reranker scores, radix on vs off, embed, and the model calls' errors."""

import os

import numpy as np
import pytest

import radix_mlp
from radix_mlp import Model, Planner, RadixMLPError
from conftest import FIXTURES, FIXTURE_NAMES, load_fixture

TOL = 1e-4


def max_abs(a, b):
    return float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))


def flat(batch):
    ids = [t for seq in batch["input_ids"] for t in seq]
    pos = [p for seq in batch["position_ids"] for p in seq]
    return ids, pos, batch["cu_seqlens"]


@pytest.fixture(scope="module", params=FIXTURE_NAMES)
def fixture(request):
    folder, batch, config, expected = load_fixture(request.param)
    model = Model.load(folder)
    yield request.param, model, batch, config, expected
    model.close()


def test_config(fixture):
    name, model, _, config, _ = fixture
    c = model.config
    assert c.hidden_size == config["hidden_size"]
    assert c.num_hidden_layers == config["num_hidden_layers"]
    assert c.num_attention_heads == config["num_attention_heads"]
    assert c.num_key_value_heads == config["num_key_value_heads"]
    assert c.intermediate_size == config["intermediate_size"]
    assert c.vocab_size == config["vocab_size"]
    assert c.head_dim == config.get("head_dim", config["hidden_size"] // config["num_attention_heads"])
    assert c.architecture == config["model_type"]
    assert c.rms_norm_eps == pytest.approx(config["rms_norm_eps"])
    assert c.has_lm_head == (name != "qwen3_embedding_noprefix")
    assert c.qk_norm == c.architecture.startswith("qwen3")
    assert c.attention_bias == (c.architecture == "qwen2")


def test_forward_matches_transformers(fixture):
    name, model, batch, _, expected = fixture
    ids, pos, cu = flat(batch)
    with Planner() as planner, model.context(len(ids)) as ctx:
        on = planner.build(ids, pos, cu, threshold=1.0)
        off = planner.build(ids, pos, cu, threshold=0.0)
        padded = planner.build(ids, pos, cu, threshold=1.0, pad_multiple_of=16)
        assert on.use_radix and on.n_compact < on.n_tokens and not off.use_radix
        assert padded.n_compact_padded % 16 == 0 and padded.n_compact_padded > padded.n_compact
        h_on = ctx.forward(on)
        h_off = ctx.forward(off)
        h_pad = ctx.forward(padded)
    last = expected["last_hidden"]
    assert h_on.shape == last.shape and h_on.dtype == np.float32
    assert max_abs(h_on, last) <= TOL, name
    assert max_abs(h_off, last) <= TOL, name
    # radix on vs off (and padded): within 1e-6 relative to the largest value, as the C suite checks.
    scale = float(np.max(np.abs(h_off)))
    assert max_abs(h_on, h_off) <= 1e-6 * scale, (name, max_abs(h_on, h_off), scale)
    assert max_abs(h_pad, h_on) <= 1e-6 * scale, (name, max_abs(h_pad, h_on), scale)
    # Identical sequences s0 and s2 get identical rows.
    np.testing.assert_array_equal(h_on[cu[0]:cu[1]], h_on[cu[2]:cu[3]])


def test_pool_and_score(fixture):
    name, model, batch, _, expected = fixture
    ids, pos, cu = flat(batch)
    with Planner() as planner, model.context(len(ids)) as ctx:
        plan = planner.build(ids, pos, cu)
        hidden = ctx.forward(plan)
        last = ctx.pool(hidden, plan.cu_seqlens, "last")
        mean = ctx.pool(hidden, cu, pooling="mean")
        first = ctx.pool(hidden, cu, pooling="first")
        normed = ctx.pool(hidden, cu, pooling="mean", normalize=True)
        assert max_abs(last, expected["pooled_last"]) <= TOL
        assert max_abs(mean, expected["pooled_mean"]) <= TOL
        assert max_abs(first, expected["last_hidden"][np.array(cu[:-1])]) <= TOL
        ref = expected["pooled_mean"] / np.linalg.norm(expected["pooled_mean"], axis=1, keepdims=True)
        assert max_abs(normed, ref) <= TOL
        np.testing.assert_allclose(np.linalg.norm(normed, axis=1), 1.0, rtol=1e-5)
        if model.config.has_lm_head:
            logits, prob_a = ctx.score_pair(hidden, cu, 3, 7)
            want = expected["logits_last"][:, [3, 7]]
            assert logits.shape == (len(cu) - 1, 2) and prob_a.shape == (len(cu) - 1,)
            assert max_abs(logits, want) <= TOL
            want_p = 1.0 / (1.0 + np.exp(want[:, 1].astype(np.float64) - want[:, 0]))
            assert max_abs(prob_a, want_p) <= TOL
        else:
            assert "logits_last" not in expected
            with pytest.raises(RadixMLPError, match="the model has no LM head") as info:
                ctx.score_pair(hidden, cu, 3, 7)
            assert info.value.status == radix_mlp.RMLP_ERR_UNSUPPORTED


def test_embed(fixture):
    name, model, batch, _, expected = fixture
    got = radix_mlp.embed(model, batch["input_ids"])
    assert got.shape == expected["pooled_last"].shape
    assert max_abs(got, expected["pooled_last"]) <= TOL
    got = radix_mlp.embed(model, [np.array(s, dtype=np.int64) for s in batch["input_ids"]], pooling="mean",
                          normalize=True, threshold=0.0)
    ref = expected["pooled_mean"] / np.linalg.norm(expected["pooled_mean"], axis=1, keepdims=True)
    assert max_abs(got, ref) <= TOL


@pytest.fixture(scope="module")
def tiny():
    model = Model.load(os.path.join(FIXTURES, "qwen3_tiny"))
    yield model
    model.close()


def test_forward_errors(tiny):
    with Planner() as planner, tiny.context(8) as ctx:
        with pytest.raises(RadixMLPError, match=r"rmlp_forward: input_ids\[1\]=1000 >= vocab_size=1000") as info:
            ctx.forward(planner.build([1, 1000], [0, 1], [0, 2]))
        assert info.value.status == radix_mlp.RMLP_ERR_INVALID_ARGUMENT
        with pytest.raises(RadixMLPError, match=r"position_ids\[0\]=512 >= max_position_embeddings=512"):
            ctx.forward(planner.build([1], [512], [0, 1]))
        with pytest.raises(RadixMLPError, match=r"plan has 9 tokens .* the context was created for 8 tokens"):
            ctx.forward(planner.build(list(range(9)), list(range(9)), [0, 9]))
        with pytest.raises(RadixMLPError, match=r"the plan is empty \(n_tokens=0\)"):
            ctx.forward(planner.build([], [], [0, 0]))
        with pytest.raises(TypeError, match="plan must be a radix_mlp.Plan"):
            ctx.forward({"n_tokens": 1})
        plan = planner.build([1, 2], [0, 1], [0, 2])
        with pytest.raises(ValueError, match="out must be a writable C-contiguous float32"):
            ctx.forward(plan, out=np.empty((2, 64), dtype=np.float64))
        out = np.zeros((2, 64), dtype=np.float32)
        assert ctx.forward(plan, out=out) is out and np.any(out != 0)


def test_pool_and_score_errors(tiny):
    hidden = np.ones((4, 64), dtype=np.float32)
    with pytest.raises(RadixMLPError, match=r"rmlp_pool: sequence 1 is empty") as info:
        radix_mlp.pool(hidden, [0, 2, 2, 4])
    assert info.value.status == radix_mlp.RMLP_ERR_INVALID_SEQLENS
    with pytest.raises(RadixMLPError, match=r"rmlp_pool: cu_seqlens\[2\]=3, must equal n_tokens=4"):
        radix_mlp.pool(hidden, [0, 2, 3])
    with pytest.raises(ValueError, match="pooling='max' must be one of"):
        radix_mlp.pool(hidden, [0, 4], pooling="max")
    with pytest.raises(ValueError, match="hidden must be 2-dimensional"):
        radix_mlp.pool(np.ones(4, np.float32), [0, 4])
    np.testing.assert_array_equal(radix_mlp.pool(hidden.astype(np.float64), [0, 1, 4], "mean"), np.ones((2, 64)))
    with tiny.context(4) as ctx:
        with pytest.raises(RadixMLPError, match=r"token_a=3 or token_b=1000 >= vocab_size=1000"):
            ctx.score_pair(hidden, [0, 4], 3, 1000)
        with pytest.raises(ValueError, match="hidden has 32 columns but the model's hidden_size is 64"):
            ctx.score_pair(np.ones((4, 32), np.float32), [0, 4], 3, 7)
        with pytest.raises(ValueError, match=r"token_a=-1 is outside"):
            ctx.score_pair(hidden, [0, 4], -1, 7)


def test_load_errors():
    with pytest.raises(RadixMLPError, match="/nonexistent/model") as info:
        Model.load("/nonexistent/model")
    assert info.value.status == radix_mlp.RMLP_ERR_IO
    try:  # CUDA: UNSUPPORTED in a CPU-only build, NO_DEVICE without a device, a model with one
        Model.load(os.path.join(FIXTURES, "qwen3_tiny"), device="cuda").close()
    except RadixMLPError as e:
        assert e.status in (radix_mlp.RMLP_ERR_UNSUPPORTED, radix_mlp.RMLP_ERR_NO_DEVICE), e
    with pytest.raises(ValueError, match="device='tpu'"):
        Model.load(os.path.join(FIXTURES, "qwen3_tiny"), device="tpu")


def test_embed_errors(tiny):
    with pytest.raises(ValueError, match="sequences is empty"):
        radix_mlp.embed(tiny, [])
    with pytest.raises(ValueError, match=r"sequences\[1\] is empty"):
        radix_mlp.embed(tiny, [[1, 2], []])
    with pytest.raises(ValueError, match="pooling='none'"):
        radix_mlp.embed(tiny, [[1, 2]], pooling="none")


def test_lifetimes():
    model = Model.load(os.path.join(FIXTURES, "qwen3_tiny"))
    ctx = model.context(16)
    with Planner() as planner:
        plan = planner.build([1, 2, 3], [0, 1, 2], [0, 3])
    h = ctx.forward(plan)  # the plan outlives its planner: it holds copies
    assert h.shape == (3, 64)
    model.close()  # closes the model's contexts first
    assert ctx.closed and model.closed
    with pytest.raises(ValueError, match="closed"):
        ctx.forward(plan)
    with pytest.raises(ValueError, match="closed"):
        model.context(4)
    model.close()
    # Dropping the only references frees context then model (the context keeps the model alive).
    ctx = Model.load(os.path.join(FIXTURES, "qwen3_tiny")).context(4)
    assert ctx.forward(plan).shape == (3, 64)
    del ctx
    with pytest.raises(ValueError, match="max_tokens=0 must be at least 1"):
        Model.load(os.path.join(FIXTURES, "qwen3_tiny")).context(0)


FORGED_PADDING = r'''
import ctypes, sys
import numpy as np
import radix_mlp as r
from radix_mlp import _abi
model = r.Model.load(sys.argv[1])
ctx = model.context(16)
plan = r.Planner().build([1, 2, 3, 1, 2, 4], [0, 1, 2, 0, 1, 2], [0, 3, 6], threshold=1.0, pad_multiple_of=8)
s = plan._as_c()
ids = np.array(plan.compact_input_ids)
ids[plan.n_compact:] = 400000000  # padding rows with token ids far beyond vocab_size
s.compact_input_ids = ids.ctypes.data_as(ctypes.POINTER(ctypes.c_uint32))
out = np.empty((6, 64), np.float32)
status = r._loader.LIB.rmlp_forward(ctx._handle, ctypes.byref(s), ctypes.cast(None, _abi.rmlp_attention_fn), None,
                                    out.ctypes.data)
print(status, r.last_error())
'''


def test_forged_padding_rows_are_refused():
    """Padding rows are embedded too, so their ids are checked (a forged one once read out of bounds)."""
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-c", FORGED_PADDING, os.path.join(FIXTURES, "qwen3_tiny")],
                            cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))), capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, "the process died with status %d" % result.returncode
    assert result.stdout.startswith("%d " % radix_mlp.RMLP_ERR_INVALID_ARGUMENT), result.stdout
