//! Gives the shared library the soname NVIDIA's driver has, so programs linked with
//! `-lcuda` (which record `libcuda.so.1`) find this one through `LD_LIBRARY_PATH`.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libcuda.so.1");
}
