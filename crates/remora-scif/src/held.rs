//! A blocking send or receive made in slices ([`Held`]): how the C library's `scif_send`
//! and `scif_recv` wait, so that a thread cancelled inside one ends between two slices,
//! while the call still holds its side of the endpoint throughout, as one blocking call
//! does (no other thread's bytes come between the call's).

use crate::conn::Conn;
use crate::msg::{Limit, SideLock};
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
    /// `slice` and returns the bytes queued (all of `data`, or fewer, possibly none). When
    /// it queued fewer, the sending side stays held (no other thread's bytes come between
    /// the call's, as in one blocking call) and comes back as a [`Held`] for the next
    /// slices ([`Held::send_for`]), whose drop lets it go; when it queued all, nothing is
    /// held.
    ///
    /// # Errors
    /// As [`Endpoint::send`] (the side is not held then).
    // Inlined into the C library's entry point: called across the crate boundary, the
    // C 8-byte ping-pong measured some 40 ns a call slower (12 runs: 330 ns one-way beside
    // 270 ns for the same code reached through `Endpoint::recv`; 280 ns inlined).
    #[inline]
    pub fn send_within(&self, data: &[u8], slice: Duration) -> Result<(usize, Option<Held>)> {
        let n = self.send_inner(data, true, Limit::of(slice), SideLock::KeepIfShort)?;
        if n < data.len() {
            return Ok((n, Some(Held::adopt(self, true)?)));
        }
        Ok((n, None))
    }

    /// The first slice of a blocking `scif_recv` made in slices, as
    /// [`Endpoint::send_within`]: when `buf` is not full, the receiving side stays held
    /// and comes back as a [`Held`] for the next slices ([`Held::recv_for`]).
    ///
    /// # Errors
    /// As [`Endpoint::recv`].
    #[inline] // as `send_within`
    pub fn recv_within(&self, buf: &mut [u8], slice: Duration) -> Result<(usize, Option<Held>)> {
        let len = buf.len();
        let n = self.recv_inner(buf, true, Limit::of(slice), SideLock::KeepIfShort)?;
        if n < len {
            return Ok((n, Some(Held::adopt(self, false)?)));
        }
        Ok((n, None))
    }
}

impl Held {
    /// The side a first slice that ended short kept locked ([`SideLock::KeepIfShort`]):
    /// the slice moved bytes over the endpoint's connection, so it has one (and the lock
    /// kept is that connection's).
    #[cold]
    fn adopt(ep: &Endpoint, send: bool) -> Result<Held> {
        let conn = ep.inner_conn().ok_or(crate::Error::NotConnected)?.clone();
        Ok(Held { ep: ep.clone(), conn, send })
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
        self.ep.send_inner(data, true, Limit::of(slice), SideLock::Held)
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
        self.ep.recv_inner(buf, true, Limit::of(slice), SideLock::Held)
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let lock = if self.send { &self.conn.send_lock } else { &self.conn.recv_lock };
        lock.unlock();
    }
}
