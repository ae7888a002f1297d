"""radix_mlp: Python bindings of libradix_mlp (RadixMLP prefix-sharing prefill) over ctypes + numpy.

The shared library is found from ``RADIX_MLP_LIB`` (full path), ``RADIX_MLP_LIB_DIR`` (its
folder), ``ctypes.util.find_library("radix_mlp")`` or the loader's ``libradix_mlp.so.0``; its
major version must match the one these bindings are written for.

- ``compute_fold_and_scatter(input_ids, position_ids, cu_seq_lengths, pad_multiple_of=None)``:
  the published radix-mlp package's function (always radix).
- ``Planner().build(...) -> Plan``: the gated plan with all its maps and counts;
  ``plan_params_from_env()`` reads ``RADIX_MLP_THRESHOLD`` / ``RADIX_MLP_PAD``.
- ``Model.load(path)``, ``model.context(max_tokens, attention="full"|"compact"|"auto")`` ->
  ``Context.forward(plan)``, ``pool(...)``, ``score_pair(...)``; in compact space
  ``Context.forward_compact(plan)`` (compact rows), ``pool_compact``, ``score_pair_compact``;
  ``embed(model, sequences)``. ``model.context(max_tokens, cache_bytes=n)``: a prefix KV cache
  across batches (``Context.cache_stats()``, ``Context.cache_clear()``).
- ``generate(model, prompts, max_new_tokens, temperature=0, top_k=0, top_p=1, seed=0, eos=None)``:
  generated ids per prompt (greedy by default, seeded numpy sampling otherwise), the prompts as
  one batch on the prefix tree; the session underneath: ``Context.generate_begin(plan)`` -> logits,
  ``generate_step(tokens)``, ``generate_finish(seq)``, ``generate_active()``, ``generate_stats()``,
  ``generate_end()``.
- ``Batcher(mode="prefix"|"fifo", ...)``: a queue of requests; ``push(id, tokens, arrival_us)``,
  ``next_batch(max_tokens, max_seqs, now_us, context=None, max_rows=None)`` -> ``Batch`` (shared
  prefixes first; ``max_rows`` bounds the compact rows the planner computes);
  ``route_key(tokens, prefix_tokens, separator)`` and ``route_key_header(key)`` for load balancers.
- Every error status of the library raises ``RadixMLPError`` (a RuntimeError) carrying
  ``rmlp_last_error()``; argument problems found in Python raise ValueError / TypeError.

The import name is the published ``radix-mlp`` package's on purpose (its
``compute_fold_and_scatter`` works unchanged), so the two must not share an environment: both
install a ``radix_mlp`` folder and pip lets the later one overwrite the other's files. This
package is distributed as ``radix-mlp-ctypes`` (``radix_mlp.__distribution__``) and warns at
import (RuntimeWarning) when the published one is installed too.
"""

import warnings as _warnings

from . import _abi
from ._abi import (
    RMLP_ATTENTION_AUTO,
    RMLP_ATTENTION_COMPACT,
    RMLP_ATTENTION_FULL,
    RMLP_DEFAULT_PAD_MULTIPLE,
    RMLP_DEFAULT_THRESHOLD,
    RMLP_ERR_BUSY,
    RMLP_ERR_CUDA,
    RMLP_ERR_FULL,
    RMLP_ERR_FORMAT,
    RMLP_ERR_INTERNAL,
    RMLP_ERR_INVALID_ARGUMENT,
    RMLP_ERR_INVALID_SEQLENS,
    RMLP_ERR_IO,
    RMLP_ERR_MODEL,
    RMLP_ERR_NO_DEVICE,
    RMLP_ERR_OUT_OF_MEMORY,
    RMLP_ERR_TOO_LARGE,
    RMLP_ERR_UNSUPPORTED,
    RMLP_GATE_DISTINCT,
    RMLP_GATE_TEI,
    RMLP_MAX_PAD_MULTIPLE,
    RMLP_NO_PARENT,
    RMLP_OK,
)
from ._loader import LIB as _LIB
from ._loader import LIB_PATH as library_path
from ._loader import LibraryNotFound
from .errors import RadixMLPError, check as _check, last_error, status_string
from .model import Context, Model, embed, pool
from .model_info import CacheStats, CpuBf16GemmInfo, GenerateStats, ModelConfig
from .gpu_stats import GpuStats
from .generation import generate, sample_token
from .planner import Plan, Planner, PlanParams, compute_fold_and_scatter, plan_params_from_env
from .batcher import Batch, Batcher, cached_prefix, route_key, route_key_header

__version__ = "%d.%d.%d" % (_abi.RMLP_VERSION_MAJOR, _abi.RMLP_VERSION_MINOR, _abi.RMLP_VERSION_PATCH)
__distribution__ = "radix-mlp-ctypes"  # this package; the published one is "radix-mlp"


def _published_package():
    """The metadata of the published radix-mlp distribution when it is installed (it provides the
    import name radix_mlp too), else None."""
    try:
        from importlib import metadata
    except ImportError:  # Python < 3.8
        return None
    for name in ("radix-mlp", "radix_mlp"):
        try:
            return metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
    return None


