//! Pager flows: a DSM pager's (or SCIF RMA's) own TCP connection to the node that owns the
//! memory. The pager's node dials and authenticates it, binds it to one [`RangeRef`] with
//! [`LinkMsg::PagerBind`] and hands the socket to the process; here, one thread per flow
//! moves frames straight between the socket and the memory the node resolved for it.
//! A flow bound with [`LinkMsg::PagerBindMany`] reaches several memories (each frame names
//! one by its handle) and is served in the same order: a VIPL channel, whose payload and
//! completion land in the order sent. Its watched word, if any, is woken (`futex`) after
//! every store that covers it.
//!
//! `Read` is answered with `Data` (header and bytes; `ok` unset and no bytes when the
//! range may not be read). `Write` stores its bytes and is acknowledged only when the frame
//! asks (`ok` set); a store that may not be made is said in that acknowledgement, or, when
//! nobody waits for it, ends the flow (the pager sees the loss). `Trigger` (a process's
//! own flow to an interrupt it connected to) triggers what the flow is bound to through
//! [`PeerMemory::trigger`]; it is acknowledged when the frame asks (a data trigger, a
//! refusal's code in the `Ack`'s `offset`), and a posted one's refusal ends the flow. Any
//! other frame, a frame that names another handle than a bound one, or a payload over
//! [`MAX_PAGER_FRAME`] (over [`MAX_TRIGGER_DATA`] for a trigger) ends the flow.

use super::framing::{read_frame, read_header, write_frame};
use super::peer::TcpPeer;
use super::pool::Pool;
use crate::transport::{FlowUse, LinkState, PeerMemory};
use remora_proto::link::{
    BulkFrame, BulkHeader, BulkOp, LinkMsg, RangeRef, BULK_FRAME, MAX_FLOW_TARGETS, MAX_PAGER_FRAME,
    MAX_TRIGGER_DATA, TRIGGER_FULL, TRIGGER_REFUSED, TRIGGER_REMOVED,
};
use remora_proto::Error;
use remora_sys::Mapping;
use std::io::{Read, Write};
use std::net::TcpStream as StdStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The most pager flows one peer node may hold to this node at once.
const MAX_PAGER_FLOWS: usize = 1024;
/// The most pager flows bound to one target at once.
const MAX_FLOWS_PER_TARGET: usize = 16;

/// A pager flow to the peer of `pool`, bound to `target` there, as the descriptor a
/// process gets (a pooled flow when one is there, else one dialed now).
///
/// # Errors
/// [`Error::NodeNotResponding`] at once when the link is not up; the dial's failure.
pub(in crate::transport) async fn dial_flow(
    pool: Arc<Pool>,
    target: RangeRef,
) -> Result<std::os::fd::OwnedFd, Error> {
    // A home whose link is silent or lost is not dialed: the map goes the daemons' way at
    // once (issue 18.5: a dial to an unreachable home used to take 6 s).
    if pool.peer().state() != LinkState::Up {
        return Err(Error::NodeNotResponding);
    }
    let node = pool.peer().id;
    let s = dial(&pool, &LinkMsg::PagerBind { target })
        .await
        .map_err(|e| Error::Protocol(format!("pager flow to node {node}: {e}")))?;
    Ok(std::os::fd::OwnedFd::from(s))
}

/// A pager flow to the peer of `pool` that reaches every one of `targets` there, in order
/// ([`LinkMsg::PagerBindMany`]), as the descriptor a process gets.
///
/// # Errors
/// [`Error::NodeNotResponding`] at once when the link is not up; [`Error::IllegalParameter`]
/// for no target, too many, or two with one handle; the dial's failure.
pub(in crate::transport) async fn dial_flows(
    pool: Arc<Pool>,
    targets: Vec<RangeRef>,
    watch: Option<(u64, u64)>,
) -> Result<std::os::fd::OwnedFd, Error> {
    if targets.is_empty() || targets.len() > MAX_FLOW_TARGETS || !distinct(&targets) {
        return Err(Error::IllegalParameter(format!("a pager flow to {} targets", targets.len())));
    }
    if pool.peer().state() != LinkState::Up {
        return Err(Error::NodeNotResponding);
    }
    let node = pool.peer().id;
    let bind = LinkMsg::PagerBindMany { targets, watch };
    let s =
        dial(&pool, &bind).await.map_err(|e| Error::Protocol(format!("pager flow to node {node}: {e}")))?;
    Ok(std::os::fd::OwnedFd::from(s))
}

