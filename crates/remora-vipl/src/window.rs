//! A window into a segment: a SISCI map, plus its mapping when the memory is on this host,
//! so the data path's loads, stores and copies go straight to memory without taking the
//! map's lock each time. VIPL makes windows only of memory on this host (its own VI
//! segment, and a peer's segments when the peer is on this host): a peer's segments on
//! another host are connected but not mapped, and reached through the VI's channel only
//! (`crate::link`). Were a window made of another host's segment, it would go through the
//! map (the DSM pager), every access first checking the segment was not lost: a page of a
//! lost segment that was not fetched yet can never be, and touching it would raise
//! `SIGBUS` in the program.

use remora_sisci::{Map, Result, UserRegion};
use remora_sys::Mapping;
use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::sync::Arc;

/// A map and, on this host, its mapping.
#[derive(Debug, Clone)]
pub(crate) struct Window {
    pub(crate) map: Map,
    fast: Option<Arc<Mapping>>,
}

fn range() -> remora_sisci::Error {
    remora_sisci::Error::OutOfRange
}

fn lost() -> remora_sisci::Error {
    remora_sisci::Error::NotConnected
}

impl Window {
    pub(crate) fn new(map: Map) -> Window {
        let fast = map.local_mapping();
        Window { map, fast }
    }

    /// Another host's segment that was lost.
    fn gone(&self) -> bool {
        self.fast.is_none() && self.map.is_lost()
    }

    /// Whether the memory is on this host (stores land at once).
    #[inline]
    pub(crate) fn is_local(&self) -> bool {
        self.fast.is_some()
    }

    #[inline]
    pub(crate) fn write(&self, off: usize, data: &[u8]) -> Result<()> {
        match &self.fast {
            Some(m) => m.write(off, data).map_err(|_| range()),
            None if self.gone() => Err(lost()),
            None => self.map.write(off, data),
        }
    }

    #[inline]
    pub(crate) fn read(&self, off: usize, out: &mut [u8]) -> Result<()> {
        match &self.fast {
            Some(m) => m.read(off, out).map_err(|_| range()),
            None if self.gone() => Err(lost()),
            None => self.map.read(off, out),
        }
    }

    pub(crate) fn write_from(&self, off: usize, src: &UserRegion, src_off: usize, len: usize) -> Result<()> {
        match &self.fast {
            Some(m) => m.write_from(off, src, src_off, len).map_err(|_| range()),
            None if self.gone() => Err(lost()),
            None => self.map.write_from(off, src, src_off, len),
        }
    }

    #[inline]
    pub(crate) fn read_into(&self, off: usize, dst: &UserRegion, dst_off: usize, len: usize) -> Result<()> {
        match &self.fast {
            Some(m) => m.read_into(off, dst, dst_off, len).map_err(|_| range()),
            None if self.gone() => Err(lost()),
            None => {
                self.map.acquire();
                self.map.read_into(off, dst, dst_off, len)
            }
        }
    }

    #[inline]
    pub(crate) fn with_atomic<R>(&self, off: usize, f: impl FnOnce(&AtomicU64) -> R) -> Result<R> {
        match &self.fast {
            Some(m) => m.atomic_u64(off).map(f).ok_or_else(range),
            None if self.gone() => Err(lost()),
            None => self.map.with_atomic(off, f),
        }
    }

    /// Put the stores so far on their way (another host's segment: send them home without
    /// waiting). On this host they are on their way already, in order: nothing to do.
    #[inline]
    pub(crate) fn send(&self) -> bool {
        if self.is_local() {
            return true;
        }
        self.map.send()
    }

    /// Make the stores so far land before going on; `false` when they could not.
    pub(crate) fn flush(&self) -> bool {
        if self.is_local() {
            fence(Ordering::SeqCst);
            return true;
        }
        self.map.flush()
    }

