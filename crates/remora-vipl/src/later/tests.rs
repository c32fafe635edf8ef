//! A receive taken by `VipRecvDone` and posted again at once, before the answer (the
//! order of an echo that keeps few receives posted): noted (its descriptor's status
//! cleared, the rest left for the next send), and read again when it is taken in, so a
//! descriptor rewritten between the two posts is the one used; one whose memory was
//! deregistered meanwhile fails as a post does; one that finds the queue full is refused
//! there, and nothing is noted.

use crate::layout::{status, ENTRIES};
use crate::testing::{connect, post_recv, send, two, Mem, Two, T};
use crate::{DataSegment, Descriptor, Error, Nic, Vi};
use remora_testkit::Harness;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Receives posted on the server: one more than the peer must know for a post to be
/// noted (`DESCRIBED_LOW`), so that after one is taken it still knows enough.
const POSTED: usize = super::DESCRIBED_LOW as usize + 1;

/// A connected pair, `POSTED` receives of 64 bytes posted on the server (descriptor `i`
/// at `64 * i`, its buffer at `sbuf[64 * i..]`) and as many on the client.
struct Pair {
    two: Two,
    sbuf: Mem,
    sdesc: Mem,
    cbuf: Mem,
    cdesc: Mem,
}

fn pair(h: &Harness, disc: &[u8]) -> Pair {
    // The server's watcher never looks within a test (it would take a noted repost in by
    // itself 10-20 ms later, before the test counts it on a loaded machine).
    let two = two(h, Some(std::time::Duration::from_secs(3600)));
    let (sbuf, sdesc) = (Mem::new(&two.snic, 64 * 1024, two.sp), Mem::new(&two.snic, 64 * 64, two.sp));
    let (cbuf, cdesc) = (Mem::new(&two.cnic, 64 * 1024, two.cp), Mem::new(&two.cnic, 64 * 64, two.cp));
    for i in 0..POSTED {
        post_recv(&two.snic, &two.server, &sdesc, 64 * i, &sbuf, 64 * i, 64);
        post_recv(&two.cnic, &two.client, &cdesc, 64 * i, &cbuf, 64 * i, 64);
    }
    connect(&two.snic, &two.server, &two.cnic, &two.client, disc);
    assert!(two.server.inner.peer_here.load(Ordering::Relaxed), "the pair is not on one host");
    Pair { two, sbuf, sdesc, cbuf, cdesc }
}

/// Poll `vi` until a receive completes (`VipRecvDone`, as an echo polls).
fn poll(vi: &Vi) -> (usize, u32) {
    let t = Instant::now();
    loop {
        match vi.recv_done() {
            Ok(d) => return d,
            Err(Error::NotDone) => {
                assert!(t.elapsed() < Duration::from_secs(20), "no receive completed");
                std::thread::yield_now();
            }
            Err(e) => panic!("recv_done: {e:?}"),
        }
    }
}

impl Pair {
    /// The client sends `data` (its send descriptor past the receives'); the server takes
    /// it, and answers (so that its next post follows a send), which the client takes and
    /// reposts. The descriptor the server took.
    fn message_and_answer(&self, data: &[u8]) -> (usize, u32) {
        let Two { snic, cnic, server, client, .. } = &self.two;
        let at = 64 * (POSTED + 1);
        assert_eq!(send(cnic, client, &self.cdesc, at, &self.cbuf, 60 * 1024, data) & status::ERROR_MASK, 0);
        let took = poll(server);
        assert_eq!(
            send(snic, server, &self.sdesc, at, &self.sbuf, 60 * 1024, b"answer") & status::ERROR_MASK,
            0
        );
        let answer = poll(client);
        client.post_recv(answer.0, answer.1).unwrap();
        took
    }

    /// Posts the server noted and has not taken in yet.
    fn noted(&self) -> usize {
        self.two.server.inner.recv.lock().pending.n
    }
}

/// Rewrite the receive descriptor at `addr` (in `desc`) as `segs`.
fn rewrite(nic: &Nic, desc: &Mem, addr: usize, segs: Vec<DataSegment>) {
    let length = segs.iter().map(|s| s.len).sum();
    let d = Descriptor { length, segments: segs, ..Default::default() };
    nic.write_descriptor(addr, desc.handle, &d).unwrap();
}

