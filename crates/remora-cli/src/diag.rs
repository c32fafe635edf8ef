//! `remora diag`: what a node needs from this machine, one check a line with its verdict,
//! like Dolphin's `dis_diag`: the configuration, the runtime directory, the daemon binary,
//! userfaultfd (maps of other hosts' segments; user memory moved into segments with other
//! threads' stores held), the memlock limit, memfd sealing, and, with
//! a cluster file, its syntax and whether every peer's port answers; the libfabric providers
//! this machine offers, and the transport this node would use.

use remora_sys::Memfd;
use std::time::Duration;

/// One check's outcome.
enum Verdict {
    Ok(String),
    Warn(String),
    Fail(String),
}

fn line(name: &str, v: &Verdict) {
    let (word, text) = match v {
        Verdict::Ok(t) => ("ok  ", t),
        Verdict::Warn(t) => ("WARN", t),
        Verdict::Fail(t) => ("FAIL", t),
    };
    println!("{word}  {name:<22} {text}");
}

fn runtime_dir(dir: &std::path::Path) -> Verdict {
    use std::os::unix::fs::PermissionsExt;
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => {
            let mode = m.permissions().mode() & 0o7777;
            let probe = dir.join(format!(".remora-diag-{}", std::process::id()));
            match std::fs::write(&probe, b"") {
                Ok(()) => {
                    let _ = std::fs::remove_file(&probe);
                    let who = if mode & 0o1002 == 0o1002 { "shared by every user" } else { "private" };
                    Verdict::Ok(format!("{} (mode {mode:o}, {who}, writable)", dir.display()))
                }
                Err(e) => Verdict::Fail(format!("{} is not writable: {e}", dir.display())),
            }
        }
        Ok(_) => Verdict::Fail(format!("{} is not a directory", dir.display())),
        Err(_) => {
            Verdict::Ok(format!("{} does not exist yet (the first node makes it, mode 0700)", dir.display()))
        }
    }
}

fn daemon(cfg: &remora_client::Config) -> Verdict {
    match remora_client::find_daemon(cfg) {
        Some(p) if p.is_file() => Verdict::Ok(format!("{}", p.display())),
        Some(p) => Verdict::Fail(format!("REMORA_DAEMON names {}, which is not a file", p.display())),
        None => {
            Verdict::Fail("remorad not found beside the libraries, in the prefix's bin or on PATH".into())
        }
    }
}

fn userfaultfd() -> Verdict {
    match remora_sys::uffd::Uffd::new() {
        Ok(_) => Verdict::Ok("available (maps of other hosts' segments work)".into()),
        Err(e) => Verdict::Warn(format!(
            "unavailable ({e}): maps of other hosts' segments fail; run as root or set vm.unprivileged_userfaultfd=1"
        )),
    }
}

/// Whether memory that becomes a segment in place (`scif_register`,
/// `SCIRegisterSegmentMemory`, `rsm_memseg_export_create`, `VipRegisterMem`) is moved with
/// other threads' stores held.
fn moves_guarded() -> Verdict {
    match remora_sys::uffd::write_holds() {
        Some(how) => {
            Verdict::Ok(format!("other threads' stores wait while user memory moves (through {how})"))
        }
        None => Verdict::Warn(
            "user memory moves unguarded: a store another thread makes into pages being registered may be \
             lost; run as root, grant access to /dev/userfaultfd or set vm.unprivileged_userfaultfd=1"
                .into(),
        ),
    }
}

fn memlock() -> Verdict {
    match remora_sys::memlock_limit() {
        None => Verdict::Ok("unlimited".into()),
        Some(n) => {
            Verdict::Ok(format!("{} KiB (Remora pins no memory; RDMA fabrics will need more)", n / 1024))
        }
    }
}

fn memfd() -> Verdict {
    match Memfd::create("diag", 4096) {
        Ok(m) if m.is_size_sealed() => Verdict::Ok("sealed memfds work".into()),
        Ok(_) => Verdict::Fail("memfds cannot be sealed".into()),
        Err(e) => Verdict::Fail(format!("memfd_create failed: {e}")),
    }
}

