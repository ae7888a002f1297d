//! Contexts: the workspace of one thread (or stream) on a model, sized at creation so that the calls
//! through it never allocate; the whole forward of a batch, in full or compact space, and its
//! read-outs (pooling, reranker scores); where a CPU context's forwards spend their time.
use core::ffi::c_void;

use crate::{rmlp_attention_fn, rmlp_attention_space, rmlp_context, rmlp_gpu_attention, rmlp_model, rmlp_plan, rmlp_status};

/// How `rmlp_pool` turns a sequence's rows into one vector.
pub type rmlp_pooling = i32;
/// The last token (Qwen3-Embedding).
pub const RMLP_POOLING_LAST: rmlp_pooling = 1;
/// The mean over the sequence's tokens.
pub const RMLP_POOLING_MEAN: rmlp_pooling = 2;
/// The first token.
pub const RMLP_POOLING_FIRST: rmlp_pooling = 3;

/// How a context runs, for `rmlp_context_create_with_params`. Get one from
/// `rmlp_context_default_params()` and change fields; versioned by `struct_size` like the
/// other params structs.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct rmlp_context_params {
    /// `sizeof(rmlp_context_params)` of the caller's header.
    pub struct_size: u32,
    /// Where `rmlp_forward` runs attention (default `RMLP_ATTENTION_FULL`): the built-in
    /// attention, or the host's callback, which then gets `rmlp_attention_args` in that layout.
    pub attention_space: rmlp_attention_space,
    /// Bytes of the context's prefix KV cache (default 0: none), fixed at creation: token slots
    /// holding each layer's K and V and the final hidden state of a row (model dtype), a radix tree
    /// over (token, position) paths, LRU eviction of unlocked leaves. With a cache, `rmlp_forward`
    /// and `rmlp_forward_compact` compute only the compact rows the cache lacks (attention in
    /// compact space, over cached plus computed keys) and cache them; the outputs are the same up
    /// to fp32 rounding. A batch whose new rows do not fit even after evicting every unlocked row
    /// runs without the cache (counted as bypassed), with no error. The cache needs the built-in
    /// attention (a host callback is refused) and is not used by the per-layer calls. Freeing the
    /// context frees it; like the context, it is used by one thread at a time.
    pub cache_bytes: u64,
    /// Which kernel the built-in attention of a CUDA context runs (default
    /// `RMLP_GPU_ATTENTION_AUTO`, which lets `RADIX_MLP_GPU_ATTENTION` decide; another value wins
    /// over that variable). A CPU context takes only `RMLP_GPU_ATTENTION_AUTO` (another value is
    /// `RMLP_ERR_INVALID_ARGUMENT`: it cannot apply) and reads no `RADIX_MLP_GPU_*` variable.
    /// Added in 0.2 after `cache_bytes`: a struct of 16 bytes (without it) gets the default.
    pub gpu_attention: rmlp_gpu_attention,
}

/// Where a CPU context's whole forwards (`rmlp_forward`, `rmlp_forward_compact`, with or without a
/// prefix cache) spent their time, by phase, as `rmlp_context_cpu_profile` measured it: wall-clock
/// milliseconds summed over the forwards measured since the previous read. The phases need not add
/// up to `total_ms`: the rest is the output's finite check and a cache's copies.
/// An output struct versioned by `struct_size`, like `rmlp_gpu_stats`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct rmlp_cpu_profile {
    pub struct_size: u32,
    /// Whether the context runs on the CPU (false for CUDA: every other field is zero).
    pub cpu: bool,
    /// The forwards measured.
    pub forwards: u64,
    /// Their whole time.
    pub total_ms: f64,
    /// The linear layers (the GEMMs).
    pub gemm_ms: f64,
    /// Attention, built-in or the host's callback.
    pub attention_ms: f64,
    /// Norms, RoPE, the SwiGLU product, residual adds.
    pub elementwise_ms: f64,
    /// Embedding rows, the scatter to the batch rows and the gather back (full space), the cache's
    /// slots.
    pub gather_ms: f64,
}

