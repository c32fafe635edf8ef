//! Maps and the programmed-I/O copy helpers (sequences and barriers: `sequences`).

#![allow(unsafe_code)] // this file is part of the unsafe layer: every block has a SAFETY comment
use crate::consts::*;
use crate::errors::{check_flags, run, run_quiet, ErrorOut, Fail, Out, Outcome};
use crate::handles::{self, handle, key};
use crate::types::{sci_error_t, sci_local_segment_t, sci_map_t, sci_remote_segment_t, sci_sequence_t};
use remora_sisci::{LocalSegment, Map, MapFlags, RemoteSegment, Sequence, SequenceStatus};
use std::ffi::{c_uint, c_void};
use std::ptr;
use std::sync::atomic::{fence, Ordering};

/// Map flags Remora honours.
const MAP_HONOURED: u32 = SCI_FLAG_FIXED_MAP_ADDR | SCI_FLAG_READONLY_MAP;
/// Map flags that are hints for hardware paths and change nothing for a memory map:
/// prefetch and gathering choices, I/O-space and packet-size tuning, DMOVE, sharing, a
/// write-back cached map (every Remora map is cached memory), and
/// `SCI_FLAG_NO_MEMORY_LOOPBACK` (every Remora map reaches the memory directly).
const MAP_HINTS: u32 = SCI_FLAG_READ_PREFETCH_AGGR_HOLD_MAP
    | SCI_FLAG_READ_PREFETCH_NO_HOLD_MAP
    | SCI_FLAG_IO_MAP_IOSPACE
    | SCI_FLAG_DMOVE_MAP
    | SCI_FLAG_WRITES_DISABLE_GATHER_MAP
    | SCI_FLAG_DISABLE_128_BYTES_PACKETS
    | SCI_FLAG_NO_MEMORY_LOOPBACK
    | SCI_FLAG_SHARED_MAP
    | SCI_FLAG_WRITE_BACK_CACHE_MAP;
/// Map flags that make a plain load or store start an operation of the adapter: a load
/// that is a remote fetch-and-add, a store that raises a remote interrupt. On an ordinary
/// mapping a load or store reaches memory and nothing else sees it, so these need
/// Dolphin's hardware: `SCI_ERR_NOT_SUPPORTED`.
const MAP_ADAPTER: u32 =
    SCI_FLAG_LOCK_OPERATION | SCI_FLAG_CONDITIONAL_INTERRUPT_MAP | SCI_FLAG_UNCONDITIONAL_DATA_INTERRUPT_MAP;
/// `SCI_FLAG_BROADCAST`: a map of a group's multicast segment (or of a member) is an
/// ordinary map of the memory every member of the group on this host shares, so the flag
/// asks nothing more of the map.
const MAP_MULTICAST: u32 = SCI_FLAG_BROADCAST;

/// The map a handle names.
pub(crate) fn map_of(map: sci_map_t) -> Outcome<Map> {
    handles::get(key(map))
}

/// The sequence a handle names.
pub(crate) fn sequence_of(sequence: sci_sequence_t) -> Outcome<Sequence> {
    handles::get(key(sequence))
}

/// Check map flags; the safe-API flags and the fixed address they ask for.
fn map_options(flags: u32, addr: *mut c_void) -> Outcome<(MapFlags, Option<usize>)> {
    check_flags(flags, MAP_HONOURED | MAP_HINTS | MAP_ADAPTER | MAP_MULTICAST, 0)?;
    if flags & MAP_ADAPTER != 0 {
        return Err(Fail(SCI_ERR_NOT_SUPPORTED));
    }
    let fixed = if flags & SCI_FLAG_FIXED_MAP_ADDR != 0 {
        if addr.is_null() {
            return Err(Fail(SCI_ERR_ILLEGAL_ADDRESS));
        }
        Some(addr as usize)
    } else {
        None
    };
    Ok((MapFlags { readonly: flags & SCI_FLAG_READONLY_MAP != 0 }, fixed))
}

/// Register a new map and hand out its handle and address.
fn publish(out: Out<sci_map_t>, map: Map) -> Outcome<*mut c_void> {
    let addr = map.as_ptr().cast::<c_void>();
    out.set(handle(handles::insert(map)?));
    Ok(addr)
}

