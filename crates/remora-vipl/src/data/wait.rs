//! Reaping and waiting: `VipRecvDone`, `VipSendDone`, `VipSendWait` and `VipRecvWait`
//! (polling a moment on one host, sleeping on the done count or the pair's own stream
//! across hosts, on the doorbell otherwise).

use crate::link::direct::{Pump, WAIT_SLICE};
use crate::{cq, layout};
use crate::{Error, Result, Vi};
use std::sync::atomic::{fence, Ordering};
use std::time::{Duration, Instant};

/// How long a waiter polls before it sleeps.
const SPIN: Duration = Duration::from_micros(20);
/// How long a waiter for a peer on another host sleeps on its done count before it looks
/// at the VI's state again.
const FAR_SLICE: Duration = Duration::from_millis(10);
/// How long a waiter for a peer on another host whose next message comes by the channel
/// (its last one was long) looks at its done count, yielding, before it sleeps on it: a
/// stream's next message lands within tens of microseconds, and taken without a sleep it
/// costs the node's thread no wake-up and this one no switch back in (issue 15: the 64 KiB
/// send stream across hosts was faster with it in 40 of 60 interleaved runs, by a median
/// 10%; the 8-byte row, whose waiter reads the pair's stream, is not touched).
const FAR_POLL: Duration = Duration::from_micros(40);
/// How long a waiter that raised its flag still watches the ring before it sleeps: far
/// longer than a store takes to become visible to another core (as SCIF's rings).
const SETTLE: Duration = remora_sys::msgring::RACE;

impl Vi {
    /// `VipRecvDone`: the oldest completed receive, as (descriptor address, its memory
    /// handle).
    ///
    /// # Errors
    /// [`Error::NotDone`] when none has completed.
    pub fn recv_done(&self) -> Result<(usize, u32)> {
        match self.inner.poll_short() {
            Some(Some(d)) => Ok(d),
            Some(None) => Err(Error::NotDone),
            None => self.inner.reap_and(true)?.ok_or(Error::NotDone),
        }
    }

    /// [`Vi::recv_done`], polled for up to `race`.
    fn recv_done_within(&self, race: Duration) -> Result<(usize, u32)> {
        let start = Instant::now();
        loop {
            match self.recv_done() {
                Err(Error::NotDone) if start.elapsed() < race => std::hint::spin_loop(),
                r => return r,
            }
        }
    }

    /// `VipSendDone`: the oldest completed send.
    ///
    /// # Errors
    /// [`Error::NotDone`] when none has completed.
    pub fn send_done(&self) -> Result<(usize, u32)> {
        self.inner.send.lock().done.pop_front().ok_or(Error::NotDone)
    }

