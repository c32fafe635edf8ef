//! A receive buffer whose posting failed is posted again, not lost.

use crate::Endpoint;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

/// Both receive buffers of an endpoint fail to be posted again after their first message.
/// `received` gave an error and the buffer was gone for good: after two such failures the
/// endpoint received nothing more (its links fell silent for ever). Now each is posted
/// again at the next read of completions, and every message arrives, in order.
#[test]
fn a_receive_buffer_whose_posting_failed_is_posted_again() {
    if !crate::installed() {
        eprintln!("SKIP: libfabric is not installed");
        return;
    }
    let a = Endpoint::open("tcp;ofi_rxm", Some("127.0.0.1"), 2, 4096).unwrap();
    let b = Endpoint::open("tcp;ofi_rxm", Some("127.0.0.1"), 2, 4096).unwrap();
    let to_b = a.insert(&b.name().unwrap()).unwrap();
    b.refuse_posts.store(2, Relaxed);
    let (mut got, mut sent) = (Vec::new(), 0u8);
    let t = Instant::now();
    while got.len() < 6 {
        assert!(t.elapsed() < Duration::from_secs(30), "only {got:?} arrived: receive buffers were lost");
        if sent < 6 && a.send(to_b, &[sent], 100 + u64::from(sent)).is_ok() {
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
    assert_eq!(got, [0, 1, 2, 3, 4, 5]);
    assert_eq!(b.refuse_posts.load(Relaxed), 0, "both postings were refused");
    assert!(b.unposted.lock().unwrap().is_empty(), "every buffer is posted");
}
