use super::*;
use crate::flow::recv;
use std::net::{TcpListener, TcpStream};

/// A reaper of its own with `limit`, its thread running (for the test process's life).
fn started(limit: Duration) -> &'static Reaper {
    let r: &'static Reaper = Box::leak(Box::new(Reaper::new(limit).unwrap()));
    std::thread::spawn(move || r.run());
    r
}

/// A loopback connection `(ours, far)`.
fn pair() -> (TcpStream, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let far = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    (l.accept().unwrap().0, far)
}

/// Waits (generously: up to 20 s) until `what` holds; `false` if it never did.
fn wait_for(what: impl Fn() -> bool) -> bool {
    let t = Instant::now();
    while !what() {
        if t.elapsed() > Duration::from_secs(20) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    true
}

/// A reaper that holds a flow whose far end stays silent sleeps: no wake-up in a second
/// (it looked every 100 ms before, ten times a second for up to a minute). The far end's
/// end still wakes it at once, and the flow goes.
#[test]
fn a_reaper_holding_a_silent_flow_does_not_wake() {
    let r = started(Duration::from_secs(600));
    let (ours, far) = pair();
    r.hand(ours.into());
    assert!(wait_for(|| r.held.load(Ordering::Acquire) == 1), "the flow was not taken in");
    let before = r.wakes.load(Ordering::Relaxed);
    std::thread::sleep(Duration::from_secs(1));
    let woke = r.wakes.load(Ordering::Relaxed) - before;
    assert!(woke <= 1, "the reaper woke {woke} times in a second with nothing to do");
    drop(far);
    assert!(wait_for(|| r.held.load(Ordering::Acquire) == 0), "the far end's end did not let the flow go");
}

/// A flow whose far end never ends is read until its time is up, then shut both ways: the
/// far end sees the end, and a read of the socket here ends at once.
#[test]
fn a_flow_is_shut_both_ways_when_its_time_is_up() {
    let limit = Duration::from_millis(300);
    let r = started(limit);
    let (ours, mut far) = pair();
    let probe = ours.try_clone().unwrap();
    let t = Instant::now();
    r.hand(ours.into());
    let mut b = [0u8; 1];
    std::thread::sleep(limit / 3);
    let early = recv(probe.as_fd(), &mut b, false);
    // Looked at in time (a test stalled past the limit under load is not checked).
    if t.elapsed() < limit {
        assert_eq!(early.unwrap_err().kind(), std::io::ErrorKind::WouldBlock, "shut before its time");
    }
    let shut = || matches!(recv(probe.as_fd(), &mut [0u8; 1], false), Ok(0));
    assert!(wait_for(shut), "never shut for reading");
    assert!(t.elapsed() >= limit, "shut {:?} after it was handed over", t.elapsed());
    far.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    assert_eq!(std::io::Read::read(&mut far, &mut b).unwrap(), 0, "the far end did not see the end");
    assert!(wait_for(|| r.held.load(Ordering::Acquire) == 0), "the flow is still held");
}

/// A far end that keeps sending small frames (each would be a wake-up of its own) is looked
/// at about every `BUSY_NAP`, not at each frame: a second of a frame every 200 µs wakes the
/// reaper at most a few dozen times (thousands before), and what it sent is still read.
#[test]
fn a_far_end_sending_small_frames_does_not_wake_it_for_each() {
    let r = started(Duration::from_secs(600));
    let (ours, mut far) = pair();
    r.hand(ours.into());
    assert!(wait_for(|| r.held.load(Ordering::Acquire) == 1), "the flow was not taken in");
    let before = r.wakes.load(Ordering::Relaxed);
    let t = Instant::now();
    let mut sent = 0u32;
    while t.elapsed() < Duration::from_secs(1) {
        std::io::Write::write_all(&mut far, &[7u8; 40]).unwrap();
        sent += 1;
        std::thread::sleep(Duration::from_micros(200));
    }
    let woke = r.wakes.load(Ordering::Relaxed) - before;
    assert!(sent > 100, "only {sent} frames went out");
    assert!(woke <= 40, "the reaper woke {woke} times for {sent} frames in a second");
    drop(far);
    assert!(wait_for(|| r.held.load(Ordering::Acquire) == 0), "the far end's end did not let the flow go");
}
