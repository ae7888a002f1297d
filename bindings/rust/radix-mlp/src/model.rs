//! Models: a loaded checkpoint ([`Model`], shared by any number of threads), one thread's
//! workspace ([`Context`]) running a batch whole ([`Context::forward`], with the built-in
//! attention or the host's) or layer by layer for a host that keeps attention, then pooling
//! ([`Model::pool`]) and reranker scores ([`Context::score_pair`]). Buffer lengths are checked
//! here (the C side cannot see them); the library checks the rest, and its message comes back
//! in the [`Error`].
//!
//! On a CUDA device ([`Model::load_with`] with [`Device::Cuda`], or [`Model::bind_cuda`] over
//! the host's own device tensors) activations are device memory, which safe slices cannot
//! describe: the slice methods refuse such a model (`Status::Unsupported`), and the `unsafe`
//! `*_device` methods take raw device pointers instead, after [`Context::set_plan`].
use core::ffi::c_void;
use core::marker::PhantomData;
use core::mem::MaybeUninit;
use core::ptr::NonNull;
use std::any::Any;
use std::ffi::{CStr, CString};
use std::fmt;
use std::ops::Deref;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::Arc;

use radix_mlp_sys as sys;

use crate::error::{Error, Status};
use crate::gpu::GpuAttention;
use crate::planner::AsPlan;

/// Decoder architecture (`model_type` in config.json).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Architecture {
    Qwen3,
    Qwen2,
    Llama,
    Mistral,
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
    /// Mistral's `sliding_window` (0: none); longer sequences are refused.
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
            other => Architecture::Unknown(other),
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
    fn raw(self) -> sys::rmlp_dtype {
        match self {
            DType::F32 => sys::RMLP_DTYPE_F32,
            DType::F16 => sys::RMLP_DTYPE_F16,
            DType::BF16 => sys::RMLP_DTYPE_BF16,
        }
    }
}

/// How a model is loaded (`rmlp_model_params`): the CPU in f32 by default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModelParams {
    pub device: Device,
    /// F32 on the CPU; F32, F16 or BF16 on CUDA (checkpoints are converted at load).
    pub dtype: DType,
    /// Skip the check that every weight is finite (a NaN or infinity is `Status::Model` otherwise).
    pub skip_finite_check: bool,
}

impl Default for ModelParams {
    fn default() -> ModelParams {
        ModelParams { device: Device::Cpu, dtype: DType::F32, skip_finite_check: false }
    }
}

