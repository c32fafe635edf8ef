//! An async view of a `SOCK_SEQPACKET` control connection (tokio `AsyncFd` over the
//! `remora-sys` calls). Only the daemon uses it, behind the `tokio` feature.
//!
//! The socket is registered for reading only. A Unix socket tells its writer that there is
//! room again every time the other end takes a message (`unix_write_space` wakes whoever
//! waits on the writer's socket, full or not): registered for writing too, the daemon was
//! woken once more for every reply and event a process read, on the process's core and at
//! the daemon's high priority, right when the process went on with its call (issue 19).
//! A send tries the socket first and waits for room only when it is full, through a
//! registration for writing made for that wait and dropped after it.

#![allow(unsafe_code)] // this file is part of the unsafe layer: every block has a SAFETY comment
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

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
        Ok(AsyncConn { fd: register_as(fd, Interest::READABLE)? })
    }

    /// The socket.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.get_ref().as_fd()
    }

    /// Receive one message into `buf` (which must hold [`RECV_BUF`] bytes); `(0, [])`
    /// means the peer closed. Cancel-safe.
    ///
    /// # Errors
    /// The errno of `recvmsg`, or `EMSGSIZE` for an oversized message, or
    /// [`crate::seqpacket::DescriptorsLost`] for one that came without its descriptors.
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
            match crate::seqpacket::send(self.fd(), bytes, fds) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.room().await?,
                r => return r,
            }
        }
    }

    /// Wait until the socket may take a message again: a second descriptor of the socket,
    /// registered for writing only while this waits (a registration made while there is
    /// room already reports it at once, so no wake-up is lost between the full send and
    /// this).
    async fn room(&self) -> io::Result<()> {
        let writer = register_as(self.fd().try_clone_to_owned()?, Interest::WRITABLE)?;
        let mut guard = writer.writable().await?;
        guard.clear_ready();
        Ok(())
    }

    /// Resolve when the peer has hung up (waiting messages do not count).
    ///
    /// Clears the descriptor's readiness only when a look shows no message waiting (a
    /// message that comes after the look raises it again, so the next `recv` still wakes):
    /// the readiness a `recv` leaves behind would otherwise make every wait look again
    /// on a timer, and arming that timer woke the daemon's loop once more for every
    /// request it passed on to another node (issue 19). While a message waits, the peer is
    /// re-checked every 20 ms.
    pub async fn hangup(&self) {
        loop {
            let Ok(mut ready) = self.fd.readable().await else { return };
            match look(self.fd()) {
                Look::Closed => return,
                Look::Empty => ready.clear_ready(),
                Look::Waiting => {
                    drop(ready);
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                }
            }
        }
    }
}

/// What a look at a socket's next message shows.
enum Look {
    /// The peer hung up.
    Closed,
    /// No message waits.
    Empty,
    /// A message waits (or the look failed: look again later).
    Waiting,
}

fn look(fd: BorrowedFd<'_>) -> Look {
    let mut b = [std::mem::MaybeUninit::<u8>::uninit(); 1];
    let flags = rustix::net::RecvFlags::PEEK | rustix::net::RecvFlags::DONTWAIT;
    loop {
        return match rustix::net::recv(fd, &mut b, flags) {
            Err(rustix::io::Errno::INTR) => continue,
            Ok((_, 0)) | Err(rustix::io::Errno::CONNRESET) => Look::Closed,
            Err(rustix::io::Errno::AGAIN) => Look::Empty,
            _ => Look::Waiting,
        };
    }
}

/// Register an owned descriptor with the reactor.
///
/// # Errors
/// The errno of `epoll_ctl`.
pub fn register(fd: OwnedFd) -> io::Result<AsyncFd<OwnedFd>> {
    register_as(fd, Interest::READABLE | Interest::WRITABLE)
}

