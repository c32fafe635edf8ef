//! The one table from the safe API's errors to `RSMERR_*` codes, and the guard every entry
//! point runs in (no panic reaches C).

use remora_rsm::Error;
use std::ffi::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// `RSM_SUCCESS`.
pub const RSM_SUCCESS: c_int = 0;
/// `RSMERR_BAD_LIBRARY_VERSION`.
pub const RSMERR_BAD_LIBRARY_VERSION: c_int = 1;
/// `RSMERR_BAD_TOPOLOGY_PTR`.
pub const RSMERR_BAD_TOPOLOGY_PTR: c_int = 2;
/// `RSMERR_BAD_CTLR_HNDL`.
pub const RSMERR_BAD_CTLR_HNDL: c_int = 3;
/// `RSMERR_CTLR_NOT_PRESENT`.
pub const RSMERR_CTLR_NOT_PRESENT: c_int = 4;
/// `RSMERR_BAD_SEG_HNDL`.
pub const RSMERR_BAD_SEG_HNDL: c_int = 5;
/// `RSMERR_SEG_ALREADY_PUBLISHED`.
pub const RSMERR_SEG_ALREADY_PUBLISHED: c_int = 6;
/// `RSMERR_SEG_NOT_PUBLISHED`.
pub const RSMERR_SEG_NOT_PUBLISHED: c_int = 7;
/// `RSMERR_SEG_NOT_PUBLISHED_TO_NODE`.
pub const RSMERR_SEG_NOT_PUBLISHED_TO_NODE: c_int = 8;
/// `RSMERR_SEG_ALREADY_MAPPED`.
pub const RSMERR_SEG_ALREADY_MAPPED: c_int = 9;
/// `RSMERR_SEG_STILL_MAPPED`.
pub const RSMERR_SEG_STILL_MAPPED: c_int = 10;
/// `RSMERR_SEG_NOT_MAPPED`.
pub const RSMERR_SEG_NOT_MAPPED: c_int = 11;
/// `RSMERR_NOT_CREATOR`.
pub const RSMERR_NOT_CREATOR: c_int = 12;
/// `RSMERR_BAD_BARRIER_PTR`.
pub const RSMERR_BAD_BARRIER_PTR: c_int = 13;
/// `RSMERR_BAD_SGIO`.
pub const RSMERR_BAD_SGIO: c_int = 14;
/// `RSMERR_BAD_LOCALMEM_HNDL`.
pub const RSMERR_BAD_LOCALMEM_HNDL: c_int = 15;
/// `RSMERR_BAD_ADDR`.
pub const RSMERR_BAD_ADDR: c_int = 16;
/// `RSMERR_BAD_MEM_ALIGNMENT`.
pub const RSMERR_BAD_MEM_ALIGNMENT: c_int = 17;
/// `RSMERR_BAD_OFFSET`.
pub const RSMERR_BAD_OFFSET: c_int = 18;
/// `RSMERR_MISALIGNED_OFFSET`.
pub const RSMERR_MISALIGNED_OFFSET: c_int = 19;
/// `RSMERR_BAD_LENGTH`.
pub const RSMERR_BAD_LENGTH: c_int = 20;
/// `RSMERR_BAD_ACL`.
pub const RSMERR_BAD_ACL: c_int = 21;
/// `RSMERR_BAD_SEGID`.
pub const RSMERR_BAD_SEGID: c_int = 22;
/// `RSMERR_RESERVED_SEGID`.
pub const RSMERR_RESERVED_SEGID: c_int = 23;
/// `RSMERR_SEGID_IN_USE`.
pub const RSMERR_SEGID_IN_USE: c_int = 24;
/// `RSMERR_BAD_MODE`.
pub const RSMERR_BAD_MODE: c_int = 25;
/// `RSMERR_BAD_PERMS`.
pub const RSMERR_BAD_PERMS: c_int = 26;
/// `RSMERR_PERM_DENIED`.
pub const RSMERR_PERM_DENIED: c_int = 27;
/// `RSMERR_LOCKS_NOT_SUPPORTED`.
pub const RSMERR_LOCKS_NOT_SUPPORTED: c_int = 28;
/// `RSMERR_LOCKS_NOT_ENABLED`.
pub const RSMERR_LOCKS_NOT_ENABLED: c_int = 29;
/// `RSMERR_REBIND_NOT_ALLOWED`.
pub const RSMERR_REBIND_NOT_ALLOWED: c_int = 30;
/// `RSMERR_INSUFFICIENT_RESOURCES`.
pub const RSMERR_INSUFFICIENT_RESOURCES: c_int = 31;
/// `RSMERR_INSUFFICIENT_MEM`.
pub const RSMERR_INSUFFICIENT_MEM: c_int = 32;
/// `RSMERR_MAP_FAILED`.
pub const RSMERR_MAP_FAILED: c_int = 33;
/// `RSMERR_POLLFD_IN_USE`.
pub const RSMERR_POLLFD_IN_USE: c_int = 34;
/// `RSMERR_BARRIER_UNINITIALIZED`.
pub const RSMERR_BARRIER_UNINITIALIZED: c_int = 35;
/// `RSMERR_BARRIER_OPEN_FAILED`.
pub const RSMERR_BARRIER_OPEN_FAILED: c_int = 36;
/// `RSMERR_BARRIER_NOT_OPENED`.
pub const RSMERR_BARRIER_NOT_OPENED: c_int = 37;
/// `RSMERR_BARRIER_FAILURE`.
pub const RSMERR_BARRIER_FAILURE: c_int = 38;
/// `RSMERR_REMOTE_NODE_UNREACHABLE`.
pub const RSMERR_REMOTE_NODE_UNREACHABLE: c_int = 39;
/// `RSMERR_CONN_ABORTED`.
pub const RSMERR_CONN_ABORTED: c_int = 40;
/// `RSMERR_INTERRUPTED`.
pub const RSMERR_INTERRUPTED: c_int = 41;
/// `RSMERR_TIMEOUT`.
pub const RSMERR_TIMEOUT: c_int = 42;
/// `RSMERR_BAD_APPID`.
pub const RSMERR_BAD_APPID: c_int = 43;
/// `RSMERR_BAD_CONF`.
pub const RSMERR_BAD_CONF: c_int = 44;
/// `RSMERR_SEG_NOT_CONNECTED`.
pub const RSMERR_SEG_NOT_CONNECTED: c_int = 45;
/// `RSMERR_INTERNAL_ERROR`.
pub const RSMERR_INTERNAL_ERROR: c_int = 100;

