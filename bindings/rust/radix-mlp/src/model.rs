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
use core::mem::MaybeUninit;
use core::ptr::NonNull;
use std::any::Any;
use std::ffi::CString;
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use radix_mlp_sys as sys;

use crate::error::{Error, Status};
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
}

impl Default for ModelParams {
    fn default() -> ModelParams {
        ModelParams { device: Device::Cpu, dtype: DType::F32 }
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
        let params = ModelParams { device: Device::Cuda(device_index), dtype };
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

    /// A workspace for batches of up to `max_tokens` tokens (`rmlp_context_create`).
    pub fn context(&self, max_tokens: usize) -> Result<Context<'_>, Error> {
        let mut raw = core::ptr::null_mut();
        // SAFETY: `self.raw` is a live model that the returned context borrows; `raw` is an out pointer.
        Error::check(unsafe { sys::rmlp_context_create(self.raw.as_ptr(), max_tokens, &mut raw) })?;
        let raw = NonNull::new(raw)
            .ok_or_else(|| Error::new(Status::Internal, "rmlp_context_create returned OK and NULL".into()))?;
        Ok(Context { raw, model: self })
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

/// One layer's attention in f32, full space (batch rows): causal attention of every sequence
/// over its own rows, query head `h` reading KV head `h / (n_heads / n_kv_heads)`. The library
/// hands one to the callback of [`Context::forward_with_attention`]; a host fills one in to call
/// [`Context::attention`].
#[derive(Debug)]
pub struct AttentionArgs<'a> {
    pub layer: usize,
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
    /// Softmax scale, `1 / sqrt(head_dim)`.
    pub scale: f32,
    /// (n_seqs + 1) row offsets of the sequences.
    pub cu_seqlens: &'a [u32],
    /// (n_tokens, n_heads, head_dim) queries, RoPE applied.
    pub q: &'a [f32],
    /// (n_tokens, n_kv_heads, head_dim) keys, RoPE applied.
    pub k: &'a [f32],
    /// (n_tokens, n_kv_heads, head_dim) values.
    pub v: &'a [f32],
    /// (n_tokens, n_heads, head_dim) output.
    pub out: &'a mut [f32],
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

/// The callback's state: the host's function and the error it returned, kept in full because
/// `rmlp_forward` replaces the thread's message with its own.
struct Callback<'f> {
    attention: &'f mut dyn FnMut(&mut AttentionArgs<'_>) -> Result<(), Error>,
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
    Some(AttentionArgs {
        layer: a.layer as usize,
        n_heads: a.n_heads as usize,
        n_kv_heads: a.n_kv_heads as usize,
        head_dim: a.head_dim as usize,
        scale: a.scale,
        cu_seqlens: raw_slice(a.cu_seqlens.cast_mut(), n_seqs + 1)?,
        q: raw_slice(a.q.cast::<f32>().cast_mut(), n * qd)?,
        k: raw_slice(a.k.cast::<f32>().cast_mut(), n * kvd)?,
        v: raw_slice(a.v.cast::<f32>().cast_mut(), n * kvd)?,
        out: raw_slice(a.out.cast::<f32>(), n * qd)?,
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
            None => Err(Error::new(Status::Internal, format!("attention args of layer {}: NULL or not F32", a.layer))),
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
/// ```compile_fail
/// fn sync<T: Sync>() {}
/// sync::<radix_mlp::Context<'static>>();
/// ```
pub struct Context<'m> {
    raw: NonNull<sys::rmlp_context>,
    model: &'m Model,
}

// SAFETY: a context is heap memory with no thread affinity, used by one thread at a time
// (`&mut self` on every call, !Sync); the model it reads is Sync.
unsafe impl Send for Context<'_> {}

impl<'m> Context<'m> {
    /// The model this context runs.
    pub fn model(&self) -> &'m Model {
        self.model
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
        Ok((0..n_seqs)
            .map(|s| PairScore { logit_a: logits[2 * s], logit_b: logits[2 * s + 1], prob_a: prob_a[s] })
            .collect())
    }

    /// The C plan, with the one check the library leaves out: padding rows' token ids, which
    /// `rmlp_embed` and `rmlp_forward` read without checking them against vocab_size.
    fn plan<P: AsPlan + ?Sized>(&self, fn_name: &str, plan: &P) -> Result<sys::rmlp_plan, Error> {
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

    /// The whole model on one batch with the built-in attention (`rmlp_forward`): `out`
    /// (at least n_tokens x hidden_size) receives the last hidden states of every batch row.
    pub fn forward<P: AsPlan + ?Sized>(&mut self, plan: &P, out: &mut [f32]) -> Result<(), Error> {
        const FN: &str = "radix_mlp::Context::forward";
        self.host_memory(FN)?;
        let raw = self.plan(FN, plan)?;
        check_len(FN, "out", out.len(), raw.n_tokens as usize, self.model.config.hidden_size)?;
        // SAFETY: `raw` points into `plan`, borrowed for the call; `out` is long enough.
        Error::check(unsafe {
            sys::rmlp_forward(self.raw.as_ptr(), &raw, None, core::ptr::null_mut(), out.as_mut_ptr().cast())
        })
    }

    /// [`forward`](Self::forward) with the host's attention, called once per layer. An error it
    /// returns, or a panic (caught: status `Internal`), stops the forward; the result carries the
    /// library's message (which layer) followed by the host's.
    pub fn forward_with_attention<P: AsPlan + ?Sized>(
        &mut self,
        plan: &P,
        out: &mut [f32],
        attention: &mut dyn FnMut(&mut AttentionArgs<'_>) -> Result<(), Error>,
    ) -> Result<(), Error> {
        const FN: &str = "radix_mlp::Context::forward_with_attention";
        self.host_memory(FN)?;
        let raw = self.plan(FN, plan)?;
        check_len(FN, "out", out.len(), raw.n_tokens as usize, self.model.config.hidden_size)?;
        let mut state = Callback { attention, error: None };
        // SAFETY: as in `forward`; `state` outlives the call and only the trampoline uses it.
        let code = unsafe {
            sys::rmlp_forward(
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
        const FN: &str = "radix_mlp::Context::pre_attention";
        self.host_memory(FN)?;
        let raw = self.plan(FN, plan)?;
        let c = &self.model.config;
        let n = raw.n_tokens as usize;
        check_len(FN, "hidden", hidden.len(), raw.n_compact_padded as usize, c.hidden_size)?;
        check_len(FN, "q", q.len(), n, c.q_dim())?;
        check_len(FN, "k", k.len(), n, c.kv_dim())?;
        check_len(FN, "v", v.len(), n, c.kv_dim())?;
        let layer = to_u32(FN, "layer", layer)?;
        // SAFETY: `raw` points into `plan`; every buffer is long enough and they are distinct.
        Error::check(unsafe {
            sys::rmlp_layer_pre_attention(
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
        const FN: &str = "radix_mlp::Context::post_attention";
        self.host_memory(FN)?;
        let raw = self.plan(FN, plan)?;
        let c = &self.model.config;
        check_len(FN, "attn", attn.len(), raw.n_tokens as usize, c.q_dim())?;
        check_len(FN, "hidden", hidden.len(), raw.n_compact_padded as usize, c.hidden_size)?;
        let layer = to_u32(FN, "layer", layer)?;
        // SAFETY: `raw` points into `plan`; both buffers are long enough and distinct.
        Error::check(unsafe {
            sys::rmlp_layer_post_attention(
                self.raw.as_ptr(),
                layer,
                &raw,
                attn.as_ptr().cast(),
                hidden.as_mut_ptr().cast(),
            )
        })
    }

    /// The final RMSNorm of `hidden` (n_compact_padded x hidden_size) scattered to the batch
    /// rows (`rmlp_final_norm`): `out` (n_tokens x hidden_size).
    pub fn final_norm<P: AsPlan + ?Sized>(&mut self, plan: &P, hidden: &[f32], out: &mut [f32]) -> Result<(), Error> {
        const FN: &str = "radix_mlp::Context::final_norm";
        self.host_memory(FN)?;
        let raw = self.plan(FN, plan)?;
        let h = self.model.config.hidden_size;
        check_len(FN, "hidden", hidden.len(), raw.n_compact_padded as usize, h)?;
        check_len(FN, "out", out.len(), raw.n_tokens as usize, h)?;
        // SAFETY: `raw` points into `plan`; both buffers are long enough and distinct.
        Error::check(unsafe {
            sys::rmlp_final_norm(self.raw.as_ptr(), &raw, hidden.as_ptr().cast(), out.as_mut_ptr().cast())
        })
    }

    /// The built-in causal varlen attention with grouped KV heads (`rmlp_attention`), for a host
    /// that calls the per-layer entry points but has no attention of its own.
    pub fn attention(&mut self, args: &mut AttentionArgs<'_>) -> Result<(), Error> {
        const FN: &str = "radix_mlp::Context::attention";
        self.host_memory(FN)?;
        let (n, n_seqs) = (args.n_tokens(), args.n_seqs());
        let (qd, kvd) = (args.n_heads.saturating_mul(args.head_dim), args.n_kv_heads.saturating_mul(args.head_dim));
        check_len(FN, "q", args.q.len(), n, qd)?;
        check_len(FN, "k", args.k.len(), n, kvd)?;
        check_len(FN, "v", args.v.len(), n, kvd)?;
        check_len(FN, "out", args.out.len(), n, qd)?;
        let raw = sys::rmlp_attention_args {
            layer: to_u32(FN, "layer", args.layer)?,
            n_tokens: n as u32,
            n_seqs: to_u32(FN, "n_seqs", n_seqs)?,
            n_heads: to_u32(FN, "n_heads", args.n_heads)?,
            n_kv_heads: to_u32(FN, "n_kv_heads", args.n_kv_heads)?,
            head_dim: to_u32(FN, "head_dim", args.head_dim)?,
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
        };
        // SAFETY: the buffers hold n_tokens rows of their widths (n_tokens = cu_seqlens[n_seqs];
        // the library checks that cu_seqlens is non-decreasing, so no sequence reaches further).
        Error::check(unsafe { sys::rmlp_attention(self.raw.as_ptr(), &raw) })
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
}

impl Drop for Context<'_> {
    fn drop(&mut self) {
        // SAFETY: `self.raw` came from rmlp_context_create and is freed once, before its model.
        unsafe { sys::rmlp_context_free(self.raw.as_ptr()) }
    }
}

impl fmt::Debug for Context<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Context").field(&self.raw).finish()
    }
}
