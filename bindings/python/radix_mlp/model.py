"""Models: Model (load, config; the records it reports are model_info.py's), Context (forward, pool,
score_pair, prefix cache, generation sessions), pool, embed.

On the CPU everything is numpy float32. A model loaded with ``device="cuda"`` keeps its weights
and activations in device memory, which numpy cannot hold: the array methods refuse it, and the
``*_device`` methods take device pointers (ints, e.g. ``torch.Tensor.data_ptr()``) instead, after
``Context.set_plan``."""

import ctypes
import os
import warnings
import weakref

import numpy as np

from . import _abi
from ._arrays import as_f32_2d, as_u32, as_u32_scalar, f32_ptr, u32_ptr, void_ptr
from ._loader import LIB
from .errors import RadixMLPError, check, last_error
from .gpu_stats import GPU_ATTENTION, read_gpu_stats
from .model_info import CacheStats, CpuBf16GemmInfo, GenerateStats, ModelConfig
from ._handle import _Handle
from .planner import Plan, plan_sequences

__all__ = ["Model", "Context", "pool", "embed"]

_POOLING = {"last": _abi.RMLP_POOLING_LAST, "mean": _abi.RMLP_POOLING_MEAN, "first": _abi.RMLP_POOLING_FIRST}
_DEVICES = {"cpu": _abi.RMLP_DEVICE_CPU, "cuda": _abi.RMLP_DEVICE_CUDA}
_DTYPES = {"f32": _abi.RMLP_DTYPE_F32, "f16": _abi.RMLP_DTYPE_F16, "bf16": _abi.RMLP_DTYPE_BF16}
_ATTENTION = {name: code for code, name in _abi.ATTENTION_NAMES.items()}
_CPU_BF16_GEMM = {name: code for code, name in _abi.CPU_BF16_GEMM_NAMES.items()}
_CPU_BF16_GEMM_KINDS = {code: name for code, name in _abi.CPU_BF16_GEMM_NAMES.items()
                        if code != _abi.RMLP_CPU_BF16_GEMM_AUTO}  # the answers; NONE is None
_NULL_ATTENTION = ctypes.cast(None, _abi.rmlp_attention_fn)


def _check_plan(plan):
    if not isinstance(plan, Plan):
        raise TypeError("plan must be a radix_mlp.Plan (from Planner.build), got %r" % (plan,))


def _out_array(out, shape):
    """``out`` (or a new array) as the float32 output of ``shape``."""
    if out is None:
        return np.empty(shape, dtype=np.float32)
    if (not isinstance(out, np.ndarray) or out.dtype != np.float32 or out.shape != shape
            or not out.flags.c_contiguous or not out.flags.writeable):
        raise ValueError("out must be a writable C-contiguous float32 array of shape %s" % (shape,))
    return out


