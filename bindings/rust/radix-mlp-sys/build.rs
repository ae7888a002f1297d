//! Links libradix_mlp.
//!
//! * Which (Cargo features): the planner alone (`libradix_mlp_plan`, libc only) unless `full`
//!   (the whole library); statically unless `shared`. The default, the planner statically, is what
//!   a host that keeps its own model code (text-embeddings-inference) needs, and needs nothing
//!   set: `compute_fold_and_scatter` links with one dependency line.
//! * Where: `RADIX_MLP_LIB_DIR` (a CMake build folder, or the `lib` folder of `cmake --install`),
//!   else the `libdir` of `pkg-config radix_mlp` / `radix_mlp_plan` (`PKG_CONFIG_PATH`; one of
//!   another ABI version is passed over), else wherever the C compiler's linker looks (an install
//!   into /usr/local) or a `-L` folder of RUSTFLAGS; found nowhere, the library is built from the
//!   sources this crate carries (`csrc/`, build_rs/from_source.rs): the planner with the C
//!   compiler alone, the whole library with CMake.
//! * A static `full` link brings what libradix_mlp.a needs: the `Libs.private` of
//!   `pkg-config --static radix_mlp` (OpenBLAS, jansson, and in a CUDA build the static CUDA
//!   runtime and libstdc++).
//! * Run time: with a shared library from a known folder, this package's own tests get an rpath
//!   to it, and dependents get the folder as `DEP_RADIX_MLP_LIBDIR` (the `links` metadata) to put
//!   in their own binaries' rpath (see docs/building.md, "From Rust"). `DEP_RADIX_MLP_INCLUDE` is
//!   the folder of radix_mlp.h.
use std::env;
use std::path::PathBuf;
use std::process::exit;

#[path = "build_rs/find.rs"]
mod find;
#[path = "build_rs/from_source.rs"]
mod from_source;

use find::Found;

/// Stops the build with `message` (cargo shows a build script's stderr when it fails).
fn stop(message: &str) -> ! {
    eprintln!("\nradix-mlp-sys: {message}\n");
    exit(1)
}

fn main() {
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-env-changed=RADIX_MLP_LIB_DIR");
    let full = env::var_os("CARGO_FEATURE_FULL").is_some();
    let shared = env::var_os("CARGO_FEATURE_SHARED").is_some();
    let name = if full { "radix_mlp" } else { "radix_mlp_plan" };
    let file = if shared { format!("lib{name}.so") } else { format!("lib{name}.a") };
    let csrc = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR")).join("csrc");
    println!("cargo:include={}", csrc.join("ffi/include").display());
    if env::var_os("DOCS_RS").is_some() {
        return; // documentation builds link nothing
    }

    let cc = from_source::tool("CC", "cc");
    let found = find::installed(name, &file, &cc).unwrap_or_else(|e| stop(&e));
    let dir = match found {
        Some(Found::Named(dir)) => {
            println!("cargo:rerun-if-changed={}", dir.join(&file).display()); // relink a rebuilt library
            Some(dir)
        }
        Some(Found::System) => None,
        None => {
            let built =
                if full { from_source::full(&csrc, &cc, shared) } else { from_source::planner(&csrc, &cc, shared) };
            Some(built.unwrap_or_else(|e| {
                stop(&format!(
                    "no installed {file} was found (RADIX_MLP_LIB_DIR, pkg-config {name}, the linker's folders), \
                     and building it from the sources in {} failed:\n{e}\n\nInstall the library \
                     (cmake -S . -B build && cmake --install build) and set RADIX_MLP_LIB_DIR=PREFIX/lib or \
                     PKG_CONFIG_PATH=PREFIX/lib/pkgconfig, or fix what the build says.",
                    csrc.display()
                ))
            }))
        }
    };

    if let Some(dir) = &dir {
        println!("cargo:rustc-link-search=native={}", dir.display());
        println!("cargo:root={}", dir.display());
    }
    if shared {
        println!("cargo:rustc-link-lib=dylib={name}");
        if let Some(dir) = &dir {
            // This package's tests find the library at run time; dependents get the folder as
            // DEP_RADIX_MLP_LIBDIR (link args do not propagate to other packages' binaries).
            println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.display());
            println!("cargo:libdir={}", dir.display());
        }
        return;
    }
    println!("cargo:rustc-link-lib=static={name}");
    if !full {
        return; // the planner needs libc only
    }
    // What libradix_mlp.a needs, as its pkg-config file lists it.
    let flags = find::pkg_config(dir.as_deref(), &["--static", "--libs", name]).unwrap_or_else(|e| {
        stop(&format!(
            "a static link of the whole library (feature `full` without `shared`) takes libradix_mlp.a's \
             dependencies from `pkg-config --static --libs radix_mlp` (radix_mlp.pc beside the library, or on \
             PKG_CONFIG_PATH), which failed: {e}"
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
        } else if flag == "-pthread" {
            println!("cargo:rustc-link-lib=dylib=pthread");
        } else {
            println!("cargo:warning=radix-mlp-sys: ignoring `{flag}` of `pkg-config --static --libs {name}`");
        }
    }
}