#[allow(improper_ctypes)] // rmlp_context and rmlp_model are opaque: only pointers cross the ABI
extern "C" {
    /// Creates a context for batches of up to `max_tokens` tokens (plans padded by up to
    /// `RMLP_MAX_PAD_MULTIPLE - 1` rows fit too) and at most `max_tokens` sequences. The model
    /// must outlive it (`rmlp_model_free` refuses a model that still has contexts). On CUDA this
    /// allocates the whole device workspace (activations of a forward, the plan's maps, a 32 MiB
    /// cuBLAS workspace), pinned staging for plans, a cuBLAS handle and events, so that nothing
    /// after it allocates; its stream is the legacy default stream until `rmlp_context_set_stream`.
    /// On the CPU it allocates the workspace and starts `rmlp_cpu_threads() - 1` threads (its
    /// elementwise passes and attention; none at 1), kept until `rmlp_context_free`: a context keeps
    /// the thread count it was created with.
    pub fn rmlp_context_create(model: *const rmlp_model, max_tokens: usize, out: *mut *mut rmlp_context)
        -> rmlp_status;
    /// The defaults of `rmlp_context_params` (`struct_size` set, attention in full space).
    pub fn rmlp_context_default_params() -> rmlp_context_params;
    /// `rmlp_context_create` with `params` (NULL: the defaults).
    pub fn rmlp_context_create_with_params(
        model: *const rmlp_model,
        max_tokens: usize,
        params: *const rmlp_context_params,
        out: *mut *mut rmlp_context,
    ) -> rmlp_status;
    /// Frees a context. NULL is a no-op. On CUDA it first waits for the context's stream. A handle
    /// that is not a live context, or a context in use by a call (on another thread, or the call
    /// whose host attention callback is freeing it), is left alone with a message in
    /// `rmlp_last_error()` (empty after a free that succeeds).
    pub fn rmlp_context_free(context: *mut rmlp_context);
    /// Sets the stream (`cudaStream_t` of the model's device; NULL: the legacy default stream) on
    /// which every later call through this context enqueues its work, the cuBLAS handle's
    /// included. Work already enqueued on the previous stream is ordered before anything on the
    /// new one (an event, not a host wait). On the CPU the stream is ignored and this returns OK.
    pub fn rmlp_context_set_stream(context: *mut rmlp_context, stream: *mut c_void) -> rmlp_status;
    /// Per-batch setup, once per plan before its embed/forward: on CUDA copies the plan's maps
    /// and cu_seqlens into the context's device buffers, through pinned staging, asynchronously
    /// on the context's stream, so the host may rebuild or free its plan as soon as this returns.
    /// It waits (host side) only for the previous `rmlp_context_set_plan`'s copy to have left the
    /// staging buffer, and is refused while the stream is capturing a graph. Every later call
    /// with a plan checks that it is this one (same array pointers and counts; `rmlp_embed` and
    /// `rmlp_forward` also compare the maps' contents), so a stale device copy is an error, never
    /// a wrong result. On the CPU it only validates the plan and returns OK, so hosts may call it
    /// unconditionally.
    pub fn rmlp_context_set_plan(context: *mut rmlp_context, plan: *const rmlp_plan) -> rmlp_status;
    /// The whole model on one batch: embed, every layer (with `attention(user_data, ...)` or the
    /// built-in attention when NULL), final norm. `out` (n_tokens, hidden_size) receives the last
    /// hidden states of every batch row. Attention runs in the context's `attention_space`
    /// (full by default; compact as in `rmlp_forward_compact`, then the final rows are scattered).
    ///
    /// CUDA: `out` is device memory in the model's dtype; call `rmlp_context_set_plan(plan)`
    /// first. Like the per-layer calls, the forward only enqueues work on the context's stream:
    /// it never allocates or synchronises, so it may be captured in a CUDA graph. The graph holds
    /// the plan's counts (n_tokens, n_seqs, n_compact, n_compact_padded) and nothing else of it:
    /// call `rmlp_context_set_plan` again, outside the capture, with any plan of the same counts
    /// (other tokens, other sequence lengths) before replaying it; a plan of other counts needs
    /// a graph of its own. The host callback gets device pointers, `args->cu_seqlens_device`,
    /// `args->max_seqlen` and the stream.
    ///
    /// An output that is not finite (weights large enough to overflow fp32 pass the load's finite
    /// check): on the CPU the call returns `RMLP_ERR_MODEL` naming the first row and element that
    /// is not, with `out` holding the output as computed. On CUDA the forward is asynchronous, so
    /// no status can say it: one more kernel, enqueued after the forward (captured with it), scans
    /// `out` and counts the forward in `rmlp_gpu_stats::nonfinite_outputs` with the row and element
    /// of its first infinity or NaN; `rmlp_context_gpu_stats` reads them, synchronising the
    /// context's stream. The same holds for `rmlp_forward_compact` (compact rows) and with a prefix
    /// cache.
    pub fn rmlp_forward(
        context: *mut rmlp_context,
        plan: *const rmlp_plan,
        attention: rmlp_attention_fn,
        user_data: *mut c_void,
        out: *mut c_void,
    ) -> rmlp_status;
    /// The whole model on one batch in compact space, embedding to final norm on N' rows, with
    /// `attention(user_data, args)` in the compact layout (or the built-in one when NULL): `out`
    /// (n_compact_padded, hidden_size) receives the final-normed compact rows (batch row i's
    /// state is row `scatter[i]`; `rmlp_context_pool_compact` and `rmlp_score_pair_compact`
    /// read them so). CUDA as for `rmlp_forward`; the callback gets the device arrays too.
    pub fn rmlp_forward_compact(
        context: *mut rmlp_context,
        plan: *const rmlp_plan,
        attention: rmlp_attention_fn,
        user_data: *mut c_void,
        out: *mut c_void,
    ) -> rmlp_status;
    /// The whole model on one batch for a host that reads only each sequence's last token (a
    /// last-token embedding, a reranker's score): `out` (n_seqs, hidden_size) receives, for
    /// sequence s, the final-normed hidden state of batch row `cu_seqlens[s + 1] - 1`, the row
    /// `rmlp_forward` writes there (equal within the GEMMs' rounding: fewer rows may take another
    /// blocking). Attention runs as in `rmlp_forward` (the context's `attention_space`, the
    /// callback or the built-in one, every row of every layer, since later rows read earlier
    /// keys), but the last layer's O projection, MLP and the final norm run on the n_seqs last
    /// rows only, not on all N' compact rows: about one layer's position-wise work less. With a
    /// prefix cache the cached forward runs whole (the cache keeps every row's final state for
    /// later batches) and the last rows are read from its slots. Then `rmlp_pool` (or
    /// `rmlp_context_pool` on CUDA) with `cu_seqlens` = 0, 1, ..., n_seqs and any pooling, or
    /// `rmlp_score_pair` the same way, reads `out`. CUDA as for `rmlp_forward` (device memory in
    /// the model's dtype, `rmlp_context_set_plan` first, enqueued only, capturable without a
    /// prefix cache).
    pub fn rmlp_forward_last(
        context: *mut rmlp_context,
        plan: *const rmlp_plan,
        attention: rmlp_attention_fn,
        user_data: *mut c_void,
        out: *mut c_void,
    ) -> rmlp_status;

    /// Pools hidden states per sequence (host memory, f32): `hidden` (n_tokens, hidden_size),
    /// `cu_seqlens` (n_seqs + 1), `out` (n_seqs, hidden_size); `normalize` scales each row to unit
    /// L2 norm. An empty sequence is an error.
    pub fn rmlp_pool(
        hidden: *const f32,
        n_tokens: usize,
        hidden_size: u32,
        cu_seqlens: *const u32,
        n_seqs: usize,
        pooling: rmlp_pooling,
        normalize: bool,
        out: *mut f32,
    ) -> rmlp_status;
    /// Pools hidden states per sequence like `rmlp_pool`, but `hidden` (n_tokens, hidden_size)
    /// is in the context's model's memory: host f32 on the CPU, device memory in the model's
    /// dtype on CUDA (the output of `rmlp_forward` / `rmlp_final_norm`). `cu_seqlens` (n_seqs + 1)
    /// and `out` (n_seqs, hidden_size) f32 are host memory. On CUDA the pooling runs on the
    /// context's stream in fp32, only the pooled rows are copied back, and the call
    /// synchronises the stream before it returns (so not while the stream is capturing).
    pub fn rmlp_context_pool(
        context: *mut rmlp_context,
        hidden: *const c_void,
        n_tokens: usize,
        cu_seqlens: *const u32,
        n_seqs: usize,
        pooling: rmlp_pooling,
        normalize: bool,
        out: *mut f32,
    ) -> rmlp_status;
    /// `rmlp_context_pool` of the batch rows of compact hidden states: `hidden`
    /// (n_compact_padded, hidden_size, e.g. `rmlp_forward_compact`'s output) read through the
    /// plan's `scatter`; `out` (n_seqs, hidden_size) host f32. On CUDA `rmlp_context_set_plan`
    /// first, and the call synchronises the stream.
    pub fn rmlp_context_pool_compact(
        context: *mut rmlp_context,
        plan: *const rmlp_plan,
        hidden: *const c_void,
        pooling: rmlp_pooling,
        normalize: bool,
        out: *mut f32,
    ) -> rmlp_status;
    /// Reranker score (Qwen3-Reranker's yes/no): LM-head logits of `token_a` and `token_b` at
    /// each sequence's last row of `hidden` (n_tokens, hidden_size; the output of `rmlp_forward`
    /// or `rmlp_final_norm`): `logits` (n_seqs, 2), and `prob_a` (n_seqs) = softmax over the pair.
    /// On CUDA `hidden` is device memory in the model's dtype; `cu_seqlens`, `logits` and
    /// `prob_a` are host memory; the dot products run on the context's stream (fp32) and the
    /// call synchronises the stream before it returns.
    pub fn rmlp_score_pair(
        context: *mut rmlp_context,
        hidden: *const c_void,
        n_tokens: usize,
        cu_seqlens: *const u32,
        n_seqs: usize,
        token_a: u32,
        token_b: u32,
        logits: *mut f32,
        prob_a: *mut f32,
    ) -> rmlp_status;
    /// `rmlp_score_pair` at each sequence's last row of compact hidden states (read through
    /// the plan's `scatter`): `logits` (n_seqs, 2), `prob_a` (n_seqs), host memory.
    pub fn rmlp_score_pair_compact(
        context: *mut rmlp_context,
        plan: *const rmlp_plan,
        hidden: *const c_void,
        token_a: u32,
        token_b: u32,
        logits: *mut f32,
        prob_a: *mut f32,
    ) -> rmlp_status;
    /// Reads what a CPU context's forwards measured since the previous call into `out` (NULL: not
    /// read; else set `out->struct_size` first), starts the next count from zero, and sets whether
    /// the forwards from now on are measured (`measure`; off in a new context). Off, a forward
    /// reads no clock; on, it reads the clock at each phase boundary (a few hundred times per
    /// forward). A CUDA context measures nothing: `cpu = false` and zeros.
    pub fn rmlp_context_cpu_profile(context: *mut rmlp_context, measure: bool, out: *mut rmlp_cpu_profile)
        -> rmlp_status;
}
