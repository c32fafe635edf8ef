//! Calls on a map of another host's segment made once a cable cut is known (the connection
//! reported NOT_OPERATIONAL): a store through `Map::write` (`SCIMemCpy`'s PIO path) into
//! pages the map does not hold waits for the cable and lands once it is back — or answers
//! `SCI_ERR_TRANSFER_FAILED` when the connection is lost meanwhile —, never SIGBUS; and an
//! unmap does not wait for the cable. The storing program is a child process, so that a
//! SIGBUS fails the test instead of ending it. Needs a namespace cluster (root); skips
//! without one.

mod common;

use remora_sisci::*;
use std::io::{BufRead, BufReader};
use std::time::{Duration, Instant};

/// The child's spec (node, runtime directory, cluster file, home node, test name).
const CHILD: &str = "REMORA_TEST_OUTAGE_STORE_CHILD";
/// The segment the child maps (three pages).
const SEG: u32 = 44;

/// How long the cable stays out once the child's stores are on their way: longer than a
/// pager flow's patience (10 s), well within the link's budget (~30 s).
const HELD: Duration = Duration::from_secs(12);

#[test]
fn a_store_into_pages_not_resident_waits_out_a_cut_and_lands() {
    const NAME: &str = "a_store_into_pages_not_resident_waits_out_a_cut_and_lands";
    if let Ok(spec) = std::env::var(CHILD) {
        return store_child(&spec, true);
    }
    let Some(c) = common::net_cluster(2) else { return };
    let a = Descriptor::open(&common::net_sci(&c, 1)).unwrap();
    let (_seg, home) = common::available(&a, SEG, 3 * 4096);
    let mut kid = Child::start(&c, NAME);
    kid.upto("ready");
    c.link_down(1);
    kid.upto("silent");
    // The child's stores wait meanwhile.
    std::thread::sleep(HELD);
    c.link_up(1);
    let said = kid.end();
    assert!(said.contains("stored Ok(()) Ok(())") && said.contains("flushed"), "{said}");
    assert_eq!(common::word(&home, 72), 2, "the store into the page the pager dropped");
    assert_eq!(common::word(&home, 4096 + 8), 3, "the store into the page never touched");
}

#[test]
fn a_store_waiting_out_a_cut_answers_transfer_failed_when_the_connection_is_lost() {
    const NAME: &str = "a_store_waiting_out_a_cut_answers_transfer_failed_when_the_connection_is_lost";
    if let Ok(spec) = std::env::var(CHILD) {
        return store_child(&spec, false);
    }
    let Some(mut c) = common::net_cluster(2) else { return };
    let a = Descriptor::open(&common::net_sci(&c, 1)).unwrap();
    let (_seg, _home) = common::available(&a, SEG, 3 * 4096);
    let mut kid = Child::start(&c, NAME);
    kid.upto("ready");
    c.link_down(1);
    kid.upto("silent");
    // The store waits for its page; the home's daemon dies behind the cut cable, and the
    // connection is lost once the cable is back (its node refuses the link).
    std::thread::sleep(Duration::from_secs(2));
    c.kill_daemon(1);
    c.link_up(1);
    let said = kid.end();
    assert!(said.contains("stored Err(TransferFailed) Err(TransferFailed)"), "{said}");
}

/// The storing program: a child process of this test binary on host 2, its output read
/// line by line.
struct Child {
    kid: std::process::Child,
    out: BufReader<std::process::ChildStdout>,
    said: String,
}

impl Child {
    /// Run test `name` of this binary as the child, on host 2 of `c`.
    fn start(c: &remora_testkit::NetCluster, name: &str) -> Child {
        let spec = format!(
            "{}|{}|{}|{}",
            c.node(2),
            c.runtime_dir(2).display(),
            c.cluster_file().display(),
            c.node(1)
        );
        let mut kid = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", name, "--nocapture", "--test-threads=1"])
            .env(CHILD, spec)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let out = BufReader::new(kid.stdout.take().unwrap());
        Child { kid, out, said: String::new() }
    }

    /// Read the child's lines up to `what`.
    fn upto(&mut self, what: &str) {
        loop {
            let mut line = String::new();
            if self.out.read_line(&mut line).unwrap() == 0 {
                let _ = self.kid.kill();
                panic!("the child ended before it said {what:?}: {}", self.said);
            }
            self.said.push_str(&line);
            // (The first follows the harness's "test ... " on its line.)
            if line.trim_end().ends_with(what) {
                return;
            }
        }
    }