/// Whether the handles of `targets` are all different (a frame names its target by handle).
fn distinct(targets: &[RangeRef]) -> bool {
    targets.iter().enumerate().all(|(i, t)| targets[..i].iter().all(|u| u.handle != t.handle))
}

/// An authenticated flow from `pool`, bound with `bind`, all of it on the runtime
/// (`Pool::flow_async`): no hand-off to a blocking thread and back, each a wake-up of
/// another core. The binding frame, a few dozen bytes into a stream that is empty since
/// the handshake, is written without blocking (no room for it is an error: no flow).
async fn dial(pool: &Arc<Pool>, bind: &LinkMsg) -> std::io::Result<StdStream> {
    let mut s = pool.flow_async().await?;
    s.set_nonblocking(true)?;
    write_frame(&mut s, bind)?;
    s.set_nonblocking(false)?;
    s.set_read_timeout(None)?;
    s.set_write_timeout(None)?;
    s.set_nodelay(true)?;
    Ok(s)
}

/// Take an authenticated pager flow from `peer` (incarnation `inc`): book it, and serve it
/// on a thread of its own once its binding frame came.
///
/// # Errors
/// A flow from another start of the peer, too many flows, or no thread.
pub(in crate::transport) fn accept(peer: &Arc<TcpPeer>, std: StdStream, inc: u64) -> std::io::Result<()> {
    let peer_id = peer.id;
    if peer.peer_incarnation.load(Ordering::SeqCst) != inc {
        return Err(std::io::Error::other(format!("a pager flow from an unknown start of node {peer_id}")));
    }
    let id = peer.next.fetch_add(1, Ordering::Relaxed);
    {
        let mut flows = peer.pager_flows.lock().unwrap_or_else(|p| p.into_inner());
        if flows.len() >= MAX_PAGER_FLOWS {
            return Err(std::io::Error::other(format!(
                "node {peer_id} holds {MAX_PAGER_FLOWS} pager flows already"
            )));
        }
        flows.insert(id, (std.try_clone()?, None));
    }
    let _ = std.set_nodelay(true);
    // A process that stops reading cannot hold the thread forever, nor can a host that
    // vanished without closing the connection (but a cable out for less than the link's
    // budget loses nothing: the dialing end keeps its flows as long).
    let budget = peer.live().budget();
    let _ = std.set_write_timeout(Some(budget));
    super::pool::keep_for(&std, budget);
    let p = peer.clone();
    let spawned = std::thread::Builder::new().name("remora-pager-flow".into()).spawn(move || {
        // The flow leaves the books however the thread ends.
        struct Forget(Arc<TcpPeer>, u64);
        impl Drop for Forget {
            fn drop(&mut self) {
                self.0.pager_flows.lock().unwrap_or_else(|p| p.into_inner()).remove(&self.1);
            }
        }
        let _forget = Forget(p.clone(), id);
        let mut s = std;
        // A pooled flow waits here until its dialer takes it (`pool.rs`).
        let _ = s.set_read_timeout(Some(super::pool::BIND_WAIT));
        let (targets, watch) = match read_frame::<LinkMsg>(&mut s) {
            Ok(LinkMsg::PagerBind { target }) => (vec![target], None),
            Ok(LinkMsg::PagerBindMany { targets, watch })
                if !targets.is_empty() && targets.len() <= MAX_FLOW_TARGETS && distinct(&targets) =>
            {
                (targets, watch)
            }
            // Not a pager's: a direct flow between two processes (`direct.rs`).
            Ok(LinkMsg::FlowBind { key, token }) => {
                super::direct::hand_over(&p, s, key, token);
                return;
            }
            other => {
                tracing::warn!(peer = p.id, "a pager flow began with {other:?}; closed");
                return;
            }
        };
        {
            // A process shares one flow per connection: a few more (redials after a
            // failure, maps made at once) are fine, a flood is not.
            let mut flows = p.pager_flows.lock().unwrap_or_else(|p| p.into_inner());
            // A flow to several targets is booked under its first.
            let target = targets[0];
            let same = flows.values().filter(|(_, b)| *b == Some(target)).count();
            if same >= MAX_FLOWS_PER_TARGET {
                tracing::warn!(peer = p.id, "{same} pager flows for {target:?} already; closed");
                return;
            }
            if let Some(f) = flows.get_mut(&id) {
                f.1 = Some(target);
            }
        }
        let mut mems = Vec::with_capacity(targets.len());
        for target in &targets {
            let Some(mem) = p.inbound.memory(p.id, *target) else {
                tracing::warn!(
                    peer = p.id,
                    "a pager flow bound to {target:?}, which it may not reach; closed"
                );
                return;
            };
            mems.push((target.handle, mem));
        }
        // The watched word, and the target's first word, resolved once (their mappings
        // stay valid while held).
        let watch = watch.and_then(|(h, off)| {
            let (_, mem) = mems.iter().find(|(x, _)| *x == h)?;
            let word = |off: u64| {
                let (m, at, _) = mem.resolve(off, 4, true)?.into_iter().next()?;
                m.atomic_u32(at)?;
                Some((m, at))
            };
            let (mem, at) = word(off)?;
            let first = if off == 0 { None } else { word(0) };
            Some(Watch { handle: h, offset: off, mem, at, first })
        });
        if s.set_read_timeout(None).is_ok() {
            for (_, mem) in &mems {
                mem.flow_used(FlowUse::Bound);
            }
            // A plain interrupt's trigger flow, which its owner reads too while it waits.
            if let ([(handle, mem)], None) = (&mems[..], &watch) {
                if let Some(share) = mem.share_flow(std::os::fd::AsFd::as_fd(&s)) {
                    crate::transport::shared_flow::serve_shared(
                        p.id,
                        &p.bytes_in,
                        s,
                        *handle,
                        mem.as_ref(),
                        share,
                    );
                    return;
                }
            }
            let bound: Vec<(u64, &dyn PeerMemory)> = mems.iter().map(|(h, m)| (*h, m.as_ref())).collect();
            serve(&p, s, &bound, watch.as_ref());
        }
    });
    if let Err(e) = spawned {
        peer.pager_flows.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
        return Err(e);
    }
    Ok(())
}

