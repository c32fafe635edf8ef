//! C programs built against the installed headers and library, run as real clients:
//! `remora install`, `cc`, and two nodes of this host.

mod c_support;
use c_support::*;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::time::Duration;

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
fn flag_named_and_shared_data_interrupts() {
    let env = Env::new();
    let exe = env.build(&root().join("tests/c/flag_interrupts.c"), &[]);
    let mut child = Reap(env.run(&exe, 4).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap());
    let status = wait_with_timeout(&mut child, Duration::from_secs(120));
    let (mut out, mut err) = (String::new(), String::new());
    std::io::Read::read_to_string(child.stdout.as_mut().unwrap(), &mut out).unwrap();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(status.success(), "flag_interrupts failed ({status:?}): {out}{err}");
    assert!(out.contains("checks passed"), "flag_interrupts said: {out}{err}");
}

#[test]
fn legacy_block_transfers_copy_routines_node_names_and_dma_channels() {
    let env = Env::new();
    let exe = env.build(&root().join("tests/c/legacy_calls.c"), &[]);
    let mut child = Reap(env.run(&exe, 4).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap());
    let status = wait_with_timeout(&mut child, Duration::from_secs(120));
    let (mut out, mut err) = (String::new(), String::new());
    std::io::Read::read_to_string(child.stdout.as_mut().unwrap(), &mut out).unwrap();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(status.success(), "legacy_calls failed ({status:?}): {out}{err}");
    assert!(out.contains("checks passed"), "legacy_calls said: {out}{err}");
}

#[test]
fn libsisci_exports_every_call_the_header_declares() {
    let env = Env::new();
    let lib = env.prefix.path().join("lib64/libsisci.so");
    let Ok(out) = Command::new("objdump").arg("-T").arg(&lib).output() else {
        eprintln!("SKIP: objdump is not installed (apt-get install binutils)");
        return;
    };
    let symbols = String::from_utf8_lossy(&out.stdout);
    let exported = |name: &str| symbols.lines().any(|l| l.split_whitespace().last() == Some(name));
    // Every function sisci_api.h declares (comments dropped): an identifier of the API's
    // spellings followed by "(".
    let header = std::fs::read_to_string(root().join("include/sisci_api.h")).unwrap();
    let mut code = String::new();
    let mut rest = header.as_str();
    while let Some(start) = rest.find("/*") {
        code.push_str(&rest[..start]);
        rest = rest[start..].find("*/").map_or("", |end| &rest[start + end + 2..]);
    }
    code.push_str(rest);
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut names: Vec<&str> = code
        .match_indices('(')
        .map(|(at, _)| {
            let before = code[..at].trim_end();
            let from = before.rfind(|c: char| !ident(c)).map_or(0, |i| i + 1);
            &before[from..]
        })
        .filter(|w| {
            let api =
                |p: &str| w.strip_prefix(p).is_some_and(|r| r.starts_with(|c: char| c.is_ascii_uppercase()));
            api("SCI") || api("DIS") || *w == "GetSciMemCopyFunction" || *w == "SetSciMemCopyFunction"
        })
        .collect();
    names.sort_unstable();
    names.dedup();
    assert!(names.len() > 90, "found the declarations: {names:?}");
    for n in names {
        assert!(exported(n), "{n} is declared in sisci_api.h and exported by libsisci.so");
        for abi in ["_SISCI_PUBLIC_FUNC_ST_", "_SISCI_PUBLIC_FUNC_MT_"] {
            assert!(exported(&format!("{abi}{n}")), "{abi}{n} is exported");
        }
    }
}

#[test]
fn close_with_everything_open_tears_it_down() {
    let env = Env::new();
    let exe = env.build(&root().join("tests/c/close_with_children.c"), &[]);
    let o = env.run(&exe, 4).output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success() && out.contains("passed"), "{out}{}", String::from_utf8_lossy(&o.stderr));
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
        (
            "REMORA_SCIF_QUEUE_BYTES",
            "4k",
            "REMORA_SCIF_QUEUE_BYTES=\"4k\": allowed: a decimal integer 256..=16777216 (bytes)",
        ),
    ] {
        let o = env.run(&exe, 4).env(var, value).output().unwrap();
        let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        assert!(o.status.success(), "{var}={value:?}: {out}{err}");
        assert!(err.lines().any(|l| l.starts_with("remora: ") && l.contains(says)), "{var}={value:?}: {err}");
        assert_eq!(err.lines().filter(|l| l.starts_with("remora: ")).count(), 1, "said once: {err}");
    }
}

