//! Export Dolphin's ABI names beside the plain ones: `_SISCI_PUBLIC_FUNC_{ST,MT}_*` for every
//! function (version script), `_SISCI_PUBLIC_CONST_*` data symbols for every numeric
//! constant (generated from `src/consts/`), and the soname `libsisci.so`.

use std::fmt::Write as _;

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    println!("cargo:rerun-if-changed=libsisci.map");
    println!("cargo:rerun-if-changed=src/consts");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libsisci.so");
    println!("cargo:rustc-cdylib-link-arg=-Wl,--version-script={dir}/libsisci.map");
    // One `_SISCI_PUBLIC_CONST_<NAME>` per `pub const <NAME>: u32 = ...;` of the table.
    let mut out = String::new();
    let mut files: Vec<_> = std::fs::read_dir(format!("{dir}/src/consts"))
        .expect("src/consts")
        .map(|e| e.expect("entry").path())
        .collect();
    files.sort();
    for path in files {
        let text = std::fs::read_to_string(&path).expect("readable");
        for line in text.lines() {
            let Some(rest) = line.strip_prefix("pub const ") else { continue };
            let Some((name, _)) = rest.split_once(": u32 =") else { continue };
            writeln!(
                out,
                "/// Dolphin's data symbol for [`crate::consts::{name}`].\n\
                 #[unsafe(no_mangle)]\npub static _SISCI_PUBLIC_CONST_{name}: std::ffi::c_uint = crate::consts::{name};"
            )
            .expect("write to a string");
        }
    }
    let target =
        std::path::Path::new(&std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("abi_consts.rs");
    std::fs::write(target, out).expect("OUT_DIR is writable");
}
