//! Barriers: a successful close means every access to the import since the open
//! completed; any failure since the open (the export unpublished or destroyed, its process
//! or node gone, a link down) makes the close fail, never pass in silence.
//!
//! Open drops what maps of another host's export hold stale (so loads see what reached the
//! export); close pushes every store made through maps home, fails if an access failed or
//! the export was reported lost, and across hosts asks the exporter's node whether the
//! connection still stands.
//!
//! A barrier does not keep its import alive: once the import is disconnected (or its last
//! handle dropped) its descriptors and its node's interrupt are gone whatever barriers remain,
//! and their open, close and order are `BarrierUninitialized`, as for a barrier never
//! initialised; destroy still frees them.

use crate::import::{ImportSegment, Inner};
use crate::{Error, Result};
use std::sync::{Mutex, Weak};

/// What a barrier covers (`rsm_barrier_type_t`). Every kind covers the accesses of the
/// import it was made on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BarrierType {
    /// `RSM_BARRIER_SEGMENT`.
    Segment,
    /// `RSM_BARRIER_NODE`.
    Node,
    /// `RSM_BARRIER_SEGMENT_THREAD`.
    SegmentThread,
    /// `RSM_BARRIER_NODE_THREAD`.
    NodeThread,
}

#[derive(Debug, Default)]
struct State {
    open: bool,
    errors_at_open: u64,
    destroyed: bool,
}

/// A barrier on an import (`rsmapi_barrier_t`).
#[derive(Debug)]
pub struct Barrier {
    import: Weak<Inner>,
    kind: BarrierType,
    state: Mutex<State>,
}

impl ImportSegment {
    /// `rsm_memseg_import_init_barrier`.
    ///
    /// # Errors
    /// [`Error::BadSegment`] once disconnected.
    pub fn init_barrier(&self, kind: BarrierType) -> Result<Barrier> {
        self.state()?.barriers += 1;
        Ok(Barrier { import: std::sync::Arc::downgrade(&self.inner), kind, state: Mutex::default() })
    }
}

impl Barrier {
    fn state(&self) -> Result<std::sync::MutexGuard<'_, State>> {
        let st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if st.destroyed {
            return Err(Error::BarrierUninitialized);
        }
        Ok(st)
    }

    /// What it covers.
    pub fn kind(&self) -> BarrierType {
        self.kind
    }

    /// The import it was made on, while it is connected.
    pub fn import(&self) -> Option<ImportSegment> {
        self.live().ok()
    }

    /// The import, while connected; `BarrierUninitialized` once it is disconnected or gone.
    fn live(&self) -> Result<ImportSegment> {
        let inner = self.import.upgrade().ok_or(Error::BarrierUninitialized)?;
        let import = ImportSegment { inner };
        drop(import.state().map_err(|_| Error::BarrierUninitialized)?);
        Ok(import)
    }

    /// `rsm_memseg_import_open_barrier`: start a scope of accesses.
    ///
    /// # Errors
    /// [`Error::BarrierUninitialized`] once destroyed or the import disconnected.
    pub fn open(&self) -> Result<()> {
        let mut st = self.state()?;
        let import = self.live()?;
        let mut imp = import.state().map_err(|_| Error::BarrierUninitialized)?;
        if !st.open {
            imp.open_barriers += 1;
        }
        ImportSegment::acquire(&imp);
        st.errors_at_open = imp.errors;
        st.open = true;
        Ok(())
    }

    /// `rsm_memseg_import_close_barrier`: end the scope; success means every access since
    /// the open completed.
    ///
    /// # Errors
    /// [`Error::BarrierUninitialized`] once destroyed or the import disconnected;
    /// [`Error::BarrierNotOpened`]; [`Error::ConnAborted`] when the export or its node went
    /// away; [`Error::BarrierFailure`] when an access since the open failed or stores could
    /// not reach the export.
    pub fn close(&self) -> Result<()> {
        let mut st = self.state()?;
        let import = self.live()?;
        if !st.open {
            return Err(Error::BarrierNotOpened);
        }
        st.open = false;
        let mut imp = import.state().map_err(|_| Error::BarrierUninitialized)?;
        imp.open_barriers = imp.open_barriers.saturating_sub(1);
        let flushed = ImportSegment::flush(&imp);
        let failed = imp.errors != st.errors_at_open;
        drop(imp);
        if import.is_lost() {
            return Err(Error::ConnAborted);
        }
        // Across hosts, ask the exporter's node: its loss may not have been noticed yet.
        // On this host every access was a store into the export's own memory, and the
        // export's loss arrives as an event within microseconds.
        if !import.is_on_this_host() {
            import.verify()?;
        }
        if failed || !flushed {
            return Err(Error::BarrierFailure);
        }
        Ok(())
    }

    /// `rsm_memseg_import_order_barrier`: stores before it reach the export before stores
    /// after it.
    ///
    /// # Errors
    /// [`Error::BarrierUninitialized`] once destroyed or the import disconnected;
    /// [`Error::BarrierNotOpened`]; [`Error::ConnAborted`]; [`Error::BarrierFailure`].
    pub fn order(&self) -> Result<()> {
        let st = self.state()?;
        let import = self.live()?;
        if !st.open {
            return Err(Error::BarrierNotOpened);
        }
        let imp = import.state().map_err(|_| Error::BarrierUninitialized)?;
        let flushed = ImportSegment::flush(&imp);
        drop(imp);
        if import.is_lost() {
            return Err(Error::ConnAborted);
        }
        if !flushed {
            return Err(Error::BarrierFailure);
        }
        Ok(())
    }

    /// `rsm_memseg_import_destroy_barrier` (also of a barrier whose import was
    /// disconnected).
    ///
    /// # Errors
    /// [`Error::BarrierUninitialized`] when destroyed already.
    pub fn destroy(&self) -> Result<()> {
        let mut st = self.state()?;
        if let Some(inner) = self.import.upgrade() {
            let mut imp = inner.state.lock().unwrap_or_else(|p| p.into_inner());
            if st.open {
                imp.open_barriers = imp.open_barriers.saturating_sub(1);
            }
            imp.barriers = imp.barriers.saturating_sub(1);
        }
        st.destroyed = true;
        st.open = false;
        Ok(())
    }
}
