//! `libscif.so`: Intel's user-mode SCIF library (MPSS `libscif.so.0`) as a C ABI over
//! Remora's safe Rust API (`remora-scif`). C programs include Remora's `include/scif.h`
//! and link with `-lscif`; every function is exported under its plain name with the
//! symbol version `SCIF_0.0`, as MPSS tagged them.
//!
//! ```no_run
//! // Rust code may call the same functions through the rlib:
//! let epd = scif::scif_open();
//! assert!(epd >= 0);
//! assert_eq!(scif::scif_get_fd(epd), epd);
//! scif::scif_close(epd);
//! ```
//!
//! # How calls are made safe
//!
//! * **Endpoints are descriptors.** `scif_epd_t` is the endpoint's file descriptor (a
//!   doorbell socket, see `remora_sys::bell`): `poll`, `select` and `epoll` work on it, and
//!   `scif_poll` is `poll`. A table maps descriptors to endpoints; a descriptor that names
//!   no open endpoint gives `EBADF`.
//! * **Errors** set errno from one table (`errors::errno_of`) and return −1 (or
//!   `SCIF_REGISTER_FAILED`, `SCIF_MMAP_FAILED`).
//! * **No unwinding into C.** Every entry point runs its body under `catch_unwind`.
//!
//! # Data paths and limits
//!
//! * Messages between endpoints of one host go through a shared-memory ring per
//!   direction; no daemon is on the path.
//! * RMA between endpoints of one host is a copy by the calling CPU between mappings of
//!   both windows, complete when the call returns (`SCIF_RMA_SYNC` always holds; fences
//!   wait only for RMAs still in flight in other threads or the peer).
//! * Endpoints on nodes of other hosts: messages go through both daemons over the node
//!   link, RMA is done by the far daemon, and `scif_mmap` of a far window is a software DSM
//!   map (no `SCIF_MAP_FIXED`; stores are sent home before each `scif_send`, fence,
//!   `scif_munmap` and at exit).

#![allow(unsafe_code)] // this file is part of the unsafe layer: every block has a SAFETY comment

mod errors;

use errors::{guard, inval};
use remora_client::dsm as remora_client_dsm;
use remora_scif::{Endpoint, Error, FenceInit, PortId, Prot, RmaFlags, Scif, UserRegion};
use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{c_int, c_long, c_short, c_uint, c_void};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, RwLock};

/// `scif_epd_t`.
#[allow(non_camel_case_types)]
pub type scif_epd_t = c_int;

/// `struct scif_portID`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ScifPortId {
    /// The node id.
    pub node: u16,
    /// The port.
    pub port: u16,
}

/// `struct scif_pollepd`: the layout of `struct pollfd`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ScifPollEpd {
    /// The endpoint.
    pub epd: scif_epd_t,
    /// Requested events.
    pub events: c_short,
    /// Returned events.
    pub revents: c_short,
}

/// `SCIF_ACCEPT_SYNC`.
pub const SCIF_ACCEPT_SYNC: c_int = 1;
/// `SCIF_SEND_BLOCK`.
pub const SCIF_SEND_BLOCK: c_int = 1;
/// `SCIF_RECV_BLOCK`.
pub const SCIF_RECV_BLOCK: c_int = 1;
/// `SCIF_PROT_READ`.
pub const SCIF_PROT_READ: c_int = 1;
/// `SCIF_PROT_WRITE`.
pub const SCIF_PROT_WRITE: c_int = 2;
/// `SCIF_MAP_FIXED`.
pub const SCIF_MAP_FIXED: c_int = 0x10;
/// `SCIF_MAP_KERNEL` (kernel mode only).
pub const SCIF_MAP_KERNEL: c_int = 0x20;
/// `SCIF_FENCE_INIT_SELF`.
pub const SCIF_FENCE_INIT_SELF: c_int = 1;
/// `SCIF_FENCE_INIT_PEER`.
pub const SCIF_FENCE_INIT_PEER: c_int = 2;
/// `SCIF_SIGNAL_LOCAL`.
pub const SCIF_SIGNAL_LOCAL: c_int = 1 << 4;
/// `SCIF_SIGNAL_REMOTE`.
pub const SCIF_SIGNAL_REMOTE: c_int = 1 << 5;
/// `SCIF_RMA_USECPU`.
pub const SCIF_RMA_USECPU: c_int = 1;
/// `SCIF_RMA_USECACHE`.
pub const SCIF_RMA_USECACHE: c_int = 2;
/// `SCIF_RMA_SYNC`.
pub const SCIF_RMA_SYNC: c_int = 4;
/// `SCIF_RMA_ORDERED`.
pub const SCIF_RMA_ORDERED: c_int = 8;
/// `SCIF_REGISTER_FAILED`.
pub const SCIF_REGISTER_FAILED: i64 = -1;

