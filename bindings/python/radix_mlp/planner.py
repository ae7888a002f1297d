"""The plan builder: Planner, Plan, PlanParams, plan_params_from_env, compute_fold_and_scatter, and
plan_sequences (the plan of whole token sequences, for embed and generate)."""

import ctypes
import operator
import threading
from dataclasses import dataclass
from typing import Optional

import numpy as np

from . import _abi
from ._arrays import as_u32, as_u32_scalar, as_uint_scalar, copy_u32, u32_ptr
from ._handle import _Handle
from ._loader import LIB
from .errors import check

__all__ = ["PlanParams", "Plan", "Planner", "plan_params_from_env", "compute_fold_and_scatter"]


@dataclass(frozen=True)
class PlanParams:
    """How a plan is built: the gate ``threshold`` (radix iff ``threshold >= 1`` or
    ``n_distinct / n_tokens < threshold``; 0 turns radix off), an optional padding multiple
    of the compact rows (None: no padding) and the gate's rule: ``"distinct"`` (this library's, the
    unpadded count) or ``"tei"`` (text-embeddings-inference's in-tree rule: the padded compact
    length, in single precision, off at thresholds <= 1e-6), so a host switching from TEI's code
    gets the same decisions."""

    threshold: float = _abi.RMLP_DEFAULT_THRESHOLD
    pad_multiple_of: Optional[int] = None
    gate: str = "distinct"

    def _to_c(self):
        params = LIB.rmlp_plan_default_params()
        rules = {name: code for code, name in _abi.GATE_NAMES.items()}
        if self.gate not in rules:
            raise ValueError("gate must be %s, got %r" % (" or ".join(repr(n) for n in rules), self.gate))
        params.gate = rules[self.gate]
        try:
            params.threshold = float(self.threshold)
        except (TypeError, ValueError):
            raise TypeError("threshold must be a number, got %r" % (self.threshold,)) from None
        if self.pad_multiple_of is None:
            params.pad = False
        else:
            params.pad = True
            params.pad_multiple_of = as_u32_scalar(self.pad_multiple_of, "pad_multiple_of")
        return params

    @classmethod
    def _from_c(cls, params):
        return cls(threshold=params.threshold, pad_multiple_of=params.pad_multiple_of if params.pad else None,
                   gate=_abi.GATE_NAMES[params.gate])


def plan_params_from_env():
    """PlanParams as a deployment sets them (``rmlp_plan_params_from_env``): ``RADIX_MLP_THRESHOLD``
    (the gate, default 0.85), ``RADIX_MLP_PAD`` (padding multiple, unset/empty: none) and
    ``RADIX_MLP_GATE`` (``tei``, the default: the variables are TEI's, so they decide as TEI's code
    does; or ``distinct``). A set but invalid variable raises RadixMLPError naming it."""
    fn = getattr(LIB, "rmlp_plan_params_from_env", None)
    if fn is None:
        raise NotImplementedError("radix_mlp: this libradix_mlp has no rmlp_plan_params_from_env")
    params = _abi.rmlp_plan_params()
    check(fn(ctypes.byref(params)))
    return PlanParams._from_c(params)


