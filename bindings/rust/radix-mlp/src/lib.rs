//! Safe Rust wrapper of `libradix_mlp`, the C library of RadixMLP prefix-sharing prefill.
//!
//! Tokens with the same (token, position) path from the start of their sequences have the
//! same hidden states in a causal transformer, so position-wise work can run once per distinct
//! path. A [`Planner`] builds the index maps (fold gather, scatter, compact ids and positions)
//! of a batch; [`compute_fold_and_scatter`] is a drop-in for the function of the published
//! `radix_mlp` crate that text-embeddings-inference (TEI) calls.
//!
//! The library also runs models on the CPU (fp32): a [`Model`] loaded from a Hugging Face
//! checkpoint is shared by threads, each running batches through its own [`Context`], whole
//! ([`Context::forward`], with the built-in attention or the host's through
//! [`Context::forward_with_attention`]) or layer by layer for a host that keeps attention
//! ([`Context::embed`], [`Context::pre_attention`], the host's attention over
//! [`AttentionArgs`], [`Context::post_attention`], [`Context::final_norm`]); then
//! [`Model::pool`] or [`Context::score_pair`]. Model calls take a [`PlanView`] or an owned
//! [`Plan`] ([`AsPlan`]).
//!
//! On a CUDA model (loaded with [`Device::Cuda`], or bound over the host's own device tensors
//! with [`Model::bind_cuda`], or [`Model::bind_cuda_config`] where config.json says more than
//! [`ModelConfig`] can, as a candle backend holds them) the same calls take device buffers:
//! a [`DeviceSlice`] / [`DeviceSliceMut`] (a device pointer, a length and a dtype, made `unsafe`
//! by a caller who vouches for them) where a CPU model takes `&[f32]` / `&mut [f32]`; both are a
//! [`Buffer`] / [`BufferMut`], checked alike against the model (memory, dtype, rows) on one path.
//! [`Context::set_plan`] copies a plan's maps to the device and [`Context::set_stream`] picks the
//! [`Stream`]; a host keeping attention gets [`DeviceAttentionArgs`] in
//! [`Context::forward_with_device_attention`]'s callback.
//!
//! Attention runs in full space (every sequence over its batch rows) or in compact space (only
//! the compact rows a sequence owns are queries, its keys its path through `scatter`: exact,
//! with fewer score pairs on shared prefixes): a context setting ([`ContextParams`],
//! [`AttentionSpace`]; [`Model::context_with`], [`Context::new_with`]) for [`Context::forward`],
//! or the whole forward on the compact rows ([`Context::forward_compact`], then
//! [`Context::pool_compact`] / [`Context::score_pair_compact`]); hosts that keep attention get
//! the compact layout in [`AttentionArgs::compact`] and call the `*_compact` per-layer methods.
//!
//! A context can keep a prefix KV cache across batches ([`ContextParams::cache_bytes`], a byte
//! budget; CPU models): [`Context::forward`] and [`Context::forward_compact`] then compute only
//! the rows earlier batches did not leave in it, for the same outputs (a reranker's query, an
//! embedder's instruction computed once, not once per batch); [`Context::cache_stats`] counts
//! hits and evictions, [`Context::cache_clear`] empties it.
//!
//! A context with a cache generates too, on a model with an LM head: [`Context::generate_begin`]
//! prefills a batch of prompts (shared prefixes once) and returns a [`Generation`], whose
//! [`Generation::step`] appends one token per active sequence and returns their logits;
//! [`Context::generate`] runs the loop with the host's pick of tokens, [`Context::generate_greedy`]
//! with the argmax.
//!
//! # Linking
//!
//! Cargo features pick what `radix-mlp-sys` links. By default the planner alone
//! (`libradix_mlp_plan`, libc only), statically: [`compute_fold_and_scatter`], [`Planner`] and
//! the batcher work, nothing new is loaded at run time, and nothing needs setting. `full` links
//! the whole library (models, contexts; calling them without it fails to link), `shared` the
//! shared library instead of the static one. The library comes from `RADIX_MLP_LIB_DIR` (a CMake
//! build folder or the `lib` folder of an install), else from the `libdir` of `pkg-config`, else
//! from where the linker looks by itself; found nowhere, `radix-mlp-sys` builds it from the C
//! sources it carries (the planner with the C compiler alone, the whole library with CMake). With
//! the shared library from a known folder, this crate's tests run without `LD_LIBRARY_PATH` (an
//! rpath); a host's binary gets the same from three lines in its build script (docs/building.md,
//! "From Rust").
//!
//! # Serving
//!
//! A [`Batcher`] queues requests and hands out batches that share prefixes (deepest first, the age
//! bound kept; [`Batcher::next_batch_with_cache`] prefers what a context's prefix cache holds);
//! [`route_key`] keys a request's leading prefix for a load balancer (docs/batching.md,
//! docs/deploying-routing.md).
//!
//! [`PlanParams::from_env`] reads the deployment's switches (`RADIX_MLP_THRESHOLD`,
//! `RADIX_MLP_PAD`); [`Context::new`] makes a context that holds an `Arc` of its [`Model`]
//! ([`SharedContext`]), for a server struct or a `'static` worker thread; [`set_cpu_threads`]
//! sets the CPU path's thread count; [`set_planner_scratch_limit`] bounds what
//! [`compute_fold_and_scatter`] keeps per thread.
//!
//! # Switching TEI from the published crate
//!
//! Change the one dependency line in TEI's `Cargo.toml`, keeping the name `radix_mlp`:
//!
//! ```toml
//! radix_mlp = { package = "radix-mlp", path = "/path/to/radix-mlp/bindings/rust/radix-mlp" }
//! ```
//!
//! and `radix_mlp::compute_fold_and_scatter(&input_ids, &position_ids, &cu_seq_lengths,
//! radix_mlp_pad)` keeps working unchanged, with the same results for every padding multiple
//! (docs/deploying.md, "Wiring it into a TEI build", has the patch to TEI's files).
//!
//! # Example
//!
//! ```
//! use radix_mlp::{PlanParams, Planner};
//!
//! // Two sequences sharing the prefix [1, 2].
//! let ids = [1, 2, 3, 1, 2, 4];
//! let pos = [0, 1, 2, 0, 1, 2];
//! let cu = [0, 3, 6];
//! let (compact_ids, _, scatter, fold) = radix_mlp::compute_fold_and_scatter(&ids, &pos, &cu, None);
//! assert_eq!(compact_ids, [1, 2, 3, 4]);
//! assert_eq!(scatter, [0, 1, 2, 0, 1, 3]);
//! assert_eq!(fold, [0, 1, 2, 5]);
//!
//! // The same with the gate and without panics.
//! let mut planner = Planner::new()?;
//! let plan = planner.build(&ids, &pos, &cu, &PlanParams::default())?;
//! assert!(plan.use_radix()); // 4/6 < 0.85
//! assert_eq!(plan.scatter(), scatter);
//! # Ok::<(), radix_mlp::Error>(())
//! ```
//!
//! A model on a batch (a checkpoint folder with config.json and model.safetensors):
//!
//! ```no_run
//! use radix_mlp::{Model, PlanParams, Planner, Pooling};
//!
//! let model = Model::load("integration_tests/fixtures/qwen3_tiny")?;
//! let (ids, pos, cu) = ([1, 2, 3, 1, 2, 4], [0, 1, 2, 0, 1, 2], [0, 3, 6]);
//! let plan = Planner::new()?.build(&ids, &pos, &cu, &PlanParams::default())?.to_owned();
//! let mut hidden = vec![0.0; ids.len() * model.config().hidden_size];
//! model.context(1024)?.forward(&plan, &mut hidden)?;
//! let embeddings = model.pool(&hidden, &cu, Pooling::Last, true)?; // 2 x hidden_size
//! # Ok::<(), radix_mlp::Error>(())
//! ```
use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering};

