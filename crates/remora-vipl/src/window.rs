//! A window into a segment: a SISCI map, plus its mapping when the memory is on this host,
//! so the data path's loads, stores and copies go straight to memory without taking the
//! map's lock each time. Another host's segment goes through the map (the DSM pager), and
//! every access first checks the segment was not lost: a page of a lost segment that was
//! not fetched yet can never be, and touching it would raise `SIGBUS` in the program.

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

    /// A window that fetches every page of another host's segment now, so the first
    /// accesses need not. The DSM's refresh drops clean pages again (every 1 ms by
    /// default), so this is a head start, not a promise: the link's hot words go straight
    /// home instead (`Map::store_home`, `Map::load_home`).
    pub(crate) fn resident(map: Map, size: usize) -> Window {
        let w = Window::new(map);
        if !w.is_local() {
            let mut b = [0u8; 1];
            for off in (0..size).step_by(4096) {
                let _ = w.map.read(off, &mut b);
            }
        }
        w
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

    /// Store each run (`off`, bytes) in order and make them land before going on (another
    /// host's segment: straight home over the pager flow, one round trip, no page fault);
    /// `false` when they could not.
    pub(crate) fn put(&self, runs: &[(usize, &[u8])]) -> bool {
        match &self.fast {
            Some(m) => {
                for (off, data) in runs {
                    if m.write(*off, data).is_err() {
                        return false;
                    }
                    fence(Ordering::SeqCst);
                }
                true
            }
            None if self.gone() => false,
            None => self.map.store_home(runs).is_ok(),
        }
    }

    /// The word at `off` (0 when out of range).
    #[inline]
    pub(crate) fn load(&self, off: usize) -> u64 {
        self.with_atomic(off, |a| a.load(Ordering::Acquire)).unwrap_or(0)
    }

    /// Store `v` at `off`, after every store made before.
    #[inline]
    pub(crate) fn store(&self, off: usize, v: u64) {
        let _ = self.with_atomic(off, |a| a.store(v, Ordering::Release));
    }
}
