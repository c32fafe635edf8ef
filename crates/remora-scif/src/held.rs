//! A blocking send or receive made in slices ([`Held`]): how the C library's `scif_send`
//! and `scif_recv` wait, so that a thread cancelled inside one ends between two slices,
//! while the call still holds its side of the endpoint throughout, as one blocking call
//! does (no other thread's bytes come between the call's).

use crate::conn::Conn;
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
    /// `slice`, and returns the bytes queued with, when some of `data` is left, the
    /// sending side held for the next slices ([`Held::send_for`]). A send that
    /// ends in its first slice (the common case) costs no more than [`Endpoint::send`].
    ///
    /// # Errors
    /// As [`Endpoint::send`].
    pub fn send_first(&self, data: &[u8], slice: Duration) -> Result<(usize, Option<Held>)> {
        let n = self.send_inner(data, true, Limit::of(slice), false)?;
        if n == data.len() {
            return Ok((n, None));
        }
        // Held from now on (as in `recv_first`: another thread's send may put its bytes in
        // the instant between).
        let c = self.conn()?;
        c.send_lock.hold();
        Ok((n, Some(Held { ep: self.clone(), conn: c.clone(), send: true })))
    }

    /// The first slice of a blocking `scif_recv` made in slices, as
    /// [`Endpoint::send_first`]: the bytes taken, and the receiving side still held when
    /// `buf` is not full yet ([`Held::recv_for`]).
    ///
    /// # Errors
    /// As [`Endpoint::recv`].
    pub fn recv_first(&self, buf: &mut [u8], slice: Duration) -> Result<(usize, Option<Held>)> {
        let n = self.recv_inner(buf, true, Limit::of(slice), false)?;
        if n == buf.len() {
            return Ok((n, None));
        }
        // Held from now on. (Taken around the first slice instead, the common case cost
        // some 25 ns more a call in the C library's ping-pong; a receive of another thread
        // may take bytes in the instant between, after a first slice of 100 ms.)
        let c = self.conn()?;
        c.recv_lock.hold();
        Ok((n, Some(Held { ep: self.clone(), conn: c.clone(), send: false })))
    }
}

impl Held {
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
