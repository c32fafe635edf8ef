//! The worker's VIPL operations. A world is a reliable-delivery VI on node A (the server,
//! waiting on a discriminator of its own) connected from a VI on node B, each NIC with the
//! worker's memory registered (descriptors, and 64 KiB of data that peers may RDMA-write);
//! sends both ways and RDMA writes with immediate data from B, the completions' status
//! and every byte checked where it lands. A failure the API reports (an error, or a
//! completion with an error status) ends the world; it is made again between another pair
//! of nodes.

use super::ctx::{now_ms, Ctx};
use super::rng::{differing, pattern};
use remora_vipl::layout::{control, status};
use remora_vipl::{
    DataSegment, Descriptor, Error, MemAttributes, MemHandle, NetAddress, Nic, ProtectionTag, UserRegion, Vi,
    ViAttributes, MAX_TRANSFER, RELIABLE_DELIVERY,
};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The limit of a call that waits for the peer.
const WAIT: Duration = Duration::from_secs(5);
/// The limit of a post: a VI whose peer is on another host moves its data and
/// descriptors through the DSM pager, whose answers may take the pager flow's patience
/// (10 s, `remora-client` `dsm/flow.rs`) when the link goes silent under it; a post does
/// not fail at NOT_OPERATIONAL (three heartbeats) yet. Seen once in a 10-minute `--netns`
/// run (a post past 8 s across a pulled cable): a known gap, not a hang.
const POST: Duration = Duration::from_secs(11);
/// The data memory of each side.
const DATA: usize = 64 << 10;
/// The descriptor memory of each side: a receive descriptor at 0, a send one at 512.
const DESC: usize = 4096;
const SEND_DESC: usize = 512;

/// One side's memory, made once: (descriptors, data) (registration makes it shareable in
/// place; a later world registers the same memory again).
fn memory(side: usize) -> (UserRegion, UserRegion) {
    static M: OnceLock<[(UserRegion, UserRegion); 2]> = OnceLock::new();
    M.get_or_init(|| {
        let leak = |len: usize| {
            let v = Box::leak(vec![0u8; len + 4096].into_boxed_slice());
            let start = (4096 - (v.as_ptr() as usize % 4096)) % 4096;
            UserRegion::from_static(&mut v[start..start + len])
        };
        [(leak(DESC), leak(DATA)), (leak(DESC), leak(DATA))]
    })[side]
}

/// One side of a world: its NIC, VI, protection tag and registered memory.
struct Side {
    nic: Nic,
    vi: Vi,
    ptag: ProtectionTag,
    desc: (UserRegion, MemHandle),
    data: (UserRegion, MemHandle),
}

impl Side {
    fn open(cx: &Ctx, node: u32, side: usize) -> Result<Side, (&'static str, String)> {
        let cfg = cx.cfg(node);
        let nic = at("VipOpenNic", cx.call("vipl.open_nic", WAIT, || Nic::open_with_config("remora0", cfg)))?;
        let ptag = nic.create_ptag();
        let (dm, mm) = memory(side);
        let attrs = MemAttributes { ptag, rdma_write: true, rdma_read: false };
        let desc = at("VipRegisterMem", cx.call("vipl.register", WAIT, || nic.register(dm, attrs)))?;
        let data = at("VipRegisterMem", cx.call("vipl.register", WAIT, || nic.register(mm, attrs)))?;
        let va = ViAttributes {
            reliability: RELIABLE_DELIVERY,
            max_transfer: MAX_TRANSFER,
            ptag,
            rdma_write: true,
            rdma_read: false,
        };
        let vi = at("VipCreateVi", cx.call("vipl.create_vi", WAIT, || Vi::create(&nic, va, None, None)))?;
        Ok(Side { nic, vi, ptag, desc: (dm, desc), data: (mm, data) })
    }

    fn seg(&self, off: usize, len: usize) -> DataSegment {
        DataSegment { addr: (self.data.0.addr() + off) as u64, handle: self.data.1, len: len as u32 }
    }

    fn desc_addr(&self, off: usize) -> usize {
        self.desc.0.addr() + off
    }

    /// Disconnect, reap what was flushed, destroy, deregister; errors ignored.
    fn close(self) {
        let _ = self.vi.disconnect();
        while self.vi.recv_done().is_ok() {}
        while self.vi.send_done().is_ok() {}
        let _ = self.vi.destroy();
        let _ = self.nic.deregister(self.desc.0.addr(), self.desc.1);
        let _ = self.nic.deregister(self.data.0.addr(), self.data.1);
        let _ = self.nic.destroy_ptag(self.ptag);
    }
}

