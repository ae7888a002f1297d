//! The binary and the tests find the shared libradix_mlp at run time without LD_LIBRARY_PATH: an
//! rpath to RADIX_MLP_LIB_DIR, the folder radix-mlp-sys links it from when that is set (this crate
//! does not depend on radix-mlp-sys directly, so its DEP_RADIX_MLP_LIBDIR does not reach here).
fn main() {
    println!("cargo:rerun-if-env-changed=RADIX_MLP_LIB_DIR");
    if let Some(dir) = std::env::var_os("RADIX_MLP_LIB_DIR") {
        let dir = std::path::Path::new(&dir);
        let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
        for sub in ["", "lib"] {
            println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.join(sub).display());
        }
    }
}
