//! What the C-program tests share: an installed prefix, a private runtime directory,
//! compiling programs against the installed headers, and running them as processes of a
//! node (killed if a test ends first).

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub struct Env {
    pub prefix: tempfile::TempDir,
    pub runtime: tempfile::TempDir,
}

impl Env {
    pub fn new() -> Env {
        let prefix = tempfile::Builder::new().prefix("remora-prefix").tempdir().unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_remora"))
            .args(["install", "--no-strip", "--prefix"])
            .arg(prefix.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "remora install failed: {}", String::from_utf8_lossy(&out.stderr));
        Env { prefix, runtime: tempfile::Builder::new().prefix("remora-rt").tempdir().unwrap() }
    }

    /// Compile `src` with the flags a Dolphin SISCI program uses.
    pub fn build(&self, src: &Path, extra_inc: &[&str]) -> PathBuf {
        let out = self.prefix.path().join(src.file_stem().unwrap());
        let p = self.prefix.path();
        let mut cc = Command::new("cc");
        cc.args(["-std=gnu99", "-Wall", "-Wextra", "-Werror", "-D_REENTRANT"]);
        cc.arg("-I").arg(p.join("include"));
        for i in extra_inc {
            cc.arg("-I").arg(p.join(i));
        }
        cc.arg(src).arg("-o").arg(&out);
        cc.arg("-L")
            .arg(p.join("lib64"))
            .arg(format!("-Wl,-rpath,{}", p.join("lib64").display()))
            .arg("-lsisci");
        let o = cc.output().expect("cc must be installed (apt-get install gcc)");
        assert!(o.status.success(), "cc {}: {}", src.display(), String::from_utf8_lossy(&o.stderr));
        out
    }

    /// Compile a SISCI program with the flags a Dolphin SISCI program uses (no extra
    /// include directory).
    pub fn build_sisci(&self, src: &Path) -> PathBuf {
        self.build(src, &[])
    }

    /// Compile a SCIF program the way the MPSS tutorials do (`-lscif -lpthread`).
    pub fn build_scif(&self, src: &Path) -> PathBuf {
        self.build_linked(src, &["-lscif", "-lpthread"])
    }

    /// Compile an RSM program the way Solaris programs are built (`-lrsm`).
    pub fn build_rsm(&self, src: &Path) -> PathBuf {
        self.build_linked(src, &["-lrsm"])
    }

    /// Compile a VIPL program the way M-VIA programs are built (`-lvipl`).
    pub fn build_vipl(&self, src: &Path) -> PathBuf {
        self.build_linked(src, &["-lvipl", "-lpthread"])
    }

    /// Compile `src` against the installed headers and link it with `libs`.
    fn build_linked(&self, src: &Path, libs: &[&str]) -> PathBuf {
        let out = self.prefix.path().join(src.file_stem().unwrap());
        let p = self.prefix.path();
        let o = Command::new("cc")
            .args(["-std=gnu99", "-Wall", "-Wextra", "-Werror", "-D_REENTRANT"])
            .arg("-I")
            .arg(p.join("include"))
            .arg(src)
            .arg("-o")
            .arg(&out)
            .arg("-L")
            .arg(p.join("lib64"))
            .arg(format!("-Wl,-rpath,{}", p.join("lib64").display()))
            .args(libs)
            .output()
            .expect("cc must be installed (apt-get install gcc)");
        assert!(o.status.success(), "cc {}: {}", src.display(), String::from_utf8_lossy(&o.stderr));
        out
    }

    /// Wait until node `node`'s daemon (started by a program's library) listens: a program
    /// on another node that connects earlier would, as with Dolphin's driver, be told the
    /// node does not exist.
    pub fn wait_node(&self, node: u32) {
        let sock = remora_proto::paths::socket_path(self.runtime.path(), node);
        let t = Instant::now();
        while !sock.exists() {
            assert!(t.elapsed() < Duration::from_secs(20), "node {node}'s daemon did not start");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// A command for node `node`; the library finds remorad in the prefix's bin by itself.
    pub fn run(&self, exe: &Path, node: u32) -> Command {
        let mut c = Command::new(exe);
        c.env("REMORA_RUNTIME_DIR", self.runtime.path())
            .env("REMORA_NODE", node.to_string())
            .env("REMORA_IDLE_EXIT", "2")
            .env_remove("REMORA_DAEMON")
            // cargo points the loader at target/debug for its tests: a program must load
            // the installed library through its run path, as it would for a user.
            .env_remove("LD_LIBRARY_PATH");
        c
    }

    /// Run `exe` as a process of node `node`: it must succeed and print `marker`.
    #[allow(dead_code)] // not every test binary that includes this module calls it
    pub fn passes(&self, exe: &Path, node: u32, marker: &str) {
        let out = self.run(exe, node).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && text.contains(marker),
            "{}: {text}{}",
            exe.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        let _ = Command::new(env!("CARGO_BIN_EXE_remora"))
            .args(["shutdown", "--all"])
            .env("REMORA_RUNTIME_DIR", self.runtime.path())
            .output();
    }
}

/// A program under test that is killed if the test ends before it (a failed assertion must
/// not leave a receiver spinning on the machine).
pub struct Reap(pub std::process::Child);

impl std::ops::Deref for Reap {
    type Target = std::process::Child;
    fn deref(&self) -> &std::process::Child {
        &self.0
    }
}

impl std::ops::DerefMut for Reap {
    fn deref_mut(&mut self) -> &mut std::process::Child {
        &mut self.0
    }
}

impl Drop for Reap {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

pub fn wait_with_timeout(child: &mut std::process::Child, limit: Duration) -> std::process::ExitStatus {
    let t = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if t.elapsed() > limit {
            let _ = child.kill();
            panic!("program did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Start `server`, run `client` to its end, and check that both printed PASS.
pub fn both_pass(src: &str, mut server: Command, mut client: Command) {
    let mut server = Reap(server.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap());
    let client = client.output().unwrap();
    let status = wait_with_timeout(&mut server, Duration::from_secs(90));
    let (mut out, mut err) = (String::new(), String::new());
    std::io::Read::read_to_string(server.stdout.as_mut().unwrap(), &mut out).unwrap();
    std::io::Read::read_to_string(server.stderr.as_mut().unwrap(), &mut err).unwrap();
    let cout = String::from_utf8_lossy(&client.stdout);
    let cerr = String::from_utf8_lossy(&client.stderr);
    assert!(
        client.status.success() && cout.contains("PASS"),
        "{src} client: {cout}{cerr}\nserver: {out}{err}"
    );
    assert!(status.success() && out.contains("PASS"), "{src} server: {out}{err}\nclient: {cout}{cerr}");
}

/// Two namespace hosts with the test's `remorad`, or `None` (said why, for `what`) where
/// they cannot be made here.
pub fn netns_hosts(what: &str) -> Option<remora_testkit::NetCluster> {
    let made = remora_testkit::find_daemon().and_then(|d| remora_testkit::NetCluster::start(2, &d));
    made.map_err(|s| eprintln!("skipping {what}: {}", s.0)).ok()
}
