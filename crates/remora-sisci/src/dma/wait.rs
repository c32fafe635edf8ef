//! Waiting for a posted job to end, and stopping one: `SCIWaitForDMAQueue` and
//! `SCIAbortDMAQueue`, for a job of the engine's and for one the posting thread makes
//! over the process's own flow.

use super::DmaState;
use crate::{spin, Error, Result};
use std::time::Duration;

impl super::DmaQueue {
    /// `SCIWaitForDMAQueue`: wait for the posted job to end (`None`: forever) and return
    /// the final state; a finished queue returns its state at once.
    ///
    /// # Errors
    /// [`Error::IllegalOperation`] when idle, gathering, or posted with a callback;
    /// [`Error::Timeout`].
    pub fn wait(&self, timeout: Option<Duration>) -> Result<DmaState> {
        {
            let mut st = self.lock()?;
            self.settle(&mut st);
            match st.phase {
                Some(DmaState::Posted) if st.with_callback => return Err(Error::IllegalOperation),
                Some(DmaState::Posted) if st.on_flow => {
                    drop(st);
                    return self.flow_ends(timeout);
                }
                Some(DmaState::Posted) => {}
                Some(s @ (DmaState::Done | DmaState::Error | DmaState::Aborted)) => return Ok(s),
                _ => return Err(Error::IllegalOperation),
            }
        }
        // Wait in slices, so that a daemon (the DMA engine) that dies ends the wait.
        let start = std::time::Instant::now();
        loop {
            let slice = match timeout {
                Some(t) => t.saturating_sub(start.elapsed()).min(Duration::from_millis(200)),
                None => Duration::from_millis(200),
            };
            if self.inner.page.wait_done(spin(), Some(slice)).is_some() {
                return Ok(self.state());
            }
            if self.inner.desc.session().daemon_gone() {
                let mut st = self.inner.st.lock().unwrap_or_else(|p| p.into_inner());
                st.phase = Some(DmaState::Error);
                st.inflight.clear();
                return Ok(DmaState::Error);
            }
            if timeout.is_some_and(|t| start.elapsed() >= t) {
                return Err(Error::Timeout);
            }
        }
    }

    /// `SCIAbortDMAQueue`: stop the posted job (at the engine's next 4 MiB boundary, or
    /// the posting thread's when it copies a long job between segments of this host) and
    /// wait for it to stop; the state is then ABORTED, or DONE/ERROR if it ended first. A
    /// job the posting thread makes over the process's flow (at most 1 MiB, or the
    /// program's memory) is not stopped part-way: the abort waits for its end, up to 30 s,
    /// and, should the flow fail and the job go to the engine, for the engine's end.
    ///
    /// # Errors
    /// [`Error::IllegalOperation`] when idle or gathering.
    pub fn abort(&self) -> Result<()> {
        let mut st = self.lock()?;
        self.settle(&mut st);
        match st.phase {
            // A job over the process's flow is not stopped part-way: it ends soon. One
            // copied here stops at its next 4 MiB boundary.
            Some(DmaState::Posted) if st.on_flow => {
                self.inner.stop_here.store(true, std::sync::atomic::Ordering::SeqCst);
                drop(st);
                return self.flow_ends(Some(Duration::from_secs(30))).map(|_| ());
            }
            Some(DmaState::Posted) => {}
            Some(DmaState::Done | DmaState::Error | DmaState::Aborted) => return Ok(()),
            _ => return Err(Error::IllegalOperation),
        }
        self.inner.page.request_abort();
        drop(st);
        self.inner.page.wait_done(spin(), Some(Duration::from_secs(30))).ok_or(Error::Timeout)?;
        self.state();
        Ok(())
    }

    /// Wait (another thread than the posting one) for a job made over the process's flow
    /// to end, or to be handed to the engine, then as [`DmaQueue::wait`].
    fn flow_ends(&self, timeout: Option<Duration>) -> Result<DmaState> {
        let start = std::time::Instant::now();
        while self.inner.st.lock().unwrap_or_else(|p| p.into_inner()).on_flow {
            if timeout.is_some_and(|t| start.elapsed() >= t) {
                return Err(Error::Timeout);
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        let left = timeout.map(|t| t.saturating_sub(start.elapsed()));
        self.wait(left)
    }
}
