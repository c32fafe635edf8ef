//! The data path: posting descriptors, moving payloads, completing descriptors.
//!
//! A receive posted on a connected VI is described at once in the peer's ring A (where
//! its buffers lie: piece segments and offsets). A send takes the next description from
//! this VI's own segment, writes the payload straight into the receiver's buffers (one
//! copy on one host; one DMA stream across hosts), writes the completion into the
//! receiver's ring B, bumps its count, and rings its doorbell only when it sleeps. Sends,
//! RDMA writes and RDMA reads complete before `post_send` returns.

use crate::layout::{
    self, control, status, Completion, Descriptor, CONTROL, DESCRIPTOR_ALIGNMENT, ENTRIES, ENTRY, SEGMENT,
};
use crate::link::Link;
use crate::vi::{lock, Posted, RecvQ, ViInner, ViState, RELIABLE_DELIVERY, UNRELIABLE};
use crate::{Error, ErrorCode, Nic, Result, Vi};
use remora_sisci::UserRegion;
use std::sync::atomic::{fence, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a send waits for the peer to post a receive before the message counts as one
/// that found none.
const RECEIVE_GRACE: Duration = Duration::from_millis(5);
/// How long a send waits for a freshly connected peer to describe its receives.
const READY_WAIT: Duration = Duration::from_secs(10);
/// How long a waiter polls before it sleeps.
const SPIN: Duration = Duration::from_micros(20);

impl Nic {
    /// Read the descriptor at `addr` (in memory registered as `handle`).
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] when it is not 64-byte aligned or not inside that memory.
    pub fn read_descriptor(&self, addr: usize, handle: u32) -> Result<Descriptor> {
        if addr == 0 || !addr.is_multiple_of(DESCRIPTOR_ALIGNMENT) {
            return Err(Error::InvalidParameter(format!("descriptor at {addr:#x} is not 64-byte aligned")));
        }
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
        if addr == 0 || !addr.is_multiple_of(DESCRIPTOR_ALIGNMENT) {
            return Err(Error::InvalidParameter(format!("descriptor at {addr:#x} is not 64-byte aligned")));
        }
        let b = d.encode();
        let mem = lock(&self.inner.mem);
        let r = mem
            .local(handle, addr, b.len(), None)
            .ok_or_else(|| Error::InvalidParameter("descriptor outside its memory".into()))?;
        r.write(0, &b)?;
        Ok(())
    }

    /// Write a completed descriptor's fields, the status last.
    fn finish(&self, addr: usize, handle: u32, st: u32, len: Option<u32>, imm: Option<u32>) {
        let mem = lock(&self.inner.mem);
        if let Some(r) = mem.local(handle, addr, CONTROL, None) {
            if let Some(i) = imm {
                let _ = r.write(20, &i.to_le_bytes());
            }
            if let Some(l) = len {
                let _ = r.write(24, &l.to_le_bytes());
            }
            fence(Ordering::Release);
            let _ = r.write(28, &st.to_le_bytes());
        }
    }

    /// The program's memory each data segment names, checked against `ptag`.
    fn sources(&self, segs: &[layout::DataSegment], ptag: crate::ProtectionTag) -> Option<Vec<UserRegion>> {
        let mem = lock(&self.inner.mem);
        segs.iter().map(|s| mem.local(s.handle, s.addr as usize, s.len as usize, Some(ptag))).collect()
    }
}

impl ViInner {
    /// Record a completed receive (the descriptor in user memory, the done queue, the CQ).
    pub(crate) fn complete_recv(&self, q: &mut RecvQ, p: &Posted, st: u32, len: u32, imm: Option<u32>) {
        self.nic.finish(p.addr, p.handle, st, Some(len), imm);
        q.done.push_back((p.addr, p.handle));
        if let Some(cq) = &self.recv_cq {
            cq.push(self.id, true);
        }
    }

    fn complete_send(&self, addr: usize, handle: u32, st: u32) {
        self.nic.finish(addr, handle, st, None, None);
        lock(&self.send).done.push_back((addr, handle));
        if self.send_waiters.load(Ordering::SeqCst) > 0 {
            self.send_cv.notify_all();
        }
        if let Some(cq) = &self.send_cq {
            cq.push(self.id, false);
        }
    }

    /// Every receive still posted completes flushed (the VI broke or disconnected).
    pub(crate) fn flush_receives(&self) {
        let mut q = lock(&self.recv);
        while let Some(p) = q.posted.pop_front() {
            self.complete_recv(
                &mut q,
                &p,
                status::DONE | status::OP_RECEIVE | status::DESC_FLUSHED_ERROR,
                0,
                None,
            );
        }
    }

