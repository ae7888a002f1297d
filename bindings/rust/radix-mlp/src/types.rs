//! The plain types of models and contexts: architectures, devices and dtypes, load and context
//! parameters, the model's configuration, weight bindings, pooling, the attention space, and the
//! counters and scores the calls return. Each mirrors its `rmlp_*` struct or enum.
use core::ffi::c_void;

use radix_mlp_sys as sys;

use crate::gpu::GpuAttention;
#[cfg(doc)] // the types' documentation links to them
use crate::{AttentionArgs, Context, Model};

/// Decoder architecture (`model_type` in config.json).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Architecture {
    Qwen3,
    Qwen2,
    Llama,
    Mistral,
    Gemma,
    Gemma2,
    /// Gemma 3's text decoder (`gemma3_text`).
    Gemma3Text,
    /// A code this crate does not know (from a newer library).
    Unknown(i32),
}

/// The activation of the MLP's gate (`rmlp_activation`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    /// SiLU (SwiGLU: Qwen, Llama, Mistral).
    Silu,
    /// GELU, tanh approximation (GeGLU: Gemma).
    GeluTanh,
    /// GELU, exact (erf) form.
    Gelu,
    /// A code this crate does not know (from a newer library).
    Unknown(i32),
}

/// A model's configuration (`rmlp_model_config`), as read from its config.json.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelConfig {
    pub architecture: Architecture,
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub num_key_value_heads: usize,
    /// Given in config.json or `hidden_size / num_attention_heads`.
    pub head_dim: usize,
    pub max_position_embeddings: usize,
    /// The window of the model's sliding layers (0: none slides).
    pub sliding_window: usize,
    pub rms_norm_eps: f64,
    pub rope_theta: f64,
    pub tie_word_embeddings: bool,
    /// Q/K/V projections have biases (Qwen2).
    pub attention_bias: bool,
    /// Per-head RMSNorm of q and k (Qwen3).
    pub qk_norm: bool,
    /// The checkpoint has an LM head, so [`Context::score_pair`] works.
    pub has_lm_head: bool,
    /// The O projection has a bias (`attention_bias` of Llama and Qwen3).
    pub o_proj_bias: bool,
    /// The MLP's gate, up and down projections have biases (`mlp_bias` of Llama).
    pub mlp_bias: bool,
    /// RMSNorm weights act as `1 + weight` (Gemma).
    pub norm_weight_plus_one: bool,
    /// Norms after each sublayer too (Gemma 2 and 3).
    pub sandwich_norms: bool,
    /// The MLP's gate activation.
    pub activation: Activation,
    /// The embedding rows' multiplier (Gemma: `sqrt(hidden_size)`); 0: none.
    pub embedding_scale: f64,
    /// `cap` of the logits' soft-capping `cap * tanh(logits / cap)` (Gemma 2 and 3); 0: none.
    pub final_logit_softcapping: f64,
    /// Attention scores scaled by `query_pre_attn_scalar^-0.5` (Gemma 2 and 3); 0: `1 / sqrt(head_dim)`.
    pub query_pre_attn_scalar: f64,
    /// `cap` of the attention scores' soft-capping (Gemma 2); 0: none.
    pub attn_logit_softcapping: f64,
}

impl ModelConfig {
    /// Floats per row of Q and of the attention output: `num_attention_heads * head_dim`.
    pub fn q_dim(&self) -> usize {
        self.num_attention_heads * self.head_dim
    }
    /// Floats per row of K and V: `num_key_value_heads * head_dim`.
    pub fn kv_dim(&self) -> usize {
        self.num_key_value_heads * self.head_dim
    }
}

