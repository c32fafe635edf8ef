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
//! a waiter that has not run yet; or, when its connection is unrouted before that (its
//! completion may then never come), by `Fabric::forget_connection`.

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
    state: Mutex<State>,
    freed: Condvar,
    cap: usize,
}

#[derive(Debug, Default)]
struct State {
    /// Bytes taken and not given back.
    used: usize,
    /// The link's connection: [`Window::reset`] counts one up, and what was taken under an
    /// older one is neither given back nor waited for any more.
    gen: u64,
    /// The most bytes ever in flight at once.
    peak: usize,
}

impl Window {
    /// A window of `cap` bytes, none in flight.
    pub(super) fn new(cap: usize) -> Window {
        Window { state: Mutex::new(State::default()), freed: Condvar::new(), cap }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Take `n` bytes: at once when they fit (or when nothing is in flight: a piece larger
    /// than the window still goes, alone), else once enough come back. The generation they
    /// were taken under comes back, for [`Window::give`]. `None`, nothing taken: `give_up`
    /// (asked every 50 ms of waiting: the link went down, the transfer's patience ran out)
    /// said so, or the link's connection went meanwhile ([`Window::reset`]; the transfer
    /// began on the old one).
    pub(super) fn take(&self, n: usize, mut give_up: impl FnMut() -> bool) -> Option<u64> {
        let mut s = self.lock();
        let gen = s.gen;
        loop {
            if s.gen != gen {
                return None;
            }
            if s.used == 0 || s.used + n <= self.cap {
                s.used += n;
                s.peak = s.peak.max(s.used);
                return Some(gen);
            }
            if give_up() {
                return None;
            }
            s = self.freed.wait_timeout(s, Duration::from_millis(50)).unwrap_or_else(|p| p.into_inner()).0;
        }
    }

    /// Give back `n` bytes taken under generation `gen` (a piece completed, or was not
    /// posted after all); of an older generation (a completion of a connection gone since):
    /// nothing, the window was emptied when it went.
    pub(super) fn give(&self, n: usize, gen: u64) {
        let mut s = self.lock();
        if s.gen != gen {
            return;
        }
        s.used = s.used.saturating_sub(n);
        drop(s);
        self.freed.notify_all();
    }

    /// The link's connection went: nothing of it is in flight any more, and transfers
    /// waiting for room fail (they would post to the old connection).
    pub(super) fn reset(&self) {
        let mut s = self.lock();
        s.used = 0;
        s.gen += 1;
        drop(s);
        self.freed.notify_all();
    }

    /// The most bytes the link ever had in flight at once.
    pub(super) fn peak(&self) -> usize {
        self.lock().peak
    }

    /// The bytes in flight.
    #[cfg(test)]
    pub(super) fn in_flight(&self) -> usize {
        self.lock().used
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn pieces_wait_for_room_and_one_larger_than_the_window_goes_alone() {
        let w = Arc::new(Window::new(2 * CHUNK));
        let g = w.take(CHUNK, || panic!("room for the first")).unwrap();
        assert_eq!(w.take(CHUNK, || panic!("room for the second")), Some(g));
        // Full: a third piece waits until the progress thread gives one back.
        let giver = {
            let w = w.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(100));
                w.give(CHUNK, g);
            })
        };
        assert_eq!(w.take(CHUNK, || false), Some(g), "room came back");
        giver.join().unwrap();
        assert_eq!(w.in_flight(), 2 * CHUNK);
        assert_eq!(w.peak(), 2 * CHUNK);
        // Still full and the link is gone: given up, nothing taken.
        let mut asked = 0;
        assert!(w
            .take(CHUNK, || {
                asked += 1;
                asked > 2
            })
            .is_none());
        assert_eq!(w.in_flight(), 2 * CHUNK);
        // The connection went: empty, and a piece larger than the window goes alone.
        w.reset();
        let g2 = w.take(3 * CHUNK, || panic!("nothing in flight")).unwrap();
        assert_ne!(g2, g);
        assert_eq!(w.peak(), 3 * CHUNK);
        w.give(3 * CHUNK, g2);
        assert_eq!(w.in_flight(), 0);
    }

    /// A transfer waiting for room when its link's connection goes fails, instead of
    /// finding the emptied window and posting to the old connection.
    #[test]
    fn a_reset_fails_the_transfer_waiting_for_room() {
        let w = Arc::new(Window::new(2 * CHUNK));
        let g = w.take(2 * CHUNK, || panic!("room")).unwrap();
        // `give_up` is asked only once the waiter found the window full and is about to
        // wait (under the window's lock, which it leaves only in its wait): the reset comes
        // while it waits.
        let (waiting, is_waiting) = std::sync::mpsc::channel();
        let waiter = {
            let w = w.clone();
            std::thread::spawn(move || {
                w.take(CHUNK, || {
                    let _ = waiting.send(());
                    false
                })
            })
        };
        is_waiting.recv().unwrap();
        w.reset();
        assert_eq!(waiter.join().unwrap(), None, "the waiter was woken by the reset and failed");
        assert_ne!(w.take(CHUNK, || panic!("empty")), Some(g), "a new generation");
        w.reset();
        assert_eq!(w.in_flight(), 0);
    }

    /// A completion of the old connection, coming after the new one took its bytes, leaves
    /// the new connection's count alone.
    #[test]
    fn a_late_completion_of_the_old_connection_gives_nothing_back() {
        let w = Window::new(2 * CHUNK);
        let old = w.take(2 * CHUNK, || panic!("room")).unwrap();
        w.reset();
        let new = w.take(2 * CHUNK, || panic!("room after the reset")).unwrap();
        w.give(CHUNK, old);
        w.give(2 * CHUNK, old);
        assert_eq!(w.in_flight(), 2 * CHUNK, "the old connection's completions changed nothing");
        let mut asked = 0;
        assert!(
            w.take(CHUNK, || {
                asked += 1;
                asked > 1
            })
            .is_none(),
            "still full"
        );
        w.give(2 * CHUNK, new);
        assert_eq!(w.in_flight(), 0);
    }
}
