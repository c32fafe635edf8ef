//! The handle table: how C handles name safe-API objects without ever being dereferenced.
//!
//! A handle's value is `(n << 4) | tag`: `n` comes from a counter that only grows (a value
//! is never issued twice, so a stale handle can never name a newer object) and `tag` says
//! which kind of object it names (so a map handle passed where a segment is expected is
//! rejected before any look-up). Zero is never issued, so NULL is never valid.
//!
//! Look-ups take a read lock, clone the object (an `Arc` increment) and release the lock
//! before the caller uses it: data-path calls such as `SCIMemCpy` never hold the table.
//! Objects leave the table with the lock released before they are dropped, and no lock of
//! the table is held while a C callback runs.
//!
//! Objects created with a C callback need their handle value before they exist: the
//! callback must be given the same handle the program will hold. [`reserve`] takes the
//! number first; the object's callbacks wait on the reservation's [`Gate`] until
//! [`Reserved::fill`] has put the object in the table (so a callback that fires at once can
//! already use its handle), or skip the C function if creating the object failed.

use crate::consts::{SCI_ERR_ILLEGAL_PARAMETER, SCI_ERR_NOSPC};
use crate::errors::{Fail, Outcome};
use remora_client::id_hash::IdMap;
use remora_sisci::{
    BlockTransfer, DataInterrupt, Descriptor, DmaChannel, DmaQueue, Interrupt, LocalSegment, Map,
    RemoteDataInterrupt, RemoteInterrupt, RemoteSegment, Sequence,
};
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Bits of a handle that hold its kind.
const TAG_BITS: u32 = 4;
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
    /// `sci_dma_queue_t`.
    Dma(DmaQueue),
    /// `sci_local_interrupt_t`.
    Intr(Interrupt),
    /// `sci_remote_interrupt_t`.
    RemoteIntr(RemoteInterrupt),
    /// `sci_local_data_interrupt_t`.
    DataIntr(DataInterrupt),
    /// `sci_remote_data_interrupt_t`.
    RemoteDataIntr(RemoteDataInterrupt),
    /// `sci_block_transfer_t`.
    Block(BlockTransfer),
    /// `sci_dma_channel_t`.
    Channel(DmaChannel),
}

impl Entry {
    /// The descriptor the object was made through (`None` for a descriptor itself).
    pub(crate) fn descriptor(&self) -> Option<&Descriptor> {
        Some(match self {
            Entry::Desc(_) => return None,
            Entry::Local(x) => x.descriptor(),
            Entry::Remote(x) => x.descriptor(),
            Entry::Map(x) => x.descriptor(),
            Entry::Seq(x) => x.descriptor(),
            Entry::Dma(x) => x.descriptor(),
            Entry::Intr(x) => x.descriptor(),
            Entry::RemoteIntr(x) => x.descriptor(),
            Entry::DataIntr(x) => x.descriptor(),
            Entry::RemoteDataIntr(x) => x.descriptor(),
            Entry::Block(x) => x.descriptor(),
            Entry::Channel(x) => x.descriptor(),
        })
    }
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
object!(DmaQueue, Dma, 6);
object!(Interrupt, Intr, 7);
object!(RemoteInterrupt, RemoteIntr, 8);
object!(DataInterrupt, DataIntr, 9);
object!(RemoteDataInterrupt, RemoteDataIntr, 10);
object!(BlockTransfer, Block, 11);
object!(DmaChannel, Channel, 12);

/// Handles are numbers the library hands out itself: hashed by one multiplication, no
/// SipHash on the data path.
type Table = IdMap<usize, Entry>;

fn table() -> &'static RwLock<Table> {
    static TABLE: OnceLock<RwLock<Table>> = OnceLock::new();
    TABLE.get_or_init(|| RwLock::new(Table::default()))
}

fn read() -> RwLockReadGuard<'static, Table> {
    table().read().unwrap_or_else(|p| p.into_inner())
}

fn write() -> RwLockWriteGuard<'static, Table> {
    table().write().unwrap_or_else(|p| p.into_inner())
}

/// Take every object made through descriptor `d` out of the table (`SCIClose` of a busy
/// descriptor); they are released when the caller drops them, outside the table's lock.
pub(crate) fn take_children(d: &Descriptor) -> Vec<Entry> {
    let mut t = write();
    let keys: Vec<usize> =
        t.iter().filter(|(_, e)| e.descriptor().is_some_and(|x| x.same_as(d))).map(|(k, _)| *k).collect();
    keys.into_iter().filter_map(|k| t.remove(&k)).collect()
}

/// The counter part of the next handle.
static NEXT: AtomicUsize = AtomicUsize::new(1);

/// The failure of a NULL, stale or wrong-kind handle.
pub(crate) const BAD_HANDLE: Fail = Fail(SCI_ERR_ILLEGAL_PARAMETER);

/// A new handle value for an object of kind `T` (not yet in the table).
///
/// # Errors
/// `SCI_ERR_NOSPC` when the counter is exhausted (never, on 64-bit targets).
fn next_key<T: Object>() -> Outcome<usize> {
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    if n > usize::MAX >> TAG_BITS {
        return Err(Fail(SCI_ERR_NOSPC));
    }
    Ok((n << TAG_BITS) | T::TAG)
}

