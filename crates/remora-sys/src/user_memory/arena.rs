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
//! again (a peer's stale map of a window gone can never see memory moved later).
//!
//! Nothing is ever cut out of an arena: pages the program let go may still be mapped
//! elsewhere — by a child of `fork`, or by a peer's `scif_mmap` of a window unregistered
//! since, which MPSS keeps valid until it is unmapped — and must keep their bytes there.
//! Memory is given back by rotation instead ([`rotate_if_wasteful`]): once the endpoint's
//! current arena holds much memory handed out that no live window uses and the program
//! no longer maps (64 MiB, or more than half of what it handed out and at least 1 MiB),
//! or once it is full, the endpoint starts a new arena for later moves. An arena that is
//! no endpoint's current one and that no live window uses leaves the book (its descriptor
//! is closed): the kernel frees its pages when the last map of them goes, the program's,
//! a child's or a peer's. Pages of such an arena that the program still maps are its
//! memory as any other shared memfd of Remora's: a later window copies them into its own
//! arena.
//!
//! A window's pages that a live window of the process uses keep their place (one page
//! backs both windows); pages no live window uses any more are free to move, and a run of
//! them that is not one range of the arena yet moves, with the fresh memory beside it, into
//! one new range: a window over many earlier, unregistered windows is one piece again.

use super::maps::{vmas, Vma};
use super::ranges::{uncovered, Counts};
use super::{errno, file_id, movable, prune_in, remap_held, FileId, UserRegion, SHARED};
use crate::Memfd;
use std::io;
use std::os::fd::AsFd;
use std::sync::{Arc, Mutex, MutexGuard};

/// An arena's size: sparse, only what is written takes memory; offsets are never used
/// twice, so this bounds what one arena takes (64 TiB) before the endpoint starts another.
/// Less under a lower `RLIMIT_FSIZE` ([`arena_size`]).
const ARENA_SIZE: u64 = 1 << 46;

/// The size of a new arena: [`ARENA_SIZE`], or the soft `RLIMIT_FSIZE` (`ulimit -f`) when
/// lower, in whole pages — a file made longer than the limit is `SIGXFSZ`, which kills the
/// program; a window larger than that is `ENOMEM`.
fn arena_size() -> u64 {
    let page = crate::page_size() as u64;
    match crate::memfd::file_size_limit() {
        Some(limit) if limit < ARENA_SIZE => limit - limit % page,
        _ => ARENA_SIZE,
    }
}

/// Memory an arena handed out that no live window uses and the program no longer maps,
/// from which the endpoint starts a new arena whatever the share (64 MiB).
const WASTE_MAX: u64 = 64 << 20;

/// Below this, the endpoint keeps its arena however much of it is let go (1 MiB): small
/// windows do not each cost a new memfd.
const WASTE_MIN: u64 = 1 << 20;

struct State {
    id: u64,
    /// The process that made it (a child of `fork` makes its own).
    pid: u32,
    fd: Arc<Memfd>,
    /// Device and inode, as the maps show it.
    file: FileId,
    /// Its size: offsets from here on are never handed out.
    size: u64,
    /// The next offset never handed out (everything below was).
    next: u64,
    /// How many live windows use each range.
    live: Counts,
    /// It is an endpoint's current arena ([`Arena`]), which later moves go into.
    held: bool,
}