/// The receive just taken, posted again before the answer, is noted (taken in later),
/// its status cleared at once, and takes its message when its turn comes.
#[test]
fn a_receive_just_taken_and_posted_again_is_noted_and_takes_its_message() {
    let h = Harness::with_cluster(&[4, 8], false);
    let p = pair(&h, b"took-noted");
    let took = p.message_and_answer(&[1u8; 8]);
    assert_eq!(took, (p.sdesc.addr(0), p.sdesc.handle), "the first receive");
    assert_eq!(p.sbuf.get(0, 8), vec![1u8; 8]);
    let done = p.two.snic.read_descriptor(took.0, took.1).unwrap().status;
    assert_ne!(done & status::DONE, 0, "the receive taken is not done");
    p.two.server.post_recv(took.0, took.1).unwrap();
    assert_eq!(p.noted(), 1, "the repost was not noted");
    let d = p.two.snic.read_descriptor(took.0, took.1).unwrap();
    assert_eq!(d.status, 0, "the noted repost's status was not cleared");
    // Taken in by the next send, and the receive takes its message when its turn comes.
    for k in 1..=POSTED {
        let d = p.message_and_answer(&[k as u8; 8]);
        assert_eq!(p.noted(), 0, "the repost was never taken in");
        p.two.server.post_recv(d.0, d.1).unwrap();
    }
    assert_eq!(p.sbuf.get(0, 8), vec![POSTED as u8; 8], "the reposted receive's message");
}

/// A descriptor rewritten between its take and its repost (another buffer, as many
/// segments) is noted, then read again when taken in: its message lands in the new buffer.
/// One rewritten with another segment count is not noted but posted at once, read as it is.
#[test]
fn a_receive_rewritten_before_its_repost_is_read_again() {
    let h = Harness::with_cluster(&[4, 8], false);
    let p = pair(&h, b"took-rewritten");
    let (snic, server) = (&p.two.snic, &p.two.server);
    let first = p.message_and_answer(&[1u8; 8]);
    let seg =
        |off: usize, len: u32| DataSegment { addr: p.sbuf.addr(off) as u64, handle: p.sbuf.handle, len };
    rewrite(snic, &p.sdesc, first.0, vec![seg(32 * 1024, 64)]);
    server.post_recv(first.0, first.1).unwrap();
    assert_eq!(p.noted(), 1, "a rewrite with as many segments is noted");
    let second = p.message_and_answer(&[2u8; 8]);
    assert_eq!(p.noted(), 0, "the repost was never taken in");
    // Two segments now: not what the take kept, posted at once.
    rewrite(snic, &p.sdesc, second.0, vec![seg(40 * 1024, 4), seg(48 * 1024, 60)]);
    server.post_recv(second.0, second.1).unwrap();
    assert_eq!(p.noted(), 0, "a descriptor with another segment count was noted");
    for k in 3..=POSTED + 2 {
        let d = p.message_and_answer(&[k as u8; 8]);
        if d != first && d != second {
            server.post_recv(d.0, d.1).unwrap();
        }
    }
    let first_msg = POSTED as u8 + 1;
    assert_eq!(p.sbuf.get(32 * 1024, 8), vec![first_msg; 8], "the rewritten receive's new buffer");
    assert_eq!(p.sbuf.get(0, 8), vec![1u8; 8], "its old buffer was written again");
    assert_eq!(p.sbuf.get(40 * 1024, 4), vec![first_msg + 1; 4], "the two-segment receive's first");
    assert_eq!(p.sbuf.get(48 * 1024, 4), vec![first_msg + 1; 4], "the two-segment receive's second");
    let d = snic.read_descriptor(second.0, second.1).unwrap();
    assert_eq!((d.status & status::ERROR_MASK, d.length), (0, 8), "the two-segment receive's completion");
}

