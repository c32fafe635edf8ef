//! Completion queues (`VipCreateCQ`): one place to learn which VI's queue has a completed
//! descriptor. Receives of attached VIs ring the CQ's doorbell on every completion; sends
//! complete in this process and wake it directly.
//!
//! A queue holds at most the entries it was created (or last resized) with: a completion
//! that finds it full is not queued (its descriptor stays on its VI's work queue, for
//! `VipSendDone` / `VipRecvDone`), and the error callback is told `VIP_ERROR_CATASTROPHIC`
//! for the queue (`VIP_RESOURCE_CQ`) with the VI and the dropped descriptor, once for every
//! completion dropped (so the calls and the queue's entries together count every
//! completion of the VIs' work queues).

use crate::vi::{lock, ViInner};
use crate::{Error, ErrorCode, ErrorEvent, Nic, Result, Vi};
use remora_sisci::{Interrupt, RemoteInterrupt};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

struct CqInner {
    id: u64,
    nic: Nic,
    /// (VI id, `true` for its receive queue), oldest first.
    entries: Mutex<VecDeque<(u64, bool)>>,
    capacity: AtomicUsize,
    vis: Mutex<Vec<(Weak<ViInner>, u64, bool)>>,
    bell: Interrupt,
    self_bell: RemoteInterrupt,
    /// Threads sleeping on `bell` (`VipCQWait`, `VipRecvWait` of an attached receive
    /// queue): an error or a disconnect ([`CompletionQueue::wake`]) rings it for them.
    waiting: AtomicUsize,
    /// Those of `waiting` in `VipCQWait`: a completion taken in here rings the bell for
    /// them ([`CompletionQueue::push`]). A `VipRecvWait` needs no such ring: the peer rang
    /// for its own message.
    cq_waiting: AtomicUsize,
    /// `VipDestroyCQ` succeeded: a notification still waiting ends without a call.
    destroyed: AtomicBool,
    /// Rings of `bell` by this process (tests count them).
    #[cfg(test)]
    rung: AtomicUsize,
    /// Threads inside [`CqWaiter::sleep`] (tests wait for them to sleep).
    #[cfg(test)]
    asleep: AtomicUsize,
}

/// The longest sleep of a `VipCQWait` (and a `VipRecvWait` on the queue's doorbell) before
/// it looks again. Tests sleep 2 s: a ring missed shows as seconds, not as the 50 ms that
/// a loaded machine's late thread also takes.
pub(crate) const SLICE: Duration =
    if cfg!(test) { Duration::from_secs(2) } else { Duration::from_millis(50) };

impl Drop for CqInner {
    fn drop(&mut self) {
        let _ = self.self_bell.disconnect();
        let _ = self.bell.remove();
    }
}

/// A completion queue held weakly ([`CompletionQueue::downgrade`]).
pub(crate) struct WeakCq(Weak<CqInner>);

impl WeakCq {
    /// The queue, unless it was destroyed or dropped.
    pub(crate) fn live(&self) -> Option<CompletionQueue> {
        let inner = self.0.upgrade()?;
        (!inner.destroyed.load(Ordering::Acquire)).then_some(CompletionQueue { inner })
    }
}

/// A completion queue (`VIP_CQ_HANDLE`). Cheap to clone.
#[derive(Clone)]
pub struct CompletionQueue {
    inner: Arc<CqInner>,
}

impl std::fmt::Debug for CompletionQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompletionQueue").field("capacity", &self.capacity()).finish()
    }
}

static NEXT_CQ: AtomicU64 = AtomicU64::new(1);

/// Whether a queue of `entries` can be had: not 0, not more than the NIC's `MaxCQEntries`.
fn check_entries(nic: &Nic, entries: usize) -> Result<()> {
    if entries == 0 {
        return Err(Error::InvalidParameter("a completion queue of 0 entries".into()));
    }
    let max = nic.attributes().max_cq_entries;
    if entries as u64 > max {
        return Err(Error::Resource(format!("{entries} entries: a completion queue holds at most {max}")));
    }
    Ok(())
}