/// Store `len` bytes read from `rd` into `pieces` in order.
fn store(pieces: &[(Arc<Mapping>, usize, usize)], rd: &mut impl Read) -> std::io::Result<()> {
    for (m, at, n) in pieces {
        m.fill_from_reader(*at, *n, rd)?;
    }
    Ok(())
}

/// The word of a [`LinkMsg::PagerBindMany`] flow that is woken after every store touching
/// it (any of its bytes: a store of part of a word changes it too): bytes
/// `offset..offset + 4` of target `handle`, at `at` of `mem`; and the target's first word
/// likewise, at `first` (a VIPL VI segment: the done count is the watched word, the count
/// of receives its peer posted the first, which a sender short of receives sleeps on;
/// `remora_vipl::layout` asserts that count stays the first word).
pub(super) struct Watch {
    handle: u64,
    offset: u64,
    mem: Arc<Mapping>,
    at: usize,
    first: Option<(Arc<Mapping>, usize)>,
}

impl Watch {
    /// Wake the word's waiters when a store of `len` bytes at `offset` of `handle` touched
    /// it, and the first word's when it touched that.
    fn after_store(&self, handle: u64, offset: u64, len: u64) {
        if handle != self.handle {
            return;
        }
        let end = offset.saturating_add(len);
        if overlaps(offset, end, self.offset) {
            if let Some(w) = self.mem.atomic_u32(self.at) {
                remora_sys::sync::futex_wake_all(w);
            }
        }
        if let Some((m, at)) = self.first.as_ref().filter(|_| overlaps(offset, end, 0)) {
            if let Some(w) = m.atomic_u32(*at) {
                remora_sys::sync::futex_wake_all(w);
            }
        }
    }
}

