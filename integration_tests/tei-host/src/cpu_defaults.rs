//! What a CPU host sets for itself before libradix_mlp (and with it OpenBLAS) loads (issue 51).
//! OpenBLAS's idle threads busy-wait for 2^OPENBLAS_THREAD_TIMEOUT cycles after each of its calls
//! (2^28, about 0.1 s, by default): between two GEMMs they take the cores from the context's own
//! threads (elementwise passes, attention). OpenBLAS reads the variable once, in its constructor,
//! before `main` runs, so setting it from `main` is too late: unless the variable is set (a user's
//! value, even an empty one, is kept), tei-host starts itself again (exec: the same process id,
//! arguments and environment) with 4, the least OpenBLAS takes, as `radixmlp` does. The tokenizer
//! workers run `encode_batch` without the tokenizers package's own thread pool
//! (`TOKENIZERS_PARALLELISM=false` unless set): the workers are processes already, and a pool per
//! worker would compete with the forward for the same cores.
use std::ffi::{c_char, c_int, c_void};
use std::os::unix::process::CommandExt;
use std::process::Command;

/// The variable and the value tei-host sets when it is unset.
pub const SPIN_VAR: &str = "OPENBLAS_THREAD_TIMEOUT";
pub const SPIN_DEFAULT: &str = "4";

/// Starts this program again with `OPENBLAS_THREAD_TIMEOUT=4` unless the variable is set; returns
/// only when it is set or the restart failed (said on stderr: the host goes on with OpenBLAS's
/// default).
pub fn short_openblas_spin() {
    if std::env::var_os(SPIN_VAR).is_some() {
        return;
    }
    let mut args = std::env::args_os();
    let mut cmd = Command::new("/proc/self/exe");
    if let Some(arg0) = args.next() {
        cmd.arg0(arg0);
    }
    let err = cmd.args(args).env(SPIN_VAR, SPIN_DEFAULT).exec();
    eprintln!("tei-host: cannot start again with {SPIN_VAR}={SPIN_DEFAULT} ({err}); OpenBLAS keeps its long spin");
}

extern "C" {
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
}

/// What OpenBLAS read from `OPENBLAS_THREAD_TIMEOUT` when it loaded (its `openblas_thread_timeout`;
/// 0: unset, OpenBLAS's default), or None where the process has no OpenBLAS with that call.
pub fn openblas_thread_timeout() -> Option<i32> {
    // RTLD_DEFAULT (a null handle): the symbol in any object loaded into the process.
    let f = unsafe { dlsym(std::ptr::null_mut(), c"openblas_thread_timeout".as_ptr()) };
    if f.is_null() {
        return None;
    }
    let f: extern "C" fn() -> c_int = unsafe { std::mem::transmute(f) };
    Some(f())
}

/// The line tei-host prints at startup: what OpenBLAS's idle threads do.
pub fn spin_report() -> String {
    match openblas_thread_timeout() {
        Some(0) => format!("tei-host: OpenBLAS read no {SPIN_VAR}: its idle threads spin 2^28 cycles after each call"),
        Some(n) => format!("tei-host: OpenBLAS read {SPIN_VAR}={n}: its idle threads spin 2^{} cycles", n.clamp(4, 30)),
        None => format!(
            "tei-host: no OpenBLAS in the process ({SPIN_VAR}={})",
            std::env::var(SPIN_VAR).unwrap_or_else(|_| "unset".into())
        ),
    }
}

/// Sets `name` to `value` in `cmd` unless this process's environment has it.
pub fn default_env(cmd: &mut Command, name: &str, value: &str) {
    if std::env::var_os(name).is_none() {
        cmd.env(name, value);
    }
}
