//! A VI pair's own stream across hosts, for short messages: the completion entry of a send
//! whose payload rides inside it goes straight from the sending process to the receiving
//! one, which reads it from the socket itself (one wake-up, as raw TCP's reader has)
//! instead of through its node's thread that serves the channel and then a `futex`.
//!
//! The stream is made at connect: a requester that can dial (it finds the acceptor's host
//! in its cluster file) says so in its VI description; the accepting side then listens on
//! its host's address (the cluster file's) with a one-time 128-bit token that travels in
//! its VI description through the nodes, the requesting side dials it (within the
//! request's timeout) and sends the token, the acceptor answers one byte, and the
//! requester, which holds the stream from then on, confirms with one byte, upon which the
//! acceptor holds it too. So each side sends on it only once it knows the other reads it:
//! the requester once the acceptor answered, the acceptor once confirmed. A side that
//! cannot finish its part within [`HANDSHAKE_WAIT`] goes on without the stream (every
//! message then takes the channel); an acceptor that answered and then heard neither the
//! confirmation nor the end within [`CONFIRM_WAIT`] cannot know which the requester chose,
//! and breaks the VI (`VIP_ERROR_CONN_LOST`) before it describes a receive.
//!
//! Frames are [`FRAME`] bytes: the message's sequence number, then its completion line as
//! the channel would have stored it (entry and sequence word). A *mark* (the number's top
//! bit) says that message goes by the channel. A message rides the stream only when it is
//! short and the one before it was too: a receiver that took a short message last waits on
//! the stream, one that took a long one on its done count, and a message after a short one
//! that takes the channel (a long one, or a short one behind an RDMA write's bytes, which
//! must land first) is announced on the stream by a mark, so a waiter always sleeps where
//! its next message will wake it. At most [`ENTRIES`] messages are in flight (the receives
//! posted), but a mark stays in the socket until the receiver reads the stream: a receiver
//! that takes a message by the channel right after a short one reads the stream once for
//! its mark ([`Direct::owes_mark`]), and one whose done count covers a message that is not
//! in its ring reads it for the entry, so neither pile up while the receiver keeps taking
//! messages. A stream that breaks on the receiving side (a frame outside the ring's window,
//! an entry that cannot be stored, a read error, or its end without the peer saying it is
//! gone within [`END_GRACE`]) breaks the VI with `VIP_ERROR_CONN_LOST` ([`Direct::broken`]).

use crate::layout::{self, status, COMPLETION, ENTRIES};
use crate::window::Window;
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long either side waits for the other to finish making the stream.
pub(crate) const HANDSHAKE_WAIT: Duration = Duration::from_secs(3);
/// How long an acceptor that answered waits for the requester's confirmation (or its
/// end): longer than the requester waits for the answer, so it hears one of the two unless
/// the requester's host stalls.
const CONFIRM_WAIT: Duration = Duration::from_secs(6);
/// How long after the stream's end the peer's word that it is gone may take to come (it
/// ends the stream, then says so by the channel) before the VI breaks.
const END_GRACE: Duration = Duration::from_secs(5);
/// How long a waiter's read of the stream blocks before it looks at the VI again.
pub(crate) const WAIT_SLICE: Duration = Duration::from_millis(10);
/// How long a write may wait for room (never, in practice: see the module doc) before the
/// stream counts as failed.
const WRITE_WAIT: Duration = Duration::from_secs(10);
/// A frame: the sequence number, then the completion line.
pub(crate) const FRAME: usize = 8 + COMPLETION;
/// The top bit of a frame's number: a mark (the message goes by the channel).
const MARK: u64 = 1 << 63;
/// Frames read in one look.
const BATCH: usize = 32;

/// Whether a completion rides the stream: a send's (not an RDMA write's immediate data,
/// whose bytes go by the channel) with its payload inline. The sender and the receiver
/// judge the same entry by the same rule.
#[inline]
pub(crate) fn is_short(st: u32, inline: bool) -> bool {
    inline && st & 0x70000 == status::OP_RECEIVE
}

