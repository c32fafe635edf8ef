//! The data path's calls: posting descriptors, reaping and waiting for completions. How a
//! payload reaches the peer is in `deliver.rs`.
//!
//! A descriptor is read once, under one look at the registered memory: its control
//! segment, its data segments, and the memory they name. The descriptor's control segment
//! is kept, so completing it later writes the program's memory directly, unless memory was
//! deregistered meanwhile (then it is looked up again). Sends, RDMA writes and RDMA reads
//! complete before `post_send` returns.

use crate::cache::Taken;
use crate::few::Few;
use crate::layout::{
    self, control, status, DataSegment, Descriptor, CONTROL, DESCRIPTOR_ALIGNMENT, ENTRIES, SEGMENT,
};
use crate::link::direct::{Pump, WAIT_SLICE};
use crate::link::Link;
use crate::posted::Posted;
use crate::vi::{lock, SendQ, ViState, RELIABLE_DELIVERY, UNRELIABLE};
use crate::{Error, ErrorCode, Nic, ProtectionTag, Result, Vi};
use remora_sisci::UserRegion;
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

/// What a send did: the error bits for its descriptor, and what follows once the send
/// queue is let go (the VI breaks; the peer hears why).
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    pub(crate) bits: u32,
    /// Break the VI with this code (and tell the peer when true).
    pub(crate) fail: Option<(ErrorCode, bool)>,
    /// Tell the peer the connection broke with this code.
    pub(crate) say: Option<ErrorCode>,
}

impl Outcome {
    pub(crate) fn bits(bits: u32) -> Outcome {
        Outcome { bits, ..Outcome::default() }
    }

    /// A send on a VI whose peer said `said` about itself (it went): nothing is delivered.
    /// A reliable VI breaks, the send flushed; an unreliable one's message is dropped.
    #[cold]
    #[inline(never)]
    fn peer_gone(said: u64, reliability: u16) -> Outcome {
        if reliability == UNRELIABLE {
            return Outcome::default();
        }
        Outcome {
            bits: status::DESC_FLUSHED_ERROR,
            fail: Some((crate::vi::said_code(said), false)),
            say: None,
        }
    }
}

pub(crate) fn aligned(addr: usize) -> Result<()> {
    if addr == 0 || !addr.is_multiple_of(DESCRIPTOR_ALIGNMENT) {
        return Err(Error::InvalidParameter(format!("descriptor at {addr:#x} is not 64-byte aligned")));
    }
    Ok(())
}

