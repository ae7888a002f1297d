//! The built-in attention of CUDA contexts: which kernel runs ([`GpuAttention`], a
//! [`ContextParams`](crate::ContextParams) setting) and what it ran ([`GpuStats`], from
//! [`Context::gpu_stats`]).
use core::ffi::CStr;

use radix_mlp_sys as sys;

use crate::context::{Context, ModelHolder};
use crate::error::Error;

/// Which kernel a CUDA context's built-in attention runs (`rmlp_gpu_attention`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum GpuAttention {
    /// FlashInfer's kernels where the build, the model's shape and the device have them, the
    /// reference kernel elsewhere (the default); `RADIX_MLP_GPU_ATTENTION=auto|flashinfer|reference`
    /// decides in its place when the context is made.
    #[default]
    Auto,
    /// FlashInfer's kernels, required: making the context is `Status::Unsupported` (saying why)
    /// where they cannot run. A batch they cannot take still runs on the reference kernel,
    /// counted in [`GpuStats`].
    FlashInfer,
    /// The library's reference kernel only.
    Reference,
}

impl GpuAttention {
    pub(crate) fn raw(self) -> sys::rmlp_gpu_attention {
        match self {
            GpuAttention::Auto => sys::RMLP_GPU_ATTENTION_AUTO,
            GpuAttention::FlashInfer => sys::RMLP_GPU_ATTENTION_FLASHINFER,
            GpuAttention::Reference => sys::RMLP_GPU_ATTENTION_REFERENCE,
        }
    }

    pub(crate) fn from_raw(raw: sys::rmlp_gpu_attention) -> Option<GpuAttention> {
        match raw {
            sys::RMLP_GPU_ATTENTION_AUTO => Some(GpuAttention::Auto),
            sys::RMLP_GPU_ATTENTION_FLASHINFER => Some(GpuAttention::FlashInfer),
            sys::RMLP_GPU_ATTENTION_REFERENCE => Some(GpuAttention::Reference),
            _ => None,
        }
    }
}

/// What a CUDA context's built-in attention ran since the context was made, and the run-time
/// choices it was made with (`rmlp_gpu_stats`; see its fields in `radix_mlp.h`). A CPU context's
/// are all zero (`cuda` false). Launches are counted when enqueued (a replayed CUDA graph adds none).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GpuStats {
    /// Whether the context runs on CUDA.
    pub cuda: bool,
    /// The kernel setting in effect (the parameter, or `RADIX_MLP_GPU_ATTENTION`).
    pub attention: GpuAttention,
    /// Whether FlashInfer's kernels serve the context.
    pub flashinfer: bool,
    /// The `RADIX_MLP_GPU_*` switches read at creation (each true by default).
    pub full_kv_paged: bool,
    pub flashinfer_sm90: bool,
    pub rope_table: bool,
    pub decode_flashinfer: bool,
    /// Launches by kernel and layout: full space (K/V scattered), full space reading K/V through
    /// the plan's scatter, compact space.
    pub flashinfer_full: u64,
    pub flashinfer_full_paged: u64,
    pub flashinfer_compact: u64,
    pub reference_full: u64,
    pub reference_full_paged: u64,
    pub reference_compact: u64,
    /// FlashInfer plans that failed (the batch ran on the reference kernel, with no error).
    pub plan_errors: u64,
    /// Reference launches where FlashInfer serves the context, by reason: a failed plan, a batch
    /// too small for the instantiated tiles, past FlashInfer's 32-bit offsets, not the plan set,
    /// buffers it cannot read, its launcher refusing.
    pub fallback_plan_error: u64,
    pub fallback_small_batch: u64,
    pub fallback_too_large: u64,
    pub fallback_unplanned: u64,
    pub fallback_buffers: u64,
    pub fallback_launcher: u64,
    /// The first plan error's message ("" for none).
    pub first_plan_error: String,
    /// Generation steps whose attention ran on FlashInfer's batch decode, and on the library's
    /// chain kernels.
    pub decode_steps_flashinfer: u64,
    pub decode_steps_chains: u64,
    /// Whether FlashInfer's Hopper prefill serves the context; the FlashInfer launches on it by
    /// layout; those of a paged layout that ran FA2 instead.
    pub sm90: bool,
    pub flashinfer_sm90_full_paged: u64,
    pub flashinfer_sm90_compact: u64,
    pub sm90_fallbacks: u64,
    /// Forwards whose output held an infinity or NaN (a CPU forward returns an error for these; a
    /// CUDA one is asynchronous, so it is counted on the device, replays of a graph too), and the
    /// latest one's first such element: its row of the output and its element in the row. Reading
    /// them synchronises the context's stream.
    pub nonfinite_outputs: u64,
    pub nonfinite_row: u32,
    pub nonfinite_col: u32,
}