/// Every arena of the process: the endpoints' current ones, and earlier ones that live
/// windows still use.
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
        let size = arena_size();
        let fd = Memfd::create("scif-window", size)?;
        let file = file_id(fd.as_fd())?;
        let id = self.next_id;
        self.next_id += 1;
        self.arenas.push(State {
            id,
            pid: crate::sched::own_pid(),
            fd: Arc::new(fd),
            file,
            size,
            next: 0,
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

    /// Drop the arenas of this process that are no endpoint's current one and that no
    /// live window uses: their descriptors close, and their pages go with the last map.
    fn drop_unused(&mut self) {
        let pid = crate::sched::own_pid();
        self.arenas.retain(|a| a.pid != pid || a.held || !a.live.is_empty());
    }

    /// The endpoint's current arena, `*id`: a new one when it has none in this process (a
    /// child of `fork`) or it was retired ([`rotate_if_wasteful`]).
    fn current(&mut self, id: &mut u64) -> io::Result<u64> {
        if !self.get(*id).is_some_and(|a| a.held) {
            *id = self.make()?;
        }
        Ok(*id)
    }

    /// Retire the arena `id` (later moves go into a new one) and drop it if no live
    /// window uses it.
    fn retire(&mut self, id: u64) {
        if let Some(a) = self.get(id) {
            a.held = false;
        }
        self.drop_unused();
    }
}

impl State {
    /// A range of `len` bytes never handed out before.
    fn take(&mut self, len: u64) -> io::Result<u64> {
        let off = self.next;
        let end = off.checked_add(len).filter(|e| *e <= self.size);
        let end = end.ok_or_else(|| errno(rustix::io::Errno::NOMEM))?;
        self.next = end;
        Ok(off)
    }

    /// Whether `len` more bytes fit.
    fn fits(&self, len: u64) -> bool {
        self.next.checked_add(len).is_some_and(|e| e <= self.size)
    }

    /// Bytes handed out that no live window uses and the program does not map, as `maps`
    /// (`/proc/self/maps`' text) shows it.
    fn wasted(&self, maps: &str) -> u64 {
        let live: u64 = self.live.held().map(|(s, e)| e - s).sum();
        if self.next.saturating_sub(live) < WASTE_MIN {
            // Too little beside live windows to be wasteful: the maps need not be read.
            return self.next.saturating_sub(live);
        }
        let mut keep: Vec<(u64, u64)> =
            vmas(maps).filter(|v| self.is(v)).map(|v| (v.off, v.off + (v.hi - v.lo) as u64)).collect();
        keep.extend(self.live.held());
        uncovered(0, self.next, &keep).iter().map(|(s, e)| e - s).sum()
    }

    /// Whether the mapping `v` maps this arena.
    fn is(&self, v: &Vma<'_>) -> bool {
        v.perms.ends_with('s') && v.file() == self.file
    }
}

/// An endpoint's arena: the memfd its windows' pages move into now (a new one once it
/// wastes much or is full). Dropping it lets the arena go once no live window uses it.
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
        // No live window uses it: its descriptor goes now.
        book().retire(id);
    }
}

