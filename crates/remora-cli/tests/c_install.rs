//! `remora install` as a C programmer meets it: the layout under a prefix (the libraries in
//! `lib64` and, as links, in `lib`; the pkg-config files), a VIPL program built with
//! `-L<prefix>/lib`, with pkg-config, and — as root, for real — with plain
//! `cc prog.c -lvipl` after an install into `/usr/local`; `--uninstall` removing exactly
//! what the installs wrote.

mod c_support;
use c_support::*;
use std::path::Path;
use std::process::Command;

/// The four libraries and their pkg-config files, as every install lays them out: the
/// files in `lib64` (Dolphin's layout), the same names in `lib` (links to them), and
/// `NAME.pc` in `share/pkgconfig` and `lib64/pkgconfig` naming the prefix.
fn check_layout(prefix: &std::path::Path) {
    for (name, file, links) in [
        ("sisci", "libsisci.so", &[][..]),
        ("scif", "libscif.so.0.0.1", &["libscif.so.0", "libscif.so"][..]),
        ("rsm", "librsm.so.2", &["librsm.so"][..]),
        ("vipl", "libvipl.so.1", &["libvipl.so"][..]),
    ] {
        let real = prefix.join("lib64").join(file);
        assert!(std::fs::symlink_metadata(&real).unwrap().is_file(), "{} is a file", real.display());
        for n in std::iter::once(&file).chain(links) {
            for dir in ["lib", "lib64"] {
                let p = prefix.join(dir).join(n);
                assert_eq!(
                    p.canonicalize().unwrap(),
                    real.canonicalize().unwrap(),
                    "{} leads to {file}",
                    p.display()
                );
            }
        }
        let pc = std::fs::read_to_string(prefix.join(format!("share/pkgconfig/{name}.pc"))).unwrap();
        assert_eq!(pc, std::fs::read_to_string(prefix.join(format!("lib64/pkgconfig/{name}.pc"))).unwrap());
        for line in [
            format!("prefix={}", prefix.display()),
            "includedir=${prefix}/include".into(),
            "libdir=${prefix}/lib64".into(),
            format!("Name: {name}"),
            format!("Version: {}", env!("CARGO_PKG_VERSION")),
            format!("Libs: -L${{libdir}} -Wl,-rpath,${{libdir}} -l{name}"),
        ] {
            assert!(pc.lines().any(|l| l == line), "{name}.pc has the line {line:?}:\n{pc}");
        }
        assert!(pc.lines().any(|l| l.starts_with("Cflags: -I${includedir}")), "{name}.pc: {pc}");
    }
}

/// Every path under `dir` (not following links), relative to it, sorted.
fn tree(dir: &Path) -> Vec<String> {
    let mut all: Vec<String> = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            all.push(e.path().strip_prefix(dir).unwrap().display().to_string());
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            }
        }
    }
    all.sort();
    all
}

/// Run `remora ARGS --prefix PREFIX` (with `path` as PATH when given).
fn remora_at(args: &[&str], prefix: &Path, path: Option<&std::ffi::OsStr>) -> std::process::Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_remora"));
    c.args(args).arg("--prefix").arg(prefix);
    if let Some(path) = path {
        c.env("PATH", path);
    }
    c.output().unwrap()
}

