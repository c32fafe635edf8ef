//! Whether programs that never yield hold the cores (`CROWDED`, `CROWDED_STREAK` in
//! `dsm/mod.rs`): a spinning pager that is kept from a core that long at every look stops
//! spinning for a while and ticks at nice -20 instead. One long wait alone is another
//! program's time slice on a shared machine: ticking then would make a ping-pong several
//! times slower for the whole while (140 µs one-way instead of 19 µs on one core).

use super::super::{CROWDED, CROWDED_STREAK};
use std::time::{Duration, Instant};

/// How long the pager stops spinning once the cores are found crowded.
const CROWDED_FOR: Duration = Duration::from_millis(50);

/// What the pager's spins found of the cores.
#[derive(Debug, Default)]
pub(super) struct Crowd {
    /// Looks in a row that each waited longer than [`CROWDED`] for the core.
    kept: u32,
    /// Until when the pager does not spin.
    until: Option<Instant>,
}

impl Crowd {
    /// Whether the cores count as crowded at `now` (the pager then does not spin).
    pub(super) fn crowded(&self, now: Instant) -> bool {
        self.until.is_some_and(|u| now < u)
    }

    /// A look of a spin gave the core away and got it back after `waited`, at `now`.
    pub(super) fn yielded(&mut self, waited: Duration, now: Instant) {
        self.kept = if waited > CROWDED { self.kept + 1 } else { 0 };
        if self.kept >= CROWDED_STREAK {
            self.kept = 0;
            self.until = Some(now + CROWDED_FOR);
        }
    }

    /// The pager stopped spinning: a later spin starts counting afresh.
    pub(super) fn rested(&mut self) {
        self.kept = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LONG: Duration = Duration::from_millis(3);
    const SHORT: Duration = Duration::from_micros(2);

    #[test]
    fn one_long_wait_is_not_a_crowd() {
        let (mut c, t) = (Crowd::default(), Instant::now());
        c.yielded(LONG, t);
        assert!(!c.crowded(t));
        c.yielded(SHORT, t);
        c.yielded(LONG, t);
        assert!(!c.crowded(t), "a short wait between two long ones starts the count again");
        c.rested();
        c.yielded(LONG, t);
        assert!(!c.crowded(t), "a rest between spins starts the count again");
    }

    #[test]
    fn long_waits_in_a_row_are_a_crowd_for_a_while() {
        let (mut c, t) = (Crowd::default(), Instant::now());
        for _ in 0..CROWDED_STREAK {
            assert!(!c.crowded(t));
            c.yielded(LONG, t);
        }
        assert!(c.crowded(t));
        assert!(c.crowded(t + CROWDED_FOR / 2));
        assert!(!c.crowded(t + CROWDED_FOR));
    }
}
