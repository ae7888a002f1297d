"""The GPU attention setting (``Context(..., gpu_attention=)``) and ``Context.gpu_stats()`` on a CPU
model (qwen3_tiny): "auto" is the default; a CPU context refuses "flashinfer" and "reference" by
name (RMLP_ERR_INVALID_ARGUMENT: it could not apply them), a name outside the list before the
library; a CPU context's stats are all zero. The CUDA side is tests/test_gpu_attention.c's."""

import os

import pytest

from radix_mlp import GpuStats, Model, RadixMLPError, _abi
from conftest import FIXTURES


@pytest.fixture(scope="module")
def tiny():
    model = Model.load(os.path.join(FIXTURES, "qwen3_tiny"))
    yield model
    model.close()


def test_cpu_context_takes_auto_only(tiny):
    for kernel in ("flashinfer", "reference"):
        with pytest.raises(RadixMLPError) as err:
            tiny.context(64, gpu_attention=kernel)
        assert err.value.status == _abi.RMLP_ERR_INVALID_ARGUMENT
        assert "applies to CUDA contexts only" in str(err.value)
    with pytest.raises(ValueError, match="gpu_attention='FlashInfer' must be one of"):
        tiny.context(64, gpu_attention="FlashInfer")


def test_cpu_context_stats_are_zero(tiny):
    with tiny.context(64) as ctx:
        stats = ctx.gpu_stats()
    assert isinstance(stats, GpuStats)
    assert not stats.cuda and stats.attention == "auto" and stats.first_plan_error == ""
    assert all(getattr(stats, name) == 0 for name in ("flashinfer_full", "reference_compact", "plan_errors",
                                                       "fallback_launcher"))
