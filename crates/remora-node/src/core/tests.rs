//! Unit tests of the books.

use super::*;
use tokio::sync::mpsc::unbounded_channel;

fn reg() -> (Registry, u64, u64, tokio::sync::mpsc::UnboundedReceiver<Event>) {
    let mut r = Registry::new(4);
    let (tx, _rx) = unbounded_channel();
    let a = r.add_session(1, Role::Client, tx);
    let (tx2, rx2) = unbounded_channel();
    let b = r.add_session(2, Role::Client, tx2);
    (r, a, b, rx2)
}

#[test]
fn state_machine_and_ids() {
    let (mut r, a, b, mut rx) = reg();
    let seg = r.create_segment(a, Some(7), 4096, false, false).unwrap().seg;
    assert_eq!(r.create_segment(b, Some(7), 4096, false, false).unwrap_err(), Error::SegmentIdUsed);
    assert_eq!(r.set_available(a, seg, 0), Err(Error::NotPrepared));
    assert_eq!(r.set_unavailable(a, seg, 0, false, false), Err(Error::IllegalOperation));
    assert_eq!(r.prepare(a, seg, 1), Err(Error::NoSuchAdapter));
    assert_eq!(r.prepare(b, seg, 0), Err(Error::UnknownHandle));
    r.prepare(a, seg, 0).unwrap();
    assert!(matches!(r.connect_local(b, 4, 7), Err(ConnectWait::Unavailable)));
    r.set_available(a, seg, 0).unwrap();
    let (conn, size, _fd) = r.connect_local(b, 4, 7).unwrap();
    assert_eq!(size, 4096);
    r.remove_segment(a, seg, false).unwrap();
    // The id is free again while the importer still holds the memory.
    assert!(r.create_segment(a, Some(7), 8192, false, false).is_ok());
    assert_eq!(r.segments.values().filter(|s| s.removed).count(), 1);
    r.disconnect(b, conn).unwrap();
    assert_eq!(r.segments.values().filter(|s| s.removed).count(), 0);
    assert!(rx.try_recv().is_err());
}

#[test]
fn owner_death_frees_ids_and_tells_importers() {
    let (mut r, a, b, mut rx) = reg();
    let seg = r.create_segment(a, Some(1), 4096, false, false).unwrap().seg;
    r.prepare(a, seg, 0).unwrap();
    r.set_available(a, seg, 0).unwrap();
    let (conn, _, _) = r.connect_local(b, 8, 1).unwrap();
    r.end_session(a);
    assert!(
        matches!(rx.try_recv(), Ok(Event::ConnectionLost { conn: c, reason: LostReason::OwnerGone }) if c == conn)
    );
    assert!(r.create_segment(b, Some(1), 4096, false, false).is_ok());
    r.end_session(b);
    assert!(r.segments.is_empty() && r.conns.is_empty());
}

#[test]
fn private_and_auto_ids() {
    let (mut r, a, _, _) = reg();
    let p = r.create_segment(a, Some(3), 4096, true, false).unwrap();
    assert_eq!(p.id, None);
    let p = p.seg;
    r.prepare(a, p, 0).unwrap();
    assert_eq!(r.set_available(a, p, 0), Err(Error::IllegalOperation));
    let x = r.create_segment(a, None, 4096, false, false).unwrap().id.unwrap();
    let y = r.create_segment(a, None, 4096, false, false).unwrap().id.unwrap();
    assert!(x >= AUTO_ID_BASE && y != x);
    // A removed segment's id is not handed to the next segment made.
    r.remove_segment(a, r.ids[&(IdSpace::Sisci, y)], false).unwrap();
    let z = r.create_segment(a, None, 4096, false, false).unwrap().id.unwrap();
    assert_eq!(z, y + 1);
    // At the end of the range the search wraps to the lowest free id.
    r.next_seg_id = u32::MAX;
    assert_eq!(r.create_segment(a, None, 4096, false, false).unwrap().id, Some(u32::MAX));
    assert_eq!(r.create_segment(a, None, 4096, false, false).unwrap().id, Some(y));
    let e = r.create_segment(a, Some(9), 0, false, true).unwrap().seg;
    assert_eq!(r.prepare(a, e, 0), Err(Error::IllegalOperation));
}

