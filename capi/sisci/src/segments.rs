//! Local segments (create, prepare, available, remove, register memory, share, attach)
//! and remote segments (connect, disconnect, getters).

#![allow(unsafe_code)] // this file is part of the unsafe layer: every block has a SAFETY comment
use crate::callbacks;
use crate::consts::*;
use crate::errors::{check_flags, run, run_quiet, run_waiting_on, ErrorOut, Fail, Out, Outcome};
use crate::handles::{self, handle, key};
use crate::types::{
    sci_cb_local_segment_t, sci_cb_remote_segment_t, sci_desc_t, sci_error_t, sci_local_segment_t,
    sci_remote_segment_t,
};
use crate::wait_time;
use remora_sisci::{ConnectFlags, CreateFlags, Descriptor, LocalSegment, RemoteSegment};
use std::ffi::{c_uint, c_void};

/// `SCICreateSegment` flags that need hardware Remora does not have.
const CREATE_HARDWARE: u32 = SCI_FLAG_PHYSICAL | SCI_FLAG_CUDA_BUFFER | SCI_FLAG_SCIF_BUFFER;

/// An optional C out-parameter: `None` for NULL.
///
/// # Errors
/// `SCI_ERR_ILLEGAL_PARAMETER` when `p` is misaligned.
///
/// # Safety
/// `p` is NULL or writable for one `T` for the rest of the call.
pub(crate) unsafe fn optional_out<T>(p: *mut T) -> Outcome<Option<Out<T>>> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: `p` is non-NULL and writable (this function's contract).
    Ok(Some(unsafe { Out::new(p) }?))
}

/// The local segment a handle names.
pub(crate) fn local(segment: sci_local_segment_t) -> Outcome<LocalSegment> {
    handles::get(key(segment))
}

/// The remote segment a handle names.
pub(crate) fn remote(segment: sci_remote_segment_t) -> Outcome<RemoteSegment> {
    handles::get(key(segment))
}

/// The id and node of remote segments disconnected lately, by handle key (keys are never
/// reused). Programs read `SCIGetRemoteSegmentId` after `SCIDisconnectSegment` to tell
/// their partner which segment to remove, and Dolphin's handle still holds the id then.
static RETIRED: std::sync::Mutex<std::collections::VecDeque<(usize, u32, u32)>> =
    std::sync::Mutex::new(std::collections::VecDeque::new());

/// How many disconnected handles keep their id and node.
const RETIRED_KEPT: usize = 4096;

fn retire(segment: sci_remote_segment_t, r: &RemoteSegment) {
    let mut kept = RETIRED.lock().unwrap_or_else(|p| p.into_inner());
    if kept.len() == RETIRED_KEPT {
        kept.pop_front();
    }
    kept.push_back((key(segment), r.id(), r.node()));
}

/// The id and node a disconnected handle had.
fn retired(segment: sci_remote_segment_t) -> Outcome<(u32, u32)> {
    let kept = RETIRED.lock().unwrap_or_else(|p| p.into_inner());
    let k = key(segment);
    kept.iter()
        .rev()
        .find(|(h, _, _)| *h == k)
        .map(|&(_, id, node)| (id, node))
        .ok_or(Fail(SCI_ERR_ILLEGAL_PARAMETER))
}

