//! What a CPU host sets for itself and says at startup. The tokenizer workers run `encode_batch`
//! without the tokenizers package's own thread pool (`TOKENIZERS_PARALLELISM=false` unless set):
//! the workers are processes already, and a pool per worker would compete with the forward for the
//! same cores. The library runs its GEMMs on its own threads (`--cpu-threads`), each one
//! single-threaded OpenBLAS call, and sets OpenBLAS's own count to 1 (docs/backends.md, CPU
//! threads): OpenBLAS's threads never get work, so their idle spin (`OPENBLAS_THREAD_TIMEOUT`) does
//! not matter and the host leaves it alone; the startup line says both counts as they are. A second
//! line says which library runs the fp32 GEMMs and why (`radix_mlp::cpu_sgemm`: OpenBLAS, or
//! oneDNN's sgemm where OpenBLAS has only generic kernels for this CPU).
use std::ffi::{c_char, c_int, c_void};
use std::process::Command;

/// Sets `name` to `value` in `cmd` unless this process's environment has it.
pub fn default_env(cmd: &mut Command, name: &str, value: &str) {
    if std::env::var_os(name).is_none() {
        cmd.env(name, value);
    }
}

extern "C" {
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
}

/// OpenBLAS's own thread count now (its `openblas_get_num_threads`), or None where the process has
/// no OpenBLAS with that call.
pub fn openblas_threads() -> Option<i32> {
    // RTLD_DEFAULT (a null handle): the symbol in any object loaded into the process.
    let f = unsafe { dlsym(std::ptr::null_mut(), c"openblas_get_num_threads".as_ptr()) };
    if f.is_null() {
        return None;
    }
    let f: extern "C" fn() -> c_int = unsafe { std::mem::transmute(f) };
    Some(f())
}

/// The line tei-host prints at startup: the CPU path's thread count and OpenBLAS's inside each.
/// Reading the library's count first is what makes it set OpenBLAS's to 1, so read it before.
pub fn threads_report() -> String {
    let n = radix_mlp::cpu_threads();
    match openblas_threads() {
        Some(m) => format!("tei-host: the CPU path runs on {n} threads, OpenBLAS on {m} inside each"),
        None => format!("tei-host: the CPU path runs on {n} threads, no OpenBLAS in the process"),
    }
}

/// The startup line on the CPU path's fp32 GEMMs: which library runs them and why
/// (`radix_mlp::cpu_sgemm`), or the library's refusal of `RADIX_MLP_CPU_SGEMM` (the model's load
/// then fails with the same message).
pub fn sgemm_report() -> String {
    match radix_mlp::cpu_sgemm() {
        Ok((_, detail)) => format!("tei-host: the CPU path's fp32 GEMMs: {detail}"),
        Err(e) => format!("tei-host: the CPU path's fp32 GEMMs: {e}"),
    }
}
