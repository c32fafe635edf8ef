//! The runtime loader's view of a prefix: whether `ld.so` finds libraries in a directory
//! without a run path (the directories `/etc/ld.so.conf` names, following its `include`
//! lines, and the trusted ones it always searches), which file names it, and refreshing
//! its cache.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The directories `ldconfig` always scans, whatever `ld.so.conf` says.
const TRUSTED: &[&str] = &["/lib", "/usr/lib", "/lib64", "/usr/lib64"];

/// Whether `name` matches the shell pattern `pattern` (`*` and `?`, as `ld.so.conf`'s
/// `include` lines use them in a file name).
fn matches(pattern: &[u8], name: &[u8]) -> bool {
    match (pattern.first(), name.first()) {
        (None, None) => true,
        (Some(b'*'), _) => matches(&pattern[1..], name) || (!name.is_empty() && matches(pattern, &name[1..])),
        (Some(b'?'), Some(_)) => matches(&pattern[1..], &name[1..]),
        (Some(p), Some(n)) if p == n => matches(&pattern[1..], &name[1..]),
        _ => false,
    }
}

/// The files an `include` pattern names: a path whose last part may hold `*` or `?`,
/// relative to `base` unless absolute; sorted, as ldconfig reads them.
fn expand(base: &Path, pattern: &str) -> Vec<PathBuf> {
    let full = base.join(pattern);
    let (Some(dir), Some(name)) = (full.parent(), full.file_name()) else { return Vec::new() };
    let name = name.to_string_lossy().into_owned();
    if !name.contains(['*', '?']) {
        return vec![full.clone()];
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .filter(|e| matches(name.as_bytes(), e.file_name().as_encoded_bytes()))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found
}

/// The directories `conf` names, its includes followed (`depth` bounds their nesting), each
/// with the file that names it.
fn read_conf(conf: &Path, depth: u32, out: &mut Vec<(PathBuf, PathBuf)>) {
    let Ok(text) = std::fs::read_to_string(conf) else { return };
    let base = conf.parent().unwrap_or(Path::new("/"));
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        if let Some(pattern) = line.strip_prefix("include").filter(|r| r.starts_with([' ', '\t'])) {
            if depth < 8 {
                for p in pattern.split_whitespace() {
                    for f in expand(base, p) {
                        read_conf(&f, depth + 1, out);
                    }
                }
            }
        } else if !line.is_empty() && !line.starts_with("hwcap") {
            // Old files may give a library type after `=` or `:`; the directory is before it.
            for d in line.split([' ', '\t', ',']).filter(|d| !d.is_empty()) {
                let d = d.split_once('=').map_or(d, |(d, _)| d);
                out.push((PathBuf::from(d), conf.to_path_buf()));
            }
        }
    }
}

/// Every directory the loader searches without a run path, with the file that names it
/// (`None` for the trusted ones): those `conf` (`/etc/ld.so.conf`) names, then the trusted.
fn searched(conf: &Path) -> Vec<(PathBuf, Option<PathBuf>)> {
    let mut named = Vec::new();
    read_conf(conf, 0, &mut named);
    let named = named.into_iter().map(|(d, c)| (d, Some(c)));
    named.chain(TRUSTED.iter().map(|d| (PathBuf::from(d), None))).collect()
}

/// Whether `a` and `b` are the same directory (as written, or once symbolic links are
/// resolved, e.g. `/lib` → `usr/lib`).
fn same(a: &Path, b: &Path) -> bool {
    let clean = |p: &Path| p.components().collect::<PathBuf>();
    clean(a) == clean(b) || matches!((a.canonicalize(), b.canonicalize()), (Ok(x), Ok(y)) if x == y)
}

/// Where the loader's configuration `conf` makes it search one of `dirs`: each such
/// directory (as `dirs` spells it) with the file naming it (`None`: a trusted directory).
fn listing_in(conf: &Path, dirs: &[PathBuf]) -> Vec<(PathBuf, Option<PathBuf>)> {
    let all = searched(conf);
    let mut out = Vec::new();
    for dir in dirs {
        out.extend(all.iter().filter(|(d, _)| same(d, dir)).map(|(_, c)| (dir.clone(), c.clone())));
    }
    // Once each (`/lib` and `/usr/lib` are one directory where `/lib` is a link).
    out.dedup();
    out
}

