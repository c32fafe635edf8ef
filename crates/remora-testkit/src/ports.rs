//! Ports for the cluster files of tests: free now, and kept from every other caller until
//! this process ends.
//!
//! A port the kernel picks for a listener bound to port 0 comes from the ephemeral range
//! (`ip_local_port_range`), which every outgoing connection draws from too: between the
//! test's look and its daemon's bind, a connection of some daemon of another test (tests run
//! in parallel, each with daemons dialing each other) could take the port, and the daemon
//! failed to start with "Address already in use" (seen under load). The ports given here
//! lie below that range, where no connection's own port is ever drawn, and each one is
//! claimed with a lock file held by this process, so that two test processes never give out
//! the same port.

use std::fs::File;
use std::sync::Mutex;

/// The claims of this process: the ports given out, each with its lock file (held open, so
/// locked, until the process ends).
static CLAIMED: Mutex<Vec<(u16, File)>> = Mutex::new(Vec::new());

/// The first port of the kernel's ephemeral range (`32768` when it cannot be read).
fn ephemeral_start() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|w| w.parse().ok()))
        .unwrap_or(32768)
}

/// A random number (the start of the search, so that parallel test processes spread).
fn random() -> u32 {
    let mut b = [0u8; 4];
    let _ = rustix::rand::getrandom(&mut b, rustix::rand::GetRandomFlags::empty());
    u32::from_le_bytes(b)
}

/// Claim `port` for this process with its lock file; `None` when another process holds it.
fn claim(port: u16) -> Option<File> {
    // One directory per user: another user's (made with its umask) may not be ours to
    // write in. Users' test processes then do not see each other's claims, a rare clash.
    let uid = rustix::process::geteuid().as_raw();
    let dir = std::env::temp_dir().join(format!("remora-test-ports-{uid}"));
    std::fs::create_dir_all(&dir).ok()?;
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(port.to_string()))
        .ok()?;
    rustix::fs::flock(&f, rustix::fs::FlockOperation::NonBlockingLockExclusive).ok()?;
    Some(f)
}

/// A TCP port on the loopback interface that nothing listens on now, below the ephemeral
/// range, given to no other caller (of this process or another) while this process lives.
///
/// # Panics
/// When no port of the range below the ephemeral one can be had, or (when that range is
/// too small to search) when the kernel gives no port at all.
pub fn free_port() -> u16 {
    let top = ephemeral_start();
    let bottom = 10_000u16;
    if top <= bottom + 1024 {
        // An ephemeral range that leaves no room below it: the kernel's choice.
        return std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    }
    let span = u32::from(top - bottom);
    let start = random() % span;
    let mut claimed = CLAIMED.lock().unwrap_or_else(|p| p.into_inner());
    for i in 0..span {
        let port = bottom + ((start + i) % span) as u16;
        if claimed.iter().any(|(p, _)| *p == port) {
            continue;
        }
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_err() {
            continue;
        }
        let Some(lock) = claim(port) else { continue };
        claimed.push((port, lock));
        return port;
    }
    panic!("no free port between {bottom} and {top}");
}
