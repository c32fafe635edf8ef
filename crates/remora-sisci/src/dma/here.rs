//! DMA between two memories of this host made by the posting thread: when the remote
//! segment is on this host, its memory (a memfd) is mappable in this process as the local
//! segment's is, so a job of up to [`LIMIT`] bytes ([`LIMIT_UNWAITED`] when the caller
//! does not wait for it) is copied here, between this process's own mappings of the two,
//! instead of being handed to the node daemon's engine and its completion waited for.
//! A larger job between segments that the caller waits for is copied here too, without
//! the queue's lock ([`DmaQueue::made_here_long`](super::DmaQueue::made_here_long)): the
//! engine's copy was no faster and its hand-offs — a wake-up of its worker and, as the
//! caller's wait outlasts its spin, a wake-up of the caller, each on a core that had gone
//! idle — took a 4 MiB transfer (one piece, or 16 of 256 KiB) to 0.66-0.71 of `memcpy`.
//! The engine's hand-off (post, wake its worker, wake this thread at completion) cost
//! ~3 µs a job, as long as copying 64 KiB: one 64 KiB transfer per post made a median 0.27
//! of `memcpy`, 256 KiB 0.54, 1 MiB 0.76; made here 1.07, 0.98 and 1.01, and an 8-byte
//! post-to-completion 0.15 µs instead of 3.07 (`remora bench dma`, five runs each,
//! interleaved, on two busy cores).
//!
//! The queue's semantics stay: the job has been checked as the engine's would be (the
//! local segment this process's and prepared, the connection its and not lost, every
//! range inside its segment: `DmaQueue::descs` and the checks here), the segments are busy
//! while it runs, the queue ends DONE and a later post or wait sees it so. What goes to
//! the engine still: a transfer with a callback (it runs on the event thread after the
//! engine's completion, and the queue stays POSTED until then: a job made here would be
//! DONE at return, and a post or a removal before the event thread ran its callback
//! would lose it), a multicast connection, another host's segment, segments of another
//! node's descriptor than the queue's, and anything larger, which the engine makes while
//! the caller goes on.
//!
//! The program's own memory (`SCIStartDmaTransferMem`, and VIPL's DMA mode) to or from a
//! segment of this host is made here too ([`super::DmaQueue::made_here_mem`]), through the
//! kernel (`remora_sys::own_copy`: memory the caller did not keep mapped fails with
//! `EFAULT`, and the engine then makes the transfer and reports it, as before, instead of
//! the thread faulting). The engine copied it through `/proc/PID/mem` after two
//! hand-offs, each a wake-up of a thread on the other core: on a VM whose idle cores halt,
//! VIPL's DMA mode moved 64 KiB messages at 1.3-4 GB/s, 0.01-0.03 of `memcpy`.
//!
//! A connection its exporter revoked (forced disconnect) a moment ago may, until this
//! process has heard of it, still take one such copy, as stores through a map of it would;
//! a long one stops at the first 4 MiB boundary after, in ERROR (`NotConnected`).

use crate::segment::{LocalSegment, RemoteSegment};
use crate::UserRegion;
use remora_sys::dma::{DmaDesc, DMA_F_READ, DMA_F_USER_MEM};
use remora_sys::{Mapping, Memfd};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

/// Jobs of at most this many bytes in all are made here when the caller waits for them
/// (`SCI_FLAG_DMA_WAIT`: its thread is blocked either way, and copying here is not slower
/// than the engine's copy plus its hand-off).
pub(super) const LIMIT: u64 = 1 << 20;

/// Jobs of at most this many bytes in all are made here when the caller does not wait:
/// the post returns only once they are made, after at most a few hand-offs' time (a
/// larger one goes to the engine, which makes it while the caller goes on).
pub(super) const LIMIT_UNWAITED: u64 = 256 << 10;

/// A job made here without the queue's lock is copied in pieces of at most this many
/// bytes, an abort looked for between them (the engine's chunk).
const PIECE: usize = 4 << 20;

