//! Attention and the per-layer calls, for hosts that keep their own attention (TEI's
//! flash-attention): the embedding, the two halves of each layer around attention and the final norm,
//! in full or compact space; `rmlp_attention_args` is what a host's attention gets (also as the
//! callback of a whole forward), and `rmlp_attention` / `rmlp_attention_compact` the library's own.
use core::ffi::c_void;

use crate::{rmlp_context, rmlp_dtype, rmlp_model, rmlp_plan, rmlp_status};

/// Where attention runs (docs/design.md, "Attention in compact space"), a context setting
/// (`rmlp_context_params::attention_space`) and the layout of `rmlp_attention_args`.
pub type rmlp_attention_space = i32;
/// Full space: Q/K/V are scattered to the batch's N rows and every sequence attends over its
/// whole length (the default; what 0.1.0 did).
pub const RMLP_ATTENTION_FULL: rmlp_attention_space = 0;
/// Compact space: only the compact rows a sequence owns are queries (N' in all), its keys are
/// its path through `scatter` (a paged KV layout with page size 1); nothing is scattered before
/// attention nor gathered after it, and the whole forward stays on N' rows. Exact: the same
/// function as full space, with fewer score pairs on shared prefixes.
pub const RMLP_ATTENTION_COMPACT: rmlp_attention_space = 1;
/// Compact when the plan shares rows (`use_radix`), full otherwise (the two coincide then).
/// Compact never computes more than full: it drops the queries a sequence shares with an
/// earlier one and the copies around attention.
pub const RMLP_ATTENTION_AUTO: rmlp_attention_space = 2;

/// One layer's attention, as the library hands it to a host's attention function: causal
/// attention of every sequence over its own rows (within the layer's `sliding_window`, its scores
/// soft-capped by `softcap`, where the layer has them), with grouped KV heads (query head h reads
/// KV head `h / (n_heads / n_kv_heads)`). `q`, `k`, `v`, `out` are in the model's memory and
/// dtype: host f32 on the CPU, device memory in the model's dtype on CUDA, where the host's
/// attention must enqueue its work on `stream` and return without synchronising (the library
/// goes on enqueuing after it).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct rmlp_attention_args {
    pub layer: u32,
    pub n_tokens: u32,
    pub n_seqs: u32,
    pub n_heads: u32,
    pub n_kv_heads: u32,
    pub head_dim: u32,
    /// The scores' scale: the layer's (`1 / sqrt(head_dim)` unless the architecture scales its
    /// queries otherwise; `rmlp_model_layer_attention` gives it). `rmlp_attention` uses the
    /// given value (`sliding_window` and `softcap` must be the layer's).
    pub scale: f32,
    pub dtype: rmlp_dtype,
    /// (n_seqs + 1) row offsets of the sequences, host memory.
    pub cu_seqlens: *const u32,
    /// (n_tokens, n_heads, head_dim) queries, RoPE applied.
    pub q: *const c_void,
    /// (n_tokens, n_kv_heads, head_dim) keys, RoPE applied.
    pub k: *const c_void,
    /// (n_tokens, n_kv_heads, head_dim) values.
    pub v: *const c_void,
    /// (n_tokens, n_heads, head_dim) output.
    pub out: *mut c_void,
    /// The context's stream (`cudaStream_t`, NULL for the legacy default stream), NULL on the CPU.
    pub stream: *mut c_void,
    /// (n_seqs + 1) the same offsets in the model's memory: device memory on CUDA (the copy
    /// `rmlp_context_set_plan` made; valid until the next one), equal to `cu_seqlens` on the
    /// CPU. For `rmlp_attention` on CUDA: device offsets, or NULL to use the set plan's copy
    /// (then `cu_seqlens` must be the set plan's `cu_seqlens` pointer).
    pub cu_seqlens_device: *const u32,
    /// The longest sequence, in rows (what varlen flash-attention calls max_seqlen). Filled in
    /// by the library for callbacks, from the plan of the call (a callback captured in a CUDA
    /// graph keeps the value of the capture: size launches from counts if replays may bring
    /// longer sequences); ignored by `rmlp_attention`, whose launch depends on counts alone.
    pub max_seqlen: u32,
    /// Added after 0.1.0 (a 0.1.0 callback never reads past `max_seqlen`; `rmlp_attention` reads
    /// only the fields above; `rmlp_attention_compact` reads all). The layout of q, k, v, out:
    /// `RMLP_ATTENTION_FULL` as above, or `RMLP_ATTENTION_COMPACT`: q and out
    /// (n_compact, n_heads, head_dim) are the plan's compact rows, each the query of the
    /// sequence that owns it (sequence s: rows `qo_indptr[s] .. qo_indptr[s+1]`); k and v
    /// (n_compact, n_kv_heads, head_dim) hold each compact row's key and value once; sequence s
    /// reads the keys `kv_indices[kv_indptr[s] .. kv_indptr[s+1])` (its path: `kv_indptr` is
    /// `cu_seqlens`, `kv_indices` the plan's `scatter`), causal aligned bottom-right (its q_s
    /// queries are the last q_s of its L_s keys: query t sees keys 0 .. L_s - q_s + t). These
    /// are the arrays of a FlashInfer paged prefill with page size 1 as they are (last page
    /// length 1), or of a varlen flash-attention after gathering each path's K/V.
    pub layout: rmlp_attention_space,
    /// N': rows of q, k, v, out in the compact layout (`qo_indptr[n_seqs]`); 0 in full space.
    pub n_compact: u32,
    /// (n_seqs + 1) host memory, compact layout: owned query rows per sequence. NULL in full space.
    pub qo_indptr: *const u32,
    /// (n_seqs + 1) host memory, compact layout: `cu_seqlens`. NULL in full space.
    pub kv_indptr: *const u32,
    /// (n_tokens) host memory, compact layout: each sequence's path, the plan's `scatter`.
    pub kv_indices: *const u32,
    /// The same three in the model's memory: device copies on CUDA (made by
    /// `rmlp_context_set_plan`; `kv_indptr_device` is `cu_seqlens_device`), equal to the host
    /// pointers on the CPU. For `rmlp_attention_compact` on CUDA: device arrays, or all three
    /// NULL to use the set plan's copies (then the host arrays must be the set plan's).
    pub qo_indptr_device: *const u32,
    pub kv_indptr_device: *const u32,
    pub kv_indices_device: *const u32,
    /// Added in 0.3 (the two below; zero-initialise them in args built by hand, then set them
    /// from `rmlp_model_layer_attention`): layer `layer`'s sliding window, in keys; 0: none (full
    /// causal attention). A query at index p of its sequence (its row's index from the
    /// sequence's start, its path position in the compact layout) sees the keys of its sequence
    /// at indices `max(0, p - sliding_window + 1) ..= p`: `sliding_window` keys, itself included
    /// (transformers' mask `kv_idx > q_idx - sliding_window`; flash-attention's
    /// `window_size = (sliding_window - 1, 0)`). Filled in by the library for callbacks;
    /// `rmlp_attention` and `rmlp_attention_compact` refuse a value other than the layer's.
    pub sliding_window: u32,
    /// Layer `layer`'s attention logit soft-cap (Gemma 2's `attn_logit_softcapping`); 0: none.
    /// The scaled scores s = scale * q.k become `softcap * tanh(s / softcap)` before the mask and
    /// the softmax. Filled in by the library for callbacks; the built-in attention refuses a
    /// value other than the layer's.
    pub softcap: f32,
}

