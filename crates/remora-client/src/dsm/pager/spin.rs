//! When a pager spins (looks at its maps without sleeping, yielding the core between looks).
//!
//! How long, after a lone change: `REMORA_DSM_SPIN_US`, or, when the last two lone changes
//! of the map came at most [`SPIN_GAP`] apart, one and a half times their gap, at most
//! [`LONGER_MOST`] times `REMORA_DSM_SPIN_US`. In a ping-pong the next change comes one
//! round trip later; once a loaded machine makes the round trip longer than the spin, the
//! pager would tick instead (timer wake-ups, each late on a busy core), which makes the
//! round trip longer still: the ping-pong stayed 10-17 times raw TCP instead of 3 in the
//! benchmark's loaded runs.
//!
//! Never for long without a rest ([`Budget`]): the pager cannot tell a ping-pong from a
//! program that stores a heartbeat every few hundred µs, whose every store would come
//! within the spin after the last, so that the pager would spin a core forever. After
//! [`SPIN_BUDGET`] of spinning without a rest, spins are `REMORA_DSM_SPIN_US` only for a
//! while ([`REST`], twice as long when the budget is spent again right after, up to
//! [`REST_MOST`]). Lone changes closer together than even the plain spin keep it spinning,
//! as ticking instead would cost about as much (a look every `REMORA_DSM_FLUSH_MIN_US`).
//!
//! Not at all while programs that never yield hold the cores (`CROWDED`, `CROWDED_LOOKS`
//! in `dsm/mod.rs`): a spinning pager kept from a core that long at most of its looks, or
//! for most of the time since the first such look, stops spinning for a while and ticks at
//! nice -20 instead. A long wait among many short ones is another program's time slice on a
//! shared machine: ticking then would make a ping-pong several times slower for the whole
//! while (140 µs one-way instead of 19 µs on one core).

use super::super::{CROWDED, CROWDED_LOOKS};
use super::PMap;
use std::time::{Duration, Instant};

/// Lone changes of a map at most this far apart make the spin after the next one last until
/// about when the one after would come.
const SPIN_GAP: Duration = Duration::from_micros(500);
/// The longer spin is at most this many times `REMORA_DSM_SPIN_US`.
const LONGER_MOST: u32 = 15;

/// How long the pager spins after a lone change of `m` found at `t`: at least `spin`,
/// longer (up to [`LONGER_MOST`] × `spin`) when `longer` and lone changes come a little
/// further apart than `spin`.
pub(super) fn after_lone(m: &mut PMap, spin: Duration, longer: bool, t: Instant) -> Duration {
    spin_for(&mut m.last_lone, spin, longer, t)
}

/// [`after_lone`] with the map's last lone change `last` (set to `t`).
fn spin_for(last: &mut Option<Instant>, spin: Duration, longer: bool, t: Instant) -> Duration {
    let gap = last.replace(t).map(|l| t.saturating_duration_since(l));
    let ext = gap.filter(|g| longer && *g <= SPIN_GAP).map_or(Duration::ZERO, |g| g + g / 2);
    spin.max(ext.min(spin * LONGER_MOST))
}

/// Spinning without a rest this long spends the pager's budget.
const SPIN_BUDGET: Duration = Duration::from_millis(10);
/// How long spins are plain once the budget is spent; twice as long as the last time (up
/// to [`REST_MOST`]) when it is spent again within that long after the last while ended.
const REST: Duration = Duration::from_millis(50);
const REST_MOST: Duration = Duration::from_secs(1);

/// How long the pager has spun without a rest, and what it may spin now.
#[derive(Debug, Default)]
pub(super) struct Budget {
    /// When the pager's spinning without a rest began.
    since: Option<Instant>,
    /// Until when spins are plain, and how long the last such while was.
    until: Option<Instant>,
    span: Duration,
}

impl Budget {
    /// Whether a spin may last longer than `REMORA_DSM_SPIN_US` at `now`.
    pub(super) fn longer(&self, now: Instant) -> bool {
        self.until.is_none_or(|u| now >= u)
    }