#[test]
fn a_connect_for_another_hosts_session_books_as_a_local_connect_does_without_a_descriptor() {
    let mut r = Registry::new(4);
    let (tx, mut owner) = unbounded_channel();
    let a = r.add_session(1, Role::Client, tx);
    let (tx2, _peer_events) = unbounded_channel();
    let peer = r.add_session(0, Role::Peer { node: 8 }, tx2);
    assert!(matches!(r.connect_for_peer(peer, 8, 9), Err(ConnectWait::Missing)));
    let seg = r.create_segment(a, Some(9), 8192, false, false).unwrap().seg;
    r.prepare(a, seg, 0).unwrap();
    assert!(matches!(r.connect_for_peer(peer, 8, 9), Err(ConnectWait::Unavailable)));
    r.set_available(a, seg, 0).unwrap();
    let (conn, size) = r.connect_for_peer(peer, 8, 9).unwrap();
    assert_eq!(size, 8192);
    // The owner is told once it asks; the connection keeps the memory the peer's frames
    // reach.
    assert!(owner.try_recv().is_err(), "told before asking");
    r.want_segment_events(a, seg);
    assert!(std::iter::from_fn(|| owner.try_recv().ok())
        .any(|e| matches!(e, Event::SegmentConnected { seg: s, node: 8 } if s == seg)));
    assert!(r.conns[&conn].memfd.is_some());
    assert!(r.segments[&seg].importers.contains(&conn));
    r.disconnect(peer, conn).unwrap();
    assert!(r.segments[&seg].importers.is_empty());
}

fn told(rx: &mut tokio::sync::mpsc::UnboundedReceiver<Event>) -> Vec<Event> {
    std::iter::from_fn(|| rx.try_recv().ok()).collect()
}

/// A node with two sessions: `a` (whose events come out of the receiver) and `b`.
fn owner_and_importer() -> (Registry, u64, tokio::sync::mpsc::UnboundedReceiver<Event>, u64) {
    let mut r = Registry::new(4);
    let (tx, owner) = unbounded_channel();
    let a = r.add_session(1, Role::Client, tx);
    let (tx2, _) = unbounded_channel();
    let b = r.add_session(2, Role::Client, tx2);
    (r, a, owner, b)
}

#[test]
fn a_segments_events_are_kept_in_order_until_its_owner_asks() {
    let (mut r, a, mut owner, b) = owner_and_importer();
    let seg = r.create_segment(a, Some(9), 4096, false, false).unwrap().seg;
    let other = r.create_segment(a, Some(10), 4096, false, false).unwrap().seg;
    for s in [seg, other] {
        r.prepare(a, s, 0).unwrap();
        r.set_available(a, s, 0).unwrap();
    }
    // Connects and disconnects from two nodes, interleaved with the other segment's.
    let mut want = Vec::new();
    for i in 0..5u32 {
        let node = 8 + 4 * (i % 2);
        let (conn, _, _) = r.connect_local(b, node, 9).unwrap();
        let (c2, _, _) = r.connect_local(b, 16, 10).unwrap();
        r.disconnect(b, conn).unwrap();
        r.disconnect(b, c2).unwrap();
        want.push(Event::SegmentConnected { seg, node });
        want.push(Event::SegmentDisconnected { seg, node });
    }
    r.tell_owner(seg, Event::SegmentLink { seg, node: 8, operational: false });
    want.push(Event::SegmentLink { seg, node: 8, operational: false });
    assert!(told(&mut owner).is_empty(), "an event was sent before the owner asked");
    // Another session asking (not the owner) gets only the answer.
    let (tx3, mut stranger) = unbounded_channel();
    let c = r.add_session(3, Role::Client, tx3);
    r.want_segment_events(c, seg);
    assert_eq!(told(&mut stranger), vec![Event::SegmentEventsOn { seg }]);
    // The owner asks: every kept event of the segment, in order, then the answer; the
    // other segment's stay kept.
    r.want_segment_events(a, seg);
    want.push(Event::SegmentEventsOn { seg });
    assert_eq!(told(&mut owner), want);
    // From now on each is sent as it happens.
    let (conn, _, _) = r.connect_local(b, 8, 9).unwrap();
    assert_eq!(told(&mut owner), vec![Event::SegmentConnected { seg, node: 8 }]);
    r.disconnect(b, conn).unwrap();
    assert_eq!(told(&mut owner), vec![Event::SegmentDisconnected { seg, node: 8 }]);
    assert_eq!(r.segments[&other].events.kept.len(), 10);
}