/// `SCICreateSegment`: create a segment of `size` bytes with id `segment_id` (chosen by the
/// node with `SCI_FLAG_AUTO_ID`; none with `SCI_FLAG_PRIVATE`) and store its handle.
/// `SCI_FLAG_EMPTY` creates it without memory (see `SCIRegisterSegmentMemory`).
/// With `SCI_FLAG_USE_CALLBACK` and a non-NULL `callback`, connects and disconnects of
/// importers are reported to `callback(callback_arg, segment, reason, node, adapter,
/// SCI_ERR_OK)` on the library's event thread (and `SCIWaitForLocalSegmentEvent` is
/// illegal); otherwise they queue up for `SCIWaitForLocalSegmentEvent`.
/// `SCI_FLAG_DMA_GLOBAL` is accepted (a hint without effect: there is one DMA engine).
///
/// With `SCI_FLAG_BROADCAST`, `segment_id` is a reflective-memory group (0–5) and the
/// segment is this node's member of it: every member on this host shares one memory, so a
/// store through the group's multicast map (`SCIConnectSegment` to
/// `DIS_BROADCAST_NODEID_GROUP_ALL`) is in every member's local map, and a late member
/// sees the current contents. `SCI_FLAG_ALLOW_UNICAST` (only with `SCI_FLAG_BROADCAST`)
/// lets ordinary connects reach the member too; without it they get `SCI_ERR_ACCESS`.
///
/// # Errors
/// `SCI_ERR_SEGMENTID_USED`; `SCI_ERR_NOSPC`; `SCI_ERR_ILLEGAL_PARAMETER` for a bad
/// descriptor, a NULL `segment`, a zero size, a group above 5 or a member larger than the
/// group's memory on this host; `SCI_ERR_ILLEGAL_FLAG` for unknown flags, and for
/// `SCI_FLAG_ALLOW_UNICAST` without `SCI_FLAG_BROADCAST` or `SCI_FLAG_BROADCAST` with
/// `SCI_FLAG_AUTO_ID`, `SCI_FLAG_PRIVATE` or `SCI_FLAG_EMPTY`;
/// `SCI_ERR_NOT_SUPPORTED` for `SCI_FLAG_PHYSICAL`, `SCI_FLAG_CUDA_BUFFER`,
/// `SCI_FLAG_SCIF_BUFFER`.
///
/// # Safety
/// `segment` and `error` are NULL or writable. A callback is a valid function of the
/// `sci_cb_local_segment_t` type, and it and `callback_arg` stay usable until the segment
/// is removed.
#[no_mangle]
pub unsafe extern "C-unwind" fn SCICreateSegment(
    sd: sci_desc_t,
    segment: *mut sci_local_segment_t,
    segment_id: c_uint,
    size: usize,
    callback: sci_cb_local_segment_t,
    callback_arg: *mut c_void,
    flags: c_uint,
    error: *mut sci_error_t,
) {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    run(status, (), || {
        let accepted = SCI_FLAG_AUTO_ID
            | SCI_FLAG_PRIVATE
            | SCI_FLAG_EMPTY
            | SCI_FLAG_USE_CALLBACK
            | SCI_FLAG_DMA_GLOBAL
            | SCI_FLAG_BROADCAST
            | SCI_FLAG_ALLOW_UNICAST;
        check_flags(flags, accepted | CREATE_HARDWARE, 0)?;
        if flags & CREATE_HARDWARE != 0 {
            return Err(Fail(SCI_ERR_NOT_SUPPORTED));
        }
        let broadcast = flags & SCI_FLAG_BROADCAST != 0;
        let not_with_broadcast = SCI_FLAG_AUTO_ID | SCI_FLAG_PRIVATE | SCI_FLAG_EMPTY;
        if (!broadcast && flags & SCI_FLAG_ALLOW_UNICAST != 0)
            || (broadcast && flags & not_with_broadcast != 0)
        {
            return Err(Fail(SCI_ERR_ILLEGAL_FLAG));
        }
        // SAFETY: `segment` is NULL or writable (this function's contract).
        let out = unsafe { Out::new(segment) }?;
        let desc: Descriptor = handles::get(key(sd))?;
        let id = if flags & SCI_FLAG_AUTO_ID != 0 { None } else { Some(segment_id) };
        let how = CreateFlags { private: flags & SCI_FLAG_PRIVATE != 0, empty: flags & SCI_FLAG_EMPTY != 0 };
        let slot = handles::reserve::<LocalSegment>()?;
        let cb = callbacks::local_segment(callback, callback_arg, flags, slot.key(), slot.gate());
        let seg = if broadcast {
            let unicast = flags & SCI_FLAG_ALLOW_UNICAST != 0;
            LocalSegment::create_broadcast(&desc, segment_id, size, unicast, cb)?
        } else {
            LocalSegment::create_with_callback(&desc, id, size, how, cb)?
        };
        out.set(handle(slot.fill(seg)));
        Ok(())
    })
}

