//! `librsm.so`: Sun's Remote Shared Memory library (Solaris `librsm.so.2`) as a C ABI over
//! Remora's safe Rust API (`remora-rsm`). C programs include Remora's `<rsmapi.h>` and
//! link with `-lrsm`; the functions carry Solaris's symbol version `SUNWprivate_1.1`.
//!
//! ```no_run
//! // Rust code may call the same functions through the rlib:
//! let mut ctl: *mut std::ffi::c_void = std::ptr::null_mut();
//! let name = std::ffi::CString::new("remora0").unwrap();
//! assert_eq!(unsafe { rsm::rsm_get_controller(name.as_ptr(), &mut ctl) }, 0);
//! assert_eq!(unsafe { rsm::rsm_release_controller(ctl) }, 0);
//! ```
//!
//! # How calls are made safe
//!
//! * **Handles are numbers** in a table (`handles.rs`), never pointers the library
//!   dereferences: NULL, stale or wrong-kind handles give `RSMERR_BAD_SEG_HNDL` (or the
//!   controller's, local memory's or barrier's code).
//! * **Errors** come from one table (`errors::code_of`); functions return the code.
//! * **No unwinding into C.** Every entry point runs its body under `catch_unwind`.
//! * **Pointers from the caller** are checked for NULL (`RSMERR_BAD_ADDR`) and used only
//!   for the lengths the call names.

#![allow(unsafe_code)] // this file is part of the unsafe layer: every block has a SAFETY comment

/// Tag each named function with Solaris's symbol version (`name@@SUNWprivate_1.1`). Used in
/// the module that defines the functions: the directive must be in the same object.
macro_rules! versioned {
    ($($f:ident),* $(,)?) => {
        $(std::arch::global_asm!(concat!(".symver ", stringify!($f), ", ", stringify!($f), "@@SUNWprivate_1.1"));)*
    };
}

mod errors;
mod export;
mod handles;
mod import;
mod signal;

pub use errors::*;
pub use export::*;
pub use import::*;
pub use signal::*;

use errors::{guard, Code};
use handles::Entry;
use remora_rsm::{Controller, LocalMemory, Topology, UserRegion};
use std::ffi::{c_char, c_int, c_uint, c_ulong, c_void, CStr};

versioned!(
    rsm_create_localmemory_handle,
    rsm_free_interconnect_topology,
    rsm_free_localmemory_handle,
    rsm_get_controller,
    rsm_get_controller_attr,
    rsm_get_interconnect_topology,
    rsm_get_segmentid_range,
    rsm_release_controller,
);

/// `MAXNAMELEN`: the size of the topology's name fields.
pub const MAXNAMELEN: usize = 256;

/// `rsmapi_controller_attr_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct RsmControllerAttr {
    /// `attr_direct_access_sizes`.
    pub direct_access_sizes: c_uint,
    /// `attr_atomic_sizes`.
    pub atomic_sizes: c_uint,
    /// `attr_page_size`.
    pub page_size: usize,
    /// `attr_max_export_segment_size`.
    pub max_export_segment_size: usize,
    /// `attr_tot_export_segment_size`.
    pub tot_export_segment_size: usize,
    /// `attr_max_export_segments`.
    pub max_export_segments: c_ulong,
    /// `attr_max_import_map_size`.
    pub max_import_map_size: usize,
    /// `attr_tot_import_map_size`.
    pub tot_import_map_size: usize,
    /// `attr_max_import_segments`.
    pub max_import_segments: c_ulong,
}

/// `rsm_topology_hdr_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct RsmTopologyHdr {
    /// `local_nodeid`.
    pub local_nodeid: u32,
    /// `local_cntlr_count`.
    pub local_cntlr_count: c_uint,
}

/// `rsm_topology_t` (the `connections` array has `local_cntlr_count` entries).
#[repr(C)]
#[derive(Debug)]
pub struct RsmTopology {
    /// `topology_hdr`.
    pub topology_hdr: RsmTopologyHdr,
    /// `connections[1]`.
    pub connections: [*mut RsmConnections; 1],
}

/// `rsm_connections_hdr_t`.
#[repr(C)]
#[derive(Debug)]
pub struct RsmConnectionsHdr {
    /// `cntlr_name`: type and unit, `remora0`.
    pub cntlr_name: [c_char; MAXNAMELEN],
    /// `local_hwaddr`.
    pub local_hwaddr: u64,
    /// `remote_cntlr_count`.
    pub remote_cntlr_count: c_int,
}

