//! Registered memory. `VipRegisterMem` of any memory of the program (heap, stack,
//! anonymous maps, at any alignment) makes its pages shareable in place: each page run not
//! shared yet moves into a memfd that backs the same addresses (a *piece*, one SISCI
//! segment of the NIC), and pages shared by an earlier registration are found again, so two
//! buffers on one page both work. A region is its range plus the pieces it lies in; peers
//! write straight into the pieces, so the program sees the bytes where it put its buffer,
//! with no shadow copy (VIA2SISCI had to copy or break the spec here).

use crate::few::Few;
use crate::layout::{
    Chunk, Slot, MAX_CHUNKS, MAX_PIECES, SLOTS, SLOT_RDMA_READ, SLOT_RDMA_WRITE, SLOT_VALID,
};
use crate::{Error, Result};
use remora_client::id_hash::IdMap;
use remora_sisci::{CreateFlags, Descriptor, LocalSegment, UserRegion};
use std::collections::BTreeMap;

/// A protection tag (`VIP_PROTECTION_HANDLE`): memory and a VI work together only when
/// they carry the same one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProtectionTag(pub u64);

/// The attributes of registered memory (`VIP_MEM_ATTRIBUTES`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemAttributes {
    /// The protection tag.
    pub ptag: ProtectionTag,
    /// Peers may RDMA-write it.
    pub rdma_write: bool,
    /// Peers may RDMA-read it.
    pub rdma_read: bool,
}

/// A memory handle (`VIP_MEM_HANDLE`).
pub type MemHandle = u32;

#[derive(Debug)]
struct Piece {
    len: usize,
    seg: LocalSegment,
    /// Where the piece's first page lies in the segment.
    seg_off: usize,
    refs: usize,
    /// Whether this library moved the piece's pages (counted in [`MOVED`]): the last
    /// piece over them to go gives them private memory again.
    moved: bool,
}

/// The page ranges `VipRegisterMem` moved into memfds in this process, by first address:
/// the range and how many pieces (of any NIC) lie over it. When the last goes, the pages
/// become private again with their bytes, so a peer that still holds the memfd writes
/// into nothing the program sees (`VipDeregisterMem`).
///
/// Its lock covers the whole change of sharing on either side: a registration holds it
/// from finding the pages shared (or moving them) until its piece is counted, and the
/// last piece's give-back holds it until the pages are private again. Otherwise another
/// NIC's registration could find the pages still shared, be counted after the last piece
/// went, and have them unshared under it (peers would write into a memfd the program no
/// longer sees).
static MOVED: std::sync::Mutex<BTreeMap<usize, (UserRegion, usize)>> = std::sync::Mutex::new(BTreeMap::new());

type MovedBook = std::sync::MutexGuard<'static, BTreeMap<usize, (UserRegion, usize)>>;

fn moved_book() -> MovedBook {
    MOVED.lock().unwrap_or_else(|p| p.into_inner())
}

/// A piece over pages this library moved is gone: the last one gives them back, under
/// the book's lock (see [`MOVED`]).
fn let_go(start: usize) {
    let mut book = moved_book();
    let back = match book.get_mut(&start) {
        Some((_, n)) if *n > 1 => {
            *n -= 1;
            None
        }
        Some(_) => book.remove(&start).map(|(r, _)| r),
        None => None,
    };
    // Not pages of this thread's stack below this frame: the give-back's own calls write
    // there between its copy and its remap, and would lose what they wrote. Such pages (of
    // a frame that has returned) stay shared, as they did before stacks were given back.
    let here = std::hint::black_box(&start) as *const usize as usize;
    let written = here.saturating_sub(STACK_BELOW)..here;
    if let Some(r) = back.filter(|r| r.addr() >= written.end || r.addr() + r.len() <= written.start) {
        let _ = remora_sys::user_memory::unshare_region(r);
        remora_sys::user_memory::prune_shared();
    }
    drop(book);
}

/// How far below a frame its calls may write the stack (as `remora_sys::user_memory`
/// reckons for a move in place).
const STACK_BELOW: usize = 256 << 10;

/// Whether `run` lies in the main thread's stack (`[stack]`; other threads' stacks are
/// anonymous maps): private memory too, moved here, given back as the rest is.
fn on_main_stack(run: UserRegion) -> bool {
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else { return false };
    maps.lines().filter(|l| l.ends_with("[stack]")).any(|l| {
        let mut parts = l.split_whitespace();
        let range = parts.next().and_then(|r| r.split_once('-'));
        let hex = |s: &str| usize::from_str_radix(s, 16).ok();
        let writable = parts.next() == Some("rw-p");
        range
            .and_then(|(lo, hi)| Some((hex(lo)?, hex(hi)?)))
            .is_some_and(|(lo, hi)| writable && lo <= run.addr() && run.addr() + run.len() <= hi)
    })
}

