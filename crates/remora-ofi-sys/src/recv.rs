//! The endpoint's receive buffers: posted at the open, posted again after each receive
//! completion (one that failed too). A posting that finds the queue full (`FI_EAGAIN`) is
//! tried once and the buffer parked, then posted again at each read of completions (which
//! drives the provider's progress) until it succeeds, so that the endpoint never runs out
//! of them; [`Endpoint::unposted`] says how many wait. At the open any other failure of
//! `fi_recv` fails the open (naming the call); after it, such a buffer is parked too.

use crate::{ffi, Endpoint, Error, RECV_ID};

#[cfg(test)]
thread_local! {
    /// Tests: how many postings of receive buffers made on this thread are refused next,
    /// and the (positive) code they fail with.
    pub(crate) static REFUSE: std::cell::Cell<(usize, i32)> = const { std::cell::Cell::new((0, 0)) };
}

impl Endpoint {
    /// Post receive buffer `slot`, once (the progress thread must not spin here).
    fn post_recv(&self, slot: usize) -> Result<(), Error> {
        #[cfg(test)]
        if let Some(code) = REFUSE.with(|r| {
            let (n, code) = r.get();
            (n > 0).then(|| {
                r.set((n - 1, code));
                code
            })
        }) {
            return Err(Error::from_rc("fi_recv", -code));
        }
        let recv = self.recv.lock().unwrap_or_else(|p| p.into_inner());
        let Some(b) = recv.get(slot) else { return Ok(()) };
        let desc = b.2.as_ref().map_or(std::ptr::null_mut(), |r| r.desc);
        // SAFETY: the buffer is owned by the endpoint and freed only after it is closed.
        let rc = unsafe { ffi::rofi_recv(self.raw, b.0.cast(), b.1, desc, RECV_ID + slot as u64) };
        match rc {
            0 => Ok(()),
            _ => Err(Error::from_rc("fi_recv", rc)),
        }
    }

    /// Post receive buffer `slot` at the open: a full queue parks it (posted at the next read
    /// of completions); any other failure is the open's.
    pub(crate) fn post_first(&self, slot: usize) -> Result<(), Error> {
        match self.post_recv(slot) {
            Err(e) if e.is_full() => {
                self.unposted.lock().unwrap_or_else(|p| p.into_inner()).push(slot);
                Ok(())
            }
            other => other,
        }
    }

    /// Post receive buffer `slot`; should that fail, it is posted again at the next read of
    /// completions.
    pub(crate) fn repost(&self, slot: usize) {
        if self.post_recv(slot).is_err() {
            self.unposted.lock().unwrap_or_else(|p| p.into_inner()).push(slot);
        }
    }

    /// Post again the receive buffers whose posting failed (each once).
    pub(crate) fn repost_failed(&self) {
        let slots = std::mem::take(&mut *self.unposted.lock().unwrap_or_else(|p| p.into_inner()));
        for slot in slots {
            self.repost(slot);
        }
    }

    /// How many receive buffers are not posted now (their posting failed; they are posted
    /// again at each read of completions). While any is not, fewer messages can arrive at
    /// once; should they stay so, the caller says it.
    pub fn unposted(&self) -> usize {
        self.unposted.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// The `len` bytes a receive completion put in `slot` (none for a receive that failed:
    /// give 0); the buffer is posted again (later, should that fail now: it is never lost).
    pub fn received(&self, slot: usize, len: usize) -> Vec<u8> {
        let out = {
            let recv = self.recv.lock().unwrap_or_else(|p| p.into_inner());
            let Some(b) = recv.get(slot) else { return Vec::new() };
            let n = len.min(b.1);
            // SAFETY: the slot's receive completed, so the provider no longer writes it
            // until it is posted again below; n is within the buffer.
            unsafe { std::slice::from_raw_parts(b.0, n) }.to_vec()
        };
        self.repost(slot);
        out
    }
}

#[cfg(test)]
#[path = "recv_tests.rs"]
mod tests;
