//! A receive buffer whose posting failed is posted again, not lost; at the open only a full
//! queue is retried later, and any other failure fails the open.

use super::REFUSE;
use crate::Endpoint;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Whether libfabric is missing (said: the test is skipped).
fn skipped() -> bool {
    let missing = !crate::installed();
    if missing {
        eprintln!("SKIP: libfabric is not installed");
    }
    missing
}

/// An endpoint on loopback with two receive buffers (as the postings refused say).
fn open() -> Result<Arc<Endpoint>, crate::Error> {
    Endpoint::open("tcp;ofi_rxm", Some("127.0.0.1"), 2, 4096)
}

/// Send `n` one-byte messages from `a` to `b` (reading both sides' completions meanwhile,
/// on this thread) and return what `b` received, in order.
fn exchange(a: &Endpoint, b: &Arc<Endpoint>, n: u8) -> Vec<u8> {
    let to_b = a.insert(&b.name().unwrap()).unwrap();
    let (mut got, mut sent) = (Vec::new(), 0u8);
    let t = Instant::now();
    while got.len() < usize::from(n) {
        assert!(t.elapsed() < Duration::from_secs(30), "only {got:?} arrived: receive buffers were lost");
        if sent < n && a.send(to_b, &[sent], 100 + u64::from(sent)).is_ok() {
            sent += 1;
        }
        for c in a.completions(Duration::from_millis(1)).unwrap() {
            assert!(c.error.is_none(), "{c:?}");
        }
        for c in b.completions(Duration::from_millis(10)).unwrap() {
            if let Some(slot) = c.slot {
                got.extend(b.received(slot, c.len));
            }
        }
    }
    got
}

/// Both receive buffers of an endpoint fail to be posted again after their first message.
/// `received` gave an error and the buffer was gone for good: after two such failures the
/// endpoint received nothing more (its links fell silent for ever). Now each is posted
/// again at the next read of completions, and every message arrives, in order.
#[test]
fn a_receive_buffer_whose_posting_failed_is_posted_again() {
    if skipped() {
        return;
    }
    let a = open().unwrap();
    let b = open().unwrap();
    // The next two postings (b's, after its first two messages: `received` runs here) fail.
    REFUSE.with(|r| r.set((2, 5)));
    assert_eq!(exchange(&a, &b, 6), [0, 1, 2, 3, 4, 5]);
    assert_eq!(REFUSE.with(|r| r.get().0), 0, "both postings were refused");
    assert_eq!(b.unposted(), 0, "every buffer is posted");
}

/// `fi_recv` fails at the open (not for a full queue): the open fails, naming the call, so
/// that the node says so and the cluster file's `fallback = "tcp"` applies. It was
/// swallowed (the buffer parked and retried silently) and the endpoint opened without its
/// receive buffers.
#[test]
fn an_open_whose_receive_buffers_cannot_be_posted_fails() {
    if skipped() {
        return;
    }
    REFUSE.with(|r| r.set((1, 5)));
    let e = open().unwrap_err();
    assert!(e.what.starts_with("fi_recv"), "the failing call is named: {e}");
    assert_eq!(e.code, 5);
}

/// The queue is full (`FI_EAGAIN`) for both buffers at the open: the open succeeds, both
/// wait, counted, and are posted at the first reads of completions; every message arrives.
#[test]
fn receive_buffers_a_full_queue_refuses_at_the_open_are_posted_later() {
    if skipped() {
        return;
    }
    let a = open().unwrap();
    REFUSE.with(|r| r.set((2, crate::EAGAIN)));
    let b = open().unwrap();
    assert_eq!(b.unposted(), 2, "both buffers wait for their posting");
    assert_eq!(exchange(&a, &b, 4), [0, 1, 2, 3]);
    assert_eq!(b.unposted(), 0);
}
