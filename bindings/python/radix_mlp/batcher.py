"""The batcher and the routing key: Batcher, Batch, cached_prefix, route_key, route_key_header
(docs/batching.md, docs/deploying-routing.md)."""

import ctypes
from dataclasses import dataclass

import numpy as np

from . import _abi
from ._arrays import as_u32, as_uint_scalar, copy_u32, u32_ptr
from ._handle import _Handle
from ._loader import LIB
from .errors import check

__all__ = ["Batcher", "Batch", "cached_prefix", "route_key", "route_key_header"]


def _copy_u64(pointer, length):
    if length == 0:
        return np.zeros(0, dtype=np.uint64)
    return np.ctypeslib.as_array(pointer, shape=(length,)).copy()


@dataclass(frozen=True)
class Batch:
    """A batch from ``Batcher.next_batch``, copied out of the batcher: its requests' ``ids`` and
    ``arrival_us`` (uint64, in the order to answer them) and the batch as ``Planner.build`` takes
    it (``input_ids``, ``position_ids``, ``cu_seqlens``: uint32). ``oversized``: one request longer
    than a budget (tokens or rows), alone; ``n_aged``: requests that had waited ``max_wait_us``
    (taken first); ``cache_skipped``: the context was busy on another thread; ``shared_tokens``:
    tokens repeating a path of an earlier request in the batch; ``cached_tokens``: distinct paths
    the context's cache held."""

    ids: np.ndarray
    arrival_us: np.ndarray
    input_ids: np.ndarray
    position_ids: np.ndarray
    cu_seqlens: np.ndarray
    oversized: bool
    cache_skipped: bool
    n_aged: int
    shared_tokens: int
    cached_tokens: int

    def __len__(self):
        return int(self.ids.shape[0])

    def tokens(self, i):
        """Request ``i``'s token ids."""
        return self.input_ids[self.cu_seqlens[i]:self.cu_seqlens[i + 1]]

    @classmethod
    def _from_c(cls, b):
        n, t = int(b.n_seqs), int(b.n_tokens)
        return cls(ids=_copy_u64(b.ids, n), arrival_us=_copy_u64(b.arrival_us, n), input_ids=copy_u32(b.input_ids, t),
                   position_ids=copy_u32(b.position_ids, t), cu_seqlens=copy_u32(b.cu_seqlens, n + 1),
                   oversized=bool(b.flags & _abi.RMLP_BATCH_OVERSIZED),
                   cache_skipped=bool(b.flags & _abi.RMLP_BATCH_CACHE_SKIPPED), n_aged=int(b.n_aged),
                   shared_tokens=int(b.shared_tokens), cached_tokens=int(b.cached_tokens))


