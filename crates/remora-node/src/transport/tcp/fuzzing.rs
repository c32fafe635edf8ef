//! The `tcp` transport's decoders, driven with bytes by the fuzz targets (`fuzz/`, and the
//! smoke test `tests/fuzz_smoke.rs`): the handshake of both sides, the control flow, bulk
//! headers and a pager flow's server. Each function is the body of one target: it must
//! return for any input, never panic, and touch only the memory it was given.

use super::framing::{discard, read_frame, read_header, FrameReader};
use super::handshake::{accept_handshake, dial_handshake};
use super::pager::serve_frames;
use crate::cluster::{Cluster, NodeAddr};
use crate::transport::{Env, PeerMemory};
use remora_proto::link::{BulkFrame, Flow, LinkMsg, BULK_FRAME, MAX_PAGER_FRAME};
use remora_proto::{decode, encode};
use remora_sys::{AsFd, Mapping, Memfd};
use std::io::{Read, Write};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// This node in the fuzz targets' cluster.
pub const ME: u32 = 4;
/// The other node of the fuzz targets' cluster.
pub const PEER: u32 = 8;
/// The handle a fuzzed pager flow is bound to.
pub const BOUND: u64 = 7;
/// The bytes of the memory a fuzzed pager flow reaches (two pieces of half each).
pub const PAGER_MEMORY: usize = 64 << 10;

/// A stream that reads the fuzz input and keeps (a bounded amount of) what is written.
struct Duplex<'a> {
    input: &'a [u8],
    output: Vec<u8>,
}

impl Read for Duplex<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.input.read(buf)
    }
}

impl Write for Duplex<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let room = (1usize << 20).saturating_sub(self.output.len());
        self.output.extend_from_slice(&buf[..buf.len().min(room)]);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn env() -> Env {
    // A daemon's word with one bit set (what it means is the node's, not the transport's).
    loopback_env(ME, b"fuzzing-secret-0123456789", 1)
}

/// The environment of node `node` of a two-node cluster ([`ME`] and [`PEER`] on loopback)
/// sharing `secret`, saying the feature word `features`: the fuzz targets' and the
/// handshake tests'.
pub(in crate::transport) fn loopback_env(node: u32, secret: &[u8], features: u32) -> Env {
    let addr = |id| NodeAddr {
        id,
        host: "127.0.0.1".into(),
        port: 7400 + id as u16,
        transport: None,
        ofi_port: None,
    };
    Env {
        node,
        runtime_dir: std::path::PathBuf::from("/nonexistent"),
        cluster: Some(Cluster {
            secret: secret.to_vec(),
            nodes: vec![addr(ME), addr(PEER)],
            heartbeat: Duration::from_millis(200),
            force_tcp: true,
            transport: remora_config::cluster::LinkKind::Tcp,
            fallback_tcp: false,
            intr_pair: true,
        }),
        incarnation: 1,
        features,
        peer_features: Default::default(),
        congestion: Default::default(),
    }
}

/// Every control frame a node wrote must decode again (it is the peer's input).
fn frames_written(out: &[u8]) {
    let mut rd = out;
    while !rd.is_empty() {
        read_frame::<LinkMsg>(&mut rd).expect("a node writes frames that decode");
    }
}

/// Target `peer_handshake`: `data` is what the other side sends, to a listening node
/// (`accept_handshake`) and to a dialing node (`dial_handshake`). The nonces are fresh, so
/// no input authenticates; every input ends in an error or a refusal.
pub fn peer_handshake(data: &[u8]) {
    let env = env();
    let mut s = Duplex { input: data, output: Vec::new() };
    assert!(accept_handshake(&mut s, &env, |_| Ok(())).is_err(), "no input knows the listener's nonce");
    frames_written(&s.output);
    let mut s = Duplex { input: data, output: Vec::new() };
    assert!(dial_handshake(&mut s, &env, PEER, Flow::Control).is_err(), "nor the dialer's");
    frames_written(&s.output);
}

