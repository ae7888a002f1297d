//! Raw ABI of libradix_mlp: the one declaration of every type, constant and entry point.
//!
//! `ffi/include/radix_mlp.h` is generated from this file by cbindgen
//! (`scripts/gen_header.sh`); the C sources include that header, so the C compiler checks
//! each definition against what is declared here. Change the ABI here, regenerate, commit both.
//!
//! Conventions: every fallible call returns an `rmlp_status` (0 ok, negative errors; values
//! are pinned once released) and, on error, leaves a message naming the argument and index in
//! the calling thread's `rmlp_last_error()`. The library never aborts, exits or prints.
//!
//! Handles (`rmlp_planner`, `rmlp_model`, `rmlp_context`) carry a magic word, set at creation and
//! cleared when freed: a call handed a freed handle or another kind of handle (a planner where a
//! context belongs) returns `RMLP_ERR_INVALID_ARGUMENT` ("context was freed or is not an
//! rmlp_context handle"), and freeing one twice does nothing the second time. This is a
//! best-effort check, not a guarantee: reading freed memory is itself undefined behaviour, and a
//! handle whose memory was reused for a new handle of the same kind looks alive. Planners and
//! contexts are single-threaded: a call that finds one in use by another call returns
//! `RMLP_ERR_BUSY` and changes nothing, whether that call runs on another thread or is the one
//! whose host attention callback made it (such a callback may call only `rmlp_attention` and
//! `rmlp_attention_compact` on the context running it: those two nest).
#![allow(non_camel_case_types)]

use core::ffi::{c_char, c_void};

mod batcher; // the batcher and the routing key (issue 33)
pub use batcher::*;

/// Major version: the SONAME carries it; a change means the ABI broke.
pub const RMLP_VERSION_MAJOR: u32 = 0;
/// Minor version: additions that keep the ABI.
pub const RMLP_VERSION_MINOR: u32 = 2;
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

/// A file could not be opened, read or mapped; the message names the file.
pub const RMLP_ERR_IO: rmlp_status = -9;
/// A file is malformed (safetensors header, JSON); the message names the file and the place.
pub const RMLP_ERR_FORMAT: rmlp_status = -10;
/// The checkpoint does not fit: unsupported architecture or dtype, a missing tensor, a shape
/// that disagrees with config.json; the message names the tensor or key. From a forward on the
/// CPU (`rmlp_forward`, `rmlp_forward_compact`): its output is not finite (weights large enough
/// to overflow fp32); the message names the first row, and `out` holds the output as computed (a
/// CUDA forward counts such outputs instead: `rmlp_gpu_stats::nonfinite_outputs`).
pub const RMLP_ERR_MODEL: rmlp_status = -11;
/// The planner or context is in use by a call on another thread, or by the call whose host
/// attention callback made this one (a callback may call only `rmlp_attention` and
/// `rmlp_attention_compact` on the context running it). Planners and contexts are
/// single-threaded objects (one per thread, or calls serialised by the host); the call changed
/// nothing and may be retried once the other call has returned. A model is not exclusive: any
/// number of threads may use one through their own contexts.
pub const RMLP_ERR_BUSY: rmlp_status = -12;
/// A batcher's queue is at its capacity of requests or queued tokens (`rmlp_batcher_params`): the
/// request was not added; take a batch first (or create the batcher with a larger capacity).
pub const RMLP_ERR_FULL: rmlp_status = -13;

/// Bit of `rmlp_build_flags()`: the library was compiled with CUDA kernels.
pub const RMLP_BUILD_CUDA: u32 = 1;
/// Bit of `rmlp_build_flags()`: the CUDA build has FlashInfer's attention kernels, which the
/// built-in attention runs for F16/BF16 models of head_dim 64 or 128 (else, and without this bit,
/// its reference kernel).
pub const RMLP_BUILD_FLASHINFER: u32 = 2;

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

