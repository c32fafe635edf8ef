//! Signals: post, wait, and the poll descriptors.

#![allow(unsafe_code)] // this file is part of the unsafe layer: every block has a SAFETY comment

use crate::errors::{guard, Code, RSMERR_BAD_ADDR, RSMERR_BAD_SEG_HNDL, RSMERR_INTERRUPTED, RSMERR_TIMEOUT};
use crate::h;
use crate::handles::{self, Entry};
use crate::import::RSM_SIGPOST_NO_ACCUMULATE;
use std::ffi::{c_int, c_short, c_uint, c_ulong, c_void};
use std::os::fd::AsRawFd;
use std::time::Duration;

versioned!(
    rsm_intr_signal_post,
    rsm_intr_signal_wait,
    rsm_intr_signal_wait_pollfd,
    rsm_memseg_get_pollfd,
    rsm_memseg_release_pollfd,
);

/// `struct pollfd`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct PollFd {
    /// `fd`.
    pub fd: c_int,
    /// `events`.
    pub events: c_short,
    /// `revents`.
    pub revents: c_short,
}

const POLLIN: c_short = 0x001;
const POLLRDNORM: c_short = 0x040;

/// `rsm_intr_signal_post`: on an import handle it signals the exporter, on an export
/// handle every importer. `RSM_SIGPOST_NO_ACCUMULATE` drops the post while one is pending.
///
/// # Safety
/// Any values.
#[no_mangle]
pub unsafe extern "C-unwind" fn rsm_intr_signal_post(memseg: *mut c_void, flags: c_uint) -> c_int {
    guard(|| {
        let no_acc = flags & RSM_SIGPOST_NO_ACCUMULATE != 0;
        match handles::get(h(memseg)) {
            Some(Entry::Import(i)) => Ok(i.signal_post(no_acc)?),
            Some(Entry::Export(e)) => Ok(e.signal_post(no_acc)?),
            _ => Err(Code(RSMERR_BAD_SEG_HNDL)),
        }
    })
}

/// `rsm_intr_signal_wait`: wait up to `timeout` ms (−1: forever) for a signal.
///
/// # Safety
/// Any values.
#[no_mangle]
pub unsafe extern "C-unwind" fn rsm_intr_signal_wait(memseg: *mut c_void, timeout: c_int) -> c_int {
    // Waited in slices, each a cancellation point between them (see `remora_sys::cancel`).
    const SLICE: Duration = Duration::from_millis(100);
    let deadline = (timeout >= 0).then(|| std::time::Instant::now() + Duration::from_millis(timeout as u64));
    loop {
        let left = deadline.map(|d| d.saturating_duration_since(std::time::Instant::now()));
        let last = left.is_some_and(|l| l <= SLICE);
        let slice = Some(left.map_or(SLICE, |l| l.min(SLICE)));
        let code = guard(|| match handles::get(h(memseg)) {
            Some(Entry::Import(i)) => Ok(i.signal_wait(slice)?),
            Some(Entry::Export(e)) => Ok(e.signal_wait(slice)?),
            _ => Err(Code(RSMERR_BAD_SEG_HNDL)),
        });
        if code == RSMERR_TIMEOUT && !last {
            remora_sys::cancel::point();
            continue;
        }
        return code;
    }
}

/// `rsm_memseg_get_pollfd`: a descriptor `poll(2)` finds readable while a signal of the
/// segment is pending (the same descriptor for every call on a segment; each call counts).
///
/// # Safety
/// `pollfd` NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn rsm_memseg_get_pollfd(memseg: *mut c_void, pollfd: *mut PollFd) -> c_int {
    guard(|| {
        if pollfd.is_null() {
            return Err(Code(RSMERR_BAD_ADDR));
        }
        let key = h(memseg);
        let entry = handles::get(key);
        let mut table = handles::pollfds().write().unwrap_or_else(|p| p.into_inner());
        let fd = match table.iter_mut().find(|(_, (k, _, _))| *k == key) {
            Some((fd, (_, _, n))) => {
                *n += 1;
                *fd
            }
            None => {
                let owned = match entry {
                    Some(Entry::Import(i)) => i.pollfd()?,
                    Some(Entry::Export(e)) => e.pollfd()?,
                    _ => return Err(Code(RSMERR_BAD_SEG_HNDL)),
                };
                let fd = owned.as_raw_fd();
                table.insert(fd, (key, owned, 1));
                fd
            }
        };
        // SAFETY: checked non-NULL.
        // Solaris asks for POLLRDNORM; the descriptor (an eventfd) reports POLLIN, so both
        // are asked for and `rsm_intr_signal_wait_pollfd` reports both.
        unsafe { pollfd.write(PollFd { fd, events: POLLIN | POLLRDNORM, revents: 0 }) };
        Ok(())
    })
}

