//! A flow to an interrupt that its owner reads too, as the transport's thread sees it
//! ([`SharedFlow`]): it keeps away while the owner reads, and gives the flow back when it
//! ends.

use crate::core::SharedBooking;
use crate::transport::SharedFlow;
use crate::Node;
use std::sync::Weak;
use std::time::Duration;

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

    /// Unbooked: the page's generation of the set moves on, which an owner that waits
    /// sees before it reads any flow again (`remora-sisci`'s `interrupt/owned.rs`).
    fn leave(&mut self) {
        if let Some(node) = self.node.upgrade() {
            node.lock().unshare_flow(self.booking.intr, self.booking.id);
        }
    }
}

impl Drop for OwnerFlow {
    fn drop(&mut self) {
        if let Some(node) = self.node.upgrade() {
            node.lock().unshare_flow(self.booking.intr, self.booking.id);
        }
    }
}
