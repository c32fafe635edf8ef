//! Doorbells: the file descriptor that stands for a SCIF endpoint.
//!
//! A SCIF endpoint must be a real descriptor that `poll`, `select` and `epoll` understand,
//! yet its data moves through shared memory. A doorbell is a connected pair of Unix
//! stream sockets: the *reader* end is the endpoint descriptor the program holds, the
//! *ringer* end is held by whoever must make it ready (the peer process, the daemon, the
//! endpoint's own library).
//!
//! * **Readable**: a byte was rung into the reader ([`ring`]).
//! * **Hang-up**: someone shut the ringer down ([`hang_up`]): the reader then reports
//!   `POLLIN | POLLHUP` for good, and every thread blocked on it wakes.
//! * **Writable**: normally always. [`stuff`] fills the reader's send buffer so that it is
//!   *not* writable (a full send queue, a connect still in flight); [`unstuff`] (reading
//!   on the ringer) makes it writable again. The reader's send buffer is kept small so
//!   stuffing is a few kilobytes.
//!
//! All operations are non-blocking (`MSG_DONTWAIT`) whatever the descriptor's own flags,
//! so a program may set `O_NONBLOCK` on its endpoint without changing how we use it, and
//! none raises `SIGPIPE` (`MSG_NOSIGNAL`).

use rustix::event::{PollFd, PollFlags};
use rustix::net::{AddressFamily, RecvFlags, SendFlags, Shutdown, SocketFlags, SocketType};
use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::time::Duration;

/// A new doorbell: `(reader, ringer)`, both close-on-exec and blocking.
///
/// # Errors
/// The errno of `socketpair`.
pub fn pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let (r, w) =
        rustix::net::socketpair(AddressFamily::UNIX, SocketType::STREAM, SocketFlags::CLOEXEC, None)?;
    // The kernel doubles the value and applies its minimum; a small buffer keeps stuffing cheap.
    let _ = rustix::net::sockopt::set_socket_send_buffer_size(&r, 4096);
    Ok((r, w))
}

/// Ring: make the reader readable. A closed or shut-down ringer is ignored (the reader
/// already reports hang-up).
pub fn ring(ringer: BorrowedFd<'_>) {
    let _ = rustix::net::send(ringer, &[1u8], SendFlags::DONTWAIT | SendFlags::NOSIGNAL);
}

/// Take every rung byte off the reader; returns how many there were.
pub fn drain(reader: BorrowedFd<'_>) -> usize {
    let mut buf = [0u8; 256];
    let mut total = 0;
    loop {
        match rustix::net::recv(reader, &mut buf[..], RecvFlags::DONTWAIT) {
            Ok((0, _)) | Err(_) => return total,
            Ok((n, _)) => {
                total += n;
                if n < buf.len() {
                    return total;
                }
            }
        }
    }
}

/// Take at most one rung byte off the reader; whether there was one.
pub fn take_one(reader: BorrowedFd<'_>) -> bool {
    let mut b = [0u8; 1];
    matches!(rustix::net::recv(reader, &mut b[..], RecvFlags::DONTWAIT), Ok((1, _)))
}

/// Shut the doorbell down both ways: the reader reports hang-up and every poller wakes.
pub fn hang_up(fd: BorrowedFd<'_>) {
    let _ = rustix::net::shutdown(fd, Shutdown::Both);
}

/// Make the reader not writable by filling its send buffer.
pub fn stuff(reader: BorrowedFd<'_>) {
    let zeros = [0u8; 4096];
    for _ in 0..64 {
        match rustix::net::send(reader, &zeros, SendFlags::DONTWAIT | SendFlags::NOSIGNAL) {
            Ok(n) if n > 0 => {}
            _ => return,
        }
    }
}

/// Make the reader writable again: read what [`stuff`] wrote, on the ringer.
///
/// Reads what is there and stops at the first read that leaves the socket empty: the
/// stuffer may stuff anew as soon as it sees room (before this returns), and a reader
/// that went on until a read came back empty took that new stuffing too, over and over,
/// each time waking the stuffer for nothing.
pub fn unstuff(ringer: BorrowedFd<'_>) {
    // More than a stuffing holds (the reader's small send buffer): one read takes it all.
    let mut buf = [0u8; 32768];
    for _ in 0..64 {
        match rustix::net::recv(ringer, &mut buf[..], RecvFlags::DONTWAIT) {
            Ok((n, _)) if n == buf.len() => {}
            _ => return,
        }
    }
}

/// A doorbell's flag word (shared with the other side), as [`ring_once`] and [`take`] use
/// it: nothing rung.
pub const IDLE: u32 = 0;
/// A ringer is between claiming the flag and its byte's arrival.
pub const RINGING: u32 = 1;
/// A byte waits in the reader.
pub const RUNG: u32 = 2;