/// How a job made here ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Made {
    /// Every byte moved.
    Done,
    /// An abort stopped it between two pieces.
    Stopped,
    /// The connection was lost between two pieces (the exporter made the segment
    /// unavailable, or went away): what moved before stays, the job ends in ERROR.
    Lost,
    /// Not made here, nothing moved: the engine makes it.
    No,
}

/// A mapping of the whole of one segment's memory, kept while the same segment is used
/// (known by its allocation, which the weak reference keeps from being reused).
#[derive(Debug)]
pub(super) struct WholeMap<T> {
    kept: Option<(Weak<T>, Mapping)>,
}

impl<T> Default for WholeMap<T> {
    fn default() -> Self {
        WholeMap { kept: None }
    }
}

impl<T> WholeMap<T> {
    /// The mapping of `size` bytes of `memfd`, the memory of `owner` (made once per owner).
    /// `None` when there is no memory or it is shorter than `size`.
    pub(super) fn of(&mut self, owner: &Arc<T>, memfd: Option<&Memfd>, size: usize) -> Option<&Mapping> {
        let kept = self
            .kept
            .as_ref()
            .is_some_and(|(w, m)| std::ptr::eq(w.as_ptr(), Arc::as_ptr(owner)) && m.len() == size);
        if !kept {
            let memfd = memfd.filter(|m| m.size() >= size as u64 && size > 0)?;
            let m = Mapping::new(memfd.as_fd(), 0, size, Default::default()).ok()?;
            self.kept = Some((Arc::downgrade(owner), m));
        }
        self.kept.as_ref().map(|(_, m)| m)
    }
}

/// What a queue keeps for the transfers it makes here.
#[derive(Debug, Default)]
pub(super) struct Here {
    local: WholeMap<crate::segment::LocalInner>,
    remote: WholeMap<crate::segment::RemoteInner>,
}

impl super::DmaQueue {
    /// Make the checked job `descs` between `local` and `remote` here when it is one for
    /// this thread (see the module's notes): the queue is then DONE. `false`: not made,
    /// nothing moved, the engine makes it.
    pub(super) fn made_here(
        &self,
        st: &mut super::QState,
        local: &LocalSegment,
        remote: &RemoteSegment,
        descs: &[DmaDesc],
        wait: bool,
        with_callback: bool,
    ) -> bool {
        let limit = if wait { LIMIT } else { LIMIT_UNWAITED };
        let total = descs.iter().try_fold(0u64, |t, d| t.checked_add(d.size));
        if with_callback || total.is_none_or(|t| t > limit) {
            return false;
        }
        // As a post to the engine: stores to maps of other hosts' segments made before go
        // first (free when there are none); the segments are busy while the bytes move.
        remora_client::dsm::settle();
        let _busy = (local.inner.deps.hold(), remote.inner.deps.hold());
        let node = self.inner.desc.node();
        let mut here = self.inner.here.lock();
        if here.run(node, local, remote, descs) != Made::Done {
            return false;
        }
        done_here(st);
        true
    }