/// What a requester's VI description carries in place of an offer when it can dial one
/// (an acceptor's offer never names port 0). A description without it (an older library's
/// too) gets no offer: no acceptor waits for a dial that cannot come.
pub(crate) const CAN_DIAL: (u16, u128) = (0, 0);

/// The cluster file's host of `node`, as the configuration of `cfg` finds it.
pub(crate) fn host_of(cfg: &remora_client::Config, node: u32) -> Option<String> {
    let cluster = match &cfg.cluster {
        Some(p) => remora_config::cluster::Cluster::load(p).ok()?,
        None => {
            remora_config::cluster::Cluster::load(std::path::Path::new("/etc/remora/cluster.toml")).ok()?
        }
    };
    cluster.addr(node).map(|a| a.host.clone())
}

/// Whether two tokens are equal, in a time that does not depend on where they differ.
fn same_token(a: u128, b: u128) -> bool {
    let (a, b) = (a.to_le_bytes(), b.to_le_bytes());
    a.iter().zip(b.iter()).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

fn token() -> Option<u128> {
    let mut b = [0u8; 16];
    std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut b)).ok()?;
    Some(u128::from_le_bytes(b))
}

/// The accepting side's offer: a listener on its host's address and the token it awaits.
#[derive(Debug)]
pub(crate) struct Offer {
    listener: TcpListener,
    pub(crate) token: u128,
}

impl Offer {
    /// Listen on `host` (any port); `None` when that cannot be done.
    pub(crate) fn open(host: &str) -> Option<Offer> {
        let addr = (host, 0).to_socket_addrs().ok()?.next()?;
        let listener = TcpListener::bind(addr).ok()?;
        Some(Offer { listener, token: token()? })
    }

    /// The port the requester dials.
    pub(crate) fn port(&self) -> u16 {
        self.listener.local_addr().map(|a| a.port()).unwrap_or(0)
    }

    /// Wait up to [`HANDSHAKE_WAIT`] for the requester's dial with the token, answer it,
    /// and wait up to [`CONFIRM_WAIT`] for its confirmation; `ready` is called with the
    /// stream once confirmed (before this side sends on it).
    pub(crate) fn accept(self, ready: impl FnOnce(Direct)) -> Made {
        let deadline = Instant::now() + HANDSHAKE_WAIT;
        if self.listener.set_nonblocking(true).is_err() {
            return Made::No;
        }
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Made::No;
            }
            match self.listener.accept() {
                Ok((mut s, _)) => {
                    let mut got = [0u8; 16];
                    let ok = s.set_nonblocking(false).is_ok()
                        && matches!(read_by(&mut s, &mut got, deadline), Ok(true))
                        && same_token(u128::from_le_bytes(got), self.token);
                    if !ok {
                        continue;
                    }
                    // The time for the confirmation is set before the answer goes: once it
                    // went, the requester may hold the stream.
                    let confirm_by = Instant::now() + CONFIRM_WAIT;
                    if s.set_read_timeout(Some(CONFIRM_WAIT)).is_err() || s.write_all(&[1]).is_err() {
                        return Made::No;
                    }
                    let mut b = [0u8; 1];
                    return match read_by(&mut s, &mut b, confirm_by) {
                        Ok(true) if b[0] == 1 => match Direct::new(s) {
                            Some(d) => {
                                ready(d);
                                Made::Yes
                            }
                            None => Made::Unsure,
                        },
                        // Its end, or a byte that is no confirmation: the requester did not
                        // take the stream.
                        Ok(_) => Made::No,
                        Err(e) if matches!(e.kind(), ErrorKind::ConnectionReset | ErrorKind::BrokenPipe) => {
                            Made::No
                        }
                        // No word within the time, or a read that failed: it may hold it.
                        Err(_) => Made::Unsure,
                    };
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    let _ = remora_sys::poller::wait_readable(&[self.listener.as_fd()], Some(left));
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return Made::No,
            }
        }
    }
}