/// `SCIMapRemoteSegment`: map `size` bytes at `offset` of a connected segment into this
/// process; returns the address (NULL on error) and stores the map handle in `*map`.
/// Honours `SCI_FLAG_READONLY_MAP` (stores fault) and `SCI_FLAG_FIXED_MAP_ADDR` (map at
/// `addr`, which must not be taken); accepts the hint flags `SCI_FLAG_READ_PREFETCH_*`,
/// `SCI_FLAG_IO_MAP_IOSPACE`, `SCI_FLAG_DMOVE_MAP`, `SCI_FLAG_WRITES_DISABLE_GATHER_MAP`,
/// `SCI_FLAG_DISABLE_128_BYTES_PACKETS`, `SCI_FLAG_NO_MEMORY_LOOPBACK`,
/// `SCI_FLAG_SHARED_MAP`, `SCI_FLAG_WRITE_BACK_CACHE_MAP`, which change nothing here.
///
/// # Errors
/// `SCI_ERR_OUT_OF_RANGE`; `SCI_ERR_SIZE_ALIGNMENT` for a zero size;
/// `SCI_ERR_ILLEGAL_ADDRESS` for a bad or taken fixed address;
/// `SCI_ERR_ILLEGAL_PARAMETER` for a bad handle or a NULL `map`;
/// `SCI_ERR_NOT_SUPPORTED` for `SCI_FLAG_LOCK_OPERATION` and the interrupt map flags
/// (adapter features), and for a segment on another host where userfaultfd is unavailable
/// (the DSM's maps need it); `SCI_ERR_NOSPC` where the process is out of descriptors or
/// memory for such a map now; `SCI_ERR_ILLEGAL_FLAG`. `SCI_FLAG_BROADCAST` is accepted:
/// the map of a multicast segment stores into every member (see `SCIConnectSegment`). A
/// map that can be written, of another host's segment, is made once stores on their way
/// to that cluster's homes landed (at most 5 s).
///
/// # Safety
/// `map` and `error` are NULL or writable. With `SCI_FLAG_FIXED_MAP_ADDR`, `addr` must be
/// an address range the program does not use (Remora refuses to replace a mapping).
#[no_mangle]
pub unsafe extern "C-unwind" fn SCIMapRemoteSegment(
    segment: sci_remote_segment_t,
    map: *mut sci_map_t,
    offset: usize,
    size: usize,
    addr: *mut c_void,
    flags: c_uint,
    error: *mut sci_error_t,
) -> *mut c_void {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    run(status, ptr::null_mut(), || {
        let (how, fixed) = map_options(flags, addr)?;
        // SAFETY: `map` is NULL or writable (this function's contract).
        let out = unsafe { Out::new(map) }?;
        let seg: RemoteSegment = handles::get(key(segment))?;
        publish(out, seg.map(offset, size, fixed, how)?)
    })
}

/// `SCIMapLocalSegment`: map `size` bytes at `offset` of a local segment into this
/// process; returns the address (NULL on error) and stores the map handle in `*map`.
/// Takes the same flags as `SCIMapRemoteSegment`.
///
/// # Errors
/// `SCI_ERR_OUT_OF_RANGE`; `SCI_ERR_SIZE_ALIGNMENT` for a zero size;
/// `SCI_ERR_ILLEGAL_OPERATION` for a segment without memory; `SCI_ERR_ILLEGAL_ADDRESS`;
/// `SCI_ERR_ILLEGAL_PARAMETER` for a bad handle or a NULL `map`;
/// `SCI_ERR_NOT_SUPPORTED`; `SCI_ERR_ILLEGAL_FLAG`.
///
/// # Safety
/// As for `SCIMapRemoteSegment`.
#[no_mangle]
pub unsafe extern "C-unwind" fn SCIMapLocalSegment(
    segment: sci_local_segment_t,
    map: *mut sci_map_t,
    offset: usize,
    size: usize,
    addr: *mut c_void,
    flags: c_uint,
    error: *mut sci_error_t,
) -> *mut c_void {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    run(status, ptr::null_mut(), || {
        let (how, fixed) = map_options(flags, addr)?;
        // SAFETY: `map` is NULL or writable (this function's contract).
        let out = unsafe { Out::new(map) }?;
        let seg: LocalSegment = handles::get(key(segment))?;
        publish(out, seg.map(offset, size, fixed, how)?)
    })
}

/// `SCIUnmapSegment`: remove the mapping; its handle and address become invalid. As with
/// Dolphin's library, sequences of the map may still exist (they are removed later).
///
/// # Errors
/// `SCI_ERR_ILLEGAL_PARAMETER` for a bad handle; `SCI_ERR_ILLEGAL_FLAG` for any flag.
///
/// # Safety
/// `error` is NULL or writable. Nothing may use the mapped addresses afterwards.
#[no_mangle]
pub unsafe extern "C-unwind" fn SCIUnmapSegment(map: sci_map_t, flags: c_uint, error: *mut sci_error_t) {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    run(status, (), || {
        check_flags(flags, 0, 0)?;
        map_of(map)?.unmap()?;
        handles::remove(key(map));
        Ok(())
    })
}

