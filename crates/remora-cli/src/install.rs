//! `remora install --prefix DIR`: what a C program needs, where Dolphin's layout puts it
//! (`lib64`) and where C compilers and the runtime loader look (`lib`, links to the same
//! files); every path is written through a temporary name renamed into place (never through
//! a link already there) and recorded once written (`install/record.rs`), so that
//! `remora install --uninstall` removes exactly that. `install/loader.rs` tells whether the
//! loader searches the prefix's `lib` or `lib64` and refreshes its cache.

mod loader;
mod record;

use record::Record;
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
fn place(rec: &mut Record, from: &Path, to: &Path, strip: bool) -> Result<(), String> {
    let objcopy_ok =
        strip && Command::new("objcopy").arg("--version").output().is_ok_and(|o| o.status.success());
    if !objcopy_ok {
        return rec.copy(from, to);
    }
    let dir = to.parent().ok_or("no directory")?.join(".debug");
    rec.dir(&dir)?;
    let name = to.file_name().ok_or("no file name")?.to_string_lossy().into_owned();
    let debug = dir.join(format!("{name}.debug"));
    let run = |args: &[&std::ffi::OsStr]| -> Result<(), String> {
        let o = Command::new("objcopy").args(args).output().map_err(|e| format!("objcopy: {e}"))?;
        if o.status.success() {
            Ok(())
        } else {
            Err(format!("objcopy {args:?}: {}", String::from_utf8_lossy(&o.stderr)))
        }
    };
    rec.made(&debug, |tmp| run(&["--only-keep-debug".as_ref(), from.as_os_str(), tmp.as_os_str()]))?;
    let debuglink = format!("--add-gnu-debuglink={}", debug.display());
    rec.made(to, |tmp| {
        run(&["--strip-debug".as_ref(), debuglink.as_ref(), from.as_os_str(), tmp.as_os_str()])
    })
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

/// The libraries: the file the build makes, the name it is installed as (its soname but
/// for libsisci, which Dolphin ships unversioned), and the links beside it.
const LIBS: &[(&str, &str, &[&str])] = &[
    ("libsisci.so", "libsisci.so", &[]),
    // libscif as MPSS shipped it: the versioned file, its soname link and the dev link.
    ("libscif.so", "libscif.so.0.0.1", &["libscif.so.0", "libscif.so"]),
    // librsm as Solaris shipped it: the soname file and the dev link.
    ("librsm.so", "librsm.so.2", &["librsm.so"]),
    // libvipl: the soname file and the dev link.
    ("libvipl.so", "libvipl.so.1", &["libvipl.so"]),
];

/// The prefixes whose `include` and `lib` every C compiler of the system searches.
fn compiler_searches(prefix: &Path) -> bool {
    [Path::new("/usr/local"), Path::new("/usr")].contains(&prefix)
}

/// `prefix` absolute and without `.` or `..` parts (the paths written into the pkg-config
/// files, the unit and the manifest must not depend on the directory `install` ran in, and a
/// manifest naming `..` is refused): each `..` takes away the part before it, as the shell's
/// `cd` does (not following links).
fn absolute(prefix: &Path) -> Result<PathBuf, String> {
    let p = std::path::absolute(prefix).map_err(|e| format!("{}: {e}", prefix.display()))?;
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            c => out.push(c),
        }
    }
    Ok(out)
}

/// `remora install --prefix DIR [--no-strip]`.
pub fn install(prefix: &Path, strip: bool) -> Result<(), String> {
    let prefix = &absolute(prefix)?;
    let mut rec = Record::read(prefix)?;
    // The manifest is written even when the install stops half-way, so that `--uninstall`
    // removes what it wrote until then (a path is recorded only once written).
    let laid = lay_out(prefix, &mut rec, strip);
    let saved = rec.save();
    let found = laid?;
    saved?;
    let cached = found.is_some() && remora_sys::is_root() && loader::ldconfig().is_ok();
    summary(prefix, found.as_deref(), cached, rec.replaced());
    Ok(())
}

/// The prefix's library directory the loader searches without a run path (`lib`, where
/// `/usr/local` has it, or `lib64`, which `remora.conf` names once copied to
/// `/etc/ld.so.conf.d`), if any.
fn loader_finds(prefix: &Path) -> Option<PathBuf> {
    loader::listing(&[prefix.join("lib"), prefix.join("lib64")]).into_iter().next().map(|(d, _)| d)
}