struct Lib {
    scif: Arc<Scif>,
    eps: RwLock<HashMap<c_int, Endpoint>>,
}

static LIB: OnceLock<Result<Lib, Error>> = OnceLock::new();

fn lib() -> Result<&'static Lib, Error> {
    LIB.get_or_init(|| Ok(Lib { scif: Scif::new()?, eps: RwLock::new(HashMap::new()) }))
        .as_ref()
        .map_err(Clone::clone)
}

/// Bumped whenever an endpoint leaves the table, so per-thread caches notice.
static CLOSES: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// The endpoint this thread used last, with the close count it was valid at: the hot
    /// path (`scif_send`/`scif_recv` in a loop) skips the table's lock and hash.
    static LAST: RefCell<Option<(scif_epd_t, u64, Endpoint)>> = const { RefCell::new(None) };
}

/// Run `f` on the endpoint `epd` names.
fn with_ep<T>(epd: scif_epd_t, f: impl FnOnce(&Endpoint) -> Result<T, Error>) -> Result<T, Error> {
    let closes = CLOSES.load(Ordering::Acquire);
    LAST.with(|l| {
        let mut slot = l.borrow_mut();
        match &*slot {
            Some((fd, at, _)) if *fd == epd && *at == closes => {}
            _ => *slot = Some((epd, closes, ep(epd)?)),
        }
        match &*slot {
            Some((_, _, e)) => f(e),
            None => Err(Error::BadEndpoint),
        }
    })
}

fn ep(epd: scif_epd_t) -> Result<Endpoint, Error> {
    let l = lib()?;
    l.eps.read().unwrap_or_else(|p| p.into_inner()).get(&epd).cloned().ok_or(Error::BadEndpoint)
}

fn add(e: Endpoint) -> Result<scif_epd_t, Error> {
    let fd = e.fd();
    lib()?.eps.write().unwrap_or_else(|p| p.into_inner()).insert(fd, e);
    Ok(fd)
}

/// DSM maps of windows on other hosts, by address (for `scif_munmap`).
fn far_maps() -> &'static std::sync::Mutex<HashMap<usize, remora_client_dsm::DsmMap>> {
    static MAPS: OnceLock<std::sync::Mutex<HashMap<usize, remora_client_dsm::DsmMap>>> = OnceLock::new();
    MAPS.get_or_init(|| {
        // A program that stores through such a map and exits without unmapping loses
        // nothing: the stores are sent home at exit.
        unsafe extern "C" {
            fn atexit(f: extern "C" fn()) -> c_int;
        }
        extern "C" fn flush_at_exit() {
            let _ = std::panic::catch_unwind(|| {
                remora_client_dsm::flush_all(std::time::Duration::from_secs(5));
            });
        }
        // SAFETY: registering a function that never unwinds (it catches panics).
        unsafe { atexit(flush_at_exit) };
        std::sync::Mutex::new(HashMap::new())
    })
}

fn offset(o: i64) -> Result<u64, Error> {
    u64::try_from(o).map_err(|_| inval("negative offset"))
}