#[test]
fn the_heir_of_a_shared_segment_is_told_its_events() {
    let mut r = Registry::new(4);
    let (tx, _) = unbounded_channel();
    let a = r.add_session(1, Role::Client, tx);
    let (tx2, mut heir) = unbounded_channel();
    let b = r.add_session(2, Role::Client, tx2);
    let (tx3, _) = unbounded_channel();
    let c = r.add_session(3, Role::Client, tx3);
    let seg = r.create_segment(a, Some(9), 4096, false, false).unwrap().seg;
    r.share(a, seg).unwrap();
    r.prepare(a, seg, 0).unwrap();
    r.set_available(a, seg, 0).unwrap();
    // The attacher asks once (a wait or a callback) and gets only the answer.
    assert_eq!(r.attach_shared(b, 9).unwrap().seg, seg);
    r.want_segment_events(b, seg);
    assert_eq!(told(&mut heir), [Event::SegmentEventsOn { seg }]);
    // A connect while the owner never asked: kept for the owner.
    let (first, _, _) = r.connect_local(c, 8, 9).unwrap();
    r.end_session(a);
    assert_eq!(r.segments[&seg].owner, b);
    assert!(told(&mut heir).is_empty(), "the gone owner's kept events went to the heir");
    // From now on the heir, which will not ask again, is told each event.
    r.disconnect(c, first).unwrap();
    r.connect_local(c, 12, 9).unwrap();
    assert_eq!(
        told(&mut heir),
        [Event::SegmentDisconnected { seg, node: 8 }, Event::SegmentConnected { seg, node: 12 }]
    );
}

#[test]
fn a_full_store_of_kept_events_goes_to_the_owner_in_order_and_keeping_goes_on() {
    let (mut r, a, mut owner, b) = owner_and_importer();
    let seg = r.create_segment(a, Some(9), 4096, false, false).unwrap().seg;
    r.prepare(a, seg, 0).unwrap();
    r.set_available(a, seg, 0).unwrap();
    let mut want = Vec::new();
    let cycles = remora_proto::KEPT_SEGMENT_EVENTS / 2 + 3;
    for i in 0..cycles as u32 {
        let (conn, _, _) = r.connect_local(b, 8 + 4 * (i % 3), 9).unwrap();
        r.disconnect(b, conn).unwrap();
        want.push(Event::SegmentConnected { seg, node: 8 + 4 * (i % 3) });
        want.push(Event::SegmentDisconnected { seg, node: 8 + 4 * (i % 3) });
    }
    // The event that filled the store sent them all; the rest are kept.
    let sent = told(&mut owner);
    assert_eq!(sent, want[..remora_proto::KEPT_SEGMENT_EVENTS]);
    assert_eq!(r.segments[&seg].events.kept.len(), want.len() - sent.len());
    r.want_segment_events(a, seg);
    let mut rest = want[sent.len()..].to_vec();
    rest.push(Event::SegmentEventsOn { seg });
    assert_eq!(told(&mut owner), rest);
    // A removed segment keeps nothing.
    let other = r.create_segment(a, Some(11), 4096, false, false).unwrap().seg;
    r.prepare(a, other, 0).unwrap();
    r.set_available(a, other, 0).unwrap();
    let (conn, _, _) = r.connect_local(b, 8, 11).unwrap();
    r.remove_segment(a, other, false).unwrap();
    assert!(r.segments[&other].events.kept.is_empty());
    r.disconnect(b, conn).unwrap();
    assert!(told(&mut owner).is_empty());
}

