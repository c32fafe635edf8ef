//! Direct flows: a connected TCP stream between two processes that carries a SCIF
//! connection's messages across hosts, dialed and authenticated by their daemons and
//! handed to each process. The stream then *is* the endpoint's descriptor ([`install`]),
//! so `poll`, `select` and `epoll` see its readiness directly: readable when bytes wait,
//! writable when the socket buffer has room, hung up once both directions are shut.
//!
//! Sends and receives never raise `SIGPIPE` and retry `EINTR` themselves, so a caller's
//! place in a message is only ever the byte count they return.
#![allow(unsafe_code)] // this file is part of the unsafe layer: every block has a SAFETY comment

use rustix::net::{RecvFlags, SendFlags, Shutdown};
use std::io;
use std::mem::ManuallyDrop;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::time::Duration;

/// Make the descriptor number of `target` refer to `flow` (close-on-exec, `TCP_NODELAY`,
/// blocking waits in slices: [`bound_waits`]), atomically: `target`'s old file is closed, its number stays valid throughout, and
/// `flow`'s own number is closed.
///
/// # Errors
/// The errno of `dup3`.
pub fn install(target: BorrowedFd<'_>, flow: OwnedFd) -> io::Result<()> {
    let _ = rustix::net::sockopt::set_tcp_nodelay(&flow, true);
    bound_waits(flow.as_fd());
    // SAFETY: the number belongs to `target`'s owner, who keeps it open across this call;
    // the temporary `OwnedFd` is never dropped (`ManuallyDrop`), so the number is closed
    // neither here nor twice. `dup3` replaces the file behind the number atomically.
    let mut num = ManuallyDrop::new(unsafe { OwnedFd::from_raw_fd(target.as_raw_fd()) });
    rustix::io::dup3(&flow, &mut num, rustix::io::DupFlags::CLOEXEC)?;
    Ok(())
}

/// How long one blocking [`send`] or [`recv`] on a flow sleeps at most before it returns
/// `WouldBlock` (`SO_SNDTIMEO`, `SO_RCVTIMEO`).
pub const WAIT_SLICE: Duration = Duration::from_millis(100);

/// Let blocking sends and receives on `flow` sleep at most [`WAIT_SLICE`] at a time, so
/// that the caller looks at the time (and the C libraries at a pending cancel of the
/// thread) between slices, without a system call more on the way of a message. `poll`
/// on the descriptor is unaffected. Errors are ignored (the waits then stay unbounded).
pub fn bound_waits(flow: BorrowedFd<'_>) {
    use rustix::net::sockopt::{set_socket_timeout, Timeout};
    let _ = set_socket_timeout(flow, Timeout::Recv, Some(WAIT_SLICE));
    let _ = set_socket_timeout(flow, Timeout::Send, Some(WAIT_SLICE));
}

/// Send some of `buf`: blocking until at least one byte is queued when `wait` (unless the
/// descriptor is `O_NONBLOCK`), else only what fits now. `EINTR` is retried.
///
/// # Errors
/// `WouldBlock` when nothing fits now; `EPIPE`/`ECONNRESET` and the like when the peer
/// is gone.
pub fn send(fd: BorrowedFd<'_>, buf: &[u8], wait: bool) -> io::Result<usize> {
    let mut flags = SendFlags::NOSIGNAL;
    if !wait {
        flags |= SendFlags::DONTWAIT;
    }
    loop {
        match rustix::net::send(fd, buf, flags) {
            Err(rustix::io::Errno::INTR) => continue,
            r => return r.map_err(io::Error::from),
        }
    }
}

/// Receive some bytes into `buf`: blocking until at least one byte (or the end) comes when
/// `wait` (unless the descriptor is `O_NONBLOCK`). `Ok(0)` for a non-empty `buf` is the
/// end of the peer's stream. `EINTR` is retried.
///
/// # Errors
/// `WouldBlock` when nothing waits; `ECONNRESET` and the like when the flow broke.
pub fn recv(fd: BorrowedFd<'_>, buf: &mut [u8], wait: bool) -> io::Result<usize> {
    let flags = if wait { RecvFlags::empty() } else { RecvFlags::DONTWAIT };
    loop {
        match rustix::net::recv(fd, &mut *buf, flags) {
            Err(rustix::io::Errno::INTR) => continue,
            r => return r.map(|(n, _)| n).map_err(io::Error::from),
        }
    }
}

