//! Unix `SOCK_SEQPACKET` sockets with descriptor passing: the control channel between a
//! process and its node daemon, and between daemons of one host.
//!
//! Every descriptor made here is close-on-exec. Sends use `MSG_NOSIGNAL`, so a peer that has
//! gone away gives `EPIPE` rather than killing the process with SIGPIPE.

use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, ReturnFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags, SocketAddrUnix, SocketFlags, SocketType,
};
use std::io::{self, IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::path::Path;

/// The most descriptors one message carries.
pub const MAX_FDS: usize = 16;

fn socket(nonblocking: bool) -> io::Result<OwnedFd> {
    let mut flags = SocketFlags::CLOEXEC;
    if nonblocking {
        flags |= SocketFlags::NONBLOCK;
    }
    Ok(rustix::net::socket_with(AddressFamily::UNIX, SocketType::SEQPACKET, flags, None)?)
}

/// Bind and listen on `path` (non-blocking, close-on-exec).
///
/// # Errors
/// The errno of `socket`, `bind` (e.g. `EADDRINUSE`) or `listen`.
pub fn listen(path: &Path) -> io::Result<OwnedFd> {
    let fd = socket(true)?;
    let addr = SocketAddrUnix::new(path)?;
    rustix::net::bind(&fd, &addr)?;
    rustix::net::listen(&fd, 128)?;
    Ok(fd)
}

/// Accept one connection (the new socket is non-blocking and close-on-exec).
///
/// # Errors
/// The errno of `accept4` (`EAGAIN` when none is waiting).
pub fn accept(listener: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    Ok(retry_intr(|| rustix::net::accept_with(listener, SocketFlags::CLOEXEC | SocketFlags::NONBLOCK))?)
}

/// Connect to the socket at `path`.
///
/// # Errors
/// The errno of `connect` (`ENOENT` or `ECONNREFUSED` when no daemon listens there).
pub fn connect(path: &Path, nonblocking: bool) -> io::Result<OwnedFd> {
    let fd = socket(false)?;
    let addr = SocketAddrUnix::new(path)?;
    match retry_intr(|| rustix::net::connect(&fd, &addr)) {
        // A connect that a signal interrupted and that completed meanwhile.
        Ok(()) | Err(rustix::io::Errno::ISCONN) => {}
        Err(e) => return Err(e.into()),
    }
    if nonblocking {
        set_nonblocking(fd_ref(&fd), true)?;
    }
    Ok(fd)
}

fn fd_ref(fd: &OwnedFd) -> BorrowedFd<'_> {
    use std::os::fd::AsFd;
    fd.as_fd()
}

/// Make a socket (non-)blocking.
///
/// # Errors
/// The errno of `ioctl(FIONBIO)`.
pub fn set_nonblocking(fd: BorrowedFd<'_>, on: bool) -> io::Result<()> {
    Ok(rustix::io::ioctl_fionbio(fd, on)?)
}

/// Whether `e`, an error of [`send`], says that this message could not be sent as made
/// (too many descriptors, too long, too many descriptors in flight) while the socket itself
/// is fine.
pub fn unsendable(e: &io::Error) -> bool {
    use rustix::io::Errno;
    [Errno::INVAL, Errno::MSGSIZE, Errno::NOBUFS, Errno::TOOMANYREFS]
        .iter()
        .any(|x| e.raw_os_error() == Some(x.raw_os_error()))
        || e.kind() == io::ErrorKind::InvalidInput
}

