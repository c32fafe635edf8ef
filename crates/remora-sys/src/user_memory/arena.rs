//! Arenas: one sparse memfd per SCIF endpoint that its windows' pages move into, a window
//! being ranges of it (`scif_register`).
//!
//! Every window of an endpoint shares the one descriptor, however many windows there are
//! (a memfd per moved range held a descriptor per window, in the process and in its
//! daemon: a thousand windows ran out of a 1024-descriptor limit). An arena is the
//! endpoint's own, as its peer gets the descriptor (to map the windows): it holds memory of
//! that endpoint's windows only — save pages a window of another endpoint still used when
//! this one was registered over them, which stay in that endpoint's arena (one page lives
//! in one file), so this peer gets that arena too. Ranges are handed out once and never
//! again (a peer's stale map of a window gone can never see memory moved later), and given
//! back to the system (`fallocate(PUNCH_HOLE)`) once no live window uses them and the
//! program no longer maps them ([`prune`]).
//!
//! A window's pages that a live window of the process uses keep their place (one page
//! backs both windows); pages no live window uses any more are free to move, and a run of
//! them that is not one range of the arena yet moves, with the fresh memory beside it, into
//! one new range: a window over many earlier, unregistered windows is one piece again.

use super::ranges::{uncovered, Counts};
use super::{errno, movable, prune_in, remap_held, UserRegion, SHARED};
use crate::Memfd;
use std::io;
use std::os::fd::AsFd;
use std::sync::{Arc, Mutex, MutexGuard};

/// An arena's size: sparse, only what is written takes memory; offsets are never used
/// twice, so this bounds what one endpoint moves in its life (64 TiB).
const ARENA_SIZE: u64 = 1 << 46;

struct State {
    id: u64,
    /// The process that made it (a child of `fork` makes its own).
    pid: u32,
    fd: Arc<Memfd>,
    ino: u64,
    /// The next offset never handed out.
    next: u64,
    /// Ranges handed out and not given back yet.
    allocated: Counts,
    /// How many live windows use each range.
    live: Counts,
    /// An endpoint still holds it ([`Arena`]).
    held: bool,
}

/// Every arena of the process: the endpoints', and those of endpoints gone whose ranges
/// the program still maps (given back as the program lets them go).
pub(super) struct Book {
    next_id: u64,
    /// Windows made ([`share_window`]).
    made: u64,
    arenas: Vec<State>,
}

static ARENAS: Mutex<Book> = Mutex::new(Book { next_id: 1, made: 0, arenas: Vec::new() });

pub(super) fn book() -> MutexGuard<'static, Book> {
    ARENAS.lock().unwrap_or_else(|p| p.into_inner())
}

impl Book {
    fn make(&mut self) -> io::Result<u64> {
        let fd = Memfd::create("scif-window", ARENA_SIZE)?;
        let ino = rustix::fs::fstat(&fd).map_err(errno)?.st_ino;
        let id = self.next_id;
        self.next_id += 1;
        self.arenas.push(State {
            id,
            pid: crate::sched::own_pid(),
            fd: Arc::new(fd),
            ino,
            next: 0,
            allocated: Counts::default(),
            live: Counts::default(),
            held: true,
        });
        Ok(id)
    }

    /// The arena `id` of this process.
    fn get(&mut self, id: u64) -> Option<&mut State> {
        let pid = crate::sched::own_pid();
        self.arenas.iter_mut().find(|a| a.id == id && a.pid == pid)
    }
}

impl State {
    /// A range of `len` bytes never handed out before.
    fn take(&mut self, len: u64) -> io::Result<u64> {
        let off = self.next;
        let end = off.checked_add(len).filter(|e| *e <= ARENA_SIZE);
        let end = end.ok_or_else(|| errno(rustix::io::Errno::NOMEM))?;
        self.next = end;
        self.allocated.add(off, end);
        Ok(off)
    }
}

/// An endpoint's arena: the memfd its windows' pages move into. Dropping it lets the
/// arena go once the program maps none of it.
#[derive(Debug)]
pub struct Arena {
    /// Its id in the book: another one in a child of `fork`, which makes its own.
    id: Mutex<u64>,
}

impl Arena {
    /// A new arena (the memfd is made now).
    ///
    /// # Errors
    /// The errno of `memfd_create`, `ftruncate` or `fcntl(F_ADD_SEALS)`.
    pub fn new() -> io::Result<Arena> {
        Ok(Arena { id: Mutex::new(book().make()?) })
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        let id = *self.id.lock().unwrap_or_else(|p| p.into_inner());
        let mut book = book();
        if let Some(a) = book.get(id) {
            a.held = false;
        }
        // Nothing of it left: its descriptor goes now.
        book.arenas.retain(|a| a.id != id || a.held || !a.allocated.is_empty());
    }
}