impl CompletionQueue {
    /// `VipCreateCQ` with room for `entries` completions.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] for 0 entries; [`Error::Resource`] for more than the
    /// NIC's `max_cq_entries`, or when its doorbell cannot be made.
    pub fn create(nic: &Nic, entries: usize) -> Result<CompletionQueue> {
        check_entries(nic, entries)?;
        let desc = &nic.inner.desc;
        let bell = Interrupt::create(desc, remora_sisci::ADAPTER, None, true, None)?;
        let self_bell =
            RemoteInterrupt::connect(desc, nic.node(), remora_sisci::ADAPTER, bell.number(), None)?;
        Ok(CompletionQueue {
            inner: Arc::new(CqInner {
                id: NEXT_CQ.fetch_add(1, Ordering::Relaxed),
                nic: nic.clone(),
                entries: Mutex::new(VecDeque::new()),
                capacity: AtomicUsize::new(entries),
                vis: Mutex::new(Vec::new()),
                bell,
                self_bell,
                waiting: AtomicUsize::new(0),
                cq_waiting: AtomicUsize::new(0),
                destroyed: AtomicBool::new(false),
                #[cfg(test)]
                rung: AtomicUsize::new(0),
                #[cfg(test)]
                asleep: AtomicUsize::new(0),
            }),
        })
    }

    /// The queue, held without keeping it (nor its NIC) alive: a notification's thread.
    pub(crate) fn downgrade(&self) -> WeakCq {
        WeakCq(Arc::downgrade(&self.inner))
    }

    /// A number naming this queue for the life of the process (never given again).
    pub fn id(&self) -> u64 {
        self.inner.id
    }

    /// The NIC it belongs to.
    pub fn nic(&self) -> &Nic {
        &self.inner.nic
    }

    /// How many completions it holds at most.
    pub fn capacity(&self) -> usize {
        self.inner.capacity.load(Ordering::Relaxed)
    }

    pub(crate) fn bell_number(&self) -> u32 {
        self.inner.bell.number()
    }

    pub(crate) fn attach(&self, vi: &Arc<ViInner>, recv: bool) {
        lock(&self.inner.vis).push((Arc::downgrade(vi), vi.id, recv));
    }

    pub(crate) fn detach(&self, id: u64) {
        lock(&self.inner.vis).retain(|(_, v, _)| *v != id);
        lock(&self.inner.entries).retain(|(v, _)| *v != id);
    }

    /// Queue the completion of descriptor `desc` of VI `vi` (`recv`: of its receive queue);
    /// a full queue drops it and tells the error callback, naming the VI and the descriptor
    /// (see the module's doc).
    pub(crate) fn push(&self, vi: u64, recv: bool, desc: usize) {
        {
            let mut e = lock(&self.inner.entries);
            if e.len() >= self.capacity() {
                drop(e);
                self.inner.nic.report(ErrorEvent {
                    vi: self.vi_of(vi),
                    cq: Some(self.clone()),
                    descriptor: Some(desc),
                    opcode: 0,
                    resource: 2,
                    code: ErrorCode::Catastrophic,
                });
                return;
            }
            e.push_back((vi, recv));
        }
        self.ring_unless_alone(&self.inner.cq_waiting, CQ_WAIT);
    }

    /// Take in the receives of the attached VIs: their completions join the queue.
    fn reap_receives(&self) {
        let recv_vis: Vec<Arc<ViInner>> =
            lock(&self.inner.vis).iter().filter(|(_, _, r)| *r).filter_map(|(w, _, _)| w.upgrade()).collect();
        for vi in recv_vis {
            let _ = vi.reap();
        }
    }

    /// Ring the doorbell when a thread other than this one sleeps on it (is counted by
    /// [`CompletionQueue::waiter`]), of either kind: an error or a disconnect of a VI.
    pub(crate) fn wake(&self) {
        self.ring_unless_alone(&self.inner.waiting, ANY_WAIT);
    }

