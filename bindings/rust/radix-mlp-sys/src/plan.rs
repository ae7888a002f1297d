//! The planner and the plan: `rmlp_plan_build` turns a batch (token ids, positions, `cu_seqlens`)
//! into the maps between its rows ("full space", N) and its distinct (token, position) paths
//! ("compact space", N'), or the identity where the gate finds too little shared. Pure C: the
//! planner-only library `libradix_mlp_plan` has all of it.
use crate::{rmlp_planner, rmlp_status};

/// `compact_parent` value of a row that starts its path (first token of a sequence) and
/// of padding rows.
pub const RMLP_NO_PARENT: u32 = 0xFFFF_FFFF;

/// Default gate threshold: radix is used when `n_distinct / n_tokens < 0.85`
/// (the default of text-embeddings-inference's `--radix-mlp-threshold`).
pub const RMLP_DEFAULT_THRESHOLD: f64 = 0.85;
/// Default padding multiple, used only when `pad` is set.
pub const RMLP_DEFAULT_PAD_MULTIPLE: u32 = 8;
/// Largest accepted padding multiple (GEMM tiles want 8 to 256; more only wastes rows).
pub const RMLP_MAX_PAD_MULTIPLE: u32 = 4096;

/// The rule by which the gate of `rmlp_plan_build` decides between radix and the identity.
pub type rmlp_gate = i32;
/// This library's rule (default): radix iff `threshold >= 1.0` or `n_distinct / n_tokens <
/// threshold` (unpadded count, in double precision); `threshold == 0` turns radix off and skips
/// the trie.
pub const RMLP_GATE_DISTINCT: rmlp_gate = 0;
/// The rule of text-embeddings-inference's in-tree RadixMLP code, so that a host switching from
/// it changes no decision: in single precision (TEI's threshold is an `f32`), radix is off when
/// `threshold <= 1e-6` (the trie is skipped) or the batch is empty; otherwise radix iff
/// `threshold >= 1.0` or `padded / n_tokens < threshold`, where `padded` is `n_distinct` rounded
/// up to `pad_multiple_of` when `pad` is set (the length of the padded compact batch).
pub const RMLP_GATE_TEI: rmlp_gate = 1;

/// How a plan is built. Get one from `rmlp_plan_default_params()` and change fields.
///
/// Versioned by `struct_size`, like every params struct of this ABI: a caller compiled against
/// an older header passes its smaller struct (a size an earlier release had) and the fields it
/// lacks take their defaults; a caller compiled against a newer header may pass a larger one
/// whose extra bytes (fields this library does not know) are all zero. Any other size is refused.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct rmlp_plan_params {
    /// `sizeof(rmlp_plan_params)` of the header the caller was compiled with.
    pub struct_size: u32,
    /// Pad the compact rows to a multiple of `pad_multiple_of` (default false).
    pub pad: bool,
    /// Multiple to pad to when `pad` is set; must then be 1 to `RMLP_MAX_PAD_MULTIPLE` (default 8).
    pub pad_multiple_of: u32,
    /// Gate (the semantics of TEI's `--radix-mlp-threshold`): radix is used iff
    /// `threshold >= 1.0` or `n_distinct / n_tokens < threshold`; `0` turns radix off and skips
    /// the trie. Otherwise the plan is the identity. Must not be NaN or negative (default 0.85).
    /// `gate` picks the exact rule.
    pub threshold: f64,
    /// `RMLP_GATE_DISTINCT` (default: the unpadded count, as above) or `RMLP_GATE_TEI` (TEI's
    /// in-tree rule: the padded compact length, single precision, off at `threshold <= 1e-6`).
    /// Added after 0.1.0: a caller passing the 0.1.0 struct (without it) gets the default.
    pub gate: rmlp_gate,
}

