"""Models against Hugging Face transformers' outputs (integration_tests/fixtures): forward,
pooling, reranker scores, radix on vs off, embed, and the model calls' errors."""

import os

import re

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
    assert c.has_lm_head == config["architectures"][0].endswith("ForCausalLM")
    assert c.qk_norm == (c.architecture.startswith("qwen3") or c.architecture == "gemma3_text")
    # Gemma: norms as 1 + w, the embedding times sqrt(hidden_size), GeGLU; Gemma 2 and 3 norm each
    # sublayer's output
    gemma = c.architecture.startswith("gemma")
    assert c.norm_weight_plus_one == gemma and c.sandwich_norms == (gemma and c.architecture != "gemma")
    assert c.embedding_scale == (pytest.approx(config["hidden_size"] ** 0.5) if gemma else 0.0)
    assert c.activation == ("gelu_pytorch_tanh" if gemma else "silu")
    # The biases transformers builds: Qwen2 q/k/v always; Llama, Qwen3 and Gemma q/k/v/o from
    # attention_bias; Llama gate/up/down from mlp_bias; Mistral none.
    reads = c.architecture in ("llama", "qwen3") or gemma
    assert c.attention_bias == (c.architecture == "qwen2" or (reads and config.get("attention_bias", False)))
    assert c.o_proj_bias == (reads and config.get("attention_bias", False))
    assert c.mlp_bias == (c.architecture == "llama" and config.get("mlp_bias", False))
    # transformers uses every tensor of the fixtures, and so must the library; the report may only
    # name bias flags in config.json that the architecture does not read (transformers ignores them)
    unread = {"attention_bias", "mlp_bias"} - ({"attention_bias"} if reads else set()) - (
        {"mlp_bias"} if c.architecture == "llama" else set())
    named = sorted(k for k in unread if k in config)
    if named:
        assert model.load_report.startswith("config.json has %d key" % len(named)), model.load_report
        assert sorted(re.findall(r"'(\w+)'", model.load_report.split("ignores them:")[1])) == named, model.load_report
    else:
        assert model.load_report == ""


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


@pytest.mark.parametrize("name", ["qwen3_bf16", "qwen3_tiny"])
def test_bf16_weights(name):
    """cpu_weight_dtype="bf16": a checkpoint already in bf16 gives transformers' fp32 result (1e-4);
    an fp32 one its stated tolerance, 2e-2 of the largest value (the C suite: test_bf16_weights). The
    widening path, pinned: where the CPU runs bf16 the default takes oneDNN (test_bf16_onednn)."""
    folder, batch, _, expected = load_fixture(name)
    ids, pos, cu = flat(batch)
    with Model.load(folder, cpu_weight_dtype="bf16", cpu_bf16_gemm="widen") as model, Planner() as planner, \
            model.context(len(ids)) as ctx:
        hidden = ctx.forward(planner.build(ids, pos, cu, threshold=1.0))
    last = expected["last_hidden"]
    bound = TOL if name == "qwen3_bf16" else 2e-2 * float(np.max(np.abs(last)))
    assert 0 < max_abs(hidden, last) <= bound, (name, max_abs(hidden, last), bound)
    with pytest.raises(ValueError, match="cpu_weight_dtype='f16'"):
        Model.load(folder, cpu_weight_dtype="f16")


def test_cpu_bf16_gemm():
    """cpu_bf16_gemm= and Model.cpu_bf16_gemm(), on any CPU: an f32 model has no bf16 GEMM; "onednn"
    runs oneDNN or is refused saying why; a bf16 model takes oneDNN by default exactly where it
    runs (saying how to widen instead), else widens saying why not; "widen" widens; either name
    with f32 weights is RMLP_ERR_INVALID_ARGUMENT, and an unknown name a ValueError."""
    folder = os.path.join(FIXTURES, "qwen3_tiny")
    with Model.load(folder) as model:
        assert model.cpu_bf16_gemm().kind is None
    try:
        with Model.load(folder, cpu_weight_dtype="bf16", cpu_bf16_gemm="onednn") as model:
            assert model.cpu_bf16_gemm().kind == "onednn"
        onednn_runs = True
    except RadixMLPError as e:
        assert e.status == radix_mlp.RMLP_ERR_UNSUPPORTED and "cannot run" in e.message, e
        onednn_runs = False
    with Model.load(folder, cpu_weight_dtype="bf16") as model:
        info = model.cpu_bf16_gemm()
    if onednn_runs:
        assert info.kind == "onednn" and "RADIX_MLP_CPU_BF16_GEMM=widen" in info.detail, info
    else:
        assert info.kind == "widen" and "cannot run" in info.detail, info
    with Model.load(folder, cpu_weight_dtype="bf16", cpu_bf16_gemm="widen") as model:
        info = model.cpu_bf16_gemm()
    assert (info.kind, info.fallbacks) == ("widen", 0), info
    with pytest.raises(RadixMLPError, match="params->cpu_bf16_gemm=") as e:
        Model.load(folder, cpu_bf16_gemm="onednn")
    assert e.value.status == radix_mlp.RMLP_ERR_INVALID_ARGUMENT
    with pytest.raises(ValueError, match="cpu_bf16_gemm='amx'"):
        Model.load(folder, cpu_weight_dtype="bf16", cpu_bf16_gemm="amx")