#[test]
fn install_splits_debug_info_and_writes_pkg_config_and_ld_conf() {
    let prefix = tempfile::Builder::new().prefix("remora-install").tempdir().unwrap();
    let p = prefix.path();
    let o = Command::new(env!("CARGO_BIN_EXE_remora")).args(["install", "--prefix"]).arg(p).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let sections = |f: &std::path::Path| {
        let o = Command::new("readelf").arg("-S").arg(f).output().expect("readelf (binutils)");
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    for f in [
        "bin/remorad",
        "bin/remora",
        "lib64/libsisci.so",
        "lib64/libscif.so.0.0.1",
        "lib64/librsm.so.2",
        "lib64/libvipl.so.1",
    ] {
        let path = p.join(f);
        let s = sections(&path);
        assert!(!s.contains(".debug_info"), "{f} is shipped without debug information");
        assert!(s.contains(".gnu_debuglink"), "{f} links to its debug file");
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let debug = path.parent().unwrap().join(".debug").join(format!("{name}.debug"));
        assert!(sections(&debug).contains(".debug_info"), "{} holds the debug information", debug.display());
    }
    for pc in [
        "share/pkgconfig/sisci.pc",
        "share/pkgconfig/scif.pc",
        "share/pkgconfig/rsm.pc",
        "lib64/pkgconfig/rsm.pc",
    ] {
        assert!(p.join(pc).is_file(), "{pc}");
    }
    let conf = std::fs::read_to_string(p.join("etc/ld.so.conf.d/remora.conf")).unwrap();
    assert_eq!(conf.trim(), p.join("lib64").display().to_string());
    assert!(p.join("lib/systemd/system/remorad@.service").is_file());
    // Manual pages generated from the command-line definitions.
    let remora_1 = std::fs::read_to_string(p.join("share/man/man1/remora.1")).unwrap();
    assert!(remora_1.contains(".TH remora 1") && remora_1.contains("bench"), "{remora_1}");
    let remorad_8 = std::fs::read_to_string(p.join("share/man/man8/remorad.8")).unwrap();
    assert!(remorad_8.contains(".TH remorad 8") && remorad_8.contains("detach"), "{remorad_8}");
}

#[test]
fn a_daemon_that_cannot_start_says_why() {
    let env = Env::new();
    let exe = env.build(&root().join("tests/c/bad_config.c"), &[]);
    let rt = env.runtime.path().join("fresh");
    for (var, value, says) in [
        ("REMORA_DAEMON", "/nonexistent/remorad", "cannot run /nonexistent/remorad"),
        ("REMORA_DAEMON", "/bin/false", "/bin/false exited with"),
        ("REMORA_RUNTIME_DIR", "/proc/remora-test", "runtime directory /proc/remora-test"),
    ] {
        let o = env.run(&exe, 4).env("REMORA_RUNTIME_DIR", &rt).env(var, value).output().unwrap();
        let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        // SCIOpen fails with SCI_ERR_SYSTEM (the program exits 2 for a code other than
        // ILLEGAL_PARAMETER), and one line on stderr says why.
        assert_eq!(o.status.code(), Some(2), "{var}={value:?}: {out}{err}");
        let line = "remora: node 4: cannot start its daemon: ";
        assert!(err.lines().any(|l| l.starts_with(line) && l.contains(says)), "{var}={value:?}: {err}");
    }
    // A daemon that starts but cannot open its transport (its port is taken): the library
    // hears of it from `remorad --detach` at once, with the daemon's own words from its log,
    // rather than waiting for a socket that never comes ("did not listen within").
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let cluster = env.runtime.path().join("taken.toml");
    let port = taken.local_addr().unwrap().port();
    std::fs::write(&cluster, format!("secret = \"a test secret of enough length\"\n[[node]]\nid = 4\nhost = \"127.0.0.1\"\nport = {port}\n")).unwrap();
    // Also where a daemon that died left its socket behind (the usual case after a crash).
    for stale in [false, true] {
        let rt = env.runtime.path().join(format!("taken-{stale}"));
        if stale {
            std::fs::create_dir(&rt).unwrap();
            drop(std::os::unix::net::UnixListener::bind(rt.join("node-4.sock")).unwrap());
        }
        let o = env
            .run(&exe, 4)
            .env("REMORA_RUNTIME_DIR", &rt)
            .env("REMORA_CLUSTER", &cluster)
            .env("REMORA_DAEMON", remora_testkit::daemon_path())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "stale socket {stale}: {err}");
        let said =
            err.lines().find(|l| l.starts_with("remora: node 4: cannot start its daemon: ")).unwrap_or("");
        assert!(said.contains("exited with") && said.contains("in use"), "stale socket {stale}: {err}");
    }
    drop(taken);
}