/// A plan: the index maps between the batch ("full space", `n_tokens` rows) and the compact
/// space (one row per distinct (token, position) path). The arrays belong to the planner
/// and stay valid until its next `rmlp_plan_build`, `rmlp_planner_reserve` or
/// `rmlp_planner_free`; they may be NULL when their length is 0. A host that keeps a plan
/// longer copies its arrays (and sets `planner` to NULL in the copy).
///
/// Every model call that takes a plan first checks its maps against each other, whoever built
/// it (a host may fill in a plan, or edit a library plan's arrays in place): `scatter`,
/// `fold_gather` and `compact_parent` must describe the same paths (each row reads its path's
/// first occurrence; a compact row's parent is the compact row of the row before it), and
/// `qo_indptr` and the runs, when present, must agree with `scatter`. A plan that fails is
/// `RMLP_ERR_INVALID_ARGUMENT` naming the first bad index; one pass over the rows, no memory.
/// (On CUDA the per-layer calls and read-outs run the device copy that `rmlp_context_set_plan`
/// made of the plan it checked, so they check only that the plan is the one set.)
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct rmlp_plan {
    /// N: rows of the batch.
    pub n_tokens: u32,
    /// B: sequences in the batch.
    pub n_seqs: u32,
    /// Distinct (token, position) paths found by the trie. Equals `n_tokens` when the trie was
    /// skipped (threshold 0).
    pub n_distinct: u32,
    /// N': compact rows the plan uses; `n_distinct` when `use_radix`, else `n_tokens`.
    pub n_compact: u32,
    /// N' rounded up to the padding multiple (equal to `n_compact` without padding or when the
    /// gate chose the identity). Compact buffers must have this many rows.
    pub n_compact_padded: u32,
    /// Whether the gate chose radix; false means every map below is the identity.
    pub use_radix: bool,
    /// `n_distinct / n_tokens` (1.0 for an empty batch): the compression ratio to export.
    pub compact_ratio: f64,
    /// Wall time of the build in microseconds, validation included.
    pub build_us: f64,
    /// (n_compact_padded) row of the batch each compact row is read from: the first occurrence
    /// of its path, strictly increasing over the first `n_compact` rows; 0 on padding rows.
    pub fold_gather: *const u32,
    /// (n_tokens) compact row each batch row takes its result from: `full[i] = compact[scatter[i]]`.
    /// Never points at a padding row.
    pub scatter: *const u32,
    /// (n_compact_padded) token id of each compact row; 0 on padding rows.
    pub compact_input_ids: *const u32,
    /// (n_compact_padded) position id of each compact row; 0 on padding rows.
    pub compact_position_ids: *const u32,
    /// (n_compact_padded) compact row of the token before this one in its path, or
    /// `RMLP_NO_PARENT` for the first token of a path and for padding rows.
    pub compact_parent: *const u32,
    /// (n_seqs + 1) the batch's cu_seqlens, copied: the model calls take the sequence
    /// boundaries from here, so they always agree with the maps.
    pub cu_seqlens: *const u32,
    /// The planner whose arrays these are (set by `rmlp_plan_build`), or NULL for a plan whose
    /// arrays the host owns (a zero-initialised plan it filled in itself, as 0.1.0 hosts do). The
    /// model calls check a plan with a planner against it: once the planner has built again,
    /// reserved or been freed, the plan is refused (`RMLP_ERR_INVALID_ARGUMENT`, "the plan is
    /// stale" / "the plan's planner was freed") instead of read from arrays that changed or are
    /// gone. The freed case is best-effort, like every handle check.
    pub planner: *const rmlp_planner,
    /// The planner's build count when this plan was built (compared with its current count).
    pub generation: u64,
    /// The layout of attention in compact space (added after 0.1.0; NULL in a plan a host fills
    /// in itself, which then cannot run compact attention). (n_seqs + 1): sequence s owns the
    /// compact rows `qo_indptr[s] .. qo_indptr[s+1]`, the first occurrences of its paths, which
    /// are the last `qo_indptr[s+1] - qo_indptr[s]` rows of its path (a sequence that repeats or
    /// prefixes an earlier one owns none); `qo_indptr[n_seqs] == n_compact`. The identity plan:
    /// `cu_seqlens`.
    pub qo_indptr: *const u32,
    /// The runs of consecutive compact rows the sequences' paths are made of (one per trie branch
    /// a path passes; a sequence's rows past its first new row form its last run): path s is runs
    /// `run_indptr[s] .. run_indptr[s+1]`, run r covering the batch rows `run_start[r] ..` (the
    /// next run's start, or the sequence's end), which read the consecutive compact rows
    /// `scatter[run_start[r]] ..`: `scatter[run_start[r] + i] == scatter[run_start[r]] + i`.
    /// Where one run ends its successor never continues its compact rows (runs are maximal).
    pub n_runs: u32,
    /// (n_seqs + 1) first run of each sequence.
    pub run_indptr: *const u32,
    /// (n_runs) batch row where each run starts.
    pub run_start: *const u32,
}