/// A registered-address-space offset of an RMA: a negative one lies in no window.
fn rma_offset(o: i64) -> Result<u64, Error> {
    u64::try_from(o).map_err(|_| Error::NoWindow)
}

fn rma_flags(flags: c_int) -> Result<RmaFlags, Error> {
    if flags & !(SCIF_RMA_USECPU | SCIF_RMA_USECACHE | SCIF_RMA_SYNC | SCIF_RMA_ORDERED) != 0 {
        return Err(inval("unknown RMA flags"));
    }
    Ok(RmaFlags {
        use_cpu: flags & SCIF_RMA_USECPU != 0,
        use_cache: flags & SCIF_RMA_USECACHE != 0,
        sync: flags & SCIF_RMA_SYNC != 0,
        ordered: flags & SCIF_RMA_ORDERED != 0,
    })
}

fn prot(p: c_int) -> Result<Prot, Error> {
    if p & !(SCIF_PROT_READ | SCIF_PROT_WRITE) != 0 {
        return Err(inval("unknown protection flags"));
    }
    Ok(Prot { read: p & SCIF_PROT_READ != 0, write: p & SCIF_PROT_WRITE != 0 })
}

/// `scif_open`: a new endpoint; `SCIF_OPEN_FAILED` (−1) with errno `ENOMEM` on failure.
#[unsafe(no_mangle)]
pub extern "C" fn scif_open() -> scif_epd_t {
    guard(-1, || {
        let l = lib()?;
        add(Endpoint::open(&l.scif).map_err(|e| match e {
            Error::NoMemory(s) => Error::NoMemory(s),
            other => Error::NoMemory(other.to_string()),
        })?)
    })
}

/// `scif_close`: close an endpoint (its peer sees hang-up; its port and windows go).
#[unsafe(no_mangle)]
pub extern "C" fn scif_close(epd: scif_epd_t) -> c_int {
    guard(-1, || {
        let l = lib()?;
        let e = l.eps.write().unwrap_or_else(|p| p.into_inner()).remove(&epd).ok_or(Error::BadEndpoint)?;
        CLOSES.fetch_add(1, Ordering::AcqRel);
        LAST.with(|c| c.borrow_mut().take());
        e.close()?;
        Ok(0)
    })
}

/// `scif_bind`: returns the bound port.
#[unsafe(no_mangle)]
pub extern "C" fn scif_bind(epd: scif_epd_t, pn: u16) -> c_int {
    guard(-1, || Ok(ep(epd)?.bind(pn)? as c_int))
}

/// `scif_listen`.
#[unsafe(no_mangle)]
pub extern "C" fn scif_listen(epd: scif_epd_t, backlog: c_int) -> c_int {
    guard(-1, || {
        let e = ep(epd)?;
        if backlog <= 0 {
            return Err(inval("backlog must be positive"));
        }
        e.listen(backlog as u32)?;
        Ok(0)
    })
}

/// `scif_connect`: returns the local port.
///
/// # Safety
/// `dst` is NULL or points to a `struct scif_portID`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn scif_connect(epd: scif_epd_t, dst: *const ScifPortId) -> c_int {
    guard(-1, || {
        let e = ep(epd)?;
        if dst.is_null() {
            return Err(inval("no destination"));
        }
        // SAFETY: non-NULL and, by the contract, a valid port id.
        let d = unsafe { *dst };
        Ok(e.connect(PortId { node: d.node as u32, port: d.port })? as c_int)
    })
}

/// `scif_accept`: the new endpoint goes to `*newepd`, the peer's port id to `*peer`.
///
/// # Safety
/// `peer` and `newepd` are NULL or point to writable objects of their types.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn scif_accept(
    epd: scif_epd_t,
    peer: *mut ScifPortId,
    newepd: *mut scif_epd_t,
    flags: c_int,
) -> c_int {
    guard(-1, || {
        let e = ep(epd)?;
        if flags & !SCIF_ACCEPT_SYNC != 0 {
            return Err(inval("unknown accept flags"));
        }
        if peer.is_null() || newepd.is_null() {
            return Err(inval("NULL peer or endpoint pointer"));
        }
        let (n, p) = e.accept(flags & SCIF_ACCEPT_SYNC != 0)?;
        let fd = add(n)?;
        // SAFETY: both pointers were checked non-NULL; the contract makes them writable.
        unsafe {
            *peer = ScifPortId { node: p.node as u16, port: p.port };
            *newepd = fd;
        }
        Ok(0)
    })
}