class Plan:
    """One batch's plan, with copies of all its arrays (independent of the planner that built it).

    Arrays (read-only uint32): ``fold_gather`` (n_compact_padded), ``scatter`` (n_tokens),
    ``compact_input_ids``, ``compact_position_ids``, ``compact_parent`` (n_compact_padded),
    ``cu_seqlens`` (n_seqs + 1). Counts: ``n_tokens``, ``n_seqs``, ``n_distinct``, ``n_compact``,
    ``n_compact_padded``; ``use_radix`` (the gate's decision), ``compact_ratio``
    (n_distinct / n_tokens), ``build_us`` (build time in microseconds).

    The layout of attention in compact space: ``qo_indptr`` (n_seqs + 1): sequence s owns the
    compact rows ``qo_indptr[s]:qo_indptr[s+1]`` (its queries; the last rows of its path,
    ``qo_indptr[-1] == n_compact``); its path (its keys) is ``scatter[cu_seqlens[s]:cu_seqlens[s+1]]``,
    made of the runs ``run_indptr[s]:run_indptr[s+1]`` of consecutive compact rows, run r starting
    at batch row ``run_start[r]`` (``n_runs`` in all; see ``path_runs``).
    """

    __slots__ = (
        "n_tokens", "n_seqs", "n_distinct", "n_compact", "n_compact_padded", "use_radix", "compact_ratio",
        "build_us", "fold_gather", "scatter", "compact_input_ids", "compact_position_ids", "compact_parent",
        "cu_seqlens", "qo_indptr", "n_runs", "run_indptr", "run_start", "_struct",
    )

    def __init__(self, c_plan):
        self.n_tokens = int(c_plan.n_tokens)
        self.n_seqs = int(c_plan.n_seqs)
        self.n_distinct = int(c_plan.n_distinct)
        self.n_compact = int(c_plan.n_compact)
        self.n_compact_padded = int(c_plan.n_compact_padded)
        self.use_radix = bool(c_plan.use_radix)
        self.compact_ratio = float(c_plan.compact_ratio)
        self.build_us = float(c_plan.build_us)
        n_pad = self.n_compact_padded
        self.fold_gather = copy_u32(c_plan.fold_gather, n_pad)
        self.scatter = copy_u32(c_plan.scatter, self.n_tokens)
        self.compact_input_ids = copy_u32(c_plan.compact_input_ids, n_pad)
        self.compact_position_ids = copy_u32(c_plan.compact_position_ids, n_pad)
        self.compact_parent = copy_u32(c_plan.compact_parent, n_pad)
        self.cu_seqlens = copy_u32(c_plan.cu_seqlens, self.n_seqs + 1)
        self.qo_indptr = copy_u32(c_plan.qo_indptr, self.n_seqs + 1)
        self.n_runs = int(c_plan.n_runs)
        self.run_indptr = copy_u32(c_plan.run_indptr, self.n_seqs + 1)
        self.run_start = copy_u32(c_plan.run_start, self.n_runs)
        for name in ("fold_gather", "scatter", "compact_input_ids", "compact_position_ids", "compact_parent",
                     "cu_seqlens", "qo_indptr", "run_indptr", "run_start"):
            getattr(self, name).setflags(write=False)
        self._struct = None

    def _as_c(self):
        """An rmlp_plan pointing into this object's arrays (valid while the Plan lives)."""
        if self._struct is None:
            s = _abi.rmlp_plan()
            s.n_tokens, s.n_seqs, s.n_distinct = self.n_tokens, self.n_seqs, self.n_distinct
            s.n_compact, s.n_compact_padded = self.n_compact, self.n_compact_padded
            s.use_radix, s.compact_ratio, s.build_us = self.use_radix, self.compact_ratio, self.build_us
            s.fold_gather = u32_ptr(self.fold_gather)
            s.scatter = u32_ptr(self.scatter)
            s.compact_input_ids = u32_ptr(self.compact_input_ids)
            s.compact_position_ids = u32_ptr(self.compact_position_ids)
            s.compact_parent = u32_ptr(self.compact_parent)
            s.cu_seqlens = u32_ptr(self.cu_seqlens)
            s.qo_indptr = u32_ptr(self.qo_indptr)
            s.n_runs = self.n_runs
            s.run_indptr = u32_ptr(self.run_indptr)
            s.run_start = u32_ptr(self.run_start)
            self._struct = s
        return self._struct

    def path_runs(self, s):
        """The path of sequence ``s`` as runs of consecutive compact rows: a list of
        ``(batch_start, compact_start, length)``, batch rows ``batch_start:batch_start+length``
        reading compact rows ``compact_start:compact_start+length``."""
        first, last = int(self.run_indptr[s]), int(self.run_indptr[s + 1])
        starts = [int(b) for b in self.run_start[first:last]] + [int(self.cu_seqlens[s + 1])]
        return [(b, int(self.scatter[b]), e - b) for b, e in zip(starts, starts[1:])]

    def __repr__(self):
        return "Plan(n_tokens=%d, n_seqs=%d, n_distinct=%d, n_compact=%d, n_compact_padded=%d, use_radix=%s, " \
               "compact_ratio=%.4f, build_us=%.1f)" % (self.n_tokens, self.n_seqs, self.n_distinct, self.n_compact,
                                                       self.n_compact_padded, self.use_radix, self.compact_ratio,
                                                       self.build_us)


