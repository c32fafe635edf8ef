//! Hashing for tables keyed by numbers this project hands out itself: C handles, handle
//! table keys, segment ids and memory handles.
//!
//! Such tables are looked up on every data-path call (a `SCIMemCpy`, an RSMAPI put, a VIPL
//! payload), where the standard map's keyed hash (SipHash, a few dozen ns a look-up) would
//! cost more than the rest of the look-up. Nothing chooses these keys to collide (this
//! process's counters, the node and Remora's libraries in peer processes hand them out;
//! VIPL's tables of a peer's memory handles are bounded by the slots it has), so a keyless
//! hash will do: [`IdHasher`] multiplies by an odd constant (2⁶⁴ over the golden ratio)
//! into 128 bits and folds the product's high half into its low one. Do not use it for
//! keys a peer or a C caller picks (names, addresses): without a key, whoever picks them
//! can make them collide. Descriptors the kernel hands out (capi/scif's endpoints) do.
//!
//! ```
//! use remora_client::id_hash::IdMap;
//! let mut handles: IdMap<usize, &str> = IdMap::default();
//! handles.insert((7 << 4) | 3, "a remote segment");
//! assert_eq!(handles.get(&((7 << 4) | 3)), Some(&"a remote segment"));
//! ```

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// 2⁶⁴ divided by the golden ratio, made odd: a product by it depends on every bit of the
/// key in its high bits, and consecutive keys land far apart there.
const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

/// A hasher for integer keys the process hands out itself (see the [module](self) doc).
///
/// An integer written (`write_u8` … `write_u64`, `write_usize`, and the signed ones, which
/// come to these) is mixed in as one number: the state so far xor the number, times an
/// odd constant (2⁶⁴ over the golden ratio) as a 128-bit product whose high half is folded
/// (xor) into its low half. A key of one integer, the common case, is one multiplication
/// (`mul` gives both halves on x86-64). The map picks a bucket by the low bits and tags
/// the entry by the top seven; with the fold both depend on every bit of the key —
/// handles whose low bits are a constant kind tag (`(n << 4) | tag`) spread over the
/// buckets, and so do keys that differ only in their high bits (`n << 40`).
///
/// Bytes written with [`write`] (the keys that are not integers: strings, byte slices,
/// `u128`) are mixed in one at a time, each byte like an integer with a ninth bit set (so
/// a zero byte counts too: `""` and `"\0"` differ): correct, and well spread, but a
/// multiplication per byte, so slow for long keys. The same value written as an
/// integer and as its bytes hashes differently; a key type's [`Hash`](std::hash::Hash)
/// always takes the same way, so a map never sees both.
///
/// [`finish`]: Hasher::finish
/// [`write`]: Hasher::write
#[derive(Debug, Default, Clone, Copy)]
pub struct IdHasher(u64);

impl IdHasher {
    #[inline]
    fn mix(&mut self, n: u64) {
        let p = u128::from(self.0 ^ n) * u128::from(GOLDEN);
        self.0 = (p as u64) ^ ((p >> 64) as u64);
    }
}

impl Hasher for IdHasher {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }

    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.mix(u64::from(*b) | 0x100);
        }
    }

    #[inline]
    fn write_u8(&mut self, n: u8) {
        self.mix(u64::from(n));
    }

    #[inline]
    fn write_u16(&mut self, n: u16) {
        self.mix(u64::from(n));
    }

    #[inline]
    fn write_u32(&mut self, n: u32) {
        self.mix(u64::from(n));
    }

    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.mix(n);
    }

    #[inline]
    fn write_usize(&mut self, n: usize) {
        // usize is at most 64 bits on every target Remora builds for.
        self.mix(n as u64);
    }
}

/// Builds [`IdHasher`]s (for `HashMap::with_hasher`, or a map type of one's own).
pub type BuildIdHasher = BuildHasherDefault<IdHasher>;

/// A `HashMap` hashed by [`IdHasher`]: for keys the process hands out itself.
pub type IdMap<K, V> = HashMap<K, V, BuildIdHasher>;

#[cfg(test)]
mod tests {
    use super::{IdHasher, IdMap};
    use std::collections::HashSet;
    use std::hash::{BuildHasher, Hash, Hasher};

    fn hash<T: Hash + ?Sized>(k: &T) -> u64 {
        super::BuildIdHasher::default().hash_one(k)
    }

    /// How many of the 2^`bits` buckets `keys` fall into, picked by the hash's low bits
    /// as the map picks them.
    fn buckets(keys: impl Iterator<Item = u64>, bits: u32) -> usize {
        keys.map(|h| h & ((1 << bits) - 1)).collect::<HashSet<_>>().len()
    }

