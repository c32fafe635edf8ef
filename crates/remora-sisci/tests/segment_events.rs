//! A local segment's events (connects, disconnects): the node daemon keeps them until the
//! owner asks (a callback, or the first wait), and every one still arrives, once and in the
//! order it happened: those kept before the ask, those sent in a batch when the daemon's
//! store of them filled up, and those that happen while a thread waits.

mod common;
use common::Sci as _;

use remora_proto::KEPT_SEGMENT_EVENTS;
use remora_sisci::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

const LONG: Option<Duration> = Some(Duration::from_secs(10));

fn exported(dev: &Descriptor, id: u32, callback: Option<LocalCallback>) -> LocalSegment {
    let s =
        LocalSegment::create_with_callback(dev, Some(id), 4096, CreateFlags::default(), callback).unwrap();
    s.prepare(0).unwrap();
    s.set_available(0).unwrap();
    s
}

/// `cycles` connects and disconnects of segment `id` of node 4, from the importers in turn;
/// the events the owner must see, in order.
fn churn(importers: &[(u32, &Descriptor)], id: u32, cycles: usize) -> Vec<(SegmentReason, u32)> {
    let mut want = Vec::new();
    for i in 0..cycles {
        let (node, dev) = importers[i % importers.len()];
        let r = RemoteSegment::connect(dev, 4, id, 0, LONG).unwrap();
        r.disconnect().unwrap();
        want.push((SegmentReason::Connect, node));
        want.push((SegmentReason::Disconnect, node));
    }
    want
}

fn next(s: &LocalSegment, timeout: Option<Duration>) -> (SegmentReason, u32) {
    let e = s.wait_event(timeout).unwrap();
    assert_eq!(e.adapter, 0);
    (e.reason, e.node)
}

#[test]
fn events_before_the_first_wait_reach_it_in_order_past_the_daemons_store() {
    let h = common::Harness::new();
    let a = Descriptor::open(&h.sci(4)).unwrap();
    let b = Descriptor::open(&h.sci(8)).unwrap();
    let c = Descriptor::open(&h.sci(12)).unwrap();
    let s = exported(&a, 21, None);
    let quiet = exported(&a, 22, None);
    // More events than the daemon keeps: the store fills (and is sent) once, the rest are
    // kept; the owner has not waited yet. Another segment's events are kept apart.
    let cycles = KEPT_SEGMENT_EVENTS / 2 + 40;
    let want = churn(&[(8, &b), (12, &c)], 21, cycles);
    let other = churn(&[(12, &c)], 22, 2);
    // The first wait polls (no time at all): it still sees the first event, which happened
    // before it.
    let mut got = vec![next(&s, Some(Duration::ZERO))];
    while got.len() < want.len() {
        got.push(next(&s, LONG));
    }
    assert_eq!(got, want);
    assert_eq!(s.wait_event(Some(Duration::from_millis(20))).unwrap_err(), Error::Timeout);
    let got: Vec<_> = (0..other.len()).map(|_| next(&quiet, Some(Duration::ZERO))).collect();
    assert_eq!(got, other);
    assert_eq!(quiet.wait_event(Some(Duration::from_millis(20))).unwrap_err(), Error::Timeout);
}

#[test]
fn events_during_a_wait_follow_the_kept_ones() {
    let h = common::Harness::new();
    let a = Descriptor::open(&h.sci(4)).unwrap();
    let b = Descriptor::open(&h.sci(8)).unwrap();
    let c = Descriptor::open(&h.sci(12)).unwrap();
    let s = exported(&a, 23, None);
    let mut want = churn(&[(8, &b)], 23, 3);
    let r = RemoteSegment::connect(&c, 4, 23, 0, LONG).unwrap();
    want.push((SegmentReason::Connect, 12));
    // A waiter takes them while more happen (the daemon sends those as they come).
    let n = want.len() + 2 * 20;
    let waiter = {
        let s = s.clone();
        std::thread::spawn(move || (0..n).map(|_| next(&s, LONG)).collect::<Vec<_>>())
    };
    want.extend(churn(&[(12, &c), (8, &b)], 23, 20));
    assert_eq!(waiter.join().unwrap(), want);
    r.disconnect().unwrap();
    assert_eq!(next(&s, LONG), (SegmentReason::Disconnect, 12));
}