/// Run a built `vipl_hello` as a process of node 4 of `env`; `ld_path` for the loader.
fn hello_runs(env: &Env, exe: &std::path::Path, ld_path: Option<&std::path::Path>) {
    let mut c = env.run(exe, 4);
    if let Some(p) = ld_path {
        c.env("LD_LIBRARY_PATH", p);
    }
    let out = c.output().unwrap();
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("VIPL OK"),
        "{}: {}{}",
        exe.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// An install under a private prefix: the layout and pkg-config files are right; a VIPL
/// program builds with `cc prog.c -I<prefix>/include -L<prefix>/lib -lvipl` (and runs with
/// `LD_LIBRARY_PATH=<prefix>/lib`, its daemon found from there) and with the flags
/// `pkg-config --cflags --libs vipl` gives (and runs through their run path).
#[test]
fn a_private_prefix_builds_with_its_lib_dir_and_with_pkg_config() {
    let env = Env::new();
    let p = env.prefix.path();
    check_layout(p);
    let src = root().join("tests/c/vipl/vipl_hello.c");
    let exe = p.join("hello-lib");
    let o = Command::new("cc")
        .arg(&src)
        .arg(format!("-I{}", p.join("include").display()))
        .arg(format!("-L{}", p.join("lib").display()))
        .arg("-lvipl")
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("cc (apt-get install gcc)");
    assert!(o.status.success(), "cc -L<prefix>/lib -lvipl: {}", String::from_utf8_lossy(&o.stderr));
    hello_runs(&env, &exe, Some(&p.join("lib")));
    let pkg = Command::new("pkg-config")
        .args(["--cflags", "--libs", "vipl"])
        .env("PKG_CONFIG_PATH", p.join("share/pkgconfig"))
        .output();
    let Ok(pkg) = pkg else {
        eprintln!(
            "SKIP (the pkg-config build only): pkg-config is not installed (apt-get install pkg-config)"
        );
        return;
    };
    assert!(pkg.status.success(), "pkg-config vipl: {}", String::from_utf8_lossy(&pkg.stderr));
    let flags = String::from_utf8_lossy(&pkg.stdout).into_owned();
    let lib64 = p.join("lib64").display().to_string();
    assert_eq!(
        flags.split_whitespace().collect::<Vec<_>>(),
        [
            format!("-I{}", p.join("include").display()),
            format!("-L{lib64}"),
            format!("-Wl,-rpath,{lib64}"),
            "-lvipl".into()
        ],
        "pkg-config --cflags --libs vipl"
    );
    let exe = p.join("hello-pc");
    let o = Command::new("cc").arg(&src).arg("-o").arg(&exe).args(flags.split_whitespace()).output().unwrap();
    assert!(o.status.success(), "cc $(pkg-config ...): {}", String::from_utf8_lossy(&o.stderr));
    hello_runs(&env, &exe, None);
}

/// An install into `/usr/local` made by [`usr_local_install`], removed again on drop (after
/// the node daemons of `runtime` are stopped), even when the test fails.
struct UsrLocal {
    runtime: std::path::PathBuf,
}

impl Drop for UsrLocal {
    fn drop(&mut self) {
        let remora = env!("CARGO_BIN_EXE_remora");
        let _ = Command::new(remora)
            .args(["shutdown", "--all"])
            .env("REMORA_RUNTIME_DIR", &self.runtime)
            .output();
        let o = Command::new(remora).args(["install", "--uninstall", "--prefix", "/usr/local"]).output();
        if !o.as_ref().is_ok_and(|o| o.status.success()) {
            eprintln!("remora install --uninstall --prefix /usr/local failed: {o:?}");
        }
    }
}

/// What a user does: `remora install --prefix /usr/local` as root, then
/// `cc prog.c -lvipl -o prog` (no -I, -L or run path; no LIBRARY_PATH, CPATH or
/// LD_LIBRARY_PATH) and `./prog`, whose library starts the node's daemon from
/// `/usr/local/bin`. Everything the install wrote is removed after, and the loader's cache
/// no longer names the library. Only as root (it writes /usr/local and runs ldconfig), and
/// only where /usr/local holds none of the paths the install writes (a scratch install's
/// manifest lists them); one such test at a time on a machine (a lock on /usr/local itself).
#[test]
fn cc_prog_c_lvipl_builds_and_runs_after_remora_install_to_usr_local() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("SKIP: installing into /usr/local for real needs root (CI runs as root)");
        return;
    }
    let usr_local = std::path::Path::new("/usr/local");
    let lock = std::fs::File::open(usr_local).expect("/usr/local");
    rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive).unwrap();
    let remora = env!("CARGO_BIN_EXE_remora");
    // What the install would write there, and the uninstall remove: the manifest of the same
    // install into a scratch prefix says, its paths mapped onto /usr/local. Any of them there
    // already (a Dolphin or MPSS install, an earlier Remora) and the test leaves it alone.
    let scratch = tempfile::Builder::new().prefix("remora-scratch").tempdir().unwrap();
    let o = Command::new(remora).args(["install", "--prefix"]).arg(scratch.path()).output().unwrap();
    assert!(
        o.status.success(),
        "remora install into a scratch prefix: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let listed = std::fs::read_to_string(scratch.path().join("share/remora/install-manifest")).unwrap();
    let writes: Vec<std::path::PathBuf> = listed
        .lines()
        .filter_map(|l| l.strip_prefix("file "))
        .map(|p| usr_local.join(std::path::Path::new(p).strip_prefix(scratch.path()).unwrap()))
        .collect();
    assert!(writes.len() > 30, "the scratch install's manifest: {listed}");
    if let Some(p) = writes.iter().find(|p| std::fs::symlink_metadata(p).is_ok()) {
        eprintln!(
            "SKIP: {} exists already, and the install would replace it (and the uninstall remove it): \
             this test installs and removes its own Remora only where /usr/local holds none of its {} paths",
            p.display(),
            writes.len()
        );
        return;
    }
    // The loader's own view of what it searches: `ldconfig -v` without touching anything.
    let scan = Command::new("/sbin/ldconfig").args(["-v", "-N", "-X"]).output().unwrap();
    if !String::from_utf8_lossy(&scan.stdout).lines().any(|l| l.starts_with("/usr/local/lib:")) {
        eprintln!("SKIP: this system's ld.so.conf does not list /usr/local/lib: `cc prog.c -lvipl` cannot run there");
        return;
    }
    let dir = tempfile::Builder::new().prefix("remora-usr-local").tempdir().unwrap();
    let runtime = dir.path().join("rt");
    let o = Command::new(remora).args(["install", "--prefix", "/usr/local"]).output().unwrap();
    // Declared after the lock: on a failure it is dropped (and the install removed) first.
    let installed = UsrLocal { runtime: runtime.clone() };
    let said = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "remora install --prefix /usr/local: {said}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let manifest = std::fs::read_to_string(usr_local.join("share/remora/install-manifest")).unwrap();
    assert!(said.contains("ran ldconfig"), "install saw /usr/local/lib is the loader's: {said}");
    assert!(said.contains("cc prog.c -lvipl"), "the summary gives the plain command: {said}");
    check_layout(usr_local);
    std::fs::copy(root().join("tests/c/vipl/vipl_hello.c"), dir.path().join("prog.c")).unwrap();
    let clean = |c: &mut Command| {
        for v in ["LD_LIBRARY_PATH", "LIBRARY_PATH", "CPATH", "C_INCLUDE_PATH", "PKG_CONFIG_PATH"] {
            c.env_remove(v);
        }
    };
    let mut cc = Command::new("cc");
    cc.args(["prog.c", "-lvipl", "-o", "prog"]).current_dir(dir.path());
    clean(&mut cc);
    let o = cc.output().expect("cc (apt-get install gcc)");
    assert!(o.status.success(), "cc prog.c -lvipl -o prog: {}", String::from_utf8_lossy(&o.stderr));
    let prog = dir.path().join("prog");
    let ldd = Command::new("ldd").arg(&prog).output().unwrap();
    let ldd = String::from_utf8_lossy(&ldd.stdout).into_owned();
    assert!(
        ldd.contains("libvipl.so.1 => /usr/local/lib/libvipl.so.1"),
        "the loader finds it by itself: {ldd}"
    );
    let mut run = Command::new(&prog);
    run.env("REMORA_RUNTIME_DIR", &runtime)
        .env("REMORA_NODE", "4")
        // Up until `remora status` below has asked it, even on a loaded machine (dropping
        // `installed` shuts it down).
        .env("REMORA_IDLE_EXIT", "60")
        .env_remove("REMORA_DAEMON");
    clean(&mut run);
    let out = run.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("VIPL OK"),
        "./prog: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The daemon the library started is the installed one.
    let st =
        Command::new(remora).args(["status", "--json"]).env("REMORA_RUNTIME_DIR", &runtime).output().unwrap();
    let st = String::from_utf8_lossy(&st.stdout).into_owned();
    let at = st.find("\"pid\":").unwrap_or_else(|| panic!("remora status --json: {st}"));
    let rest = st[at + 6..].trim_start();
    let pid: u32 = rest[..rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len())].parse().unwrap();
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap();
    assert_eq!(exe, usr_local.join("bin/remorad"), "the node's daemon");
    drop(installed);
    for line in manifest.lines().filter(|l| !l.starts_with('#')) {
        let path = line.split_once(' ').map(|(_, p)| p).unwrap_or(line);
        assert!(std::fs::symlink_metadata(path).is_err(), "{path} is left after --uninstall");
    }
    let cache = Command::new("/sbin/ldconfig").arg("-p").output().unwrap();
    let cache = String::from_utf8_lossy(&cache.stdout).into_owned();
    assert!(!cache.contains("/usr/local/lib/libvipl"), "the loader's cache still names it: {cache}");
    drop(lock);
}