    /// Describe the receives not described yet in the peer's ring A.
    pub(crate) fn publish(&self, q: &mut RecvQ, link: &Link) {
        let end = q.consumed + q.posted.len() as u64;
        if q.pushed >= end {
            return;
        }
        while q.pushed < end {
            let p = &q.posted[(q.pushed - q.consumed) as usize];
            let e = layout::encode_entry(p.total, &p.chunks);
            let _ = link.map.write(layout::RING_A + (q.pushed as usize % ENTRIES) * ENTRY, &e);
            q.pushed += 1;
        }
        link.store(layout::PEER_POSTED, q.pushed);
        link.push();
    }

    /// Take in the completions the peer wrote. A completion with an error breaks a
    /// reliable VI at once (the peer's side broke when it wrote it).
    pub(crate) fn reap(self: &Arc<Self>) -> Result<()> {
        if let Some(addr) = self.take_completions()? {
            if self.attrs().reliability != UNRELIABLE {
                self.fail(ErrorCode::PostDesc, Some(addr), false);
            }
        }
        self.check_peer_now_and_then();
        Ok(())
    }

    /// Complete the receives the peer completed; the first that failed, if one did.
    pub(crate) fn take_completions(&self) -> Result<Option<usize>> {
        let done = self.map.load(layout::DONE);
        let mut broke = None;
        {
            let mut q = lock(&self.recv);
            while q.consumed < done {
                let Some(p) = q.posted.pop_front() else { break };
                let mut b = [0u8; layout::COMPLETION];
                self.map
                    .read(layout::RING_B + (q.consumed as usize % ENTRIES) * layout::COMPLETION, &mut b)?;
                let c = Completion::decode(&b);
                let imm = (c.status & status::IMMEDIATE != 0).then_some(c.immediate);
                q.consumed += 1;
                if c.status & status::ERROR_MASK != 0 && broke.is_none() {
                    broke = Some(p.addr);
                }
                self.complete_recv(&mut q, &p, c.status, c.len, imm);
            }
        }
        Ok(broke)
    }

    fn own(&self, off: usize) -> u64 {
        self.map.load(off)
    }

    /// Wait for the peer's receive number `k` to be described.
    fn peer_receive(&self, k: u64) -> bool {
        if self.own(layout::PEER_POSTED) > k && self.own(layout::PEER_READY) != 0 {
            return true;
        }
        let start = Instant::now();
        while self.own(layout::PEER_READY) == 0 {
            if start.elapsed() > READY_WAIT || *lock(&self.state) != ViState::Connected {
                return false;
            }
            std::thread::yield_now();
        }
        let start = Instant::now();
        let mut n = 0u32;
        while self.own(layout::PEER_POSTED) <= k {
            if start.elapsed() > RECEIVE_GRACE {
                return false;
            }
            n += 1;
            if n > 64 {
                std::thread::yield_now();
            }
        }
        true
    }

    /// Consume the peer's next receive with `len` bytes from `sources` (or none), and
    /// complete it with `st`. Returns the status bits for the sender's descriptor.
    fn deliver(
        self: &Arc<Self>,
        link: &Link,
        sources: &[UserRegion],
        imm: Option<u32>,
        st: u32,
        len: u32,
    ) -> u32 {
        let reliable = self.attrs().reliability != UNRELIABLE;
        let mut sq = lock(&self.send);
        let k = sq.consumed;
        if !self.peer_receive(k) {
            drop(sq);
            if !reliable {
                return status::DONE;
            }
            self.fail(ErrorCode::ConnLost, None, false);
            link.say_error(ErrorCode::RecvqEmpty);
            return status::DONE | status::TRANSPORT_ERROR;
        }
        let mut e = [0u8; ENTRY];
        let _ = self.map.read(layout::RING_A + (k as usize % ENTRIES) * ENTRY, &mut e);
        let (room, chunks) = layout::decode_entry(&e);
        let mut done = Completion { len, immediate: imm.unwrap_or(0), status: st };
        if imm.is_some() {
            done.status |= status::IMMEDIATE;
        }
        let mut broke = None;
        if sources.iter().map(|s| s.len()).sum::<usize>() > room as usize {
            done.status |= status::LENGTH_ERROR;
            done.len = 0;
            broke = Some(ErrorCode::PostDesc);
        } else if self.scatter(link, sources, &chunks).is_err() {
            done.status |= status::TRANSPORT_ERROR;
            broke = Some(ErrorCode::ConnLost);
        }
        let _ = link.map.write(layout::RING_B + (k as usize % ENTRIES) * layout::COMPLETION, &done.encode());
        sq.consumed = k + 1;
        link.store(layout::DONE, k + 1);
        if link.peer.bell_always || link.map.is_local() {
            fence(Ordering::SeqCst);
        } else {
            link.settle();
        }
        if link.peer.bell_always || self.own(layout::PEER_WAITING) != 0 {
            link.ring();
        } else {
            link.push();
        }
        drop(sq);
        match broke {
            Some(code) if reliable || code == ErrorCode::ConnLost => {
                self.fail(code, None, true);
                status::DONE
            }
            _ => status::DONE,
        }
    }

