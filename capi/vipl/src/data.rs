//! The data-transfer calls (post, done, wait, notify) and the completion-queue calls.

use crate::bad;
use crate::errors::{guard, Code, VIP_INVALID_PARAMETER};
use crate::handles::{self, Entry};
use crate::vi::{put, sliced};
use remora_vipl::{CompletionQueue, Vi};
use std::ffi::{c_int, c_ulong, c_void};

/// `VipPostSend`.
///
/// # Safety
/// Any values: the descriptor is reached only inside registered memory.
#[no_mangle]
pub unsafe extern "C-unwind" fn VipPostSend(vi: *mut c_void, desc: *mut c_void, handle: u32) -> u32 {
    guard(|| Ok(handles::vi(vi)?.post_send(desc as usize, handle)?))
}

/// `VipPostRecv`.
///
/// # Safety
/// As [`VipPostSend`].
#[no_mangle]
pub unsafe extern "C-unwind" fn VipPostRecv(vi: *mut c_void, desc: *mut c_void, handle: u32) -> u32 {
    guard(|| Ok(handles::vi(vi)?.post_recv(desc as usize, handle)?))
}

/// `VipSendDone`.
///
/// # Safety
/// `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn VipSendDone(vi: *mut c_void, out: *mut *mut c_void) -> u32 {
    guard(|| {
        if out.is_null() {
            return Err(bad());
        }
        let (d, _) = handles::vi(vi)?.send_done()?;
        put(out, d as *mut c_void)
    })
}

/// `VipRecvDone`.
///
/// # Safety
/// `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn VipRecvDone(vi: *mut c_void, out: *mut *mut c_void) -> u32 {
    guard(|| {
        if out.is_null() {
            return Err(bad());
        }
        let (d, _) = handles::vi(vi)?.recv_done()?;
        put(out, d as *mut c_void)
    })
}

/// `VipSendWait`.
///
/// # Safety
/// `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn VipSendWait(vi: *mut c_void, ms: c_ulong, out: *mut *mut c_void) -> u32 {
    sliced(ms, |slice| {
        guard(|| {
            if out.is_null() {
                return Err(bad());
            }
            let (d, _) = handles::vi(vi)?.send_wait(Some(slice))?;
            put(out, d as *mut c_void)
        })
    })
}

/// `VipRecvWait`.
///
/// # Safety
/// `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn VipRecvWait(vi: *mut c_void, ms: c_ulong, out: *mut *mut c_void) -> u32 {
    sliced(ms, |slice| {
        guard(|| {
            if out.is_null() {
                return Err(bad());
            }
            let (d, _) = handles::vi(vi)?.recv_wait(Some(slice))?;
            put(out, d as *mut c_void)
        })
    })
}

/// A VI notification handler (`Context`, NIC, VI, descriptor).
pub type ViHandler = unsafe extern "C" fn(*mut c_void, *mut c_void, *mut c_void, *mut c_void);

fn notify(vi: *mut c_void, context: *mut c_void, handler: Option<ViHandler>, recv: bool) -> u32 {
    guard(|| {
        let v = handles::vi(vi)?;
        let f = handler.ok_or_else(bad)?;
        let (ctx, vih, nich) = (context as usize, vi as usize, handles::nic_handle(v.nic()) as usize);
        let call = move |_: &Vi, (d, _): (usize, u32)| {
            // SAFETY: the program's handler with its own context, called on a library
            // thread as VIA's notify calls do.
            unsafe { f(ctx as *mut c_void, nich as *mut c_void, vih as *mut c_void, d as *mut c_void) };
        };
        if recv {
            v.recv_notify(call)?;
        } else {
            v.send_notify(call)?;
        }
        Ok(())
    })
}

/// `VipSendNotify`.
///
/// # Safety
/// `handler` may be called from another thread with `context`.
#[no_mangle]
pub unsafe extern "C-unwind" fn VipSendNotify(
    vi: *mut c_void,
    context: *mut c_void,
    handler: Option<ViHandler>,
) -> u32 {
    notify(vi, context, handler, false)
}