_other = _published_package()
if _other is not None:
    _warnings.warn(
        "radix_mlp: the published package radix-mlp %s is installed too, and it has the same import name: "
        "this is %s (bindings of libradix_mlp, loaded from %s), and pip may have mixed the two packages' files. "
        "Keep one per environment (pip uninstall radix-mlp, or radix-mlp-ctypes)."
        % (_other.version, __distribution__, __file__),
        RuntimeWarning,
        stacklevel=2,
    )


def version():
    """The loaded library's version as (major, minor, patch)."""
    v = _LIB.rmlp_version()
    return (v >> 16, (v >> 8) & 0xFF, v & 0xFF)


def version_string():
    """The loaded library's version as "major.minor.patch"."""
    return _LIB.rmlp_version_string().decode()


def build_flags():
    """``rmlp_build_flags()``: a bit set of RMLP_BUILD_* (1: built with CUDA)."""
    return int(_LIB.rmlp_build_flags())


def cuda_device_count():
    """Number of CUDA devices; RadixMLPError RMLP_ERR_UNSUPPORTED in a CPU-only build,
    RMLP_ERR_NO_DEVICE without a device."""
    import ctypes

    count = ctypes.c_int32(0)
    _check(_LIB.rmlp_cuda_device_count(ctypes.byref(count)))
    return count.value


def set_cpu_threads(n_threads):
    """``rmlp_set_cpu_threads``: how many threads the CPU path uses: a context's own pool for its
    GEMMs, elementwise passes and attention (the count when the context is made) and a generation
    session's threads (the count when it begins). It starts at OpenBLAS's choice
    (OPENBLAS_NUM_THREADS, else one per core); the library runs OpenBLAS on one thread inside each
    of its own and sets OpenBLAS's process-wide count to 1 (numpy on the same OpenBLAS then runs
    on one thread too). RadixMLPError RMLP_ERR_INVALID_ARGUMENT for 0 or more than 256 (the count
    then stays as it was). Process-wide: not while another thread runs a CPU model."""
    n = int(n_threads)
    if not 0 <= n <= 0xFFFFFFFF:
        raise ValueError("set_cpu_threads: n_threads=%d is not in 0..2^32-1" % n)
    _check(_LIB.rmlp_set_cpu_threads(n))


def cpu_threads():
    """``rmlp_cpu_threads``: the number of threads the CPU path uses now."""
    return int(_LIB.rmlp_cpu_threads())


def cpu_sgemm():
    """``rmlp_cpu_sgemm``: which library the CPU path's fp32 GEMMs run, as ("openblas" or
    "onednn", the library's account of why). Process-wide, chosen once (at the first CPU model
    load or the first call of this) by RADIX_MLP_CPU_SGEMM (auto, openblas, onednn; unset: auto):
    auto runs OpenBLAS unless its kernels are for a narrower ISA than this CPU runs, then oneDNN's
    sgemm where it loads. RadixMLPError RMLP_ERR_INVALID_ARGUMENT for another value of the
    variable, RMLP_ERR_UNSUPPORTED for onednn where it cannot run."""
    import ctypes

    kind, detail = ctypes.c_int32(0), ctypes.c_char_p()
    _check(_LIB.rmlp_cpu_sgemm(ctypes.byref(kind), ctypes.byref(detail)))
    names = {_abi.RMLP_CPU_SGEMM_OPENBLAS: "openblas", _abi.RMLP_CPU_SGEMM_ONEDNN: "onednn"}
    return names.get(kind.value, "kind %d" % kind.value), (detail.value or b"").decode("utf-8", "replace")


__all__ = [
    "compute_fold_and_scatter",
    "Planner",
    "Plan",
    "PlanParams",
    "plan_params_from_env",
    "Model",
    "ModelConfig",
    "CacheStats",
    "GpuStats",
    "GenerateStats",
    "generate",
    "sample_token",
    "Context",
    "Batcher",
    "Batch",
    "cached_prefix",
    "route_key",
    "route_key_header",
    "pool",
    "embed",
    "RadixMLPError",
    "LibraryNotFound",
    "status_string",
    "last_error",
    "version",
    "version_string",
    "build_flags",
    "cuda_device_count",
    "set_cpu_threads",
    "cpu_threads",
    "cpu_sgemm",
    "library_path",
    "RMLP_OK",
    "RMLP_ERR_INVALID_ARGUMENT",
    "RMLP_ERR_INVALID_SEQLENS",
    "RMLP_ERR_TOO_LARGE",
    "RMLP_ERR_OUT_OF_MEMORY",
    "RMLP_ERR_UNSUPPORTED",
    "RMLP_ERR_CUDA",
    "RMLP_ERR_NO_DEVICE",
    "RMLP_ERR_INTERNAL",
    "RMLP_ERR_IO",
    "RMLP_ERR_FORMAT",
    "RMLP_ERR_MODEL",
    "RMLP_ERR_BUSY",
    "RMLP_ERR_FULL",
    "RMLP_GATE_DISTINCT",
    "RMLP_GATE_TEI",
    "RMLP_ATTENTION_FULL",
    "RMLP_ATTENTION_COMPACT",
    "RMLP_ATTENTION_AUTO",
    "RMLP_NO_PARENT",
    "RMLP_DEFAULT_THRESHOLD",
    "RMLP_DEFAULT_PAD_MULTIPLE",
    "RMLP_MAX_PAD_MULTIPLE",
]
