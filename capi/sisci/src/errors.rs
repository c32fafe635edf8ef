//! Error codes: the one table from the safe API's errors to `SCI_ERR_*` values, the
//! descriptions `SCIGetErrorString` returns, and the guard every entry point runs in.

#![allow(unsafe_code)] // this file is part of the unsafe layer: every block has a SAFETY comment
use crate::consts::*;
use crate::types::sci_error_t;
use remora_sisci::Error;
use std::ffi::{c_char, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::NonNull;

/// A failed call: the `SCI_ERR_*` code it reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fail(pub(crate) sci_error_t);

impl From<Error> for Fail {
    fn from(e: Error) -> Fail {
        Fail(code(&e))
    }
}

/// What an entry point's body returns: the value, or the code to report.
pub(crate) type Outcome<T> = Result<T, Fail>;

/// The vendor code of a safe-API error: the crate's single mapping table.
pub(crate) fn code(e: &Error) -> sci_error_t {
    match e {
        Error::Busy => SCI_ERR_BUSY,
        Error::IllegalOperation => SCI_ERR_ILLEGAL_OPERATION,
        Error::NotPrepared => SCI_ERR_SEGMENT_NOT_PREPARED,
        Error::NoSuchSegment => SCI_ERR_NO_SUCH_SEGMENT,
        Error::SegmentIdUsed => SCI_ERR_SEGMENTID_USED,
        Error::NoSuchNode => SCI_ERR_NO_SUCH_NODEID,
        Error::NoSuchAdapter => SCI_ERR_NO_SUCH_ADAPTERNO,
        Error::Timeout => SCI_ERR_TIMEOUT,
        Error::OutOfRange => SCI_ERR_OUT_OF_RANGE,
        Error::NotConnected => SCI_ERR_NOT_CONNECTED,
        Error::IllegalParameter(_) => SCI_ERR_ILLEGAL_PARAMETER,
        Error::IllegalFlag(_) => SCI_ERR_ILLEGAL_FLAG,
        Error::IllegalAddress => SCI_ERR_ILLEGAL_ADDRESS,
        Error::SizeAlignment => SCI_ERR_SIZE_ALIGNMENT,
        Error::OffsetAlignment => SCI_ERR_OFFSET_ALIGNMENT,
        Error::NoSpace => SCI_ERR_NOSPC,
        Error::Access => SCI_ERR_ACCESS,
        Error::NotInitialized => SCI_ERR_NOT_INITIALIZED,
        Error::NotSupported => SCI_ERR_NOT_SUPPORTED,
        Error::IllegalQuery => SCI_ERR_ILLEGAL_QUERY,
        Error::NodeNotResponding => SCI_ERR_NODE_NOT_RESPONDING,
        Error::InconsistentVersions(_) => SCI_ERR_INCONSISTENT_VERSIONS,
        Error::TransferFailed => SCI_ERR_TRANSFER_FAILED,
        Error::IntnoUsed => SCI_ERR_INTNO_USED,
        Error::NoSuchIntno => SCI_ERR_NO_SUCH_INTNO,
        Error::Cancelled => SCI_ERR_CANCELLED,
        Error::MaxEntries => SCI_ERR_MAX_ENTRIES,
        Error::CondIntRace => SCI_ERR_COND_INT_RACE_PROBLEM,
        Error::Overflow => SCI_ERR_OVERFLOW,
        Error::System(_) => SCI_ERR_SYSTEM,
    }
}

/// A static description of `code`; `None` for a value that is no `SCI_ERR_*` code.
///
/// Codes that share a value (`NO_SUCH_SEGMENT`/`NO_SUCH_INTNO`,
/// `EWOULD_BLOCK`/`REMOTE_BUSY`) share a description naming both meanings.
pub(crate) fn description(code: sci_error_t) -> Option<&'static CStr> {
    Some(match code {
        SCI_ERR_OK => c"OK",
        SCI_ERR_BUSY => c"Resource busy: dependent resources exist",
        SCI_ERR_FLAG_NOT_IMPLEMENTED => c"Flag not implemented",
        SCI_ERR_ILLEGAL_FLAG => c"Illegal flag",
        SCI_ERR_NOSPC => c"Out of resources",
        SCI_ERR_API_NOSPC => c"Out of resources in the API library",
        SCI_ERR_HW_NOSPC => c"Out of adapter resources",
        SCI_ERR_NOT_IMPLEMENTED => c"Not implemented",
        SCI_ERR_ILLEGAL_ADAPTERNO => c"Illegal adapter number",
        SCI_ERR_NO_SUCH_ADAPTERNO => c"No such adapter",
        SCI_ERR_TIMEOUT => c"Timeout",
        SCI_ERR_OUT_OF_RANGE => c"Out of range",
        SCI_ERR_NO_SUCH_SEGMENT => c"No such segment (or no such interrupt number)",
        SCI_ERR_ILLEGAL_NODEID => c"Illegal node id",
        SCI_ERR_CONNECTION_REFUSED => c"Connection refused",
        SCI_ERR_SEGMENT_NOT_CONNECTED => c"Segment not connected",
        SCI_ERR_SIZE_ALIGNMENT => c"Size not aligned",
        SCI_ERR_OFFSET_ALIGNMENT => c"Offset not aligned",
        SCI_ERR_ILLEGAL_PARAMETER => c"Illegal parameter",
        SCI_ERR_MAX_ENTRIES => c"Maximum number of entries reached",
        SCI_ERR_SEGMENT_NOT_PREPARED => c"Segment not prepared",
        SCI_ERR_ILLEGAL_ADDRESS => c"Illegal address",
        SCI_ERR_ILLEGAL_OPERATION => c"Illegal operation in the current state",
        SCI_ERR_ILLEGAL_QUERY => c"Illegal query",
        SCI_ERR_SEGMENTID_USED => c"Segment id already in use",
        SCI_ERR_SYSTEM => c"System error",
        SCI_ERR_CANCELLED => c"Cancelled",
        SCI_ERR_NOT_CONNECTED => c"Not connected",
        SCI_ERR_NOT_AVAILABLE => c"Not available",
        SCI_ERR_INCONSISTENT_VERSIONS => c"Inconsistent library and daemon versions",
        SCI_ERR_COND_INT_RACE_PROBLEM => c"Conditional interrupt race",
        SCI_ERR_OVERFLOW => c"Counter overflow",
        SCI_ERR_NOT_INITIALIZED => c"SCIInitialize has not been called",
        SCI_ERR_ACCESS => c"Access denied",
        SCI_ERR_NOT_SUPPORTED => c"Not supported (needs interconnect hardware)",
        SCI_ERR_DEPRECATED => c"Deprecated",
        SCI_ERR_DMA_NOT_AVAILABLE => c"DMA not available",
        SCI_ERR_DMA_DISABLED => c"DMA disabled",
        SCI_ERR_INTNO_USED => c"Interrupt number already in use",
        SCI_ERR_NO_SUCH_FDID => c"No such fabric device id",
        SCI_ERR_NO_SUCH_NODEID => c"No such node id",
        SCI_ERR_NODE_NOT_RESPONDING => c"Node not responding",
        SCI_ERR_NO_REMOTE_LINK_ACCESS => c"No remote link access",
        SCI_ERR_NO_LINK_ACCESS => c"No link access",
        SCI_ERR_TRANSFER_FAILED => c"Transfer failed",
        SCI_ERR_EWOULD_BLOCK => c"Operation would block (or remote side busy)",
        SCI_ERR_SEMAPHORE_COUNT_EXCEEDED => c"Semaphore count exceeded",
        SCI_ERR_IRQL_ILLEGAL => c"Illegal interrupt request level",
        SCI_ERR_LOCAL_BUSY => c"Local side busy",
        SCI_ERR_ALL_BUSY => c"Local and remote sides busy",
        _ => return None,
    })
}