/// Whether the bytes `offset..end` touch the 4-byte word at `word`.
fn overlaps(offset: u64, end: u64, word: u64) -> bool {
    offset < word.saturating_add(4) && end > word && end > offset
}

/// Serve one flow until it breaks.
fn serve(peer: &TcpPeer, s: StdStream, targets: &[(u64, &dyn PeerMemory)], watch: Option<&Watch>) {
    let Ok(rd) = s.try_clone() else { return };
    // A channel (a VIPL VI's, with a watched word) carries payloads of tens of KiB after
    // each small frame: a small buffer lets most of a payload go straight from the socket
    // into the memory, where a 64 KiB one copied it through the buffer first (the 8 KiB
    // one made the 64 KiB stream about a quarter faster, the 8-byte row the same). Read
    // through `Gather` (a payload over its buffer's size goes eagerly, `super::eager`) rather
    // than a `BufReader` (whose reads of a payload slept between segments): the 64 KiB
    // stream across hosts 0.74-0.97 of raw TCP before, 0.99-1.16 after (three pairs).
    let counters = [&peer.bytes_in, &peer.bytes_out];
    if watch.is_some() {
        let rd = super::gather::Gather::new(super::eager(rd, 1), BULK_FRAME, 8 << 10);
        serve_many(peer.id, counters, rd, s, targets, watch, true, None);
        return;
    }
    // A map's or a DMA's: its short stores land before their ACK goes (`gather.rs`), its
    // thread follows its frames (`follow.rs`).
    // Gather hands its stream only the rest of a payload at least as large as its buffer
    // (`EAGER_PAYLOAD`), after what it gathered: that rest is read eagerly whatever its size.
    let rd = gathered(super::eager(rd, 1));
    let mut follow = s.try_clone().ok().and_then(|d| super::follow::Follow::new(d.into()));
    serve_many(peer.id, counters, rd, s, targets, watch, true, follow.as_mut());
}

/// `rd` wrapped as [`serve`] reads a map's or a DMA's flow (after the socket-only `eager`),
/// and as [`serve_frames`] reads the fuzz targets' bytes: the production reader is fuzzed.
fn gathered<R: Read>(rd: R) -> super::gather::Gather<R> {
    super::gather::Gather::new(rd, BULK_FRAME, remora_sys::flow::EAGER_PAYLOAD)
}

/// The size of a flow's frame buffers (a page read answered from it with its header, a
/// trigger's payload, the bytes of a refused store thrown away through it).
const SCRATCH: usize = 64 << 10;

/// `v`, made [`SCRATCH`] bytes long at its first use.
fn buffer(v: &mut Vec<u8>) -> &mut [u8] {
    if v.is_empty() {
        v.resize(SCRATCH, 0);
    }
    v
}

/// Frames larger than this are bulk (RMA), not a page fetch or a flush's runs: see
/// [`serve_frames`]'s `urgent`.
const URGENT_FRAME: u64 = 64 << 10;

/// The loop of [`serve`]: answer the frames read from `rd` on `wr` until the flow breaks
/// or sends a frame it may not (the fuzz target `pager_stream` drives it with bytes). `rd`
/// is read through [`gathered`]'s reader, as a map's flow is (its `read_exact` included).
/// `counters` are the peer's bytes in and out. With `urgent`, the thread runs urgent
/// (`remora_sys::sync::urgent_thread`) while it serves pages and small stores, someone's
/// critical path, and at its ordinary weight while it streams bulk frames: a sender at
/// nice -20 preempts the receiver on the other end of a loopback stream and halves it.
pub(super) fn serve_frames(
    peer: u32,
    counters: [&AtomicU64; 2],
    rd: impl Read,
    wr: impl Write,
    handle: u64,
    mem: &dyn PeerMemory,
    urgent: bool,
) {
    serve_many(peer, counters, gathered(rd), wr, &[(handle, mem)], None, urgent, None);
}

