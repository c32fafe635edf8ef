//! When a pager spins (looks at its maps without sleeping, yielding the core between looks).
//!
//! How long, after a lone change: `REMORA_DSM_SPIN_US`, or, when the last two lone changes
//! of the map came at most [`SPIN_GAP`] apart, one and a half times their gap. In a
//! ping-pong the next change comes one round trip later; once a loaded machine makes the
//! round trip longer than the spin, the pager would tick instead (timer wake-ups, each late
//! on a busy core), which makes the round trip longer still: the ping-pong stayed 10-17
//! times raw TCP instead of 3 in the benchmark's loaded runs.
//!
//! Not at all while programs that never yield hold the cores (`CROWDED`, `CROWDED_LOOKS`
//! in `dsm/mod.rs`): a spinning pager kept from a core that long at most of its looks
//! stops spinning for a while and ticks at nice -20 instead. A long wait among many short
//! ones is another program's time slice on a shared machine: ticking then would make a
//! ping-pong several times slower for the whole while (140 µs one-way instead of 19 µs on
//! one core).

use super::super::{CROWDED, CROWDED_LOOKS};
use super::PMap;
use std::time::{Duration, Instant};

/// Lone changes of a map at most this far apart make the spin after the next one last until
/// about when the one after would come.
const SPIN_GAP: Duration = Duration::from_micros(500);

/// How long the pager spins after a lone change of `m` found at `t`, at least `spin`.
pub(super) fn after_lone(m: &mut PMap, spin: Duration, t: Instant) -> Duration {
    spin_for(&mut m.last_lone, spin, t)
}

/// [`after_lone`] with the map's last lone change `last` (set to `t`).
fn spin_for(last: &mut Option<Instant>, spin: Duration, t: Instant) -> Duration {
    let gap = last.replace(t).map(|l| t.saturating_duration_since(l));
    let longer = gap.filter(|g| *g <= SPIN_GAP).map_or(Duration::ZERO, |g| g + g / 2);
    spin.max(longer)
}

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
    fn a_spin_lasts_until_about_the_next_lone_change() {
        let spin = Duration::from_micros(50);
        let (mut last, t) = (None, Instant::now());
        assert_eq!(spin_for(&mut last, spin, t), spin, "the first change");
        let us = Duration::from_micros;
        assert_eq!(spin_for(&mut last, spin, t + us(20)), spin, "changes closer than the spin");
        assert_eq!(spin_for(&mut last, spin, t + us(220)), us(300), "a round trip of 200 µs");
        assert_eq!(spin_for(&mut last, spin, t + us(220) + SPIN_GAP), SPIN_GAP * 3 / 2);
        let far = t + us(221) + SPIN_GAP * 2;
        assert_eq!(spin_for(&mut last, spin, far), spin, "changes far apart");
    }

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
