//! This crate's own tests, examples and doctests find the shared libradix_mlp at run time without
//! `LD_LIBRARY_PATH`: an rpath to the folder radix-mlp-sys linked it from (`DEP_RADIX_MLP_LIBDIR`,
//! set when that folder came from `RADIX_MLP_LIB_DIR` or pkg-config). A host's binary does the same
//! in its own build script (docs/building.md, "From Rust"), as link arguments do not propagate.
fn main() {
    if let Ok(dir) = std::env::var("DEP_RADIX_MLP_LIBDIR") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
}