/// The description of an unknown code.
pub(crate) const UNKNOWN_ERROR: &CStr = c"Unknown error";

/// A C `sci_error_t *error` argument: where a call reports its status (NULL: nowhere).
#[derive(Debug)]
pub(crate) struct ErrorOut(*mut sci_error_t);

impl ErrorOut {
    /// Wrap a caller's `error` argument.
    ///
    /// # Safety
    /// `error` is NULL or points to memory writable for one `sci_error_t` for the rest of
    /// the call.
    pub(crate) unsafe fn new(error: *mut sci_error_t) -> ErrorOut {
        ErrorOut(error)
    }

    /// Store `status`, unless the pointer is NULL (or misaligned, which no valid pointer
    /// is).
    fn set(&self, status: sci_error_t) {
        if !self.0.is_null() && self.0.is_aligned() {
            // SAFETY: non-NULL and aligned; `new`'s caller guaranteed it is writable for
            // the duration of the call we are in.
            unsafe { self.0.write(status) };
        }
    }
}

/// Run the body of an entry point: catch any panic (reported as `SCI_ERR_SYSTEM`), store
/// the status through `error`, and return the body's value, or `fail` when the body
/// failed.
pub(crate) fn run<T>(error: ErrorOut, fail: T, body: impl FnOnce() -> Outcome<T>) -> T {
    remora_sys::cancel::deferred(|| run_now(error, fail, body))
}