    /// A job waited for, larger than [`LIMIT`], between segments of this host, made here
    /// too: the queue is POSTED meanwhile but its lock is let go (`QState::on_flow`, as for
    /// a job over the process's own flow), so state queries and the event thread go on,
    /// another thread's wait waits for the end, and an abort stops the copy at the next
    /// 4 MiB boundary (as the engine's would); so does the connection's loss (the exporter
    /// forced it unavailable, or went away), which ends the job in ERROR, `NotConnected`,
    /// as the engine ends it. `Ok`: made (DONE), stopped (ABORTED) or lost (ERROR); `Err`
    /// gives the lock back when it is not one for this thread, nothing moved. Every check
    /// is made before the queue is marked POSTED.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn made_here_long<'a>(
        &'a self,
        mut st: std::sync::MutexGuard<'a, super::QState>,
        local: &LocalSegment,
        remote: &RemoteSegment,
        descs: &[DmaDesc],
        wait: bool,
        with_callback: bool,
    ) -> Result<super::DmaState, std::sync::MutexGuard<'a, super::QState>> {
        let total = descs.iter().try_fold(0u64, |t, d| t.checked_add(d.size));
        // Another host's segment (no memfd here) is not one for this thread.
        if !wait || with_callback || total.is_none_or(|t| t <= LIMIT) || !remote.is_on_this_host() {
            return Err(st);
        }
        remora_client::dsm::settle();
        let _busy = (local.inner.deps.hold(), remote.inner.deps.hold());
        let node = self.inner.desc.node();
        // The queue's lock, then the here state's (as `made_here`); the latter is let go
        // before the former is taken again.
        let made = {
            let mut here = self.inner.here.lock();
            let Some((near, far)) = here.plan(node, local, remote, descs) else {
                return Err(st);
            };
            let before = st.phase;
            st.phase = Some(super::DmaState::Posted);
            st.on_flow = true;
            self.inner.stop_here.store(false, Ordering::SeqCst);
            // A new job: the last one's reason (a lost connection) is not this one's.
            self.inner.here_error.store(0, Ordering::SeqCst);
            drop(st);
            let made = copy(near, far, descs, PIECE, Some((&self.inner.stop_here, remote)));
            (made, before)
        };
        let mut st = self.inner.st.lock().unwrap_or_else(|p| p.into_inner());
        st.on_flow = false;
        let (made, before) = made;
        // A copy that failed part-way (not reached: both mappings were checked) is the
        // engine's to make again, unless an abort came meanwhile.
        let made = match made {
            Made::No if self.inner.stop_here.load(Ordering::SeqCst) => Made::Stopped,
            m => m,
        };
        match made {
            Made::No => {
                st.phase = before;
                Err(st)
            }
            Made::Done => {
                done_here(&mut st);
                Ok(super::DmaState::Done)
            }
            Made::Stopped => {
                done_here(&mut st);
                st.phase = Some(super::DmaState::Aborted);
                Ok(super::DmaState::Aborted)
            }
            Made::Lost => {
                done_here(&mut st);
                st.phase = Some(super::DmaState::Error);
                self.inner.here_error.store(remora_sys::dma::DMA_ERR_NOT_CONNECTED, Ordering::SeqCst);
                Ok(super::DmaState::Error)
            }
        }
    }

    /// [`DmaQueue::made_here`](super::DmaQueue::made_here) for the one checked transfer `d`
    /// between the program's memory `mem` and `remote` (`SCIStartDmaTransferMem`).
    pub(super) fn made_here_mem(
        &self,
        st: &mut super::QState,
        mem: UserRegion,
        remote: &RemoteSegment,
        d: &DmaDesc,
        wait: bool,
    ) -> bool {
        let limit = if wait { LIMIT } else { LIMIT_UNWAITED };
        if d.size > limit {
            return false;
        }
        let _busy = remote.inner.deps.token();
        let node = self.inner.desc.node();
        if !self.inner.here.lock().run_mem(node, mem, remote, d) {
            return false;
        }
        done_here(st);
        true
    }
}

/// The queue's state once a job was made here: DONE, nothing in flight, no callback.
fn done_here(st: &mut super::QState) {
    st.with_callback = false;
    st.callback = None;
    st.phase = Some(super::DmaState::Done);
    st.inflight.clear();
}

impl Here {
    /// Make the job `descs` (checked: every range inside its segment, the connection not
    /// lost, a moment ago by `DmaQueue::descs`) between `local` and `remote` here, in one
    /// go, for a queue of descriptor node `node`.
    pub(super) fn run(
        &mut self,
        node: u32,
        local: &LocalSegment,
        remote: &RemoteSegment,
        descs: &[DmaDesc],
    ) -> Made {
        match self.plan(node, local, remote, descs) {
            Some((near, far)) => copy(near, far, descs, usize::MAX, None),
            None => Made::No,
        }
    }