/// `VipRecvNotify`.
///
/// # Safety
/// As [`VipSendNotify`].
#[no_mangle]
pub unsafe extern "C-unwind" fn VipRecvNotify(
    vi: *mut c_void,
    context: *mut c_void,
    handler: Option<ViHandler>,
) -> u32 {
    notify(vi, context, handler, true)
}

/// `VipCreateCQ`.
///
/// # Safety
/// `cq` is NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn VipCreateCQ(nic: *mut c_void, entries: c_ulong, cq: *mut *mut c_void) -> u32 {
    guard(|| {
        let n = handles::nic(nic)?;
        if cq.is_null() {
            return Err(bad());
        }
        let c = CompletionQueue::create(&n, entries as usize)?;
        put(cq, handles::insert(Entry::Cq(c)).ok_or(handles::FULL)?)
    })
}

/// `VipDestroyCQ`.
///
/// # Safety
/// Any value.
#[no_mangle]
pub unsafe extern "C-unwind" fn VipDestroyCQ(cq: *mut c_void) -> u32 {
    guard(|| {
        handles::cq(cq)?.destroy()?;
        handles::remove(cq);
        Ok(())
    })
}

/// `VipResizeCQ`.
///
/// # Safety
/// Any values.
#[no_mangle]
pub unsafe extern "C-unwind" fn VipResizeCQ(cq: *mut c_void, entries: c_ulong) -> u32 {
    guard(|| Ok(handles::cq(cq)?.resize(entries as usize)?))
}

fn cq_out(vi: Vi, recv: bool, vi_out: *mut *mut c_void, recv_out: *mut c_int) -> Result<(), Code> {
    put(vi_out, handles::vi_handle(&vi))?;
    put(recv_out, recv.into())
}

/// Both out pointers of `VipCQDone`/`VipCQWait` are needed: `VIP_INVALID_PARAMETER` for a
/// NULL one, checked before a completion is taken (it would be lost).
fn cq_outs(vi_out: *mut *mut c_void, recv_out: *mut c_int) -> Result<(), Code> {
    if vi_out.is_null() || recv_out.is_null() {
        return Err(Code(VIP_INVALID_PARAMETER));
    }
    Ok(())
}

/// `VipCQDone`: `VIP_INVALID_PARAMETER` for a bad handle or a NULL out pointer (the
/// completion stays queued).
///
/// # Safety
/// The out pointers are NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn VipCQDone(cq: *mut c_void, vi: *mut *mut c_void, recv: *mut c_int) -> u32 {
    guard(|| {
        cq_outs(vi, recv)?;
        let (v, r) = handles::cq(cq)?.done()?;
        cq_out(v, r, vi, recv)
    })
}

/// `VipCQWait`: as `VipCQDone` for a NULL out pointer.
///
/// # Safety
/// The out pointers are NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn VipCQWait(
    cq: *mut c_void,
    ms: c_ulong,
    vi: *mut *mut c_void,
    recv: *mut c_int,
) -> u32 {
    sliced(ms, |slice| {
        guard(|| {
            cq_outs(vi, recv)?;
            let (v, r) = handles::cq(cq)?.wait(Some(slice))?;
            cq_out(v, r, vi, recv)
        })
    })
}

/// A CQ notification handler (`Context`, NIC, VI, receive queue).
pub type CqHandler = unsafe extern "C" fn(*mut c_void, *mut c_void, *mut c_void, c_int);

/// `VipCQNotify`.
///
/// # Safety
/// `handler` may be called from another thread with `context`.
#[no_mangle]
pub unsafe extern "C-unwind" fn VipCQNotify(
    cq: *mut c_void,
    context: *mut c_void,
    handler: Option<CqHandler>,
) -> u32 {
    guard(|| {
        let c = handles::cq(cq)?;
        let f = handler.ok_or_else(bad)?;
        let (ctx, nich) = (context as usize, handles::nic_handle(c.nic()) as usize);
        c.notify(move |v, recv| {
            // SAFETY: the program's handler with its own context, on a library thread.
            unsafe { f(ctx as *mut c_void, nich as *mut c_void, handles::vi_handle(v), recv.into()) };
        })?;
        Ok(())
    })
}