/// Read the start of `buf` from `fd` for up to `spin`, without sleeping: receives that do
/// not wait, polled until `buf` is full or `spin` has passed. Returns how many bytes came
/// (the caller reads the rest with a blocking read). For a thread that waits for an answer
/// due within microseconds (a transfer's acknowledgement): its core stays awake meanwhile,
/// where a sleeping reader is woken on a halted core (tens of microseconds on a virtual
/// machine). `EINTR` is retried.
///
/// # Errors
/// `UnexpectedEof` when the peer's stream ended; the socket's error.
pub fn recv_spinning(fd: BorrowedFd<'_>, buf: &mut [u8], spin: Duration) -> io::Result<usize> {
    let mut at = 0;
    if spin.is_zero() {
        return Ok(0);
    }
    let start = std::time::Instant::now();
    while at < buf.len() {
        match recv(fd, &mut buf[at..], false) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => at += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if start.elapsed() >= spin {
                    break;
                }
                std::hint::spin_loop();
            }
            Err(e) => return Err(e),
        }
    }
    Ok(at)
}

/// Shut the flow down, both ways or (`write_only`) only our sending side: queued bytes
/// still go out first, then the end of the stream; every thread blocked on it wakes.
/// Errors (already shut, not connected) are ignored.
pub fn shutdown(fd: BorrowedFd<'_>, write_only: bool) {
    let how = if write_only { Shutdown::Write } else { Shutdown::Both };
    let _ = rustix::net::shutdown(fd, how);
}

/// End stream socket `fd` for every holder of it without a reset: shut its sending side
/// (what was queued still goes, then the end of the stream; a holder's next send fails),
/// then read and drop what the other end still sends until it ends its own side, and only
/// then shut it both ways. `true` when the other end ended (or the flow broke) within
/// `within`; otherwise the socket is handed to this process's reaper thread, which goes on
/// reading and dropping until the other end ends, for up to [`REAP_LIMIT`] more, and
/// returns `false` at once.
///
/// A socket shut for reading answers the other end's next bytes with a reset, which throws
/// away what our end sent and the other end has not yet acknowledged (what another holder
/// of ours wrote just before, on a flow that carries both directions), and what the other
/// end sent that we had not yet acknowledged. So it is never shut for reading while the
/// other end may still send: a route down for longer than `within` (a cable out) delivers
/// its retransmissions to a socket that still reads. Blocks the caller at most `within`;
/// interruptions are waited through.
pub fn end(fd: OwnedFd, within: Duration) -> bool {
    let _ = rustix::net::shutdown(&fd, Shutdown::Write);
    let start = std::time::Instant::now();
    let mut scratch = [0u8; 4096];
    let mut done = false;
    while let Some(left) = within.checked_sub(start.elapsed()) {
        match drain_step(fd.as_fd(), Some(left), &mut scratch) {
            Drained::Waiting => {}
            Drained::Quiet => break,
            Drained::Ended => {
                done = true;
                break;
            }
        }
    }
    if done {
        let _ = rustix::net::shutdown(&fd, Shutdown::Both);
    } else {
        reaper::hand(fd);
    }
    done
}

/// How long the reaper thread ([`end`]) reads an ended flow at most before it shuts it
/// both ways all the same: longer than a link's default heartbeat budget, so that a cable
/// out for the whole budget still finds the flow reading when it comes back.
pub const REAP_LIMIT: Duration = Duration::from_secs(60);

/// What one look at an ended flow found.
enum Drained {
    /// Bytes were read and dropped (or the look was interrupted): look again.
    Waiting,
    /// Nothing came within the wait.
    Quiet,
    /// The other end ended its side, or the flow broke: nothing more can come.
    Ended,
}