#[test]
fn automatic_interrupt_numbers_are_not_reused_at_once() {
    let (mut r, a, b, _rx) = reg();
    let (i1, n1, _, _) = r.create_interrupt(a, None, false, false).unwrap();
    assert_eq!(n1, AUTO_INTNO_BASE);
    r.remove_interrupt(a, i1).unwrap();
    // The freed number is not handed to the next interrupt (another session's here): a
    // post addressed to the old one must not reach it.
    let (_, n2, _, _) = r.create_interrupt(b, None, false, false).unwrap();
    assert_ne!(n2, n1);
    assert_eq!(n2, n1 + 1);
    // A fixed number in the way is skipped.
    r.create_interrupt(b, Some(n2 + 1), false, false).unwrap();
    let (_, n3, _, _) = r.create_interrupt(a, None, false, false).unwrap();
    assert_eq!(n3, n2 + 2);
    // At the end of the range the search wraps to the lowest free number.
    r.next_intno = u32::MAX;
    let (_, top, _, _) = r.create_interrupt(a, None, false, false).unwrap();
    assert_eq!(top, u32::MAX);
    let (_, wrapped, _, _) = r.create_interrupt(a, None, false, false).unwrap();
    assert_eq!(wrapped, AUTO_INTNO_BASE);
}

#[test]
fn only_connections_whose_triggers_come_through_the_daemon_put_the_owner_on_the_bell() {
    // Another node of this host (the `local` transport) holds the page and futex-wakes the
    // owner itself; a link's peer (another host, or a node joined over TCP) triggers
    // through this daemon, whose socket wake-up is the bell's. Each disconnect counts out
    // what its connect counted in, in any order.
    let mut r = Registry::new(4);
    let (tx, _o) = unbounded_channel();
    let owner = r.add_session(1, Role::Client, tx);
    let (tx, _n) = unbounded_channel();
    let near = r.add_session(0, Role::Peer { node: 8 }, tx);
    let (tx, _f) = unbounded_channel();
    let far = r.add_session(0, Role::Peer { node: 9 }, tx);
    let (intr, intno, _, _) = r.create_interrupt(owner, Some(5), false, false).unwrap();
    let afar = |r: &Registry| r.interrupts[&intr].page.far_connected();
    let Ok((n1, fds)) = r.connect_interrupt(near, 8, intno, false, false) else { panic!("connect") };
    assert_eq!(fds.len(), 3, "the page, its eventfd and its bell's sending end");
    assert!(!afar(&r), "a node of this host holding the page");
    let Ok((f1, _)) = r.connect_interrupt(far, 9, intno, false, true) else { panic!("connect") };
    let Ok((f2, _)) = r.connect_interrupt(far, 9, intno, false, true) else { panic!("connect") };
    assert!(afar(&r));
    r.disconnect_interrupt(far, f1).unwrap();
    assert!(afar(&r), "one far connection left");
    r.disconnect_interrupt(near, n1).unwrap();
    assert!(afar(&r), "a near one's end counts nothing out");
    let Ok((n2, _)) = r.connect_interrupt(near, 8, intno, false, false) else { panic!("connect") };
    r.disconnect_interrupt(far, f2).unwrap();
    assert!(!afar(&r), "the last far connection ended");
    // Triggers of both kinds still count (the page's, whoever waits where).
    let before = r.interrupts[&intr].page.triggers();
    r.trigger_interrupt(near, n2, None).unwrap();
    let Ok((f3, _)) = r.connect_interrupt(far, 9, intno, false, true) else { panic!("connect") };
    r.trigger_interrupt(far, f3, None).unwrap();
    assert_eq!(r.interrupts[&intr].page.triggers().wrapping_sub(before), 2);
    // A flow (whose triggers the owner reads on the bell) only for a connection counted
    // far, though the near one is a peer's too.
    let (flow, _other) = std::os::unix::net::UnixStream::pair().unwrap();
    assert!(
        r.share_flow(8, n2, std::os::fd::AsFd::as_fd(&flow), None).is_none(),
        "a flow of a near connection"
    );
    assert!(r.share_flow(9, f3, std::os::fd::AsFd::as_fd(&flow), None).is_some());
    // A session's end disconnects its connections: the count goes back to none.
    r.end_session(far);
    assert!(!afar(&r));
}