/// `SCIPrepareSegment`: make the segment usable through adapter `local_adapter_no`.
/// `SCI_FLAG_DMA_SOURCE_ONLY` is accepted (a hint without effect here), and so is
/// `SCI_FLAG_BROADCAST` (Dolphin's reflective-memory programs prepare members with it).
///
/// # Errors
/// `SCI_ERR_NO_SUCH_ADAPTERNO`; `SCI_ERR_ILLEGAL_OPERATION` for a segment without memory;
/// `SCI_ERR_ILLEGAL_PARAMETER` for a bad handle; `SCI_ERR_ILLEGAL_FLAG`.
///
/// # Safety
/// `error` is NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn SCIPrepareSegment(
    segment: sci_local_segment_t,
    local_adapter_no: c_uint,
    flags: c_uint,
    error: *mut sci_error_t,
) {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    run(status, (), || {
        check_flags(flags, SCI_FLAG_DMA_SOURCE_ONLY | SCI_FLAG_BROADCAST, 0)?;
        local(segment)?.prepare(local_adapter_no)?;
        Ok(())
    })
}

/// `SCISetSegmentAvailable`: let nodes connect to the segment.
///
/// # Errors
/// `SCI_ERR_SEGMENT_NOT_PREPARED`; `SCI_ERR_ILLEGAL_OPERATION` for a private segment;
/// `SCI_ERR_NO_SUCH_ADAPTERNO`; `SCI_ERR_ILLEGAL_PARAMETER` for a bad handle;
/// `SCI_ERR_ILLEGAL_FLAG` for any flag.
///
/// # Safety
/// `error` is NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn SCISetSegmentAvailable(
    segment: sci_local_segment_t,
    local_adapter_no: c_uint,
    flags: c_uint,
    error: *mut sci_error_t,
) {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    run(status, (), || {
        check_flags(flags, 0, 0)?;
        local(segment)?.set_available(local_adapter_no)?;
        Ok(())
    })
}

/// `SCISetSegmentUnavailable`: refuse new connections; `SCI_FLAG_FORCE_DISCONNECT` drops
/// the existing ones, `SCI_FLAG_NOTIFY` tells the connected nodes.
///
/// # Errors
/// `SCI_ERR_ILLEGAL_OPERATION` when it is not available; `SCI_ERR_NO_SUCH_ADAPTERNO`;
/// `SCI_ERR_ILLEGAL_PARAMETER` for a bad handle; `SCI_ERR_ILLEGAL_FLAG`.
///
/// # Safety
/// `error` is NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn SCISetSegmentUnavailable(
    segment: sci_local_segment_t,
    local_adapter_no: c_uint,
    flags: c_uint,
    error: *mut sci_error_t,
) {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    run(status, (), || {
        check_flags(flags, SCI_FLAG_FORCE_DISCONNECT | SCI_FLAG_NOTIFY, 0)?;
        let force = flags & SCI_FLAG_FORCE_DISCONNECT != 0;
        let notify = flags & SCI_FLAG_NOTIFY != 0;
        local(segment)?.set_unavailable(local_adapter_no, force, notify)?;
        Ok(())
    })
}

/// `SCIRemoveSegment`: remove (or, for an attached segment, detach) the segment; its
/// handle becomes invalid.
///
/// # Errors
/// `SCI_ERR_BUSY` while maps of it exist or other processes attached it (unless
/// `SCI_FLAG_FORCE_REMOVE`: then it goes all the same, maps keep their memory);
/// `SCI_ERR_ILLEGAL_PARAMETER` for a bad handle; `SCI_ERR_ILLEGAL_FLAG`.
///
/// # Safety
/// `error` is NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn SCIRemoveSegment(
    segment: sci_local_segment_t,
    flags: c_uint,
    error: *mut sci_error_t,
) {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    run(status, (), || {
        check_flags(flags, SCI_FLAG_FORCE_REMOVE, 0)?;
        let seg = local(segment)?;
        if flags & SCI_FLAG_FORCE_REMOVE != 0 {
            seg.remove_forced()?;
        } else {
            seg.remove()?;
        }
        handles::remove(key(segment));
        Ok(())
    })
}

/// `SCIGetLocalSegmentId`: the segment's id (0 for a private segment or a bad handle).
///
/// # Errors
/// None reported (no error argument): 0 for a bad handle.
#[no_mangle]
pub extern "C-unwind" fn SCIGetLocalSegmentId(segment: sci_local_segment_t) -> c_uint {
    run_quiet(0, || Ok(local(segment)?.id()))
}