/// Decoder architecture (`model_type` in config.json).
pub type rmlp_arch = i32;
/// Qwen3: q_norm/k_norm per head, no QKV bias (Qwen3, Qwen3-Embedding, Qwen3-Reranker).
pub const RMLP_ARCH_QWEN3: rmlp_arch = 1;
/// Qwen2: QKV bias.
pub const RMLP_ARCH_QWEN2: rmlp_arch = 2;
/// Llama.
pub const RMLP_ARCH_LLAMA: rmlp_arch = 3;
/// Mistral (Llama layers; sliding windows are not used).
pub const RMLP_ARCH_MISTRAL: rmlp_arch = 4;

/// Where a model's weights live and its layers run.
pub type rmlp_device = i32;
/// The CPU (BLAS), fp32. Every buffer the model calls take is host memory holding f32.
pub const RMLP_DEVICE_CPU: rmlp_device = 0;
/// A CUDA device, chosen at load by `rmlp_model_params::device_index`; weights and activations
/// in the model's dtype (F32, F16 or BF16), GEMMs through cuBLAS with fp32 accumulation. Every
/// activation buffer the model calls take (`hidden`, `q`, `k`, `v`, `attn`, `out`) is then
/// device memory of that device in that dtype; plans, `cu_seqlens` of `rmlp_pool` /
/// `rmlp_context_pool` / `rmlp_score_pair`, their `out`, `logits` and `prob_a` stay host
/// memory. `RMLP_ERR_UNSUPPORTED` in a build without CUDA, `RMLP_ERR_NO_DEVICE` where the
/// driver reports no device.
pub const RMLP_DEVICE_CUDA: rmlp_device = 1;

/// Element type of weights and activations.
pub type rmlp_dtype = i32;
/// 32-bit float.
pub const RMLP_DTYPE_F32: rmlp_dtype = 0;
/// IEEE half.
pub const RMLP_DTYPE_F16: rmlp_dtype = 1;
/// bfloat16.
pub const RMLP_DTYPE_BF16: rmlp_dtype = 2;

/// How `rmlp_pool` turns a sequence's rows into one vector.
pub type rmlp_pooling = i32;
/// The last token (Qwen3-Embedding).
pub const RMLP_POOLING_LAST: rmlp_pooling = 1;
/// The mean over the sequence's tokens.
pub const RMLP_POOLING_MEAN: rmlp_pooling = 2;
/// The first token.
pub const RMLP_POOLING_FIRST: rmlp_pooling = 3;

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

/// Which kernel the built-in attention of a CUDA context runs (`rmlp_context_params::gpu_attention`).
pub type rmlp_gpu_attention = i32;
/// FlashInfer's prefill kernels where this build, the model's shape and the device have them
/// (`RMLP_BUILD_FLASHINFER`; F16/BF16, head_dim 64 or 128, sm_80 and up), the reference kernel
/// elsewhere (the default). The environment variable `RADIX_MLP_GPU_ATTENTION=auto|flashinfer|reference`,
/// read when a CUDA context is created, decides in its place.
pub const RMLP_GPU_ATTENTION_AUTO: rmlp_gpu_attention = 0;
/// FlashInfer's kernels, required: creating the context is `RMLP_ERR_UNSUPPORTED`, saying why,
/// where the build, the shape or the device has none. A batch they cannot take (a plan FlashInfer
/// fails to make, more elements than its 32-bit offsets reach, buffers it cannot read) still runs
/// on the reference kernel, counted in `rmlp_gpu_stats`.
pub const RMLP_GPU_ATTENTION_FLASHINFER: rmlp_gpu_attention = 1;
/// The library's reference kernel only (any dtype and head_dim up to 256; for comparisons).
pub const RMLP_GPU_ATTENTION_REFERENCE: rmlp_gpu_attention = 2;

/// A loaded model: config and weights on one device. Read-only after load: any number of
/// contexts on any threads may use it at once.
pub struct rmlp_model {
    _opaque: [u8; 0],
}

