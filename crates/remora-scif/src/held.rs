//! A blocking send or receive made in slices ([`Held`]): how the C library's `scif_send`
//! and `scif_recv` wait, so that a thread cancelled inside one ends between two slices,
//! while the call still holds its side of the endpoint throughout, as one blocking call
//! does (no other thread's bytes come between the call's).

use crate::conn::{Conn, ExclGuard};
use crate::msg::Limit;
use crate::{Endpoint, Result};
use std::sync::Arc;
use std::time::Duration;

/// One side of a connected endpoint, held for a transfer in slices
/// ([`Endpoint::hold_send`], [`Endpoint::hold_recv`]); dropping it lets the side go.
pub struct Held {
    ep: Endpoint,
    conn: Arc<Conn>,
    send: bool,
}

impl std::fmt::Debug for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Held").field("endpoint", &self.ep.fd()).field("send", &self.send).finish()
    }
}

impl Endpoint {
    /// Hold this endpoint's sending side for a blocking `scif_send` made in slices
    /// ([`Held::send_for`]): other threads' sends wait until it is dropped.
    ///
    /// # Errors
    /// As [`Endpoint::send`] before it sends anything.
    pub fn hold_send(&self) -> Result<Held> {
        let conn = self.live_conn()?.clone();
        conn.send_lock.hold();
        Ok(Held { ep: self.clone(), conn, send: true })
    }

    /// Hold this endpoint's receiving side for a blocking `scif_recv` made in slices
    /// ([`Held::recv_for`]): other threads' receives wait until it is dropped.
    ///
    /// # Errors
    /// As [`Endpoint::recv`] before it receives anything.
    pub fn hold_recv(&self) -> Result<Held> {
        let conn = self.conn()?.clone();
        conn.recv_lock.hold();
        Ok(Held { ep: self.clone(), conn, send: false })
    }
}

impl Endpoint {
    /// The first slice of a blocking `scif_send` made in slices: sends for at most
    /// `slice` and returns the bytes queued (all of `data`, or fewer, possibly none), and,
    /// when some are left, the sending side still held for the next slices (no other
    /// thread's bytes come between the call's, as in one blocking call).
    ///
    /// # Errors
    /// As [`Endpoint::send`].
    // Inlined into the C library's entry point: called across the crate boundary, the
    // C 8-byte ping-pong measured some 40 ns a call slower (12 runs: 330 ns one-way beside
    // 270 ns for the same code reached through `Endpoint::recv`; 280 ns inlined).
    #[inline]
    pub fn send_within(&self, data: &[u8], slice: Duration) -> Result<(usize, Option<Held>)> {
        let conn = self.live_conn()?;
        let side = conn.send_lock.lock();
        let n = self.send_inner(data, true, Limit::of(slice), true)?;
        if n == data.len() {
            return Ok((n, None));
        }
        Ok((n, Some(Held::keep(self, conn, side, true))))
    }

    /// The first slice of a blocking `scif_recv` made in slices, as
    /// [`Endpoint::send_within`] (the receiving side held when `buf` is not full).
    ///
    /// # Errors
    /// As [`Endpoint::recv`].
    #[inline] // as `send_within`
    pub fn recv_within(&self, buf: &mut [u8], slice: Duration) -> Result<(usize, Option<Held>)> {
        let conn = self.conn()?;
        let side = conn.recv_lock.lock();
        let n = self.recv_inner(buf, true, Limit::of(slice), true)?;
        if n == buf.len() {
            return Ok((n, None));
        }
        Ok((n, Some(Held::keep(self, conn, side, false))))
    }
}

impl Held {
    /// The side `guard` locks, kept past the first slice.
    #[cold]
    fn keep(ep: &Endpoint, conn: &Arc<Conn>, guard: ExclGuard<'_>, send: bool) -> Held {
        std::mem::forget(guard);
        Held { ep: ep.clone(), conn: conn.clone(), send }
    }

    /// One slice of a blocking `scif_send`: sleeps for room at most `slice` in all and
    /// returns the bytes queued by then (all of `data`, or fewer, possibly none).
    ///
    /// # Errors
    /// As [`Endpoint::send`]; [`crate::Error::Invalid`] on a receiving side.
    pub fn send_for(&self, data: &[u8], slice: Duration) -> Result<usize> {
        if !self.send {
            return Err(crate::Error::Invalid("a held receiving side cannot send".into()));
        }
        self.ep.send_inner(data, true, Limit::of(slice), true)
    }

    /// One slice of a blocking `scif_recv`: sleeps for bytes at most `slice` in all and
    /// returns the bytes taken by then (`buf` full, or fewer, possibly none).
    ///
    /// # Errors
    /// As [`Endpoint::recv`]; [`crate::Error::Invalid`] on a sending side.
    pub fn recv_for(&self, buf: &mut [u8], slice: Duration) -> Result<usize> {
        if self.send {
            return Err(crate::Error::Invalid("a held sending side cannot receive".into()));
        }
        self.ep.recv_inner(buf, true, Limit::of(slice), true)
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let lock = if self.send { &self.conn.send_lock } else { &self.conn.recv_lock };
        lock.unlock();
    }
}
