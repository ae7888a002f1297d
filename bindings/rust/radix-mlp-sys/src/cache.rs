//! The prefix KV cache of a context (`rmlp_context_params::cache_bytes`): its counters, emptying it,
//! and a read-only look at how much of a request it holds.
use crate::{rmlp_context, rmlp_status};

/// What a context's prefix cache did since its creation (`rmlp_context_cache_stats`). Tokens are
/// compact rows: a batch's distinct (token, position) paths.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct rmlp_cache_stats {
    /// Batches run with a cache; of them, run without it because their new rows did not fit.
    pub batches: u64,
    pub bypassed: u64,
    /// Compact rows looked up; of them, found in the cache (their K/V reused in every layer).
    pub lookups: u64,
    pub hit_tokens: u64,
    /// Rows computed and cached; rows evicted to make room.
    pub computed_tokens: u64,
    pub evicted_tokens: u64,
    /// Slots in the cache, slots holding a row, and the bytes of one slot and of all of them.
    pub slots: u64,
    pub slots_used: u64,
    pub bytes_per_slot: u64,
    pub bytes_budget: u64,
    pub bytes_in_use: u64,
}

#[allow(improper_ctypes)] // rmlp_context is opaque: only pointers cross the ABI
extern "C" {
    /// The prefix cache's counters (all zero for a context without a cache).
    pub fn rmlp_context_cache_stats(context: *mut rmlp_context, out: *mut rmlp_cache_stats) -> rmlp_status;
    /// Empties the prefix cache (the counters stay). OK for a context without a cache.
    pub fn rmlp_context_cache_clear(context: *mut rmlp_context) -> rmlp_status;
    /// How many leading tokens of `token_ids` (n_tokens, positions 0..) the context's prefix cache
    /// holds now, into `n_cached` (0 for a context without a cache). Changes nothing, not even the
    /// cache's counters or its eviction order. Not in libradix_mlp_plan.
    pub fn rmlp_context_cached_prefix(
        context: *mut rmlp_context,
        token_ids: *const u32,
        n_tokens: usize,
        n_cached: *mut usize,
    ) -> rmlp_status;
}
