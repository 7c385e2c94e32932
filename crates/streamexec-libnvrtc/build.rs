//! Gives the shared library the soname NVIDIA's NVRTC 12 has, so programs linked with
//! `-lnvrtc` (which record `libnvrtc.so.12`) find this one through `LD_LIBRARY_PATH`.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libnvrtc.so.12");
}
