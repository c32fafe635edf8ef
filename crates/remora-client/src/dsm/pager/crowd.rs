//! Whether programs that never yield hold the cores (`CROWDED`, `CROWDED_LOOKS` in
//! `dsm/mod.rs`): a spinning pager kept from a core that long at most of its looks stops
//! spinning for a while and ticks at nice -20 instead. A long wait among many short ones is
//! another program's time slice on a shared machine: ticking then would make a ping-pong
//! several times slower for the whole while (140 µs one-way instead of 19 µs on one core).

use super::super::{CROWDED, CROWDED_LOOKS};
use std::time::{Duration, Instant};

/// How long the pager stops spinning once the cores are found crowded; twice as long as the
/// last time (up to [`CROWDED_MOST`]) when they are found crowded again right after.
const CROWDED_FOR: Duration = Duration::from_millis(50);
const CROWDED_MOST: Duration = Duration::from_secs(1);
/// The looks counted together start at a long wait and end this long after it.
const WINDOW: Duration = Duration::from_millis(20);

/// What the pager's spins found of the cores.
#[derive(Debug, Default)]
pub(super) struct Crowd {
    /// When the first long wait of the looks counted now came.
    since: Option<Instant>,
    /// Looks since then that waited longer than [`CROWDED`] for the core, and the others.
    long: u32,
    short: u32,
    /// Until when the pager does not spin, and for how long it did not last time.
    until: Option<Instant>,
    span: Duration,
}

impl Crowd {
    /// Whether the cores count as crowded at `now` (the pager then does not spin).
    pub(super) fn crowded(&self, now: Instant) -> bool {
        self.until.is_some_and(|u| now < u)
    }

    /// A look of a spin gave the core away and got it back after `waited`, at `now`.
    /// Pollers that never yield keep every look waiting (and end each spin with one long
    /// look, so rests between spins do not count); a busy program that merely had its
    /// time slice delays one look among many.
    pub(super) fn yielded(&mut self, waited: Duration, now: Instant) {
        if self.since.is_some_and(|s| now.saturating_duration_since(s) > WINDOW) {
            *self = Crowd { until: self.until, span: self.span, ..Crowd::default() };
        }
        if waited > CROWDED {
            self.since.get_or_insert(now);
            self.long += 1;
        } else if self.since.is_some() {
            self.short += 1;
        }
        if self.long >= CROWDED_LOOKS && self.long > self.short {
            // Found crowded again within the last span after the last ended: longer.
            let again = self.until.is_some_and(|u| now.saturating_duration_since(u) < self.span);
            let span = if again { (self.span * 2).min(CROWDED_MOST) } else { CROWDED_FOR };
            *self = Crowd { until: Some(now + span), span, ..Crowd::default() };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LONG: Duration = Duration::from_millis(3);
    const SHORT: Duration = Duration::from_micros(2);

    #[test]
    fn long_waits_among_short_ones_are_no_crowd() {
        let (mut c, t) = (Crowd::default(), Instant::now());
        c.yielded(LONG, t);
        assert!(!c.crowded(t), "one long wait alone");
        for _ in 0..5 {
            c.yielded(SHORT, t);
        }
        for _ in 1..CROWDED_LOOKS {
            c.yielded(LONG, t);
        }
        assert!(!c.crowded(t), "short waits between the long ones");
        // Long waits far apart are counted apart.
        let mut c = Crowd::default();
        for i in 0..4 {
            c.yielded(LONG, t + WINDOW * 2 * i);
            assert!(!c.crowded(t + WINDOW * 2 * i));
        }
    }

    #[test]
    fn long_waits_at_most_looks_are_a_crowd_for_a_while() {
        let (mut c, t) = (Crowd::default(), Instant::now());
        for _ in 0..CROWDED_LOOKS {
            assert!(!c.crowded(t));
            c.yielded(LONG, t);
        }
        assert!(c.crowded(t));
        assert!(c.crowded(t + CROWDED_FOR / 2));
        assert!(!c.crowded(t + CROWDED_FOR));
        // Again right after it ended: twice as long.
        let t2 = t + CROWDED_FOR;
        for _ in 0..CROWDED_LOOKS {
            c.yielded(LONG, t2);
        }
        assert!(c.crowded(t2 + CROWDED_FOR));
        assert!(!c.crowded(t2 + CROWDED_FOR * 2));
        // Long after: the first span again.
        let t3 = t2 + CROWDED_MOST * 2;
        for _ in 0..CROWDED_LOOKS {
            c.yielded(LONG, t3);
        }
        assert!(c.crowded(t3));
        assert!(!c.crowded(t3 + CROWDED_FOR));
    }
}
