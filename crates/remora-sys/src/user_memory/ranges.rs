//! Counted ranges of a file: how many holders each byte range has, split and joined as
//! holders come and go (the live windows over an arena).

use std::collections::BTreeMap;

/// Ranges `start..end` of a file, each with a count above zero; ranges never overlap.
#[derive(Debug, Default)]
pub(super) struct Counts(BTreeMap<u64, (u64, u32)>);

impl Counts {
    /// Cut the range holding `at` (if one does, and `at` lies inside it) in two at `at`.
    fn split(&mut self, at: u64) {
        let Some((&s, &(e, n))) = self.0.range(..at).next_back() else { return };
        if at < e {
            self.0.insert(s, (at, n));
            self.0.insert(at, (e, n));
        }
    }

    /// One more holder of `start..end`.
    pub(super) fn add(&mut self, start: u64, end: u64) {
        if start >= end {
            return;
        }
        self.split(start);
        self.split(end);
        let mut at = start;
        let inside: Vec<(u64, u64, u32)> = self.0.range(start..end).map(|(s, (e, n))| (*s, *e, *n)).collect();
        for (s, e, n) in inside {
            if at < s {
                self.0.insert(at, (s, 1));
            }
            self.0.insert(s, (e, n + 1));
            at = e;
        }
        if at < end {
            self.0.insert(at, (end, 1));
        }
    }

    /// One holder fewer of `start..end` (parts no one held stay unheld).
    pub(super) fn sub(&mut self, start: u64, end: u64) {
        if start >= end {
            return;
        }
        self.split(start);
        self.split(end);
        let inside: Vec<(u64, u64, u32)> = self.0.range(start..end).map(|(s, (e, n))| (*s, *e, *n)).collect();
        for (s, e, n) in inside {
            if n > 1 {
                self.0.insert(s, (e, n - 1));
            } else {
                self.0.remove(&s);
            }
        }
    }

    /// `start..end` cut into parts, each held (`true`) or not.
    pub(super) fn parts(&self, start: u64, end: u64) -> Vec<(u64, u64, bool)> {
        let mut out = Vec::new();
        let mut at = start;
        let first = self.0.range(..start).next_back().filter(|(_, (e, _))| *e > start);
        for (s, (e, _)) in first.into_iter().chain(self.0.range(start..end)) {
            let (s, e) = ((*s).max(start), (*e).min(end));
            if at < s {
                out.push((at, s, false));
            }
            out.push((s, e, true));
            at = e;
        }
        if at < end {
            out.push((at, end, false));
        }
        out
    }

    /// Every held range, in order (neighbours not joined).
    pub(super) fn held(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.0.iter().map(|(s, (e, _))| (*s, *e))
    }

    /// Whether nothing is held.
    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The parts of `start..end` that none of `keep` (ranges in any order, may overlap)
/// covers.
pub(super) fn uncovered(start: u64, end: u64, keep: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut keep: Vec<(u64, u64)> = keep.iter().copied().filter(|(s, e)| *s < end && *e > start).collect();
    keep.sort_unstable();
    let mut out = Vec::new();
    let mut at = start;
    for (s, e) in keep {
        if s > at {
            out.push((at, s.min(end)));
        }
        at = at.max(e);
        if at >= end {
            break;
        }
    }
    if at < end {
        out.push((at, end));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_split_and_join_as_holders_come_and_go() {
        let mut c = Counts::default();
        c.add(0, 10);
        c.add(5, 15);
        assert_eq!(c.parts(0, 20), vec![(0, 5, true), (5, 10, true), (10, 15, true), (15, 20, false)]);
        c.sub(0, 10);
        assert_eq!(c.parts(0, 20), vec![(0, 5, false), (5, 10, true), (10, 15, true), (15, 20, false)]);
        c.sub(5, 15);
        assert!(c.is_empty());
        c.add(3, 4);
        assert_eq!(c.parts(0, 8), vec![(0, 3, false), (3, 4, true), (4, 8, false)]);
        assert_eq!(c.parts(3, 4), vec![(3, 4, true)]);
        c.sub(0, 100);
        assert!(c.is_empty(), "a range no one held stays unheld");
    }

    #[test]
    fn uncovered_parts_are_the_gaps() {
        assert_eq!(uncovered(0, 10, &[]), vec![(0, 10)]);
        assert_eq!(uncovered(0, 10, &[(2, 4), (3, 5), (8, 20)]), vec![(0, 2), (5, 8)]);
        assert_eq!(uncovered(5, 10, &[(0, 6)]), vec![(6, 10)]);
        assert!(uncovered(0, 10, &[(0, 10)]).is_empty());
    }
}
