//! The errors of VIPL calls. `libvipl` turns each into a `VIP_RETURN` in one table.

/// Why a VIPL call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// Nothing completed yet (`VIP_NOT_DONE`).
    #[error("not done")]
    NotDone,
    /// A bad argument: a stale handle, a device that is not a Remora NIC, memory that is
    /// not registered (`VIP_INVALID_PARAMETER`).
    #[error("invalid parameter: {0}")]
    InvalidParameter(String),
    /// Out of a resource, or one still in use (`VIP_ERROR_RESOURCE`).
    #[error("resource: {0}")]
    Resource(String),
    /// The time ran out (`VIP_TIMEOUT`).
    #[error("timeout")]
    Timeout,
    /// The server rejected the connection (`VIP_REJECT`).
    #[error("connection rejected")]
    Rejected,
    /// A reliability level not offered, or the two VIs' differ
    /// (`VIP_INVALID_RELIABILITY_LEVEL`).
    #[error("invalid reliability level")]
    InvalidReliabilityLevel,
    /// A transfer size beyond the NIC's (`VIP_INVALID_MTU`).
    #[error("invalid maximum transfer size")]
    InvalidMtu,
    /// A protection tag of nothing, or of another NIC (`VIP_INVALID_PTAG`).
    #[error("invalid protection tag")]
    InvalidPtag,
    /// RDMA read asked of a level that has none (`VIP_INVALID_RDMAREAD`).
    #[error("RDMA read not available")]
    InvalidRdmaRead,
    /// A malformed descriptor (`VIP_DESCRIPTOR_ERROR`).
    #[error("descriptor error: {0}")]
    Descriptor(String),
    /// The call is not allowed in the VI's state (`VIP_INVALID_STATE`).
    #[error("invalid state")]
    InvalidState,
    /// A name the name service does not know (`VIP_ERROR_NAMESERVICE`).
    #[error("name service: {0}")]
    NameService(String),
    /// No one waits on that discriminator (`VIP_NO_MATCH`).
    #[error("no matching connection waiter")]
    NoMatch,
}

/// The result of a VIPL call.
pub type Result<T> = std::result::Result<T, Error>;

impl From<remora_sisci::Error> for Error {
    fn from(e: remora_sisci::Error) -> Error {
        use remora_sisci::Error as S;
        match e {
            S::Timeout => Error::Timeout,
            S::NoSpace => Error::Resource("the node ran out of memory or ids".into()),
            S::NoSuchNode | S::NodeNotResponding => Error::InvalidParameter("node unreachable".into()),
            other => Error::Resource(other.to_string()),
        }
    }
}

impl From<remora_proto::Error> for Error {
    fn from(e: remora_proto::Error) -> Error {
        use remora_proto::Error as P;
        match e {
            P::NoMatch => Error::NoMatch,
            P::Rejected => Error::Rejected,
            P::Timeout => Error::Timeout,
            P::UnknownHandle => Error::InvalidParameter("stale connection handle".into()),
            P::NoSuchNode => Error::NoMatch,
            P::IllegalParameter(m) => Error::InvalidParameter(m),
            other => Error::Resource(other.to_string()),
        }
    }
}

impl From<remora_client::ClientError> for Error {
    fn from(e: remora_client::ClientError) -> Error {
        match e {
            remora_client::ClientError::Daemon(d) => d.into(),
            other => Error::Resource(other.to_string()),
        }
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Error {
        Error::Resource(e.to_string())
    }
}