impl From<&sys::rmlp_model_config> for ModelConfig {
    fn from(c: &sys::rmlp_model_config) -> ModelConfig {
        let architecture = match c.architecture {
            sys::RMLP_ARCH_QWEN3 => Architecture::Qwen3,
            sys::RMLP_ARCH_QWEN2 => Architecture::Qwen2,
            sys::RMLP_ARCH_LLAMA => Architecture::Llama,
            sys::RMLP_ARCH_MISTRAL => Architecture::Mistral,
            sys::RMLP_ARCH_GEMMA => Architecture::Gemma,
            sys::RMLP_ARCH_GEMMA2 => Architecture::Gemma2,
            sys::RMLP_ARCH_GEMMA3_TEXT => Architecture::Gemma3Text,
            other => Architecture::Unknown(other),
        };
        let activation = match c.activation {
            sys::RMLP_ACTIVATION_SILU => Activation::Silu,
            sys::RMLP_ACTIVATION_GELU_TANH => Activation::GeluTanh,
            sys::RMLP_ACTIVATION_GELU => Activation::Gelu,
            other => Activation::Unknown(other),
        };
        ModelConfig {
            architecture,
            vocab_size: c.vocab_size as usize,
            hidden_size: c.hidden_size as usize,
            intermediate_size: c.intermediate_size as usize,
            num_hidden_layers: c.num_hidden_layers as usize,
            num_attention_heads: c.num_attention_heads as usize,
            num_key_value_heads: c.num_key_value_heads as usize,
            head_dim: c.head_dim as usize,
            max_position_embeddings: c.max_position_embeddings as usize,
            sliding_window: c.sliding_window as usize,
            rms_norm_eps: c.rms_norm_eps,
            rope_theta: c.rope_theta,
            tie_word_embeddings: c.tie_word_embeddings,
            attention_bias: c.attention_bias,
            qk_norm: c.qk_norm,
            has_lm_head: c.has_lm_head,
            o_proj_bias: c.o_proj_bias,
            mlp_bias: c.mlp_bias,
            norm_weight_plus_one: c.norm_weight_plus_one,
            sandwich_norms: c.sandwich_norms,
            activation,
            embedding_scale: c.embedding_scale,
            final_logit_softcapping: c.final_logit_softcapping,
            query_pre_attn_scalar: c.query_pre_attn_scalar,
            attn_logit_softcapping: c.attn_logit_softcapping,
        }
    }
}

/// Where a model's weights live and its layers run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Device {
    /// The CPU (OpenBLAS), f32.
    Cpu,
    /// The CUDA device of this ordinal.
    Cuda(i32),
}

/// Element type of a model's weights and activations (`rmlp_dtype`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DType {
    F32,
    F16,
    BF16,
}

impl DType {
    pub(crate) fn raw(self) -> sys::rmlp_dtype {
        match self {
            DType::F32 => sys::RMLP_DTYPE_F32,
            DType::F16 => sys::RMLP_DTYPE_F16,
            DType::BF16 => sys::RMLP_DTYPE_BF16,
        }
    }

    pub(crate) fn from_raw(raw: sys::rmlp_dtype) -> Option<DType> {
        match raw {
            sys::RMLP_DTYPE_F32 => Some(DType::F32),
            sys::RMLP_DTYPE_F16 => Some(DType::F16),
            sys::RMLP_DTYPE_BF16 => Some(DType::BF16),
            _ => None,
        }
    }
}

/// How a bf16-weight CPU model multiplies by its matrices (`rmlp_cpu_bf16_gemm`): the setting of
/// [`ModelParams::cpu_bf16_gemm`], and what [`Model::cpu_bf16_gemm`] says a loaded model runs
/// ([`CpuBf16GemmInfo::kind`]; never `Auto` there).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum CpuBf16Gemm {
    /// The default: `RADIX_MLP_CPU_BF16_GEMM=auto|widen|onednn` decides when the model is loaded,
    /// and `auto` (or unset) is `OneDnn` where oneDNN's GEMMs can run (AVX512-BF16 or AMX-BF16,
    /// `libdnnl.so.2` loads), else `Widen`.
    #[default]
    Auto,
    /// Each matrix widened back to f32 panel by panel for the f32 GEMMs' sgemm ([`crate::cpu_sgemm`]), on any CPU.
    Widen,
    /// oneDNN's bf16 x bf16 -> f32 matmul (AVX512-BF16 or AMX-BF16; the activations rounded to
    /// bf16 as well), required: the load is `Status::Unsupported` (saying why) where it cannot run.
    OneDnn,
}

impl CpuBf16Gemm {
    pub(crate) fn raw(self) -> sys::rmlp_cpu_bf16_gemm {
        match self {
            CpuBf16Gemm::Auto => sys::RMLP_CPU_BF16_GEMM_AUTO,
            CpuBf16Gemm::Widen => sys::RMLP_CPU_BF16_GEMM_WIDEN,
            CpuBf16Gemm::OneDnn => sys::RMLP_CPU_BF16_GEMM_ONEDNN,
        }
    }

    pub(crate) fn from_raw(raw: sys::rmlp_cpu_bf16_gemm) -> Option<CpuBf16Gemm> {
        match raw {
            sys::RMLP_CPU_BF16_GEMM_AUTO => Some(CpuBf16Gemm::Auto),
            sys::RMLP_CPU_BF16_GEMM_WIDEN => Some(CpuBf16Gemm::Widen),
            sys::RMLP_CPU_BF16_GEMM_ONEDNN => Some(CpuBf16Gemm::OneDnn),
            _ => None,
        }
    }
}

