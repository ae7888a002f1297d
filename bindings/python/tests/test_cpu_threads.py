"""set_cpu_threads / cpu_threads: the CPU path's thread count, set and read back; 0 and counts beyond
what the CPU path can run refused with the library's message, the count unchanged. cpu_sgemm: which
library the fp32 GEMMs run."""

import pytest

import radix_mlp


def test_cpu_threads_set_and_refused():
    start = radix_mlp.cpu_threads()
    assert start >= 1
    try:
        for n in (1, 2):
            radix_mlp.set_cpu_threads(n)
            assert radix_mlp.cpu_threads() == n
        with pytest.raises(radix_mlp.RadixMLPError) as err:
            radix_mlp.set_cpu_threads(0)
        assert err.value.status == radix_mlp.RMLP_ERR_INVALID_ARGUMENT
        assert "rmlp_set_cpu_threads: n_threads is 0" in str(err.value)
        with pytest.raises(radix_mlp.RadixMLPError) as err:
            radix_mlp.set_cpu_threads(1 << 20)
        assert "n_threads=1048576 exceeds the" in str(err.value)
        with pytest.raises(ValueError):
            radix_mlp.set_cpu_threads(-1)
        assert radix_mlp.cpu_threads() == 2, "a refused count changes nothing"
    finally:
        radix_mlp.set_cpu_threads(start)


def test_cpu_sgemm_answers_and_says_why():
    """cpu_sgemm: which library the fp32 GEMMs run, and why; the choice is kept."""
    kind, detail = radix_mlp.cpu_sgemm()
    assert kind in ("openblas", "onednn"), kind
    assert "OpenBLAS" in detail, detail
    assert detail.startswith("oneDNN's sgemm" if kind == "onednn" else "OpenBLAS's sgemm"), detail
    assert radix_mlp.cpu_sgemm() == (kind, detail)
