//! SCIF connections between two hosts without a direct flow (`REMORA_SCIF_DIRECT=0`):
//! both daemons' relays carry the messages. Either daemon turns it off: when only the
//! connector's does, it asks for no flow, so the acceptor's daemon does not wait for one.
//! This binary's daemons inherit its environment, so it sets the variable before any
//! starts.

use std::time::{Duration, Instant};

mod common;
use common::{
    every_call_for, exchange, last_words, over_tcp, pair, pair_with_windows, reset_for_good, wait_for_link,
    Seen,
};

fn no_direct_flows() {
    // Every test of this binary sets the same value before it starts a daemon.
    std::env::set_var("REMORA_SCIF_DIRECT", "0");
}

#[test]
fn with_direct_flows_off_the_relays_carry_the_messages() {
    no_direct_flows();
    let h = over_tcp(&[4, 8]);
    wait_for_link(&h);
    let (c, s) = pair(&h, 4, 8);
    assert!(!c.is_direct() && !s.is_direct(), "REMORA_SCIF_DIRECT=0: the relays");
    exchange(&c, &s, 50, 1_000_000);
    last_words(&c, &s);
}

/// The listener's daemon would offer a flow; the connector's (direct flows off) asks for
/// none, so the accept does not wait the acceptor's patience for a flow (3 s) that would
/// never be dialed, and both ends go on with their relays.
#[test]
fn a_connector_without_direct_flows_asks_for_none() {
    no_direct_flows();
    let h = over_tcp(&[4, 8]);
    let cfg = h.config(8);
    let mut cmd = std::process::Command::new(remora_testkit::daemon_path());
    if let Some(c) = &cfg.cluster {
        cmd.arg("--cluster").arg(c);
    }
    let st = cmd
        .args(["--node", "8", "--idle-exit", "60", "--detach", "--runtime-dir"])
        .arg(&cfg.runtime_dir)
        .env("REMORA_SCIF_DIRECT", "1")
        .status()
        .unwrap();
    assert!(st.success());
    let t0 = Instant::now();
    while !remora_proto::paths::socket_path(&cfg.runtime_dir, 8).exists() {
        assert!(t0.elapsed() < Duration::from_secs(10), "node 8 came up");
        std::thread::sleep(Duration::from_millis(10));
    }
    wait_for_link(&h);
    let t0 = Instant::now();
    let (c, s) = pair(&h, 4, 8);
    // Not a speed check: an accept that waited for a flow takes at least the 3 s patience.
    assert!(t0.elapsed() < Duration::from_secs(3), "the accept waited for a flow: {:?}", t0.elapsed());
    assert!(!c.is_direct() && !s.is_direct(), "no flow asked for: the relays");
    exchange(&c, &s, 50, 1_000_000);
    last_words(&c, &s);
}

/// The pid of node `node`'s daemon of harness `h` (its command line names the node and
/// the harness's runtime directory).
fn daemon_pid(h: &remora_testkit::Harness, node: u32) -> u32 {
    let dir = h.config(node).runtime_dir.into_os_string().into_string().unwrap();
    let node = node.to_string();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else { continue };
        let args: Vec<&[u8]> = cmd.split(|b| *b == 0).collect();
        let after = |flag: &str| args.windows(2).find(|w| w[0] == flag.as_bytes()).map(|w| w[1]);
        if after("--node") == Some(node.as_bytes()) && after("--runtime-dir") == Some(dir.as_bytes()) {
            return pid;
        }
    }
    panic!("no daemon of node {node} in {dir}");
}

/// A process's resident memory, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// The relays carry messages on credit: a sender whose peer on the other host does not
/// read fills the ring, then the relays' window, then blocks (a non-blocking send queues
/// nothing) — the receiving daemon does not queue without bound. When the receiver reads,
/// everything comes, intact and in order, and the sender goes on.
#[test]
fn a_sender_to_a_peer_that_does_not_read_blocks_and_the_daemons_stay_bounded() {
    no_direct_flows();
    let h = over_tcp(&[4, 8]);
    wait_for_link(&h);
    let (c, s) = pair(&h, 4, 8);
    assert!(!c.is_direct() && !s.is_direct(), "REMORA_SCIF_DIRECT=0: the relays");
    let far_daemon = daemon_pid(&h, 8);
    let before = rss_kib(far_daemon);
    // Offer 32 MiB without blocking; stop once a second passed with nothing taken.
    let offered = 32 << 20;
    let byte = |i: usize| (i % 251) as u8;
    let chunk: Vec<u8> = (0..251 * 256).map(byte).collect();
    let (mut sent, mut last) = (0usize, Instant::now());
    while sent < offered && last.elapsed() < Duration::from_secs(1) {
        let at = sent % 251;
        let n = c.send(&chunk[at..at + (251 * 255).min(offered - sent)], false).unwrap();
        if n == 0 {
            std::thread::sleep(Duration::from_millis(1));
        } else {
            (sent, last) = (sent + n, Instant::now());
        }
    }
    let grown = rss_kib(far_daemon).saturating_sub(before);
    let window = remora_proto::SCIF_RELAY_WINDOW;
    assert!(sent < 2 * window + (1 << 20), "the sender was held back: {sent} of {offered} bytes taken");
    assert!(grown < 16 << 10, "the receiving daemon grew by {grown} KiB");
    // The receiver reads: everything the sender queued comes, intact and in order, and
    // the sender goes on (blocking) with as much again.
    let more = sent + (3 << 20);
    let t = std::thread::spawn(move || {
        let mut got = vec![0u8; sent + more];
        assert_eq!(s.recv(&mut got, true).unwrap(), got.len());
        let bad = (0..sent).find(|&i| got[i] != byte(i));
        assert_eq!(bad, None, "bytes intact and in order");
        let bad = (0..more).find(|&i| got[sent + i] != byte(i));
        assert_eq!(bad, None, "bytes after the wait intact and in order");
        let mut b = [0u8; 1];
        assert_eq!(s.recv(&mut b, false).unwrap(), 0, "nothing more");
        s
    });
    let tail: Vec<u8> = (0..more).map(byte).collect();
    assert_eq!(c.send(&tail, true).unwrap(), more);
    let s = t.join().unwrap();
    last_words(&c, &s);
}

