//! Generation: a decoding session on a context with a prefix cache. The prompts are prefilled
//! through the cache, each step appends one token per active sequence, and the keys of a shared
//! prefix are read once per step for every sequence below it.
use crate::{rmlp_context, rmlp_plan, rmlp_status};

/// Options of a generation session (`rmlp_generate_begin`): get them from
/// `rmlp_generate_default_params()` and change fields; versioned by `struct_size`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct rmlp_generate_params {
    /// `sizeof(rmlp_generate_params)` of the caller's header.
    pub struct_size: u32,
    /// Most rows a sequence may append (default 256): sizes the session's state; a step that would
    /// pass it for a sequence is refused (finish the sequence first).
    pub max_new_tokens: u32,
    /// Shared-prefix (cascade) attention (default true): the keys of a prefix node are read once per
    /// step for every sequence below it, partial softmax states merged with their log-sum-exp in
    /// fp32. False: each sequence attends over its whole path alone (the same function up to fp32
    /// rounding; for comparisons).
    pub shared_prefix_attention: bool,
}

/// What a context's generation session did since `rmlp_generate_begin` (`rmlp_generate_get_stats`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct rmlp_generate_stats {
    /// Sequences of the session, and of them still active.
    pub n_seqs: u64,
    pub n_active: u64,
    /// Steps run; rows appended in them (one per active sequence and step); of those, computed
    /// (the others were found in the cache, or shared with another sequence's row of the same step).
    pub steps: u64,
    pub rows: u64,
    pub rows_computed: u64,
    /// Wall time of the steps, and of their attention, in milliseconds.
    pub step_ms: f64,
    pub attention_ms: f64,
}

#[allow(improper_ctypes)] // rmlp_context is opaque: only pointers cross the ABI
extern "C" {
    /// The defaults of `rmlp_generate_params` (`struct_size` set, 256 new tokens, shared-prefix
    /// attention on).
    pub fn rmlp_generate_default_params() -> rmlp_generate_params;
    /// Begins a generation session on a context with a prefix cache (`cache_bytes != 0`) and a
    /// model with an LM head: prefills the plan's sequences (every one non-empty) through the cache,
    /// so prompt rows become cache slots shared where the prompts share, and writes `logits`
    /// (n_seqs, vocab_size, host memory on every device): the LM head at each prompt's last token.
    /// Every sequence is then active, its last row locked in the cache. No `rmlp_context_set_plan`
    /// is needed first on any device: on CUDA begin sets the plan on the context itself (as that
    /// call does, replacing the one set) unless it is the one set already; begin synchronises the
    /// context's stream and cannot be captured. `params`: NULL for the defaults. One session per
    /// context: `rmlp_generate_end` it before the next. Allocates the session's state (freed by
    /// `rmlp_generate_end` or `rmlp_context_free`); the steps allocate nothing. On the CPU with
    /// `rmlp_cpu_threads()` above 1 the session also starts that many threads less one for its
    /// steps (the decode attention, and the linear layers and LM head of 2 to 128 rows, which
    /// run the library's own kernels instead of BLAS), which sleep between steps and are joined
    /// when it ends; `RMLP_ERR_OUT_OF_MEMORY` when they cannot be started. Prompts whose new
    /// rows do not fit the cache are `RMLP_ERR_TOO_LARGE`.
    pub fn rmlp_generate_begin(
        context: *mut rmlp_context,
        plan: *const rmlp_plan,
        params: *const rmlp_generate_params,
        logits: *mut f32,
    ) -> rmlp_status;
    /// One decode step: `tokens` (n_tokens) one token id per active sequence, in ascending sequence
    /// order (`n_tokens` must equal the active count); each is appended to its sequence at the next
    /// position as a row of the cache (a row already cached, or appended by another sequence in the
    /// same step, is reused), the new rows run through the model as one matrix, and `logits`
    /// (n_tokens, vocab_size) gets the LM head at each. A cache too full for the new rows (every
    /// unlocked row evicted) is `RMLP_ERR_OUT_OF_MEMORY` and changes nothing.
    pub fn rmlp_generate_step(
        context: *mut rmlp_context,
        tokens: *const u32,
        n_tokens: usize,
        logits: *mut f32,
    ) -> rmlp_status;
    /// Finishes sequence `seq` (its index in the plan of `rmlp_generate_begin`): it leaves the
    /// active set and its rows stay in the cache, unlocked (evictable, and found by later prompts).
    pub fn rmlp_generate_finish(context: *mut rmlp_context, seq: u32) -> rmlp_status;
    /// Ends the session: finishes every active sequence and frees the session. OK without one.
    pub fn rmlp_generate_end(context: *mut rmlp_context) -> rmlp_status;
    /// The active sequences: their count in `n_active`, and, when `seqs` is not NULL, their indices
    /// ascending in `seqs` (room for n_seqs). Without a session: 0.
    pub fn rmlp_generate_active(context: *mut rmlp_context, seqs: *mut u32, n_active: *mut usize) -> rmlp_status;
    /// The session's counters (zero without a session).
    pub fn rmlp_generate_get_stats(context: *mut rmlp_context, out: *mut rmlp_generate_stats) -> rmlp_status;
}