/// Which library the CPU path's f32 GEMMs run (`rmlp_cpu_sgemm_kind`, from [`crate::cpu_sgemm`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CpuSgemm {
    /// OpenBLAS's sgemm, which the library links, on the kernels OpenBLAS chose for this CPU.
    OpenBlas,
    /// oneDNN's sgemm (`libdnnl.so.2`, loaded at run time), one thread inside each of the library's.
    OneDnn,
}

impl CpuSgemm {
    pub(crate) fn from_raw(raw: sys::rmlp_cpu_sgemm_kind) -> Option<CpuSgemm> {
        match raw {
            sys::RMLP_CPU_SGEMM_OPENBLAS => Some(CpuSgemm::OpenBlas),
            sys::RMLP_CPU_SGEMM_ONEDNN => Some(CpuSgemm::OneDnn),
            _ => None,
        }
    }
}

/// Which GEMM a model's layers run on bf16 matrices (`rmlp_model_cpu_bf16_gemm`, from
/// [`Model::cpu_bf16_gemm`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct CpuBf16GemmInfo {
    /// [`CpuBf16Gemm::Widen`] or [`CpuBf16Gemm::OneDnn`] for a model loaded with
    /// [`ModelParams::cpu_weight_dtype`] BF16 on the CPU; `None` for a model without bf16 CPU
    /// matrices (f32 weights, a CUDA model).
    pub kind: Option<CpuBf16Gemm>,
    /// GEMMs oneDNN failed at run time, which the widening path ran instead (0 unless `OneDnn`).
    pub fallbacks: u64,
    /// Which oneDNN and ISA run it, or why the widening path was taken.
    pub detail: String,
}

/// How a model is loaded (`rmlp_model_params`): the CPU in f32 by default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModelParams {
    pub device: Device,
    /// F32 on the CPU; F32, F16 or BF16 on CUDA (checkpoints are converted at load).
    pub dtype: DType,
    /// Skip the check that every weight is finite (a NaN or infinity is `Status::Model` otherwise).
    pub skip_finite_check: bool,
    /// CPU only: F32 (default) or BF16, the dtype the layers' weight matrices are held in (BF16:
    /// half their memory; activations and sums stay f32; docs/backends.md#bf16-weights-on-the-cpu).
    pub cpu_weight_dtype: DType,
    /// CPU only, with `cpu_weight_dtype` BF16: how the layers multiply by the bf16 matrices
    /// (default [`CpuBf16Gemm::Auto`]); another value is `Status::InvalidArgument` with f32 weights
    /// and on CUDA. [`Model::cpu_bf16_gemm`] says which one a loaded model runs.
    pub cpu_bf16_gemm: CpuBf16Gemm,
}

impl Default for ModelParams {
    fn default() -> ModelParams {
        ModelParams {
            device: Device::Cpu,
            dtype: DType::F32,
            skip_finite_check: false,
            cpu_weight_dtype: DType::F32,
            cpu_bf16_gemm: CpuBf16Gemm::Auto,
        }
    }
}

impl ModelParams {
    pub(crate) fn raw(&self) -> sys::rmlp_model_params {
        // SAFETY: a plain call returning a struct by value.
        let mut p = unsafe { sys::rmlp_model_default_params() };
        match self.device {
            Device::Cpu => p.device = sys::RMLP_DEVICE_CPU,
            Device::Cuda(index) => {
                p.device = sys::RMLP_DEVICE_CUDA;
                p.device_index = index;
            }
        }
        p.dtype = self.dtype.raw();
        p.skip_finite_check = self.skip_finite_check;
        p.cpu_weight_dtype = self.cpu_weight_dtype.raw();
        p.cpu_bf16_gemm = self.cpu_bf16_gemm.raw();
        p
    }
}

/// One weight tensor the host holds in device memory, for [`Model::bind_cuda`]: its Hugging
/// Face name (`model.layers.0.self_attn.q_proj.weight`, or stacked `layers.0.self_attn.qkv_proj.weight`
/// and `layers.0.mlp.gate_up_proj.weight`), the device pointer, and its shape (1 or 2 dims).
#[derive(Clone, Copy, Debug)]
pub struct WeightBinding<'a> {
    pub name: &'a str,
    pub data: *const c_void,
    pub shape: &'a [u64],
}

