//! Where nodes of one host meet: the runtime directory and the names inside it.
//!
//! `REMORA_RUNTIME_DIR`, else `$XDG_RUNTIME_DIR/remora`, else `/tmp/remora-<uid>`; mode 0700.
//! Node `N` listens on `node-N.sock` and holds `node-N.lock` while it runs.

use std::path::{Path, PathBuf};

/// The node a process belongs to when `REMORA_NODE` is not set.
pub const DEFAULT_NODE: u32 = 4;

/// The runtime directory named by the environment (not created).
pub fn runtime_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("REMORA_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    if let Some(d) = std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d).join("remora");
    }
    PathBuf::from(format!("/tmp/remora-{}", uid()))
}

fn uid() -> u32 {
    // /proc/self/status carries the real uid; avoids a libc dependency in this crate.
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|u| u.parse().ok()))
        })
        .unwrap_or(0)
}

/// The node named by `REMORA_NODE`, else [`DEFAULT_NODE`].
///
/// # Errors
/// A message when `REMORA_NODE` is set but is not a number.
pub fn node_from_env() -> Result<u32, String> {
    match std::env::var("REMORA_NODE") {
        Ok(v) if !v.trim().is_empty() => {
            v.trim().parse().map_err(|_| format!("REMORA_NODE={v:?} is not a node number"))
        }
        _ => Ok(DEFAULT_NODE),
    }
}

/// The control socket of `node` in `dir`.
pub fn socket_path(dir: &Path, node: u32) -> PathBuf {
    dir.join(format!("node-{node}.sock"))
}

/// The lock file of `node` in `dir`.
pub fn lock_path(dir: &Path, node: u32) -> PathBuf {
    dir.join(format!("node-{node}.lock"))
}

/// The nodes whose sockets exist in `dir`, sorted.
pub fn nodes_in(dir: &Path) -> Vec<u32> {
    let mut v: Vec<u32> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            name.strip_prefix("node-")?.strip_suffix(".sock")?.parse().ok()
        })
        .collect();
    v.sort_unstable();
    v
}

/// Create `dir` (and parents) with mode 0700 if it is missing.
///
/// # Errors
/// The I/O error of creating it.
pub fn ensure_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    if !dir.exists() {
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}
