//! DMA and RMA over the fabric: `fi_write` / `fi_read` straight between a mapping of this
//! node and the peer's memory, with no copy on either side.
//!
//! A transfer asks the peer to open the range first ([`Body::RmaOpen`]): the peer's
//! [`crate::transport::Inbound::memory`] checks it, as for the tcp transport's bulk frames,
//! and only then answers the key and address of that range in its registration of the
//! connection's memory (`fi_mr_reg` of the daemon's mapping of the connection, for remote
//! access of the one kind asked, under a random key: made at the first transfer of the
//! authenticated peer through that connection, kept while the connection lives and closed
//! by the progress thread's sweep within a second after it goes — the export's mapping
//! is registered once, not per transfer). A read's `fi_read`s follow, then
//! [`Body::RmaClose`] without waiting for its answer; a write's `fi_write`s are followed at
//! once by [`Body::RmaClose`] (the endpoint is opened with `FI_ORDER_SAW`: it arrives after
//! their bytes), whose answer says every byte is in place. So a read costs one round trip
//! before its data, a write one round trip after its data. The peer keeps the registration
//! open for the tag until the close even if the connection goes meanwhile; a key reaches
//! only memory of a connection its holder was granted, within the bounds the provider
//! checks against the registration, and no peer is answered a key before it authenticated
//! and its range was checked. The peer's progress thread answers opens through connections
//! registered already, and closes, itself (as it serves small transfers: one thread wake less
//! each way); the first open of a connection goes to the link's task, which may take a
//! registration's time (`fi_mr_reg` may pin pages). This node's own mappings are registered
//! once for local use and kept while they live.
//!
//! A transfer's `fi_write`s / `fi_read`s are pieces of 1 MiB, posted only while the link
//! has less than 2 MiB in flight (`window.rs`): the link's control messages share the
//! provider's connection with them, in order, and a heartbeat must not wait behind a whole
//! large transfer (a loaded machine took the link for not operational). Each piece is
//! posted only while the link's connection is routed, under the routes' lock (`send.rs`:
//! the provider crashes on an operation posted to an address the link's task removed), and
//! waits for room in a full queue up to the link's patience (its budget, as liveness gives
//! a silent peer); a connection gone, or a queue full past that, fails the transfer as a
//! lost link does, and a piece in flight when its connection is unrouted fails at once.
//!
//! The link's task answers the peer's requests without waiting for room (it runs on the
//! runtime): an answer that finds the queue full waits in the fabric's queue of unsent
//! answers, as the progress thread's own do (`send.rs`). Our own requests are sent by the
//! transfer's thread, which may wait.
//!
//! Transfers of up to 32 KiB travel in the messages themselves instead ([`Body::Put`],
//! [`Body::Get`], answered by [`Body::Done`]): one round trip, checked by the peer in the
//! same way (the eager and rendezvous protocols of fabric libraries).

use super::fabric::{Fabric, EAGER};
use super::window::CHUNK;
use super::wire::Body;
use super::OfiLink;
use crate::transport::{LinkState, Pending};
use remora_ofi_sys::{Access, Remote};
use remora_proto::Error;
use remora_sys::Mapping;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Ranges up to this size are opened on the link's task itself.
const SMALL: u64 = 64 << 10;
/// How long an answer of the peer is waited for while its link is up.
const PATIENCE: Duration = Duration::from_secs(60);

/// The link went down: what waits for the peer fails, what was opened for it is closed.
pub(super) fn link_down(link: &OfiLink) {
    link.rma_wait.lock().unwrap_or_else(|p| p.into_inner()).clear();
    link.served.lock().unwrap_or_else(|p| p.into_inner()).clear();
    link.window.reset();
}

