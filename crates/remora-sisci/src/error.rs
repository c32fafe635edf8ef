//! The errors of the SISCI personality, with the guide's meanings (vendor codes live in the
//! C-ABI crate's one table).

use remora_client::ClientError;

/// Why a SISCI call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// Dependent resources exist (`SCI_ERR_BUSY`).
    #[error("resource busy: dependent resources exist")]
    Busy,
    /// Illegal in the resource's state (`SCI_ERR_ILLEGAL_OPERATION`).
    #[error("illegal operation in the current state")]
    IllegalOperation,
    /// The segment is not prepared (`SCI_ERR_SEGMENT_NOT_PREPARED`).
    #[error("segment not prepared")]
    NotPrepared,
    /// No such segment (`SCI_ERR_NO_SUCH_SEGMENT`).
    #[error("no such segment")]
    NoSuchSegment,
    /// The id is taken (`SCI_ERR_SEGMENTID_USED`).
    #[error("segment id already used on this node")]
    SegmentIdUsed,
    /// No such node (`SCI_ERR_NO_SUCH_NODEID`).
    #[error("no such node")]
    NoSuchNode,
    /// No such adapter (`SCI_ERR_NO_SUCH_ADAPTERNO`).
    #[error("no such adapter")]
    NoSuchAdapter,
    /// Time ran out (`SCI_ERR_TIMEOUT`).
    #[error("timeout")]
    Timeout,
    /// Offset or size outside the resource (`SCI_ERR_OUT_OF_RANGE`).
    #[error("out of range")]
    OutOfRange,
    /// The connection is gone (`SCI_ERR_NOT_CONNECTED`).
    #[error("not connected")]
    NotConnected,
    /// A bad argument (`SCI_ERR_ILLEGAL_PARAMETER`).
    #[error("illegal parameter: {0}")]
    IllegalParameter(String),
    /// An unknown flag (`SCI_ERR_ILLEGAL_FLAG`).
    #[error("illegal flag 0x{0:x}")]
    IllegalFlag(u32),
    /// A bad address (`SCI_ERR_ILLEGAL_ADDRESS`).
    #[error("illegal address")]
    IllegalAddress,
    /// Size not aligned (`SCI_ERR_SIZE_ALIGNMENT`).
    #[error("size alignment")]
    SizeAlignment,
    /// Offset not aligned (`SCI_ERR_OFFSET_ALIGNMENT`).
    #[error("offset alignment")]
    OffsetAlignment,
    /// Out of memory or ids (`SCI_ERR_NOSPC`).
    #[error("no space")]
    NoSpace,
    /// Not permitted (`SCI_ERR_ACCESS`).
    #[error("access denied")]
    Access,
    /// `SCIInitialize` was not called (`SCI_ERR_NOT_INITIALIZED`).
    #[error("not initialized")]
    NotInitialized,
    /// Needs Dolphin hardware (`SCI_ERR_NOT_SUPPORTED`).
    #[error("not supported without Dolphin hardware")]
    NotSupported,
    /// Unknown query (`SCI_ERR_ILLEGAL_QUERY`).
    #[error("illegal query")]
    IllegalQuery,
    /// The node does not answer (`SCI_ERR_NODE_NOT_RESPONDING`).
    #[error("node not responding")]
    NodeNotResponding,
    /// The node's daemon speaks another protocol version than this library
    /// (`SCI_ERR_INCONSISTENT_VERSIONS`).
    #[error("{0}")]
    InconsistentVersions(String),
    /// A transfer failed (`SCI_ERR_TRANSFER_FAILED`).
    #[error("transfer failed")]
    TransferFailed,
    /// The interrupt number is taken (`SCI_ERR_INTNO_USED`).
    #[error("interrupt number in use")]
    IntnoUsed,
    /// No such interrupt (`SCI_ERR_NO_SUCH_INTNO`).
    #[error("no such interrupt")]
    NoSuchIntno,
    /// A wait was cancelled because its resource was removed (`SCI_ERR_CANCELLED`).
    #[error("cancelled: the resource was removed")]
    Cancelled,
    /// A conditional interrupt's flag word was stored to while the interrupt was disabled,
    /// so enabling it could miss that store (`SCI_ERR_COND_INT_RACE_PROBLEM`).
    #[error("the flag word changed while the conditional interrupt was disabled")]
    CondIntRace,
    /// A counter exceeds what the call can report (`SCI_ERR_OVERFLOW`).
    #[error("counter overflow")]
    Overflow,
    /// More entries than the DMA queue holds (`SCI_ERR_MAX_ENTRIES`).
    #[error("too many entries for the queue")]
    MaxEntries,
    /// A system error (`SCI_ERR_SYSTEM`).
    #[error("system error: {0}")]
    System(String),
}

/// The result of a SISCI call.
pub type Result<T> = std::result::Result<T, Error>;

impl From<remora_proto::Error> for Error {
    fn from(e: remora_proto::Error) -> Error {
        use remora_proto::Error as P;
        match e {
            P::NoSuchSegment => Error::NoSuchSegment,
            P::SegmentIdUsed => Error::SegmentIdUsed,
            P::Busy => Error::Busy,
            P::IllegalOperation => Error::IllegalOperation,
            P::NotPrepared => Error::NotPrepared,
            P::NoSuchNode => Error::NoSuchNode,
            P::NoSuchAdapter => Error::NoSuchAdapter,
            P::Timeout => Error::Timeout,
            P::OutOfRange => Error::OutOfRange,
            P::NotConnected => Error::NotConnected,
            P::UnknownHandle => Error::IllegalParameter("stale handle".into()),
            P::IllegalParameter(s) => Error::IllegalParameter(s),
            P::NoSpace => Error::NoSpace,
            P::NodeNotResponding => Error::NodeNotResponding,
            P::Access | P::PermissionDenied | P::NotPublishedToNode => Error::Access,
            P::ReservedId => Error::IllegalParameter("reserved segment id".into()),
            P::System(s) | P::Protocol(s) => Error::System(s),
            P::IntnoUsed => Error::IntnoUsed,
            P::NoSuchIntno => Error::NoSuchIntno,
            // SCIF answers; a SISCI request never gets them.
            P::ConnRefused
            | P::AddrInUse
            | P::Again
            | P::ConnReset
            | P::IsConnected
            | P::NoMatch
            | P::Rejected => Error::System(e.to_string()),
        }
    }
}

impl From<ClientError> for Error {
    fn from(e: ClientError) -> Error {
        match e {
            ClientError::Daemon(d) => d.into(),
            ClientError::DaemonGone => Error::NodeNotResponding,
            ClientError::Config(c) => Error::IllegalParameter(c.to_string()),
            v @ ClientError::Version { .. } => Error::InconsistentVersions(v.to_string()),
            other => Error::System(other.to_string()),
        }
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Error {
        match e.raw_os_error() {
            // Out of memory, or memory beyond the file size limit (`ulimit -f`: EFBIG).
            Some(12 | 27) => Error::NoSpace,
            Some(34) => Error::OutOfRange,
            Some(13) => Error::Access,
            Some(17) => Error::IllegalAddress,
            _ => Error::System(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_daemon_of_another_version_is_inconsistent_versions() {
        let e: Error = ClientError::Version { node: 4, daemon: 6, library: 5 }.into();
        assert!(matches!(&e, Error::InconsistentVersions(s) if s.contains("protocol 6")), "{e:?}");
    }
}