/// Workspace for running batches of up to `max_tokens` tokens through a model. One per thread
/// (or stream); per-layer calls and forwards through it never allocate. A call that finds the
/// context in a call on another thread returns `RMLP_ERR_BUSY` instead of sharing the workspace.
pub struct rmlp_context {
    _opaque: [u8; 0],
}

/// How a model is loaded. Get one from `rmlp_model_default_params()` and change fields.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct rmlp_model_params {
    /// `sizeof(rmlp_model_params)` of the caller's header; versioned like `rmlp_plan_params`
    /// (an older, smaller struct gets the defaults for the fields it lacks; a newer, larger one
    /// must have zero bytes past this library's fields).
    pub struct_size: u32,
    /// `RMLP_DEVICE_CPU` (default) or `RMLP_DEVICE_CUDA`.
    pub device: rmlp_device,
    /// Device ordinal for CUDA (default 0); every call on the model runs on this device, whatever
    /// the calling thread's current device (which the library restores before returning).
    pub device_index: i32,
    /// Activation and weight dtype on the device: `RMLP_DTYPE_F32` on the CPU; F32, F16 or BF16
    /// on CUDA. Checkpoint tensors are converted at load (F16/BF16/F32 to this dtype, rounding
    /// to nearest even) in chunks through pinned memory, never as a second full host copy.
    pub dtype: rmlp_dtype,
    /// Skip the load's check that every weight the model uses is finite (default false: a NaN or
    /// infinity in a weight is refused with `RMLP_ERR_MODEL` naming the tensor and the element).
    /// The check reads every weight once more; set this to save that time on trusted checkpoints.
    /// Added after 0.1.0: a caller passing the 0.1.0 struct (without it) gets the default.
    pub skip_finite_check: bool,
}

/// A model's configuration, as read from its config.json (and checked against its tensors).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct rmlp_model_config {
    pub architecture: rmlp_arch,
    pub vocab_size: u32,
    pub hidden_size: u32,
    pub intermediate_size: u32,
    pub num_hidden_layers: u32,
    pub num_attention_heads: u32,
    pub num_key_value_heads: u32,
    /// Given in config.json or `hidden_size / num_attention_heads`.
    pub head_dim: u32,
    pub max_position_embeddings: u32,
    /// Mistral's `sliding_window` (0: none). Attention here is always full, so batches with a
    /// sequence longer than this are refused rather than computed differently.
    pub sliding_window: u32,
    pub rms_norm_eps: f64,
    pub rope_theta: f64,
    /// The LM head is the embedding matrix.
    pub tie_word_embeddings: bool,
    /// Q/K/V projections have biases: always for Qwen2, `attention_bias` for Llama and Qwen3,
    /// never for Mistral (transformers' Mistral has no biases and ignores `attention_bias`).
    pub attention_bias: bool,
    /// Per-head RMSNorm of q and k before RoPE (Qwen3).
    pub qk_norm: bool,
    /// The checkpoint has an LM head (own `lm_head.weight` or tied), so `rmlp_score_pair` works.
    pub has_lm_head: bool,
    /// The O projection has a bias: `attention_bias` for Llama and Qwen3 (never Qwen2, Mistral).
    /// Added after 0.1.0, in what was padding: zero-initialise a config built by hand.
    pub o_proj_bias: bool,
    /// The MLP's gate, up and down projections have biases: `mlp_bias` for Llama (no other
    /// architecture has them). Added after 0.1.0, like `o_proj_bias`.
    pub mlp_bias: bool,
}

/// One layer's attention, as the library hands it to a host's attention function: causal
/// attention of every sequence over its own rows, with grouped KV heads (query head h reads
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
    /// Softmax scale, `1 / sqrt(head_dim)`.
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
}

