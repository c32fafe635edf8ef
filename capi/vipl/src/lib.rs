//! `libvipl.so`: the VI Provider Library of the Virtual Interface Architecture 1.0, as a C
//! ABI over Remora's safe Rust API (`remora-vipl`). C programs written for M-VIA or cLAN
//! include Remora's `<vipl.h>` and link with `-lvipl`.
//!
//! ```no_run
//! // Rust code may call the same functions through the rlib:
//! let mut nic: *mut std::ffi::c_void = std::ptr::null_mut();
//! let name = std::ffi::CString::new("/dev/via0").unwrap();
//! assert_eq!(unsafe { vipl::VipOpenNic(name.as_ptr(), &mut nic) }, 0);
//! assert_eq!(unsafe { vipl::VipCloseNic(nic) }, 0);
//! ```
//!
//! # How calls are made safe
//!
//! * **Handles are numbers** in a table (`handles.rs`), never pointers the library
//!   dereferences: NULL, stale or wrong-kind handles give `VIP_INVALID_PARAMETER`.
//! * **Errors** come from one table (`errors::code_of`).
//! * **No unwinding into C.** Every entry point runs its body under `catch_unwind`, with
//!   thread cancellation deferred; waits are sliced, a cancellation point between slices.
//!   One wait is not: `VipConnectAccept` across hosts holds cancellation off while it waits
//!   for the requester's dial of the pair's stream and its confirmation, up to 9 s.
//! * **Pointers from the caller** are checked for NULL and used only for the sizes the
//!   call names; descriptors and buffers are reached only inside registered memory.

#![allow(unsafe_code)] // this crate is part of the unsafe layer: every block has a SAFETY comment

mod data;
mod errors;
mod handles;
mod vi;

pub use data::*;
pub use errors::*;
pub use vi::*;

use errors::guard;
use handles::Entry;
use remora_vipl::{MemAttributes, Nic, ProtectionTag, UserRegion};
use std::ffi::{c_char, c_int, c_ulong, c_void, CStr};
use std::time::Duration;

/// `VIP_NIC_ATTRIBUTES`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct VipNicAttributes {
    /// `Name`.
    pub name: [c_char; 64],
    /// `HardwareVersion`.
    pub hardware_version: c_ulong,
    /// `ProviderVersion`.
    pub provider_version: c_ulong,
    /// `NicAddressLen`.
    pub nic_address_len: u16,
    /// `LocalNicAddress`.
    pub local_nic_address: *const u8,
    /// `ThreadSafe`.
    pub thread_safe: c_int,
    /// `MaxDiscriminatorLen`.
    pub max_discriminator_len: u16,
    /// `MaxRegisterBytes`.
    pub max_register_bytes: c_ulong,
    /// `MaxRegisterRegions`.
    pub max_register_regions: c_ulong,
    /// `MaxRegisterBlockBytes`.
    pub max_register_block_bytes: c_ulong,
    /// `MaxVI`.
    pub max_vi: c_ulong,
    /// `MaxDescriptorsPerQueue`.
    pub max_descriptors_per_queue: c_ulong,
    /// `MaxSegmentsPerDesc`.
    pub max_segments_per_desc: c_ulong,
    /// `MaxCQ`.
    pub max_cq: c_ulong,
    /// `MaxCQEntries`.
    pub max_cq_entries: c_ulong,
    /// `MaxTransferSize`.
    pub max_transfer_size: c_ulong,
    /// `NativeMTU`.
    pub native_mtu: c_ulong,
    /// `MaxPtags`.
    pub max_ptags: c_ulong,
    /// `ReliabilityLevelSupport`.
    pub reliability_level_support: u16,
    /// `RDMAReadSupport`.
    pub rdma_read_support: u16,
}

/// `VIP_MEM_ATTRIBUTES`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct VipMemAttributes {
    /// `Ptag`.
    pub ptag: *mut c_void,
    /// `EnableRdmaWrite`.
    pub enable_rdma_write: c_int,
    /// `EnableRdmaRead`.
    pub enable_rdma_read: c_int,
}

