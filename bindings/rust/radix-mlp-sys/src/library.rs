//! The library as a whole: its version (the SONAME carries the major version, and before 1.0 the
//! minor one too), what this build of it contains, and the threads and the fp32 GEMMs of the CPU
//! path.
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

/// Which library the CPU path's fp32 GEMMs run (`rmlp_cpu_sgemm`).
pub type rmlp_cpu_sgemm_kind = i32;
/// OpenBLAS's sgemm, which the library links, on the kernels OpenBLAS chose for this CPU.
pub const RMLP_CPU_SGEMM_OPENBLAS: rmlp_cpu_sgemm_kind = 1;
/// oneDNN's sgemm (`libdnnl.so.2`, Debian's libdnnl2, loaded at run time), on one thread inside
/// each of the library's: where OpenBLAS's kernels are for an older ISA than this CPU runs
/// (`RADIX_MLP_CPU_SGEMM=auto`), or when asked (`=onednn`).
pub const RMLP_CPU_SGEMM_ONEDNN: rmlp_cpu_sgemm_kind = 2;

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

    /// Which library the CPU path's fp32 GEMMs run, and why (`detail`, static storage: the
    /// library, its version and kernels, this CPU's ISA, what decided). Process-wide, made once
    /// (at the first CPU model load or the first call of this) and kept. OpenBLAS picks its
    /// kernels from the CPU models it knows; on a newer one it falls back to a generic core
    /// (Debian 12's OpenBLAS 0.3.21 on an Emerald Rapids Xeon: SSE3 kernels, about a fifth of the
    /// AVX-512 rate). `RADIX_MLP_CPU_SGEMM` decides: `auto` (unset too) runs OpenBLAS unless its
    /// kernels are narrower (AVX-512 > AVX2 + FMA > less) than this CPU's widest ISA and oneDNN's
    /// sgemm covers it and agrees with OpenBLAS's on a check product, then oneDNN; `openblas`;
    /// `onednn`. The two round differently (within 1e-6 relative), so a process's results stay
    /// those of one library. `RMLP_ERR_INVALID_ARGUMENT` for another value of the variable,
    /// `RMLP_ERR_UNSUPPORTED` for `onednn` where it cannot run (the message says why); a CPU
    /// model's load fails the same way.
    pub fn rmlp_cpu_sgemm(kind: *mut rmlp_cpu_sgemm_kind, detail: *mut *const c_char) -> rmlp_status;
}