fn run_now<T>(error: ErrorOut, fail: T, body: impl FnOnce() -> Outcome<T>) -> T {
    let (value, status) = match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(v)) => (v, SCI_ERR_OK),
        Ok(Err(Fail(c))) => (fail, c),
        Err(_) => (fail, SCI_ERR_SYSTEM),
    };
    error.set(status);
    value
}

/// A blocking wait as a cancellation point: `wait` is given slices of at most 100 ms of the
/// caller's `timeout` (`None`: forever) and run like [`run`]; between slices, at this
/// outermost frame and outside the panic guard, a pending cancel of the thread acts, so a
/// thread cancelled while it waits ends there, alone, with the library intact.
pub(crate) fn run_waiting(
    error: ErrorOut,
    timeout: Option<std::time::Duration>,
    wait: impl FnMut(Option<std::time::Duration>) -> Outcome<()>,
) {
    run_waiting_on(error, timeout, &[SCI_ERR_TIMEOUT], wait)
}

/// [`run_waiting`] for a call whose slice ends with another code when the time came first
/// (a connect: `SCI_ERR_NO_SUCH_SEGMENT`, `SCI_ERR_NO_SUCH_INTNO`): the slices go on while
/// the code is one of `again`, and the last slice's code is the call's.
pub(crate) fn run_waiting_on(
    error: ErrorOut,
    timeout: Option<std::time::Duration>,
    again: &[sci_error_t],
    mut wait: impl FnMut(Option<std::time::Duration>) -> Outcome<()>,
) {
    const SLICE: std::time::Duration = std::time::Duration::from_millis(100);
    let deadline = timeout.and_then(|t| std::time::Instant::now().checked_add(t));
    loop {
        let start = std::time::Instant::now();
        let left = deadline.map(|d| d.saturating_duration_since(start));
        let last = left.is_some_and(|l| l <= SLICE);
        let slice = left.map_or(SLICE, |l| l.min(SLICE));
        let mut status = SCI_ERR_OK;
        // SAFETY: a local, writable for the call.
        run(unsafe { ErrorOut::new(&mut status) }, (), || wait(Some(slice)));
        if again.contains(&status) && !last {
            // A slice that answered at once (it did not wait) is not repeated at once.
            if start.elapsed() < std::time::Duration::from_millis(1) {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            remora_sys::cancel::point();
            continue;
        }
        error.set(status);
        return;
    }
}

/// Like [`run`], for calls whose return value on failure depends on how far the body got
/// (the DMA calls return the queue's state even when they fail): the body may replace the
/// `fail` value before it fails.
pub(crate) fn run_with<T>(error: ErrorOut, fail: T, body: impl FnOnce(&mut T) -> Outcome<T>) -> T {
    remora_sys::cancel::deferred(|| run_with_now(error, fail, body))
}

fn run_with_now<T>(error: ErrorOut, fail: T, body: impl FnOnce(&mut T) -> Outcome<T>) -> T {
    let mut fallback = fail;
    let outcome = catch_unwind(AssertUnwindSafe(|| body(&mut fallback)));
    let (value, status) = match outcome {
        Ok(Ok(v)) => (v, SCI_ERR_OK),
        Ok(Err(Fail(c))) => (fallback, c),
        Err(_) => (fallback, SCI_ERR_SYSTEM),
    };
    error.set(status);
    value
}

/// Run the body of an entry point that has no error argument: catch any panic and
/// return `fail` for a panic or a failure.
pub(crate) fn run_quiet<T>(fail: T, body: impl FnOnce() -> Outcome<T>) -> T {
    remora_sys::cancel::deferred(|| match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(v)) => v,
        Ok(Err(_)) | Err(_) => fail,
    })
}