/// The code of a safe-API error: the crate's single mapping table.
pub(crate) fn code_of(e: &Error) -> c_int {
    match e {
        Error::BadController => RSMERR_BAD_CTLR_HNDL,
        Error::ControllerNotPresent => RSMERR_CTLR_NOT_PRESENT,
        Error::BadSegment => RSMERR_BAD_SEG_HNDL,
        Error::AlreadyPublished => RSMERR_SEG_ALREADY_PUBLISHED,
        Error::NotPublished => RSMERR_SEG_NOT_PUBLISHED,
        Error::NotPublishedToNode => RSMERR_SEG_NOT_PUBLISHED_TO_NODE,
        Error::AlreadyMapped => RSMERR_SEG_ALREADY_MAPPED,
        Error::StillMapped => RSMERR_SEG_STILL_MAPPED,
        Error::NotMapped => RSMERR_SEG_NOT_MAPPED,
        Error::BadSgio => RSMERR_BAD_SGIO,
        Error::BadLocalMemory => RSMERR_BAD_LOCALMEM_HNDL,
        Error::BadAddress => RSMERR_BAD_ADDR,
        Error::BadMemAlignment => RSMERR_BAD_MEM_ALIGNMENT,
        Error::BadOffset => RSMERR_BAD_OFFSET,
        Error::MisalignedOffset => RSMERR_MISALIGNED_OFFSET,
        Error::BadLength => RSMERR_BAD_LENGTH,
        Error::BadAcl => RSMERR_BAD_ACL,
        Error::ReservedSegId => RSMERR_RESERVED_SEGID,
        Error::SegIdInUse => RSMERR_SEGID_IN_USE,
        Error::BadMode => RSMERR_BAD_MODE,
        Error::BadPerms => RSMERR_BAD_PERMS,
        Error::PermDenied => RSMERR_PERM_DENIED,
        Error::RebindNotAllowed => RSMERR_REBIND_NOT_ALLOWED,
        Error::InsufficientResources(_) => RSMERR_INSUFFICIENT_RESOURCES,
        Error::InsufficientMemory => RSMERR_INSUFFICIENT_MEM,
        Error::MapFailed(_) => RSMERR_MAP_FAILED,
        Error::PollFdInUse => RSMERR_POLLFD_IN_USE,
        Error::BarrierUninitialized => RSMERR_BARRIER_UNINITIALIZED,
        Error::BarrierOpenFailed => RSMERR_BARRIER_OPEN_FAILED,
        Error::BarrierNotOpened => RSMERR_BARRIER_NOT_OPENED,
        Error::BarrierFailure => RSMERR_BARRIER_FAILURE,
        Error::Unreachable => RSMERR_REMOTE_NODE_UNREACHABLE,
        Error::ConnAborted => RSMERR_CONN_ABORTED,
        Error::Interrupted => RSMERR_INTERRUPTED,
        Error::Timeout => RSMERR_TIMEOUT,
        Error::BadAppId => RSMERR_BAD_APPID,
        Error::BadConf(_) => RSMERR_BAD_CONF,
        Error::NotConnected => RSMERR_SEG_NOT_CONNECTED,
        Error::Internal(_) => RSMERR_INTERNAL_ERROR,
    }
}

/// A failure that is a code of its own, not a safe-API error (a NULL pointer argument,
/// say).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Code(pub c_int);

impl From<Error> for Code {
    fn from(e: Error) -> Code {
        if let Error::Internal(m) = &e {
            eprintln!("librsm: {m}");
        }
        Code(code_of(&e))
    }
}

/// Run an entry point's body: `Ok` is `RSM_SUCCESS`; an error is its code; a panic is
/// caught and becomes `RSMERR_INTERNAL_ERROR`.
pub(crate) fn guard(body: impl FnOnce() -> Result<(), Code>) -> c_int {
    remora_sys::cancel::deferred(|| match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => RSM_SUCCESS,
        Ok(Err(Code(c))) => c,
        Err(_) => RSMERR_INTERNAL_ERROR,
    })
}
