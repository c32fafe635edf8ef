//! The VI, connection, data-transfer and completion-queue calls.

use crate::errors::{guard, Code, VIP_INVALID_PARAMETER, VIP_SUCCESS, VIP_TIMEOUT};
use crate::handles::{self, Entry};
use crate::{bad, read_address, timeout, write_address};
use remora_vipl::{CompletionQueue, Error, ProtectionTag, Vi, ViAttributes};
use std::ffi::{c_int, c_ulong, c_void};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// `VIP_VI_ATTRIBUTES`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct VipViAttributes {
    /// `ReliabilityLevel`.
    pub reliability: u16,
    /// `MaxTransferSize`.
    pub max_transfer: c_ulong,
    /// `QoS`.
    pub qos: *mut c_void,
    /// `Ptag`.
    pub ptag: *mut c_void,
    /// `EnableRdmaWrite`.
    pub enable_rdma_write: c_int,
    /// `EnableRdmaRead`.
    pub enable_rdma_read: c_int,
}

fn vi_attrs(a: *const VipViAttributes) -> Result<ViAttributes, Code> {
    if a.is_null() {
        return Err(bad());
    }
    // SAFETY: checked non-NULL; readable by contract.
    let a = unsafe { a.read() };
    Ok(ViAttributes {
        reliability: a.reliability,
        max_transfer: a.max_transfer.min(u32::MAX as c_ulong) as u32,
        ptag: ProtectionTag(a.ptag as u64),
        rdma_write: a.enable_rdma_write != 0,
        rdma_read: a.enable_rdma_read != 0,
    })
}

/// Write `a` to `out` if it is not NULL.
fn put_attrs(out: *mut VipViAttributes, a: ViAttributes) {
    if out.is_null() {
        return;
    }
    let v = VipViAttributes {
        reliability: a.reliability,
        max_transfer: a.max_transfer as c_ulong,
        qos: std::ptr::null_mut(),
        ptag: a.ptag.0 as *mut c_void,
        enable_rdma_write: a.rdma_write.into(),
        enable_rdma_read: a.rdma_read.into(),
    };
    // SAFETY: non-NULL; writable by contract.
    unsafe { out.write(v) };
}

fn put<T>(out: *mut T, v: T) -> Result<(), Code> {
    if out.is_null() {
        return Err(bad());
    }
    // SAFETY: checked non-NULL; writable by contract.
    unsafe { out.write(v) };
    Ok(())
}

fn optional_cq(h: *mut c_void) -> Result<Option<CompletionQueue>, Code> {
    if h.is_null() {
        Ok(None)
    } else {
        handles::cq(h).map(Some)
    }
}

/// Wait in slices of at most 100 ms, a cancellation point between them; `attempt` gets
/// each slice and answers with a code (`VIP_TIMEOUT` goes on to the next slice).
fn sliced(ms: c_ulong, mut attempt: impl FnMut(Duration) -> u32) -> u32 {
    const SLICE: Duration = Duration::from_millis(100);
    let deadline = timeout(ms).map(|t| Instant::now() + t);
    loop {
        let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        let last = left.is_some_and(|l| l <= SLICE);
        let code = attempt(left.map_or(SLICE, |l| l.min(SLICE)));
        if code != VIP_TIMEOUT || last {
            return code;
        }
        remora_sys::cancel::point();
    }
}

/// `VipCreateVi`.
///
/// # Safety
/// `attrs` is NULL or readable; `vi` is NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn VipCreateVi(
    nic: *mut c_void,
    attrs: *const VipViAttributes,
    send_cq: *mut c_void,
    recv_cq: *mut c_void,
    vi: *mut *mut c_void,
) -> u32 {
    guard(|| {
        let n = handles::nic(nic)?;
        let a = vi_attrs(attrs)?;
        if vi.is_null() {
            return Err(bad());
        }
        let (s, r) = (optional_cq(send_cq)?, optional_cq(recv_cq)?);
        let v = Vi::create(&n, a, s.as_ref(), r.as_ref())?;
        put(vi, handles::insert(Entry::Vi(v)))
    })
}

