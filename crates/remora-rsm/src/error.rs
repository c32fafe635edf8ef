//! The errors of the RSM personality, with the man pages' meanings (the `RSMERR_*` codes
//! live in the C-ABI crate's one table).

/// Why an RSM call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The controller handle is not one (`RSMERR_BAD_CTLR_HNDL`).
    #[error("bad controller handle")]
    BadController,
    /// No controller has that name (`RSMERR_CTLR_NOT_PRESENT`).
    #[error("no such controller")]
    ControllerNotPresent,
    /// The segment handle is not one, or was released (`RSMERR_BAD_SEG_HNDL`).
    #[error("bad segment handle")]
    BadSegment,
    /// The export is published already (`RSMERR_SEG_ALREADY_PUBLISHED`).
    #[error("segment already published")]
    AlreadyPublished,
    /// The export is not published, or no export has the id (`RSMERR_SEG_NOT_PUBLISHED`).
    #[error("segment not published")]
    NotPublished,
    /// The access list does not name the importer's node (`RSMERR_SEG_NOT_PUBLISHED_TO_NODE`).
    #[error("segment not published to this node")]
    NotPublishedToNode,
    /// The import is mapped already (`RSMERR_SEG_ALREADY_MAPPED`).
    #[error("segment already mapped")]
    AlreadyMapped,
    /// The import is still mapped (`RSMERR_SEG_STILL_MAPPED`).
    #[error("segment still mapped")]
    StillMapped,
    /// The import is not mapped (`RSMERR_SEG_NOT_MAPPED`).
    #[error("segment not mapped")]
    NotMapped,
    /// A scatter/gather request is malformed (`RSMERR_BAD_SGIO`).
    #[error("bad scatter/gather request")]
    BadSgio,
    /// A local-memory handle is not one (`RSMERR_BAD_LOCALMEM_HNDL`).
    #[error("bad local memory handle")]
    BadLocalMemory,
    /// An address is not usable (`RSMERR_BAD_ADDR`).
    #[error("bad address")]
    BadAddress,
    /// An address or length is not aligned as required (`RSMERR_BAD_MEM_ALIGNMENT`).
    #[error("bad memory alignment")]
    BadMemAlignment,
    /// An offset lies outside the segment or is not page-aligned where it must be
    /// (`RSMERR_BAD_OFFSET`).
    #[error("bad offset")]
    BadOffset,
    /// An offset is not aligned to the access size (`RSMERR_MISALIGNED_OFFSET`).
    #[error("misaligned offset")]
    MisalignedOffset,
    /// A length is zero, too long or not a page multiple where it must be
    /// (`RSMERR_BAD_LENGTH`).
    #[error("bad length")]
    BadLength,
    /// An access list is malformed (`RSMERR_BAD_ACL`).
    #[error("bad access control list")]
    BadAcl,
    /// The id lies in a range reserved for the system (`RSMERR_RESERVED_SEGID`).
    #[error("reserved segment id")]
    ReservedSegId,
    /// Another export has the id (`RSMERR_SEGID_IN_USE`).
    #[error("segment id in use")]
    SegIdInUse,
    /// A mode or flag value is not one (`RSMERR_BAD_MODE`).
    #[error("bad mode")]
    BadMode,
    /// A permission value is not one (`RSMERR_BAD_PERMS`).
    #[error("bad permissions")]
    BadPerms,
    /// The caller may not have the access asked for (`RSMERR_PERM_DENIED`).
    #[error("permission denied")]
    PermDenied,
    /// The export was created without `RSM_ALLOW_REBIND` (`RSMERR_REBIND_NOT_ALLOWED`).
    #[error("rebind not allowed")]
    RebindNotAllowed,
    /// The node ran out of something (`RSMERR_INSUFFICIENT_RESOURCES`).
    #[error("insufficient resources: {0}")]
    InsufficientResources(String),
    /// Out of memory (`RSMERR_INSUFFICIENT_MEM`).
    #[error("insufficient memory")]
    InsufficientMemory,
    /// The map could not be made (`RSMERR_MAP_FAILED`).
    #[error("map failed: {0}")]
    MapFailed(String),
    /// A poll descriptor of the segment is still held (`RSMERR_POLLFD_IN_USE`).
    #[error("poll descriptor in use")]
    PollFdInUse,
    /// The barrier was not initialised (`RSMERR_BARRIER_UNINITIALIZED`).
    #[error("barrier not initialized")]
    BarrierUninitialized,
    /// The barrier could not open (`RSMERR_BARRIER_OPEN_FAILED`).
    #[error("barrier open failed")]
    BarrierOpenFailed,
    /// The barrier is not open (`RSMERR_BARRIER_NOT_OPENED`).
    #[error("barrier not opened")]
    BarrierNotOpened,
    /// An access inside the barrier failed (`RSMERR_BARRIER_FAILURE`).
    #[error("barrier failure: an access since the barrier opened failed")]
    BarrierFailure,
    /// The node cannot be reached (`RSMERR_REMOTE_NODE_UNREACHABLE`).
    #[error("remote node unreachable")]
    Unreachable,
    /// The export or its node went away (`RSMERR_CONN_ABORTED`).
    #[error("connection aborted")]
    ConnAborted,
    /// A signal interrupted the wait (`RSMERR_INTERRUPTED`).
    #[error("interrupted")]
    Interrupted,
    /// The time ran out (`RSMERR_TIMEOUT`).
    #[error("timeout")]
    Timeout,
    /// The segment-id file does not reserve the application id (`RSMERR_BAD_APPID`).
    #[error("application id not in the segment-id file")]
    BadAppId,
    /// The segment-id file is missing, unreadable or malformed (`RSMERR_BAD_CONF`).
    #[error("bad segment-id file: {0}")]
    BadConf(String),
    /// The import is not connected (`RSMERR_SEG_NOT_CONNECTED`).
    #[error("segment not connected")]
    NotConnected,
    /// Anything else (`RSMERR_INTERNAL_ERROR`).
    #[error("internal error: {0}")]
    Internal(String),
}

