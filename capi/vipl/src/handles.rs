//! The handle table: C handles are numbers that name safe-API objects, never pointers the
//! library dereferences. A handle is `(n << 3) | kind`, `n` from a counter that only grows
//! (a stale handle never names a newer object). NULL is never issued. Protection tags are
//! the safe API's tag numbers themselves (checked against the NIC on every use).

use crate::errors::{Code, VIP_INVALID_PARAMETER};
use remora_client::id_hash::IdMap;
use remora_vipl::{CompletionQueue, ConnRequest, Nic, Vi};
use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

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

fn table() -> &'static RwLock<IdMap<usize, Entry>> {
    static T: OnceLock<RwLock<IdMap<usize, Entry>>> = OnceLock::new();
    T.get_or_init(Default::default)
}

/// The handle of each VI, NIC and completion queue, by the safe API's identity (for
/// callbacks).
fn reverse() -> &'static RwLock<IdMap<(usize, u64), usize>> {
    static T: OnceLock<RwLock<IdMap<(usize, u64), usize>>> = OnceLock::new();
    T.get_or_init(Default::default)
}

static NEXT: AtomicUsize = AtomicUsize::new(1);

fn identity(e: &Entry) -> Option<(usize, u64)> {
    match e {
        Entry::Vi(v) => Some((2, v.id())),
        Entry::Nic(n) => Some((1, n.id())),
        Entry::Cq(c) => Some((3, c.id())),
        Entry::Conn(_) => None,
    }
}

/// Put `e` in the table; its handle.
pub(crate) fn insert(e: Entry) -> *mut c_void {
    let key = (NEXT.fetch_add(1, Ordering::Relaxed) << 3) | e.kind();
    if let Some(id) = identity(&e) {
        reverse().write().unwrap_or_else(|p| p.into_inner()).insert(id, key);
    }
    table().write().unwrap_or_else(|p| p.into_inner()).insert(key, e);
    key as *mut c_void
}

/// The object `h` names, cloned (the table is not held while it is used).
pub(crate) fn get(h: *mut c_void) -> Option<Entry> {
    table().read().unwrap_or_else(|p| p.into_inner()).get(&(h as usize)).cloned()
}

/// Take `h` out of the table.
pub(crate) fn remove(h: *mut c_void) -> Option<Entry> {
    let e = table().write().unwrap_or_else(|p| p.into_inner()).remove(&(h as usize));
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
    match get(h) {
        Some(Entry::Nic(n)) => Ok(n),
        _ => Err(BAD),
    }
}

/// The VI `h` names.
pub(crate) fn vi(h: *mut c_void) -> Result<Vi, Code> {
    match get(h) {
        Some(Entry::Vi(v)) => Ok(v),
        _ => Err(BAD),
    }
}

/// The completion queue `h` names.
pub(crate) fn cq(h: *mut c_void) -> Result<CompletionQueue, Code> {
    match get(h) {
        Some(Entry::Cq(c)) => Ok(c),
        _ => Err(BAD),
    }
}
