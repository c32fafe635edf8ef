//! `VipSendNotify`, `VipRecvNotify`, `VipCQNotify`: a handler that runs on a thread of
//! the library when the next completion comes, never inside the call that posted.

use crate::{CompletionQueue, Error, Result, Vi, ViState};
use std::time::Duration;

const SLICE: Duration = Duration::from_millis(50);

fn spawn(work: impl FnOnce() + Send + 'static) -> Result<()> {
    std::thread::Builder::new()
        .name("vipl-notify".into())
        .spawn(work)
        .map(|_| ())
        .map_err(|_| Error::Resource("no thread for the notification".into()))
}

impl Vi {
    /// `VipRecvNotify`: `handler` gets the next completed receive (descriptor address,
    /// memory handle), taken off the queue as [`Vi::recv_done`] would. The wait ends
    /// without a call when the VI is destroyed.
    ///
    /// # Errors
    /// [`Error::Resource`] when no thread can be started.
    pub fn recv_notify(&self, handler: impl FnOnce(&Vi, (usize, u32)) + Send + 'static) -> Result<()> {
        let weak = std::sync::Arc::downgrade(&self.inner);
        spawn(move || loop {
            let Some(inner) = weak.upgrade() else { return };
            let vi = Vi { inner };
            match vi.recv_wait(Some(SLICE)) {
                Ok(d) => return handler(&vi, d),
                Err(_) if vi.state() == ViState::Idle && std::sync::Arc::strong_count(&vi.inner) <= 2 => {
                    return
                }
                Err(_) => {}
            }
        })
    }

    /// `VipSendNotify`: as [`Vi::recv_notify`], for the next completed send.
    ///
    /// # Errors
    /// As [`Vi::recv_notify`].
    pub fn send_notify(&self, handler: impl FnOnce(&Vi, (usize, u32)) + Send + 'static) -> Result<()> {
        let weak = std::sync::Arc::downgrade(&self.inner);
        spawn(move || loop {
            let Some(inner) = weak.upgrade() else { return };
            let vi = Vi { inner };
            match vi.send_wait(Some(SLICE)) {
                Ok(d) => return handler(&vi, d),
                Err(_) if std::sync::Arc::strong_count(&vi.inner) <= 2 => return,
                Err(_) => {}
            }
        })
    }
}

impl CompletionQueue {
    /// `VipCQNotify`: `handler` gets the next completion's VI and queue (`true`: receive).
    ///
    /// # Errors
    /// As [`Vi::recv_notify`].
    pub fn notify(&self, handler: impl FnOnce(&Vi, bool) + Send + 'static) -> Result<()> {
        let cq = self.clone();
        spawn(move || loop {
            if let Ok((vi, recv)) = cq.wait(Some(SLICE)) {
                return handler(&vi, recv);
            }
        })
    }
}
