//! `remora install --prefix DIR`: what a C program needs, where Dolphin's layout puts it.

use std::path::{Path, PathBuf};

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

pub fn install(prefix: &Path) -> Result<(), String> {
    let inc = prefix.join("include");
    let dis = inc.join("dis");
    let lib = prefix.join("lib64");
    let bin = prefix.join("bin");
    for d in [&inc, &dis, &lib, &bin, &lib.join("pkgconfig"), &inc.join("sys/rsm"), &dis.join("sys/rsm")] {
        std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
    }
    for (name, text) in HEADERS {
        write(&inc.join(name), text)?;
        // Programs that add -I/opt/DIS/include/dis find the same headers there.
        write(&dis.join(name), text)?;
    }
    copy(&built("libsisci.so")?, &lib.join("libsisci.so"))?;
    // libscif as MPSS shipped it: the versioned file, its soname link and the dev link.
    copy(&built("libscif.so")?, &lib.join("libscif.so.0.0.1"))?;
    for link in ["libscif.so.0", "libscif.so"] {
        let p = lib.join(link);
        let _ = std::fs::remove_file(&p);
        std::os::unix::fs::symlink("libscif.so.0.0.1", &p).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    // librsm as Solaris shipped it: the soname file and the dev link.
    copy(&built("librsm.so")?, &lib.join("librsm.so.2"))?;
    let p = lib.join("librsm.so");
    let _ = std::fs::remove_file(&p);
    std::os::unix::fs::symlink("librsm.so.2", &p).map_err(|e| format!("{}: {e}", p.display()))?;
    copy(&built("remorad")?, &bin.join("remorad"))?;
    // One node per instance: `systemctl enable --now remorad@4`.
    let unit_dir = prefix.join("lib/systemd/system");
    std::fs::create_dir_all(&unit_dir).map_err(|e| format!("{}: {e}", unit_dir.display()))?;
    write(&unit_dir.join("remorad@.service"), &systemd_unit(&bin.join("remorad")))?;
    copy(&built("remora")?, &bin.join("remora"))?;
    let pc = format!(
        "prefix={}\nincludedir=${{prefix}}/include\nlibdir=${{prefix}}/lib64\n\n\
         Name: sisci\nDescription: Remora's SISCI API (software remote-memory interconnect)\n\
         Version: {}\nCflags: -I${{includedir}} -D_REENTRANT\nLibs: -L${{libdir}} -Wl,-rpath,${{libdir}} -lsisci\n",
        prefix.display(),
        env!("CARGO_PKG_VERSION")
    );
    write(&lib.join("pkgconfig/sisci.pc"), &pc)?;
    let pc = format!(
        "prefix={}\nincludedir=${{prefix}}/include\nlibdir=${{prefix}}/lib64\n\n\
         Name: scif\nDescription: Remora's SCIF API (Intel Symmetric Communications Interface)\n\
         Version: {}\nCflags: -I${{includedir}}\nLibs: -L${{libdir}} -Wl,-rpath,${{libdir}} -lscif\n",
        prefix.display(),
        env!("CARGO_PKG_VERSION")
    );
    write(&lib.join("pkgconfig/scif.pc"), &pc)?;
    let pc = format!(
        "prefix={}\nincludedir=${{prefix}}/include\nlibdir=${{prefix}}/lib64\n\n\
         Name: rsm\nDescription: Remora's RSMAPI (Sun's Remote Shared Memory API)\n\
         Version: {}\nCflags: -I${{includedir}}\nLibs: -L${{libdir}} -Wl,-rpath,${{libdir}} -lrsm\n",
        prefix.display(),
        env!("CARGO_PKG_VERSION")
    );
    write(&lib.join("pkgconfig/rsm.pc"), &pc)?;
    println!("installed Remora under {}", prefix.display());
    println!(
        "  build a SISCI program:  cc -I {0}/include prog.c -L {0}/lib64 -Wl,-rpath,{0}/lib64 -lsisci",
        prefix.display()
    );
    println!(
        "  build a SCIF program:   cc -I {0}/include prog.c -L {0}/lib64 -Wl,-rpath,{0}/lib64 -lscif",
        prefix.display()
    );
    println!(
        "  build an RSM program:   cc -I {0}/include prog.c -L {0}/lib64 -Wl,-rpath,{0}/lib64 -lrsm",
        prefix.display()
    );
    Ok(())
}