impl Nic {
    /// Read the descriptor at `addr` (in memory registered as `handle`).
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] when it is not 64-byte aligned or not inside that memory.
    pub fn read_descriptor(&self, addr: usize, handle: u32) -> Result<Descriptor> {
        aligned(addr)?;
        let mem = lock(&self.inner.mem);
        let outside =
            || Error::InvalidParameter(format!("descriptor at {addr:#x} is not in memory handle {handle}"));
        let cs = mem.local(handle, addr, CONTROL, None).ok_or_else(outside)?;
        let mut c = [0u8; CONTROL];
        cs.read(0, &mut c)?;
        let n = Descriptor::seg_count(&c);
        let all = mem.local(handle, addr, CONTROL + n * SEGMENT, None).ok_or_else(outside)?;
        let mut b = vec![0u8; CONTROL + n * SEGMENT];
        all.read(0, &mut b)?;
        Descriptor::decode(&b)
    }

    /// Write `d` at `addr` (in memory registered as `handle`): how a Rust program builds
    /// descriptors in registered memory.
    ///
    /// # Errors
    /// As [`Nic::read_descriptor`].
    pub fn write_descriptor(&self, addr: usize, handle: u32, d: &Descriptor) -> Result<()> {
        aligned(addr)?;
        let b = d.encode();
        let mem = lock(&self.inner.mem);
        let r = mem
            .local(handle, addr, b.len(), None)
            .ok_or_else(|| Error::InvalidParameter("descriptor outside its memory".into()))?;
        r.write(0, &b)?;
        Ok(())
    }

    /// Read the descriptor at `addr` for posting on a VI with protection tag `ptag`, with
    /// the memory its segments name (a receive's: where it lies in pieces too).
    pub(crate) fn take(&self, addr: usize, handle: u32, ptag: ProtectionTag, recv: bool) -> Result<Taken> {
        aligned(addr)?;
        let mem = lock(&self.inner.mem);
        let epoch = self.inner.mem_epoch.load(Ordering::Acquire);
        let outside =
            || Error::InvalidParameter(format!("descriptor at {addr:#x} is not in memory handle {handle}"));
        let ctl = mem.local(handle, addr, CONTROL, None).ok_or_else(outside)?;
        let mut c = [0u8; CONTROL];
        ctl.read(0, &mut c)?;
        let n = Descriptor::seg_count(&c);
        let all = mem.local(handle, addr, CONTROL + n * SEGMENT, None).ok_or_else(outside)?;
        let control = u16::from_le_bytes([c[14], c[15]]);
        let immediate = u32::from_le_bytes([c[20], c[21], c[22], c[23]]);
        let mut t = Taken { ctl, all, epoch, control, immediate, ..Taken::default() };
        if n > layout::MAX_SEGMENTS {
            t.too_many = true;
            return Ok(t);
        }
        let rdma = !recv && control & control::OP_MASK != control::OP_SENDRECV;
        let mut local = Some(Few::default());
        for i in 0..n {
            let mut b = [0u8; SEGMENT];
            all.read(CONTROL + i * SEGMENT, &mut b)?;
            let s = DataSegment::decode(&b);
            if i == 0 && rdma {
                t.remote = Some(s);
                continue;
            }
            t.total = t.total.saturating_add(s.len);
            if recv && mem.chunks(s.handle, s.addr as usize, s.len as usize, ptag, &mut t.chunks).is_none() {
                local = None;
            }
            match (&mut local, mem.local(s.handle, s.addr as usize, s.len as usize, Some(ptag))) {
                (Some(l), Some(r)) => l.push(r),
                _ => local = None,
            }
        }
        t.local = local;
        Ok(t)
    }

    /// Write a completed descriptor's fields into its control segment `ctl` (found in
    /// registered memory at `epoch`), the status last.
    #[inline]
    pub(crate) fn finish(&self, ctl: &UserRegion, epoch: u64, st: u32, len: Option<u32>, imm: Option<u32>) {
        if !self.still_registered(ctl, epoch) {
            return;
        }
        if let Some(i) = imm {
            let _ = ctl.write(20, &i.to_le_bytes());
        }
        if let Some(l) = len {
            let _ = ctl.write(24, &l.to_le_bytes());
        }
        fence(Ordering::Release);
        let _ = ctl.write(28, &st.to_le_bytes());
    }

    /// Whether every one of `rs`, registered at `epoch`, still is, in memory registered no
    /// later ([`crate::memory`]'s `covers_since`: what lies there now, registered again
    /// since, is in pieces the peer was never told of).
    pub(crate) fn still_registered_all(&self, rs: &[UserRegion], epoch: u64) -> bool {
        self.inner.mem_epoch.load(Ordering::Acquire) == epoch || {
            let mem = lock(&self.inner.mem);
            rs.iter().all(|r| mem.covers_since(r.addr(), r.len(), epoch))
        }
    }

    /// Whether `r`, registered at `epoch`, still is.
    #[inline]
    pub(crate) fn still_registered(&self, r: &UserRegion, epoch: u64) -> bool {
        self.inner.mem_epoch.load(Ordering::Acquire) == epoch || self.covered(r)
    }

    /// Whether `r` lies in registered memory (registrations changed since it was found).
    #[inline(never)]
    fn covered(&self, r: &UserRegion) -> bool {
        lock(&self.inner.mem).covers(r.addr(), r.len())
    }
}

