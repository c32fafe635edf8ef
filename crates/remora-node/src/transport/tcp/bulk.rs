//! The bulk flows: DMA payload between two nodes, one plain thread per direction, moving
//! bytes straight between the socket and the mappings (no copy in between). Frames name a
//! connection of the receiving node ([`RangeRef::connection`]); the receiving node's
//! [`crate::transport::Inbound::memory`] decides what that reaches and checks every range.
//!
//! A link has [`BULK_LANES`] bulk flows (lanes). A thread that sends keeps to one lane (the
//! least taken when it first sends), so the frames of a DMA queue's worker stay in order on
//! one stream, and four queues at once go over four streams, each copied into the segments
//! by a reader of its own on the receiving node: over one stream, the one reader thread
//! copying every byte was the limit (four queues at once moved no more than one). A request
//! is answered on the lane it came on.
//!
//! One sending and one receiving thread per link for all lanes, as iperf3 drives its
//! streams, was tried and not kept (2026-11-29): 20–25 % fewer switches per GB, but the
//! same CPU per GB and the same throughput on the two-core VM (four queues about 0.65 of
//! iperf3 -P 4 in quiet rounds either way). Not threads, then. Part of the gap is memory:
//! iperf3 sends one 128 KiB buffer per stream again and again, from cache; raw TCP with one
//! thread a side moved 5.8–7.6 GB/s cycling through 1 MiB, 3.2–4.9 through 64 MiB (the
//! four queues' 16 MiB each). But four queues writing cached 128 KiB pieces (`bench
//! hosts`' row beside iperf3 -P 4) moved no more than with 16 MiB each, and 1 MiB pieces
//! more than 128 KiB ones: a cost per chunk in the engine is what is left to find.
//!
//! Timestamps per chunk on both daemons (16 MiB writes, 2026-11-29): on the loaded VM the
//! lost time was waiting for a core, not computing: the writer thread taking the last
//! 3 KiB of a frame the worker began (the socket holds 4 MiB, a frame is 4 MiB and 40
//! bytes) got a core up to 3 ms later, and an answer the peer had sent reached the waiting
//! worker up to 2 ms later (this node's reader waiting for a core); at moderate load the
//! worker was on its core 97 % of the time, writing (272 ms of CPU per GB, where a raw TCP
//! sender spends 190-210 in its fast state and about 265 in its slow one, when the
//! receiver is woken about 19 000 times a second instead of 2 800). Tried and not kept:
//! the worker writing its own frames whole, waiting for room in `poll` in 20 ms slices,
//! with 16 MiB kept on the link (interleaved with the build before: 16 MiB writes 1.11 in
//! 13 rounds under heavy load, 0.98 in 38 at moderate load, reads unchanged; four queues
//! of 16 MiB at once 0.885 in 6 rounds, all six lower); and holding a worker's read
//! requests back (`MSG_MORE`) until it waits, so the peer's reader is woken once for all of
//! them (reads 1.02, 38 rounds).
//!
//! What was kept (2026-11-29): a frame's payload is read eagerly (`super::eager`,
//! `remora_sys::flow::Eager`): while its segments come, the reader polls up to
//! `REMORA_SPIN_US` between two instead of sleeping. A sleeping reader was woken on a halted
//! core for every segment, 10-27 µs of scheduling delay each on this VM (`perf sched`), and
//! the segments of a 1 MiB frame come microseconds apart. With it, 1 MiB DMA and `SCIMemCpy`
//! pieces between namespace hosts, each answered, went from 2.1-5.4 GB/s (bimodal) to
//! 7.0-8.7, beside raw TCP's 6.0-6.5 in the same runs. `SO_RCVLOWAT` set to the frame's
//! rest, tried first in a C model, stalled: the receive window never let the sender put
//! that much in flight. Writers polling for room the same way (the client's RMA and DMA
//! frames, the pager flows' read answers, the lanes' writer thread) were tried and not
//! kept: in seven interleaved pairs of `bench hosts --only bulk,copy` the medians were the
//! same (1 MiB writes 1.34 and 1.31 of raw TCP, 16 MiB 0.99 and 0.98), and four queues at
//! once read lower in three (0.97 and 0.76).

use super::bulk_tx::BulkTx;
use super::framing::{discard, read_header};
use super::peer::{BulkWait, TcpPeer};
use crate::transport::LinkState;
use remora_proto::link::{BulkHeader, BulkOp, RangeRef, BULK_LANES, MAX_BULK_CHUNK};
use remora_sys::Mapping;
use std::net::TcpStream as StdStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The answers a transfer waits for: one per chunk, by tag.
pub(super) type Waits = Vec<(u64, std::sync::mpsc::Receiver<bool>)>;

const READ: bool = false;
const WRITE: bool = true;

/// How many living threads keep to each lane.
static TAKEN: [AtomicUsize; BULK_LANES] = [const { AtomicUsize::new(0) }; BULK_LANES];

/// A thread's lane, given back when the thread ends.
struct Lane(usize);

