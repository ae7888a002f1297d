//! Links libradix_mlp. The library directory comes from `RADIX_MLP_LIB_DIR` (a CMake build
//! or install folder), else from `pkg-config --variable=libdir radix_mlp`; with neither the
//! system linker paths are used. `RADIX_MLP_STATIC=1` links libradix_mlp.a instead.
use std::env;
use std::process::Command;

fn pkg_config_libdir() -> Option<String> {
    let out = Command::new("pkg-config")
        .args(["--variable=libdir", "radix_mlp"])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let dir = String::from_utf8(out.stdout).ok()?.trim().to_string();
    if dir.is_empty() {
        None
    } else {
        Some(dir)
    }
}

fn main() {
    println!("cargo:rerun-if-env-changed=RADIX_MLP_LIB_DIR");
    println!("cargo:rerun-if-env-changed=RADIX_MLP_STATIC");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    let dir = env::var("RADIX_MLP_LIB_DIR").ok().filter(|d| !d.is_empty()).or_else(pkg_config_libdir);
    if let Some(dir) = &dir {
        println!("cargo:rustc-link-search=native={dir}");
        println!("cargo:root={dir}");
    }
    if env::var("RADIX_MLP_STATIC").map(|v| v == "1").unwrap_or(false) {
        println!("cargo:rustc-link-lib=static=radix_mlp");
        println!("cargo:rustc-link-lib=dylib=m");
        println!("cargo:rustc-link-lib=dylib=pthread");
        println!("cargo:rustc-link-lib=dylib=dl");
        println!("cargo:rustc-link-lib=dylib=rt");
    } else {
        println!("cargo:rustc-link-lib=dylib=radix_mlp");
    }
}
