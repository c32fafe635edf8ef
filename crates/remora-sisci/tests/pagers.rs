//! The DSM's pager threads (one per home node of the process's maps of other hosts'
//! segments): a pager whose maps hold no page sleeps, however many homes are mapped, and
//! its maps still show the home's changes at their next access. Alone in its binary: it
//! counts the wake-ups of every pager thread of the process.

mod common;
use common::Sci as _;

use remora_sisci::*;
use std::time::{Duration, Instant};

/// The context switches of each DSM pager thread of this process so far.
fn pager_switches() -> Vec<(String, u64)> {
    let mut out = vec![];
    for t in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if comm.trim() != "remora-pager" {
            continue;
        }
        let status = std::fs::read_to_string(t.path().join("status")).unwrap_or_default();
        let n: u64 = status
            .lines()
            .filter(|l| l.contains("ctxt_switches:"))
            .filter_map(|l| l.split_whitespace().last()?.parse::<u64>().ok())
            .sum();
        out.push((t.file_name().to_string_lossy().into_owned(), n));
    }
    out.sort();
    out
}

#[test]
fn idle_pagers_sleep_and_their_maps_show_the_homes_changes_after() {
    let h = common::Harness::with_cluster(&[4, 8, 12], true);
    let b = Descriptor::open(&h.sci(8)).unwrap();
    let mut homes = vec![];
    let mut maps = vec![];
    for (node, id) in [(4u32, 31u32), (12, 41)] {
        let d = Descriptor::open(&h.sci(node)).unwrap();
        let seg = LocalSegment::create(&d, Some(id), 65536, CreateFlags::default()).unwrap();
        seg.prepare(0).unwrap();
        seg.set_available(0).unwrap();
        let home = seg.map(0, 65536, None, MapFlags::default()).unwrap();
        home.write(0, b"first").unwrap();
        let r = RemoteSegment::connect(&b, node, id, 0, Some(Duration::from_secs(10))).unwrap();
        let m = r.map(0, 65536, None, MapFlags::default()).unwrap();
        let mut buf = [0u8; 5];
        m.read(0, &mut buf).unwrap();
        assert_eq!(&buf, b"first");
        m.write(100, b"stored").unwrap();
        assert!(m.flush());
        homes.push((d, seg, home, r));
        maps.push(m);
    }
    // The next refresh (1 ms) drops every page; then nothing is left to look at.
    std::thread::sleep(Duration::from_millis(50));
    let before = pager_switches();
    std::thread::sleep(Duration::from_millis(300));
    let after = pager_switches();
    assert!(before.len() >= 2, "a pager per home node: {before:?}");
    for ((tid, a), (_, z)) in before.iter().zip(&after) {
        assert!(z - a <= 3, "pager {tid} woke {} times in 300 ms with no page of its maps", z - a);
    }
    // The homes change: the maps' next loads fetch the pages again and see it, within the
    // refresh bound once they hold pages again.
    for ((_, _, home, _), m) in homes.iter().zip(&maps) {
        let mut buf = [0u8; 6];
        home.read(100, &mut buf).unwrap();
        assert_eq!(&buf, b"stored");
        home.write(0, b"again").unwrap();
        let mut got = [0u8; 5];
        m.read(0, &mut got).unwrap();
        assert_eq!(&got, b"again");
        home.write(0, b"third").unwrap();
        let t = Instant::now();
        loop {
            m.read(0, &mut got).unwrap();
            if &got == b"third" {
                break;
            }
            assert!(t.elapsed() < Duration::from_secs(2), "a polled word never showed the home's change");
            std::thread::yield_now();
        }
    }
}
