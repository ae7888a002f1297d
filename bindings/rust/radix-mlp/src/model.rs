//! Models: a loaded checkpoint ([`Model`], shared by any number of threads), with the contexts
//! that run batches through it ([`Model::context`], context.rs) and pooling ([`Model::pool`]).
//! Buffer lengths are checked here (the C side cannot see them); the library checks the rest, and
//! its message comes back in the [`Error`].
//!
//! On a CUDA device ([`Model::load_with`] with [`Device::Cuda`], or [`Model::bind_cuda`] over
//! the host's own device tensors) activations are device memory in the model's dtype: the same
//! [`Context`] calls take [`DeviceSlice`] / [`DeviceSliceMut`] (made `unsafe` from a device pointer
//! and a length) where a CPU model takes host slices, after [`Context::set_plan`], and refuse a
//! host slice by name (buffer.rs).
use core::mem::MaybeUninit;
use core::ptr::NonNull;
use std::ffi::{CStr, CString};
use std::fmt;
use std::path::Path;

use radix_mlp_sys as sys;

use crate::error::{Error, Status};
use crate::types::{
    CpuBf16Gemm, CpuBf16GemmInfo, DType, Device, ModelConfig, ModelParams, PairScore, Pooling, WeightBinding,
};
use crate::LayerAttention;
#[cfg(doc)] // the documentation links to them
use crate::{Context, DeviceSlice, DeviceSliceMut};

