//! A pager flow kept open by whoever holds it ([`HeldFlow`]), and the handle that stops it
//! from another thread ([`FlowStop`]).

use super::super::rma::{Sink, Source};
use super::{shared_flow, Flow};
use crate::dsm::RemoteRange;
use crate::Session;
use std::sync::Arc;

/// A pager flow to one remote range, kept open by whoever holds it (the flows of
/// [`range_write`](super::range_write) and [`range_read`](super::range_read) last only
/// while someone uses them): transfers that must not pay a dial each, SISCI DMA.
pub struct HeldFlow(Flow);

impl std::fmt::Debug for HeldFlow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeldFlow").finish()
    }
}

impl HeldFlow {
    /// The session's pager flow to `range` (shared with its maps of that memory). `None`
    /// where no pager flow can be had.
    pub fn open(session: &Arc<Session>, range: &Arc<dyn RemoteRange>) -> Option<HeldFlow> {
        shared_flow(session, range).map(HeldFlow)
    }

    /// Whether an error made the flow unusable (the holder opens another, or goes through
    /// the daemon). Never waits: a flow another thread is using now counts as sound, as the
    /// process's books count it (its user would find out otherwise).
    pub fn broken(&self) -> bool {
        match self.0.try_lock() {
            Ok(d) => d.unusable().is_some(),
            Err(std::sync::TryLockError::WouldBlock) => false,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner().unusable().is_some(),
        }
    }

    /// As [`HeldFlow::write`], unless another thread moves bytes over the flow now (a
    /// transfer, a map's fetch or flush): then `None`, and nothing sent.
    pub fn write_if_free(&self, roffset: u64, src: Source<'_>) -> Option<std::io::Result<()>> {
        let mut d = self.0.try_lock().ok()?;
        Some(d.write_now(roffset, src))
    }

    /// As [`HeldFlow::read`], unless another thread moves bytes over the flow now: `None`.
    pub fn read_if_free(&self, roffset: u64, mut out: Sink<'_>) -> Option<std::io::Result<()>> {
        let mut d = self.0.try_lock().ok()?;
        Some(d.read_many(roffset, &mut out))
    }

    /// A handle that stops this flow from another thread ([`FlowStop::stop`]), for a holder
    /// that learns first that the home stopped answering (its route fell silent): a
    /// transfer blocked on the flow fails at once instead of waiting for the flow's patience.
    /// Never waits: `None` while another thread is using the flow (ask again later), or
    /// when the socket cannot be shared.
    pub fn stopper(&self) -> Option<FlowStop> {
        let d = match self.0.try_lock() {
            Ok(d) => d,
            Err(std::sync::TryLockError::WouldBlock) => return None,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
        };
        d.s.try_clone().ok().map(FlowStop)
    }

    /// As [`range_write`](super::range_write), over this flow: returns once the home has
    /// the bytes.
    ///
    /// # Errors
    /// As [`range_write`](super::range_write).
    pub fn write(&self, roffset: u64, src: Source<'_>) -> std::io::Result<()> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).write_now(roffset, src)
    }

    /// As [`range_read`](super::range_read), over this flow.
    ///
    /// # Errors
    /// As [`range_read`](super::range_read).
    pub fn read(&self, roffset: u64, mut out: Sink<'_>) -> std::io::Result<()> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).read_many(roffset, &mut out)
    }
}

/// Stops a [`HeldFlow`] from another thread (see [`HeldFlow::stopper`]). Holds the flow's
/// socket open while it lives: keep it no longer than the flow.
#[derive(Debug)]
pub struct FlowStop(std::net::TcpStream);

impl FlowStop {
    /// Shut the flow's socket down: what waits on it fails now, and every later transfer
    /// over it fails (its holder opens another, or leaves the transfer to the daemon).
    pub fn stop(&self) {
        let _ = self.0.shutdown(std::net::Shutdown::Both);
    }
}
