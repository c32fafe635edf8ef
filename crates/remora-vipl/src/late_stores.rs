//! A VI reused after `VipDisconnect` never takes a store of its previous peer that lands
//! late for one of the new connection's (`layout::tagged`). The old client here has not
//! heard of the disconnect (its NIC's watcher no longer looks at it, and the server's
//! word is wiped from its segment, as if still on its way): it describes a receive and
//! sends a message after the server took the next client, which is what a store already in
//! flight when the segment was zeroed does. The server must neither complete its new
//! receive with the old message nor take the old client's receives for the new client's
//! (it would write the next message into the old client's memory); the new connection then
//! works both ways. On one node, across two nodes of one host and across two hosts.
//! (Its pair helpers are in `testing.rs`.)

use crate::layout::{self, status};
use crate::testing::{connect, post_recv, send, Mem, T};
use crate::{Error, Nic, Vi, ViAttributes, ViState, MAX_TRANSFER, RELIABLE_DELIVERY, UNRELIABLE};
use remora_testkit::Harness;
use std::time::Duration;

fn old_stores_land_late(h: &Harness, snode: u32, cnode: u32, reliability: u16) {
    let what = format!("nodes {snode}/{cnode}, reliability {reliability}");
    let snic = Nic::open_with_config("remora0", h.config(snode)).unwrap();
    let cnic = Nic::open_with_config("remora0", h.config(cnode)).unwrap();
    let (sp, cp) = (snic.create_ptag(), cnic.create_ptag());
    let attrs = |ptag| ViAttributes {
        reliability,
        max_transfer: MAX_TRANSFER,
        ptag,
        rdma_write: false,
        rdma_read: false,
    };
    let server = Vi::create(&snic, attrs(sp), None, None).unwrap();
    let old = Vi::create(&cnic, attrs(cp), None, None).unwrap();
    let new = Vi::create(&cnic, attrs(cp), None, None).unwrap();
    let (sbuf, sdesc) = (Mem::new(&snic, 16384, sp), Mem::new(&snic, 1024, sp));
    let (cbuf, cdesc) = (Mem::new(&cnic, 16384, cp), Mem::new(&cnic, 1024, cp));

    // The first connection: each side has a receive posted (described to the other).
    post_recv(&snic, &server, &sdesc, 0, &sbuf, 0, 4096);
    connect(&snic, &server, &cnic, &old, format!("late-old{snode}{cnode}{reliability}").as_bytes());
    post_recv(&cnic, &old, &cdesc, 0, &cbuf, 0, 4096);
    let old_link = old.inner.link().unwrap();
    assert!(old_link.settle(), "{what}");
    let old_conn = server.inner.conn();
    // The old client will not hear of the disconnect for a while.
    cnic.remove_vi(&old.inner);
    server.disconnect().unwrap();
    assert_eq!(server.recv_wait(T).unwrap(), (sdesc.addr(0), sdesc.handle), "{what}");
    old.inner.map.store(layout::PEER_STATE, 0);

    // The server takes the next client on the same VI (its segment zeroed meanwhile).
    post_recv(&snic, &server, &sdesc, 64, &sbuf, 4096, 4096);
    connect(&snic, &server, &cnic, &new, format!("late-new{snode}{cnode}{reliability}").as_bytes());
    // What the new client stored on connecting has landed: the old client's stores below
    // are the last to reach the server's segment.
    assert!(new.inner.link().unwrap().settle(), "{what}");
    let conn = server.inner.conn();
    assert_ne!(conn, old_conn, "{what}: the new connection kept the old one's number");

    // The old client's stores land now: a receive it describes, and a message.
    post_recv(&cnic, &old, &cdesc, 64, &cbuf, 4096, 4096);
    let st = send(&cnic, &old, &cdesc, 128, &cbuf, 8192, b"OLD-LATE");
    assert_eq!(st & status::ERROR_MASK, 0, "{what}: the old client's send went out: {st:#x}");
    assert!(old_link.settle(), "{what}");
    // They landed in the server's segment, under the old connection's number, and the
    // server does not count them as the new client's: no receive posted, ring A's entry 1
    // (the old client's second receive) no receive of this connection.
    let posted = server.inner.map.load(layout::PEER_POSTED);
    assert_eq!(layout::untagged(old_conn, posted), Some(2), "{what}: the old client's count did not land");
    assert_eq!(
        layout::count_in(conn, posted, 0),
        0,
        "{what}: the old client's count counts for the new client"
    );
    let entry = server.inner.map.load(layout::entry_at(1) + layout::ENTRY_CONN) as u32;
    assert_eq!(entry, old_conn, "{what}: the old client's receive did not land");
    // Nor does the server's own send path (what a send reads of the peer's receives).
    let room = server.inner.peer_room(&mut server.inner.send.lock(), 0, Duration::ZERO);
    assert_eq!(room, None, "{what}: a send would take the old client's receive");
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(
        server.recv_done().err(),
        Some(Error::NotDone),
        "{what}: the old client's message completed the new connection's receive"
    );

    // The new client posts its receive (landed before the server sends: the send waits for
    // no store in flight, however slow the machine): the message goes there, not to a
    // receive the old client described.
    let data: Vec<u8> = (0..4096).map(|i| (i % 251) as u8).collect();
    post_recv(&cnic, &new, &cdesc, 192, &cbuf, 12288, 4096);
    assert!(new.inner.link().unwrap().settle(), "{what}");
    let st = send(&snic, &server, &sdesc, 128, &sbuf, 8192, &data);
    assert_eq!(st, status::DONE | status::OP_SEND, "{what}");
    assert_eq!(new.recv_wait(T).unwrap(), (cdesc.addr(192), cdesc.handle), "{what}");
    let got = cnic.read_descriptor(cdesc.addr(192), cdesc.handle).unwrap();
    assert_eq!((got.status, got.length), (status::DONE | status::OP_RECEIVE, 4096), "{what}");
    assert!(cbuf.get(12288, 4096) == data, "{what}: the message did not reach the new client's buffer");
    assert_eq!(cbuf.get(0, 8), vec![0u8; 8], "{what}: the old client's memory was written");
    assert_eq!(cbuf.get(4096, 8), vec![0u8; 8], "{what}: the old client's memory was written");

    // The new connection works the other way too, and the server's receive is intact.
    let st = send(&cnic, &new, &cdesc, 256, &cbuf, 8192, b"NEW-C2-1");
    assert_eq!(st, status::DONE | status::OP_SEND, "{what}");
    assert_eq!(server.recv_wait(T).unwrap(), (sdesc.addr(64), sdesc.handle), "{what}");
    let got = snic.read_descriptor(sdesc.addr(64), sdesc.handle).unwrap();
    assert_eq!((got.status, got.length), (status::DONE | status::OP_RECEIVE, 8), "{what}");
    assert_eq!(sbuf.get(4096, 8), b"NEW-C2-1", "{what}");
    assert_eq!((server.state(), new.state()), (ViState::Connected, ViState::Connected), "{what}");
    new.disconnect().unwrap();
    server.disconnect().unwrap();
    let _ = old.disconnect();
}

#[test]
fn late_stores_of_an_old_peer_reach_nothing_on_one_host() {
    let h = Harness::new();
    for (snode, cnode) in [(4, 4), (4, 8)] {
        for reliability in [RELIABLE_DELIVERY, UNRELIABLE] {
            old_stores_land_late(&h, snode, cnode, reliability);
        }
    }
}

#[test]
fn late_stores_of_an_old_peer_reach_nothing_across_hosts() {
    let h = Harness::with_cluster(&[4, 8], true);
    for reliability in [RELIABLE_DELIVERY, UNRELIABLE] {
        old_stores_land_late(&h, 4, 8, reliability);
    }
}