    /// Ring the doorbell when `count` counts a thread other than this one; this one is
    /// counted there when it is counted on this queue with a kind bit `kind` takes. A
    /// waiter that takes a completion in itself (its last look before it sleeps, its look
    /// after a ring) does not ring for itself, which would wake the others for nothing.
    fn ring_unless_alone(&self, count: &AtomicUsize, kind: usize) {
        // The count first: a thread-local look only when one sleeper might be this one.
        let n = count.load(Ordering::SeqCst);
        if n == 0 {
            return;
        }
        if n == 1 {
            let me = Arc::as_ptr(&self.inner) as usize;
            let on = COUNTED_ON.with(|c| c.get());
            if on & !CQ_WAIT == me && on & kind == kind {
                return;
            }
        }
        #[cfg(test)]
        self.inner.rung.fetch_add(1, Ordering::Relaxed);
        let _ = self.inner.self_bell.trigger();
    }

    /// `VipDestroyCQ`.
    ///
    /// # Errors
    /// [`Error::Resource`] while a VI reports to it.
    pub fn destroy(&self) -> Result<()> {
        let mut vis = lock(&self.inner.vis);
        vis.retain(|(w, _, _)| w.strong_count() > 0);
        if !vis.is_empty() {
            return Err(Error::Resource("VIs still report to this completion queue".into()));
        }
        self.inner.destroyed.store(true, Ordering::Release);
        Ok(())
    }

    /// `VipResizeCQ`: room for `entries` completions from now on (those queued stay).
    /// Grown, the queue has its new room before the completions that landed are taken in
    /// (none of them finds it full).
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] for 0; [`Error::Resource`] for more than the NIC's
    /// `max_cq_entries`, or for fewer entries than it holds now (completions that landed
    /// and were not taken count); the size is unchanged then.
    pub fn resize(&self, entries: usize) -> Result<()> {
        check_entries(&self.inner.nic, entries)?;
        let held = lock(&self.inner.entries);
        if entries > self.capacity() {
            // Room first (it holds at most its old size, fewer than `entries`), then what
            // landed is taken in.
            self.inner.capacity.store(entries, Ordering::Relaxed);
            drop(held);
            self.reap_receives();
            return Ok(());
        }
        drop(held);
        self.reap_receives();
        let e = lock(&self.inner.entries);
        if e.len() > entries {
            return Err(Error::Resource(format!("{} completions queued, more than {entries}", e.len())));
        }
        self.inner.capacity.store(entries, Ordering::Relaxed);
        Ok(())
    }

    fn vi_of(&self, id: u64) -> Option<Vi> {
        lock(&self.inner.vis)
            .iter()
            .find(|(_, v, _)| *v == id)
            .and_then(|(w, _, _)| w.upgrade())
            .map(|inner| Vi { inner })
    }

    /// `VipCQDone`: the VI and queue (`true`: receive) of the oldest completion.
    ///
    /// # Errors
    /// [`Error::NotDone`] when there is none.
    pub fn done(&self) -> Result<(Vi, bool)> {
        self.reap_receives();
        loop {
            let Some((id, recv)) = lock(&self.inner.entries).pop_front() else { return Err(Error::NotDone) };
            if let Some(vi) = self.vi_of(id) {
                return Ok((vi, recv));
            }
        }
    }

    /// `VipCQWait`: wait up to `timeout` (`None`: forever) for a completion.
    ///
    /// # Errors
    /// [`Error::Timeout`].
    pub fn wait(&self, timeout: Option<Duration>) -> Result<(Vi, bool)> {
        let start = Instant::now();
        loop {
            if let Ok(x) = self.done() {
                return Ok(x);
            }
            let left = match timeout {
                Some(t) => t.checked_sub(start.elapsed()).filter(|l| !l.is_zero()).ok_or(Error::Timeout)?,
                None => SLICE,
            };
            let waiter = self.waiter(true);
            if let Ok(x) = self.done() {
                return Ok(x);
            }
            waiter.sleep(left.min(SLICE), Duration::from_micros(20));
        }
    }

    /// Count the caller among the threads sleeping on the queue's doorbell until the
    /// guard drops (`cq_wait`: as a `VipCQWait`): an error or a disconnect from now on
    /// (and, for a `VipCQWait`, a completion taken in by another thread) rings it, and a
    /// ring from now on ends its [`CqWaiter::sleep`]. Taken before the caller's last look.
    pub(crate) fn waiter(&self, cq_wait: bool) -> CqWaiter<'_> {
        // The count of rings first: a completion the look after this misses (it lands
        // later) is rung after it, for a peer's ring follows its stores and a completion
        // taken in here rings once this thread is counted.
        let seen = self.inner.bell.triggers().unwrap_or(0);
        if cq_wait {
            self.inner.cq_waiting.fetch_add(1, Ordering::SeqCst);
        }
        self.inner.waiting.fetch_add(1, Ordering::SeqCst);
        let kind = if cq_wait { CQ_WAIT } else { ANY_WAIT };
        COUNTED_ON.with(|c| c.set(Arc::as_ptr(&self.inner) as usize | kind));
        CqWaiter { cq: self, seen, cq_wait }
    }

    /// Rings of the doorbell by this process ([`CompletionQueue::wake`]) so far.
    #[cfg(test)]
    pub(crate) fn rung(&self) -> usize {
        self.inner.rung.load(Ordering::Relaxed)
    }

    /// Every ring of the doorbell so far, the peers' and this process's.
    #[cfg(test)]
    pub(crate) fn rings(&self) -> u32 {
        self.inner.bell.triggers().unwrap()
    }

    /// Threads asleep on the doorbell now (inside [`CqWaiter::sleep`]).
    #[cfg(test)]
    pub(crate) fn asleep(&self) -> usize {
        self.inner.asleep.load(Ordering::SeqCst)
    }
}

