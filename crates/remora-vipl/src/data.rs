//! The data path's calls: posting descriptors (here), the descriptors read, taken and
//! completed in the program's memory (`data/descriptors.rs`), reaping and waiting for
//! completions (`data/wait.rs`). How a payload reaches the peer is in `deliver.rs`.
//!
//! Sends, RDMA writes and RDMA reads complete before `post_send` returns.

use crate::cache::Taken;
use crate::later::Later;
use crate::layout::{control, status, ENTRIES};
use crate::link::Link;
use crate::posted::Posted;
use crate::vi::{lock, RecvQ, SendQ, ViState, RELIABLE_DELIVERY, UNRELIABLE};
use crate::{Error, ErrorCode, Result, Vi};
use remora_sys::lock::Guard;
use std::sync::atomic::Ordering;

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
            fail: Some((crate::vi::peer::said_code(said), false)),
            say: None,
        }
    }
}

impl Vi {
    /// `VipPostRecv`: post the receive descriptor at `addr` (in memory `handle`).
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] for a descriptor that is not 64-byte aligned or not in
    /// that memory; [`Error::Resource`] when the queue is full.
    pub fn post_recv(&self, addr: usize, handle: u32) -> Result<()> {
        let mut guard = self.inner.recv.lock();
        match self.inner.post_later(&mut guard, addr, handle) {
            Later::Noted => Ok(()),
            Later::Full => Err(crate::later::full()),
            Later::Now => self.post_recv_now(guard, addr, handle),
        }
    }

    /// [`Vi::post_recv`] of a receive taken in now (a call of its own: the post noted
    /// for later, on an echo's path between a message and its answer, saves and restores
    /// only the registers it needs).
    #[inline(never)]
    fn post_recv_now<'a>(&'a self, mut guard: Guard<'a, RecvQ>, addr: usize, handle: u32) -> Result<()> {
        let vi = &self.inner;
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
            return Err(crate::later::full());
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
                    vi.complete_send(&mut sq.done, addr, handle, t, status::DONE | opbits | out.bits);
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
}

mod descriptors;
mod wait;
