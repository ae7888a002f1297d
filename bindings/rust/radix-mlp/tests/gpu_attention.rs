//! The GPU attention setting and counters through the Rust API on a CPU model (qwen3_tiny): the
//! default is `GpuAttention::Auto`; a CPU context refuses another value by name (it could not
//! apply it); a CPU context's `gpu_stats` are all zero (`cuda` false). The CUDA side is
//! tests/test_gpu_attention.c's.
mod common;

use common::Fixture;
use radix_mlp::{ContextParams, GpuAttention, GpuStats, Model, Status};

#[test]
fn cpu_contexts_take_auto_only() {
    let f = Fixture::load("qwen3_tiny");
    let model = Model::load(&f.dir).unwrap();
    assert_eq!(ContextParams::default().gpu_attention, GpuAttention::Auto);
    for attention in [GpuAttention::FlashInfer, GpuAttention::Reference] {
        let params = ContextParams { gpu_attention: attention, ..ContextParams::default() };
        let err = model.context_with(64, params).err().expect("a CPU context refuses it");
        assert_eq!(err.status, Status::InvalidArgument);
        assert!(err.message.contains("applies to CUDA contexts only"), "{attention:?}: {}", err.message);
    }
    let ctx = model.context_with(64, ContextParams::default()).unwrap();
    let stats = ctx.gpu_stats().unwrap();
    assert_eq!(stats, GpuStats::default(), "a CPU context: no GPU counters");
    assert!(!stats.cuda);
}