/// A live window's hold on the arena ranges it uses: while it lives, those pages keep
/// their place (a later window over them shares them), and their arena stays in the book.
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
        let arena = book.arenas.iter().find(|a| shared_file && a.file == v.file() && a.pid == pid);
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
                .find(|(s, l, _, id)| shared_file && *id == v.file() && *s <= cursor && cursor < s + l)
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
/// more than `max_pieces` pieces or its memory to move is more than an arena holds; the
/// errno of `memfd_create`, `ftruncate` or `mmap`.
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
    let mut id = arena.id.lock().unwrap_or_else(|p| p.into_inner());
    // Read with both books locked: another thread's moves are all in it or all later.
    let maps = std::fs::read_to_string("/proc/self/maps")?;
    // What the program let go since is dealt with as at every window's end (SHARED
    // pruned, an arena that wastes much retired: [`prune`]), but only at every 32nd window
    // made (the maps of a process with thousands of windows are long to read through).
    book.made += 1;
    if book.made.is_multiple_of(32) {
        prune_in(&mut shared, &maps);
        prune(&mut book, &maps);
    }
    let mut own = book.current(&mut id)?;
    let mut planned = plan(classify(&book, &shared, own, &maps, addr, end)?);
    // A plan in a new arena (below) is never more pieces.
    if planned.len() > max_pieces {
        return Err(io::Error::new(
            io::ErrorKind::OutOfMemory,
            format!("the memory runs over {} pieces (at most {max_pieces})", planned.len()),
        ));
    }
    // Bytes to move into new ranges; with `all`, those already in the arena too.
    let fresh = |planned: &[Part], all: bool| -> u64 {
        let moved = |p: &Part| match p {
            Part::Move(_, n, at) if all || at.is_none() => *n as u64,
            _ => 0,
        };
        planned.iter().map(moved).sum()
    };
    if !book.get(own).expect("current").fits(fresh(&planned, false)) {
        let too_big = || {
            io::Error::new(
                io::ErrorKind::OutOfMemory,
                format!("the window's memory to move is more than an arena holds ({len} bytes)"),
            )
        };
        if fresh(&planned, true) > arena_size() {
            return Err(too_big());
        }
        // Full: later moves, this one's first, go into a new arena (this window's pages in
        // the old one move too, as one range).
        book.retire(own);
        own = book.current(&mut id)?;
        planned = plan(classify(&book, &shared, own, &maps, addr, end)?);
        if !book.get(own).expect("current").fits(fresh(&planned, false)) {
            return Err(too_big());
        }
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

/// Whether an arena that wasted `wasted` of the `handed` bytes it handed out should be
/// retired: 64 MiB, or more than half and at least 1 MiB.
fn wasteful(wasted: u64, handed: u64) -> bool {
    wasted >= WASTE_MAX || wasted >= WASTE_MIN && wasted > handed / 2
}

/// Retire the arena `id` when it wastes much memory ([`wasteful`]) as `maps` shows the
/// process: the endpoint's later moves go into a new arena, and this one leaves the book
/// as soon as no live window uses it (its pages go with the last map of them).
fn rotate_if_wasteful(book: &mut Book, id: u64, maps: &str) {
    if let Some(a) = book.get(id) {
        if a.held && a.next > 0 && wasteful(a.wasted(maps), a.next) {
            book.retire(id);
        }
    }
}

/// Memory the program let go, as `maps` (read with the book locked) shows: every current
/// arena of this process that wastes much is retired ([`rotate_if_wasteful`]), and arenas
/// that are no endpoint's current one and that no live window uses leave the book.
pub(super) fn prune(book: &mut Book, maps: &str) {
    let pid = crate::sched::own_pid();
    let current: Vec<u64> = book.arenas.iter().filter(|a| a.pid == pid && a.held).map(|a| a.id).collect();
    for id in current {
        rotate_if_wasteful(book, id, maps);
    }
    book.drop_unused();
}

/// Whether this process has an arena.
pub(super) fn holds_any() -> bool {
    let pid = crate::sched::own_pid();
    book().arenas.iter().any(|a| a.pid == pid)
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
        book.arenas
            .iter()
            .filter(|a| a.pid == pid && a.file == v.file())
            .any(|a| a.live.parts(off, off + (hi - lo) as u64).iter().any(|(_, _, live)| *live))
    });
    used
}

/// For tests: the file of `arena`'s current memfd, and what [`classify`] makes of
/// `addr..end` as `maps` shows the process — each part `"keep"`, `"move"` (into a new
/// range) or `"in place"` (a range of the arena already).
#[cfg(test)]
pub(super) fn classified(
    arena: &Arena,
    shared: &[super::Moved],
    maps: &str,
    addr: usize,
    end: usize,
) -> (FileId, io::Result<Vec<&'static str>>) {
    let mut book = book();
    let own = book.current(&mut arena.id.lock().unwrap()).unwrap();
    let file = book.get(own).expect("current").file;
    let names = classify(&book, shared, own, maps, addr, end).map(|parts| {
        let name = |p: &Part| match p {
            Part::Keep(..) => "keep",
            Part::Move(_, _, None) => "move",
            Part::Move(_, _, Some(_)) => "in place",
        };
        parts.iter().map(name).collect()
    });
    (file, names)
}
