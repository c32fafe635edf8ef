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
//! Never most of the time ([`Share`]): the pager cannot tell a ping-pong from a program that
//! stores a heartbeat every few hundred µs, or a flag every few µs, whose every store comes
//! within the spin after the last, so that the pager would spin a core forever. Once it has
//! spun more than [`SHARE_NUM`]/[`SHARE_DEN`] of the time lately (a leaky bucket: the time
//! spun fills it, [`SHARE_NUM`]/[`SHARE_DEN`] of all time drains it, full at [`SHARE_CAP`]),
//! it does not spin at all until the bucket is half empty; it then ticks every
//! `REMORA_DSM_FLUSH_MIN_US` to `REMORA_DSM_FLUSH_US` after a change, which keeps the flush
//! promise. Over any while T it spins at most 4/5 T + [`SHARE_CAP`]. Time a look gave the
//! core away (another thread ran) is no spinning.
//!
//! Not at all while programs that never yield hold the cores ([`Crowd`]): a spinning pager
//! kept from a core for [`CROWDED`] at [`CROWDED_LOOKS`] looks or more, most of its looks or
//! for most of the time since the first such look, stops spinning for a while
//! ([`CROWDED_FOR`], up to [`CROWDED_MOST`]) and ticks at nice -20 instead. A long wait
//! among many short ones is another program's time slice on a shared machine: ticking
//! then would make a ping-pong several times slower for the whole while (140 µs one-way
//! instead of 19 µs on one core).

use super::PMap;
use std::time::{Duration, Instant};

/// Lone changes of a map at most this far apart make the spin after the next one last until
/// about when the one after would come.
const SPIN_GAP: Duration = Duration::from_micros(500);
/// The longer spin is at most this many times `REMORA_DSM_SPIN_US`.
const LONGER_MOST: u32 = 15;

/// How long the pager spins after a lone change of `m` found at `t`: at least `spin`,
/// longer (up to [`LONGER_MOST`] × `spin`) when lone changes come a little further apart
/// than `spin`.
pub(super) fn after_lone(m: &mut PMap, spin: Duration, t: Instant) -> Duration {
    spin_for(&mut m.last_lone, spin, t)
}

/// [`after_lone`] with the map's last lone change `last` (set to `t`).
fn spin_for(last: &mut Option<Instant>, spin: Duration, t: Instant) -> Duration {
    let gap = last.replace(t).map(|l| t.saturating_duration_since(l));
    let ext = gap.filter(|g| *g <= SPIN_GAP).map_or(Duration::ZERO, |g| g + g / 2);
    spin.max(ext.min(spin * LONGER_MOST))
}

/// The share of the time the pager may spin: [`SHARE_NUM`]/[`SHARE_DEN`] (its numerator).
const SHARE_NUM: u32 = 4;
/// The denominator of that share.
const SHARE_DEN: u32 = 5;
/// How far spinning may run ahead of that share before the pager stops spinning.
const SHARE_CAP: Duration = Duration::from_millis(1);

/// How much of the time the pager has spun lately.
#[derive(Debug, Default)]
pub(super) struct Share {
    /// Time spun, less the share of all time, since the bucket was last empty.
    level: Duration,
    /// The last look, and whether the pager spun since.
    last: Option<(Instant, bool)>,
    /// Full: no spinning until the level is down to half [`SHARE_CAP`].
    full: bool,
}

impl Share {
    /// A look of the pager's loop at `now` that would spin if `wants`: whether it spins.
    pub(super) fn look(&mut self, wants: bool, now: Instant) -> bool {
        if let Some((t, spun)) = self.last {
            let dt = now.saturating_duration_since(t);
            let spun = if spun { dt } else { Duration::ZERO };
            self.level = (self.level + spun).saturating_sub(dt * SHARE_NUM / SHARE_DEN);
        }
        if self.level >= SHARE_CAP {
            self.full = true;
        } else if self.level <= SHARE_CAP / 2 {
            self.full = false;
        }
        let spins = wants && !self.full;
        self.last = Some((now, spins));
        spins
    }

    /// A look gave the core away for `waited`, up to `now`: the pager did not spin meanwhile.
    pub(super) fn gave_away(&mut self, waited: Duration, now: Instant) {
        if let Some((t, true)) = self.last {
            let rest = waited.min(now.saturating_duration_since(t));
            self.level = self.level.saturating_sub(rest);
        }
    }
}

