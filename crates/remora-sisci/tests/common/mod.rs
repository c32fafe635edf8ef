//! A private cluster of node daemons for one test: its own runtime directory, daemons
//! started by the library itself, all shut down when the harness drops.

#![allow(dead_code)]

use remora_sisci::{Config, Sisci};
use std::path::PathBuf;
use std::time::Duration;

pub struct Harness {
    pub dir: tempfile::TempDir,
    pub cluster: Option<PathBuf>,
}

/// A free TCP port on the loopback interface.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

impl Harness {
    pub fn new() -> Harness {
        Harness { dir: tempfile::Builder::new().prefix("remora-test").tempdir().unwrap(), cluster: None }
    }

    /// Nodes `nodes` of this host, joined by a cluster file on loopback; with `force_tcp`
    /// they talk over TCP although they share the runtime directory.
    pub fn with_cluster(nodes: &[u32], force_tcp: bool) -> Harness {
        let mut h = Harness::new();
        let mut text = format!(
            "secret = \"remora-test-secret-0123456789\"\nheartbeat_ms = 50\nforce_tcp = {force_tcp}\n"
        );
        for n in nodes {
            text += &format!("[[node]]\nid = {n}\nhost = \"127.0.0.1\"\nport = {}\n", free_port());
        }
        let path = h.dir.path().join("cluster.toml");
        std::fs::write(&path, text).unwrap();
        h.cluster = Some(path);
        h
    }

    pub fn config(&self, node: u32) -> Config {
        Config {
            node,
            runtime_dir: self.dir.path().to_path_buf(),
            daemon: Some(daemon_path()),
            spawn: true,
            idle_exit: Duration::from_secs(60),
            cluster: self.cluster.clone(),
        }
    }

    pub fn sci(&self, node: u32) -> Sisci {
        Sisci::with_config(self.config(node))
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        for node in remora_proto::paths::nodes_in(self.dir.path()) {
            if let Ok(s) = remora_client::Session::open_control(&self.config(node)) {
                let _ = s.request(remora_proto::Request::Shutdown, &[]);
            }
        }
    }
}

pub fn daemon_path() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().parent().unwrap();
    let p = dir.join("remorad");
    assert!(p.exists(), "{} is missing: run `cargo build --workspace` first", p.display());
    p
}