impl ModelParams {
    fn raw(&self) -> sys::rmlp_model_params {
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
            Architecture::Unknown(code) => code,
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
    fn raw(self) -> sys::rmlp_pooling {
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
    fn raw(self) -> sys::rmlp_attention_space {
        match self {
            AttentionSpace::Full => sys::RMLP_ATTENTION_FULL,
            AttentionSpace::Compact => sys::RMLP_ATTENTION_COMPACT,
            AttentionSpace::Auto => sys::RMLP_ATTENTION_AUTO,
        }
    }

    fn from_raw(space: sys::rmlp_attention_space) -> Option<AttentionSpace> {
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
    fn raw(&self) -> sys::rmlp_context_params {
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

/// A loaded model (`rmlp_model`), on the CPU in f32 or on a CUDA device. Read-only after load,
/// so it is `Send` and `Sync`: threads share one and each runs batches through its own [`Context`].
pub struct Model {
    raw: NonNull<sys::rmlp_model>,
    config: ModelConfig,
    params: ModelParams,
}

// SAFETY: the library never writes a model after rmlp_model_load returns; any number of
// contexts on any threads may read it at once (documented on rmlp_model).
unsafe impl Send for Model {}
unsafe impl Sync for Model {}

impl Model {
    /// Loads a Hugging Face / Candle checkpoint (`rmlp_model_load`): a folder with config.json
    /// and model.safetensors (or an index and its shards), or the path of a .safetensors file
    /// whose folder holds config.json.
    pub fn load(path: impl AsRef<Path>) -> Result<Model, Error> {
        Model::load_with(path, ModelParams::default())
    }

    /// [`load`](Self::load) onto a device in a dtype (`rmlp_model_load` with params): a CUDA
    /// load is `Status::NoDevice` where no device is present, `Status::Unsupported` in a build
    /// without CUDA.
    pub fn load_with(path: impl AsRef<Path>, params: ModelParams) -> Result<Model, Error> {
        let path = path.as_ref();
        let c_path = path_cstring(path).ok_or_else(|| {
            Error::new(Status::InvalidArgument, format!("radix_mlp::Model::load: {path:?} is not a valid C path"))
        })?;
        let raw_params = params.raw();
        let mut raw = core::ptr::null_mut();
        // SAFETY: `c_path` is NUL-terminated; `raw_params` a valid params struct; `raw` an out pointer.
        Error::check(unsafe { sys::rmlp_model_load(c_path.as_ptr(), &raw_params, &mut raw) })?;
        let raw = NonNull::new(raw)
            .ok_or_else(|| Error::new(Status::Internal, "rmlp_model_load returned OK and NULL".into()))?;
        Model::wrap(raw, params)
    }

    /// A CUDA model over weight tensors the host already holds on device `device_index`, in
    /// `dtype` (`rmlp_model_bind_cuda`): no copy is made.
    ///
    /// # Safety
    /// Every `data` pointer must be device memory of that device holding the tensor of its name
    /// and shape in `dtype`, and must stay valid and unchanged for as long as the model lives.
    pub unsafe fn bind_cuda(
        config: &ModelConfig,
        tensors: &[WeightBinding<'_>],
        device_index: i32,
        dtype: DType,
    ) -> Result<Model, Error> {
        const FN: &str = "radix_mlp::Model::bind_cuda";
        let mut names = Vec::with_capacity(tensors.len());
        let mut raw_tensors = Vec::with_capacity(tensors.len());
        for t in tensors {
            let name = CString::new(t.name)
                .map_err(|_| Error::new(Status::InvalidArgument, format!("{FN}: name {:?} has a NUL byte", t.name)))?;
            if t.shape.is_empty() || t.shape.len() > 2 {
                return Err(Error::new(
                    Status::InvalidArgument,
                    format!("{FN}: '{}' has {} dims", t.name, t.shape.len()),
                ));
            }
            raw_tensors.push(sys::rmlp_weight_binding {
                name: name.as_ptr(),
                data: t.data,
                dtype: dtype.raw(),
                ndim: t.shape.len() as u32,
                shape: [t.shape[0], t.shape.get(1).copied().unwrap_or(0)],
            });
            names.push(name); // keeps the pointer above alive (moving a CString keeps its buffer)
        }
        let params = ModelParams { device: Device::Cuda(device_index), dtype, skip_finite_check: false };
        let raw_params = params.raw();
        let raw_config = sys::rmlp_model_config::from(config);
        let mut raw = core::ptr::null_mut();
        // SAFETY: config, tensors (with their names) and params outlive the call; the caller
        // vouches for the device pointers.
        Error::check(unsafe {
            sys::rmlp_model_bind_cuda(&raw_config, raw_tensors.as_ptr(), raw_tensors.len(), &raw_params, &mut raw)
        })?;
        drop(names);
        let raw = NonNull::new(raw)
            .ok_or_else(|| Error::new(Status::Internal, "rmlp_model_bind_cuda returned OK and NULL".into()))?;
        Model::wrap(raw, params)
    }

    fn wrap(raw: NonNull<sys::rmlp_model>, params: ModelParams) -> Result<Model, Error> {
        let mut config = MaybeUninit::uninit();
        // SAFETY: `raw` is a live model, `config` an out pointer.
        let got = Error::check(unsafe { sys::rmlp_model_get_config(raw.as_ptr(), config.as_mut_ptr()) });
        if let Err(e) = got {
            // SAFETY: `raw` came from rmlp_model_load and is freed once.
            unsafe { sys::rmlp_model_free(raw.as_ptr()) };
            return Err(e);
        }
        // SAFETY: written by rmlp_model_get_config on RMLP_OK.
        let config = ModelConfig::from(unsafe { &config.assume_init() });
        Ok(Model { raw, config, params })
    }

    /// The device the model runs on.
    pub fn device(&self) -> Device {
        self.params.device
    }

    /// The dtype of its weights and activations.
    pub fn dtype(&self) -> DType {
        self.params.dtype
    }

    /// The model's configuration.
    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    /// What the load found and accepted, as transformers warns of it (`rmlp_model_load_report`):
    /// tensors of the checkpoint the model does not use, one line per finding. Empty when the load
    /// used every tensor, and for bound models.
    pub fn load_report(&self) -> &str {
        let mut text = core::ptr::null();
        // SAFETY: `self.raw` is a live model and `text` an out pointer.
        let status = unsafe { sys::rmlp_model_load_report(self.raw.as_ptr(), &mut text) };
        if status != sys::RMLP_OK || text.is_null() {
            return "";
        }
        // SAFETY: a NUL-terminated text the model owns until it is freed, which `&self` outlives.
        unsafe { CStr::from_ptr(text) }.to_str().unwrap_or("")
    }

    /// A workspace for batches of up to `max_tokens` tokens (`rmlp_context_create`), borrowing
    /// the model; [`Context::new`] makes one that holds an `Arc` of it instead ([`SharedContext`]).
    pub fn context(&self, max_tokens: usize) -> Result<Context<'_>, Error> {
        self.context_with(max_tokens, ContextParams::default())
    }

    /// [`context`](Self::context) with `params` (`rmlp_context_create_with_params`), such as
    /// attention in compact space:
    ///
    /// ```no_run
    /// use radix_mlp::{AttentionSpace, ContextParams, Model};
    ///
    /// let model = Model::load("integration_tests/fixtures/qwen3_tiny")?;
    /// let params = ContextParams { attention_space: AttentionSpace::Auto, ..ContextParams::default() };
    /// let ctx = model.context_with(16384, params)?;
    /// assert_eq!(ctx.attention_space(), AttentionSpace::Auto);
    /// // With a 64 MiB prefix cache: later batches reuse the rows earlier ones computed.
    /// let cached = model.context_with(16384, ContextParams { cache_bytes: 64 << 20, ..ContextParams::default() })?;
    /// assert_eq!(cached.cache_stats()?.bytes_budget, 64 << 20);
    /// # Ok::<(), radix_mlp::Error>(())
    /// ```
    pub fn context_with(&self, max_tokens: usize, params: ContextParams) -> Result<Context<'_>, Error> {
        Ok(Context { raw: self.create_context(max_tokens, &params)?, model: self, params, _borrow: PhantomData })
    }

    /// `rmlp_context_create_with_params`; the caller ties the context to this model's lifetime.
    fn create_context(&self, max_tokens: usize, params: &ContextParams) -> Result<NonNull<sys::rmlp_context>, Error> {
        let mut raw = core::ptr::null_mut();
        let raw_params = params.raw();
        // SAFETY: `self.raw` is a live model, which every context is made to outlive; `raw_params`
        // a valid params struct; `raw` is an out pointer.
        Error::check(unsafe {
            sys::rmlp_context_create_with_params(self.raw.as_ptr(), max_tokens, &raw_params, &mut raw)
        })?;
        NonNull::new(raw).ok_or_else(|| Error::new(Status::Internal, "rmlp_context_create returned OK and NULL".into()))
    }

    /// Pools `hidden` (at least `n_tokens * hidden_size` floats, `n_tokens = cu_seqlens[last]`)
    /// per sequence (`rmlp_pool`): `n_seqs * hidden_size` floats; `normalize` scales each
    /// vector to unit L2 norm. An empty sequence is an error.
    pub fn pool(
        &self,
        hidden: &[f32],
        cu_seqlens: &[u32],
        pooling: Pooling,
        normalize: bool,
    ) -> Result<Vec<f32>, Error> {
        const FN: &str = "radix_mlp::Model::pool";
        let h = self.config.hidden_size;
        let n_tokens = cu_seqlens.last().map_or(0, |&n| n as usize);
        let n_seqs = cu_seqlens.len().saturating_sub(1);
        check_len(FN, "hidden", hidden.len(), n_tokens, h)?;
        let mut out = vec![0.0; n_seqs * h];
        // SAFETY: `hidden` has n_tokens rows and `out` n_seqs rows of hidden_size floats;
        // `cu_seqlens` has n_seqs + 1 entries (read only when n_seqs >= 1).
        Error::check(unsafe {
            sys::rmlp_pool(
                hidden.as_ptr(),
                n_tokens,
                h as u32,
                cu_seqlens.as_ptr(),
                n_seqs,
                pooling.raw(),
                normalize,
                out.as_mut_ptr(),
            )
        })?;
        Ok(out)
    }
}

impl Drop for Model {
    fn drop(&mut self) {
        // SAFETY: `self.raw` came from rmlp_model_load and is freed once; contexts borrow the
        // model, so none is left.
        unsafe { sys::rmlp_model_free(self.raw.as_ptr()) }
    }
}

impl fmt::Debug for Model {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Model")
            .field("raw", &self.raw)
            .field("config", &self.config)
            .field("params", &self.params)
            .finish()
    }
}

#[cfg(unix)]
fn path_cstring(path: &Path) -> Option<CString> {
    use std::os::unix::ffi::OsStrExt;
    CString::new(path.as_os_str().as_bytes()).ok()
}

#[cfg(not(unix))]
fn path_cstring(path: &Path) -> Option<CString> {
    CString::new(path.to_str()?).ok()
}

/// The scores of `rmlp_score_pair`'s outputs: `logits` (n_seqs, 2), `prob_a` (n_seqs).
fn pair_scores(logits: &[f32], prob_a: &[f32]) -> Vec<PairScore> {
    prob_a
        .iter()
        .zip(logits.chunks_exact(2))
        .map(|(&prob_a, l)| PairScore { logit_a: l[0], logit_b: l[1], prob_a })
        .collect()
}

/// Err unless `len >= rows * width`.
fn check_len(fn_name: &str, name: &str, len: usize, rows: usize, width: usize) -> Result<(), Error> {
    if rows.checked_mul(width).is_some_and(|need| len >= need) {
        return Ok(());
    }
    Err(Error::new(Status::InvalidArgument, format!("{fn_name}: {name} has {len} floats, needs {rows} rows x {width}")))
}

fn to_u32(fn_name: &str, name: &str, value: usize) -> Result<u32, Error> {
    u32::try_from(value).map_err(|_| Error::new(Status::TooLarge, format!("{fn_name}: {name}={value} exceeds 2^32-1")))
}

/// One layer's attention in f32: causal attention of every sequence over its own rows, query
/// head `h` reading KV head `h / (n_heads / n_kv_heads)`. The library hands one to the callback
/// of [`Context::forward_with_attention`] and [`Context::forward_compact_with_attention`]; a host
/// fills one in to call [`Context::attention`] or [`Context::attention_compact`].
///
/// Two layouts: full space (`compact` is `None`), where `q`, `k`, `v` and `out` have a row per
/// batch row (n_tokens), or compact space (`compact` is `Some`), where they have a row per
/// compact row (n_compact): sequence `s` owns the queries `qo_indptr[s] .. qo_indptr[s+1]`,
/// the last of its path, and reads the keys and values of its path, the rows
/// `kv_indices[cu_seqlens[s] .. cu_seqlens[s+1]]`, causal aligned bottom-right (its owned query
/// `t` of `q_s` sees path positions `0 ..= L_s - q_s + t`). Those are the arrays of a FlashInfer
/// paged prefill with page size 1 (`kv_indptr` = `cu_seqlens`, `kv_indices`).
#[derive(Debug)]
pub struct AttentionArgs<'a> {
    pub layer: usize,
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
    /// Softmax scale, `1 / sqrt(head_dim)`.
    pub scale: f32,
    /// (n_seqs + 1) row offsets of the sequences in the batch (`kv_indptr` in compact space).
    pub cu_seqlens: &'a [u32],
    /// (rows, n_heads, head_dim) queries, RoPE applied.
    pub q: &'a [f32],
    /// (rows, n_kv_heads, head_dim) keys, RoPE applied.
    pub k: &'a [f32],
    /// (rows, n_kv_heads, head_dim) values.
    pub v: &'a [f32],
    /// (rows, n_heads, head_dim) output.
    pub out: &'a mut [f32],
    /// The compact layout, or `None` for full space.
    pub compact: Option<CompactLayout<'a>>,
}

/// The layout of attention in compact space ([`AttentionArgs::compact`]): the plan's arrays.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompactLayout<'a> {
    /// (n_seqs + 1) the compact rows each sequence owns (its queries); the last entry is n_compact.
    pub qo_indptr: &'a [u32],
    /// (n_tokens) each sequence's path, `cu_seqlens[s] .. cu_seqlens[s+1]`: the plan's `scatter`.
    pub kv_indices: &'a [u32],
}

impl AttentionArgs<'_> {
    /// Rows of the batch: `cu_seqlens[n_seqs]` (0 when `cu_seqlens` is empty).
    pub fn n_tokens(&self) -> usize {
        self.cu_seqlens.last().map_or(0, |&n| n as usize)
    }
    /// Sequences of the batch: `cu_seqlens.len() - 1`.
    pub fn n_seqs(&self) -> usize {
        self.cu_seqlens.len().saturating_sub(1)
    }
    /// [`AttentionSpace::Full`] or [`AttentionSpace::Compact`]: the layout of `q`, `k`, `v`, `out`.
    pub fn layout(&self) -> AttentionSpace {
        if self.compact.is_some() {
            AttentionSpace::Compact
        } else {
            AttentionSpace::Full
        }
    }
    /// N': the compact rows (`qo_indptr[n_seqs]`) in compact space, 0 in full space.
    pub fn n_compact(&self) -> usize {
        self.compact.and_then(|c| c.qo_indptr.last()).map_or(0, |&n| n as usize)
    }
    /// Rows of `q`, `k`, `v` and `out`: [`n_compact`](Self::n_compact) in compact space,
    /// [`n_tokens`](Self::n_tokens) in full space.
    pub fn n_rows(&self) -> usize {
        if self.compact.is_some() {
            self.n_compact()
        } else {
            self.n_tokens()
        }
    }
}

