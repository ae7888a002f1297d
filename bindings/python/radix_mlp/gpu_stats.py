"""GpuStats: what a CUDA context's built-in attention ran (``rmlp_gpu_stats``, from
``Context.gpu_stats()``), and the names of its kernel setting (``Context(..., gpu_attention=)``)."""

import ctypes
from dataclasses import dataclass

from . import _abi
from ._loader import LIB
from .errors import check

__all__ = ["GpuStats"]

GPU_ATTENTION = {name: code for code, name in _abi.GPU_ATTENTION_NAMES.items()}


@dataclass(frozen=True)
class GpuStats:
    """What a CUDA context's built-in attention ran since the context was made, and the run-time
    choices it was made with (all zero, ``cuda`` False, for a CPU context). ``attention`` is the
    kernel setting in effect ("auto", "flashinfer" or "reference": the parameter, or
    RADIX_MLP_GPU_ATTENTION where that was "auto"); ``flashinfer`` whether FlashInfer's kernels
    serve the context; ``full_kv_paged`` ... ``decode_flashinfer`` the RADIX_MLP_GPU_* switches.
    Launches by kernel and layout (``flashinfer_full``, ``flashinfer_full_paged``,
    ``flashinfer_compact``, ``reference_*``), counted when enqueued; ``plan_errors`` FlashInfer
    plans that failed (the batch ran on the reference kernel, no error), ``first_plan_error`` the
    first one's message; ``fallback_*`` reference launches where FlashInfer serves the context, by
    reason (see radix_mlp.h); ``decode_steps_flashinfer`` / ``decode_steps_chains`` generation steps
    whose attention ran on FlashInfer's batch decode / the library's chain kernels; ``sm90`` whether
    FlashInfer's Hopper prefill serves the context, ``flashinfer_sm90_full_paged`` /
    ``flashinfer_sm90_compact`` the FlashInfer launches on it, ``sm90_fallbacks`` those of a paged
    layout that ran FA2 instead. ``nonfinite_outputs``: forwards whose output held an infinity or NaN
    (a CPU forward raises for these; a CUDA one is asynchronous, so it is counted on the device),
    ``nonfinite_row`` / ``nonfinite_col`` the latest one's first such element (a row of its
    output); reading them synchronises the context's stream."""

    cuda: bool
    attention: str
    flashinfer: bool
    full_kv_paged: bool
    flashinfer_sm90: bool
    rope_table: bool
    decode_flashinfer: bool
    flashinfer_full: int
    flashinfer_full_paged: int
    flashinfer_compact: int
    reference_full: int
    reference_full_paged: int
    reference_compact: int
    plan_errors: int
    fallback_plan_error: int
    fallback_small_batch: int
    fallback_too_large: int
    fallback_unplanned: int
    fallback_buffers: int
    fallback_launcher: int
    first_plan_error: str
    decode_steps_flashinfer: int
    decode_steps_chains: int
    sm90: bool
    flashinfer_sm90_full_paged: int
    flashinfer_sm90_compact: int
    sm90_fallbacks: int
    nonfinite_outputs: int
    nonfinite_row: int
    nonfinite_col: int


def read_gpu_stats(handle):
    """``rmlp_context_gpu_stats`` of a live context handle, as a GpuStats."""
    stats = _abi.rmlp_gpu_stats()
    stats.struct_size = ctypes.sizeof(stats)
    check(LIB.rmlp_context_gpu_stats(handle, ctypes.byref(stats)))
    values = {}
    for name, kind in stats._fields_:
        value = getattr(stats, name)
        if name == "struct_size":
            continue
        if name == "attention":
            value = _abi.GPU_ATTENTION_NAMES.get(value, "auto")
        elif name == "first_plan_error":
            value = value.decode("utf-8", "replace")
        elif kind is ctypes.c_bool:
            value = bool(value)
        else:
            value = int(value)
        values[name] = value
    return GpuStats(**values)
