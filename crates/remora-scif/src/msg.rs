//! Messaging on a connected endpoint: `scif_send` and `scif_recv` through the connection's
//! ring, ringing the peer's doorbell only when it is not already watching.

use crate::conn::Conn;
use crate::endpoint::{NOTICE, RECHECK, SPIN};
use crate::{Endpoint, Error, Result};
use remora_sys::bell;
use std::os::fd::AsFd;
use std::sync::atomic::{fence, Ordering};
use std::time::{Duration, Instant};

/// How a send or receive treats its side of the endpoint (the lock that keeps other
/// threads' transfers from coming between its bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SideLock {
    /// Take it for the call.
    Take,
    /// The caller holds it already ([`crate::Held`]).
    Held,
    /// Take it, and keep it past the call when the call ends short (the first slice of a
    /// transfer made in slices: the caller adopts it, [`crate::Held`]).
    KeepIfShort,
}

impl Endpoint {
    /// `scif_send`: queue `data` for the peer. Blocking (`SCIF_SEND_BLOCK`) returns when
    /// all of it is queued; otherwise as much as fits now is queued (0 bytes when the
    /// peer's queue is full: MPSS's 4 KiB queue holds 4095 bytes the peer has not
    /// received; `REMORA_SCIF_QUEUE_BYTES`; with a peer on another host and a direct flow,
    /// the queue is the flow's socket buffer). Returns the bytes queued.
    ///
    /// # Errors
    /// [`Error::NotConnected`], [`Error::Reset`] when the peer closed before anything was
    /// sent, [`Error::BadEndpoint`] when the endpoint was closed.
    pub fn send(&self, data: &[u8], block: bool) -> Result<usize> {
        self.send_inner(data, block, Limit::NONE, SideLock::Take)
    }

    /// The body of [`Endpoint::send`], the sending side taken and let go as `side` says.
    pub(crate) fn send_inner(&self, data: &[u8], block: bool, limit: Limit, side: SideLock) -> Result<usize> {
        let c = self.live_conn()?;
        if c.remote {
            // Stores into maps of the far peer's windows reach it before this message (free
            // when none are on their way).
            remora_client::dsm::settle();
        }
        let g = (side != SideLock::Held).then(|| c.send_lock.lock());
        let r = c.lost_if(if c.direct {
            self.send_direct(c, data, block, limit)
        } else {
            self.send_ring(c, data, block, limit)
        });
        if side == SideLock::KeepIfShort && matches!(r, Ok(n) if n < data.len()) {
            std::mem::forget(g);
        }
        r
    }

    /// [`Endpoint::send_inner`] into the ring, the side held.
    #[inline(always)]
    fn send_ring(&self, c: &Conn, data: &[u8], block: bool, mut limit: Limit) -> Result<usize> {
        let d = c.side;
        let mut sent = 0;
        loop {
            let (n, unseen) = c.region.push(d, &data[sent..]);
            sent += n;
            if let Some(u) = unseen {
                // The receiver may be on its way into a receive: give it a moment to look
                // before paying for a doorbell. (A relay to another host never watches.)
                let t = Instant::now();
                let mut seen = false;
                for i in 0u32.. {
                    if c.remote {
                        break;
                    }
                    if c.region.noticed(&u) {
                        seen = true;
                        break;
                    }
                    if i.is_multiple_of(32) && t.elapsed() >= NOTICE {
                        break;
                    }
                }
                if c.remote {
                    // The relay of our daemon is the consumer: a byte every time, which it
                    // drains without the flag. With the flag, our send(2) woke the relay
                    // (an urgent thread) onto our core before we could mark the byte as
                    // there, and it could only wait for us to run again: a scheduler slice
                    // on a busy machine.
                    bell::ring(c.peer_ringer.as_fd());
                } else if !seen {
                    bell::ring_once(c.region.bell_pending(d), c.peer_ringer.as_fd());
                }
            }
            if sent == data.len() {
                return Ok(sent);
            }
            // The ring is full: not writable until the peer takes some.
            self.stuff(c, d);
            let Some(wait) = limit.next(block) else { return Ok(sent) };
            let ready =
                bell::wait(self.as_fd(), true, Some(wait)).map_err(|e| Error::NoMemory(e.to_string()))?;
            if self.inner.closed.load(Ordering::Acquire) {
                return if sent > 0 { Ok(sent) } else { Err(Error::BadEndpoint) };
            }
            if c.peer_closed() || (!ready.writable && c.session.hung_up()) {
                return if sent > 0 { Ok(sent) } else { Err(Error::Reset) };
            }
        }
    }