/// Target `peer_frames`: `data` is an established control flow (length-prefixed frames),
/// read by the link's reader until it ends or sends a frame that does not decode; every
/// frame that decodes encodes back to the same message.
pub fn peer_frames(data: &[u8]) {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    let rt = RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread().build().expect("a current-thread runtime")
    });
    rt.block_on(async {
        let mut rd = FrameReader::new(data);
        while let Ok((m, n)) = rd.next().await {
            let again = encode(&m).expect("a decoded message encodes");
            assert!(n <= 4 + remora_proto::link::MAX_LINK_FRAME);
            assert_eq!(decode::<LinkMsg>(&again).expect("and decodes"), m);
        }
    });
    // The blocking reader of the handshakes and pager binds reads the same frames.
    let mut rd = data;
    while read_frame::<LinkMsg>(&mut rd).is_ok() {}
}

/// Target `bulk_frames`: `data` is a bulk flow (or the answers a pager reads): headers
/// read and checked as the bulk reader does, each payload skipped; every header that
/// parses is rebuilt identically.
pub fn bulk_frames(data: &[u8]) {
    let mut rd = data;
    let mut scratch = [0u8; 4096];
    while let Some(h) = read_header(&mut rd, PEER, "fuzzed") {
        let wire = BulkFrame::from_header(&h);
        assert_eq!(BulkFrame::parse(zerocopy::IntoBytes::as_bytes(&wire)).expect("rebuilt"), h);
        if discard(&mut rd, h.len, &mut scratch).is_err() {
            break;
        }
    }
    if let Ok(h) = BulkFrame::parse(data) {
        assert_eq!(data.len(), BULK_FRAME);
        assert!(h.len <= remora_proto::link::MAX_BULK_CHUNK as u64);
    }
}

/// The memory a fuzzed pager flow reaches: two mappings of half of [`PAGER_MEMORY`] each,
/// every access checked as a node's `PeerMemory` checks it.
struct TwoPieces([Arc<Mapping>; 2]);

impl PeerMemory for TwoPieces {
    fn resolve(&self, offset: u64, len: u64, _write: bool) -> Option<Vec<(Arc<Mapping>, usize, usize)>> {
        let end = offset.checked_add(len)?;
        if end > PAGER_MEMORY as u64 {
            return None;
        }
        let half = (PAGER_MEMORY / 2) as u64;
        let mut pieces = Vec::new();
        for (i, m) in self.0.iter().enumerate() {
            let (lo, hi) = (i as u64 * half, (i as u64 + 1) * half);
            let (a, b) = (offset.max(lo), end.min(hi));
            if a < b {
                pieces.push((m.clone(), (a - lo) as usize, (b - a) as usize));
            }
        }
        Some(pieces)
    }

    /// Triggers answer every way a node's interrupt target does, chosen by the payload's
    /// length: served, the interrupt removed, its queue full.
    fn trigger(&self, data: &[u8]) -> Result<(), remora_proto::Error> {
        match data.len() % 3 {
            0 => Ok(()),
            1 => Err(remora_proto::Error::NoSuchIntno),
            _ => Err(remora_proto::Error::NoSpace),
        }
    }
}

fn pager_memory() -> std::io::Result<TwoPieces> {
    let half = PAGER_MEMORY / 2;
    let piece = || -> std::io::Result<Arc<Mapping>> {
        let fd = Memfd::create("fuzz-pager", half as u64)?;
        Ok(Arc::new(Mapping::new(fd.as_fd(), 0, half, Default::default())?))
    };
    Ok(TwoPieces([piece()?, piece()?]))
}

/// Target `pager_stream`: `data` is what a process sends on a pager flow bound to
/// [`BOUND`], served by the node's pager loop over [`PAGER_MEMORY`] bytes, read through the
/// reader a map's flow is read with (`gather.rs`); every answer the node writes is a
/// well-formed frame.
pub fn pager_stream(data: &[u8]) {
    thread_local! {
        static MEM: Option<TwoPieces> = pager_memory().ok();
        /// The answers' buffer, kept from input to input (emptied): growing a new one to a
        /// MiB per input took a third of the target's time once inputs grew.
        static OUT: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    MEM.with(|mem| {
        let Some(mem) = mem else { return };
        OUT.with_borrow_mut(|kept| {
            kept.clear();
            let counters = [AtomicU64::new(0), AtomicU64::new(0)];
            let mut out = Duplex { input: &[], output: std::mem::take(kept) };
            serve_frames(PEER, [&counters[0], &counters[1]], data, &mut out, BOUND, mem, false);
            // The answers: headers and, for Data, the payload they announce.
            let mut rd = &out.output[..];
            while rd.len() >= BULK_FRAME {
                let h = BulkFrame::parse(&rd[..BULK_FRAME]).expect("the node writes valid headers");
                assert!(h.len as usize <= MAX_PAGER_FRAME);
                rd = &rd[BULK_FRAME..];
                let n = (h.len as usize).min(rd.len());
                rd = &rd[n..];
            }
            *kept = out.output;
        });
    });
}

/// A stream that keeps a copy of every byte written to it.
struct Tee<S> {
    inner: S,
    wrote: Vec<u8>,
}

impl<S: Read> Read for Tee<S> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.inner.read(buf)
    }
}