/// `scif_send`: returns the bytes queued.
///
/// # Safety
/// `msg` points to `len` readable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn scif_send(epd: scif_epd_t, msg: *mut c_void, len: c_int, flags: c_int) -> c_int {
    if len > 0 && msg.is_null() {
        return guard(-1, || ep(epd).and(Err(Error::Fault)));
    }
    let data = if len > 0 {
        // SAFETY: non-NULL, `len` readable bytes by the contract.
        unsafe { std::slice::from_raw_parts(msg as *const u8, len as usize) }
    } else {
        &[]
    };
    send(epd, data, if len < 0 { -1 } else { flags })
}

/// `scif_send` on a slice: the body of the C entry point, for Rust callers (benchmarks).
/// A negative `flags` stands for a negative length.
pub fn send(epd: scif_epd_t, data: &[u8], flags: c_int) -> c_int {
    guard(-1, || {
        with_ep(epd, |e| {
            if !(0..=SCIF_SEND_BLOCK).contains(&flags) || data.len() > c_int::MAX as usize {
                return Err(inval("negative length or unknown flags"));
            }
            if data.is_empty() {
                e.conn_check()?;
                return Ok(0);
            }
            Ok(e.send(data, flags & SCIF_SEND_BLOCK != 0)? as c_int)
        })
    })
}

/// `scif_recv`: returns the bytes received.
///
/// # Safety
/// `msg` points to `len` writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn scif_recv(epd: scif_epd_t, msg: *mut c_void, len: c_int, flags: c_int) -> c_int {
    if len > 0 && msg.is_null() {
        return guard(-1, || ep(epd).and(Err(Error::Fault)));
    }
    let buf = if len > 0 {
        // SAFETY: non-NULL, `len` writable bytes by the contract.
        unsafe { std::slice::from_raw_parts_mut(msg as *mut u8, len as usize) }
    } else {
        &mut []
    };
    recv(epd, buf, if len < 0 { -1 } else { flags })
}

/// `scif_recv` into a slice: the body of the C entry point, for Rust callers.
/// A negative `flags` stands for a negative length.
pub fn recv(epd: scif_epd_t, buf: &mut [u8], flags: c_int) -> c_int {
    guard(-1, || {
        with_ep(epd, |e| {
            if !(0..=SCIF_RECV_BLOCK).contains(&flags) || buf.len() > c_int::MAX as usize {
                return Err(inval("negative length or unknown flags"));
            }
            if buf.is_empty() {
                e.conn_check()?;
                return Ok(0);
            }
            Ok(e.recv(buf, flags & SCIF_RECV_BLOCK != 0)? as c_int)
        })
    })
}

/// Put an endpoint made with the safe API into the descriptor table, so the C calls
/// accept its descriptor. Returns the descriptor.
///
/// # Errors
/// [`Error::NoDevice`] when the library cannot start.
pub fn adopt(e: Endpoint) -> Result<scif_epd_t, Error> {
    add(e)
}

/// `scif_register`: returns the window's offset, or `SCIF_REGISTER_FAILED`.
///
/// # Safety
/// `addr..addr+len` is memory of this process that stays mapped while registered.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn scif_register(
    epd: scif_epd_t,
    addr: *mut c_void,
    len: usize,
    off: i64,
    prot_flags: c_int,
    map_flags: c_int,
) -> i64 {
    guard(SCIF_REGISTER_FAILED, || {
        let e = ep(epd)?;
        let p = prot(prot_flags)?;
        if map_flags & !SCIF_MAP_FIXED != 0 {
            return Err(inval("unknown map flags"));
        }
        let o = offset(off)?;
        // SAFETY: the caller's contract; the range is checked for alignment and kind of
        // memory before anything is done with it.
        let region = unsafe { UserRegion::from_raw_parts(addr as *mut u8, len) };
        Ok(e.register(region, o, p, map_flags & SCIF_MAP_FIXED != 0)? as i64)
    })
}