    /// Copy the sources, in order, into the chunks of a receive.
    fn scatter(&self, link: &Link, sources: &[UserRegion], chunks: &[layout::Chunk]) -> Result<()> {
        let mut ci = 0usize;
        let mut coff = 0usize;
        for src in sources {
            let mut soff = 0usize;
            while soff < src.len() {
                let c = chunks
                    .get(ci)
                    .ok_or_else(|| Error::Descriptor("receive smaller than described".into()))?;
                let n = (c.len as usize - coff).min(src.len() - soff);
                link.write_piece(&self.nic, c.seg, c.off as usize + coff, src, soff, n)?;
                soff += n;
                coff += n;
                if coff == c.len as usize {
                    ci += 1;
                    coff = 0;
                }
            }
        }
        Ok(())
    }

    /// An RDMA write or read of `local` against the peer's memory at `remote`. Returns
    /// the error bits.
    fn rdma(&self, link: &Link, remote: layout::DataSegment, local: &[UserRegion], write: bool) -> u32 {
        let total: usize = local.iter().map(|s| s.len()).sum();
        let allowed = if write { link.peer.rdma_write } else { link.peer.rdma_read };
        let slot = match link.slot(&self.nic, remote.handle) {
            Ok(Some(s)) => s,
            Ok(None) => return status::RDMA_PROT_ERROR,
            Err(_) => return status::TRANSPORT_ERROR,
        };
        let flag = if write { layout::SLOT_RDMA_WRITE } else { layout::SLOT_RDMA_READ };
        let inside = remote.addr >= slot.base && remote.addr + total as u64 <= slot.base + slot.len;
        if !allowed || slot.flags & flag == 0 || !inside || slot.ptag != link.peer.ptag {
            return status::RDMA_PROT_ERROR;
        }
        let mut at = remote.addr;
        for l in local {
            let mut off = 0usize;
            while off < l.len() {
                let Some(&(seg, seg_off, start, len)) =
                    slot.pieces.iter().find(|p| at >= p.2 && at < p.2 + p.3)
                else {
                    return status::RDMA_PROT_ERROR;
                };
                let n = ((start + len - at) as usize).min(l.len() - off);
                let where_ = (seg_off + at - start) as usize;
                let r = if write {
                    link.write_piece(&self.nic, seg, where_, l, off, n)
                } else {
                    link.read_piece(&self.nic, seg, where_, l, off, n)
                };
                if r.is_err() {
                    return status::TRANSPORT_ERROR;
                }
                off += n;
                at += n as u64;
            }
        }
        0
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
        let d = vi.nic.read_descriptor(addr, handle)?;
        let ptag = vi.ptag();
        let mut chunks = Vec::new();
        let mut total = 0u32;
        let mut bad = d.segments.len() > layout::MAX_SEGMENTS;
        {
            let mem = lock(&vi.nic.inner.mem);
            for s in &d.segments {
                if mem.chunks(s.handle, s.addr as usize, s.len as usize, ptag, &mut chunks).is_none() {
                    bad = true;
                }
                total = total.saturating_add(s.len);
            }
        }
        let st = *lock(&vi.state);
        let mut q = lock(&vi.recv);
        if q.posted.len() >= ENTRIES {
            return Err(Error::Resource(format!("{ENTRIES} receives posted")));
        }
        let p = Posted { addr, handle, total, chunks };
        if bad || st == ViState::Error {
            let why = if bad { status::PROTECTION_ERROR } else { status::DESC_FLUSHED_ERROR };
            vi.complete_recv(&mut q, &p, status::DONE | status::OP_RECEIVE | why, 0, None);
            return Ok(());
        }
        vi.nic.finish(addr, handle, 0, None, None);
        q.posted.push_back(p);
        if st == ViState::Connected {
            if let Some(link) = vi.link() {
                vi.publish(&mut q, &link);
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
        let d = vi.nic.read_descriptor(addr, handle)?;
        let opbits = match d.op() {
            control::OP_RDMAWRITE => status::OP_RDMA_WRITE,
            control::OP_RDMAREAD => status::OP_RDMA_READ,
            _ => status::OP_SEND,
        };
        match *lock(&vi.state) {
            ViState::Connected => {}
            ViState::Error => {
                vi.complete_send(addr, handle, status::DONE | opbits | status::DESC_FLUSHED_ERROR);
                return Ok(());
            }
            _ => return Err(Error::InvalidState),
        }
        let Some(link) = vi.link() else { return Err(Error::InvalidState) };
        let st = self.perform(&link, &d);
        vi.complete_send(addr, handle, status::DONE | opbits | st);
        if st & status::ERROR_MASK != 0
            && st & status::TRANSPORT_ERROR == 0
            && vi.attrs().reliability != UNRELIABLE
        {
            let code = if st & status::RDMA_PROT_ERROR != 0 {
                if d.op() == control::OP_RDMAREAD {
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

    /// Carry out descriptor `d`; the error bits for its status.
    fn perform(&self, link: &Link, d: &Descriptor) -> u32 {
        let vi = &self.inner;
        let attrs = vi.attrs();
        if d.control & control::RESERVED != 0 || d.op() == 0x3 || d.segments.len() > layout::MAX_SEGMENTS {
            return status::FORMAT_ERROR;
        }
        let imm = (d.control & control::IMMEDIATE != 0).then_some(d.immediate);
        let op = d.op();
        let (remote, locals) = match op {
            control::OP_SENDRECV => (None, &d.segments[..]),
            _ => match d.segments.split_first() {
                Some((r, l)) => (Some(*r), l),
                None => return status::FORMAT_ERROR,
            },
        };
        let Some(sources) = vi.nic.sources(locals, attrs.ptag) else { return status::PROTECTION_ERROR };
        let total: usize = sources.iter().map(|s| s.len()).sum();
        if total > attrs.max_transfer.min(link.peer.max_transfer) as usize {
            return status::LENGTH_ERROR;
        }
        match (op, remote) {
            (control::OP_SENDRECV, _) => {
                vi.deliver(link, &sources, imm, status::DONE | status::OP_RECEIVE, total as u32)
                    & status::ERROR_MASK
            }
            (control::OP_RDMAWRITE, Some(r)) => {
                let bits = vi.rdma(link, r, &sources, true);
                if bits != 0 || imm.is_none() {
                    return bits;
                }
                vi.deliver(link, &[], imm, status::DONE | status::OP_REMOTE_RDMA_WRITE, total as u32)
                    & status::ERROR_MASK
            }
            (control::OP_RDMAREAD, Some(r)) => {
                if attrs.reliability < RELIABLE_DELIVERY {
                    return status::FORMAT_ERROR;
                }
                vi.rdma(link, r, &sources, false)
            }
            _ => status::FORMAT_ERROR,
        }
    }

    /// `VipRecvDone`: the oldest completed receive, as (descriptor address, its memory
    /// handle).
    ///
    /// # Errors
    /// [`Error::NotDone`] when none has completed.
    pub fn recv_done(&self) -> Result<(usize, u32)> {
        let vi = &self.inner;
        vi.reap()?;
        lock(&vi.recv).done.pop_front().ok_or(Error::NotDone)
    }

    /// `VipSendDone`: the oldest completed send.
    ///
    /// # Errors
    /// [`Error::NotDone`] when none has completed.
    pub fn send_done(&self) -> Result<(usize, u32)> {
        lock(&self.inner.send).done.pop_front().ok_or(Error::NotDone)
    }

    /// `VipSendWait`: wait up to `timeout` (`None`: forever) for a completed send.
    ///
    /// # Errors
    /// [`Error::Timeout`].
    pub fn send_wait(&self, timeout: Option<Duration>) -> Result<(usize, u32)> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut q = lock(&self.inner.send);
        loop {
            if let Some(d) = q.done.pop_front() {
                return Ok(d);
            }
            let left = match deadline {
                Some(d) => d.checked_duration_since(Instant::now()).ok_or(Error::Timeout)?,
                None => Duration::from_millis(100),
            };
            self.inner.send_waiters.fetch_add(1, Ordering::SeqCst);
            q = self
                .inner
                .send_cv
                .wait_timeout(q, left.min(Duration::from_millis(100)))
                .map(|r| r.0)
                .unwrap_or_else(|p| p.into_inner().0);
            self.inner.send_waiters.fetch_sub(1, Ordering::SeqCst);
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
        loop {
            if let Ok(d) = self.recv_done() {
                return Ok(d);
            }
            if start.elapsed() >= SPIN {
                break;
            }
            std::hint::spin_loop();
        }
        loop {
            let link = vi.link();
            let flagged = link.as_ref().filter(|l| !l.peer.bell_always && vi.recv_cq.is_none());
            if let Some(l) = flagged {
                l.store(layout::PEER_WAITING, 1);
                if !l.map.is_local() {
                    l.settle();
                } else {
                    fence(Ordering::SeqCst);
                }
            }
            let got = self.recv_done();
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
                l.store(layout::PEER_WAITING, 0);
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