class Model(_Handle):
    """A loaded checkpoint (``rmlp_model``), read-only and shareable across threads.
    Create with ``Model.load(path)``. ``close()`` also closes the model's live contexts."""

    def __init__(self, _handle, config, device="cpu", dtype="f32", load_report=""):
        super().__init__(LIB.rmlp_model_free)
        self._handle = _handle
        self.config = config
        self.device = device
        self.dtype = dtype
        self.load_report = load_report
        self._contexts = weakref.WeakSet()

    @classmethod
    def load(cls, path, device="cpu", device_index=0, dtype="f32", skip_finite_check=False, cpu_weight_dtype="f32",
             cpu_bf16_gemm="auto"):
        """Loads a Hugging Face / Candle checkpoint: a folder with config.json and
        model.safetensors (or an index and its shards), or a .safetensors file whose folder holds
        config.json. ``device="cpu"`` computes in ``dtype="f32"``; ``device="cuda"`` (GPU
        ``device_index``) in "f32", "f16" or "bf16", and raises RadixMLPError RMLP_ERR_NO_DEVICE
        where no device is present, RMLP_ERR_UNSUPPORTED in a build without CUDA. A NaN or
        infinity in a weight raises RMLP_ERR_MODEL unless ``skip_finite_check``. On the CPU,
        ``cpu_weight_dtype="bf16"`` holds the layers' weight matrices in bf16 (half their memory;
        activations and sums stay f32; docs/backends.md#bf16-weights-on-the-cpu), and
        ``cpu_bf16_gemm`` says how the layers multiply by them: "auto" (the default: what
        RADIX_MLP_CPU_BF16_GEMM says, else "onednn" where it can run, "widen" elsewhere),
        "widen" (each matrix widened back to f32 for the f32 GEMMs' sgemm, cpu_sgemm()) or "onednn" (required:
        RMLP_ERR_UNSUPPORTED where it cannot run); any but "auto" with f32 weights raises
        RMLP_ERR_INVALID_ARGUMENT. ``cpu_bf16_gemm()`` says which one runs. What the load
        found but accepted (tensors of the checkpoint the model does not use, as transformers
        warns of them; config.json keys transformers does not read for the architecture either;
        custom model code named by auto_map) is ``load_report`` ("" when nothing) and a
        ``RuntimeWarning``."""
        if device not in _DEVICES:
            raise ValueError("device=%r must be one of %s" % (device, sorted(_DEVICES)))
        if dtype not in _DTYPES:
            raise ValueError("dtype=%r must be one of %s" % (dtype, sorted(_DTYPES)))
        params = LIB.rmlp_model_default_params()
        params.device = _DEVICES[device]
        params.device_index = int(device_index)
        params.dtype = _DTYPES[dtype]
        params.skip_finite_check = bool(skip_finite_check)
        if cpu_weight_dtype not in ("f32", "bf16"):
            raise ValueError("cpu_weight_dtype=%r must be 'f32' or 'bf16'" % (cpu_weight_dtype,))
        params.cpu_weight_dtype = _DTYPES[cpu_weight_dtype]
        if cpu_bf16_gemm not in _CPU_BF16_GEMM:
            raise ValueError("cpu_bf16_gemm=%r must be one of 'auto', 'widen', 'onednn'" % (cpu_bf16_gemm,))
        params.cpu_bf16_gemm = _CPU_BF16_GEMM[cpu_bf16_gemm]
        handle = ctypes.c_void_p()
        check(LIB.rmlp_model_load(os.fsencode(path), ctypes.byref(params), ctypes.byref(handle)))
        c_config = _abi.rmlp_model_config()
        report = ctypes.c_char_p()
        status = LIB.rmlp_model_get_config(handle, ctypes.byref(c_config))
        if status == _abi.RMLP_OK:
            status = LIB.rmlp_model_load_report(handle, ctypes.byref(report))
        if status != _abi.RMLP_OK:
            error = RadixMLPError(status, last_error())
            LIB.rmlp_model_free(handle)
            raise error
        text = report.value.decode() if report.value else ""
        if text:
            warnings.warn("%s: %s" % (os.fsdecode(path), text.strip()), RuntimeWarning, stacklevel=2)
        return cls(handle, ModelConfig._from_c(c_config), device=device, dtype=dtype, load_report=text)

    def cpu_bf16_gemm(self):
        """Which GEMM the layers run on bf16 matrices (``rmlp_model_cpu_bf16_gemm``), a
        CpuBf16GemmInfo: "widen" or "onednn" for a model loaded with ``cpu_weight_dtype="bf16"``
        on the CPU, with oneDNN's run-time fallbacks so far; ``kind`` None for any other model."""
        kind, fallbacks, detail = _abi.rmlp_cpu_bf16_gemm(), ctypes.c_uint64(), ctypes.c_char_p()
        check(LIB.rmlp_model_cpu_bf16_gemm(self._live(), ctypes.byref(kind), ctypes.byref(fallbacks),
                                           ctypes.byref(detail)))
        text = detail.value.decode("utf-8", "replace") if detail.value else ""
        return CpuBf16GemmInfo(kind=_CPU_BF16_GEMM_KINDS.get(kind.value), fallbacks=int(fallbacks.value), detail=text)

    def context(self, max_tokens, attention="full", cache_bytes=0, gpu_attention="auto"):
        """A Context for batches of up to ``max_tokens`` tokens; ``attention`` is where its
        forward runs attention: "full", "compact" or "auto"; ``cache_bytes`` the budget of its
        prefix KV cache, 0 for none; ``gpu_attention`` a CUDA context's kernel (see Context)."""
        return Context(self, max_tokens, attention=attention, cache_bytes=cache_bytes, gpu_attention=gpu_attention)

    def close(self):
        for context in list(getattr(self, "_contexts", ())):
            context.close()
        super().close()

    def __repr__(self):
        state = "closed" if self.closed else "%s, hidden %d, %d layers" % (
            self.config.architecture, self.config.hidden_size, self.config.num_hidden_layers)
        return "Model(%s)" % state


