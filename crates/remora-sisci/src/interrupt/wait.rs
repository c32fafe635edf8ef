//! Waits on an interrupt's page that notice the node daemon going away.

use super::Core;
use crate::{Error, Result};
use remora_sys::intr::IntrWait;
use std::time::{Duration, Instant};

/// Wait on an interrupt's page, in slices, so that a wait without end still notices the
/// node daemon going away (its triggers from other hosts, and its bookkeeping, are gone).
///
/// # Errors
/// [`Error::System`] when the daemon is gone.
pub(super) fn watched_wait(
    core: &Core,
    spin: Duration,
    timeout: Option<Duration>,
    mut ready: impl FnMut(u32) -> bool,
) -> Result<IntrWait> {
    const SLICE: Duration = Duration::from_millis(200);
    let deadline = timeout.map(|t| Instant::now() + t);
    let mut spin = spin;
    loop {
        let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        let slice = left.map_or(SLICE, |l| l.min(SLICE));
        match super::owned::wait(core, spin, Some(slice), &mut ready) {
            IntrWait::TimedOut => {}
            other => return Ok(other),
        }
        // Checked before a short wait's time-out too: the C library waits in slices of
        // 100 ms (cancellation points), each of which must see the daemon gone.
        if core.desc.session().daemon_gone() {
            return Err(Error::System("the node daemon is gone".into()));
        }
        if left.is_some_and(|l| l <= slice) {
            return Ok(IntrWait::TimedOut);
        }
        spin = Duration::ZERO;
    }
}
