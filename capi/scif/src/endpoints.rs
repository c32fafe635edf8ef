//! Endpoints: open, close, bind, listen, connect, accept, node ids, descriptors, poll.

#![allow(unsafe_code)] // this file is part of the unsafe layer: every block has a SAFETY comment

use super::*;
use errors::SLICE;
use remora_scif::{Accepting, Connecting};
use std::time::{Duration, Instant};

/// `scif_open`: a new endpoint; `SCIF_OPEN_FAILED` (−1) with errno `ENOMEM` on failure.
#[unsafe(no_mangle)]
pub extern "C-unwind" fn scif_open() -> scif_epd_t {
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
pub extern "C-unwind" fn scif_close(epd: scif_epd_t) -> c_int {
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
pub extern "C-unwind" fn scif_bind(epd: scif_epd_t, pn: u16) -> c_int {
    guard(-1, || Ok(ep(epd)?.bind(pn)? as c_int))
}

/// `scif_listen`.
#[unsafe(no_mangle)]
pub extern "C-unwind" fn scif_listen(epd: scif_epd_t, backlog: c_int) -> c_int {
    guard(-1, || {
        let e = ep(epd)?;
        if backlog <= 0 {
            return Err(inval("backlog must be positive"));
        }
        e.listen(backlog as u32)?;
        Ok(0)
    })
}

/// `scif_connect`: returns the local port. A blocking connect waits for the listener's
/// accept in slices, a cancellation point between two (as a blocking system call is); one
/// on a descriptor the program made `O_NONBLOCK` goes on in the background.
///
/// # Safety
/// `dst` is NULL or points to a `struct scif_portID`.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn scif_connect(epd: scif_epd_t, dst: *const ScifPortId) -> c_int {
    let begun = guard(-1, || {
        let e = ep(epd)?;
        if dst.is_null() {
            return Err(inval("no destination"));
        }
        // SAFETY: non-NULL and, by the contract, a valid port id.
        let d = unsafe { *dst };
        let to = PortId { node: d.node as u32, port: d.port };
        if e.is_nonblocking() {
            return Ok(e.connect(to)? as c_int);
        }
        let c = e.connect_begin(to)?;
        CONNECTING.with(|w| *w.borrow_mut() = Some(c));
        Ok(-2)
    });
    if begun != -2 {
        return begun;
    }
    loop {
        let r = guard(-1, || {
            // Out of the slot while it waits, back in only when it must wait on.
            let mut c =
                CONNECTING.with(|w| w.borrow_mut().take()).ok_or_else(|| inval("no connect under way"))?;
            match c.wait(Some(SLICE))? {
                Some(port) => Ok(port as c_int),
                None => {
                    CONNECTING.with(|w| *w.borrow_mut() = Some(c));
                    Ok(-2)
                }
            }
        });
        if r != -2 {
            return r;
        }
        remora_sys::cancel::point();
    }
}

thread_local! {
    /// The accept this thread waits for between two slices of `scif_accept`: if the thread
    /// is cancelled there, its end drops it, which withdraws the ask.
    static WAITING: RefCell<Option<Accepting>> = const { RefCell::new(None) };
    /// The connect this thread waits for between two slices of `scif_connect`: if the
    /// thread is cancelled there, its end drops it, which withdraws the connect and leaves
    /// the endpoint bound.
    static CONNECTING: RefCell<Option<Connecting>> = const { RefCell::new(None) };
}

/// `scif_accept`: the new endpoint goes to `*newepd`, the peer's port id to `*peer`. With
/// `SCIF_ACCEPT_SYNC` it waits in slices, a cancellation point between two (as a blocking
/// system call is).
///
/// # Safety
/// `peer` and `newepd` are NULL or point to writable objects of their types.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn scif_accept(
    epd: scif_epd_t,
    peer: *mut ScifPortId,
    newepd: *mut scif_epd_t,
    flags: c_int,
) -> c_int {
    let begun = guard(-1, || {
        let e = ep(epd)?;
        if flags & !SCIF_ACCEPT_SYNC != 0 {
            return Err(inval("unknown accept flags"));
        }
        if peer.is_null() || newepd.is_null() {
            return Err(inval("NULL peer or endpoint pointer"));
        }
        let a = e.accept_begin(flags & SCIF_ACCEPT_SYNC != 0)?;
        WAITING.with(|w| *w.borrow_mut() = Some(a));
        Ok(0)
    });
    if begun < 0 {
        return -1;
    }
    loop {
        let r = guard(-1, || {
            // Out of the slot while it waits (a panic inside leaves no stale accept there),
            // back in only when it must wait on.
            let mut a =
                WAITING.with(|w| w.borrow_mut().take()).ok_or_else(|| inval("no accept under way"))?;
            let (n, p) = match a.wait(Some(SLICE))? {
                None => {
                    WAITING.with(|w| *w.borrow_mut() = Some(a));
                    return Ok(0);
                }
                Some(np) => np,
            };
            let node = node16(p.node)?;
            let fd = add(n)?;
            // SAFETY: both pointers were checked non-NULL; the contract makes them writable.
            unsafe {
                *peer = ScifPortId { node, port: p.port };
                *newepd = fd;
            }
            Ok(1)
        });
        match r {
            // Only a waiting accept is a cancellation point (a non-waiting one may wait a
            // moment for its answer too).
            0 if flags & SCIF_ACCEPT_SYNC != 0 => remora_sys::cancel::point(),
            0 => {}
            1 => return 0,
            _ => return -1,
        }
    }
}

