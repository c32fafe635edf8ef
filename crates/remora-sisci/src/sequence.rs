//! Error-checked sequences of accesses to a map (`SCICreateMapSequence` and the calls on a
//! sequence).

use crate::map::Map;
use crate::{DepToken, Descriptor, Error, Result};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// The status of a sequence (`sci_sequence_status_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SequenceStatus {
    /// No error since the last check (`SCI_SEQ_OK`).
    Ok,
    /// A transient error: retry the transfer (`SCI_SEQ_RETRIABLE`).
    Retriable,
    /// A fatal error: start the sequence again before retrying (`SCI_SEQ_NOT_RETRIABLE`).
    NotRetriable,
    /// An error whose kind is not known yet: start again (`SCI_SEQ_PENDING`).
    Pending,
}

#[derive(Debug)]
struct SeqInner {
    map: Map,
    token: Mutex<Option<DepToken>>,
    removed: AtomicBool,
}

/// An error-checked sequence of accesses to a map (`sci_sequence_t`).
///
/// On one host the only errors are lost connections (the exporting process or node went
/// away, or the exporter forced a disconnect): they make every later start and check
/// report [`SequenceStatus::NotRetriable`]. Link errors between hosts are reported here too.
#[derive(Debug, Clone)]
pub struct Sequence {
    inner: Arc<SeqInner>,
}

impl Sequence {
    pub(crate) fn new(map: Map, token: DepToken) -> Sequence {
        Sequence {
            inner: Arc::new(SeqInner {
                map,
                token: Mutex::new(Some(token)),
                removed: AtomicBool::new(false),
            }),
        }
    }

    /// The descriptor it was made through (its map's).
    pub fn descriptor(&self) -> &Descriptor {
        self.inner.map.descriptor()
    }

    fn live(&self) -> Result<&SeqInner> {
        if self.inner.removed.load(Ordering::Acquire) {
            return Err(Error::IllegalParameter("sequence removed".into()));
        }
        Ok(&self.inner)
    }

    /// The map this sequence checks.
    pub fn map(&self) -> &Map {
        &self.inner.map
    }

    /// `SCIStartSequence`: `Ok` when no error is pending on the map's link.
    ///
    /// # Errors
    /// [`Error::IllegalParameter`] for a removed sequence.
    pub fn start(&self) -> Result<SequenceStatus> {
        let inner = self.live()?;
        inner.map.acquire();
        Ok(if inner.map.link_lost() { SequenceStatus::NotRetriable } else { SequenceStatus::Ok })
    }

    /// `SCICheckSequence`: flush (unless `no_flush`), wait for stores to complete (unless
    /// `no_store_barrier`), and report whether an error happened since the last start/check.
    ///
    /// # Errors
    /// [`Error::IllegalParameter`] for a removed sequence.
    pub fn check(&self, no_flush: bool, no_store_barrier: bool) -> Result<SequenceStatus> {
        let inner = self.live()?;
        if !no_flush {
            inner.map.flush();
        } else if !no_store_barrier {
            std::sync::atomic::fence(Ordering::SeqCst);
        }
        Ok(if inner.map.link_lost() { SequenceStatus::NotRetriable } else { SequenceStatus::Ok })
    }

    /// `SCIStoreBarrier`: every store made before it has reached the segment's memory.
    pub fn store_barrier(&self) {
        self.inner.map.flush();
    }

    /// `SCIFlush` on this sequence's map: the stores made so far are on their way (for a
    /// segment of another host, sent home without waiting for them to land); stores made
    /// later arrive after them.
    pub fn flush(&self) {
        self.inner.map.send();
    }

    /// `SCIRemoveSequence`.
    ///
    /// # Errors
    /// [`Error::IllegalParameter`] when already removed.
    pub fn remove(&self) -> Result<()> {
        let inner = self.live()?;
        inner.removed.store(true, Ordering::Release);
        inner.token.lock().unwrap_or_else(|p| p.into_inner()).take();
        Ok(())
    }
}
