//! Export Dolphin's ABI names (`_SISCI_PUBLIC_FUNC_{ST,MT}_*`) beside the plain ones.

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    println!("cargo:rerun-if-changed=libsisci.map");
    println!("cargo:rustc-cdylib-link-arg=-Wl,--version-script={dir}/libsisci.map");
}
