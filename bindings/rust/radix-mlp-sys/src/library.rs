//! The library as a whole: its version (the SONAME carries the major version, and before 1.0 the
//! minor one too), what this build of it contains, and the threads of the CPU path.
use core::ffi::c_char;

use crate::rmlp_status;

/// Major version: the SONAME carries it; a change means the ABI broke.
pub const RMLP_VERSION_MAJOR: u32 = 0;
/// Minor version: additions that keep the ABI.
pub const RMLP_VERSION_MINOR: u32 = 3;
/// Patch version: fixes only.
pub const RMLP_VERSION_PATCH: u32 = 0;
/// The version as one number, `major << 16 | minor << 8 | patch`, as `rmlp_version()` returns it.
pub const RMLP_VERSION: u32 = (RMLP_VERSION_MAJOR << 16) | (RMLP_VERSION_MINOR << 8) | RMLP_VERSION_PATCH;

/// Bit of `rmlp_build_flags()`: the library was compiled with CUDA kernels.
pub const RMLP_BUILD_CUDA: u32 = 1;
/// Bit of `rmlp_build_flags()`: the CUDA build has FlashInfer's attention kernels, which the
/// built-in attention runs for F16/BF16 models of head_dim 64 or 128 (else, and without this bit,
/// its reference kernel).
pub const RMLP_BUILD_FLASHINFER: u32 = 2;

extern "C" {
    /// The library's version, `major << 16 | minor << 8 | patch`; compare with `RMLP_VERSION`.
    pub fn rmlp_version() -> u32;
    /// The library's version as "major.minor.patch" (static storage).
    pub fn rmlp_version_string() -> *const c_char;
    /// Bit set of `RMLP_BUILD_*` flags describing this build.
    pub fn rmlp_build_flags() -> u32;

    /// Sets how many threads the CPU path uses: a context's own pool for its GEMMs, elementwise
    /// passes and attention (the count at `rmlp_context_create`), a generation session's threads
    /// (the count at `rmlp_generate_begin`) and oneDNN's. The library runs OpenBLAS on one thread
    /// inside each of its own, so it sets OpenBLAS's thread count to 1, process-wide, when it first
    /// reads or sets this count, and again before a GEMM where something else changed it: a
    /// host's own calls into the same OpenBLAS then run on one thread too. Results do not depend
    /// on the count beyond BLAS's own rounding. It starts at OpenBLAS's own choice
    /// (`OPENBLAS_NUM_THREADS`, else one per core); a server running one context per worker
    /// thread usually wants 1. `RMLP_ERR_INVALID_ARGUMENT` for 0 or more than 256 (the count then
    /// stays as it was). Process-wide: call it at startup or between batches, not while another
    /// thread is in a CPU model call.
    pub fn rmlp_set_cpu_threads(n_threads: u32) -> rmlp_status;
    /// The number of threads the CPU path uses now (see `rmlp_set_cpu_threads`).
    pub fn rmlp_cpu_threads() -> u32;
}