use radix_mlp_sys as sys;

mod attention;
mod batcher;
mod buffer;
mod context;
mod device;
mod device_attention;
mod error;
mod generate;
mod gpu;
mod model;
mod planner;
mod types;

pub use attention::{AttentionArgs, CompactLayout, LayerAttention};
pub use batcher::{route_key, route_key_header, Batch, BatchMode, Batcher, BatcherParams, RouteParams};
pub use buffer::{Buffer, BufferMut};
pub use context::{Context, ModelHolder, SharedContext};
pub use device::{DeviceIndices, DeviceSlice, DeviceSliceMut, Stream};
pub use device_attention::{DeviceAttentionArgs, DeviceCompactLayout};
pub use error::{Error, Status};
pub use generate::{argmax, GenerateParams, GenerateStats, Generation};
pub use gpu::{GpuAttention, GpuStats};
pub use model::Model;
pub use planner::{AsPlan, Gate, PathRun, Plan, PlanParams, PlanView, Planner};
pub use types::{
    Activation, Architecture, AttentionSpace, CacheStats, ContextParams, CpuBf16Gemm, CpuBf16GemmInfo, CpuSgemm, DType,
    Device, ModelConfig, ModelParams, PairScore, Pooling, WeightBinding,
};
/// `compact_parent` of a path's first row and of padding rows.
pub const NO_PARENT: u32 = sys::RMLP_NO_PARENT;