#[allow(improper_ctypes)] // rmlp_planner is opaque: only pointers cross the ABI
extern "C" {
    /// The default plan parameters: no padding (multiple 8 when enabled), threshold 0.85,
    /// `RMLP_GATE_DISTINCT`.
    pub fn rmlp_plan_default_params() -> rmlp_plan_params;

    /// Plan parameters as a deployment sets them, from the environment, starting from
    /// `rmlp_plan_default_params()` with `RMLP_GATE_TEI`: the variables are TEI's, so they decide
    /// as TEI's code does unless `RADIX_MLP_GATE` says otherwise.
    /// * `RADIX_MLP_THRESHOLD`: the gate, TEI's `--radix-mlp-threshold` (default 0.85; 0 turns
    ///   radix off, 1 or more always uses it); a number >= 0.
    /// * `RADIX_MLP_PAD`: pad the compact rows to this multiple (1..`RMLP_MAX_PAD_MULTIPLE`);
    ///   unset or empty means no padding.
    /// * `RADIX_MLP_GATE`: `tei` (default, `RMLP_GATE_TEI`, the rule of TEI's in-tree code) or
    ///   `distinct` (`RMLP_GATE_DISTINCT`, this library's rule on the unpadded count).
    ///
    /// An unset variable keeps the default; a set but invalid one is an error naming the variable
    /// and its value (`*out` then holds what an empty environment gives), never a silent default.
    pub fn rmlp_plan_params_from_env(out: *mut rmlp_plan_params) -> rmlp_status;

    /// Creates a planner in `*out` (set to NULL on failure).
    pub fn rmlp_planner_create(out: *mut *mut rmlp_planner) -> rmlp_status;
    /// Frees a planner and the arrays of its last plan. NULL is a no-op. A handle that is not a
    /// live planner (freed already, or another kind of handle) or a planner in use by a call on
    /// another thread is left alone, with a message in `rmlp_last_error()` (which a free that
    /// succeeds leaves empty).
    pub fn rmlp_planner_free(planner: *mut rmlp_planner);
    /// Grows the planner's scratch for batches of up to `n_tokens` tokens in `n_seqs`
    /// sequences (padded to a multiple of `max_pad_multiple`, 0 or 1 for none, at most
    /// `RMLP_MAX_PAD_MULTIPLE`), so that builds of such batches
    /// allocate nothing. Optional: builds grow the scratch themselves.
    pub fn rmlp_planner_reserve(
        planner: *mut rmlp_planner,
        n_tokens: usize,
        n_seqs: usize,
        max_pad_multiple: u32,
    ) -> rmlp_status;

    /// Builds the plan of one batch.
    ///
    /// * `input_ids`, `position_ids`: (n_tokens) the batch, sequences back to back.
    /// * `cu_seqlens`: (n_seqs + 1) offsets of the sequences: `cu_seqlens[0] == 0`,
    ///   non-decreasing, `cu_seqlens[n_seqs] == n_tokens`. Empty sequences are allowed.
    /// * `params`: NULL for `rmlp_plan_default_params()`.
    /// * `out`: receives the plan; its arrays belong to the planner.
    ///
    /// `n_tokens == 0` (with `n_seqs >= 1`) gives an empty plan. On error `*out` is zeroed and
    /// the planner stays usable.
    pub fn rmlp_plan_build(
        planner: *mut rmlp_planner,
        input_ids: *const u32,
        position_ids: *const u32,
        n_tokens: usize,
        cu_seqlens: *const u32,
        n_seqs: usize,
        params: *const rmlp_plan_params,
        out: *mut rmlp_plan,
    ) -> rmlp_status;
}