/// Ring unless already rung: at most one byte waits per flag, and the flag says `RUNG`
/// only once the byte is there, so [`take`] never misses it nor leaves it behind.
pub fn ring_once(flag: &std::sync::atomic::AtomicU32, ringer: BorrowedFd<'_>) {
    use std::sync::atomic::Ordering;
    if flag.compare_exchange(IDLE, RINGING, Ordering::SeqCst, Ordering::SeqCst).is_ok() {
        ring(ringer);
        flag.store(RUNG, Ordering::SeqCst);
    }
}

/// Take the byte a [`ring_once`] left (waiting out a ringer that is mid-way), and clear the
/// flag. Returns whether there was one.
pub fn take(flag: &std::sync::atomic::AtomicU32, reader: BorrowedFd<'_>) -> bool {
    use std::sync::atomic::Ordering;
    let mut n = 0u32;
    loop {
        match flag.load(Ordering::SeqCst) {
            IDLE => return false,
            RUNG => {
                drain(reader);
                flag.store(IDLE, Ordering::SeqCst);
                return true;
            }
            _ => {
                // The ringer is inside its send(2): brief, but it may be preempted.
                n += 1;
                if n < 1000 {
                    std::hint::spin_loop();
                } else {
                    std::thread::sleep(Duration::from_micros(20));
                }
            }
        }
    }
}

/// What `poll` says of a descriptor right now or within `timeout` (`None`: forever).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Ready {
    /// `POLLIN`.
    pub readable: bool,
    /// `POLLOUT`.
    pub writable: bool,
    /// `POLLHUP`, `POLLERR` or `POLLNVAL`.
    pub hung_up: bool,
}

/// Wait until `fd` is readable (or writable, when `want_write`) or hung up, at most
/// `timeout`. Interruptions return what is ready (possibly nothing).
///
/// # Errors
/// The errno of `ppoll` other than `EINTR`.
pub fn wait(fd: BorrowedFd<'_>, want_write: bool, timeout: Option<Duration>) -> io::Result<Ready> {
    let mut flags = PollFlags::IN;
    if want_write {
        flags |= PollFlags::OUT;
    }
    let mut p = [PollFd::new(&fd, flags)];
    let ts = timeout.map(crate::timespec);
    match rustix::event::poll(&mut p, ts.as_ref()) {
        Ok(_) | Err(rustix::io::Errno::INTR) => {}
        Err(e) => return Err(e.into()),
    }
    let r = p[0].revents();
    Ok(Ready {
        readable: r.contains(PollFlags::IN),
        writable: r.contains(PollFlags::OUT),
        hung_up: r.intersects(PollFlags::HUP | PollFlags::ERR | PollFlags::NVAL),
    })
}

/// Whether the descriptor has `O_NONBLOCK` set (by the program, with `fcntl`).
pub fn is_nonblocking(fd: BorrowedFd<'_>) -> bool {
    rustix::fs::fcntl_getfl(fd).is_ok_and(|f| f.contains(rustix::fs::OFlags::NONBLOCK))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn ring_drain_hang_up() {
        let (r, w) = pair().unwrap();
        let now = Some(Duration::ZERO);
        assert_eq!(wait(r.as_fd(), false, now).unwrap(), Ready::default());
        ring(w.as_fd());
        ring(w.as_fd());
        assert!(wait(r.as_fd(), false, now).unwrap().readable);
        assert_eq!(drain(r.as_fd()), 2);
        assert!(!wait(r.as_fd(), false, now).unwrap().readable);
        assert!(wait(r.as_fd(), true, now).unwrap().writable);
        stuff(r.as_fd());
        assert!(!wait(r.as_fd(), true, now).unwrap().writable);
        unstuff(w.as_fd());
        assert!(wait(r.as_fd(), true, now).unwrap().writable);
        hang_up(w.as_fd());
        let got = wait(r.as_fd(), false, None).unwrap();
        assert!(got.hung_up && got.readable);
        ring(w.as_fd());
    }

    #[test]
    fn flagged_rings_leave_one_byte_and_take_clears_it() {
        use std::sync::atomic::AtomicU32;
        let (r, w) = pair().unwrap();
        let flag = AtomicU32::new(IDLE);
        let now = Some(Duration::ZERO);
        assert!(!take(&flag, r.as_fd()));
        ring_once(&flag, w.as_fd());
        ring_once(&flag, w.as_fd());
        assert_eq!(flag.load(std::sync::atomic::Ordering::SeqCst), RUNG);
        assert!(wait(r.as_fd(), false, now).unwrap().readable);
        assert!(take(&flag, r.as_fd()));
        assert!(!wait(r.as_fd(), false, now).unwrap().readable, "no byte left behind");
        assert_eq!(flag.load(std::sync::atomic::Ordering::SeqCst), IDLE);
    }
}