#[test]
fn a_callback_sees_every_event_in_order() {
    let h = common::Harness::new();
    let a = Descriptor::open(&h.sci(4)).unwrap();
    let b = Descriptor::open(&h.sci(8)).unwrap();
    let c = Descriptor::open(&h.sci(12)).unwrap();
    let (tx, rx) = mpsc::channel();
    let cb: LocalCallback = Box::new(move |_, e| {
        tx.send((e.reason, e.node)).unwrap();
        CallbackAction::Continue
    });
    let s = exported(&a, 24, Some(cb));
    let want = churn(&[(12, &c), (8, &b)], 24, KEPT_SEGMENT_EVENTS / 2 + 10);
    let got: Vec<_> = (0..want.len()).map(|_| rx.recv_timeout(Duration::from_secs(10)).unwrap()).collect();
    assert_eq!(got, want);
    assert!(rx.recv_timeout(Duration::from_millis(20)).is_err(), "an event came twice");
    assert_eq!(s.wait_event(Some(Duration::ZERO)).unwrap_err(), Error::IllegalOperation);
}

#[test]
fn a_process_that_attached_a_segment_waits_its_time_and_the_owner_still_gets_the_events() {
    let h = common::Harness::new();
    let a = Descriptor::open(&h.sci(4)).unwrap();
    let a2 = Descriptor::open(&h.sci(4)).unwrap();
    let b = Descriptor::open(&h.sci(8)).unwrap();
    let s = exported(&a, 25, None);
    s.share().unwrap();
    let attached = LocalSegment::attach(&a2, 25, None).unwrap();
    let want = churn(&[(8, &b)], 25, 2);
    // The events go to the owner, not to who attached it (as before): its wait ends in
    // its time.
    assert_eq!(attached.wait_event(Some(Duration::from_millis(20))).unwrap_err(), Error::Timeout);
    let got: Vec<_> = (0..want.len()).map(|_| next(&s, LONG)).collect();
    assert_eq!(got, want);
    attached.remove().unwrap();
}

#[test]
fn a_first_wait_inside_another_resources_callback_gets_the_kept_events() {
    let h = common::Harness::new();
    let a = Descriptor::open(&h.sci(4)).unwrap();
    let b = Descriptor::open(&h.sci(8)).unwrap();
    let s = exported(&a, 26, None);
    let want = churn(&[(8, &b)], 26, 3);
    // The first wait for `s`'s events runs on the event thread, inside `t`'s callback:
    // the daemon's answer cannot come down the event socket, which that thread reads.
    let (tx, rx) = mpsc::channel();
    let waiter = s.clone();
    let n = want.len();
    let cb: LocalCallback = Box::new(move |_, e| {
        if e.reason == SegmentReason::Connect {
            let got: Vec<_> = (0..n).map(|_| waiter.wait_event(LONG).map(|e| (e.reason, e.node))).collect();
            tx.send(got).unwrap();
        }
        CallbackAction::Continue
    });
    let _t = exported(&a, 27, Some(cb));
    let r = RemoteSegment::connect(&b, 4, 27, 0, LONG).unwrap();
    let got = rx.recv_timeout(Duration::from_secs(30)).unwrap();
    let got: Vec<_> = got.into_iter().map(Result::unwrap).collect();
    assert_eq!(got, want);
    r.disconnect().unwrap();
    // The events after the answer come as usual, once, in order.
    let more = churn(&[(8, &b)], 26, 2);
    let got: Vec<_> = (0..more.len()).map(|_| next(&s, LONG)).collect();
    assert_eq!(got, more);
    assert_eq!(s.wait_event(Some(Duration::from_millis(20))).unwrap_err(), Error::Timeout);
}

#[test]
fn a_first_wait_inside_a_callback_gets_events_sent_past_the_store_first() {
    first_wait_inside_a_callback_past_the_store(false);
}

#[test]
fn a_first_wait_inside_another_descriptors_callback_gets_events_sent_past_the_store_first() {
    first_wait_inside_a_callback_past_the_store(true);
}