/// `rsm_memseg_release_pollfd`: undo one `rsm_memseg_get_pollfd`; the last one closes the
/// descriptor.
///
/// # Safety
/// Any value.
#[no_mangle]
pub unsafe extern "C-unwind" fn rsm_memseg_release_pollfd(memseg: *mut c_void) -> c_int {
    guard(|| {
        let key = h(memseg);
        let mut table = handles::pollfds().write().unwrap_or_else(|p| p.into_inner());
        let Some(fd) = table.iter().find(|(_, (k, _, _))| *k == key).map(|(fd, _)| *fd) else {
            return Err(Code(RSMERR_BAD_SEG_HNDL));
        };
        let last = {
            let e = table.get_mut(&fd).expect("found above");
            e.2 -= 1;
            e.2 == 0
        };
        if last {
            table.remove(&fd);
            match handles::get(key) {
                Some(Entry::Import(i)) => i.release_pollfd()?,
                Some(Entry::Export(e)) => e.release_pollfd()?,
                _ => {}
            }
        }
        Ok(())
    })
}

unsafe extern "C" {
    fn poll(fds: *mut PollFd, nfds: c_ulong, timeout: c_int) -> c_int;
    fn __errno_location() -> *mut c_int;
}

/// `rsm_intr_signal_wait_pollfd`: `poll` on `fds` (any descriptors; those from
/// `rsm_memseg_get_pollfd` have their signal consumed when ready); `*numfdsp` is how many
/// are ready.
///
/// # Safety
/// `fds` NULL or `nfds` read/writable entries; `numfdsp` NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn rsm_intr_signal_wait_pollfd(
    fds: *mut PollFd,
    nfds: c_ulong,
    timeout: c_int,
    numfdsp: *mut c_int,
) -> c_int {
    // Polled in slices, each a cancellation point between them (poll is one); no value
    // with a destructor lives across `cancel::point`.
    const SLICE: Duration = Duration::from_millis(100);
    let deadline = (timeout >= 0)
        .then(|| std::time::Instant::now().checked_add(Duration::from_millis(timeout as u64)))
        .flatten();
    loop {
        let left = deadline.map(|d| d.saturating_duration_since(std::time::Instant::now()));
        let last = left.is_some_and(|l| l <= SLICE);
        // Rounded up: a slice of 0 ms only when the whole wait is 0.
        let ms = left.map_or(SLICE, |l| l.min(SLICE)).as_micros().div_ceil(1000) as c_int;
        // SAFETY: the caller's pointers, passed on under the same contract.
        let code = unsafe { poll_once(fds, nfds, ms, numfdsp) };
        if code == RSMERR_TIMEOUT && !last {
            remora_sys::cancel::point();
            continue;
        }
        return code;
    }
}

/// One slice of [`rsm_intr_signal_wait_pollfd`]: `poll` for up to `ms`.
///
/// # Safety
/// As [`rsm_intr_signal_wait_pollfd`].
unsafe fn poll_once(fds: *mut PollFd, nfds: c_ulong, ms: c_int, numfdsp: *mut c_int) -> c_int {
    guard(|| {
        if fds.is_null() && nfds > 0 {
            return Err(Code(RSMERR_BAD_ADDR));
        }
        // SAFETY: `nfds` entries by contract.
        let n = unsafe { poll(fds, nfds, ms) };
        if n < 0 {
            // SAFETY: glibc's errno location is valid for the calling thread.
            let e = unsafe { *__errno_location() };
            return Err(Code(if e == rustix::io::Errno::INTR.raw_os_error() {
                RSMERR_INTERRUPTED
            } else {
                RSMERR_BAD_ADDR
            }));
        }
        if !numfdsp.is_null() {
            // SAFETY: checked non-NULL.
            unsafe { *numfdsp = n };
        }
        if n == 0 {
            return Err(Code(RSMERR_TIMEOUT));
        }
        // SAFETY: `nfds` entries by contract.
        let list = unsafe { std::slice::from_raw_parts_mut(fds, nfds as usize) };
        let table = handles::pollfds().read().unwrap_or_else(|p| p.into_inner());
        for p in list.iter_mut().filter(|p| p.revents & (POLLIN | POLLRDNORM) != 0) {
            if let Some((key, _, _)) = table.get(&p.fd) {
                p.revents |= POLLRDNORM & p.events;
                match handles::get(*key) {
                    Some(Entry::Import(i)) => {
                        i.signal_take();
                    }
                    Some(Entry::Export(e)) => {
                        e.signal_take();
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    })
}