/// Write everything under `prefix`, noting it in `rec`. Returns the prefix's library
/// directory the loader searches, if any.
fn lay_out(prefix: &Path, rec: &mut Record, strip: bool) -> Result<Option<PathBuf>, String> {
    let inc = prefix.join("include");
    let dis = inc.join("dis");
    let lib64 = prefix.join("lib64");
    let lib = prefix.join("lib");
    let bin = prefix.join("bin");
    let pkg = prefix.join("share/pkgconfig");
    for d in [
        &inc,
        &dis,
        &lib64,
        &lib,
        &bin,
        &lib64.join("pkgconfig"),
        &pkg,
        &inc.join("sys/rsm"),
        &dis.join("sys/rsm"),
    ] {
        rec.dir(d)?;
    }
    for (name, text) in HEADERS {
        rec.write(&inc.join(name), text)?;
        // Programs that add -I/opt/DIS/include/dis find the same headers there.
        rec.write(&dis.join(name), text)?;
    }
    // Where one is a link to the other (a system that merged them) the files are there once.
    let merged = matches!((lib.canonicalize(), lib64.canonicalize()), (Ok(a), Ok(b)) if a == b);
    for (built_name, name, links) in LIBS {
        place(rec, &built(built_name)?, &lib64.join(name), strip)?;
        for l in *links {
            rec.link(name, &lib64.join(l))?;
        }
        // `lib` holds the same names, the files as links into `lib64`: where C compilers
        // and the loader look for a system prefix (`-L<prefix>/lib`, `/usr/local/lib`).
        if !merged {
            rec.link(&format!("../lib64/{name}"), &lib.join(name))?;
            for l in *links {
                rec.link(name, &lib.join(l))?;
            }
        }
    }
    place(rec, &built("remorad")?, &bin.join("remorad"), strip)?;
    place(rec, &built("remora")?, &bin.join("remora"), strip)?;
    // One node per instance: `systemctl enable --now remorad@4`.
    let unit_dir = prefix.join("lib/systemd/system");
    rec.dir(&unit_dir)?;
    rec.write(&unit_dir.join("remorad@.service"), systemd_unit(&bin.join("remorad")))?;
    // pkg-config files where pkg-config looks for a system prefix (share/pkgconfig) and
    // where Dolphin's layout puts them (lib64/pkgconfig).
    for (name, what, cflags) in [
        ("sisci", "SISCI API (software remote-memory interconnect)", " -D_REENTRANT"),
        ("scif", "SCIF API (Intel Symmetric Communications Interface)", ""),
        ("rsm", "RSMAPI (Sun's Remote Shared Memory API)", ""),
        ("vipl", "VIPL (the VI Provider Library of VIA 1.0)", ""),
    ] {
        let text = pc_file(prefix, name, what, cflags);
        rec.write(&lib64.join(format!("pkgconfig/{name}.pc")), &text)?;
        rec.write(&pkg.join(format!("{name}.pc")), &text)?;
    }
    // Manual pages, generated from the command-line definitions.
    let man1 = prefix.join("share/man/man1");
    let man8 = prefix.join("share/man/man8");
    for d in [&man1, &man8] {
        rec.dir(d)?;
    }
    let mut page = Vec::new();
    {
        use clap::CommandFactory;
        clap_mangen::Man::new(crate::Cli::command()).render(&mut page).map_err(|e| e.to_string())?;
    }
    rec.write(&man1.join("remora.1"), &page)?;
    let o =
        Command::new(bin.join("remorad")).arg("--man").output().map_err(|e| format!("remorad --man: {e}"))?;
    if !o.status.success() {
        return Err(format!("remorad --man: {}", String::from_utf8_lossy(&o.stderr)));
    }
    rec.write(&man8.join("remorad.8"), &o.stdout)?;
    // The runtime loader: a `lib` it searches (`/usr/local/lib` on Debian and most others,
    // or a `lib64` named by an earlier install's `remora.conf` copied to /etc) needs only its
    // cache refreshed, which root's install does; for another prefix, the line a system's
    // ld.so.conf.d takes, for programs built without a run path.
    let found = loader_finds(prefix);
    if found.is_none() {
        let conf = ld_conf(prefix);
        rec.dir(conf.parent().ok_or("no directory")?)?;
        rec.write(&conf, format!("{}\n", lib64.display()))?;
    }
    Ok(found)
}

/// The ld.so.conf.d file an install writes for a prefix the loader does not search.
fn ld_conf(prefix: &Path) -> PathBuf {
    prefix.join("etc/ld.so.conf.d/remora.conf")
}