/// A slice of `len` values at `ptr`, empty when `len` is 0; `None` for NULL with `len > 0`.
///
/// # Safety
/// When non-NULL and `len > 0`, `ptr` must point at `len` values valid and unaliased for `'a`.
unsafe fn raw_slice<'a, T>(ptr: *mut T, len: usize) -> Option<&'a mut [T]> {
    match (len, ptr.is_null()) {
        (0, _) => Some(&mut []),
        (_, true) => None,
        _ => Some(core::slice::from_raw_parts_mut(ptr, len)),
    }
}

/// A host's attention, as the `*_with_attention` methods take it.
type HostAttention<'f> = &'f mut dyn FnMut(&mut AttentionArgs<'_>) -> Result<(), Error>;

/// The callback's state: the host's function and the error it returned, kept in full because
/// `rmlp_forward` replaces the thread's message with its own.
struct Callback<'f> {
    attention: HostAttention<'f>,
    error: Option<Error>,
}

fn panic_message(payload: &(dyn Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("?")
}

/// The library's args as slices; `None` for a NULL buffer or a dtype other than F32.
///
/// # Safety
/// `a`'s buffers must have the shapes its fields give, be distinct, and stay valid and
/// untouched by anyone else for `'a`.
unsafe fn args_view(a: &sys::rmlp_attention_args) -> Option<AttentionArgs<'_>> {
    let (n, n_seqs) = (a.n_tokens as usize, a.n_seqs as usize);
    let (qd, kvd) = (a.n_heads as usize * a.head_dim as usize, a.n_kv_heads as usize * a.head_dim as usize);
    if a.dtype != sys::RMLP_DTYPE_F32 {
        return None;
    }
    let (rows, compact) = match AttentionSpace::from_raw(a.layout)? {
        AttentionSpace::Full => (n, None),
        AttentionSpace::Compact => (
            a.n_compact as usize,
            Some(CompactLayout {
                qo_indptr: raw_slice(a.qo_indptr.cast_mut(), n_seqs + 1)?,
                kv_indices: raw_slice(a.kv_indices.cast_mut(), n)?,
            }),
        ),
        AttentionSpace::Auto => return None,
    };
    Some(AttentionArgs {
        layer: a.layer as usize,
        n_heads: a.n_heads as usize,
        n_kv_heads: a.n_kv_heads as usize,
        head_dim: a.head_dim as usize,
        scale: a.scale,
        cu_seqlens: raw_slice(a.cu_seqlens.cast_mut(), n_seqs + 1)?,
        q: raw_slice(a.q.cast::<f32>().cast_mut(), rows * qd)?,
        k: raw_slice(a.k.cast::<f32>().cast_mut(), rows * kvd)?,
        v: raw_slice(a.v.cast::<f32>().cast_mut(), rows * kvd)?,
        out: raw_slice(a.out.cast::<f32>(), rows * qd)?,
        compact,
    })
}