/// `VipDestroyVi`.
///
/// # Safety
/// Any value.
#[no_mangle]
pub unsafe extern "C-unwind" fn VipDestroyVi(vi: *mut c_void) -> u32 {
    guard(|| {
        handles::vi(vi)?.destroy()?;
        handles::remove(vi);
        Ok(())
    })
}

/// `VipQueryVi`.
///
/// # Safety
/// The out pointers are NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn VipQueryVi(
    vi: *mut c_void,
    state: *mut u32,
    attrs: *mut VipViAttributes,
    send_empty: *mut c_int,
    recv_empty: *mut c_int,
) -> u32 {
    guard(|| {
        let (st, a, s, r) = handles::vi(vi)?.query();
        if !state.is_null() {
            put(state, st as u32)?;
        }
        put_attrs(attrs, a);
        if !send_empty.is_null() {
            put(send_empty, s.into())?;
        }
        if !recv_empty.is_null() {
            put(recv_empty, r.into())?;
        }
        Ok(())
    })
}

/// `VipSetViAttributes`.
///
/// # Safety
/// `attrs` is NULL or readable.
#[no_mangle]
pub unsafe extern "C-unwind" fn VipSetViAttributes(vi: *mut c_void, attrs: *const VipViAttributes) -> u32 {
    guard(|| Ok(handles::vi(vi)?.set_attributes(vi_attrs(attrs)?)?))
}

/// `VipConnectWait`: fills `remote` (with the requester's discriminator) and its VI's
/// attributes; `*conn` takes the request for `VipConnectAccept` / `VipConnectReject`.
///
/// # Safety
/// `local` is an address; `remote` has room for the host part and a discriminator of up
/// to 64 bytes; the other pointers are NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn VipConnectWait(
    nic: *mut c_void,
    local: *const u8,
    ms: c_ulong,
    remote: *mut u8,
    remote_attrs: *mut VipViAttributes,
    conn: *mut *mut c_void,
) -> u32 {
    sliced(ms, |slice| {
        guard(|| {
            let n = handles::nic(nic)?;
            // SAFETY: an address by contract.
            let me = unsafe { read_address(local) }?;
            if conn.is_null() {
                return Err(bad());
            }
            let req = n.connect_wait(&me, Some(slice))?;
            if !remote.is_null() {
                // SAFETY: room by contract.
                unsafe { write_address(remote, &req.remote.host, Some(&req.remote.disc)) };
            }
            put_attrs(remote_attrs, req.remote_attributes());
            put(conn, handles::insert(Entry::Conn(Arc::new(Mutex::new(Some(req))))))
        })
    })
}

fn take_conn(conn: *mut c_void) -> Result<remora_vipl::ConnRequest, Code> {
    match handles::remove(conn) {
        Some(Entry::Conn(c)) => c.lock().unwrap_or_else(|p| p.into_inner()).take().ok_or_else(bad),
        Some(other) => {
            // Not a connection handle: put it back untouched.
            let _ = other;
            Err(bad())
        }
        None => Err(bad()),
    }
}

/// `VipConnectAccept`.
///
/// # Safety
/// Any values.
#[no_mangle]
pub unsafe extern "C-unwind" fn VipConnectAccept(conn: *mut c_void, vi: *mut c_void) -> u32 {
    guard(|| {
        let v = handles::vi(vi)?;
        let Some(Entry::Conn(c)) = handles::get(conn) else {
            return Err(bad());
        };
        // The checks `ConnRequest::accept` makes, made before the handle is taken: an
        // accept that fails for them leaves the request to accept or reject again.
        {
            let req = c.lock().unwrap_or_else(|p| p.into_inner());
            let req = req.as_ref().ok_or_else(bad)?;
            let (state, attrs, _, _) = v.query();
            if state != remora_vipl::ViState::Idle {
                return Err(Error::InvalidState.into());
            }
            if attrs.reliability != req.remote_attributes().reliability {
                return Err(Error::InvalidReliabilityLevel.into());
            }
        }
        Ok(take_conn(conn)?.accept(&v)?)
    })
}

