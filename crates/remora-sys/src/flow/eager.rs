//! Reading a frame's payload eagerly: polling while its segments come, one reader of the
//! process at a time, instead of sleeping between them.

use super::recv;
use std::io;
use std::os::fd::AsFd;
use std::os::fd::BorrowedFd;
use std::time::Duration;

/// Fill all of `buf` from `fd`, a stream whose bytes are on their way (the rest of a frame
/// its peer is sending): receives that do not wait, polled while the bytes keep coming,
/// and a blocking receive only once `gap` passed without any (then polling again). A
/// reader that sleeps between the segments of a frame is woken on a halted core for each:
/// tens of microseconds on a virtual machine, where the segments of a 1 MiB frame come a
/// few microseconds apart (a raw TCP stream of 1 MiB pieces, each answered, moved 5.6 GB/s
/// with a sleeping reader and 7.5-8.0 with one polling up to 20 µs, loopback, two cores).
/// Between two looks it yields its core to any thread waiting for it, so a machine whose
/// cores are all busy (an all-to-all) loses nothing to the poll: a yield where no thread
/// waits returns at once. Only one reader of the process polls at a time. `EINTR` is
/// retried.
///
/// # Errors
/// `UnexpectedEof` when the peer's stream ended first; the socket's error (its receive
/// timeout, if set, as `WouldBlock`).
pub fn recv_exact_eager(fd: BorrowedFd<'_>, buf: &mut [u8], gap: Duration) -> io::Result<()> {
    let mut at = 0;
    let mut idle: Option<std::time::Instant> = None;
    // Only one reader of the process polls at a time: readers of several streams at once
    // (four DMA queues, an all-to-all) polling side by side took the cores their senders
    // and each other needed; the others sleep as before.
    let mut polling = Poller::take();
    while at < buf.len() {
        let wait = polling.is_none() || idle.is_some_and(|t| t.elapsed() >= gap);
        if wait {
            // About to sleep: another reader may poll meanwhile.
            polling = None;
        }
        match recv(fd, &mut buf[at..], wait) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => {
                at += n;
                idle = None;
                if polling.is_none() && at < buf.len() {
                    polling = Poller::take();
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock && !wait => {
                idle.get_or_insert_with(std::time::Instant::now);
                std::thread::yield_now();
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Whether a reader of this process polls now ([`recv_exact_eager`]).
static POLLING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The one place to poll, held while a reader polls.
struct Poller;

impl Poller {
    /// The place, if no other reader holds it.
    fn take() -> Option<Poller> {
        use std::sync::atomic::Ordering;
        (!POLLING.load(Ordering::Relaxed) && !POLLING.swap(true, Ordering::Acquire)).then_some(Poller)
    }
}

impl Drop for Poller {
    fn drop(&mut self) {
        POLLING.store(false, std::sync::atomic::Ordering::Release);
    }
}

/// The payloads read eagerly ([`Eager`]): a frame's of at least this many bytes (a page
/// fetch's or a flush's shorter ones come in one or two segments).
pub const EAGER_PAYLOAD: usize = 64 << 10;

/// A stream socket read as [`io::Read`], whose `read_exact` of at least `min` bytes (a
/// frame's payload, on its way) is [`recv_exact_eager`] with `gap`; every other read is
/// the stream's own (a reader waiting for the next frame sleeps at once). A zero `gap`
/// never polls.
#[derive(Debug)]
pub struct Eager<S> {
    s: S,
    gap: Duration,
    min: usize,
}

impl<S> Eager<S> {
    /// Read `s`, polling up to `gap` between the segments of reads of `min` bytes or more.
    pub fn new(s: S, gap: Duration, min: usize) -> Eager<S> {
        Eager { s, gap, min }
    }

    /// The stream.
    pub fn get_ref(&self) -> &S {
        &self.s
    }
}

impl<S: io::Read + AsFd> io::Read for Eager<S> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.s.read(buf)
    }

    fn read_vectored(&mut self, bufs: &mut [io::IoSliceMut<'_>]) -> io::Result<usize> {
        self.s.read_vectored(bufs)
    }

    fn read_exact(&mut self, buf: &mut [u8]) -> io::Result<()> {
        if buf.len() >= self.min && !self.gap.is_zero() {
            recv_exact_eager(self.s.as_fd(), buf, self.gap)
        } else {
            self.s.read_exact(buf)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::{TcpListener, TcpStream};

    /// An eager read fills its buffer from a stream whose bytes come in pieces with pauses
    /// (longer than its gap, so it also sleeps), and says the end of a stream cut short.
    #[test]
    fn an_eager_read_fills_its_buffer_across_pauses_and_sees_an_early_end() {
        use std::io::Read as _;
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut tx = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (rx, _) = l.accept().unwrap();
        let sender = std::thread::spawn(move || {
            for k in 0..4u8 {
                tx.write_all(&[k; 1000]).unwrap();
                std::thread::sleep(Duration::from_millis(5));
            }
            tx.write_all(&[9; 10]).unwrap();
        });
        let mut r = Eager::new(&rx, Duration::from_micros(20), 1000);
        let mut buf = vec![0u8; 4000];
        r.read_exact(&mut buf).unwrap();
        assert!((0..4).all(|k| buf[k * 1000..(k + 1) * 1000].iter().all(|&b| b == k as u8)));
        sender.join().unwrap();
        let mut short = [0u8; 1000];
        let e = r.read_exact(&mut short).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        assert!(short[..10].iter().all(|&b| b == 9), "the bytes that came are there");
    }

    /// One reader of the process polls at a time; the place is free again once it is done.
    #[test]
    fn one_reader_polls_at_a_time() {
        let first = Poller::take();
        // Another test's eager read may hold the place: then this one gets none either.
        if let Some(held) = first {
            assert!(Poller::take().is_none(), "a second poller while one polls");
            drop(held);
            assert!(Poller::take().is_some(), "free again");
        }
    }
}