class Batcher(_Handle):
    """A queue of pending requests (``rmlp_batcher``): ``push`` requests (an id, token ids, an
    arrival time in microseconds), take ``next_batch``es that share the deepest prefixes first
    (``mode="prefix"``, the default; requests that waited ``max_wait_us`` go first) or first in,
    first out (``mode="fifo"``). The capacity (``max_requests``, ``max_queued_tokens``) is fixed at
    creation; a push past it raises RadixMLPError RMLP_ERR_FULL. Calls are serialised by a lock."""

    def __init__(self, mode="prefix", max_requests=_abi.RMLP_BATCHER_DEFAULT_MAX_REQUESTS,
                 max_queued_tokens=_abi.RMLP_BATCHER_DEFAULT_MAX_QUEUED_TOKENS,
                 max_wait_us=_abi.RMLP_BATCHER_DEFAULT_MAX_WAIT_US):
        super().__init__(LIB.rmlp_batcher_free)
        modes = {name: code for code, name in _abi.BATCH_MODE_NAMES.items()}
        if mode not in modes:
            raise ValueError("mode must be 'prefix' or 'fifo', got %r" % (mode,))
        params = LIB.rmlp_batcher_default_params()
        params.mode = modes[mode]
        params.max_requests = as_uint_scalar(max_requests, "max_requests", 32)
        params.max_queued_tokens = as_uint_scalar(max_queued_tokens, "max_queued_tokens", 32)
        params.max_wait_us = as_uint_scalar(max_wait_us, "max_wait_us", 64)
        handle = ctypes.c_void_p()
        check(LIB.rmlp_batcher_create(ctypes.byref(params), ctypes.byref(handle)))
        self._handle = handle

    def push(self, id, tokens, arrival_us):
        """Queues request ``id`` (an int in 0..2^64-1) with its token ids (copied)."""
        ids = as_u32(tokens, "tokens")
        request = as_uint_scalar(id, "id", 64)
        arrival = as_uint_scalar(arrival_us, "arrival_us", 64)
        with self._lock:
            check(LIB.rmlp_batcher_push(self._live(), request, u32_ptr(ids), ids.shape[0], arrival))

    def remove(self, id):
        """Takes queued request ``id`` out unbatched."""
        request = as_uint_scalar(id, "id", 64)
        with self._lock:
            check(LIB.rmlp_batcher_remove(self._live(), request))

    def pending(self):
        """(requests, tokens) queued now."""
        n, tokens = ctypes.c_size_t(), ctypes.c_size_t()
        with self._lock:
            check(LIB.rmlp_batcher_pending(self._live(), ctypes.byref(n), ctypes.byref(tokens)))
        return n.value, tokens.value

    def next_batch(self, max_tokens, max_seqs, now_us, context=None, max_rows=None):
        """The next Batch of at most ``max_tokens`` token ids in ``max_seqs`` requests at time
        ``now_us``; its requests leave the queue (an empty Batch when the queue is empty). With a
        ``context`` that has a prefix cache (``cache_bytes``), the oldest first, each that fits,
        and among requests arriving together those whose prefix it holds first (the context is
        attached for this call only).

        ``max_rows`` (``rmlp_batcher_next_rows``; None: no such budget) also bounds the batch's
        compact rows, N' = ``len(input_ids) - shared_tokens``: the rows the planner computes once
        per distinct prefix path (at least 1). A RadixMLP forward's compute and compact
        activations scale with N', its token arrays with N: bound a batch's cost with
        ``max_rows`` and its full-layout memory with ``max_tokens`` (at most the context's
        ``max_tokens``). Both budgets are kept; a request longer than either goes alone
        (``oversized``) when nothing else fits."""
        max_tokens = as_uint_scalar(max_tokens, "max_tokens", 64)
        rows = () if max_rows is None else (as_uint_scalar(max_rows, "max_rows", 64),)
        next_fn = LIB.rmlp_batcher_next_rows if rows else LIB.rmlp_batcher_next
        max_seqs = as_uint_scalar(max_seqs, "max_seqs", 64)
        now = as_uint_scalar(now_us, "now_us", 64)
        out = _abi.rmlp_batch()

        def take():
            check(next_fn(self._live(), max_tokens, *rows, max_seqs, now, ctypes.byref(out)))
            return Batch._from_c(out)

        with self._lock:
            if context is None:
                return take()
            with context._lock:
                check(LIB.rmlp_batcher_attach_context(self._live(), context._live()))
                try:
                    return take()
                finally:
                    LIB.rmlp_batcher_attach_context(self._live(), None)


def cached_prefix(context, tokens):
    """How many leading tokens of ``tokens`` (positions 0..) ``context``'s prefix cache holds now
    (``rmlp_context_cached_prefix``; 0 without a cache). Changes nothing."""
    ids = as_u32(tokens, "tokens")
    n = ctypes.c_size_t()
    with context._lock:
        check(LIB.rmlp_context_cached_prefix(context._live(), u32_ptr(ids), ids.shape[0], ctypes.byref(n)))
    return n.value


def route_key(tokens, prefix_tokens=_abi.RMLP_ROUTE_DEFAULT_PREFIX_TOKENS, separator=None):
    """(key, covered): the 64-bit routing key of a request's leading prefix (``rmlp_route_key``):
    at most ``prefix_tokens`` tokens, up to and including the first ``separator`` among them when
    given; FNV-1a 64 over the ids' little-endian bytes, then fmix64."""
    ids = as_u32(tokens, "tokens")
    params = LIB.rmlp_route_default_params()
    params.prefix_tokens = as_uint_scalar(prefix_tokens, "prefix_tokens", 32)
    params.use_separator = separator is not None
    params.separator = 0 if separator is None else as_uint_scalar(separator, "separator", 32)
    key, covered = ctypes.c_uint64(), ctypes.c_size_t()
    check(LIB.rmlp_route_key(u32_ptr(ids), ids.shape[0], ctypes.byref(params), ctypes.byref(key),
                             ctypes.byref(covered)))
    return key.value, covered.value


def route_key_header(key):
    """``key`` as the header value a load balancer hashes: 16 lowercase hex digits."""
    buf = ctypes.create_string_buffer(_abi.RMLP_ROUTE_KEY_CHARS)
    check(LIB.rmlp_route_key_format(as_uint_scalar(key, "key", 64), buf, len(buf)))
    return buf.value.decode()