/// Sends signal `sig` (`STOP`, `CONT`) to process `pid` (a daemon of this test's harness).
fn signal(pid: u32, sig: &str) {
    let st = std::process::Command::new("kill").arg(format!("-{sig}")).arg(pid.to_string()).status().unwrap();
    assert!(st.success(), "kill -{sig} {pid}");
}

/// Lets a stopped daemon go on, whatever the test's end.
struct Resume(u32);

impl Drop for Resume {
    fn drop(&mut self) {
        signal(self.0, "CONT");
    }
}

/// While the far daemon is stopped (a pause as of a pulled cable, which is not a loss), the
/// sender's own daemon takes no more than the relays' window from its ring: the sender is
/// held back and that daemon does not grow; once the far daemon goes on, everything comes,
/// intact and in order.
#[test]
fn while_the_far_daemon_is_stopped_the_senders_daemon_holds_the_sender_back() {
    no_direct_flows();
    let h = over_tcp(&[4, 8]);
    wait_for_link(&h);
    let (c, s) = pair(&h, 4, 8);
    assert!(!c.is_direct() && !s.is_direct(), "REMORA_SCIF_DIRECT=0: the relays");
    let (own, far) = (daemon_pid(&h, 4), daemon_pid(&h, 8));
    let before = rss_kib(own);
    let byte = |i: usize| (i % 251) as u8;
    let chunk: Vec<u8> = (0..251 * 256).map(byte).collect();
    let offered = 32 << 20;
    let mut sent = 0usize;
    {
        signal(far, "STOP");
        let _resume = Resume(far);
        // Offer 32 MiB without blocking for 700 ms (the link is silent that long: no loss).
        let t0 = Instant::now();
        while sent < offered && t0.elapsed() < Duration::from_millis(700) {
            let at = sent % 251;
            match c.send(&chunk[at..at + (251 * 255).min(offered - sent)], false).unwrap() {
                0 => std::thread::sleep(Duration::from_millis(1)),
                n => sent += n,
            }
        }
        let grown = rss_kib(own).saturating_sub(before);
        let window = remora_proto::SCIF_RELAY_WINDOW;
        assert!(sent < 2 * window + (1 << 20), "the sender was held back: {sent} of {offered} bytes taken");
        assert!(grown < 16 << 10, "the sending daemon grew by {grown} KiB");
    }
    let mut got = vec![0u8; sent];
    assert_eq!(s.recv(&mut got, true).unwrap(), sent);
    let bad = (0..sent).find(|&i| got[i] != byte(i));
    assert_eq!(bad, None, "bytes intact and in order");
    last_words(&c, &s);
}

/// The peer's daemon dies (SIGKILL) while our endpoint's ring is full of the peer's bytes
/// and our daemon's relay holds more: from the first ECONNRESET on, every call answers it
/// (the relay tells of the close only once it has put all it holds into the ring, which the
/// program does not empty: sends and fences went through meanwhile, after RMAs and
/// registrations answered ECONNRESET).
#[test]
fn a_connection_whose_peers_daemon_died_with_bytes_held_answers_econnreset_for_good() {
    no_direct_flows();
    let h = over_tcp(&[4, 8]);
    wait_for_link(&h);
    let (c, s, local, remote) = pair_with_windows(&h, 8, 4);
    // The peer sends until its ring, the relays' window and our ring are full.
    let chunk = vec![5u8; 1 << 16];
    let t = Instant::now();
    while t.elapsed() < Duration::from_millis(500) {
        s.send(&chunk, false).unwrap();
    }
    signal(daemon_pid(&h, 4), "KILL");
    let t0 = Instant::now();
    let mut seen = Seen::new();
    every_call_for(&c, local, remote, t0, 3, &mut seen);
    reset_for_good(&seen);
}