/// Memory deregistered between the take and the repost: the repost is not noted, and
/// fails as a post does (its buffer gone: completed at once with a protection error; the
/// descriptor's own memory gone: `VIP_INVALID_PARAMETER`).
#[test]
fn a_receive_whose_memory_went_before_its_repost_fails_as_before() {
    let h = Harness::with_cluster(&[4, 8], false);
    let p = pair(&h, b"took-deregistered");
    let (snic, server) = (&p.two.snic, &p.two.server);
    // A receive whose buffer lies in memory of its own, taken and answered.
    let own = Mem::own_pages(snic, 4096, p.two.sp);
    let at = 64 * (POSTED + 2);
    post_recv(snic, server, &p.sdesc, at, &own, 0, 64);
    let mut took = p.message_and_answer(&[1u8; 8]);
    while took.0 != p.sdesc.addr(at) {
        server.post_recv(took.0, took.1).unwrap();
        took = p.message_and_answer(&[2u8; 8]);
    }
    assert_eq!(own.get(0, 8), vec![2u8; 8]);
    snic.deregister(own.region().addr(), own.handle).unwrap();
    server.post_recv(took.0, took.1).unwrap();
    assert_eq!(p.noted(), 0, "a receive whose buffer went was noted");
    let (addr, _) = server.recv_wait(T).expect("the repost completed at once");
    assert_eq!(addr, took.0);
    let d = snic.read_descriptor(took.0, took.1).unwrap();
    assert_ne!(d.status & status::PROTECTION_ERROR, 0, "status {:#x}", d.status);
    // The descriptors' own memory gone: the repost of the next one taken is refused.
    let next = p.message_and_answer(&[3u8; 8]);
    snic.deregister(p.sdesc.region().addr(), p.sdesc.handle).unwrap();
    match server.post_recv(next.0, next.1) {
        Err(Error::InvalidParameter(_)) => {}
        other => panic!("a repost of a descriptor in deregistered memory: {other:?}"),
    }
    assert_eq!(p.noted(), 0);
}

/// A repost that finds the receive queue full is refused by the noted path itself
/// (`Later::Full`, `VIP_ERROR_RESOURCE`): nothing is noted, the status of the receive
/// already queued there is left alone, and every receive queued before takes its message.
#[test]
fn a_repost_that_finds_the_queue_full_is_refused_and_nothing_is_noted() {
    let h = Harness::with_cluster(&[4, 8], false);
    let p = pair(&h, b"took-full");
    let (snic, server) = (&p.two.snic, &p.two.server);
    // The server's queue filled: its `POSTED` receives and as many more as it holds.
    let more = Mem::new(snic, 64 * ENTRIES, p.two.sp);
    for i in 0..ENTRIES - POSTED {
        post_recv(snic, server, &more, 64 * i, &p.sbuf, 32 * 1024, 64);
    }
    // One taken (the first) and answered; posted again (at once: the descriptor cache
    // has seen others since it was first posted), and the queue is full.
    let took = p.message_and_answer(&[1u8; 8]);
    server.post_recv(took.0, took.1).unwrap();
    // A send of the server's makes the next post one the noted path looks at (the VI sent
    // since its last post), and the descriptor is the one the cache saw last there.
    let at = 64 * (POSTED + 1);
    assert_eq!(send(snic, server, &p.sdesc, at, &p.sbuf, 60 * 1024, b"x") & status::ERROR_MASK, 0);
    {
        let mut q = server.inner.recv.lock();
        assert_eq!(server.inner.post_later(&mut q, took.0, took.1), super::Later::Full);
    }
    match server.post_recv(took.0, took.1) {
        Err(Error::Resource(_)) => {}
        other => panic!("a post into a full queue: {other:?}"),
    }
    assert_eq!(p.noted(), 0, "a refused post was noted");
    assert_eq!(snic.read_descriptor(took.0, took.1).unwrap().status, 0, "the queued receive's status");
    // The client's receive the server's send took, posted again; then the queue drains in
    // order: the `POSTED - 1` left of the first ones, the extra ones, the first again.
    let answered = poll(&p.two.client);
    p.two.client.post_recv(answered.0, answered.1).unwrap();
    for k in 0..ENTRIES {
        let d = p.message_and_answer(&[(k % 200) as u8 + 2; 8]);
        let want = if k < POSTED - 1 {
            p.sdesc.addr(64 * (k + 1))
        } else if k < ENTRIES - 1 {
            more.addr(64 * (k + 1 - POSTED))
        } else {
            took.0
        };
        assert_eq!(d.0, want, "receive {k} taken out of order");
    }
    let last = ((ENTRIES - 1) % 200) as u8 + 2;
    assert_eq!(p.sbuf.get(0, 8), vec![last; 8], "the reposted first receive's message");
}
