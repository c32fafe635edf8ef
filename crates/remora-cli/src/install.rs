//! `remora install --prefix DIR`: what a C program needs, where Dolphin's layout puts it.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The hand-written headers, embedded at build time.
const HEADERS: &[(&str, &str)] = &[
    ("sisci_api.h", include_str!("../../../include/sisci_api.h")),
    ("sisci_types.h", include_str!("../../../include/sisci_types.h")),
    ("sisci_error.h", include_str!("../../../include/sisci_error.h")),
    ("dis_types.h", include_str!("../../../include/dis_types.h")),
    ("scif.h", include_str!("../../../include/scif.h")),
    ("rsmapi.h", include_str!("../../../include/rsmapi.h")),
    ("sys/rsm/rsm_common.h", include_str!("../../../include/sys/rsm/rsm_common.h")),
    ("sys/rsm/rsmapi_common.h", include_str!("../../../include/sys/rsm/rsmapi_common.h")),
    ("vipl.h", include_str!("../../../include/vipl.h")),
];

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

fn copy(from: &Path, to: &Path) -> Result<(), String> {
    // Copy to a temporary name and rename, so a running program keeps its old file.
    let tmp = to.with_extension("remora-new");
    std::fs::copy(from, &tmp).map_err(|e| format!("{} -> {}: {e}", from.display(), tmp.display()))?;
    std::fs::rename(&tmp, to).map_err(|e| format!("{}: {e}", to.display()))
}

/// Where the build put `name`: beside this executable.
fn built(name: &str) -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let p = exe.parent().map(|d| d.join(name)).ok_or("no executable directory")?;
    if p.exists() {
        Ok(p)
    } else {
        Err(format!("{} not found: run `cargo build --release --workspace` first", p.display()))
    }
}

/// The systemd unit of a node: instance `N` runs node `N` in `/run/remora` (shared by every
/// user of the host, as `/tmp` is, so their programs reach it; access lists decide the rest).
fn systemd_unit(remorad: &Path) -> String {
    format!(
        "[Unit]\n\
         Description=Remora node %i (software remote-memory interconnect)\n\
         After=network-online.target\n\
         Wants=network-online.target\n\
         \n\
         [Service]\n\
         Type=simple\n\
         ExecStart={} --node %i --runtime-dir /run/remora\n\
         Environment=REMORA_LOG=info\n\
         RuntimeDirectory=remora\n\
         RuntimeDirectoryMode=1777\n\
         RuntimeDirectoryPreserve=yes\n\
         LimitMEMLOCK=infinity\n\
         Restart=on-failure\n\
         \n\
         [Install]\n\
         WantedBy=multi-user.target\n",
        remorad.display()
    )
}

/// Install `from` at `to`; with `strip`, without its debug information, which goes beside
/// it in `.debug/NAME.debug` (where gdb looks, through the debug link the stripped file
/// carries). Without `objcopy` on the machine the file is copied whole.
fn place(from: &Path, to: &Path, strip: bool) -> Result<(), String> {
    let objcopy_ok =
        strip && Command::new("objcopy").arg("--version").output().is_ok_and(|o| o.status.success());
    if !objcopy_ok {
        return copy(from, to);
    }
    let dir = to.parent().ok_or("no directory")?.join(".debug");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let name = to.file_name().ok_or("no file name")?.to_string_lossy().into_owned();
    let debug = dir.join(format!("{name}.debug"));
    let tmp = to.with_extension("remora-new");
    let run = |args: &[&std::ffi::OsStr]| -> Result<(), String> {
        let o = Command::new("objcopy").args(args).output().map_err(|e| format!("objcopy: {e}"))?;
        if o.status.success() {
            Ok(())
        } else {
            Err(format!("objcopy {args:?}: {}", String::from_utf8_lossy(&o.stderr)))
        }
    };
    run(&["--only-keep-debug".as_ref(), from.as_os_str(), debug.as_os_str()])?;
    let link = format!("--add-gnu-debuglink={}", debug.display());
    run(&["--strip-debug".as_ref(), link.as_ref(), from.as_os_str(), tmp.as_os_str()])?;
    std::fs::rename(&tmp, to).map_err(|e| format!("{}: {e}", to.display()))
}

/// The pkg-config file of one library.
fn pc_file(prefix: &Path, name: &str, what: &str, cflags: &str) -> String {
    format!(
        "prefix={}\nincludedir=${{prefix}}/include\nlibdir=${{prefix}}/lib64\n\n\
         Name: {name}\nDescription: Remora's {what}\n\
         Version: {}\nCflags: -I${{includedir}}{cflags}\nLibs: -L${{libdir}} -Wl,-rpath,${{libdir}} -l{name}\n",
        prefix.display(),
        env!("CARGO_PKG_VERSION")
    )
}