/// `VIP_ERROR_DESCRIPTOR`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct VipErrorDescriptor {
    /// `NicHandle`.
    pub nic: *mut c_void,
    /// `ViHandle`.
    pub vi: *mut c_void,
    /// `CQHandle`.
    pub cq: *mut c_void,
    /// `DescriptorPtr`.
    pub descriptor: *mut c_void,
    /// `OpCode`.
    pub opcode: c_ulong,
    /// `ResourceCode`.
    pub resource: u32,
    /// `ErrorCode`.
    pub error: u32,
}

/// `VIP_AUTODISCOVERY_LIST`.
#[repr(C)]
#[derive(Debug)]
pub struct VipAutodiscoveryList {
    /// `NumberOfHops`.
    pub hops: c_ulong,
    /// `ADAddrArray`.
    pub addrs: *mut *mut u8,
    /// `NumAdAddrs`.
    pub count: c_ulong,
}

/// A C timeout in milliseconds; `VIP_INFINITE` (or anything at 0xFFFFFFFF or above) is none.
pub(crate) fn timeout(ms: c_ulong) -> Option<Duration> {
    (ms < 0xFFFF_FFFF).then(|| Duration::from_millis(ms))
}

pub(crate) fn bad() -> Code {
    Code(VIP_INVALID_PARAMETER)
}

/// Read a `VIP_NET_ADDRESS`: (host address, discriminator).
///
/// # Safety
/// `a` is NULL or points to an address laid out as `vipl.h` says.
pub(crate) unsafe fn read_address(a: *const u8) -> Result<remora_vipl::NetAddress, Code> {
    if a.is_null() {
        return Err(bad());
    }
    // SAFETY: the caller's address starts with two 16-bit lengths, then that many bytes.
    unsafe {
        let hl = usize::from(std::ptr::read_unaligned(a as *const u16));
        let dl = usize::from(std::ptr::read_unaligned(a.add(2) as *const u16));
        if hl > 64 || dl > 1024 {
            return Err(bad());
        }
        let host = std::slice::from_raw_parts(a.add(4), hl).to_vec();
        let disc = std::slice::from_raw_parts(a.add(4 + hl), dl).to_vec();
        Ok(remora_vipl::NetAddress { host, disc })
    }
}

/// Write a `VIP_NET_ADDRESS`: the host part always, the discriminator when given.
///
/// # Safety
/// `a` points to room for the header, the host address and the discriminator.
pub(crate) unsafe fn write_address(a: *mut u8, host: &[u8], disc: Option<&[u8]>) {
    // SAFETY: the caller's buffer holds the header and both parts (VIA's contract: it is
    // allocated for the NIC address length and the longest discriminator).
    unsafe {
        std::ptr::write_unaligned(a as *mut u16, host.len() as u16);
        std::ptr::copy_nonoverlapping(host.as_ptr(), a.add(4), host.len());
        if let Some(d) = disc {
            std::ptr::write_unaligned(a.add(2) as *mut u16, d.len() as u16);
            std::ptr::copy_nonoverlapping(d.as_ptr(), a.add(4 + host.len()), d.len());
        }
    }
}

/// The NIC address bytes of each node, kept for `LocalNicAddress` pointers.
fn address_of(node: u32) -> *const u8 {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static ADDRS: OnceLock<Mutex<HashMap<u32, &'static [u8; 4]>>> = OnceLock::new();
    let mut m = ADDRS.get_or_init(Default::default).lock().unwrap_or_else(|p| p.into_inner());
    m.entry(node).or_insert_with(|| Box::leak(Box::new(node.to_be_bytes()))).as_ptr()
}

/// `VipOpenNic`.
///
/// # Safety
/// `name` is NULL or a C string; `nic` is NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn VipOpenNic(name: *const c_char, nic: *mut *mut c_void) -> u32 {
    guard(|| {
        if name.is_null() || nic.is_null() {
            return Err(bad());
        }
        // SAFETY: a C string by contract.
        let name = unsafe { CStr::from_ptr(name) }.to_str().map_err(|_| bad())?;
        let n = Nic::open(name)?;
        let h = handles::insert(Entry::Nic(n)).ok_or(handles::FULL)?;
        // SAFETY: checked non-NULL; writable by contract.
        unsafe { *nic = h };
        Ok(())
    })
}