/// `remora install --uninstall` removes what the installs under a prefix wrote (two of them,
/// the second over the first) and the directories they made, and nothing else: a user's
/// files in `include` and `lib` stay, with their directories. A second uninstall finds no
/// manifest and says so.
#[test]
fn uninstall_removes_what_install_wrote_and_nothing_else() {
    let prefix = tempfile::Builder::new().prefix("remora-uninstall").tempdir().unwrap();
    let p = prefix.path();
    std::fs::create_dir_all(p.join("include")).unwrap();
    std::fs::create_dir_all(p.join("lib")).unwrap();
    std::fs::write(p.join("include/mine.h"), "/* mine */\n").unwrap();
    std::fs::write(p.join("lib/libmine.so"), "mine").unwrap();
    let remora = env!("CARGO_BIN_EXE_remora");
    for _ in 0..2 {
        let o = Command::new(remora).args(["install", "--no-strip", "--prefix"]).arg(p).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        // Nothing of the user's is in the way, and the second install replaces only its own.
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        assert!(!out.contains("replaced"), "{out}");
    }
    check_layout(p);
    let o = Command::new(remora).args(["install", "--uninstall", "--prefix"]).arg(p).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(tree(p), ["include", "include/mine.h", "lib", "lib/libmine.so"]);
    let o = Command::new(remora).args(["install", "--uninstall", "--prefix"]).arg(p).output().unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("install-manifest not found"), "{o:?}");
}