impl From<&ModelConfig> for sys::rmlp_model_config {
    fn from(c: &ModelConfig) -> sys::rmlp_model_config {
        let architecture = match c.architecture {
            Architecture::Qwen3 => sys::RMLP_ARCH_QWEN3,
            Architecture::Qwen2 => sys::RMLP_ARCH_QWEN2,
            Architecture::Llama => sys::RMLP_ARCH_LLAMA,
            Architecture::Mistral => sys::RMLP_ARCH_MISTRAL,
            Architecture::Gemma => sys::RMLP_ARCH_GEMMA,
            Architecture::Gemma2 => sys::RMLP_ARCH_GEMMA2,
            Architecture::Gemma3Text => sys::RMLP_ARCH_GEMMA3_TEXT,
            Architecture::Unknown(code) => code,
        };
        let activation = match c.activation {
            Activation::Silu => sys::RMLP_ACTIVATION_SILU,
            Activation::GeluTanh => sys::RMLP_ACTIVATION_GELU_TANH,
            Activation::Gelu => sys::RMLP_ACTIVATION_GELU,
            Activation::Unknown(code) => code,
        };
        let u = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        sys::rmlp_model_config {
            architecture,
            vocab_size: u(c.vocab_size),
            hidden_size: u(c.hidden_size),
            intermediate_size: u(c.intermediate_size),
            num_hidden_layers: u(c.num_hidden_layers),
            num_attention_heads: u(c.num_attention_heads),
            num_key_value_heads: u(c.num_key_value_heads),
            head_dim: u(c.head_dim),
            max_position_embeddings: u(c.max_position_embeddings),
            sliding_window: u(c.sliding_window),
            rms_norm_eps: c.rms_norm_eps,
            rope_theta: c.rope_theta,
            tie_word_embeddings: c.tie_word_embeddings,
            attention_bias: c.attention_bias,
            qk_norm: c.qk_norm,
            has_lm_head: c.has_lm_head,
            o_proj_bias: c.o_proj_bias,
            mlp_bias: c.mlp_bias,
            norm_weight_plus_one: c.norm_weight_plus_one,
            sandwich_norms: c.sandwich_norms,
            activation,
            embedding_scale: c.embedding_scale,
            final_logit_softcapping: c.final_logit_softcapping,
            query_pre_attn_scalar: c.query_pre_attn_scalar,
            attn_logit_softcapping: c.attn_logit_softcapping,
        }
    }
}

/// How [`Model::pool`] turns a sequence's rows into one vector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pooling {
    /// The last token (Qwen3-Embedding).
    Last,
    /// The mean over the sequence's tokens.
    Mean,
    /// The first token.
    First,
}

impl Pooling {
    pub(crate) fn raw(self) -> sys::rmlp_pooling {
        match self {
            Pooling::Last => sys::RMLP_POOLING_LAST,
            Pooling::Mean => sys::RMLP_POOLING_MEAN,
            Pooling::First => sys::RMLP_POOLING_FIRST,
        }
    }
}

/// Where attention runs (`rmlp_attention_space`; docs/design.md, "Attention in compact
/// space"): a [`Context`] setting ([`ContextParams`]) and the layout of [`AttentionArgs`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum AttentionSpace {
    /// Full space (the default): Q/K/V are scattered to the batch's rows and every sequence
    /// attends over its whole length.
    #[default]
    Full,
    /// Compact space: only the compact rows a sequence owns are its queries, its keys are its
    /// path through the plan's `scatter` (a paged KV layout with page size 1); the forward stays
    /// on the compact rows. The same function as full space, with fewer score pairs on shared
    /// prefixes.
    Compact,
    /// Compact when the plan shares rows (`use_radix`), full otherwise. Never a layout.
    Auto,
}

impl AttentionSpace {
    pub(crate) fn raw(self) -> sys::rmlp_attention_space {
        match self {
            AttentionSpace::Full => sys::RMLP_ATTENTION_FULL,
            AttentionSpace::Compact => sys::RMLP_ATTENTION_COMPACT,
            AttentionSpace::Auto => sys::RMLP_ATTENTION_AUTO,
        }
    }

    pub(crate) fn from_raw(space: sys::rmlp_attention_space) -> Option<AttentionSpace> {
        match space {
            sys::RMLP_ATTENTION_FULL => Some(AttentionSpace::Full),
            sys::RMLP_ATTENTION_COMPACT => Some(AttentionSpace::Compact),
            sys::RMLP_ATTENTION_AUTO => Some(AttentionSpace::Auto),
            _ => None,
        }
    }
}