/// The `rmlp_attention_fn` of [`Context::forward_with_attention`]: the args as slices, the
/// host's function, its error or panic turned into a status (unwinding into C is undefined).
unsafe extern "C" fn trampoline(user_data: *mut c_void, args: *const sys::rmlp_attention_args) -> sys::rmlp_status {
    // SAFETY: `user_data` is the `Callback` that forward_with_attention passed, alive and not
    // otherwise borrowed during rmlp_forward.
    let state = unsafe { &mut *user_data.cast::<Callback<'_>>() };
    let result = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the library passes valid args whose buffers are its context's distinct
        // workspace arrays of these shapes, alive and untouched during the call.
        let a = unsafe { &*args };
        match unsafe { args_view(a) } {
            Some(mut view) => (state.attention)(&mut view),
            None => Err(Error::new(
                Status::Internal,
                format!("attention args of layer {}: NULL, not F32 or an unknown layout {}", a.layer, a.layout),
            )),
        }
    }));
    let error = match result {
        Ok(Ok(())) => return sys::RMLP_OK,
        Ok(Err(e)) => e,
        Err(payload) => {
            let e =
                Error::new(Status::Internal, format!("the attention callback panicked: {}", panic_message(&*payload)));
            // Dropping the payload may panic too; never let that unwind into C.
            if let Err(again) = catch_unwind(AssertUnwindSafe(move || drop(payload))) {
                core::mem::forget(again);
            }
            e
        }
    };
    let code = error.status.code();
    state.error = Some(error);
    if code < 0 {
        code
    } else {
        sys::RMLP_ERR_INTERNAL
    }
}

/// A workspace for running batches of up to `max_tokens` tokens through a [`Model`]
/// (`rmlp_context`); calls through it never allocate. `Send` but not `Sync`: one per thread.
///
/// It holds its model by `M`: a borrow, `Context<'m>` from [`Model::context`], or a share,
/// [`SharedContext`] (`Context<'static, Arc<Model>>`) from [`Context::new`], which keeps the
/// model alive and ties the context to no borrow, so that a server keeps it in one struct beside
/// anything else or moves it into a `'static` thread or task.
///
/// ```compile_fail
/// fn sync<T: Sync>() {}
/// sync::<radix_mlp::Context<'static>>();
/// ```
pub struct Context<'m, M: ModelHolder = &'m Model> {
    raw: NonNull<sys::rmlp_context>,
    /// Dropped after `raw` is freed (Drop runs before the fields), so the model outlives it.
    model: M,
    params: ContextParams,
    _borrow: PhantomData<&'m Model>,
}

/// A context holding a share of its model: what [`Context::new`] makes.
pub type SharedContext = Context<'static, Arc<Model>>;

mod holder {
    pub trait Sealed {}
    impl Sealed for &super::Model {}
    impl Sealed for std::sync::Arc<super::Model> {}
}

/// How a [`Context`] holds its model: `&Model` or `Arc<Model>` (sealed: the context trusts it to
/// give the model it was made for, every time).
pub trait ModelHolder: Deref<Target = Model> + holder::Sealed {}
impl ModelHolder for &Model {}
impl ModelHolder for Arc<Model> {}

// SAFETY: a context is heap memory with no thread affinity, used by one thread at a time
// (`&mut self` on every call, !Sync); the model it reads is Sync, and `M: Send` moves its holder.
unsafe impl<M: ModelHolder + Send> Send for Context<'_, M> {}

impl<'m> Context<'m> {
    /// The model this context runs.
    pub fn model(&self) -> &'m Model {
        self.model
    }
}

impl<'m> Context<'m, Arc<Model>> {
    /// A workspace for batches of up to `max_tokens` tokens (`rmlp_context_create`) that holds a
    /// share of its model and keeps it alive; the model is freed with its last holder.
    ///
    /// ```no_run
    /// use std::sync::Arc;
    /// use radix_mlp::{Context, Model, SharedContext};
    ///
    /// let model = Arc::new(Model::load("integration_tests/fixtures/qwen3_tiny")?);
    /// let mut ctx: SharedContext = Context::new(Arc::clone(&model), 16384)?; // one per worker
    /// let worker = std::thread::spawn(move || {
    ///     // ctx.forward(&plan, &mut out) for every batch this thread takes
    ///     ctx.model().config().hidden_size
    /// });
    /// assert_eq!(worker.join().unwrap(), model.config().hidden_size);
    /// # Ok::<(), radix_mlp::Error>(())
    /// ```
    pub fn new(model: Arc<Model>, max_tokens: usize) -> Result<Context<'m, Arc<Model>>, Error> {
        Context::new_with(model, max_tokens, ContextParams::default())
    }

    /// [`new`](Self::new) with `params` (`rmlp_context_create_with_params`), such as
    /// [`AttentionSpace::Compact`].
    pub fn new_with(
        model: Arc<Model>,
        max_tokens: usize,
        params: ContextParams,
    ) -> Result<Context<'m, Arc<Model>>, Error> {
        Ok(Context { raw: model.create_context(max_tokens, &params)?, model, params, _borrow: PhantomData })
    }

    /// The model this context runs, as the share it holds (clone it for another worker's context).
    pub fn model(&self) -> &Arc<Model> {
        &self.model
    }
}