/// An install that stops half-way (here `objcopy` fails once it has begun writing its
/// output) records only what it wrote: a file of the user's it was about to replace (a
/// vendor's `libsisci.so`) is not in the manifest, so `--uninstall` leaves it, and no
/// temporary file is left behind.
#[test]
fn a_failed_install_records_only_what_it_wrote() {
    let prefix = tempfile::Builder::new().prefix("remora-failed").tempdir().unwrap();
    let p = prefix.path();
    std::fs::create_dir(p.join("lib64")).unwrap();
    std::fs::write(p.join("lib64/libsisci.so"), "the vendor's library").unwrap();
    // An objcopy that answers `--version` and fails after writing part of its output.
    let bin = tempfile::Builder::new().prefix("remora-fake-bin").tempdir().unwrap();
    let fake = bin.path().join("objcopy");
    let script = "#!/bin/sh\n[ \"$1\" = --version ] && exit 0\nfor a; do last=$a; done\n\
                  echo partial > \"$last\"\necho 'objcopy: disk full' >&2\nexit 1\n";
    std::fs::write(&fake, script).unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mut path = std::ffi::OsString::from(bin.path());
    path.push(":");
    path.push(std::env::var_os("PATH").unwrap_or_default());
    let o = remora_at(&["install"], p, Some(&path));
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(!o.status.success() && err.contains("disk full"), "the install fails at objcopy: {o:?}");
    assert_eq!(std::fs::read_to_string(p.join("lib64/libsisci.so")).unwrap(), "the vendor's library");
    let manifest = std::fs::read_to_string(p.join("share/remora/install-manifest")).unwrap();
    assert!(manifest.contains(&format!("file {}\n", p.join("include/vipl.h").display())), "{manifest}");
    assert!(!manifest.contains("libsisci"), "the manifest names only what was written: {manifest}");
    let all = tree(p);
    assert!(!all.iter().any(|f| f.contains("remora-new")), "a temporary file is left: {all:?}");
    let o = remora_at(&["install", "--uninstall"], p, None);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(tree(p), ["lib64", "lib64/libsisci.so"]);
    assert_eq!(std::fs::read_to_string(p.join("lib64/libsisci.so")).unwrap(), "the vendor's library");
}

/// A manifest is not trusted (a user may own the prefix and run `sudo remora install
/// --uninstall` on it): one naming a path outside the prefix, with `..` or relative, makes
/// the uninstall (and an install over it) refuse, nothing removed; an entry whose directory
/// leads out of the prefix through a link is left alone (and said so), and a link the
/// install wrote is removed itself, never what it leads to.
#[test]
fn uninstall_removes_nothing_outside_the_prefix() {
    let outer = tempfile::Builder::new().prefix("remora-outer").tempdir().unwrap();
    let p = outer.path().join("prefix");
    let victim = outer.path().join("victim");
    std::fs::write(&victim, "precious").unwrap();
    std::fs::create_dir_all(p.join("share/remora")).unwrap();
    let manifest = p.join("share/remora/install-manifest");
    for line in [
        format!("file {}", victim.display()),
        format!("file {}/../victim", p.display()),
        format!("dir {}", outer.path().display()),
        "file victim".into(),
        format!("file {}/lib/../../victim", p.display()),
    ] {
        std::fs::write(&manifest, format!("file {}/include/vipl.h\n{line}\n", p.display())).unwrap();
        for args in [&["install", "--uninstall"][..], &["install", "--no-strip"]] {
            let o = remora_at(args, &p, None);
            let err = String::from_utf8_lossy(&o.stderr).into_owned();
            assert!(!o.status.success() && err.contains("outside"), "{args:?} with {line:?}: {o:?}");
            assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious", "{args:?} with {line:?}");
        }
    }
    // `include` a link to a directory outside; `lib/escape` a link to the victim.
    let elsewhere = outer.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::fs::write(elsewhere.join("vipl.h"), "/* M-VIA */").unwrap();
    std::os::unix::fs::symlink(&elsewhere, p.join("include")).unwrap();
    std::fs::create_dir(p.join("lib")).unwrap();
    std::os::unix::fs::symlink(&victim, p.join("lib/escape")).unwrap();
    let text = format!(
        "file {0}/include/vipl.h\nfile {0}/lib/escape\nfile {1}\ndir {0}/include\ndir {0}/lib\n",
        p.display(),
        manifest.display()
    );
    std::fs::write(&manifest, text).unwrap();
    let o = remora_at(&["install", "--uninstall"], &p, None);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "{o:?}");
    assert!(out.contains(&format!("left {}/include/vipl.h alone", p.display())), "{out}");
    assert_eq!(std::fs::read_to_string(elsewhere.join("vipl.h")).unwrap(), "/* M-VIA */");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    assert_eq!(tree(&p), ["include", "share", "share/remora"]);
}