/// How a context runs (`rmlp_context_params`), for [`Model::context_with`] and
/// [`Context::new_with`]: the library's defaults by default (set the fields you need and take
/// the rest with `..ContextParams::default()`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ContextParams {
    /// Where [`Context::forward`] (and [`Context::forward_with_attention`], whose callback then
    /// gets that layout) runs attention; the output is batch rows either way.
    pub attention_space: AttentionSpace,
    /// Bytes of the context's prefix KV cache (0, the default: none), fixed at creation. With a
    /// cache, [`Context::forward`] and [`Context::forward_compact`] compute only the compact rows
    /// that earlier batches did not leave in it (each row's K/V in every layer and its final
    /// hidden state are kept, least recently used evicted first) and give the same outputs up to
    /// fp32 rounding; a batch whose new rows do not fit runs without the cache, with no error
    /// ([`CacheStats::bypassed`]). CPU models only (a CUDA model's context is `Status::Unsupported`);
    /// the `*_with_attention` forwards are refused on it (the cache needs the built-in attention)
    /// and the per-layer calls do not use it. See [`Context::cache_stats`], [`Context::cache_clear`].
    pub cache_bytes: u64,
    /// Which kernel a CUDA context's built-in attention runs (default [`GpuAttention::Auto`],
    /// which lets `RADIX_MLP_GPU_ATTENTION` decide); a CPU context takes only `Auto`
    /// (`Status::InvalidArgument` otherwise). See [`Context::gpu_stats`].
    pub gpu_attention: GpuAttention,
}

impl Default for ContextParams {
    /// `rmlp_context_default_params()`: attention in full space, no cache.
    fn default() -> ContextParams {
        // SAFETY: no arguments, returns a value.
        let raw = unsafe { sys::rmlp_context_default_params() };
        ContextParams {
            attention_space: AttentionSpace::from_raw(raw.attention_space).unwrap_or_default(),
            cache_bytes: raw.cache_bytes,
            gpu_attention: GpuAttention::from_raw(raw.gpu_attention).unwrap_or_default(),
        }
    }
}

impl ContextParams {
    pub(crate) fn raw(&self) -> sys::rmlp_context_params {
        // SAFETY: no arguments, returns a value (struct_size set, padding the library's).
        let mut raw = unsafe { sys::rmlp_context_default_params() };
        raw.attention_space = self.attention_space.raw();
        raw.cache_bytes = self.cache_bytes;
        raw.gpu_attention = self.gpu_attention.raw();
        raw
    }
}

/// What a context's prefix cache did since the context was made (`rmlp_cache_stats`, from
/// [`Context::cache_stats`]; all zero without a cache). Tokens are compact rows: a batch's
/// distinct (token, position) paths.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CacheStats {
    /// Batches run on the context; of them, run without the cache because their new rows did not
    /// fit it.
    pub batches: u64,
    pub bypassed: u64,
    /// Compact rows looked up; of them, found in the cache (nothing computed for them).
    pub lookups: u64,
    pub hit_tokens: u64,
    /// Rows computed and cached; rows evicted to make room.
    pub computed_tokens: u64,
    pub evicted_tokens: u64,
    /// Slots in the cache (`bytes_budget / bytes_per_slot`) and slots holding a row.
    pub slots: u64,
    pub slots_used: u64,
    /// Bytes of one slot (a row's K and V in every layer and its hidden state), the budget, and
    /// the bytes of the slots in use.
    pub bytes_per_slot: u64,
    pub bytes_budget: u64,
    pub bytes_in_use: u64,
}

impl From<&sys::rmlp_cache_stats> for CacheStats {
    fn from(s: &sys::rmlp_cache_stats) -> CacheStats {
        CacheStats {
            batches: s.batches,
            bypassed: s.bypassed,
            lookups: s.lookups,
            hit_tokens: s.hit_tokens,
            computed_tokens: s.computed_tokens,
            evicted_tokens: s.evicted_tokens,
            slots: s.slots,
            slots_used: s.slots_used,
            bytes_per_slot: s.bytes_per_slot,
            bytes_budget: s.bytes_budget,
            bytes_in_use: s.bytes_in_use,
        }
    }
}

/// One sequence's reranker score from [`Context::score_pair`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PairScore {
    /// LM-head logit of `token_a` at the sequence's last row.
    pub logit_a: f32,
    /// LM-head logit of `token_b`.
    pub logit_b: f32,
    /// `softmax([logit_a, logit_b])[0]`.
    pub prob_a: f32,
}