/// The wait for a core at one look of a spin past which the look counts as kept from the
/// cores (a long wait): shorter waits are other threads' turns, not a crowd.
const CROWDED: Duration = Duration::from_micros(200);
/// The fewest long waits (of looks counted together, [`WINDOW`]) that find the cores
/// crowded, and only when they are more than half of those looks or waited more than half
/// the time since the first: pollers that never yield keep every look waiting, while a
/// busy program that merely had its time slice delays one among many.
const CROWDED_LOOKS: u32 = 2;
/// How long the pager stops spinning once the cores are found crowded; twice as long as the
/// last time when they are found crowded again right after.
const CROWDED_FOR: Duration = Duration::from_millis(50);
/// The longest the pager stops spinning at once however often the cores are found crowded
/// (the doubling of [`CROWDED_FOR`] ends here).
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
        assert_eq!(spin_for(&mut last, spin, t), spin, "the first change");
        assert_eq!(spin_for(&mut last, spin, t + US(20)), spin, "changes closer than the spin");
        assert_eq!(spin_for(&mut last, spin, t + US(220)), US(300), "a round trip of 200 µs");
        assert_eq!(spin_for(&mut last, spin, t + US(220) + SPIN_GAP), SPIN_GAP * 3 / 2);
        let far = t + US(221) + SPIN_GAP * 2;
        assert_eq!(spin_for(&mut last, spin, far), spin, "changes far apart");
    }

    #[test]
    fn the_longer_spin_is_tied_to_the_setting() {
        let (mut last, t) = (None, Instant::now());
        spin_for(&mut last, US(5), t);
        assert_eq!(spin_for(&mut last, US(5), t + US(200)), US(5) * LONGER_MOST);
        assert_eq!(spin_for(&mut last, Duration::ZERO, t + US(400)), Duration::ZERO, "0: never");
    }

    /// Simulates a pager watching a program whose `i`th lone store comes `gap(i)` after the
    /// one before, for 5 s, looking every 10 µs (each look, when spinning, giving the core
    /// away for `away`): the share of the last 3 s it spun, and the largest share of any
    /// 20 ms.
    fn writer(gap: impl Fn(u64) -> Duration, away: Duration) -> (f64, f64) {
        let (spin, step, t0, total) = (US(50), US(10), Instant::now(), Duration::from_secs(5));
        let window = (Duration::from_millis(20).as_micros() / step.as_micros()) as usize;
        let (mut share, mut last, mut spin_until) = (Share::default(), None, None::<Instant>);
        let (mut next_store, mut i, mut now) = (t0, 0, t0);
        let (mut looks, mut in_window, mut most) = (Vec::new(), 0usize, 0usize);
        while now < t0 + total {
            let spins = share.look(spin_until.is_some_and(|u| now < u), now);
            if spins {
                share.gave_away(away, now + step);
            } else {
                spin_until = None;
            }
            looks.push(spins);
            in_window += usize::from(spins);
            if looks.len() > window {
                in_window -= usize::from(looks[looks.len() - 1 - window]);
                most = most.max(in_window);
            }
            // The pager sees the store at once when spinning, else at its next tick (every
            // 10 µs after a change): at the next look either way.
            if now >= next_store {
                next_store += gap(i);
                i += 1;
                spin_until = Some(now + spin_for(&mut last, spin, now));
            }
            now += step;
        }
        let tail = &looks[looks.len() * 2 / 5..];
        let spun = tail.iter().filter(|s| **s).count() as f64 / tail.len() as f64;
        (spun, most as f64 / window as f64)
    }

    const NOTHING: Duration = Duration::ZERO;

    #[test]
    fn no_pattern_of_stores_keeps_the_pager_spinning_most_of_the_time() {
        let patterns: [(&str, &dyn Fn(u64) -> Duration); 5] = [
            ("a heartbeat every 490 µs", &|_| US(490)),
            ("490 µs, every 18th 760 µs", &|i| if i % 18 == 17 { US(760) } else { US(490) }),
            ("300 µs, every 30th 460 µs", &|i| if i % 30 == 29 { US(460) } else { US(300) }),
            ("250..450 µs", &|i| US(250 + (i * 2_654_435_761) % 201)),
            ("a flag every 40 µs", &|_| US(40)),
        ];
        for (name, gap) in patterns {
            let (spun, most) = writer(gap, NOTHING);
            // 4/5 of the time, and the bucket (1 ms) in a window of 20 ms.
            assert!(spun <= 0.81, "{name}: spinning {:.0}% of the time", spun * 100.0);
            assert!(most <= 0.86, "{name}: spinning {:.0}% of 20 ms", most * 100.0);
        }
    }

    #[test]
    fn a_ping_pong_keeps_spinning_most_of_the_time() {
        let (spun, _) = writer(|_| US(30), NOTHING);
        assert!(spun >= 0.75, "spinning {:.0}% of the time", spun * 100.0);
        // A round trip of 300 µs: the longer spin covers it.
        let (spun, _) = writer(|_| US(300), NOTHING);
        assert!(spun >= 0.75, "spinning {:.0}% of the time", spun * 100.0);
        // Lone stores far apart: a plain spin after each.
        let (spun, _) = writer(|_| US(2000), NOTHING);
        assert!(spun < 0.05, "spinning {:.0}% of the time", spun * 100.0);
    }

    #[test]
    fn time_given_away_is_no_spinning() {
        // Each look of the flag's pager gives the core away for 5 of its 10 µs: it spins
        // about half of the time, so the share never stops it.
        let (spun, _) = writer(|_| US(40), US(5));
        assert!(spun >= 0.99, "spinning {:.0}% of the time", spun * 100.0);
        // Given away for 1 of 10 µs: its own time (9/10 of the spinning) is 4/5.
        let (spun, _) = writer(|_| US(40), US(1));
        assert!(spun * 0.9 <= 0.81, "spinning {:.0}% of the time", spun * 100.0);
    }

    #[test]
    fn a_full_bucket_stops_spinning_until_half_empty() {
        let (mut s, t) = (Share::default(), Instant::now());
        assert!(s.look(true, t));
        // Spinning 5 ms fills 1 ms (a fifth of the time).
        assert!(s.look(true, t + SHARE_CAP * 5 - US(10)));
        assert!(!s.look(true, t + SHARE_CAP * 5), "full");
        // Resting drains 4/5 of the time: half of 1 ms in 625 µs.
        let t2 = t + SHARE_CAP * 5;
        assert!(!s.look(true, t2 + US(600)), "not half empty yet");
        assert!(s.look(true, t2 + US(625)), "half empty");
        // A long rest empties it.
        assert!(!s.look(false, t2 + US(626)));
        assert!(!s.look(false, t2 + Duration::from_secs(1)));
        assert_eq!(s.level, Duration::ZERO);
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
