//! The bytes of RMA one link keeps in flight at once.
//!
//! A provider carries a link's messages and its RMA on one connection, in order (the `tcp`
//! provider: one stream per pair of endpoints; `ofi_rxm` over verbs: one queue pair). A
//! heartbeat, or its answer, sent while a transfer's data is queued waits behind all of it:
//! with the whole of a 16 MiB transfer posted at once, a loaded machine took 170 ms to drain
//! it, past the three 50 ms heartbeat periods after which the link is *not operational*, and
//! the link flapped (`Up -> NotOperational -> Up`) on a link that was only busy, failing the
//! transfers waiting on it. A transfer therefore posts its pieces ([`CHUNK`]) only while the
//! link has less than [`WINDOW`] bytes in flight: a control message waits behind that much
//! at most. A piece's bytes are given back by the progress thread when its completion comes
//! (not when its transfer's waiter reads it), so a transfer waiting for room never waits on
//! a waiter that has not run yet.

use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// The bytes of one `fi_write` / `fi_read`.
pub(super) const CHUNK: usize = 1 << 20;
/// The bytes of RMA a link keeps in flight at most (two pieces: one completing while the
/// next moves).
pub(super) const WINDOW: usize = 2 * CHUNK;

/// A link's bytes in flight (see the module's documentation).
#[derive(Debug)]
pub(super) struct Window {
    used: Mutex<usize>,
    freed: Condvar,
    cap: usize,
}

impl Window {
    /// A window of `cap` bytes, none in flight.
    pub(super) fn new(cap: usize) -> Window {
        Window { used: Mutex::new(0), freed: Condvar::new(), cap }
    }

    /// Take `n` bytes: at once when they fit (or when nothing is in flight: a piece larger
    /// than the window still goes, alone), else once enough come back. `give_up` is asked
    /// every 50 ms of waiting (the link went down, the transfer's patience ran out): `false`
    /// then, nothing taken.
    pub(super) fn take(&self, n: usize, mut give_up: impl FnMut() -> bool) -> bool {
        let mut used = self.used.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if *used == 0 || *used + n <= self.cap {
                *used += n;
                return true;
            }
            if give_up() {
                return false;
            }
            used =
                self.freed.wait_timeout(used, Duration::from_millis(50)).unwrap_or_else(|p| p.into_inner()).0;
        }
    }

    /// Give back `n` bytes (a piece completed, or was not posted after all).
    pub(super) fn give(&self, n: usize) {
        let mut used = self.used.lock().unwrap_or_else(|p| p.into_inner());
        *used = used.saturating_sub(n);
        drop(used);
        self.freed.notify_all();
    }

    /// The link's connection went: nothing of it is in flight any more (a completion of
    /// the old connection that still comes gives back at most what was taken since).
    pub(super) fn reset(&self) {
        *self.used.lock().unwrap_or_else(|p| p.into_inner()) = 0;
        self.freed.notify_all();
    }

    /// The bytes in flight.
    #[cfg(test)]
    pub(super) fn in_flight(&self) -> usize {
        *self.used.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn pieces_wait_for_room_and_one_larger_than_the_window_goes_alone() {
        let w = Arc::new(Window::new(2 * CHUNK));
        assert!(w.take(CHUNK, || panic!("room for the first")));
        assert!(w.take(CHUNK, || panic!("room for the second")));
        // Full: a third piece waits until the progress thread gives one back.
        let giver = {
            let w = w.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(100));
                w.give(CHUNK);
            })
        };
        assert!(w.take(CHUNK, || false), "room came back");
        giver.join().unwrap();
        assert_eq!(w.in_flight(), 2 * CHUNK);
        // Still full and the link is gone: given up, nothing taken.
        let mut asked = 0;
        assert!(!w.take(CHUNK, || {
            asked += 1;
            asked > 2
        }));
        assert_eq!(w.in_flight(), 2 * CHUNK);
        // The connection went: empty, and a piece larger than the window goes alone.
        w.reset();
        assert!(w.take(3 * CHUNK, || panic!("nothing in flight")));
        w.give(3 * CHUNK);
        // A late completion of the old connection gives back no more than is in flight.
        w.give(CHUNK);
        assert_eq!(w.in_flight(), 0);
    }
}
