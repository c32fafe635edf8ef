//! DMA queues. The node daemon is the DMA engine: a post writes descriptors into a page
//! shared with the engine and wakes it; the engine copies between its own mappings of the
//! segments and reports completion through the same page. No payload passes through this
//! process but in jobs the engine never sees (`dma/direct.rs`, `dma/here.rs`).
//!
//! The queue follows the guide's state machine: IDLE → POSTED → DONE | ERROR | ABORTED, a
//! finished queue may be posted again, and any other call order gives
//! [`Error::IllegalOperation`]. The 1.x calls add GATHER (enqueue, then post).

use crate::events::CallbackAction;
use crate::segment::{LocalSegment, RemoteSegment};
use crate::{check_adapter, DepToken, Descriptor, Error, Result, UserRegion};
use remora_client::events::event_loop;
use remora_proto::{Reply, Request};
use remora_sys::dma::*;
use remora_sys::sync::EventFd;
use remora_sys::Memfd;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

mod direct;
mod here;
mod wait;

/// The state of a DMA queue (`sci_dma_queue_state_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DmaState {
    /// Created or reset; nothing posted (`SCI_DMAQUEUE_IDLE`).
    Idle,
    /// Descriptors enqueued with the 1.x call, not yet posted (`SCI_DMAQUEUE_GATHER`).
    Gather,
    /// The engine works on it (`SCI_DMAQUEUE_POSTED`).
    Posted,
    /// Every transfer completed (`SCI_DMAQUEUE_DONE`).
    Done,
    /// Stopped on request (`SCI_DMAQUEUE_ABORTED`).
    Aborted,
    /// A transfer failed (`SCI_DMAQUEUE_ERROR`).
    Error,
}

/// One element of a vector transfer (`dis_dma_vec_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DmaVec {
    /// Bytes.
    pub size: usize,
    /// Offset in the local segment.
    pub local_offset: usize,
    /// Offset in the remote segment.
    pub remote_offset: usize,
}

/// Flags of a transfer.
#[derive(Debug, Clone, Copy, Default)]
pub struct DmaFlags {
    /// Copy from the remote segment into the local side (`SCI_FLAG_DMA_READ`).
    pub read: bool,
    /// Return only when the transfer has ended (`SCI_FLAG_DMA_WAIT`).
    pub wait: bool,
}

/// A completion callback (`sci_cb_dma_t`): runs on the event thread with the outcome.
pub type DmaCallback = Box<dyn FnMut(&DmaQueue, Result<()>) -> CallbackAction + Send>;

#[derive(Default)]
struct QState {
    phase: Option<DmaState>,
    gathered: Vec<DmaDesc>,
    gathered_refs: Vec<DepToken>,
    inflight: Vec<DepToken>,
    callback: Option<DmaCallback>,
    with_callback: bool,
    /// The posted job is being made over the process's own flow by the posting thread,
    /// without the lock: the page knows nothing of it (see [`DmaQueue::post`]).
    on_flow: bool,
}

struct QInner {
    desc: Descriptor,
    handle: u64,
    page: DmaPage,
    st: Mutex<QState>,
    token: Mutex<Option<DepToken>>,
    removed: AtomicBool,
    listener: Mutex<Option<u64>>,
    /// The `maxEntries` the program asked for.
    asked: u32,
    /// Small transfers to another host, made over the process's own flow.
    direct: Mutex<direct::Direct>,
    /// Transfers between memories of this host, made by the posting thread (behind the
    /// data paths' lock: biased to the thread that posts again and again).
    here: remora_sys::lock::Lock<here::Here>,
    /// Raised by an abort of a job the posting thread makes here without the lock.
    stop_here: AtomicBool,
    /// Why the last job made here without the lock ended in ERROR (a `DMA_ERR_*` code; 0:
    /// the last ERROR is the engine's, its page says why).
    here_error: AtomicU32,
}

impl std::fmt::Debug for QInner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DmaQueue").field("handle", &self.handle).finish()
    }
}

impl Drop for QInner {
    fn drop(&mut self) {
        if let Some(t) = self.listener.lock().unwrap_or_else(|p| p.into_inner()).take() {
            if let Ok(l) = event_loop() {
                l.unregister(t);
            }
        }
        if !self.removed.load(Ordering::Acquire) {
            let _ = self.desc.session().request(Request::RemoveDmaQueue { queue: self.handle }, &[]);
        }
    }
}

/// A DMA queue (`sci_dma_queue_t`).
#[derive(Debug, Clone)]
pub struct DmaQueue {
    inner: Arc<QInner>,
}