impl Drop for Lane {
    fn drop(&mut self) {
        TAKEN[self.0].fetch_sub(1, Ordering::Relaxed);
    }
}

thread_local! {
    static LANE: std::cell::OnceCell<Lane> = const { std::cell::OnceCell::new() };
}

/// The lane of the calling thread's bulk frames: the one fewest living threads keep to,
/// taken at its first frame and kept until it ends (its frames land in the order sent).
fn my_lane() -> usize {
    LANE.try_with(|l| {
        l.get_or_init(|| {
            let k = (0..BULK_LANES).min_by_key(|&k| TAKEN[k].load(Ordering::Relaxed)).unwrap_or(0);
            TAKEN[k].fetch_add(1, Ordering::Relaxed);
            Lane(k)
        })
        .0
    })
    .unwrap_or(0)
}

/// The mapping and offset in it of `len` bytes at `off` of the receiving node's connection
/// `conn`, if the peer may reach them (one piece: a connection is one region).
fn served(peer: &TcpPeer, conn: u64, off: u64, len: u64, write: bool) -> Option<(Arc<Mapping>, usize)> {
    let mem = peer.inbound.memory(peer.id, RangeRef::connection(conn))?;
    let mut pieces = mem.resolve(off, len, write)?;
    match pieces.len() {
        1 => pieces.pop().map(|(m, at, _)| (m, at)),
        _ => None,
    }
}

impl TcpPeer {
    /// Post one operation per chunk of at most [`MAX_BULK_CHUNK`] bytes; `post` gets the
    /// header and the chunk's offset from the start, and says what waits for the answer.
    /// Returns the waits with their tags, or `None` when the flow is gone.
    fn post_chunks(
        &self,
        op: BulkOp,
        conn: u64,
        offset: u64,
        len: usize,
        mut post: impl FnMut(
            usize,
            usize,
            std::sync::mpsc::Sender<bool>,
        ) -> (Option<(Arc<Mapping>, usize)>, BulkWait),
    ) -> Option<Waits> {
        let mut waits = Vec::new();
        let lane = my_lane();
        let mut done = 0;
        while done < len {
            let n = (len - done).min(MAX_BULK_CHUNK);
            let (tx, rx) = std::sync::mpsc::channel();
            let tag = self.next.fetch_add(1, Ordering::Relaxed);
            let hdr = BulkHeader { op, tag, conn, offset: offset + done as u64, len: n as u64, ok: true };
            let (payload, wait) = post(done, n, tx);
            self.bulk_send(lane, hdr, payload, Some(wait)).ok()?;
            waits.push((tag, rx));
            done += n;
        }
        Some(waits)
    }

    /// Wait for every answer; a failed one's late data must not land later. A link that is
    /// not up (silent past three heartbeats: a stopped daemon, a pulled cable) fails what
    /// still waits at once, as the API promises for DMA in flight (ERROR), instead of
    /// waiting for the peer to answer again; so does a minute without an answer.
    pub(super) fn all_answered(&self, waits: Waits) -> bool {
        use std::sync::mpsc::RecvTimeoutError;
        const SLICE: Duration = Duration::from_millis(20);
        let start = std::time::Instant::now();
        let mut ok = true;
        for (tag, rx) in waits {
            let answered = loop {
                if !ok {
                    break rx.try_recv().unwrap_or(false);
                }
                match rx.recv_timeout(SLICE) {
                    Ok(v) => break v,
                    Err(RecvTimeoutError::Disconnected) => break false,
                    Err(RecvTimeoutError::Timeout) => {
                        if self.state() != LinkState::Up || start.elapsed() > Duration::from_secs(60) {
                            break false;
                        }
                    }
                }
            };
            if !answered {
                self.bulk_wait.lock().unwrap_or_else(|p| p.into_inner()).remove(&tag);
                ok = false;
            }
        }
        ok
    }

    /// Start writing `len` bytes from `src` at `src_off` into the peer's connection `conn`
    /// at `offset`: the frames are queued, [`TcpPeer::all_answered`] waits for the peer to
    /// have stored them. `None` when the flow is gone.
    pub(super) fn bulk_write_start(
        &self,
        conn: u64,
        offset: u64,
        src: &Arc<Mapping>,
        src_off: usize,
        len: usize,
    ) -> Option<Waits> {
        let post = |done: usize, _n: usize, tx| (Some((src.clone(), src_off + done)), BulkWait::Ack(tx));
        self.post_chunks(BulkOp::Write, conn, offset, len, post)
    }

    /// Start reading `len` bytes of the peer's connection `conn` at `offset` into `dest`
    /// at `dest_off`; [`TcpPeer::all_answered`] waits for them to be there.
    pub(super) fn bulk_read_start(
        &self,
        conn: u64,
        offset: u64,
        dest: &Arc<Mapping>,
        dest_off: usize,
        len: usize,
    ) -> Option<Waits> {
        let post = |done: usize, n: usize, tx| {
            (None, BulkWait::Read { dest: dest.clone(), off: dest_off + done, len: n as u64, done: tx })
        };
        self.post_chunks(BulkOp::Read, conn, offset, len, post)
    }