/// One layer's attention as the model runs it (`rmlp_model_layer_attention`): the three values of
/// `rmlp_attention_args` that a host building args itself (around the per-layer calls) must set,
/// as the library sets them for its callbacks. Added in 0.3.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct rmlp_layer_attention {
    /// The scores' scale (`rmlp_attention_args::scale`).
    pub scale: f32,
    /// The sliding window in keys, 0 for none (`rmlp_attention_args::sliding_window`).
    pub sliding_window: u32,
    /// The logit soft-cap, 0 for none (`rmlp_attention_args::softcap`).
    pub softcap: f32,
}

/// A host's attention for `rmlp_forward`: compute `args->out` and return `RMLP_OK`, or an error
/// status that `rmlp_forward` passes on. NULL means the library's built-in attention.
pub type rmlp_attention_fn =
    Option<unsafe extern "C" fn(user_data: *mut c_void, args: *const rmlp_attention_args) -> rmlp_status>;

#[allow(improper_ctypes)] // rmlp_context is opaque: only pointers cross the ABI
extern "C" {
    /// Embeds the plan's compact ids: `hidden` (n_compact_padded, hidden_size). Checks every id
    /// against vocab_size and every position against max_position_embeddings.
    ///
    /// On CUDA (this call and the four below): `rmlp_context_set_plan(plan)` first; every buffer
    /// is device memory of the model's device in the model's dtype; the call checks its
    /// arguments on the host, enqueues its kernels and GEMMs on the context's stream and returns:
    /// it never allocates and never synchronises, so a whole batch may be captured in a CUDA
    /// graph. Device-side faults surface as `RMLP_ERR_CUDA` from a later call (or the host's
    /// own stream synchronisation).
    pub fn rmlp_embed(context: *mut rmlp_context, plan: *const rmlp_plan, hidden: *mut c_void) -> rmlp_status;
    /// First half of layer `layer` in compact space: RMSNorm, Q/K/V projections (+ bias),
    /// q/k head norms, RoPE at the compact positions; then scatters Q/K/V to the batch rows.
    /// `hidden` (n_compact_padded, hidden_size) is read only; `q` (n_tokens, n_heads, head_dim),
    /// `k` and `v` (n_tokens, n_kv_heads, head_dim) are written.
    pub fn rmlp_layer_pre_attention(
        context: *mut rmlp_context,
        layer: u32,
        plan: *const rmlp_plan,
        hidden: *const c_void,
        q: *mut c_void,
        k: *mut c_void,
        v: *mut c_void,
    ) -> rmlp_status;
    /// Second half of layer `layer`: gathers the attention output `attn` (n_tokens, n_heads,
    /// head_dim) to compact rows, O projection, residual add into `hidden`, RMSNorm, SwiGLU MLP,
    /// residual add. `hidden` (n_compact_padded, hidden_size) is updated in place.
    pub fn rmlp_layer_post_attention(
        context: *mut rmlp_context,
        layer: u32,
        plan: *const rmlp_plan,
        attn: *const c_void,
        hidden: *mut c_void,
    ) -> rmlp_status;
    /// The final RMSNorm of `hidden` (n_compact_padded, hidden_size), scattered to the batch
    /// rows: `out` (n_tokens, hidden_size).
    pub fn rmlp_final_norm(
        context: *mut rmlp_context,
        plan: *const rmlp_plan,
        hidden: *const c_void,
        out: *mut c_void,
    ) -> rmlp_status;
    /// The library's built-in causal varlen attention with grouped KV heads, for hosts that
    /// call the per-layer entry points but have no attention of their own. On CUDA `args->dtype`
    /// must be the model's dtype, `q`/`k`/`v`/`out` device memory, `cu_seqlens` host memory
    /// (checked, and read for the grid size), `cu_seqlens_device` see `rmlp_attention_args`;
    /// `args->stream` is ignored (the context's stream is used).
    pub fn rmlp_attention(context: *mut rmlp_context, args: *const rmlp_attention_args) -> rmlp_status;
    /// Layer `layer`'s scale, sliding window and soft-cap into `*out`, what its
    /// `rmlp_attention_args` carry (from config.json: `sliding_window`, `layer_types`,
    /// `attn_logit_softcapping`, `query_pre_attn_scalar`, ...). Added in 0.3.
    pub fn rmlp_model_layer_attention(
        model: *const rmlp_model,
        layer: u32,
        out: *mut rmlp_layer_attention,
    ) -> rmlp_status;

    /// Attention in compact space (`RMLP_ATTENTION_COMPACT`), for hosts that keep attention:
    /// the first half of layer `layer` with no scatter: `q` (n_compact_padded, n_heads,
    /// head_dim), `k` and `v` (n_compact_padded, n_kv_heads, head_dim) are written for every
    /// compact row (the plan needs its `qo_indptr`: one from `rmlp_plan_build`). CUDA as for
    /// `rmlp_layer_pre_attention`.
    pub fn rmlp_layer_pre_attention_compact(
        context: *mut rmlp_context,
        layer: u32,
        plan: *const rmlp_plan,
        hidden: *const c_void,
        q: *mut c_void,
        k: *mut c_void,
        v: *mut c_void,
    ) -> rmlp_status;
    /// The second half of layer `layer` with no gather: `attn` (n_compact_padded, n_heads,
    /// head_dim) is the compact attention output (rows past n_compact are not read for anything
    /// that reaches an output).
    pub fn rmlp_layer_post_attention_compact(
        context: *mut rmlp_context,
        layer: u32,
        plan: *const rmlp_plan,
        attn: *const c_void,
        hidden: *mut c_void,
    ) -> rmlp_status;
    /// The final RMSNorm of `hidden` (n_compact_padded, hidden_size) into `out`
    /// (n_compact_padded, hidden_size), compact rows (no scatter): read them per batch row
    /// through the plan's `scatter`, or pool them with `rmlp_context_pool_compact`.
    pub fn rmlp_final_norm_compact(
        context: *mut rmlp_context,
        plan: *const rmlp_plan,
        hidden: *const c_void,
        out: *mut c_void,
    ) -> rmlp_status;
    /// The built-in attention in the compact layout: `args->layout` must be
    /// `RMLP_ATTENTION_COMPACT`, with `n_compact`, `qo_indptr`, `kv_indptr` (= `cu_seqlens`) and
    /// `kv_indices` (host memory, checked); q, out (n_compact, n_heads, head_dim), k, v
    /// (n_compact, n_kv_heads, head_dim) as `rmlp_attention` takes them. On CUDA the three
    /// `*_device` arrays, or NULL for the set plan's copies.
    pub fn rmlp_attention_compact(context: *mut rmlp_context, args: *const rmlp_attention_args) -> rmlp_status;
}