    /// Sleep while the low 4 bytes of the word at `off` hold `seen`, at most `timeout`
    /// (memory of this host only: a futex shared with every process that maps it, and
    /// with the node's thread that stores into it for a peer on another host).
    pub(crate) fn wait_word(&self, off: usize, seen: u32, timeout: std::time::Duration) {
        match self.fast.as_ref().and_then(|m| m.atomic_u32(off)) {
            Some(w) => remora_sys::sync::futex_wait(w, seen, Some(timeout)),
            None => std::thread::sleep(timeout.min(std::time::Duration::from_micros(200))),
        }
    }

    /// Wake every sleeper of [`Window::wait_word`] on the word at `off`.
    pub(crate) fn wake_word(&self, off: usize) {
        if let Some(w) = self.fast.as_ref().and_then(|m| m.atomic_u32(off)) {
            remora_sys::sync::futex_wake_all(w);
        }
    }

    /// The word at `off` (0 when out of range).
    #[inline(always)]
    pub(crate) fn load(&self, off: usize) -> u64 {
        // Memory of this host straight (the data path's every look), the rest out of line.
        match self.fast.as_ref().and_then(|m| m.atomic_u64(off)) {
            Some(a) => a.load(Ordering::Acquire),
            None => self.load_slow(off),
        }
    }

    /// The cache line at `off` (a ring B entry) as words, when the memory is on this host
    /// and holds it: one check for the line's every load and store, where [`Window::load`]
    /// and [`Window::store`] check each word.
    #[inline(always)]
    pub(crate) fn line(&self, off: usize) -> Option<&[AtomicU64; 8]> {
        self.fast.as_ref()?.atomic_u64s::<8>(off)
    }

    #[inline(never)]
    fn load_slow(&self, off: usize) -> u64 {
        self.with_atomic(off, |a| a.load(Ordering::Acquire)).unwrap_or(0)
    }

    /// Store `v` at `off`, after every store made before.
    #[inline(always)]
    pub(crate) fn store(&self, off: usize, v: u64) {
        match self.fast.as_ref().and_then(|m| m.atomic_u64(off)) {
            Some(a) => a.store(v, Ordering::Release),
            None => self.store_slow(off, v),
        }
    }

    #[inline(never)]
    fn store_slow(&self, off: usize, v: u64) {
        let _ = self.with_atomic(off, |a| a.store(v, Ordering::Release));
    }
}

/// The window into a peer's VI segment: `Some` when the peer is on this host (stores go
/// straight into its memory), `None` when it is on another host, whose segment is not
/// mapped at all (no pager flow, no pager work; every store goes down the VI's channel).
/// Without a window, stores and copies do nothing and report the segment as lost.
#[derive(Debug)]
pub(crate) struct PeerWindow(pub(crate) Option<Window>);

impl PeerWindow {
    /// Whether the peer's memory is on this host (and mapped here).
    #[inline]
    pub(crate) fn is_local(&self) -> bool {
        self.0.is_some()
    }

    /// See [`Window::write`].
    #[inline]
    pub(crate) fn write(&self, off: usize, data: &[u8]) -> Result<()> {
        self.0.as_ref().ok_or_else(lost)?.write(off, data)
    }

    /// See [`Window::store`].
    #[inline]
    pub(crate) fn store(&self, off: usize, v: u64) {
        if let Some(w) = &self.0 {
            w.store(off, v);
        }
    }

    /// See [`Window::send`] (`false` without a window).
    #[inline]
    pub(crate) fn send(&self) -> bool {
        self.0.as_ref().is_some_and(Window::send)
    }

    /// See [`Window::flush`] (`false` without a window).
    pub(crate) fn flush(&self) -> bool {
        self.0.as_ref().is_some_and(Window::flush)
    }

    /// Unmap the window, if there is one.
    pub(crate) fn unmap(&self) {
        if let Some(w) = &self.0 {
            let _ = w.map.unmap();
        }
    }
}