/// Serve an RMA message of the peer (on the link's task; registering runs beside it). The
/// progress thread serves opens of connections registered already, and closes, itself.
pub(super) fn serve(ofi: &Arc<Fabric>, link: &Arc<OfiLink>, body: Body) {
    let request =
        matches!(body, Body::Put { .. } | Body::Get { .. } | Body::RmaOpen { .. } | Body::RmaClose { .. });
    serve_one(ofi, link, body);
    if request {
        // Served (a put's bytes are written): the progress thread may serve what follows.
        super::fabric::served_early(&link.early);
    }
}

fn serve_one(ofi: &Arc<Fabric>, link: &Arc<OfiLink>, body: Body) {
    match body {
        // The first open of a connection registers its memory: here for a small
        // connection's range (a short lock of the books, a cheap registration), beside the
        // link's task for large ones (a provider may pin pages).
        Body::RmaOpen { tag, conn, offset, len, write } if len <= SMALL => {
            let answer = open(ofi, link, tag, conn, offset, len, write);
            answer_peer(ofi, link, answer);
        }
        Body::RmaOpen { tag, conn, offset, len, write } => {
            let (ofi, link) = (ofi.clone(), link.clone());
            tokio::task::spawn_blocking(move || {
                let answer = open(&ofi, &link, tag, conn, offset, len, write);
                answer_peer(&ofi, &link, answer);
            });
        }
        Body::RmaClose { tag } => {
            link.served.lock().unwrap_or_else(|p| p.into_inner()).remove(&tag);
            answer_peer(ofi, link, Body::RmaClosed { tag });
        }
        Body::RmaKey { tag, .. } | Body::RmaClosed { tag } | Body::Done { tag, .. } => {
            let w = link.rma_wait.lock().unwrap_or_else(|p| p.into_inner()).remove(&tag);
            if let Some(tx) = w {
                let _ = tx.send(body);
            }
        }
        // Small transfers are served by the progress thread, but for those that came before
        // the peer's bootstrap frame was read here (`fabric.rs`: handed to the link's task).
        Body::Put { .. } | Body::Get { .. } => {
            if let Some(answer) = super::fabric::serve_small(&link.peer, body) {
                answer_peer(ofi, link, answer);
            }
        }
        Body::Link(_) => {}
    }
}

/// Send a request of ours to the peer, waiting for room in a full send queue (on the
/// transfer's own thread); whether it was sent (not: the link goes down, `Fabric::broke`).
fn send(ofi: &Fabric, link: &OfiLink, body: Body) -> bool {
    let dest = *link.dest.lock().unwrap_or_else(|p| p.into_inner());
    dest.and_then(|(d, token)| ofi.send(d, token, body)).is_some()
}

/// Answer a request of the peer without waiting (on the link's task, a runtime thread):
/// should the send queue be full, the answer waits for the progress thread, in order with
/// the answers it sends itself (`send.rs`).
fn answer_peer(ofi: &Fabric, link: &OfiLink, body: Body) {
    let dest = *link.dest.lock().unwrap_or_else(|p| p.into_inner());
    let Some((d, token)) = dest else { return };
    if let Ok(bytes) = remora_proto::encode(&super::wire::Wire { token, body }) {
        ofi.answer((d, token), bytes);
    }
}

/// Check a range the peer asks for, registering the connection's memory if it is the first.
fn open(ofi: &Fabric, link: &OfiLink, tag: u64, conn: u64, offset: u64, len: u64, write: bool) -> Body {
    super::fabric::open_range(ofi, &link.peer, &link.served, tag, (conn, offset, len), write, true)
        .unwrap_or(Body::RmaKey { tag, ok: false, addr: 0, key: 0 })
}

/// Wait for the peer's answer to `tag` while its link is up.
fn answer(link: &OfiLink, rx: &std::sync::mpsc::Receiver<Body>) -> Option<Body> {
    let t = Instant::now();
    loop {
        match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(b) => return Some(b),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return None,
            Err(_) if link.peer.state() != LinkState::Up || t.elapsed() > PATIENCE => return None,
            Err(_) => {}
        }
    }
}