/// `remora install --prefix DIR [--no-strip]`.
pub fn install(prefix: &Path, strip: bool) -> Result<(), String> {
    let inc = prefix.join("include");
    let dis = inc.join("dis");
    let lib = prefix.join("lib64");
    let bin = prefix.join("bin");
    let pkg = prefix.join("share/pkgconfig");
    let ld = prefix.join("etc/ld.so.conf.d");
    for d in [
        &inc,
        &dis,
        &lib,
        &bin,
        &lib.join("pkgconfig"),
        &pkg,
        &ld,
        &inc.join("sys/rsm"),
        &dis.join("sys/rsm"),
    ] {
        std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
    }
    for (name, text) in HEADERS {
        write(&inc.join(name), text)?;
        // Programs that add -I/opt/DIS/include/dis find the same headers there.
        write(&dis.join(name), text)?;
    }
    place(&built("libsisci.so")?, &lib.join("libsisci.so"), strip)?;
    // libscif as MPSS shipped it: the versioned file, its soname link and the dev link.
    place(&built("libscif.so")?, &lib.join("libscif.so.0.0.1"), strip)?;
    for link in ["libscif.so.0", "libscif.so"] {
        let p = lib.join(link);
        let _ = std::fs::remove_file(&p);
        std::os::unix::fs::symlink("libscif.so.0.0.1", &p).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    // librsm as Solaris shipped it: the soname file and the dev link.
    place(&built("librsm.so")?, &lib.join("librsm.so.2"), strip)?;
    let p = lib.join("librsm.so");
    let _ = std::fs::remove_file(&p);
    std::os::unix::fs::symlink("librsm.so.2", &p).map_err(|e| format!("{}: {e}", p.display()))?;
    // libvipl: the soname file and the dev link.
    place(&built("libvipl.so")?, &lib.join("libvipl.so.1"), strip)?;
    let p = lib.join("libvipl.so");
    let _ = std::fs::remove_file(&p);
    std::os::unix::fs::symlink("libvipl.so.1", &p).map_err(|e| format!("{}: {e}", p.display()))?;
    place(&built("remorad")?, &bin.join("remorad"), strip)?;
    place(&built("remora")?, &bin.join("remora"), strip)?;
    // One node per instance: `systemctl enable --now remorad@4`.
    let unit_dir = prefix.join("lib/systemd/system");
    std::fs::create_dir_all(&unit_dir).map_err(|e| format!("{}: {e}", unit_dir.display()))?;
    write(&unit_dir.join("remorad@.service"), &systemd_unit(&bin.join("remorad")))?;
    // pkg-config files where pkg-config looks for a system prefix (share/pkgconfig) and
    // where Dolphin's layout puts them (lib64/pkgconfig).
    for (name, what, cflags) in [
        ("sisci", "SISCI API (software remote-memory interconnect)", " -D_REENTRANT"),
        ("scif", "SCIF API (Intel Symmetric Communications Interface)", ""),
        ("rsm", "RSMAPI (Sun's Remote Shared Memory API)", ""),
        ("vipl", "VIPL (the VI Provider Library of VIA 1.0)", ""),
    ] {
        let text = pc_file(prefix, name, what, cflags);
        write(&lib.join(format!("pkgconfig/{name}.pc")), &text)?;
        write(&pkg.join(format!("{name}.pc")), &text)?;
    }
    // Manual pages, generated from the command-line definitions.
    let man1 = prefix.join("share/man/man1");
    let man8 = prefix.join("share/man/man8");
    for d in [&man1, &man8] {
        std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
    }
    let mut page = Vec::new();
    {
        use clap::CommandFactory;
        clap_mangen::Man::new(crate::Cli::command()).render(&mut page).map_err(|e| e.to_string())?;
    }
    std::fs::write(man1.join("remora.1"), &page).map_err(|e| format!("remora.1: {e}"))?;
    let o =
        Command::new(bin.join("remorad")).arg("--man").output().map_err(|e| format!("remorad --man: {e}"))?;
    if !o.status.success() {
        return Err(format!("remorad --man: {}", String::from_utf8_lossy(&o.stderr)));
    }
    std::fs::write(man8.join("remorad.8"), &o.stdout).map_err(|e| format!("remorad.8: {e}"))?;
    // For programs built without a run path: the line a system's ld.so.conf.d takes.
    write(&ld.join("remora.conf"), &format!("{}\n", lib.display()))?;
    println!("installed Remora under {}", prefix.display());
    for (api, lib_name) in [("a SISCI", "sisci"), ("a SCIF", "scif"), ("an RSM", "rsm"), ("a VIPL", "vipl")] {
        println!(
            "  build {api} program:{:pad$}cc -I {1}/include prog.c -L {1}/lib64 -Wl,-rpath,{1}/lib64 -l{lib_name}",
            "",
            prefix.display(),
            pad = 10 - api.len()
        );
    }
    let searched = Command::new("pkg-config")
        .args(["--variable", "pc_path", "pkg-config"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).split(':').any(|d| Path::new(d.trim()) == pkg))
        .unwrap_or(false);
    if !searched {
        println!("  for pkg-config:         export PKG_CONFIG_PATH={}", pkg.display());
    }
    println!(
        "  without a run path:     cp {} /etc/ld.so.conf.d/ && ldconfig",
        ld.join("remora.conf").display()
    );
    Ok(())
}
