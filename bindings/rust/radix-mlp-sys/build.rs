//! Links libradix_mlp.
//!
//! * Where: `RADIX_MLP_LIB_DIR` (a CMake build folder, or the `lib` folder of `cmake --install`),
//!   else the `libdir` of `pkg-config radix_mlp` (`PKG_CONFIG_PATH`), else wherever the C
//!   compiler's linker looks (an install into /usr/local). Found nowhere, the build stops with a
//!   message saying what to set, rather than a linker error about `-lradix_mlp`.
//! * Which: the shared library; `RADIX_MLP_STATIC=1` links `libradix_mlp.a` and what it needs (the
//!   `Libs.private` of `pkg-config --static radix_mlp`: OpenBLAS, jansson, and in a CUDA build the
//!   static CUDA runtime and libstdc++); `RADIX_MLP_PLAN_ONLY=1` links the planner alone
//!   (`libradix_mlp_plan`, libc only) for hosts that call no model function.
//! * Run time: with the shared library from a folder named above, this package's own tests get an
//!   rpath to it, and dependents get the folder as `DEP_RADIX_MLP_LIBDIR` (the `links` metadata) to
//!   put in their own binaries' rpath (see docs/building.md, "From Rust").
use std::env;
use std::path::{Path, PathBuf};
use std::process::{exit, Command};

/// Stops the build with `message` (cargo shows a build script's stderr when it fails).
fn stop(message: &str) -> ! {
    eprintln!("\nradix-mlp-sys: {message}\n");
    exit(1)
}

fn env_flag(name: &str) -> bool {
    println!("cargo:rerun-if-env-changed={name}");
    env::var(name).map(|v| v == "1").unwrap_or(false)
}

/// `pkg-config ARGS` with `extra_path` in front of `PKG_CONFIG_PATH`; its stdout on success, else
/// its stderr (or why it could not run) as the error.
fn pkg_config(extra_path: Option<&Path>, args: &[&str]) -> Result<String, String> {
    let mut cmd = Command::new("pkg-config");
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

/// The folder where the C compiler's linker finds `file` by itself, if it does.
fn linker_finds(file: &str) -> Option<PathBuf> {
    let cc = env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(cc).arg(format!("-print-file-name={file}")).output().ok()?;
    let path = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
    (path.is_absolute() && path.exists()).then(|| path.parent().map(Path::to_path_buf)).flatten()
}

/// Whether RUSTFLAGS carry a library search path (`-L`).
fn rustflags_search_path() -> bool {
    let flags = env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    flags.split('\u{1f}').any(|flag| flag.starts_with("-L"))
}

fn main() {
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-env-changed=RADIX_MLP_LIB_DIR");
    let link_static = env_flag("RADIX_MLP_STATIC");
    let name = if env_flag("RADIX_MLP_PLAN_ONLY") { "radix_mlp_plan" } else { "radix_mlp" };
    let file = if link_static { format!("lib{name}.a") } else { format!("lib{name}.so") };
    if env::var_os("DOCS_RS").is_some() {
        return; // documentation builds link nothing
    }

    let lib_dir = env::var("RADIX_MLP_LIB_DIR").ok().filter(|d| !d.is_empty()).map(PathBuf::from);
    let (dir, named) = if let Some(dir) = lib_dir {
        if !dir.join(&file).exists() {
            stop(&format!(
                "RADIX_MLP_LIB_DIR={} has no {file}. Point it at the folder that holds it: the CMake build \
                 folder (cmake -S . -B build && cmake --build build), or the lib folder of \
                 `cmake --install build --prefix PREFIX`.",
                dir.display()
            ));
        }
        (Some(dir), true)
    } else if let Ok(dir) = pkg_config(None, &["--variable=libdir", name]) {
        (Some(PathBuf::from(dir)), true)
    } else {
        (linker_finds(&file), false)
    };
    let dir = match dir {
        Some(dir) => dir,
        None if rustflags_search_path() => {
            // The host passes a search path of its own (RUSTFLAGS=-L...): trust it.
            println!("cargo:rustc-link-lib=dylib={name}");
            return;
        }
        None => stop(&format!(
            "{file} not found. Tell the build where libradix_mlp is, one of:\n  \
             RADIX_MLP_LIB_DIR=/path/to/radix-mlp/build   (a CMake build folder, or the lib folder of an install)\n  \
             PKG_CONFIG_PATH=PREFIX/lib/pkgconfig          (after `cmake --install build --prefix PREFIX`)\n\
             or install it where the linker looks (cmake --install build --prefix /usr/local)."
        )),
    };

    println!("cargo:rustc-link-search=native={}", dir.display());
    println!("cargo:root={}", dir.display());
    if !link_static {
        println!("cargo:rustc-link-lib=dylib={name}");
        if named {
            // This package's tests find the library at run time; dependents get the folder as
            // DEP_RADIX_MLP_LIBDIR (link args do not propagate to other packages' binaries).
            println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.display());
            println!("cargo:libdir={}", dir.display());
        }
        return;
    }
    println!("cargo:rustc-link-lib=static={name}");
    if name == "radix_mlp_plan" {
        return; // the planner needs libc only
    }
    // What libradix_mlp.a needs, as its pkg-config file lists it.
    let pc_dir = named.then_some(dir.as_path());
    let flags = pkg_config(pc_dir, &["--static", "--libs", name]).unwrap_or_else(|e| {
        stop(&format!(
            "RADIX_MLP_STATIC=1 takes libradix_mlp.a's dependencies from `pkg-config --static --libs radix_mlp` \
             (radix_mlp.pc in {}, or on PKG_CONFIG_PATH), which failed: {e}",
            dir.display()
        ))
    });
    for flag in flags.split_whitespace() {
        if let Some(path) = flag.strip_prefix("-L") {
            println!("cargo:rustc-link-search=native={path}");
        } else if let Some(lib) = flag.strip_prefix("-l") {
            if lib != name {
                // The linker takes a static archive (libcudart_static.a) when that is all there is.
                println!("cargo:rustc-link-lib=dylib={lib}");
            }
        } else {
            println!("cargo:warning=radix-mlp-sys: ignoring `{flag}` of `pkg-config --static --libs {name}`");
        }
    }
}
