//! [`Direct::broken`]: a stream that broke on the receiving side breaks the VI at once; one
//! that ended cleanly only once the peer's word that it is gone failed to come within
//! [`END_GRACE`]. Read through [`Direct::pump`], as a receiver reads it.

use super::*;
use remora_sisci::{CreateFlags, Descriptor, LocalSegment, MapFlags, Sisci};
use remora_testkit::Harness;

/// A stream made as a connect makes it: (the requester's, the acceptor's).
fn pair() -> (Direct, Direct) {
    let o = Offer::open("127.0.0.1").unwrap();
    let (port, token) = (o.port(), o.token);
    let requester = std::thread::spawn(move || dial("127.0.0.1", port, token, HANDSHAKE_WAIT));
    let mut acceptor = None;
    assert_eq!(o.accept(|d| acceptor = Some(d)), Made::Yes);
    (requester.join().unwrap().expect("the requester's stream"), acceptor.expect("the acceptor's stream"))
}

/// A receiver's VI segment (its ring), kept with the node that holds it.
struct Ring {
    _h: Harness,
    _seg: LocalSegment,
    own: Window,
}

fn ring() -> Ring {
    let h = Harness::new();
    let desc = Descriptor::open(&Sisci::with_config(h.config(4))).unwrap();
    let size = layout::vi_segment_size();
    let seg = LocalSegment::create(&desc, None, size, CreateFlags::default()).unwrap();
    let own = Window::new(seg.map(0, size, None, MapFlags::default()).unwrap());
    Ring { _h: h, _seg: seg, own }
}

/// Read the stream as a peer that said it is gone would have it read: to its end.
fn read_to_end(d: &Direct, r: &Ring) {
    d.pump(&r.own, &AtomicU64::new(0), Pump::ToEnd);
    assert!(d.ended.load(Ordering::Acquire), "the stream's end was not read");
}

#[test]
fn a_stream_that_ends_inside_a_frame_is_broken_at_once() {
    let r = ring();
    let (tx, rx) = pair();
    (&tx.s).write_all(&[0u8; FRAME / 2]).unwrap();
    tx.end();
    read_to_end(&rx, &r);
    assert!(rx.broken(), "part of a frame before the end did not break the VI");
}

#[test]
fn a_frame_no_receiver_waits_for_breaks_the_stream() {
    let r = ring();
    let (tx, rx) = pair();
    // A mark of a message past the ring's window (the receiver took none yet).
    let mut f = [0u8; FRAME];
    f[..8].copy_from_slice(&((ENTRIES as u64 + 3) | MARK).to_le_bytes());
    (&tx.s).write_all(&f).unwrap();
    rx.wait(Duration::from_secs(20));
    rx.pump(&r.own, &AtomicU64::new(0), Pump::Now);
    assert!(rx.broken(), "a frame outside the ring's window did not break the VI");
}

/// A clean end is the peer's going (its word follows by the channel): the VI breaks only
/// when the word did not come within the grace.
#[test]
fn a_clean_end_breaks_the_vi_only_after_the_grace() {
    let r = ring();
    let (tx, rx) = pair();
    let mut f = [0u8; FRAME];
    f[..8].copy_from_slice(&MARK.to_le_bytes());
    (&tx.s).write_all(&f).unwrap();
    tx.end();
    let t = Instant::now();
    read_to_end(&rx, &r);
    let early = rx.broken();
    // Looked at within the grace (a test stalled that long under load is not checked).
    if t.elapsed() < END_GRACE {
        assert!(!early, "a clean end broke the VI before the peer's word could come");
    }
    // The grace passed (the end read that long ago): broken.
    let then = Instant::now().checked_sub(END_GRACE).expect("a clock past the grace");
    *rx.ended_at.lock().unwrap() = Some(then);
    assert!(rx.broken(), "an end without the peer's word did not break the VI after the grace");
}
