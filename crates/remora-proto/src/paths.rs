//! Where nodes of one host meet: the runtime directory and the names inside it.
//!
//! Which directory that is, `remora_config` decides (`REMORA_RUNTIME_DIR`, else
//! `$XDG_RUNTIME_DIR/remora`, else `/tmp/remora-<uid>`); it is kept at mode 0700.
//! Node `N` listens on `node-N.sock` and holds `node-N.lock` while it runs.

use std::path::{Path, PathBuf};

/// The control socket of `node` in `dir`.
pub fn socket_path(dir: &Path, node: u32) -> PathBuf {
    dir.join(format!("node-{node}.sock"))
}

/// The lock file of `node` in `dir`.
pub fn lock_path(dir: &Path, node: u32) -> PathBuf {
    dir.join(format!("node-{node}.lock"))
}

/// The file whose `flock` the daemons of this host hold while one of them finds or makes
/// the memory of reflective-memory group `group` (so two first members never make two).
pub fn group_lock_path(dir: &Path, group: u32) -> PathBuf {
    dir.join(format!("group-{group}.lock"))
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