/// A node id as SCIF's `uint16_t` carries it (`struct scif_portID`, `scif_get_nodeIDs`).
/// Remora's node ids are 1..=65535 (`remora_config::MAX_NODE`), so every id fits; one that
/// did not would be an error, never a truncated id naming another node.
fn node16(node: u32) -> Result<u16, Error> {
    u16::try_from(node).map_err(|_| inval("node id beyond SCIF's 16 bits"))
}

/// The nodes a SCIF program can name (every id that fits 16 bits), in the order given.
fn nameable(ids: &[u32]) -> Vec<u16> {
    ids.iter().filter_map(|&n| node16(n).ok()).collect()
}

/// `scif_get_nodeIDs`: fills up to `len` node ids, sets `*self_`, returns how many nodes
/// there are. Ids are whole (never cut to 16 bits): a node SCIF's `uint16_t` could not
/// name is not listed. `EFAULT` for a NULL `nodes` with `len > 0` (NULL is fine with 0).
///
/// # Safety
/// `nodes` is NULL or points to `len` writable `uint16_t`; `self_` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn scif_get_nodeIDs(nodes: *mut u16, len: c_int, self_: *mut u16) -> c_int {
    guard(-1, || {
        let l = lib()?;
        let ids = nameable(&l.scif.node_ids()?);
        let me = node16(l.scif.node())?;
        if nodes.is_null() && len > 0 {
            // scif.h: NULL is fine with len 0 only.
            return Err(Error::Fault);
        }
        if !nodes.is_null() && len > 0 {
            for (i, n) in ids.iter().take(len as usize).enumerate() {
                // SAFETY: i < len, within the caller's array.
                unsafe { *nodes.add(i) = *n };
            }
        }
        if !self_.is_null() {
            // SAFETY: non-NULL, writable by the contract.
            unsafe { *self_ = me };
        }
        Ok(ids.len() as c_int)
    })
}

/// `scif_get_fd`: the descriptor behind an endpoint (the endpoint itself).
#[unsafe(no_mangle)]
pub extern "C-unwind" fn scif_get_fd(epd: scif_epd_t) -> c_int {
    guard(-1, || match ep(epd) {
        Ok(e) => Ok(e.fd()),
        Err(_) => Err(inval("not an endpoint")),
    })
}

unsafe extern "C" {
    fn poll(fds: *mut ScifPollEpd, nfds: std::ffi::c_ulong, timeout: c_int) -> c_int;
}

/// `scif_poll`: `poll` over endpoints (`struct scif_pollepd` is `struct pollfd`), in
/// slices, a cancellation point between two (as `poll` is one).
///
/// # Safety
/// `epds` points to `nepds` writable entries.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn scif_poll(epds: *mut ScifPollEpd, nepds: c_uint, timeout: c_long) -> c_int {
    // In slices of at most `SLICE`, a cancellation point between two (poll is one).
    let deadline =
        (timeout >= 0).then(|| Instant::now().checked_add(Duration::from_millis(timeout as u64))).flatten();
    loop {
        let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        let last = left.is_some_and(|l| l <= SLICE);
        let slice = left.map_or(SLICE, |l| l.min(SLICE));
        // Rounded up: a slice of 0 ms only when the whole wait is 0.
        let ms = slice.as_micros().div_ceil(1000) as c_int;
        let r = guard(-1, || {
            if epds.is_null() && nepds > 0 {
                return Err(Error::Fault);
            }
            // SAFETY: the array is valid by the contract and has poll's layout.
            let r = unsafe { poll(epds, nepds as std::ffi::c_ulong, ms) };
            if r < 0 {
                return Err(match std::io::Error::last_os_error().raw_os_error() {
                    Some(4) => Error::Interrupted,
                    _ => inval("poll failed"),
                });
            }
            Ok(r)
        });
        if r != 0 || last {
            return r;
        }
        remora_sys::cancel::point();
    }
}

// Each function carries MPSS's symbol version, in the object that defines it.
versioned!(
    scif_open,
    scif_close,
    scif_bind,
    scif_listen,
    scif_connect,
    scif_accept,
    scif_get_nodeIDs,
    scif_get_fd,
    scif_poll
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_ids_are_never_cut_to_16_bits() {
        assert_eq!(node16(65_535).unwrap(), 65_535);
        assert!(node16(65_536).is_err(), "65536 would read as node 0");
        assert!(node16(0x1_0004).is_err(), "0x10004 would read as node 4");
        assert_eq!(nameable(&[4, 0x1_0004, 8, 65_535, 1 << 20]), vec![4, 8, 65_535]);
    }
}