/// `VipCloseNic`.
///
/// # Safety
/// Any value.
#[no_mangle]
pub unsafe extern "C-unwind" fn VipCloseNic(nic: *mut c_void) -> u32 {
    guard(|| match handles::get(nic) {
        Some(Entry::Nic(_)) => {
            handles::remove(nic);
            Ok(())
        }
        _ => Err(bad()),
    })
}

/// `VipQueryNic`.
///
/// # Safety
/// `attrs` is NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn VipQueryNic(nic: *mut c_void, attrs: *mut VipNicAttributes) -> u32 {
    guard(|| {
        let n = handles::nic(nic)?;
        if attrs.is_null() {
            return Err(bad());
        }
        let a = n.attributes();
        let mut name = [0 as c_char; 64];
        for (d, s) in name.iter_mut().zip(a.name.bytes().take(63)) {
            *d = s as c_char;
        }
        let out = VipNicAttributes {
            name,
            hardware_version: 1,
            provider_version: 0x0001_0000,
            nic_address_len: 4,
            local_nic_address: address_of(n.node()),
            thread_safe: 1,
            max_discriminator_len: a.max_discriminator_len,
            max_register_bytes: a.max_register_bytes as c_ulong,
            max_register_regions: a.max_register_regions as c_ulong,
            max_register_block_bytes: a.max_register_bytes as c_ulong,
            max_vi: a.max_vi as c_ulong,
            max_descriptors_per_queue: a.max_descriptors_per_queue as c_ulong,
            max_segments_per_desc: a.max_segments_per_desc as c_ulong,
            max_cq: a.max_cq as c_ulong,
            max_cq_entries: a.max_cq_entries as c_ulong,
            max_transfer_size: a.max_transfer_size as c_ulong,
            native_mtu: a.native_mtu as c_ulong,
            max_ptags: a.max_ptags as c_ulong,
            reliability_level_support: a.reliability_levels,
            rdma_read_support: a.rdma_read_levels,
        };
        // SAFETY: checked non-NULL; writable by contract.
        unsafe { attrs.write(out) };
        Ok(())
    })
}

/// `VipQuerySystemManagementInfo`: `VIP_SMI_AUTODISCOVERY` lists the nodes this NIC knows
/// (this node, then the other nodes of the cluster file in its order) into the first
/// `NumAdAddrs` entries of `ADAddrArray`, each a host address of 4 bytes without a
/// discriminator, and sets `NumAdAddrs` to how many it wrote; `NumberOfHops` is not used.
/// Another `InfoType`, a NULL `SysManInfo`, a NULL array with `NumAdAddrs` above 0, or a
/// NULL entry among those it would fill is `VIP_INVALID_PARAMETER`, with nothing written.
///
/// # Safety
/// `info` is NULL or a `VIP_AUTODISCOVERY_LIST` whose array holds `NumAdAddrs` addresses
/// with room for a 4-byte host address each.
#[no_mangle]
pub unsafe extern "C-unwind" fn VipQuerySystemManagementInfo(
    nic: *mut c_void,
    kind: c_ulong,
    info: *mut c_void,
) -> u32 {
    guard(|| {
        let n = handles::nic(nic)?;
        if kind != 1 || info.is_null() {
            return Err(bad());
        }
        // SAFETY: by contract a writable list.
        let list = unsafe { &mut *(info as *mut VipAutodiscoveryList) };
        let nodes = n.known_nodes();
        let fill = nodes.len().min(usize::try_from(list.count).unwrap_or(usize::MAX));
        if fill > 0 && list.addrs.is_null() {
            return Err(bad());
        }
        let mut entries = Vec::with_capacity(fill);
        for i in 0..fill {
            // SAFETY: the array has `count` entries by contract, and `i` < `count`.
            let a = unsafe { *list.addrs.add(i) };
            if a.is_null() {
                return Err(bad());
            }
            entries.push(a);
        }
        for (a, node) in entries.into_iter().zip(&nodes) {
            // SAFETY: each entry has room for the header and 4 bytes, by contract.
            unsafe { write_address(a, &node.to_be_bytes(), Some(&[])) };
        }
        list.count = fill as c_ulong;
        Ok(())
    })
}

