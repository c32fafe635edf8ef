//! Connections the daemon reported lost, as a session's holders ask: once per call for most
//! ([`Session::lost`], [`Session::any_lost`]), on every access for a holder on a hot path (an
//! RSM `put`), which remembers what it last learned ([`LostSeen`], [`Session::lost_seen`]) so
//! that the loss of another connection of the session does not make it take the lock on every
//! access from then on.

use crate::{EventState, Session};
use remora_proto::LostReason;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// What one holder of a connection last learned of its loss: the session's count of loss
/// batches at which the connection was found not lost, or why it is lost (a loss is for
/// good). Start it at its default, one per connection.
#[derive(Debug, Default)]
pub struct LostSeen {
    /// The batch count at which the connection was last found not lost.
    clear_at: AtomicU64,
    /// Why it is lost, once found lost.
    reason: OnceLock<LostReason>,
}

impl EventState {
    /// The lookup of [`Session::lost_seen`].
    fn lost_seen(&self, conn: u64, seen: &LostSeen) -> Option<LostReason> {
        let batches = self.lost_batches.load(Ordering::Acquire);
        if batches == seen.clear_at.load(Ordering::Relaxed) {
            // Not lost in any batch up to this one (0: none lost at all).
            return None;
        }
        if let Some(r) = seen.reason.get() {
            return Some(*r);
        }
        // The count was read before the lock: the map holds at least its batches, so a
        // connection not in it was not lost in them.
        let r = self.lost.lock().unwrap_or_else(|p| p.into_inner()).get(&conn).copied();
        match r {
            Some(r) => Some(*seen.reason.get_or_init(|| r)),
            None => {
                // A later count stored by another thread is as true: keep the later.
                seen.clear_at.fetch_max(batches, Ordering::Relaxed);
                None
            }
        }
    }
}

impl Session {
    /// Whether the daemon has reported connection `conn` lost, and why.
    pub fn lost(&self, conn: u64) -> Option<LostReason> {
        // Counted under the lock, after every connection of the same batch of events: a
        // thread that finds the count moved and takes the lock sees them all.
        if self.state.lost_batches.load(Ordering::Acquire) == 0 {
            return None;
        }
        self.state.lost.lock().unwrap_or_else(|p| p.into_inner()).get(&conn).copied()
    }

    /// [`Session::lost`] for a holder of `conn` that asks on every access: `seen` (the
    /// holder's, one per connection) remembers the answer, and the session's lock is taken
    /// only when a batch of losses came since it was last asked. The same answers as
    /// [`Session::lost`]: a batch of losses is seen all at once.
    pub fn lost_seen(&self, conn: u64, seen: &LostSeen) -> Option<LostReason> {
        self.state.lost_seen(conn, seen)
    }

    /// Whether the daemon has reported any connection of this session lost, and why: for a
    /// session of one connection (a SCIF endpoint's), which does not know the daemon's
    /// handle of it.
    pub fn any_lost(&self) -> Option<LostReason> {
        if self.state.lost_batches.load(Ordering::Acquire) == 0 {
            return None;
        }
        self.state.lost.lock().unwrap_or_else(|p| p.into_inner()).values().next().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use remora_proto::Event;

    fn lost(conn: u64) -> Event {
        Event::ConnectionLost { conn, reason: LostReason::OwnerGone }
    }

    #[test]
    fn a_holder_asks_the_map_only_after_a_new_batch_and_keeps_a_loss() {
        let st = EventState::default();
        let (one, two) = (LostSeen::default(), LostSeen::default());
        assert_eq!(st.lost_seen(2, &two), None);

        st.mark(&[lost(1)]);
        assert_eq!(st.lost_seen(1, &one), Some(LostReason::OwnerGone));
        assert_eq!(st.lost_seen(2, &two), None);
        assert_eq!(two.clear_at.load(Ordering::Relaxed), 1);

        // An entry put in the map behind the count's back: the holder of 2 does not look
        // at the map again while the count stands (the fast path), ...
        st.lost.lock().unwrap().insert(2, LostReason::NodeGone);
        assert_eq!(st.lost_seen(2, &two), None);
        // ... and does at the next batch, whatever it holds.
        st.mark(&[lost(3)]);
        assert_eq!(st.lost_seen(2, &two), Some(LostReason::NodeGone));

        // A loss is kept by its holder: no map lookup for it any more.
        st.lost.lock().unwrap().clear();
        st.mark(&[lost(4)]);
        assert_eq!(st.lost_seen(2, &two), Some(LostReason::NodeGone));
        assert_eq!(st.lost_seen(1, &one), Some(LostReason::OwnerGone));
    }

    #[test]
    fn a_batch_is_one_count_and_is_seen_whole() {
        let st = EventState::default();
        let (five, six) = (LostSeen::default(), LostSeen::default());
        st.mark(&[lost(5), Event::ConnectionLink { conn: 7, operational: false }, lost(6)]);
        assert_eq!(st.lost_batches.load(Ordering::Relaxed), 1);
        assert_eq!(st.lost_seen(5, &five), Some(LostReason::OwnerGone));
        assert_eq!(st.lost_seen(6, &six), Some(LostReason::OwnerGone));
        // Events that lose nothing leave the count alone.
        st.mark(&[Event::ConnectionLink { conn: 7, operational: true }]);
        assert_eq!(st.lost_batches.load(Ordering::Relaxed), 1);
    }
}
