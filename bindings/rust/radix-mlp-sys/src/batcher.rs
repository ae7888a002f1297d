//! The batcher (issue 33): a queue of pending requests that hands out batches sharing the deepest
//! prefixes first (`rmlp_batcher_*`), or, with a context's prefix cache attached, the oldest first
//! with what the cache holds first among requests arriving together. The logic lives in `batch/` of the C library; docs/batching.md says how a host uses it.
use crate::{rmlp_batcher, rmlp_context, rmlp_status};

/// How `rmlp_batcher_next` picks a batch (`rmlp_batcher_params::mode`).
pub type rmlp_batch_mode = i32;
/// Prefix batching (default): requests older than `max_wait_us` first (oldest first), then those
/// the last batch passed over (oldest first, each with its group), then requests grouped by the
/// deepest prefixes they share with each other or with the batch so far, then the oldest of the
/// rest, under the budget. With a context's prefix cache attached, after the aged ones the oldest
/// first, each that fits (a group split across batches finds its prefix cached in the next);
/// among requests of the same arrival time, the deepest shared or cached prefix first.
pub const RMLP_BATCH_PREFIX: rmlp_batch_mode = 0;
/// First in, first out: requests in the order they were pushed, up to the first that does not fit
/// the budget (a plain queue, as text-embeddings-inference's is).
pub const RMLP_BATCH_FIFO: rmlp_batch_mode = 1;

/// Bit of `rmlp_batch::flags`: the batch is one request longer than `max_tokens`, alone (it can
/// never share a batch under that budget; it is handed out when it is the oldest waiting past
/// `max_wait_us`, or when nothing else fits, so it is not starved).
pub const RMLP_BATCH_OVERSIZED: u32 = 1;
/// Bit of `rmlp_batch::flags`: the batch holds requests that waited `max_wait_us` or longer
/// (`n_aged` of them), taken before any other.
pub const RMLP_BATCH_AGED: u32 = 2;
/// Bit of `rmlp_batch::flags`: a context is attached but was in a call on another thread, so the
/// batch was chosen without looking at its prefix cache (`cached_tokens` is 0).
pub const RMLP_BATCH_CACHE_SKIPPED: u32 = 4;

/// Default capacity of a batcher: requests queued at once.
pub const RMLP_BATCHER_DEFAULT_MAX_REQUESTS: u32 = 4096;
/// Default capacity of a batcher: token ids queued at once (all requests together).
pub const RMLP_BATCHER_DEFAULT_MAX_QUEUED_TOKENS: u32 = 1 << 20;
/// Default age bound: 100 ms.
pub const RMLP_BATCHER_DEFAULT_MAX_WAIT_US: u64 = 100_000;

/// How a batcher is made (`rmlp_batcher_create`). Get one from `rmlp_batcher_default_params()`
/// and change fields; versioned by `struct_size` like the other params structs.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct rmlp_batcher_params {
    /// `sizeof(rmlp_batcher_params)` of the caller's header.
    pub struct_size: u32,
    /// `RMLP_BATCH_PREFIX` (default) or `RMLP_BATCH_FIFO`.
    pub mode: rmlp_batch_mode,
    /// Capacity: requests queued at once (default 4096, at least 1); a push past it is
    /// `RMLP_ERR_FULL`.
    pub max_requests: u32,
    /// Capacity: token ids queued at once, all requests together (default 2^20, at least 1); a
    /// push past it is `RMLP_ERR_FULL` (`RMLP_ERR_TOO_LARGE` for one request longer than it).
    pub max_queued_tokens: u32,
    /// Age bound of prefix batching, in microseconds of the clock the host stamps arrivals with
    /// (default 100 ms): a request whose `now_us - arrival_us` reaches it is taken before any
    /// request that has not, oldest first. `UINT64_MAX`: no bound. Ignored by `RMLP_BATCH_FIFO`.
    pub max_wait_us: u64,
}

/// A batch from `rmlp_batcher_next`: its requests, in the order the host answers them, laid
/// out as `rmlp_plan_build` takes a batch (`input_ids`, `position_ids`, `n_tokens`,
/// `cu_seqlens`, `n_seqs`). The arrays belong to the batcher and stay valid until its next
/// `rmlp_batcher_next` or `rmlp_batcher_free`; the requests are no longer queued.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct rmlp_batch {
    /// Requests (sequences) in the batch; 0 when the queue was empty (then `cu_seqlens` is `[0]`).
    pub n_seqs: u32,
    /// Token ids in the batch (N).
    pub n_tokens: u32,
    /// `RMLP_BATCH_*` bits.
    pub flags: u32,
    /// Requests that had waited `max_wait_us` or longer (prefix mode; 0 in FIFO mode).
    pub n_aged: u32,
    /// Tokens that repeat a (token, position) path of an earlier request in the batch: N minus
    /// the distinct paths N' the planner finds.
    pub shared_tokens: u32,
    /// Distinct paths of the batch that the attached context's prefix cache held when the batch
    /// was chosen (0 without a context): rows a cached forward would not compute.
    pub cached_tokens: u32,
    /// (n_seqs) the host's request ids.
    pub ids: *const u64,
    /// (n_seqs) their arrival times, as pushed.
    pub arrival_us: *const u64,
    /// (n_tokens) the requests' token ids back to back.
    pub input_ids: *const u32,
    /// (n_tokens) positions, 0.. within each request.
    pub position_ids: *const u32,
    /// (n_seqs + 1) offsets of the requests in `input_ids`.
    pub cu_seqlens: *const u32,
}