/// A loaded model (`rmlp_model`), on the CPU in f32 or on a CUDA device. Read-only after load,
/// so it is `Send` and `Sync`: threads share one and each runs batches through its own [`Context`].
pub struct Model {
    pub(crate) raw: NonNull<sys::rmlp_model>,
    pub(crate) config: ModelConfig,
    pub(crate) params: ModelParams,
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
    /// `dtype` (`rmlp_model_bind_cuda`): no copy is made. `config` cannot carry RoPE scaling,
    /// per-layer windows or Gemma 3's local RoPE base: such checkpoints bind with
    /// [`bind_cuda_config`](Self::bind_cuda_config).
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
        let raw_config = sys::rmlp_model_config::from(config);
        // SAFETY: the caller's contract is this function's; `raw_config` outlives the call.
        unsafe {
            Model::bind_with("radix_mlp::Model::bind_cuda", tensors, device_index, dtype, |t, n, p, out| {
                sys::rmlp_model_bind_cuda(&raw_config, t, n, p, out)
            })
        }
    }

    /// [`bind_cuda`](Self::bind_cuda) with the model described by the checkpoint's config.json
    /// (`rmlp_model_bind_cuda_config`): `config_path` is the file or the folder holding it, read
    /// as [`load`](Self::load) reads it, so the bound model computes what the loaded one does
    /// (RoPE scaling, per-layer windows and RoPE bases included). Its findings are in
    /// [`load_report`](Self::load_report).
    ///
    /// # Safety
    /// As for [`bind_cuda`](Self::bind_cuda).
    pub unsafe fn bind_cuda_config(
        config_path: impl AsRef<Path>,
        tensors: &[WeightBinding<'_>],
        device_index: i32,
        dtype: DType,
    ) -> Result<Model, Error> {
        const FN: &str = "radix_mlp::Model::bind_cuda_config";
        let path = config_path.as_ref();
        let c_path = path_cstring(path)
            .ok_or_else(|| Error::new(Status::InvalidArgument, format!("{FN}: {path:?} is not a valid C path")))?;
        // SAFETY: the caller's contract is this function's; `c_path` is NUL-terminated and outlives the call.
        unsafe {
            Model::bind_with(FN, tensors, device_index, dtype, |t, n, p, out| {
                sys::rmlp_model_bind_cuda_config(c_path.as_ptr(), t, n, p, out)
            })
        }
    }

    /// Both binds: the tensors as the ABI takes them, then `bind` (one of the two C entry points).
    ///
    /// # Safety
    /// As for [`bind_cuda`](Self::bind_cuda).
    unsafe fn bind_with(
        fn_name: &str,
        tensors: &[WeightBinding<'_>],
        device_index: i32,
        dtype: DType,
        bind: impl FnOnce(
            *const sys::rmlp_weight_binding,
            usize,
            *const sys::rmlp_model_params,
            *mut *mut sys::rmlp_model,
        ) -> sys::rmlp_status,
    ) -> Result<Model, Error> {
        let mut names = Vec::with_capacity(tensors.len());
        let mut raw_tensors = Vec::with_capacity(tensors.len());
        for t in tensors {
            let name = CString::new(t.name).map_err(|_| {
                Error::new(Status::InvalidArgument, format!("{fn_name}: name {:?} has a NUL byte", t.name))
            })?;
            if t.shape.is_empty() || t.shape.len() > 2 {
                return Err(Error::new(
                    Status::InvalidArgument,
                    format!("{fn_name}: '{}' has {} dims", t.name, t.shape.len()),
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
        let params = ModelParams { device: Device::Cuda(device_index), dtype, ..ModelParams::default() };
        let raw_params = params.raw();
        let mut raw = core::ptr::null_mut();
        // tensors (with their names) and params outlive the call; the caller vouches for the
        // device pointers.
        Error::check(bind(raw_tensors.as_ptr(), raw_tensors.len(), &raw_params, &mut raw))?;
        drop(names);
        let raw = NonNull::new(raw)
            .ok_or_else(|| Error::new(Status::Internal, format!("{fn_name}: the bind returned OK and NULL")))?;
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

    /// Layer `layer`'s attention (`rmlp_model_layer_attention`): its scale, sliding window and
    /// soft-cap, which the [`AttentionArgs`](crate::AttentionArgs) of a host's own attention
    /// carry. Fails for a layer past the model's.
    pub fn layer_attention(&self, layer: usize) -> Result<LayerAttention, Error> {
        let index = u32::try_from(layer).unwrap_or(u32::MAX);
        let mut raw = sys::rmlp_layer_attention::default();
        // SAFETY: `self.raw` is a live model and `raw` an out struct.
        Error::check(unsafe { sys::rmlp_model_layer_attention(self.raw.as_ptr(), index, &mut raw) })?;
        Ok(LayerAttention { scale: raw.scale, sliding_window: raw.sliding_window as usize, softcap: raw.softcap })
    }

    /// What the load found and accepted, as transformers warns of it (`rmlp_model_load_report`):
    /// tensors of the checkpoint the model does not use, config.json keys transformers does not read
    /// for the architecture, custom model code named by `auto_map`; one line per finding. Empty when
    /// there is nothing to say, and for bound models.
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

    /// Which GEMM the layers run on bf16 matrices (`rmlp_model_cpu_bf16_gemm`): for a model loaded
    /// with [`ModelParams::cpu_weight_dtype`] BF16 on the CPU, the one [`ModelParams::cpu_bf16_gemm`]
    /// (or `RADIX_MLP_CPU_BF16_GEMM`) chose, with oneDNN's run-time fallbacks so far and the
    /// library's account of it; `kind` is `None` for any other model.
    pub fn cpu_bf16_gemm(&self) -> Result<CpuBf16GemmInfo, Error> {
        let (mut kind, mut fallbacks, mut detail) = (sys::RMLP_CPU_BF16_GEMM_NONE, 0, core::ptr::null());
        // SAFETY: `self.raw` is a live model; `kind`, `fallbacks` and `detail` are out pointers.
        Error::check(unsafe {
            sys::rmlp_model_cpu_bf16_gemm(self.raw.as_ptr(), &mut kind, &mut fallbacks, &mut detail)
        })?;
        let detail = if detail.is_null() {
            String::new()
        } else {
            // SAFETY: a NUL-terminated text the model owns until it is freed, which `&self` outlives.
            unsafe { CStr::from_ptr(detail) }.to_string_lossy().into_owned()
        };
        // NONE (and a code this crate does not know) is no kind; AUTO is never an answer.
        let kind = CpuBf16Gemm::from_raw(kind).filter(|&k| k != CpuBf16Gemm::Auto);
        Ok(CpuBf16GemmInfo { kind, fallbacks, detail })
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
pub(crate) fn pair_scores(logits: &[f32], prob_a: &[f32]) -> Vec<PairScore> {
    prob_a
        .iter()
        .zip(logits.chunks_exact(2))
        .map(|(&prob_a, l)| PairScore { logit_a: l[0], logit_b: l[1], prob_a })
        .collect()
}

/// Err unless `len >= rows * width`.
pub(crate) fn check_len(fn_name: &str, name: &str, len: usize, rows: usize, width: usize) -> Result<(), Error> {
    if rows.checked_mul(width).is_some_and(|need| len >= need) {
        return Ok(());
    }
    Err(Error::new(Status::InvalidArgument, format!("{fn_name}: {name} has {len} floats, needs {rows} rows x {width}")))
}

pub(crate) fn to_u32(fn_name: &str, name: &str, value: usize) -> Result<u32, Error> {
    u32::try_from(value).map_err(|_| Error::new(Status::TooLarge, format!("{fn_name}: {name}={value} exceeds 2^32-1")))
}