    /// Make our descriptor unwritable while ring `d` is full (the consumer undoes it).
    ///
    /// Stuffed even when the flag is up already: the consumer lowers the flag, then reads
    /// our ringer until it is empty, so an unstuff of its still reading when we stuffed
    /// anew took our new stuffing too, and a blocking send would spin on a descriptor that
    /// stays writable (its peer's next `took` has nothing to read). A stuffing still there
    /// costs one refused `send`.
    fn stuff(&self, c: &Conn, d: usize) {
        bell::stuff(self.as_fd());
        let flag = c.region.tx_stuffed(d);
        // A fresh flag races with a release the consumer made an instant before without
        // seeing it (`stuffed_wait`); one up since our last look was seen by every release.
        let room =
            if flag.swap(1, Ordering::SeqCst) == 0 { c.region.stuffed_wait(d) } else { c.region.has_room(d) };
        if room && flag.swap(0, Ordering::SeqCst) == 1 {
            bell::unstuff(self.inner.ringer.as_fd());
        }
    }

    /// After taking bytes from ring `d`: let a stuffed producer write again.
    fn took(&self, c: &Conn, d: usize) {
        if c.region.tx_stuffed(d).load(Ordering::SeqCst) != 0
            && c.region.tx_stuffed(d).swap(0, Ordering::SeqCst) == 1
        {
            bell::unstuff(c.peer_ringer.as_fd());
        }
    }

    /// Keep the descriptor readable exactly while ring `d` holds bytes (after a fence).
    fn settle(&self, c: &Conn, d: usize) {
        if !c.region.has_data(d) {
            if bell::take(c.region.bell_pending(d), self.as_fd()) {
                fence(Ordering::SeqCst);
                if c.region.has_data(d) {
                    bell::ring_once(c.region.bell_pending(d), self.inner.ringer.as_fd());
                }
            }
        } else {
            bell::ring_once(c.region.bell_pending(d), self.inner.ringer.as_fd());
        }
    }

    /// `scif_recv`: take bytes the peer sent. Blocking (`SCIF_RECV_BLOCK`) returns when
    /// `buf` is full; otherwise it takes what is there (possibly nothing). After the peer
    /// closed, what it sent can still be taken.
    ///
    /// # Errors
    /// [`Error::NotConnected`], [`Error::Reset`] when the peer closed and nothing is left
    /// (or this node's daemon is gone and nothing is left: a non-blocking receive notices
    /// within 64 calls), [`Error::BadEndpoint`] when the endpoint was closed.
    pub fn recv(&self, buf: &mut [u8], block: bool) -> Result<usize> {
        self.recv_inner(buf, block, Limit::NONE, SideLock::Take)
    }

    /// The body of [`Endpoint::recv`], the receiving side taken and let go as `side` says.
    pub(crate) fn recv_inner(
        &self,
        buf: &mut [u8],
        block: bool,
        limit: Limit,
        side: SideLock,
    ) -> Result<usize> {
        let c = self.conn()?;
        let g = (side != SideLock::Held).then(|| c.recv_lock.lock());
        let len = buf.len();
        let r = c.lost_if(if c.direct {
            self.recv_direct(c, buf, block, limit)
        } else {
            self.recv_ring(c, buf, block, limit)
        });
        if side == SideLock::KeepIfShort && matches!(r, Ok(n) if n < len) {
            std::mem::forget(g);
        }
        r
    }

    /// [`Endpoint::recv_inner`] from the ring, the side held.
    #[inline(always)]
    fn recv_ring(&self, c: &Conn, buf: &mut [u8], block: bool, mut limit: Limit) -> Result<usize> {
        let d = 1 - c.side;
        let mut got = 0;
        let mut took = false;
        let mut inside = false;
        let r = loop {
            let (n, mid) = c.region.pop_ex(d, &mut buf[got..]);
            got += n;
            took |= n > 0;
            if n > 0 {
                inside = mid;
            }
            if got == buf.len() {
                break Ok(got);
            }
            if c.peer_closed() && !c.region.has_data(d) {
                break if got > 0 { Ok(got) } else { Err(Error::Reset) };
            }
            if !block {
                // Nothing, and the node daemon is gone: nothing will come (ECONNRESET, as
                // a blocking receive answers), rather than 0 bytes forever.
                if got == 0 && !c.region.has_data(d) && c.daemon_lost_lately() {
                    break Err(Error::Reset);
                }
                break Ok(got);
            }
            if took {
                // Room for a producer that may be waiting for it, before we wait.
                fence(Ordering::SeqCst);
                self.took(c, d);
                took = false;
            }
            match self.wait_data(c, d, &mut limit) {
                Ok(true) => {}
                // The time came first: what was taken so far.
                Ok(false) => break Ok(got),
                Err(e) => break if got > 0 { Ok(got) } else { Err(e) },
            }
        };
        if took {
            self.took(c, d);
        }
        if inside || c.region.bell_pending(d).load(Ordering::SeqCst) != 0 {
            self.settle(c, d);
        }
        // Otherwise every byte still in the ring came with a doorbell of its own or comes
        // from a push the sender will ring for (it saw no watcher on its first slot), so
        // the descriptor's readiness is already right.
        r
    }

