//! Thread cancellation around the C libraries' entry points.
//!
//! A program may cancel a thread that is inside a library call (`pthread_cancel`), and with
//! asynchronous cancellation the cancel can land at any instruction. Unwinding from there
//! through the library's frames would meet the panic guard of the entry point, which cannot
//! let a forced unwind through, and glibc aborts the whole process ("exception not
//! rethrown"). So each entry point runs its body with cancellation deferred: the library
//! makes raw system calls, none of which is a cancellation point, so no cancel acts inside
//! it. When the body is done, the caller's cancellation type comes back; if it was
//! asynchronous and a cancel is pending, the thread ends right there, at the entry point's
//! outermost frame, with the library's state intact (no lock held, nothing half done).
//!
//! The entry points must therefore be `extern "C-unwind"` functions with no panic guard on
//! the stack at that moment: [`deferred`] is called outside the guard.

#![allow(unsafe_code)] // this file is part of the unsafe layer: every block has a SAFETY comment

use std::ffi::c_int;

const PTHREAD_CANCEL_ENABLE: c_int = 0;
const PTHREAD_CANCEL_DISABLE: c_int = 1;

unsafe extern "C-unwind" {
    fn pthread_setcancelstate(state: c_int, old: *mut c_int) -> c_int;
    fn pthread_testcancel();
}

/// Run `body` with the calling thread's cancellation disabled (so that neither an
/// asynchronous cancel nor a glibc cancellation point the body reaches can act inside it),
/// then restore the caller's state: a pending cancel of an asynchronously cancellable
/// thread acts then (the thread unwinds out of this function); a deferred one waits for the
/// caller's next cancellation point, as it would have without the library.
pub fn deferred<T>(body: impl FnOnce() -> T) -> T {
    let mut old: c_int = PTHREAD_CANCEL_ENABLE;
    // SAFETY: plain libc call with a valid out pointer; disabling never acts on a cancel.
    unsafe { pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &mut old) };
    let out = body();
    if old == PTHREAD_CANCEL_ENABLE {
        // SAFETY: as above. This may act on a pending cancel and unwind out of here (a
        // forced unwind through `C-unwind` frames, with nothing held): `out` is dropped on
        // the way, which is all a cancelled call owes.
        unsafe { pthread_setcancelstate(old, &mut old) };
    }
    out
}

/// A cancellation point for a blocking call that waits in slices: called between slices,
/// outside any panic guard, it ends the thread if a cancel is pending (and enabled), as a
/// blocking system call would.
pub fn point() {
    // SAFETY: plain libc call; it may unwind (forced) out of the caller, which is why it is
    // only called from the entry point's outermost frame.
    unsafe { pthread_testcancel() };
}
