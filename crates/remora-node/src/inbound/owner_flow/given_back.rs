//! A flow given back (its [`OwnerFlow`] dropped, as the shared reader does before it ends
//! the flow): the owner reads none of it from then on.

use super::OwnerFlow;
use crate::core::SharedBooking;
use remora_sys::intr::IntrPage;
use std::sync::Weak;
use std::time::Duration;

/// The set's generation moves on when the flow is given back, even with the node gone,
/// and not while the owner holds the reader lock (an owner that checked the generation
/// under the lock reads on until it lets go; the flow's end then drains it). Before, a
/// flow given back without the node left the generation as it was, and the owner read
/// the flow while its end drained it.
#[test]
fn a_flow_given_back_moves_the_set_on_under_the_lock() {
    let memfd = IntrPage::create("node-owner-flow-given-back").unwrap();
    let page = || IntrPage::open(&memfd, remora_sys::sync::EventFd::new().unwrap()).unwrap();
    let owner = page();
    let gen = owner.flows_generation();
    let flow = OwnerFlow {
        node: Weak::new(),
        booking: SharedBooking { intr: 1, id: 2, joined: gen, page: page() },
        polls: 0,
    };
    // The owner holds the lock while the flow is given back.
    assert!(owner.try_read_lock());
    let dropper = std::thread::spawn(move || drop(flow));
    std::thread::sleep(Duration::from_millis(3));
    // The drop waits for the lock (some 10 ms at least before it moves on without it: a
    // thread that was that late under load is not checked).
    if !dropper.is_finished() {
        assert_eq!(owner.flows_generation(), gen, "moved on while the owner held the lock");
    }
    owner.read_unlock();
    dropper.join().unwrap();
    assert_ne!(owner.flows_generation(), gen, "a flow given back left the set as it was");
    // The lock is free again.
    assert!(owner.try_read_lock());
    owner.read_unlock();
}