impl<S: Write> Write for Tee<S> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.wrote.extend_from_slice(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// A real handshake of `flow` between a dialer and a listener of the fuzz targets'
/// cluster, over a socket pair: (what the dialer sent, what the listener sent).
///
/// # Errors
/// The socket pair cannot be made, or the handshake failed.
pub fn captured_handshake(flow: Flow) -> std::io::Result<(Vec<u8>, Vec<u8>)> {
    let (a, b) = std::os::unix::net::UnixStream::pair()?;
    let mut dialer_env = env();
    dialer_env.node = PEER;
    let dialer = std::thread::spawn(move || {
        let mut s = Tee { inner: a, wrote: Vec::new() };
        dial_handshake(&mut s, &dialer_env, ME, flow).map(|_| s.wrote)
    });
    let mut s = Tee { inner: b, wrote: Vec::new() };
    let accepted = accept_handshake(&mut s, &env(), |_| Ok(()));
    let dialed = dialer.join().map_err(|_| std::io::Error::other("the dialer panicked"))?;
    accepted?;
    Ok((dialed?, s.wrote))
}

/// The answers of a node's pager loop to `frames` (requests of a pager flow bound to
/// [`BOUND`]), over memory holding a pattern: real traffic of both directions.
pub fn captured_pager(frames: &[u8]) -> Vec<u8> {
    let Ok(mem) = pager_memory() else { return Vec::new() };
    for (i, m) in mem.0.iter().enumerate() {
        let fill: Vec<u8> = (0..m.len()).map(|j| (i * 7 + j % 253) as u8).collect();
        let _ = m.write(0, &fill);
    }
    let counters = [AtomicU64::new(0), AtomicU64::new(0)];
    let mut out = Duplex { input: &[], output: Vec::new() };
    serve_frames(PEER, [&counters[0], &counters[1]], frames, &mut out, BOUND, &mem, false);
    out.output
}

#[cfg(test)]
mod tests {
    use super::*;
    use remora_proto::link::{BulkHeader, BulkOp};

    fn frame(op: BulkOp, tag: u64, len: u64, ok: bool) -> Vec<u8> {
        let h = BulkHeader { op, tag, conn: BOUND, offset: 0, len, ok };
        let mut f = zerocopy::IntoBytes::as_bytes(&BulkFrame::from_header(&h)).to_vec();
        f.extend((0..len).map(|i| i as u8));
        f
    }

    #[test]
    fn a_refused_posted_trigger_ends_its_flow_unanswered_and_a_waited_one_is_answered() {
        // The target refuses a 7-byte payload (the interrupt removed): posted, the flow
        // ends, and the page read after it is never served.
        let mut posted = frame(BulkOp::Trigger, 1, 7, false);
        posted.extend(frame(BulkOp::Read, 2, 4096, true));
        assert!(captured_pager(&posted).is_empty(), "nothing travels a plain flow back");
        // Waited for (a data trigger): the refusal is answered with its code, and the flow
        // goes on.
        let mut waited = frame(BulkOp::Trigger, 1, 7, true);
        waited.extend(frame(BulkOp::Read, 2, 4096, true));
        let out = captured_pager(&waited);
        let ack = BulkFrame::parse(&out[..BULK_FRAME]).unwrap();
        assert_eq!((ack.op, ack.tag, ack.ok, ack.offset), (BulkOp::Ack, 1, false, 1));
        let data = BulkFrame::parse(&out[BULK_FRAME..2 * BULK_FRAME]).unwrap();
        assert_eq!((data.op, data.tag, data.ok), (BulkOp::Data, 2, true));
        // A posted trigger served is not answered either.
        let served = frame(BulkOp::Trigger, 3, 0, false);
        assert!(captured_pager(&served).is_empty());
    }
}
