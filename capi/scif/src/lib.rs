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

/// Tag each named function with MPSS's symbol version (`name@@SCIF_0.0`). Used in the
/// module that defines the functions: the directive must be in the same object.
macro_rules! versioned {
    ($($f:ident),* $(,)?) => {
        $(std::arch::global_asm!(concat!(".symver ", stringify!($f), ", ", stringify!($f), "@@SCIF_0.0"));)*
    };
}

mod endpoints;
mod errors;
mod msg;
mod rma;

pub use endpoints::*;
pub use msg::*;
pub use rma::*;

use errors::{guard, inval};
use remora_client::id_hash::IdMap;
use remora_scif::{Endpoint, Error, FenceInit, PortId, Prot, RmaFlags, Scif, UserRegion};
use std::cell::RefCell;
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
    eps: RwLock<IdMap<c_int, Endpoint>>,
}

static LIB: OnceLock<Result<Lib, Error>> = OnceLock::new();

fn lib() -> Result<&'static Lib, Error> {
    LIB.get_or_init(|| Ok(Lib { scif: Scif::new()?, eps: RwLock::new(IdMap::default()) }))
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

/// A program that stores through a map of another host's window and exits without
/// unmapping loses nothing: the stores are sent home at exit (registered once, with the
/// first such map).
fn flush_at_exit_once() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        unsafe extern "C" {
            fn atexit(f: extern "C" fn()) -> c_int;
        }
        extern "C" fn flush_at_exit() {
            remora_scif::flush_at_exit();
        }
        // SAFETY: registering a function that never unwinds (flush_at_exit catches panics).
        unsafe { atexit(flush_at_exit) };
    });
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