/// Wait up to `wait` (`None`: not at all) for `fd` to be readable, then read and drop what
/// waits.
fn drain_step(fd: BorrowedFd<'_>, wait: Option<Duration>, scratch: &mut [u8]) -> Drained {
    use rustix::event::{poll, PollFd, PollFlags};
    if let Some(left) = wait {
        let mut fds = [PollFd::new(&fd, PollFlags::IN | PollFlags::RDHUP)];
        let ts = crate::timespec(left);
        match poll(&mut fds, Some(&ts)) {
            Ok(0) => return Drained::Quiet,
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => return Drained::Waiting,
            Err(_) => return Drained::Ended,
        }
    }
    match recv(fd, scratch, false) {
        Ok(0) => Drained::Ended,
        Ok(_) => Drained::Waiting,
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Drained::Quiet,
        // Broken: nothing more can come.
        Err(_) => Drained::Ended,
    }
}

mod eager;
mod reaper;
mod tcp;
pub use eager::{recv_exact_eager, Eager, EAGER_PAYLOAD};
pub use tcp::{congestion, copy_own, kernel_id, set_congestion};

/// The shortest cap [`cap_backoff`] sets.
pub const BACKOFF_MIN_CAP: Duration = Duration::from_secs(1);

/// `TCP_RTO_MAX_MS` (Linux 6.15 and later; not in the `libc` crate yet).
const TCP_RTO_MAX_MS: libc::c_int = 44;

