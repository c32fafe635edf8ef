//! Messages: `scif_send` and `scif_recv`.

#![allow(unsafe_code)] // this file is part of the unsafe layer: every block has a SAFETY comment

use super::*;
use errors::{in_slices, SLICE};

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
    if guard(-1, || keep_moving(epd, checked())) < 0 {
        return -1;
    }
    let r =
        in_slices(data.len(), |done| guard(-1, || Ok(moving()?.send_for(&data[done..], SLICE)? as c_int)));
    MOVING.with(|m| m.borrow_mut().take());
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
    if guard(-1, || keep_moving(epd, checked(buf.len()))) < 0 {
        return -1;
    }
    let r =
        in_slices(buf.len(), |done| guard(-1, || Ok(moving()?.recv_for(&mut buf[done..], SLICE)? as c_int)));
    MOVING.with(|m| m.borrow_mut().take());
    r
}

thread_local! {
    /// The endpoint a blocking `scif_send` or `scif_recv` of this thread moves bytes on,
    /// looked up once and kept across the call's slices (its descriptor number, closed
    /// and given to a new endpoint meanwhile, must not redirect the call); if the thread
    /// is cancelled between two slices, its end drops it.
    static MOVING: RefCell<Option<Endpoint>> = const { RefCell::new(None) };
}

/// Look the endpoint of a blocking transfer up once (after the call's own checks).
fn keep_moving(epd: scif_epd_t, checked: Result<(), Error>) -> Result<c_int, Error> {
    checked?;
    let e = ep(epd)?;
    MOVING.with(|m| *m.borrow_mut() = Some(e));
    Ok(0)
}

/// The endpoint [`keep_moving`] kept.
fn moving() -> Result<Endpoint, Error> {
    MOVING.with(|m| m.borrow().clone()).ok_or(Error::BadEndpoint)
}

versioned!(scif_send, scif_recv);