/// `scif_unregister`.
#[unsafe(no_mangle)]
pub extern "C" fn scif_unregister(epd: scif_epd_t, off: i64, len: usize) -> c_int {
    guard(-1, || {
        ep(epd)?.unregister(offset(off)?, len as u64)?;
        Ok(0)
    })
}

/// `scif_mmap`: map the peer's registered range; `SCIF_MMAP_FAILED` on failure.
///
/// # Safety
/// With `SCIF_MAP_FIXED`, `addr..addr+len` is the program's to replace.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn scif_mmap(
    addr: *mut c_void,
    len: usize,
    prot_flags: c_int,
    map_flags: c_int,
    epd: scif_epd_t,
    off: i64,
) -> *mut c_void {
    guard(usize::MAX as *mut c_void, || {
        let e = ep(epd)?;
        let p = prot(prot_flags)?;
        if map_flags & !SCIF_MAP_FIXED != 0 {
            return Err(inval("unknown map flags"));
        }
        if e.peer_is_far() {
            if map_flags & SCIF_MAP_FIXED != 0 {
                return Err(Error::NoMemory(
                    "SCIF_MAP_FIXED is not available for windows of another host".into(),
                ));
            }
            let m = e.map_far(offset(off)?, len, p)?;
            let addr = m.as_ptr();
            far_maps().lock().unwrap_or_else(|p| p.into_inner()).insert(addr as usize, m);
            return Ok(addr as *mut c_void);
        }
        let pieces = e.peer_pieces(offset(off)?, len, p)?;
        let parts: Vec<_> =
            pieces.iter().map(|x| (std::os::fd::AsFd::as_fd(&*x.fd), x.offset, x.len)).collect();
        let at = (map_flags & SCIF_MAP_FIXED != 0).then_some(addr as usize);
        // SAFETY: without a fixed address nothing is replaced; with one, the caller's
        // contract hands the range over.
        let m = unsafe { remora_sys::Mapping::new_pieces_at(&parts, !p.write, at) }
            .map_err(|e| Error::NoMemory(e.to_string()))?;
        Ok(m.leak().0 as *mut c_void)
    })
}

/// `scif_munmap`.
///
/// # Safety
/// `addr..addr+len` holds nothing the program still uses.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn scif_munmap(addr: *mut c_void, len: usize) -> c_int {
    guard(-1, || {
        let page = remora_sys::page_size();
        if len == 0 || !(addr as usize).is_multiple_of(page) {
            return Err(inval("unaligned address or empty range"));
        }
        let far = far_maps().lock().unwrap_or_else(|p| p.into_inner()).remove(&(addr as usize));
        if let Some(m) = far {
            // A DSM map of another host's window: its stores go home, then it goes.
            m.release();
            return Ok(0);
        }
        // SAFETY: the caller's contract.
        unsafe { rustix::mm::munmap(addr, len) }.map_err(|_| inval("munmap refused"))?;
        Ok(0)
    })
}

/// `scif_readfrom`.
#[unsafe(no_mangle)]
pub extern "C" fn scif_readfrom(
    epd: scif_epd_t,
    loffset: i64,
    len: usize,
    roffset: i64,
    rma: c_int,
) -> c_int {
    guard(-1, || {
        let e = ep(epd)?;
        let f = rma_flags(rma)?;
        e.read_from(rma_offset(loffset)?, len, rma_offset(roffset)?, f)?;
        Ok(0)
    })
}