def test_load_checks(tmp_path):
    """A NaN weight is refused unless skip_finite_check; unused tensors load, with a warning."""
    import json
    import shutil
    import struct

    src = os.path.join(FIXTURES, "llama_bias")
    for name in ("config.json", "model.safetensors"):
        shutil.copy(os.path.join(src, name), tmp_path / name)
    data = bytearray((tmp_path / "model.safetensors").read_bytes())
    (n,) = struct.unpack("<Q", data[:8])
    begin = json.loads(data[8:8 + n])["model.layers.1.self_attn.o_proj.bias"]["data_offsets"][0]
    data[8 + n + begin + 8:8 + n + begin + 12] = struct.pack("<f", float("nan"))  # element 2
    (tmp_path / "model.safetensors").write_bytes(bytes(data))
    with pytest.raises(RadixMLPError, match=r"'model.layers.1.self_attn.o_proj.bias' holds NaN at element 2") as info:
        Model.load(str(tmp_path))
    assert info.value.status == radix_mlp.RMLP_ERR_MODEL
    Model.load(str(tmp_path), skip_finite_check=True).close()
    config = json.loads((tmp_path / "config.json").read_text())
    config["num_hidden_layers"] = 1  # the checkpoint has 2: layer 1's tensors are not used
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.warns(RuntimeWarning, match="tensors of the checkpoint are not used by a llama model of 1 layer as"):
        model = Model.load(str(tmp_path), skip_finite_check=True)
    assert "'model.layers.1.input_layernorm.weight'" in model.load_report
    model.close()


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


def test_compact_space(fixture):
    """Attention in compact space: forward_compact against forward (1e-5 relative), the read-outs
    through scatter against those of the batch rows, the context setting reaching forward."""
    name, model, batch, _, expected = fixture
    ids, pos, cu = flat(batch)
    h = model.config.hidden_size
    with Planner() as planner, model.context(len(ids)) as ctx:
        plan = planner.build(ids, pos, cu, threshold=1.0, pad_multiple_of=8)
        off = planner.build(ids, pos, cu, threshold=0.0)
        assert ctx.attention == "full"
        full = ctx.forward(plan)
        compact = ctx.forward_compact(plan)
        assert compact.shape == (plan.n_compact_padded, h) and plan.n_compact_padded > plan.n_compact
        rows = compact[plan.scatter]
        scale = float(np.max(np.abs(full)))
        assert max_abs(rows, full) <= 1e-5 * scale, (name, max_abs(rows, full), scale)
        assert max_abs(rows, expected["last_hidden"]) <= TOL
        for pooling in ("last", "mean", "first"):
            for normalize in (False, True):
                np.testing.assert_array_equal(ctx.pool_compact(plan, compact, pooling, normalize),
                                              radix_mlp.pool(rows, cu, pooling, normalize))
        if model.config.has_lm_head:
            for got, want in zip(ctx.score_pair_compact(plan, compact, 3, 7), ctx.score_pair(rows, cu, 3, 7)):
                np.testing.assert_array_equal(got, want)
        full_off = ctx.forward(off)
    # The setting reaches rmlp_forward: compact gives the compact forward's rows; auto follows the gate.
    for attention, batch_plan, want in [("compact", plan, rows), ("auto", plan, rows), ("auto", off, full_off)]:
        with model.context(len(ids), attention=attention) as spaced:
            assert spaced.attention == attention and repr(spaced).endswith("attention=%r)" % attention)
            np.testing.assert_array_equal(spaced.forward(batch_plan), want, err_msg="%s %s" % (name, attention))
    # embed passes the setting on: its rows are forward_last's in a compact context (positions 0..
    # as in the batch), within GEMM rounding of the compact forward's last rows.
    assert batch["position_ids"] == [list(range(len(seq))) for seq in batch["input_ids"]]
    with Planner() as planner, model.context(len(ids)) as ctx, model.context(len(ids), attention="compact") as cctx:
        unpadded = planner.build(ids, pos, cu, threshold=1.0)
        whole = radix_mlp.pool(ctx.forward_compact(unpadded)[unpadded.scatter], cu)
        want = cctx.forward_last(unpadded)
    got = radix_mlp.embed(model, batch["input_ids"], attention="compact", threshold=1.0)
    np.testing.assert_array_equal(got, want)
    assert max_abs(got, whole) <= 2e-6 * np.abs(whole).max()
    assert max_abs(got, expected["pooled_last"]) <= TOL


def test_compact_errors(tiny):
    with Planner() as planner, tiny.context(8) as ctx:
        plan = planner.build([1, 2, 3, 1, 2, 4], [0, 1, 2, 0, 1, 2], [0, 3, 6], threshold=1.0, pad_multiple_of=8)
        with pytest.raises(ValueError, match="out must be a writable C-contiguous float32 array of shape \\(8, 64\\)"):
            ctx.forward_compact(plan, out=np.empty((6, 64), dtype=np.float32))
        with pytest.raises(ValueError, match=r"hidden has shape \(4, 64\) but the plan's compact rows need \(8, 64\)"):
            ctx.pool_compact(plan, np.ones((4, 64), np.float32))
        with pytest.raises(ValueError, match=r"hidden has shape \(8, 32\)"):
            ctx.score_pair_compact(plan, np.ones((8, 32), np.float32), 3, 7)
        with pytest.raises(ValueError, match="pooling='max' must be one of"):
            ctx.pool_compact(plan, np.ones((8, 64), np.float32), "max")
        with pytest.raises(TypeError, match="plan must be a radix_mlp.Plan"):
            ctx.forward_compact(None)
    with pytest.raises(ValueError, match="attention='sparse' must be one of 'full', 'compact', 'auto'"):
        tiny.context(8, attention="sparse")
    with pytest.raises(ValueError, match="attention='tree' must be one of"):
        radix_mlp.embed(tiny, [[1, 2]], attention="tree")
