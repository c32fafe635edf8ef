//! C programs built against the installed headers and library, run as real clients:
//! `remora install`, `cc`, and two nodes of this host.

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

struct Env {
    prefix: tempfile::TempDir,
    runtime: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        let prefix = tempfile::Builder::new().prefix("remora-prefix").tempdir().unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_remora"))
            .args(["install", "--prefix"])
            .arg(prefix.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "remora install failed: {}", String::from_utf8_lossy(&out.stderr));
        Env { prefix, runtime: tempfile::Builder::new().prefix("remora-rt").tempdir().unwrap() }
    }

    /// Compile `src` with the flags a Dolphin SISCI program uses.
    fn build(&self, src: &Path, extra_inc: &[&str]) -> PathBuf {
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

    /// Compile a SCIF program the way the MPSS tutorials do (`-lscif -lpthread`).
    fn build_scif(&self, src: &Path) -> PathBuf {
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
            .args(["-lscif", "-lpthread"])
            .output()
            .expect("cc must be installed (apt-get install gcc)");
        assert!(o.status.success(), "cc {}: {}", src.display(), String::from_utf8_lossy(&o.stderr));
        out
    }

    /// Wait until node `node`'s daemon (started by a program's library) listens: a program
    /// on another node that connects earlier would, as with Dolphin's driver, be told the
    /// node does not exist.
    fn wait_node(&self, node: u32) {
        let sock = remora_proto::paths::socket_path(self.runtime.path(), node);
        let t = Instant::now();
        while !sock.exists() {
            assert!(t.elapsed() < Duration::from_secs(20), "node {node}'s daemon did not start");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// A command for node `node`; the library finds remorad in the prefix's bin by itself.
    fn run(&self, exe: &Path, node: u32) -> Command {
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
struct Reap(std::process::Child);

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

fn wait_with_timeout(child: &mut std::process::Child, limit: Duration) -> std::process::ExitStatus {
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

#[test]
fn hello_world_pair_across_two_nodes() {
    let env = Env::new();
    let recv = env.build(&root().join("examples/hello_receiver.c"), &[]);
    let send = env.build(&root().join("examples/hello_sender.c"), &[]);
    let mut r = Reap(env.run(&recv, 4).stdout(Stdio::piped()).spawn().unwrap());
    env.wait_node(4);
    let s = env.run(&send, 8).arg("4").output().unwrap();
    assert!(s.status.success(), "sender: {}", String::from_utf8_lossy(&s.stderr));
    let status = wait_with_timeout(&mut r, Duration::from_secs(20));
    let mut out = String::new();
    std::io::Read::read_to_string(r.stdout.as_mut().unwrap(), &mut out).unwrap();
    assert!(status.success(), "receiver failed: {out}");
    assert!(out.contains("Hello, World!"), "receiver said: {out}");
    // Both nodes were started by the library itself and appear in the runtime directory.
    assert_eq!(remora_proto::paths::nodes_in(env.runtime.path()), vec![4, 8]);
}

/// Run `receiver` as node 4 and `sender` as node 8 (told the receiver's node), and check that
/// both succeed and the receiver printed the greeting.
fn run_pair(receiver: &str, sender: &str) {
    let env = Env::new();
    let recv = env.build(&root().join(receiver), &[]);
    let send = env.build(&root().join(sender), &[]);
    let mut r = Reap(env.run(&recv, 4).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap());
    env.wait_node(4);
    let s = env.run(&send, 8).arg("4").output().unwrap();
    if !s.status.success() {
        let _ = r.kill();
    }
    assert!(
        s.status.success(),
        "{sender}: {}{}",
        String::from_utf8_lossy(&s.stdout),
        String::from_utf8_lossy(&s.stderr)
    );
    let status = wait_with_timeout(&mut r, Duration::from_secs(30));
    let (mut out, mut err) = (String::new(), String::new());
    std::io::Read::read_to_string(r.stdout.as_mut().unwrap(), &mut out).unwrap();
    std::io::Read::read_to_string(r.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(status.success(), "{receiver} failed: {out}{err}");
    assert!(out.contains("Hello, World!"), "{receiver} said: {out}{err}");
}

#[test]
fn dma_pair_across_two_nodes() {
    run_pair("examples/dma_receiver.c", "examples/dma_sender.c");
}

#[test]
fn interrupt_pair_across_two_nodes() {
    run_pair("examples/intr_receiver.c", "examples/intr_sender.c");
}

#[test]
fn callbacks_fire_with_the_programs_handles() {
    let env = Env::new();
    let exe = env.build(&root().join("examples/callbacks.c"), &[]);
    let mut child = Reap(env.run(&exe, 4).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap());
    let status = wait_with_timeout(&mut child, Duration::from_secs(60));
    let (mut out, mut err) = (String::new(), String::new());
    std::io::Read::read_to_string(child.stdout.as_mut().unwrap(), &mut out).unwrap();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(status.success(), "callbacks failed ({status:?}): {out}{err}");
    assert!(out.contains("callbacks: ok"), "callbacks said: {out}{err}");
}

#[test]
fn bad_dma_and_interrupt_input_gets_documented_codes() {
    let env = Env::new();
    let exe = env.build(&root().join("tests/c/bad_input_dma_intr.c"), &[]);
    let mut child = Reap(env.run(&exe, 4).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap());
    let status = wait_with_timeout(&mut child, Duration::from_secs(120));
    let (mut out, mut err) = (String::new(), String::new());
    std::io::Read::read_to_string(child.stdout.as_mut().unwrap(), &mut out).unwrap();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(status.success(), "bad_input_dma_intr failed ({status:?}): {out}{err}");
    assert!(out.contains("checks passed"), "bad_input_dma_intr said: {out}{err}");
}

#[test]
fn bad_input_gets_documented_codes() {
    let env = Env::new();
    let exe = env.build(&root().join("tests/c/bad_input.c"), &[]);
    let o = env.run(&exe, 4).output().unwrap();
    assert!(
        o.status.success(),
        "bad_input failed: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stdout).contains("checks passed"));
}

#[test]
fn bad_configuration_names_the_variable_beside_the_code() {
    let env = Env::new();
    let exe = env.build(&root().join("tests/c/bad_config.c"), &[]);
    for (var, value, says) in [
        ("REMORA_NODE", "abc", "REMORA_NODE=\"abc\": allowed: a decimal integer 1..=65535"),
        ("REMORA_NODE", "0", "REMORA_NODE=\"0\": allowed"),
        ("REMORA_NODE", "65536", "REMORA_NODE=\"65536\": allowed"),
        ("REMORA_NODE", "", "REMORA_NODE=\"\": allowed"),
        ("REMORA_NODE", " 8", "REMORA_NODE=\" 8\": allowed"),
        (
            "REMORA_IDLE_EXIT",
            "soon",
            "REMORA_IDLE_EXIT=\"soon\": allowed: a decimal integer 0..=31536000 (seconds)",
        ),
        ("REMORA_NO_SPAWN", "yes", "REMORA_NO_SPAWN=\"yes\": allowed: 0 or 1"),
    ] {
        let o = env.run(&exe, 4).env(var, value).output().unwrap();
        let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        assert!(o.status.success(), "{var}={value:?}: {out}{err}");
        assert!(err.lines().any(|l| l.starts_with("remora: ") && l.contains(says)), "{var}={value:?}: {err}");
        assert_eq!(err.lines().filter(|l| l.starts_with("remora: ")).count(), 1, "said once: {err}");
    }
}

#[test]
fn a_signal_storm_loses_no_call_and_keeps_the_session_in_step() {
    let env = Env::new();
    let exe = env.build(&root().join("tests/c/signal_storm.c"), &[]);
    let mut child = Reap(env.run(&exe, 4).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap());
    let status = wait_with_timeout(&mut child, Duration::from_secs(300));
    let mut out = String::new();
    let mut err = String::new();
    use std::io::Read as _;
    child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(status.success(), "signal_storm: {out}{err}");
    assert!(out.contains("all passed"), "{out}{err}");
}

#[test]
fn readonly_map_faults_on_store() {
    let env = Env::new();
    let exe = env.build(&root().join("tests/c/readonly_fault.c"), &[]);
    let o = env.run(&exe, 4).output().unwrap();
    assert_eq!(
        o.status.signal(),
        Some(11),
        "expected SIGSEGV, got {:?}: {}",
        o.status,
        String::from_utf8_lossy(&o.stdout)
    );
    assert!(String::from_utf8_lossy(&o.stdout).contains("reads fine"));
}

#[test]
fn dolphin_include_paths_build_unchanged() {
    // Programs that add -I.../include/dis (as Dolphin's build files do) find the same headers.
    let env = Env::new();
    env.build(&root().join("examples/hello_sender.c"), &["include/dis"]);
    let o = Command::new("pkg-config")
        .args(["--cflags", "--libs", "sisci"])
        .env("PKG_CONFIG_PATH", env.prefix.path().join("lib64/pkgconfig"))
        .output();
    if let Ok(o) = o {
        if o.status.success() {
            assert!(String::from_utf8_lossy(&o.stdout).contains("-lsisci"));
        }
    }
}

#[test]
fn header_constants_match_the_library() {
    let o = Command::new("bash").arg(root().join("scripts/check-consts.sh")).output().unwrap();
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn hello_world_pio_across_two_hosts() {
    // The guide's PIO hello world, receiver on host 1 and sender on host 2 of a cluster of
    // network namespaces: the sender's store goes through a DSM map of the other host.
    let daemon = match remora_testkit::find_daemon() {
        Ok(d) => d,
        Err(s) => return eprintln!("skipping multi-host hello world: {}", s.0),
    };
    let c = match remora_testkit::NetCluster::start(2, &daemon) {
        Ok(c) => c,
        Err(s) => return eprintln!("skipping multi-host hello world: {}", s.0),
    };
    let env = Env::new();
    let recv = env.build(&root().join("examples/hello_receiver.c"), &[]);
    let send = env.build(&root().join("examples/hello_sender.c"), &[]);
    let mut r = Reap(c.command(1, &recv).stdout(Stdio::piped()).spawn().unwrap());
    let s = c.command(2, &send).arg(c.node(1).to_string()).output().unwrap();
    assert!(
        s.status.success(),
        "sender: {}{}",
        String::from_utf8_lossy(&s.stdout),
        String::from_utf8_lossy(&s.stderr)
    );
    let status = wait_with_timeout(&mut r, Duration::from_secs(30));
    let mut out = String::new();
    std::io::Read::read_to_string(r.stdout.as_mut().unwrap(), &mut out).unwrap();
    assert!(status.success(), "receiver failed: {out}");
    assert!(out.contains("Hello, World!"), "receiver said: {out}");
}

#[test]
fn stores_reach_the_other_host_even_without_unmap() {
    let daemon = match remora_testkit::find_daemon() {
        Ok(d) => d,
        Err(s) => return eprintln!("skipping: {}", s.0),
    };
    let c = match remora_testkit::NetCluster::start(2, &daemon) {
        Ok(c) => c,
        Err(s) => return eprintln!("skipping: {}", s.0),
    };
    let env = Env::new();
    let recv = env.build(&root().join("examples/hello_receiver.c"), &[]);
    let send = env.build(&root().join("tests/c/exit_without_unmap.c"), &[]);
    let mut r = Reap(c.command(1, &recv).stdout(Stdio::piped()).spawn().unwrap());
    let s = c.command(2, &send).arg(c.node(1).to_string()).output().unwrap();
    assert!(s.status.success(), "sender exited with {:?}", s.status);
    let status = wait_with_timeout(&mut r, Duration::from_secs(30));
    let mut out = String::new();
    std::io::Read::read_to_string(r.stdout.as_mut().unwrap(), &mut out).unwrap();
    assert!(status.success() && out.contains("Hello, World!"), "receiver said: {out}");
}

/// Run a SCIF program as a server on node 4 and a client on node 8 (told the server's
/// node and the port); both must print PASS.
fn run_scif_pair(src: &str, port: u16) {
    let env = Env::new();
    let exe = env.build_scif(&root().join(src));
    let mut server = env.run(&exe, 4);
    server.args(["server", &port.to_string()]);
    let mut client = env.run(&exe, 8);
    client.args(["client", "4", &port.to_string()]);
    both_pass(src, server, client);
}

/// Start `server`, run `client` to its end, and check that both printed PASS.
fn both_pass(src: &str, mut server: Command, mut client: Command) {
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

#[test]
fn scif_connect_messaging_poll_and_close_across_two_nodes() {
    run_scif_pair("tests/c/scif/scif_msg.c", 2050);
}

#[test]
fn scif_windows_rma_fences_mmap_and_fork_across_two_nodes() {
    run_scif_pair("tests/c/scif/scif_rma.c", 2060);
}

#[test]
fn scif_error_cases_get_documented_errno() {
    let env = Env::new();
    let exe = env.build_scif(&root().join("tests/c/scif/scif_errors.c"));
    let out = env.run(&exe, 4).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("PASS"),
        "scif_errors: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn libscif_exports_every_call_with_the_mpss_symbol_version() {
    let env = Env::new();
    let lib = env.prefix.path().join("lib64/libscif.so.0");
    assert!(lib.exists(), "libscif.so.0 (the soname link) is installed");
    let out = Command::new("objdump").arg("-T").arg(&lib).output();
    let Ok(out) = out else {
        eprintln!("SKIP: objdump is not installed (apt-get install binutils)");
        return;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    for f in [
        "scif_open",
        "scif_close",
        "scif_bind",
        "scif_listen",
        "scif_connect",
        "scif_accept",
        "scif_send",
        "scif_recv",
        "scif_register",
        "scif_unregister",
        "scif_mmap",
        "scif_munmap",
        "scif_readfrom",
        "scif_writeto",
        "scif_vreadfrom",
        "scif_vwriteto",
        "scif_fence_mark",
        "scif_fence_wait",
        "scif_fence_signal",
        "scif_get_nodeIDs",
        "scif_get_fd",
        "scif_poll",
    ] {
        assert!(
            text.lines().any(|l| l.contains("SCIF_0.0") && l.split_whitespace().last() == Some(f)),
            "{f} is exported as {f}@@SCIF_0.0"
        );
    }
    let d = Command::new("readelf").arg("-d").arg(&lib).output().unwrap();
    assert!(String::from_utf8_lossy(&d.stdout).contains("[libscif.so.0]"), "soname is libscif.so.0");
}

/// A SCIF program's server on host 1 and client on host 2 of a cluster of network
/// namespaces: messages and RMA go through the daemons over TCP.
fn run_scif_across_hosts(src: &str, port: u16, env_vars: &[(&str, &str)]) {
    let daemon = match remora_testkit::find_daemon() {
        Ok(d) => d,
        Err(s) => return eprintln!("skipping multi-host SCIF: {}", s.0),
    };
    let c = match remora_testkit::NetCluster::start(2, &daemon) {
        Ok(c) => c,
        Err(s) => return eprintln!("skipping multi-host SCIF: {}", s.0),
    };
    let env = Env::new();
    let exe = env.build_scif(&root().join(src));
    let mut server = c.command(1, &exe);
    server.args(["server", &port.to_string()]).envs(env_vars.iter().copied());
    let mut client = c.command(2, &exe);
    client.args(["client", &c.node(1).to_string(), &port.to_string()]).envs(env_vars.iter().copied());
    both_pass(src, server, client);
}

#[test]
fn scif_messaging_across_two_hosts() {
    run_scif_across_hosts("tests/c/scif/scif_msg.c", 2150, &[]);
}

#[test]
fn scif_rma_fences_and_fork_across_two_hosts() {
    run_scif_across_hosts("tests/c/scif/scif_rma.c", 2160, &[("SCIF_TEST_FAR", "1")]);
}

#[test]
fn scif_hello_example_pair_across_two_nodes() {
    let env = Env::new();
    let exe = env.build_scif(&root().join("examples/scif_hello.c"));
    let mut server = Reap(env.run(&exe, 4).args(["server", "2070"]).stdout(Stdio::piped()).spawn().unwrap());
    let client = env.run(&exe, 8).args(["client", "4", "2070"]).output().unwrap();
    assert!(client.status.success(), "client: {}", String::from_utf8_lossy(&client.stderr));
    let status = wait_with_timeout(&mut server, Duration::from_secs(30));
    let mut out = String::new();
    std::io::Read::read_to_string(server.stdout.as_mut().unwrap(), &mut out).unwrap();
    assert!(status.success(), "server: {out}");
    assert!(out.contains("message from node 8") && out.contains("Hello, World! (a message)"), "{out}");
    assert!(out.contains("written into my window: Hello, World! (an RMA)"), "{out}");
}

#[test]
fn scif_header_constants_match_the_library() {
    let env = Env::new();
    let consts: &[(&str, i64)] = &[
        ("SCIF_ACCEPT_SYNC", scif::SCIF_ACCEPT_SYNC as i64),
        ("SCIF_SEND_BLOCK", scif::SCIF_SEND_BLOCK as i64),
        ("SCIF_RECV_BLOCK", scif::SCIF_RECV_BLOCK as i64),
        ("SCIF_PROT_READ", scif::SCIF_PROT_READ as i64),
        ("SCIF_PROT_WRITE", scif::SCIF_PROT_WRITE as i64),
        ("SCIF_MAP_FIXED", scif::SCIF_MAP_FIXED as i64),
        ("SCIF_MAP_KERNEL", scif::SCIF_MAP_KERNEL as i64),
        ("SCIF_FENCE_INIT_SELF", scif::SCIF_FENCE_INIT_SELF as i64),
        ("SCIF_FENCE_INIT_PEER", scif::SCIF_FENCE_INIT_PEER as i64),
        ("SCIF_SIGNAL_LOCAL", scif::SCIF_SIGNAL_LOCAL as i64),
        ("SCIF_SIGNAL_REMOTE", scif::SCIF_SIGNAL_REMOTE as i64),
        ("SCIF_RMA_USECPU", scif::SCIF_RMA_USECPU as i64),
        ("SCIF_RMA_USECACHE", scif::SCIF_RMA_USECACHE as i64),
        ("SCIF_RMA_SYNC", scif::SCIF_RMA_SYNC as i64),
        ("SCIF_RMA_ORDERED", scif::SCIF_RMA_ORDERED as i64),
        ("SCIF_REGISTER_FAILED", scif::SCIF_REGISTER_FAILED),
        ("SCIF_PORT_RSVD", remora_scif::PORT_RSVD as i64),
    ];
    let mut src = String::from("#include <stdio.h>\n#include <scif.h>\nint main(void) {\n");
    for (name, _) in consts {
        src += &format!("    printf(\"{name} %lld\\n\", (long long)({name}));\n");
    }
    src += "    printf(\"sizeof_portID %zu\\n\", sizeof(struct scif_portID));\n";
    src += "    printf(\"sizeof_pollepd %zu\\n\", sizeof(struct scif_pollepd));\n    return 0;\n}\n";
    let c = env.prefix.path().join("scif_consts.c");
    std::fs::write(&c, src).unwrap();
    let exe = env.build_scif(&c);
    let out = Command::new(&exe).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    for (name, want) in consts {
        let line = format!("{name} {want}");
        assert!(text.lines().any(|l| l == line), "scif.h disagrees with libscif on {name}: {text}");
    }
    assert!(text.contains(&format!("sizeof_portID {}", std::mem::size_of::<scif::ScifPortId>())));
    assert!(text.contains(&format!("sizeof_pollepd {}", std::mem::size_of::<scif::ScifPollEpd>())));
}

#[test]
fn dolphin_abi_names_reach_the_same_functions() {
    let env = Env::new();
    let exe = env.build(&root().join("tests/c/dolphin_abi.c"), &[]);
    let lib = env.prefix.path().join("lib64/libsisci.so");
    let dynamic = Command::new("readelf").arg("-d").arg(&lib).output().expect("readelf (binutils)");
    assert!(
        String::from_utf8_lossy(&dynamic.stdout).contains("Library soname: [libsisci.so]"),
        "libsisci has a soname"
    );
    let out = env.run(&exe, 4).arg(&lib).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("node 4 through every name"),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