/// Ask the peer for `tag`: the answer comes on the returned receiver (`None`: not sent).
fn post(ofi: &Fabric, link: &OfiLink, tag: u64, body: Body) -> Option<std::sync::mpsc::Receiver<Body>> {
    let (tx, rx) = std::sync::mpsc::channel();
    link.rma_wait.lock().unwrap_or_else(|p| p.into_inner()).insert(tag, tx);
    match send(ofi, link, body) {
        true => Some(rx),
        false => {
            link.rma_wait.lock().unwrap_or_else(|p| p.into_inner()).remove(&tag);
            None
        }
    }
}

/// Ask the peer for `tag` and wait for its answer.
fn ask(ofi: &Fabric, link: &OfiLink, tag: u64, body: Body) -> Option<Body> {
    let got = post(ofi, link, tag, body).and_then(|rx| answer(link, &rx));
    link.rma_wait.lock().unwrap_or_else(|p| p.into_inner()).remove(&tag);
    got
}

/// A small transfer in messages: the bytes go with the request (write) or come with the
/// answer (read); the returned wait takes the answer.
#[allow(clippy::too_many_arguments)]
fn start_eager(
    ofi: &Arc<Fabric>,
    link: &Arc<OfiLink>,
    tag: u64,
    conn: u64,
    offset: u64,
    mem: &Arc<Mapping>,
    mem_off: usize,
    len: usize,
    write: bool,
) -> Result<Pending, Error> {
    let body = match write {
        true => {
            let mut data = vec![0u8; len];
            mem.read(mem_off, &mut data).map_err(|_| Error::OutOfRange)?;
            Body::Put { tag, conn, offset, data }
        }
        false => Body::Get { tag, conn, offset, len: len as u64 },
    };
    let (tx, rx) = std::sync::mpsc::channel();
    link.rma_wait.lock().unwrap_or_else(|p| p.into_inner()).insert(tag, tx);
    if !send(ofi, link, body) {
        link.rma_wait.lock().unwrap_or_else(|p| p.into_inner()).remove(&tag);
        return Err(Error::NodeNotResponding);
    }
    let (link, mem) = (link.clone(), mem.clone());
    Ok(Box::new(move || {
        let got = answer(&link, &rx);
        link.rma_wait.lock().unwrap_or_else(|p| p.into_inner()).remove(&tag);
        match got {
            Some(Body::Done { ok: true, data, .. }) if write || data.len() == len => {
                if !write {
                    mem.write(mem_off, &data).map_err(|_| Error::OutOfRange)?;
                }
                Ok(())
            }
            _ => Err(Error::NodeNotResponding),
        }
    }))
}

