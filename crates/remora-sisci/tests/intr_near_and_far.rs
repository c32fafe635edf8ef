//! An interrupt connected from another node of this host (the `local` transport: that
//! process holds the page and triggers it itself) and from a node joined over TCP (its
//! triggers come through the owner's daemon). Only the latter puts the owner's blocked
//! waits on the bell: with the near node alone the owner sleeps in `futex` (it slept in
//! `ppoll` before, making a one-core ping-pong 1.6 times raw futexes'). Whichever is
//! connected, and while the counts change under a sleeping waiter, every trigger of
//! either wakes the owner, two waiting threads at once, and a removal too.

mod common;

use common::Sci;
use remora_sisci::*;
use std::time::Duration;

const LONG: Option<Duration> = Some(Duration::from_secs(10));
const QUIET: Option<Duration> = Some(Duration::from_millis(100));

/// The system call number of `futex` (what `/proc/<tid>/syscall` shows a thread asleep in).
#[cfg(target_arch = "x86_64")]
const SYS_FUTEX: Option<u64> = Some(202);
#[cfg(target_arch = "aarch64")]
const SYS_FUTEX: Option<u64> = Some(98);
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const SYS_FUTEX: Option<u64> = None;

/// A thread blocked in `intr`'s wait, with its `/proc` directory.
fn blocked(intr: &Interrupt) -> (std::thread::JoinHandle<Result<()>>, std::path::PathBuf) {
    let w = intr.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    let t = std::thread::spawn(move || {
        let me = std::fs::read_link("/proc/thread-self").unwrap_or_default();
        tx.send(std::path::Path::new("/proc").join(me)).unwrap();
        w.wait_with_spin(LONG, Duration::ZERO)
    });
    (t, rx.recv().unwrap())
}

/// The system call the thread sleeps in once it sleeps (`None`: not known here, or it
/// did not fall asleep within seconds).
fn asleep_in(task: &std::path::Path) -> Option<u64> {
    for _ in 0..500 {
        let text = std::fs::read_to_string(task.join("syscall")).ok()?;
        // "running", "-1 …" (blocked outside a call), or the call's number and arguments.
        if let Some(nr) = text.split_whitespace().next().and_then(|n| n.parse::<u64>().ok()) {
            return Some(nr);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    None
}

#[test]
fn only_a_node_joined_over_tcp_puts_the_owner_on_the_bell() {
    // Nodes 4 and 8 over TCP; node 12, not in the cluster file, reaches 4 over `local`.
    let h = remora_testkit::Harness::with_cluster(&[4, 8], true);
    let owner = Descriptor::open(&h.sci(4)).unwrap();
    let near_d =
        Descriptor::open(&Sisci::with_config(remora_testkit::child_config(12, h.runtime_dir(), None, true)))
            .unwrap();
    let far_d = Descriptor::open(&h.sci(8)).unwrap();
    let intr = Interrupt::create(&owner, 0, Some(61), true, None).unwrap();
    let near = RemoteInterrupt::connect(&near_d, 4, 0, 61, LONG).unwrap();

    // The near node alone: the owner sleeps on the futex, and its trigger wakes it.
    let (w, task) = blocked(&intr);
    let slept = asleep_in(&task);
    near.trigger().unwrap();
    w.join().unwrap().unwrap();
    if let (Some(want), Some(got)) = (SYS_FUTEX, slept) {
        assert_eq!(got, want, "the owner slept in system call {got}, not futex");
    }

    // A waiter asleep on the futex when the far node connects still wakes for either.
    let (w, _) = blocked(&intr);
    std::thread::sleep(Duration::from_millis(5));
    let far = RemoteInterrupt::connect(&far_d, 4, 0, 61, LONG).unwrap();
    far.trigger().unwrap();
    w.join().unwrap().unwrap();
    let (w, task) = blocked(&intr);
    let slept = asleep_in(&task);
    near.trigger().unwrap();
    w.join().unwrap().unwrap();
    if let (Some(want), Some(got)) = (SYS_FUTEX, slept) {
        assert_ne!(got, want, "with a node joined over TCP the owner sleeps on the bell");
    }
    // Both connected: each trigger, from either, is one wake.
    for round in 0..20 {
        let (w, _) = blocked(&intr);
        std::thread::sleep(Duration::from_millis(2));
        if round % 2 == 0 { far.trigger() } else { near.trigger() }.unwrap();
        w.join().unwrap().unwrap();
    }
    // Two waiters at once (one on the bell, one on the futex): two triggers wake both.
    let waiters = [blocked(&intr).0, blocked(&intr).0];
    std::thread::sleep(Duration::from_millis(5));
    near.trigger().unwrap();
    far.trigger().unwrap();
    for w in waiters {
        w.join().unwrap().unwrap();
    }
    assert_eq!(intr.wait(QUIET).unwrap_err(), Error::Timeout, "one wake too many");

    // A waiter on the bell when the far node leaves still wakes for the near one.
    let (w, _) = blocked(&intr);
    std::thread::sleep(Duration::from_millis(5));
    far.disconnect().unwrap();
    near.trigger().unwrap();
    w.join().unwrap().unwrap();
    // Back on the futex: the far connection's end counted it out.
    let (w, task) = blocked(&intr);
    let slept = asleep_in(&task);
    near.trigger().unwrap();
    w.join().unwrap().unwrap();
    if let (Some(want), Some(got)) = (SYS_FUTEX, slept) {
        assert_eq!(got, want, "after the far node left the owner slept in {got}, not futex");
    }
    // A removal wakes a waiter with "cancelled".
    let (w, _) = blocked(&intr);
    std::thread::sleep(Duration::from_millis(5));
    intr.remove().unwrap();
    assert_eq!(w.join().unwrap().unwrap_err(), Error::Cancelled);
}