    /// A random hash puts n keys into about 63% of n buckets: ask for half.
    #[test]
    fn sequential_ids_spread_over_the_low_bits() {
        for bits in [4, 8, 10, 12] {
            let n = 1u32 << bits;
            let ids = buckets((1..=n).map(|k| hash(&k)), bits);
            assert!(ids >= n as usize / 2, "u32 ids 1..={n}: {ids} buckets of {n}");
            let ids = buckets((1..=n as usize).map(|k| hash(&k)), bits);
            assert!(ids >= n as usize / 2, "usize ids 1..={n}: {ids} buckets of {n}");
        }
    }

    /// The handles of the C libraries carry a constant kind in their low bits (RSMAPI's
    /// three, SISCI's four); the counter above it still spreads them.
    #[test]
    fn handles_with_a_constant_kind_spread_over_the_low_bits() {
        for shift in [3, 4, 8] {
            for kind in [0usize, 1, 5] {
                let n = 1024;
                let h = buckets((1..=n).map(|k| hash(&((k << shift) | kind))), 10);
                assert!(h >= n / 2, "handles (k << {shift}) | {kind}: {h} buckets of {n}");
            }
        }
    }

    /// Keys that differ only in their high bits (page-sized strides, ids in a high field)
    /// spread too: the fold brings the product's high half down to the bucket bits. And
    /// RSMAPI's handles within one of its 16 table parts: `(16m + part) << 3 | kind`.
    #[test]
    fn keys_differing_in_high_bits_spread() {
        for shift in [12u32, 32, 40, 48, 53] {
            let n = 1024u64;
            let h = buckets((1..=n).map(|k| hash(&(k << shift))), 10);
            assert!(h >= n as usize / 2, "keys k << {shift}: {h} buckets of {n}");
        }
        for part in [0usize, 7, 15] {
            let h = buckets((1..=1024usize).map(|m| hash(&(((16 * m + part) << 3) | 2))), 10);
            assert!(h >= 512, "RSMAPI handles of part {part}: {h} buckets of 1024");
        }
    }

    /// The map tags entries by the top seven bits of the hash: consecutive ids must not
    /// all share a tag (which would make every probe compare keys).
    #[test]
    fn sequential_ids_spread_over_the_top_bits() {
        let tags: HashSet<u64> = (1..=1024u32).map(|k| hash(&k) >> 57).collect();
        assert!(tags.len() >= 64, "{} tags of 128", tags.len());
    }

    #[test]
    fn every_key_is_kept() {
        let keys = || (0..5000u32).chain([u32::MAX, u32::MAX - 1, 1 << 31]);
        let mut m = IdMap::default();
        for k in keys() {
            m.insert(k, k ^ 0x5a5a);
        }
        assert_eq!(m.len(), 5003);
        for k in keys() {
            assert_eq!(m.get(&k), Some(&(k ^ 0x5a5a)));
        }
        assert_eq!(m.get(&5000), None);
    }

    /// Keys that are not integers go through `write`: a map of them works, and the byte
    /// order, every byte and the length all count.
    #[test]
    fn byte_keys_hash_sanely() {
        assert_eq!(hash("segment"), hash("segment"));
        assert_ne!(hash("ab"), hash("ba"));
        assert_ne!(hash(&[1u8, 2, 3][..]), hash(&[1u8, 2, 4][..]));
        assert_ne!(hash(&[0u8][..]), hash(&[0u8, 0][..]));
        assert_ne!(hash(""), hash("\0"), "a zero byte counts");
        assert_ne!(hash("\0\0a"), hash("a"), "leading zero bytes count");
        let names: Vec<String> = (0..1000).map(|i| format!("name-{i}")).collect();
        let distinct: HashSet<u64> = names.iter().map(|s| hash(s.as_str())).collect();
        assert_eq!(distinct.len(), names.len());
        assert!(buckets(names.iter().map(|s| hash(s.as_str())), 10) >= 500);
        let mut m: IdMap<String, usize> = IdMap::default();
        for (i, s) in names.iter().enumerate() {
            m.insert(s.clone(), i);
        }
        for (i, s) in names.iter().enumerate() {
            assert_eq!(m.get(s), Some(&i));
        }
        let mut bytes = IdHasher::default();
        bytes.write(&[]);
        assert_eq!(bytes.finish(), IdHasher::default().finish(), "no bytes, no change");
    }

    /// A key of two integers (a tuple) depends on both and on their order.
    #[test]
    fn pairs_depend_on_both_halves() {
        assert_ne!(hash(&(1u32, 2u32)), hash(&(2u32, 1u32)));
        assert_ne!(hash(&(1u32, 2u32)), hash(&(1u32, 3u32)));
        let pairs = (0..32u32).flat_map(|a| (0..32u32).map(move |b| hash(&(a, b))));
        assert!(buckets(pairs, 10) >= 512);
    }
}
