//! Error-checked sequences of accesses to a map (`SCICreateMapSequence` and the calls on a
//! sequence).

use crate::map::Map;
use crate::{DepToken, Descriptor, Error, Result};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

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

/// How long [`Sequence::start`] waits for a route that is down to come back before it
/// answers [`SequenceStatus::Pending`] (so the guide's loop around it does not spin hot).
const START_PATIENCE: Duration = Duration::from_millis(10);

#[derive(Debug)]
struct SeqInner {
    map: Map,
    token: Mutex<Option<DepToken>>,
    removed: AtomicBool,
    /// The link outages of the map's connection already accounted for: counted at the
    /// last start or check that answered `Ok` or `Retriable`.
    seen: AtomicU64,
}

/// An error-checked sequence of accesses to a map (`sci_sequence_t`).
///
/// The states of the map's memory and what the calls answer in each:
///
/// | state | [`start`](Sequence::start) | [`check`](Sequence::check) |
/// |---|---|---|
/// | up, no outage since the last start/check | `Ok` | `Ok` |
/// | the route to the segment's node is down now (`SCI_CB_NOT_OPERATIONAL`, a silent peer being redialed) | `Pending` (after waiting 10 ms for it) | `Pending` (nothing flushed) |
/// | back up after an outage since the last start/check, or stores that could not be confirmed on a live connection | `Ok` | `Retriable` once (the next check is `Ok`) |
/// | gone for good: the exporter forced a disconnect or went away, its node or this node's daemon did, or the pager lost the home | the error ([`Error::NotConnected`] or [`Error::NodeNotResponding`]), which the C call turns into `SCI_SEQ_NOT_RETRIABLE` with the error code set | `NotRetriable` |
///
/// Maps of this host's memory never see an outage: they answer `Ok` until their
/// connection is lost.
#[derive(Debug, Clone)]
pub struct Sequence {
    inner: Arc<SeqInner>,
}

impl Map {
    /// `SCICreateMapSequence`.
    ///
    /// # Errors
    /// [`Error::IllegalParameter`] on an unmapped map.
    pub fn create_sequence(&self) -> Result<Sequence> {
        let hold = self.hold()?;
        Ok(Sequence::new(self.clone(), hold))
    }
}

impl Sequence {
    pub(crate) fn new(map: Map, token: DepToken) -> Sequence {
        let seen = map.remote_parent().map_or(0, |r| r.watch().outages());
        Sequence {
            inner: Arc::new(SeqInner {
                map,
                token: Mutex::new(Some(token)),
                removed: AtomicBool::new(false),
                seen: AtomicU64::new(seen),
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

    /// `SCIStartSequence`: clear the sequence's error state before a transfer. `Ok` (later
    /// loads see every store that reached the segment), or `Pending` while the route to the
    /// segment's node is down (call again: the guide's loop does).
    ///
    /// # Errors
    /// [`Error::IllegalParameter`] for a removed sequence; [`Error::NotConnected`] or
    /// [`Error::NodeNotResponding`] when the segment is gone for good (no start can
    /// succeed again: the guide's loop leaves by its error path).
    pub fn start(&self) -> Result<SequenceStatus> {
        let inner = self.live()?;
        let map = &inner.map;
        if let Some(e) = map.gone() {
            return Err(e);
        }
        let watch = map.remote_parent().map(|r| r.watch());
        if let Some(w) = watch {
            if w.is_down() && !w.wait_up(START_PATIENCE) {
                return match map.gone() {
                    Some(e) => Err(e),
                    None => Ok(SequenceStatus::Pending),
                };
            }
        }
        let outages = watch.map_or(0, |w| w.outages());
        if !map.acquire() {
            return Err(map.gone().unwrap_or(Error::NodeNotResponding));
        }
        inner.seen.store(outages, Ordering::SeqCst);
        Ok(SequenceStatus::Ok)
    }

    /// `SCICheckSequence`: flush (unless `no_flush`), wait for the stores to land (unless
    /// `no_store_barrier`), and report whether an error happened since the last start or
    /// check (see the table on [`Sequence`]). A check that answers `Retriable` accounts
    /// for the error: the next one answers `Ok` if nothing else happened.
    ///
    /// # Errors
    /// [`Error::IllegalParameter`] for a removed sequence.
    pub fn check(&self, no_flush: bool, no_store_barrier: bool) -> Result<SequenceStatus> {
        let inner = self.live()?;
        let map = &inner.map;
        let watch = map.remote_parent().map(|r| r.watch());
        if map.gone().is_some() {
            return Ok(SequenceStatus::NotRetriable);
        }
        if watch.is_some_and(|w| w.is_down()) {
            // Stores sent now could only wait for the silent peer: they stay until it is
            // back (or lost), and the transfer's fate is not known yet.
            return Ok(SequenceStatus::Pending);
        }
        let landed = match (no_flush, no_store_barrier) {
            (false, false) => map.flush(),
            (false, true) => map.send(),
            (true, false) => {
                std::sync::atomic::fence(Ordering::SeqCst);
                true
            }
            (true, true) => true,
        };
        if map.gone().is_some() {
            return Ok(SequenceStatus::NotRetriable);
        }
        if watch.is_some_and(|w| w.is_down()) {
            return Ok(SequenceStatus::Pending);
        }
        let outages = watch.map_or(0, |w| w.outages());
        let seen = inner.seen.swap(outages, Ordering::SeqCst);
        Ok(if landed && outages == seen { SequenceStatus::Ok } else { SequenceStatus::Retriable })
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