fn page_state(s: u32) -> DmaState {
    match s {
        DMA_DONE => DmaState::Done,
        DMA_ABORTED => DmaState::Aborted,
        DMA_POSTED => DmaState::Posted,
        DMA_IDLE => DmaState::Idle,
        _ => DmaState::Error,
    }
}

fn detail(code: u32) -> Error {
    match code {
        DMA_ERR_RANGE => Error::OutOfRange,
        DMA_ERR_NOT_PREPARED => Error::NotPrepared,
        DMA_ERR_NOT_CONNECTED => Error::NotConnected,
        DMA_ERR_INVALID => Error::IllegalParameter("malformed DMA descriptors".into()),
        _ => Error::TransferFailed,
    }
}

fn in_range(len: usize, off: usize, size: usize) -> bool {
    off.checked_add(size).is_some_and(|e| e <= len)
}

/// The fewest descriptors a queue holds, whatever `maxEntries` asked for.
pub const MIN_CAPACITY: u32 = 256;

impl DmaQueue {
    /// The descriptor it was made through (`SCIClose` of it with this still open tears this down).
    pub fn descriptor(&self) -> &Descriptor {
        &self.inner.desc
    }

    /// `SCICreateDMAQueue` with room for `max_entries` descriptors. As Dolphin's library
    /// does, `max_entries` is a hint that programs get wrong: 0 is accepted, and a queue
    /// holds at least [`MIN_CAPACITY`] descriptors (a longer vector is split, see
    /// [`DmaQueue::start_vec`]).
    ///
    /// # Errors
    /// [`Error::NoSuchAdapter`]; [`Error::IllegalParameter`] for more than 65536 entries.
    pub fn create(desc: &Descriptor, adapter: u32, max_entries: u32) -> Result<DmaQueue> {
        check_adapter(adapter)?;
        if max_entries > MAX_ENTRIES {
            return Err(Error::IllegalParameter(format!("{max_entries} DMA entries")));
        }
        let asked = max_entries;
        let max_entries = max_entries.max(MIN_CAPACITY);
        let (reply, fds) = desc.live()?.session.request(Request::CreateDmaQueue { max_entries }, &[])?;
        let Reply::DmaQueue { queue } = reply else {
            return Err(Error::System(format!("unexpected reply {reply:?}")));
        };
        let mut fds = fds.into_iter();
        let (Some(page), Some(ev)) = (fds.next(), fds.next()) else {
            return Err(Error::System("queue reply without its page".into()));
        };
        let page = DmaPage::open(&Memfd::from_fd(page)?, EventFd::from_fd(ev), max_entries)?;
        Ok(DmaQueue {
            inner: Arc::new(QInner {
                token: Mutex::new(Some(desc.inner.deps.token())),
                desc: desc.clone(),
                handle: queue,
                page,
                st: Mutex::new(QState { phase: Some(DmaState::Idle), ..Default::default() }),
                removed: AtomicBool::new(false),
                listener: Mutex::new(None),
                asked,
                direct: Mutex::default(),
                here: Default::default(),
                stop_here: AtomicBool::new(false),
                here_error: AtomicU32::new(0),
            }),
        })
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, QState>> {
        if self.inner.removed.load(Ordering::Acquire) {
            return Err(Error::IllegalParameter("queue removed".into()));
        }
        Ok(self.inner.st.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// The `maxEntries` the queue was created with (0 when the program gave 0): how many
    /// transfers `SCIEnqueueDMATransfer` gathers.
    pub fn max_entries(&self) -> u32 {
        self.inner.asked
    }

    /// How many descriptors one post carries (at least [`MIN_CAPACITY`]).
    pub fn capacity(&self) -> u32 {
        self.inner.page.max_entries()
    }

    /// Bring a posted job's end into the books.
    fn settle(&self, st: &mut QState) {
        if st.phase == Some(DmaState::Posted) && !st.on_flow {
            let s = self.inner.page.state();
            if s != DMA_POSTED {
                st.phase = Some(page_state(s));
                st.inflight.clear();
            }
        }
    }

    /// The outcome of the last finished job.
    fn outcome(&self, state: DmaState) -> Result<()> {
        match state {
            DmaState::Done => Ok(()),
            DmaState::Aborted => Err(Error::Cancelled),
            _ => Err(detail(self.error_code())),
        }
    }

    /// Why the last job ended in ERROR: said by the thread that made it here, or by the
    /// engine in the queue's page.
    fn error_code(&self) -> u32 {
        match self.inner.here_error.load(Ordering::SeqCst) {
            0 => self.inner.page.error(),
            code => code,
        }
    }

    fn check_remote(remote: &RemoteSegment) -> Result<usize> {
        let link = remote.link()?;
        if remote.is_lost() {
            return Err(Error::NotConnected);
        }
        Ok(link.size)
    }

    fn check_local(local: &LocalSegment) -> Result<()> {
        let inner = local.live()?;
        if !inner.prepared.load(Ordering::Acquire) {
            return Err(Error::NotPrepared);
        }
        Ok(())
    }

    fn descs(
        local: &LocalSegment,
        remote: &RemoteSegment,
        vec: &[DmaVec],
        read: bool,
    ) -> Result<Vec<DmaDesc>> {
        Self::check_local(local)?;
        let rsize = Self::check_remote(remote)?;
        let lsize = local.size();
        vec.iter()
            .map(|v| {
                if v.size == 0
                    || !in_range(lsize, v.local_offset, v.size)
                    || !in_range(rsize, v.remote_offset, v.size)
                {
                    return Err(Error::OutOfRange);
                }
                Ok(DmaDesc {
                    local: local.handle(),
                    remote: remote.handle(),
                    local_off: v.local_offset as u64,
                    remote_off: v.remote_offset as u64,
                    size: v.size as u64,
                    flags: if read { DMA_F_READ } else { 0 },
                })
            })
            .collect()
    }

    #[allow(clippy::too_many_arguments)]
    fn post<'a>(
        &'a self,
        mut st: std::sync::MutexGuard<'a, QState>,
        descs: Vec<DmaDesc>,
        refs: Vec<DepToken>,
        callback: Option<DmaCallback>,
        wait: bool,
        segments: Option<(direct::Near<'_>, &RemoteSegment)>,
    ) -> Result<()> {
        if descs.len() > self.capacity() as usize {
            return Err(Error::MaxEntries);
        }
        // Stores to maps of other hosts' segments made before the transfer reach their homes
        // before it (free when there are none on their way).
        remora_client::dsm::settle();
        if wait && callback.is_some() {
            // A callback forbids waiting: refuse before anything is posted.
            return Err(Error::IllegalOperation);
        }
        if callback.is_some() {
            self.listen()?;
        }
        // One transfer to another host waited for, or a small one (or a vector of pieces
        // that follow each other on both sides, which the engine would make as one): over
        // the process's own flow, DONE when the home has the bytes (a failed flow, or a
        // large transfer whose flow is in use, leaves it to the engine: `dma/direct.rs`).
        // The queue is POSTED meanwhile (another post, a reset or a removal is refused), but
        // its lock is let go: a transfer of any size must not hold up `SCIDMAQueueState`
        // or the event thread.
        // The program's memory to or from a segment of this host: copied here (`dma/here.rs`).
        if let (None, Some((direct::Near::Mem(mem), remote)), [d]) = (&callback, segments, descs.as_slice()) {
            if self.made_here_mem(&mut st, mem, remote, d, wait) {
                return Ok(());
            }
        }
        if let (None, Some((near, remote)), Some(d)) = (&callback, segments, direct::contiguous(&descs)) {
            st.with_callback = false;
            st.callback = None;
            st.phase = Some(DmaState::Posted);
            st.on_flow = true;
            self.inner.here_error.store(0, Ordering::SeqCst);
            drop(st);
            let done =
                self.inner.direct.lock().unwrap_or_else(|p| p.into_inner()).run(near, remote, &d, wait);
            st = self.inner.st.lock().unwrap_or_else(|p| p.into_inner());
            st.on_flow = false;
            if let Some(Ok(())) = done {
                st.phase = Some(DmaState::Done);
                st.inflight.clear();
                return Ok(());
            }
        }
        st.with_callback = callback.is_some();
        st.callback = callback;
        self.inner.page.set_armed(st.with_callback);
        self.inner.here_error.store(0, Ordering::SeqCst);
        self.inner.page.post(&descs).map_err(|_| Error::IllegalParameter("empty DMA job".into()))?;
        st.phase = Some(DmaState::Posted);
        st.inflight = refs;
        drop(st);
        if wait {
            let end = self.wait(None)?;
            return self.outcome(end);
        }
        Ok(())
    }

    fn ready_to_post(st: &QState) -> Result<()> {
        match st.phase {
            Some(DmaState::Idle | DmaState::Done | DmaState::Error | DmaState::Aborted) => Ok(()),
            _ => Err(Error::IllegalOperation),
        }
    }

    /// `SCIStartDmaTransfer`: copy `size` bytes between `local` at `local_offset` and
    /// `remote` at `remote_offset` (towards the remote side unless `flags.read`). With
    /// `flags.wait` it returns when the job has ended, with the job's outcome.
    ///
    /// # Errors
    /// [`Error::IllegalOperation`] while the queue is posted or gathering;
    /// [`Error::NotPrepared`], [`Error::NotConnected`], [`Error::OutOfRange`].
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        &self,
        local: &LocalSegment,
        remote: &RemoteSegment,
        local_offset: usize,
        size: usize,
        remote_offset: usize,
        flags: DmaFlags,
        callback: Option<DmaCallback>,
    ) -> Result<()> {
        let v = [DmaVec { size, local_offset, remote_offset }];
        self.start_vec(local, remote, &v, flags, callback)
    }

    /// `SCIStartDmaTransferVec`: several transfers between one local and one remote segment.
    /// A vector longer than the queue holds is accepted and split (programs size queues
    /// smaller than their vectors): all turns but the last are waited for here.
    ///
    /// # Errors
    /// As [`DmaQueue::start`]; a failed turn's error (the later turns are not posted).
    pub fn start_vec(
        &self,
        local: &LocalSegment,
        remote: &RemoteSegment,
        vec: &[DmaVec],
        flags: DmaFlags,
        callback: Option<DmaCallback>,
    ) -> Result<()> {
        let mut st = self.lock()?;
        self.settle(&mut st);
        Self::ready_to_post(&st)?;
        if vec.is_empty() {
            return Err(Error::IllegalParameter("no transfers".into()));
        }
        let mut descs = Self::descs(local, remote, vec, flags.read)?;
        if self.made_here(&mut st, local, remote, &descs, flags.wait, callback.is_some()) {
            return Ok(());
        }
        st = match self.made_here_long(st, local, remote, &descs, flags.wait, callback.is_some()) {
            Ok(end) => return self.outcome(end),
            Err(st) => st,
        };
        // A vector longer than the queue holds goes in turns, each waited for; the last
        // turn ends as the caller asked (waited for, or with its callback).
        let cap = self.capacity() as usize;
        while descs.len() > cap {
            let rest = descs.split_off(cap);
            let refs = vec![local.inner.deps.token(), remote.inner.deps.token()];
            self.post(st, descs, refs, None, true, None)?;
            descs = rest;
            st = self.lock()?;
            self.settle(&mut st);
            Self::ready_to_post(&st)?;
        }
        let refs = vec![local.inner.deps.token(), remote.inner.deps.token()];
        self.post(st, descs, refs, callback, flags.wait, Some((direct::Near::Seg(local), remote)))
    }

    /// `SCIStartDmaTransferMem`: copy between this process's memory `mem` and `remote` at
    /// `remote_offset`; the engine reads (or, with `flags.read`, writes) `mem` directly. To
    /// another host, a transfer waited for (and a small one) goes over the process's own
    /// flow to the segment's node instead, straight between `mem` and the socket.
    ///
    /// # Errors
    /// As [`DmaQueue::start`].
    pub fn start_mem(
        &self,
        mem: UserRegion,
        remote: &RemoteSegment,
        remote_offset: usize,
        flags: DmaFlags,
        callback: Option<DmaCallback>,
    ) -> Result<()> {
        let mut st = self.lock()?;
        self.settle(&mut st);
        Self::ready_to_post(&st)?;
        let rsize = Self::check_remote(remote)?;
        if mem.is_empty() || !in_range(rsize, remote_offset, mem.len()) || mem.addr() == 0 {
            return Err(Error::OutOfRange);
        }
        let d = DmaDesc {
            local: mem.addr() as u64,
            remote: remote.handle(),
            local_off: 0,
            remote_off: remote_offset as u64,
            size: mem.len() as u64,
            flags: DMA_F_USER_MEM | if flags.read { DMA_F_READ } else { 0 },
        };
        let refs = vec![remote.inner.deps.token()];
        self.post(st, vec![d], refs, callback, flags.wait, Some((direct::Near::Mem(mem), remote)))
    }

    /// `SCIEnqueueDMATransfer` (API 1.x): add one transfer; the queue gathers until
    /// [`DmaQueue::post_gathered`]. Returns the state.
    ///
    /// # Errors
    /// [`Error::IllegalOperation`] unless IDLE or GATHER; [`Error::MaxEntries`] when full;
    /// [`Error::NotPrepared`], [`Error::NotConnected`], [`Error::OutOfRange`].
    pub fn enqueue(
        &self,
        local: &LocalSegment,
        remote: &RemoteSegment,
        local_offset: usize,
        remote_offset: usize,
        size: usize,
        read: bool,
    ) -> Result<DmaState> {
        let mut st = self.lock()?;
        if !matches!(st.phase, Some(DmaState::Idle | DmaState::Gather)) {
            return Err(Error::IllegalOperation);
        }
        let limit = match self.max_entries() {
            0 => self.capacity(),
            n => n,
        };
        if st.gathered.len() >= limit as usize {
            return Err(Error::MaxEntries);
        }
        let d = Self::descs(local, remote, &[DmaVec { size, local_offset, remote_offset }], read)?;
        st.gathered.extend(d);
        st.gathered_refs.push(local.inner.deps.token());
        st.gathered_refs.push(remote.inner.deps.token());
        st.phase = Some(DmaState::Gather);
        Ok(DmaState::Gather)
    }

    /// `SCIPostDMAQueue` (API 1.x): start the gathered transfers.
    ///
    /// # Errors
    /// [`Error::IllegalOperation`] unless gathering.
    pub fn post_gathered(&self, callback: Option<DmaCallback>) -> Result<()> {
        let mut st = self.lock()?;
        if st.phase != Some(DmaState::Gather) {
            return Err(Error::IllegalOperation);
        }
        let descs = std::mem::take(&mut st.gathered);
        let refs = std::mem::take(&mut st.gathered_refs);
        self.post(st, descs, refs, callback, false, None)
    }

    /// `SCIResetDMAQueue` (API 1.x): back to IDLE, dropping gathered transfers.
    ///
    /// # Errors
    /// [`Error::IllegalOperation`] while posted.
    pub fn reset(&self) -> Result<()> {
        let mut st = self.lock()?;
        self.settle(&mut st);
        if st.phase == Some(DmaState::Posted) {
            return Err(Error::IllegalOperation);
        }
        st.gathered.clear();
        st.gathered_refs.clear();
        st.phase = Some(DmaState::Idle);
        self.inner.page.reset();
        Ok(())
    }

    /// `SCIDMAQueueState`.
    pub fn state(&self) -> DmaState {
        let mut st = self.inner.st.lock().unwrap_or_else(|p| p.into_inner());
        self.settle(&mut st);
        st.phase.unwrap_or(DmaState::Idle)
    }

    /// Why the last job ended in ERROR, if it did.
    pub fn last_error(&self) -> Option<Error> {
        (self.state() == DmaState::Error).then(|| detail(self.error_code()))
    }

    /// `SCIRemoveDMAQueue`.
    ///
    /// # Errors
    /// [`Error::IllegalOperation`] while posted.
    pub fn remove(&self) -> Result<()> {
        let mut st = self.lock()?;
        self.settle(&mut st);
        if st.phase == Some(DmaState::Posted) {
            return Err(Error::IllegalOperation);
        }
        self.inner.desc.session().request(Request::RemoveDmaQueue { queue: self.inner.handle }, &[])?;
        self.inner.removed.store(true, Ordering::Release);
        st.gathered_refs.clear();
        if let Some(t) = self.inner.listener.lock().unwrap_or_else(|p| p.into_inner()).take() {
            if let Ok(l) = event_loop() {
                l.unregister(t);
            }
        }
        self.inner.token.lock().unwrap_or_else(|p| p.into_inner()).take();
        Ok(())
    }

    /// Make the event thread watch the completion eventfd (once per queue).
    fn listen(&self) -> Result<()> {
        let mut l = self.inner.listener.lock().unwrap_or_else(|p| p.into_inner());
        if l.is_some() {
            return Ok(());
        }
        let weak = Arc::downgrade(&self.inner);
        let drain = self.inner.page.event().try_clone()?;
        let token = event_loop()?.register(
            self.inner.page.event().try_clone()?.into_fd(),
            Box::new(move || {
                drain.drain();
                let Some(inner) = weak.upgrade() else { return false };
                let q = DmaQueue { inner };
                let (cb, state) = {
                    let mut st = q.inner.st.lock().unwrap_or_else(|p| p.into_inner());
                    q.settle(&mut st);
                    match st.phase {
                        // Fire once per job, even if a state query saw its end first.
                        Some(s @ (DmaState::Done | DmaState::Error | DmaState::Aborted)) => {
                            (st.callback.take(), s)
                        }
                        _ => return true,
                    }
                };
                if let Some(mut cb) = cb {
                    let _ = cb(&q, q.outcome(state));
                }
                true
            }),
        )?;
        *l = Some(token);
        Ok(())
    }
}
