//! The soak's randomness: a seeded splitmix64 generator (every choice of a run follows from
//! `--seed`), and the byte pattern every check compares against, derived from
//! (seed, worker, operation, offset) so that no shadow copy has to be shared.

/// A splitmix64 generator: small, fast, and good enough to pick operations and faults.
#[derive(Debug, Clone)]
pub(crate) struct Rng(u64);

impl Rng {
    /// A generator whose sequence follows from `seed` and `stream` (one stream per worker,
    /// incarnation or scheduler, so they do not repeat each other).
    pub(crate) fn new(seed: u64, stream: u64) -> Rng {
        let mut r = Rng(seed ^ stream.wrapping_mul(0xD1B5_4A32_D192_ED03));
        r.next();
        r
    }

    /// The next 64 random bits.
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix(self.0)
    }

    /// A number in `lo..hi` (`lo` when the range is empty).
    pub(crate) fn range(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        lo + self.next() % (hi - lo)
    }

    /// A `usize` in `lo..hi`.
    pub(crate) fn urange(&mut self, lo: usize, hi: usize) -> usize {
        self.range(lo as u64, hi as u64) as usize
    }

    /// True with probability `pct` percent.
    pub(crate) fn chance(&mut self, pct: u64) -> bool {
        self.next() % 100 < pct
    }
}

/// splitmix64's finaliser.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The bytes an operation writes: `len` bytes for operation `key` (a hash of seed, worker,
/// incarnation and operation number) starting at `offset` of its object. The same
/// arguments always give the same bytes, so the worker's shadow copy is this function.
pub(crate) fn pattern(key: u64, offset: usize, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 8);
    let first = offset / 8;
    let mut word = first;
    while out.len() < len + (offset % 8) {
        out.extend_from_slice(&mix(key ^ (word as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)).to_le_bytes());
        word += 1;
    }
    out.drain(..offset % 8);
    out.truncate(len);
    out
}

/// The key of operation `op` of a worker's incarnation.
pub(crate) fn op_key(seed: u64, worker: u32, incarnation: u32, op: u64) -> u64 {
    mix(seed ^ mix((u64::from(worker) << 32 | u64::from(incarnation)) ^ mix(op)))
}

/// How many bytes of `got` differ from `want` (both the same length).
pub(crate) fn differing(got: &[u8], want: &[u8]) -> usize {
    got.iter().zip(want).filter(|(a, b)| a != b).count() + got.len().abs_diff(want.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pattern_is_the_same_from_any_offset() {
        let whole = pattern(7, 0, 100);
        for off in 0..20 {
            assert_eq!(pattern(7, off, 50), whole[off..off + 50]);
        }
        assert_ne!(pattern(7, 0, 16), pattern(8, 0, 16));
    }

    #[test]
    fn ranges_stay_inside() {
        let mut r = Rng::new(1, 2);
        for _ in 0..1000 {
            let v = r.range(10, 20);
            assert!((10..20).contains(&v));
        }
        assert_eq!(r.range(5, 5), 5);
    }
}