/// A live window's hold on the arena ranges it uses: while it lives, those pages keep
/// their place (a later window over them shares them), and they are not given back.
#[derive(Debug)]
pub struct Lease {
    /// Arena id, range.
    ranges: Vec<(u64, u64, u64)>,
}

impl Drop for Lease {
    fn drop(&mut self) {
        let mut book = book();
        for (id, s, e) in &self.ranges {
            if let Some(a) = book.get(*id) {
                a.live.sub(*s, *e);
            }
        }
    }
}

/// A window's memory ([`share_window`]): its pieces in order, each a memfd (an arena, or
/// memory another library shared with [`super::share_region`]), the byte offset in it and
/// the length; and the lease that keeps them the window's while it is registered.
#[derive(Debug)]
pub struct WindowMemory {
    /// The pieces: memfd, offset, bytes. Neighbours of one memfd that follow each other in
    /// it are one piece.
    pub pieces: Vec<(Arc<Memfd>, u64, u64)>,
    /// Drop it when the window is gone.
    pub lease: Lease,
}

/// One mapping of `/proc/self/maps`.
pub(super) struct Vma<'a> {
    pub(super) lo: usize,
    pub(super) hi: usize,
    perms: &'a str,
    pub(super) off: u64,
    /// The file's device, major and minor.
    pub(super) dev: (u32, u32),
    pub(super) ino: u64,
    path: &'a str,
}

fn vmas(maps: &str) -> impl Iterator<Item = Vma<'_>> {
    maps.lines().filter_map(|line| {
        let mut parts = line.split_whitespace();
        let (lo, hi) = parts.next()?.split_once('-')?;
        let perms = parts.next()?;
        let off = u64::from_str_radix(parts.next()?, 16).ok()?;
        let (major, minor) = parts.next()?.split_once(':')?;
        let dev = (u32::from_str_radix(major, 16).ok()?, u32::from_str_radix(minor, 16).ok()?);
        let ino = parts.next()?.parse().ok()?;
        let path = parts.next().unwrap_or("");
        let (lo, hi) = (usize::from_str_radix(lo, 16).ok()?, usize::from_str_radix(hi, 16).ok()?);
        Some(Vma { lo, hi, perms, off, dev, ino, path })
    })
}

/// What a part of a window's memory becomes.
enum Part {
    /// Stays where it is: memfd, offset, bytes.
    Keep(Arc<Memfd>, u64, u64),
    /// Moves into the endpoint's arena: address, bytes, and where it is in that arena now
    /// (pages in it no live window uses).
    Move(usize, usize, Option<u64>),
}

/// The parts of `addr..end` as the maps, the arenas' live ranges and the ranges other
/// libraries shared say; `own` is the endpoint's arena.
fn classify(
    book: &Book,
    shared: &[super::Moved],
    own: u64,
    maps: &str,
    addr: usize,
    end: usize,
) -> io::Result<Vec<Part>> {
    let fault = || errno(rustix::io::Errno::FAULT);
    let pid = crate::sched::own_pid();
    let mut files = super::shared_file::Files::default();
    let mut parts = Vec::new();
    let mut cursor = addr;
    for v in vmas(maps) {
        if v.hi <= cursor {
            continue;
        }
        if v.lo > cursor {
            return Err(fault());
        }
        let stop = v.hi.min(end);
        let shared_file = v.perms.starts_with("rw") && v.perms.ends_with('s');
        let arena = book.arenas.iter().find(|a| shared_file && a.ino == v.ino && a.pid == pid);
        while cursor < stop {
            let file_off = v.off + (cursor - v.lo) as u64;
            if let Some(a) = arena {
                let run = (stop - cursor) as u64;
                for (s, e, live) in a.live.parts(file_off, file_off + run) {
                    let at = cursor + (s - file_off) as usize;
                    parts.push(if live {
                        Part::Keep(a.fd.clone(), s, e - s)
                    } else {
                        Part::Move(at, (e - s) as usize, (a.id == own).then_some(s))
                    });
                }
                cursor = stop;
            } else if let Some((s, l, fd, _)) = shared
                .iter()
                .find(|(s, l, _, ino)| shared_file && *ino == v.ino && *s <= cursor && cursor < s + l)
            {
                let upto = stop.min(s + l);
                parts.push(Part::Keep(fd.clone(), file_off, (upto - cursor) as u64));
                cursor = upto;
            } else if movable(v.perms, v.path) {
                parts.push(Part::Move(cursor, stop - cursor, None));
                cursor = stop;
            } else if let Some(fd) = shared_file.then(|| files.sealed(&v)).flatten() {
                // The program's own shared memory (a sealed memfd): the window is that
                // memory, where it lies in the file.
                parts.push(Part::Keep(fd, file_off, (stop - cursor) as u64));
                cursor = stop;
            } else {
                return Err(fault());
            }
        }
        if cursor >= end {
            return Ok(parts);
        }
    }
    Err(fault())
}