/// The linked library's version as (major, minor, patch).
pub fn version() -> (u32, u32, u32) {
    // SAFETY: no arguments, returns a value.
    let v = unsafe { sys::rmlp_version() };
    (v >> 16, (v >> 8) & 0xff, v & 0xff)
}

/// The linked library's version as "major.minor.patch".
pub fn version_string() -> &'static str {
    // SAFETY: rmlp_version_string returns a non-NULL pointer to static storage.
    unsafe { error::static_str(sys::rmlp_version_string()) }
}

/// Number of CUDA devices. `Status::Unsupported` from a build without CUDA,
/// `Status::NoDevice` when the driver reports none.
pub fn cuda_device_count() -> Result<i32, Error> {
    let mut count = 0;
    // SAFETY: `count` is a valid out pointer.
    Error::check(unsafe { sys::rmlp_cuda_device_count(&mut count) })?;
    Ok(count)
}

/// Sets how many threads the CPU path uses (`rmlp_set_cpu_threads`): a [`Context`]'s own pool for
/// its GEMMs, elementwise passes and attention (the count when it is made) and a generation
/// session's threads (the count when it begins). The library runs OpenBLAS on one thread inside
/// each of its own and sets OpenBLAS's process-wide count to 1 (a host's own OpenBLAS calls then
/// run on one thread too). It starts at OpenBLAS's own choice (`OPENBLAS_NUM_THREADS`, else one
/// per core); a server that runs a [`Context`] per worker thread usually wants 1, its workers
/// being the parallelism. `Status::InvalidArgument` for 0 or more than 256 (the count then stays
/// as it was).
/// Process-wide: call it at startup, not while another thread is in a CPU model call.
pub fn set_cpu_threads(n_threads: usize) -> Result<(), Error> {
    let n = u32::try_from(n_threads).map_err(|_| {
        Error::new(Status::InvalidArgument, format!("radix_mlp::set_cpu_threads: n_threads={n_threads} exceeds 2^32-1"))
    })?;
    // SAFETY: a plain call with a value argument.
    Error::check(unsafe { sys::rmlp_set_cpu_threads(n) })
}

/// The number of threads the CPU path uses now (`rmlp_cpu_threads`; see [`set_cpu_threads`]).
pub fn cpu_threads() -> usize {
    // SAFETY: no arguments, returns a value.
    unsafe { sys::rmlp_cpu_threads() as usize }
}

/// Which library the CPU path's f32 GEMMs run, and the library's account of why (`rmlp_cpu_sgemm`):
/// process-wide, chosen once (at the first CPU model load or the first call of this) by
/// `RADIX_MLP_CPU_SGEMM` (`auto`, `openblas`, `onednn`; unset is `auto`). `auto` runs OpenBLAS
/// unless its kernels are for a narrower ISA than this CPU runs (an OpenBLAS older than the CPU
/// model falls back to generic kernels), then oneDNN's sgemm where it loads. `Status::InvalidArgument`
/// for another value of the variable, `Status::Unsupported` for `onednn` where it cannot run.
pub fn cpu_sgemm() -> Result<(CpuSgemm, String), Error> {
    let (mut kind, mut detail) = (0, core::ptr::null());
    // SAFETY: `kind` and `detail` are out pointers.
    Error::check(unsafe { sys::rmlp_cpu_sgemm(&mut kind, &mut detail) })?;
    let detail = if detail.is_null() {
        String::new()
    } else {
        // SAFETY: a NUL-terminated text in the library's static storage.
        unsafe { std::ffi::CStr::from_ptr(detail) }.to_string_lossy().into_owned()
    };
    let kind = CpuSgemm::from_raw(kind).ok_or_else(|| {
        Error::new(Status::Internal, format!("radix_mlp::cpu_sgemm: the library answered kind {kind}"))
    })?;
    Ok((kind, detail))
}

/// A thread's planner for [`compute_fold_and_scatter`] and the largest batch it has planned
/// (its scratch has grown to that size and stays).
struct ThreadPlanner {
    planner: Planner,
    peak: usize,
}

thread_local! {
    static PLANNER: RefCell<Option<ThreadPlanner>> = const { RefCell::new(None) };
}

/// See [`set_planner_scratch_limit`]; `usize::MAX` is no limit.
static SCRATCH_LIMIT: AtomicUsize = AtomicUsize::new(usize::MAX);

/// Bounds the memory [`compute_fold_and_scatter`] keeps per thread between calls. Each thread
/// reuses one planner, whose scratch grows to the largest batch it has planned and stays there,
/// so that steady-state calls allocate nothing; after a batch of more than `max_tokens` tokens
/// (or sequences) the thread's planner is freed as the call returns, and the thread's next call
/// makes a new one, as large as that call's batch needs. `None` (the default) keeps every
/// planner. Process-wide, from each thread's next call. (A [`Planner`] of your own is yours to
/// drop and remake.)
pub fn set_planner_scratch_limit(max_tokens: Option<usize>) {
    SCRATCH_LIMIT.store(max_tokens.unwrap_or(usize::MAX), Ordering::Relaxed);
}