class Context(_Handle):
    """Workspace for batches of up to ``max_tokens`` tokens (``rmlp_context``). One per thread;
    calls on one Context are serialised by a lock. Keeps its Model alive.

    ``attention`` (``rmlp_context_params.attention_space``) is where ``forward`` runs attention:
    "full" (the default: every sequence over its batch rows), "compact" (only the compact rows a
    sequence owns are queries, its keys its path through the plan's ``scatter``: the same result,
    fewer score pairs on shared prefixes) or "auto" (compact when the plan shares rows).
    ``forward`` returns batch rows either way; ``forward_compact`` keeps the compact rows;
    ``forward_last`` returns each sequence's last row only (for last-token pooling and scores).

    ``cache_bytes`` (``rmlp_context_params.cache_bytes``, default 0: none) is the byte budget of a
    prefix KV cache kept across batches: ``forward`` and ``forward_compact`` then compute only the
    compact rows earlier batches did not leave in it (each row's K/V in every layer and its final
    hidden state, least recently used evicted first) and return the same outputs up to fp32
    rounding; a batch whose new rows do not fit runs without it, with no error (counted in
    ``cache_stats().bypassed``). CPU models only (a CUDA model raises RMLP_ERR_UNSUPPORTED).
    ``cache_stats()`` returns the counters, ``cache_clear()`` empties it.

    ``gpu_attention`` (``rmlp_context_params.gpu_attention``) is the kernel of a CUDA context's
    built-in attention: "auto" (the default: FlashInfer's where it runs, unless
    RADIX_MLP_GPU_ATTENTION says otherwise), "flashinfer" (required: RMLP_ERR_UNSUPPORTED where
    it cannot run) or "reference"; a CPU context takes "auto" only. ``gpu_stats()`` returns what
    it ran (a GpuStats)."""

    def __init__(self, model, max_tokens, attention="full", cache_bytes=0, gpu_attention="auto"):
        super().__init__(LIB.rmlp_context_free)
        if not isinstance(model, Model):
            raise TypeError("model must be a radix_mlp.Model, got %r" % (model,))
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, (int, np.integer)):
            raise TypeError("max_tokens must be an int, got %r" % (max_tokens,))
        if max_tokens < 1:
            raise ValueError("max_tokens=%d must be at least 1" % max_tokens)
        if attention not in _ATTENTION:
            raise ValueError("attention=%r must be one of 'full', 'compact', 'auto'" % (attention,))
        if gpu_attention not in GPU_ATTENTION:
            raise ValueError("gpu_attention=%r must be one of 'auto', 'flashinfer', 'reference'" % (gpu_attention,))
        if isinstance(cache_bytes, bool) or not isinstance(cache_bytes, (int, np.integer)):
            raise TypeError("cache_bytes must be an int, got %r" % (cache_bytes,))
        cache_bytes = int(cache_bytes)
        if not 0 <= cache_bytes < 1 << 64:
            raise ValueError("cache_bytes=%d must be in [0, 2^64)" % cache_bytes)
        self.model = model
        self.max_tokens = int(max_tokens)
        self.attention = attention
        self.cache_bytes = cache_bytes
        params = LIB.rmlp_context_default_params()
        params.attention_space = _ATTENTION[attention]
        params.cache_bytes = self.cache_bytes
        params.gpu_attention = GPU_ATTENTION[gpu_attention]
        handle = ctypes.c_void_p()
        check(LIB.rmlp_context_create_with_params(model._live(), self.max_tokens, ctypes.byref(params),
                                                  ctypes.byref(handle)))
        self._handle = handle
        model._contexts.add(self)

    def _live(self):
        self.model._live()
        return super()._live()

    def _host_arrays(self, what):
        if self.model.device != "cpu":
            raise RadixMLPError(_abi.RMLP_ERR_UNSUPPORTED,
                                "Context.%s: the model is on %s, whose activations are device memory: use the "
                                "*_device methods" % (what, self.model.device))

    def cache_stats(self):
        """The prefix cache's counters since the context was made (``rmlp_context_cache_stats``), a
        CacheStats; all zero for a context without a cache."""
        stats = _abi.rmlp_cache_stats()
        with self._lock:
            check(LIB.rmlp_context_cache_stats(self._live(), ctypes.byref(stats)))
        return CacheStats(**{name: int(getattr(stats, name)) for name, _ in stats._fields_})

    def gpu_stats(self):
        """What the built-in attention of a CUDA context ran (``rmlp_context_gpu_stats``), a
        GpuStats; all zero (``cuda`` False) for a CPU context."""
        with self._lock:
            return read_gpu_stats(self._live())

    def cache_clear(self):
        """Empties the prefix cache (``rmlp_context_cache_clear``): later batches compute every row
        again; the counters stay. Does nothing on a context without a cache."""
        with self._lock:
            check(LIB.rmlp_context_cache_clear(self._live()))

    def set_plan(self, plan):
        """Per-batch setup (``rmlp_context_set_plan``): on CUDA copies the plan's maps to the device
        on the context's stream; later calls check they get this plan. A no-op on the CPU."""
        _check_plan(plan)
        self._c_plan = plan._as_c()  # the library compares array pointers: keep this C view alive
        self._c_plan_of = plan
        with self._lock:
            check(LIB.rmlp_context_set_plan(self._live(), ctypes.byref(self._c_plan)))

    def _plan_for(self, plan):
        if getattr(self, "_c_plan_of", None) is plan:
            return self._c_plan
        return plan._as_c()

    def set_stream(self, stream):
        """The ``cudaStream_t`` (an int, 0 for the legacy default stream) every later call enqueues
        on (``rmlp_context_set_stream``). Ignored on the CPU. The stream must outlive its use."""
        with self._lock:
            check(LIB.rmlp_context_set_stream(self._live(), ctypes.c_void_p(int(stream) or None)))

    def forward_device(self, plan, out_ptr):
        """``rmlp_forward`` into device memory at ``out_ptr`` (int): room for (n_tokens, hidden_size)
        values in the model's dtype. Call ``set_plan(plan)`` first; enqueues on the context's
        stream and returns without synchronising."""
        self._forward_ptr(LIB.rmlp_forward, plan, ctypes.c_void_p(int(out_ptr)))

    def forward_compact_device(self, plan, out_ptr):
        """``rmlp_forward_compact`` into device memory at ``out_ptr`` (int): room for
        (n_compact_padded, hidden_size) values in the model's dtype; as forward_device."""
        self._forward_ptr(LIB.rmlp_forward_compact, plan, ctypes.c_void_p(int(out_ptr)))

    def forward_last_device(self, plan, out_ptr):
        """``rmlp_forward_last`` into device memory at ``out_ptr`` (int): room for (n_seqs,
        hidden_size) values in the model's dtype, sequence s's last row; as forward_device. Read
        it with pool_device / score_pair_device and cu_seqlens 0, 1, ..., n_seqs."""
        self._forward_ptr(LIB.rmlp_forward_last, plan, ctypes.c_void_p(int(out_ptr)))

    def _forward_ptr(self, fn, plan, out):
        _check_plan(plan)
        c_plan = self._plan_for(plan)
        with self._lock:
            check(fn(self._live(), ctypes.byref(c_plan), _NULL_ATTENTION, None, out))

    def pool_device(self, hidden_ptr, cu_seqlens, pooling="last", normalize=False):
        """``rmlp_context_pool``: pools (n_tokens, hidden_size) values at ``hidden_ptr`` (the model's
        memory and dtype: device memory on CUDA) per sequence; returns (B, hidden) float32. On CUDA it
        synchronises the context's stream."""
        if pooling not in _POOLING:
            raise ValueError("pooling=%r must be one of 'last', 'mean', 'first'" % (pooling,))
        cu = as_u32(cu_seqlens, "cu_seqlens")
        n_seqs = max(cu.shape[0] - 1, 0)
        n_tokens = int(cu[-1]) if cu.shape[0] else 0
        out = np.empty((n_seqs, self.model.config.hidden_size), dtype=np.float32)
        dst = out if out.size else np.zeros(1, dtype=np.float32)
        with self._lock:
            check(LIB.rmlp_context_pool(self._live(), ctypes.c_void_p(int(hidden_ptr)), n_tokens, u32_ptr(cu), n_seqs,
                                        _POOLING[pooling], bool(normalize), f32_ptr(dst)))
        return out

    def score_pair_device(self, hidden_ptr, cu_seqlens, token_a, token_b):
        """``score_pair`` on (n_tokens, hidden_size) values at ``hidden_ptr`` in the model's memory and
        dtype (device memory on CUDA). Returns ``(logits (B, 2), prob_a (B,))``; synchronises on CUDA."""
        cu = as_u32(cu_seqlens, "cu_seqlens")
        token_a = as_u32_scalar(token_a, "token_a")
        token_b = as_u32_scalar(token_b, "token_b")
        n_seqs = max(cu.shape[0] - 1, 0)
        n_tokens = int(cu[-1]) if cu.shape[0] else 0
        logits = np.empty((n_seqs, 2), dtype=np.float32)
        prob_a = np.empty(n_seqs, dtype=np.float32)
        with self._lock:
            check(LIB.rmlp_score_pair(self._live(), ctypes.c_void_p(int(hidden_ptr)), n_tokens, u32_ptr(cu), n_seqs,
                                      token_a, token_b, f32_ptr(logits), f32_ptr(prob_a)))
        return logits, prob_a

    def pool_compact_device(self, plan, hidden_ptr, pooling="last", normalize=False):
        """``rmlp_context_pool_compact``: pools the plan's (n_compact_padded, hidden_size) compact rows
        at ``hidden_ptr`` (the model's memory and dtype; the output of forward_compact_device), read
        per batch row through ``scatter``; returns (B, hidden) float32. ``set_plan(plan)`` first on
        CUDA, where it synchronises the context's stream."""
        if pooling not in _POOLING:
            raise ValueError("pooling=%r must be one of 'last', 'mean', 'first'" % (pooling,))
        _check_plan(plan)
        c_plan = self._plan_for(plan)
        out = np.empty((plan.n_seqs, self.model.config.hidden_size), dtype=np.float32)
        with self._lock:
            check(LIB.rmlp_context_pool_compact(self._live(), ctypes.byref(c_plan), ctypes.c_void_p(int(hidden_ptr)),
                                                _POOLING[pooling], bool(normalize), f32_ptr(out)))
        return out

    def score_pair_compact_device(self, plan, hidden_ptr, token_a, token_b):
        """``rmlp_score_pair_compact``: score_pair_device at each sequence's last row of the plan's
        compact rows at ``hidden_ptr``. Returns ``(logits (B, 2), prob_a (B,))``."""
        _check_plan(plan)
        token_a = as_u32_scalar(token_a, "token_a")
        token_b = as_u32_scalar(token_b, "token_b")
        c_plan = self._plan_for(plan)
        logits = np.empty((plan.n_seqs, 2), dtype=np.float32)
        prob_a = np.empty(plan.n_seqs, dtype=np.float32)
        with self._lock:
            check(LIB.rmlp_score_pair_compact(self._live(), ctypes.byref(c_plan), ctypes.c_void_p(int(hidden_ptr)),
                                              token_a, token_b, f32_ptr(logits), f32_ptr(prob_a)))
        return logits, prob_a

    def forward(self, plan, out=None):
        """The whole model on a planned batch (built-in attention, in the context's ``attention``
        space): returns the last hidden states ``(plan.n_tokens, hidden_size)`` float32, written
        into ``out`` when given (C-contiguous float32 of that shape). CPU models only (see
        forward_device)."""
        return self._forward_host("forward", LIB.rmlp_forward, plan, lambda p: p.n_tokens, out)

    def forward_compact(self, plan, out=None):
        """The whole model on a planned batch in compact space, embedding to final norm on the
        compact rows (``rmlp_forward_compact``, whatever the context's ``attention``): returns
        ``(plan.n_compact_padded, hidden_size)`` float32 (into ``out`` when given), batch row i's
        state being row ``plan.scatter[i]``. Read it out with pool_compact / score_pair_compact.
        CPU models only (see forward_compact_device)."""
        return self._forward_host("forward_compact", LIB.rmlp_forward_compact, plan, lambda p: p.n_compact_padded,
                                  out)

    def forward_last(self, plan, out=None):
        """The whole model on a planned batch for last-token read-outs (``rmlp_forward_last``, in the
        context's ``attention`` space): returns ``(plan.n_seqs, hidden_size)`` float32 (into ``out``
        when given), row s the final-normed state of batch row ``cu_seqlens[s + 1] - 1``, the row
        forward returns there (within GEMM rounding); the last layer's post-attention work runs on
        those rows only. Pool or score it with cu_seqlens 0, 1, ..., n_seqs. CPU models only (see
        forward_last_device)."""
        return self._forward_host("forward_last", LIB.rmlp_forward_last, plan, lambda p: p.n_seqs, out)

    def _forward_host(self, what, fn, plan, rows, out):
        """``fn`` (a whole-model forward) into ``out`` or a new float32 array of (rows(plan), hidden)."""
        self._host_arrays(what)
        _check_plan(plan)
        out = _out_array(out, (rows(plan), self.model.config.hidden_size))
        self._forward_ptr(fn, plan, void_ptr(out))
        return out

    def _compact_rows(self, what, plan, hidden):
        """``hidden`` as float32 holding the plan's compact rows (at least n_compact_padded)."""
        self._host_arrays(what)
        _check_plan(plan)
        hidden = as_f32_2d(hidden, "hidden")
        rows, width = plan.n_compact_padded, self.model.config.hidden_size
        if hidden.shape[0] < rows or hidden.shape[1] != width:
            raise ValueError("hidden has shape %s but the plan's compact rows need (%d, %d)"
                             % (hidden.shape, rows, width))
        return hidden

    def pool_compact(self, plan, hidden, pooling="last", normalize=False):
        """Pools the compact rows ``hidden`` (n_compact_padded, hidden), the output of
        forward_compact, per sequence, each batch row read through ``plan.scatter``: the pooling of
        the batch rows (``pool(hidden[plan.scatter], plan.cu_seqlens, ...)``). Returns (B, hidden)."""
        hidden = self._compact_rows("pool_compact", plan, hidden)
        return self.pool_compact_device(plan, hidden.ctypes.data, pooling=pooling, normalize=normalize)

    def score_pair_compact(self, plan, hidden, token_a, token_b):
        """score_pair at each sequence's last row of the compact rows ``hidden`` (n_compact_padded,
        hidden), read through ``plan.scatter``. Returns ``(logits (B, 2), prob_a (B,))``."""
        hidden = self._compact_rows("score_pair_compact", plan, hidden)
        return self.score_pair_compact_device(plan, hidden.ctypes.data, token_a, token_b)

    def pool(self, hidden, cu_seqlens, pooling="last", normalize=False):
        """Pools ``hidden`` (n_tokens, hidden) per sequence: see ``radix_mlp.pool``."""
        return pool(hidden, cu_seqlens, pooling=pooling, normalize=normalize)

    def score_pair(self, hidden, cu_seqlens, token_a, token_b):
        """Reranker score (Qwen3-Reranker's yes/no): the LM-head logits of ``token_a`` and
        ``token_b`` at each sequence's last row of ``hidden`` (the output of forward) and
        ``prob_a`` = softmax over the pair. Returns ``(logits (B, 2), prob_a (B,))`` float32.
        CPU models only (see score_pair_device)."""
        self._host_arrays("score_pair")
        hidden = as_f32_2d(hidden, "hidden")
        if hidden.shape[1] != self.model.config.hidden_size:
            raise ValueError("hidden has %d columns but the model's hidden_size is %d"
                             % (hidden.shape[1], self.model.config.hidden_size))
        cu = as_u32(cu_seqlens, "cu_seqlens")
        token_a = as_u32_scalar(token_a, "token_a")
        token_b = as_u32_scalar(token_b, "token_b")
        n_seqs = max(cu.shape[0] - 1, 0)
        logits = np.empty((n_seqs, 2), dtype=np.float32)
        prob_a = np.empty(n_seqs, dtype=np.float32)
        with self._lock:
            check(LIB.rmlp_score_pair(self._live(), void_ptr(hidden), hidden.shape[0], u32_ptr(cu), n_seqs,
                                      token_a, token_b, f32_ptr(logits), f32_ptr(prob_a)))
        return logits, prob_a

    # ---- generation (rmlp_generate_*; the loop with sampling: radix_mlp.generate) ----

    def generate_begin(self, plan, max_new_tokens=256, shared_prefix_attention=True):
        """Begins a generation session (``rmlp_generate_begin``) on a context with a prefix cache
        (``cache_bytes`` > 0) of a model with an LM head: prefills the plan's sequences
        (each non-empty) through the cache, shared prefixes once, and returns the logits at each
        prompt's last token, ``(plan.n_seqs, vocab_size)`` float32. Every sequence is then active.
        No ``set_plan`` is needed first on any device (on CUDA begin sets the plan itself).
        ``max_new_tokens``: the most tokens a sequence may append; ``shared_prefix_attention``:
        a shared prefix's keys read once per step for every sequence below it (False: each
        sequence alone; the same up to fp32 rounding). One session per context
        (``generate_end``). RadixMLPError RMLP_ERR_UNSUPPORTED without a cache or an LM head,
        RMLP_ERR_TOO_LARGE when the prompts do not fit the cache."""
        _check_plan(plan)  # the logits are host memory on any device: the library says what it cannot run
        params = LIB.rmlp_generate_default_params()
        params.max_new_tokens = as_u32_scalar(max_new_tokens, "max_new_tokens")
        params.shared_prefix_attention = bool(shared_prefix_attention)
        c_plan = self._plan_for(plan)
        logits = np.empty((plan.n_seqs, self.model.config.vocab_size), dtype=np.float32)
        with self._lock:
            check(LIB.rmlp_generate_begin(self._live(), ctypes.byref(c_plan), ctypes.byref(params), f32_ptr(logits)))
        return logits

    def generate_step(self, tokens, out=None):
        """One decode step (``rmlp_generate_step``): ``tokens`` holds one id per active sequence in
        ascending sequence order (``generate_active()``); each is appended to its sequence and the
        logits at the new tokens are returned, ``(len(tokens), vocab_size)`` float32 in the same
        order (into ``out`` when given). A wrong count, an id outside the vocabulary or a sequence
        past ``max_new_tokens`` raise RMLP_ERR_INVALID_ARGUMENT; a cache too full for the new rows
        RMLP_ERR_OUT_OF_MEMORY (nothing changed: finish sequences)."""
        tokens = as_u32(tokens, "tokens")
        out = _out_array(out, (tokens.shape[0], self.model.config.vocab_size))
        dst = out if out.size else np.zeros(1, dtype=np.float32)
        with self._lock:
            check(LIB.rmlp_generate_step(self._live(), u32_ptr(tokens), tokens.shape[0], f32_ptr(dst)))
        return out

    def generate_finish(self, seq):
        """Finishes sequence ``seq`` (its index in the plan; ``rmlp_generate_finish``): it leaves
        the active set, its rows stay cached (found by later prompts that continue them). Finishing
        it twice raises RMLP_ERR_INVALID_ARGUMENT."""
        seq = as_u32_scalar(seq, "seq")
        with self._lock:
            check(LIB.rmlp_generate_finish(self._live(), seq))

    def generate_active(self):
        """The active sequences of the session, ascending, as a uint32 array (empty without one)."""
        n = ctypes.c_size_t(0)
        with self._lock:
            check(LIB.rmlp_generate_active(self._live(), None, ctypes.byref(n)))
            seqs = np.zeros(max(n.value, 1), dtype=np.uint32)
            check(LIB.rmlp_generate_active(self._live(), u32_ptr(seqs), ctypes.byref(n)))
        return seqs[:n.value].copy()

    def generate_stats(self):
        """The session's counters (``rmlp_generate_get_stats``), a GenerateStats."""
        stats = _abi.rmlp_generate_stats()
        with self._lock:
            check(LIB.rmlp_generate_get_stats(self._live(), ctypes.byref(stats)))
        return GenerateStats(**{name: getattr(stats, name) for name, _ in stats._fields_})

    def generate_end(self):
        """Ends the session (``rmlp_generate_end``): finishes the active sequences and frees it.
        Does nothing without one."""
        with self._lock:
            check(LIB.rmlp_generate_end(self._live()))

    def __repr__(self):
        cache = ", cache_bytes=%d" % self.cache_bytes if self.cache_bytes else ""
        return "Context(max_tokens=%d, attention=%r%s%s)" % (self.max_tokens, self.attention, cache,
                                                             ", closed" if self.closed else "")