/// Let the kernel wait at most `budget / 10` (at least [`BACKOFF_MIN_CAP`]) between two
/// retransmissions on TCP socket `fd` (`TCP_RTO_MAX_MS`; by default the back-off doubles
/// up to 120 s), `budget` being how long the connection may lose every packet and still
/// live (a link's heartbeat budget). Bytes sent while a cable is out then go again soon
/// after its return (within a tenth of the budget: 3 s by default, 1 s with a short
/// heartbeat), instead of at the next of the doubling retries (about 12 s after a 15 s
/// cut): the connection itself resumes, nothing sent on it is lost or sent twice.
///
/// The kernel also gives a connection up after `tcp_retries2` (15) retransmissions, timed
/// with this cap (Linux 6.15 and later): a cap of 1 s ended every connection some 15 s
/// into a cut whatever its budget (reviewer 88). A tenth of the budget keeps that end
/// past the budget (the ramp to the cap, then eleven or so retries at it).
///
/// # Errors
/// `ENOPROTOOPT` on a kernel older than 6.15 (the back-off then stays the kernel's), or
/// `fd` is not a TCP socket.
pub fn cap_backoff(fd: BorrowedFd<'_>, budget: Duration) -> io::Result<()> {
    let cap = (budget / 10).max(BACKOFF_MIN_CAP);
    let ms = cap.as_millis().min(i32::MAX as u128) as libc::c_int;
    // SAFETY: `fd` is a live descriptor borrowed for the call; the option value is a
    // `c_int` on our stack, passed with its exact size, and only read by the kernel.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            TCP_RTO_MAX_MS,
            (&ms as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Whether `fd` is a stream socket of the internet families (a direct flow, not a doorbell).
pub fn is_flow(fd: BorrowedFd<'_>) -> bool {
    matches!(
        rustix::net::getsockname(fd),
        Ok(a) if matches!(a.address_family(), rustix::net::AddressFamily::INET | rustix::net::AddressFamily::INET6)
    )
}

/// A stream socket as a [`std::io::Write`] whose writes never raise `SIGPIPE`: sends with
/// `MSG_NOSIGNAL`, the gathering ones through `sendmsg` (`Write::write_vectored` on a
/// `TcpStream` is a plain `writev`, which raises `SIGPIPE` in a C program that keeps the
/// signal's default action when the peer is gone). Timeouts set on the socket apply.
#[derive(Debug, Clone, Copy)]
pub struct Quiet<'a>(pub BorrowedFd<'a>);

impl io::Write for Quiet<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        rustix::net::send(self.0, buf, SendFlags::NOSIGNAL).map_err(io::Error::from)
    }

    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        let mut control = rustix::net::SendAncillaryBuffer::default();
        rustix::net::sendmsg(self.0, bufs, &mut control, SendFlags::NOSIGNAL).map_err(io::Error::from)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The CPU that handled the last segment `fd` received (`SO_INCOMING_CPU`: on a loopback
/// or veth stream, the sending thread's; on a NIC, its interrupt's). `None` when the kernel
/// does not say.
pub fn incoming_cpu(fd: BorrowedFd<'_>) -> Option<usize> {
    let cpu = rustix::net::sockopt::socket_incoming_cpu(fd).ok()?;
    (cpu as i32 >= 0).then_some(cpu as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsFd;

    /// A loopback stream says which CPU sent what it received last: one the sending thread,
    /// held to one CPU, ran on (the kernel's loopback delivery runs on the sender's CPU).
    #[test]
    fn a_loopback_stream_says_the_cpu_its_bytes_came_in_on() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut tx = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut rx, _) = l.accept().unwrap();
        let cpus = crate::sched::thread_cpus().unwrap();
        let last = (0..crate::sched::MAX_CPUS).rev().find(|c| cpus.has(*c)).unwrap();
        std::thread::spawn(move || {
            crate::sched::hold_thread_to(last).unwrap();
            tx.write_all(&[1]).unwrap();
        })
        .join()
        .unwrap();
        rx.read_exact(&mut [0u8; 1]).unwrap();
        assert_eq!(incoming_cpu(rx.as_fd()), Some(last));
        assert!(crate::sched::hold_thread_to(crate::sched::MAX_CPUS).is_err(), "a CPU past the set's end");
    }

    #[test]
    fn the_backoff_cap_is_taken_by_tcp_sockets_only() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        match cap_backoff(a.as_fd(), Duration::from_secs(30)) {
            Ok(()) => {}
            // A kernel before 6.15 has no such option.
            Err(e) => assert_eq!(e.raw_os_error(), Some(92), "{e}"),
        }
        let (bell, _ringer) = crate::bell::pair().unwrap();
        assert!(cap_backoff(bell.as_fd(), Duration::from_secs(30)).is_err());
    }

    #[test]
    fn install_replaces_the_file_behind_a_number_and_shutdown_ends_the_stream() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut b, _) = l.accept().unwrap();
        let (target, _ringer) = crate::bell::pair().unwrap();
        let num = target.as_raw_fd();
        assert!(!is_flow(target.as_fd()));
        install(target.as_fd(), OwnedFd::from(a)).unwrap();
        assert_eq!(target.as_raw_fd(), num);
        assert!(is_flow(target.as_fd()));
        assert_eq!(send(target.as_fd(), b"hello", true).unwrap(), 5);
        let mut got = [0u8; 5];
        b.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"hello");
        let mut r = [0u8; 8];
        let e = recv(target.as_fd(), &mut r, false).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        b.write_all(b"back").unwrap();
        assert_eq!(recv(target.as_fd(), &mut r, true).unwrap(), 4);
        // Bytes queued before our own shutdown can still be taken after it.
        b.write_all(b"late").unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        drop(b);
        shutdown(target.as_fd(), false);
        assert_eq!(recv(target.as_fd(), &mut r, true).unwrap(), 4);
        assert_eq!(recv(target.as_fd(), &mut r, true).unwrap(), 0);
        let ready = crate::bell::wait(target.as_fd(), false, Some(std::time::Duration::ZERO)).unwrap();
        assert!(ready.hung_up);
    }

    /// Sends `byte`s on `fd` until the socket takes no more; how many it took.
    fn fill(fd: BorrowedFd<'_>, byte: u8) -> usize {
        let mut sent = 0usize;
        let chunk = [byte; 4096];
        loop {
            match send(fd, &chunk, false) {
                Ok(n) => sent += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return sent,
                Err(e) => panic!("{e}"),
            }
        }
    }

    /// Reads `s` until its end of stream, every byte `byte`; how many came (`sent` only
    /// names what was sent, in a failure's message).
    fn read_to_end(s: &mut TcpStream, byte: u8, sent: usize) -> usize {
        let mut got = 0usize;
        let mut buf = [0u8; 65536];
        loop {
            match s.read(&mut buf) {
                Ok(0) => return got,
                Ok(n) => {
                    assert!(buf[..n].iter().all(|x| *x == byte));
                    got += n;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => panic!("after {got} of {sent} bytes: {e}"),
            }
        }
    }

    /// A flow ended while the other end still sends: everything we had sent reaches it
    /// (queued, not yet taken there), then the end of the stream. A socket shut both ways
    /// answered the other end's next bytes with a reset, which threw our queued bytes away.
    #[test]
    fn an_end_loses_nothing_sent_while_the_other_end_still_sends() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut b, _) = l.accept().unwrap();
        // More than the other end takes before it reads: some stays queued here.
        let sent = fill(a.as_fd(), 7);
        b.write_all(b"before").unwrap();
        let ender = std::thread::spawn(move || end(a.into(), Duration::from_secs(20)));
        std::thread::sleep(Duration::from_millis(100));
        // The other end sends on after the end began (these are read and dropped).
        for _ in 0..10 {
            b.write_all(b"after").unwrap();
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(read_to_end(&mut b, 7, sent), sent);
        // The other end ends its side: the end saw it in time.
        b.shutdown(std::net::Shutdown::Write).unwrap();
        assert!(ender.join().unwrap());
    }

    /// The other end sends on after the end's own wait passed (a route out for longer):
    /// the flow still reads (the reaper thread), so nothing we had sent is thrown away by a
    /// reset, and it is shut once the other end ends. Shut both ways after the wait, the
    /// other end's next bytes were answered with a reset.
    #[test]
    fn an_end_that_waited_out_its_time_still_reads_until_the_other_end_ends() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut b, _) = l.accept().unwrap();
        let sent = fill(a.as_fd(), 9);
        // Nothing comes within the end's wait: it hands the flow on and says so.
        assert!(!end(a.into(), Duration::from_millis(50)));
        std::thread::sleep(Duration::from_millis(300));
        for _ in 0..10 {
            b.write_all(b"late").unwrap();
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(read_to_end(&mut b, 9, sent), sent);
        // The other end ends its side: the reaper then lets the flow go (closes it), and a
        // write from the other end soon fails (answered with a reset).
        b.shutdown(std::net::Shutdown::Write).unwrap();
        let t = std::time::Instant::now();
        while b.write(b"x").is_ok() {
            assert!(t.elapsed() < Duration::from_secs(20), "the reaper never let the flow go");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn a_spinning_receive_takes_what_comes_and_says_how_much() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut b, _) = l.accept().unwrap();
        let mut buf = [0u8; 8];
        // Nothing sent: nothing taken, after the spin (no spin: at once).
        assert_eq!(recv_spinning(a.as_fd(), &mut buf, Duration::ZERO).unwrap(), 0);
        assert_eq!(recv_spinning(a.as_fd(), &mut buf, Duration::from_micros(200)).unwrap(), 0);
        // Part of it: that part, in place; the rest left for a blocking read.
        b.write_all(b"abc").unwrap();
        let n = recv_spinning(a.as_fd(), &mut buf, Duration::from_millis(200)).unwrap();
        assert_eq!((n, &buf[..3]), (3, &b"abc"[..]));
        // The rest comes while it spins (another thread sends it a moment later).
        let sender = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(2));
            b.write_all(b"defgh").unwrap();
            b
        });
        let more = recv_spinning(a.as_fd(), &mut buf[3..], Duration::from_secs(10)).unwrap();
        assert_eq!((more, &buf), (5, b"abcdefgh"));
        // The peer's end: an error, not zero bytes.
        drop(sender.join().unwrap());
        let e = recv_spinning(a.as_fd(), &mut buf, Duration::from_secs(10)).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
    }

    #[test]
    fn quiet_writes_to_a_gone_peer_fail_with_epipe() {
        use std::io::Write;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let a = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        drop(b);
        let mut w = Quiet(a.as_fd());
        let chunk = [7u8; 4096];
        let t = std::time::Instant::now();
        // The first sends may still be taken; then the reset peer refuses them.
        let e = loop {
            match w.write_vectored(&[io::IoSlice::new(&chunk), io::IoSlice::new(&chunk)]) {
                Ok(_) => assert!(t.elapsed() < Duration::from_secs(5), "the gone peer took everything"),
                Err(e) => break e,
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        assert!(matches!(e.kind(), io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset), "{e}");
        assert!(w.write(&chunk).is_err());
    }
}
