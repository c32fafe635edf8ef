//! Starting the node daemon when none runs (the embedded default).

use crate::{ClientError, Config};
use remora_proto::paths;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long to wait for a started daemon's socket.
const START_WAIT: Duration = Duration::from_secs(10);

fn candidate(dir: &Path) -> Option<PathBuf> {
    [dir.join("remorad"), dir.join("../bin/remorad")].into_iter().find(|p| p.is_file())
}

/// Find `remorad`: `REMORA_DAEMON` (via [`Config::daemon`]), beside the library or
/// executable this code is linked into, in that prefix's `bin`, beside the running
/// executable (and one level up, for test binaries under `target/*/deps`), then on `PATH`.
pub fn find_daemon(cfg: &Config) -> Option<PathBuf> {
    if let Some(p) = &cfg.daemon {
        return Some(p.clone());
    }
    let here = find_daemon as fn(&Config) -> Option<PathBuf> as usize;
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(obj) = remora_sys::object_containing(here) {
        if let Some(d) = obj.parent() {
            dirs.push(d.to_path_buf());
        }
    }
    if let Ok(exe) = std::env::current_exe() {
        if let Some(d) = exe.parent() {
            dirs.push(d.to_path_buf());
            if let Some(up) = d.parent() {
                dirs.push(up.to_path_buf());
            }
        }
    }
    if let Some(p) = dirs.iter().find_map(|d| candidate(d)) {
        return Some(p);
    }
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).map(|d| d.join("remorad")).find(|p| p.is_file()))
        .unwrap_or(None)
}

/// Start the daemon of `cfg.node` (detached, in its own process group) and connect to it.
pub(crate) fn start_daemon(cfg: &Config) -> Result<OwnedFd, ClientError> {
    let daemon = find_daemon(cfg).ok_or_else(|| {
        ClientError::NoDaemon(
            "remorad not found beside the library, in its prefix's bin, on PATH, or at REMORA_DAEMON".into(),
        )
    })?;
    paths::ensure_dir(&cfg.runtime_dir)?;
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(cfg.runtime_dir.join(format!("node-{}.log", cfg.node)))?;
    let mut cmd = Command::new(&daemon);
    if let Some(c) = &cfg.cluster {
        cmd.arg("--cluster").arg(c);
    }
    let status = cmd
        .arg("--node")
        .arg(cfg.node.to_string())
        .arg("--runtime-dir")
        .arg(&cfg.runtime_dir)
        .arg("--idle-exit")
        .arg(cfg.idle_exit.as_secs().to_string())
        .arg("--auto")
        .arg("--detach")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .status()
        .map_err(|e| ClientError::NoDaemon(format!("cannot run {}: {e}", daemon.display())))?;
    if !status.success() {
        return Err(ClientError::NoDaemon(format!("{} exited with {status}", daemon.display())));
    }
    let path = paths::socket_path(&cfg.runtime_dir, cfg.node);
    let start = Instant::now();
    let mut pause = Duration::from_micros(200);
    loop {
        match remora_sys::seqpacket::connect(&path, false) {
            Ok(fd) => return Ok(fd),
            Err(e) if start.elapsed() > START_WAIT => {
                return Err(ClientError::NoDaemon(format!(
                    "started {} but node {} did not listen within {:?}: {e}",
                    daemon.display(),
                    cfg.node,
                    START_WAIT
                )))
            }
            Err(_) => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(20));
            }
        }
    }
}
