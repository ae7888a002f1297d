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
//! # Linking
//!
//! `radix-mlp-sys` links `libradix_mlp` from `RADIX_MLP_LIB_DIR` (a CMake build or install
//! folder), else from the `libdir` of `pkg-config radix_mlp`, else from the system linker
//! paths; `RADIX_MLP_STATIC=1` links `libradix_mlp.a`. With the shared library, the loader must
//! find it at run time too (`LD_LIBRARY_PATH` or an installed prefix).
//!
//! # Switching TEI from the published crate
//!
//! Change the one dependency line in TEI's `Cargo.toml`, keeping the name `radix_mlp`:
//!
//! ```toml
//! radix_mlp = { package = "radix-mlp", path = "/path/to/radix-mlp/bindings/rust/radix-mlp" }
//! ```
//!
//! and `use radix_mlp::compute_fold_and_scatter;` keeps working unchanged.
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

use radix_mlp_sys as sys;

mod error;
mod model;
mod planner;

pub use error::{Error, Status};
pub use model::{
    Architecture, AttentionArgs, Context, DType, Device, Model, ModelConfig, ModelParams, PairScore, Pooling,
    WeightBinding,
};
pub use planner::{AsPlan, Plan, PlanParams, PlanView, Planner};
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

thread_local! {
    static PLANNER: RefCell<Option<Planner>> = const { RefCell::new(None) };
}

/// The published `radix_mlp` crate's function: folds a batch into its distinct
/// (token, position) paths. Returns `(compact_input_ids, compact_position_ids,
/// scatter_indices, fold_gather)`:
///
/// * `compact_input_ids`, `compact_position_ids`, `fold_gather`: one row per distinct path in
///   order of first occurrence (`fold_gather[j]` is that first batch row), then, with
///   `pad_multiple_of = Some(n)` and at least one row, padding rows (token 0, position 0,
///   gather 0) up to a multiple of `n`;
/// * `scatter_indices`: one entry per batch row, `full[i] = compact[scatter_indices[i]]`,
///   never a padding row.
///
/// Always folds (threshold 1.0; the gate is the caller's, as in TEI). Empty `input_ids` give
/// four empty vectors whatever `cu_seq_lengths` is. Each thread reuses one [`Planner`].
///
/// # Panics
///
/// On invalid input (lengths differ, malformed `cu_seq_lengths`, `Some(0)` padding), with the
/// library's message, as the reference panics too. [`Planner::build`] is the non-panicking path.
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
    let pad_multiple_of = pad_multiple_of.map(|n| {
        u32::try_from(n)
            .unwrap_or_else(|_| panic!("radix_mlp::compute_fold_and_scatter: pad_multiple_of={n} exceeds 2^32-1"))
    });
    let params = PlanParams { threshold: 1.0, pad_multiple_of };
    let result = PLANNER.with(|cell| {
        let mut slot = cell.borrow_mut();
        let planner = match &mut *slot {
            Some(planner) => planner,
            empty => empty.insert(Planner::new()?),
        };
        let plan = planner.build(input_ids, position_ids, cu_seq_lengths, &params)?;
        Ok::<_, Error>((
            plan.compact_input_ids().to_vec(),
            plan.compact_position_ids().to_vec(),
            plan.scatter().to_vec(),
            plan.fold_gather().to_vec(),
        ))
    });
    result.unwrap_or_else(|e| panic!("radix_mlp::compute_fold_and_scatter: {e}"))
}