    /// A look of the pager's loop at `now`: spinning (no sleep) or not (a rest).
    pub(super) fn look(&mut self, spinning: bool, now: Instant) {
        if !spinning {
            self.since = None;
            return;
        }
        let since = *self.since.get_or_insert(now);
        if now.saturating_duration_since(since) <= SPIN_BUDGET {
            return;
        }
        self.since = Some(now);
        if self.until.is_some_and(|u| now < u) {
            return;
        }
        // Spent again within the last span after the last while ended: longer.
        let again = self.until.is_some_and(|u| now.saturating_duration_since(u) < self.span);
        self.span = if again { (self.span * 2).min(REST_MOST) } else { REST };
        self.until = Some(now + self.span);
    }
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
    /// When the first long wait of the looks counted now began.
    since: Option<Instant>,
    /// Looks since then that waited longer than [`CROWDED`] for the core, and the others.
    long: u32,
    short: u32,
    /// How long the looks since then waited in all.
    waited: Duration,
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
    /// look, so rests between spins do not count), or keep the pager from a core most of
    /// the time even with a few short looks between; a busy program that merely had its
    /// time slice delays one look among many, spread over a longer time.
    pub(super) fn yielded(&mut self, waited: Duration, now: Instant) {
        if self.since.is_some_and(|s| now.saturating_duration_since(s) > WINDOW) {
            *self = Crowd { until: self.until, span: self.span, ..Crowd::default() };
        }
        if waited > CROWDED {
            self.since.get_or_insert(now.checked_sub(waited).unwrap_or(now));
            self.long += 1;
        } else if self.since.is_some() {
            self.short += 1;
        }
        let Some(since) = self.since else { return };
        self.waited += waited;
        let most_time = self.waited * 2 > now.saturating_duration_since(since);
        if self.long >= CROWDED_LOOKS && (self.long > self.short || most_time) {
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
    const US: fn(u64) -> Duration = Duration::from_micros;

    #[test]
    fn a_spin_lasts_until_about_the_next_lone_change() {
        let spin = US(50);
        let (mut last, t) = (None, Instant::now());
        assert_eq!(spin_for(&mut last, spin, true, t), spin, "the first change");
        assert_eq!(spin_for(&mut last, spin, true, t + US(20)), spin, "changes closer than the spin");
        assert_eq!(spin_for(&mut last, spin, true, t + US(220)), US(300), "a round trip of 200 µs");
        assert_eq!(spin_for(&mut last, spin, true, t + US(220) + SPIN_GAP), SPIN_GAP * 3 / 2);
        let far = t + US(221) + SPIN_GAP * 2;
        assert_eq!(spin_for(&mut last, spin, true, far), spin, "changes far apart");
        assert_eq!(spin_for(&mut last, spin, false, far + US(200)), spin, "the budget spent");
    }

    #[test]
    fn the_longer_spin_is_tied_to_the_setting() {
        let (mut last, t) = (None, Instant::now());
        spin_for(&mut last, US(5), true, t);
        assert_eq!(spin_for(&mut last, US(5), true, t + US(200)), US(5) * LONGER_MOST);
        assert_eq!(spin_for(&mut last, Duration::ZERO, true, t + US(400)), Duration::ZERO, "0: never");
    }

    /// Simulates a pager watching a program that makes a lone store every `every` for
    /// `total`, looking every 10 µs: what share of the last `tail` it spent spinning, and
    /// its longest spinning without a rest.
    fn periodic_writer(every: Duration, total: Duration, tail: Duration) -> (f64, Duration) {
        let (spin, step, t0) = (US(50), US(10), Instant::now());
        let (mut b, mut last, mut spin_until) = (Budget::default(), None, None::<Instant>);
        let (mut next_store, mut spun, mut run, mut longest) = (t0, Duration::ZERO, None, Duration::ZERO);
        let mut now = t0;
        while now < t0 + total {
            let spinning = spin_until.is_some_and(|u| now < u);
            b.look(spinning, now);
            if spinning {
                let s = *run.get_or_insert(now);
                longest = longest.max(now - s + step);
                if now >= t0 + total - tail {
                    spun += step;
                }
            } else {
                run = None;
            }
            if now >= next_store {
                next_store += every;
                spin_until = Some(now + spin_for(&mut last, spin, b.longer(now), now));
            }
            now += step;
        }
        (spun.as_secs_f64() / tail.as_secs_f64(), longest)
    }

    #[test]
    fn a_periodic_writers_spinning_ends() {
        // A heartbeat every 490 µs: each store comes within the longer spin after the last.
        let (share, longest) = periodic_writer(US(490), Duration::from_secs(5), Duration::from_secs(3));
        // The budget, and the longer spin open when it was spent.
        assert!(longest <= SPIN_BUDGET + US(50) * LONGER_MOST, "spun {longest:?} without a rest");
        // Plain spins (50 µs of every 490) and a budget now and then.
        assert!(share < 0.15, "spinning {:.0}% of the time", share * 100.0);
    }

    #[test]
    fn a_spent_budget_rests_twice_as_long_when_spent_again_at_once() {
        let (mut b, t) = (Budget::default(), Instant::now());
        let spend = |b: &mut Budget, t: Instant| {
            b.look(true, t);
            b.look(true, t + SPIN_BUDGET + US(1));
            t + SPIN_BUDGET + US(1)
        };
        let t1 = spend(&mut b, t);
        assert!(!b.longer(t1));
        assert!(b.longer(t1 + REST));
        let mut span = REST;
        let mut t = t1 + REST;
        while span < REST_MOST {
            b.look(false, t);
            let ti = spend(&mut b, t);
            span = (span * 2).min(REST_MOST);
            assert!(!b.longer(ti + span - US(1)), "a rest of {span:?}");
            assert!(b.longer(ti + span));
            t = ti + span;
        }
        assert_eq!(span, REST_MOST);
        // A rest now and then: the first span again.
        b.look(false, t + REST_MOST * 2);
        let tl = spend(&mut b, t + REST_MOST * 2);
        assert!(b.longer(tl + REST));
    }

    /// A look that waited `waited`, `gap` after the last one ended at `*t`.
    fn look(c: &mut Crowd, t: &mut Instant, gap: Duration, waited: Duration) {
        *t += gap + waited;
        c.yielded(waited, *t);
    }

    #[test]
    fn long_waits_among_short_ones_are_no_crowd() {
        let (mut c, mut t) = (Crowd::default(), Instant::now());
        look(&mut c, &mut t, SHORT, LONG);
        assert!(!c.crowded(t), "one long wait alone");
        // Short looks over 10 ms (the pager's spins and rests) between two long ones.
        for _ in 0..5 {
            look(&mut c, &mut t, Duration::from_millis(2), SHORT);
        }
        look(&mut c, &mut t, SHORT, LONG);
        assert!(!c.crowded(t), "short waits between the long ones");
        // Long waits far apart are counted apart.
        let mut c = Crowd::default();
        for _ in 0..4 {
            look(&mut c, &mut t, WINDOW * 2, LONG);
            assert!(!c.crowded(t));
        }
    }

    #[test]
    fn the_edge_between_most_looks_and_half_of_them() {
        // Long, short, long: most looks waited (the short ones spread over time).
        let (mut c, mut t) = (Crowd::default(), Instant::now());
        look(&mut c, &mut t, SHORT, LONG);
        look(&mut c, &mut t, Duration::from_millis(4), SHORT);
        look(&mut c, &mut t, Duration::from_millis(4), LONG);
        assert!(c.crowded(t), "two long looks of three");
        // Long, short, short, long: half the looks, and less than half the time waited.
        let (mut c, mut t) = (Crowd::default(), Instant::now());
        look(&mut c, &mut t, SHORT, LONG);
        look(&mut c, &mut t, Duration::from_millis(4), SHORT);
        look(&mut c, &mut t, Duration::from_millis(4), SHORT);
        look(&mut c, &mut t, SHORT, LONG);
        assert!(!c.crowded(t), "6 ms waited of 14");
    }

    #[test]
    fn long_waits_most_of_the_time_are_a_crowd_whatever_the_short_ones() {
        // Long, four short ones at once, long, long: kept from a core ~9 of 9 ms.
        let (mut c, mut t) = (Crowd::default(), Instant::now());
        look(&mut c, &mut t, SHORT, LONG);
        for _ in 0..4 {
            look(&mut c, &mut t, SHORT, SHORT);
        }
        look(&mut c, &mut t, SHORT, LONG);
        assert!(c.crowded(t), "two long looks taking most of the time");
        // Just under half the time waited is no crowd; just over is.
        for (rest, crowded) in [(LONG * 2 + US(100), false), (LONG * 2 - US(100), true)] {
            let (mut c, mut t) = (Crowd::default(), Instant::now());
            look(&mut c, &mut t, SHORT, LONG);
            for _ in 0..4 {
                look(&mut c, &mut t, rest / 4, SHORT);
            }
            look(&mut c, &mut t, Duration::ZERO, LONG);
            assert_eq!(c.crowded(t), crowded, "{rest:?} of short looks between");
        }
    }

    #[test]
    fn long_waits_at_most_looks_are_a_crowd_for_a_while() {
        let (mut c, t) = (Crowd::default(), Instant::now());
        let mut tt = t;
        for _ in 0..CROWDED_LOOKS {
            assert!(!c.crowded(tt));
            look(&mut c, &mut tt, Duration::ZERO, LONG);
        }
        assert!(c.crowded(tt));
        assert!(c.crowded(tt + CROWDED_FOR / 2));
        assert!(!c.crowded(tt + CROWDED_FOR));
        // Again right after each ends: twice as long, up to CROWDED_MOST.
        let (mut span, mut t2) = (CROWDED_FOR, tt + CROWDED_FOR);
        while span < CROWDED_MOST {
            for _ in 0..CROWDED_LOOKS {
                look(&mut c, &mut t2, Duration::ZERO, LONG);
            }
            span = (span * 2).min(CROWDED_MOST);
            assert!(c.crowded(t2 + span - US(1)), "a while of {span:?}");
            assert!(!c.crowded(t2 + span));
            t2 += span;
        }
        for _ in 0..CROWDED_LOOKS {
            look(&mut c, &mut t2, Duration::ZERO, LONG);
        }
        assert!(c.crowded(t2 + CROWDED_MOST - US(1)), "the cap");
        assert!(!c.crowded(t2 + CROWDED_MOST));
        // Long after: the first span again.
        let mut t3 = t2 + CROWDED_MOST * 3;
        for _ in 0..CROWDED_LOOKS {
            look(&mut c, &mut t3, Duration::ZERO, LONG);
        }
        assert!(c.crowded(t3));
        assert!(!c.crowded(t3 + CROWDED_FOR));
    }
}
