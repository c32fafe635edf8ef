//! A flow the daemon's thread took from the owner to read alone (`SharedFlow::leave`)
//! ends with its connection, as the flows still shared do.

use super::OwnerFlow;
use crate::transport::shared_flow::serve_shared;
use crate::transport::shared_flow::testing::{flow_pair, wait_for, Counted};
use crate::Node;
use remora_proto::link::{BulkFrame, BULK_FRAME};
use remora_proto::Role;
use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc::unbounded_channel;
use zerocopy::IntoBytes;

/// A bare node 4 whose session 1 owns interrupt 5, connected from node 9's session, and a
/// flow of that connection booked for the owner.
struct Setup {
    node: Arc<Node>,
    owner: u64,
    peer: u64,
    intr: u64,
    conn: u64,
    tx: std::net::TcpStream,
    rx: std::net::TcpStream,
    share: OwnerFlow,
}

fn setup() -> Setup {
    let node = Node::bare(4);
    let (owner, peer, intr, conn) = {
        let mut r = node.lock();
        let owner = r.add_session(1, Role::Client, unbounded_channel().0);
        let peer = r.add_session(0, Role::Peer { node: 9 }, unbounded_channel().0);
        let (intr, intno, _, _) = r.create_interrupt(owner, Some(5), false, false).unwrap();
        let Ok((conn, _)) = r.connect_interrupt(peer, 9, intno, false, true) else { panic!("connect") };
        (owner, peer, intr, conn)
    };
    let (tx, rx) = flow_pair();
    let booking = node.lock().share_flow(9, conn, rx.as_fd(), None).expect("booked for the owner");
    let share = OwnerFlow { node: Arc::downgrade(&node), booking, polls: 0 };
    Setup { node, owner, peer, intr, conn, tx, rx, share }
}

/// A split frame that stays makes the daemon's thread take the flow from the owner; the
/// connection's disconnect (a peer's session ending after its link was lost does the
/// same) then shuts the flow for writing, so the far end sees its end, and the far end's
/// close ends the thread, which forgets the booking. Before, taking the flow forgot the
/// booking at once: the disconnect did not reach the flow, and the thread read it until
/// the far end closed it on its own, which a silent far host never did (the far end's
/// read here waited out its timeout).
#[test]
fn a_flow_read_alone_is_shut_when_its_connection_ends() {
    let Setup { node, owner, peer, intr, conn, mut tx, rx, share } = setup();
    let in_set = || !node.lock().interrupt_flows(owner, intr).unwrap().1.is_empty();
    assert!(in_set());
    let frame = BulkFrame::trigger(conn);
    let (mem, bytes) = (Counted::default(), AtomicU64::new(0));
    std::thread::scope(|sc| {
        let server = sc.spawn(|| serve_shared(9, &bytes, rx, conn, &mem, Box::new(share)));
        tx.write_all(frame.as_bytes()).unwrap();
        tx.write_all(&frame.as_bytes()[..BULK_FRAME / 2]).unwrap();
        assert!(wait_for(|| !in_set()), "the split frame's flow stayed in the owner's set");
        assert!(wait_for(|| mem.count() == 1), "the whole frame before the part was not served");
        node.lock().disconnect_interrupt(peer, conn).unwrap();
        tx.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut sink = [0u8; 1];
        let end = tx.read(&mut sink);
        assert!(matches!(end, Ok(0)), "the flow read alone was not shut by its disconnect: {end:?}");
        // The far end closes on seeing the end: the thread ends, and so does the booking.
        drop(tx);
        assert!(wait_for(|| server.is_finished()), "the thread outlived the far end's close");
    });
    assert!(node.lock().interrupts[&intr].owner_flows.is_empty(), "the booking outlived the flow");
}

/// A flow read alone whose far end closes while its connection lives: the thread ends and
/// the booking goes with it (the connection stays). The disconnect of the test above
/// removes every booking of its connection itself, so only this one shows the flow's own
/// end unbooking it.
#[test]
fn a_flow_read_alone_is_unbooked_when_its_far_end_closes() {
    let Setup { node, owner, peer, intr, conn, mut tx, rx, share } = setup();
    let in_set = || !node.lock().interrupt_flows(owner, intr).unwrap().1.is_empty();
    let booked = || !node.lock().interrupts[&intr].owner_flows.is_empty();
    let frame = BulkFrame::trigger(conn);
    let (mem, bytes) = (Counted::default(), AtomicU64::new(0));
    std::thread::scope(|sc| {
        let server = sc.spawn(|| serve_shared(9, &bytes, rx, conn, &mem, Box::new(share)));
        tx.write_all(&frame.as_bytes()[..BULK_FRAME / 2]).unwrap();
        assert!(wait_for(|| !in_set()), "the split frame's flow stayed in the owner's set");
        assert!(booked(), "taking the flow to read alone forgot its booking");
        // The rest of the frame, then the far end's close.
        tx.write_all(&frame.as_bytes()[BULK_FRAME / 2..]).unwrap();
        drop(tx);
        assert!(wait_for(|| server.is_finished()), "the thread outlived the far end's close");
    });
    assert_eq!(mem.count(), 1, "the frame split across the take was not served whole");
    assert!(!booked(), "the booking outlived the flow");
    let _ = node.lock().disconnect_interrupt(peer, conn);
}