    /// Wait for the child's end (at most 60 s): it must have lived (no SIGBUS) and passed.
    /// Returns everything it said.
    fn end(mut self) -> String {
        use std::os::unix::process::ExitStatusExt;
        let t = Instant::now();
        let status = loop {
            if let Some(s) = self.kid.try_wait().unwrap() {
                break s;
            }
            if t.elapsed() > Duration::from_secs(60) {
                let _ = self.kid.kill();
                panic!("the child's stores never returned: {}", self.said);
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut self.out, &mut rest).unwrap();
        self.said.push_str(&rest);
        assert_ne!(status.signal(), Some(7), "a store during the cut raised SIGBUS: {}", self.said);
        assert!(status.success(), "the child failed ({status:?}): {}", self.said);
        self.said
    }
}

/// The child: map the home's segment, store into page 0, let the pager drop it; once the
/// connection reports NOT_OPERATIONAL, store into page 0 again and into page 1 (never
/// touched), and say how the stores ended. With `back`, the cable comes back: the stores
/// then go home (flushed).
fn store_child(spec: &str, back: bool) {
    use std::io::Write;
    let say = |what: &str| {
        println!("{what}");
        std::io::stdout().flush().unwrap();
    };
    let parts: Vec<&str> = spec.split('|').collect();
    let cfg = remora_client::Config {
        node: parts[0].parse().unwrap(),
        runtime_dir: parts[1].into(),
        daemon: None,
        spawn: false,
        idle_exit: Duration::from_secs(60),
        cluster: Some(parts[2].into()),
    };
    let b = Descriptor::open(&Sisci::with_config(cfg)).unwrap();
    let (remote, map) = common::mapped(&b, parts[3].parse().unwrap(), SEG, 3 * 4096);
    map.write(64, &1u64.to_le_bytes()).unwrap();
    assert!(map.flush());
    // The pager's refresh (every millisecond) drops the page once it is quiet.
    std::thread::sleep(Duration::from_millis(100));
    say("ready");
    common::expect_event(&remote, SegmentReason::NotOperational, Duration::from_secs(20));
    say("silent");
    let dropped = map.write(72, &2u64.to_le_bytes());
    let untouched = map.write(4096 + 8, &3u64.to_le_bytes());
    say(&format!("stored {dropped:?} {untouched:?}"));
    if !back {
        return;
    }
    common::expect_event(&remote, SegmentReason::Operational, Duration::from_secs(30));
    // Home (a flush may answer false once, for stores a failed flow carried).
    let t = Instant::now();
    while !map.flush() {
        assert!(t.elapsed() < Duration::from_secs(20), "the stores never went home");
        std::thread::sleep(Duration::from_millis(50));
    }
    say("flushed");
}

/// An unmap while the route is silent does not wait for the cable: stores of the map not
/// answered yet are sent without waiting for the answer (the map is leaving), and the
/// connection rides the cut out. A watchdog brings the cable back after [`WATCHDOG`], so
/// an unmap that waits for it returns then (and fails the bound) instead of hanging.
#[test]
fn an_unmap_during_a_cut_does_not_wait_for_the_link() {
    let Some(c) = common::net_cluster(2) else { return };
    let a = Descriptor::open(&common::net_sci(&c, 1)).unwrap();
    let b = Descriptor::open(&common::net_sci(&c, 2)).unwrap();
    let (_seg, home) = common::available(&a, 45, 8192);
    let (remote, map) = common::mapped(&b, c.node(1), 45, 8192);
    // A store the pager sends without waiting for the home's answer (no flush asks for it).
    map.write(64, &5u64.to_le_bytes()).unwrap();
    let t = Instant::now();
    while common::word(&home, 64) != 5 {
        assert!(t.elapsed() < Duration::from_secs(5), "the store never reached the home");
        std::thread::sleep(Duration::from_millis(10));
    }
    c.link_down(1);
    common::expect_event(&remote, SegmentReason::NotOperational, Duration::from_secs(20));
    let (back, watchdog) = std::sync::mpsc::channel::<()>();
    let took = std::thread::scope(|s| {
        let c = &c;
        s.spawn(move || {
            let _ = watchdog.recv_timeout(WATCHDOG);
            c.link_up(1);
        });
        let t = Instant::now();
        map.unmap().unwrap();
        let took = t.elapsed();
        let _ = back.send(());
        took
    });
    assert!(took < Duration::from_secs(5), "an unmap during a cut took {took:?}");
    common::expect_event(&remote, SegmentReason::Operational, Duration::from_secs(30));
    // The connection is whole: a new map of it stores and loads.
    let again = remote.map(0, 8192, None, MapFlags::default()).unwrap();
    again.write(4096, &6u64.to_le_bytes()).unwrap();
    let t = Instant::now();
    while !again.flush() {
        assert!(t.elapsed() < Duration::from_secs(20), "a new map's store never went home");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(common::word(&home, 4096), 6);
    assert_eq!(common::word(&again, 64), 5);
}

/// Nor does it wait while the pager of its home waits for the cable on behalf of another
/// map of that home (a store into a page not resident, which lands once the cable is
/// back).
#[test]
fn an_unmap_during_a_cut_does_not_wait_behind_another_maps_page() {
    let Some(c) = common::net_cluster(2) else { return };
    let a = Descriptor::open(&common::net_sci(&c, 1)).unwrap();
    let b = Descriptor::open(&common::net_sci(&c, 2)).unwrap();
    let (_seg, home) = common::available(&a, 46, 8192);
    let (remote, map) = common::mapped(&b, c.node(1), 46, 8192);
    let other = remote.map(0, 4096, None, MapFlags::default()).unwrap();
    assert_eq!(common::word(&other, 0), 0);
    c.link_down(1);
    common::expect_event(&remote, SegmentReason::NotOperational, Duration::from_secs(20));
    let (back, watchdog) = std::sync::mpsc::channel::<()>();
    let (took, stored) = std::thread::scope(|s| {
        let c = &c;
        s.spawn(move || {
            let _ = watchdog.recv_timeout(WATCHDOG);
            c.link_up(1);
        });
        let storing = s.spawn(|| map.write(4096 + 16, &7u64.to_le_bytes()));
        // The store waits for its page meanwhile (the pager, for the cable).
        std::thread::sleep(Duration::from_millis(500));
        let t = Instant::now();
        other.unmap().unwrap();
        let took = t.elapsed();
        let _ = back.send(());
        (took, storing.join().unwrap())
    });
    assert!(took < Duration::from_secs(5), "an unmap behind another map's page took {took:?}");
    assert_eq!(stored, Ok(()));
    let t = Instant::now();
    while !map.flush() {
        assert!(t.elapsed() < Duration::from_secs(20), "the store never went home");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(common::word(&home, 4096 + 16), 7);
}

/// How long the cable of the unmap tests stays out at most: longer than a pager flow's
/// patience (10 s), within the link's budget (~30 s).
const WATCHDOG: Duration = Duration::from_secs(20);
