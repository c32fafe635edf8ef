//! The worker's SISCI operations. A world is a segment on node A (mapped by its owner),
//! connected and mapped from node B with a sequence, a DMA queue and a segment of B's for
//! the local side of DMA, and an interrupt and a data interrupt of A's connected from B.
//! Every call that can block runs under the watchdog; a failure the API reports ends the
//! world (it is made again, between another pair of nodes); bytes are checked only when
//! every call of the operation said it succeeded.

use super::ctx::{now_ms, Ctx};
use super::rng::{differing, pattern};
use remora_sisci::{
    CreateFlags, DataInterrupt, Descriptor, DmaFlags, DmaQueue, DmaState, Interrupt, LocalSegment, Map,
    MapFlags, RemoteDataInterrupt, RemoteInterrupt, RemoteSegment, Sequence, SequenceStatus, Sisci,
};
use std::time::Duration;

/// The limit of a call that waits for a node (connects, DMA and interrupt waits).
const WAIT: Duration = Duration::from_secs(5);
/// The limit of any other call.
const CALL: Duration = Duration::from_secs(5);

/// One SISCI world between nodes `a` (the segment's owner) and `b`.
pub(crate) struct SisciWorld {
    rd: RemoteDataInterrupt,
    rintr: RemoteInterrupt,
    dintr: DataInterrupt,
    intr: Interrupt,
    q: DmaQueue,
    seq: Sequence,
    rmap: Map,
    remote: RemoteSegment,
    bmap: Map,
    buf: LocalSegment,
    lmap: Map,
    seg: LocalSegment,
    da: Descriptor,
    db: Descriptor,
    size: usize,
}