/// The result of an RSM call.
pub type Result<T> = std::result::Result<T, Error>;

impl From<remora_proto::Error> for Error {
    fn from(e: remora_proto::Error) -> Error {
        use remora_proto::Error as P;
        match e {
            P::NoSuchSegment => Error::NotPublished,
            P::SegmentIdUsed => Error::SegIdInUse,
            P::NotPublishedToNode => Error::NotPublishedToNode,
            P::PermissionDenied | P::Access => Error::PermDenied,
            P::ReservedId => Error::ReservedSegId,
            P::UnknownHandle => Error::BadSegment,
            P::NoSuchNode | P::NodeNotResponding => Error::Unreachable,
            P::NotConnected => Error::ConnAborted,
            P::OutOfRange => Error::BadOffset,
            P::Timeout => Error::Timeout,
            P::NoSpace => Error::InsufficientResources("the node ran out of memory or ids".into()),
            other => Error::Internal(other.to_string()),
        }
    }
}

impl From<remora_client::ClientError> for Error {
    fn from(e: remora_client::ClientError) -> Error {
        use remora_client::ClientError as C;
        match e {
            C::Daemon(d) => d.into(),
            C::DaemonGone => Error::Unreachable,
            other => Error::Internal(other.to_string()),
        }
    }
}

impl From<remora_sisci::Error> for Error {
    fn from(e: remora_sisci::Error) -> Error {
        use remora_sisci::Error as S;
        match e {
            S::NotConnected => Error::ConnAborted,
            S::OutOfRange => Error::BadOffset,
            S::SizeAlignment => Error::BadLength,
            S::IllegalAddress => Error::BadAddress,
            S::NoSpace => Error::InsufficientMemory,
            S::NodeNotResponding | S::NoSuchNode => Error::Unreachable,
            S::Timeout => Error::Timeout,
            S::Busy => Error::StillMapped,
            S::Access => Error::PermDenied,
            other => Error::Internal(other.to_string()),
        }
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Error {
        match e.raw_os_error() {
            // Out of memory, or memory beyond the file size limit (`ulimit -f`: EFBIG).
            Some(12 | 27) => Error::InsufficientMemory,
            Some(14) => Error::BadAddress,
            Some(4) => Error::Interrupted,
            _ => Error::Internal(e.to_string()),
        }
    }
}