/// How [`Offer::accept`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Made {
    /// Both sides hold the stream.
    Yes,
    /// Neither does.
    No,
    /// The requester may hold it: the VI must break before it is used.
    Unsure,
}

/// Fill `buf` by `deadline`: `Ok(false)` at the stream's end first, `TimedOut` at the
/// deadline. A read that `EINTR` ends is made again with what is left of the time, not the
/// whole of it (a process with a periodic signal would otherwise never time out).
fn read_by(s: &mut TcpStream, buf: &mut [u8], deadline: Instant) -> std::io::Result<bool> {
    let mut have = 0;
    while have < buf.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(ErrorKind::TimedOut.into());
        }
        s.set_read_timeout(Some(left))?;
        match s.read(&mut buf[have..]) {
            Ok(0) => return Ok(false),
            Ok(n) => have += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// The requesting side: dial `host:port`, send `token`, wait for the acceptor's byte, and
/// confirm (the stream is this side's from the confirmation on). All within `wait`
/// (at most [`HANDSHAKE_WAIT`]; the rest of the request's timeout).
pub(crate) fn dial(host: &str, port: u16, token: u128, wait: Duration) -> Option<Direct> {
    let deadline = Instant::now() + wait.min(HANDSHAKE_WAIT);
    let left = || Some(deadline.saturating_duration_since(Instant::now())).filter(|l| !l.is_zero());
    let addr = (host, port).to_socket_addrs().ok()?.next()?;
    let mut s = TcpStream::connect_timeout(&addr, left()?).ok()?;
    s.write_all(&token.to_le_bytes()).ok()?;
    let mut b = [0u8; 1];
    (read_by(&mut s, &mut b, deadline).ok()? && b[0] == 1).then_some(())?;
    let d = Direct::new(s)?;
    (&d.s).write_all(&[1]).ok()?;
    Some(d)
}

/// What the receiving side has read but not yet looked at (part of a frame).
#[derive(Debug)]
struct Rx {
    buf: Vec<u8>,
    have: usize,
}

/// The stream of a connected VI pair (see the module doc).
#[derive(Debug)]
pub(crate) struct Direct {
    s: TcpStream,
    /// The sending side: the last message this side sent was short.
    prev_short: AtomicBool,
    /// The sending side: bytes went by the channel since the last message (an RDMA
    /// write's), so the next completion must follow them there.
    after_bytes: AtomicBool,
    /// The receiving side: per ring slot, the number (plus one) of the message whose entry
    /// came on the stream, or with [`MARK`] of the one announced to come by the channel.
    seen: Vec<AtomicU64>,
    rx: Mutex<Rx>,
    /// The last message taken here was short: the next comes on the stream (or a mark).
    last_short: AtomicBool,
    /// The stream ended or broke (nothing more comes on it).
    ended: AtomicBool,
    /// It broke (see the module doc): the VI must break.
    lost: AtomicBool,
    /// When its end was read (the peer's word that it is gone follows it).
    ended_at: Mutex<Option<Instant>>,
}

impl Direct {
    fn new(s: TcpStream) -> Option<Direct> {
        s.set_nodelay(true).ok()?;
        s.set_read_timeout(Some(WAIT_SLICE)).ok()?;
        s.set_write_timeout(Some(WRITE_WAIT)).ok()?;
        Some(Direct {
            s,
            prev_short: AtomicBool::new(false),
            after_bytes: AtomicBool::new(false),
            seen: (0..ENTRIES).map(|_| AtomicU64::new(0)).collect(),
            rx: Mutex::new(Rx { buf: vec![0u8; FRAME * BATCH], have: 0 }),
            last_short: AtomicBool::new(false),
            ended: AtomicBool::new(false),
            lost: AtomicBool::new(false),
            ended_at: Mutex::new(None),
        })
    }

    /// The sender's choice for message `k` of completion `line` (`short`: [`is_short`] of
    /// it): `true` when it went here (the caller sends nothing of it by the channel);
    /// `false` when it must take the channel (after a mark here when the receiver waits on
    /// this stream: the message before was short). A short message takes the channel too
    /// when bytes went there since the last message (an RDMA write's, which land first).
    /// An error is a broken stream: the connection is lost.
    pub(crate) fn send(&self, k: u64, line: &[u8; COMPLETION], short: bool) -> std::io::Result<bool> {
        let after_bytes = self.after_bytes.swap(false, Ordering::AcqRel);
        // The receiver judges the same entries by the same rule: it waits here for `k`
        // exactly when the message before was short.
        if !self.prev_short.swap(short, Ordering::AcqRel) {
            return Ok(false);
        }
        let mut f = [0u8; FRAME];
        let here = short && !after_bytes;
        if here {
            f[..8].copy_from_slice(&k.to_le_bytes());
            f[8..].copy_from_slice(line);
        } else {
            f[..8].copy_from_slice(&(k | MARK).to_le_bytes());
        }
        (&self.s).write_all(&f)?;
        Ok(here)
    }

    /// Bytes went by the channel (an RDMA write's): the next completion goes there too.
    pub(crate) fn after_channel_bytes(&self) {
        self.after_bytes.store(true, Ordering::Release);
    }

    /// Say the end of the stream after what was sent (before this side says it is gone).
    pub(crate) fn end(&self) {
        remora_sys::flow::shutdown(self.s.as_fd(), true);
    }

    /// Shut the stream both ways.
    pub(crate) fn close(&self) {
        remora_sys::flow::shutdown(self.s.as_fd(), false);
    }

    /// Whether message `k`'s entry came on the stream (and lies in the ring).
    #[inline]
    pub(crate) fn has(&self, k: u64) -> bool {
        self.seen[k as usize % ENTRIES].load(Ordering::Acquire) == k + 1
    }

    /// Whether message `k`'s entry is in the ring, the stream read first when `k` comes
    /// on it and is not there yet (a stream of long messages never reads the socket).
    /// `next`: the receiver's next message (see [`Direct::pump`]).
    pub(crate) fn holds(&self, own: &Window, next: &AtomicU64, k: u64) -> bool {
        if !self.has(k) && self.wait_here(k, false) {
            self.pump(own, next, Pump::Now);
        }
        self.has(k)
    }

    /// Whether message `k`, which the receiver takes from the channel right after a short
    /// one, was announced by a mark not read yet: the receiver reads the stream once then,
    /// else the marks of a receiver that lags behind a short-then-long pattern pile up in
    /// the socket until the sender's write blocks.
    #[inline]
    pub(crate) fn owes_mark(&self, k: u64) -> bool {
        self.last_short.load(Ordering::Relaxed)
            && !self.marked(k)
            && !self.has(k)
            && !self.ended.load(Ordering::Acquire)
    }

    /// Whether the stream broke on this side (see the module doc): the VI must break with
    /// `VIP_ERROR_CONN_LOST`. An end read is one only once [`END_GRACE`] passed without the
    /// peer's word that it is gone (the caller looks at the word first).
    pub(crate) fn broken(&self) -> bool {
        if self.lost.load(Ordering::Acquire) {
            return true;
        }
        self.ended.load(Ordering::Acquire)
            && self
                .ended_at
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .is_some_and(|t| t.elapsed() >= END_GRACE)
    }

    /// Nothing more comes on the stream: it ended (`lost`: it broke).
    fn stop(&self, lost: bool) {
        if lost {
            self.lost.store(true, Ordering::Release);
        } else {
            self.ended_at.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert_with(Instant::now);
        }
        self.ended.store(true, Ordering::Release);
    }

    /// Whether message `k` was announced to come by the channel.
    #[inline]
    fn marked(&self, k: u64) -> bool {
        self.seen[k as usize % ENTRIES].load(Ordering::Acquire) == (k + 1) | MARK
    }

    /// Note that the message just taken was `short` (or not).
    #[inline]
    pub(crate) fn took(&self, short: bool) {
        self.last_short.store(short, Ordering::Relaxed);
    }

    /// Whether message `k` comes on this stream (its entry, or a mark): a waiter for it
    /// sleeps on the stream (else on the done count), and only then is the stream read.
    /// `landed`: the done count covers `k`.
    pub(crate) fn wait_here(&self, k: u64, landed: bool) -> bool {
        if self.ended.load(Ordering::Acquire) {
            return false;
        }
        // The count covers it but the entry is not here: it is on its way on the stream.
        landed || (!self.marked(k) && self.last_short.load(Ordering::Relaxed))
    }

    /// Sleep until the stream has bytes (or ends), at most `t`.
    pub(crate) fn wait(&self, t: Duration) {
        let _ = remora_sys::poller::wait_readable(&[self.s.as_fd()], Some(t));
    }

    /// Take in what the stream holds now (see [`Pump`]): each entry into its ring slot of
    /// `own` (this VI's segment), each mark noted. `next` is the receiver's count of
    /// messages taken (read under the reading lock): a number past the ring's window
    /// (whose slot still holds an entry not taken) breaks the stream (a broken peer).
    pub(crate) fn pump(&self, own: &Window, next: &AtomicU64, how: Pump) {
        if self.ended.load(Ordering::Acquire) {
            return;
        }
        let mut rx = match how {
            Pump::Now => match self.rx.try_lock() {
                Ok(g) => g,
                Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
                // Another thread reads it: what comes is taken in there.
                Err(std::sync::TryLockError::WouldBlock) => return,
            },
            _ => self.rx.lock().unwrap_or_else(|p| p.into_inner()),
        };
        let deadline = Instant::now() + HANDSHAKE_WAIT;
        // A waiter blocks in its first read (for at most the socket's [`WAIT_SLICE`]).
        let mut block = matches!(how, Pump::Wait);
        loop {
            let have = rx.have;
            let room = rx.buf.len() - have;
            match remora_sys::flow::recv(self.s.as_fd(), &mut rx.buf[have..], block) {
                Ok(0) => {
                    // Its end; part of a frame before it is a broken stream.
                    self.stop(rx.have != 0);
                    return;
                }
                Ok(n) => {
                    rx.have += n;
                    if !self.take_frames(&mut rx, own, next.load(Ordering::Acquire)) {
                        self.stop(true);
                        return;
                    }
                    // A read that did not fill the room found the socket drained: no
                    // second read to learn so (one system call less per message).
                    if n < room && !matches!(how, Pump::ToEnd) {
                        return;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if !matches!(how, Pump::ToEnd) || left.is_zero() {
                        return;
                    }
                    let _ = remora_sys::poller::wait_readable(&[self.s.as_fd()], Some(left));
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => {
                    self.stop(true);
                    return;
                }
            }
            block = false;
        }
    }

    /// The whole frames `rx` holds, taken in; `false` for a frame no receiver can be
    /// waiting for, or an entry that could not be stored.
    fn take_frames(&self, rx: &mut Rx, own: &Window, next: u64) -> bool {
        let whole = rx.have / FRAME * FRAME;
        for f in rx.buf[..whole].chunks_exact(FRAME) {
            let mut w = [0u8; 8];
            w.copy_from_slice(&f[..8]);
            let raw = u64::from_le_bytes(w);
            let k = raw & !MARK;
            // Its ring slot still holds an entry not taken: no sender does that.
            if k >= next + ENTRIES as u64 {
                return false;
            }
            if k < next {
                // A mark of a message the channel brought and was taken already.
                continue;
            }
            if raw & MARK == 0 {
                // The entry's words, then its sequence word after them: a thread that
                // reads the ring without this lock sees the entry whole once the word
                // matches.
                let at = layout::completion_at(k);
                let mut seq = [0u8; 8];
                seq.copy_from_slice(&f[8 + layout::SEQ..]);
                if own.write(at, &f[8..8 + layout::SEQ]).is_err() {
                    return false;
                }
                own.store(at + layout::SEQ, u64::from_le_bytes(seq));
            }
            self.seen[k as usize % ENTRIES].store((k + 1) | (raw & MARK), Ordering::Release);
        }
        let have = rx.have;
        rx.buf.copy_within(whole..have, 0);
        rx.have -= whole;
        true
    }
}

/// How [`Direct::pump`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pump {
    /// What is there now, without waiting (nothing when another thread reads).
    Now,
    /// Wait for the first bytes, at most [`WAIT_SLICE`] (a waiter's sleep).
    Wait,
    /// Until the stream ends, at most [`HANDSHAKE_WAIT`] (a peer that said it is gone
    /// ended it after its last frame).
    ToEnd,
}

#[cfg(test)]
mod broken;

#[cfg(test)]
mod tests {
    use super::*;

    /// A requester that sends `token` on a plain socket to `port`, reads the answer, then
    /// does `then` with the socket.
    fn requester(port: u16, token: u128, then: fn(TcpStream)) -> std::thread::JoinHandle<u8> {
        std::thread::spawn(move || {
            let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            s.write_all(&token.to_le_bytes()).unwrap();
            let mut b = [0u8; 1];
            let got = if s.read(&mut b).unwrap_or(0) == 1 { b[0] } else { 0 };
            then(s);
            got
        })
    }

    #[test]
    fn both_sides_hold_the_stream_once_the_requester_confirms_and_a_wrong_token_gets_nothing() {
        let o = Offer::open("127.0.0.1").unwrap();
        let (port, token) = (o.port(), o.token);
        // The wrong token first in the listener's queue (dialled here, before the right
        // one: a thread of its own could come after the acceptor closed its listener).
        let mut wrong = TcpStream::connect(("127.0.0.1", port)).unwrap();
        wrong.write_all(&(token ^ 1).to_le_bytes()).unwrap();
        wrong.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let right = std::thread::spawn(move || dial("127.0.0.1", port, token, HANDSHAKE_WAIT).is_some());
        let mut held = false;
        assert_eq!(o.accept(|_| held = true), Made::Yes);
        assert!(held, "the acceptor holds the stream");
        assert!(right.join().unwrap(), "the requester holds the stream");
        let mut b = [0u8; 1];
        assert_eq!(wrong.read(&mut b).unwrap_or(0), 0, "a wrong token is not answered");
    }

    #[test]
    fn a_requester_that_leaves_after_the_answer_leaves_the_acceptor_without_the_stream() {
        let o = Offer::open("127.0.0.1").unwrap();
        let r = requester(o.port(), o.token, drop);
        assert_eq!(o.accept(|_| panic!("no stream without the confirmation")), Made::No);
        assert_eq!(r.join().unwrap(), 1);
    }

    /// An acceptor that answered and then hears nothing cannot know whether the requester
    /// took the stream (the connect breaks the VI then).
    #[test]
    fn an_acceptor_that_hears_no_confirmation_is_unsure() {
        let o = Offer::open("127.0.0.1").unwrap();
        let r = requester(o.port(), o.token, |s| {
            std::thread::sleep(CONFIRM_WAIT + Duration::from_secs(1));
            drop(s);
        });
        assert_eq!(o.accept(|_| panic!("no stream without the confirmation")), Made::Unsure);
        assert_eq!(r.join().unwrap(), 1);
    }

    /// A dial to a listener that never answers gives up within the wait it was given.
    #[test]
    fn a_dial_keeps_within_its_wait() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let t = Instant::now();
        assert!(dial("127.0.0.1", port, 7, Duration::from_millis(200)).is_none());
        assert!(t.elapsed() < Duration::from_millis(2500), "the dial took {:?}", t.elapsed());
        drop(l);
    }

    #[test]
    fn tokens_compare_by_every_byte() {
        assert!(same_token(u128::MAX - 5, u128::MAX - 5));
        assert!(!same_token(1, 1 << 127));
        assert!(!same_token(0, 1));
    }
}