/// Where the loader (`/etc/ld.so.conf`) searches one of `dirs` without a run path: each such
/// directory with the file naming it (`None`: a directory it always searches).
pub(super) fn listing(dirs: &[PathBuf]) -> Vec<(PathBuf, Option<PathBuf>)> {
    listing_in(Path::new("/etc/ld.so.conf"), dirs)
}

/// Run `ldconfig` (which rebuilds the loader's cache from the directories it searches).
pub(super) fn ldconfig() -> Result<(), String> {
    let found = ["/sbin/ldconfig", "/usr/sbin/ldconfig"].into_iter().find(|p| Path::new(p).exists());
    let o = Command::new(found.unwrap_or("ldconfig")).output().map_err(|e| format!("ldconfig: {e}"))?;
    if o.status.success() {
        Ok(())
    } else {
        Err(format!("ldconfig: {}", String::from_utf8_lossy(&o.stderr).trim()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_as_the_shell_does() {
        assert!(matches(b"*.conf", b"libc.conf"));
        assert!(matches(b"*.conf", b".conf"));
        assert!(!matches(b"*.conf", b"libc.conf.bak"));
        assert!(matches(b"x?6*", b"x86_64.conf"));
        assert!(!matches(b"a", b"b"));
    }

    #[test]
    fn includes_are_followed_and_comments_dropped() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("conf.d")).unwrap();
        std::fs::write(d.path().join("ld.so.conf"), "include conf.d/*.conf\n/opt/a # a comment\n").unwrap();
        std::fs::write(d.path().join("conf.d/b.conf"), "# libc default\n/usr/local/lib\n").unwrap();
        std::fs::write(d.path().join("conf.d/a.conf"), "/opt/first\ninclude ../more\n").unwrap();
        std::fs::write(d.path().join("more"), "/opt/deep\n").unwrap();
        std::fs::write(d.path().join("conf.d/c.txt"), "/opt/not\n").unwrap();
        let mut out = Vec::new();
        read_conf(&d.path().join("ld.so.conf"), 0, &mut out);
        let want: Vec<(PathBuf, PathBuf)> = [
            ("/opt/first", "conf.d/a.conf"),
            ("/opt/deep", "conf.d/../more"),
            ("/usr/local/lib", "conf.d/b.conf"),
            ("/opt/a", "ld.so.conf"),
        ]
        .iter()
        .map(|(dir, conf)| (PathBuf::from(dir), d.path().join(conf)))
        .collect();
        assert_eq!(out, want);
    }

    /// The `remora.conf` an install writes names the prefix's `lib64`: once a user copied it
    /// into the loader's configuration, the prefix counts as searched (through `lib64`), and
    /// the file naming it is known (the uninstall points at it).
    #[test]
    fn a_prefix_named_by_its_lib64_is_searched() {
        let d = tempfile::tempdir().unwrap();
        let prefix = d.path().join("opt/DIS");
        std::fs::create_dir_all(d.path().join("conf.d")).unwrap();
        std::fs::write(d.path().join("ld.so.conf"), "include conf.d/*.conf\n").unwrap();
        let remora_conf = d.path().join("conf.d/remora.conf");
        std::fs::write(&remora_conf, format!("{}\n", prefix.join("lib64").display())).unwrap();
        let dirs = [prefix.join("lib"), prefix.join("lib64")];
        assert_eq!(listing_in(&d.path().join("ld.so.conf"), &dirs), [(dirs[1].clone(), Some(remora_conf))]);
        assert!(listing_in(&d.path().join("ld.so.conf"), &dirs[..1]).is_empty());
        // The trusted directories are searched whatever the configuration says.
        let usr_lib = [PathBuf::from("/usr/lib")];
        assert_eq!(listing_in(&d.path().join("none.conf"), &usr_lib), [(usr_lib[0].clone(), None)]);
    }
}