/// Put `obj` in the table; its new handle value.
///
/// # Errors
/// `SCI_ERR_NOSPC` when the counter is exhausted (never, on 64-bit targets).
pub(crate) fn insert<T: Object>(obj: T) -> Outcome<usize> {
    let key = next_key::<T>()?;
    write().insert(key, obj.into_entry());
    Ok(key)
}

/// What became of a reserved handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GateState {
    /// The object is being created.
    Pending,
    /// The object is in the table under the reserved handle.
    Open,
    /// Creating the object failed; the handle will never name anything.
    Abandoned,
}

/// Tells the callbacks of an object whose handle was reserved when they may run.
#[derive(Debug)]
pub(crate) struct Gate {
    /// Fast path: set once the gate is open.
    open: AtomicBool,
    state: Mutex<GateState>,
    cond: Condvar,
}

impl Gate {
    fn new() -> Gate {
        Gate { open: AtomicBool::new(false), state: Mutex::new(GateState::Pending), cond: Condvar::new() }
    }

    fn settle(&self, to: GateState) {
        let mut g = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if *g == GateState::Pending {
            *g = to;
            self.open.store(to == GateState::Open, Ordering::Release);
            self.cond.notify_all();
        }
    }

    /// Wait until the object is in the table (`true`) or its creation failed (`false`).
    /// The wait is short: the creating call fills the table right after the object exists.
    pub(crate) fn wait(&self) -> bool {
        if self.open.load(Ordering::Acquire) {
            return true;
        }
        let mut g = self.state.lock().unwrap_or_else(|p| p.into_inner());
        while *g == GateState::Pending {
            g = self.cond.wait(g).unwrap_or_else(|p| p.into_inner());
        }
        *g == GateState::Open
    }
}

/// A handle value taken before its object exists (see the module documentation).
/// Dropping it unfilled abandons the handle: the object's callbacks will not run.
#[derive(Debug)]
pub(crate) struct Reserved<T: Object> {
    key: usize,
    gate: Arc<Gate>,
    _kind: PhantomData<fn() -> T>,
}

/// Take a handle value for an object of kind `T` that is about to be created.
///
/// # Errors
/// `SCI_ERR_NOSPC` when the counter is exhausted (never, on 64-bit targets).
pub(crate) fn reserve<T: Object>() -> Outcome<Reserved<T>> {
    Ok(Reserved { key: next_key::<T>()?, gate: Arc::new(Gate::new()), _kind: PhantomData })
}

impl<T: Object> Reserved<T> {
    /// The handle value the object will have.
    pub(crate) fn key(&self) -> usize {
        self.key
    }

    /// The gate the object's callbacks wait on.
    pub(crate) fn gate(&self) -> Arc<Gate> {
        self.gate.clone()
    }

    /// Put the object in the table under the reserved handle, and let its callbacks run.
    pub(crate) fn fill(self, obj: T) -> usize {
        write().insert(self.key, obj.into_entry());
        self.gate.settle(GateState::Open);
        self.key
    }
}

impl<T: Object> Drop for Reserved<T> {
    fn drop(&mut self) {
        // A no-op after `fill`.
        self.gate.settle(GateState::Abandoned);
    }
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

/// Forget handle `key` (after its object was released). The table's lock is released
/// before the entry is dropped, so whatever the object's drop does runs unlocked.
pub(crate) fn remove(key: usize) {
    let gone = write().remove(&key);
    drop(gone);
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
        let tags = [
            Descriptor::TAG,
            LocalSegment::TAG,
            RemoteSegment::TAG,
            Map::TAG,
            Sequence::TAG,
            DmaQueue::TAG,
            Interrupt::TAG,
            RemoteInterrupt::TAG,
            DataInterrupt::TAG,
            RemoteDataInterrupt::TAG,
            BlockTransfer::TAG,
            DmaChannel::TAG,
        ];
        for (i, a) in tags.iter().enumerate() {
            assert!(*a != 0 && *a <= TAG_MASK);
            for b in &tags[i + 1..] {
                assert_ne!(a, b);
            }
        }
    }

    #[test]
    fn an_unfilled_reservation_abandons_its_gate() {
        let r = reserve::<Sequence>().unwrap();
        let key = r.key();
        assert_eq!(key & TAG_MASK, Sequence::TAG);
        let gate = r.gate();
        drop(r);
        assert!(!gate.wait());
        assert_eq!(get::<Sequence>(key).unwrap_err(), BAD_HANDLE);
    }

    #[test]
    fn gates_wake_waiters_and_settle_once() {
        let gate = Arc::new(Gate::new());
        let g2 = gate.clone();
        let waiter = std::thread::spawn(move || g2.wait());
        std::thread::sleep(std::time::Duration::from_millis(20));
        gate.settle(GateState::Open);
        assert!(waiter.join().unwrap());
        gate.settle(GateState::Abandoned);
        assert!(gate.wait(), "an open gate stays open");
    }
}