/// An install replaces a link at a path it writes (a `vipl.h` leading to M-VIA's header
/// outside the prefix) with its own file, never writing through it, and leaves no
/// temporary files.
#[test]
fn install_replaces_a_link_and_leaves_its_target() {
    let outer = tempfile::Builder::new().prefix("remora-outer").tempdir().unwrap();
    let p = outer.path().join("prefix");
    let mvia = outer.path().join("mvia");
    std::fs::create_dir_all(&mvia).unwrap();
    std::fs::create_dir_all(p.join("include")).unwrap();
    std::fs::write(mvia.join("vipl.h"), "/* M-VIA */").unwrap();
    std::os::unix::fs::symlink(mvia.join("vipl.h"), p.join("include/vipl.h")).unwrap();
    let o = remora_at(&["install", "--no-strip"], &p, None);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // The summary names the path it replaced (which `--uninstall` removes).
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(out.contains(&format!("replaced: {}\n", p.join("include/vipl.h").display())), "{out}");
    assert_eq!(out.matches("replaced: ").count(), 1, "{out}");
    let theirs = std::fs::read_to_string(mvia.join("vipl.h")).unwrap();
    assert!(theirs == "/* M-VIA */", "M-VIA's header was written through the link");
    assert!(std::fs::symlink_metadata(p.join("include/vipl.h")).unwrap().is_file());
    assert_eq!(
        std::fs::read_to_string(p.join("include/vipl.h")).unwrap(),
        std::fs::read_to_string(root().join("include/vipl.h")).unwrap()
    );
    let all = tree(&p);
    assert!(!all.iter().any(|f| f.contains("remora-new")), "a temporary file is left: {all:?}");
    let o = remora_at(&["install", "--uninstall"], &p, None);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let theirs = std::fs::read_to_string(mvia.join("vipl.h")).unwrap();
    assert!(theirs == "/* M-VIA */", "the uninstall touched M-VIA's header");
}

/// A directory of the prefix that is a link to one outside it (`include` or `lib64` leading
/// to another tree) makes the install refuse, naming the path, before it writes anything
/// there; what it wrote inside is still removed by `--uninstall`.
#[test]
fn install_refuses_a_directory_of_the_prefix_leading_out_of_it() {
    for dir in ["include", "lib64"] {
        let outer = tempfile::Builder::new().prefix("remora-outer").tempdir().unwrap();
        let p = outer.path().join("prefix");
        let elsewhere = outer.path().join("elsewhere");
        std::fs::create_dir_all(&p).unwrap();
        std::fs::create_dir(&elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, p.join(dir)).unwrap();
        let o = remora_at(&["install", "--no-strip"], &p, None);
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(!o.status.success(), "{dir}: {o:?}");
        assert!(
            err.contains(&format!("{}/", p.join(dir).display())) && err.contains("leads out of"),
            "{dir}: {err}"
        );
        assert_eq!(tree(&elsewhere), Vec::<String>::new(), "{dir}: written outside the prefix");
        let o = remora_at(&["install", "--uninstall"], &p, None);
        assert!(o.status.success(), "{dir}: {o:?}");
        assert_eq!(tree(&elsewhere), Vec::<String>::new(), "{dir}");
        assert!(std::fs::symlink_metadata(p.join(dir)).unwrap().file_type().is_symlink(), "{dir}");
    }
}
