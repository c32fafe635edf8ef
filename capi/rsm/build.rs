//! Link `librsm.so` as Solaris shipped it: soname `librsm.so.2`, the public functions
//! tagged with its symbol version `SUNWprivate_1.1`, nothing else exported.

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    println!("cargo:rerun-if-changed=librsm.map");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,librsm.so.2");
    println!("cargo:rustc-cdylib-link-arg=-Wl,--version-script={dir}/librsm.map");
}