/// What the window will be: runs of parts to move joined (kept in place when they are
/// one range of the arena already), parts kept as they are (neighbours that follow each
/// other in one memfd joined).
fn plan(parts: Vec<Part>) -> Vec<Part> {
    let mut out: Vec<Part> = Vec::new();
    // The run of parts to move under way: address, bytes, and its arena range while it
    // is one.
    let mut run: Option<(usize, usize, Option<u64>)> = None;
    let end_run = |run: &mut Option<(usize, usize, Option<u64>)>, out: &mut Vec<Part>| {
        if let Some((addr, len, at)) = run.take() {
            out.push(Part::Move(addr, len, at));
        }
    };
    for p in parts {
        match p {
            Part::Move(addr, len, at) => match &mut run {
                Some((_, n, joined)) => {
                    // Still one range of the arena when this part follows on in it.
                    let follows = matches!((*joined, at), (Some(j), Some(a)) if j + *n as u64 == a);
                    if !follows {
                        *joined = None;
                    }
                    *n += len;
                }
                None => run = Some((addr, len, at)),
            },
            Part::Keep(fd, off, n) => {
                end_run(&mut run, &mut out);
                match out.last_mut() {
                    Some(Part::Keep(last, o, m)) if Arc::ptr_eq(last, &fd) && *o + *m == off => *m += n,
                    _ => out.push(Part::Keep(fd, off, n)),
                }
            }
        }
    }
    end_run(&mut run, &mut out);
    out
}

/// Make the page-aligned `region` a window's memory, in `arena` (the endpoint's): pages a
/// live window of this process uses stay where they are (one page backs both windows), as
/// do pages another library shared ([`super::share_region`]) and the program's own maps
/// of a memfd sealed against shrinking (`shared_file.rs`); the rest — private memory, and
/// arena pages no live window uses — moves into `arena` in place, each run of it as one
/// range. At most `max_pieces` pieces.
///
/// # Errors
/// `EINVAL` when not page-aligned or empty; `EFAULT` when a part is neither memory that
/// can be moved nor such a memfd (a file mapping, other shared memory, read-only memory,
/// a hole); `ENOMEM` when the window would be
/// more than `max_pieces` pieces or the arena is used up; the errno of `mmap`.
pub fn share_window(arena: &Arena, region: UserRegion, max_pieces: usize) -> io::Result<WindowMemory> {
    let page = crate::page_size();
    let (addr, len) = (region.addr(), region.len());
    if len == 0 || !addr.is_multiple_of(page) || !len.is_multiple_of(page) {
        return Err(errno(rustix::io::Errno::INVAL));
    }
    let end = addr.checked_add(len).ok_or_else(|| errno(rustix::io::Errno::INVAL))?;
    // The ranges other libraries shared, then the arenas (always in this order).
    let mut shared = SHARED.lock().unwrap_or_else(|p| p.into_inner());
    let mut book = book();
    let own = {
        let mut id = arena.id.lock().unwrap_or_else(|p| p.into_inner());
        if book.get(*id).is_none() {
            // A child of `fork`: the arena is its parent's.
            *id = book.make()?;
        }
        *id
    };
    let maps = std::fs::read_to_string("/proc/self/maps")?;
    // What the program let go since is given back, as at every window's end, but only at
    // every 32nd window made (the maps of a process with thousands of windows are long).
    book.made += 1;
    if book.made.is_multiple_of(32) {
        prune_in(&mut shared, &maps);
        prune(&mut book, &maps);
    }
    let planned = plan(classify(&book, &shared, own, &maps, addr, end)?);
    if planned.len() > max_pieces {
        return Err(io::Error::new(
            io::ErrorKind::OutOfMemory,
            format!("the memory runs over {} pieces (at most {max_pieces})", planned.len()),
        ));
    }
    let a = book.get(own).expect("looked up above");
    let mut pieces: Vec<(Arc<Memfd>, u64, u64)> = Vec::with_capacity(planned.len());
    for p in planned {
        let (fd, off, n) = match p {
            Part::Keep(fd, off, n) => (fd, off, n),
            Part::Move(_, n, Some(at)) => (a.fd.clone(), at, n as u64),
            Part::Move(at, n, None) => {
                let off = a.take(n as u64)?;
                let tmp = crate::Mapping::new(a.fd.as_fd(), off, n, Default::default())?;
                // SAFETY: the `UserRegion` contract: the range is this process's memory,
                // stays mapped and is not written in conflict while it moves; the maps
                // said it is movable memory; `tmp` maps the arena at `off`, outside it;
                // the bytes are kept.
                unsafe { remap_held(at as *mut u8, n, &tmp, &a.fd, off)? };
                (a.fd.clone(), off, n as u64)
            }
        };
        match pieces.last_mut() {
            Some((last, o, m)) if Arc::ptr_eq(last, &fd) && *o + *m == off => *m += n,
            _ => pieces.push((fd, off, n)),
        }
    }
    let mut ranges = Vec::new();
    for (fd, off, n) in &pieces {
        if let Some(a) = book.arenas.iter_mut().find(|a| Arc::ptr_eq(&a.fd, fd)) {
            a.live.add(*off, off + n);
            ranges.push((a.id, *off, off + n));
        }
    }
    Ok(WindowMemory { pieces, lease: Lease { ranges } })
}