/// One weight tensor a host already holds on the device, for `rmlp_model_bind_cuda`: the
/// library keeps the pointer (no copy), so the memory must stay valid and unchanged until
/// `rmlp_model_free`.
///
/// Names are Hugging Face's (`model.layers.0.self_attn.q_proj.weight`, with or without the
/// `model.` prefix, `lm_head.weight` without it). Q/K/V and gate/up may come as the separate
/// tensors of a checkpoint (the layer then runs 3 and 2 GEMMs, or 1 each when the host's
/// separate tensors happen to lie back to back in memory) or stacked, as TEI and vLLM hold
/// them: `layers.N.self_attn.qkv_proj.weight` (q_dim + 2 * kv_dim, hidden) with q rows, then
/// k, then v, and `layers.N.mlp.gate_up_proj.weight` (2 * intermediate, hidden) with gate rows,
/// then up (biases likewise: `qkv_proj.bias`, `gate_up_proj.bias`; `o_proj.bias` and
/// `down_proj.bias` as they are). The biases must be those the config's `attention_bias`,
/// `o_proj_bias` and `mlp_bias` call for, no more.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct rmlp_weight_binding {
    /// NUL-terminated tensor name (read during the call only).
    pub name: *const c_char,
    /// Device memory of the model's device, row-major and dense, aligned to the element size.
    pub data: *const c_void,
    /// Must be the dtype of `rmlp_model_params::dtype`.
    pub dtype: rmlp_dtype,
    /// 1 (vectors: norms, biases) or 2 (matrices: (out_features, in_features) as nn.Linear stores them).
    pub ndim: u32,
    /// Rows, then columns (`shape[1]` ignored when `ndim` is 1).
    pub shape: [u64; 2],
}

/// A host's attention for `rmlp_forward`: compute `args->out` and return `RMLP_OK`, or an error
/// status that `rmlp_forward` passes on. NULL means the library's built-in attention.
pub type rmlp_attention_fn =
    Option<unsafe extern "C" fn(user_data: *mut c_void, args: *const rmlp_attention_args) -> rmlp_status>;

/// Reusable plan builder. Holds all scratch and the output arrays of the last plan, so
/// steady-state builds allocate nothing. Not thread-safe: use one planner per thread;
/// planners on different threads run concurrently. A call that finds the planner in use by
/// another thread returns `RMLP_ERR_BUSY` instead of corrupting it.
pub struct rmlp_planner {
    _opaque: [u8; 0],
}

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

