//! The core crate of a TEI-shaped server, as far as RadixMLP reaches into it: the batching
//! queue, which plans every batch with `radix_mlp::compute_fold_and_scatter`.
pub mod queue;

pub use queue::{radix_mlp_pad_from_env, Batch, Entry, Queue, QueueConfig};