/// `SCIGetLocalSegmentSize`: the segment's size in bytes (0 for a bad handle).
///
/// # Errors
/// None reported (no error argument): 0 for a bad handle.
#[no_mangle]
pub extern "C-unwind" fn SCIGetLocalSegmentSize(segment: sci_local_segment_t) -> usize {
    run_quiet(0, || Ok(local(segment)?.size()))
}

/// `SCIRegisterSegmentMemory`: give the `SCI_FLAG_EMPTY` segment the `size` bytes at
/// `address` (page-aligned private anonymous memory of this process, e.g. from `mmap` or
/// a page-aligned `malloc`). The addresses stay valid for the program; from now on they
/// are the segment's memory. `SCI_FLAG_LOCK_USER_MEM` is accepted.
///
/// # Errors
/// `SCI_ERR_ILLEGAL_ADDRESS` for NULL or memory that is not private anonymous memory;
/// `SCI_ERR_OUT_OF_RANGE` when the range wraps around the address space;
/// `SCI_ERR_OFFSET_ALIGNMENT`/`SCI_ERR_SIZE_ALIGNMENT` when not page-aligned;
/// `SCI_ERR_ILLEGAL_OPERATION` when the segment has memory already;
/// `SCI_ERR_ILLEGAL_PARAMETER` for a bad handle; `SCI_ERR_ILLEGAL_FLAG`.
///
/// # Safety
/// `error` is NULL or writable. `address..address+size` is memory of this process that
/// the caller hands to the segment for the segment's whole life: no other thread may
/// write to it during this call, and it must not be freed while the segment exists.
#[no_mangle]
pub unsafe extern "C-unwind" fn SCIRegisterSegmentMemory(
    address: *mut c_void,
    size: usize,
    segment: sci_local_segment_t,
    flags: c_uint,
    error: *mut sci_error_t,
) {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    run(status, (), || {
        check_flags(flags, SCI_FLAG_LOCK_USER_MEM, 0)?;
        let seg = local(segment)?;
        if address.is_null() {
            return Err(Fail(SCI_ERR_ILLEGAL_ADDRESS));
        }
        if size > isize::MAX as usize || (address as usize).checked_add(size).is_none() {
            return Err(Fail(SCI_ERR_OUT_OF_RANGE));
        }
        // SAFETY: `address` is non-NULL, the range neither wraps nor exceeds
        // isize::MAX, and by this function's contract it is memory of this process
        // that the caller hands over to the segment for its whole life, with no
        // concurrent writers during the call. The safe API moves it into a memfd in
        // place and keeps no reference to the slice afterwards.
        let mem: &'static mut [u8] = unsafe { std::slice::from_raw_parts_mut(address.cast::<u8>(), size) };
        seg.register_memory(mem)?;
        Ok(())
    })
}

/// `SCIShareSegment`: let other processes of this node attach the segment
/// (`SCIAttachLocalSegment`).
///
/// # Errors
/// `SCI_ERR_ILLEGAL_OPERATION` for a private segment; `SCI_ERR_ILLEGAL_PARAMETER` for a
/// bad handle; `SCI_ERR_ILLEGAL_FLAG` for any flag.
///
/// # Safety
/// `error` is NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn SCIShareSegment(
    segment: sci_local_segment_t,
    flags: c_uint,
    error: *mut sci_error_t,
) {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    run(status, (), || {
        check_flags(flags, 0, 0)?;
        local(segment)?.share()?;
        Ok(())
    })
}