/// `rsm_remote_cntlr_t`.
#[repr(C)]
#[derive(Debug)]
pub struct RsmRemoteCntlr {
    /// `remote_nodeid`.
    pub remote_nodeid: u32,
    /// `remote_cntlrname`.
    pub remote_cntlrname: [c_char; MAXNAMELEN],
    /// `remote_hwaddr`.
    pub remote_hwaddr: u64,
    /// `connection_state` (`RSM_CONNECTION_ACTIVE` while reachable).
    pub connection_state: c_uint,
}

/// `rsm_connections_t` (the `remote_cntlr` array has `remote_cntlr_count` entries).
#[repr(C)]
#[derive(Debug)]
pub struct RsmConnections {
    /// `hdr`.
    pub hdr: RsmConnectionsHdr,
    /// `remote_cntlr[1]`.
    pub remote_cntlr: [RsmRemoteCntlr; 1],
}

/// `RSM_CONNECTION_ACTIVE`.
pub const RSM_CONNECTION_ACTIVE: c_uint = 3;

unsafe extern "C" {
    fn calloc(n: usize, size: usize) -> *mut c_void;
    fn free(p: *mut c_void);
}

pub(crate) fn h(p: *mut c_void) -> usize {
    p as usize
}

pub(crate) fn ptr(h: usize) -> *mut c_void {
    h as *mut c_void
}

/// The region `addr..addr+len` of the caller's memory.
///
/// # Safety
/// The caller of the C function vouches that the memory is its own and stays mapped for
/// the call (and, for an export, for the segment's life), as the man pages require.
pub(crate) unsafe fn region(addr: *mut c_void, len: usize) -> UserRegion {
    // SAFETY: the caller's contract above.
    unsafe { UserRegion::from_raw_parts(addr.cast(), len) }
}

/// `rsm_get_controller`: `remora0`, and the names programs hard-code (`sci0`, `wrsm0`,
/// `loopback0`, `loopback`), open the node's adapter.
///
/// # Safety
/// `name` is NULL or a C string; `controller` NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn rsm_get_controller(
    name: *const c_char,
    controller: *mut *mut c_void,
) -> c_int {
    guard(|| {
        if controller.is_null() {
            return Err(Code(RSMERR_BAD_CTLR_HNDL));
        }
        if name.is_null() {
            return Err(Code(RSMERR_BAD_ADDR));
        }
        // SAFETY: checked non-NULL; a C string by contract.
        let name = unsafe { CStr::from_ptr(name) }.to_str().map_err(|_| Code(RSMERR_CTLR_NOT_PRESENT))?;
        let c = Controller::get(name)?;
        let handle = handles::insert(Entry::Controller(c));
        // SAFETY: checked non-NULL.
        unsafe { *controller = ptr(handle) };
        Ok(())
    })
}

/// `rsm_release_controller`.
///
/// # Safety
/// Any value.
#[no_mangle]
pub unsafe extern "C-unwind" fn rsm_release_controller(controller: *mut c_void) -> c_int {
    guard(|| {
        handles::controller(h(controller))?;
        handles::remove(h(controller));
        Ok(())
    })
}

/// `rsm_get_controller_attr`.
///
/// # Safety
/// `attr` NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn rsm_get_controller_attr(
    controller: *mut c_void,
    attr: *mut RsmControllerAttr,
) -> c_int {
    guard(|| {
        let c = handles::controller(h(controller))?;
        if attr.is_null() {
            return Err(Code(RSMERR_BAD_ADDR));
        }
        let a = c.attr();
        let out = RsmControllerAttr {
            direct_access_sizes: a.direct_access_sizes,
            atomic_sizes: a.atomic_sizes,
            page_size: a.page_size,
            max_export_segment_size: a.max_export_segment_size,
            tot_export_segment_size: a.tot_export_segment_size,
            max_export_segments: a.max_export_segments as c_ulong,
            max_import_map_size: a.max_import_map_size,
            tot_import_map_size: a.tot_import_map_size,
            max_import_segments: a.max_import_segments as c_ulong,
        };
        // SAFETY: checked non-NULL; writable by contract.
        unsafe { attr.write(out) };
        Ok(())
    })
}

fn put_name(dst: &mut [c_char; MAXNAMELEN], name: &str) {
    for (d, s) in dst.iter_mut().zip(name.bytes().take(MAXNAMELEN - 1)) {
        *d = s as c_char;
    }
}