/// `VipConnectReject`.
///
/// # Safety
/// Any value.
#[no_mangle]
pub unsafe extern "C-unwind" fn VipConnectReject(conn: *mut c_void) -> u32 {
    guard(|| {
        if !matches!(handles::get(conn), Some(Entry::Conn(_))) {
            return Err(bad());
        }
        Ok(take_conn(conn)?.reject()?)
    })
}

/// `VipConnectRequest`.
///
/// # Safety
/// `local` and `remote` are addresses; `remote_attrs` is NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn VipConnectRequest(
    vi: *mut c_void,
    local: *const u8,
    remote: *const u8,
    ms: c_ulong,
    remote_attrs: *mut VipViAttributes,
) -> u32 {
    // The node answers within `ms` (it keeps the request's time); this side waits for
    // that answer in slices, a cancellation point between them. A thread cancelled there
    // drops `attempt`, which withdraws the request and leaves the VI idle.
    let mut attempt = None;
    let code = guard(|| {
        let v = handles::vi(vi)?;
        // SAFETY: addresses by contract.
        let (me, them) = unsafe { (read_address(local)?, read_address(remote)?) };
        attempt = Some(v.connect_request_start(&me, &them, timeout(ms))?);
        Ok(())
    });
    let Some(mut attempt) = attempt.filter(|_| code == VIP_SUCCESS) else { return code };
    loop {
        let mut waiting = false;
        let code = guard(|| {
            match attempt.wait(Some(Duration::from_millis(100)))? {
                Some(a) => put_attrs(remote_attrs, a),
                None => waiting = true,
            }
            Ok(())
        });
        if !waiting {
            return code;
        }
        remora_sys::cancel::point();
    }
}

/// `VipDisconnect`.
///
/// # Safety
/// Any value.
#[no_mangle]
pub unsafe extern "C-unwind" fn VipDisconnect(vi: *mut c_void) -> u32 {
    guard(|| Ok(handles::vi(vi)?.disconnect()?))
}

/// `VipConnectPeerRequest`.
///
/// # Safety
/// `local` and `remote` are addresses.
#[no_mangle]
pub unsafe extern "C-unwind" fn VipConnectPeerRequest(
    vi: *mut c_void,
    local: *const u8,
    remote: *const u8,
    ms: c_ulong,
) -> u32 {
    guard(|| {
        let v = handles::vi(vi)?;
        // SAFETY: addresses by contract.
        let (me, them) = unsafe { (read_address(local)?, read_address(remote)?) };
        Ok(v.connect_peer_request(&me, &them, timeout(ms))?)
    })
}

/// `VipConnectPeerDone`.
///
/// # Safety
/// `remote_attrs` is NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn VipConnectPeerDone(
    vi: *mut c_void,
    remote_attrs: *mut VipViAttributes,
) -> u32 {
    guard(|| {
        let a = handles::vi(vi)?.connect_peer_done()?;
        put_attrs(remote_attrs, a);
        Ok(())
    })
}

/// `VipConnectPeerWait`.
///
/// # Safety
/// `remote_attrs` is NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn VipConnectPeerWait(
    vi: *mut c_void,
    remote_attrs: *mut VipViAttributes,
) -> u32 {
    sliced(0xFFFF_FFFF, |_| {
        guard(|| match handles::vi(vi)?.connect_peer_done() {
            Err(Error::NotDone) => {
                std::thread::sleep(Duration::from_millis(1));
                Err(Code(VIP_TIMEOUT))
            }
            Ok(a) => {
                put_attrs(remote_attrs, a);
                Ok(())
            }
            Err(e) => Err(e.into()),
        })
    })
}

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
        put(cq, handles::insert(Entry::Cq(c)))
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