/// Send one message with up to [`MAX_FDS`] descriptors attached.
///
/// # Errors
/// `EINVAL` for too many descriptors; the errno of `sendmsg` (`EAGAIN` on a full
/// non-blocking socket, `EPIPE` when the peer closed).
pub fn send(fd: BorrowedFd<'_>, data: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<()> {
    if fds.len() > MAX_FDS {
        return Err(io::Error::from_raw_os_error(rustix::io::Errno::INVAL.raw_os_error()));
    }
    let mut space = [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !fds.is_empty() && !control.push(SendAncillaryMessage::ScmRights(fds)) {
        return Err(io::Error::from_raw_os_error(rustix::io::Errno::NOBUFS.raw_os_error()));
    }
    let iov = [IoSlice::new(data)];
    // A datagram goes whole or not at all: one interrupted by a signal was not sent.
    let n = retry_intr(|| rustix::net::sendmsg(fd, &iov, &mut control, SendFlags::NOSIGNAL))?;
    if n != data.len() {
        return Err(io::Error::from_raw_os_error(rustix::io::Errno::MSGSIZE.raw_os_error()));
    }
    Ok(())
}

/// What [`recv`] answers for a message that came whole without the descriptors sent with
/// it (more than [`MAX_FDS`] were sent, or this process could not take them: it is out of
/// descriptors): the message's bytes are in the buffer, this many.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DescriptorsLost(pub usize);

impl std::fmt::Display for DescriptorsLost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "a message of {} bytes came without its descriptors", self.0)
    }
}

impl std::error::Error for DescriptorsLost {}

/// The length of the message [`recv`] took without its descriptors, when `e` says so.
pub fn descriptors_lost(e: &io::Error) -> Option<usize> {
    e.get_ref().and_then(|i| i.downcast_ref::<DescriptorsLost>()).map(|d| d.0)
}

