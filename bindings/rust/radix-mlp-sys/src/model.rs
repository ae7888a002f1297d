//! Models: a checkpoint (config.json and safetensors) loaded onto the CPU or a CUDA device, or CUDA
//! weights a host already holds, bound in place. Read-only after load: any number of contexts on any
//! threads share one.
use core::ffi::{c_char, c_void};

use crate::{rmlp_model, rmlp_status};

/// Decoder architecture (`model_type` in config.json).
pub type rmlp_arch = i32;
/// Qwen3: q_norm/k_norm per head, no QKV bias (Qwen3, Qwen3-Embedding, Qwen3-Reranker).
pub const RMLP_ARCH_QWEN3: rmlp_arch = 1;
/// Qwen2: QKV bias.
pub const RMLP_ARCH_QWEN2: rmlp_arch = 2;
/// Llama.
pub const RMLP_ARCH_LLAMA: rmlp_arch = 3;
/// Mistral (Llama layers; `sliding_window` in every layer).
pub const RMLP_ARCH_MISTRAL: rmlp_arch = 4;
/// Gemma: RMSNorm as `1 + weight`, embeddings scaled by `sqrt(hidden_size)`, GeGLU MLP, tied head
/// (bge-reranker-v2-gemma).
pub const RMLP_ARCH_GEMMA: rmlp_arch = 5;
/// Gemma 2: Gemma's layers with norms after each sublayer too, and final-logit soft-capping
/// (bge-multilingual-gemma2).
pub const RMLP_ARCH_GEMMA2: rmlp_arch = 6;
/// Gemma 3's text decoder (`model_type` `gemma3_text`): Gemma 2's layers with q/k norm.
pub const RMLP_ARCH_GEMMA3_TEXT: rmlp_arch = 7;

/// The activation of the MLP's gate (`hidden_act`, Gemma's `hidden_activation`).
pub type rmlp_activation = i32;
/// SiLU: the SwiGLU MLP of Qwen, Llama and Mistral (`silu`).
pub const RMLP_ACTIVATION_SILU: rmlp_activation = 0;
/// GELU with the tanh approximation: the GeGLU MLP of Gemma (`gelu_pytorch_tanh`).
pub const RMLP_ACTIVATION_GELU_TANH: rmlp_activation = 1;
/// GELU, the exact (erf) form (`gelu`: what transformers runs for Gemma checkpoints whose
/// config.json says `"hidden_act": "gelu"`).
pub const RMLP_ACTIVATION_GELU: rmlp_activation = 2;

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

