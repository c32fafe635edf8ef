//! The one table from the safe API's errors to errno values, and the guard every entry
//! point runs in (errno set, no panic reaches C).

#![allow(unsafe_code)] // this file is part of the unsafe layer: every block has a SAFETY comment
use remora_scif::Error;
use std::ffi::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// The errno of a safe-API error: the crate's single mapping table.
pub(crate) fn errno_of(e: &Error) -> c_int {
    use rustix::io::Errno;
    let e = match e {
        Error::BadEndpoint => Errno::BADF,
        Error::Invalid(_) => Errno::INVAL,
        Error::IsConnected => Errno::ISCONN,
        Error::NotConnected => Errno::NOTCONN,
        Error::Refused => Errno::CONNREFUSED,
        Error::Reset => Errno::CONNRESET,
        Error::NoDevice => Errno::NODEV,
        Error::AddrInUse => Errno::ADDRINUSE,
        Error::Again => Errno::AGAIN,
        Error::Access => Errno::ACCESS,
        Error::Permission => Errno::PERM,
        Error::NoWindow => Errno::NXIO,
        Error::Fault => Errno::FAULT,
        Error::NoSpace => Errno::NOSPC,
        Error::NoMemory(_) => Errno::NOMEM,
        Error::InProgress => Errno::INPROGRESS,
        Error::Interrupted => Errno::INTR,
        Error::NotSupported(_) => Errno::OPNOTSUPP,
    };
    e.raw_os_error()
}

unsafe extern "C" {
    fn __errno_location() -> *mut c_int;
}

/// Set the calling thread's errno.
pub(crate) fn set_errno(v: c_int) {
    // SAFETY: glibc's errno location is a valid thread-local int for the calling thread.
    unsafe { *__errno_location() = v };
}

/// Run an entry point's body: `Ok` values pass through; an error sets errno and returns
/// `fail`; a panic is caught, sets `ENOMEM` (the library could not do it) and returns
/// `fail`.
pub(crate) fn guard<T: Copy>(fail: T, body: impl FnOnce() -> Result<T, Error>) -> T {
    remora_sys::cancel::deferred(|| guard_now(fail, body))
}

fn guard_now<T: Copy>(fail: T, body: impl FnOnce() -> Result<T, Error>) -> T {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => {
            set_errno(errno_of(&e));
            fail
        }
        Err(_) => {
            set_errno(rustix::io::Errno::NOMEM.raw_os_error());
            fail
        }
    }
}

/// An `EINVAL` error with a reason.
pub(crate) fn inval(why: &str) -> Error {
    Error::Invalid(why.into())
}

/// The longest one slice of a blocking call sleeps before the calling thread may be
/// cancelled (the wait then goes on in a new slice).
pub(crate) const SLICE: std::time::Duration = std::time::Duration::from_millis(100);

/// The rest of a blocking transfer of `len` bytes (`scif_send`, `scif_recv` with the
/// blocking flag) whose first slice moved `done`, as a cancellation point: `slice(done)`
/// moves bytes from offset `done` on, sleeping at
/// most [`SLICE`], and returns how many it moved (or -1, errno set); between two slices, at
/// the entry point's outermost frame and outside the guard, a pending cancel of the thread
/// acts, as in a blocking system call. An error after some bytes moved returns their
/// count, as one blocking call does.
pub(crate) fn in_slices(done: usize, len: usize, mut slice: impl FnMut(usize) -> c_int) -> c_int {
    let mut done = done;
    loop {
        remora_sys::cancel::point();
        let r = slice(done);
        if r < 0 {
            return if done > 0 { done as c_int } else { r };
        }
        done += r as usize;
        if done >= len {
            return done as c_int;
        }
    }
}
