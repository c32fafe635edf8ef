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
    // The owner is told; the connection keeps the memory the peer's frames reach.
    assert!(std::iter::from_fn(|| owner.try_recv().ok())
        .any(|e| matches!(e, Event::SegmentConnected { seg: s, node: 8 } if s == seg)));
    assert!(r.conns[&conn].memfd.is_some());
    assert!(r.segments[&seg].importers.contains(&conn));
    r.disconnect(peer, conn).unwrap();
    assert!(r.segments[&seg].importers.is_empty());
}
