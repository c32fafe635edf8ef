//! Where a soak's nodes live: K node daemons on this host (a private runtime directory,
//! joined over TCP on loopback, started by the soak's own sessions), or one node on each of
//! two network-namespace hosts (`--netns`, built by `remora-netns` as the multi-host tests
//! build theirs: a veth from each host to a bridge), whose daemons the soak starts itself.
//! Either way the rest of the soak asks this module for a node's client configuration, its
//! daemon's restart, and (namespace hosts only) the cable and `tc netem` of a host.

use remora_client::{Config, Session};
use remora_netns::NetCluster;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The nodes of a run and how to reach each.
pub(crate) struct Nodes {
    /// The node ids.
    pub(crate) ids: Vec<u32>,
    /// The heartbeat period of the cluster file.
    pub(crate) hb: Duration,
    /// The client configuration of the first node (runtime directory of this host).
    base: Config,
    /// Each node's runtime directory (one per namespace host; all the same on one host).
    dirs: Vec<PathBuf>,
    /// The namespace hosts (`--netns`); their daemons are the cluster's children.
    net: Option<Mutex<NetCluster>>,
    /// The soak's own directory (logs; the runtime directory on one host).
    pub(crate) dir: PathBuf,
}

/// A free TCP port on loopback.
fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("no free port: {e}"))
}

impl Nodes {
    /// `count` nodes on this host: a private runtime directory and a cluster file over TCP
    /// on loopback; the daemons are started by the first session of each node.
    pub(crate) fn local(count: u32, seed: u64, heartbeat_ms: u64) -> Result<Nodes, String> {
        let ids: Vec<u32> = (1..=count).map(|i| 4 * i).collect();
        let dir = std::env::temp_dir().join(format!("remora-soak-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut text = format!(
            "secret = \"remora-soak-{seed:016x}-secret\"\nheartbeat_ms = {heartbeat_ms}\nforce_tcp = true\n"
        );
        for n in &ids {
            text += &format!("[[node]]\nid = {n}\nhost = \"127.0.0.1\"\nport = {}\n", free_port()?);
        }
        let cluster = dir.join("cluster.toml");
        std::fs::write(&cluster, text).map_err(|e| e.to_string())?;
        let base = Config {
            node: ids[0],
            runtime_dir: dir.clone(),
            daemon: Config::from_env().ok().and_then(|c| c.daemon),
            spawn: true,
            idle_exit: Duration::from_secs(3600),
            cluster: Some(cluster),
        };
        let dirs = vec![dir.clone(); ids.len()];
        Ok(Nodes { ids, hb: Duration::from_millis(heartbeat_ms), base, dirs, net: None, dir })
    }

    /// Two namespace hosts with one node each (nodes 4 and 8, heartbeat
    /// [`remora_netns::HEARTBEAT_MS`]); `Err` says why they cannot be built here.
    pub(crate) fn netns() -> Result<Nodes, String> {
        let daemon = crate::daemon_binary()?;
        let c = NetCluster::start(2, &daemon).map_err(|s| s.to_string())?;
        let ids = vec![c.node(1), c.node(2)];
        let dirs = vec![c.runtime_dir(1).to_path_buf(), c.runtime_dir(2).to_path_buf()];
        let base = c.client_config(1);
        let dir = c.dir().to_path_buf();
        let hb = Duration::from_millis(remora_netns::HEARTBEAT_MS);
        Ok(Nodes { ids, hb, base, dirs, net: Some(Mutex::new(c)), dir })
    }

    /// Whether the nodes are on namespace hosts.
    pub(crate) fn is_netns(&self) -> bool {
        self.net.is_some()
    }

    /// The host (1-based) of `node`.
    fn host(&self, node: u32) -> usize {
        self.ids.iter().position(|&n| n == node).map_or(1, |i| i + 1)
    }

    /// The client configuration of a process of `node`.
    pub(crate) fn cfg(&self, node: u32) -> Config {
        Config { node, runtime_dir: self.dirs[self.host(node) - 1].clone(), ..self.base.clone() }
    }

    /// The runtime directories of the nodes, in order, comma separated (for the workers).
    pub(crate) fn dirs_arg(&self) -> String {
        self.dirs.iter().map(|d| d.to_string_lossy().into_owned()).collect::<Vec<_>>().join(",")
    }

    /// The configuration the workers' environment carries.
    pub(crate) fn cluster_file(&self) -> &Path {
        self.base.cluster.as_deref().unwrap_or(Path::new(""))
    }

    /// A command that runs `exe` as a process of worker `index`'s host (on namespace hosts,
    /// inside host `index % 2 + 1`'s namespace, so what it dials goes over the bridge).
    pub(crate) fn command(&self, exe: &Path, index: u32) -> Command {
        match &self.net {
            Some(net) => lock(net).command(index as usize % 2 + 1, exe),
            None => {
                let mut c = Command::new(exe);
                // The soak starts and restarts the daemons itself: a worker's library that
                // restarted a killed daemon within milliseconds would hide the peers' view
                // of its death (a window shorter than the observer's polls).
                c.env("REMORA_RUNTIME_DIR", &self.base.runtime_dir)
                    .env("REMORA_IDLE_EXIT", "3600")
                    .env("REMORA_NO_SPAWN", "1")
                    .env("REMORA_CLUSTER", self.cluster_file());
                c
            }
        }
    }

    /// Start every node's daemon (one host: by opening a session; namespace hosts run
    /// theirs already).
    pub(crate) fn start(&self) -> Result<(), String> {
        for &n in &self.ids {
            let d = remora_sisci::Descriptor::open(&remora_sisci::Sisci::with_config(self.cfg(n)))
                .map_err(|e| format!("node {n}: {e}"))?;
            for &m in self.ids.iter().filter(|&&m| m != n) {
                let _ = d.probe_node(0, m);
            }
            let _ = d.close();
        }
        Ok(())
    }

    /// After `node`'s daemon was killed: reap it (namespace hosts) and start it again;
    /// whether it answers within 10 s.
    pub(crate) fn restart(&self, node: u32) -> bool {
        if let Some(net) = &self.net {
            let mut c = lock(net);
            let k = self.host(node);
            c.kill_daemon(k);
            // `start_daemon` panics when the daemon does not listen within its limit.
            let started = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| c.start_daemon(k)));
            return started.is_ok();
        }
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(10) {
            if Session::open(&self.cfg(node)).is_ok() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }

    /// Take the cable of `node`'s host out (`up` false) or put it back (namespace hosts).
    pub(crate) fn cable(&self, node: u32, up: bool) -> Result<(), String> {
        let net = self.net.as_ref().ok_or("no namespace hosts")?;
        let c = lock(net);
        let k = self.host(node);
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(
            || {
                if up {
                    c.link_up(k)
                } else {
                    c.link_down(k)
                }
            },
        ))
        .map_err(|_| format!("ip link set eth0 {} failed on host {k}", if up { "up" } else { "down" }))
    }

    /// Run `tc qdisc ARGS` in `node`'s host namespace; its stderr on failure.
    pub(crate) fn tc(&self, node: u32, args: &[&str]) -> Result<(), String> {
        let net = self.net.as_ref().ok_or("no namespace hosts")?;
        let out = lock(net)
            .command(self.host(node), "tc")
            .arg("qdisc")
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("tc: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!("tc qdisc {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()))
        }
    }

    /// Whether `tc netem` works here: `Err` says why not (e.g. a kernel without
    /// `sch_netem`).
    pub(crate) fn netem_works(&self) -> Result<(), String> {
        let n = self.ids[0];
        self.tc(n, &["add", "dev", "eth0", "root", "netem", "delay", "1ms"])?;
        self.tc(n, &["del", "dev", "eth0", "root"])
    }

    /// Stop every daemon: a shutdown request to each (the namespace hosts' daemons are
    /// killed when the cluster is dropped as well).
    pub(crate) fn shutdown(&self) {
        for &n in &self.ids {
            if let Ok(s) = Session::open_control(&self.cfg(n)) {
                let _ = s.request(remora_proto::Request::Shutdown, &[]);
            }
        }
    }

    /// Keep the namespace hosts' directory (logs) after the run: it is dropped otherwise.
    pub(crate) fn keep_logs(&self) {
        if let Some(net) = &self.net {
            let from = lock(net).dir().to_path_buf();
            let to = std::env::temp_dir().join(format!("remora-soak-netns-{}", std::process::id()));
            let _ = copy_dir(&from, &to);
        }
    }

    /// Where the logs of a failed run are left.
    pub(crate) fn log_dir(&self) -> PathBuf {
        match &self.net {
            Some(_) => std::env::temp_dir().join(format!("remora-soak-netns-{}", std::process::id())),
            None => self.dir.clone(),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Copy the files of `from` (and its subdirectories) to `to`, sockets left out.
fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)?.flatten() {
        let t = e.file_type()?;
        if t.is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()))?;
        } else if t.is_file() {
            std::fs::copy(e.path(), to.join(e.file_name()))?;
        }
    }
    Ok(())
}