/// How a bf16-weight CPU model multiplies by its matrices (`rmlp_model_params::cpu_bf16_gemm`).
pub type rmlp_cpu_bf16_gemm = i32;
/// Default: `RADIX_MLP_CPU_BF16_GEMM` decides (`auto`, `widen` or `onednn`; unset is `auto`).
/// `auto` is `RMLP_CPU_BF16_GEMM_ONEDNN` where oneDNN's GEMMs can run (the CPU has AVX512-BF16
/// or AMX-BF16 and `libdnnl.so.2` loads: 1.25-1.45x faster than widening, measured), else
/// `RMLP_CPU_BF16_GEMM_WIDEN`; `rmlp_model_cpu_bf16_gemm`'s detail says which and why.
pub const RMLP_CPU_BF16_GEMM_AUTO: rmlp_cpu_bf16_gemm = 0;
/// Each matrix widened back to fp32 panel by panel for the fp32 GEMMs' sgemm (`rmlp_cpu_sgemm`): the fp32 path's result
/// on the rounded weights, on any CPU.
pub const RMLP_CPU_BF16_GEMM_WIDEN: rmlp_cpu_bf16_gemm = 1;
/// oneDNN's bf16 x bf16 -> fp32 matmul (AVX512-BF16 or AMX-BF16), the activations rounded to
/// bf16 as well; oneDNN (libdnnl.so.2) is loaded at run time. Asked for where it cannot run, the
/// load fails with `RMLP_ERR_UNSUPPORTED` saying why. Prefill GEMMs only: generation steps of up
/// to 128 rows keep the widening kernels.
pub const RMLP_CPU_BF16_GEMM_ONEDNN: rmlp_cpu_bf16_gemm = 2;
/// `rmlp_model_cpu_bf16_gemm`'s answer for a model without bf16 CPU matrices (an fp32 CPU model,
/// a CUDA model).
pub const RMLP_CPU_BF16_GEMM_NONE: rmlp_cpu_bf16_gemm = 3;

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
    /// CPU only: the dtype the layers' weight matrices (Q/K/V, O, gate/up, down) are held in.
    /// `RMLP_DTYPE_F32` (default) or `RMLP_DTYPE_BF16`: each matrix rounded to bf16 (nearest
    /// even) at load, half its memory; the GEMMs accumulate in fp32, on the matrices widened back
    /// to fp32 panel by panel or through oneDNN's bf16 matmul (`cpu_bf16_gemm` says which);
    /// norms, biases, the embedding and the LM head stay fp32
    /// (docs/backends.md#bf16-weights-on-the-cpu gives the tolerances against fp32). A weight
    /// beyond bf16's range is refused with `RMLP_ERR_MODEL`. A CUDA model refuses anything but
    /// F32 here (its `dtype` sets its weights' dtype). Added after skip_finite_check: a caller
    /// passing an older struct gets the default.
    pub cpu_weight_dtype: rmlp_dtype,
    /// CPU only, with `cpu_weight_dtype` `RMLP_DTYPE_BF16`: how the layers multiply by the bf16
    /// matrices, an `RMLP_CPU_BF16_GEMM_*` (default `RMLP_CPU_BF16_GEMM_AUTO`;
    /// docs/backends.md#bf16-weights-on-the-cpu gives each one's tolerance).
    /// `rmlp_model_cpu_bf16_gemm` says which one a loaded model runs. Another value than AUTO is
    /// refused with `RMLP_ERR_INVALID_ARGUMENT` for fp32 weights and CUDA models. Added after
    /// cpu_weight_dtype: a caller passing an older struct gets the default.
    pub cpu_bf16_gemm: rmlp_cpu_bf16_gemm,
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
    /// The window of the model's sliding layers (0: none slides): a query sees the last
    /// `sliding_window` keys of its sequence. Which layers slide is config.json's (Qwen2/Qwen3:
    /// `layer_types`, or `use_sliding_window` and `max_window_layers`; Mistral: every layer); a
    /// model bound with `rmlp_model_bind_cuda` slides every layer by it (Gemma 2 and 3, whose layers
    /// slide by layer type, are refused there with a window: `rmlp_model_bind_cuda_config` binds
    /// them).
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
    /// Every RMSNorm weight of the model (layers, q/k norms, final norm) acts as `1 + weight`,
    /// the sum formed in fp32 (Gemma, Gemma 2, Gemma 3). Added after 0.2, in what was padding:
    /// zero-initialise a config built by hand.
    pub norm_weight_plus_one: bool,
    /// Each sublayer's output is RMS-normed before its residual add (`post_attention_layernorm`,
    /// `post_feedforward_layernorm`) and the MLP's input by `pre_feedforward_layernorm` (Gemma 2,
    /// Gemma 3). Added after 0.2, in what was padding.
    pub sandwich_norms: bool,
    /// The MLP's gate activation, an `RMLP_ACTIVATION_*` (0: SiLU). Added after 0.2, with the
    /// fields below: zero-initialise them in a config built by hand.
    pub activation: rmlp_activation,
    /// The embedding rows are multiplied by this, rounded first to the dtype the layers run in
    /// (Gemma: `sqrt(hidden_size)`, as transformers casts it to the hidden states' dtype);
    /// 0: not scaled.
    pub embedding_scale: f64,
    /// The LM head's logits are soft-capped, `cap * tanh(logits / cap)` (Gemma 2 and 3's
    /// `final_logit_softcapping`), in `rmlp_score_pair` and generation; 0: not capped.
    pub final_logit_softcapping: f64,
    /// Gemma 2 and 3's `query_pre_attn_scalar`: every layer scales its attention scores by
    /// `query_pre_attn_scalar^-0.5` (as `rmlp_attention_args::scale`, which a host calling the
    /// built-in attention itself sets from it); 0: by `1 / sqrt(head_dim)`.
    pub query_pre_attn_scalar: f64,
    /// Gemma 2's `attn_logit_softcapping`: every layer caps its scaled attention scores,
    /// `cap * tanh(s / cap)`, before the softmax; the built-in attention applies it, a host's
    /// attention gets it as `rmlp_attention_args::softcap` (per layer: `rmlp_model_layer_attention`);
    /// 0: not capped.
    pub attn_logit_softcapping: f64,
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