impl From<&sys::rmlp_gpu_stats> for GpuStats {
    fn from(s: &sys::rmlp_gpu_stats) -> GpuStats {
        // SAFETY: the library NUL-terminates the message within the array (zeroed otherwise).
        let message = unsafe { CStr::from_ptr(s.first_plan_error.as_ptr()) };
        GpuStats {
            cuda: s.cuda,
            attention: GpuAttention::from_raw(s.attention).unwrap_or_default(),
            flashinfer: s.flashinfer,
            full_kv_paged: s.full_kv_paged,
            flashinfer_sm90: s.flashinfer_sm90,
            rope_table: s.rope_table,
            decode_flashinfer: s.decode_flashinfer,
            flashinfer_full: s.flashinfer_full,
            flashinfer_full_paged: s.flashinfer_full_paged,
            flashinfer_compact: s.flashinfer_compact,
            reference_full: s.reference_full,
            reference_full_paged: s.reference_full_paged,
            reference_compact: s.reference_compact,
            plan_errors: s.plan_errors,
            fallback_plan_error: s.fallback_plan_error,
            fallback_small_batch: s.fallback_small_batch,
            fallback_too_large: s.fallback_too_large,
            fallback_unplanned: s.fallback_unplanned,
            fallback_buffers: s.fallback_buffers,
            fallback_launcher: s.fallback_launcher,
            first_plan_error: message.to_string_lossy().into_owned(),
            decode_steps_flashinfer: s.decode_steps_flashinfer,
            decode_steps_chains: s.decode_steps_chains,
            sm90: s.sm90,
            flashinfer_sm90_full_paged: s.flashinfer_sm90_full_paged,
            flashinfer_sm90_compact: s.flashinfer_sm90_compact,
            sm90_fallbacks: s.sm90_fallbacks,
            nonfinite_outputs: s.nonfinite_outputs,
            nonfinite_row: s.nonfinite_row,
            nonfinite_col: s.nonfinite_col,
        }
    }
}

impl<M: ModelHolder> Context<'_, M> {
    /// The built-in attention's counters and run-time choices (`rmlp_context_gpu_stats`; all zero
    /// for a CPU context). On CUDA this synchronises the context's stream (for `nonfinite_outputs`)
    /// and is refused while the stream captures a graph.
    pub fn gpu_stats(&self) -> Result<GpuStats, Error> {
        // SAFETY: rmlp_gpu_stats is plain data (integers, bools and a char array): all zero is valid.
        let mut out: sys::rmlp_gpu_stats = unsafe { core::mem::zeroed() };
        out.struct_size = core::mem::size_of::<sys::rmlp_gpu_stats>() as u32;
        // SAFETY: a live context (no other thread uses it: !Sync); `out` an out pointer of the size
        // its struct_size says.
        Error::check(unsafe { sys::rmlp_context_gpu_stats(self.raw_ptr(), &mut out) })?;
        Ok(GpuStats::from(&out))
    }
}