/// `SCIGetMapPointer`: the address of the first mapped byte (NULL for a bad handle).
///
/// # Errors
/// None reported (no error argument): NULL for a NULL, stale or wrong-kind handle.
#[no_mangle]
pub extern "C-unwind" fn SCIGetMapPointer(map: sci_map_t) -> *mut c_void {
    run_quiet(ptr::null_mut(), || Ok(map_of(map)?.as_ptr().cast::<c_void>()))
}

/// The body of `SCIMemCpy` and `SCIMemCopy`.
///
/// # Safety
/// `mem` is valid for reads (or, with `SCI_FLAG_BLOCK_READ`, writes) of `size` bytes
/// whenever it is not NULL, and nothing else writes those bytes during the call.
unsafe fn mem_cpy(
    sequence: sci_sequence_t,
    mem: *mut c_void,
    map: sci_map_t,
    offset: usize,
    size: usize,
    flags: u32,
) -> Outcome<()> {
    check_flags(flags, SCI_FLAG_BLOCK_READ | SCI_FLAG_ERROR_CHECK, 0)?;
    let map = map_of(map)?;
    let seq = if sequence.is_null() { None } else { Some(sequence_of(sequence)?) };
    if size == 0 {
        return Ok(());
    }
    if mem.is_null() {
        return Err(Fail(SCI_ERR_ILLEGAL_PARAMETER));
    }
    let start = mem as usize;
    let end = start
        .checked_add(size)
        .filter(|_| size <= isize::MAX as usize)
        .ok_or(Fail(SCI_ERR_ILLEGAL_PARAMETER))?;
    // A buffer inside the mapped range itself would make the copy overlap its source.
    let (map_start, map_end) = (map.as_ptr() as usize, map.as_ptr() as usize + map.size());
    if start < map_end && map_start < end {
        return Err(Fail(SCI_ERR_ILLEGAL_PARAMETER));
    }
    if flags & SCI_FLAG_BLOCK_READ != 0 {
        // SAFETY: `mem` is non-NULL, the range neither wraps nor exceeds isize::MAX, it
        // does not overlap the map, and by this function's contract it is writable and
        // not accessed by anyone else during the call.
        let out = unsafe { std::slice::from_raw_parts_mut(mem.cast::<u8>(), size) };
        map.read(offset, out)?;
    } else {
        // SAFETY: as above, with the range readable and not written during the call.
        let data = unsafe { std::slice::from_raw_parts(mem.cast::<u8>().cast_const(), size) };
        crate::copies::store(&map, offset, data)?;
    }
    if let (Some(s), true) = (seq, flags & SCI_FLAG_ERROR_CHECK != 0) {
        if s.check(false, false)? != SequenceStatus::Ok {
            return Err(remora_sisci::Error::TransferFailed.into());
        }
    }
    Ok(())
}

/// `SCIMemCpy`: copy `size` bytes from `mem_addr` into the map at `remote_offset` (with
/// the routine `SetSciMemCopyFunction` chose), or with `SCI_FLAG_BLOCK_READ` from the map
/// into `mem_addr`. With `SCI_FLAG_ERROR_CHECK`
/// and a sequence (which may be NULL), the sequence is checked afterwards.
///
/// # Errors
/// `SCI_ERR_OUT_OF_RANGE` when the range leaves the map; `SCI_ERR_ILLEGAL_OPERATION`
/// writing a read-only map; `SCI_ERR_TRANSFER_FAILED` when the checked sequence reports
/// an error; `SCI_ERR_ILLEGAL_PARAMETER` for a bad map or sequence, a NULL `mem_addr`
/// with a non-zero size, or a buffer that overlaps the map itself; `SCI_ERR_ILLEGAL_FLAG`.
///
/// # Safety
/// `error` is NULL or writable. `mem_addr` is NULL or valid for reads (writes with
/// `SCI_FLAG_BLOCK_READ`) of `size` bytes that nothing else writes during the call.
#[no_mangle]
pub unsafe extern "C-unwind" fn SCIMemCpy(
    sequence: sci_sequence_t,
    mem_addr: *mut c_void,
    remote_map: sci_map_t,
    remote_offset: usize,
    size: usize,
    flags: c_uint,
    error: *mut sci_error_t,
) {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    run(status, (), || {
        // SAFETY: `mem_addr` is NULL or valid for `size` bytes, unshared during the call
        // (this function's contract).
        unsafe { mem_cpy(sequence, mem_addr, remote_map, remote_offset, size, flags) }
    })
}