#[allow(improper_ctypes)] // rmlp_model is opaque: only pointers cross the ABI
extern "C" {
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
    /// The struct cannot say what config.json says beyond it: every layer rotates by plain RoPE
    /// of `rope_theta` and slides by `sliding_window`, and a Gemma 2 or 3 config with a window is
    /// refused. A checkpoint with `rope_scaling`, per-layer windows or Gemma 3's local RoPE base
    /// binds with `rmlp_model_bind_cuda_config`.
    pub fn rmlp_model_bind_cuda(
        config: *const rmlp_model_config,
        tensors: *const rmlp_weight_binding,
        n_tensors: usize,
        params: *const rmlp_model_params,
        out: *mut *mut rmlp_model,
    ) -> rmlp_status;
    /// `rmlp_model_bind_cuda` with the model described by the checkpoint's config.json instead of
    /// a struct: `config_path` is the file or the folder holding it, read as `rmlp_model_load`
    /// reads it (every key implemented or refused by name; which layers slide and by how much,
    /// RoPE scaling and per-layer RoPE bases, soft-caps and scales all taken from it), so a
    /// bound model computes what the same checkpoint loaded computes. Its config's errors come
    /// before the device is looked for; its findings (keys transformers does not read) are in
    /// `rmlp_model_load_report`.
    pub fn rmlp_model_bind_cuda_config(
        config_path: *const c_char,
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
    /// the weights were trained as, biases an architecture does not have), keys of config.json
    /// that transformers does not read for the architecture either (docs/backends.md), and an
    /// `auto_map` naming custom model code that transformers runs only on request. `*out` is a
    /// NUL-terminated text owned by the model, valid until `rmlp_model_free`: empty when there is
    /// nothing to report (and for models bound from a struct), else one line per finding, each
    /// ending in '\n'.
    pub fn rmlp_model_load_report(model: *const rmlp_model, out: *mut *const c_char) -> rmlp_status;
    /// Which GEMM the model's layers run on bf16 matrices: `*kind` is `RMLP_CPU_BF16_GEMM_WIDEN`
    /// or `RMLP_CPU_BF16_GEMM_ONEDNN` for a bf16-weight CPU model, `RMLP_CPU_BF16_GEMM_NONE`
    /// otherwise; `*fallbacks` (may be NULL) counts the GEMMs oneDNN failed at run time, which
    /// the widening path ran instead (each one is still within the ONEDNN tolerance); `*detail`
    /// (may be NULL) is a NUL-terminated text owned by the model, valid until `rmlp_model_free`:
    /// which oneDNN and ISA run it, or why the widening path was taken.
    pub fn rmlp_model_cpu_bf16_gemm(
        model: *const rmlp_model,
        kind: *mut rmlp_cpu_bf16_gemm,
        fallbacks: *mut u64,
        detail: *mut *const c_char,
    ) -> rmlp_status;
}
