//! A flow to an interrupt that its owner reads too, as the transport's thread sees it
//! ([`SharedFlow`]): it keeps away while the owner reads, and gives the flow back when it
//! ends.

use crate::core::SharedBooking;
use crate::transport::SharedFlow;
use crate::Node;
use std::sync::Weak;
use std::time::Duration;

/// How often a flow given back tries the reader lock (some 200 µs apart) before it moves
/// the set's generation on without it.
const LOCK_TRIES: u32 = 50;

/// A booked flow ([`crate::core::Registry::share_flow`]).
pub(super) struct OwnerFlow {
    pub(super) node: Weak<Node>,
    pub(super) booking: SharedBooking,
    /// The owner's poll count at the last look.
    pub(super) polls: u32,
}

impl SharedFlow for OwnerFlow {
    fn owner_reads(&mut self) -> bool {
        self.booking.page.owner_reads(self.booking.joined, &mut self.polls)
    }

    fn park(&self, max: Duration) {
        self.booking.page.park(max);
    }

    fn try_lock(&self) -> bool {
        self.booking.page.try_read_lock()
    }

    /// A removed interrupt's owner reads no more.
    fn abandoned(&self) -> bool {
        self.booking.page.is_removed()
    }

    fn unlock(&self) {
        self.booking.page.read_unlock();
    }

    /// Out of the owner's set: the page's generation of the set moves on, which an owner
    /// that waits sees before it reads any flow again (`remora-sisci`'s
    /// `interrupt/owned.rs`). The generation is moved here, under the reader lock, whether
    /// or not the node is still there to change the books (a node that is going away must
    /// not leave both reading). The booking stays, marked read alone
    /// (`Registry::read_flow_alone`), until the flow ends: its connection's end shuts it
    /// for writing, as it does the flows still shared, and the far end's answer ends it.
    fn leave(&mut self) {
        self.booking.page.flows_changed();
        if let Some(node) = self.node.upgrade() {
            node.lock().read_flow_alone(self.booking.intr, self.booking.id);
        }
    }
}

impl Drop for OwnerFlow {
    /// The flow is the owner's no more: the set's generation moves on under the reader
    /// lock, so an owner that waits reads none of it from then on (the flow's end drains
    /// it next). The lock is waited for a little only: an owner holds it for microseconds,
    /// and one that died holding it must not hold the end.
    fn drop(&mut self) {
        let page = &self.booking.page;
        let mut locked = page.try_read_lock();
        for _ in 0..LOCK_TRIES {
            if locked {
                break;
            }
            std::thread::sleep(Duration::from_micros(200));
            locked = page.try_read_lock();
        }
        page.flows_changed();
        // Unbooked before the lock goes (as `leave`): an owner asking for the set right
        // after must not be handed the flow back while its end drains it.
        if let Some(node) = self.node.upgrade() {
            node.lock().unshare_flow(self.booking.intr, self.booking.id);
        }
        if locked {
            page.read_unlock();
        }
    }
}

#[cfg(test)]
mod alone;
#[cfg(test)]
mod given_back;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::shared_flow::serve_shared;
    use crate::transport::shared_flow::testing::{flow_pair, wait_for, Counted};
    use remora_proto::link::{BulkFrame, BULK_FRAME};
    use remora_sys::intr::IntrPage;
    use std::io::Write;
    use std::sync::atomic::AtomicU64;
    use zerocopy::IntoBytes;

    /// A flow booked for the owner whose split frame stays: the daemon's thread takes it
    /// and the page's generation of the set moves on even though the node is gone (no
    /// `unshare_flow` can run), so an owner that holds the old set reads it no more (it
    /// sees the generation under the lock it takes, `remora-sisci`'s `interrupt/owned.rs`:
    /// checked here as it does). Once the frame's rest comes the daemon's thread serves it.
    #[test]
    fn a_flow_taken_alone_moves_the_generation_on_without_its_node() {
        let memfd = IntrPage::create("owner-flow-test").unwrap();
        let page = IntrPage::open(&memfd, remora_sys::sync::EventFd::new().unwrap()).unwrap();
        let owners = IntrPage::open(&memfd, remora_sys::sync::EventFd::new().unwrap()).unwrap();
        // Booked: the owner's set of this generation holds the flow.
        let joined = page.flows_changed();
        let share = OwnerFlow {
            node: std::sync::Weak::new(),
            booking: SharedBooking { intr: 1, id: 2, joined, page },
            polls: 0,
        };
        let (mut tx, rx) = flow_pair();
        let frame = BulkFrame::trigger(7);
        let (mem, bytes) = (Counted::default(), AtomicU64::new(0));
        std::thread::scope(|sc| {
            let server = sc.spawn(|| serve_shared(4, &bytes, rx, 7, &mem, Box::new(share)));
            tx.write_all(&frame.as_bytes()[..BULK_FRAME / 2]).unwrap();
            let moved = wait_for(|| owners.flows_generation() != joined);
            // The owner's look with the set of generation `joined`: the lock, then the
            // generation, and no read.
            let locked = wait_for(|| owners.try_read_lock());
            let owner_reads = locked && owners.flows_generation() == joined;
            if locked {
                owners.read_unlock();
            }
            tx.write_all(&frame.as_bytes()[BULK_FRAME / 2..]).unwrap();
            let served = wait_for(|| mem.count() == 1);
            drop(tx);
            server.join().unwrap();
            assert!(moved, "the generation stayed at {joined}: the owner would read the flow too");
            assert!(!owner_reads, "the owner with the old set may still read the flow");
            assert!(served, "the frame whose rest came was not served");
        });
    }
}