/// `scif_writeto`.
#[unsafe(no_mangle)]
pub extern "C" fn scif_writeto(epd: scif_epd_t, loffset: i64, len: usize, roffset: i64, rma: c_int) -> c_int {
    guard(-1, || {
        let e = ep(epd)?;
        let f = rma_flags(rma)?;
        e.write_to(rma_offset(loffset)?, len, rma_offset(roffset)?, f)?;
        Ok(0)
    })
}

/// The checks `scif_vreadfrom` and `scif_vwriteto` share, then `op` on the endpoint with
/// the buffer's address, the offset and the flags.
fn v_rma(
    epd: scif_epd_t,
    addr: *mut c_void,
    len: usize,
    off: i64,
    rma: c_int,
    op: impl FnOnce(&Endpoint, *mut u8, u64, RmaFlags) -> Result<(), Error>,
) -> c_int {
    guard(-1, || {
        let e = ep(epd)?;
        let f = rma_flags(rma)?;
        let o = rma_offset(off)?;
        if addr.is_null() {
            return Err(Error::Fault);
        }
        if len == 0 {
            return Err(inval("zero length"));
        }
        op(&e, addr as *mut u8, o, f)?;
        Ok(0)
    })
}

/// `scif_vreadfrom`.
///
/// # Safety
/// `addr` points to `len` writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn scif_vreadfrom(
    epd: scif_epd_t,
    addr: *mut c_void,
    len: usize,
    off: i64,
    rma: c_int,
) -> c_int {
    v_rma(epd, addr, len, off, rma, |e, p, o, f| {
        // SAFETY: `p` is non-NULL (checked) and, by the contract, `len` writable bytes.
        let buf = unsafe { std::slice::from_raw_parts_mut(p, len) };
        e.vread_from(buf, o, f)
    })
}

/// `scif_vwriteto`.
///
/// # Safety
/// `addr` points to `len` readable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn scif_vwriteto(
    epd: scif_epd_t,
    addr: *mut c_void,
    len: usize,
    off: i64,
    rma: c_int,
) -> c_int {
    v_rma(epd, addr, len, off, rma, |e, p, o, f| {
        // SAFETY: `p` is non-NULL (checked) and, by the contract, `len` readable bytes.
        let data = unsafe { std::slice::from_raw_parts(p as *const u8, len) };
        e.vwrite_to(data, o, f)
    })
}

fn fence_init(flags: c_int) -> Result<FenceInit, Error> {
    match flags & (SCIF_FENCE_INIT_SELF | SCIF_FENCE_INIT_PEER) {
        SCIF_FENCE_INIT_SELF => Ok(FenceInit::SelfInit),
        SCIF_FENCE_INIT_PEER => Ok(FenceInit::Peer),
        _ => Err(inval("exactly one of SCIF_FENCE_INIT_SELF and SCIF_FENCE_INIT_PEER")),
    }
}

/// `scif_fence_mark`.
///
/// # Safety
/// `mark` is NULL or points to a writable int.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn scif_fence_mark(epd: scif_epd_t, flags: c_int, mark: *mut c_int) -> c_int {
    guard(-1, || {
        let e = ep(epd)?;
        if flags & !(SCIF_FENCE_INIT_SELF | SCIF_FENCE_INIT_PEER) != 0 {
            return Err(inval("unknown fence flags"));
        }
        let init = fence_init(flags)?;
        if mark.is_null() {
            return Err(inval("NULL mark"));
        }
        let m = e.fence_mark(init)?;
        // SAFETY: non-NULL, writable by the contract.
        unsafe { *mark = m };
        Ok(0)
    })
}

/// `scif_fence_wait`.
#[unsafe(no_mangle)]
pub extern "C" fn scif_fence_wait(epd: scif_epd_t, mark: c_int) -> c_int {
    guard(-1, || {
        ep(epd)?.fence_wait(mark)?;
        Ok(0)
    })
}