/// `VipErrorCallback`: NULL `handler` restores the default (quiet).
///
/// # Safety
/// `handler` is NULL or a function that may be called from another thread.
#[no_mangle]
pub unsafe extern "C-unwind" fn VipErrorCallback(
    nic: *mut c_void,
    context: *mut c_void,
    handler: Option<unsafe extern "C" fn(*mut c_void, *mut VipErrorDescriptor)>,
) -> u32 {
    guard(|| {
        let n = handles::nic(nic)?;
        let Some(f) = handler else {
            n.set_error_handler(None);
            return Ok(());
        };
        let ctx = context as usize;
        let nic_h = nic as usize;
        n.set_error_handler(Some(std::sync::Arc::new(move |e: &remora_vipl::ErrorEvent| {
            let mut d = VipErrorDescriptor {
                nic: nic_h as *mut c_void,
                vi: e.vi.as_ref().map_or(std::ptr::null_mut(), handles::vi_handle),
                cq: e.cq.as_ref().map_or(std::ptr::null_mut(), handles::cq_handle),
                descriptor: e.descriptor.unwrap_or(0) as *mut c_void,
                opcode: e.opcode as c_ulong,
                resource: e.resource,
                error: e.code as u32,
            };
            // SAFETY: the program's handler, with its context and a descriptor that lives
            // for the call.
            unsafe { f(ctx as *mut c_void, &mut d) };
        })));
        Ok(())
    })
}

/// `VipCreatePtag`.
///
/// # Safety
/// `ptag` is NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn VipCreatePtag(nic: *mut c_void, ptag: *mut *mut c_void) -> u32 {
    guard(|| {
        let n = handles::nic(nic)?;
        if ptag.is_null() {
            return Err(bad());
        }
        // SAFETY: checked non-NULL; writable by contract.
        unsafe { *ptag = n.create_ptag().0 as *mut c_void };
        Ok(())
    })
}

/// `VipDestroyPtag`.
///
/// # Safety
/// Any values.
#[no_mangle]
pub unsafe extern "C-unwind" fn VipDestroyPtag(nic: *mut c_void, ptag: *mut c_void) -> u32 {
    guard(|| Ok(handles::nic(nic)?.destroy_ptag(ProtectionTag(ptag as u64))?))
}

fn mem_attrs(a: *const VipMemAttributes) -> Result<MemAttributes, Code> {
    if a.is_null() {
        return Err(bad());
    }
    // SAFETY: checked non-NULL; readable by contract.
    let a = unsafe { a.read() };
    Ok(MemAttributes {
        ptag: ProtectionTag(a.ptag as u64),
        rdma_write: a.enable_rdma_write != 0,
        rdma_read: a.enable_rdma_read != 0,
    })
}

/// `VipRegisterMem`: any memory of the program, at any alignment.
///
/// # Safety
/// `addr..addr+len` is memory of the program that stays mapped while registered; the
/// pointers are NULL or valid.
#[no_mangle]
pub unsafe extern "C-unwind" fn VipRegisterMem(
    nic: *mut c_void,
    addr: *mut c_void,
    len: c_ulong,
    attrs: *const VipMemAttributes,
    handle: *mut u32,
) -> u32 {
    guard(|| {
        let n = handles::nic(nic)?;
        let a = mem_attrs(attrs)?;
        if addr.is_null() || len == 0 || handle.is_null() {
            return Err(bad());
        }
        // SAFETY: the program hands this memory over for as long as it is registered
        // (VIA's contract for VipRegisterMem).
        let region = unsafe { UserRegion::from_raw_parts(addr as *mut u8, len as usize) };
        let h = n.register(region, a)?;
        // SAFETY: checked non-NULL; writable by contract.
        unsafe { *handle = h };
        Ok(())
    })
}