impl Vi {
    /// `VipPostRecv`: post the receive descriptor at `addr` (in memory `handle`).
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] for a descriptor that is not 64-byte aligned or not in
    /// that memory; [`Error::Resource`] when the queue is full.
    pub fn post_recv(&self, addr: usize, handle: u32) -> Result<()> {
        let vi = &self.inner;
        let mut guard = vi.recv.lock();
        if let Some(r) = vi.post_later(&mut guard, addr, handle) {
            return r;
        }
        vi.settle(&mut guard);
        let (st, ptag) = match &guard.link {
            Some((l, ptag)) if !l.broken.load(Ordering::Acquire) => (ViState::Connected, *ptag),
            _ => {
                drop(guard);
                let ptag = vi.ptag();
                let st = *lock(&vi.state);
                guard = vi.recv.lock();
                vi.settle(&mut guard);
                (st, ptag)
            }
        };
        let q = &mut *guard;
        let t = q.cache.take(&vi.nic, addr, handle, ptag, true)?;
        if q.posted.len() >= ENTRIES {
            return Err(Error::Resource(format!("{ENTRIES} receives posted")));
        }
        let bad = t.too_many || t.local.is_none();
        if bad || st == ViState::Error {
            let p = Posted::of(addr, handle, t);
            let why = if bad { status::PROTECTION_ERROR } else { status::DESC_FLUSHED_ERROR };
            vi.complete_recv(q, &p, status::DONE | status::OP_RECEIVE | why, 0, None);
            return Ok(());
        }
        vi.nic.finish(&t.ctl, t.epoch, 0, None, None);
        // Filled in place in the queue's ring: no posted receive built and moved.
        q.posted.push(addr, handle, t);
        // A peer that said it went is told nothing more (its VI may serve another
        // connection by now); the receive waits for this VI's break or disconnect.
        if st == ViState::Connected && vi.peer_said() == 0 {
            let link = q.link.take();
            let published = link.as_ref().is_none_or(|(l, _)| vi.publish(q, l));
            q.link = link;
            if !published {
                // The description could not reach a peer on another host: the VI breaks
                // now, not when the link's loss is noticed.
                drop(guard);
                vi.fail(ErrorCode::ConnLost, None, false);
            }
        }
        Ok(())
    }

    /// `VipPostSend`: post the send, RDMA write or RDMA read descriptor at `addr` (in
    /// memory `handle`). It has completed when this returns; reap it with
    /// [`Vi::send_done`].
    ///
    /// # Errors
    /// [`Error::InvalidState`] unless connected or in error (where it completes flushed);
    /// [`Error::InvalidParameter`] as [`Vi::post_recv`].
    pub fn post_send(&self, addr: usize, handle: u32) -> Result<()> {
        let vi = &self.inner;
        let mut guard = vi.send.lock();
        if vi.send_short(&mut guard, addr, handle) {
            drop(guard);
            vi.sent_now();
            return Ok(());
        }
        // While connected the link stays in the queue and is lent, not cloned (a clone and
        // its drop are two locked instructions on every send).
        let (state, other, attrs) = match &guard.link {
            Some((l, attrs)) if !l.broken.load(Ordering::Acquire) => (ViState::Connected, None, *attrs),
            _ => {
                drop(guard);
                let attrs = vi.attrs();
                let state = *lock(&vi.state);
                let link = vi.link();
                guard = vi.send.lock();
                (state, link, attrs)
            }
        };
        let sq = &mut *guard;
        let own = if other.is_none() { sq.link.take() } else { None };
        let mut cache = std::mem::take(&mut sq.cache);
        let link = other.as_ref().or(own.as_ref().map(|(l, _)| l));
        // Straight-line code, no value built under the lock and moved out of it: once the
        // completion entry is stored (its line on its way to the peer's core), a load the
        // core cannot serve from its pending stores waits for that line.
        let mut op = 0;
        let mut out = Outcome::default();
        let mut refused = None;
        match cache.take(&vi.nic, addr, handle, attrs.ptag, false) {
            Err(e) => refused = Some(e),
            Ok(t) => {
                op = t.control & control::OP_MASK;
                let opbits = match op {
                    control::OP_RDMAWRITE => status::OP_RDMA_WRITE,
                    control::OP_RDMAREAD => status::OP_RDMA_READ,
                    _ => status::OP_SEND,
                };
                match (state, link) {
                    (ViState::Connected, Some(link)) => {
                        // A VI whose peer said it went delivers nothing (the peer's VI may
                        // serve a new connection by now): a reliable one breaks, its send
                        // flushed; an unreliable one's message is dropped.
                        let said = vi.peer_said();
                        out = if said == 0 {
                            self.perform(sq, link, t, attrs)
                        } else {
                            Outcome::peer_gone(said, attrs.reliability)
                        };
                    }
                    (ViState::Error, _) => out.bits = status::DESC_FLUSHED_ERROR,
                    _ => refused = Some(Error::InvalidState),
                }
                if refused.is_none() {
                    vi.complete_send(sq, addr, handle, t, status::DONE | opbits | out.bits);
                }
            }
        }
        let tell = match (out.say, link) {
            (Some(c), Some(l)) => Some((c, l.clone())),
            _ => None,
        };
        sq.cache = cache;
        if own.is_some() {
            sq.link = own;
        }
        drop(guard);
        vi.sent_now();
        if let Some(e) = refused {
            return Err(e);
        }
        let st = out.bits;
        if let Some((code, tell)) = out.fail {
            vi.fail(code, None, tell);
        }
        if let Some((code, link)) = tell {
            link.say_error(code);
        }
        if st & status::ERROR_MASK != 0
            && st & status::TRANSPORT_ERROR == 0
            && attrs.reliability != UNRELIABLE
        {
            let code = if st & status::RDMA_PROT_ERROR != 0 {
                if op == control::OP_RDMAREAD {
                    ErrorCode::RdmarProt
                } else {
                    ErrorCode::RdmawProt
                }
            } else {
                ErrorCode::PostDesc
            };
            vi.fail(code, Some(addr), true);
        }
        Ok(())
    }

    /// Carry out descriptor `t`.
    fn perform(&self, sq: &mut SendQ, link: &Link, t: &Taken, attrs: crate::ViAttributes) -> Outcome {
        let vi = &self.inner;
        let op = t.control & control::OP_MASK;
        if t.control & control::RESERVED != 0 || op == 0x3 || t.too_many {
            return Outcome::bits(status::FORMAT_ERROR);
        }
        if op != control::OP_SENDRECV && t.remote.is_none() {
            return Outcome::bits(status::FORMAT_ERROR);
        }
        let imm = (t.control & control::IMMEDIATE != 0).then_some(t.immediate);
        let Some(sources) = &t.local else { return Outcome::bits(status::PROTECTION_ERROR) };
        let total: usize = sources.iter().map(|s| s.len()).sum();
        if total > attrs.max_transfer.min(link.peer.max_transfer) as usize {
            return Outcome::bits(status::LENGTH_ERROR);
        }
        let reliable = attrs.reliability != UNRELIABLE;
        match (op, t.remote) {
            (control::OP_SENDRECV, _) => {
                let st = status::DONE | status::OP_RECEIVE;
                vi.deliver(sq, link, reliable, Some(sources), imm, st, total as u32)
            }
            (control::OP_RDMAWRITE, Some(r)) => {
                // With immediate data, the completion goes down the channel with the bytes.
                let bits = vi.rdma(&mut sq.hint, link, r, sources, true, imm.is_some());
                if bits != 0 || imm.is_none() {
                    return Outcome::bits(bits);
                }
                let st = status::DONE | status::OP_REMOTE_RDMA_WRITE;
                vi.deliver(sq, link, reliable, None, imm, st, total as u32)
            }
            (control::OP_RDMAREAD, Some(r)) => {
                if attrs.reliability < RELIABLE_DELIVERY {
                    return Outcome::bits(status::FORMAT_ERROR);
                }
                Outcome::bits(vi.rdma(&mut sq.hint, link, r, sources, false, false))
            }
            _ => Outcome::bits(status::FORMAT_ERROR),
        }
    }

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
    /// polls a moment, then sleeps on the VI's doorbell (the peer rings it only then).
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
            // A sender on this host does not fence its entry before it looks at the flag:
            // watch the ring the moment an entry takes to become visible.
            let got = if flagged.is_some() { self.recv_done_within(SETTLE) } else { self.recv_done() };
            let left = match timeout {
                Some(t) => t.checked_sub(start.elapsed()),
                None => Some(Duration::from_millis(50)),
            };
            if got.is_err() {
                if let Some(left) = left.filter(|l| !l.is_zero()) {
                    let slice = left.min(Duration::from_millis(50));
                    if vi.recv_cq.is_some() {
                        std::thread::sleep(slice.min(Duration::from_micros(200)));
                    } else {
                        let _ = vi.bell.wait_with_spin(Some(slice), Duration::ZERO);
                    }
                }
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
