//! Is the `remorad` beside a test older than its sources?
//!
//! `cargo test -p some-crate` rebuilds that crate's test binaries, not the daemon binary of
//! another package, so after an edit to the node a test can quietly run yesterday's
//! `remorad`. When the test runs from a checkout of the workspace, [`stale_daemon`] walks the
//! sources `remorad` is built from (`crates/remora-node` and the workspace crates its
//! `[dependencies]` name, transitively) and names the first file newer than the binary.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The workspace's `crates/` directory as seen when this crate was compiled.
fn crates_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap_or(Path::new(".")).to_path_buf()
}

/// The workspace crates named in the `[dependencies]` table of `manifest` (lines such as
/// `remora-sys.workspace = true` or `remora-sys = { … }`).
fn workspace_deps(manifest: &str) -> Vec<String> {
    let mut in_deps = false;
    let mut out = Vec::new();
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_deps = line == "[dependencies]";
            continue;
        }
        if !in_deps || !line.starts_with("remora-") {
            continue;
        }
        let name: String = line.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-').collect();
        out.push(name);
    }
    out
}

/// The newest file (by modification time) under `dir`, recursively.
fn newest_under(dir: &Path, best: &mut Option<(SystemTime, PathBuf)>) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(meta) = entry.metadata() else { continue };
        if meta.is_dir() {
            newest_under(&path, best);
        } else if let Ok(m) = meta.modified() {
            if best.as_ref().is_none_or(|(t, _)| m > *t) {
                *best = Some((m, path));
            }
        }
    }
}

/// The newest source file of `remorad` under `crates` (each crate's `src/` and
/// `Cargo.toml`), or `None` when the tree is not there (an installed build).
fn newest_source(crates: &Path) -> Option<(SystemTime, PathBuf)> {
    let mut todo = vec!["remora-node".to_string()];
    let mut seen = BTreeSet::new();
    let mut best = None;
    while let Some(name) = todo.pop() {
        if !seen.insert(name.clone()) {
            continue;
        }
        let dir = crates.join(&name);
        let manifest = dir.join("Cargo.toml");
        let Ok(text) = fs::read_to_string(&manifest) else { continue };
        if let Ok(m) = fs::metadata(&manifest).and_then(|m| m.modified()) {
            if best.as_ref().is_none_or(|(t, _)| m > *t) {
                best = Some((m, manifest.clone()));
            }
        }
        newest_under(&dir.join("src"), &mut best);
        todo.extend(workspace_deps(&text));
    }
    best
}

/// A warning when `daemon` is older than one of the sources it is built from, naming that
/// file and the command that rebuilds it; `None` when it is current or the sources are not
/// at hand.
pub fn stale_daemon(daemon: &Path) -> Option<String> {
    let built = fs::metadata(daemon).and_then(|m| m.modified()).ok()?;
    let (newest, file) = newest_source(&crates_dir())?;
    (newest > built).then(|| {
        format!(
            "warning: {} is older than {} (run `cargo build -p remora-node`; this test may be \
             running an old daemon)",
            daemon.display(),
            file.display()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dependencies_are_read_from_the_dependencies_table_only() {
        let manifest = "[package]\nname = \"remora-x\"\n[dependencies]\nremora-sys = { workspace = true }\n\
                        remora-proto.workspace = true\nserde = \"1\"\n[dev-dependencies]\nremora-testkit.workspace = true\n";
        assert_eq!(workspace_deps(manifest), ["remora-sys", "remora-proto"]);
    }

    #[test]
    fn a_daemon_older_than_its_sources_is_named() {
        let crates = crates_dir();
        let (newest, _) = newest_source(&crates).expect("the workspace's sources");
        assert!(newest_source(&crates).is_some_and(|(_, f)| f.starts_with(&crates)));
        let dir = tempfile::tempdir().unwrap();
        let old = dir.path().join("remorad");
        fs::write(&old, b"").unwrap();
        let f = fs::File::options().write(true).open(&old).unwrap();
        f.set_modified(newest - std::time::Duration::from_secs(60)).unwrap();
        assert!(stale_daemon(&old).is_some_and(|w| w.contains("cargo build -p remora-node")));
        f.set_modified(newest + std::time::Duration::from_secs(60)).unwrap();
        assert_eq!(stale_daemon(&old), None);
    }
}
