//! Raw ABI of libradix_mlp: the one declaration of every type, constant and entry point.
//!
//! `ffi/include/radix_mlp.h` is generated from this file by cbindgen
//! (`scripts/gen_header.sh`); the C sources include that header, so the C compiler checks
//! each definition against what is declared here. Change the ABI here, regenerate, commit both.
//!
//! Conventions: every fallible call returns an `rmlp_status` (0 ok, negative errors; values
//! are pinned once released) and, on error, leaves a message naming the argument and index in
//! the calling thread's `rmlp_last_error()`. The library never aborts, exits or prints.
#![allow(non_camel_case_types)]

use core::ffi::c_char;

/// Major version: the SONAME carries it; a change means the ABI broke.
pub const RMLP_VERSION_MAJOR: u32 = 0;
/// Minor version: additions that keep the ABI.
pub const RMLP_VERSION_MINOR: u32 = 1;
/// Patch version: fixes only.
pub const RMLP_VERSION_PATCH: u32 = 0;
/// The version as one number, `major << 16 | minor << 8 | patch`, as `rmlp_version()` returns it.
pub const RMLP_VERSION: u32 = (RMLP_VERSION_MAJOR << 16) | (RMLP_VERSION_MINOR << 8) | RMLP_VERSION_PATCH;

/// Result of every fallible call: `RMLP_OK` or one of the negative `RMLP_ERR_*` codes.
pub type rmlp_status = i32;
/// Success.
pub const RMLP_OK: rmlp_status = 0;
/// A pointer, size, flag or parameter is invalid (NULL where data is needed, wrong
/// `struct_size`, NaN threshold, zero padding multiple, ...).
pub const RMLP_ERR_INVALID_ARGUMENT: rmlp_status = -1;
/// `cu_seqlens` does not describe the batch: first entry not 0, decreasing, last entry not
/// equal to the number of tokens, or no sequence at all.
pub const RMLP_ERR_INVALID_SEQLENS: rmlp_status = -2;
/// A size does not fit the 32-bit indices the plan uses (more than 2^32-1 tokens or rows).
pub const RMLP_ERR_TOO_LARGE: rmlp_status = -3;
/// Memory could not be allocated; nothing was leaked and the object is still usable.
pub const RMLP_ERR_OUT_OF_MEMORY: rmlp_status = -4;
/// The feature is not part of this build (for example CUDA in a CPU-only build).
pub const RMLP_ERR_UNSUPPORTED: rmlp_status = -5;
/// A CUDA runtime call failed; the message names the call and CUDA's error string.
pub const RMLP_ERR_CUDA: rmlp_status = -6;
/// No CUDA device is present.
pub const RMLP_ERR_NO_DEVICE: rmlp_status = -7;
/// A library invariant broke; please report it with the message.
pub const RMLP_ERR_INTERNAL: rmlp_status = -8;

/// Bit of `rmlp_build_flags()`: the library was compiled with CUDA kernels.
pub const RMLP_BUILD_CUDA: u32 = 1;

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

/// Reusable plan builder. Holds all scratch and the output arrays of the last plan, so
/// steady-state builds allocate nothing. Not thread-safe: use one planner per thread;
/// planners on different threads run concurrently.
pub struct rmlp_planner {
    _opaque: [u8; 0],
}

/// How a plan is built. Get one from `rmlp_plan_default_params()` and change fields.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct rmlp_plan_params {
    /// Must be `sizeof(rmlp_plan_params)` of the header the caller was compiled with.
    pub struct_size: u32,
    /// Pad the compact rows to a multiple of `pad_multiple_of` (default false).
    pub pad: bool,
    /// Multiple to pad to when `pad` is set; must then be 1 to `RMLP_MAX_PAD_MULTIPLE` (default 8).
    pub pad_multiple_of: u32,
    /// Gate (the semantics of TEI's `--radix-mlp-threshold`): radix is used iff
    /// `threshold >= 1.0` or `n_distinct / n_tokens < threshold`; `0` turns radix off and skips
    /// the trie. Otherwise the plan is the identity. Must not be NaN or negative (default 0.85).
    pub threshold: f64,
}

/// A plan: the index maps between the batch ("full space", `n_tokens` rows) and the compact
/// space (one row per distinct (token, position) path). The arrays belong to the planner
/// and stay valid until its next `rmlp_plan_build` or `rmlp_planner_free`; they may be NULL
/// when their length is 0.
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
}

#[allow(improper_ctypes)] // rmlp_planner is opaque: only pointers to it cross the ABI
extern "C" {
    /// The library's version, `major << 16 | minor << 8 | patch`; compare with `RMLP_VERSION`.
    pub fn rmlp_version() -> u32;
    /// The library's version as "major.minor.patch" (static storage).
    pub fn rmlp_version_string() -> *const c_char;
    /// Bit set of `RMLP_BUILD_*` flags describing this build.
    pub fn rmlp_build_flags() -> u32;
    /// A fixed English description of a status code (static storage; never NULL).
    pub fn rmlp_status_string(status: rmlp_status) -> *const c_char;
    /// Detail of the last error on the calling thread: set by a call that returns an error
    /// status, cleared ("") by the next call that returns a status. Valid until then.
    pub fn rmlp_last_error() -> *const c_char;

    /// Number of CUDA devices in `*count`. `RMLP_ERR_UNSUPPORTED` in a build without CUDA;
    /// `RMLP_ERR_NO_DEVICE` (with `*count = 0`) when the driver reports none.
    pub fn rmlp_cuda_device_count(count: *mut i32) -> rmlp_status;

    /// The default plan parameters: no padding (multiple 8 when enabled), threshold 0.85.
    pub fn rmlp_plan_default_params() -> rmlp_plan_params;

    /// Creates a planner in `*out` (set to NULL on failure).
    pub fn rmlp_planner_create(out: *mut *mut rmlp_planner) -> rmlp_status;
    /// Frees a planner and the arrays of its last plan. NULL is a no-op.
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
