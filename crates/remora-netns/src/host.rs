//! The system calls of building a cluster: iproute2, namespaces, sockets, names.

use crate::{KEEP_MARK, TEMP_PREFIX};
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Whether `/proc/net/unix` text lists a listening socket bound to `path`.
pub(crate) fn listening(table: &str, path: &str) -> bool {
    // Num RefCount Protocol Flags Type St Inode Path; Flags 00010000 = __SO_ACCEPTCON.
    table.lines().skip(1).any(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        f.len() >= 8 && f[3] == "00010000" && f[7..].join(" ") == path
    })
}

pub(crate) fn run_ip(ip: &Path, args: &[&str]) -> Result<(), String> {
    match Command::new(ip).args(args).stdin(Stdio::null()).stdout(Stdio::null()).output() {
        Ok(out) if out.status.success() => Ok(()),
        Ok(out) => Err(format!("ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim())),
        Err(e) => Err(format!("{}: {e}", ip.display())),
    }
}

/// Kill whatever still runs in `ns`, then delete it.
pub(crate) fn delete_namespace(ip: &Path, ns: &str) {
    if let Ok(out) = Command::new(ip).args(["netns", "pids", ns]).stderr(Stdio::null()).output() {
        let pids: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .filter(|p| p.parse::<u32>().is_ok_and(|p| p != std::process::id()))
            .map(str::to_string)
            .collect();
        if !pids.is_empty() {
            let _ = Command::new("kill")
                .arg("-KILL")
                .args(&pids)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
    for _ in 0..3 {
        if run_ip(ip, &["netns", "delete", ns]).is_ok() || !namespace_exists(ns) {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Remove the shared-memory regions libfabric's shm provider made for a host at `addr`
/// (`/dev/shm/<addr>:<n>:<n>`; `addr` may also be a daemon's pid, for a region the provider
/// named `<pid>:<uid>:<n>`): a daemon killed without closing its fabric leaves them,
/// 16 MiB each, for the life of the machine. A region some process still maps is left: a
/// cluster of another test process may have the same addresses, and its daemons live.
pub(crate) fn remove_shm_regions(addr: &str) {
    let prefix = format!("{addr}:");
    let Ok(entries) = fs::read_dir("/dev/shm") else { return };
    let found: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
        .collect();
    if found.is_empty() {
        return;
    }
    let mapped = mapped_files();
    for path in found {
        if !mapped.iter().any(|m| Path::new(m) == path) {
            let _ = fs::remove_file(path);
        }
    }
}

/// The files any process of the machine maps (the paths in every `/proc/<pid>/maps`).
fn mapped_files() -> Vec<String> {
    let mut out = Vec::new();
    let Ok(procs) = fs::read_dir("/proc") else { return out };
    for p in procs.flatten() {
        if !p.file_name().to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(maps) = fs::read_to_string(p.path().join("maps")) else { continue };
        for line in maps.lines() {
            // address perms offset dev inode path
            if let Some(path) = line.split_whitespace().nth(5).filter(|p| p.starts_with("/dev/shm/")) {
                out.push(path.to_string());
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

pub(crate) fn namespace_exists(ns: &str) -> bool {
    Path::new("/run/netns").join(ns).exists()
}

/// Whether `pid` names a test process that is gone (or this process, before it has built
/// any cluster: then the name is an older process's with a recycled pid).
pub(crate) fn stale_owner(pid: u32) -> bool {
    pid == std::process::id() || !Path::new(&format!("/proc/{pid}")).exists()
}

/// Delete namespaces (killing what runs in them) and temporary directories named like ours
/// whose process is gone: leftovers of test processes that died without unwinding.
pub(crate) fn remove_leftovers(ip: &Path) {
    if let Ok(out) = Command::new(ip).args(["netns", "list"]).stderr(Stdio::null()).output() {
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let Some(name) = line.split_whitespace().next() else { continue };
            if owner_pid(name).is_some_and(stale_owner) {
                delete_namespace(ip, name);
            }
        }
    }
    let Ok(entries) = fs::read_dir(std::env::temp_dir()) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some((pid, _)) = name.strip_prefix(TEMP_PREFIX).and_then(|r| r.split_once('-')) else { continue };
        let Ok(pid) = pid.parse::<u32>() else { continue };
        let path = entry.path();
        if stale_owner(pid) && path.is_dir() && !path.join(KEEP_MARK).exists() {
            let _ = fs::remove_dir_all(&path);
        }
    }
}

/// The pid in a name of the form `rmr<pid>x<instance>sw` or `rmr<pid>x<instance>h<k>`.
pub(crate) fn owner_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix("rmr")?;
    let (pid, rest) = rest.split_once('x')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let tail_ok = match rest.find(|c: char| !c.is_ascii_digit()) {
        Some(i) if i > 0 => {
            let tail = &rest[i..];
            tail == "sw" || tail.strip_prefix('h').is_some_and(digits)
        }
        _ => false,
    };
    (digits(pid) && tail_ok).then(|| pid.parse().ok()).flatten()
}

pub(crate) fn effective_uid() -> Option<u32> {
    let status = fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    line.split_whitespace().nth(2)?.parse().ok()
}

pub(crate) fn find_ip() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join("ip"))
        .chain(["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"].map(PathBuf::from))
        .find(|p| p.is_file())
}

pub(crate) fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    let ok = fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut buf)).is_ok();
    if !ok {
        // Not a security boundary (test-only cluster): fall back to time and pid.
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
            ^ u128::from(std::process::id()) << 64;
        for (i, b) in buf.iter_mut().enumerate() {
            *b = (seed >> ((i % 16) * 8)) as u8;
        }
    }
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

pub(crate) fn read_lossy(path: &Path) -> String {
    fs::read(path).map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default()
}