/// Start a transfer of `len` bytes between `mem` at `mem_off` and connection `conn` of the
/// peer at `offset`: open the range there, post the writes or reads; the returned wait
/// takes their completions and closes the range.
#[allow(clippy::too_many_arguments)]
pub(super) fn start(
    ofi: &Arc<Fabric>,
    link: &Arc<OfiLink>,
    conn: u64,
    offset: u64,
    mem: &Arc<Mapping>,
    mem_off: usize,
    len: usize,
    write: bool,
) -> Result<Pending, Error> {
    if len == 0 {
        return Ok(Box::new(|| Ok(())));
    }
    if mem_off.checked_add(len).is_none_or(|e| e > mem.len()) {
        return Err(Error::OutOfRange);
    }
    let to = *link.dest.lock().unwrap_or_else(|p| p.into_inner());
    let Some(conn_to @ (dest, _)) = to else {
        return Err(Error::NodeNotResponding);
    };
    let tag = link.peer.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    if len <= EAGER {
        return start_eager(ofi, link, tag, conn, offset, mem, mem_off, len, write);
    }
    let local = ofi.region(mem, Access::Local).map_err(|e| Error::Protocol(format!("ofi: {e}")))?;
    let (addr, key) = match ask(ofi, link, tag, Body::RmaOpen { tag, conn, offset, len: len as u64, write }) {
        Some(Body::RmaKey { ok: true, addr, key, .. }) => (addr, key),
        // Refused (outside, no such connection, no access) or no answer: as tcp says it.
        _ => return Err(Error::NodeNotResponding),
    };
    let mut waits = Vec::new();
    let mut done = 0usize;
    let mut failed = false;
    while done < len && !failed {
        let n = (len - done).min(CHUNK);
        // Patience for this piece's room, not for the whole transfer: a long transfer
        // that advances never runs out of it.
        let began = Instant::now();
        // Posted only while the link has room: its control messages never queue behind
        // more than the window (`window.rs`). Should the link's connection change meanwhile
        // (a redial keeps the state `Up`), the key and `dest` are of the old one: the
        // transfer fails as on a lost link.
        let moved = || *link.dest.lock().unwrap_or_else(|p| p.into_inner()) != to;
        let gone = || link.peer.state() != LinkState::Up || began.elapsed() > PATIENCE || moved();
        let Some(gen) = link.window.take(n, gone) else {
            failed = true;
            break;
        };
        if moved() {
            link.window.give(n, gen);
            failed = true;
            break;
        }
        let id = ofi.ep.next_id();
        let rx = ofi.expect(id, conn_to, &link.window, (n, gen));
        let at = Remote { dest, addr: addr + done as u64, key };
        // Posted only while the connection is routed (its address is in the endpoint),
        // waiting for room in a full queue up to the link's patience.
        let posted = ofi.post_routed(conn_to, true, || {
            #[cfg(test)]
            if super::link::tests::RMA_REFUSED.hit(&link.peer.addr) {
                return Err(remora_ofi_sys::Error { code: 5, what: "refused, says the test".into() });
            }
            #[cfg(test)]
            if super::link::tests::RMA_FULL.hit(&link.peer.addr) {
                let what = "queue full, says the test".into();
                return Err(remora_ofi_sys::Error { code: remora_ofi_sys::EAGAIN, what });
            }
            match write {
                true => ofi.ep.write(&local, mem_off + done, n, at, id),
                false => ofi.ep.read(&local, mem_off + done, n, at, id),
            }
        });
        match posted {
            Ok(()) => waits.push(rx),
            Err(e) => {
                // Gone: the link went down meanwhile, which says so itself. Else the link
                // goes down now, as for a message (`send_bytes`): left up, the write's
                // `RmaClose` below would wait a second patience for the same full queue.
                if let Some(why) = e.why() {
                    ofi.broke(conn_to, &format!("an rma piece: {why}"));
                }
                ofi.forget(id);
                failed = true;
            }
        }
        done += n;
    }
    // A write's close goes right behind its writes: its answer says they are in place.
    let closing = match write {
        true => post(ofi, link, tag, Body::RmaClose { tag }),
        false => None,
    };
    let (ofi, link) = (ofi.clone(), link.clone());
    Ok(Box::new(move || {
        let mut ok = !failed;
        for rx in waits {
            let t = Instant::now();
            let got = loop {
                match rx.recv_timeout(Duration::from_millis(50)) {
                    Ok(r) => break r.is_ok(),
                    Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break false,
                    Err(_) if link.peer.state() != LinkState::Up || t.elapsed() > PATIENCE => break false,
                    Err(_) => {}
                }
            };
            ok &= got;
        }
        let closed = match (write, closing) {
            (true, Some(rx)) => matches!(answer(&link, &rx), Some(Body::RmaClosed { .. })),
            (true, None) => false,
            // A read is over once its reads completed: the peer only forgets the tag (as it
            // does when the link goes down, should this message not reach it).
            (false, _) => {
                send(&ofi, &link, Body::RmaClose { tag });
                true
            }
        };
        link.rma_wait.lock().unwrap_or_else(|p| p.into_inner()).remove(&tag);
        match ok && closed {
            true => Ok(()),
            false => Err(Error::NodeNotResponding),
        }
    }))
}
