//! The shim's functions (`shim.c`), or stand-ins that fail when libfabric was not found at
//! build time (never called then: every entry point checks [`INSTALLED`] first).

use std::ffi::{c_char, c_int, c_void};

/// The shim's endpoint (`struct rofi`).
pub enum Rofi {}
/// A memory registration (`struct fid_mr`).
pub enum FidMr {}

/// One completion as the shim gives it (`struct rofi_comp`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct RofiComp {
    pub id: u64,
    pub flags: u64,
    pub len: u64,
    pub err: i32,
    pub prov_err: i32,
}

#[cfg(remora_ofi)]
pub const INSTALLED: bool = true;

#[cfg(remora_ofi)]
extern "C" {
    pub fn rofi_load(err: *mut c_char, errlen: usize) -> c_int;
    pub fn rofi_providers(out: *mut c_char, outlen: usize) -> c_int;
    pub fn rofi_open(
        prov: *const c_char,
        node: *const c_char,
        out: *mut *mut Rofi,
        err: *mut c_char,
        errlen: usize,
    ) -> c_int;
    pub fn rofi_close(r: *mut Rofi) -> c_int;
    pub fn rofi_close_ep(r: *mut Rofi) -> c_int;
    pub fn rofi_provider(r: *const Rofi) -> *const c_char;
    pub fn rofi_wait_fd(r: *const Rofi) -> c_int;
    pub fn rofi_mr_mode(r: *const Rofi) -> c_int;
    pub fn rofi_name(r: *const Rofi, buf: *mut c_void, len: *mut usize) -> c_int;
    pub fn rofi_av_insert(r: *mut Rofi, addr: *const c_void, fi_addr: *mut u64) -> c_int;
    pub fn rofi_av_remove(r: *mut Rofi, fi_addr: u64) -> c_int;
    pub fn rofi_recv(r: *mut Rofi, buf: *mut c_void, len: usize, desc: *mut c_void, id: u64) -> c_int;
    pub fn rofi_send(r: *mut Rofi, msg: *const c_void, len: usize, dest: u64, id: u64) -> c_int;
    pub fn rofi_mr_reg(
        r: *mut Rofi,
        buf: *mut c_void,
        len: usize,
        kind: c_int,
        want: u64,
        mr: *mut *mut FidMr,
        key: *mut u64,
        desc: *mut *mut c_void,
    ) -> c_int;
    pub fn rofi_mr_close(mr: *mut FidMr) -> c_int;
    pub fn rofi_write(
        r: *mut Rofi,
        buf: *const c_void,
        len: usize,
        desc: *mut c_void,
        dest: u64,
        addr: u64,
        key: u64,
        id: u64,
    ) -> c_int;
    pub fn rofi_read(
        r: *mut Rofi,
        buf: *mut c_void,
        len: usize,
        desc: *mut c_void,
        dest: u64,
        addr: u64,
        key: u64,
        id: u64,
    ) -> c_int;
    pub fn rofi_cq_read(r: *mut Rofi, out: *mut RofiComp, max: usize) -> c_int;
    pub fn rofi_trywait(r: *mut Rofi) -> c_int;
    pub fn rofi_strerror(rc: c_int) -> *const c_char;
}

#[cfg(not(remora_ofi))]
pub use absent::*;

/// Stand-ins with the shim's signatures for a build without libfabric: each fails with
/// ENOSYS (they are unreachable, as no endpoint can be opened).
#[cfg(not(remora_ofi))]
#[allow(clippy::missing_safety_doc, clippy::too_many_arguments)]
mod absent {
    use super::*;
    pub const INSTALLED: bool = false;
    pub unsafe fn rofi_load(_: *mut c_char, _: usize) -> c_int {
        -1
    }
    const NOSYS: c_int = -38;
    pub unsafe fn rofi_providers(_: *mut c_char, _: usize) -> c_int {
        NOSYS
    }
    pub unsafe fn rofi_open(
        _: *const c_char,
        _: *const c_char,
        _: *mut *mut Rofi,
        _: *mut c_char,
        _: usize,
    ) -> c_int {
        NOSYS
    }
    pub unsafe fn rofi_close(_: *mut Rofi) -> c_int {
        0
    }
    pub unsafe fn rofi_close_ep(_: *mut Rofi) -> c_int {
        0
    }
    pub unsafe fn rofi_provider(_: *const Rofi) -> *const c_char {
        c"none".as_ptr()
    }
    pub unsafe fn rofi_wait_fd(_: *const Rofi) -> c_int {
        -1
    }
    pub unsafe fn rofi_mr_mode(_: *const Rofi) -> c_int {
        0
    }
    pub unsafe fn rofi_name(_: *const Rofi, _: *mut c_void, _: *mut usize) -> c_int {
        NOSYS
    }
    pub unsafe fn rofi_av_insert(_: *mut Rofi, _: *const c_void, _: *mut u64) -> c_int {
        NOSYS
    }
    pub unsafe fn rofi_av_remove(_: *mut Rofi, _: u64) -> c_int {
        NOSYS
    }
    pub unsafe fn rofi_recv(_: *mut Rofi, _: *mut c_void, _: usize, _: *mut c_void, _: u64) -> c_int {
        NOSYS
    }
    pub unsafe fn rofi_send(_: *mut Rofi, _: *const c_void, _: usize, _: u64, _: u64) -> c_int {
        NOSYS
    }
    pub unsafe fn rofi_mr_reg(
        _: *mut Rofi,
        _: *mut c_void,
        _: usize,
        _: c_int,
        _: u64,
        _: *mut *mut FidMr,
        _: *mut u64,
        _: *mut *mut c_void,
    ) -> c_int {
        NOSYS
    }
    pub unsafe fn rofi_mr_close(_: *mut FidMr) -> c_int {
        NOSYS
    }
    pub unsafe fn rofi_write(
        _: *mut Rofi,
        _: *const c_void,
        _: usize,
        _: *mut c_void,
        _: u64,
        _: u64,
        _: u64,
        _: u64,
    ) -> c_int {
        NOSYS
    }
    pub unsafe fn rofi_read(
        _: *mut Rofi,
        _: *mut c_void,
        _: usize,
        _: *mut c_void,
        _: u64,
        _: u64,
        _: u64,
        _: u64,
    ) -> c_int {
        NOSYS
    }
    pub unsafe fn rofi_cq_read(_: *mut Rofi, _: *mut RofiComp, _: usize) -> c_int {
        NOSYS
    }
    pub unsafe fn rofi_trywait(_: *mut Rofi) -> c_int {
        NOSYS
    }
    pub unsafe fn rofi_strerror(_: c_int) -> *const c_char {
        c"libfabric is not installed".as_ptr()
    }
}