/// [`serve_frames`] for a flow bound to several targets (each frame names one by its
/// handle), waking `watch` after every store that covers it, its thread kept on the core
/// the frames come in on by `follow` (`follow.rs`).
#[allow(clippy::too_many_arguments)]
fn serve_many(
    peer: u32,
    counters: [&AtomicU64; 2],
    mut rd: impl Read,
    mut wr: impl Write,
    targets: &[(u64, &dyn PeerMemory)],
    watch: Option<&Watch>,
    urgent: bool,
    mut follow: Option<&mut super::follow::Follow>,
) {
    let [bytes_in, bytes_out] = counters;
    if urgent {
        remora_sys::sync::urgent_thread(true);
    }
    // Whether the last frame was bulk (the thread then runs at its ordinary weight).
    let mut bulk = false;
    // Made at their first use: most flows never need one (a map's flow that no fault
    // reached, a flow that only stores). Zeroed at every flow's start, the two touched 32
    // fresh pages of the serving thread's heap, faulted in and given back at its end.
    let (mut scratch, mut sink) = (Vec::new(), Vec::new());
    let answer = |wr: &mut dyn Write, h: &BulkHeader| {
        wr.write_all(zerocopy::IntoBytes::as_bytes(&BulkFrame::from_header(h)))
    };
    while let Some(hdr) = read_header(&mut rd, peer, "pager") {
        bytes_in.fetch_add(BULK_FRAME as u64 + hdr.len, Ordering::Relaxed);
        if urgent && bulk != (hdr.len > URGENT_FRAME) {
            bulk = !bulk;
            remora_sys::sync::urgent_thread(!bulk);
        }
        let Some(&(handle, mem)) = targets.iter().find(|(h, _)| *h == hdr.conn) else {
            tracing::warn!(peer, "a pager flow bound to {:?} named {}", targets[0].0, hdr.conn);
            break;
        };
        if hdr.len as usize > MAX_PAGER_FRAME {
            tracing::warn!(peer, "a pager flow sent a frame of {} bytes; closed", hdr.len);
            break;
        }
        let r = match hdr.op {
            BulkOp::Write => match (mem.resolve(hdr.offset, hdr.len, true), hdr.ok) {
                (Some(pieces), ask) => store(&pieces, &mut rd).and_then(|()| {
                    if let Some(w) = watch {
                        w.after_store(handle, hdr.offset, hdr.len);
                    }
                    mem.flow_used(FlowUse::Stored { bytes: hdr.len, acked: ask });
                    if ask {
                        answer(&mut wr, &BulkHeader { op: BulkOp::Ack, ok: true, len: 0, ..hdr })
                    } else {
                        Ok(())
                    }
                }),
                // A refused store somebody waits for (RMA): said in the answer; the process
                // asks its daemon for the precise error.
                (None, true) => super::framing::discard(&mut rd, hdr.len, buffer(&mut sink)).and_then(|()| {
                    answer(&mut wr, &BulkHeader { op: BulkOp::Ack, ok: false, len: 0, ..hdr })
                }),
                // A map's store nobody waits for: end the flow, the pager sees the loss.
                (None, false) => {
                    tracing::info!(peer, handle, "a pager flow's store has no target; closed");
                    break;
                }
            },
            BulkOp::Read => {
                let pieces = mem.resolve(hdr.offset, hdr.len, false);
                let data = BulkHeader {
                    op: BulkOp::Data,
                    ok: pieces.is_some(),
                    len: if pieces.is_some() { hdr.len } else { 0 },
                    ..hdr
                };
                bytes_out.fetch_add(BULK_FRAME as u64 + data.len, Ordering::Relaxed);
                let head = BulkFrame::from_header(&data);
                let served = pieces.is_some();
                let r = match pieces {
                    // Header and page in one segment: the reader waits for both.
                    Some(pieces) if hdr.len as usize <= SCRATCH - BULK_FRAME => {
                        let scratch = buffer(&mut scratch);
                        scratch[..BULK_FRAME].copy_from_slice(zerocopy::IntoBytes::as_bytes(&head));
                        let mut at = BULK_FRAME;
                        let mut r = Ok(());
                        for (m, off, n) in &pieces {
                            r = r.and_then(|()| m.read(*off, &mut scratch[at..at + n]));
                            at += n;
                        }
                        r.and_then(|()| wr.write_all(&scratch[..at]))
                    }
                    // Larger: straight from the memory, the header gathered into the first
                    // write.
                    Some(pieces) => {
                        let mut head = Some(zerocopy::IntoBytes::as_bytes(&head));
                        let mut r = Ok(());
                        for (m, off, n) in &pieces {
                            r = r.and_then(|()| match head.take() {
                                Some(h) => m.write_to_after(h, *off, *n, &mut wr),
                                None => m.write_to(*off, *n, &mut wr),
                            });
                        }
                        match head {
                            Some(h) => r.and_then(|()| wr.write_all(h)),
                            None => r,
                        }
                    }
                    None => wr.write_all(zerocopy::IntoBytes::as_bytes(&head)),
                };
                if served && r.is_ok() {
                    mem.flow_used(FlowUse::Read(hdr.len));
                }
                r
            }
            // A trigger of the interrupt the flow is bound to: answered when the sender
            // waits (`ok`, a data trigger), in step with the frames before it. A posted
            // (plain) trigger's refusal ends the flow instead: nothing but triggers ever
            // travels a plain flow back, and its sender takes the daemons' path, which
            // says the error.
            BulkOp::Trigger if hdr.len as usize <= MAX_TRIGGER_DATA => {
                let data = &mut buffer(&mut scratch)[..hdr.len as usize];
                match rd.read_exact(data) {
                    Ok(()) => {
                        let done = mem.trigger(data);
                        if !hdr.ok && done.is_err() {
                            tracing::debug!(peer, handle, "a posted trigger was refused; flow closed");
                            break;
                        }
                        if hdr.ok {
                            let code = match done {
                                Ok(()) => 0,
                                Err(Error::NoSuchIntno) => TRIGGER_REMOVED,
                                Err(Error::NoSpace) => TRIGGER_FULL,
                                Err(_) => TRIGGER_REFUSED,
                            };
                            let ack =
                                BulkHeader { op: BulkOp::Ack, ok: code == 0, len: 0, offset: code, ..hdr };
                            bytes_out.fetch_add(BULK_FRAME as u64, Ordering::Relaxed);
                            answer(&mut wr, &ack)
                        } else {
                            Ok(())
                        }
                    }
                    Err(e) => Err(e),
                }
            }
            op => {
                tracing::warn!(peer, "a pager flow sent {op:?} of {} bytes, closing the flow", hdr.len);
                break;
            }
        };
        if r.is_err() {
            break;
        }
        if let Some(f) = follow.as_deref_mut() {
            f.served(hdr.len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::overlaps;

    /// A store wakes a word's sleepers when it touches any of the word's four bytes.
    #[test]
    fn a_store_touching_any_byte_of_a_word_overlaps_it() {
        assert!(overlaps(0, 4, 0), "the whole word");
        assert!(overlaps(2, 3, 0), "one byte inside");
        assert!(overlaps(3, 5, 4), "straddling its start");
        assert!(overlaps(60, 72, 64), "covering it and more");
        assert!(!overlaps(4, 8, 0), "the next word");
        assert!(!overlaps(0, 4, 4), "the word before");
        assert!(!overlaps(8, 8, 8), "nothing stored");
    }
}