def pool(hidden, cu_seqlens, pooling="last", normalize=False):
    """Pools hidden states per sequence (``rmlp_pool``): ``hidden`` (n_tokens, hidden) float32
    (other real dtypes are converted), ``cu_seqlens`` (B+1), ``pooling`` "last", "mean" or
    "first"; ``normalize`` scales each row to unit L2 norm. Returns (B, hidden) float32.
    Empty sequences and bad cu_seqlens raise RadixMLPError."""
    if pooling not in _POOLING:
        raise ValueError("pooling=%r must be one of 'last', 'mean', 'first'" % (pooling,))
    hidden = as_f32_2d(hidden, "hidden")
    if hidden.shape[1] == 0:
        raise ValueError("hidden has 0 columns")
    cu = as_u32(cu_seqlens, "cu_seqlens")
    n_seqs = max(cu.shape[0] - 1, 0)
    out = np.empty((n_seqs, hidden.shape[1]), dtype=np.float32)
    # rmlp_pool does not accept NULL hidden even for 0 rows; point at a dummy row then.
    src = hidden if hidden.size else np.zeros((1, hidden.shape[1]), dtype=np.float32)
    dst = out if out.size else np.zeros(1, dtype=np.float32)
    check(LIB.rmlp_pool(f32_ptr(src), hidden.shape[0], hidden.shape[1], u32_ptr(cu), n_seqs, _POOLING[pooling],
                        bool(normalize), f32_ptr(dst)))
    return out


