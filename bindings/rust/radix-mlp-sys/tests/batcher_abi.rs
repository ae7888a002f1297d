//! ABI checks of the batcher's structs (bindings/rust/radix-mlp-sys/src/batcher.rs): sizes and
//! offsets as a C program using `sizeof`/`offsetof` on `radix_mlp.h` printed them (LP64), and the
//! defaults functions against the constants.
use core::mem::{align_of, offset_of, size_of};
use radix_mlp_sys::*;

#[test]
#[cfg(target_pointer_width = "64")]
fn batcher_structs_match_c() {
    assert_eq!((size_of::<rmlp_batcher_params>(), align_of::<rmlp_batcher_params>()), (24, 8));
    assert_eq!(offset_of!(rmlp_batcher_params, mode), 4);
    assert_eq!(offset_of!(rmlp_batcher_params, max_queued_tokens), 12);
    assert_eq!(offset_of!(rmlp_batcher_params, max_wait_us), 16);
    assert_eq!((size_of::<rmlp_batch>(), align_of::<rmlp_batch>()), (64, 8));
    assert_eq!(offset_of!(rmlp_batch, cached_tokens), 20);
    assert_eq!(offset_of!(rmlp_batch, ids), 24);
    assert_eq!(offset_of!(rmlp_batch, cu_seqlens), 56);
    assert_eq!((size_of::<rmlp_route_params>(), align_of::<rmlp_route_params>()), (16, 4));
    assert_eq!(offset_of!(rmlp_route_params, use_separator), 8);
    assert_eq!(offset_of!(rmlp_route_params, separator), 12);
}

#[test]
fn batcher_defaults_match_constants() {
    let b = unsafe { rmlp_batcher_default_params() };
    assert_eq!(b.struct_size as usize, size_of::<rmlp_batcher_params>());
    assert_eq!(b.mode, RMLP_BATCH_PREFIX);
    assert_eq!(b.max_requests, RMLP_BATCHER_DEFAULT_MAX_REQUESTS);
    assert_eq!(b.max_queued_tokens, RMLP_BATCHER_DEFAULT_MAX_QUEUED_TOKENS);
    assert_eq!(b.max_wait_us, RMLP_BATCHER_DEFAULT_MAX_WAIT_US);
    let r = unsafe { rmlp_route_default_params() };
    assert_eq!(r.struct_size as usize, size_of::<rmlp_route_params>());
    assert_eq!(r.prefix_tokens, RMLP_ROUTE_DEFAULT_PREFIX_TOKENS);
    assert!(!r.use_separator);
}
