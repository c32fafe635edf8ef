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
    Some(dir.join("remorad")).filter(|p| p.is_file())
}

/// Where [`find_daemon`] looks, in order (`REMORA_DAEMON` aside): beside the library or
/// executable this code is linked into, in that prefix's `bin`, beside the running executable
/// (and one level up, for test binaries under `target/*/deps`), then on `PATH`.
fn search_dirs() -> Vec<PathBuf> {
    let here = find_daemon as fn(&Config) -> Option<PathBuf> as usize;
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(obj) = remora_sys::object_containing(here) {
        if let Some(d) = obj.parent() {
            dirs.push(d.to_path_buf());
            dirs.push(d.join("../bin"));
        }
    }
    if let Ok(exe) = std::env::current_exe() {
        if let Some(d) = exe.parent() {
            dirs.push(d.to_path_buf());
            dirs.push(d.join("../bin"));
            if let Some(up) = d.parent() {
                dirs.push(up.to_path_buf());
            }
        }
    }
    if let Some(p) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&p));
    }
    dirs
}

/// Find `remorad`: `REMORA_DAEMON` (via [`Config::daemon`]), else the first of the
/// places `search_dirs` lists that holds one (beside the library or executable, in its
/// prefix's `bin`, one level up for test binaries, then on `PATH`).
pub fn find_daemon(cfg: &Config) -> Option<PathBuf> {
    if let Some(p) = &cfg.daemon {
        return Some(p.clone());
    }
    search_dirs().iter().find_map(|d| candidate(d))
}

/// Say why the daemon could not start, once per process, on stderr (where a person sees it,
/// beside the API's error code), and make it the error.
fn cannot_start(cfg: &Config, why: String) -> ClientError {
    static SAID: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    let msg = format!("node {}: cannot start its daemon: {why}", cfg.node);
    SAID.get_or_init(|| eprintln!("remora: {msg}"));
    ClientError::NoDaemon(msg)
}

/// The last lines of the node's log (what a daemon that failed said).
fn log_tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail = lines[lines.len().saturating_sub(3)..].join(" | ");
    if tail.is_empty() {
        format!("{} is empty", log.display())
    } else {
        format!("{} says: {tail}", log.display())
    }
}

/// Start the daemon of `cfg.node` (detached, in its own process group) and connect to it.
pub(crate) fn start_daemon(cfg: &Config) -> Result<OwnedFd, ClientError> {
    let daemon = find_daemon(cfg).ok_or_else(|| {
        let looked: Vec<String> = search_dirs().iter().map(|d| d.display().to_string()).collect();
        cannot_start(
            cfg,
            format!("remorad not found (REMORA_DAEMON is unset; looked in {})", looked.join(", ")),
        )
    })?;
    paths::ensure_dir(&cfg.runtime_dir)
        .map_err(|e| cannot_start(cfg, format!("runtime directory {}: {e}", cfg.runtime_dir.display())))?;
    let log_path = cfg.runtime_dir.join(format!("node-{}.log", cfg.node));
    let log = std::fs::OpenOptions::new().create(true).append(true).open(&log_path).map_err(|e| {
        cannot_start(cfg, format!("runtime directory {} is not writable: {e}", cfg.runtime_dir.display()))
    })?;
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
        .map_err(|e| cannot_start(cfg, format!("cannot run {}: {e}", daemon.display())))?;
    if !status.success() {
        return Err(cannot_start(
            cfg,
            format!("{} exited with {status}; {}", daemon.display(), log_tail(&log_path)),
        ));
    }
    let path = paths::socket_path(&cfg.runtime_dir, cfg.node);
    let start = Instant::now();
    let mut pause = Duration::from_micros(200);
    loop {
        match remora_sys::seqpacket::connect(&path, false) {
            Ok(fd) => return Ok(fd),
            Err(e) if start.elapsed() > START_WAIT => {
                return Err(cannot_start(
                    cfg,
                    format!(
                        "started {} but it did not listen at {} within {:?} ({e}); {}",
                        daemon.display(),
                        path.display(),
                        START_WAIT,
                        log_tail(&log_path)
                    ),
                ))
            }
            Err(_) => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(20));
            }
        }
    }
}