/// `rsm_get_interconnect_topology`: this node and every node it reaches (the nodes of
/// this host and of other hosts whose links are up), each `RSM_CONNECTION_ACTIVE`. Free it
/// with `rsm_free_interconnect_topology`.
///
/// # Safety
/// `topology` NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn rsm_get_interconnect_topology(topology: *mut *mut RsmTopology) -> c_int {
    guard(|| {
        if topology.is_null() {
            return Err(Code(RSMERR_BAD_TOPOLOGY_PTR));
        }
        let ctl = Controller::get("remora0")?;
        let t = Topology::get(&ctl)?;
        let n = t.neighbours.len();
        // One block: the topology, then its one controller's connections.
        let conns_size = std::mem::size_of::<RsmConnections>()
            + n.saturating_sub(1) * std::mem::size_of::<RsmRemoteCntlr>();
        let head = std::mem::size_of::<RsmTopology>().next_multiple_of(8);
        // SAFETY: calloc of a positive size; checked for NULL below.
        let block = unsafe { calloc(1, head + conns_size) }.cast::<u8>();
        if block.is_null() {
            return Err(Code(RSMERR_INSUFFICIENT_MEM));
        }
        // SAFETY: the block is zeroed, large enough for both parts and 8-aligned (malloc);
        // the structs are plain data for which all-zero is valid.
        unsafe {
            let top = block.cast::<RsmTopology>();
            let conns = block.add(head).cast::<RsmConnections>();
            (*top).topology_hdr = RsmTopologyHdr { local_nodeid: t.local_node, local_cntlr_count: 1 };
            (*top).connections[0] = conns;
            put_name(&mut (*conns).hdr.cntlr_name, &t.controller);
            (*conns).hdr.local_hwaddr = u64::from(t.local_node);
            (*conns).hdr.remote_cntlr_count = n as c_int;
            let first = std::ptr::addr_of_mut!((*conns).remote_cntlr).cast::<RsmRemoteCntlr>();
            for (i, nb) in t.neighbours.iter().enumerate() {
                let r = &mut *first.add(i);
                r.remote_nodeid = nb.node;
                put_name(&mut r.remote_cntlrname, &nb.controller);
                r.remote_hwaddr = u64::from(nb.node);
                r.connection_state = if nb.active { RSM_CONNECTION_ACTIVE } else { 0 };
            }
            *topology = top;
        }
        Ok(())
    })
}

/// `rsm_free_interconnect_topology`.
///
/// # Safety
/// NULL or a pointer `rsm_get_interconnect_topology` gave and not freed yet.
#[no_mangle]
pub unsafe extern "C-unwind" fn rsm_free_interconnect_topology(topology: *mut RsmTopology) {
    if !topology.is_null() {
        // SAFETY: one block from calloc, by contract.
        unsafe { free(topology.cast()) };
    }
}

/// `rsm_get_segmentid_range`: the ids the segment-id file reserves for `appid`.
///
/// # Safety
/// `appid` NULL or a C string; `baseid`, `length` NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn rsm_get_segmentid_range(
    appid: *const c_char,
    baseid: *mut u32,
    length: *mut u32,
) -> c_int {
    guard(|| {
        if appid.is_null() || baseid.is_null() || length.is_null() {
            return Err(Code(RSMERR_BAD_ADDR));
        }
        // SAFETY: checked non-NULL; a C string by contract.
        let appid = unsafe { CStr::from_ptr(appid) }.to_string_lossy().into_owned();
        let cfg = remora_config::Config::from_env().map_err(|e| {
            remora_config::report(&e);
            Code(RSMERR_BAD_CONF)
        })?;
        let (base, len) = remora_rsm::segment_id_range(&cfg, &appid)?;
        // SAFETY: checked non-NULL; writable by contract.
        unsafe {
            *baseid = base;
            *length = len;
        }
        Ok(())
    })
}

/// `rsm_create_localmemory_handle`.
///
/// # Safety
/// `vaddr..vaddr+len` is the caller's memory while the handle is used; `handle` NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn rsm_create_localmemory_handle(
    controller: *mut c_void,
    handle: *mut *mut c_void,
    vaddr: *mut c_void,
    len: usize,
) -> c_int {
    guard(|| {
        // Solaris's order: an address that is not page-aligned first, then the handles.
        if !(vaddr as usize).is_multiple_of(remora_sys::page_size()) {
            return Err(Code(RSMERR_BAD_ADDR));
        }
        handles::controller(h(controller))?;
        if handle.is_null() {
            return Err(Code(RSMERR_BAD_LOCALMEM_HNDL));
        }
        // SAFETY: the caller's contract.
        let m = LocalMemory::new(unsafe { region(vaddr, len) })?;
        let k = handles::insert(Entry::LocalMem(m));
        // SAFETY: checked non-NULL.
        unsafe { *handle = ptr(k) };
        Ok(())
    })
}

/// `rsm_free_localmemory_handle`.
///
/// # Safety
/// Any values.
#[no_mangle]
pub unsafe extern "C-unwind" fn rsm_free_localmemory_handle(
    controller: *mut c_void,
    handle: *mut c_void,
) -> c_int {
    guard(|| {
        handles::controller(h(controller))?;
        handles::local_mem(h(handle))?;
        handles::remove(h(handle));
        Ok(())
    })
}