/// What `install` prints: how to build a program of each API, and what is left to do.
fn summary(prefix: &Path, found: Option<&Path>, cached: bool, replaced: &[PathBuf]) {
    let (pkg, conf) = (prefix.join("share/pkgconfig"), ld_conf(prefix));
    let p = prefix.display();
    println!("installed Remora under {p} (what it wrote: {})", record::manifest_path(prefix).display());
    if !replaced.is_empty() {
        println!("  replaced files it had not written (`--uninstall` removes them too):");
        for f in replaced {
            println!("    replaced: {}", f.display());
        }
    }
    let plain = found.is_some() && compiler_searches(prefix);
    match found {
        Some(dir) if cached => {
            println!("  ran ldconfig: programs find the libraries in {} without a run path", dir.display())
        }
        Some(dir) => println!(
            "  run `sudo ldconfig` once: then programs find the libraries in {} without a run path",
            dir.display()
        ),
        None => {}
    }
    for (api, lib_name) in [("a SISCI", "sisci"), ("a SCIF", "scif"), ("an RSM", "rsm"), ("a VIPL", "vipl")] {
        let pad = 10 - api.len();
        if plain {
            println!("  build {api} program:{:pad$}cc prog.c -l{lib_name}", "");
        } else {
            println!(
                "  build {api} program:{:pad$}cc -I {p}/include prog.c -L {p}/lib -Wl,-rpath,{p}/lib -l{lib_name}",
                ""
            );
        }
    }
    if !plain {
        println!("  (or -L {p}/lib64, Dolphin's layout: the same files)");
    }
    let searched = Command::new("pkg-config")
        .args(["--variable", "pc_path", "pkg-config"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).split(':').any(|d| Path::new(d.trim()) == pkg))
        .unwrap_or(false);
    if !searched {
        println!("  for pkg-config:         export PKG_CONFIG_PATH={}", pkg.display());
    }
    if found.is_none() {
        println!("  without a run path:     cp {} /etc/ld.so.conf.d/ && ldconfig", conf.display());
    }
    println!("  to remove it all:       remora install --uninstall --prefix {p}");
}

/// `remora install --uninstall --prefix DIR`: remove what an install there wrote (its
/// manifest says what), and refresh the loader's cache where it searched the prefix.
pub fn uninstall(prefix: &Path) -> Result<(), String> {
    let prefix = &absolute(prefix)?;
    if !Record::exists(prefix) {
        return Err(format!(
            "{} not found: no install of `remora install` is recorded under {}",
            record::manifest_path(prefix).display(),
            prefix.display()
        ));
    }
    let rec = Record::read(prefix)?;
    let left = rec.remove()?;
    let listed = loader::listing(&[prefix.join("lib"), prefix.join("lib64")]);
    let found = !listed.is_empty();
    if found && remora_sys::is_root() {
        loader::ldconfig()?;
    }
    println!(
        "removed the {} files and links `remora install` wrote under {}",
        rec.file_count() - left.outside.len(),
        prefix.display()
    );
    for d in left.dirs {
        println!("  kept {} (other files are in it)", d.display());
    }
    for f in left.outside {
        println!(
            "  left {} alone: its directory leads out of {} (a symbolic link)",
            f.display(),
            prefix.display()
        );
    }
    // A `remora.conf` copied from the install into the loader's configuration outlives it.
    for (dir, conf) in listed {
        if let Some(conf) = conf.filter(|c| c.file_name().is_some_and(|n| n == "remora.conf")) {
            println!(
                "  {} still names {}: remove it (then run `sudo ldconfig`) unless another install goes there",
                conf.display(),
                dir.display()
            );
        }
    }
    if found && !remora_sys::is_root() {
        println!("  run `sudo ldconfig` so that the loader's cache forgets the libraries");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::absolute;
    use std::path::{Path, PathBuf};

    #[test]
    fn a_prefix_with_dot_dot_is_made_plain() {
        assert_eq!(absolute(Path::new("/tmp/x/../y")).unwrap(), PathBuf::from("/tmp/y"));
        assert_eq!(absolute(Path::new("/tmp/./x/a/b/../../y/")).unwrap(), PathBuf::from("/tmp/x/y"));
        assert_eq!(absolute(Path::new("/../..")).unwrap(), PathBuf::from("/"));
        let cwd = std::env::current_dir().unwrap();
        let up = cwd.parent().unwrap_or(&cwd).join("y");
        assert_eq!(absolute(Path::new("../y")).unwrap(), up);
        assert!(!absolute(Path::new("../y"))
            .unwrap()
            .components()
            .any(|c| c == std::path::Component::ParentDir));
    }
}