/// The limit [`set_planner_scratch_limit`] set, `None` for none.
pub fn planner_scratch_limit() -> Option<usize> {
    Some(SCRATCH_LIMIT.load(Ordering::Relaxed)).filter(|&n| n != usize::MAX)
}

/// Frees the calling thread's [`compute_fold_and_scatter`] planner and its scratch now (for a
/// worker about to idle); the thread's next call makes a new one.
pub fn release_planner_scratch() {
    PLANNER.with(|cell| cell.borrow_mut().take());
}

/// The published `radix_mlp` crate's function: folds a batch into its distinct
/// (token, position) paths. Returns `(compact_input_ids, compact_position_ids,
/// scatter_indices, fold_gather)`:
///
/// * `compact_input_ids`, `compact_position_ids`, `fold_gather`: one row per distinct path in
///   order of first occurrence (`fold_gather[j]` is that first batch row), then, with
///   `pad_multiple_of = Some(n)` and at least one row, padding rows (token 0, position 0,
///   gather 0) up to a multiple of `n`, any `n` from 1 up (the padding is added here, so the
///   library's `RMLP_MAX_PAD_MULTIPLE` does not bound it: `Some(8192)` pads to 8192 rows);
/// * `scatter_indices`: one entry per batch row, `full[i] = compact[scatter_indices[i]]`,
///   never a padding row.
///
/// Always folds (threshold 1.0; the gate is the caller's, as in TEI). Empty `input_ids` give
/// four empty vectors whatever `cu_seq_lengths` is. Each thread reuses one [`Planner`]
/// ([`set_planner_scratch_limit`] bounds what it keeps between calls).
///
/// # Panics
///
/// On invalid input (lengths differ, malformed `cu_seq_lengths`: the library's message; `Some(0)`
/// padding), as the reference panics too. [`Planner::build`] is the non-panicking path.
/// Unlike the reference, a single sequence's `cu_seq_lengths` is checked too (the reference's
/// one-sequence fast path ignores it).
pub fn compute_fold_and_scatter(
    input_ids: &[u32],
    position_ids: &[u32],
    cu_seq_lengths: &[u32],
    pad_multiple_of: Option<usize>,
) -> (Vec<u32>, Vec<u32>, Vec<u32>, Vec<u32>) {
    if input_ids.is_empty() {
        return (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    }
    const FN: &str = "radix_mlp::compute_fold_and_scatter";
    if pad_multiple_of == Some(0) {
        panic!("{FN}: pad_multiple_of is 0 (pad to a multiple of at least 1, or pass None)");
    }
    // Folded unpadded, then padded below: one path for every multiple, however large.
    let params = PlanParams { threshold: 1.0, pad_multiple_of: None, gate: Gate::Distinct };
    let result = PLANNER.with(|cell| {
        let mut slot = cell.borrow_mut();
        let held = match &mut *slot {
            Some(held) => held,
            empty => empty.insert(ThreadPlanner { planner: Planner::new()?, peak: 0 }),
        };
        held.peak = held.peak.max(input_ids.len()).max(cu_seq_lengths.len());
        let built = held.planner.build(input_ids, position_ids, cu_seq_lengths, &params).map(|plan| {
            let rows = padded_rows(plan.n_compact(), pad_multiple_of.unwrap_or(1));
            (
                padded(plan.compact_input_ids(), rows),
                padded(plan.compact_position_ids(), rows),
                plan.scatter().to_vec(),
                padded(plan.fold_gather(), rows),
            )
        });
        if held.peak > SCRATCH_LIMIT.load(Ordering::Relaxed) {
            *slot = None; // an oversized batch: give its scratch back
        }
        built
    });
    result.unwrap_or_else(|e| panic!("{FN}: {e}"))
}

/// `n` rounded up to a multiple of `multiple` (at least 1).
///
/// # Panics
/// When that exceeds `usize::MAX`.
fn padded_rows(n: usize, multiple: usize) -> usize {
    n.checked_next_multiple_of(multiple).unwrap_or_else(|| {
        panic!("radix_mlp::compute_fold_and_scatter: {n} rows padded to a multiple of {multiple} exceed usize::MAX")
    })
}

/// `rows` copied out, then zeros up to `len` entries (the padding rows).
fn padded(rows: &[u32], len: usize) -> Vec<u32> {
    let mut out = Vec::with_capacity(len);
    out.extend_from_slice(rows);
    out.resize(len, 0);
    out
}
