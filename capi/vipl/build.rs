//! Link `libvipl.so` with a soname (`libvipl.so.1`) and nothing exported but the `Vip*`
//! calls.

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    println!("cargo:rerun-if-changed=libvipl.map");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libvipl.so.1");
    println!("cargo:rustc-cdylib-link-arg=-Wl,--version-script={dir}/libvipl.map");
}