#[test]
fn cancelled_threads_end_alone_and_the_library_goes_on() {
    let env = Env::new();
    let src = root().join("tests/c/cancel_threads.c");
    let exe = env.build(&src, &[]);
    let mut child = Reap(env.run(&exe, 4).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap());
    let status = wait_with_timeout(&mut child, Duration::from_secs(60));
    let (mut out, mut err) = (String::new(), String::new());
    use std::io::Read as _;
    child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(status.success() && out.contains("passed"), "cancel_threads ({status:?}): {out}{err}");
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

/// Under a lowered `ulimit -f`, a segment past it (the daemon makes its memory) and memory
/// past it given to `SCIRegisterSegmentMemory` (the library moves it) are `SCI_ERR_NOSPC`;
/// `SIGXFSZ`, which ended the program (and its daemon), is never raised.
#[test]
fn memory_past_the_file_size_limit_is_nospc_and_the_program_lives() {
    let env = Env::new();
    env.passes(&env.build(&root().join("tests/c/file_size_limit.c"), &[]), 4, "PASS");
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
    let Some(c) = netns_hosts("multi-host hello world") else { return };
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
    let Some(c) = netns_hosts("stores across hosts without unmap") else { return };
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

#[test]
fn an_interrupt_ping_pong_across_hosts_survives_a_signal_storm() {
    // Both waiters blocked, each reading the other process's trigger flow itself while
    // it waits; a SIGALRM every 200 us (no SA_RESTART) interrupts those polls and reads.
    let Some(c) = netns_hosts("the interrupt ping-pong across hosts") else { return };
    let env = Env::new();
    let exe = env.build(&root().join("tests/c/intr_pingpong_signals.c"), &[]);
    let side = |host: usize, role: &str, other: usize| {
        let mut cmd = c.command(host, &exe);
        cmd.args([role, &c.node(other).to_string(), "3000"]).stdout(Stdio::piped()).stderr(Stdio::piped());
        Reap(cmd.spawn().unwrap())
    };
    let mut a = side(1, "a", 2);
    let mut b = side(2, "b", 1);
    for (name, child) in [("a", &mut a), ("b", &mut b)] {
        let status = wait_with_timeout(child, Duration::from_secs(120));
        let mut out = String::new();
        use std::io::Read as _;
        child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
        child.stderr.take().unwrap().read_to_string(&mut out).unwrap();
        assert!(status.success() && out.contains("all passed"), "side {name}: {out}");
        eprintln!("{}", out.trim());
    }
}

#[test]
fn a_forked_child_stores_into_an_inherited_map_of_another_host_are_reported_not_home() {
    let Some(c) = netns_hosts("a forked child's inherited map across hosts") else { return };
    let env = Env::new();
    let exe = env.build(&root().join("tests/c/fork_inherited_map.c"), &[]);
    let mut home = Reap(c.command(1, &exe).arg("home").stdout(Stdio::piped()).spawn().unwrap());
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(home.stdout.take().unwrap()));
    assert_eq!(lines.next().and_then(|l| l.ok()).as_deref(), Some("ready"), "the home did not start");
    let user = c.command(2, &exe).arg("user").arg(c.node(1).to_string()).output().unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&user.stdout), String::from_utf8_lossy(&user.stderr));
    assert!(user.status.success(), "user: {said}");
    let status = wait_with_timeout(&mut home, Duration::from_secs(30));
    let rest: Vec<String> = lines.map_while(|l| l.ok()).collect();
    assert!(status.success(), "home: {rest:?}");
}