/// A piece that is gone: its segment is removed, and pages this library moved for it
/// become private again, with their bytes.
#[derive(Debug)]
pub(crate) struct Gone {
    seg: LocalSegment,
    start: Option<usize>,
}

impl Gone {
    /// Remove the segment (peers lose it), then give the pages back.
    pub(crate) fn release(self) {
        let _ = self.seg.remove();
        if let Some(s) = self.start {
            let_go(s);
        }
    }
}

impl Piece {
    fn gone(self, start: usize) -> Gone {
        Gone { seg: self.seg, start: self.moved.then_some(start) }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Region {
    pub(crate) user: UserRegion,
    pub(crate) attrs: MemAttributes,
    /// Starts of the pieces, in address order.
    pieces: Vec<usize>,
    /// The NIC's count of deregistrations when it was registered (`NicInner::mem_epoch`).
    since: u64,
}

/// The NIC's registered memory.
#[derive(Debug, Default)]
pub(crate) struct MemBook {
    pieces: BTreeMap<usize, Piece>,
    regions: IdMap<MemHandle, Region>,
    next: u32,
}

impl MemBook {
    /// The piece holding `addr`, as (start, piece).
    fn piece_at(&self, addr: usize) -> Option<(usize, &Piece)> {
        let (start, p) = self.pieces.range(..=addr).next_back()?;
        (addr < start + p.len).then_some((*start, p))
    }

    /// `VipRegisterMem`, at `epoch`, the NIC's count of deregistrations now.
    pub(crate) fn register(
        &mut self,
        desc: &Descriptor,
        user: UserRegion,
        attrs: MemAttributes,
        epoch: u64,
    ) -> Result<(MemHandle, Slot)> {
        if user.is_empty() || user.addr() == 0 {
            return Err(Error::InvalidParameter("empty or null memory".into()));
        }
        if self.regions.len() >= SLOTS {
            return Err(Error::Resource(format!("{SLOTS} regions registered")));
        }
        let span = user.page_span();
        let mut starts = Vec::new();
        let mut made = Vec::new();
        // Held until every piece is counted (see [`MOVED`]).
        let mut book = moved_book();
        let outcome: Result<()> = (|| {
            for run in remora_sys::user_memory::shared_splits(span) {
                if let Some((start, p)) = self.piece_at(run.addr()) {
                    if run.addr() + run.len() <= start + p.len {
                        if !starts.contains(&start) {
                            starts.push(start);
                        }
                        continue;
                    }
                }
                // Private memory is moved into a memfd of its own here; memory shared
                // before (by another NIC of this process, or another library) is found.
                let fresh = remora_sys::user_memory::is_private_anonymous(run.addr(), run.len())
                    || on_main_stack(run);
                let seg = LocalSegment::create(
                    desc,
                    None,
                    run.len(),
                    CreateFlags { empty: true, ..Default::default() },
                )?;
                let off = seg.register_region(run).map_err(|e| match e {
                    remora_sisci::Error::IllegalAddress => {
                        Error::InvalidParameter("memory that cannot be registered".into())
                    }
                    other => other.into(),
                })?;
                seg.prepare(remora_sisci::ADAPTER)?;
                seg.set_available(remora_sisci::ADAPTER)?;
                // The segment is the whole shared range the run lies in.
                let start = run.addr() - off;
                let moved = {
                    if let Some((_, n)) = book.get_mut(&start) {
                        *n += 1;
                        true
                    } else if fresh && off == 0 {
                        book.insert(start, (run, 1));
                        true
                    } else {
                        false
                    }
                };
                self.pieces.insert(start, Piece { len: seg.size(), seg, seg_off: 0, refs: 0, moved });
                made.push(start);
                starts.push(start);
            }
            if starts.len() > MAX_PIECES {
                return Err(Error::Resource(format!(
                    "the memory spans {} registered pieces (at most {MAX_PIECES})",
                    starts.len()
                )));
            }
            Ok(())
        })();
        drop(book);
        if let Err(e) = outcome {
            for s in made {
                if let Some(p) = self.pieces.remove(&s) {
                    p.gone(s).release();
                }
            }
            return Err(e);
        }
        for s in &starts {
            if let Some(p) = self.pieces.get_mut(s) {
                p.refs += 1;
            }
        }
        let handle = loop {
            self.next = self.next.wrapping_add(1);
            let h = self.next;
            if h != 0 && !self.regions.keys().any(|k| (*k as usize) % SLOTS == (h as usize) % SLOTS) {
                break h;
            }
        };
        self.regions.insert(handle, Region { user, attrs, pieces: starts, since: epoch });
        let slot = self.slot(handle).unwrap_or_default();
        Ok((handle, slot))
    }

    /// The table slot describing `handle`.
    pub(crate) fn slot(&self, handle: MemHandle) -> Option<Slot> {
        let r = self.regions.get(&handle)?;
        let mut flags = SLOT_VALID;
        if r.attrs.rdma_write {
            flags |= SLOT_RDMA_WRITE;
        }
        if r.attrs.rdma_read {
            flags |= SLOT_RDMA_READ;
        }
        let pieces = r
            .pieces
            .iter()
            .filter_map(|s| {
                let p = self.pieces.get(s)?;
                Some((p.seg.id(), p.seg_off as u64, *s as u64, p.len as u64))
            })
            .collect();
        Some(Slot {
            base: r.user.addr() as u64,
            len: r.user.len() as u64,
            ptag: r.attrs.ptag.0,
            handle,
            flags,
            pieces,
        })
    }

    fn region(&self, handle: MemHandle, addr: usize) -> Result<&Region> {
        match self.regions.get(&handle) {
            Some(r) if r.user.addr() == addr => Ok(r),
            _ => Err(Error::InvalidParameter(format!(
                "no memory registered at {addr:#x} with handle {handle}"
            ))),
        }
    }

    /// `VipDeregisterMem`: returns the pieces no region uses any more (to release).
    pub(crate) fn deregister(&mut self, handle: MemHandle, addr: usize) -> Result<Vec<Gone>> {
        self.region(handle, addr)?;
        let r = self.regions.remove(&handle).ok_or_else(|| Error::InvalidParameter("stale handle".into()))?;
        let mut gone = Vec::new();
        for s in r.pieces {
            let last = self.pieces.get_mut(&s).is_some_and(|p| {
                p.refs -= 1;
                p.refs == 0
            });
            if last {
                if let Some(p) = self.pieces.remove(&s) {
                    gone.push(p.gone(s));
                }
            }
        }
        Ok(gone)
    }

    /// `VipQueryMem`.
    pub(crate) fn query(&self, handle: MemHandle, addr: usize) -> Result<MemAttributes> {
        Ok(self.region(handle, addr)?.attrs)
    }

    /// `VipSetMemAttributes`.
    pub(crate) fn set(&mut self, handle: MemHandle, addr: usize, attrs: MemAttributes) -> Result<Slot> {
        self.region(handle, addr)?;
        if let Some(r) = self.regions.get_mut(&handle) {
            r.attrs = attrs;
        }
        self.slot(handle).ok_or_else(|| Error::InvalidParameter("stale handle".into()))
    }

    /// Whether any region carries `ptag`.
    pub(crate) fn uses_ptag(&self, ptag: ProtectionTag) -> bool {
        self.regions.values().any(|r| r.attrs.ptag == ptag)
    }

    /// The program's memory `addr..addr+len` inside region `handle`, if it is there and
    /// carries `ptag` (when given).
    pub(crate) fn local(
        &self,
        handle: MemHandle,
        addr: usize,
        len: usize,
        ptag: Option<ProtectionTag>,
    ) -> Option<UserRegion> {
        let r = self.regions.get(&handle)?;
        if ptag.is_some_and(|p| p != r.attrs.ptag) {
            return None;
        }
        r.user.within(addr, len)
    }

    /// Whether `addr..addr+len` lies inside memory registered now (how the data path checks
    /// memory it found registered earlier, after a deregistration: it is still mapped).
    pub(crate) fn covers(&self, addr: usize, len: usize) -> bool {
        self.regions.values().any(|r| r.user.within(addr, len).is_some())
    }

    /// Whether `addr..addr+len` lies inside memory registered no later than `epoch` (the
    /// NIC's count of deregistrations when a receive found it registered) and still: in
    /// the pieces the receive described. Memory deregistered since and registered again at
    /// the same address lies in new pieces, which the peer was never told of.
    pub(crate) fn covers_since(&self, addr: usize, len: usize, epoch: u64) -> bool {
        self.regions.values().any(|r| r.since <= epoch && r.user.within(addr, len).is_some())
    }

    /// Where `addr..addr+len` of region `handle` lies in the NIC's pieces.
    pub(crate) fn chunks(
        &self,
        handle: MemHandle,
        addr: usize,
        len: usize,
        ptag: ProtectionTag,
        out: &mut Few<Chunk, 2>,
    ) -> Option<()> {
        self.local(handle, addr, len, Some(ptag))?;
        let (mut at, end) = (addr, addr + len);
        while at < end {
            let (start, p) = self.piece_at(at)?;
            let n = (start + p.len).min(end) - at;
            if out.len() >= MAX_CHUNKS {
                return None;
            }
            out.push(Chunk { seg: p.seg.id(), len: n as u32, off: (p.seg_off + at - start) as u64 });
            at += n;
        }
        Some(())
    }

    /// Every piece (for closing the NIC).
    pub(crate) fn drain(&mut self) -> Vec<Gone> {
        self.regions.clear();
        std::mem::take(&mut self.pieces).into_iter().map(|(s, p)| p.gone(s)).collect()
    }
}
