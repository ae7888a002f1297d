//! CUDA: the device count, the kernel a CUDA context's built-in attention runs, and what it ran
//! (`rmlp_gpu_stats`).
use core::ffi::c_char;

use crate::{rmlp_context, rmlp_status};

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

#[allow(improper_ctypes)] // rmlp_context is opaque: only pointers cross the ABI
extern "C" {
    /// Number of CUDA devices in `*count`. `RMLP_ERR_UNSUPPORTED` in a build without CUDA;
    /// `RMLP_ERR_NO_DEVICE` (with `*count = 0`) when the driver reports none.
    pub fn rmlp_cuda_device_count(count: *mut i32) -> rmlp_status;
    /// The built-in attention's counters and run-time choices of a CUDA context (`rmlp_gpu_stats`;
    /// set `out->struct_size` first). A CPU context gets `cuda = false` and zeros. On CUDA it
    /// synchronises the context's stream (to read `nonfinite_outputs` after every forward enqueued
    /// before it), so it is `RMLP_ERR_INVALID_ARGUMENT` while that stream captures a graph, and
    /// `RMLP_ERR_CUDA` when a kernel enqueued earlier failed.
    pub fn rmlp_context_gpu_stats(context: *mut rmlp_context, out: *mut rmlp_gpu_stats) -> rmlp_status;
}
