//! What a host binary adds to find the shared libradix_mlp at run time without `LD_LIBRARY_PATH`:
//! an rpath to the folder radix-mlp-sys linked it from (unset for static and system installs).
fn main() {
    if let Ok(dir) = std::env::var("DEP_RADIX_MLP_LIBDIR") {
        println!("cargo:rustc-link-arg-bins=-Wl,-rpath,{dir}");
    }
}
