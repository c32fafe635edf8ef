//! Settle points and a stopped or lost home: stores a later page fetch showed home are not
//! waited for; a home lost for good leaves no store pending, and its maps' pager sleeps.
//! One test, alone in its binary: it counts the wake-ups of every pager thread of the
//! process, and settle points are the process's.

mod common;
use common::{daemon_pid, Sci as _};

use remora_sisci::*;
use std::time::Duration;

/// Context switches of every DSM pager thread of this process so far.
fn pager_switches() -> u64 {
    let mut n = 0;
    for t in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if comm.trim() != "remora-pager" {
            continue;
        }
        let status = std::fs::read_to_string(t.path().join("status")).unwrap_or_default();
        n += status
            .lines()
            .filter(|l| l.contains("ctxt_switches:"))
            .filter_map(|l| l.split_whitespace().last()?.parse::<u64>().ok())
            .sum::<u64>();
    }
    n
}

#[test]
fn settle_points_and_a_stopped_or_lost_home() {
    stores_a_fetch_showed_home_are_not_waited_for();
    a_lost_homes_pager_sleeps_and_leaves_nothing_pending();
}

fn stores_a_fetch_showed_home_are_not_waited_for() {
    let h = common::Harness::with_cluster(&[4, 8], true);
    let a = Descriptor::open(&h.sci(4)).unwrap();
    let b = Descriptor::open(&h.sci(8)).unwrap();
    let (_seg, home) = common::available(&a, 31, 4096);
    let (_r, data) = common::mapped(&b, 4, 31, 4096);
    // A store the pager sends without waiting for its answer, seen at the home...
    data.write(8, &7u64.to_le_bytes()).unwrap();
    let mut w = [0u8; 8];
    let t = std::time::Instant::now();
    while u64::from_le_bytes(w) != 7 {
        assert!(t.elapsed() < Duration::from_secs(5), "the store never reached the home");
        home.read(8, &mut w).unwrap();
    }
    // ...and page fetches after it on the same flow (the refresh drops the page).
    for _ in 0..3 {
        std::thread::sleep(Duration::from_millis(20));
        data.read(8, &mut w).unwrap();
        assert_eq!(u64::from_le_bytes(w), 7);
    }
    std::thread::sleep(Duration::from_millis(20));
    let stopped = common::Stopped::new(daemon_pid(&h, 4));
    let t = std::time::Instant::now();
    assert!(remora_client::dsm::settle());
    let took = t.elapsed();
    drop(stopped);
    assert!(took < Duration::from_secs(1), "a settle point waited {took:?} for stores a fetch showed home");
}

fn a_lost_homes_pager_sleeps_and_leaves_nothing_pending() {
    let h = common::Harness::with_cluster(&[4, 8], true);
    let a = Descriptor::open(&h.sci(4)).unwrap();
    let b = Descriptor::open(&h.sci(8)).unwrap();
    let (_seg, _home) = common::available(&a, 31, 4096);
    let (_r, data) = common::mapped(&b, 4, 31, 4096);
    // A store the pager's tick sends without waiting for the answer; then the home dies
    // with the page still resident here.
    data.write(8, &1u64.to_le_bytes()).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    remora_sys::send_signal(daemon_pid(&h, 4), remora_sys::ProcessSignal::Kill).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    assert!(!data.flush(), "a flush to a killed home succeeded");
    assert!(data.is_lost());
    std::thread::sleep(Duration::from_millis(50));
    // Settle points do not ask the lost home's pager (nothing of it is pending)...
    let before = pager_switches();
    for _ in 0..200 {
        assert!(remora_client::dsm::settle(), "a settle point still waits for the lost home");
    }
    // ...and the pager, whose map holds a page it can neither send nor refresh, sleeps.
    std::thread::sleep(Duration::from_millis(300));
    let woke = pager_switches() - before;
    assert!(woke <= 5, "the lost home's pager woke {woke} times in 300 ms and 200 settle points");
}