/// `SCIAttachLocalSegment`: attach the segment with id `segment_id` that a process of this
/// node shared; stores the handle in `*segment` and its size in `*size` (when `size` is
/// not NULL). With `SCI_FLAG_USE_CALLBACK` and a non-NULL `callback`, the events of this
/// attachment go to the callback, as for `SCICreateSegment`.
///
/// # Errors
/// `SCI_ERR_NO_SUCH_SEGMENT`; `SCI_ERR_ACCESS` when it is not shared;
/// `SCI_ERR_ILLEGAL_PARAMETER` for a bad descriptor or a NULL `segment`;
/// `SCI_ERR_FLAG_NOT_IMPLEMENTED` for `SCI_FLAG_BROADCAST`; `SCI_ERR_ILLEGAL_FLAG`.
///
/// # Safety
/// `segment`, `size` and `error` are NULL or writable. A callback is a valid
/// `sci_cb_local_segment_t`, usable with `callback_arg` until the segment is removed.
#[no_mangle]
pub unsafe extern "C-unwind" fn SCIAttachLocalSegment(
    sd: sci_desc_t,
    segment: *mut sci_local_segment_t,
    segment_id: c_uint,
    size: *mut usize,
    callback: sci_cb_local_segment_t,
    callback_arg: *mut c_void,
    flags: c_uint,
    error: *mut sci_error_t,
) {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    run(status, (), || {
        check_flags(flags, SCI_FLAG_USE_CALLBACK, SCI_FLAG_BROADCAST)?;
        // SAFETY: `segment` is NULL or writable (this function's contract).
        let out = unsafe { Out::new(segment) }?;
        // SAFETY: `size` is NULL or writable (this function's contract).
        let size_out = unsafe { optional_out(size) }?;
        let desc: Descriptor = handles::get(key(sd))?;
        let slot = handles::reserve::<LocalSegment>()?;
        let cb = callbacks::local_segment(callback, callback_arg, flags, slot.key(), slot.gate());
        let seg = LocalSegment::attach(&desc, segment_id, cb)?;
        let bytes = seg.size();
        out.set(handle(slot.fill(seg)));
        if let Some(s) = size_out {
            s.set(bytes);
        }
        Ok(())
    })
}

/// `SCIConnectSegment`: connect to segment `segment_id` of node `node_id` (this node
/// included), waiting up to `timeout` ms for it to become available
/// (`SCI_INFINITE_TIMEOUT`: no limit), and store the handle in `*segment`.
///
/// With `SCI_FLAG_ASYNCHRONOUS_CONNECT` the call returns at once with a handle that is not
/// connected yet; the outcome arrives as an `SCI_CB_CONNECT` event (the handle is usable)
/// or an `SCI_CB_DISCONNECT` event whose status says why it failed (release the handle
/// with `SCIDisconnectSegment`). With `SCI_FLAG_USE_CALLBACK` and a non-NULL `callback`,
/// events go to `callback(callback_arg, segment, reason, status)` (on the library's
/// threads) instead of `SCIWaitForRemoteSegmentEvent`.
///
/// With `SCI_FLAG_BROADCAST`, `node_id` must be `DIS_BROADCAST_NODEID_GROUP_ALL` and
/// `segment_id` a group (0–5): the handle is the group's multicast segment, whose maps
/// store into every member's segment, on this host and on the other hosts of the cluster
/// that had a member when it connected. It waits up to `timeout` for a member to exist.
///
/// # Errors
/// `SCI_ERR_NO_SUCH_NODEID` at once for an unknown node; `SCI_ERR_NO_SUCH_SEGMENT` when
/// no segment had the id in time; `SCI_ERR_TIMEOUT` when it existed but was not available
/// (an asynchronous connect reports these three as the status of its `SCI_CB_DISCONNECT`
/// event instead); `SCI_ERR_NO_SUCH_ADAPTERNO`; `SCI_ERR_ILLEGAL_PARAMETER` for a bad descriptor or a
/// NULL `segment`, and for `SCI_FLAG_BROADCAST` with another node or a group above 5;
/// `SCI_ERR_ACCESS`
/// for an ordinary connect to a member created without `SCI_FLAG_ALLOW_UNICAST`;
/// `SCI_ERR_ILLEGAL_FLAG`, also for `SCI_FLAG_BROADCAST` with
/// `SCI_FLAG_ASYNCHRONOUS_CONNECT`.
///
/// # Safety
/// `segment` and `error` are NULL or writable. A callback is a valid
/// `sci_cb_remote_segment_t`, usable with `callback_arg` until the segment is
/// disconnected.
#[no_mangle]
pub unsafe extern "C-unwind" fn SCIConnectSegment(
    sd: sci_desc_t,
    segment: *mut sci_remote_segment_t,
    node_id: c_uint,
    segment_id: c_uint,
    local_adapter_no: c_uint,
    callback: sci_cb_remote_segment_t,
    callback_arg: *mut c_void,
    timeout: c_uint,
    flags: c_uint,
    error: *mut sci_error_t,
) {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    let connect = |wait: Option<std::time::Duration>| {
        check_flags(flags, SCI_FLAG_USE_CALLBACK | SCI_FLAG_ASYNCHRONOUS_CONNECT | SCI_FLAG_BROADCAST, 0)?;
        let broadcast = flags & SCI_FLAG_BROADCAST != 0;
        if broadcast && flags & SCI_FLAG_ASYNCHRONOUS_CONNECT != 0 {
            return Err(Fail(SCI_ERR_ILLEGAL_FLAG));
        }
        if broadcast && node_id != DIS_BROADCAST_NODEID_GROUP_ALL {
            return Err(Fail(SCI_ERR_ILLEGAL_PARAMETER));
        }
        // SAFETY: `segment` is NULL or writable (this function's contract).
        let out = unsafe { Out::new(segment) }?;
        let desc: Descriptor = handles::get(key(sd))?;
        if broadcast {
            let seg = RemoteSegment::connect_group(&desc, segment_id, local_adapter_no, wait)?;
            out.set(handle(handles::insert(seg)?));
            return Ok(());
        }
        let how = ConnectFlags { asynchronous: flags & SCI_FLAG_ASYNCHRONOUS_CONNECT != 0 };
        let slot = handles::reserve::<RemoteSegment>()?;
        let cb = callbacks::remote_segment(callback, callback_arg, flags, slot.key(), slot.gate());
        let seg = RemoteSegment::connect_with(&desc, node_id, segment_id, local_adapter_no, wait, how, cb)?;
        out.set(handle(slot.fill(seg)));
        Ok(())
    };
    if flags & SCI_FLAG_ASYNCHRONOUS_CONNECT != 0 {
        return run(status, (), || connect(wait_time(timeout)));
    }
    // A synchronous connect waits in slices, a cancellation point between two (each slice
    // a connect that waits at most 100 ms; one that finds the segment connects).
    run_waiting_on(status, wait_time(timeout), &[SCI_ERR_NO_SUCH_SEGMENT, SCI_ERR_TIMEOUT], connect)
}

