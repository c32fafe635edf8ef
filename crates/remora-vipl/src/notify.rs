//! `VipSendNotify`, `VipRecvNotify`, `VipCQNotify`: a handler that runs on a thread of
//! the library when the next completion comes, never inside the call that posted.

use crate::{CompletionQueue, Error, Result, Vi};
use std::time::{Duration, Instant};

const SLICE: Duration = Duration::from_millis(50);

fn spawn(work: impl FnOnce() + Send + 'static) -> Result<()> {
    std::thread::Builder::new()
        .name("vipl-notify".into())
        .spawn(work)
        .map(|_| ())
        .map_err(|_| Error::Resource("no thread for the notification".into()))
}

/// Wait in slices for what `next` brings, holding the VI only during a slice: the wait
/// ends without a call once the VI is destroyed or dropped (not by counting who else holds
/// it: a C handle and this thread may be its only holders for as long as the program
/// likes).
fn on_vi<T>(
    vi: &Vi,
    next: impl Fn(&Vi) -> Result<T> + Send + 'static,
    handler: impl FnOnce(&Vi, T) + Send + 'static,
) -> Result<()> {
    let weak = std::sync::Arc::downgrade(&vi.inner);
    spawn(move || loop {
        let Some(inner) = weak.upgrade() else { return };
        if !inner.nic.has_vi(&inner) {
            return;
        }
        let vi = Vi { inner };
        let start = Instant::now();
        match next(&vi) {
            Ok(d) => return handler(&vi, d),
            // A wait that failed at once (not a timeout) is not retried in a spin.
            Err(Error::Timeout) => {}
            Err(_) if start.elapsed() < SLICE / 5 => std::thread::sleep(SLICE / 5),
            Err(_) => {}
        }
    })
}

impl Vi {
    /// `VipRecvNotify`: `handler` gets the next completed receive (descriptor address,
    /// memory handle), taken off the queue as [`Vi::recv_done`] would. The wait ends
    /// without a call when the VI is destroyed.
    ///
    /// # Errors
    /// [`Error::Resource`] when no thread can be started.
    pub fn recv_notify(&self, handler: impl FnOnce(&Vi, (usize, u32)) + Send + 'static) -> Result<()> {
        on_vi(self, |vi| vi.recv_wait(Some(SLICE)), handler)
    }

    /// `VipSendNotify`: as [`Vi::recv_notify`], for the next completed send.
    ///
    /// # Errors
    /// As [`Vi::recv_notify`].
    pub fn send_notify(&self, handler: impl FnOnce(&Vi, (usize, u32)) + Send + 'static) -> Result<()> {
        on_vi(self, |vi| vi.send_wait(Some(SLICE)), handler)
    }
}

impl CompletionQueue {
    /// `VipCQNotify`: `handler` gets the next completion's VI and queue (`true`: receive).
    /// The wait ends without a call when the queue is destroyed or dropped (it keeps
    /// neither the queue nor its NIC alive).
    ///
    /// # Errors
    /// As [`Vi::recv_notify`].
    pub fn notify(&self, handler: impl FnOnce(&Vi, bool) + Send + 'static) -> Result<()> {
        let weak = self.downgrade();
        spawn(move || loop {
            let Some(cq) = weak.live() else { return };
            if let Ok((vi, recv)) = cq.wait(Some(SLICE)) {
                return handler(&vi, recv);
            }
        })
    }
}
