//! Finds libfabric with `pkg-config`; when it is there, compiles `shim.c` against its headers
//! (the library is loaded at run time) and sets the cfg `remora_ofi`. Without it the crate still builds, and every call answers that
//! libfabric is not installed.

use std::process::Command;

fn pkg(args: &[&str]) -> Option<String> {
    let out = Command::new("pkg-config").args(args).arg("libfabric").output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    println!("cargo::rustc-check-cfg=cfg(remora_ofi)");
    println!("cargo::rerun-if-changed=shim.c");
    println!("cargo::rerun-if-env-changed=REMORA_NO_LIBFABRIC");
    println!("cargo::rerun-if-env-changed=PKG_CONFIG_PATH");
    if std::env::var_os("REMORA_NO_LIBFABRIC").is_some() {
        return;
    }
    let (Some(cflags), Some(libs)) = (pkg(&["--cflags"]), pkg(&["--libs"])) else {
        println!("cargo::warning=libfabric not found by pkg-config: the ofi transport answers that it is not installed (apt-get install libfabric-dev)");
        return;
    };
    let mut b = cc::Build::new();
    b.file("shim.c").warnings(true).extra_warnings(true);
    for f in cflags.split_whitespace() {
        if let Some(dir) = f.strip_prefix("-I") {
            b.include(dir);
        } else {
            b.flag(f);
        }
    }
    b.compile("remora_ofi_shim");
    // libfabric itself is loaded at run time (dlopen, see shim.c), not linked.
    let _ = libs;
    println!("cargo::rustc-link-lib=dl");
    println!("cargo::rustc-cfg=remora_ofi");
}