/// `VipDeregisterMem`.
///
/// # Safety
/// Any values.
#[no_mangle]
pub unsafe extern "C-unwind" fn VipDeregisterMem(nic: *mut c_void, addr: *mut c_void, handle: u32) -> u32 {
    guard(|| Ok(handles::nic(nic)?.deregister(addr as usize, handle)?))
}

/// `VipQueryMem`.
///
/// # Safety
/// `attrs` is NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn VipQueryMem(
    nic: *mut c_void,
    addr: *mut c_void,
    handle: u32,
    attrs: *mut VipMemAttributes,
) -> u32 {
    guard(|| {
        let a = handles::nic(nic)?.query_mem(addr as usize, handle)?;
        if attrs.is_null() {
            return Err(bad());
        }
        let out = VipMemAttributes {
            ptag: a.ptag.0 as *mut c_void,
            enable_rdma_write: a.rdma_write.into(),
            enable_rdma_read: a.rdma_read.into(),
        };
        // SAFETY: checked non-NULL; writable by contract.
        unsafe { attrs.write(out) };
        Ok(())
    })
}

/// `VipSetMemAttributes`.
///
/// # Safety
/// `attrs` is NULL or readable.
#[no_mangle]
pub unsafe extern "C-unwind" fn VipSetMemAttributes(
    nic: *mut c_void,
    addr: *mut c_void,
    handle: u32,
    attrs: *const VipMemAttributes,
) -> u32 {
    guard(|| Ok(handles::nic(nic)?.set_mem_attributes(addr as usize, handle, mem_attrs(attrs)?)?))
}

/// `VipNSInit`.
///
/// # Safety
/// Any values.
#[no_mangle]
pub unsafe extern "C-unwind" fn VipNSInit(nic: *mut c_void, _info: *mut c_void) -> u32 {
    guard(|| {
        handles::nic(nic)?.ns_init();
        Ok(())
    })
}

/// `VipNSShutdown`.
///
/// # Safety
/// Any value.
#[no_mangle]
pub unsafe extern "C-unwind" fn VipNSShutdown(nic: *mut c_void) -> u32 {
    guard(|| {
        handles::nic(nic)?.ns_shutdown();
        Ok(())
    })
}

/// `VipNSGetHostByName`: fills the address's host part (length and bytes).
///
/// # Safety
/// `name` is NULL or a C string; `addr` is NULL or has room for a 4-byte host address.
#[no_mangle]
pub unsafe extern "C-unwind" fn VipNSGetHostByName(
    nic: *mut c_void,
    name: *const c_char,
    addr: *mut u8,
    _index: c_ulong,
) -> u32 {
    guard(|| {
        let n = handles::nic(nic)?;
        if name.is_null() || addr.is_null() {
            return Err(bad());
        }
        // SAFETY: a C string by contract.
        let name = unsafe { CStr::from_ptr(name) }.to_string_lossy().into_owned();
        let host = n.host_by_name(&name)?;
        // SAFETY: room for the host part by contract.
        unsafe { write_address(addr, &host, None) };
        Ok(())
    })
}

/// `VipNSGetHostByAddr`: `*len` is the buffer's size in, the name's length out.
///
/// # Safety
/// `addr` is NULL or an address; `name` is NULL or has `*len` bytes; `len` is NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn VipNSGetHostByAddr(
    nic: *mut c_void,
    addr: *const u8,
    name: *mut c_char,
    len: *mut c_ulong,
) -> u32 {
    guard(|| {
        let n = handles::nic(nic)?;
        // SAFETY: NULL or an address, by contract.
        let a = unsafe { read_address(addr) }?;
        if name.is_null() || len.is_null() {
            return Err(bad());
        }
        let s = n.host_by_addr(&a.host)?;
        // SAFETY: checked non-NULL.
        let room = unsafe { *len } as usize;
        if room < s.len() + 1 {
            return Err(Code(VIP_ERROR_RESOURCE));
        }
        // SAFETY: `room` bytes by contract; the name and its NUL fit.
        unsafe {
            std::ptr::copy_nonoverlapping(s.as_ptr(), name as *mut u8, s.len());
            *name.add(s.len()) = 0;
            *len = (s.len() + 1) as c_ulong;
        }
        Ok(())
    })
}