/// One VIPL world: the server VI on node A, the client VI on node B, connected.
pub(crate) struct ViplWorld {
    a: Side,
    b: Side,
}

type Step = Result<(), (&'static str, String)>;

fn at<T, E: std::fmt::Debug>(api: &'static str, r: Result<T, E>) -> Result<T, (&'static str, String)> {
    r.map_err(|e| (api, format!("{e:?}")))
}

impl ViplWorld {
    /// Release everything; errors (a dead node) are expected and ignored.
    pub(crate) fn teardown(self) {
        self.b.close();
        self.a.close();
    }
}

fn build(cx: &mut Ctx) -> Result<ViplWorld, (&'static str, String)> {
    let (na, nb) = cx.pair();
    let a = Side::open(cx, na, 0)?;
    let b = match Side::open(cx, nb, 1) {
        Ok(b) => b,
        Err(e) => {
            a.close();
            return Err(e);
        }
    };
    let tag = cx.next_key() & 0xffff_ffff;
    let disc = format!("soak.{}.{}.{tag}", cx.worker, cx.incarnation);
    let addr = NetAddress::new(na, disc.as_bytes());
    let (nic, vi, waddr) = (a.nic.clone(), a.vi.clone(), addr.clone());
    let server = std::thread::spawn(move || nic.connect_wait(&waddr, Some(WAIT)).and_then(|r| r.accept(&vi)));
    let me = NetAddress::new(nb, b"soak-client");
    let t = Instant::now();
    let asked = cx.call("vipl.connect_request", WAIT + WAIT, || loop {
        match b.vi.connect_request(&me, &addr, Some(WAIT)) {
            Err(Error::NoMatch) if t.elapsed() < WAIT && !server.is_finished() => {
                std::thread::sleep(Duration::from_millis(2))
            }
            other => break other,
        }
    });
    let accepted = cx.call("vipl.connect_wait", WAIT + WAIT, || server.join());
    let w = ViplWorld { a, b };
    match (asked, accepted) {
        (Ok(_), Ok(Ok(()))) => Ok(w),
        (Err(e), _) => {
            w.teardown();
            Err(("VipConnectRequest", format!("{e:?}")))
        }
        (_, Ok(Err(e))) => {
            w.teardown();
            Err(("VipConnectAccept", format!("{e:?}")))
        }
        (_, Err(_)) => {
            w.teardown();
            Err(("VipConnectWait", "Panicked".into()))
        }
    }
}

fn check(cx: &mut Ctx, op: &str, from: u64, got: &[u8], want: &[u8], off: usize) {
    let bad = differing(got, want);
    if bad > 0 {
        let first = got.iter().zip(want).position(|(a, b)| a != b).unwrap_or(0);
        cx.corrupt(op, from, bad, format!("offset={off} len={} first_bad_at={first}", want.len()));
    }
}

/// A completed descriptor's status must be DONE with no error bit.
fn done(side: &Side, desc: usize, api: &'static str) -> Result<Descriptor, (&'static str, String)> {
    let d = at(api, side.nic.read_descriptor(side.desc_addr(desc), side.desc.1))?;
    if d.status & (status::DONE | status::ERROR_MASK) != status::DONE {
        return Err((api, format!("Status{:#x}", d.status)));
    }
    Ok(d)
}

/// Post a receive of `len` bytes at `off` of `rx`'s data (`len` 0: none, for an RDMA
/// write's immediate data).
fn post_recv(cx: &Ctx, rx: &Side, off: usize, len: usize) -> Step {
    let segments = if len > 0 { vec![rx.seg(off, len)] } else { vec![] };
    let d = Descriptor { length: len as u32, segments, ..Default::default() };
    at("VipPostRecv", rx.nic.write_descriptor(rx.desc_addr(0), rx.desc.1, &d))?;
    at("VipPostRecv", cx.call("vipl.post_recv", POST, || rx.vi.post_recv(rx.desc_addr(0), rx.desc.1)))
}

/// A send of a pattern from `tx` to `rx`, with immediate data: both completions DONE, the
/// length, the immediate and every byte right where it landed.
fn send(cx: &mut Ctx, tx: &Side, rx: &Side, op: &'static str) -> Step {
    let len = cx.rng.urange(1, 16 << 10);
    let (soff, roff) = (cx.rng.urange(0, DATA - len), cx.rng.urange(0, DATA - len));
    let key = cx.next_key();
    let data = pattern(key, 0, len);
    let from = now_ms();
    post_recv(cx, rx, roff, len)?;
    at("data.write", tx.data.0.write(soff, &data))?;
    let d = Descriptor {
        control: control::IMMEDIATE,
        immediate: key as u32,
        length: len as u32,
        segments: vec![tx.seg(soff, len)],
        ..Default::default()
    };
    at("VipPostSend", tx.nic.write_descriptor(tx.desc_addr(SEND_DESC), tx.desc.1, &d))?;
    at(
        "VipPostSend",
        cx.call("vipl.post_send", POST, || tx.vi.post_send(tx.desc_addr(SEND_DESC), tx.desc.1)),
    )?;
    at("VipSendWait", cx.call("vipl.send_wait", WAIT, || tx.vi.send_wait(Some(WAIT))))?;
    done(tx, SEND_DESC, "VipSendWait")?;
    at("VipRecvWait", cx.call("vipl.recv_wait", WAIT, || rx.vi.recv_wait(Some(WAIT))))?;
    let r = done(rx, 0, "VipRecvWait")?;
    if r.length != len as u32 || r.immediate != key as u32 {
        cx.corrupt(op, from, len, format!("length {} of {len}, immediate {:#x}", r.length, r.immediate));
    }
    let mut got = vec![0u8; len];
    at("data.read", rx.data.0.read(roff, &mut got))?;
    check(cx, op, from, &got, &data, roff);
    cx.count(op);
    Ok(())
}

/// An RDMA write with immediate data from B into A's data: B's completion DONE, A's
/// receive DONE with the immediate, and the bytes in A's memory.
fn rdma_write(cx: &mut Ctx, w: &ViplWorld) -> Step {
    let (a, b) = (&w.a, &w.b);
    let len = cx.rng.urange(1, 16 << 10);
    let (soff, roff) = (cx.rng.urange(0, DATA - len), cx.rng.urange(0, DATA - len));
    let key = cx.next_key();
    let data = pattern(key, 0, len);
    let from = now_ms();
    post_recv(cx, a, 0, 0)?;
    at("data.write", b.data.0.write(soff, &data))?;
    let target = DataSegment { addr: (a.data.0.addr() + roff) as u64, handle: a.data.1, len: 0 };
    let d = Descriptor {
        control: control::OP_RDMAWRITE | control::IMMEDIATE,
        immediate: key as u32,
        length: len as u32,
        segments: vec![target, b.seg(soff, len)],
        ..Default::default()
    };
    at("VipPostSend", b.nic.write_descriptor(b.desc_addr(SEND_DESC), b.desc.1, &d))?;
    at("VipPostSend", cx.call("vipl.post_send", POST, || b.vi.post_send(b.desc_addr(SEND_DESC), b.desc.1)))?;
    at("VipSendWait", cx.call("vipl.send_wait", WAIT, || b.vi.send_wait(Some(WAIT))))?;
    done(b, SEND_DESC, "VipSendWait")?;
    at("VipRecvWait", cx.call("vipl.recv_wait", WAIT, || a.vi.recv_wait(Some(WAIT))))?;
    let r = done(a, 0, "VipRecvWait")?;
    if r.immediate != key as u32 {
        cx.corrupt("vipl.rdma_write", from, 4, format!("immediate {:#x}", r.immediate));
    }
    let mut got = vec![0u8; len];
    at("data.read", a.data.0.read(roff, &mut got))?;
    check(cx, "vipl.rdma_write", from, &got, &data, roff);
    cx.count("vipl.rdma_write");
    Ok(())
}

/// One VIPL operation: (re)make the world when there is none (now and then anyway), then
/// one random operation on it.
pub(crate) fn step(cx: &mut Ctx, world: &mut Option<ViplWorld>) {
    if world.is_some() && cx.rng.chance(3) {
        if let Some(w) = world.take() {
            cx.call("vipl.teardown", Duration::from_secs(10), || w.teardown());
            cx.count("vipl.remake");
        }
    }
    if world.is_none() {
        match build(cx) {
            Ok(w) => {
                *world = Some(w);
                cx.count("vipl.build");
            }
            Err((api, e)) => {
                cx.failed(api, &e);
                std::thread::sleep(Duration::from_millis(50));
                return;
            }
        }
    }
    let Some(w) = world.as_ref() else { return };
    let r = match cx.rng.range(0, 3) {
        0 => send(cx, &w.b, &w.a, "vipl.send_b_to_a"),
        1 => send(cx, &w.a, &w.b, "vipl.send_a_to_b"),
        _ => rdma_write(cx, w),
    };
    if let Err((api, e)) = r {
        cx.failed(api, &e);
        if let Some(w) = world.take() {
            cx.call("vipl.teardown", Duration::from_secs(10), || w.teardown());
        }
    }
}
