//! The handle table: how C handles name safe-API objects without ever being dereferenced.
//!
//! A handle's value is `(n << 3) | tag`: `n` comes from a counter that only grows (a value
//! is never issued twice, so a stale handle can never name a newer object) and `tag` says
//! which kind of object it names (so a map handle passed where a segment is expected is
//! rejected before any look-up). Zero is never issued, so NULL is never valid.
//!
//! Look-ups take a read lock, clone the object (an `Arc` increment) and release the lock
//! before the caller uses it: data-path calls such as `SCIMemCpy` never hold the table.

use crate::consts::{SCI_ERR_ILLEGAL_PARAMETER, SCI_ERR_NOSPC};
use crate::errors::{Fail, Outcome};
use remora_sisci::{Descriptor, LocalSegment, Map, RemoteSegment, Sequence};
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Bits of a handle that hold its kind.
const TAG_BITS: u32 = 3;
/// Mask of the kind bits.
const TAG_MASK: usize = (1 << TAG_BITS) - 1;

/// One object the table holds.
#[derive(Debug)]
pub(crate) enum Entry {
    /// `sci_desc_t`.
    Desc(Descriptor),
    /// `sci_local_segment_t`.
    Local(LocalSegment),
    /// `sci_remote_segment_t`.
    Remote(RemoteSegment),
    /// `sci_map_t`.
    Map(Map),
    /// `sci_sequence_t`.
    Seq(Sequence),
}

/// A kind of object that has handles.
pub(crate) trait Object: Clone {
    /// The kind bits of its handles (non-zero).
    const TAG: usize;
    /// Wrap it for the table.
    fn into_entry(self) -> Entry;
    /// Unwrap it, when `e` is of this kind.
    fn from_entry(e: &Entry) -> Option<&Self>;
}

macro_rules! object {
    ($ty:ty, $variant:ident, $tag:expr) => {
        impl Object for $ty {
            const TAG: usize = $tag;
            fn into_entry(self) -> Entry {
                Entry::$variant(self)
            }
            fn from_entry(e: &Entry) -> Option<&Self> {
                match e {
                    Entry::$variant(v) => Some(v),
                    _ => None,
                }
            }
        }
    };
}

object!(Descriptor, Desc, 1);
object!(LocalSegment, Local, 2);
object!(RemoteSegment, Remote, 3);
object!(Map, Map, 4);
object!(Sequence, Seq, 5);

/// Hashes the table's keys (already unique integers) cheaply: no SipHash on the data path.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    fn write_usize(&mut self, n: usize) {
        self.0 = (n as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    fn finish(&self) -> u64 {
        // Fold the well-mixed high half into the low bits that pick the bucket.
        self.0 ^ (self.0 >> 32)
    }
}

/// Builds [`KeyHasher`]s.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct KeyBuild;

impl BuildHasher for KeyBuild {
    type Hasher = KeyHasher;
    fn build_hasher(&self) -> KeyHasher {
        KeyHasher::default()
    }
}

type Table = HashMap<usize, Entry, KeyBuild>;

fn table() -> &'static RwLock<Table> {
    static TABLE: OnceLock<RwLock<Table>> = OnceLock::new();
    TABLE.get_or_init(|| RwLock::new(HashMap::with_hasher(KeyBuild)))
}

fn read() -> RwLockReadGuard<'static, Table> {
    table().read().unwrap_or_else(|p| p.into_inner())
}

fn write() -> RwLockWriteGuard<'static, Table> {
    table().write().unwrap_or_else(|p| p.into_inner())
}

/// The counter part of the next handle.
static NEXT: AtomicUsize = AtomicUsize::new(1);

/// The failure of a NULL, stale or wrong-kind handle.
pub(crate) const BAD_HANDLE: Fail = Fail(SCI_ERR_ILLEGAL_PARAMETER);

/// Put `obj` in the table; its new handle value.
///
/// # Errors
/// `SCI_ERR_NOSPC` when the counter is exhausted (never, on 64-bit targets).
pub(crate) fn insert<T: Object>(obj: T) -> Outcome<usize> {
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    if n > usize::MAX >> TAG_BITS {
        return Err(Fail(SCI_ERR_NOSPC));
    }
    let key = (n << TAG_BITS) | T::TAG;
    write().insert(key, obj.into_entry());
    Ok(key)
}

/// The object that handle `key` names.
///
/// # Errors
/// [`BAD_HANDLE`] when `key` is NULL, stale, or names another kind of object.
pub(crate) fn get<T: Object>(key: usize) -> Outcome<T> {
    if key & TAG_MASK != T::TAG {
        return Err(BAD_HANDLE);
    }
    read().get(&key).and_then(T::from_entry).cloned().ok_or(BAD_HANDLE)
}

/// Forget handle `key` (after its object was released).
pub(crate) fn remove(key: usize) {
    write().remove(&key);
}

/// A live map whose address range holds `addr..addr+len`, with the offset of `addr` in it.
pub(crate) fn find_map(addr: usize, len: usize) -> Option<(Map, usize)> {
    read().values().find_map(|e| match e {
        Entry::Map(m) => m.offset_of(addr, len).map(|off| (m.clone(), off)),
        _ => None,
    })
}

/// The table key of a C handle (its address; the pointer is never followed).
pub(crate) fn key<P>(handle: *mut P) -> usize {
    handle as usize
}

/// The C handle of table key `key`.
pub(crate) fn handle<P>(key: usize) -> *mut P {
    key as *mut P
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn null_and_wrong_kind_are_rejected() {
        assert_eq!(get::<Map>(0).unwrap_err(), BAD_HANDLE);
        // A never-issued key of the right kind.
        assert_eq!(get::<Map>((usize::MAX >> TAG_BITS << TAG_BITS) | Map::TAG).unwrap_err(), BAD_HANDLE);
        assert_eq!(get::<Sequence>(Map::TAG).unwrap_err(), BAD_HANDLE);
    }

    #[test]
    fn tags_are_distinct_and_non_zero() {
        let tags = [Descriptor::TAG, LocalSegment::TAG, RemoteSegment::TAG, Map::TAG, Sequence::TAG];
        for (i, a) in tags.iter().enumerate() {
            assert!(*a != 0 && *a <= TAG_MASK);
            for b in &tags[i + 1..] {
                assert_ne!(a, b);
            }
        }
    }
}