class Planner(_Handle):
    """A reusable plan builder (``rmlp_planner``). Use one per thread; calls on one Planner are
    serialised by a lock (the library itself refuses a planner used by two threads at once with
    RMLP_ERR_BUSY). ``close()`` (or ``with Planner() as p:``) frees it; so does garbage
    collection."""

    def __init__(self):
        super().__init__(LIB.rmlp_planner_free)
        handle = ctypes.c_void_p()
        check(LIB.rmlp_planner_create(ctypes.byref(handle)))
        self._handle = handle

    def reserve(self, n_tokens, n_seqs, max_pad_multiple=0):
        """Grows the scratch for batches up to ``n_tokens`` tokens in ``n_seqs`` sequences."""
        n_tokens = as_uint_scalar(n_tokens, "n_tokens", 64)
        n_seqs = as_uint_scalar(n_seqs, "n_seqs", 64)
        max_pad_multiple = as_u32_scalar(max_pad_multiple, "max_pad_multiple")
        with self._lock:
            check(LIB.rmlp_planner_reserve(self._live(), n_tokens, n_seqs, max_pad_multiple))

    def build(self, input_ids, position_ids, cu_seqlens, threshold=_abi.RMLP_DEFAULT_THRESHOLD, pad_multiple_of=None,
              *, params=None, gate="distinct"):
        """Builds the plan of a batch (``rmlp_plan_build``) and returns a Plan holding copies.

        ``input_ids``, ``position_ids``: (N,) ints, sequences back to back; ``cu_seqlens``: (B+1,)
        offsets. ``threshold``/``pad_multiple_of``/``gate`` as in PlanParams; ``params`` (a PlanParams,
        e.g. from ``plan_params_from_env()``) replaces them when given. Python-side problems (shapes,
        lengths, values outside uint32) raise ValueError/TypeError; whatever the library refuses
        (cu_seqlens, threshold, padding) raises RadixMLPError with its message.
        """
        if params is None:
            params = PlanParams(threshold=threshold, pad_multiple_of=pad_multiple_of, gate=gate)
        elif not isinstance(params, PlanParams):
            raise TypeError("params must be a PlanParams, got %r" % (params,))
        c_params = params._to_c()
        ids = as_u32(input_ids, "input_ids")
        pos = as_u32(position_ids, "position_ids")
        cu = as_u32(cu_seqlens, "cu_seqlens")
        if ids.shape[0] != pos.shape[0]:
            raise ValueError("input_ids and position_ids must have the same length: %d != %d"
                             % (ids.shape[0], pos.shape[0]))
        return self._build(ids, pos, cu, c_params, Plan)

    def _build(self, ids, pos, cu, c_params, extract):
        """Runs rmlp_plan_build on checked uint32 arrays; ``extract(rmlp_plan)`` copies what the
        caller needs while the planner's arrays are still valid."""
        out = _abi.rmlp_plan()
        n_seqs = max(cu.shape[0] - 1, 0)
        with self._lock:
            check(LIB.rmlp_plan_build(self._live(), u32_ptr(ids), u32_ptr(pos), ids.shape[0], u32_ptr(cu), n_seqs,
                                      ctypes.byref(c_params), ctypes.byref(out)))
            return extract(out)


_local = threading.local()


def _thread_planner():
    """One Planner per thread, reused by compute_fold_and_scatter and embed."""
    planner = getattr(_local, "planner", None)
    if planner is None or planner.closed:
        planner = Planner()
        _local.planner = planner
    return planner


def _check_reference_inputs(n_ids, n_pos, cu):
    """The checks of the published radix-mlp Python bindings, in their order."""
    if n_ids != n_pos:
        raise ValueError("input_ids and position_ids must have the same length: %d != %d" % (n_ids, n_pos))
    if cu.shape[0] < 2:
        raise ValueError("cu_seq_lengths must have at least 2 elements (start and end), got %d" % cu.shape[0])
    if cu[0] != 0:
        raise ValueError("cu_seq_lengths must start with 0, got %d" % cu[0])
    cu64 = cu.astype(np.int64)
    # The first index i >= 1 that is decreasing or beyond the batch (decreasing reported first).
    decreasing = np.flatnonzero(cu64[1:] < cu64[:-1])
    beyond = np.flatnonzero(cu64[1:] > n_ids)
    first_dec = decreasing[0] + 1 if decreasing.size else cu.shape[0]
    first_beyond = beyond[0] + 1 if beyond.size else cu.shape[0]
    if first_dec <= first_beyond and first_dec < cu.shape[0]:
        i = first_dec
        raise ValueError("cu_seq_lengths must be non-decreasing at index %d: %d < %d" % (i, cu64[i], cu64[i - 1]))
    if first_beyond < cu.shape[0]:
        i = first_beyond
        raise ValueError("cu_seq_lengths element %d (%d) exceeds input_ids length (%d)" % (i, cu64[i], n_ids))
    if cu64[-1] != n_ids:
        raise ValueError("cu_seq_lengths last element (%d) must equal input_ids length (%d)" % (cu64[-1], n_ids))