#[allow(improper_ctypes)] // rmlp_batcher and rmlp_context are opaque: only pointers cross the ABI
extern "C" {
    /// The defaults of `rmlp_batcher_params` (`struct_size` set, prefix mode, 4096 requests,
    /// 2^20 tokens, 100 ms).
    pub fn rmlp_batcher_default_params() -> rmlp_batcher_params;
    /// Creates a batcher with storage for its capacity (`params`: NULL for the defaults).
    /// `RMLP_ERR_INVALID_ARGUMENT` for a zero capacity or an unknown mode,
    /// `RMLP_ERR_OUT_OF_MEMORY` naming the array that could not be allocated.
    pub fn rmlp_batcher_create(params: *const rmlp_batcher_params, out: *mut *mut rmlp_batcher) -> rmlp_status;
    /// Frees a batcher (NULL: nothing). A context attached to it is left alone.
    pub fn rmlp_batcher_free(batcher: *mut rmlp_batcher);
    /// Queues a request: `token_ids` (n_tokens) are copied. Refused, with the queue unchanged:
    /// an `id` already queued or an empty request (`RMLP_ERR_INVALID_ARGUMENT`), a request longer
    /// than `max_queued_tokens` (`RMLP_ERR_TOO_LARGE`), a queue at its capacity of requests or
    /// tokens (`RMLP_ERR_FULL`: take a batch first).
    pub fn rmlp_batcher_push(
        batcher: *mut rmlp_batcher,
        id: u64,
        token_ids: *const u32,
        n_tokens: usize,
        arrival_us: u64,
    ) -> rmlp_status;
    /// Takes a queued request out without batching it (a client that went away);
    /// `RMLP_ERR_INVALID_ARGUMENT` when no request with `id` is queued.
    pub fn rmlp_batcher_remove(batcher: *mut rmlp_batcher, id: u64) -> rmlp_status;
    /// The requests and token ids queued now (either pointer may be NULL).
    pub fn rmlp_batcher_pending(
        batcher: *mut rmlp_batcher,
        n_requests: *mut usize,
        n_tokens: *mut usize,
    ) -> rmlp_status;
    /// Takes the next batch of at most `max_tokens` token ids in at most `max_seqs` requests
    /// (both at least 1) at time `now_us`, as `rmlp_batcher_params::mode` picks it, and removes
    /// its requests from the queue. A request longer than `max_tokens` goes alone
    /// (`RMLP_BATCH_OVERSIZED`). An empty queue gives an empty batch (`n_seqs == 0`).
    pub fn rmlp_batcher_next(
        batcher: *mut rmlp_batcher,
        max_tokens: usize,
        max_seqs: usize,
        now_us: u64,
        out: *mut rmlp_batch,
    ) -> rmlp_status;
    /// `rmlp_batcher_next` with a second budget: the batch's compact rows, `n_tokens -
    /// shared_tokens` (N', the rows the planner computes once per distinct prefix path), at most
    /// `max_rows` (at least 1). A RadixMLP forward's compute and its compact activations scale
    /// with N', its token arrays with N: a host bounds a batch's cost with `max_rows` and its
    /// full-layout memory with `max_tokens` (at most the context's `max_tokens`). Prefix batching
    /// then fits more requests of a shared prefix in one batch. Every policy keeps both budgets; a
    /// request whose tokens exceed either goes alone when nothing else fits
    /// (`RMLP_BATCH_OVERSIZED`). `max_rows >= max_tokens` is `rmlp_batcher_next`.
    pub fn rmlp_batcher_next_rows(
        batcher: *mut rmlp_batcher,
        max_tokens: usize,
        max_rows: usize,
        max_seqs: usize,
        now_us: u64,
        out: *mut rmlp_batch,
    ) -> rmlp_status;
    /// Attaches a context whose prefix cache prefix batching reads (then batches go by age,
    /// requests arriving together under a cached prefix first; `rmlp_batch::cached_tokens`), or
    /// detaches with NULL. The context must
    /// have a cache (`cache_bytes != 0`) and outlive the attachment (detach before freeing it).
    /// `rmlp_batcher_next` enters the context as any call does; when another thread is in it, the
    /// batch is chosen without the cache (`RMLP_BATCH_CACHE_SKIPPED`). Not in libradix_mlp_plan.
    pub fn rmlp_batcher_attach_context(batcher: *mut rmlp_batcher, context: *mut rmlp_context) -> rmlp_status;
}