/// Give back the arena ranges no live window uses and the program no longer maps (it
/// unmapped them, or a later window moved its pages to a new range), as `maps` shows; an
/// arena no endpoint holds goes once nothing of it is left.
pub(super) fn prune(book: &mut Book, maps: &str) {
    let pid = crate::sched::own_pid();
    let mode = rustix::fs::FallocateFlags::PUNCH_HOLE | rustix::fs::FallocateFlags::KEEP_SIZE;
    for a in book.arenas.iter_mut().filter(|a| a.pid == pid && !a.allocated.is_empty()) {
        let mut keep: Vec<(u64, u64)> =
            vmas(maps).filter(|v| v.ino == a.ino).map(|v| (v.off, v.off + (v.hi - v.lo) as u64)).collect();
        keep.extend(a.live.held());
        keep.sort_unstable();
        // Joined, so that each range handed out looks only at what lies over it.
        let mut joined: Vec<(u64, u64)> = Vec::with_capacity(keep.len());
        for (s, e) in keep {
            match joined.last_mut() {
                Some((_, je)) if s <= *je => *je = (*je).max(e),
                _ => joined.push((s, e)),
            }
        }
        let handed: Vec<(u64, u64)> = a.allocated.held().collect();
        for (s, e) in handed {
            let from = joined.partition_point(|(_, je)| *je <= s);
            let upto = joined.partition_point(|(js, _)| *js < e).max(from);
            for (gs, ge) in uncovered(s, e, &joined[from..upto]) {
                if rustix::fs::fallocate(a.fd.as_fd(), mode, gs, ge - gs).is_ok() {
                    a.allocated.sub(gs, ge);
                }
            }
        }
    }
    book.arenas.retain(|a| a.pid != pid || a.held || !a.allocated.is_empty());
}

/// Whether an arena of this process holds ranges that may be given back.
pub(super) fn holds_any() -> bool {
    let pid = crate::sched::own_pid();
    book().arenas.iter().any(|a| a.pid == pid && !a.allocated.is_empty())
}

/// Whether a page of `addr..addr+len` is arena memory a live window uses: another
/// library's move of it ([`super::share_region`], [`super::move_region`],
/// [`super::rebind_region`]) would take it from the window, which would no longer see the
/// program's memory.
pub(super) fn in_live_window(addr: usize, len: usize) -> bool {
    let book = book();
    let pid = crate::sched::own_pid();
    if !book.arenas.iter().any(|a| a.pid == pid && !a.live.is_empty()) {
        return false;
    }
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else { return false };
    let end = addr.saturating_add(len);
    let used = vmas(&maps).filter(|v| v.lo < end && v.hi > addr).any(|v| {
        let (lo, hi) = (v.lo.max(addr), v.hi.min(end));
        let off = v.off + (lo - v.lo) as u64;
        book.arenas.iter().filter(|a| a.pid == pid && a.ino == v.ino).any(|a| {
            a.live.parts(off, off + (hi - lo) as u64).iter().any(|(_, _, live)| *live)
        })
    });
    used
}