/// `SCIDisconnectSegment`: drop the connection; its handle becomes invalid.
///
/// # Errors
/// `SCI_ERR_BUSY` while maps of it exist; `SCI_ERR_ILLEGAL_PARAMETER` for a bad handle;
/// `SCI_ERR_ILLEGAL_FLAG` for any flag.
///
/// # Safety
/// `error` is NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn SCIDisconnectSegment(
    segment: sci_remote_segment_t,
    flags: c_uint,
    error: *mut sci_error_t,
) {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    run(status, (), || {
        check_flags(flags, 0, 0)?;
        let r = remote(segment)?;
        r.disconnect()?;
        retire(segment, &r);
        handles::remove(key(segment));
        Ok(())
    })
}

/// `SCIGetRemoteSegmentSize`: the connected segment's size in bytes (0 for a bad handle).
///
/// # Errors
/// None reported (no error argument): 0 for a bad handle.
#[no_mangle]
pub extern "C-unwind" fn SCIGetRemoteSegmentSize(segment: sci_remote_segment_t) -> usize {
    run_quiet(0, || Ok(remote(segment)?.size()))
}

/// `SCIGetRemoteSegmentId`: the connected segment's id (0 for a bad handle). As with
/// Dolphin's library, a handle keeps its id after `SCIDisconnectSegment`.
///
/// # Errors
/// None reported (no error argument): 0 for a bad handle.
#[no_mangle]
pub extern "C-unwind" fn SCIGetRemoteSegmentId(segment: sci_remote_segment_t) -> c_uint {
    run_quiet(0, || remote(segment).map(|r| r.id()).or_else(|_| retired(segment).map(|(id, _)| id)))
}

/// `SCIGetRemoteSegmentNodeId`: the node that owns the connected segment (0 for a bad
/// handle).
///
/// # Errors
/// None reported (no error argument): 0 for a bad handle.
#[no_mangle]
pub extern "C-unwind" fn SCIGetRemoteSegmentNodeId(segment: sci_remote_segment_t) -> c_uint {
    run_quiet(0, || remote(segment).map(|r| r.node()).or_else(|_| retired(segment).map(|(_, node)| node)))
}