impl<M: ModelHolder> Context<'_, M> {
    /// Where [`forward`](Self::forward) runs attention ([`ContextParams::attention_space`]).
    pub fn attention_space(&self) -> AttentionSpace {
        self.params.attention_space
    }

    /// The prefix cache's counters since the context was made (`rmlp_context_cache_stats`; all
    /// zero for a context without a cache, [`ContextParams::cache_bytes`]).
    pub fn cache_stats(&self) -> Result<CacheStats, Error> {
        let mut out = sys::rmlp_cache_stats::default();
        // SAFETY: `self.raw` is a live context (no other thread uses it: !Sync); `out` an out pointer.
        Error::check(unsafe { sys::rmlp_context_cache_stats(self.raw.as_ptr(), &mut out) })?;
        Ok(CacheStats::from(&out))
    }

    /// Empties the prefix cache (`rmlp_context_cache_clear`): the next batches compute every
    /// row again; the counters stay. Does nothing on a context without a cache.
    pub fn cache_clear(&mut self) -> Result<(), Error> {
        // SAFETY: `self.raw` is a live context, borrowed mutably for the call.
        Error::check(unsafe { sys::rmlp_context_cache_clear(self.raw.as_ptr()) })
    }

    /// The live handle, borrowed mutably, for the crate's other modules (batcher.rs).
    pub(crate) fn raw_mut(&mut self) -> *mut sys::rmlp_context {
        self.raw.as_ptr()
    }

    /// Err unless the model computes in host memory (the CPU): slices are host memory.
    fn host_memory(&self, fn_name: &str) -> Result<(), Error> {
        match self.model.params.device {
            Device::Cpu => Ok(()),
            Device::Cuda(_) => Err(Error::new(
                Status::Unsupported,
                format!("{fn_name}: the model is on a CUDA device, whose activations are device memory: use the *_device methods"),
            )),
        }
    }

    /// Per-batch setup (`rmlp_context_set_plan`): on CUDA, copies the plan's maps to the device
    /// on the context's stream; every later call with this plan checks it is the one set. A
    /// no-op on the CPU.
    pub fn set_plan<P: AsPlan + ?Sized>(&mut self, plan: &P) -> Result<(), Error> {
        let raw = plan.as_raw()?;
        // SAFETY: `raw` points into `plan`, borrowed for the call (the library copies it).
        Error::check(unsafe { sys::rmlp_context_set_plan(self.raw.as_ptr(), &raw) })
    }

    /// The `cudaStream_t` every later call enqueues on (`rmlp_context_set_stream`; NULL: the
    /// legacy default stream). Ignored on the CPU.
    ///
    /// # Safety
    /// `stream` must be NULL or a live stream of the model's device that outlives its use here
    /// (until another stream is set or the context is dropped).
    pub unsafe fn set_stream(&mut self, stream: *mut c_void) -> Result<(), Error> {
        // SAFETY: the caller vouches for the stream.
        Error::check(unsafe { sys::rmlp_context_set_stream(self.raw.as_ptr(), stream) })
    }

    /// The whole model on the device (`rmlp_forward`, built-in attention), after
    /// [`set_plan`](Self::set_plan) with the same plan: enqueues on the context's stream and
    /// returns without synchronising.
    ///
    /// # Safety
    /// `out` must be device memory of the model's device with room for n_tokens x hidden_size
    /// values of the model's dtype, not used by anything else until the stream has run the forward.
    pub unsafe fn forward_device<P: AsPlan + ?Sized>(&mut self, plan: &P, out: *mut c_void) -> Result<(), Error> {
        let raw = self.plan("radix_mlp::Context::forward_device", plan)?;
        // SAFETY: `raw` points into `plan`; the caller vouches for `out`.
        Error::check(unsafe { sys::rmlp_forward(self.raw.as_ptr(), &raw, None, core::ptr::null_mut(), out) })
    }

    /// [`forward_compact`](Self::forward_compact) on the device (`rmlp_forward_compact`), after
    /// [`set_plan`](Self::set_plan) with the same plan: enqueues and returns, like
    /// [`forward_device`](Self::forward_device).
    ///
    /// # Safety
    /// `out` must be device memory of the model's device with room for n_compact_padded x
    /// hidden_size values of the model's dtype, not used by anything else until the stream has
    /// run the forward.
    pub unsafe fn forward_compact_device<P: AsPlan + ?Sized>(
        &mut self,
        plan: &P,
        out: *mut c_void,
    ) -> Result<(), Error> {
        let raw = self.plan("radix_mlp::Context::forward_compact_device", plan)?;
        // SAFETY: `raw` points into `plan`; the caller vouches for `out`.
        Error::check(unsafe { sys::rmlp_forward_compact(self.raw.as_ptr(), &raw, None, core::ptr::null_mut(), out) })
    }

    /// Pools `hidden` (the model's memory: device memory in its dtype on CUDA) per sequence
    /// (`rmlp_context_pool`), into host f32; on CUDA it synchronises the context's stream.
    ///
    /// # Safety
    /// `hidden` must hold `cu_seqlens[last]` rows of hidden_size values in the model's memory
    /// and dtype (host f32 on the CPU).
    pub unsafe fn pool_device(
        &mut self,
        hidden: *const c_void,
        cu_seqlens: &[u32],
        pooling: Pooling,
        normalize: bool,
    ) -> Result<Vec<f32>, Error> {
        let h = self.model.config.hidden_size;
        let n_tokens = cu_seqlens.last().map_or(0, |&n| n as usize);
        let n_seqs = cu_seqlens.len().saturating_sub(1);
        let mut out = vec![0.0f32; n_seqs * h];
        // SAFETY: `out` has n_seqs rows of hidden_size floats; the caller vouches for `hidden`.
        Error::check(unsafe {
            sys::rmlp_context_pool(
                self.raw.as_ptr(),
                hidden,
                n_tokens,
                cu_seqlens.as_ptr(),
                n_seqs,
                pooling.raw(),
                normalize,
                out.as_mut_ptr(),
            )
        })?;
        Ok(out)
    }

    /// [`score_pair`](Self::score_pair) on `hidden` in the model's memory (device memory in its
    /// dtype on CUDA); on CUDA it synchronises the context's stream.
    ///
    /// # Safety
    /// As [`pool_device`](Self::pool_device).
    pub unsafe fn score_pair_device(
        &mut self,
        hidden: *const c_void,
        cu_seqlens: &[u32],
        token_a: u32,
        token_b: u32,
    ) -> Result<Vec<PairScore>, Error> {
        let n_tokens = cu_seqlens.last().map_or(0, |&n| n as usize);
        let n_seqs = cu_seqlens.len().saturating_sub(1);
        let (mut logits, mut prob_a) = (vec![0.0f32; 2 * n_seqs], vec![0.0f32; n_seqs]);
        // SAFETY: the output vectors have 2 * n_seqs and n_seqs floats; the caller vouches for `hidden`.
        Error::check(unsafe {
            sys::rmlp_score_pair(
                self.raw.as_ptr(),
                hidden,
                n_tokens,
                cu_seqlens.as_ptr(),
                n_seqs,
                token_a,
                token_b,
                logits.as_mut_ptr(),
                prob_a.as_mut_ptr(),
            )
        })?;
        Ok(pair_scores(&logits, &prob_a))
    }

    /// [`pool_compact`](Self::pool_compact) of `hidden` in the model's memory (device memory in
    /// its dtype on CUDA, after [`set_plan`](Self::set_plan) with the same plan), into host f32;
    /// on CUDA it synchronises the context's stream.
    ///
    /// # Safety
    /// `hidden` must hold the plan's n_compact_padded rows of hidden_size values in the model's
    /// memory and dtype (host f32 on the CPU).
    pub unsafe fn pool_compact_device<P: AsPlan + ?Sized>(
        &mut self,
        plan: &P,
        hidden: *const c_void,
        pooling: Pooling,
        normalize: bool,
    ) -> Result<Vec<f32>, Error> {
        let raw = plan.as_raw()?;
        let mut out = vec![0.0f32; raw.n_seqs as usize * self.model.config.hidden_size];
        // SAFETY: `raw` points into `plan`; `out` has n_seqs rows of hidden_size floats; the
        // caller vouches for `hidden`.
        Error::check(unsafe {
            sys::rmlp_context_pool_compact(self.raw.as_ptr(), &raw, hidden, pooling.raw(), normalize, out.as_mut_ptr())
        })?;
        Ok(out)
    }

    /// [`score_pair_compact`](Self::score_pair_compact) on `hidden` in the model's memory (device
    /// memory in its dtype on CUDA); on CUDA it synchronises the context's stream.
    ///
    /// # Safety
    /// As [`pool_compact_device`](Self::pool_compact_device).
    pub unsafe fn score_pair_compact_device<P: AsPlan + ?Sized>(
        &mut self,
        plan: &P,
        hidden: *const c_void,
        token_a: u32,
        token_b: u32,
    ) -> Result<Vec<PairScore>, Error> {
        let raw = plan.as_raw()?;
        let n_seqs = raw.n_seqs as usize;
        let (mut logits, mut prob_a) = (vec![0.0f32; 2 * n_seqs], vec![0.0f32; n_seqs]);
        // SAFETY: `raw` points into `plan`; the output vectors have 2 * n_seqs and n_seqs floats;
        // the caller vouches for `hidden`.
        Error::check(unsafe {
            sys::rmlp_score_pair_compact(
                self.raw.as_ptr(),
                &raw,
                hidden,
                token_a,
                token_b,
                logits.as_mut_ptr(),
                prob_a.as_mut_ptr(),
            )
        })?;
        Ok(pair_scores(&logits, &prob_a))
    }

    /// The context's handle and its model's configuration, for the crate's other modules
    /// (generate.rs).
    pub(crate) fn raw_ptr(&self) -> *mut sys::rmlp_context {
        self.raw.as_ptr()
    }

    pub(crate) fn model_config(&self) -> &ModelConfig {
        &self.model.config
    }

    /// The C plan, with the one check the library leaves out: padding rows' token ids, which
    /// `rmlp_embed` and `rmlp_forward` read without checking them against vocab_size.
    pub(crate) fn plan<P: AsPlan + ?Sized>(&self, fn_name: &str, plan: &P) -> Result<sys::rmlp_plan, Error> {
        let raw = plan.as_raw()?;
        let vocab = self.model.config.vocab_size;
        if raw.n_compact <= raw.n_compact_padded && raw.n_compact_padded > 0 {
            // SAFETY: as_raw checked that compact_input_ids has n_compact_padded entries.
            let ids = unsafe { core::slice::from_raw_parts(raw.compact_input_ids, raw.n_compact_padded as usize) };
            if let Some(j) = (raw.n_compact as usize..ids.len()).find(|&j| ids[j] as usize >= vocab) {
                return Err(Error::new(
                    Status::InvalidArgument,
                    format!("{fn_name}: padding row {j} has compact_input_ids[{j}]={} >= vocab_size={vocab}", ids[j]),
                ));
            }
        }
        Ok(raw)
    }

    /// The whole model on one batch with the built-in attention (`rmlp_forward`, in the
    /// context's [`attention_space`](Self::attention_space)): `out` (at least n_tokens x
    /// hidden_size) receives the last hidden states of every batch row.
    pub fn forward<P: AsPlan + ?Sized>(&mut self, plan: &P, out: &mut [f32]) -> Result<(), Error> {
        self.run_forward("radix_mlp::Context::forward", plan, out, None, false)
    }

    /// [`forward`](Self::forward) with the host's attention, called once per layer in the layout
    /// of the context's [`attention_space`](Self::attention_space) (see [`AttentionArgs`]). An
    /// error it returns, or a panic (caught: status `Internal`), stops the forward; the result
    /// carries the library's message (which layer) followed by the host's. A context with a
    /// prefix cache ([`ContextParams::cache_bytes`]) refuses it (`Status::Unsupported`).
    pub fn forward_with_attention<P: AsPlan + ?Sized>(
        &mut self,
        plan: &P,
        out: &mut [f32],
        attention: &mut dyn FnMut(&mut AttentionArgs<'_>) -> Result<(), Error>,
    ) -> Result<(), Error> {
        self.run_forward("radix_mlp::Context::forward_with_attention", plan, out, Some(attention), false)
    }

    /// The whole model on one batch in compact space, embedding to final norm on the compact
    /// rows, with the built-in attention (`rmlp_forward_compact`, whatever the context's
    /// setting): `out` (at least n_compact_padded x hidden_size) receives the final-normed compact
    /// rows; batch row `i`'s state is row `scatter[i]`. Read them out with
    /// [`pool_compact`](Self::pool_compact) or [`score_pair_compact`](Self::score_pair_compact).
    pub fn forward_compact<P: AsPlan + ?Sized>(&mut self, plan: &P, out: &mut [f32]) -> Result<(), Error> {
        self.run_forward("radix_mlp::Context::forward_compact", plan, out, None, true)
    }

    /// [`forward_compact`](Self::forward_compact) with the host's attention, which gets the
    /// compact layout ([`AttentionArgs::compact`]); errors and panics as in
    /// [`forward_with_attention`](Self::forward_with_attention).
    pub fn forward_compact_with_attention<P: AsPlan + ?Sized>(
        &mut self,
        plan: &P,
        out: &mut [f32],
        attention: &mut dyn FnMut(&mut AttentionArgs<'_>) -> Result<(), Error>,
    ) -> Result<(), Error> {
        self.run_forward("radix_mlp::Context::forward_compact_with_attention", plan, out, Some(attention), true)
    }

    /// `rmlp_forward` (`out` batch rows) or `rmlp_forward_compact` (compact rows), with the host's
    /// attention or the built-in one.
    fn run_forward<P: AsPlan + ?Sized>(
        &mut self,
        fn_name: &str,
        plan: &P,
        out: &mut [f32],
        attention: Option<HostAttention<'_>>,
        compact: bool,
    ) -> Result<(), Error> {
        self.host_memory(fn_name)?;
        let raw = self.plan(fn_name, plan)?;
        let rows = if compact { raw.n_compact_padded } else { raw.n_tokens };
        check_len(fn_name, "out", out.len(), rows as usize, self.model.config.hidden_size)?;
        let call = if compact { sys::rmlp_forward_compact } else { sys::rmlp_forward };
        let Some(attention) = attention else {
            // SAFETY: `raw` points into `plan`, borrowed for the call; `out` is long enough.
            return Error::check(unsafe {
                call(self.raw.as_ptr(), &raw, None, core::ptr::null_mut(), out.as_mut_ptr().cast())
            });
        };
        let mut state = Callback { attention, error: None };
        // SAFETY: as above; `state` outlives the call and only the trampoline uses it.
        let code = unsafe {
            call(
                self.raw.as_ptr(),
                &raw,
                Some(trampoline),
                (&mut state as *mut Callback<'_>).cast(),
                out.as_mut_ptr().cast(),
            )
        };
        Error::check(code).map_err(|lib| match state.error.take() {
            Some(host) => Error::new(host.status, format!("{}: {}", lib.message, host.message)),
            None => lib,
        })
    }

    /// Embeds the plan's compact ids (`rmlp_embed`): `hidden` (at least n_compact_padded x
    /// hidden_size). Checks every id against vocab_size and position against max_position_embeddings.
    pub fn embed<P: AsPlan + ?Sized>(&mut self, plan: &P, hidden: &mut [f32]) -> Result<(), Error> {
        const FN: &str = "radix_mlp::Context::embed";
        self.host_memory(FN)?;
        let raw = self.plan(FN, plan)?;
        check_len(FN, "hidden", hidden.len(), raw.n_compact_padded as usize, self.model.config.hidden_size)?;
        // SAFETY: `raw` points into `plan`, borrowed for the call; `hidden` is long enough.
        Error::check(unsafe { sys::rmlp_embed(self.raw.as_ptr(), &raw, hidden.as_mut_ptr().cast()) })
    }

    /// First half of `layer` (`rmlp_layer_pre_attention`): reads `hidden` (n_compact_padded x
    /// hidden_size), writes `q` (n_tokens x q_dim), `k` and `v` (n_tokens x kv_dim) in batch rows.
    pub fn pre_attention<P: AsPlan + ?Sized>(
        &mut self,
        layer: usize,
        plan: &P,
        hidden: &[f32],
        q: &mut [f32],
        k: &mut [f32],
        v: &mut [f32],
    ) -> Result<(), Error> {
        self.layer_pre_attention("radix_mlp::Context::pre_attention", layer, plan, hidden, [q, k, v], false)
    }

    /// First half of `layer` in compact space (`rmlp_layer_pre_attention_compact`), no scatter:
    /// reads `hidden` (n_compact_padded x hidden_size), writes `q` (n_compact_padded x q_dim), `k`
    /// and `v` (n_compact_padded x kv_dim) for every compact row: the input of
    /// [`attention_compact`](Self::attention_compact) or of the host's own compact attention.
    pub fn pre_attention_compact<P: AsPlan + ?Sized>(
        &mut self,
        layer: usize,
        plan: &P,
        hidden: &[f32],
        q: &mut [f32],
        k: &mut [f32],
        v: &mut [f32],
    ) -> Result<(), Error> {
        self.layer_pre_attention("radix_mlp::Context::pre_attention_compact", layer, plan, hidden, [q, k, v], true)
    }

    fn layer_pre_attention<P: AsPlan + ?Sized>(
        &mut self,
        fn_name: &str,
        layer: usize,
        plan: &P,
        hidden: &[f32],
        [q, k, v]: [&mut [f32]; 3],
        compact: bool,
    ) -> Result<(), Error> {
        self.host_memory(fn_name)?;
        let raw = self.plan(fn_name, plan)?;
        let c = &self.model.config;
        let rows = if compact { raw.n_compact_padded } else { raw.n_tokens } as usize;
        check_len(fn_name, "hidden", hidden.len(), raw.n_compact_padded as usize, c.hidden_size)?;
        check_len(fn_name, "q", q.len(), rows, c.q_dim())?;
        check_len(fn_name, "k", k.len(), rows, c.kv_dim())?;
        check_len(fn_name, "v", v.len(), rows, c.kv_dim())?;
        let layer = to_u32(fn_name, "layer", layer)?;
        let call = if compact { sys::rmlp_layer_pre_attention_compact } else { sys::rmlp_layer_pre_attention };
        // SAFETY: `raw` points into `plan`; every buffer is long enough and they are distinct.
        Error::check(unsafe {
            call(
                self.raw.as_ptr(),
                layer,
                &raw,
                hidden.as_ptr().cast(),
                q.as_mut_ptr().cast(),
                k.as_mut_ptr().cast(),
                v.as_mut_ptr().cast(),
            )
        })
    }

    /// Second half of `layer` (`rmlp_layer_post_attention`): gathers `attn` (n_tokens x q_dim)
    /// to compact rows, O projection, residual, norm, MLP, residual; `hidden` is updated in place.
    pub fn post_attention<P: AsPlan + ?Sized>(
        &mut self,
        layer: usize,
        plan: &P,
        attn: &[f32],
        hidden: &mut [f32],
    ) -> Result<(), Error> {
        self.layer_post_attention("radix_mlp::Context::post_attention", layer, plan, attn, hidden, false)
    }

    /// Second half of `layer` in compact space (`rmlp_layer_post_attention_compact`), no gather:
    /// `attn` (n_compact_padded x q_dim) is the compact attention output; `hidden` is updated in
    /// place.
    pub fn post_attention_compact<P: AsPlan + ?Sized>(
        &mut self,
        layer: usize,
        plan: &P,
        attn: &[f32],
        hidden: &mut [f32],
    ) -> Result<(), Error> {
        self.layer_post_attention("radix_mlp::Context::post_attention_compact", layer, plan, attn, hidden, true)
    }

    fn layer_post_attention<P: AsPlan + ?Sized>(
        &mut self,
        fn_name: &str,
        layer: usize,
        plan: &P,
        attn: &[f32],
        hidden: &mut [f32],
        compact: bool,
    ) -> Result<(), Error> {
        self.host_memory(fn_name)?;
        let raw = self.plan(fn_name, plan)?;
        let c = &self.model.config;
        let rows = if compact { raw.n_compact_padded } else { raw.n_tokens } as usize;
        check_len(fn_name, "attn", attn.len(), rows, c.q_dim())?;
        check_len(fn_name, "hidden", hidden.len(), raw.n_compact_padded as usize, c.hidden_size)?;
        let layer = to_u32(fn_name, "layer", layer)?;
        let call = if compact { sys::rmlp_layer_post_attention_compact } else { sys::rmlp_layer_post_attention };
        // SAFETY: `raw` points into `plan`; both buffers are long enough and distinct.
        Error::check(unsafe { call(self.raw.as_ptr(), layer, &raw, attn.as_ptr().cast(), hidden.as_mut_ptr().cast()) })
    }

    /// The final RMSNorm of `hidden` (n_compact_padded x hidden_size) scattered to the batch
    /// rows (`rmlp_final_norm`): `out` (n_tokens x hidden_size).
    pub fn final_norm<P: AsPlan + ?Sized>(&mut self, plan: &P, hidden: &[f32], out: &mut [f32]) -> Result<(), Error> {
        self.run_final_norm("radix_mlp::Context::final_norm", plan, hidden, out, false)
    }

    /// The final RMSNorm of `hidden` (n_compact_padded x hidden_size) in compact rows
    /// (`rmlp_final_norm_compact`, no scatter): `out` (n_compact_padded x hidden_size), as
    /// [`forward_compact`](Self::forward_compact) gives it.
    pub fn final_norm_compact<P: AsPlan + ?Sized>(
        &mut self,
        plan: &P,
        hidden: &[f32],
        out: &mut [f32],
    ) -> Result<(), Error> {
        self.run_final_norm("radix_mlp::Context::final_norm_compact", plan, hidden, out, true)
    }

    fn run_final_norm<P: AsPlan + ?Sized>(
        &mut self,
        fn_name: &str,
        plan: &P,
        hidden: &[f32],
        out: &mut [f32],
        compact: bool,
    ) -> Result<(), Error> {
        self.host_memory(fn_name)?;
        let raw = self.plan(fn_name, plan)?;
        let h = self.model.config.hidden_size;
        check_len(fn_name, "hidden", hidden.len(), raw.n_compact_padded as usize, h)?;
        let rows = if compact { raw.n_compact_padded } else { raw.n_tokens } as usize;
        check_len(fn_name, "out", out.len(), rows, h)?;
        let call = if compact { sys::rmlp_final_norm_compact } else { sys::rmlp_final_norm };
        // SAFETY: `raw` points into `plan`; both buffers are long enough and distinct.
        Error::check(unsafe { call(self.raw.as_ptr(), &raw, hidden.as_ptr().cast(), out.as_mut_ptr().cast()) })
    }

    /// The built-in causal varlen attention with grouped KV heads (`rmlp_attention`), for a host
    /// that calls the per-layer entry points but has no attention of its own. Full layout
    /// (`args.compact` is `None`).
    pub fn attention(&mut self, args: &mut AttentionArgs<'_>) -> Result<(), Error> {
        self.run_attention("radix_mlp::Context::attention", args, false)
    }

    /// The built-in attention in compact space (`rmlp_attention_compact`): `args.compact` holds
    /// the layout (the plan's `qo_indptr` and `scatter`), `q`, `k`, `v` and `out` the compact
    /// rows (as [`pre_attention_compact`](Self::pre_attention_compact) writes them and
    /// [`post_attention_compact`](Self::post_attention_compact) reads them).
    pub fn attention_compact(&mut self, args: &mut AttentionArgs<'_>) -> Result<(), Error> {
        self.run_attention("radix_mlp::Context::attention_compact", args, true)
    }

    fn run_attention(&mut self, fn_name: &str, args: &mut AttentionArgs<'_>, compact: bool) -> Result<(), Error> {
        self.host_memory(fn_name)?;
        let layout = match (&args.compact, compact) {
            (None, false) => None,
            (Some(layout), true) => Some(layout),
            (given, _) => {
                let (is, takes) = if given.is_some() { ("Some", "attention_compact") } else { ("None", "attention") };
                return Err(Error::new(
                    Status::InvalidArgument,
                    format!(
                        "{fn_name}: args.compact is {is}: the layout of this call is radix_mlp::Context::{takes}'s"
                    ),
                ));
            }
        };
        let (n, n_seqs, rows) = (args.n_tokens(), args.n_seqs(), args.n_rows());
        let (qd, kvd) = (args.n_heads.saturating_mul(args.head_dim), args.n_kv_heads.saturating_mul(args.head_dim));
        check_len(fn_name, "q", args.q.len(), rows, qd)?;
        check_len(fn_name, "k", args.k.len(), rows, kvd)?;
        check_len(fn_name, "v", args.v.len(), rows, kvd)?;
        check_len(fn_name, "out", args.out.len(), rows, qd)?;
        let null = core::ptr::null::<u32>();
        let (qo_indptr, kv_indptr, kv_indices) = match layout {
            None => (null, null, null),
            Some(layout) => {
                for (name, len, want) in
                    [("qo_indptr", layout.qo_indptr.len(), n_seqs + 1), ("kv_indices", layout.kv_indices.len(), n)]
                {
                    if len != want {
                        return Err(Error::new(
                            Status::InvalidArgument,
                            format!("{fn_name}: args.compact.{name} has {len} entries, needs {want}"),
                        ));
                    }
                }
                (layout.qo_indptr.as_ptr(), args.cu_seqlens.as_ptr(), layout.kv_indices.as_ptr())
            }
        };
        let raw = sys::rmlp_attention_args {
            layer: to_u32(fn_name, "layer", args.layer)?,
            n_tokens: to_u32(fn_name, "n_tokens", n)?,
            n_seqs: to_u32(fn_name, "n_seqs", n_seqs)?,
            n_heads: to_u32(fn_name, "n_heads", args.n_heads)?,
            n_kv_heads: to_u32(fn_name, "n_kv_heads", args.n_kv_heads)?,
            head_dim: to_u32(fn_name, "head_dim", args.head_dim)?,
            scale: args.scale,
            dtype: sys::RMLP_DTYPE_F32,
            cu_seqlens: args.cu_seqlens.as_ptr(),
            q: args.q.as_ptr().cast(),
            k: args.k.as_ptr().cast(),
            v: args.v.as_ptr().cast(),
            out: args.out.as_mut_ptr().cast(),
            stream: core::ptr::null_mut(),
            cu_seqlens_device: args.cu_seqlens.as_ptr(),
            max_seqlen: 0,
            layout: if compact { sys::RMLP_ATTENTION_COMPACT } else { sys::RMLP_ATTENTION_FULL },
            n_compact: if compact { to_u32(fn_name, "n_compact", rows)? } else { 0 },
            qo_indptr,
            kv_indptr,
            kv_indices,
            qo_indptr_device: qo_indptr,
            kv_indptr_device: kv_indptr,
            kv_indices_device: kv_indices,
        };
        // SAFETY: the buffers hold `rows` rows of their widths (n_tokens = cu_seqlens[n_seqs] in
        // full space, n_compact = qo_indptr[n_seqs] in compact space; the library checks that
        // both are non-decreasing and every kv_indices entry is below n_compact, so nothing
        // reaches further); qo_indptr has n_seqs + 1 entries and kv_indices n_tokens.
        Error::check(unsafe {
            if compact {
                sys::rmlp_attention_compact(self.raw.as_ptr(), &raw)
            } else {
                sys::rmlp_attention(self.raw.as_ptr(), &raw)
            }
        })
    }

    /// Reranker scores (`rmlp_score_pair`, Qwen3-Reranker's yes/no): the LM-head logits of
    /// `token_a` and `token_b` at each sequence's last row of `hidden` (at least n_tokens x
    /// hidden_size, the output of [`forward`](Self::forward) or [`final_norm`](Self::final_norm)).
    pub fn score_pair(
        &mut self,
        hidden: &[f32],
        cu_seqlens: &[u32],
        token_a: u32,
        token_b: u32,
    ) -> Result<Vec<PairScore>, Error> {
        const FN: &str = "radix_mlp::Context::score_pair";
        self.host_memory(FN)?;
        let n_tokens = cu_seqlens.last().map_or(0, |&n| n as usize);
        check_len(FN, "hidden", hidden.len(), n_tokens, self.model.config.hidden_size)?;
        // SAFETY: host memory (checked above) holding n_tokens rows of hidden_size f32.
        unsafe { self.score_pair_device(hidden.as_ptr().cast(), cu_seqlens, token_a, token_b) }
    }

    /// Pools compact rows per sequence (`rmlp_context_pool_compact`): `hidden` (at least
    /// n_compact_padded x hidden_size, the output of [`forward_compact`](Self::forward_compact) or
    /// [`final_norm_compact`](Self::final_norm_compact)) is read per batch row through the plan's
    /// `scatter`, so the result equals [`Model::pool`] of the full output: n_seqs x hidden_size.
    pub fn pool_compact<P: AsPlan + ?Sized>(
        &mut self,
        plan: &P,
        hidden: &[f32],
        pooling: Pooling,
        normalize: bool,
    ) -> Result<Vec<f32>, Error> {
        const FN: &str = "radix_mlp::Context::pool_compact";
        self.compact_rows(FN, plan, hidden)?;
        // SAFETY: host memory (checked above) holding the plan's n_compact_padded rows.
        unsafe { self.pool_compact_device(plan, hidden.as_ptr().cast(), pooling, normalize) }
    }

    /// Reranker scores at each sequence's last row of compact rows (`rmlp_score_pair_compact`):
    /// [`score_pair`](Self::score_pair) of `hidden` (at least n_compact_padded x hidden_size) read
    /// through the plan's `scatter`.
    pub fn score_pair_compact<P: AsPlan + ?Sized>(
        &mut self,
        plan: &P,
        hidden: &[f32],
        token_a: u32,
        token_b: u32,
    ) -> Result<Vec<PairScore>, Error> {
        const FN: &str = "radix_mlp::Context::score_pair_compact";
        self.compact_rows(FN, plan, hidden)?;
        // SAFETY: host memory (checked above) holding the plan's n_compact_padded rows.
        unsafe { self.score_pair_compact_device(plan, hidden.as_ptr().cast(), token_a, token_b) }
    }

    /// Err unless the model is in host memory and `hidden` holds the plan's compact rows.
    fn compact_rows<P: AsPlan + ?Sized>(&self, fn_name: &str, plan: &P, hidden: &[f32]) -> Result<(), Error> {
        self.host_memory(fn_name)?;
        let rows = plan.as_raw()?.n_compact_padded as usize;
        check_len(fn_name, "hidden", hidden.len(), rows, self.model.config.hidden_size)
    }
}

impl<M: ModelHolder> Drop for Context<'_, M> {
    fn drop(&mut self) {
        // SAFETY: `self.raw` came from rmlp_context_create and is freed once, before its model.
        unsafe { sys::rmlp_context_free(self.raw.as_ptr()) }
    }
}

impl<M: ModelHolder> fmt::Debug for Context<'_, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Context").field(&self.raw).finish()
    }
}