/// `SCIMemCopy` (API 1.x): `SCIMemCpy` without a sequence and with 32-bit offset and size.
///
/// # Errors
/// As `SCIMemCpy`.
///
/// # Safety
/// As `SCIMemCpy`.
#[no_mangle]
pub unsafe extern "C-unwind" fn SCIMemCopy(
    mem_addr: *mut c_void,
    remote_map: sci_map_t,
    remote_offset: c_uint,
    size: c_uint,
    flags: c_uint,
    error: *mut sci_error_t,
) {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    run(status, (), || {
        // SAFETY: `mem_addr` is NULL or valid for `size` bytes, unshared during the call
        // (this function's contract).
        unsafe {
            mem_cpy(ptr::null_mut(), mem_addr, remote_map, remote_offset as usize, size as usize, flags)
        }
    })
}

/// `SCIMemWrite`: copy `size` bytes from `mem_addr` to `remote_addr`, an address inside a
/// live map of this process.
///
/// # Errors
/// `SCI_ERR_OUT_OF_RANGE` when no live map holds `remote_addr..remote_addr+size`;
/// `SCI_ERR_ILLEGAL_OPERATION` for a read-only map; `SCI_ERR_ILLEGAL_PARAMETER` for a NULL
/// `mem_addr` with a non-zero size or a source overlapping the destination;
/// `SCI_ERR_ILLEGAL_FLAG` for any flag.
///
/// # Safety
/// `error` is NULL or writable. `mem_addr` is NULL or valid for reads of `size` bytes
/// that nothing writes during the call.
#[no_mangle]
pub unsafe extern "C-unwind" fn SCIMemWrite(
    mem_addr: *mut c_void,
    remote_addr: *mut c_void,
    size: usize,
    flags: c_uint,
    error: *mut sci_error_t,
) {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    run(status, (), || {
        check_flags(flags, 0, 0)?;
        if size == 0 {
            return Ok(());
        }
        if mem_addr.is_null() || size > isize::MAX as usize {
            return Err(Fail(SCI_ERR_ILLEGAL_PARAMETER));
        }
        let (src, dst) = (mem_addr as usize, remote_addr as usize);
        let src_end = src.checked_add(size).ok_or(Fail(SCI_ERR_ILLEGAL_PARAMETER))?;
        let (map, offset) = handles::find_map(dst, size).ok_or(Fail(SCI_ERR_OUT_OF_RANGE))?;
        if src < dst + size && dst < src_end {
            return Err(Fail(SCI_ERR_ILLEGAL_PARAMETER));
        }
        // SAFETY: `mem_addr` is non-NULL, the range neither wraps nor exceeds
        // isize::MAX nor overlaps the destination, and by this function's contract
        // it is readable and not written during the call.
        let data = unsafe { std::slice::from_raw_parts(mem_addr.cast::<u8>().cast_const(), size) };
        map.write(offset, data)?;
        fence(Ordering::Release);
        Ok(())
    })
}

/// `SCICacheSync`: write back (`SCI_FLAG_CACHE_FLUSH`) and/or invalidate
/// (`SCI_FLAG_CACHE_INVALIDATE`) cached data of a buffer. Remora's memory is ordinary
/// coherent memory, so this is a full memory fence. `map` may be NULL.
///
/// # Errors
/// `SCI_ERR_ILLEGAL_PARAMETER` for a non-NULL bad map handle; `SCI_ERR_ILLEGAL_FLAG`.
///
/// # Safety
/// `error` is NULL or writable. `addr` is not dereferenced.
#[no_mangle]
pub unsafe extern "C-unwind" fn SCICacheSync(
    map: sci_map_t,
    addr: *mut c_void,
    length: usize,
    flags: c_uint,
    error: *mut sci_error_t,
) {
    let _ = (addr, length);
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    run(status, (), || {
        check_flags(flags, SCI_FLAG_CACHE_FLUSH | SCI_FLAG_CACHE_INVALIDATE, 0)?;
        if !map.is_null() {
            map_of(map)?;
        }
        fence(Ordering::SeqCst);
        Ok(())
    })
}

/// `SCIGetMapPhysAddr`: the bus address behind a map. There is none without hardware
/// (and no error argument): always 0.
///
/// # Errors
/// None reported (no error argument).
#[no_mangle]
pub extern "C-unwind" fn SCIGetMapPhysAddr(map: sci_map_t) -> sci_ioaddr_t {
    let _ = map;
    run_quiet(0, || Ok(0))
}
