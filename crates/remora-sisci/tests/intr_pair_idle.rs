//! The lower node's daemon reads what comes back on a plain interrupt flow its process
//! dialed (issue 19) without waking up while nothing comes: its reader blocks on the flow
//! and on a bell that the dialing connection's end rings (it looked at the books every
//! 100 ms before, ten wake-ups a second per flow). The connection's end still ends the
//! flow, and triggers keep coming through. Two loopback-TCP nodes of this host.

use remora_sisci::*;
use std::time::Duration;

const LONG: Option<Duration> = Some(Duration::from_secs(10));
const QUIET: Option<Duration> = Some(Duration::from_millis(100));

/// The voluntary context switches of every `remora-back-flow` thread of process `pid`.
fn back_flow_wakeups(pid: u32) -> Vec<u64> {
    let mut out = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return out };
    for t in tasks.flatten() {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        // The kernel keeps 15 bytes of a thread's name.
        if comm.trim() != "remora-back-flo" {
            continue;
        }
        let status = std::fs::read_to_string(t.path().join("status")).unwrap_or_default();
        if let Some(n) = status
            .lines()
            .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
            .and_then(|v| v.trim().parse().ok())
        {
            out.push(n);
        }
    }
    out
}

#[test]
fn an_idle_back_flow_reader_does_not_wake_up() {
    let h = remora_testkit::Harness::with_cluster_keys(&[4, 8], "force_tcp = true\nintr_pair = true\n");
    let lo = Descriptor::open(&Sisci::with_config(h.config(4))).unwrap();
    let hi = Descriptor::open(&Sisci::with_config(h.config(8))).unwrap();
    let hi_intr = Interrupt::create(&hi, 0, Some(81), true, None).unwrap();
    // The lower process's flow to the higher's interrupt: its daemon reads what comes back.
    let to_hi = RemoteInterrupt::connect(&lo, 8, 0, 81, LONG).unwrap();
    to_hi.trigger().unwrap();
    hi_intr.wait(LONG).unwrap();
    let pid = remora_testkit::daemon_pid(&h, 4);
    let before = back_flow_wakeups(pid);
    assert_eq!(before.len(), 1, "one reader of the one flow dialed");
    std::thread::sleep(Duration::from_secs(2));
    let after = back_flow_wakeups(pid);
    assert_eq!(after.len(), 1);
    // Two seconds idle: no wake-up (ten a second before), a few allowed for the unexpected.
    assert!(after[0] - before[0] <= 3, "{} wake-ups in 2 s idle", after[0] - before[0]);
    // Still a working flow, and the connection's end ends its reader.
    for _ in 0..10 {
        to_hi.trigger().unwrap();
        hi_intr.wait(LONG).unwrap();
    }
    assert_eq!(hi_intr.wait(QUIET).unwrap_err(), Error::Timeout);
    to_hi.disconnect().unwrap();
    drop(hi_intr);
    let t = std::time::Instant::now();
    while !back_flow_wakeups(pid).is_empty() {
        assert!(t.elapsed() < Duration::from_secs(30), "the reader outlived its connection");
        std::thread::sleep(Duration::from_millis(50));
    }
}