/// The providers libfabric offers here (`fi_info`), for one line.
fn providers() -> Verdict {
    match remora_ofi_sys::providers() {
        Ok(p) if p.is_empty() => Verdict::Warn("libfabric offers no provider with messages and RMA".into()),
        Ok(p) => Verdict::Ok(p.join(", ")),
        Err(e) => Verdict::Ok(format!("none: {e} (the tcp transport needs nothing of it)")),
    }
}

/// The transport this node would use towards other hosts, and whether it can.
fn transport(c: &remora_config::cluster::Cluster, node: u32) -> Verdict {
    use remora_config::cluster::LinkKind;
    let Some(kind) = c.kind(node) else {
        return Verdict::Warn(format!("node {node} is not in the cluster file"));
    };
    let LinkKind::Ofi(prov) = &kind else {
        return Verdict::Ok("tcp".into());
    };
    let host = c.addr(node).map(|a| a.host.as_str());
    match remora_ofi_sys::Endpoint::open(prov, host, 1, 4096) {
        Ok(ep) => {
            Verdict::Ok(format!("{} (libfabric provider {} opens an endpoint)", kind.name(), ep.provider()))
        }
        Err(e) if c.fallback_tcp => {
            Verdict::Warn(format!("{} is not available here ({e}): the node falls back to tcp", kind.name()))
        }
        Err(e) => Verdict::Fail(format!(
            "{} is not available here ({e}); the node will not start (fallback = \"tcp\" allows tcp)",
            kind.name()
        )),
    }
}

/// `remora diag`: every check, then the count of failures (a failure makes the command fail).
pub fn diag() -> Result<(), String> {
    let mut fails = 0;
    let mut say = |name: &str, v: Verdict| {
        if matches!(v, Verdict::Fail(_)) {
            fails += 1;
        }
        line(name, &v);
    };
    let env = match remora_config::Config::from_env() {
        Ok(c) => {
            say("configuration", Verdict::Ok(format!("node {}, every REMORA_* value valid", c.node)));
            c
        }
        Err(e) => {
            say("configuration", Verdict::Fail(e.to_string()));
            return Err("the configuration is not valid".into());
        }
    };
    let cfg = remora_client::Config::from(&env);
    say("runtime directory", runtime_dir(&env.runtime_dir));
    say("daemon", daemon(&cfg));
    say("memfd", memfd());
    say("userfaultfd", userfaultfd());
    say("registered memory", moves_guarded());
    say("memlock", memlock());
    let running = remora_proto::paths::nodes_in(&env.runtime_dir);
    say(
        "nodes running here",
        Verdict::Ok(if running.is_empty() { "none".into() } else { format!("{running:?}") }),
    );
    say("libfabric providers", providers());
    match remora_config::cluster::Cluster::find(&env) {
        Ok(None) => say("cluster", Verdict::Ok("no cluster file: this host's nodes only".into())),
        Ok(Some(c)) => {
            say(
                "cluster",
                Verdict::Ok(format!("{} nodes, heartbeat every {:?}", c.nodes.len(), c.heartbeat)),
            );
            say(&format!("transport of node {}", env.node), transport(&c, env.node));
            for n in &c.nodes {
                let addr = format!("{}:{}", n.host, n.port);
                let reached = std::net::ToSocketAddrs::to_socket_addrs(&addr)
                    .ok()
                    .and_then(|mut a| a.next())
                    .map(|a| std::net::TcpStream::connect_timeout(&a, Duration::from_secs(1)).is_ok());
                let v = match reached {
                    Some(true) => Verdict::Ok(format!("{addr} answers")),
                    Some(false) if running.contains(&n.id) => {
                        Verdict::Fail(format!("{addr} does not answer"))
                    }
                    Some(false) => {
                        Verdict::Warn(format!("{addr} does not answer (its daemon may not be up)"))
                    }
                    None => Verdict::Fail(format!("{addr} does not resolve")),
                };
                say(&format!("peer node {}", n.id), v);
            }
        }
        Err(e) => say("cluster", Verdict::Fail(e)),
    }
    println!();
    if fails == 0 {
        println!("verdict: this machine can run Remora nodes");
        Ok(())
    } else {
        Err(format!("{fails} check(s) failed"))
    }
}
