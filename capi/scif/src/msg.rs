//! Messages: `scif_send` and `scif_recv`.

#![allow(unsafe_code)] // this file is part of the unsafe layer: every block has a SAFETY comment

use super::*;
use errors::{in_slices, SLICE};
use remora_scif::Held;

/// `scif_send`: returns the bytes queued.
///
/// # Safety
/// `msg` points to `len` readable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn scif_send(
    epd: scif_epd_t,
    msg: *mut c_void,
    len: c_int,
    flags: c_int,
) -> c_int {
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
/// A negative `flags` stands for a negative length. A blocking send waits in slices, a
/// cancellation point between two ([`in_slices`]).
fn send(epd: scif_epd_t, data: &[u8], flags: c_int) -> c_int {
    let checked = || {
        if !(0..=SCIF_SEND_BLOCK).contains(&flags) || data.len() > c_int::MAX as usize {
            return Err(inval("negative length or unknown flags"));
        }
        Ok(())
    };
    if flags != SCIF_SEND_BLOCK || data.is_empty() {
        return guard(-1, || {
            with_ep(epd, |e| {
                checked()?;
                if data.is_empty() {
                    e.conn_check()?;
                    return Ok(0);
                }
                Ok(e.send(data, false)? as c_int)
            })
        });
    }
    // The first slice in one call (a send that ends there, the common case, costs what it
    // did before slices); the side stays held for the rest.
    let first = guard(-1, || {
        with_ep(epd, |e| {
            checked()?;
            let (n, held) = e.send_within(data, SLICE)?;
            keep(held);
            Ok(n as c_int)
        })
    });
    if first < 0 || first as usize == data.len() {
        return first;
    }
    send_rest(data, first as usize)
}

/// The slices of a blocking send after its first, out of the way of the common case (the
/// thread-local they use costs a lookup in a shared library, which the compiler may
/// otherwise do at every call).
#[cold]
#[inline(never)]
fn send_rest(data: &[u8], first: usize) -> c_int {
    let r =
        in_slices(first, data.len(), |done| guard(-1, || with_held(|h| h.send_for(&data[done..], SLICE))));
    HELD.with(|m| m.borrow_mut().take());
    r
}

/// `scif_recv`: returns the bytes received.
///
/// # Safety
/// `msg` points to `len` writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn scif_recv(
    epd: scif_epd_t,
    msg: *mut c_void,
    len: c_int,
    flags: c_int,
) -> c_int {
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
/// A negative `flags` stands for a negative length. A blocking receive waits in slices, a
/// cancellation point between two ([`in_slices`]).
fn recv(epd: scif_epd_t, buf: &mut [u8], flags: c_int) -> c_int {
    let checked = |len: usize| {
        if !(0..=SCIF_RECV_BLOCK).contains(&flags) || len > c_int::MAX as usize {
            return Err(inval("negative length or unknown flags"));
        }
        Ok(())
    };
    if flags != SCIF_RECV_BLOCK || buf.is_empty() {
        return guard(-1, || {
            with_ep(epd, |e| {
                checked(buf.len())?;
                if buf.is_empty() {
                    e.conn_check()?;
                    return Ok(0);
                }
                Ok(e.recv(buf, false)? as c_int)
            })
        });
    }
    // As for sends: the first slice in one call, the side held for the rest.
    let len = buf.len();
    let first = guard(-1, || {
        with_ep(epd, |e| {
            checked(len)?;
            let (n, held) = e.recv_within(buf, SLICE)?;
            keep(held);
            Ok(n as c_int)
        })
    });
    if first < 0 || first as usize == len {
        return first;
    }
    recv_rest(buf, first as usize)
}

/// The slices of a blocking receive after its first (as [`send_rest`]).
#[cold]
#[inline(never)]
fn recv_rest(buf: &mut [u8], first: usize) -> c_int {
    let len = buf.len();
    let r = in_slices(first, len, |done| guard(-1, || with_held(|h| h.recv_for(&mut buf[done..], SLICE))));
    HELD.with(|m| m.borrow_mut().take());
    r
}

thread_local! {
    /// The side of the endpoint a blocking `scif_send` or `scif_recv` of this thread holds
    /// across its slices: taken once, so that a descriptor number closed and given to a
    /// new endpoint meanwhile cannot redirect the call, and held, so that no other
    /// thread's bytes come between the call's; if the thread is cancelled between two
    /// slices, its end drops it, which lets the side go.
    static HELD: RefCell<Option<Held>> = const { RefCell::new(None) };
}

/// Keep the side a first slice left held for the next slices (nothing when it ended).
#[inline(always)]
fn keep(held: Option<Held>) {
    if let Some(h) = held {
        keep_held(h);
    }
}

#[cold]
#[inline(never)]
fn keep_held(h: Held) {
    HELD.with(|m| *m.borrow_mut() = Some(h));
}

/// One slice of the transfer a first slice began ([`keep`]).
fn with_held(slice: impl FnOnce(&Held) -> Result<usize, Error>) -> Result<c_int, Error> {
    HELD.with(|m| m.borrow().as_ref().map(|h| slice(h).map(|n| n as c_int)))
        .unwrap_or(Err(Error::BadEndpoint))
}

versioned!(scif_send, scif_recv);
