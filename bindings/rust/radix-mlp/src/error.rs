//! Errors: the library's status code as a [`Status`] and its thread-local message, read on
//! the calling thread right after the failing call.
use core::ffi::{c_char, CStr};
use std::fmt;

use radix_mlp_sys as sys;

/// The `RMLP_ERR_*` code of a failed call. Codes this crate does not know (from a newer
/// library) are kept as `Unknown`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    /// `RMLP_ERR_INVALID_ARGUMENT`: a pointer, size, flag or parameter is invalid.
    InvalidArgument,
    /// `RMLP_ERR_INVALID_SEQLENS`: `cu_seq_lengths` does not describe the batch.
    InvalidSeqlens,
    /// `RMLP_ERR_TOO_LARGE`: a size does not fit the plan's 32-bit indices.
    TooLarge,
    /// `RMLP_ERR_OUT_OF_MEMORY`: allocation failed; the object is still usable.
    OutOfMemory,
    /// `RMLP_ERR_UNSUPPORTED`: not part of this build (for example CUDA).
    Unsupported,
    /// `RMLP_ERR_CUDA`: a CUDA runtime call failed.
    Cuda,
    /// `RMLP_ERR_NO_DEVICE`: no CUDA device is present.
    NoDevice,
    /// `RMLP_ERR_INTERNAL`: a library invariant broke.
    Internal,
    /// `RMLP_ERR_IO`: a file could not be opened, read or mapped.
    Io,
    /// `RMLP_ERR_FORMAT`: a file is malformed (safetensors header, JSON).
    Format,
    /// `RMLP_ERR_MODEL`: the checkpoint is unsupported or disagrees with its config.
    Model,
    /// `RMLP_ERR_BUSY`: the planner or context is in a call on another thread (they are
    /// single-threaded); nothing was done. Safe Rust cannot get this (`&mut self`), only a
    /// handle shared through raw pointers.
    Busy,
    /// `RMLP_ERR_FULL`: a batcher's queue is at its capacity; the request was not added (take a
    /// batch first).
    Full,
    /// Any other code, as the library returned it.
    Unknown(i32),
}

impl Status {
    /// The status of a library code (`RMLP_OK` has none and maps to `Unknown(0)`).
    pub fn from_code(code: sys::rmlp_status) -> Status {
        match code {
            sys::RMLP_ERR_INVALID_ARGUMENT => Status::InvalidArgument,
            sys::RMLP_ERR_INVALID_SEQLENS => Status::InvalidSeqlens,
            sys::RMLP_ERR_TOO_LARGE => Status::TooLarge,
            sys::RMLP_ERR_OUT_OF_MEMORY => Status::OutOfMemory,
            sys::RMLP_ERR_UNSUPPORTED => Status::Unsupported,
            sys::RMLP_ERR_CUDA => Status::Cuda,
            sys::RMLP_ERR_NO_DEVICE => Status::NoDevice,
            sys::RMLP_ERR_INTERNAL => Status::Internal,
            sys::RMLP_ERR_IO => Status::Io,
            sys::RMLP_ERR_FORMAT => Status::Format,
            sys::RMLP_ERR_MODEL => Status::Model,
            sys::RMLP_ERR_BUSY => Status::Busy,
            sys::RMLP_ERR_FULL => Status::Full,
            other => Status::Unknown(other),
        }
    }

    /// The library code of this status.
    pub fn code(self) -> sys::rmlp_status {
        match self {
            Status::InvalidArgument => sys::RMLP_ERR_INVALID_ARGUMENT,
            Status::InvalidSeqlens => sys::RMLP_ERR_INVALID_SEQLENS,
            Status::TooLarge => sys::RMLP_ERR_TOO_LARGE,
            Status::OutOfMemory => sys::RMLP_ERR_OUT_OF_MEMORY,
            Status::Unsupported => sys::RMLP_ERR_UNSUPPORTED,
            Status::Cuda => sys::RMLP_ERR_CUDA,
            Status::NoDevice => sys::RMLP_ERR_NO_DEVICE,
            Status::Internal => sys::RMLP_ERR_INTERNAL,
            Status::Io => sys::RMLP_ERR_IO,
            Status::Format => sys::RMLP_ERR_FORMAT,
            Status::Model => sys::RMLP_ERR_MODEL,
            Status::Busy => sys::RMLP_ERR_BUSY,
            Status::Full => sys::RMLP_ERR_FULL,
            Status::Unknown(code) => code,
        }
    }

    /// The library's fixed English description (`rmlp_status_string`).
    pub fn description(self) -> &'static str {
        // SAFETY: rmlp_status_string returns a non-NULL pointer to static storage.
        unsafe { static_str(sys::rmlp_status_string(self.code())) }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.description(), self.code())
    }
}

/// A failed call: its status and the library's message naming the argument and index
/// (for example `rmlp_plan_build: cu_seqlens[0]=1, must be 0`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    pub status: Status,
    pub message: String,
}

impl Error {
    /// An error made on the Rust side: by this crate before calling the library, or by a host
    /// (for example its attention callback, see [`Context::forward_with_attention`](crate::Context::forward_with_attention)).
    pub fn new(status: Status, message: String) -> Error {
        Error { status, message }
    }

    /// `Ok` for `RMLP_OK`, else the status with the calling thread's `rmlp_last_error()`.
    /// Call it right after the library call, on the same thread.
    pub(crate) fn check(code: sys::rmlp_status) -> Result<(), Error> {
        if code == sys::RMLP_OK {
            return Ok(());
        }
        let status = Status::from_code(code);
        // SAFETY: rmlp_last_error returns the calling thread's NUL-terminated buffer, valid
        // until the thread's next library call; it is copied at once.
        let detail = unsafe { CStr::from_ptr(sys::rmlp_last_error()) }.to_string_lossy().into_owned();
        let message = if detail.is_empty() { status.description().to_owned() } else { detail };
        Err(Error { status, message })
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} [{}]", self.message, self.status)
    }
}

impl std::error::Error for Error {}

/// A `&'static str` from a C string in static storage (non-UTF-8 bytes are not expected;
/// they give "?").
///
/// # Safety
/// `ptr` must be non-NULL, NUL-terminated and live for the whole program.
pub(crate) unsafe fn static_str(ptr: *const c_char) -> &'static str {
    CStr::from_ptr(ptr).to_str().unwrap_or("?")
}
