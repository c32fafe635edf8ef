//! The one table from the safe API's errors to `VIP_RETURN` codes, and the guard every
//! entry point runs in (no panic reaches C).

use remora_vipl::Error;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// `VIP_RETURN`.
pub type VipReturn = u32;
/// `VIP_SUCCESS`.
pub const VIP_SUCCESS: VipReturn = 0;
/// `VIP_NOT_DONE`.
pub const VIP_NOT_DONE: VipReturn = 1;
/// `VIP_INVALID_PARAMETER`.
pub const VIP_INVALID_PARAMETER: VipReturn = 2;
/// `VIP_ERROR_RESOURCE`.
pub const VIP_ERROR_RESOURCE: VipReturn = 3;
/// `VIP_TIMEOUT`.
pub const VIP_TIMEOUT: VipReturn = 4;
/// `VIP_REJECT`.
pub const VIP_REJECT: VipReturn = 5;
/// `VIP_INVALID_RELIABILITY_LEVEL`.
pub const VIP_INVALID_RELIABILITY_LEVEL: VipReturn = 6;
/// `VIP_INVALID_MTU`.
pub const VIP_INVALID_MTU: VipReturn = 7;
/// `VIP_INVALID_QOS`.
pub const VIP_INVALID_QOS: VipReturn = 8;
/// `VIP_INVALID_PTAG`.
pub const VIP_INVALID_PTAG: VipReturn = 9;
/// `VIP_INVALID_RDMAREAD`.
pub const VIP_INVALID_RDMAREAD: VipReturn = 10;
/// `VIP_DESCRIPTOR_ERROR`.
pub const VIP_DESCRIPTOR_ERROR: VipReturn = 11;
/// `VIP_INVALID_STATE`.
pub const VIP_INVALID_STATE: VipReturn = 12;
/// `VIP_ERROR_NAMESERVICE`.
pub const VIP_ERROR_NAMESERVICE: VipReturn = 13;
/// `VIP_NO_MATCH`.
pub const VIP_NO_MATCH: VipReturn = 14;

/// A `VIP_RETURN` other than success, as an error value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Code(pub VipReturn);

/// The code of each error of the safe API.
pub fn code_of(e: &Error) -> VipReturn {
    match e {
        Error::NotDone => VIP_NOT_DONE,
        Error::InvalidParameter(_) => VIP_INVALID_PARAMETER,
        Error::Resource(_) => VIP_ERROR_RESOURCE,
        Error::Timeout => VIP_TIMEOUT,
        Error::Rejected => VIP_REJECT,
        Error::InvalidReliabilityLevel => VIP_INVALID_RELIABILITY_LEVEL,
        Error::InvalidMtu => VIP_INVALID_MTU,
        Error::InvalidPtag => VIP_INVALID_PTAG,
        Error::InvalidRdmaRead => VIP_INVALID_RDMAREAD,
        Error::Descriptor(_) => VIP_DESCRIPTOR_ERROR,
        Error::InvalidState => VIP_INVALID_STATE,
        Error::NameService(_) => VIP_ERROR_NAMESERVICE,
        Error::NoMatch => VIP_NO_MATCH,
    }
}

impl From<Error> for Code {
    fn from(e: Error) -> Code {
        Code(code_of(&e))
    }
}

/// Run an entry point's body: its code, `VIP_ERROR_RESOURCE` if it panicked, with
/// cancellation deferred meanwhile.
pub(crate) fn guard(body: impl FnOnce() -> Result<(), Code>) -> VipReturn {
    remora_sys::cancel::deferred(|| match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => VIP_SUCCESS,
        Ok(Err(Code(c))) => c,
        Err(_) => VIP_ERROR_RESOURCE,
    })
}
