//! The handle table: C handles are numbers that name safe-API objects, never pointers the
//! library dereferences. NULL is never issued. Protection tags are the safe API's tag
//! numbers themselves (checked against the NIC on every use).
//!
//! A handle names a slot of one of `SHARDS` tables, each behind a read-mostly lock of its
//! own on a line of its own: `(((generation << INDEX_BITS | index) << SHARD_BITS | shard)
//! << 3) | kind`. A slot taken again gets the next generation, so a stale handle never
//! names a newer object (its generation would have to wrap, after 2^34 reuses of one
//! slot). A lookup is the slot's index, its handle compared, under its shard's read lock:
//! no hash, and calls on different VIs (handles made one after another land in different
//! shards) share no lock word.

use crate::errors::{Code, VIP_ERROR_RESOURCE, VIP_INVALID_PARAMETER};
use remora_client::id_hash::IdMap;
use remora_vipl::{CompletionQueue, ConnRequest, Nic, Vi};
use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// One object the table holds.
#[derive(Debug, Clone)]
pub(crate) enum Entry {
    Nic(Nic),
    Vi(Vi),
    Cq(CompletionQueue),
    /// A request `VipConnectWait` returned, until accepted or rejected.
    Conn(Arc<Mutex<Option<ConnRequest>>>),
}

impl Entry {
    fn kind(&self) -> usize {
        match self {
            Entry::Nic(_) => 1,
            Entry::Vi(_) => 2,
            Entry::Cq(_) => 3,
            Entry::Conn(_) => 4,
        }
    }
}

const SHARD_BITS: u32 = 3;
const SHARDS: usize = 1 << SHARD_BITS;
/// Slots of a shard, as bits (tests fill a shard of 4).
const INDEX_BITS: u32 = if cfg!(test) { 2 } else { 24 };

// The generation has the 34 bits a 64-bit handle leaves: on 32 bits it would have 2 and
// wrap after 4 reuses of a slot, a stale handle naming a newer object.
const _: () = assert!(usize::BITS == 64, "the handle table's generations need 64-bit handles");

/// A slot: the handle it was last given under (its generation), and the object while the
/// handle is live.
#[derive(Default)]
struct Slot {
    handle: usize,
    entry: Option<Entry>,
}

/// One shard: its slots, and the free ones.
#[derive(Default)]
struct Shard {
    slots: Vec<Slot>,
    free: Vec<usize>,
}

/// A shard's lock on a line of its own (two, for the adjacent-line prefetch).
#[derive(Default)]
#[repr(align(128))]
struct Padded(RwLock<Shard>);

fn shards() -> &'static [Padded; SHARDS] {
    static T: OnceLock<[Padded; SHARDS]> = OnceLock::new();
    T.get_or_init(Default::default)
}

/// The shard of handle `h` (any number), and the slot it names.
fn split(h: usize) -> (&'static Padded, usize) {
    (&shards()[(h >> 3) % SHARDS], (h >> (3 + SHARD_BITS)) & ((1 << INDEX_BITS) - 1))
}

fn read(p: &Padded) -> RwLockReadGuard<'_, Shard> {
    p.0.read().unwrap_or_else(|e| e.into_inner())
}

fn write(p: &Padded) -> RwLockWriteGuard<'_, Shard> {
    p.0.write().unwrap_or_else(|e| e.into_inner())
}

/// The handle of each VI, NIC and completion queue, by the safe API's identity (for
/// callbacks).
fn reverse() -> &'static RwLock<IdMap<(usize, u64), usize>> {
    static T: OnceLock<RwLock<IdMap<(usize, u64), usize>>> = OnceLock::new();
    T.get_or_init(Default::default)
}

/// Which shard the next handle goes to.
static NEXT: AtomicUsize = AtomicUsize::new(0);

fn identity(e: &Entry) -> Option<(usize, u64)> {
    match e {
        Entry::Vi(v) => Some((2, v.id())),
        Entry::Nic(n) => Some((1, n.id())),
        Entry::Cq(c) => Some((3, c.id())),
        Entry::Conn(_) => None,
    }
}

/// `VIP_ERROR_RESOURCE`: the table has no room for an object ([`insert`]).
pub(crate) const FULL: Code = Code(VIP_ERROR_RESOURCE);