def embed(model, sequences, pooling="last", normalize=False, threshold=_abi.RMLP_DEFAULT_THRESHOLD,
          attention="full"):
    """Embeds token sequences with ``model``: positions 0..len-1 per sequence, one radix plan
    for the batch (gate ``threshold``), forward with attention in ``attention`` space ("full",
    "compact" or "auto", see Context), pooling. Returns (len(sequences), hidden) float32. With
    ``pooling="last"`` the forward is ``Context.forward_last``: the last layer's post-attention
    work runs on each sequence's last row only."""
    if not isinstance(model, Model):
        raise TypeError("model must be a radix_mlp.Model, got %r" % (model,))
    if model.device != "cpu":
        raise RadixMLPError(_abi.RMLP_ERR_UNSUPPORTED, "embed: the model is on %s; embed works on CPU models "
                            "(on CUDA: Context.set_plan, forward_device, pool_device)" % model.device)
    if pooling not in _POOLING:
        raise ValueError("pooling=%r must be one of 'last', 'mean', 'first'" % (pooling,))
    if attention not in _ATTENTION:
        raise ValueError("attention=%r must be one of 'full', 'compact', 'auto'" % (attention,))
    plan = plan_sequences(sequences, threshold, "embed", "sequences")
    with Context(model, plan.n_tokens, attention=attention) as context:
        if pooling == "last":  # one row a sequence: pooled as sequences of one row
            last = context.forward_last(plan)
            return pool(last, np.arange(plan.n_seqs + 1, dtype=np.uint32), pooling="last", normalize=normalize)
        hidden = context.forward(plan)
    return pool(hidden, plan.cu_seqlens, pooling=pooling, normalize=normalize)