/// What the built-in attention of a CUDA context ran since its creation
/// (`rmlp_context_gpu_stats`), and the run-time choices it was created with. Launches are counted
/// on the host when the work is enqueued: launches replayed from a captured CUDA graph are not
/// counted again. The forwards whose output was not finite are counted on the device
/// (`nonfinite_outputs`).
/// An output struct versioned by `struct_size`: the caller sets it to `sizeof(rmlp_gpu_stats)` of
/// its header; the library fills the fields it has, zeroes any bytes past them up to that size,
/// and sets `struct_size` to the bytes it filled. A size smaller than this release's struct is
/// `RMLP_ERR_INVALID_ARGUMENT`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct rmlp_gpu_stats {
    pub struct_size: u32,
    /// Whether the context runs on CUDA (false for a CPU context: every other field is zero).
    pub cuda: bool,
    /// The kernel setting in effect: `rmlp_context_params::gpu_attention`, or
    /// `RADIX_MLP_GPU_ATTENTION` where that was `RMLP_GPU_ATTENTION_AUTO`.
    pub attention: rmlp_gpu_attention,
    /// Whether FlashInfer's kernels serve the context (false with `RMLP_GPU_ATTENTION_REFERENCE`,
    /// and with `RMLP_GPU_ATTENTION_AUTO` where the build, the shape or the device has none).
    pub flashinfer: bool,
    /// The switches read from the environment at creation (`RADIX_MLP_GPU_FULL_KV=paged`,
    /// `RADIX_MLP_GPU_FLASHINFER_SM90=on`, `RADIX_MLP_GPU_ROPE=table`,
    /// `RADIX_MLP_GPU_DECODE=flashinfer`: true; each defaults to true).
    pub full_kv_paged: bool,
    pub flashinfer_sm90: bool,
    pub rope_table: bool,
    pub decode_flashinfer: bool,
    /// Launches of the built-in prefill attention (`rmlp_forward*`, `rmlp_attention*`; one per
    /// layer) by kernel and layout: full space with K/V scattered to the batch rows, full space
    /// reading K/V from the compact rows through the plan's `scatter` (`full_kv_paged`, a forward
    /// with the built-in attention), compact space.
    pub flashinfer_full: u64,
    pub flashinfer_full_paged: u64,
    pub flashinfer_compact: u64,
    pub reference_full: u64,
    pub reference_full_paged: u64,
    pub reference_compact: u64,
    /// FlashInfer work splits that `rmlp_context_set_plan` failed to make (FlashInfer's planner
    /// raised an error); the batch then runs on the reference kernel and the call still succeeds.
    /// The first such error is also left in `rmlp_last_error()` by the `rmlp_context_set_plan` that
    /// met it (which returns `RMLP_OK`), and kept in `first_plan_error`.
    pub plan_errors: u64,
    /// Launches that ran the reference kernel where FlashInfer serves the context, by reason: its
    /// plan failed (`plan_errors`); a batch so small that FlashInfer would pick a query tile this
    /// build does not instantiate; more elements than FlashInfer's 32-bit offsets reach (2^31) or
    /// more rows than the context's capacity; a batch that is not the plan set on the context (a
    /// per-layer call with other arrays or offsets); buffers FlashInfer cannot read (strides,
    /// alignment, another shape); FlashInfer's launcher refusing the configuration on this device.
    pub fallback_plan_error: u64,
    pub fallback_small_batch: u64,
    pub fallback_too_large: u64,
    pub fallback_unplanned: u64,
    pub fallback_buffers: u64,
    pub fallback_launcher: u64,
    /// The message of the first FlashInfer plan error (NUL-terminated, truncated), "" for none.
    pub first_plan_error: [c_char; 384],
    /// Generation steps (`rmlp_generate_step`) whose attention ran on FlashInfer's batch decode
    /// (`decode_flashinfer`, where the build, the model's shape and the device have its kernels:
    /// F16/BF16, head_dim 64 or 128, 1, 2, 4 or 8 query heads per KV head, sm_80 and up), and
    /// those that ran on the library's chain kernels (the others).
    pub decode_steps_flashinfer: u64,
    pub decode_steps_chains: u64,
    /// Whether FlashInfer's Hopper prefill (sm_90a, FA3 style; `flashinfer_sm90`, a build with it,
    /// a device of compute capability 9.0, F16/BF16, head_dim 128) serves the context's paged
    /// layouts (compact space, and full space through the scatter).
    pub sm90: bool,
    /// Of the FlashInfer launches above, those that ran the Hopper kernels, by layout.
    pub flashinfer_sm90_full_paged: u64,
    pub flashinfer_sm90_compact: u64,
    /// FlashInfer launches of a paged layout that ran the FA2 kernels where the Hopper ones serve
    /// the context (a batch of more query tiles than they plan, a plan they failed to make, or their
    /// launcher refusing).
    pub sm90_fallbacks: u64,
    /// Whole forwards (`rmlp_forward`, `rmlp_forward_compact`, with a prefix cache or not) whose
    /// output held an infinity or NaN: finite weights large enough to overflow. A CPU forward
    /// returns `RMLP_ERR_MODEL` for these; a CUDA forward only enqueues its work, so it is counted
    /// instead: a kernel enqueued after each forward scans its output. Unlike the launch counters
    /// above, this one lives on the device (replays of a captured graph count too), and reading it
    /// synchronises the context's stream: it covers every forward enqueued before the call.
    pub nonfinite_outputs: u64,
    /// The latest such forward's first non-finite element in row-major order: its row of `out`
    /// (a batch row for `rmlp_forward`, a compact row for `rmlp_forward_compact`) and its element
    /// in that row; 0 while `nonfinite_outputs` is 0.
    pub nonfinite_row: u32,
    pub nonfinite_col: u32,
}

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
    /// status, cleared ("") by the next call that returns a status. Valid until then. Cleanup
    /// calls are calls too (`rmlp_generate_end`, and the frees, which leave it empty when they
    /// succeed): read or copy the message before cleaning up.
    pub fn rmlp_last_error() -> *const c_char;

    /// Number of CUDA devices in `*count`. `RMLP_ERR_UNSUPPORTED` in a build without CUDA;
    /// `RMLP_ERR_NO_DEVICE` (with `*count = 0`) when the driver reports none.
    pub fn rmlp_cuda_device_count(count: *mut i32) -> rmlp_status;

    /// Sets how many threads the CPU path uses: OpenBLAS's thread pool, one per process, for the
    /// GEMMs, and a generation session's own threads for its steps' decode attention and, for 2 to
    /// 128 rows, their linear layers and LM head (the count at `rmlp_generate_begin`; the rest of
    /// the layer code runs on the calling thread). Results do not depend on it beyond OpenBLAS's
    /// own rounding. It starts at OpenBLAS's own choice
    /// (`OPENBLAS_NUM_THREADS`, else one per core); a server running one context per worker
    /// thread usually wants 1. `RMLP_ERR_INVALID_ARGUMENT` for 0, or for more threads than this
    /// OpenBLAS can run (the count then stays as it was). Process-wide: call it at startup or
    /// between batches, not while another thread is in a CPU model call.
    pub fn rmlp_set_cpu_threads(n_threads: u32) -> rmlp_status;
    /// The number of threads the CPU path uses now (see `rmlp_set_cpu_threads`).
    pub fn rmlp_cpu_threads() -> u32;

    /// The default plan parameters: no padding (multiple 8 when enabled), threshold 0.85,
    /// `RMLP_GATE_DISTINCT`.
    pub fn rmlp_plan_default_params() -> rmlp_plan_params;

    /// Plan parameters as a deployment sets them, from the environment, starting from
    /// `rmlp_plan_default_params()`:
    /// * `RADIX_MLP_THRESHOLD`: the gate, TEI's `--radix-mlp-threshold` (default 0.85; 0 turns
    ///   radix off, 1 or more always uses it); a number >= 0.
    /// * `RADIX_MLP_PAD`: pad the compact rows to this multiple (1..`RMLP_MAX_PAD_MULTIPLE`);
    ///   unset or empty means no padding.
    /// * `RADIX_MLP_GATE`: `distinct` (default, `RMLP_GATE_DISTINCT`) or `tei`
    ///   (`RMLP_GATE_TEI`, the rule of TEI's in-tree code).
    /// An unset variable keeps the default; a set but invalid one is an error naming the variable
    /// and its value (`*out` then holds the defaults), never a silent default.
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

    /// The default model parameters: CPU, device 0, F32.
    pub fn rmlp_model_default_params() -> rmlp_model_params;
    /// Loads a model from a Hugging Face / Candle checkpoint: a directory with config.json and
    /// model.safetensors (or model.safetensors.index.json and its shards), or the path of a
    /// .safetensors file whose folder holds config.json. `params`: NULL for the defaults.
    pub fn rmlp_model_load(
        path: *const c_char,
        params: *const rmlp_model_params,
        out: *mut *mut rmlp_model,
    ) -> rmlp_status;
    /// A CUDA model from weights the host already holds on the device (no copy; see
    /// `rmlp_weight_binding`). `config` describes the model (as `rmlp_model_get_config` would;
    /// `has_lm_head` is ignored and set from the tensors: `lm_head.weight`, or the embedding when
    /// `tie_word_embeddings`); `tensors` (n_tensors) must hold every tensor the config calls for,
    /// each with the shape it calls for and `params->dtype`, and nothing else; `params->device`
    /// must be `RMLP_DEVICE_CUDA`. Errors name the tensor. `RMLP_ERR_UNSUPPORTED` without CUDA.
    pub fn rmlp_model_bind_cuda(
        config: *const rmlp_model_config,
        tensors: *const rmlp_weight_binding,
        n_tensors: usize,
        params: *const rmlp_model_params,
        out: *mut *mut rmlp_model,
    ) -> rmlp_status;
    /// Frees a model. NULL is a no-op. Contexts of the model must be freed first: a model that
    /// still has contexts is not freed (so they never run on freed weights), nor is a handle that
    /// is not a live model; either leaves a message in `rmlp_last_error()` (empty after a free
    /// that succeeds). A bound model's tensors stay the host's.
    pub fn rmlp_model_free(model: *mut rmlp_model);
    /// Copies the model's configuration into `*out`.
    pub fn rmlp_model_get_config(model: *const rmlp_model, out: *mut rmlp_model_config) -> rmlp_status;
    /// What the load of a checkpoint found that does not stop it but that the host should know,
    /// as transformers would warn of it: tensors of the checkpoint that the model does not use
    /// (a config.json with fewer layers than the checkpoint, another `model_type` than the one
    /// the weights were trained as, biases an architecture does not have). `*out` is a
    /// NUL-terminated text owned by the model, valid until `rmlp_model_free`: empty when there is
    /// nothing to report (and for bound models), else one line per finding, each ending in '\n'.
    pub fn rmlp_model_load_report(model: *const rmlp_model, out: *mut *const c_char) -> rmlp_status;

    /// Creates a context for batches of up to `max_tokens` tokens (plans padded by up to
    /// `RMLP_MAX_PAD_MULTIPLE - 1` rows fit too) and at most `max_tokens` sequences. The model
    /// must outlive it (`rmlp_model_free` refuses a model that still has contexts). On CUDA this
    /// allocates the whole device workspace (activations of a forward, the plan's maps, a 32 MiB
    /// cuBLAS workspace), pinned staging for plans, a cuBLAS handle and events, so that nothing
    /// after it allocates; its stream is the legacy default stream until `rmlp_context_set_stream`.
    pub fn rmlp_context_create(model: *const rmlp_model, max_tokens: usize, out: *mut *mut rmlp_context)
        -> rmlp_status;
    /// The defaults of `rmlp_context_params` (`struct_size` set, attention in full space).
    pub fn rmlp_context_default_params() -> rmlp_context_params;
    /// The prefix cache's counters (all zero for a context without a cache).
    pub fn rmlp_context_cache_stats(context: *mut rmlp_context, out: *mut rmlp_cache_stats) -> rmlp_status;
    /// Empties the prefix cache (the counters stay). OK for a context without a cache.
    pub fn rmlp_context_cache_clear(context: *mut rmlp_context) -> rmlp_status;
    /// The built-in attention's counters and run-time choices of a CUDA context (`rmlp_gpu_stats`;
    /// set `out->struct_size` first). A CPU context gets `cuda = false` and zeros. On CUDA it
    /// synchronises the context's stream (to read `nonfinite_outputs` after every forward enqueued
    /// before it), so it is `RMLP_ERR_INVALID_ARGUMENT` while that stream captures a graph, and
    /// `RMLP_ERR_CUDA` when a kernel enqueued earlier failed.
    pub fn rmlp_context_gpu_stats(context: *mut rmlp_context, out: *mut rmlp_gpu_stats) -> rmlp_status;
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

    /// The defaults of `rmlp_generate_params` (`struct_size` set, 256 new tokens, shared-prefix
    /// attention on).
    pub fn rmlp_generate_default_params() -> rmlp_generate_params;
    /// Begins a generation session on a context with a prefix cache (`cache_bytes != 0`; CPU) and a
    /// model with an LM head: prefills the plan's sequences (every one non-empty) through the cache,
    /// so prompt rows become cache slots shared where the prompts share, and writes `logits`
    /// (n_seqs, vocab_size): the LM head at each prompt's last token. Every sequence is then active,
    /// its last row locked in the cache. `params`: NULL for the defaults. One session per context:
    /// `rmlp_generate_end` it before the next. Allocates the session's state (freed by
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