/// Check `flags` against what a function knows: bits outside `accepted | later` give
/// `SCI_ERR_ILLEGAL_FLAG`; known bits in `later` (flags of features that arrive with a
/// later version) give `SCI_ERR_FLAG_NOT_IMPLEMENTED`.
pub(crate) fn check_flags(flags: u32, accepted: u32, later: u32) -> Outcome<()> {
    let unknown = flags & !(accepted | later);
    if unknown != 0 {
        return Err(Error::IllegalFlag(unknown).into());
    }
    if flags & later != 0 {
        return Err(Fail(SCI_ERR_FLAG_NOT_IMPLEMENTED));
    }
    Ok(())
}

/// A C out-parameter, checked to be non-NULL (and aligned) before the call does anything.
#[derive(Debug)]
pub(crate) struct Out<T>(NonNull<T>);

impl<T> Out<T> {
    /// Check `p`.
    ///
    /// # Errors
    /// `SCI_ERR_ILLEGAL_PARAMETER` when `p` is NULL or misaligned.
    ///
    /// # Safety
    /// `p` is NULL or points to memory writable for one `T` for the rest of the call.
    pub(crate) unsafe fn new(p: *mut T) -> Outcome<Out<T>> {
        match NonNull::new(p) {
            Some(nn) if p.is_aligned() => Ok(Out(nn)),
            _ => Err(Fail(SCI_ERR_ILLEGAL_PARAMETER)),
        }
    }

    /// Store the answer.
    pub(crate) fn set(self, value: T) {
        // SAFETY: `new` checked non-NULL and alignment, and its caller guaranteed the
        // memory is writable for the duration of the call we are in.
        unsafe { self.0.as_ptr().write(value) }
    }
}

/// The static description `SCIGetErrorString` returns.
pub(crate) fn error_string(code: sci_error_t) -> *const c_char {
    description(code).unwrap_or(UNKNOWN_ERROR).as_ptr()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panic_becomes_system_error() {
        let mut status = SCI_ERR_OK;
        // SAFETY: `status` is a live local.
        let out = unsafe { ErrorOut::new(&mut status) };
        let v = run(out, 7u32, || -> Outcome<u32> { panic!("boom") });
        assert_eq!((v, status), (7, SCI_ERR_SYSTEM));
        assert_eq!(run_quiet(3u32, || -> Outcome<u32> { panic!("boom") }), 3);
    }

    #[test]
    fn null_error_pointer_is_not_written() {
        // SAFETY: NULL is allowed.
        let out = unsafe { ErrorOut::new(std::ptr::null_mut()) };
        let v = run(out, 0u32, || Err(Fail(SCI_ERR_BUSY)));
        assert_eq!(v, 0);
    }

    #[test]
    fn run_with_returns_the_fallback_the_body_left() {
        let mut status = SCI_ERR_OK;
        // SAFETY: `status` is a live local.
        let out = unsafe { ErrorOut::new(&mut status) };
        let v = run_with(out, 5u32, |f| {
            *f = 2;
            Err(Fail(SCI_ERR_TIMEOUT))
        });
        assert_eq!((v, status), (2, SCI_ERR_TIMEOUT));
        // SAFETY: `status` is a live local.
        let out = unsafe { ErrorOut::new(&mut status) };
        assert_eq!(run_with(out, 5u32, |_| Ok(3)), 3);
        assert_eq!(status, SCI_ERR_OK);
    }

    #[test]
    fn every_safe_error_maps_to_a_described_code() {
        let all = [
            Error::Busy,
            Error::IllegalOperation,
            Error::NotPrepared,
            Error::NoSuchSegment,
            Error::SegmentIdUsed,
            Error::NoSuchNode,
            Error::NoSuchAdapter,
            Error::Timeout,
            Error::OutOfRange,
            Error::NotConnected,
            Error::IllegalParameter(String::new()),
            Error::IllegalFlag(1),
            Error::IllegalAddress,
            Error::SizeAlignment,
            Error::OffsetAlignment,
            Error::NoSpace,
            Error::Access,
            Error::NotInitialized,
            Error::NotSupported,
            Error::IllegalQuery,
            Error::NodeNotResponding,
            Error::InconsistentVersions(String::new()),
            Error::TransferFailed,
            Error::IntnoUsed,
            Error::NoSuchIntno,
            Error::Cancelled,
            Error::MaxEntries,
            Error::CondIntRace,
            Error::Overflow,
            Error::System(String::new()),
        ];
        for e in &all {
            let c = code(e);
            assert_ne!(c, SCI_ERR_OK, "{e:?}");
            assert!(description(c).is_some(), "{e:?} -> {c:#x}");
        }
    }
}