    /// `VipSendWait`: wait up to `timeout` (`None`: forever) for a completed send.
    ///
    /// # Errors
    /// [`Error::Timeout`].
    pub fn send_wait(&self, timeout: Option<Duration>) -> Result<(usize, u32)> {
        let vi = &self.inner;
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            // Counted under the queue's lock, as a completion looks at the count under it:
            // a send completed after this look bumps the sequence this wait sleeps on.
            let seq = {
                let mut q = vi.send.lock();
                if let Some(d) = q.done.pop_front() {
                    return Ok(d);
                }
                vi.send_waiters.fetch_add(1, Ordering::SeqCst);
                vi.send_seq.load(Ordering::SeqCst)
            };
            let left = match deadline {
                Some(d) => d.checked_duration_since(Instant::now()).unwrap_or_default(),
                None => Duration::from_millis(100),
            };
            if !left.is_zero() {
                remora_sys::sync::futex_wait(&vi.send_seq, seq, Some(left.min(Duration::from_millis(100))));
            }
            vi.send_waiters.fetch_sub(1, Ordering::SeqCst);
            if left.is_zero() {
                return vi.send.lock().done.pop_front().ok_or(Error::Timeout);
            }
        }
    }

    /// `VipRecvWait`: wait up to `timeout` (`None`: forever) for a completed receive:
    /// polls a moment, then sleeps on the VI's doorbell (the peer rings it only then), or
    /// on its completion queue's when the receive queue feeds one (the peer rings that one
    /// on every completion).
    ///
    /// # Errors
    /// [`Error::Timeout`].
    pub fn recv_wait(&self, timeout: Option<Duration>) -> Result<(usize, u32)> {
        let vi = &self.inner;
        let start = Instant::now();
        // A peer on another host: no spin here (only a short look before a sleep on the
        // done count that follows a long message, `FAR_POLL`). Its completions are stored
        // here by this node's thread that serves the peer's channel, which needs a core to
        // do it, and wakes a waiter sleeping on the done count at once (a poll of 500 µs,
        // yielding, made the 8-byte ping-pong 2-3 times slower on two cores).
        let (spin, yielding) =
            if vi.peer_here.load(Ordering::Relaxed) { (SPIN, false) } else { (Duration::ZERO, true) };
        let spin = spin.min(timeout.unwrap_or(spin));
        // Across hosts the loop below looks first (and before its first sleep only as much
        // as it must).
        while vi.peer_here.load(Ordering::Relaxed) || vi.link().is_none() {
            if let Ok(d) = self.recv_done() {
                return Ok(d);
            }
            if start.elapsed() >= spin {
                break;
            }
            if yielding {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
        let mut polled = false;
        loop {
            let link = vi.link();
            if link.as_ref().is_some_and(|l| l.is_far()) && vi.recv_cq.is_none() {
                // A peer on another host: sleep on the done count, which the peer's stores
                // move and this host's node wakes after each (no flag, no bell: a store in
                // flight cannot be missed). Slices of 10 ms notice a disconnect, which
                // rings the bell instead.
                let word = vi.map.load(layout::DONE);
                let seen = word as u32;
                let k = vi.recv_next.load(Ordering::Acquire);
                let landed = layout::count_in(vi.conn(), word, k) > k;
                let direct = link.as_ref().and_then(|l| l.direct());
                // Waiting on the pair's own stream with nothing in sight: the wait below
                // reads what came meanwhile (no read of an empty socket first).
                let on_stream = direct.filter(|d| !landed && !d.has(k) && d.wait_here(k, false));
                if on_stream.is_none() || vi.recv_ready.load(Ordering::Acquire) > 0 {
                    if let Ok(d) = self.recv_done() {
                        return Ok(d);
                    }
                } else {
                    vi.describe_pending();
                }
                let left = match timeout {
                    Some(t) => t.checked_sub(start.elapsed()).unwrap_or_default(),
                    None => FAR_SLICE,
                };
                if left.is_zero() {
                    return self.recv_done().map_err(|_| Error::Timeout);
                }
                vi.check_peer(&vi.nic);
                // A short message comes on the pair's own stream: sleep in a read of its
                // socket (woken by the sender's bytes themselves, which it takes in at
                // once), else on the done count.
                match direct.filter(|d| d.wait_here(k, landed)) {
                    Some(d) if left >= WAIT_SLICE => d.pump(&vi.map, &vi.recv_next, Pump::Wait),
                    Some(d) => {
                        d.wait(left);
                        d.pump(&vi.map, &vi.recv_next, Pump::Now);
                    }
                    None => {
                        // With a pair's stream, a wait here is for a message after a long
                        // one: looked at a moment first (once per call: an idle waiter's
                        // slices sleep whole).
                        let left = if direct.is_some() && !polled {
                            polled = true;
                            let until = Instant::now() + FAR_POLL.min(left);
                            while vi.map.load(layout::DONE) as u32 == seen && Instant::now() < until {
                                std::thread::yield_now();
                            }
                            // The sleep ends by the timeout all the same.
                            timeout.map_or(left, |t| t.saturating_sub(start.elapsed()))
                        } else {
                            left
                        };
                        vi.map.wait_word(layout::DONE, seen, left.min(FAR_SLICE));
                        // A slice that nothing ended: the stream is looked at all the same.
                        if let Some(d) = direct.filter(|_| vi.map.load(layout::DONE) as u32 == seen) {
                            d.pump(&vi.map, &vi.recv_next, Pump::Now);
                        }
                    }
                }
                continue;
            }
            let flagged = link.as_ref().filter(|l| !l.peer.bell_always && vi.recv_cq.is_none());
            if let Some(l) = flagged {
                l.store(layout::PEER_WAITING, l.tag(1));
                if !l.map.is_local() {
                    l.settle();
                } else {
                    fence(Ordering::SeqCst);
                }
            }
            // With a CQ, counted among its doorbell's sleepers before the last look: an
            // error or a completion taken in by another thread from then on rings it.
            let cq_waiter = vi.recv_cq.as_ref().map(|cq| cq.waiter(false));
            // A sender on this host does not fence its entry before it looks at the flag:
            // watch the ring the moment an entry takes to become visible.
            let got = if flagged.is_some() { self.recv_done_within(SETTLE) } else { self.recv_done() };
            let most = if cq_waiter.is_some() { cq::SLICE } else { Duration::from_millis(50) };
            let left = match timeout {
                Some(t) => t.checked_sub(start.elapsed()),
                None => Some(most),
            };
            match left.filter(|l| !l.is_zero() && got.is_err()).map(|l| l.min(most)) {
                // The peer rings the CQ's doorbell for a receive queue that feeds one (every
                // sleeper wakes, and looks at its own VI's ring), the VI's otherwise.
                Some(slice) => match cq_waiter {
                    Some(w) => w.sleep(slice, Duration::ZERO),
                    None => {
                        let _ = vi.bell.wait_with_spin(Some(slice), Duration::ZERO);
                    }
                },
                None => drop(cq_waiter),
            }
            if let Some(l) = flagged {
                l.store(layout::PEER_WAITING, l.tag(0));
            }
            if let Ok(d) = got {
                return Ok(d);
            }
            if left.is_none_or(|l| l.is_zero()) {
                return self.recv_done().map_err(|_| Error::Timeout);
            }
        }
    }
}
