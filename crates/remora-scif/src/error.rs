//! What can go wrong, in SCIF's terms (each maps to one errno in `libscif`).

use remora_client::ClientError;
use remora_proto::Error as DaemonError;

/// A SCIF failure. The names follow the errno the C API reports for them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// Not an endpoint, or already closed (`EBADF`).
    #[error("not an open endpoint")]
    BadEndpoint,
    /// A parameter is invalid, or the endpoint is in the wrong state (`EINVAL`).
    #[error("invalid argument: {0}")]
    Invalid(String),
    /// The endpoint is already connected or listening (`EISCONN`).
    #[error("endpoint already connected")]
    IsConnected,
    /// The endpoint is not connected (`ENOTCONN`).
    #[error("endpoint not connected")]
    NotConnected,
    /// Nobody listens on that port (`ECONNREFUSED`).
    #[error("connection refused")]
    Refused,
    /// The peer closed the connection (`ECONNRESET`).
    #[error("connection reset by peer")]
    Reset,
    /// The node does not exist or cannot be reached (`ENODEV`).
    #[error("no such node")]
    NoDevice,
    /// The port or the registered range is taken (`EADDRINUSE`).
    #[error("address in use")]
    AddrInUse,
    /// Nothing to take now (`EAGAIN`).
    #[error("try again")]
    Again,
    /// Not allowed: a privileged port, or a window without the needed protection (`EACCES`).
    #[error("permission denied")]
    Access,
    /// A fence signal into a window registered without write (`EPERM`, the kernel's
    /// window query on a protection mismatch).
    #[error("operation not permitted")]
    Permission,
    /// A range outside the registered windows (`ENXIO`).
    #[error("range not in a registered window")]
    NoWindow,
    /// Memory that cannot be registered (`EFAULT`).
    #[error("bad address")]
    Fault,
    /// No free port, or no space (`ENOSPC`).
    #[error("no space")]
    NoSpace,
    /// Out of memory or system resources (`ENOMEM`).
    #[error("out of memory: {0}")]
    NoMemory(String),
    /// A non-blocking connect is under way; `POLLOUT` tells when it ends (`EINPROGRESS`).
    #[error("connect in progress")]
    InProgress,
    /// A signal interrupted the wait (`EINTR`).
    #[error("interrupted")]
    Interrupted,
    /// This build cannot do it (`EOPNOTSUPP`).
    #[error("not supported: {0}")]
    NotSupported(&'static str),
}

/// Results of this crate.
pub type Result<T> = std::result::Result<T, Error>;

impl From<DaemonError> for Error {
    fn from(e: DaemonError) -> Error {
        match e {
            DaemonError::ConnRefused => Error::Refused,
            DaemonError::AddrInUse => Error::AddrInUse,
            DaemonError::Again => Error::Again,
            DaemonError::ConnReset => Error::Reset,
            DaemonError::IsConnected => Error::IsConnected,
            DaemonError::NotConnected => Error::NotConnected,
            DaemonError::Access => Error::Access,
            DaemonError::OutOfRange => Error::NoWindow,
            DaemonError::NoSuchNode | DaemonError::NodeNotResponding => Error::NoDevice,
            DaemonError::NoSpace => Error::NoSpace,
            DaemonError::IllegalParameter(s) => Error::Invalid(s),
            other => Error::Invalid(other.to_string()),
        }
    }
}

impl From<ClientError> for Error {
    fn from(e: ClientError) -> Error {
        match e {
            ClientError::Daemon(d) => d.into(),
            ClientError::NoDaemon(_) | ClientError::DaemonGone | ClientError::Version { .. } => {
                Error::NoDevice
            }
            ClientError::Config(c) => Error::Invalid(c.to_string()),
            other => Error::NoMemory(other.to_string()),
        }
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Error {
        match e.raw_os_error() {
            Some(14) => Error::Fault,
            Some(22) => Error::Invalid(e.to_string()),
            _ => Error::NoMemory(e.to_string()),
        }
    }
}