/// Receive one message into `buf`, with the descriptors that came with it.
///
/// Returns `(0, [])` when the peer has closed the connection.
///
/// # Errors
/// `EMSGSIZE` when the message did not fit (it is dropped); [`DescriptorsLost`] (see
/// [`descriptors_lost`]) when it fit but its descriptors did not (any that did arrive are
/// closed); the errno of `recvmsg` (`EAGAIN` on an empty non-blocking socket).
pub fn recv(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<(usize, Vec<OwnedFd>)> {
    let mut space = [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let mut iov = [IoSliceMut::new(buf)];
    // An interrupted receive took nothing: ask again.
    let msg = retry_intr(|| rustix::net::recvmsg(fd, &mut iov, &mut control, RecvFlags::CMSG_CLOEXEC))?;
    let mut fds = Vec::new();
    for m in control.drain() {
        if let RecvAncillaryMessage::ScmRights(rights) = m {
            fds.extend(rights);
        }
    }
    if msg.flags.contains(ReturnFlags::TRUNC) {
        return Err(io::Error::from_raw_os_error(rustix::io::Errno::MSGSIZE.raw_os_error()));
    }
    if msg.flags.contains(ReturnFlags::CTRUNC) {
        return Err(io::Error::other(DescriptorsLost(msg.bytes)));
    }
    Ok((msg.bytes, fds))
}

/// Whether the peer has hung up, without consuming a waiting message.
pub fn peer_closed(fd: BorrowedFd<'_>) -> bool {
    let mut b = [MaybeUninit::<u8>::uninit(); 1];
    matches!(
        rustix::net::recv(fd, &mut b, RecvFlags::PEEK | RecvFlags::DONTWAIT),
        Ok((_, 0)) | Err(rustix::io::Errno::CONNRESET)
    )
}

/// Whether a message (or a hang-up) is waiting, without blocking.
///
/// # Errors
/// The errno of `poll`.
pub fn readable_now(fd: BorrowedFd<'_>) -> io::Result<bool> {
    use rustix::event::{poll, PollFd, PollFlags};
    let mut fds = [PollFd::new(&fd, PollFlags::IN)];
    let n = poll(&mut fds, Some(&rustix::time::Timespec { tv_sec: 0, tv_nsec: 0 }))?;
    Ok(n > 0)
}

/// The process id of the peer, from `SO_PEERCRED`.
pub fn peer_pid(fd: BorrowedFd<'_>) -> Option<u32> {
    rustix::net::sockopt::socket_peercred(fd).ok().map(|c| c.pid.as_raw_nonzero().get() as u32)
}

/// The user id of the peer, from `SO_PEERCRED`.
pub fn peer_uid(fd: BorrowedFd<'_>) -> Option<u32> {
    rustix::net::sockopt::socket_peercred(fd).ok().map(|c| c.uid.as_raw())
}

/// The group id of the peer, from `SO_PEERCRED`.
pub fn peer_gid(fd: BorrowedFd<'_>) -> Option<u32> {
    rustix::net::sockopt::socket_peercred(fd).ok().map(|c| c.gid.as_raw())
}

/// A connected pair (for tests and for in-process channels).
///
/// # Errors
/// The errno of `socketpair`.
pub fn pair() -> io::Result<(OwnedFd, OwnedFd)> {
    Ok(rustix::net::socketpair(AddressFamily::UNIX, SocketType::SEQPACKET, SocketFlags::CLOEXEC, None)?)
}

/// Run `f` again while a signal handler interrupts it (`EINTR`): the calls this is used
/// for take nothing and send nothing when interrupted, so a program whose handlers lack
/// `SA_RESTART` never sees a spurious failure, nor loses its place in a protocol.
pub fn retry_intr<T>(mut f: impl FnMut() -> rustix::io::Result<T>) -> rustix::io::Result<T> {
    loop {
        match f() {
            Err(rustix::io::Errno::INTR) => continue,
            r => return r,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Memfd;
    use std::os::fd::AsFd;

    #[test]
    fn passes_descriptors_and_detects_hangup() {
        let (a, b) = pair().unwrap();
        let m = Memfd::create("p", 4096).unwrap();
        send(a.as_fd(), b"hello", &[m.as_fd()]).unwrap();
        let mut buf = [0u8; 64];
        let (n, fds) = recv(b.as_fd(), &mut buf).unwrap();
        assert_eq!(&buf[..n], b"hello");
        assert_eq!(fds.len(), 1);
        assert_eq!(Memfd::from_fd(fds.into_iter().next().unwrap()).unwrap().size(), 4096);
        drop(a);
        assert!(peer_closed(b.as_fd()));
        let (n, _) = recv(b.as_fd(), &mut buf).unwrap();
        assert_eq!(n, 0);
    }

    #[test]
    fn a_message_that_cannot_be_sent_leaves_the_socket_usable() {
        let (a, b) = pair().unwrap();
        let m = Memfd::create("p", 4096).unwrap();
        let many: Vec<_> = (0..=MAX_FDS).map(|_| m.as_fd()).collect();
        let e = send(a.as_fd(), b"too many", &many).unwrap_err();
        assert!(unsendable(&e), "{e}");
        send(a.as_fd(), b"after", &[]).unwrap();
        let mut buf = [0u8; 16];
        assert_eq!(recv(b.as_fd(), &mut buf).unwrap().0, 5);
        drop(b);
        let e = send(a.as_fd(), b"gone", &[]).unwrap_err();
        assert!(!unsendable(&e), "a closed peer is not a message's fault: {e}");
    }

    #[test]
    fn a_message_whose_descriptors_did_not_fit_keeps_its_bytes() {
        let (a, b) = pair().unwrap();
        // More descriptors than a receive takes, sent as a client could.
        let many: Vec<OwnedFd> = (0..MAX_FDS + 4).map(|_| rustix::io::dup(a.as_fd()).unwrap()).collect();
        let borrowed: Vec<BorrowedFd<'_>> = many.iter().map(|f| f.as_fd()).collect();
        let mut space = [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS + 4))];
        let mut control = SendAncillaryBuffer::new(&mut space);
        assert!(control.push(SendAncillaryMessage::ScmRights(&borrowed)));
        let iov = [IoSlice::new(b"the body")];
        rustix::net::sendmsg(a.as_fd(), &iov, &mut control, SendFlags::NOSIGNAL).unwrap();
        let mut buf = [0u8; 64];
        let e = recv(b.as_fd(), &mut buf).unwrap_err();
        assert_eq!(descriptors_lost(&e), Some(8), "{e}");
        assert_eq!(&buf[..8], b"the body");
        // The next message comes as usual.
        send(a.as_fd(), b"next", &[]).unwrap();
        assert_eq!(recv(b.as_fd(), &mut buf).unwrap().0, 4);
        let mut small = [0u8; 2];
        send(a.as_fd(), b"longer", &[]).unwrap();
        assert_eq!(descriptors_lost(&recv(b.as_fd(), &mut small).unwrap_err()), None);
    }

    #[test]
    fn truncated_message_is_an_error() {
        let (a, b) = pair().unwrap();
        send(a.as_fd(), &[7u8; 100], &[]).unwrap();
        let mut small = [0u8; 10];
        assert!(recv(b.as_fd(), &mut small).is_err());
    }
}
