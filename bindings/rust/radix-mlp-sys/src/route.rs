//! The routing key (issue 33): a 64-bit key of a request's leading prefix for load balancers that
//! hash a header (`rmlp_route_key*`), so that requests sharing a prefix reach the replica whose cache
//! holds it. The logic lives in `batch/` of the C library; docs/deploying-routing.md wires it up.
use core::ffi::c_char;

use crate::rmlp_status;

/// Default number of leading tokens a routing key covers.
pub const RMLP_ROUTE_DEFAULT_PREFIX_TOKENS: u32 = 64;
/// Bytes `rmlp_route_key_format` writes: 16 lowercase hex digits and a NUL.
pub const RMLP_ROUTE_KEY_CHARS: usize = 17;

/// Which prefix a routing key covers (`rmlp_route_key`). Get one from
/// `rmlp_route_default_params()`; versioned by `struct_size`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct rmlp_route_params {
    /// `sizeof(rmlp_route_params)` of the caller's header.
    pub struct_size: u32,
    /// The key covers at most this many leading tokens (default 64, at least 1).
    pub prefix_tokens: u32,
    /// With `use_separator`, the key covers the tokens up to and including the first `separator`
    /// among the first `prefix_tokens` (a reranker's query end, an instruction's end), or all
    /// `prefix_tokens` of them where it is absent. Default false.
    pub use_separator: bool,
    pub separator: u32,
}

extern "C" {
    /// The defaults of `rmlp_route_params` (`struct_size` set, 64 tokens, no separator).
    pub fn rmlp_route_default_params() -> rmlp_route_params;
    /// The routing key of a request: a 64-bit hash of its leading prefix as `params` (NULL: the
    /// defaults) delimit it, the same on every platform and process: FNV-1a 64 over the
    /// little-endian bytes of the covered token ids, then MurmurHash3's 64-bit finaliser (fmix64).
    /// `n_covered` (may be NULL) gets how many tokens it covers. An empty request has a key too
    /// (of no tokens).
    pub fn rmlp_route_key(
        token_ids: *const u32,
        n_tokens: usize,
        params: *const rmlp_route_params,
        key: *mut u64,
        n_covered: *mut usize,
    ) -> rmlp_status;
    /// Writes `key` as a header value: 16 lowercase hex digits and a NUL (`capacity` at least
    /// `RMLP_ROUTE_KEY_CHARS`).
    pub fn rmlp_route_key_format(key: u64, out: *mut c_char, capacity: usize) -> rmlp_status;
}