    /// Wait for bytes in ring `d` (or the peer's close): spin, then sleep on the doorbell.
    /// `Ok(false)`: `until` came first.
    // Out of line: inlined into its callers, the spin's code came out differently in
    // each, and the C library's ping-pong was some 25 ns a call slower through one of them.
    #[inline(never)]
    fn wait_data(&self, c: &Conn, d: usize, limit: &mut Limit) -> Result<bool> {
        let ready = || c.region.has_data(d) || c.peer_closed();
        c.region.watch(d, true);
        let mut start = None;
        let mut n = 0u32;
        let spun = loop {
            if ready() {
                break true;
            }
            n = n.wrapping_add(1);
            // Read the clock rarely: the common wait is far shorter than one reading.
            if n.is_multiple_of(256) {
                if start.get_or_insert_with(Instant::now).elapsed() >= SPIN {
                    break false;
                }
                // Bytes from another host come through our daemon's relay, which needs a
                // core to deliver them: offer ours now and then (`sched_yield` returns at
                // once when nobody wants it). A spin that never yielded kept one of two
                // cores from the relays and made a message across hosts 2.5x slower.
                if c.remote {
                    std::thread::yield_now();
                }
            }
        };
        if spun {
            // The waiter word names a slot now filled: it can never match again.
            return Ok(true);
        }
        c.region.watch(d, false);
        if c.region.settle_wait(d) {
            return Ok(true);
        }
        loop {
            if ready() {
                return Ok(true);
            }
            if self.inner.closed.load(Ordering::Acquire) {
                return Err(Error::BadEndpoint);
            }
            let Some(wait) = limit.next(true) else { return Ok(false) };
            let r =
                bell::wait(self.as_fd(), false, Some(wait)).map_err(|e| Error::NoMemory(e.to_string()))?;
            if r.readable && !r.hung_up && !c.region.has_data(d) {
                // A stale bell (a sender's ring can land after we took its bytes and
                // cleared the flag): take every byte, whatever the flag says, or poll would
                // keep answering at once; then re-arm if bytes slipped in meanwhile.
                if !bell::take(c.region.bell_pending(d), self.as_fd()) {
                    bell::drain(self.as_fd());
                }
                fence(Ordering::SeqCst);
                if c.region.has_data(d) {
                    bell::ring_once(c.region.bell_pending(d), self.inner.ringer.as_fd());
                }
            }
            if !r.readable && !r.hung_up && c.session.hung_up() && !ready() {
                return Err(Error::Reset);
            }
            if r.hung_up && !ready() && !self.inner.closed.load(Ordering::Acquire) {
                // Hang-up without a closed flag: the daemon went away.
                if c.session.hung_up() {
                    return Err(Error::Reset);
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }
}

/// How long a blocking send or receive may sleep: without end ([`Limit::NONE`]), or a
/// slice in all, counted from its first sleep (so a call that needs no sleep never reads
/// the clock).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limit {
    slice: Option<Duration>,
    at: Option<Instant>,
}

impl Limit {
    /// No end: sleep until the bytes or the room come.
    pub(crate) const NONE: Limit = Limit { slice: None, at: None };

    /// At most `slice` of sleep in all.
    pub(crate) fn of(slice: Duration) -> Limit {
        Limit { slice: Some(slice), at: None }
    }

    /// Start counting the slice now, if it has not started (a sleep elsewhere, in the
    /// kernel, is about to begin).
    pub(crate) fn begin(&mut self) {
        if let Some(slice) = self.slice {
            self.at.get_or_insert_with(|| Instant::now() + slice);
        }
    }

    /// How long to sleep now: [`RECHECK`] at most, less when the slice ends sooner;
    /// `None` when the call must not sleep (not `block`, or its slice is spent).
    pub(crate) fn next(&mut self, block: bool) -> Option<Duration> {
        if !block {
            return None;
        }
        let Some(slice) = self.slice else { return Some(RECHECK) };
        let at = *self.at.get_or_insert_with(|| Instant::now() + slice);
        let left = at.saturating_duration_since(Instant::now());
        (!left.is_zero()).then(|| left.min(RECHECK))
    }
}