/// A failed call: the API's name and its error.
type Step = Result<(), (&'static str, String)>;

fn at<T, E: std::fmt::Debug>(api: &'static str, r: Result<T, E>) -> Result<T, (&'static str, String)> {
    r.map_err(|e| (api, format!("{e:?}")))
}

impl SisciWorld {
    /// Release everything, children first; errors (a dead node) are expected and ignored.
    pub(crate) fn teardown(self) {
        let _ = self.rd.disconnect();
        let _ = self.rintr.disconnect();
        let _ = self.dintr.remove();
        let _ = self.intr.remove();
        let _ = self.q.remove();
        let _ = self.seq.remove();
        let _ = self.rmap.unmap();
        let _ = self.remote.disconnect();
        let _ = self.bmap.unmap();
        let _ = self.buf.remove();
        let _ = self.lmap.unmap();
        let _ = self.seg.remove();
        let _ = self.da.close();
        let _ = self.db.close();
    }
}

fn segment(
    cx: &Ctx,
    d: &Descriptor,
    id: u32,
    size: usize,
) -> Result<(LocalSegment, Map), (&'static str, String)> {
    let seg = at(
        "SCICreateSegment",
        cx.call("sisci.create", CALL, || LocalSegment::create(d, Some(id), size, CreateFlags::default())),
    )?;
    at("SCIPrepareSegment", cx.call("sisci.prepare", CALL, || seg.prepare(0)))?;
    at("SCISetSegmentAvailable", cx.call("sisci.available", CALL, || seg.set_available(0)))?;
    let map = at(
        "SCIMapLocalSegment",
        cx.call("sisci.map_local", CALL, || seg.map(0, size, None, MapFlags::default())),
    )?;
    Ok((seg, map))
}

fn build(cx: &mut Ctx) -> Result<SisciWorld, (&'static str, String)> {
    let (a, b) = cx.pair();
    let size = [16 << 10, 64 << 10, 256 << 10][cx.rng.urange(0, 3)];
    let id = 0x4000_0000
        | (cx.worker & 0x3ff) << 20
        | (cx.incarnation & 0xff) << 12
        | (cx.rng.next() as u32 & 0xfff);
    let (ca, cb) = (cx.cfg(a), cx.cfg(b));
    let da = at("SCIOpen", cx.call("sisci.open", WAIT, || Descriptor::open(&Sisci::with_config(ca))))?;
    let db = at("SCIOpen", cx.call("sisci.open", WAIT, || Descriptor::open(&Sisci::with_config(cb))))?;
    let (seg, lmap) = segment(cx, &da, id, size)?;
    let (buf, bmap) = segment(cx, &db, id, size)?;
    let remote = at(
        "SCIConnectSegment",
        cx.call("sisci.connect", WAIT, || RemoteSegment::connect(&db, a, id, 0, Some(WAIT))),
    )?;
    let rmap = at(
        "SCIMapRemoteSegment",
        cx.call("sisci.map_remote", WAIT, || remote.map(0, size, None, MapFlags::default())),
    )?;
    let seq = at("SCICreateMapSequence", cx.call("sisci.sequence", CALL, || rmap.create_sequence()))?;
    let q = at("SCICreateDMAQueue", cx.call("sisci.dma_queue", CALL, || DmaQueue::create(&db, 0, 16)))?;
    let intr = at(
        "SCICreateInterrupt",
        cx.call("sisci.interrupt", CALL, || Interrupt::create(&da, 0, None, false, None)),
    )?;
    let dintr = at(
        "SCICreateDataInterrupt",
        cx.call("sisci.data_interrupt", CALL, || DataInterrupt::create(&da, 0, None, None)),
    )?;
    let (n, dn) = (intr.number(), dintr.number());
    let rintr = at(
        "SCIConnectInterrupt",
        cx.call("sisci.connect_interrupt", WAIT, || RemoteInterrupt::connect(&db, a, 0, n, Some(WAIT))),
    )?;
    let rd = at(
        "SCIConnectDataInterrupt",
        cx.call("sisci.connect_data_interrupt", WAIT, || {
            RemoteDataInterrupt::connect(&db, a, 0, dn, Some(WAIT))
        }),
    )?;
    Ok(SisciWorld { rd, rintr, dintr, intr, q, seq, rmap, remote, bmap, buf, lmap, seg, da, db, size })
}

/// A random range of the world's segment: up to 8 KiB.
fn range(cx: &mut Ctx, size: usize) -> (usize, usize) {
    let off = cx.rng.urange(0, size - 1);
    let len = cx.rng.urange(1, (size - off).min(8192) + 1);
    (off, len)
}

/// Compare what was read with what was written; a difference is corruption.
fn check(cx: &mut Ctx, op: &str, from: u64, got: &[u8], want: &[u8], off: usize) {
    let bad = differing(got, want);
    if bad > 0 {
        let first = got.iter().zip(want).position(|(a, b)| a != b).unwrap_or(0);
        cx.corrupt(op, from, bad, format!("offset={off} len={} first_bad_at={first}", want.len()));
    }
}

/// A sequence status other than `Ok`: the API reported an outage; the world is made again.
fn status(api: &'static str, st: SequenceStatus) -> Step {
    if st == SequenceStatus::Ok {
        Ok(())
    } else {
        Err((api, format!("{st:?}")))
    }
}

/// Store through B's map of A's segment inside a sequence; when the check says `Ok`, A's
/// own map and B's map must both hold the bytes.
fn pio_store(cx: &mut Ctx, w: &SisciWorld) -> Step {
    let (off, len) = range(cx, w.size);
    let data = pattern(cx.next_key(), off, len);
    let from = now_ms();
    status(
        "SCIStartSequence",
        at("SCIStartSequence", cx.call("sisci.start_sequence", CALL, || w.seq.start()))?,
    )?;
    at("SCIMemCpy", cx.call("sisci.store", CALL, || w.rmap.write(off, &data)))?;
    status(
        "SCICheckSequence",
        at("SCICheckSequence", cx.call("sisci.check_sequence", CALL, || w.seq.check(false, false)))?,
    )?;
    let mut got = vec![0u8; len];
    at("map.read", w.lmap.read(off, &mut got))?;
    check(cx, "sisci.store", from, &got, &data, off);
    at("SCIMemCpy", cx.call("sisci.load", CALL, || w.rmap.read(off, &mut got)))?;
    check(cx, "sisci.store.readback", from, &got, &data, off);
    cx.count("sisci.store");
    Ok(())
}

/// A's owner writes its segment; B reads it through its map inside a sequence.
fn pio_load(cx: &mut Ctx, w: &SisciWorld) -> Step {
    let (off, len) = range(cx, w.size);
    let data = pattern(cx.next_key(), off, len);
    let from = now_ms();
    at("map.write", w.lmap.write(off, &data))?;
    status(
        "SCIStartSequence",
        at("SCIStartSequence", cx.call("sisci.start_sequence", CALL, || w.seq.start()))?,
    )?;
    let mut got = vec![0u8; len];
    at("SCIMemCpy", cx.call("sisci.load", CALL, || w.rmap.read(off, &mut got)))?;
    status(
        "SCICheckSequence",
        at("SCICheckSequence", cx.call("sisci.check_sequence", CALL, || w.seq.check(false, false)))?,
    )?;
    check(cx, "sisci.load", from, &got, &data, off);
    cx.count("sisci.load");
    Ok(())
}

/// DMA of a random range between B's segment and A's, either way, checked at the target.
fn dma(cx: &mut Ctx, w: &SisciWorld, read: bool) -> Step {
    let (roff, len) = range(cx, w.size);
    let loff = cx.rng.urange(0, w.size - len + 1);
    let data = pattern(cx.next_key(), roff, len);
    let from = now_ms();
    if read {
        at("map.write", w.lmap.write(roff, &data))?;
    } else {
        at("map.write", w.bmap.write(loff, &data))?;
    }
    let flags = DmaFlags { read, wait: false };
    at(
        "SCIStartDmaTransfer",
        cx.call("sisci.dma_start", CALL, || w.q.start(&w.buf, &w.remote, loff, len, roff, flags, None)),
    )?;
    let st = at("SCIWaitForDMAQueue", cx.call("sisci.dma_wait", WAIT, || w.q.wait(Some(WAIT))))?;
    if st != DmaState::Done {
        return Err(("SCIWaitForDMAQueue", format!("{st:?}")));
    }
    let mut got = vec![0u8; len];
    if read {
        at("map.read", w.bmap.read(loff, &mut got))?;
    } else {
        at("map.read", w.lmap.read(roff, &mut got))?;
    }
    let op = if read { "sisci.dma_read" } else { "sisci.dma_write" };
    check(cx, op, from, &got, &data, roff);
    cx.count(op);
    Ok(())
}

/// B triggers A's interrupt and data interrupt; each must arrive (the payload intact).
fn interrupts(cx: &mut Ctx, w: &SisciWorld) -> Step {
    let from = now_ms();
    at("SCITriggerInterrupt", cx.call("sisci.trigger", CALL, || w.rintr.trigger()))?;
    match cx.call("sisci.wait_interrupt", WAIT, || w.intr.wait(Some(WAIT))) {
        Ok(()) => cx.count("sisci.interrupt"),
        Err(remora_sisci::Error::Timeout) => {
            cx.lost("sisci.interrupt", from, format!("number={}", w.intr.number()))
        }
        Err(e) => return Err(("SCIWaitForInterrupt", format!("{e:?}"))),
    }
    let len = cx.rng.urange(1, 65);
    let payload = pattern(cx.next_key(), 0, len);
    let from = now_ms();
    at("SCITriggerDataInterrupt", cx.call("sisci.trigger_data", CALL, || w.rd.trigger(&payload)))?;
    let mut buf = [0u8; 128];
    match cx.call("sisci.wait_data_interrupt", WAIT, || w.dintr.wait(&mut buf, Some(WAIT))) {
        Ok(n) => {
            check(cx, "sisci.data_interrupt", from, &buf[..n], &payload, 0);
            cx.count("sisci.data_interrupt");
        }
        Err(remora_sisci::Error::Timeout) => {
            cx.lost("sisci.data_interrupt", from, format!("number={}", w.dintr.number()))
        }
        Err(e) => return Err(("SCIWaitForDataInterrupt", format!("{e:?}"))),
    }
    Ok(())
}

/// One SISCI operation: (re)make the world when there is none (now and then anyway, to
/// exercise set-up and release), then one random operation on it.
pub(crate) fn step(cx: &mut Ctx, world: &mut Option<SisciWorld>) {
    if world.is_some() && cx.rng.chance(3) {
        if let Some(w) = world.take() {
            cx.call("sisci.teardown", Duration::from_secs(10), || w.teardown());
            cx.count("sisci.remake");
        }
    }
    if world.is_none() {
        match build(cx) {
            Ok(w) => {
                *world = Some(w);
                cx.count("sisci.build");
            }
            Err((api, e)) => {
                cx.failed(api, &e);
                std::thread::sleep(Duration::from_millis(50));
                return;
            }
        }
    }
    let Some(w) = world.as_ref() else { return };
    let r = match cx.rng.range(0, 5) {
        0 => pio_store(cx, w),
        1 => pio_load(cx, w),
        2 => dma(cx, w, false),
        3 => dma(cx, w, true),
        _ => interrupts(cx, w),
    };
    if let Err((api, e)) = r {
        cx.failed(api, &e);
        if let Some(w) = world.take() {
            cx.call("sisci.teardown", Duration::from_secs(10), || w.teardown());
        }
    }
}
