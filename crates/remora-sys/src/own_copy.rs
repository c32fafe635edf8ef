//! Copies between the program's own memory (a [`UserRegion`]) and a [`Mapping`] made by the
//! kernel (`process_vm_readv` / `process_vm_writev` on this very process), for a transfer
//! that the posting thread makes itself where only the caller vouches for the program's
//! memory (`SCIStartDmaTransferMem` to a segment of this host). Memory that is not mapped
//! as it should be fails the copy with `EFAULT`, as the node's engine reports it, instead
//! of faulting the thread; the copy costs one system call and the pinning of the pages.
//!
//! ```
//! use remora_sys::user_memory::UserRegion;
//! use remora_sys::{own_copy, AsFd, Mapping, MapOptions, Memfd};
//! let fd = Memfd::create("own-copy", 4096).unwrap();
//! let map = Mapping::new(fd.as_fd(), 0, 4096, MapOptions::default()).unwrap();
//! let mem: &'static mut [u8] = Box::leak(vec![7u8; 64].into_boxed_slice());
//! let region = UserRegion::from_static(mem);
//! own_copy::region_to_mapping(&region, 0, &map, 100, 64).unwrap();
//! let mut back = [0u8; 64];
//! map.read(100, &mut back).unwrap();
//! assert_eq!(back, [7u8; 64]);
//! ```

#![allow(unsafe_code)] // this file is part of the unsafe layer: every block has a SAFETY comment

use crate::mapping::Mapping;
use crate::user_memory::UserRegion;
use std::io;

/// Copy `len` bytes of `mem` from `mem_off` into `map` at `map_off`.
///
/// # Errors
/// `ERANGE` when either range leaves its memory, `EACCES` on a read-only mapping,
/// `EFAULT` when the program's memory is not readable (the bytes before it were copied).
pub fn region_to_mapping(
    mem: &UserRegion,
    mem_off: usize,
    map: &Mapping,
    map_off: usize,
    len: usize,
) -> io::Result<()> {
    if map.is_readonly() {
        return Err(io::Error::from_raw_os_error(rustix::io::Errno::ACCESS.raw_os_error()));
    }
    move_bytes(mem, mem_off, map, map_off, len, false)
}

/// Copy `len` bytes of `map` from `map_off` into `mem` at `mem_off`.
///
/// # Errors
/// `ERANGE` when either range leaves its memory, `EFAULT` when the program's memory is not
/// writable (the bytes before it were copied).
pub fn mapping_to_region(
    map: &Mapping,
    map_off: usize,
    mem: &UserRegion,
    mem_off: usize,
    len: usize,
) -> io::Result<()> {
    move_bytes(mem, mem_off, map, map_off, len, true)
}

fn move_bytes(
    mem: &UserRegion,
    mem_off: usize,
    map: &Mapping,
    map_off: usize,
    len: usize,
    into_mem: bool,
) -> io::Result<()> {
    let outside = |off: usize, size: usize| off.checked_add(len).is_none_or(|e| e > size);
    if outside(mem_off, mem.len()) || outside(map_off, map.len()) {
        return Err(io::Error::from_raw_os_error(rustix::io::Errno::RANGE.raw_os_error()));
    }
    let pid = std::process::id() as libc::pid_t;
    let mut done = 0;
    while done < len {
        let local = libc::iovec {
            // SAFETY: `map_off + done` is inside the mapping (checked above), which is live
            // for the borrow; the kernel reads or writes it only during the call.
            iov_base: unsafe { map.as_ptr().add(map_off + done) }.cast(),
            iov_len: len - done,
        };
        let remote =
            libc::iovec { iov_base: (mem.addr() + mem_off + done) as *mut libc::c_void, iov_len: len - done };
        // SAFETY: both iovecs live on this stack for the call; the mapping's range is ours
        // and inside it; the program's range is only an address to the kernel, which checks
        // it (`EFAULT`) instead of trusting it.
        let n = unsafe {
            if into_mem {
                libc::process_vm_writev(pid, &local, 1, &remote, 1, 0)
            } else {
                libc::process_vm_readv(pid, &local, 1, &remote, 1, 0)
            }
        };
        match n {
            n if n > 0 => done += n as usize,
            0 => return Err(io::Error::from_raw_os_error(rustix::io::Errno::FAULT.raw_os_error())),
            _ => {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AsFd, MapOptions, Memfd};

    fn map(len: usize) -> Mapping {
        let fd = Memfd::create("own-copy-test", len as u64).unwrap();
        Mapping::new(fd.as_fd(), 0, len, MapOptions::default()).unwrap()
    }

    #[test]
    fn bytes_go_both_ways_and_ranges_are_checked() {
        let m = map(8192);
        let mem: &'static mut [u8] =
            Box::leak((0..5000u32).map(|i| i as u8).collect::<Vec<_>>().into_boxed_slice());
        let region = UserRegion::from_static(mem);
        region_to_mapping(&region, 1000, &m, 3000, 4000).unwrap();
        let mut got = vec![0u8; 4000];
        m.read(3000, &mut got).unwrap();
        assert!(got.iter().enumerate().all(|(i, b)| *b == (i + 1000) as u8));
        m.write(0, &[0xab; 100]).unwrap();
        mapping_to_region(&m, 0, &region, 50, 100).unwrap();
        let mut back = [0u8; 100];
        region.read(50, &mut back).unwrap();
        assert_eq!(back, [0xab; 100]);
        let range = |r: io::Result<()>| r.unwrap_err().raw_os_error();
        assert_eq!(range(region_to_mapping(&region, 4000, &m, 0, 1001)), Some(34));
        assert_eq!(range(mapping_to_region(&m, 8000, &region, 0, 193)), Some(34));
    }

    #[test]
    fn memory_that_is_not_mapped_fails_with_efault_instead_of_faulting() {
        let m = map(4096);
        use rustix::mm::{mmap_anonymous, munmap, MapFlags, ProtFlags};
        // A page reserved without access: never readable or writable by anyone.
        // SAFETY: a new private anonymous mapping at an address the kernel picks.
        let hole =
            unsafe { mmap_anonymous(std::ptr::null_mut(), 4096, ProtFlags::empty(), MapFlags::PRIVATE) }
                .unwrap();
        // SAFETY: only an address and a length; the copies below never touch it themselves.
        let region = unsafe { UserRegion::from_raw_parts(hole.cast(), 4096) };
        let fault = |r: io::Result<()>| r.unwrap_err().raw_os_error();
        assert_eq!(fault(region_to_mapping(&region, 0, &m, 0, 4096)), Some(14));
        assert_eq!(fault(mapping_to_region(&m, 0, &region, 0, 4096)), Some(14));
        // SAFETY: the reservation made above, used by nothing any more.
        unsafe { munmap(hole, 4096) }.unwrap();
    }
}