/// Put `e` in the table; its handle, never NULL. `None` when the shard's `2^INDEX_BITS`
/// slots are all live: the object is let go (a VI and a CQ destroyed, a connection request
/// rejected), and the callers answer [`FULL`].
pub(crate) fn insert(e: Entry) -> Option<*mut c_void> {
    let shard = NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS;
    let (kind, id) = (e.kind(), identity(&e));
    let key = {
        let mut t = write(&shards()[shard]);
        let index = match t.free.pop() {
            Some(i) => i,
            None if t.slots.len() < 1 << INDEX_BITS => {
                t.slots.push(Slot::default());
                t.slots.len() - 1
            }
            None => {
                drop(t);
                discard(e);
                return None;
            }
        };
        let slot = &mut t.slots[index];
        let generation = (slot.handle >> (3 + SHARD_BITS + INDEX_BITS)).wrapping_add(1);
        let key = (((generation << INDEX_BITS | index) << SHARD_BITS | shard) << 3) | kind;
        *slot = Slot { handle: key, entry: Some(e) };
        key
    };
    if let Some(id) = id {
        reverse().write().unwrap_or_else(|p| p.into_inner()).insert(id, key);
    }
    Some(key as *mut c_void)
}

/// Let go of an object the table had no room for: nothing the program could name stays.
fn discard(e: Entry) {
    match e {
        Entry::Vi(v) => {
            let _ = v.destroy();
        }
        Entry::Cq(c) => {
            let _ = c.destroy();
        }
        Entry::Conn(req) => {
            if let Some(r) = req.lock().unwrap_or_else(|p| p.into_inner()).take() {
                let _ = r.reject();
            }
        }
        Entry::Nic(_) => {}
    }
}

/// `f` of the object `h` names, under its shard's read lock.
fn with<T>(h: *mut c_void, f: impl FnOnce(&Entry) -> Option<T>) -> Option<T> {
    let (shard, index) = split(h as usize);
    read(shard).slots.get(index).filter(|s| s.handle == h as usize).and_then(|s| s.entry.as_ref()).and_then(f)
}

/// The object `h` names, cloned (the table is not held while it is used).
pub(crate) fn get(h: *mut c_void) -> Option<Entry> {
    with(h, |e| Some(e.clone()))
}

/// Take `h` out of the table.
pub(crate) fn remove(h: *mut c_void) -> Option<Entry> {
    let (shard, index) = split(h as usize);
    let e = {
        let mut t = write(shard);
        let e = t.slots.get_mut(index).filter(|s| s.handle == h as usize).and_then(|s| s.entry.take());
        if e.is_some() {
            t.free.push(index);
        }
        e
    };
    if let Some(id) = e.as_ref().and_then(identity) {
        reverse().write().unwrap_or_else(|p| p.into_inner()).remove(&id);
    }
    e
}

/// The handle of VI `vi`, or NULL.
pub(crate) fn vi_handle(vi: &Vi) -> *mut c_void {
    reverse().read().unwrap_or_else(|p| p.into_inner()).get(&(2, vi.id())).copied().unwrap_or(0)
        as *mut c_void
}

/// The handle of completion queue `cq`, or NULL.
pub(crate) fn cq_handle(cq: &CompletionQueue) -> *mut c_void {
    reverse().read().unwrap_or_else(|p| p.into_inner()).get(&(3, cq.id())).copied().unwrap_or(0)
        as *mut c_void
}

/// The handle of NIC `nic`, or NULL.
pub(crate) fn nic_handle(nic: &Nic) -> *mut c_void {
    reverse().read().unwrap_or_else(|p| p.into_inner()).get(&(1, nic.id())).copied().unwrap_or(0)
        as *mut c_void
}

const BAD: Code = Code(VIP_INVALID_PARAMETER);

/// The NIC `h` names.
pub(crate) fn nic(h: *mut c_void) -> Result<Nic, Code> {
    with(h, |e| if let Entry::Nic(n) = e { Some(n.clone()) } else { None }).ok_or(BAD)
}

/// The VI `h` names (cloned from its slot: no other entry is cloned and dropped).
pub(crate) fn vi(h: *mut c_void) -> Result<Vi, Code> {
    with(h, |e| if let Entry::Vi(v) = e { Some(v.clone()) } else { None }).ok_or(BAD)
}

/// The completion queue `h` names.
pub(crate) fn cq(h: *mut c_void) -> Result<CompletionQueue, Code> {
    with(h, |e| if let Entry::Cq(c) = e { Some(c.clone()) } else { None }).ok_or(BAD)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table whose shards are all full: `insert` is `None` and lets the object go; once a
    /// handle is removed there is room again, under a handle the stale one is not.
    #[test]
    fn a_full_table_refuses_and_lets_the_object_go() {
        let conn = || Arc::new(Mutex::new(None));
        let handles: Vec<_> =
            (0..SHARDS << INDEX_BITS).map(|_| insert(Entry::Conn(conn())).expect("room")).collect();
        assert!(handles.iter().all(|h| !h.is_null()));
        let refused = conn();
        assert!(insert(Entry::Conn(refused.clone())).is_none(), "a full table took an object");
        assert_eq!(Arc::strong_count(&refused), 1, "the table kept what it refused");
        for &h in &handles {
            assert!(remove(h).is_some());
        }
        let again = insert(Entry::Conn(conn())).expect("room after removes");
        assert!(!handles.contains(&again) && get(handles[0]).is_none());
    }
}