    /// Write `len` bytes from `src` at `src_off` into the peer's connection `conn` at
    /// `offset` (blocking; for DMA workers). `false` when the transfer failed.
    pub(super) fn bulk_write(
        &self,
        conn: u64,
        offset: u64,
        src: &Arc<Mapping>,
        src_off: usize,
        len: usize,
    ) -> bool {
        self.bulk_write_start(conn, offset, src, src_off, len).is_some_and(|w| self.all_answered(w))
    }

    /// Read `len` bytes of the peer's connection `conn` at `offset` into `dest` at
    /// `dest_off` (blocking). `false` when the transfer failed.
    pub(super) fn bulk_read(
        &self,
        conn: u64,
        offset: u64,
        dest: &Arc<Mapping>,
        dest_off: usize,
        len: usize,
    ) -> bool {
        self.bulk_read_start(conn, offset, dest, dest_off, len).is_some_and(|w| self.all_answered(w))
    }
}

/// Serve `s` as the link's bulk flow `lane` (replacing the one before).
pub(super) fn start_bulk(peer: &Arc<TcpPeer>, s: StdStream, lane: usize) -> std::io::Result<()> {
    if lane >= BULK_LANES {
        return Err(std::io::Error::other(format!("bulk lane {lane} of {BULK_LANES}")));
    }
    let _ = s.set_nodelay(true);
    // A peer that stops reading cannot hold a writer forever.
    let _ = s.set_write_timeout(Some(Duration::from_secs(30)));
    let reader = s.try_clone()?;
    let tx = Arc::new(BulkTx::new(s));
    if let Some(old) = peer.bulk.lock().unwrap_or_else(|p| p.into_inner())[lane].replace(tx.clone()) {
        old.close();
    }
    let p = peer.clone();
    std::thread::Builder::new().name("remora-bulk".into()).spawn(move || bulk_reader(p, reader, lane))?;
    std::thread::Builder::new().name("remora-bulk-out".into()).spawn(move || tx.writer())?;
    Ok(())
}

/// Serve the incoming side of the bulk flow `lane` until it breaks; requests are answered
/// on the same lane.
fn bulk_reader(peer: Arc<TcpPeer>, s: StdStream, lane: usize) {
    let mut s = super::eager(s, remora_sys::flow::EAGER_PAYLOAD);
    let mut scratch = vec![0u8; 64 << 10];
    while let Some(hdr) = read_header(&mut s, peer.id, "bulk") {
        peer.bytes_in.fetch_add(hdr.len, Ordering::Relaxed);
        let ok = match hdr.op {
            BulkOp::Write => {
                let target = served(&peer, hdr.conn, hdr.offset, hdr.len, WRITE);
                let r = match &target {
                    Some((m, at)) => m.fill_from_reader(*at, hdr.len as usize, &mut s),
                    None => discard(&mut s, hdr.len, &mut scratch),
                };
                if r.is_err() {
                    break;
                }
                let ack = BulkHeader { op: BulkOp::Ack, ok: target.is_some(), len: 0, ..hdr };
                peer.bulk_send(lane, ack, None, None).is_ok()
            }
            BulkOp::Read => {
                let target = served(&peer, hdr.conn, hdr.offset, hdr.len, READ);
                let data = BulkHeader {
                    op: BulkOp::Data,
                    ok: target.is_some(),
                    len: if target.is_some() { hdr.len } else { 0 },
                    ..hdr
                };
                peer.bulk_send(lane, data, target, None).is_ok()
            }
            BulkOp::Data => {
                let w = peer.bulk_wait.lock().unwrap_or_else(|p| p.into_inner()).remove(&hdr.tag);
                match w {
                    Some(BulkWait::Read { dest, off, len, done }) if hdr.ok && hdr.len == len => {
                        let r = dest.fill_from_reader(off, hdr.len as usize, &mut s);
                        let _ = done.send(r.is_ok());
                        r.is_ok()
                    }
                    Some(BulkWait::Read { done, .. }) => {
                        let _ = done.send(false);
                        discard(&mut s, hdr.len, &mut scratch).is_ok()
                    }
                    _ => discard(&mut s, hdr.len, &mut scratch).is_ok(),
                }
            }
            BulkOp::Ack => {
                if let Some(BulkWait::Ack(tx)) =
                    peer.bulk_wait.lock().unwrap_or_else(|p| p.into_inner()).remove(&hdr.tag)
                {
                    let _ = tx.send(hdr.ok);
                }
                true
            }
            // Triggers travel on a process's own flow, never on the link's bulk flow.
            BulkOp::Trigger => {
                tracing::warn!(peer = peer.id, "a trigger on the bulk flow; closed");
                false
            }
        };
        if !ok {
            break;
        }
    }
    peer.bulk_wait.lock().unwrap_or_else(|p| p.into_inner()).clear();
}
