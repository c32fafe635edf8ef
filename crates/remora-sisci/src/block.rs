//! The API 1.x block transfers: a copy of a range of one map into a range of another,
//! waited for (`SCITransferBlock`) or run on a thread of its own (`SCITransferBlockAsync`,
//! `SCIWaitForBlockTransfer`, `SCIAbortBlockTransfer`).
//!
//! Both maps may be of this host's memory (then the bytes move in one copy between the two
//! mappings) or of another host's segment (then they go through a bounce buffer and the
//! DSM pager, and the destination is flushed home before the transfer counts as done).

use crate::map::Map;
use crate::{Descriptor, Error, Result};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

/// The most bytes moved between two looks at an abort request (and the bounce buffer's
/// size for maps of another host).
const PIECE: usize = 1 << 20;

/// What runs when an asynchronous block transfer has ended: it gets the outcome (`Ok`,
/// the error, or [`Error::Cancelled`] after [`BlockTransfer::abort`]).
pub type BlockCallback = Box<dyn FnOnce(&Result<()>) + Send>;

/// Check both ranges and the destination's writability before any byte moves.
fn check(src: &Map, src_off: usize, dst: &Map, dst_off: usize, size: usize) -> Result<()> {
    let fits = |map: &Map, off: usize| off.checked_add(size).is_some_and(|end| end <= map.size());
    if !fits(src, src_off) || !fits(dst, dst_off) {
        return Err(Error::OutOfRange);
    }
    if src.is_lost() || dst.is_lost() {
        return Err(Error::TransferFailed);
    }
    Ok(())
}

/// Move `size` bytes, a piece at a time, stopping early (with [`Error::Cancelled`]) once
/// `stop` is set.
fn copy(src: &Map, src_off: usize, dst: &Map, dst_off: usize, size: usize, stop: &AtomicBool) -> Result<()> {
    let direct = src.local_mapping().zip(dst.local_mapping());
    if direct.is_none() && !src.acquire() {
        return Err(Error::TransferFailed);
    }
    let mut bounce = Vec::new();
    let mut done = 0;
    while done < size {
        if stop.load(Ordering::Acquire) {
            return Err(Error::Cancelled);
        }
        let n = (size - done).min(PIECE);
        match &direct {
            Some((from, to)) => {
                to.copy_from(dst_off + done, from, src_off + done, n).map_err(|e| match e.raw_os_error() {
                    Some(13) => Error::IllegalOperation,
                    _ => Error::from(e),
                })?
            }
            None => {
                bounce.resize(n, 0);
                src.read(src_off + done, &mut bounce)?;
                dst.write(dst_off + done, &bounce)?;
            }
        }
        done += n;
    }
    if !dst.flush() {
        return Err(Error::TransferFailed);
    }
    Ok(())
}

/// `SCITransferBlock`: copy `size` bytes of `src` at `src_off` into `dst` at `dst_off`, and
/// return when they are in the destination's memory. A zero size does nothing. Ranges of
/// the same memory that overlap give an unspecified result, as with the adapters.
///
/// # Errors
/// [`Error::OutOfRange`] when either range leaves its map; [`Error::IllegalOperation`]
/// for a read-only destination; [`Error::TransferFailed`] when either map's connection
/// (or the home of its pages) is lost; [`Error::IllegalParameter`] for an unmapped map.
pub fn transfer_block(src: &Map, src_off: usize, dst: &Map, dst_off: usize, size: usize) -> Result<()> {
    check(src, src_off, dst, dst_off, size)?;
    copy(src, src_off, dst, dst_off, size, &AtomicBool::new(false))
}

#[derive(Default)]
struct BlockState {
    /// The outcome, once the copy has stopped.
    outcome: Option<Result<()>>,
    /// Whether the callback (if any) has returned: the transfer is over.
    over: bool,
}

struct BlockInner {
    desc: Descriptor,
    stop: AtomicBool,
    st: Mutex<BlockState>,
    cond: Condvar,
    /// The thread that copies and runs the callback.
    worker: OnceLock<ThreadId>,
}

impl std::fmt::Debug for BlockInner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockInner").field("stop", &self.stop).finish_non_exhaustive()
    }
}

