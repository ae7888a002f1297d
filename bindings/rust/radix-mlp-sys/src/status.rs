//! Status codes and the last error. Every fallible call returns an `rmlp_status`: `RMLP_OK` or
//! one of the negative codes of `rmlp_status_code`, and on error leaves a message in the calling
//! thread's `rmlp_last_error()`. Their strings are the C library's (common/status.c).
//!
//! `rmlp_status` stays `int32_t` (`i32`), the enum only names the codes: a library newer than a
//! host's header may return a code that header's enum lacks (undefined behaviour for a Rust enum),
//! C++ hosts keep storing and returning codes as plain integers (an attention callback returns an
//! `rmlp_status`), and no declaration a host compiled against changes. In C and C++ the codes are
//! enumerators (`int32_t` underneath), no longer macros, so `#if RMLP_ERR_FULL` no longer works:
//! `RMLP_VERSION` says what a header has.
use core::ffi::c_char;

/// Result of every fallible call: `RMLP_OK` or one of the negative codes of `rmlp_status_code`.
pub type rmlp_status = i32;

/// The status codes, the values an `rmlp_status` takes: 0 for success, negative for errors. A
/// code's value never changes once released; new codes take the next negative value.
#[repr(i32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum rmlp_status_code {
    /// Success.
    RMLP_OK = 0,
    /// A pointer, size, flag or parameter is invalid (NULL where data is needed, wrong
    /// `struct_size`, NaN threshold, zero padding multiple, ...).
    RMLP_ERR_INVALID_ARGUMENT = -1,
    /// `cu_seqlens` does not describe the batch: first entry not 0, decreasing, last entry not
    /// equal to the number of tokens, or no sequence at all.
    RMLP_ERR_INVALID_SEQLENS = -2,
    /// A size does not fit the 32-bit indices the plan uses (more than 2^32-1 tokens or rows).
    RMLP_ERR_TOO_LARGE = -3,
    /// Memory could not be allocated; nothing was leaked and the object is still usable.
    RMLP_ERR_OUT_OF_MEMORY = -4,
    /// The feature is not part of this build (for example CUDA in a CPU-only build).
    RMLP_ERR_UNSUPPORTED = -5,
    /// A CUDA runtime call failed; the message names the call and CUDA's error string.
    RMLP_ERR_CUDA = -6,
    /// No CUDA device is present.
    RMLP_ERR_NO_DEVICE = -7,
    /// A library invariant broke; please report it with the message.
    RMLP_ERR_INTERNAL = -8,
    /// A file could not be opened, read or mapped; the message names the file.
    RMLP_ERR_IO = -9,
    /// A file is malformed (safetensors header, JSON); the message names the file and the place.
    RMLP_ERR_FORMAT = -10,
    /// The checkpoint does not fit: unsupported architecture or dtype, a missing tensor, a shape
    /// that disagrees with config.json; the message names the tensor or key. From a forward on the
    /// CPU (`rmlp_forward`, `rmlp_forward_compact`): its output is not finite (weights large enough
    /// to overflow fp32); the message names the first row, and `out` holds the output as computed (a
    /// CUDA forward counts such outputs instead: `rmlp_gpu_stats::nonfinite_outputs`).
    RMLP_ERR_MODEL = -11,
    /// The planner or context is in use by a call on another thread, or by the call whose host
    /// attention callback made this one (a callback may call only `rmlp_attention` and
    /// `rmlp_attention_compact` on the context running it). Planners and contexts are
    /// single-threaded objects (one per thread, or calls serialised by the host); the call changed
    /// nothing and may be retried once the other call has returned. A model is not exclusive: any
    /// number of threads may use one through their own contexts.
    RMLP_ERR_BUSY = -12,
    /// A batcher's queue is at its capacity of requests or queued tokens (`rmlp_batcher_params`): the
    /// request was not added; take a batch first (or create the batcher with a larger capacity).
    RMLP_ERR_FULL = -13,
}

// The codes as `rmlp_status` values, as Rust compares them with what the calls return, and
// `rmlp_status_code::ALL`. Made by a macro, which cbindgen does not expand: the header declares
// each code once, as an enumerator. The match has no wildcard, so a variant left out of the list
// below does not compile.
macro_rules! status_values {
    ($($code:ident),* $(,)?) => {
        $(
            #[doc = concat!("`rmlp_status_code::", stringify!($code), "` as an `rmlp_status`.")]
            pub const $code: rmlp_status = rmlp_status_code::$code as rmlp_status;
        )*
        impl rmlp_status_code {
            /// Every code, in the order of the enum.
            pub const ALL: &'static [rmlp_status_code] = &[$(rmlp_status_code::$code),*];
            /// The code's value, as the calls return it.
            pub const fn status(self) -> rmlp_status {
                match self {
                    $(rmlp_status_code::$code => $code,)*
                }
            }
        }
    };
}
status_values!(
    RMLP_OK,
    RMLP_ERR_INVALID_ARGUMENT,
    RMLP_ERR_INVALID_SEQLENS,
    RMLP_ERR_TOO_LARGE,
    RMLP_ERR_OUT_OF_MEMORY,
    RMLP_ERR_UNSUPPORTED,
    RMLP_ERR_CUDA,
    RMLP_ERR_NO_DEVICE,
    RMLP_ERR_INTERNAL,
    RMLP_ERR_IO,
    RMLP_ERR_FORMAT,
    RMLP_ERR_MODEL,
    RMLP_ERR_BUSY,
    RMLP_ERR_FULL,
);

extern "C" {
    /// A fixed English description of a status code (static storage; never NULL).
    pub fn rmlp_status_string(status: rmlp_status) -> *const c_char;
    /// Detail of the last error on the calling thread: set by a call that returns an error
    /// status, cleared ("") by the next call that returns a status. Valid until then. Cleanup
    /// calls are calls too (`rmlp_generate_end`, and the frees, which leave it empty when they
    /// succeed): read or copy the message before cleaning up.
    pub fn rmlp_last_error() -> *const c_char;
}
