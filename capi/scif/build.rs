//! Link `libscif.so` as MPSS did: soname `libscif.so.0`, every function tagged `SCIF_0.0`.

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    println!("cargo:rerun-if-changed=libscif.map");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libscif.so.0");
    println!("cargo:rustc-cdylib-link-arg=-Wl,--version-script={dir}/libscif.map");
}