/// `scif_fence_signal`.
#[unsafe(no_mangle)]
pub extern "C" fn scif_fence_signal(
    epd: scif_epd_t,
    loff: i64,
    lval: u64,
    roff: i64,
    rval: u64,
    flags: c_int,
) -> c_int {
    guard(-1, || {
        let e = ep(epd)?;
        let known = SCIF_FENCE_INIT_SELF | SCIF_FENCE_INIT_PEER | SCIF_SIGNAL_LOCAL | SCIF_SIGNAL_REMOTE;
        if flags & !known != 0 {
            return Err(inval("unknown fence flags"));
        }
        let init = fence_init(flags)?;
        let local = if flags & SCIF_SIGNAL_LOCAL != 0 { Some((rma_offset(loff)?, lval)) } else { None };
        let remote = if flags & SCIF_SIGNAL_REMOTE != 0 { Some((rma_offset(roff)?, rval)) } else { None };
        e.fence_signal(local, remote, init)?;
        Ok(0)
    })
}

/// `scif_get_nodeIDs`: fills up to `len` node ids, sets `*self_`, returns how many nodes
/// there are.
///
/// # Safety
/// `nodes` is NULL or points to `len` writable `uint16_t`; `self_` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn scif_get_nodeIDs(nodes: *mut u16, len: c_int, self_: *mut u16) -> c_int {
    guard(-1, || {
        let l = lib()?;
        let ids = l.scif.node_ids()?;
        if !nodes.is_null() && len > 0 {
            for (i, n) in ids.iter().take(len as usize).enumerate() {
                // SAFETY: i < len, within the caller's array.
                unsafe { *nodes.add(i) = *n as u16 };
            }
        }
        if !self_.is_null() {
            // SAFETY: non-NULL, writable by the contract.
            unsafe { *self_ = l.scif.node() as u16 };
        }
        Ok(ids.len() as c_int)
    })
}

/// `scif_get_fd`: the descriptor behind an endpoint (the endpoint itself).
#[unsafe(no_mangle)]
pub extern "C" fn scif_get_fd(epd: scif_epd_t) -> c_int {
    guard(-1, || match ep(epd) {
        Ok(e) => Ok(e.fd()),
        Err(_) => Err(inval("not an endpoint")),
    })
}

unsafe extern "C" {
    fn poll(fds: *mut ScifPollEpd, nfds: std::ffi::c_ulong, timeout: c_int) -> c_int;
}

/// `scif_poll`: `poll` over endpoints (`struct scif_pollepd` is `struct pollfd`).
///
/// # Safety
/// `epds` points to `nepds` writable entries.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn scif_poll(epds: *mut ScifPollEpd, nepds: c_uint, timeout: c_long) -> c_int {
    guard(-1, || {
        if epds.is_null() && nepds > 0 {
            return Err(Error::Fault);
        }
        let t = if timeout < 0 { -1 } else { timeout.min(c_int::MAX as c_long) as c_int };
        // SAFETY: the array is valid by the contract and has poll's layout.
        let r = unsafe { poll(epds, nepds as std::ffi::c_ulong, t) };
        if r < 0 {
            return Err(match std::io::Error::last_os_error().raw_os_error() {
                Some(4) => Error::Interrupted,
                _ => inval("poll failed"),
            });
        }
        Ok(r)
    })
}

macro_rules! versioned {
    ($($f:ident),* $(,)?) => {
        $(std::arch::global_asm!(concat!(".symver ", stringify!($f), ", ", stringify!($f), "@@SCIF_0.0"));)*
    };
}

versioned!(
    scif_open,
    scif_close,
    scif_bind,
    scif_listen,
    scif_connect,
    scif_accept,
    scif_send,
    scif_recv,
    scif_register,
    scif_unregister,
    scif_mmap,
    scif_munmap,
    scif_readfrom,
    scif_writeto,
    scif_vreadfrom,
    scif_vwriteto,
    scif_fence_mark,
    scif_fence_wait,
    scif_fence_signal,
    scif_get_nodeIDs,
    scif_get_fd,
    scif_poll,
);