/// More events of segment `s` than the daemon keeps, then the first wait for them inside
/// `t`'s callback, `t` made through `s`'s descriptor or (`apart`) another one of node 4
/// (another session, whose handler is the one running).
fn first_wait_inside_a_callback_past_the_store(apart: bool) {
    let h = common::Harness::new();
    let a = Descriptor::open(&h.sci(4)).unwrap();
    let a2 = Descriptor::open(&h.sci(4)).unwrap();
    let b = Descriptor::open(&h.sci(8)).unwrap();
    let c = Descriptor::open(&h.sci(12)).unwrap();
    let s = exported(&a, 28, None);
    // `t`'s callback holds the event thread while `s`'s events happen: the daemon's store
    // of them fills and is sent down the event socket, which nobody reads meanwhile; the
    // newer ones are kept. Then the callback makes the first wait for `s`'s events.
    let (started_tx, started_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<usize>();
    let (tx, rx) = mpsc::channel();
    let waiter = s.clone();
    let inside = Arc::new(AtomicBool::new(false));
    let inside_t = inside.clone();
    let cb: LocalCallback = Box::new(move |_, e| {
        if e.reason == SegmentReason::Connect {
            inside_t.store(true, Ordering::SeqCst);
            started_tx.send(()).unwrap();
            let n = go_rx.recv().unwrap();
            let mut got = Vec::new();
            // Stop at the first error (a wait that timed out), so that a failure shows.
            while got.len() < n {
                match waiter.wait_event(LONG) {
                    Ok(e) => got.push((e.reason, e.node)),
                    Err(e) => {
                        eprintln!("wait inside the callback: {e:?} after {} events", got.len());
                        break;
                    }
                }
            }
            // Nothing more, and the socket is read to its end (what is left of other
            // resources' events waits for their callbacks all the same).
            let after = waiter.wait_event(Some(Duration::from_millis(50))).map(|e| (e.reason, e.node));
            tx.send((got, after)).unwrap();
            inside_t.store(false, Ordering::SeqCst);
        }
        CallbackAction::Continue
    });
    let _t = exported(if apart { &a2 } else { &a }, 29, Some(cb));
    // A third segment's callback runs after `t`'s returns, never inside it (the wait reads
    // its event off `s`'s session's socket too, and leaves it for that session's handler).
    let (u_tx, u_rx) = mpsc::channel();
    let cb: LocalCallback = Box::new(move |_, e| {
        u_tx.send((e.reason, inside.load(Ordering::SeqCst))).unwrap();
        CallbackAction::Continue
    });
    let _u = exported(&a, 30, Some(cb));
    let r = RemoteSegment::connect(&b, 4, 29, 0, LONG).unwrap();
    started_rx.recv_timeout(Duration::from_secs(30)).unwrap();
    let mut want = churn(&[(8, &b), (12, &c)], 28, KEPT_SEGMENT_EVENTS / 2);
    let ru = RemoteSegment::connect(&c, 4, 30, 0, LONG).unwrap();
    want.extend(churn(&[(8, &b), (12, &c)], 28, 40));
    assert!(want.len() > KEPT_SEGMENT_EVENTS);
    go_tx.send(want.len()).unwrap();
    let (got, after) = rx.recv_timeout(Duration::from_secs(60)).unwrap();
    assert_eq!(got.len(), want.len(), "every event reaches the wait inside the callback");
    assert_eq!(got, want, "in the order they happened");
    assert_eq!(after, Err(Error::Timeout), "none twice");
    assert_eq!(u_rx.recv_timeout(Duration::from_secs(30)).unwrap(), (SegmentReason::Connect, false));
    ru.disconnect().unwrap();
    assert_eq!(u_rx.recv_timeout(Duration::from_secs(30)).unwrap(), (SegmentReason::Disconnect, false));
    r.disconnect().unwrap();
    // None came twice, and the next ones come as usual.
    let more = churn(&[(12, &c)], 28, 2);
    let got: Vec<_> = (0..more.len()).map(|_| next(&s, LONG)).collect();
    assert_eq!(got, more);
    assert_eq!(s.wait_event(Some(Duration::from_millis(20))).unwrap_err(), Error::Timeout);
}

/// A wait for a remote segment's event inside another resource's callback (on the event
/// thread) sees the event when it comes: the wait reads its session's event socket itself.
/// Before, the event stayed unread behind the running callback and the wait ran out its time.
#[test]
fn a_remote_segments_wait_inside_a_callback_sees_its_event() {
    let h = common::Harness::new();
    let a = Descriptor::open(&h.sci(4)).unwrap();
    let b = Descriptor::open(&h.sci(8)).unwrap();
    let s = exported(&a, 31, None);
    let r = RemoteSegment::connect(&b, 4, 31, 0, LONG).unwrap();
    let (started_tx, started_rx) = mpsc::channel();
    let (tx, rx) = mpsc::channel();
    let waiter = r.clone();
    let cb: LocalCallback = Box::new(move |_, e| {
        if e.reason == SegmentReason::Connect {
            started_tx.send(()).unwrap();
            let t = std::time::Instant::now();
            let got = waiter.wait_event(LONG).map(|e| e.reason);
            tx.send((got, t.elapsed())).unwrap();
        }
        CallbackAction::Continue
    });
    // `t`, on `r`'s descriptor, runs its callback when node 4 connects to it.
    let _t = exported(&b, 32, Some(cb));
    let _to_t = RemoteSegment::connect(&a, 8, 32, 0, LONG).unwrap();
    started_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    // Node 4 takes `s` away, telling its importers: `r` gets a disconnect.
    s.set_unavailable(0, false, true).unwrap();
    let (got, took) = rx.recv_timeout(Duration::from_secs(20)).unwrap();
    assert_eq!(got, Ok(SegmentReason::Disconnect));
    assert!(took < Duration::from_secs(5), "the wait inside the callback took {took:?}");
}
