//! The VI and connection calls (data transfer and completion queues: `data.rs`).

use crate::errors::{guard, Code, VIP_SUCCESS, VIP_TIMEOUT};
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

pub(crate) fn put<T>(out: *mut T, v: T) -> Result<(), Code> {
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
pub(crate) fn sliced(ms: c_ulong, mut attempt: impl FnMut(Duration) -> u32) -> u32 {
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
        put(vi, handles::insert(Entry::Vi(v)).ok_or(handles::FULL)?)
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
            put(conn, handles::insert(Entry::Conn(Arc::new(Mutex::new(Some(req))))).ok_or(handles::FULL)?)
        })
    })
}

fn take_conn(conn: *mut c_void) -> Result<remora_vipl::ConnRequest, Code> {
    // Another kind of handle is left in the table untouched: only a connection handle is
    // taken out.
    if !matches!(handles::get(conn), Some(Entry::Conn(_))) {
        return Err(bad());
    }
    match handles::remove(conn) {
        Some(Entry::Conn(c)) => c.lock().unwrap_or_else(|p| p.into_inner()).take().ok_or_else(bad),
        _ => Err(bad()),
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

/// `VipConnectPeerWait`: asleep until the outcome is known (the thread making the
/// connection wakes it), in slices of 100 ms with a cancellation point between them. It
/// loops here rather than in `sliced`: the outcome, `VIP_TIMEOUT` among them, is taken by
/// the look that finds it, so no look may follow it.
///
/// # Safety
/// `remote_attrs` is NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn VipConnectPeerWait(
    vi: *mut c_void,
    remote_attrs: *mut VipViAttributes,
) -> u32 {
    const SLICE: Duration = Duration::from_millis(100);
    loop {
        let mut pending = false;
        let code = guard(|| match handles::vi(vi)?.connect_peer_wait_for(Some(SLICE)) {
            Err(Error::NotDone) => {
                pending = true;
                Ok(())
            }
            Ok(a) => {
                put_attrs(remote_attrs, a);
                Ok(())
            }
            Err(e) => Err(e.into()),
        });
        if !pending {
            return code;
        }
        remora_sys::cancel::point();
    }
}
