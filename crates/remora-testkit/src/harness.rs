//! A private set of nodes for one test: its own runtime directory (so tests never meet
//! each other's daemons), daemons the library starts by itself, and all of them shut down
//! when the harness drops, also when the test fails.

use crate::ports::free_port;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A test's own runtime directory, optionally with a cluster file on loopback.
#[derive(Debug)]
pub struct Harness {
    /// The runtime directory.
    pub dir: tempfile::TempDir,
    /// The cluster file, when the nodes are joined by one.
    pub cluster: Option<PathBuf>,
}

/// The `remorad` the test's build made (see [`crate::find_daemon`]).
///
/// # Panics
/// When there is none, with how to build it.
pub fn daemon_path() -> PathBuf {
    crate::find_daemon().unwrap_or_else(|s| panic!("{s}"))
}

impl Harness {
    /// An empty runtime directory.
    pub fn new() -> Harness {
        Harness { dir: tempfile::Builder::new().prefix("remora-test").tempdir().unwrap(), cluster: None }
    }

    /// Nodes `nodes` of this host, joined by a cluster file on loopback; with `force_tcp`
    /// they talk over TCP although they share the runtime directory (the path nodes of two
    /// hosts take).
    pub fn with_cluster(nodes: &[u32], force_tcp: bool) -> Harness {
        Harness::with_cluster_keys(nodes, &format!("force_tcp = {force_tcp}\n"))
    }

    /// Nodes `nodes` of this host, joined by a cluster file on loopback whose top carries
    /// `keys` too (e.g. `force_tcp = true` and `transport = "ofi+tcp"`); each node gets a
    /// free port and a free `ofi_port`.
    pub fn with_cluster_keys(nodes: &[u32], keys: &str) -> Harness {
        let mut h = Harness::new();
        let mut text = format!("secret = \"remora-test-secret-0123456789\"\nheartbeat_ms = 50\n{keys}");
        for n in nodes {
            text += &format!(
                "[[node]]\nid = {n}\nhost = \"127.0.0.1\"\nport = {}\nofi_port = {}\n",
                free_port(),
                free_port()
            );
        }
        let path = h.dir.path().join("cluster.toml");
        std::fs::write(&path, text).unwrap();
        h.cluster = Some(path);
        h
    }

    /// The runtime directory.
    pub fn runtime_dir(&self) -> &Path {
        self.dir.path()
    }

    /// The client configuration of a process of node `node` (the library starts the
    /// node's daemon when none runs).
    pub fn config(&self, node: u32) -> remora_client::Config {
        child_config(node, self.dir.path(), self.cluster.as_deref(), true)
    }
}

impl Default for Harness {
    fn default() -> Harness {
        Harness::new()
    }
}

/// The lines of a node's log a failed test shows (the end of it).
const LOG_LINES_SHOWN: usize = 80;

impl Harness {
    /// The end of every daemon log of the runtime directory, written to standard error:
    /// why a daemon ended a connection, in the output of the test that failed of it (the
    /// directory goes with the harness).
    pub fn show_logs(&self) {
        let Ok(dir) = std::fs::read_dir(self.dir.path()) else { return };
        let mut logs: Vec<PathBuf> =
            dir.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "log")).collect();
        logs.sort();
        for log in logs {
            // Lossily: a log cut in the middle of a character still shows.
            let text = String::from_utf8_lossy(&std::fs::read(&log).unwrap_or_default()).into_owned();
            let lines: Vec<&str> = text.lines().collect();
            let from = lines.len().saturating_sub(LOG_LINES_SHOWN);
            eprintln!("---- {} (its last {} lines) ----", log.display(), lines.len() - from);
            for l in &lines[from..] {
                eprintln!("{l}");
            }
        }
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.show_logs();
        }
        for node in remora_proto::paths::nodes_in(self.dir.path()) {
            let cfg = remora_client::Config { daemon: None, spawn: false, ..self.config(node) };
            if let Ok(s) = remora_client::Session::open_control(&cfg) {
                let _ = s.request(remora_proto::Request::Shutdown, &[]);
            }
        }
    }
}

/// The client configuration of a process of host `k` of a namespace cluster (its daemon
/// already runs there).
pub fn net_config(c: &crate::NetCluster, k: usize) -> remora_client::Config {
    c.client_config(k)
}

/// The client configuration of a process of node `node` in `runtime_dir` (a test's child
/// process, given the directory by its parent), with the cluster file `cluster`; with
/// `spawn`, the library starts the node's daemon (the test kit's) when none runs.
pub fn child_config(
    node: u32,
    runtime_dir: impl Into<PathBuf>,
    cluster: Option<&Path>,
    spawn: bool,
) -> remora_client::Config {
    remora_client::Config {
        node,
        runtime_dir: runtime_dir.into(),
        daemon: spawn.then(daemon_path),
        spawn,
        idle_exit: Duration::from_secs(60),
        cluster: cluster.map(Path::to_path_buf),
    }
}