def compute_fold_and_scatter(input_ids, position_ids, cu_seq_lengths, pad_multiple_of=None):
    """Folds a batch into its distinct (token, position) paths, as the published ``radix-mlp``
    package does (always radix, threshold 1.0).

    Returns four uint32 arrays ``(compact_input_ids, compact_position_ids, scatter_indices,
    fold_gather)``: one compact row per distinct path in order of first occurrence
    (``fold_gather[j]`` is that first batch row), then with ``pad_multiple_of=n`` padding rows
    (token 0, position 0, gather 0) up to a multiple of n, any n from 1 (added here: the library's
    RMLP_MAX_PAD_MULTIPLE bounds its plans, not this function); ``scatter_indices[i]`` is the
    compact row of batch row i (``full[i] = compact[scatter_indices[i]]``), never a padding row.

    Inputs are lists or 1-D arrays of any integer dtype. Invalid input raises ValueError
    (lengths differ, cu_seq_lengths shorter than 2, not starting at 0, decreasing, beyond or
    not ending at len(input_ids), negative or >= 2^32 values, pad_multiple_of 0). An empty batch
    (input_ids [], cu_seq_lengths e.g. [0, 0]) gives four empty arrays.
    """
    ids = as_u32(input_ids, "input_ids")
    pos = as_u32(position_ids, "position_ids")
    cu = as_u32(cu_seq_lengths, "cu_seq_lengths")
    _check_reference_inputs(ids.shape[0], pos.shape[0], cu)
    pad = 1
    if pad_multiple_of is not None:
        if isinstance(pad_multiple_of, (bool, np.bool_)):
            raise TypeError("pad_multiple_of must be an int or None, got %r" % (pad_multiple_of,))
        pad = as_u32_scalar(pad_multiple_of, "pad_multiple_of")
        if pad < 1:
            raise ValueError("pad_multiple_of=%d must be at least 1 (or None)" % pad)
    if ids.shape[0] == 0:
        empty = np.zeros(0, dtype=np.uint32)
        return empty, empty.copy(), empty.copy(), empty.copy()
    c_params = PlanParams(threshold=1.0)._to_c()  # folded unpadded, padded below: any multiple

    def extract(plan):
        n = plan.n_compact
        rows = -(-n // pad) * pad

        def padded(ptr):
            out = np.zeros(rows, dtype=np.uint32)
            out[:n] = copy_u32(ptr, n)
            return out
        return (padded(plan.compact_input_ids), padded(plan.compact_position_ids),
                copy_u32(plan.scatter, plan.n_tokens), padded(plan.fold_gather))

    return _thread_planner()._build(ids, pos, cu, c_params, extract)


def plan_sequences(sequences, threshold, what, name):
    """The plan (gate ``threshold``) of token sequences back to back, positions 0..len-1 each;
    ValueError for no sequence or an empty one (``what``: the caller, ``name``: the argument)."""
    if isinstance(sequences, np.ndarray) and sequences.ndim == 2:
        sequences = list(sequences)
    sequences = list(sequences)
    if not sequences:
        raise ValueError("%s is empty: %s needs at least one sequence" % (name, what))
    parts = []
    for i, seq in enumerate(sequences):
        ids = as_u32(seq, "%s[%d]" % (name, i))
        if ids.shape[0] == 0:
            raise ValueError("%s[%d] is empty" % (name, i))
        parts.append(ids)
    lengths = np.array([p.shape[0] for p in parts], dtype=np.int64)
    input_ids = np.concatenate(parts)
    position_ids = np.concatenate([np.arange(n, dtype=np.uint32) for n in lengths])
    cu = np.concatenate([[0], np.cumsum(lengths)])
    if cu[-1] > 0xFFFFFFFF:
        raise ValueError("the batch has %d tokens, more than 2^32-1" % cu[-1])
    cu = cu.astype(np.uint32)
    c_params = PlanParams(threshold=threshold)._to_c()
    return _thread_planner()._build(input_ids, position_ids, cu, c_params, Plan)