    /// The mappings of `local` and of `remote` the checked job `descs` moves between, for
    /// a queue of descriptor node `node`, when it is one for this thread: not the program's
    /// memory, every side of the queue's node, not a multicast, both memories mappable
    /// here and every piece inside them. `None`: the engine makes it.
    fn plan(
        &mut self,
        node: u32,
        local: &LocalSegment,
        remote: &RemoteSegment,
        descs: &[DmaDesc],
    ) -> Option<(&Mapping, &Mapping)> {
        if descs.iter().any(|d| d.flags & DMA_F_USER_MEM != 0) {
            return None;
        }
        if local.node() != node || remote.descriptor().node() != node {
            return None;
        }
        let link = remote.link().ok()?;
        if !link.legs.is_empty() {
            return None;
        }
        let far = self.remote.of(&remote.inner, link.memfd.as_ref(), link.size)?;
        let near = {
            let memfd = local.inner.memfd.read().unwrap_or_else(|p| p.into_inner());
            self.local.of(&local.inner, memfd.as_ref(), local.size())
        }?;
        // Every piece is checked before the first moves, so that a refusal moves nothing.
        let fits =
            |m: &Mapping, off: u64, size: u64| off.checked_add(size).is_some_and(|e| e <= m.len() as u64);
        descs
            .iter()
            .all(|d| fits(near, d.local_off, d.size) && fits(far, d.remote_off, d.size))
            .then_some((near, far))
    }

    /// Make the one transfer `d` (checked: inside the remote segment) between the program's
    /// memory `mem` and `remote`, a segment of this host, here, for a queue of descriptor
    /// node `node`. `false`: not made (the engine makes it), or the program's memory could
    /// not be read or written (the engine makes it again and reports that).
    pub(super) fn run_mem(
        &mut self,
        node: u32,
        mem: UserRegion,
        remote: &RemoteSegment,
        d: &DmaDesc,
    ) -> bool {
        if d.flags & DMA_F_USER_MEM == 0 || d.size != mem.len() as u64 || mem.is_empty() {
            return false;
        }
        // Memory a map of another host's segment pages in: the kernel's copy cannot fault
        // its missing pages in (the userfaultfd serves faults of user mode only).
        if remora_sys::uffd::overlaps_registered(mem.addr(), mem.len()) {
            return false;
        }
        if remote.descriptor().node() != node || remote.is_lost() {
            return false;
        }
        let Ok(link) = remote.link() else { return false };
        if !link.legs.is_empty() {
            return false;
        }
        let Some(far) = self.remote.of(&remote.inner, link.memfd.as_ref(), link.size) else { return false };
        let (r, n) = (d.remote_off as usize, d.size as usize);
        let moved = match d.flags & DMA_F_READ != 0 {
            true => remora_sys::own_copy::mapping_to_region(far, r, &mem, 0, n),
            false => remora_sys::own_copy::region_to_mapping(&mem, 0, far, r, n),
        };
        moved.is_ok()
    }
}

/// Copy the checked job `descs` between `near` (the local segment's mapping) and `far` (the
/// remote one's) in pieces of at most `piece` bytes; with `watch`, ending [`Made::Stopped`]
/// between two once its flag is raised (an abort), [`Made::Lost`] once its connection is
/// lost (no byte lands after the exporter's forced unavailability is known here).
fn copy(
    near: &Mapping,
    far: &Mapping,
    descs: &[DmaDesc],
    piece: usize,
    watch: Option<(&AtomicBool, &RemoteSegment)>,
) -> Made {
    for d in descs {
        let (l, r, size) = (d.local_off as usize, d.remote_off as usize, d.size as usize);
        let mut done = 0;
        while done < size {
            if let Some((stop, remote)) = watch {
                if stop.load(Ordering::SeqCst) {
                    return Made::Stopped;
                }
                if remote.is_lost() {
                    return Made::Lost;
                }
            }
            let n = (size - done).min(piece);
            let moved = match d.flags & DMA_F_READ != 0 {
                true => near.copy_from(l + done, far, r + done, n),
                false => far.copy_from(r + done, near, l + done, n),
            };
            // Not reached (both ranges were checked, both mappings are writable); should it
            // be, the engine makes the whole job again, which leaves the same bytes.
            if moved.is_err() {
                return Made::No;
            }
            done += n;
        }
    }
    Made::Done
}
