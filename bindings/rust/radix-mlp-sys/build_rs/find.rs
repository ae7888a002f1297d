//! Finding an installed libradix_mlp: `RADIX_MLP_LIB_DIR`, then pkg-config, then the C
//! compiler's linker, then a `-L` folder of RUSTFLAGS. std only: the `pkg-config` program is run
//! as a command (build dependencies would be one more crate for every host to vendor).
use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where the library file was found.
pub enum Found {
    /// In this folder, named by the user or by pkg-config: the folder is handed on (an rpath for
    /// the shared library, its pkg-config files for the static one's dependencies).
    Named(PathBuf),
    /// Where the linker looks by itself (a system install): no search path is needed.
    System,
}

/// `pkg-config ARGS` with `extra_path` in front of `PKG_CONFIG_PATH`; its stdout on success, else
/// its stderr (or why it could not run) as the error.
pub fn pkg_config(extra_path: Option<&Path>, args: &[&str]) -> Result<String, String> {
    let mut cmd = Command::new(env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".into()));
    cmd.args(args);
    if let Some(dir) = extra_path {
        // The install's lib/pkgconfig, and the build folder's *-uninstalled.pc files.
        let mut path = vec![dir.join("pkgconfig"), dir.to_path_buf()];
        path.extend(env::var_os("PKG_CONFIG_PATH").iter().flat_map(env::split_paths));
        cmd.env("PKG_CONFIG_PATH", env::join_paths(path).map_err(|e| e.to_string())?);
    }
    let out = cmd.output().map_err(|e| format!("could not run pkg-config: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
    }
}

/// Whether an installed version `found` ("0.3.0") has the ABI of this crate's (the SONAME's:
/// major, and before 1.0 minor too).
fn same_abi(found: &str) -> bool {
    let abi = |v: &str| -> Vec<String> {
        let parts: Vec<String> = v.trim().split('.').map(str::to_string).collect();
        let n = if parts.first().map(String::as_str) == Some("0") { 2 } else { 1 };
        parts.into_iter().take(n).collect()
    };
    abi(found) == abi(env!("CARGO_PKG_VERSION"))
}

/// The folder where the C compiler's linker finds `file` by itself, if it does.
fn linker_finds(cc: &str, file: &str) -> bool {
    let Ok(out) = Command::new(cc).arg(format!("-print-file-name={file}")).output() else {
        return false;
    };
    let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    path.is_absolute() && path.exists()
}

/// A `-L` folder of RUSTFLAGS holding `file`, if there is one.
fn rustflags_dir(file: &str) -> Option<PathBuf> {
    let flags = env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    let mut args = flags.split('\u{1f}');
    while let Some(flag) = args.next() {
        let dir = match flag.strip_prefix("-L") {
            Some("") => args.next().unwrap_or(""),
            Some(dir) => dir,
            None => continue,
        };
        let dir = dir.split_once('=').map_or(dir, |(_, d)| d);
        if Path::new(dir).join(file).exists() {
            return Some(PathBuf::from(dir));
        }
    }
    None
}

/// An installed `file` (`libradix_mlp_plan.a`, ...) of library `name`, if there is one. `Err` when
/// `RADIX_MLP_LIB_DIR` names a folder without it (the user asked for that folder: no fallback).
pub fn installed(name: &str, file: &str, cc: &str) -> Result<Option<Found>, String> {
    if let Some(dir) = env::var("RADIX_MLP_LIB_DIR").ok().filter(|d| !d.is_empty()).map(PathBuf::from) {
        if !dir.join(file).exists() {
            return Err(format!(
                "RADIX_MLP_LIB_DIR={} has no {file}. Point it at the folder that holds it: the CMake build \
                 folder (cmake -S . -B build && cmake --build build), or the lib folder of \
                 `cmake --install build --prefix PREFIX`; or unset it to build the library from the \
                 sources this crate carries.",
                dir.display()
            ));
        }
        return Ok(Some(Found::Named(dir)));
    }
    if let Ok(dir) = pkg_config(None, &["--variable=libdir", name]) {
        let version = pkg_config(None, &["--modversion", name]).unwrap_or_default();
        if !same_abi(&version) {
            println!(
                "cargo:warning=radix-mlp-sys: ignoring {name} {version} of pkg-config (in {dir}): this crate is {}",
                env!("CARGO_PKG_VERSION")
            );
        } else if Path::new(&dir).join(file).exists() {
            return Ok(Some(Found::Named(PathBuf::from(dir))));
        }
    }
    if linker_finds(cc, file) {
        return Ok(Some(Found::System));
    }
    Ok(rustflags_dir(file).map(|_| Found::System))
}