/// An asynchronous block transfer (`sci_block_transfer_t`).
#[derive(Debug, Clone)]
pub struct BlockTransfer {
    inner: Arc<BlockInner>,
}

impl BlockTransfer {
    /// `SCITransferBlockAsync`: check the ranges, then copy as [`transfer_block`] does on a
    /// thread of the transfer's own, and run `callback` there (never inside this call) when
    /// the copy has ended.
    ///
    /// # Errors
    /// [`Error::OutOfRange`], [`Error::TransferFailed`] as for [`transfer_block`], found
    /// before anything starts; [`Error::System`] when no thread could be started. Errors
    /// of the copy itself are the transfer's outcome ([`BlockTransfer::wait`], callback).
    pub fn start(
        src: &Map,
        src_off: usize,
        dst: &Map,
        dst_off: usize,
        size: usize,
        callback: Option<BlockCallback>,
    ) -> Result<BlockTransfer> {
        check(src, src_off, dst, dst_off, size)?;
        let inner = Arc::new(BlockInner {
            desc: src.descriptor().clone(),
            stop: AtomicBool::new(false),
            st: Mutex::new(BlockState::default()),
            cond: Condvar::new(),
            worker: OnceLock::new(),
        });
        let (me, src, dst) = (Arc::clone(&inner), src.clone(), dst.clone());
        let worker = std::thread::Builder::new()
            .name("sci-block".into())
            .spawn(move || {
                let _ = me.worker.set(std::thread::current().id());
                let outcome = copy(&src, src_off, &dst, dst_off, size, &me.stop);
                me.lock().outcome = Some(outcome.clone());
                me.cond.notify_all();
                if let Some(cb) = callback {
                    // A panicking callback must not leave waiters waiting forever.
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| cb(&outcome)));
                }
                me.lock().over = true;
                me.cond.notify_all();
            })
            .map_err(|e| Error::System(format!("block transfer thread: {e}")))?;
        let _ = inner.worker.set(worker.thread().id());
        Ok(BlockTransfer { inner })
    }

    /// The descriptor of its source map.
    pub fn descriptor(&self) -> &Descriptor {
        &self.inner.desc
    }

    /// Whether the transfer is over (copy ended and callback returned).
    pub fn is_over(&self) -> bool {
        self.inner.lock().over
    }

    /// `SCIWaitForBlockTransfer`: wait up to `timeout` (`None`: no limit) until the copy
    /// has ended and its callback, if any, has returned; then the transfer's outcome.
    /// Waiting again gives the same outcome.
    ///
    /// # Errors
    /// [`Error::Timeout`]; [`Error::IllegalOperation`] from the transfer's own callback
    /// (it would wait for itself); otherwise the outcome: the copy's error, or
    /// [`Error::Cancelled`] when [`BlockTransfer::abort`] stopped it.
    pub fn wait(&self, timeout: Option<Duration>) -> Result<()> {
        if self.inner.worker.get() == Some(&std::thread::current().id()) {
            return Err(Error::IllegalOperation);
        }
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut st = self.inner.lock();
        while !st.over {
            st = match deadline {
                None => self.inner.cond.wait(st).unwrap_or_else(|p| p.into_inner()),
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(Error::Timeout);
                    }
                    self.inner.cond.wait_timeout(st, left).unwrap_or_else(|p| p.into_inner()).0
                }
            };
        }
        st.outcome.clone().unwrap_or(Err(Error::TransferFailed))
    }

    /// `SCIAbortBlockTransfer`: stop the copy at its next 1 MiB boundary and return once
    /// it has stopped (its outcome is then [`Error::Cancelled`], unless the last piece was
    /// already under way: then the copy completes).
    ///
    /// # Errors
    /// [`Error::IllegalOperation`] when the copy had already ended.
    pub fn abort(&self) -> Result<()> {
        let mut st = self.inner.lock();
        if st.outcome.is_some() {
            return Err(Error::IllegalOperation);
        }
        self.inner.stop.store(true, Ordering::Release);
        while st.outcome.is_none() {
            st = self.inner.cond.wait(st).unwrap_or_else(|p| p.into_inner());
        }
        Ok(())
    }
}

impl BlockInner {
    fn lock(&self) -> std::sync::MutexGuard<'_, BlockState> {
        self.st.lock().unwrap_or_else(|p| p.into_inner())
    }
}