/// Register an owned descriptor with the reactor for `interest` only.
fn register_as(fd: OwnedFd, interest: Interest) -> io::Result<AsyncFd<OwnedFd>> {
    // SAFETY: the AsyncFd takes ownership of the OwnedFd, so the descriptor stays open and
    // refers to the same file description until the AsyncFd (and the OwnedFd in it) drops
    // (it deregisters before closing it); OwnedFd::as_raw_fd always returns the same number.
    unsafe { AsyncFd::register_with_interest(fd, interest).map_err(|e| e.into_parts().1) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numbered(n: u32) -> Vec<u8> {
        let mut m = vec![0u8; 2048];
        m[..4].copy_from_slice(&n.to_le_bytes());
        m
    }

    #[test]
    fn a_send_to_a_full_socket_waits_for_room_then_goes_in_order_and_receives_still_work() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let (ours, theirs) = crate::seqpacket::pair().unwrap();
            let conn = AsyncConn::new(ours).unwrap();
            // Fill the socket until it refuses.
            let mut sent = 0u32;
            loop {
                match crate::seqpacket::send(conn.fd(), &numbered(sent), &[]) {
                    Ok(()) => sent += 1,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) => panic!("send failed: {e}"),
                }
            }
            assert!(sent > 0);
            // The other end reads everything a moment later, then answers once.
            let reader = std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(50));
                let mut buf = vec![0u8; RECV_BUF];
                let got: Vec<u32> = (0..=sent)
                    .map(|_| {
                        let (n, _) = crate::seqpacket::recv(theirs.as_fd(), &mut buf).unwrap();
                        assert_eq!(n, 2048);
                        u32::from_le_bytes(buf[..4].try_into().unwrap())
                    })
                    .collect();
                crate::seqpacket::send(theirs.as_fd(), b"back", &[]).unwrap();
                (got, theirs)
            });
            // Full: this send waits for room, and goes after the others.
            conn.send(&numbered(sent), &[]).await.unwrap();
            let mut buf = vec![0u8; RECV_BUF];
            let (n, _) = conn.recv(&mut buf).await.unwrap();
            assert_eq!(&buf[..n], b"back");
            let (got, theirs) = reader.join().unwrap();
            assert_eq!(got, (0..=sent).collect::<Vec<_>>());
            // The other end gone: a send says so instead of waiting.
            drop(theirs);
            assert!(conn.send(b"late", &[]).await.is_err());
        });
    }

    #[test]
    fn hangup_waits_quietly_lets_later_messages_through_and_sees_the_peer_go() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let (ours, theirs) = crate::seqpacket::pair().unwrap();
            let conn = AsyncConn::new(ours).unwrap();
            let mut buf = vec![0u8; RECV_BUF];
            crate::seqpacket::send(theirs.as_fd(), b"one", &[]).unwrap();
            assert_eq!(conn.recv(&mut buf).await.unwrap().0, 3);
            // The readiness that receive left behind is no hang-up.
            let quiet = std::time::Duration::from_millis(100);
            assert!(tokio::time::timeout(quiet, conn.hangup()).await.is_err());
            // A message after the look still wakes a receive.
            crate::seqpacket::send(theirs.as_fd(), b"two!", &[]).unwrap();
            let got =
                tokio::time::timeout(quiet, conn.recv(&mut buf)).await.expect("the message woke no receive");
            assert_eq!(got.unwrap().0, 4);
            // A waiting message is no hang-up either.
            crate::seqpacket::send(theirs.as_fd(), b"three", &[]).unwrap();
            assert!(tokio::time::timeout(quiet, conn.hangup()).await.is_err());
            assert_eq!(conn.recv(&mut buf).await.unwrap().0, 5);
            // The peer gone: seen while waiting.
            let wait = tokio::spawn(async move { conn.hangup().await });
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            drop(theirs);
            tokio::time::timeout(std::time::Duration::from_secs(5), wait)
                .await
                .expect("hang-up not seen")
                .unwrap();
        });
    }
}
