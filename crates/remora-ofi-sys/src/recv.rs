//! The endpoint's receive buffers: posted at the open, posted again after each receive
//! completion (one that failed too), and, should a posting fail, again at each read of
//! completions until it succeeds, so that the endpoint never runs out of them.

use crate::{ffi, Endpoint, Error, RECV_ID};

impl Endpoint {
    fn post_recv(&self, slot: usize) -> Result<(), Error> {
        #[cfg(test)]
        use std::sync::atomic::Ordering::Relaxed;
        #[cfg(test)]
        if self.refuse_posts.fetch_update(Relaxed, Relaxed, |n| n.checked_sub(1)).is_ok() {
            return Err(Error { code: 5, what: "fi_recv: refused by the test".into() });
        }
        let recv = self.recv.lock().unwrap_or_else(|p| p.into_inner());
        let Some(b) = recv.get(slot) else { return Ok(()) };
        let desc = b.2.as_ref().map_or(std::ptr::null_mut(), |r| r.desc);
        for _ in 0..100 {
            // SAFETY: the buffer is owned by the endpoint and freed only after it is closed.
            let rc = unsafe { ffi::rofi_recv(self.raw, b.0.cast(), b.1, desc, RECV_ID + slot as u64) };
            match rc {
                0 => return Ok(()),
                -11 => std::thread::yield_now(), // FI_EAGAIN: again (later, after progress)
                _ => return Err(Error::from_rc("fi_recv", rc)),
            }
        }
        Err(Error::from_rc("fi_recv", -11))
    }

    /// Post receive buffer `slot`; should that fail, it is posted again at the next read of
    /// completions (which drives the provider's progress).
    pub(crate) fn repost(&self, slot: usize) {
        if self.post_recv(slot).is_err() {
            self.unposted.lock().unwrap_or_else(|p| p.into_inner()).push(slot);
        }
    }

    /// Post again the receive buffers whose posting failed.
    pub(crate) fn repost_failed(&self) {
        let slots = std::mem::take(&mut *self.unposted.lock().unwrap_or_else(|p| p.into_inner()));
        for slot in slots {
            self.repost(slot);
        }
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
