//! The handle table: C handles are numbers that name safe-API objects, never pointers the
//! library dereferences. A handle is `(n << 3) | kind`, `n` from a counter that only grows
//! (a stale handle never names a newer object) and `kind` telling exports from imports (so
//! `rsm_intr_signal_post` can take either) and both from the rest. NULL is never issued.

use crate::errors::Code;
use remora_client::id_hash::IdMap;
use remora_rsm::{Barrier, Controller, ExportSegment, ImportSegment, LocalMemory};
use std::collections::HashMap;
use std::ffi::c_int;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, RwLock};

const KIND_BITS: u32 = 3;

/// One object the table holds.
#[derive(Debug, Clone)]
pub(crate) enum Entry {
    /// `rsmapi_controller_handle_t`.
    Controller(Controller),
    /// `rsm_memseg_export_handle_t`.
    Export(ExportSegment),
    /// `rsm_memseg_import_handle_t`.
    Import(ImportSegment),
    /// `rsm_localmemory_handle_t`.
    LocalMem(LocalMemory),
    /// The state behind a caller's `rsmapi_barrier_t`.
    Barrier(Arc<Barrier>),
}

impl Entry {
    fn kind(&self) -> usize {
        match self {
            Entry::Controller(_) => 1,
            Entry::Export(_) => 2,
            Entry::Import(_) => 3,
            Entry::LocalMem(_) => 4,
            Entry::Barrier(_) => 5,
        }
    }
}

/// Parts of the table, each with its own lock on a cache line of its own: threads using
/// different handles (two threads each putting into its own import) take different locks,
/// and no lock word moves between their cores on every call.
const SHARDS: usize = 16;

/// One part: handles are numbers the library makes itself, each once, so its map hashes
/// them by one multiplication ([`IdMap`]), far cheaper than the default keyed hash.
#[derive(Default)]
#[repr(align(128))]
struct Shard(RwLock<IdMap<usize, Entry>>);

/// The part of the table that holds handle `h` (consecutive handles in different parts).
fn table(h: usize) -> &'static RwLock<IdMap<usize, Entry>> {
    static T: OnceLock<[Shard; SHARDS]> = OnceLock::new();
    &T.get_or_init(Default::default)[(h >> KIND_BITS) % SHARDS].0
}

static NEXT: AtomicUsize = AtomicUsize::new(1);

/// Put `e` in the table; its handle.
pub(crate) fn insert(e: Entry) -> usize {
    let key = (NEXT.fetch_add(1, Ordering::Relaxed) << KIND_BITS) | e.kind();
    table(key).write().unwrap_or_else(|p| p.into_inner()).insert(key, e);
    key
}

/// The object `h` names, cloned (the table is not held while it is used).
pub(crate) fn get(h: usize) -> Option<Entry> {
    table(h).read().unwrap_or_else(|p| p.into_inner()).get(&h).cloned()
}

/// Take `h` out of the table.
pub(crate) fn remove(h: usize) -> Option<Entry> {
    table(h).write().unwrap_or_else(|p| p.into_inner()).remove(&h)
}

/// The controller `h` names.
pub(crate) fn controller(h: usize) -> Result<Controller, Code> {
    match get(h) {
        Some(Entry::Controller(c)) => Ok(c),
        _ => Err(Code(crate::errors::RSMERR_BAD_CTLR_HNDL)),
    }
}

/// The export `h` names.
pub(crate) fn export(h: usize) -> Result<ExportSegment, Code> {
    match get(h) {
        Some(Entry::Export(e)) => Ok(e),
        _ => Err(Code(crate::errors::RSMERR_BAD_SEG_HNDL)),
    }
}

/// The import `h` names.
pub(crate) fn import(h: usize) -> Result<ImportSegment, Code> {
    match get(h) {
        Some(Entry::Import(i)) => Ok(i),
        _ => Err(Code(crate::errors::RSMERR_BAD_SEG_HNDL)),
    }
}

/// The local memory `h` names.
pub(crate) fn local_mem(h: usize) -> Result<LocalMemory, Code> {
    match get(h) {
        Some(Entry::LocalMem(m)) => Ok(m),
        _ => Err(Code(crate::errors::RSMERR_BAD_LOCALMEM_HNDL)),
    }
}

/// A poll descriptor handed out: the export or import handle it signals, the descriptor,
/// and how many `rsm_memseg_get_pollfd` calls hold it.
pub(crate) type PollEntry = (usize, std::os::fd::OwnedFd, u32);

/// Poll descriptors handed out, by descriptor.
pub(crate) fn pollfds() -> &'static RwLock<HashMap<c_int, PollEntry>> {
    static P: OnceLock<RwLock<HashMap<c_int, PollEntry>>> = OnceLock::new();
    P.get_or_init(Default::default)
}
