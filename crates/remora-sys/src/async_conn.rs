//! An async view of a `SOCK_SEQPACKET` control connection (tokio `AsyncFd` over the
//! `remora-sys` calls). Only the daemon uses it, behind the `tokio` feature.

#![allow(unsafe_code)] // this file is part of the unsafe layer: every block has a SAFETY comment
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use tokio::io::unix::AsyncFd;

/// The receive buffer size every caller of [`AsyncConn::recv`] must provide.
pub const RECV_BUF: usize = 64 * 1024;

/// One control connection.
pub struct AsyncConn {
    fd: AsyncFd<OwnedFd>,
}

impl AsyncConn {
    /// Wrap a connected socket (made non-blocking here).
    ///
    /// # Errors
    /// The errno of `ioctl(FIONBIO)` or of registering with the reactor.
    pub fn new(fd: OwnedFd) -> io::Result<AsyncConn> {
        crate::seqpacket::set_nonblocking(fd.as_fd(), true)?;
        Ok(AsyncConn { fd: register(fd)? })
    }

    /// The socket.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.get_ref().as_fd()
    }

    /// Receive one message into `buf` (which must hold [`RECV_BUF`] bytes); `(0, [])`
    /// means the peer closed. Cancel-safe.
    ///
    /// # Errors
    /// The errno of `recvmsg`, or `EMSGSIZE` for an oversized message.
    pub async fn recv(&self, buf: &mut [u8]) -> io::Result<(usize, Vec<OwnedFd>)> {
        debug_assert!(buf.len() >= RECV_BUF);
        loop {
            let mut guard = self.fd.readable().await?;
            match guard.try_io(|inner| crate::seqpacket::recv(inner.get_ref().as_fd(), buf)) {
                Ok(r) => return r,
                Err(_would_block) => continue,
            }
        }
    }

    /// Send one message with descriptors.
    ///
    /// # Errors
    /// The errno of `sendmsg` (`EPIPE` when the peer closed).
    pub async fn send(&self, bytes: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<()> {
        loop {
            let mut guard = self.fd.writable().await?;
            match guard.try_io(|inner| crate::seqpacket::send(inner.get_ref().as_fd(), bytes, fds)) {
                Ok(r) => return r,
                Err(_would_block) => continue,
            }
        }
    }

    /// Resolve when the peer has hung up (waiting messages do not count).
    ///
    /// Never clears the descriptor's readiness: a message that is waiting must still wake
    /// the next `recv` (a caller that sends several messages without waiting for answers
    /// would otherwise leave them stranded). While messages wait, the peer is re-checked
    /// every 20 ms.
    pub async fn hangup(&self) {
        loop {
            if self.fd.readable().await.is_err() {
                return;
            }
            if crate::seqpacket::peer_closed(self.fd()) {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
}

/// Register an owned descriptor with the reactor.
///
/// # Errors
/// The errno of `epoll_ctl`.
pub fn register(fd: OwnedFd) -> io::Result<AsyncFd<OwnedFd>> {
    // SAFETY: the AsyncFd takes ownership of the OwnedFd, so the descriptor stays open and
    // refers to the same file description until the AsyncFd (and the OwnedFd in it) drops;
    // OwnedFd::as_raw_fd always returns the same number.
    unsafe { AsyncFd::register(fd).map_err(|e| e.into_parts().1) }
}
