//! `remora install` as a C programmer meets it: the layout under a prefix (the libraries in
//! `lib64` and, as links, in `lib`; the pkg-config files), a VIPL program built with
//! `-L<prefix>/lib`, with pkg-config, and — as root, for real — with plain
//! `cc prog.c -lvipl` after an install into `/usr/local`; `--uninstall` removing exactly
//! what the installs wrote.

mod c_support;
use c_support::*;
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
/// only where /usr/local holds no Remora (nor a `vipl.h`) already; one such test at a time
/// on a machine (a lock on /usr/local itself).
#[test]
fn cc_prog_c_lvipl_builds_and_runs_after_remora_install_to_usr_local() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("SKIP: installing into /usr/local for real needs root (CI runs as root)");
        return;
    }
    let usr_local = std::path::Path::new("/usr/local");
    let lock = std::fs::File::open(usr_local).expect("/usr/local");
    rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive).unwrap();
    for p in [
        "share/remora/install-manifest",
        "bin/remorad",
        "lib64/libvipl.so.1",
        "lib/libvipl.so.1",
        "include/vipl.h",
    ] {
        if std::fs::symlink_metadata(usr_local.join(p)).is_ok() {
            eprintln!("SKIP: /usr/local/{p} exists already: this test installs and removes its own Remora and leaves that alone");
            return;
        }
    }
    // The loader's own view of what it searches: `ldconfig -v` without touching anything.
    let scan = Command::new("/sbin/ldconfig").args(["-v", "-N", "-X"]).output().unwrap();
    if !String::from_utf8_lossy(&scan.stdout).lines().any(|l| l.starts_with("/usr/local/lib:")) {
        eprintln!("SKIP: this system's ld.so.conf does not list /usr/local/lib: `cc prog.c -lvipl` cannot run there");
        return;
    }
    let dir = tempfile::Builder::new().prefix("remora-usr-local").tempdir().unwrap();
    let runtime = dir.path().join("rt");
    let remora = env!("CARGO_BIN_EXE_remora");
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
        .env("REMORA_IDLE_EXIT", "2")
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
    }
    check_layout(p);
    let o = Command::new(remora).args(["install", "--uninstall", "--prefix"]).arg(p).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut left: Vec<String> = Vec::new();
    let mut stack = vec![p.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            left.push(e.path().strip_prefix(p).unwrap().display().to_string());
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            }
        }
    }
    left.sort();
    assert_eq!(left, ["include", "include/mine.h", "lib", "lib/libmine.so"]);
    let o = Command::new(remora).args(["install", "--uninstall", "--prefix"]).arg(p).output().unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("install-manifest not found"), "{o:?}");
}
