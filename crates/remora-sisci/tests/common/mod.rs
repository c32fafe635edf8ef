//! A private cluster of node daemons for one test: its own runtime directory, daemons
//! started by the library itself, all shut down when the harness drops.

#![allow(dead_code)]

use remora_sisci::{Config, Sisci};
use std::path::PathBuf;
use std::time::Duration;

pub struct Harness {
    pub dir: tempfile::TempDir,
}

impl Harness {
    pub fn new() -> Harness {
        Harness { dir: tempfile::Builder::new().prefix("remora-test").tempdir().unwrap() }
    }

    pub fn config(&self, node: u32) -> Config {
        Config {
            node,
            runtime_dir: self.dir.path().to_path_buf(),
            daemon: Some(daemon_path()),
            spawn: true,
            idle_exit: Duration::from_secs(60),
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