/// The kind bit of [`COUNTED_ON`] for a `VipCQWait` (a `CqInner` is aligned to 8 bytes,
/// so the address's low bits are free), and the mask that any kind passes.
const CQ_WAIT: usize = 1;
const ANY_WAIT: usize = 0;

thread_local! {
    /// The completion queue (its `CqInner`'s address, with [`CQ_WAIT`] for a `VipCQWait`)
    /// whose doorbell this thread is counted on, 0 for none: its own completions do not
    /// ring for it.
    static COUNTED_ON: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// A thread counted as sleeping on a completion queue's doorbell
/// ([`CompletionQueue::waiter`]); no longer when dropped.
pub(crate) struct CqWaiter<'a> {
    cq: &'a CompletionQueue,
    /// The doorbell's count of rings before the thread's last look.
    seen: u32,
    /// Counted as a `VipCQWait` too.
    cq_wait: bool,
}

impl CqWaiter<'_> {
    /// Sleep up to `slice` (spinning `spin` first) until the doorbell rings after the
    /// count read before the caller's last look ([`CompletionQueue::waiter`]), then stop
    /// being counted. `VipCQWait` and `VipRecvWait` of an
    /// attached receive queue (its peer rings this bell, not the VI's, on every completion)
    /// sleep so: a ring consumes nothing, every sleeper wakes and looks for its own
    /// completion (none takes a ring another needed, to sleep on to its slice's end), and
    /// a thread that takes a completion in after the ring is not counted any more (it
    /// rings for the others only).
    pub(crate) fn sleep(self, slice: Duration, spin: Duration) {
        #[cfg(test)]
        self.cq.inner.asleep.fetch_add(1, Ordering::SeqCst);
        let _ = self.cq.inner.bell.wait_past(self.seen, Some(slice), spin);
        #[cfg(test)]
        self.cq.inner.asleep.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Drop for CqWaiter<'_> {
    fn drop(&mut self) {
        COUNTED_ON.with(|c| c.set(0));
        self.cq.inner.waiting.fetch_sub(1, Ordering::SeqCst);
        if self.cq_wait {
            self.cq.inner.cq_waiting.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

#[cfg(test)]
mod tests;
